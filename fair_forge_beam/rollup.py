"""``fair-forge-beam rollup``: one result from the stored statistics of earlier audits.

    fair-forge-beam rollup --from 'audits/2026-12-0*' --output week49

Reads only what each audit stored (``stats/``: :mod:`fair_forge_beam.io.session_stats`), never a
raw log. A session with one stored row in all the runs (the vast majority) is taken as its run
left it: its warnings are the stored ones and its rows of ``sessions/`` and ``stats/`` are copied
with ``pyarrow`` filters — its accumulators are not even decoded. The accumulators of a session
with several rows (a conversation that spans midnight, a session in several languages) are merged
across runs, and the engine's session stage runs on them as in an audit
(:class:`~fair_forge_beam.engine.Engine` with ``from_accumulators``).

Slices: a metric whose runs stored their slice accumulators (``stats/slices/``; its slice
combiner has an exact ``subtract``) gets, per slice, the merge of the runs' stored accumulators,
less each run's own part of every merged session (that row alone through the slice stage, as the
run added it) plus the merged session's — exact integer sums, so the same bits as one audit; a
session found in one run costs the slices nothing. Any other metric's slices are rebuilt from
every session: a session of one run sends its stored slice value and cell values
(:class:`~fair_forge_beam.engine.Reduced`). Every slice estimate, gate and report is recomputed,
and the roll-up writes an audit's outputs — its own ``stats/`` too, so roll-ups roll up again
(days → weeks → months).

``results.json`` equals that of one audit over all the runs' inputs, byte for byte, apart from
``config.inputs`` (the runs' inputs, in run order) — in both statistical modes
(``tests/test_rollup.py``: a hypothesis test over splits of real data into days).

What is not rebuilt from stored statistics (named on the console, in ``run_info.json`` under
``rollup.not_rebuilt`` and in docs/scheduled.md):

* a metric that stored none (``stats/manifest.json``'s ``not_stored``: e.g. Toxicity with cluster
  profiling, which needs the vectors; metrics whose session values declare no stored type);
* per-record outputs are the runs' own: ``results.parquet/`` and ``dead_letter/`` are copied from
  the runs (one row per interaction or rejected record does not depend on the day boundary), and
  ``data_quality/`` holds only the session stage's warnings, recomputed (each run's per-record
  warnings stay in its own ``data_quality/``; their counts are in ``results.json``).

Usage errors (exit 2, one line): no run matched, a run without stored statistics, a stored
statistics schema version other than this package's (naming both), runs made with different
settings (naming the first difference), a run file that is not as the run wrote it (its manifest's
``files``: a file it does not list, a listed file missing, another size or sha256 —
:func:`check_sealed`, naming the run and the file), a manifest count its sealed files do not
hold (interactions read, per slice, dead letters per stage, data-quality warnings per kind — :func:`checked_counts`,
naming both numbers).
"""
from __future__ import annotations

if __name__ == "__main__":  # `python -m fair_forge_beam.rollup` is the command (pipelines/rollup.py), run before
    # this module imports anything: its console.starting takes Ctrl-C first (one line, never a traceback from an
    # import: trial46 B2), and this module is then imported once, as pipelines/rollup.py's
    import runpy

    runpy.run_module("pipelines.rollup", run_name="__main__", alter_sys=True)
    raise SystemExit(0)  # pragma: no cover - the command exits itself

from fair_forge_beam.console import say  # console output never fails a run

import argparse
import functools
import glob
import json
import logging
import os
import re
import sys
import time
from typing import Any, Optional, Sequence

from fair_forge_beam._beam import beam
from fair_forge_beam.io.paths import same_folder
from fair_forge_beam.overlap import RECORDS_DIGEST_PREFIX, audit_runs_of, find_overlap  # noqa: F401 (re-exported)
from fair_forge_beam.io.session_stats import HASH_PIECE, file_digest, not_stored_text, session_flags
from fair_forge_beam.options import RUN_ONLY_OPTIONS, option as declared_option, number_type
from fair_forge_beam.io.edge import CompressedDataError, open_input, read_all  # read_all: whole files in pieces: Beam's .gz reader stops at 16 MiB
from fair_forge_beam.quoting import quoted
from fair_forge_beam.plain import folder_path

__all__ = ["run", "main", "audit_manifest", "resolve_runs", "audit_runs_of", "check_no_overlap", "find_overlap",
           "seal_manifest", "is_hidden",
           "check_sealed", "content_digest", "file_digest", "sealed_files", "seal_more"]

log = logging.getLogger("fair_forge_beam.rollup")



def _jsonable(v):
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return str(v)


def input_fingerprints(patterns: Sequence[str]) -> list[list]:
    """``[path, size in bytes, last modified (epoch seconds), sha256 of its content, digest of its
    records]`` of every file the input ``patterns`` match (any Beam filesystem), sorted: what a
    roll-up compares to refuse one input read by two of its runs (a night re-run into a new folder:
    the same path, size and time; a renamed, ``cp -p`` copied or recompressed log: the same content;
    the same records in another order or layout: the same records digest, :func:`check_no_overlap`).
    The content digest is of the content as the reader decodes it (:func:`content_digest`), the
    records digest of its records whatever their order (:func:`input_digests`), both from one pass
    over the file; an empty file, or one that cannot be read here (the reader says why), has no
    digest (three fields), a file whose records are not counted here (Parquet, or corrupt
    compressed data) no records digest (four fields). A pattern that matches nothing adds nothing."""
    from fair_forge_beam.io.read import distinct_inputs

    out: dict[tuple, tuple] = {}
    # each file once, by the path of the first pattern that reaches it, as the reader reads it (a
    # symbolic link or hard link to a file matched too is that file); an unreadable pattern is the
    # reader's error, not the manifest's
    for _, _, files in distinct_inputs(patterns, strict=False).patterns:
        for m in files:
            entry = (m.path, int(m.size_in_bytes), float(m.last_updated_in_seconds or 0.0))
            out[entry] = ()
            if m.size_in_bytes:
                try:
                    content, records = input_digests(m.path)
                    out[entry] = (content, records) if records else (content,)
                except Exception:  # noqa: BLE001 - an unreadable file is the reader's error, not the manifest's
                    pass
    return [[*entry, *digests] for entry, digests in sorted(out.items())]




class _HashingReader:
    """``read(n)`` of a binary file object that also feeds every byte it gives to ``digest``."""

    def __init__(self, f, digest):
        self.f, self.digest = f, digest

    def read(self, n: int = -1) -> bytes:
        piece = self.f.read(n)
        self.digest.update(piece)
        return piece


def _record_hash(text) -> int:
    """sha256 of one record as an integer: of its canonical JSON (``json.dumps`` with sorted keys,
    no spaces, ASCII escapes), so that its layout (whitespace, key order, escapes, a JSON Lines
    line or a ``.json`` array element) does not matter; a text that is not JSON by its own bytes
    (stripped of whitespace), and it is a dead letter of the reader's."""
    import hashlib

    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    try:
        canon = b"json:" + json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":"),
                                      ensure_ascii=True).encode("ascii")
    except (ValueError, RecursionError, TypeError):  # not JSON (a dead letter of the reader's): its text
        canon = b"text:" + raw.strip()
    return int.from_bytes(hashlib.sha256(canon).digest(), "big")


def _records_sum(path: str, fmt: str, f) -> tuple[int, int]:
    """``(sum of the records' hashes mod 2**256, number of records)`` of the decompressed binary
    file ``f``, read by the reader's own streaming readers (:func:`~fair_forge_beam.io.read.file_lines`
    for JSON Lines; :func:`~fair_forge_beam.io.edge.json_values` of the reader's decoding
    :func:`~fair_forge_beam.io.read.utf8_reader` for a ``.json`` file: one array element at a time,
    never ``json.load`` of the file): memory bounded by one record."""
    from fair_forge_beam.io import edge
    from fair_forge_beam.io.read import MAX_RECORD_BYTES, OVERSIZED_RAW_BYTES, ReadError, file_lines, utf8_reader

    total, n = 0, 0

    def add(h: int) -> None:
        nonlocal total, n
        total, n = (total + h) % (1 << 256), n + 1

    if fmt == "jsonl":
        first = True
        for _, _, line in file_lines(path, f, MAX_RECORD_BYTES):
            if isinstance(line, ReadError):  # over the limit, or not text: said by its reason and head
                add(_record_hash(f"{line.reason}\n{line.raw}"))
                continue
            if first:  # a byte-order mark is not data (the reader drops it)
                line = line.lstrip("\ufeff") if isinstance(line, str) else line.removeprefix(b"\xef\xbb\xbf")
                first = False
            if line.strip():
                add(_record_hash(line))
        return total, n
    head = b"".join(edge.head_pieces(f))
    if edge.not_text_reason(path, head) is not None:
        return 0, 0
    read = utf8_reader(f, edge.text_encoding(head), head)
    for value in edge.json_values(read, MAX_RECORD_BYTES, OVERSIZED_RAW_BYTES):
        if value.problem or value.text is None:
            add(_record_hash(f"{value.problem}\n{value.size}\n".encode() + value.head))
        else:
            add(_record_hash(value.text))
    return total, n


def input_digests(path: str) -> tuple[str, Optional[str]]:
    """``(content digest, records digest)`` of the input file ``path``, from one pass over it: the
    content digest is :func:`content_digest`'s; the records digest is of its records whatever their
    order and layout — ``"records:"`` and the sum mod 2**256 of the sha256 of each record's
    canonical JSON (:func:`_record_hash`: a JSON Lines line, a ``.json`` array's element), so a copy
    whose lines or elements are shuffled, re-indented, with keys reordered, or written as the other
    JSON format shares it (issue 28 H14: a reordered copy passed the content digest and every
    session was counted twice). ``None`` for a file of no record, a Parquet file (not counted
    here) or compressed data that is corrupt or cut short. Memory: one record, one piece.

    Raises:
        OSError: the file cannot be read."""
    import hashlib

    from fair_forge_beam.io.read import detect_format

    digest = hashlib.sha256()
    fmt = detect_format(path)
    try:
        with open_input(path) as f:
            reader = _HashingReader(f, digest)
            total = n = 0
            if fmt in ("jsonl", "json"):
                try:
                    total, n = _records_sum(path, fmt, reader)
                except (UnicodeDecodeError, ValueError):  # text the reader cannot decode: no records digest
                    total = n = 0
            while reader.read(HASH_PIECE):  # the rest of the content (all of it for another format)
                pass
    except CompressedDataError:
        return file_digest(path)[1], None
    return digest.hexdigest(), (f"{RECORDS_DIGEST_PREFIX}{total:064x}" if n else None)


def content_digest(path: str) -> str:
    """sha256 (64 hex digits) of the file ``path`` as the reader decodes it: a compressed file
    (``.gz``, ``.bz2``, ``.xz``, ``.zst``, … by its name, :func:`~fair_forge_beam.io.edge.open_input`)
    is hashed decompressed, so ``day.jsonl``, ``day.jsonl.gz`` and the same data recompressed at
    another level share one digest; a plain file's digest is that of its bytes. Memory: one piece of
    :data:`~fair_forge_beam.io.session_stats.HASH_PIECE` bytes. Compressed data that is corrupt or cut
    short is hashed as stored (its copies are still told apart from other files).

    Raises:
        OSError: the file cannot be read."""
    import hashlib

    digest = hashlib.sha256()
    try:
        with open_input(path) as f:
            while piece := f.read(HASH_PIECE):
                digest.update(piece)
    except CompressedDataError:
        return file_digest(path)[1]
    return digest.hexdigest()


def audit_manifest(config: dict, options: dict, static: dict, run_id: Optional[str] = None,
                   audit_runs: Optional[Sequence[str]] = None, input_files: Optional[Sequence] = None) -> dict:
    """An audit's ``stats/manifest.json`` content (before the stored metrics are added): the
    product version, ``results.json``'s ``config`` (inputs included), every option that builds
    the metrics (``options``: the main job's options by ``dest``, plus the computed
    ``clustering`` and ``slices``) and each metric's static fields.

    ``run_id``: the run's id (the one its ``_SUCCESS`` marker holds:
    :func:`~fair_forge_beam.reports.output_folder.run_id_of` its stage); ``audit_runs``: the ids of
    the audit runs the stored statistics are made of (default ``[run_id]``: an audit is made of
    itself; a roll-up gives the union of its inputs'). ``input_files``: the files read
    (:func:`input_fingerprints`; a roll-up: the union of its runs'). A roll-up refuses inputs that
    share an audit run or an input file (:func:`check_no_overlap`)."""
    from importlib import metadata

    try:
        version = metadata.version("fair_forge_beam")
    except metadata.PackageNotFoundError:  # pragma: no cover - a source tree without install
        version = None
    doc = {"product_version": version, "config": _jsonable(config), "static": _jsonable(static),
           "options": {k: _jsonable(v) for k, v in sorted(options.items())}}
    if run_id is not None:
        doc["run_id"] = run_id
        doc["audit_runs"] = sorted(set(audit_runs if audit_runs is not None else [run_id]))
    if input_files is not None:
        doc["input_files"] = sorted({tuple(f) for f in input_files})
    return doc


def _malformed_run_ids(manifest: dict) -> Optional[str]:
    """What is wrong with a manifest's ``run_id`` / ``audit_runs`` (``None``: both absent, as in runs
    of older versions, or both well formed: a text and a non-empty list of texts holding it or, for a
    roll-up, its inputs' ids)."""
    has_id, has_runs = "run_id" in manifest, "audit_runs" in manifest
    if not has_id and not has_runs:
        return None
    rid, ids = manifest.get("run_id"), manifest.get("audit_runs")
    if not isinstance(rid, str) or not rid:
        return "run_id must be a run id (text)"
    if not (isinstance(ids, list) and ids and all(isinstance(i, str) and i for i in ids)):
        return "audit_runs must be a non-empty list of run ids"
    return None


