"""Scrubbing secrets out of text we are about to keep (docs/reliability.md).

One function, :func:`scrub`, applied where endpoint text enters our records (the judge handler
scrubs every answer, reasoning, raw body, log-probability token and error with the key it sent)
and again by the writers of output files and of stdout (:func:`scrub_known`, which looks up the
keys named by :func:`register_secret_env`). A secret is replaced by ``***`` in its plain form and
in the forms it takes inside JSON text (``\\/`` and ``\\uXXXX`` escapes).
"""
from __future__ import annotations

import functools
import json
import os
import threading
from typing import Any, Iterable

__all__ = ["scrub", "scrub_known", "register_secret_env", "secret_envs", "MASK", "MIN_SECRET_LEN", "NAMES_ENV"]

MASK = "***"
#: shorter values are never treated as secrets (a 1-3 character placeholder would mask text)
MIN_SECRET_LEN = 8

_ENVS: set[str] = set()
_ENVS_SNAPSHOT: frozenset = frozenset()
_LOCK = threading.Lock()
#: environment variable listing the registered key-variable *names* (comma-separated), so that
#: worker processes started from this one know them too; it never holds a key
NAMES_ENV = "FAIR_FORGE_SECRET_ENVS"


@functools.lru_cache(maxsize=64)
def _forms(secrets: tuple) -> tuple:
    """Every form of every secret, longest first."""
    forms = set()
    for secret in secrets:
        forms |= {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=True)[1:-1], secret.replace("/", "\\/")}
    return tuple(sorted((f for f in forms if f), key=len, reverse=True))


def scrub(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` with every secret of ``secrets`` replaced by :data:`MASK`.

    ``value``: text, or a JSON-like structure (dicts, lists, tuples; keys and values are scrubbed,
    other types are returned as they are). Secrets shorter than :data:`MIN_SECRET_LEN` characters
    are ignored. Never raises for any input.
    """
    secs = tuple(sorted({s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LEN}))
    if not secs:
        return value
    forms = _forms(secs)

    def _do(v: Any) -> Any:
        if isinstance(v, str):
            for f in forms:
                if f in v:
                    v = v.replace(f, MASK)
            return v
        if isinstance(v, dict):
            return {_do(k): _do(x) for k, x in v.items()}
        if isinstance(v, list):
            return [_do(x) for x in v]
        if isinstance(v, tuple) and not hasattr(v, "_fields"):
            return tuple(_do(x) for x in v)
        if isinstance(v, tuple):  # a NamedTuple (e.g. a dead letter): same type, scrubbed fields
            return type(v)(*(_do(x) for x in v))
        return v

    return _do(value)


def register_secret_env(name: str) -> None:
    """Remember that the environment variable ``name`` holds a key (the name only, never the
    value); :func:`scrub_known` then masks its value. Empty names are ignored."""
    if name and "," not in str(name):
        with _LOCK:
            _ENVS.add(str(name))
            global _ENVS_SNAPSHOT
            _ENVS_SNAPSHOT = frozenset(_ENVS)
            names = set(filter(None, os.environ.get(NAMES_ENV, "").split(","))) | _ENVS
            os.environ[NAMES_ENV] = ",".join(sorted(names))


def secret_envs() -> frozenset:
    """The registered variable names (this process and :data:`NAMES_ENV`) plus ``OPENAI_API_KEY``."""
    return _names(_ENVS_SNAPSHOT, os.environ.get(NAMES_ENV, ""))


@functools.lru_cache(maxsize=16)
def _names(mine: frozenset, inherited: str) -> frozenset:
    return frozenset(mine | set(filter(None, inherited.split(","))) | {"OPENAI_API_KEY"})


def scrub_known(value: Any) -> Any:
    """:func:`scrub` with the current values of the registered key variables (read now, from
    this process's environment; never stored)."""
    env = os.environ
    return scrub(value, [v for v in (env.get(n) for n in secret_envs()) if v])
