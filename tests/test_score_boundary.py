"""trial37 T2: the engine's check of every score at the scorer boundary (fair_forge_beam/score_check.py)
and the writers' robustness to extreme finite estimates.

A custom metric's scorer (docs/engine.md's contract) that returned NaN, inf, a Decimal, a str or a
bool for one interaction killed the whole audit with a traceback (``cannot accumulate a non-finite
value`` in ReduceSessions; ``ArrowInvalid`` in ParquetTable) or counted it silently; 1e308 crashed
the report's scorecard after the pipeline finished (``OverflowError`` in ``_width_flag``) and the
finished audit was discarded; the console printed a 300-digit number.
"""
from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from dataclasses import dataclass
import collections
import typing
from typing import Annotated, NamedTuple, Optional, TypedDict, Union

import numpy as np
import numpy.typing as npt
import pytest
from pydantic import BaseModel, create_model

from fair_forge_beam.engine import MetricSpec, Scored, SessionReducer, SliceEstimator
from fair_forge_beam.metrics.base import MetricTransform
from fair_forge_beam.schemas.metric_info import EstimateInfo, MetricInfo, ParquetColumns
from fair_forge_beam.statistical.combiners import BootstrapMeanCombineFn, estimate_bootstrap_means

#: what the scorer of the test metric returns for an answer naming one of these
ODD = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"), "dec": Decimal("1.5"), "str": "7",
       "true": True, "huge": 1e308, "npnan": np.float64("nan"), "big": 2**64}


def _value(text: str):
    return ODD[text] if text in ODD else float(text)


class _SessionWords(SessionReducer):
    def reduce(self, key, values):
        n, mean = len(values), sum(values) / len(values)
        return {"session_id": key[0], "n_interactions": n, "mean_words": mean}, ("/".join(key), n, (mean,), n), []


class _SliceWords(SliceEstimator):
    def __init__(self, mode):
        self.mode = mode

    def estimate(self, key, accs, window, aux):
        (mean,) = estimate_bootstrap_means(accs[1], self.mode, "words|sessions")
        return [{"slice": key, "n_interactions": accs[1].n_items, "n_sessions": accs.n_sessions,
                 "mean_words": mean.model_dump()}]


class OddWords(MetricTransform):
    """docs/engine.md's worked example, but the scorer returns the number the answer names."""

    name = "words"
    info = MetricInfo(name="words", estimates=(EstimateInfo(
        "mean_words", "words per answer", "mean number of words per answer", unit="words", value_range=(0, 200),
        direction=0, gate="mean_words", headline=True),), parquet=(ParquetColumns(columns=(("words", "float64"),)),))

    def spec(self, windowed=False):
        return MetricSpec(name=self.name, estimator=_SliceWords(self.mode), session_reducer=_SessionWords(),
                          slices=self.slices, scorer=lambda x: Scored.of(x, _value(x.assistant)),
                          interaction_record=lambda s: {"words": s.value}, session_value=lambda s: s.value,
                          session_value_type=float, session_slice_combine=BootstrapMeanCombineFn(1))


def _jsonl(path, sessions) -> str:
    path.write_text("\n".join(json.dumps({"session_id": s, "assistant_id": a, "language": "english", "conversation": [
        {"qa_id": f"{s}-{i}", "query": "q", "assistant": t} for i, t in enumerate(turns)]}) for s, a, turns in sessions))
    return str(path)


def _register(monkeypatch, name, cls):
    from fair_forge_beam.metrics import registry

    monkeypatch.setitem(registry.METRICS, name, registry.Registered(lambda mode, options: cls(statistical_mode=mode),
                                                                    cls))


def _main(argv) -> int:
    from pipelines import audit

    try:
        return audit.main(argv)
    except SystemExit as exc:
        return exc.code


# ----------------------------------------------------------------------------- the check itself
#: the id fields of every score (engine.SCORE_IDS): read by the engine, not checked
IDS = ("element_id", "session_id", "assistant_id", "language", "turn_index", "qa_id")

class _Typed(NamedTuple):
    element_id: str
    session_id: str
    assistant_id: str
    language: str
    turn_index: int
    qa_id: str
    rate: float
    count: int
    spearman: Optional[float]
    counts: tuple[int, ...]
    flag: bool
    note: str


def _spec(**kw):
    return MetricSpec(name="m", scorer=None, interaction_record=None, session_value=kw.get("session_value"),
                      session_reducer=None, estimator=None, session_value_type=kw.get("session_value_type"))


def _typed(**kw):
    base = dict(element_id="e", session_id="s", assistant_id="a", language="english", turn_index=0, qa_id="q",
                rate=0.5, count=3, spearman=None, counts=(1, 2), flag=True, note="x")
    return _Typed(**{**base, **kw})


