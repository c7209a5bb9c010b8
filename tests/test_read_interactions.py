"""ReadInteractions: files (JSON, JSONL sessions / StreamedBatch, Parquet, gzip), retrievers at
every iteration level, byte-range splitting of JSONL, and the read-stage dead letter.

Pipeline start-up dominates the cost of a small Beam test, so the read scenarios below are
attached to ONE ``TestPipeline`` (module fixture ``read_run``). Every ``assert_that`` check
records its own outcome, and ``test_read_scenario[<name>]`` reports each scenario on its own.
"""
from __future__ import annotations

import collections
import gzip
import json
import os
import random
import re
from pathlib import Path
from typing import Callable, Iterator

import apache_beam as beam
import pytest
from apache_beam.io import source_test_utils
from apache_beam.testing.util import assert_that, equal_to, is_empty

from fair_forge_beam.io.elements import Interaction
from fair_forge_beam.io.read import ReadInteractions, _JsonLinesSource
from fair_forge_beam.io.retriever import Retriever
from fair_forge_beam.schemas import Batch, Dataset, IterationLevel, SessionMetadata, StreamedBatch
from helpers import FNAPI, fnapi_pipeline


# ------------------------------------------------------------------ data helpers
def make_session(sid, n_turns: int, aid: str = "bot", language: str = "english", **batch_over) -> dict:
    return {
        "session_id": sid,
        "assistant_id": aid,
        "language": language,
        "context": f"context of {sid}",
        "conversation": [
            {"qa_id": f"{sid}-q{i}", "query": f"question {i} of {sid}", "assistant": f"I am happy to help ({sid}, {i}).", **batch_over}
            for i in range(n_turns)
        ],
    }


def keys_of_sessions(sessions) -> list[tuple]:
    """Expected (element_id, session_id, assistant_id, turn_index, qa_id) of session records."""
    out = []
    for s in sessions:
        sid, aid = str(s["session_id"]), str(s["assistant_id"])
        for i, b in enumerate(s["conversation"]):
            out.append((f"{sid}/{aid}/{i}", sid, aid, i, str(b["qa_id"])))
    return out


def streamed(sid: str, aid: str, qa_id: str, turn_index=None, **batch_over) -> dict:
    rec = {
        "metadata": {"session_id": sid, "assistant_id": aid, "language": "en", "context": ""},
        "batch": {"qa_id": qa_id, "query": f"q {qa_id}", "assistant": f"answer {qa_id}", **batch_over},
    }
    if turn_index is not None:
        rec["turn_index"] = turn_index
    return rec


def write_jsonl(path: Path, records, trailing_newline=True) -> str:
    text = "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records)
    if trailing_newline:
        text += "\n"
    path.write_text(text, encoding="utf-8")
    return str(path)


def write_json(path: Path, obj) -> str:
    path.write_text(json.dumps(obj), encoding="utf-8")
    return str(path)


def key(x: Interaction) -> tuple:
    return (x.element_id, x.session_id, x.assistant_id, x.turn_index, x.qa_id)


# ------------------------------------------------------------------ one pipeline, many recorded checks
class Expect:
    """Collects ``(pcoll, matcher)`` checks of one scenario. Every ``assert_that`` costs a few
    pipeline stages, so all checks of all scenarios share ONE ``assert_that`` (see ``read_run``),
    which runs each matcher on its own part and records the outcome."""

    def __init__(self, name: str):
        self.name = name
        self.parts: list = []  # (tag, pcoll, matcher)

    def that(self, pcoll, matcher: Callable, tag: str):
        self.parts.append((tag, pcoll, matcher))

    def outputs(self, out: dict, expected_keys, no_dead=True, no_quality=True):
        """Exact interaction keys; by default an empty dead letter and no quality warnings."""
        self.that(out["interactions"] | f"{self.name}Keys" >> beam.Map(key), equal_to(expected_keys), "interactions")
        if no_dead:
            self.that(out["dead_letter"], is_empty(), "no_dead_letter")
        if no_quality:
            self.that(out["quality"], is_empty(), "no_quality")


def _record_all(matchers: dict, results: str):
    """One matcher for the whole pipeline: split by (scenario, tag), run each check, record."""

    def _match(actual):
        parts = collections.defaultdict(list)
        for k, x in actual:
            parts[k].append(x)
        for k, matcher in matchers.items():
            try:
                matcher(parts.get(k, []))
                msg = "OK"
            except BaseException as exc:  # noqa: BLE001 - recorded, reported by the test
                msg = f"{type(exc).__name__}: {exc}"[:4000]
            with open(os.path.join(results, re.sub(r"\W", "_", ".".join(k)) + ".result"), "w", encoding="utf-8") as f:
                f.write(msg)

    return _match


SCENARIOS: dict[str, Callable] = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


