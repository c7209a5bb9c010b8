"""The self-contained HTML audit report (``report.html``), rendered on the driver after the pipeline.

    from fair_forge_beam.reports.html import write_report
    write_report("out/")                                   # -> out/report.html
    write_report("out/", compare_with="out_before/")      # + a comparison section

Input: the run folder's ``results.json``, ``run_info.json``, its dead-letter shards (counted,
streamed) and its session shards (binned, streamed: the session histograms). Output:
one HTML file with inline CSS and inline SVG plots — no external font, image, script or
style sheet, so it opens offline in any browser. Its size is bounded whatever the number of
assistants: the scorecard shows the :data:`~.scorecard.MAX_CARD_ROWS` worst, each metric's tables
the :data:`MAX_TABLE_ROWS` worst slices; with more assistants than the scorecard shows, a
filterable table of all of them follows (its rows are JSON data in the page, drawn by one small
inline script, :data:`FILTER_SCRIPT`, allowed by its hash in the Content-Security-Policy; the
script only sets text, so data is never parsed as HTML). The template is
``fair_forge_beam/templates/report.html.j2`` (package data; ``templates/report.html.j2`` in the
repository is a link to it), rendered by jinja2 with autoescaping on: every value from the
data (slice names, reasons, raw dead-letter records) is escaped; the SVG plots are produced by
matplotlib, which escapes their text itself.

Sections, in reading order (docs/report.md): the findings (``<section id="summary">``: the worst
assistant and its worst metric, a scorecard per assistant coloured against gates or reference
lines, assistants too small to judge named together, the largest credible between-assistant
differences, plain definitions and what the toxicity number measures; see
:mod:`fair_forge_beam.reports.scorecard`); per metric its definitions, a slice table in human
labels (slices too small to judge folded into one line), every estimate in a collapsible table,
plots (:mod:`fair_forge_beam.reports.plots`) and the inconclusive flags of judged slices;
optionally the comparison with another run (:mod:`fair_forge_beam.reports.compare`); the
dead-letter summary; the run details (inputs, records read/rejected, metrics, mode, seed, runner,
versions, judge/guardian and their call counters, lexicon licences). Undefined estimates
(:func:`~fair_forge_beam.reports.scorecard.is_undefined`) are shown as "n/a".

**Inconclusive — collect more data.** An estimate is flagged when its interval is wider than
``inconclusive_width`` (default 0.2) on its natural scale divided by the scale's length
(declared by the metric's info, :func:`~fair_forge_beam.reports.estimates.value_range`: e.g. a 0–10 judge score counts width/10).
The number of interactions needed uses ``width ∝ 1/√n``: ``n_needed ≈ n_obs · (w_obs /
w_target)²`` for the estimate's own units, scaled to the slice's interactions in the same
ratio. Frequentist runs have no intervals; rates with stored counts ``(k, n)`` are then checked
with the Wald width ``2z·√(p̃(1−p̃)/ñ)`` at ``p̃ = (k+1)/(n+2)``, ``ñ = n+2``, and
``n_needed = (2z)²·p̃(1−p̃)/w²``. Both are approximations (normal, rate held at its observed value).
"""
from __future__ import annotations

import functools
import json
from importlib import metadata
from typing import Any, Optional, Sequence, Union

from fair_forge_beam.quoting import fixed, fixed_estimate
from fair_forge_beam.reports.estimates import counts_for, iter_estimates, value_range
from fair_forge_beam.plain import folder_path
from fair_forge_beam.reports.load import run_config
from fair_forge_beam.reports.summary import REPORT_UNSCORED_NAMES, left_out_what, unscored_assistants, unscored_words  # noqa: F401 - here too
from fair_forge_beam.statistical.compare import normal_quantile

__all__ = ["write_report", "render_report", "inconclusive", "DEFAULT_INCONCLUSIVE_WIDTH", "MAX_FLAGS"]

