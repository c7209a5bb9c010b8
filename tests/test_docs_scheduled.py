"""docs/scheduled.md's nightly walk-through runs as written: every command of its
"A nightly job, end to end" block, in order, in a scratch folder. ``fair-forge-beam`` runs as
``<this interpreter> -m pipelines.audit`` (the console script's module, by the interpreter's own
path), and the shipped data's path is the installed package's. A renamed option, a gate the
grammar rejects, a roll-up or trend that fails, or an exit code other than 0 fails this test."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

pytestmark = pytest.mark.slow

PAGE = REPO / "docs" / "scheduled.md"


def _walkthrough() -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("## A nightly job, end to end", 1)[1]
    block = re.search(r"^```bash\n(.*?)^```", section, re.M | re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_walkthrough_commands_are_found():
    commands = _walkthrough()
    assert sum("fair-forge-beam" in c for c in commands) == 5
    assert any(c.startswith("fair-forge-beam rollup") for c in commands)
    assert any(c.startswith("fair-forge-beam trend") for c in commands)


def test_nightly_walkthrough_runs_as_written(tmp_path):
    import fair_forge_beam

    data = Path(fair_forge_beam.__file__).resolve().parent / "data" / "examples"
    python = shlex.quote(sys.executable)  # the interpreter by its own path: never python from PATH
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for cmd in _walkthrough():
        line = cmd.replace("fair_forge_beam/data/examples", shlex.quote(str(data)))
        line = re.sub(r"^fair-forge-beam\b", f"{python} -m pipelines.audit", line)
        proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, f"{cmd}\nexit {proc.returncode}\n{proc.stderr[-3000:]}"
    nights = sorted(p.name for p in (tmp_path / "audits").iterdir())
    assert nights == ["2026-12-01", "2026-12-02", "2026-12-03"]
    week = json.loads((tmp_path / "week49" / "results.json").read_text(encoding="utf-8"))
    read = [json.loads((tmp_path / "audits" / n / "results.json").read_text())["summary"]["interactions_read"]
            for n in nights]
    assert week["summary"]["interactions_read"] == sum(read) > 0
    gates = json.loads((tmp_path / "audits" / "2026-12-03" / "gates.json").read_text(encoding="utf-8"))
    assert gates["n_gates"] == 5 and gates["passed"]
    _assert_regressions(gates)
    assert json.loads((tmp_path / "week49" / "gates.json").read_text(encoding="utf-8"))["passed"]
    assert (tmp_path / "trend" / "trend.html").is_file() and (tmp_path / "trend" / "trend.json").is_file()
    trend = json.loads((tmp_path / "trend" / "trend.json").read_text(encoding="utf-8"))
    assert len(trend["runs"]) == 4


def _assert_regressions(gates: dict) -> None:
    """The toxicity regression gate compared something (a difference per assistant: passed, not
    skipped); Humanity's Spearman gate compared nothing on the hh data and says so (skipped)."""
    by = {g["gate"]: g for g in gates["gates"]}
    tox = by["regression toxicity toxic_rate not worse in every assistant_id"]
    assert tox["status"] == "pass" and len(tox["checks"]) >= 2, tox
    assert all(c["status"] == "pass" and c["difference"]["ci_low"] is not None for c in tox["checks"]), tox
    assert by["regression humanity not worse"]["status"] == "skipped"
    assert gates["status"] == "partly skipped" and gates["n_skipped"] == 1


def _scheduler_blocks() -> dict:
    section = PAGE.read_text(encoding="utf-8").split("## On a schedule: cron and Airflow", 1)[1]
    return {kind: re.search(rf"^```{kind}\n(.*?)^```", section, re.M | re.S).group(1) for kind in ("bash", "cron", "python")}


