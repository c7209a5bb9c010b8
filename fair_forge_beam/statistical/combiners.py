"""Mergeable sufficient statistics (Beam ``CombineFn``s) and the estimators that read them.

DESIGN §4. A metric keys its scores by slice and combines them with one of these
``CombineFn``s; the estimator (a pure function of the merged statistics, the
:class:`~fair_forge_beam.statistical.base.StatisticalMode` and the key) runs in a ``ParDo``
after ``CombinePerKey`` and seeds its draws from the key.

| need                         | CombineFn                      | estimator                     |
|------------------------------|--------------------------------|-------------------------------|
| a rate                       | :class:`RateCombineFn`         | :func:`estimate_rate`         |
| category counts (declared)   | :class:`CategoryCountCombineFn`| :func:`estimate_distribution`,|
|                              |                                | :func:`estimate_divergence`   |
| session weighted mean §18.2  | :class:`SessionWeightedMeanCombineFn` | :func:`weighted_mean_from_stats` |
| slice mean + uncertainty     | :class:`BootstrapMeanCombineFn`| :func:`estimate_bootstrap_means` |

Every accumulator is exact (integers, or floats summed exactly — :mod:`.exact`), so merge
order, bundle order and worker count never change an output bit.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Mapping, Optional, Sequence

from fair_forge_beam._beam import beam
from fair_forge_beam._malloc import rows_below_mmap_threshold
from fair_forge_beam.quoting import quoted
import numpy as np

from fair_forge_beam.schemas.common import Estimate
from fair_forge_beam.statistical.base import StatisticalMode, check_count, check_counts, percentile_intervals
from fair_forge_beam.statistical.frequentist import FrequentistMode
from fair_forge_beam.statistical.exact import exact_ratio, from_exact, to_exact
from fair_forge_beam.statistical.seeding import RowCache, exponential_rows, shared_row_cache, stable_hash64

__all__ = [
    "SumCombineFn",
    "WrappedCombineFn",
    "OptionalCombineFn",
    "AccumulatorOutput",
    "WithFailedCount",
    "MinMaxCombineFn",
    "KeyedCountsCombineFn",
    "CountAndSmallestCombineFn",
    "TokenCountsCombineFn",
    "SessionGroupCountsCombineFn",
    "SortedListCombineFn",
    "StoredAccumulator",
    "StoredTupleCombineFn",
    "stored_type_of",
    "can_subtract",
    "CollectCombineFn",
    "RateCombineFn",
    "CountVectorSum",
    "CategoryCountCombineFn",
    "WeightedMeanStats",
    "SessionWeightedMeanCombineFn",
    "BootstrapStats",
    "BootstrapMeanCombineFn",
    "GammaBootstrapStats",
    "GammaBootstrapCombineFn",
    "estimate_gamma_bootstrap_means",
    "resolve_weights",
    "weighted_mean_from_stats",
    "estimate_rate",
    "estimate_distribution",
    "estimate_divergence",
    "estimate_bootstrap_means",
    "session_mean_estimates",
    "session_mean_and_point_estimates",
    "session_mean_estimates_many",
    "session_mean_and_point_estimates_many",
]


#: the point-estimate mode of the plug-in values every mode also needs (slice units)
_POINT_MODE = FrequentistMode()


# ------------------------------------------------------------------------------ stored accumulators
class StoredAccumulator:
    """What a ``CombineFn`` of the engine's session stage declares so that its accumulators can be
    stored as typed columns and merged later (:mod:`fair_forge_beam.io.session_stats`, the
    roll-up of stored audits): :meth:`stored_type`, the accumulator's pyarrow type (``None``: not
    storable; subclasses build it in :meth:`_stored_type`, asked once), and two conversions:
    ``to_stored`` gives what ``pyarrow`` takes for that type (tuples or dicts for structs, dicts
    for maps: the accumulator itself by default), ``from_stored`` reads back what ``pyarrow``'s
    ``to_pylist`` gives (:func:`~fair_forge_beam.schemas.arrow.from_arrow_value`: a struct is a
    tuple, a list a tuple, a map a dict). ``from_stored`` of it must merge exactly as the
    accumulator does. Subclasses override :meth:`from_plain`, which takes that plain value (a whole
    column decodes to plain values at once with :func:`~fair_forge_beam.schemas.arrow.from_arrow_array`)."""

    def _stored_type(self):
        return None

    def stored_type(self):
        t = self.__dict__.get("_stored_type_cache", ...)
        if t is ...:
            t = self.__dict__["_stored_type_cache"] = self._stored_type()
        return t

    def to_stored(self, acc):
        return acc

    def from_stored(self, value):
        """A ``to_pylist`` value of :meth:`stored_type` → the accumulator."""
        from fair_forge_beam.schemas.arrow import from_arrow_value

        return self.from_plain(from_arrow_value(value, self.stored_type()))

    def from_plain(self, value):
        """A plain value (:func:`~fair_forge_beam.schemas.arrow.from_arrow_value`'s form: structs
        and lists as tuples, maps as dicts) → the accumulator (default: the value itself)."""
        return value

    def from_arrow(self, array) -> list:
        """A whole Arrow column of :meth:`stored_type` → one accumulator per row (``None`` for a
        null). Default: :func:`~fair_forge_beam.schemas.arrow.from_arrow_array` then
        :meth:`from_plain`; accumulators of large arrays override it to read them with numpy."""
        from fair_forge_beam.schemas.arrow import from_arrow_array

        return [None if v is None else self.from_plain(v) for v in from_arrow_array(array)]


def stored_type_of(fn):
    """The pyarrow type ``fn`` (a ``CombineFn``) stores its accumulators as, or ``None`` (it
    declares none: not a :class:`StoredAccumulator`, or one whose parts are not storable)."""
    get = getattr(fn, "stored_type", None)
    return get() if get is not None else None


def can_subtract(fn) -> bool:
    """Whether ``fn`` (a ``CombineFn``) has an exact ``subtract(acc, other)``, the inverse of its
    merge: ``subtract(merge([a, b]), b)`` estimates as ``a`` does, bit for bit (the slice
    combiner's optional method, :mod:`fair_forge_beam.engine`). A wrapper says so through
    ``can_subtract()`` (it subtracts when its parts do)."""
    check = getattr(fn, "can_subtract", None)
    if check is not None:
        return bool(check())
    return callable(getattr(fn, "subtract", None))


def _struct_rows(array, decoded: list) -> list:
    """Per row of a struct ``array``, ``None`` when the row is null, else the tuple of the rows of
    ``decoded`` (one decoded list per field)."""
    rows = list(zip(*decoded)) if decoded else [()] * len(array)
    if array.null_count:
        rows = [r if ok else None for r, ok in zip(rows, array.is_valid().to_pylist())]
    return rows


@beam.typehints.with_input_types(Any)
@beam.typehints.with_output_types(Any)
class CollectCombineFn(StoredAccumulator, beam.combiners.ToListCombineFn):
    """The values of one session, collected: accumulator a list, output the list sorted by
    ``order`` (a total order of the values — never arrival order; default: the values' own order).
    Used where a session's record needs all its values (turn order, joins of judge requests and
    verdicts) and, for the slices, to carry a session's per-interaction statistics.

    Args:
        value: the declaration of one value — a ``typing.NamedTuple`` class whose annotated fields
            say each position's type (:func:`~fair_forge_beam.schemas.arrow.value_type`); values
            themselves are plain tuples. ``None``: the values are not storable.
        order: sort key of the output (default: the value itself).
        sort: ``False``: the output is the list as collected (for values whose order does not
            matter to their consumer, e.g. inputs of an order-free ``CombineFn``).
        encode, decode: a value → the tuple ``value`` declares, and back (for values of several
            shapes, e.g. ``(0, request meta)`` and ``(1, verdict)``); default: the value as is.
    """

    def __init__(self, value=None, order=None, sort: bool = True, encode=None, decode=None):
        self.value, self.order, self.sort = value, order, sort
        self.encode, self.decode = encode, decode

    def extract_output(self, acc):
        return sorted(acc, key=self.order) if self.sort else acc

    def _stored_type(self):
        if self.value is None:
            return None
        import pyarrow as pa

        from fair_forge_beam.schemas.arrow import value_type

        try:
            return pa.list_(value_type(self.value))
        except TypeError:  # a declaration of no column type (Union[int, list[int]]): not storable, as
            return None  # an undeclared one, which the run's manifest says (trial38b B5: the audit ended in a raw TypeError)

    def to_stored(self, acc):
        """The values in a total order (by their text: ``order`` need not break every tie), never
        arrival order, so stored statistics are the same bytes on every runner and bundling (the
        output order is restored by :meth:`extract_output` after :meth:`from_stored`)."""
        acc = sorted(acc, key=repr)
        return acc if self.encode is None else [self.encode(v) for v in acc]

    def from_plain(self, values):
        return list(values) if self.decode is None else [self.decode(v) for v in values]


# ------------------------------------------------------------------------------ building blocks
# Every CombineFn below has its output equal to its accumulator (or an accumulator of the
# same CombineFn), as ``CombineSlices`` needs: cell accumulators are merged into slices.
class SumCombineFn(StoredAccumulator, beam.combiners.CountCombineFn):
    """Integer sum: Beam's ``CountCombineFn`` (accumulator = output = a Python int, merge =
    ``sum``) adding each element's integer value instead of 1. Order-free (integers). Stored as
    ``int64``; ``subtract`` is integer subtraction."""

    def _stored_type(self):
        import pyarrow as pa

        return pa.int64()

    def from_plain(self, value):
        return int(value)

    def subtract(self, acc, other):
        return acc - other

    def add_input(self, acc, element):
        return acc + int(element)

    def add_inputs(self, acc, elements):
        return acc + sum(int(e) for e in elements)


class WrappedCombineFn(beam.CombineFn):
    """Base of a ``CombineFn`` that wraps ``inner``: every method goes to ``inner`` (setup and
    teardown included) unless the subclass overrides it."""

    def __init__(self, inner: beam.CombineFn):
        self.inner = inner

    def setup(self, *args, **kwargs):
        self.inner.setup(*args, **kwargs)

    def teardown(self, *args, **kwargs):
        self.inner.teardown(*args, **kwargs)

    def create_accumulator(self):
        return self.inner.create_accumulator()

    def add_input(self, acc, element):
        return self.inner.add_input(acc, element)

    def merge_accumulators(self, accumulators):
        return self.inner.merge_accumulators(accumulators)

    def compact(self, acc):
        return self.inner.compact(acc)

    def extract_output(self, acc):
        return self.inner.extract_output(acc)


class OptionalCombineFn(StoredAccumulator, WrappedCombineFn):
    """Wraps ``inner``: ``None`` inputs are skipped, everything else goes to ``inner``.
    Accumulator and output are ``inner``'s (so it works in ``CombineSlices`` when ``inner``'s
    output is its accumulator); so are its stored type and ``subtract``."""

    def add_input(self, acc, element):
        return acc if element is None else self.inner.add_input(acc, element)

    def _stored_type(self):
        return stored_type_of(self.inner)

    def to_stored(self, acc):
        return self.inner.to_stored(acc)

    def from_plain(self, value):
        return self.inner.from_plain(value)

    def from_arrow(self, array) -> list:
        return self.inner.from_arrow(array)

    def can_subtract(self) -> bool:
        return can_subtract(self.inner)

    def subtract(self, acc, other):
        return self.inner.subtract(acc, other)


class StoredParts(StoredAccumulator):
    """A ``CombineFn`` whose accumulator is a list of parts, the k-th kept by the k-th
    ``CombineFn`` of :meth:`_parts` (``(field name, CombineFn or None)``; a ``None`` part holds
    ``None`` and is not stored): stored as ``struct<name: …, …>`` of the stored parts' types
    (``None`` when one of them has none); ``subtract`` subtracts part by part, and exists when
    every stored part's does."""

    def _parts(self) -> list:
        raise NotImplementedError

    def _stored_type(self):
        import pyarrow as pa

        fields = [(name, stored_type_of(fn)) for name, fn in self._parts() if fn is not None]
        if any(t is None for _, t in fields):
            return None
        return pa.struct(fields)

    def to_stored(self, acc):
        return tuple(fn.to_stored(a) for (_, fn), a in zip(self._parts(), acc) if fn is not None)

    def from_plain(self, value):
        stored = iter(value)
        return [None if fn is None else fn.from_plain(next(stored)) for _, fn in self._parts()]

    def from_arrow(self, array) -> list:
        fields = iter(range(array.type.num_fields))
        parts = [[None] * len(array) if fn is None else fn.from_arrow(array.field(next(fields)))
                 for _, fn in self._parts()]
        return [None if r is None else list(r) for r in _struct_rows(array, parts)]

    def can_subtract(self) -> bool:
        return all(fn is None or can_subtract(fn) for _, fn in self._parts())

    def subtract(self, acc, other):
        return [None if fn is None else fn.subtract(a, b) for (_, fn), a, b in zip(self._parts(), acc, other)]


