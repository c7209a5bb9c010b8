"""Issue 28, item 2: per-session statistics in memory that does not grow with draws × interactions.

The within-session Bayesian bootstrap (:func:`~fair_forge_beam.statistical.combiners.session_mean_estimates`)
streams over chunks of interactions. It must give the same bits as the whole-matrix computation it
replaced (kept below as the reference), for any chunk size, and its memory must stay bounded for a
session far longer than the draws.
"""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from fair_forge_beam.statistical import combiners
from fair_forge_beam.statistical.bayesian import BayesianMode
from fair_forge_beam.statistical.seeding import RowCache, exponential_rows


def _reference(scores, w, pos, seed, B):
    """The former computation: every row of draws at once, ``(m, n, B)`` products summed."""
    G = exponential_rows(seed, "within-session", pos, B) * w[:, None]
    return (scores.T[:, :, None] * G[None, :, :]).sum(axis=1) / G.sum(axis=0)


@pytest.mark.parametrize("n, m, B, chunk_bytes, shuffled", [
    (3, 2, 500, 1, False), (40, 2, 700, 8 * 700 * 4 * 3, False), (300, 3, 400, 8 * 400 * 5 * 17, False),
    (1000, 2, 256, 8 * 256 * 4 * 100, True), (257, 1, 1000, 10**9, False),
])
def test_chunked_replicates_are_the_whole_matrix_bits(monkeypatch, n, m, B, chunk_bytes, shuffled):
    rng = np.random.default_rng(n * 7 + m)
    scores = rng.random((n, m)) * rng.choice([1e-3, 1.0, 1e3], size=(1, m))
    w = rng.choice([0.0, 0.5, 1.0, 3.25], size=n)
    w[0] = 1.0
    pos = list(rng.permutation(n)) if shuffled else list(range(n))
    monkeypatch.setattr(combiners, "WITHIN_SESSION_CHUNK_BYTES", chunk_bytes)
    rows = RowCache(11, "within-session", B, max_rows=64)
    got = combiners._within_session_replicates(scores, w, [int(p) for p in pos], rows)
    ref = _reference(scores, w, [int(p) for p in pos], 11, B)
    assert got.shape == (m, B)
    assert got.tobytes() == ref.tobytes()


@pytest.mark.slow
def test_a_long_session_bootstraps_in_bounded_memory():
    """20,000 interactions x 5,000 draws: the whole matrix alone would be 800 MB (x 2 columns for
    the products); streamed, the peak stays under 80 MB and the estimates are proper intervals."""
    n = 20_000
    rng = np.random.default_rng(5)
    scores = rng.random((n, 2))
    mode = BayesianMode(mc_samples=5000, rng_seed=3)
    tracemalloc.start()
    try:
        est, warning = combiners.session_mean_estimates(scores, [None] * n, list(range(n)), mode)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert warning is None
    assert peak < 80 * 2**20, f"peak {peak / 2**20:.0f} MB"
    for j, e in enumerate(est):
        assert e.n == n and e.ci_low < e.mean < e.ci_high
        assert abs(e.mean - scores[:, j].mean()) < 0.01
