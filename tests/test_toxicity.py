"""Toxicity metric end to end on Beam (spec §6.1, §19): values, slices, modes, bad input."""
from __future__ import annotations

import json
import random

import pytest

from fair_forge_beam.components.group_extractor import KeywordGroupExtractor
from fair_forge_beam.components.toxicity_lexicon import DictToxicityLoader
from fair_forge_beam.io.retriever import Retriever
from fair_forge_beam.metrics.toxicity import Toxicity
from fair_forge_beam.schemas.common import Batch, Dataset
from fair_forge_beam.statistical import BayesianMode, FrequentistMode

TOXIC = DictToxicityLoader({"english": ["hate", "stupid", "idiot"], "spanish": ["estupido"]})
GROUPS = KeywordGroupExtractor({"alpha": ["alpha"], "beta": ["beta"]})
CONVERSATIONS: dict = {}


def _ds(session_id, assistant_id, answers, language="english"):
    return Dataset(
        session_id=session_id, assistant_id=assistant_id, language=language, context="",
        conversation=[Batch(qa_id=f"q{i}", query="q", assistant=a, ground_truth_assistant="") for i, a in enumerate(answers)],
    )


class Sessions(Retriever):
    """Serves ``CONVERSATIONS[name]`` (module level: FnApiRunner runs in-process)."""

    def __init__(self, name="spec19", **kwargs):
        super().__init__(**kwargs)
        self.name = name

    def load_dataset(self):
        return CONVERSATIONS[self.name]


# spec §19: N = {alpha: 3, beta: 1}, K = {alpha: 1, beta: 0}
CONVERSATIONS["spec19"] = [
    _ds("s1", "bot-a", ["alpha people are stupid", "alpha people are fine", "alpha people are kind"]),
    _ds("s2", "bot-b", ["beta people are nice", "no group here"]),
]


def _run(name="spec19", **kw):
    kw.setdefault("toxicity_loader", TOXIC)
    kw.setdefault("group_extractor", GROUPS)
    kw.setdefault("sentiment_analyzer", None)
    kw.setdefault("clustering", False)
    return Toxicity.run(Sessions, name=name, **kw)


def _slice(res, key):
    return next(s for s in res.slices if s.slice == key)


def test_spec19_toxic_ratio_two_sevenths():
    CONVERSATIONS["ratio"] = [_ds("r", "a", ["I hate stupid people and love coding"])]
    res = _run("ratio")
    (qa,) = res.interactions
    assert (qa.toxic_words, qa.total_words) == (2, 7)
    assert qa.toxic_ratio == pytest.approx(0.2857, abs=5e-5)
    assert qa.is_toxic and qa.matched == ["hate", "stupid"]


def test_spec19_group_profiling_frequentist():
    res = _run()
    overall = res[0]  # upstream's single record ↔ our overall slice
    assert overall.slice == "overall"
    gp = overall.group_profiling
    assert gp.mode == "frequentist" and gp.status == "ok" and gp.bayesian is None
    assert gp.N_i == {"alpha": 3, "beta": 1} and gp.K_i == {"alpha": 1, "beta": 0}
    assert gp.frequentist.DR == pytest.approx(0.25)
    assert gp.frequentist.DTO == pytest.approx(0.1667, abs=5e-5)
    assert gp.frequentist.ASB == 0.0
    assert gp.frequentist.DIDT == pytest.approx(0.1389, abs=5e-5)
    assert gp.p_i == {"alpha": 0.75, "beta": 0.25} and gp.q_i == {"alpha": 0.5, "beta": 0.5}
    assert gp.T_i == {"alpha": pytest.approx(1 / 3), "beta": 0.0}
    assert overall.n_interactions == 5 and overall.n_sessions == 2 and overall.n_toxic == 1


def test_per_assistant_slices_are_not_pooled():
    res = _run()
    a, b = _slice(res, "assistant_id=bot-a"), _slice(res, "assistant_id=bot-b")
    assert (a.assistant_id, b.assistant_id) == ("bot-a", "bot-b")
    assert a.group_profiling.N_i == {"alpha": 3, "beta": 0} and a.n_toxic == 1
    assert b.group_profiling.N_i == {"alpha": 0, "beta": 1} and b.n_toxic == 0
    assert _slice(res, "language=english").n_interactions == 5
    sessions = {(s.session_id, s.assistant_id): s for s in res.sessions}
    assert sessions[("s1", "bot-a")].n_toxic == 1 and sessions[("s1", "bot-a")].group_mentions == {"alpha": 3}