class StoredTupleCombineFn(StoredParts, beam.combiners.TupleCombineFn):
    """Beam's ``TupleCombineFn`` (the k-th part of each input combined by the k-th ``CombineFn``)
    whose accumulators can be stored and subtracted when its parts' can (:class:`StoredParts`,
    fields ``f0``, ``f1``, …)."""

    def _parts(self) -> list:
        return [(f"f{i}", c) for i, c in enumerate(self._combiners)]


class AccumulatorOutput(WrappedCombineFn):
    """Wraps ``inner``: the same accumulation, but the output is the accumulator itself, as
    :class:`~fair_forge_beam.engine.CombineSlices` (the engine's slice roll-up) needs;
    the estimator applies ``inner.extract_output`` once per slice. For a ``CombineFn`` whose own
    output is a summary that cannot be merged (e.g. Bradley–Terry's sorted counts)."""

    def extract_output(self, acc):
        return acc


class WithFailedCount(beam.combiners.TupleCombineFn):
    """An inner ``CombineFn`` of per-session units plus a count of failed interactions: Beam's
    ``TupleCombineFn`` of ``OptionalCombineFn(inner)`` and :class:`SumCombineFn`.

    Input ``(unit or None, n_failed)`` (``None``: a session with nothing scored); output
    ``(inner output, n_failed)``, itself an accumulator of this CombineFn when ``inner``'s output
    is its accumulator. Merging is the inner merge and an integer sum, so order never matters."""

    def __init__(self, inner: beam.CombineFn):
        super().__init__(OptionalCombineFn(inner), SumCombineFn())


class MinMaxCombineFn(beam.CombineFn):
    """``[min, max]`` of ``(lo, hi)`` float pairs (``[None, None]`` when empty); accumulator =
    output, order-free (min and max are exact)."""

    def create_accumulator(self):
        return [None, None]

    def add_input(self, acc, element):
        lo, hi = element
        return self.merge_accumulators([acc, [lo, hi]])

    def merge_accumulators(self, accumulators):
        accumulators = list(accumulators)  # read twice: an iterator would leave ``max`` empty
        los = [a[0] for a in accumulators if a[0] is not None]
        his = [a[1] for a in accumulators if a[1] is not None]
        return [min(los) if los else None, max(his) if his else None]

    def extract_output(self, acc):
        return acc


class KeyedCountsCombineFn(StoredAccumulator, beam.CombineFn):
    """Accumulator = output ``[a, b, {key: n}]``: two integer sums and integer counts per key;
    subclasses say how an input adds. Merging adds integers, so order never matters. Stored as
    ``struct<a: int64, b: int64, counts: map<key, int64>>`` (``key_type``: ``int`` or ``str``)."""

    key_type = str

    def _stored_type(self):
        import pyarrow as pa

        from fair_forge_beam.schemas.arrow import value_type

        return pa.struct([("a", pa.int64()), ("b", pa.int64()), ("counts", value_type(dict[self.key_type, int]))])

    def to_stored(self, acc):
        # a struct is given as a tuple; the map's keys sorted, never in arrival order, so stored
        # statistics are the same records on every runner and bundling (outputs-identity tool)
        return (acc[0], acc[1], dict(sorted(acc[2].items())))

    def from_plain(self, value):
        a, b, counts = value
        return [a, b, dict(counts)]

    def create_accumulator(self):
        return [0, 0, {}]

    def merge_accumulators(self, accumulators):
        out = self.create_accumulator()
        for a in accumulators:
            out[0] += a[0]
            out[1] += a[1]
            for k, n in a[2].items():
                out[2][k] = out[2].get(k, 0) + n
        return out

    def subtract(self, acc, other):
        """``acc`` less ``other`` (which it holds): the two sums and each key's count subtracted; a
        key whose count returns to 0 is dropped — exact for inputs that count a key only when it
        occurs (a count of 0 is never added: lexicon categories matched, groups mentioned).

        Raises:
            ValueError: ``other`` is not part of ``acc`` (a count would turn negative)."""
        out = [acc[0] - other[0], acc[1] - other[1], dict(acc[2])]
        for k, n in other[2].items():
            left = out[2].get(k, 0) - n
            if left < 0:
                raise ValueError(f"subtract: key {quoted(k)} counts {n} in the part but {out[2].get(k, 0)} in the whole")
            if left:
                out[2][k] = left
            else:
                out[2].pop(k, None)
        if out[0] < 0 or out[1] < 0:
            raise ValueError("subtract: the part holds more than the whole")
        return out

    def extract_output(self, acc):
        return acc


class TokenCountsCombineFn(KeyedCountsCombineFn):
    """Lexicon matches of a slice: input ``(toxic_words, total_words, ((category, matches), ...))``,
    output ``[Σ toxic_words, Σ total_words, {category: Σ matches}]`` (Toxicity, spec §6.1)."""

    def add_input(self, acc, element):
        toxic, total, cats = element
        acc[0] += toxic
        acc[1] += total
        for c, n in cats:
            acc[2][c] = acc[2].get(c, 0) + n
        return acc


class SessionGroupCountsCombineFn(KeyedCountsCombineFn):
    """A session's answers: input ``(is_toxic, group indices)`` per answer, output ``[answers,
    toxic answers, {group index: answers mentioning it}]`` (Toxicity's session record)."""

    key_type = int

    def add_input(self, acc, element):
        toxic, groups = element
        acc[0] += 1
        acc[1] += bool(toxic)
        for g in groups:
            acc[2][g] = acc[2].get(g, 0) + 1
        return acc


class CountAndSmallestCombineFn(beam.combiners.TupleCombineFn):
    """Count of the inputs and the largest of the ``cap`` smallest integer keys: Beam's
    ``TupleCombineFn`` of ``CountCombineFn`` and ``TopCombineFn(cap)`` over the negated keys
    (Beam's plain-value heap path; memory O(cap) keys, not O(n); order-free).

    Input: an integer key. Output ``(n, threshold)``: every input with ``key <= threshold`` is
    among the ``cap`` smallest (ties included); ``threshold`` is ``None`` when there is no input.

    Raises:
        ValueError: ``cap < 1``.
    """

    def __init__(self, cap: int):
        self.cap = int(cap)
        if self.cap < 1:
            raise ValueError(f"cap must be >= 1, got {quoted(cap)}")
        super().__init__(beam.combiners.CountCombineFn(), beam.combiners.TopCombineFn(self.cap))

    def add_input(self, accumulator, element):
        return super().add_input(accumulator, (element, -element))

    def extract_output(self, accumulator):
        n, largest_negated = super().extract_output(accumulator)
        return n, (-largest_negated[-1] if largest_negated else None)


@beam.typehints.with_input_types(Any)
@beam.typehints.with_output_types(Any)
class SortedListCombineFn(beam.combiners.ToListCombineFn):
    """Beam's ``ToListCombineFn`` whose output is ``finish(sorted(values, key=sort_key))``, so
    arrival and merge order never show in the output (``finish`` defaults to ``list``). The output
    is not an accumulator: use it where the list is consumed once (a side input). Its output type
    is ``Any`` (``finish`` decides it), not the list type of ``ToListCombineFn``, so Beam never
    encodes it with a list coder."""

    def __init__(self, sort_key, finish=None):
        self.sort_key, self.finish = sort_key, finish

    def extract_output(self, acc):
        items = sorted(acc, key=self.sort_key)
        return items if self.finish is None else self.finish(items)


