"""LLM judge: OpenAI-compatible chat endpoints through Beam ``RunInference`` (DESIGN §6).

Names are loaded on first use (importing this package imports neither Beam nor ``openai``)::

    from fair_forge_beam.components.judge import OpenAIJudgeHandler, RunJudge, judge_request

* :mod:`.handler` — ``OpenAIJudgeHandler`` (a ``RemoteModelHandler``), ``JudgeRequest`` /
  ``JudgeResult``, ``RunJudge`` (results + dead letters);
* :mod:`.cache` — persistent content-addressed SQLite cache;
* :mod:`.parsing` — data fences, echo removal, ``<think>`` capture, the strict verdict rule;
* :mod:`.secrets` — masking API keys in text we keep;
* :mod:`.prompts` — prompt templates that are safe for user text.
"""
from __future__ import annotations

from fair_forge_beam._lazy import lazy_exports

_EXPORTS = {
    "OpenAIJudgeHandler": "handler",
    "RunJudge": "handler",
    "JudgeOutputs": "handler",
    "JudgeRequest": "handler",
    "JudgeResult": "handler",
    "JudgeTransientError": "handler",
    "judge_request": "handler",
    "judge_counters": "handler",
    "COUNTER_NAMES": "handler",
    "STRUCTURED_MODES": "handler",
    "SQLiteJudgeCache": "cache",
    "cache_key": "cache",
    "default_cache_path": "cache",
    "split_reasoning": "parsing",
    "iter_json_objects": "parsing",
    "parse_structured": "parsing",
    "parse_verdict": "parsing",
    "fence": "parsing",
    "unfence": "parsing",
    "strip_echoes": "parsing",
    "scrub": "secrets",
    "resolve_schema": "parsing",
    "PromptTemplate": "prompts",
    "chat_messages": "prompts",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
