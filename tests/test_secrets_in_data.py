"""Trial33 O1: a credential in the input data reached what we show a person.

The value of ``OPENAI_API_KEY`` (set in the environment; the run used no endpoint, so nothing
registered it) planted in an answer of a dead-lettered record was written unmasked into
``dead_letter/`` and three times into ``report.html``; a reason quoting a record's value (``weight
must be a number, got str '<key>'``) was a dict key of results.json's reason counts, never masked,
and printed on the console. The fix, at the one masking helper (``fair_forge_beam.io.secrets``):
(a) secret-shaped strings (a PEM private key, ``sk-…``, ``AKIA…``) are masked in what is shown to a
person (report pages, the console), whatever the environment holds, while ``dead_letter/`` keeps
the original record (docs/reliability.md); (b) the reason counts' keys are values: a run's key
quoted there is masked. A variable the run does not use is still not masked by its value (issue 28:
tests/test_judge_secrets.py), so an unused key reaches only the files that keep the data as read.
"""
from __future__ import annotations

import importlib.resources
import json
from pathlib import Path

import pytest

from helpers import FNAPI

KEY = "sk-live-9f8e7d6c5b4a39281706abcdef"  # the value of OPENAI_API_KEY in the environment
#: secrets told by their shape (no variable holds them)
AWS = "AKIAIOSFODNN7EXAMPLE"
OPENAI = "sk-proj-Abc123def456ghi789jkl012mno"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq9\n-----END RSA PRIVATE KEY-----"
PEM_BODY = "MIIEowIBAAKCAQEA7bq9"


def _shipped() -> str:
    return str(importlib.resources.files("fair_forge_beam").joinpath("data/examples/fair_forge_examples.json"))


def _turn(qa_id: str, answer: str = "I am glad to help, thank you.", **extra) -> dict:
    return {"qa_id": qa_id, "query": "Can you help?", "assistant": answer, "ground_truth_assistant": "Happy to help.",
            **extra}


