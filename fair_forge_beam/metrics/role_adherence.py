"""RoleAdherence: does each answer keep the role its session declares? (gaussia 1.2.0's
``RoleAdherence``, on the engine). Documentation: ``docs/metrics/role-adherence.md``.

Each turn ``t_i`` of a session with a ``chatbot_role`` R is scored by a
:class:`RoleScoringStrategy` from R, the earlier turns ``T_<i`` (question and answer pairs,
oldest first, by ``turn_index``) and the turn itself; the default
:class:`StructuredJudgeStrategy` asks an LLM judge (through
:class:`~fair_forge_beam.components.judge.RunJudge`: ``RunInference``, cache, retries, strict
validation of :class:`RoleAdherenceJudgeOutput`, untrusted text fenced) for ``{"adherent": bool,
"reason": str}`` and scores 1.0 (adherent) or 0.0 — gaussia's structured-output strategy.
A turn is adherent when its score ≥ ``threshold`` (default 0.5).

Per session (gaussia's formula ``RoleAdherence(R, T) = (1/n) Σ_i adhere(t_i, T_<i, R)`` with
binary scores): ``role_adherence`` = adherent turns / judged turns, through the rate primitive
(frequentist ``k/n``; Bayesian Beta posterior mean and exact interval); the session is
``adherent`` when ``role_adherence ≥ threshold`` (``strict_mode``: when every judged turn is).
Per slice (overall / assistant / language): the turn-weighted mean of session adherences
(Bayesian bootstrap over sessions in Bayesian mode) and the share of adherent sessions (rate
primitive).

Not applicable → dead letter: every interaction of a session without a ``chatbot_role`` (None
or blank) goes to the dead letter (stage ``"role_adherence"``, reason ``"no chatbot_role"``),
as do failed judgements (HTTP errors after retries, answers that never validate) — never
scored 0, counted in the run summary.
"""
from __future__ import annotations

import json
import typing
from abc import ABC, abstractmethod
from typing import Any, Mapping, NamedTuple, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field

from fair_forge_beam._beam import beam
from fair_forge_beam.components.judge.arguments import inference_arguments
from fair_forge_beam.blank import is_blank
from fair_forge_beam.components.judge.prompts import PromptTemplate, chat_messages
from fair_forge_beam.components.judge.prompts_quality import NO_HISTORY, fitted_history, history_sizes, render_history
from fair_forge_beam.engine import (
    DEAD, GroupPerSession, MetricSpec, SessionPart, SessionReducer, SliceEstimator, part_value, session_key_of, session_key_text,
)
from fair_forge_beam.schemas.common import Estimate
from fair_forge_beam.io.elements import Interaction, dead_letter
from fair_forge_beam.metrics.base import MetricTransform
from fair_forge_beam.slices import SLICE_DIMENSIONS
from fair_forge_beam.metrics.judged import (
    JudgeScorer, build_judge, decode_part, encode_part, history_cut_warning, request_key, session_of_key,
)
from fair_forge_beam.quoting import quoted
from fair_forge_beam.schemas.metric_info import EstimateInfo, MetricInfo, ParquetColumns
from fair_forge_beam.statistical.base import StatisticalMode
from fair_forge_beam.statistical.combiners import (
    BootstrapMeanCombineFn,
    CollectCombineFn,
    RateCombineFn,
    estimate_bootstrap_means,
    estimate_rate,
)
from fair_forge_beam.plain import plain_reason
from fair_forge_beam.arguments import checks_arguments

__all__ = ["RoleAdherence", "RoleAdherenceJudgeOutput", "RoleScoringStrategy", "StructuredJudgeStrategy", "EarlierTurns", "ROLE_RUBRIC",
           "ROLE_CASE"]

NAME = "role_adherence"


class RoleAdherenceJudgeOutput(BaseModel):
    """The judge's answer for one turn (``extra="forbid"``): ``adherent`` (true: the answer keeps
    the role) and a short ``reason``."""

    model_config = ConfigDict(extra="forbid")

    adherent: bool = Field(description="true if the answer keeps the declared role, false if it violates it")
    reason: str = Field(description="one or two sentences explaining the verdict")


