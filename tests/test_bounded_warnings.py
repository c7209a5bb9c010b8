"""What one session emits is bounded by the session, never by how many keys repeat in it
(issue 28): one data-quality warning per session per kind, naming the first 3 repeated keys and
how many repeat in all — the reader's ``duplicate_qa_id`` and ``duplicate_turn_index`` (session
records, streamed records, the streaming reader), the engine's ``repeated_turns`` and
PromptEvaluator's ``duplicate_element_id``."""
from __future__ import annotations

import json

import pytest

from fair_forge_beam._beam import beam
from fair_forge_beam.io.elements import QualityWarning

N_KEYS = 40  # distinct keys, each given twice


def _quality(path, tmp_path) -> list:
    """The reader's data-quality warnings of the file ``path`` (FnApiRunner in memory)."""
    from apache_beam.testing.util import assert_that

    from fair_forge_beam.io.read import ReadInteractions
    from helpers import fnapi_pipeline

    dump = tmp_path / "quality.json"

    def keep(lists, dump=str(dump)):
        with open(dump, "w") as f:
            json.dump([list(w) for w in lists[0]], f)

    with fnapi_pipeline() as p:
        out = p | ReadInteractions(str(path))
        assert_that(out["quality"] | beam.combiners.ToList(), keep)
    return [QualityWarning(*w) for w in json.loads(dump.read_text())]


def _session(conv, sid="s", aid="bot"):
    return {"session_id": sid, "assistant_id": aid, "language": "english", "context": "", "conversation": conv}


def _turn(qa):
    return {"qa_id": qa, "query": "hi", "assistant": "hello"}


def _one_of_kind(ws, kind):
    mine = [w for w in ws if w.kind == kind]
    assert len(mine) == 1, [w.message[:80] for w in mine]
    return mine[0]


def test_repeats_named_names_the_first_three_and_how_many():
    from fair_forge_beam.io.elements import repeats_named

    assert repeats_named({"a": 1, "b": 1}) is None
    n, text = repeats_named({f"q{i:03d}": 2 for i in range(500)} | {"single": 1})
    assert n == 500
    assert text == "'q000' (2 times), 'q001' (2 times), 'q002' (2 times) and 497 more"
    assert repeats_named({("x", 1): 2, (None, 2): 3}, str)[0] == 2  # keys that do not compare: no TypeError


@pytest.mark.parametrize("pattern", ["alternating", "pairs"])
def test_a_session_record_gives_one_duplicate_qa_id_warning(tmp_path, pattern):
    """A session of alternating qa_ids ``a``/``b`` or of N distinct qa_ids each given twice: ONE
    warning (the old reader gave one per repeated qa_id: N)."""
    qas = ["a", "b"] * N_KEYS if pattern == "alternating" else [f"q{i:02d}" for i in range(N_KEYS) for _ in (0, 1)]
    path = tmp_path / "dup.jsonl"
    path.write_text(json.dumps(_session([_turn(q) for q in qas])) + "\n" + json.dumps(_session([_turn("x")], "t")) + "\n")
    w = _one_of_kind(_quality(path, tmp_path), "duplicate_qa_id")
    assert w.key == "s/bot"
    if pattern == "alternating":
        assert f"'a' ({N_KEYS} times), 'b' ({N_KEYS} times)" in w.message and "more;" not in w.message
    else:
        assert w.message.startswith(f"{N_KEYS} qa_ids given more than once")
        assert f"'q00' (2 times), 'q01' (2 times), 'q02' (2 times) and {N_KEYS - 3} more" in w.message


def test_streamed_records_give_one_warning_per_kind(tmp_path):
    """Streamed records (one interaction each) of one session: repeated qa_ids and repeated
    declared turns give one ``duplicate_qa_id`` and one ``duplicate_turn_index`` warning."""
    path = tmp_path / "streamed.jsonl"
    with open(path, "w") as f:
        for i in range(N_KEYS):
            for _ in (0, 1):
                f.write(json.dumps({"metadata": {"session_id": "s", "assistant_id": "bot"}, "batch": _turn(f"q{i:02d}"),
                                    "turn_index": i}) + "\n")
    ws = _quality(path, tmp_path)
    assert "and 37 more" in _one_of_kind(ws, "duplicate_qa_id").message
    t = _one_of_kind(ws, "duplicate_turn_index")
    assert t.message.startswith(f"{N_KEYS} turn_index values given more than once: 0 (2 times), 1 (2 times), 2 (2 times)")


def test_the_streaming_reader_gives_one_warning_per_record():
    from fair_forge_beam.io.elements import QUALITY
    from fair_forge_beam.io.read import _ParseRecord

    line = json.dumps(_session([_turn(f"q{i:02d}") for i in range(N_KEYS) for _ in (0, 1)]))
    outs = list(_ParseRecord(streaming=True)._dispatch("f", 0, line))
    ws = [o.value for o in outs if isinstance(o, beam.pvalue.TaggedOutput) and o.tag == QUALITY]
    assert "and 37 more" in _one_of_kind(ws, "duplicate_qa_id").message


def test_engine_repeated_turns_names_the_first_three():
    from fair_forge_beam.engine import repeated_turns

    (w,) = repeated_turns(("s", "a", "english"), [t for t in range(N_KEYS) for _ in (0, 1)])
    assert (w.kind, w.key) == ("duplicate_turn_index", "s/a")
    assert f"{N_KEYS} turn indices repeat: 0 (2 times), 1 (2 times), 2 (2 times) and {N_KEYS - 3} more" in w.message
    (w,) = repeated_turns(("s", "a", "english"), [(0, "s/a/0", "x"), (0, "s/a/0", "x"), (1, "s/a/1", None)])
    assert w.message.endswith("1 turn index repeat: 0 (2 times)")


def test_prompt_evaluator_gives_one_duplicate_element_id_warning_per_session(tmp_path):
    """N interaction ids each given by two records of one session: one ``duplicate_element_id``
    warning for the session (was one per id), from the session stage."""
    from helpers import handler_for, run_metric

    from fair_forge_beam.components.embedder import HashingEmbedder
    from fair_forge_beam.io.elements import Interaction, make_element_id
    from fair_forge_beam.metrics.prompt_evaluator import PromptEvaluator
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

    def q(turn):
        return Interaction(
            element_id=make_element_id("s", "bot", turn), session_id="s", assistant_id="bot", language="english",
            context="", turn_index=turn, qa_id=f"q{turn}", query="Hours?", assistant="", ground_truth_assistant=None,
            observation=None, weight=None, agentic=None, ground_truth_agentic=None, logprobs=None)

    n = 6
    data = [q(t) for t in range(n) for _ in (0, 1)]
    with ScriptedOpenAIServer(lambda req: "We open at nine") as srv:
        out = run_metric(PromptEvaluator(model=handler_for(srv, tmp_path), seed_prompt="Be brief.",
                                         embedder=HashingEmbedder(dim=64), k=2), data, tmp_path / "out")
    dup = [w for w in out["quality"] if w["kind"] == "duplicate_element_id"]
    assert len(dup) == 1, dup
    assert dup[0]["message"].startswith(f"{n} interaction ids are shared by several records: s/bot/0 (2 times)")
    assert dup[0]["message"].count("(2 times)") == 3 and f"and {n - 3} more" in dup[0]["message"]
    assert [s["n_queries"] for s in out["sessions"]] == [n]
