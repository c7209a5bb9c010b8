"""The engine's check of every score at the scorer boundary (docs/engine.md, "What a score may hold").

One place for every metric, built-in or custom: a score tuple, the session value and the cell
value it adds (as :class:`~fair_forge_beam.engine.MetricSpec` declares them) are checked before
anything is accumulated, and a score that fails becomes a dead letter of its metric naming the
field, the value and the original record — never a traceback in the session combine
(``cannot accumulate a non-finite value``) or in the Parquet writer (``ArrowInvalid``), and never
a number counted silently.

What is a problem:

* a ``float`` (or numpy floating scalar) that is not finite (NaN, ±inf) or whose magnitude is
  above :data:`MAX_MAGNITUDE` (1e150: the statistics sum squares of scores), anywhere it is
  checked, whatever the declaration;
* a ``Decimal`` (or any number that is not an ``int``/``float``/numpy scalar: ``Fraction``,
  ``complex``) where the declaration is a number or not given (``Any``): the outputs hold
  float64/int64, and a ``Decimal`` reaches none of them;
* where a number (``float`` or ``int``) is declared: a ``bool`` (``True`` is not 1.0 here: a
  scorer that means a count or a rate returns ``1.0``/``0.0`` or declares ``bool``), a
  ``str`` (``"7"``) or any other type. ``None`` passes (a metric's own "no value", such as
  Humanity's Spearman without a reference); ``Optional[...]``, nested ``NamedTuple``\\ s and
  ``tuple[X, ...]`` are checked field by field.

The declaration: a score tuple's field annotations (``NamedTuple("MyScore", [..., ("x", float)])``;
:class:`~fair_forge_beam.engine.Scored`'s ``value`` is ``Any``), ``session_value_type`` for the
session value and ``cell_value_type`` for the cell value. Lists and dicts are not looked into
(a judge's parts are validated by their schema before they are scores).
"""
from __future__ import annotations

import math
import numbers
import typing
from typing import Any, Optional

_NUMBER = "number"  # a declared float / int
#: the largest magnitude a float score may have: the statistics sum squares of scores (variances,
#: bootstrap weights times values), which stay finite below it for any count of interactions a run can
#: hold (1e308 overflowed the Bayesian bootstrap to a wrong interval, trial37 T2)
MAX_MAGNITUDE = 1e150
_ANY = None  # no declaration: only non-finite floats and exotic numbers are problems


def _kind(declared: Any) -> Any:
    """What ``declared`` (a type annotation) asks of a value: :data:`_NUMBER`, ``("tuple",
    [(name, kind), ...])`` for a NamedTuple class, ``("each", kind)`` for ``tuple[X, ...]``,
    ``"skip"`` (bool, str, lists, dicts: not checked) or :data:`_ANY`."""
    if declared is None or declared is Any:
        return _ANY
    origin = typing.get_origin(declared)
    if origin is typing.Union:
        kinds = [_kind(a) for a in typing.get_args(declared) if a is not type(None)]
        return kinds[0] if len(kinds) == 1 else _ANY
    if declared in (float, int):
        return _NUMBER
    if origin is tuple:
        args = typing.get_args(declared)
        if len(args) == 2 and args[1] is Ellipsis:
            inner = _kind(args[0])
            return ("each", inner) if inner != "skip" else "skip"
        return "skip"
    if isinstance(declared, type) and issubclass(declared, tuple) and hasattr(declared, "_fields"):
        return ("tuple", _fields_of(declared))
    return "skip"


