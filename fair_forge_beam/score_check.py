"""The engine's check of every score at the scorer boundary (docs/engine.md, "What a score may hold").

One place for every metric, built-in or custom: a score tuple, the session value and the cell
value it adds (as :class:`~fair_forge_beam.engine.MetricSpec` declares them) are checked before
anything is accumulated, and a score that fails becomes a dead letter of its metric naming the
field, the value and the original record — never a traceback in the session combine
(``cannot accumulate a non-finite value``) or in the Parquet writer (``ArrowInvalid``), and never
a number counted silently.

What is a problem, anywhere a value is checked, whatever the declaration (the writers hold
float64 / int64 and JSON, the statistics sum squares of scores):

* a ``float`` (or numpy floating scalar) that is not finite (NaN, ±inf) or whose magnitude is
  above :data:`MAX_MAGNITUDE` (1e150);
* an ``int`` (or numpy integer) outside int64 (:data:`INT64`: ``2**64``, ``10**400``; the Parquet
  writer fails on it and numpy's ``uint64`` wraps to a negative float);
* a ``Decimal`` (or any number that is not an ``int``/``float``/numpy scalar: ``Fraction``,
  ``complex``, ``numpy.longdouble``): it reaches none of the outputs.

Where a number is declared (``float``, ``int``, a numpy number type), moreover: a ``bool``
(``True`` is not 1.0 here: a scorer that means a count or a rate returns ``1.0``/``0.0`` or
declares ``bool``), a ``str`` (``"7"``) or any other type; where ``float`` is declared, an int
beyond :data:`FLOAT_EXACT_INT` (2**53: float64 holds no larger int exactly, and the Parquet writer
refuses it); where ``int`` is declared, a float that is not a whole number (``2.5``: the Parquet
writer truncated it to 2) or is beyond 2**53 (``3.0`` passes as the int it equals: numpy and
pandas give floats for ints often; :func:`_float_value_problem` says why). ``None`` passes (a
metric's own "no value", such as Humanity's Spearman without a reference).

The declaration is followed in every form: ``Optional[X]``, ``Union[X, Y]`` and ``X | Y`` (a value
passes if it fits one of them; a scalar fits no container arm, and a container no scalar arm: ``str``,
``bool``), ``Annotated[X, ...]``, ``tuple[X, ...]``,
``tuple[X, Y]``, ``list[X]``, ``set[X]``, ``Sequence[X]``, ``dict[K, V]`` (its values), nested
``NamedTuple``\\ s, pydantic models, dataclasses and ``TypedDict``\\ s (field by field); any other generic
by its origin's abstract kind (a ``collections.abc.Mapping``, ``Collection``, numpy ``ndarray``), a
numpy type narrower than int64 / float64 by its range, and a generic of no known kind with the rules
of any value in every container it holds (:func:`_generic_kind`). The Parquet columns the metric's
info declares (``MetricInfo.parquet``) are a declaration too: each value of the interaction record
that goes to one is checked against its type (:func:`_column_kind`). The declarations: a score tuple's field
annotations (``NamedTuple("MyScore", [..., ("x", float)])``; :class:`~fair_forge_beam.engine.Scored`'s
``value`` is ``Any``), ``session_value_type`` for the session value and ``cell_value_type`` for
the cell value. An undeclared value (``Any``, ``str``, ``bool``, a bare ``list``) has the rules of
the first list; a NamedTuple, pydantic model or dataclass there is checked by its own annotations,
while an undeclared list or dict is not looked into (a judge's parts are validated by their schema
before they are scores).
"""
from __future__ import annotations

import collections
import collections.abc as abc
import dataclasses
import math
import numbers
import operator
import threading
import types
import typing
from typing import Any, Optional

