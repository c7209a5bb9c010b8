"""trial38b B2, B3, B13: a secret given in the wrong place is never printed, whatever the form of the arguments.

The mapping forms (``judge={...}``, ``guardian={...}``) were checked (fix38a), but the other forms the docs show
were not: the class with its config (``Bias(guardian=LlamaGuard, config={"model": "m", "temperature": S})``: pydantic's
"should be a number, not the text 'S'"), keyword arguments (``LlamaGuard("m", url, temperature=S)``: Python's "could not
convert string to float: 'S'"; ``max_tokens=S``, ``top_logprobs=S``, ``OpenAIJudgeHandler(..., max_concurrency=S)``:
"invalid literal for int()"). The classes now check their own arguments against their annotations
(:func:`fair_forge_beam.components.judge.arguments.check_arguments`). The guardian mapping quoted a bad ``model``
(bytes, a list, an object whose ``__repr__`` raised, which escaped) and a bad ``kind``; an unknown key was quoted whole.
"""
from __future__ import annotations

import pytest

from fair_forge_beam.assistants.assistant import AssistantHandler
from fair_forge_beam.components.guardian import GraniteGuardian, GuardianLLMConfig, LlamaGuard, guardian_from_mapping
from fair_forge_beam.components.judge.handler import OpenAIJudgeHandler
from fair_forge_beam.generators.generate import generator_handler
from fair_forge_beam.metrics.bias import Bias

#: a secret that has no known shape: only not showing it keeps it out of a message
SECRET = "hunter2pass-NOT-SHOWN-0123456789"
URL = "http://127.0.0.1:9/v1"


class _BadRepr:
    def __repr__(self):
        raise RuntimeError("a repr that raises")


def _refused(build, said: str) -> str:
    with pytest.raises(ValueError) as err:
        build()
    text = str(err.value)
    assert type(err.value) is ValueError and "\n" not in text, text
    assert said in text, text
    assert "NOT-SHOWN" not in text and "hunter2" not in text and "sk-live" not in text, text
    return text


def _optimizer(name: str, **settings):
    import fair_forge_beam.optimizer as optimizer

    return getattr(optimizer, name)([], OpenAIJudgeHandler("m", URL, cache_path=None), "be kind", **settings)


FORMS = [
    (lambda: Bias(guardian=LlamaGuard, config={"model": "m", "temperature": SECRET}),
     "config: 'temperature' expects a finite number, got a str"),
    (lambda: LlamaGuard(config={"model": "m", "max_tokens": SECRET}), "config: 'max_tokens' expects a whole number"),
    (lambda: LlamaGuard("m", URL, temperature=SECRET), "LlamaGuard: 'temperature' expects a finite number, got a str"),
    (lambda: GraniteGuardian("m", URL, temperature=SECRET), "GraniteGuardian: 'temperature' expects a finite number"),
    (lambda: LlamaGuard("m", URL, max_tokens=SECRET), "LlamaGuard: 'max_tokens' expects a whole number, got a str"),
    (lambda: LlamaGuard("m", URL, top_logprobs=SECRET), "LlamaGuard: 'top_logprobs' expects a whole number, got a str"),
    (lambda: LlamaGuard("m", URL, request_timeout=SECRET), "'request_timeout' expects a finite number, got a str"),
    (lambda: OpenAIJudgeHandler("m", URL, max_concurrency=SECRET),
     "OpenAIJudgeHandler: 'max_concurrency' expects a whole number, got a str"),
    (lambda: OpenAIJudgeHandler("m", URL, request_timeout=SECRET), "'request_timeout' expects a finite number, got a str"),
    (lambda: OpenAIJudgeHandler("m", URL, structured_output=SECRET), "structured_output must be 'auto' or one of"),
    (lambda: generator_handler("m", URL, client_retries=SECRET), "'client_retries' expects a whole number, got a str"),
    (lambda: AssistantHandler(model="m", base_url=URL, max_concurrency=SECRET),
     "AssistantHandler: 'max_concurrency' expects a whole number, got a str"),
    (lambda: AssistantHandler(SECRET, model="m"), "kind must be one of"),
    (lambda: _optimizer("GEPAOptimizer", failure_threshold=SECRET), "GEPAOptimizer: 'failure_threshold' expects a finite number"),
    (lambda: _optimizer("MIPROv2Optimizer", num_trials=SECRET), "MIPROv2Optimizer: 'num_trials' expects a whole number"),
    # fix39a: a secret-shaped text of the wrong type never reaches the constructor (checks_arguments)
    (lambda: LlamaGuard(b"sk-live-" + SECRET.encode(), URL), "LlamaGuard: 'model' expects a string or None, got a bytes"),
]


@pytest.mark.parametrize("build, said", FORMS, ids=[str(i) for i in range(len(FORMS))])
def test_every_form_of_arguments_refuses_a_value_of_the_wrong_type_naming_the_key_never_the_value(build, said):
    _refused(build, said)


def test_a_guardian_config_built_directly_never_shows_the_value():
    with pytest.raises(Exception) as err:
        GuardianLLMConfig(model="m", temperature=SECRET)
    assert SECRET not in str(err.value) and "temperature" in str(err.value)


