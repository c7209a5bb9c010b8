"""The command of Beam SDK workers in a ``PROCESS`` environment, and what they wrote to stderr.

A runner with ``--environment_type=PROCESS`` (our Flink cluster,
:mod:`fair_forge_beam.testing.flink_cluster`) starts each SDK worker through Beam's Python boot
binary, which runs ``python -m apache_beam.runners.worker.sdk_worker_main`` with ``python``
looked up on ``PATH``. :func:`write_worker_command` writes the command the runner is given:

* ``<folder>/beam-boot`` puts ``<folder>`` first on ``PATH`` and execs the boot binary;
* ``<folder>/python`` (and ``python3``) is a shell script that execs the launching
  interpreter **by the path it was started with** (``sys.executable``). Not a symlink, and not
  ``os.path.realpath(sys.executable)``: Python finds a venv's ``pyvenv.cfg`` beside the path it
  was run by, so a symlink in another folder, or the resolved base interpreter, runs as the base
  Python without the venv's packages, and every worker dies at ``import apache_beam``.
  The user's environment is the launcher's: a worker imports the package the launcher imported.
* the stderr of the boot binary and of every ``python`` it runs (pip, the SDK worker) goes to
  ``<folder>/stderr/<boot|python>-<start, epoch seconds>-<pid>.stderr``: Beam's Java process
  manager sends a worker's output to ``/dev/null``, so a worker that cannot start (a missing
  module, a broken install) failed a job with "Process died with exit code 1" and its own error
  in no log. :func:`worker_stderr` reads these files back, and
  :func:`fair_forge_beam.beam_pipeline.run_pipeline` adds them to the error of a failed job.

Beam's worker pool (``apache_beam.runners.worker.worker_pool_main``, the EXTERNAL environment
of :class:`fair_forge_beam.testing.beam_runners.WorkerPool`) also starts its workers as ``python``
from ``PATH``: the pool gets :func:`write_python_wrapper`'s folder first on its ``PATH``.
"""
from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Optional

from fair_forge_beam import procfs

__all__ = ["write_python_wrapper", "write_worker_command", "worker_stderr", "worker_stderr_texts", "stderr_files", "stderr_report", "worker_command_of",
           "STDERR_DIR", "BOOT_SCRIPT"]

#: the worker command's file name in its folder
BOOT_SCRIPT = "beam-boot"
#: the folder (beside the command) of the SDK workers' stderr files
STDERR_DIR = "stderr"
#: the module Beam's boot binary runs as the SDK worker (``python -m apache_beam.runners.worker.sdk_worker_main``)
_WORKER_MODULE = "apache_beam.runners.worker.sdk_worker_main"
#: marks a folder written by :func:`write_python_wrapper` (so stderr is only looked up there)
_MARK = ".fair_forge_beam_worker_command"


def write_python_wrapper(folder: os.PathLike, python: Optional[str] = None) -> Path:
    """Write ``<folder>/python`` and ``<folder>/python3``: shell scripts that ``exec`` ``python``
    (default ``sys.executable``, as it is: never resolved, see the module docstring), the stderr
    of each run in ``<folder>/stderr/python-<start>-<pid>.stderr``. Put ``folder`` first on the
    ``PATH`` of a program that runs ``python`` from ``PATH`` (Beam's boot binary, Beam's worker
    pool). Returns the ``python`` wrapper's path.

    Raises:
        ValueError: ``python`` is empty.
    """
    python = sys.executable if python is None else str(python)
    if not python:
        raise ValueError("no interpreter to run: sys.executable is empty (an embedded Python?)")
    folder = Path(folder)
    (folder / STDERR_DIR).mkdir(parents=True, exist_ok=True)
    py, err = shlex.quote(python), _stderr_file(folder, "python")
    wrapper = (
        "#!/bin/sh\n"
        "# The interpreter that wrote this command, by the path it was started with: a symlink to it\n"
        "# elsewhere, or its resolved base interpreter, would lose its venv (fair_forge_beam/process_workers.py).\n"
        "# Beam's boot binary asks pip, at every worker start, for the installed packages (a log line) and\n"
        "# whether apache-beam is installed: answered from importlib.metadata, without importing pip.\n"
        "# Only those exact argument lists (compared one by one) are answered; anything else is Python's.\n"
        "if [ $# -ge 3 ] && [ \"$1\" = -m ] && [ \"$2\" = pip ]; then\n"
        f"    if [ $# -eq 4 ] && [ \"$3\" = freeze ] && [ \"$4\" = --all ]; then exec {py} -c {shlex.quote(_PIP_FREEZE)} 2>>{err}; fi\n"
        f"    if [ $# -eq 4 ] && [ \"$3\" = show ]; then exec {py} -c {shlex.quote(_PIP_SHOW)} \"$4\" 2>>{err}; fi\n"
        "fi\n"
        "# The SDK worker the boot binary starts runs through the package's worker start: its stdout and stderr drop\n"
        "# what the machine refuses (ulimit -f on its stderr file: a failed bundle's traceback print raised, and the\n"
        "# bundle's answer was never sent; fair_forge_beam/sdk_worker.py)\n"
        f"if [ $# -eq 2 ] && [ \"$1\" = -m ] && [ \"$2\" = {_WORKER_MODULE} ]; then\n"
        f"    exec {py} -m fair_forge_beam.sdk_worker {_WORKER_MODULE} 2>>{err}\n"
        "fi\n"
        f"exec {py} \"$@\" 2>>{err}\n"
    )
    for name in ("python", "python3"):
        path = folder / name
        if path.is_symlink() or path.exists():
            path.unlink()
        path.write_text(wrapper, encoding="utf-8")
        path.chmod(0o755)
    (folder / _MARK).write_text(json.dumps({"python": python}, allow_nan=False), encoding="utf-8")
    return folder / "python"


