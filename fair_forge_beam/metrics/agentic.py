"""Agentic: answer correctness, tool correctness, pass@k and pass^k (spec §6.7).

Declared for :class:`~fair_forge_beam.engine.Engine` (:meth:`Agentic.spec`)::

    interactions ──► scorer: Score (DoFn) ──► meta parts ───────────────────────────┐
                       │  tool correctness (deterministic), label or tool          │
                       │  correctness, judge request                               ├─ engine: one session combine
                       ├──► judge requests ──► RunJudge ──► verdict parts ─────────┘          │
                       └──► dead letter (no label, no reference, bad tool trace, judge failure)
                                                                                              ▼
         conversation reducer: interaction records, conversation record (n, c, plug-in pass@k /
         pass^k), trial unit (task id, n, c) ──► slice roll-up (PassCountsCombineFn) ──►
         per-slice estimator (seeded by slice key)

**Correctness of an interaction** (``correctness_source``):

* ``"judge"`` — an LLM judge scores the answer against ``ground_truth_assistant``
  (:class:`AnswerCorrectnessOutput`, ``correctness_score`` ∈ [0, 1]);
* ``"label"`` — a value already in the data, e.g. τ-bench's ``reward``, read from
  ``label_field`` (dotted path into the interaction, default ``agentic.reward``); booleans count
  as 0/1, numbers must lie in [0, 1];
* ``"tools"`` — the interaction's tool ``overall_correctness``.

The interaction is correct iff the score ≥ ``threshold`` (inclusive, default 0.7). An
interaction without a usable correctness (judge failure, no reference answer, missing or invalid
label, no tool ground truth in ``"tools"`` mode) goes to the dead letter (stage ``"agentic"``)
and is left out of ``n`` — never scored 0 (upstream scores judge failures 0.0).

**Tool correctness** (:mod:`fair_forge_beam.components.tool_correctness`) per interaction and
for the whole conversation (all turns' calls in ``(turn_index, step)`` order). A malformed trace
(a call without ``tool_name``, non-object ``parameters``, ...) gives ``tool_correctness = None``
and a dead letter with stage ``"agentic_tools"``; the interaction keeps its answer correctness.
In ``"tools"`` mode it has none: its one dead letter (stage ``"agentic"``) gives the trace's own
reason (``tool correctness not computed: agentic.tools_used[0] has no tool_name``), the one the
summary groups (trial40 J6: it said "no tool correctness (…, or a malformed trace)").
A call without ``parameters`` is valid (``{}``).

**Per conversation**: ``n`` scored interactions, ``c`` correct; plug-in pass@k = ``1 − (1 −
c/n)^k``, pass^k = ``(c/n)^k`` (spec §6.7; Bayesian: closed-form posterior means and exact
intervals, :func:`~fair_forge_beam.statistical.passk.pass_k_estimates`). Order comes from
``turn_index`` and the calls' ``step`` fields, never from arrival.

**Per task over trials** (slices): conversations with the same task id (``task_field``, default
``agentic.task_id``) are trials of that task; a trial succeeds when all its scored interactions
are correct. Frequentist: unbiased pass@k / pass^k per task (Chen et al. 2021; Yao et al.
2024), averaged over tasks with ≥ k trials; Bayesian: Beta posterior per task, closed-form mean
of the task average, Monte-Carlo interval seeded by ``(seed, metric, slice)``
(:func:`~fair_forge_beam.statistical.passk.pass_k_curve`). Empty input gives an ``overall``
slice with ``n = 0`` and ``None`` estimates.
"""
from __future__ import annotations


import json
import math
from typing import Any, Mapping, Optional, Sequence