def check_no_overlap(runs: Sequence[str], manifests: Sequence[dict]) -> list[str]:
    """The union of the runs' audit runs (:func:`audit_runs_of`), sorted, once each is checked
    to be in one input only: a roll-up counts every audit run once.

    Raises:
        ValueError: a folder given twice (by any path to it), an audit run held by two inputs
            (a roll-up and a run it already holds, two roll-ups of overlapping weeks, a copy of a run),
            an input file (same path, size and modification time) read by two inputs (a night
            re-run into another folder), or input files of the same decoded content (sha256, recorded by
            :func:`input_fingerprints`; runs written before it record none and are compared by path
            only) read by two inputs (a renamed or copied log), or of the same records in another
            order or layout (the records digest, :func:`input_digests`: a shuffled or re-indented
            copy; runs written before it are compared without it), or two runs whose files together
            hold the same records (the sum of their records digests); the message names the
            overlapping runs and files.
    """
    found = find_overlap(runs, manifests, warn=True)
    if found is not None:
        raise ValueError(f"the runs overlap: {found[0]}; {found[1]}")
    owner: list[str] = []
    for run_dir, m in zip(runs, manifests):
        owner += audit_runs_of(run_dir, m)[0]
    return sorted(set(owner))


def build_parser() -> argparse.ArgumentParser:
    from fair_forge_beam.options import OneLineErrorParser, beam_option, user_path

    p = OneLineErrorParser(
        prog="fair-forge-beam rollup", allow_abbrev=False, passes_on=beam_option,
        description="Merge the stored statistics (stats/) of earlier audits or roll-ups into one result, as if one "
                    "audit had read all their inputs, without reading any raw log. Unknown --options are Beam's.")
    p.add_argument("--from", dest="runs", action="append", required=True, metavar="PATTERN", type=user_path,
                   help="run folders to merge (a glob, quoted; repeatable), e.g. 'audits/2026-12-0*'")
    p.add_argument("--output", required=True, metavar="DIR", type=user_path, help="the roll-up's output folder (an audit's layout)")
    p.add_argument("--gate", action="append", metavar="GATE", help="a gate, as in the audit (repeatable)")
    p.add_argument("--baseline", metavar="RUN_DIR", type=user_path,
                   help="the run regression gates and 'coverage assistants_of_baseline' compare with (an audit "
                        "or a roll-up), as in the audit")
    p.add_argument("--quiet", action="store_true", help="print nothing but gate failures and errors (as the audit's --quiet)")
    p.add_argument("--allow-empty", action="store_true",
                   help="publish an empty roll-up (no interaction read, or a metric that scored nothing) and exit 0, as the "
                        "audit's --allow-empty; without it such a roll-up exits with code 4 and leaves --output as it was")
    p.add_argument("--no-report", action="store_true", help="do not write report.html")
    p.add_argument("--inconclusive-width", type=number_type(float, declared_option("inconclusive-width").valid), default=None, metavar="W",
                   help="the report's inconclusive-interval width (default: the runs' setting)")
    return p


def resolve_runs(patterns: Sequence[str]) -> list[str]:
    """The run folders the patterns name: the patterns in the order given, each
    pattern's matches sorted by path (so ``audits/2026-12-0*`` is in date order, and a roll-up's
    ``config.inputs`` are the runs' inputs in that order). A local pattern is a glob of folders;
    a remote one (``gs://…``) is matched with Beam's filesystems on ``<pattern>/stats/manifest.json``.

    Stages of runs still being written or killed (``OUT.staging-…``, see
    :mod:`fair_forge_beam.reports.output_folder`) are not runs: a glob skips them (a nightly job's
    ``audits/*`` may meet a killed night's stage); a pattern that names only stages is an error that
    says what they are.

    Raises:
        ValueError: a pattern matched nothing, a matched folder holds no stored statistics, or it
            has no ``_SUCCESS`` (a run being published, or cut short, on an object store).
    """
    from apache_beam.io.filesystems import FileSystems

    from fair_forge_beam.io.session_stats import STATS_DIR
    from fair_forge_beam.plain import first_path_name_problem
    from fair_forge_beam.reports.output_folder import is_stage_path, unpublished_run_problem

    runs: list[str] = []
    for pat in patterns:
        pat = pat.rstrip("/")
        if "://" in pat:
            found = [m.path.rsplit(f"/{STATS_DIR}/", 1)[0] for r in FileSystems.match([f"{pat}/{STATS_DIR}/manifest.json"])
                     for m in r.metadata_list]
        else:
            found = [d.rstrip("/") for d in glob.glob(pat) if os.path.isdir(d) and not is_stage_path(d)]
            bad_name = first_path_name_problem(found, "--from")
            if bad_name:  # a name that is not UTF-8 text (issue 28 B7): one line, never a traceback
                raise ValueError(bad_name)
            bare = [d for d in found if not os.path.isfile(os.path.join(d, STATS_DIR, "manifest.json"))]
            if bare:
                raise ValueError(f"--from {quoted(pat)}: {bare[0]} holds no stored statistics ({STATS_DIR}/manifest.json): an "
                                 "audit of an older version, a windowed run or not an audit folder")
        stages = [d for d in found if is_stage_path(d)] if "://" in pat else \
            [d.rstrip("/") for d in glob.glob(pat) if os.path.isdir(d) and is_stage_path(d)]
        found = [d for d in found if not is_stage_path(d)]
        if not found and stages:  # named on purpose: say what it is instead of "nothing matches"
            raise ValueError(f"--from {quoted(pat)}: {stages[0]} is the stage of an audit being written or killed (its "
                             "atomic writer's folder, removed by the next run into the same output), not a run")
        if not found:
            raise ValueError(f"--from {quoted(pat)}: no run folder matches")
        unfinished = [p for p in (unpublished_run_problem(d, "roll it up") for d in found) if p]
        if unfinished:
            raise ValueError(f"--from {quoted(pat)}: {unfinished[0]}")
        runs += sorted(found)
    return runs  # a folder named twice is not merged silently: check_no_overlap names it


def _read_json(path: str) -> dict:
    """A run's JSON file (:func:`~fair_forge_beam.io.edge.read_side_json`: bounded, nesting bounded;
    ``ValueError`` naming it when damaged; a ``run_info.json`` or ``manifest.json`` checked for its
    shape, :func:`~fair_forge_beam.reports.run_files.check_run_info` / ``check_manifest``)."""
    from fair_forge_beam.io.edge import read_side_json
    from fair_forge_beam.reports.run_files import check_manifest, check_run_info

    doc = read_side_json(path, "a run's file")
    if path.endswith("/run_info.json"):
        return check_run_info(doc, path)
    return check_manifest(doc, path) if path.endswith("/manifest.json") else doc


def _settings(manifest: dict) -> dict:
    """What two runs must share to be rolled up (the options their metrics and mode read). The metrics are a set: runs of ``--metrics
    humanity,toxicity`` and ``toxicity,humanity`` score the same (every stored column and slice
    is named by its metric); the roll-up lists them in its first run's order. A run written before
    ``--metrics`` was normalised where it is parsed (:func:`fair_forge_beam.options.metrics_option`)
    may hold ``humanity,humanity,toxicity`` or ``humanity,toxicity,``: the same set."""
    from fair_forge_beam.options import options_unread

    cfg = {k: v for k, v in manifest["config"].items() if k != "inputs"}
    # the options its metrics and mode read: an option of a metric the runs did not run (an old run
    # recorded --toxicity-scorer hurtlex for a humanity run, trial34 T5) is no setting of theirs
    unread = options_unread(cfg.get("metrics") or manifest["options"].get("metrics"), manifest["options"].get("mode"))
    opts = {k: v for k, v in manifest["options"].items() if k not in RUN_ONLY_OPTIONS and k not in unread}
    if isinstance(cfg.get("metrics"), list):
        cfg["metrics"] = sorted({m.strip() if isinstance(m, str) else m for m in cfg["metrics"]} - {""})
    if isinstance(opts.get("metrics"), str):
        opts["metrics"] = ",".join(sorted({m.strip() for m in opts["metrics"].split(",")} - {""}))
    return {"options": opts, "config": cfg, "static": manifest.get("static"), "stored": manifest.get("stored"),
            "not_stored": manifest.get("not_stored"), "stored_slices": manifest.get("stored_slices")}


#: the settings a user sets that decide everything else: named first when runs differ (a frequentist
#: and a Bayesian run also differ in the derived priors, but the user set --mode)
_FIRST_SETTINGS = ("mode", "metrics", "seed", "mc_samples", "ci_level", "slices")


def _first_difference(a: dict, b: dict, path: str = "") -> Optional[str]:
    """The first setting in which two runs' :func:`_settings` differ, in plain words: an option the
    user sets as ``--option: a vs b`` (the options of :data:`_FIRST_SETTINGS` first), else the
    dotted path of the derived field."""
    if not path:
        oa, ob = a.get("options") or {}, b.get("options") or {}
        for k in [*[k for k in _FIRST_SETTINGS if k in oa or k in ob], *sorted(set(oa) | set(ob))]:
            if oa.get(k) != ob.get(k):
                return f"--{k.replace('_', '-')}: {json.dumps(oa.get(k))} vs {json.dumps(ob.get(k))}"
        a, b = {k: v for k, v in a.items() if k != "options"}, {k: v for k, v in b.items() if k != "options"}
    for k in sorted(set(a) | set(b), key=lambda k: (k not in _FIRST_SETTINGS, k)):
        x, y = a.get(k), b.get(k)
        if isinstance(x, dict) and isinstance(y, dict):
            d = _first_difference(x, y, f"{path}{k}.")
            if d:
                return d
        elif x != y:
            return f"{path}{k}: {json.dumps(x)} vs {json.dumps(y)}"
    return None


def load_manifests(runs: Sequence[str]) -> list[dict]:
    """Each run's manifest, checked: the stored statistics schema version, and the same settings
    in every run (mode, seed, draws, metrics, options that build the metrics, slices).

    Raises:
        ValueError: an unreadable or incomplete manifest (naming the run), a version mismatch
            (:class:`~fair_forge_beam.io.session_stats.StatsSchemaMismatch`) or runs of different settings (naming the first difference and both runs).
    """
    from fair_forge_beam.io.session_stats import STATS_DIR, check_run_ids, check_schema_version

    manifests = []
    for run_dir in runs:
        try:
            m = _read_json(f"{run_dir}/{STATS_DIR}/manifest.json")
        except (OSError, ValueError) as exc:  # a truncated or foreign file: named, never a traceback
            raise ValueError(f"{run_dir}: {STATS_DIR}/manifest.json cannot be read ({_one_line(exc)}): "
                             "not a complete run") from None
        if not isinstance(m, dict):
            raise ValueError(f"{run_dir}: {STATS_DIR}/manifest.json is not a manifest (not a JSON object)")
        if "stats_schema_version" not in m:
            raise ValueError(f"{run_dir}: {STATS_DIR}/manifest.json is incomplete (no stats_schema_version): "
                             "not a complete run")
        check_schema_version(m["stats_schema_version"], run_dir)
        missing = [k for k in ("config", "options") if not isinstance(m.get(k), dict)]
        if missing:
            raise ValueError(f"{run_dir}: {STATS_DIR}/manifest.json is incomplete (no {', '.join(missing)}): "
                             "not a complete run")
        bad = _malformed_run_ids(m)
        if bad:  # a field present but of the wrong shape is never read as absent (it would hide an overlap)
            raise ValueError(f"{run_dir}: {STATS_DIR}/manifest.json is invalid ({bad}): not a complete run")
        _check_regular_files(run_dir, m)  # before any shard is opened: a FIFO would be waited on forever
        _check_shards(run_dir, m)
        check_sealed(run_dir, m)  # after the shard checks: their messages say more about a stray name
        check_settings(run_dir, m)  # the manifest's settings are the sealed ones
        check_run_ids(run_dir, m)  # its run id, audit runs and input files too (what an overlap is)
        # the files' numbers, never the text's alone; the text as read, for recheck_runs
        manifests.append({**m, "counts": checked_counts(run_dir, m), _COUNTS_AS_READ: ("counts" in m, m.get("counts"))})
    first = _settings(manifests[0])
    for run_dir, m in zip(runs[1:], manifests[1:]):
        modes = (manifests[0]["options"].get("mode"), m["options"].get("mode"))
        if modes[0] != modes[1]:
            raise ValueError(f"cannot roll up a {modes[0]} run with a {modes[1]} run: {runs[0]} was made with --mode "
                             f"{modes[0]}, {run_dir} with --mode {modes[1]}; roll up runs of one mode")
        diff = _first_difference(first, _settings(m))
        if diff:
            raise ValueError(f"the runs were made with different settings: {runs[0]} and {run_dir} differ in {diff}; "
                             "roll up runs of one configuration")
    return manifests


#: a shard's name: Beam's ``part-SSSSS-of-NNNNN.<ext>``, or a roll-up's copy of one run's shard
#: ``part-rRRR-SSSSS-of-NNNNN.<ext>`` (a roll-up of roll-ups: ``part-rRRR-rQQQ-…``)
#: name prefixes of hidden files, which a run's folders may hold besides what it wrote (:func:`is_hidden`)
_HIDDEN = (".", "_")


def is_hidden(rel: str) -> bool:
    """Whether the path ``rel`` (``/``-separated) names a hidden file: one of its parts starts with
    ``.`` or ``_`` (Finder's ``.DS_Store``, Hadoop's ``.part-….crc`` checksums, ``_SUCCESS``). A run
    writes none in its folders; a roll-up neither reads (:func:`run_shards`) nor seals
    (:func:`sealed_files`) them, as Beam's, Hadoop's and Arrow's dataset readers pass them over
    (trial34 T8: a ``.DS_Store`` made a night impossible to roll up)."""
    return any(part.startswith(_HIDDEN) for part in rel.split("/") if part)

