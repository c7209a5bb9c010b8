"""Gates of a scheduled audit: thresholds on the estimates in ``results.json`` and an exit code.

A gate bounds one statistic of one metric's slice estimate, e.g. the upper end of the credible
interval of Toxicity's DIDT in the ``overall`` slice::

    toxicity DIDT ci_high <= 0.2
    toxicity DIDT ci_high <= 0.2 in every slice
    bias rate ci_high <= 0.1 for every attribute
    bias rate mean < 0.05 for attribute gender in every assistant_id
    humanity mean_entropy ci_low >= 0.5 in slice language=english

or, in an audit config file (TOML), the same as a table::

    [[gates]]
    name = "didt"                    # optional label (default: the gate's text)
    metric = "toxicity"
    field = "DIDT"
    stat = "ci_high"                 # mean | ci_low | ci_high (default ci_high)
    op = "<="                        # <= | < | >= | >
    threshold = 0.2
    slices = "overall"               # overall | every | "every <dimension>" | [slice keys]
    for_every = "attribute"          # keyed fields only (bias rate, humanity emotion) ...
    key = "gender"                   # ... or one key
    if_undefined = "fail"            # fail | skip: an estimate that is null (no data)

Semantics:

* the value checked is ``slice_record[path][stat]`` of every selected slice record (and every
  key of a keyed field); the gate passes when ``value op threshold`` holds for all of them,
  where a value within ``1e-9·max(1, |threshold|)`` of the threshold counts as equal to it
  (:func:`compare`: ``<=``/``>=`` pass, ``<``/``>`` fail) — float noise never decides a gate;
* a selected slice absent from the results (e.g. the metric scored nothing) fails the gate;
* an undefined estimate (``mean``/interval ``null``, e.g. DIDT with no group detected) fails the
  gate unless ``if_undefined = "skip"``; skipped checks are listed in ``gates.json``;
* interval statistics (``ci_low``/``ci_high``) exist in Bayesian mode only: asking for them in
  frequentist mode is a configuration error.

Configuration errors (unknown metric or field, a metric the audit does not run, an interval in
frequentist mode, a slice dimension not computed) raise :class:`GateConfigError` *before* the
pipeline runs (the main job exits 2); failed gates make the main job exit
:data:`GATE_FAILED_EXIT_CODE` (3) after writing all outputs and ``gates.json``.
"""
from __future__ import annotations

from fair_forge_beam.engine import MISSING_VALUE
from fair_forge_beam.reports.summary import dotted_get, printable

import math
import operator
import re
from dataclasses import dataclass
from typing import Literal, Optional, Sequence, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

__all__ = [
    "Gate",
    "GateCheck",
    "GateConfigError",
    "GatesFailed",
    "GATE_FAILED_EXIT_CODE",
    "FieldSpec",
    "gate_fields",
    "parse_gate",
    "validate_gates",
    "evaluate_gates",
    "gates_report",
    "gate_lines",
    "resolve_gates",
    "check_gates",
    "make_gate",
    "compare",
    "GATE_RTOL",
]

#: exit code of the main job when at least one gate fails (2 is argparse's usage / config error)
GATE_FAILED_EXIT_CODE = 3

_OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}

#: relative tolerance of gate comparisons: a value within ``GATE_RTOL·max(1, |threshold|)`` of
#: the threshold counts as equal to it (floats carry rounding of ~1e-16 relative; estimates are
#: reported to far fewer digits than 1e-9)
GATE_RTOL = 1e-9


def compare(value: float, op: str, threshold: float, rtol: float = GATE_RTOL) -> bool:
    """``value op threshold`` where values within ``rtol·max(1, |threshold|)`` of the threshold
    count as equal to it: ``<=``/``>=`` pass on them, ``<``/``>`` fail on them.

    Example: ``compare(1.5000000000000002, "<=", 1.5)`` is True; ``compare(1.4999999999999998, "<", 1.5)`` is False.

    Raises:
        KeyError: an unknown ``op``.
    """
    tol = rtol * max(1.0, abs(threshold))
    if abs(value - threshold) <= tol:
        return op in ("<=", ">=")
    return _OPS[op](value, threshold)
_OP_ALIASES = {"≤": "<=", "≥": ">=", "=<": "<=", "=>": ">="}
_STATS = ("mean", "ci_low", "ci_high")
_INTERVAL_STATS = ("ci_low", "ci_high")


class GateConfigError(ValueError):
    """A gate that cannot be evaluated against this audit (raised before the pipeline runs)."""


