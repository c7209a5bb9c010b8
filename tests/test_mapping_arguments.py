"""fix38a: the mapping form of a guardian's and a judge's arguments (``Bias(guardian={...})``, every judged
metric's ``judge={...}``) checked key by key and value by value before the class sees them
(fair_forge_beam/components/judge/arguments.py).

The guardian mapping checked its keys' names only, and the judge mapping nothing: ``{"model": "m",
"temperature": "sk-live-…"}`` reached the class and raised Python's own ``could not convert string to
float: 'sk-live-…'`` (a secret pasted in the wrong key, printed), ``{"max_tokens": "many"}`` an
``invalid literal for int()``, ``{"request_timeout": [..]}`` a TypeError; a typo key of the judge
mapping a TypeError naming ``OpenAIJudgeHandler.__init__``. Each is now one ValueError naming the key
and what it expects, and never the value.
"""
from __future__ import annotations

import pytest

from fair_forge_beam.components.guardian import LlamaGuard
from fair_forge_beam.metrics.bias import Bias
from fair_forge_beam.metrics.context import Context
from fair_forge_beam.metrics.conversational import Conversational

SECRET = "sk-live-NOT-SHOWN-0123456789abcdef"
URL = "http://127.0.0.1:9/v1"


def _refused(build, given: dict, said: str) -> str:
    with pytest.raises(ValueError) as err:
        build(given)
    text = str(err.value)
    assert type(err.value) is ValueError and "\n" not in text, text
    assert said in text, text
    assert SECRET not in text and SECRET[:8] not in text, text
    shown = err.value.__cause__ or (None if err.value.__suppress_context__ else err.value.__context__)
    assert shown is None, f"a traceback would show the raw error (with the value) too: {shown!r}"
    return text


#: (key, value, what the message says): a value of the wrong type in a key both forms take
BOTH = [
    ("request_timeout", SECRET, "'request_timeout' expects a finite number, got a str"),
    ("request_timeout", float("nan"), "'request_timeout' expects a finite number, got a float"),
    ("request_timeout", [SECRET], "'request_timeout' expects a finite number, got a list"),
    ("max_concurrency", "many", "'max_concurrency' expects a whole number, got a str"),
    ("max_concurrency", 2.5, "'max_concurrency' expects a whole number, got a float"),
    ("max_concurrency", True, "'max_concurrency' expects a whole number, got a bool"),
    ("client_retries", SECRET, "'client_retries' expects a whole number, got a str"),
    ("base_url", 123, "'base_url' expects a string or None, got an int"),
    ("api_key_env", {"k": SECRET}, "'api_key_env' expects a string, got a dict"),
    ("cache_path", 5, "'cache_path' expects a string or None, got an int"),
    ("default_headers", {"Authorization": 5}, "'default_headers' expects a mapping of strings to strings or None"),
    ("default_headers", SECRET, "'default_headers' expects a mapping of strings to strings or None, got a str"),
    ("strict_schema", SECRET, "'strict_schema' expects true or false, got a str"),
    ("min_batch_size", SECRET, "'min_batch_size' expects a whole number or None, got a str"),
    # a value of the right type that the class refuses: its own message, the text given cut out
    ("structured_output", SECRET, "structured_output must be 'auto' or one of"),
    ("max_prompt_chars", 0, "max_prompt_chars must be > 0"),
]
#: the guardian's own keys
GUARDIAN = [
    ("temperature", SECRET, "'temperature' expects a finite number, got a str"),
    ("temperature", "0.5", "'temperature' expects a finite number, got a str"),
    ("max_tokens", "many", "'max_tokens' expects a whole number, got a str"),
    ("max_tokens", 0, "max_tokens must be >= 1"),
    ("top_logprobs", SECRET, "'top_logprobs' expects a whole number, got a str"),
    ("logprobs", SECRET, "'logprobs' expects true or false, got a str"),
    ("include_context", "yes", "'include_context' expects true or false, got a str"),
    ("definitions", [SECRET], "'definitions' expects a mapping of strings to strings or None, got a list"),
    ("definitions", {"gender": 3}, "'definitions' expects a mapping of strings to strings or None, got a dict"),
    ("definitions", {"gender": " " * 3, "x": SECRET}, "definitions must map attribute names to non-empty text"),
    ("config", {"model": "m", "temperature": SECRET}, "config: 'temperature' expects a finite number, got a str"),
    ("config", SECRET, "'config' expects a GuardianLLMConfig or a mapping or None, got a str"),
]


@pytest.mark.parametrize("key, value, said", BOTH + GUARDIAN, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(BOTH + GUARDIAN)])
def test_a_guardian_mapping_value_of_the_wrong_kind_is_one_value_error_naming_the_key_never_the_value(key, value, said):
    def build(given):
        return Bias(guardian=given)

    given = {key: value} if key == "config" else {"model": "m", "base_url": URL, "cache_path": None, key: value}
    _refused(build, given, said)


@pytest.mark.parametrize("metric", [Context, Conversational])
@pytest.mark.parametrize("key, value, said", BOTH, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(BOTH)])
def test_a_judge_mapping_value_of_the_wrong_kind_is_one_value_error_naming_the_key_never_the_value(metric, key, value, said):
    _refused(lambda given: metric(judge=given), {"model": "m", "base_url": URL, "cache_path": None, key: value}, said)


@pytest.mark.parametrize("metric", [Context, Conversational])
def test_the_judge_mapping_refuses_a_key_its_handler_does_not_take_and_a_missing_model(metric):
    """The judge mapping's keys were not checked: a typo raised ``TypeError: OpenAIJudgeHandler.__init__()
    got an unexpected keyword argument``, and ``api_key`` (a secret's key) the same."""
    judge = lambda given: metric(judge=given)  # noqa: E731
    _refused(judge, {"model": "m", "base_ulr": URL}, "judge mapping: 'base_ulr' is not an argument of "
                                                      "OpenAIJudgeHandler; did you mean 'base_url'?")
    text = _refused(judge, {"model": "m", "api_key": SECRET}, "'api_key' is not an argument of OpenAIJudgeHandler")
    assert "an API key is never given as a value" in text
    _refused(judge, {"model": "m", 7: SECRET}, "judge mapping: a key of type int is not an argument")
    for model in (None, "   ", 123, [SECRET]):
        _refused(judge, {"base_url": URL} if model is None else {"model": model, "base_url": URL},
                 "a judge mapping needs a model name")


def test_good_mappings_still_build():
    guardian = Bias(guardian={"model": "m", "base_url": URL, "cache_path": None, "temperature": 0, "max_tokens": 8,
                              "logprobs": True, "top_logprobs": 3, "definitions": {"gender": "x"},
                              "default_headers": {"X-Team": "a"}, "request_timeout": 5, "max_concurrency": 2}).guardian
    assert isinstance(guardian, LlamaGuard) and guardian.model == "m"
    judge = Context(judge={"model": "j", "base_url": URL, "cache_path": None, "request_timeout": 2.5,
                           "min_batch_size": None, "params": {"temperature": 0.0}}).judge
    assert judge._cfg.model == "j" and judge._cfg.base_url == URL
