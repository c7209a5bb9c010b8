"""The main job's ``--output`` folder: what a run writes there, how a run publishes it without
ever destroying the last good run (:func:`staged_output`), how a reused folder is cleaned in place
(:func:`prepare_output_folder`, for streaming runs whose files appear as windows fire), and the files
the launcher writes after a local run (report, comparison). Works on every Beam filesystem.

Staging and publishing (docs/data.md, "What is atomic where")::

    with staged_output("audits/today") as stage:   # usage errors (a file, unwritable) raise ValueError here
        ...write every output into stage...          # an exception: the stage is removed, the folder untouched
    # normal exit: the stage is now audits/today, with the marker _SUCCESS written last

* **Local folders** (not a mount point): the stage is a sibling ``OUT.staging-<id>``; on success
  the user's own files of ``OUT`` (anything that is not one of ``owned``) are hard-linked into it and
  the two folders are exchanged in one ``renameat2(RENAME_EXCHANGE)`` system call (Linux); the
  previous content is deleted after that. A reader sees the old folder or the new one, never a mix.
  Where the exchange is not available, two ``rename`` calls (a moment without ``OUT``; a kill
  there is repaired by the next run).
* **Object stores** (``gs://``, any filesystem without folders) and local mount points (a folder
  cannot be renamed over a mount): the stage is written first (``OUT.staging-<id>``, inside ``OUT``
  as ``.staging-<id>`` for a mount point); publishing then removes ``OUT/_SUCCESS``, removes this
  layout's previous outputs, copies the stage object by object and writes ``OUT/_SUCCESS`` last.
  While it copies, a reader sees no marker; a run killed there is completed by the next run from
  the stage, which is kept complete until the marker is written.

A run killed while its pipeline runs (SIGKILL) leaves only its stage; the next run into the same
folder removes it (local: unless its run still holds the stage's lock, ``OUT.staging-<id>.lock``;
object stores: once it is :data:`STALE_STAGE_HOURS` old, as a running Dataflow job's stage looks
the same). Only a stage of ours is ever removed, completed or put back: one holding :data:`STAGE_OWNER_MARK`,
written the moment the stage is made (a user's ``OUT.staging-notes/`` is never touched). Beam's temporary folders (``beam-temp-*``, ``fileio``'s ``.temp*``) are never published.
"""
from __future__ import annotations

import contextlib
import errno
import fnmatch
import json
import logging
import os
import re
import shutil
import stat
import time
import uuid
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

from fair_forge_beam.reports.layout import OUTPUT_FILES, STAGE_MARK, run_id_of
from fair_forge_beam.console import OutputFolderError
from fair_forge_beam.plain import folder_path, plain_reason
from fair_forge_beam.quoting import quoted

__all__ = ["STALE_OUTPUTS", "OWNED_OUTPUTS", "MARKER", "KEPT_MARK", "TEMPORARY_PATTERNS", "RUN_MARKS", "check_no_other_run", "is_owned_name",
           "STALE_STAGE_HOURS", "check_cache_file", "check_output_folder", "output_option", "empty_output_problem", "staged_output", "new_stage_path",
           "publish_stage", "publish_after", "is_stage_path", "run_id_of", "clean_stale_stages", "prepare_output_folder",
           "finished_run_problem", "STAGE_OWNER_MARK", "mark_stage", "published_together"]

log = logging.getLogger(__name__)

#: outputs of other run kinds and older layouts: a run removes them from a reused --output folder
#: (gates.json of a gated run, a windowed run's windows/, the single-file layout, the driver's scratch parts)
STALE_OUTPUTS = ("gates.json", "dead_letter.jsonl", "data_quality.jsonl", "_parts", "windowed_results.json", "windows/")
#: the run's own folders (every owned name ending in ``/``) are replaced whole: a file found inside one
#: (a user's note, a stray ``.parquet`` in ``results.parquet/``, a killed run's partial shard) is not
#: kept, so ``pandas.read_parquet("OUT/results.parquet")`` reads this run's shards and nothing else.
#: A user's own files at the top level of the folder are kept (decision, docs/data.md).
#: written last into a published folder: its presence means the folder holds one complete run
MARKER = "_SUCCESS"
#: every name a run of the main job owns in its output folder (anything else there is the user's)
OWNED_OUTPUTS = OUTPUT_FILES + STALE_OUTPUTS + (MARKER,)
#: Beam's temporary files and folders (``FileBasedSink``: ``beam-temp-<name>-<uuid>``; ``fileio``: ``.temp<uuid>``)
TEMPORARY_PATTERNS = ("beam-temp-*", ".temp*")
#: which command's run a folder holds: the files each command's run leaves at the top of its output
#: folder, by which the folder is known to hold that run (the main job's: a batch audit's or a roll-up's
#: ``results.json``, a windowed audit's ``windowed_results.json``; the release loop's stages: their
#: summaries; the trend's ``trend.json``, explain's attribution shards, the optimizer's ``result.json``;
#: a name with ``*`` is a pattern). The one table every command's :func:`check_no_other_run` reads
RUN_MARKS = {"audit": ("results.json", "windowed_results.json"), "generate": ("generation_summary.json",),
             "run": ("run_summary.json",), "loop": ("loop_summary.json",), "trend": ("trend.json",),
             "explain": ("attributions-*-of-*.jsonl",), "optimize": ("result.json",)}
#: written into the stage an empty run keeps (:func:`staged_output`): its one-line reason; the stage is never published
KEPT_MARK = "_EMPTY_RUN"
#: object stores: an unfinished stage older than this is a killed run's and is removed by the next run
STALE_STAGE_HOURS = 24.0

#: bytes of path a run writes below its folder, at most (the main job's fileio ``.temp<uuid>/<hash>_<uuid>`` is
#: about 100, a ``WriteToText``'s ``<folder>/beam-temp-<name>-<uuid>/<uuid>`` about 130): a local output whose path
#: leaves less than this under PATH_MAX is a usage error
DEEPEST_PATH_BYTES = 256

_STAGE = STAGE_MARK
_PREVIOUS = ".previous-"
#: written into a stage the moment it is made, holding its id (``{"stage": "<id>"}``): what makes a folder named
#: ``OUT.staging-<id>`` (or ``OUT/.staging-<id>``, ``OUT.previous-<id>``) one of ours. A folder or file of such a name
#: without it — the user's ``OUT.staging-notes/``, a backup ``cp -a OUT OUT.staging-backup``, a file — is never
#: removed, renamed, published or locked (trial48c D: it was, by name alone). Never published: it is taken out
#: of the stage before the stage becomes ``OUT``, and left out of a copy
STAGE_OWNER_MARK = ".fair-forge-stage"
_STAGE_ID = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{8}")


def is_owned_name(name: str) -> bool:
    """Whether a file called ``name`` at the top of an output folder is one a run of ours writes there: the
    main job's (:data:`OWNED_OUTPUTS`) or a command's mark (:data:`RUN_MARKS`, patterns included). Any
    other name there is the user's own, kept by every command."""
    owned = {n.rstrip("/") for n in OWNED_OUTPUTS}
    return name in owned or any(fnmatch.fnmatchcase(name, m) for marks in RUN_MARKS.values() for m in marks)


def output_option(given: bool) -> str:
    """How a usage error names the output folder's option: ``--output`` when the user gave it, else
    ``the default --output`` (trial39b B10: ``trend '../r*'`` run inside a run folder was told
    "--output trend is inside ../r1" although no ``--output`` was given)."""
    return "--output" if given else "the default --output"


