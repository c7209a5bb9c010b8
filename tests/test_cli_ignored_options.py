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
KIND_ARGV = {"windowed": ["--window", "fixed:1h"], "batch": [], "files": [], "no-kafka": [], "no-pubsub": [],
             "no-report": ["--no-report"],
             # what the Flex Template launcher passes (Beam's validation accepts these offline)
             "template": ["--runner=DataflowRunner", "--project=my-project", "--region=europe-west1",
                          "--temp_location=gs://my-bucket/tmp", "--template_location=gs://my-bucket/t.json"]}
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
    argv = ["--quiet", *([] if kind == "template" else [f"--runner={FNAPI}"]), "--input", str(_data(tmp_path)),
            "--metrics", "humanity", "--output", str(tmp_path / "out"), *KIND_ARGV[kind], *given]
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


# ---- trial34 T4 / T5: options of a statistical mode, a metric or a report the run does not have ----

def _refused(argv, tmp_path, capsys, flag, says=""):
    with pytest.raises(SystemExit) as exc:
        audit.main(["--quiet", f"--runner={FNAPI}", "--input", str(_data(tmp_path)), "--output", str(tmp_path / "out"),
                    *argv])
    err = [ln for ln in capsys.readouterr().err.splitlines() if "error:" in ln]
    assert exc.value.code == 2 and len(err) == 1 and f"error: {flag}: not read by" in err[0] and says in err[0], err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("given", [["--seed", "7"], ["--mc-samples", "1000"]])
def test_a_bayesian_option_of_a_frequentist_run_is_refused(given, tmp_path, capsys):
    """T4: results.json recorded seed null, mc_samples null, and nothing was said."""
    _refused(["--metrics", "humanity", "--mode", "frequentist", *given], tmp_path, capsys, given[0],
             "not read by a frequentist run (--mode frequentist): only --mode bayesian reads it")


def test_inconclusive_width_with_no_report_is_refused(tmp_path, capsys):
    """T4: --inconclusive-width is read by report.html alone, which --no-report does not write."""
    _refused(["--metrics", "humanity", "--no-report", "--inconclusive-width", "0.5"], tmp_path, capsys,
             "--inconclusive-width", "a run with --no-report: no report.html is written")