#: the ids a score names its interaction by (engine.SCORE_IDS' names; the engine checks they are its
#: interaction's), and those of its session, which every score carries (the engine keys it by them)
ID_FIELDS = ("element_id", "session_id", "assistant_id", "language", "turn_index", "qa_id")
SCORE_SESSION_IDS = ("session_id", "assistant_id", "language")
#: a declared float / a declared int (any other declaration of a scalar is _ANY)
_FLOAT, _INT = "float", "int"
#: the largest magnitude a float score may have: the statistics sum squares of scores (variances,
#: bootstrap weights times values), which stay finite below it for any count of interactions a run can
#: hold (1e308 overflowed the Bayesian bootstrap to a wrong interval, trial37 T2)
MAX_MAGNITUDE = 1e150
#: the ints a score may hold: int64, what the Parquet writer and the statistics take (trial37b B10)
INT64 = (-2**63, 2**63 - 1)
#: the largest int float64 holds exactly: an int beyond it where a float is declared is refused
FLOAT_EXACT_INT = 2**53
_ANY = None  # no declaration: only what no output holds is a problem
#: a union's arm that is a scalar type (``str``, ``bool``): the rules of any value, but no container
_SCALAR = "scalar"
#: a declaration the check does not know: the rules of any value, in every container the value holds
_DEEP = "deep"
#: a Parquet column's type (MetricInfo.parquet): bool and string columns take nothing else
_BOOL, _STR = "bool", "str"
_UNIONS = (typing.Union, types.UnionType)
#: the kind of each class that has fields (NamedTuple, pydantic model, dataclass), built once
_CLASS_KINDS: dict = {}
_BUILDING: set = set()
_BUILD_LOCK = threading.RLock()


def _kind(declared: Any) -> Any:
    """What ``declared`` (a type annotation) asks of a value: :data:`_FLOAT` / :data:`_INT`,
    ``("union", [kind, ...])``, ``("tuple", [(index, name, kind), ...])`` for a NamedTuple,
    ``("model", [(name, kind), ...])`` for a pydantic model or dataclass, ``("each", kind)`` for a
    homogeneous container, ``("fixed", [kind, ...])`` for ``tuple[X, Y]``, ``("map", kind)`` for a
    mapping's values, or :data:`_ANY`."""
    if declared is None or declared is Any or declared is type(None):
        return _ANY
    origin = typing.get_origin(declared)
    args = typing.get_args(declared)
    if origin is typing.Annotated:
        return _kind(args[0])
    if origin in _UNIONS:
        kinds = []
        for a in args:
            k = _kind(a) if a is not type(None) else "none"
            if k is _ANY and _scalar_declared(a):
                k = _SCALAR  # a str / bool arm: no container fits it (trial39b B1: it took [nan] unchecked)
            if k != "none" and k not in kinds:
                kinds.append(k)
        if (_ANY in kinds or _SCALAR in kinds) and all(k in (_ANY, _SCALAR, _FLOAT, _INT) for k in kinds):
            # a scalar may also be a str (or bool, ...): the rules of any value, a number's range kept
            return _ANY
        return _ANY if not kinds else kinds[0] if len(kinds) == 1 else ("union", kinds)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _container("each", _kind(args[0]))
        if args == ((),):  # tuple[()]
            return _ANY
        kinds = [_kind(a) for a in args]
        return ("fixed", kinds) if any(k is not _ANY for k in kinds) else _ANY
    if origin is not None:
        return _generic_kind(origin, args)
    if isinstance(declared, typing.NewType):
        return _kind(declared.__supertype__)
    if not isinstance(declared, type) or issubclass(declared, bool):
        return _ANY  # a str (unresolved annotation), a TypeVar; bool is not a number here
    if issubclass(declared, numbers.Integral):
        return _numpy_range(declared) or _INT
    if issubclass(declared, numbers.Real):
        return _numpy_range(declared) or _FLOAT
    if typing.is_typeddict(declared):  # a TypedDict: its values, key by key (trial38b B6)
        return _typed_dict_kind(declared)
    return _class_kind(declared) or _ANY


def _scalar_declared(declared: Any) -> bool:
    """Whether ``declared`` (an arm of a union that asks nothing of a value) is a scalar type: a text,
    bool or number, a ``Literal`` of such values, or any class that is no container; a container value
    never fits it."""
    while typing.get_origin(declared) is typing.Annotated:
        declared = typing.get_args(declared)[0]
    while isinstance(declared, typing.NewType):
        declared = declared.__supertype__
    if typing.get_origin(declared) is typing.Literal:
        return all(a is None or isinstance(a, (str, bytes, bool, int, float)) for a in typing.get_args(declared))
    return isinstance(declared, type) and (issubclass(declared, (str, bytes)) or not issubclass(
        declared, (abc.Iterable, abc.Mapping)))


#: origins whose arguments declare no value: the rules of any value (a Literal's values are given)
_NO_VALUE_ORIGINS = (typing.Literal, typing.ClassVar, typing.Final, type)


