"""``benchmarks/bench_engine.py`` times every run in a process of its own, the audits as the user's
command (docs/performance.md, "2026-12-06 (later): in one process or one per run"): a run in the
benchmark's own process inherits what the earlier runs left there (imports, Beam's memos, glibc's
heap state) and flattered the Bayesian audit. The child processes are replaced by a recorder here,
so nothing heavy runs; ``pipelines.audit.run`` in this process fails the test."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("_bench_engine_for_tests", ROOT / "benchmarks" / "bench_engine.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_run_is_a_process_of_its_own_the_audits_the_users_command(tmp_path, monkeypatch, capsys):
    bench = _bench()
    import pipelines.audit

    def in_this_process(*a, **k):
        raise AssertionError("an audit ran in the benchmark's own process")

    monkeypatch.setattr(pipelines.audit, "run", in_this_process)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    calls = []

    def recorder(cmd, **kw):
        calls.append((list(cmd), kw))
        if "--part" in cmd:
            part = cmd[cmd.index("--part") + 1]
            n = 40 if "warmup" in cmd[cmd.index("--data") + 1] else 50
            out = ({"seconds": 0.1, "counted": n} if part == "floor"
                   else {"seconds": 0.2, "parts": {"read": 0.01, "humanity": 0.01, "toxicity": 0.02}})
            return subprocess.CompletedProcess(cmd, 0, stdout=json.dumps(out) + "\n", stderr="")
        return subprocess.CompletedProcess(cmd, 0, stdout="", stderr="")

    monkeypatch.setattr(bench.subprocess, "run", recorder)
    clock = iter(range(1, 10_000))  # the children's CPU seconds, growing by one per look
    monkeypatch.setattr(bench.resource, "getrusage",
                        lambda who: SimpleNamespace(ru_utime=float(next(clock)), ru_stime=0.0))
    data = tmp_path / "s.jsonl"
    assert bench.main(["--n", "50", "--repeat", "2", "--data", str(data)]) == 0
    printed = capsys.readouterr().out

    audits = [c for c, _ in calls if c[1:3] == ["-m", "pipelines.audit"]]
    modes = [c[c.index("--mode") + 1] for c in audits]
    # one warm-up of each mode, then the two rounds, interleaved; every one a process of its own
    assert modes == ["frequentist", "bayesian"] * 3
    for c in audits:
        assert c[0] == sys.executable
        assert c[c.index("--input") + 1] in (str(data), str(Path(c[c.index("--output") + 1]).parent / "warmup.jsonl"))
        for flag in ("--no-report", "--quiet"):
            assert flag in c
        assert c[c.index("--metrics") + 1] == "humanity,toxicity"
        assert c[c.index("--group-extractor") + 1] == "keyword"
    parts = [c[c.index("--part") + 1] for c, _ in calls if "--part" in c]
    assert parts == ["floor", "work"] * 3
    for _, kw in calls:
        env = kw["env"]
        assert "PYTHONDONTWRITEBYTECODE" not in env  # bytecode written once, imported alike by every run
        assert env["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)  # this checkout's code
        assert Path(kw["cwd"]) == ROOT
    # the lines other tools read are still printed
    for line in ("run 1: floor", "run 2: floor", "audit / work alone (frequentist):", "bayesian / frequentist:",
                 "audit / floor (frequentist):", "load average"):
        assert line in printed


def test_a_part_run_prints_its_result_as_json(tmp_path, capsys, monkeypatch):
    bench = _bench()
    monkeypatch.setattr(bench, "run_floor", lambda path, out, beam_args: (1.5, 7))
    assert bench.main(["--part", "floor", "--data", str(tmp_path / "x.jsonl"), "--part-output", str(tmp_path / "c")]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == {"seconds": 1.5, "counted": 7}


@pytest.mark.parametrize("mode", ["frequentist", "bayesian"])
def test_audit_command_is_the_users(mode):
    bench = _bench()
    cmd = bench.audit_command("in.jsonl", mode, "out", ["--direct_num_workers=2"])
    assert cmd[:3] == [sys.executable, "-m", "pipelines.audit"]
    assert cmd[3:] == ["--input", "in.jsonl", "--metrics", "humanity,toxicity", "--group-extractor", "keyword",
                       "--mode", mode, "--no-report", "--quiet", "--output", "out", "--direct_num_workers=2"]
