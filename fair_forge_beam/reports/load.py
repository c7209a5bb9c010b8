"""Reading a finished run back: ``load_results`` for analysts, and the pieces the report needs.

A run folder is what the main job writes to ``--output`` (layout:
:data:`fair_forge_beam.reports.results.LAYOUT`): ``results.json``, ``run_info.json`` and folders
of shards — ``results.parquet/``, ``sessions/<metric>/``, ``dead_letter/``, ``data_quality/``.
Everything here streams the shards (one file, one record batch or one line at a time), so
memory does not grow with the number of sessions or dead letters, except :func:`load_sessions`,
which builds a DataFrame by request. Paths may be local or any Beam filesystem (``gs://…``).
Run folders of the older single-file layout (``dead_letter.jsonl``) are read too.
"""
from __future__ import annotations

import io
import json
import os
import posixpath
from collections import Counter
from typing import Any, Iterator, Mapping, NamedTuple, Optional

from fair_forge_beam.options import CI_LEVEL, SEED
from fair_forge_beam.reports.estimates import iter_estimates
from fair_forge_beam.plain import folder_path

__all__ = ["RunConfig", "run_config", "load_results", "read_results", "read_baseline", "read_run_info", "dead_letter_summary", "results_path", "iter_dead_letters",
           "iter_quality_warnings", "iter_jsonl_lines", "iter_sessions", "read_sessions", "load_sessions", "session_files",
           "full_slice", "slice_files", "iter_slices", "run_folder", "metrics_held"]

#: slice fields that are not data (constant per metric or free text)
_META_FIELDS = ("metric", "level")


def results_path(path: str) -> str:
    """``path`` itself when it names a ``.json`` file, else ``<path>/results.json`` (a run folder
    whose name ends in ``.json`` is a folder: local folders are told apart from files)."""
    if path.endswith(".json") and not os.path.isdir(path):
        return path
    return f"{path.rstrip('/')}/results.json"


def _open(path: str):
    from fair_forge_beam._beam import beam  # noqa: F401 - guarded Beam import first
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.open(path)


def _exists(path: str) -> bool:
    from fair_forge_beam._beam import beam  # noqa: F401
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.exists(path)


class RunConfig(NamedTuple):
    """The settings of a run that comparisons, the scorecard, gates, the trend and the report read
    from its ``results.json`` ``config`` (:func:`run_config`)."""

    #: ``"bayesian"`` or ``"frequentist"`` (``None``: not recorded)
    mode: Optional[str]
    #: seed of the keyed random streams (an integer >= 0)
    seed: int
    #: level of every interval, in (0, 1)
    ci_level: float
    #: ``(a, b)`` of the Beta prior of rates
    beta_prior: tuple[float, float]

    @property
    def bayesian(self) -> bool:
        return self.mode == "bayesian"


def run_config(config: Optional[Mapping[str, Any]]) -> RunConfig:
    """The one reader of a run's ``config`` object (``results.json``'s ``"config"``; ``None`` or
    ``{}`` for a run without one). What the run does not record takes the main job's declared
    default (:data:`fair_forge_beam.options.SEED`, :data:`~fair_forge_beam.options.CI_LEVEL`):
    a frequentist run records ``seed: null``; the Beta prior defaults to Beta(1, 1) (uniform, spec
    §4.3). Never raises on missing keys."""
    cfg = config or {}
    return RunConfig(mode=cfg.get("mode"), seed=SEED if cfg.get("seed") is None else int(cfg["seed"]),
                     ci_level=float(cfg.get("ci_level") or CI_LEVEL),
                     beta_prior=(float(cfg.get("beta_prior_a") or 1.0), float(cfg.get("beta_prior_b") or 1.0)))


def read_baseline(path: Optional[str]) -> Optional[dict]:
    """The ``--baseline`` run's ``results.json`` content (the audit's and the roll-up's), or
    ``None`` without one.

    Raises:
        ValueError: ``"--baseline: <why>"`` when it cannot be read (a usage error for the callers).
    """
    if not path:
        return None
    try:
        return read_results(path)
    except (FileNotFoundError, ValueError) as exc:
        from fair_forge_beam.plain import plain_reason

        raise ValueError(f"--baseline: {plain_reason(exc)}") from None


