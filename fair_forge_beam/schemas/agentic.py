"""Result schemas of the Agentic metric (spec §6.7): field names of the original kept.

Per interaction: :class:`AgenticInteraction`; per conversation: :class:`AgenticMetric` (the
original's result object, plus the conversation-level tool correctness); per slice:
:class:`AgenticSliceMetric` (beyond the original: per-task unbiased / Bayesian pass@k and pass^k
over repeated trials, for every ``k`` from 1 to the requested one).
"""
from __future__ import annotations

from typing import Optional

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from fair_forge_beam.schemas.common import BaseMetric, Estimate

__all__ = [
    "AnswerCorrectnessOutput",
    "ToolCorrectnessScore",
    "AgenticInteraction",
    "AgenticMetric",
    "PassKPoint",
    "AgenticSliceMetric",
]


class AnswerCorrectnessOutput(BaseModel):
    """The judge's answer (spec §5.2): ``correctness_score`` in [0, 1] and its reasoning."""

    model_config = ConfigDict(extra="forbid")

    correctness_score: float = Field(ge=0.0, le=1.0)
    reasoning: str = ""


class ToolCorrectnessScore(BaseModel):
    """Deterministic tool-use correctness (spec §6.7); every number in [0, 1].

    ``tool_selection_accuracy`` is the original's ``tool_selection_correct`` (renamed here: it
    is a fraction, not a flag). The original name stays readable: it is accepted when building
    or validating a score (``ToolCorrectnessScore(tool_selection_correct=0.5, ...)``,
    ``model_validate`` of a dict written by the original) and is an attribute of every score;
    outputs use ``tool_selection_accuracy``. docs/differences.md lists every renamed field.
    """

    model_config = ConfigDict(populate_by_name=True)

    tool_selection_accuracy: float = Field(
        ge=0.0, le=1.0, validation_alias=AliasChoices("tool_selection_accuracy", "tool_selection_correct")
    )
    parameter_accuracy: float = Field(ge=0.0, le=1.0)
    sequence_correct: float = Field(ge=0.0, le=1.0)
    result_utilization: float = Field(ge=0.0, le=1.0)
    overall_correctness: float = Field(ge=0.0, le=1.0)
    is_correct: bool
    reasoning: str = ""

    @property
    def tool_selection_correct(self) -> float:
        """The original's name of :attr:`tool_selection_accuracy` (same value)."""
        return self.tool_selection_accuracy


class AgenticInteraction(BaseMetric):
    """One scored interaction.

    ``correctness_score`` in [0, 1]: the judge's score, or the label's value (booleans as 0/1),
    or the tool ``overall_correctness`` — per ``correctness_source``; ``is_correct`` =
    ``correctness_score ≥ threshold``. ``tool_correctness`` is ``None`` without
    ``ground_truth_agentic.expected_tools``.
    """

    metric: str = "agentic"
    level: str = "interaction"
    element_id: str
    language: str
    turn_index: int
    qa_id: str
    task_id: Optional[str] = None
    correctness_source: str
    correctness_score: float = Field(ge=0.0, le=1.0)
    is_correct: bool
    tool_correctness: Optional[ToolCorrectnessScore] = None
    reasoning: Optional[str] = None


class AgenticMetric(BaseMetric):
    """One conversation (upstream ``AgenticMetric``).

    ``total_interactions`` = ``n`` (scored interactions), ``correct_interactions`` = ``c``;
    ``correct_indices`` are **turn indices** (0-based positions in the conversation);
    ``correctness_scores`` / ``tool_correctness_scores`` are in turn order. ``pass_at_k`` /
    ``pass_pow_k``: frequentist plug-in ``1 − (1 − c/n)^k`` / ``(c/n)^k``; Bayesian: closed-form
    posterior means under ``Beta(a + c, b + n − c)`` with exact credible intervals
    (``*_ci_low`` / ``*_ci_high``). ``None`` when ``n = 0``. ``n_failed``: interactions without a
    correctness (dead-lettered). ``conversation_tool_correctness``: tool use of the whole
    conversation against all its expected tools (see :mod:`fair_forge_beam.components.tool_correctness`).
    """

    metric: str = "agentic"
    level: str = "session"
    language: str
    task_id: Optional[str] = None
    n_interactions: int
    n_failed: int = 0
    total_interactions: int
    correct_interactions: int
    is_fully_correct: bool
    threshold: float
    correctness_scores: list[float]
    correct_indices: list[int]
    tool_correctness_scores: list[Optional[ToolCorrectnessScore]]
    conversation_tool_correctness: Optional[ToolCorrectnessScore] = None
    k: int
    pass_at_k: Optional[float] = None
    pass_at_k_ci_low: Optional[float] = None
    pass_at_k_ci_high: Optional[float] = None
    pass_pow_k: Optional[float] = None
    pass_pow_k_ci_low: Optional[float] = None
    pass_pow_k_ci_high: Optional[float] = None
    #: Bayesian mode: why pass^k may differ from ``is_fully_correct`` (both are kept; they answer
    #: different questions). ``None`` in frequentist mode, where the plug-in agrees with it.
    pass_k_note: Optional[str] = None


class PassKPoint(BaseModel):
    """pass@k and pass^k at one ``k``: per task over its trials (``n`` of each estimate = tasks
    used), and the mean of the per-conversation values (upstream's plug-in, over conversations)."""

    k: int
    pass_at_k: Estimate
    pass_pow_k: Estimate
    conversation_pass_at_k: Estimate
    conversation_pass_pow_k: Estimate


class AgenticSliceMetric(BaseModel):
    """Aggregate of one slice (``overall``, ``assistant_id=…``, ``language=…``).

    ``pass_at_k`` / ``pass_pow_k`` (headline, at the requested ``k``): per-task estimators over
    repeated trials of a task (``task_id``), averaged over tasks — frequentist: unbiased
    ``1 − C(n−c,k)/C(n,k)`` (Chen et al. 2021) and ``C(c,k)/C(n,k)`` (Yao et al. 2024) over
    tasks with at least ``k`` trials; Bayesian: posterior of the task average with a
    Monte-Carlo credible interval. ``curve`` repeats this for ``k = 1 … k``. A trial succeeds
    when every scored interaction of its conversation is correct. ``success_rate``: successful
    conversations / conversations with ``n > 0`` (Beta posterior in Bayesian mode).
    ``n_sessions``: conversations with at least one scored interaction (the engine's count,
    docs/engine.md).
    """

    slice: str
    mode: str
    k: int
    n_interactions: int
    n_correct: int
    n_failed: int
    n_sessions: int
    n_fully_correct: int
    n_tasks: int
    n_sessions_without_task: int
    success_rate: Estimate
    pass_at_k: Estimate
    pass_pow_k: Estimate
    curve: list[PassKPoint]
    correctness_source: str