def test_the_check_takes_finite_real_numbers_where_a_number_is_declared():
    from fair_forge_beam.score_check import MAX_MAGNITUDE, ScoreCheck

    check = ScoreCheck(_spec(), IDS)
    assert check.problem(_typed()) is None
    assert check.problem(_typed(rate=np.float32(0.25), count=np.int64(2), spearman=-0.0)) is None
    for field, value, said in (("rate", float("nan"), "nan, not a finite number"),
                               ("rate", float("-inf"), "-inf, not a finite number"),
                               ("rate", np.float64("inf"), "inf, not a finite number"),
                               ("rate", 1e300, "beyond the magnitude"),
                               ("rate", Decimal("1.5"), "a Decimal (Decimal('1.5')), not a float or int"),
                               ("rate", "7", "a str ('7') where the metric declares a number"),
                               ("rate", True, "a bool (True) where the metric declares a number"),
                               ("count", np.bool_(False), "a numpy bool"),
                               ("spearman", float("nan"), "nan, not a finite number"),
                               ("counts", (1, float("nan")), "nan")):
        problem = check.problem(_typed(**{field: value}))
        assert problem is not None and problem.startswith(f"score field '{field}") and said in problem, (field, problem)
    # bool and str fields are the metric's own: not numbers
    assert check.problem(_typed(flag=False, note="7")) is None
    assert MAX_MAGNITUDE == 1e150 and check.problem(_typed(rate=-1e150)) is None
    # a score that only feeds its session (a judge's SessionPart: 4 ids and its value) has its value checked
    from fair_forge_beam.engine import SessionPart

    part = ScoreCheck(_spec(session_value=lambda p: p.value), IDS)
    assert "nan" in part.problem(SessionPart("s", "a", "english", float("nan")), float("nan"))
    assert part.problem(SessionPart("s", "a", "english", {"score": 0.5}), {"score": 0.5}) is None


def test_the_session_value_is_checked_against_its_declared_type():
    from fair_forge_beam.score_check import ScoreCheck

    x = Scored("e", "s", "a", "english", 0, "q", "7")
    declared = ScoreCheck(_spec(session_value=lambda s: s.value, session_value_type=float), IDS)
    assert "session value is a str ('7') where the metric declares a number" in declared.problem(x, "7")
    assert declared.problem(Scored("e", "s", "a", "english", 0, "q", 2), 2) is None
    # Scored.value is Any: without a declared number only non-finite and exotic numbers are refused
    undeclared = ScoreCheck(_spec(session_value=lambda s: s.value), IDS)
    assert undeclared.problem(x, "7") is None and undeclared.problem(Scored(*x[:6], True), True) is None
    assert "nan" in undeclared.problem(Scored(*x[:6], float("nan")), float("nan"))
    assert "Decimal" in undeclared.problem(Scored(*x[:6], Decimal(2)), Decimal(2))


class _Inner(NamedTuple):
    v: float


class _Model(BaseModel):
    v: float
    n: int = 0


@dataclass
class _Data:
    v: float


NAN, INF = float("nan"), float("inf")
#: (declared type of field x, value: refused with this in the reason / None: accepted). Every refused
#: row passed the check before trial37b B10/B11 (a form it did not follow: PEP 604, Union of numbers,
#: fixed tuples, lists, dicts, Annotated, models, dataclasses, nested NamedTuples; ints past int64)
FORMS = [
    (float | None, NAN, "'x' is nan, not a finite number"),
    (float | None, "seven", "'x' is a str ('seven') where the metric declares a number"),
    (Union[int, float], "seven", "'x' is a str ('seven')"),
    (Union[int, float], True, "'x' is a bool (True)"),
    (int | float | None, np.bool_(True), "'x' is a numpy bool"),
    (tuple[float, float], (1.0, NAN), "'x[1]' is nan"),
    (tuple[float, float], (INF, 1.0), "'x[0]' is inf"),
    (list[float], [1.0, -INF], "'x[1]' is -inf"),
    (list[float], np.array([1.0, NAN]), "'x[1]' is nan"),
    (Optional[list[float]], [1.0, "7"], "'x[1]' is a str ('7')"),
    (set[int], {2**64}, "'x[0]' is 18446744073709551616, outside int64"),
    (dict[str, float], {"a": 1.0, "b": NAN}, "\"x['b']\" is nan"),
    (Annotated[float, "a rate"], NAN, "'x' is nan"),
    (_Inner | None, _Inner(NAN), "'x.v' is nan"),
    (list[_Inner], [_Inner(1.0), _Inner(INF)], "'x[1].v' is inf"),
    (_Model, _Model.model_construct(v=NAN), "'x.v' is nan"),
    (Optional[_Model], _Model.model_construct(v=1.0, n=2**64), "'x.n' is 18446744073709551616, outside int64"),
    (_Data, _Data("seven"), "'x.v' is a str ('seven')"),
    (str, NAN, "'x' is nan"),  # a declared str or bool: the rules of any value
    (int, 10**400, "'x' is an int of about 10**400, outside int64"),
    (int, 10**5000, "'x' is an int of about 10**5000, outside int64"),  # str() of it is refused
    (int, 2**64, "'x' is 18446744073709551616, outside int64"),
    (int, -2**63 - 1, "'x' is -9223372036854775809, outside int64"),
    (float, 10**400, "'x' is an int of about 10**400, outside int64"),
    (float, np.uint64(2**64 - 1), "'x' is 18446744073709551615, outside int64"),
    (float, 2**53 + 1, "'x' is the int 9007199254740993 where the metric declares a float"),
    (Union[int, float], 2**64, "'x' is 18446744073709551616, outside int64"),
    # a float that is not a whole number where an int is declared: the Parquet writer's int64 column
    # truncated 2.5 to 2 silently (fix38a); a whole one beyond 2**53 is no exact int
    (int, 2.5, "'x' is 2.5, not a whole number, where the metric declares an int"),
    (int, -0.5, "'x' is -0.5, not a whole number"),
    (int, np.float64(2.5), "'x' is 2.5, not a whole number"),
    (int, np.float32(0.25), "'x' is 0.25, not a whole number"),
    (Optional[int], 7.75, "'x' is 7.75, not a whole number"),
    (int | None, 1e-300, "'x' is 1e-300, not a whole number"),
    (list[int], [1, 2.5], "'x[1]' is 2.5, not a whole number"),
    (list[int], np.array([1.0, 2.5]), "'x[1]' is 2.5, not a whole number"),
    (tuple[int, ...], (3, np.float64(0.5)), "'x[1]' is 0.5, not a whole number"),
    (dict[str, int], {"a": 1, "b": 1.5}, "\"x['b']\" is 1.5, not a whole number"),
    (_Model, _Model.model_construct(v=1.0, n=2.5), "'x.n' is 2.5, not a whole number"),
    (int, 2.0**60, "'x' is the float 1.152921504606847e+18 where the metric declares an int"),
    (int, NAN, "'x' is nan, not a finite number"), (int, np.float64("-inf"), "'x' is -inf, not a finite number"),
    (int, True, "'x' is a bool (True)"), (Optional[int], np.bool_(False), "'x' is a numpy bool"),
    # accepted
    # decision (score_check._float_value_problem): a whole float where an int is declared is that int
    (int, 3.0, None), (int, np.float64(3.0), None), (Optional[int], -0.0, None), (int, float(2**53), None),
    (list[int], np.array([1.0, 2.0]), None), (Union[int, float], 2.5, None), (float, 2.5, None),
    (float | None, None, None), (Union[int, float], 2**63 - 1, None), (int, -2**63, None), (float, 2**53, None),
    (float, np.int64(-2**53), None), (list[float], [], None), (dict[str, float], {"a": 1.0}, None),
    (_Inner | None, None, None), (list[_Inner], [_Inner(0.5)], None), (_Model, _Model(v=0.5, n=3), None),
    (_Data, _Data(0.5), None), (str, "seven", None), (Union[float, str], "seven", None),
    (tuple[float, float], (1.0, 2.0), None),
]


