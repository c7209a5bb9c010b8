"""fix49a (trial49b B1, B3, L): an integer valid in JSON but beyond what an int64 column or a C long
holds never crashes a run. Every integer field read from outside — an input record's (JSON, a
StreamedBatch, Parquet), a generator's or a judge's reply, a run file read back — is bounded where
it is validated (``schemas.common.bounded_int``: at most 2**63-1, never ``true`` or text), so a
larger value is a dead letter naming the field and the bound, with the original record. Each test
here failed on main: a turn_index of 10**30 (or a StreamedBatch's 2**64, a Parquet uint64 2**63+5)
ended the audit with ``OverflowError: Python int too large to convert to C long`` in its stats
table, a generator's ``turn_number`` of 10**29 ended ``generate --conversation --parquet``, and
``true`` / ``"2"`` were read as turn indices."""
from __future__ import annotations

import json
import typing

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

#: what an int64 column holds (``schemas.common.INT64_MAX``)
INT64_MAX = 2**63 - 1
BIG = 10**30


# ---------------------------------------------------------------- every integer field at the edge
def _edge_models() -> list:
    """The models that read values from outside: input records, the generator's and every judge's
    reply schema, the run files read back (``trend``, ``--compare``, a roll-up)."""
    from fair_forge_beam.generators.schemas import GeneratedConversationOutput, GeneratedQueriesOutput
    from fair_forge_beam.metrics.role_adherence import RoleAdherenceJudgeOutput
    from fair_forge_beam.optimizer.evaluation import EvaluatorScore
    from fair_forge_beam.reports import run_files
    from fair_forge_beam.schemas.agentic import AnswerCorrectnessOutput
    from fair_forge_beam.schemas.best_of import BestOfJudgeOutput
    from fair_forge_beam.schemas.common import Dataset, StreamedBatch
    from fair_forge_beam.schemas.context import ContextJudgeOutput
    from fair_forge_beam.schemas.conversational import ConversationalJudgeOutput
    from fair_forge_beam.schemas.prompt_evaluator import JQJudgeOutput
    from fair_forge_beam.schemas.regulatory import RegulatoryJudgeOutput

    files = [m for m in vars(run_files).values() if isinstance(m, type) and issubclass(m, BaseModel)
             and m.__module__ == run_files.__name__]
    return [Dataset, StreamedBatch, GeneratedQueriesOutput, GeneratedConversationOutput, RoleAdherenceJudgeOutput,
            EvaluatorScore, AnswerCorrectnessOutput, BestOfJudgeOutput, ContextJudgeOutput, ConversationalJudgeOutput,
            JQJudgeOutput, RegulatoryJudgeOutput, *files]


def _integers(annotation, path: str, seen: set):
    """``(path, annotation)`` of every integer inside ``annotation`` (fields of nested models, items
    of lists and dicts, members of unions), the annotation with its constraints (``Annotated``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in seen:
            return
        seen.add(annotation)
        for name, field in annotation.model_fields.items():
            a = field.annotation
            if field.metadata:
                a = typing.Annotated[(a, *field.metadata)]
            yield from _integers(a, f"{annotation.__name__}.{name}", seen)
        return
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        base = typing.get_args(annotation)[0]
        if base is int:
            yield path, annotation
        else:
            yield from _integers(base, path, seen)
        return
    if annotation is int:
        yield path, annotation
        return
    for i, arg in enumerate(typing.get_args(annotation)):
        yield from _integers(arg, f"{path}[]" if origin in (list, dict, tuple) else path, seen)


def _edge_integers() -> list:
    seen: set = set()
    return [x for m in _edge_models() for x in _integers(m, "", seen)]


def test_the_edge_models_integer_fields_are_found():
    """The walk finds the fields the trial named (so the test below is not vacuous), and the bound is
    the package's."""
    from fair_forge_beam.schemas.common import INT64_MAX as bound

    assert bound == INT64_MAX
    paths = {p for p, _ in _edge_integers()}
    assert {"StreamedBatch.turn_index", "ConversationTurn.turn_number", "_Summary.interactions_read",
            "_Config.seed"} <= paths, sorted(paths)


