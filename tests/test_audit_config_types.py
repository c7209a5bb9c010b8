"""A ``--config`` file's value of the wrong TOML type is refused against its option's declared type
(issue 28/27, trial 28g G2): ``output = ["a", "b"]`` wrote to a folder named ``a,b``, ``output =
true`` to ``true``, ``output = 5`` to ``5``, ``output = 2026-12-01`` (a TOML date) to
``2026-12-01``, ``inputs = [5]`` read the path ``5``. One check (:func:`fair_forge_beam.options.
config_value_problem`) covers every option of the table, top-level keys and ``[options]`` alike."""
from __future__ import annotations

import datetime

import pytest

from fair_forge_beam import options as O
from fair_forge_beam.audit_config import ConfigError, config_to_argv
from pipelines import audit

PARSER = audit.build_parser()
DATE = datetime.date(2026, 12, 1)


def _wrong_values(o: O.Option) -> list:
    """Values of every TOML type the option does not take."""
    scalars = {bool: [1, 0.5, "true", DATE], int: ["42", True, 1.5, DATE], float: ["0.5", True, DATE],
               str: [5, True, 1.5, DATE, datetime.time(1, 2), datetime.datetime(2026, 12, 1, 3, 4)]}[o.type]
    wrong = scalars + [{"a": "b"}, [scalars[0]], ["x", scalars[0]]]
    if o.type is bool or not (o.repeatable or o.listed):
        wrong.append(["x", "y"] if o.type is str else [1, 2])
    if o.repeatable:
        wrong.append([])
    return wrong


def _cases():
    for o in O.OPTIONS.values():
        if not o.in_config:
            continue
        for v in _wrong_values(o):
            yield pytest.param(o, v, id=f"{o.name}={v!r}")


@pytest.mark.parametrize("o, value", list(_cases()))
def test_every_config_key_refuses_a_value_of_another_type(o, value, tmp_path):
    path = str(tmp_path / "a.toml")
    for cfg in ([{o.config_keys[0]: value}] if o.config_keys else []) + [{"options": {o.name: value}}]:
        if o.config_keys and "options" in cfg:
            continue  # a top-level option is refused inside [options] for another reason
        with pytest.raises(ConfigError) as exc:
            config_to_argv(PARSER, cfg, path)
        msg = str(exc.value)
        assert "\n" not in msg
        if value == []:
            assert msg == f"--config {path}: {o.name}: an empty list; give at least one value, or leave the key out"
        else:
            assert msg.startswith(f"--config {path}: {o.name}: expected {O.config_expects(o)}, got "), msg


@pytest.mark.parametrize("value, got", [
    (["a", "b"], "got a list of 2 items (not shown: it may hold a secret given in the wrong place)"),  # trial39b B8
    ([1, 2], "got a list [1, 2]"),
    (True, "got true (a TOML boolean)"),
    (5, "got 5 (a TOML integer)"),
    (DATE, "got 2026-12-01 (a TOML date)"),
])
def test_output_of_another_type_names_what_it_got(value, got, tmp_path):
    with pytest.raises(ConfigError) as exc:
        config_to_argv(PARSER, {"output": value}, str(tmp_path / "a.toml"))
    assert str(exc.value) == f"--config {tmp_path / 'a.toml'}: output: expected text (a quoted TOML string), {got}"


@pytest.mark.parametrize("cfg, argv", [
    ({"inputs": "a.jsonl"}, ["--input={d}/a.jsonl"]),
    ({"inputs": ["a.jsonl", "b.jsonl"]}, ["--input={d}/a.jsonl", "--input={d}/b.jsonl"]),
    ({"metrics": "humanity,toxicity"}, ["--metrics=humanity,toxicity"]),
    ({"metrics": ["humanity", "toxicity"]}, ["--metrics=humanity,toxicity"]),
    ({"slices": ["overall", "language"]}, ["--slices=overall,language"]),
    ({"options": {"ci-level": 1}}, ["--ci-level=1"]),  # a whole number is a number
    ({"options": {"quiet": False}}, []),
])
def test_values_of_the_declared_type_still_pass(cfg, argv, tmp_path):
    job, _, _ = config_to_argv(PARSER, cfg, str(tmp_path / "a.toml"))
    assert job == [a.format(d=tmp_path) for a in argv]


