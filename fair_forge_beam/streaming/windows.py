"""Event-time windows for metrics: parsing ``--window``, triggers, and window/pane fields.

Window specifications (main job ``--window``):

| spec                 | Beam ``WindowFn``                          |
|----------------------|--------------------------------------------|
| ``fixed:1h``         | ``FixedWindows(3600)``                     |
| ``sliding:1h,5m``    | ``SlidingWindows(size=3600, period=300)``  |
| ``session:10m``      | ``Sessions(gap_size=600)``                 |

Durations are an integer or decimal number followed by ``ms``, ``s``, ``m``, ``h`` or ``d``
(``90s``, ``1.5h``); a bare number is seconds.

How a metric aggregates inside a window (multi-stage aggregation):

A metric groups several times (interactions → sessions → slice cells → slices). With early
firings or late data, a stage that *accumulates* would re-send the whole window content with
every pane and the next stage would count it again. So the metric's input is windowed in
**discarding** mode (every pane of an intermediate stage carries only what is new), and the
last combine before the estimator — :class:`~fair_forge_beam.engine.CombineSlices`'
slice merge — is re-windowed in **accumulating** mode (:func:`accumulating_windowing`): each
slice record then describes everything the window has received so far (an early pane the part
seen until then, the on-time pane the whole window, each late pane the window updated with
its late elements). The windows themselves are kept: fixed windows by their own
``FixedWindows`` (a standard WindowFn, so this runs on Flink too), sliding and session windows
by :class:`KeepWindows` / :class:`KeepMergingWindows` (for session windows a late element that
widens a session merges with the earlier panes of that session), pickled Python WindowFns that
Beam's Java runners reject — sliding and session windows with early or late panes run on the
in-memory and Prism runners only.

Consequence for session-level records: a conversation's turns that arrive in different panes
are grouped in different panes; the slice's interaction counts and means add up exactly, but
``n_sessions`` counts a session once per pane in which it received turns.

Seeds: an estimator's random draws are keyed by ``(seed, metric, slice key, component)`` and,
when windowed, by the window bounds (:func:`window_seed_parts`) — never by arrival or pane
order. In the global window the key is unchanged, so batch results stay identical.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from fair_forge_beam._beam import beam
from fair_forge_beam.quoting import quoted
from apache_beam.coders import coders as _coders
from apache_beam.transforms import trigger as _trigger
from apache_beam.transforms import window as _window
from apache_beam.transforms.core import Windowing
from apache_beam.utils.timestamp import Duration
from apache_beam.utils.windowed_value import PaneInfoTiming
from fair_forge_beam.statistical.combiners import WrappedCombineFn

__all__ = [
    "parse_duration",
    "WindowSpec",
    "KeepWindows",
    "is_windowed",
    "needs_accumulating_merge",
    "EmptyPaneSafeCombineFn",
    "accumulating_windowing",
    "window_fields",
    "window_seed_parts",
    "AddWindowFields",
    "KeepRepresentableWindows",
    "WINDOW_RANGE_STAGE",
]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


#: longest accepted duration, seconds (100 Julian years)
MAX_DURATION = 100 * 365.25 * 86400.0
#: shortest positive duration accepted, seconds: Beam's timestamp resolution (1 µs); a shorter one
#: is 0 in Beam (``fixed:0.0001ms`` divided by zero, ``session:0.0001ms`` refused deep in Beam)
MIN_DURATION = 1e-6
#: most windows one record may fall in (a sliding window's SIZE / PERIOD): Beam copies the
#: record into each (``sliding:1d,1ms``: 86.4 million copies per record, a MemoryError)
MAX_WINDOWS_PER_RECORD = 1000


def parse_duration(text: str, what: str = "duration") -> float:
    """Seconds in ``"90s"``, ``"10m"``, ``"1.5h"``, ``"250ms"``, ``"2d"`` or ``"30"`` (seconds).

    Raises:
        ValueError: not a non-negative number with one of the units ms, s, m, h, d, or longer
            than ``MAX_DURATION`` (100 years: Beam cannot represent windows far beyond that).
    """
    m = _DURATION.match(str(text))
    if not m:
        raise ValueError(f"{what}: cannot read {quoted(text)} as a duration; use e.g. 30s, 10m, 1h, 1.5h, 250ms or 2d")
    seconds = float(m.group(1)) * _UNITS[m.group(2) or "s"]
    if not seconds <= MAX_DURATION:
        raise ValueError(f"{what}: {quoted(text)} is longer than 100 years ({MAX_DURATION:g} s), the longest duration accepted")
    if 0 < seconds and round(seconds * 1e6) < 1:
        raise ValueError(f"{what}: {quoted(text)} is shorter than 1 µs (0.001ms), Beam's timestamp resolution")
    return seconds


@dataclass(frozen=True)
class WindowSpec:
    """A parsed ``--window`` value plus early firing and allowed lateness (seconds).

    Attributes:
        kind: ``"fixed"``, ``"sliding"`` or ``"session"``.
        size: window size (fixed, sliding) or gap (session), seconds, > 0.
        period: sliding period, seconds, > 0 and ≤ size (``None`` otherwise).
        early_firing: processing-time delay of early panes, whole seconds ≥ 1 (``None``: no
            early panes).
        allowed_lateness: how long after the watermark passes a window's end late elements
            still update it (0: late elements are dropped by Beam).
    """

    kind: str
    size: float
    period: Optional[float] = None
    early_firing: Optional[float] = None
    allowed_lateness: float = 0.0

    @classmethod
    def parse(cls, text: str, early_firing: Optional[str] = None, allowed_lateness: Optional[str] = None) -> "WindowSpec":
        """``"fixed:1h"``, ``"sliding:1h,5m"`` or ``"session:10m"`` (+ ``"30s"``, ``"10m"``).

        Raises:
            ValueError: unknown kind, bad or non-positive durations, a sliding period larger
                than its size; the message names the accepted forms.
        """
        kind, _, rest = str(text).partition(":")
        kind = kind.strip().lower()
        forms = "fixed:SIZE, sliding:SIZE,PERIOD or session:GAP (e.g. fixed:1h, sliding:1h,5m, session:10m)"
        if kind not in ("fixed", "sliding", "session") or not rest.strip():
            raise ValueError(f"--window {quoted(text)}: expected {forms}")
        parts = [p.strip() for p in rest.split(",")]
        period = None
        if kind == "sliding":
            if len(parts) != 2:
                raise ValueError(f"--window {quoted(text)}: a sliding window needs SIZE,PERIOD (e.g. sliding:1h,5m)")
            size, period = parse_duration(parts[0], "--window size"), parse_duration(parts[1], "--window period")
            if period <= 0 or period > size:
                raise ValueError(f"--window {quoted(text)}: the period must be > 0 and at most the size")
            per_record = round(size * 1e6) / round(period * 1e6)  # as Beam counts them: whole microseconds
            if per_record > MAX_WINDOWS_PER_RECORD:
                raise ValueError(f"--window {quoted(text)}: each record would fall in {per_record:,.0f} windows "
                                 f"(SIZE / PERIOD); at most {MAX_WINDOWS_PER_RECORD:,} are accepted: use a longer period")
        else:
            if len(parts) != 1:
                raise ValueError(f"--window {quoted(text)}: expected {forms}")
            size = parse_duration(parts[0], "--window size")
        if size <= 0:
            raise ValueError(f"--window {quoted(text)}: the size must be > 0")
        early = parse_duration(early_firing, "--early-firing") if early_firing else None
        if early is not None and (early < 1 or early != int(early)):
            raise ValueError(f"--early-firing {quoted(early_firing)}: must be a whole number of seconds >= 1 (e.g. 30s, 1m)")
        lateness = parse_duration(allowed_lateness, "--allowed-lateness") if allowed_lateness else 0.0
        return cls(kind, size, period, early, lateness)

    def window_fn(self) -> _window.WindowFn:
        if self.kind == "fixed":
            return _window.FixedWindows(self.size)
        if self.kind == "sliding":
            return _window.SlidingWindows(self.size, self.period)
        return _window.Sessions(self.size)

    def trigger(self):
        """``AfterWatermark`` with processing-time early panes and one late pane per late element
        (each only when configured); Beam's default trigger when neither is."""
        if self.early_firing is None and self.allowed_lateness <= 0:
            return _trigger.DefaultTrigger()
        return _trigger.AfterWatermark(
            early=_trigger.AfterProcessingTime(int(self.early_firing)) if self.early_firing else None,
            late=_trigger.AfterCount(1) if self.allowed_lateness > 0 else None,
        )

    def window_into(self, label: str = "Window") -> beam.PTransform:
        """The ``WindowInto`` of a metric's input (discarding mode; see the module docstring)."""
        return label >> beam.WindowInto(
            self.window_fn(),
            trigger=self.trigger(),
            accumulation_mode=_trigger.AccumulationMode.DISCARDING,
            allowed_lateness=Duration.of(self.allowed_lateness),
        )


