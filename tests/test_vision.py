"""Vision (spec §6.9): similarity and hallucination of frame descriptions, on FnApiRunner.

A scripted scorer reads the score from a ``[s=x]`` marker in the description, so every number
is known exactly; the default MiniLM scorer is checked once on its own."""
from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import run_metric
from fair_forge_beam.components.embedder import HashingEmbedder
from fair_forge_beam.components.similarity import EmbeddingSimilarityScorer, SimilarityScorer
from fair_forge_beam.io.elements import Interaction, make_element_id
from fair_forge_beam.io.retriever import Retriever
from fair_forge_beam.metrics.vision import MinMaxCombineFn, Vision, VisionHallucination, VisionSimilarity
from fair_forge_beam.schemas.common import Batch, Dataset
from fair_forge_beam.schemas.vision import VisionHallucinationMetric, VisionSimilarityMetric
from fair_forge_beam.statistical.bayesian import BayesianMode


class MarkerScorer(SimilarityScorer):
    """Similarity = the ``[s=x]`` marker of the description; ``[boom]`` raises."""

    def calculate(self, a, b):
        if "[boom]" in a:
            raise RuntimeError("cannot read this frame")
        return float(a.split("[s=")[1].split("]")[0])


def frame(session, turn, desc, gt="a red car parked on a street", assistant_id="cam", language="english"):
    return Interaction(
        element_id=make_element_id(session, assistant_id, turn), session_id=session, assistant_id=assistant_id,
        language=language, context="", turn_index=turn, qa_id=f"frame_{turn:03d}", query="Describe the frame.",
        assistant=desc, ground_truth_assistant=gt, observation=None, weight=None, agentic=None,
        ground_truth_agentic=None, logprobs=None,
    )


DATA = [
    frame("perfect", 0, "[s=1.0]"),
    frame("split", 0, "[s=1.0]"),
    frame("split", 1, "[s=0.0]"),
    frame("three", 0, "[s=0.9]"),
    frame("three", 1, "[s=0.8]"),
    frame("three", 2, "[s=0.5]"),
    # bad input: no reference, blank reference, a failing scorer, an empty description
    frame("bad", 0, "[s=0.9]", gt=None),
    frame("bad", 1, "[s=0.9]", gt="   "),
    frame("bad", 2, "[boom] [s=0.9]"),
    frame("bad", 3, ""),
]


def by_session(rows):
    return {r["session_id"]: r for r in rows}


def test_vision_values_summaries_and_bad_input(tmp_path):
    data = list(DATA)
    random.Random(5).shuffle(data)  # arrival order must not matter
    out = run_metric(Vision(scorer=MarkerScorer(), threshold=0.75), data, tmp_path)
    s = by_session(out["sessions"])
    assert set(s) == {"perfect", "split", "three", "bad"}
    assert (s["perfect"]["mean_similarity"], s["perfect"]["min_similarity"], s["perfect"]["max_similarity"]) == (1.0, 1.0, 1.0)
    assert "100%" in s["perfect"]["similarity_summary"] and "1 frames" in s["perfect"]["similarity_summary"]
    assert (s["split"]["mean_similarity"], s["split"]["min_similarity"], s["split"]["max_similarity"]) == (0.5, 0.0, 1.0)
    # hallucination counts 0 / 1-of-2 / 1-of-3 (0.5 < 0.75)
    assert (s["perfect"]["n_hallucinations"], s["split"]["n_hallucinations"], s["three"]["n_hallucinations"]) == (0, 1, 1)
    assert s["split"]["hallucination_rate"] == 0.5 and s["three"]["hallucination_rate"] == 0.3333
    assert "1 of 2" in s["split"]["hallucination_summary"] and "0.75" in s["split"]["hallucination_summary"]
    assert s["three"]["mean_similarity"] == round((0.9 + 0.8 + 0.5) / 3, 4)
    assert [i["qa_id"] for i in s["three"]["interactions"]] == ["frame_000", "frame_001", "frame_002"]
    # the empty description is scored 0.0 (a hallucination) and flagged; three frames dead-lettered
    assert s["bad"]["n_frames"] == 1 and s["bad"]["mean_similarity"] == 0.0 and s["bad"]["n_hallucinations"] == 1
    dead = sorted(out["dead_letter"], key=lambda d: d["element_id"])
    assert [d["element_id"] for d in dead] == ["bad/cam/0", "bad/cam/1", "bad/cam/2"]
    assert all(d["stage"] == "vision" for d in dead)
    assert "reference description" in dead[0]["reason"] and "reference description" in dead[1]["reason"]
    # plain words, never the exception's class name (issue 28; was "…: RuntimeError: cannot read this frame")
    assert dead[2]["reason"] == "similarity scorer failed: cannot read this frame" and "[boom]" in dead[2]["raw"]
    assert [q["kind"] for q in out["quality"]] == ["empty_description"]
    # slice: all 7 scored frames pooled
    (overall,) = [r for r in out["slices"] if r["slice"] == "overall"]
    assert overall["n_interactions"] == 7 and overall["n_sessions"] == 4
    assert overall["mean_similarity"]["mean"] == pytest.approx((1 + 1 + 0 + 0.9 + 0.8 + 0.5 + 0) / 7)
    assert (overall["min_similarity"], overall["max_similarity"]) == (0.0, 1.0)
    assert overall["hallucination_rate"]["mean"] == pytest.approx(3 / 7) and overall["n_hallucinations"] == 3
    assert len(out["interactions"]) == 7


