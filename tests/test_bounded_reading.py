"""Issue 28, item 1: bounded reading. A JSON Lines record over ``--max-record-bytes`` is never held
whole (plain files, gzip, and a split of a plain file that starts inside it): it becomes one dead
letter naming its size and the limit, and the good records around it are read and scored."""
from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys

import pytest

from helpers import FNAPI, REPO
from fair_forge_beam.io.read import ReadError, _JsonLinesSource, bounded_lines


def _session(sid):
    return json.dumps({"session_id": sid, "assistant_id": "bot", "language": "english", "conversation": [
        {"qa_id": f"{sid}-0", "query": "Can you help?", "assistant": "I am glad to help, thank you.",
         "ground_truth_assistant": "Happy to help."}]}) + "\n"


class Spy(io.BytesIO):
    """A file whose every read and readline must be bounded; ``biggest``: the most bytes one gave."""

    def __init__(self, data: bytes):
        super().__init__(data)
        self.biggest = 0

    def _seen(self, out: bytes) -> bytes:
        self.biggest = max(self.biggest, len(out))
        return out

    def readline(self, size=-1):
        assert size > 0, "a line read without a limit"
        return self._seen(super().readline(size))

    def read(self, size=-1):
        assert size > 0, "a read without a limit"
        return self._seen(super().read(size))


def test_bounded_lines_reads_past_a_long_line_in_limited_pieces():
    good = _session("a").encode()
    limit = len(good) + 10
    lines = [good, b"x" * (5 * 2**20) + b"\n", good, b"y" * (limit + 20) + b"\n", b"z" * limit]
    spy = Spy(b"".join(lines))
    got = list(bounded_lines(spy, limit=limit))
    offsets = [sum(len(x) for x in lines[:i]) for i in range(len(lines))]
    assert [p for p, _ in got] == offsets
    assert [got[i][1] for i in (0, 2, 4)] == [good, good, b"z" * limit]
    big, long = got[1][1], got[3][1]
    assert isinstance(big, ReadError) and isinstance(long, ReadError)
    assert big.reason == (f"record of 5,242,880 bytes is over the limit of {limit:,} bytes (--max-record-bytes); "
                          "the rest of the file is read")
    assert big.raw == "x" * 1024 and long.raw == "y" * (limit + 20)  # the record's first 1,024 bytes at most
    assert f"record of {limit + 20:,} bytes" in long.reason
    assert spy.biggest <= 2**20  # never more than one chunk of the long line at a time


def test_a_line_of_exactly_the_limit_is_read():
    line = b"a" * 10 + b"\n"
    assert list(bounded_lines(io.BytesIO(line + line[:-1]), limit=10)) == [(0, line), (11, b"a" * 10)]
    got = list(bounded_lines(io.BytesIO(b"a" * 11), limit=10))
    assert len(got) == 1 and isinstance(got[0][1], ReadError) and "record of 11 bytes" in got[0][1].reason


def _oversized_run(tmp_path, body: bytes, compressed: bool):
    """An audit of ``body`` (two good sessions around one record over 1 MiB) with
    --max-record-bytes 1 MiB: ``(results.json content, dead letters)``."""
    from pipelines import audit

    path = tmp_path / ("in.jsonl.gz" if compressed else "in.jsonl")
    path.write_bytes(gzip.compress(body) if compressed else body)
    out = tmp_path / "out"
    doc = audit.run(["--quiet", "--no-report", "--metrics", "humanity", "--input", str(path), "--output", str(out),
                     "--max-record-bytes", str(2**20), f"--runner={FNAPI}"])
    dead = [json.loads(line) for p in sorted((out / "dead_letter").glob("*.jsonl")) for line in p.read_text().splitlines()]
    return doc, dead


