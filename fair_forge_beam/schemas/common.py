"""Common data schemas, field-compatible with the original library (spec §1).

The original's JSON datasets load unchanged: field names and defaults are kept
(``qa_id``, ``assistant``, ``ground_truth_assistant``, ``weight``, ``agentic``, ...).
Differences, all on the side of safety:

* ``ground_truth_assistant`` is optional (the original requires it although its docs say
  otherwise, spec §1.1).
* ``weight`` must be finite and ``>= 0``: ``NaN``, ``Infinity`` and negative weights are
  rejected with a message naming the field (case-003).
* ``turn_index`` (an extension) is an integer from 0 to 2**63-1 (:data:`INT64_MAX`), never ``true`` or
  text, as every integer field read from outside (:func:`bounded_int`).
* ``language`` is normalised to one canonical lower-case English name (``en``, ``English``,
  ``english`` -> ``english``); an unknown language is kept as given (lower-cased) and can be
  reported, never a crash (see :func:`normalize_language`).
"""
from __future__ import annotations

import enum
import math
import numbers
import sys
from typing import Annotated, Any, Optional

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictInt, ValidationInfo,
                      field_validator, model_serializer)

from fair_forge_beam.blank import is_blank
from fair_forge_beam.schemas.languages import normalize_language
from fair_forge_beam.quoting import quoted

__all__ = [
    "Batch",
    "Dataset",
    "SessionMetadata",
    "StreamedBatch",
    "IterationLevel",
    "MASK_CONTEXT",
    "Logprobs",
    "BaseMetric",
    "InteractionMetric",
    "JudgedSessionMetric",
    "JudgedSliceMetric",
    "Estimate",
    "id_text",
    "INT64_MAX",
    "bounded_int",
    "TurnIndex",
]


#: the largest integer read from outside: what an int64 Arrow or Parquet column and a C long hold
#: (2**63 - 1). Every integer field of an input record, of a generator's or a judge's reply and of a
#: run file read back is bounded by it where it is validated (:func:`bounded_int`), so a larger value
#: is a dead letter naming the field and the bound, never an ``OverflowError`` in a writer (trial49b B1:
#: a turn_index of 10**30 crashed the audit's stats table)
INT64_MAX = 2**63 - 1


def _is_flag(v: Any) -> bool:
    """``v`` is a truth value: Python's ``bool`` or numpy's (``numpy.bool_``, no ``bool`` subclass)."""
    return isinstance(v, bool) or (type(v).__module__ == "numpy" and type(v).__name__ in ("bool", "bool_"))


def _numpy_number(v: Any) -> Any:
    # a numpy integer or float scalar (a pandas or Parquet column's value, a retriever's) as the Python
    # number it holds, so it is bounded and worded as any: numpy.uint64(2**64-1) is over 2**63-1, not
    # pydantic's "exceeded maximum size"; StrictInt took no numpy integer at all (fix50b)
    if type(v).__module__ == "numpy" and isinstance(v, numbers.Number) and not _is_flag(v):
        return v.item()
    return v


def _no_flag_or_text(v: Any) -> Any:
    # an integer field is read strictly, as ``weight`` is: ``true`` is not 1, ``"2"`` is not 2 (trial49b L),
    # numpy.bool_(True) is not 1 either (fix50b: StreamedBatch took it as turn_index 1);
    # a whole float (a Parquet or pandas integer column with a missing value is float64) is its int
    if _is_flag(v):
        raise ValueError(f"must be an integer, not {'true' if v else 'false'}")
    if isinstance(v, str):
        raise ValueError(f"must be an integer, not the text {quoted(v, 40)}")
    v = _numpy_number(v)
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        return int(v)  # its int, bounded as any (1e30 is over the bound, not "too many digits")
    return v


def _at_most(maximum: int):
    bound = f"2**63-1 ({INT64_MAX}: what an int64 column holds)" if maximum == INT64_MAX else f"{maximum:,}"

    def check(v: int) -> int:
        if v > maximum:
            raise ValueError(f"{quoted(v, 60)} is over the largest value read, {bound}")
        return v
    return check