ROLE_RUBRIC = PromptTemplate(
    """\
You evaluate whether an AI assistant's answer keeps the role it was given.

Judge the CURRENT ANSWER only, in the light of the ROLE and the EARLIER TURNS. Check:
1. scope: the answer stays within the subjects and tasks the role allows (declining an
   out-of-scope request politely keeps the role);
2. tone and style: the answer keeps the tone the role requires;
3. conduct: the answer does what the role requires and nothing it forbids.

Return a JSON object with:
- "adherent": true if the answer keeps the role, false if it violates it;
- "reason": one or two sentences explaining the verdict.
""",
    slots=(),
)
"""System message of the role judge (no slots)."""

ROLE_CASE = PromptTemplate(
    """\
ROLE:
{{ role }}

EARLIER TURNS:
{{ history }}

USER QUESTION:
{{ query }}

CURRENT ANSWER:
{{ answer }}
""",
    slots=("role", "history", "query", "answer"),
    fenced=("role", "history", "query", "answer"),
)
"""User message of the role judge; every slot is fenced (role, history, question and answer are data)."""


class RoleScoringStrategy(ABC):
    """How one turn is scored (gaussia's ``ScoringStrategy``), as a judge request and a parser.

    ``schema``: pydantic class the judge's answer must validate against. ``messages(role, history,
    query, answer)`` → ``((role, content), …)`` (``history``: ``[(question, answer), …]`` oldest
    first). ``score(parsed)`` → float in [0, 1] from the validated answer (a dict); raising
    ``ValueError`` dead-letters the turn.
    """

    schema: type = None

    @abstractmethod
    def messages(self, role: str, history: Sequence[tuple], query: str, answer: str) -> tuple:
        ...

    @abstractmethod
    def score(self, parsed: Mapping[str, Any]) -> float:
        ...


class StructuredJudgeStrategy(RoleScoringStrategy):
    """Structured verdict ``{"adherent": bool, "reason": str}`` → 1.0 / 0.0 (gaussia's
    ``StructuredOutputJudgeStrategy``; the rubric is this project's, with fenced slots)."""

    schema = RoleAdherenceJudgeOutput

    def messages(self, role, history, query, answer):
        user = ROLE_CASE.render(role=role, history=render_history(list(history), getattr(history, "first_turn", 1),
                                                                   getattr(history, "left_out", 0)),
                                query=query or "", answer=answer or "")
        return chat_messages(ROLE_RUBRIC.render(), user)

    def score(self, parsed):
        v = parsed.get("adherent")
        if not isinstance(v, bool):
            raise ValueError(f"'adherent' must be a boolean, got {quoted(v)}")
        return 1.0 if v else 0.0


class EarlierTurns(list):
    """The earlier turns a turn's prompt shows, ``(query, answer)`` pairs oldest first (a ``list``, what a
    strategy's ``messages`` gets as ``history``), with ``first_turn`` (the 1-based number of the first one shown)
    and ``left_out`` (how many older turns were left out to keep the prompt within the judge's limit; 0: none)."""

    def __init__(self, turns=(), first_turn: int = 1, left_out: int = 0):
        for name, v, low in (("first_turn", first_turn, 1), ("left_out", left_out, 0)):
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise ValueError(f"EarlierTurns: {name} must be an integer >= {low}")
        super().__init__(turns)
        self.first_turn, self.left_out = first_turn, left_out


def _chars(messages) -> int:
    return sum(len(content) for _role, content in messages)


# ------------------------------------------------------------------ scorer (a PTransform: history needs the session)
class RoleMeta(NamedTuple):
    """A turn sent to the judge, its session's part ``(0, meta)``."""

    request_key: str
    turn_index: int
    element_id: str
    qa_id: Optional[str]


class RoleVerdict(NamedTuple):
    """A usable verdict, its session's part ``(1, verdict)``; ``score`` ∈ [0, 1]."""

    request_key: str
    score: float
    reason: str


class SessionValue(NamedTuple):
    """A session part as stored (docs/scheduled.md): ``kind`` 0 with the ``meta`` of a turn sent
    to the judge, or 1 with a usable ``verdict``."""

    kind: int
    meta: Optional[RoleMeta]
    verdict: Optional[RoleVerdict]


def _part_order(v: tuple) -> tuple:
    # metas by (turn, request key, element id, qa id), then verdicts by (request key, score,
    # reason): a total order, never arrival order
    kind, x = v
    if kind == 0:
        return (0, (x[1], x[0], x[2], x[3] or ""))
    return (1, (x[0], x[1], x[2]))


