"""Issue 28, hostile trial 2: masking covers every spelling of a key and every text that leaves a
parser, and it never rewrites a name.

* A judge that echoes the key with each character JSON-escaped (``\\u0073\\u006b…``): the verdict
  parser decoded it, and the clear key reached the verdict's ``parsed`` fields, the judge cache
  and ``stats/sessions`` (whose writer did not mask); results.parquet showed ``k=***``.
* A key split across log-probability tokens whose top alternatives spell it too.
* ``--judge-api-key-env K`` with ``K=assistant_id``: the console printed ``***=bot-a`` and a gate
  ``… in every assistant_id`` found no slice (exit 3).
"""
from __future__ import annotations

import glob
import json
import secrets

import pytest
from pydantic import BaseModel, ConfigDict, Field

from helpers import FNAPI
from fair_forge_beam.testing.openai_server import Reply, ScriptedOpenAIServer

ENV = "FFB_TEST_DECODED_KEY"


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    score: float = Field(ge=0, le=1)
    insight: str


def _escaped(key: str, every: int = 1, upper: bool = False) -> str:
    """``key`` with every ``every``-th character as a JSON ``\\uXXXX`` escape."""
    return "".join((("\\u%04X" if upper else "\\u%04x") % ord(c)) if i % every == 0 else c for i, c in enumerate(key))


def _parquet_text(root) -> str:
    import pyarrow.parquet as pq

    return "\n".join(json.dumps(pq.read_table(f).to_pylist(), default=str, ensure_ascii=False)
                     for f in glob.glob(f"{root}/**/*.parquet", recursive=True))


def _isolated_secret_registry(monkeypatch):
    from fair_forge_beam.io import secrets as sec

    monkeypatch.setattr(sec, "_ENVS", set())
    monkeypatch.setattr(sec, "_ENVS_SNAPSHOT", frozenset())
    monkeypatch.delenv(sec.NAMES_ENV, raising=False)


def _one_verdict(answer):
    """The verdict of one judge call answered by ``answer`` (a scripted server), no cache."""
    from fair_forge_beam.components.judge import OpenAIJudgeHandler, judge_request

    with ScriptedOpenAIServer(answer) as srv:
        handler = OpenAIJudgeHandler("jm", srv.base_url, api_key_env=ENV, cache_path=None, num_retries=0,
                                     client_retries=0, invalid_answer_retries=0, structured_output="text")
        client = handler.create_client()
        [verdict] = handler.request([judge_request("v", [("user", "[verdict]")], schema=Verdict, element_id="e0")], client)
        client.close()
    return verdict


def test_every_json_spelling_of_the_key_is_masked_as_text_and_after_decoding():
    from fair_forge_beam.io.secrets import scrub, scrub_tokens

    key = "sk-ffb-" + secrets.token_hex(8) + "/x"
    for spelled in (_escaped(key), _escaped(key, upper=True), _escaped(key, every=2), _escaped(key, every=3)):
        doc = '{"score": 1.0, "insight": "k=' + spelled + '"}'
        masked = scrub(doc, [key])
        assert json.loads(masked)["insight"] == "k=***", spelled
    nested = json.dumps(json.dumps({"insight": key}, ensure_ascii=True).replace("f", "\\u0066"))  # JSON in a JSON string
    assert key not in json.loads(json.loads(scrub(nested, [key])))["insight"]
    assert scrub({"parsed": {"insight": f"k={key}"}}, [key]) == {"parsed": {"insight": "k=***"}}
    # split across tokens, one piece escaped
    assert scrub_tokens(["a ", key[:4], _escaped(key[4:9]), key[9:], " b"], [key]) == ["a ", "***", "***", "***", " b"]