@pytest.mark.parametrize("compressed", [False, True])
def test_an_oversized_record_is_one_dead_letter_and_the_good_sessions_are_scored(tmp_path, compressed):
    huge = json.dumps({"session_id": "huge", "assistant_id": "bot", "conversation": [
        {"qa_id": "h", "query": "q", "assistant": "\0" * (3 * 2**20)}]}) + "\n"
    doc, dead = _oversized_run(tmp_path, (_session("s1") + huge + _session("s2")).encode(), compressed)
    assert doc["summary"]["metrics"]["humanity"]["interactions_scored"] == 2
    assert len(dead) == 1 and dead[0]["stage"] == "read"
    assert dead[0]["reason"].startswith(f"record of {len(huge) - 1:,} bytes is over the limit of 1,048,576 bytes")
    assert len(dead[0]["raw"]) <= 1024 and dead[0]["source"].endswith(f":{len(_session('s1'))}")


def test_a_split_starting_inside_a_long_line_skips_it_in_pieces(tmp_path):
    from apache_beam.io.range_trackers import OffsetRangeTracker

    good = _session("a").encode()
    path = tmp_path / "in.jsonl"
    path.write_bytes(good + b"x" * (3 * 2**20) + b"\n" + good)
    start = len(good) + 10  # a later bundle's range begins inside the long line
    lines = list(_JsonLinesSource(str(path), max_record_bytes=1000).read_records(str(path), OffsetRangeTracker(start, 10**9)))
    assert lines == [(str(path), len(good) + 3 * 2**20 + 1, good)]


