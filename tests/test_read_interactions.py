"""ReadInteractions: files (JSON, JSONL sessions / StreamedBatch, Parquet, gzip), retrievers at
every iteration level, byte-range splitting of JSONL, and the read-stage dead letter."""
from __future__ import annotations

import collections
import gzip
import json
import random
from typing import Iterator

import apache_beam as beam
import pytest
from apache_beam.io import source_test_utils
from apache_beam.testing.util import assert_that, equal_to, is_empty

from fair_forge_beam.io.elements import Interaction
from fair_forge_beam.io.read import ReadInteractions, _JsonLinesSource
from fair_forge_beam.io.retriever import Retriever
from fair_forge_beam.schemas import Batch, Dataset, IterationLevel, SessionMetadata, StreamedBatch


# ------------------------------------------------------------------ data helpers
def make_session(sid: str, n_turns: int, aid: str = "bot", language: str = "english", **batch_over) -> dict:
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
        for i, b in enumerate(s["conversation"]):
            out.append((f"{s['session_id']}/{s['assistant_id']}/{i}", s["session_id"], s["assistant_id"], i, str(b["qa_id"])))
    return out


def streamed(sid: str, aid: str, qa_id: str, turn_index=None, **batch_over) -> dict:
    rec = {
        "metadata": {"session_id": sid, "assistant_id": aid, "language": "en", "context": ""},
        "batch": {"qa_id": qa_id, "query": f"q {qa_id}", "assistant": f"answer {qa_id}", **batch_over},
    }
    if turn_index is not None:
        rec["turn_index"] = turn_index
    return rec


def write_jsonl(path, records, trailing_newline=True) -> str:
    text = "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records)
    if trailing_newline:
        text += "\n"
    path.write_text(text, encoding="utf-8")
    return str(path)


def write_json(path, obj) -> str:
    path.write_text(json.dumps(obj), encoding="utf-8")
    return str(path)


def key(x: Interaction) -> tuple:
    return (x.element_id, x.session_id, x.assistant_id, x.turn_index, x.qa_id)


def check_outputs(out, expected_keys, label="", expect_no_dead=True, expect_no_quality=True):
    """Attach exact-content assertions to ReadInteractions' outputs."""
    assert_that(out["interactions"] | f"Keys{label}" >> beam.Map(key), equal_to(expected_keys), label=f"CheckInteractions{label}")
    if expect_no_dead:
        assert_that(out["dead_letter"], is_empty(), label=f"NoDead{label}")
    if expect_no_quality:
        assert_that(out["quality"], is_empty(), label=f"NoQuality{label}")


# ------------------------------------------------------------------ file formats
def test_json_list_file(test_pipeline, tmp_path):
    sessions = [make_session("s1", 1), make_session("s2", 2, language="EN"), make_session("s3", 3, weight=0.25)]
    path = write_json(tmp_path / "data.json", sessions)
    with test_pipeline as p:
        out = p | ReadInteractions(path)
        check_outputs(out, keys_of_sessions(sessions))
        assert_that(
            out["interactions"] | beam.Map(lambda x: (x.element_id, x.language, x.context, x.weight, x.ground_truth_assistant, x.agentic)),
            equal_to(
                [("s1/bot/0", "english", "context of s1", None, None, {})]
                + [(f"s2/bot/{i}", "english", "context of s2", None, None, {}) for i in range(2)]
                + [(f"s3/bot/{i}", "english", "context of s3", 0.25, None, {}) for i in range(3)]
            ),
            label="Fields",
        )


def test_json_file_with_a_single_session_object(test_pipeline, tmp_path):
    s = make_session(123, 2)  # int session id, as in upstream's dataset.json
    s["conversation"][0]["qa_id"] = 1
    path = write_json(tmp_path / "one.json", s)
    with test_pipeline as p:
        out = p | ReadInteractions(path)
        check_outputs(out, [("123/bot/0", "123", "bot", 0, "1"), ("123/bot/1", "123", "bot", 1, "123-q1")])