@pytest.mark.parametrize("body, folder", [("output = 5", "5"), ("output = true", "true"),
                                          ("output = 2026-12-01", "2026-12-01"), ('output = ["a", "b"]', "a,b")])
def test_the_command_exits_2_with_one_line_and_writes_nothing(body, folder, tmp_path, audit_command):
    (tmp_path / "a.toml").write_text(f'inputs = ["x.jsonl"]\nmetrics = ["humanity"]\n{body}\n', encoding="utf-8")
    # in this process; the first case also as the process (the same answer)
    proc = audit_command(["--config", "a.toml"], tmp_path, process=folder == "5")
    lines = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "--config a.toml: output: expected text (a quoted TOML string), got " in lines[0]
    assert not (tmp_path / folder).exists()


GATE = '[[gates]]\nmetric = "humanity"\nfield = "mean_entropy"\nstat = "mean"\nop = "<="\n'


@pytest.mark.parametrize("body, words", [
    (GATE + "threshold = 1e400", "gates[0].threshold: '1e400' is too large for a number (the largest is about 1.8e308)"),
    (GATE + "threshold = 0.5\n" + GATE + "threshold = -1e-400",
     "gates[1].threshold: '-1e-400' is too small for a number: it would become 0"),
    ("seed = 1e400", "seed: '1e400' is too large for a number"),
    ("[options]\nci-level = 1e-400", "options.ci-level: '1e-400' is too small for a number"),
    ('[beam]\n"a.b" = [1.0, 1e400]', "beam.'a.b'[1]: '1e400' is too large for a number"),
    ("seed = " + "9" * 5000, "line 4, column 8: a number of 5,000 digits; numbers are limited to 4,300 digits"),
])
def test_a_config_value_that_is_no_number_names_its_key(body, words, tmp_path):
    """trial30 T6: `threshold = 1e400` in [[gates]] said "--config g.toml: '1e400' is too large for a
    number" (tomllib's parse_float is called without the key), `seed = 1e400` alike, and an integer of
    5,000 digits gave Python's "Exceeds the limit (4300 digits) for integer string conversion ...
    sys.set_int_max_str_digits()". Every value error of a config file names where the value is."""
    from fair_forge_beam.audit_config import load_config

    path = tmp_path / "a.toml"
    path.write_text(f'inputs = ["x.jsonl"]\nmetrics = ["humanity"]\noutput = "out"\n{body}\n', encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_config(str(path))
    assert str(exc.value) == f"--config {path}: {words}" or str(exc.value).startswith(f"--config {path}: {words}"), exc.value
    assert "sys." not in str(exc.value)


@pytest.mark.parametrize("value", [DATE, datetime.datetime(2026, 12, 1, 3, 4), datetime.time(1, 2), True, [0.5], {"x": 1}])
def test_a_gate_threshold_of_another_type_is_told_as_an_option_is(value):
    """trial30 T6: a [[gates]] threshold = 2026-01-01 said "not a number but a date (datetime.date(2026,
    1, 1))", Python's repr, where the option check of the same file says "got 2026-12-01 (a TOML
    date)": one describer (options.toml_shown) for both."""
    from fair_forge_beam.reports.gates import GateConfigError, make_gate

    with pytest.raises(GateConfigError) as exc:
        make_gate({"metric": "humanity", "field": "mean_entropy", "stat": "mean", "op": "<=", "threshold": value})
    with pytest.raises(ConfigError) as opt:
        config_to_argv(PARSER, {"seed": value}, "a.toml")
    shown = str(opt.value).split(", got ", 1)[1]
    assert f"threshold: not a number but {shown}" in str(exc.value), (str(exc.value), shown)
    assert "datetime." not in str(exc.value) and "(" + repr(value) + ")" not in str(exc.value)
    if value is DATE:
        assert "not a number but 2026-12-01 (a TOML date)" in str(exc.value)
