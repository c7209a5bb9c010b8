"""Options of the generate / run / loop commands: declared once, --help shows the defaults, the
declared validations are usage errors, Flex Template parameters come from the declarations."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from helpers import REPO
from fair_forge_beam import options as loop_options  # the stage commands' options are the main table's


@pytest.mark.parametrize("module,command", [("pipelines.generate", "generate"), ("pipelines.run_assistant", "run"),
                                            ("pipelines.loop", "loop")])
def test_help_lists_every_declared_option_with_its_default(module, command):
    out = subprocess.run([sys.executable, "-m", module, "--help"], cwd=REPO, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO), "COLUMNS": "400"}).stdout
    for g in loop_options.groups_for(command):
        for o in g.options:
            m = re.search(r"\n  " + re.escape(o.flag) + r"\b(.*?)(?=\n  -|\Z)", out, re.S)  # its entry in the option list
            assert m, o.flag
            if o.default is not None and o.type is not bool:
                assert f"(default: {o.default})" in " ".join(m.group(1).split()), o.flag


def test_declared_validation_is_a_usage_error():
    from pipelines import generate

    with pytest.raises(SystemExit) as exc:
        generate.run(["--num-queries", "0", "--generator-base-url", "http://127.0.0.1:9/v1", "--generator-model", "m"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        generate.run(["--corpus", "no-such-corpus-folder", "--generator-base-url", "http://127.0.0.1:9/v1", "--generator-model", "m"])


def test_template_metadata_from_the_declarations():
    meta = loop_options.template_metadata(command="loop")
    names = [p["name"] for p in meta["parameters"]]
    assert len(names) == len(set(names)) and {"corpus", "assistant_url", "output"} <= set(names)
    for p in meta["parameters"]:
        assert re.compile(p["regexes"][0])
        example = p["helpText"].rsplit("Example: ", 1)[-1]
        assert re.fullmatch(p["regexes"][0], example), (p["name"], example)


def test_generator_api_key_env_is_one_declaration_defaulting_to_the_judge_s():
    from fair_forge_beam.options import command_options, value

    for command in ("audit", "generate", "loop"):  # the same declaration in every command that has it
        o = command_options(command)["generator_api_key_env"]
        assert (o.default, o.default_from) == (None, "judge-api-key-env"), command
    assert value({"judge_api_key_env": "JUDGE_KEY"}, "generator_api_key_env") == "JUDGE_KEY"
    assert value({"judge_api_key_env": "J", "generator_api_key_env": "G"}, "generator_api_key_env") == "G"
    assert value({}, "generator_api_key_env") == "OPENAI_API_KEY"  # pipelines.generate: the judge option's default


def test_the_loop_s_generator_reads_the_judge_s_key_variable(monkeypatch, tmp_path):
    """As the audit's prompt_evaluator does: the generator that defaults to the judge's endpoint
    uses the judge's key variable (was OPENAI_API_KEY in the loop whatever --judge-api-key-env said)."""
    from fair_forge_beam.generators import generate as gen_module
    from pipelines import loop

    seen = {}

    def handler(model, base_url, **kw):
        seen.update(kw, model=model, base_url=base_url)
        raise ValueError("stop before any request")

    monkeypatch.setattr(gen_module, "generator_handler", handler)
    monkeypatch.setenv("FFB_JUDGE_KEY", "sk-test-not-a-real-key")  # a given --judge-api-key-env must be set (issue 28)
    with pytest.raises(SystemExit) as exc:
        loop.run(["--assistant-url", "http://127.0.0.1:9/v1", "--assistant-model", "bot", "--judge-base-url",
                  "http://127.0.0.1:9/v1", "--judge-model", "judge", "--judge-api-key-env", "FFB_JUDGE_KEY",
                  "--output", str(tmp_path / "loop")])
    assert exc.value.code == 2
    assert (seen["api_key_env"], seen["model"], seen["base_url"]) == ("FFB_JUDGE_KEY", "judge", "http://127.0.0.1:9/v1")


