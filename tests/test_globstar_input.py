"""A ``**/`` in an input pattern matches zero or more folders, as bash's globstar, Python's
``glob(recursive=True)`` and docs/data.md's ``--input 'data/**/*.jsonl'`` say (trial49 B2: Beam's
``**`` needs at least one folder there, so the files directly in ``deep/`` were left out without a
word: 1,812 of 2,042 interactions read). Files at depth 0, 1 and 2, local and remote, each read once."""
from __future__ import annotations

import glob
import json
from pathlib import Path

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from fair_forge_beam.io.read import ReadInteractions, distinct_inputs, match_files, unmatched_patterns
from fair_forge_beam.testing.object_store import MemoryObjectStore
from helpers import fnapi_pipeline

FOLDERS = ("", "a/", "a/b/")  # depth 0, 1, 2 below deep/


def record(name: str) -> dict:
    return {"session_id": name, "assistant_id": "bot", "qa_id": "q", "query": "q?", "assistant": "a."}


def write_tree(root: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    for folder in FOLDERS:
        d = root / "deep" / folder
        d.mkdir(parents=True, exist_ok=True)
        tag = folder.strip("/").replace("/", "-") or "top"
        (d / "f.jsonl").write_text(json.dumps(record(f"jsonl-{tag}")) + "\n", encoding="utf-8")
        (d / "f.json").write_text(json.dumps([record(f"json-{tag}")]), encoding="utf-8")
        pq.write_table(pa.Table.from_pylist([record(f"parquet-{tag}")]), d / "f.parquet")


def test_a_globstar_matches_files_at_every_depth_as_python_glob_does(tmp_path):
    write_tree(tmp_path)
    for ext in ("jsonl", "json", "parquet"):
        pattern = f"{tmp_path}/deep/**/*.{ext}"
        expected = sorted(glob.glob(pattern, recursive=True))
        assert len(expected) == 3
        assert sorted(m.path for m in match_files(pattern)) == expected
        assert [len(new) for _, _, new in distinct_inputs([pattern]).patterns] == [3]
        # two globstars reaching the same files: each once
        assert sorted(m.path for m in match_files(f"{tmp_path}/deep/**/**/*.{ext}")) == expected
    only_top = tmp_path / "top"
    only_top.mkdir()
    (only_top / "x.jsonl").write_text(json.dumps(record("x")) + "\n", encoding="utf-8")
    assert unmatched_patterns([f"{only_top}/**/*.jsonl", f"{only_top}/**/*.json"]) == [f"{only_top}/**/*.json"]


def test_a_remote_globstar_matches_files_at_every_depth():
    MemoryObjectStore.clear()
    try:
        for folder in FOLDERS:
            MemoryObjectStore.put(f"memstore://bucket/deep/{folder}f.jsonl", b'{"x": 1}\n')
        found = sorted(m.path for m in match_files("memstore://bucket/deep/**/*.jsonl"))
        assert found == sorted(f"memstore://bucket/deep/{folder}f.jsonl" for folder in FOLDERS)
    finally:
        MemoryObjectStore.clear()


def test_reading_a_globstar_pattern_reads_every_depth_once(tmp_path):
    write_tree(tmp_path)
    tags = ("top", "a", "a-b")
    with fnapi_pipeline() as p:
        for ext in ("jsonl", "json", "parquet"):
            for star in ("**/", "**/**/"):
                out = p | f"Read {ext} {star}" >> ReadInteractions(f"{tmp_path}/deep/{star}*.{ext}")
                assert_that(out["interactions"] | f"Sessions {ext} {star}" >> beam.Map(lambda x: x.session_id),
                            equal_to([f"{ext}-{t}" for t in tags]), label=f"Every depth once {ext} {star}")


def test_a_watched_globstar_pattern_sees_every_depth_once(tmp_path):
    """--watch reads a pattern as --input does: the files directly in deep/ too, each file once."""
    from fair_forge_beam.io.stream_sources import WatchJsonl

    write_tree(tmp_path)
    got = tmp_path / "got.txt"
    with fnapi_pipeline("--streaming") as p:
        for star in ("**/", "**/**/"):
            (p | f"Watch {star}" >> WatchJsonl(f"{tmp_path}/deep/{star}*.jsonl", 0.5, 1.5)
             | f"Seen {star}" >> beam.Map(lambda x, s=star: open(got, "a", encoding="utf-8").write(f"{s} {x[0]}\n")))
    seen = sorted(got.read_text(encoding="utf-8").splitlines())
    assert seen == sorted(f"{star} {tmp_path}/deep/{folder}f.jsonl" for star in ("**/", "**/**/") for folder in FOLDERS)