# ------------------------------------------------------------------------------ rates
class RateCombineFn(StoredAccumulator, beam.CombineFn):
    """Counts ``(k, n)`` of a rate. Input: a bool (one trial) or a ``(successes, trials)`` pair.

    Accumulator: a ``(k, n)`` tuple of Python ints. Output: ``(k, n)``. Stored as
    ``struct<k: int64, n: int64>``; ``subtract`` subtracts both counts.

    Raises:
        ValueError: (in ``add_input``) invalid counts (case-004).
    """

    def _stored_type(self):
        import pyarrow as pa

        return pa.struct([("k", pa.int64()), ("n", pa.int64())])

    def to_stored(self, acc):
        return tuple(acc)

    def from_plain(self, value):
        return (int(value[0]), int(value[1]))

    def subtract(self, acc, other):
        return (acc[0] - other[0], acc[1] - other[1])

    def create_accumulator(self):
        return (0, 0)

    def add_input(self, acc, element):
        if isinstance(element, (bool, np.bool_)):
            k, n = int(element), 1
        else:
            k, n = check_counts(*element)
        return (acc[0] + k, acc[1] + n)

    def merge_accumulators(self, accumulators):
        k = n = 0
        for a in accumulators:
            k += a[0]
            n += a[1]
        return (k, n)

    def extract_output(self, acc):
        return acc


def beta_quantiles(alpha: float, a: float, b: float) -> tuple[float, float]:
    """The ``alpha`` and ``1 - alpha`` quantiles of Beta(``a``, ``b``) as two floats: equal bit for bit
    to ``scipy.stats.beta.ppf([alpha, 1 - alpha], a, b)`` (tests/test_combiners.py compares them).

    For ``0 < alpha < 1`` and finite ``a, b > 0`` through SciPy's public inverse regularized incomplete
    beta function, ``scipy.special.betaincinv(a, b, q)`` (Boost's ``ibeta_inv``, what ``beta.ppf``
    computes there), without importing ``scipy.stats`` (about 0.4 CPU s a process: a roll-up's
    measurable share); any other arguments (edges, infinities) through ``scipy.stats``' own checks."""
    if 0.0 < alpha < 1.0 and 0.0 < a < math.inf and 0.0 < b < math.inf:
        from scipy.special import betaincinv

        lo, hi = betaincinv(float(a), float(b), np.array([alpha, 1.0 - alpha]))
        return float(lo), float(hi)
    from scipy import stats  # imported on first use: a frequentist run never loads scipy.stats

    lo, hi = stats.beta.ppf([alpha, 1.0 - alpha], a, b)
    return float(lo), float(hi)


@functools.lru_cache(maxsize=8192)
def _beta_interval(alpha: float, a: float, b: float) -> tuple[float, float]:
    # ``beta.ppf`` costs ~0.3 ms a call and session-level rates repeat the same few (k, n):
    # remembered per process (a pure function, so results are unchanged)
    return beta_quantiles(alpha, a, b)


def estimate_rate(k: int, n: int, mode: StatisticalMode) -> Estimate:
    """Rate estimate from counts.

    Frequentist: ``k/n`` (``None`` when ``n = 0``). Bayesian (Beta(a, b) prior from the mode,
    default Beta(1, 1)): exact posterior mean ``(a+k)/(a+b+n)`` and exact ``beta.ppf``
    quantiles; ``n = 0`` gives the prior. Other distribution modes: their
    ``rate_estimation`` summary.
    """
    k, n = check_counts(k, n)
    if not mode.is_bayesian:
        r = mode.rate_estimation(k, n)
        return Estimate(mean=None if r is None else float(r), n=n)
    if mode.beta_prior_a is not None:
        a0, b0 = mode.beta_prior()
        a = a0 + k
        b = b0 + (n - k)
        lo, hi = _beta_interval(mode.tail_probability, a, b)
        return Estimate(mean=a / (a + b), ci_low=lo, ci_high=hi, n=n)
    s = mode.rate_estimation(k, n)
    return Estimate(mean=s.get("mean"), ci_low=s.get("ci_low"), ci_high=s.get("ci_high"), n=n)


# ------------------------------------------------------------------------------ categories
class CountVectorSum(StoredAccumulator, beam.CombineFn):
    """Base of the combiners whose accumulator is a list of non-negative ints of a fixed length,
    summed element-wise (exact, order-free) and stored as ``list<int64>``: a subclass gives
    ``create_accumulator`` (its zeros), ``add_input`` and ``extract_output``."""

    def merge_accumulators(self, accumulators):
        out = self.create_accumulator()
        for a in accumulators:
            for i, v in enumerate(a):
                out[i] += v
        return out

    def _stored_type(self):
        import pyarrow as pa

        return pa.list_(pa.int64())

    def from_plain(self, value):
        return list(value)


class CategoryCountCombineFn(CountVectorSum):
    """Count vector over a **declared** category set (zeros included).

    Input: a category name, a mapping category -> non-negative integer count, or a count
    vector aligned with ``categories``.
    Accumulator/output: a tuple of ints aligned with ``categories``. Stored as ``list<int64>``;
    ``subtract`` subtracts the vectors.

    Raises:
        ValueError: empty or duplicated category set; (in ``add_input``) an undeclared
            category or a negative / non-integer count.
    """

    def __init__(self, categories: Sequence[str]):
        cats = list(categories)
        if not cats or len(set(cats)) != len(cats):
            raise ValueError(f"categories must be a non-empty list of distinct names, got {quoted(cats)}")
        self.categories = tuple(cats)
        self._index = {c: i for i, c in enumerate(cats)}

    def create_accumulator(self):
        return [0] * len(self.categories)

    def _index_of(self, c):
        try:
            return self._index[c]
        except KeyError:
            raise ValueError(f"category {quoted(c)} is not in the declared set {quoted(list(self.categories))}") from None

    def add_input(self, acc, element):
        if isinstance(element, str):
            acc[self._index_of(element)] += 1
            return acc
        if isinstance(element, (list, tuple)):
            if len(element) != len(acc):
                raise ValueError(f"count vector has {len(element)} entries, expected {len(acc)}")
            for i, v in enumerate(element):
                acc[i] += v if type(v) is int and v >= 0 else check_count(f"count for category {quoted(self.categories[i])}", v)
            return acc
        for c, v in element.items():
            acc[self._index_of(c)] += check_count(f"count for category {quoted(c)}", v)
        return acc

    def extract_output(self, acc):
        return tuple(acc)

    def to_stored(self, acc):
        return list(acc)

    def subtract(self, acc, other):
        return [a - b for a, b in zip(acc, other)]


def estimate_distribution(counts: Sequence[int], categories: Sequence[str], mode: StatisticalMode) -> dict[str, Estimate]:
    """Per-category proportion estimates from a declared count vector.

    Frequentist: ``c_k / N`` (``None`` when ``N = 0``). Bayesian: ``p ~ Dirichlet(α₀ + c)``
    with the marginal ``p_k ~ Beta(α₀ + c_k, Kα₀ + N − α₀ − c_k)``: exact mean and quantiles.
    """
    counts = [check_count(f"counts[{quoted(c)}]", v) for c, v in zip(categories, counts)]
    total = sum(counts)
    out: dict[str, Estimate] = {}
    if not mode.is_bayesian:
        for c, v in zip(categories, counts):
            out[c] = Estimate(mean=(v / total) if total else None, n=total)
        return out
    a0 = mode.dirichlet_concentration()
    alpha = mode.tail_probability
    K = len(counts)
    for c, v in zip(categories, counts):
        a = a0 + v
        b = K * a0 + total - a
        lo, hi = beta_quantiles(alpha, a, b)
        out[c] = Estimate(mean=a / (a + b), ci_low=lo, ci_high=hi, n=total)
    return out


def estimate_divergence(
    counts: Sequence[int], categories: Sequence[str], reference: Mapping[str, float], mode: StatisticalMode
) -> Estimate:
    """Total variation distance of the observed distribution from ``reference``.

    Frequentist: proportions ``c/N`` vs the (renormalised) reference; ``None`` when ``N = 0``.
    Bayesian: the mode's ``distribution_divergence`` on the counts (declared zeros included).
    """
    counts = [check_count(f"counts[{quoted(c)}]", v) for c, v in zip(categories, counts)]
    total = sum(counts)
    ref_total = float(sum(reference.get(c, 0.0) for c in categories))
    ref = {c: (float(reference.get(c, 0.0)) / ref_total if ref_total else 1.0 / len(categories)) for c in categories}
    if not mode.is_bayesian:
        if total == 0:
            return Estimate(mean=None, n=0)
        obs = {c: v / total for c, v in zip(categories, counts)}
        return Estimate(mean=float(mode.distribution_divergence(obs, ref)), n=total)
    s = mode.distribution_divergence(dict(zip(categories, counts)), ref)
    return Estimate(mean=s["mean"], ci_low=s["ci_low"], ci_high=s["ci_high"], n=total)


# ------------------------------------------------------------------------------ weights
def resolve_weights(weights: Sequence[Optional[float]]) -> tuple[list[float], Optional[str]]:
    """Resolve a session's interaction weights (spec §3.4), by position (not by ``qa_id``).

    Returns ``(resolved, warning)``: resolved weights sum to 1 (empty list for ``n = 0``) and
    ``warning`` says why given weights were replaced by equal ones (``None`` otherwise).

    | case                                   | result                                   |
    |----------------------------------------|------------------------------------------|
    | no weights                             | ``1/n`` each                             |
    | all given, ``|Σw − 1| ≤ 1e-6``         | as given                                 |
    | all given, other sum                   | ``1/n`` each + warning                   |
    | mixed, ``Σw ≥ 1``                      | ``1/n`` each + warning                   |
    | mixed, ``Σw < 1``                      | given kept; others ``(1 − Σw)/|U|``      |

    Upstream keys weights by ``qa_id``, so duplicate ids collapse; here position is the key
    (case-002).

    Raises:
        ValueError: a weight that is negative, NaN or infinite (case-003).
    """
    n = len(weights)
    if n == 0:
        return [], None
    for i, w in enumerate(weights):
        if w is not None and (not math.isfinite(w) or w < 0):
            raise ValueError(f"weights[{i}] must be a finite number >= 0, got {quoted(w)}")
    given = [w for w in weights if w is not None]
    if not given:
        return [1.0 / n] * n, None
    try:
        total = math.fsum(given)
    except OverflowError:  # e.g. two weights of 1e308: the sum is certainly not 1
        total = math.inf
    if len(given) == n:
        if abs(total - 1.0) <= 1e-6:
            return [float(w) for w in weights], None
        return [1.0 / n] * n, f"weights sum to {quoted(total)}, not 1: equal weights used"
    if total >= 1.0:
        return [1.0 / n] * n, f"given weights sum to {quoted(total)} >= 1 with unweighted interactions: equal weights used"
    share = (1.0 - total) / (n - len(given))
    return [float(w) if w is not None else share for w in weights], None


