"""Comparison of two runs: for every shared metric, slice and estimate, the difference
(current − baseline) with its interval and a verdict.

    from fair_forge_beam.reports.compare import compare_runs
    cmp = compare_runs("out/after", "out/before")          # or results.json dicts
    python -m fair_forge_beam.reports.compare out/after out/before   # prints a table

Methods, chosen per estimate (the one used is named in each row's ``method``; the statistics
live in :mod:`fair_forge_beam.statistical.compare`, which cites their sources):

* ``beta_posterior`` — a rate with stored counts ``(k, n)`` (declared by the metric's info) in a
  Bayesian current run: the posterior of the difference of two independent
  Beta(a+k, b+n−k) posteriors (prior ``Beta(a, b)`` from the run's config, default Beta(1, 1)),
  from ``draws`` Monte-Carlo draws per run keyed by ``(seed, "compare", metric, slice, estimate,
  side)`` (:func:`~fair_forge_beam.statistical.seeding.estimator_rng`): same inputs and seed →
  the same numbers; interval = equal-tailed quantiles at ``ci_level``.
* ``agresti_caffo`` — the same rate in a frequentist current run: Agresti & Caffo (2000)
  interval for a difference of proportions (one success and one failure added to each run, then
  the Wald interval); the reported difference is the raw ``k1/n1 − k2/n2``.
* ``normal_from_intervals`` — any other estimate whose two runs both carry an interval: normal
  approximation, each run's standard error read off its interval as
  ``(ci_high − ci_low) / (2 z)`` with ``z`` the normal quantile of its ``ci_level``; difference
  interval ``Δ ± z √(se₁² + se₂²)``. An approximation: bootstrap intervals of skewed statistics
  are not symmetric.
* ``no_interval`` — point estimates without interval (frequentist means): the difference
  only; verdict "no detectable difference" when it is exactly 0, else "not assessable".

Verdict: the interval of the difference lies above 0 → the current run is *higher*; below 0 →
*lower*; else "no detectable difference". With a known direction (the metric's info) higher/lower
become "better"/"worse" (toxic rate, DIDT, bias rates: lower is better; judge scores, Spearman
agreement: higher is better); estimates without a direction keep "higher"/"lower".

**Too small to compare.** A row whose slice rests on fewer than two sessions in either run (the
one-session rule, both modes), or whose estimate has a zero-width interval in either run (its
sessions do not vary), claims no difference: verdict "too small to compare", the difference of
the means without an interval, and the reason in ``too_small``
(:func:`~fair_forge_beam.statistical.slices.too_small_to_compare`, the one rule the report, the
gates and the trend report use).
"""
from __future__ import annotations

if __name__ == "__main__":  # the command is the process: a Ctrl-C while it still imports is one line (trial46 B2)
    from fair_forge_beam.console import starting

    starting("fair-forge-beam compare", "compare")

import argparse
import json
import math
import os
import sys
from collections import Counter
from typing import Any, Mapping, Optional, Sequence, Union

from fair_forge_beam.options import RUN_ONLY_OPTIONS
from fair_forge_beam.reports.estimates import counts_for, direction, estimate_info, info_of, iter_estimates, sessions_of
from fair_forge_beam.quoting import fixed, shown_key
from fair_forge_beam.plain import folder_path
from fair_forge_beam.reports.summary import pad, printable
from fair_forge_beam.statistical.compare import METHODS, difference, rate_as_compared
from fair_forge_beam.statistical.slices import TOO_SMALL_TO_COMPARE, too_small_to_compare

__all__ = ["compare_runs", "comparability", "shared_data", "possibly_shared_data", "provenance_gaps", "DATA_DIFFERENCES",
           "empty_comparison_reason", "nothing_compared", "compare_estimate", "sessions_of", "comparison_table", "run_differences", "VERDICTS",
           "TOO_SMALL", "DETECTABLE", "main"]

BETTER, WORSE, SAME = "better", "worse", "no detectable difference"
HIGHER, LOWER = "higher", "lower"
NOT_ASSESSABLE, NOT_ESTIMABLE = "not assessable (no interval)", "not estimable (no value)"
TOO_SMALL = TOO_SMALL_TO_COMPARE
#: every verdict a row can carry
VERDICTS = (BETTER, WORSE, SAME, HIGHER, LOWER, NOT_ASSESSABLE, NOT_ESTIMABLE, TOO_SMALL)
#: the verdicts of a detectable difference (what the console lists without ``--all``)
DETECTABLE = (BETTER, WORSE, HIGHER, LOWER)

#: method name -> one-line note (the methods live in :mod:`fair_forge_beam.statistical.compare`)
METHOD_NOTES = METHODS
#: why a metric without an info in this process is compared generically (:func:`compare_runs`'s ``read_generically``)
NO_INFO = ("no metric info in this process (it is not the package's, nor installed under the entry-point group "
           "fair_forge_beam.metrics: docs/engine.md): its estimates are read generically — no better side, no "
           "counts behind a rate, so differences are normal approximations from the intervals, which may not be "
           "the method of the run's own --compare")


def _doc(run: Union[str, dict]) -> dict:
    if isinstance(run, dict):
        return run
    from fair_forge_beam.reports.load import read_results

    return read_results(run)


def _info(run: Union[str, dict]) -> Optional[dict]:
    """``run_info.json`` of a run given as a folder (or its ``results.json`` path); ``None`` for a dict."""
    if isinstance(run, dict):
        return None
    from fair_forge_beam.reports.load import read_run_info, results_path

    folder = results_path(run).rsplit("/", 1)[0]
    return read_run_info(folder) or None


