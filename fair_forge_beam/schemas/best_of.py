"""BestOf schemas: the judge's pairwise answer, contests, block results and the ranking per
slice (spec §5.2, §6.6, plus the Bradley–Terry ranking of the all-pairs mode).
"""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from fair_forge_beam.schemas.common import BaseMetric, Estimate

__all__ = ["BestOfJudgeOutput", "BestOfContest", "BestOfContestRecord", "BestOfMetric", "BestOfRanking", "BestOfSliceMetric",
           "BLOCK_STATUSES"]

#: ``decided``: a winner; ``walkover``: a single contestant, winner without a match;
#: ``tied``: all-pairs block whose top score is shared (no single winner);
#: ``failed``: a judgement failed (dead-lettered), so the block has no winner.
BLOCK_STATUSES = ("decided", "walkover", "tied", "failed")


class BestOfJudgeOutput(BaseModel):
    """The judge's answer for one match (spec §5.2, ``extra="forbid"``), with anonymous labels.

    ``winner``: ``"A"`` (first contestant shown), ``"B"`` (second) or ``"tie"`` — anything
    else fails validation, is re-asked and then dead-lettered (upstream turned an unknown name
    into a tie). ``confidence`` ∈ [0, 1]. ``reasoning``: strengths/weaknesses per contestant
    (free-form object, e.g. ``{"A": "...", "B": "..."}``).
    """

    model_config = ConfigDict(extra="forbid")

    winner: Literal["A", "B", "tie"] = Field(description='"A", "B" or "tie"')
    verdict: str = Field(description="one or two sentences stating the decision")
    confidence: float = Field(ge=0.0, le=1.0, description="confidence in the decision, 0 to 1")
    reasoning: dict[str, Any] = Field(default_factory=dict, description="strengths and weaknesses of A and of B")


class _Match(BaseModel):
    """A match's outcome, as a contest and its flat row both begin (see :class:`BestOfContest`)."""

    round: int
    left_id: str
    right_id: str
    winner_id: str
    confidence: float
    verdict: str = ""


class BestOfContest(_Match):
    """One match of a block (upstream ``BestOfContest`` fields).

    ``round``: 1-based match number within the block (king of the hill: in challenge order;
    all pairs: in pair order). ``left_id`` / ``right_id``: the contestants shown as A and B.
    ``winner_id``: ``left_id``, ``right_id`` or ``"tie"``. ``confidence`` ∈ [0, 1].
    ``thinkings``: the judge's reasoning text (reasoning channel / ``<think>``), None when empty.
    ``judged``: False when the verdict needed no judge (identical answers → tie).
    ``reasoning``: the judge's strengths and weaknesses per label (a value that is not text is
    kept as its JSON text).
    """

    model_config = ConfigDict(extra="ignore")

    reasoning: dict[str, str] = Field(default_factory=dict)
    thinkings: Optional[str] = None
    judged: bool = True


class _ContestPlace(BaseMetric):
    """Where a contest row stands: its block, question and turn (see :class:`BestOfContestRecord`)."""

    element_id: str
    block_id: str
    qa_id: str
    language: str = "english"
    turn_index: int = 0


class BestOfContestRecord(_Match, _ContestPlace):
    """A contest as a flat row (the ``interactions`` output of the pipeline, one Parquet row
    each). ``assistant_id`` = the contest's ``winner_id`` (``"tie"`` for a tie, as upstream's
    contest); ``element_id`` = ``"<block id>#<round>"``; ``turn_index`` = ``round``."""

    model_config = ConfigDict(extra="ignore")

    judged: bool = True


