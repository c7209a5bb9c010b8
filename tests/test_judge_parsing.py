"""Judge building blocks without a server: reasoning capture, JSON extraction, schema checks,
safe prompt rendering and the SQLite cache."""
from __future__ import annotations

import json
import multiprocessing
import pickle
import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from fair_forge_beam.components.judge.cache import SQLiteJudgeCache, cache_key, endpoint_identity
from fair_forge_beam.components.judge.parsing import (
    iter_json_objects,
    json_schema_response_format,
    parse_structured,
    resolve_schema,
    schema_instruction,
    schema_ref,
    split_reasoning,
)
from fair_forge_beam.components.judge.prompts import PromptTemplate, chat_messages


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    score: float = Field(ge=0, le=1)
    insight: str


# -- reasoning ---------------------------------------------------------------------------------
def test_think_blocks_are_captured_and_removed():
    reasoning, answer = split_reasoning('<think>step 1</think>Answer: {"score": 1}<THINK>step 2</THINK>')
    assert reasoning == "step 1\n\nstep 2"
    assert answer == 'Answer: {"score": 1}'


def test_orphan_closing_tag_means_reasoning_before_it():
    reasoning, answer = split_reasoning('I weigh it up.\n</think>\n{"score": 0.5}')
    assert reasoning == "I weigh it up."
    assert answer == '{"score": 0.5}'


def test_unclosed_think_is_reasoning_to_the_end():
    reasoning, answer = split_reasoning('{"a": 1} <think>I was cut o')
    assert reasoning == "I was cut o"
    assert answer == '{"a": 1}'


def test_no_reasoning():
    assert split_reasoning("plain") == ("", "plain")
    assert split_reasoning(None) == ("", "")


# -- JSON extraction ---------------------------------------------------------------------------
def test_first_object_in_prose_and_fences():
    text = 'Sure. ```json\n{"score": 0.7, "insight": "a {brace} inside"}\n``` and {"later": 1}'
    assert list(iter_json_objects(text)) == [{"score": 0.7, "insight": "a {brace} inside"}, {"later": 1}]


def test_nested_objects_are_one_candidate_and_broken_prefix_is_skipped():
    text = '{not json} then {"outer": {"inner": [1, {"x": 2}]}}'
    assert list(iter_json_objects(text)) == [{"outer": {"inner": [1, {"x": 2}]}}]


@given(st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=8), st.booleans()), max_size=4), st.text(alphabet="ab .:\n", max_size=20))
def test_any_embedded_object_is_found(obj, prose):
    assert next(iter_json_objects(prose + json.dumps(obj) + prose)) == obj


def test_parse_structured_never_picks_among_verdicts():
    # issue 13: the first object that validates is no longer taken; a verdict-shaped object that
    # does not validate makes the whole answer invalid, objects of other shapes are ignored
    obj, err = parse_structured('example {"score": 5} real {"score": 0.25, "insight": "ok"}', Verdict)
    assert obj is None and "score" in err
    obj, err = parse_structured('example {"other": 5} real {"score": 0.25, "insight": "ok"}', Verdict)
    assert err is None and obj.score == 0.25


def test_parse_structured_reports_why():
    obj, err = parse_structured('{"score": 7, "insight": "x"}', Verdict)
    # the reason names the field and the rule in plain words, never the schema's class (issue 28 B13)
    assert obj is None and "score" in err and "does not match the verdict schema" in err and "Verdict" not in err
    obj, err = parse_structured("no json here", Verdict)
    assert obj is None and err == "no JSON object found in the answer"


def test_schema_helpers():
    rf = json_schema_response_format(Verdict, strict=True)
    assert rf["type"] == "json_schema" and rf["json_schema"]["name"] == "Verdict" and rf["json_schema"]["strict"] is True
    assert rf["json_schema"]["schema"]["additionalProperties"] is False
    assert "JSON" in schema_instruction(Verdict) and '"score"' in schema_instruction(Verdict)
    assert resolve_schema(schema_ref(Verdict)) is Verdict
    assert resolve_schema("v", {"v": Verdict}) is Verdict
    assert resolve_schema(None) is None
    for bad in ("nope", "no.such.module:X", "json:dumps", 3):
        with pytest.raises(ValueError):
            resolve_schema(bad)


