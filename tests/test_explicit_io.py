"""Issue 28 (trial 28f): inputs, outputs and side files that never mislead or destroy.

* An input given explicitly as nothing (``inputs = []`` in a ``--config`` file, any repeatable
  option given as an empty list) is a usage error: the shipped example data is the default only
  when no input is given at all (B6: ``inputs = []`` audited the example data, exit 0).
"""
from __future__ import annotations

import pytest


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.mark.parametrize("key", ["inputs", "input"])
def test_a_config_giving_an_empty_input_list_is_a_usage_error_not_the_example_data(tmp_path, capsys, key):
    from pipelines import audit

    cfg = tmp_path / "audit.toml"
    cfg.write_text(f'{key} = []\nmetrics = ["humanity"]\noutput = "o_empty"\n', encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        audit.parse_args(["--config", str(cfg)])
    line = _one_line(capsys)
    assert exc.value.code == 2 and str(cfg) in line and "empty list" in line, line
    # the loop reads its audit options through the same parsing
    from pipelines import loop

    with pytest.raises(SystemExit) as exc:
        loop.run(["--config", str(cfg), "--corpus", "airline", "--output", str(tmp_path / "lp")])
    line = _one_line(capsys)
    assert exc.value.code == 2 and "empty list" in line, line
    assert not (tmp_path / "o_empty").exists() and not (tmp_path / "lp").exists()


def test_an_empty_list_for_any_repeatable_config_option_is_refused(tmp_path, capsys):
    from pipelines import audit

    cfg = tmp_path / "audit.toml"
    cfg.write_text('inputs = ["a.jsonl"]\noutput = "o"\n[options]\nkafka_topic = []\n', encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        audit.parse_args(["--config", str(cfg)])
    line = _one_line(capsys)
    assert exc.value.code == 2 and "kafka-topic" in line and "empty list" in line, line
