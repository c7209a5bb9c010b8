"""trial38 T1, T8: a metric's own code that fails, or gives something that is not a score of its
interaction, at the engine's scorer boundary (engine._ScoreAndRoute, score_check.ScoreCheck).

Before: a scorer that raised, or returned a float / a plain tuple / a list, stopped the whole audit
with a traceback (``AttributeError: 'float' object has no attribute 'value'`` in the spec's own
session_value); ``None`` was "not scored" with no reason anywhere; a score re-keyed to another
session (``session_id="ghost"``) pooled every session into one without a word. Now each is a dead
letter of the metric with its reason, and the rest is scored.
"""
from __future__ import annotations

import collections
import collections.abc as abc
import dataclasses
import json
from typing import NamedTuple

import pytest

from fair_forge_beam._beam import beam
from fair_forge_beam.engine import MetricSpec, Scored
from fair_forge_beam.schemas.metric_info import ParquetColumns
from fair_forge_beam.statistical.combiners import BootstrapMeanCombineFn
from test_score_boundary import OddWords, _jsonl, _SessionWords, _SliceWords

#: a secret-shaped text an exception quotes (masked in the reason) and a control character (escaped)
KEY = "sk-proj-" + "A1b2C3d4E5" * 4


def _score(x):
    """docs/engine.md's worked example, going wrong as the answer says."""
    a = x.assistant
    if a == "raise":
        raise ValueError(f"boom with {KEY}\x1b[31m red\nsecond line " + "z" * 500)
    if a == "float":
        return 3.0
    if a == "tuple":
        return (x.element_id, 3)
    if a == "list":
        return [Scored.of(x, 1), Scored.of(x, 2)]
    if a == "none":
        return None
    if a == "ghost":
        return Scored.of(x, 2)._replace(session_id="ghost")
    if a == "otherturn":
        return Scored.of(x, 2)._replace(turn_index=99)
    if a == "svraise":
        return Scored.of(x, "not a number")
    return Scored.of(x, len(a.split()))


def _session_value(s):
    if s.value == "not a number":
        raise TypeError("the session value needs a number")
    return s.value


class Words(OddWords):
    """test_score_boundary's metric (docs/engine.md's worked example), its scorer as the test says."""

    def scorer(self):
        return _score

    def spec(self, windowed=False):
        return MetricSpec(name=self.name, estimator=_SliceWords(self.mode), session_reducer=_SessionWords(),
                          slices=self.slices, scorer=self.scorer(), interaction_record=lambda s: {"words": s.value},
                          session_value=_session_value, session_value_type=float,
                          session_slice_combine=BootstrapMeanCombineFn(1), batch_size=self.batch_size())

    def batch_size(self):
        return None


class _BatchScore(beam.DoFn):
    """A batch scorer whose call fails as a whole when one answer of the batch says ``raise``."""

    def process(self, batch):
        if any(x.assistant == "raise" for x in batch):
            raise RuntimeError("one answer of the batch is odd")
        for x in batch:
            yield Scored.of(x, len(x.assistant.split()))


class _SkippingScore(beam.DoFn):
    """A batch scorer that yields nothing at all for an answer saying ``skip``."""

    def process(self, batch):
        for x in batch:
            if x.assistant != "skip":
                yield Scored.of(x, len(x.assistant.split()))


class SkippingWords(Words):
    def scorer(self):
        return _SkippingScore()

    def batch_size(self):
        return 64


class BatchWords(Words):
    def scorer(self):
        return _BatchScore()

    def batch_size(self):
        return 64


def _audit(tmp_path, monkeypatch, cls, sessions):
    from fair_forge_beam.metrics import registry
    from pipelines import audit

    monkeypatch.setitem(registry.METRICS, "words", registry.Registered(lambda mode, options: cls(statistical_mode=mode), cls))
    data = _jsonl(tmp_path / "in.jsonl", sessions)
    out = tmp_path / "out"
    try:
        rc = audit.main(["--input", data, "--metrics", "words", "--output", str(out)])
    except SystemExit as exc:
        rc = exc.code
    assert rc == 0
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    dead = [json.loads(line) for f in sorted((out / "dead_letter").iterdir()) for line in f.read_text().splitlines()]
    return doc, {json.loads(d["raw"])["assistant"]: d for d in dead}


ODD = ["raise", "float", "tuple", "list", "none", "ghost", "otherturn", "svraise"]


