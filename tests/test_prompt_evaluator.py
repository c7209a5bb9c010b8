"""PromptEvaluator (spec §6.10): K generations per query through the scripted OpenAI-compatible
server on 127.0.0.1, clustering, CSR / stability / RSS / ICR / JQ, Bayesian CSR, failures.

The server answers each query from a script by the request's attempt number, so the multiset
of the K answers is fixed (which sample index gets which answer is not — nothing here depends
on it)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import handler_for, run_metric
from fair_forge_beam.components.constraints import (
    JsonConstraint,
    KeywordConstraint,
    RegexConstraint,
    WordCountConstraint,
    compliance,
)
from fair_forge_beam.components.embedder import HashingEmbedder
from fair_forge_beam.components.similarity import cosine_matrix, threshold_clusters
from fair_forge_beam.io.elements import Interaction, make_element_id
from fair_forge_beam.io.retriever import Retriever
from fair_forge_beam.statistical.combiners import SumCombineFn
from fair_forge_beam.metrics.prompt_evaluator import OptionalCombineFn, PromptEvaluator, generation_messages
from fair_forge_beam.schemas.common import Dataset
from fair_forge_beam.schemas.prompt_evaluator import PromptEvaluatorMetric
from fair_forge_beam.statistical.bayesian import BayesianMode
from fair_forge_beam.statistical.combiners import RateCombineFn
from fair_forge_beam.statistical.consistency import csr_estimate, normalized_semantic_entropy
from fair_forge_beam.statistical.frequentist import FrequentistMode
from fair_forge_beam.testing.openai_server import Fault, ScriptedOpenAIServer

SEED = "You are the support assistant of a bakery. Answer briefly."
A = "We open at nine"
B = "Closed on public holidays and Sundays"
SCRIPT = {
    "[q3]": [A, A, B],  # labels [0, 0, 1]: spec §19 worked example
    "[q10]": [A] * 7 + ["Fresh rye bread daily", "Croissants sell out early", "Parking behind the shop"],
    "[noref]": [A, B, "Parking behind the shop"],
    "[boom]": ["never"],
}


def scripted(req):
    if "You grade a response" in req.prompt:  # a JQ judgement
        actual = req.prompt.split("ACTUAL RESPONSE:\n", 1)[1]
        return {"score": 1.0 if "nine" in actual else 0.25, "insight": "checked the opening hour"}
    for marker, answers in SCRIPT.items():
        if marker in req.prompt:
            return answers[(req.attempt - 1) % len(answers)]
    raise AssertionError(f"unscripted prompt: {req.prompt!r}")


def q(session, turn, query, gt=A, assistant_id="bot", language="english", context=""):
    return Interaction(
        element_id=make_element_id(session, assistant_id, turn), session_id=session, assistant_id=assistant_id,
        language=language, context=context, turn_index=turn, qa_id=f"{session}-{turn}", query=query, assistant="",
        ground_truth_assistant=gt, observation=None, weight=None, agentic=None, ground_truth_agentic=None, logprobs=None,
    )


def evaluator(srv, tmp_path, k=3, **kw):
    return PromptEvaluator(model=handler_for(srv, tmp_path), seed_prompt=SEED, embedder=HashingEmbedder(dim=1024), k=k, **kw)


# ------------------------------------------------------------------------------ pure functions
def test_clustering_entropy_and_csr_on_spec_examples():
    assert threshold_clusters(cosine_matrix(np.ones((3, 4))), 0.8) == [0, 0, 0]
    assert threshold_clusters(cosine_matrix(np.eye(3)), 0.8) == [0, 1, 2]
    assert threshold_clusters(cosine_matrix(np.array([[1.0, 0], [0, 1], [1, 0]])), 0.8) == [0, 1, 0]
    labels = [0, 0, 1]
    assert round(csr_estimate(labels, FrequentistMode()).mean, 4) == 0.6667
    assert round(normalized_semantic_entropy(labels), 4) == 0.5794
    assert round(1 - normalized_semantic_entropy(labels), 4) == 0.4206
    assert normalized_semantic_entropy([0, 1, 2, 3]) == pytest.approx(1.0)
    assert normalized_semantic_entropy([0, 0, 0]) == 0.0 and normalized_semantic_entropy([0]) == 0.0
    assert csr_estimate([0, 1, 2], FrequentistMode()).mean == pytest.approx(1 / 3)
    # spec §19: 7 of 10 in the dominant cluster, Beta(1, 1) prior -> (7+1)/(10+2)
    bayes = csr_estimate([0] * 7 + [1, 2, 3], BayesianMode(mc_samples=200))
    assert bayes.mean == pytest.approx(8 / 12) and bayes.ci_low < bayes.mean < bayes.ci_high


def test_built_in_constraints():
    assert JsonConstraint().check('{"a": 1}') and not JsonConstraint().check("{a: 1}")
    assert WordCountConstraint(3).check("one two three") and not WordCountConstraint(3).check("one two three four")
    assert KeywordConstraint("Nine").check("we open at nine") and not KeywordConstraint("Nine", case_sensitive=True).check("nine")
    assert RegexConstraint(r"\d{2}:\d{2}").check("at 09:00") and not RegexConstraint(r"\d{2}:\d{2}").check("at nine")
    assert compliance("we open at nine", [KeywordConstraint("nine"), JsonConstraint()]) == 0.5
    with pytest.raises(ValueError):
        WordCountConstraint(-1)


def test_generation_messages_are_the_original_executor():
    assert generation_messages("P", "", "Q") == (("system", "P"), ("user", "Q"))
    assert generation_messages("P", "ctx", "Q") == (("system", "P\n\nctx"), ("user", "Q"))


@pytest.mark.parametrize("bad, said", [(0, "k must be a positive integer"), (-1, "k must be a positive integer"),
                                       (True, "k must be a positive integer"), (2.5, "k must be a positive integer"),
                                       ("3", "'k' expects a whole number, got a str")])  # a text: the check's line (trial39b B5)
def test_nonpositive_or_non_integer_k_is_rejected_up_front(bad, said, tmp_path):
    with ScriptedOpenAIServer(scripted) as srv, pytest.raises(ValueError, match=said):
        evaluator(srv, tmp_path, k=bad)


def test_other_bad_configuration_is_rejected_up_front(tmp_path):
    with ScriptedOpenAIServer(scripted) as srv:
        with pytest.raises(ValueError, match="tau"):
            evaluator(srv, tmp_path, tau=1.5)
        with pytest.raises(ValueError, match="seed_prompt"):
            PromptEvaluator(model=handler_for(srv, tmp_path), seed_prompt="  ", embedder=HashingEmbedder())
        with pytest.raises(ValueError, match="generator"):
            PromptEvaluator(seed_prompt=SEED, embedder=HashingEmbedder())
        with pytest.raises(ValueError, match="output_schema=None"):
            PromptEvaluator(model=handler_for(srv, tmp_path, output_schema="fair_forge_beam.schemas.prompt_evaluator:JQJudgeOutput"),
                            seed_prompt=SEED, embedder=HashingEmbedder())
        with pytest.raises(ValueError, match="check"):
            evaluator(srv, tmp_path, constraints=[object()])


@given(st.lists(st.one_of(st.none(), st.tuples(st.integers(0, 5), st.integers(5, 9))), max_size=10), st.randoms())
def test_optional_combine_fn_merge_order_does_not_matter(items, rnd):
    fn = OptionalCombineFn(RateCombineFn())
    accs = [fn.add_input(fn.create_accumulator(), x) for x in items]
    one = fn.extract_output(fn.merge_accumulators(accs))
    rnd.shuffle(accs)
    cut = len(accs) // 3
    two = fn.extract_output(fn.merge_accumulators([fn.merge_accumulators(accs[:cut]), fn.merge_accumulators(accs[cut:])]))
    real = [x for x in items if x is not None]
    assert one == two == (sum(x[0] for x in real), sum(x[1] for x in real))
    s = OptionalCombineFn(SumCombineFn())
    assert s.merge_accumulators([s.add_input(0, None), s.add_input(0, 3)]) == 3


# ------------------------------------------------------------------------------ pipeline
DATA = [
    q("s1", 0, "When do you open? [q3]"),
    q("s1", 1, "Anything else? [noref]", gt=None),
    q("s1", 2, "   "),  # empty query: dead letter
    q("s2", 0, "When do you open, again? [q3]", assistant_id="other", language="spanish", context="Bakery in Madrid."),
    q("s3", 0, "Will this fail? [boom]"),  # every generation fails: dead letter, n_failed
]


@pytest.mark.slow
def test_pipeline_values_dead_letters_and_rerun_from_cache(tmp_path):
    data = list(DATA)
    random.Random(11).shuffle(data)
    cons = [KeywordConstraint("nine"), WordCountConstraint(5)]
    with ScriptedOpenAIServer(scripted, faults=[Fault("server_error", match="[boom]", retry_after=None)]) as srv:
        out = run_metric(evaluator(srv, tmp_path, constraints=cons), data, tmp_path / "run1")
        calls = srv.count()
        again = run_metric(evaluator(srv, tmp_path, constraints=cons), list(reversed(data)), tmp_path / "run2")
        # the re-run is served by the cache; only the failed generations are asked again (errors are never cached)
        assert srv.count() == calls + 3
    assert calls == 3 * 4  # 3 generations for each of the 4 non-empty queries
    qs = {r["element_id"]: r for r in out["interactions"]}
    assert set(qs) == {"s1/bot/0", "s1/bot/1", "s2/other/0"}
    r = qs["s1/bot/0"]  # answers {A, A, B}: spec §19 worked example
    assert (r["csr"], r["semantic_entropy"], r["stability"], r["n_clusters"]) == (0.6667, 0.5794, 0.4206, 2)
    labels = r["cluster_labels"]  # numbered by first appearance in sample order: [0, 0, 1], [0, 1, 0] or [0, 1, 1]
    assert labels[0] == 0 and sorted(labels.count(v) for v in set(labels)) == [1, 2]
    assert r["n_samples"] == 3 and r["n_largest_cluster"] == 2
    assert r["rss"] == 0.6667  # cosine 1, 1, 0 with the reference A
    assert r["icr"] == 0.6667  # A passes both constraints, B (6 words, no "nine") none
    assert r["jq"] is None
    n = qs["s1/bot/1"]  # three different answers, no reference
    assert (n["csr"], n["stability"], n["n_clusters"], n["rss"]) == (0.3333, 0.0, 3, None)
    sessions = {s["session_id"]: s for s in out["sessions"]}
    assert sessions["s1"]["n_queries"] == 2 and sessions["s1"]["csr"] == round((2 / 3 + 1 / 3) / 2, 4)
    assert sessions["s1"]["rss"] == 0.6667  # the only query with a reference
    assert sessions["s1"]["csr_pooled"]["mean"] == pytest.approx(3 / 6)
    assert sessions["s3"]["n_queries"] == 0 and sessions["s3"]["n_failed"] == 1 and sessions["s3"]["csr"] is None
    stages = sorted((d["stage"], d["element_id"]) for d in out["dead_letter"])
    assert stages == [("prompt_evaluator", "s1/bot/2"), ("prompt_evaluator", "s3/bot/0")] + [("prompt_evaluator.generation", "s3/bot/0")] * 3
    (overall,) = [s for s in out["slices"] if s["slice"] == "overall"]
    assert overall["n_interactions"] == 3 and overall["n_failed"] == 1 and overall["k"] == 3
    assert overall["csr"]["mean"] == pytest.approx((2 / 3 + 1 / 3 + 2 / 3) / 3, abs=1e-4)
    assert overall["csr_pooled"]["mean"] == pytest.approx(5 / 9)
    key = lambda r: json.dumps(r, sort_keys=True)
    for name in ("interactions", "sessions", "slices"):
        assert sorted(map(key, out[name])) == sorted(map(key, again[name]))


def test_bayesian_csr_and_jq(tmp_path):
    data = [q("b", 0, "Hours? [q10]"), q("b", 1, "Hours once more? [q3]")]
    with ScriptedOpenAIServer(scripted) as srv:
        out = run_metric(
            evaluator(srv, tmp_path, k=10, jq_enabled=True, objective="Give the right opening hour.",
                      statistical_mode=BayesianMode(mc_samples=300, rng_seed=3)),
            data, tmp_path / "out")
    qs = {r["qa_id"]: r for r in out["interactions"]}
    # 7 of 10 in the dominant cluster: Beta(8, 4) posterior mean (7+1)/(10+2)
    assert qs["b-0"]["csr"] == 0.6667 and qs["b-0"]["csr_ci_low"] < 0.6667 < qs["b-0"]["csr_ci_high"]
    assert qs["b-0"]["n_clusters"] == 4
    assert qs["b-0"]["jq"] == round((7 * 1.0 + 3 * 0.25) / 10, 4)
    # the [q3] script cycled over 10 samples: A x7, B x3 -> 2 clusters, again Beta(8, 4)
    assert (qs["b-1"]["csr"], qs["b-1"]["n_clusters"], qs["b-1"]["n_jq_failed"]) == (0.6667, 2, 0)
    assert qs["b-1"]["jq"] == round((7 * 1.0 + 3 * 0.25) / 10, 4)
    (s,) = out["sessions"]
    assert s["csr_ci_low"] <= s["csr"] <= s["csr_ci_high"]
    assert s["csr_pooled"]["mean"] == pytest.approx((14 + 1) / (20 + 2))
    assert not out["dead_letter"]


@pytest.mark.slow
def test_main_job_runs_vision_and_prompt_evaluator(tmp_path, shared_dir):
    from pipelines.audit import run

    frames = tmp_path / "frames.json"
    frames.write_text(json.dumps([{
        "session_id": "video-1", "assistant_id": "vlm", "language": "english", "context": "",
        "conversation": [
            {"qa_id": "frame_001", "query": "Describe the frame.", "assistant": "a red car on a street",
             "ground_truth_assistant": "a red car on a street"},
            {"qa_id": "frame_002", "query": "Describe the frame.", "assistant": "a cat", "ground_truth_assistant": None},
        ],
    }]))
    gepa = shared_dir / "data/fair_forge_examples/dataset_gepa_es.json"

    def generator(req):
        return "Respuesta fija de prueba"

    with ScriptedOpenAIServer(generator) as srv:
        doc = run([
            "--input", str(frames), "--input", str(gepa), "--metrics", "vision,prompt_evaluator",
            "--similarity-embedder", "hashing", "--prompt-k", "2", "--seed-prompt", "Eres el asistente de Nexo.",
            "--generator-base-url", srv.base_url, "--generator-model", "gen", "--judge-cache", str(tmp_path / "c.sqlite3"),
            "--output", str(tmp_path / "out"), "--quiet",
        ])
        n_requests = srv.count()
    n_gepa = sum(len(s["conversation"]) for s in json.loads(gepa.read_text()))
    prompts = {(s["context"], t["query"]) for s in json.loads(gepa.read_text()) for t in s["conversation"]}
    # 2 generations per distinct prompt; both frames ask "Describe the frame." and share theirs
    assert n_requests == 2 * (len(prompts) + 1)
    pe = doc["summary"]["metrics"]["prompt_evaluator"]
    assert pe["scored"] == n_gepa + 2 and pe["dead_letters"] == 0
    (overall,) = [s for s in doc["metrics"]["prompt_evaluator"]["slices"] if s["slice"] == "overall"]
    assert overall["csr"]["mean"] == 1.0 and overall["stability"]["mean"] == 1.0  # one fixed answer
    vis = doc["summary"]["metrics"]["vision"]
    no_ref = sum(1 for s in json.loads(gepa.read_text()) for t in s["conversation"] if not t.get("ground_truth_assistant"))
    assert vis["dead_letters"] == 1 + no_ref  # frame_002 (no reference); the gepa turns' empty descriptions score 0
    assert vis["scored"] == 1 + n_gepa - no_ref
    with pytest.raises(SystemExit):
        run(["--metrics", "prompt_evaluator", "--output", str(tmp_path / "o2"), "--quiet"])  # no seed prompt
    with pytest.raises(SystemExit):
        run(["--metrics", "prompt_evaluator", "--seed-prompt", "x", "--prompt-k", "0", "--generator-base-url",
             "http://127.0.0.1:9/v1", "--generator-model", "m", "--output", str(tmp_path / "o3"), "--quiet"])


class Sushi(Retriever):
    """The original's prompt-evaluator experiment data (10 single-turn sessions, Spanish)."""

    def load_dataset(self):
        return [Dataset.model_validate(d) for d in json.loads(Path(self.kwargs["path"]).read_text())]


