"""What the LLM-judged metrics share: the one judge scorer (:class:`JudgeScorer`, used by every
metric that asks a judge through ``RunJudge``) and, for the judge's mean scores per session
(Context, Conversational), the whole engine declaration (:class:`JudgedMetric`).

Declared for :class:`~fair_forge_beam.engine.Engine` (:meth:`JudgedMetric.spec`): the scorer
is a ``PTransform`` — the metric's judge requests (``make_requests``) → ``RunJudge``
(``RunInference`` with the judge's model handler) → validated scores; each request's meta and
each verdict reach the engine's per-session combine, where the session reducer joins them:
interaction records, the session record (weighted mean, spec §3.4/§3.5/§18.2; Bayesian
bootstrap in Bayesian mode) and the session's slice unit; slices: bootstrap mean of session
means plus the failed count, then the slice estimator.

A request key is ``"<session key>#<turn index>#<digest of the messages>"``: results find their
session without a second join, and two records of the same turn with the same prompt share a
verdict. An interaction whose judgement failed (HTTP error after retries, answer that never
validates) has no result: it is in the dead letter with the judge's reason and raw text, it is
left out of every mean and counted in ``n_failed`` of its session and slices — never scored 0.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, ClassVar, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from fair_forge_beam._beam import beam
from fair_forge_beam.components.judge.arguments import inference_arguments
from fair_forge_beam.io.elements import DeadLetter, QualityWarning, dead_letter
from fair_forge_beam.engine import (
    DEAD, QUALITY, MetricSpec, SessionPart, SessionReducer, SliceEstimator, part_value, repeated_turns, session_key_text,
)
from fair_forge_beam.metrics.base import MetricResults, MetricTransform, nest_session_interactions
from fair_forge_beam.slices import SLICE_DIMENSIONS
from fair_forge_beam.schemas.common import Estimate
from fair_forge_beam.statistical.base import StatisticalMode
from fair_forge_beam.statistical.slices import bootstrap_resampling, slice_bootstrap_means
from fair_forge_beam.statistical.combiners import (BootstrapMeanCombineFn, CollectCombineFn, WithFailedCount,
                                                   session_mean_and_point_estimates)
from fair_forge_beam.plain import plain_reason
from fair_forge_beam.arguments import checks_arguments

__all__ = ["JudgedMetric", "JudgeScorer", "build_judge", "request_key", "require_text", "history_cut_warning", "META",
           "QUALITY"]

META = "meta"


def request_key(skey: str, turn_index: int, messages: Sequence[tuple[str, str]]) -> str:
    """``"<session key>#<turn index>#<16 hex digits of BLAKE2b(messages)>"``."""
    digest = hashlib.blake2b(json.dumps([list(m) for m in messages], ensure_ascii=False).encode("utf-8"), digest_size=8)
    return f"{skey}#{int(turn_index)}#{digest.hexdigest()}"


def session_of_key(key: str) -> str:
    """The session key of a request key (inverse of :func:`request_key`)."""
    return key.rsplit("#", 2)[0]


def build_judge(judge: Any, schema: type):
    """An ``OpenAIJudgeHandler`` from ``judge``: a handler (returned as is) or a mapping of its
    constructor arguments (``model`` required; ``output_schema`` defaults to ``schema``).

    Raises ``ValueError`` when ``judge`` is None or of another type, and for a mapping with a key the
    handler does not take (naming the nearest that it does), a missing or blank model, a value of the
    wrong type (``{"request_timeout": "sk-live-…"}``: naming the key and what it expects) or one the
    handler refuses — one line, never showing a value: it may be a secret
    (:mod:`fair_forge_beam.components.judge.arguments`; fix38a: a raw TypeError / ValueError of
    Python's, which quoted the value). Configuration errors fail before the pipeline starts."""
    from fair_forge_beam.components.judge.arguments import check_keys, check_values, construct, keyword_annotations
    from fair_forge_beam.components.judge.handler import OpenAIJudgeHandler
    from fair_forge_beam.blank import is_blank

    if judge is None:
        raise ValueError(
            "this metric needs an LLM judge: pass judge=OpenAIJudgeHandler(model, base_url=...) or "
            "judge={'model': ..., 'base_url': ...} (any OpenAI-compatible endpoint)"
        )
    if isinstance(judge, OpenAIJudgeHandler):
        return judge
    if isinstance(judge, Mapping):
        kwargs = dict(judge)
        takes = keyword_annotations(OpenAIJudgeHandler.__init__)
        check_keys("judge mapping", kwargs, takes, "OpenAIJudgeHandler")
        if not isinstance(kwargs.get("model"), str) or is_blank(kwargs["model"]):
            raise ValueError("a judge mapping needs a model name, e.g. {'model': 'my-judge', 'base_url': "
                             "'http://localhost:8000/v1'}" + ("" if kwargs.get("model") is None else
                                                              f"; got a {type(kwargs['model']).__name__}"))
        kwargs.setdefault("output_schema", schema)
        check_values("judge mapping", kwargs, takes)
        return construct(OpenAIJudgeHandler, **kwargs)
    raise ValueError(f"judge must be an OpenAIJudgeHandler or a mapping of its arguments, got {type(judge).__name__}")


# ----------------------------------------------------------------------------------------------
class _Outputs(beam.DoFn):
    """Applies ``fn`` (one element → iterable of outputs): a ``DeadLetter`` goes to the dead
    letters, anything else (a score, a :class:`SessionPart`) to the main output."""

    def __init__(self, fn):
        self.fn = fn

    def process(self, element):
        for out in self.fn(element) or ():
            yield beam.pvalue.TaggedOutput(DEAD, out) if isinstance(out, DeadLetter) else out


def history_cut_warning(display: str, cut: Sequence[tuple], done: str = "judged") -> list:
    """The session's one ``history_cut`` warning (``[]`` when ``cut`` is empty): ``cut`` holds ``(turn_index, earlier
    turns left out)`` of each turn ``done`` (``"judged"``, ``"sent to the judge"``) with its oldest earlier turns left
    out for the judge's prompt limit (:func:`~fair_forge_beam.components.judge.prompts_quality.fitted_history`):
    Conversational's and Role adherence's."""
    if not cut:
        return []
    first, n_first = min(cut)
    turns = f"{len(cut):,} turn{'' if len(cut) == 1 else 's'}"
    return [QualityWarning(
        "history_cut", display,
        f"{turns} of this session {done} without their oldest earlier turns, left out to keep the prompt within "
        f"the judge's limit (--judge-max-prompt-chars): up to {max(n for _t, n in cut):,} left out of one turn; the "
        f"first: turn_index {first} ({n_first:,} left out)")]


class JudgeScorer(beam.PTransform):
    """The one judge-scoring transform, a :class:`~fair_forge_beam.engine.MetricSpec` ``scorer``:
    interactions → the metric's judge requests (prompts with their untrusted text fenced,
    :mod:`fair_forge_beam.components.judge.prompts`) → :class:`RunJudge` (``RunInference`` with the
    judge's model handler: cache, retries, strict validation against the output schema) → the
    metric's verdicts; returns ``{"scores", "dead_letter"[, "quality"][, "aux"]}``.

    Verdicts do not join their interactions here: a verdict and the interaction's meta are both
    :class:`~fair_forge_beam.engine.SessionPart`\\ s of the same session, joined by the metric's
    session reducer in the engine's one session combine.

    Args:
        handler: the judge (an ``OpenAIJudgeHandler``).
        build: ``interactions → dict`` with ``"requests"`` (``PCollection[JudgeRequest]``) and
            optionally ``"parts"`` (the interactions' own session parts: metas), ``"dead_letter"``,
            ``"quality"``, ``"aux"`` (each a PCollection or a list of them).
        verdict: ``JudgeResult`` (validated) → iterable of session parts and ``DeadLetter``\\ s (an
            answer the metric cannot use).
        failed: ``DeadLetter`` of :class:`RunJudge` (stage ``"judge"``) → iterable of dead letters
            and session parts (e.g. a failure outcome); default: the dead letter under ``stage``,
            its reason after ``reason_prefix``.
        stage: the dead letters' stage (the metric's name).
        inference_args: extra sampling parameters for every call (part of the cache key).
        label: the label prefix of the judge's steps.
    """

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, handler, build, verdict, stage: str, failed=None, inference_args=None, label: str = "Judge",
                 reason_prefix: str = "judge: "):
        super().__init__()
        self.handler, self.build, self.verdict, self.stage = handler, build, verdict, stage
        self.failed, self.inference_args, self.label, self.reason_prefix = failed, inference_args, label, reason_prefix

    def expand(self, interactions):
        from fair_forge_beam.components.judge.handler import RunJudge, restage

        built = self.build(interactions)
        lab = self.label
        judged = built["requests"] | lab >> RunJudge(self.handler, inference_args=self.inference_args, label_prefix=lab)
        verdicts = judged.results | f"{lab}Verdicts" >> beam.ParDo(_Outputs(self.verdict)).with_outputs(DEAD, main="main")
        failed_fn = self.failed or (lambda d, f=restage(self.stage, self.reason_prefix): (f(d),))
        failed = judged.dead_letters | f"{lab}Failures" >> beam.ParDo(_Outputs(failed_fn)).with_outputs(DEAD, main="main")

        def listed(name):
            v = built.get(name)
            return [] if v is None else list(v) if isinstance(v, (list, tuple)) else [v]

        out = {
            "scores": (*listed("parts"), verdicts.main, failed.main) | f"{lab}Parts" >> beam.Flatten(),
            "dead_letter": (*listed("dead_letter"), failed[DEAD], verdicts[DEAD]) | f"{lab}DeadLetters" >> beam.Flatten(),
        }
        for name in ("quality", "aux"):
            parts = listed(name)
            if parts:
                out[name] = parts[0] if len(parts) == 1 else tuple(parts) | f"{lab}Flatten_{name}" >> beam.Flatten()
        return out