class BestOfMetric(BaseMetric):
    """One block: the contestants' answers to the same questions (upstream ``BestOfMetric``).

    * ``session_id``: the block's session; ``qa_id``: the question's id for a single-question
      block, else ``"batch_len_<n>"`` (as upstream); ``qa_ids``: every question of the block;
    * ``assistant_id`` = ``bestof_winner_id`` or ``""`` when there is no winner;
    * ``bestof_winner_id``: king of the hill — the king after the last match (after a tied last
      match, the king, never ``"tie"``: spec §17 item 4); all pairs — the contestant with the
      most points (win 1, tie ½); None when ``status`` is ``tied`` or ``failed``;
    * ``status``: one of :data:`BLOCK_STATUSES`; ``mode``: ``"king"`` or ``"all_pairs"``;
    * ``contestants``: ids in contest order (declared order, then the rest sorted by id);
    * ``points``: all pairs only, ``{id: wins + ties/2}`` in this block;
    * ``n_interactions``: interactions of the block (all contestants); ``n_failed``: matches
      whose judgement failed (they are in the dead letter).
    """

    model_config = ConfigDict(extra="ignore")

    block_id: str
    qa_id: str
    qa_ids: list[str] = Field(default_factory=list)
    language: str = "english"
    mode: str = "king"
    status: str
    bestof_winner_id: Optional[str] = None
    contestants: list[str] = Field(default_factory=list)
    points: dict[str, float] = Field(default_factory=dict)
    bestof_contests: list[BestOfContest] = Field(default_factory=list)
    n_interactions: int = 0
    n_failed: int = 0


class BestOfRanking(BaseModel):
    """One contestant in a slice's ranking.

    ``rank``: 1 = best, by the Bradley–Terry strength when it exists (the MLE; Bayesian: the
    posterior mode), else by the win rate; equal estimates share a rank (standard competition
    ranking: 1, 1, 3; strengths within ``STRENGTH_TIE_TOLERANCE`` are equal), never broken by id or
    by the MC draws; None for a contestant with no judged match (docs/metrics/bestof.md, ties).
    ``blocks``: blocks entered; ``blocks_won``: blocks it won. ``wins`` / ``losses`` / ``ties``:
    judged matches. ``win_rate`` = (wins + ties/2) / matches, None without matches.
    ``strength``: Bradley–Terry log-strength (sum 0 over ranked contestants; ``mean`` None
    when it does not exist) with its interval: frequentist — Wald confidence interval from the
    Fisher information; Bayesian — Laplace-approximation credible interval (``ci_level``).
    ``rating``: the same on the Elo scale, ``1000 + 400·β/ln 10``. ``prob_best`` and
    ``mean_rank``: Bayesian only (MC from the Laplace posterior, seeded by slice).
    """

    model_config = ConfigDict(extra="ignore")

    assistant_id: str
    rank: Optional[int] = None
    blocks: int = 0
    blocks_won: int = 0
    wins: int = 0
    losses: int = 0
    ties: int = 0
    win_rate: Optional[float] = None
    strength: Estimate = Field(default_factory=Estimate)
    rating: Optional[float] = None
    prob_best: Optional[float] = None
    mean_rank: Optional[float] = None


class BestOfSliceMetric(BaseModel):
    """Ranking over a slice (``overall``, ``language=<name>``) of all its blocks.

    ``n_blocks`` (blocks holding a contest: the engine's count of scored sessions, docs/engine.md;
    a walkover or a block whose every match failed is not counted), ``n_interactions``,
    ``n_contests`` (judged matches), ``n_failed`` (failed judgements). ``leader``: the one rank-1
    contestant, None when several share rank 1 (equal estimates) or no match was judged;
    ``leader_win_rate``: its win rate as an :class:`Estimate`. ``estimator``: what produced the
    strengths (MLE / Laplace posterior, ties as half wins; "not estimated: …" without a judged
    match); ``mle_exists``: Ford's condition on the verdict graph, None without a judged match.
    """

    model_config = ConfigDict(extra="ignore")

    slice: str
    mode: str
    bestof_mode: str
    n_blocks: int
    n_interactions: int
    n_contests: int
    n_failed: int = 0
    leader: Optional[str] = None
    leader_win_rate: Estimate = Field(default_factory=Estimate)
    ranking: list[BestOfRanking] = Field(default_factory=list)
    estimator: str = ""
    mle_exists: Optional[bool] = None
    judge_model: str = ""
