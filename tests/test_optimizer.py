"""Prompt optimizer (issue 17 item 1): GEPA and MIPROv2 against the local scripted server.

Every candidate evaluation runs as a Beam pipeline through ``RunJudge``; the evaluator's score is
strict structured output; failed evaluator calls are dead letters, counted, and not scores of 0.
Data: the original library's MIT example datasets (dataset_gepa_es.json, dataset_mipro_es.json).
"""
from __future__ import annotations

import json
import os
import re

import pytest

from fair_forge_beam.components.judge.handler import OpenAIJudgeHandler
from fair_forge_beam.optimizer import GEPAOptimizer, build_prompt, keyed_rng, load_examples, sample_demo_sets
from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

from helpers import SHARED  # noqa: E402 - the one definition of the shared data folder

GEPA_DATA = os.path.join(SHARED, "data", "fair_forge_examples", "dataset_gepa_es.json")
MIPRO_DATA = os.path.join(SHARED, "data", "fair_forge_examples", "dataset_mipro_es.json")
SCORES = {"SEED": 0.4, "BETTER": 0.9, "WORSE": 0.2, "SAME": 0.4}


def _load(path):
    if not os.path.exists(path):  # a clone without ../shared: skipped, as README says
        pytest.skip(f"shared data file not found: {path}")
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def scripted(bad_query=None, proposals=("BETTER prompt", "WORSE prompt", "SAME prompt", "EXTRA prompt")):
    """Executor answers ``ANS[<first word of the system prompt>]``; the evaluator scores by tag;
    proposal calls return ``proposals``; the evaluator answers junk for ``bad_query``."""

    def answer(req):
        system = req.messages[0]["content"]
        if system.startswith("You improve system prompts") or system.startswith("You write system-prompt instructions"):
            return {"prompts": list(proposals)}
        if system.startswith("You grade a response"):
            if bad_query and bad_query in req.prompt:
                return '{"score": "very high", "insight": "x"}'
            tag = re.search(r"ANS\[(\w+)\]", req.prompt).group(1)
            return {"score": SCORES.get(tag, 0.5), "insight": "scripted"}
        return f"ANS[{system.split()[0]}]"

    return answer


def handler(srv, tmp_path, **kw):
    kw.setdefault("cache_path", str(tmp_path / "cache.sqlite3"))
    return OpenAIJudgeHandler("opt-model", srv.base_url, api_key_env="FFB_TEST_UNSET_KEY", num_retries=0, **kw)


@pytest.mark.slow
def test_gepa_adopts_the_strictly_better_candidate_then_stops_when_nothing_fails(tmp_path):
    with ScriptedOpenAIServer(scripted()) as srv:
        res = GEPAOptimizer.run(_load(GEPA_DATA), handler(srv, tmp_path), "SEED prompt", objective="be right",
                                iterations=5, candidates_per_iteration=3, workdir=str(tmp_path / "w"))
        calls = srv.count()
    assert res.optimized_prompt == "BETTER prompt"
    assert res.initial_score == pytest.approx(0.4, abs=1e-15) and res.final_score == pytest.approx(0.9, abs=1e-15)
    assert res.iterations_run == 1 and res.n_examples == 8 and res.stop_reason == "no_failing_examples"
    assert len(res.history) == 1
    assert [c for c in res.history[0].candidates] == [("BETTER prompt", 0.9), ("WORSE prompt", 0.2), ("SAME prompt", 0.4)]
    assert len(res.history[0].failing_examples) == 8 and res.n_dead == 0
    # seed 8×2 + 1 proposal + 3 candidates × 8 × 2 (the 4th proposal is truncated away)
    assert calls == 16 + 1 + 48


