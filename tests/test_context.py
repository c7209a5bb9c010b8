"""Context (spec §6.3) against the scripted OpenAI-compatible server on 127.0.0.1 (no network):
the judge's score is computed from a marker in the answer, so every number is known."""
from __future__ import annotations

import random
import re
from functools import partial

import pytest

import helpers
from helpers import handler_for, run_metric
from fair_forge_beam.components.judge.parsing import unfence
from fair_forge_beam.components.judge.prompts_quality import NO_REFERENCE, context_messages
from fair_forge_beam.io.retriever import Retriever
from fair_forge_beam.metrics.context import Context
from fair_forge_beam.schemas.common import Batch, Dataset
from fair_forge_beam.schemas.context import ContextJudgeOutput, ContextMetric, ContextSliceMetric
from fair_forge_beam.statistical.bayesian import BayesianMode
from fair_forge_beam.testing.openai_server import Fault, ScriptedOpenAIServer

BRACES = 'Return {"a": {b}} and {{ not_a_slot }} {% raw %} {0}'


def section(text: str, name: str) -> str:
    """The text under ``NAME:`` up to the next blank-line-separated header (or the end)."""
    m = re.search(rf"^{name}:\n(.*?)(?:\n\n[A-Z][A-Z ()]+:\n|\Z)", text, re.S | re.M)
    return unfence(m.group(1).rstrip("\n")) if m else ""


def context_judge(req):
    """Score = the ``[s=x]`` marker of the assistant answer; ``[bad]`` → out-of-range score
    (fails validation); the insight echoes the reference slot and the question."""
    case = [m["content"] for m in req.messages if m["role"] == "user"][-1]
    answer = section(case, "ASSISTANT ANSWER")
    if "[bad]" in answer:
        return {"score": 1.5, "insight": "out of range"}
    score = float(re.search(r"\[s=([0-9.]+)\]", answer).group(1))
    return {"score": score, "insight": f"REF<{section(case, 'REFERENCE ANSWER')}> Q<{section(case, 'QUESTION')}>"}


ix = partial(helpers.ix, context="A bakery assistant. Only talk about bread, opening hours and orders.",
             query="What are the opening hours?")


DATA = [
    # S1: scores (0.8, 0.6, 1.0), weights (0.5, 0.25, 0.25) -> 0.8 (spec §3.5 example)
    ix("S1", "bot", 0, "Open 8 to 18. [s=0.8]", gt="We open at 8 and close at 18.", weight=0.5),
    ix("S1", "bot", 1, "Rye and spelt. [s=0.6]", gt="Rye, spelt and wheat.", weight=0.25, query=BRACES),
    ix("S1", "bot", 2, "Order by phone. [s=1.0]", gt="Call us to order.", weight=0.25),
    # S2: one answer never validates, one is fine; no reference for turn 0
    ix("S2", "other", 0, "Sure [s=0.4]", gt=None),
    ix("S2", "other", 1, "Stocks will rise [bad]", gt="We only talk about bread."),
    # S3: observation variant; turn 1 gets HTTP 500 (no retries in these tests)
    ix("S3", "bot", 0, "Croissants [s=0.9]", gt="Croissants daily.", observation="The user asked twice.", language="spanish"),
    ix("S3", "bot", 1, "Baguettes [boom] [s=0.1]", gt="Baguettes.", language="spanish"),
    # S4: nothing scored at all
    ix("S4", "bot", 0, "Buy shares [bad]", gt="Bread only.", language="french"),
]


