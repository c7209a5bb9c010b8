"""Event time of an interaction: reading the timestamp field and stamping elements.

The field is named by the user (main job ``--timestamp-field``, default ``timestamp``) and
looked up, for each interaction, in the interaction itself (a conversation turn, the ``batch``
of a ``StreamedBatch``, a flat record), then in its session header / ``metadata``, then at the
top of the record.

Accepted values (:func:`parse_timestamp`):

* a number: seconds since the Unix epoch (UTC); ``int``/``float``, finite;
* a string: ISO 8601 as read by ``datetime.fromisoformat`` (``2024-05-01T12:00:00Z``,
  ``2024-05-01 12:00:00+02:00``, ``2024-05-01``); a time without an offset is taken as UTC;
  a string holding a number is read as seconds since the epoch.

A record whose timestamp is missing or unreadable goes to the dead letter (policy
``"dead_letter"``, the default) or, with policy ``"processing_time"``, gets the time at which
the pipeline stamps it (arrival time: not reproducible, stated in the run's config).
"""
from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, Optional

from fair_forge_beam._beam import beam
from fair_forge_beam.quoting import quoted
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp

__all__ = ["parse_timestamp", "find_timestamp", "AssignEventTime"]

# Beam timestamps are int64 microseconds; keep a margin (years 1..9999 are representable).
_MIN_S, _MAX_S = -62135596800.0, 253402300799.0


def parse_timestamp(value: Any) -> float:
    """Seconds since the Unix epoch (UTC) of a timestamp value (see the module docstring).

    Raises:
        ValueError: ``None``, a boolean, a non-finite or out-of-range number, an unreadable
            string, any other type; the message says what was found.
    """
    if value is None:
        raise ValueError("no timestamp")
    if isinstance(value, bool):
        raise ValueError(f"timestamp must be a number or an ISO 8601 string, got {quoted(value)}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            try:
                dt = datetime.fromisoformat(text)
            except ValueError:
                raise ValueError(f"timestamp {quoted(value)} is neither epoch seconds nor ISO 8601") from None
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=timezone.utc)
            seconds = dt.timestamp()
    else:
        raise ValueError(f"timestamp must be a number or an ISO 8601 string, got {type(value).__name__}")
    if not math.isfinite(seconds) or not _MIN_S <= seconds <= _MAX_S:
        raise ValueError(f"timestamp {quoted(value)} is out of range")
    return seconds


def find_timestamp(field: str, *places: Optional[dict]) -> Any:
    """The value of ``field`` in the first of ``places`` (dicts, ``None`` skipped) that has it."""
    for place in places:
        if isinstance(place, dict) and field in place:
            return place[field]
    return None


class AssignEventTime(beam.DoFn):
    """``Interaction`` → the same element stamped with its ``event_time`` (seconds since the
    epoch) as Beam event time; an element without one (policy ``processing_time``) is stamped
    with the current time."""

    def process(self, x):
        t = x.event_time
        yield TimestampedValue(x, Timestamp.now() if t is None else Timestamp.of(t))