# -- prompts -----------------------------------------------------------------------------------
def test_user_text_with_braces_and_template_syntax_is_verbatim():
    tpl = PromptTemplate('Context: {{ context }}\nReply like {"score": 0.5}.', slots=["context"])
    nasty = '{"a": {b}} {{ evil }} {% for x in y %} {# c #} {0} %s'
    assert tpl.render(context=nasty) == f'Context: {nasty}\nReply like {{"score": 0.5}}.'


def test_template_slots_are_checked():
    with pytest.raises(ValueError, match="undeclared"):
        PromptTemplate("{{ a }} {{ b }}", slots=["a"])
    tpl = PromptTemplate("{{ a }}")
    assert tpl.slots == {"a"}
    with pytest.raises(ValueError, match="missing"):
        tpl.render()
    with pytest.raises(ValueError, match="unknown"):
        tpl.render(a=1, b=2)
    assert tpl.render(a=None) == ""
    assert pickle.loads(pickle.dumps(tpl)).render(a="x") == "x"


def test_sandbox_blocks_attribute_tricks():
    from fair_forge_beam.components.judge.prompts import TemplateRenderError

    # jinja2's SecurityError, as one line (a ValueError: a usage error on every command)
    with pytest.raises(TemplateRenderError, match="not allowed in a template"):
        PromptTemplate("{{ a.__class__.__mro__[1].__subclasses__() }}").render(a="")


def test_chat_messages_keep_history_verbatim():
    msgs = chat_messages("sys", "q {x}", history=[("user", "{earlier}"), ("assistant", '{"score": 1}')])
    assert msgs == (("system", "sys"), ("user", "{earlier}"), ("assistant", '{"score": 1}'), ("user", "q {x}"))
    with pytest.raises(ValueError):
        chat_messages(None, "q", history=[("tool", "x")])