def check_no_other_run(out: str, command: str, option: str = "--output", shown: Optional[str] = None) -> None:
    """Refuse output folder ``out`` of ``command`` (a :data:`RUN_MARKS` name: ``audit``, ``generate``,
    ``run``, ``loop``, ``trend``, ``explain``, ``optimize``; a roll-up writes the audit's layout: ``audit``,
    ``shown`` ``rollup``; a command with no run of its own, ``compare`` writing its ``--json`` file into
    ``out`` under a name a run owns (:func:`is_owned_name`), is refused every run) when it holds another command's run (one of that command's marks at
    the top level). Each command replaces only the files of its own layout and keeps the rest as the user's
    own (docs/data.md), so the two runs' files would mix and the folder would no longer say which run
    it holds (trial37b B7: generate and the loop shared the default folder ``fair_forge_loop``; fix38a:
    the audit wrote beside a generate run's ``dataset.jsonl``, and the stages beside a windowed audit).

    A local ``out`` is looked at where it leads (its real path: ``o1/results.json/..`` is ``o1``, trial38b B14), and a
    mark counts only as a regular file (or a link to one). **Decision** (docs/data.md): a name of another
    command's mark that is not a regular file — a folder, a link to nothing, a link to a folder — is refused too,
    as content no run of ours wrote (it was read as that run, or, a dangling link, ignored).

    Raises:
        ValueError: one line naming the folder, the run it holds and what to do (a usage error, exit 2).
    """
    fs = _fs()
    local = _is_local(out)
    where = _target(out) if local else out
    for other, names in RUN_MARKS.items():
        for name in names if other != command else ():
            if local:
                found, odd = _local_mark(where, name)
            else:
                found = (fs.match([fs.join(out, name)])[0].metadata_list if "*" in name
                         else fs.exists(fs.join(out, name)))
                odd = None
            if odd:
                raise ValueError(f"{option}: {out} holds {quoted(odd[0], 80)}, {odd[1]}, where {other}'s run keeps a file "
                                 f"({name}): no run writes that; give another {option} or remove it")
            if found:
                raise ValueError(f"{option}: {out} holds a run of {other} ({name}), not of {shown or command}: the two runs' "
                                 f"files would mix; give another {option} or remove that run")


def _local_mark(folder: str, name: str) -> tuple:
    """``(found, odd)`` for mark ``name`` (a pattern with ``*``) in local ``folder``: ``found`` when a regular file
    (or a link to one) has that name; ``odd``: ``(entry name, what it is)`` of an entry of that name that is
    not one (``a folder``, ``a link to nothing``), else None."""
    import glob

    paths = glob.glob(os.path.join(glob.escape(folder), name)) if "*" in name else [os.path.join(folder, name)]
    found = False
    for path in paths:
        if os.path.isfile(path):
            found = True
        elif os.path.lexists(path):
            what = ("a link to nothing" if not os.path.exists(path) else
                    "a folder" if os.path.isdir(path) else "not a regular file")
            return found, (os.path.basename(path), what)
    return found, None


def is_stage_path(path: str) -> bool:
    """Whether ``path`` is a stage (or its lock) of a run being written or a killed run's, not a run."""
    return _STAGE in path.rstrip("/").rsplit("/", 1)[-1] or _PREVIOUS in path.rstrip("/").rsplit("/", 1)[-1]


# ----------------------------------------------------------------------------- filesystem helpers
def _fs():
    from fair_forge_beam._beam import beam  # noqa: F401 - guarded Beam import first
    from apache_beam.io.filesystems import FileSystems

    return FileSystems


def _is_local(path: str) -> bool:
    import fair_forge_beam._beam  # noqa: F401 - Beam's first import under the logging guard (case-006)
    from apache_beam.io.localfilesystem import LocalFileSystem

    return isinstance(_fs().get_filesystem(path), LocalFileSystem)


def _is_temporary(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in TEMPORARY_PATTERNS)


def _has_temporary_part(rel: str) -> bool:
    return any(_is_temporary(part) for part in rel.split("/"))


def _normalise(output: str) -> str:
    """Trailing slashes dropped; ``/`` stays the root (it became ``.``, the current folder):
    :func:`~fair_forge_beam.plain.folder_path`."""
    return folder_path(output)


def empty_output_problem(output: Any, option: str = "--output") -> Optional[str]:
    """The usage error of an empty output folder (``--output ''``, spaces only, an empty config
    value), or ``None``. An empty path was the current folder: a run there replaced the user's own
    ``stats/``, ``sessions/``, ``report.html`` … though the folder never held a run (issue 28,
    hostile-tester trial 3). Every command refuses it (:func:`check_output_folder`, and the
    ``--output`` option's declared check)."""
    if isinstance(output, str) and not output.strip():
        return f"{option} is empty: name the output folder (e.g. {option} ./out)"
    return None


def _target(out: str) -> str:
    """Where ``out`` is published: a local folder's real path (a symlinked folder is replaced at
    its target), any other URL as given."""
    return os.path.realpath(out) if _is_local(out) else out


def _stage_inside(target: str) -> bool:
    """A local mount point cannot be renamed over: its stage lives inside it."""
    return os.path.ismount(target)


def _stage_id() -> str:
    """``<UTC time>-<random>``: unique, and it says when the stage was started (its age)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


def _stage_age_hours(stage: str) -> Optional[float]:
    try:
        started = time.strptime(stage.rsplit(_STAGE, 1)[1][:16], "%Y%m%dT%H%M%SZ")
    except (IndexError, ValueError):
        return None
    import calendar

    return (time.time() - calendar.timegm(started)) / 3600.0


def unpublished_run_problem(folder: str, then: str) -> Optional[str]:
    """Why the run in ``folder``, of the layout that publishes (``stats/manifest.json``), is not one to
    read: it has no :data:`MARKER` (a run being published, or cut short, on an object store), or
    ``None``. One rule for every command that reads runs (``rollup``, ``trend``; trial39 T13: the trend
    read such a night, the roll-up refused it); ``then``: what to do once it is complete."""
    fs = _fs()
    try:
        if fs.exists(fs.join(folder, MARKER)) or not fs.exists(fs.join(folder, "stats", "manifest.json")):
            return None  # published, or a folder of an older layout (no stats/: never published with a marker)
    except Exception:  # noqa: BLE001 - a folder that cannot be looked at: its reader says why
        return None
    return f"{folder} has no {MARKER}: its run is being published or was cut short; {then} once it is complete"


def _read_marker(folder: str) -> Optional[str]:
    """The run id in ``<folder>/_SUCCESS`` (``None``: no marker)."""
    fs = _fs()
    path = fs.join(folder, MARKER)
    try:
        if not fs.exists(path):
            return None
        from fair_forge_beam.io.edge import read_all  # imported here: no Beam at module load

        with fs.open(path) as f:
            return str(json.loads(read_all(f).decode("utf-8") or "{}").get("run", ""))
    except (OSError, ValueError, AttributeError):
        return ""  # a marker of another tool, or unreadable: present, of no run of ours


def _write_marker(folder: str, run_id: str) -> None:
    with _fs().create(_fs().join(folder, MARKER)) as f:
        f.write((json.dumps({"run": run_id}, allow_nan=False) + "\n").encode("utf-8"))




def _list_files(folder: str) -> list[str]:
    """Every file (object) under ``folder``, recursively (local or object store)."""
    fs = _fs()
    if _is_local(folder):
        if not os.path.isdir(folder):
            return []
        return sorted(os.path.join(root, f) for root, _, files in os.walk(folder) for f in files)
    return sorted(m.path for m in fs.match([fs.join(folder, "**")])[0].metadata_list)


def _remove_tree(path: str) -> None:
    """Delete a stage of ours: a folder (local) or every object under a prefix (object store); missing is
    fine. Its :data:`STAGE_OWNER_MARK` goes last: a removal cut short leaves a stage still known as ours."""
    if _is_local(path):
        if os.path.isdir(path) and not os.path.islink(path):
            for entry in os.scandir(path):
                if entry.name != STAGE_OWNER_MARK:
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path)
                    else:
                        os.remove(entry.path)
            shutil.rmtree(path)
        return
    mark = _fs().join(path, STAGE_OWNER_MARK)
    files = [f for f in _list_files(path) if f != mark]
    if files:
        _fs().delete(files)
    if _fs().exists(mark):
        _fs().delete([mark])


def mark_stage(stage: str) -> None:
    """Write :data:`STAGE_OWNER_MARK` into ``stage`` (a local folder that exists, or an object store's
    prefix): the one proof that a folder of a stage's name is ours (:func:`_is_ours`)."""
    kind = _kind_of(stage)
    with _fs().create(_fs().join(stage, STAGE_OWNER_MARK)) as f:
        f.write((json.dumps({"stage": _id_of(stage, kind)}, allow_nan=False) + "\n").encode("utf-8"))


