"""Regulatory (spec §6.8): corpus connector, chunking guard, retrieval, verdict rules (§19),
the judge-based checker against the scripted server on 127.0.0.1, a local checker, empty corpus,
Bayesian slice rates, order invariance, ``Regulatory.run`` and the main job.

The hashing embedder replaces MiniLM (no semantics needed: the policy chunks that matter share
words with the questions), which keeps this file fast."""
from __future__ import annotations

import concurrent.futures
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, strategies as st

from helpers import SHARED, handler_for, ix, run_metric
from fair_forge_beam.components.contradiction import ChunkCheck, ContradictionChecker, Reranker, RerankerContradictionChecker, regulatory_messages
from fair_forge_beam.components.corpus import (
    ChunkerConfig,
    CorpusChunk,
    ListCorpusConnector,
    LocalCorpusConnector,
    RegulatoryDocument,
    chunk_document,
    packaged_corpus,
)
from fair_forge_beam.components.embedder import HashingEmbedder
from fair_forge_beam.io.retriever import Retriever
from fair_forge_beam.metrics.regulatory import EMPTY_CORPUS_REASON, ChunkIndex, Regulatory, _IndexCombineFn, compute_verdict, retrieve
from fair_forge_beam.schemas.common import Dataset
from fair_forge_beam.schemas.regulatory import RegulatoryMetric, RegulatorySliceMetric
from fair_forge_beam.statistical.bayesian import BayesianMode
from fair_forge_beam.testing.openai_server import Fault, ScriptedOpenAIServer

EMB = HashingEmbedder(dim=256)
PRICING = "# Pricing\n\nPrices are the same for every payment method. No discount for paying in cash."
REFUNDS = "# Refunds\n\nFull refund within 30 days of purchase. Older purchases: store credit or exchange only."
CORPUS = [(PRICING, "pricing.md"), (REFUNDS, "refunds.md")]


def section(text: str, name: str) -> str:
    m = re.search(rf"^{re.escape(name)}[^\n]*:\n(.*?)(?:\n\n[A-Z][A-Z ()]+[^\n]*:\n|\Z)", text, re.S | re.M)
    return m.group(1).strip() if m else ""


def judge(req):
    """SUPPORTS / CONTRADICTS when the passage and the answer both speak of cash or refunds
    (CONTRADICTS when the answer carries ``[violate]``); IRRELEVANT otherwise."""
    case = [m["content"] for m in req.messages if m["role"] == "user"][-1]
    answer, passage = section(case, "ASSISTANT ANSWER"), section(case, "POLICY PASSAGE")
    topic = next((t for t in ("cash", "refund") if t in passage.lower() and t in answer.lower()), None)
    if topic is None:
        return {"verdict": "IRRELEVANT", "confidence": 0.9, "insight": "other topic"}
    bad = "[violate]" in answer
    return {"verdict": "CONTRADICTS" if bad else "SUPPORTS", "confidence": 0.8, "insight": f"{topic} rule"}


class TopicChecker(ContradictionChecker):
    """Local deterministic checker with the same rule as :func:`judge`; ``[crash]`` raises."""

    def check(self, query, answer, chunks):
        if "[crash]" in answer:
            raise RuntimeError("checker model unavailable")
        out = []
        for c in chunks:
            topic = next((t for t in ("cash", "refund") if t in c.lower() and t in answer.lower()), None)
            if topic is None:
                out.append(ChunkCheck("IRRELEVANT", 0.9))
            else:
                out.append(ChunkCheck("CONTRADICTS" if "[violate]" in answer else "SUPPORTS", 0.8, topic))
        return out


def metric(**kw):
    kw.setdefault("corpus", CORPUS)
    kw.setdefault("embedder", EMB)
    kw.setdefault("similarity_threshold", 0.05)
    kw.setdefault("chunk_size", 200)
    kw.setdefault("chunk_overlap", 20)
    if "judge" not in kw:
        kw.setdefault("checker", TopicChecker())
    return Regulatory(**kw)


# ------------------------------------------------------------------ verdict rule (spec §19)
@pytest.mark.parametrize("s,c,expected", [(4, 0, ("COMPLIANT", 1.0)), (0, 3, ("NON_COMPLIANT", 0.0)),
                                          (3, 1, ("COMPLIANT", 0.75)), (0, 0, ("IRRELEVANT", 0.5)),
                                          (1, 2, ("NON_COMPLIANT", 0.3333)), (1, 1, ("COMPLIANT", 0.5))])