_SHARD_NAME = re.compile(r"part-((?:r\d+-)*)(\d+)-of-(\d+)\.(parquet|jsonl)")

#: the per-record folders a roll-up copies from each run, and their shards' extension
_RECORD_FOLDERS = {"results.parquet/": "parquet", "dead_letter/": "jsonl"}


def run_shards(run_dir: str, folder: str, ext: str = "parquet", required: bool = False,
               open_parquet: bool = False) -> list:
    """The paths of the shards in ``run_dir/folder`` (any filesystem), sorted — the only files of a
    run's folder that a roll-up reads, each one :func:`_check_shards` accepts.

    Every file in the folder must be named as a shard (:data:`_SHARD_NAME`, extension ``ext``), but
    hidden files (:func:`is_hidden`), which are passed over;
    Beam's own shards (no ``r`` prefix) must be complete (``0 … N-1`` of one ``N``); a roll-up's copies
    (``part-rRRR-…``; a copy with no row left is not written) must each be within their ``N``.
    With ``open_parquet``, each Parquet shard's footer is read (a truncated copy fails here).

    Raises:
        ValueError: a file that is not a shard (a stray or duplicated file, e.g.
            ``part-00000-of-00001-copy.parquet``), shards missing or of different counts, no
            shard in a ``required`` folder, or a Parquet shard that cannot be opened — one line
            naming the run and the file.
    """
    from apache_beam.io.filesystems import FileSystems

    folder = folder.rstrip("/") + "/"
    base = f"{run_dir.rstrip('/')}/{folder}"
    try:
        paths = sorted(m.path for r in FileSystems.match([f"{base}*"]) for m in r.metadata_list)
    except Exception:  # noqa: BLE001 - a folder that does not exist matches nothing
        paths = []
    groups: dict = {}
    seen: dict = {}
    inputs = _rollup_inputs(run_dir)  # None: an audit, whose folders hold Beam's shards only
    paths = [p for p in paths if not is_hidden(p.rstrip("/").rsplit("/", 1)[-1])]
    for path in paths:
        name = path.rstrip("/").rsplit("/", 1)[-1]
        g = _SHARD_NAME.fullmatch(name)
        copies = [int(r[1:]) for r in g[1].split("-") if r] if g else []
        if (not g or g[4] != ext or name != _shard_name(copies, int(g[2]), int(g[3]), ext)
                or (copies and (inputs is None or copies[0] >= inputs))):
            raise ValueError(f"{run_dir}: {folder}{name} is not a shard of the run's outputs (shards are named "
                             f"part-SSSSS-of-NNNNN.{ext}, and a roll-up's copies part-rRRR-SSSSS-of-NNNNN.{ext}, R one "
                             "of its runs): a stray or duplicated file, which a roll-up would read as more data; "
                             "remove it, or leave the run out")
        key = (g[1], int(g[2]), int(g[3]))
        if key in seen:  # cannot happen with canonical names; kept as the invariant the readers rely on
            raise ValueError(f"{run_dir}: {folder}{name} and {seen[key]} are the same shard")
        seen[key] = name
        groups.setdefault(g[1], set()).add((int(g[2]), int(g[3]), name))
    if required and "" not in groups:
        raise ValueError(f"{run_dir}: {folder} holds 0 shard(s) of the stored statistics: not a complete run "
                         "(re-run that audit, or leave it out)")
    for prefix, shards in sorted(groups.items()):
        totals = {n for _, n, _ in shards}
        indices = {i for i, _, _ in shards}
        complete = indices == set(range(next(iter(totals)))) if prefix == "" else max(indices) < min(totals)
        if len(totals) != 1 or not complete:
            have = f"{len(indices)} of {next(iter(totals))} shard(s)" if len(totals) == 1 else \
                f"{len(shards)} shard(s) of different totals ({', '.join(sorted(n for *_, n in shards))})"
            raise ValueError(f"{run_dir}: {folder} holds {have}"
                             + (f" named part-{prefix}…" if prefix else "")
                             + ": not a complete run (re-run that audit, or leave it out)")
    if open_parquet and ext == "parquet":
        import pyarrow.parquet as pq

        from fair_forge_beam.io.session_stats import open_stored

        from fair_forge_beam.io.session_stats import stored_rows_problem

        for path in paths:
            try:
                with open_stored(path) as f:
                    problem = stored_rows_problem(pq.ParquetFile(f))
            except Exception as exc:  # noqa: BLE001 - pyarrow's errors name no file ("<Buffer>")
                raise ValueError(f"{run_dir}: {folder}{path.rsplit('/', 1)[-1]} cannot be read as Parquet "
                                 f"({_one_line(exc)}): a truncated or damaged shard; re-run that audit, or leave "
                                 "it out") from None
            if problem:  # a stored row is data from outside: checked here, never deep in the engine (issue 28)
                raise ValueError(f"{run_dir}: {folder}{path.rsplit('/', 1)[-1]}: {problem}: not a row this package "
                                 "writes (an edited or foreign file); re-run that audit, or leave it out")
    return paths


def _shard_name(copies: Sequence[int], index: int, total: int, ext: str) -> str:
    """The one name Beam gives shard ``index`` of ``total`` (``part-00000-of-00001.parquet``), with
    a roll-up's copy prefixes (``r000-``, outermost first) in front: any other spelling of the
    same numbers (``part-0-of-1``) is a copy made by hand."""
    return "part-" + "".join(f"r{r:03d}-" for r in copies) + f"{index:05d}-of-{total:05d}.{ext}"


def _rollup_inputs(run_dir: str) -> Optional[int]:
    """How many runs the roll-up in ``run_dir`` merged (its ``run_info.json``), ``None`` for a run
    that is not a roll-up (or whose ``run_info.json`` cannot be read: its copies are then refused)."""
    try:
        info = _read_json(f"{run_dir.rstrip('/')}/run_info.json")
    except (OSError, ValueError):
        return None
    runs = (info.get("rollup") or {}).get("runs") if isinstance(info, dict) else None
    return len(runs) if isinstance(runs, list) and runs else None


def _one_line(exc: Exception) -> str:
    """Why ``exc`` happened, on one line and in plain words (:func:`~fair_forge_beam.plain.plain_reason`:
    never a class name such as ``ArrowInvalid``, issue 28); pyarrow's ``'<Buffer>'`` is "the file"."""
    from fair_forge_beam.plain import plain_reason

    return " ".join(plain_reason(exc).replace("'<Buffer>'", "the file").split())


def _check_shards(run_dir: str, manifest: dict) -> None:
    """Every folder of the run that a roll-up reads holds its shards and nothing else
    (:func:`run_shards`): the stored statistics and slice tables (required: a table with a shard
    missing, or none, is found before it is read, never rolled up as if its sessions had not
    happened — issue 27), each metric's ``sessions/<metric>/``, ``results.parquet/`` and
    ``dead_letter/``. A file the readers would take but the check would not (a
    ``part-00000-of-00001-copy.parquet``) is a usage error naming it (issue 28): the readers read
    :func:`run_shards`' list, never a glob of their own.

    Raises:
        ValueError: see :func:`run_shards`.
    """
    stored = set((manifest.get("stored") or {}).values()) | set((manifest.get("stored_slices") or {}).values())
    for folder in sorted(stored):
        run_shards(run_dir, folder, "parquet", required=True, open_parquet=True)
    metrics = [m for m in (manifest.get("config") or {}).get("metrics") or () if m in (manifest.get("stored") or {})]
    for m in metrics:
        run_shards(run_dir, f"sessions/{m}/", "parquet", open_parquet=True)
    for folder, ext in _RECORD_FOLDERS.items():
        run_shards(run_dir, folder, ext, open_parquet=True)


def sealed_files(folder: str, manifest: dict) -> list[str]:
    """The paths, relative to the output folder ``folder`` (any filesystem) and sorted, of every
    file under :data:`~fair_forge_beam.io.session_stats.SEALED_FOLDERS` but the manifest itself
    and Beam's temporary files (``beam-temp-*``, never published) and hidden files (:func:`is_hidden`), and of the files ``manifest``'s
    run seals besides (:func:`~fair_forge_beam.io.session_stats.sealed_by`: ``results.json``,
    ``run_info.json``) that are there: what :func:`seal_manifest` lists and :func:`check_sealed`
    compares."""
    from apache_beam.io.filesystems import FileSystems

    from fair_forge_beam.io.session_stats import MANIFEST, SEALED_FOLDERS, sealed_by
    from fair_forge_beam.reports.output_folder import _has_temporary_part, _list_files

    base = folder.rstrip("/") + "/"
    out = [name for name in sealed_by(manifest) if "/" not in name and FileSystems.exists(base + name)]
    for sub in SEALED_FOLDERS:
        for path in _list_files(base + sub.rstrip("/")):
            rel = path[len(base):] if path.startswith(base) else path
            if rel != MANIFEST and not _has_temporary_part(rel) and not is_hidden(rel):
                out.append(rel)
    return sorted(out)


def seal_manifest(folder: str) -> dict:
    """Add to ``folder``'s ``stats/manifest.json`` (written by the pipeline) its ``files``: the
    size and sha256 (:func:`file_digest`) of every file :func:`sealed_files` lists, and write it
    again (the same JSON layout). Called once every file a roll-up reads is in place: by the
    audit's launcher after its pipeline, by a Flex Template job's publishing step
    (:func:`~fair_forge_beam.reports.output_folder.publish_after`'s ``prepare``) and by a
    roll-up after its copies. Returns the manifest written.

    Raises:
        ValueError: the manifest cannot be read (:func:`~fair_forge_beam.io.edge.read_side_json`).
        OSError: a file cannot be read, or the manifest written."""
    from apache_beam.io.filesystems import FileSystems

    from fair_forge_beam.io.edge import read_side_json
    from fair_forge_beam.io.session_stats import MANIFEST

    base = folder.rstrip("/")
    doc = read_side_json(f"{base}/{MANIFEST}", "a run's stats/manifest.json")
    files = {}
    for rel in sealed_files(base, doc):
        size, sha256 = file_digest(f"{base}/{rel}")
        files[rel] = {"size": size, "sha256": sha256}
    from fair_forge_beam.io.secrets import scrub_known

    doc = scrub_known({**{k: v for k, v in doc.items() if k != "files"}, "files": files})  # as the pipeline wrote it
    with FileSystems.create(f"{base}/{MANIFEST}") as f:
        f.write(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    return doc


def seal_more(folder: str, rel: str) -> None:
    """Add the file ``rel`` of ``folder`` (one its run seals, written after :func:`seal_manifest`:
    ``run_info.json``, by the launcher of an audit or a roll-up) to the manifest's ``files``, its
    size and sha256; the other entries are kept, never hashed again. A folder without a manifest (a
    run that stored no statistics) is left as it is.

    Raises:
        ValueError: the manifest cannot be read.
        OSError: the file cannot be read, or the manifest written."""
    from apache_beam.io.filesystems import FileSystems

    from fair_forge_beam.io.edge import read_side_json
    from fair_forge_beam.io.secrets import scrub_known
    from fair_forge_beam.io.session_stats import MANIFEST, sealed_by

    base = folder.rstrip("/")
    if not FileSystems.exists(f"{base}/{MANIFEST}"):
        return
    doc = read_side_json(f"{base}/{MANIFEST}", "a run's stats/manifest.json")
    if rel not in sealed_by(doc):
        return  # a run of a version that did not seal it: its readers do not ask
    size, sha256 = file_digest(f"{base}/{rel}")
    doc = scrub_known({**doc, "files": {**(doc.get("files") or {}), rel: {"size": size, "sha256": sha256}}})
    with FileSystems.create(f"{base}/{MANIFEST}") as f:
        f.write(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False).encode("utf-8"))


def _listed_problem(files: object) -> Optional[str]:
    """What is wrong with a manifest's ``files`` (``None``: a map of path → ``{"size": int,
    "sha256": 64 hex digits}``)."""
    if not isinstance(files, dict):
        return "no files" if files is None else f"files is {type(files).__name__}, not an object"
    for rel, entry in files.items():
        ok = (isinstance(entry, dict) and type(entry.get("size")) is int and entry["size"] >= 0
              and isinstance(entry.get("sha256"), str) and len(entry["sha256"]) == 64
              and all(c in "0123456789abcdef" for c in entry["sha256"]))
        if not ok:
            return f"files[{json.dumps(rel)}] is not {{size, sha256}}"
    return None


def _check_regular_files(run_dir: str, manifest: dict) -> None:
    """Every file of ``run_dir``'s sealed folders (:func:`sealed_files`) is a regular file.

    Raises:
        ValueError: one line naming a directory, FIFO, socket or device in its place (opening a
            FIFO to read its footer or hash waits for a writer forever)."""
    from fair_forge_beam.io.edge import NotARegularFile, check_regular_file

    for rel in sealed_files(run_dir, manifest):
        try:
            check_regular_file(f"{run_dir.rstrip('/')}/{rel}", run_dir)
        except NotARegularFile as exc:
            raise ValueError(f"{exc}: re-run that audit, or leave it out") from None


