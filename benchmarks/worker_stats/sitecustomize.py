"""Per-bundle memory figures of a Beam Python SDK worker (not a test; ``bench_worker_standin.py``).

Put this folder on a worker's ``PYTHONPATH`` and set ``FFB_BUNDLE_STATS=<file>``: Python imports
this module at start-up, and once Beam's ``bundle_processor`` is imported in an SDK worker
(``sdk_worker_main``), every bundle appends one JSON line to the file: its seconds, the worker's
``VmHWM`` over the bundle (reset through ``/proc/self/clear_refs`` at its start) and ``VmRSS`` at
its end, glibc's ``mallinfo2`` at its end (``inuse``, ``free``: freed and kept, ``mapped``: blocks
mapped for themselves, ``arena``), the sample of largest RSS taken every 0.25 s during it
(``peak``: RSS, in use, freed, mapped, Arrow's ``total_allocated_bytes``; MB) and the bundle's
transform names. Without the variable it does nothing.

Diagnostic knobs, each one variable (a candidate at a time):

* ``FFB_STATS_TRACE=1`` — ``tracemalloc`` on: each bundle's traced peak, and the 25 largest
  lines of a snapshot taken at the bundle's highest traced memory (slow: about 5x);
* ``FFB_STATS_TRIM=1`` — ``malloc_trim(0)`` after every bundle (``rss_trimmed``: RSS after it);
* ``FFB_STATS_ARENAS=N`` — ``mallopt(M_ARENA_MAX, N)`` before the first bundle;
* ``FFB_STATS_REDUCE_BATCH=N`` — ``engine.SESSION_REDUCE_BATCH`` = N in the worker;
* ``FFB_STATS_FLUSH=BYTES`` — the worker's output streams flushed at BYTES instead of Beam's 10 MB
  (Beam's own class patched: a diagnosis, never a fix).
"""
import os

_PATH = os.environ.get("FFB_BUNDLE_STATS")

if _PATH:
    import builtins
    import ctypes
    import json
    import sys
    import threading
    import time

    _import = builtins.__import__
    _libc = ctypes.CDLL(None)
    _MB = 1 << 20

    class _MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

    _libc.mallinfo2.restype = _MallInfo2

    def _rss_mb() -> dict:
        out = {}
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("VmHWM", "VmRSS")):
                    out[line.split(":")[0]] = int(line.split()[1]) // 1024
        return out

    def _arrow_mb() -> int:
        pa = sys.modules.get("pyarrow")
        return pa.total_allocated_bytes() // _MB if pa is not None else 0

    def _instrument() -> None:
        from apache_beam.runners.worker import bundle_processor

        if os.environ.get("FFB_STATS_ARENAS"):
            _libc.mallopt(-8, int(os.environ["FFB_STATS_ARENAS"]))  # M_ARENA_MAX
        if os.environ.get("FFB_STATS_REDUCE_BATCH"):
            import fair_forge_beam.engine as engine

            engine.SESSION_REDUCE_BATCH = int(os.environ["FFB_STATS_REDUCE_BATCH"])
        if os.environ.get("FFB_STATS_FLUSH"):
            from apache_beam.runners.worker import data_plane

            init = data_plane.SizeBasedBufferingClosableOutputStream.__init__
            init.__defaults__ = (None, None, int(os.environ["FFB_STATS_FLUSH"]), 512 << 20)
        trace = bool(os.environ.get("FFB_STATS_TRACE"))
        trim = bool(os.environ.get("FFB_STATS_TRIM"))
        if trace:
            import tracemalloc

            tracemalloc.start(1)
        process = bundle_processor.BundleProcessor.process_bundle

        def process_bundle(self, instruction_id, *args, **kwargs):
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")  # VmHWM := VmRSS
            except OSError:
                pass
            if trace:
                tracemalloc.reset_peak()
            t0, stop, samples, high = time.time(), threading.Event(), [], {"traced": 0, "snapshot": None, "n": 0}

            def sample():
                while not stop.wait(0.25):
                    mi = _libc.mallinfo2()
                    samples.append((_rss_mb()["VmRSS"], mi.uordblks // _MB, mi.fordblks // _MB, mi.hblkhd // _MB, _arrow_mb()))
                    if trace:
                        traced = tracemalloc.get_traced_memory()[0]
                        if traced > high["traced"] + 8 * _MB and high["n"] < 12:
                            high.update(traced=traced, snapshot=tracemalloc.take_snapshot(), n=high["n"] + 1)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            try:
                return process(self, instruction_id, *args, **kwargs)
            finally:
                stop.set()
                sampler.join()
                st, mi = _rss_mb(), _libc.mallinfo2()
                rec = {"pid": os.getpid(), "t": round(t0, 1), "s": round(time.time() - t0, 1), "hwm": st["VmHWM"], "rss_end": st["VmRSS"],
                       "inuse": mi.uordblks // _MB, "free": mi.fordblks // _MB, "mapped": mi.hblkhd // _MB,
                       "arena": mi.arena // _MB, "arrow": _arrow_mb(), "peak": max(samples, default=None),
                       "names": sorted(t.unique_name for t in self.process_bundle_descriptor.transforms.values()
                                       if not t.unique_name.startswith("ref_"))}
                if trace:
                    rec["traced_peak"] = tracemalloc.get_traced_memory()[1] // _MB
                    if high["snapshot"] is not None:
                        rec["traced_at_snapshot"] = high["traced"] // _MB
                        rec["traced_top"] = [(str(s.traceback[0]), s.size // 1024, s.count)
                                             for s in high["snapshot"].statistics("lineno")[:25]]
                if trim:
                    _libc.malloc_trim(0)
                    rec["rss_trimmed"] = _rss_mb()["VmRSS"]
                with open(_PATH, "a") as f:
                    f.write(json.dumps(rec) + "\n")

        bundle_processor.BundleProcessor.process_bundle = process_bundle

    _done = []

    def _watch(name, *args, **kwargs):
        module = _import(name, *args, **kwargs)
        bp = sys.modules.get("apache_beam.runners.worker.bundle_processor")
        if not _done and hasattr(bp, "BundleProcessor"):  # imported (once: imports nest)
            _done.append(True)
            builtins.__import__ = _import
            if "sdk_worker_main" in " ".join(sys.argv):  # an SDK worker, not the launcher
                _instrument()
        return module

    builtins.__import__ = _watch
