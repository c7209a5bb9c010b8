"""The same data in flat and session layout reads to the same interactions (trial49 B1): a flat
record's session fields are every field the session model declares — ``chatbot_role`` too, which
a list of four (session_id, assistant_id, language, context) left in the interaction part, dropped
without a word, so role adherence found no role in flat JSONL or Parquet — and a field neither
model declares is what an unknown field of a session header is: ignored, read as a slice field."""
from __future__ import annotations

import json
from pathlib import Path

import apache_beam as beam
from apache_beam.testing.util import assert_that

from fair_forge_beam.io.read import ReadInteractions
from fair_forge_beam.schemas.common import Batch, SessionMetadata
from helpers import fnapi_pipeline

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "fair_forge_beam" / "data" / "privacy" / "privacy_roles_sample.json"

#: a value, not the default, for every field of the session model: a field added to the model
#: without a value here fails the test (so the flat/session comparison covers it too)
SESSION_VALUES = {"session_id": "every-field", "assistant_id": "bot-x", "language": "es", "context": "a context",
                  "chatbot_role": "You answer questions about trains only."}


def sessions() -> list:
    data = json.loads(SAMPLE.read_text(encoding="utf-8"))
    data.append({**SESSION_VALUES, "conversation": [
        {"qa_id": "e0", "query": "¿Qué tren?", "assistant": "El de las 9.", "ground_truth_assistant": "El de las 9."},
        {"qa_id": "e1", "query": "¿Y luego?", "assistant": "El de las 10.", "weight": 2.0}]})
    for i, s in enumerate(data):
        s["region"] = f"r{i % 2}"  # a field neither model declares: a metadata slice field
    return data


def flat(data: list) -> list:
    return [{**{k: v for k, v in s.items() if k != "conversation"}, **entry} for s in data for entry in s["conversation"]]


def streamed(data: list) -> list:
    return [{"metadata": {k: v for k, v in s.items() if k != "conversation"}, "batch": entry}
            for s in data for entry in s["conversation"]]


def write_jsonl(path: Path, records: list) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def write_parquet(path: Path, records: list) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    keys = list(dict.fromkeys(k for r in records for k in r))  # from_pylist takes the first row's keys alone
    pq.write_table(pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in records]), path)
    return str(path)


def _same_in_every_layout(families: dict):
    """A matcher of ``(layout, interaction as JSON)`` pairs: within each family of layouts (the
    same values, JSON or Parquet), every layout reads the same interactions."""
    def check(pairs):
        by_layout: dict = {}
        for layout, text in pairs:
            by_layout.setdefault(layout, []).append(text)
        for family, layouts in families.items():
            reference = sorted(by_layout.get(layouts[0], []))
            assert reference, f"{layouts[0]} read nothing"
            for layout in layouts[1:]:
                got = sorted(by_layout.get(layout, []))
                assert got == reference, (f"{layout} differs from {layouts[0]}:\n"
                                          + "\n".join(sorted(set(got) ^ set(reference))[:6]))
            roles = {json.loads(t)["session_id"]: json.loads(t).get("chatbot_role") for t in reference}
            assert roles["every-field"] == SESSION_VALUES["chatbot_role"] and roles["bank-1"], (family, roles)
            every = [json.loads(t) for t in reference if json.loads(t)["session_id"] == "every-field"]
            assert every and all(
                {k: r[k] for k in SESSION_VALUES} == {**SESSION_VALUES, "language": "spanish"} for r in every), every
            assert {tuple(map(tuple, json.loads(t)["slice_values"])) for t in reference} == {
                (("region", "r0"),), (("region", "r1"),)}
    return check


def test_flat_records_read_every_session_field_as_the_session_layout_does(tmp_path):
    assert set(SESSION_VALUES) == set(SessionMetadata.model_fields), "give every session field a value in this test"
    assert not set(SessionMetadata.model_fields) & set(Batch.model_fields)
    data = sessions()
    paths = {
        "session.jsonl": write_jsonl(tmp_path / "session.jsonl", data),
        "flat.jsonl": write_jsonl(tmp_path / "flat.jsonl", flat(data)),
        "streamed.jsonl": write_jsonl(tmp_path / "streamed.jsonl", streamed(data)),
        # Parquet gives absent struct keys as null: compared within Parquet, nested with flat
        "nested.parquet": write_parquet(tmp_path / "nested.parquet", data),
        "flat.parquet": write_parquet(tmp_path / "flat.parquet", flat(data)),
    }
    families = {"json": ["session.jsonl", "flat.jsonl", "streamed.jsonl"], "parquet": ["nested.parquet", "flat.parquet"]}
    with fnapi_pipeline() as p:
        outs = []
        for name, path in paths.items():
            out = p | f"Read {name}" >> ReadInteractions(path, slice_fields=("region",))
            outs.append(out["interactions"] | f"Tag {name}" >> beam.Map(
                lambda x, n=name: (n, json.dumps(x.as_record(), sort_keys=True, default=list))))
            assert_that(out["dead_letter"] | f"Dead {name}" >> beam.Map(lambda d, n=name: (n, d)),
                        lambda dead: not dead or (_ for _ in ()).throw(AssertionError(dead)), label=f"NoDead {name}")
        assert_that(tuple(outs) | beam.Flatten(), _same_in_every_layout(families))
