"""BestOf (spec §6.6) against the scripted OpenAI-compatible server on 127.0.0.1: the judge
decides from ``[q=x]`` markers in the answers, so every verdict is known. King of the hill
(order, tied last match, shuffled input, walkover, judge failures), all pairs with the
Bradley–Terry ranking on the original's 4-assistant example, hh-rlhf pairs through
``BestOf.run(Retriever, ...)``, and the main job."""
from __future__ import annotations

import json
import math
import random
import re
from functools import partial

import pytest
from fair_forge_beam.reports.load import iter_dead_letters, iter_quality_warnings, read_sessions

import helpers
from helpers import FNAPI, handler_for, run_metric
from fair_forge_beam.io.hh_rlhf import HHRLHFPairs
from fair_forge_beam.statistical.slices import SINGLE_SESSION_NOTE
from fair_forge_beam.metrics.best_of import BestOf, contest_order
from fair_forge_beam.schemas.best_of import BestOfMetric, BestOfSliceMetric
from fair_forge_beam.statistical import BayesianMode, FrequentistMode
from fair_forge_beam.testing.openai_server import Fault, ScriptedOpenAIServer


def sides(req):
    case = [m["content"] for m in req.messages if m["role"] == "user"][-1]
    a, b = case.split("=== ASSISTANT B ===")
    return a.split("=== ASSISTANT A ===")[1], b


def marker_judge(req):
    """Winner = the side whose ``[q=x]`` markers sum higher; ``[garbage]`` → a winner that is
    neither label (fails validation)."""
    a, b = sides(req)
    if "[garbage]" in a + b:
        return {"winner": "assistant_g", "verdict": "?", "confidence": 0.5, "reasoning": {}}
    sa, sb = (sum(float(x) for x in re.findall(r"\[q=([0-9.]+)\]", s)) for s in (a, b))
    winner = "A" if sa > sb else "B" if sb > sa else "tie"
    return {"winner": winner, "verdict": f"{sa:g} vs {sb:g}", "confidence": 0.8, "reasoning": {"A": "a", "B": "b"}}


ix = partial(helpers.ix, context="ctx", qa_id_format="q{turn}", query_format="question {turn} of {session_id}")


DATA = [
    # S1: a < b = c  → king a, b dethrones a, b–c tie: the king b is the winner, not "tie"
    ix("S1", "a", 0, "alpha [q=2]"), ix("S1", "b", 0, "beta [q=3]"), ix("S1", "c", 0, "gamma [q=3]"),
    # S2: one assistant → walkover
    ix("S2", "solo", 0, "alone [q=9]"),
    # S3: first match gets HTTP 500 → dead letter, block failed, z never judged
    ix("S3", "x", 0, "x [q=1]"), ix("S3", "y", 0, "y [q=2] [boom]"), ix("S3", "z", 0, "z [q=5]"),
    # S4: the judge names neither A nor B → re-asked, then dead letter
    # (and h answered another question: a data-quality warning, judged all the same)
    ix("S4", "g", 0, "g [q=1] [garbage]"), ix("S4", "h", 0, "h [q=1]", qa_id="other"),
    # S5: two turns each, Spanish: p (1 + 1) beats r (0 + 1); turns rendered in turn order
    ix("S5", "p", 0, "p0 [q=1]", language="spanish"), ix("S5", "p", 1, "p1 [q=1]", language="spanish"),
    ix("S5", "r", 0, "r0 [q=0]", language="spanish"), ix("S5", "r", 1, "r1 [q=1]", language="spanish"),
]


def by_block(res):
    return {json.loads(s["block_id"])[0]: s for s in res["sessions"]}


def test_contest_order_is_declared_then_sorted_never_arrival():
    assert contest_order(["c", "a", "b"]) == ["a", "b", "c"]
    assert contest_order({"c", "a", "b", "d"}, ["c", "x", "a", "c"]) == ["c", "a", "b", "d"]


