"""The report's findings: human labels, plain definitions, a scorecard per assistant and the
credible between-assistant differences. Read by :mod:`fair_forge_beam.reports.html`; nothing here
reads records or changes ``results.json``.

Scorecard (``<section id="summary">`` of the report): one row per assistant (slices
``assistant_id=…``), one cell per headline estimate of every metric (its ``headline_columns``).
A cell is

* ``fail`` — the estimate is on the wrong side of its threshold: the whole interval when there is
  one, the point estimate otherwise;
* ``pass`` — on the right side (whole interval / point);
* ``unsure`` — the interval straddles the threshold;
* ``neutral`` — no threshold (e.g. emotional entropy has no better side);
* ``na`` — undefined (no value; or Humanity's Spearman ρ that is exactly 0 with a degenerate
  interval: spec §6.5 sets ρ = 0 when the reference answer has no emotion words, so a slice whose
  every ρ is 0 had nothing to compare and is shown as "n/a", never 0.0000 [0.0000, 0.0000]).

Thresholds: a gate (:mod:`fair_forge_beam.reports.gates`) on the same metric, field and slice when
the run has gates, else the documented reference line the metric declares (:func:`reference_line`;
for reading, not standards). A cell whose interval is too wide (the report's inconclusive rule,
:func:`inconclusive`) is marked *inconclusive*, unless its threshold is a gate of the run and the whole interval lies
on one side of it, or its reference line and the whole interval lies beyond it (the verdict does
not depend on the width; a wide interval within a reference line, a reading aid, keeps the width
rule). The scorecard's columns are the
metrics' headline estimates plus every estimate a threshold gate of the run reads on assistant
slices, so the findings follow from the gates on the page.

An assistant is *too small to judge* when its slice has fewer than :data:`MIN_SESSIONS` sessions
(sessions are the resampling unit: one session gives no interval, spec §4.3 / issue 19) or every
estimate with a value is inconclusive; such assistants are listed together, by name, below
the judged ones, never ranked.

The *worst assistant* is the judged assistant with the largest *excess* of one estimate beyond its
threshold on the bad side — beyond a gate of the run before beyond a reference line —,
``excess = direction · (threshold − bound) / range`` where ``bound`` is
the interval end nearest the threshold (the point without interval) and ``range`` the estimate's
natural range (declared by the metric, :func:`~.estimates.value_range`); its *worst metric* is that estimate. Ties: slice order.
The report's first line (:func:`findings_headline`) calls it *the worst assistant* only when it is
credibly worse on that metric than every other judged assistant; otherwise it is named as the
farthest beyond a threshold, with the assistants it is not credibly worse than, and the largest
credible difference on the page is stated next to it.
Beyond a threshold is not the same as worse than the others: the judged assistants whose value of
that metric is not credibly different from the worst one's (the difference has an interval, below,
and it includes 0) are named next to it (at most :data:`MAX_PEERS`, closest first).

Credible differences: for every pair of judged assistants and every headline estimate with a
better side, the difference (A − B) with the interval of :mod:`~.compare`'s methods (Beta
posteriors of the stored counts in Bayesian runs, Agresti–Caffo in frequentist runs, normal from
the two intervals otherwise); a difference is *credible* when its interval excludes 0 and neither
side is too small to compare (a zero-width interval, or fewer than two sessions:
:func:`~fair_forge_beam.statistical.slices.too_small_to_compare`). The
:data:`MAX_DIFFERENCES` largest (|difference| / range) are listed. Only the :data:`EXTREMES`
highest and lowest values of each estimate are paired (the largest differences lie between them),
so the cost does not grow with the square of the number of assistants.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

from fair_forge_beam.quoting import fixed_estimate
from fair_forge_beam.reports.estimates import counts_for, direction, estimate_info, is_undefined, value_range
from fair_forge_beam.schemas.metric_info import dotted_get
from fair_forge_beam.statistical.compare import normal_quantile
from fair_forge_beam.statistical.slices import MIN_COMPARE_SESSIONS

__all__ = ["reference_line", "MIN_SESSIONS", "MAX_DIFFERENCES", "estimate_label", "slice_label", "definition",
           "inconclusive", "scorecard", "credible_differences", "toxicity_measure", "toxic_rule", "findings_headline",
           "gate_failed_assistants"]

#: fewest sessions of an assistant's slice for the scorecard to judge it
MIN_SESSIONS = MIN_COMPARE_SESSIONS
#: credible differences listed in the summary
MAX_DIFFERENCES = 5
#: assistants with the highest and with the lowest value of an estimate paired for the differences
EXTREMES = 8
#: judged assistants shown in the scorecard (worst first; the others are counted)
MAX_CARD_ROWS = 15
#: assistants named as "not credibly better" than the worst one on its worst metric
MAX_PEERS = 3

def reference_line(metric: str, path: str) -> Optional[tuple[str, float]]:
    """The documented reference line ``(op, threshold)`` of an estimate — declared by the metric
    (``EstimateInfo.reference``: reading aids, not standards) — or ``None``. Lower is better for
    toxicity and its disparity scores (spec §6.1) and for Privacy's leak rate, higher for Spearman
    agreement (spec §6.5) and role adherence; Privacy's ``score`` has none (it measures the PII
    detector against the annotations, not the assistant)."""
    e, _ = estimate_info(metric, path)
    return e.reference if e is not None else None


def estimate_label(metric: str, path: str) -> str:
    """A human label for a dotted estimate path, e.g. ``group_profiling.group_estimates.black.T``
    → ``toxic share of answers mentioning black`` (the metric's declared label); undeclared paths:
    dots and underscores as words."""
    e, key = estimate_info(metric, path)
    if e is not None:
        return e.label_for(key)
    return " › ".join(p.replace("_", " ") for p in path.split("."))


def definition(metric: str, path: str) -> Optional[str]:
    """The plain definition of an estimate (with its spec section), or ``None`` when unknown."""
    e, _ = estimate_info(metric, path)
    return e.definition if e is not None else None


def slice_label(key: Optional[str]) -> str:
    """``assistant_id=bot`` → ``bot``; ``language=english`` → ``language: english``;
    ``overall`` → ``all interactions``. Non-printable characters (zero-width, bidi controls,
    newlines: values come from the data) are written as their escapes, so two different values
    never look alike), and a value is cut to 200 characters with its length
    (:func:`~fair_forge_beam.quoting.shown`)."""
    return _slice_label(key)


def _slice_label(key: Optional[str]) -> str:
    from fair_forge_beam.quoting import shown

    key = "" if key is None else str(key)
    if key == "overall":
        return "all interactions"
    dim, sep, val = key.partition("=")
    if not sep:
        return shown(key)
    if dim == "assistant_id":
        return shown(val)
    return f"{shown(dim.replace('_', ' '))}: {shown(val)}"


def inconclusive(metric: str, path: str, est: dict, record: dict, width: float, ci_level: Optional[float],
                 counts: Optional[dict] = None, gates: Sequence[Any] = (), cell: Optional[dict] = None,
                 prior: Optional[tuple] = None) -> Optional[dict]:
    """The inconclusive flag of one estimate, or ``None`` when it is conclusive or cannot be judged.

    The one decider of the label: the scorecard, each metric's tables, the list of inconclusive
    estimates and the count above them all call it, so an estimate is labelled the same way
    everywhere (issue 28, fresh-user trial: a value the scorecard listed as "1 session: no
    interval" was "inconclusive" in the Toxicity table, and of two sub-estimates resting on one
    observation one was flagged and the other not). ``None`` for

    * an undefined estimate (:func:`~.estimates.is_undefined`: shown as n/a);
    * an estimate without an interval under the one-session rule (a distribution-mode record of
      one session, or an estimate of one observation: :func:`~fair_forge_beam.statistical.slices.behind`):
      its label is "no interval" (too small to judge), never a width it does not have;
    * an estimate whose threshold is a gate of the run with the whole interval on one side of it,
      or a reference line with the whole interval beyond it on the bad side (:func:`_settled`: the
      verdict does not depend on the width; issue 28, hostile trial 8: a toxic rate of 0.440
      [0.307, 0.578] against the 0.10 line was left out of the findings as "inconclusive").
      ``cell`` is its :func:`judge_cell` when the caller has it, else it is judged here (against
      ``gates``, else the reference line).

    Args:
        metric, path: metric name and dotted estimate path (for its natural range).
        est: the estimate ``{mean, ci_low, ci_high, n}``.
        record: its slice record (``n_interactions`` scales the needed sample).
        width: target interval width on a 0–1 scale, > 0.
        ci_level: the run's interval level (frequentist Wald check;
            :func:`~fair_forge_beam.reports.load.run_config`'s ``ci_level``).
        counts: ``{path: (k, n)}`` of the record (:func:`counts_for`).
        prior: a Bayesian run's Beta prior ``(a, b)`` (:func:`~fair_forge_beam.reports.load.run_config`'s
            ``beta_prior``), ``None`` for a frequentist run: a rate with counts and no interval is judged by the
            width of its own posterior's credible interval, not the frequentist Wald width (trial38 T13).

    Returns:
        ``{"width", "relative_width", "n", "n_needed", "interactions_needed", "method"}``.
    """
    if est is None or est.get("mean") is None or is_undefined(metric, path, est):
        return None
    from fair_forge_beam.reports.estimates import sessions_of
    from fair_forge_beam.statistical.slices import behind, record_is_distribution, rests_on_no_observation

    if rests_on_no_observation(est, sessions_of(metric, record)) is not None:
        return None  # its prior's value: marked "prior only", never a width

    if (est.get("ci_low") is None or est.get("ci_high") is None) and record_is_distribution(record) \
            and behind(record.get("n_sessions"), est.get("n")) == 1:
        return None  # the one-session rule: no interval, labelled so ("1 session" / "1 observation")
    flag = _width_flag(metric, path, est, record, width, ci_level, counts, prior)
    if flag is None:
        return None
    if cell is None:  # judged only for a flag it may lift (a report of 3,000 assistants judges ~80,000 estimates)
        cell = judge_cell(metric, path, est, str(record.get("slice")), gates)
    if _settled(est, cell):
        return None  # the whole interval on one side of its gate, or beyond its reference line: conclusive
    return flag


def bayes_prior(config: Optional[dict]) -> Optional[tuple]:
    """The Beta prior ``(a, b)`` of a Bayesian run's ``config`` (what :func:`inconclusive` takes), ``None`` for another."""
    from fair_forge_beam.reports.load import run_config

    cfg = run_config(config)
    return cfg.beta_prior if cfg.mode == "bayesian" else None


