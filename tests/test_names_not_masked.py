"""Issue 28, hostile-tester trial 3: masking covers the secrets in values, never our own names.
With a key equal to a metric name, run_info.json held ``--metrics context,***`` and the gate text
``*** mean_entropy …``: one declared list (``secrets.NAME_FIELDS``) of the fields our own words fill
(metric, slice-dimension, column and option names, gate texts) is kept by every writer. Record ids
(assistant, session, qa and element ids, metadata values) come from outside: a key inside one is
masked where records are read ("never write a key"), so the slice names built from it are masked
too (tests/test_ids_masked_at_read.py)."""
from __future__ import annotations

import glob
import json

import pyarrow.parquet as pq
import pytest

from helpers import FNAPI

KEY = "assistant-alpha"


@pytest.fixture
def key_env(monkeypatch):
    from fair_forge_beam.io import secrets as sec

    monkeypatch.setattr(sec, "_ENVS", set())
    monkeypatch.setattr(sec, "_ENVS_SNAPSHOT", frozenset())
    monkeypatch.delenv(sec.NAMES_ENV, raising=False)

    def use(value):
        monkeypatch.setenv("FFB_NAMES_KEY", value)
        sec.register_secret_env("FFB_NAMES_KEY")
    return use


def test_every_writer_keeps_names_and_masks_free_text(key_env, tmp_path):
    import pyarrow as pa

    from fair_forge_beam.io.write import scrub_table, to_json_line
    from fair_forge_beam.reports.results import write_run_info

    key_env(KEY)
    line = json.loads(to_json_line({"assistant_id": KEY, "session_id": KEY, "qa_id": KEY, "element_id": f"s/{KEY}/0",
                                    "request_key": f'["s","{KEY}"]#0', "insight": f"echo {KEY}"}))
    assert line == {"assistant_id": "***", "session_id": "***", "qa_id": "***", "element_id": "s/***/0",
                    "request_key": '["s","***"]#0', "insight": "echo ***"}
    table = pa.table({"assistant_id": [KEY], "reasoning": [KEY], "meta_values": [[KEY, None]],
                      "unit": [{"key": f'["s","{KEY}"]', "note": KEY}], "metric": ["humanity"]})
    out = scrub_table(table).to_pylist()[0]
    assert out == {"assistant_id": "***", "reasoning": "***", "meta_values": ["***", None],
                   "unit": {"key": '["s","***"]', "note": "***"}, "metric": "humanity"}

    key_env("humanity")
    argv = ["--metrics", "context,humanity", "--gate", "humanity mean_entropy mean >= 0 in every assistant_id",
            "--slices=overall,humanity", "--judge-model", "humanity", "--input=humanity"]
    write_run_info(str(tmp_path), {"argv": argv, "options": {"metrics": "context,humanity", "judge_model": "humanity",
                                                              "gate": [argv[3]], "mode": "bayesian"}})
    info = json.loads((tmp_path / "run_info.json").read_text())
    assert info["argv"] == argv[:6] + ["***", "--input=***"]
    assert info["options"] == {"metrics": "context,humanity", "judge_model": "***", "gate": [argv[3]], "mode": "bayesian"}


def test_a_page_keeps_a_slice_value_shown_alone(key_env):
    from fair_forge_beam.io.secrets import name_texts, scrub_known_text

    key_env(KEY)
    names = name_texts({"slices": [{"slice": f"assistant_id={KEY}"}]})
    page = f"<strong>{KEY}</strong><code>assistant_id={KEY}</code><text>{KEY}</text>"
    assert scrub_known_text(page, names) == page
    assert scrub_known_text(f"<p>key {KEY}!</p>", ()) == "<p>key ***!</p>"


def test_every_option_with_choices_is_a_name_field():
    from fair_forge_beam.io.secrets import NAME_FIELDS
    from fair_forge_beam.options import TABLE

    assert {d for d, o in TABLE.items() if o.choices} <= NAME_FIELDS


def test_an_assistant_id_holding_the_key_is_never_written_in_a_record_output(key_env, tmp_path):
    """An assistant id equal to the key is text from outside: it is masked where it is read
    (``***~<tag>``), so every record output, the slice names and results.json hold the same masked id;
    the report and the run still work."""
    import re

    from pipelines import audit

    key_env(KEY)
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"session_id": f"s{i}", "assistant_id": KEY if i % 2 else "assistant-bravo",
                                        "language": "english", "conversation": [
        {"qa_id": "q0", "query": "Can you help?", "assistant": "I am glad to help, thank you.",
         "ground_truth_assistant": None}]}) + "\n" for i in range(4)), encoding="utf-8")
    out = tmp_path / "out"
    audit.run(["--quiet", "--metrics", "humanity", "--input", str(data), "--output", str(out),
               "--gate", "humanity mean_entropy mean >= 0 in every assistant_id", f"--runner={FNAPI}"])
    masked = set()
    for folder in ("sessions/humanity", "results.parquet", "stats/sessions"):
        files = glob.glob(str(out / folder / "*.parquet"))
        ids = {r["assistant_id"] for f in files for r in pq.read_table(f).to_pylist()}
        masked |= ids - {"assistant-bravo"}
        assert len(ids) == 2 and "assistant-bravo" in ids, folder
        assert not any(KEY.encode() in open(f, "rb").read() for f in files), folder
    (one,) = masked  # the same masked id in every output
    assert re.fullmatch(r"\*\*\*~[0-9a-f]{12}", one)
    results = (out / "results.json").read_text(encoding="utf-8")
    assert KEY not in results and f"assistant_id={one}" in results
    info = json.loads((out / "run_info.json").read_text(encoding="utf-8"))
    assert info["options"]["metrics"] == "humanity" and "in every assistant_id" in info["options"]["gate"][0]