def windowed_run(folder: str) -> Optional[str]:
    """What a folder without ``results.json`` is when it is a windowed run (``windowed_results.json``),
    in the words every reader of runs gives (``compare``, ``--compare``, ``--baseline``, ``trend``;
    trial30 T12: compare said only "no results.json"), or ``None``."""
    if not _exists(f"{folder.rstrip('/') or '/'}/windowed_results.json"):
        return None
    return (f"{folder} is a windowed run (windowed_results.json): compare, --compare, --baseline, rollup and trend "
            "read batch audits and roll-ups (results.json)")


def read_results(path: str) -> dict:
    """The content of a run's ``results.json`` (``path``: the run folder or the file).

    Raises:
        FileNotFoundError: no ``results.json`` there.
        ValueError: the file is not a results document (no ``metrics`` object), or one of its
            fields has the wrong type (:class:`~fair_forge_beam.reports.run_files.RunFileError`,
            one line naming the file and the field: :func:`~fair_forge_beam.reports.run_files.check_results`),
            or not the file its run wrote (:func:`check_results_seal`).
    """
    from fair_forge_beam.reports.run_files import check_results

    p = results_path(path)
    if not _exists(p):
        windowed = windowed_run(p.rsplit("/", 1)[0] or "/")
        raise FileNotFoundError(f"no results.json at {p}" + (f": {windowed}" if windowed else ""))
    doc = check_results(_read_run_json(p), p)
    check_results_seal(p)
    return doc


def check_results_seal(p: str) -> None:
    """``results.json`` at ``p`` is the file its run wrote when the run's ``stats/manifest.json``
    lists it (:data:`~fair_forge_beam.io.session_stats.SEALED_FILES`: its size and sha256, issue
    28, trial 28e B4: an edited results.json was trended and read as a baseline). A folder without
    a manifest (a run that stored no statistics, an earlier version's) is read on its values alone
    (:func:`~fair_forge_beam.reports.run_files.check_results`).

    Raises:
        RunFileError: one line naming the file, its size and hash and the listed ones."""
    if p.endswith("/results.json"):
        check_run_file_seal(p[:-len("/results.json")], "results.json")


def check_run_file_seal(run_dir: str, rel: str) -> None:
    """The file ``rel`` of ``run_dir`` (``results.json``, ``run_info.json``) is the one its run's
    ``stats/manifest.json`` lists (size and sha256), when the manifest lists it or its run sealed it
    (:func:`~fair_forge_beam.io.session_stats.check_listed_file`). A folder without a manifest, or
    with one its own readers refuse (the roll-up names it), is read on its values alone.

    Raises:
        RunFileError: one line naming the file."""
    from fair_forge_beam.io.edge import read_side_json
    from fair_forge_beam.io.session_stats import MANIFEST, check_listed_file
    from fair_forge_beam.reports.run_files import RunFileError

    manifest = f"{run_dir.rstrip('/')}/{MANIFEST}"
    if not _exists(manifest):
        return
    try:
        doc = read_side_json(manifest, "a run's stats/manifest.json")
    except (OSError, ValueError):
        return  # its own readers (the roll-up) name a damaged manifest; the values were checked
    if not isinstance(doc, dict):
        return
    try:
        check_listed_file(run_dir, rel, doc)
    except ValueError as exc:
        raise RunFileError(str(exc)) from None


def read_run_info(run_dir: str) -> dict:
    """``run_info.json`` of the run folder (``{}`` when missing).

    Raises:
        ValueError: one line naming the file — damaged, not JSON, nested too deep, or a field of
            the wrong type (:func:`~fair_forge_beam.reports.run_files.check_run_info`)."""
    from fair_forge_beam.reports.run_files import check_run_info

    folder = _run_dir(run_dir)
    p = f"{folder.rstrip('/')}/run_info.json"
    if not _exists(p):
        check_run_file_seal(folder, "run_info.json")  # listed but gone: refused
        return {}
    doc = check_run_info(_read_run_json(p), p)
    check_run_file_seal(folder, "run_info.json")  # sealed since issue 28 (seal28): an edited one is refused
    return doc