def test_cron_and_airflow_call_the_nightly_script():
    import ast

    blocks = _scheduler_blocks()
    entries = [line for line in blocks["cron"].splitlines() if line.strip() and not line.startswith("#")]
    assert len(entries) == 1
    fields = entries[0].split(None, 5)
    assert fields[:5] == ["30", "2", "*", "*", "*"] and "./nightly.sh" in fields[5]
    assert "%" not in fields[5].replace("\\%", "")  # cron turns an unescaped % into a newline
    # the UTC day, as nightly.sh counts weeks in UTC (trial27x: a local 'date -d yesterday' on a host east
    # of UTC names a UTC day that has not ended at 02:30 local)
    assert "date -u -d yesterday" in fields[5] and "date -d yesterday" not in fields[5]
    tree = ast.parse(blocks["python"])  # Airflow is not installed here: the DAG file must at least be Python
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "BashOperator"]
    command = next(k.value.value for k in calls[0].keywords if k.arg == "bash_command")
    assert "./nightly.sh {{ ds }}" in command
    # {{ ds }} is yesterday only with a data-interval timetable: Airflow 3 gives a bare cron string a
    # trigger timetable by default, whose {{ ds }} is the run's own day (issue 27's trial: exit 4 nightly)
    dag = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "DAG")
    schedule = next(k.value for k in dag.keywords if k.arg == "schedule")
    assert isinstance(schedule, ast.Call) and schedule.func.id == "CronDataIntervalTimetable"
    assert schedule.args[0].value == " ".join(fields[:5])  # the cron line's time
    assert "UTC" in ast.unparse(next(k.value for k in schedule.keywords if k.arg == "timezone"))
    assert any(isinstance(n, ast.ImportFrom) and n.module == "airflow.timetables.interval"
               and [a.name for a in n.names] == ["CronDataIntervalTimetable"] for n in ast.walk(tree))


def _nightly(tmp_path: Path, days: dict, after: Path | None = None):
    """The page's nightly.sh in ``tmp_path`` with ``logs/<day>.jsonl`` = lines ``[a, b)`` of the
    shipped slice per day, and ``fair-forge-beam`` on PATH; returns ``night(day)`` -> the finished
    process. With ``after`` (a folder of :func:`first_night`), ``tmp_path`` starts as a copy of it:
    its logs, and the outputs of the nights it ran (their paths are relative to the folder)."""
    import fair_forge_beam

    data = Path(fair_forge_beam.__file__).resolve().parent / "data" / "examples" / "hh_rlhf_harmless_test_slice.jsonl"
    lines = data.read_text(encoding="utf-8").splitlines(keepends=True)
    if after is not None:  # modification times kept (copy2): nightly.sh compares them (find -newer)
        shutil.copytree(after, tmp_path, symlinks=True, dirs_exist_ok=True)
    (tmp_path / "logs").mkdir(exist_ok=True)
    for day, (a, b) in days.items():
        (tmp_path / "logs" / f"{day}.jsonl").write_text("".join(lines[a:b]), encoding="utf-8")
    script = tmp_path / "nightly.sh"
    script.write_text(_scheduler_blocks()["bash"], encoding="utf-8")
    script.chmod(0o755)
    bin_dir = tmp_path / "bin"  # fair-forge-beam on PATH: the console script's module, by this interpreter's path
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "fair-forge-beam"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m pipelines.audit "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}

    def night(day):
        return subprocess.run([str(script), day], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)

    return night


@pytest.fixture(scope="module")
def first_night(tmp_path_factory):
    """``(folder, process)``: nightly.sh's first night, 2026-12-01 (lines [0, 10) of the shipped
    slice, no earlier night: no baseline), run once for the module. The tests that start with this
    night copy the folder (:func:`_nightly`'s ``after``) instead of running it again; they never
    write into it."""
    root = tmp_path_factory.mktemp("first-night")
    first = _nightly(root, {"2026-12-01": (0, 10)})("2026-12-01")
    return root, first


