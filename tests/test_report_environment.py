"""report.html's template is compiled once per process (``reports.html._environment``): the
second report of a process (a test session, a process running several audits) reused to compile
the 26 KB template again, 0.09-0.1 CPU s each time (issue 26, docs/performance.md). And once for
all processes: the compiled code is kept in the user cache folder (``reports.template_cache``), used
only for the same source, syntax settings, filters and jinja2 version."""
from __future__ import annotations

import jinja2

from fair_forge_beam.reports import html


def _doc(rate: float) -> dict:
    tox = {"slice": "overall", "n_interactions": 10, "n_toxic": 3,
           "toxic_rate": {"mean": rate, "ci_low": 0.1, "ci_high": 0.6, "n": 10}}
    return {"config": {"mode": "frequentist", "ci_level": 0.95, "seed": 1, "inputs": []},
            "metrics": {"toxicity": {"headline_columns": [], "slices": [tox]}}}


def _count_compilations(monkeypatch) -> list:
    compiled = []
    original = jinja2.Environment.compile

    def compile_(self, source, name=None, filename=None, raw=False, defer_init=False):
        compiled.append(name)
        return original(self, source, name, filename, raw, defer_init)

    monkeypatch.setattr(jinja2.Environment, "compile", compile_)
    return compiled


def test_the_template_is_compiled_once_and_renders_each_report(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # an empty cache folder: compiled here
    compiled = _count_compilations(monkeypatch)
    if hasattr(html, "_environment"):
        html._environment.cache_clear()  # compiled afresh in this test
    first = html.render_report(_doc(0.3), with_plots=False)
    second = html.render_report(_doc(0.4), with_plots=False)
    again = html.render_report(_doc(0.3), with_plots=False)
    assert compiled.count("report.html.j2") == 1, compiled
    assert first == again != second  # each report its own content; the same document, the same page


def test_a_later_process_loads_the_compiled_template_and_renders_the_same_page(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    compiled = _count_compilations(monkeypatch)
    html._environment.cache_clear()
    first = html.render_report(_doc(0.3), with_plots=False)
    assert compiled == ["report.html.j2"]
    assert list((tmp_path / "xdg" / "fair_forge_beam" / "jinja2").glob("__jinja2_*.cache"))
    html._environment.cache_clear()  # as a new process: a new environment, nothing compiled in memory
    assert html.render_report(_doc(0.3), with_plots=False) == first
    assert compiled == ["report.html.j2"]  # loaded from the file, not compiled again
    html._environment.cache_clear()


def _env(source: str, fmt):
    env = jinja2.Environment(loader=jinja2.DictLoader({"t.j2": source}), autoescape=True)
    env.filters["fmt"] = fmt
    return env


def test_a_file_compiled_from_other_source_filters_or_settings_is_never_used(monkeypatch, tmp_path):
    from fair_forge_beam.reports.template_cache import use_bytecode_cache

    compiled = _count_compilations(monkeypatch)

    def render(source, fmt=lambda v: f"<{v}>", **settings):
        env = _env(source, fmt)
        for k, v in settings.items():
            setattr(env, k, v)
        assert use_bytecode_cache(env, str(tmp_path))
        return env.get_template("t.j2").render(x=1)

    assert render("a {{ x|fmt }}") == "a &lt;1&gt;" and len(compiled) == 1
    assert render("a {{ x|fmt }}") == "a &lt;1&gt;" and len(compiled) == 1  # the file: not compiled again
    assert render("b {{ x|fmt }}") == "b &lt;1&gt;" and len(compiled) == 2  # other source text
    assert render("b {{ x|fmt }}", fmt=lambda v: f"[{v}]") == "b [1]" and len(compiled) == 3  # another filter
    assert render("b {{ x|fmt }}\n", keep_trailing_newline=True) == "b &lt;1&gt;\n" and len(compiled) == 4


def test_a_cache_folder_that_cannot_be_made_or_written_costs_only_the_compilation(monkeypatch, tmp_path):
    from fair_forge_beam.reports.template_cache import use_bytecode_cache

    env = _env("a {{ x|fmt }}", str)
    assert not use_bytecode_cache(env, "/proc/x/jinja2") and env.bytecode_cache is None
    assert env.get_template("t.j2").render(x=1) == "a 1"
    gone = tmp_path / "gone"
    env = _env("a {{ x|fmt }}", str)
    assert use_bytecode_cache(env, str(gone))
    gone.rmdir()
    gone.write_text("a file where the folder was: no cache file can be read or written")
    assert env.get_template("t.j2").render(x=1) == "a 1"
    monkeypatch.setenv("XDG_CACHE_HOME", "/proc/x")  # the report itself, without a cache
    html._environment.cache_clear()
    try:
        assert "<html" in html.render_report(_doc(0.3), with_plots=False)
        assert html._environment().bytecode_cache is None
    finally:
        html._environment.cache_clear()