def _read_run_json(p: str):
    """A run folder's JSON file ``p`` (``results.json``, ``run_info.json``), read whole but never
    more than :data:`~fair_forge_beam.io.edge.MAX_SIDE_FILE_BYTES` of it.

    Raises:
        ValueError: one line naming ``p``: larger than that, not UTF-8 or not JSON (a damaged or
            truncated file)."""
    from fair_forge_beam.io.edge import read_side_json  # imported here: no Beam at module load

    return read_side_json(p, "a run's file")


def _match(pattern: str) -> list[str]:
    from fair_forge_beam._beam import beam  # noqa: F401
    from apache_beam.io.filesystems import FileSystems

    try:
        return sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)
    except Exception:  # noqa: BLE001 - Beam raises when nothing matches on some filesystems
        return []


def _run_dir(path: str) -> str:
    path = folder_path(path)  # "/" is the root (it was ".", trial48 B3)
    return folder_path(posixpath.dirname(path)) if path.endswith(".json") else path  # "/results.json": "/"


def run_folder(path: str) -> str:
    """The run folder of ``path`` (the folder, or its ``results.json``), which must exist: the
    analysts' loaders read a run that is there, never a misspelt path as an empty run (trial49 B3:
    ``iter_dead_letters("audti_out")`` yielded nothing while ``load_results`` raised). A local folder
    is a directory; a remote one (``gs://…``) a prefix holding an object.

    Raises:
        FileNotFoundError: naming the folder (and what it is when it is a windowed run's)."""
    folder = _run_dir(path)
    there = os.path.isdir(folder) if "://" not in folder else bool(_match(f"{folder}/**"))
    if not there:
        raise FileNotFoundError(f"no run folder at {folder}" + (": it is a file" if os.path.isfile(folder) else ""))
    return folder


def metrics_held(run_dir: str) -> list[str]:
    """The metrics a run holds, sorted: those of its ``results.json`` (when there and readable) and
    those with shards in ``sessions/`` or ``slices/``."""
    folder = run_folder(run_dir)
    names = set()
    if _exists(f"{folder}/results.json"):
        try:
            doc = _read_run_json(f"{folder}/results.json")
        except ValueError:  # a damaged results.json: read_results says why; the shards still name metrics
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("metrics"), dict):
            names.update(str(k) for k in doc["metrics"])
    for kind in ("sessions", "slices"):
        for p in _match(f"{folder}/{kind}/*/part-*.parquet"):
            names.add(p[len(folder) + len(kind) + 2:].split("/", 1)[0])
    return sorted(names)


def _metric_shards(run_dir: str, kind: str, metric: str) -> list[str]:
    """``run_dir``'s ``<kind>/<metric>/part-*.parquet`` (file-name order), none when there are none
    (the name is escaped: ``tox*`` is no pattern reaching ``toxicity``'s shards)."""
    return _shards(_run_dir(run_dir), kind, metric)


def _shards(folder: str, kind: str, metric: str) -> list[str]:
    import glob

    return _match(f"{folder}/{kind}/{glob.escape(metric)}/part-*.parquet")


def _held_shards(run_dir: str, kind: str, metric: str) -> list[str]:
    """As :func:`_metric_shards`, for a run folder that exists and holds ``metric`` (a metric of the
    run without such shards has none: an empty list).

    Raises:
        FileNotFoundError: no run folder there (:func:`run_folder`).
        ValueError: the run holds no metric of that name: naming it, the run's metrics and the
            closest one (``load_sessions(run, "humanty")`` gave 0 rows, trial49 B3)."""
    from fair_forge_beam.quoting import did_you_mean, quoted

    folder = run_folder(run_dir)
    files = _shards(folder, kind, metric)
    if files:
        return files
    held = metrics_held(folder)
    if metric not in held:
        raise ValueError(f"the run at {folder} holds no metric {quoted(metric)}{did_you_mean(metric, held)} "
                         f"(its metrics: {', '.join(held) if held else 'none'})")
    return files


