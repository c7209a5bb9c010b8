"""An option that the main job's kind of run does not read is a usage error (trial 28g G5: ``--compare
RUN`` on a ``--window`` run exited 0 without comparison.json or a word). The table
(:data:`fair_forge_beam.options.IGNORED_BY_RUN`) is gone through entry by entry, and every option of
the groups that differ between run kinds is classified for each kind."""
from __future__ import annotations

import json

import pytest

from helpers import FNAPI
from fair_forge_beam import options as O
from pipelines import audit

SAMPLE = {"compare": "{tmp}/earlier", "inconclusive_width": "0.3", "progress_interval": "2",
          "gate": "humanity mean_entropy mean >= 0", "baseline": "{tmp}/earlier", "cluster_points": "{tmp}/p.parquet",
          "early_firing": "1m", "allowed_lateness": "1m", "timestamp_field": "ts", "timestamp_policy": "processing_time",
          "watch_interval": "1s", "watch_stop_after": "1s", "kafka_bootstrap_servers": "h:9092",
          "kafka_expansion_service": "h:8097", "kafka_event_time": "message", "kafka_max_records": "5",
          "pubsub_timestamp_attribute": "ts"}
#: an argv of each kind (files read whole: no streaming source needed)
KIND_ARGV = {"windowed": ["--window", "fixed:1h"], "batch": [], "files": [], "no-kafka": [], "no-pubsub": []}
#: options of the report / run / scheduled groups and the streaming group that each kind reads
READ = {"windowed": {"quiet", "allow_empty", "version", "config", "slices", "no_report", "window", "timestamp_field",
                     "timestamp_policy", "watch", "watch_interval", "watch_stop_after", "kafka_topic", "pubsub_topic",
                     "pubsub_subscription", "kafka_bootstrap_servers", "kafka_expansion_service", "kafka_event_time",
                     "kafka_max_records", "pubsub_timestamp_attribute", "early_firing", "allowed_lateness"},
        "batch": {"quiet", "allow_empty", "version", "config", "slices", "no_report", "compare", "inconclusive_width",
                  "progress_interval", "gate", "baseline", "window", "watch", "kafka_topic", "pubsub_topic",
                  "pubsub_subscription", "watch_interval", "watch_stop_after", "kafka_bootstrap_servers",
                  "kafka_expansion_service", "kafka_event_time", "kafka_max_records", "pubsub_timestamp_attribute"}}
#: the main group's options that every kind reads
COMMON = {"input", "input_format", "max_record_bytes", "max_id_chars", "metrics", "mode", "seed", "mc_samples", "ci_level", "output",
          "slice_bootstrap", "emotion_lexicon_csv", "group_extractor", "toxicity_scorer", "toxicity_classifier_threshold",
          "toxicity_level", "toxicity_group_set", "no_clustering"}
READ["batch"] |= COMMON | {"cluster_points"}
READ["windowed"] |= COMMON
GROUPS_THAT_DIFFER = ("streaming sources", "report", "scheduled audits")


def _data(tmp_path):
    rows = [{"session_id": f"s{i}", "assistant_id": "a", "language": "english", "qa_id": "q0", "query": "hi",
             "assistant": "fine thanks", "turn_index": 0, "timestamp": 1796000000 + i} for i in range(4)]
    path = tmp_path / "w.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("kind, dest", [(k, d) for k, t in O.IGNORED_BY_RUN.items() for d in t])
def test_an_option_a_run_kind_does_not_read_is_refused(kind, dest, tmp_path, monkeypatch, capsys):
    import fair_forge_beam.reports.load as load

    monkeypatch.setattr(load, "read_results", lambda path: {"config": {}})  # --compare's run, not read here
    monkeypatch.setattr(load, "read_run_info", lambda path: {})
    o = O.OPTIONS[dest]
    value = SAMPLE[dest]
    given = [o.flag] + ([] if value is None else [value.format(tmp=tmp_path)])
    argv = ["--quiet", f"--runner={FNAPI}", "--input", str(_data(tmp_path)), "--metrics", "humanity",
            "--output", str(tmp_path / "out"), *KIND_ARGV[kind], *given]
    with pytest.raises(SystemExit) as exc:
        audit.main(argv)
    err = [ln for ln in capsys.readouterr().err.splitlines() if "error:" in ln]
    assert exc.value.code == 2 and len(err) == 1 and o.flag in err[0], err
    assert not (tmp_path / "out").exists()


def test_every_option_is_classified_for_every_run_kind():
    for group in O.GROUPS:
        if group.title is not None and not group.title.startswith(GROUPS_THAT_DIFFER):
            continue  # metric options: read by every kind of run
        for o in group.options:
            for kind in ("windowed", "batch"):
                ignored = o.dest in O.IGNORED_BY_RUN[kind]
                assert ignored != (o.dest in READ[kind]), (kind, o.dest)


def test_compare_on_a_windowed_run_names_why(tmp_path, capsys, monkeypatch):
    import fair_forge_beam.reports.load as load

    monkeypatch.setattr(load, "read_results", lambda path: {"config": {}})
    monkeypatch.setattr(load, "read_run_info", lambda path: {})
    with pytest.raises(SystemExit):
        audit.main(["--quiet", "--input", str(_data(tmp_path)), "--metrics", "humanity", "--window", "fixed:1h",
                    "--output", str(tmp_path / "out"), "--compare", str(tmp_path)])
    assert "--compare: not read by a windowed run (--window): a windowed run writes per-window results" in \
        capsys.readouterr().err


def test_no_report_on_a_windowed_run_is_accepted(tmp_path):
    """--no-report asks for what a windowed run does anyway (it never writes report.html): a script
    that passes it to every run keeps working; the run writes no report."""
    out = tmp_path / "out"
    assert audit.main(["--quiet", f"--runner={FNAPI}", "--input", str(_data(tmp_path)), "--metrics", "humanity",
                       "--window", "fixed:1h", "--no-report", "--output", str(out)]) == 0
    assert out.is_dir() and not list(out.rglob("report.html"))