@pytest.fixture(scope="module")
def second_night(first_night, tmp_path_factory):
    """``(folder, process)``: :func:`first_night`, then nightly.sh's night 2026-12-02 (lines
    [10, 20): gated against the first night, the latest earlier night that passed), run once for
    the module; read-only as :func:`first_night`."""
    root = tmp_path_factory.mktemp("second-night")
    second = _nightly(root, {"2026-12-02": (10, 20)}, after=first_night[0])("2026-12-02")
    return root, second


def test_nightly_script_runs_three_nights_with_an_empty_one(first_night, tmp_path):
    """The page's nightly.sh, as written, for three nights: the first audits and rolls up (exit 0),
    the second has an empty export (exit 4: nothing published, the first night's folder
    untouched, the empty night's own outputs kept unpublished in its stage beside, trial48 B1), the
    third gates against the first (the previous published night) and the week rolls up both nights."""
    done, first = first_night  # the first night: night("2026-12-01") with lines [0, 10)
    assert first.returncode == 0, first.stderr[-3000:]
    night = _nightly(tmp_path, {"2026-12-02": (0, 0), "2026-12-03": (10, 20)}, after=done)

    before = {p: p.read_bytes() for p in sorted((tmp_path / "audits").rglob("*")) if p.is_file()}
    empty = night("2026-12-02")
    assert empty.returncode == 4, empty.stderr[-3000:]
    assert "empty run" in empty.stderr
    (kept,) = [p for p in (tmp_path / "audits").iterdir() if p.name.startswith("2026-12-02.staging-")]
    assert f"kept unpublished in {kept}" in " ".join(empty.stderr.split())
    assert (kept / "_EMPTY_RUN").read_text(encoding="utf-8").startswith("no input record")
    assert {p: p.read_bytes() for p in sorted((tmp_path / "audits").rglob("*"))
            if p.is_file() and kept not in p.parents} == before  # nothing else changed
    third = night("2026-12-03")
    assert third.returncode == 0, third.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / "audits").iterdir()) == ["2026-12-01", kept.name, "2026-12-03"]
    gates = json.loads((tmp_path / "audits" / "2026-12-03" / "gates.json").read_text(encoding="utf-8"))
    assert gates["n_gates"] == 5 and gates["passed"]  # 2 coverage (dead letters, rejected at read), assistants of the baseline, 2 regressions
    _assert_regressions(gates)
    week = json.loads((tmp_path / "week" / "results.json").read_text(encoding="utf-8"))
    read = [json.loads((tmp_path / "audits" / n / "results.json").read_text())["summary"]["interactions_read"]
            for n in ("2026-12-01", "2026-12-03")]
    assert week["summary"]["interactions_read"] == sum(read) > 0
    assert len(json.loads((tmp_path / "trend" / "trend.json").read_text(encoding="utf-8"))["runs"]) == 3


