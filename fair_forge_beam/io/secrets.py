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

__all__ = ["scrub", "scrub_known", "scrub_tokens", "register_secret_env", "secret_envs", "MASK", "MIN_SECRET_LEN",
           "NAMES_ENV"]

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

    ``value``: text, or a JSON-like structure (dicts, lists, tuples): values are scrubbed, never
    dict keys (a key is a field name: masking one would rename the field, issue 28), other types
    are returned as they are. Secrets shorter than :data:`MIN_SECRET_LEN` characters are ignored.
    Never raises for any input.
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
            return {k: _do(x) for k, x in v.items()}
        if isinstance(v, list):
            return [_do(x) for x in v]
        if isinstance(v, tuple) and not hasattr(v, "_fields"):
            return tuple(_do(x) for x in v)
        if isinstance(v, tuple):  # a NamedTuple (e.g. a dead letter): same type, scrubbed fields
            return type(v)(*(_do(x) for x in v))
        return v

    return _do(value)


def scrub_tokens(tokens: list, secrets: Iterable[str]) -> list:
    """``tokens`` (texts that are read in sequence, e.g. a reply's log-probability tokens) with
    every token that holds part of a secret replaced by :data:`MASK`, also when the secret is
    split across several tokens (each token alone shows only a piece of it). Same length, same
    order; tokens without a secret are returned as they are."""
    tokens = [str(t) for t in tokens]
    secs = tuple(sorted({s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LEN}))
    if not secs or not tokens:
        return tokens
    text = "".join(tokens)
    ends, at = [], 0
    for t in tokens:
        at += len(t)
        ends.append(at)
    hit = [False] * len(tokens)
    for form in _forms(secs):
        start = text.find(form)
        while start != -1:
            stop, first = start + len(form), 0
            while ends[first] <= start:
                first += 1
            i = first
            while i < len(tokens) and (ends[i] - len(tokens[i])) < stop:
                hit[i] = True
                i += 1
            start = text.find(form, start + 1)
    return [MASK if h else t for t, h in zip(tokens, hit)]


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
    """The registered variable names (this process and :data:`NAMES_ENV`): the key variables of
    the endpoints this run uses (a judge, guardian, generator or assistant registers its own when
    it is built). A run without an endpoint masks nothing (issue 28: ``OPENAI_API_KEY`` was
    masked in every run, and a field whose value equalled it lost its value)."""
    return _names(_ENVS_SNAPSHOT, os.environ.get(NAMES_ENV, ""))


@functools.lru_cache(maxsize=16)
def _names(mine: frozenset, inherited: str) -> frozenset:
    return frozenset(mine | set(filter(None, inherited.split(","))))


def scrub_known(value: Any) -> Any:
    """:func:`scrub` with the current values of the registered key variables (read now, from
    this process's environment; never stored)."""
    env = os.environ
    return scrub(value, [v for v in (env.get(n) for n in secret_envs()) if v])
