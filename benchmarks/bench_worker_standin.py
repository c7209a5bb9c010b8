"""One SDK worker's memory per stage, without Flink (issue 26; not a test): the keyword audit of
``bench_flink_scale.py`` on Beam's FnApiRunner with ``--direct_running_mode=multi_processing
--direct_num_workers=1`` (one worker process, one bundle per stage, as a Flink worker runs a
partition), the runner's input sent to the worker in element-aligned messages of about 1 MB (as
Flink's runner does; Beam's in-memory runner sends a grouped input as one message).

For each size of ``--sizes`` (``bench_engine.py``'s seeded sessions) and each ``--variant "LABEL
[NAME=VALUE ...]"`` (variables for the launcher and its worker, e.g. ``FFB_STATS_TRIM=1``; see
``worker_stats/sitecustomize.py``) the audit runs as a child process with ``worker_stats`` on its
``PYTHONPATH`` after this checkout, and the worker writes one JSON line per bundle to
``<work>/stats-<LABEL>-<N>.jsonl``. The script prints, per run, the worker's peak and the peak of
each bundle of a second or more, with glibc's in-use, freed and mapped MB and Arrow's MB at the
sample of largest RSS.

``--slow S``: the launcher takes each worker message of 1 MB or more S seconds late (backpressure,
as a busy Flink JVM). One run per line: only ratios within one invocation count on a shared
machine. A 500k run hung once (the worker waiting on its input; cause not found).

    python benchmarks/bench_worker_standin.py --sizes 50000,200000 --variant base \\
        --variant "trim FFB_STATS_TRIM=1" --variant "arenas FFB_STATS_ARENAS=2"
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATS_SITE = Path(__file__).resolve().parent / "worker_stats"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.bench_engine import write_sessions  # noqa: E402

AUDIT = ["--metrics", "humanity,toxicity", "--group-extractor", "keyword", "--quiet",
         "--runner", "apache_beam.runners.portability.fn_api_runner.FnApiRunner",
         "--direct_running_mode=multi_processing", "--direct_num_workers=1"]

CHILD = """
import json, os, resource, sys, time
from apache_beam.coders.coder_impl import create_InputStream
from apache_beam.runners.portability.fn_api_runner import fn_runner
from apache_beam.runners.worker import data_plane

MESSAGE = 1 << 20


def send_in_messages(self, process_bundle_id, read_transform_id, byte_streams):
    # the runner's input for a bundle, cut at element boundaries into messages of about 1 MB
    out = self._worker_handler.data_conn.output_stream(process_bundle_id, read_transform_id)
    coder = None
    for data in byte_streams or []:
        if len(data) <= MESSAGE:
            out.write(data)
            out.flush()  # a message of its own (the stream would gather up to 10 MB)
            continue
        coder = coder or self.bundle_context_manager.get_input_coder_impl(read_transform_id)
        stream, start = create_InputStream(data), 0
        while stream.size() > 0:
            coder.decode_from_stream(stream, True)
            end = len(data) - stream.size()
            if end - start >= MESSAGE or stream.size() == 0:
                out.write(data[start:end])
                out.flush()
                start = end
    out.close()


fn_runner.BundleManager._send_input_to_worker = send_in_messages
slow = float(os.environ.get("FFB_STANDIN_SLOW") or 0)
if slow:
    read_inputs = data_plane._GrpcDataChannel._read_inputs

    def late_reader(self, elements):
        def late():
            for message in elements:
                if sum(len(d.data) for d in message.data) >= MESSAGE:
                    time.sleep(slow)
                yield message
        return read_inputs(self, late())

    data_plane._GrpcDataChannel._read_inputs = late_reader
from pipelines import audit

t0 = time.time()
code = audit.main(sys.argv[1:])
print(json.dumps({"code": code, "wall_s": time.time() - t0}))
"""


def run(data: Path, out: Path, stats: Path, env: dict, slow: float) -> dict:
    """The audit on ``data`` as a child process; returns its wall/CPU seconds and the bundles' records."""
    stats.unlink(missing_ok=True)
    env = {**os.environ, **env, "FFB_BUNDLE_STATS": str(stats), "FFB_STANDIN_SLOW": str(slow),
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(STATS_SITE), os.environ.get("PYTHONPATH", "")])}
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, *AUDIT, "--input", str(data), "--output", str(out)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=out.parent)
    log, _ = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"audit failed ({proc.returncode}):\n" + log.decode(errors="replace")[-3000:])
    bundles = [json.loads(line) for line in stats.read_text().splitlines()]
    return {"wall_s": time.time() - t0, "bundles": bundles}


def summary(label: str, n: int, rec: dict) -> str:
    bundles = rec["bundles"]
    lines = [f"{label} {n:,}: worker peak {max(b['hwm'] for b in bundles)} MB, wall {rec['wall_s']:.1f} s"]
    for b in bundles:
        if b["s"] >= 1.0:
            names = [x for x in b["names"] if "/" not in x][:3] or b["names"][:2]
            rss, inuse, free, mapped, arrow = b["peak"] or (0,) * 5
            lines.append(f"  {b['hwm']:5d} MB over {b['s']:6.1f} s; at the largest sample in use {inuse}, freed {free}, "
                         f"mapped {mapped}, Arrow {arrow} MB" + (f"; after trim {b['rss_trimmed']}" if "rss_trimmed" in b else "")
                         + f"  {names}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="50000,200000")
    ap.add_argument("--variant", action="append", default=[], metavar='"LABEL [NAME=VALUE ...]"')
    ap.add_argument("--slow", type=float, default=0.0, help="seconds the launcher waits before each worker message >= 1 MB")
    ap.add_argument("--work", help="working folder, kept (default: a new temporary folder)")
    a = ap.parse_args(argv)
    work = Path(a.work or tempfile.mkdtemp(prefix="standin-"))
    work.mkdir(parents=True, exist_ok=True)
    variants = []
    for text in a.variant or ["base"]:
        label, *assignments = text.split()
        variants.append((label, dict(x.split("=", 1) for x in assignments)))
    records = {}
    for n in (int(x) for x in a.sizes.split(",")):
        data = work / f"sessions-{n}.jsonl"
        if not data.exists():
            write_sessions(str(data), n, 0)
        for label, env in variants:
            rec = run(data, work / f"out-{label}-{n}", work / f"stats-{label}-{n}.jsonl", env, a.slow)
            records[f"{label}-{n}"] = rec
            print(summary(label, n, rec), flush=True)
    (work / "standin.json").write_text(json.dumps(records))
    print(f"records: {work / 'standin.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
