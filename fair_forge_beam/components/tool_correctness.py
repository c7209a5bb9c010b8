"""Deterministic tool-use correctness of an agent (spec §6.7; no LLM).

Inputs are the upstream dictionaries of one interaction (or of a whole conversation, see
:func:`conversation_tool_calls`):

* ``agentic = {"tools_used": [{"tool_name", "parameters", "result"?, "step"?}, ...],
  "final_answer_uses_tools": bool}``
* ``ground_truth_agentic = {"expected_tools": [{"tool_name", "parameters", "step"?}, ...],
  "tool_sequence_matters": bool (default True)}``

Four components, each in [0, 1], with ``U`` / ``E`` the sets of used / expected tool names:

* **selection** — Jaccard index ``|U ∩ E| / |U ∪ E|`` (1 when both are empty). This is the
  upstream case analysis (equal → 1, ``U ⊂ E`` → ``|U|/|E|``, ``E ⊂ U`` → ``|E|/|U|``, otherwise
  Jaccard) written as the single formula it reduces to.
* **parameters** — the ``i``-th expected call of a tool is compared with the ``i``-th used call
  of the same tool (calls of one tool ranked by ``step``, then list position); equal dicts → 1,
  otherwise the fraction of keys (union of both dicts) whose values are equal, an absent key
  counting as ``None``; no ``i``-th used call → 0. Mean over expected calls. (Upstream compares
  every expected call with the *first* used call, spec §17 item 11.)
* **sequence** — 1 when ``tool_sequence_matters`` is false; otherwise the fraction of expected
  calls whose ``i``-th matching used call has the same ``step`` (upstream rule; missing ``step`` =
  1-based position in the list).
* **utilization** — 1 when ``final_answer_uses_tools`` is truthy, else 0.

With no expected calls: parameters and sequence are 1 if no tool was used either, else 0;
utilization is 1 when nothing was expected and nothing used.

``overall = Σ w_c · component_c`` with the weights normalised to sum to 1 (upstream does not
normalise, so weights summing above 1 broke its schema validation, spec §17 item 11);
``is_correct = overall ≥ tool_threshold`` (compared with a 1e-9 tolerance so that four weights
of 0.25 reach 1.0 whatever the float rounding).

Errors: :class:`ToolTraceError` (a ``ValueError``) for malformed traces — a call that is not an
object, has no non-empty ``tool_name``, ``parameters`` that are neither an object nor absent /
null, a non-integer ``step``, or ``tools_used`` / ``expected_tools`` that are not lists. A call
without ``parameters`` is valid and compares as ``{}``.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

from fair_forge_beam.blank import is_blank
from fair_forge_beam.plain import json_kind
from fair_forge_beam.quoting import quoted
from fair_forge_beam.statistical.base import check_nonnegative

__all__ = [
    "COMPONENTS",
    "DEFAULT_TOOL_WEIGHTS",
    "ToolTraceError",
    "normalise_tool_weights",
    "has_tool_ground_truth",
    "tool_calls",
    "tool_correctness",
    "conversation_tool_calls",
]

COMPONENTS = ("selection", "parameters", "sequence", "utilization")
DEFAULT_TOOL_WEIGHTS = {"selection": 0.25, "parameters": 0.25, "sequence": 0.25, "utilization": 0.25}
_EPS = 1e-9


class ToolTraceError(ValueError):
    """A tool trace that cannot be scored; the message names the offending entry."""


def normalise_tool_weights(weights: Optional[Mapping[str, float]]) -> dict[str, float]:
    """Weights of the four components, normalised to sum to 1.

    ``None`` → the upstream default (0.25 each). Missing components weigh 0.

    Raises:
        ValueError: an unknown component, a negative / non-finite / non-numeric weight, or all
            weights zero.
    """
    if weights is None:
        return dict(DEFAULT_TOOL_WEIGHTS)
    unknown = sorted(set(weights) - set(COMPONENTS))
    if unknown:
        raise ValueError(f"unknown tool_weights components {unknown}; choose from {list(COMPONENTS)}")
    out = {c: check_nonnegative(f"tool_weights[{quoted(c)}]", weights.get(c, 0.0)) for c in COMPONENTS}
    total = math.fsum(out.values())
    if total <= 0:
        raise ValueError("tool_weights must not all be zero")
    return {c: v / total for c, v in out.items()}


def has_tool_ground_truth(ground_truth_agentic: Any) -> bool:
    """True when ``ground_truth_agentic`` declares ``expected_tools`` (tool correctness applies)."""
    return isinstance(ground_truth_agentic, Mapping) and ground_truth_agentic.get("expected_tools") is not None


def tool_calls(calls: Any, field: str) -> list[dict]:
    """Validated calls ``[{"tool_name", "parameters", "step"}]`` sorted by ``(step, position)``.

    ``None`` → ``[]``; a missing ``step`` is the 1-based position; missing / null
    ``parameters`` → ``{}``. Raises :class:`ToolTraceError` (see the module docstring)."""
    if calls is None:
        return []
    if not isinstance(calls, (list, tuple)):
        raise ToolTraceError(f"{field} must be a list, got {type(calls).__name__}")
    out = []
    for i, c in enumerate(calls):
        if not isinstance(c, Mapping):
            raise ToolTraceError(f"{field}[{i}] must be an object, got {type(c).__name__}")
        name = c.get("tool_name")
        if name is None:
            raise ToolTraceError(f"{field}[{i}] has no tool_name")
        if not isinstance(name, str):  # one of the wrong type is not missing (trial 28h H13)
            raise ToolTraceError(f"{field}[{i}].tool_name must be text, got {json_kind(name)} ({quoted(name, 40)})")
        if is_blank(name):
            raise ToolTraceError(f"{field}[{i}].tool_name is empty")
        params = c.get("parameters")
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            raise ToolTraceError(f"{field}[{i}].parameters must be an object, got {type(params).__name__}")
        step = c.get("step", i + 1)
        if step is None:
            step = i + 1
        if not _is_step(step):
            raise ToolTraceError(f"{field}[{i}].step must be an integer (|step| <= 2**53), got {quoted(step)}")
        out.append({"tool_name": name, "parameters": dict(params), "step": int(step), "_pos": i})
    out.sort(key=lambda c: (c["step"], c["_pos"]))
    for c in out:
        del c["_pos"]
    return out


def _is_step(v: Any) -> bool:
    """An integer (or integral float) step within 2**53 (larger ints overflow float arithmetic)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    if isinstance(v, int):
        return abs(v) <= 2**53
    return math.isfinite(v) and v.is_integer() and abs(v) <= 2**53


