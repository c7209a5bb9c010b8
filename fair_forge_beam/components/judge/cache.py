"""Persistent content-addressed cache of judge answers (SQLite).

The key is a SHA-256 over the canonical JSON of everything that determines an answer — the
endpoint (:func:`endpoint_identity`: scheme, host, port and path, never credentials) with the
model name, the messages, the sampling parameters, the output schema's JSON Schema and the sample
index — so a re-run or a resumed run asks the endpoint only for what is missing, and two servers
that serve different weights under one model name never share answers (issue 28: keyed by the
model name alone, a run against a second server reused the first one's answers, and two runs at
once on one cache mixed both judges' scores). Only validated answers are
stored; errors never are.

Several worker processes may share one file on a local disk: WAL journal (readers never block
the writer), a busy timeout, and one short autocommit statement per read or write. Network file
systems do not support WAL; give each machine its own file there.

A cache whose disk fills (SQLite's 'database or disk is full', or its disk I/O error) is dropped
for the rest of the worker process with one warning: the answers already received are kept and
scored, later ones are asked for and not stored (decision, issue 28 B3: the cache only saves
calls; it never costs a run its answers). docs/reliability.md.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
from pathlib import Path
from urllib.parse import urlsplit
from typing import Any, Mapping, Optional, Sequence
from fair_forge_beam.arguments import checks_arguments

__all__ = ["SQLiteJudgeCache", "cache_key", "endpoint_identity", "default_cache_path", "storage_failure", "DEFAULT_CACHE",
           "CACHE_ENV", "NO_CACHE", "cache_choice"]

_log = logging.getLogger(__name__)

DEFAULT_CACHE = "default"
"""Sentinel for the default cache location (see :func:`default_cache_path`)."""

#: a cache option's value that means no cache, in every command (``--judge-cache none``,
#: ``--generator-cache none``, ``--assistant-cache none``): every call is made again, nothing is stored
NO_CACHE = "none"


def cache_choice(value: Optional[str], default: Optional[str] = DEFAULT_CACHE) -> Optional[str]:
    """The ``cache_path`` a cache option's ``value`` gives a handler: :data:`NO_CACHE` → ``None`` (no
    cache), not given (``None`` or ``""``) → ``default`` (:data:`DEFAULT_CACHE`: the user cache folder,
    :func:`default_cache_path`; ``None`` for an option whose default is no cache), any other value → that
    path. The one reading of the three options (a file named ``none`` was created where ``optimize``
    alone read ``none`` as no cache)."""
    if value == NO_CACHE:
        return None
    return value or default


CACHE_ENV = "FAIR_FORGE_JUDGE_CACHE"
_KEY_VERSION = 3  # 3: the endpoint in the key; 2: strict verdict rule, data fences, logprobs kept (older answers are not reused)
#: where an OpenAI client sends requests when it is given no base URL (the client's own default)
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def default_cache_path() -> str:
    """``$FAIR_FORGE_JUDGE_CACHE`` if set, else ``$XDG_CACHE_HOME/fair_forge_beam/judge-cache.sqlite3``
    (``~/.cache`` when ``XDG_CACHE_HOME`` is unset). Resolved on the worker."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fair_forge_beam", "judge-cache.sqlite3")


def endpoint_identity(model: str, base_url: Optional[str]) -> str:
    """The endpoint and model part of a cache key: ``"<scheme>://<host>:<port><path>|<model>"``.

    ``base_url`` None is where the OpenAI client sends requests without one (``$OPENAI_BASE_URL``,
    else :data:`OPENAI_DEFAULT_BASE_URL`). Scheme and host are lower-cased, the scheme's default
    port is written out and a trailing ``/`` dropped, so spellings of one endpoint share answers;
    ``user:password@`` and the query string are left out (credentials never enter a key, and a key
    rotated in a query keeps the cache). Raises ``ValueError`` for a URL without a host or with a
    port out of range (the options check URLs before a run, ``options._url``)."""
    url = base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_BASE_URL
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if not host:
        raise ValueError(f"endpoint URL has no host: {url!r}")
    port = parts.port or _DEFAULT_PORTS.get(scheme)
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}:{port}{parts.path.rstrip('/')}|{model}"


