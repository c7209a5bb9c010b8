"""Why something failed, in plain words: :func:`plain_reason`.

A usage error says what is wrong and where, never an exception's class name: a user's request
template that includes another one said ``TypeError: no loader for this environment specified``,
a macro calling itself ``RecursionError: maximum recursion depth exceeded``, a template over the
sandbox's limit ``TemplateLimitError: …`` (issue 28, hostile trial 3).
"""
from __future__ import annotations

import os
import re
from typing import Callable, Mapping, Optional

__all__ = ["plain_reason", "int_digits_reason", "validation_words", "plain_words", "repr_reason", "json_kind", "side_file_error", "has_os_bytes", "shown_text", "folder_path",
           "path_name_problem", "first_path_name_problem"]

#: the lone surrogates Python's file-system decoding (``surrogateescape``) makes of bytes it cannot decode
_OS_BYTES = re.compile("[\udc80-\udcff]+")


def has_os_bytes(text) -> bool:
    """Whether ``text`` (a path or argument from the OS) holds bytes Python could not decode: a name
    that is not valid UTF-8 (``caf\\xe9.jsonl``), or any non-ASCII name when the file-system
    encoding is ASCII (``LC_ALL=C PYTHONUTF8=0``). Such a text cannot be encoded as UTF-8 (Beam's
    coders and metrics, JSON files) and is refused where it enters (:func:`path_name_problem`)."""
    return isinstance(text, str) and _OS_BYTES.search(text) is not None


def shown_text(text) -> str:
    """``text`` as it can always be printed or stored: the undecodable bytes of an OS name shown
    escaped (``caf\\xe9.jsonl``); when they are UTF-8 (an ASCII locale), the characters they spell
    (``données-ü.jsonl``). Other text unchanged."""
    text = str(text)
    if not has_os_bytes(text):
        return text

    def one(m):
        raw = m.group(0).encode("utf-8", "surrogateescape")
        return raw.decode("utf-8", "backslashreplace")
    return _OS_BYTES.sub(one, text)


def path_name_problem(path, what: str) -> "str | None":
    """The one-line usage error of a path (given, or found by a pattern or in a folder) whose name
    holds undecodable bytes (:func:`has_os_bytes`), naming it with them escaped; ``None`` for any
    other path. Decision (issue 28 B7): such a name is refused before anything runs (exit code 2),
    as every file name the package reads or writes travels as UTF-8 text (Beam's coders, metrics,
    ``run_info.json``, dead letters' ``source``)."""
    if not has_os_bytes(path):
        return None
    shown = shown_text(path)
    raw = str(path).encode("utf-8", "surrogateescape")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return f"{what}: {shown}: the name is not valid UTF-8 (each \\xNN is a byte that is not); rename it"
    import sys

    return (f"{what}: {shown}: the name is not ASCII and this process reads file names as "
            f"{sys.getfilesystemencoding()} (its locale, e.g. LC_ALL=C); run it under a UTF-8 locale "
            "(LC_ALL=C.UTF-8) or with PYTHONUTF8=1")


def first_path_name_problem(paths, what: str) -> "str | None":
    """:func:`path_name_problem` of the first path of ``paths`` that has one, else ``None``."""
    for p in paths:
        problem = path_name_problem(p, what)
        if problem:
            return problem
    return None


#: a part of a pydantic error's location that names no field: a validator (``function-after[...]``), a
#: union member (``union[...]``, ``str``, ``tuple[str, ...]``) or a model class (``Gate``, ``ThresholdGate``)
_NOT_A_FIELD = re.compile(r".*[\[(].*|str|int|float|bool|list|dict|tuple|set|frozenset|bytes|none|"
                          r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)*")
#: pydantic error types saying "an object (or an instance of <Class>) was expected"
_OBJECT_TYPES = {"model_type", "model_attributes_type", "dict_type", "dataclass_type", "dataclass_exact_type",
                 "mapping_type"}


