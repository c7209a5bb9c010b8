"""What a judge run keeps in the process ends with the run (trial44 breaks 1 and 2,
fair_forge_beam.run_scope): a later run in the same process (a notebook, a service) behaves as the same
run alone. Against a scripted OpenAI-compatible server on 127.0.0.1 the test starts."""
from __future__ import annotations

import pytest

import json
import os
import shutil
import sqlite3
import threading

from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer
from helpers import FNAPI
from pipelines import audit

ENV = "FFB_RUN_END_KEY"
KEY = "Zq7-Lm2-Pp9-Xx4-Kk8-Rr1"


def _data(path, n: int, answer: str, other_language: bool = False) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):  # (a Humanity run dead-letters a record in another language: the record as read)
            language = "spanish" if other_language and i == n - 1 else "english"
            f.write(json.dumps({"session_id": f"s{i:02d}", "assistant_id": f"bot{i % 2}", "language": language,
                                "context": "You are the help desk of an airline; answer about baggage.",
                                "conversation": [{"qa_id": "q1", "query": f"What is my order code, case {i}?",
                                                  "assistant": answer, "ground_truth_assistant": None}]}) + "\n")
    return str(path)


def _judge_argv(data: str, out, srv, cache) -> list:
    return ["--quiet", "--no-report", f"--runner={FNAPI}", "--metrics", "context", "--input", data, "--output", str(out),
            "--judge-base-url", srv.base_url, "--judge-model", "m", "--judge-api-key-env", ENV, "--judge-cache", str(cache)]


def _files_holding(folder, text: str) -> list:
    return sorted(os.path.relpath(os.path.join(d, f), folder) for d, _, fs in os.walk(folder) for f in fs
                  if text in open(os.path.join(d, f), encoding="utf-8", errors="replace").read())


@pytest.mark.slow
def test_a_judge_runs_key_variable_is_masked_by_that_run_only(tmp_path, monkeypatch):
    """trial44 break 1: a judge run registered its key variable for the whole process (and put its name
    in os.environ for every later child process): a later run without an endpoint wrote 'Your order code
    is ***' where the same run alone kept the answer as written. The name is still in the environment
    while the judge run runs (the worker processes it starts mask it too)."""
    from fair_forge_beam.io import secrets as sec

    monkeypatch.setattr(sec, "_ENVS", set())
    monkeypatch.setattr(sec, "_ENVS_SNAPSHOT", frozenset())
    monkeypatch.delenv(sec.NAMES_ENV, raising=False)
    monkeypatch.setenv(ENV, KEY)
    said = f"I am happy to help. Your order code is {KEY}, thank you!"
    data = _data(tmp_path / "d.jsonl", 4, said, other_language=True)
    during = []

    def answer(req):
        during.append(os.environ.get(sec.NAMES_ENV))  # what a worker process started now inherits
        return {"score": 0.75, "insight": "ok"}

    with ScriptedOpenAIServer(answer) as srv:
        audit.run(_judge_argv(data, tmp_path / "judged", srv, tmp_path / "c.sqlite"))
    assert during and set(during) == {ENV}
    assert KEY not in open(tmp_path / "judged" / "results.json", encoding="utf-8").read()
    out = tmp_path / "plain"
    audit.run(["--quiet", f"--runner={FNAPI}", "--metrics", "humanity", "--input", data, "--output", str(out)])
    assert _files_holding(out, "Your order code is ***") == []
    assert [f for f in _files_holding(out, said) if f.startswith("dead_letter")], "the record as read, key and all"
    # the run's, not the process's: a child process started now does not inherit the name
    assert os.environ.get(sec.NAMES_ENV) is None and ENV not in sec.secret_envs()


def _judge_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith("fair-forge-judge"))


def _open_files(part: str) -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += part in os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return n


def _connections_to(port: int) -> int:
    """Established TCP connections of this process's clients to ``port`` (/proc/self/net/tcp)."""
    n = 0
    for line in open("/proc/self/net/tcp").read().splitlines()[1:]:
        parts = line.split()
        n += int(parts[2].split(":")[1], 16) == port and parts[3] == "01"
    return n