class ReadRun:
    def __init__(self, results: Path, tags: dict, setup_errors: dict, run_error):
        self.results, self.tags, self.setup_errors, self.run_error = results, tags, setup_errors, run_error

    def verify(self, name: str):
        if name in self.setup_errors:
            raise self.setup_errors[name]
        assert self.tags.get(name), f"scenario {name} registered no check"
        failures = []
        for tag in self.tags[name]:
            p = self.results / (re.sub(r"\W", "_", f"{name}.{tag}") + ".result")
            if not p.exists():
                failures.append(f"{name}.{tag}: check did not run (pipeline error: {self.run_error!r})")
            elif p.read_text(encoding="utf-8") != "OK":
                failures.append(f"{name}.{tag}: {p.read_text(encoding='utf-8')}")
        assert not failures, "\n".join(failures)


@pytest.fixture(scope="module")
def read_run(tmp_path_factory) -> ReadRun:
    root = tmp_path_factory.mktemp("read_scenarios")
    results = root / "_results"
    results.mkdir()
    setup_errors: dict = {}
    tags: dict = {}
    matchers: dict = {}
    tagged = []
    p = fnapi_pipeline()
    for name, fn in SCENARIOS.items():
        d = root / name
        d.mkdir()
        ex = Expect(name)
        try:
            fn(d, p, ex)
        except (Exception, pytest.skip.Exception) as exc:  # noqa: BLE001 - reported by that scenario's test
            setup_errors[name] = exc
            continue
        for tag, pcoll, matcher in ex.parts:
            k = (name, tag)
            assert k not in matchers, f"duplicate check {k}"
            matchers[k] = matcher
            tags.setdefault(name, []).append(tag)
            tagged.append(pcoll | f"Tag[{name}.{tag}]" >> beam.Map(lambda x, k=k: (k, x)))
    assert_that(tuple(tagged) | "AllChecks" >> beam.Flatten(), _record_all(matchers, str(results)), label="CheckAll")
    run_error = None
    try:
        p.run()
    except Exception as exc:  # noqa: BLE001 - reported by every test whose checks did not run
        run_error = exc
    return ReadRun(results, tags, setup_errors, run_error)


# ------------------------------------------------------------------ file formats
@scenario
def json_list_file(d, p, ex):
    sessions = [make_session("s1", 1), make_session("s2", 2, language="EN"), make_session("s3", 3, weight=0.25)]
    out = p | "json_list_file" >> ReadInteractions(write_json(d / "data.json", sessions))
    ex.outputs(out, keys_of_sessions(sessions))
    ex.that(
        out["interactions"] | "json_list_fields" >> beam.Map(lambda x: (x.element_id, x.language, x.context, x.weight, x.ground_truth_assistant, x.agentic)),
        equal_to(
            [("s1/bot/0", "english", "context of s1", None, None, {})]
            + [(f"s2/bot/{i}", "english", "context of s2", None, None, {}) for i in range(2)]
            + [(f"s3/bot/{i}", "english", "context of s3", 0.25, None, {}) for i in range(3)]
        ),
        "fields",
    )


@scenario
def json_single_session_object(d, p, ex):
    s = make_session(123, 2)  # int session id, as in upstream's dataset.json
    s["conversation"][0]["qa_id"] = 1
    out = p | "json_single_session_object" >> ReadInteractions(write_json(d / "one.json", s))
    ex.outputs(out, [("123/bot/0", "123", "bot", 0, "1"), ("123/bot/1", "123", "bot", 1, "123-q1")], no_quality=False)
    # issue 28: the int id is read as text with a warning that says so
    ex.that(out["quality"] | "one_json_kinds" >> beam.Map(lambda q: (q.kind, q.key)), equal_to([("numeric_id", "123/bot")]),
            "quality")


@scenario
def upstream_example_files_all_load(d, p, ex):
    from helpers import SHARED

    folder = SHARED / "data" / "fair_forge_examples"
    files = sorted(folder.glob("*.json"))
    if not files:
        pytest.skip(f"no upstream example files in {folder}")
    expected = []
    for f in files:
        data = json.loads(f.read_text(encoding="utf-8"))
        expected += keys_of_sessions(data if isinstance(data, list) else [data])
    out = p | "upstream_example_files_all_load" >> ReadInteractions(str(folder / "*.json"))
    ex.outputs(out, expected, no_quality=False)


@scenario
def jsonl_one_session_per_line(d, p, ex):
    sessions = [make_session(f"s{i}", 1 + i % 4) for i in range(10)]
    lines = [json.dumps(s) for s in sessions]
    lines.insert(3, "")  # a blank line is not a record
    lines.insert(6, "   ")
    path = write_jsonl(d / "sessions.jsonl", lines, trailing_newline=False)  # last line without \n
    ex.outputs(p | "jsonl_one_session_per_line" >> ReadInteractions(path), keys_of_sessions(sessions))


