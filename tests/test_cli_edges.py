"""Issue 28, hostile-tester trial 3 (repro 07_misc.sh): the compare command's bad folders, the
loop's usage errors and its failing generator, the run stage's unmatched --input (the audit's exit
code), and an empty --output on every command."""
from __future__ import annotations

import json
import os

import pytest

from helpers import FNAPI


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.mark.parametrize("case", ["missing", "empty folders", "files", "empty results.json", "not a results doc"])
def test_compare_refuses_what_is_not_a_run_in_one_line(case, tmp_path, capsys):
    from fair_forge_beam.reports.compare import main

    a, b = tmp_path / "a", tmp_path / "b"
    if case != "missing":
        a.mkdir(), b.mkdir()
    if case == "files":
        a, b = a / "x.jsonl", b / "y.jsonl"
        a.write_text("{}\n"), b.write_text("{}\n")
    elif case == "empty results.json":
        (a / "results.json").write_text(""), (b / "results.json").write_text("")
    elif case == "not a results doc":
        (a / "results.json").write_text("[]"), (b / "results.json").write_text("{}")
    with pytest.raises(SystemExit) as exc:
        main([str(a), str(b)])
    line = _one_line(capsys)
    assert exc.value.code == 2 and str(a) in line and line.startswith("fair-forge-beam compare: error:")


def test_an_audit_option_s_error_in_the_loop_names_the_loop(tmp_path, capsys):
    from pipelines import loop

    with pytest.raises(SystemExit) as exc:
        loop.run(["--output", str(tmp_path / "o"), "--mode", "bogus"])
    assert exc.value.code == 2 and _one_line(capsys).startswith("python -m pipelines.loop: error:")


def test_a_loop_whose_generator_fails_every_call_names_the_generator(tmp_path, capsys):
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer
    from pipelines import loop

    def wrong_schema(req):
        return {"score": 0.5, "insight": "not a question list"}

    out = tmp_path / "loop"
    with ScriptedOpenAIServer(wrong_schema) as gen:
        with pytest.raises(SystemExit) as exc:
            loop.run(["--corpus", "airline", "--num-queries", "1", "--generator-base-url", gen.base_url, "--generator-model", "g",
                      "--generator-cache", str(tmp_path / "g.sqlite3"), "--assistant-url", "http://127.0.0.1:9/v1",
                      "--assistant-model", "bot", "--metrics", "humanity", "--output", str(out), f"--runner={FNAPI}"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert exc.value.code == 4 and "generator" in err and "the generator's reply: queries: is required but missing" in err and "no input record" not in err, err
    assert not (out / "audit").exists()


def test_run_with_an_input_that_matches_nothing_exits_as_the_audit(tmp_path, capsys):
    """The audit exits 4 (an empty run: a missing export) when every --input matches no file, 2 when one
    of several does; the run stage said 2 in the first case."""
    from pipelines import audit, run_assistant

    nothing = str(tmp_path / "nothing-*.jsonl")
    common = ["--assistant-kind", "http", "--assistant-url", "http://127.0.0.1:9/x", "--request-template",
              '{"q": {{ query | tojson }}}', f"--runner={FNAPI}"]
    codes = {}
    for name, run in (("audit", lambda o: audit.run(["--metrics", "humanity", "--input", nothing, "--output", o, f"--runner={FNAPI}"])),
                      ("run", lambda o: run_assistant.run(["--input", nothing, "--output", o] + common))):
        with pytest.raises(SystemExit) as exc:
            run(str(tmp_path / name))
        codes[name] = exc.value.code
        assert "no input file matches" in _one_line(capsys)
    assert codes == {"audit": 4, "run": 4}
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"session_id": "s", "assistant_id": "a", "language": "english",
                                "conversation": [{"qa_id": "q", "query": "hi", "assistant": "hello"}]}) + "\n")
    with pytest.raises(SystemExit) as exc:
        run_assistant.run(["--input", nothing, "--input", str(data), "--output", str(tmp_path / "r2")] + common)
    assert exc.value.code == 2


@pytest.fixture(scope="module")
def a_run(tmp_path_factory):
    from pipelines import audit

    root = tmp_path_factory.mktemp("edges")
    (root / "in.jsonl").write_text(json.dumps({"session_id": "s", "assistant_id": "a", "language": "english", "conversation": [
        {"qa_id": "q", "query": "Can you help?", "assistant": "I am glad to help."}]}) + "\n")
    audit.run(["--quiet", "--no-report", "--metrics", "humanity", "--input", str(root / "in.jsonl"), "--output",
               str(root / "run"), f"--runner={FNAPI}"])
    return root / "run"