from fair_forge_beam._beam import beam
from fair_forge_beam.components.judge.arguments import inference_arguments
from fair_forge_beam.blank import is_blank
from fair_forge_beam.components.tool_correctness import (
    ToolTraceError,
    conversation_tool_calls,
    normalise_tool_weights,
    tool_correctness,
)
from fair_forge_beam.io.elements import Interaction, QualityWarning, dead_letter
from fair_forge_beam.engine import (
    CONTENT_FIELDS, DEAD, Evidence, MetricSpec, SessionPart, SessionReducer, SliceAccumulators, SliceEstimator, part_value,
    repeated_turns, session_key_of,
)
from fair_forge_beam.metrics.base import MetricResults, MetricTransform
from fair_forge_beam.slices import SLICE_DIMENSIONS
from fair_forge_beam.metrics.judged import JudgeScorer, build_judge, request_key, session_of_key
from fair_forge_beam.quoting import quoted
from fair_forge_beam.schemas.metric_info import DeadLetterStage, EstimateInfo, MetricInfo, ParquetColumns
from fair_forge_beam.schemas.agentic import (
    AgenticInteraction,
    AgenticMetric,
    AgenticSliceMetric,
    AnswerCorrectnessOutput,
    PassKPoint,
)
from fair_forge_beam.schemas.common import Estimate
from fair_forge_beam.statistical.base import StatisticalMode
from fair_forge_beam.statistical.combiners import WithFailedCount
from fair_forge_beam.statistical.passk import PassCountsCombineFn, check_k, pass_k_curve, pass_k_estimates, pass_k_note, task_histogram
from fair_forge_beam.plain import plain_reason
from fair_forge_beam.arguments import checks_arguments

__all__ = ["Agentic", "read_path", "SOURCES"]

SOURCES = ("judge", "label", "tools")
#: largest accepted ``k``: every slice reports a curve of k points (k = 1..k)
MAX_K = 1000
REQUESTS = "requests"
TOOLS_STAGE = "agentic_tools"
#: why the task curve's headline (pass@k, pass^k at the requested k) has no value in a slice
_NO_TASK_OF_K = ("no task of the slice has --agentic-k conversations (trials) with its task id (agentic.task_id, "
                 "--agentic-task-field): pass@k and pass^k average the tasks with at least k trials; the curve in "
                 "results.json has the smaller k")


def read_path(x: Interaction, path: str) -> Any:
    """Value at the dotted ``path`` of an interaction (``"agentic.reward"`` →
    ``x.agentic["reward"]``); ``None`` when any part is missing."""
    first, *rest = path.split(".")
    value = getattr(x, first, None)
    for part in rest:
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _label_score(value: Any) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)) and math.isfinite(value) and 0.0 <= value <= 1.0:
        return float(value)
    raise ValueError(f"must be a boolean or a number in [0, 1], got {quoted(value)}")