#: what the ``python`` wrapper runs for the boot binary's ``python -m pip freeze --all`` (its log of the
#: worker's packages): the installed distributions as ``name==version``, one per line
_PIP_FREEZE = (
    "import importlib.metadata as m\n"
    "names = {f\"{d.metadata['Name']}=={d.version}\" for d in m.distributions() if d.metadata['Name']}\n"
    "print('# installed distributions (importlib.metadata; fair_forge_beam worker command, not pip)')\n"
    "print('\\n'.join(sorted(names, key=str.lower)))\n"
)
#: what it runs for ``python -m pip show NAME`` (the boot binary's check that Beam is installed: only
#: the exit status counts): exit 1 with pip's words when ``NAME`` is not installed
_PIP_SHOW = (
    "import importlib.metadata as m, sys\n"
    "try:\n"
    "    version = m.version(sys.argv[1])\n"
    "except m.PackageNotFoundError:\n"
    "    sys.exit(f'WARNING: Package(s) not found: {sys.argv[1]} (asked of importlib.metadata by the '\n"
    "             f'fair_forge_beam worker command, for {sys.executable})')\n"
    "print(f'Name: {sys.argv[1]}\\nVersion: {version}')\n"
)


def _stderr_file(folder: Path, kind: str) -> str:
    """Shell text of a process's own stderr file, named by its kind, start (epoch seconds) and pid."""
    return f'{shlex.quote(str(folder / STDERR_DIR))}/{kind}-"$(date +%s)-$$".stderr'


def write_worker_command(folder: os.PathLike, boot: os.PathLike, semi_persist_dir: os.PathLike,
                         python: Optional[str] = None) -> Path:
    """Write the worker command into ``folder`` (created) and return its path (``--environment_config
    '{"command": "<path>"}'``): ``beam-boot``, with the wrappers of :func:`write_python_wrapper`
    beside it and the boot binary's own stderr in ``stderr/boot-<start>-<pid>.stderr``.

    Args:
        folder: where ``beam-boot``, the ``python``/``python3`` wrappers and ``stderr/`` go.
        boot: Beam's Python boot binary.
        semi_persist_dir: the boot binary's ``--semi_persist_dir`` (staged artifacts).
        python: the interpreter the workers run; default ``sys.executable`` as it is.

    Raises:
        ValueError: ``python`` is empty.
    """
    folder = Path(folder)
    write_python_wrapper(folder, python)
    q = shlex.quote
    script = folder / BOOT_SCRIPT
    script.write_text(
        "#!/bin/sh\n"
        "# Beam's Python boot binary, with the wrappers of this folder first on PATH (the boot runs\n"
        "# \"python\" from PATH) and no per-worker virtualenv: workers run the launcher's environment.\n"
        f"PATH={q(str(folder))}:\"$PATH\"\n"
        "RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT=1\n"
        "export PATH RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT\n"
        f"exec {q(str(boot))} --semi_persist_dir={q(str(semi_persist_dir))} \"$@\" 2>>{_stderr_file(folder, 'boot')}\n",
        encoding="utf-8")
    script.chmod(0o755)
    return script


