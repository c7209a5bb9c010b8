"""A per-key combine over bounded, windowed data that groups in the global window.

Why: a bounded run with ``--window`` (files read with ``--input``) groups every key of every
stage in event-time windows. Beam's FnApiRunner groups windowed data by running a general
trigger driver once per key (timers, in-memory state, a class built per state access):
about 0.5–1 ms of CPU per key, against microseconds for the global window, and the session
stages have one key per conversation. With 1-minute windows this made the windowed audit
2–3× slower than the same audit without windows (``benchmarks/bench_streaming.py``).

How: when the windowing can only ever fire one pane per window — a bounded input, a
non-merging window function, Beam's default trigger, timestamps at the end of the window,
not a streaming pipeline — the window becomes part of the key, the combine runs in the global
window (a plain shuffle), and each result is put back into its window with the timestamp and
pane that Beam's windowed grouping gives on FnApiRunner (the window's last millisecond;
ON_TIME, index 0, first, not last). The same pattern as Beam's own ``ReshufflePerKey``, which carries windows
through a global-window ``GroupByKey`` and restores the original windowing after it.

Anything else — the global window (batch), merging (session) windows, early firings or
allowed lateness, unbounded or streaming pipelines — gets Beam's ``CombinePerKey`` unchanged,
so batch graphs and streaming semantics stay exactly as they were.

A combine with about one key per session keeps a small pre-combine table:
``combine_per_key(fn, pcoll, table_keys=N)`` on a bounded batch input pre-combines in a table of at
most ``N`` keys, the oldest key flushed first, then groups the partial accumulators with a
``GroupByKey`` and merges them (:class:`SmallTableCombinePerKey`). Why: batch runners lift a
``CombinePerKey`` into a pre-combine before its shuffle (``translations.lift_combiners``), and
Beam's Python worker keeps that table for the whole bundle, flushing it only at 100,000 keys
(``PGBKCVOperation.max_keys``: a key count, not bytes). A Flink batch bundle is a whole
partition: at 1M interactions each worker's table filled to 100,000 session accumulators of about
4 kB each, and the largest SDK worker grew 1.6× from 100k to 1M interactions (docs/performance.md,
"Why the workers grew"). A session's values arrive within a few hundred interactions of each other
(the scorers' batches), so a few thousand keys fold nearly all of them before the shuffle. Unbounded
and streaming pipelines keep ``CombinePerKey`` (their bundles are small).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Optional

from fair_forge_beam._beam import beam
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.transforms import trigger as _trigger
from apache_beam.transforms import window as _window
from apache_beam.transforms.core import Windowing
from apache_beam.transforms.window import TimestampCombiner
from apache_beam.utils.timestamp import Duration, Timestamp
from apache_beam.utils.windowed_value import PaneInfo, PaneInfoTiming, WindowedValue

__all__ = ["combine_per_key", "GlobalKeyedWindowCombine", "SmallTableCombinePerKey", "can_group_in_global_window"]

#: the pane Beam's windowed grouping gives a bounded window's single firing on FnApiRunner
_ON_TIME_PANE = PaneInfo(is_first=True, is_last=False, timing=PaneInfoTiming.ON_TIME, index=0, nonspeculative_index=0)


def can_group_in_global_window(pcoll) -> bool:
    """Whether a per-key combine of ``pcoll`` can group in the global window with the window in
    the key and give exactly what a windowed grouping gives (one ON_TIME pane per key and
    window): bounded input, non-global non-merging windows, the default trigger, zero allowed
    lateness, end-of-window timestamps, and a pipeline not run in streaming mode."""
    w: Windowing = pcoll.windowing
    if isinstance(w.windowfn, _window.GlobalWindows) or w.windowfn.is_merging():
        return False
    if not isinstance(w.triggerfn, _trigger.DefaultTrigger) or w.allowed_lateness > Duration(0):
        return False
    if w.timestamp_combiner != TimestampCombiner.OUTPUT_AT_EOW:
        return False
    return _batch(pcoll)


def _batch(pcoll) -> bool:
    """A bounded input in a pipeline not run in streaming mode."""
    if not getattr(pcoll, "is_bounded", True):
        return False
    options = getattr(pcoll.pipeline, "_options", None)
    return not (options is not None and options.view_as(StandardOptions).streaming)


@beam.typehints.with_output_types(Any)
class _KeyByWindow(beam.DoFn):
    """``(key, value)`` in window ``[s, e)`` → ``((s µs, e µs, key), value)`` in the global
    window (once per window the element is in)."""

    def setup(self):
        self._global = _window.GlobalWindows.windowed_value(None)
        self._bounds = {}

    def process(self, kv, window=beam.DoFn.WindowParam):
        bounds = self._bounds.get(window)
        if bounds is None:
            if not isinstance(window, _window.IntervalWindow):
                raise TypeError(f"GlobalKeyedWindowCombine needs interval windows, got {type(window).__name__}")
            if len(self._bounds) > 4096:
                self._bounds.clear()
            bounds = self._bounds[window] = (window.start.micros, window.end.micros)
        key, value = kv
        yield self._global.with_value(((*bounds, key), value))


@beam.typehints.with_output_types(Any)
class _RestoreWindow(beam.DoFn):
    """``((s µs, e µs, key), combined)`` → ``(key, combined)`` back in window ``[s, e)``, stamped
    at the window's last millisecond (as a windowed grouping's output arrives), in its ON_TIME
    pane."""

    def setup(self):
        self._windows = {}

    def process(self, kv):
        (start, end, key), combined = kv
        cached = self._windows.get((start, end))
        if cached is None:
            if len(self._windows) > 4096:
                self._windows.clear()
            w = _window.IntervalWindow(Timestamp(micros=start), Timestamp(micros=end))
            # the end of the window as the runner's coder carries it (millisecond precision)
            cached = self._windows[(start, end)] = ((w,), Timestamp(micros=w.max_timestamp().micros // 1000 * 1000))
        yield WindowedValue((key, combined), cached[1], cached[0], _ON_TIME_PANE)


class GlobalKeyedWindowCombine(beam.PTransform):
    """``PCollection[(K, V)]`` in bounded, non-merging windows → ``PCollection[(K, combined)]``
    in the same windows: ``CombinePerKey(combine_fn)`` grouped in the global window with the
    window bounds in the key (see the module docstring). Use :func:`combine_per_key`, which
    falls back to ``beam.CombinePerKey`` whenever this would not be exact.

    Raises:
        ValueError: (at construction of the graph) the input does not satisfy
            :func:`can_group_in_global_window`.
    """

    def __init__(self, combine_fn: beam.CombineFn, table_keys: Optional[int] = None):
        super().__init__()
        self.combine_fn, self.table_keys = combine_fn, table_keys

    def expand(self, pcoll):
        if not can_group_in_global_window(pcoll):
            raise ValueError("GlobalKeyedWindowCombine needs bounded, non-merging windows with the default trigger")
        saved = pcoll.windowing
        keyed = pcoll | "KeyByWindow" >> beam.ParDo(_KeyByWindow())
        keyed._windowing = Windowing(_window.GlobalWindows())  # the elements are in the global window
        out = (
            keyed
            | "CombinePerKey" >> (beam.CombinePerKey(self.combine_fn) if self.table_keys is None
                                  else SmallTableCombinePerKey(self.combine_fn, self.table_keys))
            | "RestoreWindow" >> beam.ParDo(_RestoreWindow())
        )
        out._windowing = saved  # the elements are back in their windows
        return out


class _PreCombine(beam.DoFn):
    """``(key, value)`` in the global window → ``(key, partial accumulator)``: a table of at most
    ``max_keys`` accumulators; a new key beyond it flushes the oldest key, the end of the bundle
    flushes the rest (compacted, as Beam's pre-combine does before a shuffle)."""

    def __init__(self, combine_fn: beam.CombineFn, max_keys: int):
        self.combine_fn, self.max_keys = combine_fn, max_keys

    def setup(self):
        self.combine_fn.setup()

    def start_bundle(self):
        self.table = OrderedDict()

    def process(self, kv):
        key, value = kv
        fn, table = self.combine_fn, self.table
        acc = table.get(key)
        if acc is None:
            if len(table) >= self.max_keys:
                old, old_acc = table.popitem(last=False)
                yield old, fn.compact(old_acc)
            acc = fn.create_accumulator()
        table[key] = fn.add_input(acc, value)

    def finish_bundle(self):
        fn, table = self.combine_fn, self.table
        self.table = OrderedDict()
        for key, acc in table.items():
            yield _window.GlobalWindows.windowed_value((key, fn.compact(acc)))

    def teardown(self):
        self.combine_fn.teardown()


class _MergeGroup(beam.DoFn):
    """``(key, accumulators)`` → ``(key, combine_fn's output)``; with ``fold``: ``(key, values)``
    added to one accumulator."""

    def __init__(self, combine_fn: beam.CombineFn, fold: bool = False):
        self.combine_fn, self.fold = combine_fn, fold

    def setup(self):
        self.combine_fn.setup()

    def process(self, kv):
        fn = self.combine_fn
        acc = fn.add_inputs(fn.create_accumulator(), kv[1]) if self.fold else fn.merge_accumulators(kv[1])
        yield kv[0], fn.extract_output(acc)

    def teardown(self):
        self.combine_fn.teardown()


class SmallTableCombinePerKey(beam.PTransform):
    """``PCollection[(K, V)]`` → ``PCollection[(K, combined)]``, as ``CombinePerKey(combine_fn)``
    with its pre-combine table bounded at ``max_keys`` keys (see the module docstring): no runner
    lifts it, so no worker holds more. In the global window: :class:`_PreCombine`, a
    ``GroupByKey``, a merge per key; in any other windowing (it keeps its timestamps exact): a
    ``GroupByKey`` and a fold of each key's values. The accumulators are added and merged in the
    order they arrive, as a lifted combine's; a ``CombineFn`` whose output must not depend on that
    orders in ``extract_output``."""

    def __init__(self, combine_fn: beam.CombineFn, max_keys: int):
        super().__init__()
        if int(max_keys) < 1:
            raise ValueError(f"max_keys must be >= 1, got {max_keys!r}")
        self.combine_fn, self.max_keys = beam.CombineFn.maybe_from_callable(combine_fn), int(max_keys)

    def expand(self, pcoll):
        if not pcoll.windowing.is_default():
            return pcoll | "GroupByKey" >> beam.GroupByKey() | "Fold" >> beam.ParDo(_MergeGroup(self.combine_fn, True))
        return (
            pcoll
            | "PreCombine" >> beam.ParDo(_PreCombine(self.combine_fn, self.max_keys))
            | "GroupByKey" >> beam.GroupByKey()
            | "Merge" >> beam.ParDo(_MergeGroup(self.combine_fn))
        )


def combine_per_key(combine_fn: beam.CombineFn, pcoll, table_keys: Optional[int] = None) -> beam.PTransform:
    """The per-key combine for ``pcoll``: :class:`GlobalKeyedWindowCombine` where it is exact
    (:func:`can_group_in_global_window`), ``beam.CombinePerKey(combine_fn)`` otherwise (the
    global window included, so batch graphs are unchanged).

    ``table_keys``: for keys that are nearly all distinct within a bundle (a session's): on a
    bounded batch input the combine is a :class:`SmallTableCombinePerKey` with at most that many
    keys in its pre-combine (inside :class:`GlobalKeyedWindowCombine` for windowed input), never
    Beam's lifted one; unbounded and streaming pipelines keep ``CombinePerKey`` (module docstring)."""
    if can_group_in_global_window(pcoll):
        return GlobalKeyedWindowCombine(combine_fn, table_keys)
    if table_keys is not None and _batch(pcoll):
        return SmallTableCombinePerKey(combine_fn, table_keys)
    return beam.CombinePerKey(combine_fn)