class _Score(beam.DoFn):
    """Interaction → its conversation's meta part; judge requests (tagged ``requests``); dead letters."""

    def __init__(self, metric: "Agentic"):
        self.name, self.source = metric.name, metric.correctness_source
        self.label_field, self.task_field = metric.label_field, metric.task_field
        self.weights, self.tool_threshold = metric.tool_weights, metric.tool_threshold

    def process(self, x: Interaction):
        skey = session_key_of(x)
        tool = None
        no_tool = "no ground_truth_agentic.expected_tools"  # why tool correctness is None (the summary's reason)
        try:
            tool = tool_correctness(x.agentic, x.ground_truth_agentic, self.weights, self.tool_threshold)
        except ToolTraceError as exc:
            no_tool = f"tool correctness not computed: {plain_reason(exc)}"
            if self.source != "tools":  # scored by its label or the judge: the trace's own dead letter
                yield beam.pvalue.TaggedOutput(DEAD, dead_letter(TOOLS_STAGE, no_tool, x._asdict(), x.element_id))
        task = read_path(x, self.task_field) if self.task_field else None
        meta = {
            "turn_index": x.turn_index,
            "element_id": x.element_id,
            "qa_id": x.qa_id,
            "task_id": None if task is None else str(task),
            "tool": tool,
            "agentic": x.agentic,
            "ground_truth_agentic": x.ground_truth_agentic,
            "score": None,
            "reasoning": None,
            "request_key": None,
        }
        fail = None
        if self.source == "label":
            value = read_path(x, self.label_field)
            if value is None:
                fail = f"no correctness label at {quoted(self.label_field)} (--agentic-label-field)"
            else:
                try:
                    meta["score"] = _label_score(value)
                except ValueError as exc:
                    fail = f"label {quoted(self.label_field)} {plain_reason(exc)}"
        elif self.source == "tools":
            if tool is None:  # the precise reason, the one the summary groups (trial40 J6: it said "no
                # tool correctness (no … expected_tools, or a malformed trace)" for "tools_used[0] has no tool_name")
                fail = no_tool if no_tool.startswith("tool correctness") else f"no tool correctness: {no_tool}"
            else:
                meta["score"] = tool["overall_correctness"]
                meta["reasoning"] = tool["reasoning"]
        else:
            gt = x.ground_truth_assistant
            if is_blank(gt):
                fail = "no ground_truth_assistant to judge the answer against"
            else:
                from fair_forge_beam.components.judge.handler import judge_request
                from fair_forge_beam.components.judge.prompts_agentic import agentic_messages

                messages = agentic_messages(x.query, x.assistant, gt)
                key = request_key(skey, x.turn_index, messages)
                meta["request_key"] = key
                yield beam.pvalue.TaggedOutput(
                    REQUESTS, judge_request(key, messages, schema=AnswerCorrectnessOutput, element_id=x.element_id)
                )
        if fail:
            fail += self._other_sources(x, tool)
            yield beam.pvalue.TaggedOutput(DEAD, dead_letter(self.name, fail, x._asdict(), x.element_id))
        yield SessionPart(x.session_id, x.assistant_id, x.language, (0, meta))

    def _other_sources(self, x: Interaction, tool) -> str:
        """``"; --agentic-correctness tools or judge would score this record"``: the other correctness
        sources this record holds what they need for (trial 10 T14: the shipped agentic example, run
        with the default source, dead-lettered every turn with a reason that named no way out); ``""``
        when none. Short, so that the summary's grouped reason keeps it whole."""
        found = []
        if self.source != "tools" and tool is not None:
            found.append("tools")
        if self.source != "label" and self.label_field:
            try:
                _label_score(read_path(x, self.label_field))
                found.append("label")
            except ValueError:
                pass
        if self.source != "judge" and not is_blank(x.ground_truth_assistant):
            found.append("judge")
        return f"; --agentic-correctness {' or '.join(found)} would score this record" if found else ""


def _judge_scorer(m: "Agentic") -> JudgeScorer:
    """The scorer with the judge: metas and judge requests (``_Score``) → ``RunJudge`` → verdict parts."""

    def build(interactions):
        scored = interactions | "Score" >> beam.ParDo(_Score(m)).with_outputs(REQUESTS, DEAD, main="metas")
        return {"requests": scored[REQUESTS], "parts": scored.metas, "dead_letter": scored[DEAD]}

    return JudgeScorer(m.judge, build, _verdict(m.name), m.name, inference_args=m.inference_args)


def _part_order(v: tuple) -> tuple:
    # metas by (turn, element id), verdicts by (request key, score, reasoning); then the rest of
    # the content: a total order, never arrival order
    kind, x = v
    if kind == 0:
        return (0, x["turn_index"], x["element_id"], json.dumps(x, sort_keys=True, default=str))
    return (1, x[0], x[1], x[2] or "")


def _verdict(name: str):
    """A validated judge answer → its conversation's part ``(1, (request key, score, reasoning))``
    (an interaction's part is ``(0, meta dict)``, ``_Score``), or a dead letter."""

    def verdict(res):
        parsed = res.parsed or {}
        try:
            score = float(parsed["correctness_score"])
            if not (math.isfinite(score) and 0.0 <= score <= 1.0):
                raise ValueError(f"score {score} outside [0, 1]")
        except (KeyError, TypeError, ValueError) as exc:  # the handler validated; this is a guard
            return (dead_letter(name, f"judge answer has no usable correctness_score ({plain_reason(exc)})", res.raw, res.element_id),)
        reasoning = str(parsed.get("reasoning") or "") or (res.reasoning or None)
        return (SessionPart.keyed(session_of_key(res.key), (1, (res.key, score, reasoning))),)

    return verdict


