"""Parquet outputs written as Arrow tables (issue 14 item 4), not row by row.

* :func:`_parquet_table` maps a batch of per-interaction records of several metrics onto the
  union schema exactly as the former row-by-row mapping did (the reference below): the record's
  own key, else ``<metric>_<key>``'s ``<key>``, else null; rows keep their order; API-key values
  are masked.
* The pipeline writes each Parquet shard as tables of at most ``PARQUET_BATCH_ROWS`` rows:
  a run with more rows than one batch gives several row groups of that size and the same rows.
"""
from __future__ import annotations

import json

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq

from fair_forge_beam.reports import results
from fair_forge_beam.io.write import to_json_line, write_parquet
from helpers import fnapi_pipeline

SCHEMA = pa.schema([
    ("metric", pa.string()), ("element_id", pa.string()), ("turn_index", pa.int64()),
    ("humanity_joy", pa.float64()), ("toxicity_is_toxic", pa.bool_()), ("toxicity_matched", pa.list_(pa.string())),
    ("shared", pa.string()),
])


def _reference_row(rec: dict) -> dict:
    """The former per-row mapping (reports/results.py before the batched writer)."""
    prefix = f"{rec.get('metric')}_"
    return {n: rec[n] if n in rec else (rec.get(n[len(prefix):]) if n.startswith(prefix) else None) for n in SCHEMA.names}


RECORDS = [
    {"metric": "humanity", "element_id": "s/a/0", "turn_index": 0, "joy": 0.25, "is_toxic": True},
    {"metric": "toxicity", "element_id": "s/a/0", "turn_index": 0, "is_toxic": False, "matched": ["x", "y"]},
    {"metric": "toxicity", "element_id": "s/a/1", "turn_index": 1, "is_toxic": True, "matched": [],
     "toxicity_is_toxic": False, "shared": "key sk-test-0123456789 here"},
    {"metric": "humanity", "element_id": "s/a/1", "turn_index": 1, "humanity_joy": 0.5, "joy": 9.0},
    {"metric": "humanity", "element_id": "s/b/0"},
    {"element_id": "no-metric", "turn_index": 3, "None_shared": "n"},
]


