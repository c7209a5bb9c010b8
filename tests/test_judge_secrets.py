"""The API key is read from the environment on the worker and never appears in the pickled
handler or DoFn, the pipeline graph, any output file (results, dead letters, cache) or any log
record — even when the server echoes it back in errors."""
from __future__ import annotations

import json
import logging
import pickle
import secrets

import pytest

from apache_beam.internal import pickler
from apache_beam.ml.inference.base import RunInference
from pydantic import BaseModel, ConfigDict, Field

from helpers import FNAPI, fnapi_pipeline
from fair_forge_beam._beam import beam
from fair_forge_beam.components.judge import OpenAIJudgeHandler, RunJudge, judge_request
from fair_forge_beam.io.write import read_jsonl_shards, write_jsonl
from fair_forge_beam.testing.openai_server import Fault, Reply, ScriptedOpenAIServer

ENV = "FFB_TEST_JUDGE_KEY"


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    score: float = Field(ge=0, le=1)
    insight: str


def test_api_key_never_leaks(tmp_path, monkeypatch, caplog):
    key = "sk-ffb-" + secrets.token_hex(16)
    monkeypatch.setenv(ENV, key)
    caplog.set_level(logging.DEBUG)

    def answer(req):
        if "[deny]" in req.prompt:
            return Reply(status=401, content=f"Incorrect API key provided: {key}")
        if "[echo]" in req.prompt:
            return Reply(status=400, content=f"bad request from {key}")
        if "[leak]" in req.prompt:
            return Reply(content=f"not json, but the key {key}")
        return {"score": 0.5, "insight": "ok"}

    faults = [Fault("rate_limit", match="[rl]", attempts={1}, retry_after="0.01"), Fault("server_error", match="[boom]", retry_after="0.01")]
    texts = ["fine", "[deny]", "[echo]", "[leak]", "[rl]", "[boom]"] + [f"more {i}" for i in range(6)]
    reqs = [judge_request(f"k{i}", [("user", t)], element_id=f"e{i}") for i, t in enumerate(texts)]
    with ScriptedOpenAIServer(answer, faults=faults) as srv:
        handler = OpenAIJudgeHandler(
            "judge-model", srv.base_url, api_key_env=ENV, output_schema=Verdict, cache_path=str(tmp_path / "cache.sqlite3"),
            num_retries=0, client_retries=1,
        )
        blobs = [pickle.dumps(handler), pickler.dumps(handler), pickler.dumps(RunInference(handler))]

        p = fnapi_pipeline()
        out = p | beam.Create(reqs) | RunJudge(handler)
        write_jsonl(out.results, str(tmp_path / "out" / "results"), "Results")
        write_jsonl(out.dead_letters, str(tmp_path / "out" / "dead"), "Dead")
        blobs.append(p.to_runner_api().SerializeToString())
        p.run().wait_until_finish()
        client = handler.create_client()  # the handler stays key-free after a client exists
        blobs += [pickle.dumps(handler), pickler.dumps(handler)]
        assert srv.authorizations[f"Bearer {key}"] == srv.count() > len(texts)  # the key was sent
        client.close()

    for blob in blobs:
        assert key.encode() not in blob

    results = read_jsonl_shards(str(tmp_path / "out" / "results"))
    dead = read_jsonl_shards(str(tmp_path / "out" / "dead"))
    assert len(results) + len(dead) == len(texts)
    reasons = {d["element_id"]: d["reason"] for d in dead}
    assert reasons["e1"].startswith("HTTP 401: authentication failed") and ENV in reasons["e1"]
    assert "***" in reasons["e2"] and "***" in {d["element_id"]: d["raw"] for d in dead}["e3"]

    files = [f for f in tmp_path.rglob("*") if f.is_file()]
    assert any(f.name.startswith("cache.sqlite3") for f in files)
    for f in files:
        assert key.encode() not in f.read_bytes(), f

    assert caplog.records, "expected some log records (retries, errors)"
    for rec in caplog.records:
        text = rec.getMessage() + (rec.exc_text or "") + str(rec.args)
        if rec.exc_info:
            text += logging.Formatter().formatException(rec.exc_info)
        assert key not in text, (rec.name, rec.levelname)