def iter_jsonl_lines(run_dir: str, name: str) -> Iterator[str]:
    """Non-empty lines of the run's ``<name>/part-*.jsonl`` shards (file-name order), or of the
    older single file ``<name>.jsonl``; streamed. A run folder that is not there raises
    ``FileNotFoundError`` (:func:`run_folder`), when the iteration starts."""
    run_dir = run_folder(run_dir)
    paths = _match(f"{run_dir}/{name}/part-*.jsonl")
    legacy = f"{run_dir}/{name}.jsonl"
    if _exists(legacy):
        paths.append(legacy)
    for p in paths:
        with _open(p) as raw:
            for line in io.TextIOWrapper(raw, encoding="utf-8", errors="replace"):
                if line.strip():
                    yield line.rstrip("\n")


def iter_dead_letters(run_dir: str) -> Iterator[dict]:
    """Every dead letter of a run (``{stage, reason, element_id, raw, source}``), streamed from
    the ``dead_letter/`` shards; lines that are not JSON objects are skipped (see
    :func:`dead_letter_summary` for a count of them)."""
    for line in iter_jsonl_lines(run_dir, "dead_letter"):
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict):
            yield d


def iter_quality_warnings(run_dir: str) -> Iterator[dict]:
    """Every data-quality warning of a run (``{kind, key, message}``), streamed."""
    for line in iter_jsonl_lines(run_dir, "data_quality"):
        yield json.loads(line)


def session_files(run_dir: str, metric: str) -> list[str]:
    """Paths of the Parquet shards holding ``metric``'s session aggregates (file-name order).

    Raises:
        FileNotFoundError / ValueError: no run folder there, or a metric the run does not hold
            (:func:`_held_shards`)."""
    return _held_shards(run_dir, "sessions", metric)


def iter_sessions(run_dir: str, metric: str, batch_size: int = 4096) -> Iterator[dict]:
    """``metric``'s session aggregates (the records ``Metric.run()`` returns under
    ``"sessions"``), streamed from the run's ``sessions/<metric>/`` Parquet shards one record
    batch at a time; order is the shards' (sort if you need one). A metric of the run without
    session shards yields nothing; a run folder that is not there, or a metric the run does not
    hold (a misspelt name), raises when the iteration starts (:func:`session_files`)."""
    import pyarrow.parquet as pq

    import pyarrow as pa

    from fair_forge_beam.reports.results import session_records

    for p in session_files(run_dir, metric):
        with _open(p) as f:
            pf = pq.ParquetFile(f)
            for batch in pf.iter_batches(batch_size=batch_size):
                yield from session_records(pa.Table.from_batches([batch]))


def read_sessions(run_dir: str, metric: str) -> list[dict]:
    """``metric``'s session records as a list sorted by ``(session_id, assistant_id)`` (the order
    ``results.json`` held them in before they moved to shards). Memory grows with the sessions:
    use :func:`iter_sessions` for large runs."""
    return sorted(iter_sessions(run_dir, metric), key=lambda r: (str(r.get("session_id")), str(r.get("assistant_id"))))


def load_sessions(run_dir: str, metric: str):
    """``metric``'s session aggregates as a pandas ``DataFrame``, one row per session, sorted by
    ``session_id`` then ``assistant_id``; nested fields flattened to dotted columns
    (``mean_entropy.mean``, …) by ``pandas.json_normalize``. Memory grows with the sessions:
    use :func:`iter_sessions` for large runs.

    Raises:
        FileNotFoundError / ValueError: as :func:`session_files`."""
    import pandas as pd

    recs = read_sessions(run_dir, metric)
    return pd.json_normalize(recs) if recs else pd.DataFrame()


