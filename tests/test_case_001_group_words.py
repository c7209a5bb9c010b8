"""case-001: a group mention is not itself toxicity.

HurtLex lists ordinary group/person words ("people", "black", "asian", "gay", ...). The default
``HurtLexLoader(exclude_neutral_group_terms=True)`` drops the reviewed stop list
``NEUTRAL_GROUP_TERMS`` so these answers have no toxic match (K_i = 0 for their groups), while a
real insult still matches. Effect on ToxiGen: see the ``toxicity_lexicon`` module docstring."""
from __future__ import annotations

import pytest

from fair_forge_beam.components.toxicity_lexicon import HurtLexLoader, ToxicLexiconMatcher

CASE_ANSWERS = [
    "Black people are wonderful neighbours.",
    "Asian people built this community centre together.",
    "Gay couples adopted two kids last year.",
]
OTHER_GROUP_WORDS = "people black asian white gay jew father queen boss baby".split()


@pytest.fixture(scope="module", params=["inclusive", "conservative"])
def matcher(request):
    return ToxicLexiconMatcher(HurtLexLoader(level=request.param))


@pytest.mark.parametrize("answer", CASE_ANSWERS)
def test_case_001_group_mentions_not_toxic(matcher, answer):
    res = matcher.match(answer, "english")
    assert res.matched == [] and res.toxic_tokens == 0 and not res.is_toxic(0.0)


def test_case_001_listed_group_words_not_toxic(matcher):
    for word in OTHER_GROUP_WORDS:
        assert not matcher.match(f"the {word} arrived", "english").matched, word


def test_case_001_insult_still_toxic(matcher):
    res = matcher.match("those idiots should be silenced", "english")
    assert res.toxic_tokens == 1 and res.is_toxic(0.0)
    assert {lemma for lemma, _ in res.matched} == {"idiots"}


def test_case_001_without_stop_list_the_bug_is_back():
    raw = ToxicLexiconMatcher(HurtLexLoader(level="inclusive", exclude_neutral_group_terms=False))
    assert all(raw.match(a, "english").is_toxic(0.0) for a in CASE_ANSWERS)