def _kind_of(path: str) -> str:
    """Which name a stage-like ``path`` has: :data:`_PREVIOUS` (a swap's previous folder) or a stage's."""
    return _PREVIOUS if _PREVIOUS in path.rstrip("/").rsplit("/", 1)[-1] else _STAGE


def _id_of(path: str, kind: str = _STAGE) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1].rsplit(kind, 1)[-1]


def _unmark(stage: str) -> None:
    """Take the mark out of ``stage`` (local) just before it is published as the output folder."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(stage, STAGE_OWNER_MARK))


def _is_ours(path: str, kind: str = _STAGE) -> bool:
    """Whether ``path``, named like a stage (``kind``: :data:`STAGE_MARK`, or ``.previous-`` for a swap's
    previous folder), is one a run of ours made: a folder (local: a real one, not a link) holding
    :data:`STAGE_OWNER_MARK` that names the id its name ends with. Anything else is the user's."""
    ident = _id_of(path, kind)
    if not _STAGE_ID.fullmatch(ident):
        return False
    mark = _fs().join(path.rstrip("/"), STAGE_OWNER_MARK)
    try:
        if _is_local(path):
            if os.path.islink(path) or not os.path.isdir(path) or not stat.S_ISREG(os.lstat(mark).st_mode):
                return False
            with open(mark, "rb") as f:
                text = f.read(1000)
        else:
            if not _fs().exists(mark):
                return False
            from fair_forge_beam.io.edge import read_all

            with _fs().open(mark) as f:
                text = read_all(f)[:1000]
        return json.loads(text.decode("utf-8")).get("stage") == ident
    except (OSError, ValueError, AttributeError):
        return False


def _left_unmarked(paths: Iterable[str]) -> None:
    """Say once per run which folders named like our stages (with a stage id) carry no mark: a stage of a version
    before the mark (2026-12, trial48c D) or not ours; never touched, as their content cannot be told from a user's."""
    for path in paths:
        if _STAGE_ID.fullmatch(_id_of(path, _kind_of(path))) \
                and not path.endswith(".lock") and path not in _WARNED:
            _WARNED.add(path)
            log.warning("left %s: named like a stage but without its mark %s (an earlier version's stage, or not a run's): "
                        "never removed by a run; remove it yourself if it is not yours", path, STAGE_OWNER_MARK)


_WARNED: set = set()


def _remove_temporaries(folder: str) -> None:
    """Remove Beam's temporary files and folders anywhere under ``folder``."""
    if _is_local(folder):
        for root, dirs, files in os.walk(folder):
            for d in [d for d in dirs if _is_temporary(d)]:
                shutil.rmtree(os.path.join(root, d), ignore_errors=True)
                dirs.remove(d)
            for f in files:
                if _is_temporary(f):
                    os.remove(os.path.join(root, f))
        return
    stale = [p for p in _list_files(folder) if _has_temporary_part(p[len(folder):].lstrip("/"))]
    if stale:
        _fs().delete(stale)


def _is_pattern(name: str) -> bool:
    """Whether an owned name is a pattern of file names (``*``, ``?``, ``[``: a command's shards at
    the top level of its folder, whose count may change from run to run)."""
    return any(c in name for c in "*?[")


def _remove_owned(out: str, owned: Iterable[str], fs=None) -> None:
    """Delete ``owned`` outputs in ``out`` — named files, and the run's own folders (names ending in
    ``/``) whole, whatever they hold — and Beam's temporaries anywhere under ``out``; a user's file at
    the top level stays. ``fs``: Beam's ``FileSystems`` (default) or a stand-in with
    ``exists``/``match``/``delete``."""
    fs = fs or _fs()
    stale = []
    for name in owned:
        path = f"{out}/{name.rstrip('/')}"
        if _is_pattern(name):  # a command's shards at the top level (explain's attributions-*-of-*.jsonl)
            stale += [m.path for r in fs.match([path]) for m in r.metadata_list
                      if fnmatch.fnmatchcase(m.path.rstrip("/").rsplit("/", 1)[-1], name)]
        elif name.endswith("/") and _is_local(out):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            elif os.path.lexists(path):
                os.remove(path)
        elif name.endswith("/"):
            stale += [m.path for r in fs.match([f"{path}/**"]) for m in r.metadata_list]
        elif fs.exists(path):
            stale.append(path)
    if stale:
        fs.delete(stale)
    _remove_temporaries(out)


# ----------------------------------------------------------------------------- usage checks
def check_output_folder(output: str, reads: Sequence[str] = (), staged: bool = True, may_hold_reads: bool = False,
                        option: str = "--output") -> str:
    """Check, before any pipeline runs, that ``output`` can receive a run; returns it normalised.
    The one place every command's output folder is validated (audit, rollup, trend, generate, ...).

    Local: ``output`` is a folder or missing (its missing parents are created later, with the
    stage), and both the folder and the place of its stage (the parent; the folder itself for a
    mount point) take a new entry: a read-only filesystem and missing permissions are refused, as
    the kernel answers ``access(2)``. Object stores: the URL names a folder inside a bucket (the
    stage is its sibling). The check writes nothing: a usage error found after it leaves every
    folder as it was, its modification time too.

    Args:
        output: folder path or URL (``gs://...``); trailing slashes are dropped; an empty one is a
            usage error (:func:`empty_output_problem`).
        reads: the files and folders the command reads (an audit's inputs, a roll-up's or trend's
            runs; local glob patterns are expanded): ``output`` may not be one of them, nor lie
            inside one, nor (unless ``may_hold_reads``) contain one — compared by real path, so a
            symlink, a trailing slash or a relative path reaches the same folder.
        staged: the command publishes ``output`` by a stage beside it (:func:`staged_output`); a
            command that writes a few files straight into the folder (``trend``) gives ``False``:
            only the folder itself (or, when missing, its parent) must take a new entry.
        may_hold_reads: ``output`` may be a parent of what is read (``trend --output .`` over
            ``audits/*``: it writes two files and replaces no folder).
        option: the option's name in messages.

    Raises:
        ValueError: a one-line message for a usage error (exit code 2 in every command).
    """
    from fair_forge_beam.plain import path_name_problem

    problem = empty_output_problem(output, option) or path_name_problem(output, option)
    if problem:  # a name that is not UTF-8 text (issue 28 B7), from a --config file or the environment too
        raise ValueError(problem)
    out = _normalise(output)
    if not _is_local(out):
        if staged and "/" not in out.partition("://")[2].strip("/"):
            raise ValueError(f"{option} {out}: give a folder inside the bucket (e.g. {out}/audits): a run is staged "
                             "beside its output folder")
        from fair_forge_beam.io.paths import check_apart  # here: the io package imports Beam (--version does not)

        check_apart(out, reads, may_hold_reads, option)
        return out
    try:  # any OSError of the check itself (a name too long, a loop of links, EACCES on a parent) is a usage error
        return _check_local_output(out, reads, staged, may_hold_reads, option)
    except OSError as exc:
        raise ValueError(_os_problem(option, out, exc)) from None


