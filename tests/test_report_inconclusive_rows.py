"""Every row of every report table marks an interval wider than ``--inconclusive-width`` (trial49 B5).

The scorecard's "all interactions" row was drawn without its cells' ``inconclusive`` mark: a
Bayesian ``0.451 [0.237, 0.690]`` stood unmarked while a narrower assistant cell was marked, even
with ``--inconclusive-width 0.01``; a metric's "too small to judge" table drew its cells without
their flags while the section counted them. docs/report.md: a cell is marked when its interval is
wider than the width (and not settled by a gate or reference line).
"""
from __future__ import annotations

import re

from fair_forge_beam.reports.html import render_report


def _rate(mean, lo, hi, n):
    return {"mean": mean, "ci_low": lo, "ci_high": hi, "n": n}


def _slice(key, mean, lo, hi, n, sessions):
    return {"slice": key, "n_interactions": n, "n_sessions": sessions, "n_toxic": round(mean * n),
            "toxic_rate": _rate(mean, lo, hi, n)}


DOC = {"config": {"mode": "bayesian", "ci_level": 0.95, "seed": 1, "inputs": [], "beta_prior_a": 1.0, "beta_prior_b": 1.0},
       "summary": {"interactions_read": 60},
       "metrics": {"toxicity": {"headline_columns": ["toxic_rate"], "slices": [
           # every interval straddles the reference line 0.10: none is settled by it
           _slice("overall", 0.12, 0.02, 0.30, 60, 30),
           _slice("assistant_id=a", 0.11, 0.08, 0.14, 40, 20),   # width 0.06
           _slice("assistant_id=b", 0.15, 0.01, 0.45, 20, 10),   # width 0.44
       ]}}}


def _rows(html: str, table_class_or_id: str) -> list[str]:
    start = html.index(table_class_or_id)
    end = html.index("</table>", start)
    return re.findall(r"<tr[^>]*>.*?</tr>", html[start:end], re.S)


def test_every_row_of_the_scorecard_and_of_the_slice_tables_is_marked_inconclusive():
    html = render_report(DOC, with_plots=False, inconclusive_width=0.1)
    card = _rows(html, '<table class="card">')
    overall = next(r for r in card if "all interactions" in r)
    assert "0.120 [0.020, 0.300]" in overall  # width 0.28 > 0.1, straddles the reference line 0.10
    assert 'class="mark">inconclusive' in overall and ' inc"' in overall, overall
    assert "inconclusive" not in next(r for r in card if "<strong>a</strong>" in r)  # width 0.06: judged, unmarked
    # b (width 0.44, its only headline too wide) is too small to judge: its cell in the metric's table is flagged
    assert "(1 of them in slices too small to judge)" in html
    row = next(r for r in _rows(html, '<div class="small-slices">') if "0.1500 [0.0100, 0.4500]" in r)
    assert 'class="flag"' in row and "inconclusive" in row, row
    # a width the overall interval is within: no mark on it
    html = render_report(DOC, with_plots=False, inconclusive_width=0.3)
    overall = next(r for r in _rows(html, '<table class="card">') if "all interactions" in r)
    assert "inconclusive" not in overall
