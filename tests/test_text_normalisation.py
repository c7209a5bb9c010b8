"""Issue 13 item 10: one normaliser/tokeniser before every lexicon (NRC for Humanity, HurtLex
for Toxicity). On main "I don't know." scored trust 1 ("don" is an NRC trust word), and
full-width letters, decomposed accents, zero-width characters and soft hyphens hid words."""
from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fair_forge_beam.components.emotion_lexicon import EMOTIONS, DictEmotionLexicon, NRCLexPackageLexicon
from fair_forge_beam.components.text import normalize_text, tokenize
from fair_forge_beam.components.toxicity_lexicon import DictToxicityLoader, ToxicLexiconMatcher
from fair_forge_beam.components.toxicity_lexicon import tokenize as hurtlex_tokenize
from fair_forge_beam.metrics.humanity import emotion_counts
from fair_forge_beam.metrics.humanity import tokenize as humanity_tokenize

TRUST = EMOTIONS.index("trust")


def test_contractions_stay_words():
    assert tokenize("I don't know.") == ["i", "don't", "know"]
    assert tokenize("I don\u2019t know, she\u02bcs here") == ["i", "don't", "know", "she's", "here"]
    assert tokenize("'quoted' rock'n'roll") == ["quoted", "rock'n'roll"]


def test_i_dont_know_has_no_trust():
    table = NRCLexPackageLexicon().table("english")
    assert table.get("don") is not None and TRUST in table["don"]  # the lexicon entry that fooled main
    for text in ("I don't know.", "I don\u2019t know."):
        assert emotion_counts(text, table, "english") == (0,) * len(EMOTIONS)


@pytest.mark.parametrize(
    "variant",
    ["\uff28\uff21\uff30\uff30\uff39",  # full-width HAPPY
     "ha\u200bppy", "hap\u00adpy", "h\u200da\u2060ppy\ufeff", "hap\u200cpy"],
)
def test_hidden_variants_of_a_word_are_the_word(variant):
    table = NRCLexPackageLexicon().table("english")
    assert emotion_counts(variant, table, "english") == emotion_counts("happy", table, "english") != (0,) * 8
    m = ToxicLexiconMatcher(DictToxicityLoader({"english": {"happy": "test"}}))
    assert m.match(f"so {variant} today").toxic_tokens == 1


def test_decomposed_accents_compose_for_both_lexicons():
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    assert unicodedata.normalize("NFD", composed) == decomposed
    lex = DictEmotionLexicon({"french": {decomposed: ["joy"]}})  # the entry itself decomposed
    for text in (composed, decomposed):
        assert emotion_counts(f"un {text}", lex.table("french"), "french")[EMOTIONS.index("joy")] == 1
    m = ToxicLexiconMatcher(DictToxicityLoader({"spanish": {composed: "x"}}))
    assert m.match(f"un {decomposed} malo", "spanish").toxic_tokens == 1
    assert m.match(f"un \uff43\uff41\uff46\uff45\u0301", "spanish").toxic_tokens == 1  # full-width + combining


def test_hurtlex_contraction_and_elision():
    m = ToxicLexiconMatcher()
    assert m.match("I can't", "english").toxic_tokens == 0  # "can" is a HurtLex lemma
    assert m.match("you id\u200biot", "english").matched[0][0] == "idiot"
    it = m.match("l'idiota", "italian")  # elision: the apostrophe separates words in Italian
    assert (it.tokens, it.toxic_tokens) == (2, 1)


@given(st.text(max_size=40))
def test_one_tokeniser_for_both_lexicons(text):
    assert humanity_tokenize(text) == hurtlex_tokenize(text) == tokenize(text)
    assert humanity_tokenize(text, "italian") == hurtlex_tokenize(text, "italian")
    assert tokenize(text) == tokenize(normalize_text(text))  # idempotent


@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=40))
def test_no_invisible_character_left_in_tokens(text):
    for tok in tokenize(text):
        assert not re.search("[\u00ad\u200b-\u200f\u2060-\u2064\ufeff]", tok)
        assert tok == tok.lower() or tok.lower() != tok.lower().lower()


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=60)
       | st.text(alphabet=st.sampled_from("aB '’\u200bÉe\u0301ﬁＨ\u00ad.,!\t\n"), max_size=30))
def test_ascii_fast_path_is_the_full_normalisation(text):
    """ASCII text skips NFKC and the format-character tables (nothing in them is ASCII): the
    result is the full pipeline's, for ASCII and mixed text alike."""
    full = unicodedata.normalize("NFKC", text.translate(_FULL_TABLE)).translate(_FULL_TABLE).lower()
    assert normalize_text(text) == full


def _full_table():
    from fair_forge_beam.components import text as text_mod

    return text_mod._TRANSLATE


_FULL_TABLE = _full_table()


def _regex_tokens(text, language=None):
    """The regex path of :func:`tokenize` (what the ASCII fast path must equal)."""
    from fair_forge_beam.components import text as t

    norm = normalize_text(text)
    return (t._WORD_ELISION if language in t.ELISION_LANGUAGES else t._WORD).findall(norm) if norm else []


@pytest.mark.parametrize("language", [None, "english", "italian", "french", "spanish"])
@given(text=st.text(st.characters(max_codepoint=127), max_size=60))
def test_ascii_fast_path_equals_the_regexes(language, text):
    """Every ASCII character (apostrophes, digits, ``_``, control characters) between words."""
    assert tokenize(text, language) == _regex_tokens(text, language)


def test_ascii_fast_path_on_every_shipped_text(shared_dir):
    """The shipped hh-rlhf slice and the HolisticBias/ToxiGen texts: the tokens are the regexes'
    (skipped without ../shared, as every test that reads the shared data)."""
    import json

    texts = []
    for path in sorted((shared_dir / "data").rglob("*.jsonl"))[:40]:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                texts.extend(v for v in (rec.values() if isinstance(rec, dict) else []) if isinstance(v, str))
                for b in rec.get("conversation", []) if isinstance(rec, dict) else []:
                    texts.extend(v for v in b.values() if isinstance(v, str)) if isinstance(b, dict) else None
    ascii_texts = [t for t in texts if t.isascii()]
    assert len(ascii_texts) > 2000, len(ascii_texts)
    for language in ("english", "italian"):
        assert [tokenize(t, language) for t in ascii_texts] == [_regex_tokens(t, language) for t in ascii_texts]
