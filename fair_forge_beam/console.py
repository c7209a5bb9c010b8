"""What a command prints can never fail its run (issue 28, hostile trial 3).

A console that cannot show a character (``PYTHONIOENCODING=ascii``, a C locale) shows it escaped
(``b\\xf8t-\\u2713``), and a console that is gone (stdout a closed pipe or ``/dev/full``) is
dropped: :func:`safe_streams` at every entry point, :func:`say` for every line a command prints.
The failures a user did not cause by the run's own code — Ctrl-C (:func:`interruption`), the
machine's storage or limits (:func:`environment_failure`), an output folder that cannot be created
(:class:`OutputFolderError`) — are one line each (:func:`guarded`). This module imports nothing of
the package, so that any layer (the readers' progress, the output folder) may use it.
"""
from __future__ import annotations

import errno
import io
import os
import re
import sys
from typing import Any, Callable, Optional, TextIO

__all__ = ["OutputFolderError", "entry_point", "environment_failure", "guarded", "interruption", "safe_streams", "say"]


class OutputFolderError(ValueError):
    """The output folder (or its stage) could not be created once the checks passed (an ``OSError``
    of ``os.makedirs``): a one-line usage error, exit code 2, before any pipeline runs."""


#: what the machine, not the run, ran out of or refused: a full disk or quota, a read-only file
#: system, a file size limit (``ulimit -f``: EFBIG), the open-file limits of the process or the
#: system (``ulimit -n``: EMFILE, ENFILE) and a failing device (EIO). The run's own errors keep
#: their traceback.
_ENVIRONMENT_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EMFILE, errno.ENFILE, errno.EIO)
#: what to do about each, said after the errno's text
_ENVIRONMENT_HINTS = {errno.EFBIG: "the file size limit, ulimit -f", errno.EMFILE: "the open-file limit, ulimit -n",
                      errno.ENFILE: "the system's open-file limit"}


def _chain(exc: BaseException):
    """``exc`` and every exception of its causes and contexts, each once (depth first)."""
    seen, todo = set(), [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [e.__cause__, e.__context__]


def environment_failure(exc: BaseException) -> Optional[str]:
    """One line for a run that stopped because its machine's storage failed — no space left, a
    quota exceeded, a read-only file system — found in ``exc``, its causes and contexts, or the
    text a Beam runner wraps a worker's ``OSError`` in (``RuntimeError: OSError: [Errno 28] …
    [while running 'WriteParquet/…']``); None for any other failure."""
    for e in _chain(exc):
        if isinstance(e, OSError) and e.errno in _ENVIRONMENT_ERRNOS:
            where = f" ({e.filename})" if e.filename else ""
            hint = f" ({_ENVIRONMENT_HINTS[e.errno]})" if e.errno in _ENVIRONMENT_HINTS else ""
            return f"{os.strerror(e.errno)}{hint}{where}"
        for m in re.finditer(r"\[Errno (\d+)\]", str(e)):
            if int(m.group(1)) in _ENVIRONMENT_ERRNOS:
                step = re.search(r"\[while running '([^']*)'\]", str(e))
                code = int(m.group(1))
                hint = f" ({_ENVIRONMENT_HINTS[code]})" if code in _ENVIRONMENT_HINTS else ""
                return os.strerror(code) + hint + (f" (in the pipeline's step {step.group(1)})" if step else "")
    return None


def interruption(exc: BaseException) -> bool:
    """Whether ``exc`` is Ctrl-C: a ``KeyboardInterrupt``, in its causes and contexts, or the
    ``RuntimeError('KeyboardInterrupt [while running ...]')`` a Beam runner re-raises it as when it
    reached a worker's step."""
    return any(isinstance(e, KeyboardInterrupt) or str(e).startswith("KeyboardInterrupt") for e in _chain(exc))


def safe_streams() -> None:
    """Make ``sys.stdout`` and ``sys.stderr`` escape what their encoding cannot show
    (``errors='backslashreplace'``) instead of raising ``UnicodeEncodeError``. Called first by
    every console entry point (the audit and its subcommands, explain, generate, loop, optimize,
    run_assistant); a stream that cannot be reconfigured (a test's capture) is left as it is."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None:
            continue
        try:
            reconfigure(errors="backslashreplace")
        except (ValueError, OSError, io.UnsupportedOperation):
            pass


def say(*parts: Any, file: Optional[TextIO] = None, sep: str = " ") -> None:
    """``print(*parts, file=file, flush=True)`` that never raises: a character the stream cannot
    encode is written escaped, and a stream that fails (``EPIPE``, ``ENOSPC`` on a redirected
    stdout, a closed file) is silenced for the rest of the process (its descriptor then points at
    ``/dev/null``, so that the interpreter's last flush does not fail either)."""
    stream = sys.stdout if file is None else file
    text = sep.join(str(p) for p in parts)
    try:
        try:
            print(text, file=stream, flush=True)
        except UnicodeEncodeError:  # a stream not reconfigured by safe_streams
            encoding = getattr(stream, "encoding", None) or "ascii"
            print(text.encode(encoding, "backslashreplace").decode(encoding), file=stream, flush=True)
    except (OSError, ValueError):
        _silence(stream)


def _silence(stream: TextIO) -> None:
    try:
        fd = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)
        stream.flush()  # what was buffered goes to /dev/null
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass


def guarded(run_command, command: str, prog: str = "fair-forge-beam") -> int:
    """``run_command()``'s exit code, with the failures a user did not cause by the run's own code
    as one line on stderr, never a traceback (docs/reliability.md, docs/cli.md): Ctrl-C (``KeyboardInterrupt``:
    'interrupted', exit code 130; the stage is removed, so the output folder is as it was, like
    SIGTERM's), an output folder that cannot be created (``OutputFolderError``: exit code 2) and
    the machine's storage or limits failing (:func:`environment_failure`:
    exit code 1). Any other exception is re-raised."""
    try:
        return run_command()
    except OutputFolderError as exc:
        say(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except BaseException as exc:  # noqa: BLE001 - Ctrl-C, a full disk, a read-only file system: one line
        if isinstance(exc, SystemExit) or not isinstance(exc, Exception) and not isinstance(exc, KeyboardInterrupt):
            raise
        if interruption(exc):  # Ctrl-C, also as Beam re-raises it from a worker's step
            say(f"{prog}: interrupted: the {command} stopped (Ctrl-C); an output folder not yet replaced is as it "
                "was", file=sys.stderr)
            return 130
        why = environment_failure(exc)
        if why is None:
            raise
        say(f"{prog}: error: the {command} stopped: {why}; nothing was published (the output folder, "
            "if any, is as it was)", file=sys.stderr)
        return 1


def entry_point(main: Callable[[], int], command: str, prog: Optional[str] = None) -> int:
    """A ``python -m pipelines.<command>`` entry point: :func:`safe_streams`, then ``main()``
    under :func:`guarded`."""
    safe_streams()
    return guarded(main, command, prog or f"fair-forge-beam {command}")
