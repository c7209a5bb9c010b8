"""Issue 28 (trial 28f): inputs, outputs and side files that never mislead or destroy.

* An input given explicitly as nothing (``inputs = []`` in a ``--config`` file, any repeatable
  option given as an empty list) is a usage error: the shipped example data is the default only
  when no input is given at all (B6: ``inputs = []`` audited the example data, exit 0).
* An output path that is, or lies inside, what the command reads (a run folder, its
  ``results.json``, an input or side file) is a one-line usage error, exit 2, and nothing is
  touched (B9: ``compare RUN BASE --json RUN/results.json`` replaced the run's results, exit 0).
* A side file (read or written) that is a FIFO, a socket or a device is a one-line usage error,
  exit 2, before it is opened (B11: ``--emotion-lexicon-csv FIFO`` hung the audit forever); only
  ``--config`` reads a pipe (``--config <(...)``, tests/test_damaged_side_files.py).
"""
from __future__ import annotations

import json
import os
import threading
import time

import pytest

from test_trend import doc, tox


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.mark.parametrize("key", ["inputs", "input"])
def test_a_config_giving_an_empty_input_list_is_a_usage_error_not_the_example_data(tmp_path, capsys, key):
    from pipelines import audit

    cfg = tmp_path / "audit.toml"
    cfg.write_text(f'{key} = []\nmetrics = ["humanity"]\noutput = "o_empty"\n', encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        audit.parse_args(["--config", str(cfg)])
    line = _one_line(capsys)
    assert exc.value.code == 2 and str(cfg) in line and "empty list" in line, line
    # the loop reads its audit options through the same parsing
    from pipelines import loop

    with pytest.raises(SystemExit) as exc:
        loop.run(["--config", str(cfg), "--corpus", "airline", "--output", str(tmp_path / "lp")])
    line = _one_line(capsys)
    assert exc.value.code == 2 and "empty list" in line, line
    assert not (tmp_path / "o_empty").exists() and not (tmp_path / "lp").exists()


def test_an_empty_list_for_any_repeatable_config_option_is_refused(tmp_path, capsys):
    from pipelines import audit

    cfg = tmp_path / "audit.toml"
    cfg.write_text('inputs = ["a.jsonl"]\noutput = "o"\n[options]\nkafka_topic = []\n', encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        audit.parse_args(["--config", str(cfg)])
    line = _one_line(capsys)
    assert exc.value.code == 2 and "kafka-topic" in line and "empty list" in line, line


def _run(folder):
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(doc("bayesian", [tox("overall", 1, 10, 3)])), encoding="utf-8")
    (folder / "run_info.json").write_text(json.dumps({"started_at": "2026-12-01T00:00:00Z"}), encoding="utf-8")
    return folder


def _files(root) -> dict:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_compare_json_never_over_or_inside_a_run_it_reads(tmp_path, capsys):
    from fair_forge_beam.reports import compare

    run, base = _run(tmp_path / "run"), _run(tmp_path / "base")
    before = _files(tmp_path)
    for current in (run, run / "results.json"):
        for target in (run / "results.json", run / "run_info.json", run / "cmp.json", base / "results.json",
                       run / "sub" / ".." / "results.json"):
            with pytest.raises(SystemExit) as exc:
                compare.main([str(current), str(base), "--json", str(target)])
            line = _one_line(capsys)
            assert exc.value.code == 2 and "which this command reads" in line, (current, target, line)
            assert _files(tmp_path) == before, target
    assert compare.main([str(run), str(base), "--json", str(tmp_path / "cmp.json")]) == 0  # beside the runs: fine
    assert json.loads((tmp_path / "cmp.json").read_text(encoding="utf-8"))


def test_the_converter_never_writes_over_what_it_reads(tmp_path, capsys):
    from fair_forge_beam.io.agentic_sources import main

    src = tmp_path / "traj.json"
    src.write_text("[]", encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["tau_bench", str(src), str(src)])
    line = _one_line(capsys)
    assert exc.value.code == 2 and "which this command reads" in line, line
    assert src.read_text(encoding="utf-8") == "[]"


def test_cluster_points_is_never_an_input_or_a_side_file(tmp_path, capsys, monkeypatch):
    import fair_forge_beam.reports.results as results
    from pipelines import audit

    def reached(*a, **k):
        raise AssertionError("the audit went past its checks")

    monkeypatch.setattr(results, "results_config", reached)
    src = tmp_path / "in.jsonl"
    src.write_text('{"session_id": "s", "assistant_id": "a", "conversation": [{"qa_id": "q", "query": "hi", '
                   '"assistant": "hello"}]}\n', encoding="utf-8")
    lex = tmp_path / "lex.csv"
    lex.write_text("english;spanish;Anger;Anticipation;Disgust;Fear;Joy;Sadness;Surprise;Trust\n"  # read: humanity runs
                   "happy;feliz;0;0;0;0;1;0;0;1\n", encoding="utf-8")
    for target, extra in ((src, []), (lex, ["--emotion-lexicon-csv", str(lex)])):
        with pytest.raises(SystemExit) as exc:
            audit.run(["--input", str(src), "--metrics", "toxicity,humanity", "--group-extractor", "embedding",
                       "--cluster-points", str(target), "--output", str(tmp_path / "o"), *extra])
        line = _one_line(capsys)
        assert exc.value.code == 2 and "--cluster-points" in line and "which this command reads" in line, line
    assert not (tmp_path / "o").exists()


def test_generate_never_replaces_the_file_it_reads_its_prompt_from(tmp_path, capsys):
    from pipelines import generate

    out = tmp_path / "gen"
    out.mkdir()
    (tmp_path / "c.md").write_text("# A\n\nSome text about things.\n", encoding="utf-8")
    prompt = out / "dataset.jsonl"
    prompt.write_text("Ask about {{ context }}", encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        generate.main(["--corpus", str(tmp_path / "c.md"), "--system-prompt-file", str(prompt),
                       "--generator-base-url", "http://127.0.0.1:9/v1", "--generator-model", "m", "--output", str(out)])
    line = _one_line(capsys)
    assert exc.value.code == 2 and "which this command reads" in line, line
    assert prompt.read_text(encoding="utf-8") == "Ask about {{ context }}"


def _never_hangs(call, fifo):
    """``call()``'s ``SystemExit`` code; a call that opened ``fifo`` to read it (blocked there) fails the
    test, released by a writer. A call still running after 20 s is told apart by the FIFO itself: a
    non-blocking open for writing succeeds only while a reader has it open (else ENXIO), so a call that is
    merely slow (a loaded machine importing a model's libraries: the full run's one failure here, at load
    13) is waited for, up to 600 s, and one blocked on the FIFO is caught within 0.2 s of the probe."""
    box = {}

    def target():
        try:
            call()
            box["code"] = 0
        except SystemExit as exc:
            box["code"] = exc.code
        except BaseException as exc:  # noqa: BLE001 - reported below
            box["exc"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(20)
    deadline = time.monotonic() + 600
    while t.is_alive():
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # a reader has it open: the call is blocked there
        except OSError:  # ENXIO: nobody reads it; the call is slow, not blocked
            assert time.monotonic() < deadline, "still running after 620 s, not on the FIFO"
            t.join(0.5)
            continue
        t.join(5)
        pytest.fail("blocked on the FIFO (released by a writer)")
    assert "exc" not in box, box
    return box.get("code")


def test_every_side_file_that_is_a_fifo_is_a_one_line_usage_error(tmp_path, capsys, monkeypatch):
    import fair_forge_beam.reports.results as results
    from pipelines import audit, explain, generate, optimize

    def reached(*a, **k):
        raise AssertionError("the audit went past its checks")

    monkeypatch.setattr(results, "results_config", reached)
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    src = tmp_path / "in.jsonl"
    src.write_text('{"session_id": "s", "assistant_id": "a", "conversation": [{"qa_id": "q", "query": "hi", '
                   '"assistant": "hello"}]}\n', encoding="utf-8")
    (tmp_path / "c.md").write_text("# A\n\nSome text about things.\n", encoding="utf-8")
    judge = ["--judge-base-url", "http://127.0.0.1:9/v1", "--judge-model", "m"]
    gen = ["--corpus", str(tmp_path / "c.md"), "--generator-base-url", "http://127.0.0.1:9/v1",
           "--generator-model", "m", "--output", str(tmp_path / "g")]
    cases = {
        "--emotion-lexicon-csv": lambda: audit.run(["--input", str(src), "--metrics", "humanity",
                                                    "--emotion-lexicon-csv", fifo, "--output", str(tmp_path / "o")]),
        "--privacy-domain": lambda: audit.run(["--input", str(src), "--metrics", "privacy", "--privacy-domain", fifo,
                                               "--output", str(tmp_path / "o")]),
        "--seed-prompt-file": lambda: audit.run(["--input", str(src), "--metrics", "prompt_evaluator",
                                                 "--seed-prompt-file", fifo, *judge, "--output", str(tmp_path / "o")]),
        "--judge-cache": lambda: audit.run(["--input", str(src), "--metrics", "context", *judge, "--judge-cache", fifo,
                                            "--output", str(tmp_path / "o")]),
        "--cluster-points": lambda: audit.run(["--input", str(src), "--metrics", "toxicity", "--group-extractor",
                                               "embedding", "--cluster-points", fifo, "--output", str(tmp_path / "o")]),
        "--system-prompt-file": lambda: generate.main([*gen, "--system-prompt-file", fifo]),
        "--generator-cache": lambda: generate.main([*gen, "--generator-cache", fifo]),
        "--input": lambda: explain.main(["--input", fifo, "--output", str(tmp_path / "e"), "--model", "m"]),
        "--seed-prompt-file ": lambda: optimize.main(["--input", str(src), "--output", str(tmp_path / "p"),
                                                      "--model", "m", "--seed-prompt-file", fifo]),
    }
    for option, call in cases.items():
        code = _never_hangs(call, fifo)
        line = _one_line(capsys)
        assert code == 2 and option.strip() in line and "FIFO" in line, (option, code, line)
        assert os.path.exists(fifo) and not os.path.isfile(fifo), option  # never replaced either
