"""What a launcher writes after a local run, from the small ``results.json`` content: ``report.html``
and ``comparison.json``. Its own module, importing the report's code only when it is asked for: a run
with ``--no-report`` never imports the plots or ``scipy`` (test_fast_paths)."""
from __future__ import annotations

import json
from typing import Optional

__all__ = ["write_launcher_reports"]


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
        The names of the outputs now in ``out`` (for the summary's last line), in
        :data:`OUTPUT_FILES` order.
    """
    from fair_forge_beam.reports.layout import OUTPUT_FILES

    written = [n for n in OUTPUT_FILES if n not in ("report.html", "comparison.json")]
    if not no_report:
        from fair_forge_beam.reports.html import write_report

        outcome = None
        if gates and gate_checks is not None:
            from fair_forge_beam.reports.gates import gates_report

            outcome = gates_report(gate_checks, gates, (doc.get("config") or {}).get("ci_level"))
        write_report(out, compare_with=baseline, inconclusive_width=inconclusive_width, doc=doc, run_info=run_info,
                     gates=gates, compare_info=baseline_info, gate_outcome=outcome, dead_letters=dead_letters,
                     compare_dir=baseline_dir, shown=shown)
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
    return written