def _generic_kind(origin: Any, args: tuple) -> Any:
    """The kind of a generic declaration ``origin[args]`` other than a union, ``Annotated`` or a
    tuple: by its origin's abstract kind (trial38b B6: ``DefaultDict``, ``OrderedDict``, ``deque``,
    ``ChainMap``, ``NDArray`` switched the check off) — a ``collections.abc.Mapping`` (its values; a
    ``Counter``'s are ints), a ``Collection`` or ``Iterable`` of one argument (its items), a numpy
    ``ndarray`` (its items, by the dtype's range). **Decision**: a generic the check does not know
    (``Callable``, a user's generic class) is checked as :data:`_DEEP` — the rules of any value, in
    every container it holds — never switched off."""
    if origin in _NO_VALUE_ORIGINS:
        return _ANY
    if isinstance(origin, type):
        if origin.__module__ == "numpy" and origin.__name__ == "ndarray":
            dtype = args[1] if len(args) == 2 else None
            inner = typing.get_args(dtype)
            return _container("each", _kind(inner[0])) if inner else _DEEP
        if issubclass(origin, abc.Mapping):
            if len(args) == 2:
                return _container("map", _kind(args[1]))
            if issubclass(origin, collections.Counter):
                return ("map", _INT)
            return _DEEP
        if issubclass(origin, (abc.Collection, abc.Iterable)) and not issubclass(origin, (str, bytes, bytearray)):
            return _container("each", _kind(args[0])) if len(args) == 1 else _DEEP
    return _DEEP


def _numpy_range(cls: type) -> Any:
    """A numpy number type narrower than int64 / float64 (``uint8``, ``int32``, ``float32``, ...):
    ``("bounded", base, low, high, name)``; ``None`` for any other type (trial38b B6: ``numpy.uint8``
    declared took 300)."""
    if getattr(cls, "__module__", "") != "numpy":
        return None
    import numpy as np

    try:
        dtype = np.dtype(cls)
    except TypeError:
        return None
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        low, high = int(info.min), int(info.max)
        return None if (low, high) == INT64 else ("bounded", _INT, low, high, dtype.name)
    if dtype.kind == "f" and dtype.itemsize < 8:
        high = float(np.finfo(dtype).max)
        return ("bounded", _FLOAT, -high, high, dtype.name)
    return None


def _typed_dict_kind(cls: type) -> Any:
    hints = _hints(cls)
    fields = [(name, _kind(hint)) for name, hint in hints.items()]
    return ("model", fields) if any(k is not _ANY for _, k in fields) else _ANY


def _container(tag: str, inner: Any) -> Any:
    return _ANY if inner is _ANY else (tag, inner)


def _class_kind(cls: type) -> Any:
    """The kind of a class with fields (a NamedTuple, a pydantic model, a dataclass), built once;
    ``None`` for any other class. A field of the class's own type (directly or through others) is
    checked as undeclared, by its value's own class."""
    try:
        return _CLASS_KINDS[cls]
    except KeyError:
        pass
    with _BUILD_LOCK:  # one thread builds; a class is in _CLASS_KINDS only once it is whole
        if cls in _CLASS_KINDS or cls in _BUILDING:
            return _CLASS_KINDS.get(cls)
        _BUILDING.add(cls)
        try:
            kind = None
            if issubclass(cls, tuple) and hasattr(cls, "_fields"):
                kind = ("tuple", _fields_of(cls))
            elif isinstance(getattr(cls, "model_fields", None), dict):  # a pydantic model
                hints = _hints(cls)
                kind = ("model", [(f, _kind(hints.get(f, info.annotation))) for f, info in cls.model_fields.items()])
            elif dataclasses.is_dataclass(cls):
                hints = _hints(cls)
                kind = ("model", [(f.name, _kind(hints.get(f.name))) for f in dataclasses.fields(cls)])
            if kind is not None and all(k is _ANY for *_, k in kind[1]):
                kind = None
            _CLASS_KINDS[cls] = kind
        finally:
            _BUILDING.discard(cls)
    return kind


def _hints(cls: type) -> dict:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: no declaration
        return {}


def _fields_of(cls: type, skip: frozenset = frozenset()) -> list:
    """``[(index, name, kind)]`` of a NamedTuple class's fields, but those named in ``skip``."""
    hints = _hints(cls)
    return [(i, f, _kind(hints.get(f))) for i, f in enumerate(cls._fields) if f not in skip]


def _int_text(v: int) -> str:
    bits = v.bit_length()
    if bits <= 96:
        return repr(v)
    # str() of a very long int is slow, and refused above 4300 digits: its size only
    return f"an int of {'-' if v < 0 else ''}about 10**{int(bits * math.log10(2))}"


