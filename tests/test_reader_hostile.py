"""Issue 13 items 6, 7 and 11: no record can crash a run; one session split over two files;
encodings and types at the edge. Every test here failed on main before the fix (main: a
``RecursionError`` / ``UnicodeEncodeError`` ended the pipeline, a UTF-16 file gave a phantom
record, a Parquet timestamp was a dead letter, a split session repeated an element id)."""
from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fair_forge_beam.io.retriever import Retriever
from helpers import FNAPI, REPO, fnapi_pipeline


def _session(sid, n=1, aid="a", **extra):
    return {
        "session_id": sid,
        "assistant_id": aid,
        "language": "english",
        "context": "",
        "conversation": [
            {"qa_id": f"q{t}", "query": f"question {t}", "assistant": "I am happy and I trust you"} for t in range(n)
        ],
        **extra,
    }


DEEP_ARRAY = "[" * 10_000 + "]" * 10_000
DEEP_FIELD = json.dumps(
    {**_session("deep-field"), "conversation": [{"qa_id": "q0", "query": "q", "assistant": "a", "agentic": {"x": json.loads("[" * 600 + "]" * 600)}}]}
)
SURROGATE_LINES = {
    "session_id": '{"session_id":"s\\ud800","assistant_id":"a","conversation":[{"qa_id":"q0","query":"h","assistant":"happy"}]}',
    "qa_id": '{"session_id":"s-qa","assistant_id":"a","conversation":[{"qa_id":"q\\ud800","query":"h","assistant":"happy"}]}',
    "language": '{"session_id":"s-lang","assistant_id":"a","language":"en\\udfff","conversation":[{"qa_id":"q0","query":"h","assistant":"happy"}]}',
    # a record that is rejected for another reason and also holds a surrogate (main: UnicodeEncodeError on write)
    "dead": '{"session_id":"s-dead\\ud800","assistant_id":"a","conversations":[]}',
}


def _run(pipeline_fn):
    """Build and run a pipeline on FnApiRunner; ``pipeline_fn(p)`` attaches the checks."""
    p = fnapi_pipeline()
    pipeline_fn(p)
    p.run().wait_until_finish()


def _read_outputs(pattern, tmp_path, **kw):
    """(interactions, dead letters, quality warnings) of ``ReadInteractions(pattern)``, as lists."""
    from fair_forge_beam._beam import beam
    from fair_forge_beam.io.read import ReadInteractions
    from fair_forge_beam.io.write import read_jsonl_shards, write_jsonl

    out = tmp_path / "out"

    def build(p):
        res = p | ReadInteractions(pattern, **kw)
        write_jsonl(res["interactions"] | "I" >> beam.Map(lambda x: x._asdict()), str(out / "i"), "I")
        write_jsonl(res["dead_letter"], str(out / "d"), "D")
        write_jsonl(res["quality"], str(out / "q"), "Q")

    _run(build)
    return tuple(read_jsonl_shards(str(out / n)) for n in ("i", "d", "q"))


# ============================================================== item 6: hostile records
def test_edge_loads_bounds_nesting_and_rejects_surrogates():
    from fair_forge_beam.io import edge

    with pytest.raises(edge.RecordRejected, match="nested more than 64 levels"):
        edge.loads(DEEP_ARRAY)
    with pytest.raises(edge.RecordRejected, match=r"conversation\.0\.agentic"):
        edge.loads(DEEP_FIELD)
    for field, line in SURROGATE_LINES.items():
        with pytest.raises(edge.RecordRejected, match="lone surrogate U\\+D[8F]"):
            edge.loads(line)
    # a surrogate *pair* is one character, not an error; 64 levels are allowed, 65 are not
    assert edge.loads('{"a": "\\ud83d\\ude00"}') == {"a": "\U0001F600"}
    assert edge.loads("[" * 64 + "]" * 64) is not None
    with pytest.raises(edge.RecordRejected):
        edge.loads("[" * 65 + "]" * 65)


def test_a_records_reason_names_its_first_broken_value_in_the_records_order():
    """trial33 T3: a session whose three answers hold lone surrogates was rejected naming
    ``conversation.2`` (the walk met values last to first); a user who fixed that one met the next."""
    from fair_forge_beam.io import edge

    turns = ", ".join(f'{{"qa_id": "q{i}", "assistant": "a\\udfff{i}", "extra": [1, "\\ud800"]}}' for i in range(3))
    with pytest.raises(edge.RecordRejected, match=r"^conversation\.0\.assistant holds a lone surrogate U\+DFFF"):
        edge.loads(f'{{"session_id": "s", "conversation": [{turns}]}}')
    with pytest.raises(edge.RecordRejected, match=r"^a\.0 holds"):
        edge.loads('{"a": ["\\ud801", "\\ud802"], "b": "\\ud803"}')
    # Parquet rows (convert=True) take the same walk: the first broken value, the others converted alike
    with pytest.raises(edge.RecordRejected, match=r"^x\.1 holds a lone surrogate U\+D801"):
        edge.check_value({"x": [1, "\ud801", ("\ud802",)], "y": "\ud803"}, convert=True)
    assert edge.check_value({"t": (1, (2, 3)), "d": {"k": [4]}}, convert=True) == {"t": [1, [2, 3]], "d": {"k": [4]}}