def _tool_model(t: Optional[dict]) -> Optional[dict]:
    return None if t is None else dict(t)


class _Conversation(SessionReducer):
    """A session's metas (+ verdicts), sorted by ``_part_order`` → interaction records, the
    conversation record, its trial unit ``((task, n, c), n_failed)`` and data-quality warnings."""

    def __init__(self, metric: "Agentic"):
        self.name, self.mode, self.k = metric.name, metric.mode, metric.k
        self.threshold, self.source = metric.threshold, metric.correctness_source
        self.weights, self.tool_threshold = metric.tool_weights, metric.tool_threshold

    def setup(self):
        self._scored = beam.metrics.Metrics.counter(f"fair_forge_beam.{self.name}", "scored")
        self._not_scored = beam.metrics.Metrics.counter(f"fair_forge_beam.{self.name}", "not_scored")

    def reduce(self, key, parts):
        session_id, assistant_id, language = key
        display = f"{session_id}/{assistant_id}"
        metas = [x for kind, x in parts if kind == 0]
        verdicts: dict[str, tuple] = {}
        for kind, v in parts:
            if kind == 1:
                verdicts.setdefault(v[0], v)
        warnings, records = repeated_turns(key, [m["turn_index"] for m in metas]), []
        tasks = sorted({m["task_id"] for m in metas if m["task_id"] is not None})
        if len(tasks) > 1:
            shown = ", ".join(quoted(t) for t in tasks[:3]) + (f" and {len(tasks) - 3} more" if len(tasks) > 3 else "")
            warnings.append(QualityWarning("conflicting_task_id", display,
                                           f"turns name {len(tasks)} task ids ({shown}); using {quoted(tasks[0])}"))
        task = tasks[0] if tasks else None
        base = {"metric": self.name, "session_id": session_id, "assistant_id": assistant_id, "language": language}
        scores, correct_turns, tool_scores = [], [], []
        n_failed = 0
        for m in metas:
            score, reasoning = m["score"], m["reasoning"]
            if m["request_key"] is not None:
                v = verdicts.get(m["request_key"])
                if v is not None:
                    score, reasoning = v[1], v[2]
            if score is None:
                n_failed += 1
                continue
            ok = score >= self.threshold
            scores.append(score)
            tool_scores.append(_tool_model(m["tool"]))
            if ok:
                correct_turns.append(m["turn_index"])
            records.append({
                **base, "level": "interaction", "element_id": m["element_id"], "turn_index": m["turn_index"],
                "qa_id": m["qa_id"], "task_id": task, "correctness_source": self.source, "correctness_score": score,
                "is_correct": ok, "tool_correctness": _tool_model(m["tool"]), "reasoning": reasoning,
            })
        n, c = len(scores), len(correct_turns)
        if n:
            self._scored.inc(n)
        if n_failed:
            self._not_scored.inc(n_failed)
        conv_tool = None
        try:
            trace = conversation_tool_calls([(m["turn_index"], m["agentic"], m["ground_truth_agentic"]) for m in metas])
            if trace is not None:
                ag, gt, used, expected = trace
                conv_tool = tool_correctness(ag, gt, self.weights, self.tool_threshold, used=used, expected=expected)
        except ToolTraceError:
            conv_tool = None  # the interaction's trace is already in the dead letter (stage agentic_tools)
        if n:
            at, pw = pass_k_estimates(n, c, self.k, self.mode)
        else:
            at = pw = Estimate(mean=None, n=0)
        rec = {
            **base, "level": "session", "task_id": task, "n_interactions": n, "n_failed": n_failed,
            "total_interactions": n, "correct_interactions": c, "is_fully_correct": bool(n and c == n),
            "threshold": self.threshold, "correctness_scores": scores, "correct_indices": correct_turns,
            "tool_correctness_scores": tool_scores, "conversation_tool_correctness": conv_tool, "k": self.k,
            "pass_at_k": at.mean, "pass_at_k_ci_low": at.ci_low, "pass_at_k_ci_high": at.ci_high,
            "pass_pow_k": pw.mean, "pass_pow_k_ci_low": pw.ci_low, "pass_pow_k_ci_high": pw.ci_high,
            "pass_k_note": pass_k_note(n, c, self.k, self.mode),
        }
        return rec, ((task, n, c), n_failed), warnings, records