def test_upstream_example_files_all_load(test_pipeline, shared_dir):
    files = sorted((shared_dir / "data" / "fair_forge_examples").glob("*.json"))
    expected = []
    for f in files:
        data = json.loads(f.read_text(encoding="utf-8"))
        expected += keys_of_sessions(data if isinstance(data, list) else [data])
    with test_pipeline as p:
        out = p | ReadInteractions(str(shared_dir / "data" / "fair_forge_examples" / "*.json"))
        assert_that(out["interactions"] | beam.Map(key), equal_to(expected), label="All")
        assert_that(out["dead_letter"], is_empty(), label="NoDead")


def test_jsonl_one_session_per_line(test_pipeline, tmp_path):
    sessions = [make_session(f"s{i}", 1 + i % 4) for i in range(10)]
    lines = [json.dumps(s) for s in sessions]
    lines.insert(3, "")  # a blank line is not a record
    lines.insert(6, "   ")
    path = write_jsonl(tmp_path / "sessions.jsonl", lines, trailing_newline=False)  # last line without \n
    with test_pipeline as p:
        check_outputs(p | ReadInteractions(path), keys_of_sessions(sessions))


def test_jsonl_streamed_batches_turn_index_from_file_order(test_pipeline, tmp_path):
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
    path = write_jsonl(tmp_path / "stream.jsonl", recs)
    expected = [
        ("s1/a/0", "s1", "a", 0, "first"),
        ("s1/a/1", "s1", "a", 1, "second"),
        ("s1/a/2", "s1", "a", 2, "third"),
        ("s2/a/0", "s2", "a", 0, "x0"),
        ("s2/a/1", "s2", "a", 1, "x1"),
        ("s1/b/0", "s1", "b", 0, "other0"),
        ("s1/b/1", "s1", "b", 1, "other1"),
    ]
    with test_pipeline as p:
        check_outputs(p | ReadInteractions(path), expected)


def test_jsonl_streamed_explicit_turn_index_is_independent_of_line_order(test_pipeline, tmp_path):
    recs = []
    for s in range(4):
        for t in range(5):
            recs.append(streamed(f"s{s}", "bot", f"s{s}-t{t}", turn_index=t))
    shuffled = list(recs)
    random.Random(7).shuffle(shuffled)
    assert shuffled != recs
    ordered_path = write_jsonl(tmp_path / "ordered.jsonl", recs)
    shuffled_path = write_jsonl(tmp_path / "shuffled.jsonl", shuffled)
    expected = [(f"s{s}/bot/{t}", f"s{s}", "bot", t, f"s{s}-t{t}") for s in range(4) for t in range(5)]
    with test_pipeline as p:
        ordered = p | "ReadOrdered" >> ReadInteractions(ordered_path)
        shuf = p | "ReadShuffled" >> ReadInteractions(shuffled_path)
        check_outputs(ordered, expected, label="Ordered")
        check_outputs(shuf, expected, label="Shuffled")
        # whole elements (not only the keys) are identical
        assert_that(
            (ordered["interactions"] | "TagO" >> beam.Map(lambda x: ("o", x)), shuf["interactions"] | "TagS" >> beam.Map(lambda x: ("s", x)))
            | beam.Flatten()
            | beam.Map(lambda kv: (kv[1].element_id, kv))
            | beam.GroupByKey()
            | beam.Map(lambda kv: sorted(t for t, _ in kv[1]) == ["o", "s"] and kv[1][0][1] == kv[1][1][1]),
            equal_to([True] * 20),
            label="SameElements",
        )


def test_explicit_turn_index_is_a_sort_key_ranked_to_0_based_positions(test_pipeline, tmp_path):
    recs = [streamed("s", "a", "c", turn_index=30), streamed("s", "a", "a", turn_index=10), streamed("s", "a", "b", turn_index=20)]
    path = write_jsonl(tmp_path / "gaps.jsonl", recs)
    with test_pipeline as p:
        check_outputs(p | ReadInteractions(path), [("s/a/0", "s", "a", 0, "a"), ("s/a/1", "s", "a", 1, "b"), ("s/a/2", "s", "a", 2, "c")])


