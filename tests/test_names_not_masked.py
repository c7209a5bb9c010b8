"""Issue 28, hostile-tester trial 3: masking covers the secrets in values of free text, never
names. With a key equal to an assistant id, ``assistant_id`` read ``***`` in sessions/,
results.parquet, stats/sessions and the report (a roll-up then showed ``assistant_id=***``); with a
key equal to a metric name, run_info.json held ``--metrics context,***`` and the gate text
``*** mean_entropy …``. One declared list (``secrets.NAME_FIELDS``) is used by every writer."""
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
    assert line == {"assistant_id": KEY, "session_id": KEY, "qa_id": KEY, "element_id": f"s/{KEY}/0",
                    "request_key": f'["s","{KEY}"]#0', "insight": "echo ***"}
    table = pa.table({"assistant_id": [KEY], "reasoning": [KEY], "meta_values": [[KEY, None]],
                      "unit": [{"key": f'["s","{KEY}"]', "note": KEY}]})
    out = scrub_table(table).to_pylist()[0]
    assert out == {"assistant_id": KEY, "reasoning": "***", "meta_values": [KEY, None],
                   "unit": {"key": f'["s","{KEY}"]', "note": "***"}}

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


def test_an_audit_with_a_key_equal_to_an_assistant_id_keeps_the_id_everywhere(key_env, tmp_path):
    from pipelines import audit
    from fair_forge_beam import rollup

    key_env(KEY)
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"session_id": f"s{i}", "assistant_id": KEY if i % 2 else "assistant-bravo",
                                        "language": "english", "conversation": [
        {"qa_id": "q0", "query": "Can you help?", "assistant": "I am glad to help, thank you.",
         "ground_truth_assistant": None}]}) + "\n" for i in range(4)), encoding="utf-8")
    out = tmp_path / "out"
    audit.run(["--quiet", "--metrics", "humanity", "--input", str(data), "--output", str(out),
               "--gate", "humanity mean_entropy mean >= 0 in every assistant_id", f"--runner={FNAPI}"])
    for folder in ("sessions/humanity", "results.parquet", "stats/sessions"):
        ids = {r["assistant_id"] for f in glob.glob(str(out / folder / "*.parquet")) for r in pq.read_table(f).to_pylist()}
        assert ids == {KEY, "assistant-bravo"}, folder
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "***" not in page and f">{KEY}<" in page
    merged = tmp_path / "rolled"
    rollup.run(["--from", str(out), "--output", str(merged), f"--runner={FNAPI}"])
    rolled = (merged / "results.json").read_text(encoding="utf-8")
    assert "***" not in rolled and f"assistant_id={KEY}" in rolled
