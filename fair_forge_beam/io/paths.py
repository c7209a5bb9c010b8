"""Whether an output path is apart from what a command reads: never one of its inputs, never inside
one, and (for a folder replaced whole) never holding one — by real path, and for a glob pattern by
what it could match. Used by every command's output check
(:mod:`fair_forge_beam.reports.output_folder`) and by the converters' own outputs."""
from __future__ import annotations

import fnmatch
import os
import stat
import sys
from typing import Any, Optional, Sequence

from fair_forge_beam.quoting import quoted
from fair_forge_beam.plain import folder_path

__all__ = ["check_apart", "check_output_file", "same_folder"]


def _is_local(path: str) -> bool:
    from fair_forge_beam._beam import beam  # noqa: F401 - guarded Beam import first
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.io.localfilesystem import LocalFileSystem

    return isinstance(FileSystems.get_filesystem(path), LocalFileSystem)


def same_folder(path: str) -> str:
    """A folder's identity: a local folder's real path, a URL without its trailing slashes."""
    path = folder_path(path)
    return path if "://" in path else os.path.realpath(path)


def _components(path: str) -> list:
    return [p for p in path.split("/") if p]


def _pattern_reaches(pattern: str, folder: str) -> Optional[bool]:
    """Whether the local glob ``pattern`` can match the absolute path ``folder`` (``False``: the folder
    itself) or a path under it (``True``), whatever exists today; ``None``: neither. Component by
    component as a glob matches (``*``, ``?``, ``[…]`` within one name, ``**`` any number of names)."""

    pat, parts = _components(pattern), _components(folder)
    seen: dict = {}

    def reach(i: int, j: int) -> Optional[bool]:
        if (i, j) in seen:
            return seen[i, j]
        if j == len(parts):
            got = True if i < len(pat) and pat[i:] != ["**"] else False
        elif i == len(pat):
            got = None
        elif pat[i] == "**":
            found = {reach(i + 1, j), reach(i, j + 1)} - {None}  # "**" as no name, or as one more
            got = False if False in found else (True if found else None)
        else:
            got = reach(i + 1, j + 1) if fnmatch.fnmatchcase(parts[j], pat[i]) else None
        seen[i, j] = got
        return got

    return reach(0, 0)


def _pattern_forms(pattern: str) -> list:
    """A local glob pattern made absolute, as typed and with its leading folders (those without a
    wildcard) resolved through symbolic links."""
    import glob

    absolute = os.path.abspath(os.path.expanduser(pattern))
    parts = absolute.split("/")
    fixed = next((k for k, p in enumerate(parts) if glob.has_magic(p)), len(parts))
    resolved = os.path.realpath("/".join(parts[:fixed]) or "/") + ("/" + "/".join(parts[fixed:]) if fixed < len(parts) else "")
    return list(dict.fromkeys([absolute, resolved]))


def check_apart(out: str, reads: Sequence[str], may_hold_reads: bool, option: str) -> None:
    """``out`` is not one of ``reads``, not inside one and (unless ``may_hold_reads``) holds none. A
    read given as a local glob pattern is refused when it can match ``out`` or (unless
    ``may_hold_reads``) a path under it, whether or not ``out`` exists yet: the first run into
    ``out`` and every later one (which would read the earlier run's outputs) are refused alike."""
    import glob

    target = same_folder(out)
    folders = list(dict.fromkeys([os.path.abspath(out), target])) if "://" not in out else []
    for read in reads:
        for path in (sorted(glob.glob(read)) if "://" not in read and glob.has_magic(read) else [read]):
            if "://" not in path and not os.path.lexists(path):
                continue  # not a local file (a topic, a broker): nothing of it can be overwritten
            src = same_folder(path)
            if target == src:
                raise ValueError(f"{option} {out} is {path}, which this command reads: write elsewhere (nothing was "
                                 "touched)")
            if target.startswith(src.rstrip("/") + "/"):
                raise ValueError(f"{option} {out} is inside {path}, which this command reads: write elsewhere "
                                 "(nothing was touched)")
            if not may_hold_reads and src.startswith(target.rstrip("/") + "/"):
                raise ValueError(f"{option} {out} holds {path}, which this command reads, and would be replaced "
                                 "whole: write elsewhere (nothing was touched)")
    for read in reads:  # what a pattern could match once the output exists (the files found today: above)
        if "://" in read or not glob.has_magic(read):
            continue
        for form in _pattern_forms(read):
            for folder in folders:
                under = _pattern_reaches(form, folder)
                if under is False or (under and not may_hold_reads):
                    where = "the output folder itself" if under is False else "files inside it"
                    raise ValueError(f"{option} {out}: the pattern {quoted(read)}, which this command reads, can match "
                                     f"{where} (every later run would read this one's outputs): narrow the "
                                     "pattern (e.g. '*.jsonl') or write elsewhere (nothing was touched)")


def is_standard_output(path: Any) -> bool:
    """Whether the output path ``path`` means this process's standard output: ``-``, or a local path
    that is the same file as it (``/dev/stdout``, ``/dev/fd/1`` — a pipe, a terminal, a redirected
    file; trial39 T13: ``compare --json -`` wrote a file named ``-`` and ``--json /dev/stdout`` was
    refused as a FIFO when stdout was a pipe)."""
    if path == "-":
        return True
    if not isinstance(path, str) or not path.startswith("/dev/"):
        return False
    try:
        return os.path.samestat(os.stat(path), os.fstat(sys.stdout.fileno()))
    except (OSError, ValueError, AttributeError):  # no such device, or a stdout that is no file (a test's capture)
        return False


def write_text_output(path: str, text: str) -> None:
    """Write ``text`` (UTF-8) to the output file ``path``, whole or not at all
    (:func:`~fair_forge_beam.io.write.replace_files`: the machine's failure is an
    :class:`~fair_forge_beam.console.OutputWriteError` naming the file), or to standard output when
    ``path`` means it (:func:`is_standard_output`)."""
    if is_standard_output(path):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from fair_forge_beam.io.write import replace_files

    replace_files([(path, text)])


def check_output_file(output: str, reads: Sequence[str] = (), option: str = "--output", stdout: bool = True) -> str:
    """Check, before anything is read or written, that the output FILE ``output`` (``compare --json``,
    the converter's output) is none of ``reads`` and lies inside none of them (a run folder it reads,
    its ``results.json``, an input file), compared by real path as :func:`~fair_forge_beam.reports.output_folder.check_output_folder` does;
    returns it unchanged. Standard output (``-``, ``/dev/stdout``: :func:`is_standard_output`) passes
    where the command writes text there (``stdout``), and is refused elsewhere (a Parquet file).

    Raises:
        ValueError: a one-line message for a usage error (exit code 2 in every command).
    """
    from fair_forge_beam.plain import path_name_problem

    if is_standard_output(output):
        if stdout:
            return output
        raise ValueError(f"{option} {output}: standard output is not a file this option can write: name a file")
    problem = (f"{option} is empty: name the file to write" if isinstance(output, str) and not output.strip()
               else path_name_problem(output, option))
    if problem:
        raise ValueError(problem)
    if _is_local(output) and os.path.isdir(output):
        raise ValueError(f"{option} must be a file, but {output} is a folder")
    if _is_local(output) and os.path.exists(output) and not stat.S_ISREG(os.stat(output).st_mode):
        from fair_forge_beam.io.edge import file_kind  # writing into a FIFO waits for a reader forever

        raise ValueError(f"{option} must be a regular file, but {output} is {file_kind(os.stat(output).st_mode)}")
    check_apart(output, reads, True, option)
    return output