@scenario
def jsonl_streamed_batches_turn_index_from_file_order(d, p, ex):
    # Two sessions interleaved, plus one session_id shared by two assistants (BestOf layout).
    recs = [
        streamed("s1", "a", "first"),
        streamed("s2", "a", "x0"),
        streamed("s1", "b", "other0"),
        streamed("s1", "a", "second"),
        streamed("s2", "a", "x1"),
        streamed("s1", "a", "third"),
        streamed("s1", "b", "other1"),
    ]
    expected = [
        ("s1/a/0", "s1", "a", 0, "first"),
        ("s1/a/1", "s1", "a", 1, "second"),
        ("s1/a/2", "s1", "a", 2, "third"),
        ("s2/a/0", "s2", "a", 0, "x0"),
        ("s2/a/1", "s2", "a", 1, "x1"),
        ("s1/b/0", "s1", "b", 0, "other0"),
        ("s1/b/1", "s1", "b", 1, "other1"),
    ]
    out = p | "jsonl_streamed_file_order" >> ReadInteractions(write_jsonl(d / "stream.jsonl", recs))
    ex.outputs(out, expected)


@scenario
def jsonl_streamed_explicit_turn_index_shuffled(d, p, ex):
    recs = [streamed(f"s{s}", "bot", f"s{s}-t{t}", turn_index=t) for s in range(4) for t in range(5)]
    shuffled = list(recs)
    random.Random(7).shuffle(shuffled)
    assert shuffled != recs
    expected = [(f"s{s}/bot/{t}", f"s{s}", "bot", t, f"s{s}-t{t}") for s in range(4) for t in range(5)]
    ordered = p | "explicit_ordered" >> ReadInteractions(write_jsonl(d / "ordered.jsonl", recs))
    shuf = p | "explicit_shuffled" >> ReadInteractions(write_jsonl(d / "shuffled.jsonl", shuffled))
    ex.that(ordered["interactions"] | "ordered_keys" >> beam.Map(key), equal_to(expected), "ordered")
    ex.that(shuf["interactions"] | "shuffled_keys" >> beam.Map(key), equal_to(expected), "shuffled")
    # whole elements, not only their keys, are identical
    def same_elements(tagged):
        by = {"o": {}, "s": {}}
        for t, x in tagged:
            by[t][x.element_id] = x
        assert len(by["o"]) == 20 and by["o"] == by["s"], by

    ex.that(
        (
            ordered["interactions"] | "explicit_tag_o" >> beam.Map(lambda x: ("o", x)),
            shuf["interactions"] | "explicit_tag_s" >> beam.Map(lambda x: ("s", x)),
        )
        | "explicit_flatten" >> beam.Flatten(),
        same_elements,
        "same_elements",
    )
    ex.that(shuf["dead_letter"], is_empty(), "no_dead_letter")


@scenario
def explicit_turn_index_is_ranked_to_0_based_positions(d, p, ex):
    recs = [streamed("s", "a", "c", turn_index=30), streamed("s", "a", "a", turn_index=10), streamed("s", "a", "b", turn_index=20)]
    out = p | "explicit_gaps" >> ReadInteractions(write_jsonl(d / "gaps.jsonl", recs))
    ex.outputs(out, [("s/a/0", "s", "a", 0, "a"), ("s/a/1", "s", "a", 1, "b"), ("s/a/2", "s", "a", 2, "c")])


@scenario
def jsonl_flat_one_row_per_interaction(d, p, ex):
    rows = [
        {"session_id": "s1", "assistant_id": "a", "language": "es", "qa_id": "q0", "query": "hola", "assistant": "hola"},
        {"session_id": "s1", "assistant_id": "a", "language": "es", "qa_id": "q1", "query": "y?", "assistant": "bien", "weight": 0.5},
    ]
    out = p | "jsonl_flat" >> ReadInteractions(write_jsonl(d / "flat.ndjson", rows))
    ex.outputs(out, [("s1/a/0", "s1", "a", 0, "q0"), ("s1/a/1", "s1", "a", 1, "q1")])
    ex.that(out["interactions"] | "flat_fields" >> beam.Map(lambda x: (x.qa_id, x.language, x.weight)),
            equal_to([("q0", "spanish", None), ("q1", "spanish", 0.5)]), "fields")


@scenario
def streamed_session_spanning_two_files(d, p, ex):
    write_jsonl(d / "part-0.jsonl", [streamed("s", "a", "t0"), streamed("s", "a", "t1")])
    write_jsonl(d / "part-1.jsonl", [streamed("s", "a", "t2")])
    out = p | "spanning_files" >> ReadInteractions(str(d / "part-*.jsonl"))
    ex.outputs(out, [(f"s/a/{i}", "s", "a", i, f"t{i}") for i in range(3)])


