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

from helpers import FNAPI, REPO, fnapi_pipeline, run_module_peak_rss
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
    decompressor's error is now an OSError naming the file, read as one dead letter. Since trial 33
    (T6: a gzip member's CRC is checked after its data was given, and the data after a damage is
    not the file's) a damaged file gives none of its elements, not those before the damage."""
    from fair_forge_beam.io.read import _ReadJsonFile

    good = tmp_path / f"good.json.{ext}"
    _write(good, [b"[" + json.dumps(_session("s1")).encode() + b"," + b" " * (4 * MB) + json.dumps(_session("s2")).encode()
                  + b"]"], ext)
    blob = good.read_bytes()
    path = tmp_path / f"in.json.{ext}"
    path.write_bytes(blob[: len(blob) // 2] + b"\x00garbage!" * 64 + blob[len(blob) // 2 + 576:])
    got = list(_ReadJsonFile(8 * MB).process(_readable(path)))
    assert len(got) == 1 and isinstance(got[-1][2], ReadError) and str(path) in got[-1][2].reason, got
    assert "none of its records are read" in got[-1][2].reason and "the file is damaged" in got[-1][2].reason


def _check_records(records, kind):
    """Two good sessions and one ReadError for the huge record over the 1 MiB limit."""
    texts = [r for r in records if not isinstance(r, ReadError)]
    errors = [r for r in records if isinstance(r, ReadError)]
    ids = [(json.loads(t) if isinstance(t, (str, bytes)) else t)["session_id"] for t in texts
           if (t.strip() if isinstance(t, (str, bytes)) else t)]
    assert ids == ["s1", "s2"], (kind, ids)
    assert len(errors) == 1 and "over the limit of 1,048,576 bytes" in errors[0].reason, (kind, errors)


@pytest.mark.slow
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


# ------------------------------------------------------------------ issue 28 leftovers: names, truncation, xz memory
_COMPRESS = {
    ".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress, ".deflate": zlib.compress,
    ".lzma": lambda b: lzma.compress(b, format=lzma.FORMAT_ALONE),
    ".zst": lambda b: __import__("zstandard").ZstdCompressor(write_checksum=True).compress(b),
    ".zstd": lambda b: __import__("zstandard").ZstdCompressor().compress(b),
}


def test_every_compression_open_input_reads_is_told_by_the_name():
    """``.json.bz2``, ``.jsonl.zst`` … were "cannot tell the format" although open_input reads them;
    every format × every compression ending is recognised, a compressed Parquet file is refused with
    its reason, any other name with the names read."""
    from apache_beam.io.filesystem import CompressionTypes

    from fair_forge_beam.io.edge import COMPRESSION_SUFFIXES
    from fair_forge_beam.io.read import detect_format, format_refusal

    assert set(COMPRESSION_SUFFIXES) == set(_COMPRESS)
    for suffix in COMPRESSION_SUFFIXES:  # each one Beam (and so open_input) decompresses
        assert CompressionTypes.detect_compression_type(f"x{suffix}") != CompressionTypes.UNCOMPRESSED
        for base, fmt in ((".json", "json"), (".jsonl", "jsonl"), (".ndjson", "jsonl")):
            for name in (f"d/data{base}{suffix}", f"d/DATA{base.upper()}{suffix.upper()}"):
                assert detect_format(name) == fmt and format_refusal(name) is None, name
        for name in (f"d/data.parquet{suffix}", f"d/data.pq{suffix}"):
            assert detect_format(name) is None
            assert "Parquet file compressed as a whole" in format_refusal(name), name
        assert "Parquet file compressed as a whole" in format_refusal(f"d/data.bin{suffix}", "parquet")
        assert format_refusal(f"d/data.bin{suffix}", "jsonl") is None  # --input-format jsonl: decompressed
        assert "CSV is not an input format" in format_refusal(f"d/logs.csv{suffix}")
    why = format_refusal("d/notes.txt")
    assert "cannot tell the format" in why and "--input-format" in why and "\n" not in why
    assert all(s in why for s in COMPRESSION_SUFFIXES)


def test_json_and_json_lines_in_every_compression_are_read_by_name(tmp_path):
    import apache_beam as beam
    from apache_beam.testing.util import assert_that, equal_to

    from fair_forge_beam.io.read import ReadInteractions

    expected = []
    for kind in ("json", "jsonl"):
        (tmp_path / kind).mkdir()
        for suffix, compress in _COMPRESS.items():
            sid = f"{kind}{suffix}"
            expected.append(sid)
            text = json.dumps([_session(sid)]) if kind == "json" else json.dumps(_session(sid)) + "\n"
            (tmp_path / kind / f"data.{kind}{suffix}").write_bytes(compress(text.encode()))
    p = fnapi_pipeline()
    out = p | ReadInteractions([str(tmp_path / "json" / "*"), str(tmp_path / "jsonl" / "*")])
    assert_that(out["interactions"] | beam.Map(lambda x: x.session_id), equal_to(expected))
    assert_that(out["dead_letter"], equal_to([]), label="NoDeadLetters")
    p.run()


def _lines_of(path, limit=MB):
    from apache_beam.io.range_trackers import OffsetRangeTracker

    from fair_forge_beam.io.read import _JsonLinesSource

    return [x[2] for x in _JsonLinesSource(str(path), limit).read_records(str(path), OffsetRangeTracker(0, 2**62))]


@pytest.mark.parametrize("suffix", sorted(_COMPRESS))
def test_a_compressed_file_cut_short_is_a_dead_letter_in_every_compression(tmp_path, suffix):
    """A ``.zst`` file cut short ended where it was cut, without a word (zstandard's stream reader
    does not tell, nor does Beam's): its missing records were silently dropped. Every compression now
    reports it as a truncated ``.gz`` is: one ReadError naming the file, after the records before."""
    import random

    rng = random.Random(7)
    lines = [json.dumps({**_session(f"s{i}"), "pad": "%030x" % rng.getrandbits(120)}) + "\n" for i in range(3000)]
    blob = _COMPRESS[suffix]("".join(lines).encode())
    whole, cut = tmp_path / f"whole.jsonl{suffix}", tmp_path / f"cut.jsonl{suffix}"
    whole.write_bytes(blob)
    cut.write_bytes(blob[: len(blob) * 2 // 3])
    assert [json.loads(x)["session_id"] for x in _lines_of(whole)] == [f"s{i}" for i in range(3000)]
    got = _lines_of(cut)
    assert isinstance(got[-1], ReadError) and str(cut) in got[-1].reason, (suffix, got[-1:])
    assert "it is cut short" in got[-1].reason and "the rest of the file is missing" in got[-1].reason
    assert all(not isinstance(x, ReadError) for x in got[:-1]) and len(got) - 1 < 3000


def _xz_declaring_dictionary(data: bytes, prop: int) -> bytes:
    """An .xz stream of ``data`` whose block header declares the LZMA2 dictionary of property byte
    ``prop`` (37: 1536 MiB, as ``xz --lzma2=dict=1536MiB`` writes; ``xz -lvv`` then says "Memory needed:
    1537 MiB"), its header CRC32 recomputed: the decoder allocates what the header declares, while
    the test's encoder only needed a 1 MiB dictionary (compressing with a 1.5 GiB one takes ~17 GB)."""
    import struct

    b = bytearray(lzma.compress(data, filters=[{"id": lzma.FILTER_LZMA2, "dict_size": MB}]))
    size = (b[12] + 1) * 4  # the block header after the 12-byte stream header
    header = b[12:12 + size]
    assert header[1] == 0 and header[2:4] == b"\x21\x01"  # one filter, no sizes: LZMA2, 1 property byte
    header[4] = prop
    header[-4:] = struct.pack("<I", zlib.crc32(bytes(header[:-4])))
    b[12:12 + size] = header
    return bytes(b)


def test_an_xz_file_needing_more_decoder_memory_than_the_limit_is_one_dead_letter(tmp_path, monkeypatch):
    """An .xz file whose header names a 1.5 GiB dictionary made the decoder allocate 1.5 GiB
    (``lzma.LZMAFile`` has no memory limit). The decoder's memory is now bounded (edge.XZ_MEMLIMIT,
    128 MiB): such a file is one ReadError naming the limit; with a small limit, a file of an 8 MiB
    dictionary is refused the same way and read whole under the default."""
    from fair_forge_beam.io import edge

    text = "".join(json.dumps(_session(f"s{i}")) + "\n" for i in range(50)).encode()
    huge = tmp_path / "huge-dictionary.jsonl.xz"
    huge.write_bytes(_xz_declaring_dictionary(text, 37))
    [got] = _lines_of(huge)
    assert isinstance(got, ReadError) and str(huge) in got.reason and "limit of 128 MiB" in got.reason, got
    assert "\n" not in got.reason

    eight = tmp_path / "eight.jsonl.xz"
    eight.write_bytes(lzma.compress(text, filters=[{"id": lzma.FILTER_LZMA2, "dict_size": 8 * MB}]))
    assert len(_lines_of(eight)) == 50
    monkeypatch.setattr(edge, "XZ_MEMLIMIT", 4 * MB)
    [got] = _lines_of(eight)
    assert isinstance(got, ReadError) and "more memory than the limit of 4 MiB" in got.reason, got


def _zstd_declaring_window(data: bytes, log: int) -> bytes:
    """A zstd frame of ``data`` whose header declares a window of ``2**log`` bytes (31: 2 GiB, as
    ``zstd --long=31`` writes), written with a 1 MiB window (no content size: the header holds a
    window descriptor, RFC 8878 §3.1.1.1.2, the byte after the frame header descriptor)."""
    import zstandard

    params = zstandard.ZstdCompressionParameters.from_level(3, window_log=20, write_content_size=False)
    comp = zstandard.ZstdCompressor(compression_params=params).compressobj()
    b = bytearray(comp.compress(data) + comp.flush())
    assert b[4] & 0x20 == 0 and b[5] == (20 - 10) << 3  # not single-segment: b[5] is the window descriptor
    b[5] = (log - 10) << 3
    return bytes(b)


def test_a_zstd_file_needing_a_window_over_the_limit_is_one_dead_letter_naming_it(tmp_path, monkeypatch):
    """Trial 28b: a .zst needing a 2 GiB window was "corrupt, truncated or unreadable zstd data (ZstdError:
    ... Frame requires too much memory for decoding)": it names its window and the limit now
    (edge.ZSTD_MAX_WINDOW, 128 MiB), as the xz reader names its memory limit; a file within the limit
    is read, and refused the same way under a smaller limit."""
    from fair_forge_beam.io import edge

    text = "".join(json.dumps(_session(f"s{i}")) + "\n" for i in range(50)).encode()
    huge = tmp_path / "long-window.jsonl.zst"
    huge.write_bytes(_zstd_declaring_window(text, 31))
    [got] = _lines_of(huge)
    assert isinstance(got, ReadError) and str(huge) in got.reason, got
    assert "needs a window of 2,048 MiB, over the limit of 128 MiB" in got.reason and "\n" not in got.reason, got

    eight = tmp_path / "eight.jsonl.zst"
    eight.write_bytes(_zstd_declaring_window(text, 23))
    assert len(_lines_of(eight)) == 50
    monkeypatch.setattr(edge, "ZSTD_MAX_WINDOW", 4 * MB)
    [got] = _lines_of(eight)
    assert isinstance(got, ReadError) and "needs a window of 8 MiB, over the limit of 4 MiB" in got.reason, got


@pytest.mark.parametrize("suffix", sorted(_COMPRESS))
def test_data_after_the_last_stream_is_a_dead_letter_in_every_compression(tmp_path, suffix):
    """Trial 28 (B3): one bz2 stream of sessions followed by plain JSON lines gave exit 0 and 9 of 16
    interactions, no dead letter (``bz2.BZ2File`` ends the file at data that is not a stream). In
    every compression, streams written one after another are read on, and anything after the last
    one that is not a stream is one ReadError naming the file, after the records before it."""
    lines = [json.dumps(_session(f"s{i}")) + "\n" for i in range(5)]
    streams = _COMPRESS[suffix]("".join(lines[:3]).encode()) + _COMPRESS[suffix]("".join(lines[3:]).encode())
    whole, appended = tmp_path / f"whole.jsonl{suffix}", tmp_path / f"appended.jsonl{suffix}"
    whole.write_bytes(streams)
    assert [json.loads(x)["session_id"] for x in _lines_of(whole)] == [f"s{i}" for i in range(5)]
    for tail in (json.dumps(_session("plain")).encode() + b"\n", b"x", b"\x00\x00\x00\x00garbage"):
        appended.write_bytes(streams + tail)
        got = _lines_of(appended)
        assert [json.loads(x)["session_id"] for x in got[:-1]] == [f"s{i}" for i in range(5)], (suffix, tail, got)
        assert isinstance(got[-1], ReadError) and str(appended) in got[-1].reason, (suffix, tail, got[-1:])
        assert "what follows them is not read" in got[-1].reason or "it is cut short" in got[-1].reason, got[-1]


def _binaries() -> dict:
    """The first bytes of each compressed or binary format a text input may hold by mistake."""
    import io
    import zipfile

    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    text = ("".join(json.dumps(_session(f"s{i}")) + "\n" for i in range(3))).encode()
    zipped, parquet = io.BytesIO(), io.BytesIO()
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("a.jsonl", text)
    pq.write_table(pa.table({"x": [1, 2, 3]}), parquet)
    return {"gzip": gzip.compress(text), "bzip2": bz2.compress(text), "xz": lzma.compress(text),
            "zstd": zstandard.ZstdCompressor().compress(text), "zlib/DEFLATE": zlib.compress(text),
            "zip": zipped.getvalue(), "Parquet": parquet.getvalue()}


@pytest.mark.parametrize("kind", sorted(_binaries()))
def test_a_text_input_holding_compressed_or_binary_data_is_one_dead_letter_naming_it(tmp_path, kind):
    """Trial 28: gzip data inside an ``.xz`` file (compressed twice) gave a reason saying the file
    "looks like UTF-16-LE"; gzip data in a ``.jsonl``/``.json`` named file, one "not valid UTF-8"
    dead letter per garbage line. Every reader of a user's text file (JSON Lines plain and
    decompressed, a JSON file, the watched-folder reader, the agentic reader) gives one ReadError
    naming the format, and reads the good file beside it."""
    from apache_beam.io.range_trackers import OffsetRangeTracker

    from fair_forge_beam.io.agentic_sources import _file_records
    from fair_forge_beam.io.read import _JsonLinesSource, _ReadJsonFile
    from fair_forge_beam.io.stream_sources import _ReadLines

    data = _binaries()[kind]
    paths = {"jsonl": tmp_path / "plain.jsonl", "jsonl.xz": tmp_path / "twice.jsonl.xz",
             "json": tmp_path / "plain.json", "json.gz": tmp_path / "twice.json.gz"}
    paths["jsonl"].write_bytes(data)
    paths["json"].write_bytes(data)
    paths["jsonl.xz"].write_bytes(lzma.compress(data))
    paths["json.gz"].write_bytes(gzip.compress(data))
    readers = {
        "jsonl": lambda p: [x[2] for x in _JsonLinesSource(str(p), MB).read_records(str(p), OffsetRangeTracker(0, 2**62))],
        "json": lambda p: [x[2] for x in _ReadJsonFile(MB).process(_readable(p))],
        "watch": lambda p: [x[2] for x in _ReadLines(MB).process(_readable(p))],
        "agentic": lambda p: _file_records(str(p), MB),
    }
    for name, path in paths.items():
        for reader in ({"jsonl": ("jsonl", "watch", "agentic")}.get(name.split(".")[0], ("json", "agentic"))):
            got = readers[reader](path)
            assert len(got) == 1 and isinstance(got[0], ReadError), (kind, name, reader, got[:3])
            assert f"{path} holds " in got[0].reason and "not text" in got[0].reason, (kind, name, reader, got[0])
            assert kind in got[0].reason, (kind, name, reader, got[0].reason)
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(_session("ok")) + "\n", encoding="utf-8")
    assert [json.loads(x)["session_id"] for x in readers["jsonl"](good)] == ["ok"]
