"""The roll-up's copy of a run's reused session rows, written by the reading DoFn during the
pipeline (rollup._write_reused_rows): never written in place, so two attempts at one bundle (a retry,
a runner's backup attempt) cannot interleave their bytes in the staged file."""
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from fair_forge_beam import rollup


def _stored(tmp_path):
    src = tmp_path / "part-0.parquet"
    table = pa.table({"session_id": [f"s{i}" for i in range(10)], "x": list(range(10))})
    pq.write_table(table, src, row_group_size=4)
    stored = pq.ParquetFile(src)
    kept = []
    for batch in stored.iter_batches(batch_size=3):
        mask = pc.greater(batch.column("x"), 2)
        kept.append((batch.filter(mask), mask))
    return stored, kept


def test_reused_rows_are_written_under_a_unique_name_then_renamed(tmp_path, monkeypatch):
    stored, kept = _stored(tmp_path)
    target = str(tmp_path / "stage" / "copy.parquet")
    (tmp_path / "stage").mkdir()
    created = []
    real_create = FileSystems.create
    monkeypatch.setattr(FileSystems, "create", staticmethod(lambda path, *a, **k: (created.append(path), real_create(path, *a, **k))[1]))
    rollup._write_reused_rows(stored, kept, target)
    rollup._write_reused_rows(stored, kept, target)  # a second attempt at the same bundle
    assert len(created) == 2 and target not in created and len(set(created)) == 2
    assert sorted(p.name for p in (tmp_path / "stage").iterdir()) == ["copy.parquet"]  # no partial left
    got = pq.read_table(target)
    assert got.column("x").to_pylist() == list(range(3, 10))
    assert pq.ParquetFile(target).metadata.num_rows == 7