def test_upstream_style_run_on_the_sushi_dataset(tmp_path, shared_dir):
    path = shared_dir / "data/fair_forge_examples/dataset_sushi_es.json"
    two = ["Lamentamos mucho lo sucedido con tu pedido", "Horario de atencion de lunes a viernes"]

    def generator(req):
        return two[(req.attempt - 1) % 2]

    with ScriptedOpenAIServer(generator) as srv:
        res = PromptEvaluator.run(
            Sushi, path=str(path), model=handler_for(srv, tmp_path), seed_prompt="Sos el asistente de un local de sushi.",
            embedder=HashingEmbedder(dim=1024), k=2, constraints=[KeywordConstraint("lamentamos")],
        )
    assert [type(m) for m in res] == [PromptEvaluatorMetric] * 10
    assert [m.session_id for m in res] == sorted(m.session_id for m in res)
    for m in res:  # two different answers per query: CSR 1/2, SE_n = ln 2 / ln 2 = 1
        assert (m.n_queries, m.csr, m.stability, m.icr, m.k) == (1, 0.5, 0.0, 0.5, 2)
        assert m.interactions[0].n_clusters == 2 and m.rss is not None
        assert "CSR 0.5000" in str(m)
    assert res.slices[0].slice == "overall" and res.slices[0].n_interactions == 10 and not res.dead_letter


