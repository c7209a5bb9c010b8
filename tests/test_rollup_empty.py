"""A roll-up that measured nothing is an empty run, as an audit is (issue 28, trial 28h H9): a
roll-up of runs that read nothing (days published with --allow-empty), or of runs whose only metric
scored nothing, exited 0 with a warning. docs/cli.md: the roll-up's exit codes are the audit's —
4 for an empty run, nothing published (--output left as it was), unless --allow-empty."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fair_forge_beam import rollup
from pipelines import audit

COMMON = ["--quiet", "--no-report", "--metrics", "humanity", "--mode", "frequentist"]
FAIR_FORGE = Path(audit.default_inputs()[0])  # the original's examples: a Spanish session (no lexicon)


def _days(tmp_path, records):
    runs = []
    for d in ("d1", "d2"):
        path = tmp_path / f"{d}.json"
        path.write_text(json.dumps(records[d]) + "\n", encoding="utf-8")
        assert audit.main([*COMMON, "--allow-empty", "--input", str(path), "--output", str(tmp_path / d)]) == 0
        runs += ["--from", str(tmp_path / d)]
    return runs


def _empty_rollup(tmp_path, runs, capsys):
    out = tmp_path / "week"
    with pytest.raises(SystemExit) as exc:
        audit.main(["rollup", "--quiet", "--no-report", *runs, "--output", str(out)])
    assert exc.value.code == 4
    assert not out.exists()  # nothing published
    return capsys.readouterr().err


@pytest.mark.slow
def test_a_rollup_of_runs_that_read_nothing_exits_4_unless_allow_empty(tmp_path, capsys):
    runs = _days(tmp_path, {"d1": [], "d2": []})
    err = _empty_rollup(tmp_path, runs, capsys)
    (stage,) = [p for p in tmp_path.iterdir() if p.name.startswith("week.staging-")]  # kept to be read (trial48 B1)
    assert ("fair-forge-beam rollup: empty run: no input record (the runs rolled up hold no interaction); "
            f"{tmp_path / 'week'} was not created; this run's outputs (its dead letters) are kept unpublished in {stage} "
            f"until the next run into {tmp_path / 'week'} (exit code 4; --allow-empty publishes such a run)") in err, err
    assert audit.main(["rollup", "--quiet", "--no-report", "--allow-empty", *runs, "--output", str(tmp_path / "week")]) == 0
    assert (tmp_path / "week" / "results.json").exists() and not stage.exists()  # the next run removed it


@pytest.mark.slow
def test_a_rollup_whose_only_metric_scored_nothing_exits_4(tmp_path, capsys):
    spanish = [s for s in json.loads(FAIR_FORGE.read_text(encoding="utf-8")) if s["assistant_id"] == "support-bot"][:2]
    assert len(spanish) == 2
    runs = _days(tmp_path, {"d1": spanish[:1], "d2": spanish[1:]})
    err = _empty_rollup(tmp_path, runs, capsys)
    assert "fair-forge-beam rollup: empty run: humanity scored nothing of " in err, err


def test_the_rollup_takes_allow_empty():
    assert rollup.build_parser().parse_args(["--from", "a", "--output", "b", "--allow-empty"]).allow_empty is True
