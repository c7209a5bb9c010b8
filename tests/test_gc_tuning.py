"""The collector threshold a process that runs our pipelines uses (``_beam.tune_gc``): raised
once in the launcher and in every SDK worker that runs our heavy DoFns, never lowered."""
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

import fair_forge_beam._beam as fb


def _child(code: str) -> str:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          check=True, timeout=300).stdout.strip()


def test_tune_gc_raises_generation_0_only_and_never_lowers():
    out = _child("""
        import gc
        from fair_forge_beam._beam import tune_gc, GC_THRESHOLD0
        gc.set_threshold(700, 11, 12)
        tune_gc()
        a = gc.get_threshold()
        gc.set_threshold(GC_THRESHOLD0 * 2, 11, 12)
        tune_gc()
        print(a, gc.get_threshold())
    """)
    assert out == f"({fb.GC_THRESHOLD0}, 11, 12) ({fb.GC_THRESHOLD0 * 2}, 11, 12)"


def test_a_pipeline_run_raises_the_launchers_threshold():
    out = _child("""
        import gc
        from fair_forge_beam._beam import beam
        from fair_forge_beam.beam_pipeline import pipeline_options, run_pipeline
        before = gc.get_threshold()[0]
        with run_pipeline(pipeline_options([])) as p:
            _ = p | beam.Create([1, 2]) | beam.Map(lambda x: x)
        print(before, gc.get_threshold()[0])
    """)
    assert out == f"700 {fb.GC_THRESHOLD0}"


@pytest.mark.parametrize("make", [
    lambda: __import__("fair_forge_beam.engine", fromlist=["_ScoreAndRoute"])._ScoreAndRoute(
        SimpleNamespace(name="m", scorer=lambda x: None, batch_size=None), 0),
    lambda: __import__("fair_forge_beam.engine", fromlist=["_ReduceSessions"])._ReduceSessions(
        SimpleNamespace(specs=[])),
    lambda: __import__("fair_forge_beam.rollup", fromlist=["_ReadStoredRows"])._ReadStoredRows([], None),
], ids=["score", "reduce_sessions", "rollup_read"])
def test_the_heavy_dofns_tune_their_worker(monkeypatch, make):
    calls = []
    monkeypatch.setattr(fb, "tune_gc", lambda: calls.append("gc"))
    monkeypatch.setattr(fb, "tune_malloc", lambda: calls.append("malloc"))  # glibc's mmap threshold (test_malloc_tuning)
    make().setup()
    assert calls == ["gc", "malloc"]


def test_a_command_raises_the_threshold_before_its_imports():
    """A command's process raises it first (``console.starting``), not only when its pipeline starts:
    README's job collected 398 times before its pipeline started (issue 26). Beam is not imported."""
    out = _child("""
        import gc, sys
        gc.set_threshold(700, 10, 10)
        sys.argv = ["fair-forge-beam", "--output", "/nonexistent/out"]
        from fair_forge_beam.console import starting
        starting()
        print(gc.get_threshold()[0], "apache_beam" in sys.modules)
    """)
    assert out == f"{fb.GC_THRESHOLD0} False"