def _width_flag(metric: str, path: str, est: dict, record: dict, width: float, ci_level: Optional[float],
                counts: Optional[dict], prior: Optional[tuple] = None) -> Optional[dict]:
    """:func:`inconclusive`'s width rule alone (its flag, or ``None``)."""
    n = est.get("n") or 0
    n_int = record.get("n_interactions") or n
    scale = value_range(metric, path)
    if est.get("ci_low") is not None and est.get("ci_high") is not None:
        w = float(est["ci_high"]) - float(est["ci_low"])
        rel = w / scale
        if rel <= width:
            return None
        factor = _squared(rel / width)
        return {"width": w, "relative_width": rel, "n": n, "n_needed": _ceil(n * factor) if n else None,
                "interactions_needed": _ceil(n_int * factor) if n_int else None, "method": "width ∝ 1/√n"}
    kn = (counts or {}).get(path)
    if kn and kn[1] > 0:
        k, m = kn
        z = normal_quantile(ci_level)
        if prior is None:  # frequentist: the Wald width at the Agresti-Coull-style centre
            p, mt = (k + 1) / (m + 2), m + 2
            w = 2 * z * math.sqrt(p * (1 - p) / mt)
            method = "Wald width at p̃=(k+1)/(n+2)"
        else:  # Bayesian: its own posterior's central credible interval, at the run's level and prior
            from fair_forge_beam.options import CI_LEVEL
            from fair_forge_beam.statistical.bayesian import beta_posterior_interval

            a, b = prior
            p, lo, hi = beta_posterior_interval(k, m, a, b, CI_LEVEL if ci_level is None else ci_level)
            w = hi - lo
            method = f"credible width of its posterior Beta({a + k:g}, {b + m - k:g})"
        if w <= width:
            return None
        needed = _ceil((2 * z) ** 2 * p * (1 - p) / width ** 2)
        return {"width": w, "relative_width": w, "n": m, "n_needed": needed,
                "interactions_needed": _ceil(n_int * needed / m) if n_int and needed is not None else None,
                "method": method}
    return None


