"""Arrow (Parquet) fields derived from the pydantic result schemas, so the per-interaction
Parquet columns are declared once: by the metric's result model.

Type mapping (the model field's annotation → pyarrow):
``float`` → ``float64``, ``int`` → ``int64``, ``bool`` → ``bool_``, ``str`` and ``Literal`` of
strings → ``string``, ``list[X]`` → ``list_(X)``, a nested pydantic model → ``struct`` of its
fields (in declaration order), ``dict[K, V]`` → ``map_(K, V)``, ``Optional[X]`` → ``X`` nullable.
Anything else (bare ``dict``, ``tuple``, ``Any``) has no column type here and raises :class:`TypeError`.
"""
from __future__ import annotations

import types
import typing
from typing import Iterable, Optional, Sequence

import pyarrow as pa
from pydantic import BaseModel

from fair_forge_beam.quoting import quoted

__all__ = ["arrow_type", "arrow_fields", "union_fields", "value_type", "from_arrow_value", "from_arrow_array"]

_SCALARS = {float: pa.float64(), int: pa.int64(), bool: pa.bool_(), str: pa.string()}


def _unwrap_optional(annotation) -> tuple[object, bool]:
    """``(X, True)`` for ``Optional[X]`` / ``X | None``, ``(annotation, False)`` otherwise."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(args) < len(typing.get_args(annotation)):
            return args[0], True
    return annotation, False


def arrow_type(annotation, all_nullable: bool = False) -> pa.DataType:
    """The pyarrow type of a pydantic field annotation (mapping in the module docstring).

    Args:
        annotation: the field's annotation (``Model.model_fields[name].annotation``).
        all_nullable: struct children of nested models are all nullable (else only ``Optional`` ones).

    Raises:
        TypeError: an annotation without a column type (bare ``dict``, ``tuple``, ``Any``, a union).
    """
    annotation, _ = _unwrap_optional(annotation)
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        if all(isinstance(v, str) for v in typing.get_args(annotation)):
            return pa.string()
    elif origin is list:
        (item,) = typing.get_args(annotation)
        return pa.list_(arrow_type(item, all_nullable))
    elif origin is dict and len(typing.get_args(annotation)) == 2:
        key, item = typing.get_args(annotation)
        return pa.map_(arrow_type(key, all_nullable), arrow_type(item, all_nullable))
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return pa.struct(arrow_fields(annotation, all_nullable=all_nullable))
    raise TypeError(f"no Arrow column type for the annotation {quoted(annotation)}")


def arrow_fields(model: type[BaseModel], names: Optional[Sequence[str]] = None, prefix: str = "",
                 all_nullable: bool = False) -> list[pa.Field]:
    """Arrow fields of ``model``'s fields ``names`` (default: all, in declaration order).

    Args:
        model: a pydantic model class.
        names: the model fields to map, in the order wanted.
        prefix: put before each column name (``"toxicity_"`` + ``total_words``).
        all_nullable: every field nullable, nested ones included (a union table where rows of
            other metrics leave the column empty); else nullable = ``Optional`` in the model.

    Raises:
        KeyError: a name that is not a field of ``model``.
        TypeError: a field without a column type (see :func:`arrow_type`).
    """
    fields = model.model_fields
    out = []
    # a field declared ``json_schema_extra={"arrow": False}`` is results.json's only (Estimate.n_sessions)
    for name in ([n for n, f in fields.items() if (f.json_schema_extra or {}).get("arrow", True)]
                 if names is None else names):
        if name not in fields:
            raise KeyError(f"{model.__name__} has no field {quoted(name)}")
        annotation = fields[name].annotation
        _, optional = _unwrap_optional(annotation)
        out.append(pa.field(prefix + name, arrow_type(annotation, all_nullable), nullable=all_nullable or optional))
    return out


def union_fields(parts: Iterable[tuple[type[BaseModel], Sequence[str], str]]) -> list[pa.Field]:
    """Fields of several ``(model, names, prefix)`` parts, all nullable, concatenated in order."""
    return [f for model, names, prefix in parts for f in arrow_fields(model, names, prefix, all_nullable=True)]


# ---------------------------------------------------------------------------- stored values
def value_type(annotation) -> pa.DataType:
    """The pyarrow type of a *value* declaration — what a statistic's accumulator or a session
    value holds, stored as typed columns (:mod:`fair_forge_beam.io.session_stats`).

    Beyond :func:`arrow_type`'s scalars and ``Optional``: a ``typing.NamedTuple`` class → ``struct``
    of its annotated fields, in order (a value is a plain tuple read by position);
    ``tuple[X, ...]`` and ``list[X]`` → ``list_(X)``; ``dict[K, V]`` → ``map_(K, V)``; ``Any`` and
    bare ``tuple``/``dict`` have no type.

    Raises:
        TypeError: an annotation without a column type.
    """
    annotation, _ = _unwrap_optional(annotation)
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    if isinstance(annotation, type) and issubclass(annotation, tuple) and hasattr(annotation, "_fields"):
        hints = typing.get_type_hints(annotation)
        return pa.struct([pa.field(n, value_type(hints[n]), nullable=_unwrap_optional(hints[n])[1])
                          for n in annotation._fields])
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return pa.list_(value_type(args[0]))
    if origin is list and len(args) == 1:
        return pa.list_(value_type(args[0]))
    if origin is dict and len(args) == 2:
        return pa.map_(value_type(args[0]), value_type(args[1]))
    if origin is typing.Literal and all(isinstance(v, str) for v in args):
        return pa.string()
    raise TypeError(f"no stored column type for the annotation {quoted(annotation)}")


def from_arrow_value(value, t: pa.DataType):
    """A value of type ``t`` as ``pyarrow``'s ``to_pylist`` returns it → plain Python: a
    ``struct`` → a tuple (by field position), a ``list`` → a tuple, a ``map`` → a dict. (The other
    way needs nothing: ``pyarrow`` takes tuples for structs and dicts for maps.)"""
    if value is None:
        return None
    if pa.types.is_struct(t):
        return tuple(from_arrow_value(value[f.name], f.type) for f in t)
    if pa.types.is_map(t):
        return {from_arrow_value(k, t.key_type): from_arrow_value(v, t.item_type) for k, v in value}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return tuple(from_arrow_value(v, t.value_type) for v in value)
    return value


def from_arrow_array(array) -> list:
    """A whole Arrow column (``Array`` or ``ChunkedArray``) → one plain Python value per row, the
    same as :func:`from_arrow_value` of each row's ``to_pylist`` value (a ``struct`` → a tuple, a
    ``list`` → a tuple, a ``map`` → a dict, null → ``None``), but decoded column by column: each
    leaf column is converted once by ``pyarrow`` (``to_pylist``) and nested values are assembled by
    ``zip`` and slicing, not by a Python call per nested value (the roll-up reads every stored
    session accumulator this way)."""
    if isinstance(array, pa.ChunkedArray):
        return [v for chunk in array.chunks for v in from_arrow_array(chunk)]
    t = array.type
    if not (pa.types.is_struct(t) or pa.types.is_map(t) or pa.types.is_list(t) or pa.types.is_large_list(t)):
        return array.to_pylist()
    valid = array.is_valid().to_pylist() if array.null_count else None
    if pa.types.is_struct(t):
        children = [from_arrow_array(array.field(i)) for i in range(t.num_fields)]
        out = list(zip(*children)) if children else [()] * len(array)
    else:
        offsets = array.offsets.to_pylist()  # into .values (or .keys/.items), the array's own offset included
        if pa.types.is_map(t):
            keys, items = from_arrow_array(array.keys), from_arrow_array(array.items)
            out = [dict(zip(keys[a:b], items[a:b])) for a, b in zip(offsets, offsets[1:])]
        else:
            values = from_arrow_array(array.values)
            out = [tuple(values[a:b]) for a, b in zip(offsets, offsets[1:])]
    if valid is not None:
        out = [v if ok else None for v, ok in zip(out, valid)]
    return out
