"""Issue 28, trial 28f B8 (fix28z): a leading ``~`` in every path value (every command's path options
and arguments, a ``--config`` file's paths) is the home folder. Contract: a user's mistake is one line on stderr naming the
option and what to do, exit 2, before any work starts."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers import FNAPI, REPO


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


# ------------------------------------------------------------------ B8: ~ in every path value
def _path_options():
    from fair_forge_beam.options import COMMANDS, command_options

    out = {}
    for command in COMMANDS:
        for o in command_options(command).values():
            if o.path or getattr(o, "file", False):
                out.setdefault(o.name, (command, o))
    return out


def test_every_option_that_names_a_file_is_declared_so():
    """The class: an option whose value is a file, folder or glob is declared ``path`` or ``file``
    (its ``~`` expanded where it is parsed); a new one that is not fails here."""
    from fair_forge_beam.options import COMMANDS, command_options

    looks_like_a_path = ("PATH", "RUN_DIR", "GLOB", "TOML", "DIR", "FILE")
    names = ("-file", "-cache", "-csv", "-dir", "corpus", "output", "input", "baseline", "compare", "config", "watch",
             "cluster-points", "privacy-domain")
    for command in COMMANDS:
        for o in command_options(command).values():
            if o.type is str and (o.metavar in looks_like_a_path or o.name.endswith(names) or o.name in names):
                assert o.path or getattr(o, "file", False), (command, o.name)


@pytest.mark.parametrize("name", sorted(_path_options()))
def test_a_tilde_in_a_path_option_is_the_home_folder(name, tmp_path, monkeypatch):
    """B8: ``--output '~/x'`` (quoted, so no shell expanded it) made a folder named ``~``."""
    from fair_forge_beam.options import OneLineErrorParser, add_arguments

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    command, o = _path_options()[name]
    p = OneLineErrorParser(prog="t")
    add_arguments(p, (), command)
    got = getattr(p.parse_known_args([f"--{name}", "~/sub/x"])[0], o.dest)
    assert got == ([str(tmp_path / "home/sub/x")] if o.repeatable else str(tmp_path / "home/sub/x"))


@pytest.mark.slow
def test_output_tilde_writes_into_the_home_folder_not_a_folder_named_tilde(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run([sys.executable, "-m", "pipelines.audit", "--output", "~/x", "--no-report", "--quiet",
                           f"--runner={FNAPI}"], cwd=work, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HOME": str(home), "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (home / "x" / "results.json").is_file() and not list(work.iterdir())


def test_a_config_file_s_tilde_paths_and_the_config_path_itself(tmp_path, monkeypatch, capsys):
    from pipelines.audit import parse_args

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    (home / "a.toml").write_text('output = "~/nightly"\ninputs = ["~/logs/*.jsonl"]\n')
    args, _, _ = parse_args(["--config", "~/a.toml"])
    assert args.output == str(home / "nightly") and args.input == [str(home / "logs/*.jsonl")]
    (home / "b.toml").write_text('output = "~nosuchuser28z/nightly"\n')
    with pytest.raises(SystemExit) as exc:
        parse_args(["--config", str(home / "b.toml")])
    line = _one_line(capsys)
    assert exc.value.code == 2 and "b.toml: output: '~nosuchuser28z/nightly': there is no user 'nosuchuser28z'" in line


@pytest.mark.parametrize("argv", [["--output", "~nosuchuser28z/x"], ["--input", "~nosuchuser28z/*.jsonl"],
                                  ["--baseline", "~nosuchuser28z"], ["--config", "~nosuchuser28z/a.toml"]])
def test_a_tilde_of_an_unknown_user_is_one_line(argv, tmp_path, capsys):
    from pipelines.audit import parse_args

    with pytest.raises(SystemExit) as exc:
        parse_args([*argv, "--output" if argv[0] != "--output" else "--quiet",
                    *([str(tmp_path / "o")] if argv[0] != "--output" else [])])
    line = _one_line(capsys)
    assert exc.value.code == 2 and f"{argv[0]}" in line and "no user 'nosuchuser28z'" in line and "write the path in full" in line


def test_the_other_commands_path_arguments_expand_tilde(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    from fair_forge_beam.rollup import build_parser as rollup_parser
    from pipelines.trend import build_parser as trend_parser

    a = rollup_parser().parse_args(["--from", "~/r*", "--output", "~/o", "--baseline", "~/b"])
    assert (a.runs, a.output, a.baseline) == ([f"{tmp_path}/r*"], f"{tmp_path}/o", f"{tmp_path}/b")
    t = trend_parser().parse_args(["~/a", "~/b", "--output", "~/t"])
    assert (t.patterns, t.output) == ([f"{tmp_path}/a", f"{tmp_path}/b"], f"{tmp_path}/t")
