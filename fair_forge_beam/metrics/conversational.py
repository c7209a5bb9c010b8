"""Conversational: dialogue quality on seven dimensions judged by an LLM (spec §6.4).

Dimensions (judge scale 0–10, not normalised): memory, language (the answer is in the session's
``language``), the four Gricean maxims (quality, quantity, relation, manner) and sensibleness;
the judge's ``insight`` is kept (upstream drops it, spec §17 item 14).

History, and how it differs from upstream: upstream's judge keeps its own earlier *verdicts*
as chat history, so the calls of a session must run one after the other and each depends on
the previous answers of the judge. Here every request carries the **earlier turns of the
conversation itself** (question and answer pairs, oldest first) inside the case text. The
turns are gathered by grouping the session and sorting by ``turn_index`` (fixed at read time),
never by arrival order; so all requests of a session are independent — issued concurrently and
cached one by one — and a turn's verdict does not depend on the judge's earlier outputs. This
applies to every iteration level (upstream switches history off for streamed batches; here
streamed records get their turn order at read time, so history is available).

Per session: each dimension's weighted mean with the spec §3.4 weight rules (frequentist:
§3.5 exactly; Bayesian: Bayesian bootstrap over the session's turns with one set of Dirichlet
weights shared by the seven dimensions, instead of upstream's independent resampling per
dimension). Slices as :mod:`fair_forge_beam.metrics.context`. Failed judgements go to the dead
letter (stage ``"conversational"``), are excluded from the means and counted in ``n_failed``.
"""
from __future__ import annotations

import json
import typing
from typing import Any, Mapping, Optional, Sequence

from fair_forge_beam._beam import beam
from fair_forge_beam.components.judge.prompts_quality import conversational_messages
from fair_forge_beam.io.elements import Interaction
from fair_forge_beam.engine import session_key_of
from fair_forge_beam.metrics.judged import JudgedMetric, request_key
from fair_forge_beam.slices import SLICE_DIMENSIONS
from fair_forge_beam.schemas.metric_info import EstimateInfo, MetricInfo, ParquetColumns, SessionHistogram
from fair_forge_beam.schemas.conversational import (
    DIMENSIONS,
    RESULT_FIELDS,
    ConversationalInteraction,
    ConversationalJudgeOutput,
    ConversationalMetric,
    ConversationalSliceMetric,
)
from fair_forge_beam.statistical.base import StatisticalMode

__all__ = ["Conversational", "session_requests"]

REQUESTS = "requests"


def _turn(x: Interaction):
    """Compact turn: (turn_index, element_id, qa_id, weight, query, answer, reference, observation)."""
    return session_key_of(x), (
        x.turn_index, x.element_id, x.qa_id, x.weight, x.query, x.assistant, x.ground_truth_assistant, x.observation,
    )


def _order(t):
    return (t[0], t[1], t[2], t[4] or "", t[5] or "", t[6] or "", t[7] or "", t[3] is None, t[3] or 0.0)


def session_requests(skey: str, turns: Sequence[tuple], chat_history: bool = True, max_history_turns: Optional[int] = None):
    """Judge requests and metas of one session.

    ``turns``: compact turns (see ``_turn``) in any order. They are sorted by ``turn_index``
    (ties broken by content); the history of a turn is every turn with a *smaller*
    ``turn_index`` (the last ``max_history_turns`` of them when set; none when
    ``chat_history`` is False). Returns a list of ``(JudgeRequest, (skey, meta))``."""
    from fair_forge_beam.components.judge.handler import judge_request

    language = json.loads(skey)[2]
    items = sorted(turns, key=_order)
    out = []
    earlier: list[tuple] = []
    i = 0
    while i < len(items):
        j = i
        while j < len(items) and items[j][0] == items[i][0]:
            j += 1
        if not chat_history:
            history = []
        elif max_history_turns is not None:
            history = earlier[-max_history_turns:] if max_history_turns > 0 else []
        else:
            history = earlier
        first = len(earlier) - len(history) + 1
        for t in items[i:j]:
            turn_index, element_id, qa_id, weight, query, answer, reference, observation = t
            messages = conversational_messages(
                language, [(h[4], h[5]) for h in history], query, answer, reference, observation, first_turn=first
            )
            key = request_key(skey, turn_index, messages)
            req = judge_request(key, messages, schema=ConversationalJudgeOutput, element_id=element_id)
            out.append((req, (skey, (key, turn_index, element_id, qa_id, weight, {"history_turns": len(history)}))))
        earlier = earlier + list(items[i:j])
        i = j
    return out