@pytest.mark.parametrize("retries, batch", [("0", 0), ("1", 1), ("3", 3), ("7", 3)])
def test_generator_retries_bound_the_batch_attempts_too(retries, batch, monkeypatch, tmp_path):
    """Trial 28: ``loop --generator-retries 0`` still made 4 batch attempts (only the client's retries
    were set); 0 now means each request is tried once."""
    from fair_forge_beam.generators import generate as gen_module
    from pipelines import loop

    seen = {}

    def handler(model, base_url, **kw):
        seen.update(kw)
        raise ValueError("stop before any request")

    monkeypatch.setattr(gen_module, "generator_handler", handler)
    with pytest.raises(SystemExit):
        loop.run(["--assistant-url", "http://127.0.0.1:9/v1", "--assistant-model", "bot", "--judge-base-url",
                  "http://127.0.0.1:9/v1", "--judge-model", "judge", "--generator-retries", retries,
                  "--output", str(tmp_path / "loop")])
    assert (seen["client_retries"], seen["num_retries"]) == (int(retries), batch)


def test_a_generator_s_failed_calls_are_named_generator_calls(monkeypatch):
    from fair_forge_beam.components.judge.handler import JudgeTransientError, judge_request
    from fair_forge_beam.generators.generate import generator_handler
    from fair_forge_beam.testing.openai_server import Reply, ScriptedOpenAIServer

    with ScriptedOpenAIServer(lambda req: Reply("busy", status=503)) as srv:
        h = generator_handler("m", srv.base_url, cache_path=None, client_retries=0, num_retries=1, api_key_env="FFB_GEN_KEY")
        monkeypatch.setenv("FFB_GEN_KEY", "x")
        client = h.create_client()
        try:
            with pytest.raises(JudgeTransientError, match=r"^1 of 1 generator calls failed transiently"):
                h.request([judge_request("k", [("user", "q")])], client)
        finally:
            client.close()


def test_the_stages_chain_with_their_default_output_folders():
    """trial37 T8: generate and run_assistant both wrote to fair_forge_loop by default, so
    ``run_assistant --input fair_forge_loop/dataset.jsonl`` was refused (its output holds its input);
    and run_assistant's --help described --output by the other commands' files. Each stage has its
    own folder and its own words; the loop labels its sessions with the assistant's model name."""
    import argparse

    from pipelines import generate, loop, run_assistant
    from fair_forge_beam.loop_jobs import generated_assistant_id

    defaults = {name: m.build_parser().get_default("output") for name, m in
                (("generate", generate), ("run", run_assistant), ("loop", loop))}
    assert defaults == {"generate": "fair_forge_generated", "run": "fair_forge_run", "loop": "fair_forge_loop"}
    helps = {name: m.build_parser().format_help() for name, m in
             (("generate", generate), ("run", run_assistant), ("loop", loop))}
    assert "run_summary.json" in helps["run"] and "generated/" not in helps["run"]
    assert "generation_summary.json" in helps["generate"] and "run/" not in helps["generate"]
    assert "generated/, run/, audit/" in helps["loop"]

    def ns(**kw):
        return argparse.Namespace(**{"assistant_id": None, **kw})

    assert generated_assistant_id(ns()) == "assistant"  # generate alone
    assert generated_assistant_id(ns(assistant_model="my-bot")) == "my-bot"  # the loop
    assert generated_assistant_id(ns(assistant_id="v2", assistant_model="my-bot")) == "v2"
    assert generated_assistant_id(ns(assistant_model=None)) == "assistant"  # an http assistant