@pytest.mark.parametrize("piece", [1, 2, 3, 7, 4096])
def test_json_values_cut_a_top_level_array_respecting_strings(piece):
    import io

    from fair_forge_beam.io.edge import json_values

    def cut(text, limit=100):
        return [(v.text, v.problem) for v in json_values(io.BytesIO(text.encode()).read, limit, chunk_bytes=piece)]

    assert cut('[1, {"a": "x,]\\"["}, [[2, 3]] ]') == [(b"1", None), (b'{"a": "x,]\\"["}', None), (b"[[2, 3]]", None)]
    assert cut('["a\\\\", "b"]') == [(b'"a\\\\"', None), (b'"b"', None)]  # an escaped backslash ends no string
    assert cut("[]") == cut(" [ ]\n") == []
    assert cut('{"a": 1}') == [(b'{"a": 1}', None)]  # a file holding one value
    assert cut("[1] [2]") == [(b"1", None), (None, "data after the end of the top-level array, at byte 4")]
    assert cut("[1,,2]")[1][1].startswith("an empty element") and cut("[1,]")[1][1].startswith("an empty element")
    assert cut("[1}")[1] == (None, "'}' closes the top-level array, at byte 2")
    assert cut("") == cut(" \n\t ") == []  # no value, no record: as an empty JSON Lines file (trial33 T5)
    assert cut('[1, "ab')[1][1].startswith("the text ends inside a string of element 1")
    assert cut('["' + "x" * 300 + '", 5]') == [(None, "oversized"), (b"5", None)]  # never held whole


def test_dead_letter_and_json_lines_are_always_utf8():
    from fair_forge_beam.io.elements import DeadLetterCoder, dead_letter
    from fair_forge_beam.io.write import to_json_line

    nested: list = []
    for _ in range(sys.getrecursionlimit() + 100):  # deeper than json.dumps can follow (Beam may raise the limit)
        nested = [nested]
    d = dead_letter("read", "bad \ud800 reason", {"session_id": "s\udc00"}, "e\ud800", "f\ud800")
    line = to_json_line(d)
    line.encode("utf-8")  # main: UnicodeEncodeError
    back = json.loads(line)
    assert back["reason"] == "bad \\ud800 reason" and back["element_id"] == "e\\ud800"
    assert json.loads(back["raw"]) == {"session_id": "s\\udc00"}
    assert dead_letter("read", "deep", nested).raw == "<list nested too deeply to reproduce>"
    # the coder round-trips a surrogate that reached an element (e.g. from a judge reply)
    from fair_forge_beam.io.elements import DeadLetter

    raw = DeadLetter("judge", "r", None, "x\ud800y")
    assert DeadLetterCoder().decode(DeadLetterCoder().encode(raw)) == raw
    assert to_json_line({"reasoning": "x\ud800"}).encode("utf-8")


def test_hostile_jsonl_records_are_dead_letters_and_good_ones_read(tmp_path):
    lines = [json.dumps(_session("g1", 2)), DEEP_FIELD, DEEP_ARRAY, json.dumps(_session("g2"))]
    lines += list(SURROGATE_LINES.values()) + [json.dumps(_session("g3"))]
    f = tmp_path / "hostile.jsonl"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    inter, dead, _ = _read_outputs(str(f), tmp_path)
    assert sorted(x["element_id"] for x in inter) == ["g1/a/0", "g1/a/1", "g2/a/0", "g3/a/0"]
    reasons = sorted(d["reason"].split(" (")[0].split(";")[0] for d in dead)
    assert len(dead) == 6
    assert sum("nested more than 64 levels deep" in d["reason"] for d in dead) == 2
    for field in ("session_id", "conversation.0.qa_id", "language"):
        assert any(d["reason"].startswith(f"{field} holds a lone surrogate") for d in dead), (field, reasons)
    for d in dead:
        json.dumps(d, ensure_ascii=False).encode("utf-8")


