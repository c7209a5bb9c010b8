"""Records later than the allowed lateness: counted dead letters, not silent drops (issue 28).

Beam drops an element at a windowed ``GroupByKey`` when the watermark has passed its window's
end plus the allowed lateness (Python SDK: ``watermark > window.end + allowed_lateness``), with
no output and no count. A Python ``DoFn`` cannot read the watermark, so the drop cannot be seen
after the fact. :class:`RouteLateRecords` decides it *before* the metric's first grouping, with
what a ``DoFn`` can see — event-time timers:

* each interaction is keyed by its window's end ``E`` (fixed windows: its window; sliding
  windows: the last of its windows), in the global window (so nothing is dropped there);
* per key, a stateful ``DoFn`` sets an event-time timer at ``E + L + 1 µs`` (``L`` = allowed
  lateness); when it fires, the watermark has passed ``E + L``: the window is closed, and every
  later record of that window goes to the dead letter with the reason
  ``late: event time T is behind the watermark by more than the allowed lateness L (…)`` and
  the record itself;
* while the timer is pending it holds the ``DoFn``'s output watermark at ``E + L + 1 µs``, so
  the records it forwards cannot be late for the ``GroupByKey`` after it: a forwarded record is
  never dropped by lateness, and a routed one would have been.

What is counted, exactly:

* counted: every record of a fixed window (or, for sliding windows, whose last window) that an
  earlier record opened, arriving after that window closed;
* not counted (Beam still drops it silently): the *first* record of a window, if it arrives
  after that window closed (its key has no timer yet, and the watermark cannot be read); a
  sliding-window record dropped from some of its windows but still inside its last one; records
  of session windows (``--window session:…``), whose windows are known only after merging — no
  routing is done for them;
* the boundary: Beam's Java runners drop at ``watermark >= E + L`` (``maxTimestamp + L <
  watermark``), the Python SDK at ``watermark > E + L``; the timer follows the Python rule, so
  on a Java runner a record arriving when the watermark is exactly ``E + L`` (to the
  microsecond) is dropped uncounted;
* bounded runs (files with ``--window``, Kafka with ``--kafka-max-records``) run in batch mode,
  where the watermark passes a window only after all input is read: Beam drops nothing as late,
  and no routing is added (its count is 0 by construction, not by measurement).

Runners: tested on Beam's streaming DirectRunner (``TestStream``) and on Flink (the Kafka panes
job of ``tests/test_kafka_flink.py``: the records sent after their window closed are exactly its
late dead letters); Prism and Dataflow support the state and timers it uses but were not run.
"""
from __future__ import annotations

from typing import Any, Optional

from fair_forge_beam._beam import beam
from apache_beam.coders import BooleanCoder
from apache_beam.transforms import window as _window
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.utils.timestamp import Duration, Timestamp

from fair_forge_beam.io.elements import dead_letter

__all__ = ["RouteLateRecords", "LATE_STAGE", "LATE_PREFIX", "late_reason", "routes_late_records", "is_late_dead_letter"]

#: the dead-letter stage and reason prefix of a record later than the allowed lateness
LATE_STAGE = "window"
LATE_PREFIX = "late: "


def _iso(micros: int) -> str:
    return Timestamp(micros=micros).to_utc_datetime(has_tz=True).isoformat().replace("+00:00", "Z")


def _duration_text(seconds: float) -> str:
    return f"{seconds:g}s"


def late_reason(event_micros: int, start_micros: int, end_micros: int, lateness_s: float) -> str:
    """The dead-letter reason of a late record: its event time, the allowed lateness, its window
    and when the window closed (all ISO 8601 UTC)."""
    closed = end_micros + int(round(lateness_s * 1e6))
    return (f"{LATE_PREFIX}event time {_iso(event_micros)} is behind the watermark by more than the allowed lateness "
            f"{_duration_text(lateness_s)} (window [{_iso(start_micros)}, {_iso(end_micros)}) closed when the "
            f"watermark passed {_iso(closed)}; raise --allowed-lateness to keep such records)")


def is_late_dead_letter(rec: dict) -> bool:
    """Whether a dead-letter record (a dict as written) is a late record routed here."""
    return rec.get("stage") == LATE_STAGE and str(rec.get("reason", "")).startswith(LATE_PREFIX)


def routes_late_records(spec) -> bool:
    """Whether :class:`RouteLateRecords` routes anything for ``spec`` (a
    :class:`~fair_forge_beam.streaming.windows.WindowSpec`): fixed and sliding windows."""
    return spec.kind in ("fixed", "sliding")


class _KeyByLastWindow(beam.DoFn):
    """``x`` → ``((last window end µs, its start µs), x)``; the element keeps its timestamp."""

    def __init__(self, window_fn):
        self.window_fn = window_fn

    def process(self, x, ts=beam.DoFn.TimestampParam):
        windows = self.window_fn.assign(_window.WindowFn.AssignContext(ts, element=x))
        last = max(windows, key=lambda w: w.end)
        yield (int(last.end.micros), int(last.start.micros)), x


@beam.typehints.with_output_types(Any)
class _Route(beam.DoFn):
    """Per window key: forward records until the window's expiry timer fires, dead-letter the
    records after it (see the module docstring)."""

    CLOSED = ReadModifyWriteStateSpec("closed", BooleanCoder())
    EXPIRY = TimerSpec("expiry", TimeDomain.WATERMARK)

    def __init__(self, lateness_s: float):
        self.lateness_s = float(lateness_s)

    def process(self, kv, ts=beam.DoFn.TimestampParam, closed=beam.DoFn.StateParam(CLOSED),
                expiry=beam.DoFn.TimerParam(EXPIRY)):
        (end, start), x = kv
        if closed.read():
            yield beam.pvalue.TaggedOutput("late", dead_letter(
                LATE_STAGE, late_reason(int(ts.micros), start, end, self.lateness_s), x,
                getattr(x, "element_id", None)))
            return
        # Python SDK's GroupByKey drops at watermark > end + lateness: fire one microsecond after
        expiry.set(Timestamp(micros=end) + Duration.of(self.lateness_s) + Duration(micros=1))
        yield x

    @on_timer(EXPIRY)
    def _closed(self, closed=beam.DoFn.StateParam(CLOSED)):
        closed.write(True)


class RouteLateRecords(beam.PTransform):
    """Timestamped records in the global window → ``{"interactions": the records Beam's windowed
    grouping will keep, "dead_letter": records later than the allowed lateness}`` (see the
    module docstring for what is counted). Apply before ``spec.window_into()`` in a streaming
    run; session windows pass unrouted (an empty dead letter).

    Args:
        spec: the run's :class:`~fair_forge_beam.streaming.windows.WindowSpec`.
    """

    def __init__(self, spec, label: Optional[str] = None):
        super().__init__(label)
        self.spec = spec

    def expand(self, pcoll):
        if not routes_late_records(self.spec):
            empty = pcoll.pipeline | "NoLateRecords" >> beam.Create([])
            return {"interactions": pcoll, "dead_letter": empty}
        routed = (
            pcoll
            | "KeyByWindow" >> beam.ParDo(_KeyByLastWindow(self.spec.window_fn()))
            | "RouteLate" >> beam.ParDo(_Route(self.spec.allowed_lateness)).with_outputs("late", main="kept")
        )
        return {"interactions": routed.kept, "dead_letter": routed.late}