def _scores_verdict(metric: str, fields: Sequence[str]):
    """A validated answer → its session's part ``(1, (request key, scores, insight, reasoning))``,
    or a dead letter when a score field is missing or not finite."""

    def verdict(res):
        parsed = res.parsed or {}
        try:
            scores = tuple(float(parsed[f]) for f in fields)
            if not all(np.isfinite(scores)):
                raise ValueError("non-finite score")
        except (KeyError, TypeError, ValueError) as exc:  # the handler validated; this is a guard
            return (dead_letter(metric, f"judge answer has no usable scores ({plain_reason(exc)})", res.raw, res.element_id, f"judge:{res.key}"),)
        insight = str(parsed.get("insight", ""))
        return (SessionPart.keyed(session_of_key(res.key), (1, (res.key, scores, insight, res.reasoning or None))),)

    return verdict


def _meta_part(kv):
    """``(session key text, meta)`` → the session's part ``(0, meta)`` (one per interaction sent
    to the judge; its verdict is ``(1, …)``, joined by the session reducer)."""
    return SessionPart.keyed(kv[0], (0, kv[1]))


class _Meta(NamedTuple):
    request_key: str
    turn_index: int
    element_id: str
    qa_id: Optional[str]
    weight: Optional[float]
    extra: dict[str, int]