def test_rollup_refuses_inconclusive_width_with_no_report(tmp_path, capsys):
    from fair_forge_beam import rollup

    with pytest.raises(SystemExit) as exc:
        rollup.run(["--from", str(tmp_path / "a"), "--from", str(tmp_path / "b"), "--output", str(tmp_path / "r"),
                    "--no-report", "--inconclusive-width", "0.5"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--inconclusive-width: not read by a run with --no-report" in err, err


def test_frequentist_intervals_are_at_the_ci_level_asked_for(tmp_path):
    """T4: --mode frequentist --ci-level 0.99 gave 95 %: the frequentist mode has intervals (BestOf's
    Wald intervals, a comparison's Agresti-Caffo ones, at results.json's ci_level): it now reads it."""
    from fair_forge_beam.metrics.registry import statistical_mode
    from fair_forge_beam.statistical.bradley_terry import estimate_bradley_terry  # noqa: F401 (reads mode.ci_level)

    assert statistical_mode({"mode": "frequentist", "ci_level": 0.99}).ci_level == 0.99
    out = tmp_path / "out"
    audit.main(["--quiet", f"--runner={FNAPI}", "--no-report", "--input", str(_data(tmp_path)), "--metrics", "humanity",
                "--mode", "frequentist", "--ci-level", "0.99", "--output", str(out)])
    assert json.loads((out / "results.json").read_text())["config"]["ci_level"] == 0.99


#: an option of each metric group given to a run of a metric that does not read it (T5)
METRIC_OPTIONS = [(["--toxicity-scorer", "hurtlex"], "humanity"), (["--group-extractor", "embedding"], "humanity"),
                  (["--agentic-k", "5"], "humanity"), (["--judge-base-url", "http://127.0.0.1:9/v1"], "humanity"),
                  (["--judge-model", "m"], "toxicity"), (["--guardian-model", "m"], "humanity"),
                  (["--chunk-size", "500"], "humanity"), (["--bestof-mode", "all_pairs"], "humanity"),
                  (["--vision-threshold", "0.5"], "humanity"), (["--prompt-k", "5"], "humanity"),
                  (["--privacy-text", "query"], "humanity"), (["--role-strict"], "humanity"),
                  (["--emotion-lexicon-csv", "{tmp}/w.jsonl"], "toxicity"),
                  (["--slice-bootstrap", "gamma", "--mode", "bayesian"], "toxicity")]


@pytest.mark.parametrize("given, metrics", METRIC_OPTIONS)
def test_an_option_of_a_metric_not_run_is_refused(given, metrics, tmp_path, capsys):
    given = [g.format(tmp=tmp_path) for g in given]
    _refused(["--metrics", metrics, *given], tmp_path, capsys, given[0], f"a run of --metrics {metrics}: only metric")


def test_every_metric_option_names_metrics_that_exist():
    """The declarations say which metrics read an option; the names are the registry's."""
    from fair_forge_beam.metrics.registry import METRICS

    scoped = [o for o in O.OPTIONS.values() if o.read_by_metrics]
    assert len(scoped) > 40
    for o in scoped:
        assert set(o.read_by_metrics) <= set(METRICS), o.name
    for group in O.GROUPS:
        if group.title and group.title.split()[0] in ("Agentic", "LLM", "Regulatory", "BestOf", "Vision", "Privacy"):
            assert all(o.read_by_metrics for o in group.options), group.title


def _config_run(tmp_path, name, caplog, extra=()):
    """A humanity run whose --config file (shared with a toxicity job) sets --toxicity-scorer hurtlex."""
    config = tmp_path / "shared.toml"
    config.write_text('[options]\ntoxicity-scorer = "hurtlex"\n', encoding="utf-8")
    out = tmp_path / name
    data = tmp_path / f"{name}.jsonl"
    rows = [{"session_id": f"{name}{i}", "assistant_id": "a", "language": "english", "qa_id": "q0", "query": "hi",
             "assistant": "fine thanks, glad to help", "turn_index": 0} for i in range(4)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with caplog.at_level("WARNING"):
        assert audit.main([f"--runner={FNAPI}", "--no-report", "--input", str(data), "--metrics", "humanity",
                           "--output", str(out), *(["--config", str(config)] if not extra else []), *extra]) == 0
    return out


@pytest.mark.slow
def test_a_config_option_of_a_metric_not_run_is_a_warning_and_rolls_up(tmp_path, caplog, capsys):
    """T5: a --config shared by several jobs is normal (the command line's --metrics replaces the
    file's): its option of a metric not run is said in one warning line, not refused; and two
    humanity runs, one of which recorded --toxicity-scorer hurtlex, roll up and compare as alike."""
    from fair_forge_beam import rollup
    from fair_forge_beam.reports.compare import run_differences
    from fair_forge_beam.reports.load import read_results, read_run_info

    a = _config_run(tmp_path, "a", caplog)
    said = [r.getMessage() for r in caplog.records if "toxicity-scorer" in r.getMessage()]
    assert said == [f"--config {tmp_path / 'shared.toml'}: toxicity-scorer = 'hurtlex' is not read by a run of "
                    "--metrics humanity: only metric toxicity reads it: ignored"], said
    assert read_run_info(str(a))["options"]["toxicity_scorer"] == "hurtlex"  # recorded as run
    b = _config_run(tmp_path, "b", caplog, extra=["--quiet"])
    diffs = run_differences(read_results(str(a)), read_results(str(b)), read_run_info(str(a)), read_run_info(str(b)))
    assert not [d for d in diffs if "toxicity" in d["what"]], diffs
    rollup.run(["--from", str(a), "--from", str(b), "--output", str(tmp_path / "r"), "--quiet", "--no-report"])
    assert (tmp_path / "r" / "results.json").exists()


# ---- trial34 T9: messages that quote or advise what the user did not write ----

def test_a_bare_in_every_is_every_slice():
    from fair_forge_beam.reports.gates import make_gate

    assert make_gate("toxicity toxic_rate mean <= 0.5 in every").slices == "every"


def test_a_rollup_gate_on_a_metric_its_runs_did_not_run_gives_rollup_advice():
    from fair_forge_beam.reports.gates import GateConfigError, resolve_gates

    with pytest.raises(GateConfigError) as exc:
        resolve_gates(["toxicity toxic_rate mean <= 0.5"], ["humanity"], False, ("overall",), command="rollup")
    assert "not in the runs rolled up" in str(exc.value) and "--metrics" not in str(exc.value)
    assert "add it to the metrics" not in str(exc.value)


# ---- trial36 T9: a zero is a value like any other ("given" was decided by `in (None, False, ...)`, and 0 == False) ----

@pytest.mark.parametrize("given", [["--seed", "0"], ["--judge-retries", "0"], ["--endpoint-down-after", "0"]])
def test_a_zero_of_an_option_the_run_does_not_read_is_refused(given, tmp_path, capsys):
    """T9: --seed 0 (frequentist), --judge-retries 0 and --endpoint-down-after 0 (--metrics humanity) exited 0
    without a word, while --seed 7 / --judge-retries 5 were refused."""
    _refused(["--metrics", "humanity", "--mode", "frequentist", *given], tmp_path, capsys, given[0])


def _numeric_unread_options():
    return [d for d, o in O.OPTIONS.items() if o.type in (int, float)
            and O.unread_because(o, "humanity", "frequentist") and not O.same_value(o.default, 0)]


@pytest.mark.parametrize("dest", _numeric_unread_options())
def test_every_numeric_option_given_zero_counts_as_given(dest):
    """The same verdict for every value: each number option a humanity frequentist run does not read,
    given 0 (or 0.0), is named as not read, as it is for any other value."""
    o = O.OPTIONS[dest]
    for zero in (0, 0.0):
        args = audit.build_parser().parse_known_args(["--metrics", "humanity", "--mode", "frequentist"])[0]
        setattr(args, dest, o.type(zero))
        problem = O.ignored_option_problem(args, {dest})
        assert problem is not None and problem.startswith(f"{o.flag}: not read by"), (dest, zero, problem)


def test_a_flag_left_false_and_an_empty_list_are_not_given():
    import argparse

    assert not O._given(argparse.Namespace(seed=None), "seed")
    assert O._given(argparse.Namespace(seed=0), "seed")
    assert not O.same_value(0, False) and not O.same_value(True, 1) and O.same_value(0, 0.0)


# ---- trial39 T3: a Flex Template launch evaluates no gate and writes no comparison or report ----

def test_a_template_launch_refuses_the_config_files_gates(tmp_path, capsys, monkeypatch):
    """T3: templates/README.md told users to put gates in the --config file; a template launch
    evaluated none of them and exited 0 without a word."""
    import apache_beam as beam

    monkeypatch.setattr(beam.Pipeline, "run", lambda self, *a, **kw: pytest.fail("the graph was built and run"))
    config = tmp_path / "g.toml"
    config.write_text('gates = ["humanity mean_entropy mean <= 0.001"]\n', encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        audit.main(["--quiet", "--config", str(config), "--input", str(_data(tmp_path)), "--metrics", "humanity",
                    "--output", str(tmp_path / "out"), *KIND_ARGV["template"]])
    err = [ln for ln in capsys.readouterr().err.splitlines() if "error:" in ln]
    assert exc.value.code == 2 and len(err) == 1, err
    assert f"--config {config}: gates: not read by a Flex Template launch (--template_location)" in err[0], err
    assert "evaluates no gate" in err[0] and not (tmp_path / "out").exists()


@pytest.mark.parametrize("runner", [[], [f"--runner={FNAPI}"], ["--runner=PrismRunner"]])
def test_a_template_location_on_a_runner_other_than_dataflow_is_refused(runner, tmp_path, capsys):
    """T3: the in-memory runner ignored --template_location and ran the job here: a run that said
    'Flex Template launch: job graph written' and skipped its gates."""
    with pytest.raises(SystemExit) as exc:
        audit.main(["--quiet", "--input", str(_data(tmp_path)), "--metrics", "humanity", "--output",
                    str(tmp_path / "out"), *runner, f"--template_location={tmp_path / 't.json'}"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if "error:" in ln]
    assert exc.value.code == 2 and len(err) == 1 and "--template_location: a Flex Template's job graph is written " \
        "for Dataflow only" in err[0], err
    assert not (tmp_path / "out").exists() and not (tmp_path / "t.json").exists()


def test_what_a_template_launch_does_not_read_is_no_template_parameter():
    """The options a template launch refuses are left out of templates/metadata.json (TEMPLATE_EXCLUDED)."""
    from fair_forge_beam.audit_config import TEMPLATE_EXCLUDED

    assert set(O.IGNORED_BY_RUN["template"]) <= set(TEMPLATE_EXCLUDED)


def test_compare_names_a_template_launchs_run_for_what_it_is(tmp_path):
    """T3: compare said a template-launched run (published by its Dataflow job: its sealed manifest
    lists its files, no run_info.json) was "a run of an older layout, or a partial copy"."""
    from fair_forge_beam.reports.compare import provenance_gaps

    run = tmp_path / "tpl"
    (run / "stats").mkdir(parents=True)
    (run / "results.json").write_text("{}", encoding="utf-8")
    manifest = {"stored": {}, "files": {"results.json": {"size": 2, "sha256": "0" * 64}}}
    (run / "stats" / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    said = provenance_gaps(str(run), "tpl")
    assert said.startswith("tpl has no run_info.json (a Flex Template launch's run: its Dataflow job published it")
    assert "older layout" not in said
    manifest["files"]["run_info.json"] = {"size": 2, "sha256": "0" * 64}  # sealed by a launcher: a partial copy
    (run / "stats" / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert "(a run of an older layout, or a partial copy)" in provenance_gaps(str(run), "tpl")