class KeepWindows(_window.NonMergingWindowFn):
    """Keeps every element in the (interval) window it already has: re-windowing a grouped
    PCollection only to change its trigger or accumulation mode."""

    def assign(self, context):
        return [context.window]

    def get_window_coder(self):
        return _coders.IntervalWindowCoder()

    def __eq__(self, other):
        return type(self) is type(other)

    def __hash__(self):
        return hash(type(self))


class KeepMergingWindows(_window.Sessions):
    """:class:`KeepWindows` for session windows: kept windows that overlap are merged (as
    ``Sessions`` does), so a pane of a session that a late element widened accumulates with the
    earlier panes of that session."""

    def __init__(self):
        super().__init__(1)

    def assign(self, context):
        return [context.window]

    # Pickled, as every custom WindowFn: inherited from Sessions, the pipeline proto would say
    # "session windows with a 1 s gap", and portable runners (the in-memory FnApiRunner too)
    # would re-assign each element to [t, t + 1 s) instead of keeping its session.
    to_runner_api_parameter = _window.WindowFn.to_runner_api_parameter

    def __eq__(self, other):
        return type(self) is type(other)

    def __hash__(self):
        return hash(type(self))


class EmptyPaneSafeCombineFn(WrappedCombineFn):
    """``inner`` unchanged, except that merging no accumulators gives an empty one: a window
    that fired before fires its on-time pane even when nothing new arrived, and some
    CombineFns (``TupleCombineFn``) cannot merge an empty list."""

    def merge_accumulators(self, accumulators):
        accs = list(accumulators)
        return self.inner.merge_accumulators(accs) if accs else self.inner.create_accumulator()