@pytest.mark.slow
def test_every_failure_of_a_function_scorer_is_a_dead_letter_and_the_rest_is_scored(tmp_path, monkeypatch, capsys):
    doc, dead = _audit(tmp_path, monkeypatch, Words, [
        ("s1", "a", ["one two", "three"]), ("s2", "a", ["four five six", "x"]), ("s3", "b", ["a b", "c"]),
        ("odd", "b", [*ODD, "fine answer"])])
    ms = doc["summary"]["metrics"]["words"]
    assert (ms["interactions_scored"], ms["interactions_not_scored"], ms["dead_letters"]) == (7, len(ODD), len(ODD)), ms
    assert sorted(dead) == sorted(ODD)
    for a, d in dead.items():
        raw = json.loads(d["raw"])
        assert d["stage"] == "words" and d["reason"].startswith("words: the ") and d["element_id"] == raw["element_id"], d
        assert raw["session_id"] == "odd" and raw["assistant"] == a
    why = {a: d["reason"] for a, d in dead.items()}
    raised = why["raise"]
    assert raised.startswith("words: the scorer raised ValueError: boom with ***\\x1b[31m red"), raised
    assert KEY not in raised and "\n" not in raised and "second line" not in raised and len(raised) < 330, raised
    for a, t in (("float", "float"), ("tuple", "tuple"), ("list", "list")):
        assert why[a].startswith(f"words: the scorer returned a {t}, not a score"), why[a]
    assert why["none"].startswith("words: the scorer returned None, no score"), why["none"]
    assert why["ghost"].startswith("words: the scorer's Scored names another interaction (session_id 'ghost', not "
                                   "'odd', the interaction's)"), why["ghost"]
    assert "(turn_index 99, not 6, the interaction's)" in why["otherturn"], why["otherturn"]
    assert why["svraise"].startswith("words: the spec's session_value raised TypeError: the session value needs a "
                                     "number"), why["svraise"]
    sessions = {r["slice"]: r["n_sessions"] for r in doc["metrics"]["words"]["slices"]}
    assert sessions["overall"] == 4  # no session "ghost" pooled in
    printed = capsys.readouterr().out
    assert f"{len(ODD)} not scored" in printed and "the scorer returned None, no score" in printed


@pytest.mark.slow
def test_a_batch_call_that_raises_is_scored_again_one_by_one(tmp_path, monkeypatch):
    """Decision (engine._ScoreAndRoute._failed): a batch whose call raises is scored again one
    interaction at a time; only the interaction that fails alone is a dead letter."""
    doc, dead = _audit(tmp_path, monkeypatch, BatchWords, [
        ("s1", "a", ["one two", "three"]), ("s2", "a", ["four five six", "raise"]), ("s3", "b", ["a b", "c"])])
    ms = doc["summary"]["metrics"]["words"]
    assert (ms["interactions_scored"], ms["dead_letters"]) == (5, 1), ms
    assert dead["raise"]["reason"].startswith("words: the scorer raised RuntimeError: one answer of the batch is odd")


@pytest.mark.slow
def test_an_interaction_a_dofn_scorer_gives_nothing_for_is_a_dead_letter(tmp_path, monkeypatch):
    """trial38 T8: an interaction the scorer neither scored nor dead-lettered was "not scored" with no
    reason anywhere."""
    doc, dead = _audit(tmp_path, monkeypatch, SkippingWords, [
        ("s1", "a", ["one two", "skip"]), ("s2", "a", ["four five six", "x"]), ("s3", "b", ["skip", "c"])])
    ms = doc["summary"]["metrics"]["words"]
    assert (ms["interactions_scored"], ms["interactions_not_scored"], ms["dead_letters"]) == (4, 2, 2), ms
    assert list(dead) == ["skip"] and sorted(ms["dead_letter_reasons"].values()) == [2], ms
    assert dead["skip"]["reason"].startswith("words: the scorer gave no score and no dead letter for this interaction")


def _batch_function(xs):
    """A function scorer given a batch (``batch_size``): its scores as a list; the whole call fails when one
    answer says ``raise``, and it leaves out an answer saying ``skip``."""
    if any(x.assistant == "raise" for x in xs):
        raise RuntimeError("one answer of the batch is odd")
    return [Scored.of(x, len(x.assistant.split())) for x in xs if x.assistant != "skip"]


class BatchFunctionWords(Words):
    def scorer(self):
        return _batch_function

    def batch_size(self):
        return 64