class WeightedMeanStats:
    """Sufficient statistics of a session's weighted mean (spec §18.2), summed exactly.

    Fields (exact sums in units of 2**-1074): ``n``, ``S = Σ s``, ``n_w``, ``W = Σ w``,
    ``WS = Σ w s`` (weighted items), ``S_u = Σ s`` (unweighted items).
    """

    __slots__ = ("n", "S", "n_w", "W", "WS", "S_u")

    def __init__(self):
        self.n = self.S = self.n_w = self.W = self.WS = self.S_u = 0

    def add(self, score: float, weight: Optional[float]) -> "WeightedMeanStats":
        s = to_exact(score)
        self.n += 1
        self.S += s
        if weight is None:
            self.S_u += s
        else:
            if not math.isfinite(weight) or weight < 0:
                raise ValueError(f"weight must be a finite number >= 0, got {quoted(weight)}")
            self.n_w += 1
            self.W += to_exact(weight)
            ws = float(weight) * float(score)
            # w*s overflows float64 for finite w, s (w = 1e308, s > 1.8): add the exact product
            # then (such weights never sum to 1, so WS is only read through an exact ratio).
            self.WS += to_exact(ws) if math.isfinite(ws) else (to_exact(weight) * s) >> 1074
        return self

    def merge(self, other: "WeightedMeanStats") -> "WeightedMeanStats":
        for f in self.__slots__:
            setattr(self, f, getattr(self, f) + getattr(other, f))
        return self

    def __eq__(self, other):
        return isinstance(other, WeightedMeanStats) and all(getattr(self, f) == getattr(other, f) for f in self.__slots__)

    def __reduce__(self):
        return (_rebuild_wms, (tuple(getattr(self, f) for f in self.__slots__),))


def _rebuild_wms(values):
    s = WeightedMeanStats()
    for f, v in zip(WeightedMeanStats.__slots__, values):
        setattr(s, f, v)
    return s


def weighted_mean_from_stats(st: WeightedMeanStats) -> Optional[float]:
    """Session weighted mean with upstream weight semantics (spec §3.4 + §3.5, via §18.2).

    ``None`` for an empty session (upstream: 0.0 or a crash).
    """
    if st.n == 0:
        return None
    plain = exact_ratio(st.S, st.n << 1074) if st.S else 0.0
    if st.n_w == 0:
        return plain
    try:
        W = from_exact(st.W)
    except OverflowError:  # Σw above the float range: certainly not 1
        W = math.inf
    n_u = st.n - st.n_w
    if n_u == 0:
        if abs(W - 1.0) <= 1e-6 and st.W != 0:
            return exact_ratio(st.WS, st.W)
        return plain
    if W >= 1.0:
        return plain
    return from_exact(st.WS) + (1.0 - W) * exact_ratio(st.S_u, n_u << 1074)


def merge_into_new(self, accumulators):
    """``merge_accumulators`` for accumulators with a ``merge`` method: merge into a fresh one."""
    out = self.create_accumulator()
    for a in accumulators:
        out.merge(a)
    return out


def merge_into(fn, acc, other):
    """``acc`` with ``other`` merged in, as ``fn.merge_accumulators([acc, other])`` gives it, but
    into ``acc`` where ``fn`` allows (Beam's contract: ``add_input`` may change and return the
    accumulator it is given, ``merge_accumulators`` its first): ``other`` is never changed, and
    ``acc`` must be the caller's own (made by ``fn``, not an input another consumer holds).

    In place for a ``CombineFn`` with a ``merge_into(acc, other)`` method, one whose
    ``merge_accumulators`` is :func:`merge_into_new` (its statistics' ``merge``), a
    :class:`WrappedCombineFn` that does not override ``merge_accumulators`` (its ``inner``) and
    Beam's ``TupleCombineFn`` (part by part); any other through its ``merge_accumulators``."""
    own = getattr(fn, "merge_into", None)
    if own is not None:
        return own(acc, other)
    merge = getattr(type(fn), "merge_accumulators", None)
    if merge is merge_into_new:
        return acc.merge(other)
    if merge is WrappedCombineFn.merge_accumulators:
        return merge_into(fn.inner, acc, other)
    if merge is beam.combiners.TupleCombineFn.merge_accumulators and isinstance(acc, list):
        for i, (c, b) in enumerate(zip(fn._combiners, other)):
            acc[i] = merge_into(c, acc[i], b)
        return acc
    return fn.merge_accumulators([acc, other])


def output_stats(self, acc):
    """``extract_output`` that returns the statistics themselves (the estimator runs later)."""
    return acc


class SessionWeightedMeanCombineFn(beam.CombineFn):
    """``CombineFn`` over ``(score, weight_or_None)`` giving the session weighted mean (§18.2).

    Output: the :class:`WeightedMeanStats` (read with :func:`weighted_mean_from_stats`).
    """

    def create_accumulator(self):
        return WeightedMeanStats()

    def add_input(self, acc, element):
        score, weight = element
        return acc.add(float(score), None if weight is None else float(weight))

    merge_accumulators = merge_into_new
    extract_output = output_stats


# ------------------------------------------------------------------------------ bootstrap
class BootstrapStats:
    """Exact per-unit sums for a grouped Bayesian bootstrap of weighted means of ``m`` values.

    Every unit (e.g. a session) belongs to one of ``max_units`` hash buckets
    (``stable_hash64(unit) % max_units``: random groups, independent of the data) and the
    bootstrap weight of a unit is the weight of its bucket. ``units`` maps a unit key to
    ``[n_items, W, WV_1, ..., WV_m]`` (exact sums) while there are at most ``max_units`` units,
    and a bucket index to the same sums afterwards (memory bound ``max_units`` entries). Both
    representations give the same estimate bit for bit, and the final state depends only on
    the multiset of inputs, never on merge order. Up to :data:`EXACT_UNITS` (64) units, every
    unit gets its own keyed weights: exactly Rubin's unit-level Bayesian bootstrap. Beyond, it is
    a Bayesian bootstrap over ``max_units`` random groups of units (few collisions while units
    are fewer than buckets), whose interval converges to the unit-level one — O(1) cost per
    unit, O(B · max_units) per estimate, the rows shared by all slices.

    Once pooled, the bucket sums are held as one numpy object array of Python integers,
    ``sums[bucket] = [n_items, W, WV_1, ..., WV_m]`` (shape ``(max_units, m + 2)``), and a boolean
    array ``present`` of the buckets that hold an entry: a merge or a subtraction of two pooled
    statistics is one element-wise integer addition (exact, as the dict's), not a loop over
    buckets. ``units`` gives the pooled state as the same dict (bucket → sums) for reading.
    """

    __slots__ = ("m", "max_units", "bucketed", "_units", "n_units", "sums", "present")

    def __init__(self, m: int, max_units: int):
        self.m, self.max_units = m, max_units
        self.bucketed = False
        self._units: dict = {}
        self.n_units = 0
        self.sums = self.present = None

    @property
    def units(self) -> dict:
        """Unit key (or, pooled, bucket index) → ``[n_items, W, WV_1, ..., WV_m]``, sorted by key
        when pooled. Pooled, a new dict of new lists (changing it changes nothing)."""
        if not self.bucketed:
            return self._units
        rows = np.flatnonzero(self.present)
        return dict(zip(rows.tolist(), self.sums[rows].tolist()))

    def _bucket(self, unit: str) -> int:
        return 0 if self.max_units == 1 else bucket_of(unit, self.max_units)

    def _add_entry(self, key, entry, source_bucketed: bool):
        if self.bucketed:
            b = key if source_bucketed else self._bucket(key)
            row = self.sums[b]
            if self.present[b]:
                for i, v in enumerate(entry):
                    row[i] += v
            else:
                row[:] = list(entry)
                self.present[b] = True
            return
        cur = self._units.get(key)
        if cur is None:
            self._units[key] = list(entry)
        else:
            for i, v in enumerate(entry):
                cur[i] += v
        if len(self._units) > self.max_units:
            self._to_buckets()

    def _empty_buckets(self):
        self.sums = np.zeros((self.max_units, self.m + 2), dtype=object)  # Python int 0 in every cell
        self.present = np.zeros(self.max_units, dtype=bool)

    def _to_buckets(self):
        old = self._units
        self._units, self.bucketed = {}, True
        self._empty_buckets()
        for k, e in old.items():
            self._add_entry(k, e, source_bucketed=False)

    def add(self, unit: str, weight: float, values: Sequence[float], n_items: int = 1) -> "BootstrapStats":
        if len(values) != self.m:
            raise ValueError(f"expected {self.m} values, got {len(values)}")
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"weight must be a finite number >= 0, got {quoted(weight)}")
        entry = [int(n_items), to_exact(weight)] + [to_exact(float(weight) * float(v)) for v in values]
        self.n_units += 1
        self._add_entry(str(unit), entry, source_bucketed=False)
        return self

    def merge(self, other: "BootstrapStats") -> "BootstrapStats":
        if other.bucketed and not self.bucketed:
            self._to_buckets()
        if self.bucketed and other.bucketed:  # every bucket at once: exact integer sums, element-wise
            np.add(self.sums, other.sums, out=self.sums)
            np.logical_or(self.present, other.present, out=self.present)
        else:
            for k, e in other._units.items():
                self._add_entry(k, e, source_bucketed=False)
        self.n_units += other.n_units
        return self

    def subtract(self, other: "BootstrapStats") -> "BootstrapStats":
        """Removes ``other`` (a part of ``self``: merged into it earlier) in place: its entries'
        sums are subtracted from the same units (or, when ``self`` pools units into buckets and
        ``other`` does not, from their buckets), and an entry whose sums all return to 0 is
        dropped — every unit added holds ``n_items >= 1`` (a session), so an entry of zeros is
        one no input is left in. The estimate is then ``a``'s, bit for bit, when ``self`` was
        ``merge(a, other)`` and ``a`` keeps units the way the merge does (both pooled or both not:
        true of a roll-up, whose merged runs hold the same unit keys as the union; a merge that
        pooled where ``a`` alone would not cannot give back ``a``'s units).

        Raises:
            ValueError: ``other`` pools units and ``self`` does not, or ``other`` holds a unit
                ``self`` lacks (not a part of it)."""
        if other.bucketed and not self.bucketed:
            raise ValueError("subtract: the part pools its units into buckets and the whole does not")
        if other.bucketed:  # both pooled: every bucket at once
            missing = np.flatnonzero(other.present & ~self.present)
            if missing.size:
                raise ValueError(f"subtract: unit {quoted(int(missing[0]))} of the part is not in the whole")
            np.subtract(self.sums, other.sums, out=self.sums)
            touched = np.flatnonzero(other.present)
            self.present[touched] = (self.sums[touched] != 0).any(axis=1)
        else:
            for k, e in other._units.items():
                if self.bucketed:
                    key = self._bucket(k)
                    if not self.present[key]:
                        raise ValueError(f"subtract: unit {quoted(key)} of the part is not in the whole")
                    row = self.sums[key]
                    for i, v in enumerate(e):
                        row[i] -= v
                    self.present[key] = any(row)
                    continue
                cur = self._units.get(k)
                if cur is None:
                    raise ValueError(f"subtract: unit {quoted(k)} of the part is not in the whole")
                left = [a - b for a, b in zip(cur, e)]
                if any(left):
                    self._units[k] = left
                else:
                    del self._units[k]
        self.n_units -= other.n_units
        return self

    def copy(self) -> "BootstrapStats":
        """An independent copy (its sums can be changed without changing ``self``'s)."""
        if self.bucketed:
            return _rebuild_bs(self.m, self.max_units, True, (self.sums.copy(), self.present.copy()), self.n_units)
        return _rebuild_bs(self.m, self.max_units, False, {k: list(e) for k, e in self._units.items()}, self.n_units)

    @property
    def n_items(self) -> int:
        if self.bucketed:
            return sum(self.sums[:, 0].tolist())  # an absent bucket's row is zeros
        return sum(e[0] for e in self._units.values())

    def __reduce__(self):
        state = (self.sums, self.present) if self.bucketed else self._units
        return (_rebuild_bs, (self.m, self.max_units, self.bucketed, state, self.n_units))


