"""fix39a (trial38): an option with a closed set of values (argparse's ``choices=``) echoed a wrong value whole —
``invalid choice: 'sk-live-…'`` — where every numeric option hides a value that may be a secret given in the
wrong place (:func:`fair_forge_beam.quoting.number_text`). Every command's parser is a
:class:`~fair_forge_beam.options.ChoiceHintParser`, whose one choice check now shows a value only when it is
close to a choice (a typo) or short (:func:`fair_forge_beam.quoting.choice_text`).

The commands are discovered (every module of ``pipelines`` and ``fair_forge_beam`` with a ``main`` that builds
such a parser), so a new command's choice options are covered without a list to keep."""
from __future__ import annotations

import importlib
import importlib.util
import pkgutil

import pytest

import fair_forge_beam
import pipelines
from fair_forge_beam.options import ChoiceHintParser

SECRET = "hunter2pass-NOT-SHOWN-0123456789"
_BUILDS = ("OneLineErrorParser(", "ChoiceHintParser(", "stage_parser(", "build_parser(")


def _command_modules() -> list[str]:
    names = []
    for package in (pipelines, fair_forge_beam):
        for m in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if m.ispkg or ".testing" in m.name or m.name == "fair_forge_beam.options":
                continue
            origin = importlib.util.find_spec(m.name).origin
            with open(origin, encoding="utf-8") as f:
                text = f.read()
            if "def main(" in text and any(b in text for b in _BUILDS):
                names.append(m.name)
    return sorted(names)


class _Built(BaseException):
    def __init__(self, parser):
        super().__init__("parser built")
        self.parser = parser


def _parser_of(module_name: str, monkeypatch) -> ChoiceHintParser:
    """The parser ``module.main([])`` builds: caught at its parse (a parser without ``--help``, such as the audit's
    first look for ``--config``, parses on)."""
    parse = ChoiceHintParser.parse_known_args

    def caught(self, args=None, namespace=None):
        if not self.add_help:
            return parse(self, args, namespace)
        raise _Built(self)

    module = importlib.import_module(module_name)
    with monkeypatch.context() as m:
        m.setattr(ChoiceHintParser, "parse_known_args", caught)
        try:
            module.main([])
        except _Built as built:
            return built.parser
    pytest.fail(f"{module_name}.main([]) parsed with no ChoiceHintParser")


COMMANDS = _command_modules()


def test_the_commands_are_found():
    assert {"pipelines.audit", "pipelines.loop", "pipelines.trend", "pipelines.optimize", "pipelines.generate",
            "pipelines.run_assistant", "fair_forge_beam.rollup", "fair_forge_beam.reports.compare"} <= set(COMMANDS), COMMANDS


@pytest.mark.parametrize("module_name", COMMANDS)
def test_no_choice_option_of_any_command_echoes_a_value_far_from_its_choices(module_name, monkeypatch, capsys):
    parser = _parser_of(module_name, monkeypatch)
    flags = [a.option_strings[-1] for a in parser._actions
             if a.choices is not None and a.option_strings and all(isinstance(c, str) for c in a.choices)]
    if module_name == "pipelines.audit":
        assert {"--mode", "--toxicity-scorer"} <= set(flags), flags  # the main job's parser, not a first look
    for flag in flags:
        with pytest.raises(SystemExit) as ended:
            parser.parse_known_args([flag, SECRET])
        err = capsys.readouterr().err
        assert ended.value.code == 2 and "invalid choice" in err, (flag, err)
        assert "NOT-SHOWN" not in err and "hunter2" not in err, (flag, err)
        assert f"a text of {len(SECRET)} characters (not shown" in err, (flag, err)


def test_a_typo_near_a_choice_is_still_shown_with_the_nearest_choice(capsys):
    from pipelines import audit

    with pytest.raises(SystemExit):
        audit.build_parser().parse_known_args(["--mode", "bayesain"])
    err = capsys.readouterr().err
    assert "invalid choice: 'bayesain' (choose from" in err and "did you mean 'bayesian'?" in err, err


#: trial39b B8: the usage errors that still quoted a user's value whole, each as the main job meets it (a config
#: file's text, or the command line's arguments after ``--input``/``--output``)
ECHO_PATHS = {
    "config: a list where a text is declared": ('mode = ["{S}"]\n', []),
    "config: a table where a text is declared": ('[options]\ngroup_extractor = {{a = "{S}"}}\n', []),
    "config: a runner": ('[beam]\nrunner = "{S}"\n', []),
    "config: a metric": ('metrics = ["{S}"]\n', []),
    "command line: a runner": (None, ["--runner", "{S}"]),
    "command line: a metric": (None, ["--metrics", "{S}"]),
    "command line: an option given twice": (None, ["--mode", "bayesian", "--mode", "{S}"]),
    "command line: a stray value": (None, ["--judge-timeout", "30", "{S}"]),
}


@pytest.mark.parametrize("path", sorted(ECHO_PATHS))
def test_no_usage_error_of_the_main_job_echoes_a_secret_shaped_value(path, tmp_path, capsys):
    """Every place a usage error repeats a user's value shows it by one rule (quoting.choice_text): a text far from
    every valid value, and a list or table holding one, by its length or kind only."""
    from pipelines import audit

    config, argv = ECHO_PATHS[path]
    data = tmp_path / "x.jsonl"
    data.write_text("")
    args = ["--input", str(data), "--output", str(tmp_path / "out")] + [a.format(S=SECRET) for a in argv]
    if config is not None:
        (tmp_path / "c.toml").write_text(config.format(S=SECRET))
        args = ["--config", str(tmp_path / "c.toml"), "--output", str(tmp_path / "out"), "--input", str(data)]
    with pytest.raises(SystemExit) as ended:
        audit.main(args)
    err = capsys.readouterr().err
    assert ended.value.code == 2, err
    assert "NOT-SHOWN" not in err and "hunter2" not in err, err
    assert "not shown" in err, err