DEFAULT_INCONCLUSIVE_WIDTH = 0.2
#: flagged estimates listed per metric (the rest are counted)
MAX_FLAGS = 60
#: rows of the per-metric "all estimates" table (the rest are counted; load_results has them all)
MAX_ESTIMATE_ROWS = 600
#: comparison rows listed (detectable differences first)
MAX_COMPARE_ROWS = 200
#: rows of a metric's slice table and of its "too small to judge" table (worst first; the rest are in
#: the filterable table of all assistants and in results.json)
MAX_TABLE_ROWS = 40
#: the filterable table of all assistants is drawn when there are more than the scorecard shows
#: (its rows are data in the page, rendered by a small script at most FILTER_ROWS at a time)
FILTER_ROWS = 200
#: the report's one script: filters the table of all assistants (textContent only: data is never
#: parsed as HTML); allowed by its hash in the page's Content-Security-Policy
FILTER_SCRIPT = """(function () {
  var data = JSON.parse(document.getElementById("assistant-data").textContent);
  var box = document.getElementById("assistant-filter"), beyond = document.getElementById("assistant-beyond");
  var body = document.getElementById("assistant-rows"), count = document.getElementById("assistant-count");
  var limit = parseInt(body.getAttribute("data-limit"), 10);
  function cell(tr, text, cls) { var td = document.createElement("td"); td.textContent = text; if (cls) td.className = cls; tr.appendChild(td); }
  function draw() {
    var q = box.value.trim().toLowerCase(), only = beyond.checked, shown = 0, matched = 0;
    while (body.firstChild) body.removeChild(body.firstChild);
    for (var i = 0; i < data.length; i++) {
      var r = data[i];
      if (q && r[0].toLowerCase().indexOf(q) < 0) continue;
      if (only && !r[4]) continue;
      matched++;
      if (shown >= limit) continue;
      shown++;
      var tr = document.createElement("tr");
      cell(tr, r[0]); cell(tr, String(r[1]), "num"); cell(tr, String(r[2]), "num");
      for (var j = 0; j < r[5].length; j++) cell(tr, r[5][j][0], "num " + r[5][j][1]);
      cell(tr, r[3]);
      body.appendChild(tr);
    }
    count.textContent = matched + " of " + data.length + " assistants match" + (matched > shown ? "; the first " + shown + " are shown (worst first): narrow the filter" : "");
  }
  box.addEventListener("input", draw); beyond.addEventListener("change", draw); draw();
})();"""

_REPORT_PACKAGES = ("jinja2", "matplotlib", "pandas")


def _fmt(x, digits: int = 4) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return fixed(x, digits)
    return str(x)


def _fmt_est(e: Optional[dict]) -> str:
    return fixed_estimate(e, number=_fmt)


def _text(metric: str, path: str, est: Optional[dict]) -> str:
    """An estimate as shown: ``n/a`` when undefined (:func:`~.scorecard.is_undefined`)."""
    from fair_forge_beam.reports.estimates import is_undefined

    if is_undefined(metric, path, est):
        return "n/a"
    from fair_forge_beam.statistical.slices import NO_OBSERVATION_NOTE, one_session_note

    note = one_session_note(est)
    if note is not None:  # the one-session rule (statistical.slices.behind), marked as everywhere
        return f"{'n/a' if note == NO_OBSERVATION_NOTE else _fmt_est(est)} ({note})"
    return _fmt_est(est)


def _definitions(name: str, heads: list[str]) -> list[dict]:
    """The definitions at the top of a metric's section: its headline estimates', then those of the
    other estimates its info marks ``explained`` (a keyed family once, its key shown as ``<group>``)."""
    from fair_forge_beam.reports.estimates import info_of

    info = info_of(name)
    if info is None:
        return []
    return [{"label": e.label_for(key) if key is not None or not e.keyed else e.label_for(f"<{e.key_name}>"),
             "text": e.definition} for e, key in info.explained(heads)]


def _group_flags(flags: list[dict]) -> list[dict]:
    """Headline flags one per row (slice order); the other flags of a slice (group shares, emotion
    shares …) in one row per slice naming them, with the widest interval and the largest numbers
    needed."""
    heads = [f for f in flags if f["headline"]]
    others: dict[str, list[dict]] = {}
    for f in flags:
        if not f["headline"]:
            others.setdefault(f["slice"], []).append(f)
    rows = list(heads)
    for sl, fs in others.items():
        if len(fs) == 1:
            rows.append(fs[0])
            continue
        names = ", ".join(f["estimate"] for f in fs[:4]) + (f" and {len(fs) - 4} more" if len(fs) > 4 else "")
        widest = max(fs, key=lambda f: f["relative_width"])
        needed = [f["n_needed"] for f in fs if f["n_needed"] is not None]
        inter = [f["interactions_needed"] for f in fs if f["interactions_needed"] is not None]
        rows.append({**widest, "estimate": f"{len(fs)} other estimates: {names}", "group": True,
                     "n": f"{min(f['n'] for f in fs)}–{max(f['n'] for f in fs)}",
                     "n_needed": max(needed) if needed else None,
                     "interactions_needed": max(inter) if inter else None})
    return rows