def _planted(path: Path, secret_answer: str, secret_value: str, secret_id: str) -> Path:
    """Two good sessions, one whose session id holds ``secret_id``, and two dead letters: an answer
    holding ``secret_answer`` (the record rejected for its weight) and a weight that is
    ``secret_value`` (the reason quotes it)."""
    recs = [
        {"session_id": "planted-1", "assistant_id": "bot-p", "language": "english", "conversation": [_turn("q1"), _turn("q2")]},
        {"session_id": f"s-{secret_id}", "assistant_id": "bot-p", "language": "english",
         "conversation": [_turn("q1"), _turn("q2")]},
        {"session_id": "planted-2", "assistant_id": "bot-p", "language": "english",
         "conversation": [_turn("q1", f"sure, the key is {secret_answer} ok", weight="heavy")]},
        {"session_id": "planted-3", "assistant_id": "bot-p", "language": "english",
         "conversation": [_turn("q1", "fine", weight=secret_value)]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return path


def _files(folder: Path) -> dict:
    """Every file under ``folder`` as text (Parquet files decoded: their pages are compressed)."""
    import pyarrow.parquet as pq

    out = {}
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        if f.suffix == ".parquet":
            out[str(f)] = json.dumps(pq.read_table(f).to_pylist(), default=str, ensure_ascii=False)
        else:
            out[str(f)] = f.read_bytes().decode("utf-8", "replace")
    return out


@pytest.fixture
def nothing_registered(monkeypatch):
    """A run that uses no endpoint: no key variable registered."""
    from fair_forge_beam.io import secrets as sec

    monkeypatch.setattr(sec, "_ENVS", set())
    monkeypatch.setattr(sec, "_ENVS_SNAPSHOT", frozenset())
    monkeypatch.delenv(sec.NAMES_ENV, raising=False)


@pytest.mark.slow
def test_an_unused_key_planted_in_the_data_is_not_shown_and_a_used_one_is_in_no_output(tmp_path, monkeypatch, capsys,
                                                                                    nothing_registered):
    """The trial's case on the shipped data: OPENAI_API_KEY set, its value planted in an answer (a
    dead letter), in a value a reason quotes and in a session id. A run that does not use the key:
    neither the console nor report.html shows it (its ``sk-`` shape); ``dead_letter/`` keeps the
    record as read (issue 28: unused keys are not masked by value). A run that uses it (registered,
    as an endpoint registers its key): no file of the run holds it, results.json's reason counts
    included (their keys were never masked)."""
    from fair_forge_beam.io import secrets as sec
    from pipelines import audit

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    data = _planted(tmp_path / "planted.jsonl", KEY, KEY, KEY)
    out = tmp_path / "unused"
    audit.run(["--metrics", "humanity", "--input", _shipped(), "--input", str(data), "--output", str(out),
               f"--runner={FNAPI}"])
    shown = capsys.readouterr()
    assert KEY not in shown.out and KEY not in shown.err
    assert "rejected at read" in shown.out and "***" in shown.out  # the reason is shown, its value masked
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "dead-letter" in page and KEY not in page and KEY[8:] not in page
    assert any(KEY in t for f, t in _files(out).items() if "dead_letter" in f)  # the record as read
    monkeypatch.setenv(sec.NAMES_ENV, "OPENAI_API_KEY")  # the run uses the key
    out = tmp_path / "used"
    audit.run(["--metrics", "humanity", "--input", _shipped(), "--input", str(data), "--output", str(out),
               f"--runner={FNAPI}"])
    shown = capsys.readouterr()
    assert KEY not in shown.out and KEY not in shown.err
    files = _files(out)
    assert (out / "report.html").is_file() and any("dead_letter" in f for f in files)
    assert [f for f, text in files.items() if KEY in text or KEY[8:] in text] == []
    reasons = json.loads((out / "results.json").read_text(encoding="utf-8"))["summary"]["rejected_at_read_reasons"]
    assert any("***" in r for r in reasons) and sum(reasons.values()) == 2


def test_secret_shaped_strings_are_masked_in_what_a_person_is_shown(tmp_path, monkeypatch, capsys, nothing_registered):
    """No variable holds them: an AWS key id, an sk- key and a PEM private key in an answer, an sk-
    key as a value a reason quotes. report.html and the console never show them; dead_letter/ keeps
    the original record as read (DESIGN: the reason and the original record)."""
    from pipelines import audit

    for name in [n for n in __import__("os").environ if "KEY" in n.upper()]:
        monkeypatch.delenv(name)
    data = _planted(tmp_path / "planted.jsonl", f"{AWS} and {OPENAI} and {PEM}", OPENAI, "plain")
    out = tmp_path / "out"
    audit.run(["--metrics", "humanity", "--input", _shipped(), "--input", str(data), "--output", str(out),
               f"--runner={FNAPI}"])
    shown = capsys.readouterr()
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "dead-letter" in page and "sure, the key is" in page  # the dead letter is shown
    for secret in (AWS, OPENAI, "BEGIN RSA PRIVATE KEY", PEM_BODY):
        assert secret not in page, secret
        assert secret not in shown.out and secret not in shown.err, secret
    dead = "".join(t for f, t in _files(out).items() if "dead_letter" in f)
    for secret in (AWS, OPENAI, PEM_BODY):
        assert secret in dead, secret  # the dead-letter file keeps the record as read


def test_reason_counts_are_values_and_a_cut_never_splits_a_secret(tmp_path, monkeypatch, nothing_registered):
    """results.json's reason counts are keyed by reasons that quote the data: masked as values, two
    that mask alike added. The report's dead-letter excerpt is cut after masking: a secret across
    the cut is never shown in part."""
    from fair_forge_beam.io import secrets as sec
    from fair_forge_beam.reports.load import dead_letter_summary

    monkeypatch.setenv("FFB_O1_API_KEY", KEY)
    monkeypatch.setenv(sec.NAMES_ENV, "FFB_O1_API_KEY")  # a key the run uses
    doc = {"summary": {"rejected_at_read_reasons": {f"got str '{KEY}'": 2, f"got str '{KEY}!'": 1, "other": 1}}}
    assert sec.scrub_known(doc) == {"summary": {"rejected_at_read_reasons": {"got str '***'": 2, "got str '***!'": 1,
                                                                             "other": 1}}}
    assert KEY not in "".join(sec.name_texts(doc))  # never kept as a name in a page or the console
    (tmp_path / "dead_letter").mkdir()
    raw = "x" * 589 + " " + OPENAI + " and " + PEM  # the cut (600) falls inside the sk- key
    (tmp_path / "dead_letter" / "part-0.jsonl").write_text(
        json.dumps({"stage": "read", "reason": f"bad {AWS}", "element_id": "e1", "raw": raw}) + "\n", encoding="utf-8")
    [ex] = dead_letter_summary(str(tmp_path))["first"]
    assert ex["raw"] == "x" * 589 + " *** and ** …" and ex["reason"] == "bad ***" and ex["truncated"]


def test_console_and_log_lines_mask_secret_shapes():
    from fair_forge_beam.urls import mask_line

    assert mask_line(f"error near {AWS} and {OPENAI}") == "error near *** and ***"
    assert mask_line("risk-assessment-framework-2024 and the task-0123456789abcdefghij stay") == \
        "risk-assessment-framework-2024 and the task-0123456789abcdefghij stay"
    assert mask_line(f"cut: {PEM[:40]}") == "cut: ***"
