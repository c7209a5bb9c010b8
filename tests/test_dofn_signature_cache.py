"""``_beam.cache_dofn_signatures``: Beam's per-function argument inspection
(``core.get_function_args_defaults``) answered once per function in a process that runs our
pipelines; the same answers as Beam's own, stateful DoFns still found, and a pipeline's outputs
unchanged."""
import subprocess
import sys
import textwrap


def _child(code: str) -> str:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          check=True, timeout=300).stdout.strip()


def test_a_pipeline_run_caches_the_answers_and_they_are_beams():
    out = _child("""
        import functools, inspect
        from apache_beam.transforms import core, userstate
        from apache_beam.coders import VarIntCoder
        from fair_forge_beam._beam import beam
        from fair_forge_beam.beam_pipeline import pipeline_options, run_pipeline

        original = core.get_function_args_defaults

        class Count(beam.DoFn):
            TOTAL = userstate.ReadModifyWriteStateSpec("total", VarIntCoder())

            def process(self, kv, total=beam.DoFn.StateParam(TOTAL), extra=3):
                total.write((total.read() or 0) + kv[1])
                yield kv[0], total.read() + extra - 3

        def plain(a, b=2, *rest, c=1):
            return a

        callables = [Count().process, Count.process, plain, lambda x, y=1: x, functools.partial(plain, 1), len]
        before = [original(f) for f in callables]
        with run_pipeline(pipeline_options([])) as p:
            got = p | beam.Create([("a", 1), ("a", 2), ("b", 5)]) | beam.ParDo(Count())
            beam.testing.util.assert_that(got, beam.testing.util.equal_to([("a", 1), ("a", 3), ("b", 5)]))
        cached = core.get_function_args_defaults
        print(cached is not original, [cached(f) for f in callables] == before)
        calls = []
        real = inspect.signature
        inspect.signature = lambda *a, **k: calls.append(1) or real(*a, **k)
        try:
            specs = userstate.get_dofn_specs(Count())
        finally:
            inspect.signature = real
        print(sorted(s.name for s in specs[0]), len(calls))
        with run_pipeline(pipeline_options([])) as p:  # installed once: Beam's function is not wrapped twice
            _ = p | beam.Create([1])
        print(core.get_function_args_defaults is cached)
    """.replace("beam.testing.util", "__import__('apache_beam.testing.util').testing.util"))
    assert out.splitlines() == ["True True", "['total'] 0", "True"]
