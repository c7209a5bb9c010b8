"""The ``Retriever`` interface: user data loaders (spec §2).

A retriever is constructed with keyword arguments (stored as ``self.kwargs``) and returns its
data from :meth:`Retriever.load_dataset`:

| ``iteration_level``   | ``load_dataset()`` returns                       |
|-----------------------|--------------------------------------------------|
| ``FULL_DATASET``      | a list of ``Dataset`` (not an iterator)          |
| ``STREAM_SESSIONS``   | an iterator (e.g. a generator) of ``Dataset``    |
| ``STREAM_BATCHES``    | an iterator of ``StreamedBatch``                 |

Items may be pydantic objects or plain dicts of the same shape. In a pipeline the retriever is
instantiated and iterated on one worker (a Python iterator cannot be split); its records are
then redistributed (``Reshuffle``) for scoring. Define retrievers in an importable module, not
in ``__main__``, when running on several worker processes.
"""
from __future__ import annotations

import collections.abc
from abc import ABC, abstractmethod
from typing import Any, Iterator, Union

from fair_forge_beam.schemas.common import Dataset, IterationLevel, StreamedBatch

__all__ = ["Retriever", "checked_dataset"]


class Retriever(ABC):
    """Base class of user data loaders. Subclasses implement :meth:`load_dataset`."""

    def __init__(self, **kwargs: Any):
        self.kwargs = kwargs

    @property
    def iteration_level(self) -> IterationLevel:
        """How :meth:`load_dataset` yields data; default ``FULL_DATASET``."""
        return IterationLevel.FULL_DATASET

    @abstractmethod
    def load_dataset(self) -> Union[list[Dataset], Iterator[Dataset], Iterator[StreamedBatch]]:
        """Return the data (see the module docstring for the shape per level)."""


def _returned(data: Any) -> str:
    """What ``load_dataset()`` returned, in a few words: ``a dict (keys 'session_id', 'assistant_id', …)``."""
    from pydantic import BaseModel

    if isinstance(data, collections.abc.Mapping):
        keys = [str(k) for k in list(data)[:5]]
        more = ", …" if len(data) > 5 else ""
        return f"a {type(data).__name__} (keys {', '.join(repr(k) for k in keys)}{more})" if keys else f"an empty {type(data).__name__}"
    if isinstance(data, BaseModel):
        return f"one {type(data).__name__} object"
    return f"a {type(data).__name__}"


def checked_dataset(retriever_cls: type, level: IterationLevel, data: Any, any_iterable: bool = False) -> Any:
    """``data``, what ``retriever_cls().load_dataset()`` returned, when it has the shape its
    ``iteration_level`` promises (the module's table): records are iterated from it. One session
    (a dict, a ``Dataset``), a text, bytes or a number would be iterated as its keys, fields or
    characters, each then a bad record (trial36 T7: a dict gave 5 "invalid JSON" dead letters, one
    per key). ``any_iterable``: an iterator is accepted at every level (the streaming reader, which
    claims positions of whatever it iterates).

    Raises:
        ValueError: ``<Retriever>.load_dataset() returned a dict (keys …), not a list of sessions: …``.
    """
    from pydantic import BaseModel

    name = f"{retriever_cls.__name__}.load_dataset()"
    expected = {IterationLevel.FULL_DATASET: "a list of sessions (Dataset objects or dicts)",
                IterationLevel.STREAM_SESSIONS: "an iterator of sessions (Dataset objects or dicts)",
                IterationLevel.STREAM_BATCHES: "an iterator of StreamedBatch objects or dicts"}[level]
    one = (collections.abc.Mapping, str, bytes, bytearray, BaseModel)
    if isinstance(data, one) or not isinstance(data, collections.abc.Iterable):
        hint = (": return [session] for one session" if isinstance(data, (collections.abc.Mapping, BaseModel))
                and level != IterationLevel.STREAM_BATCHES else "")
        raise ValueError(f"{name} returned {_returned(data)}, not {expected} (iteration_level "
                         f"{level.name}){hint}")
    if level == IterationLevel.FULL_DATASET and not any_iterable and isinstance(data, collections.abc.Iterator):
        raise ValueError(
            f"{name} returned an iterator but iteration_level is "
            "FULL_DATASET: return a list, or set iteration_level to STREAM_SESSIONS / STREAM_BATCHES"
        )
    return data