def test_identical_examples_and_candidates_never_share_a_request(tmp_path):
    """Two examples with the same context and query are two calls each (executor, evaluator) with
    their own cache entries; two identical candidate prompts are scored once. With a shared cache
    key, the second call was asked or read from the cache depending on which ran first."""
    from fair_forge_beam.optimizer.evaluation import evaluate_prompts

    session = {"session_id": "s", "assistant_id": "a", "context": "ctx", "conversation": [
        {"qa_id": f"q{i}", "query": "Same question?", "assistant": "", "ground_truth_assistant": "yes"} for i in range(3)]}
    examples, dead = load_examples([session])
    assert not dead and [e.occurrence for e in examples] == [0, 1, 2]
    with ScriptedOpenAIServer(scripted()) as srv:
        h = handler(srv, tmp_path)
        scores, dead = evaluate_prompts(["SEED prompt", "BETTER prompt", "SEED prompt"], examples, h, h, "be right",
                                        workdir=str(tmp_path / "w"))
        calls = srv.count()
        again, _ = evaluate_prompts(["SEED prompt"], examples, h, h, "be right", workdir=str(tmp_path / "w2"))
        assert srv.count() == calls  # all from the cache
    assert calls == 2 * 3 * 2  # 2 distinct prompts × 3 examples × (execute + evaluate)
    assert [(c.prompt, c.n_scored) for c in scores] == [("SEED prompt", 3), ("BETTER prompt", 3), ("SEED prompt", 3)]
    assert scores[0] == scores[2] and scores[0].score == pytest.approx(0.4, abs=1e-15) and scores[1].score == pytest.approx(0.9, abs=1e-15)
    assert again[0].score == scores[0].score and not dead


@pytest.mark.slow
def test_gepa_stops_when_no_candidate_is_strictly_better(tmp_path):
    with ScriptedOpenAIServer(scripted(proposals=("SAME prompt", "WORSE prompt"))) as srv:
        res = GEPAOptimizer.run(_load(GEPA_DATA), handler(srv, tmp_path), "SEED prompt", workdir=str(tmp_path / "w"))
    assert res.optimized_prompt == "SEED prompt" and res.stop_reason == "no_improvement"
    assert res.iterations_run == 1 and res.final_score == pytest.approx(0.4, abs=1e-15)


@pytest.mark.slow
def test_gepa_failing_evaluator_is_dead_lettered_counted_and_the_run_continues(tmp_path):
    data = _load(GEPA_DATA)
    bad = data[0]["conversation"][1]["query"]
    with ScriptedOpenAIServer(scripted(bad_query=bad)) as srv:
        res = GEPAOptimizer.run(data, handler(srv, tmp_path), "SEED prompt", workdir=str(tmp_path / "w"))
    # one example per evaluated prompt is lost: seed + 3 candidates = 4 dead letters
    assert res.n_dead == 4 and all(d["stage"] == "optimizer.evaluate" for d in res.dead_letters)
    assert all(d["element_id"] == "support-billing/billing-002" for d in res.dead_letters)
    # the request's key as a reader can read it (trial48 B7: "judge:0\x1f0", a control character)
    assert sorted(d["source"] for d in res.dead_letters) == [f"judge:candidate {c}, example 1" for c in (0, 0, 1, 2)]
    assert res.optimized_prompt == "BETTER prompt" and res.final_score == pytest.approx(0.9, abs=1e-15)
    assert len(res.history[0].failing_examples) == 7  # the dead example is neither scored 0 nor failing


def test_gepa_stops_when_the_evaluator_always_fails(tmp_path):
    def broken(req):
        if req.messages[0]["content"].startswith("You grade a response"):
            return "Score: 1"  # prose, no JSON: the original would read it as 0.0
        return "ANS[SEED]"

    with ScriptedOpenAIServer(broken) as srv:
        res = GEPAOptimizer.run(_load(GEPA_DATA), handler(srv, tmp_path), "SEED prompt", workdir=str(tmp_path / "w"))
    assert res.stop_reason == "evaluation_failed" and res.iterations_run == 0 and res.n_dead == 8
    assert res.optimized_prompt == "SEED prompt"


def test_bad_session_is_a_dead_letter_not_a_crash():
    ex, dead = load_examples([{"session_id": "s"}, _load(GEPA_DATA)[0]])
    assert len(ex) == 2 and len(dead) == 1 and dead[0]["stage"] == "optimizer.read"