def _SliceCombineFn() -> WithFailedCount:
    """The slice CombineFn: ``((task, n, c), n_failed)`` per conversation → ``(PassCountsCombineFn
    accumulator, n_failed)`` (integers only; output = accumulator, as :class:`CombineSlices` needs)."""
    return WithFailedCount(PassCountsCombineFn())


class _TaskEvidence(Evidence):
    """The sessions the per-task pass@k / pass^k rest on (``"task"``: a conversation with a task id,
    a trial of its task; from the slice value ``((task, n, c), n_failed)``), :class:`~fair_forge_beam.engine.Evidence`."""

    kinds = ("task",)

    def of(self, values, slice_value) -> set:
        return {"task"} if slice_value and slice_value[0][0] is not None else set()


def slice_record(name: str, key: str, counts: dict, n_failed: int, k: int, mode: StatisticalMode, source: str,
                 accs: SliceAccumulators) -> dict:
    """The slice record (:class:`AgenticSliceMetric` as a dict) from merged counts; ``accs.n_sessions``: the
    slice's conversations with something scored (the engine's count); the task curve rests on those
    with a task id (:class:`_TaskEvidence`), by the engine's one-session rule."""
    conv = counts["conversations"]
    n_sessions = accs.n_sessions
    ks = list(range(1, k + 1))
    tasks = task_histogram(counts["tasks"])
    task_curve = accs.rests_on("task", mode, lambda m: [(t.pass_at_k, t.pass_pow_k) for t in pass_k_curve(
        tasks, ks, m, (name, key, "tasks"), "unbiased")])
    conv_curve = pass_k_curve(conv, ks, mode, (name, key, "conversations"), "plugin")
    curve = [
        PassKPoint(k=kk, pass_at_k=at, pass_pow_k=pow_, conversation_pass_at_k=cv.pass_at_k,
                   conversation_pass_pow_k=cv.pass_pow_k)
        for kk, (at, pow_), cv in zip(ks, task_curve, conv_curve)
    ]
    trials = sum(cnt for (n, _), cnt in conv.items() if n > 0)
    successes = sum(cnt for (n, c), cnt in conv.items() if n > 0 and c == n)
    rate = pass_k_estimates(trials, successes, 1, mode)[1] if trials else Estimate(mean=None, n=0)
    rec = AgenticSliceMetric(
        slice=key,
        mode=mode.get_result_type(),
        k=k,
        n_interactions=sum(n * cnt for (n, _), cnt in conv.items()),
        n_correct=sum(c * cnt for (_, c), cnt in conv.items()),
        n_failed=int(n_failed),
        n_sessions=n_sessions,
        n_fully_correct=successes,
        n_tasks=len(counts["tasks"]),
        n_sessions_without_task=counts["untasked"],
        success_rate=rate,
        pass_at_k=curve[-1].pass_at_k,
        pass_pow_k=curve[-1].pass_pow_k,
        curve=curve,
        correctness_source=source,
    )
    return {"metric": name, "level": "slice", **rec.model_dump()}