class _Verdict(NamedTuple):
    request_key: str
    scores: tuple[float, ...]
    insight: str
    reasoning: Optional[str]


class SessionPartValue(NamedTuple):
    """A session part as stored (docs/scheduled.md): ``kind`` 0 with the ``meta`` of an interaction
    sent to the judge, or 1 with a validated ``verdict``."""

    kind: int
    meta: Optional[_Meta]
    verdict: Optional[_Verdict]


def encode_part(v: tuple) -> tuple:
    """A session part ``(0, meta)`` / ``(1, verdict)`` → the stored ``(kind, meta, verdict)``."""
    return (v[0], v[1], None) if v[0] == 0 else (v[0], None, v[1])


def decode_part(t: tuple) -> tuple:
    """The stored ``(kind, meta, verdict)`` → the session part (inverse of :func:`encode_part`)."""
    return (t[0], t[1] if t[0] == 0 else t[2])


def _part_order(v: tuple) -> tuple:
    # a total order of a session's parts: metas (turn, request key, element id, qa id, weight),
    # then verdicts (request key, scores, insight, reasoning); never arrival order
    kind, x = v
    if kind == 0:
        return (0, (x[1], x[0], x[2], x[3], x[4] is None, x[4] or 0.0))
    return (1, (x[0], x[1], x[2], x[3] or ""))