@pytest.mark.slow
def test_bayesian_results_identical_across_runners_and_input_order(tmp_path, shared_dir):
    """DESIGN §4: same input + seed ⇒ the same results in memory and on 2 worker processes, with the
    sessions in another order (the second run reads every generation back from the cache)."""
    from pipelines.audit import run

    sessions = json.loads((shared_dir / "data/fair_forge_examples/dataset_sushi_es.json").read_text())
    fwd, rev = tmp_path / "fwd.json", tmp_path / "rev.json"
    fwd.write_text(json.dumps(sessions))
    rev.write_text(json.dumps(sessions[::-1]))
    answers = ["Lamentamos mucho lo sucedido", "Lamentamos mucho lo sucedido con tu pedido", "Horario de lunes a viernes"]

    def generator(req):  # queries of even prompt length get three different answers, the others two alike
        if len(req.prompt) % 2 == 0:
            return ["Uno", "Dos", "Tres"][(req.attempt - 1) % 3]
        return answers[(req.attempt - 1) % 3]

    common = ["--metrics", "vision,prompt_evaluator", "--mode", "bayesian", "--seed", "5", "--mc-samples", "500",
              "--similarity-embedder", "hashing", "--prompt-k", "3", "--prompt-tau", "0.5", "--seed-prompt", "Sos un bot de sushi.",
              "--judge-cache", str(tmp_path / "c.sqlite3"), "--quiet"]
    with ScriptedOpenAIServer(generator) as srv:
        gen = ["--generator-base-url", srv.base_url, "--generator-model", "gen"]
        a = run([*common, *gen, "--input", str(fwd), "--output", str(tmp_path / "a")])
        b = run([*common, *gen, "--input", str(rev), "--output", str(tmp_path / "b"),
                 "--runner=apache_beam.runners.portability.fn_api_runner.FnApiRunner", "--direct_num_workers=2",
                 "--direct_running_mode=multi_processing"])
        assert srv.count() == 3 * len(sessions)  # the second run made no call
    assert a["metrics"] == b["metrics"] and a["summary"] == b["summary"]
    (overall,) = [s for s in a["metrics"]["prompt_evaluator"]["slices"] if s["slice"] == "overall"]
    assert overall["n_interactions"] == len(sessions)
    assert overall["csr"]["ci_low"] < overall["csr"]["mean"] < overall["csr"]["ci_high"]  # sessions differ: a real interval