#: what a value of each kind is called in a sentence ("should be <kind>")
_KIND_WORDS = {
    "string_type": "text", "string_sub_type": "text", "str_type": "text", "bool_type": "true or false",
    "int_type": "a whole number", "float_type": "a number", "list_type": "a list", "tuple_type": "a list",
    "set_type": "a list", "frozen_set_type": "a list", "none_required": "null", "bytes_type": "text",
    "iterable_type": "a list", "callable_type": "a function", "date_type": "a date", "time_type": "a time of day",
    "datetime_type": "a date and time", "time_delta_type": "a duration", "url_type": "a URL", "uuid_type": "a UUID",
    "decimal_type": "a number", "complex_type": "a number", "json_type": "JSON text",
    "missing_sentinel_error": "left out",
}
#: what a value of text that does not parse should have been ("... not text that reads as <kind>")
_PARSING_WORDS = {
    "bool_parsing": "true or false", "int_parsing": "a whole number", "int_parsing_size": "a whole number of at most "
    "4,300 digits", "float_parsing": "a number", "decimal_parsing": "a number", "complex_str_parsing": "a number",
    "date_parsing": "a date", "date_from_datetime_parsing": "a date", "time_parsing": "a time of day",
    "datetime_parsing": "a date and time", "datetime_from_date_parsing": "a date and time",
    "datetime_object_invalid": "a date and time", "time_delta_parsing": "a duration", "url_parsing": "a URL",
    "url_syntax_violation": "a URL", "uuid_parsing": "a UUID",
}
#: error types said in fixed words (nothing of the input or context to add)
_FIXED_WORDS = {
    "missing": "is required but missing",
    "missing_argument": "is required but missing",
    "missing_keyword_only_argument": "is required but missing",
    "missing_positional_only_argument": "is required but missing",
    "extra_forbidden": "is not a field of this object (an unknown key: leave it out or check its spelling)",
    "unexpected_keyword_argument": "is not a field of this object (an unknown key: leave it out or check its spelling)",
    "unexpected_positional_argument": "is one value too many",
    "multiple_argument_values": "is given twice",
    "arguments_type": "should be a list or an object of arguments",
    "recursion_loop": "refers to itself (a cycle)",
    "invalid_key": "has a key that is not text",
    "frozen_field": "cannot be changed once set",
    "frozen_instance": "cannot be changed once set",
    "finite_number": "should be a finite number (not NaN or infinity)",
    "string_unicode": "is not valid Unicode text (a lone surrogate such as \\ud800?)",
    "string_not_ascii": "should hold ASCII characters only",
    "int_from_float": "should be a whole number, not one with a fractional part",
    "set_item_not_hashable": "holds an item that cannot be in a set (a list or an object)",
    "default_factory_not_called": "could not be filled in because of the errors before it",
    "date_from_datetime_inexact": "should be a date (a date and time at midnight at most)",
    "date_past": "should be a date in the past", "date_future": "should be a date in the future",
    "datetime_past": "should be in the past", "datetime_future": "should be in the future",
    "timezone_naive": "should have no time zone", "timezone_aware": "should have a time zone",
    "no_such_attribute": "is not a field of this object",
    "needs_python_object": "cannot be given as JSON",
}


def _count_words(n, one: str) -> str:
    try:
        return f"{int(n):,} {one}{'' if int(n) == 1 else 's'}"
    except (TypeError, ValueError):
        return f"{n} {one}s"


#: the words of the error types that only fill one value of their context into a sentence
_CTX_TEMPLATES = {
    "greater_than": "should be more than {gt}", "greater_than_equal": "should be {ge} or more",
    "less_than": "should be less than {lt}", "less_than_equal": "should be {le} or less",
    "multiple_of": "should be a multiple of {multiple_of}",
    "timezone_offset": "should have the time zone offset {tz_expected}",
    "url_scheme": "should be a URL starting with {expected_schemes}",
    "uuid_version": "should be a UUID of version {expected_version}",
}


class _OrNone(dict):
    """An error's context for :data:`_CTX_TEMPLATES`: a value it lacks reads ``None``."""

    def __missing__(self, key):
        return None


