"""README's main job, CPU seconds from two (or more) trees, interleaved (issue 26's target: at most
5 CPU s on the shipped 2,042 interactions).

Each run is ``sys.executable -m pipelines.audit ARGS`` with ``PYTHONPATH=<tree>`` and ``cwd=<tree>``,
ARGS the README's own command of that tree (``outputs_identity.readme_command``) with ``--output``
replaced by a fresh folder outside the tree. Bytecode is cached for every tree alike
(``PYTHONPYCACHEPREFIX`` under the work folder, written; ``--warmup`` uncounted runs per tree fill it). A child's CPU is the growth of
``getrusage(RUSAGE_CHILDREN)`` (user + sys) over its run, so it counts the job and every process it
waited for. Rounds interleave the trees (A B A B ..., the order alternating each round)::

    git worktree add --detach /work/base 92584cb
    python benchmarks/bench_readme.py --tree /work/base --tree . --rounds 3

Prints each run (CPU user/sys, wall, load average at its start), then per tree the median CPU and
the ratio of each tree's median to the first tree's.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from outputs_identity import readme_command  # noqa: E402


def readme_args(tree: Path, out: Path) -> list:
    args = readme_command(tree)
    if "--output" in args:
        i = args.index("--output")
        args = args[:i] + args[i + 2:]
    return [*args, "--output", str(out)]


def run_once(tree: Path, out: Path, pycache: Path) -> dict:
    if out.exists():
        shutil.rmtree(out)
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONPYCACHEPREFIX=str(pycache))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pipelines.audit", *readme_args(tree, out)],
                          cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: exit {proc.returncode}\n{proc.stderr.decode(errors='replace')[-2000:]}")
    user, sys_ = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    return {"user": user, "sys": sys_, "cpu": user + sys_, "wall": wall, "load": load}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", action="append", required=True, type=Path, help="a checkout (twice or more)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=None, help="folder for the outputs (default: a temp dir)")
    ap.add_argument("--warmup", type=int, default=1, help="uncounted runs of each tree first (default 1)")
    a = ap.parse_args(argv)
    trees = [t.resolve() for t in a.tree]
    work = a.work or Path(tempfile.mkdtemp(prefix="bench_readme_"))
    work.mkdir(parents=True, exist_ok=True)
    # every tree's bytecode cached alike (a user's steady state: compiled once), in one prefix outside
    # the trees: otherwise a checkout with __pycache__ folders is compared with one that compiles its
    # modules on every run (PYTHONDONTWRITEBYTECODE set, or a fresh worktree)
    pycache = work / "pycache"
    for t in trees:
        for _ in range(a.warmup):
            run_once(t, work / "out", pycache)
    cpu = {t: [] for t in trees}
    for r in range(a.rounds):
        order = trees if r % 2 == 0 else trees[::-1]
        for t in order:
            m = run_once(t, work / "out", pycache)
            cpu[t].append(m["cpu"])
            print(f"round {r + 1} {t}: cpu {m['cpu']:.2f} s (user {m['user']:.2f} + sys {m['sys']:.2f}), "
                  f"wall {m['wall']:.2f} s, load {m['load']:.2f}", flush=True)
    base = statistics.median(cpu[trees[0]])
    print(f"{'tree':<40} {'median CPU s':>12} {'min':>7} {'ratio':>7}")
    for t in trees:
        med = statistics.median(cpu[t])
        print(f"{str(t):<40} {med:>12.2f} {min(cpu[t]):>7.2f} {med / base:>7.3f}")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if a.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