# ---------------------------------------------------------------- issue 13 item 4: a key echoed in a 200 answer
def test_key_echoed_in_200_answers_is_scrubbed_at_the_root(tmp_path, monkeypatch):
    """The endpoint echoes the key inside successful answers: in the verdict's text, in the
    reasoning, in logprob tokens, JSON-escaped, and in answers that fail validation. No result,
    dead letter or cache entry holds it; the verdicts themselves are still read."""
    key = "sk-ffb-" + secrets.token_hex(16) + "/x"
    monkeypatch.setenv(ENV, key)
    escaped = key.replace("/", "\\/")

    def answer(req):
        if "[insight]" in req.prompt:
            return {"score": 0.5, "insight": f"your key is {key}"}
        if "[escaped]" in req.prompt:
            return '{"score": 0.25, "insight": "key ' + escaped + '"}'
        if "[reasoning]" in req.prompt:
            return Reply(content='{"score": 0.75, "insight": "ok"}', reasoning_content=f"I saw {key}",
                         logprobs={"content": [{"token": key, "logprob": -0.1, "bytes": None, "top_logprobs": [{"token": key, "logprob": -0.1, "bytes": None}]}]
                                   + [{"token": t, "logprob": -0.2, "bytes": None, "top_logprobs": []}  # the key split across tokens
                                      for t in ("ok ", key[:5], key[5:15], key[15:], " end")]})
        if "[invalid]" in req.prompt:
            return {"score": 3.0, "insight": f"bad and {key}"}
        return Reply(content=f"free text with {key}")

    texts = ["[insight]", "[escaped]", "[reasoning]", "[invalid]"]
    reqs = [judge_request(f"k{i}", [("user", t)], schema=Verdict, element_id=f"e{i}") for i, t in enumerate(texts)]
    reqs.append(judge_request("free", [("user", "[free]")], schema=None, element_id="free"))
    with ScriptedOpenAIServer(answer) as srv:
        handler = OpenAIJudgeHandler("judge-model", srv.base_url, api_key_env=ENV, cache_path=str(tmp_path / "cache.sqlite3"),
                                     num_retries=0, client_retries=0, invalid_answer_retries=0)
        p = fnapi_pipeline()
        out = p | beam.Create(reqs) | RunJudge(handler)
        write_jsonl(out.results, str(tmp_path / "out" / "results"), "Results")
        write_jsonl(out.dead_letters, str(tmp_path / "out" / "dead"), "Dead")
        p.run().wait_until_finish()
        client = handler.create_client()
        again = handler.request(reqs, client)  # from the cache
        client.close()
    for f in [f for f in tmp_path.rglob("*") if f.is_file()]:
        data = f.read_bytes()
        assert key.encode() not in data and escaped.encode() not in data, f
    results = {r["key"]: r for r in read_jsonl_shards(str(tmp_path / "out" / "results"))}
    dead = read_jsonl_shards(str(tmp_path / "out" / "dead"))
    assert sorted(results) == ["free", "k0", "k1", "k2"] and [d["element_id"] for d in dead] == ["e3"]
    assert results["k0"]["parsed"] == {"score": 0.5, "insight": "your key is ***"}
    assert results["k1"]["parsed"]["score"] == 0.25 and results["k2"]["parsed"]["score"] == 0.75
    assert "***" in results["k2"]["reasoning"] and results["k2"]["logprobs"]["content"][0]["token"] == "***"
    assert [t["token"] for t in results["k2"]["logprobs"]["content"][1:]] == ["ok ", "***", "***", "***", " end"]
    assert results["free"]["answer"] == "free text with ***"
    assert all(r.cached for r in again if r.error is None) and not any(key in repr(r) for r in again)


