"""Conversational (spec §6.4) against the scripted OpenAI-compatible server on 127.0.0.1: the
judge's scores are computed from the prompt (history length, markers, required language), so
every number is known; history order is checked with shuffled input."""
from __future__ import annotations

import random
import re
from functools import partial

import numpy as np
import pytest

import helpers
from helpers import handler_for, run_metric
from fair_forge_beam.components.judge.parsing import unfence
from fair_forge_beam.components.judge.prompts_quality import NO_HISTORY
from fair_forge_beam.metrics.conversational import Conversational, _turn, session_requests
from fair_forge_beam.schemas.conversational import (
    DIMENSIONS,
    RESULT_FIELDS,
    ConversationalJudgeOutput,
    ConversationalMetric,
    ConversationalSliceMetric,
)
from fair_forge_beam.statistical.bayesian import BayesianMode
from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

BRACES = 'Show me {"a": {b}} then {{ x }}'


def section(text: str, name: str) -> str:
    m = re.search(rf"^{re.escape(name)}:\n(.*?)(?:\n\n[A-Z][A-Za-z ()]+:\n|\Z)", text, re.S | re.M)
    return unfence(m.group(1).rstrip("\n")) if m else ""


def grice_judge(req):
    """memory = number of earlier turns shown; relation = the ``[r=x]`` marker of the answer;
    language = 10 when the rubric asks for spanish (in its fenced language block), else 2; ``[bad]`` → an out-of-range score;
    the insight lists the earlier questions in the order the judge saw them."""
    system = req.messages[0]["content"]
    case = [m["content"] for m in req.messages if m["role"] == "user"][-1]
    history = section(case, "EARLIER TURNS (oldest first)")
    earlier = re.findall(r"^User: (.*)$", history, re.M) if history != NO_HISTORY else []
    answer = section(case, "ASSISTANT ANSWER (to judge)")
    if "[bad]" in answer:
        return {**dict.fromkeys(DIMENSIONS, 5.0), "memory": 11.0, "insight": "oops"}
    rel = float(re.search(r"\[r=([0-9.]+)\]", answer).group(1))
    scores = {d: 7.0 for d in DIMENSIONS}
    scores.update(memory=float(len(earlier)), relation_maxim=rel, language=10.0 if re.search(r"<<<BEGIN PREFERRED_LANGUAGE [0-9a-f]{16}>>>\nspanish\n", system) else 2.0)
    return {**scores, "insight": " | ".join(earlier) + f" || Q<{section(case, 'CURRENT QUESTION')}> REF<{section(case, 'REFERENCE ANSWER')}>"}


ix = partial(helpers.ix, language="spanish", qa_id_format="{session_id}-{turn}",
             query_format="{session_id} question {turn}")


RELEVANCE = [8.0, 6.0, 9.0, 4.0, 10.0]
LONG = [ix("L", "bot", t, f"answer {t} [r={RELEVANCE[t]}]", gt=f"reference {t}") for t in range(5)]
LONG[2] = LONG[2]._replace(query=BRACES)
OTHER = [
    ix("E", "b2", 0, "hello [r=5]", language="english"),
    ix("E", "b2", 1, "this one fails [bad]", language="english"),
    ix("E", "b2", 2, "bye [r=3]", language="english"),
]


