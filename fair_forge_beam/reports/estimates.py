"""What the report, the comparison and ``load_results`` know about the estimates of a slice record.

A slice record (one element of ``results.json``'s ``metrics.<name>.slices``) holds its estimates
as dicts with the keys ``mean``, ``ci_low`` and ``ci_high`` (and usually ``n``, the
:class:`~fair_forge_beam.schemas.common.Estimate` schema), nested at any depth: Humanity's
``mean_entropy`` and ``emotion_distribution.anger``, Toxicity's ``estimates.DIDT`` and
``group_profiling.group_estimates.women.T``, Bias's ``rates.gender``. :func:`iter_estimates`
finds them all, so the report and the comparison work for every metric, including ones added
later. Three per-metric tables refine that generic reading; a new metric adds entries, none is
required:

* :data:`DIRECTIONS` — whether a higher value is better (``+1``), worse (``-1``) or neither
  (missing / ``0``: the comparison then says "higher"/"lower", never "better"/"worse");
* :data:`RANGES` — the length of an estimate's natural range when it is not 1 (Conversational's
  0–10 scores, entropy in bits): the inconclusive-width check divides widths by it;
* :data:`COUNTS` — ``(k, n)`` counts behind rate estimates, from which the comparison builds Beta
  posteriors (Bayesian) or an Agresti–Caffo interval (frequentist), and the report a Wald width.

Patterns in :data:`DIRECTIONS`, :data:`RANGES` and :data:`SKIP` are :mod:`fnmatch` patterns over
the dotted estimate path; the first matching pattern wins.
"""
from __future__ import annotations

import fnmatch
from typing import Any, Callable, Iterator, Optional

__all__ = [
    "DIRECTIONS",
    "RANGES",
    "COUNTS",
    "SKIP",
    "is_estimate",
    "iter_estimates",
    "direction",
    "value_range",
    "counts_for",
]

#: metric -> [(path pattern, +1 higher is better / -1 lower is better / 0 no direction)]
DIRECTIONS: dict[str, list[tuple[str, int]]] = {
    # toxic-answer rate, per-group toxicity rate and the disparity scores DR/DTO/ASB/DIDT (spec §6.1):
    # 0 = no toxicity / no disparity
    "toxicity": [("toxic_rate", -1), ("estimates.*", -1), ("group_profiling.group_estimates.*.T", -1)],
    # Spearman agreement with the reference answer's emotions (spec §6.5); entropy and emotion shares
    # have no better side
    "humanity": [("mean_spearman", +1)],
    # guardian-flagged rate per protected attribute (spec §6.2)
    "bias": [("rates.*", -1)],
    # judge scores: higher = better (spec §6.3, §6.4)
    "context": [("context_awareness", +1)],
    "conversational": [("conversational_*", +1)],
    # conversation success, pass@k and pass^k (spec §6.7): higher = better
    "agentic": [("success_rate", +1), ("pass_at_k", +1), ("pass_pow_k", +1)],
    # COMPLIANT share of decided interactions (spec §6.8)
    "regulatory": [("compliance_rate", +1)],
    # similarity to the reference description, hallucinated-frame share (spec §6.9)
    "vision": [("mean_similarity", +1), ("hallucination_rate", -1)],
    # consistency of K generations and constraint compliance (spec §6.10): higher = more consistent
    "prompt_evaluator": [("csr", +1), ("csr_pooled", +1), ("stability", +1), ("icr", +1), ("jq", +1)],
    # share of answers with detected PII: lower = better; gaussia's ``score`` grades the detector against
    # the annotations, not the assistant, so it has no better side here (docs/metrics/privacy.md)
    "privacy": [("leak_rate", -1)],
    # adherent-turn share and adherent-session share (docs/metrics/role-adherence.md): higher = better
    "role_adherence": [("role_adherence", +1), ("adherent_sessions", +1)],
}

#: metric -> [(path pattern, length of the natural value range)]; unlisted estimates: 1
RANGES: dict[str, list[tuple[str, float]]] = {
    "humanity": [("mean_entropy", 3.0), ("mean_spearman", 2.0)],  # entropy of 8 emotions: 0..3 bits; rho: -1..1
    "toxicity": [("group_profiling.group_estimates.*.S", 2.0)],  # sentiment -1..1
    "conversational": [("conversational_*", 10.0)],  # 0..10 judge scale
}

