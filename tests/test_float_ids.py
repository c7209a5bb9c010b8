"""trial38 T12: ids written as whole floats (a pandas or Parquet float64 column: an integer column
with one missing value) are the ids of the ints, in every id field and input format; a NaN or
non-whole float id is a dead letter saying how to fix the record.

Before: ``qa_id: 2.0`` and ``session_id: 4.0`` rejected every record (``should be text, not a
number``), while JSON ints were read as their digits.
"""
from __future__ import annotations

import json

import pytest

from helpers import fnapi_pipeline


def _read(paths, tmp_path):
    """(interactions, dead letters, quality warnings) of ``ReadInteractions(paths)``, as lists."""
    from fair_forge_beam._beam import beam
    from fair_forge_beam.io.read import ReadInteractions
    from fair_forge_beam.io.write import read_jsonl_shards, write_jsonl

    out = tmp_path / "out"
    p = fnapi_pipeline()
    res = p | ReadInteractions(paths)
    write_jsonl(res["interactions"] | "I" >> beam.Map(lambda x: x._asdict()), str(out / "i"), "I")
    write_jsonl(res["dead_letter"], str(out / "d"), "D")
    write_jsonl(res["quality"], str(out / "q"), "Q")
    p.run().wait_until_finish()
    return tuple(read_jsonl_shards(str(out / n)) for n in ("i", "d", "q"))


def _session(sid, aid, qa):
    return {"session_id": sid, "assistant_id": aid, "language": "english",
            "conversation": [{"qa_id": qa, "query": "q", "assistant": "a"}]}


def _flat(sid, aid, qa):
    return {"session_id": sid, "assistant_id": aid, "qa_id": qa, "query": "q", "assistant": "a"}


#: (session_id, assistant_id, qa_id) as written -> as read
GOOD = [(("s1", "a", 2.0), ("s1", "a", "2")), ((4.0, "a", "q"), ("4", "a", "q")), (("s2", 7.0, 1), ("s2", "7", "1")),
        (("s3", "a", -0.0), ("s3", "a", "0")), ((-12.0, "b", 3.0), ("-12", "b", "3")),
        (("s4", "a", 9007199254740992.0), ("s4", "a", "9007199254740992"))]
#: an id no record may have, and what its reason says
BAD = [(("b1", "a", float("nan")), "qa_id: is NaN, not an id: the missing value of a float column"),
       ((float("nan"), "a", "q"), "session_id: is NaN, not an id"),
       (("b2", "a", 2.5), "qa_id: is the number 2.5, not a whole number: a number is read as an id only when whole "
                          "(3 or 3.0 is '3'); write this id as text ('2.5')"),
       (("b3", 1e17, "q"), "assistant_id: is the float 1e+17, beyond 2**53"),
       (("b4", "a", float("inf")), "qa_id: is inf, not an id: write the id as text"),
       (("b5", "a", None), "qa_id: is null, not an id: give every record its id")]


def _check(inter, dead):
    read = sorted((x["session_id"], x["assistant_id"], x["qa_id"]) for x in inter)
    assert read == sorted(want for _, want in GOOD), read
    assert len(dead) == len(BAD), dead
    for (_, said) in BAD:
        assert any(said in d["reason"] and d["stage"] == "read" for d in dead), (said, [d["reason"] for d in dead])


@pytest.mark.parametrize("shape", ["session", "flat"])
def test_whole_float_ids_are_the_ints_ids_in_json_lines_and_json(tmp_path, shape):
    make = _session if shape == "session" else _flat
    records = [make(*ids) for ids, _ in GOOD] + [make(*ids) for ids, _ in BAD]
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in records))  # NaN and Infinity as Python's json writes them
    inter, dead, quality = _read([str(jsonl)], tmp_path / "a")
    _check(inter, dead)
    # a numeric header id is said once per session, with the text it is read as
    said = " ".join(q["message"] for q in quality if q["kind"] == "numeric_id")
    assert "session_id 4.0 at " in said and "read as text ('4')" in said, said
    one = tmp_path / "in.json"
    one.write_text(json.dumps(records))
    inter, dead, _ = _read([str(one)], tmp_path / "b")
    _check(inter, dead)


def test_whole_float_ids_are_the_ints_ids_in_parquet(tmp_path):
    """A pandas export: an integer id column with a missing value is float64 (NaN kept, not null)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    qa = [2.0, -0.0, 2.0 ** 53, float("nan"), 2.5, 1.0]
    sid = [4.0, 5.0, 6.0, 7.0, 8.0, float("nan")]
    table = pa.table({"session_id": pa.array(sid, pa.float64()), "assistant_id": pa.array([1.0] * 6, pa.float64()),
                      "qa_id": pa.array(qa, pa.float64()), "query": ["q"] * 6, "assistant": ["a"] * 6})
    path = tmp_path / "in.parquet"
    pq.write_table(table, str(path))
    inter, dead, _ = _read([str(path)], tmp_path / "p")
    got = sorted((x["session_id"], x["assistant_id"], x["qa_id"]) for x in inter)
    assert got == [("4", "1", "2"), ("5", "1", "0"), ("6", "1", "9007199254740992")], got
    reasons = sorted(d["reason"] for d in dead)
    assert len(reasons) == 3, reasons
    assert any(r.startswith("qa_id: is NaN, not an id") for r in reasons), reasons
    assert any(r.startswith("qa_id: is the number 2.5, not a whole number") for r in reasons), reasons
    assert any(r.startswith("session_id: is NaN, not an id") for r in reasons), reasons
    # pandas' own export: NaN written as null
    nulls = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"session_id": ["s1", "s2"], "assistant_id": ["a", "a"],
                             "qa_id": pa.array([1.0, None], pa.float64()), "query": ["q"] * 2, "assistant": ["a"] * 2}),
                   str(nulls))
    inter, dead, _ = _read([str(nulls)], tmp_path / "n")
    assert [x["qa_id"] for x in inter] == ["1"], inter
    assert [d["reason"] for d in dead] == ["qa_id: is required but missing"], dead  # a Parquet null is no value


def test_id_text():
    from fair_forge_beam.schemas.common import id_text

    assert [id_text(v) for v in ("x", 3, 3.0, -0.0, -7.0, 2.0 ** 53)] == ["x", "3", "3", "0", "-7", "9007199254740992"]
    assert id_text(True) is True  # the schema names its type
    for v in (None, float("nan"), float("-inf"), 0.5, 2.0 ** 53 + 2):
        with pytest.raises(ValueError):
            id_text(v)