def test_identical_prompts_share_their_samples(tmp_path):
    """Two queries with the same messages are generated once (K calls, not 2K) and get the same
    answers, whatever the timing; a third, different query gets its own K."""
    data = [q("d1", 0, "Hours? [q3]"), q("d2", 0, "Hours? [q3]", assistant_id="twin"), q("d3", 0, "Other? [noref]")]
    with ScriptedOpenAIServer(scripted) as srv:
        out = run_metric(evaluator(srv, tmp_path), data, tmp_path / "out")
        assert srv.count() == 3 + 3
    qs = {r["session_id"]: r for r in out["interactions"]}
    assert qs["d1"]["cluster_labels"] == qs["d2"]["cluster_labels"] and qs["d1"]["csr"] == qs["d2"]["csr"] == 0.6667
    assert qs["d3"]["n_clusters"] == 3


def test_bayesian_csr_of_sessions_and_slices_is_the_frequentist_quantity(tmp_path):
    """trial37 T1: every query's K = 3 answers fall in one cluster, so the frequentist csr is 1.0 in
    every session and slice. The query's own Bayesian csr is its Beta(1, 1) posterior mean 0.8 (spec
    §6.10), but session and slice csr are means over queries of the observed CSR in both modes: 1.0,
    and the slice interval contains it (it read 0.8000 [0.8000, 0.8000], the shrunk values
    bootstrapped, whatever the number of queries)."""
    data = [q(f"c{s}", t, f"Hours, take {t}? [same]", assistant_id=f"bot{s % 2}") for s in range(6) for t in range(3)]
    with ScriptedOpenAIServer(lambda req: A) as srv:
        out = run_metric(evaluator(srv, tmp_path, k=3, statistical_mode=BayesianMode(mc_samples=300, rng_seed=3)),
                         data, tmp_path / "out")
    assert [r["csr"] for r in out["interactions"]] == [0.8] * 18  # spec: (3 + 1) / (3 + 2) per query
    for s in out["sessions"]:
        assert (s["csr"], s["csr_ci_low"], s["csr_ci_high"]) == (1.0, 1.0, 1.0), s
    assert {s["slice"] for s in out["slices"]} >= {"overall", "assistant_id=bot0", "assistant_id=bot1"}
    for s in out["slices"]:
        assert s["csr"]["mean"] == pytest.approx(1.0) and s["csr"]["ci_low"] <= 1.0 <= s["csr"]["ci_high"], s


