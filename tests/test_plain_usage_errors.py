"""Issue 28: every usage error and warning a user reads embeds an exception's text only through
:mod:`fair_forge_beam.plain` — no class name (``OSError``, ``ValidationError``, ``KeyError`` ...),
no ``[Errno N]``, no Python repr (``b'…'``, a type name such as ``int``). One case per path that
embedded an exception's own text (or a Python type name) in a message."""
from __future__ import annotations

import json
import re

import pytest

#: what a plain message never holds: an exception class name, an errno, a bytes repr, pydantic's report
_PYTHON = re.compile(r"\b[A-Z][A-Za-z]*(?:Error|Exception|Invalid)\b|Errno|\bb'|\bb\"|input_type=|\[type=|<class |"
                     r"validation errors? for |NoneType|object at 0x|"
                     r"\b(?:got|is an?) (?:int|str|float|list|dict|tuple|bool)\b")


def _regulatory_corpus(tmp_path):
    from fair_forge_beam.metrics.registry import _regulatory
    from fair_forge_beam.statistical.frequentist import FrequentistMode

    corpus = tmp_path / "corpus.md"
    corpus.mkdir()  # a folder where a Markdown file is named ... with a folder inside named like a file
    (corpus / "sub.md").mkdir()
    _regulatory(FrequentistMode(), {"regulatory_corpus": str(corpus / "sub.md" / "x.md"), "regulatory_embedder": "hashing",
                                    "judge_base_url": "http://127.0.0.1:9/v1", "judge_model": "m"})


def _privacy_domain(tmp_path):
    from fair_forge_beam.metrics.registry import _privacy
    from fair_forge_beam.statistical.frequentist import FrequentistMode

    path = tmp_path / "domain.json"
    path.write_text(json.dumps({"classes": ["EMAIL"], "criticality_weights": {"EMAIL": 2},
                                "fn_severity_weights": {"EMAIL": "x"}, "extra": 1}), encoding="utf-8")
    _privacy(FrequentistMode(), {"privacy_domain": str(path)})


def _runner(tmp_path):
    from fair_forge_beam.options import check_runner

    check_runner("no_such_module.SomeRunner")


def _compare(tmp_path):
    from fair_forge_beam.reports.compare import main

    for name in ("a", "b"):
        (tmp_path / name / "results.json").mkdir(parents=True)
    main([str(tmp_path / "a"), str(tmp_path / "b")])


def _output_under_a_file(tmp_path):
    from fair_forge_beam.reports.output_folder import check_output_folder

    (tmp_path / "file").write_text("x")
    check_output_folder(str(tmp_path / "file" / "out"))


def _baseline(tmp_path):
    from fair_forge_beam.reports.load import read_baseline

    read_baseline(str(tmp_path / "no_such_run"))


def _schema(tmp_path):
    from fair_forge_beam.components.judge.parsing import resolve_schema

    resolve_schema(123)


def _schema_import(tmp_path):
    from fair_forge_beam.components.judge.parsing import resolve_schema

    resolve_schema("no_such_module_x:Model")


def _template_not_json(tmp_path):
    from fair_forge_beam.assistants.assistant import render_request

    render_request('{"q": {{ query | tojson }}', {"query": "hi"})


def _template_syntax(tmp_path):
    from fair_forge_beam.assistants.assistant import render_request

    render_request('{"q": {{ query | tojson }', {"query": "hi"})


def _gate_number(tmp_path):
    from fair_forge_beam.reports.gates import make_gate

    make_gate("toxicity DIDT ci_high <= 0x1F")


def _side_json_not_utf8(tmp_path):
    from fair_forge_beam.io.edge import read_side_json

    path = tmp_path / "x.json"
    path.write_bytes(b"\xff\xfe{}")
    read_side_json(str(path), "--x")


def _stage_missing_file(tmp_path):
    from pipelines import run_assistant

    run_assistant.run(["--input", str(tmp_path / "missing.jsonl"), "--assistant-url", "http://127.0.0.1:9/v1",
                       "--assistant-model", "m", "--output", str(tmp_path / "out")])


def _optimizer_session(tmp_path):
    from fair_forge_beam.optimizer.evaluation import load_examples

    _, dead = load_examples([{"session_id": 5, "conversation": "no"}])
    raise ValueError(dead[0]["reason"])


def _umap_failure_note(tmp_path, monkeypatch=None):
    import numpy as np

    from fair_forge_beam.components import clustering

    class Broken:
        class UMAP:
            def __init__(self, *a, **k):
                raise KeyError("n_neighbors")

    monkeypatch.setattr(clustering, "_import_umap", lambda *a, **k: Broken)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4)).astype(np.float32)
    out = clustering.fit_clusters(X, clustering.ClusterConfig(min_cluster_size=5))
    raise ValueError("; ".join(str(n) for n in getattr(out, "notes", None) or out.info.get("notes", [])))


CASES = {
    "--regulatory-corpus folder": _regulatory_corpus, "--privacy-domain invalid": _privacy_domain,
    "--runner dotted name": _runner, "compare unreadable results.json": _compare,
    "--output under a file": _output_under_a_file, "--baseline missing": _baseline,
    "judge output schema not a class": _schema, "judge output schema not importable": _schema_import,
    "request template not JSON": _template_not_json, "request template syntax": _template_syntax,
    "gate threshold": _gate_number, "side JSON not UTF-8": _side_json_not_utf8,
    "run stage missing input": _stage_missing_file, "optimizer invalid session": _optimizer_session,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_usage_error_says_why_in_plain_words(case, tmp_path, capsys):
    with pytest.raises((ValueError, SystemExit)) as exc:
        CASES[case](tmp_path)
    text = str(exc.value) if not isinstance(exc.value, SystemExit) else capsys.readouterr().err.strip()
    assert text and not _PYTHON.search(text), text


def test_a_failed_umap_is_a_note_in_plain_words(tmp_path, monkeypatch):
    with pytest.raises(ValueError) as exc:
        _umap_failure_note(tmp_path, monkeypatch)
    text = str(exc.value)
    assert "UMAP failed" in text and not _PYTHON.search(text), text
