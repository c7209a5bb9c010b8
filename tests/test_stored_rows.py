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