#: a sample size needed above this is shown as not reachable (``None``): a width of extreme finite
#: estimates (1e308) would need more interactions than a float holds (trial37 T2: OverflowError)
MAX_NEEDED = 1e15


def _squared(x: float) -> float:
    """``x ** 2``, ``inf`` past float's range (``**`` raises OverflowError there, ``*`` does not)."""
    return x * x


def _ceil(x: float) -> Optional[int]:
    """Ceiling that ignores float noise (12 · (0.6/0.2)² is 108, not 109); ``None`` for a count
    past :data:`MAX_NEEDED` or not finite (an interval of extreme estimates)."""
    if not x <= MAX_NEEDED:
        return None
    return math.ceil(round(x, 6))


def _threshold(metric: str, path: str, slice_key: str, gates: Sequence[Any]) -> Optional[dict]:
    """``{op, value, stat, source}`` of the gate covering (metric, path, slice), else the documented
    reference line, else ``None``."""
    for g in gates or ():
        gpath = _gate_path(g)
        if g.metric != metric or gpath is None or not _gate_covers(g, slice_key):
            continue
        if gpath == path or (g.key and f"{gpath}.{g.key}" == path) or (g.for_every and path.startswith(gpath + ".")):
            return {"op": g.op, "value": g.threshold, "stat": g.stat, "source": f"gate: {g.label}"}
    line = reference_line(metric, path)
    if line is not None:
        return {"op": line[0], "value": line[1], "stat": None, "source": "reference line (docs/report.md)"}
    return None