def full_slice(metric: dict, rec: dict) -> dict:
    """A slice record of ``results.json`` with its metric's run-level fields put back
    (``{**metric["common"], **rec}``: texts stated once per metric, results schema 2); records of
    older runs (no ``common``) are returned as they are."""
    common = metric.get("common")
    return {**common, **rec} if common else rec


def slice_files(run_dir: str, metric: str) -> list[str]:
    """Paths of the Parquet shards holding ``metric``'s slice records in full (file-name order).

    Raises:
        FileNotFoundError / ValueError: as :func:`session_files`."""
    return _held_shards(run_dir, "slices", metric)


def iter_slices(run_dir: str, metric: str, batch_size: int = 1024) -> Iterator[dict]:
    """``metric``'s slice records in full (every estimate, run-level texts included), streamed from
    the run's ``slices/<metric>/`` Parquet shards one record batch at a time, in the shards' order
    (sort by ``slice`` if you need one). ``results.json`` holds only summaries of the slices of a
    metric with many of them (its ``detail`` says so): read the detail here. A run without slice
    shards (written before results schema 2) yields nothing; a run folder that is not there, or a
    metric the run does not hold, raises when the iteration starts (:func:`slice_files`)."""
    import pyarrow.parquet as pq

    for p in slice_files(run_dir, metric):
        with _open(p) as f:
            for batch in pq.ParquetFile(f).iter_batches(batch_size=batch_size, columns=["record"]):
                for r in batch.column(0).to_pylist():
                    yield json.loads(r)


def load_results(path: str) -> dict[str, Any]:
    """One pandas ``DataFrame`` per metric of a run, one row per slice.

    Args:
        path: the run folder (the main job's ``--output``) or its ``results.json``.

    Returns:
        ``{metric name: DataFrame}``. Columns: ``slice``, the slice record's scalar fields
        (``n_interactions``, ``n_sessions``, ``n_toxic``, ``mode``, …) and, for every estimate
        (any dict with ``mean``/``ci_low``/``ci_high``, at any depth, headline columns first),
        ``<path>.mean``, ``<path>.ci_low``, ``<path>.ci_high`` and ``<path>.n`` — e.g.
        ``toxic_rate.mean``, ``estimates.DIDT.ci_high``, ``emotion_distribution.joy.n``. Missing
        values are ``NaN``/``None``; frequentist intervals are ``None`` (no interval). Rows are in
        the file's order (``overall`` first). Per-session and per-interaction rows are not loaded
        (:func:`load_sessions` / :func:`iter_sessions` for sessions; ``pandas.read_parquet`` of the
        ``results.parquet`` folder for interactions). ``DataFrame.attrs`` holds the run's
        ``config`` and the metric's ``headline_columns``. A metric whose ``results.json`` slices are
        summaries (more than :data:`~fair_forge_beam.reports.results.MAX_DETAILED_SLICES` of them) is
        read in full from the run's ``slices/<metric>/`` shards (:func:`iter_slices`) when they are there.

    Raises:
        FileNotFoundError / ValueError: as :func:`read_results`.
    """
    import pandas as pd

    doc = read_results(path)
    out = {}
    for name, m in doc["metrics"].items():
        rows = []
        recs = [full_slice(m, r) for r in m.get("slices", [])]
        if m.get("detail"):
            whole = sorted(iter_slices(path, name), key=lambda r: (r.get("slice") != "overall", str(r.get("slice"))))
            recs = whole or recs
        for rec in recs:
            row: dict[str, Any] = {"slice": rec.get("slice")}
            for k, v in rec.items():
                if k not in _META_FIELDS and k != "slice" and (v is None or isinstance(v, (str, int, float, bool))):
                    row[k] = v
            for p, est in iter_estimates(name, rec, m.get("headline_columns")):
                for part in ("mean", "ci_low", "ci_high", "n"):
                    row[f"{p}.{part}"] = est.get(part)
            rows.append(row)
        df = pd.DataFrame(rows)
        df.attrs["config"] = doc.get("config", {})
        df.attrs["headline_columns"] = list(m.get("headline_columns", []))
        out[name] = df
    return out