def test_verdict_rule_reference_values(s, c, expected):
    assert compute_verdict(s, c, 0.5) == expected


def test_verdict_rule_rejects_negative_counts():
    with pytest.raises(ValueError):
        compute_verdict(-1, 2)


# ------------------------------------------------------------------ chunking guard
@pytest.mark.parametrize("size,overlap", [(100, 100), (100, 150), (1, 1)])
def test_overlap_not_smaller_than_chunk_size_is_rejected_fast(size, overlap):
    """A clear ValueError before any pipeline exists — never an endless loop (spec §17 item 20)."""

    def build():
        with pytest.raises(ValueError, match="chunk_overlap .* must be smaller than chunk_size"):
            Regulatory(corpus=CORPUS, embedder=EMB, checker=TopicChecker(), chunk_size=size, chunk_overlap=overlap)
        with pytest.raises(ValueError, match="must be smaller"):
            chunk_document(RegulatoryDocument(PRICING * 20, "p.md"), ChunkerConfig(size, overlap))  # unvalidated tuple
        return True

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        assert pool.submit(build).result(timeout=20)


@pytest.mark.parametrize("kw", [{"chunk_size": 0}, {"chunk_overlap": -1}, {"top_k": 0}, {"similarity_threshold": 1.5},
                                {"compliance_threshold": -0.1}, {"chunk_size": 10.5}])
def test_bad_parameters_fail_before_the_pipeline(kw):
    with pytest.raises(ValueError):
        metric(**kw)


def test_checker_is_required_exactly_once(tmp_path):
    with pytest.raises(ValueError, match="exactly one"):
        Regulatory(corpus=CORPUS, embedder=EMB)
    with ScriptedOpenAIServer(judge) as srv:
        with pytest.raises(ValueError, match="exactly one"):
            Regulatory(corpus=CORPUS, embedder=EMB, judge=handler_for(srv, tmp_path), checker=TopicChecker())
    with pytest.raises(ValueError, match="policy corpus"):
        Regulatory(embedder=EMB, checker=TopicChecker())
    with pytest.raises(ValueError, match="normalise"):
        Regulatory(corpus=CORPUS, embedder=HashingEmbedder(normalize_embeddings=False), checker=TopicChecker())


def test_chunks_fit_overlap_and_are_deterministic():
    text = (Path(SHARED) / "data/tau_bench/airline_wiki.md").read_text(encoding="utf-8") if Path(SHARED).exists() else REFUNDS * 40
    doc = RegulatoryDocument(text, "airline_wiki.md")
    cfg = ChunkerConfig.make(500, 100)
    chunks = chunk_document(doc, cfg)
    assert len(chunks) >= 10
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    assert all(0 < len(c.text) <= 500 and c.text == c.text.strip() for c in chunks)
    assert all(text[c.start:c.start + len(c.text)] == c.text for c in chunks)  # offsets are characters
    # overlap is in whole semantic units no longer than chunk_overlap: short sentences overlap
    plain = " ".join(f"Rule {i} applies to every booking." for i in range(60))
    small = chunk_document(RegulatoryDocument(plain, "rules.txt"), ChunkerConfig.make(200, 80))
    assert any(small[i + 1].start < small[i].start + len(small[i].text) for i in range(len(small) - 1))
    assert all(len(c.text) <= 200 for c in small)
    assert chunk_document(doc, cfg) == chunks
    assert chunk_document(RegulatoryDocument(" \n\n\n\n ", "blank.md"), cfg) == []


