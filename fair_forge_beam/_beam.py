"""Import Apache Beam without changing the host application's logging (case-006).

When the optional ``apitools`` package is missing, ``import apache_beam`` logs a warning
through the *root* logger; with no handler configured yet, Python's ``logging.warning`` then
calls ``basicConfig()`` and installs a stderr handler, so an application that configures
logging after importing us would find its ``basicConfig`` silently ignored. Every module of
this package imports Beam through here: a temporary ``NullHandler`` keeps the root logger
untouched during that first import.
"""
import logging

_root = logging.getLogger()
_guard = None
if not _root.handlers:
    _guard = logging.NullHandler()
    _root.addHandler(_guard)
try:
    import apache_beam as beam  # noqa: E402
finally:
    if _guard is not None:
        _root.removeHandler(_guard)

__all__ = ["beam"]

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
    runner) and by the ``setup`` of the heavy ``DoFn``\\ s (an SDK worker process of Flink, Prism or
    the multi-process runner)."""
    import gc

    threshold = gc.get_threshold()
    if threshold[0] < GC_THRESHOLD0:
        gc.set_threshold(GC_THRESHOLD0, *threshold[1:])


__all__ += ["tune_gc", "GC_THRESHOLD0"]
