"""Context: does each answer stay within the assistant's context? (spec §6.3).

Per interaction, one LLM-judge call (:class:`~fair_forge_beam.components.judge.RunJudge`) with
the prompt of :mod:`~fair_forge_beam.components.judge.prompts_quality`: the session's
``context``, the question, the answer, the **real reference answer** (``ground_truth_assistant``;
upstream shows the answer itself there, spec §17 item 1) and, when present, the
``observation``. The answer is validated against :class:`ContextJudgeOutput` (``score`` ∈
[0, 1], ``insight``).

Per session: weighted mean of the scores with the spec §3.4 weight rules (frequentist: exactly
§3.5 via the §18.2 sufficient statistics; Bayesian: Bayesian bootstrap over the session's
interactions — Rubin 1981, Dirichlet(1,…,1) weights keyed by turn, percentile interval — in
place of upstream's multinomial resampling). Per slice (overall / assistant / language): the
mean of session means weighted by scored interactions, Bayesian bootstrap over sessions.

An interaction whose session has no context, or with no question (missing, ``""`` or only invisible
characters: :func:`~fair_forge_beam.blank.is_blank`), is a dead letter (stage ``"context"``, reason
``context is blank …`` / ``query is blank …``) before any judge call: there is nothing to judge it
against (``requires``).

Failed judgements (HTTP errors after retries, answers that never validate) go to the dead
letter (stage ``"context"``, reason and raw text), are excluded from every mean and counted in
``n_failed``.
"""
from __future__ import annotations

import typing
from typing import Optional

from fair_forge_beam._beam import beam
from fair_forge_beam.components.judge.prompts_quality import context_messages
from fair_forge_beam.io.elements import Interaction
from fair_forge_beam.engine import session_key_of
from fair_forge_beam.metrics.judged import JudgedMetric, request_key
from fair_forge_beam.schemas.metric_info import EstimateInfo, MetricInfo, ParquetColumns, SessionHistogram
from fair_forge_beam.schemas.context import ContextInteraction, ContextJudgeOutput, ContextMetric, ContextSliceMetric

__all__ = ["Context"]


def _request_and_meta(x: Interaction):
    from fair_forge_beam.components.judge.handler import judge_request

    skey = session_key_of(x)
    messages = context_messages(x.context, x.query, x.assistant, x.ground_truth_assistant, x.observation)
    key = request_key(skey, x.turn_index, messages)
    req = judge_request(key, messages, schema=ContextJudgeOutput, element_id=x.element_id)
    return req, (skey, (key, x.turn_index, x.element_id, x.qa_id, x.weight, {}))


class Context(JudgedMetric):
    """``PCollection[Interaction]`` → Context results.

    Args:
        judge: an :class:`~fair_forge_beam.components.judge.OpenAIJudgeHandler`, or a mapping of
            its arguments (``{"model": ..., "base_url": ..., "cache_path": ...}``). Required
            (``ValueError`` otherwise, before any pipeline is built).
        statistical_mode: :class:`FrequentistMode` (default) or :class:`BayesianMode`.
        slices: any of ``"overall"``, ``"assistant_id"``, ``"language"``, or the name of a session
            metadata field (e.g. ``"region"``: its values come from ``Interaction.slice_values``, see
            ``ReadInteractions(slice_fields=…)``; ``ValueError`` for a name that cannot be one).
        max_units: hash buckets of sessions for the slice-level Bayesian bootstrap (default 1024).
        inference_args: extra sampling parameters for every judge call (part of the cache key).

    Returns (``expand``): dict of PCollections ``interactions`` (dicts shaped as
    :class:`ContextInteraction`, ``context_awareness`` ∈ [0, 1]), ``sessions``
    (:class:`ContextMetric`), ``slices`` (:class:`ContextSliceMetric`), ``dead_letter`` (failed
    judgements) and ``quality``.

    ``Context.run(MyRetriever, judge=..., statistical_mode=...)`` returns one
    :class:`ContextMetric` per session with its interactions (as upstream).
    """

    name = "context"
    reads = frozenset({"context", "query", "assistant", "ground_truth_assistant", "observation"})
    #: an interaction of a session without a context, or without a question (blank: blank.is_blank),
    #: is a dead letter naming the field, never judged (issue 29 T13: context "" or "\u200b" was judged
    #: and scored; trial30 T7: a query "\u2060" was). A blank answer is judged (it is what is scored:
    #: the reader's empty_answer warning says so)
    requires = (("context", "the session's context to judge the answer against"),
                ("query", "the question the answer replies to"))
    info = MetricInfo(
        name="context",
        estimates=(
            EstimateInfo("context_awareness", "context awareness",
                         "judge's 0–1 score of how well the answer uses the given context (spec §6.3)",
                         unit="judge score (0–1)", direction=+1, reference=(">=", 0.5), gate="context_awareness",
                         headline=True),
        ),
        parquet=(ParquetColumns("fair_forge_beam.schemas.context:ContextInteraction",
                                ("context_awareness", "insight", "reasoning")),),
        session_histograms=(SessionHistogram("context awareness", "context_awareness"),),
        plot="plot_context",
    )
    interaction_schema = ContextInteraction
    session_schema = ContextMetric
    slice_schema = ContextSliceMetric
    judge_schema = ContextJudgeOutput
    score_fields = ("score",)

    def make_requests(self, interactions):
        from fair_forge_beam.components.judge.handler import JudgeRequest

        pairs = interactions | "BuildRequests" >> beam.Map(_request_and_meta)
        requests = pairs | "Requests" >> beam.Map(lambda p: p[0]).with_output_types(JudgeRequest)
        metas = pairs | "Metas" >> beam.Map(lambda p: p[1]).with_output_types(typing.Tuple[str, typing.Any])
        return requests, metas, None

    @staticmethod
    def interaction_record(scores: tuple, insight: str, reasoning: Optional[str], extra: dict) -> dict:
        return {"context_awareness": scores[0], "insight": insight, "reasoning": reasoning}

    @staticmethod
    def session_fields(estimates: list) -> dict:
        (e,) = estimates
        return {
            "context_awareness": e.mean,
            "context_awareness_ci_low": e.ci_low,
            "context_awareness_ci_high": e.ci_high,
            "estimate": e.model_dump(),
        }

    @staticmethod
    def slice_fields(estimates: list) -> dict:
        (e,) = estimates
        return {"context_awareness": e}