def _fields_of(cls: type, skip: frozenset = frozenset()) -> list:
    """``[(index, name, kind)]`` of a NamedTuple class's fields, but those named in ``skip``."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: no declaration
        hints = {}
    return [(i, f, _kind(hints.get(f))) for i, f in enumerate(cls._fields) if f not in skip]


def _number_problem(v: Any, kind: Any) -> Optional[str]:
    """Why the scalar ``v`` cannot be a value of ``kind`` (``None``: it can)."""
    t = type(v)
    if t is float:
        return None if -MAX_MAGNITUDE <= v <= MAX_MAGNITUDE else _float_problem(v)
    if t is int or v is None:
        return None
    if t is bool:
        return None if kind is _ANY else (
            f"a bool ({v!r}) where the metric declares a number: return 1.0 / 0.0 to count it, or declare bool")
    mod = getattr(t, "__module__", "")
    if mod == "numpy":
        name = t.__name__
        if name.startswith("float"):
            f = float(v)
            return None if -MAX_MAGNITUDE <= f <= MAX_MAGNITUDE else _float_problem(f)
        if name.startswith(("int", "uint")):
            return None
        if name == "bool" or name == "bool_":
            return None if kind is _ANY else f"a numpy bool ({v!r}) where the metric declares a number"
    if isinstance(v, numbers.Number) or t.__name__ == "Decimal":
        return (f"a {t.__name__} ({v!r}), not a float or int: the outputs hold float64 / int64 "
                f"(return float(...))")
    if kind is _NUMBER:
        return f"a {t.__name__} ({_short(v)}) where the metric declares a number"
    return None


def _float_problem(v: float) -> str:
    if not math.isfinite(v):
        return f"{v!r}, not a finite number"
    return f"{v!r}, beyond the magnitude a score may have ({MAX_MAGNITUDE:g}: sums of squares of scores must stay finite)"


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _problem(v: Any, kind: Any) -> Optional[tuple]:
    """``(path, reason)`` of the first problem of ``v`` as ``kind`` asks (``None``: none)."""
    if kind == "skip":
        return None
    if type(kind) is tuple:
        if kind[0] == "tuple":
            if not isinstance(v, tuple):
                return None if v is None else ("", f"a {type(v).__name__} ({_short(v)}) where a tuple is declared")
            for i, name, inner in kind[1]:
                if i < len(v):
                    found = _problem(v[i], inner)
                    if found is not None:
                        return (name + ("." + found[0] if found[0] else ""), found[1])
            return None
        if isinstance(v, (tuple, list)):  # ("each", inner)
            for i, item in enumerate(v):
                found = _problem(item, kind[1])
                if found is not None:
                    return (f"[{i}]" + found[0], found[1])
        return None
    if isinstance(v, tuple) and hasattr(type(v), "_fields"):  # an undeclared NamedTuple: its own annotations
        return _problem(v, ("tuple", _fields_of(type(v))))
    reason = _number_problem(v, kind)
    return None if reason is None else ("", reason)


class ScoreCheck:
    """The check of one metric's scores (built once per scorer DoFn, cached per score type)."""

    def __init__(self, spec: Any, ids: Any = ()):
        # ids: the names of the score's id fields (the engine's SCORE_IDS), read by the engine, not checked
        self.spec, self.ids = spec, frozenset(ids)
        self._score_kinds: dict = {}
        self._session_kind = _kind(getattr(spec, "session_value_type", None))
        self._cell_kind = _kind(getattr(spec, "cell_value_type", None))

    def problem(self, score: Any, session_value: Any = None, cell_value: Any = None) -> Optional[str]:
        """Why ``score`` (with the session and cell values it adds) is not a valid score, naming
        the field and the value (``None``: valid)."""
        t = type(score)
        kinds = self._score_kinds.get(t)
        if kinds is None:
            kinds = self._score_kinds[t] = (("tuple", _fields_of(t, self.ids)) if hasattr(t, "_fields") else _ANY)
        found = _problem(score, kinds)
        if found is not None:
            return f"score field {found[0] or 'value'!r} is {found[1]}"
        if getattr(self.spec, "session_value", None) is not None:
            found = _problem(session_value, self._session_kind)
            if found is not None:
                where = f"session value{'.' + found[0] if found[0] else ''}"
                return f"{where} is {found[1]}"
        if getattr(self.spec, "cell_value", None) is not None:
            found = _problem(cell_value, self._cell_kind)
            if found is not None:
                return f"cell value{'.' + found[0] if found[0] else ''} is {found[1]}"
        return None
