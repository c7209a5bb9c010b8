"""Text we write is never masked; values from outside are (trial 28, B7; docs/reliability.md).

With ``OPENAI_API_KEY=profanity-check`` (the judge's key) results.json said ``"scorer": {"name":
"***"}`` and ``"package": "alt-***"``, the report "toxicity scorer — ***", and a key equal to one of
our sentences ("fewer than 2 sessions") masked report text. The writers mask every value of a
document or page, and could not tell our words from outside text. Now, when the key is our own words
(:func:`fair_forge_beam.io.secrets.is_own_text`: our source publishes it), a value that is itself our
own words is kept, a page or console table is composed of masked values and not masked again for it,
and every other value holding it (free text, the settings a user gave) is still masked."""
from __future__ import annotations

import json
import secrets

import pytest

from helpers import FNAPI
from fair_forge_beam.io import secrets as S
from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

ENV = "FFB_TEST_OWN_WORDS_KEY"

#: a key equal to each kind of our own text
OWN = {
    "scorer name": "profanity-check",
    "package name": "alt-profanity-check",
    "console sentence (a number in its field)": "fewer than 2 sessions",
    "gate sentence": "too small to judge (sessions are the resampling unit)",
    "metric / column name": "mean_entropy",
    "page label (report template)": "Findings",
    "estimate method": "beta_posterior",
}


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(S, "_ENVS", set())
    monkeypatch.setattr(S, "_ENVS_SNAPSHOT", frozenset())
    monkeypatch.delenv(S.NAMES_ENV, raising=False)
    S.register_secret_env(ENV)
    return monkeypatch


@pytest.mark.parametrize("kind", list(OWN))
def test_a_key_equal_to_our_own_words_masks_none_of_them(kind, registry):
    key = OWN[kind]
    registry.setenv(ENV, key)
    doc = {"scorer": {"name": "profanity-check", "package": "alt-profanity-check"},
           "notes": ["3 slices (1 too small to judge, fewer than 2 sessions): ",  # the console's, reports/summary.py
                     "too small to judge (sessions are the resampling unit)"],  # a gate's, reports/gates.py
           "estimate": {"method": "beta_posterior"}, "columns": ["mean_entropy"]}
    assert S.scrub_known(doc) == doc, kind
    page = "<h2>Findings</h2><p>toxicity scorer — profanity-check (alt-profanity-check); fewer than 2 sessions</p>"
    assert S.scrub_known_text(page) == page
    # values from outside that hold it are still masked: free text, and the settings a user gave
    assert S.scrub_known({"insight": f"the judge says {key}!"}) == {"insight": "the judge says ***!"}
    assert S.scrub_known({"options": {"judge_model": key}, "argv": ["--judge-model", key]}) == {
        "options": {"judge_model": "***"}, "argv": ["--judge-model", "***"]}


def test_a_key_that_is_not_our_words_is_still_masked_everywhere(registry):
    for key in ("sk-ffb-" + secrets.token_hex(16), "12345678", "23456789-2024", "fewer than 2 cats x"):
        registry.setenv(ENV, key)
        assert not S.is_own_text(key), key
        assert S.scrub_known({"answer": f"it is {key}", "scorer": {"name": "profanity-check"}}) == {
            "answer": "it is ***", "scorer": {"name": "profanity-check"}}
        assert S.scrub_known_text(f"<p>toxicity scorer — profanity-check; {key}</p>") == \
            "<p>toxicity scorer — profanity-check; ***</p>"


def test_own_words_come_from_our_source_only():
    assert S.is_own_text("profanity-check") and S.is_own_text("fewer than 12 sessions")
    # a key made of numbers alone fits any number field: it is not our words
    assert not S.is_own_text("12345678") and not S.is_own_text("1.5, 2.5, 3.5")
    # a docstring is not written to any output
    assert not S.is_own_text("A ticket the caller passes as the page's own route")


def test_a_run_whose_key_is_our_scorer_name_keeps_our_words(tmp_path, registry, capsys):
    """End to end: the judge's key is ``profanity-check`` and the judge echoes it; results.json's
    scorer, the report and the console keep our words; the judge's echo is masked where it enters."""
    pytest.importorskip("profanity_check")
    from pipelines import audit

    key = "profanity-check"
    registry.setenv(ENV, key)
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({
        "session_id": f"s{i}", "assistant_id": "bot", "language": "english", "context": "Tickets cost 30 EUR.",
        "conversation": [{"qa_id": "q1", "query": "A ticket?", "assistant": "30 EUR.", "ground_truth_assistant": "30 EUR."}]})
        + "\n" for i in range(3)), encoding="utf-8")
    out = tmp_path / "out"
    with ScriptedOpenAIServer(lambda req: '{"score": 0.8, "insight": "k=' + key + '"}') as srv:
        audit.run(["--input", str(data), "--output", str(out), "--metrics", "context,toxicity", "--judge-base-url",
                   srv.base_url, "--judge-model", "jm", "--judge-api-key-env", ENV, "--judge-cache", str(tmp_path / "cache.sqlite3"),
                   "--judge-retries", "0", f"--runner={FNAPI}"])
    console = capsys.readouterr().out
    text = (out / "results.json").read_text(encoding="utf-8")
    assert '"profanity-check"' in text and '"alt-profanity-check"' in text and '"***"' not in text
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "profanity-check" in report and "— ***" not in report
    assert "***" not in console
    import pyarrow.parquet as pq

    rows = json.dumps([pq.read_table(f).to_pylist() for f in sorted((out / "results.parquet").rglob("*.parquet"))],
                      default=str)
    assert "k=***" in rows and f"k={key}" not in rows  # the reply, from outside, masked where it entered


def test_a_sentence_composed_with_words_in_its_fields_is_our_words():
    """The gate's sentence moved into a template whose field is a word (``({units} are the resampling
    unit)``, fix37a): a key equal to the sentence masked it ('***' in gates.json). A field holds a number
    or a word of our own text; a stranger's token there keeps the value a secret."""
    assert S.is_own_text("too small to judge (sessions are the resampling unit)")
    assert S.is_own_text("the slice rests on 1 block (n = 3), too small")
    assert S.is_own_text("blocks are the resampling unit")
    assert not S.is_own_text("too small to judge (s3cr3tZ are the resampling unit)")
    assert not S.is_own_text("sessions s3cr3tZ hunter2 block")
