"""trial39 T1: an endpoint's API key is read, and masked, on the worker. A worker whose environment
lacks a key variable that was set where the run was launched (a Flink cluster started before the
``export``) fails the run at set-up with one line naming the variable and the fix, instead of sending
``Bearer not-needed`` and writing an echoed key in clear. The launcher hands the workers the names
only (never a value)."""
from __future__ import annotations

import secrets

import pytest

from apache_beam.internal import pickler

from helpers import fnapi_pipeline
from fair_forge_beam._beam import beam
from fair_forge_beam.assistants.assistant import AssistantHandler
from fair_forge_beam.components.guardian import LlamaGuard
from fair_forge_beam.components.judge import OpenAIJudgeHandler, RunJudge, judge_request
from fair_forge_beam.io import secrets as sec

ENV = "FFB_T39_WORKER_KEY"


def _builders():
    """Every kind of endpoint the package builds with a key variable: judge, generator (a judge
    handler in its namespace), guardian and assistant."""
    return {
        "judge": lambda: OpenAIJudgeHandler("m", "http://127.0.0.1:9/v1", api_key_env=ENV, cache_path=None),
        "generator": lambda: OpenAIJudgeHandler("m", "http://127.0.0.1:9/v1", api_key_env=ENV, cache_path=None,
                                                namespace="fair_forge_beam.generator"),
        "guardian": lambda: LlamaGuard("m", "http://127.0.0.1:9/v1", api_key_env=ENV, cache_path=None).handler,
        "assistant": lambda: AssistantHandler("openai", model="m", base_url="http://127.0.0.1:9/v1", api_key_env=ENV, cache_path=None),
    }


@pytest.mark.parametrize("kind", sorted(_builders()))
def test_worker_without_the_launchers_key_fails_at_setup_in_one_line(kind, monkeypatch):
    key = "sk-t39-" + secrets.token_hex(16)
    monkeypatch.setenv(ENV, key)
    handler = _builders()[kind]()
    blob = pickler.dumps(handler)
    assert key.encode() not in blob  # names travel, never the value
    monkeypatch.delenv(ENV)  # the worker: a cluster started before the export
    worker = pickler.loads(blob)
    with pytest.raises(sec.MissingKeyError) as err:
        worker.load_model()
    msg = str(err.value)
    assert "\n" not in msg and ENV in msg and "export it before starting the cluster" in msg, msg


@pytest.mark.parametrize("kind", sorted(_builders()))
def test_worker_with_the_key_registers_it_for_masking(kind, monkeypatch):
    key = "sk-t39-" + secrets.token_hex(16)
    monkeypatch.setenv(ENV, key)
    blob = pickler.dumps(_builders()[kind]())
    monkeypatch.setattr(sec, "_ENVS", set())  # a fresh worker process: nothing registered, no names inherited
    monkeypatch.setattr(sec, "_ENVS_SNAPSHOT", frozenset())
    monkeypatch.delenv(sec.NAMES_ENV, raising=False)
    assert key not in sec.known_secrets()
    pickler.loads(blob).load_model()
    assert key in sec.known_secrets()  # this worker's writers mask it
    assert sec.scrub({"insight": f"ok {key}"}, sec.known_secrets()) == {"insight": "ok ***"}


def test_no_key_at_launch_still_runs_keyless(monkeypatch):
    """A local server needs no key: unset at the launcher and on the worker, nothing is required."""
    monkeypatch.delenv(ENV, raising=False)
    for build in _builders().values():
        pickler.loads(pickler.dumps(build())).load_model()


def test_pipeline_fails_when_the_worker_lacks_the_key(monkeypatch):
    """The same through a pipeline: the handler is built where the key is set, the job's workers
    run without it; the run stops at set-up naming the variable, and nothing was asked."""
    monkeypatch.setenv(ENV, "sk-t39-" + secrets.token_hex(16))
    handler = OpenAIJudgeHandler("m", "http://127.0.0.1:9/v1", api_key_env=ENV, cache_path=None, num_retries=0, client_retries=0)
    p = fnapi_pipeline()
    _ = p | beam.Create([judge_request("k", [("user", "hi")], element_id="e")]) | RunJudge(handler)
    monkeypatch.delenv(ENV)
    with pytest.raises(Exception) as err:
        p.run()
    assert f"{ENV} is set where the run was launched but not in this worker's environment" in str(err.value)