def test_demo_sets_are_keyed_reproducible_and_sized():
    demos = [(f"q{i}", f"a{i}") for i in range(8)]
    a = sample_demo_sets(demos, 5, 3, seed=42)
    assert a == sample_demo_sets(demos, 5, 3, seed=42) and len(a) == 5 and all(len(s) == 3 for s in a)
    assert a != sample_demo_sets(demos, 5, 3, seed=43)
    assert sample_demo_sets(demos[:2], 2, 3, seed=1) == [demos[:2], demos[:2]]
    assert a[2] == sample_demo_sets(demos, 3, 3, seed=42)[2]  # set j does not depend on how many are drawn
    assert keyed_rng(1, "x").integers(1 << 30) == keyed_rng(1, "x").integers(1 << 30)


def test_build_prompt():
    assert build_prompt("Do it.", []) == "Do it."
    assert build_prompt("Do it.", [("q", "a")]) == "Do it.\n\nExamples:\n\nUser: q\nAssistant: a"


@pytest.mark.slow
def test_miprov2_tpe_search_is_seeded_and_reproducible(tmp_path):
    pytest.importorskip("optuna", reason="MIPROv2 needs optuna (the [optimizer] extra)")
    from fair_forge_beam.optimizer import MIPROv2Optimizer

    data = _load(MIPRO_DATA)
    bad = data[1]["conversation"][0]["query"]
    props = ("BETTER inst", "WORSE inst", "SAME inst")
    with ScriptedOpenAIServer(scripted(bad_query=bad, proposals=props)) as srv:
        kw = dict(objective="be right", num_candidates=3, num_trials=6, minibatch_size=5, num_demo_sets=2, random_seed=7)
        r1 = MIPROv2Optimizer.run(data, handler(srv, tmp_path), "SEED inst", workdir=str(tmp_path / "w1"), **kw)
        r2 = MIPROv2Optimizer.run(data, handler(srv, tmp_path), "SEED inst", workdir=str(tmp_path / "w2"), **kw)
    assert r1.trials == r2.trials and r1.optimized_prompt == r2.optimized_prompt
    assert r1.trials_run == 6 and r1.n_examples == 8 and len(r1.demos) == 3
    assert r1.optimized_instruction == "BETTER inst" and r1.final_score == pytest.approx(0.9, abs=1e-15)
    assert r1.optimized_prompt.startswith("BETTER inst\n\nExamples:\n\nUser: ")
    assert r1.initial_score == pytest.approx(0.4, abs=1e-15)
    assert r1.n_dead >= 1 and all(d["stage"] == "optimizer.evaluate" for d in r1.dead_letters)


def test_declared_defaults_match_the_constructors():
    import inspect

    from fair_forge_beam.options import command_options

    for o in command_options("optimize").values():
        for f in o.feeds:
            owner, _, arg = f.rpartition(".")
            mod, _, cls = owner.partition(":")
            import importlib

            sig = inspect.signature(getattr(importlib.import_module(mod), cls).__init__)
            assert sig.parameters[arg].default == o.default, f


@pytest.mark.slow
def test_cli_writes_result_and_dead_letters(tmp_path, monkeypatch):
    monkeypatch.setenv("FFB_TEST_UNSET_KEY", "sk-test-not-a-real-key")  # a given --api-key-env must be set (issue 28)
    from pipelines import optimize

    data = _load(GEPA_DATA)
    bad = data[0]["conversation"][1]["query"]
    # the command's main in this process (a real `python -m pipelines.optimize` is run by
    # test_cli_report_escapes_prompts_and_counts_equal_result_json; a second interpreter here only imported again)
    with ScriptedOpenAIServer(scripted(bad_query=bad)) as srv:
        code = optimize.main(["--input", GEPA_DATA, "--output", str(tmp_path / "out"),
                              "--model", "opt-model", "--base-url", srv.base_url, "--api-key-env", "FFB_TEST_UNSET_KEY",
                              "--judge-cache", str(tmp_path / "c.sqlite3"), "--seed-prompt", "SEED prompt", "--iterations", "2"])
    assert code == 0
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    assert res["optimized_prompt"] == "BETTER prompt" and res["n_dead"] == 4 and res["method"] == "gepa"
    assert len((tmp_path / "out" / "dead_letter.jsonl").read_text().splitlines()) == 4