def test_a_function_scorers_batch_that_raises_is_scored_again_one_by_one():
    """fix39a: engine._ScoreAndRoute._failed scored a DoFn's failed batch again one interaction at a time, but a
    function scorer's batch that raised was dead letters whole (and a function's list of scores for a batch was
    refused as "returned a list"). The same rule for both: one odd record does not cost its batch."""
    from helpers import fnapi_pipeline, ix

    from apache_beam.testing.util import assert_that, equal_to
    from fair_forge_beam.statistical import FrequentistMode

    answers = {("s1", 0): "one two", ("s1", 1): "three", ("s2", 0): "raise", ("s2", 1): "four five six",
               ("s3", 0): "skip", ("s3", 1): "a b"}
    with fnapi_pipeline() as p:
        out = (p | beam.Create([ix(s, "a", t, a) for (s, t), a in answers.items()])
               | BatchFunctionWords(statistical_mode=FrequentistMode()))
        assert_that(out["interactions"] | beam.Map(lambda r: (r["session_id"], r["turn_index"], r["words"])),
                    equal_to([("s1", 0, 2), ("s1", 1, 1), ("s2", 1, 3), ("s3", 1, 2)]), label="scored")
        assert_that(out["dead_letter"] | beam.Map(lambda d: (d.element_id, d.reason.split(" (")[0])), equal_to([
            ("s2/a/0", "words: the scorer raised RuntimeError: one answer of the batch is odd"),
            ("s3/a/0", "words: the scorer gave no score and no dead letter for this interaction")]), label="dead")


def _odd_batch(xs):
    """A function scorer given a batch: ``None`` or a float in place of an answer's score, two scores for ``dup``."""
    out = []
    for x in xs:
        a = x.assistant
        if a == "none":
            out.append(None)
        elif a == "float":
            out.append(1.0)
        elif a == "dup":
            out += [Scored.of(x, 1), Scored.of(x, 1)]
        else:
            out.append(Scored.of(x, len(a.split())))
    return out


class OddBatchWords(BatchFunctionWords):
    def scorer(self):
        return _odd_batch


def test_one_interaction_gets_at_most_one_score_and_one_dead_letter_with_its_record():
    """trial39b B9: a batch's list holding two scores of one interaction counted it twice (its session's
    n_interactions 2, one interaction scored); a None or a float in the list gave two dead letters for one
    interaction, one without element_id and record. Now the second score is a dead letter naming the
    duplicate, and an interaction left without a score is one dead letter, with its record, saying what
    the scorer returned instead."""
    from helpers import fnapi_pipeline, ix

    from apache_beam.testing.util import assert_that, equal_to
    from fair_forge_beam.statistical import FrequentistMode

    answers = {("s1", 0): "one two", ("s1", 1): "none", ("s2", 0): "float", ("s2", 1): "dup", ("s3", 0): "a b c"}
    with fnapi_pipeline() as p:
        out = (p | beam.Create([ix(s, "a", t, a) for (s, t), a in answers.items()])
               | OddBatchWords(statistical_mode=FrequentistMode()))
        assert_that(out["interactions"] | beam.Map(lambda r: (r["session_id"], r["turn_index"], r["words"])),
                    equal_to([("s1", 0, 2), ("s2", 1, 1), ("s3", 0, 3)]), label="scored")
        assert_that(out["sessions"] | beam.Map(lambda r: (r["session_id"], r["n_interactions"])),
                    equal_to([("s1", 1), ("s2", 1), ("s3", 1)]), label="sessions")
        assert_that(out["dead_letter"] | beam.Map(lambda d: (
            d.element_id, d.element_id is not None and json.loads(d.raw)["element_id"] == d.element_id,
            d.reason.startswith("words: the scorer returned a NoneType, not a score") and "returned a float" in d.reason
            if d.element_id != "s2/a/1" else d.reason.split(" (")[0])), equal_to([
                ("s1/a/1", True, True), ("s2/a/0", True, True),
                ("s2/a/1", True, "words: the scorer gave a second score for the interaction 's2/a/1'")]), label="dead")


def test_a_check_that_raises_is_the_scores_dead_letter(monkeypatch):
    """trial39b B4: ``check.problem()`` ran outside the engine's guard, so a failure of the check itself was a
    traceback ending the audit; now it is the score's dead letter, with its record."""
    from helpers import fnapi_pipeline, ix

    from apache_beam.testing.util import assert_that, equal_to
    from fair_forge_beam.score_check import ScoreCheck
    from fair_forge_beam.statistical import FrequentistMode

    problem = ScoreCheck.problem

    def failing(self, score, *a, **k):
        if score.turn_index == 1:
            raise RuntimeError("the check failed")
        return problem(self, score, *a, **k)

    monkeypatch.setattr(ScoreCheck, "problem", failing)
    with fnapi_pipeline() as p:
        out = (p | beam.Create([ix("s1", "a", t, a) for t, a in enumerate(["one two", "three"])])
               | Words(statistical_mode=FrequentistMode()))
        assert_that(out["interactions"] | beam.Map(lambda r: (r["turn_index"], r["words"])), equal_to([(0, 2)]),
                    label="scored")
        assert_that(out["dead_letter"] | beam.Map(lambda d: (d.element_id, d.reason.split(" (")[0])), equal_to([
            ("s1/a/1", "words: the engine's check of the score raised RuntimeError: the check failed")]), label="dead")


