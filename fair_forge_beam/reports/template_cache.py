"""The report pages' compiled templates, kept between processes: jinja2's own bytecode cache.

A process that renders a page compiles its template first (``report.html.j2``, 26 KB: 0.10-0.17 CPU s
of README's main job, issue 26). jinja2 can keep the compiled code in files
(:class:`jinja2.FileSystemBytecodeCache`, its documented extension point): a later process loads it
(about 1 ms) instead of compiling again, as Python keeps a module's bytecode in ``__pycache__``.
The files are in the user cache folder, ``$XDG_CACHE_HOME/fair_forge_beam/jinja2`` (``~/.cache``
when ``XDG_CACHE_HOME`` is unset), beside numba's cache (:mod:`~fair_forge_beam.components.clustering`);
never in the installed package, never in a run's output folder.

What decides that a file is used, so that a stale one never is:

* jinja2 keys a file by the template's name and path, and uses it only when it was compiled from the
  same source text (a SHA-1 of it) by the same bytecode format and Python version;
* the file name also holds a digest of what else the compiled code depends on (:func:`_settings_digest`):
  jinja2's version, the environment's syntax settings, and each filter's name and code (jinja2 checks
  a filter's existence while it compiles, and may call one on constant arguments).

A cache that cannot be used costs only the compilation: a folder that cannot be made, a file that
cannot be written or read is skipped without a word (the page is the same either way), and a file
jinja2 cannot read is compiled again by jinja2 itself.
"""
from __future__ import annotations

import hashlib
import marshal
import os
from typing import Any, Optional

__all__ = ["cache_folder", "use_bytecode_cache"]


def cache_folder() -> str:
    """``$XDG_CACHE_HOME/fair_forge_beam/jinja2``, or ``~/.cache/fair_forge_beam/jinja2``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fair_forge_beam", "jinja2")


def _settings_digest(env: Any) -> str:
    """What the compiled code of ``env``'s templates depends on besides their source text."""
    import jinja2

    settings = (jinja2.__version__, env.block_start_string, env.block_end_string, env.variable_start_string,
                env.variable_end_string, env.comment_start_string, env.comment_end_string,
                env.line_statement_prefix, env.line_comment_prefix, env.trim_blocks, env.lstrip_blocks,
                env.newline_sequence, env.keep_trailing_newline, repr(env.autoescape), env.optimized,
                tuple(sorted(env.extensions)), env.undefined.__qualname__, env.finalize is None)
    h = hashlib.sha256(repr(settings).encode("utf-8"))
    for name in sorted(env.filters):
        code = getattr(env.filters[name], "__code__", None)
        h.update(name.encode("utf-8"))
        h.update(marshal.dumps(code) if code is not None else repr(env.filters[name]).encode("utf-8"))
    return h.hexdigest()[:16]


def _bytecode_cache(folder: str, digest: str):
    from jinja2 import FileSystemBytecodeCache

    class _QuietCache(FileSystemBytecodeCache):
        """jinja2's file cache; a file it cannot read or write is compiled afresh, without a word."""

        def load_bytecode(self, bucket) -> None:
            try:
                super().load_bytecode(bucket)
            except OSError:
                bucket.reset()

        def dump_bytecode(self, bucket) -> None:
            try:
                super().dump_bytecode(bucket)
            except OSError:
                pass

    return _QuietCache(folder, pattern=f"__jinja2_%s_{digest}.cache")


def use_bytecode_cache(env: Any, folder: Optional[str] = None) -> bool:
    """Give ``env`` (a ``jinja2.Environment`` with its filters set) the file cache in ``folder``
    (default :func:`cache_folder`). Returns whether it has one (``False``: the folder could not be
    made; ``env`` then compiles in each process, as without this)."""
    folder = folder or cache_folder()
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError:
        return False
    env.bytecode_cache = _bytecode_cache(folder, _settings_digest(env))
    return True
