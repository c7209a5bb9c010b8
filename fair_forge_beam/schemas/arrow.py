"""Arrow (Parquet) fields derived from the pydantic result schemas, so the per-interaction
Parquet columns are declared once: by the metric's result model.

Type mapping (the model field's annotation → pyarrow):
``float`` → ``float64``, ``int`` → ``int64``, ``bool`` → ``bool_``, ``str`` and ``Literal`` of
strings → ``string``, ``list[X]`` → ``list_(X)``, a nested pydantic model → ``struct`` of its
fields (in declaration order), ``Optional[X]`` → ``X`` nullable. Anything else (``dict``,
``tuple``, ``Any``) has no column type here and raises :class:`TypeError`.
"""
from __future__ import annotations

import types
import typing
from typing import Iterable, Optional, Sequence

import pyarrow as pa
from pydantic import BaseModel

__all__ = ["arrow_type", "arrow_fields", "union_fields"]

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
        TypeError: an annotation without a column type (``dict``, ``tuple``, ``Any``, a union).
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
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return pa.struct(arrow_fields(annotation, all_nullable=all_nullable))
    raise TypeError(f"no Arrow column type for the annotation {annotation!r}")


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
    for name in (list(fields) if names is None else names):
        if name not in fields:
            raise KeyError(f"{model.__name__} has no field {name!r}")
        annotation = fields[name].annotation
        _, optional = _unwrap_optional(annotation)
        out.append(pa.field(prefix + name, arrow_type(annotation, all_nullable), nullable=all_nullable or optional))
    return out


def union_fields(parts: Iterable[tuple[type[BaseModel], Sequence[str], str]]) -> list[pa.Field]:
    """Fields of several ``(model, names, prefix)`` parts, all nullable, concatenated in order."""
    return [f for model, names, prefix in parts for f in arrow_fields(model, names, prefix, all_nullable=True)]
