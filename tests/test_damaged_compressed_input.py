"""Trial 33 T6 / T13: a compressed input whose data fails its check gives none of its records; one
cut short keeps every complete record decompressed before the cut, in every record format.

T6: a ``.jsonl.gz`` of 2,000 sessions with one byte flipped mid-stream gave 3,834 interactions, ~954
of them made by the damaged deflate back-references (a gzip member's CRC is checked only after all
of its data was given), scored with exit 0; its dead letter said "not gzip data". T13: a cut
``.json.gz`` kept 111 of its 560 complete elements (the buffered read dropped its last 1 MiB read
when the error came)."""
from __future__ import annotations

import bz2
import gzip
import json
import lzma
import random
import zlib

import pytest

from fair_forge_beam.io.read import ReadError

zstandard = pytest.importorskip("zstandard")


def _sessions(n, prefix="s", seed=5):
    rng = random.Random(seed)
    return [{"session_id": f"{prefix}{i}", "assistant_id": "bot", "language": "english", "conversation": [
        {"qa_id": f"{prefix}{i}-{k}", "query": f"question {k} on {rng.randrange(10**6)}",
         "assistant": f"I am glad to help with {rng.getrandbits(64):x}, thank you."} for k in range(3)]}
        for i in range(n)]


#: compress, decompress the whole (the standard decoders, as a check of the damage), and the words
#: the dead letter must say of a flipped byte
_FORMATS = {
    ".gz": (gzip.compress, gzip.decompress, "gzip data check (CRC) failed"),
    ".gz-members": (lambda b: gzip.compress(b[: len(b) // 3]) + gzip.compress(b[len(b) // 3:]), gzip.decompress,
                    "gzip data check (CRC) failed"),
    ".bz2": (bz2.compress, bz2.decompress, "corrupt bzip2 data"),
    ".xz": (lzma.compress, lzma.decompress, "corrupt xz data"),
    ".lzma": (lambda b: lzma.compress(b, format=lzma.FORMAT_ALONE), lzma.decompress, "corrupt lzma data"),
    ".zst": (lambda b: zstandard.ZstdCompressor(write_checksum=True).compress(b),
             lambda b: zstandard.ZstdDecompressor().decompressobj().decompress(b), "zstd data check (checksum) failed"),
    ".deflate": (zlib.compress, zlib.decompress, "zlib data check (Adler-32) failed"),
}


def _flipped(blob: bytes, decompress, words: str, start: float) -> bytes:
    """``blob`` with one byte flipped at the first place from ``start`` (a fraction of its length)
    where the standard decoder fails with the error the words name (a check, not a cut)."""
    for at in range(int(len(blob) * start), len(blob) - 20):
        b = bytearray(blob)
        b[at] ^= 0xFF
        try:
            decompress(bytes(b))
        except EOFError:
            continue
        except Exception as exc:  # noqa: BLE001 - the decoder's own error
            text = str(exc)
            if ("CRC" in text or "check" in text) if "check" in words else "checksum" not in text:
                return bytes(b)
    raise AssertionError("no flip found")


def _write(tmp_path, fmt, suffix, data: bytes, damage=None) -> str:
    compress, decompress, words = _FORMATS[suffix]
    blob = compress(data)
    if damage == "flip":  # the second member's data in a file of two gzip members
        blob = _flipped(blob, decompress, words, 0.7 if suffix == ".gz-members" else 0.5)
    elif damage == "cut":
        blob = blob[: len(blob) // 2]
    path = tmp_path / f"in{'' if damage is None else '-' + damage}.{fmt}{suffix.split('-')[0]}"
    path.write_bytes(blob)
    return str(path)


def _readable(path):
    from apache_beam.io import fileio
    from apache_beam.io.filesystems import FileSystems

    [meta] = [m for r in FileSystems.match([str(path)]) for m in r.metadata_list]
    return fileio.ReadableFile(meta)


def _read(fmt, path):
    from apache_beam.io.range_trackers import OffsetRangeTracker

    from fair_forge_beam.io.read import _JsonLinesSource, _ReadJsonFile

    if fmt == "json":
        return [x[2] for x in _ReadJsonFile(2**20).process(_readable(path))]
    return [x[2] for x in _JsonLinesSource(path, 2**20).read_records(path, OffsetRangeTracker(0, 2**62))]


def _text(fmt, sessions) -> bytes:
    if fmt == "json":
        return ("[" + ",\n".join(json.dumps(s) for s in sessions) + "]").encode()
    return "".join(json.dumps(s) + "\n" for s in sessions).encode()


@pytest.mark.parametrize("suffix", sorted(_FORMATS))
@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_a_flipped_byte_gives_no_record_and_one_dead_letter_with_the_true_reason(tmp_path, fmt, suffix):
    """Before: the records decompressed before the check failed were read (with a gzip CRC, the
    ones the damage made too), then one dead letter said "not gzip data" / "records after this
    point are missing". Now: the file is checked whole first; no record, one dead letter naming the
    file and what failed. The undamaged file is read whole, no dead letter."""
    sessions = _sessions(1500)
    good = _write(tmp_path, fmt, suffix, _text(fmt, sessions))
    assert [json.loads(x)["session_id"] for x in _read(fmt, good)] == [s["session_id"] for s in sessions]
    path = _write(tmp_path, fmt, suffix, _text(fmt, sessions), "flip")
    got = _read(fmt, path)
    assert len(got) == 1 and isinstance(got[0], ReadError), (suffix, len(got), got[-1:])
    reason = got[0].reason
    assert reason.startswith(f"cannot read compressed file {path}, none of its records are read: "), reason
    assert _FORMATS[suffix][2] in reason and reason.endswith("the file is damaged"), reason
    assert "not gzip data" not in reason and "\n" not in reason


def _complete_elements(fmt, suffix, cut: bytes, sessions) -> list:
    """The sessions whose text (and, in a .json array, the comma after it) the standard decoder
    gives from the ``cut`` bytes: what the reader can keep."""
    d = {".gz": lambda: zlib.decompressobj(31), ".bz2": bz2.BZ2Decompressor, ".xz": lzma.LZMADecompressor,
         ".zst": lambda: zstandard.ZstdDecompressor().decompressobj(), ".deflate": zlib.decompressobj}[suffix]()
    prefix = d.decompress(cut)
    text = _text(fmt, sessions)
    assert text.startswith(prefix) and len(prefix) < len(text)
    out, at = [], 1 if fmt == "json" else 0
    for s in sessions:
        at += len(json.dumps(s)) + 1  # the text, then its separator (",\n" counts its comma; "\n")
        if at > len(prefix):
            break
        out.append(s["session_id"])
        at += 1 if fmt == "json" else 0
    return out


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz", ".zst", ".deflate"])
@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_a_cut_file_keeps_every_complete_record_before_the_cut(tmp_path, fmt, suffix):
    """T13: a cut ``.json.gz`` kept 111 of its 560 complete elements, the ``.jsonl.gz`` every line. Both
    now keep every record the decoder gives before the cut, and the dead letter says how many were
    read and that the rest of the file is missing."""
    sessions = _sessions(8000, seed=9)  # ~2.8 MB: a bzip2 file of 4 blocks (900 kB each)
    path = _write(tmp_path, fmt, suffix, _text(fmt, sessions), "cut")
    with open(path, "rb") as f:
        expected = _complete_elements(fmt, suffix, f.read(), sessions)
    assert len(expected) > 100
    got = _read(fmt, path)
    assert [json.loads(x)["session_id"] for x in got[:-1]] == expected, (len(got) - 1, len(expected))
    reason = got[-1].reason
    assert isinstance(got[-1], ReadError) and path in reason, got[-1]
    unit = "element" if fmt == "json" else "line"
    assert f"it is cut short: {len(expected):,} {unit}s read before the cut" in reason, reason
    assert "the rest of the file is missing" in reason and "ends before its end-of-stream marker" in reason, reason


_SINK: dict = {}


def _store(values, name):
    _SINK[name] = values


def test_the_audit_reads_no_interaction_of_a_damaged_gzip_and_goes_on_with_the_other_inputs(tmp_path):
    """Through ReadInteractions (every runner reads the same way): a damaged .jsonl.gz is one dead
    letter and no interaction; a good input beside it is read whole."""
    import apache_beam as beam

    from fair_forge_beam.io.read import ReadInteractions
    from fair_forge_beam.beam_pipeline import pipeline_options

    bad = _write(tmp_path, "jsonl", ".gz", _text("jsonl", _sessions(2000, prefix="gz")), "flip")
    good = tmp_path / "good.jsonl"
    good.write_text(_text("jsonl", _sessions(4, prefix="ok")).decode())
    sink = _SINK
    sink.clear()
    with beam.Pipeline(options=pipeline_options([])) as p:
        r = p | ReadInteractions([bad, str(good)])
        for name in ("interactions", "dead_letter"):
            r[name] | f"list_{name}" >> beam.combiners.ToList() | f"keep_{name}" >> beam.Map(_store, name)
    assert sorted({x.session_id for x in sink["interactions"]}) == [f"ok{i}" for i in range(4)]
    assert len(sink["dead_letter"]) == 1 and "gzip data check (CRC) failed" in sink["dead_letter"][0].reason


def test_every_other_reader_of_inputs_reads_nothing_of_a_damaged_file(tmp_path):
    """The watcher's lines and the hh-rlhf loader (which stops at ``limit`` records, before the CRC
    that ends the member) gave the records the damage made."""
    from fair_forge_beam.io.hh_rlhf import hh_rlhf_sessions
    from fair_forge_beam.io.stream_sources import _ReadLines

    path = _write(tmp_path, "jsonl", ".gz", _text("jsonl", _sessions(2000)), "flip")
    got = [x[2] for x in _ReadLines(2**20).process(_readable(path))]
    assert len(got) == 1 and "gzip data check (CRC) failed" in got[0].reason, got[-1:]

    rows = "".join(json.dumps({"chosen": f"\n\nHuman: hi {i}\n\nAssistant: hello {i:x}" * 3,
                               "rejected": f"\n\nHuman: hi {i}\n\nAssistant: go away {i}"}) + "\n" for i in range(4000))
    hh = tmp_path / "hh.jsonl.gz"
    hh.write_bytes(_flipped(gzip.compress(rows.encode()), gzip.decompress, "check", 0.5))
    skipped: list = []  # no record, one reason naming the damage (the audit's reader: one dead letter)
    assert hh_rlhf_sessions(str(hh), limit=3990, skipped=skipped) == []
    assert len(skipped) == 1 and "gzip data check (CRC) failed" in skipped[0][1], skipped


def test_open_input_gives_every_byte_before_an_error_to_read(tmp_path):
    """The root of T13: ``read(n)`` of the buffer joined several decompressed pieces and dropped them
    all when the last one raised; it gives them, and the next read raises."""
    from fair_forge_beam.io.edge import CompressedDataCut, open_input

    data = random.Random(1).randbytes(3 * 2**20)  # incompressible: stored blocks
    blob = gzip.compress(data)
    path = tmp_path / "x.bin.gz"
    path.write_bytes(blob[: len(blob) - 4096])
    with open_input(str(path)) as f:
        got = f.read(8 * 2**20)
        assert len(got) > 3 * 2**20 - 8192 and data.startswith(got)
        with pytest.raises(CompressedDataCut, match="cut short"):
            f.read(2**20)


_EMPTY_SUFFIXES = (".gz", ".bz2", ".xz", ".lzma", ".zst", ".zstd", ".deflate")


def test_a_compressed_input_of_0_bytes_is_one_dead_letter_naming_it_and_an_empty_plain_file_none(tmp_path):
    """trial47 B2: ``: > z.jsonl.gz`` beside a good input read as 0 records, no dead letter, no
    warning (Beam's file sources leave every 0-byte file out, and every decompressor reads 0 bytes as
    no data), in every compression; ``gzip -t`` / ``bzip2 -t`` / ``xz -t`` refuse such a file. It is
    a file cut short at its start: one dead letter each, naming it; an empty plain ``.jsonl`` or
    ``.json`` stays 0 records and no dead letter; the good input is read whole."""
    import apache_beam as beam

    from fair_forge_beam.beam_pipeline import pipeline_options
    from fair_forge_beam.io.read import ReadInteractions

    empty = [tmp_path / f"z{suffix[1:]}.jsonl{suffix}" for suffix in _EMPTY_SUFFIXES] + [tmp_path / "zj.json.gz"]
    plain = [tmp_path / "e.jsonl", tmp_path / "e.json"]
    for path in empty + plain:
        path.write_bytes(b"")
    good = tmp_path / "good.jsonl"
    good.write_text(_text("jsonl", _sessions(2, prefix="ok")).decode())
    sink = _SINK
    sink.clear()
    with beam.Pipeline(options=pipeline_options([])) as p:
        r = p | ReadInteractions([str(x) for x in empty + plain + [good]])
        for name in ("interactions", "dead_letter"):
            r[name] | f"list_{name}" >> beam.combiners.ToList() | f"keep_{name}" >> beam.Map(_store, name)
    assert sorted({x.session_id for x in sink["interactions"]}) == ["ok0", "ok1"]
    got = {d.source.rsplit(":", 1)[0]: d.reason for d in sink["dead_letter"]}
    assert sorted(got) == sorted(str(x) for x in empty), sorted(got)
    for path, reason in got.items():
        assert reason.startswith(f"cannot read compressed file {path} to its end, it is cut short: 0 "), reason
        assert "the rest of the file is missing: the file is empty (0 bytes), it ends before its " in reason, reason
        assert reason.endswith(" header"), reason


@pytest.mark.parametrize("suffix", _EMPTY_SUFFIXES)
def test_every_reader_of_a_compressed_file_tells_0_bytes_as_cut_short(tmp_path, suffix):
    """The root (``edge.open_input``): every decompressor read a file of 0 bytes as no data without a
    word; the watcher's lines, the hh-rlhf loader and the check each say it now. A stream of no data
    (``gzip`` of nothing: 20 bytes) is a sound file, read as empty."""
    from fair_forge_beam.io.edge import CompressedDataCut, compressed_check, open_input
    from fair_forge_beam.io.hh_rlhf import hh_rlhf_sessions
    from fair_forge_beam.io.stream_sources import _ReadLines

    name = {".gz": "gzip", ".bz2": "bzip2", ".xz": "xz", ".lzma": "lzma", ".zst": "zstd", ".zstd": "zstd",
            ".deflate": "zlib"}[suffix]
    path = tmp_path / f"e.jsonl{suffix}"
    path.write_bytes(b"")
    error = compressed_check(str(path))
    assert isinstance(error, CompressedDataCut) and not error.reads_nothing, error
    assert error.what == f"the file is empty (0 bytes), it ends before its {name} header", error.what
    with open_input(str(path)) as f, pytest.raises(CompressedDataCut, match="empty \\(0 bytes\\)"):
        f.read()
    got = [x[2] for x in _ReadLines(2**20).process(_readable(path))]
    assert len(got) == 1 and "it is cut short: 0 lines read" in got[0].reason and error.what in got[0].reason, got
    skipped: list = []
    assert hh_rlhf_sessions(str(path), limit=10, skipped=skipped) == []
    assert len(skipped) == 1 and "it is cut short: 0 lines read" in skipped[0][1] and error.what in skipped[0][1], skipped
    compress = {".lzma": lambda b: lzma.compress(b, format=lzma.FORMAT_ALONE), ".zstd": _FORMATS[".zst"][0]}.get(
        suffix) or _FORMATS[suffix][0]
    path.write_bytes(compress(b""))
    assert compressed_check(str(path)) is None
    with open_input(str(path)) as f:
        assert f.read() == b""


def test_an_xz_file_of_stream_padding_alone_is_not_xz_data(tmp_path):
    """Zero bytes are padding between xz streams; a file of them alone held no stream and was read as
    empty without a word (``xz -t``: "File format not recognized"). Padding after a stream is still
    skipped."""
    from fair_forge_beam.io.edge import NotCompressedData, compressed_check

    path = tmp_path / "pad.jsonl.xz"
    path.write_bytes(bytes(16))
    error = compressed_check(str(path))
    assert isinstance(error, NotCompressedData) and error.reads_nothing, error
    assert error.what.startswith("not xz data (it starts with bytes 0x00 0x00"), error.what
    path.write_bytes(lzma.compress(b'{"a": 1}\n') + bytes(16))
    assert compressed_check(str(path)) is None
