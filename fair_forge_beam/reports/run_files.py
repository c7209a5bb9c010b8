"""The shape of a finished run's JSON files, checked once where they are read back.

``results.json`` and ``run_info.json`` are read by ``trend``, ``audit --compare`` / ``--baseline``,
the scorecard, the report and the roll-up (:func:`fair_forge_beam.reports.load.read_results`,
:func:`~fair_forge_beam.reports.load.read_run_info`). A damaged or edited file — valid JSON whose
inner values have the wrong type (``metrics.toxicity = 5``, ``slices = "x"`` or ``null``,
``config = [1]``, ``summary = "x"``, a slice that is a string, an estimate whose ``mean`` is text) —
is refused here in one line naming the file and the field (:class:`RunFileError`, a
``ValueError``; the commands turn it into a usage error, exit 2), instead of an ``AttributeError``
or ``TypeError`` deep in a report.

The models (pydantic, strict: no text read as a number, no ``true`` as 1) state only what the
readers rely on; other fields are kept as they are (``extra="allow"``). Every estimate (a dict with
``mean``, ``ci_low`` and ``ci_high``, :func:`~fair_forge_beam.reports.estimates.is_estimate`)
anywhere in a slice record must hold numbers or ``null`` there (and an integer or ``null`` ``n``).
"""
from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Optional

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, StrictFloat, StrictStr, TypeAdapter,
                      ValidationError, model_validator)

from fair_forge_beam.plain import json_kind
from fair_forge_beam.schemas.common import bounded_int

__all__ = ["RunFileError", "check_results", "check_run_info", "check_manifest"]

#: a number (an integer is one; text and booleans are not)
_Number = StrictFloat
#: a count: an integer, never negative (issue 28, B8: an edited ``interactions_read: -5`` was trended),
#: at most 2**63-1 (what an int64 column holds: :func:`~fair_forge_beam.schemas.common.bounded_int`)
_Count = bounded_int(0, strict=True)
#: an integer (a seed, a number of draws), at most 2**63-1
_Integer = bounded_int(None, strict=True)


def _utc_time(value: str) -> str:
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise ValueError("not an ISO 8601 time") from None
    return value


#: a time as the package writes it (ISO 8601; an impossible date such as month 13 is refused, never
#: replaced by another field: issue 28, B8)
_Time = Annotated[StrictStr, AfterValidator(_utc_time)]


class RunFileError(ValueError):
    """A run's JSON file whose content does not have the shape its readers need: one line naming
    the file, the field (dotted path) and what it holds."""


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class _Config(_Open):
    mode: Optional[StrictStr] = None
    seed: Optional[_Integer] = None
    ci_level: Optional[_Number] = None
    beta_prior_a: Optional[_Number] = None
    beta_prior_b: Optional[_Number] = None
    mc_samples: Optional[_Integer] = None
    inputs: Optional[list[StrictStr]] = None
    metrics: Optional[list[StrictStr]] = None
    slices: Optional[list[StrictStr]] = None
    versions: Optional[dict[StrictStr, Any]] = None


class _StageDeadLetters(_Open):
    dead_letters: Optional[_Count] = None
    dead_letter_unit: Optional[StrictStr] = None
    dead_letter_reasons: Optional[dict[StrictStr, _Count]] = None


class _SummaryMetric(_Open):
    scored: Optional[_Count] = None
    interactions_scored: Optional[_Count] = None
    interactions_not_scored: Optional[_Count] = None
    interactions_left_out: Optional[_Count] = None
    dead_letters: Optional[_Count] = None
    dead_letter_unit: Optional[StrictStr] = None
    dead_letter_reasons: Optional[dict[StrictStr, _Count]] = None
    stage_dead_letters: Optional[dict[StrictStr, _StageDeadLetters]] = None


class _Summary(_Open):
    interactions_read: Optional[_Count] = None
    records_read: Optional[_Count] = None
    rejected_at_read: Optional[_Count] = None
    rejected_at_read_reasons: Optional[dict[StrictStr, _Count]] = None
    assistant_failed: Optional[_Count] = None
    assistant_failed_reasons: Optional[dict[StrictStr, _Count]] = None
    other_dead_letters: Optional[dict[StrictStr, _StageDeadLetters]] = None
    data_quality_warnings: Optional[_Count] = None
    data_quality_by_kind: Optional[dict[StrictStr, _Count]] = None
    metrics: Optional[dict[StrictStr, _SummaryMetric]] = None
    interactions_read_by_slice: Optional[dict[StrictStr, _Count]] = None


class _Slice(_Open):
    slice: StrictStr
    metric: Optional[StrictStr] = None
    level: Optional[StrictStr] = None
    mode: Optional[StrictStr] = None
    n_interactions: Optional[_Count] = None
    n_sessions: Optional[_Count] = None