def _gate_path(g) -> Optional[str]:
    """The path a threshold gate reads (a keyed field: the part before its key), else ``None``."""
    if getattr(g, "kind", "threshold") != "threshold":
        return None
    from fair_forge_beam.reports.gates import gate_fields

    spec = gate_fields().get(g.metric, {}).get(g.field)
    return getattr(spec, "path", None)


def _gate_covers(g, slice_key: str) -> bool:
    s = g.slices
    if isinstance(s, tuple):
        return slice_key in s
    if s == "overall":
        return slice_key == "overall"
    if s == "every":
        return True
    return slice_key.startswith(s.split(" ", 1)[1] + "=")


def _bounds(est: dict, stat: Optional[str]) -> tuple[float, float]:
    """The range of values to check: one statistic of a gate, or the whole interval (the point
    without one)."""
    if stat:
        v = est.get(stat)
        v = est["mean"] if v is None else v
        return float(v), float(v)
    lo, hi = est.get("ci_low"), est.get("ci_high")
    if lo is None or hi is None:
        return float(est["mean"]), float(est["mean"])
    return float(lo), float(hi)


def judge_cell(metric: str, path: str, est: Optional[dict], slice_key: str, gates: Sequence[Any] = ()) -> dict:
    """Status of one estimate against its threshold: ``{status, threshold, excess}`` with
    ``status`` in ``pass | fail | unsure | neutral | na`` and ``excess`` ≥ 0 the distance of the
    nearer bound beyond the threshold on the bad side, divided by the estimate's range (0 unless
    ``fail``)."""
    if is_undefined(metric, path, est):
        return {"status": "na", "threshold": None, "excess": 0.0}
    th = _threshold(metric, path, slice_key, gates)
    if th is None:
        return {"status": "neutral", "threshold": None, "excess": 0.0}
    from fair_forge_beam.reports.gates import compare

    lo, hi = _bounds(est, th["stat"])
    ok_lo, ok_hi = compare(lo, th["op"], th["value"]), compare(hi, th["op"], th["value"])
    if ok_lo and ok_hi:
        status = "pass"
    elif not ok_lo and not ok_hi:
        status = "fail"
    else:
        status = "unsure"
    nearer = lo if th["op"] in ("<=", "<") else hi
    excess = abs(nearer - th["value"]) / value_range(metric, path) if status == "fail" else 0.0
    return {"status": status, "threshold": th, "excess": excess}


def toxicity_measure(metric: dict, run_info: Optional[dict] = None) -> Optional[str]:
    """What the toxicity number measures, read from the run's outputs (never assumed): a scorer
    description when the metric or ``run_info`` records one (``scorer`` / ``toxicity_scorer``),
    else the lexicon the metric names, with the share of toxic words above which an answer counts
    as toxic (``toxicity_threshold``). ``None`` when the outputs name nothing."""
    run_info = run_info or {}
    first = (metric.get("slices") or [{}])[0]
    for src in (metric, first, run_info):
        for key in ("scorer", "toxicity_scorer", "scorer_description"):
            v = src.get(key)
            if isinstance(v, dict):
                name, what = v.get("name"), v.get("description") or v.get("measures")
                v = f"{name}: {what}" if name and what else (what or name)
            if v:
                return str(v)
    lex = metric.get("lexicon") or first.get("lexicon")
    if not lex:
        return None
    th = (first.get("group_profiling") or {}).get("toxicity_threshold")
    if isinstance(th, (int, float)) and th > 0:
        rule = f"an answer counts as toxic when more than {th:g} of its words are in the lexicon"
    else:
        rule = "an answer counts as toxic when at least one of its words is in the lexicon"
    return f"word lexicon {lex}: {rule}"


def toxic_rule(metric: dict, run_info: Optional[dict] = None) -> Optional[str]:
    """The rule that made an answer toxic in this run, in a few words, read from its outputs as
    :func:`toxicity_measure` reads them: the classifier's (``profanity-check probability ≥ 0.5``)
    when the metric records a classifier scorer, else the lexicon's (``hurtlex-inclusive: toxic-word
    ratio > 0``; the group profile's ``toxicity_threshold`` when no scorer is recorded). ``None`` when
    the outputs name none. The group profile's ``toxicity_threshold`` is the lexicon's, whatever
    the scorer: a figure titled by it under the classifier named a rule the run did not use (trial38 T9)."""
    first = (metric.get("slices") or [{}])[0]
    for src in (metric, first, run_info or {}):
        v = src.get("scorer") or src.get("toxicity_scorer")
        if isinstance(v, dict) and isinstance(v.get("threshold"), (int, float)):
            name = v.get("name") or v.get("kind") or "scorer"
            if v.get("kind") == "classifier":
                return f"{name} probability ≥ {v['threshold']:g}"
            return f"{name}: toxic-word ratio > {v['threshold']:g}"
    th = (first.get("group_profiling") or {}).get("toxicity_threshold")
    if (metric.get("lexicon") or first.get("lexicon")) and isinstance(th, (int, float)):
        return f"toxic-word ratio > {th:g}"
    return None