def _metric_section(name: str, m: dict, summary: dict, config: dict, width: float, with_plots: bool,
                    gates: Sequence[Any] = ()) -> dict:
    from fair_forge_beam.reports.plots import metric_figures
    from fair_forge_beam.reports.estimates import is_undefined
    from fair_forge_beam.reports.scorecard import bayes_prior, estimate_label, inconclusive, slice_label, too_small

    heads = list(m.get("headline_columns") or [])
    level, prior = run_config(config).ci_level, bayes_prior(config)
    table, small, all_rows, flags = [], [], [], []
    n_estimate_rows = n_flags = n_small_flags = 0
    for rec in m.get("slices", []):
        counts = counts_for(name, rec)
        why_small = too_small(name, rec, heads, width, level, gates)
        head_cells = {}
        for path, est in iter_estimates(name, rec, heads):
            # the scorecard's decider, with the run's gates: the same label on every surface
            flag = None if is_undefined(name, path, est) else inconclusive(name, path, est, rec, width, level, counts,
                                                                           gates, prior=prior)
            text = _text(name, path, est)
            if path in heads:
                head_cells[path] = {"text": text, "n": est.get("n"), "flag": flag,
                                    "mean": None if is_undefined(name, path, est) else est.get("mean")}
            n_estimate_rows += 1
            if len(all_rows) < MAX_ESTIMATE_ROWS:
                all_rows.append({"slice": slice_label(rec.get("slice")), "key": rec.get("slice"),
                                 "estimate": estimate_label(name, path), "path": path, "text": text,
                                 "n": est.get("n"), "flag": flag})
            if flag:
                n_flags += 1
                if why_small:
                    n_small_flags += 1
                    continue
                scale = value_range(name, path)
                flags.append({"slice": slice_label(rec.get("slice")), "estimate": estimate_label(name, path),
                              "headline": path in heads, "scale": scale, **flag})
        row = {"slice": slice_label(rec.get("slice")), "key": rec.get("slice"), "n_interactions": rec.get("n_interactions"),
               "n_sessions": rec.get("n_sessions"), "small": why_small,
               "cells": [head_cells.get(h) or {"text": "n/a", "n": None, "flag": None} for h in heads]}
        (small if why_small else table).append(row)
    flags = _group_flags(flags)
    table = _worst_first(name, heads, table)
    small = _worst_first(name, heads, small)
    ms = (summary.get("metrics") or {}).get(name, {})
    return {
        "name": name,
        "headline": heads,
        "headline_labels": [estimate_label(name, h) for h in heads],
        "definitions": _definitions(name, heads),
        "table": table[:MAX_TABLE_ROWS],
        "table_left": max(0, len(table) - MAX_TABLE_ROWS),
        "n_table": len(table),
        "small": small[:MAX_TABLE_ROWS],
        "small_left": max(0, len(small) - MAX_TABLE_ROWS),
        "n_small": len(small),
        "all_rows": all_rows,
        "all_rows_left": n_estimate_rows - len(all_rows),
        "flags": flags[:MAX_FLAGS],
        "flags_left": len(flags) - min(len(flags), MAX_FLAGS),
        "n_flags": n_flags,
        "n_small_flags": n_small_flags,
        "scored": ms.get("interactions_scored", ms.get("scored")),
        "not_scored": ms.get("interactions_not_scored"),
        "left_out": ms.get("interactions_left_out") or 0,
        "left_out_what": left_out_what(name),
        "dead_letters": ms.get("dead_letters", ms.get("not_scored")),
        "dead_letter_unit": ms.get("dead_letter_unit") or "dead-lettered records",
        "dead_letter_reasons": ms.get("dead_letter_reasons", ms.get("not_scored_reasons")) or {},
        "stage_dead_letters": {k: v for k, v in (ms.get("stage_dead_letters") or {}).items() if isinstance(v, dict)},
        "figures": metric_figures(name, m, config) if with_plots else [],
        "n_sessions_total": _n_sessions(m),
        "n_sessions_scored": _n_sessions_scored(name, m),
    }


