"""Issue 28 H11: a text made only of invisible characters counted as content. A vision answer
"\\u200b" was scored without its empty_description warning (while "", "   " and "\\n\\t" had it), a
chatbot_role "\\u200b" was judged as a role (while "" and "   " were dead letters), an explain prompt
"\\u200b" reached the model and died in torch. ``str.strip()`` keeps format characters (Cf): every
emptiness check of the package now asks one predicate, fair_forge_beam.blank.is_blank."""
from __future__ import annotations

import ast
import json
import sys
import unicodedata
from pathlib import Path

import pytest

from helpers import handler_for, run_metric
from test_bad_files import _read
from test_vision import MarkerScorer, frame

from fair_forge_beam.blank import is_blank

ROOT = Path(__file__).resolve().parents[1]
#: texts that show as nothing: whitespace, zero-width, BOM, word joiner, no-break space, line and
#: paragraph separators, a control character, bidirectional marks, a variation selector, a tag
BLANKS = ["", " ", "\n\t", "\u200b", "\ufeff", "\u2060", "\u00a0", "\u2028", "\u2029", "\x00", "\u200e\u200f",
          "\u202a\u202c", " \u200b\u200c\u200d ", "\ufe0f", "\U000e0020", "\u3000", "\u00ad", "\u3164", "\u2800"]
CONTENT = ["a", " a ", "\u200ba", "é", "\u0301", "0", "-", "日本", "\U0001f600"]


def test_the_predicate_over_the_categories_that_show_nothing():
    for text in BLANKS:
        assert is_blank(text), repr(text)
    for text in CONTENT:
        assert not is_blank(text), repr(text)
    assert is_blank(None) and not is_blank(0)
    for code in range(0x20000):
        ch = chr(code)
        if unicodedata.category(ch) in ("Cf", "Zs", "Zl", "Zp", "Cc"):
            assert is_blank(ch * 2) and not is_blank(ch + "x"), hex(code)
        elif unicodedata.category(ch).startswith(("L", "N", "P")) and ch not in "\u3164\uffa0\u115f\u1160":
            assert not is_blank(ch), hex(code)


def test_every_default_ignorable_code_point_is_blank():
    """Trial30 T1: blank.py's hand-kept list missed the Khmer inherent vowels U+17B4/U+17B5 (category
    Mn, invisible), U+2065 and U+FFF0-FFF8 (unassigned, reserved as ignorable): an answer "\u17b4\u17b5"
    was scored with no empty_answer warning. What shows as nothing follows Unicode's
    Default_Ignorable_Code_Point and White_Space properties, every code point of them; a lone
    combining mark stays content (a documented decision)."""
    import regex

    prop = regex.compile(r"[\p{Default_Ignorable_Code_Point}\p{White_Space}]")
    ignorable = [chr(c) for c in range(0x110000) if prop.fullmatch(chr(c))]
    assert len(ignorable) > 4000  # 4,174 default-ignorables in Unicode 18 (most of them tags and reserved)
    for ch in ignorable:
        assert is_blank(ch * 2) and not is_blank(ch + "x"), hex(ord(ch))
    for text in ("\u17b4\u17b5", "\u2065", "\ufff0\ufff8", " \u17b4\u2060"):
        assert is_blank(text), repr(text)
    for text in ("\u0301", "\u17b6", "\u17b4a"):  # a combining mark (Khmer vowel sign AA too) is content
        assert not is_blank(text), repr(text)


