"""Runners (spec §11): fill a dataset's answers by running it against the assistant under test.

:mod:`.assistant` — ``AssistantHandler`` (a Beam ``RemoteModelHandler`` for an OpenAI-compatible
chat endpoint or a generic HTTP JSON endpoint), ``RunAssistant`` (interactions → answered sessions,
per-session summaries, dead letters) and ``WriteRunOutputs``. Every reader's guard against scoring a
turn the runner failed is :mod:`fair_forge_beam.io.failed_turns`. Names load on first use.
"""
from __future__ import annotations

from fair_forge_beam._lazy import lazy_exports

_EXPORTS = {n: "assistant" for n in ("AssistantHandler", "RunAssistant", "WriteRunOutputs",
                                     "render_request", "response_field", "RUNNER_NAMESPACE",
                                     "assistant_counters", "sessions_from_interactions")}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