def _ctx_words(kind: str, ctx: Mapping, given: str) -> "str | None":
    """The words of an error type whose meaning is in its context (a bound, a length, a pattern)."""
    if kind in _CTX_TEMPLATES:
        return _CTX_TEMPLATES[kind].format_map(_OrNone(ctx))
    if kind in ("too_short", "too_long"):
        bound = ctx.get("min_length") if kind == "too_short" else ctx.get("max_length")
        have = f", not {ctx['actual_length']:,}" if isinstance(ctx.get("actual_length"), int) else ""
        return f"should hold {'at least' if kind == 'too_short' else 'at most'} {_count_words(bound, 'item')}{have}"
    if kind in ("string_too_short", "bytes_too_short"):
        return f"should be at least {_count_words(ctx['min_length'], 'character')} long"
    if kind in ("string_too_long", "bytes_too_long", "url_too_long"):
        return f"should be at most {_count_words(ctx['max_length'], 'character')} long"
    if kind == "string_pattern_mismatch":
        from fair_forge_beam.quoting import quoted

        return f"should match the pattern {quoted(str(ctx['pattern']))}"
    if kind in ("literal_error", "enum"):
        return f"should be {ctx['expected']}"
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        tag = ctx.get("discriminator", "its kind")
        if kind == "union_tag_not_found":
            return f"lacks its {tag} (which says what kind of object it is)"
        return f"has a {tag} that is none of {ctx.get('expected_tags', 'the known kinds')}"
    if kind in ("decimal_max_digits", "decimal_max_places", "decimal_whole_digits"):
        n = next(iter(ctx.values()), "")
        what = {"decimal_max_digits": "digits", "decimal_max_places": "decimal places",
                "decimal_whole_digits": "digits before the point"}[kind]
        return f"should have at most {n} {what}"
    if kind in ("json_invalid", "bytes_invalid_encoding", "iteration_error", "get_attribute_error"):
        err = ctx.get("error") or ctx.get("encoding_error")
        why = plain_words(str(err).strip()) if err else ""
        head = {"json_invalid": "is not valid JSON", "bytes_invalid_encoding": "is not text of its encoding",
                "iteration_error": "could not be read item by item",
                "get_attribute_error": "could not be read"}[kind]
        return f"{head} ({why})" if why else head
    return None


def _validation_msg(e: Mapping) -> str:
    """One pydantic error in words: its type says what is wrong (:data:`_FIXED_WORDS`, :data:`_KIND_WORDS`,
    :data:`_PARSING_WORDS`, :func:`_ctx_words`), never pydantic's own message (``Field required``,
    ``Extra inputs are not permitted``, ``Input should be a valid string``) — but for a validator's
    own ``ValueError``, whose message is the project's words."""
    kind, msg = str(e.get("type", "")), str(e.get("msg", ""))
    ctx = e.get("ctx") or {}
    given = f", not {json_kind(e['input'])}" if "input" in e else ""
    if kind in _OBJECT_TYPES:
        return f"should be an object (a table of keys and values){given}"
    if kind in ("is_instance_of", "is_subclass_of"):
        return f"is not of the kind expected here{given}"
    if kind in ("value_error", "assertion_error"):  # a validator's own words
        text = str(ctx.get("error", "")) or msg
        for prefix in ("Value error, ", "Assertion failed, "):
            if text.startswith(prefix):
                text = text[len(prefix):]
        return plain_words(text.strip()) if text.strip() else "is not a value this field accepts"
    if kind in _FIXED_WORDS:
        return _FIXED_WORDS[kind]
    if kind in _KIND_WORDS:
        return f"should be {_KIND_WORDS[kind]}{given}"
    if kind in _PARSING_WORDS:
        from fair_forge_beam.quoting import quoted

        shown = f", not the text {quoted(e['input'])}" if isinstance(e.get("input"), str) else given
        return f"should be {_PARSING_WORDS[kind]}{shown}"
    try:
        words = _ctx_words(kind, ctx, given)
    except (KeyError, TypeError, ValueError):
        words = None
    if words is not None:
        if kind in ("literal_error", "enum") and "input" in e:
            from fair_forge_beam.quoting import quoted

            words += f", not {quoted(e['input'])}"
        elif kind.startswith(("greater", "less", "multiple")) and isinstance(e.get("input"), (int, float)) \
                and not isinstance(e.get("input"), bool):
            words += f", not {e['input']}"
        return words
    # a type this table does not know (a later pydantic's, a custom error): what it is about, in
    # general words — never pydantic's sentence
    return f"is not a value this field accepts{given}"


