"""fix40c item 1 (trial39 T4): a text field whose bytes are not UTF-8 is the same fault in every input
format and gives the same outcome: one dead letter naming the field and the byte offset. Before, a
Parquet binary answer in Latin-1 was read as the text ``"base64:…"`` and scored (a toxic answer
scored 0.0 toxic), while the same answer in a JSON Lines line was a dead letter naming neither.
Bytes that are not UTF-8 in a field the reader does not read stay ``"base64:…"`` text, with a warning."""
from __future__ import annotations

import gzip
import json

import pytest

from fair_forge_beam.io.retriever import Retriever
from test_reader_hostile import _read_outputs

BAD = "caf\u00e9 you idiot".encode("latin-1")  # byte 3 (0xE9) is not UTF-8
#: field path → where it sits in a session record; "region" is read as a slice field
FIELDS = ["session_id", "assistant_id", "language", "context", "region", "conversation.0.qa_id",
          "conversation.0.query", "conversation.0.assistant", "conversation.0.ground_truth_assistant"]
FORMATS = ["jsonl", "jsonl.gz", "json", "json.gz", "parquet", "retriever"]
MARK = "\u2603MARK\u2603"  # where the bytes go in the JSON text


def _record(field: str, value) -> dict:
    rec = {"session_id": f"s-{field}", "assistant_id": "a", "language": "english", "context": "c", "region": "eu",
           "conversation": [{"qa_id": "q0", "query": "q", "assistant": "fine", "ground_truth_assistant": "ok"}]}
    parts = field.split(".")
    if parts[0] == "conversation":
        rec["conversation"][0][parts[2]] = value
    else:
        rec[field] = value
    return rec


def _as_bytes(rec: dict) -> dict:
    """The record with every text as bytes (a Parquet binary column, a retriever's bytes)."""
    out = {k: (v.encode() if isinstance(v, str) else v) for k, v in rec.items()}
    out["conversation"] = [{k: (v.encode() if isinstance(v, str) else v) for k, v in e.items()} for e in rec["conversation"]]
    return out


def _records():
    """The good record, one record per field with the bad bytes there, and (Parquet, retriever) one with
    them in a field the reader does not read."""
    return [_record("session_id", "s-good")] + [_record(f, BAD) for f in FIELDS]


class BytesRetriever(Retriever):
    def load_dataset(self):
        recs = [_as_bytes(r) for r in _records()]
        recs[0]["blob"] = b"\xff\xfe\x00"
        return recs


def _write(tmp_path, fmt: str):
    """The records written in ``fmt``: ``(pattern or None, {field: expected byte offset})``."""
    if fmt == "retriever":
        return None, {f: 3 for f in FIELDS}
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        recs = [_as_bytes(r) for r in _records()]
        recs[0]["blob"] = b"\xff\xfe\x00"
        for r in recs[1:]:
            r["blob"] = b"x"
        entry = pa.struct([(k, pa.binary()) for k in ("qa_id", "query", "assistant", "ground_truth_assistant")])
        schema = pa.schema([(k, pa.binary()) for k in ("session_id", "assistant_id", "language", "context", "region", "blob")]
                           + [("conversation", pa.list_(entry))])
        path = tmp_path / "in.parquet"
        pq.write_table(pa.Table.from_pylist(recs, schema=schema), path)
        return str(path), {f: 3 for f in FIELDS}
    # the bytes replace a marker: written with the marker, then swapped
    texts = [json.dumps(_record(f, MARK), ensure_ascii=False).encode().replace(MARK.encode(), BAD) for f in FIELDS]
    texts = [json.dumps(_record("session_id", "s-good")).encode()] + texts
    offsets = {f: t.index(b"\xe9") for f, t in zip(FIELDS, texts[1:])}
    data = b"\n".join(texts) + b"\n" if fmt.startswith("jsonl") else b"[" + b",".join(texts) + b"]"
    path = tmp_path / f"in.{fmt}"
    path.write_bytes(gzip.compress(data) if fmt.endswith(".gz") else data)
    return str(path), offsets