@dataclass(frozen=True)
class FieldSpec:
    """Where a gateable field lives in a slice record of ``results.json``.

    ``path``: dotted path to an :class:`~fair_forge_beam.schemas.common.Estimate` dict, or, for a
    keyed field, to a ``{key: Estimate}`` dict; ``key_name``: what a key is (``"attribute"``,
    ``"emotion"``); ``keys``: the keys the metric can produce (for validation).
    """

    path: str
    key_name: Optional[str] = None
    keys: tuple = ()


def gate_fields() -> dict[str, dict[str, FieldSpec]]:
    """Metric name → gateable field name → :class:`FieldSpec` (the slice estimates of each metric)."""
    from fair_forge_beam.components.emotion_lexicon import EMOTIONS
    from fair_forge_beam.components.guardian import PROTECTED_ATTRIBUTES
    from fair_forge_beam.schemas.conversational import RESULT_FIELDS

    return {
        "toxicity": {
            "toxic_rate": FieldSpec("toxic_rate"),
            **{c: FieldSpec(f"estimates.{c}") for c in ("DIDT", "DR", "DTO", "ASB")},
        },
        "humanity": {
            "mean_entropy": FieldSpec("mean_entropy"),
            "mean_spearman": FieldSpec("mean_spearman"),
            "emotion": FieldSpec("emotion_distribution", "emotion", tuple(EMOTIONS)),
        },
        "bias": {"rate": FieldSpec("rates", "attribute", tuple(str(a) for a in PROTECTED_ATTRIBUTES))},
        "context": {"context_awareness": FieldSpec("context_awareness")},
        "conversational": {f: FieldSpec(f) for f in RESULT_FIELDS},
        "regulatory": {"compliance_rate": FieldSpec("compliance_rate")},
        "agentic": {f: FieldSpec(f) for f in ("success_rate", "pass_at_k", "pass_pow_k")},
        "bestof": {"leader_win_rate": FieldSpec("leader_win_rate")},
        "vision": {f: FieldSpec(f) for f in ("mean_similarity", "hallucination_rate")},
        "prompt_evaluator": {f: FieldSpec(f) for f in ("csr", "stability", "rss", "icr", "jq", "csr_pooled")},
    }


def _fmt_num(x: Optional[float]) -> str:
    return "null" if x is None else f"{x:.4g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.3e}"


class Gate(BaseModel):
    """One gate (see the module docstring for the meaning of each field).

    Raises (on construction) ``pydantic.ValidationError`` for an unknown ``stat``/``op``/
    ``if_undefined``, a non-finite threshold, both ``key`` and ``for_every``, or a malformed
    ``slices`` selection.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Optional[str] = None
    metric: str
    field: str
    stat: Literal["mean", "ci_low", "ci_high"] = "ci_high"
    op: Literal["<=", "<", ">=", ">"]
    threshold: float
    slices: Union[str, tuple[str, ...]] = "overall"
    key: Optional[str] = None
    for_every: Optional[str] = None
    if_undefined: Literal["fail", "skip"] = "fail"

    @field_validator("op", mode="before")
    @classmethod
    def _op_alias(cls, v):
        return _OP_ALIASES.get(v, v) if isinstance(v, str) else v

    @field_validator("threshold")
    @classmethod
    def _finite(cls, v):
        if not math.isfinite(v):
            raise ValueError("threshold must be a finite number")
        return v

    @field_validator("slices", mode="before")
    @classmethod
    def _slices(cls, v):
        if isinstance(v, list):
            v = tuple(v)
        if isinstance(v, tuple):
            if not v or not all(isinstance(s, str) and s for s in v):
                raise ValueError("slices: a non-empty list of slice keys such as 'overall' or 'assistant_id=bot-a'")
            return v
        if isinstance(v, str):
            v = " ".join(v.split())
            if v in ("overall", "every", "all", "every slice"):
                return "every" if v != "overall" else "overall"
            if re.fullmatch(r"every [A-Za-z_][A-Za-z0-9_.-]*", v):
                return v
            if "=" in v:  # one slice key
                return (v,)
        raise ValueError(
            f"slices: {v!r} is none of 'overall', 'every', 'every <dimension>' (e.g. 'every assistant_id') "
            "or a list of slice keys"
        )

    @model_validator(mode="after")
    def _key_or_every(self):
        if self.key is not None and self.for_every is not None:
            raise ValueError("give either key (one entry) or for_every (every entry), not both")
        return self

    @property
    def label(self) -> str:
        """The gate's name, or its text in the compact syntax."""
        return self.name or self.text

    @property
    def text(self) -> str:
        s = f"{self.metric} {self.field} {self.stat} {self.op} {self.threshold:g}"
        if self.for_every:
            s += f" for every {self.for_every}"
        elif self.key is not None:
            s += f" for {self.key}"
        if self.slices == "every":
            s += " in every slice"
        elif isinstance(self.slices, str) and self.slices != "overall":
            s += f" in {self.slices}"
        elif isinstance(self.slices, tuple):
            s += f" in slice {','.join(self.slices)}"
        return s