class _Metric(_Open):
    slices: list[_Slice] = []
    headline_columns: Optional[list[StrictStr]] = None
    common: Optional[dict[StrictStr, Any]] = None
    detail: Optional[dict[StrictStr, Any]] = None


class _Results(_Open):
    config: Optional[_Config] = None
    summary: Optional[_Summary] = None
    metrics: dict[StrictStr, _Metric]


class _Estimate(_Open):
    """An estimate: numbers or ``null``, a count ``n``, an interval whose ends are in order (issue 28
    B4: an edited ``[0.9, 0.2]`` was trended and read as a baseline of "zero width")."""
    mean: Optional[_Number] = None
    ci_low: Optional[_Number] = None
    ci_high: Optional[_Number] = None
    n: Optional[_Count] = None

    @model_validator(mode="after")
    def _ordered(self):
        if self.ci_low is not None and self.ci_high is not None and self.ci_low > self.ci_high:
            raise ValueError(f"the interval [{self.ci_low:.6g}, {self.ci_high:.6g}] is reversed (its low end is above "
                             "its high end)")
        return self


#: a share or a rate: a number from 0 to 1
_Share = Annotated[_Number, Field(ge=0, le=1)]


class _RateEstimate(_Estimate):
    """An estimate of a rate or a share (:func:`_is_rate`): its mean and interval within [0, 1]."""
    mean: Optional[_Share] = None
    ci_low: Optional[_Share] = None
    ci_high: Optional[_Share] = None


#: a count anywhere in a slice record (:func:`_is_count`)
_COUNT = TypeAdapter(_Count)
#: keys whose value, or whose object's values, are counts (the stored rows' rule too:
#: ``session_stats.stored_rows_problem``): ``n``, ``n_…``, ``N_…``, ``…_count(s)``, ``…_words`` and
#: Toxicity's per-category counts
_COUNT_KEY = re.compile(r"(n|n_\w+|N_\w+|\w*_?counts?|\w+_words|categories)")
#: estimates of a rate or share: ``…_rate`` / ``…_share``, an emotion's share, a group's probability ``p``
_RATE_KEY = re.compile(r"\w*_?(rate|share)")


def _is_rate(key: str, parent: str) -> bool:
    return bool(_RATE_KEY.fullmatch(key)) or parent == "emotion_distribution" or (key == "p" and parent != "")


class _Manifest(_Open):
    config: Optional[_Config] = None
    options: Optional[dict[StrictStr, Any]] = None
    static: Optional[dict[StrictStr, dict[StrictStr, Any]]] = None
    stored: Optional[dict[StrictStr, StrictStr]] = None
    stored_slices: Optional[dict[StrictStr, StrictStr]] = None
    not_stored: Optional[dict[StrictStr, Any]] = None
    slices_not_stored: Optional[dict[StrictStr, Any]] = None
    counts: Optional[dict[StrictStr, Any]] = None
    input_files: Optional[list[list[Any]]] = None
    sealed_files: Optional[list[StrictStr]] = None


class _RunInfo(_Open):
    runner: Optional[StrictStr] = None
    started_at: Optional[_Time] = None
    finished_at: Optional[_Time] = None
    seconds: Optional[Annotated[_Number, Field(ge=0)]] = None
    argv: Optional[list[StrictStr]] = None
    options: Optional[dict[StrictStr, Any]] = None
    beam_args: Optional[list[StrictStr]] = None
    versions: Optional[dict[StrictStr, Any]] = None


def _refusal(path: str, exc: ValidationError, doc: Any) -> RunFileError:
    err = exc.errors()[0]
    loc = [str(x) for x in err["loc"] if not str(x).startswith(("function-", "union["))]
    field = ".".join(loc) or "(the document)"
    value = err.get("input")
    what = err["msg"].lower().rstrip(".")
    if err["type"] == "missing":
        return RunFileError(f"{path}: field '{field}' is missing (a damaged or edited run file)")
    if err["type"] in ("greater_than_equal", "value_error"):  # the type is right, the value impossible
        why = "a count or a duration is never negative" if err["type"] == "greater_than_equal" else \
            str(err.get("ctx", {}).get("error", "an impossible value"))
        shown = value if isinstance(value, (int, float)) else repr(str(value)[:40])
        return RunFileError(f"{path}: field '{field}' holds {shown}: {why} (a damaged or edited run file)")
    if err["type"] == "string_unicode":  # the type is right; its characters are not (a lone surrogate, \ud800)
        return RunFileError(f"{path}: field '{field}' holds text that is not valid Unicode (a lone surrogate such "
                            "as \\ud800, in a value or a key; a damaged or edited run file)")
    return RunFileError(f"{path}: field '{field}' holds {json_kind(value)} where {_expected(what)} is needed "
                        "(a damaged or edited run file)")