def _by_name(calls: Sequence[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for c in calls:
        out.setdefault(c["tool_name"], []).append(c)
    return out


def _param_match(expected: Mapping, used: Mapping) -> float:
    if dict(expected) == dict(used):
        return 1.0
    keys = set(expected) | set(used)
    if not keys:
        return 1.0
    return sum(1 for k in keys if expected.get(k) == used.get(k)) / len(keys)


def tool_correctness(
    agentic: Optional[Mapping],
    ground_truth_agentic: Optional[Mapping],
    weights: Optional[Mapping[str, float]] = None,
    tool_threshold: float = 1.0,
    used: Optional[list] = None,
    expected: Optional[list] = None,
) -> Optional[dict]:
    """Tool correctness of one trace (module docstring for the formulas).

    Args:
        agentic / ground_truth_agentic: the upstream dictionaries.
        weights: component weights (normalised here; ``None`` → 0.25 each).
        tool_threshold: ``is_correct`` cut-off on ``overall`` (inclusive), in [0, 1].
        used / expected: already validated calls (from :func:`conversation_tool_calls`) instead of
            the dictionaries' lists.

    Returns:
        ``None`` when ``ground_truth_agentic`` has no ``expected_tools`` (not applicable);
        otherwise ``{"tool_selection_accuracy", "parameter_accuracy", "sequence_correct",
        "result_utilization", "overall_correctness", "is_correct", "reasoning"}`` with every number
        in [0, 1].

    Raises:
        ToolTraceError: a malformed trace.
    """
    if expected is None and not has_tool_ground_truth(ground_truth_agentic):
        return None
    agentic = agentic if isinstance(agentic, Mapping) else {}
    gt = ground_truth_agentic if isinstance(ground_truth_agentic, Mapping) else {}
    w = normalise_tool_weights(weights)
    used = tool_calls(agentic.get("tools_used"), "agentic.tools_used") if used is None else used
    expected = tool_calls(gt.get("expected_tools"), "ground_truth_agentic.expected_tools") if expected is None else expected
    sequence_matters = bool(gt.get("tool_sequence_matters", True))
    u_names, e_names = {c["tool_name"] for c in used}, {c["tool_name"] for c in expected}
    notes = []

    union = u_names | e_names
    selection = 1.0 if not union else len(u_names & e_names) / len(union)
    if u_names - e_names:
        notes.append(f"unexpected tools: {sorted(u_names - e_names)}")
    if e_names - u_names:
        notes.append(f"missing tools: {sorted(e_names - u_names)}")

    used_by = _by_name(used)
    occurrence: dict[str, int] = {}
    param_scores, seq_scores = [], []
    for e in expected:
        i = occurrence.get(e["tool_name"], 0)
        occurrence[e["tool_name"]] = i + 1
        candidates = used_by.get(e["tool_name"], [])
        if i >= len(candidates):
            param_scores.append(0.0)
            seq_scores.append(0.0)
            continue
        u = candidates[i]
        s = _param_match(e["parameters"], u["parameters"])
        if s < 1.0:
            notes.append(f"{e['tool_name']} call {i + 1}: parameters match {s:.2f}")
        param_scores.append(s)
        seq_scores.append(1.0 if u["step"] == e["step"] else 0.0)
    if expected:
        parameters = math.fsum(param_scores) / len(param_scores)
        sequence = 1.0 if not sequence_matters else math.fsum(seq_scores) / len(seq_scores)
        utilization = 1.0 if agentic.get("final_answer_uses_tools") else 0.0
    else:
        parameters = 1.0 if not used else 0.0
        sequence = 1.0 if (not sequence_matters or not used) else 0.0
        utilization = 1.0 if (not used or agentic.get("final_answer_uses_tools")) else 0.0
    if sequence < 1.0:
        notes.append("tool steps differ from the expected sequence")
    if utilization < 1.0:
        notes.append("final answer does not use the tool results")
    comps = {"selection": selection, "parameters": parameters, "sequence": sequence, "utilization": utilization}
    overall = min(1.0, math.fsum(w[c] * comps[c] for c in COMPONENTS))
    return {
        "tool_selection_accuracy": selection,
        "parameter_accuracy": parameters,
        "sequence_correct": sequence,
        "result_utilization": utilization,
        "overall_correctness": overall,
        "is_correct": overall >= float(tool_threshold) - _EPS,
        "reasoning": "; ".join(notes) if notes else "tool use matches the ground truth",
    }


def conversation_tool_calls(turns: Sequence[tuple[int, Optional[Mapping], Optional[Mapping]]]) -> Optional[tuple]:
    """One trace for a whole conversation from ``(turn_index, agentic, ground_truth_agentic)``.

    Used and expected calls of all turns are put in ``(turn_index, step, position)`` order and
    renumbered 1, 2, … (so ``step`` compares positions in the conversation); the conversation
    uses the tools' results when any turn says so; the sequence matters unless every turn with
    ground truth says it does not.

    Returns ``(agentic, ground_truth_agentic, used, expected)`` for :func:`tool_correctness`, or
    ``None`` when no turn has ``expected_tools``. Raises :class:`ToolTraceError`.
    """
    turns = sorted(turns, key=lambda t: t[0])
    if not any(has_tool_ground_truth(gt) for _, _, gt in turns):
        return None
    used, expected, uses, matters = [], [], False, []
    for turn, ag, gt in turns:
        ag = ag if isinstance(ag, Mapping) else {}
        used.extend(tool_calls(ag.get("tools_used"), f"turn {turn} agentic.tools_used"))
        uses = uses or bool(ag.get("final_answer_uses_tools"))
        if has_tool_ground_truth(gt):
            expected.extend(tool_calls(gt.get("expected_tools"), f"turn {turn} ground_truth_agentic.expected_tools"))
            matters.append(bool(gt.get("tool_sequence_matters", True)))
    for i, c in enumerate(used):
        c["step"] = i + 1
    for i, c in enumerate(expected):
        c["step"] = i + 1
    return {"final_answer_uses_tools": uses}, {"tool_sequence_matters": any(matters)}, used, expected