def bounded_int(minimum: Optional[int] = 0, maximum: int = INT64_MAX, strict: bool = False):
    """The type of an integer field read from outside (one for all: a record's ``turn_index``, a
    generator's ``turn_number``, a run file's counts): an ``int`` from ``minimum`` (``None``: no
    lower bound) to ``maximum`` (at most :data:`INT64_MAX`), never ``true``/``false`` or text (``"2"``),
    as ``weight`` refuses them; a whole float is its int (``2.0``: a float64 column's), unless
    ``strict`` (a model validated in pydantic's strict mode: no float either). numpy's scalars are read
    as the Python numbers they hold (``numpy.int64(3)`` is 3, ``numpy.bool_(True)`` is ``true``, refused
    as it). A larger value is a
    validation error in the project's words naming the bound (``… is over the largest value read,
    2**63-1 …``), so the field's reader dead-letters the record."""
    if maximum > INT64_MAX:
        raise ValueError(f"maximum {maximum} is over INT64_MAX: no int64 column holds it")
    lower = Field() if minimum is None else Field(ge=minimum)
    if strict:
        return Annotated[StrictInt, BeforeValidator(_numpy_number), lower, AfterValidator(_at_most(maximum))]
    return Annotated[int, BeforeValidator(_no_flag_or_text), lower, AfterValidator(_at_most(maximum))]


#: a turn's position in its conversation as a record declares it (``StreamedBatch.turn_index``, a flat
#: record's or Parquet row's): 0 to 2**63-1
TurnIndex = bounded_int(0)


class IterationLevel(str, enum.Enum):
    """How a :class:`~fair_forge_beam.io.retriever.Retriever` yields its data (spec §2)."""

    FULL_DATASET = "full_dataset"
    STREAM_SESSIONS = "stream_sessions"
    STREAM_BATCHES = "stream_batches"


class Batch(BaseModel):
    """One interaction: a user query and the assistant's answer (spec §1.1)."""

    model_config = ConfigDict(extra="ignore")

    qa_id: str
    query: str
    assistant: str
    ground_truth_assistant: Optional[str] = None
    observation: Optional[str] = None
    agentic: Optional[dict[str, Any]] = Field(default_factory=dict)
    ground_truth_agentic: Optional[dict[str, Any]] = Field(default_factory=dict)
    logprobs: Optional[dict[str, Any]] = Field(default_factory=dict)
    weight: Optional[float] = None
    #: expected PII spans of the text the privacy metric scans (gaussia 1.2.0's ``PrivacyBatch.spans``):
    #: ``{"label", "start", "end", "text"?, "score"?}`` with character offsets ``[start, end)``;
    #: validated by :mod:`fair_forge_beam.metrics.privacy` (a bad span dead-letters its interaction)
    spans: Optional[list[dict[str, Any]]] = None

    @field_validator("qa_id", mode="before")
    @classmethod
    def _qa_id_to_str(cls, v: Any) -> Any:
        # Upstream files sometimes carry integer ids, pandas / Parquet exports whole floats: text (id_text)
        return id_text(v)

    @field_validator("weight", mode="before")
    @classmethod
    def _weight_is_a_number(cls, v: Any) -> Any:
        if _is_flag(v) or isinstance(v, str):  # numpy.bool_(True) is no 1.0 either (fix50b)
            raise ValueError(f"weight must be a number, got {'bool' if _is_flag(v) else 'str'} {quoted(bool(v) if _is_flag(v) else v)}")
        v = _numpy_number(v)
        if isinstance(v, int) and abs(v) > sys.float_info.max:
            # beyond a float (10**400): said as the bound it breaks, not "should be a number, not a number"
            raise ValueError(f"weight must be a finite number >= 0, got {quoted(v, 60)}")
        return v

    @field_validator("weight")
    @classmethod
    def _finite_nonnegative_weight(cls, v: Optional[float]) -> Optional[float]:
        if v is None:
            return v
        if not math.isfinite(v):
            raise ValueError(f"weight must be a finite number >= 0, got {quoted(v)}")
        if v < 0:
            raise ValueError(f"weight must be >= 0, got {quoted(v)}")
        return v


