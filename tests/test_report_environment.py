"""report.html's template is compiled once per process (``reports.html._environment``): the
second report of a process (a test session, a process running several audits) reused to compile
the 26 KB template again, 0.09-0.1 CPU s each time (issue 26, docs/performance.md)."""
from __future__ import annotations

import jinja2

from fair_forge_beam.reports import html


def _doc(rate: float) -> dict:
    tox = {"slice": "overall", "n_interactions": 10, "n_toxic": 3,
           "toxic_rate": {"mean": rate, "ci_low": 0.1, "ci_high": 0.6, "n": 10}}
    return {"config": {"mode": "frequentist", "ci_level": 0.95, "seed": 1, "inputs": []},
            "metrics": {"toxicity": {"headline_columns": [], "slices": [tox]}}}


def test_the_template_is_compiled_once_and_renders_each_report(monkeypatch):
    compiled = []
    original = jinja2.Environment.compile

    def compile_(self, source, name=None, filename=None, raw=False, defer_init=False):
        compiled.append(name)
        return original(self, source, name, filename, raw, defer_init)

    monkeypatch.setattr(jinja2.Environment, "compile", compile_)
    if hasattr(html, "_environment"):
        html._environment.cache_clear()  # compiled afresh in this test
    first = html.render_report(_doc(0.3), with_plots=False)
    second = html.render_report(_doc(0.4), with_plots=False)
    again = html.render_report(_doc(0.3), with_plots=False)
    assert compiled.count("report.html.j2") == 1, compiled
    assert first == again != second  # each report its own content; the same document, the same page
