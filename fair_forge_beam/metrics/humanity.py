"""Humanity: emotional entropy and emotion alignment with the reference answer (spec §6.5).

Per interaction (spec §6.5): tokens = lower-cased ``\\b\\w+\\b`` matches of the answer after
the shared normalisation (:mod:`fair_forge_beam.components.text`: NFKC, zero-width characters
and soft hyphens dropped, a contraction such as "don't" one word — issue 13 item 10); each token found in the emotion lexicon adds 1 to each of its emotions; the
distribution is ``P(e) = count_e / Σ counts`` (all 0 with no hit); entropy
``H = −Σ_{P>0} P log₂ P`` (bits, 0…3); Spearman's ρ between the reference answer's and the
answer's 8-vectors (``scipy.stats.spearmanr``, average ranks), 0 when either vector has zero
variance, rounded to 3 decimals.

An interaction **has a reference** when its reference answer has an emotion profile: its 8
emotion counts are not all equal (in practice, it holds at least one lexicon word). Without one,
ρ is undefined; the interaction record keeps the spec's 0 (``humanity_ground_truth_spearman``)
and says so (``humanity_has_reference = False``), but session and slice means of Spearman rest only on the interactions with a reference
(``n_with_reference``), and are ``None`` (no estimate) when there is none — never a mean of
placeholder zeros (issue 28).

Beyond the original: session aggregates (weighted mean, spec §3.4 weights) and slice
aggregates (overall / per assistant / per language) of entropy and Spearman through the
statistical mode, with Bayesian-bootstrap credible intervals in Bayesian mode, and the pooled
emotion distribution per slice (Dirichlet posterior).

Declared for :class:`~fair_forge_beam.engine.Engine` (:meth:`Humanity.spec`): a score ``DoFn``
(lexicon loaded once per worker), a session reducer over the session's scores in turn order,
the slice combiners (bootstrap means, emotion counts) and an estimator seeded by key; the
engine builds the graph.
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple, Optional, Sequence

from fair_forge_beam._beam import beam
import numpy as np

from fair_forge_beam.components.emotion_lexicon import EMOTIONS, EmotionLexicon, NRCLexPackageLexicon
from fair_forge_beam.components.text import TOKEN_PIECE_CHARS, token_pieces, tokenize as _shared_tokenize
from fair_forge_beam.schemas.languages import normalize_language
from fair_forge_beam.io.elements import Interaction, QualityWarning, dead_letter
from fair_forge_beam.engine import (
    DEAD, SCORE_IDS, Evidence, MetricSpec, SessionReducer, SliceEstimator, repeated_turns, score_ids, session_key_text,
)
from fair_forge_beam.metrics.base import MetricTransform
from fair_forge_beam.quoting import quoted
from fair_forge_beam.slices import SLICE_DIMENSIONS
from fair_forge_beam.schemas.metric_info import EstimateInfo, MetricInfo, ParquetColumns, SessionHistogram
from fair_forge_beam.schemas.humanity import HumanityMetric, HumanitySessionMetric, HumanitySliceMetric
from fair_forge_beam.statistical.base import StatisticalMode
from fair_forge_beam.statistical.slices import (
    SLICE_BOOTSTRAPS,
    bootstrap_resampling,
    slice_bootstrap_means,
    slice_means_combiner,
)
from fair_forge_beam.schemas.common import Estimate
from fair_forge_beam.statistical.combiners import (
    CategoryCountCombineFn,
    OptionalCombineFn,
    StoredTupleCombineFn,
    estimate_distribution,
    session_mean_and_point_estimates_many,
)
from fair_forge_beam.arguments import checks_arguments

__all__ = ["Humanity", "has_reference", "tokenize", "emotion_counts", "emotion_distribution", "emotional_entropy", "spearman_alignment"]



# ------------------------------------------------------------------ per-interaction formulas
def tokenize(text: Optional[str], language: Optional[str] = None) -> list[str]:
    """Normalised word tokens, shared with Toxicity's HurtLex matching
    (:func:`fair_forge_beam.components.text.tokenize`: NFKC, zero-width characters and soft
    hyphens dropped, lower case, contractions one word): "Hello, World! This is a test." -> 6
    tokens (spec §6.5); "I don't know." -> ``["i", "don't", "know"]``."""
    return _shared_tokenize(text, language)


def emotion_counts(text: Optional[str], table: dict, language: Optional[str] = None) -> tuple[int, ...]:
    """Count vector over :data:`EMOTIONS`: +1 per emotion of every token found in ``table``. The words of
    a long answer are counted piece by piece (:func:`~fair_forge_beam.components.text.token_pieces`: the
    same words, memory bounded by a piece)."""
    counts = [0] * len(EMOTIONS)
    for words in (tokenize(text, language),) if not text or len(text) <= TOKEN_PIECE_CHARS else token_pieces(text, language):
        for emotions in filter(None, map(table.get, words)):  # lexicon words only (C-level scan)
            for i in emotions:
                counts[i] += 1
    return tuple(counts)


def emotion_distribution(counts: Sequence[int]) -> list[float]:
    """``count_e / Σ counts`` (all zeros when the total is 0)."""
    total = sum(counts)
    return [c / total for c in counts] if total else [0.0] * len(counts)


def emotional_entropy(distribution: Sequence[float]) -> float:
    """Shannon entropy in bits, ``−Σ_{P>0} P log₂ P``; 0 for a zero or one-hot vector, 3 for uniform over 8."""
    h = -math.fsum(p * math.log2(p) for p in distribution if p > 0)
    return h if h > 0 else 0.0  # never -0.0


def _doubled_average_ranks(v: Sequence[int]) -> list[int]:
    """2 × average ranks (1-based; ties share the mean rank), as exact integers."""
    n = len(v)
    order = sorted(range(n), key=v.__getitem__)
    out = [0] * n
    i = 0
    while i < n:
        j = i
        while j + 1 < n and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = i + j + 2
        i = j + 1
    return out


#: distinct (reference, answer) emotion-vector pairs :func:`spearman_alignment` remembers per process,
#: about 0.2-0.4 kB each (under 2 MB for 4,096). It was 65,536 (14-24 MB when full), a count an SDK
#: worker of a 1M-interaction audit on Flink fills (almost every pair of the bench's data is distinct)
#: and one of 100k does not (docs/performance.md, "Why the workers grew"); a pair repeated within the
#: last 4,096 is still answered from memory
SPEARMAN_CACHE_ENTRIES = 4096


@functools.lru_cache(maxsize=SPEARMAN_CACHE_ENTRIES)
def _spearman_cached(gt_counts: tuple, counts: tuple) -> float:
    # Spearman's rho = Pearson correlation of the average ranks (what scipy.stats.spearmanr
    # computes), evaluated with exact integer sums of doubled ranks; one rounding in the sqrt and
    # one in the division. Where the 3-decimal rounding could depend on the last bits (a value
    # within 1e-9 of a rounding boundary), scipy itself decides, so results always equal
    # round(scipy.stats.spearmanr(...).statistic, 3).
    x, y = _doubled_average_ranks(gt_counts), _doubled_average_ranks(counts)
    n = len(x)
    sx, sy = sum(x), sum(y)
    cov = n * sum(a * b for a, b in zip(x, y)) - sx * sy
    vx = n * sum(a * a for a in x) - sx * sx
    vy = n * sum(b * b for b in y) - sy * sy
    rho = cov / math.sqrt(vx * vy)
    scaled = abs(rho) * 1000.0
    if abs(scaled - math.floor(scaled) - 0.5) < 1e-6:
        from scipy import stats as sps  # rare: only near a rounding boundary

        rho = float(sps.spearmanr(np.asarray(gt_counts, dtype=float), np.asarray(counts, dtype=float)).statistic)
    return round(max(-1.0, min(1.0, rho)), 3)


def spearman_alignment(gt_counts: Sequence[int], counts: Sequence[int]) -> float:
    """Spearman's ρ between two emotion vectors (average ranks), rounded to 3 decimals; 0 when
    either vector has zero variance (spec §6.5). Equals ``round(scipy.stats.spearmanr(gt,
    answer).statistic, 3)``; ranks of proportions equal ranks of counts, so counts are compared.
    """
    gt, a = tuple(gt_counts), tuple(counts)
    if len(set(gt)) <= 1 or len(set(a)) <= 1:
        return 0.0
    return _spearman_cached(gt, a)


# ------------------------------------------------------------------ elements
HumanityScore = NamedTuple("HumanityScore", [
    *SCORE_IDS,
    ("weight", Optional[float]),
    ("entropy", float),
    ("spearman", Optional[float]),  # None: no reference emotion profile (has_reference)
    ("counts", tuple),
])


def has_reference(gt_counts: Sequence[int]) -> bool:
    """True when the reference answer's emotion counts (8 ints) are not all equal — the
    reference has an emotion profile to rank against (Spearman's ρ is undefined otherwise; spec
    §6.5 then sets it to 0)."""
    return len(set(gt_counts)) > 1


def _interaction_record(s: HumanityScore) -> dict:
    dist = emotion_distribution(s.counts)
    rec = {
        "humanity_assistant_emotional_entropy": s.entropy,
        # spec §6.5: 0 where the reference has no emotion profile (the aggregates leave it out)
        "humanity_ground_truth_spearman": 0.0 if s.spearman is None else s.spearman,
        "humanity_has_reference": s.spearman is not None,
    }
    for e, p in zip(EMOTIONS, dist):
        rec[f"humanity_assistant_{e}"] = p
    return rec


class _ScoreHumanity(beam.DoFn):
    def __init__(self, lexicon: EmotionLexicon):
        self.lexicon = lexicon

    def setup(self):
        self.lexicon.languages  # load the lexicon once per worker

    def process(self, x: Interaction):
        table = self.lexicon.table(x.language)
        if table is None:
            known = ", ".join(sorted(self.lexicon.languages)) or "none"
            return [
                beam.pvalue.TaggedOutput(
                    DEAD,
                    dead_letter(
                        "humanity",
                        f"no emotion lexicon for language {quoted(x.language)} (lexicon covers: {known})",
                        x._asdict(),
                        x.element_id,
                    ),
                )
            ]
        lang = normalize_language(x.language)
        counts = emotion_counts(x.assistant, table, lang)
        gt_counts = emotion_counts(x.ground_truth_assistant, table, lang)
        return [
            HumanityScore(
                *score_ids(x),
                weight=x.weight,
                entropy=emotional_entropy(emotion_distribution(counts)),
                spearman=spearman_alignment(gt_counts, counts) if has_reference(gt_counts) else None,
                counts=counts,
            )
        ]


class SessionValue(NamedTuple):
    """One interaction's contribution to its session (stored per session: docs/scheduled.md)."""

    turn_index: int
    weight: Optional[float]
    entropy: float
    spearman: Optional[float]  # None: the interaction has no reference (module docstring)
    counts: tuple[int, ...]


