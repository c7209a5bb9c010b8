"""Issue 28 (second hostile report), item 1: compressed input files are decompressed in bounded
pieces. Beam's decompressing reader (``FileSystems.open`` / ``ReadableFile.open``) expands every
16 MiB of compressed data whole into memory, so a 2.4 MB ``.json.gz`` holding one 2.5 GB element
peaked at 5.1 GB whatever ``--max-record-bytes`` said. Every reader of a user's input file now opens
it through ``io.edge.open_input`` (standard-library / zstandard incremental decompression over an
uncompressed opening): the element over the limit is one dead letter, the others are read, and the
memory held does not grow with the record."""
from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import tracemalloc
import zlib

import pytest

from helpers import FNAPI, REPO, run_module_peak_rss
from fair_forge_beam.io.read import ReadError

MB = 2**20
HUGE = 64 * MB  # one record's text, decompressed

_OPENERS = {"gz": gzip.open, "bz2": bz2.open, "xz": lzma.open}


def _session(sid):
    return {"session_id": sid, "assistant_id": "bot", "language": "english", "conversation": [
        {"qa_id": f"{sid}-0", "query": "Can you help?", "assistant": "I am glad to help, thank you.",
         "ground_truth_assistant": "Happy to help."}]}


def _huge_head() -> bytes:
    return b'{"session_id":"huge","assistant_id":"bot","conversation":[{"qa_id":"h","query":"q","assistant":"'


def _write(path, pieces, ext):
    """``pieces`` (bytes, or an int: that many MiB of ``a``) compressed by ``ext`` into ``path``,
    streamed (the huge record is never held by the test either)."""
    def chunks():
        for p in pieces:
            if isinstance(p, int):
                for _ in range(p):
                    yield b"a" * MB
            else:
                yield p

    if ext in _OPENERS:
        with _OPENERS[ext](path, "wb") as f:
            for c in chunks():
                f.write(c)
        return
    if ext == "zst":
        import zstandard

        comp = zstandard.ZstdCompressor().compressobj()
    else:  # deflate: zlib-wrapped, as Beam writes it
        comp = zlib.compressobj()
    with open(path, "wb") as f:
        for c in chunks():
            f.write(comp.compress(c))
        f.write(comp.flush())


def _json_array(n_mib: int) -> list:
    return [b"[" + json.dumps(_session("s1")).encode() + b",\n" + _huge_head(), n_mib,
            b'"}]},\n' + json.dumps(_session("s2")).encode() + b"]\n"]


def _json_lines(n_mib: int) -> list:
    return [json.dumps(_session("s1")).encode() + b"\n" + _huge_head(), n_mib,
            b'"}]}\n' + json.dumps(_session("s2")).encode() + b"\n"]


def _peak(fn):
    """``(fn(), peak bytes traced while it ran)``."""
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _readable(path):
    from apache_beam.io import fileio
    from apache_beam.io.filesystems import FileSystems

    [meta] = [m for r in FileSystems.match([str(path)]) for m in r.metadata_list]
    return fileio.ReadableFile(meta)


@pytest.mark.parametrize("ext", ["gz", "bz2", "xz", "zst", "deflate"])
def test_open_input_decompresses_in_bounded_pieces(tmp_path, ext):
    """48 MiB read in 1 MiB pieces holds no more than 2 MiB does (the decompressor's own state, e.g.
    xz's 8 MiB dictionary, is there in both), and concatenated streams are read on."""
    from fair_forge_beam.io.edge import open_input

    def read(path):
        sizes, tail = [], b""
        with open_input(str(path)) as f:
            assert f.readline(100) == b"first\n"
            while True:
                piece = f.read(MB)
                if not piece:
                    return sizes, tail
                sizes.append(len(piece))
                tail = (tail + piece)[-11:]

    peaks = {}
    for n in (2, 48):
        path = tmp_path / f"x{n}.{ext}"
        _write(path, [b"first\n", n, b"\nlast\n"], ext)
        with open(path, "ab") as f:  # a second stream after the first (cat a.gz b.gz) is read on
            f.write({"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress, "deflate": zlib.compress,
                     "zst": lambda b: __import__("zstandard").ZstdCompressor().compress(b)}[ext](b"more\n"))
        (sizes, tail), peaks[n] = _peak(lambda: read(path))
        assert sum(sizes) == n * MB + len(b"\nlast\nmore\n") and max(sizes) <= MB and tail == b"\nlast\nmore\n"
    assert peaks[48] - peaks[2] < 2 * MB, f"reading 48 MiB of {ext} held {(peaks[48] - peaks[2]) / MB:.0f} MiB more than 2 MiB"


