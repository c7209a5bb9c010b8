"""The trend report over many runs: ``trend.json`` and ``trend.html`` (issue 27; docs/report.md).

    fair-forge-beam trend 'audits/*' --output trends/          # -> trends/trend.html, trends/trend.json
    from fair_forge_beam.reports.trend import build_trend, find_runs, iter_runs, write_trend

A *run* is a folder holding ``results.json`` (and usually ``run_info.json``): an audit, or a roll-up
(``fair-forge-beam rollup`` writes the same files; its ``run_info.json`` names the runs it merged
under ``rollup.runs``). For every metric,
headline estimate (:func:`headline_estimates`) and slice (``overall`` and ``assistant_id=…`` by
default), the trend follows the estimate and its interval from run to run, and compares each run
with the previous run in which the slice has a value and that it may be compared with: a run of
its own kind (audits with audits, roll-ups with roll-ups) that shares no data with it (neither
is the other or merged it, they merged no run in common and their statistics hold no audit run in
common, at any level of roll-ups). So a week's roll-up listed beside
its nights is compared with the week before, never with its own last night.

**Order of runs.** By the data they cover, oldest first, never by when they ran (a night
re-run a week later keeps its place): a run covers the ``YYYY-MM-DD`` day in its folder's name
(:func:`covered_day`: ``audits/2026-12-01``, the day the user gave it; not a day that is no calendar
day or, for an audit, after it was made: a note names such a run), a roll-up without a day of its
own the latest day among the runs it merged (``run_info.json``'s ``rollup.runs``; a roll-up of roll-ups, their
days), and runs on one day
come audits first. Runs without a covered day come first, by time: ``run_info.json``'s
``started_at``, else its ``finished_at`` (UTC, ISO 8601; a time without offset is read as UTC); a
roll-up with neither takes the latest time of the merged runs that are part of the trend; runs
without any time (written before run_info.json recorded it) first of all. Ties are ordered by path.

**Changes.** A change between two consecutive runs of a series uses the difference statistics of
``--compare`` (:mod:`fair_forge_beam.reports.compare`: the posterior of the difference of two Beta
posteriors of the stored counts for Bayesian rates, Agresti–Caffo for frequentist rates, a
normal approximation from the two intervals otherwise), with the later run as *current*: the
seed of the keyed draws is the later run's (the declared ``--seed`` default when it has none), the interval level the later
run's ``ci_level`` (both read by :func:`~fair_forge_beam.reports.load.run_config`, the declared defaults when it has none), :data:`DRAWS` draws per posterior. A change is claimed
when the interval of the difference excludes 0 (verdict ``better``/``worse`` with a known
direction, else ``higher``/``lower``). No change is claimed, and the pair says "too small to
compare", when either side rests on fewer than two sessions or has a zero-width interval
(:func:`fair_forge_beam.statistical.slices.too_small_to_compare`). The two runs are treated as
independent samples: a roll-up and a run it merged, or two runs whose statistics hold an audit run in
common, are never paired (:func:`_comparable_earlier`); two audits in two folders that read the same
input file are (the rule does not read the inputs), positively correlated, which makes the interval
wider than it should be, never narrower.

**Coverage.** Per run and metric: interactions scored, interactions not scored and the
*dead-letter share* = interactions not scored (dead-lettered by the metric's stage) / interactions
read; and the run's records rejected at read (records, a unit of their own).

``trend.json`` (:func:`build_trend`'s result, documented in docs/report.md) is deterministic:
the same runs, found by the same patterns, give the same bytes. ``trend.html`` is self-contained
(inline CSS and SVG, no script, a Content-Security-Policy that loads nothing); every value from
the data is escaped by jinja2's autoescape, plot text by matplotlib's SVG writer.
"""
from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import time
from collections import Counter
from datetime import date, datetime, timedelta, timezone
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

from fair_forge_beam.reports.estimates import counts_for, direction, value_range
from fair_forge_beam.plain import folder_path, path_name_problem, plain_reason
from fair_forge_beam.quoting import fixed, quoted
from fair_forge_beam.reports.summary import format_estimate
from fair_forge_beam.schemas.metric_info import dotted_get

__all__ = ["TREND_SCHEMA_VERSION", "DEFAULT_SLICES", "DEFAULT_OUTPUT", "DRAWS", "TrendUsageError", "headline_estimates", "covered_day",
           "find_runs", "iter_runs", "build_trend", "render_trend", "write_trend", "trend_json"]

#: version of the ``trend.json`` structure (docs/report.md)
TREND_SCHEMA_VERSION = 1
#: slice dimensions followed by default: all interactions and each assistant
DEFAULT_SLICES = ("overall", "assistant_id")

#: where trend.html and trend.json go when no output folder is given: a ``trend`` folder in the current one.
#: **Decision** (fix39a, trial38): it was the current folder itself, refused when that folder holds a run (a
#: user in a run folder, or where ``--output .`` put one): the trend's files beside a run's would mix them
DEFAULT_OUTPUT = "trend"
#: Monte-Carlo draws per posterior of a Beta difference (as ``--compare``)
DRAWS = 20000
#: verdicts that claim a change (reports.compare's)
CHANGED = ("worse", "better", "higher", "lower")
#: claimed changes listed in trend.html (all are in trend.json)
MAX_CHANGE_ROWS = 200
#: runs shown as columns in the per-estimate value tables of trend.html (the latest ones)
MAX_VALUE_COLUMNS = 12
#: panels (slices) in one trend figure: as many as one panel of the run's report draws
#: (:data:`fair_forge_beam.reports.plots.MAX_SLICES`, checked by tests/test_trend.py); here, so that a trend without plots
#: (``--no-plots``) chooses the same slices without importing matplotlib
TREND_PANELS = 16


class TrendUsageError(ValueError):
    """A usage error of the trend command (no run matched, a match that is not a run folder): one line."""


# ----------------------------------------------------------------------------- metric reading
def headline_estimates(metric: str, metric_doc: dict) -> list[tuple[str, int, float]]:
    """The estimates the trend follows for ``metric`` and how to read them:
    ``[(dotted estimate path, direction, range length)]`` with direction ``+1`` (higher is better),
    ``-1`` (lower is better) or ``0`` (no better side) and the length of the estimate's natural
    range (differences are ranked by ``|difference| / range``).

    The one place that answers "which estimates are headlines and which way is better": today
    ``results.json``'s ``headline_columns`` of the metric (``metric_doc``) with
    :func:`~fair_forge_beam.reports.estimates.direction` / ``value_range``; the metric info of
    issue 29 replaces it here.
    """
    return [(h, direction(metric, h), value_range(metric, h)) for h in metric_doc.get("headline_columns") or []]


