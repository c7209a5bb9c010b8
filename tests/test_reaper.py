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

from fair_forge_beam import procfs

#: a process group: a leader that starts a child in its group, both sleeping (60 s: a stand-in a killed
#: test run leaves behind ends by itself)
_GROUP = ("import subprocess, sys, time\n"
          "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
          "time.sleep(60)\n")

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
elif what == "many":  # three guarded objects: one reaper
    objs = [kf.KafkaBroker(work / str(i), ends_with_owner=True) for i in range(3)]
    for i, o in enumerate(objs):
        o._spawn(f"group-{i}", [sys.executable, "-c", sys.argv[3]])
    time.sleep(1.0)
    print("PIDS " + json.dumps([o.procs[0].pid for o in objs]), flush=True)
else:
    procs = kf.KafkaBroker(work, ends_with_owner=(what != "outlives"))
    for i in range(2):
        procs._spawn(f"group-{i}", [sys.executable, "-c", sys.argv[3]])
    time.sleep(1.0)  # the leaders start their children
    pids = [p.pid for p in procs.procs]
    if what == "stopped":
        procs.stop(timeout=5)
    if what == "fork" and os.fork() == 0:  # a child holding the pipe, that tries to withdraw the groups
        procs._release(pids)
        time.sleep(30)
        os._exit(0)
    print("PIDS " + json.dumps(pids), flush=True)
time.sleep(600)
"""


def _members(pgids) -> list[int]:
    """Every live process of the groups ``pgids`` (from /proc)."""
    return [pid for pid, st in procfs.processes() if not st.ended and st.pgid in pgids]


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


@pytest.mark.slow
def test_groups_end_with_a_killed_owner(tmp_path):
    assert _left_after_killing_the_owner(tmp_path, "groups", 4, 20) == []  # two leaders, each with its child


@pytest.mark.slow
def test_a_child_the_owner_forked_neither_keeps_the_groups_nor_withdraws_them(tmp_path):
    """trial40b B1: the reaper waited for the pipe's end-of-file, which a forked child (holding the
    pipe) delayed until it ended (30-45 s, a Flink cluster too), and a forked child's ``stop`` told
    the reaper "done": the groups outlived their owner. The reaper now watches its parent."""
    started = time.monotonic()
    assert _left_after_killing_the_owner(tmp_path, "fork", 4, 20) == []
    assert time.monotonic() - started < 15  # not the child's 30 s


@pytest.mark.slow
def test_one_reaper_serves_every_guarded_object_of_a_process(tmp_path):
    """trial40b B8: one reaper per guarded object (20 objects, 20 processes of ~12 MB)."""
    owner, pgids = _start_owner(tmp_path, "many")
    try:
        kids = Path(f"/proc/{owner.pid}/task/{owner.pid}/children").read_text().split()
        reapers = [k for k in kids if "reaper.py" in Path(f"/proc/{k}/cmdline").read_text()]
        assert len(reapers) == 1, kids
        owner.kill()
        owner.wait(timeout=10)
        assert _gone_within(pgids, 20) == []
    finally:
        owner.kill()
        _kill_groups(pgids)


def _stop_leaves(tmp_path, member: str, leader: str, timeout: float) -> tuple[list[int], float]:
    """A group whose leader runs ``leader`` and whose other member runs ``member``, ended by
    ``stop(timeout)``: the processes of the group left 0.5 s after ``stop`` returned, and its time."""
    from fair_forge_beam.testing import kafka as kf

    code = (f"import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', {member!r}])\n{leader}\n")
    procs = kf.KafkaBroker(tmp_path / "w")
    procs._spawn("group", [sys.executable, "-c", code])
    pgid = procs.procs[0].pid
    try:
        time.sleep(1.5)
        assert len(_members([pgid])) == (2 if "sleep(60)" in leader else 1)
        t = time.monotonic()
        procs.stop(timeout=timeout)
        took = time.monotonic() - t
        time.sleep(0.5)
        return _members([pgid]), took
    finally:
        _kill_groups([pgid])


@pytest.mark.slow
def test_stop_ends_a_group_whose_leader_has_ended(tmp_path):
    """trial40b B2: ``stop`` signalled a group only while its leader ran: the leader's children lived on."""
    left, _ = _stop_leaves(tmp_path, "import time; time.sleep(60)", "pass", 5)
    assert left == []


@pytest.mark.slow
def test_stop_kills_a_member_that_ignores_sigterm(tmp_path):
    """trial40b B2: SIGKILL went only to a group whose leader outlived the wait: a member that ignored
    SIGTERM lived on (the leader ended at once)."""
    ignores = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    left, took = _stop_leaves(tmp_path, ignores, "import time; time.sleep(60)", 1.0)
    assert left == [] and took < 5, (left, took)


@pytest.mark.slow
def test_the_reaper_forgets_a_group_that_ended(tmp_path):
    """trial40b B3: a group that ended by itself stayed on the reaper's list, and a process given
    its id later (pid reuse) was killed with the owner. The reaper forgets an empty group."""
    if not os.access("/proc/sys/kernel/ns_last_pid", os.W_OK):
        pytest.skip("needs /proc/sys/kernel/ns_last_pid (root) to give a process a chosen pid")
    owner = subprocess.Popen([sys.executable, "-c", _REUSE_OWNER], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=tmp_path)
    stranger = None
    try:
        pgid = int(owner.stdout.readline().split()[1])  # the group ended; the reaper had 2 ticks to see it
        time.sleep(1.5)
        for _ in range(200):  # a process of its own session given the ended group's id
            Path("/proc/sys/kernel/ns_last_pid").write_text(str(pgid - 1))
            p = subprocess.Popen(["sleep", "60"], start_new_session=True)
            if p.pid == pgid:
                stranger = p
                break
            p.kill()
            p.wait()
        if stranger is None:
            pytest.skip("could not give a process the ended group's id (other processes started meanwhile)")
        owner.kill()
        owner.wait(timeout=10)
        time.sleep(2.0)
        assert stranger.poll() is None, "the reaper signalled a process that only reused an ended group's id"
    finally:
        owner.kill()
        if stranger is not None:
            stranger.kill()
            stranger.wait()


_REUSE_OWNER = r"""
import sys, time
from fair_forge_beam.testing import kafka as kf
procs = kf.KafkaBroker(None, ends_with_owner=True)
procs._spawn("short", [sys.executable, "-c", "pass"])
procs.procs[0].wait()
print("ENDED", procs.procs[0].pid, flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_without_ends_with_owner_a_cluster_outlives_its_command(tmp_path):
    """The default: ``flink_cluster start`` leaves a cluster for later jobs."""
    assert len(_left_after_killing_the_owner(tmp_path, "outlives", 4, 1.5)) == 4


@pytest.mark.slow
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
