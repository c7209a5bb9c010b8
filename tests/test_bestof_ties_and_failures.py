"""BestOf when nothing was compared and when every verdict is a tie (trial40 J1, J4), through the
main job against the scripted OpenAI-compatible server on 127.0.0.1, frequentist and Bayesian,
2 and 3 assistants, king and all pairs; and the tie rule itself (docs/metrics/bestof.md).

* Every match failed: the run is an empty run, as any judged metric's whose every judgement
  failed (exit code 4, nothing written); ``--allow-empty`` publishes it with no rank, no leader
  and no ``mle_exists`` in results.json, the slices' Parquet and report.html.
* Every match a tie: equal estimates share rank 1 and there is no leader — never the first id,
  never the Monte-Carlo noise of ``prob_best``."""
from __future__ import annotations

import json

import pytest

from helpers import FNAPI
from fair_forge_beam.reports.empty_run import EMPTY_RUN_EXIT_CODE, EmptyRun
from fair_forge_beam.statistical.bradley_terry import (
    STRENGTH_TIE_TOLERANCE,
    competition_ranks,
    counts_by_player,
    estimate_bradley_terry,
)
from fair_forge_beam.statistical import BayesianMode, FrequentistMode
from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

#: (mode, assistants, bestof mode): each level of each factor, and every pair of levels, once
CASES = [
    ("frequentist", 2, "king"),
    pytest.param("bayesian", 3, "all_pairs", marks=pytest.mark.slow),
    pytest.param("frequentist", 3, "all_pairs", marks=pytest.mark.slow),
    pytest.param("bayesian", 2, "king", marks=pytest.mark.slow),
]


def tie_judge(req):
    return {"winner": "tie", "verdict": "equally good", "confidence": 0.6, "reasoning": {}}


def failing_judge(req):
    """An answer that never validates (the winner is neither label): re-asked, then a dead letter."""
    return {"winner": "assistant_q", "verdict": "?", "confidence": 0.5, "reasoning": {}}


def _input(tmp_path, n_assistants: int):
    bots = ["bot-a", "bot-b", "bot-c"][:n_assistants]
    rows = [{"session_id": f"s{k}", "assistant_id": b, "context": "", "conversation": [
        {"qa_id": "q0", "query": f"question {k}", "assistant": f"{b} answers question {k} its own way"}]}
        for k in range(3) for b in bots]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path, bots


def _audit(srv, tmp_path, inp, out, mode, bestof_mode, *extra):
    from pipelines import audit

    return audit.run(["--quiet", f"--runner={FNAPI}", "--input", str(inp), "--output", str(out), "--metrics", "bestof",
                      "--bestof-mode", bestof_mode, "--mode", mode,
                      *(["--mc-samples", "1000"] if mode == "bayesian" else []),
                      "--judge-base-url", srv.base_url, "--judge-model", "judge-model",
                      "--judge-cache", str(tmp_path / "cache.sqlite3"), *extra])


def _slice_parquet_rankings(out):
    """The rankings of the slice records in full, as the Parquet shards ``slices/bestof/`` hold them."""
    from fair_forge_beam.reports.load import iter_slices

    return [r["ranking"] for r in iter_slices(str(out), "bestof")]


@pytest.mark.slow
@pytest.mark.parametrize("mode,n,bestof_mode", CASES)
def test_a_run_whose_every_match_failed_is_an_empty_run_and_ranks_no_one(tmp_path, monkeypatch, capsys, mode, n,
                                                                          bestof_mode):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    inp, bots = _input(tmp_path, n)
    out = tmp_path / "out"
    with ScriptedOpenAIServer(failing_judge) as srv:
        with pytest.raises(EmptyRun) as exc:
            _audit(srv, tmp_path, inp, out, mode, bestof_mode)
        assert exc.value.code == EMPTY_RUN_EXIT_CODE and not out.exists()
        err = capsys.readouterr().err
        assert "empty run: bestof scored nothing of" in err and "dead letter" in err, err
        doc = _audit(srv, tmp_path, inp, out, mode, bestof_mode, "--allow-empty")
    ms = doc["summary"]["metrics"]["bestof"]
    # the failed blocks are not "left out" (no verdict was given on them): only not scored
    assert ms["interactions_scored"] == 0 and "interactions_left_out" not in ms and ms["dead_letters"] > 0
    for s in doc["metrics"]["bestof"]["slices"]:
        assert (s["n_contests"], s["leader"], s.get("mle_exists")) == (0, None, None), s
        assert s["estimator"].startswith("not estimated")
        assert [(r["assistant_id"], r["rank"]) for r in s["ranking"]] == [(b, None) for b in bots]
    assert all(r["rank"] is None for ranking in _slice_parquet_rankings(out) for r in ranking)
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "1. bot-a" not in page and "2. bot-b" not in page