def _worst_first(name: str, heads: list, rows: list) -> list:
    """Slice-table rows, ``overall`` first, then worst first by the first headline estimate with a
    better side (its bad end first; undefined values last; ties by slice key); rows keep their
    order when no headline estimate has a better side."""
    from fair_forge_beam.reports.estimates import direction, is_undefined

    path = next((h for h in heads if direction(name, h)), None)
    if path is None:
        return rows
    sign = direction(name, path)
    i = heads.index(path)

    def key(row):
        if row["key"] == "overall":
            return (0, 0, 0.0, "")
        mean = row["cells"][i].get("mean")
        if mean is None:
            return (1, 1, 0.0, str(row["key"]))
        return (1, 0, sign * mean, str(row["key"]))

    return sorted(rows, key=key)


def _assistant_rows(card: dict) -> list:
    """The filterable table's data: one row per assistant of the scorecard, judged ones worst first,
    then those too small to judge: ``[label, interactions, sessions, why not judged ("" when
    judged), beyond a threshold (bool), [[cell text, cell status], ...]]`` (plain values: the page
    embeds them as JSON, the script sets them as text)."""
    out = []
    for r in card.get("rows") or []:
        out.append([r["assistant"], r["n_interactions"], r["n_sessions"], "", r.get("worst") is not None,
                    [[c["text"] + (" (inconclusive)" if c.get("inconclusive") else ""), c["status"]] for c in r["cells"]]])
    for r in card.get("small") or []:
        out.append([r["assistant"], r["n_interactions"], r["n_sessions"], f"too small to judge: {r['reason']}", False,
                    [[c["text"] + (" (inconclusive)" if c.get("inconclusive") else ""), "na"] for c in r["cells"]]])
    return out


def _n_sessions(m: dict) -> Optional[int]:
    dist = m.get("session_distributions")
    if dist is not None:
        return dist["n_sessions"]
    if m.get("sessions") is not None:
        return len(m["sessions"])
    return None


def _n_sessions_scored(name: str, m: dict) -> Optional[int]:
    """The sessions the metric's estimates rest on: the overall slice's session count
    (:func:`~fair_forge_beam.reports.estimates.sessions_of`: ``n_sessions``, BestOf's
    ``n_blocks``; the engine's scored sessions, ``MetricSpec.scored``), the count the slice table
    shows; ``None`` without an overall slice that states it."""
    from fair_forge_beam.reports.estimates import sessions_of

    for rec in m.get("slices") or ():
        if rec.get("slice") == "overall":
            return sessions_of(name, rec)
    return None


def with_session_distributions(doc: dict, run_dir: Optional[str]) -> dict:
    """``doc`` with each metric's binned session values (:func:`~.plots.session_distributions`)
    read from the run's ``sessions/<metric>/`` Parquet shards, streamed: the report's memory
    does not grow with the number of sessions. Metrics that already carry ``sessions`` or
    ``session_distributions`` (documents built in memory) are left as they are."""
    from fair_forge_beam.reports.load import _metric_shards, iter_sessions
    from fair_forge_beam.reports.plots import session_distributions

    if not run_dir:
        return doc
    metrics = {}
    for name, m in doc.get("metrics", {}).items():
        if m.get("sessions") is None and m.get("session_distributions") is None and _metric_shards(run_dir, "sessions", name):
            m = {**m, "session_distributions": session_distributions(name, iter_sessions(run_dir, name))}
        metrics[name] = m
    return {**doc, "metrics": metrics}


def _models(doc: dict, run_info: dict) -> list[dict]:
    """Judge / guardian models named by the slices, with the run's Beam counters when recorded."""
    out = []
    counters = run_info.get("judge_counters") or {}
    for name, m in doc["metrics"].items():
        rec = (m.get("slices") or [{}])[0]
        for field, kind in (("judge_model", "judge"), ("guardian", "guardian")):
            if rec.get(field):
                out.append({"metric": name, "kind": kind, "model": rec[field], "counters": counters.get(kind)})
    return out


