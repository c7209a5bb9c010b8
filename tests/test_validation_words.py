"""Issue 28 G8: a config with gates=[1, 2] said "gate: Input should be a valid dictionary or instance
of Gate": a class name in a user's error (cli.md: never an exception's class name). Every pydantic
validation error a person reads goes through one renderer, fair_forge_beam.plain.validation_words."""
from __future__ import annotations

import re
from typing import Literal, Optional, Union

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from fair_forge_beam.plain import plain_reason

#: what must never reach a user: pydantic's class words and a model's class name
FORBIDDEN = re.compile(r"instance of|valid dictionary|ValidationError|\bGate\b|ThresholdGate|Input should|"
                       r"\[type=|errors\.pydantic\.dev|function-after|union\[")


def _gate_error(data) -> str:
    from fair_forge_beam.reports.gates import GateConfigError, make_gate

    with pytest.raises(GateConfigError) as info:
        make_gate(data, "gates[0]")
    return str(info.value)


@pytest.mark.parametrize("data, words", [
    (1, "gate: should be an object (a table of keys and values), not a number"),
    ([1], "should be an object (a table of keys and values), not a list"),
    (None, "not null"),
    ({"kind": "nope"}, "kind: should be 'threshold', 'coverage' or 'regression', not 'nope'"),
    ({"gate": "toxicity toxic_rate mean <= 0.5", "if_undefined": 3}, "if_undefined: should be 'fail' or 'skip'"),
    ({"kind": "threshold", "metric": "toxicity", "field": "toxic_rate", "stat": "mean", "op": "<=", "threshold": 0.1,
      "bogus": 1}, "bogus: Extra inputs are not permitted"),
    ({"kind": "threshold", "metric": ["toxicity"], "field": "toxic_rate", "stat": "mean", "op": "<=", "threshold": 0.1},
     "metric: "),
])
def test_config_gate_errors_are_words(data, words):
    msg = _gate_error(data)
    assert words in msg and not FORBIDDEN.search(msg), msg


def test_the_trials_config_is_refused_in_words(tmp_path, capsys):
    from pipelines import audit

    cfg = tmp_path / "c.toml"
    (tmp_path / "in.jsonl").write_text('{"session_id": "s", "assistant_id": "a", "conversation": []}\n')
    cfg.write_text(f'input = ["{tmp_path / "in.jsonl"}"]\nmetrics = ["toxicity"]\ngates = [1, 2]\n')
    with pytest.raises(SystemExit) as info:
        audit.run(["--config", str(cfg), "--output", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "should be an object (a table of keys and values), not a number" in err, err
    assert not FORBIDDEN.search(err), err


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int
    kind: Literal["a", "b"] = "a"


class Outer(BaseModel):
    inner: Inner
    many: list[Inner] = []
    either: Union[int, Inner] = 0
    text: Optional[str] = None


@pytest.mark.parametrize("data", [
    {"inner": 1}, {"inner": {"n": "x"}}, {"inner": {"n": 1, "kind": "c", "extra": 1}}, {"inner": {"n": 1}, "many": [3, None]},
    {"inner": {"n": 1}, "either": "nope"}, {"inner": {"n": 1}, "text": 5}, {}, 7, [1],
])
def test_any_shape_of_validation_error_is_said_in_words(data):
    from fair_forge_beam.plain import validation_words

    try:
        Outer.model_validate(data)
    except ValidationError as exc:
        for text in (validation_words(exc), plain_reason(exc), validation_words(exc, limit=1)):
            assert text and not FORBIDDEN.search(text) and "Inner" not in text and "Outer" not in text, text
    else:  # pragma: no cover
        pytest.fail("no error")


def test_a_record_rejected_at_read_says_its_field_in_words():
    from fair_forge_beam.io.read import StreamedBatch, _error_text

    for rec in ({"batch": 1}, {"batch": [1]}, {"session_id": "s", "batch": {"conversation": 3}}, 5):
        try:
            StreamedBatch.model_validate(rec)
        except ValidationError as exc:
            text = _error_text(exc)
            assert text and not FORBIDDEN.search(text) and "Batch" not in text and "Session" not in text, text


def test_a_judges_answer_of_the_wrong_shape_is_said_in_words():
    from fair_forge_beam.components.judge.parsing import parse_verdict
    from fair_forge_beam.schemas.context import ContextJudgeOutput

    obj, why = parse_verdict('{"score": {"a": 1}, "insight": [1]}', ContextJudgeOutput)
    assert obj is None and "score" in why and not FORBIDDEN.search(why), why