@pytest.mark.parametrize("path, annotation", _edge_integers(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_integer_field_read_from_outside_is_bounded_and_strict(path, annotation):
    """Each integer field of a model that reads values from outside refuses 2**63 and 10**30 (no int64
    column holds them), ``true`` and the text ``"2"``, and takes 2**63-1: main took any integer (a
    StreamedBatch's 2**64 crashed the audit's writer), and ``true`` / ``"2"`` as turn indices."""
    adapter = TypeAdapter(annotation)
    assert adapter.validate_python(INT64_MAX) == INT64_MAX, path
    for bad in (INT64_MAX + 1, BIG, True, False, "2"):
        with pytest.raises(ValidationError) as err:
            adapter.validate_python(bad)
        if isinstance(bad, int) and not isinstance(bad, bool):
            assert "2**63-1" in str(err.value), (path, str(err.value))


def test_turn_index_words_and_whole_floats():
    """The reasons a reader gives (the field, the bound), and a whole float (a Parquet or pandas integer
    column with a missing value is float64) read as its int, as data.md documents."""
    from fair_forge_beam.plain import validation_words
    from fair_forge_beam.schemas.common import StreamedBatch

    def reason(turn):
        try:
            StreamedBatch.model_validate({"metadata": {"session_id": "s", "assistant_id": "a"},
                                          "batch": {"qa_id": "q", "query": "q", "assistant": "a"}, "turn_index": turn})
        except ValidationError as exc:
            return validation_words(exc)
        return None

    assert reason(BIG) == ("turn_index: 1000000000000000000000000000000 is over the largest value read, 2**63-1 "
                           "(9223372036854775807: what an int64 column holds)")
    assert reason(10**400).startswith(f"turn_index: 1{'0' * 59}… (401 characters) is over the largest value read, "
                                      "2**63-1")
    assert reason(1e30).startswith("turn_index: 1000000000000000019884624838656 is over the largest value read, 2**63-1")
    assert reason(True) == "turn_index: must be an integer, not true"
    assert reason("2") == "turn_index: must be an integer, not the text '2'"
    assert reason(2.0) is None and reason(INT64_MAX) is None and reason(0) is None


# ---------------------------------------------------------------- the audit, end to end (B1, L)
def _flat(sid, **extra):
    return {"session_id": sid, "assistant_id": "a", "qa_id": f"q-{sid}", "query": "hi", "assistant": "happy joy", **extra}


def test_the_audit_dead_letters_turn_indices_no_column_holds(tmp_path):
    """trial49b B1 and L: one audit over JSON Lines (flat records, StreamedBatches) and a Parquet uint64
    column: every turn_index beyond 2**63-1, ``true``, ``false`` and ``"2"`` is a dead letter naming the
    field (and the bound) with its original record; 2**63-1 and 2.0 are read; exit 0, everything
    published. Main: exit 1, ``OverflowError … [while running 'Engine/Statssessions/Table']``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipelines import audit

    streamed = {"metadata": {"session_id": "sb-big", "assistant_id": "a"},
                "batch": {"qa_id": "q", "query": "hi", "assistant": "happy joy"}, "turn_index": 2**64}
    records = [_flat("s1"), _flat("s2", turn_index=BIG), streamed, _flat("max", turn_index=INT64_MAX),
               _flat("true", turn_index=True), _flat("false", turn_index=False), _flat("text", turn_index="2"),
               _flat("float", turn_index=2.0)]
    data = tmp_path / "t.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    pq.write_table(pa.table({"session_id": ["p-big", "p-max"], "assistant_id": ["a", "a"], "qa_id": ["q", "q"],
                             "query": ["hi", "hi"], "assistant": ["happy joy"] * 2,
                             "turn_index": pa.array([2**63 + 5, INT64_MAX], pa.uint64())}), tmp_path / "t.parquet")
    out = tmp_path / "out"
    assert audit.main(["--input", str(data), "--input", str(tmp_path / "t.parquet"), "--metrics", "humanity",
                       "--no-report", "--quiet", "--output", str(out)]) == 0
    summary = json.loads((out / "results.json").read_text(encoding="utf-8"))["summary"]
    raws = [(json.loads(d["raw"]), d) for f in sorted((out / "dead_letter").glob("*.jsonl"))
            for d in map(json.loads, f.read_text(encoding="utf-8").splitlines())]
    dead = {(raw.get("metadata") or raw)["session_id"]: d for raw, d in raws}
    assert summary["interactions_read"] == 4 and summary["rejected_at_read"] == 6, summary
    bound = "is over the largest value read, 2**63-1 (9223372036854775807: what an int64 column holds)"
    assert dead["s2"]["reason"] == f"turn_index: {BIG} {bound}"
    assert json.loads(dead["s2"]["raw"]) == _flat("s2", turn_index=BIG)  # the original record, its number whole
    assert dead["sb-big"]["reason"] == f"turn_index: {2**64} {bound}"
    assert dead["p-big"]["reason"] == f"turn_index: {2**63 + 5} {bound}"
    assert dead["true"]["reason"] == "turn_index: must be an integer, not true"
    assert dead["false"]["reason"] == "turn_index: must be an integer, not false"
    assert dead["text"]["reason"] == "turn_index: must be an integer, not the text '2'"
    assert all(d["stage"] == "read" and d["source"] for d in dead.values())


def test_huge_weights_and_timestamps_are_dead_letters_not_crashes():
    """The same class for a float field and the event time: an integer no float holds (10**400) was an
    ``OverflowError`` in the event-time parser (a windowed read crashed) and ``should be a number, not a
    number`` for a weight."""
    from fair_forge_beam.io.event_time import parse_timestamp
    from fair_forge_beam.plain import validation_words
    from fair_forge_beam.schemas.common import Batch

    for value in (10**400, -(10**400)):
        with pytest.raises(ValueError, match=r"^timestamp (10{59}|-10{58})… \(40[12] characters\) is out of range$"):
            parse_timestamp(value)
    with pytest.raises(ValidationError) as err:
        Batch(qa_id="q", query="q", assistant="a", weight=10**400)
    assert validation_words(err.value) == ("weight: weight must be a finite number >= 0, got 1" + "0" * 59
                                           + "… (401 characters)")
    assert Batch(qa_id="q", query="q", assistant="a", weight=BIG).weight == 1e30


# ---------------------------------------------------------------- the generator (B3)
def test_a_generated_turn_number_no_column_holds_is_a_dead_letter(tmp_path):
    """trial49b B3: ``generate --conversation --parquet`` whose generator answers ``turn_number`` 10**29
    for one chunk: that answer is a dead letter naming the field and the bound (re-asked once, as any
    invalid answer), the other conversations are written to both files. Main: ``OverflowError`` in
    WriteGenerated (its Parquet table), nothing written."""
    import pyarrow.parquet as pq

    from fair_forge_beam.generators.generate import plan_requests
    from fair_forge_beam.generators.loader import LocalMarkdownLoader, packaged_corpus_path
    from fair_forge_beam.generators.strategies import RandomSamplingStrategy
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer
    from pipelines import generate

    chunks = LocalMarkdownLoader().load(packaged_corpus_path("callcenter"))
    plan = plan_requests(chunks, "bot", num_queries_per_chunk=2, conversation_mode=True,
                         selection_strategy=RandomSamplingStrategy(2, 2, seed=7), seed=7)
    by_id = {c.chunk_id: c for c in chunks}
    bad_header = by_id[plan.groups[0]["slots"][0][1]].content.split("\n")[0]

    def answer(req):
        n = 10**29 if bad_header in req.prompt else 2
        return {"turns": [{"query": "First?", "turn_number": 1}, {"query": "Then?", "turn_number": n}],
                "conversation_summary": "conv", "chunk_summary": "sum"}

    args = ["--corpus", "callcenter", "--strategy", "random", "--num-samples", "2", "--chunks-per-sample", "2",
            "--seed", "7", "--num-queries", "2", "--conversation", "--parquet", "--assistant-id", "bot",
            "--generator-model", "gen-model", "--generator-retries", "0"]
    with ScriptedOpenAIServer(answer) as srv:
        summary = generate.run([*args, "--generator-base-url", srv.base_url, "--generator-cache",
                                str(tmp_path / "c.sqlite3"), "--output", str(tmp_path / "out")])
    out = tmp_path / "out"
    dead = [json.loads(line) for line in (out / "dead_letter.jsonl").read_text(encoding="utf-8").splitlines()]
    n_bad = sum(1 for r in plan.requests if bad_header in r.messages[0][1])
    assert n_bad >= 1 and len(dead) == n_bad and summary["dead_letters"] == n_bad, dead
    assert all("turns.1.turn_number: 100000000000000000000000000000 is over the largest value read, 2**63-1"
               in d["reason"] for d in dead), dead
    rows = pq.read_table(out / "dataset.parquet").to_pylist()
    numbers = [b["agentic"]["turn_number"] for r in rows for b in r["conversation"]]
    assert numbers and set(numbers) == {1, 2} and summary["interactions"] == len(numbers)


# ---------------------------------------------------------------- the writers' defence
def test_a_value_a_column_cannot_hold_is_named_by_the_writer():
    """Should a value get past its edge (a bug), the writer names the output, the column and the
    value, where pyarrow said ``Python int too large to convert to C long`` and nothing else."""
    import pyarrow as pa

    from fair_forge_beam.io.write import UnwritableValue, arrow_array, arrow_rows_table

    schema = pa.schema([("name", pa.string()), ("declared", pa.int64())])
    assert arrow_rows_table([{"name": "x", "declared": INT64_MAX}], schema, "stats/sessions").num_rows == 1
    with pytest.raises(UnwritableValue, match=r"^stats/sessions: column 'declared' \(int64\) cannot hold "
                                              r"1000000000000000000000000000000: a value read from outside"):
        arrow_rows_table([{"name": "x", "declared": 1}, {"name": "y", "declared": BIG}], schema, "stats/sessions")
    with pytest.raises(UnwritableValue, match=r"^results.parquet: column 'turn_index' \(int64\) cannot hold 18446744073709551616"):
        arrow_array([1, 2**64], pa.int64(), "results.parquet", "turn_index")


# ---------------------------------------------------------------- numpy scalars (fix50b)
@pytest.mark.parametrize("path, annotation", _edge_integers(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_integer_field_refuses_numpy_bools_and_reads_numpy_integers(path, annotation):
    """fix50b: ``StreamedBatch.model_validate`` took ``numpy.bool_(True)`` as turn_index 1; a strict
    field (a generator's turn_number, a run file's count) took no numpy integer at all, and
    ``numpy.uint64(2**64-1)`` was pydantic's "exceeded maximum size", not the bound."""
    import numpy as np

    adapter = TypeAdapter(annotation)
    for flag in (np.bool_(True), np.bool_(False)):
        with pytest.raises(ValidationError):
            adapter.validate_python(flag)
    for n in (np.int64(INT64_MAX), np.uint64(INT64_MAX)):
        got = adapter.validate_python(n)
        assert got == INT64_MAX and type(got) is int, (path, got)
    assert type(adapter.validate_python(np.uint8(7))) is int
    with pytest.raises(ValidationError) as err:
        adapter.validate_python(np.uint64(2**64 - 1))
    assert "2**63-1" in str(err.value), (path, str(err.value))


def _streamed(turn_index=0, weight=None):
    batch = {"qa_id": "q", "query": "hi", "assistant": "happy joy", **({} if weight is None else {"weight": weight})}
    return {"metadata": {"session_id": "s", "assistant_id": "a"}, "batch": batch, "turn_index": turn_index}


def test_numpy_bools_are_refused_by_the_models_themselves():
    """fix50b: as Python's ``true``: no turn_index 1, no weight 1.0; numpy numbers read as their values."""
    import numpy as np

    from fair_forge_beam.plain import validation_words
    from fair_forge_beam.schemas.common import StreamedBatch

    def reason(**kw):
        try:
            StreamedBatch.model_validate(_streamed(**kw))
        except ValidationError as exc:
            return validation_words(exc)
        return None

    assert reason(turn_index=np.bool_(True)) == "turn_index: must be an integer, not true"
    assert reason(turn_index=np.bool_(False)) == "turn_index: must be an integer, not false"
    assert reason(weight=np.bool_(True)) == "batch.weight: weight must be a number, got bool True"
    assert reason(weight=True) == "batch.weight: weight must be a number, got bool True"
    got = StreamedBatch.model_validate(_streamed(turn_index=np.int64(3), weight=np.float32(0.5)))
    assert (got.turn_index, type(got.turn_index), got.batch.weight, type(got.batch.weight)) == (3, int, 0.5, float)


class NumpyRetriever:
    """A retriever whose records carry numpy scalars (a pandas frame's rows)."""

    @staticmethod
    def make():
        import numpy as np

        from fair_forge_beam import Retriever
        from fair_forge_beam.schemas.common import IterationLevel

        class Rows(Retriever):
            @property
            def iteration_level(self):
                return IterationLevel.STREAM_BATCHES

            def load_dataset(self):
                rows = {"ok": _streamed(np.int64(3), np.float64(0.5)), "flag": _streamed(np.bool_(True)),
                        "wflag": _streamed(0, np.bool_(True)), "big": _streamed(np.uint64(2**64 - 1))}
                for sid, r in rows.items():
                    r["metadata"]["session_id"] = sid
                return list(rows.values())
        return Rows


def test_numpy_scalars_from_a_retriever_are_read_as_the_models_read_them(tmp_path):
    from fair_forge_beam._beam import beam
    from fair_forge_beam.io.read import ReadInteractions
    from fair_forge_beam.io.write import read_jsonl_shards, write_jsonl
    from helpers import fnapi_pipeline

    out = tmp_path / "out"
    p = fnapi_pipeline()
    res = p | ReadInteractions(retriever=NumpyRetriever.make())
    write_jsonl(res["interactions"] | "I" >> beam.Map(lambda x: x._asdict()), str(out / "i"), "I")
    write_jsonl(res["dead_letter"], str(out / "d"), "D")
    p.run().wait_until_finish()
    inter, dead = read_jsonl_shards(str(out / "i")), read_jsonl_shards(str(out / "d"))
    assert [(x["session_id"], x["weight"]) for x in inter] == [("ok", 0.5)], inter
    reasons = {json.loads(d["raw"])["metadata"]["session_id"]: d["reason"] for d in dead}
    assert reasons == {"flag": "turn_index: must be an integer, not true",
                       "wflag": "batch.weight: weight must be a number, got bool True",
                       "big": f"turn_index: {2**64 - 1} is over the largest value read, 2**63-1 "
                              "(9223372036854775807: what an int64 column holds)"}, reasons