#: the largest magnitude up to which every integer is a float: a whole float id at most this is the int's text
EXACT_INT = 2 ** 53


def id_text(v: Any) -> Any:
    """An id (``session_id``, ``assistant_id``, ``qa_id``) as the reader keeps it, as text: a string
    as it is; an int as its decimal digits (``3`` → ``"3"``); a float that is a whole number at most
    2**53 in magnitude as the int it equals (``3.0`` → ``"3"``, ``-0.0`` → ``"0"``: a pandas or
    Parquet integer column with a missing value is float64, and its ids are the same ids as the
    ints, as metadata slices read them, docs/data.md). Any other float raises ``ValueError`` saying
    how to fix the record (a NaN: the column's missing value; ``2.5``: not a whole number; beyond
    2**53: a float holds no exact integer there); any other value is returned for the schema to
    name its type (trial38 T12). ``None`` (null) raises too, saying the record needs its id."""
    if isinstance(v, str):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    if v is None:  # a Parquet / pandas column's missing value is null more often than NaN
        raise ValueError("is null, not an id: give every record its id (a missing value of its column: fill it, "
                         "or drop the record)")
    if isinstance(v, float):
        if math.isfinite(v) and v.is_integer() and abs(v) <= EXACT_INT:
            return str(int(v))
        if math.isnan(v):
            raise ValueError("is NaN, not an id: the missing value of a float column (pandas writes an integer column "
                             "with a missing value as float64): give every record its id, or write the column as "
                             "text or as a nullable integer (pandas: .astype('Int64'))")
        if not math.isfinite(v):
            raise ValueError(f"is {v!r}, not an id: write the id as text")
        if not v.is_integer():
            raise ValueError(f"is the number {v!r}, not a whole number: a number is read as an id only when whole "
                             f"(3 or 3.0 is '3'); write this id as text ({str(v)!r})")
        raise ValueError(f"is the float {v!r}, beyond 2**53, where a float holds no exact integer: write the id as "
                         "text or as an integer")
    return v


#: the validation context key of the record-id masker (:func:`fair_forge_beam.io.secrets.id_masker`):
#: a field that is normalised (``language``: stripped, lower-cased, aliases resolved) is masked as
#: given, before it is normalised — ``model_validate(data, context={MASK_CONTEXT: mask})``
MASK_CONTEXT = "mask_id"


class _SessionHeader(BaseModel):
    model_config = ConfigDict(extra="ignore")

    session_id: str
    assistant_id: str
    language: Optional[str] = "english"
    context: str = ""
    #: the role the assistant must keep (gaussia 1.2.0's ``Dataset.chatbot_role``; metric role_adherence)
    chatbot_role: Optional[str] = None

    @field_validator("session_id", "assistant_id", mode="before")
    @classmethod
    def _id_to_str(cls, v: Any) -> Any:
        return id_text(v)

    @field_validator("session_id", "assistant_id")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        if is_blank(v):
            raise ValueError("must be a non-empty string")
        return v

    @field_validator("language", mode="before")
    @classmethod
    def _normalise_language(cls, v: Any, info: ValidationInfo) -> Any:
        if v is None:
            return "english"
        if not isinstance(v, str):
            raise ValueError(f"language must be a string, got {type(v).__name__}")
        # masked as given, then normalised (lower-cased first, a key with capitals escaped masking)
        mask = (info.context or {}).get(MASK_CONTEXT) if isinstance(info.context, dict) else None
        return normalize_language(mask(v) if mask is not None else v)

    @field_validator("context", mode="before")
    @classmethod
    def _none_context(cls, v: Any) -> Any:
        return "" if v is None else v


