"""One metric engine: a metric declares its scorer, combiners and estimator; the engine builds the graph.

A metric is a :class:`MetricSpec` (after TFMA's metrics evaluator, where each metric declares
its computations and the evaluator derives one combiner per slice for all of them):

* ``scorer`` — a ``DoFn`` (or a ``PTransform`` such as ``RunInference`` with its parsing, see
  :class:`MetricSpec`) from one ``Interaction`` (or, with ``batch_size``, a list of them) to
  score tuples; what it cannot score it yields as ``TaggedOutput("dead_letter", …)``, data
  warnings as ``TaggedOutput("quality", …)`` (a finding made per interaction as an
  :class:`~fair_forge_beam.io.elements.InteractionWarning`: one warning per session and kind, see
  ``MetricSpec.interaction_warnings``), anything for an auxiliary stage as
  ``TaggedOutput("aux", …)``. A score tuple carries ``session_id``, ``assistant_id`` and
  ``language``.
* ``interaction_record(score) -> dict`` — its per-interaction output record (``None``: the
  metric's interaction records come from its session reducer, see ``session_interactions``).
* ``session_value(score)`` and ``session_combine`` — what one interaction adds to its session,
  combined by a ``CombineFn`` (``None``: the session's values as a list, sorted by
  ``session_order``, a total order — never arrival order).
* ``session_reducer.reduce(key, combined)`` — ``key`` is the tuple ``(session_id,
  assistant_id, language)``; returns ``(session record or None, slice value or None,
  [QualityWarning, …])``. The engine calls ``session_reducer.reduce_many(keys, values)`` with
  the sessions of a bundle (up to :data:`SESSION_REDUCE_BATCH`; default: ``reduce`` per session),
  for a reducer that pays per-call costs once for many sessions.
* ``cell_value(score)`` + ``interaction_slice_combine`` and/or ``session_slice_combine`` — the
  per-slice statistics (``CombineFn``\\ s from :mod:`fair_forge_beam.statistical` whose
  ``extract_output`` is their accumulator).
* ``estimator.estimate(slice_key, accs, window, aux)`` — the slice records; ``accs`` is a
  :class:`SliceAccumulators` ``(interaction_acc, session_acc, n_sessions)`` (either accumulator
  is ``None`` when nothing reached that side of the slice; ``n_sessions`` is the engine's count of
  the slice's sessions in which the metric scored something, see :func:`session_scored`: the
  count every slice record states and the one-session rule reads). The engine applies that rule to
  every record the estimator returns (:func:`~fair_forge_beam.statistical.slices.without_one_session_intervals`).

:class:`Engine` owns the rest, for every metric of a run at once:

``Interaction`` → per metric: scorer (+ ``BatchElements``) fused with the routing of its
outputs → **one** per-session combine over all metrics (key: the tuple
``(session_id, assistant_id, language)``; accumulator: one slot per metric; in batch its
pre-combine holds at most :data:`SESSION_TABLE_KEYS` sessions, never Beam's lifted table of
100,000: :func:`~fair_forge_beam.streaming.combine.combine_per_key`'s ``table_keys``) → one session
``DoFn`` → **one** :class:`CombineSlices` over all metrics (key:
the finest cell, rolled up into ``overall``, ``assistant_id=…``, ``language=…``) → one estimator
``DoFn``. Windowed input goes through the same graph: the per-key combines group per window
(:func:`~fair_forge_beam.streaming.combine.combine_per_key`) and ``CombineSlices`` accumulates
panes. Output: per metric the dict of PCollections ``interactions``, ``sessions``, ``slices``,
``dead_letter``, ``quality`` (what :class:`~fair_forge_beam.metrics.base.MetricTransform`'s
``expand`` returns too).

Slice dimensions: a cell is the tuple ``(assistant_id, language, *metadata values)``
(:func:`~fair_forge_beam.slices.cell_fields`); a slice key is ``"overall"`` or ``"<field>=<value>"``. A name in
``slices`` other than ``overall``, ``assistant_id`` and ``language`` is a session metadata field
(:func:`~fair_forge_beam.slices.metadata_dimensions`): the reader keeps its value in ``Interaction.slice_values``, one
more slot of the session combine takes each session's values (:class:`MetadataDimsCombineFn`),
and the interaction-side cell values of the metrics go through the session stage as well (each
session's values reach the cells as one :class:`Values` input), since only the session stage
knows a session's metadata. Without metadata dimensions the graph is the one above.
"""
from __future__ import annotations

import collections.abc as abc
import json
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence

from fair_forge_beam._beam import beam
from fair_forge_beam.io.elements import DEAD, QUALITY, FindingsFn, InteractionWarning
from fair_forge_beam.quoting import quoted, shown
from fair_forge_beam.slices import MISSING_VALUE, SLICE_DIMENSIONS, cell_fields, metadata_dimensions, metadata_values
from fair_forge_beam.statistical.combiners import StoredAccumulator, StoredParts, SumCombineFn, WrappedCombineFn, merge_into

__all__ = [
    "MetricSpec",
    "GroupPerSession",
    "CONTENT_FIELDS",
    "fields_read",
    "SessionReducer",
    "SliceEstimator",
    "CombineSlices",
    "Engine",
    "FusedCombineFn",
    "PairCombineFn",
    "Evidence",
    "apply_metrics",
    "engine_spec",
    "session_key_text",
    "session_key_of",
    "SessionPart",
    "part_value",
    "DEAD",
    "QUALITY",
    "AUX",
    "panes_metadata_problem",
    "Values",
    "SessionLayout",
    "MetadataDimsCombineFn",
    "FindingsCombineFn",
    "headed",
    "interaction_ids",
    "Scored",
    "SCORE_IDS",
    "score_ids",
    "repeated_turns",
    "Reduced",
    "Corrected",
    "STORED",
    "slice_combiner",
    "SliceAccumulators",
    "session_scored",
    "session_flags",
]

#: the tag of :class:`_ReduceSessions`' ``(session key, accumulators, slice values, warnings)``
#: output, given to ``on_session_accumulators``
STORED = "stored"

AUX = "aux"
#: most sessions the session combine's pre-combine holds per bundle (oldest flushed first): a session's
#: values arrive within a scorer batch or two of each other (2,048 interactions), and 4,096 accumulators
#: of about 4 kB are about 16 MB per worker at any size (docs/performance.md, "Why the workers grew")
SESSION_TABLE_KEYS = 4096
#: sessions :class:`_ReduceSessions` holds before its reducers' ``reduce_many`` (fewer at a bundle's end)
SESSION_REDUCE_BATCH = 256
#: characters of an interaction's texts that count as one more interaction in a scorer batch
#: (:func:`batch_weight`): a batch of ``batch_size`` holds at most about ``batch_size`` × this many
#: characters, plus one interaction, whatever the answers' lengths (2,048 × 8,192: 16 M characters)
BATCH_TEXT_UNIT = 8192


def batch_weight(x) -> int:
    """What one interaction ``x`` counts for in a scorer batch (``BatchElements``' ``element_size_fn``):
    1, plus 1 per :data:`BATCH_TEXT_UNIT` characters of its answer, query and context. Interactions of
    everyday length count 1, so a batch is ``batch_size`` of them; long texts close a batch earlier,
    so a scorer never holds ``batch_size`` answers of up to ``--max-record-bytes`` each (a batch of
    2,048 answers of 1 MB held 2 GB). Scores do not depend on the batch (a scorer's contract)."""
    chars = sum(len(t) for t in (getattr(x, "assistant", None), getattr(x, "query", None),
                                 getattr(x, "context", None)) if isinstance(t, str))
    return 1 + chars // BATCH_TEXT_UNIT


class GroupPerSession(beam.PTransform):
    """``(session key, value)`` → ``(session key, [values])``, the values in no particular order (a
    consumer sorts them), with the session combine's bounded pre-combine (:data:`SESSION_TABLE_KEYS`
    sessions per bundle, :func:`~fair_forge_beam.streaming.combine.combine_per_key`) instead of
    Beam's lifted table of up to 100,000 sessions' lists of turns: a metric that builds its judge
    requests from a whole session (Conversational, Role adherence, BestOf's blocks) groups with it."""

    def expand(self, pcoll):
        from fair_forge_beam.streaming.combine import combine_per_key

        return pcoll | "ToList" >> combine_per_key(beam.combiners.ToListCombineFn(), pcoll, SESSION_TABLE_KEYS)


class SessionReducer:
    """Turns one session's combined value into its record. Override :meth:`reduce`;
    :meth:`setup` runs once per worker (row caches, lexicons)."""

    def setup(self) -> None:
        pass

    def reduce(self, key: tuple, combined: Any) -> tuple:
        """``key`` = ``(session_id, assistant_id, language)`` → ``(record dict or None, slice
        value or None, list of QualityWarning)``, plus a fourth item, the list of the session's
        interaction record dicts, for a metric declared with ``session_interactions``."""
        raise NotImplementedError

    def reduce_many(self, keys: Sequence[tuple], values: Sequence[Any]) -> list:
        """``[reduce(key, value) for key, value in zip(keys, values)]``, what the engine calls for
        the sessions of a bundle it holds (up to :data:`SESSION_REDUCE_BATCH`, in any grouping:
        one session's result must not depend on the others'). Override it to pay per-call costs
        once for many sessions (Humanity's within-session bootstraps)."""
        return [self.reduce(k, v) for k, v in zip(keys, values)]


class SliceEstimator:
    """Turns one slice's accumulators into its records. Override :meth:`estimate`."""

    def setup(self) -> None:
        pass

    def estimate(self, key: str, accs: tuple, window, aux: Sequence) -> list:
        """``key`` = slice key, ``accs`` = ``(interaction-side acc or None, session-side acc or
        None)``, ``window`` = the Beam window, ``aux`` = the metric's auxiliary records (empty
        list without an auxiliary stage) → list of slice record dicts."""
        raise NotImplementedError