def test_a_judge_echoing_the_key_escaped_leaves_it_nowhere(tmp_path, monkeypatch):
    """Each character of the key escaped in the verdict, in the reasoning, in a free-text (guardian /
    generator) answer; split across logprob tokens whose alternatives spell it too. Results, the
    cache (its ``parsed`` field) and a second read from the cache hold only ``***``."""
    from fair_forge_beam.components.judge import OpenAIJudgeHandler, judge_request
    from fair_forge_beam.components.judge.cache import SQLiteJudgeCache

    key = "sk-ffb-" + secrets.token_hex(16)
    monkeypatch.setenv(ENV, key)

    def answer(req):
        if "[free]" in req.prompt:
            return Reply(content="free text k=" + _escaped(key, every=2))
        pieces = [key[:5], key[5:12], key[12:]]
        return Reply(content='{"score": 1.0, "insight": "k=' + _escaped(key) + '"}',
                     reasoning_content="saw " + _escaped(key, every=3),
                     logprobs={"content": [{"token": t, "logprob": -0.1, "bytes": None,
                                            "top_logprobs": [{"token": t, "logprob": -0.1, "bytes": None},
                                                             {"token": t.upper(), "logprob": -3.0, "bytes": None}]}
                                           for t in ("k=", *pieces, " end")]})

    cache = tmp_path / "cache.sqlite3"
    with ScriptedOpenAIServer(answer) as srv:
        handler = OpenAIJudgeHandler("jm", srv.base_url, api_key_env=ENV, cache_path=str(cache), num_retries=0,
                                     client_retries=0, invalid_answer_retries=0, structured_output="text")
        reqs = [judge_request("v", [("user", "[verdict]")], schema=Verdict, element_id="e0"),
                judge_request("f", [("user", "[free]")], schema=None, element_id="e1")]
        client = handler.create_client()
        first = handler.request(reqs, client)
        again = handler.request(reqs, client)
        client.close()
        assert srv.authorizations[f"Bearer {key}"] == 2
    verdict, free = first
    assert verdict.error is None and verdict.parsed == {"score": 1.0, "insight": "k=***"}
    assert free.answer == "free text k=***"
    assert [t["token"] for t in verdict.logprobs["content"]] == ["k=", "***", "***", "***", " end"]
    assert all(t["token"] == "***" for it in verdict.logprobs["content"][1:4] for t in it["top_logprobs"])
    assert all(r.cached for r in again) and again[0].parsed == verdict.parsed
    for r in (*first, *again):
        text = json.dumps(r._asdict(), default=str)
        assert key not in text and key[:5] not in text and _escaped(key[5:12]) not in text, r.key
    import sqlite3

    with sqlite3.connect(str(cache)) as conn:  # every stored entry, decoded: its parsed verdict included
        values = [json.loads(v) if v.lstrip().startswith("{") else v for (v,) in conn.execute("SELECT value FROM answers")]
    assert len(values) == 2
    decoded = json.dumps(values, ensure_ascii=False)
    assert key not in decoded and "k=***" in decoded
    raw = b"".join(f.read_bytes() for f in tmp_path.glob("cache.sqlite3*"))
    assert key.encode() not in raw and _escaped(key).encode() not in raw


@pytest.mark.parametrize("secret_value", ["assistant_id", None])
def test_a_key_equal_to_a_name_masks_values_never_names(tmp_path, monkeypatch, capsys, secret_value):
    """The key is ``assistant_id`` (a slice dimension) or a random one; the judge echoes it escaped.
    Slice names, the console table, the report, the gate ``in every assistant_id`` and the Parquet
    slice names keep the name; the echoed key is masked in every output, stats included."""
    from pipelines import audit

    _isolated_secret_registry(monkeypatch)
    key = secret_value or "sk-ffb-" + secrets.token_hex(16)
    monkeypatch.setenv(ENV, key)
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({
        "session_id": f"s{i}", "assistant_id": f"bot-{'ab'[i % 2]}", "language": "english", "context": "Tickets cost 30 EUR.",
        "conversation": [{"qa_id": "q1", "query": "A ticket?", "assistant": "30 EUR.", "ground_truth_assistant": "30 EUR."}]})
        + "\n" for i in range(3)), encoding="utf-8")

    def answer(req):
        return '{"score": 0.8, "insight": "k=' + _escaped(key) + '"}'

    out = tmp_path / "out"
    with ScriptedOpenAIServer(answer) as srv:
        audit.run(["--input", str(data), "--output", str(out), "--metrics", "context", "--judge-base-url", srv.base_url,
                   "--judge-model", "jm", "--judge-api-key-env", ENV, "--judge-cache", str(tmp_path / "cache.sqlite3"),
                   "--judge-retries", "0", f"--runner={FNAPI}",
                   "--gate", "context context_awareness mean >= 0.5 in every assistant_id"])
    console = capsys.readouterr().out
    assert "assistant_id=bot-a" in console and "***=" not in console
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert {s["slice"] for s in doc["metrics"]["context"]["slices"]} == {
        "overall", "assistant_id=bot-a", "assistant_id=bot-b", "language=english"}
    assert json.loads((out / "gates.json").read_text(encoding="utf-8"))["passed"]
    assert "assistant_id=bot-a" in (out / "report.html").read_text(encoding="utf-8")
    parquet = _parquet_text(out)
    assert "assistant_id=bot-a" in parquet and "k=***" in parquet
    assert parquet.count("k=***") >= 3  # the sessions' verdicts and the stored session statistics
    if secret_value is None:  # a real key: nowhere, in no spelling
        everything = parquet + "".join(p.read_text(encoding="utf-8", errors="replace")
                                       for p in out.rglob("*") if p.is_file() and p.suffix != ".parquet")
        assert key not in everything and _escaped(key) not in everything
        assert "k=***" in _parquet_text(out / "stats")
    else:  # the name is kept, the echoed value is masked
        assert f"k={key}" not in parquet