def _verdict(lo: float, hi: float, sign: int) -> str:
    if lo > 0:
        return BETTER if sign > 0 else WORSE if sign < 0 else HIGHER
    if hi < 0:
        return WORSE if sign > 0 else BETTER if sign < 0 else LOWER
    return SAME


def _side(est: Mapping) -> dict:
    """One side of a comparison row: the estimate's mean, interval and ``n``, and its own
    ``n_sessions`` when it states one (it rests on fewer sessions than its slice)."""
    side = {k: est.get(k) for k in ("mean", "ci_low", "ci_high", "n")}
    if est.get("n_sessions") is not None:
        side["n_sessions"] = est["n_sessions"]
    return side


#: the methods that read each side's rate from its counts, not from the value its run shows
COUNTED_METHODS = ("beta_posterior", "agresti_caffo")


def _as_compared(side: dict, counts: tuple, mode: Optional[str], *, bayesian: bool, prior: tuple,
                 level: float) -> dict:
    """A side of another mode or prior as a count method reads it (:func:`~fair_forge_beam.statistical.compare.rate_as_compared`):
    unchanged when its run shows that value anyway, else that value with ``counts`` ``[k, n]`` and
    ``its_run`` (``{mode, mean, ci_low, ci_high}``: what its run shows, e.g. a Bayesian baseline's
    posterior mean 0.0625 of 0/14 in a frequentist comparison, which reads 0)."""
    k, n = counts
    read = rate_as_compared(k, n, bayesian=bayesian, prior=prior, level=level)
    if side.get("mean") is not None and math.isclose(float(side["mean"]), read["mean"], rel_tol=1e-12, abs_tol=1e-15):
        return side
    return {**side, **read, "counts": [k, n],
            "its_run": {"mode": mode, **{f: side.get(f) for f in ("mean", "ci_low", "ci_high")}}}


def read_as(side: Optional[Mapping], method: Optional[str], show) -> str:
    """`` (k/n = 0/14 as this frequentist run reads it; its bayesian run shows 0.0625 [0.001686, 0.218])``
    after a side that a count method read otherwise than its run shows it (:func:`_as_compared`'s
    ``its_run``), else ``""``; ``show`` formats an estimate (the gates' line, the report's table)."""
    if not side or not side.get("its_run") or not side.get("counts"):
        return ""
    k, n = side["counts"]
    own = side["its_run"]
    how = (f"k/n = {k}/{n} as this frequentist run reads it" if method == "agresti_caffo"
           else f"the posterior of {k}/{n} under this run's prior")
    return f" ({how}; its {own.get('mode') or 'own'} run shows {show(own)})"


def compare_estimate(metric: str, slice_key: str, path: str, cur: dict, base: dict, cur_counts: dict,
                     base_counts: dict, cfg_c: dict, cfg_b: dict, seed: int, draws: int, level: float,
                     cur_sessions: Optional[int] = None, base_sessions: Optional[int] = None) -> dict:
    """One comparison row: the difference ``cur − base`` of one estimate with its interval
    (:func:`fair_forge_beam.statistical.compare.difference`, method chosen by the current run's
    mode ``cfg_c["mode"]``) and its verdict. ``cur_sessions`` / ``base_sessions``: the sides'
    session counts for :func:`~fair_forge_beam.statistical.slices.too_small_to_compare` (a row
    too small to compare keeps the difference of the means, no interval, and says why in
    ``too_small``).

    Returns:
        ``{metric, slice, estimate, direction, current, baseline, method[, p_current_higher],
        difference: {mean, ci_low, ci_high}, verdict[, too_small]}``; a side is ``{mean, ci_low,
        ci_high, n[, n_sessions][, counts, its_run]}`` (``n_sessions`` when the estimate rests on fewer
        sessions than its slice, as ``results.json`` states it). A rate compared from its counts in the
        current run's mode shows a baseline of the other mode or prior as the difference reads it
        (``k/n`` in a frequentist comparison, the posterior under the current run's prior in a Bayesian
        one), with ``counts`` ``[k, n]`` and ``its_run`` ``{mode, mean, ci_low, ci_high}``, what its run
        shows (trial49 B4). The interval of the difference lies within the
        estimate's declared range (a rate difference within [−1, 1]).
    """
    sign = direction(metric, path)
    row: dict[str, Any] = {
        "metric": metric, "slice": slice_key, "estimate": path,
        "direction": {1: "higher is better", -1: "lower is better", 0: "no better side"}[sign],
        "current": _side(cur),
        "baseline": _side(base),
    }
    if cur.get("mean") is None or base.get("mean") is None:  # one run has no value (both: no row)
        row.update(difference=None, method=None, verdict=NOT_ESTIMABLE)
        return row
    small = too_small_to_compare([cur, base], [cur_sessions, base_sessions])
    if small:
        mean = cur["mean"] - base["mean"]
        row.update(method=None, difference={"mean": mean if math.isfinite(mean) else None, "ci_low": None,
                                            "ci_high": None}, verdict=TOO_SMALL, too_small=small)
        return row
    from fair_forge_beam.reports.load import run_config

    rc, rb = run_config(cfg_c), run_config(cfg_b)
    e, _ = estimate_info(metric, path)
    d = difference(cur, base, current_counts=cur_counts.get(path), baseline_counts=base_counts.get(path),
                   bayesian=rc.bayesian, prior=rc.beta_prior,
                   level=level, current_level=rc.ci_level, baseline_level=rb.ci_level,
                   draws=draws, seed=seed, key=("compare", metric, slice_key, path),
                   value_range=e.value_range if e is not None else None)
    row["method"] = d["method"]
    if d["method"] in COUNTED_METHODS and rb.mode is not None and (
            rb.mode != rc.mode or rc.bayesian and rb.beta_prior != rc.beta_prior):
        # a baseline of the other mode or prior: shown as the difference reads it (trial49 B4)
        row["baseline"] = _as_compared(row["baseline"], base_counts[path], rb.mode, bayesian=rc.bayesian,
                                       prior=rc.beta_prior, level=level)
    if "p_current_higher" in d:
        row["p_current_higher"] = d["p_current_higher"]
    row["difference"] = {"mean": d["mean"], "ci_low": d["ci_low"], "ci_high": d["ci_high"]}
    if d["method"] == "out_of_range":
        row["verdict"] = NOT_ESTIMABLE
    elif d["method"] == "no_interval":
        row["verdict"] = SAME if d["mean"] == 0 else NOT_ASSESSABLE
    else:
        row["verdict"] = _verdict(d["ci_low"], d["ci_high"], sign)
    return row