@pytest.mark.slow
def test_a_folder_holding_another_command_s_run_is_refused(tmp_path, capsys):
    """trial37b B7: generate and the loop shared the default folder ``fair_forge_loop``; each kept the
    other's files as the user's own, so generate -> loop -> generate left generation_summary.json beside
    loop_summary.json. Every command has its own default folder (test above), and generate, run_assistant
    and the loop refuse a folder holding another command's run, in one line (exit 2), before any call.
    fix38a: the main audit wrote into such a folder too (its files mixed with generate's dataset.jsonl),
    and a windowed audit's folder (windowed_results.json) was taken by the stages: every command now
    reads the one table of what marks each command's run (output_folder.RUN_MARKS)."""
    from fair_forge_beam.console import DEFAULT_OUTPUTS
    from fair_forge_beam.reports.output_folder import RUN_MARKS
    from pipelines import audit, explain, generate, loop, optimize, run_assistant, trend

    assert len(set(DEFAULT_OUTPUTS.values())) == len(DEFAULT_OUTPUTS), DEFAULT_OUTPUTS
    data = tmp_path / "in.jsonl"
    data.write_text('{"session_id": "s", "assistant_id": "a", "conversation": [{"qa_id": "q", "query": "hi", '
                    '"assistant": "x"}]}\n', encoding="utf-8")
    endpoint = ["http://127.0.0.1:9/v1"]
    commands = {
        "audit": lambda out: audit.run(["--input", str(data), "--metrics", "humanity", "--output", out]),
        "generate": lambda out: generate.run(["--corpus", "airline", "--generator-base-url", *endpoint,
                                              "--generator-model", "g", "--output", out]),
        "run": lambda out: run_assistant.run(["--input", str(data), "--assistant-url", *endpoint, "--assistant-model",
                                              "bot", "--output", out]),
        "loop": lambda out: loop.run(["--assistant-url", *endpoint, "--assistant-model", "bot", "--judge-base-url",
                                      *endpoint, "--judge-model", "judge", "--output", out]),
        # trial38 T7: the trend wrote trend.html / trend.json into an audit's folder, exit 0
        "trend": lambda out: trend.main([str(tmp_path / "no-such-run"), "--output", out]),
        "explain": lambda out: explain.main(["--input", str(data), "--model", "tiny-random", "--output", out]),
        "optimize": lambda out: optimize.main(["--input", str(data), "--model", "m", "--seed-prompt", "be kind",
                                               "--output", out]),
    }
    assert sorted(commands) == sorted(RUN_MARKS)  # every command that has a run of its own checks
    for command, start in commands.items():
        for other, summary in ((o, name) for o, names in RUN_MARKS.items() for name in names):
            if other == command:
                continue
            out = tmp_path / f"{command}-over-{summary}"
            out.mkdir()
            (out / summary).write_text("{}", encoding="utf-8")
            with pytest.raises(SystemExit) as exit_:
                start(str(out))
            err = capsys.readouterr().err.strip().splitlines()
            assert exit_.value.code == 2 and len(err) == 1, err
            assert f"--output: {out} holds a run of {other} ({summary}), not of {command}" in err[0], err
            assert sorted(p.name for p in out.iterdir()) == [summary]  # untouched


def test_a_rollup_refuses_a_folder_holding_a_run_of_another_command(tmp_path, capsys):
    """fix38a: the roll-up writes the audit's layout (results.json) and, like the audit, refuses a folder
    holding a run of generate, run_assistant or the loop (their files would mix), in one line (exit 2)."""
    from fair_forge_beam.reports.output_folder import MARKER, RUN_MARKS
    from fair_forge_beam.rollup import run

    day = tmp_path / "day1"
    (day / "stats").mkdir(parents=True)
    (day / "stats" / "manifest.json").write_text("{}", encoding="utf-8")
    (day / MARKER).write_text("{}", encoding="utf-8")
    for other in ("generate", "run", "loop"):
        summary = RUN_MARKS[other][0]
        out = tmp_path / f"rollup-over-{other}"
        out.mkdir()
        (out / summary).write_text("{}", encoding="utf-8")
        with pytest.raises(SystemExit) as exit_:
            run(["--from", str(day), "--output", str(out)])
        err = capsys.readouterr().err.strip().splitlines()
        assert exit_.value.code == 2 and len(err) == 1, err
        assert f"--output: {out} holds a run of {other} ({summary}), not of rollup" in err[0], err
        assert sorted(p.name for p in out.iterdir()) == [summary]  # untouched