#: slices with at most this many units get per-unit bootstrap weights (no bucket pooling)
EXACT_UNITS = 64


@functools.lru_cache(maxsize=16384)
def bucket_of(unit: str, buckets: int) -> int:
    """Stable bucket index of a unit key (cached: a session is added to several slices)."""
    return stable_hash64("bootstrap-bucket", str(unit)) % buckets


def _rebuild_bs(m, max_units, bucketed, units, n_units):
    """A :class:`BootstrapStats` from its state: ``units`` the dict of unit sums, or pooled
    (``bucketed``) either the pair ``(sums, present)`` of arrays or a dict bucket → sums."""
    s = BootstrapStats(m, max_units)
    s.bucketed, s.n_units = bucketed, n_units
    if not bucketed:
        s._units = units
    elif isinstance(units, dict):
        s._empty_buckets()
        for b, e in units.items():
            s.sums[b] = list(e)
            s.present[b] = True
    else:
        s.sums, s.present = units
    return s


class BootstrapMeanCombineFn(StoredAccumulator, beam.CombineFn):
    """Mergeable statistics of ``m`` weighted means with Bayesian-bootstrap uncertainty.

    Input: ``(unit_key, weight, (v_1, ..., v_m))`` or ``(unit_key, weight, values, n_items)``
    — one resampling unit (a session: weight = its interaction count, values = its mean
    scores, ``n_items`` = its interactions, default 1). Output: :class:`BootstrapStats`; read
    it with :func:`estimate_bootstrap_means`.

    Stored as ``struct<bucketed: bool, n_units: int64, units: list<struct<unit: string, bucket:
    int64, n_items: int64, sums: list<binary>>>>``: one entry per unit key (``bucket`` null) or,
    once pooled, per bucket (``unit`` null), sorted; ``sums`` = the exact ``W, WV_1 … WV_m``
    (:func:`~fair_forge_beam.statistical.exact.exact_to_bytes`). ``subtract``:
    :meth:`BootstrapStats.subtract` on a copy.

    Args:
        n_values: ``m``.
        max_units: number of hash buckets of units (default 1024); also the number of units kept
            individually before the accumulator pools them.
    """

    def __init__(self, n_values: int, max_units: int = 1024):
        if n_values < 1 or max_units < 1:
            raise ValueError("n_values and max_units must be >= 1")
        self.n_values, self.max_units = int(n_values), int(max_units)

    def create_accumulator(self):
        return BootstrapStats(self.n_values, self.max_units)

    def add_input(self, acc, element):
        return acc.add(element[0], float(element[1]), element[2], element[3] if len(element) > 3 else 1)

    merge_accumulators = merge_into_new
    extract_output = output_stats

    def _stored_type(self):
        import pyarrow as pa

        entry = pa.struct([("unit", pa.string()), ("bucket", pa.int64()), ("n_items", pa.int64()),
                           ("sums", pa.list_(pa.binary()))])
        return pa.struct([("bucketed", pa.bool_()), ("n_units", pa.int64()), ("units", pa.list_(entry))])

    def to_stored(self, acc: BootstrapStats):
        from fair_forge_beam.statistical.exact import exact_to_bytes

        if acc.bucketed:  # the buckets in order, from the arrays
            rows = np.flatnonzero(acc.present)
            units = [(None, b, int(e[0]), [exact_to_bytes(v) for v in e[1:]])
                     for b, e in zip(rows.tolist(), acc.sums[rows].tolist())]
        else:
            units = [(k, None, int(e[0]), [exact_to_bytes(v) for v in e[1:]]) for k, e in sorted(acc.units.items())]
        return (bool(acc.bucketed), int(acc.n_units), units)

    def from_plain(self, value) -> BootstrapStats:
        from fair_forge_beam.statistical.exact import exact_from_bytes

        bucketed, n_units, units = value
        st = BootstrapStats(self.n_values, self.max_units)
        st.bucketed, st.n_units = bool(bucketed), int(n_units)
        if not bucketed:
            st._units = {u: [int(n), *(exact_from_bytes(x) for x in sums)] for u, b, n, sums in units}
            return st
        st._empty_buckets()
        if units:
            rows = [b for _, b, _, _ in units]
            st.sums[rows] = [[int(n), *(exact_from_bytes(x) for x in sums)] for _, _, n, sums in units]
            st.present[rows] = True
        return st

    def from_arrow(self, array) -> list:
        """A whole stored column → one :class:`BootstrapStats` per row (``None`` for a null), read
        column by column: every stored sum decoded in one pass, each pooled row's buckets filled in
        one array assignment (what :meth:`from_plain` builds, without a tuple per entry)."""
        if len(array) == 0:
            return []
        valid = array.is_valid().to_pylist()
        bucketed = array.field("bucketed").to_pylist()
        n_units = array.field("n_units").to_pylist()
        units = array.field("units")
        starts = units.offsets.to_pylist()  # into units.values (which ignores the slice's offset)
        entries = units.values
        width = self.n_values + 2
        sums = entries.field("sums")
        s_off = sums.offsets.to_numpy()
        n_entries = len(entries)
        if n_entries and not (np.diff(s_off) == width - 1).all():  # not m + 1 sums per entry: read as plain values
            return super().from_arrow(array)
        full = np.empty((n_entries, width), dtype=object)
        if n_entries:
            s_vals = sums.values.slice(int(s_off[0]), int(s_off[-1] - s_off[0])).to_pylist()
            full[:, 1:] = np.array([int.from_bytes(x, "big", signed=True) for x in s_vals],
                                   dtype=object).reshape(n_entries, width - 1)
            full[:, 0] = entries.field("n_items").to_pylist()
        unit_keys = bucket_keys = None
        out = []
        for i, ok in enumerate(valid):
            if not ok:
                out.append(None)
                continue
            a, b = starts[i], starts[i + 1]
            st = BootstrapStats(self.n_values, self.max_units)
            st.bucketed, st.n_units = bool(bucketed[i]), int(n_units[i])
            if st.bucketed:
                if bucket_keys is None:
                    bucket_keys = entries.field("bucket").to_numpy(zero_copy_only=False)
                st._empty_buckets()
                if b > a:
                    rows = bucket_keys[a:b].astype(np.int64)
                    st.sums[rows] = full[a:b]
                    st.present[rows] = True
            else:
                if unit_keys is None:
                    unit_keys = entries.field("unit").to_pylist()
                st._units = dict(zip(unit_keys[a:b], full[a:b].tolist()))
            out.append(st)
        return out

    def subtract(self, acc: BootstrapStats, other: BootstrapStats) -> BootstrapStats:
        return acc.copy().subtract(other)


def _summaries(mode: StatisticalMode, replicates: np.ndarray, n: int) -> Estimate:
    s = mode.summarize(replicates)
    return Estimate(mean=s["mean"], ci_low=s["ci_low"], ci_high=s["ci_high"], n=n)


