"""README's two set-up commands stay true: CI runs exactly the test command."""
import os
import re
import shutil
import subprocess
import sys
import time

from helpers import REPO


def _setup_commands():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Set-up commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section, flags=re.S)


def test_readme_has_exactly_two_setup_commands():
    cmds = _setup_commands()
    assert len(cmds) == 2, cmds
    assert "fair-forge-beam" in cmds[0] and "pytest" in cmds[1]


def test_ci_runs_readme_test_command_verbatim():
    test_cmd = _setup_commands()[1].strip()
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert any(line.strip() == test_cmd for line in ci.splitlines()), (test_cmd, ci)


def test_ci_runs_the_test_command_in_a_fresh_venv():
    """Issue 26: CI installs as a user does, into a new venv (not the machine's own interpreter,
    where a symlink to the interpreter or ``python`` from PATH happened to work)."""
    lines = [ln.strip() for ln in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    test_cmd = _setup_commands()[1].strip()
    at = lines.index(test_cmd)
    made = [i for i, ln in enumerate(lines[:at]) if re.match(r"python3? -m venv ", ln)]
    activated = [i for i, ln in enumerate(lines[:at]) if re.match(r'(\.|source) "?\$\w+"?/bin/activate\b', ln)]
    assert made and activated and made[0] < activated[0], lines[:at]
    assert not any(re.match(r"(python3? -m )?pip3? install", ln) for ln in lines[:made[0]]), "installs before the venv"


def test_ci_removes_the_venv_it_made_however_the_run_ends(tmp_path):
    """Each CI venv holds ~7 GB (torch's CUDA wheels); the ones earlier runs left in /tmp filled
    the disk and a stop's CI failed in pip ("No space left on device"). The script's venv set-up,
    run up to its EXIT trap, then failing: the temporary folder is gone and the exit code kept;
    a venv the caller names (FAIR_FORGE_CI_VENV) is kept."""
    lines = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("CI_TMP="))
    end = next(i for i, ln in enumerate(lines) if ln.strip() == "trap finish EXIT")
    block = "\n".join(["set -euo pipefail", *lines[start:end + 1],
                       'mkdir -p "$VENV/bin"; head -c 100000 /dev/zero > "$VENV/bin/big"', "exit 3"])
    bash = shutil.which("bash")
    made = tmp_path / "tmp"
    made.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "FAIR_FORGE_CI_VENV"}
    run = subprocess.run([bash, "-c", block], env={**env, "TMPDIR": str(made)},
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 3, run.stderr
    assert "== whole .ci/run:" in run.stdout
    assert list(made.iterdir()) == [], list(made.rglob("*"))
    own = tmp_path / "own" / "venv"
    run = subprocess.run([bash, "-c", block], env={**env, "TMPDIR": str(made), "FAIR_FORGE_CI_VENV": str(own)},
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 3 and (own / "bin" / "big").is_file(), run.stderr


def test_ci_removes_what_killed_runs_left(tmp_path):
    """A CI run killed outright (SIGKILL, no EXIT trap) leaves its ~7 GB folder: the next run removes
    every ``ffb-ci.*`` folder whose run's pid is no longer alive (or, without a pid, older than 6
    hours), and keeps a live run's."""
    lines = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("CI_TMP="))
    end = next(i for i, ln in enumerate(lines) if ln.strip() == "trap finish EXIT")
    block = "\n".join(["set -euo pipefail", *lines[start:end + 1], "exit 0"])
    made = tmp_path / "tmp"
    dead, live, fresh, stale = (made / f"ffb-ci.{n}" for n in ("dead", "live", "fresh", "stale"))
    for d in (dead, live, fresh, stale):
        (d / "venv").mkdir(parents=True)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (dead / "pid").write_text(gone.stdout.strip() + "\n")
    (live / "pid").write_text(f"{os.getpid()}\n")
    old = time.time() - 7 * 3600
    os.utime(stale, (old, old))
    env = {k: v for k, v in os.environ.items() if k != "FAIR_FORGE_CI_VENV"}
    run = subprocess.run([shutil.which("bash"), "-c", block], env={**env, "TMPDIR": str(made)},
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in made.iterdir()) == ["ffb-ci.fresh", "ffb-ci.live"]