def test_evaluator_score_is_the_schema_object_not_the_first_score_number():
    from fair_forge_beam.components.judge.parsing import parse_structured
    from fair_forge_beam.optimizer import EvaluatorScore

    quoted = 'The answer says "score": 1.0 itself. Verdict: {"score": 0.2, "insight": "wrong plan price"}'
    assert parse_structured(quoted, EvaluatorScore)[0].score == 0.2  # the original reads 1.0 here
    parsed, err = parse_structured('{"score": 1.5, "insight": "x"}', EvaluatorScore)
    assert parsed is None and "should be 1.0 or less, not 1.5" in err  # the original clamps to 1.0
    parsed, err = parse_structured('{"score": 0.5, "insight": "x", "bonus": 1}', EvaluatorScore)
    assert parsed is None and err


def _report_field(html, id_):
    m = re.search(rf'id="{id_}">(.*?)</', html, re.S)
    assert m, id_
    return m.group(1).strip()


@pytest.mark.slow
def test_result_records_every_candidate_evaluation_with_scored_and_dead_counts(tmp_path):
    data = _load(GEPA_DATA)
    bad = data[0]["conversation"][1]["query"]
    with ScriptedOpenAIServer(scripted(bad_query=bad)) as srv:
        res = GEPAOptimizer.run(data, handler(srv, tmp_path), "SEED prompt", iterations=2, candidates_per_iteration=3,
                                workdir=str(tmp_path / "w"))
    ev = res.to_dict()["evaluations"]
    assert [(e["round"], e["stage"], e["prompt"]) for e in ev] == [
        (1, "seed", "SEED prompt"), (2, "iteration 1", "BETTER prompt"), (2, "iteration 1", "WORSE prompt"),
        (2, "iteration 1", "SAME prompt")]
    assert [(e["n_scored"], e["n_dead"]) for e in ev] == [(7, 1)] * 4  # the bad query's evaluator reply is junk
    assert [e["score"] for e in ev] == [pytest.approx(s, abs=1e-15) for s in (0.4, 0.9, 0.2, 0.4)]
    assert sum(e["n_dead"] for e in ev) == res.n_dead == 4