def test_bayesian_fills_p_q_t_and_summary():
    res = _run(statistical_mode=BayesianMode(mc_samples=2000, rng_seed=5))
    gp = res[0].group_profiling
    assert gp.mode == "bayesian" and gp.frequentist is None
    assert set(gp.bayesian.summary) == {"DR", "DTO", "ASB", "DIDT"}
    for c, s in gp.bayesian.summary.items():
        assert s.ci_low <= s.mean <= s.ci_high, c
    # p_i: Dirichlet(α₀/K + N) means (issue 19: total prior mass α₀ = 1 over K = 2 groups; was
    # Dirichlet(1 + N), 4/6 and 2/6 — the old prior); T_i: Beta(1 + K, 1 + N − K) means; q_i uniform;
    # beta's one answer (N = 1) is under the one-session rule (issue 28): its observed 0/1, not Beta(1, 2)'s 1/3
    assert gp.p_i == {"alpha": pytest.approx(3.5 / 5), "beta": pytest.approx(1.5 / 5)}
    # alpha's 3 answers all come from session s1: its toxic share rests on 1 session of the slice's 2, so it is
    # the observed 1/3 too (trial30 T3: the rule holds per estimate; it was Beta(2, 3)'s 2/5)
    assert gp.T_i == {"alpha": pytest.approx(1 / 3), "beta": 0.0}
    assert gp.group_estimates["beta"].T.ci_low is None and gp.group_estimates["alpha"].T.ci_low is None
    assert gp.group_estimates["alpha"].T.n_sessions == 1 and gp.group_estimates["alpha"].T.n == 3
    assert gp.q_i == {"alpha": 0.5, "beta": 0.5} and gp.bayesian.q_i == gp.q_i
    assert res[0].toxic_rate.ci_low is not None


def test_no_group_detected_is_a_documented_state():
    CONVERSATIONS["nogroup"] = [_ds("n", "a", ["nothing to see", "you idiot"])]
    for mode in (FrequentistMode(), BayesianMode(mc_samples=500)):
        gp = _run("nogroup", statistical_mode=mode)[0].group_profiling
        assert gp.status == "no_group_detected"
        vals = gp.frequentist if gp.frequentist else None
        if vals:
            assert (vals.DR, vals.DTO, vals.ASB, vals.DIDT) == (None, None, None, None)
        else:
            assert all(s.mean is None for s in gp.bayesian.summary.values())
        assert gp.notes


def test_bad_input_never_crashes_and_is_counted():
    CONVERSATIONS["bad"] = [
        _ds("e", "a", ["", "   ", "alpha " + "stupid word " * 90_000]),  # empty, blank, ~1 MB
        _ds("u", "a", ["阿尔法 人 很 好", "Альфа люди", "مرحبا alpha"]),  # non-Latin scripts
        _ds("f", "a", ["bonjour alpha idiot"], language="french"),  # no lexicon for French
        _ds("s", "a", ["alpha estupido"], language="es"),  # Spanish via its ISO code
    ]
    res = _run("bad", statistical_mode=BayesianMode(mc_samples=300))
    by_id = {r.element_id: r for r in res.interactions}
    assert by_id["e/a/0"].total_words == 0 and not by_id["e/a/0"].is_toxic and by_id["e/a/0"].groups == []
    big = by_id["e/a/2"]
    assert big.total_words == 180_001 and big.toxic_words == 90_000 and big.groups == ["alpha"]
    assert by_id["u/a/2"].groups == ["alpha"] and by_id["u/a/0"].total_words == 4
    assert by_id["s/a/0"].is_toxic and by_id["s/a/0"].language == "spanish"
    assert len(res.dead_letter) == 1
    dl = res.dead_letter[0]
    assert dl["stage"] == "toxicity" and "french" in dl["reason"] and dl["element_id"] == "f/a/0"
    assert json.loads(dl["raw"])["assistant"] == "bonjour alpha idiot"
    assert res[0].n_interactions == 7


@pytest.mark.slow
def test_input_order_does_not_change_bayesian_results():
    rng = random.Random(11)
    words = ["alpha", "beta", "stupid", "kind", "people", "idiot", "fine", "the"]
    sessions = [_ds(f"s{i}", f"bot{i % 3}", [" ".join(rng.choice(words) for _ in range(6)) for _ in range(rng.randint(1, 4))])
                for i in range(40)]
    CONVERSATIONS["fwd"] = sessions
    CONVERSATIONS["rev"] = [s.model_copy(update={"conversation": s.conversation}) for s in reversed(sessions)]
    mode = BayesianMode(mc_samples=500, rng_seed=9)
    a = _run("fwd", statistical_mode=mode, sentiment_analyzer=_LengthSentiment())
    b = _run("rev", statistical_mode=mode, sentiment_analyzer=_LengthSentiment())
    dump = lambda res: json.dumps([s.model_dump() for s in res.slices], sort_keys=True)
    assert dump(a) == dump(b)
    assert a[0].group_profiling.bayesian.summary["ASB"].ci_high > 0