def _int_problem(v: int, kind: Any) -> Optional[str]:
    if not INT64[0] <= v <= INT64[1]:
        return f"{_int_text(v)}, outside int64 (the outputs hold int64 / float64: -2**63 to 2**63-1)"
    if kind is _FLOAT and abs(v) > FLOAT_EXACT_INT:
        return (f"the int {v!r} where the metric declares a float: float64 holds ints exactly only up to 2**53 "
                f"(return float(...))")
    return None


def _number_problem(v: Any, kind: Any) -> Optional[str]:
    """Why the scalar ``v`` cannot be a value of ``kind`` (``None``: it can)."""
    t = type(v)
    if t is float:
        return _float_value_problem(v, kind)
    if t is int:
        return _int_problem(v, kind)
    if v is None:
        return None
    if t is bool:
        return None if kind is _ANY else (
            f"a bool ({v!r}) where the metric declares a number: return 1.0 / 0.0 to count it, or declare bool")
    mod = getattr(t, "__module__", "")
    if mod == "numpy":
        name = t.__name__
        if name.startswith("float"):
            return _float_value_problem(float(v), kind)
        if name.startswith(("int", "uint")):
            return _int_problem(int(v), kind)
        if name == "bool" or name == "bool_":
            return None if kind is _ANY else f"a numpy bool ({v!r}) where the metric declares a number"
    if isinstance(v, numbers.Number) or t.__name__ == "Decimal":
        return (f"a {t.__name__} ({_short(v)}), not a float or int: the outputs hold float64 / int64 "
                f"(return float(...))")
    if kind is not _ANY:
        return f"a {t.__name__} ({_short(v)}) where the metric declares a number"
    return None


def _float_value_problem(v: float, kind: Any) -> Optional[str]:
    """Why the float ``v`` (a Python or numpy float, as a Python float) cannot be a value of ``kind``.

    Where ``int`` is declared, a float must be a whole number float64 holds exactly (at most
    :data:`FLOAT_EXACT_INT` in magnitude): ``2.5`` is refused (the Parquet writer's int64 column
    truncated it to 2 silently, and the statistics would count a fraction of what the metric
    declares whole). **Decision**: ``3.0`` (and ``numpy.float64(3.0)``) is taken as the int it
    equals: numpy and pandas give floats for ints often (an int column with a missing value, a
    mean of whole counts, ``np.sum`` of a float array), the value is exact, the Parquet writer
    stores it as the int 3 and the statistics sum it exactly; refusing it would dead-letter every
    score of such a scorer for no loss. NaN and ±inf are refused as anywhere."""
    if not -MAX_MAGNITUDE <= v <= MAX_MAGNITUDE:
        return _float_problem(v)
    if kind is _INT:
        if not v.is_integer():
            return f"{v!r}, not a whole number, where the metric declares an int (return int(...) of a whole number)"
        if abs(v) > FLOAT_EXACT_INT:
            return (f"the float {v!r} where the metric declares an int: beyond 2**53 a float holds no exact int "
                    f"(return the int itself)")
    return None


#: the fields holding an interaction's weight (spec §3.4), which the reader has checked (finite, >= 0)
#: and the weighted statistics take at any finite magnitude (case-003: 1e308 weights give finite
#: aggregates): MAX_MAGNITUDE, a bound for sums of squares of scores, is not theirs
WEIGHT_FIELDS = frozenset({"weight"})


def _a_weight(name: str, v: Any) -> bool:
    """Whether ``v`` is a valid interaction weight in a field named as :data:`WEIGHT_FIELDS` names."""
    return name in WEIGHT_FIELDS and type(v) in (float, int) and math.isfinite(v) and v >= 0


def _float_problem(v: float) -> str:
    if not math.isfinite(v):
        return f"{v!r}, not a finite number"
    return f"{v!r}, beyond the magnitude a score may have ({MAX_MAGNITUDE:g}: sums of squares of scores must stay finite)"


def _short(v: Any) -> str:
    """``repr(v)``, cut to 60 characters; never raises (trial39b B4: a value whose ``__repr__`` raised
    made the check itself raise): a repr that fails is told by the value's type."""
    if type(v) is int:
        return _int_text(v)
    try:
        text = repr(v)
    except Exception:  # noqa: BLE001 - the value's own code
        return f"a {_type_name(type(v))} whose repr raised"
    return text if len(text) <= 60 else text[:57] + "..."


def _type_name(t: type) -> str:
    from fair_forge_beam.quoting import shown

    return shown(t.__name__, 60)


def _quoted(v: Any) -> str:
    from fair_forge_beam.quoting import quoted

    return quoted(v, 80)