def _expected(msg: str) -> str:
    for word, kind in (("dictionary", "an object"), ("list", "a list"), ("string", "text"),
                       ("integer", "an integer"), ("float", "a number"), ("number", "a number")):
        if word in msg:
            return kind
    return "another value"


def _check(model, doc: Any, path: str) -> None:
    try:
        model.model_validate(doc)
    except ValidationError as exc:
        raise _refusal(path, exc, doc) from None


def _problem(field: str, err: dict, path: str) -> RunFileError:
    value = err.get("input")
    if err["type"] in ("greater_than_equal", "less_than_equal", "value_error") and isinstance(value, (int, float, dict)):
        why = {"greater_than_equal": "below its lowest possible value", "less_than_equal": "above its highest possible "
               "value"}.get(err["type"]) or str(err.get("ctx", {}).get("error", "an impossible value"))
        if err["type"] == "greater_than_equal" and isinstance(value, int):
            why = "a count is never negative"
        elif err["type"] in ("greater_than_equal", "less_than_equal"):
            why = "a rate or share is from 0 to 1"
        shown = value if isinstance(value, (int, float)) else "an estimate"
        return RunFileError(f"{path}: field '{field}' holds {shown}: {why} (a damaged or edited run file)")
    return RunFileError(f"{path}: field '{field}' holds {json_kind(value)} where a number or null is needed "
                        "(a damaged or edited run file)")


def _estimates(metric: str, node: dict, prefix: str, path: str) -> None:
    """Every estimate in ``node`` (walked without recursion) holds numbers, its interval in order
    (a rate's within [0, 1]); every count (:data:`_COUNT_KEY`) is an integer >= 0."""
    stack = [(node, prefix, "")]
    while stack:
        d, at, parent = stack.pop()
        for key, value in d.items():
            key = str(key)
            if isinstance(value, dict):
                if {"mean", "ci_low", "ci_high"} <= value.keys():
                    try:
                        (_RateEstimate if _is_rate(key, parent) else _Estimate).model_validate(value)
                    except ValidationError as exc:
                        err = exc.errors()[0]
                        loc = [str(x) for x in err["loc"] if not str(x).startswith(("function-", "union["))]
                        raise _problem(f"{at}{key}" + "".join("." + x for x in loc), err, path) from None
                else:
                    if _COUNT_KEY.fullmatch(key):
                        for k, v in value.items():
                            if isinstance(v, int):
                                _count(v, f"{at}{key}.{k}", path)
                    stack.append((value, f"{at}{key}.", key))
            elif isinstance(value, int) and _COUNT_KEY.fullmatch(key):
                _count(value, f"{at}{key}", path)


def _count(value: Any, field: str, path: str) -> None:
    try:
        _COUNT.validate_python(value)
    except ValidationError as exc:
        raise _problem(field, exc.errors()[0], path) from None


def check_results(doc: Any, path: str) -> dict:
    """``doc`` (a parsed ``results.json``, ``path`` names it in messages) when it has the shape
    every reader relies on: an object with an object ``metrics`` of objects, each with a list of
    slice objects (``slice`` text), an object or null ``config`` and ``summary`` with typed fields,
    numbers in every estimate.

    Raises:
        RunFileError: one line naming ``path`` and the first field that is wrong."""
    if not isinstance(doc, dict) or not isinstance(doc.get("metrics"), dict):
        raise RunFileError(f"{path} is not a fair_forge_beam results.json (no 'metrics' object)")
    _check(_Results, doc, path)
    for name, m in doc["metrics"].items():
        for i, rec in enumerate(m.get("slices") or []):
            _estimates(name, rec, f"metrics.{name}.slices.{i}.", path)
        if isinstance(m.get("common"), dict):
            _estimates(name, m["common"], f"metrics.{name}.common.", path)
    return doc


def check_run_info(doc: Any, path: str) -> dict:
    """``doc`` (a parsed ``run_info.json``) when it is an object whose known fields have their types.

    Raises:
        RunFileError: one line naming ``path`` and the field."""
    if not isinstance(doc, dict):
        raise RunFileError(f"{path}: holds {json_kind(doc)} where an object is needed (a damaged or edited run file)")
    _check(_RunInfo, doc, path)
    return doc


def check_manifest(doc: Any, path: str) -> Any:
    """``doc`` (a parsed ``stats/manifest.json``) when the fields the roll-up reads have their types
    (a missing ``config`` / ``options`` and the run ids are the roll-up's own checks); a document
    that is not an object is left to the roll-up's message.

    Raises:
        RunFileError: one line naming ``path`` and the field."""
    if isinstance(doc, dict):
        _check(_Manifest, doc, path)
    return doc
