"""The main job's sharded outputs through one writer (issue 26: README's job at most 5 CPU s).

:class:`~fair_forge_beam.io.write.ShardedOutputs` writes several outputs' shards by one
``fileio.WriteToFiles``: a ``WriteImpl`` per output (``WriteToText``, ``WriteToParquetBatched``) was
about 16 transforms and 4 bundles each. What readers, roll-ups and the manifest rely on stays:

* a shard of the same records or tables has the bytes Beam's own writer gives it (the Parquet
  writer's options are ``WriteToParquetBatched``'s; JSON Lines as ``WriteToText``'s);
* an output with no record gets one empty shard, ``part-00000-of-00001``, with its schema (as a
  ``WriteImpl`` writes for an empty input; an empty JSON Lines file);
* shards are named ``part-SSSSS-of-NNNNN`` and complete; fileio's temporary folder is gone once
  the writer's result is there; a shard the final move failed to put in place is an error, never
  a run with rows left out (fileio's move logs a failed rename and goes on).
"""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fair_forge_beam._beam import beam
from fair_forge_beam.io.write import ShardedOutputs, write_jsonl, write_parquet
from helpers import FNAPI, fnapi_pipeline

SCHEMA = pa.schema([("id", pa.string()), ("n", pa.int64()), ("tags", pa.list_(pa.string())),
                    ("score", pa.struct([("mean", pa.float64()), ("n", pa.int64())]))])
ROWS = [{"id": f"r{i}", "n": i, "tags": [str(i)] * (i % 3), "score": {"mean": i / 7, "n": i}} for i in range(25)]
RECORDS = [{"stage": "read", "reason": f"bad {i}", "raw": "é\u2028x"} for i in range(4)]


def _files(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _beams_writers(out: Path, rows, records) -> dict:
    with fnapi_pipeline() as p:
        write_parquet(p | "Rows" >> beam.Create(rows), "T", str(out / "table" / "part"), SCHEMA, 10)
        write_jsonl(p | "Records" >> beam.Create(records), str(out / "lines" / "part"), "L")
    return _files(out)


def _one_writer(out: Path, rows, records, expected_names) -> dict:
    from apache_beam.testing.util import assert_that, equal_to

    with fnapi_pipeline() as p:
        shards = ShardedOutputs(str(out))
        shards.parquet(p | "Rows" >> beam.Create(rows), "T", "table", SCHEMA, 10)
        shards.jsonl(p | "Records" >> beam.Create(records), "lines", "L")
        assert_that(shards.write(), equal_to(expected_names))  # the writer's result: every shard's path
    return _files(out)


@pytest.mark.parametrize("rows,records", [(ROWS, RECORDS), ([], [])], ids=["records", "empty"])
def test_one_writer_writes_the_bytes_of_beams_writers(tmp_path, rows, records):
    """One shard per output (one bundle each): the same names and bytes as ``WriteToParquetBatched``
    and ``WriteToText`` — for no record too (the empty shard, with the schema)."""
    beams = _beams_writers(tmp_path / "beam", rows, records)
    assert set(beams) == {"table/part-00000-of-00001.parquet", "lines/part-00000-of-00001.jsonl"}
    ours = _one_writer(tmp_path / "ours", rows, records, [str(tmp_path / "ours" / n) for n in beams])
    assert ours == beams  # nothing else in the folder
    assert not list((tmp_path / "ours").glob(".temp*"))  # fileio's temporary folder is gone
    table = pq.read_table(tmp_path / "ours" / "table" / "part-00000-of-00001.parquet")
    assert table.schema == SCHEMA and table.to_pylist() == rows
    lines = (tmp_path / "ours" / "lines" / "part-00000-of-00001.jsonl").read_text(encoding="utf-8").split("\n")[:-1]
    assert [json.loads(line) for line in lines] == records


def test_shards_of_several_bundles_are_named_and_complete(tmp_path):
    """Records of an output in several bundles: shards part-SSSSS-of-NNNNN, complete, all rows."""
    with fnapi_pipeline() as p:
        shards = ShardedOutputs(str(tmp_path))
        parts = tuple(p | f"Rows{i}" >> beam.Create(ROWS[i::3]) for i in range(3))
        shards.parquet(parts, "T", "a/b", SCHEMA, 4)
        shards.write()
    names = sorted(q.name for q in (tmp_path / "a" / "b").iterdir())
    total = len(names)
    assert names == [f"part-{i:05d}-of-{total:05d}.parquet" for i in range(total)]
    rows = [r for n in names for r in pq.read_table(tmp_path / "a" / "b" / n).to_pylist()]
    assert sorted(rows, key=lambda r: r["n"]) == ROWS
    assert not [q for q in tmp_path.iterdir() if q.name.startswith(".")]


def test_an_output_is_written_once():
    shards = ShardedOutputs("/nowhere")
    with fnapi_pipeline() as p:
        pc = p | beam.Create([{"a": 1}])
        shards.jsonl(pc, "x", "A")
        with pytest.raises(ValueError, match="x/ is written twice"):
            shards.jsonl(pc, "x/", "B")


def test_a_shard_the_move_left_out_is_an_error(tmp_path):
    """fileio's final move logs a rename that failed and goes on; the step after it refuses."""
    from apache_beam.io.fileio import FileResult

    from fair_forge_beam.io.write import _complete_outputs, _Outputs

    outputs = _Outputs(str(tmp_path), {"lines": (".jsonl", None)})
    (tmp_path / "lines").mkdir()
    (tmp_path / "lines" / "part-00000-of-00002.jsonl").write_text("{}\n")
    written = [FileResult(f"lines/part-0000{i}-of-00002.jsonl", i, 2, None, None, "lines") for i in range(2)]
    with pytest.raises(OSError, match=r"1 shard\(s\) of lines/ were not moved into place: .*part-00001-of-00002"):
        _complete_outputs(None, outputs, str(tmp_path / ".temp-x"), written)


@pytest.mark.slow
def test_an_empty_run_has_each_output_s_empty_shard_with_its_schema(tmp_path):
    """An audit that read nothing (--allow-empty): every sharded output is one empty shard; a Parquet
    one carries its output's schema."""
    from fair_forge_beam.metrics.registry import interaction_parquet_fields
    from fair_forge_beam.reports.results import SLICE_SCHEMA, session_schema
    from pipelines import audit

    empty = tmp_path / "none.json"
    empty.write_text("[]\n", encoding="utf-8")
    out = tmp_path / "out"
    assert audit.main(["--quiet", "--no-report", "--metrics", "humanity", "--mode", "frequentist", "--allow-empty",
                       "--input", str(empty), "--output", str(out), f"--runner={FNAPI}"]) == 0
    schemas = {"results.parquet": interaction_parquet_fields(["humanity"]), "sessions/humanity": session_schema("humanity"),
               "slices/humanity": SLICE_SCHEMA}
    for folder in ("results.parquet", "sessions/humanity", "slices/humanity", "stats/sessions", "stats/slices",
                   "dead_letter", "data_quality"):
        files = list((out / folder).iterdir())
        ext = "jsonl" if folder in ("dead_letter", "data_quality") else "parquet"
        assert [f.name for f in files] == [f"part-00000-of-00001.{ext}"], folder
        if ext == "jsonl":
            assert files[0].read_bytes() == b""
        else:
            table = pq.read_table(files[0])
            assert table.num_rows == 0 and table.num_columns > 0, folder
            if folder in schemas:
                assert table.schema == schemas[folder], folder
    assert not [p for p in out.rglob(".temp*")]