def dead_letter_summary(run_dir: str, first: int = 5, max_raw_chars: int = 600) -> dict:
    """Counts of the run's dead letters (``dead_letter/`` shards) per stage and reason, and a few records.

    Streams the shards once (memory independent of its size). Reasons that differ only in
    numbers are counted together and shown by a real reason of the group (as ``results.json``
    does: :mod:`~fair_forge_beam.reasons`). Returns ``{"total", "by_stage":
    {stage: count}, "by_reason": [(stage, reason, count)] (most frequent first, at most 50, the
    rest summed in one row), "first": [{stage, reason, element_id, raw}] (``raw`` cut to
    ``max_raw_chars``; one record of each of the ``first`` most frequent reason kinds, then other
    records, up to ``first``), "unreadable": lines that were not JSON objects, "by_assistant":
    {assistant_id: {"count", "reason": its most frequent reason, "by_stage": {stage: count},
    "interactions_scored": the interactions of that assistant the metrics scored (summed over the
    metrics' ``sessions/`` records; absent when the run has no session shards)}} (read from each
    dead letter's original record; the :data:`MAX_DEAD_ASSISTANTS` smallest assistant ids)}``. No dead-letter
    shards give zero counts.

    The result depends on the dead letters only, never on their order in the shards (a runner
    writes records in any order and any shard): the records shown are the smallest of their kind
    by ``(element_id, stage, reason, raw)``, and the assistants kept the smallest ids.
    """
    from fair_forge_beam.reasons import EXAMPLE_MARK, add_reason, cut_reason

    by_stage: Counter = Counter()
    groups: dict = {}  # (stage, reason class) -> [example, count, varied]: what a class is shown as
    by_reason: Counter = Counter()
    kinds: dict[tuple, tuple] = {}  # (stage, reason kind) -> its smallest record (sort key, shown record)
    smallest: list[tuple] = []  # the 2 * first smallest records overall
    unreadable = 0
    assistants: dict[str, Counter] = {}
    ceiling: Optional[str] = None  # assistant ids at or above it are not told apart (the cap was reached)
    for line in iter_jsonl_lines(run_dir, "dead_letter"):
        try:
            d = json.loads(line)
        except ValueError:
            d = None
        if not isinstance(d, dict):
            unreadable += 1
            continue
        stage, full = str(d.get("stage", "?")), str(d.get("reason", "?"))
        reason = add_reason(groups, stage, full)[1]  # its class: the group's key
        by_stage[stage] += 1
        by_reason[(stage, reason)] += 1
        who = _assistant_of(d.get("raw"))
        if who is not None and (ceiling is None or who < ceiling):
            assistants.setdefault(who, Counter())[(stage, reason)] += 1
            if len(assistants) > MAX_DEAD_ASSISTANTS:  # keep the smallest ids, whatever the order they come in
                ceiling = max(assistants)
                del assistants[ceiling]
        r = d.get("raw")
        r = r if isinstance(r, str) else json.dumps(r, ensure_ascii=False, default=str)
        cut = len(r) > max_raw_chars
        # kept a little longer than shown: cut after masking, so a secret across the cut is masked whole
        ex = {"stage": stage, "reason": str(d.get("reason", "")), "element_id": d.get("element_id"),
              "raw": r[:max_raw_chars + _RAW_MARGIN], "truncated": cut}
        key = (str(ex["element_id"] or ""), stage, ex["reason"], r)
        if (stage, reason) not in kinds or key < kinds[(stage, reason)][0]:
            kinds[(stage, reason)] = (key, ex)
        if len(smallest) < 2 * first or key < smallest[-1][0]:
            smallest = sorted([*smallest, (key, ex)], key=lambda t: t[0])[:2 * first]
    def shown(stage: str, kind: str) -> str:  # a class as a real reason of it (fair_forge_beam.reasons)
        text, _, varied = groups.get((stage, kind), (kind, 0, False))
        return EXAMPLE_MARK + text if varied else cut_reason(text)

    ranked = sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0]))
    rows = [(s, shown(s, r), c) for (s, r), c in ranked[:50]]
    if len(ranked) > 50:
        rows.append(("*", f"other ({len(ranked) - 50} kinds)", sum(c for _, c in ranked[50:])))
    chosen = [kinds[k] for k, _ in ranked[:first]]
    chosen += [t for t in smallest if t[0] not in {c[0] for c in chosen}]
    from fair_forge_beam.io.secrets import scrub_shown

    firsts = []
    for _, ex in chosen[:first]:  # what a person is shown: key values and secret-shaped strings masked (trial33 O1)
        shown_ex = scrub_shown(ex)
        shown_ex["raw"] = shown_ex["raw"][:max_raw_chars] + (" …" if ex["truncated"] else "")
        firsts.append(shown_ex)
    by_assistant = {}
    for a, c in sorted(assistants.items()):
        reasons: Counter = Counter()
        stages: Counter = Counter()
        for (s, r), n in c.items():
            reasons[shown(s, r)] += n
            stages[s] += n
        by_assistant[a] = {"count": sum(c.values()), "reason": sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[0][0],
                           "by_stage": dict(sorted(stages.items()))}
    scored = _scored_by_assistant(run_dir, by_assistant) if by_assistant else None
    if scored is not None:  # what the metrics scored, whatever the run's slices (trial36 T2)
        for a, entry in by_assistant.items():
            entry["interactions_scored"] = scored.get(a, 0)
    return {"total": sum(by_stage.values()), "by_stage": dict(sorted(by_stage.items())), "by_reason": rows,
            "first": firsts, "unreadable": unreadable, "by_assistant": by_assistant}