def _judged(metric: str, rec: dict, heads: Sequence[str], width: float, level: Optional[float],
            gates: Sequence[Any] = ()) -> tuple[bool, list]:

    counts = counts_for(metric, rec)
    flags = []
    for h in heads:
        est = dotted_get(rec, h)
        if is_undefined(metric, h, est):
            continue
        flags.append(inconclusive(metric, h, est, rec, width, level, counts, gates))
    return bool(flags) and not all(flags), flags


def too_small(metric: str, rec: dict, heads: Sequence[str], width: float, level: Optional[float],
              gates: Sequence[Any] = ()) -> Optional[str]:
    """Why the slice is too small to judge (``None`` when it is not): fewer than
    :data:`MIN_SESSIONS` sessions, or every headline estimate with a value inconclusive (or none
    with a value). ``overall`` is too small only by the first rule (one session: no interval, as
    every surface marks it: the console's ``1*`` too)."""
    n_ses = rec.get("n_sessions")
    if isinstance(n_ses, int) and n_ses < MIN_SESSIONS:
        return f"{n_ses} session{'s' if n_ses != 1 else ''}: no interval"
    if rec.get("slice") == "overall":
        return None
    ok, flags = _judged(metric, rec, heads, width, level, gates)
    if ok:
        return None
    return "every interval too wide" if flags else "no value"


def scorecard(doc: dict, width: float, gates: Sequence[Any] = ()) -> dict:
    """The scorecard of a run (``results.json`` content ``doc``).

    Returns ``{"columns": [{metric, path, label, definition}], "rows": [{assistant, slice,
    n_interactions, n_sessions, cells: [{text, status, inconclusive, threshold}], worst}],
    "small": [{assistant, n_interactions, n_sessions, reason}], "worst": {assistant, label, text,
    status, threshold, peers} or None, "overall": row or None, "max_rows", "inconclusive_beyond": judged
    cells beyond their threshold but inconclusive}``; rows sorted worst first (largest
    excess, then slice order). ``width`` is the inconclusive width (0–1 scale)."""
    level = doc.get("config", {}).get("ci_level")
    prior = bayes_prior(doc.get("config"))
    columns, by_slice = [], {}
    for name, m in doc.get("metrics", {}).items():
        for h in [*(m.get("headline_columns") or []), *_gated_paths(name, m, gates)]:
            if not any(c["metric"] == name and c["path"] == h for c in columns):
                columns.append({"metric": name, "path": h, "label": estimate_label(name, h),
                                "definition": definition(name, h)})
        for rec in m.get("slices") or []:
            by_slice.setdefault(rec.get("slice"), {})[name] = rec
    rows, small, overall = [], [], None
    for order, (key, recs) in enumerate(by_slice.items()):
        if key != "overall" and not str(key).startswith("assistant_id="):
            continue
        cells, judged_any, sizes = [], False, []
        for col in columns:
            rec = recs.get(col["metric"])
            if rec is None:
                cells.append({"text": "not scored", "status": "na", "inconclusive": None, "threshold": None, "excess": 0.0})
                continue
            sizes.append((rec.get("n_interactions"), rec.get("n_sessions")))
            est = dotted_get(rec, col["path"])
            j = judge_cell(col["metric"], col["path"], est, key, gates)
            flag = None if j["status"] == "na" else inconclusive(col["metric"], col["path"], est, rec, width, level,
                                                                 counts_for(col["metric"], rec), cell=j, prior=prior)
            judged_any |= j["status"] != "na" and flag is None
            cells.append({"text": "n/a" if j["status"] == "na" else fmt_est(est, 3), **j, "inconclusive": flag})
        n_int = max((s[0] or 0 for s in sizes), default=0)
        n_ses = max((s[1] or 0 for s in sizes), default=0)
        row = {"assistant": slice_label(key), "slice": key, "n_interactions": n_int, "n_sessions": n_ses,
               "cells": cells, "order": order}
        if key == "overall":
            overall = row
            continue
        if n_ses < MIN_SESSIONS or not judged_any:
            reason = (f"{n_ses} session{'s' if n_ses != 1 else ''}: no interval" if n_ses < MIN_SESSIONS
                      else "every interval too wide")
            small.append({**row, "reason": reason})
            continue
        bad = [c for c in cells if c["status"] == "fail" and not c["inconclusive"]]
        worst_cell = max(bad, key=_severity, default=None)
        row["worst"] = None if worst_cell is None else columns[cells.index(worst_cell)]
        row["excess"] = worst_cell["excess"] if worst_cell else 0.0
        row["severity"] = _severity(worst_cell) if worst_cell else (0, 0.0)
        rows.append(row)
    rows.sort(key=lambda r: (-r["severity"][0], -r["severity"][1], r["order"]))
    worst = None
    if rows and rows[0]["worst"] is not None:
        r = rows[0]
        col = r["worst"]
        cell = r["cells"][columns.index(col)]
        worst = {"assistant": r["assistant"], "label": col["label"], "metric": col["metric"], "text": cell["text"],
                 "threshold": cell["threshold"], "peers": _not_credibly_better(doc, col, columns.index(col), r, rows)}
    # beyond a threshold but too wide to judge: the findings line must not call the run clear
    unsure = sum(1 for r in rows for c in r["cells"] if c["status"] == "fail" and c["inconclusive"])
    return {"columns": columns, "rows": rows, "small": small, "worst": worst, "overall": overall,
            "max_rows": MAX_CARD_ROWS, "inconclusive_beyond": unsure}