def test_an_answer_of_khmer_inherent_vowels_warns_empty_answer(tmp_path):
    recs = [{"session_id": "s", "assistant_id": "blank_khmer", "conversation": [
        {"qa_id": "q0", "query": "x", "assistant": "\u17b4\u17b5"}, {"qa_id": "q1", "query": "x", "assistant": "\ufff0"},
        {"qa_id": "q2", "query": "x", "assistant": "ok"}]}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    inter, dead, quality = _read(str(tmp_path / "in.jsonl"))
    empty = [q for q in quality if q.kind == "empty_answer"]
    assert len(inter) == 3 and len(empty) == 1 and empty[0].message.startswith("2 interactions of this session"), quality


@pytest.mark.parametrize("text", ["\u200b", "\ufeff\u2060", " \u00a0\u200c "])
def test_a_vision_answer_of_invisible_characters_is_empty(tmp_path, text):
    from fair_forge_beam.metrics.vision import Vision

    data = [frame("s", 0, "[s=1.0]"), frame("s", 1, text), frame("s", 2, "[s=1.0]", gt="\u200b")]
    out = run_metric(Vision(scorer=MarkerScorer(), threshold=0.75), data, tmp_path)
    assert [q["kind"] for q in out["quality"]] == ["empty_description"], out["quality"]
    dead = out["dead_letter"]
    assert [d["element_id"] for d in dead] == ["s/cam/2"] and "reference description" in dead[0]["reason"], dead
    s = out["sessions"][0]
    assert s["n_frames"] == 2 and s["min_similarity"] == 0.0 and s["n_hallucinations"] == 1


def test_a_read_answer_of_invisible_characters_warns_and_a_blank_id_is_rejected(tmp_path):
    recs = [{"session_id": "s", "assistant_id": "bot", "conversation": [
        {"qa_id": "q0", "query": "x", "assistant": "\u200b"}, {"qa_id": "q1", "query": "x", "assistant": "\ufeff \u2060"},
        {"qa_id": "q2", "query": "x", "assistant": "ok"}]},
        {"session_id": "\u200b", "assistant_id": "bot", "conversation": [{"qa_id": "q", "query": "x", "assistant": "y"}]}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    inter, dead, quality = _read(str(tmp_path / "in.jsonl"))
    assert len(inter) == 3
    empty = [q for q in quality if q.kind == "empty_answer"]
    assert len(empty) == 1 and empty[0].message.startswith("2 interactions of this session"), quality
    assert len(dead) == 1 and "session_id: must be a non-empty string" in dead[0].reason, dead


def test_a_role_of_invisible_characters_is_no_role(tmp_path):
    from fair_forge_beam.io.read import _interaction
    from fair_forge_beam.metrics.role_adherence import RoleAdherence
    from fair_forge_beam.schemas.common import Dataset
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

    d = Dataset.model_validate({"session_id": "s", "assistant_id": "bot", "chatbot_role": "\u200b\u2060",
                                "conversation": [{"qa_id": "q", "query": "hi", "assistant": "hello"}]})
    with ScriptedOpenAIServer(lambda req: {"adherent": True, "reason": "ok"}) as srv:
        res = run_metric(RoleAdherence(judge=handler_for(srv, tmp_path)), [_interaction(d, d.conversation[0], 0)],
                         tmp_path / "run")
        sent = list(srv.requests)
    assert sent == [] and [d["element_id"] for d in res["dead_letter"]] == ["s/bot/0"], res["dead_letter"]
    assert "no chatbot_role" in res["dead_letter"][0]["reason"]


@pytest.mark.parametrize("prompt, target", [("\u200b", "x"), ("hi", "\ufeff"), ("\u2060 ", "x")])
def test_an_explain_prompt_of_invisible_characters_is_refused_before_the_model(prompt, target):
    pytest.importorskip("torch")
    from fair_forge_beam.explainability.attributions import AttributionExplainer

    class NoModel:
        def __call__(self, *a, **k):  # pragma: no cover - never reached
            raise AssertionError("the tokenizer was called")

    with pytest.raises(ValueError, match=r"^blank (prompt|target): "):  # e9feeca's words (were "... non-empty text")
        AttributionExplainer(NoModel(), NoModel()).explain(prompt, target)


def test_the_query_reference_and_seed_checks_ask_the_predicate():
    from fair_forge_beam.components.judge.prompts_quality import NO_REFERENCE, _has, _reference
    from fair_forge_beam.metrics.prompt_evaluator import PromptEvaluator

    assert _reference("\u200b") == NO_REFERENCE and not _has("\ufeff") and _has("a")
    with pytest.raises(ValueError, match="non-empty"):
        PromptEvaluator(seed_prompt="\u200b\u2060", k=2)


@pytest.mark.parametrize("blank", ["\u200b", "\u00a0", "\u2028", "\ufeff\u2060 ", "\u200e\t"])
def test_a_line_of_invisible_characters_is_a_blank_line_to_every_reader(tmp_path, blank):
    """Issue 29 T14: a JSON Lines line of only U+200B was "rejected at read (invalid JSON)" while one of
    only NBSP or U+2028 was skipped as blank (str.strip()): the audit's reader and the agentic
    loaders' now skip every line blank.is_blank calls blank, alike."""
    from fair_forge_beam.io.agentic_sources import _file_records

    rec = {"session_id": "s", "assistant_id": "bot", "conversation": [{"qa_id": "q", "query": "x", "assistant": "y"}]}
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(rec) + "\n" + blank + "\n" + json.dumps(dict(rec, session_id="t")) + "\n",
                    encoding="utf-8")
    inter, dead, _ = _read(str(path))
    assert dead == [] and sorted(i.session_id for i in inter) == ["s", "t"], dead
    assert [r["session_id"] for r in _file_records(str(path))] == ["s", "t"]


#: emptiness checks by str.strip() that stay: the rest after a JSON value (JSON's own whitespace),
#: option values, path names (a file may be named by any character)
_KEPT = {("components/judge/parsing.py", "not body[end:].strip()"), ("io/paths.py", "not output.strip()"),
         ("options.py", "not str(v).strip()"), ("reports/compare.py", "not getattr(args, name).strip()"),
         ("reports/output_folder.py", "not output.strip()"), ("streaming/windows.py", "not rest.strip()"),
         ("assistants/assistant.py", "not step.strip()")}


def _strip_tests(path: Path):
    """The lines where ``not <x>.strip()`` is a condition."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            c = node.operand
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "strip" and not c.args:
                yield node.lineno, ast.unparse(node)


def test_no_emptiness_check_of_text_content_by_strip():
    pkg = ROOT / "fair_forge_beam"
    found = [f"{p.relative_to(pkg)}:{line}: {text}" for p in sorted(pkg.rglob("*.py"))
             for line, text in _strip_tests(p) if (str(p.relative_to(pkg)), text) not in _KEPT]
    assert found == [], found


@pytest.mark.parametrize("blank", ["", "\u200b", "\u00a0", "\u200e\u200f"])
def test_a_context_of_invisible_characters_is_a_dead_letter_before_the_judge(tmp_path, blank):
    """Issue 29 T13: context "", "\\u200b", NBSP or only bidirectional marks was judged and scored
    (hh-rlhf's sessions have context ""). The Context metric needs the context: such an interaction is
    a dead letter naming the field, never sent to the judge (as role adherence does without a role)."""
    import helpers
    from fair_forge_beam.metrics.context import Context
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

    data = [helpers.ix("s", "bot", 0, "ok", context=blank, query="q"),
            helpers.ix("t", "bot", 0, "ok", context="A bakery assistant.", query="q")]
    with ScriptedOpenAIServer(lambda req: {"score": 0.7, "insight": "fine"}) as srv:
        res = run_metric(Context(judge=handler_for(srv, tmp_path)), data, tmp_path / "run")
        sent = len(srv.requests)
    assert sent == 1 and [r["element_id"] for r in res["interactions"]] == ["t/bot/0"]
    dead = res["dead_letter"]
    assert [d["element_id"] for d in dead] == ["s/bot/0"] and dead[0]["stage"] == "context", dead
    assert dead[0]["reason"].startswith("context is blank"), dead


def _judged(metric_cls, data, tmp_path, answer):
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

    with ScriptedOpenAIServer(lambda req: answer) as srv:
        res = run_metric(metric_cls(judge=handler_for(srv, tmp_path)), data, tmp_path / "run")
        sent = [m["content"] for req in srv.requests for m in req.messages if m["role"] == "user"]
    return res, sent


@pytest.mark.parametrize("metric", ["context", "conversational"])
@pytest.mark.parametrize("blank", ["\u2060", "\u17b4\u17b5", ""])
def test_a_judge_metric_that_reads_the_question_dead_letters_a_blank_one(tmp_path, metric, blank):
    """Trial30 T7: a query "\\u2060" was sent to the judge by Context and Conversational and scored
    (relation and quality maxims of an answer to no question), with no warning; a context of Khmer
    inherent vowels was judged by Context. Each judge metric declares the text fields its prompt needs
    (``requires``): a blank one is a dead letter naming the field, never a judge request. A blank
    *answer* is judged (what is scored; the reader warns empty_answer)."""
    import helpers
    from fair_forge_beam.metrics.context import Context
    from fair_forge_beam.metrics.conversational import Conversational
    from fair_forge_beam.schemas.conversational import DIMENSIONS

    cls, answer = {"context": (Context, {"score": 0.8, "insight": "fine"}),
                   "conversational": (Conversational, {**dict.fromkeys(DIMENSIONS, 7.0), "insight": "fine"})}[metric]
    shop = "We sell shoes."
    data = [helpers.ix("blankq", "bot", 0, "Yes we sell shoes.", context=shop, query=blank),
            helpers.ix("blanka", "bot", 0, "\u2060", context=shop, query="Do you sell shoes?"),
            helpers.ix("ok", "bot", 0, "Yes.", context=shop, query="Do you sell shoes?")]
    if metric == "context":
        data.append(helpers.ix("khmerctx", "bot", 0, "Yes.", context="\u17b4", query="Do you sell shoes?"))
    res, sent = _judged(cls, data, tmp_path, answer)
    assert len(sent) == 2 and [r["element_id"] for r in res["interactions"]] == ["blanka/bot/0", "ok/bot/0"], sent
    dead = sorted(res["dead_letter"], key=lambda d: d["element_id"])
    assert [d["element_id"] for d in dead] == ["blankq/bot/0"] + (["khmerctx/bot/0"] if metric == "context" else []), dead
    assert dead[0]["stage"] == metric and dead[0]["reason"].startswith("query is blank"), dead
    assert all(d["reason"].startswith("context is blank") for d in dead[1:]), dead