@pytest.mark.parametrize("ext", ["gz", "bz2", "xz", "deflate"])
def test_corrupt_compressed_data_is_one_read_error_naming_the_file(tmp_path, ext):
    """Beam's reader let lzma.LZMAError (not an OSError) escape the .json reader: a crash. Every
    decompressor's error is now an OSError naming the file, read as one dead letter after the
    elements before the damage."""
    from fair_forge_beam.io.read import _ReadJsonFile

    good = tmp_path / f"good.json.{ext}"
    _write(good, [b"[" + json.dumps(_session("s1")).encode() + b"," + b" " * (4 * MB) + json.dumps(_session("s2")).encode()
                  + b"]"], ext)
    blob = good.read_bytes()
    path = tmp_path / f"in.json.{ext}"
    path.write_bytes(blob[: len(blob) // 2] + b"\x00garbage!" * 64 + blob[len(blob) // 2 + 576:])
    got = list(_ReadJsonFile(8 * MB).process(_readable(path)))
    # (bzip2 checks a block, up to 900 kB, before giving any of it: there s1 is lost with the damage)
    assert [json.loads(x[2])["session_id"] for x in got[:-1]] == ([] if ext == "bz2" else ["s1"])
    assert isinstance(got[-1][2], ReadError) and str(path) in got[-1][2].reason, got[-1]
    assert "records after this point are missing" in got[-1][2].reason


def _check_records(records, kind):
    """Two good sessions and one ReadError for the huge record over the 1 MiB limit."""
    texts = [r for r in records if not isinstance(r, ReadError)]
    errors = [r for r in records if isinstance(r, ReadError)]
    ids = [(json.loads(t) if isinstance(t, (str, bytes)) else t)["session_id"] for t in texts
           if (t.strip() if isinstance(t, (str, bytes)) else t)]
    assert ids == ["s1", "s2"], (kind, ids)
    assert len(errors) == 1 and "over the limit of 1,048,576 bytes" in errors[0].reason, (kind, errors)


@pytest.mark.parametrize("reader,ext", [("json", "gz"), ("json", "xz"), ("jsonl", "bz2"), ("watch", "gz"),
                                        ("agentic-json", "gz"), ("agentic-jsonl", "bz2")])
def test_every_reader_holds_a_compressed_record_over_the_limit_in_pieces(tmp_path, reader, ext):
    """A 64 MiB record in a compressed file (64 KB of gzip) with --max-record-bytes 1 MiB: each
    reader of a user's file holds (Python allocations traced) under 8 MiB more than for a 2 MiB
    record, and reads the two good records around it. Through Beam's reader each held the whole
    decompressed record (>= 64 MiB more)."""
    from apache_beam.io.range_trackers import OffsetRangeTracker

    from fair_forge_beam.io.agentic_sources import _file_records
    from fair_forge_beam.io.read import _JsonLinesSource, _ReadJsonFile
    from fair_forge_beam.io.stream_sources import _ReadLines

    lines = reader in ("jsonl", "watch", "agentic-jsonl")
    peaks = {}
    for n in (2, HUGE // MB):
        path = tmp_path / (f"in{n}.jsonl.{ext}" if lines else f"in{n}.json.{ext}")
        _write(path, (_json_lines if lines else _json_array)(n), ext)
        run = {
            "json": lambda: [x[2] for x in _ReadJsonFile(MB).process(_readable(path))],
            "jsonl": lambda: [x[2] for x in _JsonLinesSource(str(path), MB).read_records(str(path), OffsetRangeTracker(0, 2**62))],
            "watch": lambda: [x[2] for x in _ReadLines(MB).process(_readable(path))],
            "agentic-json": lambda: _file_records(str(path), MB),
            "agentic-jsonl": lambda: _file_records(str(path), MB),
        }[reader]
        records, peaks[n] = _peak(run)
        _check_records(records, reader)
    grown = peaks[HUGE // MB] - peaks[2]
    assert grown < 8 * MB, f"{reader} held {grown / MB:.0f} MiB more for a 64 MiB record than for a 2 MiB one (.{ext})"


@pytest.mark.slow
def test_a_json_gz_bomb_is_read_in_bounded_memory_end_to_end(tmp_path):
    """The hostile report's case at 256 MiB: a .json.gz (~260 KB) whose middle element expands to
    256 MiB, between two good sessions, --max-record-bytes 1 MiB. The audit process's peak RSS
    (its own VmHWM: helpers.run_module_peak_rss) stays under 450 MB (~270 MB with a 2 MB element; Beam's reader
    peaked at ~690 MB here, ~600 MB at 200 MB); the good sessions are scored, the element is one
    dead letter."""
    path = tmp_path / "in.json.gz"
    _write(path, _json_array(256), "gz")
    out = tmp_path / "out"
    proc, rss_mb = run_module_peak_rss(
        "pipelines.audit", ["--quiet", "--no-report", "--metrics", "humanity", "--input", path, "--output", out,
                            "--max-record-bytes", MB, f"--runner={FNAPI}"],
        tmp_path, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert rss_mb < 450, f"peak RSS {rss_mb:.0f} MB reading a 256 MiB element of a .json.gz"
    doc = json.loads((out / "results.json").read_text())
    assert doc["summary"]["metrics"]["humanity"]["interactions_scored"] == 2
    dead = [json.loads(line) for p in sorted((out / "dead_letter").glob("*.jsonl")) for line in p.read_text().splitlines()]
    assert len(dead) == 1 and dead[0]["reason"].startswith("record of 268,435,") and "1,048,576 bytes" in dead[0]["reason"]