class Conversational(JudgedMetric):
    """``PCollection[Interaction]`` → Conversational results.

    Args:
        judge: an :class:`~fair_forge_beam.components.judge.OpenAIJudgeHandler`, or a mapping of
            its arguments. Required (``ValueError`` otherwise).
        statistical_mode: :class:`FrequentistMode` (default) or :class:`BayesianMode`.
        slices: any of ``"overall"``, ``"assistant_id"``, ``"language"``, or the name of a session
            metadata field (e.g. ``"region"``: its values come from ``Interaction.slice_values``, see
            ``ReadInteractions(slice_fields=…)``; ``ValueError`` for a name that cannot be one).
        chat_history: show the judge the earlier turns of the conversation (default True).
        max_history_turns: show at most this many earlier turns (None = all; bounds the prompt
            size of long sessions, whose total prompt length is otherwise quadratic in turns).
        max_units: hash buckets of sessions for the slice-level Bayesian bootstrap.
        inference_args: extra sampling parameters for every judge call (part of the cache key).

    Returns (``expand``): dict of PCollections ``interactions`` (:class:`ConversationalInteraction`
    dicts; scores ∈ [0, 10]), ``sessions`` (:class:`ConversationalMetric`), ``slices``
    (:class:`ConversationalSliceMetric`), ``dead_letter`` and ``quality``.

    Raises ``ValueError`` for a missing judge or a negative ``max_history_turns``.
    """

    name = "conversational"
    reads = frozenset({"query", "assistant", "ground_truth_assistant", "observation"})  # of the turn and its history
    info = MetricInfo(
        name="conversational",
        # the judge's seven 0–10 scores (spec §6.4): higher is better
        estimates=tuple(EstimateInfo(f, f[len("conversational_"):].replace("_", " ") + " (judge, 0–10)",
                                     unit="judge score (0–10)", value_range=(0.0, 10.0), direction=+1, gate=f,
                                     headline=True) for f in RESULT_FIELDS),
        parquet=(ParquetColumns("fair_forge_beam.schemas.conversational:ConversationalInteraction",
                                (*RESULT_FIELDS, "insight", "reasoning", "history_turns")),),
        # fine bins: the box plots read quartiles to 0.01 on 0–10
        session_histograms=tuple(SessionHistogram(f, f"{f}.mean", (0, 10), 1000) for f in RESULT_FIELDS),
        plot="plot_conversational",
    )
    interaction_schema = ConversationalInteraction
    session_schema = ConversationalMetric
    slice_schema = ConversationalSliceMetric
    judge_schema = ConversationalJudgeOutput
    score_fields = DIMENSIONS

    def __init__(
        self,
        judge: Any = None,
        statistical_mode: Optional[StatisticalMode] = None,
        slices: Sequence[str] = SLICE_DIMENSIONS,
        chat_history: bool = True,
        max_history_turns: Optional[int] = None,
        max_units: int = 1024,
        inference_args: Optional[Mapping[str, Any]] = None,
    ):
        super().__init__(judge, statistical_mode, slices, max_units, inference_args)
        if max_history_turns is not None and int(max_history_turns) < 0:
            raise ValueError("max_history_turns must be >= 0 (or None for all earlier turns)")
        self.chat_history = bool(chat_history)
        self.max_history_turns = None if max_history_turns is None else int(max_history_turns)

    def make_requests(self, interactions):
        from fair_forge_beam.components.judge.handler import JudgeRequest

        chat_history, max_turns = self.chat_history, self.max_history_turns
        pairs = (
            interactions
            | "KeyBySession" >> beam.Map(_turn).with_output_types(typing.Tuple[str, typing.Tuple[typing.Any, ...]])
            | "GroupSessions" >> beam.CombinePerKey(beam.combiners.ToListCombineFn())
            | "BuildRequests" >> beam.FlatMap(lambda kv: session_requests(kv[0], kv[1], chat_history, max_turns))
        )
        requests = pairs | "Requests" >> beam.Map(lambda p: p[0]).with_output_types(JudgeRequest)
        metas = pairs | "Metas" >> beam.Map(lambda p: p[1]).with_output_types(typing.Tuple[str, typing.Any])
        return requests, metas, None

    @staticmethod
    def interaction_record(scores: tuple, insight: str, reasoning: Optional[str], extra: dict) -> dict:
        rec = dict(zip(RESULT_FIELDS, scores))
        rec.update(insight=insight, reasoning=reasoning, history_turns=int(extra.get("history_turns", 0)))
        return rec

    @staticmethod
    def session_fields(estimates: list) -> dict:
        return {f: e.model_dump() for f, e in zip(RESULT_FIELDS, estimates)}

    @staticmethod
    def slice_fields(estimates: list) -> dict:
        return dict(zip(RESULT_FIELDS, estimates))