@pytest.mark.slow
def test_king_of_the_hill_shuffle_tie_walkover_and_failures(tmp_path):
    faults = [Fault("server_error", match="[boom]", retry_after=None)]
    with ScriptedOpenAIServer(marker_judge, faults=faults) as srv:
        handler = handler_for(srv, tmp_path)
        d1, d2 = list(DATA), list(DATA)
        random.Random(1).shuffle(d1)
        random.Random(2).shuffle(d2)
        r1 = run_metric(BestOf(judge=handler), d1, tmp_path / "r1")
        first = list(srv.requests)
        srv.reset_counts()
        r2 = run_metric(BestOf(judge=handler), d2, tmp_path / "r2")
        # the shuffled re-run builds the very same prompts: only the failed matches (never cached)
        # are sent again — the 500 once, the invalid answer twice (ask + one re-ask)
        assert srv.count() == 3
        srv.reset_counts()
        r3 = run_metric(BestOf(judge=handler, contestant_order="c,a,b", block="qa"),
                        [x for x in DATA if x.session_id in ("S1", "S5")], tmp_path / "r3")
        assert srv.count() == 4  # c–a, c–b and S5's two questions one at a time are new prompts

    b1, b2 = by_block(r1), by_block(r2)
    assert b1 == b2 and sorted(map(json.dumps, r1["interactions"])) == sorted(map(json.dumps, r2["interactions"]))
    assert sorted(r1["slices"], key=lambda s: s["slice"]) == sorted(r2["slices"], key=lambda s: s["slice"])
    s1 = b1["S1"]
    assert s1["contestants"] == ["a", "b", "c"] and s1["status"] == "decided"
    assert [(c["left_id"], c["right_id"], c["winner_id"]) for c in s1["bestof_contests"]] == [("a", "b", "b"), ("b", "c", "tie")]
    assert s1["bestof_winner_id"] == "b" and s1["assistant_id"] == "b"  # the king, not "tie" (spec §17 item 4)
    assert s1["bestof_contests"][0]["confidence"] == 0.8 and s1["bestof_contests"][0]["verdict"] == "2 vs 3"
    assert b1["S2"]["status"] == "walkover" and b1["S2"]["bestof_winner_id"] == "solo" and b1["S2"]["bestof_contests"] == []
    assert b1["S3"]["status"] == "failed" and b1["S3"]["bestof_winner_id"] is None and b1["S3"]["n_failed"] == 1
    assert b1["S3"]["bestof_contests"] == []
    assert b1["S4"]["status"] == "failed" and b1["S4"]["n_failed"] == 1
    assert b1["S5"]["bestof_winner_id"] == "p" and b1["S5"]["qa_id"] == "batch_len_2" and b1["S5"]["language"] == "spanish"
    assert all(BestOfMetric.model_validate(s) for s in r1["sessions"])
    # judge prompts: anonymous labels, turns in turn order, no assistant ids
    s5 = [r for r in first if "p0 [q=1]" in r.prompt][0]
    a_side, b_side = sides(s5)
    assert a_side.index("QUESTION 1:") < a_side.index("p0") < a_side.index("QUESTION 2:") < a_side.index("p1")
    assert "r0 [q=0]" in b_side and not re.search(r"\b(p|r)\b", s5.messages[0]["content"])
    # failures: dead letter, counted, never a verdict
    dead = {json.loads(d["element_id"].split("#")[0])[0]: d for d in r1["dead_letter"]}
    assert set(dead) == {"S3", "S4"} and all(d["stage"] == "bestof" for d in dead.values())
    assert "HTTP 500" in dead["S3"]["reason"] and "assistant_g" in dead["S4"]["raw"]
    quality = {q["kind"] for q in r1["quality"]}
    assert quality == {"bestof_walkover", "bestof_question_mismatch"}
    # slices: overall and per language; 3 judged matches (a–b, b–c, p–r), 2 failures
    sl = {s["slice"]: s for s in r1["slices"]}
    assert set(sl) == {"overall", "language=english", "language=spanish"}
    o = sl["overall"]
    # n_blocks: the blocks holding a contest (the engine's scored sessions, issue 28 H3): S1 and S5;
    # the walkover S2 and the failed S3 and S4 are read, not scored
    assert (o["n_blocks"], o["n_contests"], o["n_failed"], o["n_interactions"]) == (2, 3, 2, len(DATA))
    rank = {r["assistant_id"]: r for r in o["ranking"]}
    assert (rank["b"]["wins"], rank["b"]["losses"], rank["b"]["ties"], rank["b"]["win_rate"]) == (1, 0, 1, 0.75)
    assert rank["solo"]["blocks_won"] == 1 and rank["solo"]["win_rate"] is None
    assert o["mle_exists"] is False and all(r["strength"]["mean"] is None for r in o["ranking"])
    assert all(BestOfSliceMetric.model_validate(s) for s in r1["slices"])
    # declared order: c is king first; c beats a, ties b → c wins
    b3 = {tuple(json.loads(s["block_id"])): s for s in r3["sessions"]}
    s1c = b3[("S1", "q0")]
    assert s1c["contestants"] == ["c", "a", "b"] and s1c["bestof_winner_id"] == "c"
    assert [c["winner_id"] for c in s1c["bestof_contests"]] == ["c", "tie"]
    # block="qa": one block per question; p beats r on q0, ties on q1 (the king p stays)
    assert (b3[("S5", "q0")]["bestof_winner_id"], b3[("S5", "q1")]["bestof_winner_id"]) == ("p", "p")
    assert b3[("S5", "q1")]["qa_id"] == "q1" and b3[("S5", "q1")]["bestof_contests"][0]["winner_id"] == "tie"
    assert {q["kind"] for q in r3["quality"]} == {"bestof_undeclared_contestant"}


