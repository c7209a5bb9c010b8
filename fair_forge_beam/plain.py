"""Why something failed, in plain words: :func:`plain_reason`.

A usage error says what is wrong and where, never an exception's class name: a user's request
template that includes another one said ``TypeError: no loader for this environment specified``,
a macro calling itself ``RecursionError: maximum recursion depth exceeded``, a template over the
sandbox's limit ``TemplateLimitError: …`` (issue 28, hostile trial 3).
"""
from __future__ import annotations

import os
import re

__all__ = ["plain_reason"]


def plain_reason(exc: BaseException) -> str:
    """One line saying why ``exc`` happened, without its class name: the exception's own first
    line for most (the message is already words), a sentence for those whose message is Python's
    (a recursion, a template that loads another one, a sandbox refusal, a syntax error, an
    ``OSError``'s errno). Never raises."""
    try:
        return _reason(exc)
    except Exception:  # noqa: BLE001 - a reason is never a second failure
        return "an unexpected error"


def _reason(exc: BaseException) -> str:
    text = str(exc)
    first = text.splitlines()[0].strip() if text.strip() else ""
    name = type(exc).__name__
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
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    if isinstance(exc, OSError) and exc.errno:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{os.strerror(exc.errno)}{where}"
    if first:
        return first
    words = re.sub(r"(?<!^)(?=[A-Z])", " ", name).lower().replace(" error", "").strip()
    return f"an unexpected {words} failure" if words else "an unexpected error"
