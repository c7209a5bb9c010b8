"""Empty runs: a run that measured nothing is not published over the last good one.

A run is empty when no input record was read, when every record was rejected at read, or when a
requested metric scored nothing (every interaction dead-lettered, or none it applies to). The main
job then exits with :data:`EMPTY_RUN_EXIT_CODE` and one line on stderr, and leaves the output folder
as it was — unless ``--allow-empty``, which publishes the run and exits 0 (docs/cli.md, exit codes).

A run with a **coverage gate** that read interactions is never empty for want of scores: what was
not scored is what its coverage gates measure (an assistant whose answers all drift into a
language no metric covers), so the run is published and its gates decide (exit code 3 when one
fails) — an empty-run exit would hide exactly the failure the gate was written to catch.
"""
from __future__ import annotations

from fair_forge_beam.console import say  # console output never fails a run

import sys
from typing import NoReturn, Optional, Sequence

__all__ = ["EMPTY_RUN_EXIT_CODE", "EmptyRun", "kept_stage_words", "empty_run_reason", "windowed_empty_run_reason", "fail_empty_run"]

#: exit code of an empty run (0 success, 2 usage or configuration error, 3 a gate failed)
EMPTY_RUN_EXIT_CODE = 4


class EmptyRun(SystemExit):
    """Raised by the main job for an empty run, before anything is published; exit code
    :data:`EMPTY_RUN_EXIT_CODE`. ``reason``: what was empty (one line). ``kept_stage``: the stage
    of the run, written and never published, that
    :func:`~fair_forge_beam.reports.output_folder.staged_output` keeps (instead of removing it) for
    its failures to be read there (``None``: no stage was written)."""

    def __init__(self, reason: str, kept_stage: Optional[str] = None):
        super().__init__(EMPTY_RUN_EXIT_CODE)
        self.reason = reason
        self.kept_stage = kept_stage

    def __str__(self) -> str:
        return self.reason


def _top(reasons: Optional[dict]) -> str:
    if not reasons:
        return ""
    reason, count = next(iter(reasons.items()))  # ranked: most frequent first
    return f"; most common: {reason} ({count})"


def _dead(n: int) -> str:
    """``n`` dead letter(s), in words: "1 dead letter", "2 dead letters"."""
    return f"{n} dead letter{'' if n == 1 else 's'}"


def empty_run_reason(doc: dict, coverage_gated: bool = False, inputs: str = "the inputs") -> Optional[str]:
    """Why the run whose ``results.json`` content is ``doc`` is empty, or ``None`` when it is not.
    ``inputs``: what the run read, in its words ("the inputs"; a roll-up: "the runs rolled up").

    Reads ``summary``: ``interactions_read`` 0 and ``rejected_at_read`` 0 → no input record;
    ``interactions_read`` 0 with rejections → every record rejected; a metric whose
    ``interactions_scored`` is 0 → it scored nothing (with its dead letters and their most common
    reason) — not when its sessions were read and its estimates leave them out
    (``interactions_left_out``: Regulatory's IRRELEVANT-only sessions, BestOf's walkovers: the metric
    gave them a verdict, its slices say the estimates rest on 0 sessions; a session the metric
    judged nothing in, such as a BestOf block whose every match failed, is not left out:
    :func:`~fair_forge_beam.reports.results.session_outcome`) — unless ``coverage_gated`` (the run has a coverage gate: the module docstring). The
    text comes partly from the data: print it through ``reports.summary.printable``.
    """
    s = doc.get("summary") or {}
    n_read, rejected = int(s.get("interactions_read") or 0), int(s.get("rejected_at_read") or 0)
    if n_read == 0 and rejected == 0:
        return f"no input record ({inputs} hold no interaction)"
    if n_read == 0:
        return f"every record was rejected at read ({_dead(rejected)}{_top(s.get('rejected_at_read_reasons'))})"
    if coverage_gated:
        return None
    idle = []
    for name, ms in (s.get("metrics") or {}).items():
        if not ms.get("interactions_scored", ms.get("scored", 0)) and not ms.get("interactions_left_out"):
            dead = int(ms.get("dead_letters") or 0)
            idle.append(f"{name} scored nothing of {n_read} interactions read ({_dead(dead)}"
                        f"{_top(ms.get('dead_letter_reasons'))})")
    failed = int(s.get("assistant_failed") or 0)
    if idle and failed:  # read turns with no answer (the runner's): why the metrics had little or nothing to score
        idle.append(f"the assistant failed {failed} of the {n_read} turns read{_top(s.get('assistant_failed_reasons'))}")
    return "; ".join(idle) or None