def test_a_key_spelt_out_or_in_another_case_is_masked_and_ordinary_words_are_not():
    """Issue 28 leftover: a key echoed with spaces between its characters or in another case was
    not masked. A secret of LOOSE_SECRET_LEN characters or more is now masked in any case and with
    whitespace (plain or JSON-escaped) between its characters; ordinary text around it, and a shorter
    secret's loose spellings (it may be a word), are left as they are."""
    from fair_forge_beam.io.secrets import LOOSE_SECRET_LEN, scrub

    key = "sk-ffb-" + secrets.token_hex(16)
    assert len(key) >= LOOSE_SECRET_LEN
    chunks = " ".join(key[i:i + 4] for i in range(0, len(key), 4))
    for spelled in (key.upper(), key.title(), " ".join(key), " ".join(key.upper()), "\n".join(key), "  ".join(key),
                    "\t".join(key.swapcase()), chunks):
        assert scrub(f"your key is {spelled} - keep it", [key]) == "your key is *** - keep it", spelled
        doc = json.dumps({"insight": "k=" + spelled})  # the spaced key as JSON text (\n, \t escaped)
        assert json.loads(scrub(doc, [key]))["insight"] == "k=***", doc
        assert scrub({"parsed": {"insight": spelled}}, [key]) == {"parsed": {"insight": "***"}}
    digits = "".join(sorted(set(c for c in key if not c.isalpha())))
    ordinary = [f"the key starts with sk and ffb, then {digits}", "SK-FFB is a prefix", "s k - f f b", key[:-1].upper() + "?"]
    for text in ordinary:
        assert scrub(text, [key]) == text
    assert scrub("Pass word, PASSWORD, password", ["password"]) == "Pass word, PASSWORD, ***"  # 8 characters: as written only


def test_a_judge_spelling_the_key_out_leaves_it_nowhere(tmp_path, monkeypatch):
    key = "sk-ffb-" + secrets.token_hex(16)
    monkeypatch.setenv(ENV, key)

    def answer(req):
        return Reply(content='{"score": 1.0, "insight": "k=' + "\\n".join(key.upper()) + '"}',
                     reasoning_content="the key is " + " ".join(key))

    verdict = _one_verdict(answer)
    assert verdict.error is None and verdict.parsed == {"score": 1.0, "insight": "k=***"}, verdict
    text = json.dumps(verdict._asdict(), default=str)
    assert "k=***" in text and "the key is ***" in text and " ".join(key) not in text


def test_a_key_joined_by_zero_width_characters_is_masked():
    """Hostile-tester trial 3: a key with zero-width joiners between its characters reached the Parquet
    results and the judge cache. Invisible joiners (plain or \\uXXXX-escaped) now count as gaps of a
    loose spelling; other encodings (base64, hex, %-encoding, HTML entities) are documented as not masked."""
    import base64

    from helpers import REPO
    from fair_forge_beam.io.secrets import scrub

    key = "sk-ffb-" + secrets.token_hex(16)
    for joiner in ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u200b "):
        joined = joiner.join(key)
        assert scrub(f"key {joined}!", [key]) == "key ***!", repr(joiner)
        assert json.loads(scrub(json.dumps({"a": joined}), [key])) == {"a": "***"}  # ensure_ascii: \u200b escapes
        assert scrub({"a": [joined.upper()]}, [key]) == {"a": ["***"]}
    assert scrub("a\u200bb and \u200d" + key[:10], [key]) == "a\u200bb and \u200d" + key[:10]
    text = (REPO / "docs" / "reliability.md").read_text(encoding="utf-8")
    for named in ("base64", "hex", "percent-encoding", "HTML numeric entities", "zero-width"):
        assert named in text, named
    assert scrub(base64.b64encode(key.encode()).decode(), [key]) != "***"  # documented: not masked