@pytest.mark.slow
def test_history_is_turn_order_scores_dead_letter_and_frequentist_means(tmp_path):
    data = LONG + OTHER
    random.Random(11).shuffle(data)  # arrival order must not matter
    assert [x.turn_index for x in data if x.session_id == "L"] != list(range(5))
    with ScriptedOpenAIServer(grice_judge) as srv:
        res = run_metric(Conversational(judge=handler_for(srv, tmp_path)), data, tmp_path / "run")
        sent = list(srv.requests)

    per = {r["element_id"]: r for r in res["interactions"]}
    assert set(per) == {x.element_id for x in data} - {"E/b2/1"}
    for t in range(5):
        r = per[f"L/bot/{t}"]
        # the judge saw exactly the earlier turns, oldest first
        earlier = " | ".join(LONG[k].query for k in range(t))
        assert r["insight"].startswith(earlier + " || Q<")
        assert r["history_turns"] == t and r["conversational_memory"] == float(t)
        assert r["conversational_relation_maxim"] == RELEVANCE[t]
        assert r["conversational_language"] == 10.0  # the session is spanish
        assert f"REF<reference {t}>" in r["insight"]  # real reference answer in the slot
    assert f"Q<{BRACES}>" in per["L/bot/2"]["insight"]
    # later turns show the braces query verbatim in their history
    assert BRACES in per["L/bot/4"]["insight"]
    assert per["E/b2/2"]["conversational_language"] == 2.0
    # the earlier answers (not judge verdicts) are in the history text
    last = [unfence(m["content"]) for r in sent for m in r.messages if m["role"] == "user" and "answer 3 [r=4.0]" in m["content"] and "CURRENT QUESTION:\nL question 4" in unfence(m["content"])]
    assert len(last) == 1
    assert last[0].index("[Turn 1]\nUser: L question 0\nAssistant: answer 0") < last[0].index("[Turn 4]")
    assert not any('"memory"' in m["content"] for r in sent for m in r.messages if m["role"] != "system")

    sessions = {s["session_id"]: ConversationalMetric.model_validate(s) for s in res["sessions"]}
    L, E = sessions["L"], sessions["E"]
    assert L.n_interactions == 5 and L.n_failed == 0
    assert L.conversational_relation_maxim.mean == pytest.approx(np.mean(RELEVANCE), abs=1e-12)
    assert L.conversational_memory.mean == pytest.approx(2.0, abs=1e-12)
    assert L.conversational_quality_maxim.mean == pytest.approx(7.0) and L.conversational_quality_maxim.ci_low is None
    # the invalid answer is dead-lettered, excluded from the means (not a 0) and counted
    assert E.n_interactions == 2 and E.n_failed == 1
    assert E.conversational_relation_maxim.mean == pytest.approx(4.0)
    assert E.conversational_memory.mean == pytest.approx((0 + 2) / 2)  # turn 2 still saw both earlier turns
    (dead,) = res["dead_letter"]
    assert dead["stage"] == "conversational" and dead["element_id"] == "E/b2/1"
    assert "invalid answer" in dead["reason"] and "11.0" in dead["raw"]

    slices = {s["slice"]: ConversationalSliceMetric.model_validate(s) for s in res["slices"]}
    ov = slices["overall"]
    assert ov.n_interactions == 7 and ov.n_sessions == 2 and ov.n_failed == 1
    assert ov.conversational_relation_maxim.mean == pytest.approx((sum(RELEVANCE) + 5 + 3) / 7, abs=1e-12)
    assert slices["language=english"].n_failed == 1 and slices["language=spanish"].n_failed == 0


def test_bayesian_session_intervals_bracket_the_mean(tmp_path):
    data = [x._replace(weight=w) for x, w in zip(LONG, [0.4, 0.1, 0.2, 0.2, 0.1])]
    data += [ix("M", "bot", t, f"m{t} [r={(3 * t) % 11}]") for t in range(6)]
    random.Random(5).shuffle(data)
    with ScriptedOpenAIServer(grice_judge) as srv:
        res = run_metric(Conversational(judge=handler_for(srv, tmp_path), statistical_mode=BayesianMode(mc_samples=500)), data, tmp_path / "b")
    sessions = {s["session_id"]: ConversationalMetric.model_validate(s) for s in res["sessions"]}
    L = sessions["L"]
    for f in RESULT_FIELDS:
        e = getattr(L, f)
        assert e.n == 5 and e.ci_low <= e.mean <= e.ci_high
    rel = L.conversational_relation_maxim
    assert rel.ci_low < rel.mean < rel.ci_high and min(RELEVANCE) <= rel.ci_low and rel.ci_high <= max(RELEVANCE)
    # a constant dimension has a zero-width interval at the constant
    assert (L.conversational_quality_maxim.ci_low, L.conversational_quality_maxim.ci_high) == pytest.approx((7.0, 7.0))
    ov = [ConversationalSliceMetric.model_validate(s) for s in res["slices"] if s["slice"] == "overall"][0]
    assert ov.mode == "distribution" and ov.n_sessions == 2
    assert ov.conversational_relation_maxim.ci_low <= ov.conversational_relation_maxim.mean <= ov.conversational_relation_maxim.ci_high
    assert not res["dead_letter"]


def test_session_requests_are_independent_sorted_and_bounded():
    skey, _ = _turn(LONG[0])
    turns = [_turn(x)[1] for x in reversed(LONG)]
    reqs = session_requests(skey, turns)
    assert [m[1][1] for _, m in reqs] == [0, 1, 2, 3, 4] and [m[1][5]["history_turns"] for _, m in reqs] == [0, 1, 2, 3, 4]
    assert NO_HISTORY in reqs[0][0].messages[1][1]
    # same input, any order -> identical requests (so each is cached on its own)
    assert session_requests(skey, random.Random(1).sample(turns, len(turns))) == reqs
    bounded = session_requests(skey, turns, max_history_turns=2)
    case = bounded[4][0].messages[1][1]
    assert f"[Turn 3]\nUser: {BRACES}" in case and "[Turn 4]\nUser: L question 3" in case and "question 1\n" not in case
    assert all(NO_HISTORY in r.messages[1][1] for r, _ in session_requests(skey, turns, chat_history=False))
    assert len({r.key for r, _ in reqs}) == 5
    with pytest.raises(ValueError):
        Conversational(judge={"model": "m", "base_url": "http://127.0.0.1:9/v1"}, max_history_turns=-1)
    with pytest.raises(ValueError, match="needs an LLM judge"):
        Conversational()
    with pytest.raises(Exception):
        ConversationalJudgeOutput(**dict.fromkeys(DIMENSIONS, 10.5), insight="x")