class _LengthSentiment:
    """Deterministic toy analyzer (duck-typed SentimentAnalyzer): score from the text length."""

    name = "length-toy"

    def setup(self):
        pass

    def infer_batch(self, texts):
        from fair_forge_beam.components.sentiment import SentimentScore

        return [SentimentScore(score=((len(t) % 7) - 3) / 3) for t in texts]


def test_configuration_errors_fail_fast():
    with pytest.raises(ValueError):
        Toxicity(group_extractor=GROUPS, toxicity_loader=object(), sentiment_analyzer=None, clustering=False)
    with pytest.raises(ValueError):
        Toxicity(group_extractor=GROUPS, group_toxicity_threshold=1.5, sentiment_analyzer=None, clustering=False)
    with pytest.raises(ValueError):
        Toxicity(group_extractor=GROUPS, group_reference_q={"alpha": -1}, sentiment_analyzer=None, clustering=False)
    with pytest.raises(ValueError):
        Toxicity(group_extractor=GROUPS, clustering=True, sentiment_analyzer=None)  # no embedder
    with pytest.raises(ValueError):
        Toxicity(group_extractor=GROUPS, slices=("overall", "langauge"), sentiment_analyzer=None, clustering=False)


@pytest.mark.slow
def test_cluster_profiling_on_overall_with_tiny_and_normal_inputs(tmp_path):
    import pyarrow.parquet as pq

    from fair_forge_beam.components.embedder import HashingEmbedder

    CONVERSATIONS["tiny"] = [_ds("t", "a", ["alpha idiot", "beta fine", "", "hello"])]
    res = _run("tiny", embedder=HashingEmbedder(dim=16), clustering=True)
    assert res[0].clustering["status"] == "too_few"  # fewer than 5 answers: no crash (upstream crashes)
    assert res[0].cluster_profiling is not None

    rng = random.Random(3)
    topics = [["alpha", "stupid", "idiot"], ["beta", "kind", "fine"], ["weather", "sunny", "rain"]]
    CONVERSATIONS["clusters"] = [
        _ds(f"c{i}", f"bot{i % 2}", [" ".join(rng.choice(topics[i % 3]) for _ in range(8)) for _ in range(3)])
        for i in range(30)
    ]
    points = tmp_path / "points.parquet"
    res = _run("clusters", embedder=HashingEmbedder(dim=32), clustering=True, cluster_points_path=str(points),
               statistical_mode=BayesianMode(mc_samples=300))
    overall = res[0]
    assert overall.clustering["status"] == "ok" and overall.clustering["n_points"] == 90
    assert overall.cluster_profiling and all(0.0 <= v <= 1.0 for v in overall.cluster_profiling.values())
    assert all(s.cluster_profiling is None for s in res.slices if s.slice != "overall")
    assert pq.read_table(points).num_rows == 90
    assert "embedding" not in json.dumps(overall.clustering)


def test_bad_clustering_parameters_fail_before_the_pipeline():
    from fair_forge_beam.components.embedder import HashingEmbedder

    with pytest.raises(ValueError):
        Toxicity(group_extractor=GROUPS, embedder=HashingEmbedder(), clustering=True, sentiment_analyzer=None,
                 toxicity_min_cluster_size=0)