class SliceUnit(NamedTuple):
    """A session's bootstrap unit for a slice mean: its key text, weight (the interactions it
    contributes), point means (one value) and interactions."""

    key: str
    weight: float
    means: tuple[Optional[float], ...]
    n: int


class SliceValue(NamedTuple):
    """What a session gives its slices (stored per session: a roll-up reuses it): ``unit`` for
    the entropy mean (weight = its interactions), ``reference`` for the Spearman mean (weight =
    its interactions with a reference; ``None`` when it has none, so it is not one of the
    slice's Spearman sessions) and the pooled emotion counts."""

    unit: SliceUnit
    reference: Optional[SliceUnit]
    emotion_counts: tuple[int, ...]


def _session_value(s: HumanityScore) -> tuple:
    # small plain tuples (Beam's fast primitive coder); the session header is in the engine's key
    return (s.turn_index, s.weight, s.entropy, s.spearman, s.counts)


def _session_order(v: tuple) -> tuple:
    # a total order (duplicated turn indices from repeated records included): never arrival order
    return (v[0], v[1] is None, v[1] or 0.0, v[2], v[3], tuple(v[4]))


class _SessionReducer(SessionReducer):
    """Session record (weighted means of entropy over all interactions and of Spearman over the
    interactions with a reference, spec §3.4 weights) and the slice value
    ``((unit key, n, (mean entropy,), n), (unit key, k, (mean spearman,), k) or None, emotion counts)``
    with ``k`` = interactions with a reference."""

    def __init__(self, mode: StatisticalMode):
        self.mode = mode

    def reduce(self, key, items):
        return self.reduce_many([key], [items])[0]

    def reduce_many(self, keys, values):
        # the within-session bootstraps of all these sessions (entropy, then Spearman over the
        # interactions with a reference, with their own weights and turns) in one call: the same bits
        # as one call per session (session_mean_and_point_estimates_many)
        refs = [[v for v in items if v[3] is not None] for items in values]
        asks = [(np.array([(v[2],) for v in items], dtype=np.float64), [v[1] for v in items], [v[0] for v in items])
                for items in values]
        asks += [(np.array([(v[3],) for v in ref], dtype=np.float64), [v[1] for v in ref], [v[0] for v in ref])
                 for ref in refs if ref]
        answers = iter(session_mean_and_point_estimates_many(asks, self.mode, "humanity|within-session"))
        entropies = [next(answers) for _ in values]
        return [self._record(key, items, ref, entropy, next(answers) if ref else None)
                for key, items, ref, entropy in zip(keys, values, refs, entropies)]

    def _record(self, key, items, ref, entropy, spearman_estimates):
        session_id, assistant_id, language = key
        session_key = f"{session_id}/{assistant_id}"  # display key for warnings
        warnings = repeated_turns(key, [v[0] for v in items])
        est, point, warning = entropy
        if warning:
            warnings.append(QualityWarning("weights", session_key, warning))
        if ref:
            est_s, point_s, _ = spearman_estimates
            spearman, ref_unit = est_s[0], (session_key_text(key), float(len(ref)), (point_s[0].mean,), len(ref))
        else:
            spearman, ref_unit = Estimate(mean=None, n=0), None
        rec = {
            "metric": "humanity",
            "level": "session",
            "session_id": session_id,
            "assistant_id": assistant_id,
            "language": language,
            "n_interactions": len(items),
            "n_with_reference": len(ref),
            "mean_entropy": est[0].model_dump(),
            "mean_spearman": spearman.model_dump(),
        }
        unit = (session_key_text(key), float(len(items)), (point[0].mean,), len(items))
        counts = [sum(c) for c in zip(*(v[4] for v in items))]
        return rec, (unit, ref_unit, counts), warnings