def _turn(x: Interaction):
    # a turn without a role carries its record, the raw of its dead letter if its session has no role
    # (trial47 B6: the raw was the query alone); a turn with one carries only what the judge is sent
    return session_key_of(x), (
        x.turn_index, x.element_id, x.qa_id, x.query or "", x.assistant or "", x.chatbot_role,
        x._asdict() if is_blank(x.chatbot_role) else None)


@beam.typehints.with_output_types(typing.Union[beam.pvalue.TaggedOutput, str])
class _BuildRequests(beam.DoFn):
    """One session's turns → per turn a ``JudgeRequest`` and its meta part (tagged ``"parts"``),
    or dead letters (no role). History of a turn = turns with a smaller ``turn_index``, in that order;
    when the prompt with all of them would pass the judge's limit (``max_prompt_chars``,
    ``--judge-max-prompt-chars``) the **oldest** are left out, as few as needed, the history starting with a
    note saying how many (as Conversational's: :func:`~fair_forge_beam.components.judge.prompts_quality.fitted_history`),
    and the session gets one ``history_cut`` warning (tagged ``"quality"``). trial47b B1: every earlier turn
    was sent, each turn past the limit was a dead letter (368 of 600 turns at a 20,000-character limit), and
    each turn's history was found by a scan of the whole session (3,200 turns: 366 s)."""

    def __init__(self, strategy: RoleScoringStrategy, max_prompt_chars: Optional[int] = None):
        self.strategy, self.max_prompt_chars = strategy, max_prompt_chars

    def _fitted(self, role, items, e: int, t, cum: list) -> tuple:
        """(messages, earlier turns left out) of the turn ``t`` whose earlier turns are ``items[:e]``; ``cum``: the
        session's :func:`history_sizes`, filled when the limit is first looked at."""
        limit, strategy = self.max_prompt_chars, self.strategy

        def build(s: int, note: bool):
            shown = EarlierTurns([(h[3], h[4]) for h in items[s:e]], s + 1, s if note else 0)
            return strategy.messages(role, shown, t[3], t[4])

        if limit is None or e == 0:
            return build(0, False), 0
        if not cum:
            cum.extend(history_sizes([(h[3], h[4]) for h in items]))
        s, note = fitted_history(cum, 0, e, _chars(build(e, False)) - len(NO_HISTORY), limit)
        messages = build(s, note)
        if s < e and _chars(messages) > limit:  # a strategy that writes its history otherwise: sized by building it
            a, b = s + 1, e
            while a < b:
                mid = (a + b) // 2
                if _chars(build(mid, True)) <= limit:
                    b = mid
                else:
                    a = mid + 1
            s, note = a, True
            messages = build(s, note)
        return messages, s if note else 0

    def process(self, kv):
        from fair_forge_beam.components.judge.handler import judge_request

        skey, turns = kv
        items = sorted(turns, key=lambda t: (t[0], t[1], t[2], t[3], t[4], t[5] or ""))
        roles = sorted({t[5] for t in items if not is_blank(t[5])})
        if not roles:
            for t in items:
                yield beam.pvalue.TaggedOutput(DEAD, dead_letter(
                    NAME, "no chatbot_role: role adherence needs the session's declared role", t[6], t[1]))
            return
        role = roles[0]  # one session, one header: several roles only when a session is split across files
        cum: list = []  # history_sizes of items, made when the limit is first looked at
        cut: list = []  # (turn_index, earlier turns left out) of the turns sent with a cut history
        e = 0  # the earlier turns of items[i] are items[:e] (those with a smaller turn_index)
        for i, t in enumerate(items):
            if t[0] != items[e][0]:
                e = i
            msgs, left_out = self._fitted(role, items, e, t, cum)
            if left_out and _chars(msgs) <= self.max_prompt_chars:  # a prompt still over the limit is never sent: a
                cut.append((t[0], left_out))  # dead letter, no turn of the warning (trial48b L1)
            key = request_key(skey, t[0], msgs)
            yield judge_request(key, msgs, schema=self.strategy.schema, element_id=t[1])
            yield beam.pvalue.TaggedOutput("parts", SessionPart.keyed(skey, (0, RoleMeta(key, t[0], t[1], t[2]))))
        session_id, assistant_id, _language = json.loads(skey)
        for w in history_cut_warning(f"{session_id}/{assistant_id}", cut, "sent to the judge"):
            yield beam.pvalue.TaggedOutput("quality", w)


