"""HurtLex loader and toxic-lexicon matcher (spec §6.1, §8.3, §14, §17 item 8, §19)."""
from __future__ import annotations

import collections
import pickle

import pytest

from fair_forge_beam.components.toxicity_lexicon import (
    HURTLEX_FILES,
    NEUTRAL_GROUP_TERMS,
    DictToxicityLoader,
    HurtLexLoader,
    LexiconMatch,
    ToxicEntry,
    ToxicityLoader,
    ToxicLexiconMatcher,
    tokenize,
    toxigen_match_rates,
)

# spec §14 / shared data README: rows per language (header excluded)
SPEC_ROWS = {"english": 8228, "spanish": 5006, "italian": 6940, "portuguese": 3901}
SPEC_EN_CATEGORIES = {
    "cds": 2204, "an": 996, "dmc": 715, "re": 619, "svp": 527, "qas": 518, "ddp": 491, "asm": 426,
    "ps": 371, "om": 361, "pr": 276, "pa": 192, "or": 177, "asf": 144, "is": 124, "ddf": 63, "rci": 24,
}


@pytest.fixture(scope="module")
def full_inclusive():
    return HurtLexLoader(level="inclusive", exclude_neutral_group_terms=False)


@pytest.fixture(scope="module")
def full_conservative():
    return HurtLexLoader(level="conservative", exclude_neutral_group_terms=False)


@pytest.fixture(scope="module")
def matcher_inclusive(full_inclusive):
    return ToxicLexiconMatcher(full_inclusive)


def test_row_counts_match_spec(full_inclusive, full_conservative):
    assert full_inclusive.languages == frozenset(SPEC_ROWS)
    for lang, n in SPEC_ROWS.items():
        assert len(full_inclusive.entries(lang)) == n
        n_cons = len(full_conservative.entries(lang))
        assert 0 < n_cons < n
        assert all(e.level == "conservative" for e in full_conservative.entries(lang))
    assert len(full_conservative.entries("english")) == 3360  # 8,228 − 4,868 inclusive-only rows


def test_categories_reported(full_inclusive):
    counts = collections.Counter(e.category for e in full_inclusive.entries("english"))
    assert dict(counts) == SPEC_EN_CATEGORIES
    res = ToxicLexiconMatcher(full_inclusive).match("You stupid idiot", "english")
    assert res.categories["ddp"] == 2 and res.categories["cds"] == 2
    assert ("stupid", "ddp") in res.matched and ("idiot", "cds") in res.matched
    assert res.toxic_tokens == 2 and res.tokens == 3


def test_language_names_normalised(full_inclusive):
    for alias in ("en", "EN", "English", "en-US", "eng"):
        assert len(full_inclusive.entries(alias)) == SPEC_ROWS["english"]
    assert len(full_inclusive.entries("pt_BR")) == SPEC_ROWS["portuguese"]
    assert set(HURTLEX_FILES) == set(SPEC_ROWS)


def test_multi_word_lemma_matched(matcher_inclusive):
    # EN1382 "gag reel" (qas/cds, inclusive): never matched upstream (single-token matching)
    res = matcher_inclusive.match("That was a gag reel of a meeting", "english")
    assert ("gag reel", "qas") in res.matched and ("gag reel", "cds") in res.matched
    assert res.toxic_tokens == 2 and res.tokens == 8


def test_hyphenated_lemma_matched(matcher_inclusive):
    # EN1916 "half-wit": the text is tokenised into "half", "wit" and so is the lemma
    res = matcher_inclusive.match("What a Half-Wit.", "en")
    assert {c for lemma, c in res.matched if lemma == "half-wit"} == {"asf", "asm", "cds", "ddp", "ps"}
    assert res.toxic_tokens == 2 and res.tokens == 4  # what, a, half, wit


def test_longest_match_first_without_overlap():
    loader = DictToxicityLoader({"english": {"dumb": "a", "dumb ass": "b", "ass": "c", "ass hat": "d"}})
    res = ToxicLexiconMatcher(loader).match("dumb ass hat", "english")
    # leftmost-longest: "dumb ass" wins at position 0, so "ass hat" (overlapping) is not matched
    assert res.matched == [("dumb ass", "b")]
    assert res.toxic_tokens == 2 and res.tokens == 3
    res = ToxicLexiconMatcher(loader).match("dumb dumb ass", "english")
    assert res.matched == [("dumb", "a"), ("dumb ass", "b")] and res.toxic_tokens == 3


def test_level_filter():
    incl = ToxicLexiconMatcher(HurtLexLoader(level="inclusive", languages=["english"]))
    cons = ToxicLexiconMatcher(HurtLexLoader(level="conservative", languages=["english"]))
    # "gag reel" is inclusive-only; "shot caller" (multi-word) and "idiot" are conservative
    assert incl.match("a gag reel", "english").matched
    assert not cons.match("a gag reel", "english").matched
    assert cons.match("the shot caller", "english").toxic_tokens == 2
    assert cons.match("idiot", "english").toxic_tokens == 1
    with pytest.raises(ValueError):
        HurtLexLoader(level="strict")


