"""Humanity (spec §6.5, §19): per-interaction formulas, the Beam DoFn path, aggregates,
dead letter for languages without a lexicon, and the upstream-style ``Humanity.run`` API.

Expected values come from an independent reference implementation written here from the
spec text (``_ref_*``), never from the library's own helpers.
"""
from __future__ import annotations

import importlib.resources
import json
import math
import re
from functools import partial
from typing import Iterator, Optional

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.util import assert_that, equal_to, is_empty
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import helpers
from fair_forge_beam.components.emotion_lexicon import (
    EMOTIONS,
    DictEmotionLexicon,
    NRCCsvLexicon,
    NRCLexPackageLexicon,
)
from fair_forge_beam.io.elements import Interaction
from fair_forge_beam.io.retriever import Retriever
from fair_forge_beam.metrics.humanity import (
    Humanity,
    emotion_counts,
    emotion_distribution,
    emotional_entropy,
    spearman_alignment,
    tokenize,
)
from fair_forge_beam.schemas.common import Batch, Dataset, IterationLevel, SessionMetadata, StreamedBatch
from fair_forge_beam.schemas.humanity import HumanityMetric, HumanitySessionMetric, HumanitySliceMetric
from fair_forge_beam.statistical import BayesianMode, FrequentistMode

# Plutchik / NRC order as written in spec §6.5 (capitalised CSV headers, lower-case fields)
SPEC_EMOTIONS = ("anger", "anticipation", "disgust", "fear", "joy", "sadness", "surprise", "trust")
TOL = 1e-12

# ----------------------------------------------------------------------------- reference
LEX_EN = {
    "happy": ["joy", "trust", "anticipation"],
    "glad": ["joy"],
    "angry": ["anger", "disgust"],
    "afraid": ["fear"],
    "sad": ["sadness"],
    "wow": ["surprise"],
    "soon": ["anticipation"],
    "friend": ["trust", "joy"],
    "hate": ["anger", "disgust", "fear", "sadness"],
    "everything": list(SPEC_EMOTIONS),
}
LEX_FR = {"heureux": ["joy"], "triste": ["sadness"], "peur": ["fear"]}
LEXICON = {"english": LEX_EN, "french": LEX_FR}


def _ref_tokens(text: Optional[str]) -> list[str]:
    return re.findall(r"\b\w+\b", text.lower()) if text else []


def _ref_counts(text: Optional[str], lex: dict) -> list[int]:
    c = dict.fromkeys(SPEC_EMOTIONS, 0)
    for tok in _ref_tokens(text):
        for e in lex.get(tok, []):
            c[e] += 1
    return [c[e] for e in SPEC_EMOTIONS]


def _ref_dist(counts) -> list[float]:
    total = sum(counts)
    return [c / total for c in counts] if total else [0.0] * len(counts)


def _ref_entropy(dist) -> float:
    return -sum(p * math.log2(p) for p in dist if p > 0)


def _ref_spearman(gt_dist, dist) -> float:
    if np.std(gt_dist) == 0 or np.std(dist) == 0:
        return 0.0
    return round(float(stats.spearmanr(gt_dist, dist).statistic), 3)


def _ref_resolve_weights(ws):
    """Spec §3.4, by position."""
    n = len(ws)
    given_ = [w for w in ws if w is not None]
    if not given_:
        return [1 / n] * n
    tot = sum(given_)
    if len(given_) == n:
        return list(ws) if abs(tot - 1) <= 1e-6 else [1 / n] * n
    if tot >= 1:
        return [1 / n] * n
    share = (1 - tot) / (n - len(given_))
    return [w if w is not None else share for w in ws]


def _ref_interaction(x: Interaction, lex: dict) -> dict:
    counts = _ref_counts(x.assistant, lex)
    dist = _ref_dist(counts)
    rec = {
        "session_id": x.session_id,
        "assistant_id": x.assistant_id,
        "qa_id": x.qa_id,
        "element_id": x.element_id,
        "turn_index": x.turn_index,
        "humanity_assistant_emotional_entropy": _ref_entropy(dist),
        "humanity_ground_truth_spearman": _ref_spearman(_ref_dist(_ref_counts(x.ground_truth_assistant, lex)), dist),
    }
    for e, p in zip(SPEC_EMOTIONS, dist):
        rec[f"humanity_assistant_{e}"] = p
    rec["_counts"] = counts
    # a reference with an emotion profile (counts not all equal): else rho is undefined (issue 28)
    rec["_has_ref"] = len(set(_ref_counts(x.ground_truth_assistant, lex))) > 1
    return rec


def _ref_all(interactions, lexicon=LEXICON):
    """Reference per-interaction, per-session and per-slice (frequentist) results."""
    per = {x.element_id: _ref_interaction(x, lexicon[x.language]) for x in interactions}
    sessions: dict = {}
    for x in sorted(interactions, key=lambda x: (x.session_id, x.assistant_id, x.turn_index)):
        sessions.setdefault((x.session_id, x.assistant_id), []).append(x)
    sess = {}
    for key, xs in sessions.items():
        w = _ref_resolve_weights([x.weight for x in xs])
        ent = sum(wi * per[x.element_id]["humanity_assistant_emotional_entropy"] for wi, x in zip(w, xs))
        # Spearman: the interactions with a reference only, their weights resolved among them
        rs = [x for x in xs if per[x.element_id]["_has_ref"]]
        wr = _ref_resolve_weights([x.weight for x in rs]) if rs else []
        spe = sum(wi * per[x.element_id]["humanity_ground_truth_spearman"] for wi, x in zip(wr, rs)) if rs else None
        sess[key] = {
            "n": len(xs),
            "n_ref": len(rs),
            "entropy": ent,
            "spearman": spe,
            "language": xs[0].language,
            "scores": [
                (per[x.element_id]["humanity_assistant_emotional_entropy"], per[x.element_id]["humanity_ground_truth_spearman"])
                for x in xs
            ],
            "has_ref": [per[x.element_id]["_has_ref"] for x in xs],
        }
    slices: dict = {}
    for key, s in sess.items():
        xs = sessions[key]
        for sk in ("overall", f"assistant_id={key[1]}", f"language={s['language']}"):
            d = slices.setdefault(sk, {"sessions": [], "counts": [0] * 8})
            d["sessions"].append(key)
            for x in xs:
                d["counts"] = [a + b for a, b in zip(d["counts"], per[x.element_id]["_counts"])]
    for sk, d in slices.items():
        n = sum(sess[k]["n"] for k in d["sessions"])
        d["n_interactions"] = n
        d["n_sessions"] = len(d["sessions"])
        d["entropy"] = sum(sess[k]["n"] * sess[k]["entropy"] for k in d["sessions"]) / n
        n_ref = sum(sess[k]["n_ref"] for k in d["sessions"])
        d["n_with_reference"] = n_ref
        d["spearman"] = (sum(sess[k]["n_ref"] * sess[k]["spearman"] for k in d["sessions"] if sess[k]["n_ref"]) / n_ref
                         if n_ref else None)
    return per, sess, slices