_compare_estimate = compare_estimate  # its name before it was public


def compare_runs(current: Union[str, dict], baseline: Union[str, dict], *, ci_level: Optional[float] = None,
                 draws: int = 20000, seed: Optional[int] = None, current_info: Optional[dict] = None,
                 baseline_info: Optional[dict] = None, current_dir: Optional[str] = None,
                 baseline_dir: Optional[str] = None, current_name: Optional[str] = None,
                 baseline_name: Optional[str] = None) -> dict:
    """Compare two runs (run folders, ``results.json`` paths or their loaded dicts).

    Args:
        current: the run judged (e.g. the new assistant, or after a change).
        baseline: the run it is compared with.
        ci_level: level of the difference intervals (default: the current run's ``ci_level``,
            read by :func:`~fair_forge_beam.reports.load.run_config`); in (0, 1).
        draws: Monte-Carlo draws per posterior (``beta_posterior``); at least 100.
        seed: seed of the keyed draws (default: the current run's seed, read the same way).
        current_info, baseline_info: the runs' ``run_info.json`` contents for :func:`run_differences`
            (default: read from the run folder when a run is given as a folder, else none).
        current_dir, baseline_dir: the run folders, for the data they share (:func:`shared_data`;
            default: the runs when given as folders; an audit gives its stage and ``--compare`` folder).
        current_name, baseline_name: how the ``shared_data`` line names the runs (default: their
            folders; an audit names its stage as its ``--output``).

    Returns:
        ``{"current": {inputs, mode}, "baseline": {…}, "ci_level", "methods": {method: note},
        "rows": [{metric, slice, estimate, direction, current, baseline, difference: {mean,
        ci_low, ci_high}, method, verdict[, p_current_higher]}], "differences": what else differs
        between the runs (:func:`run_differences`: settings, modes, metrics, inputs), "shared_data": the data
        both runs hold, given as folders (:func:`shared_data`; ``None``: none found), "verdicts": {metric: {verdict:
        count}}, "read_generically": {metric: why} for a compared metric without an info in this process
        (:data:`NO_INFO`; the key only when there is one), "not_compared": {metric: why no estimate of it was compared} for a metric without
        a verdict (the current or the baseline run scored nothing, no slice in common, no value in
        either run), "undefined_in_both": estimates without a value in either run (no row), "only_in_current"
        / "only_in_baseline": metric names}``. ``difference`` is
        current − baseline in the estimate's units. Rows cover the metrics, slices and estimates
        both runs have, in the current run's order; output is deterministic.

    Raises:
        ValueError: ``ci_level`` outside (0, 1) or ``draws`` < 100.
        FileNotFoundError: a run folder without ``results.json``.
    """
    a, b = _doc(current), _doc(baseline)
    current_info = _info(current) if current_info is None else current_info
    baseline_info = _info(baseline) if baseline_info is None else baseline_info
    cfg_c, cfg_b = a.get("config", {}), b.get("config", {})
    from fair_forge_beam.reports.load import run_config

    rc = run_config(cfg_c)
    level = float(ci_level if ci_level is not None else rc.ci_level)
    if not 0 < level < 1:
        raise ValueError(f"ci_level must be in (0, 1), got {level}")
    if draws < 100:
        raise ValueError(f"draws must be at least 100, got {draws}")
    seed = int(seed if seed is not None else rc.seed)
    rows: list[dict] = []
    generic = {m: NO_INFO for m in a["metrics"] if m in b["metrics"] and info_of(m) is None}
    verdicts: dict[str, dict[str, int]] = {}
    not_compared: dict[str, str] = {}
    no_value = 0
    for metric, m in a["metrics"].items():
        if metric not in b["metrics"]:
            continue
        base_slices = {s["slice"]: s for s in b["metrics"][metric].get("slices", [])}
        tally: Counter = Counter()
        common = 0
        for rec in m.get("slices", []):
            other = base_slices.get(rec["slice"])
            if other is None:
                continue
            common += 1
            base_est = dict(iter_estimates(metric, other))
            cur_counts, base_counts = counts_for(metric, rec), counts_for(metric, other)
            n_cur, n_base = sessions_of(metric, rec), sessions_of(metric, other)
            for path, est in iter_estimates(metric, rec, m.get("headline_columns")):
                if path not in base_est:
                    continue
                if est.get("mean") is None and base_est[path].get("mean") is None:
                    no_value += 1  # undefined in both runs (e.g. a group never mentioned): nothing to compare
                    continue
                row = compare_estimate(metric, rec["slice"], path, est, base_est[path], cur_counts, base_counts,
                                       cfg_c, cfg_b, seed, draws, level, n_cur, n_base)
                rows.append(row)
                tally[row["verdict"]] += 1
        verdicts[metric] = dict(sorted(tally.items()))
        if not tally:  # said, never a bare "humanity: " (trial 28h H13)
            not_compared[metric] = ("the current run scored nothing" if not m.get("slices")
                                    else "the baseline run scored nothing" if not base_slices
                                    else "no slice of the current run is in the baseline" if not common
                                    else "no estimate has a value in either run")
    # the two run folders, given as such or as the runs themselves
    cdir = current_dir or (current if isinstance(current, str) else None)
    bdir = baseline_dir or (baseline if isinstance(baseline, str) else None)
    return {
        "current": {"inputs": cfg_c.get("inputs"), "mode": cfg_c.get("mode")},
        "baseline": {"inputs": cfg_b.get("inputs"), "mode": cfg_b.get("mode")},
        "ci_level": level,
        "seed": seed,
        "draws": draws,
        "methods": {k: METHOD_NOTES[k] for k in sorted({r["method"] for r in rows if r["method"]})},
        "rows": rows,
        "differences": run_differences(a, b, current_info, baseline_info),
        # the data both runs hold (the same run twice, a roll-up and one of its nights): not independent samples
        "shared_data": shared_data(cdir, bdir, current_name=current_name, baseline_name=baseline_name),
        "possibly_shared_data": possibly_shared_data(cdir, bdir, current_name=current_name,
                                                     baseline_name=baseline_name, docs=(a, b)),
        # what a folder lacks of the files that record how it was made (an older layout: trial37 T9)
        "missing": [line for line in (provenance_gaps(cdir, current_name), provenance_gaps(bdir, baseline_name)) if line],
        "verdicts": verdicts,
        "not_compared": not_compared,
        "undefined_in_both": no_value,
        "only_in_current": sorted(set(a["metrics"]) - set(b["metrics"])),
        "only_in_baseline": sorted(set(b["metrics"]) - set(a["metrics"])),
        # said, never a silent switch of method (trial35 T10: "worse" in the run, "higher" here)
        **({"read_generically": generic} if generic else {}),
    }