def test_an_answer_cut_before_group_detection_is_told():
    """Issue 13 item 12: an answer longer than MAX_ANALYSIS_CHARS is cut before group detection and
    sentiment; the cut is one ``answer_truncated`` data-quality warning, never silent."""
    from fair_forge_beam.metrics.toxicity import MAX_ANALYSIS_CHARS

    long_answer = "word " * (MAX_ANALYSIS_CHARS // 5) + "alpha people are stupid"
    CONVERSATIONS["cut"] = [_ds("c", "a", [long_answer, "alpha people are stupid"])]
    res = _run("cut")
    warnings = [q for q in res.quality if q["kind"] == "answer_truncated"]
    assert [q["key"] for q in warnings] == ["c/a"]  # the session's one warning (fix28w), was keyed by the answer
    assert warnings[0]["message"].startswith("1 interaction of this session: interaction c/a/0: ")
    assert f"{len(long_answer):,} characters" in warnings[0]["message"]
    assert f"the first {MAX_ANALYSIS_CHARS:,} characters" in warnings[0]["message"]
    # the scorer that gives the verdict is named (trial33 T4: "the lexicon" was said when the classifier decided)
    assert "(the toxic verdict, the lexicon's, reads all of it)" in warnings[0]["message"], warnings[0]["message"]
    by_id = {r.element_id: r for r in res.interactions}
    assert by_id["c/a/0"].toxic_words == 1  # the lexicon still reads the whole answer
    assert by_id["c/a/0"].groups == [] and by_id["c/a/1"].groups == ["alpha"]


def test_a_cut_answers_warning_names_the_classifier_when_it_gives_the_verdict():
    """trial33 T4: with the classifier in use, the warning said "the lexicon reads all of it" (the lexicon
    decides only without a classifier); it names the scorer whose verdict reads the whole answer."""
    from fair_forge_beam.components.toxicity_classifier import ProfanityCheckClassifier
    from fair_forge_beam.metrics.toxicity import MAX_ANALYSIS_CHARS

    CONVERSATIONS["cut_clf"] = [_ds("k", "a", ["word " * (MAX_ANALYSIS_CHARS // 5) + "fine"])]
    res = _run("cut_clf", toxicity_classifier=ProfanityCheckClassifier())
    (warning,) = [q for q in res.quality if q["kind"] == "answer_truncated"]
    assert "(the toxic verdict, the classifier's, reads all of it)" in warning["message"], warning["message"]


@pytest.mark.slow
def test_the_scorer_gets_batches_of_a_fixed_size(monkeypatch):
    """Toxicity's scorer is called with SCORE_BATCH answers at a time (fewer only at a bundle's
    end): its classifier, group extractor and sentiment analyser pay a fixed cost per call, and
    BatchElements' adaptive sizing (64 up to 256) averaged 232 answers on the bench's data."""
    from fair_forge_beam.metrics import toxicity

    sizes = []
    score = toxicity._ScoreToxicity.process
    monkeypatch.setattr(toxicity._ScoreToxicity, "process", lambda self, batch: (sizes.append(len(batch)),
                                                                                  score(self, batch))[1])
    n = toxicity.SCORE_BATCH * 2 + 5
    CONVERSATIONS["fixed"] = [_ds(f"s{i}", f"bot-{i % 3}", [f"answer {i} {w}" for w in ("alpha", "fine", "stupid")])
                              for i in range(n // 3 + 1)]
    res = _run("fixed")
    assert len(res.interactions) == 3 * len(CONVERSATIONS["fixed"])
    assert toxicity.SCORE_BATCH >= 2048
    assert Toxicity(group_extractor=GROUPS, clustering=False, sentiment_analyzer=None).batch_size == toxicity.SCORE_BATCH
    assert sorted(sizes, reverse=True)[:2] == [toxicity.SCORE_BATCH] * 2 and sum(sizes) == len(res.interactions)
    assert sum(s < toxicity.SCORE_BATCH for s in sizes) <= 1  # one bundle in memory: one short batch at its end


def test_a_scorer_batch_of_long_answers_holds_a_bounded_text(monkeypatch):
    """Fixed batches of SCORE_BATCH answers would hold 2,048 answers of up to --max-record-bytes each
    (2 GB for answers of 1 MB): an interaction counts for one more per BATCH_TEXT_UNIT characters of
    its texts (engine.batch_weight), so a batch of long answers closes early; short ones still make
    full batches, and every answer is scored once whatever the batches."""
    from fair_forge_beam import engine
    from fair_forge_beam.metrics import toxicity

    monkeypatch.setattr(toxicity, "SCORE_BATCH", 64)
    texts = []
    score = toxicity._ScoreToxicity.process
    monkeypatch.setattr(toxicity._ScoreToxicity, "process", lambda self, batch: (
        texts.append(sum(len(x.assistant) for x in batch)), score(self, batch))[1])
    unit = engine.BATCH_TEXT_UNIT
    from types import SimpleNamespace as Ix

    assert engine.batch_weight(Ix(assistant="x", query="q", context="")) == 1
    long_answer = "word " * (unit * 4 // 5)  # just under 4 units of text: counts for 4 interactions
    assert engine.batch_weight(Ix(assistant=long_answer, query="q", context="")) == 4
    CONVERSATIONS["long"] = [_ds(f"l{i}", "bot", [long_answer, "fine"]) for i in range(40)]
    res = _run("long", batch_size=64)
    assert len(res.interactions) == 80
    assert max(texts) <= 64 * unit, (max(texts), texts)  # at most a batch's worth of units of text
    assert len(texts) >= 4, texts  # 40 x 4 + 40 units = 200 over batches of 64 (by count alone: 2 batches)