def estimate_bootstrap_means(
    st: BootstrapStats, mode: StatisticalMode, namespace: str = "bootstrap", rows: Optional[RowCache] = None
) -> list[Estimate]:
    """Estimates of the ``m`` weighted means ``Σ WV_j / Σ W`` of a :class:`BootstrapStats`.

    Frequentist: the exact ratio. Bayesian: Rubin's (1981) Bayesian bootstrap over the unit
    buckets — per replicate ``b``, ``Σ_k g_kb WV_jk / Σ_k g_kb W_k`` with ``g_kb ~ Exp(1)``
    (normalised: Dirichlet(1, ..., 1)) from a stream keyed by ``(seed, namespace, bucket k)``
    — summarised by the mode (mean, percentile interval). Keying by bucket, not by slice, makes
    every slice a ratio within one joint draw over the population and lets a worker reuse the
    rows across slices (``rows``). ``n`` of each estimate = interactions. Empty statistics or
    zero total weight give ``Estimate(mean=None)``; a single unit gives its own mean with a
    degenerate interval.
    """
    n_items, units = st.n_items, st.units
    W_total = sum(e[1] for e in units.values())
    if not units or W_total == 0:
        return [Estimate(mean=None, n=n_items) for _ in range(st.m)]
    if not mode.is_bayesian:
        return [
            Estimate(mean=exact_ratio(sum(e[2 + j] for e in units.values()), W_total), n=n_items)
            for j in range(st.m)
        ]
    if len(units) == 1:  # one unit: every replicate is its own mean
        (e,) = units.values()
        vals = [exact_ratio(e[2 + j], e[1]) for j in range(st.m)]
        return [Estimate(mean=v, ci_low=v, ci_high=v, n=n_items) for v in vals]
    B = mode.replicate_count
    if not st.bucketed and len(units) <= EXACT_UNITS:
        # few units: each gets its own keyed weights (exactly Rubin's unit-level bootstrap; no
        # hash collision can merge two of a handful of sessions)
        keys = sorted(units)
        unit_rows = shared_row_cache(mode.seed, namespace + "|unit", B, max_rows=4 * EXACT_UNITS)
        return _ratio_replicates(mode, unit_rows.row_views(keys), [units[k] for k in keys], st.m, n_items)
    # exact per-bucket sums (identical for the unit and the bucket representation)
    buckets: dict[int, list[int]] = {}
    for key, e in units.items():
        b = key if st.bucketed else bucket_of(key, st.max_units)
        cur = buckets.get(b)
        if cur is None:
            buckets[b] = list(e)
        else:
            for i, v in enumerate(e):
                cur[i] += v
    if len(buckets) == 1:  # degenerate posterior: every replicate is the bucket's own mean
        (e,) = buckets.values()
        vals = [exact_ratio(e[2 + j], e[1]) for j in range(st.m)]
        return [Estimate(mean=v, ci_low=v, ci_high=v, n=n_items) for v in vals]
    keys = sorted(buckets)
    if rows is None or rows.n != B or rows.seed != mode.seed or rows.namespace != namespace:
        rows = shared_row_cache(mode.seed, namespace, B, max_rows=st.max_units)
    return _ratio_replicates(mode, rows.row_views(keys), [buckets[k] for k in keys], st.m, n_items)


