"""The package's ``DoFn``\\ s declare their output type (``@beam.typehints.with_output_types``) where
Beam's inference gives one answer: Beam derives an undeclared ``DoFn``'s output type by interpreting
the bytecode of its ``process`` (and of what it calls) each time it applies it, 1–100 ms per
``DoFn`` per graph (issue 26's "cheaper graph construction"; docs/performance.md). The declaration
is what the inference gives, so no element type and no coder changes:

- every ``DoFn`` class of the package whose inferred output type is the same whatever its input
  type declares a type, or is listed in :data:`UNDECLARED` with its reason;
- in real graphs (README's audit, a judged audit), every PCollection a declared ``DoFn`` makes has
  the element type Beam's inference gives for that instance and input.
"""
from __future__ import annotations

import importlib
import json
import pkgutil
import typing

import apache_beam as beam
import apache_beam.transforms.core as core
import pytest
from apache_beam import pipeline as beam_pipeline
from apache_beam import pvalue
from apache_beam.io.filesystem import FileMetadata
from apache_beam.typehints import typehints as th

import fair_forge_beam
import pipelines
from helpers import FNAPI, REPO
from pipelines import audit

#: input element types the inference is tried with
INPUTS = [th.Any, str, int, bytes, typing.Tuple[str, int], typing.Dict[str, typing.Any], FileMetadata,
          typing.Tuple[str, typing.Iterable[typing.Any]], typing.List[typing.Any]]

#: DoFns left undeclared although their inference (of a bare instance) gives one answer, and why
UNDECLARED = {
    # the inference depends on the instance's attributes: a declaration would change some graph's coder
    "fair_forge_beam.metrics.judged._Outputs": "Any or Union[TaggedOutput, SessionPart] by instance",
    "fair_forge_beam.streaming.combine._PreCombine": "Tuple[Any, Any] or Tuple[Any, List[Any]] by combine",
    # declared where it is applied (its ParDo's .with_output_types)
    "fair_forge_beam.metrics.regulatory._MakeRequests": "JudgeRequest, declared by its ParDo",
    # never applied by Beam: the engine drives a metric's scorer itself
    "fair_forge_beam.metrics.toxicity._ScoreToxicity": "the engine's scorer",
    "fair_forge_beam.metrics.vision._ScoreFrames": "the engine's scorer",
    # the streaming sources' parts: only the Kafka/file streaming jobs (slow tier) apply them, unchecked here
    "fair_forge_beam.io.stream_sources._FirstTimeSeen": "yields its input: unchecked in a real graph",
    "fair_forge_beam.io.stream_sources._ReadLines": "streaming only: unchecked in a real graph",
    "fair_forge_beam.io.stream_sources.MessageEventTime": "streaming only: unchecked in a real graph",
}


def _package_dofns() -> list:
    for root in (fair_forge_beam, pipelines):
        for m in pkgutil.walk_packages(root.__path__, root.__name__ + "."):
            importlib.import_module(m.name)

    def subclasses(c):
        for s in c.__subclasses__():
            yield s
            yield from subclasses(s)

    found = {c for c in subclasses(core.DoFn) if c.__module__.startswith(("fair_forge_beam.", "pipelines."))}
    return sorted(found, key=lambda c: f"{c.__module__}.{c.__qualname__}")


def _name(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _declared(fn):
    return beam.ParDo(fn).get_type_hints().simple_output_type(type(fn).__name__)


DOFNS = _package_dofns()


def test_the_package_has_its_dofns_found():
    names = {_name(c) for c in DOFNS}
    assert "fair_forge_beam.engine._ScoreAndRoute" in names and len(names) > 50
    assert set(UNDECLARED) <= names, "an exception names a DoFn that no longer exists"


@pytest.mark.parametrize("cls", DOFNS, ids=_name)
def test_a_dofn_whose_inference_has_one_answer_declares_it(cls):
    fn = cls.__new__(cls)  # the type hints are the class's: no argument needed
    declared = _declared(fn)
    inferred = {str(core.DoFn.infer_output_type(fn, t)) for t in INPUTS}
    if declared is None:
        assert len(inferred) > 1 or _name(cls) in UNDECLARED, (
            f"{_name(cls)}: Beam infers {inferred.pop()} for every input type, from process's bytecode, each time "
            f"it applies it: declare it (@beam.typehints.with_output_types) or list it in UNDECLARED with why")
    else:
        assert _name(cls) not in UNDECLARED, "declared: take it out of UNDECLARED"


@pytest.fixture
def declared_vs_inferred(monkeypatch):
    """Every PCollection a package DoFn with a declared output type makes while a graph is built:
    ``(DoFn, input type, declared element type, inferred element type)``."""
    seen = []
    original = beam_pipeline.Pipeline._infer_result_type

    def checked(self, transform, inputs, result):
        original(self, transform, inputs, result)
        fn = getattr(transform, "fn", None)
        if (not isinstance(transform, core.ParDo) or not isinstance(result, pvalue.PCollection) or result.tag
                or isinstance(fn, core.CallableWrapperDoFn)
                or not type(fn).__module__.startswith(("fair_forge_beam.", "pipelines."))
                or transform.get_type_hints().simple_output_type("") is None and _declared(fn) is None):
            return
        types = tuple(i.element_type for i in inputs)
        given = types[0] if len(types) == 1 else th.Union[types]
        inferred = th.bind_type_variables(core.DoFn.infer_output_type(fn, given), {"*": th.Any})
        seen.append((_name(type(fn)), str(given), str(result.element_type), str(inferred)))

    class Built(Exception):
        pass

    def built(self, *a, **kw):
        raise Built  # the graph only: nothing runs

    monkeypatch.setattr(beam_pipeline.Pipeline, "_infer_result_type", checked)
    monkeypatch.setattr(beam_pipeline.Pipeline, "run", built)
    return seen, Built


def _graph(argv, built) -> None:
    with pytest.raises(built):
        audit.run(["--quiet", f"--runner={FNAPI}", "--no-report", *argv])


def test_in_real_graphs_a_declared_type_is_what_beam_infers(tmp_path, declared_vs_inferred):
    seen, built = declared_vs_inferred
    _graph(["--metrics", "humanity,toxicity", "--mode", "bayesian", "--output", str(tmp_path / "a")], built)
    sessions = [{"session_id": "s1", "assistant_id": "a", "language": "english", "context": "c",
                 "conversation": [{"qa_id": "1", "query": "Hi", "assistant": "Hello.", "ground_truth_assistant": "Hi."}]}]
    (tmp_path / "in.json").write_text(json.dumps(sessions), encoding="utf-8")
    judge = ["--judge-base-url", "http://127.0.0.1:9/v1", "--judge-model", "m",
             "--guardian-base-url", "http://127.0.0.1:9/v1", "--guardian-model", "g"]
    _graph(["--input", str(tmp_path / "in.json"), "--metrics", "bias,context,conversational,privacy",
            "--output", str(tmp_path / "b"), "--judge-cache", str(tmp_path / "cache.sqlite"), *judge], built)
    names = {s[0] for s in seen}
    assert {"fair_forge_beam.engine._ScoreAndRoute", "fair_forge_beam.components.judge.handler."
            "_BatchFailureToDeadLetters"} <= names, names
    wrong = [s for s in seen if s[2] != s[3]]
    assert not wrong, wrong
