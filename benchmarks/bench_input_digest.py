"""Input digest benchmark (trial 28g G7, 28h H14; not a test): what recording the sha256 of every input
file and the order-independent digest of its records (``rollup.input_fingerprints``, so that a
roll-up refuses a renamed, copied or reordered log) adds to an audit, as a ratio of the audit's CPU,
measured in one run; and the content digest alone (``rollup.content_digest``, what it cost before
the records digest) in the same run.

For each data set — the README's first command's data (the package's example files, ``--metrics
humanity,toxicity --mode bayesian``) and a synthetic file of ``--interactions`` interactions
(``benchmarks/bench_engine.py``'s generator; ``--metrics humanity,toxicity --group-extractor keyword
--mode frequentist``) — it runs the audit as a child of this interpreter (``sys.executable -m
pipelines.audit``; CPU seconds of the finished child), then ``input_fingerprints`` of the same
inputs ``--rounds`` times in a child (the digest alone, after a first call that imports what it uses: CPU of the calls
in it) and prints both, and the ratio digest / audit; then ``content_digest`` of each file alike.

    python benchmarks/bench_input_digest.py                      # README data, and 100,000 interactions
    python benchmarks/bench_input_digest.py --interactions 20000
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.bench_engine import write_sessions  # noqa: E402
from benchmarks.bench_rollup import timed  # noqa: E402

_DIGEST = ("import json, sys, time; from fair_forge_beam.rollup import input_fingerprints, content_digest; "
           "rounds, mode = int(sys.argv[1]), sys.argv[2]; files = sys.argv[3:]; input_fingerprints([]); "
           "fn = (lambda fs: input_fingerprints(fs)) if mode == 'both' else (lambda fs: [content_digest(f) for f in fs]); "
           "t = time.process_time(); [fn(files) for _ in range(rounds)]; "
           "print(json.dumps((time.process_time() - t) / rounds))")


def digest_cpu(files: list[str], rounds: int, mode: str = "both") -> float:
    out = subprocess.run([sys.executable, "-c", _DIGEST, str(rounds), mode, *files], cwd=ROOT, capture_output=True,
                         text=True, check=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    return float(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--interactions", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    from pipelines.audit import default_inputs

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        big = work / "big.jsonl"
        write_sessions(str(big), args.interactions, 0)
        cases = [("README data", list(default_inputs()), ["--metrics", "humanity,toxicity", "--mode", "bayesian"]),
                 (f"{args.interactions:,} interactions", [str(big)],
                  ["--metrics", "humanity,toxicity", "--group-extractor", "keyword", "--mode", "frequentist"])]
        for name, files, opts in cases:
            size = sum(Path(f).stat().st_size for f in files)
            cmd = [sys.executable, "-m", "pipelines.audit", "--quiet", "--no-report", *opts,
                   *[a for f in files for a in ("--input", f)], "--output", str(work / "out")]
            audit_cpu, wall = timed(cmd, work / "audit.log")
            digest = digest_cpu(files, args.rounds)
            content = digest_cpu(files, args.rounds, "content")
            print(json.dumps({"data": name, "bytes": size, "audit_cpu_s": round(audit_cpu, 2),
                              "audit_wall_s": round(wall, 2), "digests_cpu_s": round(digest, 4),
                              "digests_over_audit": round(digest / audit_cpu, 5),
                              "content_digest_only_cpu_s": round(content, 4),
                              "content_digest_only_over_audit": round(content / audit_cpu, 5)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