def _commands(tmp_path, run, out="", more=False):
    from fair_forge_beam.rollup import run as rollup
    from pipelines import audit, generate, loop, optimize, run_assistant, trend

    data = str(tmp_path / "in.jsonl")
    # more: what each command needs besides (so that only --output can be refused)
    gen = ["--generator-base-url", "http://127.0.0.1:9/v1", "--generator-model", "g"] if more else []
    return {
        "audit": lambda: audit.run(["--metrics", "humanity", "--input", data, "--output", out]),
        "windowed audit": lambda: audit.run(["--metrics", "humanity", "--input", data, "--window", "fixed:1h", "--output", out]),
        "loop": lambda: loop.run(["--assistant-url", "http://127.0.0.1:9/v1", "--assistant-model", "b", "--output", out, *gen]),
        "generate": lambda: generate.run(["--corpus", "airline", "--output", out, *gen]),
        "run": lambda: run_assistant.run(["--input", data, "--assistant-url", "http://127.0.0.1:9/v1", "--assistant-model", "b",
                                          "--output", out]),
        "rollup": lambda: rollup(["--from", str(run), "--output", out]),
        "trend": lambda: trend.main([str(run), "--output", out, "--no-plots"]),
        "optimize": lambda: optimize.main(["--model", "m", "--input", data, "--output", out,
                                           *(["--seed-prompt", "Answer."] if more else [])]),
    }


@pytest.mark.parametrize("command", ["audit", "loop", "generate", "run", "rollup", "trend", "optimize"])
def test_an_empty_output_is_refused_by_every_command(command, tmp_path, capsys, monkeypatch, a_run):
    """``--output ''`` was the current folder: a run there replaced the user's own stats/, windows/,
    report.html … though the folder never held a run."""
    here = tmp_path / "project"
    (here / "stats").mkdir(parents=True)
    (here / "stats" / "mine.csv").write_text("mine")
    (tmp_path / "in.jsonl").write_text(json.dumps({"session_id": "s", "assistant_id": "a", "language": "english",
                                                   "conversation": [{"qa_id": "q", "query": "hi", "assistant": "hello"}]}) + "\n")
    monkeypatch.chdir(here)
    with pytest.raises(SystemExit) as exc:
        _commands(tmp_path, a_run)[command]()
    line = _one_line(capsys)
    assert exc.value.code == 2 and "--output is empty" in line, line
    assert sorted(p.name for p in here.iterdir()) == ["stats"] and (here / "stats" / "mine.csv").read_text() == "mine"


@pytest.mark.parametrize("out", ["/", "//", "/tmp/.."])
@pytest.mark.parametrize("command", ["audit", "windowed audit", "loop", "generate", "run", "rollup", "trend", "optimize"])
def test_the_root_as_output_is_the_root_and_refused_by_every_command(command, out, tmp_path, capsys, monkeypatch, a_run):
    """trial48 B3: ``trend 'audits/*' --output / --no-plots`` said "wrote ./trend.html and ./trend.json" and wrote
    them in the current folder (``"/".rstrip("/") or "."``). ``/`` is the root (``folder_path``), and the root is
    refused as an output folder by every command, in one line (exit 2); nothing is written anywhere."""
    here = tmp_path / "project"
    here.mkdir()
    (tmp_path / "in.jsonl").write_text(json.dumps({"session_id": "s", "assistant_id": "a", "language": "english",
                                                   "conversation": [{"qa_id": "q", "query": "hi", "assistant": "hello"}]}) + "\n")
    monkeypatch.chdir(here)
    root_before = sorted(os.listdir("/"))
    with pytest.raises(SystemExit) as exc:
        _commands(tmp_path, a_run, out, more=True)[command]()
    line = _one_line(capsys)
    assert exc.value.code == 2 and "is the root of the file system: give a folder for the outputs" in line, line
    assert list(here.iterdir()) == [] and sorted(os.listdir("/")) == root_before


@pytest.mark.parametrize("given, folder", [("/", "/"), ("//", "/"), ("out/", "out"), ("gs://b/x/", "gs://b/x"), ("", "."),
                                           ("/results.json", "/results.json")])
def test_folder_path_keeps_the_root_the_root(given, folder):
    from fair_forge_beam.plain import folder_path

    assert folder_path(given) == folder


