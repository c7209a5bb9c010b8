"""Issue 28, item 2: per-session statistics in memory that does not grow with draws × interactions.

The within-session Bayesian bootstrap (:func:`~fair_forge_beam.statistical.combiners.session_mean_estimates`)
streams over chunks of interactions. It must give the same bits as the whole-matrix computation it
replaced (kept below as the reference), for any chunk size, and its memory must stay bounded for a
session far longer than the draws.
"""
from __future__ import annotations

import copy
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


def _random_session(rng, max_rows):
    n = int(rng.choice([40, max_rows, max_rows + 1, 300]) if rng.random() < 0.06 else
            rng.choice([1, 2, 3, 3, 4, 5, 6, 6, 9]))
    m = int(rng.choice([1, 1, 2, 3]))
    kind = rng.integers(5)
    if kind == 0:
        scores = rng.integers(0, 3, (n, m)).astype(float)  # ties and zeros
    elif kind == 1:
        scores = np.full((n, m), rng.choice([0.0, -0.0, 1.5, 0.1]))  # one value: degenerate ranges
    elif kind == 2:
        scores = rng.normal(size=(n, m)) * rng.choice([1.0, 1e-300, 1e300])
    else:
        scores = rng.random((n, m))
    if rng.random() < 0.2:
        scores[rng.random((n, m)) < 0.3] *= -0.0  # signed zeros among the values
    kind = rng.integers(4)
    if kind == 0:
        weights = [None] * n
    elif kind == 1:
        weights = [None if x is None else float(x) for x in rng.choice([0.0, 0.5, 1.0, None], n)]
    elif kind == 2:
        weights = [float(x) for x in rng.dirichlet(np.ones(n))]
    else:
        weights = [0.0] * n
    pos = list(range(n)) if rng.random() < 0.5 else sorted(int(p) for p in rng.choice(2 * n + 400, n, replace=False))
    return scores, weights, pos


def _bits(estimates):
    return [(e.n, *(None if v is None else np.float64(v).tobytes() for v in (e.mean, e.ci_low, e.ci_high)))
            for e in estimates]


@pytest.mark.slow
@pytest.mark.parametrize("B, seed", [(5000, 1), (1000, 2), (101, 3)])
def test_many_sessions_at_once_are_each_sessions_own_bits(monkeypatch, B, seed):
    """Issue 26: session_mean_estimates_many (a bundle's within-session bootstraps, the sessions of
    one length in one pass) gives every session the bits of its own session_mean_estimates call:
    random sessions of 1 to 300 interactions (beyond the worker's cached rows), None/zero/Dirichlet
    weights, ties, signed zeros, degenerate ranges, scores from 1e-300 to 1e300, turns not from 0.
    And the batch path is the one taken: no session of 3+ cached turns is bootstrapped on its own."""
    rng = np.random.default_rng(seed)
    mode = BayesianMode(mc_samples=B, rng_seed=seed)
    sessions = [_random_session(rng, combiners.WITHIN_SESSION_ROWS) for _ in range(1000 if B == 5000 else 2000)]
    own = [combiners.session_mean_estimates(*s, mode, "many") for s in sessions]
    alone = []
    real = combiners.session_mean_estimates
    monkeypatch.setattr(combiners, "session_mean_estimates", lambda *a, **k: alone.append(a[0]) or real(*a, **k))
    many = combiners.session_mean_estimates_many(sessions, mode, "many")
    monkeypatch.undo()
    assert [(_bits(e), w) for e, w in many] == [(_bits(e), w) for e, w in own]
    one_chunk = {m: combiners.WITHIN_SESSION_CHUNK_BYTES // (8 * B * (m + 2)) for m in (1, 2, 3)}
    batched = [s for s, w, _ in sessions if 3 <= len(s) <= min(combiners.WITHIN_SESSION_ROWS, one_chunk[s.shape[1]])
               and any(x > 0 for x in combiners.resolve_weights(w)[0])]
    assert len(batched) > len(sessions) // 4
    assert not any(any(a is s for s in batched) for a in alone)
    both = combiners.session_mean_and_point_estimates_many(sessions[:300], mode, "many")
    one = [combiners.session_mean_and_point_estimates(*s, mode, "many") for s in sessions[:300]]
    assert [(_bits(e), _bits(p), w) for e, p, w in both] == [(_bits(e), _bits(p), w) for e, p, w in one]


#: a command's process (tune_malloc first): page faults per answer of the Bayesian ASB draws and per session
#: of the within-session bootstraps, once their rows are cached and their code warm
CHURN = """
    import resource, numpy as np
    from fair_forge_beam._malloc import tune_malloc
    tuned = tune_malloc()
    from fair_forge_beam.statistical import combiners, group_fairness
    from fair_forge_beam.statistical.bayesian import BayesianMode
    rng = np.random.default_rng(3)
    sentiments = [None if i % 4 == 0 else float(rng.uniform(-1, 1)) for i in range(96)]
    def answers(r):  # other answers in every call: each is drawn (the thread's recent draws are never reused)
        return [(f"e{r}-{i}", bool(i % 7 == 0), (i % 5, 5 + i % 3), s) for i, s in enumerate(sentiments)]
    mode = BayesianMode(mc_samples=5000, rng_seed=2)
    sessions = [(rng.random((n, 1)), [None] * n, list(range(n))) for n in rng.integers(3, 7, 128).tolist()]
    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for r in range(3):  # the rows cached, the code and the heap warm (the recent draws' store full)
        group_fairness._draw_into({}, answers(r), 1, "t|asb", 5000, 0)
        combiners.session_mean_estimates_many(sessions, mode, "t|within-session")
    before = faults()
    group_fairness._draw_into({}, answers(3), 1, "t|asb", 5000, 0)
    mid = faults()
    combiners.session_mean_estimates_many(sessions, mode, "t|within-session")
    print(tuned, (mid - before) / len(sentiments), (faults() - mid) / len(sessions))
"""


@pytest.mark.skipif(not hasattr(__import__("ctypes").CDLL(None), "gnu_get_libc_version"), reason="glibc's allocator only")
def test_bayesian_temporaries_come_from_the_heap_not_fresh_mappings():
    """Issue 26 (Bayesian at most 1.2x frequentist): the ASB draws' chunks of rows and the within-session
    bootstraps' batches of replicates stay below the mmap threshold (``_malloc.rows_below_mmap_threshold``),
    so a command's heap serves them again. Chunks of 16 answers and batches of 26 sessions at 5,000 draws
    (640 KB, 1 MB) were mapped for themselves and every page faulted in afresh for each: about 20 faults
    per answer and per session, 40 % of an answer's draws (docs/performance.md, "2026-12-07 (bayes44)")."""
    import subprocess
    import sys
    import textwrap

    env = {k: v for k, v in __import__("os").environ.items()
           if k not in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(CHURN)], capture_output=True, text=True,
                         check=True, timeout=300, env=env).stdout.split()
    assert out[0] == "True"
    per_answer, per_session = float(out[1]), float(out[2])
    assert per_answer < 2 and per_session < 2, (per_answer, per_session)