@pytest.mark.slow
def test_long_session_history_is_cut_to_the_prompt_limit_oldest_first_and_warned(tmp_path):
    """Issue 28 T8: the turns of a long session whose history alone would pass the prompt limit
    (--judge-max-prompt-chars) are all judged: the oldest earlier turns are left out, as few as
    needed, the prompt says how many, and the session gets one ``history_cut`` warning (before,
    every such turn was a dead letter "prompt ... over the limit")."""
    n, limit = 300, 6_000

    def judge(req):  # insight: the number of earlier turns shown
        case = unfence(req.messages[-1]["content"])
        return {**dict.fromkeys(DIMENSIONS, 5.0), "insight": str(len(re.findall(r"^User: ", case, re.M)))}

    data = [ix("Z", "bot", t, f"answer {t} " + "a" * 60) for t in range(n)]
    random.Random(3).shuffle(data)
    with ScriptedOpenAIServer(judge) as srv:
        res = run_metric(Conversational(judge=handler_for(srv, tmp_path, max_prompt_chars=limit)), data, tmp_path / "z")
        sent = list(srv.requests)
    assert not res["dead_letter"]
    per = {r["turn_index"]: r for r in res["interactions"]}
    assert sorted(per) == list(range(n))  # every turn judged
    sizes = [sum(len(m["content"]) for m in r.messages) for r in sent]
    assert len(sent) == n and max(sizes) <= limit
    cut = [t for t in range(n) if per[t]["history_turns"] < t]
    assert cut and cut == list(range(cut[0], n))  # from the first turn that needs it on
    for t in (cut[0], n - 1):
        shown = per[t]["history_turns"]
        assert 0 < shown < t and per[t]["insight"] == str(shown)
        # the newest earlier turns are kept, the prompt says how many older ones are not
        (case,) = [unfence(m["content"]) for r in sent for m in r.messages
                   if m["role"] == "user" and f"CURRENT QUESTION:\nZ question {t}\n" in unfence(m["content"])]
        assert f"[{t - shown:,} earlier turn{'s' * (t - shown > 1)} left out: the prompt limit]\n\n[Turn {t - shown + 1}]\n" in case and f"[Turn {t}]\nUser: Z question {t - 1}\n" in case
        assert f"[Turn {t - shown}]\n" not in case
    # as many as fit: one more earlier turn would pass the limit
    assert max(sizes) > limit - 200
    (w,) = [q for q in res["quality"] if q["kind"] == "history_cut"]
    assert w["key"] == "Z/bot" and f"{len(cut):,} turns of this session" in w["message"]
    assert f"the first: turn_index {cut[0]} " in w["message"]
    # without a limit that bites: no note, no warning, prompts as before
    capped = session_requests(_turn(data[0])[0], [_turn(x)[1] for x in data], max_prompt_chars=10**7)
    assert capped == session_requests(_turn(data[0])[0], [_turn(x)[1] for x in data])
    assert all("history_left_out" not in m[1][5] for _, m in capped)


def test_history_cut_speaks_only_of_turns_judged(tmp_path):
    """A turn whose prompt is over the limit with no history at all is a dead letter (not sent), and
    only that: the session's ``history_cut`` warning counts and names the turns judged with a cut
    history (trial 10 T13: "2 turns ... judged without their oldest earlier turns ... the first:
    turn_index 2", though turn 2 was never sent and turn 3 alone was judged with a cut history)."""
    limit = 3_000
    data = [ix("L", "bot", t, f"answer {t}", query="q" * 3_500 if t == 2 else None) for t in range(4)]
    with ScriptedOpenAIServer(lambda req: {**dict.fromkeys(DIMENSIONS, 5.0), "insight": "ok"}) as srv:
        res = run_metric(Conversational(judge=handler_for(srv, tmp_path, max_prompt_chars=limit)), data, tmp_path / "l")
    (d,) = res["dead_letter"]
    assert d["element_id"].endswith("/2") and "over the limit of 3,000 characters" in d["reason"], d
    per = {r["turn_index"]: r for r in res["interactions"]}
    assert sorted(per) == [0, 1, 3] and per[3]["history_turns"] < 3
    (w,) = [q for q in res["quality"] if q["kind"] == "history_cut"]
    assert "1 turn of this session" in w["message"] and "the first: turn_index 3 " in w["message"], w