@dataclass(frozen=True)
class MetricSpec:
    """Declaration of one metric for :class:`Engine` (see the module docstring).

    Attributes:
        name: metric name (``"humanity"``); tags and labels of its part of the graph.
        scorer: ``DoFn`` producing score tuples (see the module docstring), a plain function
            from one interaction to its score tuple (``None``: no score, a dead letter of the
            interaction, docs/engine.md), or a ``PTransform``
            (``RunInference`` with a model handler and its parsing) from interactions to a dict
            ``{"scores": PCollection, "dead_letter": PCollection[, "quality": PCollection][, "aux":
            PCollection]}`` (``"aux"``: records handed to the estimator, like ``aux``'s).
        interaction_record: score → per-interaction record dict (or ``None``: that score has
            none); ``None`` when the records are only known per session (``session_interactions``).
        session_value: score → what it adds to its session (``None``: the metric has no sessions).
        session_reducer: :class:`SessionReducer`.
        session_combine: ``CombineFn`` of session values; ``None`` collects them in a list sorted by
            ``session_order``.
        session_order: total-order key of session values (for ``session_combine=None``; default:
            the values' own order).
        cell_value: score → its contribution to its slice cell (``None``: none).
        interaction_slice_combine: ``CombineFn`` of ``cell_value``\\ s (output = accumulator).
        session_slice_combine: ``CombineFn`` of the reducer's slice values (output = accumulator).
        estimator: :class:`SliceEstimator`.
        slices: slice dimensions (``"overall"``, ``"assistant_id"``, ``"language"``).
        batch_size: score batches of at most this many interactions (``BatchElements``; an
            interaction with long texts counts for more, :func:`batch_weight`); ``None``: one
            interaction per call.
        aux: optional ``PCollection[aux values] -> (PCollection[record], PCollection[dead letter])``
            run on the scorer's ``"aux"`` output (batch only); its records reach the estimator.
        min_batch_size: with ``batch_size``, ``BatchElements``' lower bound (default
            ``min(64, batch_size)``).
        session_interactions: the session reducer returns a fourth item, the session's
            per-interaction record dicts (for metrics whose interaction record needs the whole
            session, e.g. a judge verdict joined to its interaction); they join the
            ``interactions`` output.
        empty_input_slices: ``() -> [slice record, …]``, the metric's slices when the run has
            no interaction at all (e.g. an ``overall`` slice with ``n = 0``); ``None``: no slice.
        session_value_type, cell_value_type: the declaration of one session value (when
            ``session_combine`` is ``None``) and of one cell value — a ``typing.NamedTuple`` class
            (:func:`~fair_forge_beam.schemas.arrow.value_type`); with them the session stage's
            accumulators can be stored as typed columns and rolled up later
            (:mod:`fair_forge_beam.io.session_stats`). ``None``: not storable.
        slice_value_type: the declaration of the session reducer's slice value (what it gives
            ``session_slice_combine``; e.g. ``int``, or a ``typing.NamedTuple``): with it the
            stored statistics keep each session's slice value, and a roll-up takes a session found
            in one run only straight to the slices, without reducing it again. ``None``: a roll-up
            reduces every session of this metric again.
        scored: ``session record dict -> bool``, whether the metric scored something in that
            session (:func:`session_scored`; ``None``: its ``n_interactions`` is above 0). A
            session it does not pass is read and left out of the estimates after a verdict
            (results.json's ``interactions_left_out``: BestOf's walkovers, Regulatory's
            IRRELEVANT-only sessions), unless the test returns ``None``: the metric judged nothing
            in it (every judgement failed: its dead letters say why), so its interactions are
            only not scored, as a dead-lettered interaction of any metric
            (:func:`~fair_forge_beam.reports.results.session_outcome`; the empty-run rule,
            :mod:`~fair_forge_beam.reports.empty_run`).
        evidence: the kinds of per-session evidence some of the metric's estimates rest on
            (:class:`Evidence`: e.g. Toxicity's group-fairness estimates rest on the sessions whose
            answers name a group): the slice combine counts, per kind, the scored sessions that
            hold it (:attr:`SliceAccumulators.evidence`), so an estimate counts the sessions behind
            it and the one-session rule holds per estimate. ``None``: every estimate rests on the
            slice's scored sessions.
        interaction_warnings: the scorer emits data-quality findings per interaction as
            :class:`~fair_forge_beam.io.elements.InteractionWarning` (``TaggedOutput("quality",
            …)``); they travel in the session combine (a slot of the metric's,
            :class:`FindingsCombineFn`: per kind the count and the first example) and the session
            stage makes them one warning per session and kind. Stored with the session's
            statistics (``<metric>__findings``), so a roll-up merges a cut session's parts and
            warns once, as one audit of every run's inputs does.
        reads: the interaction content fields (:data:`CONTENT_FIELDS`) the metric reads, as this
            instance is configured (e.g. Privacy's ``text_field``); the reader gives its
            data-quality warnings about a field (``empty_answer``: ``assistant``) only when a
            metric of the run reads it (:func:`fields_read`). ``None``: not declared — the metric
            may read any field, and every such warning is given.
        info: the metric's :class:`~fair_forge_beam.schemas.metric_info.MetricInfo`: the value
            ranges its estimates declare are checked on every slice record
            (:func:`outside_range_warnings`). ``None``: :func:`engine_spec` and a metric's
            ``PTransform`` fill it from the metric's ``info``; without one nothing is checked.
    """

    name: str
    scorer: Any  # a DoFn, a function or a PTransform
    interaction_record: Optional[Callable[[Any], dict]]
    session_value: Optional[Callable[[Any], Any]]
    session_reducer: Optional[SessionReducer]
    estimator: SliceEstimator
    session_combine: Optional[beam.CombineFn] = None
    session_order: Optional[Callable[[Any], Any]] = None
    cell_value: Optional[Callable[[Any], Any]] = None
    interaction_slice_combine: Optional[beam.CombineFn] = None
    session_slice_combine: Optional[beam.CombineFn] = None
    slices: tuple = SLICE_DIMENSIONS
    batch_size: Optional[int] = None
    aux: Optional[Callable[[Any], tuple]] = None
    min_batch_size: Optional[int] = None
    session_interactions: bool = False
    empty_input_slices: Optional[Callable[[], list]] = None
    session_value_type: Any = None
    cell_value_type: Any = None
    slice_value_type: Any = None
    interaction_warnings: bool = False
    scored: Optional[Callable[[dict], bool]] = None
    reads: Optional[frozenset] = None
    evidence: Optional["Evidence"] = None
    info: Any = None

    def __post_init__(self):
        from fair_forge_beam.schemas.metric_info import MetricInfo, agreeing_name, check_metric_name

        check_metric_name(self.name, "MetricSpec: the name")
        if isinstance(self.info, MetricInfo):  # trial37b B3: the slices said one name, the info's readers another
            agreeing_name([("MetricSpec.name", self.name), ("MetricSpec.info.name", self.info.name)],
                          "give the spec the info of the metric it declares")
        if self.reads is not None:
            unknown = sorted(set(self.reads) - set(CONTENT_FIELDS))
            if unknown:
                raise ValueError(f"{self.name}: reads names no interaction content field: {unknown} "
                                 f"(one of {list(CONTENT_FIELDS)})")
            object.__setattr__(self, "reads", frozenset(self.reads))


#: the interaction fields a metric declares reading (:attr:`MetricSpec.reads`): its content. The ids,
#: language, turn index and weight are not declared (every metric's records and sessions carry them).
CONTENT_FIELDS = ("context", "query", "assistant", "ground_truth_assistant", "observation", "agentic",
                  "ground_truth_agentic", "logprobs", "chatbot_role", "spans")


def fields_read(specs) -> Optional[frozenset]:
    """The content fields the metrics of ``specs`` (:class:`MetricSpec`) read, together: the union
    of their :attr:`~MetricSpec.reads`; ``None`` when one of them does not declare it (any field
    may be read)."""
    out: set = set()
    for spec in specs:
        if spec.reads is None:
            return None
        out |= spec.reads
    return frozenset(out)


# ------------------------------------------------------------------ slice roll-up
class _MergeCombineFn(WrappedCombineFn):
    """Combines *outputs* of ``inner`` (accumulators) by merging them: each into the accumulator
    (:func:`~fair_forge_beam.statistical.combiners.merge_into`; an input, which ``CombineSlices``
    sends to several slices, is never changed), and the accumulators into the first."""

    def add_input(self, acc, element):
        return merge_into(self.inner, acc, element)

    def merge_accumulators(self, accumulators):
        return _merge_all(self.inner, accumulators)


def merge_stored_slices(parts, fused: "FusedCombineFn") -> list:
    """``(slice key, [slice accumulator per slot])`` pairs (several runs' stored slices, in any
    order) → one merged pair per slice key, as ``CombinePerKey(_MergeCombineFn(fused))`` makes
    it (each part merged into a fresh accumulator, compacted, extracted): an
    :class:`Engine`'s ``stored_slices`` with ``stored_slices_merged``."""
    fn = _MergeCombineFn(fused)
    accs: dict = {}
    for key, value in parts:
        accs[key] = fn.add_input(accs[key] if key in accs else fn.create_accumulator(), value)
    return [(key, fn.extract_output(fn.merge_accumulators([fn.compact(acc)]))) for key, acc in accs.items()]


def _merge_all(fn, accumulators):
    """``fn.merge_accumulators(accumulators)``, merged into the first (Beam's contract allows it)."""
    it = iter(accumulators)
    out = next(it, None)
    if out is None:
        return fn.create_accumulator()
    for a in it:
        out = merge_into(fn, out, a)
    return out


class CombineSlices(beam.PTransform):
    """``(cell, value)`` → ``(slice key, combined)`` for every requested slice, by roll-up.

    Values are first combined once per finest cell ``(assistant_id, language, *metadata
    values)`` (:func:`~fair_forge_beam.slices.cell_fields`); the cells' accumulators are then merged into the slices
    (``overall``, ``assistant_id=…``, ``language=…``, ``<metadata field>=…``), as a cube roll-up: each value passes through ``combine_fn.add_input`` once,
    however many slices are asked for. ``combine_fn.extract_output`` must return an accumulator
    (true of every CombineFn in :mod:`fair_forge_beam.statistical.combiners`).

    In windows that can fire several panes (early firings, allowed lateness), the input carries
    per-pane deltas and the slice merge accumulates them, so every output pane covers all the
    window has received so far (see :mod:`fair_forge_beam.streaming.windows`).
    """

    def __init__(self, combine_fn: beam.CombineFn, slices: Sequence[str]):
        super().__init__()
        self.combine_fn, self.slices = combine_fn, tuple(slices)

    def expand(self, pcoll):
        slices = self.slices
        fields = cell_fields(slices)  # a cell: (assistant_id, language, *metadata values)
        where = [None if s == "overall" else (s, fields.index(s)) for s in slices]

        def to_slices(kv):
            cell, acc = kv
            return [("overall" if w is None else f"{w[0]}={cell[w[1]]}", acc) for w in where]

        from fair_forge_beam.streaming.combine import combine_per_key
        from fair_forge_beam.streaming.windows import EmptyPaneSafeCombineFn, accumulating_windowing, needs_accumulating_merge

        panes = needs_accumulating_merge(pcoll.windowing)
        cell_fn = EmptyPaneSafeCombineFn(self.combine_fn) if panes else self.combine_fn
        cells = (
            pcoll
            | "CombineCells" >> combine_per_key(cell_fn, pcoll)
            | "CellsToSlices" >> beam.FlatMap(to_slices)
        )
        if panes:
            cells = cells | "AccumulateWindow" >> accumulating_windowing(pcoll.windowing)
        return cells | "MergeSlices" >> combine_per_key(_MergeCombineFn(cell_fn), cells)


# ------------------------------------------------------------------ combiners
def _merge_slots(fns, accs: list) -> list:
    """Slot-wise merge of sparse accumulators. A slot is merged as if every accumulator held one
    (``None`` = empty): when the first accumulator lacks it, the merge goes into a fresh one, so
    an inner ``merge_accumulators`` that mutates its first argument never writes into an input
    (``CombineSlices`` sends one cell accumulator to several slices)."""
    out = [None] * len(fns)
    for i, fn in enumerate(fns):
        parts = [a[i] for a in accs if a[i] is not None]
        if not parts:
            continue
        if accs[0][i] is None:
            parts.insert(0, fn.create_accumulator())
        out[i] = fn.merge_accumulators(parts)
    return out


class Values(NamedTuple):
    """An input of :class:`PairCombineFn` that stands for several inputs of that side's
    ``CombineFn``, each added in turn: the interaction-side values of one session, which reach
    the slices through the session stage (only that stage knows a session's metadata values,
    and it is what stored statistics keep)."""

    items: Any


class Reduced(NamedTuple):
    """A session already through the session stage (a roll-up's session found in one run only: its
    stored outputs): ``slots`` holds, per slot of the :class:`SessionLayout`, the metric's slice
    value (slot ``i``), its interaction-side cell values (slot ``n + i``) and the metadata slice
    values (the dims slot), ``None`` where nothing. :class:`Engine` with ``from_accumulators``
    takes it in place of the accumulators: the values go to the slices as they are, with no
    reduce, no session record and no warning (the run stored those). ``scored``: per metric slot,
    the session's flags as the run stored them (:func:`session_flags`: scored, evidence held;
    ``None``, or ``None`` at a slot: the session counts when it has interaction-side values there)."""

    slots: Any
    scored: Any = None


class Corrected(NamedTuple):
    """A session's accumulators (the input of :class:`Engine` with ``from_accumulators``) whose
    interaction-side cell values reach the slices only in part: ``cells`` maps a cell slot to the
    values sent in place of the slot's own (a roll-up's merged session: the values that the runs'
    parts of it, subtracted from the stored slices, hold too cancel out and are sent by neither).
    The session stage and the stored statistics see the whole ``accs``."""

    accs: Any
    cells: Any