@scenario
def parquet_one_row_per_session_nested(d, p, ex):
    import pyarrow as pa
    import pyarrow.parquet as pq

    sessions = [make_session(f"s{i}", 1 + i % 3, ground_truth_assistant=None, weight=None) for i in range(7)]
    sessions[2]["conversation"][0]["ground_truth_assistant"] = "a reference answer"
    table = pa.Table.from_pylist(sessions)
    assert pa.types.is_list(table.schema.field("conversation").type)
    path = d / "sessions.parquet"
    pq.write_table(table, path, row_group_size=3)
    assert pq.ParquetFile(path).num_row_groups == 3
    out = p | "parquet_nested" >> ReadInteractions(str(path))
    ex.outputs(out, keys_of_sessions(sessions))
    ex.that(
        out["interactions"] | "nested_gt" >> beam.Filter(lambda x: x.ground_truth_assistant is not None)
        | "nested_gt_pairs" >> beam.Map(lambda x: (x.element_id, x.ground_truth_assistant)),
        equal_to([("s2/bot/0", "a reference answer")]),
        "ground_truth",
    )


@scenario
def parquet_flat_one_row_per_interaction(d, p, ex):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows, order, expected = [], collections.defaultdict(int), []
    for i in range(11):  # 3 sessions interleaved across 3 row groups
        sid = f"s{i % 3}"
        rows.append({"session_id": sid, "assistant_id": "bot", "language": "english", "context": "", "qa_id": f"{sid}-row{i}",
                     "query": "q", "assistant": "a", "weight": None if i % 2 else 0.1})
    for r in rows:
        t = order[r["session_id"]]
        order[r["session_id"]] += 1
        expected.append((f"{r['session_id']}/bot/{t}", r["session_id"], "bot", t, r["qa_id"]))
    path = d / "flat.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=4)
    assert pq.ParquetFile(path).num_row_groups == 3
    out = p | "parquet_flat" >> ReadInteractions(str(path))
    ex.outputs(out, expected)
    ex.that(out["interactions"] | "parquet_flat_weights" >> beam.Map(lambda x: (x.qa_id, x.weight)),
            equal_to([(r["qa_id"], r["weight"]) for r in rows]), "weights")


@scenario
def parquet_flat_with_explicit_turn_index(d, p, ex):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"session_id": "s", "assistant_id": "a", "qa_id": f"t{t}", "query": "q", "assistant": "x", "turn_index": t} for t in (2, 0, 1)]
    path = d / "ti.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=1)
    out = p | "parquet_turn_index" >> ReadInteractions(str(path))
    ex.outputs(out, [(f"s/a/{t}", "s", "a", t, f"t{t}") for t in range(3)])


@scenario
def gzip_jsonl_and_json(d, p, ex):
    sessions = [make_session(f"g{i}", 1 + i % 2) for i in range(5)]
    with gzip.open(d / "data.jsonl.gz", "wt", encoding="utf-8") as f:
        for s in sessions[:3]:
            f.write(json.dumps(s) + "\n")
    with gzip.open(d / "more.json.gz", "wt", encoding="utf-8") as f:
        json.dump(sessions[3:], f)
    jl = p | "gzip_jsonl" >> ReadInteractions(str(d / "data.jsonl.gz"))
    js = p | "gzip_json" >> ReadInteractions(str(d / "more.json.gz"))
    ex.that(jl["interactions"] | "gz_jl_keys" >> beam.Map(key), equal_to(keys_of_sessions(sessions[:3])), "jsonl_gz")
    ex.that(js["interactions"] | "gz_js_keys" >> beam.Map(key), equal_to(keys_of_sessions(sessions[3:])), "json_gz")
    ex.that((jl["dead_letter"], js["dead_letter"]) | "gz_dead" >> beam.Flatten(), is_empty(), "no_dead_letter")


@scenario
def multiple_patterns_are_unioned(d, p, ex):
    import pyarrow as pa
    import pyarrow.parquet as pq

    a, b, c, e = [make_session("j1", 2)], [make_session("l1", 1), make_session("l2", 3)], [make_session("l3", 2)], [make_session("p1", 2)]
    write_json(d / "a.json", a)
    (d / "lines").mkdir()
    write_jsonl(d / "lines" / "b.jsonl", b)
    write_jsonl(d / "lines" / "c.jsonl", c)
    pq.write_table(pa.Table.from_pylist(e), d / "e.parquet")
    patterns = [str(d / "a.json"), str(d / "lines" / "*.jsonl"), str(d / "e.parquet")]
    ex.outputs(p | "multiple_patterns" >> ReadInteractions(patterns), keys_of_sessions(a + b + c + e))


@scenario
def file_format_override_reads_files_without_the_usual_extension(d, p, ex):
    """``file_format`` exists for files whose extension does not tell the format: a ``.txt`` file
    read as ``jsonl`` must yield its records, not zero records silently (library bug)."""
    sessions = [make_session("t1", 2), make_session("t2", 1)]
    as_jsonl = p | "override_jsonl" >> ReadInteractions(write_jsonl(d / "export.txt", sessions), file_format="jsonl")
    as_json = p | "override_json" >> ReadInteractions(write_json(d / "export_json.txt", sessions), file_format="json")
    ex.that(as_json["interactions"] | "override_json_keys" >> beam.Map(key), equal_to(keys_of_sessions(sessions)), "as_json")
    ex.that(as_jsonl["interactions"] | "override_jsonl_keys" >> beam.Map(key), equal_to(keys_of_sessions(sessions)), "as_jsonl")