def _os_problem(option: str, out: str, exc: OSError) -> str:
    """The one-line usage error of an ``OSError`` met while checking or creating ``option``'s folder:
    the path (quoted: a 300-character or 5,000-character path is cut) and the errno's text."""
    why = os.strerror(exc.errno) if exc.errno else (exc.strerror or str(exc))
    return f"{option} {quoted(out)}: cannot create or write the folder: {why}"


def _name_problem(path: str) -> Optional[str]:
    """Why the local ``path`` (not yet created; a stage or lock name included) cannot be made:
    a component longer than the file system's NAME_MAX or the whole path longer than PATH_MAX
    (both asked of its nearest existing folder), else ``None``."""
    ancestor = os.path.dirname(os.path.abspath(path))
    while ancestor and not os.path.isdir(ancestor):
        parent = os.path.dirname(ancestor)
        if parent == ancestor:
            break
        ancestor = parent

    def limit(name: str, default: int) -> int:
        try:
            return os.pathconf(ancestor or "/", name)
        except (OSError, ValueError):
            return default

    name_max, path_max = limit("PC_NAME_MAX", 255), limit("PC_PATH_MAX", 4096)
    longest = max(len(os.fsencode(path)), len(os.fsencode(os.path.abspath(path)))) + DEEPEST_PATH_BYTES
    if longest >= path_max:
        return (f"{os.strerror(errno.ENAMETOOLONG)} (with its stage and the {DEEPEST_PATH_BYTES} bytes kept for the "
                f"files inside, the path is over the limit of {path_max - 1} bytes)")
    longest = max((len(os.fsencode(part)) for part in os.path.abspath(path).split(os.sep)), default=0)
    if longest > name_max:
        return f"{os.strerror(errno.ENAMETOOLONG)} (a name, with its stage suffix, is over {name_max} bytes)"
    return None


def _holds_current_folder(out: str, option: str) -> Optional[str]:
    """Why a command that publishes ``out`` whole (a stage exchanged with it) may not write there: ``out`` is the
    current folder or holds it, so the run would replace the folder the user's shell is in (trial48c A: after
    ``--output .`` the shell sat in a deleted folder, and the next run failed with a traceback). A mount point is
    published in place (its stage inside, copied): being in it is fine, not in a folder under it. ``None``: fine."""
    try:
        here = os.path.realpath(os.getcwd())
    except OSError:
        return None  # no current folder: nothing of it to replace
    target = os.path.realpath(out)
    inside = os.path.commonpath([here, target]) == target
    if not inside or (here == target and _stage_inside(target)):
        return None
    what = "is the current folder" if here == target else f"holds the current folder ({quoted(here, 80)})"
    return (f"{option} {quoted(out)} {what}: a run replaces its output folder whole, which would leave this shell in "
            f"a deleted folder; give a folder inside it (e.g. {option} ./out) or run from another folder")


def _check_local_output(out: str, reads: Sequence[str], staged: bool, may_hold_reads: bool, option: str) -> str:
    if os.path.realpath(out) == "/":  # every command alike (trial48 B3: trend --output / wrote into the current folder)
        raise ValueError(f"{option} {quoted(out)} is the root of the file system: give a folder for the outputs "
                         f"(e.g. {option} ./out)")
    if staged:
        problem = _holds_current_folder(out, option)
        if problem:
            raise ValueError(problem)
    # the longest path the run makes: its stage's lock file beside it (or inside a mount point)
    longest = (new_stage_path(out) + ".lock") if staged else os.path.join(out, "results.json")
    problem = _name_problem(longest)
    if problem:
        raise ValueError(f"{option} {quoted(out)}: cannot create the folder: {problem}")
    if os.path.lexists(out) and not os.path.isdir(out):
        if os.path.islink(out) and not os.path.exists(out):
            from fair_forge_beam.io.edge import broken_link

            problem = broken_link(out) or ""
            if " loop " in problem:  # a loop is no dangling link (trial 28h H13): the readers' wording of it
                raise ValueError(f"{option} must be a folder, but {problem}")
            raise ValueError(f"{option} must be a folder, but {out} is a symbolic link to {os.readlink(out)}, "
                             "which does not exist (a dangling link)")
        from fair_forge_beam.io.edge import file_kind

        raise ValueError(f"{option} must be a folder, but {out} is {file_kind(os.stat(out).st_mode)}")
    from fair_forge_beam.io.paths import check_apart  # here: the io package imports Beam (--version does not)

    check_apart(out, reads, may_hold_reads, option)
    target = os.path.realpath(out)
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):  # created with the stage, after every check passed
        ancestor = parent
        while not os.path.lexists(ancestor):
            ancestor = os.path.dirname(ancestor)
        problem = "Not a directory" if not os.path.isdir(ancestor) else _unwritable(ancestor)
        if problem:  # e.g. a parent of --output is a file
            raise ValueError(f"{option}: cannot create folder {out}: {problem}: {ancestor}")
        return out
    if staged:
        places = ([target] if os.path.isdir(target) else []) + ([target] if _stage_inside(target) else [parent])
    else:
        places = [target if os.path.isdir(target) else parent]
    for place in dict.fromkeys(places):
        problem = _unwritable(place)
        if problem:
            what = f"folder {out}" if place == target else f"the folder of {out} ({parent})"
            raise ValueError(f"{option}: cannot write in {what}: {problem}")
    return out


def check_cache_file(path: Optional[str], option: str) -> None:
    """Check, before any pipeline runs, that the local SQLite cache file ``path`` (a judge,
    generator or assistant cache; ``None``/``"none"``/``"default"`` resolved as the run resolves
    them) can be opened or created and, when it exists, is a cache store (empty, or an SQLite
    file holding the table ``answers``; see :func:`_not_a_cache`): a folder that cannot be made (``XDG_CACHE_HOME=/proc/x``, a
    parent that is a file, a name too long) or written in, or a file that is a folder, is a
    one-line usage error naming ``option`` and the path. Nothing is written: a missing file's
    folder is probed as the output's is (:func:`_unwritable`), an existing file is opened for
    appending and closed unchanged, its schema read through a read-only connection.

    Raises:
        ValueError: the one-line message (exit code 2 in every command).
    """
    from fair_forge_beam.components.judge.cache import DEFAULT_CACHE, default_cache_path

    if path in (None, "", "none"):
        return
    if path == DEFAULT_CACHE:
        path = default_cache_path()
    from fair_forge_beam.plain import path_name_problem

    bad_name = path_name_problem(path, option)
    if bad_name:  # e.g. XDG_CACHE_HOME or HOME holding bytes that are not UTF-8 (issue 28 B7)
        raise ValueError(bad_name)
    if not _is_local(path):
        return
    problem = _name_problem(path)
    try:
        if problem is None and os.path.isdir(path):
            problem = "it is a folder (give the path of a file)"
        elif problem is None and os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
            from fair_forge_beam.io.edge import file_kind  # a FIFO's open waited for a reader forever

            problem = f"it is {file_kind(os.stat(path).st_mode)}, not a regular file"
        elif problem is None and os.path.lexists(path):
            with open(path, "ab"):
                pass
            problem = _not_a_cache(path)
        elif problem is None:
            ancestor = os.path.dirname(os.path.abspath(path))
            while not os.path.lexists(ancestor):
                ancestor = os.path.dirname(ancestor)
            problem = os.strerror(errno.ENOTDIR) if not os.path.isdir(ancestor) else _unwritable(ancestor)
            if problem:
                problem += f": {quoted(ancestor)}"
    except OSError as exc:
        problem = os.strerror(exc.errno) if exc.errno else str(exc)
    if problem:
        raise ValueError(f"{option} {quoted(path)}: cannot use the cache file: {problem}")