@pytest.mark.parametrize("flags, said", [
    (["--assistant-model", "m" * 1100], "--assistant-model 'mmm"),
    (["--assistant-model", "   "], "--assistant-model '   '"),
    (["--assistant-model", "bot", "--max-id-chars", "2"], "--assistant-model 'bot'"),
    (["--assistant-model", "bot", "--assistant-id", "x" * 1025], "--assistant-id 'xxx"),
])
def test_an_assistant_id_the_reader_would_reject_is_refused_before_any_call(flags, said, tmp_path, capsys):
    """trial37b B6: ``--assistant-model`` with a 1,100-character name called the generator, dead-lettered
    every session ("assistant_id of 1,100 characters is over the limit of 1,024") and the audit exited 4
    with "empty run" and no reason; a blank name was refused as "assistant_id must be a non-empty
    string", an option the user did not give. The id is checked where it is chosen, with the reader's
    rule (io.read.header_id_problem), in one line naming the option: exit 2, no call, nothing written."""
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer
    from pipelines import loop

    calls = []
    with ScriptedOpenAIServer(lambda r: calls.append(r) or "{}") as endpoint:
        with pytest.raises(SystemExit) as exit_:
            loop.run(["--corpus", "airline", "--num-samples", "1", "--chunks-per-sample", "1", "--num-queries", "1",
                      "--judge-base-url", endpoint.base_url, "--judge-model", "judge", "--assistant-url",
                      endpoint.base_url, *flags, "--generator-cache", str(tmp_path / "gen.sqlite3"),
                      "--metrics", "humanity", "--output", str(tmp_path / "out")])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert exit_.value.code == 2 and len(err) == 1, err
    assert said in err[0] and "cannot label the generated sessions" in err[0], err
    assert ("give --assistant-id NAME" in err[0]) == ("--assistant-model" in said), err
    assert len(err[0]) < 600 and not calls and not (tmp_path / "out").exists()


def test_a_loop_whose_assistant_answered_nothing_stops_after_its_run_stage(tmp_path, capsys):
    """trial38 T3: the assistant failed every call (HTTP 500 here, a non-UTF-8 body there); the loop
    went on to the audit, which said "fair-forge-beam: empty run: no input record (the inputs hold no
    interaction)", blaming the inputs. It stops after its run stage with the run stage's own reason
    (as ``run_assistant`` alone prints it), the loop named and ``run/dead_letter.jsonl`` pointed at:
    exit 4, no audit folder."""
    import json

    from fair_forge_beam.reports.empty_run import EmptyRun
    from fair_forge_beam.testing.openai_server import Fault, ScriptedOpenAIServer
    from pipelines import loop

    def generator(req):
        return {"queries": [{"query": "How many bags can a gold member check?"}], "chunk_summary": "baggage"}

    out = tmp_path / "out"
    with ScriptedOpenAIServer(generator) as gen, \
            ScriptedOpenAIServer("fine", faults=[Fault("server_error", retry_after=None)]) as bot:
        with pytest.raises(EmptyRun):
            loop.run(["--corpus", "airline", "--num-samples", "2", "--chunks-per-sample", "1", "--num-queries", "1",
                      "--seed", "3", "--generator-base-url", gen.base_url, "--generator-model", "gen",
                      "--generator-cache", str(tmp_path / "gen.sqlite3"), "--assistant-url", bot.base_url,
                      "--assistant-model", "bot", "--assistant-retries", "0", "--metrics", "humanity",
                      "--output", str(out)])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    # run/ is not published (trial48 B1): its stage is kept beside it and named
    (stage,) = [p for p in out.iterdir() if p.name.startswith("run.staging-")]
    assert not (out / "run").exists()
    dead = (stage / "dead_letter.jsonl").read_text(encoding="utf-8").splitlines()
    assert dead and all(json.loads(d)["stage"] == "runner" for d in dead)
    assert err[-1].startswith("python -m pipelines.loop: empty run: the assistant answered no question: "
                              "no turn was answered ("), err[-1:]
    assert "HTTP 500" in err[-1] and str(stage / "dead_letter.jsonl") in err[-1], err[-1:]
    assert "no input record" not in err[-1] and not (out / "audit").exists()


def test_compare_json_refuses_a_file_a_third_run_owns(tmp_path, capsys):
    """trial38 T7: ``compare --json`` wrote its file into any folder, a third run's too (an audit's
    comparison.json replaced). A name a run of ours writes (the main job's outputs, a command's mark) in a
    folder holding any command's run is refused, through the same table (RUN_MARKS) and check, in one line
    (exit 2); a file of another name there is the user's own, kept by every command, and is written (a
    comparison saved beside the results.json files it compares: test_cli's)."""
    from fair_forge_beam.reports import compare
    from fair_forge_beam.reports.output_folder import RUN_MARKS

    for other, names in RUN_MARKS.items():
        out = tmp_path / f"json-in-{other}"
        out.mkdir()
        (out / names[0]).write_text("{}", encoding="utf-8")
        for owned in ("comparison.json", "run_info.json", "generation_summary.json", "result.json"):
            if owned == names[0]:
                continue
            with pytest.raises(SystemExit) as exit_:
                compare.main([str(tmp_path / "a"), str(tmp_path / "b"), "--json", str(out / owned)])
            err = capsys.readouterr().err.strip().splitlines()
            assert exit_.value.code == 2 and len(err) == 1, err
            assert f"--json: {out} holds a run of {other} ({names[0]}), not of compare" in err[0], err
            assert sorted(p.name for p in out.iterdir()) == [names[0]]