class SessionMetadata(_SessionHeader):
    """Session header carried by every streamed interaction (spec §1.3)."""


class Dataset(_SessionHeader):
    """One session: a conversation between a user and one assistant (spec §1.2)."""

    conversation: list[Batch]


class StreamedBatch(BaseModel):
    """One interaction plus its session header (spec §1.3).

    ``turn_index`` is an extension: when given it fixes the interaction's position in its
    conversation; otherwise the position comes from the order of the source (see
    :mod:`fair_forge_beam.io.read`).
    """

    model_config = ConfigDict(extra="ignore")

    metadata: SessionMetadata
    batch: Batch
    turn_index: Optional[TurnIndex] = None


class Logprobs(BaseModel):
    """Token log-probabilities (defined upstream, unused by any metric)."""

    tokens: list[str] = Field(default_factory=list)
    token_logprobs: list[float] = Field(default_factory=list)


class BaseMetric(BaseModel):
    """Base of every metric output: the session it belongs to (spec §1.4)."""

    session_id: str
    assistant_id: str


class InteractionMetric(BaseMetric):
    """Base of a metric's per-interaction record: the session, then the interaction's ``qa_id``,
    ``element_id`` (the reader's stable id), ``turn_index`` (0-based) and ``language``; unknown
    fields are ignored."""

    model_config = ConfigDict(extra="ignore")

    qa_id: str
    element_id: str = ""
    turn_index: int = 0
    language: str = "english"


class JudgedSessionMetric(BaseMetric):
    """Base of a judge metric's session record: the session, its ``language``, the interactions
    scored (``n_interactions``) and ``n_failed`` (interactions whose judgement failed: they are in
    the dead letter); unknown fields are ignored."""

    model_config = ConfigDict(extra="ignore")

    language: str = "english"
    n_interactions: int
    n_failed: int = 0


class JudgedSliceMetric(BaseModel):
    """Base of a judge metric's slice record: ``slice`` (``overall``, ``assistant_id=<id>``,
    ``language=<name>``), ``mode``, the interactions and sessions scored, and ``n_failed``
    (interactions whose judgement failed: they are in the dead letter); unknown fields are
    ignored."""

    model_config = ConfigDict(extra="ignore")

    slice: str
    mode: str
    n_interactions: int
    n_sessions: int
    n_failed: int = 0


class Estimate(BaseModel):
    """One estimate of a statistic over ``n`` units.

    Frequentist: ``mean`` is the point estimate and the interval is ``None``. Bayesian:
    ``mean`` is the posterior (or Bayesian-bootstrap) mean and ``[ci_low, ci_high]`` the
    equal-tailed credible interval at the mode's ``ci_level``. ``mean is None`` marks "no
    data" (n = 0), never a fake 0.
    """

    model_config = ConfigDict(extra="forbid")

    mean: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    n: int = 0
    #: the sessions behind this estimate when fewer than its slice's ``n_sessions`` (an estimate
    #: resting on part of the slice's evidence: Toxicity's DR/DTO/ASB/DIDT on the sessions whose
    #: answers name a group, Humanity's Spearman on those with a reference, Agentic's task curve on
    #: the conversations with a task id, PromptEvaluator's RSS and JQ on those with a reference;
    #: see each metric's ``Evidence``); ``None`` (left out of
    #: the record): the slice's. The one-session rule reads it (statistical/slices.py); results.json
    #: and the JSON records only, not the Parquet columns (whose schemas stay as they were)
    n_sessions: Optional[int] = Field(default=None, json_schema_extra={"arrow": False})

    @model_serializer(mode="wrap")
    def _without_slice_sessions(self, handler):
        out = handler(self)
        if isinstance(out, dict) and out.get("n_sessions", 0) is None:
            del out["n_sessions"]  # the slice's count: the record stays as before (docs/statistics.md)
        return out