def length_judge(req):
    """Prefers the longer conversation (by characters); equal lengths tie."""
    a, b = sides(req)
    winner = "A" if len(a) > len(b) else "B" if len(b) > len(a) else "tie"
    return {"winner": winner, "verdict": f"{len(a)} vs {len(b)}", "confidence": 0.7, "reasoning": {}}


@pytest.mark.slow
def test_all_pairs_on_the_original_example_in_the_main_job(tmp_path, shared_dir, monkeypatch):
    import pyarrow.parquet as pq

    from fair_forge_beam.components.judge.prompts_bestof import render_contestant
    from pipelines import audit

    src = shared_dir / "data" / "fair_forge_examples" / "dataset_bestof.json"
    sessions = json.loads(src.read_text(encoding="utf-8"))
    lengths = {s["assistant_id"]: len(render_contestant([(b["query"], b["assistant"], b.get("ground_truth_assistant"))
                                                         for b in s["conversation"]])) for s in sessions}
    # plus a block whose only match gets answers that never validate: dead-lettered, counted,
    # the block has no winner
    extra = [{"session_id": "zz-fail", "assistant_id": aid, "context": "", "conversation": [
        {"qa_id": "1", "query": "Hi", "assistant": f"{aid} says hello [boom]"}]} for aid in ("u1", "u2")]
    walkover = [{"session_id": "zz-solo", "assistant_id": "solo", "context": "", "language": "spanish", "conversation": [
        {"qa_id": str(k), "query": f"Q{k}", "assistant": f"answer {k}"} for k in range(3)]}]
    inp = tmp_path / "in.json"
    inp.write_text(json.dumps(sessions + extra + walkover), encoding="utf-8")
    expected = sorted(lengths, key=lambda a: -lengths[a])
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    with ScriptedOpenAIServer(length_judge, faults=[Fault("invalid", match="[boom]")]) as srv:
        doc = audit.run(["--quiet", f"--runner={FNAPI}", "--input", str(inp), "--output", str(tmp_path / "out"),
                         "--metrics", "bestof", "--bestof-mode", "all_pairs", "--bestof-order", "assistant_delta",
                         "--mode", "bayesian", "--mc-samples", "1000", "--judge-base-url", srv.base_url,
                         "--judge-model", "judge-model", "--judge-cache", str(tmp_path / "cache.sqlite3")])
        assert srv.count() == 8  # 4 assistants → 6 independent matches, + the failing one asked twice
        port = srv.port  # the re-run asks the same endpoint (the cache key holds it, issue 28)
    m = doc["metrics"]["bestof"]
    block, failed, solo = read_sessions(str(tmp_path / "out"), "bestof")
    assert (solo["status"], solo["n_interactions"]) == ("walkover", 3)
    assert (failed["session_id"], failed["status"], failed["n_failed"], failed["bestof_winner_id"]) == ("zz-fail", "failed", 1, None)
    dead = list(iter_dead_letters(str(tmp_path / "out")))
    assert len(dead) == 1 and dead[0]["stage"] == "bestof" and "invalid answer" in dead[0]["reason"]
    assert block["contestants"] == ["assistant_delta", "assistant_alpha", "assistant_beta", "assistant_gamma"]
    assert block["status"] == "decided" and block["bestof_winner_id"] == expected[0]
    assert block["points"] == {a: float(3 - expected.index(a)) for a in expected}
    summary = doc["summary"]["metrics"]["bestof"]
    # scored: the interactions of the blocks the ranking rests on (MetricSpec.scored, the slices'
    # n_blocks): the example's 12; zz-fail's 2 (its match failed) and the walkover's 3 (trial35 T7:
    # "60 scored, 0 not scored" when 57 of 60 were in walkovers) are read, not scored; only the
    # walkover's are left out after a verdict (zz-fail was never judged: its failed match is a dead
    # letter, trial40 J1)
    assert (summary["scored"], summary["interactions_scored"], summary["interactions_not_scored"]) == (12, 12, 5)
    assert summary["interactions_left_out"] == 3
    from fair_forge_beam.reports.summary import metric_summary_lines

    assert metric_summary_lines("bestof", summary, 17)[0] == (
        "bestof: interactions: 12 scored, 5 not scored (of 17 read; 3 of them in blocks never compared "
        "(walkovers))")
    assert summary["dead_letters"] == 1
    # the report's session count says which of them the table rests on
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "3 sessions (1 scored: the estimates rest on these)" in page
    assert "5 not scored (3 of them in blocks never compared (walkovers))" in page
    # the slice table's n counts the walkovers' interactions too (17 beside '12 scored'): its header
    # says so (trial35b B9)
    assert ">n read</th><th>sessions</th>" in page and "<th>slice</th><th>n</th>" not in page
    overall = m["slices"][0]
    assert overall["slice"] == "overall" and overall["leader"] == expected[0] and overall["n_contests"] == 6
    assert overall["n_failed"] == 1 and overall["n_blocks"] == 1  # zz-fail's only match failed: not scored (H3)
    # the main job's --slices names assistant_id too: BestOf has no per-assistant ranking, and
    # each block is counted once in its language slice (before the engine, twice)
    assert [s["slice"] for s in m["slices"]] == ["overall", "language=english", "language=spanish"]
    # a slice whose only block is a walkover has no leader and no win rate (trial35 T7: the walkover-only
    # assistant led it with the prior's 0.5000 [0.0250, 0.9750])
    spanish = m["slices"][2]
    assert (spanish["n_blocks"], spanish["leader"], spanish["leader_win_rate"]["mean"]) == (0, None, None)
    assert [(r["assistant_id"], r["blocks_won"]) for r in spanish["ranking"]] == [("solo", 1)]
    assert {k: m["slices"][1][k] for k in ("n_blocks", "n_contests", "n_failed")} == {
        k: overall[k] for k in ("n_blocks", "n_contests", "n_failed")}
    assert (m["slices"][1]["n_interactions"], overall["n_interactions"]) == (14, 17)  # the Spanish walkover's 3
    assert [r["assistant_id"] for r in overall["ranking"]] == expected + ["solo", "u1", "u2"]  # no matches: last
    # the example is one block with matches: the one-session rule (a block is BestOf's session) gives
    # strengths without intervals and no P(best); the failed block no longer counts as a second one
    assert SINGLE_SESSION_NOTE in overall["estimator"]
    assert all(r["strength"]["ci_low"] is None and r["prob_best"] is None for r in overall["ranking"])
    # two blocks with matches (the example and a copy of it under another session id; its prompts are
    # the example's, answered from the cache)
    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps(sessions + [{**s, "session_id": f"{s['session_id']}-copy"} for s in sessions] + extra),
                     encoding="utf-8")
    with ScriptedOpenAIServer(length_judge, faults=[Fault("invalid", match="[boom]")], port=port) as srv:
        two = audit.run(["--quiet", f"--runner={FNAPI}", "--input", str(twice), "--output", str(tmp_path / "twice"),
                         "--metrics", "bestof", "--bestof-mode", "all_pairs", "--bestof-order", "assistant_delta",
                         "--mode", "bayesian", "--mc-samples", "1000", "--judge-base-url", srv.base_url,
                         "--judge-model", "judge-model", "--judge-cache", str(tmp_path / "cache.sqlite3")])
    both = two["metrics"]["bestof"]["slices"][0]
    assert (both["slice"], both["n_blocks"], both["n_contests"]) == ("overall", 2, 12)
    ranking = [r for r in both["ranking"] if r["assistant_id"] not in ("u1", "u2")]
    assert [r["assistant_id"] for r in both["ranking"]] == expected + ["u1", "u2"]
    # Bayesian: strengths exist although the MLE does not (a transitive order); ordered, with
    # credible intervals around them and P(best) summing to 1
    assert both["mle_exists"] is False and "Laplace" in both["estimator"]
    means = [r["strength"]["mean"] for r in ranking]
    assert means == sorted(means, reverse=True) and abs(sum(means)) < 1e-9
    assert all(r["strength"]["ci_low"] < r["strength"]["mean"] < r["strength"]["ci_high"] for r in ranking)
    assert sum(r["prob_best"] for r in ranking) == pytest.approx(1.0)
    assert ranking[0]["prob_best"] == max(r["prob_best"] for r in ranking)
    assert ranking[0]["rating"] == pytest.approx(1000 + 400 * means[0] / math.log(10))
    # same input shuffled, on two SDK worker processes: the same matches, winners and numbers
    # (the judge cache is shared, so the re-run also shows that the prompts are identical)
    shuffled = tmp_path / "shuffled.json"
    mixed = list(sessions + extra + walkover)
    random.Random(5).shuffle(mixed)
    shuffled.write_text(json.dumps(mixed), encoding="utf-8")
    with ScriptedOpenAIServer(length_judge, faults=[Fault("invalid", match="[boom]")], port=port) as srv:
        doc2 = audit.run(["--quiet", f"--runner={FNAPI}", "--direct_num_workers=2", "--direct_running_mode=multi_processing",
                          "--input", str(shuffled), "--output", str(tmp_path / "out2"),
                          "--metrics", "bestof", "--bestof-mode", "all_pairs", "--bestof-order", "assistant_delta",
                          "--mode", "bayesian", "--mc-samples", "1000", "--judge-base-url", srv.base_url,
                          "--judge-model", "judge-model", "--judge-cache", str(tmp_path / "cache.sqlite3")])
        assert srv.count() == 2  # only the never-cached failure is asked again
    assert doc2["metrics"] == doc["metrics"]
    # BestOf's slices have no session count: the report leaves the cell empty (it printed "None")
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "bestof" in html and '<td class="num">None</td>' not in html
    rows = pq.read_table(tmp_path / "out" / "results.parquet").to_pylist()
    assert len(rows) == 6 and {r["metric"] for r in rows} == {"bestof"}
    assert sorted(r["bestof_round"] for r in rows) == [1, 2, 3, 4, 5, 6]
    assert all(r["bestof_winner_id"] in (r["bestof_left_id"], r["bestof_right_id"]) for r in rows)