def _licences(doc: dict) -> list[dict]:
    seen, out = set(), []
    for name, m in doc["metrics"].items():
        lex, lic = m.get("lexicon"), m.get("lexicon_licence")
        if not lex:
            rec = (m.get("slices") or [{}])[0]
            lex, lic = rec.get("lexicon"), rec.get("lexicon_licence")
        if lex and (lex, lic) not in seen:
            seen.add((lex, lic))
            out.append({"metric": name, "lexicon": lex, "licence": lic})
        scorer = m.get("scorer")  # a scorer that is not the lexicon (Toxicity's classifier: trial38 T9)
        if isinstance(scorer, dict) and scorer.get("kind") != "lexicon" and scorer.get("name"):
            what = " ".join(str(scorer[k]) for k in ("name", "version") if scorer.get(k))
            what += f" ({scorer['kind']}, package {scorer['package']})" if scorer.get("package") else ""
            if (what, scorer.get("licence")) not in seen:
                seen.add((what, scorer.get("licence")))
                out.append({"metric": name, "lexicon": what, "licence": scorer.get("licence")})
    return out


def _versions(run_info: dict) -> dict:
    v = dict(run_info.get("versions") or {})
    for pkg in _REPORT_PACKAGES:
        try:
            v.setdefault(pkg, metadata.version(pkg))
        except metadata.PackageNotFoundError:
            pass
    return v


def _comparison_view(cmp: dict) -> dict:
    from fair_forge_beam.reports.compare import read_as

    detect = ("better", "worse", "higher", "lower")
    rows = sorted(cmp["rows"], key=lambda r: (r["verdict"] not in detect,))
    shown = rows[:MAX_COMPARE_ROWS]
    return {
        **{k: cmp[k] for k in ("current", "baseline", "ci_level", "methods", "verdicts", "undefined_in_both",
                               "only_in_current", "only_in_baseline", "seed", "draws")},
        "differences": [d["message"] for d in cmp.get("differences") or []],
        "shared_data": cmp.get("shared_data"),
        # an older layout's baseline: what it lacks, and the data the runs may share (trial37 T9)
        "missing": list(cmp.get("missing") or ()),
        "possibly_shared_data": cmp.get("possibly_shared_data"),
        "rows": [{**r, "current_text": _fmt_est(r["current"]), "baseline_text": _fmt_est(r["baseline"]) + read_as(r["baseline"], r.get("method"), _fmt_est),
                  "difference_text": _fmt_est(r["difference"])} for r in shown],
        "rows_left": len(rows) - len(shown),
        "n_detectable": sum(1 for r in rows if r["verdict"] in detect),
        "n_too_small": sum(1 for r in rows if r.get("too_small")),
    }