def test_failed_jq_judgements_and_generations_are_counted_in_the_summary_and_on_the_console(tmp_path, capsys):
    """trial40 J2: every JQ verdict invalid wrote 2 × 3 dead letters of stage prompt_evaluator.jq, and
    results.json said dead_letters 0, dead_letter_reasons {} and the console "0 not scored" with no word
    (the summary counted the stage named after the metric only). Now each of the metric's stages is
    counted in its own unit (stage_dead_letters), printed, and a JQ that scored nothing says so; a
    failed generation (stage prompt_evaluator.generation) is counted the same way. Every dead letter
    written is counted once."""
    from helpers import uncounted_dead_letters
    from pipelines.audit import run

    def scripted(req):
        if "You grade a response" in req.prompt:
            return "no verdict in this answer"  # every JQ judgement is a dead letter
        return "We open at nine."

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({
        "session_id": sid, "assistant_id": "bot", "language": "english", "context": "",
        "conversation": [{"qa_id": "q", "query": f"Hours {sid}?", "assistant": "", "ground_truth_assistant": "We open at nine."}]})
        + "\n" for sid in ("s1", "s2")), encoding="utf-8")
    faults = [Fault("bad_request", match="Hours s2?", attempts={2})]  # one of s2's 3 generations fails (HTTP 400)
    with ScriptedOpenAIServer(scripted, faults=faults) as srv:
        doc = run(["--metrics", "prompt_evaluator", "--similarity-embedder", "hashing", "--prompt-k", "3",
                   "--seed-prompt", "You are a bakery's assistant.", "--prompt-jq-objective", "Give the opening hour.",
                   "--generator-base-url", srv.base_url, "--generator-model", "gen", "--judge-retries", "0",
                   "--judge-cache", str(tmp_path / "c.sqlite3"), "--no-report", "--input", str(data),
                   "--output", str(tmp_path / "out")])
    out = capsys.readouterr().out
    pe = doc["summary"]["metrics"]["prompt_evaluator"]
    assert (pe["interactions_scored"], pe["dead_letters"]) == (2, 0)
    parts = pe["stage_dead_letters"]
    assert list(parts) == ["prompt_evaluator.generation", "prompt_evaluator.jq"]
    jq, gen = parts["prompt_evaluator.jq"], parts["prompt_evaluator.generation"]
    assert jq["dead_letters"] == 5 and sum(jq["dead_letter_reasons"].values()) == 5  # 3 + 2 answers judged
    assert jq["dead_letter_unit"].startswith("failed JQ judgements")
    assert gen["dead_letters"] == 1 and gen["dead_letter_unit"].startswith("failed generations")
    assert "HTTP 400" in next(iter(gen["dead_letter_reasons"]))
    assert uncounted_dead_letters(tmp_path / "out") == (6, 6)
    assert "  dead letters of stage prompt_evaluator.jq: 5 failed JQ judgements" in out
    assert "  dead letters of stage prompt_evaluator.generation: 1 failed generations" in out
    assert "  warning: JQ was asked for and scored nothing (its 5 dead letters above): jq is n/a in every slice" in out