@pytest.mark.parametrize("mode,n,bestof_mode", CASES)
def test_all_ties_share_rank_one_and_name_no_leader(tmp_path, monkeypatch, mode, n, bestof_mode):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    inp, bots = _input(tmp_path, n)
    out = tmp_path / "out"
    with ScriptedOpenAIServer(tie_judge) as srv:
        doc = _audit(srv, tmp_path, inp, out, mode, bestof_mode)
    for s in doc["metrics"]["bestof"]["slices"]:
        assert s["n_contests"] > 0 and s["leader"] is None and s["leader_win_rate"]["mean"] is None, s
        assert [r["rank"] for r in s["ranking"]] == [1] * n
        assert len({r["strength"]["mean"] for r in s["ranking"]}) == 1
        assert f"no leader: {n} contestants share rank 1" in s["estimator"]
        if mode == "bayesian":  # P(best) comes from the MC draws (noise, posterior widths): it ranks nothing
            assert sum(r["prob_best"] for r in s["ranking"]) == pytest.approx(1.0)
    assert [[r["rank"] for r in ranking] for ranking in _slice_parquet_rankings(out)] == [[1] * n] * 2
    page = (out / "report.html").read_text(encoding="utf-8")
    assert all(f"1= {b}" in page for b in bots) and "2. bot-b" not in page
    # a gate on the leader's win rate says why it has none: no leader, BestOf's declared reason (trial49 B7:
    # "leader_win_rate mean is undefined (no data: n = 0)")
    from fair_forge_beam.metrics.best_of import NO_LEADER
    from fair_forge_beam.reports.gates import evaluate_gates, parse_gate

    for check in evaluate_gates(doc, [parse_gate("bestof leader_win_rate mean >= 0.5 in every slice")]):
        assert check.status == "fail" and "no data" not in check.reason, check.reason
        assert check.message(0.95).endswith(f"leader_win_rate mean is undefined: {NO_LEADER} (n = 0)"), check.message(0.95)


def test_competition_ranks_share_equal_estimates():
    # two tied at the top, a tie below: 1, 1, 3, 3, 5 ("1224" ranking), whatever the input order
    assert competition_ranks([0.5, 0.5, 0.1, 0.1, -1.0]) == [1, 1, 3, 3, 5]
    assert competition_ranks([-1.0, 0.1, 0.5, 0.1, 0.5]) == [5, 3, 1, 3, 1]
    # a unique top, a tie below it; no estimate, no rank
    assert competition_ranks([0.75, None, 0.25, 0.25]) == [1, None, 2, 2]
    assert competition_ranks([None, None]) == [None, None] and competition_ranks([]) == []
    # exactly equal only without a tolerance; within it with one
    assert competition_ranks([0.2310490594674945, 0.23104905946749485]) == [2, 1]
    assert competition_ranks([0.2310490594674945, 0.23104905946749485], STRENGTH_TIE_TOLERANCE) == [1, 1]
    assert competition_ranks([0.3, 0.3 - 2 * STRENGTH_TIE_TOLERANCE], STRENGTH_TIE_TOLERANCE) == [1, 2]


@pytest.mark.parametrize("mode", [FrequentistMode(), BayesianMode(mc_samples=2000, rng_seed=3)], ids=["mle", "posterior-mode"])
def test_symmetric_verdicts_give_shared_ranks_from_the_fit_not_from_id_or_draws(mode):
    """a and b tie each other and each beat c and d 2 of 3 times; c and d tie each other: a and b
    share rank 1, c and d rank 3, in both modes (the MLE; the posterior mode), whatever the MC
    draws say of P(best)."""
    pairs = [(("a", "b"), (0, 0, 2)), (("a", "c"), (2, 1, 0)), (("a", "d"), (2, 1, 0)),
             (("b", "c"), (2, 1, 0)), (("b", "d"), (2, 1, 0)), (("c", "d"), (0, 0, 2))]
    players = ("a", "b", "c", "d")
    bt = estimate_bradley_terry(pairs, counts_by_player(players, pairs), mode, 1.0, "bestof", "overall", "bradley-terry")
    means = [bt.strengths[p].mean for p in players]
    assert means[0] > means[2]
    assert competition_ranks(means, STRENGTH_TIE_TOLERANCE) == [1, 1, 3, 3]


def test_the_slice_ranking_has_no_leader_for_a_shared_top_and_one_above_a_tie_below():
    """The slice estimator itself (the one place a slice's ranks and leader are made): a shared top
    has no leader; a unique top above a tie keeps its leader and the tie below shares rank 2."""
    from fair_forge_beam.engine import SliceAccumulators
    from fair_forge_beam.metrics.best_of import BestOf, SliceStatsCombineFn, _RankSlice

    def ranking(blocks, mode):
        fn = SliceStatsCombineFn()
        acc = fn.create_accumulator()
        for contestants, pairs in blocks:
            acc = fn.add_input(acc, (contestants, None, pairs, len(contestants), 0))
        est = _RankSlice(BestOf(judge={"model": "m", "base_url": "http://127.0.0.1:9/v1"}, statistical_mode=mode))
        (rec,) = est.estimate("overall", SliceAccumulators(None, acc, len(blocks)), None, None)
        return rec.leader, {r.assistant_id: r.rank for r in rec.ranking}

    ab = ("a", "b", "c")
    top_tie = [(ab, (("a", "b", None), ("a", "c", "a"), ("b", "c", "b"))),
               (ab, (("a", "b", None), ("a", "c", "c"), ("b", "c", "c"))),
               (ab, (("a", "b", None), ("a", "c", "a"), ("b", "c", "b")))]
    below_tie = [(ab, (("a", "b", "a"), ("a", "c", "a"), ("b", "c", None))),
                 (ab, (("a", "b", "b"), ("a", "c", "c"), ("b", "c", None))),
                 (ab, (("a", "b", "a"), ("a", "c", "a"), ("b", "c", None)))]
    for mode in (FrequentistMode(), BayesianMode(mc_samples=1000, rng_seed=1)):
        assert ranking(top_tie, mode) == (None, {"a": 1, "b": 1, "c": 3})
        assert ranking(below_tie, mode) == ("a", {"a": 1, "b": 2, "c": 2})