@pytest.mark.parametrize("rows", [1, 5, 16, 10**6])
def test_asb_sums_are_the_same_bits_in_chunks_of_any_size(monkeypatch, rows):
    """How many answers are drawn at once (a chunk below the mmap threshold) changes no bit of the sums."""
    from fair_forge_beam.statistical import group_fairness

    rng = np.random.default_rng(rows)
    answers = [(f"e{i}", bool(rng.random() < 0.3), tuple(sorted({int(g) for g in rng.integers(0, 4, rng.integers(1, 3))})),
                None if rng.random() < 0.3 else float(rng.uniform(-1, 1))) for i in range(70)]
    want: dict = {}
    bound = sum(group_fairness._draw_into(want, [a], 9, "t|asb", 300, 0) for a in answers)
    monkeypatch.setattr(group_fairness, "rows_below_mmap_threshold", lambda row_bytes: rows)
    got: dict = {}
    assert group_fairness._draw_into(got, answers, 9, "t|asb", 300, 0) == bound
    assert sorted(got) == sorted(want) and all(got[g].tobytes() == want[g].tobytes() for g in want)


def _asb_answers(rng, n, prefix="e"):
    return [(f"{prefix}{i}", bool(rng.random() < 0.3), tuple(sorted({int(g) for g in rng.integers(0, 4, rng.integers(1, 3))})),
             None if rng.random() < 0.3 else float(rng.uniform(-1, 1))) for i in range(n)]


def _counting_rows(monkeypatch):
    """Counts the answers whose keyed rows group_fairness draws."""
    from fair_forge_beam.statistical import group_fairness

    drawn = []
    real = group_fairness.exponential_rows
    monkeypatch.setattr(group_fairness, "exponential_rows", lambda seed, ns, units, n: drawn.extend(units) or real(seed, ns, units, n))
    return drawn