class MetadataDimsCombineFn(StoredAccumulator, beam.CombineFn):
    """The metadata slice values of one session: input a tuple per interaction (one text or
    ``None`` — the record does not carry the field — per field); accumulator and output ``(values,
    records disagree)`` or ``None``. Per field a value beats ``None`` (metadata on the first record
    of a session only is that session's metadata) and of two values the smaller wins, so any
    merge order gives the same result; two different values mark the session as disagreeing."""

    def create_accumulator(self):
        return None

    def add_input(self, acc, element):
        return self.merge_accumulators([acc, (tuple(element), False)])

    def merge_accumulators(self, accumulators):
        out = None
        for a in accumulators:
            if a is None:
                continue
            if out is None:
                out = (tuple(a[0]), a[1])
                continue
            values, differ = [], out[1] or a[1]
            for x, y in zip(out[0], a[0]):
                if x is None or y is None:
                    values.append(y if x is None else x)
                else:
                    values.append(min(x, y))
                    differ = differ or x != y
            out = (tuple(values), differ)
        return out

    def extract_output(self, acc):
        return acc

    def _stored_type(self):
        import pyarrow as pa

        return pa.struct([("values", pa.list_(pa.string())), ("differ", pa.bool_())])


class FindingsCombineFn(StoredAccumulator, FindingsFn):
    """A metric's findings about one session's interactions
    (:class:`~fair_forge_beam.io.elements.InteractionWarning`): per kind, how many interactions
    and the first example (:class:`~fair_forge_beam.io.elements.FindingsFn`), stored as
    :func:`~fair_forge_beam.io.elements.findings_arrow_type`."""

    def _stored_type(self):
        from fair_forge_beam.io.elements import findings_arrow_type

        return findings_arrow_type()

    def to_stored(self, acc):
        from fair_forge_beam.io.elements import findings_to_stored

        return findings_to_stored(acc)

    def from_plain(self, value):
        from fair_forge_beam.io.elements import findings_from_plain

        return findings_from_plain(value)


#: the input count ``n`` and the scored-session count of :class:`PairCombineFn`'s accumulators
_INPUTS = SumCombineFn()


class Evidence:
    """A metric's declaration of the per-session evidence its estimates rest on
    (:attr:`MetricSpec.evidence`): ``kinds``, a fixed tuple of names (the stored statistics keep
    one count per kind), and :meth:`of`, the kinds one session holds, from what the session sends
    its slices (its interaction-side values, a :class:`Values`'s items or ``None``, and its slice
    value or ``None``). The engine counts, per kind, the scored sessions holding it
    (:class:`PairCombineFn`), the same in a roll-up (a roll-up's session sends the same values)."""

    kinds: tuple = ()

    def of(self, values: Any, slice_value: Any) -> set:
        raise NotImplementedError


class SliceAccumulators(NamedTuple):
    """What a :class:`SliceEstimator` gets for one slice of one metric."""

    #: the ``interaction_slice_combine`` accumulator (``None``: nothing reached that side)
    interaction: Any
    #: the ``session_slice_combine`` accumulator (``None``: nothing reached that side)
    session: Any
    #: the slice's sessions in which the metric scored something (:func:`session_scored`): the
    #: slice record's session count, and the one the one-session rule reads
    n_sessions: int
    #: per kind of the metric's :class:`Evidence`, the scored sessions holding it: the sessions an
    #: estimate resting on that kind counts (``{}``: the metric declares none)
    evidence: Mapping = {}

    def rests_on(self, kind: str, mode, estimate):
        """What ``estimate`` (a function of the mode to estimate in, giving an :class:`Estimate`, ``None``,
        or a mapping, list or tuple of them) gives for the estimates that rest on evidence ``kind`` (one
        of the metric's :attr:`Evidence.kinds`), estimated in the mode the one-session rule asks for (the
        observed one, no prior, no interval, when one session holds ``kind``; for an estimate of one
        observation, too) and each stating the sessions holding ``kind`` as its ``n_sessions``, by which
        the engine applies the rule (:func:`~fair_forge_beam.statistical.slices.without_one_session_intervals`).
        The one call of the contract (docs/engine.md "Sessions per estimate"); a kind the metric does
        not declare is refused, naming the declared ones (:func:`~fair_forge_beam.statistical.slices.rest_on`)."""
        from fair_forge_beam.statistical.slices import rest_on

        return rest_on(self.evidence, kind, mode, estimate)


def slice_accumulators(spec: "MetricSpec", acc) -> SliceAccumulators:
    """What the engine hands metric ``spec``'s estimator for one slice, from the metric's extracted
    slice accumulator ``acc`` (``(interaction side, session side, _, scored sessions, *sessions per
    evidence kind)``): the evidence counts keyed by ``spec.evidence.kinds`` (``{}`` when it declares none)."""
    evidence = dict(zip(spec.evidence.kinds, acc[4:])) if spec.evidence else {}
    return SliceAccumulators(acc[0], acc[1], acc[3], evidence)


def session_scored(spec: "MetricSpec", record: Optional[dict], cell_values: Any) -> bool:
    """Whether metric ``spec`` scored something in a session, from the session's record (the
    reducer's, a dict) or, for a metric without session records, its interaction-side values.

    One definition for every metric (issue 28, trial 8: a guardian that failed on every answer
    left Bias slices counting 3 sessions with 0 scored, and Agentic counted conversations with
    nothing scored, so ``coverage sessions >= N`` passed on no evidence): a session counts toward
    its slices' ``n_sessions`` when the metric's ``scored`` declaration says so (default: the
    record's ``n_interactions``, the interactions it scored, is above 0); without a record,
    when at least one interaction-side value reached the session."""
    if spec.session_reducer is not None and spec.session_value is not None:
        if record is None:
            return False
        if spec.scored is not None:
            return bool(spec.scored(record))
        n = record.get("n_interactions")
        return isinstance(n, int) and n > 0
    return bool(cell_values)


def session_flags(spec: "MetricSpec", scored: bool, values: Any, slice_value: Any) -> int:
    """What a session sends its slices about itself (:class:`PairCombineFn`'s third input item): bit
    0 set when the metric scored something in it (``scored``, :func:`session_scored`), bit ``j + 1``
    when it holds kind ``j`` of the metric's :class:`Evidence`, from its interaction-side values
    (all of them: a list or ``None``) and its slice value. Stored with the session
    (``<metric>__scored`` and ``<metric>__evidence``), so a roll-up sends what the run sent."""
    if not scored:
        return 0
    if spec.evidence is None:
        return 1
    held = spec.evidence.of(values, slice_value)
    return 1 | sum(1 << (j + 1) for j, kind in enumerate(spec.evidence.kinds) if kind in held)


class PairCombineFn(StoredParts, beam.CombineFn):
    """A metric's slice combiner: two ``CombineFn``\\ s side by side over ``(a or None, b or
    None, flags)`` inputs, one per session (``None``: nothing for that side; a :class:`Values`:
    several inputs of that side; ``flags``: :func:`session_flags`, bit 0 set when the metric scored
    something in the session, :func:`session_scored`, bit ``j + 1`` when it holds evidence kind ``j``); output ``[acc_a, acc_b, n, n_sessions, *per-kind evidence counts]`` (a side without a
    ``CombineFn`` stays ``None``; ``n``: the inputs; ``n_sessions``: the scored sessions). Merging
    merges each side and adds the counts, so order never matters; the estimator gets
    :class:`SliceAccumulators` ``(acc_a, acc_b, n_sessions, evidence)``. With an :class:`Evidence`
    the accumulator (and the output) ends with one count per kind: the scored sessions holding it.

    Stored (:meth:`stored_type`) as ``struct<interaction: …, session: …, n: int64, sessions:
    int64, sessions:<kind>: int64 …>`` of the sides' stored types (``None``: a side declares none). ``subtract`` (the optional method of the slice
    combiner, :func:`~fair_forge_beam.statistical.combiners.can_subtract`: when both sides have
    one) subtracts side by side and gives ``None`` when no input is left (``n`` back to 0: the
    slice would hold nothing of this metric)."""

    def __init__(self, first: Optional[beam.CombineFn], second: Optional[beam.CombineFn],
                 evidence: Optional[Evidence] = None):
        self.fns = (first, second)
        self.evidence = evidence
        self.kinds = tuple(evidence.kinds) if evidence is not None else ()

    def create_accumulator(self):
        return [*(None if fn is None else fn.create_accumulator() for fn in self.fns), 0, 0, *(0 for _ in self.kinds)]

    def add_input(self, acc, element):
        for i, v in enumerate(element[:2]):
            if v is None:
                continue
            if type(v) is Values:  # a session's interaction-side values: each added
                fn = self.fns[i]
                for item in v.items:
                    acc[i] = fn.add_input(acc[i], item)
            else:
                acc[i] = self.fns[i].add_input(acc[i], v)
        acc[2] += 1
        flags = int(element[2])  # bit 0: scored; bit j + 1: evidence kind j (session_flags)
        acc[3] += flags & 1
        for j in range(len(self.kinds)):
            acc[4 + j] += (flags >> (j + 1)) & 1
        return acc

    def merge_accumulators(self, accumulators):
        accs = list(accumulators)
        return [*(None if fn is None else fn.merge_accumulators([a[i] for a in accs]) for i, fn in enumerate(self.fns)),
                *(sum(a[i] for a in accs) for i in range(2, 4 + len(self.kinds)))]

    def merge_into(self, acc, other):
        """``other`` merged into ``acc`` side by side (:func:`~fair_forge_beam.statistical.combiners.merge_into`)."""
        for i, fn in enumerate(self.fns):
            if fn is not None:
                acc[i] = merge_into(fn, acc[i], other[i])
        for i in range(2, 4 + len(self.kinds)):
            acc[i] += other[i]
        return acc

    def extract_output(self, acc):
        return [*(None if fn is None else fn.extract_output(a) for fn, a in zip(self.fns, acc)), *acc[2:]]

    def _parts(self) -> list:
        return [("interaction", self.fns[0]), ("session", self.fns[1]), ("n", _INPUTS), ("sessions", _INPUTS),
                *((f"sessions:{kind}", _INPUTS) for kind in self.kinds)]

    def subtract(self, acc, other):
        n = acc[2] - other[2]
        if n < 0:
            raise ValueError("subtract: the part holds more inputs than the whole")
        return super().subtract(acc, other) if n else None


class FusedCombineFn(beam.CombineFn):
    """One ``CombineFn`` for several metrics: input ``(slot, value)``, accumulator one entry per slot (``None`` until the
    slot received a value), output the slots' outputs (``None`` for slots that received nothing).
    Like Beam's ``TupleCombineFn``, but sparse: an element feeds one slot, and a key that only one
    metric saw costs nothing for the others."""

    def __init__(self, fns: Sequence[beam.CombineFn]):
        self.fns = tuple(fns)

    def setup(self, *args, **kwargs):
        for fn in self.fns:
            fn.setup(*args, **kwargs)

    def teardown(self, *args, **kwargs):
        for fn in self.fns:
            fn.teardown(*args, **kwargs)

    def create_accumulator(self):
        return [None] * len(self.fns)

    def add_input(self, acc, element):
        slot, value = element
        fn = self.fns[slot]
        a = acc[slot]
        acc[slot] = fn.add_input(fn.create_accumulator() if a is None else a, value)
        return acc

    def merge_accumulators(self, accumulators):
        return _merge_slots(self.fns, list(accumulators))

    def merge_into(self, acc, other):
        """``other`` merged into ``acc`` slot by slot (as :func:`_merge_slots`): a slot ``acc`` lacks
        gets a merge into a fresh accumulator (never ``other``'s own), any other slot is merged into."""
        for i, fn in enumerate(self.fns):
            b = other[i]
            if b is None:
                continue
            a = acc[i]
            acc[i] = fn.merge_accumulators([fn.create_accumulator(), b]) if a is None else merge_into(fn, a, b)
        return acc

    def compact(self, acc):
        return [None if a is None else fn.compact(a) for fn, a in zip(self.fns, acc)]

    def extract_output(self, acc):
        return [None if a is None else fn.extract_output(a) for fn, a in zip(self.fns, acc)]

    def subtract(self, acc, other):
        """Slot by slot, ``acc`` less ``other`` (a part of it) with each slot's ``subtract``; a slot
        ``other`` lacks stays, a slot the subtraction empties becomes ``None``.

        Raises:
            ValueError: ``other`` holds a slot ``acc`` lacks, or a slot's ``CombineFn`` cannot subtract."""
        out = list(acc)
        for i, fn in enumerate(self.fns):
            if other[i] is None:
                continue
            if out[i] is None:
                raise ValueError(f"subtract: slot {i} of the part is empty in the whole")
            sub = getattr(fn, "subtract", None)
            if sub is None:
                raise ValueError(f"subtract: slot {i}'s {type(fn).__name__} has no subtract")
            out[i] = sub(out[i], other[i])
        return out