def test_a_session_without_conversation_is_told_so(tmp_path):
    """A session record that lost its ``conversation`` (only ``session_id`` / ``assistant_id`` /
    metadata) is no flat interaction either: its reason says what a record must be, not that
    ``batch.qa_id`` / ``batch.query`` are missing (issue 28). A flat interaction that lacks one
    field still gets that field's reason."""
    f = tmp_path / "lost.jsonl"
    flat = {"session_id": "f", "assistant_id": "a", "qa_id": "1", "query": "hi"}  # no 'assistant'
    f.write_text("\n".join(json.dumps(r) for r in (
        {"session_id": "s", "assistant_id": "a", "language": "english"}, flat, _session("g1"))) + "\n",
        encoding="utf-8")
    inter, dead, _ = _read_outputs(str(f), tmp_path)
    assert [x["element_id"] for x in inter] == ["g1/a/0"]
    reasons = sorted(d["reason"] for d in dead)
    assert len(reasons) == 2
    # the field as the user wrote it (a top-level 'assistant'; it said 'batch.assistant', a name the reader made)
    assert reasons[0] == "assistant: is required but missing", reasons
    assert reasons[1].startswith("not a session (needs 'conversation')"), reasons


def test_json_file_with_one_record_too_deep_keeps_the_others(tmp_path):
    f = tmp_path / "deep.json"
    f.write_text("[" + json.dumps(_session("j1")) + "," + DEEP_ARRAY + "," + json.dumps(_session("j2")) + "]", encoding="utf-8")
    inter, dead, _ = _read_outputs(str(f), tmp_path)
    assert sorted(x["element_id"] for x in inter) == ["j1/a/0", "j2/a/0"]
    assert len(dead) == 1 and "nested more than 64 levels" in dead[0]["reason"]
    assert dead[0]["source"] == f"{f}:1"


class HostileRetriever(Retriever):
    """Python objects straight from a user's loader: no JSON text in between."""

    def load_dataset(self):
        deep: list = []
        for _ in range(5000):  # built without recursion, deeper than any coder can follow
            deep = [deep]
        bad_qa = _session("r-sur")
        bad_qa["conversation"][0]["qa_id"] = "q\ud800"
        dated = _session("r-date")
        dated["conversation"][0]["agentic"] = {"at": dt.datetime(2024, 1, 1, 12), "cost": __import__("decimal").Decimal("1.5")}
        return [_session("r-ok"), bad_qa, {**_session("r-deep"), "context": "", "extra": deep}, dated]


def test_retriever_records_get_the_same_checks(tmp_path):
    from fair_forge_beam._beam import beam
    from fair_forge_beam.io.read import ReadInteractions
    from fair_forge_beam.io.write import read_jsonl_shards, write_jsonl

    out = tmp_path / "out"

    def build(p):
        res = p | ReadInteractions(retriever=HostileRetriever)
        write_jsonl(res["interactions"] | "I" >> beam.Map(lambda x: x._asdict()), str(out / "i"), "I")
        write_jsonl(res["dead_letter"], str(out / "d"), "D")

    _run(build)  # main: UnicodeEncodeError / RecursionError in the coder
    inter, dead = read_jsonl_shards(str(out / "i")), read_jsonl_shards(str(out / "d"))
    assert sorted(x["element_id"] for x in inter) == ["r-date/a/0", "r-ok/a/0"]
    dated = next(x for x in inter if x["session_id"] == "r-date")
    assert dated["agentic"] == {"at": "2024-01-01T12:00:00+00:00", "cost": 1.5}
    assert sorted(d["reason"].split(" ")[0] for d in dead) == ["conversation.0.qa_id", "nested"]