@pytest.mark.slow
def test_key_echoed_by_judge_and_guardian_never_reaches_main_job_outputs(tmp_path, monkeypatch, capsys):
    """Main job (context, conversational, bias) against endpoints that echo the key in 200 answers
    and in invalid ones: no output file, no cache and no stdout line holds it."""
    from pipelines import audit

    key = "sk-ffb-" + secrets.token_hex(16)
    monkeypatch.setenv(ENV, key)
    sessions = [{"session_id": "s1", "assistant_id": "bot", "language": "english", "context": "Tickets.",
                 "conversation": [{"qa_id": "1", "query": "A ticket?", "assistant": "30 EUR.", "ground_truth_assistant": "30 EUR."},
                                  {"qa_id": "2", "query": "Back?", "assistant": "Women cannot travel. [bad]", "ground_truth_assistant": "30 EUR."}]}]

    def answer(req):
        schema = json.dumps(req.json_schema or {})
        bad = "[bad]" in req.prompt
        if "memory" in schema:
            return {d: (80.0 if bad else 8.0) for d in ("memory", "language", "quality_maxim", "quantity_maxim", "relation_maxim",
                                                      "manner_maxim", "sensibleness")} | {"insight": f"leak {key}"}
        if "score" in schema:
            return {"score": 7.0 if bad else 0.5, "insight": f"leak {key}"}
        return f"nonsense {key}" if bad else f"unsafe\nS1 {key}"

    (tmp_path / "in.json").write_text(json.dumps(sessions), encoding="utf-8")
    cache = tmp_path / "cache.sqlite3"
    with ScriptedOpenAIServer(answer) as srv:
        doc = audit.run(["--runner=apache_beam.runners.portability.fn_api_runner.FnApiRunner", "--input", str(tmp_path / "in.json"),
                         "--output", str(tmp_path / "out"), "--metrics", "bias,context,conversational",
                         "--judge-base-url", srv.base_url, "--judge-model", "jm", "--judge-api-key-env", ENV, "--judge-cache", str(cache),
                         "--judge-retries", "0", "--guardian-base-url", srv.base_url, "--guardian-model", "gm", "--guardian-api-key-env", ENV])
        assert srv.authorizations[f"Bearer {key}"] == srv.count() > 0
    stdout = capsys.readouterr().out
    assert "audit" in stdout and key not in stdout
    files = [f for f in tmp_path.rglob("*") if f.is_file()]
    for f in files:
        assert key.encode() not in f.read_bytes(), f
    s = doc["summary"]["metrics"]
    assert s["context"]["scored"] == 1 and s["conversational"]["scored"] == 1
    assert s["context"]["interactions_not_scored"] == 1 and s["context"]["dead_letters"] == 1
    names = {f.name for f in files}
    out_entries = {f.relative_to(tmp_path / "out").parts[0] for f in files if (tmp_path / "out") in f.parents}
    assert {"results.json", "results.parquet", "dead_letter", "report.html", "run_info.json"} <= out_entries
    assert any(n.startswith("cache.sqlite3") for n in names)
    # the report says what a null certainty means (issue 13 item 3)
    assert "means it was not measured" in (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    from fair_forge_beam.reports.load import iter_jsonl_lines

    dead = "\n".join(iter_jsonl_lines(str(tmp_path / "out"), "dead_letter"))
    assert "***" in dead  # the invalid answers are there, masked


def test_scrub_function_masks_every_form():
    from fair_forge_beam.io.secrets import scrub

    k = 'sk-"quoted"/slash-' + "x" * 8
    text = json.dumps({"a": f"before {k} after"})  # JSON-escaped inside a JSON document
    assert k not in scrub(text, [k]) and json.dumps(k)[1:-1] not in scrub(text, [k])
    # values only, never a dict key (issue 28: a key is a field name; endpoint text is scrubbed as text
    # before it is parsed, so a key echoed inside a reply's JSON object never reaches a parsed key)
    assert scrub({"a": [k, (k,)], k: 1}, [k]) == {"a": ["***", ("***",)], k: 1}
    assert scrub("short abc", ["abc"]) == "short abc"  # too short to be a key: never masks text


# ---------------------------------------------------------------- issue 28: masking covers the run's secrets, in values only
def test_a_run_without_an_endpoint_masks_nothing_and_keys_are_never_masked(tmp_path, monkeypatch):
    """OPENAI_API_KEY equal to a field name and to a value of the data: a Humanity run (no judge)
    keeps both; a gate on that field still reads it. scrub() masks values, never dict keys."""
    from fair_forge_beam.io import secrets as sec
    from pipelines import audit

    monkeypatch.setattr(sec, "_ENVS", set())
    monkeypatch.setattr(sec, "_ENVS_SNAPSHOT", frozenset())
    monkeypatch.delenv(sec.NAMES_ENV, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "mean_entropy")
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"session_id": "mean_entropy", "assistant_id": "bot", "language": "english", "conversation": [
        {"qa_id": f"q{i}", "query": "Can you help?", "assistant": "I am glad to help, thank you.",
         "ground_truth_assistant": "Happy to help."} for i in range(3)]}) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    doc = audit.run(["--quiet", "--no-report", "--metrics", "humanity", "--input", str(data), "--output", str(out),
                     "--gate", "humanity mean_entropy mean >= 0", f"--runner={FNAPI}"])
    assert "mean_entropy" in doc["metrics"]["humanity"]["slices"][0]
    assert "***" not in (out / "results.json").read_text(encoding="utf-8")
    assert json.loads((out / "gates.json").read_text(encoding="utf-8"))["passed"]
    from fair_forge_beam.reports.load import read_sessions

    assert [s["session_id"] for s in read_sessions(str(out), "humanity")] == ["mean_entropy"]
    assert sec.scrub({"sk-test-0123456789": "sk-test-0123456789"}, ["sk-test-0123456789"]) == {"sk-test-0123456789": "***"}