class _TD(TypedDict):
    v: float


#: trial38b B5/B6: forms that checked as "any" before fix38e — a union's container arm took a scalar,
#: and mappings, deques, numpy arrays and TypedDicts of other origins switched the check off
FORMS_38B = [
    (Union[int, list[int]], 2.5, "'x' is 2.5, not a whole number"),
    (Union[int, list[int]], "abc", "'x' is a str ('abc') where the metric declares a number"),
    (Union[int, list[int]], [1, 2.5], "'x[1]' is 2.5, not a whole number"),
    (Optional[list[int]], 2.5, "'x' is a float (2.5) where a collection is declared"),
    (Optional[list[int]], 2, "'x' is a int (2) where a collection is declared"),
    (Union[int, tuple[int, ...]], 2.5, "'x' is 2.5, not a whole number"),
    (Optional[dict[str, float]], [1.0], "'x' is a list ([1.0]) where a mapping is declared"),
    (Optional[_TD], 2.5, "'x' is a float (2.5) where a model is declared"),
    (typing.DefaultDict[str, float], collections.defaultdict(float, a=NAN), "\"x['a']\" is nan"),
    (typing.OrderedDict[str, float], collections.OrderedDict(a=INF), "\"x['a']\" is inf"),
    (collections.defaultdict[str, int], {"a": 2.5}, "\"x['a']\" is 2.5, not a whole number"),
    (collections.ChainMap[str, float], collections.ChainMap({"a": NAN}), "\"x['a']\" is nan"),
    (typing.Counter[str], {"a": 2.5}, "\"x['a']\" is 2.5, not a whole number"),
    (collections.deque[float], collections.deque([1.0, NAN]), "'x[1]' is nan"),
    (typing.Deque[int], collections.deque([2.5]), "'x[0]' is 2.5, not a whole number"),
    (npt.NDArray[np.int64], np.array([1.0, 2.5]), "'x[1]' is 2.5, not a whole number"),
    (npt.NDArray[np.float64], np.array([1.0, INF]), "'x[1]' is inf"),
    (_TD, {"v": NAN}, "'x.v' is nan"),
    (np.uint8, 300, "'x' is 300, outside uint8 (0 to 255)"),
    (np.int32, -2**31 - 1, "'x' is -2147483649, outside int32"),
    (list[np.uint8], [1, -1], "'x[1]' is -1, outside uint8"),
    (np.float32, 1e39, "'x' is 1e+39, outside float32"),
    # decision: a generic the check does not know is checked as any value, in every container it holds
    (typing.Callable[[int], float], [1.0, NAN], "'x[1]' is nan"),
    # accepted
    (Optional[list[int]], [1, 2], None), (Union[int, list[int]], 3, None), (np.uint8, 255, None),
    (typing.DefaultDict[str, float], collections.defaultdict(float, a=0.5), None), (_TD, {"v": 0.5}, None),
    (collections.deque[float], collections.deque([0.5]), None), (npt.NDArray[np.int64], np.array([1, 2]), None),
    (typing.Literal["a", "b"], "a", None),
]


