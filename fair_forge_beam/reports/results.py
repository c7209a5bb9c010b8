"""Writing results: Beam sinks for the large outputs, a driver-side step for ``results.json``.

* ``results.parquet`` — one row per scored interaction, all metrics (union schema, nulls where
  a metric does not apply), written by Beam's ``WriteToParquet`` (pyarrow);
* ``dead_letter.jsonl`` / ``data_quality.jsonl`` — written by Beam's ``WriteToText``;
* ``results.json`` — config, summary, per-metric slice and session aggregates; deterministic
  (sorted, no timings), so the same input and seed give the same file on every runner;
* ``run_info.json`` — runner, timing, package versions, arguments.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from importlib import metadata
from typing import Any, Optional

from fair_forge_beam._beam import beam
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems

from fair_forge_beam.components.judge.secrets import scrub_known
from fair_forge_beam.runner import to_json_line, write_jsonl

__all__ = ["write_outputs", "assemble_results", "read_text_shards"]


def _parquet_row(names):
    """Row of the union schema: column ``n`` is the record's key ``n``, or, for a column
    ``<metric>_<key>``, the record's ``<key>`` (metric records keep their upstream field names)."""

    def fn(rec):
        prefix = f"{rec.get('metric')}_"
        row = {n: rec[n] if n in rec else (rec.get(n[len(prefix):]) if n.startswith(prefix) else None) for n in names}
        return scrub_known(row)  # defence at the writer: API-key values masked

    return fn


def write_outputs(read: dict, results: dict, out: str, parts: str, parquet_schema: pa.Schema) -> None:
    """Attach the sinks of the main job to the pipeline."""
    dead = [read["dead_letter"]] + [r["dead_letter"] for r in results.values()]
    quality = [read["quality"]] + [r["quality"] for r in results.values()]
    (
        tuple(dead)
        | "FlattenDeadLetter" >> beam.Flatten()
        | "DeadLetterJson" >> beam.Map(to_json_line)
        | "WriteDeadLetter" >> beam.io.WriteToText(f"{out}/dead_letter.jsonl", num_shards=1, shard_name_template="")
    )
    (
        tuple(quality)
        | "FlattenQuality" >> beam.Flatten()
        | "QualityJson" >> beam.Map(to_json_line)
        | "WriteQuality" >> beam.io.WriteToText(f"{out}/data_quality.jsonl", num_shards=1, shard_name_template="")
    )
    names = parquet_schema.names
    rows = [r["interactions"] for r in results.values()]
    (
        tuple(rows)
        | "FlattenInteractionRows" >> beam.Flatten()
        | "ParquetRows" >> beam.Map(_parquet_row(names))
        | "WriteParquet" >> beam.io.WriteToParquet(
            f"{out}/results.parquet", parquet_schema, num_shards=1, shard_name_template=""
        )
    )
    (
        read["interactions"]
        | "CountRead" >> beam.combiners.Count.Globally()
        | "CountJson" >> beam.Map(lambda c: json.dumps({"interactions_read": c}))
        | "WriteCount" >> beam.io.WriteToText(f"{parts}/count", file_name_suffix=".json")
    )
    for name, r in results.items():
        write_jsonl(r["sessions"], f"{parts}/{name}-sessions", f"Sessions_{name}")
        write_jsonl(r["slices"], f"{parts}/{name}-slices", f"Slices_{name}")


def read_text_shards(pattern: str) -> list[str]:
    """Lines of every file matching ``pattern`` (any Beam filesystem), in file-name order."""
    lines: list[str] = []
    matches = FileSystems.match([pattern])[0].metadata_list
    for m in sorted(matches, key=lambda m: m.path):
        with FileSystems.open(m.path) as f:
            lines.extend(ln for ln in f.read().decode("utf-8").splitlines() if ln.strip())
    return lines


def _slice_order(r):
    s = r["slice"]
    return (0 if s == "overall" else 1, s)