_GATE_RE = re.compile(
    r"""^\s*(?P<metric>[A-Za-z_][\w-]*)\s+(?P<field>[A-Za-z_]\w*)\s+(?P<stat>[A-Za-z_]\w*)\s*
    (?P<op><=|>=|=<|=>|<|>|≤|≥)\s*(?P<threshold>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
    (?:\s+for\s+(?:every\s+(?P<for_every>[A-Za-z_]\w*)|(?:[A-Za-z_]\w*\s+)?(?P<key>[\w.-]+)))?
    (?:\s+in\s+(?:(?P<every_slice>every\s+slice|all\s+slices)|every\s+(?P<every_dim>[A-Za-z_][\w.-]*)
        |(?:slices?\s+)?(?P<slice_keys>[^\s,]+(?:\s*,\s*[^\s,]+)*)))?\s*$""",
    re.X,
)


def parse_gate(text: str, name: Optional[str] = None) -> Gate:
    """Parse the compact gate syntax ``"<metric> <field> <stat> <op> <threshold> [for every
    <key name> | for [<key name>] <key>] [in every slice | in every <dimension> | in [slice]
    <slice key>[,<slice key>...]]"``.

    Raises:
        GateConfigError: the text does not follow the syntax (the message shows it).
    """
    m = _GATE_RE.match(text or "")
    if not m:
        raise GateConfigError(
            f"gate {text!r}: expected '<metric> <field> <stat> <op> <threshold> [for every <key name>] "
            "[in every slice | in every <dimension> | in slice <key>[,<key>...]]', e.g. 'toxicity DIDT ci_high <= 0.2', "
            "'bias rate ci_high <= 0.1 for every attribute' or 'toxicity toxic_rate mean <= 0.1 in every region' (a slice "
            "value with a comma or a space: the TOML [[gates]] form, slices = [\"region=eu,west\"])"
        )
    g = m.groupdict()
    if g["every_slice"]:
        slices: Union[str, list] = "every"
    elif g["every_dim"]:
        slices = f"every {g['every_dim']}"
    elif g["slice_keys"]:
        keys = [s.strip() for s in g["slice_keys"].split(",")]
        slices = "overall" if keys == ["overall"] else keys
    else:
        slices = "overall"
    data = {"metric": g["metric"], "field": g["field"], "stat": g["stat"], "op": g["op"],
            "threshold": float(g["threshold"]), "slices": slices, "key": g["key"], "for_every": g["for_every"]}
    if name:
        data["name"] = name
    return make_gate(data, where=f"gate {text!r}")


def make_gate(data: Union[str, dict, Gate], where: str = "gate") -> Gate:
    """A :class:`Gate` from its compact text, a config table (dict) or a ``Gate``.

    Raises:
        GateConfigError: malformed gate (wraps pydantic's validation message).
    """
    if isinstance(data, Gate):
        return data
    if isinstance(data, str):
        return parse_gate(data)
    if isinstance(data, dict) and "gate" in data:  # {gate = "<compact text>", name = ..., if_undefined = ...}
        rest = {k: v for k, v in data.items() if k != "gate"}
        base = parse_gate(str(data["gate"]))
        try:
            return Gate(**{**base.model_dump(exclude_none=True), **rest})
        except ValidationError as exc:
            raise GateConfigError(f"{where}: {_pydantic_message(exc)}") from None
    try:
        return Gate(**data) if isinstance(data, dict) else Gate.model_validate(data)
    except ValidationError as exc:
        raise GateConfigError(f"{where}: {_pydantic_message(exc)}") from None


def _pydantic_message(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'gate'}: {e['msg']}" for e in exc.errors())