@pytest.mark.slow
def test_judge_audits_in_a_row_close_their_threads_connections_and_cache(tmp_path, monkeypatch):
    """trial44 break 2: each judge audit left its 16-thread pool, its keep-alive sockets and about 17
    SQLite handles of its cache open after it returned (closing was left to __del__; the first run's
    stayed for the whole process), so N audits in a row held more than one, and the answers stayed in
    the cache's -wal file: the .sqlite file alone held no table. Now each audit closes what it opened."""
    monkeypatch.setenv(ENV, "unused-key-123456")
    data = _data(tmp_path / "d.jsonl", 12, "One cabin bag.")
    before = _judge_threads()
    with ScriptedOpenAIServer(lambda req: {"score": 0.75, "insight": "ok"}) as srv:
        for i in range(2):
            cache = tmp_path / f"cache{i}.sqlite"
            audit.run(_judge_argv(data, tmp_path / f"o{i}", srv, cache))
            # (threads an earlier test of this process left may end meanwhile: at most as many as before)
            assert _judge_threads() <= before, f"after audit {i + 1}"
            assert (_connections_to(srv.port), _open_files(str(tmp_path))) == (0, 0), f"after audit {i + 1}"
            alone = tmp_path / f"alone{i}.sqlite"
            shutil.copyfile(cache, alone)  # the cache file alone: no -wal beside it
            with sqlite3.connect(alone) as conn:
                assert conn.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 12
            conn.close()


def test_what_a_run_hands_over_ends_with_the_last_run_open():
    """Blocks nest and overlap: what is handed over inside one is undone when the last open one ends;
    with none open, nothing is kept (the registration is the process's)."""
    from fair_forge_beam.run_scope import at_run_end, one_run, run_open

    done = []
    assert not run_open() and at_run_end(lambda ok: done.append("never")) is False
    with one_run():
        with one_run():
            assert at_run_end(lambda ok: done.append(("inner", ok)))
        assert done == []  # the outer run is still open
        at_run_end(lambda ok: done.append(("outer", ok)))
    assert done == [("outer", True), ("inner", True)] and not run_open()
    try:
        with one_run():
            at_run_end(lambda ok: done.append(("failed", ok)))
            raise KeyError("x")
    except KeyError:
        pass
    assert done[-1] == ("failed", False)


def _in_thread(body):
    """Run ``body`` in a new thread (an empty context, as a user's or a second audit's thread); returns
    (thread, started event, release event): ``body(started, release)`` sets ``started`` when it holds what
    it holds, then waits for ``release``."""
    started, release = threading.Event(), threading.Event()
    t = threading.Thread(target=body, args=(started, release), daemon=True)
    t.start()
    assert started.wait(10)
    return t, release


def test_a_run_in_another_thread_neither_takes_nor_waits_for_this_ones():
    """trial44b G1: while an audit ran in one thread, a user's own client made in another thread (no run
    of its own) was handed to that audit and closed under the user's next call when the audit ended.
    G2: two threads running audits back to back (one always open) kept every ended audit's judge
    threads and caches until both happened to be idle (16 -> 94 threads, 206 SQLite fds)."""
    from fair_forge_beam.run_scope import at_run_end, one_run, run_open

    done = []

    def audit_a(started, release):
        with one_run():
            at_run_end(lambda ok: done.append("a"))
            started.set()
            release.wait(10)

    a, release_a = _in_thread(audit_a)
    assert not run_open()  # this thread runs nothing: the user's own client is its own
    assert at_run_end(lambda ok: done.append("user's")) is False
    with one_run():  # a second audit here, while A is open, ends first
        at_run_end(lambda ok: done.append("b"))
    assert done == ["b"], done  # B's resources went with B, not with the last run open
    release_a.set()
    a.join(10)
    assert done == ["b", "a"], done  # and the user's client was never closed


def test_a_key_name_is_held_until_the_last_run_that_registered_it_ends(monkeypatch):
    """trial44b G1b: a name a user registered in another thread while an audit ran was forgotten when
    the audit ended (its value then written unmasked); a name two runs at once registered was forgotten
    when the first ended."""
    from fair_forge_beam.io import secrets as sec
    from fair_forge_beam.run_scope import one_run

    monkeypatch.setattr(sec, "_ENVS", set())
    monkeypatch.setattr(sec, "_ENVS_SNAPSHOT", frozenset())
    monkeypatch.setattr(sec, "_HOLDERS", {})
    monkeypatch.setattr(sec, "_INHERITED", {})
    monkeypatch.delenv(sec.NAMES_ENV, raising=False)

    def audit(started, release):
        with one_run():
            sec.register_secret_env("T44_SHARED")
            sec.register_secret_env("T44_USERS")
            started.set()
            release.wait(10)

    a, release_a = _in_thread(audit)
    sec.register_secret_env("T44_USERS")  # the user's own, in no run: the process's
    with one_run():
        sec.register_secret_env("T44_SHARED")  # a second run holds it too
        release_a.set()
        a.join(10)
        assert {"T44_SHARED", "T44_USERS"} <= sec._ENVS, sec._ENVS  # A ended: both still held
        assert "T44_SHARED" in os.environ[sec.NAMES_ENV].split(",")
    assert sec._ENVS == {"T44_USERS"}, sec._ENVS  # the second run ended: only the user's stays
    assert os.environ[sec.NAMES_ENV] == "T44_USERS"