@pytest.mark.parametrize("declared, value, said", FORMS_38B, ids=[f"{i}" for i in range(len(FORMS_38B))])
def test_the_check_follows_unions_with_containers_and_every_mapping_and_sequence_kind(declared, value, said):
    """trial38b B5/B6, as the test above: every arm of a union, every Mapping / Sequence / ndarray
    origin by its abstract kind, numpy types by their range."""
    test_the_check_follows_every_form_of_the_declaration(declared, value, said)


@pytest.mark.parametrize("declared, value, said", FORMS, ids=[f"{i}" for i in range(len(FORMS))])
def test_the_check_follows_every_form_of_the_declaration(declared, value, said):
    """trial37b B10/B11: the check follows the declared type through Optional / Union / ``X | Y``,
    ``Annotated``, containers, nested NamedTuples, pydantic models and dataclasses, and refuses
    every value the writers (Parquet int64 / float64, JSON) or the statistics cannot hold."""
    from fair_forge_beam.engine import SCORE_IDS
    from fair_forge_beam.score_check import ScoreCheck

    score = NamedTuple("S", [*SCORE_IDS, ("x", declared)])("e", "s", "a", "english", 0, "q", value)
    problem = ScoreCheck(_spec(), IDS).problem(score)
    if said is None:
        assert problem is None, problem
    else:
        assert problem is not None and problem.startswith("score field ") and said in problem, problem
    # the same declaration as the session value's and the cell value's
    spec = MetricSpec(name="m", scorer=None, interaction_record=None, session_value=lambda s: s.x,
                      cell_value=lambda s: s.x, session_reducer=None, estimator=None, session_value_type=declared,
                      cell_value_type=declared)
    plain = Scored("e", "s", "a", "english", 0, "q", 1.0)
    for where, problem in (("session value", ScoreCheck(spec, IDS).problem(plain, value, None)),
                           ("cell value", ScoreCheck(spec, IDS).problem(plain, None, value))):
        if said is None:
            assert problem is None, problem
        else:
            assert problem is not None and problem.startswith(where) and said.split(" is ", 1)[1] in problem, problem
            assert where + said.split(" is ", 1)[0].strip("'\"").removeprefix("x") + " is " in problem, problem


class _Pair(NamedTuple):
    weight: float
    n: int


@dataclass
class _DC:
    a: float
    b: Optional[list[int]] = None


class _PM(BaseModel):
    a: float
    b: dict[str, int] = {}


#: declarations the quick test (score_check._passes) is built for, and the forms it leaves to the full walk
QUICK_DECLARED = [None, float, int, str, bool, Optional[float], Union[int, str], list[int], list[float],
                  tuple[int, ...], tuple[float, int], dict[str, float], Optional[list[int]], Union[int, list[int]],
                  list[tuple[str, int]], tuple[tuple[str, bool, tuple[int, ...], Optional[float]], tuple[int, int]],
                  _Pair, list[_Pair], _DC, _PM, _TD, np.uint8, list[np.float32], typing.Counter[str],
                  typing.Callable[[int], float], typing.Any, *(d for d, _, _ in FORMS + FORMS_38B)]


def _values():
    from hypothesis import strategies as st

    scalars = st.one_of(
        st.none(), st.booleans(), st.text(max_size=3), st.binary(max_size=2),
        st.floats(allow_nan=True, allow_infinity=True), st.floats(min_value=-1e160, max_value=1e160),
        st.sampled_from([0.0, -0.0, 2.5, 3.0, 2.0**53, 2.0**53 + 2, 1e150, 1.5e150, NAN, INF]),
        st.integers(min_value=-2**70, max_value=2**70),
        st.sampled_from([2**53, 2**53 + 1, 2**63 - 1, 2**63, -2**63, 255, 256, -1, True, False]),
        st.sampled_from([np.float64(NAN), np.int64(7), np.uint8(3), np.float32(1.5), Decimal("1.5")]))
    return st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=2), inner, max_size=3),
        st.builds(_Pair, inner, inner), st.builds(lambda a, b: {"a": a, "b": b}, inner, inner),
        st.builds(_DC, inner, inner)), max_leaves=8)


def test_the_quick_test_passes_only_what_the_full_check_passes():
    """issue 26: ``score_check._passes`` (the quick test every score goes through first) never passes
    a value that the full walk (``_problem``) refuses, for every declaration form above and generated
    values of every shape (NaN, inf, beyond 2**53 / int64 / 1e150, bools, numpy and Decimal values,
    nested lists, tuples, dicts, NamedTuples, dataclasses); and the values the full walk takes
    mostly pass it (the quick path is the one taken)."""
    from hypothesis import given, settings

    from fair_forge_beam.score_check import _kind, _passes, _problem

    kinds = [(d, _kind(d)) for d in QUICK_DECLARED]
    tests = [_passes(k) for _, k in kinds]
    seen = {"quick": 0, "full": 0}

    @settings(max_examples=150, deadline=None, derandomize=True)
    @given(_values())
    def check(v):
        for (declared, kind), ok in zip(kinds, tests):
            if ok(v):
                assert _problem(v, kind) is None, (declared, v, _problem(v, kind))
                seen["quick"] += 1
            elif _problem(v, kind) is None:
                seen["full"] += 1

    check()
    # and every edge value, alone and as the one odd item of each container shape a score has
    edges = [None, True, "x", b"x", 0.0, -0.0, 0.5, 2.5, 3.0, 2.0**53, 2.0**53 + 2, 1e150, -1e150, 1.5e150, NAN, INF,
             -INF, 0, 1, -1, 255, 256, 2**53, 2**53 + 1, -2**53 - 1, 2**63 - 1, 2**63, -2**63, -2**63 - 1,
             np.float64(NAN), np.int64(7), np.uint8(3), np.float32(1.5), Decimal("1.5")]
    for e in edges:
        for v in (e, [e], [1, e], [0.5, e], (e,), (0.5, e), {"k": e}, {"a": e, "b": e}, _Pair(e, e), [_Pair(0.5, e)],
                  (("e", False, (1, e), 0.5), (2, e, (("c", e),))), _DC(e, [e])):
            check.hypothesis.inner_test(v)
    assert seen["quick"] > 2 * seen["full"], seen