def _settled(est: dict, cell: dict) -> bool:
    """Whether the reading of ``est`` against ``cell``'s threshold (a judged cell,
    :func:`judge_cell`) does not depend on the interval's width: a gate of the run with the whole
    interval on one side of it (the gate's verdict, on the page and in the exit code), or a
    reference line with the whole interval beyond it (``fail``: a clearly bad value, however wide
    its interval, issue 28). A wide interval wholly within a reference line (a reading aid) keeps
    the width rule."""
    th = (cell or {}).get("threshold")
    if th is None:
        return False
    if not str(th.get("source", "")).startswith("gate"):
        return cell.get("status") == "fail" and est.get("ci_low") is not None and est.get("ci_high") is not None
    if th.get("stat") in (None, "") and (est.get("ci_low") is None or est.get("ci_high") is None):
        return False
    from fair_forge_beam.reports.gates import compare

    # the statistic the gate reads (a gate on the mean: the point, whatever the interval's width
    # or without one, as in frequentist runs), else the whole interval
    lo, hi = _bounds(est, th.get("stat"))
    return compare(lo, th["op"], th["value"]) == compare(hi, th["op"], th["value"])


def _gated_paths(metric: str, m: dict, gates: Sequence[Any]) -> list:
    """The estimates of ``metric`` (``results.json``'s metric entry ``m``) that the run's threshold
    gates read on assistant slices and that are not headline columns: the scorecard shows and
    judges them too, so that the findings follow from the gates on the page (an assistant failing
    a gate on an estimate outside the headline was listed as too small to judge, and another was
    named the worst)."""
    out = []
    for g in gates or ():
        path = _gate_path(g)
        on_assistants = (any(str(k).startswith("assistant_id=") for k in g.slices) if isinstance(g.slices, tuple)
                         else g.slices != "overall" and _gate_covers(g, "assistant_id=?"))
        if g.metric != metric or path is None or g.for_every or not on_assistants:
            continue
        path = f"{path}.{g.key}" if g.key else path
        if path not in out and any(isinstance(dotted_get(r, path), dict) for r in m.get("slices") or []):
            out.append(path)
    return out


def _severity(cell: dict) -> tuple[int, float]:
    """How far a failing cell is beyond its threshold: a gate (the run's own standard) before a
    reference line (a reading aid), then the excess."""
    th = cell.get("threshold") or {}
    return (1 if str(th.get("source", "")).startswith("gate") else 0, cell.get("excess", 0.0))


