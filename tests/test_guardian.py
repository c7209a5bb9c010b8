"""Guardians: prompts, answer parsing, unsafe-label certainty from logprobs (spec §17 item 17) and
direct ``is_biased`` calls against the scripted OpenAI-compatible server (no network)."""
from __future__ import annotations

import math
import pickle

import pytest

from fair_forge_beam.components.guardian import (
    ATTRIBUTE_DEFINITIONS,
    PROTECTED_ATTRIBUTES,
    GraniteGuardian,
    GuardianBias,
    GuardianError,
    GuardianLLMConfig,
    GuardianParseError,
    IBMGranite,
    LLamaGuard,
    LlamaGuard,
    make_guardian,
    unsafe_label_probability,
)
from fair_forge_beam.testing.openai_server import Fault, ScriptedOpenAIServer
from fair_forge_beam.components.judge.parsing import fence

URL = "http://127.0.0.1:9/v1"  # never contacted


def lg(**kw):
    kw.setdefault("cache_path", None)
    return LlamaGuard("llama-guard", URL, **kw)


def gg(**kw):
    kw.setdefault("cache_path", None)
    return GraniteGuardian("granite-guardian", URL, **kw)


# ------------------------------------------------------------------ attributes and prompts
def test_five_protected_attributes_with_definitions():
    assert PROTECTED_ATTRIBUTES == ("gender", "race", "religion", "nationality", "sexual_orientation")
    assert set(ATTRIBUTE_DEFINITIONS) == set(PROTECTED_ATTRIBUTES)
    assert all(len(d) > 80 for d in ATTRIBUTE_DEFINITIONS.values())


def test_llama_guard_prompt_single_custom_category():
    (msg,) = lg().build_messages("Who should lead?", "Only men can lead.", "gender")
    role, text = msg
    assert role == "user"
    block = text[text.index("<BEGIN UNSAFE CONTENT CATEGORIES>") : text.index("<END UNSAFE CONTENT CATEGORIES>")]
    assert "S1: Gender bias." in block and ATTRIBUTE_DEFINITIONS["gender"] in block
    assert "S2" not in text
    conv = text[text.index("<BEGIN CONVERSATION>") : text.index("<END CONVERSATION>")]
    assert "User: " + fence("question", "Who should lead?") in conv and "Agent: " + fence("answer", "Only men can lead.") in conv
    assert "'safe' or 'unsafe'" in text


def test_granite_guardian_prompt_risk_name_and_definition():
    (msg,) = gg().build_messages("q?", "a.", "sexual_orientation")
    text = msg[1]
    risk = text[text.index("<start_of_risk_definition>") : text.index("<end_of_risk_definition>")]
    assert "Sexual orientation bias" in risk and ATTRIBUTE_DEFINITIONS["sexual_orientation"] in risk
    conv = text[text.index("<start_of_conversation>") : text.index("<end_of_conversation>")]
    assert "User Message: " + fence("question", "q?") in conv and "Assistant Message: " + fence("answer", "a.") in conv
    assert "'Yes' or 'No'" in text


def test_user_text_is_never_templated():
    nasty = 'I said {"a": {b}} and {{ 7*7 }} {% if x %}'
    text = lg().build_messages(nasty, nasty, "race")[0][1]
    assert text.count(nasty) == 2 and "49" not in text


def test_context_only_when_asked():
    assert "CTX-123" not in lg().build_messages("q", "a", "race", "CTX-123")[0][1]
    assert "CTX-123" in lg(include_context=True).build_messages("q", "a", "race", "CTX-123")[0][1]
    assert "CTX-123" in gg(include_context=True).build_messages("q", "a", "race", "CTX-123")[0][1]


def test_custom_definitions_and_unknown_attribute():
    g = lg(definitions={"age": "Unfair treatment because of age."})
    assert "Unfair treatment because of age." in g.build_messages("q", "a", "age")[0][1]
    with pytest.raises(KeyError, match="no definition"):
        lg().build_messages("q", "a", "height")
    with pytest.raises(ValueError):
        lg(definitions={"age": "  "})


# ------------------------------------------------------------------ answers
@pytest.mark.parametrize(
    "text,biased",
    [("safe", False), ("unsafe", True), ("unsafe\nS1", True), ("\n\n Unsafe.\nS1", True), ("safe\n", False)],
)
def test_llama_guard_labels(text, biased):
    v = lg().parse(text, "gender")
    assert v == GuardianBias(is_biased=biased, attribute="gender", certainty=None)  # no logprobs: not measured


@pytest.mark.parametrize(
    "text,biased",
    [("Yes", True), ("No", False), ("no.", False), ("<score> yes </score>", True), ("reasoning...\n<score>No</score>", False)],
)
def test_granite_labels(text, biased):
    assert gg().parse(text, "race").is_biased is biased


@pytest.mark.parametrize("text", ["", "maybe", "I cannot tell", "unsure\nunsafe"])
def test_unlabelled_answers_raise(text):
    with pytest.raises(GuardianParseError):
        lg().parse(text, "gender")
    with pytest.raises(GuardianParseError):
        gg().parse(text, "gender")


# ------------------------------------------------------------------ certainty (spec §17 item 17)
def chat_lp(*positions):
    return {"content": [{"token": t, "logprob": lp, "top_logprobs": [{"token": a, "logprob": b} for a, b in alts]} for t, lp, alts in positions]}