class _SessionReducer(SessionReducer):
    """Joins a session's metas and verdicts: interaction records, the session record, the
    session's slice unit ``(unit or None, n_failed)`` and data-quality warnings."""

    def __init__(self, metric: "JudgedMetric"):
        self.name = metric.name
        self.mode = metric.mode
        self.fields = metric.score_fields
        self.interaction_record = metric.interaction_record
        self.session_fields = metric.session_fields
        self.session_warnings = metric.session_warnings

    def setup(self):
        self._not_scored = beam.metrics.Metrics.counter(f"fair_forge_beam.{self.name}", "not_scored")
        self._scored = beam.metrics.Metrics.counter(f"fair_forge_beam.{self.name}", "scored")

    def reduce(self, key, parts):
        session_id, assistant_id, language = key
        # meta: (request key, turn_index, element_id, qa_id, weight, extra dict); parts come sorted
        metas = [x for kind, x in parts if kind == 0]
        verdicts: dict[str, tuple] = {}
        for kind, v in parts:
            if kind == 1:
                verdicts.setdefault(v[0], v)
        display = f"{session_id}/{assistant_id}"
        scored = [(m, verdicts[m[0]]) for m in metas if m[0] in verdicts]
        # a metric's warnings speak of the turns judged: a turn without a verdict (not sent, or its call failed)
        # is a dead letter, and only that (trial 10 T13: history_cut named a turn whose prompt was never sent)
        warnings = repeated_turns(key, [m[1] for m in metas]) + list(self.session_warnings(display, [m for m, _ in scored]))
        n_failed = len(metas) - len(scored)
        if n_failed:
            self._not_scored.inc(n_failed)
        if scored:
            self._scored.inc(len(scored))
        base = {"metric": self.name, "session_id": session_id, "assistant_id": assistant_id, "language": language}
        records = []
        for m, v in scored:
            rec = {**base, "level": "interaction", "element_id": m[2], "turn_index": m[1], "qa_id": m[3]}
            rec.update(self.interaction_record(v[1], v[2], v[3], m[5]))
            records.append(rec)
        m_dims = len(self.fields)
        if scored:
            scores = np.array([v[1] for _, v in scored], dtype=np.float64).reshape(len(scored), m_dims)
            weights = [m[4] for m, _ in scored]
            turns = [m[1] for m, _ in scored]
            est, point, warning = session_mean_and_point_estimates(scores, weights, turns, self.mode, f"{self.name}|within-session")
            if warning:
                warnings.append(QualityWarning("weights", display, warning))
            unit = (session_key_text(key), float(len(scored)), tuple(e.mean for e in point), len(scored))
        else:
            est = [Estimate(mean=None, n=0) for _ in range(m_dims)]
            unit = None
        rec = {**base, "level": "session", "n_interactions": len(scored), "n_failed": n_failed, **self.session_fields(est)}
        return rec, (unit, n_failed), warnings, records


class _SliceEstimator(SliceEstimator):
    def __init__(self, metric: "JudgedMetric"):
        self.name, self.mode, self.max_units = metric.name, metric.mode, metric.max_units
        self.slice_fields, self.slice_schema = metric.slice_fields, metric.slice_schema
        self.judge_model = metric.judge.model_name

    def estimate(self, key, accs, window, aux):
        st, failed = accs[1]
        # the one-session rule applied (statistical/slices.py): the session's own interval is in `sessions`
        est = slice_bootstrap_means(st, self.mode, f"{self.name}|sessions")
        resampling = bootstrap_resampling(st, self.mode)
        rec = self.slice_schema(
            slice=key,
            mode=self.mode.get_result_type(),
            n_interactions=st.n_items,
            n_sessions=accs.n_sessions,
            n_failed=int(failed),
            resampling=resampling,
            judge_model=self.judge_model,
            **self.slice_fields(est),
        )
        return [rec]


# ----------------------------------------------------------------------------------------------
class _RequireText(beam.DoFn):
    """An interaction whose every required text field holds something (:func:`~fair_forge_beam.blank.is_blank`
    false) passes; one with a blank required field is a dead letter naming the field, before any
    judge call."""

    def __init__(self, stage: str, requires: Sequence[tuple[str, str]]):
        self.stage, self.requires = stage, tuple(requires)

    def process(self, x):
        from fair_forge_beam.blank import is_blank

        for field, why in self.requires:
            if is_blank(getattr(x, field, None)):
                yield beam.pvalue.TaggedOutput(DEAD, dead_letter(
                    self.stage, f"{field} is blank (missing, empty or only invisible characters): {self.stage} needs {why}",
                    x, x.element_id))
                return
        yield x


def require_text(interactions, stage: str, requires: Sequence[tuple[str, str]], label: str = "RequireText"):
    """``(kept interactions, dead letters)``: each interaction whose text fields ``requires``
    (``(field, what the metric needs it for)`` pairs) are all non-blank by
    :func:`~fair_forge_beam.blank.is_blank` is kept; any other is one dead letter (stage ``stage``)
    whose reason names the first blank field — the judge is never asked about it."""
    out = interactions | label >> beam.ParDo(_RequireText(stage, requires)).with_outputs(DEAD, main="main")
    return out.main, out[DEAD]