def test_an_interrupted_loop_leaves_no_empty_folder_it_made(monkeypatch, tmp_path):
    """trial38 T13: Ctrl-C during generation said "nothing was written (…/generated was not created)"
    and left the empty output folder the loop had made for its stages. The loop removes the folder it
    made when it ends with it empty; a folder that existed before, or holds anything, is kept. Fails
    before (the folder stayed)."""
    from fair_forge_beam import loop_jobs
    from pipelines import loop

    def interrupted(args, beam_args):
        (tmp_path / "made" / ".generated.stage").mkdir(parents=True)  # what the stage makes, then removes
        (tmp_path / "made" / ".generated.stage").rmdir()
        raise KeyboardInterrupt

    monkeypatch.setattr(loop_jobs, "run_generate", interrupted)
    monkeypatch.setattr(loop_jobs, "build_assistant_handler", lambda args: None)
    flags = ["--assistant-url", "http://127.0.0.1:9/v1", "--assistant-model", "bot", "--judge-base-url",
             "http://127.0.0.1:9/v1", "--judge-model", "judge", "--metrics", "humanity"]
    with pytest.raises(KeyboardInterrupt):
        loop.run([*flags, "--output", str(tmp_path / "made")])
    assert not (tmp_path / "made").exists()
    (tmp_path / "mine").mkdir()  # the user's own (empty) folder: kept
    monkeypatch.setattr(loop_jobs, "run_generate", lambda a, b: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        loop.run([*flags, "--output", str(tmp_path / "mine")])
    assert (tmp_path / "mine").is_dir()


def test_a_mark_that_is_not_a_file_and_a_path_through_a_mark_are_refused(tmp_path):
    """trial38b B14: a folder named run_summary.json was read as a run of run_assistant, a dangling symlink of a
    mark's name was ignored, and ``--output o1/results.json/..`` (o1 holding an audit) passed: the path is now
    looked at where it leads, and a mark's name that is not a regular file is refused as content no run wrote."""
    import os

    from fair_forge_beam.reports.output_folder import check_no_other_run

    folder = tmp_path / "o1"
    (folder / "run_summary.json").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"holds 'run_summary.json', a folder, where run's run keeps a file"):
        check_no_other_run(str(folder), "audit")
    dangling = tmp_path / "o2"
    dangling.mkdir()
    os.symlink(tmp_path / "nowhere", dangling / "loop_summary.json")
    with pytest.raises(ValueError, match=r"holds 'loop_summary.json', a link to nothing"):
        check_no_other_run(str(dangling), "audit")
    audit = tmp_path / "o3"
    audit.mkdir()
    (audit / "results.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match=r"holds a run of audit \(results.json\), not of generate"):
        check_no_other_run(str(audit / "results.json" / ".."), "generate")
    linked = tmp_path / "o4"
    linked.mkdir()
    os.symlink(audit / "results.json", linked / "results.json")  # a link to a file is a mark
    with pytest.raises(ValueError, match=r"holds a run of audit"):
        check_no_other_run(str(linked), "run")
    check_no_other_run(str(folder), "run")  # a command's own mark is its own to replace
    check_no_other_run(str(audit), "audit")


@pytest.mark.slow
def test_the_loop_s_seed_read_by_its_generator_is_no_unread_warning(tmp_path, caplog):
    """trial40 J5: the loop's documented ``--seed 7`` (generators.md §3) warned ``--config None: seed = 7
    is not read by a frequentist run``: no --config was given, and the loop's generate stage reads the
    seed. An option another stage of the command reads gives no "not read" warning."""
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer
    from pipelines import loop

    def generator(req):
        return {"queries": [{"query": "How many bags can a gold member check?"}], "chunk_summary": "baggage"}

    out = tmp_path / "out"
    with ScriptedOpenAIServer(generator) as gen, ScriptedOpenAIServer("Two bags, glad to help.") as bot, \
            caplog.at_level("WARNING"):
        loop.run(["--corpus", "airline", "--num-samples", "1", "--chunks-per-sample", "1", "--num-queries", "1",
                  "--seed", "7", "--generator-base-url", gen.base_url, "--generator-model", "gen",
                  "--generator-cache", str(tmp_path / "gen.sqlite3"), "--assistant-url", bot.base_url,
                  "--assistant-model", "bot", "--metrics", "humanity", "--mode", "frequentist", "--no-report",
                  "--output", str(out)])
    said = [r.getMessage() for r in caplog.records if "not read" in r.getMessage() or "None" in r.getMessage()]
    assert said == [], said
    assert (out / "audit" / "results.json").exists()


def test_an_unread_value_no_config_file_gave_is_named_by_its_option():
    """trial40 J5: the warning named ``--config None`` as the source of a value no config file gave;
    it names the option (``--seed 7``), and the file where one gave it."""
    from fair_forge_beam import options as O
    from pipelines import audit

    args = audit.build_parser().parse_known_args(["--metrics", "humanity", "--mode", "frequentist", "--seed", "7"])[0]
    assert O.unread_config_lines(args, set(), None) == [
        "--seed 7 is not read by a frequentist run (--mode frequentist): only --mode bayesian reads it: ignored"]
    assert O.unread_config_lines(args, set(), "a.toml") == [
        "--config a.toml: seed = 7 is not read by a frequentist run (--mode frequentist): only --mode bayesian "
        "reads it: ignored"]
    assert O.unread_config_lines(args, set(), None, ["seed"]) == []


@pytest.mark.parametrize("cli, expected", [
    ([], (7, "toxicity", 3)),  # the config file's values, for the loop's stages and its audit alike
    (["--seed", "42", "--metrics", "humanity"], (42, "humanity", 3)),  # the command line wins, defaults' values too
    (["--seed=9", "--endpoint-down-after", "5"], (9, "toxicity", 5)),
])
def test_a_config_files_values_reach_the_loop_unless_its_command_line_gives_them(tmp_path, cli, expected):
    """The loop's options that the audit reads too (``--seed``, ``--metrics``, ...) took the loop's
    defaults over a ``--config`` file's values: ``metrics = "toxicity"`` and ``seed = 7`` audited
    Humanity with seed 42, without a word (found beside trial40 J5)."""
    from pipelines import loop

    config = tmp_path / "c.toml"
    config.write_text('metrics = "toxicity"\nseed = 7\nmode = "bayesian"\n[options]\nendpoint_down_after = 3\n',
                      encoding="utf-8")
    _, args, _, audit_args, _, _ = loop.parse(["--config", str(config), *cli, "--output", str(tmp_path / "o")])
    for ns in (args, audit_args):
        assert (ns.seed, ns.metrics, ns.endpoint_down_after) == expected
    assert audit_args.mode == "bayesian"


def test_the_loops_stages_get_every_beam_option_the_audit_gets(monkeypatch, tmp_path):
    """trial45 B1: the generate and run stages got only ``--runner*`` and ``--direct_*`` of the loop's Beam
    options, so on Flink (``--job_endpoint``) or Prism (``--prism_location``) they failed ("You must specify a
    --job_endpoint", "Unable to fetch remote prism binary") where the audit would have run. Fails before (the
    stage got ``['--runner=PortableRunner']``)."""
    from fair_forge_beam import loop_jobs
    from pipelines import loop

    got = []

    def generate(args, beam_args):
        got.append(list(beam_args))
        raise KeyboardInterrupt  # the stage's options are all this test needs

    monkeypatch.setattr(loop_jobs, "run_generate", generate)
    monkeypatch.setattr(loop_jobs, "build_assistant_handler", lambda args: None)
    beam = ["--runner=PortableRunner", "--job_endpoint=127.0.0.1:9", "--environment_type=LOOPBACK",
            "--prism_location=/opt/prism", "--direct_num_workers=2"]
    flags = ["--assistant-url", "http://127.0.0.1:9/v1", "--assistant-model", "bot", "--judge-base-url",
             "http://127.0.0.1:9/v1", "--judge-model", "judge", "--metrics", "humanity"]
    with pytest.raises(KeyboardInterrupt):
        loop.run([*flags, *beam, "--output", str(tmp_path / "out")])
    assert got == [beam]