def test_jsonl_flat_one_row_per_interaction(test_pipeline, tmp_path):
    rows = [
        {"session_id": "s1", "assistant_id": "a", "language": "es", "qa_id": "q0", "query": "hola", "assistant": "hola"},
        {"session_id": "s1", "assistant_id": "a", "language": "es", "qa_id": "q1", "query": "y?", "assistant": "bien", "weight": 0.5},
    ]
    path = write_jsonl(tmp_path / "flat.ndjson", rows)
    with test_pipeline as p:
        out = p | ReadInteractions(path)
        check_outputs(out, [("s1/a/0", "s1", "a", 0, "q0"), ("s1/a/1", "s1", "a", 1, "q1")])
        assert_that(out["interactions"] | beam.Map(lambda x: (x.qa_id, x.language, x.weight)), equal_to([("q0", "spanish", None), ("q1", "spanish", 0.5)]), label="Fields")


def test_streamed_session_spanning_two_files_is_ordered_by_file_then_position(test_pipeline, tmp_path):
    write_jsonl(tmp_path / "part-0.jsonl", [streamed("s", "a", "t0"), streamed("s", "a", "t1")])
    write_jsonl(tmp_path / "part-1.jsonl", [streamed("s", "a", "t2")])
    with test_pipeline as p:
        check_outputs(p | ReadInteractions(str(tmp_path / "part-*.jsonl")), [(f"s/a/{i}", "s", "a", i, f"t{i}") for i in range(3)])