def test_nightly_script_after_a_killed_night(first_night, tmp_path):
    """A night SIGKILLed while its pipeline ran leaves only its stage beside the outputs
    (``audits/<day>.staging-<time>-<id>/`` with part of the run's files, and its lock file, which
    the dead process no longer holds). The next night does not take it for a night (baseline,
    week, trend): nightly.sh exits 0, the regression gates compare with the last published night,
    the week holds the published nights only. Re-running the killed night into the same folder
    removes the stage."""
    done, first = first_night  # night("2026-12-01") with lines [0, 10)
    assert first.returncode == 0
    night = _nightly(tmp_path, {"2026-12-02": (10, 20), "2026-12-03": (20, 30)}, after=done)
    stage = tmp_path / "audits" / "2026-12-02.staging-20261203T023000Z-0badf00d"
    # what the writer has made when the kill comes: the stage and its lock, and some of the files
    shutil.copytree(tmp_path / "audits" / "2026-12-01" / "stats", stage / "stats")
    (stage / ".fair-forge-stage").write_text('{"stage": "20261203T023000Z-0badf00d"}\n', encoding="utf-8")  # made first
    (stage / "stats" / "manifest.json").write_text('{"stats_schema_version": 1, "conf', encoding="utf-8")  # cut short
    (stage / "results.json").write_text('{"config": {"inputs": ["logs/2026-12-02.json', encoding="utf-8")
    Path(f"{stage}.lock").write_text("", encoding="utf-8")

    third = night("2026-12-03")
    assert third.returncode == 0, third.stderr[-3000:]
    gates = json.loads((tmp_path / "audits" / "2026-12-03" / "gates.json").read_text(encoding="utf-8"))
    assert gates["n_gates"] == 5 and gates["passed"]
    _assert_regressions(gates)
    info = json.loads((tmp_path / "week" / "run_info.json").read_text(encoding="utf-8"))
    assert info["rollup"]["runs"] == ["audits/2026-12-01", "audits/2026-12-03"]
    trend = json.loads((tmp_path / "trend" / "trend.json").read_text(encoding="utf-8"))
    assert len(trend["runs"]) == 3 and not any(".staging-" in r["path"] for r in trend["runs"])
    assert stage.is_dir()  # another night's run never removes it: only a run into its own folder

    second = night("2026-12-02")  # the killed night, re-run: its stage goes
    assert second.returncode == 0, second.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / "audits").iterdir()) == ["2026-12-01", "2026-12-02", "2026-12-03"]


def test_nightly_baseline_is_the_latest_night_that_passed_its_gates(first_night, second_night, tmp_path):
    """A night that failed a gate (gates.json ``"passed": false``) is never the next night's
    baseline (fresh-user trial: a drifted night became the yardstick, and a toxic jump the night
    after it compared with nothing and went green): the next night gates against the latest earlier
    night that passed."""
    assert first_night[1].returncode == 0  # night("2026-12-01") with lines [0, 10)
    done, second = second_night  # then night("2026-12-02") with lines [10, 20)
    assert second.returncode == 0
    night = _nightly(tmp_path, {"2026-12-03": (20, 30)}, after=done)
    red = tmp_path / "audits" / "2026-12-02" / "gates.json"  # as a night whose gate failed (exit 3) leaves it
    red.write_text(red.read_text(encoding="utf-8").replace('"passed": true', '"passed": false', 1), encoding="utf-8")
    third = night("2026-12-03")
    assert third.returncode == 0, third.stderr[-3000:]
    info = json.loads((tmp_path / "audits" / "2026-12-03" / "run_info.json").read_text(encoding="utf-8"))
    assert info["options"]["baseline"] == "audits/2026-12-01"


def test_nightly_week_is_the_seven_days_ending_on_the_night(first_night, tmp_path):
    """The week nightly.sh rolls up is the published nights of the seven days ending on DAY, not
    the last seven published nights: after a gap, a night two weeks old is not in this week (it
    was, issue 27's fresh-user trial). A night whose export is missing exits 4 (an empty run, not
    a configuration error) and publishes nothing."""
    done, first = first_night  # night("2026-12-01") with lines [0, 10): two weeks before the next
    assert first.returncode == 0
    night = _nightly(tmp_path, {"2026-12-15": (10, 20)}, after=done)
    second = night("2026-12-15")
    assert second.returncode == 0, second.stderr[-3000:]
    info = json.loads((tmp_path / "week" / "run_info.json").read_text(encoding="utf-8"))
    assert info["rollup"]["runs"] == ["audits/2026-12-15"]
    missing = night("2026-12-16")  # no logs/2026-12-16.jsonl
    assert missing.returncode == 4, missing.stderr[-3000:]
    assert "empty run: no input record (no input file matches" in missing.stderr
    assert sorted(p.name for p in (tmp_path / "audits").iterdir()) == ["2026-12-01", "2026-12-15"]


