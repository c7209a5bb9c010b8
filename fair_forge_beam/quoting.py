"""How a usage error quotes a user's value: :func:`quoted`, the one shortening function.

A usage error is one line (:class:`fair_forge_beam.options.OneLineErrorParser`). The value it
quotes comes from the user — a command-line argument, a ``--config`` value, a gate's text — and may
be any length: ``metrics = ["h" * 50_000_000]`` in a config made a 50,000,222-character "one line".
Every usage error quotes such a value through :func:`quoted`: its ``repr``, cut to
:data:`QUOTE_LIMIT` characters with its length said.
"""
from __future__ import annotations

import unicodedata
from typing import Any

__all__ = ["QUOTE_LIMIT", "quoted", "number_text", "choice_text", "holds_text", "shown", "shown_key", "length_note", "closest", "did_you_mean", "fixed",
           "fixed_estimate"]

#: most characters of a user's value a usage error repeats (its ``repr``, quotes and escapes included)
QUOTE_LIMIT = 200


def quoted(value: Any, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)`` when at most ``limit`` characters, else its first ``limit`` characters, ``…``
    and the value's length: ``'hhhh…' (50,000,000 characters)``. A text is cut before ``repr`` (no
    copy of a long value is made); another value (a list, a dict) is cut after, with the length of
    its ``repr``. Never raises (an integer too long for ``repr`` says its size)."""
    if isinstance(value, str):
        if len(value) <= limit:
            shown = repr(value)
            if len(shown) <= limit:
                return shown
        shown = repr(value[:limit])
        return f"{shown[:limit - 1]}…{shown[0]} ({len(value):,} characters)"
    try:
        shown = repr(value)
    except ValueError:  # an int past Python's digit limit for str()
        return f"an integer of about {int(value.bit_length() * 0.30103):,} digits"
    if len(shown) <= limit:
        return shown
    return f"{shown[:limit]}… ({len(shown):,} characters)"


#: the characters a try at writing a number is made of (besides digits of any script): what
#: :func:`number_text` quotes
_NUMBER_CHARS = frozenset("+-.,_eE/% \t")


#: a text this short given for a number is shown whatever it holds (:func:`number_text`)
SHORT_SHOWN = 4


def number_text(text: str) -> str:
    """A value given for a numeric option (the command line's, a ``--config`` file's, a gate's threshold) that
    is no number, as a usage error shows it. **Decision** (trial38b B12: ``--judge-timeout hunter2pass`` was
    echoed; only secret shapes were masked): a text made of digits (any script), signs, points, commas,
    underscores, slashes, ``%``, ``e`` and spaces only — a mistyped number, ``1,5``, ``1_000``, ``1/2``, ``١.٥`` — is quoted
    (:func:`quoted`) after the package's secret masking (:func:`fair_forge_beam.urls.mask_line`); any other text
    is never shown, only its length: a word in a number's place is more likely a value pasted in the wrong
    place, which may be a secret. A text of at most :data:`SHORT_SHOWN` characters is quoted whatever it holds
    (``'0x1'``, ``'many'``: no key or password is that short, and the user sees the typo). Never raises."""
    from fair_forge_beam.urls import mask_line

    if isinstance(text, str) and text and (len(text) <= SHORT_SHOWN or all(c.isdigit() or c in _NUMBER_CHARS for c in text)):
        return quoted(mask_line(text))
    size = len(text) if isinstance(text, str) else 0
    return f"a text of {size:,} character{'' if size == 1 else 's'} (not shown: it may be a secret given in the wrong place)"


def choice_text(value: Any, choices) -> str:
    """A value given for an option with a closed set of values (argparse's ``choices=``) that is none of them, as
    a usage error shows it. **Decision** (fix39a, trial38: ``invalid choice: 'sk-live-…'`` echoed what a numeric
    option hides): a text close to one of ``choices`` (:func:`closest`: a typo, ``'bayesain'``) is quoted after the
    package's secret masking; any other text follows :func:`number_text` (shown when at most :data:`SHORT_SHOWN`
    characters, else only its length); a number, a flag, a date or None (already converted by the option's type)
    is quoted. **Decision** (trial39b B8: ``mode = ["sk-…"]`` in a config said ``got a list ['sk-…']``): a list, a
    table or another container that holds a text anywhere (keys too) is said by its kind and size only, as is any
    other object (its ``repr`` may hold a secret). The one rule of every user's value a usage error repeats: a
    command line's stray value or an option given twice, a config file's value or key, a runner, a metric name.
    Never raises."""
    from fair_forge_beam.urls import mask_line

    if isinstance(value, str):
        return quoted(mask_line(value)) if closest(value, choices) is not None else number_text(value)
    if value is None or isinstance(value, (bool, int, float, complex)) or hasattr(value, "isoformat"):
        return quoted(value)
    if isinstance(value, (list, tuple, set, frozenset, dict)) and not holds_text(value):
        return quoted(value)
    kind = ("a table" if isinstance(value, dict) else "a list" if isinstance(value, (list, tuple))
            else "a set" if isinstance(value, (set, frozenset)) else f"a {type(value).__name__}")
    try:
        size = f" of {len(value):,} item{'' if len(value) == 1 else 's'}" if isinstance(value, (list, tuple, set, frozenset, dict)) else ""
    except Exception:  # noqa: BLE001
        size = ""
    return f"{kind}{size} (not shown: it may hold a secret given in the wrong place)"


def holds_text(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is or holds (in containers, keys too, all the way down) a text or bytes, or an object
    other than a number, a flag, a date or None."""
    if isinstance(value, (str, bytes, bytearray)):
        return True
    if value is None or isinstance(value, (bool, int, float, complex)) or hasattr(value, "isoformat"):
        return False
    if depth >= 20:
        return True
    if isinstance(value, dict):
        return any(holds_text(k, depth + 1) or holds_text(v, depth + 1) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(holds_text(v, depth + 1) for v in value)
    return True


def shown(value: Any, limit: int = QUOTE_LIMIT) -> str:
    """A value from the data (an assistant id, a slice value, a session id) as shown to a person —
    console tables, progress, warnings, gate lines, compare tables, report.html, trend.html: its
    text (no quotes) cut to ``limit`` characters, ``…`` and its length when longer
    (``'AAAA… (1,000,000 characters)'``), every non-printable character written as its escape (a
    record must not forge a line or drive the terminal), and so is a space that starts or ends it
    (``bot-α\\x20``: ``bot-α`` and ``bot-α `` are two assistants, and must not look like one, trial38
    T6), and so is, in a text that Unicode NFKC normalisation changes, each character it would change
    (a combining mark, a fullwidth or compatibility letter: ``bot-cafe\\u0301``, ``bot-\\uff2b``, where
    ``bot-café`` and ``bot-K`` are other ids, trial39 T7). The files meant for machines (results.json, Parquet) keep the whole value. Never raises."""
    try:
        text = value if isinstance(value, str) else str(value)
    except Exception:  # noqa: BLE001 - an int past Python's digit limit
        return quoted(value, limit)
    cut = text[:limit]
    if not cut.isascii() and not unicodedata.is_normalized("NFKC", cut.replace("…", "")):
        # a character NFKC would change (a combining mark of an NFD spelling, a fullwidth or compatibility
        # letter) as its escape: 'bot-cafe\u0301', 'bot-\uff2b' never look like 'bot-café', 'bot-K' (trial39 T7);
        # not '…', the mark of a cut value (slice_value's '…' + hash)
        cut = "".join(c if c.isascii() or c == "…" or (unicodedata.is_normalized("NFKC", c) and not unicodedata.combining(c))
                      else c.encode("unicode_escape").decode("ascii") for c in cut)
    if not cut.isprintable():
        cut = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in cut)
    if cut[:1] == " " or cut[-1:] == " " and len(text) <= limit:  # the end of a cut value is not its end
        lead = len(cut) - len(cut.lstrip(" "))
        trail = len(cut) - len(cut.rstrip(" ")) if lead < len(cut) and len(text) <= limit else 0
        cut = "\\x20" * lead + cut[lead:len(cut) - trail] + "\\x20" * trail
    if len(text) > limit or len(cut) > limit:
        return f"{cut[:limit - 1]}… ({len(text):,} characters)"
    return cut


def length_note(text: str) -> str:
    """The end of ``text`` that :func:`shown` or :func:`quoted` wrote when they cut a value — ``…`` and
    its length, ``"… (1,000,000 characters)"`` (a quote before it included) — or ``""``: what a
    further cut of the text (a console column) keeps whole, so the length still shows."""
    import re

    m = re.search(r"…'? \([0-9,]+ characters\)$", text)
    return text[m.start():] if m else ""


def shown_key(key: Any, limit: int = QUOTE_LIMIT) -> str:
    """A slice key ``dimension=value`` shown to a person: the value through :func:`shown`
    (``assistant_id=AAAA… (1,000,000 characters)``); ``overall`` as it is."""
    text = "" if key is None else str(key)
    dim, sep, val = text.partition("=")
    return f"{shown(dim, limit)}={shown(val, limit)}" if sep else shown(text, limit)


#: how close a mistyped value must be to a valid one for a usage error to offer it (difflib's ratio)
HINT_CUTOFF = 0.6


def closest(value: Any, choices, cutoff: float = HINT_CUTOFF) -> Any:
    """The valid value nearest to a mistyped ``value`` (``difflib``'s ratio, case ignored), or
    ``None`` when none is at least ``cutoff`` alike (or ``value`` is not a text). ``choices``: the
    closed set of valid values (texts; other values are compared as their ``str``)."""
    import difflib

    if not isinstance(value, str) or len(value) > QUOTE_LIMIT:
        return None
    by_lower: dict = {}
    for c in choices or ():
        by_lower.setdefault(str(c).lower(), c)
    hit = difflib.get_close_matches(value.lower(), list(by_lower), n=1, cutoff=cutoff)
    return by_lower[hit[0]] if hit else None


def did_you_mean(value: Any, choices, cutoff: float = HINT_CUTOFF) -> str:
    """The end of a usage error about a value outside a closed set: ``"; did you mean 'humanity'?"``
    when a valid value is close to ``value`` (:func:`closest`), else ``""``. Every option, config
    key and gate word with a closed set of values says it with this one helper (issue 28,
    fresh-user trial: ``--metrics humanty``, ``--mode bayesain``, ``--group-extractor keywrod``)."""
    hit = closest(value, choices, cutoff)
    return "" if hit is None or hit == value else f"; did you mean {quoted(hit)}?"


#: from this magnitude on, :func:`fixed` writes a number in scientific notation (fixed-point would
#: write every digit: 1e308 is 309 of them)
FIXED_LIMIT = 1e9


def fixed(x: Any, digits: int = 4, sign: bool = False) -> str:
    """An estimate as shown to a person (console tables, report.html, compare, trend, gates):
    ``digits`` decimals (``f"{x:.4f}"``) up to :data:`FIXED_LIMIT` in magnitude, scientific
    notation above it (``1.2500e+307``), ``nan`` / ``inf`` as such; ``+`` in front with
    ``sign``; ``n/a`` for ``None``; anything that is not a number as :func:`shown`. Any finite float
    is a short line (trial37 T2: 1e308 printed 309 digits)."""
    if x is None:
        return "n/a"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        try:
            x = float(x)  # numpy scalars
        except (TypeError, ValueError, OverflowError):
            return shown(x)
    plus = "+" if sign else ""
    try:
        if abs(x) < FIXED_LIMIT:
            return f"{x:{plus}.{digits}f}"
    except OverflowError:  # an int past float's range
        pass
    try:
        return f"{float(x):{plus}.{digits}e}"
    except OverflowError:
        return shown(x)


def fixed_estimate(est: Any, digits: int = 4, number: Any = None) -> str:
    """An estimate (a dict or an object with ``mean``, ``ci_low``, ``ci_high``) as shown to a person:
    ``mean [ci_low, ci_high]``, the mean alone without an interval, ``n/a`` without a value; each
    number through ``number`` (default :func:`fixed` with ``digits`` decimals). The one estimate
    formatter of the console, the report, the scorecard and the gates."""
    if not est:
        return "n/a"
    get = est.get if isinstance(est, dict) else (lambda k: getattr(est, k, None))
    fmt = number or (lambda x: fixed(x, digits))
    if get("mean") is None:
        return "n/a"
    if get("ci_low") is None or get("ci_high") is None:
        return fmt(get("mean"))
    return f"{fmt(get('mean'))} [{fmt(get('ci_low'))}, {fmt(get('ci_high'))}]"