@pytest.mark.slow
def test_cli_report_escapes_prompts_and_counts_equal_result_json(tmp_path, monkeypatch):
    monkeypatch.setenv("FFB_TEST_UNSET_KEY", "sk-test-not-a-real-key")  # a given --api-key-env must be set (issue 28)
    import html as html_lib
    import subprocess
    import sys

    from pipelines import optimize

    data = _load(GEPA_DATA)
    bad = data[0]["conversation"][1]["query"]
    hostile = "BETTER <script>alert(1)</script> & <b>bold</b> prompt"
    seed = 'SEED <img src=x onerror="alert(2)"> prompt'
    with ScriptedOpenAIServer(scripted(bad_query=bad, proposals=(hostile, "WORSE prompt", "SAME prompt"))) as srv:
        env = dict(os.environ)  # the key variable set (monkeypatch above): a given --api-key-env must name a set one
        args = ["--input", GEPA_DATA, "--model", "opt-model",
                "--base-url", srv.base_url, "--api-key-env", "FFB_TEST_UNSET_KEY", "--judge-cache", str(tmp_path / "c.sqlite3"),
                "--seed-prompt", seed, "--iterations", "2"]
        proc = subprocess.run([sys.executable, "-m", "pipelines.optimize", *args, "--output", str(tmp_path / "out")],
                              capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        # --no-report in this process: the command's main, without a second interpreter importing everything again
        assert optimize.main([*args, "--output", str(tmp_path / "quiet"), "--no-report"]) == 0
    assert (tmp_path / "quiet" / "result.json").exists() and not (tmp_path / "quiet" / "report.html").exists()
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert res["optimized_prompt"] == hostile
    assert "<script" not in page and "<img" not in page and "<b>bold" not in page
    assert html_lib.escape(hostile, quote=False) in _report_field(page, "best-prompt")
    assert html_lib.unescape(_report_field(page, "best-prompt")) == hostile
    assert html_lib.unescape(_report_field(page, "seed-prompt")) == seed
    assert int(_report_field(page, "n-dead")) == res["n_dead"] == 4
    assert int(_report_field(page, "n-examples")) == res["n_examples"] == 8
    assert int(_report_field(page, "iterations-run")) == res["iterations_run"]
    assert _report_field(page, "stop-reason") == res["stop_reason"]
    scored = sum(e["n_scored"] for e in res["evaluations"])
    dead = sum(e["n_dead"] for e in res["evaluations"])
    assert _report_field(page, "scored-vs-dead") == f"{scored} / {dead}" == "28 / 4"
    table = re.search(r'<table id="evaluations">(.*?)</table>', page, re.S).group(1)
    rows = re.findall(r'<td class="num">([^<]*)</td><td class="num">(\d+)</td><td class="num">(\d+)</td></tr>', table)
    assert [(float(s), int(k), int(d)) for s, k, d in rows] == [
        (round(e["score"], 4), e["n_scored"], e["n_dead"]) for e in res["evaluations"]]
    assert '<svg class="plot"' in page


def test_miprov2_report_renders_trials_and_failed_trials():
    from fair_forge_beam.reports.tool_reports import render_optimizer_report

    result = {"method": "miprov2", "optimized_prompt": "</pre><script>x()</script>", "optimized_instruction": "I",
              "initial_score": 0.4, "final_score": 0.8, "trials_run": 2, "n_examples": 3, "stop_reason": "trials_reached",
              "n_dead": 3, "demos": [], "trials": [[0, 0, 0, 0.8], [1, 0, 1, None]],
              "evaluations": [{"round": 1, "stage": "seed", "prompt": "S", "score": 0.4, "n_scored": 3, "n_dead": 0},
                              {"round": 2, "stage": "trial 0", "prompt": "</pre><script>x()</script>", "score": 0.8,
                               "n_scored": 3, "n_dead": 0},
                              {"round": 3, "stage": "trial 1", "prompt": "T", "score": None, "n_scored": 0, "n_dead": 3}]}
    dead = [{"stage": "optimizer.evaluate", "reason": "bad <i>json</i>", "element_id": "e1", "raw": "<script>"}] * 3
    page = render_optimizer_report(result, dead, {"num_trials": 2}, seed_prompt="S")
    assert "<script" not in page and "<i>json" not in page and "&lt;/pre&gt;&lt;script&gt;x()&lt;/script&gt;" in page
    assert _report_field(page, "trials-run") == "2" and _report_field(page, "scored-vs-dead") == "6 / 3"
    assert ">n/a</td>" in page and "optimizer.evaluate" in page


def _evaluator_always_fails(req):
    system = req.messages[0]["content"]
    if system.startswith("You improve system prompts") or system.startswith("You write system-prompt instructions"):
        return {"prompts": ["BETTER prompt"]}
    if system.startswith("You grade a response"):
        return "Score: 1"  # no verdict: every evaluation is a dead letter
    return "ANS[SEED]"


def test_nothing_scored_is_no_score_never_0(tmp_path):
    """Issue 28 (trial 28h, H4): initial_score and final_score were 0.0 when no example was scored."""
    with ScriptedOpenAIServer(_evaluator_always_fails) as srv:
        res = GEPAOptimizer.run(_load(GEPA_DATA), handler(srv, tmp_path), "SEED prompt", workdir=str(tmp_path / "w"))
    assert res.stop_reason == "evaluation_failed" and res.evaluations[0]["n_scored"] == 0
    assert res.initial_score is None and res.final_score is None, (res.initial_score, res.final_score)
    assert res.to_dict()["initial_score"] is None


@pytest.mark.slow
def test_miprov2_nothing_scored_is_no_score_never_0(tmp_path):
    pytest.importorskip("optuna", reason="MIPROv2 needs optuna (the [optimizer] extra)")
    from fair_forge_beam.optimizer import MIPROv2Optimizer

    with ScriptedOpenAIServer(_evaluator_always_fails) as srv:
        res = MIPROv2Optimizer.run(_load(MIPRO_DATA), handler(srv, tmp_path), "SEED inst", workdir=str(tmp_path / "w"),
                                   num_candidates=1, num_trials=2, minibatch_size=3, num_demo_sets=1)
    assert res.stop_reason == "evaluation_failed" and res.optimized_prompt == "SEED inst"
    assert res.initial_score is None and res.final_score is None, (res.initial_score, res.final_score)


def test_cli_run_that_scored_nothing_is_an_empty_run_exit_4(tmp_path, monkeypatch, capsys):
    """Nothing is published over the last good run (trial48 B1); the outputs are in the stage the line names
    (the dead letters can be read), the scores are null, the line says "no score", and the exit code is 4 as
    generate's and run_assistant's empty runs."""
    from pipelines import optimize

    out = tmp_path / "out"
    out.mkdir()
    (out / "result.json").write_text('{"final_score": 0.75}\n')  # the last good run
    with ScriptedOpenAIServer(_evaluator_always_fails) as srv:
        code = optimize.main(["--method", "gepa", "--input", _load(GEPA_DATA) and GEPA_DATA, "--model", "m",
                              "--base-url", srv.base_url, "--judge-cache", str(tmp_path / "c.sqlite3"),
                              "--seed-prompt", "SEED prompt", "--iterations", "2", "--output", str(out)])
    said = capsys.readouterr()
    assert code == 4, said.err
    (stage,) = [p for p in tmp_path.iterdir() if p.name.startswith("out.staging-")]
    assert f"{out} is left as it was; this run's outputs (its dead letters) are kept unpublished in {stage} until the " \
           f"next run into {out} (exit code 4)" in said.err
    assert sorted(p.name for p in out.iterdir()) == ["result.json"] and (out / "result.json").read_text() == '{"final_score": 0.75}\n'
    out = stage
    res = json.loads((out / "result.json").read_text())
    assert res["initial_score"] is None and res["final_score"] is None and res["n_dead"] == 8
    assert "gepa: no score (no example was scored); stop: evaluation_failed; dead letters: 8" in said.out + said.err
    assert "optimize: empty run: no example was scored (8 dead letters); " in said.err
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "no score (no example was scored)" in page and len((out / "dead_letter.jsonl").read_text().splitlines()) == 8


def test_the_optimizer_leaves_no_temporary_folder_on_success_or_failure(tmp_path, monkeypatch):
    """trial38b B10: ``GEPAOptimizer(...)`` without a workdir made an ``ffb_optimizer_*`` folder at construction that
    nothing removed, and evaluate_prompts / run_structured removed theirs on success only. Every temporary folder
    is now made per pipeline and removed when it ends, whatever the end."""
    import tempfile

    import fair_forge_beam.beam_pipeline as beam_pipeline
    from fair_forge_beam.optimizer.evaluation import evaluate_prompts, load_examples as examples_of, run_structured

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    data = _load(GEPA_DATA)
    with ScriptedOpenAIServer(scripted(proposals=("SAME prompt", "WORSE prompt"))) as srv:
        made = GEPAOptimizer(data, handler(srv, tmp_path), "SEED prompt")
        assert made.workdir is None and list(scratch.iterdir()) == [], "a folder made at construction"

        def broken(*a, **k):
            raise RuntimeError("the pipeline failed")

        monkeypatch.setattr(beam_pipeline, "run_pipeline", broken)
        examples, _ = examples_of(data)
        with pytest.raises(RuntimeError):
            evaluate_prompts(["SEED prompt"], examples, made.executor, made.evaluator, "")
        with pytest.raises(RuntimeError):
            run_structured(made.model, (("user", "x"),), dict, "k")
    assert list(scratch.iterdir()) == [], "a folder left after a failed pipeline"