#: characters of a dead letter's original record kept beyond those :func:`dead_letter_summary` shows, so
#: that a secret the cut would split is masked whole before the cut (real API keys are 37-164 characters;
#: a PEM private key block cut short is masked to the text's end)
_RAW_MARGIN = 256

def _scored_by_assistant(run_dir: str, among) -> Optional[Counter]:
    """``{assistant: interactions scored}`` over every metric's ``sessions/<metric>/`` shards, for
    the assistants of ``among`` (memory bounded by it): what was scored, whatever slices the run
    computed. ``None`` when the run has no session shards or a shard has no ``assistant_id``
    column (nothing to tell from)."""
    import pyarrow.parquet as pq

    files = _match(f"{_run_dir(run_dir)}/sessions/*/part-*.parquet")
    if not files:
        return None
    out: Counter = Counter()
    for p in files:
        with _open(p) as f:
            pf = pq.ParquetFile(f)
            names = pf.schema_arrow.names
            if "assistant_id" not in names:
                return None
            cols = ["assistant_id"] + (["n_interactions"] if "n_interactions" in names else [])
            for batch in pf.iter_batches(columns=cols):
                ids = batch.column("assistant_id").to_pylist()
                ns = batch.column("n_interactions").to_pylist() if len(cols) > 1 else [1] * len(ids)
                for a, n in zip(ids, ns):
                    if a in among and n:
                        out[a] += n
    return out


#: assistants whose dead letters :func:`dead_letter_summary` tells apart (memory stays bounded)
MAX_DEAD_ASSISTANTS = 10_000


def _assistant_of(raw) -> Optional[str]:
    """The ``assistant_id`` of a dead letter's original record (a JSON object, as text or parsed),
    or ``None`` when it has none (a line that was not a record, a file-level error)."""
    if isinstance(raw, str):
        if not raw.startswith("{") or '"assistant_id"' not in raw:
            return None
        from fair_forge_beam.io.edge import loads

        try:  # hostile text (the record the reader rejected): the depth-bounded parser
            raw = loads(raw)
        except ValueError:
            return None
    if isinstance(raw, dict):
        who = raw.get("assistant_id")
        if isinstance(who, (str, int)) and not isinstance(who, bool):
            from fair_forge_beam.blank import is_blank

            # a blank id names no assistant: the reader refuses it as one (trial33 T7: a nameless
            # assistant was listed as "not scored at all")
            return None if is_blank(str(who)) else str(who)
    return None
