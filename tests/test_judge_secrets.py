"""The API key is read from the environment on the worker and never appears in the pickled
handler or DoFn, the pipeline graph, any output file (results, dead letters, cache) or any log
record — even when the server echoes it back in errors."""
from __future__ import annotations

import logging
import pickle
import secrets

from apache_beam.internal import pickler
from apache_beam.ml.inference.base import RunInference
from pydantic import BaseModel, ConfigDict, Field

from conftest import FNAPI
from fair_forge_beam._beam import beam
from fair_forge_beam.components.judge import OpenAIJudgeHandler, RunJudge, judge_request
from fair_forge_beam.runner import read_jsonl_shards, write_jsonl
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

        from apache_beam.testing.test_pipeline import TestPipeline

        p = TestPipeline(runner=FNAPI, blocking=True)
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
