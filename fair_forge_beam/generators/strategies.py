"""Chunk selection strategies (spec §10): which chunks go into one generated session.

``SequentialStrategy`` yields the whole chunk list once. ``RandomSamplingStrategy`` draws
``num_samples`` groups of chunks. Unlike the original (a ``random.Random(seed)`` walking the list
in the order given, unseeded by default) the draws here are keyed (DESIGN §4): every chunk's
rank in sample ``s`` is the BLAKE2b digest of ``(seed, s, chunk_id, content)``, so a sample
depends on the seed and the chunks' content only — not on load order, process or platform — and
``seed=None`` means seed 0, so every run is reproducible.
"""
from __future__ import annotations

import hashlib
import json
import logging
from abc import ABC, abstractmethod
from typing import Iterator, Optional, Sequence

import numpy as np

from fair_forge_beam.generators.schemas import Chunk
from fair_forge_beam.quoting import quoted
from fair_forge_beam.arguments import checks_arguments

__all__ = ["BaseChunkSelectionStrategy", "SequentialStrategy", "RandomSamplingStrategy", "chunk_digest"]

_LOG = logging.getLogger(__name__)


def chunk_digest(chunk: Chunk) -> str:
    """32-hex-digit BLAKE2b digest of a chunk's id and content."""
    return hashlib.blake2b(json.dumps([chunk.chunk_id, chunk.content], ensure_ascii=False).encode("utf-8"),
                           digest_size=16).hexdigest()


class BaseChunkSelectionStrategy(ABC):
    """Groups chunks into sessions: ``select(chunks)`` yields lists of chunks (spec §7)."""

    @abstractmethod
    def select(self, chunks: Sequence[Chunk]) -> Iterator[list[Chunk]]:
        ...

    def describe(self) -> dict:
        """JSON-compatible description (part of the session-id key)."""
        return {"strategy": type(self).__name__}

    def planned_calls(self, n_chunks: int) -> tuple[int, str]:
        """How many chunks :meth:`select` yields over ``n_chunks`` chunks (one generator call each),
        computed without building a group, and the product that makes it (for a message)."""
        return n_chunks, f"{n_chunks:,} chunk(s), all in one session"


class SequentialStrategy(BaseChunkSelectionStrategy):
    """All chunks, in the order given, as one group; nothing for an empty list."""

    def select(self, chunks: Sequence[Chunk]) -> Iterator[list[Chunk]]:
        if chunks:
            yield list(chunks)

    def __repr__(self) -> str:
        return "SequentialStrategy()"


def _count(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {quoted(v)}")
    return int(v)


class RandomSamplingStrategy(BaseChunkSelectionStrategy):
    """``num_samples`` random groups of ``chunks_per_sample`` chunks.

    Without replacement a group holds ``min(chunks_per_sample, n)`` distinct chunks (the ones
    with the smallest keyed ranks, in rank order; a ``chunks_per_sample`` above ``n`` is capped
    with a warning that says so); with replacement exactly ``chunks_per_sample``
    chunks drawn uniformly (``numpy`` Philox keyed by ``(seed, s)`` over the chunks sorted by
    digest), repeats possible. Nothing for an empty list.

    Raises ``ValueError`` when a count is not an integer ≥ 1 or the seed not an integer ≥ 0.
    """

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, num_samples: int = 5, chunks_per_sample: int = 3, seed: Optional[int] = None,
                 with_replacement: bool = False):
        self.num_samples = _count("num_samples", num_samples)
        self.chunks_per_sample = _count("chunks_per_sample", chunks_per_sample)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise ValueError(f"seed must be an integer >= 0 or None, got {quoted(seed)}")
        self.seed = None if seed is None else int(seed)
        self.with_replacement = bool(with_replacement)

    def __repr__(self) -> str:
        return (f"RandomSamplingStrategy(num_samples={self.num_samples}, chunks_per_sample={self.chunks_per_sample}, "
                f"seed={self.seed}, with_replacement={self.with_replacement})")

    def describe(self) -> dict:
        return {"strategy": type(self).__name__, "num_samples": self.num_samples, "chunks_per_sample": self.chunks_per_sample,
                "seed": self.seed or 0, "with_replacement": self.with_replacement}

    def planned_calls(self, n_chunks: int) -> tuple[int, str]:
        if not n_chunks:
            return 0, "no chunk"
        per = self.chunks_per_sample if self.with_replacement else min(self.chunks_per_sample, n_chunks)
        return self.num_samples * per, f"--num-samples {self.num_samples:,} x {per:,} chunk(s) per sample"

    def _rank(self, sample: int, digest: str) -> bytes:
        return hashlib.blake2b(f"{self.seed or 0}\x00{sample}\x00{digest}".encode(), digest_size=16).digest()

    def select(self, chunks: Sequence[Chunk]) -> Iterator[list[Chunk]]:
        if not chunks:
            return
        keyed = sorted(((chunk_digest(c), i) for i, c in enumerate(chunks)))
        if not self.with_replacement and self.chunks_per_sample > len(chunks):
            _LOG.warning("--chunks-per-sample %d is above the corpus's %d chunk(s): each of the %d group(s) holds all %d, "
                         "in a random order (pass --with-replacement to draw %d with repeats)", self.chunks_per_sample,
                         len(chunks), self.num_samples, len(chunks), self.chunks_per_sample)
        for s in range(self.num_samples):
            if self.with_replacement:
                seed_bytes = hashlib.blake2b(f"{self.seed or 0}\x00{s}\x00replacement".encode(), digest_size=16).digest()
                rng = np.random.Generator(np.random.Philox(key=int.from_bytes(seed_bytes, "little")))
                picks = rng.integers(0, len(keyed), size=self.chunks_per_sample)
                yield [chunks[keyed[int(j)][1]] for j in picks]
            else:
                ranked = sorted(keyed, key=lambda t: self._rank(s, t[0]))
                yield [chunks[i] for _, i in ranked[: self.chunks_per_sample]]