#: the separators of hostile-tester trial 28 (B6) that reached results.parquet, stats/ and the judge cache
TRIAL28_SEPARATORS = ("\u2062", "\u2063", "\u180e", "\u034f", "\u200e", "\u202c", "\ufe0f", "\U000e0020")


def test_a_key_joined_by_any_invisible_character_is_masked():
    """Trial 28 (B6): only six hand-listed joiners counted as gaps; the class is every default-ignorable
    character, derived here independently from unicodedata: every format character (Cf) of every plane,
    every variation selector, the combining grapheme joiner, the Hangul fillers, the tags block."""
    import sys
    import unicodedata

    from fair_forge_beam.io import secrets as S

    key = "sk-ffb-" + secrets.token_hex(16)
    every = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF and not chr(c).isspace()
             and (unicodedata.category(chr(c)) == "Cf" or "VARIATION SELECTOR" in unicodedata.name(chr(c), "")
                  or unicodedata.name(chr(c), "") in ("COMBINING GRAPHEME JOINER", "HANGUL FILLER",
                                                         "HALFWIDTH HANGUL FILLER", "MONGOLIAN VOWEL SEPARATOR"))]
    assert set(TRIAL28_SEPARATORS) <= set(every) and len(every) > 400
    missed = []
    for sep in every:
        joined = sep.join(key)
        if (S.scrub(f"key {joined}!", [key]) != "key ***!"
                or json.loads(S.scrub(json.dumps({"a": joined}), [key])) != {"a": "***"}  # \uXXXX escapes
                or S.scrub(json.dumps({"a": joined}, ensure_ascii=False), [key]) != '{"a": "***"}'
                or S.scrub([joined.upper()], [key]) != ["***"]):
            missed.append(f"U+{ord(sep):04X}")
    assert missed == [], missed
    # the planes scanned are every plane that holds one
    assert S._invisibles() == S._invisibles((range(0, sys.maxunicode + 1),))
    # an invisible character in ordinary text is left alone, and so is a part of the key
    for sep in TRIAL28_SEPARATORS:
        text = f"caf\u00e9{sep}ok and {sep.join(key[:12])}"
        assert S.scrub(text, [key]) == text


def test_every_default_ignorable_code_point_is_a_gap_of_a_loosely_spelt_key():
    """Trial30 T1, the masker's member of the class: its gaps were derived from unicodedata's categories
    and names, which miss U+2065 and U+FFF0-FFF8 (default-ignorable, unassigned: a renderer shows
    nothing). Every Default_Ignorable_Code_Point that is not whitespace is a gap."""
    import regex

    from fair_forge_beam.io import secrets as S

    prop = regex.compile(r"\p{Default_Ignorable_Code_Point}")
    every = {chr(c) for c in range(0x110000) if prop.fullmatch(chr(c)) and not chr(c).isspace()}
    assert not every - set(S._invisibles()), sorted(hex(ord(c)) for c in every - set(S._invisibles()))[:20]
    key = "sk-ffb-" + secrets.token_hex(16)
    for sep in ("\u2065", "\ufff0", "\ufff8", "\u17b4"):
        assert S.scrub(f"key {sep.join(key)}!", [key]) == "key ***!", hex(ord(sep))


@pytest.mark.parametrize("sep", TRIAL28_SEPARATORS, ids=lambda s: f"U+{ord(s):04X}")
def test_a_judge_joining_the_key_by_an_invisible_character_leaves_it_nowhere(sep, monkeypatch):
    key = "sk-ffb-" + secrets.token_hex(16)
    monkeypatch.setenv(ENV, key)

    def answer(req):
        return Reply(content='{"score": 1.0, "insight": "k=' + sep.join(key) + '"}', reasoning_content="key " + sep.join(key))

    verdict = _one_verdict(answer)
    assert verdict.error is None and verdict.parsed == {"score": 1.0, "insight": "k=***"}, verdict
    text = json.dumps(verdict._asdict(), default=str, ensure_ascii=False)
    assert sep.join(key) not in text and "key ***" in text


