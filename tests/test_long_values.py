"""Issue 28 G4: a 1,000,000-character assistant_id was printed whole (console table lines of 1 MB,
4 MB of stdout; report.html 62 MB, the id ~60 times). Every place that shows a value from the data
to a person cuts it with one helper (:func:`fair_forge_beam.quoting.shown`: 200 characters, then its
length); results.json and the Parquet files keep the whole id.

Since ``--max-id-chars`` (default 1,024 characters) a record whose id is longer is a dead letter; a
user who raises the limit reads such ids, and every place that shows them must still cut them, so
the runs here raise it (:data:`RAISED`), and one run checks the default's refusal is bounded too."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import FNAPI

REPO = Path(__file__).resolve().parents[1]
LONG_A, LONG_B = "A" * 1_000_000, "B" * 1_000_000
BOUND = 200_000  # bytes: stdout + stderr of a run, and each HTML page
RAISED = "--max-id-chars=1000000"  # reads the 1,000,000-character ids (the default, 1,024, refuses them)


def test_shown_cuts_a_long_value_and_says_its_length():
    from fair_forge_beam.quoting import QUOTE_LIMIT, shown, shown_key

    assert shown("bot") == "bot"
    assert shown("x" * QUOTE_LIMIT) == "x" * QUOTE_LIMIT
    long = shown(LONG_A)
    assert long.startswith("A" * 150) and long.endswith("… (1,000,000 characters)") and len(long) < QUOTE_LIMIT + 40
    assert shown("a\nb\u202e") == "a\\nb\\u202e"  # a record cannot forge a line or turn the text around
    assert shown_key("assistant_id=" + LONG_A) == "assistant_id=" + long
    assert shown_key("overall") == "overall"


def test_a_space_that_starts_or_ends_a_value_is_shown(tmp_path):
    """trial38 T6: ``bot-α`` and ``bot-α `` (an export's trailing space) are two assistants, but the
    console, the report and the plots showed two identical rows: a space at either end is written as its
    escape (``\\x20``), one inside as it is. Fails before (both rows read ``assistant_id=bot-α``)."""
    from fair_forge_beam.quoting import QUOTE_LIMIT, shown

    assert shown("bot-α ") == "bot-α\\x20" and shown(" a  ") == "\\x20a\\x20\\x20" and shown("a b") == "a b"
    assert shown("  ") == "\\x20\\x20" and shown("") == ""
    # the end of a value cut at the limit is not the value's end
    assert shown("x" * (QUOTE_LIMIT - 1) + "  tail") == "x" * (QUOTE_LIMIT - 1) + "… (205 characters)"


@pytest.mark.slow
def test_two_ids_that_differ_by_a_space_are_two_rows(tmp_path):
    """trial38 T6, a whole audit (a process of its own, over 10 s on a loaded machine): the console and
    report.html tell ``bot-α`` from ``bot-α ``. Fails before."""
    p = _audit(tmp_path, "spaces", [_record("s1", "bot-α"), _record("s2", "bot-α ")])
    assert p.returncode == 0, p.stderr
    rows = [ln.split()[0] for ln in p.stdout.splitlines() if ln.lstrip().startswith("assistant_id=bot")]
    assert "assistant_id=bot-α" in rows and "assistant_id=bot-α\\x20" in rows, p.stdout
    page = (tmp_path / "spaces" / "report.html").read_text()
    assert "bot-α\\x20" in page


def _record(sid, aid, language="english"):
    return json.dumps({"session_id": sid, "assistant_id": aid, "language": language,
                       "conversation": [{"qa_id": "q1", "query": "hi", "assistant": "hello"}]}) + "\n"


def _audit(tmp_path, name, records, *extra):
    (tmp_path / f"{name}.jsonl").write_text("".join(records))
    p = subprocess.run([sys.executable, "-m", "pipelines.audit", "--input", str(tmp_path / f"{name}.jsonl"), "--output",
                        str(tmp_path / name), "--metrics", "toxicity", f"--runner={FNAPI}", *extra],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    return p


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("long")
    base = _audit(tmp, "base", [_record("s1", LONG_A)], RAISED)
    cur = _audit(tmp, "cur", [_record("s1", LONG_A), _record("s2", LONG_B, "spanish"), _record("C" * 500_000, LONG_A)],
                 RAISED, "--baseline", str(tmp / "base"), "--compare", str(tmp / "base"),
                 "--gate", "regression toxicity toxic_rate not worse in every assistant_id",
                 "--gate", "toxicity toxic_rate mean >= 0.5 in every assistant_id")
    return tmp, base, cur


@pytest.mark.slow
def test_console_and_report_of_a_run_with_a_long_id_are_bounded(runs):
    tmp, base, cur = runs
    assert base.returncode == 0, base.stderr[-2000:]
    assert cur.returncode == 3, cur.stderr[-2000:]  # a gate failed: its line names the id, cut
    for p in (base, cur):
        assert len(p.stdout) + len(p.stderr) < BOUND, (len(p.stdout), len(p.stderr))
        assert max(len(x) for x in (p.stdout + p.stderr).splitlines()) < 2_000
    assert "… (1,000,000 characters)" in base.stdout and "GATE FAILED" in cur.stderr
    for run in ("base", "cur"):
        html = (tmp / run / "report.html").read_text(encoding="utf-8")
        assert len(html.encode()) < BOUND, len(html)
        assert "A" * 1000 not in html and "B" * 1000 not in html
    # the files for machines keep the whole id
    doc = json.loads((tmp / "cur" / "results.json").read_text(encoding="utf-8"))
    keys = {s["slice"] for s in doc["metrics"]["toxicity"]["slices"]}
    assert "assistant_id=" + LONG_A in keys
    import pyarrow.parquet as pq

    table = pq.read_table(str(tmp / "cur" / "results.parquet")).to_pylist()
    assert any(LONG_A in json.dumps(r) for r in table)


@pytest.mark.slow
def test_a_long_id_under_the_default_limit_is_refused_in_a_bounded_line(tmp_path):
    p = _audit(tmp_path, "default", [_record("s1", LONG_A)])
    assert p.returncode == 4, p.stderr[-2000:]  # its one record is a dead letter: an empty run
    assert len(p.stdout) + len(p.stderr) < BOUND and "A" * 1000 not in p.stdout + p.stderr
    assert "assistant_id of 1,000,000 characters is over the limit of 1,024 (--max-id-chars)" in p.stderr


@pytest.mark.slow
def test_trend_page_of_runs_with_a_long_id_is_bounded(runs):
    tmp, _base, _cur = runs
    p = subprocess.run([sys.executable, "-m", "pipelines.trend", str(tmp / "base"), str(tmp / "cur"), "--output",
                        str(tmp / "trend")], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert len(p.stdout) + len(p.stderr) < BOUND
    html = (tmp / "trend" / "trend.html").read_text(encoding="utf-8")
    assert len(html.encode()) < BOUND and "A" * 1000 not in html


def test_compare_table_and_gate_lines_cut_the_id():
    from fair_forge_beam.reports.compare import comparison_table
    from fair_forge_beam.reports.gates import GateCheck, skipped_line

    cmp = {"ci_level": 0.95, "differences": [], "verdicts": {"toxicity": {"same": 1}},
           "rows": [{"metric": "toxicity", "slice": "assistant_id=" + LONG_A, "estimate": "toxic_rate", "verdict": "same",
                     "difference": {"mean": 0.0, "ci_low": -0.1, "ci_high": 0.1}, "method": "x"}]}
    assert len(comparison_table(cmp)) < 2_000
    fields = GateCheck.model_fields
    kw = {"gate_index": 0, "gate": "toxicity toxic_rate mean <= 0.5", "metric": "toxicity", "field": "toxic_rate", "stat": "mean",
          "slice": "assistant_id=" + LONG_A, "status": "skipped", "reason": "too small", "skip": "too small"}
    check = GateCheck(**{k: v for k, v in kw.items() if k in fields})
    assert len(check.message()) < 2_000
    assert len(skipped_line([check]) or "") < 2_000
