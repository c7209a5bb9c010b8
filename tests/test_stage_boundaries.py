"""What a per-interaction PCollection must not do in the main job's graph (issue 26, "fewer hops and
smaller elements per interaction"): a runner that materializes a ``Flatten`` (the FnApiRunner writes
each of its inputs to a buffer and reads it back in a stage of its own) or runs a step with a side
input in a stage apart from its main input encodes and decodes every element once more.

- a step with a side input never takes the interactions themselves as its main input (LookAlike's
  spellings took every interaction, texts and all, to read its ids: a 5,000-interaction audit ran 1.4 %
  fewer instructions without it, callgrind, docs/performance.md "session 34").

(Pre-combining each input of the session combine where it is made, instead of after their ``Flatten``,
was measured too and left out: the partial accumulators then crossed a ``Flatten`` of their own, and the
same audit ran 0.4 % more instructions.)
"""
from __future__ import annotations

import json

import pytest
from apache_beam import pipeline as beam_pipeline

from helpers import FNAPI
from pipelines import audit

PARDO = "beam:transform:pardo:v1"


def _graph(monkeypatch, argv):
    """The main job's pipeline proto for ``argv`` (built, never run)."""
    built = []

    class Built(Exception):
        pass

    def run(self, *a, **kw):
        built.append(self.to_runner_api())
        raise Built

    monkeypatch.setattr(beam_pipeline.Pipeline, "run", run)
    with pytest.raises(Built):
        audit.run(["--quiet", f"--runner={FNAPI}", "--no-report", *argv])
    return built[0]


def _leaves(proto):
    return {tid: t for tid, t in proto.components.transforms.items() if not t.subtransforms}


def _side_inputs(t) -> set:
    from apache_beam.portability.api import beam_runner_api_pb2

    if t.spec.urn != PARDO:
        return set()
    payload = beam_runner_api_pb2.ParDoPayload.FromString(t.spec.payload)
    return set(payload.side_inputs)


@pytest.fixture(params=["readme", "judged"])
def graph(request, monkeypatch, tmp_path):
    if request.param == "readme":
        return _graph(monkeypatch, ["--metrics", "humanity,toxicity", "--mode", "bayesian", "--output", str(tmp_path / "a")])
    sessions = [{"session_id": "s1", "assistant_id": "a", "language": "english", "context": "c",
                 "conversation": [{"qa_id": "1", "query": "Hi", "assistant": "Hello.", "ground_truth_assistant": "Hi."}]}]
    (tmp_path / "in.json").write_text(json.dumps(sessions), encoding="utf-8")
    judge = ["--judge-base-url", "http://127.0.0.1:9/v1", "--judge-model", "m",
             "--guardian-base-url", "http://127.0.0.1:9/v1", "--guardian-model", "g"]
    return _graph(monkeypatch, ["--input", str(tmp_path / "in.json"), "--metrics", "humanity,bias,context,privacy",
                                "--output", str(tmp_path / "b"), "--judge-cache", str(tmp_path / "c.sqlite"), *judge])


def test_no_step_with_a_side_input_reads_the_interactions(graph):
    leaves = _leaves(graph)
    # the interactions: what the engine's scorers (or their batching) read
    interactions = {pc for t in leaves.values() if t.unique_name.startswith("Engine/")
                    and ("/Batch/" in t.unique_name or t.unique_name.endswith("/Score/ParDo(_ScoreAndRoute)"))
                    for pc in t.inputs.values()}
    assert interactions
    made_by = {pc: t for t in leaves.values() for pc in t.outputs.values()}
    # the same interactions before the engine: back through the steps that pass them on unchanged in type
    readers = {before for pc in interactions if pc in made_by for before in made_by[pc].inputs.values()}
    wrong = []
    for t in leaves.values():
        sides = _side_inputs(t)
        if not sides:
            continue
        mains = {pc for tag, pc in t.inputs.items() if tag not in sides}
        if mains & (interactions | readers):
            wrong.append(t.unique_name)
    assert not wrong, f"steps with a side input that read every interaction (a stage of their own): {wrong}"
