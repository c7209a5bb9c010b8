"""An in-memory object store as a Beam filesystem (scheme ``memstore://``), for tests.

It behaves like Cloud Storage where it matters to the output folder: a flat namespace of objects
(no folders: ``mkdirs`` does nothing, listing a prefix is recursive), ``rename`` is a copy then a
delete of each object, and an object appears whole when its writer closes. Importing this module
registers the scheme in the process (Beam finds filesystems by subclass), so a pipeline on the
in-memory ``FnApiRunner`` can read and write ``memstore://bucket/...``::

    from fair_forge_beam.testing.object_store import MemoryObjectStore

    MemoryObjectStore.clear()
    audit.run([..., "--output", "memstore://bucket/audits/today"])
    MemoryObjectStore.keys("memstore://bucket/audits/today/")

Objects live in one class-level dict guarded by a lock (one process only: not for runners with
worker processes). ``MemoryObjectStore.on_write`` (a callable of the path, or ``None``) is called
before each object is stored, ``MemoryObjectStore.on_delete`` before each name given to ``delete`` is
deleted: a test can raise from either to cut a publication short.
"""
from __future__ import annotations

import io
import posixpath
import threading
import time
from typing import Callable, Optional

from fair_forge_beam._beam import beam  # noqa: F401 - guarded Beam import first
from apache_beam.io.filesystem import BeamIOError, CompressedFile, CompressionTypes, FileMetadata, FileSystem

__all__ = ["MemoryObjectStore", "SCHEME"]

SCHEME = "memstore"


class _Writer(io.BytesIO):
    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def close(self) -> None:
        if not self.closed:
            MemoryObjectStore.put(self.path, self.getvalue())
        super().close()


class MemoryObjectStore(FileSystem):
    """A Beam ``FileSystem`` over a dict of objects (see the module docstring)."""

    _objects: dict[str, tuple[bytes, float]] = {}
    _lock = threading.Lock()
    on_write: Optional[Callable[[str], None]] = None
    on_delete: Optional[Callable[[str], None]] = None

    # -------------------------------------------------------------- store helpers (tests)
    @classmethod
    def scheme(cls) -> str:
        return SCHEME

    @classmethod
    def clear(cls) -> None:
        with cls._lock:
            cls._objects.clear()
        cls.on_write = cls.on_delete = None

    @classmethod
    def put(cls, path: str, data: bytes) -> None:
        if cls.on_write is not None:
            cls.on_write(path)
        with cls._lock:
            cls._objects[path] = (bytes(data), time.time())

    @classmethod
    def get(cls, path: str) -> bytes:
        with cls._lock:
            return cls._objects[path][0]

    @classmethod
    def keys(cls, prefix: str = "") -> list[str]:
        with cls._lock:
            return sorted(k for k in cls._objects if k.startswith(prefix))

    @classmethod
    def snapshot(cls, prefix: str) -> dict[str, bytes]:
        with cls._lock:
            return {k: v[0] for k, v in cls._objects.items() if k.startswith(prefix)}

    # -------------------------------------------------------------- FileSystem
    def join(self, basepath: str, *paths: str) -> str:
        return posixpath.join(basepath, *paths)

    def split(self, path: str) -> tuple[str, str]:
        head, tail = posixpath.split(path)
        return head, tail

    def mkdirs(self, path: str) -> None:
        pass  # no folders

    def has_dirs(self) -> bool:
        return False

    def _list(self, dir_or_prefix: str):
        with self._lock:
            items = [(k, len(v[0]), v[1]) for k, v in self._objects.items() if k.startswith(dir_or_prefix)]
        for k, size, updated in sorted(items):
            yield FileMetadata(k, size, updated)

    def create(self, path, mime_type="application/octet-stream", compression_type=CompressionTypes.AUTO):
        raw = _Writer(path)
        compression = FileSystem._get_compression_type(path, compression_type)
        return raw if compression == CompressionTypes.UNCOMPRESSED else CompressedFile(raw, compression_type=compression)

    def open(self, path, mime_type="application/octet-stream", compression_type=CompressionTypes.AUTO):
        try:
            raw = io.BytesIO(self.get(path))
        except KeyError:
            raise BeamIOError(f"Not found: {path}") from None
        compression = FileSystem._get_compression_type(path, compression_type)
        return raw if compression == CompressionTypes.UNCOMPRESSED else CompressedFile(raw, compression_type=compression)

    def copy(self, source_file_names, destination_file_names):
        for src, dst in zip(source_file_names, destination_file_names):
            try:
                data = self.get(src)
            except KeyError:
                raise BeamIOError("Copy operation failed", {(src, dst): FileNotFoundError(src)}) from None
            self.put(dst, data)

    def rename(self, source_file_names, destination_file_names):
        self.copy(source_file_names, destination_file_names)  # an object store's rename: copy, then delete
        self.delete(list(source_file_names))

    def exists(self, path: str) -> bool:
        with self._lock:
            return path in self._objects

    def size(self, path: str) -> int:
        return len(self.get(path))

    def last_updated(self, path: str) -> float:
        with self._lock:
            return self._objects[path][1]

    def checksum(self, path: str) -> str:
        import hashlib

        return hashlib.md5(self.get(path)).hexdigest()

    def metadata(self, path: str) -> FileMetadata:
        with self._lock:
            data, updated = self._objects[path]
        return FileMetadata(path, len(data), updated)

    def delete(self, paths) -> None:
        """Objects by name; a name that is no object deletes every object under ``name/`` (as a
        folder delete does). :attr:`on_delete` is called with each name first."""
        hook = type(self).on_delete  # a function set on the class: not bound to the instance
        for p in paths:
            if hook is not None:
                hook(p)
            self.drop(p)

    @classmethod
    def drop(cls, p: str) -> None:
        """Delete object ``p``, or every object under ``p/`` (``delete``'s work, without :attr:`on_delete`)."""
        with cls._lock:
            if p in cls._objects:
                del cls._objects[p]
                return
            prefix = p if p.endswith("/") else p + "/"
            for k in [k for k in cls._objects if k.startswith(prefix)]:
                del cls._objects[k]

    def report_lineage(self, path, unused_lineage):
        pass