def test_unknown_language_returns_none(matcher_inclusive):
    assert matcher_inclusive.match("dummkopf", "german") is None
    assert matcher_inclusive.match("anything", "klingon") is None
    assert matcher_inclusive.match("idiot", None).toxic_tokens == 1  # None -> english, as upstream
    with pytest.raises(ValueError):
        HurtLexLoader(languages=["german"])


def test_other_languages_match():
    m = ToxicLexiconMatcher(HurtLexLoader())
    assert m.match("eres un idiota", "es").toxic_tokens == 1
    assert m.match("sei un idiota", "it").toxic_tokens == 1
    assert m.match("você é um idiota", "pt").toxic_tokens == 1


def test_matcher_pickles_without_tables_and_reloads():
    m = ToxicLexiconMatcher(HurtLexLoader(languages=["english"]))
    before = m.match("you half-wit idiot", "english")
    assert m._indexes and m.loader._tables  # loaded
    blob = pickle.dumps(m)
    assert len(blob) < 2000  # no lexicon in the pickle
    m2 = pickle.loads(blob)
    assert m2._indexes is None and m2.loader._tables is None
    assert m2.match("you half-wit idiot", "english") == before
    assert m.name == m2.name and "CC BY-NC-SA 4.0" in m2.licence


def test_spec_19_reference_ratio():
    class ThreeWords(ToxicityLoader):
        name, licence = "spec §19", "test"

        def load(self):
            return {"english": [ToxicEntry(w, "test") for w in ("hate", "stupid", "idiot")]}

    res = ToxicLexiconMatcher(ThreeWords()).match("I hate stupid people and love coding", "english")
    assert isinstance(res, LexiconMatch)
    assert (res.tokens, res.toxic_tokens) == (7, 2)
    assert res.ratio == pytest.approx(2 / 7) == pytest.approx(0.2857, abs=1e-4)
    assert res.is_toxic(0.0) and not res.is_toxic(0.3)
    empty = ToxicLexiconMatcher(ThreeWords()).match("", "english")
    assert empty.ratio == 0.0 and not empty.is_toxic()


def test_tokenizer_unicode():
    assert tokenize("Hello, WORLD! Ñandú-çà") == ["hello", "world", "ñandú", "çà"]


def test_emoji_lemmas_dropped_silently(full_inclusive):
    m = ToxicLexiconMatcher(full_inclusive)
    res = m.match("🐶 🐷", "english")
    assert res.tokens == 0 and res.matched == []


def test_stop_list_terms_exist_in_hurtlex():
    for lang, terms in NEUTRAL_GROUP_TERMS.items():
        keys = {tuple(tokenize(r["lemma"])) for r in HurtLexLoader.read_rows(lang)}
        missing = sorted(t for t in terms if tuple(tokenize(t)) not in keys)
        assert not missing, (lang, missing)


def test_stop_list_removes_only_whole_lemmas():
    m = ToxicLexiconMatcher(HurtLexLoader(languages=["english"]))
    assert not m.match("black", "english").matched
    assert m.match("a black-legger", "english").toxic_tokens == 2
    assert m.match("gays", "english").matched  # deliberately not on the stop list


def test_toxigen_table_matches_docstring(shared_dir):
    rates = toxigen_match_rates(str(shared_dir / "data" / "toxigen" / "seed_sentences.jsonl"))
    got = {(lvl, exc): (round(100 * n, 1), round(100 * h, 1)) for lvl, exc, n, h in rates}
    assert got == {
        ("inclusive", False): (74.4, 77.2),
        # 54.8 (was 55.1): "can’t" is one word now, no longer the HurtLex lemma "can" (issue 13 item 10)
        ("inclusive", True): (42.1, 54.8),
        ("conservative", False): (42.4, 58.4),
        ("conservative", True): (19.9, 34.1),
    }


def test_files_are_read_per_language_on_first_use(monkeypatch):
    """An English-only run reads only the English file: ``languages`` reads none, a match reads its
    language's file once per process (the shared table), and the entries equal a full ``load()``."""
    read = []
    orig = HurtLexLoader.read_rows

    def counting(language):
        read.append(language)
        return orig(language)

    monkeypatch.setattr(HurtLexLoader, "read_rows", staticmethod(counting))
    loader = HurtLexLoader(level="conservative", exclude_neutral_group_terms=True)  # a key no other test loads
    m = ToxicLexiconMatcher(loader)
    assert m.languages == frozenset(SPEC_ROWS) and read == []
    assert m.match("you idiot", "english").toxic_tokens == 1
    assert m.match("you moron", "en").tokens == 2
    assert read == ["english"]
    assert ToxicLexiconMatcher(HurtLexLoader(level="conservative")).match("idiota", "es") is not None
    assert read == ["english", "spanish"]  # the English table is shared, Spanish read on first use
    full = HurtLexLoader(level="conservative").load()
    assert {lang: loader.entries(lang) for lang in SPEC_ROWS} == full


def test_a_subclass_overriding_load_keeps_its_load():
    class OneWord(HurtLexLoader):
        def load(self):
            return {"en": [ToxicEntry("zork", "x")]}

    m = ToxicLexiconMatcher(OneWord())
    assert m.languages == frozenset({"english"})
    assert m.match("zork idiot", "english").toxic_tokens == 1 and m.match("hola", "es") is None
