"""A turn the runner failed to answer is a dead letter, never a scored answer (spec §11's contract).

In ``io/`` beside the readers, apart from the runner (:mod:`fair_forge_beam.assistants.assistant`), so
that every reader (files, Kafka, Pub/Sub, retrievers) applies the guard without importing Beam's
RunInference package (which probes for torch): see :func:`fair_forge_beam.io.read.records_to_interactions`.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from fair_forge_beam._beam import beam
from fair_forge_beam.io.elements import dead_letter

#: the stage of a turn the assistant runner failed to answer: its dead letters in the runner's output and
#: in the audit's (``results.json``'s ``summary.assistant_failed`` counts the audit's)
RUNNER_STAGE = "runner"


def failed_turn_reason(agentic: Any) -> Optional[str]:
    """The runner's error when ``agentic["runner"]["ok"]`` is false (a failed turn), else None."""
    if agentic is None:  # the common case (no runner record): skip the costly ABC isinstance check
        return None
    if isinstance(agentic, Mapping):
        r = agentic.get("runner")
        if isinstance(r, Mapping) and r.get("ok") is False:
            return str(r.get("error") or "unknown error")
    return None


class SkipFailedTurns(beam.PTransform):
    """The audit's guard: ``PCollection[Interaction]`` → ``(ok, dead letters)``; an interaction
    whose ``agentic["runner"]["ok"]`` is false (a turn the runner failed to answer) becomes a
    dead letter (stage ``"runner"``), never a scored answer."""

    class _Fn(beam.DoFn):
        def process(self, it):
            reason = failed_turn_reason(it.agentic)
            if reason is None:
                yield it
            else:
                yield beam.pvalue.TaggedOutput("dead", dead_letter(
                    RUNNER_STAGE, f"the assistant call failed in the runner, not scored: {reason}",
                    {"qa_id": it.qa_id, "query": it.query, "assistant": it.assistant}, element_id=it.element_id))

    def expand(self, interactions):
        out = interactions | "SkipFailedTurnsFn" >> beam.ParDo(self._Fn()).with_outputs("dead", main="ok")
        return out.ok, out.dead