def metric_slice_dimensions(metric: str, slice_dims: Sequence[str]) -> tuple:
    """The dimensions among ``slice_dims`` that ``metric`` slices by: all of them, except for
    BestOf, which ranks assistants (no per-assistant slice, no metadata field:
    :data:`fair_forge_beam.metrics.best_of.BESTOF_SLICES`, the one place that says so)."""
    if metric == "bestof":
        from fair_forge_beam.metrics.best_of import BESTOF_SLICES

        return tuple(d for d in slice_dims if d in BESTOF_SLICES)
    return tuple(slice_dims)


def validate_gates(gates: Sequence[Gate], metrics: Sequence[str], bayesian: bool,
                   slice_dims: Sequence[str] = ("overall", "assistant_id", "language")) -> None:
    """Check every gate against the audit about to run (before the pipeline starts).

    Args:
        gates: the gates.
        metrics: the metric names the audit runs.
        bayesian: whether the statistical mode gives credible intervals.
        slice_dims: the slice dimensions computed (``overall`` and/or ``assistant_id``, ``language``).

    Raises:
        GateConfigError: one message listing every problem, each naming its gate.
    """
    if not gates:
        return
    fields = gate_fields()
    problems = []
    for g in gates:
        where = f"gate {g.label!r}"
        if g.metric not in fields:
            problems.append(f"{where}: unknown metric {g.metric!r} (gateable: {', '.join(sorted(fields))})")
            continue
        if g.metric not in metrics:
            problems.append(f"{where}: metric {g.metric!r} is not run by this audit (metrics: {', '.join(metrics)}); "
                            "add it to the metrics or remove the gate")
        spec = fields[g.metric].get(g.field)
        if spec is None:
            problems.append(f"{where}: metric {g.metric!r} has no field {g.field!r} (fields: "
                            f"{', '.join(fields[g.metric])})")
            continue
        if g.stat in _INTERVAL_STATS and not bayesian:
            problems.append(f"{where}: {g.stat} is a credible-interval bound, which only the Bayesian mode gives; "
                            "set mode = \"bayesian\" or gate on mean")
        if spec.key_name is None and (g.key is not None or g.for_every is not None):
            hint = (f"; to check every {g.for_every} slice, write 'in every {g.for_every}'"
                    if g.for_every is not None and g.for_every in slice_dims else "")
            problems.append(f"{where}: field {g.field!r} has no entries to choose (drop 'for ...'){hint}")
        if spec.key_name is not None:
            if g.key is None and g.for_every is None:
                problems.append(f"{where}: field {g.field!r} has one estimate per {spec.key_name}: add "
                                f"'for every {spec.key_name}' or 'for {spec.key_name} <name>'")
            if g.for_every is not None and g.for_every != spec.key_name:
                problems.append(f"{where}: field {g.field!r} is keyed by {spec.key_name}, not {g.for_every!r}")
            if g.key is not None and spec.keys and g.key not in spec.keys:
                problems.append(f"{where}: unknown {spec.key_name} {g.key!r} (known: {', '.join(spec.keys)})")
        dims = []
        if g.slices == "overall":
            dims = ["overall"]
        elif isinstance(g.slices, str) and g.slices.startswith("every "):
            dims = [g.slices.split(" ", 1)[1]]
        elif isinstance(g.slices, tuple):
            dims = ["overall" if s == "overall" else s.split("=", 1)[0] for s in g.slices]
            bad = [s for s in g.slices if s != "overall" and "=" not in s]
            if bad:
                problems.append(f"{where}: slice keys look like 'overall', 'assistant_id=<id>', "
                                f"'language=<name>' or '<metadata field>=<value>', got {bad}")
        computed = [d for d in slice_dims if d in metric_slice_dimensions(g.metric, slice_dims)]
        for d in dims:
            if d not in computed:
                problems.append(f"{where}: slice dimension {d!r} is not computed by this audit for {g.metric} "
                                f"(slices: {', '.join(computed)})")
    if problems:
        raise GateConfigError("invalid gate(s):\n  " + "\n  ".join(problems))