ix = partial(helpers.ix, query="how do you feel?", gt="", qa_id_format="q{turn}", agentic={}, gta={}, logprobs={})


DATA = [
    # S1 / A: weights (0.6, -, -) -> (0.6, 0.2, 0.2) (spec §19)
    ix("S1", "A", 0, "I am happy and glad, wow!", gt="So sad and afraid, what a friend.", weight=0.6),
    ix("S1", "A", 1, "Angry, angry... I HATE it.", gt="hate it, angry; soon"),
    ix("S1", "A", 2, "nothing in the lexicon here", gt="happy"),
    # S2 / A: no weights; every emotion once -> uniform -> 3 bits; spearman 0 (zero variance)
    ix("S2", "A", 0, "Everything!", gt="everything"),
    ix("S2", "A", 1, "friend, soon. glad but sad", gt=None),
    # S3 / B: a single interaction
    ix("S3", "B", 0, "afraid of the sad hate", gt="happy friend wow"),
    # S4 / B in French (a second lexicon language)
    ix("S4", "B", 0, "heureux heureux triste", gt="peur", language="french"),
    ix("S4", "B", 1, "peur et triste", gt="heureux triste", language="french"),
    # S5 / C: all weights given, sum 1.1 -> equal weights + a data-quality warning (spec §19)
    ix("S5", "C", 0, "happy happy wow", gt="angry sad", weight=0.5),
    ix("S5", "C", 1, "angry", gt="glad", weight=0.6),
]


def _dict_lexicon():
    return DictEmotionLexicon(LEXICON, name="test-lexicon", licence="test-licence")


# ----------------------------------------------------------------------------- matchers
def _close(a, b, tol=TOL):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


def _match_interactions(expected: dict):
    def _check(actual):
        got = {r["element_id"]: r for r in actual}
        assert sorted(got) == sorted(expected), (sorted(got), sorted(expected))
        for eid, exp in expected.items():
            r = got[eid]
            assert r["metric"] == "humanity" and r["level"] == "interaction"
            for k, v in exp.items():
                if k in ("_counts", "_has_ref"):
                    continue
                if isinstance(v, float):
                    assert _close(r[k], v), (eid, k, r[k], v)
                else:
                    assert r[k] == v, (eid, k, r[k], v)
            # spearman is rounded to 3 decimals exactly
            assert r["humanity_ground_truth_spearman"] == exp["humanity_ground_truth_spearman"], (eid, r)
            # distribution values in [0, 1], summing to 1 or all 0
            dist = [r[f"humanity_assistant_{e}"] for e in SPEC_EMOTIONS]
            assert all(0.0 <= p <= 1.0 for p in dist)
            assert math.isclose(sum(dist), 1.0, abs_tol=1e-12) or all(p == 0 for p in dist)
            assert 0.0 <= r["humanity_assistant_emotional_entropy"] <= 3.0 + 1e-12
            assert -1.0 <= r["humanity_ground_truth_spearman"] <= 1.0
            HumanityMetric.model_validate(r)

    return _check


def _match_sessions_frequentist(expected: dict):
    def _check(actual):
        got = {(r["session_id"], r["assistant_id"]): r for r in actual}
        assert sorted(got) == sorted(expected)
        for key, exp in expected.items():
            r = got[key]
            HumanitySessionMetric.model_validate(r)
            assert r["level"] == "session" and r["n_interactions"] == exp["n"]
            assert r["language"] == exp["language"]
            assert _close(r["mean_entropy"]["mean"], exp["entropy"]), (key, r["mean_entropy"], exp)
            assert _close(r["mean_spearman"]["mean"], exp["spearman"]), (key, r["mean_spearman"], exp)
            assert r["n_with_reference"] == exp["n_ref"], (key, r)
            for m in ("mean_entropy", "mean_spearman"):
                assert r[m]["ci_low"] is None and r[m]["ci_high"] is None
            assert r["mean_entropy"]["n"] == exp["n"] and r["mean_spearman"]["n"] == exp["n_ref"]

    return _check


def _match_slices_frequentist(expected: dict, lexicon_name: str, licence: str):
    def _check(actual):
        got = {r["slice"]: r for r in actual}
        assert sorted(got) == sorted(expected), (sorted(got), sorted(expected))
        for key, exp in expected.items():
            r = got[key]
            HumanitySliceMetric.model_validate(r)
            assert r["mode"] == "point_estimate" and r.get("resampling") is None
            assert r["n_interactions"] == exp["n_interactions"], (key, r)
            assert r["n_sessions"] == exp["n_sessions"], (key, r)
            assert r["n_with_reference"] == exp["n_with_reference"], (key, r)
            assert _close(r["mean_entropy"]["mean"], exp["entropy"]), (key, r["mean_entropy"], exp["entropy"])
            assert _close(r["mean_spearman"]["mean"], exp["spearman"]), (key, r["mean_spearman"], exp["spearman"])
            assert r["mean_entropy"]["ci_low"] is None and r["mean_entropy"]["ci_high"] is None
            total = sum(exp["counts"])
            for e, c in zip(SPEC_EMOTIONS, exp["counts"]):
                est = r["emotion_distribution"][e]
                assert est["n"] == total
                assert _close(est["mean"], c / total), (key, e, est, c, total)
                assert est["ci_low"] is None and est["ci_high"] is None
            assert r["lexicon"] == lexicon_name and r["lexicon_licence"] == licence

    return _check