def cache_key(
    model: str,
    messages: Sequence[Sequence[str]],
    params: Optional[Mapping[str, Any]],
    schema: Optional[Mapping[str, Any]],
    sample_index: int,
) -> str:
    """64-hex-digit SHA-256 of the canonical JSON (sorted keys, no whitespace, UTF-8) of
    ``[version, model, [[role, content], …], params, schema JSON, sample_index]``. ``model`` is
    what identifies the answering model: :func:`endpoint_identity` for an endpoint's model (a
    bare model name would let two servers share answers)."""
    doc = [_KEY_VERSION, model, [[r, c] for r, c in messages], dict(params or {}), schema, int(sample_index)]
    blob = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def storage_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite saying its disk failed: full (``SQLITE_FULL``: 'database or disk
    is full', also a quota or ``ulimit -f``) or an I/O error (``SQLITE_IOERR``, which ENOSPC on the
    WAL's files becomes)."""
    if not isinstance(exc, sqlite3.Error):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return (code & 0xFF) in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR)
    text = str(exc)
    return "database or disk is full" in text or "disk I/O error" in text


class SQLiteJudgeCache:
    """Key → JSON answer record, in one SQLite file (created with its folder if missing).

    Thread-safe: each thread gets its own connection. ``get`` returns None for a missing or
    unreadable record; ``put`` keeps the first record stored for a key (a concurrent duplicate
    is ignored, so every reader sees one answer per key). Raises ``sqlite3.Error`` when the
    file cannot be opened or written, except when its disk fails (:func:`storage_failure`): the
    cache is then off for this object (``off`` holds the reason), with one warning, and ``get``
    finds nothing, ``put`` stores nothing.
    """

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, path: str, timeout_s: float = 30.0):
        self.path = str(path)
        self.timeout_s = float(timeout_s)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns: list[sqlite3.Connection] = []
        self.off: Optional[str] = None
        try:
            self._conn()  # open now: a bad path fails at setup, not at the first element
        except sqlite3.Error as exc:
            if not storage_failure(exc):
                raise
            self._turn_off(exc)

    def _turn_off(self, exc: BaseException) -> None:
        with self._lock:
            first, self.off = self.off is None, self.off or str(exc)
        if first:
            _log.warning("answer cache %s: %s; going on without it (answers received are kept; the next ones are "
                         "asked for and not stored)", self.path.encode("utf-8", "backslashreplace").decode("utf-8"), exc)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout={int(self.timeout_s * 1000)}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL DEFAULT (julianday('now')))")
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    def get(self, key: str) -> Optional[dict]:
        if self.off is not None:
            return None
        try:
            row = self._conn().execute("SELECT value FROM answers WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:
            if not storage_failure(exc):
                raise
            self._turn_off(exc)
            return None
        if row is None:
            return None
        try:
            value = json.loads(row[0])
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        blob = json.dumps(dict(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        if self.off is not None:
            return
        try:
            self._conn().execute("INSERT OR IGNORE INTO answers (key, value) VALUES (?, ?)", (key, blob))
        except sqlite3.Error as exc:  # a full disk: the answer is still returned to the caller and scored
            if not storage_failure(exc):
                raise
            self._turn_off(exc)

    def __contains__(self, key: str) -> bool:
        return self._conn().execute("SELECT 1 FROM answers WHERE key = ?", (key,)).fetchone() is not None

    def __len__(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def delete(self, keys: Sequence[str]) -> int:
        """Remove records; returns how many existed."""
        conn = self._conn()
        n = 0
        for k in keys:
            n += conn.execute("DELETE FROM answers WHERE key = ?", (k,)).rowcount
        return n

    def close(self) -> None:
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            try:
                c.close()
            except sqlite3.Error:
                pass
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"SQLiteJudgeCache({self.path!r})"
