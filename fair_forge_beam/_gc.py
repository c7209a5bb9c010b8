"""The cyclic garbage collector's threshold in a process that runs our pipelines: no Beam import
here, so that a command raises it before it imports Beam, pyarrow, scikit-learn or matplotlib
(:func:`fair_forge_beam.console.starting`). ``fair_forge_beam._beam`` re-exports both names.
:func:`unscanned_imports` keeps the collector off the objects the large imports make."""
from __future__ import annotations

import contextlib
from typing import Iterator

#: the cyclic garbage collector's generation-0 threshold in a process that runs our pipelines
#: (CPython's default: 700), see :func:`tune_gc`
GC_THRESHOLD0 = 50_000


def tune_gc() -> None:
    """Raise the cyclic garbage collector's generation-0 threshold to :data:`GC_THRESHOLD0` (the
    generation-1 and -2 thresholds stay as they are) in this process, once; a lower threshold the
    application set itself is raised too, a higher one kept.

    Why: a pipeline allocates container objects fast (decoded elements, accumulators) and holds
    many of them (a bundle's elements, a combine's table), so under CPython's default of 700 the
    collector runs full collections over millions of live objects again and again; it frees
    almost nothing (our data holds no reference cycles to speak of). Measured on this package's
    roll-up of 7 Bayesian audits of 100k interactions (``benchmarks/bench_gc.py``): 31 full
    collections took 5.0 of 32.7 CPU seconds; with this threshold, 3 took 0.17 s (CPU 0.876×). Reference counting frees
    everything else as before; only cyclic garbage waits longer (up to 50,000 net allocations).
    Called by :func:`fair_forge_beam.beam_pipeline.run_pipeline` (the launcher and an in-process
    runner), by the ``setup`` of the heavy ``DoFn``\\ s (an SDK worker process of Flink, Prism or
    the multi-process runner) and, first, by :func:`fair_forge_beam.console.starting` (a command's
    process, before its imports: README's job collected 408 times in 0.40-0.46 CPU s, 398 of them
    before its pipeline started; raised first, 16 times in 0.28 CPU s; issue 26)."""
    import gc

    threshold = gc.get_threshold()
    if threshold[0] < GC_THRESHOLD0:
        gc.set_threshold(GC_THRESHOLD0, *threshold[1:])


@contextlib.contextmanager
def unscanned_imports() -> Iterator[None]:
    """A block that imports the large libraries a job needs (Beam with pandas and pyarrow, scikit-learn
    with ``scipy.stats``, matplotlib): the cyclic collector is paused while it runs and, when it
    imported a module, every object then tracked is moved to the permanent generation
    (:func:`gc.freeze`); the collector runs again afterwards if it ran before.

    Why: an import makes hundreds of thousands of container objects (functions, classes, their
    dictionaries) that live as long as the process, and each young collection walks every one of
    them once more, for nothing. README's job (issue 26) ran 8 of its 12 collections, about 0.23 of
    0.31 CPU s of collecting, inside these imports; frozen, they are never walked again, and the
    collections left walk the job's own objects only (docs/performance.md).

    What it costs: a reference cycle that is garbage at the freeze (an import leaves a few thousand
    such objects) or that later closes among frozen objects is never freed; reference counting frees
    everything else as before. A freeze happens only when the block imported something new, so at
    most once per library per process (a process running many audits freezes at its first).
    Reentrant: a nested block leaves the collector paused for the outer one."""
    import gc
    import sys

    before = len(sys.modules)
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if len(sys.modules) != before:
            gc.freeze()
        if was:
            gc.enable()