# ------------------------------------------------------------------ DoFns
def session_key_text(key: tuple) -> str:
    """A session key ``(session_id, assistant_id, language)`` as compact JSON text
    (``'["s1","a","en"]'``): the stable seed input of a session's bootstrap unit."""
    return json.dumps(list(key), ensure_ascii=False, separators=(",", ":"))


def session_key_of(x: Any) -> str:
    """The session key text (:func:`session_key_text`) of an interaction or score ``x``."""
    return session_key_text((x.session_id, x.assistant_id, x.language))


class SessionPart(NamedTuple):
    """A score tuple that only feeds its session: the session's fields and ``value``, what the
    session reducer joins (e.g. ``(0, meta)`` per interaction sent to a judge and ``(1,
    verdict)`` per validated answer). Declare ``session_value=part_value``."""

    session_id: str
    assistant_id: str
    language: str
    value: Any

    @classmethod
    def keyed(cls, key_text: str, value: Any) -> "SessionPart":
        """The part of the session whose :func:`session_key_text` is ``key_text``."""
        session_id, assistant_id, language = json.loads(key_text)
        return cls(session_id, assistant_id, language, value)


def part_value(part: SessionPart) -> Any:
    """A :class:`SessionPart`'s value (its ``session_value``)."""
    return part.value


#: the ids every score tuple starts with (the engine reads them: session key, record header); a
#: metric's score is ``NamedTuple("MyScore", [*SCORE_IDS, ("field", type), ...])``
SCORE_IDS = [("element_id", str), ("session_id", str), ("assistant_id", str), ("language", str), ("turn_index", int),
             ("qa_id", str)]


def score_ids(x: Any) -> tuple:
    """The :data:`SCORE_IDS` of the interaction ``x``, in order: a score tuple starts with them
    (``MyScore(*score_ids(x), field=...)``)."""
    return x.element_id, x.session_id, x.assistant_id, x.language, x.turn_index, x.qa_id


class Scored(NamedTuple("Scored", [*SCORE_IDS, ("value", Any)])):
    """A score with the ids the engine reads from every score (session key, record header): for a
    metric whose score is one value. ``Scored.of(interaction, value)``."""

    __slots__ = ()

    @classmethod
    def of(cls, x: Any, value: Any) -> "Scored":
        """``value`` scored for the interaction ``x``, with ``x``'s ids."""
        return cls(*score_ids(x), value)


def interaction_ids(metric: str, s: Any) -> dict:
    """The identifying fields every per-interaction record starts with (``metric``, ``level``,
    ``element_id``, ``session_id``, ``assistant_id``, ``language``, ``turn_index``, ``qa_id``),
    read from any score tuple that carries them (``qa_id``: ``None`` when the score has none)."""
    return {
        "metric": metric,
        "level": "interaction",
        "element_id": s.element_id,
        "session_id": s.session_id,
        "assistant_id": s.assistant_id,
        "language": s.language,
        "turn_index": s.turn_index,
        "qa_id": getattr(s, "qa_id", None),
    }


#: the ids of a session key ``(session_id, assistant_id, language)``, as a session record names them
SESSION_IDS = ("session_id", "assistant_id", "language")


def record_fields(rec: Any) -> Any:
    """A metric's record as the dict the writers take: a dict as it is; any other mapping
    (``OrderedDict``, ``defaultdict``, a ``Mapping``) as a dict of its items; a pydantic model by its
    ``model_dump()``; a ``NamedTuple`` by its ``_asdict()``; a dataclass by ``dataclasses.asdict``
    (trial39b B2, B3: an ``OrderedDict`` went out without the header, every id column null, and a
    NamedTuple record crashed the Parquet writer). Anything else (``None``: no record) as it is."""
    if rec is None or type(rec) is dict:
        return rec
    if isinstance(rec, abc.Mapping):
        return dict(rec)
    if hasattr(rec, "model_dump"):
        return rec.model_dump()
    if isinstance(rec, tuple) and hasattr(rec, "_asdict"):
        return dict(rec._asdict())
    import dataclasses

    if dataclasses.is_dataclass(rec) and not isinstance(rec, type):
        return dataclasses.asdict(rec)
    return rec


def headed(metric: str, level: str, rec: Any, score: Any = None, key: Optional[tuple] = None) -> Optional[dict]:
    """A metric's record with the engine's header (what every record of every metric starts
    with). ``rec``: a mapping, a pydantic model, a NamedTuple or a dataclass (as
    :func:`record_fields` reads it); anything else (``None``: no record) passes
    unchanged, and so does a dict that already names its ``metric``. Otherwise ``metric`` and
    ``level`` go in front, and for an interaction record with its ``score`` the score's ids
    (:func:`interaction_ids`), for a session record with its session ``key`` the ids of the key
    the record does not give itself (:data:`SESSION_IDS`: the sessions output and the stored
    statistics are keyed by them; a record of docs/engine.md's worked example names its
    ``session_id`` only)."""
    rec = record_fields(rec)
    if type(rec) is not dict:
        return rec  # None (no record), or a value of the metric's own kind
    if "metric" in rec:
        return rec
    if score is not None:
        return {**interaction_ids(metric, score), **rec}
    if key is not None:
        return {"metric": metric, "level": level, **{f: v for f, v in zip(SESSION_IDS, key) if f not in rec}, **rec}
    return {"metric": metric, "level": level, **rec}


def repeated_turns(key: tuple, turns: Sequence) -> list:
    """``[QualityWarning("duplicate_turn_index", …)]`` when a session's turn indices repeat (the
    same session, ``(session_id, assistant_id)``, given in several records), else ``[]``: the one
    warning every session reducer gives for it, naming the first few repeated turns and how many
    repeat (:func:`~fair_forge_beam.io.elements.repeats_named`), whatever their number. ``key``: the
    session key; ``turns``: its turn indices (or any per-interaction identity that must not repeat;
    a tuple is shown by its first item, the turn)."""
    if len(set(turns)) == len(turns):
        return []
    from collections import Counter

    from fair_forge_beam.io.elements import QualityWarning, repeats_named

    n, named = repeats_named(Counter(turns), lambda t: str(t[0] if type(t) is tuple and t else t))
    return [QualityWarning("duplicate_turn_index", f"{key[0]}/{key[1]}",
                           "the same session (session_id, assistant_id) appears in several records; "
                           f"{n} turn ind{'ices' if n > 1 else 'ex'} repeat: {named}")]


def _session_key(s) -> tuple:
    return (s.session_id, s.assistant_id, s.language)


def _one(score):
    return (score,)


def _exception_words(exc: BaseException) -> str:
    """``raised <class>: <message>`` of a failure of a metric's own code, as a dead letter's reason
    says it: the message in plain words, on one line (:func:`~fair_forge_beam.plain.plain_reason`),
    secret-shaped strings masked (:func:`~fair_forge_beam.urls.mask_shapes`; the writers mask the
    run's keys), non-printable characters escaped and cut to :data:`~fair_forge_beam.quoting.QUOTE_LIMIT`
    characters (:func:`~fair_forge_beam.quoting.shown`): the text comes from the data."""
    from fair_forge_beam.plain import plain_reason
    from fair_forge_beam.urls import mask_shapes

    return f"raised {shown(type(exc).__name__)}: {shown(mask_shapes(plain_reason(exc)))}"


def _raised(what: str, exc: BaseException) -> str:
    """The problem of a score whose spec function ``what`` (``session_value``, ...) raised ``exc``."""
    return f"the spec's {what} {_exception_words(exc)}"


#: interactions counted per progress update of a scorer (one locked update per step, not per element)
_PROGRESS_STEP = 256


@beam.typehints.with_output_types(Any)
def _function_scores(fn: Callable, x, no_score: Callable):
    """What a function scorer gives for ``x``: for one interaction its score (``None``: the dead letter
    ``no_score(x)``); for a batch (a list, ``MetricSpec.batch_size``) the scores it returns for it — a list
    or another iterable that is not a tuple (a tuple, a score among them, is one value: the engine's check
    says what it is), ``None`` for none (each interaction then a dead letter: ``_unanswered``)."""
    out = fn(x)
    if type(x) is not list:
        return (no_score(x),) if out is None else (out,)
    if out is None:
        return ()
    if isinstance(out, list) or (isinstance(out, abc.Iterable) and not isinstance(out, (tuple, str, bytes, abc.Mapping))):
        return list(out)
    return (out,)


