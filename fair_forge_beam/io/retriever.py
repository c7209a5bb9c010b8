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

from abc import ABC, abstractmethod
from typing import Any, Iterator, Union

from fair_forge_beam.schemas.common import Dataset, IterationLevel, StreamedBatch

__all__ = ["Retriever"]


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