_READ: dict = {}


def _outputs(tmp_path_factory, fmt):
    if fmt not in _READ:
        tmp = tmp_path_factory.mktemp(fmt.replace(".", "_"))
        pattern, offsets = _write(tmp, fmt)
        kw = {"retriever": BytesRetriever} if pattern is None else {}
        _READ[fmt] = (_read_outputs(pattern, tmp, slice_fields=("region",), **kw), offsets)
    return _READ[fmt]


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_text_field_that_is_not_utf8_is_a_dead_letter_naming_field_and_offset(tmp_path_factory, fmt, field):
    (inter, dead, quality), offsets = _outputs(tmp_path_factory, fmt)
    # the good record is read, and no record with the bytes in a text field is (before: Parquet read them as "base64:…")
    assert sorted({x["session_id"] for x in inter}) == ["s-good"], inter
    assert not any("base64:" in json.dumps(x) for x in inter)
    named = [d for d in dead if f"field '{field}' holds bytes that are not UTF-8 text" in d["reason"]]
    assert len(named) == 1, (fmt, field, [d["reason"] for d in dead])
    assert f"at byte {offsets[field]:,} of the" in named[0]["reason"], named[0]["reason"]
    assert len(dead) == len(FIELDS), [d["reason"] for d in dead]


@pytest.mark.parametrize("fmt", ["parquet", "retriever"])
def test_bytes_in_a_field_not_read_stay_base64_with_a_warning(tmp_path_factory, fmt):
    (inter, dead, quality), _ = _outputs(tmp_path_factory, fmt)
    assert [x["session_id"] for x in inter] == ["s-good"]
    warned = [q for q in quality if q["kind"] == "binary_as_base64"]
    assert len(warned) == 1 and "'blob'" in warned[0]["message"], quality


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_a_key_holding_bytes_that_are_not_utf8_is_named_by_its_bytes(tmp_path, fmt):
    """trial47 B8a: a key holding ED A0 80 (a surrogate written in UTF-8) was named
    ``field 'k\\udced\\udca0\\udc80'``, the bytes shown as the escapes of characters they are not; it
    is named by its bytes, ``field b'k\\xed\\xa0\\x80'``. A value's field keeps its plain name."""
    from apache_beam.io import fileio
    from apache_beam.io.filesystems import FileSystems

    from fair_forge_beam.io.elements import DeadLetter
    from fair_forge_beam.io.read import _ParseRecord, _ReadJsonFile

    key = json.dumps(_record("session_id", "s-key"), ensure_ascii=False).encode()[:-1] + b', "k\xed\xa0\x80": 1}'
    value = json.dumps(_record("conversation.0.assistant", MARK), ensure_ascii=False).encode().replace(MARK.encode(), b"he\xed\xa0\x80y")
    fn = _ParseRecord()
    fn.setup()
    if fmt == "jsonl":
        items = [("in.jsonl", 0, key), ("in.jsonl", 1, value)]
    else:
        path = tmp_path / "in.json"
        path.write_bytes(b"[" + key + b",\n" + value + b"]")
        [meta] = [m for r in FileSystems.match([str(path)]) for m in r.metadata_list]
        items = list(_ReadJsonFile(2**20).process(fileio.ReadableFile(meta)))
    reasons = [getattr(o, "value", o).reason for item in items for o in fn.process(item)
               if isinstance(getattr(o, "value", o), DeadLetter)]
    assert len(reasons) == 2, reasons
    assert "field b'k\\xed\\xa0\\x80' holds bytes that are not UTF-8 text" in reasons[0], reasons[0]
    assert "field 'conversation.0.assistant' holds bytes that are not UTF-8 text" in reasons[1], reasons[1]
    assert not any("\\udc" in r for r in reasons), reasons
