"""Issue 26, item 2: a per-process cache of the scoring path holds a few MB when full, whatever the
size of the partition a worker scores (docs/performance.md, "Why the workers grew").

A Flink SDK worker runs a whole partition as one bundle and lives for the whole job: a cache
bounded by a large key count fills on a 1M-interaction audit (about 500,000 interactions per worker)
and not on a 100k one, so the worker grows with the data up to that count.
"""
from __future__ import annotations

import random
import tracemalloc

from fair_forge_beam.metrics import humanity


def test_the_spearman_cache_holds_a_few_mb_when_full():
    # distinct pairs of emotion-count vectors (8 emotions): in the bench's data almost every
    # (reference, answer) pair of a run is new (16,583 distinct of 16,584 in 50k interactions)
    rng = random.Random(0)
    n_emotions = len(humanity.EMOTIONS)
    counts = list(range(n_emotions))
    pairs = {(tuple(rng.sample(counts, n_emotions)), tuple(rng.sample(counts, n_emotions))) for _ in range(2100)}
    pairs = [(list(gt), list(answer)) for gt, answer in sorted(pairs)[:2000]]  # the cache makes its own tuples
    humanity._spearman_cached.cache_clear()
    tracemalloc.start()
    try:
        for gt, answer in pairs:
            humanity.spearman_alignment(gt, answer)
        n = humanity._spearman_cached.cache_info().currsize
        filled = tracemalloc.get_traced_memory()[0]
        humanity._spearman_cached.cache_clear()  # what the entries alone held (no import, no other object)
        per_entry = (filled - tracemalloc.get_traced_memory()[0]) / n
    finally:
        tracemalloc.stop()
        humanity._spearman_cached.cache_clear()
    full = per_entry * humanity._spearman_cached.cache_info().maxsize
    assert n == len(pairs)
    assert full < 6 * 2**20, f"the full cache holds {full / 2**20:.1f} MB ({per_entry:.0f} bytes an entry)"
