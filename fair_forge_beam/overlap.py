"""Whether stored runs share data: the same folder, an audit run both hold, an input file both read,
or the same content or records under another name (:func:`find_overlap`). ``rollup`` refuses to merge
such runs (:func:`fair_forge_beam.rollup.check_no_overlap`); a comparison, a ``--baseline`` gate and a
trend say it (:func:`fair_forge_beam.reports.compare.comparability`). A light module: no Beam, read by
the reports and by the roll-up alike."""
from __future__ import annotations

import logging
from typing import Optional, Sequence

from fair_forge_beam.io.paths import same_folder

__all__ = ["RECORDS_DIGEST_PREFIX", "audit_runs_of", "find_overlap"]

log = logging.getLogger("fair_forge_beam.rollup")  # its lines are the roll-up's, as before they moved here

#: how a records digest is written in ``input_files`` (its 5th field): this prefix, then the sum
#: mod 2**256 of the records' sha256 as 64 hex digits
RECORDS_DIGEST_PREFIX = "records:"


def audit_runs_of(run_dir: str, manifest: dict) -> tuple[list[str], bool]:
    """The ids of the audit runs a stored run is made of (its manifest's ``audit_runs``) and whether
    they were recorded. A run written before the manifest recorded them counts as one audit run,
    named by its folder (``folder:<real path>``, so a symlink or ``a/`` and ``a`` are one folder)."""
    ids = manifest.get("audit_runs")
    if isinstance(ids, list) and ids and all(isinstance(i, str) for i in ids):
        return sorted(set(ids)), True
    return [f"folder:{same_folder(run_dir)}"], False


def find_overlap(runs: Sequence[str], manifests: Sequence[dict], warn: bool = False,
                 names: Optional[Sequence[str]] = None) -> Optional[tuple[str, str]]:
    """The first data two of the runs share, as ``(finding, what a roll-up asks instead)`` — e.g.
    ``("a and b both hold audit run r1", "a roll-up counts each audit run once: …")`` —, or ``None``
    when they share none: the one check of shared data (:func:`check_no_overlap` refuses a roll-up
    of such runs; :func:`~fair_forge_beam.reports.compare.comparability` says it of a comparison, a
    ``--baseline`` gate and a trend). What counts as shared is listed in
    :func:`~fair_forge_beam.rollup.check_no_overlap`.
    ``warn``: log that a run records no audit runs (written by an older version); ``names``: how the
    findings name the runs (default: their paths; an audit gating its stage names its ``--output``)."""
    named = dict(zip(runs, names or runs))
    seen: dict[str, str] = {}
    for run_dir in runs:
        key = same_folder(run_dir)
        if key in seen:
            return (f"{named[seen[key]]} and {named[run_dir]} are the same folder", "give each run once")
        seen[key] = run_dir
    owner: dict[str, str] = {}
    for run_dir, m in zip(runs, manifests):
        ids, recorded = audit_runs_of(run_dir, m)
        if not recorded and warn:
            log.warning("rollup: %s records no audit_runs in its manifest (written by an older version): counted as "
                        "one audit run, known by its folder", run_dir)
        for i in ids:
            if i in owner:
                return (f"{named[owner[i]]} and {named[run_dir]} both hold audit run {i}",
                        "a roll-up counts each audit run once: give a roll-up or the runs it holds, not both")
            owner[i] = run_dir
    read_by: dict[tuple, str] = {}
    same_content: dict[str, tuple[str, str]] = {}  # sha256 -> (run, the file it read)
    same_records: dict[str, tuple[str, str]] = {}  # records digest -> (run, the file it read)
    run_records: dict[int, str] = {}  # all of a run's records -> the run
    for run_dir, m in zip(runs, manifests):
        # a run that read nothing and rejected nothing (an empty day published with --allow-empty:
        # "[]" every night) holds no data its files could count twice: its digests are not compared
        counts = m.get("counts") or {}
        holds_data = bool(counts.get("interactions_read") or counts.get("dead_letters"))
        for f in m.get("input_files") or ():
            key = tuple(f[:3])  # path, size, modification time (a run written before the digest has these)
            if key in read_by and read_by[key] != run_dir:
                return (f"{named[read_by[key]]} and {named[run_dir]} both read {f[0]} (the same file: {f[1]} bytes, "
                        "modified at the same time)", "a roll-up counts each input once: give one run of it (a night "
                        "re-run into a new folder is a second run of the same data)")
            read_by[key] = run_dir
            digest = f[3] if len(f) > 3 and isinstance(f[3], str) else None  # none: written before digests
            if digest is None or not holds_data:
                continue
            found = [(same_content, digest, f"the same content (sha256 {digest[:16]}…, decompressed)",
                      "a renamed, copied or recompressed log is the same data")]
            records = f[4] if len(f) > 4 and isinstance(f[4], str) and f[4].startswith(RECORDS_DIGEST_PREFIX) else None
            if records is not None:  # none: written before records digests, or a file whose records are not counted
                found.append((same_records, records, f"the same records in another order or layout (records "
                              f"digest {records[8:24]}…)",
                              "a shuffled, re-indented or reformatted copy of a log is the same data"))
            for seen, value, what, why in found:
                other = _held_before(seen, value, run_dir, f[0])
                if other is not None:
                    return (f"{named[other[0]]} read {other[1]} and {named[run_dir]} read {f[0]}, {what}",
                            f"a roll-up counts each input once: give one run of it ({why})")
        total = _run_records(m) if holds_data else None  # the run's records, however its files split them
        if total is not None:
            other_run = run_records.get(total)
            if other_run is not None and other_run != run_dir:
                return (f"{named[other_run]} and {named[run_dir]} read the same records, split into files in another "
                        "way (the sum of their files' records digests is equal)",
                        "a roll-up counts each input once: give one run of it")
            run_records.setdefault(total, run_dir)
    return None


def _held_before(seen: dict, digest: str, run_dir: str, path: str) -> Optional[tuple[str, str]]:
    """``(run, file)`` of another run that read a file of this ``digest`` before, else ``None``; the
    first run and file of each digest are kept in ``seen``."""
    other = seen.setdefault(digest, (run_dir, path))
    return other if other[0] != run_dir else None


def _run_records(manifest: dict) -> Optional[int]:
    """The records digest of all of a run's input files together (their records digests summed mod
    2**256: the digest of the union of their records), or ``None`` when a file it read has none."""
    total, files = 0, manifest.get("input_files") or ()
    for f in files:
        if not (len(f) > 4 and isinstance(f[4], str) and f[4].startswith(RECORDS_DIGEST_PREFIX)):
            return None
        try:
            total = (total + int(f[4][len(RECORDS_DIGEST_PREFIX):], 16)) % (1 << 256)
        except ValueError:
            return None
    return total if files else None