def findings_headline(card: dict, differences: Sequence[dict], checks: Optional[Sequence[Any]] = None,
                      gate_outcome: Optional[dict] = None) -> dict:
    """The report's first-screen verdict, derived only from what the page shows: the gate checks
    (``checks``: :func:`~fair_forge_beam.reports.gates.evaluate_gates` of the run's gates, ``None``
    without gates), the scorecard (``card``: cells beyond their gate or reference line) and the
    credible differences (``differences``: :func:`credible_differences`).

    ``gate_outcome`` (``gates.json``'s content, when the job evaluated the gates) is read for the
    assistants that failed a gate when ``checks`` is not given.

    Returns ``{"tone", "gates", "worst", "singled_out", "n_beyond", "difference", "gate_failed"}``:

    * ``tone``: ``"fail"`` when a gate failed or a judged assistant is conclusively beyond a
      threshold, ``"unsure"`` when estimates are beyond one but inconclusive, else ``"ok"``;
    * ``gates``: ``{"n", "n_failed", "failed": [first failing check messages]}`` or ``None``;
    * ``worst``: the scorecard's ``worst`` (farthest beyond a threshold, gates first) or ``None``;
    * ``singled_out``: the worst is credibly worse on its worst metric than every other judged
      assistant with a value there (the interval of each difference excludes 0; at least one
      other): only then does the page call it *the worst assistant*;
    * ``n_beyond``: judged assistants conclusively beyond a threshold on at least one estimate;
    * ``difference``: the largest credible difference on the page when it does not already name the
      worst assistant as the worse side on its worst metric (so the headline never contradicts it);
    * ``gate_failed``: :func:`gate_failed_assistants` — every assistant a gate failed on, named on
      the first screen whatever the scorecard says of it.
    """
    if checks is not None:
        gate_failed = gate_failed_assistants(checks)
    else:
        gate_failed = gate_failed_assistants([c for g in (gate_outcome or {}).get("gates") or [] for c in g.get("checks") or []])
    gates = None
    if checks is not None:
        by_gate: dict = {}
        for c in checks:
            by_gate.setdefault(c.gate_index, []).append(c)
        # a failure with a value first: an undefined estimate (no data) is a failure too, but not the one to name
        failed = sorted((c for cs in by_gate.values() for c in cs if c.status == "fail"), key=lambda c: c.value is None)
        gates = {"n": len(by_gate), "n_failed": sum(1 for cs in by_gate.values() if any(c.status == "fail" for c in cs)),
                 "failed": [c.message() for c in failed[:3]], "more": max(0, len(failed) - 3)}
    worst = card.get("worst")
    n_beyond = sum(1 for r in card.get("rows") or [] if r.get("worst") is not None)
    singled_out = False
    if worst is not None:
        peers = worst.get("peers") or {}
        singled_out = bool(peers.get("others")) and peers.get("credibly_worse_than") == peers.get("others")
    top = differences[0] if differences else None
    if top is not None and worst is not None and top["worse"] == worst["assistant"] and top["label"] == worst["label"]:
        top = None  # the headline already names this difference's worse side on this metric
    if (gates and gates["n_failed"]) or worst is not None or gate_failed:
        tone = "fail"
    elif card.get("inconclusive_beyond"):
        tone = "unsure"
    else:
        tone = "ok"
    return {"tone": tone, "gates": gates, "worst": worst, "singled_out": singled_out, "n_beyond": n_beyond,
            "difference": top, "gate_failed": gate_failed}


#: the relation a failing check's value has to its threshold (the opposite of the gate's)
_FAILED_OP = {"<=": ">", "<": ">=", ">=": "<", ">": "<=", "==": "!=", "!=": "=="}


def gate_failed_assistants(checks: Optional[Sequence[Any]]) -> list[dict]:
    """Every assistant a gate failed on, from the gate checks themselves (``checks``: the
    :class:`~fair_forge_beam.reports.gates.GateCheck` list of :func:`~.gates.evaluate_gates`, or
    the check dicts of ``gates.json``), never from the scorecard: an assistant too small to judge
    or inconclusive there still failed the gate (issue 28, hostile trial 3: the report named one of
    two assistants that failed a gate, and none in frequentist runs). ``[{assistant, checks:
    [text, ...]}]`` in the checks' order (failures with a value first), one entry per assistant; a
    text is ``"<metric> <field> [<key>] <stat> = <value> <failed relation> <threshold>"``, else the
    check's reason or message (a slice with no estimate)."""
    out: dict = {}
    rows = []
    for c in checks or ():
        get = c.get if isinstance(c, dict) else (lambda k, c=c: getattr(c, k, None))
        if get("status") != "fail" or not str(get("slice") or "").startswith("assistant_id="):
            continue
        value, op, threshold = get("value"), get("op"), get("threshold")
        if value is not None and op and threshold is not None:
            what = " ".join(str(x) for x in (get("metric"), get("field"), get("key"), get("stat")) if x)
            text = f"{what} = {value:.4g} {_FAILED_OP.get(op, 'not ' + op)} {threshold:g}"
        else:
            msg = get("message")
            text = get("reason") or (msg() if callable(msg) else msg) or "failed"
        rows.append((value is None, str(get("slice"))[len("assistant_id="):], text))
    for _, name, msg in sorted(rows, key=lambda r: r[0]):
        out.setdefault(name, []).append(msg)
    return [{"assistant": a, "checks": m} for a, m in out.items()]


