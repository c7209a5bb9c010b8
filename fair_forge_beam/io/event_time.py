"""Event time of an interaction: reading the timestamp field and stamping elements.

The field is named by the user (main job ``--timestamp-field``, default ``timestamp``) and
looked up, for each interaction, in the interaction itself (a conversation turn, the ``batch``
of a ``StreamedBatch``, a flat record), then in its session header / ``metadata``, then at the
top of the record.

Accepted values (:func:`parse_timestamp`):

* a number: seconds since the Unix epoch (UTC); ``int``/``float``, finite;
* a string: ISO 8601 as read by ``datetime.fromisoformat`` (``2024-05-01T12:00:00Z``,
  ``2024-05-01 12:00:00+02:00``, ``2024-05-01``, the basic forms ``20240501`` and
  ``20240501T120000Z``); a time without an offset is taken as UTC; any other string holding a
  number is read as seconds since the epoch; the end of a day ``24:00:00`` is the next day's 00:00
  and a leap second ``23:59:60`` the last instant (microsecond) of its minute, ``23:59:59.999999``.

An eight-digit string that is a calendar date (``"20261206"``) is that ISO 8601 basic date, never
epoch seconds (1970-08-23: trial36 T5); the same digits as a JSON number (``20261206``) could be
either and are refused as ambiguous. A number of seconds beyond year 9999 that is a date in
1990–2199 when divided by 1,000, 10⁶ or 10⁹ is refused naming the unit it probably has
(milliseconds: JavaScript, Java, Kafka), and 12 or 14 digits that spell a date and time
(``20261206101500``, ``202612061015``: as seconds, after the year 5000) are refused with the ISO
8601 spelling to write instead.

A record whose timestamp is missing or unreadable goes to the dead letter (policy
``"dead_letter"``, the default) or, with policy ``"processing_time"``, gets the time at which
the pipeline stamps it (arrival time: not reproducible, stated in the run's config).
"""
from __future__ import annotations

import math
import re
import sys
from datetime import datetime, timedelta, timezone
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
        if isinstance(value, int) and abs(value) > sys.float_info.max:  # beyond a float: out of range, never
            # float() of it (10**400 raised OverflowError, which crashed the read, fix49a)
            raise ValueError(f"timestamp {quoted(value, 60)} is out of range")
        if isinstance(value, int) and _basic_date(str(value)) is not None:
            raise ValueError(_ambiguous(value))
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if text.isascii() and text.isdigit() and _basic_date(text) is not None:  # ISO 8601 basic date, not 1970
            return _utc_seconds(datetime.fromisoformat(text))
        try:
            seconds = float(text)
        except ValueError:
            try:
                dt = datetime.fromisoformat(text)
            except ValueError:
                dt = _end_of_day_or_leap_second(value, text)  # ISO 8601 forms datetime does not read (trial39 T12)
                if dt is None:
                    raise ValueError(f"timestamp {quoted(value)} is neither epoch seconds nor ISO 8601") from None
            seconds = _utc_seconds(dt)
    else:
        raise ValueError(f"timestamp must be a number or an ISO 8601 string, got {type(value).__name__}")
    if not math.isfinite(seconds) or not _MIN_S <= seconds <= _MAX_S:
        raise ValueError(f"timestamp {quoted(value)} is out of range{_probable_unit(value, seconds)}")
    spelt = _date_time_digits(value)
    if spelt is not None:  # 202612061015 s is the year 8390: the digits spell 2026-12-06 10:15
        raise ValueError(f"timestamp {quoted(value)} is not read as seconds since the epoch{spelt}")
    return seconds


#: the time of an ISO 8601 date and time, extended (``24:00:00``) or basic (``240000``), with its fraction
#: and offset, as :func:`_end_of_day_or_leap_second` reads it
_TIME = re.compile(r"^(?P<date>.+?[T ])(?P<h>\d\d)(?P<sep>:?)(?P<m>\d\d)(?:(?P=sep)(?P<s>\d\d)"
                   r"(?P<frac>[.,]\d+)?)?(?P<tz>Z|z|[+-]\d\d(?::?\d\d)?)?$")