def test_hh_rlhf_pairs_through_run_with_a_retriever(tmp_path, shared_dir):
    path = shared_dir / "data" / "hh_rlhf" / "harmless-base_test.jsonl.gz"

    def last_answer_judge(req):
        """Prefers the shorter final answer."""
        a, b = (s.rsplit("ANSWER:", 1)[1].strip() for s in sides(req))
        winner = "A" if len(a) < len(b) else "B" if len(b) < len(a) else "tie"
        return {"winner": winner, "verdict": "shorter", "confidence": 0.6, "reasoning": {}}

    with ScriptedOpenAIServer(last_answer_judge) as srv:
        res = BestOf.run(HHRLHFPairs, path=str(path), limit=25, judge=handler_for(srv, tmp_path), mode="all_pairs",
                         statistical_mode=FrequentistMode(), slices=("overall",))
        assert srv.count() == 25
    assert len(res) == 25 and all(isinstance(b, BestOfMetric) for b in res)
    assert all(b.contestants == ["chosen", "rejected"] and len(b.bestof_contests) == 1 for b in res)
    assert [b.session_id for b in res] == [f"hh-{i:05d}" for i in range(25)]
    (overall,) = res.slices
    rank = {r.assistant_id: r for r in overall.ranking}
    wc, wr, t = rank["chosen"].wins, rank["rejected"].wins, rank["chosen"].ties
    assert wc + wr + t == 25 and wc > 0 and wr > 0 and rank["rejected"].ties == t
    # two players, ties as half wins: the MLE is β_chosen = log((w_c + t/2) / (w_r + t/2)) / 2
    assert overall.mle_exists
    assert rank["chosen"].strength.mean == pytest.approx(math.log((wc + t / 2) / (wr + t / 2)) / 2, abs=1e-7)
    assert rank["chosen"].strength.ci_low < rank["chosen"].strength.mean < rank["chosen"].strength.ci_high
    assert len(res.interactions) == 25 and res.dead_letter == [] and res.quality == []