#: results.json ``config`` keys compared by :func:`run_differences` (the statistical mode and its parameters,
#: the metrics, the inputs); ``statistical_mode`` is the repr of the same parameters
_CONFIG_KEYS = ("mode", "metrics", "inputs", "seed", "mc_samples", "ci_level", "beta_prior_a", "beta_prior_b")
#: config keys only a Bayesian run sets (not listed again when the modes differ)
_BAYESIAN_ONLY = ("seed", "mc_samples", "beta_prior_a", "beta_prior_b")
#: main-job options left out of the settings comparison: those that say where or how a run ran
#: (:data:`~fair_forge_beam.options.RUN_ONLY_OPTIONS`, the roll-up's rule too) and those the
#: results.json config already holds
_NOT_SETTINGS = RUN_ONLY_OPTIONS | {"mode", "metrics", "seed", "mc_samples", "ci_level"}


def _settings(info: Optional[dict]) -> Optional[dict]:
    """The main-job option values of a run: its ``run_info.json`` ``options`` (the typed values it
    ran with), else parsed from its ``argv`` (runs written before ``options`` was recorded);
    ``None`` when the run left neither. Declared defaults fill what was not given; unknown flags
    (Beam's) are kept as given under ``beam``."""
    argv = (info or {}).get("argv")
    from fair_forge_beam.options import OPTIONS, add_arguments, result_beam_options

    typed = (info or {}).get("options")
    if isinstance(typed, dict):
        out = {d: typed.get(d, o.default) for d, o in OPTIONS.items() if d not in _NOT_SETTINGS}
        out["beam"] = result_beam_options((info or {}).get("beam_args") or [])  # only those that can change results
        return out
    if not isinstance(argv, list):
        return None

    class _Parser(argparse.ArgumentParser):
        def error(self, message):  # an argv this version cannot read is no settings record, not an exit
            raise ValueError(message)

    parser = _Parser(add_help=False, allow_abbrev=False, exit_on_error=False)
    add_arguments(parser, metrics=())
    try:
        args, rest = parser.parse_known_args([str(a) for a in argv])
    except (argparse.ArgumentError, ValueError):
        return None  # an argv this version cannot read: no settings comparison
    out = {d: getattr(args, d, None) for d in OPTIONS if d not in _NOT_SETTINGS}
    out["beam"] = result_beam_options(rest)  # only those that can change results
    return out


def _same_files(a, b) -> bool:
    import posixpath

    names = lambda xs: [posixpath.basename(str(x).replace("\\", "/")) for x in xs or []]  # noqa: E731
    return names(a) == names(b)