def worker_command_of(options) -> Optional[Path]:
    """The worker command of pipeline ``options`` (``PipelineOptions`` or a list of arguments) when
    it is one :func:`write_worker_command` wrote, else ``None``."""
    import fair_forge_beam._beam  # noqa: F401 - Beam's first import under the logging guard (case-006)

    if isinstance(options, (list, tuple)):
        from apache_beam.options.pipeline_options import PipelineOptions

        options = PipelineOptions(list(options))
    from apache_beam.options.pipeline_options import PortableOptions

    portable = options.view_as(PortableOptions)
    if (portable.environment_type or "").upper() != "PROCESS" or not portable.environment_config:
        return None
    try:
        command = json.loads(portable.environment_config).get("command")
    except (ValueError, AttributeError):
        return None
    if not command:
        return None
    path = Path(command)
    return path if (path.parent / _MARK).is_file() else None


_LINE = 400  # characters of one stderr line shown (the boot binary logs the job's options on one line)


def worker_stderr(options, since: float, max_files: int = 4, max_lines: int = 25) -> str:
    """:func:`stderr_report` of the folder of ``options``' worker command (``""`` when the command
    is not one of :func:`write_worker_command`)."""
    command = worker_command_of(options)
    return "" if command is None else stderr_report(command.parent, since, max_files, max_lines)


def worker_stderr_texts(options, since: float, max_files: int = 4, max_bytes: int = 65536) -> list:
    """The stderr of the worker processes of ``options``' worker command started since ``since``, as
    :func:`stderr_files` orders them: the last ``max_bytes`` of each file, whole lines (``[]`` when
    the command is not one of :func:`write_worker_command`). For naming a worker's exception
    (:func:`fair_forge_beam.beam_pipeline.last_words`), whose traceback can be longer than the
    lines :func:`stderr_report` shows (trial37b B1: a 38-line traceback lost its header)."""
    command = worker_command_of(options)
    texts = []
    for f in [] if command is None else stderr_files(command.parent, since)[0][:max_files]:
        try:
            with open(f, "rb") as fh:
                fh.seek(max(0, f.stat().st_size - max_bytes))
                text = fh.read().decode("utf-8", errors="replace")
        except OSError:
            continue
        texts.append(text if len(text) < max_bytes else text.split("\n", 1)[-1])
    return texts


def stderr_files(folder: os.PathLike, since: float) -> tuple:
    """``(files, folder)``: the non-empty stderr files of the processes run through ``folder``'s
    wrappers and started since ``since`` (a ``time.time()``), those of processes that have ended
    first (a worker that could not start), newest first; and the folder holding them."""
    errors = Path(folder) / STDERR_DIR
    found = []
    for f in errors.glob("*.stderr") if errors.is_dir() else ():
        try:
            _, started, pid = f.stem.rsplit("-", 2)
            started, pid = int(started), int(pid)
            size = f.stat().st_size
        except (ValueError, OSError):
            continue
        if size and started >= int(since) - 1:
            found.append((not procfs.alive(pid), started, f))
    return [f for _, _, f in sorted(found, reverse=True)], errors


def stderr_report(folder: os.PathLike, since: float, max_files: int = 4, max_lines: int = 25) -> str:
    """What the processes run through ``folder``'s wrappers (the boot binary and every ``python``
    it ran: pip, the SDK worker) and started since ``since`` (a ``time.time()``) wrote to stderr:
    the last ``max_lines`` lines (each cut at 400 characters) of at most ``max_files`` non-empty
    files (:func:`stderr_files`' order), each under a header naming it; ``""`` when there is none."""
    found, errors = stderr_files(folder, since)
    parts = []
    for f in found[:max_files]:
        lines = [ln if len(ln) <= _LINE else ln[:_LINE] + " …" for ln in
                 f.read_text(encoding="utf-8", errors="replace").splitlines()[-max_lines:]]
        parts.append(f"--- {f.name}\n" + "\n".join(lines))
    if not parts:
        return ""
    more = f"; {len(found) - max_files} more" if len(found) > max_files else ""
    return f"stderr of the worker processes the job started (in {errors}{more}):\n" + "\n".join(parts)
