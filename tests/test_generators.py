"""Generators (spec §10): the Markdown loader and the selection strategies as unit tests, the
generation pipeline against the scripted OpenAI-compatible server (byte-identical re-runs, cache,
dead letters with reasons)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from fair_forge_beam.generators.loader import LocalMarkdownLoader, create_context_loader, create_markdown_loader, packaged_corpus_path
from fair_forge_beam.generators.schemas import Chunk
from fair_forge_beam.generators.strategies import RandomSamplingStrategy, SequentialStrategy


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


# ------------------------------------------------------------------------------------ loader
def test_header_splitting_names_and_metadata(tmp_path):
    f = write(tmp_path, "My Doc.md", "Intro text.\n\n# First Part\nAlpha.\n\n## Sub: Two!\nBeta.\n\n#### Deep\nGamma.\n")
    chunks = LocalMarkdownLoader().load(f)
    assert [c.chunk_id for c in chunks] == ["my_doc_introduction", "my_doc_first_part", "my_doc_sub_two"]
    assert chunks[0].content == "Intro text."
    assert chunks[1].content == "# First Part\nAlpha."
    assert chunks[2].content == "## Sub: Two!\nBeta.\n\n#### Deep\nGamma."  # deeper header stays in the body
    assert chunks[2].metadata == {"header": "Sub: Two!", "chunking_method": "header", "source_file": str(f)}


def test_empty_sections_dropped_and_empty_slug(tmp_path):
    f = write(tmp_path, "d.md", "# Empty\n\n# !!!\nbody\n")
    chunks = LocalMarkdownLoader().load(f)
    assert [c.chunk_id for c in chunks] == ["d_section_1"]


def test_duplicate_headers_and_stems_get_unique_ids(tmp_path):
    write(tmp_path, "a/doc.md", "# Refunds\none\n\n# Refunds\ntwo\n")
    write(tmp_path, "b/doc.md", "# Refunds\nthree\n")
    chunks = LocalMarkdownLoader().load(tmp_path)
    ids = [c.chunk_id for c in chunks]
    assert ids == ["doc_refunds", "doc_refunds_2", "doc_refunds_3"]
    assert [c.content.split("\n")[1] for c in chunks] == ["one", "two", "three"]


def test_long_section_split_at_paragraphs_with_overlap_and_progress(tmp_path):
    para = "word " * 30  # 150 characters
    body = "\n\n".join(f"P{i} {para}" for i in range(6))
    f = write(tmp_path, "long.md", f"# Long\n{body}\n")
    loader = LocalMarkdownLoader(max_chunk_size=400, min_chunk_size=100, overlap=20)
    chunks = loader.load(f)
    assert len(chunks) >= 3
    assert [c.chunk_id for c in chunks] == [f"long_long_part{j}" for j in range(1, len(chunks) + 1)]
    assert all(len(c.content) <= 400 for c in chunks)
    assert all(c.metadata["chunking_method"] == "size" for c in chunks)
    assert chunks[0].content.endswith(para.strip())  # pulled back to the paragraph break
    # huge overlap relative to the pull-back still ends (the upstream loop could not advance)
    assert LocalMarkdownLoader(max_chunk_size=50, min_chunk_size=0, overlap=49).split_by_size("x. " * 200)


def test_sentence_fallback_and_no_header_file(tmp_path):
    text = "Sentence one is here. " * 40
    f = write(tmp_path, "plain.md", text)
    chunks = LocalMarkdownLoader(max_chunk_size=300, min_chunk_size=50, overlap=0).load(f)
    assert chunks[0].chunk_id == "plain_part1" and chunks[0].metadata["header"] == "Introduction"
    assert chunks[0].content.endswith("here.")


def test_custom_levels_unicode_and_code_blocks(tmp_path):
    f = write(tmp_path, "ü.md", "# Título\nTexto ñ.\n\n```python\n# not a header\nx = 1\n```\n\n## Zwei\nzwei\n")
    chunks = LocalMarkdownLoader(header_levels=[1]).load(f)
    assert len(chunks) == 1 and "# not a header" in chunks[0].content and "## Zwei" in chunks[0].content
    chunks = LocalMarkdownLoader().load(f)
    assert [c.chunk_id for c in chunks] == ["ü_título", "ü_zwei"]  # Unicode letters are alphanumerics


def test_sources_lists_globs_dirs_order_and_missing(tmp_path):
    b = write(tmp_path, "docs/b.md", "# B\nb\n")
    a = write(tmp_path, "docs/sub/a.markdown", "# A\na\n")
    write(tmp_path, "docs/c.txt", "# C\nc\n")
    assert [c.chunk_id for c in LocalMarkdownLoader().load(tmp_path / "docs")] == ["b_b", "a_a"]
    assert [c.chunk_id for c in LocalMarkdownLoader().load([a, b])] == ["a_a", "b_b"]
    assert [c.chunk_id for c in LocalMarkdownLoader().load(str(tmp_path / "docs" / "**" / "*.m*"))] == ["b_b", "a_a"]
    with pytest.raises(FileNotFoundError):
        LocalMarkdownLoader().load(tmp_path / "nothing.md")
    with pytest.raises(FileNotFoundError):
        LocalMarkdownLoader().load([a, tmp_path / "missing.md"])
    with pytest.raises(FileNotFoundError):
        LocalMarkdownLoader().load(str(tmp_path / "*.rst"))


def test_loader_validation_and_factories():
    for kw in ({"max_chunk_size": 0}, {"overlap": 2000}, {"min_chunk_size": 2000}, {"header_levels": [7]}, {"header_levels": []}):
        with pytest.raises(ValueError):
            LocalMarkdownLoader(**kw)
    assert isinstance(create_markdown_loader(max_chunk_size=10, min_chunk_size=1, overlap=1), LocalMarkdownLoader)
    assert create_context_loader("markdown").max_chunk_size == 2000
    with pytest.raises(ValueError):
        create_context_loader("pdf")


def test_shipped_corpora_load():
    air = LocalMarkdownLoader().load(packaged_corpus_path("airline"))
    cc = LocalMarkdownLoader().load(packaged_corpus_path("callcenter"))
    assert len(air) >= 6 and len(cc) == 8
    assert len({c.chunk_id for c in air + cc}) == len(air) + len(cc)
    with pytest.raises(ValueError):
        packaged_corpus_path("banking")


# ------------------------------------------------------------------------------------ strategies
CHUNKS = [Chunk(content=f"content {i}", chunk_id=f"c{i}") for i in range(10)]


def ids(groups):
    return [[c.chunk_id for c in g] for g in groups]


def test_sequential_strategy():
    assert ids(SequentialStrategy().select(CHUNKS)) == [[c.chunk_id for c in CHUNKS]]
    assert list(SequentialStrategy().select([])) == []
    assert repr(SequentialStrategy()) == "SequentialStrategy()"


def test_random_sampling_reproducible_order_free_and_seed_dependent():
    s = RandomSamplingStrategy(num_samples=4, chunks_per_sample=3, seed=11)
    first = ids(s.select(CHUNKS))
    assert first == ids(s.select(CHUNKS)) == ids(RandomSamplingStrategy(4, 3, seed=11).select(list(reversed(CHUNKS))))
    assert len(first) == 4 and all(len(g) == 3 and len(set(g)) == 3 for g in first)
    assert first != ids(RandomSamplingStrategy(4, 3, seed=12).select(CHUNKS))
    assert ids(RandomSamplingStrategy(4, 3).select(CHUNKS)) == ids(RandomSamplingStrategy(4, 3, seed=0).select(CHUNKS))
    assert list(s.select([])) == []


def test_random_sampling_cap_and_replacement():
    few = CHUNKS[:2]
    assert all(len(g) == 2 for g in RandomSamplingStrategy(3, 5, seed=1).select(few))
    groups = ids(RandomSamplingStrategy(20, 5, seed=1, with_replacement=True).select(few))
    assert all(len(g) == 5 for g in groups)
    assert any(len(set(g)) < len(g) for g in groups)  # repeats happen with replacement


def test_random_sampling_validation_and_repr():
    for kw in ({"num_samples": 0}, {"chunks_per_sample": 0}, {"num_samples": 1.5}, {"num_samples": True}, {"seed": -1}):
        with pytest.raises(ValueError):
            RandomSamplingStrategy(**kw)
    assert repr(RandomSamplingStrategy(2, 1, seed=3)) == (
        "RandomSamplingStrategy(num_samples=2, chunks_per_sample=1, seed=3, with_replacement=False)")


def test_every_appearance_of_a_chunk_is_its_own_request():
    """Two groups sharing a chunk must not share a cache key: otherwise the second request is asked
    or read from the cache depending on timing, and a cached re-run can differ from the first run."""
    from fair_forge_beam.generators.generate import plan_requests

    chunks = LocalMarkdownLoader().load(packaged_corpus_path("callcenter"))
    for strategy in (RandomSamplingStrategy(3, 3, seed=7), RandomSamplingStrategy(4, 3, seed=1, with_replacement=True)):
        plan = plan_requests(chunks, "bot", num_queries_per_chunk=2, selection_strategy=strategy, seed=7)
        idents = [(r.messages, r.sample_index) for r in plan.requests]
        assert len(set(idents)) == len(idents)
        assert len({r.messages for r in plan.requests}) < len(idents)  # the case exists: some chunk is sampled twice
        by_prompt = {}
        for r in plan.requests:
            by_prompt.setdefault(r.messages, []).append(r.sample_index)
        assert all(v == list(range(len(v))) for v in by_prompt.values())


def test_custom_strategy_is_used():
    from fair_forge_beam.generators.generate import plan_requests
    from fair_forge_beam.generators.strategies import BaseChunkSelectionStrategy

    class Pairs(BaseChunkSelectionStrategy):
        def select(self, chunks):
            for i in range(0, len(chunks), 2):
                yield list(chunks[i:i + 2])

    plan = plan_requests(CHUNKS[:5], "bot", selection_strategy=Pairs())
    assert [len(g["slots"]) for g in plan.groups] == [2, 2, 1]
    assert len({g["session_id"] for g in plan.groups}) == 3


# ------------------------------------------------------------------------------------ pipeline
def generator_answer(req):
    """Deterministic answers computed from the prompt (queries or turns per the schema asked)."""
    h = hashlib.blake2b(req.prompt.encode("utf-8"), digest_size=4).hexdigest()
    wants_turns = "turns" in json.dumps(req.json_schema or {}) or '"turns"' in req.prompt
    if wants_turns:
        return {"turns": [{"query": f"Turn {i} about {h}?", "turn_number": i, "difficulty": "easy"} for i in (1, 2)],
                "conversation_summary": "conv", "chunk_summary": "sum"}
    return {"queries": [{"query": f"Question {i} about {h}?", "query_type": "recall"} for i in (1, 2)], "chunk_summary": "sum"}


GEN_ARGS = ["--corpus", "callcenter", "--strategy", "random", "--num-samples", "3", "--chunks-per-sample", "3",
            "--seed", "7", "--num-queries", "2", "--assistant-id", "bot", "--generator-model", "gen-model",
            "--generator-retries", "0", "--parquet"]


def _faulty_headers():
    """Two chunks of the sampled groups whose answers are made to fail (invalid, HTTP 400)."""
    from fair_forge_beam.generators.generate import plan_requests

    chunks = LocalMarkdownLoader().load(packaged_corpus_path("callcenter"))
    plan = plan_requests(chunks, "bot", num_queries_per_chunk=2, selection_strategy=RandomSamplingStrategy(3, 3, seed=7), seed=7)
    by_id = {c.chunk_id: c for c in chunks}
    first = by_id[plan.groups[0]["slots"][0][1]]
    second = next(by_id[cid] for _, cid, _ in plan.groups[1]["slots"] if cid != first.chunk_id)
    return plan, first.content.split("\n")[0], second.content.split("\n")[0]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """Three generate runs: with a cache, again with the same cache, and without a cache against a
    fresh server; returns the folders, the server counts and the plan."""
    from fair_forge_beam.testing.openai_server import Fault, ScriptedOpenAIServer
    from pipelines import generate

    plan, bad_invalid, bad_400 = _faulty_headers()
    faults = [Fault("invalid", match=bad_invalid), Fault("bad_request", match=bad_400)]
    root = tmp_path_factory.mktemp("gen")
    cache = root / "cache.sqlite3"
    counts = []
    with ScriptedOpenAIServer(generator_answer, faults=faults) as srv:
        base = [*GEN_ARGS, "--generator-base-url", srv.base_url]
        summary1 = generate.run([*base, "--generator-cache", str(cache), "--output", str(root / "a")])
        counts.append((srv.count(), {r.messages[0]["content"] for r in srv.requests}))
        srv.reset_counts()
        generate.run([*base, "--generator-cache", str(cache), "--output", str(root / "b")])
        counts.append((srv.count(), {r.messages[0]["content"] for r in srv.requests}))
    with ScriptedOpenAIServer(generator_answer, faults=faults) as srv:
        generate.run([*GEN_ARGS, "--generator-base-url", srv.base_url, "--generator-cache", str(root / "other.sqlite3"),
                      "--output", str(root / "c")])
    return {"root": root, "counts": counts, "plan": plan, "summary": summary1, "bad": (bad_invalid, bad_400)}


def test_same_corpus_seed_and_answers_give_the_same_bytes(generated):
    root = generated["root"]
    for name in ("dataset.jsonl", "dataset.parquet", "dead_letter.jsonl", "generation_summary.json"):
        a = (root / "a" / name).read_bytes()
        assert a == (root / "b" / name).read_bytes() == (root / "c" / name).read_bytes(), name


def test_cached_rerun_asks_only_what_failed(generated):
    plan = generated["plan"]
    n_requests = len(plan.requests)
    (first, first_prompts), (second, second_prompts) = generated["counts"]
    bad_invalid, bad_400 = generated["bad"]
    failing = {r.messages[0][1] for r in plan.requests if bad_invalid in r.messages[0][1] or bad_400 in r.messages[0][1]}
    n_invalid = sum(1 for r in plan.requests if bad_invalid in r.messages[0][1])
    n_400 = sum(1 for r in plan.requests if bad_400 in r.messages[0][1])
    assert n_invalid >= 1 and n_400 >= 1
    # first run: every prompt asked; at least once each, plus one re-ask of the invalid answer
    # (invalid_answer_retries=1) and the HTTP 400 tried under each structured-output mode
    # (json_schema, json_object, text) — more only if a client retry happened under load
    plan_prompts = {r.messages[0][1] for r in plan.requests}

    def asked(server_prompts):  # plan prompts the server saw (a JSON-mode fallback appends the schema to them)
        assert all(any(s.startswith(p) for p in plan_prompts) for s in server_prompts)
        return {p for p in plan_prompts if any(s.startswith(p) for s in server_prompts)}

    assert asked(first_prompts) == plan_prompts
    assert first >= n_requests + n_invalid + 2 * n_400
    # second run: answers come from the cache; errors are never cached, so only the failures are asked again
    assert asked(second_prompts) == failing
    assert second >= 2 * n_invalid + 3 * n_400


def test_dataset_shape_ids_and_dead_letters(generated):
    root, plan = generated["root"], generated["plan"]
    records = [json.loads(line) for line in (root / "a" / "dataset.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["session_id"] for r in records] == [g["session_id"] for g in plan.groups]
    assert all(r["session_id"].startswith("gen-") and len(r["session_id"]) == 36 for r in records)
    r0 = records[0]
    assert r0["assistant_id"] == "bot" and r0["language"] == "english"
    assert r0["context"] == plan.groups[0]["context"]
    b = r0["conversation"][0]
    assert b["assistant"] == "" and b["ground_truth_assistant"] == "" and b["ground_truth_agentic"] == {}
    assert b["qa_id"].endswith("_q1") and b["agentic"]["query_type"] == "recall"
    assert b["observation"] == f"Generated from chunk {b['agentic']['chunk_id']}"
    for r in records:
        qa = [x["qa_id"] for x in r["conversation"]]
        assert len(qa) == len(set(qa))
    dead = [json.loads(line) for line in (root / "a" / "dead_letter.jsonl").read_text(encoding="utf-8").splitlines()]
    reasons = sorted(d["reason"].split(":")[0] for d in dead)
    assert {d["stage"] for d in dead} == {"generator"}
    assert any(r.startswith("invalid answer after 2 attempt(s)") for r in reasons)
    assert any(r.startswith("HTTP 400") for r in reasons)
    n_ok = len(plan.requests) - len(dead)
    assert sum(len(r["conversation"]) for r in records) == 2 * n_ok
    summary = generated["summary"]
    assert summary["dead_letters"] == len(dead) and summary["calls_planned"] == len(plan.requests)
    assert summary["shortfall"] == {"requested_per_chunk": 2, "chunks_answered": n_ok, "chunks_short": 0,
                                    "requested": 2 * n_ok, "generated": 2 * n_ok, "missing": 0}


def test_parquet_holds_the_same_sessions_and_the_audit_reader_reads_both_files(generated):
    import pyarrow.parquet as pq
    from apache_beam.testing.util import assert_that, equal_to

    from helpers import fnapi_pipeline
    from fair_forge_beam._beam import beam
    from fair_forge_beam.io.read import ReadInteractions

    root = generated["root"]
    rows = pq.read_table(root / "a" / "dataset.parquet").to_pylist()
    records = [json.loads(line) for line in (root / "a" / "dataset.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["session_id"] for r in rows] == [r["session_id"] for r in records]
    assert [{k: v for k, v in b["agentic"].items() if v is not None} for b in rows[0]["conversation"]] == [
        b["agentic"] for b in records[0]["conversation"]]
    expected = sorted((r["session_id"], b["qa_id"], b["query"]) for r in records for b in r["conversation"])
    for name in ("dataset.jsonl", "dataset.parquet"):
        with fnapi_pipeline() as p:
            read = p | ReadInteractions([str(root / "a" / name)])
            assert_that(read["interactions"] | beam.Map(lambda it: (it.session_id, it.qa_id, it.query)), equal_to(expected))
            assert_that(read["dead_letter"], equal_to([]), label="NoDeadLetters")


def test_upstream_style_api_text_mode_and_conversations(tmp_path):
    """generate_queries in text mode (JSON in a fenced block), generate_conversation, and a
    conversation with repeated turn numbers raising (failures propagate)."""
    from fair_forge_beam.generators.generate import Generator, generator_handler
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

    chunk = Chunk(content="Refunds take 14 days.", chunk_id="refunds")

    def answer(req):
        if "turns" in req.prompt and "REPEAT" in req.prompt:
            return {"turns": [{"query": "a?", "turn_number": 1}, {"query": "b?", "turn_number": 1}],
                    "conversation_summary": "c", "chunk_summary": "s"}
        if '"turns"' in req.prompt:
            return {"turns": [{"query": "How long?", "turn_number": 1}, {"query": "And then?", "turn_number": 2}],
                    "conversation_summary": "c", "chunk_summary": "s"}
        return "Here you go:\n```json\n" + json.dumps({"queries": [{"query": "How long do refunds take?"}], "chunk_summary": "s"}) + "\n```"

    with ScriptedOpenAIServer(answer) as srv:
        gen = Generator(generator_handler("m", srv.base_url, use_structured_output=False, cache_path=None))
        out = gen.generate_queries(chunk, num_queries=1, seed_examples=["What is the refund window?"])
        assert [q.query for q in out.queries] == ["How long do refunds take?"]
        sys_prompt = srv.requests[0].messages[0]["content"]
        assert "What is the refund window?" in sys_prompt and "exactly 1 questions" in sys_prompt
        assert srv.requests[0].response_format is None  # text mode
        conv = gen.generate_conversation(chunk, num_turns=2)
        assert [t.turn_number for t in conv.turns] == [1, 2]
        with pytest.raises(ValueError, match="repeats turn numbers"):
            gen.generate_conversation(chunk, num_turns=2, custom_system_prompt="REPEAT turns about {{ context }}")


def _generate_random(tmp_path, caplog, answer, chunks_per_sample: int, num_queries: int) -> dict:
    """``pipelines.generate`` of 2 random samples of the callcenter corpus against a scripted server
    answering ``answer(request)``, warnings caught; its summary."""
    import logging

    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer
    from pipelines import generate

    args = ["--corpus", "callcenter", "--strategy", "random", "--num-samples", "2", "--chunks-per-sample",
            str(chunks_per_sample), "--seed", "7", "--num-queries", str(num_queries), "--assistant-id", "bot",
            "--generator-model", "gen-model", "--generator-retries", "0"]
    with caplog.at_level(logging.WARNING, logger="fair_forge_beam.loop"), ScriptedOpenAIServer(answer) as srv:
        return generate.run([*args, "--generator-base-url", srv.base_url, "--generator-cache", str(tmp_path / "c.sqlite3"),
                             "--output", str(tmp_path / "out")])


def test_fewer_questions_than_asked_are_counted_and_warned(tmp_path, caplog):
    """A generator that answers one question where two were asked: the shortfall is counted in
    generation_summary.json and a warning names it (the session keeps what came back)."""
    import logging

    def one_query(req):
        return {"queries": [{"query": "Only one?", "query_type": "recall"}], "chunk_summary": "sum"}

    summary = _generate_random(tmp_path, caplog, one_query, chunks_per_sample=2, num_queries=2)
    assert summary["interactions"] == 4 and summary["calls_planned"] == 4
    assert summary["shortfall"] == {"requested_per_chunk": 2, "chunks_answered": 4, "chunks_short": 4,
                                    "requested": 8, "generated": 4, "missing": 4}
    assert json.loads((tmp_path / "out" / "generation_summary.json").read_text())["shortfall"] == summary["shortfall"]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("4 of 8" in m and "4 of 4 chunk(s)" in m for m in warned), warned


def test_shortfall_counts_per_chunk():
    from fair_forge_beam.generators.generate import generation_shortfall

    def rec(*qa_ids):
        return {"conversation": [{"qa_id": q} for q in qa_ids]}

    records = [rec("c1_q1", "c1_q2", "c1_q3", "c2_q1"), rec("c1#2_q1", "c3_t1", "c3_t2")]
    assert generation_shortfall(records, 3) == {"requested_per_chunk": 3, "chunks_answered": 4, "chunks_short": 3,
                                                "requested": 12, "generated": 7, "missing": 5}
    assert generation_shortfall([], 2)["missing"] == 0


def test_a_generation_that_generated_nothing_exits_as_an_empty_run(tmp_path, capsys):
    from fair_forge_beam.reports.empty_run import EMPTY_RUN_EXIT_CODE
    from fair_forge_beam.testing.openai_server import Fault, ScriptedOpenAIServer
    from pipelines import generate

    args = ["--corpus", "callcenter", "--strategy", "random", "--num-samples", "1", "--chunks-per-sample", "1",
            "--seed", "7", "--num-queries", "1", "--assistant-id", "bot", "--generator-model", "gen-model",
            "--generator-retries", "0"]
    with ScriptedOpenAIServer(lambda req: "{}", faults=[Fault("server_error", match="")]) as srv:
        code = generate.main([*args, "--generator-base-url", srv.base_url, "--generator-cache", str(tmp_path / "c.sqlite3"),
                              "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EMPTY_RUN_EXIT_CODE and err[-1].startswith("generate: empty run: no interaction was generated ("), err[-1:]


def test_a_generators_reply_of_another_shape_is_named_as_its_reply_missing_field_first(tmp_path, capsys):
    """trial38 T13: a generator whose server answered a judge's ``{"score": …}`` was said to give an "answer [that]
    does not match the verdict schema", its dead letter's source ``judge:…``, and the reason began with the unknown
    key (``score: is not a field …``), so a cut line hid ``queries: is required but missing``."""
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer
    from pipelines import generate

    args = ["--corpus", "callcenter", "--strategy", "random", "--num-samples", "1", "--chunks-per-sample", "1",
            "--seed", "7", "--num-queries", "1", "--assistant-id", "bot", "--generator-model", "gen-model",
            "--generator-retries", "0"]
    with ScriptedOpenAIServer(lambda req: {"score": 0.9, "reasoning": "fine"}) as srv:
        generate.main([*args, "--generator-base-url", srv.base_url, "--generator-cache", str(tmp_path / "c.sqlite3"),
                       "--output", str(tmp_path / "out")])
    assert f"kept unpublished in {tmp_path / 'out.staging-'}" in capsys.readouterr().err  # an empty run (trial48 B1)
    (stage,) = [p for p in tmp_path.iterdir() if p.name.startswith("out.staging-")]
    dead = [json.loads(line) for line in (stage / "dead_letter.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(dead) == 1 and dead[0]["stage"] == "generator" and dead[0]["source"].startswith("generator:"), dead
    assert dead[0]["reason"].startswith("invalid answer after 2 attempt(s): the generator's reply: queries: is required "
                                        "but missing; chunk_summary: is required but missing; score: is not a field"), dead[0]["reason"]


def test_blank_damaged_and_surplus_questions_never_enter_the_dataset_unsaid(tmp_path, caplog):
    """trial49b B7: "   ", "\\u200b\\u200f" and "a\\u0000b" went into dataset.jsonl with 0 dead letters (explain
    refuses such a prompt as blank), and with --num-queries 1 all 5 questions of each answer were kept
    (requested 2, generated 10) without a word. Now the answer's rejected questions are one dead letter
    with the raw answer and their reasons, the first usable question is kept, and the cut ones are
    counted (``surplus``) and warned about."""
    import logging

    questions = ["   ", "\u200b\u200f", "a\u0000b", "How many bags?", "And the fee?", "\u0301"]

    def five(req):
        return {"queries": [{"query": q} for q in questions], "chunk_summary": "sum"}

    summary = _generate_random(tmp_path, caplog, five, chunks_per_sample=1, num_queries=1)
    records = [json.loads(line) for line in (tmp_path / "out" / "dataset.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [b["query"] for r in records for b in r["conversation"]] == ["How many bags?", "How many bags?"]
    dead = [json.loads(line) for line in (tmp_path / "out" / "dead_letter.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(dead) == 2 and summary["dead_letters"] == 2 and all(d["stage"] == "generator" for d in dead)
    assert dead[0]["reason"] == (
        "4 of the 6 generated questions not used: queries[0]: blank question: the question holds nothing to read (only "
        "whitespace or invisible characters); queries[1]: blank question: the question holds nothing to read (only "
        "whitespace or invisible characters); queries[2]: the question holds a control character, U+0000 at character 2 "
        "of 3: damage, not text; and 1 more"), dead[0]["reason"]
    assert json.loads(dead[0]["raw"])["queries"][2]["query"] == "a\u0000b"
    assert summary["surplus"] == {"requested_per_chunk": 1, "chunks_over": 2, "returned": 4, "kept": 2, "cut": 2}
    assert summary["shortfall"]["missing"] == 0 and summary["interactions"] == 2
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("more questions than asked: 2 chunk(s) answered with 4 where 1 per chunk were asked" in m for m in warned), warned


def test_a_generated_conversation_with_a_blank_turn_is_rejected_whole_and_extra_turns_cut():
    from fair_forge_beam.generators.generate import generated_items

    def turns(*qs):
        return {"turns": [{"query": q, "turn_number": i} for i, q in enumerate(qs, start=1)]}

    kept, rejected, cut = generated_items(turns("Hi?", "\u200b", "Why?"), True, 3)
    assert (kept, cut) == ([], 0) and rejected == [
        "turn 2: blank question: the question holds nothing to read (only whitespace or invisible characters)"]
    kept, rejected, cut = generated_items(turns("Hi?", "So?", "Why?"), True, 2)
    assert [t["query"] for t in kept] == ["Hi?", "So?"] and (rejected, cut) == ([], 1)