@pytest.mark.parametrize("model", [b"sk-live-" + SECRET.encode(), [SECRET], {"k": SECRET}, _BadRepr()],
                         ids=["bytes", "list", "dict", "bad-repr"])
def test_the_guardian_mapping_never_quotes_a_bad_model(model):
    _refused(lambda: guardian_from_mapping({"kind": "llama_guard", "model": model}), "a guardian mapping needs a model name")


def test_the_guardian_mapping_never_quotes_a_bad_kind():
    text = _refused(lambda: guardian_from_mapping({"kind": SECRET, "model": "m"}), "'kind' is not a guardian kind")
    assert "llama_guard" in text
    assert "did you mean 'llama_guard'" in _refused(lambda: guardian_from_mapping({"kind": "llama_gurd", "model": "m"}),
                                                     "'kind' is not a guardian kind")
    _refused(lambda: guardian_from_mapping({"kind": _BadRepr(), "model": "m"}), "'kind' is not a guardian kind")


def test_an_unknown_key_is_shown_masked_and_cut():
    shaped = "sk-live-" + "A1b2C3d4E5f6G7h8I9j0" * 3
    text = _refused(lambda: guardian_from_mapping({"model": "m", shaped: 1}), "is not an argument of LlamaGuard")
    assert "'***'" in text and "A1b2" not in text
    long = "x" * 500
    text = _refused(lambda: guardian_from_mapping({"model": "m", long: 1}), "is not an argument of LlamaGuard")
    assert "x" * 41 not in text and "(500 characters)" in text
    text = _refused(lambda: LlamaGuard(config={"model": "m", shaped: 1}), "is not a field of GuardianLLMConfig")
    assert "A1b2" not in text


def test_good_keyword_arguments_still_build():
    g = LlamaGuard("m", URL, temperature=0, max_tokens=8, logprobs=True, top_logprobs=3, request_timeout=5,
                   max_concurrency=2, cache_path=None)
    assert g.handler._cfg.request_timeout == 5.0 and g.handler._cfg.max_concurrency == 2
    assert LlamaGuard(config={"model": "m", "temperature": 1, "cache_path": None}).model == "m"
    h = OpenAIJudgeHandler("m", URL, request_timeout=2.5, max_concurrency=3, cache_path=None, params={"temperature": 0.0})
    assert h._cfg.max_concurrency == 3


@pytest.mark.parametrize("build, said", [
    (lambda: OpenAIJudgeHandler("m", URL, params={"temperature": SECRET}), "params: 'temperature' expects a finite number"),
    (lambda: OpenAIJudgeHandler("m", URL, params={"seed": SECRET}), "params: 'seed' expects a whole number, got a str"),
    (lambda: Bias(guardian=LlamaGuard("m", URL, cache_path=None), inference_args={"top_p": SECRET}),
     "inference_args: 'top_p' expects a finite number, got a str"),
    (lambda: Bias(guardian=LlamaGuard("m", URL, cache_path=None), inference_args=SECRET),
     "Bias: 'inference_args' expects a dict or None, got a str"),  # fix39a: checks_arguments, before the constructor
    (lambda: AssistantHandler(model="m", base_url=URL, params={"max_tokens": SECRET}),
     "params: 'max_tokens' expects a whole number, got a str"),
], ids=["judge-temperature", "judge-seed", "bias-top_p", "bias-text", "assistant-max_tokens"])
def test_sampling_parameters_of_the_wrong_type_are_refused_before_they_are_sent(build, said):
    """trial38b B12: ``params`` and ``inference_args`` took ``{"temperature": secret}``; each call then got an HTTP 400
    whose body (servers echo the input) went into the dead letter."""
    _refused(build, said)


def test_a_numeric_option_never_echoes_a_word_given_for_it(tmp_path):
    """trial38b B12: ``--judge-timeout hunter2pass`` and a config's ``judge_timeout = "hunter2pass-…"`` were echoed (only
    sk-/ghp_ shapes were masked). A numeric option shows a value that fails to parse only when it is made of a number's
    characters (a mistyped number), after masking; any other text by its length."""
    import argparse

    from fair_forge_beam.audit_config import ConfigError, config_to_argv
    from fair_forge_beam.options import exact_float, strict_float, strict_int
    from pipelines.audit import build_parser

    for parse in (strict_int, strict_float):
        for word in (SECRET, "Bearer abcdefgh12345678"):
            with pytest.raises(argparse.ArgumentTypeError) as err:
                parse(word)
            assert word not in str(err.value) and "hunter2" not in str(err.value)
            assert f"a text of {len(word)} characters (not shown" in str(err.value)
        with pytest.raises(argparse.ArgumentTypeError, match=r"'1,5' is not a"):
            parse("1,5")
    with pytest.raises(ValueError, match="a text of 32 characters"):
        exact_float(SECRET)
    parser = build_parser()
    for config in ({"options": {"judge_timeout": SECRET}}, {"options": {"judge-max-concurrency": [SECRET]}},
                   {"seed": {"k": SECRET}}, {"options": {"quiet": SECRET}}):
        with pytest.raises(ConfigError) as err:
            config_to_argv(parser, config, str(tmp_path / "a.toml"))
        assert "NOT-SHOWN" not in str(err.value) and "expected" in str(err.value), err.value
