"""trial48 B1: an empty run never replaces the last good output; its failures are read in the stage it keeps.

An empty ``generate`` (every generator reply garbage) left the folder's ``dataset.jsonl`` 0 lines, and an
empty ``run_assistant`` (every turn HTTP 500) replaced the answered set with 15 ``[ERROR]`` turns, while
docs/data.md said an empty run leaves ``OUT`` exactly as it was. Now every command publishes through
``staged_output`` and an empty run (``EmptyRun`` naming its stage) keeps ``OUT`` whole and its stage,
unpublished, named in the one line; the next run into ``OUT`` removes that stage.
"""
from __future__ import annotations

import json
import os
import re

import pytest

from fair_forge_beam.reports.empty_run import EMPTY_RUN_EXIT_CODE
from fair_forge_beam.testing.openai_server import Fault, ScriptedOpenAIServer

GEN = ["--corpus", "callcenter", "--strategy", "random", "--num-samples", "2", "--chunks-per-sample", "1",
       "--seed", "42", "--num-queries", "1", "--assistant-id", "my-bot", "--generator-model", "gpt-4o-mini",
       "--generator-retries", "0", "--parquet"]


def _queries(req):
    return {"queries": [{"query": "How long do refunds take?", "query_type": "recall"}], "chunk_summary": "s"}


def _files(folder) -> dict:
    """Every file under ``folder`` with its bytes."""
    got = {}
    for root, _, names in os.walk(folder):
        for n in names:
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                got[os.path.relpath(p, folder)] = f.read()
    return got


def _kept(err_line: str, out) -> str:
    """The stage the empty run's line names, checked to be a sibling of ``out`` that exists."""
    m = re.search(r"kept unpublished in (\S+) until the next run into (\S+) \(exit code 4", err_line)
    assert m, err_line
    assert m.group(2) == str(out) and os.path.dirname(m.group(1)) == os.path.dirname(str(out)), err_line
    assert os.path.basename(m.group(1)).startswith(os.path.basename(str(out)) + ".staging-") and os.path.isdir(m.group(1))
    return m.group(1)


def test_an_empty_generate_keeps_the_last_good_dataset_and_its_stage_to_read(tmp_path, capsys):
    from pipelines import generate

    out = tmp_path / "out"
    with ScriptedOpenAIServer(_queries) as srv:
        assert generate.main([*GEN, "--generator-base-url", srv.base_url, "--generator-cache", str(tmp_path / "c1.sqlite"),
                              "--output", str(out)]) == 0
    good = _files(out)
    assert good["dataset.jsonl"].count(b"\n") == 2
    capsys.readouterr()
    with ScriptedOpenAIServer(_queries, faults=[Fault("malformed", match="")]) as srv:
        code = generate.main([*GEN, "--generator-base-url", srv.base_url, "--generator-cache", str(tmp_path / "c2.sqlite"),
                              "--output", str(out)])
    said = capsys.readouterr()
    err = said.err.strip().splitlines()
    assert code == EMPTY_RUN_EXIT_CODE
    assert err[-1].startswith("generate: empty run: no interaction was generated ("), err[-1]
    assert f"; {out} is left as it was; this run's outputs (its dead letters) are kept unpublished in " in err[-1]
    assert _files(out) == good  # the last good run, byte for byte
    stage = _kept(err[-1], out)
    assert json.loads(said.out)["interactions"] == 0  # the summary is printed all the same
    dead = open(os.path.join(stage, "dead_letter.jsonl"), encoding="utf-8").read().splitlines()
    assert len(dead) == 2 and not os.path.exists(os.path.join(stage, "_SUCCESS"))
    # the next run into out removes it (and publishes)
    with ScriptedOpenAIServer(_queries) as srv:
        assert generate.main([*GEN, "--generator-base-url", srv.base_url, "--generator-cache", str(tmp_path / "c1.sqlite"),
                              "--output", str(out)]) == 0
    assert sorted(os.listdir(tmp_path)) == ["c1.sqlite", "c2.sqlite", "out"]


SESSIONS = [{"session_id": f"s{i}", "assistant_id": "a", "conversation": [
    {"qa_id": "q1", "query": f"Hello {i}", "assistant": ""}, {"qa_id": "q2", "query": "Thanks", "assistant": ""}]}
    for i in range(3)]


def test_an_empty_run_assistant_keeps_the_answered_set(tmp_path, capsys):
    from pipelines import run_assistant

    data, out = tmp_path / "set.jsonl", tmp_path / "out"
    data.write_text("".join(json.dumps(s) + "\n" for s in SESSIONS), encoding="utf-8")

    def run(srv):
        return run_assistant.main(["--input", str(data), "--assistant-kind", "openai", "--assistant-model", "m",
                                   "--assistant-retries", "0", "--assistant-url", srv.base_url, "--output", str(out)])

    with ScriptedOpenAIServer(lambda req: "an answer") as srv:
        assert run(srv) == 0
    good = _files(out)
    assert good["dataset.jsonl"].count(b"an answer") == 6
    capsys.readouterr()
    with ScriptedOpenAIServer(lambda req: "an answer", faults=[Fault("server_error", match="")]) as srv:
        code = run(srv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EMPTY_RUN_EXIT_CODE and err[-1].startswith("run: empty run: no turn was answered (6 turn(s)"), err[-1]
    assert _files(out) == good
    stage = _kept(err[-1], out)
    assert open(os.path.join(stage, "dataset.jsonl"), encoding="utf-8").read().count("[ERROR] HTTP 500") == 6


@pytest.mark.slow
def test_an_empty_audit_keeps_its_stage_named_and_the_next_run_removes_it(tmp_path, capsys):
    from pipelines import audit

    out = tmp_path / "out"
    data = tmp_path / "in.jsonl"
    data.write_text("this is not json\n", encoding="utf-8")
    for _ in range(2):  # a second empty run: the first one's stage gone, its own kept
        with pytest.raises(SystemExit) as exc:
            audit.run(["--quiet", "--metrics", "humanity", "--input", str(data), "--runner=DirectRunner", "--output", str(out)])
        assert exc.value.code == 4
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"; {out} was not created; this run's outputs" in err[0], err
        stage = _kept(err[0], out)
        assert open(os.path.join(stage, "dead_letter", os.listdir(os.path.join(stage, "dead_letter"))[0])).read()
        assert sorted(os.listdir(tmp_path)) == ["in.jsonl", os.path.basename(stage)]  # no lock, no other stage