def _end_of_day_or_leap_second(value: Any, text: str) -> Optional[datetime]:
    """``text``'s instant when it is ISO 8601 with a time ``datetime`` does not read, else ``None``:
    the end of a day ``24:00`` / ``24:00:00`` (/ ``240000``, a zero fraction) is the next day's
    00:00; a leap second ``…:60`` (any fraction) is the last instant of its minute, ``…:59.999999``
    (the microsecond Beam's timestamps hold: it stays in its minute's windows, and the next minute's
    ``:00`` comes after it). 24 with other minutes or seconds is no time of day: refused, naming why.

    Raises:
        ValueError: an hour 24 that is not the end of the day."""
    m = _TIME.match(text)
    if m is None:
        return None
    hour, minute, second, frac = m["h"], m["m"], m["s"] or "00", m["frac"] or ""
    sep = m["sep"]
    if hour == "24":
        if minute != "00" or second != "00" or frac.strip(".,0"):
            raise ValueError(f"timestamp {quoted(value)} is not a time of day: ISO 8601's hour 24 is only the end of a "
                             "day, 24:00:00 (read as the next day's 00:00)")
        start = _parse_iso(f"{m['date']}00{sep}00{sep}00{m['tz'] or ''}")
        try:
            return None if start is None else start + timedelta(days=1)
        except OverflowError:  # 9999-12-31T24:00:00: the year 10000
            raise ValueError(f"timestamp {quoted(value)} is out of range") from None
    if second == "60" and m["s"]:
        last = _parse_iso(f"{m['date']}{hour}{sep}{minute}{sep}59{m['tz'] or ''}")
        return None if last is None else last.replace(microsecond=999_999)
    return None


def _parse_iso(text: str) -> Optional[datetime]:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _utc_seconds(dt: datetime) -> float:
    return (dt if dt.tzinfo is not None else dt.replace(tzinfo=timezone.utc)).timestamp()


def _basic_date(digits: str) -> Optional[datetime]:
    """The calendar date ``digits`` spell as an ISO 8601 basic date (``YYYYMMDD``), or ``None``."""
    if len(digits) != 8 or not digits.isdigit():
        return None
    try:
        return datetime.strptime(digits, "%Y%m%d")
    except ValueError:
        return None


def _ambiguous(value: int) -> str:
    day = _basic_date(str(value)).date().isoformat()
    as_epoch = datetime.fromtimestamp(value, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (f"timestamp {value} is ambiguous: the ISO 8601 basic date {day}, or {as_epoch} in seconds since the "
            f"epoch; write the date as the text {quoted(day)} (or {quoted(str(value))}), or epoch seconds as a "
            f"number with a fraction ({value}.0)")


#: the units a number beyond year 9999 in seconds probably has, by its divisor
_UNITS = ((1_000, "milliseconds"), (1_000_000, "microseconds"), (1_000_000_000, "nanoseconds"))
#: a converted time counts as probable between these years (logs of AI assistants)
_PROBABLE_YEARS = (1990, 2200)


def _probable_unit(value: Any, seconds: float) -> str:
    """``: it looks like milliseconds since the epoch (2026-12-06T10:15:00Z); divide by 1,000 …``,
    the ISO 8601 spelling of 12 or 14 digits that spell a date and time, or ``""``."""
    if not math.isfinite(seconds) or seconds <= _MAX_S:
        return ""
    for divisor, unit in _UNITS:
        t = seconds / divisor
        if _MIN_S <= t <= _MAX_S:
            at = datetime.fromtimestamp(t, tz=timezone.utc)
            if _PROBABLE_YEARS[0] <= at.year < _PROBABLE_YEARS[1]:
                return (f": it looks like {unit} since the epoch ({at.strftime('%Y-%m-%dT%H:%M:%SZ')}); timestamps are "
                        f"read as seconds: divide by {divisor:,}, or write ISO 8601 text")
    return _date_time_digits(value) or ""


def _date_time_digits(value: Any) -> Optional[str]:
    """``: it looks like a date and time without separators (…); write ISO 8601, e.g. …`` when
    ``value`` (digits as a string or an integer) is 12 or 14 digits that spell ``YYYYMMDDhhmm[ss]``
    (as seconds: after the year 5000), else ``None``."""
    digits = value.strip() if isinstance(value, str) else str(value) if isinstance(value, int) and not isinstance(value, bool) else ""
    if not (digits.isascii() and digits.isdigit() and len(digits) in (12, 14)):
        return None
    try:
        at = datetime.strptime(digits, "%Y%m%d%H%M%S" if len(digits) == 14 else "%Y%m%d%H%M")
    except ValueError:
        return None
    basic = at.strftime("%Y%m%dT%H%M%S")
    return (f": it looks like a date and time without separators ({at.isoformat()}); write ISO 8601, e.g. "
            f"{quoted(at.isoformat() + 'Z')} or {quoted(basic + 'Z')} (UTC)")


def find_timestamp(field: str, *places: Optional[dict]) -> Any:
    """The value of ``field`` in the first of ``places`` (dicts, ``None`` skipped) that has it."""
    for place in places:
        if isinstance(place, dict) and field in place:
            return place[field]
    return None


@beam.typehints.with_output_types(Any)
class AssignEventTime(beam.DoFn):
    """``Interaction`` → the same element stamped with its ``event_time`` (seconds since the
    epoch) as Beam event time; an element without one (policy ``processing_time``) is stamped
    with the current time."""

    def process(self, x):
        t = x.event_time
        yield TimestampedValue(x, Timestamp.now() if t is None else Timestamp.of(t))