def test_batch_table_equals_the_row_by_row_mapping(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    monkeypatch.setenv("FAIR_FORGE_SECRET_ENVS", "OPENAI_API_KEY")  # a key variable the run uses (an endpoint registered it)
    table = results._parquet_table(SCHEMA)(RECORDS)
    assert table.schema == SCHEMA
    expected = [_reference_row(r) for r in RECORDS]
    expected[2]["shared"] = "key *** here"
    assert table.to_pylist() == expected


def _toxicity_session(sid, **kw):
    return {"metric": "toxicity", "level": "session", "session_id": sid, "assistant_id": "bot", "language": "english",
            "n_interactions": 3, "n_toxic": 1, "toxic_rate": {"mean": 0.4, "ci_low": 0.07, "ci_high": 0.81, "n": 3},
            "group_mentions": {"women": 2, "lgbtq": 1}, **kw}


def test_session_table_is_typed_columns_and_reads_back_as_the_records(monkeypatch):
    """Issue 27: one typed column per field of the metric's session model (structs, maps), no JSON."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    monkeypatch.setenv("FAIR_FORGE_SECRET_ENVS", "OPENAI_API_KEY")
    recs = [_toxicity_session("s1"), _toxicity_session("s2 sk-test-0123456789", group_mentions={}),
            _toxicity_session("s3", toxic_rate={"mean": 0.0, "ci_low": None, "ci_high": None, "n": 3})]
    table = results.session_table("toxicity")(recs)
    assert table.schema == results.session_schema("toxicity")
    assert table.schema.names == ["metric", "session_id", "assistant_id", "n_interactions", "language", "n_toxic",
                                  "toxic_rate", "group_mentions"]
    types = dict(zip(table.schema.names, table.schema.types))
    assert types["toxic_rate"] == pa.struct([("mean", pa.float64()), ("ci_low", pa.float64()), ("ci_high", pa.float64()),
                                             pa.field("n", pa.int64(), nullable=False)])
    assert types["group_mentions"] == pa.map_(pa.string(), pa.int64()) and types["n_toxic"] == pa.int64()
    assert not any(pa.types.is_string(t) and n == "record" for n, t in types.items())
    back = results.session_records(table)
    recs[1]["session_id"] = "s2 ***"
    assert back == recs  # the same records: keys, values and order of the maps


def test_session_table_refuses_a_field_its_model_does_not_declare():
    import pytest

    for bad, where in ((_toxicity_session("s1", extra=1), "extra"),
                       (_toxicity_session("s1", toxic_rate={"mean": 0.1, "n": 3, "median": 0.1}), "toxic_rate.median"),
                       (_toxicity_session("s1", level="slice"), "level")):
        with pytest.raises(ValueError, match="does not match its session model") as exc:
            results.session_table("toxicity")([bad])
        assert where in str(exc.value)


def test_session_shards_of_an_earlier_version_still_read():
    old = pa.schema([("metric", pa.string()), ("session_id", pa.string()), ("assistant_id", pa.string()),
                     ("n_interactions", pa.int64()), ("record", pa.string())])
    rec = _toxicity_session("s1")
    table = pa.Table.from_pylist([{"metric": "toxicity", "session_id": "s1", "assistant_id": "bot", "n_interactions": 3,
                                   "record": to_json_line(rec)}], schema=old)
    assert results.session_records(table) == [rec]


def test_pipeline_writes_row_groups_of_the_batch_size(tmp_path):
    n = 100
    recs = [{"metric": "humanity" if i % 3 else "toxicity", "element_id": f"e{i}", "turn_index": i, "joy": i / 4,
             "is_toxic": bool(i % 2), "matched": [str(i)]} for i in range(n)]
    with fnapi_pipeline() as p:
        write_parquet(p | beam.Create(recs), "T", str(tmp_path / "part"), SCHEMA, 40, results._parquet_table(SCHEMA))
    files = sorted(tmp_path.glob("part-*.parquet"))
    assert files
    groups = [pq.ParquetFile(f).metadata.row_group(i).num_rows for f in files for i in range(pq.ParquetFile(f).num_row_groups)]
    assert sum(groups) == n and max(groups) == 40, groups
    rows = pq.read_table([str(f) for f in files]).to_pylist() if len(files) > 1 else pq.read_table(files[0]).to_pylist()
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    assert sorted(map(key, rows)) == sorted(key(_reference_row(r)) for r in recs)


def _former_undeclared(value, t, path):
    """reports/results.py's walk before undeclared_checker (the struct's fields read per value)."""
    from fair_forge_beam.quoting import quoted

    if isinstance(value, dict) and pa.types.is_struct(t):
        names = {f.name: f.type for f in t}
        for k, v in value.items():
            if k not in names:
                return f"{path}.{k}"
            bad = _former_undeclared(v, names[k], f"{path}.{k}")
            if bad:
                return bad
    elif isinstance(value, dict) and pa.types.is_map(t):
        for k, v in value.items():
            bad = _former_undeclared(v, t.item_type, f"{path}[{quoted(k)}]")
            if bad:
                return bad
    elif isinstance(value, (list, tuple)) and (pa.types.is_list(t) or pa.types.is_large_list(t)):
        for i, v in enumerate(value):
            bad = _former_undeclared(v, t.value_type, f"{path}[{i}]")
            if bad:
                return bad
    return None


def test_undeclared_checker_finds_what_the_former_walk_found():
    """The session writers' check, built once per column type (undeclared_checker), names the same
    first undeclared path as the former per-value walk on random nested types and values (declared
    and stray keys, maps, lists, large lists, tuples, wrong shapes); a leaf type needs no checker."""
    import random

    rng = random.Random(7)
    leaves = [pa.float64(), pa.int64(), pa.string(), pa.bool_()]

    def a_type(depth):
        kind = rng.choice(["leaf", "leaf", "struct", "map", "list", "large_list"] if depth < 3 else ["leaf"])
        if kind == "leaf":
            return rng.choice(leaves)
        if kind == "struct":
            return pa.struct([(f"f{i}", a_type(depth + 1)) for i in range(rng.randint(1, 4))])
        if kind == "map":
            return pa.map_(pa.string(), a_type(depth + 1))
        return (pa.list_ if kind == "list" else pa.large_list)(a_type(depth + 1))

    def a_value(t, depth=0):
        if rng.random() < 0.1 or depth > 4:  # a value of another shape, or none
            return rng.choice([None, 1, "x", [1], {"f0": 1}, {"zz": 2}, (3,)])
        if pa.types.is_struct(t):
            names = [f.name for f in t]
            keys = rng.sample(names, rng.randint(0, len(names))) + (["stray"] if rng.random() < 0.15 else [])
            rng.shuffle(keys)
            return {k: a_value(t.field(k).type, depth + 1) if k in names else 0 for k in keys}
        if pa.types.is_map(t):
            return {f"k{i}": a_value(t.item_type, depth + 1) for i in range(rng.randint(0, 3))}
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            items = [a_value(t.value_type, depth + 1) for _ in range(rng.randint(0, 3))]
            return tuple(items) if rng.random() < 0.3 else items
        return rng.choice([1.5, 2, "s", True, None])

    found = 0
    for _ in range(3000):
        t = a_type(0)
        check = results.undeclared_checker(t)
        for _ in range(5):
            v = a_value(t)
            want = _former_undeclared(v, t, "col")
            assert (None if check is None else check(v, "col")) == want, (t, v)
            assert results._undeclared(v, t, "col") == want
            found += want is not None
    assert found > 500  # the random values do hold stray keys
    assert results.undeclared_checker(pa.list_(pa.map_(pa.string(), pa.float64()))) is None
