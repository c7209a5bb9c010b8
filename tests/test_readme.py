"""README's two set-up commands stay true: CI runs exactly the test command."""
import re

from conftest import REPO


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