@beam.typehints.with_output_types(Any)
class _ScoreAndRoute(beam.DoFn):
    """The metric's scorer, with each score routed in the same step: its interaction record
    (main), its session value and its cell value (``"sessions"``: ``(session key, (slot,
    value))`` and ``(session key, (cell_slot, cell value))``). Dead letters, warnings and
    auxiliary values pass through."""

    def __init__(self, spec: MetricSpec, slot: int, cell_slot: Optional[int] = None, dims_slot: Optional[int] = None,
                 dims: tuple = (), findings_slot: Optional[int] = None):
        # cell_slot: the session-combine slot of the cell values (they reach the slices through the
        # session stage, which alone knows a session's metadata and is what stored statistics keep);
        # dims_slot: a DoFn scorer sees the interactions, so each session it routes a value of goes
        # out with the interactions' metadata values (slot dims_slot) in the same call — in the
        # same bundle, hence in the same pane of a window as the values (early and late panes too)
        self.spec, self.slot, self.cell_slot = spec, slot, cell_slot
        self.dims_slot, self.dims, self.n_dims = dims_slot, tuple(dims), len(dims)
        # findings_slot: the session-combine slot of the scorer's findings per interaction
        # (MetricSpec.interaction_warnings): one warning per session and kind, made by the session stage
        self.findings_slot = findings_slot

    def setup(self):
        from fair_forge_beam._beam import tune_gc, tune_malloc
        from fair_forge_beam.progress import ProgressCounter

        tune_gc()  # this process runs our bundles (an SDK worker too)
        tune_malloc()
        # progress lines on stderr (Beam counters): interactions the scorer took, and those it scored
        # (a score out; a dead letter is not one) — the count results.json calls interactions_scored
        self._progress = ProgressCounter(f"taken.{self.spec.name}")
        self._scored = ProgressCounter(f"scored.{self.spec.name}")
        scorer = self.spec.scorer
        if isinstance(scorer, beam.DoFn):
            self._score = scorer.process
            scorer.setup()
        elif isinstance(scorer, beam.PTransform):  # its scores arrive here already scored
            self._score = _one  # as session parts, not interactions: _ReduceSessions counts its progress
        else:  # a plain function: one interaction -> its score; None (no score) is a dead letter (_no_score);
            # a batch (spec.batch_size) -> its scores, as a DoFn's call gives them
            self._score = lambda x, fn=scorer: _function_scores(fn, x, self._no_score)
        self._pending = self._pending_scored = 0
        self._counting = not isinstance(scorer, beam.PTransform)
        from fair_forge_beam.score_check import ScoreCheck

        # every score is checked here, for every metric (fair_forge_beam/score_check.py): a non-finite,
        # Decimal, str or bool value where a number is declared is a dead letter of the metric
        self._check = ScoreCheck(self.spec, [name for name, _ in SCORE_IDS])
        # the interactions a call's scores must name (None: a PTransform's scores arrive without them)
        self._own_ids = None if isinstance(scorer, beam.PTransform) else self._check.ids_problem
        self._gave = "returned" if not isinstance(scorer, (beam.DoFn, beam.PTransform)) else "yielded"
        # a DoFn scorer, or a function given a batch, answers every interaction it is given: a score or a
        # dead letter (_unanswered)
        self._covering = isinstance(scorer, beam.DoFn) or (not isinstance(scorer, beam.PTransform) and bool(self.spec.batch_size))
        self._invalid = beam.metrics.Metrics.counter(f"fair_forge_beam.{self.spec.name}", "invalid_scores")

    def teardown(self):
        if isinstance(self.spec.scorer, beam.DoFn):
            self.spec.scorer.teardown()

    def start_bundle(self):
        self._pending = self._pending_scored = 0

    def finish_bundle(self):
        self._flush_progress()  # the bundle's remaining count (progress is counted in steps of _PROGRESS_STEP)

    def _flush_progress(self):
        """Add the interactions taken and scored since the last flush, together (a line never shows
        taken-but-not-yet-scored interactions as "not scored")."""
        if self._pending:
            self._progress.inc(self._pending)
        if self._pending_scored:
            self._scored.inc(self._pending_scored)
        self._pending = self._pending_scored = 0

    def process(self, element):
        spec, slot = self.spec, self.slot
        record, session_value, cell_value = spec.interaction_record, spec.session_value, spec.cell_value
        tagged = beam.pvalue.TaggedOutput
        counting = self._counting
        if counting:
            if self._pending >= _PROGRESS_STEP:  # the elements before this one, scored: both counts at once
                self._flush_progress()
            self._pending += len(element) if isinstance(element, list) else 1  # a batch (spec.batch_size) or one
        dims_of = sent = None
        if self.dims_slot is not None:
            missing = (None,) * self.n_dims
            dims_of = {_session_key(x): metadata_values(x, self.dims)
                       for x in (element if isinstance(element, list) else (element,))}
            sent = set()
        try:  # the scorer is the metric's code: what it raises is a dead letter of its interactions
            outs = self._score(element)
            if outs is not None and type(outs) is not tuple and type(outs) is not list:
                outs = list(outs)  # a DoFn's generator runs here, inside the guard
        except Exception as e:  # noqa: BLE001 - any failure of the metric's own code (docs/engine.md)
            outs = self._failed(element, e)
        own_ids, check = self._own_ids, self._check
        # a call of several interactions (a batch, or a DoFn's call): one score per interaction, the
        # second a dead letter naming it; what names no interaction (None, a float) is said in the dead
        # letter of the interaction left without a score (trial39b B9: one interaction counted twice,
        # or two dead letters, one without its record)
        scored: Optional[set] = set() if self._covering else None
        strays: list = []
        for out in outs or ():
            if isinstance(out, beam.pvalue.TaggedOutput):
                if type(out.value) is InteractionWarning:
                    yield self._finding(out.value)
                    continue
                yield out
                continue
            try:  # the engine's check must never raise; if it does, the score is a dead letter (trial39b B4)
                problem = check.not_a_score(out, self._gave)
                if problem is not None and scored is not None and getattr(out, "element_id", None) is None:
                    strays.append((out, problem))  # no score, naming no interaction: said with the one it left
                    continue
                if problem is None and own_ids is not None:
                    problem = own_ids(out, element)
                if problem is None and scored is not None:
                    eid = getattr(out, "element_id", None)
                    if eid in scored:
                        problem = (f"the scorer gave a second score for the interaction {quoted(eid, 80)} "
                                   f"(one score per interaction; the first is the one counted)")
                    elif eid is not None:
                        scored.add(eid)
            except Exception as e:  # noqa: BLE001
                problem = f"the engine's check of the score {_exception_words(e)}"
            if problem is None:  # the spec's own functions: a failure is the score's dead letter
                step = "session_value"
                try:
                    sv = None if session_value is None else session_value(out)
                    step = "cell_value"
                    cv = None if cell_value is None else cell_value(out)
                    step = "interaction_record"  # its values are checked against the declared Parquet columns
                    # a mapping, pydantic model (the score itself, often), NamedTuple or dataclass is checked
                    # as it is written: the dict record_fields reads, against the declared Parquet columns
                    # (fix39a: 2.5 went into an int64 column; trial39b B2, B3)
                    fields = None if record is None else record_fields(record(out))
                except Exception as e:  # noqa: BLE001
                    problem = _raised(step, e)
                else:
                    try:
                        problem = check.problem(out, sv, cv, fields)
                    except Exception as e:  # noqa: BLE001 - the check must never raise (trial39b B4)
                        problem = f"the engine's check of the score {_exception_words(e)}"
            if problem is None:
                try:
                    rec = None if record is None else headed(spec.name, "interaction", fields, out)
                except Exception as e:  # noqa: BLE001
                    problem = _raised("interaction_record", e)
            if problem is not None:
                yield self._invalid_score(element, out, problem)
                continue
            self._pending_scored += counting
            if rec is not None:  # a score may have no record of its own (e.g. a failed query)
                yield rec
            if dims_of is not None:
                key = _session_key(out)
                if key not in sent:
                    sent.add(key)
                    yield tagged("sessions", (key, (self.dims_slot, dims_of.get(key, missing))))
            if session_value is not None:
                yield tagged("sessions", (_session_key(out), (slot, sv)))
            if cell_value is not None:
                yield tagged("sessions", (_session_key(out), (self.cell_slot, cv)))
        if self._covering:
            yield from self._unanswered(element, outs or (), strays)
        if type(element) is list:
            check.forget()

    def _unanswered(self, element, outs, strays=()) -> list:
        """The dead letters of the interactions of the call ``element`` a ``DoFn`` scorer gave neither
        a score nor a dead letter (``outs``: what it gave): every interaction read and not scored is
        counted with a reason (trial38 T8). An interaction is answered by a score or dead letter
        naming its ``element_id``, or by a score without one (a ``SessionPart``) of its session.
        ``strays``: ``(out, problem)`` of what the scorer gave that names no interaction (``None``, a
        float): its problem is said in the dead letters of the interactions left unanswered (one dead
        letter per interaction, with its record); with none left unanswered, each is a dead letter of
        its own."""
        # an element without an element_id (not a StreamedBatch: a test's value) cannot be told answered
        xs = [x for x in (element if isinstance(element, list) else (element,)) if getattr(x, "element_id", None) is not None]
        if not xs:
            return [self._invalid_score(element, out, problem) for out, problem in strays]
        done: set = set()
        for out in outs:
            if isinstance(out, beam.pvalue.TaggedOutput):
                if out.tag == DEAD:  # a DeadLetter, or a dict a metric of one's own yields
                    v = out.value
                    done.add(v.get("element_id") if isinstance(v, dict) else getattr(v, "element_id", None))
                continue
            eid = getattr(out, "element_id", None)
            done.add(eid if eid is not None else ("session", getattr(out, "session_id", None),
                                                  getattr(out, "assistant_id", None), getattr(out, "language", None)))
        if len(done) >= len(xs) and all(x.element_id in done for x in xs):
            return [self._invalid_score(element, out, problem) for out, problem in strays]
        missing = [x for x in xs if x.element_id not in done and ("session", *_session_key(x)) not in done]
        if not missing:
            return [self._invalid_score(element, out, problem) for out, problem in strays]
        why = ("the scorer gave no score and no dead letter for this interaction (a DoFn scorer yields a "
               "score or TaggedOutput('dead_letter', …) for each interaction)")
        if strays:  # what the scorer gave instead of a score (with several, the first few kinds of it)
            why = "; ".join(dict.fromkeys(problem for _, problem in strays[:3]))
        return [self._dead(x, why) for x in missing]

    def _failed(self, element, exc: BaseException) -> list:
        """The outputs of a scorer call that raised ``exc``: a call of one interaction gives its dead
        letter; a batch (``batch_size``) is scored again one interaction at a time, so only the
        interactions that fail alone are dead letters and the others are scored (**decision**: one
        odd record does not cost its batch; a scorer that fails on every record pays one more call
        per record, on the failure path only), whether the scorer is a ``DoFn`` or a function (fix39a: a
        function's batch that raised was dead letters whole)."""
        if isinstance(element, list) and len(element) > 1:
            outs: list = []
            for x in element:
                try:
                    outs.extend(self._score([x]) or ())
                except Exception as e:  # noqa: BLE001 - as in process
                    outs.append(self._scorer_raised(x, e))
            return outs
        return [self._scorer_raised(x, exc) for x in (element if isinstance(element, list) else (element,))]

    def _scorer_raised(self, x, exc: BaseException):
        """The dead letter of the interaction ``x`` whose scorer call raised ``exc``."""
        return self._dead(x, f"the scorer {_exception_words(exc)}")

    def _no_score(self, x):
        """The dead letter of the interaction ``x`` a function scorer returned ``None`` for: every
        interaction read and not scored is counted with its reason (DESIGN §8; trial38 T8)."""
        return self._dead(x, "the scorer returned None, no score")

    def _dead(self, x, why: str):
        """The dead letter of interaction ``x`` that its scorer did not score, with reason ``<metric>: <why>
        (docs/engine.md: what a score may hold)``, counted in the metric's ``invalid_scores``."""
        from fair_forge_beam.io.elements import dead_letter

        self._invalid.inc()
        return beam.pvalue.TaggedOutput(DEAD, dead_letter(
            self.spec.name, f"{self.spec.name}: {why} (docs/engine.md: what a score may hold)",
            x, getattr(x, "element_id", None)))

    def _invalid_score(self, element, out, problem: str):
        """The dead letter of a score that fails the engine's check: the metric, the field and
        value (``problem``), the score, and the original interaction as its record."""
        from fair_forge_beam.io.elements import dead_letter

        self._invalid.inc()
        eid = getattr(out, "element_id", None)
        raw = out
        if not isinstance(element, list) and hasattr(element, "as_record"):  # one interaction: the score's
            raw, eid = element, element.element_id
        for x in (element if isinstance(element, list) else ()):
            if getattr(x, "element_id", None) == eid and hasattr(x, "as_record"):
                raw = x
                break
        # the reason names the metric, the field and the value, not the record (element_id and raw
        # do): the console groups a metric's dead letters by reason
        reason = (f"{self.spec.name}: {problem}" if problem.startswith("the ") else
                  f"{self.spec.name}: the scorer's {type(out).__name__} {problem}") + " (docs/engine.md: what a score may hold)"
        return beam.pvalue.TaggedOutput(DEAD, dead_letter(self.spec.name, reason, raw, eid))

    def _finding(self, w):
        """A finding per interaction to its session's findings slot; a metric that did not declare
        ``interaction_warnings`` has none, and each finding is a warning of its own."""
        from fair_forge_beam.io.elements import session_warning

        if self.findings_slot is None:
            return beam.pvalue.TaggedOutput(QUALITY, session_warning(w.kind, f"{w.session_id}/{w.assistant_id}", w.n,
                                                                     w.example))
        return beam.pvalue.TaggedOutput("sessions", ((w.session_id, w.assistant_id, w.language), (self.findings_slot, w)))