@scenario
def big_jsonl_through_the_pipeline(d, p, ex):
    path, lines = _big_jsonl(d)
    expected = keys_of_sessions(json.loads(line) for line in lines)
    assert len(expected) > 3000
    out = p | "big_jsonl" >> ReadInteractions(path)
    ex.that(out["interactions"] | "big_ids" >> beam.Map(lambda x: x.element_id), equal_to([k[0] for k in expected]), "element_ids")
    ex.that(out["dead_letter"], is_empty(), "no_dead_letter")


# ------------------------------------------------------------------ retrievers (module level: importable)
def _dataset(prefix: str, k: int) -> Dataset:
    sid = f"{prefix}{k}"
    return Dataset(
        session_id=sid,
        assistant_id="bot",
        language="en",
        context="",
        conversation=[Batch(qa_id=f"{sid}-q{t}", query=f"question {t}", assistant=f"answer {t}") for t in range(k + 1)],
    )


class ListSessions(Retriever):
    """FULL_DATASET (the default level): a list of Dataset."""

    def load_dataset(self):
        return [_dataset(self.kwargs.get("prefix", "L"), k) for k in range(self.kwargs["n_sessions"])]


class StreamSessions(Retriever):
    """STREAM_SESSIONS: a generator of Dataset."""

    @property
    def iteration_level(self) -> IterationLevel:
        return IterationLevel.STREAM_SESSIONS

    def load_dataset(self) -> Iterator[Dataset]:
        for k in range(self.kwargs["n_sessions"]):
            yield _dataset(self.kwargs.get("prefix", "S"), k)


class StreamBatches(Retriever):
    """STREAM_BATCHES: StreamedBatch objects, sessions interleaved turn by turn."""

    @property
    def iteration_level(self) -> IterationLevel:
        return IterationLevel.STREAM_BATCHES

    def load_dataset(self) -> Iterator[StreamedBatch]:
        sessions = [_dataset(self.kwargs.get("prefix", "B"), k) for k in range(self.kwargs["n_sessions"])]
        for t in range(max(len(s.conversation) for s in sessions)):
            for s in sessions:
                if t < len(s.conversation):
                    meta = SessionMetadata(session_id=s.session_id, assistant_id=s.assistant_id, language=s.language, context=s.context)
                    yield StreamedBatch(metadata=meta, batch=s.conversation[t])


class DictBatches(StreamBatches):
    """STREAM_BATCHES with plain dicts (level as a class attribute instead of a property)."""

    iteration_level = IterationLevel.STREAM_BATCHES

    def load_dataset(self):
        for sb in super().load_dataset():
            yield sb.model_dump()


class DictSessions(Retriever):
    """FULL_DATASET with plain dicts."""

    def load_dataset(self):
        return [_dataset(self.kwargs.get("prefix", "D"), k).model_dump() for k in range(self.kwargs["n_sessions"])]


class IteratorButFullDataset(Retriever):
    def load_dataset(self):
        return iter([_dataset("I", 0)])


class OneSessionNotList(Retriever):
    """trial36 T7: one session dict where a list of them is due."""

    def load_dataset(self):
        return _dataset("O", 1).model_dump()


class OneDatasetStreamed(Retriever):
    iteration_level = IterationLevel.STREAM_SESSIONS

    def load_dataset(self):
        return _dataset("O", 1)


class TextNotList(Retriever):
    def load_dataset(self):
        return '[{"session_id": "s"}]'


class MixedRetriever(Retriever):
    iteration_level = IterationLevel.STREAM_SESSIONS

    def load_dataset(self):
        yield _dataset("M", 1).model_dump()
        yield {"session_id": "bad", "assistant_id": "bot", "conversation": [{"qa_id": "x", "assistant": "no query"}]}
        yield "not a record"


def _expected_retrieved(prefix, n_sessions):
    return [(f"{prefix}{k}/bot/{t}", f"{prefix}{k}", "bot", t, f"{prefix}{k}-q{t}") for k in range(n_sessions) for t in range(k + 1)]


def _retriever_scenario(cls):
    def run(d, p, ex):
        n = 5
        out = p | f"retriever_{cls.__name__}" >> ReadInteractions(retriever=cls, retriever_kwargs={"n_sessions": n, "prefix": cls.__name__})
        ex.outputs(out, _expected_retrieved(cls.__name__, n))
        ex.that(out["interactions"] | f"{cls.__name__}_lang" >> beam.Map(lambda x: x.language), equal_to(["english"] * 15), "language")

    run.__name__ = f"retriever_{cls.__name__}"
    return scenario(run)


for _cls in (ListSessions, StreamSessions, StreamBatches, DictBatches, DictSessions):
    _retriever_scenario(_cls)