def _join(head: str, found: tuple) -> tuple:
    path = found[0]
    return (head + ("" if not path else path if path.startswith("[") else "." + path), found[1])


def _items(v: Any):
    """The items of a container value (``None``: not a container the check looks into): a
    ``collections.abc`` sequence or set (a ``deque`` too) but a text, or a numpy array."""
    if isinstance(v, (list, tuple, set, frozenset)):
        return v
    if type(v).__module__ == "numpy" and type(v).__name__ == "ndarray":
        return v.reshape(-1).tolist() if v.dtype.kind in "biufc" else list(v.reshape(-1))
    if isinstance(v, (abc.Sequence, abc.Set)) and not isinstance(v, (str, bytes, bytearray, memoryview)):
        return list(v)
    return None


def _scalar(v: Any) -> bool:
    """Whether ``v`` is a number, a bool or a text (a numpy scalar too): no container or model."""
    return isinstance(v, (str, bytes, numbers.Number)) or (type(v).__module__ == "numpy" and type(v).__name__ != "ndarray")


_SHAPES = {"each": "a collection", "fixed": "a tuple", "map": "a mapping"}


def _scalar_problem(v: Any, kind: Any) -> Optional[str]:
    """Why the value ``v`` (no container) cannot be a value of the scalar ``kind``."""
    if type(kind) is tuple:  # ("bounded", base, low, high, name): a numpy type or a narrow column
        _, base, low, high, name = kind
        reason = _number_problem(v, base)
        if reason is None and v is not None and not isinstance(v, (bool, str)) and isinstance(v, numbers.Real):
            if not low <= v <= high:
                return f"{_short(v)}, outside {name} ({_short(low)} to {_short(high)})"
        return reason
    if kind is _BOOL:
        if type(v) is bool or type(v).__name__ in ("bool", "bool_") and type(v).__module__ == "numpy":
            return None
        return f"a {type(v).__name__} ({_short(v)}) where the column is bool"
    if kind is _STR:
        return None if isinstance(v, str) else f"a {type(v).__name__} ({_short(v)}) where the column is string"
    return _number_problem(v, _ANY if kind is _DEEP else kind)


def _problem(v: Any, kind: Any) -> Optional[tuple]:
    """``(path, reason)`` of the first problem of ``v`` as ``kind`` asks (``None``: none)."""
    if v is None:
        return None
    if kind is _SCALAR:
        if isinstance(v, abc.Mapping) or (not isinstance(v, (str, bytes, bytearray, memoryview)) and _items(v) is not None):
            return ("", f"a {type(v).__name__} ({_short(v)}) where a scalar (a text, bool or number) is declared")
        kind = _ANY
    if type(kind) is tuple:
        tag = kind[0]
        if tag == "union":  # the value fits one of them, or the reason of the first one of its shape
            first = fitting = None
            scalar = _scalar(v)
            for inner in kind[1]:
                found = _problem(v, inner)
                if found is None:
                    return None
                first = first or found
                if fitting is None and (type(inner) is tuple and inner[0] != "bounded") != scalar:
                    fitting = found  # an arm of the value's shape (a container's, a scalar's) says why
            return fitting or first
        if tag == "tuple":
            if not isinstance(v, tuple):
                return ("", f"a {type(v).__name__} ({_short(v)}) where a tuple is declared")
            for i, name, inner in kind[1]:
                if i < len(v) and not _a_weight(name, v[i]):
                    found = _problem(v[i], inner)
                    if found is not None:
                        return _join(name, found)
            return None
        if tag == "model":
            if _scalar(v):
                return ("", f"a {type(v).__name__} ({_short(v)}) where a model is declared")
            mapping = isinstance(v, abc.Mapping)
            for name, inner in kind[1]:
                item = v.get(name) if mapping else getattr(v, name, None)
                found = None if _a_weight(name, item) else _problem(item, inner)
                if found is not None:
                    return _join(name, found)
            return None
        if tag == "map" and isinstance(v, abc.Mapping):
            for key, item in v.items():
                found = _problem(item, kind[1])
                if found is not None:
                    return _join(f"[{_short(key)}]", found)
            return None
        if tag == "bounded":
            reason = _scalar_problem(v, kind)
            return None if reason is None else ("", reason)
        items = _items(v) if tag in ("each", "fixed") else None
        if items is not None:
            inners = [kind[1]] * len(items) if tag == "each" else [*kind[1], *[_ANY] * (len(items) - len(kind[1]))]
            for i, (item, inner) in enumerate(zip(items, inners)):
                found = _problem(item, inner)
                if found is not None:
                    return _join(f"[{i}]", found)
            return None
        if _scalar(v) or isinstance(v, abc.Mapping) != (tag == "map"):
            # a scalar (or a container of the other shape) where a container is declared: no arm of a
            # union takes it as "any" (trial38b B5: Optional[list[int]] took 2.5, then the Parquet writer failed)
            return ("", f"a {type(v).__name__} ({_short(v)}) where {_SHAPES[tag]} is declared")
        kind = _DEEP  # a value of another shape than declared: the rules of any value, looked into
    if kind is _DEEP:
        if isinstance(v, abc.Mapping):
            for key, item in v.items():
                found = _problem(item, _DEEP)
                if found is not None:
                    return _join(f"[{_short(key)}]", found)
            return None
        items = _items(v) if not isinstance(v, tuple) or not hasattr(v, "_fields") else None
        if items is not None:
            for i, item in enumerate(items):
                found = _problem(item, _DEEP)
                if found is not None:
                    return _join(f"[{i}]", found)
            return None
    if kind in (_ANY, _DEEP) and not isinstance(v, (str, bytes, float, int)):
        own = _class_kind(type(v))  # an undeclared NamedTuple, model or dataclass: its own annotations
        if own is not None:
            return _problem(v, own)
    reason = _scalar_problem(v, kind)
    return None if reason is None else ("", reason)