def check_sealed(run_dir: str, manifest: dict) -> None:
    """Every file of ``run_dir`` under :data:`~fair_forge_beam.io.session_stats.SEALED_FOLDERS`
    is one its manifest's ``files`` lists, of the listed size and sha256, and every listed file is
    there: a roll-up reads only what the run wrote (issue 28: another run's shard copied in under
    Beam's exact name was rolled up). Files are compared by their names first, then hashed
    (:func:`file_digest`). A roll-up's copy ``part-rRRR-…`` is then the one that roll-up wrote:
    which run R was is settled by the hash, not by the name.

    Raises:
        ValueError: one line naming the run and the file — not listed (a file copied in), listed
            but missing, or of another size or hash (changed or replaced) — or a ``files`` field
            missing or of the wrong shape."""
    from fair_forge_beam.io.session_stats import MANIFEST

    problem = _listed_problem(manifest.get("files"))
    if problem:
        raise ValueError(f"{run_dir}: {MANIFEST} is {'incomplete' if problem == 'no files' else 'invalid'} "
                         f"({problem}): not a complete run (re-run that audit, or leave it out)")
    listed = manifest["files"]
    present = sealed_files(run_dir, manifest)
    for rel in present:
        if rel not in listed:
            raise ValueError(f"{run_dir}: {rel} is not a file the run wrote ({MANIFEST} does not list it): a file "
                             "copied in (e.g. another run's shard), which a roll-up would read as this run's data; "
                             "remove it, or leave the run out")
    there = set(present)
    for rel in sorted(listed):
        if rel not in there:
            raise ValueError(f"{run_dir}: {rel} is missing ({MANIFEST} lists it, {listed[rel]['size']} bytes): not a "
                             "complete run (re-run that audit, or leave it out)")
    base = run_dir.rstrip("/")
    for rel in present:
        try:
            size, sha256 = file_digest(f"{base}/{rel}")
        except OSError as exc:
            raise ValueError(f"{run_dir}: {rel} cannot be read ({_one_line(exc)}): re-run that audit, or leave it "
                             "out") from None
        want = listed[rel]
        if (size, sha256) != (want["size"], want["sha256"]):
            raise ValueError(f"{run_dir}: {rel} is not the file the run wrote ({size} bytes, sha256 {sha256[:16]}…; "
                             f"{MANIFEST} lists {want['size']} bytes, sha256 {want['sha256'][:16]}…): changed or "
                             "replaced since (e.g. another run's shard copied over it); re-run that audit, or leave "
                             "it out")


def check_settings(run_dir: str, manifest: dict) -> None:
    """The manifest's settings (:func:`~fair_forge_beam.io.session_stats.manifest_settings`) are
    those its sealed :data:`~fair_forge_beam.io.session_stats.SETTINGS` holds (check it after
    :func:`check_sealed`): the manifest cannot list its own hash, and a roll-up builds its metrics
    from them (trial 28e B6: an edited ``mode`` or ``mc_samples`` ended in a Beam traceback).

    Raises:
        ValueError: one line naming the run and the first setting that differs."""
    from apache_beam.io.filesystems import FileSystems

    from fair_forge_beam.io.session_stats import MANIFEST, SETTINGS, manifest_settings

    if SETTINGS not in (manifest.get("files") or {}):
        raise ValueError(f"{run_dir}: {MANIFEST} is incomplete (no {SETTINGS} in its files): not a complete run "
                         "(re-run that audit, or leave it out)")
    try:
        with FileSystems.open(f"{run_dir}/{SETTINGS}") as f:
            sealed = json.loads(read_all(f).decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{run_dir}: {SETTINGS} cannot be read ({_one_line(exc)}): re-run that audit, or leave it "
                         "out") from None
    listed = json.loads(json.dumps(manifest_settings(manifest)))
    if listed != sealed:
        diff = _first_difference(sealed if isinstance(sealed, dict) else {}, listed) or "its settings"
        raise ValueError(f"{run_dir}: {MANIFEST} is not the manifest the run wrote: it differs from the sealed "
                         f"{SETTINGS} in {diff} (written vs now; an edited manifest): re-run that audit, or leave it "
                         "out")


def records_read(run_dir: str, manifest: dict) -> int:
    """The run's input records that gave an interaction (``summary.records_read``, for a
    ``coverage rejected_share`` gate): the records of the reader's summaries in ``stats/sessions/``
    (column ``reader``, one entry per record: each row holds the records of its language, so the rows
    of a session add up to its records once). Not a manifest count: counted from the sealed files, so
    it needs no check; a session cut across runs has its own records in each, and their sum is the union's."""
    import pyarrow.compute as pc

    stored = manifest.get("stored") or {}
    table = sorted(set(stored.values()))[0] if stored else None
    n = 0
    for path in run_shards(run_dir, table) if table else ():
        t = _read_parquet(path, ["reader"])
        n += int(pc.sum(pc.list_value_length(t.column("reader").combine_chunks())).as_py() or 0)
    return n


def checked_counts(run_dir: str, manifest: dict) -> dict:
    """The run's ``counts`` as a roll-up takes them: each number its sealed files also hold is
    compared with them (the manifest cannot list its own hash, so an edited count would otherwise
    be rolled up as data — issue 27's trial added 1000 to ``interactions_read``, exit 0).

    * ``interactions_read``: the interactions of the reader's record summaries (the ``reader``
      column of ``stats/sessions/``: every session read keeps its row, scored or not; each row holds
      the records of its language, so a session of several languages counts once — a run whose rows
      each held all of a session's records, written before, is named so: :func:`_repeated_records`);
    * ``interactions_read_by_slice``: the same per ``assistant_id=…`` / ``language=…`` (the
      session row's), for each such dimension the manifest counts or the run sliced by;
    * ``dead_letters``: per stage, the lines of ``dead_letter/``; the reason groups returned are
      the files' own (:mod:`~fair_forge_beam.reasons`) (the manifest's counts per stage must match them).

    * ``quality``: per kind, the run's sealed ``stats/quality_counts.json``
      (:data:`~fair_forge_beam.io.session_stats.QUALITY_COUNTS`; ``data_quality/`` cannot hold them:
      a roll-up's holds only its session stage's warnings). A run written before that file
      existed (not in its ``files``) keeps the manifest's numbers.

    Raises:
        ValueError: one line naming the run, the count, the manifest's number and the files'.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    from apache_beam.io.filesystems import FileSystems

    from fair_forge_beam.io.session_stats import MANIFEST, QUALITY_COUNTS
    from fair_forge_beam.reasons import add_reason, shown_reasons
    from fair_forge_beam.slices import CORE_SLICE_FIELDS, SLICE_DIMENSIONS

    counts = manifest.get("counts")
    if not isinstance(counts, dict):
        raise ValueError(f"{run_dir}: {MANIFEST} is incomplete (no counts): not a complete run (re-run that audit, "
                         "or leave it out)")

    def mismatch(what: str, listed, found) -> ValueError:
        return ValueError(f"{run_dir}: {MANIFEST} counts {what} = {listed}, but the run's files hold {found}: the "
                          "manifest was changed since the run wrote it (its counts are checked against the files "
                          "it seals); re-run that audit, or leave it out")

    stored = manifest.get("stored") or {}
    if not stored and manifest.get("not_stored"):  # nothing to roll up (and no session rows to check the counts against)
        raise ValueError(f"{run_dir}: none of the run's metrics stored its statistics (" + "; ".join(
            f"{m}: {not_stored_text(why)}" for m, why in sorted(manifest["not_stored"].items()))
            + "): a roll-up merges stored statistics")
    table = sorted(set(stored.values()))[0] if stored else None
    dims = tuple(d for d in CORE_SLICE_FIELDS
                 if d in (manifest["options"].get("slices") or SLICE_DIMENSIONS)
                 or any(str(k).split("=", 1)[0] == d for k in counts.get("interactions_read_by_slice") or {}))
    read, by_slice = 0, {}
    for path in run_shards(run_dir, table) if table else ():
        t = _read_parquet(path, ["reader", *CORE_SLICE_FIELDS])
        records = t.column("reader").combine_chunks()
        items = pc.list_value_length(pc.struct_field(pc.list_flatten(records), "items")).fill_null(0)
        per = pa.table({"s": pc.list_parent_indices(records), "n": items}).group_by("s").aggregate([("n", "sum")])
        n = np.zeros(len(t), np.int64)  # a session's interactions, over its records
        n[per.column("s").to_numpy()] = per.column("n_sum").to_numpy()
        read += int(n.sum())
        for d in dims:
            for value, k in zip(t.column(d).to_pylist(), n):
                if k:
                    by_slice[f"{d}={value}"] = by_slice.get(f"{d}={value}", 0) + int(k)
    listed = counts.get("interactions_read")
    if type(listed) is not int or listed != read:
        if _repeated_records(run_dir, table):
            raise ValueError(f"{run_dir}: its stored statistics repeat a session's reader summary on each of its "
                             "languages' rows (written by an earlier fair_forge_beam: a session of several languages "
                             f"counted its interactions once per language, {read} for the manifest's {listed}); "
                             "re-run that audit, or leave it out")
        raise mismatch("interactions_read", listed, read)
    listed = {str(k): v for k, v in (counts.get("interactions_read_by_slice") or {}).items()}
    for key in sorted(set(listed) | set(by_slice)):
        if listed.get(key, 0) != by_slice.get(key, 0) or (key in listed and type(listed[key]) is not int):
            raise mismatch(f"interactions_read_by_slice[{json.dumps(key)}]", listed.get(key, 0), by_slice.get(key, 0))
    groups: dict = {}
    for path in run_shards(run_dir, "dead_letter/", "jsonl"):
        with FileSystems.open(path) as f:
            for line in read_all(f).decode("utf-8").splitlines():
                if line.strip():
                    record = json.loads(line)
                    add_reason(groups, str(record.get("stage")), str(record.get("reason")))
    dead = shown_reasons(groups)
    per_stage: dict = {}
    for entry in counts.get("dead_letters") or ():
        ok = isinstance(entry, list) and len(entry) == 3 and type(entry[2]) is int
        if not ok:
            raise mismatch("dead_letters", json.dumps(entry), "[stage, reason kind, count] entries")
        per_stage[str(entry[0])] = per_stage.get(str(entry[0]), 0) + entry[2]
    found: dict = {}
    for (stage, _), k in dead.items():
        found[stage] = found.get(stage, 0) + k
    for stage in sorted(set(per_stage) | set(found)):
        if per_stage.get(stage, 0) != found.get(stage, 0):
            raise mismatch(f"dead_letters of stage {json.dumps(stage)}", per_stage.get(stage, 0), found.get(stage, 0))
    quality = counts.get("quality") if counts.get("quality") is not None else {}
    if not isinstance(quality, dict):
        raise mismatch("quality", json.dumps(quality), "{kind: count}")
    if QUALITY_COUNTS in (manifest.get("files") or {}):  # check_sealed: it is the file the run wrote
        try:
            with FileSystems.open(f"{run_dir}/{QUALITY_COUNTS}") as f:
                sealed = json.loads(read_all(f).decode("utf-8"))["quality"]
            ok = isinstance(sealed, dict) and all(type(n) is int for n in sealed.values())
        except (OSError, ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            raise ValueError(f"{run_dir}: {QUALITY_COUNTS} is not the run's quality counts ({{\"quality\": {{kind: "
                             "count}}); re-run that audit, or leave it out")
        for kind in sorted(set(map(str, quality)) | set(sealed)):
            listed = quality.get(kind, 0)
            if type(listed) is not int or listed != sealed.get(kind, 0):
                raise mismatch(f"quality[{json.dumps(kind)}]", json.dumps(listed), sealed.get(kind, 0))
    return {**counts, "interactions_read": read, "interactions_read_by_slice": dict(sorted(by_slice.items())),
            "dead_letters": sorted([*k, n] for k, n in dead.items())}


def _repeated_records(run_dir: str, table: Optional[str]) -> bool:
    """Whether a record (declared turn, source, position) of the reader's summaries in the run's
    stored ``table`` is on several rows of one session: how runs written before each row held the
    records of its own language only stored a session of several languages (each row held all its
    records; trial49b B2)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = []
    for path in run_shards(run_dir, table) if table else ():
        t = _read_parquet(path, ["reader", "session_id", "assistant_id"])
        records = t.column("reader").combine_chunks()
        at = pc.list_parent_indices(records)
        values = pc.list_flatten(records)
        parts.append(pa.table({"s": pc.take(session_texts(t.column("session_id"), t.column("assistant_id")), at),
                               **{f: pc.struct_field(values, f) for f in ("declared", "source", "position")}}))
    if not parts:
        return False
    counted = pa.concat_tables(parts).group_by(["s", "declared", "source", "position"]).aggregate([([], "count_all")])
    return bool(len(counted) and pc.max(counted.column("count_all")).as_py() > 1)


#: the key of a checked manifest (:func:`load_manifests`) holding its ``counts`` as read (``counts``
#: holds them as its sealed files do)
_COUNTS_AS_READ = "_counts_as_read"


class RunsChanged(RuntimeError):
    """A run folder changed while the roll-up read it (:func:`recheck_runs`): one line, exit 1,
    nothing published."""


def recheck_runs(runs: Sequence[str], manifests: Sequence[dict]) -> None:
    """What the pre-flight checked (:func:`load_manifests`) is what the pipeline read: each run's
    manifest is read again and must be the one checked (its run id, settings and sealed files'
    list: another run published into the folder meanwhile has another), its counts again those
    its sealed files hold (:func:`checked_counts`), and every sealed file again the one listed
    (:func:`check_sealed`: names, sizes and sha256). Called after the pipeline and the copies read
    the runs, before anything is published (issue 28, trial 28e B8: a night re-published during a
    roll-up gave totals of the old night and slices of the new one, exit 0).

    Raises:
        RunsChanged: one line naming the run and what changed."""
    from fair_forge_beam.io.session_stats import MANIFEST

    for run_dir, before in zip(runs, manifests):
        try:
            now = _read_json(f"{run_dir}/{MANIFEST}")
            if not isinstance(now, dict):
                raise ValueError(f"{MANIFEST} is not a JSON object")
            had, counts = before[_COUNTS_AS_READ]
            changed = now != {**{k: v for k, v in before.items() if k not in ("counts", _COUNTS_AS_READ)},
                              **({"counts": counts} if had else {})}
            if not changed:
                check_sealed(run_dir, before)
        except (OSError, ValueError) as exc:
            raise RunsChanged(f"{run_dir} changed while the roll-up read it ({_one_line(exc)}); nothing was "
                              "published: roll up again once its run is complete") from None
        if changed:
            what = (f"its run id is {json.dumps(now.get('run_id'))}, was {json.dumps(before.get('run_id'))}"
                    if now.get("run_id") != before.get("run_id") else f"its {MANIFEST} is not the one checked")
            raise RunsChanged(f"{run_dir} changed while the roll-up read it ({what}: re-published or edited); nothing "
                              "was published: roll up again once its run is complete")