def run_differences(current: dict, baseline: dict, current_info: Optional[dict] = None,
                    baseline_info: Optional[dict] = None) -> list[dict]:
    """What differs between two runs besides their results: statistical mode and its parameters,
    metrics, inputs, interactions read, each shared metric's lexicon, and — when both runs'
    ``run_info.json`` are given — every result-changing main-job option that either run's metrics and
    mode read (:func:`~fair_forge_beam.options.options_unread`) and package version.

    Args:
        current, baseline: the runs' ``results.json`` contents.
        current_info, baseline_info: their ``run_info.json`` contents (optional; with ``argv``, the
            options are compared, declared defaults filling what was not given).

    Returns:
        ``[{"what", "current", "baseline", "message"}]`` in a fixed order; ``message`` is one line
        naming the difference (``"mode: current bayesian, baseline frequentist"``). Empty: no
        difference found.
    """
    out: list[dict] = []

    def add(what, cur, base, message=None):
        out.append({"what": what, "current": cur, "baseline": base,
                    "message": message or f"{what}: current {_show(cur)}, baseline {_show(base)}"})

    cfg_c, cfg_b = current.get("config") or {}, baseline.get("config") or {}
    modes_differ = cfg_c.get("mode") != cfg_b.get("mode")
    for key in _CONFIG_KEYS:
        c, b = cfg_c.get(key), cfg_b.get(key)
        if c == b or (modes_differ and key in _BAYESIAN_ONLY):  # a frequentist run has no seed or prior
            continue
        if key == "inputs" and _same_files(c, b):
            add(key, c, b, f"inputs: the same file names in other folders (current {_show(c)}, baseline {_show(b)})")
        else:
            add(key, c, b)
    read_c = (current.get("summary") or {}).get("interactions_read")
    read_b = (baseline.get("summary") or {}).get("interactions_read")
    if read_c != read_b:
        add("interactions_read", read_c, read_b)
    for metric, m in (current.get("metrics") or {}).items():
        other = (baseline.get("metrics") or {}).get(metric)
        if isinstance(other, dict) and m.get("lexicon") != other.get("lexicon"):
            add(f"{metric} lexicon", m.get("lexicon"), other.get("lexicon"))
    set_c, set_b = _settings(current_info), _settings(baseline_info)
    if set_c is not None and set_b is not None:
        from fair_forge_beam.options import options_unread

        # an option neither run's metrics and mode read is no difference (trial34 T5: two humanity
        # runs "differ in --toxicity-scorer")
        unread = (options_unread(cfg_c.get("metrics"), cfg_c.get("mode"))
                  & options_unread(cfg_b.get("metrics"), cfg_b.get("mode")))
        for key in set_c:
            if key not in unread and set_c[key] != set_b.get(key):
                name = "Beam options" if key == "beam" else f"--{key.replace('_', '-')}"
                add(name, set_c[key], set_b.get(key))
    # a run without run_info.json (an older layout) still records its versions in results.json's config
    info_c, info_b = (current_info or {}).get("versions"), (baseline_info or {}).get("versions")
    ver_c, ver_b = info_c or cfg_c.get("versions"), info_b or cfg_b.get("versions")
    if isinstance(ver_c, dict) and isinstance(ver_b, dict):
        # the two files list other packages: from results.json's on one side, the packages both name
        pkgs = set(ver_c) | set(ver_b) if bool(info_c) == bool(info_b) else set(ver_c) & set(ver_b)
        from fair_forge_beam.options import packages_read

        # only the packages either run imports (trial39 T8: torch "differed" for two keyword runs)
        pkgs &= (packages_read(cfg_c.get("metrics"), cfg_c.get("mode"), set_c)
                 | packages_read(cfg_b.get("metrics"), cfg_b.get("mode"), set_b))
        for pkg in sorted(pkgs):
            if ver_c.get(pkg) != ver_b.get(pkg):
                add(f"version of {pkg}", ver_c.get(pkg), ver_b.get(pkg))
    # the layouts results.json records (run_info.json's versions are the packages'): a run whose statistics
    # or results were written by another schema is unlike, every package the same or not (trial48 B4)
    sch_c, sch_b = cfg_c.get("versions"), cfg_b.get("versions")
    if isinstance(sch_c, dict) and isinstance(sch_b, dict):
        for key in SCHEMA_VERSIONS:
            if sch_c.get(key) != sch_b.get(key):
                add(f"version of {key}", sch_c.get(key), sch_b.get(key))
    return out


#: the schema versions in results.json's ``config.versions`` (:func:`~fair_forge_beam.reports.results.results_config`)
SCHEMA_VERSIONS = ("statistics_schema", "results_schema")


#: differences that leave two runs comparable: other data is the point of a baseline and of a trend
DATA_DIFFERENCES = ("inputs", "interactions_read")


def shared_data(current_dir: Optional[str], baseline_dir: Optional[str], *, current_name: Optional[str] = None,
                baseline_name: Optional[str] = None) -> Optional[str]:
    """What data two run folders share (one line: "out and audits/d2 both read logs/d2.jsonl (…)"),
    or ``None``: the roll-up's check (:func:`~fair_forge_beam.rollup.find_overlap`: the same folder,
    an audit run both hold, an input file both read, the same content or records) on their
    ``stats/manifest.json``. A folder without a readable manifest (a run given as its results.json
    file, a run of an older version) is compared by folder only (:func:`possibly_shared_data` says
    the input files both ``results.json`` name). ``current_name`` /
    ``baseline_name``: how the line names them (an audit gates its stage, shown as its --output)."""
    if not current_dir or not baseline_dir:
        return None
    from fair_forge_beam.overlap import find_overlap

    runs = [_run_folder(current_dir), _run_folder(baseline_dir)]
    manifests = _manifests(runs)
    if not all(manifests):  # no record of the data: the same folder is all that can be told
        manifests = [{}, {}]
    found = find_overlap(runs, manifests, names=[current_name or current_dir, baseline_name or baseline_dir])
    return None if found is None else found[0]


def _manifests(runs: Sequence[str]) -> list:
    """Each run folder's ``stats/manifest.json`` content (``{}``: none that can be read)."""
    from fair_forge_beam.io.edge import read_side_json

    manifests = []
    for run in runs:
        try:
            m = read_side_json(f"{run}/stats/manifest.json", "a run's stats/manifest.json")
        except (OSError, ValueError):
            m = None
        manifests.append(m if isinstance(m, dict) else {})
    return manifests