# ============================================================================ spec §6.5 formulas
def test_tokeniser_spec_example():
    toks = tokenize("Hello, World! This is a test.")
    assert toks == ["hello", "world", "this", "is", "a", "test"]
    assert len(toks) == 6
    assert toks == _ref_tokens("Hello, World! This is a test.")


@given(st.lists(st.sampled_from(list("aBc_9 ,.!?-\tÉé日本") + ["happy", "Angry", "WOW"]), max_size=30).map("".join))
def test_tokeniser_matches_regex_lowercase(text):
    # without apostrophes, invisible characters or compatibility forms: upstream's regex exactly
    assert tokenize(text) == re.findall(r"\b\w+\b", text.lower())


@given(st.lists(st.sampled_from(list("aBc_9 ,.!?'-\tÉé日本") + ["happy", "Angry", "WOW", "don't"]), max_size=30).map("".join))
def test_tokeniser_keeps_contractions(text):
    # issue 13 item 10: an apostrophe between word characters joins them into one word
    assert tokenize(text) == re.findall(r"\w+(?:'\w+)*", text.lower())


def test_emotion_set_is_the_spec_set():
    assert tuple(EMOTIONS) == SPEC_EMOTIONS


def test_duplicate_csv_entries_later_row_wins(tmp_path):
    csv_path = tmp_path / "nrc_test.csv"
    csv_path.write_text(
        "english;spanish;Anger;Anticipation;Disgust;Fear;Joy;Sadness;Surprise;Trust\n"
        "happy;feliz;0;0;0;0;1;0;0;1\n"
        "storm;tormenta;1;0;0;1;0;0;0;0\n"
        "happy;contento;1;0;0;0;0;0;1;0\n"  # later duplicate: overwrites 'happy'
        "storm;tempestad;0;0;0;0;0;0;0;0\n",  # later duplicate without emotions: 'storm' maps to nothing
        encoding="utf-8",
    )
    lex = NRCCsvLexicon(str(csv_path))
    en = lex.table("english")
    idx = {e: i for i, e in enumerate(EMOTIONS)}
    assert sorted(en["happy"]) == sorted([idx["anger"], idx["surprise"]])
    assert tuple(en.get("storm", ())) == ()
    es = lex.table("spanish")
    assert sorted(es["feliz"]) == sorted([idx["joy"], idx["trust"]])
    assert sorted(es["contento"]) == sorted([idx["anger"], idx["surprise"]])
    assert sorted(es["tormenta"]) == sorted([idx["anger"], idx["fear"]])
    # through the scorer: later row wins
    assert list(emotion_counts("Happy storm!", en)) == _ref_counts("happy", {"happy": ["anger", "surprise"]})
    assert lex.table("french") is None


