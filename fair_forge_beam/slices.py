"""Slice keys: the dimensions a result can be sliced by, the finest cell of a record and the
rules for a metadata dimension's name. Pure Python (no Beam): the options table and the config
reader use it as well as the engine.

A cell is the tuple ``(assistant_id, language, *metadata values)`` (:func:`cell_fields`); a slice
key is ``"overall"`` or ``"<field>=<value>"``. A name in ``slices`` other than ``overall``,
``assistant_id`` and ``language`` is a session metadata field (:func:`metadata_dimensions`).
"""
from __future__ import annotations

import re
from typing import Sequence

from fair_forge_beam.quoting import quoted

__all__ = ["CORE_SLICE_FIELDS", "SLICE_DIMENSIONS", "MISSING_VALUE", "NOT_SLICE_FIELDS", "metadata_dimensions",
           "metadata_values", "cell_fields", "slice_name_problems"]

#: slice dimensions every interaction has (DESIGN §5); any other name in ``slices`` is a session
#: metadata field
CORE_SLICE_FIELDS = ("assistant_id", "language")
#: the default slice dimensions: ``overall`` and :data:`CORE_SLICE_FIELDS`
SLICE_DIMENSIONS = ("overall", *CORE_SLICE_FIELDS)


def metadata_dimensions(slices: Sequence[str]) -> tuple:
    """The metadata fields among ``slices`` (names other than ``overall`` and
    :data:`CORE_SLICE_FIELDS`), in order: the session header fields the reader keeps in
    ``Interaction.slice_values``."""
    return tuple(s for s in slices if s != "overall" and s not in CORE_SLICE_FIELDS)


def metadata_values(x, dims: Sequence[str]) -> tuple:
    """The values of the metadata fields ``dims`` of interaction ``x``, in that order, looked up
    by name in ``x.slice_values`` (``((field, value), …)`` from the reader); ``None`` for a field
    the record does not carry or the reader was not asked to keep."""
    found = dict(x.slice_values or ())
    return tuple(found.get(d) for d in dims)


def cell_fields(slices: Sequence[str]) -> tuple:
    """The fields of a finest slice cell: ``("assistant_id", "language", *metadata dimensions)``."""
    return CORE_SLICE_FIELDS + metadata_dimensions(slices)


#: the value of a metadata slice field that a session does not carry
MISSING_VALUE = "(missing)"


#: names that cannot be metadata slice fields: per-interaction fields, the session id (a slice per
#: session), free text, the record's own structure and the result records' own keys
NOT_SLICE_FIELDS = frozenset({
    "session_id", "context", "conversation", "batch", "metadata", "element_id", "turn_index", "qa_id", "query",
    "assistant", "ground_truth_assistant", "observation", "weight", "agentic", "ground_truth_agentic", "logprobs",
    "spans", "slice", "level", "metric",
})
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")


def slice_name_problems(slices: Sequence[str]) -> list:
    """Why the names in ``slices`` cannot be slice dimensions (empty list: they all can).
    :data:`SLICE_DIMENSIONS` are built in; any other name is a session metadata
    field and must be a field name (letters, digits, ``_ . -``; at most 64), not in
    :data:`NOT_SLICE_FIELDS`, and not a near miss of a built-in (``langauge``)."""
    from fair_forge_beam.quoting import closest

    problems = []
    for d in dict.fromkeys(slices):
        if d in SLICE_DIMENSIONS:
            continue
        # a near miss is refused (any other name may be a metadata field): a stricter cutoff than a hint's
        hit = closest(d, SLICE_DIMENSIONS, cutoff=0.8)
        close = [hit] if hit is not None else []
        if not isinstance(d, str) or not _FIELD_NAME.fullmatch(d):
            problems.append(f"{quoted(d)} is not a field name (letters, digits, _ . -; at most 64)")
        elif d in NOT_SLICE_FIELDS:
            problems.append(f"{quoted(d)} is not a session metadata field")
        elif close:
            problems.append(f"{quoted(d)} looks like a misspelt {quoted(close[0])}")
    return problems
