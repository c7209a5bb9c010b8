"""One copy per worker process of each heavy resource, keyed by the component's configuration.

Heavy resources (the sentence-transformers model, the VADER analyzer, the HurtLex and NRC
tables and indexes, group prototype embeddings) are obtained through :func:`acquire`, which is
built on :class:`apache_beam.utils.shared.Shared` (DESIGN §1): every ``DoFn`` instance and every
thread of one worker process that asks for the same key gets **the same object**, loaded once.
Before this helper each ``DoFn`` instance loaded its own copy: a Regulatory run loaded
all-MiniLM-L6-v2 three times (measured; each further copy added ~52 MB of RSS, peak RSS of the run
1.27 GB, now 1.23 GB with one copy). Most of a model run's memory is the libraries themselves:
importing torch and sentence-transformers alone takes ~870 MB of RSS.

Keys
----
A key is a hashable tuple whose first item names the kind of resource, e.g.
``("sentence-transformers", "/path/to/model", "cpu")``. It must describe everything the loaded
object depends on and nothing it does not (an embedder's batch size does not change the
weights, so two embedders that differ only in batch size share one model). Components build
their key with ``shared_key()``; one that returns ``None`` (custom subclasses, by default)
is not shared and loads its own copy, as before. :func:`content_key` turns in-memory content
(a user's dictionary lexicon) into a short digest; :func:`file_key` identifies a file by its
absolute path, size and modification time (so an edited file is loaded again).

Lifetime
--------
``Shared`` keeps a *weak* reference to each loaded object (plus a strong one to the object
acquired last), so a caller must keep the returned object: components store it on themselves
(dropped when pickled, acquired again on the worker). When no ``DoFn`` holds it any longer it
is freed. Loaded objects must therefore be weak-referenceable: class instances and numpy arrays
are; plain ``dict`` is not — wrap it in :class:`SharedDict`.

Thread safety: :func:`acquire` itself is thread-safe (a second thread asking for a key while
the first is loading it waits for that load and gets the same object). Whether *using* the
object from several threads is safe is the component's business; the sentence-transformers
model is not thread-safe and is guarded by a lock that travels with it (see
:class:`~fair_forge_beam.components.embedder.SentenceTransformerEmbedder`).
"""
from __future__ import annotations

import hashlib
import os
import pickle
import threading
import weakref
from typing import Any, Callable, Hashable, Optional, TypeVar

from fair_forge_beam.quoting import quoted

__all__ = ["acquire", "SharedDict", "Transient", "content_key", "file_key"]

T = TypeVar("T")

_HANDLES: dict = {}
_HANDLES_LOCK = threading.Lock()


class SharedDict(dict):
    """A ``dict`` that can be weakly referenced (plain ``dict`` cannot), for :func:`acquire`."""

    __slots__ = ("__weakref__",)


class Transient:
    """Base of a component whose loaded resources stay behind when it is pickled: the attributes
    named in ``_transient`` are ``None`` in the pickled state (loaded again on the worker), the
    others are copied as they are."""

    _transient: tuple[str, ...] = ()

    def __getstate__(self):
        return {**self.__dict__, **dict.fromkeys(self._transient)}


def _handle(key: Hashable):
    with _HANDLES_LOCK:
        h = _HANDLES.get(key)
        if h is None:
            from fair_forge_beam._beam import beam  # noqa: F401 - the logging-safe first Beam import
            from apache_beam.utils.shared import Shared

            h = _HANDLES[key] = Shared()
        return h


def acquire(key: Hashable, loader: Callable[[], T]) -> T:
    """The process-wide object for ``key``, built by ``loader()`` on first use.

    Args:
        key: hashable description of the resource's configuration; a tuple whose first item
            names the kind of resource (see the module docstring).
        loader: no-argument callable returning the loaded resource (weak-referenceable).
            Called at most once per key while the object is alive, under ``Shared``'s
            per-key lock (concurrent callers wait and get the same object).

    Returns:
        The same object for every caller in this process that passes an equal ``key`` while
        any caller still holds it.

    Raises:
        TypeError: ``key`` is not hashable; the loaded object cannot be weakly referenced.
        ValueError: ``loader`` returned ``None``.
        Exception: whatever ``loader`` raises (nothing is cached then; the next call retries).
    """
    try:
        hash(key)
    except TypeError as exc:
        raise TypeError(f"shared resource key must be hashable, got {quoted(key)}") from exc

    def construct():
        obj = loader()
        if obj is None:
            raise ValueError(f"the loader of shared resource {quoted(key)} returned None")
        try:
            weakref.ref(obj)
        except TypeError as exc:
            raise TypeError(
                f"shared resource {quoted(key)}: a {type(obj).__name__} cannot be weakly referenced "
                "(wrap a dict in SharedDict, or hold the value in a small class instance)"
            ) from exc
        return obj

    return _handle(key).acquire(construct)


def content_key(value: Any) -> Optional[str]:
    """SHA-256 hex digest of ``pickle.dumps(value, protocol=4)``, or ``None`` if it cannot be pickled.

    Used for resources built from in-memory content (dictionary lexicons): equal content built
    the same way gives the same digest; different content never shares (collision-free in
    practice). Content that pickles differently (e.g. another insertion order) is simply not shared.
    """
    try:
        data = pickle.dumps(value, protocol=4)
    except Exception:  # noqa: BLE001 - unpicklable content: do not share
        return None
    return hashlib.sha256(data).hexdigest()


def file_key(path: Any) -> Optional[tuple[str, int, int]]:
    """``(absolute path, size in bytes, mtime in ns)`` of a file, or ``None`` if it cannot be stat-ed
    (the component then loads unshared and reports the error itself)."""
    try:
        p = os.path.abspath(os.fspath(path))
        st = os.stat(p)
    except (OSError, TypeError, ValueError):
        return None
    return (p, int(st.st_size), int(st.st_mtime_ns))
