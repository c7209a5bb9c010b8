"""Common schemas (spec §1): upstream datasets load unchanged; languages, weights and ids are
normalised or rejected with a message that names the field."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from pydantic import ValidationError

from fair_forge_beam.schemas import (
    Batch,
    Dataset,
    IterationLevel,
    SessionMetadata,
    StreamedBatch,
    is_known_language,
    normalize_language,
)

PACKAGE_EXAMPLES = Path(__file__).resolve().parents[1] / "fair_forge_beam" / "data" / "examples"
UPSTREAM_FILES = [
    "dataset.json",
    "dataset_agentic.json",
    "dataset_bestof.json",
    "dataset_gepa_es.json",
    "dataset_mipro_es.json",
    "dataset_regulatory.json",
    "dataset_sushi_es.json",
]


def _batch(**over):
    d = {"qa_id": "q1", "query": "How are you?", "assistant": "I am happy to help."}
    d.update(over)
    return d


def _session(**over):
    d = {"session_id": "s1", "assistant_id": "a1", "language": "english", "context": "", "conversation": [_batch()]}
    d.update(over)
    return d


# ------------------------------------------------------------------ upstream data loads unchanged
def test_every_upstream_example_file_is_present(shared_dir):
    found = sorted(p.name for p in (shared_dir / "data" / "fair_forge_examples").glob("*.json"))
    assert found, "no upstream example files"
    # Every file in the folder is covered by the parametrised test below.
    assert set(found) <= set(UPSTREAM_FILES), f"new example files not covered: {set(found) - set(UPSTREAM_FILES)}"


@pytest.mark.parametrize("name", UPSTREAM_FILES)
def test_upstream_example_sessions_validate_as_dataset(shared_dir, name):
    path = shared_dir / "data" / "fair_forge_examples" / name
    raw = json.loads(path.read_text(encoding="utf-8"))
    sessions = raw if isinstance(raw, list) else [raw]
    assert sessions
    for rec in sessions:
        ds = Dataset.model_validate(rec)
        assert ds.session_id == str(rec["session_id"])
        assert ds.assistant_id == str(rec["assistant_id"])
        assert len(ds.conversation) == len(rec["conversation"])
        for b, rb in zip(ds.conversation, rec["conversation"]):
            assert b.qa_id == str(rb["qa_id"])
            assert b.query == rb["query"]
            assert b.assistant == rb["assistant"]
            assert b.ground_truth_assistant == rb.get("ground_truth_assistant")
            if "agentic" in rb:
                assert b.agentic == rb["agentic"]
            if "ground_truth_agentic" in rb:
                assert b.ground_truth_agentic == rb["ground_truth_agentic"]
        # languages in the upstream files ("english", "spanish", "es") all end up canonical
        assert ds.language in ("english", "spanish")
        assert is_known_language(ds.language)


def test_package_examples_validate():
    data = json.loads((PACKAGE_EXAMPLES / "fair_forge_examples.json").read_text(encoding="utf-8"))
    assert len(data) > 0
    for rec in data:
        Dataset.model_validate(rec)
    n = 0
    with open(PACKAGE_EXAMPLES / "hh_rlhf_harmless_test_slice.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                Dataset.model_validate(json.loads(line))
                n += 1
    assert n > 0


# ------------------------------------------------------------------ languages
@pytest.mark.parametrize(
    "given, canonical",
    [
        ("en", "english"),
        ("EN", "english"),
        ("English", "english"),
        ("english", "english"),
        ("ENGLISH", "english"),
        ("en-US", "english"),
        ("en_GB", "english"),
        ("  en  ", "english"),
        ("eng", "english"),
        ("es", "spanish"),
        ("ES", "spanish"),
        ("spanish", "spanish"),
        ("Spanish", "spanish"),
        ("es-MX", "spanish"),
        ("español", "spanish"),
        ("pt_BR", "portuguese"),
        ("fr", "french"),
        # trial36 T6: every ISO 639-1, 639-2/T, 639-2/B code and English name, BCP 47 tags and withdrawn codes
        ("sv", "swedish"), ("sv-SE", "swedish"), ("sv_FI", "swedish"), ("swe", "swedish"), ("Swedish", "swedish"),
        ("he", "hebrew"), ("iw", "hebrew"), ("heb", "hebrew"), ("ger", "german"), ("deu", "german"),
        ("el", "greek"), ("gre", "greek"), ("grc", "ancient greek"), ("fi", "finnish"), ("fin", "finnish"),
        ("nb", "norwegian bokmål"), ("no", "norwegian"), ("fil", "filipino"), ("tl", "tagalog"),
        ("zh-Hant-TW", "chinese"), ("sr-Latn", "serbian"), ("ca-ES-valencia", "catalan"), ("valencian", "catalan"),
        ("castilian", "spanish"), ("in", "indonesian"), ("ji", "yiddish"), ("tlh", "klingon"), ("Klingon", "klingon"),
    ],
)
def test_language_normalisation(given, canonical):
    assert normalize_language(given) == canonical
    assert is_known_language(given)
    assert Dataset.model_validate(_session(language=given)).language == canonical
    assert SessionMetadata.model_validate({"session_id": "s", "assistant_id": "a", "language": given}).language == canonical


@pytest.mark.parametrize("given, kept", [("elvish", "elvish"), ("Elvish ", "elvish"), ("xx-YY", "xx-yy"), ("qtz", "qtz"),
                                         ("x-klingon", "x-klingon"), ("und", "und"), ("mul", "mul"), ("zxx", "zxx")])
def test_unknown_language_is_kept_and_reported(given, kept):
    # qtz: ISO's range for local use (qaa-qtz) names no language (qya, Quenya, has an ISO 639-3 code)
    assert normalize_language(given) == kept
    assert not is_known_language(given)
    ds = Dataset.model_validate(_session(language=given))  # no crash
    assert ds.language == kept
    assert not is_known_language(ds.language)


def test_language_default_and_none_is_english():
    rec = _session()
    del rec["language"]
    assert Dataset.model_validate(rec).language == "english"
    assert Dataset.model_validate(_session(language=None)).language == "english"


def test_language_that_is_not_a_string_is_rejected_naming_the_field():
    with pytest.raises(ValidationError) as ei:
        Dataset.model_validate(_session(language=5))
    assert any(e["loc"][0] == "language" for e in ei.value.errors())


def test_normalisation_is_idempotent():
    for v in ("en", "EN", "en-US", "es", "klingon", "pt_BR"):
        once = normalize_language(v)
        assert normalize_language(once) == once


# ------------------------------------------------------------------ weights
@pytest.mark.parametrize("w", [None, 0, 0.0, 0.25, 1, 1.0, 3.5, 1e308, 5e-324])
def test_valid_weights_accepted(w):
    b = Batch.model_validate(_batch(weight=w))
    assert b.weight == (None if w is None else float(w))


@pytest.mark.parametrize("w", [float("inf"), float("-inf"), float("nan"), -0.5, -1, -5e-324, "Infinity", "NaN"])
def test_invalid_weights_rejected_naming_weight(w):
    with pytest.raises(ValidationError) as ei:
        Batch.model_validate(_batch(weight=w))
    errs = ei.value.errors()
    assert [e["loc"] for e in errs] == [("weight",)]
    assert "weight" in str(ei.value)


def test_weight_that_is_not_a_number_is_rejected():
    with pytest.raises(ValidationError) as ei:
        Batch.model_validate(_batch(weight="heavy"))
    assert ei.value.errors()[0]["loc"] == ("weight",)


def test_bad_weight_inside_dataset_names_the_path():
    with pytest.raises(ValidationError) as ei:
        Dataset.model_validate(_session(conversation=[_batch(), _batch(qa_id="q2", weight=-0.5)]))
    locs = [e["loc"] for e in ei.value.errors()]
    assert locs == [("conversation", 1, "weight")]


def test_weights_from_python_json_extensions_are_rejected():
    # Python's json module writes (and reads) Infinity / NaN.
    for text in ("Infinity", "-Infinity", "NaN"):
        rec = json.loads('{"qa_id": "q", "query": "x", "assistant": "y", "weight": %s}' % text)
        assert math.isinf(rec["weight"]) or math.isnan(rec["weight"])
        with pytest.raises(ValidationError, match="weight"):
            Batch.model_validate(rec)


# ------------------------------------------------------------------ ids and optional fields
def test_int_qa_id_becomes_str():
    b = Batch.model_validate(_batch(qa_id=7))
    assert b.qa_id == "7" and isinstance(b.qa_id, str)
    assert Batch.model_validate(_batch(qa_id=0)).qa_id == "0"


def test_bool_qa_id_is_not_silently_converted():
    with pytest.raises(ValidationError):
        Batch.model_validate(_batch(qa_id=True))


def test_int_session_and_assistant_ids_become_str():
    ds = Dataset.model_validate(_session(session_id=123, assistant_id=9))
    assert ds.session_id == "123" and ds.assistant_id == "9"


@pytest.mark.parametrize("field", ["session_id", "assistant_id"])
def test_empty_or_missing_ids_are_rejected(field):
    with pytest.raises(ValidationError) as ei:
        Dataset.model_validate(_session(**{field: "   "}))
    assert ei.value.errors()[0]["loc"] == (field,)
    rec = _session()
    del rec[field]
    with pytest.raises(ValidationError) as ei:
        Dataset.model_validate(rec)
    assert ei.value.errors()[0]["loc"] == (field,)


@pytest.mark.parametrize("field", ["qa_id", "query", "assistant"])
def test_required_batch_fields(field):
    rec = _batch()
    del rec[field]
    with pytest.raises(ValidationError) as ei:
        Batch.model_validate(rec)
    assert ei.value.errors()[0]["loc"] == (field,)


def test_missing_ground_truth_assistant_allowed_and_upstream_defaults():
    b = Batch.model_validate(_batch())
    assert b.ground_truth_assistant is None
    assert b.observation is None
    assert b.agentic == {} and b.ground_truth_agentic == {} and b.logprobs == {}
    assert b.weight is None
    b2 = Batch.model_validate(_batch(ground_truth_assistant=None))
    assert b2.ground_truth_assistant is None


def test_context_optional_and_none_becomes_empty():
    rec = _session()
    del rec["context"]
    assert Dataset.model_validate(rec).context == ""
    assert Dataset.model_validate(_session(context=None)).context == ""


def test_extra_fields_are_ignored():
    ds = Dataset.model_validate(_session(extra_top="x", conversation=[_batch(unknown_field=[1, 2])]))
    assert not hasattr(ds, "extra_top")
    assert ds.conversation[0].qa_id == "q1"


def test_dataset_round_trips_through_json():
    ds = Dataset.model_validate(_session(conversation=[_batch(weight=0.5, agentic={"tools_used": []})]))
    again = Dataset.model_validate_json(ds.model_dump_json())
    assert again == ds


def test_streamed_batch_schema():
    sb = StreamedBatch.model_validate({"metadata": {"session_id": 5, "assistant_id": "a", "language": "EN"}, "batch": _batch(qa_id=3)})
    assert sb.metadata.session_id == "5"
    assert sb.metadata.language == "english"
    assert sb.batch.qa_id == "3"
    assert sb.turn_index is None
    assert StreamedBatch.model_validate({"metadata": {"session_id": "s", "assistant_id": "a"}, "batch": _batch(), "turn_index": 4}).turn_index == 4
    with pytest.raises(ValidationError) as ei:
        StreamedBatch.model_validate({"metadata": {"session_id": "s", "assistant_id": "a"}, "batch": _batch(), "turn_index": -1})
    assert ei.value.errors()[0]["loc"] == ("turn_index",)
    with pytest.raises(ValidationError) as ei:
        StreamedBatch.model_validate({"metadata": {"session_id": "s", "assistant_id": "a"}, "batch": _batch(weight=float("nan"))})
    assert ei.value.errors()[0]["loc"] == ("batch", "weight")


def test_iteration_level_values():
    assert [l.value for l in IterationLevel] == ["full_dataset", "stream_sessions", "stream_batches"]
    assert IterationLevel("stream_batches") is IterationLevel.STREAM_BATCHES
    assert IterationLevel.FULL_DATASET == "full_dataset"
