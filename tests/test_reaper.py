"""The local clusters and pools of fair_forge_beam.testing end with the process that started them,
however it ends (fair_forge_beam/testing/reaper.py).

Before: every cluster process ran in a session of its own and a killed test run (SIGKILL, a CI
timeout) left its Flink JVMs, job server, Kafka broker and worker pool running, holding gigabytes
and ports. Each test starts an owner process, kills it with SIGKILL (no teardown, no atexit) and
checks that every process it started is gone."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO

#: a process group: a leader that starts a child in its group, both sleeping
_GROUP = ("import subprocess, sys, time\n"
          "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
          "time.sleep(600)\n")

_OWNER = r"""
import json, os, sys, time
from pathlib import Path
from fair_forge_beam.testing import kafka as kf

what, work = sys.argv[1], Path(sys.argv[2])
if what == "pool":
    from fair_forge_beam.testing.beam_runners import WorkerPool
    pool = WorkerPool()
    pool.__enter__()
    print("PIDS " + json.dumps([pool.proc.pid]), flush=True)
elif what == "flink":
    from fair_forge_beam.testing.flink_cluster import FlinkCluster
    cluster = FlinkCluster(task_managers=1, workdir=work, ends_with_owner=True).start()
    print("PIDS " + json.dumps(cluster.pids), flush=True)
else:
    procs = kf.KafkaBroker(work, ends_with_owner=(what != "outlives"))
    for i in range(2):
        procs._spawn(f"group-{i}", [sys.executable, "-c", sys.argv[3]])
    time.sleep(1.0)  # the leaders start their children
    pids = [p.pid for p in procs.procs]
    if what == "stopped":
        procs.stop(timeout=5)
    print("PIDS " + json.dumps(pids), flush=True)
time.sleep(600)
"""


def _members(pgids) -> list[int]:
    """Every live process of the groups ``pgids`` (from /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z" and int(fields[2]) in pgids:
                out.append(int(d.name))
    return out


def _start_owner(tmp_path, what: str) -> tuple[subprocess.Popen, list[int]]:
    owner = subprocess.Popen([sys.executable, "-c", _OWNER, what, str(tmp_path / "work"), _GROUP],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=tmp_path)
    for line in owner.stdout:
        if line.startswith("PIDS "):
            return owner, json.loads(line[5:])
    owner.wait(timeout=10)
    pytest.fail(f"the owner ended before starting anything: {owner.stderr.read()[-3000:]}")


def _gone_within(pgids, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and _members(pgids):
        time.sleep(0.2)
    return _members(pgids)


def _kill_groups(pgids) -> None:
    for g in pgids:
        try:
            os.killpg(g, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _left_after_killing_the_owner(tmp_path, what: str, started: int, wait: float) -> list[int]:
    """Starts an owner of ``what``, checks it started ``started`` processes (0: any), kills it
    with SIGKILL and returns the processes of its groups still alive ``wait`` seconds later (or
    as soon as none is). Whatever is left is killed afterwards."""
    owner, pgids = _start_owner(tmp_path, what)
    try:
        members = _members(pgids)
        assert len(members) == started if started else members, members
        owner.kill()
        owner.wait(timeout=10)
        return _gone_within(pgids, wait)
    finally:
        owner.kill()
        _kill_groups(pgids)


def test_groups_end_with_a_killed_owner(tmp_path):
    assert _left_after_killing_the_owner(tmp_path, "groups", 4, 20) == []  # two leaders, each with its child


def test_without_ends_with_owner_a_cluster_outlives_its_command(tmp_path):
    """The default: ``flink_cluster start`` leaves a cluster for later jobs."""
    assert len(_left_after_killing_the_owner(tmp_path, "outlives", 4, 1.5)) == 4


def test_the_worker_pool_and_its_workers_end_with_a_killed_owner(tmp_path):
    assert _left_after_killing_the_owner(tmp_path, "pool", 0, 20) == []


@pytest.mark.slow
def test_a_flink_cluster_ends_with_a_killed_owner(tmp_path):
    """The JobManager, TaskManager and job server JVMs (SIGTERM, then SIGKILL after 10 s)."""
    from test_runners_integration import _require

    _require("flink")
    assert _left_after_killing_the_owner(tmp_path, "flink", 0, 40) == []


def test_a_group_the_owner_stopped_itself_is_never_signalled_again(tmp_path):
    """``stop`` withdraws the groups and ends the reaper: nothing of the owner's is left, and
    the reaper is not among the owner's children any more."""
    owner, pgids = _start_owner(tmp_path, "stopped")
    try:
        assert len(pgids) == 2 and _members(pgids) == []
        kids = Path(f"/proc/{owner.pid}/task/{owner.pid}/children").read_text().split()
        assert kids == [], kids  # the reaper exited after "done"
    finally:
        owner.kill()
        owner.wait(timeout=10)
