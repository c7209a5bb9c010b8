"""README's two set-up commands stay true: CI runs exactly the test command."""
import re

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
