"""trial49b B2: a session of several languages counts its reads once, in an audit's stored rows and
in a roll-up.

The engine's session key is ``(session_id, assistant_id, language)``: a session whose records are in
two languages has two stored rows (``stats/sessions/``). Each row used to hold the reader's summary
of every record of the session, so the rows counted its interactions once per language: the
roll-up's check of ``interactions_read`` (2 read, 4 in the files) refused the night, exit 2, and
every week that held it. Each row now holds the records of its own language, the session's reader
warnings are on one of its rows, and a roll-up of days — sessions of 2 and 3 languages within one
day and cut across days — is one audit of the union, ``results.json`` byte for byte in both modes.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import for_its_mode, write_days
from pipelines import audit

pytestmark = pytest.mark.slow

EXAMPLES = Path(audit.default_inputs()[1])  # hh-rlhf slice (JSON Lines, one session per line)
COMMON = ["--quiet", "--no-report", "--metrics", "humanity,toxicity", "--group-extractor", "keyword",
          "--mc-samples", "200", "--seed", "11",
          # in results.json: the records read (rejected_share) and the interactions read per language
          "--gate", "coverage rejected_share <= 1", "--gate", "coverage dead_letter_share <= 1 in every language"]


def _hh(i: int) -> dict:
    return json.loads(EXAMPLES.read_text(encoding="utf-8").splitlines()[i])


def _days() -> list[list[dict]]:
    """Three days: A, two languages within day 0; B, three languages, one a day; C, English cut
    across days 0 and 2 with French on day 1; a flat session of English and French on day 1 whose
    qa_id repeats across its languages (a warning only the whole session shows); D, one language."""
    a, b, c, d = (_hh(i) for i in range(4))
    ca, cb, cc = a["conversation"], b["conversation"], c["conversation"]
    assert len(ca) >= 2 and len(cb) >= 3 and len(cc) >= 3
    flat = [{"session_id": "flat", "assistant_id": "bot", "qa_id": "q1", "query": "hi", "assistant": "happy joy"},
            {"session_id": "flat", "assistant_id": "bot", "qa_id": "q1", "query": "salut", "assistant": "bonjour",
             "language": "french"},
            {"session_id": "flat", "assistant_id": "bot", "qa_id": "q2", "query": "hola", "assistant": "bueno",
             "language": "spanish"}]
    return [
        [{**a, "conversation": ca[:1]}, {**a, "language": "spanish", "conversation": ca[1:]},
         {**b, "conversation": cb[:1]}, {**c, "conversation": cc[:1]}],
        [{**b, "language": "spanish", "conversation": cb[1:2]}, {**c, "language": "french", "conversation": cc[1:2]},
         *flat],
        [{**b, "language": "french", "conversation": cb[2:]}, {**c, "conversation": cc[2:]}, d],
    ]


def _audit(out: Path, inputs: list, mode: str) -> bytes:
    audit.run(for_its_mode([*COMMON, "--mode", mode, *[a for i in inputs for a in ("--input", str(i))],
                            "--output", str(out)]))
    return (out / "results.json").read_bytes()


def _rollup(out: Path, runs: list) -> bytes:
    from fair_forge_beam import rollup

    rollup.run([*[a for r in runs for a in ("--from", str(r))], "--output", str(out), "--quiet", "--no-report",
                *COMMON[-4:]])
    return (out / "results.json").read_bytes()


def _rows(run: Path) -> list[dict]:
    return sorted((r for f in sorted((run / "stats" / "sessions").glob("part-*.parquet"))
                   for r in pq.read_table(f).to_pylist()),
                  key=lambda r: (r["session_id"], r["assistant_id"], r["language"]))


def _reads(row: dict) -> int:
    return sum(len(rec["items"]) for rec in row["reader"] or ())


def _check_rows(run: Path) -> None:
    """The run's stored rows count each interaction and record once: the manifest's interactions
    read, in all and per language; each reader warning of a session on one of its rows."""
    manifest = json.loads((run / "stats" / "manifest.json").read_text())
    rows = _rows(run)
    assert sum(_reads(r) for r in rows) == manifest["counts"]["interactions_read"]
    per_language = Counter()
    for r in rows:
        per_language[f"language={r['language']}"] += _reads(r)
    assert {k: v for k, v in per_language.items() if v} == {
        k: v for k, v in manifest["counts"]["interactions_read_by_slice"].items() if k.startswith("language=")}
    records = [(r["session_id"], r["assistant_id"], rec["declared"], rec["source"], rec["position"])
               for r in rows for rec in r["reader"] or ()]
    assert len(records) == len(set(records))  # a record on one row
    reader_kinds = {"session_split", "duplicate_qa_id", "duplicate_turn_index"}
    stored = Counter(q["kind"] for r in rows for q in r["quality"] if q["kind"] in reader_kinds)
    results = json.loads((run / "results.json").read_text())["summary"]
    assert stored == Counter({k: n for k, n in results["data_quality_by_kind"].items() if k in reader_kinds})
    if results.get("records_read") is not None:
        from fair_forge_beam.rollup import records_read

        assert records_read(str(run), manifest) == results["records_read"]


@pytest.mark.parametrize("mode", ["bayesian", "frequentist"])
def test_sessions_of_several_languages_roll_up_as_one_audit_of_the_union(tmp_path, mode):
    files = write_days(tmp_path, _days())
    runs = [tmp_path / f"a{i}" for i in range(len(files))]
    for f, run in zip(files, runs):
        _audit(run, [f], mode)
        _check_rows(run)
    union_bytes = _audit(tmp_path / "union", files, mode)
    union = json.loads(union_bytes)["summary"]
    assert union["data_quality_by_kind"].get("duplicate_qa_id") == 1  # the flat session's q1, across languages
    assert union["records_read"] == sum(len(d) for d in _days())
    assert union["interactions_read"] == sum(_reads(r) for r in _rows(tmp_path / "union"))
    _check_rows(tmp_path / "union")
    # the roll-up of the three days (exit 2 before: interactions_read = 2 … but the run's files hold 4)
    assert _rollup(tmp_path / "roll", runs) == union_bytes
    _check_rows(tmp_path / "roll")
    # what the roll-up stores of each session is what the union audit stores: its rows roll up again
    def stored(run):
        return [{k: r[k] for k in ("session_id", "assistant_id", "language", "reader", "quality")} for r in _rows(run)]

    assert stored(tmp_path / "roll") == stored(tmp_path / "union")
    assert _rollup(tmp_path / "roll01", runs[:2]) != union_bytes
    _check_rows(tmp_path / "roll01")
    assert _rollup(tmp_path / "again", [tmp_path / "roll01", runs[2]]) == union_bytes


def test_a_run_that_repeated_a_sessions_records_on_each_language_row_is_named(tmp_path, capsys):
    """A run written before (each language row of a session holding all its records) is refused in one
    line that says so, not as a manifest changed since."""
    from fair_forge_beam import rollup

    day = [{"session_id": "s1", "assistant_id": "a", "qa_id": "q1", "query": "hi", "assistant": "happy joy"},
           {"session_id": "s1", "assistant_id": "a", "qa_id": "q3", "query": "hi", "assistant": "happy joy",
            "language": "french"}]
    (f,) = write_days(tmp_path, [day])
    run = tmp_path / "run"
    audit.run(["--quiet", "--no-report", "--metrics", "toxicity", "--input", str(f), "--output", str(run)])
    rollup.run(["--from", str(run), "--output", str(tmp_path / "ok"), "--quiet", "--no-report"])  # exit 2 before
    (shard,) = (run / "stats" / "sessions").glob("part-*.parquet")
    t = pq.read_table(shard)
    every = [rec for recs in t.column("reader").to_pylist() for rec in recs]
    t = t.set_column(t.schema.get_field_index("reader"), t.schema.field("reader"),
                     pa.array([every] * t.num_rows, t.schema.field("reader").type))
    pq.write_table(t, shard)
    manifest = json.loads((run / "stats" / "manifest.json").read_text())
    data = shard.read_bytes()
    manifest["files"][shard.relative_to(run).as_posix()] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (run / "stats" / "manifest.json").write_text(json.dumps(manifest, indent=2))
    with pytest.raises(SystemExit) as exc:
        rollup.main(["--from", str(run), "--output", str(tmp_path / "roll"), "--quiet", "--no-report"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "repeat a session's reader summary on each of its languages' rows" in err[0], err
    assert not (tmp_path / "roll").exists()
