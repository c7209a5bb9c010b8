"""Bad files found by a break-it pass: none may crash a run or lose records silently."""
from __future__ import annotations

import gzip
import json
import zlib

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that

from fair_forge_beam.io.read import ReadInteractions
from fair_forge_beam.beam_pipeline import pipeline_options


def _session(sid, n=2, aid="a", **extra):
    conv = [{"qa_id": f"q{i}", "query": "hi", "assistant": "I am happy to help, thanks!"} for i in range(n)]
    return {"session_id": sid, "assistant_id": aid, "language": "english", "context": "", "conversation": conv, **extra}


def _lines(sessions):
    return "".join(json.dumps(s) + "\n" for s in sessions).encode()


_SINK: dict = {}  # module global: FnApiRunner runs in this process, so the DoFn fills it


def _store(xs, name):
    _SINK[name] = list(xs)


def _read(pattern):
    """Run ReadInteractions on one pattern; return (interactions, dead letters, warnings) as lists."""
    _SINK.clear()
    with beam.Pipeline(options=pipeline_options([])) as p:
        r = p | ReadInteractions(pattern)
        for name in ("interactions", "dead_letter", "quality"):
            r[name] | f"collect_{name}" >> beam.combiners.ToList() | f"store_{name}" >> beam.Map(_store, name)
    return _SINK["interactions"], _SINK["dead_letter"], _SINK["quality"]


def test_truncated_gzip_is_a_dead_letter_not_a_silent_partial_read(tmp_path):
    data = _lines([_session(f"s{i}") for i in range(100)])
    comp = zlib.compressobj(6, zlib.DEFLATED, 31)  # gzip container
    half = comp.compress(data[: len(data) // 2]) + comp.flush(zlib.Z_FULL_FLUSH)
    (tmp_path / "t.jsonl.gz").write_bytes(half)  # cut at a flush point: no CRC, no end marker
    inter, dead, _ = _read(str(tmp_path / "t.jsonl.gz"))
    assert 0 < len(inter) < 200
    assert len(dead) == 1 and "cannot read compressed file" in dead[0].reason and "t.jsonl.gz" in dead[0].reason


@pytest.mark.parametrize("name,payload", [("corrupt.jsonl.gz", b"\x1f\x8b\x08\x00garbage-not-deflate"), ("plain.jsonl.gz", b"not gzip at all\n")])
def test_corrupt_compressed_file_is_a_dead_letter(tmp_path, name, payload):
    (tmp_path / name).write_bytes(payload)
    inter, dead, _ = _read(str(tmp_path / name))
    assert inter == [] and len(dead) == 1 and name in dead[0].reason


def test_not_a_parquet_file_is_a_dead_letter(tmp_path):
    (tmp_path / "x.parquet").write_bytes(b"PAR1 this is not parquet")
    inter, dead, _ = _read(str(tmp_path / "x.parquet"))
    assert inter == [] and len(dead) == 1 and "Parquet" in dead[0].reason and "x.parquet" in dead[0].reason


def test_utf8_bom_is_accepted_and_invalid_utf8_is_rejected_with_its_reason(tmp_path):
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + json.dumps([_session("s1")]).encode())
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + _lines([_session("s2"), _session("s3")]))
    (tmp_path / "latin1.jsonl").write_bytes(json.dumps(_session("s4")).replace("happy", "caf\u00e9").encode("latin-1") + b"\n")
    inter, dead, _ = _read([str(tmp_path / "*.json"), str(tmp_path / "*.jsonl")])
    assert sorted({i.session_id for i in inter}) == ["s1", "s2", "s3"]
    assert len(dead) == 1 and "UTF-8" in dead[0].reason and dead[0].source.endswith("latin1.jsonl:0")


def test_ids_with_slashes_get_distinct_element_ids(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps([_session("a/b", aid="c"), _session("a", aid="b/c")]))
    inter, dead, _ = _read(str(tmp_path / "s.json"))
    assert dead == [] and len({i.element_id for i in inter}) == 4
    assert {i.element_id for i in inter} >= {"a%2Fb/c/0", "a/b%2Fc/0"}


def test_weights_must_be_numbers_and_duplicate_turn_indices_are_reported(tmp_path):
    bad = [_session("w1"), _session("w2")]
    bad[0]["conversation"][0]["weight"] = True
    bad[1]["conversation"][0]["weight"] = "0.5"
    sb = [{"metadata": {"session_id": "t", "assistant_id": "a"}, "batch": {"qa_id": f"q{i}", "query": "q", "assistant": "x"}, "turn_index": 0} for i in range(2)]
    (tmp_path / "w.json").write_text(json.dumps(bad))
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(x) + "\n" for x in sb))
    inter, dead, quality = _read([str(tmp_path / "*.json"), str(tmp_path / "*.jsonl")])
    assert sorted(d.reason for d in dead) == [
        "conversation[0]: weight: Value error, weight must be a number, got bool True",
        "conversation[0]: weight: Value error, weight must be a number, got str '0.5'",
    ]
    # w1 and w2 keep one of their two interactions: each says so (issue 28, earlier notes)
    assert sorted(q.kind for q in quality) == ["duplicate_turn_index", "session_kept_in_part", "session_kept_in_part"]
    assert sorted(i.turn_index for i in inter if i.session_id == "t") == [0, 1]


@pytest.mark.slow
def test_main_job_groups_reasons_deterministically_and_rejects_unknown_flags(tmp_path):
    from pipelines.audit import run

    lines = [json.dumps(_session(f"s{i}")) for i in range(5)] + ["{bad json %d" % i for i in range(30)]
    f = tmp_path / "in.jsonl"
    f.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    (out / "_parts").mkdir(parents=True)
    (out / "_parts" / "count-00000-of-00001.json").write_text('{"interactions_read": 1000}\n')  # stale
    doc = run(["--input", str(f), "--output", str(out), "--quiet"])
    s = doc["summary"]
    assert s["interactions_read"] == 10 and s["rejected_at_read"] == 30
    assert sum(s["rejected_at_read_reasons"].values()) == 30 and len(s["rejected_at_read_reasons"]) == 1
    with pytest.raises(SystemExit) as e:
        run(["--inputs", str(f), "--output", str(out)])
    assert e.value.code == 2