class GateCheck(BaseModel):
    """One evaluated (gate, slice, key): ``status`` is ``pass``, ``fail`` or ``skipped``."""

    model_config = ConfigDict(extra="forbid")

    gate: str
    gate_index: int
    metric: str
    field: str
    stat: str
    op: str
    threshold: float
    slice: str
    key: Optional[str] = None
    value: Optional[float] = None
    mean: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    n: Optional[int] = None
    status: Literal["pass", "fail", "skipped"]
    reason: str = ""

    def message(self, ci_level: Optional[float] = None) -> str:
        """``GATE FAILED <gate> [slice, key]: <stat> = <value> (mean …, 95% credible interval [lo, hi], n = …)``."""
        return printable(self._message(ci_level))  # slice keys and reasons carry values from the data

    def _message(self, ci_level: Optional[float]) -> str:
        where = self.slice + (f", {self.key}" if self.key is not None else "")
        head = {"pass": "gate passed", "fail": "GATE FAILED", "skipped": "gate skipped"}[self.status]
        if self.value is None:
            return f"{head} {self.gate!r} [{where}]: {self.reason}"
        level = f"{ci_level * 100:g}% credible interval" if ci_level else "interval"
        interval = (f", {level} [{_fmt_num(self.ci_low)}, {_fmt_num(self.ci_high)}]"
                    if self.ci_low is not None or self.ci_high is not None else ", no interval")
        cmp = self.op if self.status == "pass" else {"<=": ">", "<": ">=", ">=": "<", ">": "<="}[self.op]
        return (f"{head} {self.gate!r} [{where}]: {self.field} {self.stat} = {_fmt_num(self.value)} {cmp} "
                f"{self.threshold:g} (mean {_fmt_num(self.mean)}{interval}, n = {self.n})")


def _selected_slices(gate: Gate, records: list[dict]) -> list[tuple[str, Optional[dict]]]:
    by_key = {r.get("slice"): r for r in records}
    if gate.slices == "overall":
        wanted = ["overall"]
    elif gate.slices == "every":
        return [(r["slice"], r) for r in records] or [("overall", None)]
    elif isinstance(gate.slices, str):  # "every <dimension>"
        prefix = gate.slices.split(" ", 1)[1] + "="
        found = [(r["slice"], r) for r in records if str(r.get("slice", "")).startswith(prefix)]
        if [k for k, _ in found] == [prefix + MISSING_VALUE]:  # a metadata field no session carries
            return [(prefix + "*", None)]
        return found or [(prefix + "*", None)]
    else:
        wanted = list(gate.slices)
    return [(s, by_key.get(s)) for s in wanted]


def evaluate_gates(doc: dict, gates: Sequence[Gate]) -> list[GateCheck]:
    """Evaluate ``gates`` on a ``results.json`` document.

    Returns:
        One :class:`GateCheck` per (gate, selected slice, key), in gate order, then slice order
        of ``results.json``, then key order. A gate failed when any of its checks failed.
    """
    fields = gate_fields()
    checks: list[GateCheck] = []
    for i, g in enumerate(gates):
        spec = fields[g.metric][g.field]
        base = {"gate": g.label, "gate_index": i, "metric": g.metric, "field": g.field, "stat": g.stat, "op": g.op,
                "threshold": g.threshold}
        records = (doc.get("metrics", {}).get(g.metric) or {}).get("slices", [])
        for slice_key, rec in _selected_slices(g, records):
            if rec is None:
                missing = slice_key.endswith("=*") and any(
                    r.get("slice") == slice_key[:-1] + MISSING_VALUE for r in records)
                reason = (f"no session carries the metadata field {slice_key[:-2]!r} (every session is in "
                          f"{slice_key[:-1] + MISSING_VALUE!r})" if missing else
                          f"no slice {slice_key!r} in the results of {g.metric} (scored interactions: "
                          f"{_scored(doc, g.metric)})")
                checks.append(GateCheck(**base, slice=slice_key, status="fail", reason=reason))
                continue
            node = dotted_get(rec, spec.path)
            if spec.key_name is None:
                entries = [(None, node)]
            else:
                node = node if isinstance(node, dict) else {}
                keys = [g.key] if g.key is not None else list(node)
                entries = [(k, node.get(k)) for k in keys]
                if not entries:
                    checks.append(GateCheck(**base, slice=slice_key, status="fail",
                                            reason=f"no {spec.key_name} estimates in slice {slice_key!r}"))
            for key, est in entries:
                est = est if isinstance(est, dict) else {}
                value = est.get(g.stat)
                info = {"mean": est.get("mean"), "ci_low": est.get("ci_low"), "ci_high": est.get("ci_high"),
                        "n": est.get("n")}
                if value is None:
                    status = "skipped" if g.if_undefined == "skip" else "fail"
                    reason = (f"{g.field} {g.stat} is undefined (no data: n = {info['n']})" if est
                              else f"no {g.field} estimate" + (f" for {spec.key_name} {key!r}" if key else ""))
                    checks.append(GateCheck(**base, slice=slice_key, key=key, **info, status=status, reason=reason))
                    continue
                ok = compare(float(value), g.op, g.threshold)
                checks.append(GateCheck(**base, slice=slice_key, key=key, value=float(value), **info,
                                        status="pass" if ok else "fail"))
    return checks