def possibly_shared_data(current_dir: Optional[str], baseline_dir: Optional[str], *,
                         current_name: Optional[str] = None, baseline_name: Optional[str] = None,
                         docs: Optional[Sequence[Optional[dict]]] = None) -> Optional[str]:
    """When a run folder has no ``stats/manifest.json`` (an older layout: :func:`shared_data` can
    tell the same folder only, trial37 T9): the input files both runs' ``results.json`` name (the same
    real path), as one line saying what could not be checked — a warning, never a gate's failure
    (the file may have changed between the runs) —, else ``None`` (both have a manifest, or no
    input in common). ``docs``: the runs' ``results.json`` contents when the caller has them."""
    if not current_dir or not baseline_dir:
        return None
    runs = [_run_folder(current_dir), _run_folder(baseline_dir)]
    lacking = [not m for m in _manifests(runs)]
    if not any(lacking) or shared_data(current_dir, baseline_dir) is not None:
        return None
    names = [current_name or current_dir, baseline_name or baseline_dir]
    inputs = []
    for run, doc in zip(runs, docs or (None, None)):
        if doc is None:
            try:
                from fair_forge_beam.reports.load import read_results

                doc = read_results(run)
            except (OSError, ValueError):
                return None
        given = (doc.get("config") or {}).get("inputs") or ()
        inputs.append({os.path.realpath(str(i)): str(i) for i in (given if isinstance(given, list) else [given])
                       if "://" not in str(i)})
    common = sorted(set(inputs[0]) & set(inputs[1]))
    if not common:
        return None
    without = [n for n, lack in zip(names, lacking) if lack]
    return (f"{names[0]} and {names[1]} both name {inputs[1][common[0]]}"
            + (f" and {len(common) - 1} more input file{'s' if len(common) > 2 else ''}" if len(common) > 1 else "")
            + f" as input in results.json ({' and '.join(without)} ha{'ve' if len(without) > 1 else 's'} no "
            "stats/manifest.json, so whether the file changed between the runs cannot be told)")


#: what a run folder of the current layout holds besides results.json, and what is lost without it
PROVENANCE_FILES = (("run_info.json", "its options are not compared, only results.json's settings"),
                    ("stats/manifest.json", "the data it shares with the other run is judged from results.json's "
                                            "inputs alone"))


def provenance_gaps(run_dir: Optional[str], name: Optional[str] = None) -> Optional[str]:
    """One line saying what a run folder lacks of the files that record how it was made
    (:data:`PROVENANCE_FILES`: an older layout, a partial copy) and what is therefore not checked,
    or ``None`` (nothing missing, or not a folder). Said once by ``compare``, ``--compare`` and
    ``--baseline`` (trial37 T9)."""
    if not run_dir:
        return None
    from fair_forge_beam._beam import beam  # noqa: F401 - guarded Beam import first
    from apache_beam.io.filesystems import FileSystems

    folder = _run_folder(run_dir)
    try:
        if not FileSystems.exists(f"{folder}/results.json"):
            return None
        missing = [(f, what) for f, what in PROVENANCE_FILES if not FileSystems.exists(f"{folder}/{f}")]
    except Exception:  # noqa: BLE001 - a courtesy line: never a failure of the comparison
        return None
    if not missing:
        return None
    why = "a run of an older layout, or a partial copy"
    if missing[0][0] == "run_info.json" and _published_by_its_job(folder):
        why = ("a Flex Template launch's run: its Dataflow job published it, and run_info.json is written by a "
               "launcher that waits for the job")
    return f"{name or run_dir} has no {' and no '.join(f for f, _ in missing)} ({why}): {'; '.join(what for _, what in missing)}"


def _published_by_its_job(folder: str) -> bool:
    """Whether the run in ``folder`` was published by its job itself, as a Flex Template launch's
    Dataflow job does (trial39 T3): its ``stats/manifest.json`` was sealed (it lists the run's
    files) without ``run_info.json``, which a launcher that waited for the job writes and seals."""
    from fair_forge_beam.io.edge import read_side_json
    from fair_forge_beam.io.session_stats import MANIFEST

    try:
        files = read_side_json(f"{folder}/{MANIFEST}", "a run's stats/manifest.json").get("files")
    except Exception:  # noqa: BLE001 - a courtesy line: never a failure of the comparison
        return False
    return isinstance(files, dict) and bool(files) and "run_info.json" not in files


def _run_folder(path: str) -> str:
    path = folder_path(path)
    return folder_path(path[:-len("/results.json")] or "/") if path.endswith("/results.json") else path


def comparability(current: dict, baseline: dict, current_info: Optional[dict] = None,
                  baseline_info: Optional[dict] = None, *, current_dir: Optional[str] = None,
                  baseline_dir: Optional[str] = None, current_name: Optional[str] = None) -> dict:
    """Whether two runs may be compared as independent samples of like runs — the one place that
    decides it for ``compare``, ``--compare``, ``--baseline`` gates (audit and roll-up) and the
    changes a ``trend`` claims.

    Returns:
        ``{"differences": [...], "shared_data": line or None, "possibly_shared_data": line or None,
        "missing": [lines], "caveats": [lines]}``: ``missing``: :func:`provenance_gaps` of the folders
        given, ``possibly_shared_data``: :func:`possibly_shared_data` (a warning only); ``differences``
        are :func:`run_differences`' entries other than the data (:data:`DATA_DIFFERENCES`: inputs and
        interactions read, the point of a comparison): settings from ``results.json`` and, given
        both ``run_info.json``, every result-changing option and package version; ``shared_data``:
        :func:`shared_data` of the run folders (given ``current_dir`` and ``baseline_dir``);
        ``caveats``: one line each, "the runs differ in …" and "the runs share data: …".
    """
    diffs = [d for d in run_differences(current, baseline, current_info, baseline_info)
             if d["what"] not in DATA_DIFFERENCES]
    shared = shared_data(current_dir, baseline_dir, current_name=current_name)
    maybe = possibly_shared_data(current_dir, baseline_dir, current_name=current_name, docs=(current, baseline))
    missing = [line for line in (provenance_gaps(current_dir, current_name), provenance_gaps(baseline_dir)) if line]
    caveats = [printable(line) for line in missing]
    caveats += [f"the runs differ in {printable(d['message'])}" for d in diffs]
    if shared:
        caveats.append(f"the runs share data: {printable(shared)}")
    if maybe:
        caveats.append(f"the runs may share data: {printable(maybe)}")
    return {"differences": diffs, "shared_data": shared, "possibly_shared_data": maybe, "missing": missing,
            "caveats": caveats}