# -- cache -------------------------------------------------------------------------------------
def test_endpoint_identity_is_the_endpoint_without_credentials_or_query(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    one = endpoint_identity("m", "http://127.0.0.1:8000/v1")
    assert one == "http://127.0.0.1:8000/v1|m"
    for same in ("HTTP://127.0.0.1:8000/v1/", "http://user:pw-SECRET@127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1?api-key=QSECRET"):
        assert endpoint_identity("m", same) == one, same
    for other in ("http://127.0.0.1:8001/v1", "https://127.0.0.1:8000/v1", "http://127.0.0.2:8000/v1", "http://127.0.0.1:8000/v2"):
        assert endpoint_identity("m", other) != one, other
    assert endpoint_identity("m2", "http://127.0.0.1:8000/v1") != one
    assert endpoint_identity("m", "http://[::1]/v1") == "http://[::1]:80/v1|m"
    assert endpoint_identity("m", None) == "https://api.openai.com:443/v1|m"  # the OpenAI client's default
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert endpoint_identity("m", None) == "http://127.0.0.1:9/v1|m"  # where the client then sends requests


def test_cache_key_covers_every_input():
    base = dict(model="m", messages=[("user", "hi")], params={"temperature": 0}, schema=Verdict.model_json_schema(), sample_index=0)
    k = cache_key(**base)
    assert len(k) == 64 and k == cache_key(**dict(base, params={"temperature": 0}))
    for change in (
        dict(model="m2"),
        dict(messages=[("user", "hi ")]),
        dict(messages=[("system", "hi")]),
        dict(params={"temperature": 0.1}),
        dict(schema=None),
        dict(sample_index=1),
    ):
        assert cache_key(**dict(base, **change)) != k, change


def test_cache_roundtrip_first_write_wins_and_wal(tmp_path):
    path = tmp_path / "sub" / "c.sqlite3"
    c = SQLiteJudgeCache(str(path))
    assert c.get("k") is None and len(c) == 0
    c.put("k", {"raw": "a", "parsed": {"x": 1}})
    c.put("k", {"raw": "b"})
    assert c.get("k") == {"raw": "a", "parsed": {"x": 1}} and "k" in c and len(c) == 1
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode.lower() == "wal"
    assert c.delete(["k", "zz"]) == 1 and c.get("k") is None
    c.close()


def _writer(path, start, n):
    c = SQLiteJudgeCache(path)
    for i in range(start, start + n):
        c.put(f"k{i}", {"i": i})
    c.close()


def test_cache_is_safe_with_several_processes(tmp_path):
    path = str(tmp_path / "shared.sqlite3")
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    procs = [ctx.Process(target=_writer, args=(path, 0 if j % 2 == 0 else 100, 100)) for j in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    c = SQLiteJudgeCache(path)
    assert len(c) == 200 and c.get("k150") == {"i": 150}


@pytest.mark.parametrize("bomb", ["[" * 200_000, '{"a":' * 80_000, "[" * 999 + "1," * 190_000, ("[" * 500 + "1," * 300) * 200])
def test_reading_any_text_for_json_is_bounded(bomb, monkeypatch):
    """A judged answer or a reply made of nesting or unclosed values by the hundred thousand:
    before, a decode was tried at every bracket, each reading deep or to the end (21 s for one
    200,000-character answer). Counted in decoder calls, not seconds: at most a few per
    thousand characters once the bound is hit, and a verdict before the bomb is still read."""
    from fair_forge_beam.components.judge import parsing
    from fair_forge_beam.components.judge.prompts_quality import context_messages

    calls = [0]
    real = parsing._STRICT_DECODER

    class Counting(json.JSONDecoder):
        def raw_decode(self, s, idx=0):
            calls[0] += 1
            return real.raw_decode(s, idx)

    monkeypatch.setattr(parsing, "_STRICT_DECODER", Counting())
    parsing.quoted_json(context_messages("ctx", "q", bomb, None))
    obj, why = parsing.parse_verdict('{"score": 0.2, "insight": "x"} ' + bomb, Verdict)
    assert why is None and obj.score == 0.2
    assert calls[0] <= 2_000, calls[0]


def test_a_generators_reply_is_named_in_its_own_words():
    """trial39b B11: a generator's reply was said to hold "a list of verdicts" that are "never scored", a JSON object
    of another shape was "no JSON object found", and an unknown key went raw (escape codes, a newline) and whole
    (300 characters) into the reason."""
    from fair_forge_beam.components.judge import parsing
    from fair_forge_beam.generators.schemas import GeneratedQueriesOutput as Reply

    said = {name: parsing.parse_verdict(text, Reply, role="generator", **extra)[1] for name, (text, extra) in {
        "structured list": ('[{"queries": ["a"]}]', {"structured": True}),
        "text list": ('here: [{"queries": ["a"]}]', {}),
        "other shape": ('{"questions": ["a"]}', {}),
        "cut": ('{"queries": ["a"]}', {"finish_reason": "length"}),
        "escapes": (json.dumps({"queries": [], "chunk_summary": "s", "a\x1b[31mRED\nX": 1}), {}),
        "long key": (json.dumps({"queries": [], "chunk_summary": "s", "k" * 300: 1}), {}),
    }.items()}
    for name, why in said.items():
        assert why and "verdict" not in why and "scored" not in why and "no JSON object found" not in why, (name, why)
    assert said["structured list"].startswith("the generator's reply is a list of objects"), said
    assert said["other shape"].startswith("the generator's reply: ") and "questions: is not a field" in said["other shape"]
    assert "cut replies are never used" in said["cut"], said
    assert "\x1b" not in said["escapes"] and "\n" not in said["escapes"] and "a\\x1b[31mRED\\nX: is not a field" in said["escapes"]
    assert "k" * 41 not in said["long key"] and "(300 characters): is not a field" in said["long key"], said
    # a judge's words are as they were
    assert parsing.parse_verdict('[{"score": 1}]', Verdict, structured=True)[1] == "answer is a list of verdicts, not one JSON object"