# ------------------------------------------------------------------ connectors
def test_local_connector_folder_file_sorted_missing_and_empty(tmp_path):
    (tmp_path / "b.md").write_text("B policy", encoding="utf-8")
    (tmp_path / "a.txt").write_text("A policy", encoding="utf-8")
    (tmp_path / "c.pdf").write_text("not read", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.md").write_text("D", encoding="utf-8")
    assert LocalCorpusConnector(tmp_path).load_documents() == [RegulatoryDocument("A policy", "a.txt"), RegulatoryDocument("B policy", "b.md")]
    assert [d.source for d in LocalCorpusConnector(tmp_path, recursive=True).load_documents()] == ["a.txt", "b.md", "sub/d.md"]
    assert LocalCorpusConnector(tmp_path / "b.md").load_documents() == [RegulatoryDocument("B policy", "b.md")]
    with pytest.raises(FileNotFoundError):
        LocalCorpusConnector(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    assert LocalCorpusConnector(tmp_path / "empty").load_documents() == []
    with pytest.raises(ValueError, match="same source"):
        ListCorpusConnector([("x", "a.md"), ("y", "a.md")])
    with pytest.raises(FileNotFoundError):
        Regulatory(corpus=str(tmp_path / "missing"), embedder=EMB, checker=TopicChecker())


def test_packaged_corpora_load():
    airline = packaged_corpus("airline").load_documents()
    assert [d.source for d in airline] == ["airline_wiki.md"] and "Airline Agent Policy" in airline[0].text
    assert [d.source for d in packaged_corpus("callcenter").load_documents()] == [
        "contact_preferences.md", "pricing.md", "refunds_and_returns.md"]
    with pytest.raises(ValueError, match="shipped"):
        packaged_corpus("nope")


# ------------------------------------------------------------------ retrieval
def _index(vectors, sources=None):
    chunks = [CorpusChunk(sources[i] if sources else "d.md", i, f"t{i}", 0) for i in range(len(vectors))]
    return ChunkIndex(chunks, np.asarray(vectors, dtype=np.float32))


def test_retrieve_top_k_then_threshold_merge_and_ties():
    e = np.eye(4, dtype=np.float32)
    idx = _index([e[0], e[1], (e[0] + e[1]) / np.sqrt(2), e[2], e[0]])
    q, a = e[0], e[1]
    out = retrieve(idx, q, a, top_k=2, threshold=0.5)
    # query: rows 0 and 4 (1.0, tie by index) ; answer: row 1 (1.0) then row 2 (0.7071)
    assert [(r.chunk_index, r.similarity) for r in out] == [(0, 1.0), (1, 1.0), (4, 1.0), (2, 0.7071)]
    # threshold applies after top-k: with top_k=1 the 0.7071 chunk is never considered
    assert [r.chunk_index for r in retrieve(idx, q, a, top_k=1, threshold=0.0)] == [0, 1]
    assert retrieve(idx, e[3], e[3], top_k=3, threshold=0.3) == []
    assert retrieve(ChunkIndex([], np.zeros((0, 0), np.float32)), q, a, 3, 0.0) == []


@given(st.lists(st.tuples(st.sampled_from(["a.md", "b.md", "c.md"]), st.integers(0, 30),
                          st.lists(st.floats(-1, 1, allow_nan=False, width=32), min_size=3, max_size=3)),
                unique_by=lambda t: (t[0], t[1]), max_size=12),
       st.randoms(use_true_random=False))
def test_index_combinefn_merge_order_does_not_matter(items, rnd):
    fn = _IndexCombineFn()
    elems = [(CorpusChunk(s, i, f"{s}{i}", 0), np.asarray(v, np.float32)) for s, i, v in items]

    def build(order, cuts):
        accs, cur = [], fn.create_accumulator()
        for j, e in enumerate(order):
            cur = fn.add_input(cur, e)
            if j in cuts:
                accs.append(cur)
                cur = fn.create_accumulator()
        accs.append(cur)
        rnd.shuffle(accs)
        return fn.extract_output(fn.merge_accumulators(accs))

    a = build(elems, set())
    shuffled = list(elems)
    rnd.shuffle(shuffled)
    b = build(shuffled, {j for j in range(len(elems)) if rnd.random() < 0.4})
    assert a.chunks == b.chunks
    assert np.array_equal(a.matrix, b.matrix)
    assert [(c.source, c.chunk_index) for c in a.chunks] == sorted((c.source, c.chunk_index) for c in a.chunks)


# ------------------------------------------------------------------ pipelines
DATA = [
    ix("s1", "bot", 0, "No: cash or card, the price is the same.", query="Can I get a discount for paying cash?"),
    ix("s1", "bot", 1, "Sure, 10% off when you pay cash. [violate]", query="A discount for cash?"),
    ix("s1", "bot", 2, "Yes, a full refund within 30 days of purchase.", query="Can I get a refund for last week's purchase?"),
    ix("s2", "other", 0, "Sunny and warm today.", query="What's the weather like?"),
    ix("s3", "bot", 0, "Refund denied. [crash]", query="Refund for something bought in January?", language="spanish"),
]


def test_local_checker_verdicts_irrelevant_not_counted_and_checker_failure(tmp_path):
    out = run_metric(metric(), DATA, tmp_path)
    inter = {r["element_id"]: r for r in out["interactions"]}
    assert set(inter) == {"s1/bot/0", "s1/bot/1", "s1/bot/2", "s2/other/0"}
    # the pricing chunk supports turn 0 and contradicts turn 1; the refunds chunk is irrelevant to both
    assert (inter["s1/bot/0"]["verdict"], inter["s1/bot/0"]["compliance_score"]) == ("COMPLIANT", 1.0)
    assert (inter["s1/bot/1"]["verdict"], inter["s1/bot/1"]["compliance_score"]) == ("NON_COMPLIANT", 0.0)
    for e in ("s1/bot/0", "s1/bot/1"):
        r = inter[e]
        assert r["supporting_chunks"] + r["contradicting_chunks"] == 1
        assert r["irrelevant_chunks"] == len(r["retrieved_chunks"]) - 1  # irrelevant chunks are not contradictions
    assert inter["s1/bot/2"]["verdict"] == "COMPLIANT"
    assert (inter["s2/other/0"]["verdict"], inter["s2/other/0"]["compliance_score"]) == ("IRRELEVANT", 0.5)
    # the crashing checker: dead letter with the original record, interaction counted as failed
    (d,) = out["dead_letter"]
    assert d["stage"] == "regulatory" and d["element_id"] == "s3/bot/0" and "checker model unavailable" in d["reason"]
    assert json.loads(d["raw"])["query"] == DATA[4].query
    sessions = {r["session_id"]: RegulatoryMetric.model_validate(r) for r in out["sessions"]}
    s1 = sessions["s1"]
    assert (s1.n_interactions, s1.n_compliant, s1.n_non_compliant, s1.compliance_score, s1.verdict) == (3, 2, 1, 0.6667, "COMPLIANT")
    assert s1.compliance_rate.mean == pytest.approx(2 / 3)
    assert sessions["s2"].verdict == "IRRELEVANT" and sessions["s3"].n_failed == 1 and sessions["s3"].verdict is None
    slices = {r["slice"]: RegulatorySliceMetric.model_validate(r) for r in out["slices"]}
    o = slices["overall"]
    # n_sessions: the sessions that hold evidence for the compliance rate (the engine's count, issue 28
    # H3; Regulatory's declaration since trial 9 T3): s3's only interaction failed and s2's only verdict
    # is IRRELEVANT, which the rate leaves out, so the rate rests on s1 alone: 1 session, and the
    # one-session rule gives the observed share without an interval (s2 was counted before)
    assert (o.n_interactions, o.n_failed, o.n_sessions, o.n_compliant, o.n_non_compliant, o.n_irrelevant) == (4, 1, 1, 2, 1, 1)
    assert o.compliance_rate.mean == pytest.approx(2 / 3) and o.status == "ok" and o.corpus_chunks >= 2
    assert (o.compliance_rate.ci_low, o.compliance_rate.ci_high) == (None, None)
    assert slices["language=spanish"].status == "no_relevant_interactions" and slices["language=spanish"].n_failed == 1
    assert slices["assistant_id=other"].compliance_rate.mean is None


def test_reranker_checker_relevance_gate():
    class Fixed(Reranker):
        def __init__(self, scores):
            self.scores = scores

        def score(self, query, documents):
            return self.scores[: len(documents)]

    upstream = RerankerContradictionChecker(Fixed([0.9, 0.2, 0.3]))
    assert [c.verdict for c in upstream.check("q", "a", ["x", "y", "z"])] == ["SUPPORTS", "CONTRADICTS", "CONTRADICTS"]
    gated = RerankerContradictionChecker(Fixed([0.9, 0.2, 0.3]), relevance_reranker=Fixed([0.9, 0.9, 0.1]))
    assert [c.verdict for c in gated.check("q", "a", ["x", "y", "z"])] == ["SUPPORTS", "CONTRADICTS", "IRRELEVANT"]
    with pytest.raises(ValueError, match="outside"):
        RerankerContradictionChecker(Fixed([1.5])).check("q", "a", ["x"])


@pytest.mark.slow
def test_bayesian_slice_rate_is_the_exact_beta_posterior_and_order_free(tmp_path):
    """10 relevant interactions, 2 compliant (+ 1 irrelevant, left out of the rate) → Beta(3, 9):
    mean 0.25, 95 % [0.0602, 0.5178] (spec §19); shuffled input gives identical records."""
    data = [ix(f"b{i}", "bot", 0, "Same price for cash." if i < 2 else "5% off for cash. [violate]", query="Cash discount?",
               weight=0.7 if i == 0 else None)
            for i in range(10)]
    data += [ix("b0", "bot", 1, "Sunny and warm today.", query="What's the weather like?", weight=0.3)]
    mode = BayesianMode(mc_samples=400, rng_seed=7)
    outs = []
    for k in range(2):
        shuffled = list(data)
        random.Random(k).shuffle(shuffled)
        outs.append(run_metric(metric(statistical_mode=mode), shuffled, tmp_path / f"run{k}"))
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    for name in ("interactions", "sessions", "slices", "dead_letter"):
        assert sorted(map(key, outs[0][name])) == sorted(map(key, outs[1][name])), name
    o = next(RegulatorySliceMetric.model_validate(r) for r in outs[0]["slices"] if r["slice"] == "overall")
    assert (o.n_compliant, o.n_non_compliant, o.n_irrelevant) == (2, 8, 1)
    assert o.compliance_rate.mean == pytest.approx(0.25)
    assert (o.compliance_rate.ci_low, o.compliance_rate.ci_high) == pytest.approx((0.0602, 0.5178), abs=1e-4)
    # one session with 1 of 1 compliant: Beta(2, 1)
    b1 = next(RegulatoryMetric.model_validate(r) for r in outs[0]["sessions"] if r["session_id"] == "b1")
    assert (b1.compliance_rate.mean, b1.compliance_rate.ci_low, b1.compliance_rate.ci_high) == pytest.approx((2 / 3, 0.1581, 0.9874), abs=1e-4)
    # a two-turn session: weighted score (0.7·1 + 0.3·0.5 = 0.85) with its Bayesian-bootstrap interval
    b0 = next(RegulatoryMetric.model_validate(r) for r in outs[0]["sessions"] if r["session_id"] == "b0")
    assert b0.verdict == "COMPLIANT" and b0.ci_low < 0.85 < b0.ci_high and 0.5 <= b0.ci_low


@pytest.mark.parametrize("corpus", [[("   \n\n ", "blank.md")], "EMPTY_DIR"])
def test_empty_corpus_dead_letters_every_interaction(tmp_path, corpus):
    if corpus == "EMPTY_DIR":
        (tmp_path / "policies").mkdir()
        corpus = str(tmp_path / "policies")
    out = run_metric(metric(corpus=corpus), DATA[:4], tmp_path / "out")
    assert out["interactions"] == []
    assert sorted(d["element_id"] for d in out["dead_letter"]) == sorted(x.element_id for x in DATA[:4])
    assert {d["reason"] for d in out["dead_letter"]} == {EMPTY_CORPUS_REASON}
    o = next(RegulatorySliceMetric.model_validate(r) for r in out["slices"] if r["slice"] == "overall")
    assert (o.status, o.n_failed, o.corpus_chunks, o.n_interactions) == ("empty_corpus", 4, 0, 0)
    assert [q["kind"] for q in out["quality"]] == ["empty_corpus"]


@pytest.mark.slow
def test_judge_checker_against_scripted_server(tmp_path):
    data = [x for x in DATA if "[crash]" not in x.assistant] + [ix("s4", "bot", 0, "Same price for cash.", query="Cash discount? [boom]")]
    random.Random(1).shuffle(data)
    with ScriptedOpenAIServer(judge, faults=[Fault("server_error", match="[boom]", retry_after=None)]) as srv:
        h = handler_for(srv, tmp_path)
        out = run_metric(metric(judge=h), data, tmp_path / "o1")
        calls = srv.count()
        inter = {r["element_id"]: r for r in out["interactions"]}
        assert inter["s1/bot/0"]["verdict"] == "COMPLIANT" and inter["s1/bot/1"]["verdict"] == "NON_COMPLIANT"
        assert inter["s2/other/0"]["verdict"] == "IRRELEVANT"
        chunk = next(c for c in inter["s1/bot/1"]["retrieved_chunks"] if c["verdict"] == "CONTRADICTS")
        assert chunk["source"] == "pricing.md" and chunk["insight"] == "cash rule" and chunk["checker_score"] == 0.8
        # the failing judge call: every failed chunk check is a dead letter; the interaction is not scored
        assert "s4/bot/0" not in inter and out["dead_letter"]
        assert {d["element_id"] for d in out["dead_letter"]} == {"s4/bot/0"}
        assert all(d["stage"] == "regulatory" and "judge failed on chunk" in d["reason"] for d in out["dead_letter"])
        o = next(r for r in out["slices"] if r["slice"] == "overall")
        assert o["n_failed"] == 1 and o["checker"] == "judge:judge-model"
        # a re-run is served from the cache
        srv.reset_counts()
        again = run_metric(metric(judge=h), data, tmp_path / "o2")
        assert srv.count() <= calls - srv.count() and sorted(map(str, again["slices"])) == sorted(map(str, out["slices"]))


def test_prompt_carries_user_text_verbatim():
    (system, user) = regulatory_messages('{"a": {b}} {{ x }}', "ans {% raw %}", "passage", "p.md", 3)
    assert system[0] == "system" and "IRRELEVANT" in system[1]
    assert '{"a": {b}} {{ x }}' in user[1] and "ans {% raw %}" in user[1] and "POLICY FILE (the passage is its chunk 3)" in user[1] and "\np.md\n" in user[1]  # the file name fenced (issue 28)


class ExampleRetriever(Retriever):
    def load_dataset(self):
        raw = json.loads((Path(SHARED) / "data/fair_forge_examples/dataset_regulatory.json").read_text(encoding="utf-8"))
        return [Dataset.model_validate(d) for d in raw]


def test_run_on_the_original_regulatory_example(tmp_path, shared_dir):
    def callcenter_judge(req):
        case = [m["content"] for m in req.messages if m["role"] == "user"][-1]
        answer, passage = section(case, "ASSISTANT ANSWER").lower(), section(case, "POLICY PASSAGE").lower()
        for a, p in (("do-not-call", "do-not-call"), ("30 days", "30 days"), ("payment methods", "cash")):
            if a in answer and p in passage:
                return {"verdict": "SUPPORTS", "confidence": 0.9, "insight": p}
        return {"verdict": "IRRELEVANT", "confidence": 0.6, "insight": "-"}

    with ScriptedOpenAIServer(callcenter_judge) as srv:
        res = Regulatory.run(ExampleRetriever, corpus_connector=packaged_corpus("callcenter"), embedder=EMB,
                             judge=handler_for(srv, tmp_path), chunk_size=400, chunk_overlap=40, similarity_threshold=0.1)
    (session,) = res
    assert isinstance(session, RegulatoryMetric) and session.session_id == "regulatory_session_001"
    assert [i.qa_id for i in session.interactions] == ["qa_001", "qa_002", "qa_003"]
    assert [i.verdict for i in session.interactions] == ["COMPLIANT"] * 3
    assert session.verdict == "COMPLIANT" and session.compliance_score == 1.0 and not res.dead_letter
    assert res.slices[0].slice == "overall" and res.slices[0].corpus_chunks >= 3


# ------------------------------------------------------------------ main job
def test_main_job_regulatory(tmp_path, monkeypatch, shared_dir):
    from pipelines import audit

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    base = ["--quiet", "--runner=apache_beam.runners.portability.fn_api_runner.FnApiRunner",
            "--input", str(shared_dir / "data/fair_forge_examples/dataset_regulatory.json"), "--metrics", "regulatory",
            "--regulatory-corpus", "callcenter", "--regulatory-embedder", "hashing", "--regulatory-threshold", "0.05",
            "--regulatory-top-k", "2", "--chunk-size", "400", "--chunk-overlap", "40", "--mode", "bayesian", "--mc-samples", "200"]
    with ScriptedOpenAIServer(judge) as srv:
        judge_args = ["--judge-base-url", srv.base_url, "--judge-model", "m", "--judge-cache", str(tmp_path / "c.sqlite")]
        doc = audit.run(base + judge_args + ["--output", str(tmp_path / "out")])
    s = doc["summary"]["metrics"]["regulatory"]
    assert s["scored"] + s["dead_letters"] == 3 and s["scored"] == 3
    (overall, *_) = doc["metrics"]["regulatory"]["slices"]
    assert overall["slice"] == "overall" and overall["corpus_chunks"] >= 3 and overall["n_interactions"] == 3
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "out" / "results.parquet")
    assert table.num_rows == 3 and "regulatory_verdict" in table.column_names
    # bad chunking and a missing corpus are usage errors, before any pipeline
    for extra in (["--chunk-size", "50", "--chunk-overlap", "50"], ["--regulatory-corpus", str(tmp_path / "nope")]):
        with pytest.raises(SystemExit) as e:
            audit.run(base + ["--judge-base-url", "http://127.0.0.1:9", "--judge-model", "m", "--output", str(tmp_path / "x")] + extra)
        assert e.value.code == 2


def test_the_summary_names_failed_chunk_checks_in_their_own_unit(tmp_path):
    """Issue 29 T3: the console said "dead letters: 19 interactions this metric could not score" where
    the 19 were failed chunk verdicts of 5 interactions (4 scored, 5 not scored of 9 read). A judge
    failure is one dead letter per retrieved chunk: the summary names that unit, never interactions."""
    from collections import Counter

    from fair_forge_beam.reports.results import build_results_doc
    from fair_forge_beam.reports.summary import metric_summary_lines

    data = [ix("s", "bot", 0, "Cash or refund: same price, full refund. [boom]", query="Cash discount? Refund?")]
    with ScriptedOpenAIServer(judge, faults=[Fault("server_error", match="[boom]", retry_after=None)]) as srv:
        out = run_metric(metric(judge=handler_for(srv, tmp_path)), data, tmp_path / "o")
    dead = out["dead_letter"]
    assert len(dead) >= 2 and {d["element_id"] for d in dead} == {"s/bot/0"}, dead  # one per retrieved chunk
    doc = build_results_doc({}, {"regulatory": {}}, 1, Counter(("regulatory", d["reason"]) for d in dead), Counter(),
                             Counter(), {})
    ms = doc["summary"]["metrics"]["regulatory"]
    lines = metric_summary_lines("regulatory", ms, 1)
    assert lines[0] == "regulatory: interactions: 0 scored, 1 not scored (of 1 read)"
    assert lines[1].startswith(f"  dead letters: {len(dead)} failed checks (one per retrieved policy chunk"), lines
    assert "interactions this metric could not score" not in lines[1]


def test_a_slice_without_a_rated_interaction_has_no_rate_not_the_prior():
    """trial35b B2: a Bayesian run whose sessions were all IRRELEVANT showed every slice as
    '0*  0.5000 [0.0250, 0.9750]' (the Beta(1, 1) prior) and gates passed on it; such a slice has
    no rate, as BestOf's slice without a compared block has no leader_win_rate (75b86e5)."""
    from fair_forge_beam.engine import SliceAccumulators
    from fair_forge_beam.metrics.regulatory import SLICE_COUNTS, _SliceEstimator

    est = _SliceEstimator(BayesianMode(mc_samples=400, rng_seed=7), "local")
    counts = dict.fromkeys(SLICE_COUNTS, 0)
    (rec,) = est.estimate("overall", SliceAccumulators(None, tuple({**counts, "irrelevant": 5}.values()), 0), None, (3,))
    assert rec.status == "no_relevant_interactions" and rec.n_sessions == 0
    assert (rec.compliance_rate.mean, rec.compliance_rate.ci_low, rec.compliance_rate.ci_high) == (None, None, None)
    # a slice with rated interactions keeps its posterior
    (ok,) = est.estimate("overall", SliceAccumulators(
        None, tuple({**counts, "compliant": 3, "non_compliant": 1}.values()), 2), None, (3,))
    assert ok.compliance_rate.mean == pytest.approx(4 / 6) and ok.compliance_rate.ci_low is not None