def run(argv: Optional[Sequence[str]] = None) -> dict:
    """Run the roll-up; returns its ``results.json`` content. Raises ``SystemExit(2)`` on a usage
    error, :class:`~fair_forge_beam.reports.gates.GatesFailed` (``SystemExit(3)``) when a gate fails."""
    from fair_forge_beam.options import reject_unknown_arguments
    from fair_forge_beam.progress import QuietLogs
    from fair_forge_beam.reports.load import read_baseline, read_run_info
    from fair_forge_beam.reports.output_folder import check_no_other_run, check_output_folder

    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args, beam_args = parser.parse_known_args(argv)
    from fair_forge_beam.console import expect_output

    expect_output(args.output)  # an interrupt before the stage names it (untouched, or not created)
    args.argv = argv  # for run_info.json: the command as given, also when called from Python
    with QuietLogs() as levels:
        if args.quiet:
            levels.quiet()
        reject_unknown_arguments(parser, beam_args)
        if args.no_report and args.inconclusive_width is not None:  # the audit's rule (IGNORED_BY_RUN, trial34 T4)
            from fair_forge_beam.options import IGNORED_BY_RUN, RUN_KIND_TEXT

            parser.error(f"--inconclusive-width: not read by {RUN_KIND_TEXT['no-report']}: "
                         f"{IGNORED_BY_RUN['no-report']['inconclusive_width']}; drop --inconclusive-width")
        try:
            shown = resolve_runs(args.runs)  # as given: every message and run_info.json name the runs so
            # and as workers read them, in their own folder (trial39 T2): each local run made absolute
            args.runs_shown, runs = shown, [r if "://" in r else os.path.abspath(r) for r in shown]
            check_output_folder(args.output, reads=shown)  # never one of the runs, inside one or around one
            check_no_other_run(args.output, "audit", shown="rollup")  # the audit's layout: never over generate's run
            manifests = load_manifests(shown)
            members = check_no_overlap(shown, manifests)
            baseline = read_baseline(args.baseline)
            # its settings, told apart from the roll-up's before a gate reads it (trial34 T1)
            baseline_info = read_run_info(args.baseline) if baseline is not None else None
        except ValueError as exc:
            parser.error(str(exc))
        try:
            doc, gate_failure = _rollup(args, beam_args, runs, manifests, baseline, members, baseline_info)
        except ValueError as exc:  # a configuration that cannot be rebuilt (gates, metrics): a usage error
            parser.error(str(exc))
        except RunsChanged as exc:  # not a usage error: the same command succeeds once the runs stay put
            say(f"{parser.prog}: error: {exc}", file=sys.stderr)
            raise SystemExit(1) from None
    if gate_failure is not None:
        raise gate_failure  # after publishing: a valid roll-up that failed a check
    return doc


def _rollup(args, beam_args, runs: list[str], manifests: list[dict], baseline: Optional[dict],
            members: Sequence[str], baseline_info: Optional[dict] = None) -> tuple:
    """The roll-up's pipeline and files, written into a stage published as ``--output`` only when it
    succeeds (:func:`~fair_forge_beam.reports.output_folder.staged_output`); returns ``(results.json's
    content, the GatesFailed to raise after publishing or None)``."""
    from apache_beam.io.filesystems import FileSystems

    from fair_forge_beam.engine import Engine, SessionLayout, engine_spec, slice_combiner
    from fair_forge_beam.io.session_stats import (WriteSessionStats, count_parts, reader_extras, slice_accumulator_columns,
                                                  slices_stored)
    from fair_forge_beam.metrics.registry import build_metric, interaction_parquet_fields
    from fair_forge_beam.metrics.registry import statistical_mode
    from fair_forge_beam.reports.gates import (GatesFailed, baseline_and_checks, check_gates, counts_records, read_count_dimensions,
                                               resolve_gates,
                                               uses_baseline)
    from fair_forge_beam.reports.empty_run import empty_run_reason, fail_empty_run
    from fair_forge_beam.reports.load import read_results
    from fair_forge_beam.reports.launcher_reports import write_launcher_reports
    from fair_forge_beam.reports.output_folder import run_id_of, staged_output
    from fair_forge_beam.reports.results import results_config, scored_tests, utc_timestamp, write_outputs, write_run_info
    from fair_forge_beam.reports.summary import console_summary
    from fair_forge_beam.beam_pipeline import pipeline_options, run_pipeline
    from fair_forge_beam.slices import SLICE_DIMENSIONS

    first = manifests[0]
    options = dict(first["options"])
    mode = statistical_mode(options)
    slices = tuple(options.get("slices") or SLICE_DIMENSIONS)
    stored = dict(first.get("stored") or {})
    not_rebuilt = {m: f"not stored by the audits: {why}" for m, why in (first.get("not_stored") or {}).items()}
    metrics = [m for m in first["config"]["metrics"] if m in stored]
    if not metrics:
        raise ValueError("none of the runs' metrics stored its statistics (" + "; ".join(
            f"{m}: not stored by the audits: {not_stored_text(why)}"
            for m, why in sorted((first.get("not_stored") or {}).items())) + ")")
    transforms = {m: build_metric(m, mode, {**options, "slices": slices}) for m in metrics}
    specs = {m: engine_spec(t) for m, t in transforms.items()}
    gates = resolve_gates(args.gate or [], metrics, mode.is_bayesian, slices, baseline, command="rollup")
    if baseline is not None and not uses_baseline(gates):
        raise ValueError("--baseline is read by regression gates ('regression <metric> [<field>] not worse') and "
                         "'coverage assistants_of_baseline'; no such gate is given: add one, or drop --baseline")
    inputs = [i for m in manifests for i in m["config"].get("inputs", [])]
    config = results_config(metrics, mode, inputs, slices)
    static = {m: first["static"][m] for m in metrics}
    with staged_output(args.output) as out:  # an exception (SystemExit too) leaves --output untouched
        shown = folder_path(args.output)
        input_files = sorted({tuple(f) for m in manifests for f in m.get("input_files") or ()})
        stats = WriteSessionStats(out, audit_manifest(config, options, static, run_id_of(out), members, input_files))
        tables = sorted({stored[m] for m in metrics})  # e.g. ["stats/sessions/"]
        groups: dict[tuple, list[str]] = {}
        for m in metrics:
            groups.setdefault(specs[m].slices, []).append(m)
        layouts = [(SessionLayout([specs[n] for n in names], reader_extras()), names)
                   for names in groups.values()]
        started = time.time()
        log.info("rolling up %d runs: %s; metrics %s", len(runs), ", ".join(runs), metrics)
        table_of = [stored[names[0]] for _, names in layouts]  # each engine group's stored table
        merged = _merged_sessions(runs, tables, all(slices_stored(lay, names) for lay, names in layouts))
        scored, left_out = _copied_scored(runs, metrics, merged, scored_tests(specs))
        log.info("rollup: %s sessions found in several runs (or rows) are merged and reduced again; every other "
                 "session's stored outputs are reused", "all" if merged is None else len(merged))
        # per engine group, the metrics whose slices are the runs' stored slice accumulators merged, less each
        # run's part of every merged session, plus the merged session (none: rebuilt from every session)
        stored_slices = dict(first.get("stored_slices") or {})
        fuseds = [slice_combiner(lay.specs) for lay, _ in layouts]
        slice_cols = [[(c, slot) for c, slot in slice_accumulator_columns(lay, fused, names)
                       if lay.specs[slot].name in stored_slices] if merged is not None else []
                      for (lay, names), fused in zip(layouts, fuseds)]
        slice_tables = [stored_slices[lay.specs[cols[0][1]].name] if cols else None
                        for (lay, _), cols in zip(layouts, slice_cols)]
        from_stored = [{slot for _, slot in cols} for cols in slice_cols]
        if any(slice_cols):
            log.info("rollup: the slices of %s are the runs' stored slice accumulators, corrected for the merged "
                     "sessions only", ", ".join(lay.specs[slot].name for (lay, _), cols in zip(layouts, slice_cols)
                                               for _, slot in cols))
        _check_stored_shapes(runs, slice_tables, slice_cols, fuseds, options)
        # each stored session table's reused rows are written where the pipeline reads the file (once per
        # file: the first engine group reading it), staged, then moved into place after the pipeline
        copies: dict = {}  # (run index, path) -> (staged path, final path)
        files = []
        for j, r in enumerate(runs):
            for g in range(len(layouts)):
                for path in run_shards(r, table_of[g]):
                    staged = None
                    if merged is not None and (j, path) not in copies:
                        staged = f"{out}/{_REUSED_STAGE}/{len(copies):05d}.parquet"
                        name = path.rsplit("/", 1)[-1]
                        copies[(j, path)] = (staged, f"{out}/{table_of[g]}part-r{j:03d}-{name[len('part-'):]}")
                    files.append((j, path, g, staged))
        copied_tables = {table_of[g] for g in range(len(layouts))} if merged is not None else set()
        with run_pipeline(pipeline_options(beam_args)) as p:
            stored_rows = (
                p
                | "StoredFiles" >> beam.Create(files)
                | "SpreadFiles" >> beam.Reshuffle()
                | "ReadStored" >> beam.ParDo(_ReadStoredRows(layouts, merged, from_stored)).with_outputs(
                    "quality", *[f"g{g}" for g in range(len(layouts))], main="merge")
            )
            sessions = (
                stored_rows.merge
                | "GroupSessions" >> beam.GroupByKey()
                | "MergeRuns" >> beam.ParDo(_MergeRunsOfSession(layouts, from_stored)).with_outputs(
                    "quality", *[f"g{g}" for g in range(len(layouts))], *[f"m{g}" for g in range(len(layouts))])
            )
            results: dict = {}
            for g, names in enumerate(groups.values()):
                label = "" if g == 0 else str(g)
                stored_accs = subtracted = None
                if slice_cols[g]:
                    stored_accs = (
                        p
                        | f"StoredSliceFiles{label}" >> beam.Create([tuple(
                            (j, path) for j, r in enumerate(runs) for path in run_shards(r, slice_tables[g]))])
                        | f"ReadStoredSlices{label}" >> beam.FlatMap(_read_slices, fuseds[g], slice_cols[g])
                    )
                    subtracted = sessions[f"m{g}"]
                engine = Engine([specs[n] for n in names], on_session_accumulators=stats, from_accumulators=True,
                                session_extras=reader_extras(),
                                on_slice_accumulators=stats.slices, stored_slices=stored_accs,
                                subtracted_sessions=subtracted, stored_slices_merged=True)
                inputs = (sessions[f"g{g}"], stored_rows[f"g{g}"]) | f"SessionsAndReduced{label}" >> beam.Flatten()
                res = inputs | f"Engine{label}" >> engine
                results.update({n: res[n] for n in names})
            counts = p | "StoredCounts" >> beam.Create(
                [c for m in manifests for c in count_parts(m.get("counts") or {})]
                # a rejected_share gate's records_read: the runs' reader summaries (records_read)
                + ([("records", None, sum(records_read(r, m) for r, m in zip(runs, manifests)))]
                   if counts_records(gates) else [])
                + [("scored", m, n) for m, n in scored.items()]
                + [("left_out", m, n) for m, n in left_out.items()])
            empty = p | "NoRecords" >> beam.Create([])
            quality = (sessions["quality"], stored_rows["quality"]) | "SessionQuality" >> beam.Flatten()
            read = {"interactions": empty, "dead_letter": empty, "quality": quality, "session_quality": quality}
            write_outputs(read, results, out, interaction_parquet_fields(metrics), config, static, stats=stats,
                          read_counts=counts, write_interactions=False,
                          read_slice_dims=read_count_dimensions(gates, slices), count_records=counts_records(gates),
                          scored_tests=scored_tests(specs))
        _place_reused_rows(out, copies.values())
        _copy_record_outputs(runs, out, _record_turn_maps(runs, tables, merged))
        _copy_reused_rows(runs, out, [*(t for t in tables if t not in copied_tables),
                                      *(f"sessions/{m}/" for m in metrics)], merged)
        recheck_runs(runs, manifests)  # the runs read are those checked (after the copies, before publishing)
        seal_manifest(out)  # every file a roll-up of this roll-up reads is in place: its size and hash
        elapsed = time.time() - started
        doc = read_results(out)
        reason = empty_run_reason(doc, coverage_gated=any(g.kind == "coverage" for g in gates or ()),
                                  inputs="the runs rolled up")
        if reason and not getattr(args, "allow_empty", False):  # as the audit's: nothing published, exit code 4
            fail_empty_run(reason, shown, prog="fair-forge-beam rollup", stage=out)  # kept, unpublished, to be read
        from fair_forge_beam.options import OPTIONS

        info = {"runner": str(pipeline_options(beam_args).get_all_options().get("runner")),
                "started_at": utc_timestamp(started), "seconds": round(elapsed, 3),
                # the settings its runs were made with (all the same but for RUN_ONLY_OPTIONS: the first
                # run's), so that a comparison or a trend reads them, not the roll-up's own --from
                "argv": list(args.argv), "options": _run_options(runs[0], options, OPTIONS),
                "beam_args": list(beam_args), "rollup": {"runs": list(getattr(args, "runs_shown", runs)), "not_rebuilt": {
                    **not_rebuilt,
                    "data_quality/": "per-record warnings stay in each run's data_quality/ (their counts are in results.json)",
                }, "copied": ["results.parquet/", "dead_letter/"]}}
        info = write_run_info(out, info)
        seal_more(out, "run_info.json")  # sealed as results.json is: a trend or a comparison reads it
        for what, why in not_rebuilt.items():
            log.warning("rollup: %s is not rebuilt: %s", what, why)
        width = args.inconclusive_width if args.inconclusive_width is not None else options.get("inconclusive_width") or 0.5
        # whether the baseline is like the roll-up: settings and data they share (trial34)
        comparable, checks = baseline_and_checks(doc, gates, baseline, info, baseline_info, current_dir=out,
                                                 baseline_dir=args.baseline, current_name=shown, warn=log.warning)
        from fair_forge_beam.reports.load import dead_letter_summary

        # the dead letters (the runs' copied shards) read once, for the report and the console's line
        # naming the assistants nobody scored, as an audit prints it
        dead = dead_letter_summary(out) if not (args.quiet and args.no_report) else None
        written, report_failure = write_launcher_reports(out, doc, info, None, args.no_report, width, gates=gates,
                                                         gate_checks=checks, dead_letters=dead)
        if not args.quiet:
            say(console_summary(doc, shown, written, gates, what="roll-up", dead_letters=dead))  # the paths the outputs have once published
        if gates:  # writes gates.json; GatesFailed (exit code 3) is raised after the outputs are published
            try:
                check_gates(doc, gates, out, quiet=args.quiet, shown=shown, baseline=baseline, checks=checks,
                            comparable=comparable)
            except GatesFailed as exc:
                return doc, exc
        if report_failure is not None:
            return doc, report_failure  # exit code 1 once the rest is published
    return doc, None


