"""The toxicity scorer's fast paths give, bit for bit, what their references give, on real data.

References: the plain left-to-right scan (the previous implementation of
:meth:`ToxicLexiconMatcher.match`) for the HurtLex match, the regular expressions for the
shared tokeniser's and the keyword extractor's ASCII word splitting. The texts: every
answer, query and sentence shipped under the shared data folder (hh-rlhf, ToxiGen, CrowS-Pairs,
the Fair-Forge examples), the package's example data, hostile edge cases, and a synthetic file
made by ``benchmarks/bench_engine.py`` (the benchmark's generator, 3,000 interactions).
"""
from __future__ import annotations

import csv
import gzip
import importlib.resources
import importlib.util
import json
from functools import lru_cache
from pathlib import Path

import pytest

from fair_forge_beam.components.toxicity_lexicon import HurtLexLoader, ToxicLexiconMatcher, tokenize

ROOT = Path(__file__).resolve().parents[1]

EDGE = [
    "", " ", "ok", "I don't know.", "l'idiota e' un cretino", "ＨＡＴＥ you, ﬁne", "h\u200bate and hat\u00ade",
    "You’re a half-wit and a gag reel", "BLACK people! black-legger?", "😀 great 😡 awful idiot", "x" * 3000,
    "stupid " * 400, "Muslim people are terrible, I hate them.", "You are a worthless idiot.", "no\tnot\nnever good",
]


def _strings(obj, keys, out):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in keys and isinstance(v, str):
                out.append(v)
            else:
                _strings(v, keys, out)
    elif isinstance(obj, list):
        for v in obj:
            _strings(v, keys, out)


def _synthetic(n: int) -> list[str]:
    spec = importlib.util.spec_from_file_location("_bench_engine_for_tests", ROOT / "benchmarks" / "bench_engine.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/s.jsonl"
        mod.write_sessions(path, n, seed=0)
        out = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                for t in json.loads(line)["conversation"]:
                    out += [t["assistant"], t["query"]]
    return out


@lru_cache(maxsize=1)
def corpus(shared: str) -> tuple[str, ...]:
    """Every shipped text (answers, queries, sentences), deduplicated, in a fixed order."""
    shared = Path(shared)
    texts: list[str] = list(EDGE)
    with gzip.open(shared / "data/hh_rlhf/harmless-base_test.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            for side in ("chosen", "rejected"):
                for part in rec[side].split("\n\nAssistant:")[1:]:
                    texts.append(part.split("\n\nHuman:")[0].strip())
    with open(shared / "data/toxigen/seed_sentences.jsonl", encoding="utf-8") as f:
        texts += [json.loads(line)["text"] for line in f if line.strip()]
    for p in sorted((shared / "data/toxigen/demonstrations").rglob("*.txt")):
        texts += [x.strip("- \n") for x in p.read_text(encoding="utf-8").splitlines() if x.strip()]
    with open(shared / "data/crows_pairs/crows_pairs_anonymized.csv", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            texts += [r["sent_more"], r["sent_less"]]
    keys = {"assistant", "ground_truth_assistant", "query"}
    for p in sorted((shared / "data/fair_forge_examples").glob("*.json")):
        _strings(json.loads(p.read_text(encoding="utf-8")), keys, texts)
    pkg = importlib.resources.files("fair_forge_beam").joinpath("data", "examples")
    _strings(json.loads(pkg.joinpath("fair_forge_examples.json").read_text(encoding="utf-8")), keys, texts)
    for line in pkg.joinpath("hh_rlhf_harmless_test_slice.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            _strings(json.loads(line), keys, texts)
    texts += _synthetic(3000)
    return tuple(dict.fromkeys(texts))


@pytest.fixture
def texts(shared_dir) -> tuple[str, ...]:
    t = corpus(str(shared_dir))
    assert len(t) > 15_000  # the corpus really was read
    return t


# ------------------------------------------------------------------ the HurtLex match


def _reference_match(index, toks):
    """The previous implementation's scan: every position, longest lemma first, no overlap."""
    n, i, covered, matched, categories = len(toks), 0, 0, [], {}
    while i < n:
        step = 1
        for length in index.lengths.get(toks[i], ()):
            if i + length > n:
                continue
            hit = index.table.get(tuple(toks[i:i + length]))
            if hit is not None:
                for c in hit[1]:
                    matched.append((hit[0], c))
                    categories[c] = categories.get(c, 0) + 1
                covered, step = covered + length, length
                break
        i += step
    return n, covered, matched, categories


@pytest.mark.slow
@pytest.mark.parametrize("level", ["inclusive", "conservative"])
def test_lexicon_match_equals_the_plain_scan(texts, level):
    m = ToxicLexiconMatcher(HurtLexLoader(level=level))
    langs = ("english", "spanish", "italian", "portuguese")
    multi = 0
    for lang in langs:
        index = m._index(lang)
        for t in texts:
            got = m.match(t, lang)
            ref = _reference_match(index, tokenize(t, lang))
            assert (got.tokens, got.toxic_tokens, got.matched, got.categories) == ref, (lang, t[:80])
            assert list(got.categories) == list(ref[3])  # insertion order too
            multi += any(" " in lemma or "-" in lemma for lemma, _ in got.matched)
    assert multi > 0  # multi-token lemmas were exercised


# ------------------------------------------------------------------ ASCII word splitting


def test_ascii_words_and_the_tokeniser_equal_the_regular_expressions(texts):
    """The ASCII fast paths of :mod:`fair_forge_beam.components.text`: ``ascii_words`` is the
    ``\\w+`` regex of the lower-cased text, and ``tokenize`` gives its regexes' words in every
    language (contractions kept outside the elision languages)."""
    import re

    from fair_forge_beam.components.text import ELISION_LANGUAGES, _WORD, _WORD_ELISION, ascii_words

    word = re.compile(r"\w+")
    langs = ("english", "spanish", "italian", "portuguese", "french")
    n_ascii = 0
    for t in texts + tuple("".join(chr(i) for i in range(k, 128)) for k in range(0, 128, 7)):
        if not t.isascii():
            continue
        n_ascii += 1
        assert ascii_words(t) == word.findall(t.lower())
        for lang in langs:
            ref = (_WORD_ELISION if lang in ELISION_LANGUAGES else _WORD).findall(t.lower())
            assert tokenize(t, lang) == ref, (lang, t[:80])
    assert n_ascii > 10_000


def test_keyword_groups_equal_the_regex_tokenisation(texts, monkeypatch):
    import fair_forge_beam.components.group_extractor as ge

    ext = ge.KeywordGroupExtractor(ge.default_group_keywords())
    fast = ext.detect_batch(list(texts))
    monkeypatch.setattr(ge, "ascii_words", lambda t: ge._WORD_RE.findall(t.lower()))  # the previous tokenisation
    assert ext.detect_batch(list(texts)) == fast
    assert sum(any(d.present for d in r.values()) for r in fast) > 1000