@beam.typehints.with_output_types(Any)
class _ReduceSessions(beam.DoFn):
    """``(session key, [combined per slot])`` → per metric its session record (``"s<slot>"``), its
    warnings (``"q<slot>"``: its session reducer's, and its findings per interaction as one warning
    per kind), its interaction records (``"i<slot>"``) and, to the cells (main), one input of
    its slice combiner (:class:`PairCombineFn`): ``(cell, (slot, (Values(interaction-side values)
    or None, slice value or None, flags)))``, ``flags`` the session's :func:`session_flags` (bit 0:
    the metric scored something in the session, :func:`session_scored`; the evidence kinds it holds). The cell is ``(assistant_id, language, *the
    session's metadata values)``; warnings of the session stage's own (metadata values that
    differ) go out under ``"q0"``.

    With ``extract`` (the layout's fused ``CombineFn``) the input holds accumulators, extracted
    here; with ``store`` every session also goes out under :data:`STORED` as ``(session key,
    accumulators, {slot: slice value}, [warnings], {slot: scored})`` (what the stored statistics
    keep). An input :class:`Reduced` (a roll-up's session found in one run) sends its stored values
    to the cells and nothing else."""

    def __init__(self, layout: "SessionLayout", extract: Optional["FusedCombineFn"] = None, store: bool = False):
        self.layout, self.extract, self.store = layout, extract, store

    def setup(self):
        from fair_forge_beam._beam import tune_gc, tune_malloc

        tune_gc()  # this process runs our bundles (an SDK worker too)
        tune_malloc()
        for spec in self.layout.specs:
            if spec.session_reducer is not None:
                spec.session_reducer.setup()
        from fair_forge_beam.progress import ProgressCounter

        # progress of a metric scored by a PTransform (a judge: what reaches _ScoreAndRoute are session
        # parts, not interactions): its session records' n_interactions (what results.json sums as
        # interactions_scored), as each session is reduced
        self._progress = {slot: (ProgressCounter(f"taken.{spec.name}"), ProgressCounter(f"scored.{spec.name}"))
                          for slot, spec in enumerate(self.layout.specs) if isinstance(spec.scorer, beam.PTransform)}

    def start_bundle(self):
        self._held = []

    def process(self, kv, window=beam.DoFn.WindowParam, timestamp=beam.DoFn.TimestampParam,
                pane_info=beam.DoFn.PaneInfoParam):
        # held until SESSION_REDUCE_BATCH sessions or the bundle's end: each metric's reducer gets
        # them in one reduce_many call; each output goes out in its own session's window and pane
        self._held.append((kv, window, timestamp, pane_info))
        if len(self._held) >= SESSION_REDUCE_BATCH:
            yield from self._flush()

    def finish_bundle(self):
        yield from self._flush()

    def _flush(self):
        from apache_beam.utils.windowed_value import WindowedValue

        held, self._held = self._held, []
        if not held:
            return
        tagged = beam.pvalue.TaggedOutput
        lay = self.layout
        opened = [self._open(kv) for kv, *_ in held]
        results: list = [{} for _ in held]
        for slot in lay.with_sessions:
            reducer = lay.specs[slot].session_reducer
            if reducer is None:
                continue
            at = [i for i, (_, combined, reduced, _, _) in enumerate(opened) if not reduced and combined[slot] is not None]
            if at:
                outs = reducer.reduce_many([held[i][0][0] for i in at], [opened[i][1][slot] for i in at])
                for i, out in zip(at, outs):
                    results[i][slot] = out
        for (kv, window, timestamp, pane_info), parts, reduced_by_slot in zip(held, opened, results):
            for out in self._session(kv, parts, reduced_by_slot):
                if type(out) is tagged:
                    yield tagged(out.tag, WindowedValue(out.value, timestamp, (window,), pane_info))
                else:
                    yield WindowedValue(out, timestamp, (window,), pane_info)

    def _open(self, kv):
        """``(key, combined per slot, reduced, override, accumulators)`` of one input."""
        key, combined = kv
        reduced = type(combined) is Reduced
        override = None
        if type(combined) is Corrected:
            combined, override = combined.accs, combined.cells
        accs = None
        if reduced:
            combined = combined.slots
        elif self.extract is not None:
            accs, combined = combined, self.extract.extract_output(combined)
        return key, combined, reduced, override, accs

    def _session(self, kv, opened, reduced_by_slot):
        """One session's outputs, its reducers' results in ``reduced_by_slot`` (slot -> result)."""
        key, combined, reduced, override, accs = opened
        tagged = beam.pvalue.TaggedOutput
        lay = self.layout
        stored_slices, stored_warnings = {}, []
        cell = (key[1], key[2])
        if lay.dims_slot is not None:
            dims = combined[lay.dims_slot]
            values, differ = dims if dims is not None else ((None,) * len(lay.dims), False)
            cell = (*cell, *(MISSING_VALUE if v is None else v for v in values))
            yield tagged("present", tuple(v is not None for v in values))
            if differ and not reduced:
                from fair_forge_beam.io.elements import QualityWarning

                w = QualityWarning(
                    "slice_metadata_differs", session_key_text(key),
                    "records of this session carry different values of a metadata slice field; the session is "
                    "sliced by the smallest: " + ", ".join(
                        f"{d}={MISSING_VALUE if v is None else v}" for d, v in zip(lay.dims, values)))
                stored_warnings.append(w)
                yield tagged("q0", w)
        # per metric slot: [interaction-side values, slice value, scored], sent to the cells as one input
        sends: dict = {}
        stored_scored = {}  # slot -> the session's flags (session_flags: scored, evidence held)
        every: dict = {}  # slot -> the session's interaction-side values
        for slot in lay.cell_slots:
            values = full = combined[lay.cell_slot(slot)]
            if values is not None:
                if override is not None and lay.cell_slot(slot) in override:
                    values = override[lay.cell_slot(slot)]
                sends[slot] = [Values(values), None, session_scored(lay.specs[slot], None, full)]
                stored_scored[slot] = sends[slot][2]
                every[slot] = full  # all of them (a roll-up's corrected session sends some): its evidence
        flags = kv[1].scored if reduced else None  # as the run stored them (a roll-up's part may send some values only)
        as_stored = set()  # slots whose flags are the run's, as stored (session_flags)
        for slot in sends:
            if flags is not None and flags[slot] is not None:
                sends[slot][2] = flags[slot]
                as_stored.add(slot)
        for slot in lay.with_sessions:
            spec, value = lay.specs[slot], combined[slot]
            if reduced:
                if value is not None:
                    flag = flags[slot] if flags is not None and flags[slot] is not None else False
                    sends.setdefault(slot, [None, None, False])[1:] = [value, flag]
                    as_stored.add(slot)
                continue
            if value is None or spec.session_reducer is None:
                continue  # no interaction of this session for this metric (or an empty pane), or no sessions
            rec, slice_value, warnings, *per_interaction = reduced_by_slot[slot]
            for r in per_interaction[0] if per_interaction else ():
                yield tagged(f"i{slot}", headed(spec.name, "interaction", r))
            for w in warnings:
                yield tagged(f"q{slot}", w)
            stored_warnings += warnings
            if rec is not None:
                rec = headed(spec.name, "session", rec, key=key)  # a dict from here (a reducer may give a pydantic model)
            scored = stored_scored[slot] = session_scored(spec, rec, None)
            if slot in sends:
                sends[slot][2] = scored
            if rec is not None:
                counters = self._progress.get(slot)
                if counters is not None and isinstance(rec, dict):
                    n_scored = int(rec.get("n_interactions") or 0)
                    counters[0].inc(n_scored)  # a session's n_failed is not in interactions for every metric
                    counters[1].inc(n_scored)  # (BestOf counts failed matches), so no "not scored" here
                yield tagged(f"s{slot}", rec)
            if slice_value is not None:
                stored_slices[slot] = slice_value
                sends.setdefault(slot, [None, None, scored])[1] = slice_value
        for slot in sorted(sends):
            values, slice_value, scored = sends[slot]
            if slot not in as_stored:
                scored = session_flags(lay.specs[slot], scored, every.get(slot), slice_value)
                if slot in stored_scored:
                    stored_scored[slot] = scored
            yield (cell, (slot, (values, slice_value, int(scored))))
        if lay.findings and not reduced:  # findings per interaction: one warning per session and kind
            from fair_forge_beam.io.elements import findings_warnings

            for slot, at in lay.findings.items():
                if combined[at]:
                    warnings = findings_warnings(combined[at], f"{key[0]}/{key[1]}")
                    for w in warnings:
                        yield tagged(f"q{slot}", w)
                    stored_warnings += warnings
        if self.store and not reduced:
            yield tagged(STORED, (key, accs if accs is not None else combined, stored_slices, stored_warnings,
                                  stored_scored))


@beam.typehints.with_output_types(Any)
class _EstimateSlices(beam.DoFn):
    """``(slice key, [accumulators per slot])`` → per metric its slice records (``"r<slot>"``)."""

    def __init__(self, specs: Sequence[MetricSpec]):
        self.specs = tuple(specs)

    def setup(self):
        from fair_forge_beam.statistical.slices import one_session_estimator

        for spec in self.specs:
            spec.estimator.setup()
        # the one-session rule (statistical/slices.py), for every metric: a slice of one session in a
        # distribution mode is estimated again with its modes observed (no prior, no resampling)
        self._observed = [one_session_estimator(spec.estimator) for spec in self.specs]
        self._infos = [_declared_ranges(spec.info) for spec in self.specs]

    def _estimate(self, kv, window, aux):
        from fair_forge_beam.statistical.slices import rests_on_one_session, without_one_session_intervals

        key, accs = kv
        for slot, spec in enumerate(self.specs):
            acc = accs[slot]
            if acc is None:
                continue
            args = (key, slice_accumulators(spec, acc), window, aux.get(slot, ()) if aux else ())
            recs = spec.estimator.estimate(*args)
            observed = getattr(self, "_observed", [None] * len(self.specs))[slot]
            if observed is not None and any(rests_on_one_session(r, acc[3]) for r in recs):
                recs = observed.estimate(*args)
            infos = getattr(self, "_infos", None)
            for rec in recs:  # the rule's intervals, whatever the estimator gave (an estimator of one's own)
                rec = without_one_session_intervals(headed(spec.name, "slice", rec), acc[3])
                yield beam.pvalue.TaggedOutput(f"r{slot}", rec)
                if infos and infos[slot] is not None and isinstance(rec, dict):
                    for w in outside_range_warnings(spec.name, infos[slot], rec):
                        yield beam.pvalue.TaggedOutput(f"q{slot}", w)

    def process(self, kv, window=beam.DoFn.WindowParam):
        return self._estimate(kv, window, None)


def _declared_ranges(info: Any) -> Any:
    """``info`` (a metric's :class:`~fair_forge_beam.schemas.metric_info.MetricInfo`, its spec's)
    when one of its estimates declares a ``value_range`` of its own (not the default ``(0, 1)``),
    else ``None``: nothing to check."""
    estimates = getattr(info, "estimates", None) or ()
    return info if any(tuple(e.value_range) != (0, 1) for e in estimates) else None


#: an estimate is outside its declared range beyond this share of the range's length (float noise)
RANGE_TOLERANCE = 1e-9


def outside_range_warnings(metric: str, info: Any, rec: dict) -> list:
    """Data-quality warnings (``estimate_outside_range``) for the estimates of the slice record
    ``rec`` — mean or interval bound — outside the ``value_range`` their :class:`EstimateInfo`
    declares (one other than the default ``(0, 1)``, which every estimate has without a word):
    a scorer gave values the metric says cannot be (trial37 T2: a score of -5 in words per answer,
    declared 0–200, gave an interval from -0.90 and the gates passed without a word). The engine
    cannot tell which score feeds which estimate, so it checks the estimates; a scorer that knows
    its own bounds dead-letters a value outside them."""
    from fair_forge_beam.io.elements import QualityWarning
    from fair_forge_beam.quoting import fixed
    from fair_forge_beam.schemas.metric_info import is_estimate

    out = []

    def walk(node: dict, prefix: str) -> None:
        for key, value in node.items():
            path = f"{prefix}{key}"
            if is_estimate(value):
                e, _ = info.find(path)
                if e is None or tuple(e.value_range) == (0, 1):
                    continue
                low, high = e.value_range
                slack = RANGE_TOLERANCE * (high - low)
                bad = [(k, value[k]) for k in ("mean", "ci_low", "ci_high") if isinstance(value.get(k), (int, float))
                       and not low - slack <= value[k] <= high + slack]
                if bad:
                    said = ", ".join(f"{k} {fixed(v)}" for k, v in bad)
                    out.append(QualityWarning("estimate_outside_range", f"{metric}/{rec.get('slice')}/{path}",
                                              f"{metric} {path} in slice {rec.get('slice')}: {said} outside the range "
                                              f"the metric declares, {low:g} to {high:g} ({e.unit or 'its unit'}): "
                                              "its scorer gave values the metric says cannot be"))
            elif isinstance(value, dict):
                walk(value, path + ".")

    walk(rec, "")
    return out


