"""Issue 28 G9: a gate threshold written as a percentage always passed (``--gate "toxicity
toxic_rate ci_high <= 5"``: a rate is at most 1; ``coverage dead_letter_share <= 1.5``). A threshold
outside the range its field declares (the metric info's ``value_range``; issue 29: read from what
the metric declares, no table keyed by metric name) is a usage error naming the range, with a hint
when it reads as a percentage — for --gate, config gates and regression gates' margins."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fair_forge_beam.metrics.registry import METRICS, metric_info
from fair_forge_beam.reports.gates import GateConfigError, make_gate, parse_gate, validate_gates
from pipelines import audit


def _problem(gate, metrics=("toxicity",), bayesian=True, baseline=None) -> str:
    with pytest.raises(GateConfigError) as info:
        validate_gates([gate], list(metrics), bayesian, baseline=baseline)
    return str(info.value)


@pytest.mark.parametrize("text, words", [
    ("toxicity toxic_rate ci_high <= 5", "threshold 5 is outside the range of toxicity toxic_rate, 0 to 1"),
    ("toxicity toxic_rate mean >= -0.1", "threshold -0.1 is outside the range"),
    ("toxicity DIDT ci_high <= 20", "a percentage? write the fraction: 20% is 0.2"),
    ("coverage dead_letter_share <= 1.5", "threshold 1.5 is outside the range of coverage dead_letter_share, 0 to 1"),
    ("coverage sessions >= -1", "threshold -1 is outside the range of coverage sessions, 0 or more"),
])
def test_a_threshold_outside_the_fields_range_is_refused(text, words):
    msg = _problem(parse_gate(text))
    assert words in msg, msg


def test_the_percentage_hint_and_what_the_gate_would_do():
    assert "could never fail; a percentage? write the fraction: 5% is 0.05" in _problem(parse_gate("toxicity toxic_rate ci_high <= 5"))
    assert "could never pass" in _problem(parse_gate("toxicity toxic_rate mean >= 5"))
    assert "percentage" not in _problem(parse_gate("toxicity toxic_rate mean <= 500"))


def test_a_regression_margin_larger_than_the_range_is_refused():
    baseline = {"config": {"mode": "bayesian"}, "metrics": {"toxicity": {}}}
    msg = _problem(parse_gate("regression toxicity toxic_rate not worse by more than 5"), baseline=baseline)
    assert "margin 5 is outside the range of a difference of toxicity toxic_rate, 0 to 1" in msg and "5% is 0.05" in msg, msg
    validate_gates([parse_gate("regression toxicity toxic_rate not worse by more than 0.05")], ["toxicity"], True,
                   baseline=baseline)


def test_a_config_gate_is_checked_the_same_way():
    gate = make_gate({"kind": "threshold", "metric": "toxicity", "field": "toxic_rate", "stat": "mean", "op": "<=",
                      "threshold": 5})
    assert "outside the range" in _problem(gate)


def test_the_trials_gates_are_usage_errors_on_the_command_line(tmp_path, capsys):
    (tmp_path / "in.jsonl").write_text('{"session_id": "s", "assistant_id": "a", "conversation": '
                                       '[{"qa_id": "q", "query": "hi", "assistant": "hello"}]}\n')
    for gate, extra in (("toxicity toxic_rate ci_high <= 5", ["--mode", "bayesian"]), ("coverage dead_letter_share <= 1.5", [])):
        with pytest.raises(SystemExit) as info:
            audit.run(["--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "o"), "--metrics", "toxicity",
                       "--gate", gate, *extra])
        err = capsys.readouterr().err
        assert info.value.code == 2 and "outside the range" in err and "a percentage?" in err, err
        assert not (tmp_path / "o").exists()


_FIELDS = [(m, f, e) for m in METRICS if metric_info(m) is not None for f, e in metric_info(m).gate_fields().items()]


@settings(max_examples=150, deadline=None)
@given(which=st.integers(0, len(_FIELDS) - 1), inside=st.floats(0, 1), outside=st.floats(1e-6, 1e6),
       below=st.booleans(), op=st.sampled_from(["<=", "<", ">=", ">"]))
def test_every_gateable_field_is_checked_against_its_declared_range(which, inside, outside, below, op):
    """Whatever metric and field: a threshold inside the declared range passes the check, one
    outside is refused — the range read from the metric's own info; at an edge, a strict comparison
    no value can pass (``< lo``, ``> hi``) is refused too (trial39 T13 c)."""
    metric, field, e = _FIELDS[which]
    lo, hi = e.value_range
    key = f" for every {e.key_name}" if e.key_name else ""

    def gate(x):
        return parse_gate(f"{metric} {field} mean {op} {x!r}{key}")

    at = lo + inside * (hi - lo)
    if (at == lo and op == "<") or (at == hi and op == ">"):
        assert "the gate could never pass" in _problem(gate(at), metrics=[metric])
    else:
        validate_gates([gate(at)], [metric], True)
    bad = (lo - outside) if below else (hi + outside)
    assert math.isfinite(bad)
    assert "outside the range" in _problem(gate(bad), metrics=[metric])


def test_a_cosine_gate_may_be_negative():
    """Vision's mean similarity is a cosine, -1 to 1 (spec §17: upstream documents [0, 1], but a
    cosine can be negative): ``>= -0.2`` is a gate that can fail, and ``>= -1.5`` is refused."""
    validate_gates([parse_gate("vision mean_similarity mean >= -0.2")], ["vision"], True)
    assert "outside the range of vision mean_similarity, -1 to 1" in _problem(
        parse_gate("vision mean_similarity mean >= -1.5"), metrics=("vision",))