#: the scalar types that pass as any value (:data:`_ANY`) without a look (a ``bool`` is no number here)
_PLAIN = frozenset({str, bytes, bool, type(None)})
#: containers an undeclared value may be, not looked into (:func:`_problem`: only a class with fields is)
_PLAIN_CONTAINERS = frozenset({tuple, list, dict, set, frozenset})


def _passes(kind: Any) -> Any:
    """A quick test ``ok(v) -> bool`` of a value as ``kind`` asks, built once per declaration: ``True``
    only where :func:`_problem` finds no problem (it is asked why whenever the test says ``False``).

    **Decision** (issue 26: the check walked every score's declaration afresh, 10-36 µs a score of the
    main job's two metrics, a tenth of the engine's cost per interaction): the test knows the plain
    shapes scores have (floats, ints, texts, bools, ``None``, exact lists/tuples/dicts of them, NamedTuples,
    unions) and says ``False`` for anything else (numpy values, narrow types, other classes), which
    :func:`_problem` then checks in full: a value is refused by the same rules, reason for reason.
    ``tests/test_score_boundary.py`` checks ``ok(v)`` implies no problem over generated kinds and values."""
    low, high, exact, big = INT64[0], INT64[1], FLOAT_EXACT_INT, MAX_MAGNITUDE
    if kind is _ANY or kind is _DEEP:
        deep = kind is _DEEP

        def ok(v):
            t = type(v)
            if t is float:
                return -big <= v <= big  # NaN compares False
            if t is int:
                return low <= v <= high
            if t in _PLAIN:
                return True
            if t not in _PLAIN_CONTAINERS:
                return False
            if not deep:
                return True
            return all(map(ok, v.values() if t is dict else v))
        return ok
    if kind is _SCALAR:  # any value's test, but no container
        any_value = _passes(_ANY)
        return lambda v: type(v) not in _PLAIN_CONTAINERS and any_value(v)
    if kind is _FLOAT or kind is _INT:
        whole = kind is _INT

        def ok(v):
            t = type(v)
            if t is float:
                return -exact <= v <= exact and v.is_integer() if whole else -big <= v <= big
            if t is int:
                return low <= v <= high if whole else -exact <= v <= exact
            return v is None
        return ok
    if kind is _STR or kind is _BOOL:
        want = str if kind is _STR else bool
        return lambda v: v is None or type(v) is want
    tag = kind[0]
    if tag == "union":
        arms = [_passes(k) for k in kind[1]]
        return lambda v: v is None or any(a(v) for a in arms)
    if tag == "tuple" or tag == "model":
        fields = [(*f[:-1], f[-2] in WEIGHT_FIELDS, _passes(f[-1])) for f in kind[1]]
        if tag == "tuple":
            def ok(v):
                if v is None:
                    return True
                if not isinstance(v, tuple):
                    return False
                n = len(v)
                for i, name, weight, test in fields:  # a loop: all() of a generator costs twice as much here
                    if i < n and not test(v[i]) and not (weight and _a_weight(name, v[i])):
                        return False
                return True
            return ok

        def ok(v):
            if v is None:
                return True
            if type(v) is dict:
                get = v.get
            elif isinstance(v, abc.Mapping) or _scalar(v):
                return False
            else:
                def get(name):
                    return getattr(v, name, None)
            for name, weight, test in fields:
                item = get(name)
                if not test(item) and not (weight and _a_weight(name, item)):
                    return False
            return True
        return ok
    if tag in ("each", "fixed", "map"):
        if tag == "map":
            inner = _passes(kind[1])
            return lambda v: v is None or (type(v) is dict and all(map(inner, v.values())))
        if tag == "each":
            inner = _passes(kind[1])
            if kind[1] is _INT or kind[1] is _FLOAT:  # a list of numbers (counts): its range, in C
                one, lo, hi = (int, low, high) if kind[1] is _INT else (float, -big, big)

                def ok(v):
                    if v is None:
                        return True
                    if type(v) is not list and type(v) is not tuple:
                        return False
                    if not v:
                        return True
                    if set(map(type, v)) != {one}:
                        return all(map(inner, v))
                    return lo <= min(v) and max(v) <= hi and (one is int or not any(map(math.isnan, v)))
                return ok
            return lambda v: v is None or ((type(v) is list or type(v) is tuple) and all(map(inner, v)))
        tests = [_passes(k) for k in kind[1]]
        rest = _passes(_ANY)
        return lambda v: v is None or ((type(v) is list or type(v) is tuple) and all(
            (tests[i] if i < len(tests) else rest)(item) for i, item in enumerate(v)))
    return lambda v: v is None  # a bounded (narrow numpy) type: always looked at in full