class JudgedMetric(MetricTransform):
    """Base of metrics scored by an LLM judge: subclasses build the requests and map the
    validated answers to ``score_fields``; this class runs the judge, joins verdicts to their
    sessions, aggregates and slices.

    Subclass contract: ``judge_schema`` (pydantic class of the answer), ``score_fields`` (names
    of the answer's score fields, in order), ``make_requests(interactions)`` → ``(requests,
    metas, quality)`` where ``metas`` are ``(session key, (request key, turn_index, element_id,
    qa_id, weight, extra))`` and ``quality`` a PCollection of warnings or None, and the three
    record builders ``interaction_record``, ``session_fields``, ``slice_fields``.
    """

    judge_schema: ClassVar[type] = None
    score_fields: ClassVar[tuple] = ()
    #: the interaction content fields its judge prompts hold (``MetricSpec.reads``); ``None``: not declared
    reads: ClassVar[Optional[frozenset]] = None
    #: ``(field, what it is needed for)``: text fields without which there is nothing to judge; an
    #: interaction with one of them blank (:func:`~fair_forge_beam.blank.is_blank`) is a dead letter
    #: naming the field, never sent to the judge (:func:`require_text`)
    requires: ClassVar[tuple] = ()

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(
        self,
        judge: Any = None,
        statistical_mode: Optional[StatisticalMode] = None,
        slices: Sequence[str] = SLICE_DIMENSIONS,
        max_units: int = 1024,
        inference_args: Optional[Mapping[str, Any]] = None,
    ):
        super().__init__(statistical_mode, slices)
        self.judge = build_judge(judge, self.judge_schema)
        if int(max_units) < 1:
            raise ValueError("max_units must be >= 1")
        self.max_units = int(max_units)
        self.inference_args = inference_arguments(inference_args)  # checked: a secret in the wrong key is never sent

    # -- subclass hooks ------------------------------------------------------------------------
    def make_requests(self, interactions):  # pragma: no cover - abstract
        raise NotImplementedError

    @staticmethod
    def interaction_record(scores: tuple, insight: str, reasoning: Optional[str], extra: dict) -> dict:  # pragma: no cover
        raise NotImplementedError

    @staticmethod
    def session_fields(estimates: list) -> dict:  # pragma: no cover
        raise NotImplementedError

    @staticmethod
    def session_warnings(display: str, metas: Sequence[tuple]) -> list:
        """Data-quality warnings of one session from the metas of its judged turns (``display``:
        ``"session_id/assistant_id"``; ``metas``: the turns with a verdict, sorted; a turn without
        one is a dead letter, and no warning speaks of it); none by default."""
        return []

    @staticmethod
    def slice_fields(estimates: list) -> dict:  # pragma: no cover
        raise NotImplementedError

    # -- declaration ------------------------------------------------------------------------------
    def scorer(self) -> JudgeScorer:
        """The metric's judge scorer: ``make_requests`` → ``RunJudge`` → score parts."""

        def build(interactions):
            blank = None
            if self.requires:
                interactions, blank = require_text(interactions, self.name, self.requires)
            requests, metas, quality = self.make_requests(interactions)
            return {"requests": requests, "parts": metas | "MetaParts" >> beam.Map(_meta_part), "quality": quality,
                    "dead_letter": blank}

        return JudgeScorer(self.judge, build, _scores_verdict(self.name, self.score_fields), self.name,
                           inference_args=self.inference_args)

    def spec(self, windowed: bool = False) -> MetricSpec:
        """This metric's declaration for :class:`~fair_forge_beam.engine.Engine`: the judge as a
        ``PTransform`` scorer, the join of verdicts to interactions in the session reducer."""
        return MetricSpec(
            name=self.name,
            scorer=self.scorer(),
            interaction_record=None,
            session_interactions=True,
            session_value=part_value,
            session_combine=CollectCombineFn(SessionPartValue, _part_order, encode=encode_part, decode=decode_part),
            session_reducer=_SessionReducer(self),
            session_slice_combine=WithFailedCount(BootstrapMeanCombineFn(len(self.score_fields), self.max_units)),
            estimator=_SliceEstimator(self),
            slices=self.slices,
            reads=self.reads,
        )

    @classmethod
    def run(cls, retriever, verbose: bool = False, pipeline_args: Optional[Sequence[str]] = None, **kwargs) -> MetricResults:
        """Upstream-style one-shot run (see :meth:`MetricTransform.run`); ``judge=`` is required.

        Returns a :class:`MetricResults` whose list holds **one session object per session**
        (as upstream), each with its scored ``interactions`` nested, in turn order;
        ``.interactions``, ``.sessions``, ``.slices``, ``.dead_letter``, ``.quality`` as usual."""
        return nest_session_interactions(super().run(retriever, verbose=verbose, pipeline_args=pipeline_args, **kwargs))
