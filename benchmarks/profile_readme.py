"""Where README's main job spends its CPU: a sampling profile of one run, in this process (issue 26).

Runs README's own command (``outputs_identity.readme_command``, ``--output`` replaced by a fresh
folder) as ``pipelines.audit`` does, while ``signal.ITIMER_PROF`` interrupts it every ``--interval``
of process CPU; each interrupt records the Python stack of the running thread (the main thread,
else a thread that is not waiting: a bundle processor's ``ExecutionTreeCreator``). Prints the share
of samples, and of the run's CPU, of each kind of work (the first rule that matches a sample's stack
wins), then the ``--top`` functions by inclusive share::

    PYTHONPATH=. python benchmarks/profile_readme.py [--interval 0.002] [--top 40]

Shares are of samples: an interrupt that arrives while the previous one is handled is lost, so the
seconds are the shares times the run's CPU, not counts. Bytecode as the interpreter finds it (run a
job once first for cached bytecode).
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import io
import os
import resource
import runpy
import signal
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_readme import readme_args  # noqa: E402

#: (label, frames as (file name ending, function name)): the first rule a sample's stack matches
RULES = [
    ("the classifier's import (scikit-learn, scipy.stats)", [("components/toxicity_classifier.py", "setup")]),
    ("report: matplotlib's import", [("reports/plots.py", "<module>")]),
    ("report: SVG rendering", [("reports/plots.py", "figure_svg")]),
    ("report: the rest", [("reports/launcher_reports.py", "write_launcher_reports")]),
    ("graph: the sharded sinks", [("io/write.py", "write_parquet"), ("io/write.py", "write_jsonl"),
                                  ("io/write.py", "parquet"), ("io/write.py", "jsonl"), ("io/write.py", "expand")]),
    ("graph: the rest", [("pipelines/audit.py", "build")]),
    ("bundle processors' construction", [("worker/bundle_processor.py", "__init__")]),
    ("bundles' work", [("worker/bundle_processor.py", "process_bundle")]),
    ("runner: translation, scheduling", [("fn_api_runner/fn_runner.py", "run_pipeline")]),
    ("imports before the job", [("<frozen importlib._bootstrap>", "_find_and_load")]),
]
_WAITING = {"wait", "result", "_wait_for_tstate_lock", "acquire", "select", "get", "_worker", "poll", "sleep",
            "join", "recv", "readinto", "run"}


def _matches(stack: tuple, pats: list) -> bool:
    return any(file.endswith(end) and name == fn for file, _, name in stack for end, fn in pats)


def profile(args: list, interval: float) -> tuple[collections.Counter, float]:
    """Run ``pipelines.audit`` with ``args`` here; returns (samples by stack, CPU seconds of the run)."""
    samples: collections.Counter = collections.Counter()
    main_id = threading.main_thread().ident

    def on_tick(_sig, frame):
        picked = frame  # where the main thread was interrupted (the handler runs there)
        if frame is None or frame.f_code.co_name in _WAITING:  # it waits: for a thread that does not?
            frames = sys._current_frames()
            picked = next((f for t, f in frames.items() if t != main_id and f.f_code.co_name not in _WAITING),
                          frame)
        stack = []
        while picked is not None:
            stack.append((picked.f_code.co_filename, picked.f_code.co_firstlineno, picked.f_code.co_name))
            picked = picked.f_back
        samples[tuple(reversed(stack))] += 1

    before = resource.getrusage(resource.RUSAGE_SELF)
    old = signal.signal(signal.SIGPROF, on_tick)
    signal.setitimer(signal.ITIMER_PROF, interval, interval)
    argv = sys.argv
    sys.argv = ["fair-forge-beam", *args]
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the job's summary is not the profile
            runpy.run_module("pipelines.audit", run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        signal.signal(signal.SIGPROF, old)
        sys.argv = argv
    after = resource.getrusage(resource.RUSAGE_SELF)
    return samples, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--interval", type=float, default=0.002, help="seconds of process CPU between samples")
    ap.add_argument("--top", type=int, default=40, help="functions listed by inclusive share")
    a = ap.parse_args(argv)
    tree = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="profile_readme_") as work:
        samples, cpu = profile(readme_args(tree, Path(work) / "out"), a.interval)
    total = sum(samples.values()) or 1
    kinds: collections.Counter = collections.Counter()
    inclusive: collections.Counter = collections.Counter()
    for stack, n in samples.items():
        label = next((lbl for lbl, pats in RULES if _matches(stack, pats)), "other")
        kinds[label] += n
        for f in set(stack):
            inclusive[f] += n
    print(f"{total} samples, {cpu:.2f} CPU s, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for label in [lbl for lbl, _ in RULES] + ["other"]:
        print(f"{kinds[label] / total * 100:5.1f} %  {kinds[label] / total * cpu:5.2f} s  {label}")
    print(f"\nthe {a.top} functions with the most samples in their stack:")
    for f, n in inclusive.most_common(a.top):
        print(f"{n / total * 100:5.1f} %  {f[0].split('site-packages/')[-1]}:{f[1]}({f[2]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