class _Evidence(Evidence):
    """The sessions Spearman rests on (``"reference"``: an interaction with a reference emotion
    profile) and those the emotion shares rest on (``"emotions"``: an emotion word in an answer),
    from the session's slice value (:class:`~fair_forge_beam.engine.Evidence`)."""

    kinds = ("reference", "emotions")

    def of(self, values, slice_value) -> set:
        if slice_value is None:
            return set()
        _, ref_unit, counts = slice_value
        return {k for k, held in (("reference", ref_unit is not None), ("emotions", any(counts))) if held}


class _SliceEstimator(SliceEstimator):
    def __init__(self, mode: StatisticalMode, lexicon: EmotionLexicon, max_units: int):
        self.mode, self.lexicon, self.max_units = mode, lexicon, max_units

    def estimate(self, key, accs, window, aux):
        st, st_ref, counts = accs[1]
        # one slice-bootstrap path (statistical/slices.py), the one-session rule included; the
        # Spearman mean over the sessions with a reference only (the same keyed draws per session)
        (entropy,) = slice_bootstrap_means(st, self.mode, "humanity|sessions")
        resampling = bootstrap_resampling(st, self.mode)
        # Spearman rests on the sessions with a reference, the emotion shares on those with an
        # emotion word (the engine's one-session rule per estimate: an observed share from one)
        spearman = accs.rests_on("reference", self.mode, lambda m: slice_bootstrap_means(st_ref, m, "humanity|sessions")[0])
        dist = accs.rests_on("emotions", self.mode, lambda m: estimate_distribution(counts, EMOTIONS, m))
        rec = HumanitySliceMetric(
            slice=key,
            mode=self.mode.get_result_type(),
            n_interactions=st.n_items,
            n_with_reference=st_ref.n_items,
            n_sessions=accs.n_sessions,
            mean_entropy=entropy,
            mean_spearman=spearman,
            emotion_distribution=dist,
            resampling=resampling,
            lexicon=self.lexicon.name,
            lexicon_licence=self.lexicon.licence,
        )
        return [rec]