#: most characters of one key of a validation error's location a reason shows (:func:`validation_words`)
LOCATION_LIMIT = 40


def validation_words(exc: BaseException, limit: Optional[int] = 5,
                     loc: Optional[Callable[[tuple], tuple]] = None, root: str = "record",
                     missing_first: bool = False) -> str:
    """A pydantic validation error in words, the one renderer of every validation error a person
    reads (a ``--config`` gate, a record rejected at read, a judge's answer, any other reason built
    from one): ``field.sub: what is wrong`` per error, ``; `` between them, the first ``limit``
    (then ``and N more``), never a class name (cli.md): ``gates=[1, 2]`` is ``should be an object (a
    table of keys and values), not a number`` where pydantic says ``Input should be a valid
    dictionary or instance of Gate``. A location names fields only (validators, union members and
    model classes left out); ``loc`` rewrites it first; ``root`` names an error of the whole value.
    Errors that read the same are said once. ``missing_first``: a missing field is said first, an unknown key
    last (an LLM's reply in another shape: ``queries: is required but missing`` before ``score: is not a field``,
    which a cut line would show alone). Each key of a location is shown as data is (:func:`~fair_forge_beam.quoting.shown`:
    escapes, cut to :data:`LOCATION_LIMIT` characters). Never raises."""
    from fair_forge_beam.quoting import shown

    try:
        seen: list = []
        errors = exc.errors()
        if missing_first:
            errors = sorted(errors, key=lambda e: {"missing": 0, "extra_forbidden": 2}.get(e.get("type"), 1))
        for e in errors:
            at = tuple(e.get("loc", ()))
            if loc is not None:
                at = tuple(loc(at))
            # a key is the data's (an LLM's reply, a record): escaped and cut as data is shown (trial39b B11)
            at = [shown(x, LOCATION_LIMIT) for x in at if not (isinstance(x, str) and _NOT_A_FIELD.fullmatch(x))]
            text = f"{'.'.join(at) or root}: {_validation_msg(e)}"
            if text not in seen:
                seen.append(text)
        shown = seen if limit is None else seen[:limit]
        more = len(seen) - len(shown)
        return "; ".join(shown) + (f"; and {more} more" if more > 0 else "") or "an invalid value"
    except Exception:  # noqa: BLE001 - a reason is never a second failure
        return "an invalid value"


def plain_reason(exc: BaseException) -> str:
    """One line saying why ``exc`` happened, without its class name: the exception's own first
    line for most (the message is already words), a sentence for those whose message is Python's
    (a recursion, a template that loads another one, a sandbox refusal, a syntax error, an
    ``OSError``'s errno, text that is not UTF-8, damaged compressed data, a validation error's
    fields). A class name left inside the message (``… (EOFError: …)``, a library's own
    ``ArrowInvalid: …``) is taken out (:func:`plain_words`). Never raises. What every dead letter's
    and warning's reason built from an exception goes through (issue 28)."""
    try:
        return plain_words(_reason(exc))
    except Exception:  # noqa: BLE001 - a reason is never a second failure
        return "an unexpected error"


def side_file_error(what: str, path, exc: BaseException) -> str:
    """The one-line usage error of a side file (``--config``, ``--privacy-domain``, a
    ``--seed-prompt-file`` ...) that could not be read or parsed: ``"<what>: cannot read <path>:
    <why>"`` with ``why`` in plain words (:func:`plain_reason`, never ``OSError: [Errno 40]``),
    and the option and path named once — a reader's message that already starts with them (a
    file over the size limit, a JSON error at a position) is given as it is (issue 28 B9:
    ``--privacy-domain: cannot read /dev/zero: --privacy-domain: /dev/zero is larger ...``)."""
    reason = plain_reason(exc)
    if reason.startswith(f"{what}: ") or reason.startswith(f"{what} {path}"):
        return reason
    return f"{what}: cannot read {path}: {reason}"