def _scored(doc: dict, metric: str):
    return ((doc.get("summary", {}).get("metrics", {}) or {}).get(metric) or {}).get("scored")


class GatesFailed(SystemExit):
    """Raised by the main job when a gate failed (after every output was written); exit code 3.

    Attributes:
        checks: every :class:`GateCheck` of the run; ``failed``: those with status ``fail``.
    """

    def __init__(self, checks: Sequence[GateCheck], message: str):
        super().__init__(GATE_FAILED_EXIT_CODE)
        self.checks = list(checks)
        self.failed = [c for c in checks if c.status == "fail"]
        self.message = message

    def __str__(self) -> str:
        return self.message


def gates_report(checks: Sequence[GateCheck], gates: Sequence[Gate], ci_level: Optional[float] = None) -> dict:
    """The content of ``gates.json``: ``{passed, n_gates, n_failed, gates: [{gate, status,
    checks}]}`` (a gate's status: ``fail`` if any check failed, ``pass`` if at least one passed
    and none failed, ``skipped`` if every check was skipped)."""
    out = []
    for i, g in enumerate(gates):
        mine = [c for c in checks if c.gate_index == i]
        status = ("fail" if any(c.status == "fail" for c in mine)
                  else "pass" if any(c.status == "pass" for c in mine) else "skipped")
        out.append({"gate": g.label, "text": g.text, "status": status,
                    "checks": [c.model_dump(exclude={"gate_index"}) | {"message": c.message(ci_level)} for c in mine]})
    failed = sum(1 for x in out if x["status"] == "fail")
    return {"passed": failed == 0, "n_gates": len(out), "n_failed": failed, "ci_level": ci_level, "gates": out}


def gate_lines(checks: Sequence[GateCheck], ci_level: Optional[float] = None, verbose: bool = False) -> list[str]:
    """Human-readable lines: every failed or skipped check; passed checks too when ``verbose``."""
    return [c.message(ci_level) for c in checks if verbose or c.status != "pass"]


def resolve_gates(specs: Sequence[Union[str, dict, Gate]], metrics: Sequence[str], bayesian: bool,
                  slice_dims: Sequence[str]) -> list[Gate]:
    """Gates from config entries / ``--gate`` texts, validated against the audit (see :func:`validate_gates`).

    Raises:
        GateConfigError: a malformed or inapplicable gate.
    """
    gates = [make_gate(s, where=f"gate #{i + 1}") for i, s in enumerate(specs)]
    validate_gates(gates, metrics, bayesian, slice_dims)
    return gates


def check_gates(doc: dict, gates: Sequence[Gate], out: str, quiet: bool = False,
                shown: Optional[str] = None) -> list[GateCheck]:
    """Evaluate ``gates`` on ``doc``, write ``<out>/gates.json`` and print the outcome (failed and
    skipped checks on stderr; passed gates on stdout unless ``quiet``). ``shown``: the folder the
    messages name (default ``out``; the main job writes into a stage published as ``shown``).

    Raises:
        GatesFailed: a ``SystemExit`` with code :data:`GATE_FAILED_EXIT_CODE` when a gate failed.
    """
    import json
    import sys

    from apache_beam.io.filesystems import FileSystems

    ci_level = (doc.get("config") or {}).get("ci_level")
    checks = evaluate_gates(doc, gates)
    report = gates_report(checks, gates, ci_level)
    with FileSystems.create(f"{out}/gates.json") as f:
        f.write(json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    for c in checks:
        if c.status != "pass":
            print(c.message(ci_level), file=sys.stderr)
    summary = (f"gates: {report['n_gates'] - report['n_failed']} of {report['n_gates']} passed"
               + (f"; FAILED: {', '.join(repr(g['gate']) for g in report['gates'] if g['status'] == 'fail')}"
                  if report["n_failed"] else ""))
    if report["n_failed"]:
        print(summary + f" (exit code {GATE_FAILED_EXIT_CODE}; details in {shown or out}/gates.json)", file=sys.stderr)
        raise GatesFailed(checks, summary)
    if not quiet:
        print(summary)
    return checks