#: how to read Humanity's results (:class:`~fair_forge_beam.schemas.metric_info.MetricInfo`)
HUMANITY_INFO = MetricInfo(
    name="humanity",
    estimates=(
        EstimateInfo("mean_entropy", "emotional entropy (bits)",
                     "how spread the answer's emotion words are over the 8 NRC emotions, −Σ P(e) log₂ P(e) (spec §6.5); "
                     "0 = one emotion (or none), 3 = all eight equally; no better side",
                     unit="bits", value_range=(0.0, 3.0), gate="mean_entropy", headline=True),
        EstimateInfo("mean_spearman", "Spearman ρ vs reference emotions",
                     "rank correlation between the emotion counts of the answer and of the reference answer (spec "
                     "§6.5), over the interactions whose reference answer has emotion words (n_with_reference); "
                     "1 = same emotional profile, −1 = opposite; n/a (null) where none has",
                     unit="Spearman rank correlation", value_range=(-1.0, 1.0), direction=+1, reference=(">=", 0.0),
                     gate="mean_spearman", headline=True,
                     undefined="no interaction of the slice has a reference answer (ground_truth_assistant) with "
                               "emotion words"),
        EstimateInfo("emotion_distribution.{key}", "share of {key} words",
                     "share of the answers' emotion words (NRC lexicon) that carry this emotion (spec §6.5)",
                     unit="share of emotion words", gate="emotion", key_name="emotion", keys=tuple(EMOTIONS)),
    ),
    parquet=(ParquetColumns("fair_forge_beam.schemas.humanity:HumanityMetric",
                            ("humanity_assistant_emotional_entropy", "humanity_ground_truth_spearman",
                             "humanity_has_reference",
                             *(f"humanity_assistant_{e}" for e in EMOTIONS))),),
    session_histograms=(SessionHistogram("mean entropy (bits)", "mean_entropy.mean", (0, 3)),
                    SessionHistogram("mean Spearman ρ", "mean_spearman.mean", (-1, 1))),
    plot="plot_humanity",
)