def repr_reason(text: str) -> str:
    """An exception as its ``repr`` gives it (``"RuntimeError('unexpected bug')"``, what Beam's
    failed-batch output carries) → its message in plain words (``"unexpected bug"``)."""
    try:
        import ast

        m = re.fullmatch(r"\s*[\w.]+\((.*)\)\s*", str(text), re.S)
        if m:
            args = ast.literal_eval(f"({m.group(1)},)") if m.group(1).strip() else ()
            if args and all(isinstance(a, str) for a in args[:1]):
                return plain_words(str(args[0]).strip().splitlines()[0] if str(args[0]).strip() else "") or "an unexpected error"
            if not args:
                return plain_words(re.sub(r"(?<!^)(?=[A-Z])", " ", str(text).split("(")[0].split(".")[-1]).lower())
        return plain_words(str(text).strip().splitlines()[0] if str(text).strip() else "")
    except Exception:  # noqa: BLE001 - a reason is never a second failure
        return plain_words(str(text)) if str(text).strip() else "an unexpected error"


def json_kind(value) -> str:
    """What a JSON value is, in words (``"null"``, ``"a number"``, ``"text"``, ``"a list"``,
    ``"an object"``, ``"true or false"``), never a Python type name (``NoneType``, ``str``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return "a value of no JSON kind"


#: an exception class name as Python or a library prints it (``ValueError``, ``JSONDecodeError``,
#: ``ArrowInvalid``, ``pyarrow.lib.ArrowInvalid``), with the ``": "`` that follows it
_CLASS_NAME = re.compile(r"\b(?:[A-Za-z_]\w*\.)*([A-Z][A-Za-z]*?)(Error|Exception|Invalid)\b(?:: ?)?")


def plain_words(text: str) -> str:
    """``text`` without exception class names: ``"Name: "`` in front of a message is dropped, a
    name left standing becomes its words (``"KeyError"`` → ``"key error"``)."""

    def words(m: re.Match) -> str:
        if m.group(0).endswith(":") or m.group(0).endswith(": "):
            return ""
        base = re.sub(r"(?<!^)(?=[A-Z][a-z])", " ", m.group(1)).lower().strip()
        return f"{base} {m.group(2).lower()}".strip() if base else m.group(2).lower()

    out = _CLASS_NAME.sub(words, text)
    out = re.sub(r"\(\s*\)", "", out)
    out = re.sub(r"\s{2,}", " ", out).strip()
    return out or "an unexpected error"


#: Python's refusal to convert an integer of more digits than ``sys.get_int_max_str_digits()`` (a
#: JSON number of 50,000 digits, a TOML integer): its advice names a Python call, not an option
_INT_DIGITS = re.compile(r"Exceeds the limit \((\d+) digits\) for integer string conversion(?:: value has (\d+) digits)?")


def int_digits_reason(exc: BaseException) -> Optional[str]:
    """``"a number of 50,000 digits; numbers are limited to 4,300 digits"`` when ``exc`` is Python's
    integer-digits refusal, else ``None``."""
    m = _INT_DIGITS.search(str(exc)) if isinstance(exc, ValueError) else None
    if m is None:
        return None
    size = f"{int(m.group(2)):,} digits" if m.group(2) else f"more than {int(m.group(1)):,} digits"
    return f"a number of {size}; numbers are limited to {int(m.group(1)):,} digits"


def head_words(head: bytes, name: str) -> str:
    """What a file that should start with a ``name`` header (``"gzip"``, ``"bzip2"`` …) starts with
    instead, in words: ``"it starts with the text '{\"', not a gzip header"`` (printable ASCII said as
    text), ``"it starts with bytes 0x1f 0xcb, not a gzip header"``; ``""`` for no bytes."""
    head = bytes(head or b"")
    if not head:
        return ""
    header = f"{'an' if name[:1] in 'aeiox' else 'a'} {name} header"  # an xz header
    if all(32 <= c < 127 for c in head):  # text: said as text (the bytes' digits read as a count)
        from fair_forge_beam.quoting import quoted

        return f"it starts with the text {quoted(head.decode('ascii'))}, not {header}"
    return f"it starts with bytes {' '.join(f'0x{c:02x}' for c in head)}, not {header}"


def _reason(exc: BaseException) -> str:
    digits = int_digits_reason(exc)
    if digits:
        return digits
    text = str(exc)
    first = text.splitlines()[0].strip() if text.strip() else ""
    name = type(exc).__name__
    if isinstance(exc, RecursionError) and ("JSON" in text or "decod" in text):
        return "nested deeper than the JSON decoder goes (Python's recursion limit)"
    if isinstance(exc, RecursionError):
        return "recursion deeper than Python's limit (a macro or call that never ends)"
    if isinstance(exc, TypeError) and "no loader" in text:
        return ("{% include %}, {% import %}, {% extends %} and {% from %} are not available: a template is one "
                "text and loads no other template")
    if name == "TemplateLimitError":
        return first
    if name == "SecurityError":  # jinja2's sandbox
        return f"not allowed in a template: {first.rstrip('.')}"
    if name == "TemplateSyntaxError":
        line = getattr(exc, "lineno", None)
        return f"syntax error{f' on line {line}' if line else ''}: {first}"
    if name == "UndefinedError":
        return f"an undefined value is used: {first}"
    if isinstance(exc, ZeroDivisionError):
        return "a division by zero"
    if isinstance(exc, OverflowError):
        return first or "a number too large"
    if isinstance(exc, UnicodeDecodeError) and getattr(exc, "what", None) and getattr(exc, "path", None):
        return str(exc)  # io.edge.SideFileNotText: names the file it is about
    if isinstance(exc, UnicodeDecodeError):
        enc = (exc.encoding or "utf-8").upper().replace("UTF-8-SIG", "UTF-8")
        return f"not {enc} text ({exc.reason} at byte {exc.start:,})"
    if name == "ValidationError" and hasattr(exc, "errors"):  # pydantic: its fields, not its report
        return validation_words(exc, limit=3)
    if name == "BadGzipFile":  # gzip's message ends in a Python bytes repr: "Not a gzipped file (b'{\"')"
        if first.startswith("CRC check failed"):  # a member's check, after its data was given (trial 33 T6)
            return "gzip data check (CRC) failed"
        if first.startswith("Incorrect length of data produced"):
            return "gzip length check (ISIZE) failed"
        if not first.startswith("Not a gzipped file"):  # "Unknown compression method", a bad header
            return f"damaged gzip header ({first[:1].lower()}{first[1:]})" if first else "damaged gzip header"
        import ast

        m = re.search(r"\((b(['\"]).*\2)\)\s*$", first)
        try:
            head = ast.literal_eval(m.group(1)) if m else b""
        except (ValueError, SyntaxError):
            head = b""
        words = head_words(head, "gzip")
        return f"not gzip data ({words})" if words else "not gzip data"
    if name == "error" and type(exc).__module__ == "zlib":
        return f"damaged compressed data ({first.split(': ', 1)[-1]})" if first else "damaged compressed data"
    if isinstance(exc, KeyError):
        return f"missing {first}" if first else "a missing key"
    if isinstance(exc, EOFError):
        return first or "the data ends too early (truncated?)"
    if isinstance(exc, OSError) and exc.errno:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{os.strerror(exc.errno)}{where}"
    if first:
        return first
    words = re.sub(r"(?<!^)(?=[A-Z])", " ", name).lower().replace(" error", "").strip()
    return f"an unexpected {words} failure" if words else "an unexpected error"


def folder_path(path: str) -> str:
    """A folder's path or URL as every command names and opens it: its trailing slashes dropped
    (``out/`` is ``out``, ``gs://b/x/`` is ``gs://b/x``), the root staying the root (``/`` and ``//``
    are ``/``; trial48 B3: ``trend --output /`` wrote into the current folder, as ``"/".rstrip("/") or
    "."`` is ``.``), an empty path the current folder ``.``. The one such normalisation of the package."""
    if not path:
        return "."
    return path.rstrip("/") or "/"
