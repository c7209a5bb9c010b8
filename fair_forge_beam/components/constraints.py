"""Output constraints for PromptEvaluator's instruction-compliance rate (ICR, spec §6.10).

A constraint is any object with ``check(response: str) -> bool`` (and, for results, a ``name``).
Built in, as upstream:

* :class:`JsonConstraint` — the response parses as JSON (``json.loads``);
* :class:`WordCountConstraint` — at most ``max_words`` whitespace-separated tokens;
* :class:`KeywordConstraint` — contains ``keyword`` (case-insensitive by default);
* :class:`RegexConstraint` — ``re.search(pattern, response)`` finds a match.

Constraints are pickled to the workers: define custom ones at module level.
"""
from __future__ import annotations

import json
import re
from typing import Any, Protocol, Sequence, runtime_checkable

from fair_forge_beam.components.text import reading_text
from fair_forge_beam.quoting import quoted
from fair_forge_beam.arguments import checks_arguments

__all__ = ["Constraint", "JsonConstraint", "WordCountConstraint", "KeywordConstraint", "RegexConstraint",
           "check_constraints", "compliance"]


@runtime_checkable
class Constraint(Protocol):
    """Anything with ``check(response) -> bool``."""

    def check(self, response: str) -> bool:  # pragma: no cover - protocol
        ...


class JsonConstraint:
    """Passes when the whole response is valid JSON (any JSON value)."""

    name = "json"

    def check(self, response: str) -> bool:
        try:
            json.loads(response)
        except (TypeError, ValueError):
            return False
        return True


class WordCountConstraint:
    """Passes when the response has at most ``max_words`` whitespace tokens.

    Raises:
        ValueError: ``max_words`` is not an integer ≥ 0.
    """

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, max_words: int):
        if isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 0:
            raise ValueError(f"max_words must be an integer >= 0, got {quoted(max_words)}")
        self.max_words = max_words
        self.name = f"max_words<={max_words}"

    def check(self, response: str) -> bool:
        return len(response.split()) <= self.max_words


class KeywordConstraint:
    """Passes when ``keyword`` occurs in the response (substring; case-insensitive unless
    ``case_sensitive``), both as every word-reading scorer reads them
    (:func:`~fair_forge_beam.components.text.reading_text`: invisible characters removed, NFKC):
    ``"ref\\u200bund"`` and ``"ｒｅｆｕｎｄ"`` contain ``"refund"``.

    Raises:
        ValueError: empty ``keyword``.
    """

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, keyword: str, case_sensitive: bool = False):
        if not isinstance(keyword, str) or not keyword:
            raise ValueError("keyword must be a non-empty string")
        self.keyword, self.case_sensitive = keyword, bool(case_sensitive)
        self.name = f"keyword:{keyword}"

    def check(self, response: str) -> bool:
        keyword, response = reading_text(self.keyword), reading_text(response)
        if self.case_sensitive:
            return keyword in response
        return keyword.casefold() in response.casefold()


class RegexConstraint:
    """Passes when ``re.search(pattern, response)`` matches.

    Raises:
        re.error: the pattern does not compile (at construction, before any pipeline).
    """

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, pattern: str):
        self.pattern = pattern
        self._re = re.compile(pattern)
        self.name = f"regex:{pattern}"

    def check(self, response: str) -> bool:
        return self._re.search(response) is not None


def check_constraints(constraints: Any) -> tuple:
    """Validate a constraint list up front.

    Raises:
        ValueError: ``constraints`` is not a list/tuple, or an item has no callable ``check``.
    """
    if constraints is None:
        return ()
    if isinstance(constraints, (str, bytes)) or not isinstance(constraints, (list, tuple)):
        raise ValueError(f"constraints must be a list of objects with check(response) -> bool, got {type(constraints).__name__}")
    for i, c in enumerate(constraints):
        if not callable(getattr(c, "check", None)):
            raise ValueError(f"constraints[{i}] ({type(c).__name__}) has no check(response) method")
    return tuple(constraints)


def compliance(response: str, constraints: Sequence[Any]) -> float:
    """Fraction of ``constraints`` the response passes, in [0, 1] (spec §6.10 step 7).

    A constraint whose ``check`` raises counts as not passed (a response it cannot even read
    does not comply).

    Raises:
        ValueError: no constraints.
    """
    if not constraints:
        raise ValueError("compliance needs at least one constraint")
    passed = 0
    for c in constraints:
        try:
            passed += bool(c.check(response))
        except Exception:  # noqa: BLE001 - a failing check is a failed constraint
            pass
    return passed / len(constraints)