def windowed_empty_run_reason(doc: dict, metrics: Sequence[str]) -> Optional[str]:
    """The same for a bounded windowed run (``windowed_results.json`` content ``doc``): a metric with
    no slice record in any window scored nothing; ``None`` when every metric has one."""
    have = {r.get("metric") for r in doc.get("slices") or []}
    idle = [m for m in metrics if m not in have]
    if not idle:
        return None
    dead = int(doc.get("dead_letters") or 0)
    if len(idle) == len(metrics):
        return f"no interaction was scored in any window ({_dead(dead)})"
    return "; ".join(f"{m} scored nothing in any window" for m in idle) + f" ({_dead(dead)} in all)"


def kept_stage_words(stage: Optional[str], out: str) -> str:
    """What an empty run's one line says of its kept stage (``""`` when it wrote none): where its
    outputs, its dead letters among them, can be read, and until when."""
    if not stage:
        return ""
    from fair_forge_beam.reports.summary import printable

    return f"; this run's outputs (its dead letters) are kept unpublished in {printable(stage)} until the next run into {printable(out)}"


def fail_empty_run(reason: str, out: Optional[str], prog: str = "fair-forge-beam", allow_empty: bool = True,
                   kind: str = "empty run", stage: Optional[str] = None) -> NoReturn:
    """Print the empty run's one line on stderr and raise :class:`EmptyRun` (exit code 4)::

        fair-forge-beam: empty run: humanity scored nothing of 26 interactions read (...); out is left as it was (...)

    (``nothing was written (out was not created)`` when ``out`` does not exist yet:
    :func:`~fair_forge_beam.console.output_state`.)

    ``reason`` passes through :func:`~fair_forge_beam.reports.summary.printable` (it quotes data).
    ``prog``: the command named (the loop and the run stage name themselves); ``allow_empty``:
    whether the command has ``--allow-empty`` (the hint names it). ``out``: the folder or file the
    command would have written (``None``: it writes none, the line says nothing of it); ``kind``:
    what was empty ("empty trend", "empty comparison" for the commands over earlier runs); ``stage``: the
    run's stage, written but not published (``out`` stays as it was), kept for its failures to be read
    and named in the line (:func:`kept_stage_words`)."""
    import fair_forge_beam._beam  # noqa: F401 - Beam's first import under the logging guard (case-006)
    from apache_beam.io.filesystems import FileSystems

    from fair_forge_beam.reports.summary import printable

    from fair_forge_beam.console import output_state
    from fair_forge_beam.io.secrets import scrub_known_text

    reason = scrub_known_text(reason)  # it quotes the data's reasons: the key values masked (trial33 O1)

    # a first run has no folder yet: "nothing was written (out was not created)"
    kept = ("" if out is None else f"; {printable(out)} is left as it was" if FileSystems.exists(out)
            else f"; {printable(out)} was not created" if stage else f"; {output_state(printable(out), False)}")
    hint = "; --allow-empty publishes such a run" if allow_empty else ""
    say(f"{prog}: {kind}: {printable(reason)}{kept}{kept_stage_words(stage, out or '')} (exit code "
          f"{EMPTY_RUN_EXIT_CODE}{hint})", file=sys.stderr)
    raise EmptyRun(reason, stage)
