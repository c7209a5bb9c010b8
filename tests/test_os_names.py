"""Paths from the OS whose names are not UTF-8 text (issue 28, trial 28e B7): a file named
``caf\\xe9.jsonl`` (a latin-1 byte), directly or through a glob, ``--output o_out\\xe9``, and
``données-ü.jsonl`` under ``LC_ALL=C PYTHONUTF8=0`` ended in an 87-line ``UnicodeEncodeError``
traceback (Beam's lineage metric, exit code 1). Every command now refuses such a name in one line,
exit code 2, naming it with its bytes escaped; what prints a path escapes them too."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO
from pipelines import audit
from fair_forge_beam.plain import has_os_bytes, path_name_problem, shown_text

LATIN1 = os.fsdecode(b"caf\xe9")  # what Python makes of the byte: 'caf\udce9'
E9 = os.fsdecode(b"\xe9")
ROW = {"session_id": "s0", "assistant_id": "bot-a", "language": "english", "context": "",
       "conversation": [{"qa_id": "q0", "query": "How are you?", "assistant": "I am glad to help, thank you!",
                         "ground_truth_assistant": "I am glad."}]}


def _usage_error(argv, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        audit.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_names_are_shown_with_their_bytes_escaped():
    assert has_os_bytes(LATIN1) and not has_os_bytes("café")
    assert shown_text(f"{LATIN1}.jsonl") == "caf\\xe9.jsonl" and shown_text("café") == "café"
    # an ASCII locale decodes a UTF-8 name byte by byte: shown as the characters it spells
    assert shown_text(os.fsdecode("données".encode()) if sys.getfilesystemencoding() == "ascii" else
                      "donn\udcc3\udca9es") == "données"
    assert path_name_problem(f"{LATIN1}.jsonl", "--input") == \
        "--input: caf\\xe9.jsonl: the name is not valid UTF-8 (each \\xNN is a byte that is not); rename it"
    assert "PYTHONUTF8=1" in path_name_problem("donn\udcc3\udca9es", "--input")
    assert path_name_problem("données", "--input") is None


def test_every_way_in_is_one_line_exit_code_2(tmp_path, capsys):
    base = os.fsencode(tmp_path)
    with open(base + b"/caf\xe9.jsonl", "w", encoding="utf-8") as f:
        f.write(json.dumps(ROW) + "\n")
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(ROW) + "\n", encoding="utf-8")
    bad = str(tmp_path / f"{LATIN1}.jsonl")
    shown = str(tmp_path / "caf\\xe9.jsonl")
    out = str(tmp_path / "out")
    for argv, expected in (
        (["--input", str(tmp_path / "caf*.jsonl"), "--metrics", "humanity", "--output", out], f"--input: {shown}"),
        (["--input", bad, "--metrics", "humanity", "--output", out], f"--input: {shown}"),
        ([f"--input={bad}", "--metrics", "humanity", "--output", out], f"--input: {shown}"),
        (["--input", str(good), "--metrics", "humanity", "--output", str(tmp_path / f"o_out{E9}")],
         f"--output: {tmp_path}/o_out\\xe9"),
        (["trend", str(tmp_path / f"run{E9}")], f"a path given: {tmp_path}/run\\xe9"),
        (["rollup", "--from", str(tmp_path / f"run{E9}"), "--output", out], f"--from: {tmp_path}/run\\xe9"),
    ):
        err = _usage_error(argv, capsys)
        assert f"error: {expected}: the name is not valid UTF-8" in err, (argv, err)
        assert "\udce9" not in err and "Traceback" not in err
    assert not os.path.exists(out)
    # found by a pattern, not given: trend's and rollup's run folders
    runs = tmp_path / "runs"
    runs.mkdir()
    os.mkdir(os.fsencode(runs) + b"/n\xe9")
    (Path(os.fsdecode(os.fsencode(runs) + b"/n\xe9")) / "results.json").write_text("{}", encoding="utf-8")
    assert f"error: {runs}/*: {runs}/n\\xe9: the name is not valid UTF-8" in _usage_error(["trend", str(runs / "*")], capsys)
    assert f"error: --from: {runs}/n\\xe9: the name" in _usage_error(["rollup", "--from", str(runs / "*"), "--output", out], capsys)


@pytest.mark.slow
def test_an_ascii_locale_is_named_not_a_traceback(tmp_path):
    """'données-ü.jsonl' under LC_ALL=C PYTHONUTF8=0: the bytes are UTF-8 but Python reads them as ASCII."""
    (tmp_path / "données-ü.jsonl").write_text(json.dumps(ROW) + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LC_") and k not in ("LANG", "PYTHONIOENCODING")}
    env.update(LC_ALL="C", PYTHONUTF8="0", PYTHONPATH=str(REPO))
    for pattern in ("données-ü.jsonl", "donn*.jsonl"):
        p = subprocess.run([sys.executable, "-m", "pipelines.audit", "--input", pattern, "--metrics", "humanity",
                            "--output", "out"], cwd=tmp_path, env=env, capture_output=True, timeout=300)
        err = p.stderr.decode("ascii", "replace").strip().splitlines()
        err = [ln for ln in err if "apitools" not in ln]  # Beam's import-time warning
        assert p.returncode == 2 and len(err) == 1, (p.returncode, err)
        assert "donn\\xe9es-\\xfc.jsonl: the name is not ASCII" in err[0] and "PYTHONUTF8=1" in err[0], err