def _verdict(strategy: RoleScoringStrategy):
    """A validated answer → its session's part ``(1, RoleVerdict)``, or a dead letter when the
    strategy cannot score it."""

    def verdict(res):
        try:
            score = float(strategy.score(res.parsed or {}))
            if not 0.0 <= score <= 1.0:
                raise ValueError(f"score {quoted(score)} outside [0, 1]")
        except (TypeError, ValueError) as exc:
            return (dead_letter(NAME, f"judge answer unusable ({plain_reason(exc)})", res.raw, res.element_id),)
        reason = str((res.parsed or {}).get("reason", ""))
        return (SessionPart.keyed(session_of_key(res.key), (1, RoleVerdict(res.key, score, reason))),)

    return verdict


def _judge_roles(handler, strategy: RoleScoringStrategy, inference_args=None) -> JudgeScorer:
    """``PCollection[Interaction]`` → sessions → judge requests with their meta parts → ``RunJudge``
    → verdict parts; the session reducer joins them."""

    def build(interactions):
        from fair_forge_beam.components.judge.handler import JudgeRequest

        built = (
            interactions
            | "KeyBySession" >> beam.Map(_turn).with_output_types(typing.Tuple[str, typing.Tuple[typing.Any, ...]])
            | "GroupSessions" >> GroupPerSession()
            | "BuildRequests" >> beam.ParDo(_BuildRequests(strategy, getattr(handler, "max_prompt_chars", None))).with_outputs(
                "parts", DEAD, "quality", main="main")
        )
        requests = built.main | "Requests" >> beam.Map(lambda r: r).with_output_types(JudgeRequest)
        return {"requests": requests, "parts": built["parts"], "dead_letter": built[DEAD], "quality": built["quality"]}

    return JudgeScorer(handler, build, _verdict(strategy), NAME, inference_args=inference_args)


# ------------------------------------------------------------------ session and slices
class RoleTurn(BaseModel):
    """One judged turn of a session: its index, the judge's verdict and score in [0, 1]."""

    turn_index: int
    adherent: bool
    score: float


class RoleAdherenceSessionMetric(BaseModel):
    """One session's Role adherence record: the typed columns of ``sessions/role_adherence/``."""

    session_id: str
    assistant_id: str
    language: str
    n_interactions: int
    n_adherent: int
    role_adherence: Estimate
    adherent: bool
    turns: list[RoleTurn]


class _SessionRoles(SessionReducer):
    """Joins a session's metas and verdicts: its interaction records, its record and slice unit
    (a session without any usable verdict has neither)."""

    def __init__(self, mode: StatisticalMode, threshold: float, strict: bool):
        self.mode, self.threshold, self.strict = mode, threshold, strict

    def reduce(self, key, parts):
        session_id, assistant_id, language = key
        verdicts: dict = {}
        for kind, v in parts:
            if kind == 1:
                verdicts.setdefault(v[0], v)
        records, values = [], []
        for kind, m in parts:
            v = verdicts.get(m[0]) if kind == 0 else None
            if v is None:
                continue  # a failed judgement: its dead letter comes from the judge scorer
            adherent = v[1] >= self.threshold
            records.append({"metric": NAME, "level": "interaction", "element_id": m[2], "session_id": session_id,
                            "assistant_id": assistant_id, "language": language, "turn_index": m[1], "qa_id": m[3],
                            "role_adherent": adherent, "role_adherence_score": v[1], "role_reason": v[2]})
            values.append((m[1], adherent, v[1]))
        if not values:
            return None, None, [], []
        values.sort()
        n = len(values)
        k = sum(1 for _, adherent, _ in values if adherent)
        est = estimate_rate(k, n, self.mode)
        point = k / n
        adherent = (k == n) if self.strict else point >= self.threshold
        rec = {"metric": NAME, "level": "session", "session_id": session_id, "assistant_id": assistant_id,
               "language": language, "n_interactions": n, "n_adherent": k, "role_adherence": est.model_dump(),
               "adherent": adherent, "turns": [{"turn_index": t, "adherent": a, "score": s} for t, a, s in values]}
        return rec, ((session_key_text(key), float(n), (point,), n), bool(adherent)), [], records


class _SliceRoles(SliceEstimator):
    def __init__(self, mode: StatisticalMode, judge_model: str):
        self.mode, self.judge_model = mode, judge_model

    def estimate(self, key, accs, window, aux):
        st, (k, n) = accs[1]
        (mean,) = estimate_bootstrap_means(st, self.mode, f"{NAME}|sessions")
        return [{"metric": NAME, "level": "slice", "slice": key, "mode": self.mode.get_result_type(),
                 "n_interactions": st.n_items, "n_sessions": accs.n_sessions, "role_adherence": mean.model_dump(),
                 "adherent_sessions": estimate_rate(k, n, self.mode).model_dump(), "judge_model": self.judge_model}]