# ============================================================== item 6: the main job
@pytest.mark.slow
def test_main_job_survives_hostile_records(tmp_path):
    lines = [json.dumps(_session("g1", 2)), DEEP_FIELD, DEEP_ARRAY, json.dumps(_session("g2"))]
    lines += list(SURROGATE_LINES.values()) + [json.dumps(_session("g3"))]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    # item 7 in the same run: session "g1" continues in a second file
    (tmp_path / "in" / "b.jsonl").write_text(json.dumps(_session("g1", 1)) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-m", "pipelines.audit", "--input", str(tmp_path / "in" / "*.jsonl"), "--metrics", "humanity",
         "--output", str(out), "--no-report"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    from fair_forge_beam.reports.load import iter_jsonl_lines, iter_quality_warnings

    dead = [json.loads(x) for x in iter_jsonl_lines(str(out), "dead_letter")]  # every line valid JSON
    assert len(dead) == 6
    import pyarrow.parquet as pq

    ids = pq.read_table(out / "results.parquet").column("element_id").to_pylist()
    assert sorted(ids) == ["g1/a/0", "g1/a/1", "g1/a/2", "g2/a/0", "g3/a/0"]
    quality = list(iter_quality_warnings(str(out)))
    # both records of g1 hold a "q0": the split and the repeated qa_id are both reported
    assert sorted(q["kind"] for q in quality if q["key"] == "g1/a") == ["duplicate_qa_id", "session_split"]


# ============================================================== item 7: one session, two files
def test_session_split_over_two_files_keeps_distinct_ids(tmp_path):
    a = _session("S", 2)
    b = {**_session("S", 1), "conversation": [{"qa_id": "q9", "query": "x", "assistant": "I fear it"}]}
    (tmp_path / "a.jsonl").write_text(json.dumps(a) + "\n", encoding="utf-8")
    (tmp_path / "b.jsonl").write_text(json.dumps(b) + "\n", encoding="utf-8")
    inter, dead, quality = _read_outputs(str(tmp_path / "*.jsonl"), tmp_path)
    got = sorted((x["element_id"], x["qa_id"], x["turn_index"]) for x in inter)
    # ranked by (declared turn: none, file, position, place in the conversation)
    assert got == [("S/a/0", "q0", 0), ("S/a/1", "q1", 1), ("S/a/2", "q9", 2)]
    assert not dead
    split = [q for q in quality if q["kind"] == "session_split"]
    assert len(split) == 1 and split[0]["key"] == "S/a" and "2 session records" in split[0]["message"]


def test_session_record_and_streamed_record_of_one_session(tmp_path):
    rows = [json.dumps(_session("S", 2)),
            json.dumps({"session_id": "S", "assistant_id": "a", "qa_id": "late", "query": "q", "assistant": "x"})]
    (tmp_path / "m.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    inter, _, quality = _read_outputs(str(tmp_path / "m.jsonl"), tmp_path)
    assert sorted((x["element_id"], x["qa_id"]) for x in inter) == [("S/a/0", "q0"), ("S/a/1", "q1"), ("S/a/2", "late")]
    assert [q["kind"] for q in quality] == ["session_split"]


def test_one_session_record_keeps_conversation_positions(tmp_path):
    s = _session("S", 3)
    s["conversation"][1]["weight"] = -1  # rejected: the others keep positions 0 and 2
    (tmp_path / "s.jsonl").write_text(json.dumps(s) + "\n", encoding="utf-8")
    inter, dead, quality = _read_outputs(str(tmp_path / "s.jsonl"), tmp_path)
    assert sorted(x["element_id"] for x in inter) == ["S/a/0", "S/a/2"]
    # issue 28: the session kept in part says so (this test expected no warning before)
    assert len(dead) == 1 and [(q["kind"], q["key"]) for q in quality] == [("session_kept_in_part", "S/a")]


# ============================================================== item 11: encodings, types
@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-8-sig"])
def test_utf16_and_utf32_jsonl_read_as_text(tmp_path, encoding):
    text = "\n".join(json.dumps(_session(f"u{i}"), ensure_ascii=False) for i in range(3)) + "\n"
    f = tmp_path / "u.jsonl"
    f.write_bytes(text.encode(encoding))
    inter, dead, _ = _read_outputs(str(f), tmp_path)
    assert sorted(x["element_id"] for x in inter) == ["u0/a/0", "u1/a/0", "u2/a/0"]
    assert dead == []


def test_utf16_json_and_gzip_jsonl(tmp_path):
    import gzip

    (tmp_path / "u.json").write_bytes(json.dumps([_session("j0"), _session("j1")]).encode("utf-16"))
    inter, dead, _ = _read_outputs(str(tmp_path / "u.json"), tmp_path)
    assert sorted(x["element_id"] for x in inter) == ["j0/a/0", "j1/a/0"] and not dead
    text = "\n".join(json.dumps(_session(f"z{i}")) for i in range(2))
    (tmp_path / "z.jsonl.gz").write_bytes(gzip.compress(text.encode("utf-16")))
    inter, dead, _ = _read_outputs(str(tmp_path / "z.jsonl.gz"), tmp_path / "gz")
    assert sorted(x["element_id"] for x in inter) == ["z0/a/0", "z1/a/0"] and not dead


# A first line that is not JSON, starting with a character outside ASCII: RFC 4627's rule (the
# zero-byte pattern of the first 4 bytes) took such BOM-less UTF-16/UTF-32 files for UTF-8 or for the
# wrong byte order, and every record of the file became a dead letter (found by the fuzz test below).
_NON_ASCII_FIRST = ["\u0101 junk", "\u0100 junk", "\u4e00\u4e01 junk", "\U0001f600 junk", "\u00e9t\u00e9"]


@pytest.mark.parametrize("first", _NON_ASCII_FIRST)
@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be", "utf-8"])
def test_encoding_found_when_the_first_line_is_not_json(encoding, first):
    from fair_forge_beam.io import edge

    text = first + "\n" + "\n".join(json.dumps(_session(f"n{i}")) for i in range(40)) + "\n"
    head = text.encode(encoding)[: edge.ENCODING_PROBE_BYTES]
    assert edge.text_encoding(head) == encoding
    for cut in range(1, 8):  # a probe that ends inside a character
        assert edge.text_encoding(head[: edge.ENCODING_PROBE_BYTES - cut]) == encoding
    # files with a BOM, or whose first character is ASCII, keep RFC 4627's answer
    assert edge.text_encoding(("{" + text).encode(encoding)[:4096]) == json.detect_encoding(("{" + text).encode(encoding)[:4])


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le"])
def test_bomless_utf16_utf32_file_with_a_junk_first_line_keeps_its_records(tmp_path, encoding):
    import gzip

    text = "\u0101\u4e00 not json\n" + "\n".join(json.dumps(_session(f"b{i}")) for i in range(3)) + "\n"
    (tmp_path / "b.jsonl").write_bytes(text.encode(encoding))
    inter, dead, _ = _read_outputs(str(tmp_path / "b.jsonl"), tmp_path / "plain")
    assert sorted(x["element_id"] for x in inter) == ["b0/a/0", "b1/a/0", "b2/a/0"]
    assert len(dead) == 1 and "invalid JSON" in dead[0]["reason"]
    (tmp_path / "g.jsonl.gz").write_bytes(gzip.compress(text.encode(encoding)))
    inter, dead, _ = _read_outputs(str(tmp_path / "g.jsonl.gz"), tmp_path / "gz")
    assert sorted(x["element_id"] for x in inter) == ["b0/a/0", "b1/a/0", "b2/a/0"] and len(dead) == 1


def _valid_lines(prefix, n, encoding):
    return ("\n".join(json.dumps(_session(f"{prefix}{i}")) for i in range(n)) + "\n").encode(encoding)


# Cases of a fresh-user trial against the first version of the sniffing: a head that is half NUL
# bytes, a first line longer than the probe, a bad code unit (which must cost its line only, not
# the file), a multi-member gzip whose first member is junk.
_SNIFF_CASES = {
    "nul_head_utf8": lambda: b"\x00" * 2100 + b"\n" + _valid_lines("c", 40, "utf-8"),
    "long_cjk_first_line_le": lambda: ("\u4e2d\u6587" * 1500 + "\n").encode("utf-16-le") + _valid_lines("c", 6, "utf-16-le"),
    "long_cjk_first_line_be": lambda: ("\u4e2d\u6587" * 1500 + "\n").encode("utf-16-be") + _valid_lines("c", 6, "utf-16-be"),
    "bad_unit_in_junk_le": lambda: "\u0101 junk".encode("utf-16-le") + b"\x00\xd8" + "x\n".encode("utf-16-le")
    + _valid_lines("c", 6, "utf-16-le"),
    "bad_unit_in_junk_utf32": lambda: "\u0101 junk".encode("utf-32-le") + b"\xff\xff\xff\xff" + "\n".encode("utf-32-le")
    + _valid_lines("c", 6, "utf-32-le"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(_SNIFF_CASES))
def test_encoding_sniffing_cases_keep_every_good_record(tmp_path, case):
    import gzip

    data = _SNIFF_CASES[case]()
    n_good = 40 if case == "nul_head_utf8" else 6
    (tmp_path / "c.jsonl").write_bytes(data)
    inter, dead, _ = _read_outputs(str(tmp_path / "c.jsonl"), tmp_path / "plain")
    assert len(inter) == n_good and len(dead) == 1, (case, len(inter), [d["reason"][:80] for d in dead])
    (tmp_path / "c.jsonl.gz").write_bytes(gzip.compress(data))
    inter, dead, _ = _read_outputs(str(tmp_path / "c.jsonl.gz"), tmp_path / "gz")
    assert len(inter) == n_good and len(dead) == 1, (case, "gz")


def test_multi_member_gzip_is_sniffed_on_its_content_not_its_first_member(tmp_path):
    import gzip

    (tmp_path / "m.jsonl.gz").write_bytes(gzip.compress("\u0101\x00\n".encode("utf-8")) + gzip.compress(_valid_lines("m", 6, "utf-8")))
    inter, dead, _ = _read_outputs(str(tmp_path / "m.jsonl.gz"), tmp_path)
    assert sorted(x["element_id"] for x in inter) == [f"m{i}/a/0" for i in range(6)] and len(dead) == 1


def test_a_line_that_does_not_decode_costs_that_line_only(tmp_path):
    """UTF-16-LE with a BOM: the third record holds a lone surrogate code unit."""
    import codecs

    lines = [json.dumps(_session(f"u{i}")).encode("utf-16-le") for i in range(5)]
    lines[2] = lines[2][:-2] + b"\x00\xdc" + lines[2][-2:]
    (tmp_path / "u.jsonl").write_bytes(codecs.BOM_UTF16_LE + "\n".encode("utf-16-le").join(lines))
    inter, dead, _ = _read_outputs(str(tmp_path / "u.jsonl"), tmp_path)
    assert sorted(x["element_id"] for x in inter) == ["u0/a/0", "u1/a/0", "u3/a/0", "u4/a/0"]
    assert len(dead) == 1 and "looks like UTF-16" in dead[0]["reason"] and "does not decode" in dead[0]["reason"]


def test_bom_marked_file_that_does_not_decode_is_one_dead_letter(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_bytes(b"\xff\xfe" + "{}".encode("utf-16-le") + b"\x00\xd8")  # UTF-16LE BOM, then a cut surrogate
    inter, dead, _ = _read_outputs(str(f), tmp_path)
    assert inter == [] and len(dead) == 1
    assert "looks like UTF-16" in dead[0]["reason"] and str(f) in dead[0]["reason"]


@pytest.mark.parametrize("unit,tz", [("us", None), ("ns", None), ("ms", "UTC"), ("s", "Europe/Rome")])
def test_parquet_timestamp_column_is_event_time(tmp_path, unit, tz):
    import pyarrow as pa
    import pyarrow.parquet as pq

    when = [dt.datetime(2024, 1, 1, 12, 0, 0), dt.datetime(2024, 1, 2, 0, 0, 30)]
    arr = pa.array(when, pa.timestamp(unit))
    if tz:
        arr = pa.array([w.replace(tzinfo=dt.timezone.utc) for w in when], pa.timestamp(unit, tz=tz))
    t = pa.table({"session_id": ["p1", "p2"], "assistant_id": ["a", "a"], "qa_id": ["q", "q"], "query": ["h", "h"],
                  "assistant": ["happy", "sad"], "created": arr, "day": pa.array([dt.date(2024, 1, 1)] * 2, pa.date32())})
    pq.write_table(t, tmp_path / "ts.parquet")
    inter, dead, _ = _read_outputs(str(tmp_path / "ts.parquet"), tmp_path, timestamp_field="created")
    assert dead == []
    got = sorted((x["element_id"], x["event_time"]) for x in inter)
    assert got == [("p1/a/0", 1704110400.0), ("p2/a/0", 1704153630.0)]


# ============================================================== item 6: reader fuzz test
_SAFE_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


_KINDS = ("valid", "valid", "deep_array", "deep_field", "surrogate", "junk_json", "not_json")
_ENCODINGS = ("utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32-be")


def _valid_session(draw, i, prefix):
    n = draw(st.integers(1, 3))
    conv = [{"qa_id": draw(_SAFE_TEXT), "query": draw(_SAFE_TEXT), "assistant": draw(_SAFE_TEXT)} for _ in range(n)]
    return {"session_id": f"{prefix}~s{i}-" + draw(_SAFE_TEXT), "assistant_id": "a" + draw(_SAFE_TEXT), "conversation": conv}, n


@st.composite
def _records(draw, prefix):
    """A list of ``(json text, interactions it holds)``: 0 means the record must be a dead letter.
    Every kind of record occurs at least once (in a drawn order), plus up to three more; session
    ids start with ``prefix + "~"`` (the file they are written to)."""
    kinds = list(draw(st.permutations(_KINDS))) + draw(st.lists(st.sampled_from(_KINDS), max_size=3))
    out = []
    for i, kind in enumerate(kinds):
        if kind == "valid":
            rec, n = _valid_session(draw, i, prefix)
            out.append((json.dumps(rec, ensure_ascii=draw(st.booleans())), n))
        elif kind == "deep_array":
            d = draw(st.sampled_from([65, 200, 999, 1001, 5000]))
            out.append(("[" * d + "]" * d, 0))
        elif kind == "deep_field":
            rec, _ = _valid_session(draw, i, prefix)
            d = draw(st.sampled_from([70, 600, 2000]))
            text = json.dumps(rec)
            out.append((text[:-1] + ', "extra": ' + "{\"k\":" * d + "1" + "}" * d + "}", 0))
        elif kind == "surrogate":
            rec, _ = _valid_session(draw, i, prefix)
            field = draw(st.sampled_from(["session_id", "assistant_id", "qa_id", "query", "assistant", "language", "key"]))
            lone = draw(st.sampled_from(["\\ud800", "\\udbff", "\\udc00", "\\udfff"]))
            if field in ("session_id", "assistant_id", "language"):
                rec[field] = "MARK"
            elif field == "key":
                rec["conversation"][0]["MARK"] = 1
            else:
                rec["conversation"][0][field] = "MARK"
            out.append((json.dumps(rec).replace("MARK", "x" + lone + "y", 1), 0))
        elif kind == "junk_json":
            v = draw(st.recursive(st.none() | st.booleans() | st.integers() | _SAFE_TEXT,
                                  lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "x"]), c, max_size=3),
                                  max_leaves=6))
            out.append((json.dumps(v), 0))
        else:
            junk = draw(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r\ufeff"), min_size=1, max_size=20))
            if not junk.strip():
                junk = "x" + junk
            try:
                json.loads(junk)
                junk = "{" + junk  # make sure it is not JSON
            except ValueError:
                pass
            out.append((junk, 0))
    return out


@st.composite
def _files(draw):
    """``{file name: records}``: one JSONL file per encoding of ``_ENCODINGS`` and one JSON file
    (its records without the lines that are not JSON), each with every kind of record."""
    files = {f"e{k}.jsonl": draw(_records(f"e{k}")) for k in range(len(_ENCODINGS))}
    files["j.json"] = [(t, n) for t, n in draw(_records("j")) if not _is_junk(t)]
    return files


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(files=_files())
@pytest.mark.slow
def test_fuzz_readers_never_crash_and_account_for_every_record(tmp_path_factory, files):
    """JSONL (in each of five encodings) and JSON files of hostile records, every kind of hostile
    record in every file, read in one pipeline (a glob of the JSONL files and the JSON file): the
    run completes, and for each file, interactions read + records dead-lettered = what the file
    holds; element ids are unique.

    (Each example reads six files with all record kinds: three examples cover every encoding and
    every kind 3 times, where eight one-file examples of random kinds used to leave some out.)"""
    from fair_forge_beam._beam import beam
    from fair_forge_beam.io.read import ReadInteractions
    from apache_beam.testing.util import assert_that, equal_to

    d = tmp_path_factory.mktemp("fuzz")
    for k, encoding in enumerate(_ENCODINGS):
        records = files[f"e{k}.jsonl"]
        (d / f"e{k}.jsonl").write_bytes(("\n".join(t for t, _ in records) + "\n").encode(encoding))
    (d / "j.json").write_text("[" + ",".join(t for t, _ in files["j.json"]) + "]", encoding="utf-8")
    expected_inter = sorted((name.split(".")[0], sum(n for _, n in recs)) for name, recs in files.items())
    expected_dead = sorted((name, sum(1 for _, n in recs if n == 0)) for name, recs in files.items())

    def unique(ids):
        assert len(ids) == len(set(ids)), ids

    def dead_file(x):
        names = [name for name in files if x.source and x.source.startswith(str(d / name))]
        assert len(names) == 1, x
        return names[0]

    def build(p):
        res = p | "Read" >> ReadInteractions([str(d / "*.jsonl"), str(d / "j.json")])
        # interactions per file (the session id's prefix names it), dead letters per file (their source)
        per_file = (res["interactions"] | "FileI" >> beam.Map(lambda x: x.session_id.split("~", 1)[0])
                    | "CountI" >> beam.combiners.Count.PerElement())
        assert_that(per_file, equal_to([(f, n) for f, n in expected_inter if n]), label="I")
        dead = res["dead_letter"] | "FileD" >> beam.Map(dead_file) | "CountD" >> beam.combiners.Count.PerElement()
        assert_that(dead, equal_to([(f, n) for f, n in expected_dead if n]), label="D")
        ids = res["interactions"] | "Ids" >> beam.Map(lambda x: x.element_id)
        assert_that(ids | "All" >> beam.combiners.ToList(), lambda got: [unique(g) for g in got], label="U")
        # every dead letter can be written as UTF-8
        res["dead_letter"] | "Utf8" >> beam.Map(lambda x: json.dumps(x._asdict(), ensure_ascii=False).encode("utf-8"))

    _run(build)


def _is_junk(text: str) -> bool:
    """Lines that are not JSON cannot be elements of a JSON file; they are left out of it."""
    try:
        json.loads(text)
    except RecursionError:
        return False
    except ValueError:
        return True
    return False


# ============================================================== relative patterns
def test_relative_pattern_without_a_folder_is_read(tmp_path, monkeypatch):
    """``--input 'x_*.jsonl'`` typed in the data's folder: Beam's local file system matches no glob
    without a folder part, and a worker of a distributed runner has another working directory, so
    patterns are made absolute where the user typed them (found by a fresh-user trial)."""
    from fair_forge_beam.io.read import absolute_pattern
    from pipelines import audit

    for name in ("x_a.jsonl", "x_b.jsonl"):
        (tmp_path / name).write_text(json.dumps(_session(name[:3])) + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert absolute_pattern("x_*.jsonl") == str(tmp_path / "x_*.jsonl")
    assert absolute_pattern("gs://bucket/x_*.jsonl") == "gs://bucket/x_*.jsonl"
    doc = audit.run([f"--runner={FNAPI}", "--quiet", "--input", "x_*.jsonl", "--metrics", "humanity",
                     "--output", str(tmp_path / "out"), "--no-report"])
    assert doc["summary"]["interactions_read"] == 2


def test_summary_escapes_control_characters_from_the_data():
    """A slice label from the data (assistant_id) holding a newline or an ANSI escape cannot forge a
    summary line or drive the terminal (found by a fresh-user trial)."""
    from fair_forge_beam.reports.summary import summary_table

    label = "assistant_id=evil\nassistant_id=hh-chosen 991 400 0.0000\x1b[2J\u202e"
    doc = {"config": {"mode": "frequentist"},
           "summary": {"interactions_read": 1, "rejected_at_read": 0, "data_quality_warnings": 0,
                       "metrics": {"humanity": {"interactions_scored": 1, "scored": 1, "interactions_not_scored": 0,
                                                "dead_letters": 0, "dead_letter_reasons": {}}}},
           "metrics": {"humanity": {"headline_columns": [], "slices": [{"slice": label, "n_interactions": 1, "n_sessions": 1}]}}}
    text = summary_table(doc, "out")
    assert "\x1b" not in text and "\u202e" not in text
    assert not any(ln.lstrip().startswith("assistant_id=hh-chosen") for ln in text.splitlines())
    # printed escaped; the label, over the console's 40 columns, is elided in its middle (trial36 T11)
    assert "assistant_id=evil\\nassistan…" in text and "[2J\\u202e" in text
    short = {**doc, "metrics": {"humanity": {**doc["metrics"]["humanity"], "slices": [
        {"slice": "assistant_id=e\n\x1b[2J", "n_interactions": 1, "n_sessions": 1}]}}}
    assert "assistant_id=e\\n\\x1b[2J" in summary_table(short, "out")


# ============================================================== repeated keys (fresh-user trial)
DUP_TOP = '{"session_id":"s5","session_id":"s5dup","assistant_id":"a","conversation":[{"qa_id":"q0","query":"h","assistant":"happy"}]}'
DUP_NESTED = ('{"session_id":"s6","assistant_id":"a","conversation":'
              '[{"qa_id":"q0","query":"h","assistant":"happy","assistant":"I hate you"}]}')


def test_edge_loads_rejects_repeated_keys_at_any_depth():
    from fair_forge_beam.io import edge

    with pytest.raises(edge.RecordRejected, match="repeats the key 'session_id'"):
        edge.loads(DUP_TOP)
    with pytest.raises(edge.RecordRejected, match="repeats the key 'assistant'"):
        edge.loads(DUP_NESTED)
    assert edge.loads('{"a": {"b": 1}, "b": {"a": 2}}') == {"a": {"b": 1}, "b": {"a": 2}}  # same name, other objects


@pytest.mark.slow
def test_repeated_keys_are_dead_letters_in_jsonl_and_json_files(tmp_path):
    """``{"session_id":"s5","session_id":"s5dup",…}`` was read as ``s5dup`` without a word (last wins)."""
    good = json.dumps(_session("ok"))
    lines = tmp_path / "in.jsonl"
    lines.write_text("\n".join([good, DUP_TOP, DUP_NESTED]) + "\n", encoding="utf-8")
    inter, dead, _ = _read_outputs(str(lines), tmp_path / "l")
    assert sorted({i["session_id"] for i in inter}) == ["ok"]
    assert sorted(d["reason"].split(":")[0] for d in dead) == ["a JSON object repeats the key 'assistant'",
                                                              "a JSON object repeats the key 'session_id'"]
    assert any('"s5dup"' in d["raw"] for d in dead)  # the original record is kept in the dead letter
    # a .json array: only the element that repeats a key is rejected, the others are read
    arr = tmp_path / "in.json"
    arr.write_text("[" + ",".join([good, DUP_TOP, json.dumps(_session("ok2"))]) + "]", encoding="utf-8")
    inter, dead, _ = _read_outputs(str(arr), tmp_path / "a")
    assert sorted({i["session_id"] for i in inter}) == ["ok", "ok2"]
    assert len(dead) == 1 and "repeats the key 'session_id'" in dead[0]["reason"]