def test_a_main_job_score_takes_the_quick_path():
    """issue 26: the main job's scores (Humanity's and Toxicity's shapes) pass the quick test; a NaN
    or a fraction where an int is declared anywhere in them does not."""
    from fair_forge_beam.score_check import _kind, _passes

    cell = tuple[tuple[str, bool, tuple[int, ...], Optional[float]], tuple[int, int, tuple[tuple[str, int], ...]]]
    ok = _passes(_kind(cell))
    assert ok((("e", False, (1, 2), 0.5), (2, 55, (("cds", 1), ("dmc", 1)))))
    assert ok((("e", True, (), None), (0, 0, ())))
    for bad in ((("e", False, (1, 2), NAN), (2, 55, ())), (("e", False, (1, 2.5), 0.5), (2, 55, ())),
                (("e", False, (1, 2), 0.5), (2, 55, (("cds", 1.5),))), (("e", False, (1, 2**64), 0.5), (2, 5, ()))):
        assert not ok(bad), bad
    counts = _passes(_kind(list[int]))
    assert counts([0, 3, 1]) and not counts([0, 3, 2**63]) and not counts([1, True]) and not counts([1, 2.5])
    rates = _passes(_kind(list[float]))
    assert rates([0.5, 1.0]) and not rates([0.5, NAN]) and not rates([INF, 0.5]) and not rates([1e151])