def test_max_record_bytes_must_be_positive(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pipelines.audit", "--max-record-bytes", "0", "--output", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "--max-record-bytes" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_compressed_json_file_over_16_mib_is_read_whole(tmp_path):
    """Beam's decompressing reader returns at most 16 MiB from a read() without a size: a .json.gz
    of 22 MB (hostile-tester trial) was parsed truncated, every session one 'invalid JSON' dead
    letter and exit 4. Every whole-file read goes through io.edge.read_all; here a JSON array of 17
    MiB (one padded record, under the record limit, between two sessions) keeps its three sessions."""
    from pipelines import audit

    pad = {"session_id": "pad", "assistant_id": "bot", "language": "english", "context": "c" * (17 * 2**20),
           "conversation": [{"qa_id": "p", "query": "q", "assistant": "I am glad to help, thank you."}]}
    records = [json.loads(_session("s1")), pad, json.loads(_session("s2"))]
    body = json.dumps(records).encode()
    assert len(body) > 2**24
    path = tmp_path / "in.json.gz"
    path.write_bytes(gzip.compress(body))
    doc = audit.run(["--quiet", "--no-report", "--metrics", "humanity", "--input", str(path),
                     "--output", str(tmp_path / "out"), f"--runner={FNAPI}"])
    assert doc["summary"]["interactions_read"] == 3 and doc["summary"]["rejected_at_read"] == 0
    assert doc["summary"]["metrics"]["humanity"]["interactions_scored"] == 3


def test_read_all_reads_a_large_compressed_file_whole(tmp_path):
    from apache_beam.io.filesystems import FileSystems

    from fair_forge_beam.io.edge import read_all

    data = bytes(range(256)) * (2**17)  # 32 MiB
    path = tmp_path / "x.bin.gz"
    path.write_bytes(gzip.compress(data, compresslevel=1))
    with FileSystems.open(str(path)) as f:
        assert read_all(f) == data


@pytest.mark.slow
def test_a_record_nested_past_the_parser_is_a_dead_letter_and_the_run_ends(tmp_path):
    """Hostile-tester trial: a record whose conversation nests 200,000 levels was rejected at read,
    then the findings' reader parsed the rejected text again with json.loads (RecursionError, exit 1,
    no outputs). Every parse of a rejected record goes through the depth-bounded parser."""
    from pipelines import audit

    deep = '{"session_id":"deep","assistant_id":"x","conversation":' + "[" * 200_000 + "]" * 200_000 + "}\n"
    path = tmp_path / "in.jsonl"
    path.write_text(_session("s1") + deep + _session("s2"), encoding="utf-8")
    doc = audit.run(["--quiet", "--metrics", "humanity", "--input", str(path), "--output", str(tmp_path / "out"),
                     f"--runner={FNAPI}"])
    assert doc["summary"]["metrics"]["humanity"]["interactions_scored"] == 2
    assert doc["summary"]["rejected_at_read"] == 1 and (tmp_path / "out" / "report.html").is_file()


def test_max_record_bytes_has_an_upper_bound(capsys):
    from pipelines import audit

    with pytest.raises(SystemExit) as exc:
        audit.run(["--quiet", "--max-record-bytes", "99999999999999999999999", "--output", "unused"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--max-record-bytes: must be between 1 and 2,147,483,647 bytes" in err[0], err


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["plain", "gzip", "utf-16"])
def test_an_oversized_element_of_a_json_file_is_one_dead_letter_and_the_good_sessions_are_scored(tmp_path, layout):
    """Hostile-tester trial (issue 28): a .json file (a JSON array, not JSON Lines) was parsed whole,
    so --max-record-bytes did not bound it (a 400 MB record peaked at 3.08 GB). It is now cut
    element by element (io.edge.json_values): the element over the limit is one dead letter naming
    its size and the limit, with its first 1,024 bytes, and the elements after it are read."""
    from pipelines import audit

    huge = {"session_id": "huge", "assistant_id": "bot", "conversation": [
        {"qa_id": "h", "query": "q", "assistant": 'x\\"], {' * (2**19)}]}  # quotes and brackets inside a string
    parts = [_session("s1").strip(), json.dumps(huge), _session("s2").strip()]
    body = ("[\n" + ",\n".join(parts) + "\n]\n").encode("utf-16" if layout == "utf-16" else "utf-8")
    path = tmp_path / ("in.json.gz" if layout == "gzip" else "in.json")
    path.write_bytes(gzip.compress(body) if layout == "gzip" else body)
    out = tmp_path / "out"
    doc = audit.run(["--quiet", "--no-report", "--metrics", "humanity", "--input", str(path), "--output", str(out),
                     "--max-record-bytes", str(2**20), f"--runner={FNAPI}"])
    assert doc["summary"]["metrics"]["humanity"]["interactions_scored"] == 2
    dead = [json.loads(line) for p in sorted((out / "dead_letter").glob("*.jsonl")) for line in p.read_text().splitlines()]
    assert len(dead) == 1 and dead[0]["stage"] == "read", dead
    size = len(json.dumps(huge)) + 1  # the text between its separators: the "\n" before it too
    assert dead[0]["reason"] == (f"record of {size:,} bytes is over the limit of 1,048,576 bytes (--max-record-bytes); "
                                 "the rest of the file is read")
    assert dead[0]["raw"].startswith('{"session_id": "huge"') and len(dead[0]["raw"]) <= 1024
    assert dead[0]["source"].endswith("in.json" + (".gz" if layout == "gzip" else "") + ":1")


def test_a_truncated_json_file_keeps_its_complete_elements(tmp_path):
    """A .json array cut short (a copy stopped early) keeps the elements before the cut; the cut one
    is a dead letter saying where the text ends."""
    from fair_forge_beam.io.read import _ReadJsonFile
    from apache_beam.io import fileio

    path = tmp_path / "in.json"
    path.write_text("[" + _session("s1").strip() + ", " + _session("s2").strip()[:40], encoding="utf-8")
    [meta] = [m for r in __import__("apache_beam").io.filesystems.FileSystems.match([str(path)]) for m in r.metadata_list]
    got = list(_ReadJsonFile(1000).process(fileio.ReadableFile(meta)))
    assert [(p, i) for p, i, _ in got] == [(str(path), 0), (str(path), 1)]
    assert json.loads(got[0][2])["session_id"] == "s1"
    assert isinstance(got[1][2], ReadError) and "ends inside a string of element 1" in got[1][2].reason


# The same bound for UTF-16/UTF-32 JSON Lines and for the streaming file watcher (found after the
# UTF-8 fix: a UTF-16 file was decoded whole, and WatchJsonl read each line whole, with no limit).
@pytest.mark.parametrize("encoding,compressed", [("utf-16", False), ("utf-16-le", True), ("utf-32", False)])
def test_an_oversized_utf16_or_utf32_record_is_one_dead_letter(tmp_path, encoding, compressed):
    huge = json.dumps({"session_id": "huge", "assistant_id": "bot", "conversation": [
        {"qa_id": "h", "query": "q", "assistant": "z" * (2 * 2**20)}]}) + "\n"
    doc, dead = _oversized_run(tmp_path, (_session("s1") + huge + _session("s2")).encode(encoding), compressed)
    assert doc["summary"]["metrics"]["humanity"]["interactions_scored"] == 2
    unit = 4 if "32" in encoding else 2
    assert len(dead) == 1 and dead[0]["stage"] == "read"
    assert dead[0]["reason"].startswith(f"record of {(len(huge) - 1) * unit:,} bytes is over the limit of 1,048,576 bytes")
    assert dead[0]["raw"].startswith('{"session_id": "huge"') and len(dead[0]["raw"]) <= 1024
    # the offset of a UTF-16/32 line counts characters (the first session's, newline included)
    assert dead[0]["source"].endswith(f":{len(_session('s1'))}")


def test_decoded_lines_never_hold_a_long_line():
    import tracemalloc

    from fair_forge_beam.io.read import _decoded_lines

    good = _session("a")
    data = (good + "x" * (8 * 2**20) + "\n" + good).encode("utf-16")
    tracemalloc.start()
    try:
        spy = Spy(data)
        got = list(_decoded_lines("f", spy, "utf-16", limit=4096))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # (the text after the last newline is a last, empty line, as before: blank lines are skipped downstream)
    assert [line for _, _, line in got if not isinstance(line, ReadError)] == [good.rstrip("\n"), good.rstrip("\n"), ""]
    (bad,) = [line for _, _, line in got if isinstance(line, ReadError)]
    assert f"record of {16 * 2**20:,} bytes" in bad.reason and bad.raw == "x" * 1024
    assert spy.biggest <= 2**20 and peak < 8 * 2**20  # the 16 MiB line was never held (data itself is not traced)


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_the_file_watcher_bounds_its_lines(tmp_path, encoding):
    from types import SimpleNamespace

    from fair_forge_beam.io.stream_sources import WatchJsonl, _ReadLines

    path = tmp_path / "in.jsonl"
    path.write_bytes((_session("a") + "y" * 5000 + "\n" + _session("b")).encode(encoding))
    readable = SimpleNamespace(metadata=SimpleNamespace(path=str(path)), open=lambda: open(path, "rb"))
    got = list(_ReadLines(1000).process(readable))
    lines = [x[2] for x in got]
    assert isinstance(lines[1], ReadError) and "record of" in lines[1].reason and "limit of 1,000 bytes" in lines[1].reason
    text = [x.decode() if isinstance(x, bytes) else x for x in (lines[0], lines[2])]
    assert [t.rstrip("\n") for t in text] == [_session("a").rstrip("\n"), _session("b").rstrip("\n")]
    assert WatchJsonl(str(path), 1.0, 1.0, max_record_bytes=123).max_record_bytes == 123


def test_a_windowed_run_reads_under_its_max_record_bytes(tmp_path):
    """--max-record-bytes reached the batch reader only: a windowed run read with the default limit."""
    from pipelines import audit

    def flat(sid, text):
        return json.dumps({"session_id": sid, "assistant_id": "bot", "qa_id": f"{sid}-0", "query": "q",
                           "assistant": text, "timestamp": "2024-05-01T10:05:00Z"}) + "\n"

    data = tmp_path / "in.jsonl"
    data.write_text(flat("s1", "Thank you, glad to help.") + flat("big", "w " * 3000) + flat("s2", "Happy to help."))
    out = tmp_path / "out"
    audit.run(["--quiet", "--input", str(data), "--window", "fixed:1h", "--metrics", "humanity",
               "--max-record-bytes", "1000", "--output", str(out), f"--runner={FNAPI}"])
    dead = [json.loads(line) for f in sorted((out / "windows").glob("dead_letter-*.jsonl")) for line in open(f)]
    assert len(dead) == 1 and "over the limit of 1,000 bytes" in dead[0]["reason"]
