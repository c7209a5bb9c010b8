"""Runners (spec §11): fill a dataset's answers by running it against the assistant under test.

:mod:`.assistant` — ``AssistantHandler`` (a Beam ``RemoteModelHandler`` for an OpenAI-compatible
chat endpoint or a generic HTTP JSON endpoint), ``RunAssistant`` (interactions → answered sessions,
per-session summaries, dead letters) and ``WriteRunOutputs``; :mod:`.turns` — ``SkipFailedTurns`` (every
reader's guard against scoring a failed turn). Names load on first use.
"""
from __future__ import annotations

import importlib

_EXPORTS = {n: "assistant" for n in ("AssistantHandler", "RunAssistant", "WriteRunOutputs",
                                     "render_request", "response_field", "RUNNER_NAMESPACE",
                                     "assistant_counters", "sessions_from_interactions")}
_EXPORTS.update({n: "turns" for n in ("SkipFailedTurns", "failed_turn_reason")})

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