@scenario
def retriever_without_kwargs_and_bad_items(d, p, ex):
    out = p | "retriever_mixed" >> ReadInteractions(retriever=MixedRetriever)
    ex.outputs(out, _expected_retrieved("M", 2)[1:], no_dead=False)
    ex.that(
        out["dead_letter"] | "mixed_dead" >> beam.Map(lambda d: (d.stage, ("query" in d.reason) or ("invalid JSON" in d.reason and d.raw == "not a record"))),
        equal_to([("read", True), ("read", True)]),
        "dead_letter",
    )


# ------------------------------------------------------------------ dead letter
def dead_letter_matcher(specs):
    """``specs``: ``(reason_fragments, raw_check, element_id)``; each dead letter (stage "read")
    must match exactly one spec."""

    def _match(actual):
        actual = list(actual)
        assert len(actual) == len(specs), f"expected {len(specs)} dead letters, got {len(actual)}: {actual}"
        remaining = list(actual)
        for frags, raw_check, eid in specs:
            hits = [
                d for d in remaining
                if d.stage == "read" and all(f in d.reason for f in frags) and raw_check(d.raw) and d.element_id == eid
            ]
            assert len(hits) == 1, f"no single dead letter with reason containing {frags} (element {eid}); left: {remaining}"
            remaining.remove(hits[0])

    return _match


@scenario
def dead_letters_carry_stage_reason_and_raw(d, p, ex):
    good = [make_session("ok1", 2), make_session("ok2", 1)]
    no_sid = make_session("x", 1)
    del no_sid["session_id"]
    no_query = make_session("nq", 3)
    del no_query["conversation"][1]["query"]  # turns 0 and 2 are still read
    bad_weight = make_session("bw", 1, weight=-0.5)
    inf_weight = make_session("iw", 1, weight=float("inf"))
    sb_no_query = streamed("sb", "a", "q0")
    del sb_no_query["batch"]["query"]
    empty = make_session("empty", 0)
    malformed = '{"session_id": "m", "conversation": [ oops'
    truncated = json.dumps(make_session("tr", 2))[:-17]
    lines = [
        json.dumps(good[0]), malformed, "[1, 2, 3]", json.dumps(no_sid), json.dumps(no_query),
        json.dumps(bad_weight), json.dumps(inf_weight), json.dumps(sb_no_query), json.dumps(good[1]),
        json.dumps(empty), truncated, "42",
    ]
    header = {k: v for k, v in no_query.items() if k != "conversation"}

    def same_json(obj):
        return lambda raw: json.loads(raw) == obj

    specs = [
        (["invalid JSON"], lambda raw: raw.rstrip("\n") == malformed, None),
        (["invalid JSON"], lambda raw: raw.rstrip("\n") == truncated, None),
        (["list", "not an object"], same_json([1, 2, 3]), None),
        (["a number", "not an object"], same_json(42), None),
        (["session_id", "required"], same_json(no_sid), None),
        (["conversation[1]", "query"], same_json({**header, "conversation": [no_query["conversation"][1]]}), "nq/bot/1"),
        (["conversation[0]", "weight"], lambda raw: json.loads(raw)["conversation"][0]["weight"] == -0.5, "bw/bot/0"),
        (["conversation[0]", "weight"], lambda raw: json.loads(raw)["conversation"][0]["weight"] == float("inf"), "iw/bot/0"),
        (["batch.query"], same_json(sb_no_query), None),
        (["empty conversation"], same_json(empty), None),
    ]
    out = p | "dead_mixed" >> ReadInteractions(write_jsonl(d / "mixed.jsonl", lines))
    ex.outputs(out, keys_of_sessions(good) + [("nq/bot/0", "nq", "bot", 0, "nq-q0"), ("nq/bot/2", "nq", "bot", 2, "nq-q2")], no_dead=False,
               no_quality=False)
    # issue 28: the session nq, kept in part, says so
    ex.that(out["quality"] | "dead_mixed_kinds" >> beam.Map(lambda q: (q.kind, q.key)),
            equal_to([("session_kept_in_part", "nq/bot")]), "quality")
    ex.that(out["dead_letter"], dead_letter_matcher(specs), "dead_letter")
    ex.that(
        out["dead_letter"] | "dead_strict_json" >> beam.Map(lambda dl: sorted(json.loads(json.dumps(dl.to_dict(), allow_nan=False)))),
        equal_to([["element_id", "raw", "reason", "source", "stage"]] * len(specs)),
        "strict_json",
    )