def _loose_key_in(text: str, key: str) -> bool:
    """Whether ``text``, its ``\\uXXXX`` escapes decoded and every separator (whitespace, invisible
    characters, two-character escapes) dropped, holds ``key`` in any case (the trial's deep scan)."""
    import re
    import unicodedata

    text = re.sub(r"\\+u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
    text = re.sub(r"\\+[nrtf]", "", text)
    kept = "".join(c for c in text if not (c.isspace() or unicodedata.category(c) in ("Cf", "Mn", "Zs", "Cc")))
    return key.lower() in kept.lower()


def _every_whitespace() -> list:
    import sys

    return [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]


def test_a_key_joined_by_any_escaped_separator_is_masked():
    """Trial 28b (B6): a key with ``\\u00a0``, ``\\u2003``, ``\\u3000`` or ``\\u0085`` escapes between its
    characters was not masked (raw whitespace was a gap, escaped whitespace was not). Every separator —
    every whitespace character of every plane and every invisible one — raw, escaped in lower- and
    upper-case hex, and behind a doubled backslash (JSON in a JSON string)."""
    from fair_forge_beam.io import secrets as S

    key = "sk-ffb-" + secrets.token_hex(16)
    seps = _every_whitespace() + list(S._invisibles())
    assert {"\u00a0", "\u2003", "\u3000", "\u0085", "\u2028", "\u1680", "\x1c"} <= set(seps)
    missed = []
    for sep in seps:
        lower = "\\u%04x" % ord(sep) if ord(sep) <= 0xFFFF else json.dumps(sep)[1:-1]
        for spelled in (sep.join(key), lower.join(key), lower.upper().replace("\\U", "\\u").join(key),
                        lower.replace("\\", "\\\\").join(key)):
            doc = '{"a": "k=' + spelled + '!"}'
            if S.scrub(doc, [key]) != '{"a": "k=***!"}':
                missed.append((f"U+{ord(sep):04X}", spelled[:12]))
    assert missed == [], missed[:20]
    assert S.scrub("\\f".join(key), [key]) == "***"
    # the planes scanned hold every whitespace character
    assert S._spaces() == "".join(_every_whitespace())
    # a separator in ordinary text is left alone, and so is a part of the key
    text = "caf\\u00e9\\u00a0ok and " + "\\u3000".join(key[:12])
    assert S.scrub(text, [key]) == text


@pytest.mark.parametrize("sep", ["\u00a0", "\u2003", "\u3000", "\u0085"], ids=lambda s: f"U+{ord(s):04X}")
def test_a_judge_joining_the_key_by_escaped_spaces_leaves_it_out_of_the_cache(sep, tmp_path, monkeypatch):
    """Trial 28b (B6): the reply ``{"insight": "s\\u00a0k\\u00a0-…"}`` (each separator escaped): the parsed
    insight was masked, the cache's ``answer`` and ``raw`` kept the key. Every stored text, decoded and
    with separators dropped, holds no key."""
    import sqlite3

    from fair_forge_beam.components.judge import OpenAIJudgeHandler, judge_request

    key = "sk-ffb-" + secrets.token_hex(16)
    monkeypatch.setenv(ENV, key)
    reply = json.dumps({"score": 1.0, "insight": sep.join(key)})  # ensure_ascii: \uXXXX escapes
    assert "\\u" in reply

    cache = tmp_path / "cache.sqlite3"
    with ScriptedOpenAIServer(lambda req: Reply(content=reply, reasoning_content=reply.upper())) as srv:
        handler = OpenAIJudgeHandler("jm", srv.base_url, api_key_env=ENV, cache_path=str(cache), num_retries=0,
                                     client_retries=0, invalid_answer_retries=0, structured_output="text")
        client = handler.create_client()
        [verdict] = handler.request([judge_request("v", [("user", "[verdict]")], schema=Verdict, element_id="e0")], client)
        client.close()
    assert verdict.error is None and verdict.parsed == {"score": 1.0, "insight": "***"}, verdict
    assert not _loose_key_in(json.dumps(verdict._asdict(), default=str), key)
    with sqlite3.connect(str(cache)) as conn:
        rows = [v for (v,) in conn.execute("SELECT value FROM answers")]
    assert len(rows) == 1
    stored = json.loads(rows[0])
    for field in ("answer", "raw", "reasoning"):
        assert stored[field] and not _loose_key_in(stored[field], key), (field, stored[field][:80])
    assert not _loose_key_in(rows[0], key)


def test_a_key_split_across_a_positions_alternatives_or_a_replys_texts_is_stored_nowhere(tmp_path, monkeypatch):
    """trial30 T10: the guardian answers ``safe`` and the key, cut in three, stands among the first
    position's ``top_logprobs`` alternatives (in order, in reverse order, or one piece per position);
    and a reply that is no answer (a tool call) holds the key split across its texts (tool-call
    arguments, a refusal, logprob tokens). Nothing stored (cache, results, dead-letter raw) holds a
    piece of the key; the certainty (the safe/unsafe alternatives) is read as before."""
    import math
    import sqlite3

    from fair_forge_beam.components.guardian import unsafe_label_probability
    from fair_forge_beam.components.judge import OpenAIJudgeHandler, judge_request

    key = "sk-trial30-SECRET-" + secrets.token_hex(6)
    pieces = [key[:7], key[7:18], key[18:]]
    monkeypatch.setenv(ENV, key)

    def alt(t, lp=-5.0):
        return {"token": t, "logprob": lp, "bytes": [ord(c) for c in t]}

    def top(*extra):
        return [alt("safe", math.log(0.7)), alt("unsafe", math.log(0.3)), *map(alt, extra)]

    shapes = {
        "[order]": [{**alt("safe", math.log(0.7)), "top_logprobs": top(*pieces)}],
        "[reverse]": [{**alt("safe", math.log(0.7)), "top_logprobs": top(*reversed(pieces))}],
        "[scatter]": [{**alt("safe", math.log(0.7)), "top_logprobs": top(pieces[2])},
                      {**alt("\n"), "top_logprobs": [alt("\n"), alt("x"), alt(pieces[0])]},
                      {**alt("."), "top_logprobs": [alt(pieces[1])]}],
    }
    tool_body = json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "g", "choices": [{
        "index": 0, "finish_reason": "tool_calls", "logprobs": {"content": [{**alt("x"), "top_logprobs": top(*pieces)}]},
        "message": {"role": "assistant", "content": None, "refusal": pieces[1],
                    "tool_calls": [{"id": f"t{i}", "type": "function", "function": {"name": "f", "arguments": p}}
                                   for i, p in enumerate(pieces)]}}]}).encode()

    def answer(req):
        if "[tool]" in req.prompt:
            return Reply(body=tool_body)
        return Reply(content="safe", logprobs={"content": next(v for k, v in shapes.items() if k in req.prompt)})

    cache = tmp_path / "cache.sqlite3"
    with ScriptedOpenAIServer(answer) as srv:
        handler = OpenAIJudgeHandler("g", srv.base_url, api_key_env=ENV, cache_path=str(cache), num_retries=0,
                                     client_retries=0, invalid_answer_retries=0, params={"logprobs": True, "top_logprobs": 5})
        reqs = [judge_request(k, [("user", k)], schema=None, element_id=k) for k in (*shapes, "[tool]")]
        client = handler.create_client()
        first = handler.request(reqs, client)
        again = handler.request(reqs[:3], client)
        client.close()
    assert all(r.cached for r in again)
    for r in (*first[:3], *again):
        assert r.error is None and r.answer == "safe"
        assert unsafe_label_probability(r.logprobs, "unsafe", "safe") == pytest.approx(0.3)
    assert first[3].error and first[3].raw
    with sqlite3.connect(str(cache)) as conn:
        stored = [v for (v,) in conn.execute("SELECT value FROM answers")]
    assert len(stored) == 3
    texts = [*stored, *(json.dumps(r._asdict(), default=str) for r in (*first, *again))]
    for text in texts:
        for piece in pieces:
            assert piece not in text, (piece, text[:300])
    raw = b"".join(f.read_bytes() for f in tmp_path.glob("cache.sqlite3*"))
    assert not any(p.encode() in raw for p in pieces)