# ----------------------------------------------------------------------------- finding runs
def _is_remote(path: str) -> bool:
    return "://" in path


def _exists(path: str) -> bool:
    from fair_forge_beam.reports.load import _exists as exists_anywhere

    return os.path.exists(path) if not _is_remote(path) else exists_anywhere(path)


def _key(path: str) -> str:
    """A run's identity for de-duplication and roll-up inputs: absolute, normalised (local paths)."""
    path = folder_path(path)
    return path if _is_remote(path) else os.path.normpath(os.path.abspath(path))


def find_runs(patterns: Sequence[str], exclude: Optional[str] = None) -> list[str]:
    """The run folders the patterns name, in path order, each once.

    A pattern is a run folder, a ``results.json`` path or a glob of either (``audits/*``,
    ``audits/2025-*/results.json``); ``gs://…``-style patterns are matched with Beam's
    filesystems as ``<pattern>/results.json`` (object stores have no folders, so a folder without
    ``results.json`` cannot be told there). ``exclude`` (the trend's own output folder) is skipped
    when a pattern matches it, and so are the ``trend.html`` / ``trend.json`` files in it — unless it
    is a run (``write_trend`` then refuses to write into it).

    Raises:
        TrendUsageError: no pattern, a pattern that matches nothing, or a match that is not a run
            (a folder without ``results.json``, a windowed run, another file).
    """
    from fair_forge_beam.reports.output_folder import is_stage_path, unpublished_run_problem

    if not patterns:
        raise TrendUsageError("name the runs: one or more run folders or patterns, e.g. 'audits/*'")
    skip = _key(exclude) if exclude else None
    found: dict[str, str] = {}
    for pattern in patterns:
        matches = _match(pattern)
        if not matches:
            raise TrendUsageError(f"no run matched {quoted(pattern)}")
        stages = [m for m in matches if is_stage_path(m) or is_stage_path(os.path.dirname(m.rstrip("/")))]
        if len(stages) == len(matches):  # named on purpose: say what it is
            raise TrendUsageError(f"{stages[0]} is the stage of a run being written or killed (the atomic writer's "
                                  "folder, removed by the next run into the same output), not a run")
        for m in matches:
            if m in stages:
                continue  # a glob's match of a run still being written, or of a killed run's stage: not a run
            if skip and ((_key(m) == skip and not _exists(f"{m.rstrip('/')}/results.json"))  # a run stays: an error below
                         or (_key(os.path.dirname(m.rstrip("/"))) == skip
                                              and os.path.basename(m) in ("trend.html", "trend.json"))):
                continue
            run = _run_folder(m)
            bad_name = path_name_problem(run, pattern)
            if bad_name:  # a name that is not UTF-8 text (issue 28 B7): one line, never a traceback
                raise TrendUsageError(bad_name)
            unfinished = unpublished_run_problem(run, "give it to the trend")  # the roll-up's rule (trial39 T13)
            if unfinished:
                raise TrendUsageError(unfinished)
            found.setdefault(_key(run), run)
    if not found:
        raise TrendUsageError(f"no run matched {' '.join(repr(p) for p in patterns)} (only the trend's own output folder)")
    return sorted(found.values(), key=_key)


def _match(pattern: str) -> list[str]:
    """Local: files and folders (Beam's local match lists files only); other filesystems: ``results.json`` files."""
    if not _is_remote(pattern):
        return sorted(glob.glob(pattern)) if glob.has_magic(pattern) else ([pattern] if os.path.exists(pattern) else [])
    from fair_forge_beam.reports.load import _match as match_files

    pattern = pattern.rstrip("/")
    return match_files(pattern if pattern.endswith("results.json") else f"{pattern}/results.json")


def _run_folder(match: str) -> str:
    """The run folder of a match, or a :class:`TrendUsageError` naming what it is instead."""
    m = match.rstrip("/") or "/"
    if os.path.basename(m) == "results.json":
        return os.path.dirname(m) or "."
    if not _is_remote(m) and not os.path.isdir(m):
        raise TrendUsageError(f"{m} is not a run folder (a file): give run folders or their results.json")
    if _exists(f"{m}/results.json"):
        return m
    from fair_forge_beam.reports.load import windowed_run

    windowed = windowed_run(m)
    if windowed:
        raise TrendUsageError(f"{windowed}; narrow the pattern")
    from fair_forge_beam.io.edge import broken_link

    broken = broken_link(f"{m}/results.json")
    if broken:
        raise TrendUsageError(f"{m} has no readable results.json: {broken}")
    raise TrendUsageError(f"{m} has no results.json (not a run folder): narrow the pattern")