def is_windowed(pcoll) -> bool:
    """Whether ``pcoll`` is in non-global windows."""
    return not isinstance(pcoll.windowing.windowfn, _window.GlobalWindows)


def needs_accumulating_merge(windowing: Windowing) -> bool:
    """True when a window can fire more than one pane (a non-default trigger or allowed
    lateness): the final combine must then accumulate (see the module docstring)."""
    if isinstance(windowing.windowfn, _window.GlobalWindows):
        return False
    return not isinstance(windowing.triggerfn, _trigger.DefaultTrigger) or windowing.allowed_lateness > Duration(0)


def accumulating_windowing(windowing: Windowing) -> beam.WindowInto:
    """The ``WindowInto`` of the final combine: same windows, accumulating, one pane per
    upstream pane (early: per arrival before the watermark; on time; late: per late arrival).
    Fixed windows keep their own ``FixedWindows`` (runs on every runner, Flink included);
    sliding and session windows are kept by :class:`KeepWindows` / :class:`KeepMergingWindows`,
    pickled Python WindowFns that Beam's Java runners (Flink) reject: with ``--early-firing`` or
    ``--allowed-lateness``, sliding and session windows run on the in-memory and Prism runners only.
    (Keyword arguments, not a ``Windowing``: ``WindowInto(Windowing)`` drops the allowed
    lateness in Beam 2.77.)"""
    fn = windowing.windowfn
    if isinstance(fn, _window.FixedWindows):
        # Fixed windows are re-assigned with the same WindowFn: an element's timestamp (its
        # window's end of window after the upstream combine) lies in its window, so it keeps it,
        # and the windowing strategy stays a standard one that Java runners (Flink) can read.
        kept = fn
    else:
        # KeepWindows/KeepMergingWindows are pickled Python WindowFns: the in-memory and Prism
        # runners run them; Flink's runner cannot ("Unknown or unsupported WindowFn:
        # beam:window_fn:pickled_python:v1").
        kept = KeepMergingWindows() if fn.is_merging() else KeepWindows()
    return beam.WindowInto(
        kept,
        trigger=_trigger.AfterWatermark(early=_trigger.AfterCount(1), late=_trigger.AfterCount(1)),
        accumulation_mode=_trigger.AccumulationMode.ACCUMULATING,
        allowed_lateness=windowing.allowed_lateness,
    )