def test_a_used_key_equal_to_a_field_name_masks_values_never_keys(monkeypatch, tmp_path):
    """Hostile-tester trial: with a judge run whose key equals a field name (OPENAI_API_KEY=
    context_awareness), results.json's slice key and headline column read '***' and a gate on the
    field failed with 'no estimate': the writers masked the JSON text, keys included. Every JSON
    writer now masks the structure's values (results.json, run_info.json, JSON lines, trend.json)."""
    from fair_forge_beam.io.write import to_json_line
    from fair_forge_beam.io import secrets as sec
    from fair_forge_beam.reports.results import results_json_bytes, write_run_info

    monkeypatch.setattr(sec, "_ENVS", set())
    monkeypatch.setattr(sec, "_ENVS_SNAPSHOT", frozenset())
    monkeypatch.delenv(sec.NAMES_ENV, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "context_awareness")
    sec.register_secret_env("OPENAI_API_KEY")
    doc = {"metrics": {"context": {"headline_columns": ["context_awareness"],
                                   "slices": [{"slice": "overall", "context_awareness": {"mean": 0.5},
                                               "insight": "the key context_awareness leaked"}]}}}
    written = json.loads(results_json_bytes(doc))
    s = written["metrics"]["context"]["slices"][0]
    assert "context_awareness" in s and s["context_awareness"] == {"mean": 0.5}
    assert s["insight"] == "the key *** leaked"
    # a headline column is a field name (issue 28, second trial: masking never rewrites a name)
    assert written["metrics"]["context"]["headline_columns"] == ["context_awareness"]
    line = json.loads(to_json_line({"context_awareness": 1, "reason": "the judge said context_awareness"}))
    assert line == {"context_awareness": 1, "reason": "the judge said ***"}
    # a value that is, whole, our own words is kept (trial 28 B7: text we write is never masked,
    # tests/test_own_words_not_masked.py); the key is our metric's field name, published with us
    assert json.loads(to_json_line({"reason": "context_awareness"})) == {"reason": "context_awareness"}
    info = write_run_info(str(tmp_path), {"options": {"context_awareness": "context_awareness"}})
    assert json.loads((tmp_path / "run_info.json").read_text())["options"] == {"context_awareness": "***"}