def replaced_run_line(out: str, current: dict, earlier: dict, current_info: Optional[dict] = None,
                      earlier_info: Optional[dict] = None) -> Optional[str]:
    """The one line a run says when it replaced, in ``out``, an earlier run made with other settings
    (trial33 T12: the bare ``fair-forge-beam`` ran its defaults into README's ``fair_forge_output``
    and replaced README's humanity+toxicity Bayesian audit without a word), or ``None`` when the
    settings are the same (a re-run: nothing to say). The settings are those :func:`run_differences`
    compares — the statistical mode and its parameters, metrics, inputs and every result-changing
    option —, not what the data or the installed versions made of them. An earlier run without
    ``run_info.json`` (``earlier_info`` empty: an older layout) is always said, with what could not
    be compared (its options): once, since the run that replaces it writes one (trial37 T9)."""
    diffs = [d for d in run_differences(current, earlier, current_info, earlier_info)
             if d["what"] != "interactions_read" and not d["what"].startswith("version of ")
             and not d["what"].endswith(" lexicon")]
    if not earlier_info:  # an older layout (no run_info.json): its options cannot be compared (trial37 T9)
        said = "; ".join(f"{d['what']} {_show(d['baseline'])} -> {_show(d['current'])}" for d in diffs)
        return (f"replaced the earlier run in {out}, " + (f"made with other settings ({said}); " if diffs else "")
                + "it had no run_info.json (an older layout): only the settings its results.json records (mode, "
                "metrics, inputs, seed, draws, interval level, priors) could be compared"
                + ("" if diffs else ", and they are the same") + "; give another --output to keep both runs")
    if not diffs:
        return None
    said = "; ".join(f"{d['what']} {_show(d['baseline'])} -> {_show(d['current'])}" for d in diffs)
    return (f"replaced the earlier run in {out}, made with other settings ({said}); give another --output "
            f"to keep both runs")


def _show(v) -> str:
    if v is None:
        return "not set"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(str(x) for x in v) + "]"
    return str(v)


def _f(x) -> str:
    return fixed(x, 4, sign=True)


def comparison_table(cmp: dict, only_detectable: bool = False) -> str:
    """Plain-text table of a :func:`compare_runs` result (one line per row). ``only_detectable``:
    only the rows whose verdict is a detectable difference (:data:`DETECTABLE`), then one line
    counting the others (no detectable difference, too small to compare, not assessable, not
    estimable: their tally per metric is above) and naming ``--all`` (the command's default: a
    10,000-assistant run listed 12,848 "too small to compare" rows, issue 28)."""
    lines = [f"comparison (current − baseline), {cmp['ci_level']:.0%} intervals"]
    lines += [f"warning: {printable(m)}" for m in cmp.get("missing") or ()]
    lines += [f"warning: the runs differ in {printable(d['message'])}" for d in cmp.get("differences", [])]
    if cmp.get("shared_data"):  # e.g. a run compared with itself (trial34 T10), a roll-up with one of its nights
        lines.append(f"warning: the runs share data: {printable(cmp['shared_data'])}; a difference between them is "
                     "not a difference between independent runs")
    if cmp.get("possibly_shared_data"):  # an older layout: judged from results.json's inputs (trial37 T9)
        lines.append(f"warning: the runs may share data: {printable(cmp['possibly_shared_data'])}")
    lines += [f"warning: {printable(m)}: {why}" for m, why in (cmp.get("read_generically") or {}).items()]
    for metric, tally in cmp["verdicts"].items():
        why = (cmp.get("not_compared") or {}).get(metric, "nothing to compare") if not tally else None
        lines.append(f"{metric}: " + (f"nothing compared: {why}" if why else ", ".join(f"{v}: {c}" for v, c in tally.items())))
    left = 0
    for r in cmp["rows"]:
        if only_detectable and r["verdict"] not in DETECTABLE:
            left += 1
            continue
        d = r["difference"] or {}
        # how the difference was judged, or why it was not (never a bare "None": fresh14)
        how = r.get("method") or r.get("too_small") or ""
        lines.append(f"  {pad(printable(r['metric']), 14)} {pad(shown_key(r['slice']), 28)} "
                     f"{pad(printable(r['estimate']), 40)} {_f(d.get('mean'))} "
                     f"[{_f(d.get('ci_low'))}, {_f(d.get('ci_high'))}]  {r['verdict']}"
                     + (f"  ({printable(str(how))})" if how else ""))
    if left:
        lines.append(f"{left:,} row{'s' if left != 1 else ''} without a detectable difference not listed "
                     "(no detectable difference, too small to compare, not assessable or estimable: counted above); "
                     "--all lists every row, --json writes every row")
    return "\n".join(lines)


def _run_paths(runs: Sequence[str]) -> list:
    """The paths a comparison reads: each run as given and, for a run given as its ``results.json``,
    the run folder holding it (a folder with ``run_info.json``)."""
    paths = list(runs)
    for run in runs:
        folder = os.path.dirname(os.path.abspath(run)) if "://" not in run else ""
        if folder and os.path.isfile(run) and os.path.isfile(os.path.join(folder, "run_info.json")):
            paths.append(folder)
    return paths


#: the command's name in its usage, errors and interrupt line: the console script's named command
#: (pipelines.audit.COMMANDS), also when run as ``python -m fair_forge_beam.reports.compare``, as rollup's and trend's
PROG = "fair-forge-beam compare"


