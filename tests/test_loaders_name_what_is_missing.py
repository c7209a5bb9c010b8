"""The analysts' loaders (docs/report-reference.md) read a run that is there and a metric it holds:
a missing run folder or a misspelt metric is an error naming it (trial49 B3: ``load_sessions(run,
"humanty")`` gave 0 rows and ``iter_dead_letters`` of a missing folder nothing, while
``load_results`` raised ``FileNotFoundError``)."""
from __future__ import annotations

import json

import pytest

from fair_forge_beam.reports import load
from fair_forge_beam.testing.object_store import MemoryObjectStore


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from pipelines import audit

    d = tmp_path_factory.mktemp("loaders")
    data = d / "in.jsonl"
    data.write_text("".join(json.dumps({"session_id": f"s{i}", "assistant_id": "bot", "qa_id": "q", "query": "How?",
                                        "assistant": "I am glad and happy to help you today."}) + "\n"
                            for i in range(3)), encoding="utf-8")
    out = d / "out"
    audit.run(["--metrics", "humanity", "--input", str(data), "--output", str(out), "--quiet", "--no-report"])
    return str(out)


METRIC_READERS = {
    "load_sessions": lambda r, m: load.load_sessions(r, m),
    "read_sessions": lambda r, m: load.read_sessions(r, m),
    "iter_sessions": lambda r, m: list(load.iter_sessions(r, m)),
    "session_files": lambda r, m: load.session_files(r, m),
    "iter_slices": lambda r, m: list(load.iter_slices(r, m)),
    "slice_files": lambda r, m: load.slice_files(r, m),
}
RUN_READERS = {
    **METRIC_READERS,
    "iter_dead_letters": lambda r, m: list(load.iter_dead_letters(r)),
    "iter_quality_warnings": lambda r, m: list(load.iter_quality_warnings(r)),
    "dead_letter_summary": lambda r, m: load.dead_letter_summary(r),
}  # load_results raised already: FileNotFoundError, no results.json at …


def test_the_run_is_read_as_before(run):
    assert len(load.load_sessions(run, "humanity")) == 3
    assert len(load.session_files(run + "/results.json", "humanity")) >= 1
    assert {s["slice"] for s in load.iter_slices(run, "humanity")} >= {"overall"}
    assert list(load.iter_dead_letters(run)) == []
    assert load.metrics_held(run) == ["humanity"]


@pytest.mark.parametrize("reader", sorted(METRIC_READERS))
def test_a_metric_the_run_does_not_hold_is_named_with_the_closest_one(run, reader):
    with pytest.raises(ValueError) as err:
        METRIC_READERS[reader](run, "humanty")
    assert str(err.value) == (f"the run at {run} holds no metric 'humanty'; did you mean 'humanity'? "
                              "(its metrics: humanity)")
    with pytest.raises(ValueError, match="holds no metric 'human[*]'"):  # a name, never a pattern
        METRIC_READERS[reader](run, "human*")


@pytest.mark.parametrize("reader", sorted(RUN_READERS))
def test_a_missing_run_folder_is_named(run, reader):
    missing = run + "-typo"
    with pytest.raises(FileNotFoundError, match=missing):
        RUN_READERS[reader](missing, "humanity")


def test_a_remote_run_folder_is_there_when_it_holds_an_object():
    MemoryObjectStore.clear()
    try:
        with pytest.raises(FileNotFoundError, match="no run folder at memstore://bucket/run"):
            list(load.iter_dead_letters("memstore://bucket/run"))
        MemoryObjectStore.put("memstore://bucket/run/dead_letter/part-00000-of-00001.jsonl", b'{"stage": "read"}\n')
        assert list(load.iter_dead_letters("memstore://bucket/run/")) == [{"stage": "read"}]
    finally:
        MemoryObjectStore.clear()