def _run_options(run: str, stored: dict, declared) -> dict:
    """The main-job options a run recorded in its ``run_info.json`` (as the audit typed them), else
    those of its stored manifest (``stored``; computed values such as the slice tuple in place of
    the text given), by ``dest`` of the ``declared`` options."""
    try:
        info = _read_json(f"{run}/run_info.json")
    except (OSError, ValueError):
        info = None
    recorded = info.get("options") if isinstance(info, dict) else None
    source = recorded if isinstance(recorded, dict) else stored
    return {d: source[d] for d in declared if d in source}


def _check_stored_shapes(runs: Sequence[str], slice_tables: Sequence, slice_cols: Sequence, fuseds: Sequence,
                         options: dict) -> None:
    """Each run's stored slice accumulators have the shapes the manifest's settings give them (a
    Bayesian slice holds ``mc_samples`` draws per replicate sum): each stored slice file's type is
    the one the settings write, and every slice of it is decoded as the pipeline will decode it
    (``CombineFn.from_arrow``, which checks the draws against the settings), :data:`SHAPE_BATCH`
    rows at a time (memory bounded by a batch, whatever the file's size; each batch's accumulators
    are dropped once decoded). The settings are sealed (:func:`check_settings`); this holds for a
    manifest edited and resealed too, which ended in a Beam traceback (trial 28e B6: 'cannot
    reshape array of size 20000 into shape (4,0)'), and for one slice of a shard edited and
    resealed (only its first slice holding a value was decoded before: a later one reached the
    pipeline).

    Raises:
        ValueError: one line naming the run, the file, the column, the slice's row and the settings."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fair_forge_beam.io.session_stats import open_stored

    said = f"--mode {options.get('mode')}" + (f", --mc-samples {options.get('mc_samples')}"
                                             if options.get("mode") == "bayesian" else "")
    for table, cols, fused in zip(slice_tables, slice_cols, fuseds):
        if not cols:
            continue
        for r, path in [(r, path) for r in runs for path in run_shards(r, table)]:
            def refused(name: str, why: str):
                return ValueError(f"{r}: {path.rsplit('/', 1)[-1]} of {table}, column {name}, does not fit the "
                                  f"manifest's settings ({said}): {why}; a manifest edited and resealed, or a shard "
                                  "of another run: re-run that audit, or leave it out")

            with open_stored(path) as f:
                stored = pq.ParquetFile(f)
                types = {field.name: field.type for field in stored.schema_arrow}
                for name, slot in cols:
                    want = fused.fns[slot].stored_type()
                    if want is not None and name in types and not types[name].equals(want):
                        raise refused(name, "its stored type is not the one these settings write")
                present = [name for name, _ in cols if name in types]
                row = 0
                for batch in (stored.iter_batches(batch_size=SHAPE_BATCH, columns=present, use_threads=False)
                              if present else ()):
                    for name, slot in cols:
                        if name not in types:
                            continue
                        column = batch.column(name)
                        valid = column.drop_null()
                        if not len(valid):
                            continue
                        try:
                            fused.fns[slot].from_arrow(valid)  # every slice holding a value
                        except (ValueError, TypeError, KeyError, IndexError, AttributeError, pa.ArrowException) as first:
                            for i in range(len(column)):  # the first slice refused, named by its row
                                if not column[i].is_valid:
                                    continue
                                try:
                                    fused.fns[slot].from_arrow(column.slice(i, 1))
                                except (ValueError, TypeError, KeyError, IndexError, AttributeError,
                                        pa.ArrowException) as exc:
                                    raise refused(name, f"row {row + i + 1:,}: {_one_line(exc)}") from None
                            raise refused(name, _one_line(first)) from None
                    row += batch.num_rows


#: slice rows decoded at once by :func:`_check_stored_shapes`
SHAPE_BATCH = 256


def _read_slices(files, fused, columns) -> list:
    """Every ``(run index, path of a stored slice table file)`` of ``files`` → one ``(slice key,
    [slice accumulator per slot])`` per slice key, the files' accumulators merged as they are read
    (:func:`~fair_forge_beam.io.session_stats.read_slice_accumulators`,
    :func:`~fair_forge_beam.engine.merge_stored_slices`): a file's tables are freed before the
    next is read, and the merged slices cross one shuffle less than the runs' rows would."""
    from fair_forge_beam.engine import merge_stored_slices
    from fair_forge_beam.io.session_stats import read_slice_accumulators

    return merge_stored_slices((kv for _, path in files for kv in read_slice_accumulators(path, fused, columns)), fused)


def _parquet_files(run: str, folder: str) -> list:
    """The paths of ``run/folder``'s Parquet shards, sorted (:func:`run_shards`: checked)."""
    return run_shards(run, folder)


def _read_parquet(path: str, columns=None):
    """The table of one stored Parquet shard (``columns`` only, when given).

    Raises:
        ValueError: the shard cannot be read (named: pyarrow's own message names no file)."""
    import pyarrow.parquet as pq

    from fair_forge_beam.io.session_stats import open_stored

    try:
        with open_stored(path) as f:  # a local file memory-mapped: no copy through a Python file object
            return pq.read_table(f, columns=columns, use_threads=False)  # CPU: one thread per file
    except (OSError, ValueError) as exc:  # ArrowInvalid is a ValueError, ArrowIOError an OSError
        raise ValueError(f"{path} cannot be read as Parquet ({_one_line(exc)}): a truncated or damaged shard; "
                         "re-run that audit, or leave it out") from None