def test_asb_draws_of_the_same_answers_again_are_added_not_drawn(monkeypatch):
    """bayes45: the same answers drawn by one of the thread's last two draws (the slices one set of cells
    feeds merge the same answers one after the other) are added from the kept sums, not drawn again: the
    bits and the bound of drawing them, into an empty or a filled ``gamma``; the kept sums never change."""
    from fair_forge_beam.statistical import group_fairness

    rng = np.random.default_rng(45)
    a, b, c = _asb_answers(rng, 40, "a"), _asb_answers(rng, 30, "b"), _asb_answers(rng, 20, "c")
    drawn = _counting_rows(monkeypatch)

    def fresh(items, into=None, bound=0):
        g = {k: v.copy() for k, v in (into or {}).items()}
        return g, group_fairness._draw_rows(g, items, 9, "t|asb", 300, bound)

    start, start_bound = fresh(c)
    for into, bound in (({}, 0), (start, start_bound), ({}, 0), (start, start_bound)):
        for items in (a, b, a, b):  # each one of the last two draws when it comes again
            want, want_bound = fresh(items, into, bound)
            del drawn[:]
            got = {k: v.copy() for k, v in into.items()}
            assert group_fairness._draw_into(got, items, 9, "t|asb", 300, bound) == want_bound
            assert sorted(got) == sorted(want) and all(got[g].tobytes() == want[g].tobytes() for g in want)
            for arr in got.values():  # the caller's arrays are its own: the kept sums stay as drawn
                arr += 7
    del drawn[:]
    group_fairness._draw_into({}, a, 9, "t|asb", 300, 0)
    group_fairness._draw_into({}, b, 9, "t|asb", 300, 0)
    assert drawn == []  # both kept
    group_fairness._draw_into({}, a, 9, "t|asb", 301, 0)  # another B, seed or namespace: drawn
    group_fairness._draw_into({}, a, 8, "t|asb", 300, 0)
    group_fairness._draw_into({}, a, 9, "u|asb", 300, 0)
    group_fairness._draw_into({}, a[1:], 9, "u|asb", 300, 0)
    assert len(drawn) == 4 * len(a) - 1


def test_asb_kept_draws_raise_the_overflow_error_as_drawing_does():
    from fair_forge_beam.statistical import group_fairness

    items = _asb_answers(np.random.default_rng(2), 10)
    bound = group_fairness._draw_into({}, items, 9, "t|asb", 300, 0)
    for start in (group_fairness._INT64_LIMIT - bound, group_fairness._INT64_LIMIT - 1):
        with pytest.raises(ValueError, match="would overflow int64"):
            group_fairness._draw_rows({}, items, 9, "t|asb", 300, start)
        with pytest.raises(ValueError, match="would overflow int64"):
            group_fairness._draw_into({}, items, 9, "t|asb", 300, start)  # kept: not drawn
    assert group_fairness._draw_into({}, items, 9, "t|asb", 300, group_fairness._INT64_LIMIT - bound - 1) == group_fairness._INT64_LIMIT - 1


def test_asb_draws_kept_only_below_their_bytes(monkeypatch):
    from fair_forge_beam.statistical import group_fairness

    items = _asb_answers(np.random.default_rng(3), 10)
    drawn = _counting_rows(monkeypatch)
    monkeypatch.setattr(group_fairness, "RECENT_DRAWS_BYTES", 4 * 300 * 8)  # one group's sums
    group_fairness._draw_into({}, items, 9, "t|asb", 300, 0)
    group_fairness._draw_into({}, items, 9, "t|asb", 300, 0)
    assert len(drawn) == 2 * len(items)  # more than one group: never kept
    assert not any(key[3] == tuple(items) for key in group_fairness._RECENT.draws)


def test_slices_fed_by_the_same_cells_draw_each_answer_once(monkeypatch):
    """bayes45 (issue 26: Bayesian at most 1.2x frequentist): ``overall`` and ``language=…`` of a run in one
    language merge the same cell accumulators in the same order (``CombineSlices``); every answer was drawn
    once per slice (a 20k audit: 7,389 rows for 2,463 answers). Now the second slice adds the first's sums:
    each answer is drawn once, and both slices hold the statistics of drawing every answer eagerly."""
    from fair_forge_beam.statistical import group_fairness
    from fair_forge_beam.statistical.bayesian import BayesianMode

    mode = BayesianMode(mc_samples=400, rng_seed=5)  # pending_limit 50
    fn = group_fairness.GroupFairnessCombineFn(["g0", "g1", "g2", "g3"], mode, "t|asb")
    rng = np.random.default_rng(8)
    cells = []
    for c in range(5):
        acc = fn.create_accumulator()
        for item in _asb_answers(rng, 40, f"c{c}-"):
            acc = fn.add_input(acc, item)
        cells.append(acc)
    eager = group_fairness.GroupFairnessStats(4, 400)
    for cell in cells:
        for eid, flagged, gs, s in cell.pending:
            eager.add(eid, flagged, gs, s, mode.seed, "t|asb")
            eager._draw()
    drawn = _counting_rows(monkeypatch)
    slices = []
    for _ in range(2):  # overall, language=…
        acc = fn.create_accumulator()
        for cell in cells:
            acc = fn.merge_accumulators([acc, cell])
        slices.append(acc)
    assert len(drawn) == len(set(drawn)) == 160  # 4 cells drawn (the last one's 40 answers still pending)
    for acc in slices:
        assert acc == eager  # the counts and every group's sums, the pending answers drawn into a copy
        whole = copy.copy(acc)
        whole._draw()
        assert whole.bound == eager.bound and whole._gamma.keys() == eager._gamma.keys()
        assert all(whole._gamma[g].tobytes() == eager._gamma[g].tobytes() for g in eager._gamma)