class RoleAdherence(MetricTransform):
    """``PCollection[Interaction]`` → RoleAdherence results (see the module docstring).

    Args:
        judge: an :class:`~fair_forge_beam.components.judge.OpenAIJudgeHandler` or a mapping of its
            arguments (required: ``ValueError`` otherwise, before any pipeline is built).
        statistical_mode: :class:`FrequentistMode` (default) or :class:`BayesianMode`.
        scoring_strategy: a :class:`RoleScoringStrategy` (default :class:`StructuredJudgeStrategy`).
        threshold: turn and session adherence threshold in (0, 1] (default 0.5, as gaussia).
        strict_mode: a session is adherent only if every judged turn is (gaussia's option).
        slices: any of ``"overall"``, ``"assistant_id"``, ``"language"``, or the name of a session
            metadata field (e.g. ``"region"``: its values come from ``Interaction.slice_values``, see
            ``ReadInteractions(slice_fields=…)``; ``ValueError`` for a name that cannot be one).
        max_units: hash buckets of sessions for the slice-level Bayesian bootstrap.
        inference_args: extra sampling parameters for every judge call (part of the cache key).

    Returns (``expand``): dict of PCollections ``interactions`` (``role_adherent``,
    ``role_adherence_score`` ∈ [0, 1], ``role_reason``), ``sessions`` (``role_adherence``
    estimate, ``adherent``, ``turns``), ``slices`` (``role_adherence``, ``adherent_sessions``),
    ``dead_letter`` (sessions without a role, failed judgements) and ``quality``.
    """

    name = NAME
    session_schema = RoleAdherenceSessionMetric
    info = MetricInfo(
        name=NAME,
        estimates=(
            EstimateInfo("role_adherence", "role adherence",
                         "share of judged turns the judge finds in the session's role (gaussia's role adherence with "
                         "binary scores; docs/metrics/role-adherence.md); 0 = none, 1 = every turn; higher is better",
                         unit="share of turns", direction=+1, reference=(">=", 0.9), gate="role_adherence",
                         headline=True),
            EstimateInfo("adherent_sessions", "adherent-session share",
                         "share of sessions whose role adherence reaches the threshold (--role-threshold, default 0.5; "
                         "--role-strict: every turn); higher is better",
                         unit="share of sessions", direction=+1, reference=(">=", 0.9), gate="adherent_sessions",
                         headline=True),
        ),
        parquet=(ParquetColumns(columns=(("role_adherent", "bool_"), ("role_adherence_score", "float64"),
                                         ("role_reason", "string"))),),
    )

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, judge: Any = None, statistical_mode: Optional[StatisticalMode] = None,
                 scoring_strategy: Optional[RoleScoringStrategy] = None, threshold: float = 0.5, strict_mode: bool = False,
                 slices: Sequence[str] = SLICE_DIMENSIONS, max_units: int = 1024,
                 inference_args: Optional[Mapping[str, Any]] = None):
        super().__init__(statistical_mode, slices)
        self.strategy = scoring_strategy or StructuredJudgeStrategy()
        self.judge = build_judge(judge, self.strategy.schema)
        if not 0.0 < float(threshold) <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {quoted(threshold)}")
        if int(max_units) < 1:
            raise ValueError("max_units must be >= 1")
        self.threshold, self.strict_mode, self.max_units = float(threshold), bool(strict_mode), int(max_units)
        self.inference_args = inference_arguments(inference_args)  # checked: a secret in the wrong key is never sent

    def spec(self, windowed: bool = False) -> MetricSpec:
        return MetricSpec(
            name=self.name,
            scorer=_judge_roles(self.judge, self.strategy, self.inference_args),
            interaction_record=None,
            session_interactions=True,
            session_value=part_value,
            session_combine=CollectCombineFn(SessionValue, _part_order, encode=encode_part, decode=decode_part),
            session_reducer=_SessionRoles(self.mode, self.threshold, self.strict_mode),
            session_slice_combine=beam.combiners.TupleCombineFn(BootstrapMeanCombineFn(1, self.max_units), RateCombineFn()),
            estimator=_SliceRoles(self.mode, self.judge.model_name),
            slices=self.slices,
            reads=frozenset({"query", "assistant", "chatbot_role"}),
        )
