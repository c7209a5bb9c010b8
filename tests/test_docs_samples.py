"""The sample console output in README.md and docs/data.md is what the command prints: every
line a sample shows (rows may be cut, marked "...") is a line of the real output, whitespace
aside. The samples had drifted ("0 data-quality warnings" where the same command prints 19)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import FNAPI

REPO = Path(__file__).resolve().parent.parent


def _sample(doc: str) -> list[str]:
    """The lines of the code block in ``doc`` that starts with the audit's banner."""
    text = (REPO / doc).read_text(encoding="utf-8")
    block = re.search(r"```\n(fair_forge_beam audit: .*?)```", text, re.S).group(1)
    return [ln for ln in block.splitlines() if ln.strip() and ln.strip() != "..."]


def _norm(line: str) -> str:
    """``line``, whitespace aside and the report named by the not-scored line left out (the samples'
    run writes the report, this module's runs with ``--no-report``, which names ``dead_letter/`` only)."""
    return " ".join(line.split()).replace("Every one in fair_forge_output/report.html and ", "Every one in ")


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    import contextlib
    import io

    from pipelines import audit

    out = tmp_path_factory.mktemp("docs") / "fair_forge_output"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        audit.run(["--metrics", "humanity,toxicity", "--mode", "bayesian", "--output", str(out), "--no-report",
                   f"--runner={FNAPI}"])
    return {_norm(ln.replace(str(out), "fair_forge_output")) for ln in buf.getvalue().splitlines()}


@pytest.mark.slow
@pytest.mark.parametrize("doc", ["README.md", "docs/data.md"])
def test_the_sample_output_is_what_the_command_prints(doc, printed):
    missing = [ln for ln in _sample(doc) if _norm(ln) not in printed
               and not _norm(ln).startswith("outputs: ")]  # the sample's run writes the report too
    assert not missing, f"{doc} shows lines the command does not print: {missing}"


def _may_be_cut(line: str) -> bool:
    """A line a sample may leave out: a table row (``assistant_id=hh-chosen 991 400 …``), the
    footnote of the single-session rows it cut, the ``outputs:`` line (the sample's run writes the report too)."""
    return bool(re.match(r"\S+=\S*\s+\d+\s", line)) or line.startswith(("* ", "outputs: "))


@pytest.mark.parametrize("doc", ["README.md", "docs/data.md"])
def test_the_sample_output_leaves_out_no_line_but_table_rows(doc, printed):
    """trial46 B6: docs/data.md's sample (and README's) left out the line the command prints after the
    tables, ``Not scored at all (2 assistants: every interaction is a dead letter): support-bot …``."""
    shown = {_norm(ln) for ln in _sample(doc)}
    left_out = sorted(ln for ln in printed if ln not in shown and not _may_be_cut(ln) and not ln.startswith("n/a ("))
    assert not left_out, f"{doc} leaves out lines the command prints: {left_out}"


@pytest.mark.parametrize("doc", ["README.md", "docs/data.md"])
def test_a_sample_row_shown_n_a_comes_with_the_line_that_says_why(doc, printed):
    """trial48 B9: an estimate shown "n/a" had no word of why; the command now says it under the metric's
    table (``n/a (mean_spearman): …``): a sample showing an n/a cell shows that line (one whose cut rows
    alone were n/a may leave it out)."""
    metric, why_shown, n_a_shown = None, {}, set()
    for ln in _sample(doc):
        head = re.match(r"(\w+): interactions:", ln)
        metric = head.group(1) if head else metric
        if _may_be_cut(ln.strip()) and " n/a" in ln:
            n_a_shown.add(metric)
        if ln.strip().startswith("n/a ("):
            why_shown[metric] = _norm(ln)
    assert n_a_shown, f"{doc}: the sample shows no n/a cell any more: update this test"
    for m in n_a_shown:
        assert m in why_shown and why_shown[m] in printed, f"{doc}: {m}'s rows show n/a without the line saying why"


def test_the_empty_run_line_of_cli_md_is_what_the_command_prints(tmp_path, monkeypatch, capsys):
    """trial49 B6: docs/cli.md quoted the empty run's line as ``out is left as it was (exit code 4; …)``;
    a first run into ``out`` prints ``out was not created; this run's outputs (its dead letters) are kept
    unpublished in …/out.staging-… until the next run into out (exit code 4; …)``. The sample's command is
    run as written (its three Spanish interactions made here) and its line compared, the stage's folder
    and suffix aside."""
    import json
    import shlex

    from pipelines import audit

    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    command, line = re.search(r"```\n\$ (fair-forge-beam --metrics humanity --input spanish_only\.jsonl[^\n]*)\n"
                              r"(fair-forge-beam: empty run: [^\n]*)\n```", text).groups()
    monkeypatch.chdir(tmp_path)
    session = {"session_id": "s1", "assistant_id": "bot", "language": "spanish", "context": "", "conversation": [
        {"qa_id": str(i), "query": f"¿Pregunta {i}?", "assistant": f"Estoy muy feliz, respuesta {i}.",
         "ground_truth_assistant": "Estoy triste."} for i in range(3)]}
    (tmp_path / "spanish_only.jsonl").write_text(json.dumps(session, ensure_ascii=False) + "\n", encoding="utf-8")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        audit.run([*shlex.split(command)[1:], f"--runner={FNAPI}"])
    assert exc.value.code == 4
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1, err
    printed = re.sub(r" /\S+/out\.staging-\S+? until", " …/out.staging-… until", err[0])  # its absolute path
    assert printed == line, f"docs/cli.md shows\n{line}\nthe command prints\n{printed}"