def test_certainty_is_the_unsafe_label_probability_not_the_first_token():
    # generated "safe" with p=0.9; the unsafe label has p=0.08 among the alternatives
    lp = chat_lp(("\n\n", 0.0, []), ("safe", math.log(0.9), [("safe", math.log(0.9)), ("unsafe", math.log(0.08)), ("The", math.log(0.02))]))
    v = lg().parse("safe", "race", lp)
    assert v.is_biased is False
    assert v.certainty == pytest.approx(0.08 / 0.98)  # renormalised over the two labels, not 0.9


def test_certainty_prefix_tokens_and_granite_labels():
    lp = chat_lp(("un", math.log(0.6), [("un", math.log(0.6)), ("safe", math.log(0.3)), ("unsafe", math.log(0.05))]))
    assert unsafe_label_probability(lp, "unsafe", "safe") == pytest.approx(0.65 / 0.95)
    lp = chat_lp(("Yes", math.log(0.7), [("Yes", math.log(0.7)), ("No", math.log(0.2)), (" yes", math.log(0.05))]))
    assert gg().parse("Yes", "race", lp).certainty == pytest.approx(0.75 / 0.95)


def test_certainty_after_score_tag_and_single_token_forms():
    lp = chat_lp(("No", math.log(0.99), []), (" <score>", 0.0, []), (" ", 0.0, []), ("yes", math.log(0.8), [("yes", math.log(0.8)), ("no", math.log(0.2))]))
    assert unsafe_label_probability(lp, "Yes", "No") == pytest.approx(0.8)
    # only the generated token: unsafe -> its probability; safe -> the mass not on it
    assert unsafe_label_probability(chat_lp(("unsafe", math.log(0.7), [])), "unsafe", "safe") == pytest.approx(0.7)
    assert unsafe_label_probability(chat_lp(("safe", math.log(0.7), [])), "unsafe", "safe") == pytest.approx(0.3)
    # completions shape
    comp = {"tokens": ["unsafe"], "token_logprobs": [math.log(0.6)], "top_logprobs": [{"unsafe": math.log(0.6), "safe": math.log(0.4)}]}
    assert unsafe_label_probability(comp, "unsafe", "safe") == pytest.approx(0.6)
    # nothing usable -> None -> certainty None (not measured; it used to be a made-up 1.0)
    assert unsafe_label_probability(chat_lp(("Hmm", -0.1, [("Well", -2.0)])), "unsafe", "safe") is None
    assert unsafe_label_probability(None, "unsafe", "safe") is None
    assert lg().parse("unsafe", "race", chat_lp(("Hmm", -0.1, []))).certainty is None


# ------------------------------------------------------------------ construction
def test_config_upstream_style_and_factory():
    g = LLamaGuard(config=GuardianLLMConfig(model="lg3", url="http://host:8000", logprobs=True, cache_path=None))
    assert g.model == "lg3" and g.base_url == "http://host:8000/v1"
    assert g.handler._cfg.params == {"temperature": 0.0, "max_tokens": 16, "logprobs": True, "top_logprobs": 5}
    assert IBMGranite is GraniteGuardian
    assert isinstance(make_guardian("granite_guardian", "gg", URL, cache_path=None), GraniteGuardian)
    with pytest.raises(ValueError, match="unknown guardian kind"):
        make_guardian("nope", "m")
    with pytest.raises(ValueError, match="model"):
        LlamaGuard()
    with pytest.raises(ValueError, match="not both"):
        LlamaGuard("m", config={"model": "x"})
    g2 = pickle.loads(pickle.dumps(gg()))
    assert g2.build_messages("q", "a", "race") == gg().build_messages("q", "a", "race")
    assert g.describe() == "llama_guard:lg3"


# ------------------------------------------------------------------ direct calls, real HTTP server
def llama_script(req):
    prompt = req.prompt
    agent = prompt[prompt.index("Agent:") : prompt.index("<END CONVERSATION>")]
    if "[garble]" in agent:
        return "I am not sure."
    return "unsafe\nS1" if "women are worse" in agent else "safe"


def test_is_biased_direct_calls_cache_and_request_shape(tmp_path):
    with ScriptedOpenAIServer(llama_script) as srv:
        g = LlamaGuard("lg", srv.base_url, cache_path=str(tmp_path / "c.sqlite3"), api_key_env="FFB_TEST_UNSET_KEY", logprobs=True)
        try:
            v = g.is_biased("Who codes better?", "Men, women are worse at it.", "gender")
            assert v == GuardianBias(is_biased=True, attribute="gender", certainty=None)  # server sent no logprobs: not measured
            assert g.is_biased("Who codes better?", "Anyone who practises.", "gender").is_biased is False
            assert srv.count() == 2
            body = srv.requests[0].body
            assert [m["role"] for m in body["messages"]] == ["user"]
            assert body["model"] == "lg" and body["temperature"] == 0.0 and body["max_tokens"] == 16
            assert body["logprobs"] is True and body["top_logprobs"] == 5
            assert "response_format" not in body
            # same question again: served from the cache
            assert g.is_biased("Who codes better?", "Men, women are worse at it.", "gender").is_biased is True
            assert srv.count() == 2
            with pytest.raises(GuardianParseError):
                g.is_biased("q", "[garble]", "race")
        finally:
            g.close()


def test_is_biased_raises_on_failed_call():
    with ScriptedOpenAIServer("Yes", faults=[Fault("server_error", retry_after=None)]) as srv:
        g = GraniteGuardian("gg", srv.base_url, cache_path=None, api_key_env="FFB_TEST_UNSET_KEY", client_retries=0, num_retries=0)
        try:
            with pytest.raises(GuardianError, match="HTTP 500"):
                g.is_biased("q", "a", "religion")
        finally:
            g.close()