def test_parquet_one_row_per_session_nested_conversation(test_pipeline, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    sessions = [make_session(f"s{i}", 1 + i % 3, ground_truth_assistant=None, weight=None) for i in range(7)]
    sessions[2]["conversation"][0]["ground_truth_assistant"] = "a reference answer"
    table = pa.Table.from_pylist(sessions)
    assert pa.types.is_list(table.schema.field("conversation").type)
    path = tmp_path / "sessions.parquet"
    pq.write_table(table, path, row_group_size=3)  # 3 row groups
    assert pq.ParquetFile(path).num_row_groups == 3
    with test_pipeline as p:
        out = p | ReadInteractions(str(path))
        check_outputs(out, keys_of_sessions(sessions))
        assert_that(
            out["interactions"] | beam.Filter(lambda x: x.ground_truth_assistant is not None) | beam.Map(lambda x: (x.element_id, x.ground_truth_assistant)),
            equal_to([("s2/bot/0", "a reference answer")]),
            label="GroundTruth",
        )


def test_parquet_flat_one_row_per_interaction(test_pipeline, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = []
    order = collections.defaultdict(int)
    for i in range(11):  # interleave 3 sessions across row groups
        sid = f"s{i % 3}"
        rows.append({"session_id": sid, "assistant_id": "bot", "language": "english", "context": "", "qa_id": f"{sid}-row{i}",
                     "query": "q", "assistant": "a", "weight": None if i % 2 else 0.1})
    expected = []
    for r in rows:
        t = order[r["session_id"]]
        order[r["session_id"]] += 1
        expected.append((f"{r['session_id']}/bot/{t}", r["session_id"], "bot", t, r["qa_id"]))
    path = tmp_path / "flat.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=4)
    assert pq.ParquetFile(path).num_row_groups == 3
    with test_pipeline as p:
        out = p | ReadInteractions(str(path))
        check_outputs(out, expected)
        assert_that(out["interactions"] | beam.Map(lambda x: (x.qa_id, x.weight)),
                    equal_to([(r["qa_id"], r["weight"]) for r in rows]), label="Weights")


def test_parquet_flat_with_explicit_turn_index(test_pipeline, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [{"session_id": "s", "assistant_id": "a", "qa_id": f"t{t}", "query": "q", "assistant": "x", "turn_index": t} for t in (2, 0, 1)]
    path = tmp_path / "ti.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=1)
    with test_pipeline as p:
        check_outputs(p | ReadInteractions(str(path)), [(f"s/a/{t}", "s", "a", t, f"t{t}") for t in range(3)])


def test_gzip_jsonl_and_json(test_pipeline, tmp_path):
    sessions = [make_session(f"g{i}", 1 + i % 2) for i in range(5)]
    with gzip.open(tmp_path / "data.jsonl.gz", "wt", encoding="utf-8") as f:
        for s in sessions[:3]:
            f.write(json.dumps(s) + "\n")
    with gzip.open(tmp_path / "more.json.gz", "wt", encoding="utf-8") as f:
        json.dump(sessions[3:], f)
    with test_pipeline as p:
        jl = p | "Jsonl" >> ReadInteractions(str(tmp_path / "data.jsonl.gz"))
        js = p | "Json" >> ReadInteractions(str(tmp_path / "more.json.gz"))
        check_outputs(jl, keys_of_sessions(sessions[:3]), label="Jsonl")
        check_outputs(js, keys_of_sessions(sessions[3:]), label="Json")


def test_multiple_patterns_are_unioned(test_pipeline, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    a = [make_session("j1", 2)]
    b = [make_session("l1", 1), make_session("l2", 3)]
    c = [make_session("l3", 2)]
    d = [make_session("p1", 2)]
    write_json(tmp_path / "a.json", a)
    (tmp_path / "lines").mkdir()
    write_jsonl(tmp_path / "lines" / "b.jsonl", b)
    write_jsonl(tmp_path / "lines" / "c.jsonl", c)
    pq.write_table(pa.Table.from_pylist(d), tmp_path / "d.parquet")
    patterns = [str(tmp_path / "a.json"), str(tmp_path / "lines" / "*.jsonl"), str(tmp_path / "d.parquet")]
    with test_pipeline as p:
        check_outputs(p | ReadInteractions(patterns), keys_of_sessions(a + b + c + d))


def test_file_format_override_reads_files_without_the_usual_extension(test_pipeline, tmp_path):
    """``file_format`` exists for files whose extension does not tell the format; a ``.txt`` /
    ``.log`` file read as ``jsonl`` must yield its records (not zero records, silently)."""
    sessions = [make_session("t1", 2), make_session("t2", 1)]
    txt = write_jsonl(tmp_path / "export.txt", sessions)
    js = write_json(tmp_path / "export_json.txt", sessions)
    with test_pipeline as p:
        check_outputs(p | "AsJsonl" >> ReadInteractions(txt, file_format="jsonl"), keys_of_sessions(sessions), label="Jsonl")
        check_outputs(p | "AsJson" >> ReadInteractions(js, file_format="json"), keys_of_sessions(sessions), label="Json")


# ------------------------------------------------------------------ configuration errors (before running)
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
    with pytest.raises(ValueError, match="cannot tell the format"):
        ReadInteractions(str(tmp_path / "notes.txt"))
    with pytest.raises(ValueError, match="mixes formats"):
        ReadInteractions(str(tmp_path / "x.*"))


# ------------------------------------------------------------------ splitting
def _big_jsonl(tmp_path, n=3000):
    rng = random.Random(3)
    lines = []
    for i in range(n):
        s = make_session(f"sess{i:05d}", 1 + rng.randrange(3))
        s["context"] = "ü€" * rng.randrange(0, 20)  # multi-byte characters, varied line lengths
        lines.append(json.dumps(s, ensure_ascii=False))
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path), lines


@pytest.mark.parametrize("bundle", [61, 4096, 10**9])
def test_jsonl_source_splits_yield_every_line_exactly_once(tmp_path, bundle):
    path, lines = _big_jsonl(tmp_path)
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
    # each line once, with its byte offset as position
    data = open(path, "rb").read()
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
    splits = list(source.split(desired_bundle_size=100))
    records = []
    for s in splits:
        records.extend(source_test_utils.read_from_source(s.source, s.start_position, s.stop_position))
    assert sorted(json.loads(r[2])["session_id"] for r in records) == sorted(f"z{i}" for i in range(200))


def test_big_jsonl_through_the_pipeline(test_pipeline, tmp_path):
    path, lines = _big_jsonl(tmp_path)
    expected = keys_of_sessions(json.loads(l) for l in lines)
    assert len(expected) > 3000
    with test_pipeline as p:
        out = p | ReadInteractions(path)
        assert_that(out["interactions"] | beam.Map(lambda x: x.element_id), equal_to([k[0] for k in expected]), label="Ids")
        assert_that(out["dead_letter"], is_empty(), label="NoDead")


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
    """STREAM_BATCHES with plain dicts (class attribute instead of a property)."""

    iteration_level = IterationLevel.STREAM_BATCHES

    def load_dataset(self):
        for sb in super().load_dataset():
            yield sb.model_dump()


class DictSessions(Retriever):
    def load_dataset(self):
        return [_dataset(self.kwargs.get("prefix", "D"), k).model_dump() for k in range(self.kwargs["n_sessions"])]


class IteratorButFullDataset(Retriever):
    def load_dataset(self):
        return iter([_dataset("I", 0)])


class MixedRetriever(Retriever):
    iteration_level = IterationLevel.STREAM_SESSIONS

    def load_dataset(self):
        yield _dataset("M", 1).model_dump()
        yield {"session_id": "bad", "assistant_id": "bot", "conversation": [{"qa_id": "x", "assistant": "no query"}]}
        yield "not a record"


def _expected_retrieved(prefix, n_sessions):
    return [(f"{prefix}{k}/bot/{t}", f"{prefix}{k}", "bot", t, f"{prefix}{k}-q{t}") for k in range(n_sessions) for t in range(k + 1)]


@pytest.mark.parametrize("cls", [ListSessions, StreamSessions, StreamBatches, DictBatches, DictSessions])
def test_retriever_levels(test_pipeline, cls):
    n = 5
    with test_pipeline as p:
        out = p | ReadInteractions(retriever=cls, retriever_kwargs={"n_sessions": n, "prefix": cls.__name__})
        check_outputs(out, _expected_retrieved(cls.__name__, n))
        assert_that(out["interactions"] | beam.Map(lambda x: x.language), equal_to(["english"] * 15), label="Lang")


def test_retriever_iterator_with_full_dataset_level_fails_naming_iteration_level(test_pipeline):
    with pytest.raises(Exception, match="iteration_level"):
        with test_pipeline as p:
            p | ReadInteractions(retriever=IteratorButFullDataset)


def test_retriever_bad_items_go_to_dead_letter(test_pipeline):
    with test_pipeline as p:
        out = p | ReadInteractions(retriever=MixedRetriever)
        check_outputs(out, _expected_retrieved("M", 2)[1:], expect_no_dead=False)
        assert_that(
            out["dead_letter"] | beam.Map(lambda d: (d.stage, "query" in d.reason or "not an object" in d.reason)),
            equal_to([("read", True), ("read", True)]),
            label="Dead",
        )


def test_retriever_and_files_are_exclusive_but_kwargs_are_optional(test_pipeline):
    with test_pipeline as p:
        out = p | ReadInteractions(retriever=StreamSessions, retriever_kwargs={"n_sessions": 1})
        check_outputs(out, [("S0/bot/0", "S0", "bot", 0, "S0-q0")])


# ------------------------------------------------------------------ dead letter
def dead_letter_matcher(specs):
    """``specs``: list of ``(reason_fragments, raw_check, element_id)``; each dead letter must match
    exactly one spec (stage "read")."""

    def _match(actual):
        actual = list(actual)
        assert len(actual) == len(specs), f"expected {len(specs)} dead letters, got {len(actual)}: {actual}"
        remaining = list(actual)
        for frags, raw_check, eid in specs:
            hits = [
                d for d in remaining
                if d.stage == "read" and all(f in d.reason for f in frags) and raw_check(d.raw) and d.element_id == eid
            ]
            assert len(hits) == 1, f"no single dead letter with reason containing {frags} (element {eid}); got {remaining}"
            remaining.remove(hits[0])

    return _match


def test_dead_letters_carry_stage_reason_and_raw(test_pipeline, tmp_path):
    good = [make_session("ok1", 2), make_session("ok2", 1)]
    no_sid = make_session("x", 1)
    del no_sid["session_id"]
    no_query = make_session("nq", 3)
    del no_query["conversation"][1]["query"]  # turns 0 and 2 still read
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
    path = write_jsonl(tmp_path / "mixed.jsonl", lines)
    header = {k: v for k, v in no_query.items() if k != "conversation"}

    def same_json(obj):
        return lambda raw: json.loads(raw) == obj

    specs = [
        (["invalid JSON"], lambda raw: raw.rstrip("\n") == malformed, None),
        (["invalid JSON"], lambda raw: raw.rstrip("\n") == truncated, None),
        (["list", "not an object"], same_json([1, 2, 3]), None),
        (["int", "not an object"], same_json(42), None),
        (["session_id", "required"], same_json(no_sid), None),
        (["conversation[1]", "query"], same_json({**header, "conversation": [no_query["conversation"][1]]}), "nq/bot/1"),
        (["conversation[0]", "weight"], lambda raw: json.loads(raw)["conversation"][0]["weight"] == -0.5, "bw/bot/0"),
        (["conversation[0]", "weight"], lambda raw: json.loads(raw)["conversation"][0]["weight"] == float("inf"), "iw/bot/0"),
        (["batch.query"], same_json(sb_no_query), None),
        (["empty conversation"], same_json(empty), None),
    ]
    with test_pipeline as p:
        out = p | ReadInteractions(path)
        check_outputs(
            out,
            keys_of_sessions(good) + [("nq/bot/0", "nq", "bot", 0, "nq-q0"), ("nq/bot/2", "nq", "bot", 2, "nq-q2")],
            expect_no_dead=False,
        )
        assert_that(out["dead_letter"], dead_letter_matcher(specs), label="Dead")


def test_invalid_json_file_goes_to_dead_letter(test_pipeline, tmp_path):
    good = [make_session("fine", 2)]
    write_json(tmp_path / "a_good.json", good)
    broken_text = '[{"session_id": "s", "assistant_id": "a", "conversation": ['
    (tmp_path / "b_broken.json").write_text(broken_text, encoding="utf-8")
    write_json(tmp_path / "c_items.json", [make_session("alsofine", 1), 7, ["nested"]])
    with test_pipeline as p:
        out = p | ReadInteractions(str(tmp_path / "*.json"))
        check_outputs(out, keys_of_sessions(good + [make_session("alsofine", 1)]), expect_no_dead=False)
        assert_that(
            out["dead_letter"],
            dead_letter_matcher(
                [
                    (["invalid JSON file", "b_broken.json"], lambda raw: raw == broken_text, None),
                    (["int", "not an object"], lambda raw: json.loads(raw) == 7, None),
                    (["list", "not an object"], lambda raw: json.loads(raw) == ["nested"], None),
                ]
            ),
            label="Dead",
        )


def test_dead_letter_elements_serialise_to_strict_json(test_pipeline, tmp_path):
    path = write_jsonl(tmp_path / "nan.jsonl", [make_session("n", 1, weight=float("nan")), "{bad"])
    with test_pipeline as p:
        out = p | ReadInteractions(path)
        assert_that(
            out["dead_letter"]
            | beam.Map(lambda d: sorted(json.loads(json.dumps(d.to_dict(), allow_nan=False)).keys())),
            equal_to([["element_id", "raw", "reason", "stage"]] * 2),
        )