def test_every_place_that_names_a_run_folder_keeps_the_root(monkeypatch):
    """The sites of the old idiom (``rstrip("/") or "."``; ``rstrip("/")`` alone gave ``""``): a run folder or a
    ``results.json`` at the root is read at the root, never in the current folder (trial48 B3's class)."""
    from fair_forge_beam.io.paths import same_folder
    from fair_forge_beam.reports import html, load
    from fair_forge_beam.reports.compare import _run_folder
    from fair_forge_beam.reports.trend import _key

    assert load._run_dir("/") == "/" and load._run_dir("/results.json") == "/" and load._run_dir("results.json") == "."
    assert load._run_dir("a/results.json") == "a" and load._run_dir("gs://b/r/results.json") == "gs://b/r"
    assert _run_folder("/") == "/" and _run_folder("/results.json") == "/" and _run_folder("a/b/") == "a/b"
    assert _key("/") == "/" and _key("//") == "/" and same_folder("//") == "/"
    read = []

    def stop(run_dir, *a, **k):
        read.append(run_dir)
        raise FileNotFoundError(run_dir)

    monkeypatch.setattr(load, "read_results", stop)
    with pytest.raises(FileNotFoundError):
        html.write_report("/", out_path="/nonexistent-fix48d/report.html")
    assert read == ["/"]


@pytest.mark.parametrize("flag", ["--judge-api-key-env", "--guardian-api-key-env", "--generator-api-key-env"])
@pytest.mark.parametrize("state", ["unset", "empty"])
def test_an_api_key_variable_that_is_unset_is_a_usage_error_before_anything_runs(tmp_path, capsys, monkeypatch, flag, state):
    """Hostile-tester trial (issue 28): ``--judge-api-key-env NAME`` with NAME unset still called the
    judge, with no key. Every ``--…-api-key-env`` given names a variable that must hold the key:
    otherwise exit code 2 and one line naming the option and NAME (never a value), the endpoint
    never called, nothing written."""
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer
    from pipelines.audit import main

    monkeypatch.delenv("FFB_TEST_KEY_VAR", raising=False)
    if state == "empty":
        monkeypatch.setenv("FFB_TEST_KEY_VAR", "")
    with ScriptedOpenAIServer(lambda req: '{"score": 0.5, "insight": "ok"}') as srv:
        with pytest.raises(SystemExit) as exc:
            main(["--metrics", "context", "--judge-base-url", srv.base_url, "--judge-model", "m",
                  "--judge-cache", str(tmp_path / "c.sqlite"), "--output", str(tmp_path / "out"), flag, "FFB_TEST_KEY_VAR"])
        assert srv.count() == 0
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{flag} 'FFB_TEST_KEY_VAR': the environment variable 'FFB_TEST_KEY_VAR' is unset or empty" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == []


LOCAL_RUNNERS = {  # the workers read this environment, or one started from it (seal28 item 3)
    "in-memory": [f"--runner={FNAPI}"],
    "multi-process": [f"--runner={FNAPI}", "--direct_num_workers=2", "--direct_running_mode=multi_processing"],
    "prism": ["--runner=PrismRunner", "--prism_location=/opt/prism"],
    "local flink (ours)": ["--runner=PortableRunner", "--job_endpoint=localhost:8099", "--environment_type=PROCESS",
                           '--environment_config={"command":"/tmp/bin/boot"}'],
    "flink [local]": ["--runner=FlinkRunner", "--flink_master=[local]"],
    "loopback to a remote job server": ["--runner=PortableRunner", "--job_endpoint=flink.example.com:8099",
                                        "--environment_type=LOOPBACK"],
}
REMOTE_RUNNERS = {
    # options Beam's validation accepts (fix28z: a project 'p', or no --temp_location, is a usage error now)
    "dataflow": (["--runner", "DataflowRunner", "--project", "my-project", "--region", "europe-west1",
                  "--temp_location", "gs://my-bucket/tmp"], "the Dataflow workers"),
    "flex template": (["--runner=DataflowRunner", "--template_location=gs://b/t.json", "--project=my-project",
                       "--region=europe-west1", "--temp_location=gs://my-bucket/tmp"], "a Flex Template launch"),
    "flink cluster": (["--runner=FlinkRunner", "--flink_master=flink.example.com:8081"],
                      "the cluster at flink.example.com (--flink_master)"),
    "job server elsewhere": (["--runner=PortableRunner", "--job_endpoint=10.1.2.3:8099"], "the cluster at 10.1.2.3"),
    "docker workers": (["--runner=PortableRunner", "--job_endpoint=localhost:8099", "--environment_type=DOCKER"],
                       "Docker containers"),
}
_KEY_ARGS = ["--metrics", "context", "--judge-base-url", "http://127.0.0.1:9/v1", "--judge-model", "m"]