def _column_kind(t: Any) -> Any:
    """What a Parquet column of the pyarrow type ``t`` takes (trial38b B4: the declared column type was
    never consulted, and an int64 column truncated 2.5 to 2): an int64 / float64 column as a declared
    ``int`` / ``float``, a narrower one by its range, a bool or string column nothing else, a list
    column its items; a struct (a result model's fields) as any value, looked into."""
    import pyarrow as pa

    if pa.types.is_integer(t) or pa.types.is_floating(t):
        import numpy as np

        return _numpy_range(np.dtype(t.to_pandas_dtype()).type) or (_INT if pa.types.is_integer(t) else _FLOAT)
    if pa.types.is_boolean(t):
        return _BOOL
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _STR
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return ("each", _column_kind(t.value_type))
    return _DEEP


def _column_kinds(spec: Any) -> dict:
    """``{column: (kind, type name)}`` of the per-interaction Parquet columns ``spec.info`` declares
    (:meth:`~fair_forge_beam.schemas.metric_info.MetricInfo.parquet_fields`); none without an info."""
    info = getattr(spec, "info", None)
    fields = getattr(info, "parquet_fields", None)
    if fields is None or getattr(spec, "interaction_record", None) is None:
        return {}
    return {f.name: (_column_kind(f.type), str(f.type)) for f in fields()}