def _not_credibly_better(doc: dict, col: dict, i: int, worst_row: dict, rows: Sequence[dict]) -> dict:
    """The judged assistants whose value of the worst metric is not credibly different from the worst
    assistant's (the interval of the difference includes 0; same methods as
    :func:`credible_differences`; a difference without an interval — frequentist estimates without
    counts — names no one): ``{"names": [{assistant, text}] (at most MAX_PEERS, closest
    value first), "more": how many others, "credibly_worse_than": judged assistants the worst one is
    credibly worse than, "others": judged assistants with a value compared}``. With such peers the
    worst assistant is only the worst point estimate on that metric, and the report says so."""
    from fair_forge_beam.reports.compare import SAME, compare_estimate, sessions_of

    metric, path = col["metric"], col["path"]
    if not direction(metric, path):
        return {"names": [], "more": 0, "credibly_worse_than": 0, "others": 0}
    from fair_forge_beam.reports.load import run_config

    cfg = doc.get("config", {})
    level, seed = run_config(cfg).ci_level, run_config(cfg).seed
    recs = {rec.get("slice"): rec for rec in doc["metrics"][metric].get("slices") or []}
    w = recs[worst_row["slice"]]
    ew = dotted_get(w, path)
    peers, others, worse_than = [], 0, 0
    for r in rows:
        other = recs.get(r["slice"])
        if r is worst_row or other is None or is_undefined(metric, path, dotted_get(other, path)):
            continue
        eo = dotted_get(other, path)
        row = compare_estimate(metric, f"{worst_row['slice']} vs {r['slice']}", path, ew, eo, counts_for(metric, w),
                               counts_for(metric, other), cfg, cfg, seed, 20000, level, sessions_of(metric, w),
                               sessions_of(metric, other))
        others += 1
        if row.get("verdict") == SAME:  # an interval of the difference that includes 0 (never "no interval")
            peers.append((abs(eo["mean"] - ew["mean"]), r["order"], {"assistant": r["assistant"], "text": r["cells"][i]["text"]}))
        elif row.get("verdict") == "worse":  # the worst one's value credibly worse than this one's
            worse_than += 1
    peers.sort(key=lambda t: (t[0], t[1]))
    return {"names": [p[2] for p in peers[:MAX_PEERS]], "more": max(0, len(peers) - MAX_PEERS),
            "credibly_worse_than": worse_than, "others": others}


def credible_differences(doc: dict, card: dict, limit: int = MAX_DIFFERENCES) -> list[dict]:
    """The largest credible between-assistant differences among the scorecard's judged rows:
    ``[{metric, label, better, worse, difference, ci_low, ci_high, method, better_text, worse_text}]``
    (``better`` / ``worse`` are assistant labels; the difference is worse − better, in the
    estimate's units), at most ``limit``, largest |difference| / range first."""
    from fair_forge_beam.reports.compare import compare_estimate, sessions_of  # one implementation of the methods

    from fair_forge_beam.reports.load import run_config

    cfg = doc.get("config", {})
    level, seed = run_config(cfg).ci_level, run_config(cfg).seed
    recs = {}
    for name, m in doc.get("metrics", {}).items():
        for rec in m.get("slices") or []:
            recs[(name, rec.get("slice"))] = rec
    out = []
    for col in card["columns"]:
        metric, path = col["metric"], col["path"]
        sign = direction(metric, path)
        if not sign:
            continue
        valued = [r["slice"] for r in card["rows"] if (metric, r["slice"]) in recs
                  and not is_undefined(metric, path, dotted_get(recs[(metric, r["slice"])], path))]
        # the largest differences lie between the extremes: the EXTREMES highest and lowest values
        # are paired (at most EXTREMES² pairs per estimate, whatever the number of assistants)
        valued.sort(key=lambda k: (dotted_get(recs[(metric, k)], path)["mean"], k))
        pairs = sorted({tuple(sorted((lo, hi))) for lo in valued[:EXTREMES] for hi in valued[-EXTREMES:] if lo != hi})
        for a, b in pairs:
            ra, rb = recs[(metric, a)], recs[(metric, b)]
            ea, eb = dotted_get(ra, path), dotted_get(rb, path)
            row = compare_estimate(metric, f"{a} vs {b}", path, ea, eb, counts_for(metric, ra),
                                   counts_for(metric, rb), cfg, cfg, seed, 20000, level, sessions_of(metric, ra),
                                   sessions_of(metric, rb))
            if row.get("verdict") not in ("better", "worse"):
                continue
            d = row["difference"]
            a_worse = row["verdict"] == "worse"
            worse, better = (a, b) if a_worse else (b, a)
            ew, eb2 = (ea, eb) if a_worse else (eb, ea)
            s = 1 if a_worse else -1
            lo, hi = sorted((s * d["ci_low"], s * d["ci_high"]))
            out.append({"metric": metric, "path": path, "label": col["label"], "worse": slice_label(worse),
                        "better": slice_label(better), "difference": s * d["mean"], "ci_low": lo, "ci_high": hi,
                        "method": row["method"], "worse_text": fmt_est(ew, 3), "better_text": fmt_est(eb2, 3),
                        "size": abs(d["mean"]) / value_range(metric, path)})
    out.sort(key=lambda r: (-r["size"], r["label"], r["worse"], r["better"]))
    return out[:limit]


def fmt_est(e: Optional[dict], digits: int = 3) -> str:
    """``mean [ci_low, ci_high]`` with ``digits`` decimals; the mean alone without interval;
    ``n/a`` without a value."""
    return fixed_estimate(e, digits)