# ----------------------------------------------------------------------------- loading runs
def _parse_time(value: Any) -> Optional[datetime]:
    if not isinstance(value, str) or not value:
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iter_runs(paths: Sequence[str], progress: Optional[Callable[[str], None]] = None) -> Iterator[dict]:
    """``{"path", "results", "run_info"}`` of each run folder (``results.json`` and ``run_info.json``
    contents; ``{}`` for a missing ``run_info.json``), in the given order, one at a time: handed to
    :func:`build_trend`, one run's ``results.json`` is held at a time.

    ``progress(line)`` is called at most every 5 s while reading (and not at all for quick reads).

    Raises:
        TrendUsageError: a ``results.json`` that cannot be read or is not a results document.
    """
    from fair_forge_beam.reports.load import read_results, read_run_info

    last = time.monotonic()
    for i, p in enumerate(paths):
        try:
            doc = read_results(p)
            info = read_run_info(p)
            run_id, audit_runs = _stored_ids(p)
        except (OSError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
            raise TrendUsageError(f"{p}: {plain_reason(exc)}") from None
        yield {"path": p, "results": doc, "run_info": info if isinstance(info, dict) else {},
               "audit_runs": audit_runs, "run_id": run_id}
        if progress and time.monotonic() - last >= 5:
            last = time.monotonic()
            progress(f"read {i + 1} of {len(paths)} runs")


def _stored_ids(path: str) -> tuple:
    """``(run id, audit run ids)`` of a run from its ``stats/manifest.json``: its own ``run_id`` and the
    ids of the audit runs its statistics are made of (``audit_runs``: an audit's own id, a roll-up's the
    union of its inputs', at every level), checked against the run's sealed ``stats/run_ids.json`` when it
    wrote one (``ValueError``, one line, for an edited manifest); ``None`` for either when the run has no
    stored statistics or a manifest the trend cannot read (the trend reads no statistics; :func:`_comparable_earlier` then
    falls back on the merged runs' paths, :func:`_distinct_runs` on the files' contents)."""
    from fair_forge_beam.io.edge import read_side_json
    from fair_forge_beam.io.session_stats import RUN_IDS, check_listed_file, check_run_ids

    folder = folder_path(path)
    folder = folder[:-len("/results.json")] if folder.endswith("/results.json") else folder
    manifest = f"{folder}/stats/manifest.json"
    if not _exists(manifest):
        return None, None
    try:
        m = read_side_json(manifest, "a run's stats/manifest.json")
        ids, run_id = m.get("audit_runs"), m.get("run_id")
    except (OSError, ValueError, AttributeError):
        return None, None
    # the ids decide which runs are one (issue 28, seal28): those its run sealed, never an edit's
    check_listed_file(folder, RUN_IDS, m)
    check_run_ids(folder, m)
    return (run_id if isinstance(run_id, str) and run_id else None,
            [str(i) for i in ids] if isinstance(ids, list) else None)


# ----------------------------------------------------------------------------- the trend
def _est4(e: Optional[dict]) -> Optional[dict]:
    return None if not isinstance(e, dict) else {k: e.get(k) for k in ("mean", "ci_low", "ci_high", "n")}


def _slice_wanted(key: str, dims: Sequence[str]) -> bool:
    return key in dims if "=" not in key else key.partition("=")[0] in dims


def _run_entry(run: dict, dims: Sequence[str]) -> dict:
    """The reduced run: what the trend needs of one run, its big ``results.json`` left behind."""
    from fair_forge_beam.reports.estimates import is_undefined

    doc, info = run["results"], run["run_info"]
    cfg = doc.get("config") or {}
    summ = doc.get("summary") or {}
    read = summ.get("interactions_read")
    coverage = {}
    for name in doc["metrics"]:
        ms = (summ.get("metrics") or {}).get(name) or {}
        scored = ms.get("interactions_scored", ms.get("scored"))
        not_scored = ms.get("interactions_not_scored")
        if not_scored is None and isinstance(read, int) and isinstance(scored, int):
            not_scored = max(read - scored, 0)
        share = not_scored / read if isinstance(not_scored, int) and isinstance(read, int) and read > 0 else None
        coverage[name] = {"interactions_scored": scored, "interactions_not_scored": not_scored,
                          "dead_letters": ms.get("dead_letters", ms.get("not_scored")),
                          "dead_letter_unit": ms.get("dead_letter_unit"), "dead_letter_share": share}
    slices: dict[str, dict] = {}
    heads: dict[str, list] = {}
    for name, m in doc["metrics"].items():
        heads[name] = headline_estimates(name, m)
        recs = {}
        for rec in m.get("slices") or []:
            key = rec.get("slice")
            if not isinstance(key, str) or not _slice_wanted(key, dims):
                continue
            counts = counts_for(name, rec)
            ests = {}
            for path, _, _ in heads[name]:
                e = dotted_get(rec, path)
                if isinstance(e, dict):
                    ests[path] = {"estimate": _est4(e), "defined": not is_undefined(name, path, e),
                                  "counts": counts.get(path)}
            recs[key] = {"n_interactions": rec.get("n_interactions"), "n_sessions": rec.get("n_sessions"),
                         "estimates": ests}
        slices[name] = recs
    started, finished = _parse_time(info.get("started_at")), _parse_time(info.get("finished_at"))
    return {
        "path": run["path"],
        "name": os.path.basename(run["path"].rstrip("/")) or run["path"],
        "time": started or finished,
        "time_source": "started_at" if started else "finished_at" if finished else None,
        "config": cfg,
        "light": {"config": cfg, "summary": {"interactions_read": read},  # what run_differences reads
                  "metrics": {n: {"lexicon": m.get("lexicon")} for n, m in doc["metrics"].items()}},
        "info": info,
        "audit_runs": run.get("audit_runs"),
        "coverage": {"interactions_read": read, "rejected_at_read": summ.get("rejected_at_read"), "metrics": coverage},
        "slices": slices,
        "heads": heads,
    }


def _merged_runs(entry: dict) -> Optional[list]:
    """The runs a roll-up merged (``run_info.json``'s ``rollup.runs``, as ``fair-forge-beam rollup``
    writes it), or ``None`` for an audit."""
    rollup = entry["info"].get("rollup")
    runs = rollup.get("runs") if isinstance(rollup, dict) else None
    return [str(r) for r in runs] if isinstance(runs, list) else None


_DAY = re.compile(r"(?<!\d)(\d{4}-\d{2}-\d{2})(?!\d)")


def covered_day(path: str) -> Optional[str]:
    """The day a run covers as its user named it: a ``YYYY-MM-DD`` calendar day in the run folder's
    name (``audits/2026-12-01``, ``week-2026-12-07``; the last one when there are several), else
    ``None`` — also for a text of that form that is no day (``2026-13-45``, trial34 T6)."""
    days = [d for d in _DAY.findall(os.path.basename(path.rstrip("/"))) if _is_day(d)]
    return days[-1] if days else None


def _is_day(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


#: how far the day a run's folder names may lie after the day it ran (UTC) and still be the day it
#: covers: a night audited just after midnight in a time zone ahead of UTC names the day it ran
DAY_AHEAD = timedelta(days=1)


def _named_day_problem(e: dict) -> Optional[str]:
    """Why the ``YYYY-MM-DD`` in run ``e``'s folder name is not the day it covers, or ``None``: no
    calendar day (``2026-13-45``), or, for an audit, a day more than :data:`DAY_AHEAD` after the run's
    recorded time (a run cannot cover a day that had not come: ``2062-12-03`` made in 2026). Such a run
    is ordered by its time, as a run without a day (trial34 T6: it became "the latest run" without a
    word); ``e["covers"]`` is set to ``None`` then."""
    named = _DAY.findall(os.path.basename(e["path"].rstrip("/")))
    if named and e["covers"] is None:
        return f"{named[-1]} is no calendar day"
    if e["covers"] is not None and e["time"] is not None and e["merged"] is None \
            and date.fromisoformat(e["covers"]) > (e["time"] + DAY_AHEAD).date():
        day, e["covers"] = e["covers"], None
        return f"{day} is after the run was made, {e['time'].date().isoformat()}"
    return None


def _order(entries: list[dict]) -> list[dict]:
    """Runs in the order of the data they cover, never of when they ran (the module docstring's
    "Order of runs"); sets each entry's ``covers`` and ``merged``."""
    known = {_key(e["path"]): e for e in entries}
    for e in entries:
        e["merged"] = _merged_runs(e)
        e["covers"] = covered_day(e["path"])
        e["day_problem"] = _named_day_problem(e)
    changed = True
    while changed:  # a roll-up without a day or a time of its own: the latest of its merged runs', at every
        changed = False  # level (a month of weeks takes the weeks' days once they have theirs)
        for e in entries:
            if not e["merged"]:
                continue
            if e["covers"] is None:
                days = [d for d in (covered_day(i) or (known[_key(i)]["covers"] if _key(i) in known else None)
                                    for i in e["merged"]) if d]
                if days:
                    e["covers"], changed = max(days), True
            if e["time"] is None:
                times = [known[_key(i)]["time"] for i in e["merged"] if _key(i) in known and known[_key(i)]["time"]]
                if times:
                    e["time"], e["time_source"], changed = max(times), "merged runs", True
    return sorted(entries, key=lambda e: (e["covers"] is not None, e["covers"] or "",
                                          e["covers"] is not None and e["merged"] is not None, e["time"] is not None,
                                          e["time"] or datetime.min.replace(tzinfo=timezone.utc), _key(e["path"])))


def _run_labels(entries: list[dict]) -> list[str]:
    """A short, unique label per run: a run that covers a named day, its folder name (the day is in
    it); another run, its UTC time to the minute (to the second when that tells runs apart), the folder
    name for a run without a time; where labels still collide, the time to the minute and the folder
    name, and where that collides too, the path."""
    def by(fmt):
        return [e["name"] if e.get("covers") or not e["time"] else e["time"].strftime(fmt) for e in entries]

    for labels in (by("%Y-%m-%d %H:%M"), by("%Y-%m-%d %H:%M:%S")):
        if len(set(labels)) == len(labels):
            return labels
    labels = by("%Y-%m-%d %H:%M")
    seen = Counter(labels)
    labels = [f"{lbl} {e['name']}" if seen[lbl] > 1 and e["time"] and not e.get("covers") else lbl
              for lbl, e in zip(labels, entries)]
    seen = Counter(labels)
    return [e["path"] if seen[lbl] > 1 else lbl for lbl, e in zip(labels, entries)]


def _change_order(c: dict) -> tuple:
    d = (c.get("difference") or {}).get("mean")
    return (CHANGED.index(c["verdict"]), -(abs(d) / c["range"] if d is not None else 0.0), c["metric"],
            c["estimate"], c["slice"] != "overall", c["slice"])


def _distinct_runs(runs: Iterable[dict], copies: list) -> Iterator[dict]:
    """``runs`` without the copies of a run already given: a folder whose ``results.json`` and
    ``run_info.json`` contents equal an earlier one's, start time (``started_at``, to the
    millisecond) included, is a copied run folder and is left out (runs that record no start time
    are never taken for copies), and ``(its path, the first one's path)`` appended to ``copies``; two
    folders of one run id (``stats/manifest.json``'s ``run_id``) whose documents differ are a
    :class:`TrendUsageError` (an edited copy: one run is never counted as two). One
    SHA-256 of the two documents per run (streamed: the document is not serialised whole)."""
    import hashlib

    seen: dict = {}
    ids: dict = {}  # run id -> the first path that holds it
    enc = json.JSONEncoder(sort_keys=True, default=str, allow_nan=True)
    for r in runs:
        h = hashlib.sha256()
        for chunk in enc.iterencode([r.get("results"), r.get("run_info")]):
            h.update(chunk.encode("utf-8", "surrogatepass"))
        first = seen.setdefault(h.digest(), r.get("path"))
        info = r.get("run_info")
        if first != r.get("path") and isinstance(info, dict) and info.get("started_at"):
            copies.append((str(r.get("path")), str(first)))
            continue
        run_id = r.get("run_id")
        if run_id and ids.setdefault(run_id, r.get("path")) != r.get("path"):
            # one run (one id) in two folders whose files differ: one of them was edited, and which one
            # holds the run's numbers cannot be told; never counted as two runs (issue 28, B8)
            raise TrendUsageError(f"{ids[run_id]} and {r.get('path')} hold the same run (run id {run_id}) with "
                                  "different results.json or run_info.json: one of them was edited; "
                                  "give only the one to follow")
        yield r


def build_trend(runs: Iterable[dict], slices: Sequence[str] = DEFAULT_SLICES, draws: int = DRAWS,
                progress: Optional[Callable[[str], None]] = None) -> dict:
    """The trend over ``runs`` (``{"path", "results", "run_info"}`` each, as :func:`iter_runs` gives;
    any order; read once): the content of ``trend.json``.

    Args:
        runs: at least one run; ``results`` is a ``results.json`` document.
        slices: slice dimensions followed (``overall``, ``assistant_id``, ``language``, a metadata field).
        draws: Monte-Carlo draws per Beta posterior of a difference; at least 100.
        progress: called with a line now and then on long work.

    Returns:
        ``{"trend_schema_version", "slices", "runs": [...], "notes": [...], "series": [...],
        "changes": [...], "latest": {...}}`` (field by field in docs/report.md). Runs are in the
        order of the days they cover (module docstring); ``series`` by metric (first run's order), headline estimate and
        slice (``overall`` first, then by key); ``changes`` are the claimed changes, newest first.

    Raises:
        ValueError: no run, ``draws`` < 100 or no slice dimension; :class:`TrendUsageError` a slice
            dimension other than ``overall``/``assistant_id``/``language`` that no run has.
    """
    from fair_forge_beam.reports.compare import METHOD_NOTES, comparability
    from fair_forge_beam.reports.scorecard import estimate_label, slice_label

    if draws < 100:
        raise ValueError(f"draws must be at least 100, got {draws}")
    dims = [s for s in slices if s]
    if not dims:
        raise ValueError("name at least one slice dimension (e.g. overall,assistant_id)")
    copies: list[tuple[str, str]] = []
    entries = _order([_run_entry(r, dims) for r in _distinct_runs(runs, copies)])  # each run reduced as it is read
    if not entries:
        raise ValueError("no run to follow")
    n = len(entries)

    # --- runs and what differs between each and the run it is compared with
    run_rows, notes = [], []
    if copies:
        notes.append(f"{len(copies)} run folder{'s' if len(copies) != 1 else ''} listed once: the same results.json "
                     "and run_info.json as another run (a copy): "
                     + ", ".join(f"{c} (copy of {o})" for c, o in copies[:5])
                     + (f" and {len(copies) - 5} more" if len(copies) > 5 else ""))
    labels = _run_labels(entries)
    earlier = _comparable_earlier(entries)  # never a run that shares data with it (a roll-up and one of its nights)
    unlike: dict[tuple, list] = {}

    def caveats(i: int, j: int) -> list:  # what makes run j unlike the later run i: comparability's settings
        if (i, j) not in unlike:
            a, b = entries[i], entries[j]
            unlike[(i, j)] = [d["message"] for d in comparability(a["light"], b["light"], a["info"] or None,
                                                                   b["info"] or None)["differences"]]
        return unlike[(i, j)]

    for i, e in enumerate(entries):
        diffs = caveats(i, earlier[i][0]) if earlier[i] else []
        run_rows.append({
            "index": i, "path": e["path"], "name": e["name"], "label": labels[i],
            "covers": e["covers"], "time": _iso(e["time"]) if e["time"] else None, "time_source": e["time_source"],
            "kind": "rollup" if e["merged"] is not None else "audit",
            **({"merged_runs": e["merged"]} if e["merged"] is not None else {}),
            "mode": e["config"].get("mode"), "ci_level": e["config"].get("ci_level"),
            "metrics": list(e["slices"]), "coverage": e["coverage"],
            "previous": earlier[i][0] if earlier[i] else None, "differs_from_previous": diffs,
        })
    undated = [f"{e['name']} ({e['day_problem']})" for e in entries if e["day_problem"]]
    if undated:
        notes.append(f"{len(undated)} run{'s' if len(undated) != 1 else ''} named with a day that is not the day "
                     f"{'they cover' if len(undated) != 1 else 'it covers'}, ordered by time as runs without a day: "
                     + ", ".join(undated[:5]) + (f" and {len(undated) - 5} more" if len(undated) > 5 else ""))
    untimed = [e["name"] for e in entries if e["time"] is None]
    if untimed:
        notes.append(f"{len(untimed)} run{'s' if len(untimed) != 1 else ''} without a recorded time (no started_at/"
                     f"finished_at in run_info.json) placed first, in path order: {', '.join(untimed[:5])}"
                     + (f" and {len(untimed) - 5} more" if len(untimed) > 5 else ""))
    metric_names: list[str] = []
    for e in entries:
        metric_names += [m for m in e["slices"] if m not in metric_names]
    for m in metric_names:
        missing = [e["name"] for e in entries if m not in e["slices"]]
        if missing:
            notes.append(f"runs differ in metrics: {m} is in {n - len(missing)} of {n} runs (not in "
                         f"{', '.join(missing[:5])}{f' and {len(missing) - 5} more' if len(missing) > 5 else ''})")
    for dim in dims:
        if not any(_slice_wanted(k, [dim]) for e in entries for m in e["slices"].values() for k in m):
            if dim not in ("overall", "assistant_id", "language"):  # a name no audit sliced by: a typo
                raise TrendUsageError(f"--slices {quoted(dim)}: no run has a slice of it (slices are overall, assistant_id, "
                                      "language or a metadata field the audits were given in --slices)")
            notes.append(f"no run has a slice of {quoted(dim)} (slices are overall, assistant_id, language or a metadata "
                         "field the audit was given in --slices)")
    modes = sorted({str(e["config"].get("mode")) for e in entries})
    if len(modes) > 1:
        notes.append(f"runs differ in statistical mode ({', '.join(modes)}): a pair is compared with the later run's "
                     "methods")

    # --- series and the change of each point from the previous one
    series, changes = [], []
    for metric in metric_names:
        heads: list[tuple[str, int, float]] = []
        for e in reversed(entries):  # the latest run's headline order first
            heads += [h for h in e["heads"].get(metric, []) if h[0] not in [x[0] for x in heads]]
        keys = sorted({k for e in entries for k in e["slices"].get(metric, {})}, key=lambda k: (k != "overall", k))
        for path, sign, rng in heads:
            for key in keys:
                points, defined = [], set()
                for i, e in enumerate(entries):
                    rec = e["slices"].get(metric, {}).get(key)
                    est = rec and rec["estimates"].get(path)
                    if not est:
                        continue
                    point = {"run": i, **est["estimate"], "defined": est["defined"],
                             "n_sessions": rec["n_sessions"], "n_interactions": rec["n_interactions"]}
                    prev_i = next((j for j in earlier[i] if j in defined), None)
                    if est["defined"] and prev_i is not None:
                        pest = entries[prev_i]["slices"][metric][key]["estimates"][path]
                        vs = point["vs_previous"] = _vs_previous(metric, key, path, entries, i, prev_i, draws)
                        if vs["verdict"] in CHANGED:
                            # a change across other settings (a scorer switch) may be theirs (trial34 T7)
                            changes.append({"metric": metric, "estimate": path, "slice": key, "from_run": prev_i,
                                            "to_run": i, "verdict": vs["verdict"], "previous": pest["estimate"],
                                            "current": est["estimate"], "difference": vs["difference"],
                                            "method": vs["method"], "range": rng,
                                            "runs_differ_in": caveats(i, prev_i)})
                    points.append(point)
                    if est["defined"]:
                        defined.add(i)
                if points:
                    series.append({"metric": metric, "estimate": path, "slice": key,
                                   "estimate_label": estimate_label(metric, path), "slice_label": slice_label(key),
                                   "direction": sign, "range": rng, "points": points})
        if progress:
            progress(f"{metric}: {_compared_text([s for s in series if s['metric'] == metric])}")
    changes.sort(key=lambda c: (-c["to_run"], *_change_order(c)))
    across = sorted({(c["from_run"], c["to_run"]) for c in changes if c["runs_differ_in"]})
    if across:  # said with the notes, as a mode difference is
        n_across = sum(1 for c in changes if c["runs_differ_in"])
        notes.append(f"{n_across} claimed change{'s' if n_across != 1 else ''} compare{'s' if n_across == 1 else ''} "
                     "runs made with other settings (each marked, runs_differ_in): "
                     + "; ".join(f"{labels[j]} -> {labels[i]}: {', '.join(caveats(i, j))}" for j, i in across[:5])
                     + (f" and {len(across) - 5} more pairs" if len(across) > 5 else ""))
    methods = sorted({p["vs_previous"]["method"] for s in series for p in s["points"]
                      if p.get("vs_previous", {}).get("method")})
    return {
        "trend_schema_version": TREND_SCHEMA_VERSION,
        "slices": dims,
        "draws": draws,
        "runs": run_rows,
        "notes": notes,
        "methods": {k: METHOD_NOTES[k] for k in methods},
        "series": series,
        "changes": changes,
        "latest": _latest(entries, series, changes, earlier),
    }


def _comparable_earlier(entries: list[dict]) -> list[list[int]]:
    """Per run (in trend order), the earlier runs it may be compared with, latest first: runs of
    its own kind (an audit with audits, a roll-up with roll-ups: a week is compared with the week
    before, never with one of its nights) that share no data with it — neither is the other nor
    holds it, they merged no run in common (``run_info.json``'s ``rollup.runs``) and their
    statistics hold no audit run in common (``stats/manifest.json``'s ``audit_runs``: a month of
    weeks and a roll-up of one of those weeks' nights share data two levels down)."""
    def held(e):  # its own path, the runs it merged and, at every level, the audit runs its statistics hold
        return {_key(e["path"]), *(_key(r) for r in e["merged"] or ()),
                *(f"audit run {i}" for i in e.get("audit_runs") or ())}

    runs = [(e["merged"] is not None, held(e)) for e in entries]
    return [[j for j in range(i - 1, -1, -1) if runs[j][0] == runs[i][0] and not runs[j][1] & runs[i][1]]
            for i in range(len(entries))]


def _vs_previous(metric: str, key: str, path: str, entries: list[dict], i: int, j: int, draws: int) -> dict:
    """The change of ``(metric, slice key, estimate path)`` from run ``j`` to the later run ``i``:
    "too small to compare" (:func:`~fair_forge_beam.statistical.slices.too_small_to_compare`), else
    ``--compare``'s difference with run ``i`` as current (its seed and level)."""
    from fair_forge_beam.reports.compare import _compare_estimate  # one implementation of the methods
    from fair_forge_beam.statistical.slices import TOO_SMALL_TO_COMPARE, too_small_to_compare

    cur, base = entries[i], entries[j]
    rec, prec = cur["slices"][metric][key], base["slices"][metric][key]
    est, pest = rec["estimates"][path], prec["estimates"][path]
    why = too_small_to_compare([est["estimate"], pest["estimate"]], [rec["n_sessions"], prec["n_sessions"]],
                               ("this run", "the previous run"))
    if why:
        return {"run": j, "verdict": TOO_SMALL_TO_COMPARE, "reason": why, "difference": None, "method": None}
    cfg_c, cfg_p = cur["config"], base["config"]
    from fair_forge_beam.reports.load import run_config

    level, seed = run_config(cfg_c).ci_level, run_config(cfg_c).seed
    row = _compare_estimate(metric, key, path, est["estimate"], pest["estimate"],
                            {path: est["counts"]} if est["counts"] else {},
                            {path: pest["counts"]} if pest["counts"] else {}, cfg_c, cfg_p, seed, draws, level)
    out = {"run": j, "verdict": row["verdict"], "difference": row["difference"], "method": row["method"]}
    if "p_current_higher" in row:
        out["p_current_higher"] = row["p_current_higher"]
    return out


def _latest(entries: list[dict], series: list[dict], changes: list[dict], earlier: list[list[int]]) -> dict:
    """The first screen: what changed in the latest run against the run it is compared with
    (:func:`_comparable_earlier`), else the most recent change; coverage and slices that appeared
    or went in the latest run."""
    from fair_forge_beam.statistical.slices import TOO_SMALL_TO_COMPARE

    n = len(entries)
    last = n - 1
    previous = earlier[last][0] if earlier[last] else None
    out: dict[str, Any] = {"run": last, "previous": previous}
    vs = [(s["slice"], p["vs_previous"]) for s in series for p in s["points"] if p["run"] == last and "vs_previous" in p]
    out["compared"] = len(vs)
    out["too_small"] = sum(1 for _, v in vs if v["verdict"] == TOO_SMALL_TO_COMPARE)
    out["too_small_slices"] = sorted({k for k, v in vs if v["verdict"] == TOO_SMALL_TO_COMPARE},
                                     key=lambda k: (k != "overall", k))
    out["changes"] = sorted((c for c in changes if c["to_run"] == last), key=_change_order)
    recent = max((c["to_run"] for c in changes), default=None)
    out["most_recent_change_run"] = recent
    out["most_recent_changes"] = ([] if recent in (None, last)
                                  else sorted((c for c in changes if c["to_run"] == recent), key=_change_order))
    if previous is not None:
        now, before = entries[last], entries[previous]
        cov = []
        for m, c in now["coverage"]["metrics"].items():
            p = before["coverage"]["metrics"].get(m) or {}
            cov.append({"metric": m, "dead_letter_share": c["dead_letter_share"],
                        "previous_dead_letter_share": p.get("dead_letter_share"),
                        "interactions_scored": c["interactions_scored"],
                        "previous_interactions_scored": p.get("interactions_scored")})
        out["coverage"] = cov
        keys_now = {k for m in now["slices"].values() for k in m}
        keys_before = {k for m in before["slices"].values() for k in m}
        out["new_slices"] = sorted(keys_now - keys_before)
        out["gone_slices"] = sorted(keys_before - keys_now)
    else:
        out.update(coverage=[], new_slices=[], gone_slices=[])
    return out


def trend_json(trend: dict) -> str:
    """``trend.json``'s text: 2-space indented, keys in the built order, no NaN (deterministic)."""
    return json.dumps(trend, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


# ----------------------------------------------------------------------------- trend.html
def _pct(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def _diff_text(d: Optional[dict]) -> str:
    if not d or d.get("mean") is None:
        return "n/a"
    if d.get("ci_low") is None or d.get("ci_high") is None:
        return fixed(d['mean'], 4, sign=True)
    return f"{fixed(d['mean'], 4, sign=True)} [{fixed(d['ci_low'], 4, sign=True)}, {fixed(d['ci_high'], 4, sign=True)}]"


def _shown(run: dict) -> str:
    """A run as the page names it: its label, ``(roll-up)`` added for a roll-up."""
    return run["label"] + (" (roll-up)" if run["kind"] == "rollup" else "")


def _change_view(c: dict, runs: list[dict]) -> dict:
    from fair_forge_beam.reports.scorecard import estimate_label, slice_label

    return {**c, "slice_text": slice_label(c["slice"]), "estimate_text": estimate_label(c["metric"], c["estimate"]),
            "previous_text": format_estimate(c["previous"]), "current_text": format_estimate(c["current"]),
            "difference_text": _diff_text(c["difference"]), "from_label": _shown(runs[c["from_run"]]),
            "to_label": _shown(runs[c["to_run"]])}


def _figures(trend: dict, with_plots: bool) -> list[dict]:
    runs = trend["runs"]
    labels = [_shown(r) for r in runs]
    last_change: dict[tuple, int] = {}
    for c in trend["changes"]:
        k = (c["metric"], c["estimate"], c["slice"])
        last_change[k] = max(last_change.get(k, -1), c["to_run"])
    groups: dict[tuple, list] = {}
    for s in trend["series"]:
        groups.setdefault((s["metric"], s["estimate"]), []).append(s)
    out = []
    for (metric, path), ss in groups.items():
        def rank(s):
            latest = s["points"][-1]
            return (s["slice"] != "overall", -last_change.get((metric, path, s["slice"]), -1),
                    -(latest.get("n_interactions") or 0), s["slice"])
        chosen = sorted(ss, key=rank)[:TREND_PANELS]  # drawn in this order
        left = [s["slice_label"] for s in ss if s not in chosen]
        view = {"metric": metric, "estimate": path, "label": ss[0]["estimate_label"], "svg": None,
                "left_out": left, "rows": [], "columns": labels[-MAX_VALUE_COLUMNS:],
                "columns_left": max(0, len(runs) - MAX_VALUE_COLUMNS), "direction": ss[0]["direction"]}
        first_col = max(0, len(runs) - MAX_VALUE_COLUMNS)
        for s in ss:
            by_run = {p["run"]: p for p in s["points"]}
            cells = []
            for i in range(first_col, len(runs)):
                p = by_run.get(i)
                vs = (p or {}).get("vs_previous") or {}
                cells.append({"text": "—" if p is None else ("n/a" if not p["defined"] else format_estimate(p)),
                              "verdict": vs.get("verdict"), "why": vs.get("reason") or vs.get("verdict") or ""})
            view["rows"].append({"slice": s["slice_label"], "key": s["slice"], "cells": cells})
        if with_plots:
            panels = []
            for s in chosen:
                ests = [None] * len(runs)
                marks = {}
                for p in s["points"]:
                    if p["defined"]:
                        ests[p["run"]] = p
                    v = (p.get("vs_previous") or {}).get("verdict")
                    if v in CHANGED:
                        marks[p["run"]] = v
                panels.append((s["slice_label"], ests, marks))
            from fair_forge_beam.reports.plots import figure_svg, trend_figure

            fig = trend_figure(labels, panels, ylabel=view["label"])

            view["svg"] = figure_svg(fig, f"trend-{metric}-{len(out)}")
        out.append(view)
    return out


def render_trend(trend: dict, with_plots: bool = True, title: str = "fair_forge_beam trend report") -> str:
    """``trend.html`` as a string from :func:`build_trend`'s result (autoescaped jinja2 template
    ``fair_forge_beam/templates/trend.html.j2``; plots as inline SVG unless ``with_plots`` is off)."""
    from fair_forge_beam.reports.scorecard import slice_label
    from fair_forge_beam.reports.tool_reports import _env

    runs = trend["runs"]
    latest = trend["latest"]
    metrics = []
    for r in runs:
        metrics += [m for m in r["metrics"] if m not in metrics]
    return _env().get_template("trend.html.j2").render(
        title=title,
        trend=trend,
        runs=runs,
        shown=[_shown(r) for r in runs],
        metrics=metrics,
        latest=latest,
        latest_changes=[_change_view(c, runs) for c in latest["changes"]],
        tally=[{"verdict": v, "count": k} for v in CHANGED
               if (k := sum(1 for c in latest["changes"] if c["verdict"] == v))],
        recent_changes=[_change_view(c, runs) for c in latest["most_recent_changes"]],
        changes=[_change_view(c, runs) for c in trend["changes"][:MAX_CHANGE_ROWS]],
        changes_left=max(0, len(trend["changes"]) - MAX_CHANGE_ROWS),
        new_slices=[slice_label(k) for k in latest.get("new_slices", [])],
        gone_slices=[slice_label(k) for k in latest.get("gone_slices", [])],
        too_small_slices=[slice_label(k) for k in latest.get("too_small_slices", [])],
        figures=_figures(trend, with_plots),
        pct=_pct,
    )


def _compared_text(series: list[dict]) -> str:
    """How many of one metric's ``series`` were compared run to run (a point with ``vs_previous``),
    in words: a series of one point is never "compared" (trial30 T5: "24 series compared run to run"
    of a metric in one run of two)."""
    n, done = len(series), sum(1 for s in series if any("vs_previous" in p for p in s["points"]))
    if done == n:
        return f"{n} series compared run to run"
    if done:
        return f"{n} series, {done} compared run to run (the others have no earlier run to compare with)"
    if all(len(s["points"]) == 1 for s in series):
        return f"{n} series, each in 1 run: nothing to compare"
    return f"{n} series, none compared run to run (no earlier run of its kind has a value to compare with)"


def empty_trend_reason(trend: dict) -> Optional[str]:
    """Why the trend ``trend`` (:func:`build_trend`) has nothing to follow, or ``None``: no headline
    estimate has a value in any run of any followed slice (every run scored nothing: no figure, no
    change) — "no run has a value of a headline estimate to follow (2 runs read; humanity scored
    nothing in any of them)"; or two runs or more that share no metric, ``compare``'s rule and words
    (:func:`~fair_forge_beam.reports.compare.nothing_compared`: "nothing compared (the runs share no
    metric: base humanity, toxicity; ctx1 context)"; trial30 T5: it exited 0, every series one
    point). A trend of one run follows it and compares nothing, as the first night of a schedule
    does, and a run with values beside one that scored nothing has a point to follow: not empty."""
    runs = trend.get("runs") or ()
    if any(p.get("defined", True) for s in trend.get("series") or () for p in s.get("points") or ()):
        named = [(r["name"], r.get("metrics") or []) for r in runs]
        if len(runs) < 2 or len({m for _, ms in named for m in ms}) < sum(len(set(ms)) for _, ms in named):
            return None  # one run, or a metric in two runs
        from fair_forge_beam.reports.compare import nothing_compared

        return nothing_compared(named, {})
    n = len(runs)
    metrics = list(dict.fromkeys(m for r in trend.get("runs") or () for m in r.get("metrics") or ()))
    if not metrics:
        metrics = list(dict.fromkeys(s["metric"] for s in trend.get("series") or ()))
    idle = (", ".join(metrics) + " scored nothing in any of them") if metrics else "they hold no metric"
    return (f"no run has a value of a headline estimate to follow in the slices followed ({n} run{'s' if n != 1 else ''} "
            f"read; {idle})")


def write_trend(patterns: Sequence[str], output: str = DEFAULT_OUTPUT, slices: Sequence[str] = DEFAULT_SLICES,
                with_plots: bool = True, log: Optional[Callable[[str], None]] = None,
                prog: str = "fair-forge-beam trend", option: str = "--output") -> tuple[str, str]:
    """Find the runs, build the trend and write ``<output>/trend.json`` and ``<output>/trend.html``;
    returns their paths. ``output`` is created when missing (any Beam filesystem).

    Raises:
        EmptyRun: (``SystemExit(4)``, :mod:`~fair_forge_beam.reports.empty_run`) when the trend has
            nothing to follow (:func:`empty_trend_reason`): one line on stderr naming ``prog``,
            nothing written, ``output`` left as it was.
        TrendUsageError: as :func:`find_runs` / :func:`iter_runs`; an ``output`` that is a file, cannot
            be written, or lies inside a run it reads
            (:func:`~fair_forge_beam.reports.output_folder.check_output_folder`; its line names it as
            ``option``: :func:`~fair_forge_beam.reports.output_folder.output_option`).
    """
    from fair_forge_beam._beam import beam  # noqa: F401

    from fair_forge_beam.io.secrets import name_texts, scrub_known, scrub_known_text

    say = log or (lambda line: None)
    t0 = time.monotonic()
    from fair_forge_beam.reports.output_folder import check_no_other_run, check_output_folder

    try:  # a folder holding another command's run (an audit's): trend.html beside its report.html (trial38 T7)
        check_no_other_run(output, "trend", option)
    except ValueError as exc:
        try:  # unless it is (or lies inside) a run it reads: that refusal is the more telling one
            check_output_folder(output, reads=find_runs(patterns, exclude=output), staged=False, may_hold_reads=True,
                                option=option)
        except TrendUsageError:  # no run matched: the folder's own refusal stands
            pass
        except ValueError as reads:
            raise TrendUsageError(plain_reason(reads)) from None
        raise TrendUsageError(plain_reason(exc)) from None
    paths = find_runs(patterns, exclude=output)
    try:  # before any run is read: a file, an unwritable folder, or a folder inside a run read here
        output = check_output_folder(output, reads=paths, staged=False, may_hold_reads=True, option=option)
    except ValueError as exc:
        raise TrendUsageError(plain_reason(exc)) from None
    # said once the runs are read: a run that cannot be read is a usage error of one line, no progress line before it
    trend = build_trend(iter_runs(paths, progress=say), slices=slices, progress=say)
    say(f"{len(paths)} run{'s' if len(paths) != 1 else ''} matched and read (results.json, run_info.json)")
    for note in trend["notes"]:
        say(f"note: {note}")
    empty = empty_trend_reason(trend)
    if empty:  # nothing to follow: never a page of no figure over the last good one, exit 0 (trial29 T11)
        from fair_forge_beam.reports.empty_run import fail_empty_run

        fail_empty_run(empty, folder_path(output), prog=prog, allow_empty=False, kind="empty trend")
    if with_plots:
        say(f"drawing {len({(s['metric'], s['estimate']) for s in trend['series']})} figures")
    trend = scrub_known(trend)  # API-key values masked in values, never in keys
    html = render_trend(trend, with_plots=with_plots)
    import html as _html

    page_names = name_texts(trend)
    page_names |= {_html.escape(n) for n in page_names}
    out = folder_path(output)
    made = not _is_remote(out) and not os.path.isdir(out)
    if made:
        os.makedirs(out, exist_ok=True)
    from fair_forge_beam.console import note_published, uninterrupted
    from fair_forge_beam.io.write import replace_files

    try:  # both files or neither (a full disk: the folder is as it was); the page's text masked too, never a name in it
        with uninterrupted():  # Ctrl-C / SIGTERM while writing: raised once both files are in place
            written = replace_files([(f"{out}/trend.json", trend_json(trend)),
                                     (f"{out}/trend.html", scrub_known_text(html, page_names))],
                                    output=out, existed=not made)  # the machine's failure names the folder
            note_published(out)
    except BaseException:
        if made:  # the folder made for them goes too
            with contextlib.suppress(OSError):
                os.rmdir(out)
        raise
    say(f"wrote {written[1]} and {written[0]} ({len(trend['runs'])} runs, {len(trend['changes'])} changes; "
        f"{time.monotonic() - t0:.1f} s)")
    return written[0], written[1]