# ----------------------------------------------------------------------------- the whole audit
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["bayesian", "frequentist"])
def test_a_bad_score_is_a_dead_letter_naming_the_metric_the_field_and_the_record(tmp_path, monkeypatch, capsys, mode):
    _register(monkeypatch, "words", OddWords)
    data = _jsonl(tmp_path / "in.jsonl", [("s1", "a", ["2", "3"]), ("s2", "a", ["4", "5"]), ("s3", "b", ["3", "3"]),
                                          ("odd", "b", [*ODD, "3"])])
    out = tmp_path / "out"
    rc = _main(["--input", data, "--metrics", "words", "--mode", mode, "--gate", "words mean_words mean <= 100",
                "--output", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    ms = doc["summary"]["metrics"]["words"]
    assert (ms["interactions_scored"], ms["interactions_not_scored"]) == (7, len(ODD)), ms
    dead = [json.loads(line) for f in sorted((out / "dead_letter").iterdir()) for line in f.read_text().splitlines()]
    assert len(dead) == len(ODD)
    for d in dead:
        raw = json.loads(d["raw"])
        assert d["stage"] == "words" and d["reason"].startswith("words: the scorer's Scored "), d
        assert raw["session_id"] == "odd" and raw["assistant"] in ODD and d["element_id"] == raw["element_id"], d
        assert ("score field 'value'" in d["reason"]) or ("session value" in d["reason"]), d
    reasons = {json.loads(d["raw"])["assistant"]: d["reason"] for d in dead}
    assert "nan, not a finite number" in reasons["nan"] and "inf, not a finite number" in reasons["-inf"]
    assert "Decimal" in reasons["dec"] and "a str ('7')" in reasons["str"] and "a bool (True)" in reasons["true"]
    assert "beyond the magnitude" in reasons["huge"]
    # trial37b B10: an int past int64 ended the run in the Parquet writer (ArrowInvalid)
    assert "score field 'value' is 18446744073709551616, outside int64" in reasons["big"]
    overall = next(r for r in doc["metrics"]["words"]["slices"] if r["slice"] == "overall")
    assert overall["n_interactions"] == 7 and math.isfinite(overall["mean_words"]["mean"])
    assert f"1 not scored" not in printed and f"{len(ODD)} not scored" in printed
    assert (out / "report.html").exists() and (out / "results.parquet").exists()


class IntWords(OddWords):
    """OddWords whose session value is declared an int (a count)."""

    def spec(self, windowed=False):
        import dataclasses

        return dataclasses.replace(super().spec(windowed), session_value_type=int)


@pytest.mark.slow
def test_a_fraction_where_an_int_is_declared_is_a_dead_letter_and_a_whole_float_is_scored(tmp_path, monkeypatch, capsys):
    """fix38a: 2.5 where the metric declares an int was accepted (and truncated to 2 by an int64 Parquet
    column); now a dead letter naming the metric, the field and the value. 3.0 is the int it equals
    (decision: score_check._float_value_problem)."""
    _register(monkeypatch, "words", IntWords)
    data = _jsonl(tmp_path / "in.jsonl", [("s1", "a", ["2", "3.0"]), ("s2", "a", ["2.5", "4"]), ("s3", "b", ["0.5", "5"])])
    out = tmp_path / "out"
    assert _main(["--input", data, "--metrics", "words", "--output", str(out)]) == 0
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    ms = doc["summary"]["metrics"]["words"]
    assert (ms["interactions_scored"], ms["interactions_not_scored"]) == (4, 2), ms
    dead = [json.loads(line) for f in sorted((out / "dead_letter").iterdir()) for line in f.read_text().splitlines()]
    reasons = sorted(d["reason"] for d in dead)
    assert reasons == [f"words: the scorer's Scored session value is {v}, not a whole number, where the metric declares an "
                       f"int (return int(...) of a whole number) (docs/engine.md: what a score may hold)"
                       for v in ("0.5", "2.5")], reasons
    assert sorted(json.loads(d["raw"])["assistant"] for d in dead) == ["0.5", "2.5"]


class Int64Words(OddWords):
    """OddWords whose Parquet column ``words`` is declared int64, its session value a float."""

    import dataclasses as _dc

    info = _dc.replace(OddWords.info, parquet=(ParquetColumns(columns=(("words", "int64"),)),))


@pytest.mark.slow
def test_a_value_that_its_declared_parquet_column_cannot_hold_is_a_dead_letter(tmp_path, monkeypatch):
    """trial38b B4: the declared Parquet column type was never consulted: with ``words`` int64 and a
    float session value, 2.5 and 0.5 were written truncated (2, 0). Now each is a dead letter naming the
    metric, the column and the value; 3.0 is the int it equals."""
    import pyarrow.parquet as pq

    _register(monkeypatch, "words", Int64Words)
    data = _jsonl(tmp_path / "in.jsonl", [("s1", "a", ["2", "3.0"]), ("s2", "a", ["2.5", "4"]), ("s3", "b", ["0.5", "5"])])
    out = tmp_path / "out"
    assert _main(["--input", data, "--metrics", "words", "--no-report", "--output", str(out)]) == 0
    ms = json.loads((out / "results.json").read_text(encoding="utf-8"))["summary"]["metrics"]["words"]
    assert (ms["interactions_scored"], ms["interactions_not_scored"]) == (4, 2), ms
    dead = [json.loads(line) for f in sorted((out / "dead_letter").iterdir()) for line in f.read_text().splitlines()]
    assert sorted(d["reason"] for d in dead) == [
        f"words: the scorer's Scored record column 'words' is {v}, not a whole number, where the metric declares an "
        f"int (return int(...) of a whole number) (the metric's info declares the Parquet column 'words' int64) "
        f"(docs/engine.md: what a score may hold)" for v in ("0.5", "2.5")], dead
    assert sorted(json.loads(d["raw"])["assistant"] for d in dead) == ["0.5", "2.5"]
    words = pq.read_table(out / "results.parquet").column("words").to_pylist()
    assert sorted(words) == [2, 3, 4, 5], words


class UnionWords(OddWords):
    """OddWords whose session value is declared ``Union[int, list[int]]``."""

    def spec(self, windowed=False):
        import dataclasses

        return dataclasses.replace(super().spec(windowed), session_value_type=Union[int, list[int]])


@pytest.mark.slow
def test_a_union_with_a_container_is_checked_and_the_audit_runs(tmp_path, monkeypatch):
    """trial38b B5: ``Union[int, list[int]]`` ended the audit at build in a raw TypeError (no stored
    column type); now its statistics are not stored (the manifest says so) and 2.5 is a dead letter."""
    _register(monkeypatch, "words", UnionWords)
    data = _jsonl(tmp_path / "in.jsonl", [("s1", "a", ["2", "3"]), ("s2", "a", ["2.5", "4"])])
    out = tmp_path / "out"
    assert _main(["--input", data, "--metrics", "words", "--no-report", "--output", str(out)]) == 0
    dead = [json.loads(line) for f in sorted((out / "dead_letter").iterdir()) for line in f.read_text().splitlines()]
    assert [d["reason"] for d in dead] == ["words: the scorer's Scored session value is 2.5, not a whole number, where "
                                           "the metric declares an int (return int(...) of a whole number) "
                                           "(docs/engine.md: what a score may hold)"]
    manifest = json.loads((out / "stats" / "manifest.json").read_text(encoding="utf-8"))
    assert "its session values declare no stored type" in json.dumps(manifest)


# ----------------------------------------------------------------------------- extreme finite estimates
#: finite floats at the edges: the largest, the smallest subnormal, the most negative
EXTREMES = {"huge": (1e308, -1e308, 1.7976931348623157e308), "tiny": (5e-324, 0.0, 1e-300),
            "neg": (-1e308, -1.7976931348623157e308, 1e308)}


class _ExtremeSlices(SliceEstimator):
    def estimate(self, key, accs, window, aux):
        n = accs.n_sessions
        return [{"slice": key, "n_interactions": accs[1].n_items, "n_sessions": n,
                 **{name: {"mean": m, "ci_low": lo, "ci_high": hi, "n": n} for name, (m, lo, hi) in EXTREMES.items()}}]


class Extreme(MetricTransform):
    """A metric whose estimator reports extreme finite estimates (what a custom estimator may return)."""

    name = "extreme"
    info = MetricInfo(name="extreme", estimates=tuple(
        EstimateInfo(name, name, f"an extreme estimate ({name})", unit="units", value_range=(0, 1), direction=-1,
                     gate=name, headline=True) for name in EXTREMES),
        parquet=(ParquetColumns(columns=(("v", "float64"),)),))

    def spec(self, windowed=False):
        return MetricSpec(name=self.name, estimator=_ExtremeSlices(), session_reducer=_SessionWords(),
                          slices=self.slices, scorer=lambda x: Scored.of(x, 1.0),
                          interaction_record=lambda s: {"v": s.value}, session_value=lambda s: s.value,
                          session_value_type=float, session_slice_combine=BootstrapMeanCombineFn(1))


def _longest_number(text: str) -> int:
    return max((len(m) for m in re.findall(r"[-+]?\d[\d.,]*(?:e[-+]?\d+)?", text)), default=0)


@pytest.mark.slow
def test_extreme_finite_estimates_pass_the_audit_report_gates_and_compare(tmp_path, monkeypatch, capsys):
    _register(monkeypatch, "extreme", Extreme)
    data = _jsonl(tmp_path / "in.jsonl", [(f"s{i}", "ab"[i % 2], ["1", "2"]) for i in range(6)])
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        argv = ["--input", data, "--metrics", "extreme", "--mode", "bayesian", "--output", str(out),
                "--gate", "extreme huge mean <= 1", "--gate", "extreme tiny ci_high <= 1",
                "--gate", "extreme neg mean >= 0 in every assistant_id"]
        if name == "b":
            argv += ["--compare", str(tmp_path / "a"), "--baseline", str(tmp_path / "a"),
                     "--gate", "regression extreme huge not worse"]
        rc = _main(argv)
        printed = capsys.readouterr()
        assert rc == 3, printed.err[-2000:]  # the gates fail (1e308 > 1), after every output is published
        for f in ("results.json", "report.html", "gates.json", "run_info.json"):
            assert (out / f).exists(), f
        assert _longest_number(printed.out) < 20 and _longest_number(printed.err) < 40, printed
        html = (out / "report.html").read_text(encoding="utf-8")
        assert "1.0000e+308" in html and _longest_number(html) < 60
        runs.append(out)
    assert (tmp_path / "b" / "comparison.json").exists()
    from fair_forge_beam.reports import compare

    assert compare.main([str(runs[1]), str(runs[0]), "--all"]) in (0, None)
    table = capsys.readouterr().out
    assert "extreme" in table and _longest_number(table) < 20, table


@pytest.mark.slow
def test_a_report_that_fails_publishes_the_run_and_says_so(tmp_path, monkeypatch, capsys, caplog):
    """A fault while writing report.html: every other output is published, one error line says
    what failed and where, and the run ends with exit code 1 (was: the finished audit was discarded)."""
    from fair_forge_beam.reports import html
    from fair_forge_beam.reports.launcher_reports import REPORT_FAILED_EXIT_CODE

    def broken(*a, **k):
        raise OverflowError(34, "Numerical result out of range")

    monkeypatch.setattr(html, "write_report", broken)
    data = tmp_path / "in.jsonl"
    _jsonl(data, [("s1", "a", ["I am happy to help"]), ("s2", "b", ["Sorry, that is sad"])])
    out = tmp_path / "out"
    rc = _main(["--input", str(data), "--metrics", "humanity", "--output", str(out)])
    assert rc == REPORT_FAILED_EXIT_CODE == 1
    assert (out / "results.json").exists() and (out / "_SUCCESS").exists() and not (out / "report.html").exists()
    said = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert any(line.startswith("report.html was not written: OverflowError: ") and "test_score_boundary.py" not in line
               and f"published in {out}" in line for line in said), said
    assert "report.html" not in capsys.readouterr().out.split("outputs:")[-1]


@pytest.mark.slow
def test_an_estimate_outside_the_declared_range_is_a_data_quality_warning(tmp_path, monkeypatch):
    """A score of -5 in words per answer (declared 0–200) gave an interval from -0.90 and passed the
    gates without a word: every estimate outside the range its info declares is a data-quality warning
    naming the metric, the slice, the estimate and the values (the engine cannot tell which score feeds
    which estimate, so it checks the estimates)."""
    _register(monkeypatch, "words", OddWords)
    data = _jsonl(tmp_path / "in.jsonl", [("s1", "a", ["2", "3"]), ("s2", "a", ["4", "5"]), ("s3", "b", ["3", "3"]),
                                          ("odd", "b", ["-5", "-7"])])
    out = tmp_path / "out"
    assert _main(["--input", data, "--metrics", "words", "--mode", "frequentist", "--no-report", "--output",
                  str(out)]) == 0
    found = [json.loads(line) for f in sorted((out / "data_quality").iterdir()) for line in f.read_text().splitlines()]
    ranged = {w["key"]: w["message"] for w in found if w["kind"] == "estimate_outside_range"}
    assert set(ranged) == {"words/assistant_id=b/mean_words"}, found
    assert ranged["words/assistant_id=b/mean_words"].startswith(
        "words mean_words in slice assistant_id=b: mean -1.5000 outside the range the metric declares, 0 to 200 (words)")


#: a score that is a pydantic model, written as the metric's interaction record as it is: the score ids and words
_WordsModel = create_model("_WordsModel", **{f: (int if f == "turn_index" else str, ...) for f in IDS}, words=(float, ...))


def _model_score(x):
    return _WordsModel(element_id=x.element_id, session_id=x.session_id, assistant_id=x.assistant_id,
                       language=x.language, turn_index=x.turn_index, qa_id=x.qa_id, words=float(x.assistant))


class ModelWords(Int64Words):
    """Int64Words (the Parquet column ``words`` declared int64) whose score and record is a pydantic model."""

    def spec(self, windowed=False):
        return MetricSpec(name=self.name, estimator=_SliceWords(self.mode), session_reducer=_SessionWords(),
                          slices=self.slices, scorer=_model_score, interaction_record=lambda s: s,
                          session_value=lambda s: s.words, session_value_type=float,
                          session_slice_combine=BootstrapMeanCombineFn(1))


def test_a_pydantic_model_score_is_checked_against_the_declared_parquet_columns():
    """fix39a: the declared Parquet column types were followed for a record that is a dict, but a record that is a
    pydantic model (a score written as it is) was not checked: 2.5 went to the int64 column ``words``. Now the
    model is checked as it is written (its dump), as a dict is."""
    from apache_beam.testing.util import assert_that, equal_to
    from helpers import fnapi_pipeline, ix

    from fair_forge_beam._beam import beam
    from fair_forge_beam.statistical import FrequentistMode

    with fnapi_pipeline() as p:
        out = p | beam.Create([ix("s1", "a", 0, "2"), ix("s1", "a", 1, "2.5"), ix("s2", "a", 0, "4")]) | ModelWords(
            statistical_mode=FrequentistMode())
        assert_that(out["interactions"] | beam.Map(lambda r: (r["element_id"], r["words"])),
                    equal_to([("s1/a/0", 2.0), ("s2/a/0", 4.0)]), label="scored")
        assert_that(out["dead_letter"] | beam.Map(lambda d: (d.element_id, d.reason)), equal_to([(
            "s1/a/1", "words: the scorer's _WordsModel record column 'words' is 2.5, not a whole number, where the metric "
                      "declares an int (return int(...) of a whole number) (the metric's info declares the Parquet column "
                      "'words' int64) (docs/engine.md: what a score may hold)")]), label="dead")


#: trial39b B1: a union with a str / bool arm and a container arm — the scalar arm took any container unchecked
#: ([nan] passed, and the session combine crashed on it); a container never fits a scalar arm
FORMS_39B = [
    (Union[str, list[float]], [NAN], "'x[0]' is nan"),
    (Union[bool, list[int]], [2**64], "'x[0]' is 18446744073709551616, outside int64"),
    (Optional[Union[str, dict[str, float]]], {"a": INF}, "\"x['a']\" is inf"),
    (Union[typing.Literal["a", "b"], list[int]], [2.5], "'x[0]' is 2.5, not a whole number"),
    (Union[str, list[float]], (1.0, NAN), "'x[1]' is nan"),
    # accepted
    (Union[str, list[float]], "text", None), (Union[str, list[float]], [0.5], None), (Union[bool, list[int]], True, None),
    (Optional[Union[str, dict[str, float]]], {"a": 1.0}, None),
]
QUICK_DECLARED += [d for d, _, _ in FORMS_39B]


@pytest.mark.parametrize("declared, value, said", FORMS_39B, ids=[f"{i}" for i in range(len(FORMS_39B))])
def test_a_container_never_fits_a_scalar_arm_of_a_union(declared, value, said):
    """trial39b B1, as the test above: ``Union[str, list[float]]`` took ``[nan]`` by its str arm."""
    test_the_check_follows_every_form_of_the_declaration(declared, value, said)


class _ReprRaises:
    def __repr__(self):
        raise RuntimeError("repr boom")


class _FloatReprRaises(float):
    def __repr__(self):
        raise RuntimeError("repr boom")


@pytest.mark.parametrize("value, said", [(_ReprRaises(), "a _ReprRaises (a _ReprRaises whose repr raised) where the "
                                                         "metric declares a number"),
                                         (_FloatReprRaises(2.0), "a _FloatReprRaises (a _FloatReprRaises whose repr "
                                                                 "raised), not a float or int")],
                         ids=["object", "float"])
def test_the_check_never_raises_on_a_value_whose_repr_raises(value, said):
    """trial39b B4: ``_short`` called ``repr()``, so a value whose ``__repr__`` raised, where an int is
    declared, made the check itself raise (a traceback in Engine/words/Score); now the reason names its type."""
    from fair_forge_beam.score_check import ScoreCheck

    spec = MetricSpec(name="m", scorer=None, interaction_record=None, session_value=lambda s: s.value,
                      session_reducer=None, estimator=None, session_value_type=int)
    problem = ScoreCheck(spec, IDS).problem(Scored("e", "s", "a", "english", 0, "q", 1.0), value)
    assert problem.startswith(f"session value is {said}"), problem