def session_texts(session_id, assistant_id):
    """Arrow columns of session and assistant ids → one text per row naming the reader session
    unambiguously (``<length of session_id>:<session_id>:<assistant_id>``), for ``pyarrow.compute.is_in``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    size = pc.cast(pc.utf8_length(session_id), pa.string())
    return pc.binary_join_element_wise(size, session_id, assistant_id, ":")


def _merged_sessions(runs: Sequence[str], tables: Sequence[str], reusable: bool):
    """The reader sessions ``(session_id, assistant_id)`` the roll-up merges and reduces again, as an
    Arrow array of :func:`session_texts` (``None``: all of them, when a stored table lacks the
    session stage's outputs): those with more than one stored row over every run and table — a
    conversation cut across runs, one in several languages or engine groups. Every other session
    is reused as its run stored it. Reads the two id columns only (``pyarrow``, in the launcher)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not reusable:
        return None
    keys = [session_texts(t.column("session_id"), t.column("assistant_id"))
            for r in runs for table in tables for path in _parquet_files(r, table)
            for t in [_read_parquet(path, ["session_id", "assistant_id"])]]
    if not keys:
        return pa.array([], pa.string())
    counts = pc.value_counts(pa.chunked_array(keys, pa.string()))
    return pc.filter(counts.field("values"), pc.greater(counts.field("counts"), 1))


def _reused_mask(table, merged):
    """Rows of ``table`` (``session_id``, ``assistant_id`` columns) of a session not in ``merged``."""
    import pyarrow.compute as pc

    return pc.invert(pc.is_in(session_texts(table.column("session_id"), table.column("assistant_id")),
                              value_set=merged))


def _copied_scored(runs: Sequence[str], metrics: Sequence[str], merged, tests: Optional[dict] = None) -> tuple:
    """Per metric, the interactions of its reused sessions (the sum of their stored session
    records' ``n_interactions``): results.json's ``interactions_scored`` of what the engine does
    not see again. ``tests``: ``{metric: MetricSpec.scored}``: a metric declaring one counts only
    the reused sessions it passes, as the audit does (``reports.results.write_outputs``); those it
    leaves out go to the second dict (``interactions_left_out``). Returns ``(scored, left_out)``."""
    import pyarrow.compute as pc

    from fair_forge_beam.reports.results import session_outcome, session_records

    out, left = {}, {}
    if merged is None:
        return out, left
    for m in metrics:
        n = 0
        test = (tests or {}).get(m)
        for r in runs:
            for path in _parquet_files(r, f"sessions/{m}/"):
                if test is not None:  # the whole records: the test reads the metric's own fields
                    t = _read_parquet(path, None)
                    for rec in session_records(t.filter(_reused_mask(t, merged))):
                        k = int(rec.get("n_interactions") or 0)
                        outcome = session_outcome(test, rec)
                        if outcome == "scored":
                            n += k
                        elif outcome == "left_out" and k:
                            left[m] = left.get(m, 0) + k
                    continue
                t = _read_parquet(path, ["session_id", "assistant_id", "n_interactions"])
                n += int(pc.sum(t.column("n_interactions").filter(_reused_mask(t, merged))).as_py() or 0)
        if n:
            out[m] = n
    return out, left


def _copy_reused_rows(runs: Sequence[str], out: str, folders: Sequence[str], merged) -> None:
    """The rows of reused sessions (not in ``merged``) of each run's Parquet ``folders`` (its
    stored statistics and session records), written to the same folders of ``out`` as
    ``part-r<run>-…`` files (after the pipeline: Beam's sinks clear files named like theirs)."""
    import pyarrow.parquet as pq
    from apache_beam.io.filesystems import FileSystems

    if merged is None:
        return
    for i, r in enumerate(runs):
        for folder in folders:
            for path in _parquet_files(r, folder):
                t = _read_parquet(path)
                t = t.filter(_reused_mask(t, merged))
                if not t.num_rows:
                    continue
                name = path.rsplit("/", 1)[-1]
                if not FileSystems.exists(f"{out}/{folder}"):
                    FileSystems.mkdirs(f"{out}/{folder}")
                with FileSystems.create(f"{out}/{folder}part-r{i:03d}-{name[len('part-'):]}") as f:
                    pq.write_table(t, f)


def _place_reused_rows(out: str, copies) -> None:
    """Move the reused rows :class:`_ReadStoredRows` wrote into ``out``'s stage folder
    (:data:`_REUSED_STAGE`; ``copies``: ``(staged path, final path)`` pairs, a file with no reused
    row never written) to their ``part-r<run>-…`` names, then remove that folder."""
    from apache_beam.io.filesystems import FileSystems

    moves = [(a, b) for a, b in copies if FileSystems.exists(a)]
    for folder in sorted({b.rsplit("/", 1)[0] for _, b in moves}):
        if not FileSystems.exists(folder):
            FileSystems.mkdirs(folder)
    if moves:
        FileSystems.rename([a for a, _ in moves], [b for _, b in moves])
    stage = f"{out}/{_REUSED_STAGE}"
    if FileSystems.exists(stage):
        FileSystems.delete([stage])


#: rows per Arrow record batch decoded at once by :class:`_ReadStoredRows`
_READ_BATCH_ROWS = 8192

#: the folder of the roll-up's stage where :class:`_ReadStoredRows` writes each stored session
#: table's reused rows during the pipeline (moved to ``part-r<run>-…`` after it: Beam's sinks clear
#: files named like theirs)
_REUSED_STAGE = "reused-rows.tmp"


def _write_reused_rows(stored, kept: Sequence[tuple], target: str) -> None:
    """Write the reused rows of one stored Parquet file (``stored``, a ``pyarrow.parquet.ParquetFile``;
    ``kept``: per record batch read, ``(its reused rows, its reused mask)``) to ``target``, the same
    file :func:`_copy_reused_rows` writes from the file read again: a table chunked as the source's
    row groups (what ``read_table`` then ``filter`` give), written by ``pyarrow.parquet.write_table``.
    Nothing is written when no row is reused."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from fair_forge_beam.io.write import replace_file

    table = pa.Table.from_batches([rows for rows, _ in kept], schema=stored.schema_arrow)
    if not table.num_rows:
        return
    table = table.combine_chunks()
    reused = np.cumsum(np.concatenate([m.to_numpy(zero_copy_only=False) for _, m in kept]))  # up to each row
    ends = np.cumsum([stored.metadata.row_group(i).num_rows for i in range(stored.num_row_groups)])
    counts = np.diff(np.concatenate([[0], reused[ends - 1]]))  # reused rows per row group
    pieces, at = [], 0
    for n in counts.tolist():
        pieces.append(table.slice(at, n))
        at += n
    replace_file(target, lambda f: pq.write_table(pa.concat_tables(pieces), f))  # never in place


@beam.typehints.with_output_types(Any)
class _ReadStoredRows(beam.DoFn):
    """``(run index, path of a stored session table's Parquet file, engine group g, staged path or
    None)`` → per stored
    row of a session in ``merged`` (main) ``((session_id, assistant_id), (run index, row))``,
    ``row`` a dict of column → plain value (:func:`~fair_forge_beam.schemas.arrow.from_arrow_array`:
    structs and lists as tuples, maps as dicts), for :class:`_MergeRunsOfSession`; per row of any
    other session its stored warnings (``"quality"``) and, for the metrics whose slices are not
    the stored slice accumulators (and the metadata values), its stored session-stage outputs as
    the engine's input (``"g<g>"``: ``(session key, Reduced(slots))``: slice values,
    interaction-side cell values, metadata values) — its accumulators are not even decoded. The file is read with
    ``pyarrow`` in record batches and decoded column by column, so the per-interaction values
    cost no Python call each. With a staged path, the file's rows of reused sessions are also
    written there (:func:`_write_reused_rows`: the roll-up's copy of them, moved into place after
    the pipeline by :func:`_place_reused_rows`), so the file is read once for both.

    Args:
        groups: per engine group, its :class:`~fair_forge_beam.engine.SessionLayout` and metric names.
        merged: :func:`_merged_sessions` (``None``: every session is merged).
        from_stored: per engine group, the metric slots whose slices come from the runs' stored
            slice accumulators: a reused session sends those metrics nothing (and, when no metric
            of its group needs it, no ``Reduced`` at all — only its warnings)."""

    def __init__(self, groups: Sequence[tuple], merged, from_stored: Sequence = ()):
        self.groups, self.merged = list(groups), merged
        self.from_stored = [set(x) for x in from_stored] or [set() for _ in self.groups]

    def setup(self):
        from fair_forge_beam._beam import tune_gc, tune_malloc

        tune_gc()  # this process runs our bundles (an SDK worker too)
        tune_malloc()
        self._reuse = [_reduced_columns(layout, names, lambda slot, skip=skip: slot not in skip)
                       for (layout, names), skip in zip(self.groups, self.from_stored)]

    def process(self, item):
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        from fair_forge_beam.io.session_stats import open_stored

        j, path, g, copy_to = item
        kept = []  # with copy_to: the reused rows, batch by batch (the file read once for both)
        with open_stored(path) as f:
            stored = pq.ParquetFile(f)
            for batch in stored.iter_batches(batch_size=_READ_BATCH_ROWS, use_threads=False):
                if self.merged is None:
                    yield from self._merged_rows(j, batch)
                    continue
                reused = _reused_mask(batch, self.merged)
                yield from self._merged_rows(j, batch.filter(pc.invert(reused)))
                rows = batch.filter(reused)
                if copy_to is not None:
                    kept.append((rows, reused))
                yield from self._reused_rows(g, rows)
            if copy_to is not None:
                _write_reused_rows(stored, kept, copy_to)

    @staticmethod
    def _merged_rows(j, batch):
        from fair_forge_beam.schemas.arrow import from_arrow_array

        if not batch.num_rows:
            return
        names = batch.schema.names
        columns = [from_arrow_array(batch.column(i)) for i in range(batch.num_columns)]
        for values in zip(*columns):
            row = dict(zip(names, values))
            yield (row["session_id"], row["assistant_id"]), (j, row)

    def _reused_rows(self, g, batch):
        from fair_forge_beam.engine import Reduced
        from fair_forge_beam.io.elements import QualityWarning
        from fair_forge_beam.io.session_stats import QUALITY_COLUMN
        from fair_forge_beam.schemas.arrow import from_arrow_array

        if not batch.num_rows:
            return
        layout, _ = self.groups[g]
        cells, slices, scored = self._reuse[g]
        fns, tag = layout.fns, f"g{g}"

        def column(name):
            return from_arrow_array(batch.column(name))

        quality = column(QUALITY_COLUMN)
        tagged = beam.pvalue.TaggedOutput
        if not (cells or slices or layout.dims):  # every metric's slices are stored: the warnings only
            for ws in quality:
                for w in ws or ():
                    yield tagged("quality", QualityWarning(*w))
            return
        keys = zip(column("session_id"), column("assistant_id"), column("language"))
        dims = zip(column("meta_values"), column("meta_differ")) if layout.dims else None
        cell_values = [(s, column(c)) for c, s in cells]
        slice_values = [(s, column(c)) for c, s in slices]
        flags = [(s, column(c), column(e) if e else None) for c, s, e in scored]
        for i, key in enumerate(keys):
            slots = [None] * len(fns)
            if dims is not None:
                meta, differ = next(dims)
                if meta is not None:
                    slots[layout.dims_slot] = (tuple(meta), bool(differ))
            for s, values in cell_values:
                if values[i] is not None:
                    slots[s] = fns[s].extract_output(fns[s].from_plain(values[i]))
            for s, values in slice_values:
                slots[s] = values[i]
            was_scored = [None] * len(fns)
            for s, values, held in flags:
                was_scored[s] = session_flags(values[i], held[i] if held is not None else None)
            yield tagged(tag, (key, Reduced(slots, was_scored)))
            for w in quality[i] or ():
                yield tagged("quality", QualityWarning(*w))


def _reduced_columns(layout, names, keep) -> tuple:
    """``(cell columns, slice columns, scored columns)``, each ``[(column name, slot)]`` (a scored
    column with its evidence column or ``None``: ``(name, slot, evidence name)``), of the
    stored session columns that make a :class:`~fair_forge_beam.engine.Reduced` of ``layout``'s
    metrics ``names`` whose metric slot passes ``keep`` (cell slot ``n + i`` belongs to metric
    ``i``)."""
    from fair_forge_beam.io.session_stats import evidence_columns, scored_columns, slice_columns, stored_columns

    cells = [(c, s) for c, s, _ in stored_columns(layout, names) if s >= layout.n and keep(s - layout.n)]
    held = dict((s, c) for c, s in evidence_columns(layout, names))
    return (cells, [(c, s) for c, s, _ in slice_columns(layout, names) if keep(s)],
            [(c, s, held.get(s)) for c, s in scored_columns(layout, names) if keep(s)])


@beam.typehints.with_output_types(Any)
class _MergeRunsOfSession(beam.DoFn):
    """The stored rows of one reader session ``(session_id, assistant_id)`` from every run →
    its reader warnings as one audit of every run's inputs gives them (``"quality"``) and, per
    engine group ``g``, each session key's merged accumulators ``(session key, [accumulator per
    slot])`` (``"g<g>"``: the input of an :class:`~fair_forge_beam.engine.Engine` with
    ``from_accumulators``; the reader's slot holds the merged record summary), each run's turn
    numbering mapped to the union's (:func:`fair_forge_beam.io.read.session_numbering`): the same
    turn indices, element ids and judge request keys as one audit over all the runs' inputs.

    Per run's row of the session, for the metrics whose slices come from stored slice
    accumulators (``from_stored``), that row's own contribution to its run's slices — its stored
    slice values and cell values, as the run stored them (``"m<g>"``: ``(session key,
    Reduced(slots))``), subtracted from the merged slices by the engine.

    Args:
        groups: per engine group, its :class:`~fair_forge_beam.engine.SessionLayout` (with the
            reader's extra slot) and its metric names.
        from_stored: per engine group, the metric slots whose slices are stored (see above).
    """

    def __init__(self, groups: Sequence[tuple], from_stored: Sequence = ()):
        self.groups = list(groups)
        self.from_stored = [set(x) for x in from_stored] or [set() for _ in self.groups]

    def setup(self):
        from fair_forge_beam.io.session_stats import stored_columns

        # each column's renumbering walk looked up here, once: hashing a nested Arrow type (the lookup's
        # key) costs tens of microseconds, once per value when looked up in process
        self._columns = [[(column, s, _renumberer(t)) for column, s, t in stored_columns(layout, names)]
                         for layout, names in self.groups]
        self._subtract = [_reduced_columns(layout, names, lambda slot, keep=keep: slot in keep)
                          for (layout, names), keep in zip(self.groups, self.from_stored)]

    def process(self, kv):
        from fair_forge_beam.engine import Corrected
        from fair_forge_beam.io.read import SessionRecordsCombineFn, session_warnings
        from fair_forge_beam.io.session_stats import READER, READER_QUALITY

        (session_id, assistant_id), items = kv
        records_fn = SessionRecordsCombineFn()
        # run -> the reader's summary of the session: its rows' records together (each row holds those of its
        # language; a row of each engine group's table holds them again: a record is taken once)
        summaries: dict = {}
        own_records: dict = {}  # (run, language) -> that run's records of the session in that language
        rows = sorted(items, key=lambda it: (it[0], it[1]["language"]))
        for run, row in rows:
            if row.get(READER) is not None:
                mine = records_fn.from_plain(row[READER])
                for rk, rec in mine.items():
                    summaries.setdefault(run, {}).setdefault(rk, rec)
                    own_records.setdefault((run, row["language"]), {}).setdefault(rk, rec)
        union, turns = union_numbering(summaries)
        # each key's own records over the runs (its stored row's reader), and the session's reader warnings
        # on the key of its first language only (a session of several languages warned once)
        key_records = {lang: records_fn.merge_accumulators([r for (_, lg), r in sorted(own_records.items()) if lg == lang])
                       for lang in {lg for _, lg in own_records}}
        warnings = session_warnings(session_id, assistant_id, union) if union else []
        warned = tuple((str(w.kind), str(w.key), str(w.message)) for w in warnings)
        lead = min(key_records) if key_records else None
        for g, (layout, _names) in enumerate(self.groups):
            fns = layout.fns
            parts: dict = {}  # session key -> slot -> [stored accumulator, ...] in run order
            sub_cells, sub_slices, sub_scored = self._subtract[g]
            paired = {s for _, s in sub_cells}
            own: dict = {}  # session key -> [(row, {cell slot: [(stored value, renumbered value), ...]})]
            for run, row in rows:
                mapping = turns.get(run)
                renumber = bool(mapping) and any(k != v for k, v in mapping.items())
                key = (session_id, assistant_id, row["language"])
                slots = parts.setdefault(key, {})
                if layout.dims and row.get("meta_values") is not None:
                    slots.setdefault(layout.dims_slot, []).append((tuple(row["meta_values"]), bool(row["meta_differ"])))
                pairs = {}
                for column, s, walk in self._columns[g]:
                    value = row.get(column)
                    if value is not None:
                        as_stored = value
                        if renumber and walk is not None:  # the type's renumberer, looked up in setup
                            value = walk(value, mapping, session_id, assistant_id)
                        if s in paired:  # a list of values, renumbered one by one
                            pairs[s] = list(zip(as_stored, value))
                        slots.setdefault(s, []).append(fns[s].from_plain(value))
                if sub_cells or sub_slices:
                    own.setdefault(key, []).append((row, pairs))
            for key in sorted(parts):
                slots = parts[key]
                accs = [None] * len(fns)
                for s, stored in slots.items():
                    accs[s] = fns[s].merge_accumulators([fns[s].create_accumulator(), *stored])
                if key[2] in key_records:  # a copy per key
                    accs[layout.extra_slots[READER]] = records_fn.merge_accumulators([key_records[key[2]]])
                if key[2] == lead and warned:
                    accs[layout.extra_slots[READER_QUALITY]] = warned
                if key not in own:
                    yield beam.pvalue.TaggedOutput(f"g{g}", (key, accs))
                    continue
                # each run's own part, as its slices hold it, is subtracted; an interaction-side value that
                # part holds unchanged in the merged session (same value, same slice cell: a turn numbered
                # alike) would be subtracted and added again: it cancels, and neither side sends it
                cells: dict = {}
                merged_cell = _cell_dims(layout, accs[layout.dims_slot] if layout.dims else None)
                for row, pairs in own[key]:
                    row_dims = (tuple(row["meta_values"]), False) if row.get("meta_values") is not None else None
                    same_cell = _cell_dims(layout, row_dims) == merged_cell
                    kept = {}
                    for s, pr in pairs.items():
                        left = [p for p in pr if not (same_cell and p[0] == p[1])]
                        cells.setdefault(s, []).extend(r for _, r in left)
                        kept[s] = [v for v, _ in left]
                    part = _row_reduced(layout, row, sub_cells, sub_slices, sub_scored, kept)
                    if part is not None:
                        yield beam.pvalue.TaggedOutput(f"m{g}", (key, part))
                cells = {s: fns[s].extract_output(fns[s].from_plain(v)) for s, v in cells.items()}
                yield beam.pvalue.TaggedOutput(f"g{g}", (key, Corrected(accs, cells) if cells else accs))
        for w in warnings:
            yield beam.pvalue.TaggedOutput("quality", w)


def _cell_dims(layout, dims) -> tuple:
    """The metadata part of a session's slice cell, from its metadata slice values ``(values,
    differ)`` (``None``: it carries none), as the engine forms it."""
    from fair_forge_beam.slices import MISSING_VALUE

    values = dims[0] if dims is not None else (None,) * len(layout.dims)
    return tuple(MISSING_VALUE if v is None else v for v in values)


def _row_reduced(layout, row: dict, cells, slices, scored, values: Optional[dict] = None):
    """A stored session row (column → plain value) as the :class:`~fair_forge_beam.engine.Reduced`
    of its ``cells``, ``slices`` and ``scored`` columns (:func:`_reduced_columns`) and its metadata values;
    ``None`` when it holds none of those values. ``values``: per cell slot, the plain values to
    send in place of the row's own (a subset of them)."""
    from fair_forge_beam.engine import Reduced

    fns = layout.fns
    slots = [None] * len(fns)
    found = False
    for column, s in cells:
        value = row.get(column)
        if value is not None and values is not None and s in values:
            value = values[s]
        if value is not None:
            slots[s], found = fns[s].extract_output(fns[s].from_plain(value)), True
    for column, s in slices:
        value = row.get(column)
        if value is not None:
            slots[s], found = value, True
    if not found:
        return None
    if layout.dims and row.get("meta_values") is not None:
        slots[layout.dims_slot] = (tuple(row["meta_values"]), bool(row["meta_differ"]))
    was_scored = [None] * len(fns)
    for column, s, held in scored:
        was_scored[s] = session_flags(row.get(column), row.get(held) if held else None)
    return Reduced(slots, was_scored)


@functools.lru_cache(maxsize=256)
def _renumberer(t):
    """The function ``(plain value of Arrow type t, turns, session_id, assistant_id) → the value
    renumbered``: every ``turn_index``, the turn of every ``element_id`` and of every judge
    ``request_key`` (``"<session>#<turn>#<digest>"``) mapped by ``turns`` (a run's turn index → the
    union's), structs and lists as tuples (as :func:`~fair_forge_beam.schemas.arrow.from_arrow_array`
    gives them); built once per type; ``None`` when ``t`` holds no turn
    field (:func:`_holds_turn_fields`: its values are never walked)."""
    import pyarrow as pa

    if not _holds_turn_fields(t):
        return None
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = _renumberer(t.value_type)
        return lambda value, *at: tuple(None if v is None else item(v, *at) for v in value)
    if not pa.types.is_struct(t):
        return None
    fields = [(f.name, True, None) if f.name in _TURN_FIELDS else (f.name, False, _renumberer(f.type)) for f in t]

    def walk(value, *at):
        return tuple(_renumbered_id(k, v, *at) if turn else v if sub is None or v is None else sub(v, *at)
                     for (k, turn, sub), v in zip(fields, value))
    return walk


#: the fields that carry a turn number: the turn itself, the element id ``<session>/<assistant>/<turn>``
#: (:func:`~fair_forge_beam.io.elements.make_element_id`) and a judge's request key ``<session>#<turn>#<digest>``
_TURN_FIELDS = frozenset({"turn_index", "element_id", "request_key"})


@functools.lru_cache(maxsize=256)
def _holds_turn_fields(t) -> bool:
    """Whether Arrow type ``t`` has a field of :data:`_TURN_FIELDS` at any depth (a value of a
    type without one is never walked)."""
    import pyarrow as pa

    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _holds_turn_fields(t.value_type)
    if pa.types.is_map(t):
        return _holds_turn_fields(t.item_type)
    if pa.types.is_struct(t):
        return any(f.name in _TURN_FIELDS or _holds_turn_fields(f.type) for f in t)
    return False


def _renumbered_id(k: str, v, turns: dict, session_id: str, assistant_id: str):
    """The value ``v`` of turn field ``k`` (one of :data:`_TURN_FIELDS`) with its turn mapped by ``turns``."""
    from fair_forge_beam.io.elements import make_element_id

    if k == "turn_index" and isinstance(v, int) and not isinstance(v, bool):
        return turns.get(v, v)
    if k == "element_id" and isinstance(v, str):
        tail = v.rpartition("/")[2]
        if tail.isdigit() and int(tail) in turns:
            return make_element_id(session_id, assistant_id, turns[int(tail)])
    if k == "request_key" and isinstance(v, str):
        parts = v.rsplit("#", 2)
        if len(parts) == 3 and parts[1].isdigit() and int(parts[1]) in turns:
            return f"{parts[0]}#{turns[int(parts[1])]}#{parts[2]}"
    return v


def _renumbered_record(value, turns: dict, session_id: str, assistant_id: str):
    """A JSON-shaped record (dicts, lists: a ``results.parquet`` row, a dead letter) with every
    turn field (:data:`_TURN_FIELDS`) at any depth mapped by ``turns``."""
    if isinstance(value, dict):
        return {k: _renumbered_id(k, v, turns, session_id, assistant_id) if k in _TURN_FIELDS
                else _renumbered_record(v, turns, session_id, assistant_id) for k, v in value.items()}
    if isinstance(value, list):
        return [_renumbered_record(v, turns, session_id, assistant_id) for v in value]
    return value


def union_numbering(summaries: dict) -> tuple:
    """The reader summaries of one session in several runs (run → summary of
    :class:`~fair_forge_beam.io.read.SessionRecordsCombineFn`) → ``(union, turns)``: their merged
    summary (``None`` without any) and, per run whose numbering differs from the union's, its map
    run's turn index → union's (:func:`~fair_forge_beam.io.read.session_numbering`: the turn one
    audit of every run's inputs gives). A session of one run keeps its numbering (``turns`` empty)."""
    from fair_forge_beam.io.read import SessionRecordsCombineFn, session_numbering

    records_fn = SessionRecordsCombineFn()
    union = records_fn.merge_accumulators([summaries[r] for r in sorted(summaries)])
    turns = {}
    if len(summaries) > 1:  # a session split across runs: each run's numbering -> the union's
        first = session_numbering(union)
        for run, summary in summaries.items():
            local = session_numbering(summary)
            mapping = {local[rk] + at: first[rk] + at for rk, (n, *_) in summary.items() for at in range(n)}
            if any(k != v for k, v in mapping.items()):
                turns[run] = mapping
    return union, turns


def _record_turn_maps(runs: Sequence[str], tables: Sequence[str], merged) -> dict:
    """Per run index, the reader sessions whose turns that run numbered otherwise than the union
    (a conversation cut across runs): ``{run: {(session_id, assistant_id): {run's turn: union's}}}``,
    from the stored reader summaries of the sessions in ``merged`` (:func:`_merged_sessions`;
    ``None``: every session) — for renumbering the runs' per-record outputs as they are copied.
    Reads three columns of the stored tables (``pyarrow``, in the launcher)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from fair_forge_beam.io.session_stats import READER, open_stored

    slots: dict = {}  # (session_id, assistant_id) -> run -> {record key: n_slots} (all the numbering reads)
    for j, r in enumerate(runs):
        for table in tables:
            for path in _parquet_files(r, table):
                with open_stored(path) as f:
                    stored = pq.ParquetFile(f)
                    if READER not in stored.schema_arrow.names:
                        continue
                    t = stored.read(columns=["session_id", "assistant_id", READER], use_threads=False)
                if merged is not None:
                    t = t.filter(pc.invert(_reused_mask(t, merged)))
                for key, records in zip(zip(*(c.to_pylist() for c in t.columns[:2])), _record_slots(t.column(READER))):
                    if records is not None:  # each row holds the records of its language: the run's are all its rows'
                        slots.setdefault(key, {}).setdefault(j, {}).update(records)
    maps: dict = {}
    for key in sorted(slots):
        for j, mapping in _numbering_maps(slots[key]).items():
            maps.setdefault(j, {})[key] = mapping
    return maps


def _record_slots(column) -> list:
    """A stored reader column (:class:`~fair_forge_beam.io.read.SessionRecordsCombineFn`'s
    ``list<struct<declared, source, position, n_slots, …>>``) → per row ``{record key: n_slots}``
    (``None`` for a null row): the part of each summary its turn numbering depends on, read
    field by field (the records' items are never decoded)."""
    import pyarrow.compute as pc

    column = column.combine_chunks()
    if not len(column):
        return []
    lengths = pc.fill_null(pc.list_value_length(column), 0).to_pylist()
    valid = column.is_valid().to_pylist()
    values = column.flatten()
    keys = list(zip(*(values.field(name).to_pylist() for name in ("declared", "source", "position"))))
    n_slots = values.field("n_slots").to_pylist()
    out, at = [], 0
    for ok, n in zip(valid, lengths):
        out.append(dict(zip(keys[at:at + n], n_slots[at:at + n])) if ok else None)
        at += n
    return out


def _numbering_maps(slots: dict) -> dict:
    """Per run whose numbering of one session differs from the union's, its map run's turn index →
    union's, from each run's ``{record key: n_slots}`` (:func:`_record_slots`): the ``turns`` of
    :func:`union_numbering` (the union's records: every run's, a key's ``n_slots`` that of its first run)."""
    from fair_forge_beam.io.read import session_numbering

    if len(slots) < 2:
        return {}
    union: dict = {}
    for run in sorted(slots):
        for rk, n in slots[run].items():
            union.setdefault(rk, (n,))
    first = session_numbering(union)
    turns = {}
    for run, records in slots.items():
        local = session_numbering({rk: (n,) for rk, n in records.items()})
        mapping = {local[rk] + at: first[rk] + at for rk, n in records.items() for at in range(n)}
        if any(k != v for k, v in mapping.items()):
            turns[run] = mapping
    return turns


def _copy_record_outputs(runs: Sequence[str], out: str, turn_maps: dict) -> None:
    """The runs' per-record shards (``results.parquet/``, ``dead_letter/``), copied under names
    that keep them apart (``part-r<run>-…``). A shard holding records of a session whose turns its
    run numbered otherwise than the union (``turn_maps``: :func:`_record_turn_maps`) is rewritten
    with those records renumbered — the same element ids and turn indices as one audit of every
    run's inputs (a Parquet shard keeps its schema; a dead letter's rejected input line stays as read)."""
    from apache_beam.io.filesystems import FileSystems

    for folder, ext in _RECORD_FOLDERS.items():
        folder = folder.rstrip("/")
        src, dst = [], []
        for i, r in enumerate(runs):
            for path in run_shards(r, folder, ext):
                name = path.rsplit("/", 1)[-1]
                src.append((i, path))
                dst.append(f"{out}/{folder}/part-r{i:03d}-{name[len('part-'):]}")
        if not src:
            continue
        FileSystems.mkdirs(f"{out}/{folder}") if not FileSystems.exists(f"{out}/{folder}") else None
        plain = [(a, b) for (i, a), b in zip(src, dst) if not turn_maps.get(i)]
        if plain:
            FileSystems.copy([a for a, _ in plain], [b for _, b in plain])
        for (i, path), target in zip(src, dst):
            if turn_maps.get(i):
                (_renumber_parquet if folder == "results.parquet" else _renumber_jsonl)(path, target, turn_maps[i])


def _renumber_parquet(path: str, target: str, turns: dict) -> None:
    """Copy one ``results.parquet`` shard, its rows of the sessions in ``turns`` renumbered."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from apache_beam.io.filesystems import FileSystems

    table = _read_parquet(path)
    keys = session_texts(table.column("session_id"), table.column("assistant_id"))
    cut = pc.is_in(keys, value_set=session_texts(*(pa.array(x, pa.string()) for x in zip(*turns))))
    part = table.filter(cut)
    ids = list(zip(part.column("session_id").to_pylist(), part.column("assistant_id").to_pylist()))
    columns = []
    for name, column in zip(part.column_names, part.columns):  # column by column: only the turn fields are read
        if name in _TURN_FIELDS:
            values = [_renumbered_id(name, v, turns[k], *k) for v, k in zip(column.to_pylist(), ids)]
        elif _holds_turn_fields(column.type):  # e.g. a judge's request keys inside a struct
            values = [_renumbered_record(v, turns[k], *k) for v, k in zip(column.to_pylist(), ids)]
        else:
            columns.append(column)
            continue
        columns.append(pa.array(values, column.type))
    part = pa.Table.from_arrays(columns, schema=table.schema)
    table = pa.concat_tables([table.filter(pc.invert(cut)), part])
    with FileSystems.create(target) as f:
        pq.write_table(table, f)


def _renumbered_raw(raw, element_id: str, turns: dict, session_id: str, assistant_id: str):
    """A dead letter's ``raw`` text renumbered when it is the interaction the engine could not
    score (a JSON object with that ``element_id``, written by
    :func:`~fair_forge_beam.io.elements.dead_letter`); any other text — a rejected input line, a
    record truncated to its first characters — is the original record and stays as read."""
    from fair_forge_beam.io.edge import scrub_json_text

    from fair_forge_beam.io.edge import loads

    try:  # hostile text: the depth-bounded parser
        record = loads(raw) if isinstance(raw, str) and raw.startswith("{") else None
    except ValueError:
        return raw
    if not isinstance(record, dict) or record.get("element_id") != element_id:
        return raw
    return scrub_json_text(json.dumps(_renumbered_record(record, turns, session_id, assistant_id),
                                      ensure_ascii=False, default=str))


def _renumber_jsonl(path: str, target: str, turns: dict) -> None:
    """Copy one ``dead_letter`` shard (JSON Lines), each dead letter of a session in ``turns``
    renumbered: its ``element_id`` and the interaction in its ``raw`` (:func:`_renumbered_raw`)."""
    from apache_beam.io.filesystems import FileSystems

    from fair_forge_beam.io.elements import make_element_id
    from fair_forge_beam.io.write import to_json_line

    by_prefix = {make_element_id(sid, aid, 0)[:-1]: (sid, aid) for sid, aid in turns}
    with FileSystems.open(path) as f:
        lines = read_all(f).decode("utf-8").splitlines()
    out = []
    for line in lines:
        record = json.loads(line)
        element_id = record.get("element_id") if isinstance(record, dict) else None
        key = by_prefix.get(element_id.rpartition("/")[0] + "/") if isinstance(element_id, str) else None
        if key is not None:
            record["element_id"] = _renumbered_id("element_id", element_id, turns[key], *key)
            record["raw"] = _renumbered_raw(record.get("raw"), element_id, turns[key], *key)
            line = to_json_line(record)
        out.append(line + "\n")
    with FileSystems.create(target) as f:
        f.write("".join(out).encode("utf-8"))


def main(argv: Optional[Sequence[str]] = None) -> int:
    from fair_forge_beam.progress import cli_logging

    cli_logging()
    run(argv)
    return 0

