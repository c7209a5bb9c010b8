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

Long sessions: a turn whose prompt with its whole history would pass the judge's limit
(``max_prompt_chars``, ``--judge-max-prompt-chars``) gets its **oldest** earlier turns left out,
as few as needed, with a note saying how many; the session gets one ``history_cut`` warning (issue
28 T8: such turns were dead letters). The requests of a session are made one at a time
(:func:`iter_session_requests`, a generator), never all held at once.

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
from fair_forge_beam.components.judge.prompts_quality import NO_HISTORY, conversational_messages, fitted_history, history_sizes
from fair_forge_beam.io.elements import Interaction
from fair_forge_beam.engine import GroupPerSession, session_key_of
from fair_forge_beam.metrics.judged import JudgedMetric, history_cut_warning, request_key
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
from fair_forge_beam.arguments import checks_arguments

__all__ = ["Conversational", "session_requests", "iter_session_requests"]

REQUESTS = "requests"


def _turn(x: Interaction):
    """Compact turn: (turn_index, element_id, qa_id, weight, query, answer, reference, observation)."""
    return session_key_of(x), (
        x.turn_index, x.element_id, x.qa_id, x.weight, x.query, x.assistant, x.ground_truth_assistant, x.observation,
    )


def _order(t):
    return (t[0], t[1], t[2], t[4] or "", t[5] or "", t[6] or "", t[7] or "", t[3] is None, t[3] or 0.0)


def session_requests(skey: str, turns: Sequence[tuple], chat_history: bool = True, max_history_turns: Optional[int] = None,
                     max_prompt_chars: Optional[int] = None) -> list:
    """Judge requests and metas of one session, as a list (see :func:`iter_session_requests`)."""
    return list(iter_session_requests(skey, turns, chat_history, max_history_turns, max_prompt_chars))


def iter_session_requests(skey: str, turns: Sequence[tuple], chat_history: bool = True,
                          max_history_turns: Optional[int] = None, max_prompt_chars: Optional[int] = None):
    """Judge requests and metas of one session, made one at a time (a generator: a session's
    prompts are never all held at once; issue 28 T8: a 3,000-turn session's list of prompts
    peaked at 3.5 GB).

    ``turns``: compact turns (see ``_turn``) in any order. They are sorted by ``turn_index``
    (ties broken by content); the history of a turn is every turn with a *smaller*
    ``turn_index`` (the last ``max_history_turns`` of them when set; none when
    ``chat_history`` is False). ``max_prompt_chars`` (the judge's prompt limit, None: none):
    when the prompt with that history would be longer, the **oldest** earlier turns are left
    out, as few as needed, and the history starts with a note saying how many
    (:func:`~fair_forge_beam.components.judge.prompts_quality.left_out_note`); the meta's extra
    then holds ``history_left_out``. A turn whose prompt is over the limit with no history at all
    is still asked (and refused by the judge for its own size). Yields
    ``(JudgeRequest, (skey, meta))``."""
    from fair_forge_beam.components.judge.handler import judge_request

    language = json.loads(skey)[2]
    items = sorted(turns, key=_order)
    cum = history_sizes([(t[4], t[5]) for t in items])  # turn m + 1 is items[m]

    i = 0
    while i < len(items):
        j = i
        while j < len(items) and items[j][0] == items[i][0]:
            j += 1
        e = i  # the earlier turns are items[:i]
        if not chat_history:
            lo = e
        elif max_history_turns is not None:
            lo = max(0, e - max_history_turns)
        else:
            lo = 0
        for t in items[i:j]:
            turn_index, element_id, qa_id, weight, query, answer, reference, observation = t

            def messages_for(s: int, note: bool):
                return conversational_messages(language, [(h[4], h[5]) for h in items[s:e]], query, answer, reference,
                                               observation, first_turn=s + 1, left_out=s if note else 0)

            s, note = lo, False
            if max_prompt_chars is not None and lo < e:
                rest = sum(len(c) for _r, c in messages_for(e, False)) - len(NO_HISTORY)  # the prompt but its history
                s, note = fitted_history(cum, lo, e, rest, max_prompt_chars)
            messages = messages_for(s, note)
            while note and s < e and sum(len(c) for _r, c in messages) > max_prompt_chars:  # a guard: never taken
                s += 1
                messages = messages_for(s, note)
            key = request_key(skey, turn_index, messages)
            req = judge_request(key, messages, schema=ConversationalJudgeOutput, element_id=element_id)
            extra = {"history_turns": e - s}
            if note:
                extra["history_left_out"] = s
            yield req, (skey, (key, turn_index, element_id, qa_id, weight, extra))
        i = j


def _history_warnings(display: str, metas: Sequence[tuple]) -> list:
    """The session's one ``history_cut`` warning when some of its turns were judged with older
    turns left out for the prompt limit (meta extra ``history_left_out``)."""
    return history_cut_warning(display, [(m[1], m[5]["history_left_out"]) for m in metas if m[5].get("history_left_out")])


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
    #: a turn without a question (blank: blank.is_blank) is a dead letter naming it, never judged: the
    #: relation, quality and quantity maxims judge an answer *to* the question (trial30 T7: a query
    #: "\u2060" was judged and scored). Such a turn is not in the history of the later turns either. A
    #: blank answer is judged (it is what is scored: the reader's empty_answer warning says so)
    requires = (("query", "the question the answer replies to"),)
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

    @checks_arguments  # a wrong value is named, never shown (fix39a)
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
        limit = getattr(self.judge, "max_prompt_chars", None)  # the judge's prompt limit
        pairs = (
            interactions
            | "KeyBySession" >> beam.Map(_turn).with_output_types(typing.Tuple[str, typing.Tuple[typing.Any, ...]])
            | "GroupSessions" >> GroupPerSession()
            # a generator: the session's requests leave one at a time, never all held at once
            | "BuildRequests" >> beam.FlatMap(lambda kv: iter_session_requests(kv[0], kv[1], chat_history, max_turns, limit))
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
    def session_warnings(display: str, metas: Sequence[tuple]) -> list:
        return _history_warnings(display, metas)

    @staticmethod
    def session_fields(estimates: list) -> dict:
        return {f: e.model_dump() for f, e in zip(RESULT_FIELDS, estimates)}

    @staticmethod
    def slice_fields(estimates: list) -> dict:
        return dict(zip(RESULT_FIELDS, estimates))
