"""What a launcher writes after a local run, from the small ``results.json`` content: ``report.html``
and ``comparison.json``. Its own module, importing the report's code only when it is asked for: a run
with ``--no-report`` never imports the plots or ``scipy`` (test_fast_paths)."""
from __future__ import annotations

import json
import logging
import os
import traceback
from typing import Optional

__all__ = ["write_launcher_reports", "ReportFailed", "REPORT_FAILED_EXIT_CODE"]

log = logging.getLogger("fair_forge_beam.audit")

#: the exit code of a run whose report could not be written (its other outputs published)
REPORT_FAILED_EXIT_CODE = 1


class ReportFailed(SystemExit):
    """A run's ``report.html`` could not be written: every other output is published (the audit
    finished), the error is said in one line, and the run ends with exit code
    :data:`REPORT_FAILED_EXIT_CODE` once published (a gate's failure, exit code 3, comes first)."""

    def __init__(self, message: str):
        super().__init__(REPORT_FAILED_EXIT_CODE)
        self.message = message


def _where(exc: BaseException) -> str:
    """``file:line in function`` of the innermost frame of ``exc`` (in the package when it can)."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    ours = [f for f in frames if "fair_forge_beam" in f.filename] or frames
    if not ours:
        return "unknown place"
    f = ours[-1]
    path = f.filename.split("fair_forge_beam" + os.sep, 1)[-1] if "fair_forge_beam" in f.filename else f.filename
    return f"{path}:{f.lineno} in {f.name}"


def write_launcher_reports(out: str, doc: dict, run_info: dict, baseline: Optional[dict], no_report: bool,
                           inconclusive_width: float, gates: Optional[list] = None,
                           baseline_info: Optional[dict] = None, gate_checks: Optional[list] = None,
                           dead_letters: Optional[dict] = None, baseline_dir: Optional[str] = None,
                           shown: Optional[str] = None) -> list[str]:
    """After a local run: ``report.html`` (unless ``no_report``) and, with a ``baseline`` run's
    ``results.json`` content, ``comparison.json``; from the small ``results.json`` content ``doc``.
    ``gates`` (the run's resolved gates) colour the report's scorecard where they apply;
    ``baseline_info`` (the baseline's ``run_info.json``) lets the comparison state every differing setting;
    ``gate_checks`` (:func:`~fair_forge_beam.reports.gates.evaluate_gates`' result) puts the gates' outcome —
    passed, failed and skipped apart — in the report's findings. ``dead_letters``: the run's dead-letter
    summary when the caller has read it (the report does not read the shards again).
    ``baseline_dir``: the baseline's run folder (``--compare``), ``shown``: how ``out`` is named (a stage:
    its ``--output``): the comparison says the data both runs share, as the console does (trial35b B3).

    Returns:
        ``(written, failure)``: the names of the outputs now in ``out`` (for the summary's last
        line), in :data:`OUTPUT_FILES` order, and the :class:`ReportFailed` to raise once they are
        published when ``report.html`` could not be written (said in one line already), else ``None``.
    """
    from fair_forge_beam.reports.layout import OUTPUT_FILES

    written = [n for n in OUTPUT_FILES if n not in ("report.html", "comparison.json")]
    if not no_report:
        from fair_forge_beam.reports.html import write_report

        outcome = None
        if gates and gate_checks is not None:
            from fair_forge_beam.reports.gates import gates_report

            outcome = gates_report(gate_checks, gates, (doc.get("config") or {}).get("ci_level"))
        try:
            write_report(out, compare_with=baseline, inconclusive_width=inconclusive_width, doc=doc,
                         run_info=run_info, gates=gates, compare_info=baseline_info, gate_outcome=outcome,
                         dead_letters=dead_letters, compare_dir=baseline_dir, shown=shown)
        except Exception as exc:  # noqa: BLE001 - the report's fault never discards a finished run (trial37 T2)
            from fair_forge_beam.console import environment_failure

            if environment_failure(exc):  # the machine's (a full disk, ulimit -f), not the report's: the run stops
                raise
            return written, _report_failed(out, shown, exc)
        written += ["report.html"] + (["comparison.json"] if baseline is not None else [])
    elif baseline is not None:
        from fair_forge_beam._beam import beam  # noqa: F401 - guarded Beam import first
        from apache_beam.io.filesystems import FileSystems

        from fair_forge_beam.reports.compare import compare_runs

        with FileSystems.create(f"{out}/comparison.json") as f:
            from fair_forge_beam.io.secrets import scrub_known

            cmp = compare_runs(doc, baseline, current_info=run_info or None, baseline_info=baseline_info,
                               current_dir=out, baseline_dir=baseline_dir, current_name=shown)
            f.write(json.dumps(scrub_known(cmp), indent=2, ensure_ascii=False, allow_nan=False).encode("utf-8"))
        written.append("comparison.json")
    return written, None


def _report_failed(out: str, shown: Optional[str], exc: Exception) -> ReportFailed:
    """The run's report could not be written: what it left half-written goes, the error is said
    in one line (what failed, where, what is published), and the :class:`ReportFailed` to raise
    once the other outputs are published is returned."""
    from fair_forge_beam._beam import beam  # noqa: F401 - guarded Beam import first
    from apache_beam.io.filesystems import FileSystems

    from fair_forge_beam.plain import plain_reason
    from fair_forge_beam.quoting import shown as shown_text

    for name in ("report.html", "comparison.json"):
        try:
            if FileSystems.exists(f"{out}/{name}"):
                FileSystems.delete([f"{out}/{name}"])
        except Exception:  # noqa: BLE001 - what cannot be removed is named by the listing anyway
            pass
    folder = shown_text(shown or out)
    message = (f"report.html was not written: {type(exc).__name__}: {plain_reason(exc)} (at {_where(exc)}); "
               f"every other output of the run is published in {folder} (exit code {REPORT_FAILED_EXIT_CODE}). "
               "A fault of fair_forge_beam's report: please report it with this line; once fixed, "
               f"fair_forge_beam.reports.html.write_report({folder!r}) writes the report from the published run")
    log.error("%s", message)
    return ReportFailed(message)