@scenario
def invalid_json_file_goes_to_dead_letter(d, p, ex):
    good = [make_session("fine", 2)]
    write_json(d / "a_good.json", good)
    broken_text = '[{"session_id": "s", "assistant_id": "a", "conversation": ['
    (d / "b_broken.json").write_text(broken_text, encoding="utf-8")
    write_json(d / "c_items.json", [make_session("alsofine", 1), 7, ["nested"]])
    out = p | "dead_json_files" >> ReadInteractions(str(d / "*.json"))
    ex.outputs(out, keys_of_sessions(good + [make_session("alsofine", 1)]), no_dead=False)
    ex.that(
        out["dead_letter"],
        dead_letter_matcher(
            [
                # the file is read element by element: the dead letter holds the unfinished element
                (["invalid JSON file", "b_broken.json", "ends inside element 0"], lambda raw: raw == broken_text[1:], None),
                (["a number", "not an object"], lambda raw: json.loads(raw) == 7, None),
                (["list", "not an object"], lambda raw: json.loads(raw) == ["nested"], None),
            ]
        ),
        "dead_letter",
    )


@pytest.mark.parametrize("name", list(SCENARIOS))
@pytest.mark.slow
def test_read_scenario(read_run, name):
    read_run.verify(name)


# ------------------------------------------------------------------ tests with their own pipeline / none
def test_retriever_iterator_with_full_dataset_level_fails_naming_iteration_level(test_pipeline):
    with pytest.raises(Exception, match="iteration_level"):
        with test_pipeline as p:
            p | ReadInteractions(retriever=IteratorButFullDataset)


@pytest.mark.parametrize("cls, says", [
    (OneSessionNotList, "OneSessionNotList.load_dataset() returned a dict (keys 'session_id', 'assistant_id', "
                        "'language', 'context', 'chatbot_role', …), not a list of sessions (Dataset objects or dicts) "
                        "(iteration_level FULL_DATASET): return [session] for one session"),
    (OneDatasetStreamed, "OneDatasetStreamed.load_dataset() returned one Dataset object, not an iterator of sessions"),
    (TextNotList, "TextNotList.load_dataset() returned a str, not a list of sessions"),
])
def test_a_retriever_returning_one_session_is_one_error_naming_what_it_returned(cls, says, test_pipeline):
    """trial36 T7: a dict was iterated as its keys: 5 dead letters 'invalid JSON: Expecting value', one per key,
    and no word of the retriever's slip."""
    with pytest.raises(Exception) as exc:
        with test_pipeline as p:
            p | ReadInteractions(retriever=cls)
    assert says in str(exc.value), str(exc.value)[:600]


def test_pattern_matching_no_file_raises_before_running(tmp_path):
    good = write_jsonl(tmp_path / "ok.jsonl", [make_session("s", 1)])
    missing = str(tmp_path / "nothing-*.jsonl")
    with pytest.raises(ValueError, match="no input file matches"):
        ReadInteractions(missing)
    with pytest.raises(ValueError, match="nothing-"):
        ReadInteractions([good, missing])
    with pytest.raises(ValueError, match="no input file matches"):
        ReadInteractions(str(tmp_path / "absent.json"))


def test_construction_errors(tmp_path):
    write_jsonl(tmp_path / "x.jsonl", [make_session("s", 1)])
    write_json(tmp_path / "x.json", [make_session("s", 1)])
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match="exactly one"):
        ReadInteractions()
    with pytest.raises(ValueError, match="exactly one"):
        ReadInteractions(str(tmp_path / "x.jsonl"), retriever=ListSessions)
    with pytest.raises(ValueError, match="Retriever subclass"):
        ReadInteractions(retriever=dict)
    with pytest.raises(ValueError, match="Retriever subclass"):
        ReadInteractions(retriever=ListSessions())
    with pytest.raises(ValueError, match="file_format"):
        ReadInteractions(str(tmp_path / "x.jsonl"), file_format="csv")
    with pytest.raises(ValueError, match="cannot tell the format") as exc:
        ReadInteractions(str(tmp_path / "notes.txt"))
    assert "--input-format" in str(exc.value)  # the CLI's option, not only the Python argument (issue 28)
    (tmp_path / "logs.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    with pytest.raises(ValueError, match="CSV is not an input format"):
        ReadInteractions(str(tmp_path / "logs.csv"))
    (tmp_path / "folder").mkdir()
    with pytest.raises(ValueError, match="is a folder: give its files"):
        ReadInteractions(str(tmp_path / "folder"))
    with pytest.raises(ValueError, match="mixes formats"):
        ReadInteractions(str(tmp_path / "x.*"))


# ------------------------------------------------------------------ splitting (_JsonLinesSource)
def _big_jsonl(d: Path, n=3000):
    rng = random.Random(3)
    lines = []
    for i in range(n):
        s = make_session(f"sess{i:05d}", 1 + rng.randrange(3))
        s["context"] = "ü€" * rng.randrange(0, 20)  # multi-byte characters, varied line lengths
        lines.append(json.dumps(s, ensure_ascii=False))
    path = d / "big.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path), lines


@pytest.fixture(scope="module")
def big_jsonl(tmp_path_factory):
    return _big_jsonl(tmp_path_factory.mktemp("big"))


@pytest.mark.parametrize("bundle", [211, 4096, 10**9])
def test_jsonl_source_splits_yield_every_line_exactly_once(big_jsonl, bundle):
    path, lines = big_jsonl
    source = _JsonLinesSource(path)
    splits = list(source.split(desired_bundle_size=bundle))
    if bundle < 10**6:
        assert len(splits) > 50
    source_test_utils.assert_sources_equal_reference_source(
        (source, None, None), [(s.source, s.start_position, s.stop_position) for s in splits]
    )
    records = []
    for s in splits:
        records.extend(source_test_utils.read_from_source(s.source, s.start_position, s.stop_position))
    assert len(records) == len(lines)
    # each line exactly once, its position = its byte offset
    data = Path(path).read_bytes()
    offsets, pos = [], 0
    for raw in data.splitlines(keepends=True):
        offsets.append(pos)
        pos += len(raw)
    assert sorted(r[1] for r in records) == offsets
    ids = collections.Counter(json.loads(r[2])["session_id"] for r in records)
    assert len(ids) == len(lines) and set(ids.values()) == {1}
    assert all(r[0] == path for r in records)


def test_jsonl_source_dynamic_split_at_fraction(tmp_path):
    lines = [json.dumps({"i": i, "pad": "x" * (i * 7 % 23), "u": "é" * (i % 3)}, ensure_ascii=False) for i in range(9)]
    lines.insert(4, "")
    path = tmp_path / "small.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")  # no trailing newline
    source_test_utils.assert_split_at_fraction_exhaustive(_JsonLinesSource(str(path)), perform_multi_threaded_test=False)


