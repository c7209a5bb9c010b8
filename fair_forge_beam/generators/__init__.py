"""Test-set generators (spec §10): context documents → questions / conversations → ``Dataset`` records.

* :mod:`.schemas` — ``Chunk`` and the LLM output schemas (``GeneratedQueriesOutput``,
  ``GeneratedConversationOutput``);
* :mod:`.loader` — ``LocalMarkdownLoader`` (header / size chunking, unique chunk ids) and the
  ``create_markdown_loader`` / ``create_context_loader`` factories;
* :mod:`.strategies` — ``SequentialStrategy`` and ``RandomSamplingStrategy`` (keyed, reproducible);
* :mod:`.generate` — prompts, the ``GenerateDataset`` Beam transform over the judge handler, and
  the upstream-style ``Generator`` (``generate_queries`` / ``generate_conversation`` /
  ``generate_dataset``).

Names are loaded on first use (importing this package imports neither Beam nor ``openai``).
"""
from __future__ import annotations

from fair_forge_beam._lazy import lazy_exports

_EXPORTS = {
    "Chunk": "schemas",
    "GeneratedQuery": "schemas",
    "GeneratedQueriesOutput": "schemas",
    "ConversationTurn": "schemas",
    "GeneratedConversationOutput": "schemas",
    "BaseContextLoader": "loader",
    "LocalMarkdownLoader": "loader",
    "create_markdown_loader": "loader",
    "create_context_loader": "loader",
    "packaged_corpus_path": "loader",
    "BaseChunkSelectionStrategy": "strategies",
    "SequentialStrategy": "strategies",
    "RandomSamplingStrategy": "strategies",
    "Generator": "generate",
    "GenerateDataset": "generate",
    "generator_handler": "generate",
    "plan_requests": "generate",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