def test_context_pipeline_scores_weights_reference_braces_and_dead_letter(tmp_path):
    data = list(DATA)
    random.Random(3).shuffle(data)
    with ScriptedOpenAIServer(context_judge, faults=[Fault("server_error", match="[boom]", retry_after=None)]) as srv:
        handler = handler_for(srv, tmp_path)
        res = run_metric(Context(judge=handler), data, tmp_path / "run")
        sent = list(srv.requests)
        # the prompts are deterministic: a re-run is served from the cache (zero HTTP requests)
        from fair_forge_beam.metrics.context import _request_and_meta

        srv.reset_counts()
        again = handler.request([_request_and_meta(x)[0] for x in DATA if "[bad]" not in x.assistant and "[boom]" not in x.assistant], handler.create_client())
        assert srv.count() == 0 and all(r.cached for r in again) and len(again) == 5

    per = {r["element_id"]: r for r in res["interactions"]}
    assert set(per) == {x.element_id for x in DATA} - {"S2/other/1", "S3/bot/1", "S4/bot/0"}
    assert all(0.0 <= r["context_awareness"] <= 1.0 for r in per.values())
    assert per["S1/bot/0"]["context_awareness"] == 0.8 and per["S1/bot/1"]["context_awareness"] == 0.6
    # the reference slot holds the real ground truth, never the answer (spec §17 item 1)
    assert per["S1/bot/0"]["insight"].startswith("REF<We open at 8 and close at 18.>")
    assert per["S2/other/0"]["insight"].startswith(f"REF<{NO_REFERENCE}>")
    # a query with braces reached the judge verbatim and was judged
    assert per["S1/bot/1"]["insight"] == f"REF<Rye, spelt and wheat.> Q<{BRACES}>"
    case = [m for r in sent for m in r.messages if m["role"] == "user" and BRACES in m["content"]]
    assert case and "ASSISTANT ANSWER:\nRye and spelt. [s=0.6]\n\nREFERENCE ANSWER:\nRye, spelt and wheat." in unfence(case[0]["content"])
    # observation variant: the rubric asks to cite it, the case carries it
    obs = [r for r in sent if "The user asked twice." in r.prompt]
    assert len(obs) == 1 and "OBSERVATION" in obs[0].messages[0]["content"]
    assert not any("OBSERVATION" in r.messages[0]["content"] for r in sent if r not in obs)

    sessions = {s["session_id"]: s for s in res["sessions"]}
    assert sessions["S1"]["context_awareness"] == pytest.approx(0.8, abs=1e-12)
    assert sessions["S1"]["n_interactions"] == 3 and sessions["S1"]["n_failed"] == 0
    assert sessions["S1"]["context_awareness_ci_low"] is None
    # the failed answer is excluded (not a 0) and counted
    assert sessions["S2"]["context_awareness"] == 0.4
    assert sessions["S2"]["n_interactions"] == 1 and sessions["S2"]["n_failed"] == 1
    dead = {d["element_id"]: d for d in res["dead_letter"]}
    assert set(dead) == {"S2/other/1", "S3/bot/1", "S4/bot/0"} and all(d["stage"] == "context" for d in dead.values())
    assert sessions["S4"]["n_interactions"] == 0 and sessions["S4"]["n_failed"] == 1 and sessions["S4"]["context_awareness"] is None
    assert "invalid answer" in dead["S2/other/1"]["reason"] and "1.5" in dead["S2/other/1"]["raw"]
    assert "HTTP 500" in dead["S3/bot/1"]["reason"]
    assert sessions["S3"]["n_interactions"] == 1 and sessions["S3"]["n_failed"] == 1 and sessions["S3"]["context_awareness"] == 0.9
    assert all(ContextMetric.model_validate(s) for s in res["sessions"])

    slices = {s["slice"]: ContextSliceMetric.model_validate(s) for s in res["slices"]}
    assert set(slices) == {"overall", "assistant_id=bot", "assistant_id=other", "language=english", "language=spanish", "language=french"}
    fr = slices["language=french"]
    assert (fr.n_interactions, fr.n_sessions, fr.n_failed, fr.context_awareness.mean) == (0, 0, 1, None)
    ov = slices["overall"]
    assert ov.n_interactions == 5 and ov.n_sessions == 3 and ov.n_failed == 3 and ov.mode == "point_estimate"
    # sessions weighted by scored interactions: (3·0.8 + 1·0.4 + 1·0.9) / 5
    assert ov.context_awareness.mean == pytest.approx((3 * 0.8 + 0.4 + 0.9) / 5, abs=1e-12)
    assert slices["assistant_id=other"].n_failed == 1 and slices["language=spanish"].n_failed == 1
    assert ov.judge_model == "judge-model"


class BakeryRetriever(Retriever):
    def load_dataset(self):
        out = []
        for i in range(4):
            conv = [
                Batch(qa_id=f"{i}-{t}", query=f"q{t}", assistant=f"a{t} [s={(i + t) % 5 / 4:.2f}]", ground_truth_assistant=f"gt{t}")
                for t in range(3 + i % 2)
            ]
            out.append(Dataset(session_id=f"B{i}", assistant_id="bot", language="english", context="bakery", conversation=conv))
        return out


def test_context_run_upstream_shape_and_bayesian_intervals(tmp_path):
    with ScriptedOpenAIServer(context_judge) as srv:
        judge = {"model": "judge-model", "base_url": srv.base_url, "cache_path": str(tmp_path / "c.sqlite3"), "num_retries": 0,
                 "api_key_env": "FFB_TEST_UNSET_KEY"}
        results = Context.run(BakeryRetriever, judge=judge, statistical_mode=BayesianMode(mc_samples=400))
        assert srv.count() == 14
    # upstream shape: one ContextMetric per session, its interactions nested in turn order
    assert [type(r) for r in results] == [ContextMetric] * 4
    assert [r.session_id for r in results] == ["B0", "B1", "B2", "B3"]
    for r in results:
        assert [i.turn_index for i in r.interactions] == list(range(r.n_interactions))
        scores = [i.context_awareness for i in r.interactions]
        assert r.context_awareness_ci_low <= r.context_awareness <= r.context_awareness_ci_high
        assert min(scores) <= r.context_awareness_ci_low and r.context_awareness_ci_high <= max(scores)
        assert r.estimate.mean == r.context_awareness
    ov = [s for s in results.slices if s.slice == "overall"][0]
    assert ov.mode == "distribution" and ov.n_sessions == 4 and ov.n_interactions == 14
    assert ov.context_awareness.ci_low < ov.context_awareness.mean < ov.context_awareness.ci_high
    assert len(results.interactions) == 14 and results.dead_letter == []


def test_missing_or_bad_judge_fails_before_the_pipeline():
    with pytest.raises(ValueError, match="needs an LLM judge"):
        Context()
    with pytest.raises(ValueError, match="OpenAIJudgeHandler or a mapping"):
        Context(judge="http://localhost:8000")


def test_context_prompt_fills_slots_verbatim():
    (sys_role, system), (user_role, case) = context_messages("ctx {x}", BRACES, "ans {{y}}", "the {real} reference", None)
    assert (sys_role, user_role) == ("system", "user") and "OBSERVATION" not in system and "OBSERVATION" not in case
    assert section(case, "REFERENCE ANSWER") == "the {real} reference"
    assert section(case, "ASSISTANT ANSWER") == "ans {{y}}" and section(case, "QUESTION") == BRACES
    assert section(case, "CONTEXT") == "ctx {x}"
    ContextJudgeOutput(score=1.0, insight="ok")
    with pytest.raises(Exception):
        ContextJudgeOutput(score=1.01, insight="no")
    with pytest.raises(Exception):
        ContextJudgeOutput(score=0.5, insight="x", extra=1)