def test_configuration_errors_fail_before_the_pipeline(tmp_path, capsys):
    from pipelines import audit

    with pytest.raises(SystemExit) as exc:  # the main job without a judge endpoint: usage error
        audit.run(["--quiet", "--metrics", "bestof", "--output", str(tmp_path / "out")])
    assert exc.value.code == 2 and "--judge-base-url" in capsys.readouterr().err
    with pytest.raises(ValueError, match="judge"):
        BestOf()
    judge = {"model": "m", "base_url": "http://127.0.0.1:9/v1"}
    with pytest.raises(ValueError, match="mode"):
        BestOf(judge=judge, mode="bracket")
    with pytest.raises(ValueError, match="block"):
        BestOf(judge=judge, block="turn")
    with pytest.raises(ValueError, match="slices"):
        BestOf(judge=judge, slices=("assistant_id",))
    with pytest.raises(ValueError, match="prior_sd"):
        BestOf(judge=judge, prior_sd=-1)
    assert BestOf(judge=judge, contestant_order="b, a").contestant_order == ("b", "a")
    assert isinstance(BestOf(judge=judge, statistical_mode=BayesianMode()).mode, BayesianMode)


def test_block_reducer_keeps_one_part_and_warns_about_the_others():
    """The engine's session of BestOf is a block, scored once; a window that fires several
    panes can bring a block in parts: the first (in block order) is ranked, each extra part is
    a data-quality warning, never a silent loss."""
    from fair_forge_beam.metrics.best_of import BlockScore, _BlockReducer, _block_order

    def part(contestants, n):
        rec = {"block_id": '["S"]', "contestants": contestants, "n_interactions": n}
        return BlockScore('["S"]', "", "english", rec, ({"round": 1},), (tuple(contestants), None, (), n, 0))

    a, b = part(["a", "b"], 2), part(["c", "d"], 2)
    assert _BlockReducer().reduce(('["S"]', "", "english"), [a]) == (a.record, a.unit, [], [{"round": 1}])
    rec, unit, warnings, rows = _BlockReducer().reduce(('["S"]', "", "english"), sorted([b, a], key=_block_order))
    assert rec is a.record and unit == a.unit and rows == [{"round": 1}]
    assert [w.kind for w in warnings] == ["bestof_block_in_parts"] and "2 parts" in warnings[0].message