def _versions() -> dict:
    out = {}
    for pkg in ("fair_forge_beam", "apache-beam", "numpy", "scipy", "pyarrow", "pydantic", "nrclex"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def assemble_results(out: str, parts: str, metrics, mode, inputs, transforms, run_info: dict) -> dict:
    """Build ``results.json`` (and ``run_info.json``) from the pipeline's outputs; remove the parts."""
    counts = [json.loads(x) for x in read_text_shards(f"{parts}/count*")]
    n_read = sum(c["interactions_read"] for c in counts)
    dead = [json.loads(x) for x in read_text_shards(f"{out}/dead_letter.jsonl")]
    quality = [json.loads(x) for x in read_text_shards(f"{out}/data_quality.jsonl")]
    by_stage = Counter(d["stage"] for d in dead)
    quality.sort(key=lambda q: (q["kind"], q["key"], q["message"]))
    doc: dict[str, Any] = {
        "config": {
            "inputs": list(inputs),
            "metrics": list(metrics),
            "mode": "bayesian" if mode.is_bayesian else "frequentist",
            "statistical_mode": repr(mode),
            "seed": getattr(mode, "rng_seed", None),
            "mc_samples": getattr(mode, "mc_samples", None),
            "ci_level": getattr(mode, "ci_level", None),
            "beta_prior_a": getattr(mode, "beta_prior_a", None),
            "beta_prior_b": getattr(mode, "beta_prior_b", None),
        },
        "summary": {
            "interactions_read": n_read,
            "rejected_at_read": by_stage.get("read", 0),
            "rejected_at_read_reasons": _reason_counts(d for d in dead if d["stage"] == "read"),
            "data_quality_warnings": len(quality),
            "data_quality_by_kind": dict(sorted(Counter(q["kind"] for q in quality).items())),
            "metrics": {},
        },
        "metrics": {},
    }
    for name in metrics:
        sessions = [json.loads(x) for x in read_text_shards(f"{parts}/{name}-sessions*")]
        slices = [json.loads(x) for x in read_text_shards(f"{parts}/{name}-slices*")]
        sessions.sort(key=lambda r: (r["session_id"], r["assistant_id"]))
        slices.sort(key=_slice_order)
        t = transforms[name]
        not_scored = [d for d in dead if d["stage"] == name]
        scored = sum(s["n_interactions"] for s in sessions)
        doc["summary"]["metrics"][name] = {
            "scored": scored,
            "not_scored": len(not_scored),
            "not_scored_reasons": _reason_counts(not_scored),
        }
        doc["metrics"][name] = {
            "headline_columns": list(getattr(t, "headline_columns", ())),
            "lexicon": getattr(getattr(t, "lexicon", None), "name", None),
            "lexicon_licence": getattr(getattr(t, "lexicon", None), "licence", None),
            "slices": slices,
            "sessions": sessions,
        }
    with FileSystems.create(f"{out}/results.json") as f:
        f.write(scrub_known(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False)).encode("utf-8"))
    info = {**run_info, "versions": _versions()}
    with FileSystems.create(f"{out}/run_info.json") as f:
        f.write(scrub_known(json.dumps(info, indent=2)).encode("utf-8"))
    try:
        FileSystems.delete([parts])
    except Exception:  # noqa: BLE001 - leftover parts are harmless
        pass
    return doc


def _reason_kind(reason: str) -> str:
    """Group reasons that differ only in numbers (positions, indices)."""
    kind = re.sub(r"\d+", "N", reason)
    return kind if len(kind) <= 160 else kind[:157] + "..."


def _reason_counts(records, top: int = 20) -> dict:
    """Counts per reason kind, most frequent first, ties by text (deterministic); the rest in
    one ``"other (K kinds)"`` entry so the counts always add up."""
    c = Counter(_reason_kind(d["reason"]) for d in records)
    ranked = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))
    out = dict(ranked[:top])
    rest = ranked[top:]
    if rest:
        out[f"other ({len(rest)} kinds)"] = sum(v for _, v in rest)
    return out
