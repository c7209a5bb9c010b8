"""The rules a stored row table's rows keep (:func:`~fair_forge_beam.io.session_stats.stored_rows_problem`):
a run folder read back (roll-up) is data from outside (issue 28, trial B6)."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fair_forge_beam.io.session_stats import stored_rows_problem


def _problem(tmp_path, table) -> str | None:
    pq.write_table(table, tmp_path / "t.parquet")
    return stored_rows_problem(pq.ParquetFile(tmp_path / "t.parquet"))


@pytest.mark.parametrize("columns,named", [
    ({"session_id": ["a", None], "assistant_id": ["x", "y"]}, "row 2: column 'session_id' is null"),
    ({"session_id": ["a", "b"], "assistant_id": ["x", "y"], "language": [None, "en"]}, "row 1: column 'language' is null"),
    ({"session_id": [1, 2], "assistant_id": ["x", "y"]}, "column 'session_id' holds int64, not text"),
    ({"session_id": ["a", "b"], "n_interactions": [3, -5]}, "row 2: column 'n_interactions' is -5 (a count is never negative)"),
    ({"session_id": ["a", "b"], "n_interactions": [3, None]}, "row 2: column 'n_interactions' is null"),
])
def test_a_row_that_breaks_the_stored_rules_is_named(tmp_path, columns, named):
    assert _problem(tmp_path, pa.table(columns)) == named


def test_rows_that_keep_the_rules_pass(tmp_path):
    assert _problem(tmp_path, pa.table({"session_id": ["a", ""], "assistant_id": ["x", "y"], "language": ["en", "es"],
                                        "n_interactions": [0, 7], "score": [-1.0, None]})) is None
    assert _problem(tmp_path, pa.table({"slice": ["overall"]})) is None


_SESSION = pa.list_(pa.struct([pa.field("turn_index", pa.int64(), nullable=False), ("weight", pa.float64()),
                               pa.field("counts", pa.list_(pa.int64()), nullable=False)]))
_TOXICITY = pa.struct([("a", pa.int64()), ("b", pa.int64()), ("counts", pa.map_(pa.int64(), pa.int64()))])
_ACC = pa.struct([("session", pa.struct([("n_units", pa.int64()), ("sums", pa.list_(pa.binary()))])), ("n", pa.int64())])


def _nested(**columns) -> pa.Table:
    types = {"humanity__session": _SESSION, "toxicity__session": _TOXICITY, "toxicity__acc": _ACC}
    return pa.table({"session_id": ["s1", "s2"], **{k: pa.array(v, types[k]) for k, v in columns.items()}})


_GOOD_SESSION = [{"turn_index": 0, "weight": None, "counts": [1, 0]}]


@pytest.mark.parametrize("columns,named", [
    # issue 28: a count inside a stored accumulator (a list's items, a struct's field, a map's values)
    ({"humanity__session": [_GOOD_SESSION, [{"turn_index": 1, "weight": 1.0, "counts": [2, -3]}]]},
     "row 2: column 'humanity__session', field 'humanity__session[].counts[]' is -3 (a count is never negative)"),
    ({"toxicity__session": [{"a": 1, "b": 0, "counts": [(0, 1)]}, {"a": 2, "b": 1, "counts": [(0, 2), (1, -1)]}]},
     "row 2: column 'toxicity__session', field 'toxicity__session.counts[value]' is -1 (a count is never negative)"),
    ({"toxicity__acc": [{"session": {"n_units": -2, "sums": []}, "n": 1}, None]},
     "row 1: column 'toxicity__acc', field 'toxicity__acc.session.n_units' is -2 (a count is never negative)"),
    ({"toxicity__acc": [{"session": {"n_units": 2, "sums": []}, "n": 1}, {"session": None, "n": None}]},
     "row 2: column 'toxicity__acc', field 'toxicity__acc.n' is null"),
    ({"toxicity__acc": [{"session": {"n_units": None, "sums": []}, "n": 1}, None]},
     "row 1: column 'toxicity__acc', field 'toxicity__acc.session.n_units' is null"),
])
def test_a_nested_field_that_breaks_the_stored_rules_is_named(tmp_path, columns, named):
    assert _problem(tmp_path, _nested(**columns)) == named


def test_nested_rules_follow_the_stored_schema_and_parents(tmp_path):
    # a null struct or list (the metric had nothing there) holds no field to check; a nullable float is free
    assert _problem(tmp_path, _nested(
        humanity__session=[_GOOD_SESSION, None],
        toxicity__session=[None, {"a": 0, "b": 0, "counts": []}],
        toxicity__acc=[None, {"session": None, "n": 0}])) is None
    # a field the stored schema declares not null, null where its parent holds a value (a file
    # another writer made: pyarrow refuses to write one), is named as a null count is
    from fair_forge_beam.io.session_stats import _nested_problem

    import numpy as np

    field = pa.field("humanity__session", _SESSION)
    arr = pa.array([_GOOD_SESSION, [{"turn_index": None, "weight": 1.0, "counts": []}]], _SESSION)
    assert _nested_problem(arr, field, np.arange(2), np.ones(2, bool), "humanity__session") == (
        1, "humanity__session[].turn_index", "null")
