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


def test_a_pipeline_run_looks_for_a_dofns_state_and_timers_once():
    """``_beam.cache_dofn_specs``: ``userstate.get_dofn_specs`` answers once per DoFn object (new
    sets each time, Beam's own answer), a stateful DoFn is still found stateful, and an entry goes
    with its DoFn."""
    out = _child("""
        import gc
        from apache_beam.transforms import userstate
        from apache_beam.coders import VarIntCoder
        from fair_forge_beam import _beam
        from fair_forge_beam._beam import beam
        from fair_forge_beam.beam_pipeline import pipeline_options, run_pipeline

        original = userstate.get_dofn_specs

        class Count(beam.DoFn):
            TOTAL = userstate.ReadModifyWriteStateSpec("total", VarIntCoder())

            def process(self, kv, total=beam.DoFn.StateParam(TOTAL)):
                total.write((total.read() or 0) + kv[1])
                yield kv[0], total.read()

        class Plain(beam.DoFn):
            def process(self, x):
                yield x

        looked = []  # get_dofn_specs starts with dir(dofn)

        class Looked(Count):
            def __dir__(self):
                looked.append(1)
                return super().__dir__()

        with run_pipeline(pipeline_options([])) as p:
            got = p | beam.Create([("a", 1), ("a", 2), ("b", 5)]) | beam.ParDo(Count())
            beam.testing.util.assert_that(got, beam.testing.util.equal_to([("a", 1), ("a", 3), ("b", 5)]))
        cached = userstate.get_dofn_specs
        print(cached is not original, getattr(cached, "__wrapped_original__", None) is original)
        count, plain = Looked(), Plain()
        seen = [cached(count), cached(count), cached(plain), cached(plain)]
        print(len(looked), cached(count)[0] == seen[0][0], len(looked))  # once per object
        print(seen[0] == seen[1] == original(count), seen[0] is not seen[1] and seen[0][0] is not seen[1][0],
              seen[2] == original(plain) == (set(), set()))
        print(sorted(s.name for s in seen[0][0]), userstate.is_stateful_dofn(count), userstate.is_stateful_dofn(plain))
        seen[0][0].clear()  # a caller changing its set changes no later answer
        print(len(cached(count)[0]))
        key = id(count)
        print(key in _beam._SPECS, end=" ")
        del count, seen
        gc.collect()
        print(key not in _beam._SPECS)
    """.replace("beam.testing.util", "__import__('apache_beam.testing.util').testing.util"))
    assert out.splitlines() == ["True True", "1 True 1", "True True True", "['total'] True False", "1", "True True"]


def test_a_pipeline_run_reads_a_process_methods_source_once(tmp_path):
    """``_beam.cache_dofn_sources``: Beam reads the source of a ``DoFn``'s ``process`` for every
    ``ParDo`` (its yield-and-return check); after a run the text is read once per code object, is
    Beam's own text, and the check still answers and warns on every ``ParDo`` as before (fast44)."""
    script = tmp_path / "child.py"  # a file: the methods' source is read from it
    script.write_text(textwrap.dedent("""
        import inspect, logging
        from apache_beam.transforms import core
        from fair_forge_beam._beam import beam
        from fair_forge_beam.beam_pipeline import pipeline_options, run_pipeline

        original = core._get_function_body_without_inners

        class Both(beam.DoFn):
            def process(self, x):
                if x:
                    return [x]
                yield x

        class NoneBack(beam.DoFn):
            def process(self, x):
                return None

        def refused(fn):
            try:
                fn(len)
            except Exception as exc:  # noqa: BLE001
                return type(exc).__name__

        with run_pipeline(pipeline_options([])) as p:
            _ = p | beam.Create([1, 2]) | beam.Map(lambda x: x + 1)
        cached = core._get_function_body_without_inners
        print(cached is not original, getattr(cached, "__wrapped_original__", None) is original)
        reads = []
        real = inspect.getsourcelines
        inspect.getsourcelines = lambda *a, **k: reads.append(1) or real(*a, **k)
        try:
            texts = [cached(Both().process) for _ in range(3)] + [cached(Both.process)]
        finally:
            inspect.getsourcelines = real
        print(len(reads), texts == [original(Both().process)] * 4, "return [x]" in texts[0],
              refused(cached) == refused(original) is not None)
        warned = []
        handler = logging.Handler()
        handler.emit = lambda record: warned.append(record.getMessage())
        logging.getLogger(core.__name__).addHandler(handler)
        print([core._check_fn_use_yield_and_return(Both().process) for _ in range(2)],
              [core._check_fn_use_yield_and_return(NoneBack().process) for _ in range(2)],
              sum("returned None" in w for w in warned))
        beam.ParDo(Both())
        beam.ParDo(Both())
        print(sum("yield and return" in w for w in warned))
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True,
                         timeout=300).stdout.strip()
    assert out.splitlines() == ["True True", "1 True True True", "[True, True] [False, False] 2", "2"]
