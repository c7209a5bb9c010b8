"""Conversational on one long session (issue 28 T8; not a test): peak memory and dead letters.

Every turn's judge prompt carries the session's earlier turns, so their total length is quadratic
in the turns. The trial found a 3,000-turn session (0.9 MB) peaking at 3.52 GB (1,000 turns:
1.26 GB) and turns 1,416..3,000 dead-lettered "prompt ... over the limit of 400,000 characters".

Builds one session of ``--turns`` turns (about 300 bytes a turn, seeded), answers every judge
call with a fixed verdict from :class:`~fair_forge_beam.testing.openai_server.ScriptedOpenAIServer`
in this process (its request log emptied every second: it is not what is measured), and runs
the main job from each ``--tree`` as a subprocess under ``/usr/bin/time -v``:
``--metrics conversational --mode bayesian --judge-max-concurrency 32``. A watchdog kills a run
whose resident memory passes ``--kill-gb`` (default 3.9). Prints per tree and size the peak
RSS, the turns scored, the dead letters and the ``history_cut`` warnings, then the ratios of
the last tree's peaks to the first's.

    python benchmarks/bench_long_session.py --tree /work/main --tree . --turns 1000 3000
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from fair_forge_beam.schemas.conversational import DIMENSIONS
from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

WORDS = "account balance transfer card limit branch loan rate payment statement fee deposit".split()


def write_session(path: Path, turns: int, seed: int = 1) -> int:
    rng = random.Random(seed)

    def text(n):
        return " ".join(rng.choice(WORDS) for _ in range(n))

    conv = [{"qa_id": f"q{t}", "query": f"Question {t}: {text(10)}?", "assistant": f"Answer {t}: {text(17)}.",
             "ground_truth_assistant": text(6)} for t in range(turns)]
    line = json.dumps({"session_id": "long", "assistant_id": "bot", "language": "english",
                       "context": "You are a bank assistant.", "conversation": conv})
    path.write_text(line + "\n")
    return len(line) + 1


def rss_kb(pid: int) -> int:
    """Resident memory of ``pid`` and its descendants, in kB."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += int(re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{p}/status").read_text()).group(1))
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, AttributeError, ValueError):
            pass
    return total


def run_job(tree: str, data: Path, out: Path, url: str, cache: Path, kill_kb: int) -> dict:
    argv = ["/usr/bin/time", "-v", sys.executable, "-m", "pipelines.audit", "--input", str(data),
            "--metrics", "conversational", "--mode", "bayesian", "--output", str(out), "--judge-base-url", url,
            "--judge-model", "m", "--judge-cache", str(cache), "--judge-max-concurrency", "32", "--quiet"]
    env = {**os.environ, "PYTHONPATH": tree}
    t0 = time.monotonic()
    p = subprocess.Popen(argv, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    killed = False

    def watch():
        nonlocal killed
        while p.poll() is None:
            if rss_kb(p.pid) > kill_kb:
                killed = True
                os.killpg(p.pid, 9)
                return
            time.sleep(0.5)

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    _stdout, stderr = p.communicate()
    w.join()
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr)
    res = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else {}
    conv = (res.get("summary", {}).get("metrics", {}) or {}).get("conversational", {})
    by_kind = res.get("summary", {}).get("data_quality_by_kind", {})
    return {"tree": tree, "exit": p.returncode, "killed_over_limit": killed, "peak_rss_kb": int(m.group(1)) if m else None,
            "wall_s": round(time.monotonic() - t0, 1), "scored": conv.get("interactions_scored"),
            "dead_letters": conv.get("dead_letters"), "history_cut": by_kind.get("history_cut", 0),
            "stderr_tail": stderr.splitlines()[-30:-22] if p.returncode else []}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", action="append", default=None, help="checkout to run the job from (repeatable; default: this one)")
    ap.add_argument("--turns", type=int, nargs="+", default=[1000, 3000])
    ap.add_argument("--kill-gb", type=float, default=3.9)
    args = ap.parse_args(argv)
    trees = [str(Path(t).resolve()) for t in (args.tree or [Path(__file__).resolve().parent.parent])]
    verdict = {**dict.fromkeys(DIMENSIONS, 5.0), "insight": "ok"}
    rows = []
    with tempfile.TemporaryDirectory() as tmp, ScriptedOpenAIServer(verdict) as srv:
        stop = threading.Event()

        def forget():  # the server's request log is not what is measured: keep it small
            while not stop.wait(1.0):
                srv.reset_counts()

        threading.Thread(target=forget, daemon=True).start()
        for n in args.turns:
            data = Path(tmp) / f"long{n}.jsonl"
            size = write_session(data, n)
            for k, tree in enumerate(trees):
                out = Path(tmp) / f"out{n}_{k}"
                r = run_job(tree, data, out, srv.base_url, Path(tmp) / f"cache{n}_{k}.sqlite3", int(args.kill_gb * 2**20))
                r.update(turns=n, input_bytes=size)
                rows.append(r)
                print(json.dumps(r), flush=True)
        stop.set()
    for n in args.turns:
        peaks = [r["peak_rss_kb"] for r in rows if r["turns"] == n]
        if len(peaks) > 1 and all(peaks):
            print(f"{n} turns: peak RSS {peaks[0] / 2**20:.2f} GB -> {peaks[-1] / 2**20:.2f} GB "
                  f"(ratio {peaks[-1] / peaks[0]:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