def test_leader_win_rate_is_a_rate_estimate_over_its_matches_and_blocks_are_the_sessions(tmp_path):
    """Issue 28, hostile trial 8: the leader won 6 of 6 matches in 3 blocks of a Bayesian run; its
    leader_win_rate was the raw 1.0 without an interval (a gate on ci_low: "undefined"), and the
    console's sessions column was blank although n_blocks = 3. Now the rate primitive over its
    matches (Beta(1 + 6, 1 + 0): 0.875 and its equal-tailed interval), blocks in the sessions
    column; ties count as half wins; frequentist: k/n, no interval."""
    from scipy import stats

    from fair_forge_beam.statistical.slices import slice_win_rate as leader_rate
    from fair_forge_beam.reports.gates import evaluate_gates, parse_gate
    from fair_forge_beam.reports.summary import summary_table

    data = [ix(s, p, 0, f"{p} [q={q}]") for s in ("S1", "S2", "S3") for p, q in (("a", 3), ("b", 1), ("c", 2))]
    with ScriptedOpenAIServer(marker_judge) as srv:
        res = run_metric(BestOf(judge=handler_for(srv, tmp_path), statistical_mode=BayesianMode(), slices=("overall",)),
                         data, tmp_path / "r")
    (rec,) = res["slices"]
    lw = rec["leader_win_rate"]
    assert rec["leader"] == "a" and rec["n_blocks"] == 3 and lw["n"] == 6
    lo, hi = stats.beta(7, 1).ppf([0.025, 0.975])
    assert lw["mean"] == pytest.approx(7 / 8) and lw["ci_low"] == pytest.approx(lo) and lw["ci_high"] == pytest.approx(hi)
    doc = {"config": {"mode": "bayesian", "ci_level": 0.95, "seed": 42, "mc_samples": 5000},
           "summary": {"interactions_read": 9, "rejected_at_read": 0, "data_quality_warnings": 0,
                       "metrics": {"bestof": {"scored": 9, "not_scored": 0}}},
           "metrics": {"bestof": {"headline_columns": ["leader_win_rate"], "slices": [rec]}}}
    row = [ln for ln in summary_table(doc, "out").splitlines() if ln.strip().startswith("overall")][0]
    assert row.split()[1:3] == ["9", "3"], row
    (check,) = evaluate_gates(doc, [parse_gate("bestof leader_win_rate ci_low >= 0.5")])
    assert check.status == "pass", check
    # ties as half wins; one block (the one-session rule) and frequentist: the observed share
    est = leader_rate(3, 1, 2, 4, BayesianMode())
    a, b = 1 + 3 + 1, 1 + 1 + 1
    assert est.mean == pytest.approx(a / (a + b)) and est.ci_low == pytest.approx(stats.beta(a, b).ppf(0.025))
    assert leader_rate(3, 1, 2, 1, BayesianMode()).model_dump() == {"mean": 4 / 6, "ci_low": None, "ci_high": None, "n": 6}
    assert leader_rate(3, 1, 0, 4, FrequentistMode()).model_dump() == {"mean": 0.75, "ci_low": None, "ci_high": None, "n": 4}
