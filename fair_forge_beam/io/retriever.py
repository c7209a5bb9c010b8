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
from typing import Any, Iterator, Mapping, Optional, Sequence, Union

from fair_forge_beam.schemas.common import Dataset, IterationLevel, StreamedBatch

__all__ = ["Retriever", "Keywords", "checked_dataset", "declared_keywords_problem", "unread_keywords_problem"]


class Keywords(dict):
    """A retriever's keyword arguments (``self.kwargs``) that remember which keys were asked for
    (``[key]``, ``get``, ``in``, ``pop``, ``setdefault``; every key when the whole mapping is read:
    iteration, ``keys``/``items``/``values``, ``copy``, ``**`` unpacking, ``dict(...)``), so that a
    keyword nobody reads is refused instead of being dropped without a word (trial36 T1:
    ``Humanity.run(R, statistcal_mode=...)`` ran in the default mode)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.asked: set = set()

    def _all(self):
        self.asked.update(dict.keys(self))

    def copy(self):
        self._all()
        return dict(dict.items(self))

    def __reduce__(self):
        self._all()
        return (dict, (dict(dict.items(self)),))

    def unread(self) -> list:
        """The keys given that nobody asked for, in the order given."""
        return [k for k in dict.keys(self) if k not in self.asked]


def _asking(name: str, whole: bool):
    """``dict.<name>`` that first records what it reads: every key (``whole``) or its key argument."""
    base = getattr(dict, name)

    def method(self, *args):
        if whole:
            self._all()
        else:
            self.asked.add(args[0])
        return base(self, *args)

    method.__name__ = method.__qualname__ = name
    return method


for _name, _whole in (("__getitem__", False), ("get", False), ("__contains__", False), ("pop", False),
                      ("setdefault", False), ("__iter__", True), ("keys", True), ("items", True), ("values", True)):
    setattr(Keywords, _name, _asking(_name, _whole))


class Retriever(ABC):
    """Base class of user data loaders. Subclasses implement :meth:`load_dataset`.

    Keyword arguments are kept as ``self.kwargs``; each must be read (``self.kwargs["n"]``,
    ``self.kwargs.get("n", 50)``) while the data are loaded: one that the retriever never asks for
    stops the run naming it (:func:`unread_keywords_problem`). A subclass that declares its keywords
    in its own ``__init__`` has them checked by Python, before any pipeline."""

    def __init__(self, **kwargs: Any):
        self.kwargs = Keywords(kwargs)

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


def _keywords_named(keys: Sequence[Any], valid: Sequence[str], hints: Optional[Mapping[str, str]]) -> list[str]:
    """Each of ``keys`` quoted, with its hint (``hints``) or else the nearest of ``valid``: ``'pth' (did you mean 'path'?)``."""
    from fair_forge_beam.quoting import closest

    out = []
    for k in keys:
        near = closest(str(k), valid)
        hint = (hints or {}).get(k) or (f"did you mean {near!r}?" if near is not None else "")
        out.append(f"{k!r}" + (f" ({hint})" if hint else ""))
    return out


def unread_keywords_problem(retriever: Any, hints: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """One line naming the keyword arguments ``retriever`` (a :class:`Retriever` whose data were
    loaded) never asked for, or ``None``: ``ListRetriever never read the keyword argument given to
    it: 'm' (did you mean 'n'?) (it asked for 'n'); ...``. ``hints``: a text per keyword to
    add (``Humanity.run``: the metric's keyword it is nearest to)."""
    kwargs = getattr(retriever, "kwargs", None)
    if not isinstance(kwargs, Keywords):
        return None  # a subclass that keeps its keywords its own way
    unread = kwargs.unread()
    if not unread:
        return None
    name = type(retriever).__name__
    asked = sorted(str(k) for k in kwargs.asked)
    parts = _keywords_named(unread, asked, hints)
    return (f"{name} never read the keyword argument{'s' if len(unread) > 1 else ''} given to it: {'; '.join(parts)} "
            f"({'it asked for ' + ', '.join(repr(a) for a in asked) if asked else 'it asked for none'}); a keyword "
            f"nobody reads is not dropped without a word: drop it, correct its spelling, or read it in "
            f"{name}.load_dataset() (self.kwargs)")


def declared_keywords_problem(retriever_cls: type, kwargs: Mapping[str, Any],
                              hints: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """For a retriever that declares its keywords (its ``__init__`` takes no ``**kwargs``): one line
    naming a keyword in ``kwargs`` it does not take, with the nearest it does, or one it requires that
    is missing; checked before any pipeline (on a worker Python would say it in a traceback).
    ``None`` when they fit, or when the retriever takes ``**kwargs`` (then
    :func:`unread_keywords_problem` checks, once its data are loaded)."""
    import inspect

    try:
        sig = inspect.signature(retriever_cls)
    except (TypeError, ValueError):
        return None
    params = sig.parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    named = [n for n, p in params.items() if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                          inspect.Parameter.KEYWORD_ONLY)]
    unknown = [k for k in kwargs if k not in named]
    name = retriever_cls.__name__
    if unknown:
        return (f"{name} takes no keyword argument {', '.join(_keywords_named(unknown, named, hints))}; its keywords: "
                f"{', '.join(repr(n) for n in named) or 'none'}")
    try:
        sig.bind(**kwargs)
    except TypeError as exc:
        return f"{name}: {exc}"
    return None