class _SliceEstimator(SliceEstimator):
    def __init__(self, metric: "Agentic"):
        self.name, self.k, self.mode, self.source = metric.name, metric.k, metric.mode, metric.correctness_source

    def estimate(self, key, accs, window, aux):
        counts, failed = accs[1]
        return [slice_record(self.name, key, counts, failed, self.k, self.mode, self.source, accs)]

    def empty_input(self) -> list:
        """The ``overall`` slice of a run without interactions (``n = 0``, ``None`` estimates)."""
        return [slice_record(self.name, "overall", PassCountsCombineFn().create_accumulator(), 0, self.k, self.mode, self.source,
                             SliceAccumulators(None, None, 0, dict.fromkeys(_TaskEvidence.kinds, 0)))]


class Agentic(MetricTransform):
    """``PCollection[Interaction]`` → Agentic results (module docstring for the formulas).

    Args:
        k: attempts in pass@k / pass^k; an integer in [1, ``MAX_K`` = 1000] (``ValueError``
            otherwise, case-005; the slice curve has one point per k).
            ``k`` may exceed a conversation's ``n`` (plug-in) or a task's trials (the unbiased
            estimator then leaves that task out; the Bayesian one keeps it).
        judge: :class:`~fair_forge_beam.components.judge.OpenAIJudgeHandler` or a mapping of its
            arguments; needed for ``correctness_source="judge"``. ``model`` is an alias (the
            original's argument name).
        correctness_source: ``"judge"``, ``"label"`` or ``"tools"``; ``None`` → ``"judge"`` when a
            judge is given, else ``"label"``.
        label_field: dotted path of the label (default ``"agentic.reward"``).
        task_field: dotted path of the task id (default ``"agentic.task_id"``; ``None`` → no task
            grouping).
        threshold: correctness cut-off in [0, 1] (inclusive; default 0.7).
        tool_threshold: tool ``is_correct`` cut-off in [0, 1] (default 1.0).
        tool_weights: weights of selection / parameters / sequence / utilization (normalised).
        statistical_mode, slices: as every metric.
        inference_args: extra sampling parameters for the judge (part of the cache key).

    Returns (``expand``): dict of PCollections ``interactions`` (:class:`AgenticInteraction`
    dicts), ``sessions`` (:class:`AgenticMetric`), ``slices`` (:class:`AgenticSliceMetric`),
    ``dead_letter`` and ``quality``.

    Raises:
        ValueError: invalid ``k``, thresholds, weights or source; ``"judge"`` without a judge.
    """

    name = "agentic"
    info = MetricInfo(
        name="agentic",
        # conversation success, pass@k and pass^k (spec §6.7): higher is better
        estimates=tuple(EstimateInfo(f, f.replace("_", " "), unit=unit, direction=+1, gate=f, headline=True,
                                     observed=observed, undefined=undefined)
                        for f, unit, observed, undefined in (
                            ("success_rate", "share of sessions", "session", None),
                            ("pass_at_k", "probability", "task", _NO_TASK_OF_K),
                            ("pass_pow_k", "probability", "task", _NO_TASK_OF_K))),
        parquet=(
            ParquetColumns("fair_forge_beam.schemas.agentic:AgenticInteraction",
                           ("task_id", "correctness_source", "correctness_score", "is_correct", "tool_correctness"),
                           "agentic_"),
            ParquetColumns("fair_forge_beam.schemas.agentic:AgenticInteraction", ("reasoning",)),
        ),
        dead_letter_stages=(DeadLetterStage(TOOLS_STAGE, "interactions whose tool correctness was not computed (a "
                                                         "malformed tool trace; the interaction's tool_correctness is null)",
                                            part="tool correctness"),),
        plot="plot_agentic",
    )
    interaction_schema = AgenticInteraction
    session_schema = AgenticMetric
    slice_schema = AgenticSliceMetric

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(
        self,
        k: int = None,
        judge: Any = None,
        correctness_source: Optional[str] = None,
        label_field: str = "agentic.reward",
        task_field: Optional[str] = "agentic.task_id",
        threshold: float = 0.7,
        tool_threshold: float = 1.0,
        tool_weights: Optional[Mapping[str, float]] = None,
        statistical_mode: Optional[StatisticalMode] = None,
        slices: Sequence[str] = SLICE_DIMENSIONS,
        inference_args: Optional[Mapping[str, Any]] = None,
        model: Any = None,
    ):
        super().__init__(statistical_mode, slices)
        if k is None:
            raise ValueError("Agentic needs k (the number of attempts in pass@k / pass^k), e.g. Agentic(k=3)")
        self.k = check_k(k)
        if self.k > MAX_K:
            raise ValueError(f"k must be at most {MAX_K} (the pass@k curve has one point per k), got {quoted(k)}")
        judge = judge if judge is not None else model
        source = correctness_source or ("judge" if judge is not None else "label")
        if source not in SOURCES:
            raise ValueError(f"correctness_source must be one of {SOURCES}, got {quoted(correctness_source)}")
        for nm, v in (("threshold", threshold), ("tool_threshold", tool_threshold)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0.0 <= v <= 1.0):
                raise ValueError(f"{nm} must be a number in [0, 1], got {quoted(v)}")
        if not label_field or not isinstance(label_field, str):
            raise ValueError("label_field must be a dotted path such as 'agentic.reward'")
        self.correctness_source = source
        self.judge = build_judge(judge, AnswerCorrectnessOutput) if source == "judge" else None
        self.label_field, self.task_field = label_field, task_field or None
        self.threshold, self.tool_threshold = float(threshold), float(tool_threshold)
        self.tool_weights = normalise_tool_weights(tool_weights)
        self.inference_args = inference_arguments(inference_args)  # checked: a secret in the wrong key is never sent

    def spec(self, windowed: bool = False) -> MetricSpec:
        """This metric's declaration for :class:`~fair_forge_beam.engine.Engine`: the scorer (a
        ``DoFn``, or with the judge a ``PTransform`` through ``RunJudge``), the conversation
        reducer, the pass counts per slice and the slice estimator (an ``overall`` slice with
        ``n = 0`` for empty input)."""
        estimator = _SliceEstimator(self)
        return MetricSpec(
            name=self.name,
            scorer=_judge_scorer(self) if self.correctness_source == "judge" else _Score(self),
            interaction_record=None,
            session_interactions=True,
            session_value=part_value,
            session_order=_part_order,
            session_reducer=_Conversation(self),
            session_slice_combine=_SliceCombineFn(),
            estimator=estimator,
            empty_input_slices=estimator.empty_input,
            slices=self.slices,
            reads=self._reads(),
            evidence=_TaskEvidence(),
        )

    def _reads(self) -> frozenset:
        """The content fields :class:`_Score` reads: the tool trace and its ground truth; the judged
        question, answer and reference (``judge``); the first field of ``label_field`` (``label``)
        and of ``task_field`` when they are content fields."""
        out = {"agentic", "ground_truth_agentic"}
        if self.correctness_source == "judge":
            out |= {"query", "assistant", "ground_truth_assistant"}
        paths = ([self.label_field] if self.correctness_source == "label" else []) + ([self.task_field] if self.task_field else [])
        return frozenset(out | {p.split(".")[0] for p in paths if p.split(".")[0] in CONTENT_FIELDS})

    @classmethod
    def run(cls, retriever, k: int = None, verbose: bool = False, pipeline_args: Optional[Sequence[str]] = None, **kwargs) -> MetricResults:
        """Upstream-style one-shot run: ``Agentic.run(MyRetriever, k=3, judge=...)`` (or
        ``correctness_source="label"``). Returns a :class:`MetricResults` holding **one**
        :class:`AgenticMetric` **per conversation** (as upstream), with ``.interactions``,
        ``.sessions``, ``.slices``, ``.dead_letter``, ``.quality``."""
        res = super().run(retriever, verbose=verbose, pipeline_args=pipeline_args, k=k, **kwargs)
        out = MetricResults(res.sessions, res.sessions, res.slices, res.dead_letter, res.quality)
        out.interactions = res.interactions
        return out