def main(argv: Optional[Sequence[str]] = None) -> int:
    from fair_forge_beam.options import OneLineErrorParser, user_path
    from fair_forge_beam.plain import plain_reason

    p = OneLineErrorParser(prog=PROG,
                                description="Compare two fair_forge_beam runs (current − baseline).")
    p.add_argument("current", type=user_path, help="run folder (or results.json) judged")
    p.add_argument("baseline", type=user_path, help="run folder (or results.json) compared with")
    p.add_argument("--json", metavar="PATH", type=user_path,
                   help="also write the comparison as JSON: every row, whatever --all ('-' or /dev/stdout: standard "
                        "output, and the table goes to stderr)")
    p.add_argument("--all", action="store_true",
                   help="list every row, not only detectable differences (better, worse, higher, lower; "
                        "the others are counted in one line)")
    args = p.parse_args(argv)
    for name in ("current", "baseline", "json"):
        if getattr(args, name) is not None and not getattr(args, name).strip():
            p.error(f"{name if name != 'json' else '--json'} is empty: name a run folder or its results.json"
                    if name != "json" else "--json is empty: name the file to write")
    from fair_forge_beam.io.paths import is_standard_output, write_text_output

    if args.json and not is_standard_output(args.json):  # never one of the runs, inside one, or a file of one (B9)
        from fair_forge_beam.io.paths import check_output_file

        from fair_forge_beam.reports.output_folder import check_no_other_run, is_owned_name

        try:
            check_output_file(args.json, _run_paths([args.current, args.baseline]), "--json")
            # nor a file a third run's folder owns (an audit's comparison.json replaced: trial38 T7); a file of
            # another name beside a run is the user's own, as every command keeps it (docs/data.md)
            if is_owned_name(os.path.basename(args.json.rstrip("/"))):
                check_no_other_run(os.path.dirname(args.json.rstrip("/")) or ".", "compare", option="--json")
        except ValueError as exc:
            p.error(str(exc))
    docs, infos = [], []
    for name in ("current", "baseline"):  # a missing, empty or unreadable run: one line naming it, exit 2 (was a traceback)
        try:  # the run's results and its run_info.json: the settings differences are told from both (fresh16)
            docs.append(_doc(getattr(args, name)))
            infos.append(_info(getattr(args, name)) or {})
        except (OSError, ValueError) as exc:
            p.error(f"{name} run {getattr(args, name)}: {plain_reason(exc)}")
    try:  # an unwritable --json too
        from fair_forge_beam.io.secrets import scrub_known

        # values masked (key values, URL credentials), never keys
        cmp = scrub_known(compare_runs(*docs, current_info=infos[0], baseline_info=infos[1],
                                       current_dir=args.current, baseline_dir=args.baseline))
        empty = empty_comparison_reason(cmp)
        to_stdout = bool(args.json) and is_standard_output(args.json)  # '-': stdout holds the JSON alone (jq)
        if args.json and not empty:  # the whole file or none (a full disk leaves --json as it was)
            write_text_output(args.json, json.dumps(cmp, indent=2, ensure_ascii=False, allow_nan=False)
                              + ("\n" if to_stdout else ""))
    except (OSError, ValueError) as exc:
        from fair_forge_beam.console import environment_failure

        if environment_failure(exc):  # a full disk, a quota: exit code 1, one line (console.guarded)
            raise
        p.error(plain_reason(exc))
    print(comparison_table(cmp, only_detectable=not args.all), file=sys.stderr if to_stdout else sys.stdout)
    if empty:  # nothing was compared: never exit 0 as if it had been (trial29 T11); --json is not written
        from fair_forge_beam.reports.empty_run import fail_empty_run

        fail_empty_run(empty, None if to_stdout else args.json, prog=PROG, allow_empty=False, kind="empty comparison")
    return 0


def empty_comparison_reason(cmp: dict) -> Optional[str]:
    """Why the comparison ``cmp`` (:func:`compare_runs`) compared nothing, or ``None``: no metric
    has a row judged (every metric's tally is empty: a run that scored nothing, no common slice ...),
    with each metric's reason: "nothing compared (humanity: the current run scored nothing)", or
    the runs' metrics when they share none (:func:`nothing_compared`)."""
    verdicts = cmp.get("verdicts") or {}
    if any(verdicts.values()):
        return None
    runs = [("current", [*verdicts, *(cmp.get("only_in_current") or ())]),
            ("baseline", [*verdicts, *(cmp.get("only_in_baseline") or ())])]
    return nothing_compared(runs, cmp.get("not_compared") or {})


def nothing_compared(runs: Sequence[tuple[str, Sequence[str]]], why: dict) -> str:
    """The one reason ``compare`` and ``trend`` give when runs compared nothing: no estimate of a
    metric, a slice and a headline is in two of the runs with a value in either. ``runs``: each
    run's ``(label, metric names)``; ``why``: ``{metric: why none of it was compared}``.
    "nothing compared (the runs share no metric: current humanity, toxicity; baseline context)"
    when no metric is in two runs (was "the runs have no metric", trial30 T4), else each shared
    metric's reason: "nothing compared (humanity: the current run scored nothing)"."""
    seen = Counter(m for _, names in runs for m in dict.fromkeys(names))
    shared = [m for m, c in seen.items() if c > 1]
    if not shared:
        each = "; ".join(f"{label} {', '.join(names) if names else 'no metric'}" for label, names in runs)
        return f"nothing compared (the runs share no metric: {each})"
    named = "; ".join(f"{m}: {why.get(m, 'nothing to compare')}" for m in shared)
    return f"nothing compared ({named})"


if __name__ == "__main__":
    from fair_forge_beam.console import entry_point

    sys.exit(entry_point(main, "comparison", prog=PROG))