@functools.lru_cache(maxsize=1)
def _environment():
    """The report's jinja2 environment, made once per process: it keeps the template it compiled
    (jinja2's own cache, which recompiles a template whose file changed), so the second report of a
    process (a test session, a process running several audits) does not compile the 26 KB template
    again (0.09-0.1 CPU s each time, docs/performance.md). Its filters never change."""
    from jinja2 import Environment, PackageLoader

    from fair_forge_beam.quoting import shown, shown_key

    env = Environment(loader=PackageLoader("fair_forge_beam", "templates"), autoescape=True,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["fmt"] = _fmt
    env.filters["shown"], env.filters["shown_key"] = shown, shown_key  # values from the data, as a person reads them
    return env


def render_report(doc: dict, run_info: Optional[dict] = None, dead_letters: Optional[dict] = None,
                  comparison: Optional[dict] = None, inconclusive_width: float = DEFAULT_INCONCLUSIVE_WIDTH,
                  with_plots: bool = True, title: str = "fair_forge_beam audit report",
                  gates: Optional[list] = None, gate_outcome: Optional[dict] = None) -> str:
    """The report as an HTML string.

    Args:
        doc: the content of ``results.json``.
        run_info: the content of ``run_info.json`` (runner, seconds, versions, judge counters).
        dead_letters: :func:`~fair_forge_beam.reports.load.dead_letter_summary` of the run.
        comparison: :func:`~fair_forge_beam.reports.compare.compare_runs` result (optional).
        inconclusive_width: target interval width on a 0–1 scale, in (0, 1].
        with_plots: draw the SVG plots (off: tables only, faster).
        gates: the run's :class:`~fair_forge_beam.reports.gates.Gate` list: the scorecard colours a
            cell against the gate covering it, else against the documented reference lines
            (:func:`~fair_forge_beam.reports.scorecard.reference_line`).
        gate_outcome: ``gates.json``'s content (:func:`~fair_forge_beam.reports.gates.gates_report`):
            the findings say which gates passed, failed and were skipped (compared nothing).

    Raises:
        ValueError: ``inconclusive_width`` outside (0, 1].
    """
    if not 0 < inconclusive_width <= 1:
        raise ValueError(f"inconclusive_width must be in (0, 1], got {inconclusive_width}")
    run_info = run_info or {}
    config, summary = doc.get("config", {}), doc.get("summary", {})
    env = _environment()
    sections = [_metric_section(n, m, summary, config, inconclusive_width, with_plots, gates or ())
                for n, m in doc["metrics"].items()]
    from fair_forge_beam.reports.scorecard import credible_differences, findings_headline, scorecard, toxicity_measure

    card = scorecard(doc, inconclusive_width, gates or ())
    card["unscored"] = unscored_assistants(doc, dead_letters)
    card["unscored_words"] = unscored_words(card["unscored"], REPORT_UNSCORED_NAMES)
    differences = credible_differences(doc, card)
    checks = None
    if gates and gate_outcome is None:  # called without the job's outcome: the gates this page can evaluate
        # from results.json (a regression gate needs its baseline run)
        from fair_forge_beam.reports.gates import evaluate_gates

        checks = evaluate_gates(doc, [g for g in gates if getattr(g, "kind", "threshold") != "regression"])
    headline = findings_headline(card, differences, checks, gate_outcome)
    failed_names = {f["assistant"] for f in headline["gate_failed"]}
    for r in card["small"]:
        r["gate_failed"] = r["assistant"] in failed_names
    assistants = _assistant_rows(card)
    filterable = len(assistants) > card["max_rows"]
    script_hash = None
    if filterable:
        import base64
        import hashlib

        script_hash = base64.b64encode(hashlib.sha256(FILTER_SCRIPT.encode("utf-8")).digest()).decode("ascii")
    tox = doc["metrics"].get("toxicity")
    return env.get_template("report.html.j2").render(
        headline=headline,
        assistants=assistants if filterable else None,
        filter_script=FILTER_SCRIPT,
        filter_rows=FILTER_ROWS,
        script_hash=script_hash,
        title=title,
        config=config,
        summary=summary,
        run_info=run_info,
        versions=_versions(run_info),
        models=_models(doc, run_info),
        licences=_licences(doc),
        metrics=sections,
        card=card,
        differences=differences,
        toxicity_measure=toxicity_measure(tox, run_info) if tox else None,
        gates=bool(gates),
        gate_outcome=gate_outcome,
        dead=dead_letters or {"total": 0, "by_stage": {}, "by_reason": [], "first": [], "unreadable": 0},
        comparison=_comparison_view(comparison) if comparison else None,
        width=inconclusive_width,
        z=normal_quantile(run_config(config).ci_level),
    )


def write_report(run_dir: str, out_path: Optional[str] = None, compare_with: Union[str, dict, None] = None,
                 inconclusive_width: float = DEFAULT_INCONCLUSIVE_WIDTH, doc: Optional[dict] = None,
                 run_info: Optional[dict] = None, with_plots: bool = True, gates: Optional[list] = None,
                 compare_info: Optional[dict] = None, gate_outcome: Optional[dict] = None,
                 dead_letters: Optional[dict] = None, compare_dir: Optional[str] = None,
                 shown: Optional[str] = None) -> str:
    """Render ``<run_dir>/report.html`` (or ``out_path``) from the run folder; returns the path.

    Args:
        run_dir: the run folder (``results.json``, ``run_info.json``, ``dead_letter/`` and
            ``sessions/`` shards).
        out_path: where to write (default ``<run_dir>/report.html``); any Beam filesystem.
        compare_with: a baseline run (folder or loaded ``results.json``) to compare with; the
            comparison is also written next to the report as ``comparison.json``.
        inconclusive_width: see :func:`render_report`.
        doc / run_info: already-loaded ``results.json`` / ``run_info.json`` (skips reading).
        compare_info: the baseline run's ``run_info.json`` content; with ``run_info`` the comparison
            section (and ``comparison.json``) states every differing option and package version
            (:func:`~fair_forge_beam.reports.compare.run_differences`), not only mode and metrics.
        gates / gate_outcome: see :func:`render_report`.
        dead_letters: the run's :func:`~fair_forge_beam.reports.load.dead_letter_summary`, when the
            caller has read it (skips reading the shards again).
        compare_dir: the baseline's run folder when ``compare_with`` is its loaded ``results.json``
            (default: ``compare_with`` when a folder): with ``run_dir``, the comparison says the data
            both runs hold (:func:`~fair_forge_beam.reports.compare.shared_data`).
        shown: how that line names this run (an audit's stage: its ``--output``; default ``run_dir``).

    Raises:
        FileNotFoundError: no ``results.json`` (when ``doc`` is not given) or baseline run.
        fair_forge_beam.console.OutputWriteError: the machine refused the files (a full disk, a read-only
            folder, ``ulimit -f``); ``report.html`` and ``comparison.json`` are as they were.
    """
    import fair_forge_beam._beam  # noqa: F401 - Beam's first import under the logging guard (case-006)

    from fair_forge_beam._gc import unscanned_imports
    from fair_forge_beam.reports.compare import compare_runs
    from fair_forge_beam.reports.load import dead_letter_summary, read_results, read_run_info

    with unscanned_imports():  # the page's libraries, matplotlib and jinja2: never collected, never walked
        import jinja2  # noqa: F401
        import matplotlib.backends.backend_svg  # noqa: F401 - what savefig(format="svg") imports
        from fair_forge_beam.reports import plots  # noqa: F401

    run_dir = folder_path(run_dir)  # "/" is the root (it was ".", trial48 B3)
    doc = doc if doc is not None else read_results(run_dir)
    run_info = run_info if run_info is not None else read_run_info(run_dir)
    cmp, files = None, []
    if compare_with is not None:
        # both runs' run_info: the section states every differing setting and version, as --compare's warnings do
        # both run folders: the section says the data they share, as the console does (trial35b B3)
        cmp = compare_runs(doc, compare_with, current_info=run_info or None, baseline_info=compare_info,
                           current_dir=run_dir, current_name=shown,
                           baseline_dir=compare_dir or (compare_with if isinstance(compare_with, str) else None))
        files.append((f"{run_dir}/comparison.json", json.dumps(cmp, indent=2, ensure_ascii=False, allow_nan=False)))
    from fair_forge_beam.io.secrets import gate_texts, name_texts, scrub_known, scrub_known_text, scrub_shown

    # the page is composed of our words and of the records' values masked (values from outside: a key
    # is masked there, never in our own words — a scorer named like the key, issue 28 trial B7); what
    # it shows of the data (dead letters, reasons) also without secret-shaped strings (trial33 O1)
    html = render_report(with_session_distributions(scrub_shown(doc), run_dir), scrub_known(run_info),
                         scrub_shown(dead_letters if dead_letters is not None else dead_letter_summary(run_dir)),
                         scrub_shown(cmp) if cmp is not None else None,
                         inconclusive_width, with_plots, gates=gates, gate_outcome=gate_outcome)
    out_path = out_path or f"{run_dir}/report.html"

    names = name_texts(doc) | name_texts(run_info) | gate_texts(gates)
    import html as _html

    names |= {_html.escape(n) for n in names}  # as the page spells them
    files.append((out_path, scrub_known_text(html, names)))  # defence at the writer: API-key values masked, never a name
    from fair_forge_beam.io.write import replace_files

    # each file whole or none (a full disk: report.html and comparison.json as they were, never cut short), the
    # machine's failure an OutputWriteError naming the run's folder
    replace_files(files, output=run_dir if len(files) > 1 or out_path == f"{run_dir}/report.html" else None)
    return out_path