class _EstimateSlicesWithAux(_EstimateSlices):
    def process(self, kv, aux, window=beam.DoFn.WindowParam):
        by_slot: dict = {}
        for slot, rec in aux:
            by_slot.setdefault(slot, []).append(rec)
        return self._estimate(kv, window, by_slot)


def _any_per_field(rows) -> tuple:
    rows = list(rows)
    return tuple(any(col) for col in zip(*rows)) if rows else ()


def _absent_field_warnings(present: tuple, dims: tuple):
    from fair_forge_beam.io.elements import QualityWarning

    for field_name, seen in zip(dims, present):
        if not seen:
            yield QualityWarning(
                "slice_field_absent", field_name,
                f"no session carries the metadata field {quoted(field_name)}: every session is in "
                f"{field_name}={MISSING_VALUE}. Check the name and where the field is (a session record's top level, "
                "a StreamedBatch's metadata, a flat record's top level); from Python, "
                "ReadInteractions(slice_fields=...) names the fields to keep")


def panes_metadata_problem(specs: Sequence[MetricSpec]) -> Optional[str]:
    """Why these metrics cannot be sliced by a metadata field in windows with early or late
    panes (``None``: they can): a metric whose scorer is a ``PTransform`` (a judge) gets its
    sessions' metadata values from the input, and a pane could hold its scores without them."""
    dims = metadata_dimensions(specs[0].slices) if specs else ()
    judged = [s.name for s in specs if isinstance(s.scorer, beam.PTransform)]
    if not dims or not judged:
        return None
    return (f"slices by a metadata field ({', '.join(dims)}) with early or late panes (--early-firing, "
            f"--allowed-lateness) work for metrics scored one interaction at a time only; {', '.join(judged)} "
            "score through their own transform (a judge): drop the metadata slices or the panes")


# ------------------------------------------------------------------ the engine
class SessionLayout:
    """The slots of the session combine of one engine (one per metric for its session values,
    one per metric for its interaction-side cell values, one for the metadata slice values) and
    their ``CombineFn``\\ s: what the session stage, the stored statistics
    (:mod:`fair_forge_beam.io.session_stats`) and the roll-up agree on.

    Slot ``i`` (``0 <= i < n``): metric ``i``'s session values, combined by its
    ``session_combine`` (default: a :class:`~fair_forge_beam.statistical.combiners.CollectCombineFn`
    ordered by ``session_order``); slot ``n + i``: its cell values, collected per session; slot
    ``2n``: the metadata slice values (:class:`MetadataDimsCombineFn`), when the slices name
    metadata fields; then one slot per metric declaring ``interaction_warnings``, its findings per
    interaction (:class:`FindingsCombineFn`, at :meth:`findings_slot`); then one slot per ``extras`` entry ``(name, CombineFn)`` (per-session data
    that only goes to ``on_session_accumulators``, e.g. the reader's record summaries), at
    :attr:`extra_slots`\\ ``[name]``.
    """

    def __init__(self, specs: Sequence[MetricSpec], extras: Sequence[tuple] = ()):
        from fair_forge_beam.statistical.combiners import CollectCombineFn

        self.specs = tuple(specs)
        n = len(self.specs)
        self.n = n
        self.dims = metadata_dimensions(self.specs[0].slices) if self.specs else ()
        self.dims_slot = 2 * n if self.dims else None
        #: metrics whose scores feed their session (slot i)
        self.with_sessions = tuple(i for i, sp in enumerate(self.specs) if sp.session_value is not None)
        #: metrics with interaction-side cell values (slot n + i)
        self.cell_slots = tuple(i for i, sp in enumerate(self.specs) if sp.cell_value is not None)
        fns = [sp.session_combine or CollectCombineFn(sp.session_value_type, sp.session_order) for sp in self.specs]
        fns += [CollectCombineFn(sp.cell_value_type, sort=False) if sp.cell_value is not None
                else beam.combiners.CountCombineFn() for sp in self.specs]  # a slot never fed: any CombineFn holds it
        if self.dims:
            fns.append(MetadataDimsCombineFn())
        #: metric slot -> the slot of its findings per interaction (MetricSpec.interaction_warnings)
        self.findings = {}
        for i, sp in enumerate(self.specs):
            if sp.interaction_warnings:
                self.findings[i] = len(fns)
                fns.append(FindingsCombineFn())
        self.extra_slots = {}
        for name, fn in extras:
            self.extra_slots[name] = len(fns)
            fns.append(fn)
        self.fns = tuple(fns)

    def cell_slot(self, slot: int) -> int:
        return self.n + slot

    def findings_slot(self, slot: int) -> Optional[int]:
        """The slot of metric ``slot``'s findings per interaction (``None``: it declares none)."""
        return self.findings.get(slot)

    def combine_fn(self) -> "FusedCombineFn":
        return FusedCombineFn(self.fns)