class ScoreCheck:
    """The check of one metric's scores (built once per scorer DoFn, cached per score type)."""

    def __init__(self, spec: Any, ids: Any = ()):
        # ids: the names of the score's id fields (the engine's SCORE_IDS), read by the engine, not checked
        self.spec, self.ids = spec, frozenset(ids)
        self._score_kinds: dict = {}
        self._shapes: dict = {}  # type -> "" (a score) or why it is none
        self._getters: dict = {}  # score type -> (its id field names, their attrgetter)
        self._index = self._indexed = None  # element_id -> interaction of the last batch asked about
        self._session_kind = _kind(getattr(spec, "session_value_type", None))
        self._cell_kind = _kind(getattr(spec, "cell_value_type", None))
        self._columns = _column_kinds(spec)
        # quick tests (_passes): a value they pass has no problem; any other is looked at in full
        self._quick: dict = {}  # score type -> its test
        self._quick_values = (_passes(self._session_kind), _passes(self._cell_kind))
        self._quick_columns = [(column, _passes(kind)) for column, (kind, _) in self._columns.items()]

    def not_a_score(self, out: Any, gave: str = "returned") -> Optional[str]:
        """Why ``out``, what the scorer ``gave`` (``returned``/``yielded``), is not a score at all
        (``None``: it is one): a score carries its session's ids (:data:`SCORE_IDS`' ``session_id``,
        ``assistant_id``, ``language``), which the engine keys it by — a float, a plain tuple, a list
        of scores, a dict carry none (trial38 T1: ``'float' object has no attribute 'value'``)."""
        t = type(out)
        found = self._shapes.get(t)
        if found is None:
            found = "" if all(hasattr(out, f) for f in SCORE_SESSION_IDS) else (
                f"the scorer {gave} a {_type_name(t)}, not a score (a score carries its interaction's ids: "
                f"Scored.of(interaction, value), or a NamedTuple starting with engine.SCORE_IDS)")
            if not found or isinstance(out, (float, int, str, bytes, tuple, list, dict, set, type(None))):
                self._shapes[t] = found  # a class of fixed shape (an instance's own attributes are asked each time)
        return found or None

    def ids_problem(self, score: Any, element: Any) -> Optional[str]:
        """Why ``score`` is not a score of the interaction it was made for (``None``: it is): the
        scorer was called with ``element`` (an interaction, or a list of them with ``batch_size``),
        and a score names the interaction by its ids (``element_id``, ``session_id``, ``assistant_id``,
        ``language``, ``turn_index``, ``qa_id``: those it has) — a score keyed ``session_id="ghost"``
        pooled 16 sessions into one (trial38 T8). A score without ``element_id`` (a
        :class:`~fair_forge_beam.engine.SessionPart`) names the session of one of them."""
        t = type(score)
        get = self._getters.get(t)
        if get is None:
            names = tuple(f for f in ID_FIELDS if hasattr(score, f))
            if "element_id" not in names:
                names = tuple(f for f in names if f in SCORE_SESSION_IDS)
            get = self._getters[t] = (names, operator.attrgetter(*names))
        names, getter = get
        if type(element) is list:
            index = self._index if self._indexed is element else None
            if index is None:  # built once per call (a batch), on its first score
                index = self._index = {}
                self._indexed = element
            by = "element_id" if "element_id" in names else "session"
            if by not in index:
                index[by] = ({x.element_id: x for x in element} if by == "element_id" else
                             {(x.session_id, x.assistant_id, x.language): x for x in element})
            x = index[by].get(score.element_id if by == "element_id" else getter(score))
            if x is None:
                return (f"the scorer's {_type_name(t)} names no interaction it was given "
                        f"({names[0]} {_quoted(getter(score)[0] if len(names) > 1 else getter(score))}): a score carries "
                        f"the ids of the interaction it scores (Scored.of(interaction, value))")
            element = x
        mine, theirs = getter(score), getter(element)
        if mine == theirs:
            return None
        if len(names) == 1:
            mine, theirs = (mine,), (theirs,)
        field, a, b = next((f, m, o) for f, m, o in zip(names, mine, theirs) if m != o)
        return (f"the scorer's {_type_name(t)} names another interaction ({field} {_quoted(a)}, not "
                f"{_quoted(b)}, the interaction's): a score carries the ids of the interaction it scores "
                f"(Scored.of(interaction, value))")

    def forget(self) -> None:
        """Let go of the last batch's index (:meth:`ids_problem`), at the end of its call."""
        self._index = self._indexed = None

    def problem(self, score: Any, session_value: Any = None, cell_value: Any = None,
                record: Optional[dict] = None) -> Optional[str]:
        """Why ``score`` (with the session and cell values it adds, and its per-interaction ``record``,
        checked against the Parquet column types the metric's info declares) is not a valid score,
        naming the field or column and the value (``None``: valid)."""
        t = type(score)
        kinds = self._score_kinds.get(t)
        if kinds is None:
            kinds = self._score_kinds[t] = (("tuple", _fields_of(t, self.ids)) if hasattr(t, "_fields") else _ANY)
            self._quick[t] = _passes(kinds)
        quick_session, quick_cell = self._quick_values
        if (self._quick[t](score) and quick_session(session_value) and quick_cell(cell_value)
                and (not record or not self._columns or (type(record) is dict and all(
                    test(record.get(column)) for column, test in self._quick_columns)))):
            return None
        found = _problem(score, kinds)
        if found is not None:
            return f"score field {found[0] or 'value'!r} is {found[1]}"
        if getattr(self.spec, "session_value", None) is not None:
            found = _problem(session_value, self._session_kind)
            if found is not None:
                return f"{_join('session value', found)[0]} is {found[1]}"
        if getattr(self.spec, "cell_value", None) is not None:
            found = _problem(cell_value, self._cell_kind)
            if found is not None:
                return f"{_join('cell value', found)[0]} is {found[1]}"
        if record and self._columns and isinstance(record, abc.Mapping):
            for column, (kind, typ) in self._columns.items():
                found = _problem(record.get(column), kind)
                if found is not None:
                    return (f"record column {_join(column, found)[0]!r} is {found[1]} "
                            f"(the metric's info declares the Parquet column {column!r} {typ})")
        return None