class Humanity(MetricTransform):
    """``PCollection[Interaction]`` → Humanity results.

    Args:
        statistical_mode: :class:`FrequentistMode` (default) or :class:`BayesianMode` (or any
            :class:`StatisticalMode`).
        lexicon: an :class:`EmotionLexicon`; default :class:`NRCLexPackageLexicon` (English;
            NRC terms: non-commercial research/educational use only).
        slices: any of ``"overall"``, ``"assistant_id"``, ``"language"``, or the name of a session
            metadata field (e.g. ``"region"``: its values come from ``Interaction.slice_values``, see
            ``ReadInteractions(slice_fields=…)``; ``ValueError`` for a name that cannot be one).
        max_units: hash buckets of sessions for the slice-level Bayesian bootstrap (default 1024).
        slice_bootstrap: ``"buckets"`` (default: sessions pooled into ``max_units`` hash buckets,
            O(1) work per session) or ``"gamma"`` (DESIGN §4's accumulator: ``mc_samples``
            Gamma(1) draws per session keyed by the session, O(mc_samples) per session).

    Returns (``expand``): dict of PCollections ``interactions`` (dicts shaped as
    :class:`HumanityMetric`), ``sessions`` (:class:`HumanitySessionMetric`), ``slices``
    (:class:`HumanitySliceMetric`), ``dead_letter`` (interactions in a language the lexicon
    lacks) and ``quality``.
    """

    name = "humanity"
    info = HUMANITY_INFO
    interaction_schema = HumanityMetric
    session_schema = HumanitySessionMetric
    slice_schema = HumanitySliceMetric

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(
        self,
        statistical_mode: Optional[StatisticalMode] = None,
        lexicon: Optional[EmotionLexicon] = None,
        slices: Sequence[str] = SLICE_DIMENSIONS,
        max_units: int = 1024,
        slice_bootstrap: str = "buckets",
    ):
        super().__init__(statistical_mode, slices)
        if slice_bootstrap not in SLICE_BOOTSTRAPS:
            raise ValueError(f"slice_bootstrap must be 'buckets' or 'gamma', got {quoted(slice_bootstrap)}")
        self.lexicon = lexicon or NRCLexPackageLexicon()
        self.max_units = int(max_units)
        self.slice_bootstrap = slice_bootstrap

    def _means_combiner(self):
        return slice_means_combiner(1, self.mode, self.max_units, self.slice_bootstrap, "humanity|sessions-gamma")

    def spec(self, windowed: bool = False) -> MetricSpec:
        """This metric's declaration for :class:`~fair_forge_beam.engine.Engine`."""
        return MetricSpec(
            name=self.name,
            scorer=_ScoreHumanity(self.lexicon),
            interaction_record=_interaction_record,
            session_value=_session_value,
            session_order=_session_order,
            session_value_type=SessionValue,
            session_reducer=_SessionReducer(self.mode),
            session_slice_combine=StoredTupleCombineFn(
                self._means_combiner(), OptionalCombineFn(self._means_combiner()), CategoryCountCombineFn(EMOTIONS)),
            slice_value_type=SliceValue,
            estimator=_SliceEstimator(self.mode, self.lexicon, self.max_units),
            slices=self.slices,
            reads=frozenset({"assistant", "ground_truth_assistant"}),  # their emotions
            evidence=_Evidence(),
        )