def test_nightly_baseline_is_the_last_ended_week_rolled_up(first_night, second_night, tmp_path):
    """From the second week on, the baseline is the roll-up of the last week (Monday to Sunday)
    that ended before the night's week — all its published nights, a red one too (a baseline chosen
    by its own gate outcome is a night that passed by chance low: issue 27's trial, 5 of 14 nights
    of unchanged data failed the toxic-rate gate) — rolled up once into ``weeks/<Monday>`` and
    reused by the week's later nights."""
    # the week of Monday 2026-11-30: night("2026-12-01") with lines [0, 10), night("2026-12-02") with [10, 20)
    assert first_night[1].returncode == 0
    done, second = second_night
    assert second.returncode == 0
    night = _nightly(tmp_path, {"2026-12-08": (20, 30), "2026-12-09": (30, 40)}, after=done)
    info = json.loads((tmp_path / "audits" / "2026-12-02" / "run_info.json").read_text(encoding="utf-8"))
    assert info["options"]["baseline"] == "audits/2026-12-01"  # the first week: the latest night that passed
    red = tmp_path / "audits" / "2026-12-02" / "gates.json"  # as a night whose gate failed (exit 3) leaves it
    red.write_text(red.read_text(encoding="utf-8").replace('"passed": true', '"passed": false', 1), encoding="utf-8")
    assert not (tmp_path / "weeks").exists()

    tuesday = night("2026-12-08")
    assert tuesday.returncode == 0, tuesday.stderr[-3000:]
    info = json.loads((tmp_path / "audits" / "2026-12-08" / "run_info.json").read_text(encoding="utf-8"))
    assert info["options"]["baseline"] == "weeks/2026-11-30"
    week = tmp_path / "weeks" / "2026-11-30"
    assert json.loads((week / "run_info.json").read_text(encoding="utf-8"))["rollup"]["runs"] == [
        "audits/2026-12-01", "audits/2026-12-02"]  # the red night too
    gates = json.loads((tmp_path / "audits" / "2026-12-08" / "gates.json").read_text(encoding="utf-8"))
    assert gates["n_gates"] == 5 and gates["passed"]
    _assert_regressions(gates)
    sealed = (week / "_SUCCESS").read_bytes()

    wednesday = night("2026-12-09")
    assert wednesday.returncode == 0, wednesday.stderr[-3000:]
    info = json.loads((tmp_path / "audits" / "2026-12-09" / "run_info.json").read_text(encoding="utf-8"))
    assert info["options"]["baseline"] == "weeks/2026-11-30"
    assert (week / "_SUCCESS").read_bytes() == sealed  # not rolled up again: its nights are older than it
    assert sorted(p.name for p in (tmp_path / "weeks").iterdir()) == ["2026-11-30"]


def test_nightly_back_filled_night_keeps_the_latest_week(first_night, second_night, tmp_path):
    """A night run late for a day before the latest published one (a late export, trial36 T12)
    rolls ``week/`` up for the seven days ending on the latest published night, the back-filled
    night included when it falls in them: it replaced the current week with the seven days ending
    on the back-filled day (``week/`` held that one night, the week's two nights were gone)."""
    assert first_night[1].returncode == 0  # night("2026-12-01") with lines [0, 10)
    done, second = second_night  # then night("2026-12-02") with lines [10, 20)
    assert second.returncode == 0
    night = _nightly(tmp_path, {"2026-11-27": (20, 30)}, after=done)
    late = night("2026-11-27")
    assert late.returncode == 0, late.stderr[-3000:]
    info = json.loads((tmp_path / "week" / "run_info.json").read_text(encoding="utf-8"))
    assert info["rollup"]["runs"] == ["audits/2026-11-27", "audits/2026-12-01", "audits/2026-12-02"]
    trend = json.loads((tmp_path / "trend" / "trend.json").read_text(encoding="utf-8"))
    assert len(trend["runs"]) == 4  # three nights and the week