_SQLITE_MAGIC = b"SQLite format 3\x00"
_CACHE_COLUMNS = {"key", "value"}


def _not_a_cache(path: str) -> Optional[str]:
    """Why the existing file ``path`` is not a cache store (``None``: it is one, or it is empty,
    which SQLite makes a new database): it must start with SQLite's header and, if it holds any
    table, hold the cache's table ``answers`` with columns ``key`` and ``value``. Read only: the
    header is read with ``open``, the schema through a read-only, immutable connection (no
    journal, WAL or lock file is made)."""
    import sqlite3
    from urllib.parse import quote

    with open(path, "rb") as f:
        head = f.read(len(_SQLITE_MAGIC))
    if not head:
        return None
    if head != _SQLITE_MAGIC:
        return "it is not an SQLite database (a cache file is one; give a new path or the path of an earlier cache)"
    try:
        conn = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro&immutable=1", uri=True)
        try:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            columns = {r[1] for r in conn.execute("PRAGMA table_info(answers)")} if "answers" in tables else set()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return f"it cannot be read as an SQLite database ({plain_reason(exc)})"
    if tables and not _CACHE_COLUMNS <= columns:
        shown = ", ".join(quoted(t) for t in sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        return (f"it is an SQLite database but not a cache (no table 'answers' with columns 'key' and 'value'; "
                f"its tables: {shown})")
    return None


def _unwritable(folder: str) -> Optional[str]:
    """Why a new entry cannot be made in the local ``folder`` (``None``: it can), found by making
    one: a folder ``.fair-forge-probe-<random>`` is created and removed at once, and the folder's
    access and modification times are set back, so that a check followed by a usage error leaves
    every folder as it was — its modification time too. (``access(2)`` is not asked: it answers
    yes to root for any folder, ``/proc`` included, where nothing can be created.)"""
    try:
        before = os.stat(folder)
    except OSError as exc:
        return exc.strerror or str(exc)
    probe = os.path.join(folder, f".fair-forge-probe-{uuid.uuid4().hex[:12]}")
    try:
        os.mkdir(probe)
    except OSError as exc:
        return exc.strerror or str(exc)
    try:
        os.rmdir(probe)
    except OSError as exc:
        log.warning("could not remove the probe folder %s: %s", probe, exc)
    try:
        os.utime(folder, ns=(before.st_atime_ns, before.st_mtime_ns))
    except OSError:  # not the owner: the modification time moved, nothing else did
        pass
    return None


# ----------------------------------------------------------------------------- stage, publish
def new_stage_path(out: str) -> str:
    """A new stage folder for ``out`` (not created): ``OUT.staging-<UTC time>-<random>`` beside it,
    or ``OUT/.staging-…`` when ``out`` is a local mount point."""
    out = _normalise(out)
    target = _target(out)
    if _is_local(out) and _stage_inside(target):
        return os.path.join(target, _STAGE + _stage_id())
    return f"{target}{_STAGE}{_stage_id()}"


def publish_stage(stage: str, out: str, owned: Iterable[str] = OWNED_OUTPUTS,
                  prepare: Optional[Callable[[str], Any]] = None) -> None:
    """Make the complete folder ``stage`` the content of ``out`` (see the module docstring).

    ``owned``: the names the command writes (files, folders ending in ``/``); a user's other files in
    ``out`` are kept (hard-linked into the new folder, or left in place). ``prepare``: called with
    ``stage`` before it is published (not when it was published already), e.g. to seal the stored
    statistics' manifest (:func:`fair_forge_beam.rollup.seal_manifest`). Idempotent: a call repeated
    after a crash (a retried pipeline step) finishes the same publication.

    Raises:
        OSError: the filesystem refused. Locally ``out`` then still holds the previous run; on an
            object store too when the refusal came before the folder changed (the removal of its ``_SUCCESS``
            marker failed, the marker still there), else a publication cut short is completed by the next run
            (:func:`clean_stale_stages`), what the lines about ``out`` say, step by step
            (:func:`~fair_forge_beam.console.cut_state`).
    """
    named = out  # as the run's lines name it (console.note_stage)
    out = _normalise(out)
    stage = _normalise(stage)
    target = _target(out)
    run_id = run_id_of(stage)
    if _read_marker(target) == run_id:  # published already: a retry finishes the clean-up only
        _remove_tree(stage)
        return
    _remove_temporaries(stage)
    if prepare is not None:
        prepare(stage)
    if _swaps(stage, target):
        _swap(stage, target, run_id, tuple(owned))
    else:
        _copy_publish(stage, target, run_id, tuple(owned), named)


def _swaps(stage: str, target: str) -> bool:
    """Whether ``stage`` is published by exchanging it with ``target`` (a local sibling), not copied."""
    return _is_local(target) and os.path.dirname(stage) == os.path.dirname(target) and not _stage_inside(target)


def _swap(stage: str, target: str, run_id: str, owned: tuple) -> None:
    _write_marker(stage, run_id)
    if not os.path.lexists(target):
        _unmark(stage)  # the mark is never published
        os.rename(stage, target)
        if _HELD is not None:
            _HELD.append((stage, target))  # nothing was there: undone by taking it away
        return
    _carry_user_files(target, stage, owned)
    from fair_forge_beam.io.write import keep_metadata

    _unmark(stage)
    keep_metadata(target, stage)  # the folder keeps its mode, setgid bit, group and ACLs (trial37 T4)
    try:
        old = _put_in_place(stage, target, f"{target}{_PREVIOUS}{run_id}")
    except OSError:
        with contextlib.suppress(OSError):
            mark_stage(stage)  # not published: the stage is ours still
        raise
    with contextlib.suppress(OSError):  # the previous content, now at the stage's path, is still known as ours
        mark_stage(old)
    if _HELD is not None:  # published together with the command's other folders: kept until they all are
        _HELD.append((old, target))
        return
    with contextlib.suppress(OSError):
        _remove_tree(old)
    if os.path.lexists(old):
        log.warning("could not remove all of %s (the previous run's files)", old)


def _put_in_place(new: str, target: str, away: str) -> str:
    """Put the folder ``new`` at ``target`` and return where ``target``'s previous content is now: ``new``'s path,
    by one exchange (:func:`_exchange`), or, on a filesystem without one, ``away``, by two renames (repaired if
    killed between: :func:`_settle`). Used to publish (:func:`_swap`) and to take a publication back
    (:func:`_take_back`)."""
    try:
        _exchange(new, target)
        return new
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
            raise
    os.rename(target, away)
    with contextlib.suppress(OSError):
        mark_stage(away)  # the previous content, known as ours: put back by the next run if killed here
    os.rename(new, target)
    return away


#: the previous contents of the folders published so far inside :func:`published_together` (``(path, folder)``:
#: ``path`` holds what ``folder`` held, missing when it did not exist), else None
_HELD: Optional[list] = None


@contextlib.contextmanager
def published_together() -> Iterator[None]:
    """Publish the local folders a command of several stages writes (the loop's ``generated/``, ``run/``, ``audit/``)
    together or not at all: inside the block each publication keeps the folder's previous content (at its stage's
    path, marked as ours); when the block ends normally they are removed, on an exception (a later stage's empty
    run, a failure, Ctrl-C) every folder published in the block is given its previous content back, last first, by
    the same one-call exchange, and the run's lines no longer name it as published (trial48c F: an empty loop run
    left the new ``generated/`` beside the old ``run/`` and ``audit/``). A folder published by copy (an object store,
    a mount point) cannot be taken back: it is published as before. A process killed inside the block (SIGKILL)
    leaves the folders published so far, their previous contents removed by the next run."""
    global _HELD
    if _HELD is not None:
        yield
        return
    _HELD = held = []
    try:
        yield
    except BaseException:
        _HELD = None
        from fair_forge_beam.console import forget_published, uninterrupted

        with uninterrupted():
            for old, target in reversed(held):
                try:
                    _take_back(old, target)
                    forget_published(target)
                except OSError as exc:
                    log.warning("could not give %s its previous content back (%s): it holds this run's; the previous "
                                "content is kept in %s", target, plain_reason(exc), old)
        raise
    finally:
        _HELD = None
    for old, _ in held:
        with contextlib.suppress(OSError):
            _remove_tree(old)


def _take_back(old: str, target: str) -> None:
    """Give ``target`` the previous content kept at ``old`` (a publication inside :func:`published_together`)."""
    if not os.path.lexists(old):  # the folder did not exist before: this run's goes
        os.rename(target, old)
        with contextlib.suppress(OSError):
            mark_stage(old)
        _remove_tree(old)
        return
    old = _put_in_place(old, target, f"{target}{_PREVIOUS}{_id_of(old)}")
    _unmark(target)
    with contextlib.suppress(OSError):
        mark_stage(old)
    _remove_tree(old)


def _exchange(a: str, b: str) -> None:
    """Swap two paths atomically (Linux ``renameat2(..., RENAME_EXCHANGE)``; glibc 2.28+)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        raise OSError(errno.ENOSYS, "renameat2 is not available") from None
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), a)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _carry(src: str, dst: str) -> None:
    if os.path.islink(src):
        os.symlink(os.readlink(src), dst)
    elif os.path.isdir(src):  # Beam's temporaries are left behind at any depth
        shutil.copytree(src, dst, symlinks=True, copy_function=_link_or_copy,
                        ignore=lambda _, names: [n for n in names if _is_temporary(n)])
    else:
        _link_or_copy(src, dst)


def _carry_user_files(old: str, new: str, owned: tuple) -> None:
    """Hard-link (or copy) into ``new`` every top-level entry of ``old`` that is not an output of
    ours (not in ``owned``; the run's own folders are replaced whole, nothing inside them is
    carried). Beam's temporaries are left behind; a name the new run wrote wins."""
    names = {n.rstrip("/") for n in owned if not _is_pattern(n)}
    patterns = [n for n in owned if _is_pattern(n)]
    for entry in os.scandir(old):
        name = entry.name
        if _is_temporary(name) or name == STAGE_OWNER_MARK or (name.startswith(_STAGE) and _is_ours(entry.path)):
            continue  # a stage of ours inside (a former mount point's) is not carried; a user's folder of such a name is
        if any(fnmatch.fnmatchcase(name, p) for p in patterns):
            continue  # an earlier run's shard of ours (another shard count): never carried into the new run
        if name not in names and not os.path.lexists(os.path.join(new, name)):
            _carry(entry.path, os.path.join(new, name))


#: what a copy-based publication cut short has left of the folder, at each of its steps (:func:`_copy_publish`,
#: :func:`fair_forge_beam.console.note_cut`; ``{stage}``: the stage): the line says what was done (trial48b L2: the
#: marker's removal failed, the earlier run whole, and the line said its outputs were removed and this run's copied)
_NEXT_RUN = "the next run into it completes this run's publication from {stage}"
_CUT_UNMARKED = ("holds a publication cut short (its _SUCCESS marker removed, its earlier outputs not yet, nothing of "
                 f"this run's copied: readers see an unfinished folder); {_NEXT_RUN}")
_CUT_REMOVING = ("holds a publication cut short (some or all of its earlier outputs removed, nothing of this run's "
                 f"copied, no _SUCCESS marker: readers see an unfinished folder); {_NEXT_RUN}")
_CUT_COPIED = ("holds a publication cut short (its earlier outputs removed, this run's copied, no _SUCCESS marker: "
               f"readers see an unfinished folder); {_NEXT_RUN}")
_CUT_MARKER_LEFT = ("holds a publication cut short (its earlier outputs removed, this run's copied, its _SUCCESS "
                    "marker perhaps written only in part); the next run into it completes this run's publication from "
                    "{stage} if that marker is gone or whole, else removes that stage")
_CUT_UNKNOWN = ("may hold a publication cut short (the store failed to remove its _SUCCESS marker and cannot tell "
                "whether it is gone; its earlier outputs are as they were, nothing of this run's copied); "
                f"{_NEXT_RUN} if the marker is gone, else removes that stage")


def _still_there(fs, path: str) -> Optional[bool]:
    """Whether object ``path`` exists, asked again after a failure; ``None``: the store cannot tell."""
    try:
        return bool(fs.exists(path))
    except Exception:  # noqa: BLE001 - any store's error: unknown
        return None


def _copy_publish(stage: str, target: str, run_id: str, owned: tuple, named: str) -> None:
    from fair_forge_beam.console import note_cut

    fs = _fs()
    local = _is_local(target)
    if not _read_marker(stage):
        _write_marker(stage, run_id)  # the stage is complete: a run killed below is completed from it
    files = [p for p in _list_files(stage) if p not in (fs.join(stage, MARKER), fs.join(stage, STAGE_OWNER_MARK))]
    # from the marker's removal on the folder is neither the previous run's nor this one's until the new marker is
    # written: a failure or a kill says so, saying what was done (note_cut), and keeps the stage, which the next
    # run completes the publication from; a failure before it leaves the previous run whole, and is said so
    marker = fs.join(target, MARKER)
    if fs.exists(marker):
        try:
            fs.delete([marker])
        except Exception:
            there = _still_there(fs, marker)
            if there is not True:  # gone all the same, or unknown; still there: the folder is as it was
                note_cut(named, stage, _CUT_UNMARKED if there is False else _CUT_UNKNOWN)
            raise
    note_cut(named, stage, _CUT_REMOVING)
    _remove_owned(target, [n for n in owned if n != MARKER])
    note_cut(named, stage)  # the earlier outputs removed: this run's being copied
    dests = [fs.join(target, p[len(stage):].lstrip("/")) for p in files]
    if local:
        for src, dst in zip(files, dests):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if os.path.lexists(dst):
                os.remove(dst)
            _link_or_copy(src, dst)
    elif files:
        fs.copy(files, dests)
    note_cut(named, stage, _CUT_COPIED)
    try:
        _write_marker(target, run_id)
    except Exception:
        with contextlib.suppress(Exception):  # a marker cut short (a full disk) would be taken for a run's (_settle)
            if fs.exists(marker):
                fs.delete([marker])
        if _still_there(fs, marker) is not False:  # then the next run removes the stage: said as it is
            note_cut(named, stage, _CUT_MARKER_LEFT)
        raise
    note_cut(named, None)  # complete: what is left to do is the stage's removal
    fs.delete([fs.join(stage, MARKER)])  # first: a partly removed stage is never taken for a complete one
    _remove_tree(stage)


def _publish_when_written(_, stage: str, out: str, prepare, *written) -> str:
    publish_stage(stage, out, prepare=prepare)
    return out


def publish_after(written: list, stage: str, out: str, prepare: Optional[Callable[[str], Any]] = None):
    """Add to the pipeline of ``written`` (the sinks' results, e.g. what
    :func:`~fair_forge_beam.reports.results.write_outputs` returns) one step that publishes ``stage``
    as ``out`` (:func:`publish_stage`), run once, after every sink has finished (it takes them as side
    inputs): how a job with no launcher after it (a Flex Template launch) never destroys the last good
    run. :func:`publish_stage` is idempotent, so a retried step finishes the same publication.
    ``prepare``: :func:`publish_stage`'s (a module-level function: the step is pickled).

    Returns:
        The step's output (``out``, once published).
    """
    from fair_forge_beam._beam import beam

    pipeline = written[0].pipeline
    # the job marks its stage as ours (STAGE_OWNER_MARK) in a step of its own, before the publication (a side input
    # of it): the launcher writes nothing, and a later run removes a killed job's stage only when it is marked
    marked = pipeline | "StageOnce" >> beam.Create([stage]) | "MarkStage" >> beam.Map(mark_stage)
    return (
        pipeline
        | "PublishOnce" >> beam.Create([None])
        | "Publish" >> beam.Map(_publish_when_written, stage, out, prepare,
                                *[beam.pvalue.AsList(w) for w in [*written, marked]])
    )


def clean_stale_stages(out: str) -> list[str]:
    """Deal with the stages that killed runs left beside (or inside) ``out``; returns their paths.

    A stage whose run completed but whose publication was cut short (it has the marker, ``out``
    has none) is published now; any other stage is removed — local: when no running process holds
    its lock; object stores: when it is older than :data:`STALE_STAGE_HOURS` (a younger one may
    belong to a job still running, and is left with a warning). A ``OUT.previous-<id>`` folder of
    an interrupted two-rename swap is put back when ``out`` is missing, else removed.
    """
    out = _normalise(out)
    target = _target(out)
    handled = []
    if _is_local(target):
        import glob

        previous = sorted(glob.glob(glob.escape(target) + _PREVIOUS + "*"))
        _left_unmarked(p for p in previous if not _is_ours(p, _PREVIOUS))
        for prev in (p for p in previous if _is_ours(p, _PREVIOUS)):
            if not os.path.lexists(target) and _read_marker(prev) is not None:
                _unmark(prev)
                os.rename(prev, target)
            else:
                _remove_tree(prev)
            handled.append(prev)
        stages = sorted(_local_stages(target))
        _left_unmarked(s for s in stages if not _is_ours(s))
        for stage in (s for s in stages if _is_ours(s)):
            with _stage_lock(stage, wait=False) as mine:
                if not mine:
                    continue  # a running run's stage
                _settle(stage, target)
                handled.append(stage)
        for lock in glob.glob(glob.escape(target) + _STAGE + "*.lock"):  # a lock whose stage is gone
            if not os.path.lexists(lock[:-len(".lock")]) and _is_our_lock(lock):
                with _stage_lock(lock[:-len(".lock")], wait=False):
                    pass  # removed on release when no process holds it
        return handled
    paths = (m.path for m in _fs().match([f"{target}{_STAGE}*/**"])[0].metadata_list)
    roots = sorted({f"{target}{_STAGE}" + p[len(target) + len(_STAGE):].split("/", 1)[0] for p in paths})
    _left_unmarked(s for s in roots if not _is_ours(s))
    for stage in (s for s in roots if _is_ours(s)):
        age = _stage_age_hours(stage)
        kept = _fs().exists(_fs().join(stage, KEPT_MARK))  # an empty run's: it ended, its stage may go now
        if _read_marker(stage) is None and not kept and (age is None or age < STALE_STAGE_HOURS):
            log.warning("left %s: a stage started %s ago, perhaps by a job still running (removed by a later run "
                        "once %g h old)", stage, "at an unknown time" if age is None else f"{age:.1f} h", STALE_STAGE_HOURS)
            continue
        _settle(stage, target)
        handled.append(stage)
    return handled


def _local_stages(target: str) -> list:
    """The local paths named like a stage of ``target`` (beside it, or inside it for a mount point), locks left out:
    candidates only, ours when :func:`_is_ours`."""
    import glob

    stages = glob.glob(glob.escape(target) + _STAGE + "*") + glob.glob(os.path.join(glob.escape(target), _STAGE + "*"))
    return [s for s in stages if not s.endswith(".lock")]


def _is_our_lock(lock: str) -> bool:
    """Whether ``lock``, whose stage is gone, is a stage lock a run of ours left: a regular file named after a stage
    id, empty or holding the holder's line (:func:`_stage_lock`); a user's file of such a name is not."""
    if not _STAGE_ID.fullmatch(_id_of(lock[:-len(".lock")])):
        return False
    try:
        if not stat.S_ISREG(os.lstat(lock).st_mode) or os.lstat(lock).st_size > 300:
            return False
        with open(lock, "rb") as f:
            text = f.read()
    except OSError:
        return False
    return not text or re.fullmatch(rb"pid \d+ on host .*\n", text) is not None


def _settle(stage: str, target: str) -> None:
    """A killed run's stage: published when it is complete and the folder is not, else removed. A stage is
    complete when its marker names its run (a marker cut short by a full disk, empty or half a JSON text,
    names none: the stage is removed, never published)."""
    if _read_marker(stage) and _read_marker(target) is None:
        log.warning("completing the publication of %s (a run killed while publishing it)", stage)
        publish_stage(stage, target)
    else:
        _remove_tree(stage)


@contextlib.contextmanager
def _stage_lock(stage: str, wait: bool = True) -> Iterator[bool]:
    """Hold ``<stage>.lock`` (``fcntl.flock``; released by the kernel when the process dies, SIGKILL
    too). Yields whether this process holds it; the lock file is removed on release."""
    path = stage + ".lock"
    try:
        import fcntl
    except ImportError:  # no flock (Windows): every stage counts as a killed run's
        yield True
        return
    try:
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    except OSError:
        yield not wait
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError:
            yield False
            return
        if wait:  # the holder, named to a run that finds the folder busy (_busy_problem)
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.write(fd, f"pid {os.getpid()} on host {_host()}\n".encode())
        try:
            yield True
        finally:
            with contextlib.suppress(OSError):
                os.remove(path)
    finally:
        os.close(fd)


def _host() -> str:
    import socket

    return socket.gethostname() or "?"


def _busy_problem(out: str, own: Optional[str] = None) -> Optional[str]:
    """Local ``out``: why a new run may not write into it — another live run holds the lock of a
    stage of that folder (left after :func:`clean_stale_stages`, which removes the stages of
    killed runs): the two would publish one after the other and the first one's results would
    vanish with no warning (trial35 T8). ``None`` when no live run writes there. ``own``: this
    run's stage, whose lock it holds (not another run's)."""
    target = _target(out)
    for stage in sorted(s for s in _local_stages(target) if s != own and _is_ours(s)):
        with _stage_lock(stage, wait=False) as free:
            if free:
                continue
        try:
            with open(stage + ".lock", encoding="utf-8") as f:
                holder = f.read().strip() or "a process"
        except OSError:
            holder = "a process"
        return (f"--output: {out} is being written by another run ({holder}, stage {stage}); "
                "wait for it to end or give another --output")
    return None


@contextlib.contextmanager
def staged_output(output: str, owned: Iterable[str] = OWNED_OUTPUTS) -> Iterator[str]:
    """Write a run into a stage and publish it as ``output`` only if the block ends normally.

    ::

        with staged_output(args.output) as stage:
            ...write every file of the run under stage...

    On entry: :func:`check_output_folder` (``ValueError``: a one-line usage error), stages of killed
    earlier runs are dealt with (:func:`clean_stale_stages`), a local folder that another live run
    is writing (it holds its stage's lock) is refused (:class:`OutputFolderError`, naming the run's
    pid and host), and a new stage is made (and, locally, locked). On normal exit: :func:`publish_stage` — the previous content of ``output`` is removed
    only after the new one is in place; the user's own files there (anything not in ``owned``) are
    kept. On an exception (any, ``SystemExit`` too): the stage is removed and ``output`` is untouched —
    but for an empty run's (:class:`~fair_forge_beam.reports.empty_run.EmptyRun` whose ``kept_stage`` is
    this stage: every command's, the audit's, the stages', explain's): ``output`` is untouched and the
    stage is kept, unpublished and unlocked, so that the run's failures (its dead letters) can be read
    where its one line says; the next run into ``output`` removes it (:func:`clean_stale_stages`).

    Args:
        output: the output folder (local path or URL of any Beam filesystem).
        owned: the names the command writes in its folder (files; folders end in ``/``; a pattern,
            ``attributions-*-of-*.jsonl``, names shards whose count may change). Default:
            the main job's :data:`OWNED_OUTPUTS`.

    Yields:
        The stage folder's path (same filesystem as ``output``).
    """
    out = check_output_folder(output)
    from fair_forge_beam.console import writing

    with writing(out):  # the machine failing a completion of an earlier cut publication: the one error, saying so
        clean_stale_stages(out)  # (trial47b B3: "nothing was published (the output folder, if any, is as it was)")
    stage = new_stage_path(out)
    local = _is_local(out)
    busy = _busy_problem(out) if local else None
    if busy:
        raise OutputFolderError(busy)
    # what the lines about it say (console); an object store has no folders: a prefix holding objects is one
    # (a failed run said "nothing was written (gs://…/today was not created)" beside the previous run's files)
    existed = os.path.exists(out) if local else (_fs().exists(out) or bool(_list_files(out)))
    if local:  # the check created nothing: the stage's folder (--output's parent) is made now
        try:
            os.makedirs(os.path.dirname(stage), exist_ok=True)
        except OSError as exc:
            raise OutputFolderError(_os_problem("--output", out, exc)) from None
    from fair_forge_beam.console import forget_stage, note_published, note_stage, uninterrupted, writing

    note_stage(stage, out, existed)  # an interrupt that ends the process before this block does removes it (console)
    try:  # the machine's failure while the run writes (a full disk, ulimit -f): OutputWriteError naming out
        with writing(out, existed), (_stage_lock(stage) if local else contextlib.nullcontext(True)):
            if local:
                try:
                    os.makedirs(stage)
                except OSError as exc:
                    raise OutputFolderError(_os_problem("--output", out, exc)) from None
                try:  # ours from now on (a kill before this leaves an empty folder, left alone)
                    mark_stage(stage)
                except BaseException:  # a full disk, ulimit -f: said by writing(); the folder just made goes
                    with contextlib.suppress(OSError):
                        shutil.rmtree(stage)
                    raise
                if not _stage_inside(_target(out)):
                    from fair_forge_beam.io.write import keep_metadata

                    # the folder's group, setgid bit and default ACL from the start: what the run creates
                    # inside is made as it would be in the folder itself (trial37 T4)
                    keep_metadata(_target(out), stage, writing=True)
                # again, this run's stage locked: two runs started at one instant (two scheduled jobs)
                # both passed the check above; each now sees the other's lock, so neither publishes
                # over the other (both refuse in that race: never a silent loss)
                busy = _busy_problem(out, own=stage)
                if busy:
                    _remove_tree(stage)
                    raise OutputFolderError(busy)
            else:
                mark_stage(stage)  # the stage's first object: the prefix is known as ours
            try:
                yield stage
            except BaseException as exc:
                with contextlib.suppress(Exception):
                    if getattr(exc, "kept_stage", None) == stage:  # an empty run keeps its stage to be read (above)
                        _mark_kept(stage, str(exc))
                    else:
                        _remove_tree(stage)
                raise
            try:
                with uninterrupted():  # Ctrl-C / SIGTERM during the swap: raised once the outputs are whole
                    publish_stage(stage, out, owned)
                    note_published(out)
            except BaseException:
                _unpublished(stage, out)
                raise
    finally:
        forget_stage(stage)


def _mark_kept(stage: str, reason: str) -> None:
    """Mark an empty run's kept stage (:data:`KEPT_MARK`, holding the run's one-line reason): never
    published, and removed by the next run into its folder at once — on an object store too, where a
    stage without a marker is otherwise left 24 hours as perhaps a running job's."""
    with _fs().create(_fs().join(stage, KEPT_MARK)) as f:
        f.write((reason + "\n").encode("utf-8", "replace"))


def _unpublished(stage: str, out: str) -> None:
    """A publication of ``stage`` failed (a full disk writing its marker, ``ulimit -f``): the stage goes
    when ``out`` still holds the previous run — a local swap fails before its one exchange, a copy before it
    changed the folder (the removal of its ``_SUCCESS`` marker failed, the marker still there: trial48b L2;
    the next run would remove the stage) — or when the stage has no whole marker, so that no later run takes
    it for a complete one and publishes it (:func:`_settle`; a 0-byte ``_SUCCESS`` was left in the loop's stage
    on a full disk). A copy to an object store cut short (:func:`~fair_forge_beam.console.cut_state`) keeps its
    complete stage: the next run completes the publication from it."""
    from fair_forge_beam.console import cut_state

    target = _target(_normalise(out))
    with contextlib.suppress(Exception):
        if _swaps(_normalise(stage), target) or not _read_marker(stage) or cut_state(out) is None:
            _remove_tree(stage)


def finished_run_problem(output: str, filesystems=None) -> Optional[str]:
    """Why a streaming run must not write into ``output``, or ``None``: the folder holds the outputs
    of a finished run (its ``_SUCCESS`` marker, or any of a batch or bounded windowed run's files).

    A streaming run writes in place as its windows fire (it cannot be staged), so it would remove
    that run's outputs before anything of its own is complete (issue 28, trial 28f B5: a --watch run
    emptied a finished audit's folder at start, and Ctrl-C then said "nothing was written"). Leftovers
    of an earlier streaming run (``windows/`` without a marker) are no finished run: they are removed
    as before (:func:`prepare_output_folder`)."""
    if filesystems is None:
        filesystems = _fs()
    out = _normalise(output)
    if not filesystems.exists(out) or os.path.isfile(out):
        return None
    found = [name for name in (MARKER,) + OUTPUT_FILES + ("windowed_results.json",)
             if filesystems.exists(f"{out}/{name.rstrip('/')}")]
    if not found:
        return None
    shown = ", ".join(found[:4]) + (", ..." if len(found) > 4 else "")
    return (f"--output {quoted(out)} holds a finished run ({shown}); a streaming run writes its windows in place as "
            f"they fire, so it would replace that run before anything new is complete: give a new or empty folder "
            f"(or move the earlier run away first)")


def prepare_output_folder(output: str, filesystems=None) -> str:
    """Create ``output`` if missing and delete the outputs of an earlier run in it, in place (a
    streaming run, whose files appear while it runs, cannot be staged).

    Args:
        output: folder path or URL (``gs://...``); trailing slashes are dropped; an empty one is a
            usage error (:func:`empty_output_problem`).
        filesystems: Beam's ``FileSystems`` or a stand-in with ``exists``/``mkdirs``/``delete``/``match``
            (default: Beam's, imported here).

    Returns:
        The normalised folder path.

    Only this layout's outputs are removed (:data:`OWNED_OUTPUTS`: named files, and the run's own
    folders whole), with Beam's temporaries anywhere under it (:data:`TEMPORARY_PATTERNS`); a user's
    files at the top level of the folder stay.

    Raises:
        ValueError: ``output`` is a file, or the folder cannot be created (one-line message for
            a usage error).
    """
    if filesystems is None:
        filesystems = _fs()
    out = _normalise(output)
    if os.path.isfile(out):
        raise ValueError(f"--output must be a folder, but {out} is a file")
    if not filesystems.exists(out):
        try:
            filesystems.mkdirs(out)
        except (OSError, IOError) as exc:  # e.g. a parent of --output is a file
            raise ValueError(f"--output: cannot create folder {out}: {plain_reason(exc)}") from None
    _remove_owned(out, OWNED_OUTPUTS, filesystems)
    return out