@pytest.mark.slow
def test_vision_bayesian_rate_is_the_beta_posterior_and_reproducible(tmp_path):
    mode = BayesianMode(mc_samples=400, rng_seed=7)
    a = run_metric(Vision(scorer=MarkerScorer(), statistical_mode=mode), DATA[:6], tmp_path / "a")
    data = list(DATA[:6])
    random.Random(1).shuffle(data)
    b = run_metric(Vision(scorer=MarkerScorer(), statistical_mode=BayesianMode(mc_samples=400, rng_seed=7)), data, tmp_path / "b")
    key = lambda r: r["slice"]
    assert sorted(a["slices"], key=key) == sorted(b["slices"], key=key)
    assert sorted(a["sessions"], key=lambda r: r["session_id"]) == sorted(b["sessions"], key=lambda r: r["session_id"])
    s = by_session(a["sessions"])
    # 1 of 3 below threshold, Beta(1+1, 1+2): mean 2/5
    assert s["three"]["hallucination_rate"] == 0.4
    assert s["three"]["hallucination_rate_ci_low"] < 0.4 < s["three"]["hallucination_rate_ci_high"]
    assert s["three"]["mean_similarity_ci_low"] <= s["three"]["mean_similarity"] <= s["three"]["mean_similarity_ci_high"]


class Frames(Retriever):
    def load_dataset(self):
        return [
            Dataset(session_id="v1", assistant_id="cam", language="english", context="", conversation=[
                Batch(qa_id="frame_001", query="Describe.", assistant="[s=1.0]", ground_truth_assistant="ref"),
                Batch(qa_id="frame_002", query="Describe.", assistant="[s=0.5]", ground_truth_assistant="ref"),
            ]),
            Dataset(session_id="v2", assistant_id="cam", language="english", context="", conversation=[
                Batch(qa_id="frame_001", query="Describe.", assistant="[s=0.9]", ground_truth_assistant="ref"),
            ]),
            Dataset(session_id="empty", assistant_id="cam", language="english", context="", conversation=[]),
        ]


def test_upstream_style_run_returns_upstream_types():
    sim = VisionSimilarity.run(Frames, scorer=MarkerScorer(), threshold=0.8)
    assert [type(m) for m in sim] == [VisionSimilarityMetric] * 2
    assert [(m.session_id, m.mean_similarity) for m in sim] == [("v1", 0.75), ("v2", 0.9)]
    assert sim[0].interactions == [("frame_001", 1.0), ("frame_002", 0.5)]
    assert any(d["stage"] == "read" and "empty conversation" in d["reason"] for d in sim.dead_letter)
    hal = VisionHallucination.run(Frames, scorer=MarkerScorer(), threshold=0.8)
    assert [type(m) for m in hal] == [VisionHallucinationMetric] * 2
    assert hal[0].threshold == 0.8 and hal[0].n_hallucinations == 1 and hal[0].n_frames == 2
    assert hal[0].interactions[1] == ("frame_002", 0.5, True)
    assert "1 of 2" in hal[0].summary and "frame_002" in hal[0].display()


def test_bad_configuration_fails_before_the_pipeline():
    with pytest.raises(ValueError, match="threshold"):
        Vision(scorer=MarkerScorer(), threshold=float("nan"))
    with pytest.raises(ValueError, match="scorer"):
        Vision(scorer=object())


def test_embedding_scorer_with_hashing_embedder_in_the_pipeline(tmp_path):
    scorer = EmbeddingSimilarityScorer(HashingEmbedder(dim=256))
    data = [frame("h", 0, "a red car parked on a street"), frame("h", 1, "two dogs playing in snow")]
    out = run_metric(Vision(scorer=scorer), data, tmp_path)
    (s,) = out["sessions"]
    assert s["interactions"][0]["similarity_score"] == 1.0
    assert s["interactions"][1]["similarity_score"] < 0.75 and s["n_hallucinations"] == 1
    assert s["scorer"] == "cosine:hashing-blake2b-256"


def test_default_scorer_is_minilm_and_works():
    scorer = Vision().scorer  # upstream's default raises TypeError here (spec §17 item 15)
    same, related, unrelated = scorer.calculate_many([
        ("A red car is parked on the street.", "A red car is parked on the street."),
        ("A red car is parked on the street.", "A red automobile parked by the road."),
        ("A red car is parked on the street.", "Quarterly earnings rose by four percent."),
    ])
    assert same == pytest.approx(1.0, abs=1e-5)
    assert unrelated < 0.3 < related < same


@given(st.lists(st.tuples(st.floats(-1, 1), st.floats(-1, 1)), max_size=8), st.randoms())
def test_minmax_combine_fn_merge_order_does_not_matter(pairs, rnd):
    fn = MinMaxCombineFn()
    accs = [fn.add_input(fn.create_accumulator(), (min(p), max(p))) for p in pairs]
    one = fn.merge_accumulators(accs)
    rnd.shuffle(accs)
    half = len(accs) // 2
    two = fn.merge_accumulators([fn.merge_accumulators(accs[:half]), fn.merge_accumulators(accs[half:])])
    assert one == two
    if pairs:
        assert one == [min(min(p) for p in pairs), max(max(p) for p in pairs)]
    else:
        assert one == [None, None]
