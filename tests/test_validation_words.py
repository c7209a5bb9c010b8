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
      "bogus": 1}, "bogus: is not a field of this object (an unknown key"),
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


# ---- issue 28 H10: pydantic's own sentences ("Field required", "Extra inputs are not permitted")
# reached dead letters; every error type is said in the project's words

def _every_error_type():
    import typing

    from pydantic_core.core_schema import ErrorType

    ctx = {"attribute": "x", "error": "bad thing", "method_name": "m", "class_name": "C", "gt": 0, "ge": 0, "lt": 1,
           "le": 1, "multiple_of": 2, "field_type": "List", "min_length": 1, "max_length": 3, "actual_length": 5,
           "pattern": "^a$", "expected": "'a' or 'b'", "discriminator": "'kind'", "expected_tags": "'a', 'b'",
           "tag": "z", "encoding": "utf-8", "encoding_error": "bad byte", "class": "C", "tz_expected": 0, "tz_actual": 1, "expected_schemes": "'http'",
           "expected_version": 4, "max_digits": 3, "decimal_places": 2, "whole_digits": 1}
    for kind in typing.get_args(ErrorType):
        try:
            yield kind, ValidationError.from_exception_data("M", [{"type": kind, "loc": ("f",), "input": 7, "ctx": ctx}])
        except (TypeError, KeyError, ValueError):
            yield kind, ValidationError.from_exception_data("M", [{"type": kind, "loc": ("f",), "input": 7}])


#: pydantic's phrasing, as its messages word it
PYDANTIC = re.compile(r"Field required|Extra inputs|not permitted|Input should|should be a valid|Keys should|"
                      r"Field is frozen|Instance is frozen|Unexpected|Missing required|Got multiple|after validation|"
                      r"String should|List should|Data should|Decimal input|URL input|UUID input|JSON input|Unable to|"
                      r"Error extracting|Error iterating|Recursion error|Invalid JSON|timedelta|datetime|python")


def test_every_pydantic_error_type_is_said_in_words():
    from fair_forge_beam.plain import validation_words

    kinds = 0
    for kind, exc in _every_error_type():
        kinds += 1
        own = exc.errors()[0]["msg"]
        for text in (validation_words(exc), plain_reason(exc)):
            assert text.startswith("f: ") and own not in text, (kind, text)
            assert not PYDANTIC.search(text) and not FORBIDDEN.search(text), (kind, text)
    assert kinds > 90


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    score: float
    name: str
    flag: bool = False
    items: list[int] = []


@pytest.mark.parametrize("data, words", [
    ({"name": "x"}, "score: is required but missing"),
    # a key is shown as data is (quoting.shown, trial39b B11): the fullwidth ｓ written as its escape, told from s
    ({"ｓcore": 1, "score": 1, "name": "x"}, "\\uff53core: is not a field of this object"),
    ({"score": 1, "name": 3}, "name: should be text, not a number"),
    ({"score": "1", "name": "x"}, "score: should be a number, not text"),
    ({"score": 1, "name": "x", "flag": 1}, "flag: should be true or false, not a number"),
    ({"score": 1, "name": "x", "items": [1.5]}, "items.0: should be a whole number"),
    ({"score": 1, "name": "x", "items": {}}, "items: should be a list, not an object"),
])
def test_the_errors_our_schemas_raise_are_words(data, words):
    from fair_forge_beam.plain import validation_words

    with pytest.raises(ValidationError) as info:
        _Strict.model_validate(data)
    text = validation_words(info.value)
    assert words in text and not PYDANTIC.search(text), text


def test_a_rejected_turn_and_a_judge_verdict_say_no_pydantic_sentence():
    from fair_forge_beam.components.judge.parsing import parse_verdict
    from fair_forge_beam.io.read import _error_text
    from fair_forge_beam.schemas.common import Batch
    from fair_forge_beam.schemas.context import ContextJudgeOutput

    with pytest.raises(ValidationError) as info:
        Batch.model_validate({"qa_id": "q", "query": "hi"})
    assert _error_text(info.value) == "assistant: is required but missing"
    obj, why = parse_verdict('{"ｓcore": 1, "insight": "ok"}', ContextJudgeOutput)
    assert obj is None and "\\uff53core: is not a field of this object" in why and "score: is required but missing" in why, why
    assert not PYDANTIC.search(why), why