def _clip_to_units(reps: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Replicates of a weighted mean clipped to ``[lo, hi]``, the range of the unit means.

    A replicate ``Σ g v / Σ g`` is a convex combination of the unit means, so it lies in their
    range; float rounding can step outside by an ulp (five sessions of 1.5 gave
    ``[1.4999999999999998, 1.5000000000000002]``). Clipping restores the exact range, so a
    degenerate sample (all units equal) has the exact degenerate interval ``[v, v]``.
    """
    return np.clip(reps, lo, hi)


def _range_summary(mode: StatisticalMode, reps: np.ndarray, lo: float, hi: float, n: int) -> Estimate:
    """The mode's summary of replicates that lie in ``[lo, hi]``, kept there: a degenerate range
    (``lo == hi``) gives exactly ``[v, v]`` with mean ``v``; the mean is clipped too (a float mean
    of equal values can differ from them in the last bit)."""
    if lo == hi:
        return Estimate(mean=float(lo), ci_low=float(lo), ci_high=float(lo), n=n)
    e = _summaries(mode, _clip_to_units(reps, lo, hi), n)
    if e.mean is not None:
        e = e.model_copy(update={"mean": min(max(e.mean, lo), hi)})
    return e


def _range_summaries(reps: np.ndarray, lo: np.ndarray, hi: np.ndarray, alpha: float, n: int) -> list[Estimate]:
    """:func:`_range_summary` of every row of ``reps`` (already clipped to ``[lo, hi]`` per row)
    with the default summary (mean, equal-tailed percentile interval at tail ``alpha``), in one
    vectorised pass: one ``numpy.partition`` and one mean over all rows. The same numbers, bit
    for bit, as the row-by-row call (the row means are the same pairwise sums; the quantiles the
    same order statistics and interpolation)."""
    q_lo, q_hi = percentile_intervals(reps, alpha)
    means = reps.mean(axis=1)
    out = []
    for j in range(reps.shape[0]):
        a, b = float(lo[j]), float(hi[j])
        if a == b:
            out.append(Estimate(mean=a, ci_low=a, ci_high=a, n=n))
        else:
            out.append(Estimate(mean=min(max(float(means[j]), a), b), ci_low=float(q_lo[j]), ci_high=float(q_hi[j]), n=n))
    return out


def _weighted_row_sums(rows: list, weights: list) -> list:
    """``[Σ_k rows[k]·w[k] for w in weights]`` (rows of one length ``B``), each the bits of
    ``(G * w[:, None]).sum(axis=0)`` of the stacked rows: numpy reduces that axis as a running
    ``acc += row`` from zeros (for ``B >= 2``; a single column is summed pairwise), which is the
    loop here, one row at a time and every sum from the row while it is in the cache — no ``(K, B)``
    matrix of the rows nor of their products (40 MB each at 1,024 buckets × 5,000 draws)."""
    if len(rows[0]) < 2:
        G = np.stack(rows)
        return [(G * np.array(w, dtype=np.float64)[:, None]).sum(axis=0) for w in weights]
    accs = [np.zeros(len(rows[0])) for _ in weights]
    tmp = np.empty_like(accs[0])
    for k, r in enumerate(rows):
        for acc, w in zip(accs, weights):
            np.multiply(r, w[k], out=tmp)
            acc += tmp
    return accs


def _ratio_replicates(mode: StatisticalMode, G: list, entries: list, m: int, n_items: int) -> list[Estimate]:
    """Summaries of ``Σ_k g_k WV_jk / Σ_k g_k W_k`` per replicate (the rows ``G`` align with ``entries``),
    clipped to the range of the units' own means (:func:`_clip_to_units`)."""
    den, *nums = _weighted_row_sums(G, [[from_exact(e[i]) for e in entries] for i in range(1, m + 2)])
    out = []
    for j in range(m):
        num = nums[j]
        means = [exact_ratio(e[2 + j], e[1]) for e in entries if e[1] != 0]
        out.append(_range_summary(mode, num / den, min(means), max(means), n_items) if means
                   else _summaries(mode, num / den, n_items))
    return out


# ------------------------------------------------------------------ per-unit Gamma bootstrap
_FIX = 2.0**32  # fixed-point scale of the exact replicate sums
_FIX_LIMIT = 2.0**30
#: smallest positive unit weight GammaBootstrapCombineFn accepts (2**-16): below it, g·w would
#: fall under the 2**-32 resolution of the exact fixed-point sums.
GAMMA_MIN_WEIGHT = 2.0**-16


def _to_limbs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split float64 values into exact fixed-point limbs ``x·2³² = hi·2³² + lo`` (``0 ≤ lo < 2³²``).

    Every step is exact in IEEE arithmetic (power-of-two scaling, ``rint``, ``floor``, and a
    subtraction whose result is representable), so int64 sums of the limbs are exact and
    associative: merge order cannot change a bit. Resolution 2⁻³² per added value.
    """
    if x.size and float(np.max(np.abs(x))) >= _FIX_LIMIT:
        raise ValueError(f"bootstrap contribution {quoted(float(np.max(np.abs(x))))} exceeds 2**30; rescale the scores or weights")
    v = np.rint(x * _FIX)
    hi = np.floor(v / _FIX)
    lo = v - hi * _FIX
    return hi.astype(np.int64), lo.astype(np.int64)


def _from_limbs(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    return (hi.astype(np.float64) * _FIX + lo.astype(np.float64)) / _FIX


class GammaBootstrapStats:
    """DESIGN §4's Gamma-weighted accumulator: per-replicate sums ``Σ g_ub w_u``, ``Σ g_ub w_u v_ju``.

    ``g_u`` (``B`` draws of Exp(1) = Gamma(1, 1)) comes from a counter-based Philox stream keyed
    by ``(seed, namespace, unit key)`` — an element id or a session key — so a unit gets the same
    weights on every worker, runner and bundle order. Sums are exact fixed-point integers
    (:func:`_to_limbs`), so merging is associative bit for bit. Size: ``2·(m+1)·B`` int64.
    """

    __slots__ = ("m", "B", "seed", "namespace", "hi", "lo", "n_units", "n_items", "W", "WV", "unit0", "multi", "vmin", "vmax")

    def __init__(self, m: int, B: int, seed: int, namespace: str):
        self.m, self.B, self.seed, self.namespace = m, B, int(seed), namespace
        self.hi = np.zeros((m + 1, B), dtype=np.int64)
        self.lo = np.zeros((m + 1, B), dtype=np.int64)
        self.n_units = self.n_items = 0
        self.W = 0
        self.WV = [0] * m
        self.unit0: Optional[str] = None  # smallest unit key seen
        self.multi = False  # more than one distinct unit key seen
        self.vmin: list = [None] * m  # range of the unit values of positive weight (clips replicates)
        self.vmax: list = [None] * m

    def _see(self, unit: Optional[str], multi: bool) -> None:
        if unit is None:
            return
        if self.unit0 is not None and unit != self.unit0:
            self.multi = True
        self.unit0 = unit if self.unit0 is None else min(self.unit0, unit)
        self.multi = self.multi or multi

    def add(self, unit: str, weight: float, values: Sequence[float], n_items: int, rows: RowCache) -> "GammaBootstrapStats":
        if len(values) != self.m:
            raise ValueError(f"expected {self.m} values, got {len(values)}")
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"weight must be a finite number >= 0, got {quoted(weight)}")
        if 0 < weight < GAMMA_MIN_WEIGHT:
            raise ValueError(
                f"weight {quoted(weight)} is below {quoted(GAMMA_MIN_WEIGHT)}, the smallest positive weight the exact fixed-point "
                "sums resolve; rescale the weights (e.g. use interaction counts) or use BootstrapMeanCombineFn"
            )
        g = rows.rows([str(unit)])[0]
        contrib = np.empty((self.m + 1, self.B))
        contrib[0] = g * float(weight)
        for j, v in enumerate(values):
            contrib[j + 1] = g * (float(weight) * float(v))
        hi, lo = _to_limbs(contrib)
        self.hi += hi
        self.lo += lo
        self.n_units += 1
        self._see(str(unit), False)
        self.n_items += int(n_items)
        self.W += to_exact(float(weight))
        for j, v in enumerate(values):
            self.WV[j] += to_exact(float(weight) * float(v))
            if weight > 0:
                self._range(j, float(v), float(v))
        return self

    def _range(self, j: int, lo: Optional[float], hi: Optional[float]) -> None:
        if lo is None:
            return
        self.vmin[j] = lo if self.vmin[j] is None else min(self.vmin[j], lo)
        self.vmax[j] = hi if self.vmax[j] is None else max(self.vmax[j], hi)

    def merge(self, other: "GammaBootstrapStats") -> "GammaBootstrapStats":
        self.hi += other.hi
        self.lo += other.lo
        self.n_units += other.n_units
        self._see(other.unit0, other.multi)
        self.n_items += other.n_items
        self.W += other.W
        self.WV = [a + b for a, b in zip(self.WV, other.WV)]
        for j in range(self.m):
            self._range(j, other.vmin[j], other.vmax[j])
        return self

    def __eq__(self, other):
        return (
            isinstance(other, GammaBootstrapStats)
            and np.array_equal(self.hi, other.hi)
            and np.array_equal(self.lo, other.lo)
            and (self.n_units, self.n_items, self.W, self.WV, self.unit0, self.multi, self.vmin, self.vmax)
            == (other.n_units, other.n_items, other.W, other.WV, other.unit0, other.multi, other.vmin, other.vmax)
        )

    def __reduce__(self):
        return (_rebuild_gbs, (self.m, self.B, self.seed, self.namespace, self.hi, self.lo, self.n_units, self.n_items, self.W, self.WV, self.unit0, self.multi, self.vmin, self.vmax))


def _rebuild_gbs(m, B, seed, namespace, hi, lo, n_units, n_items, W, WV, unit0=None, multi=True, vmin=None, vmax=None):
    s = GammaBootstrapStats(m, B, seed, namespace)
    s.hi, s.lo, s.n_units, s.n_items, s.W, s.WV = hi, lo, n_units, n_items, W, list(WV)
    s.unit0, s.multi = unit0, multi
    s.vmin, s.vmax = list(vmin or [None] * m), list(vmax or [None] * m)
    return s


class GammaBootstrapCombineFn(beam.CombineFn):
    """Bayesian bootstrap of ``m`` weighted means with per-unit Gamma(1) weights (DESIGN §4).

    Input: ``(unit_key, weight, values)`` or ``(unit_key, weight, values, n_items)``. Each input
    costs ``B`` keyed draws (``mc_samples``); the accumulator holds ``2·(m+1)·B`` integers. Use
    :class:`BootstrapMeanCombineFn` (hash-bucketed, O(1) per unit) when that cost matters; see
    the README for measured figures. Positive unit weights must be at least
    :data:`GAMMA_MIN_WEIGHT` (2⁻¹⁶) — use counts, not tiny fractions — else ``ValueError``. Output: :class:`GammaBootstrapStats`, read with
    :func:`estimate_gamma_bootstrap_means`.
    """

    def __init__(self, n_values: int, mode: StatisticalMode, namespace: str = "gamma-bootstrap"):
        if n_values < 1:
            raise ValueError("n_values must be >= 1")
        self.n_values, self.B, self.seed, self.namespace = int(n_values), mode.replicate_count, mode.seed, namespace
        self._rows: Optional[RowCache] = None

    def _cache(self) -> RowCache:
        if self._rows is None:
            self._rows = shared_row_cache(self.seed, self.namespace, self.B, max_rows=64)
        return self._rows

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_rows"} | {"_rows": None}

    def create_accumulator(self):
        return GammaBootstrapStats(self.n_values, self.B, self.seed, self.namespace)

    def add_input(self, acc, element):
        return acc.add(element[0], float(element[1]), element[2], element[3] if len(element) > 3 else 1, self._cache())

    merge_accumulators = merge_into_new
    extract_output = output_stats


def estimate_gamma_bootstrap_means(st: GammaBootstrapStats, mode: StatisticalMode) -> list[Estimate]:
    """Estimates from a :class:`GammaBootstrapStats`: frequentist ``Σ w v / Σ w`` (exact); Bayesian
    the replicate ratios ``Σ g w v / Σ g w`` summarised by the mode. Empty -> ``mean=None``."""
    if st.n_units == 0 or st.W == 0:
        return [Estimate(mean=None, n=st.n_items) for _ in range(st.m)]
    if not mode.is_bayesian:
        return [Estimate(mean=exact_ratio(st.WV[j], st.W), n=st.n_items) for j in range(st.m)]
    if not st.multi:  # one distinct unit: point-mass posterior
        vals = [exact_ratio(st.WV[j], st.W) for j in range(st.m)]
        return [Estimate(mean=v, ci_low=v, ci_high=v, n=st.n_items) for v in vals]
    sums = _from_limbs(st.hi, st.lo)
    ok = sums[0] > 0  # a replicate whose weights all rounded to 0 carries no information
    out = []
    for j in range(st.m):
        reps = sums[j + 1][ok] / sums[0][ok]
        if st.vmin[j] is not None:  # convex combinations of the unit values (see _clip_to_units)
            out.append(_range_summary(mode, reps, st.vmin[j], st.vmax[j], st.n_items))
        else:
            out.append(_summaries(mode, reps, st.n_items))
    return out


def session_mean_estimates(
    scores: np.ndarray,
    weights: Sequence[Optional[float]],
    positions: Sequence[int],
    mode: StatisticalMode,
    namespace: str = "within-session",
) -> tuple[list[Estimate], Optional[str]]:
    """Per-session weighted means of ``m`` score columns, computed directly from the raw list.

    ``scores``: array ``(n, m)`` in conversation order; ``weights``: the raw ``weight`` fields;
    ``positions``: the turn indices. Frequentist: spec §3.4/§3.5 exactly (via
    :class:`WeightedMeanStats`, the same arithmetic as :class:`SessionWeightedMeanCombineFn`).
    Bayesian: Bayesian bootstrap over the session's interactions with resolved weights ``ŵ``:
    replicate ``b`` = ``Σ g_ib ŵ_i s_i / Σ g_ib ŵ_i``; rows ``g_i`` are the worker's shared rows of
    ``namespace`` (``"<metric>|within-session"``; common random numbers keyed by turn index, see
    :class:`RowCache` and :func:`~fair_forge_beam.statistical.seeding.shared_row_cache`). ``n = 1`` gives the score
    itself as mean and both interval ends; ``n = 2`` is computed exactly (closed form, see
    :func:`_two_point_posterior`).

    Returns ``(estimates, weight_warning)``.
    """
    scores = np.asarray(scores, dtype=np.float64)
    n = scores.shape[0]
    m = scores.shape[1] if scores.ndim == 2 else 0
    resolved, warning = resolve_weights(list(weights))
    if n == 0:
        return [Estimate(mean=None, n=0) for _ in range(m)], warning
    if not mode.is_bayesian:
        out = []
        for j in range(m):
            st = WeightedMeanStats()
            for i in range(n):
                st.add(float(scores[i, j]), weights[i])
            out.append(Estimate(mean=weighted_mean_from_stats(st), n=n))
        return out, warning
    w = np.asarray(resolved, dtype=np.float64)
    if n == 1:
        return [Estimate(mean=float(scores[0, j]), ci_low=float(scores[0, j]), ci_high=float(scores[0, j]), n=1) for j in range(m)], warning
    if n == 2:
        return [_two_point_posterior(scores[:, j], w, mode.ci_level) for j in range(m)], warning
    rows = shared_row_cache(mode.seed, namespace, mode.replicate_count, max_rows=WITHIN_SESSION_ROWS)
    reps = _within_session_replicates(scores, w, list(positions), rows)
    live = w > 0
    if live.any():  # convex combinations of the weighted scores: clip rounding (see _clip_to_units)
        s_lo, s_hi = scores[live].min(axis=0), scores[live].max(axis=0)
        reps = np.clip(reps, s_lo[:, None], s_hi[:, None], out=reps)  # reps: a new array of this call's
        if type(mode).summarize is StatisticalMode.summarize:
            return _range_summaries(reps, s_lo, s_hi, mode.tail_probability, n), warning
    if type(mode).summarize is not StatisticalMode.summarize:  # a custom mode's own summary
        return [_summaries(mode, reps[j], n) for j in range(m)], warning
    lo, hi = percentile_intervals(reps, mode.tail_probability)
    means = reps.mean(axis=1)
    return [Estimate(mean=float(means[j]), ci_low=float(lo[j]), ci_high=float(hi[j]), n=n) for j in range(m)], warning


#: bytes of draws a within-session bootstrap holds at once (a chunk of interactions × replicates × columns)
#: keyed rows a worker keeps per within-session namespace (turn indices beyond it are drawn again)
WITHIN_SESSION_ROWS = 256
WITHIN_SESSION_CHUNK_BYTES = 16 * 2**20


def _within_session_replicates(scores: np.ndarray, w: np.ndarray, pos: list, rows: RowCache) -> np.ndarray:
    """Replicates ``(m, B)`` of ``Σ_i g_ib w_i s_ij / Σ_i g_ib w_i`` over the session's ``n``
    interactions, the rows ``g_i`` keyed by turn index (``rows``), streamed over chunks of
    interactions so memory is bounded by :data:`WITHIN_SESSION_CHUNK_BYTES`, not by draws × n
    (issue 28: a session of 200k interactions).

    The same bits as the unchunked sum: each chunk is reduced along the interaction axis together
    with the running sum as its first row, and numpy reduces a non-innermost axis in row order
    (a running ``acc += row``, no pairwise summation, no BLAS), so the additions happen in the
    same order as over the whole ``(n, B)`` matrix (tests/test_bounded_statistics.py)."""
    n, m = scores.shape
    B = rows.n
    chunk = max(1, WITHIN_SESSION_CHUNK_BYTES // (8 * B * (m + 2)))
    contiguous = pos == list(range(n))
    if n <= chunk:  # one chunk (a session of up to ~140 interactions at 5,000 draws): the same sums, see below
        return _one_chunk_ratios(scores, *_one_chunk_weights(w, pos, rows, contiguous))
    den = np.zeros((1, B))
    num = np.zeros((m, 1, B))
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        if contiguous and stop <= rows.max_rows:  # the first turns: the worker's cached rows
            raw = rows.prefix(stop)[start:stop]
        elif contiguous or stop - start > rows.max_rows:  # beyond the cache: drawn for this chunk only
            raw = exponential_rows(rows.seed, rows.namespace, pos[start:stop], B)
        else:
            raw = rows.rows(pos[start:stop])
        G = raw * w[start:stop, None]
        den = np.concatenate([den, G]).sum(axis=0, keepdims=True)
        prod = scores.T[:, start:stop, None] * G[None, :, :]
        num = np.concatenate([num, prod], axis=1).sum(axis=1, keepdims=True)
    return num[:, 0, :] / den[0]


def _one_chunk_weights(w: np.ndarray, pos: list, rows: RowCache, contiguous: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(G, den)`` of a session within one chunk (:func:`_within_session_replicates`): its rows ×
    weights ``(n, B)`` and their sums over the interactions, which depend on the turns and weights
    only (a bundle's sessions of one length and equal weights share them)."""
    n = len(pos)
    if contiguous and n <= rows.max_rows:
        raw = rows.prefix(n)
    elif contiguous or n > rows.max_rows:
        raw = exponential_rows(rows.seed, rows.namespace, pos, rows.n)
    else:
        raw = rows.rows(pos)
    G = raw * w[:, None]
    # the row-order sums of the chunked loop without its leading zero row: adding an exact 0.0 first or
    # last changes no bit but the sign of a zero sum, which the trailing "+ 0.0" makes the loop's (+0.0)
    return G, G.sum(axis=0) + 0.0


def _one_chunk_ratios(scores: np.ndarray, G: np.ndarray, den: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
    """The replicates ``(m, B)`` of a session within one chunk from its ``(G, den)``
    (:func:`_one_chunk_weights`), into ``out`` if given."""
    num = (scores.T[:, :, None] * G[None, :, :]).sum(axis=1) + 0.0
    return np.divide(num, den, out=out)


def session_mean_and_point_estimates(
    scores: np.ndarray,
    weights: Sequence[Optional[float]],
    positions: Sequence[int],
    mode: StatisticalMode,
    namespace: str = "within-session",
) -> tuple[list[Estimate], list[Estimate], Optional[str]]:
    """A session's weighted means in ``mode`` and as frequentist point estimates, in one call.

    Arguments as :func:`session_mean_estimates`. Returns ``(estimates, points, weight_warning)``:
    ``points`` are the exact weighted means (spec §3.4/§3.5, what a session contributes to its
    slice's bootstrap); ``estimates`` are ``points`` themselves in a point-estimate mode, else the
    mode's within-session Bayesian bootstrap (:func:`session_mean_estimates`).
    """
    points, warning = session_mean_estimates(scores, weights, positions, _POINT_MODE)
    if not mode.is_bayesian:
        return points, points, warning
    estimates, _ = session_mean_estimates(scores, weights, positions, mode, namespace)
    return estimates, points, warning


def session_mean_and_point_estimates_many(
    sessions: Sequence[tuple[np.ndarray, Sequence[Optional[float]], Sequence[int]]],
    mode: StatisticalMode,
    namespace: str = "within-session",
) -> list[tuple[list[Estimate], list[Estimate], Optional[str]]]:
    """:func:`session_mean_and_point_estimates` of each ``(scores, weights, positions)`` of
    ``sessions``, the same bits, with the within-session bootstraps of many sessions in one pass
    (:func:`session_mean_estimates_many`): what a :class:`~fair_forge_beam.engine.SessionReducer`'s
    ``reduce_many`` calls for the sessions of a bundle."""
    points = [session_mean_estimates(s, w, p, _POINT_MODE) for s, w, p in sessions]
    if not mode.is_bayesian:
        return [(pt, pt, warning) for pt, warning in points]
    estimates = session_mean_estimates_many(sessions, mode, namespace)
    return [(est, pt, warning) for (est, _), (pt, warning) in zip(estimates, points)]


#: bytes of the rows × weights :func:`session_mean_estimates_many` keeps for sessions of the same turns and
#: weights (the sessions it summarises in one pass are as many as stay below glibc's mmap threshold:
#: :func:`~fair_forge_beam._malloc.rows_below_mmap_threshold`)
WITHIN_SESSION_BATCH_BYTES = 2**20


def session_mean_estimates_many(
    sessions: Sequence[tuple[np.ndarray, Sequence[Optional[float]], Sequence[int]]],
    mode: StatisticalMode,
    namespace: str = "within-session",
) -> list[tuple[list[Estimate], Optional[str]]]:
    """:func:`session_mean_estimates` of each ``(scores, weights, positions)`` of ``sessions``,
    the same bits, for the sessions of a bundle (issue 26: a 100k audit bootstraps about 20,000
    sessions of 3+ interactions, 100–230 µs each). Sessions of one length ``n`` (3 or more, within
    one chunk and the worker's cached rows, finite scores, some live weight) and ``m`` columns, in
    a mode with the default summary, go together (:func:`_within_session_batch`): the rows ×
    weights and their sums (``G``, ``den``) are computed once per distinct turns and weights (a
    bundle's sessions of one length with no weights given share them), each session's ratios by
    :func:`_one_chunk_ratios` as alone, then their clip, means and order statistics in one
    vectorised pass over ``(S·m, B)`` rows (:func:`_range_summaries`, row by row the same numbers).
    Any other session is :func:`session_mean_estimates` itself (tests/test_bounded_statistics.py
    compares the two)."""
    out: list = [None] * len(sessions)
    if mode.is_bayesian and type(mode).summarize is StatisticalMode.summarize:
        B = mode.replicate_count
        rows = shared_row_cache(mode.seed, namespace, B, max_rows=WITHIN_SESSION_ROWS)
        groups: dict = {}
        for i, (scores, weights, positions) in enumerate(sessions):
            scores = np.asarray(scores, dtype=np.float64)
            if scores.ndim != 2 or not 3 <= scores.shape[0] <= rows.max_rows:
                continue
            n, m = scores.shape
            if m == 0 or n > max(1, WITHIN_SESSION_CHUNK_BYTES // (8 * B * (m + 2))) or not np.isfinite(scores).all():
                continue
            resolved, warning = resolve_weights(list(weights))
            w = np.asarray(resolved, dtype=np.float64)
            live = w > 0
            if not live.any():
                continue
            groups.setdefault((n, m), []).append((i, scores, w, live, list(positions), warning))
        for (n, m), members in groups.items():
            # the batch's (S, m, B) replicates, and the copies its order statistics take, below the mmap
            # threshold (6 sessions of one column at 5,000 draws): 26 sessions, 1 MB, were mapped and faulted in
            # afresh three times a batch. Each row is summarised alone: the batch size changes no bit
            step = rows_below_mmap_threshold(8 * B * m)
            shared: dict = {}  # (turns, weights) -> (G, den) within this group
            for start in range(0, len(members), step):
                for i, est in _within_session_batch(members[start:start + step], rows, mode.tail_probability, shared):
                    out[i] = est
    return [o if o is not None else session_mean_estimates(*sessions[i], mode, namespace) for i, o in enumerate(out)]


def _within_session_batch(members: list, rows: RowCache, alpha: float, shared: dict) -> list:
    """``[(index, (estimates, warning))]`` of sessions of one length ``n`` and ``m`` columns
    (:func:`session_mean_estimates_many`): each the bits of :func:`session_mean_estimates`."""
    S, (n, m), B = len(members), members[0][1].shape, rows.n
    reps = np.empty((S, m, B))
    s_lo, s_hi = np.empty((S, m)), np.empty((S, m))
    contiguous = list(range(n))
    for k, (_, s, w, live, pos, _) in enumerate(members):
        # the rows × weights of sessions with the same turns and weights are computed once (the bits of each
        # session's own, a pure function of them; at most WITHIN_SESSION_BATCH_BYTES of them kept)
        key = (tuple(pos), w.tobytes())
        Gd = shared.get(key)
        if Gd is None:
            Gd = _one_chunk_weights(w, pos, rows, pos == contiguous)
            if (len(shared) + 1) * Gd[0].nbytes <= WITHIN_SESSION_BATCH_BYTES:
                shared[key] = Gd
        _one_chunk_ratios(s, *Gd, out=reps[k])
        s_lo[k], s_hi[k] = s[live].min(axis=0), s[live].max(axis=0)
    reps = np.clip(reps, s_lo[:, :, None], s_hi[:, :, None], out=reps)
    est = _range_summaries(reps.reshape(S * m, B), s_lo.ravel(), s_hi.ravel(), alpha, n)
    return [(i, (est[k * m:(k + 1) * m], warning)) for k, (i, _, _, _, _, warning) in enumerate(members)]


def _two_point_posterior(s: np.ndarray, w: np.ndarray, ci_level: float) -> Estimate:
    """Exact Bayesian-bootstrap posterior of a two-interaction weighted mean.

    With Dirichlet(1, 1) weights ``(U, 1 − U)``, ``U ~ Uniform(0, 1)``, the replicate is
    ``T(U) = (U a1 + (1−U) a2) / (U b1 + (1−U) b2)`` with ``a = ŵ s``, ``b = ŵ``: monotone in
    ``U``, so its quantiles are ``T(α)`` and ``T(1 − α)`` and its mean has a closed form —
    exact, with no Monte-Carlo error.
    """
    a1, a2 = float(w[0] * s[0]), float(w[1] * s[1])
    b1, b2 = float(w[0]), float(w[1])
    alpha = (1.0 - ci_level) / 2.0

    def T(u):
        return (u * a1 + (1 - u) * a2) / (u * b1 + (1 - u) * b2)

    if b1 == 0 or b2 == 0:  # one interaction carries no weight: the other's score, exactly
        v = float(s[0] if b2 == 0 else s[1])
        return Estimate(mean=v, ci_low=v, ci_high=v, n=2)
    if b1 == b2:
        mean = (a1 + a2) / (b1 + b2)
    else:
        d = b1 - b2
        r = (a1 - a2) / d
        mean = r + (a2 - b2 * r) * math.log(b1 / b2) / d
    lo, hi = sorted((T(alpha), T(1.0 - alpha)))
    return Estimate(mean=float(mean), ci_low=float(lo), ci_high=float(hi), n=2)