@pytest.mark.parametrize("runner", sorted(LOCAL_RUNNERS))
def test_an_unset_key_variable_is_a_usage_error_on_a_runner_whose_workers_read_this_environment(
        tmp_path, capsys, monkeypatch, runner):
    """seal28 (issue 28): the check applies where the key is read; these runners' workers are
    this process, its children or a cluster started here: exit 2, one line, before anything runs."""
    from pipelines.audit import parse_args

    monkeypatch.delenv("FFB_TEST_KEY_VAR", raising=False)
    with pytest.raises(SystemExit) as exc:
        parse_args([*_KEY_ARGS, "--output", str(tmp_path / "out"), "--judge-api-key-env", "FFB_TEST_KEY_VAR",
                    *LOCAL_RUNNERS[runner]])
    assert exc.value.code == 2
    assert "--judge-api-key-env 'FFB_TEST_KEY_VAR': the environment variable 'FFB_TEST_KEY_VAR' is unset" in _one_line(capsys)


@pytest.mark.parametrize("runner", sorted(REMOTE_RUNNERS))
def test_an_unset_key_variable_is_one_warning_on_a_remote_runner(tmp_path, capsys, caplog, monkeypatch, runner):
    """seal28 (issue 28): on Dataflow, a Flex Template launch or a cluster elsewhere the key may exist
    on the workers only: the launcher's usage error refused a run that would have worked. One
    warning naming the option, the variable and who reads it (never a value), the options parsed;
    parsed again (the loop parses the audit's options twice), still one warning."""
    import logging

    from fair_forge_beam import run_scope
    from pipelines.audit import parse_args

    monkeypatch.delenv("FFB_TEST_KEY_VAR", raising=False)
    beam_args, where = REMOTE_RUNNERS[runner]
    argv = [*_KEY_ARGS, "--output", str(tmp_path / "out"), "--judge-api-key-env", "FFB_TEST_KEY_VAR", *beam_args]
    # a run of its own: the warning is said once a run (this process's earlier tests' runs are not this one)
    with caplog.at_level(logging.WARNING, logger="fair_forge_beam.options"), run_scope.new_run():
        args, rest, _ = parse_args(argv)
        parse_args(argv)
    assert args.judge_api_key_env == "FFB_TEST_KEY_VAR" and rest
    warned = [r.getMessage() for r in caplog.records if r.name == "fair_forge_beam.options"]
    assert len(warned) == 1 and "\n" not in warned[0], warned
    assert warned[0].startswith("--judge-api-key-env 'FFB_TEST_KEY_VAR': the environment variable 'FFB_TEST_KEY_VAR' "
                                "is unset or empty here; the key is read by ") and where in warned[0], warned
    assert capsys.readouterr().err == ""  # no usage error


def test_a_config_files_api_key_variable_is_checked_too(tmp_path, capsys, monkeypatch):
    from pipelines.audit import main

    monkeypatch.delenv("FFB_TEST_KEY_VAR", raising=False)
    cfg = tmp_path / "audit.toml"
    cfg.write_text('metrics = "context"\n[options]\njudge-base-url = "http://127.0.0.1:9/v1"\njudge-model = "m"\n'
                   'judge-api-key-env = "FFB_TEST_KEY_VAR"\n', encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["--config", str(cfg), "--output", str(tmp_path / "out")])
    assert exc.value.code == 2
    assert "--judge-api-key-env 'FFB_TEST_KEY_VAR': the environment variable" in capsys.readouterr().err


@pytest.mark.slow
def test_without_the_option_a_local_judge_gets_no_key(tmp_path, monkeypatch):
    """No ``--judge-api-key-env`` and its default variable unset: no usage error, and the local
    judge is called with no key (a placeholder bearer, never a value of the environment)."""
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer
    from pipelines.audit import main

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with ScriptedOpenAIServer(lambda req: '{"score": 0.5, "insight": "ok"}') as srv:
        main(["--metrics", "context", "--judge-base-url", srv.base_url, "--judge-model", "m", "--judge-cache",
              str(tmp_path / "c.sqlite"), "--output", str(tmp_path / "out"), f"--runner={FNAPI}", "--no-report"])
        assert srv.count() > 0 and set(srv.authorizations) == {"Bearer not-needed"}
