"""The main job's ``--output`` folder: what a run writes there and how a reused folder is
prepared (created if missing, this layout's and older layouts' outputs removed first, so a
run's outputs never mix with a previous run's), and the files the launcher writes after a local
run (report, comparison). Works on every Beam filesystem."""
from __future__ import annotations

import json
import os
from typing import Optional

__all__ = ["OUTPUT_FILES", "STALE_OUTPUTS", "SHARD_PATTERNS", "OutputFiles", "prepare_output_folder", "write_launcher_reports"]

#: what the main job writes under --output (shard folders end in "/"; see fair_forge_beam.reports.results)
OUTPUT_FILES = ("results.json", "results.parquet/", "sessions/", "dead_letter/", "data_quality/", "run_info.json",
                "stats/", "report.html", "comparison.json")
#: older outputs removed from a reused --output folder (single-file layout, the driver's scratch parts)
STALE_OUTPUTS = ("gates.json", "dead_letter.jsonl", "data_quality.jsonl", "_parts", "windowed_results.json", "windows/")
#: the files a run writes inside each shard folder (glob patterns relative to the folder): only these
#: are removed from a reused folder, so a user's own file inside ``sessions/`` (say) is kept
SHARD_PATTERNS = {
    "results.parquet/": ("part-*",),
    "sessions/": ("part-*", "*/part-*"),
    "dead_letter/": ("part-*",),
    "data_quality/": ("part-*",),
    "stats/": ("manifest.json", "*/part-*"),
    "windows/": ("*-*-*.jsonl",),
}


class OutputFiles:
    """Whole files written into one output folder through Beam's ``FileSystems`` (local or
    remote), once each, in the order asked; ``written`` lists their paths. Used by the commands
    that write a few sorted files at the end of a pipeline (``generate``, ``run_assistant``)."""

    def __init__(self, out: str):
        self.out = out
        self.written: list[str] = []

    def put(self, name: str, data: bytes) -> str:
        """Write ``data`` to ``<out>/<name>`` (replacing it); returns the path."""
        from apache_beam.io.filesystems import FileSystems

        path = FileSystems.join(self.out, name)
        with FileSystems.create(path) as f:
            f.write(data)
        self.written.append(path)
        return path

    def put_jsonl(self, name: str, records) -> str:
        """One JSON line per record (the project's canonical line: ``runner.to_json_line``)."""
        from fair_forge_beam.runner import to_json_line

        return self.put(name, "".join(to_json_line(r) + "\n" for r in records).encode("utf-8"))

    def put_json(self, name: str, doc: dict) -> str:
        """``doc`` as indented JSON with sorted keys and a final newline."""
        return self.put(name, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def sorted_dead_letters(dead) -> list[dict]:
    """``DeadLetter`` records as dicts in a stable order (their canonical JSON), so the written file
    does not depend on the order the runner delivered them in."""
    return sorted((d._asdict() for d in dead), key=lambda d: json.dumps(d, sort_keys=True, ensure_ascii=False))


def prepare_output_folder(output: str, filesystems=None) -> str:
    """Create ``output`` if missing and delete the outputs of an earlier run in it.

    Args:
        output: folder path or URL (``gs://...``); trailing slashes are dropped (``""`` → ``"."``).
        filesystems: Beam's ``FileSystems`` or a stand-in with ``exists``/``mkdirs``/``delete``
            (default: Beam's, imported here).

    Returns:
        The normalised folder path.

    Only this layout's outputs are removed: named files, and inside the shard folders the shard
    files of :data:`SHARD_PATTERNS` (a shard folder left empty is removed too); anything else a
    user keeps there stays.

    Raises:
        ValueError: ``output`` is a file, or the folder cannot be created (one-line message for
            a usage error).
    """
    if filesystems is None:
        from fair_forge_beam._beam import beam  # noqa: F401 - guarded Beam import first
        from apache_beam.io.filesystems import FileSystems as filesystems
    out = output.rstrip("/") or "."
    if os.path.isfile(out):
        raise ValueError(f"--output must be a folder, but {out} is a file")
    if not filesystems.exists(out):
        try:
            filesystems.mkdirs(out)
        except (OSError, IOError) as exc:  # e.g. a parent of --output is a file
            raise ValueError(f"--output: cannot create folder {out}: {exc}") from None
    stale, folders = [], []
    for name in OUTPUT_FILES + STALE_OUTPUTS:
        path = f"{out}/{name.rstrip('/')}"
        if name in SHARD_PATTERNS:  # a shard folder: its shards only, never a file the user put there
            folders.append(path)
            patterns = [f"{path}/{p}" for p in SHARD_PATTERNS[name]]
            stale += [m.path for r in filesystems.match(patterns) for m in r.metadata_list]
        elif filesystems.exists(path):
            stale.append(path)
    if stale:
        filesystems.delete(stale)
    for path in folders:  # local shard folders left empty go too (object stores have no folders)
        if os.path.isdir(path):
            for root, _, _ in sorted(os.walk(path), key=lambda w: -len(w[0])):
                if not os.listdir(root):
                    os.rmdir(root)
    return out


def write_launcher_reports(out: str, doc: dict, run_info: dict, baseline: Optional[dict], no_report: bool,
                           inconclusive_width: float, gates: Optional[list] = None,
                           baseline_info: Optional[dict] = None) -> list[str]:
    """After a local run: ``report.html`` (unless ``no_report``) and, with a ``baseline`` run's
    ``results.json`` content, ``comparison.json``; from the small ``results.json`` content ``doc``.
    ``gates`` (the run's resolved gates) colour the report's scorecard where they apply;
    ``baseline_info`` (the baseline's ``run_info.json``) lets the comparison state every differing setting.

    Returns:
        The names of the outputs now in ``out`` (for the summary's last line), in
        :data:`OUTPUT_FILES` order.
    """
    written = [n for n in OUTPUT_FILES if n not in ("report.html", "comparison.json")]
    if not no_report:
        from fair_forge_beam.reports.html import write_report

        write_report(out, compare_with=baseline, inconclusive_width=inconclusive_width, doc=doc, run_info=run_info,
                     gates=gates, compare_info=baseline_info)
        written += ["report.html"] + (["comparison.json"] if baseline is not None else [])
    elif baseline is not None:
        from fair_forge_beam._beam import beam  # noqa: F401 - guarded Beam import first
        from apache_beam.io.filesystems import FileSystems

        from fair_forge_beam.reports.compare import compare_runs

        with FileSystems.create(f"{out}/comparison.json") as f:
            f.write(json.dumps(compare_runs(doc, baseline, current_info=run_info or None,
                                                baseline_info=baseline_info), indent=2, ensure_ascii=False).encode("utf-8"))
        written.append("comparison.json")
    return written