def test_gzip_jsonl_source_reads_every_line(tmp_path):
    lines = [json.dumps(make_session(f"z{i}", 1)) for i in range(200)]
    path = tmp_path / "z.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    source = _JsonLinesSource(str(path))
    records = []
    for s in source.split(desired_bundle_size=100):
        records.extend(source_test_utils.read_from_source(s.source, s.start_position, s.stop_position))
    assert sorted(json.loads(r[2])["session_id"] for r in records) == sorted(f"z{i}" for i in range(200))


def test_jsonl_byte_ranges_are_redistributed_before_they_are_read(tmp_path, monkeypatch):
    """A JSON Lines file is read as byte ranges that pass through a Reshuffle before the read, so
    every worker reads (a BoundedSource's splits stayed in the stage of its Impulse: on Flink one
    TaskManager read all 1M records, docs/performance.md); the records are the same with ranges
    of 1 MiB as with one range."""
    from fair_forge_beam.io import read as read_mod

    path = tmp_path / "s.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for i in range(1000):
            f.write(json.dumps(make_session(f"s{i:04d}", 3, **{"observation": "x" * 800})) + "\n")
    assert path.stat().st_size > 2 * 2**20  # 3 ranges of 1 MiB

    p = beam.Pipeline()
    _ = p | ReadInteractions(str(path))
    proto = p.to_runner_api()
    transforms = proto.components.transforms
    producers = collections.defaultdict(set)  # a composite and its last part both produce a PCollection
    for t in transforms.values():
        for pc in t.outputs.values():
            producers[pc].add(t.unique_name)
    readers = [t for t in transforms.values() if t.unique_name.endswith("ReadJsonl/ReadRange")]
    assert len(readers) == 1, [t.unique_name for t in transforms.values() if "Jsonl" in t.unique_name]
    (source,) = readers[0].inputs.values()
    assert any(name.endswith("ReadJsonl/Reshard") for name in producers[source]), producers[source]

    def ids(range_bytes):
        monkeypatch.setattr(read_mod, "JSONL_RANGE_BYTES", range_bytes)
        monkeypatch.setattr(read_mod, "_JSONL_MIN_RANGE_BYTES", min(range_bytes, 2**20))
        with beam.Pipeline(runner=FNAPI) as q:
            out = q | ReadInteractions(str(path))
            got = out["interactions"] | beam.Map(lambda x: x.qa_id)
            assert_that(got | beam.combiners.Count.Globally(), equal_to([3000]), label="count")
            assert_that(out["dead_letter"], is_empty(), label="no dead letters")
    ids(2**20)
    ids(2**30)


def test_warnings_quote_data_values_through_quoted():
    """Issue 28 (fix28j): warnings quoted ids from the data with ``!r``, whole (a 5,000-character
    qa_id or session id was repeated in full); they go through ``quoting.quoted`` (200 characters
    at most, the length said)."""
    from types import SimpleNamespace

    from fair_forge_beam.io.read import _duplicate_qa_warnings, _empty_answer_warnings

    meta = SimpleNamespace(session_id="s" * 5000, assistant_id="bot")
    [dup] = list(_duplicate_qa_warnings(meta, {"q" * 5000: 2}))
    assert dup.value.message.count("(5,000 characters)") == 2 and len(dup.value.message) < 700, dup.value.message[:300]
    [empty] = list(_empty_answer_warnings(meta, ["q1"], "in.jsonl:1"))
    assert "(5,000 characters)" in empty.value.example and len(empty.value.example) < 900
