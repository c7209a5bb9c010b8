"""Reading a finished run back: ``load_results`` for analysts, and the pieces the report needs.

A run folder is what the main job writes to ``--output``: ``results.json``, ``run_info.json``,
``dead_letter.jsonl`` (and ``results.parquet``, ``data_quality.jsonl``). Paths may be local or
any Beam filesystem (``gs://…``).
"""
from __future__ import annotations

import io
import json
from collections import Counter
from typing import Any, Optional

from fair_forge_beam.reports.estimates import iter_estimates

__all__ = ["load_results", "read_results", "read_run_info", "dead_letter_summary", "results_path"]

#: slice fields that are not data (constant per metric or free text)
_META_FIELDS = ("metric", "level")


def results_path(path: str) -> str:
    """``path`` itself when it names a ``.json`` file, else ``<path>/results.json``."""
    return path if path.endswith(".json") else f"{path.rstrip('/')}/results.json"


def _open(path: str):
    from fair_forge_beam._beam import beam  # noqa: F401 - guarded Beam import first
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.open(path)


def _exists(path: str) -> bool:
    from fair_forge_beam._beam import beam  # noqa: F401
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.exists(path)


def read_results(path: str) -> dict:
    """The content of a run's ``results.json`` (``path``: the run folder or the file).

    Raises:
        FileNotFoundError: no ``results.json`` there.
        ValueError: the file is not a results document (no ``metrics`` object).
    """
    p = results_path(path)
    if not _exists(p):
        raise FileNotFoundError(f"no results.json at {p}")
    with _open(p) as f:
        doc = json.loads(f.read().decode("utf-8"))
    if not isinstance(doc, dict) or not isinstance(doc.get("metrics"), dict):
        raise ValueError(f"{p} is not a fair_forge_beam results.json (no 'metrics' object)")
    return doc


def read_run_info(run_dir: str) -> dict:
    """``run_info.json`` of the run folder (``{}`` when missing)."""
    p = f"{run_dir.rstrip('/')}/run_info.json"
    if not _exists(p):
        return {}
    with _open(p) as f:
        return json.loads(f.read().decode("utf-8"))


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
        (read ``results.parquet`` with pandas for those). ``DataFrame.attrs`` holds the run's
        ``config`` and the metric's ``headline_columns``.

    Raises:
        FileNotFoundError / ValueError: as :func:`read_results`.
    """
    import pandas as pd

    doc = read_results(path)
    out = {}
    for name, m in doc["metrics"].items():
        rows = []
        for rec in m.get("slices", []):
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
    """Counts of ``dead_letter.jsonl`` per stage and reason, and the first few records.

    Streams the file once (memory independent of its size). Reasons that differ only in
    numbers are counted together (as ``results.json`` does). Returns ``{"total", "by_stage":
    {stage: count}, "by_reason": [(stage, reason, count)] (most frequent first, at most 50, the
    rest summed in one row), "first": [{stage, reason, element_id, raw}] (``raw`` cut to
    ``max_raw_chars``; the first record of each reason kind, up to ``first``, then the next records in
    file order), "unreadable": lines that were not JSON objects}``. A missing file gives
    zero counts.
    """
    from fair_forge_beam.reports.results import _reason_kind

    p = f"{run_dir.rstrip('/')}/dead_letter.jsonl"
    by_stage: Counter = Counter()
    by_reason: Counter = Counter()
    kinds: dict[tuple, dict] = {}  # the first record of each of the first `first` reason kinds
    extra: list[dict] = []  # the first records that were not picked above
    unreadable = 0
    if _exists(p):
        with _open(p) as raw:
            for line in io.TextIOWrapper(raw, encoding="utf-8", errors="replace"):
                if not line.strip():
                    continue
                try:
                    d = json.loads(line)
                except ValueError:
                    d = None
                if not isinstance(d, dict):
                    unreadable += 1
                    continue
                stage, reason = str(d.get("stage", "?")), _reason_kind(str(d.get("reason", "?")))
                by_stage[stage] += 1
                by_reason[(stage, reason)] += 1
                new_kind = (stage, reason) not in kinds and len(kinds) < first
                if new_kind or len(extra) < first:
                    r = d.get("raw")
                    r = r if isinstance(r, str) else json.dumps(r, ensure_ascii=False, default=str)
                    cut = len(r) > max_raw_chars
                    ex = {"stage": stage, "reason": str(d.get("reason", "")), "element_id": d.get("element_id"),
                          "raw": r[:max_raw_chars] + (" …" if cut else ""), "truncated": cut}
                    if new_kind:
                        kinds[(stage, reason)] = ex
                    else:
                        extra.append(ex)
    ranked = sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0]))
    rows = [(s, r, c) for (s, r), c in ranked[:50]]
    if len(ranked) > 50:
        rows.append(("*", f"other ({len(ranked) - 50} kinds)", sum(c for _, c in ranked[50:])))
    firsts = (list(kinds.values()) + extra)[:first]
    return {"total": sum(by_stage.values()), "by_stage": dict(sorted(by_stage.items())), "by_reason": rows,
            "first": firsts, "unreadable": unreadable}


def optional_dead_letter_summary(run_dir: Optional[str]) -> dict:
    """:func:`dead_letter_summary`, or empty counts without a run folder."""
    if not run_dir:
        return {"total": 0, "by_stage": {}, "by_reason": [], "first": [], "unreadable": 0}
    return dead_letter_summary(run_dir)