#: metric -> [path pattern] of estimate-shaped dicts that repeat another estimate (not listed twice)
SKIP: dict[str, list[str]] = {
    "toxicity": ["group_profiling.bayesian.*"],  # upstream-shaped copy of ``estimates``
}


def _toxicity_counts(rec: dict) -> dict[str, tuple[int, int]]:
    out = {}
    if isinstance(rec.get("n_toxic"), int) and isinstance(rec.get("n_interactions"), int):
        out["toxic_rate"] = (rec["n_toxic"], rec["n_interactions"])
    gp = rec.get("group_profiling") or {}
    k_i, n_i = gp.get("K_i") or {}, gp.get("N_i") or {}
    for g, n in n_i.items():
        if isinstance(n, int) and isinstance(k_i.get(g), int):
            out[f"group_profiling.group_estimates.{g}.T"] = (k_i[g], n)
    return out


def _bias_counts(rec: dict) -> dict[str, tuple[int, int]]:
    out = {}
    for r in rec.get("attribute_rates") or []:
        if isinstance(r, dict) and isinstance(r.get("k_biased"), int) and isinstance(r.get("n_samples"), int):
            out[f"rates.{r.get('protected_attribute')}"] = (r["k_biased"], r["n_samples"])
    return out


def _regulatory_counts(rec: dict) -> dict[str, tuple[int, int]]:
    k, bad = rec.get("n_compliant"), rec.get("n_non_compliant")
    return {"compliance_rate": (k, k + bad)} if isinstance(k, int) and isinstance(bad, int) else {}


def _vision_counts(rec: dict) -> dict[str, tuple[int, int]]:
    k, n = rec.get("n_hallucinations"), rec.get("n_interactions")
    return {"hallucination_rate": (k, n)} if isinstance(k, int) and isinstance(n, int) else {}


#: metric -> function(slice record) -> {estimate path: (successes k, trials n)} for rate estimates
COUNTS: dict[str, Callable[[dict], dict[str, tuple[int, int]]]] = {
    "toxicity": _toxicity_counts,
    "bias": _bias_counts,
    "regulatory": _regulatory_counts,
    "vision": _vision_counts,
}


def is_estimate(value: Any) -> bool:
    """True for a dict with the keys ``mean``, ``ci_low`` and ``ci_high``."""
    return isinstance(value, dict) and {"mean", "ci_low", "ci_high"} <= value.keys()


def _match(metric: str, table: dict, path: str, default):
    for pattern, value in table.get(metric, ()):
        if fnmatch.fnmatchcase(path, pattern):
            return value
    return default


def iter_estimates(metric: str, record: dict, headline: Optional[list[str]] = None) -> Iterator[tuple[str, dict]]:
    """``(dotted path, estimate dict)`` for every estimate in ``record``, headline columns first
    (in their order), then the others in the record's key order; lists are not searched and
    :data:`SKIP` paths are left out."""
    found: list[tuple[str, dict]] = []

    def walk(node: dict, prefix: str):
        for key, value in node.items():
            path = f"{prefix}{key}"
            if is_estimate(value):
                if not any(fnmatch.fnmatchcase(path, p) for p in SKIP.get(metric, ())):
                    found.append((path, value))
            elif isinstance(value, dict):
                walk(value, path + ".")

    walk(record, "")
    order = {h: i for i, h in enumerate(headline or ())}
    found.sort(key=lambda pe: order.get(pe[0], len(order)))  # stable: the rest keep record order
    yield from found


def direction(metric: str, path: str) -> int:
    """+1 when a higher value of the estimate is better, -1 when lower is better, 0 when unknown."""
    return int(_match(metric, DIRECTIONS, path, 0))


def value_range(metric: str, path: str) -> float:
    """Length of the estimate's natural value range (1 unless listed in :data:`RANGES`)."""
    return float(_match(metric, RANGES, path, 1.0))


def counts_for(metric: str, record: dict) -> dict[str, tuple[int, int]]:
    """The ``(k, n)`` counts behind the record's rate estimates (empty for unknown metrics)."""
    fn = COUNTS.get(metric)
    return fn(record) if fn else {}