class Engine(beam.PTransform):
    """``PCollection[Interaction]`` → ``{metric name: {"interactions", "sessions", "slices",
    "dead_letter", "quality"}}`` for the declared metrics, with one session shuffle and one
    slice shuffle for all of them (see the module docstring).

    Args:
        specs: :class:`MetricSpec`\\ s with distinct names and the same ``slices``.
        on_session_accumulators: ``(PCollection[(session key, [accumulator per slot], {slot:
            slice value}, [QualityWarning])], SessionLayout, [PCollection[QualityWarning]]) ->
            None``, called with each session's combine accumulators (before ``extract_output``),
            what its reduce gave the slices and its session-stage warnings (:data:`STORED`), and
            with the warnings of the session stage as PCollections (left out of the stored counts),
            e.g. to store them (:class:`fair_forge_beam.io.session_stats.WriteSessionStats`).
        from_accumulators: the input is not interactions but one ``(session key, [accumulator
            per slot of SessionLayout(specs, session_extras)])`` per session key (``None``: an
            empty slot), merged from stored statistics (the roll-up), or a :class:`Reduced` (a
            session whose stored outputs are taken as they are): the scorers and the session
            combine are skipped, and ``interactions`` and ``dead_letter`` are empty.
        extra_session_inputs: ``(name, PCollection[(session key, value)], CombineFn)``: per-session
            data combined in the session stage beside the metrics' (one more slot each, see
            :class:`SessionLayout`) for ``on_session_accumulators`` only.
        session_extras: with ``from_accumulators``, the ``(name, CombineFn)`` of the extra slots
            the input's accumulators hold (e.g. the reader's record summaries).
        on_slice_accumulators: ``(PCollection[(slice key, [slice accumulator per metric or
            None])], SessionLayout, FusedCombineFn of the metrics' slice combiners) -> None``,
            called with what each slice's estimate is made from (e.g. to store it:
            :meth:`fair_forge_beam.io.session_stats.WriteSessionStats.slices`).
        stored_slices: with ``from_accumulators`` (a roll-up), ``PCollection[(slice key, [slice
            accumulator per metric or None])]``: slice accumulators of earlier runs, merged into
            the slices the input makes (a metric's slot is ``None`` where it is not stored).
        stored_slices_merged: ``stored_slices`` holds one element per slice key, the runs'
            accumulators already merged where they were read (:class:`_MergeCombineFn`'s merge,
            e.g. :func:`merge_stored_slices`): no combine of its own (whose shuffle would carry
            megabytes per slice again in Bayesian mode).
        subtracted_sessions: with ``stored_slices``, ``PCollection[(session key,``
            :class:`Reduced` ``)]``: sessions whose contribution to ``stored_slices`` is taken out
            again (a run's part of a session the input holds merged): they go through the slice
            stage on their own and their slice accumulators are subtracted (the slice combiner's
            ``subtract``, :class:`PairCombineFn`), so a slice is ``stored + input − subtracted``.

    Raises:
        ValueError: duplicate names or different slice dimensions.
    """

    def __init__(self, specs: Sequence[MetricSpec], on_session_accumulators=None, from_accumulators: bool = False,
                 extra_session_inputs: Sequence[tuple] = (), session_extras: Sequence[tuple] = (),
                 on_slice_accumulators=None, stored_slices=None, subtracted_sessions=None,
                 stored_slices_merged: bool = False):
        super().__init__()
        self.on_slice_accumulators = on_slice_accumulators
        self.stored_slices, self.subtracted_sessions = stored_slices, subtracted_sessions
        self.stored_slices_merged = stored_slices_merged
        self.extra_session_inputs, self.session_extras = tuple(extra_session_inputs), tuple(session_extras)
        self.specs = tuple(specs)
        names = [s.name for s in self.specs]
        if len(set(names)) != len(names):
            raise ValueError(f"Engine: duplicate metric names {names}")
        if len({s.slices for s in self.specs}) > 1:
            raise ValueError("Engine: every metric of one engine needs the same slices")
        self.on_session_accumulators, self.from_accumulators = on_session_accumulators, from_accumulators

    def _score(self, interactions, layout: SessionLayout, out: dict):
        """Per metric: the scorer and the routing of its outputs; returns the session combine's
        inputs and the auxiliary records (fills ``out`` with each metric's interactions, dead
        letters and warnings)."""
        specs, dims = layout.specs, layout.dims
        session_inputs, aux_records = [], []
        if dims and any(isinstance(s.scorer, beam.PTransform) for s in specs):
            # a PTransform scorer's scores do not come with their interactions: the metadata values
            # of every session go to the session combine from the input. Exact when a window fires
            # once; with early or late panes a pane could hold a session's scores without its
            # values, so that combination is refused.
            from fair_forge_beam.streaming.windows import needs_accumulating_merge

            if needs_accumulating_merge(interactions.windowing):
                raise ValueError(panes_metadata_problem(specs))
            session_inputs.append(interactions | "SliceMetadata" >> beam.Map(
                lambda x, d=layout.dims_slot, f=dims: (_session_key(x), (d, metadata_values(x, f)))))
        for slot, spec in enumerate(specs):
            n = spec.name
            src = interactions
            if spec.batch_size:
                src = src | f"{n}/Batch" >> beam.BatchElements(
                    min_batch_size=spec.min_batch_size or min(64, spec.batch_size), max_batch_size=spec.batch_size,
                    element_size_fn=batch_weight)  # long texts count for more: a batch's text is bounded
            extra_dead, extra_quality = [], []
            if isinstance(spec.scorer, beam.PTransform):  # e.g. RunInference with a model handler + parsing
                parts = src | f"{n}/Score" >> spec.scorer
                src = parts["scores"]
                extra_dead.append(parts["dead_letter"])
                if "quality" in parts:
                    extra_quality.append(parts["quality"])
                if "aux" in parts:  # records for the estimator computed by the scorer (batch only)
                    aux_records.append(parts["aux"] | f"{n}/TagScorerAux" >> beam.Map(lambda r, s=slot: (s, r)))
            route = "Route" if isinstance(spec.scorer, beam.PTransform) else "Score"
            in_call = bool(dims) and not isinstance(spec.scorer, beam.PTransform)  # see _ScoreAndRoute
            scored = src | f"{n}/{route}" >> beam.ParDo(_ScoreAndRoute(
                spec, slot, layout.cell_slot(slot), layout.dims_slot if in_call else None, dims,
                layout.findings_slot(slot))).with_outputs(
                DEAD, QUALITY, AUX, "sessions", main="main")
            dead = scored[DEAD]
            if extra_dead:
                dead = (dead, *extra_dead) | f"{n}/FlattenScorerDead" >> beam.Flatten()
            if spec.aux is not None:
                aux_out, aux_dead = spec.aux(scored[AUX])
                aux_records.append(aux_out | f"{n}/TagAux" >> beam.Map(lambda r, s=slot: (s, r)))
                dead = (dead, aux_dead) | f"{n}/FlattenDead" >> beam.Flatten()
            out[n] = {"interactions": scored.main, "dead_letter": dead, "quality": [scored[QUALITY], *extra_quality]}
            if spec.session_value is not None or spec.cell_value is not None or in_call or slot in layout.findings:
                session_inputs.append(scored["sessions"])
        return session_inputs, aux_records

    def expand(self, pcoll):
        from fair_forge_beam.streaming.combine import combine_per_key

        p = pcoll.pipeline
        layout = SessionLayout(self.specs, [(name, fn) for name, _, fn in self.extra_session_inputs]
                               + list(self.session_extras))
        specs, dims, n_specs = layout.specs, layout.dims, layout.n
        out: dict = {}
        if self.from_accumulators:  # already one merged accumulator list per session key
            session_inputs, aux_records = [pcoll], []
            for spec in specs:
                n = spec.name
                out[n] = {"interactions": p | f"{n}/NoInteractions" >> beam.Create([]),
                          "dead_letter": p | f"{n}/NoDeadLetters" >> beam.Create([]), "quality": []}
        else:
            session_inputs, aux_records = self._score(pcoll, layout, out)

        for name, values, _ in self.extra_session_inputs:
            session_inputs.append(values | f"Extra_{name}" >> beam.Map(
                lambda kv, s=layout.extra_slots[name]: (kv[0], (s, kv[1]))))
        with_sessions = layout.with_sessions
        session_parts = cells = None
        if session_inputs and (with_sessions or layout.cell_slots or layout.findings):
            flat = session_inputs[0] if len(session_inputs) == 1 else (
                tuple(session_inputs) | "FlattenSessionValues" >> beam.Flatten())
            q_slots = range(n_specs) if dims else sorted({*with_sessions, *layout.findings})
            if self.from_accumulators:
                accumulators = flat
            elif self.on_session_accumulators:  # the accumulators themselves, then their outputs
                from fair_forge_beam.statistical.combiners import AccumulatorOutput

                accumulators = flat | "CombineSessions" >> combine_per_key(
                    AccumulatorOutput(layout.combine_fn()), flat, SESSION_TABLE_KEYS)
            else:
                accumulators = flat | "CombineSessions" >> combine_per_key(layout.combine_fn(), flat, SESSION_TABLE_KEYS)
            extract = layout.combine_fn() if self.on_session_accumulators or self.from_accumulators else None
            store = self.on_session_accumulators is not None
            session_parts = (
                accumulators
                | "ReduceSessions" >> beam.ParDo(_ReduceSessions(layout, extract=extract, store=store)).with_outputs(
                    *[f"s{i}" for i in with_sessions], *[f"q{i}" for i in q_slots],
                    *[f"i{i}" for i in with_sessions if specs[i].session_interactions], "present",
                    *([STORED] if store else []), main="cells")
            )
            cells = session_parts.cells
            if dims and isinstance(pcoll.windowing.windowfn, beam.transforms.window.GlobalWindows):
                # a named field that no session carries (a typo, another place in the records, a reader
                # not told to keep it) would put every session in "<field>=(missing)": said once
                absent = (
                    session_parts["present"]
                    | "MetadataPresent" >> beam.CombineGlobally(_any_per_field)
                    | "MetadataAbsent" >> beam.FlatMap(_absent_field_warnings, dims)
                )
                out[specs[0].name]["quality"].append(absent)
            if self.on_session_accumulators:
                session_quality = [session_parts[f"q{i}"] for i in q_slots] + ([absent] if dims and (
                    isinstance(pcoll.windowing.windowfn, beam.transforms.window.GlobalWindows)) else [])
                self.on_session_accumulators(session_parts[STORED], layout, session_quality)
        for slot, spec in enumerate(specs):
            n = spec.name
            if session_parts is not None and slot in with_sessions:
                out[n]["sessions"] = session_parts[f"s{slot}"]
                if spec.session_interactions:
                    out[n]["interactions"] = (out[n]["interactions"], session_parts[f"i{slot}"]) | (
                        f"{n}/FlattenInteractions" >> beam.Flatten())
            else:
                out[n]["sessions"] = p | f"{n}/NoSessions" >> beam.Create([])
            if session_parts is not None and (slot in with_sessions or dims or slot in layout.findings):
                out[n]["quality"].append(session_parts[f"q{slot}"])

        fused = slice_combiner(specs)
        if cells is not None:
            slices = cells | "CombineSlices" >> CombineSlices(fused, specs[0].slices)
            if self.stored_slices is not None:
                slices = self._with_stored_slices(slices, layout, fused)
            if self.on_slice_accumulators is not None:
                self.on_slice_accumulators(slices, layout, fused)
            if aux_records:
                aux = aux_records[0] if len(aux_records) == 1 else tuple(aux_records) | "FlattenAux" >> beam.Flatten()
                est = slices | "EstimateSlices" >> beam.ParDo(
                    _EstimateSlicesWithAux(specs), beam.pvalue.AsList(aux)
                ).with_outputs(*[f"r{i}" for i in range(len(specs))], *[f"q{i}" for i in range(len(specs))])
            else:
                est = slices | "EstimateSlices" >> beam.ParDo(_EstimateSlices(specs)).with_outputs(
                    *[f"r{i}" for i in range(len(specs))], *[f"q{i}" for i in range(len(specs))])
        for slot, spec in enumerate(specs):
            n = spec.name
            out[n]["slices"] = est[f"r{slot}"] if cells is not None else p | f"{n}/NoSlices" >> beam.Create([])
            if cells is not None:  # estimates outside the range the metric declares (outside_range_warnings)
                out[n]["quality"].append(est[f"q{slot}"])
            if spec.empty_input_slices is not None and not self.from_accumulators:
                fn = spec.empty_input_slices
                empty = (
                    pcoll
                    | f"{n}/CountInput" >> beam.combiners.Count.Globally()
                    | f"{n}/EmptyInputSlices" >> beam.FlatMap(
                        lambda count, fn=fn, n=n: [headed(n, "slice", r) for r in fn()] if count == 0 else [])
                )
                out[n]["slices"] = (out[n]["slices"], empty) | f"{n}/AllSlices" >> beam.Flatten()
            q = out[n]["quality"]
            if not q:
                out[n]["quality"] = p | f"{n}/NoQuality" >> beam.Create([])
            else:
                out[n]["quality"] = q[0] if len(q) == 1 else tuple(q) | f"{n}/FlattenQuality" >> beam.Flatten()
        return out


    def _with_stored_slices(self, slices, layout: SessionLayout, fused: FusedCombineFn):
        """``stored_slices`` + ``slices`` − the slices of ``subtracted_sessions``, per slice key
        (:class:`_SignedSliceCombineFn`)."""
        # the runs' stored slices merged where they are read (a combine whose input is a Flatten is lifted only after
        # the Flatten's buffer: megabytes per slice and run in Bayesian mode would cross it unmerged)
        stored = self.stored_slices if self.stored_slices_merged else \
            self.stored_slices | "MergeStoredSlices" >> beam.CombinePerKey(_MergeCombineFn(fused))
        parts = [stored | "TagStoredSlices" >> beam.Map(lambda kv: (kv[0], (1, kv[1]))),
                 slices | "TagInputSlices" >> beam.Map(lambda kv: (kv[0], (1, kv[1])))]
        if self.subtracted_sessions is not None:
            cells = (
                self.subtracted_sessions
                | "ReduceSubtracted" >> beam.ParDo(_ReduceSessions(layout)).with_outputs("present", main="cells")
            ).cells
            parts.append(
                cells
                | "CombineSubtractedSlices" >> CombineSlices(fused, layout.specs[0].slices)
                | "TagSubtractedSlices" >> beam.Map(lambda kv: (kv[0], (-1, kv[1]))))
        return (
            parts
            | "FlattenSignedSlices" >> beam.Flatten()
            | "MergeSignedSlices" >> beam.CombinePerKey(_SignedSliceCombineFn(fused))
            | "NonEmptySlices" >> beam.Filter(lambda kv: any(a is not None for a in kv[1]))
        )


class _SignedSliceCombineFn(WrappedCombineFn):
    """Input ``(sign, slice accumulators of fused)``; output the merge of the positive inputs less
    the merge of the negative ones (:meth:`FusedCombineFn.subtract`), extracted: accumulator
    ``[plus, minus]``, each merged as the fused combiner (``inner``) merges, so order never matters
    and a runner merges a worker's inputs before they cross a shuffle (the stored slice
    accumulators of every run, megabytes each in Bayesian mode, are merged where they are read).
    Every slot ``None``: no metric has anything left in the slice."""

    def create_accumulator(self):
        return [self.inner.create_accumulator(), self.inner.create_accumulator()]

    def add_input(self, acc, element):
        sign, value = element
        side = 0 if sign > 0 else 1
        acc[side] = merge_into(self.inner, acc[side], value)  # into ours; a slot it lacks: a fresh one
        return acc

    def merge_accumulators(self, accumulators):
        accs = list(accumulators)
        return [_merge_all(self.inner, [a[side] for a in accs]) for side in (0, 1)]

    def compact(self, acc):
        return [self.inner.compact(a) for a in acc]

    def extract_output(self, acc):
        plus, minus = acc
        if any(m is not None for m in minus):
            plus = self.inner.subtract(plus, minus)
        return self.inner.extract_output(plus)


def slice_combiner(specs: Sequence[MetricSpec]) -> FusedCombineFn:
    """The slice combiner of an engine's metrics: per metric its :class:`PairCombineFn` of
    ``interaction_slice_combine`` and ``session_slice_combine``, fused (slot = the metric's index)."""
    return FusedCombineFn([PairCombineFn(s.interaction_slice_combine, s.session_slice_combine, s.evidence) for s in specs])


def engine_spec(transform, interactions=None, key: Optional[str] = None) -> MetricSpec:
    """The :class:`MetricSpec` a metric transform declares (``transform.spec(windowed)``; windowed
    when ``interactions`` is a windowed PCollection), with the transform's ``info`` as its
    :attr:`~MetricSpec.info` when the spec gives none.

    Raises:
        ValueError: the spec's name, the transform's class's ``name``, its info's name (and ``key``,
            the name the run keys it by, when given) are not one name (trial37b B3: the outputs split
            between them), e.g. a name set on a built instance.
    """
    from fair_forge_beam.schemas.metric_info import agreeing_name, declared_names
    from fair_forge_beam.streaming.windows import is_windowed

    spec = transform.spec(windowed=is_windowed(interactions) if interactions is not None else False)
    names = [("its spec's name (spec().name)", spec.name), *declared_names(transform)]
    agreeing_name([("the registered key", key), *names] if key is not None else names,
                  "a metric's name is its class's: declare a subclass with its own name and info = "
                  "dataclasses.replace(<parent>.info, name=...) instead of renaming a built instance")
    info = getattr(transform, "info", None)
    if spec.info is None and info is not None:  # the ranges the engine checks (outside_range_warnings)
        spec = replace(spec, info=info)
    return spec


def apply_metrics(interactions, transforms: Mapping[str, Any], on_session_accumulators=None,
                  extra_session_inputs: Sequence[tuple] = (), on_slice_accumulators=None) -> dict:
    """Applies the main job's metric transforms to ``interactions``: their :class:`MetricSpec`\\ s
    run in one :class:`Engine` per set of slice dimensions; ``on_session_accumulators``,
    ``extra_session_inputs`` and ``on_slice_accumulators`` go to each :class:`Engine`. Returns
    ``{name: dict of PCollections}`` in the order of ``transforms``."""
    specs, groups = {}, {}
    for name, t in transforms.items():
        specs[name] = spec = engine_spec(t, interactions, key=name)
        groups.setdefault(spec.slices, []).append(name)
    results = {}
    for i, (slices, names) in enumerate(groups.items()):
        label = "Engine" if i == 0 else f"Engine{i}"
        res = interactions | label >> Engine([specs[n] for n in names], on_session_accumulators,
                                             extra_session_inputs=extra_session_inputs,
                                             on_slice_accumulators=on_slice_accumulators)
        for n, s in zip(names, [specs[n] for n in names]):
            results[n] = res[s.name]
    return {name: results[name] for name in transforms}
