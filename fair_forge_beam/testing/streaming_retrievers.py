"""Streaming retrievers for tests and benchmarks (importable by worker processes)."""
from __future__ import annotations

import itertools

from fair_forge_beam.io.stream_sources import StreamingRetriever

__all__ = ["CountingRetriever"]


class CountingRetriever(StreamingRetriever):
    """Record ``i`` = session ``s{i % 3}``, turn ``i // 3``, event time ``1000 + i`` seconds;
    record 7 has no ``turn_index`` (a dead letter in a streaming run). ``n=None`` never ends."""

    def load_dataset(self):
        n = self.kwargs.get("n")
        for i in itertools.count() if n is None else range(n):
            rec = {
                "metadata": {"session_id": f"s{i % 3}", "assistant_id": "a"},
                "batch": {"qa_id": f"q{i}", "query": "hello", "assistant": "I am happy", "timestamp": 1000.0 + i},
                "turn_index": i // 3,
            }
            if i == 7:
                del rec["turn_index"]
            yield rec