def test_nrc_csv_sentiment_columns_are_no_language_and_iso_codes_find_the_lexicons_language(tmp_path):
    """trial36 T6: the real NRC release's ``Positive``/``Negative`` columns were read as languages
    (``lexicon covers: english, negative, positive, swedish``), and ``sv``, ``sv-SE``, ``swe`` found
    no Swedish table although the lexicon had one (the language table held 16 languages)."""
    csv_path = tmp_path / "nrc.csv"
    csv_path.write_text("English;swedish;Anger;Anticipation;Disgust;Fear;Joy; Negative ;POSITIVE;Sadness;Surprise;Trust\n"
                        "happy;glad;0;0;0;0;1;0;1;0;0;0\n", encoding="utf-8")
    lex = NRCCsvLexicon(str(csv_path))
    assert lex.languages == {"english", "swedish"}
    idx = {e: i for i, e in enumerate(EMOTIONS)}
    for given in ("swedish", "Swedish", "sv", "SV", "sv-SE", "sv_FI", "swe"):
        assert lex.table(given) == {"glad": (idx["joy"],)}, given
    # a header of emotions and sentiments only names no language
    only = tmp_path / "only.csv"
    only.write_text("Anger;Joy;Positive;Negative\n1;0;0;1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="names no language column"):
        NRCCsvLexicon(str(only)).load()


def test_duplicate_csv_entries_later_row_wins_in_pipeline(tmp_path, test_pipeline):
    csv_path = tmp_path / "nrc_test.csv"
    csv_path.write_text(
        "english;spanish;Anger;Anticipation;Disgust;Fear;Joy;Sadness;Surprise;Trust\n"
        "happy;feliz;0;0;0;0;1;0;0;0\n"
        "happy;contento;1;0;0;0;0;0;0;0\n",
        encoding="utf-8",
    )
    lex = NRCCsvLexicon(str(csv_path))
    with test_pipeline as p:
        res = p | beam.Create([ix("s", "a", 0, "happy")]) | Humanity(lexicon=lex)
        assert_that(
            res["interactions"] | beam.Map(lambda r: (r["humanity_assistant_anger"], r["humanity_assistant_joy"])),
            equal_to([(1.0, 0.0)]),
        )


def test_token_with_several_emotions_counts_once_per_emotion():
    table = _dict_lexicon().table("english")
    counts = emotion_counts("hate", table)
    expected = [1 if e in ("anger", "disgust", "fear", "sadness") else 0 for e in SPEC_EMOTIONS]
    assert list(counts) == expected
    # repeated tokens count once per occurrence and emotion
    assert list(emotion_counts("hate HATE", table)) == [2 * c for c in expected]
    # an emotion listed twice for one word still counts once
    dup = DictEmotionLexicon({"english": {"joyful": ["joy", "joy", "Joy"]}}).table("english")
    assert list(emotion_counts("joyful", dup)) == [1 if e == "joy" else 0 for e in SPEC_EMOTIONS]


@pytest.mark.parametrize(
    "dist,expected",
    [
        ([1 / 8] * 8, 3.0),  # spec §19: uniform over 8 -> exactly 3 bits
        ([1.0] + [0.0] * 7, 0.0),  # one-hot
        ([0.0] * 8, 0.0),  # zero
        ([0.5, 0.5] + [0.0] * 6, 1.0),  # two equal emotions
        ([0.25] * 4 + [0.0] * 4, 2.0),
    ],
)
def test_entropy_in_bits(dist, expected):
    assert emotional_entropy(dist) == expected


def test_entropy_from_text_uniform_is_exactly_three():
    table = _dict_lexicon().table("english")
    c = emotion_counts("everything", table)
    assert list(c) == [1] * 8
    assert emotion_distribution(c) == [0.125] * 8
    assert emotional_entropy(emotion_distribution(c)) == 3.0


def test_entropy_general_value():
    dist = [0.5, 0.25, 0.125, 0.125, 0, 0, 0, 0]
    assert emotional_entropy(dist) == pytest.approx(1.75, abs=1e-15)


def test_spearman_equals_scipy_on_random_vectors_with_ties():
    rng = np.random.default_rng(20240601)
    checked = 0
    for _ in range(400):
        hi = int(rng.integers(1, 5))  # small ranges -> many ties
        gt = rng.integers(0, hi + 1, size=8)
        a = rng.integers(0, hi + 1, size=8)
        gt_d, a_d = _ref_dist(gt.tolist()), _ref_dist(a.tolist())
        expected = _ref_spearman(gt_d, a_d)
        got = spearman_alignment(tuple(int(v) for v in gt), tuple(int(v) for v in a))
        assert got == expected, (gt, a, got, expected)
        if np.std(gt_d) > 0 and np.std(a_d) > 0:
            checked += 1
            # average ranks for ties: scipy on ranks computed with rankdata(method="average")
            r = np.corrcoef(stats.rankdata(gt_d), stats.rankdata(a_d))[0, 1]
            assert got == round(float(r), 3)
    assert checked > 300


def test_spearman_rounded_to_three_decimals():
    gt = (3, 0, 1, 0, 2, 0, 0, 1)
    a = (1, 2, 0, 0, 3, 1, 0, 0)
    raw = float(stats.spearmanr(_ref_dist(list(gt)), _ref_dist(list(a))).statistic)
    got = spearman_alignment(gt, a)
    assert got == round(raw, 3)
    assert got != raw  # really rounded


def test_spearman_no_lexicon_hit_is_zero():
    table = _dict_lexicon().table("english")
    assert spearman_alignment(emotion_counts("xyz abc", table), emotion_counts("nothing here", table)) == 0.0
    assert spearman_alignment(emotion_counts("happy friend", table), emotion_counts("nothing here", table)) == 0.0
    assert spearman_alignment(emotion_counts("nothing", table), emotion_counts("angry sad", table)) == 0.0


def test_spearman_zero_variance_is_zero():
    # every emotion once: zero variance although there are hits
    assert spearman_alignment((1,) * 8, (2, 0, 1, 0, 0, 3, 0, 0)) == 0.0
    assert spearman_alignment((2, 0, 1, 0, 0, 3, 0, 0), (1,) * 8) == 0.0
    table = _dict_lexicon().table("english")
    assert spearman_alignment(emotion_counts("everything", table), emotion_counts("happy", table)) == 0.0


@pytest.mark.parametrize("gt", [None, ""])
def test_empty_ground_truth_accepted(gt):
    table = _dict_lexicon().table("english")
    assert list(emotion_counts(gt, table)) == [0] * 8
    assert spearman_alignment(emotion_counts(gt, table), emotion_counts("happy angry", table)) == 0.0


@given(
    st.lists(st.sampled_from(list(LEX_EN) + ["the", "a", "ok", "Happy", "SAD", "!", ",", "hate."]), max_size=25),
    st.lists(st.sampled_from(list(LEX_EN) + ["the", "x", "Wow", "soon?"]), max_size=25),
)
def test_per_interaction_values_match_reference(words, gt_words):
    text, gt = " ".join(words), " ".join(gt_words)
    table = _dict_lexicon().table("english")
    counts = emotion_counts(text, table)
    assert list(counts) == _ref_counts(text, LEX_EN)
    dist = emotion_distribution(counts)
    assert dist == _ref_dist(_ref_counts(text, LEX_EN))
    assert all(0.0 <= p <= 1.0 for p in dist)
    assert math.isclose(sum(dist), 1.0, abs_tol=1e-12) or all(p == 0 for p in dist)
    assert emotional_entropy(dist) == pytest.approx(_ref_entropy(dist), abs=1e-12)
    assert 0.0 <= emotional_entropy(dist) <= 3.0 + 1e-12
    s = spearman_alignment(emotion_counts(gt, table), counts)
    assert s == _ref_spearman(_ref_dist(_ref_counts(gt, LEX_EN)), dist)
    assert -1.0 <= s <= 1.0


def test_default_lexicon_is_the_nrc_package_copy():
    raw = json.loads(importlib.resources.files("nrclex").joinpath("data/nrc_en.json").read_text(encoding="utf-8"))
    lex = NRCLexPackageLexicon()
    table = lex.table("english")
    assert lex.languages == frozenset({"english"})
    assert lex.table("en") is table or lex.table("en") == table  # ISO code normalised
    # entries are tuples of valid emotion indices; every word with an emotion is present
    assert all(isinstance(v, tuple) and v and all(0 <= i < 8 for i in v) for v in table.values())
    with_emotion = {w.lower(): sorted({e for e in es if e in SPEC_EMOTIONS}) for w, es in raw.items()}
    with_emotion = {w: es for w, es in with_emotion.items() if es}
    assert set(table) == set(with_emotion)
    for w in ("happy", "hate", "abandon"):
        assert sorted(EMOTIONS[i] for i in table[w]) == with_emotion[w]
    assert "NRC" in lex.name and "non-commercial" in lex.licence


# ============================================================================ the DoFn path
def test_pipeline_frequentist_interactions_sessions_slices(test_pipeline):
    per, sess, slices = _ref_all(DATA)
    # sanity of the hand-built data against spec §19 weights
    assert _ref_resolve_weights([0.6, None, None]) == pytest.approx([0.6, 0.2, 0.2])
    assert sess[("S2", "A")]["scores"][0] == (3.0, 0.0)
    lex = _dict_lexicon()
    with test_pipeline as p:
        res = p | beam.Create(DATA) | Humanity(lexicon=lex)
        assert_that(res["interactions"], _match_interactions(per), label="interactions")
        assert_that(res["sessions"], _match_sessions_frequentist(sess), label="sessions")
        assert_that(res["slices"], _match_slices_frequentist(slices, "test-lexicon", "test-licence"), label="slices")
        assert_that(res["dead_letter"], is_empty(), label="dead")
        assert_that(
            res["quality"] | beam.Map(lambda q: (q.kind, q.key)),
            equal_to([("weights", "S5/C")]),
            label="quality",
        )


def test_session_weights_0_6_none_none(test_pipeline):
    """Spec §19: weights (0.6, –, –) resolve to (0.6, 0.2, 0.2)."""
    xs = [
        ix("W", "A", 0, "everything", weight=0.6),  # entropy 3
        ix("W", "A", 1, "glad"),  # entropy 0
        ix("W", "A", 2, "angry"),  # entropy 1
    ]
    expected = 0.6 * 3.0 + 0.2 * 0.0 + 0.2 * 1.0
    with test_pipeline as p:
        res = p | beam.Create(xs) | Humanity(lexicon=_dict_lexicon(), slices=("overall",))
        assert_that(
            res["sessions"] | beam.Map(lambda r: (r["n_interactions"], round(r["mean_entropy"]["mean"], 12))),
            equal_to([(3, round(expected, 12))]),
            label="session",
        )
        # slice mean: the session contributes its mean with its interaction count
        assert_that(
            res["slices"] | beam.Map(lambda r: (r["slice"], r["n_sessions"], round(r["mean_entropy"]["mean"], 12))),
            equal_to([("overall", 1, round(expected, 12))]),
            label="slice",
        )


def test_slice_mean_without_weights_is_plain_mean_over_interactions(test_pipeline):
    xs = [
        ix("P1", "A", 0, "everything"),
        ix("P1", "A", 1, "glad"),
        ix("P1", "A", 2, "angry sad", gt="sad"),
        ix("P2", "A", 0, "happy"),
        ix("P3", "B", 0, "hate friend", gt="happy angry"),
        ix("P3", "B", 1, "wow soon"),
    ]
    per, _, _ = _ref_all(xs)
    plain_ent = sum(r["humanity_assistant_emotional_entropy"] for r in per.values()) / len(per)
    # Spearman: the plain mean over the interactions whose reference has emotion words (P1/2, P3/0)
    with_ref = [r["humanity_ground_truth_spearman"] for r in per.values() if r["_has_ref"]]
    assert len(with_ref) == 2
    plain_spe = sum(with_ref) / len(with_ref)

    def check(actual):
        (r,) = actual
        assert r["slice"] == "overall" and r["n_interactions"] == 6 and r["n_sessions"] == 3
        assert _close(r["mean_entropy"]["mean"], plain_ent), (r["mean_entropy"], plain_ent)
        assert _close(r["mean_spearman"]["mean"], plain_spe), (r["mean_spearman"], plain_spe)
        assert r["mean_entropy"]["n"] == 6 and r["mean_spearman"]["n"] == r["n_with_reference"] == 2

    with test_pipeline as p:
        res = p | beam.Create(xs) | Humanity(lexicon=_dict_lexicon(), slices=("overall",))
        assert_that(res["slices"], check)


def _bayes_checks(sess, slices, mc_samples):
    alpha = 0.025

    def check_sessions(actual):
        got = {(r["session_id"], r["assistant_id"]): r for r in actual}
        assert sorted(got) == sorted(sess)
        for key, exp in sess.items():
            r = got[key]
            HumanitySessionMetric.model_validate(r)
            for j, m in enumerate(("mean_entropy", "mean_spearman")):
                est = r[m]
                vals = [s[j] for s, ref in zip(exp["scores"], exp["has_ref"]) if ref or j == 0]
                if not vals:  # no interaction with a reference: no estimate (issue 28)
                    assert est == {"mean": None, "ci_low": None, "ci_high": None, "n": 0}, (key, m, est)
                    continue
                assert est["ci_low"] is not None and est["ci_high"] is not None, (key, m, est)
                assert est["ci_low"] - TOL <= est["mean"] <= est["ci_high"] + TOL, (key, m, est)
                # every replicate is a convex combination of the session's scores
                assert min(vals) - TOL <= est["ci_low"] and est["ci_high"] <= max(vals) + TOL, (key, m, est, vals)
                if len(vals) == 1:
                    assert est["mean"] == est["ci_low"] == est["ci_high"] == vals[0], (key, m, est)

    def check_slices(actual):
        got = {r["slice"]: r for r in actual}
        assert sorted(got) == sorted(slices)
        for key, exp in slices.items():
            r = got[key]
            HumanitySliceMetric.model_validate(r)
            assert r["mode"] == "distribution"
            assert r["n_interactions"] == exp["n_interactions"] and r["n_sessions"] == exp["n_sessions"]
            assert r["resampling"] and "session" in r["resampling"].lower()  # resampling unit: the session
            assert r["n_with_reference"] == exp["n_with_reference"], (key, r)
            for m, point in (("mean_entropy", exp["entropy"]), ("mean_spearman", exp["spearman"])):
                est = r[m]
                units = exp["sessions"] if m == "mean_entropy" else [k for k in exp["sessions"] if sess[k]["n_ref"]]
                if not units:
                    assert point is None and est["mean"] is None and est["n"] == 0, (key, m, est)
                    continue
                if len(units) == 1:
                    # one session: its own (point) mean, and no slice interval — resampling sessions
                    # cannot estimate between-session uncertainty (a zero-width interval would claim certainty)
                    assert _close(est["mean"], point) and est["ci_low"] is None and est["ci_high"] is None, (key, m, est)
                    assert m == "mean_spearman" or "single session" in r["resampling"]
                    continue
                assert est["ci_low"] is not None and est["ci_high"] is not None, (key, m, est)
                assert est["ci_low"] - TOL <= est["mean"] <= est["ci_high"] + TOL, (key, m, est)
                sm = [sess[k]["entropy" if m == "mean_entropy" else "spearman"] for k in units]
                assert min(sm) - TOL <= est["ci_low"] and est["ci_high"] <= max(sm) + TOL, (key, m, est, sm)
            # Dirichlet(1 + c) marginals: Beta(1 + c_k, K + N - 1 - c_k)
            counts, K = exp["counts"], 8
            N = sum(counts)
            for e, c in zip(SPEC_EMOTIONS, counts):
                est = r["emotion_distribution"][e]
                if exp["n_sessions"] == 1:  # the one-session rule (issue 28): the observed share, no interval
                    assert est == {"mean": c / N if N else None, "ci_low": None, "ci_high": None, "n": N}, (key, e, est)
                    continue
                assert _close(est["mean"], (1.0 + c) / (K * 1.0 + N)), (key, e, est)
                lo, hi = stats.beta.ppf([alpha, 1 - alpha], 1.0 + c, K + N - 1.0 - c)
                assert _close(est["ci_low"], float(lo), 1e-9) and _close(est["ci_high"], float(hi), 1e-9), (key, e, est)
                assert est["n"] == N
            if N or exp["n_sessions"] != 1:
                assert _close(sum(r["emotion_distribution"][e]["mean"] for e in SPEC_EMOTIONS), 1.0, 1e-12)

    return check_sessions, check_slices


def test_pipeline_bayesian_intervals(test_pipeline):
    per, sess, slices = _ref_all(DATA)
    check_sessions, check_slices = _bayes_checks(sess, slices, 500)
    with test_pipeline as p:
        res = p | beam.Create(DATA) | Humanity(statistical_mode=BayesianMode(mc_samples=500, rng_seed=3), lexicon=_dict_lexicon())
        # per-interaction values do not depend on the mode
        assert_that(res["interactions"], _match_interactions(per), label="interactions")
        assert_that(res["sessions"], check_sessions, label="sessions")
        assert_that(res["slices"], check_slices, label="slices")
        assert_that(res["dead_letter"], is_empty(), label="dead")


def test_pipeline_bayesian_is_reproducible_and_seed_dependent():
    """Same seed -> identical aggregates; another seed -> different intervals."""
    from helpers import fnapi_pipeline

    # three runs in one pipeline, joined by slice key
    with fnapi_pipeline() as p:
        data = p | beam.Create(DATA)
        a = data | "A" >> Humanity(statistical_mode=BayesianMode(mc_samples=300, rng_seed=11), lexicon=_dict_lexicon())
        b = data | "B" >> Humanity(statistical_mode=BayesianMode(mc_samples=300, rng_seed=11), lexicon=_dict_lexicon())
        c = data | "C" >> Humanity(statistical_mode=BayesianMode(mc_samples=300, rng_seed=12), lexicon=_dict_lexicon())

        def key(tag):
            return lambda r: (r["slice"], (tag, json.dumps(r, sort_keys=True)))

        joined = (
            (a["slices"] | "KA" >> beam.Map(key("a")), b["slices"] | "KB" >> beam.Map(key("b")), c["slices"] | "KC" >> beam.Map(key("c")))
            | beam.Flatten()
            | beam.GroupByKey()
        )

        def check(actual):
            n_diff = 0
            for slice_key, items in actual:
                d = dict(items)
                assert d["a"] == d["b"], slice_key
                ra, rc = json.loads(d["a"]), json.loads(d["c"])
                if ra["n_sessions"] > 1 and ra["mean_entropy"]["ci_low"] != rc["mean_entropy"]["ci_low"]:
                    n_diff += 1
            assert n_diff >= 1

        assert_that(joined, check)


def test_sessions_are_keyed_by_session_and_assistant_without_collisions(test_pipeline):
    """A session is (session_id, assistant_id). Ids may contain "/" (e.g. "2024/05/chat-1"):
    ("a/b", "c") and ("a", "b/c") are two different sessions of two different assistants and
    must not be merged; one session_id shared by two assistants gives two sessions, too."""
    xs = [
        ix("a/b", "c", 0, "happy"),
        ix("a", "b/c", 0, "angry"),
        ix("shared", "x", 0, "sad"),
        ix("shared", "y", 0, "glad"),
    ]

    def check_slices(actual):
        got = {r["slice"]: (r["n_sessions"], r["n_interactions"]) for r in actual}
        assert got == {
            "overall": (4, 4),
            "assistant_id=c": (1, 1),
            "assistant_id=b/c": (1, 1),
            "assistant_id=x": (1, 1),
            "assistant_id=y": (1, 1),
        }, got

    with test_pipeline as p:
        res = p | beam.Create(xs) | Humanity(lexicon=_dict_lexicon(), slices=("overall", "assistant_id"))
        assert_that(
            res["sessions"] | beam.Map(lambda r: (r["session_id"], r["assistant_id"], r["n_interactions"])),
            equal_to([("a/b", "c", 1), ("a", "b/c", 1), ("shared", "x", 1), ("shared", "y", 1)]),
            label="sessions",
        )
        assert_that(res["slices"], check_slices, label="slices")
        assert_that(res["quality"], is_empty(), label="quality")


# ============================================================================ dead letter, licence
def test_language_without_lexicon_goes_to_dead_letter(test_pipeline):
    raw = json.loads(importlib.resources.files("nrclex").joinpath("data/nrc_en.json").read_text(encoding="utf-8"))
    nrc = {w.lower(): [e for e in es if e in SPEC_EMOTIONS] for w, es in raw.items()}
    nrc = {w: es for w, es in nrc.items() if es}
    xs = [
        ix("E1", "bot", 0, "I am so happy to help you, my friend!", gt="Glad to help."),
        ix("E1", "bot", 1, "I hate to say this, but the storm is terrible.", gt="It is a dangerous storm."),
        ix("ES", "bot", 0, "Estoy muy feliz de ayudarte, amigo.", gt="Con gusto.", language="spanish"),
        ix("ES", "bot", 1, "Lo siento mucho.", gt="", language="spanish"),
    ]
    per = {x.element_id: _ref_interaction(x, nrc) for x in xs if x.language == "english"}
    lex = NRCLexPackageLexicon()

    def check_dead(actual):
        assert sorted(d.element_id for d in actual) == ["ES/bot/0", "ES/bot/1"]
        for d in actual:
            assert d.stage == "humanity"
            assert "spanish" in d.reason
            raw_rec = json.loads(d.raw)
            assert raw_rec["element_id"] == d.element_id and raw_rec["language"] == "spanish"
            assert raw_rec["assistant"].startswith(("Estoy", "Lo siento"))

    def check_slices(actual):
        got = {r["slice"]: r for r in actual}
        assert sorted(got) == ["assistant_id=bot", "language=english", "overall"]
        for r in got.values():
            assert r["n_interactions"] == 2 and r["n_sessions"] == 1
            assert r["lexicon"] == lex.name and "NRC" in r["lexicon"]
            assert r["lexicon_licence"] == lex.licence and "non-commercial" in r["lexicon_licence"]

    with test_pipeline as p:
        res = p | beam.Create(xs) | Humanity()
        assert_that(res["interactions"], _match_interactions(per), label="interactions")
        assert_that(res["dead_letter"], check_dead, label="dead")
        assert_that(res["slices"], check_slices, label="slices")
        assert_that(
            res["sessions"] | beam.Map(lambda r: (r["session_id"], r["n_interactions"])),
            equal_to([("E1", 2)]),
            label="sessions",
        )


def test_all_interactions_without_lexicon_no_crash(test_pipeline):
    xs = [ix("X", "bot", i, "Hola, gracias.", language="japanese") for i in range(3)]
    with test_pipeline as p:
        res = p | beam.Create(xs) | Humanity(lexicon=_dict_lexicon())
        assert_that(res["interactions"], is_empty(), label="interactions")
        assert_that(res["sessions"], is_empty(), label="sessions")
        assert_that(res["slices"], is_empty(), label="slices")
        assert_that(
            res["dead_letter"] | beam.Map(lambda d: (d.stage, "japanese" in d.reason)),
            equal_to([("humanity", True)] * 3),
            label="dead",
        )


# ============================================================================ upstream-style API
class ExampleRetriever(Retriever):
    """Module-level retriever (upstream style): unknown ``Humanity.run`` kwargs arrive here."""

    def load_dataset(self):
        prefix = self.kwargs["prefix"]
        n = self.kwargs.get("n_sessions", 2)
        texts = [("I am happy and glad", "so sad"), ("angry hate wow", "angry"), ("everything", "")]
        return [
            Dataset(
                session_id=f"{prefix}-{i}",
                assistant_id="bot" if i % 2 == 0 else "other",
                language="english",
                context="",
                conversation=[
                    Batch(qa_id=f"{prefix}-{i}-{t}", query="q", assistant=a, ground_truth_assistant=g)
                    for t, (a, g) in enumerate(texts[: 1 + i % 3])
                ],
            )
            for i in range(n)
        ]


class StreamingRetriever(Retriever):
    @property
    def iteration_level(self):
        return IterationLevel.STREAM_BATCHES

    def load_dataset(self) -> Iterator[StreamedBatch]:
        meta = SessionMetadata(session_id="stream", assistant_id="bot", language="en")
        for t, text in enumerate(["happy", "angry sad", "nothing"]):
            yield StreamedBatch(metadata=meta, batch=Batch(qa_id=f"s{t}", query="q", assistant=text, ground_truth_assistant="glad"))


def test_upstream_style_run_bayesian():
    results = Humanity.run(
        ExampleRetriever,
        statistical_mode=BayesianMode(mc_samples=500),
        lexicon=_dict_lexicon(),
        prefix="zz",
        n_sessions=4,
    )
    # one HumanityMetric per interaction, upstream field names
    assert isinstance(results, list)
    assert len(results) == 1 + 2 + 3 + 1  # sessions of 1, 2, 3, 1 interactions
    assert all(isinstance(r, HumanityMetric) for r in results)
    upstream_fields = {
        "session_id",
        "assistant_id",
        "qa_id",
        "humanity_assistant_emotional_entropy",
        "humanity_ground_truth_spearman",
        *(f"humanity_assistant_{e}" for e in SPEC_EMOTIONS),
    }
    assert upstream_fields <= set(HumanityMetric.model_fields)
    assert {r.session_id for r in results} == {"zz-0", "zz-1", "zz-2", "zz-3"}  # kwargs reached the retriever
    # values equal the reference
    interactions = [
        ix(d.session_id, d.assistant_id, t, b.assistant, gt=b.ground_truth_assistant, qa_id=b.qa_id)
        for d in ExampleRetriever(prefix="zz", n_sessions=4).load_dataset()
        for t, b in enumerate(d.conversation)
    ]
    per, sess, slices = _ref_all(interactions)
    for r in results:
        exp = per[r.element_id]
        assert r.qa_id == exp["qa_id"]
        assert r.humanity_assistant_emotional_entropy == pytest.approx(exp["humanity_assistant_emotional_entropy"], abs=TOL)
        assert r.humanity_ground_truth_spearman == exp["humanity_ground_truth_spearman"]
        for e in SPEC_EMOTIONS:
            assert getattr(r, f"humanity_assistant_{e}") == pytest.approx(exp[f"humanity_assistant_{e}"], abs=TOL)
    # aggregates
    assert len(results.sessions) == 4 and all(isinstance(s, HumanitySessionMetric) for s in results.sessions)
    assert {s.session_id: s.n_interactions for s in results.sessions} == {"zz-0": 1, "zz-1": 2, "zz-2": 3, "zz-3": 1}
    by_slice = {s.slice: s for s in results.slices}
    assert set(by_slice) == {"overall", "assistant_id=bot", "assistant_id=other", "language=english"}
    assert all(isinstance(s, HumanitySliceMetric) for s in results.slices)
    ov = by_slice["overall"]
    assert ov.mode == "distribution" and ov.n_interactions == 7 and ov.n_sessions == 4
    assert ov.mean_entropy.ci_low is not None and ov.mean_entropy.ci_low <= ov.mean_entropy.mean <= ov.mean_entropy.ci_high
    assert results.dead_letter == []


def test_upstream_style_run_frequentist_streaming_retriever():
    results = Humanity.run(StreamingRetriever, lexicon=_dict_lexicon())
    assert [r.qa_id for r in results] == ["s0", "s1", "s2"]  # turn order = generator order
    assert [r.turn_index for r in results] == [0, 1, 2]
    assert results[0].humanity_assistant_joy == pytest.approx(1 / 3)
    assert results[2].humanity_assistant_emotional_entropy == 0.0
    (s,) = results.sessions
    assert s.language == "english" and s.n_interactions == 3
    assert s.mean_entropy.ci_low is None
    overall = [x for x in results.slices if x.slice == "overall"][0]
    assert overall.mode == "point_estimate"
    assert overall.lexicon == "test-lexicon" and overall.lexicon_licence == "test-licence"


def test_upstream_style_run_dead_letter_for_unknown_language():
    class _R(Retriever):  # noqa: D401 - in-process runner: a local class is fine
        def load_dataset(self):
            return [
                Dataset(session_id="a", assistant_id="x", language="english", context="",
                        conversation=[Batch(qa_id="1", query="q", assistant="happy", ground_truth_assistant="sad")]),
                Dataset(session_id="b", assistant_id="x", language="spanish", context="",
                        conversation=[Batch(qa_id="1", query="q", assistant="feliz", ground_truth_assistant="triste")]),
            ]

    results = Humanity.run(_R, statistical_mode=FrequentistMode())
    assert [r.session_id for r in results] == ["a"]
    assert len(results.dead_letter) == 1
    d = results.dead_letter[0]
    assert d["stage"] == "humanity" and "spanish" in d["reason"] and d["element_id"] == "b/x/0"


def test_a_session_given_twice_gives_the_engines_one_duplicate_turn_warning(test_pipeline):
    """The same session in two records (turn 0 twice): one ``duplicate_turn_index`` warning, the
    kind and text every metric's session stage gives (``engine.repeated_turns``)."""
    from fair_forge_beam.engine import repeated_turns

    assert repeated_turns(("s", "a", "english"), [0, 1]) == []
    (w,) = repeated_turns(("s", "a", "english"), [0, 0, 1])
    assert (w.kind, w.key) == ("duplicate_turn_index", "s/a")
    rows = [helpers.ix("s", "a", 0, "I am so happy today"), helpers.ix("s", "a", 0, "what a joy"),
            helpers.ix("t", "a", 0, "sad news")]
    with test_pipeline as p:
        res = p | beam.Create(rows) | Humanity()
        assert_that(res["quality"] | beam.Map(lambda q: (q.kind, q.key)),
                    equal_to([("duplicate_turn_index", "s/a")]))


def test_the_session_reducer_bootstraps_a_bundles_sessions_in_one_call(monkeypatch):
    """Issue 26: Humanity's reduce_many (what the engine calls for the sessions of a bundle) sends
    every session's within-session bootstraps (entropy, and Spearman where a reference is) in one
    batched call, and each record is the bits of reducing its session alone."""
    from fair_forge_beam.metrics import humanity

    reducer = humanity._SessionReducer(BayesianMode(mc_samples=1000, rng_seed=4))
    rng = np.random.default_rng(4)
    keys, values = [], []
    for s in range(40):
        n = int(rng.integers(1, 8))
        keys.append((f"s{s}", "a", "english"))
        values.append([(t, None if s % 3 else 1.0 / n, float(rng.choice([0.0, rng.random()])),
                        None if rng.random() < 0.4 else float(rng.uniform(-1, 1)), (1, 0, 0, 0, 0, 0, 0, 0))
                       for t in range(n)])
    alone = [reducer.reduce(k, v) for k, v in zip(keys, values)]
    calls = []
    real = humanity.session_mean_and_point_estimates_many
    monkeypatch.setattr(humanity, "session_mean_and_point_estimates_many",
                        lambda asks, *a: calls.append(len(asks)) or real(asks, *a))
    together = reducer.reduce_many(keys, values)
    assert calls == [40 + sum(any(v[3] is not None for v in items) for items in values)]
    assert json.dumps(together) == json.dumps(alone)
