"""Trial33 T8 and T9.

T8: a file is read once however many ``--input`` patterns reach it: a glob and the file's name, a
symbolic link, a hard link, ``./a`` and ``a`` (before: the same string only; every other way read
the file twice, every count doubled, rc 0). One warning names the file and the patterns.

T9: ids are keys, not content: a ``session_id``, ``assistant_id``, ``language`` or ``qa_id``
longer than ``--max-id-chars`` (1,024 characters) makes its record one dead letter naming the
field, its length and the limit (before: a record of two 10 MB ids cost 2.2 GB of RSS and 344 MB
of outputs, each id copied into every element id, row, slice and statistic).
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from fair_forge_beam.io.read import ReadInteractions, _ParseRecord
from helpers import FNAPI, REPO


def _session(sid: str, n: int = 2, aid: str = "bot", **header) -> dict:
    return {"session_id": sid, "assistant_id": aid, "language": "english", **header,
            "conversation": [{"qa_id": f"{sid}-q{i}", "query": f"question {i}", "assistant": f"Glad to help ({i})."}
                             for i in range(n)]}


def _write(path, sessions) -> str:
    path.write_text("".join(json.dumps(s) + "\n" for s in sessions), encoding="utf-8")
    return str(path)


# ------------------------------------------------------------------ T8: one file, read once
def test_a_file_reached_by_a_glob_a_link_a_hard_link_and_its_name_is_read_once(tmp_path, monkeypatch, caplog):
    a = _write(tmp_path / "a.jsonl", [_session("s1"), _session("s2")])
    b = _write(tmp_path / "b.jsonl", [_session("s3")])
    c = _write(tmp_path / "c[1].jsonl", [_session("s4")])  # a name with glob characters: read as a name
    os.symlink(a, tmp_path / "alink.jsonl")
    os.link(a, tmp_path / "hard.jsonl")
    monkeypatch.chdir(tmp_path)
    patterns = [str(tmp_path / "a.json*"), a, "alink.jsonl", "./hard.jsonl", "./a.jsonl", str(tmp_path / "*.jsonl")]
    expected = sorted(f"s{k}/bot/{i}" for k in (1, 2, 3) for i in range(2)) + ["s4/bot/0", "s4/bot/1"]
    with caplog.at_level(logging.WARNING, logger="fair_forge_beam.io.read"):
        reader = ReadInteractions(patterns)
        with beam.Pipeline(runner=FNAPI) as p:
            out = p | "Read" >> ReadInteractions(patterns)
            assert_that(out["interactions"] | beam.Map(lambda ix: ix.element_id) | beam.combiners.ToList()
                        | beam.Map(sorted), equal_to([sorted(expected)]))
    # the last pattern reads only the files no earlier one reached (b.jsonl and c[1].jsonl, escaped)
    assert [r[0] for r in reader._formats] == [(str(tmp_path / "a.json*"),), (b, c.replace("[", "[[]"))]
    warned = [r.getMessage() for r in caplog.records if "read once" in r.getMessage()]
    assert len(warned) == 1, warned  # one warning, though the reader was built twice
    # ./a.jsonl is a.jsonl's own name: the same pattern, as before (no warning of its own)
    assert warned[0] == (f"input file {a} is matched by 5 --input patterns ('{tmp_path}/a.json*', '{a}', 'alink.jsonl', "
                         f"'./hard.jsonl', '{tmp_path}/*.jsonl'): it is read once, not 5 times")


def test_several_files_reached_twice_are_one_warning(tmp_path):
    from fair_forge_beam.io.read import distinct_inputs

    paths = [_write(tmp_path / f"f{i}.jsonl", [_session(f"s{i}")]) for i in range(5)]
    found = distinct_inputs([str(tmp_path / "*.jsonl"), *paths])
    assert [len(new) for _, _, new in found.patterns] == [5, 0, 0, 0, 0, 0]
    w = found.warning()
    assert w.startswith("5 input files are matched by more than one --input pattern, each is read once: ")
    assert w.endswith("; and 2 more") and w.count(" (by ") == 3


def test_the_manifest_and_the_agentic_reader_list_a_linked_file_once(tmp_path):
    from fair_forge_beam.io.agentic_sources import _expand
    from fair_forge_beam.rollup import input_fingerprints

    a = _write(tmp_path / "a.jsonl", [_session("s1")])
    os.symlink(a, tmp_path / "alink.jsonl")
    both = [a, str(tmp_path / "alink.jsonl"), str(tmp_path / "a*.jsonl")]
    assert [f[0] for f in input_fingerprints(both)] == [a]
    assert _expand(both) == [a]
    assert _expand([a, a]) == [a]  # the same name twice: read twice before


def test_the_audit_counts_a_file_matched_by_a_glob_and_its_name_once(tmp_path):
    from pipelines import audit

    a = _write(tmp_path / "a.jsonl", [_session("s1", 3), _session("s2", 3)])
    doc = audit.run(["--quiet", "--no-report", "--metrics", "humanity", "--input", str(tmp_path / "a.json*"),
                     "--input", a, "--output", str(tmp_path / "out")])
    assert doc["summary"]["interactions_read"] == 6 and doc["summary"]["data_quality_warnings"] == 0
    manifest = json.loads((tmp_path / "out" / "stats" / "manifest.json").read_text())
    assert [f[0] for f in manifest["input_files"]] == [a]


# ------------------------------------------------------------------ T9: ids are bounded
def _parsed(rec, **kw) -> list:
    return [getattr(o, "tag", None) and (o.tag, o.value) or (None, o)
            for o in _ParseRecord(**kw)._dispatch("in.jsonl", 7, json.dumps(rec))]


@pytest.mark.parametrize("field", ["session_id", "assistant_id", "language"])
def test_a_session_header_id_over_the_limit_is_one_dead_letter(field):
    rec = _session("s")
    rec[field] = "x" * 1025
    (tag, dead), = _parsed(rec)
    assert tag == "dead_letter" and dead.source == "in.jsonl:7"
    assert dead.reason == f"session header: {field} of 1,025 characters is over the limit of 1,024 (--max-id-chars)"
    assert len(dead.raw) <= 100_100  # the record as dead letters carry it: cut at their cap


def test_ids_at_the_limit_are_read_and_the_limit_is_an_option():
    rec = _session("s" * 1024, aid="a" * 1024)
    for b in rec["conversation"]:
        b["qa_id"] = b["qa_id"][-1] * 1024
    assert all(tag != "dead_letter" for tag, _ in _parsed(rec))
    (tag, dead), = _parsed(rec, max_id_chars=100)
    assert dead.reason == "session header: session_id of 1,024 characters is over the limit of 100 (--max-id-chars)"
    numeric = {**_session("s"), "session_id": int("9" * 30)}
    (tag, dead), = _parsed(numeric, max_id_chars=20)
    assert dead.reason.startswith("session header: session_id of 30 characters")


def test_a_qa_id_over_the_limit_rejects_its_entry_and_keeps_the_session():
    rec = _session("s", 3)
    rec["conversation"][1]["qa_id"] = "q" * 5000
    outs = _parsed(rec)
    [dead] = [v for t, v in outs if t == "dead_letter"]
    assert dead.reason == "conversation[1]: qa_id of 5,000 characters is over the limit of 1,024 (--max-id-chars)"
    assert dead.element_id == "s/bot/1"
    assert sum(t == "streamed" and len(v[1]) == 5 for t, v in outs) == 2  # the other two turns are read


@pytest.mark.parametrize("rec,reason", [
    ({"session_id": "s", "assistant_id": "b", "qa_id": "q" * 2000, "query": "q", "assistant": "a"},
     "qa_id of 2,000 characters is over the limit of 1,024 (--max-id-chars)"),
    ({"session_id": "s" * 3000, "assistant_id": "b", "qa_id": "q", "query": "q", "assistant": "a"},
     "session_id of 3,000 characters is over the limit of 1,024 (--max-id-chars)"),
    ({"metadata": {"session_id": "s", "assistant_id": "b" * 1500}, "batch": {"qa_id": "q", "query": "q", "assistant": "a"}},
     "metadata.assistant_id of 1,500 characters is over the limit of 1,024 (--max-id-chars)"),
    ({"metadata": {"session_id": "s", "assistant_id": "b"}, "batch": {"qa_id": "q" * 1500, "query": "q", "assistant": "a"}},
     "batch.qa_id of 1,500 characters is over the limit of 1,024 (--max-id-chars)"),
])
def test_a_flat_or_streamed_record_with_a_long_id_is_one_dead_letter(rec, reason):
    (tag, dead), = _parsed(rec)
    assert (tag, dead.reason) == ("dead_letter", reason)


def test_the_audit_dead_letters_a_record_of_long_ids_and_writes_them_nowhere(tmp_path):
    from pipelines import audit

    long_sid, long_aid = "S" * 20_000, "A" * 20_000
    path = _write(tmp_path / "in.jsonl", [_session("s1", 3), _session(long_sid, 3, aid=long_aid), _session("s2", 3)])
    out = tmp_path / "out"
    doc = audit.run(["--quiet", "--no-report", "--metrics", "humanity", "--input", path, "--output", str(out)])
    s = doc["summary"]
    assert s["interactions_read"] == 6 and s["rejected_at_read"] == 1
    assert list(s["rejected_at_read_reasons"]) == [
        "session header: session_id of 20,000 characters is over the limit of 1,024 (--max-id-chars)"]
    total = 0
    for root, _, files in os.walk(out):
        for f in files:
            data = (out / root / f).read_bytes()
            total += len(data)
            if "dead_letter" not in root:
                assert b"S" * 2000 not in data and b"A" * 2000 not in data, f
    assert total < 2_000_000  # before: each id in every output (~1.7 MB for these 40 KB of ids)


def test_max_id_chars_must_be_positive(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pipelines.audit", "--max-id-chars", "0", "--output", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--max-id-chars: must be between 1 and 10,000,000 characters, got 0" in proc.stderr


def test_a_jsonl_file_whose_name_holds_glob_characters_is_read(tmp_path):
    """Beam's FileBasedSource matches its file's name again as a pattern: ``c[1].jsonl`` matched
    nothing and was read as empty (a glob reaching it: exit 4, "no input record")."""
    _write(tmp_path / "c[1].jsonl", [_session("s4")])
    with beam.Pipeline(runner=FNAPI) as p:
        out = p | ReadInteractions(str(tmp_path / "*.jsonl"))
        assert_that(out["interactions"] | beam.Map(lambda ix: ix.element_id), equal_to(["s4/bot/0", "s4/bot/1"]))


def test_optimize_reads_a_file_given_by_two_names_once(tmp_path, monkeypatch, caplog):
    from fair_forge_beam.optimizer import optimizers
    from pipelines import optimize

    data = tmp_path / "d.json"
    data.write_text(json.dumps([_session("s1"), _session("s2")]), encoding="utf-8")
    os.symlink(data, tmp_path / "link.json")
    seen = []

    class Stop(Exception):
        pass

    def run(cls, datasets, *args, **kwargs):
        seen.append(len(datasets))
        raise Stop

    monkeypatch.setattr(optimizers.GEPAOptimizer, "run", classmethod(run))
    with caplog.at_level(logging.WARNING), pytest.raises(Stop):
        optimize.main(["--method", "gepa", "--input", str(data), "--input", str(tmp_path / "link.json"),
                       "--input", str(data), "--model", "m", "--base-url", "http://127.0.0.1:9", "--judge-cache", "none",
                       "--seed-prompt", "S", "--output", str(tmp_path / "out")])
    assert seen == [2]  # before: 6 (the lists joined three times)
    assert [r.getMessage() for r in caplog.records if "read once" in r.getMessage()] == [
        f"input file {data} is matched by 2 --input patterns ('{data}', '{tmp_path / 'link.json'}'): it is read once, "
        "not 2 times"]