class _Record(NamedTuple):
    words: float


@dataclasses.dataclass
class _RecordDC:
    words: float


class _Columns(abc.Mapping):
    """A mapping that is no dict subclass."""

    def __init__(self, **kw):
        self._d = kw

    def __getitem__(self, k):
        return self._d[k]

    def __iter__(self):
        return iter(self._d)

    def __len__(self):
        return len(self._d)


@pytest.mark.parametrize("rec", [collections.OrderedDict(words=2), collections.defaultdict(int, words=2),
                                 _Columns(words=2)], ids=["OrderedDict", "defaultdict", "Mapping"])
def test_any_mapping_record_gets_the_header_a_dict_gets(rec):
    """trial39b B2: a record that was an OrderedDict / defaultdict passed headed() without the header:
    every id column of results.parquet null, exit 0."""
    from helpers import ix

    from fair_forge_beam.engine import headed

    score = Scored.of(ix("s1", "a", 0, "one two"), 2)
    assert headed("words", "interaction", rec, score) == headed("words", "interaction", {"words": 2}, score)
    assert type(headed("words", "interaction", rec, score)) is dict


@pytest.mark.parametrize("rec", [_Record(2), _RecordDC(2)], ids=["NamedTuple", "dataclass"])
def test_a_namedtuple_or_dataclass_record_is_read_as_the_dict_of_its_fields(rec):
    """trial39b B3 (decision, docs/engine.md: a record is a mapping, a pydantic model, a NamedTuple or a
    dataclass): a NamedTuple record went out as it was and crashed the Parquet writer."""
    from helpers import ix

    from fair_forge_beam.engine import headed

    score = Scored.of(ix("s1", "a", 0, "one two"), 2)
    assert headed("words", "interaction", rec, score) == headed("words", "interaction", {"words": 2}, score)


_FORMS = {"nt": _Record, "dc": _RecordDC, "od": lambda v: collections.OrderedDict(words=v)}


class RecordFormWords(Words):
    """Words whose Parquet column ``words`` is int64 and whose record takes the form its answer names
    (``"nt 2.5"``: a NamedTuple holding 2.5)."""

    info = dataclasses.replace(Words.info, parquet=(ParquetColumns(columns=(("words", "int64"),)),))

    def spec(self, windowed=False):
        return dataclasses.replace(
            super().spec(windowed), scorer=lambda x: Scored.of(x, x.assistant), session_value=lambda s: 1.0,
            interaction_record=lambda s: _FORMS[s.value.split()[0]](float(s.value.split()[1])))


def test_a_record_of_any_form_is_checked_against_its_columns_and_written_with_its_header():
    """trial39b B2, B3: 3.5 in a NamedTuple / dataclass record's int64 column was not checked (and the
    Parquet writer failed on the record); an OrderedDict record's ids were null."""
    from helpers import fnapi_pipeline, ix

    from apache_beam.testing.util import assert_that, equal_to
    from fair_forge_beam.statistical import FrequentistMode

    answers = ["nt 2", "nt 3.5", "dc 4", "dc 0.5", "od 5"]
    with fnapi_pipeline() as p:
        out = (p | beam.Create([ix("s1", "a", t, a) for t, a in enumerate(answers)])
               | RecordFormWords(statistical_mode=FrequentistMode()))
        assert_that(out["interactions"] | beam.Map(lambda r: (r["element_id"], r["words"])),
                    equal_to([("s1/a/0", 2.0), ("s1/a/2", 4.0), ("s1/a/4", 5.0)]), label="scored")
        assert_that(out["dead_letter"] | beam.Map(lambda d: (d.element_id, d.reason.split(" (")[0])), equal_to([
            ("s1/a/1", "words: the scorer's Scored record column 'words' is 3.5, not a whole number, where the metric "
                       "declares an int"),
            ("s1/a/3", "words: the scorer's Scored record column 'words' is 0.5, not a whole number, where the metric "
                       "declares an int")]), label="dead")