def _iso(ts) -> str:
    return ts.to_utc_datetime(has_tz=True).isoformat().replace("+00:00", "Z")


def window_fields(window, pane=None) -> dict:
    """``{}`` in the global window; otherwise ``window_start`` / ``window_end`` (ISO 8601 UTC),
    ``window_start_s`` / ``window_end_s`` (epoch seconds) and, given a pane,
    ``pane: {timing: EARLY|ON_TIME|LATE|UNKNOWN, index, is_first, is_last}``."""
    if not isinstance(window, _window.IntervalWindow):
        return {}
    out = {
        "window_start": _iso(window.start),
        "window_end": _iso(window.end),
        "window_start_s": window.start.micros / 1e6,
        "window_end_s": window.end.micros / 1e6,
    }
    if pane is not None:
        out["pane"] = {
            "timing": PaneInfoTiming.to_string(pane.timing),
            "index": int(pane.index),
            "is_first": bool(pane.is_first),
            "is_last": bool(pane.is_last),
        }
    return out


def window_seed_parts(window) -> tuple:
    """Parts added to an estimator's seed key for ``window``: ``()`` in the global window (batch
    results unchanged), ``("window", start_micros, end_micros)`` otherwise."""
    if not isinstance(window, _window.IntervalWindow):
        return ()
    return ("window", int(window.start.micros), int(window.end.micros))


class AddWindowFields(beam.DoFn):
    """Adds :func:`window_fields` to each dict record (its window and, with ``pane=True``,
    the pane that produced it). Records in the global window pass unchanged."""

    def __init__(self, pane: bool = True):
        self.pane = pane

    def process(self, rec, window=beam.DoFn.WindowParam, pane=beam.DoFn.PaneInfoParam):
        fields = window_fields(window, pane if self.pane else None)
        yield {**rec, **fields} if fields else rec


#: the dead-letter stage of a record whose windows cannot be represented
WINDOW_RANGE_STAGE = "window"
# the first and last microsecond a window's bounds can have: they are written as ISO 8601 dates
# (``window_start``, ``window_end``), years 1..9999 (Python's ``datetime``)
_FIRST_MICROS = -62135596800 * 10**6
_LAST_MICROS = 253402300799 * 10**6 + 999_999


def _bound_text(micros: int) -> str:
    if _FIRST_MICROS <= micros <= _LAST_MICROS:
        from apache_beam.utils.timestamp import Timestamp

        return _iso(Timestamp(micros=micros))
    return f"{micros / 1e6:.0f} s since the epoch"


class KeepRepresentableWindows(beam.DoFn):
    """Passes an event-timed element whose windows (as ``window_fn`` assigns them: fixed, sliding,
    or a session's first extent) all start and end within years 1..9999; any other element goes to
    the ``dead_letter`` output with a reason naming its time and the window out of range (issue 28,
    trial 28f B3: 9999-12-31T23:59:59Z in ``fixed:1h`` ends in year 10000; 0001-01-01 in
    ``sliding:1h,5m`` starts in year 0; each ended the run with an ``OverflowError``). A merged
    session spans its elements' first extents, so it stays in range too."""

    def __init__(self, window_fn):
        self.window_fn = window_fn

    def process(self, x, ts=beam.DoFn.TimestampParam):
        try:
            windows = list(self.window_fn.assign(_window.WindowFn.AssignContext(ts, element=x)))
            bad = next((w for w in windows if not (_FIRST_MICROS <= w.start.micros and w.end.micros <= _LAST_MICROS)),
                       None)
            problem = None
        except (OverflowError, ValueError) as exc:
            bad, problem = None, exc
        if bad is None and problem is None:
            yield x
            return
        from fair_forge_beam.io.elements import dead_letter

        where = (f"its window [{_bound_text(bad.start.micros)}, {_bound_text(bad.end.micros)})" if bad is not None
                 else f"its windows ({type(problem).__name__})")
        yield beam.pvalue.TaggedOutput("dead_letter", dead_letter(
            WINDOW_RANGE_STAGE,
            f"event time {_bound_text(int(ts.micros))}: {where} falls outside the dates a window can have "
            f"(0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z)",
            x, getattr(x, "element_id", None)))
