"""Issue 28 (trial 28, B4 and B5): a damaged run file or side file is one line, never a traceback.

B4: a run's ``results.json`` / ``run_info.json`` nested 300,000 levels ended in ``RecursionError``
(``edge.read_side_json`` caught only ``ValueError``); valid JSON with wrong inner types
(``metrics.toxicity = 5``, ``slices = "x"`` or ``null``, ``config = [1]``, a slice that is a string,
``summary = "x"``) in ``AttributeError`` / ``TypeError`` in ``trend`` and ``audit --compare``. Side
files' nesting is now bounded as input records are (64 levels) and run files are checked against
their shape where they are read (``reports.run_files``): one line naming the file and the field,
exit 2.

B5: ``--emotion-lexicon-csv`` was read first on the workers: a file over the limit, a directory or a
non-UTF-8 file gave three tracebacks and exit 1; it is read in the launcher's pre-flight now.
``--privacy-domain`` and ``--config`` files nested deep ended in ``RecursionError``, and a recursive
macro in ``generate --system-prompt-file`` too: each is a one-line usage error."""
from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys

import pytest

_EST = {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n": 10}
_DOC = {
    "config": {"inputs": ["a.jsonl"], "metrics": ["toxicity"], "mode": "bayesian", "seed": 42, "ci_level": 0.95,
               "beta_prior_a": 1.0, "beta_prior_b": 1.0, "versions": {"fair_forge_beam": "0.1.0"}},
    "summary": {"interactions_read": 10, "rejected_at_read": 0, "rejected_at_read_reasons": {},
                "data_quality_warnings": 0, "data_quality_by_kind": {},
                "metrics": {"toxicity": {"scored": 10, "interactions_scored": 10, "interactions_not_scored": 0,
                                         "dead_letters": 0, "dead_letter_unit": "x", "dead_letter_reasons": {}}}},
    "metrics": {"toxicity": {"headline_columns": ["toxic_rate"], "common": {"lexicon": "HurtLex"},
                             "slices": [{"metric": "toxicity", "level": "slice", "slice": "overall", "n_interactions": 10,
                                         "n_sessions": 3, "toxic_rate": dict(_EST), "estimates": {"DR": dict(_EST)}}]}},
}


def _mutated(change):
    doc = copy.deepcopy(_DOC)
    change(doc)
    return doc


#: (name, change, the field the refusal names)
_DAMAGE = [
    ("tox5", lambda d: d["metrics"].__setitem__("toxicity", 5), "metrics.toxicity"),
    ("slicesstr", lambda d: d["metrics"]["toxicity"].__setitem__("slices", "x"), "metrics.toxicity.slices"),
    ("slicesnull", lambda d: d["metrics"]["toxicity"].__setitem__("slices", None), "metrics.toxicity.slices"),
    ("configlist", lambda d: d.__setitem__("config", [1]), "config"),
    ("slice0str", lambda d: d["metrics"]["toxicity"].__setitem__("slices", ["x"]), "metrics.toxicity.slices.0"),
    ("summarystr", lambda d: d.__setitem__("summary", "x"), "summary"),
    ("seedtext", lambda d: d["config"].__setitem__("seed", "42"), "config.seed"),
    ("seedtrue", lambda d: d["config"].__setitem__("seed", True), "config.seed"),
    ("headlinestr", lambda d: d["metrics"]["toxicity"].__setitem__("headline_columns", "toxic_rate"),
     "metrics.toxicity.headline_columns"),
    ("reasonslist", lambda d: d["summary"]["metrics"]["toxicity"].__setitem__("dead_letter_reasons", ["a"]),
     "summary.metrics.toxicity.dead_letter_reasons"),
    ("meantext", lambda d: d["metrics"]["toxicity"]["slices"][0]["toxic_rate"].__setitem__("mean", "0.5"),
     "metrics.toxicity.slices.0.toxic_rate.mean"),
    ("nestedest", lambda d: d["metrics"]["toxicity"]["slices"][0]["estimates"]["DR"].__setitem__("ci_low", [0]),
     "metrics.toxicity.slices.0.estimates.DR.ci_low"),
    ("slicekey", lambda d: d["metrics"]["toxicity"]["slices"][0].__setitem__("slice", 3), "metrics.toxicity.slices.0.slice"),
]


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_a_side_json_nested_deeper_than_records_may_be_is_one_line(tmp_path):
    from fair_forge_beam.io.edge import MAX_NESTING, read_side_json

    for levels in (300_000, MAX_NESTING + 1):
        p = tmp_path / f"deep{levels}.json"
        p.write_text('{"metrics": {"x": ' + _deep(levels - 2) + "}}", encoding="utf-8")
        with pytest.raises(ValueError) as err:
            read_side_json(p, "a run's file")
        assert str(p) in str(err.value) and f"{MAX_NESTING} levels" in str(err.value) and "\n" not in str(err.value)
    ok = tmp_path / "ok.json"
    ok.write_text('{"metrics": {"x": ' + _deep(MAX_NESTING - 2) + "}}", encoding="utf-8")
    assert read_side_json(ok, "a run's file")["metrics"]


@pytest.mark.parametrize("name,change,field", _DAMAGE, ids=[d[0] for d in _DAMAGE])
def test_a_results_json_of_the_wrong_shape_is_one_line_naming_the_field(tmp_path, name, change, field):
    from fair_forge_beam.reports.load import read_baseline, read_results

    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps(_DOC), encoding="utf-8")
    assert read_results(str(run)) == _DOC  # the whole, valid document reads as it is
    (run / "results.json").write_text(json.dumps(_mutated(change)), encoding="utf-8")
    for read in (lambda: read_results(str(run)), lambda: read_baseline(str(run))):
        with pytest.raises(ValueError) as err:
            read()
        msg = str(err.value)
        assert str(run / "results.json") in msg and f"field '{field}'" in msg and "\n" not in msg, msg


def test_a_run_info_json_of_the_wrong_shape_or_nested_deep_is_one_line(tmp_path):
    from fair_forge_beam.reports.load import read_run_info
    from fair_forge_beam.rollup import _read_json

    run = tmp_path / "run"
    run.mkdir()
    info = run / "run_info.json"
    good = {"runner": "x", "argv": ["--metrics", "toxicity"], "options": {"metrics": "toxicity"}, "seconds": 1.5}
    info.write_text(json.dumps(good), encoding="utf-8")
    assert read_run_info(str(run)) == good == _read_json(str(info))
    for bad, field in (([1], None), ({**good, "options": "x"}, "options"), ({**good, "argv": 5}, "argv"),
                       ({**good, "seconds": "1"}, "seconds")):
        info.write_text(json.dumps(bad), encoding="utf-8")
        for read in (lambda: read_run_info(str(run)), lambda: _read_json(str(info))):
            with pytest.raises(ValueError) as err:
                read()
            assert str(info) in str(err.value) and (field is None or f"'{field}'" in str(err.value)), err.value
    info.write_text('{"options": ' + _deep(300_000) + "}", encoding="utf-8")
    with pytest.raises(ValueError, match="levels"):
        read_run_info(str(run))


def test_a_stats_manifest_of_the_wrong_shape_is_one_line(tmp_path):
    """The roll-up's ``--from`` manifests: ``config.metrics = 5`` was ``TypeError``, ``stored = [1]``
    ``AttributeError`` (tracebacks, exit 1)."""
    from fair_forge_beam.rollup import _read_json

    path = tmp_path / "stats" / "manifest.json"
    path.parent.mkdir()
    good = {"stats_schema_version": 5, "config": {"metrics": ["toxicity"], "inputs": ["a"]}, "options": {},
            "static": {"toxicity": {}}, "stored": {"toxicity": "stats/sessions/"}, "counts": {"interactions_read": 3},
            "input_files": [["a", 3, 1.5]], "audit_runs": ["r1"], "run_id": "r1"}
    path.write_text(json.dumps(good), encoding="utf-8")
    assert _read_json(str(path)) == good
    for key, value, field in ((("config", "metrics"), 5, "config.metrics"), (("stored",), [1], "stored"),
                              (("static",), 5, "static"), (("counts",), [1], "counts"),
                              (("input_files",), "a", "input_files")):
        bad = copy.deepcopy(good)
        (bad[key[0]] if len(key) == 2 else bad)[key[-1]] = value
        path.write_text(json.dumps(bad), encoding="utf-8")
        with pytest.raises(ValueError) as err:
            _read_json(str(path))
        assert str(path) in str(err.value) and f"field '{field}'" in str(err.value), err.value


def _cli(module: str, *args) -> subprocess.CompletedProcess:
    from pathlib import Path

    import fair_forge_beam

    tree = Path(fair_forge_beam.__file__).resolve().parents[1]  # the code under test
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow
def test_trend_and_compare_refuse_a_damaged_run_in_one_line(tmp_path, audit_once):
    """End to end on a real run: ``trend`` and ``audit --compare`` exit 2 with one line naming the
    file and the field (before: ``AttributeError`` / ``TypeError`` / ``RecursionError`` tracebacks,
    exit 1)."""
    _, real = audit_once(["--quiet", "--no-report", "--metrics", "humanity,toxicity", "--mode", "frequentist"])
    damaged = []
    for name, change in (("tox5", lambda d: d["metrics"].__setitem__("toxicity", 5)),
                         ("slice0str", lambda d: d["metrics"]["toxicity"].__setitem__("slices", ["x"])),
                         ("configlist", lambda d: d.__setitem__("config", [1]))):
        run = tmp_path / name
        shutil.copytree(real, run)
        doc = json.loads((run / "results.json").read_text(encoding="utf-8"))
        change(doc)
        (run / "results.json").write_text(json.dumps(doc), encoding="utf-8")
        damaged.append((run, run / "results.json"))
    deep = tmp_path / "deepinfo"
    shutil.copytree(real, deep)
    (deep / "run_info.json").write_text('{"options": ' + _deep(300_000) + "}", encoding="utf-8")
    damaged.append((deep, deep / "run_info.json"))
    for run, named in damaged:
        for module, args in (("pipelines.trend", ("--output", tmp_path / f"tr-{run.name}", run, real)),
                             ("pipelines.audit", ("--quiet", "--no-report", "--metrics", "humanity,toxicity",
                                                  "--compare", run, "--output", tmp_path / f"c-{run.name}"))):
            got = _cli(module, *args)
            assert got.returncode == 2, (module, run.name, got.stderr[-2000:])
            assert "Traceback" not in got.stderr and str(named) in got.stderr, (module, run.name, got.stderr[-2000:])
            assert len([line for line in got.stderr.splitlines() if "error:" in line]) == 1, got.stderr[-2000:]


# ------------------------------------------------------------------ B5: side files checked before the run
def _usage_error(run, argv, capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        run(argv)
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def test_an_unreadable_emotion_lexicon_is_a_usage_error_before_the_run(tmp_path, monkeypatch, capsys):
    from fair_forge_beam.io import edge
    from pipelines import audit

    latin = tmp_path / "latin.csv"
    latin.write_bytes("English;anger\ncaf\xe9;1\n".encode("latin-1"))
    big = tmp_path / "big.csv"
    big.write_text("English;anger\n" + "word;1\n" * 400, encoding="utf-8")
    base = ["--quiet", "--no-report", "--metrics", "humanity", "--output", str(tmp_path / "out"), "--emotion-lexicon-csv"]
    assert "not UTF-8" in _usage_error(audit.run, base + [str(latin)], capsys)
    assert "Is a directory" in _usage_error(audit.run, base + [str(tmp_path)], capsys)
    monkeypatch.setattr(edge, "MAX_SIDE_FILE_BYTES", 1000)
    assert "larger than 1,000 bytes" in _usage_error(audit.run, base + [str(big)], capsys)
    assert not (tmp_path / "out" / "results.json").exists()


@pytest.mark.parametrize("text, says", [
    ("english;Joy;joy\nhappy;1;0\n", "names column(s) 'joy' more than once"),
    ("english;anger;english\nhappy;0;glad\n", "names column(s) 'english' more than once"),
    ("English Word,Anger,Joy\nhappy,0,1\n", "names no emotion column"),
    ("english;anger;joy\nha\0ppy;0;1\n", "a NUL character on line 2"),
    ('english;anger;joy\nhappy;0;1\n"sad;1;0\nglum;1;0\n', "not a ';'-separated CSV text"),
    ("anger;joy\n1;0\n", "names no language column"),
    ("", "names no emotion column"),
], ids=["dup-emotion", "dup-language", "commas", "nul", "unclosed-quote", "no-language", "empty"])
def test_a_wrongly_shaped_emotion_lexicon_is_a_usage_error_naming_it(tmp_path, capsys, text, says):
    """Trial 28b: a lexicon with duplicate columns, a NUL byte or an unclosed quote was read as a lexicon
    covering no language of the data: every interaction a dead letter, an empty run (exit 4)."""
    from pipelines import audit

    lexicon = tmp_path / "lex.csv"
    lexicon.write_text(text, encoding="utf-8")
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"session_id": "s", "assistant_id": "a", "language": "english",
                                "conversation": [{"qa_id": "q", "query": "hi", "assistant": "happy"}]}) + "\n")
    err = _usage_error(audit.run, ["--quiet", "--no-report", "--metrics", "humanity", "--input", str(data),
                                   "--output", str(tmp_path / "out"), "--emotion-lexicon-csv", str(lexicon)], capsys)
    assert f"--emotion-lexicon-csv: cannot read {lexicon}" in err and says in err, err
    assert not (tmp_path / "out").exists()


def test_a_well_shaped_emotion_lexicon_is_read():
    """Languages and emotions in any case and spacing, any order; a row without a word kept out."""
    import tempfile

    from fair_forge_beam.components.emotion_lexicon import EMOTIONS, NRCCsvLexicon

    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False, encoding="utf-8") as f:
        f.write(" Joy ;English;spanish;ANGER\n1;happy;feliz;0\n0;;ira;1\n")
    tables = NRCCsvLexicon(f.name).load()
    os.unlink(f.name)
    assert tables == {"english": {"happy": (EMOTIONS.index("joy"),)},
                      "spanish": {"feliz": (EMOTIONS.index("joy"),), "ira": (EMOTIONS.index("anger"),)}}


def test_side_files_nested_deep_are_usage_errors(tmp_path, capsys):
    from fair_forge_beam.audit_config import ConfigError, load_config
    from fair_forge_beam.io.edge import MAX_NESTING
    from pipelines import audit

    domain = tmp_path / "deep.json"
    domain.write_text('{"classes": ' + _deep(300_000) + "}", encoding="utf-8")
    err = _usage_error(audit.run, ["--quiet", "--no-report", "--metrics", "privacy", "--privacy-domain", str(domain),
                                   "--output", str(tmp_path / "out")], capsys)
    assert "--privacy-domain" in err and "levels" in err
    for levels in (100_000, MAX_NESTING + 1):
        toml = tmp_path / f"deep{levels}.toml"
        toml.write_text("inputs = " + _deep(levels) + "\n", encoding="utf-8")
        with pytest.raises(ConfigError) as exc:
            load_config(str(toml))
        assert str(toml) in str(exc.value) and f"{MAX_NESTING} levels" in str(exc.value), exc.value
    err = _usage_error(audit.run, ["--config", str(tmp_path / "deep100000.toml")], capsys)
    assert "deep100000.toml" in err


def test_a_template_that_recurses_is_a_usage_error_on_generate(tmp_path, capsys):
    from fair_forge_beam.components.judge.prompts import PromptTemplate, TemplateRenderError
    from pipelines import generate

    rec = "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }} {{ context }}"
    with pytest.raises(TemplateRenderError, match="recursion"):
        PromptTemplate(rec).render(context="x")
    with pytest.raises(TemplateRenderError, match="syntax error on line 1"):
        PromptTemplate("{% for %}")
    prompt = tmp_path / "rec.txt"
    prompt.write_text(rec, encoding="utf-8")
    corpus = tmp_path / "corpus.md"
    corpus.write_text("# Bags\n\nEach passenger may bring one bag of 8 kg on board. " * 3, encoding="utf-8")
    err = _usage_error(generate.run, ["--corpus", str(corpus), "--system-prompt-file", str(prompt),
                                      "--generator-base-url", "http://127.0.0.1:9/v1", "--generator-model", "m",
                                      "--output", str(tmp_path / "g")], capsys)
    assert "--system-prompt-file" in err and "recursion" in err


# ------------------------------------------------------------------ trial 28b: non-finite numbers, not regular files
#: JSON text of a non-finite number as Python's json writes it by default (allow_nan=True), and one that overflows
_NON_FINITE = ("Infinity", "-Infinity", "NaN", "1e999")


@pytest.mark.parametrize("token", _NON_FINITE)
def test_a_run_file_holding_a_non_finite_number_is_one_line(tmp_path, token):
    """Trial 28b B1/B2: ``"mean": Infinity`` in a results.json made ``trend`` end in
    ``ValueError: Out of range float values are not JSON compliant`` (exit 1) and ``audit --compare``
    write bare ``Infinity`` into comparison.json. Every run file is strict JSON where it is read."""
    from fair_forge_beam.reports.load import read_baseline, read_results, read_run_info
    from fair_forge_beam.rollup import _read_json

    run = tmp_path / "run"
    run.mkdir()
    text = json.dumps(_DOC).replace('"mean": 0.5', f'"mean": {token}', 1)
    assert token in text
    (run / "results.json").write_text(text, encoding="utf-8")
    (run / "run_info.json").write_text(f'{{"runner": "x", "seconds": {token}}}', encoding="utf-8")
    (run / "manifest.json").write_text(f'{{"counts": {{"x": {token}}}}}', encoding="utf-8")
    for read, named in ((lambda: read_results(str(run)), "results.json"), (lambda: read_baseline(str(run)), "results.json"),
                        (lambda: read_run_info(str(run)), "run_info.json"),
                        (lambda: _read_json(str(run / "manifest.json")), "manifest.json")):
        with pytest.raises(ValueError) as err:
            read()
        msg = str(err.value)
        assert str(run / named) in msg and token in msg and "\n" not in msg, msg


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_run_file_that_is_not_a_regular_file_is_one_line(tmp_path, kind):
    """Trial 28b B3/B4: a results.json that is a directory was an ``IsADirectoryError`` traceback
    in ``audit --baseline/--compare``; a FIFO made ``trend``, ``reports.compare`` and ``--baseline``
    wait forever. Refused before it is opened (one line naming it); a ``--config`` pipe is still read."""
    import threading

    from fair_forge_beam.reports.load import read_baseline, read_results, read_run_info

    run = tmp_path / "run"
    run.mkdir()
    for name in ("results.json", "run_info.json"):
        (run / name).mkdir() if kind == "directory" else os.mkfifo(run / name)
    for read, named in ((lambda: read_results(str(run)), "results.json"), (lambda: read_baseline(str(run)), "results.json"),
                        (lambda: read_run_info(str(run)), "run_info.json")):
        box: list = []

        def call(read=read):
            try:
                read()
            except BaseException as exc:  # noqa: BLE001 - reported below
                box.append(exc)

        t = threading.Thread(target=call, daemon=True)
        t.start()
        t.join(20)
        if t.is_alive():  # unblock the reader of the FIFO, then fail
            with open(run / named, "w"):
                pass
            t.join(5)
            pytest.fail(f"reading {named} as a {kind} did not return")
        assert box and isinstance(box[0], ValueError), box
        msg = str(box[0])
        assert str(run / named) in msg and "not a regular file" in msg and "\n" not in msg, msg


def test_a_config_read_from_a_pipe_still_works(tmp_path):
    """``--config <(...)`` (process substitution: a pipe) stays accepted: only run folders' files
    must be regular files. The shell hands ``/dev/fd/N``, a pipe whose writer it started; a named
    FIFO is refused before it is opened since fix28z (nobody may ever write to it:
    tests/test_cli_config_fifo.py), so the pipe here is the shell's kind, written by a thread."""
    import threading

    from fair_forge_beam.audit_config import load_config

    r, w = os.pipe()

    def write():
        with os.fdopen(w, "w", encoding="utf-8") as f:
            f.write("seed = 7\n")

    t = threading.Thread(target=write, daemon=True)
    t.start()
    try:
        assert load_config(f"/dev/fd/{r}")["seed"] == 7
    finally:
        os.close(r)
    t.join(5)


def test_a_config_nested_deep_is_refused_before_toml_parses_it(tmp_path, monkeypatch):
    """Trial 28b B5: a 200 KB --config of ``a.a.a…= 1`` (100,000 key parts) took 11.4 GB in
    ``tomllib`` before the nesting check ran (20,000 parts: 1.75 GB). A scan of the raw text bounds
    dotted keys, table headers, arrays and inline tables first; the file is named once."""
    import tomllib

    from fair_forge_beam import audit_config
    from fair_forge_beam.audit_config import ConfigError, load_config
    from fair_forge_beam.io.edge import MAX_NESTING, nesting_depth

    def _parts(n):
        return ".".join(["a"] * n)

    deep = {"dotted": _parts(2000) + " = 1\n", "header": "[" + _parts(2000) + "]\nx = 1\n",
            "quoted": ".".join(['"a.b"'] * 2000) + " = 1\n", "digits": _parts(1000).replace("a", "1") + " = 1\n",
            "inline": "x = " + "{a = " * 2000 + "1" + "}" * 2000 + "\n", "array": "x = " + _deep(2000) + "\n",
            "mixed": "[" + _parts(30) + "]\n" + _parts(20) + " = " + _deep(20) + "\n"}
    parsed = []
    real_loads = tomllib.loads
    monkeypatch.setattr(audit_config.tomllib, "loads", lambda *a, **k: parsed.append(1) or real_loads(*a, **k))
    for name, text in deep.items():
        p = tmp_path / f"{name}.toml"
        p.write_text(text, encoding="utf-8")
        with pytest.raises(ConfigError) as exc:
            load_config(str(p))
        msg = str(exc.value)
        assert msg.count(str(p)) == 1 and f"{MAX_NESTING} levels" in msg and "\n" not in msg, msg
        assert not parsed, f"{name}: tomllib parsed the file before its nesting was bounded"
    # exactly MAX_NESTING levels of each form (dots in strings, comments, floats and times do not count) still load
    ok = {"dotted": _parts(MAX_NESTING - 1) + " = 1.5\n", "header": "[" + _parts(MAX_NESTING - 2) + "]\nx = 1979-05-27T07:32:00.5\n",
          "array": "x = " + _deep(MAX_NESTING - 1) + "\n", "strings": 'x = "' + _parts(500) + '[[{{" # ' + _parts(500) + "\n",
          "multiline": "x = '''\n" + _parts(500) + "\n'''\n" + 'y = """' + "[" * 500 + '"""\n'}
    for name, text in ok.items():
        p = tmp_path / f"ok_{name}.toml"
        p.write_text(text, encoding="utf-8")
        assert nesting_depth(load_config(str(p))) <= MAX_NESTING, name


def test_a_lone_surrogate_in_a_run_file_is_named_as_such(tmp_path):
    """Second trial of issue 28: a lone surrogate key in results.json's config was 'holds text where
    text is needed'."""
    from fair_forge_beam.reports.load import read_results

    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({**_DOC, "config": {"\ud800": "\udfff"}}), encoding="utf-8")
    with pytest.raises(ValueError) as err:
        read_results(str(run))
    msg = str(err.value)
    assert "field 'config' holds text that is not valid Unicode (a lone surrogate" in msg and "\n" not in msg, msg


def test_a_config_with_a_bom_is_read_and_other_encodings_and_line_ends_are_named(tmp_path):
    """Issue 28 B12/B9: a UTF-8 BOM before a TOML config said 'Invalid statement (at line 1, column
    1)'; it is accepted (decision: TOML is UTF-8 and editors write that BOM). A UTF-16 file is named
    as such, CR-only line ends are named as the JSONL reader names them, and a file that cannot be
    read says why in words (no 'OSError: [Errno 40]')."""
    import codecs

    from fair_forge_beam.audit_config import ConfigError, load_config

    text = 'seed = 7\r\nmode = "frequentist"\r\n'
    bom = tmp_path / "bom.toml"
    bom.write_bytes(codecs.BOM_UTF8 + text.encode())
    assert load_config(str(bom)) == {"seed": 7, "mode": "frequentist"}
    utf16 = tmp_path / "utf16.toml"
    utf16.write_bytes(text.encode("utf-16"))
    with pytest.raises(ConfigError, match="the file is UTF-16 text.*TOML is UTF-8"):
        load_config(str(utf16))
    cr = tmp_path / "cr.toml"
    cr.write_bytes(text.replace("\r\n", "\r").encode())
    with pytest.raises(ConfigError, match="lines end with CR alone"):
        load_config(str(cr))
    loop = tmp_path / "loop1"
    os.symlink(tmp_path / "loop2", loop)
    os.symlink(loop, tmp_path / "loop2")
    with pytest.raises(ConfigError) as ei:
        load_config(str(loop))
    msg = str(ei.value)
    assert "Too many levels of symbolic links" in msg and "OSError" not in msg and "Errno" not in msg, msg


def test_a_side_file_usage_error_names_the_option_once_in_plain_words(tmp_path, monkeypatch):
    """Issue 28 B9: ``--privacy-domain /dev/zero`` said '--privacy-domain: cannot read /dev/zero:
    --privacy-domain: /dev/zero is larger ...' (the option twice); a symlink loop said '(OSError:
    [Errno 40] ...)'. Every side-file error goes through plain.side_file_error."""
    from fair_forge_beam.io import edge
    from fair_forge_beam.metrics import registry
    from fair_forge_beam.plain import side_file_error

    big = tmp_path / "big.json"
    big.write_text("{}" + " " * 100)
    monkeypatch.setattr(edge, "MAX_SIDE_FILE_BYTES", 10)
    loop = tmp_path / "loop1"
    os.symlink(tmp_path / "loop2", loop)
    os.symlink(loop, tmp_path / "loop2")
    for path, says in [(big, "is larger than"), (loop, "Too many levels of symbolic links")]:
        with pytest.raises(ValueError) as ei:
            registry._privacy(None, {"privacy_domain": str(path)})
        msg = str(ei.value)
        assert msg.count("--privacy-domain") == 1 and says in msg and "Errno" not in msg and "OSError" not in msg, msg
    assert side_file_error("--x", "p", OSError(40, "Too many levels of symbolic links", "p")) == \
        "--x: cannot read p: Too many levels of symbolic links: p"


#: issue 28 (trial 28e B4): values of the right type but impossible — each named, never trended or read as a baseline
_IMPOSSIBLE = [
    ("rate17", lambda d: d["metrics"]["toxicity"]["slices"][0]["toxic_rate"].__setitem__("mean", 1.7),
     "metrics.toxicity.slices.0.toxic_rate.mean", "from 0 to 1"),
    ("ratelow", lambda d: d["metrics"]["toxicity"]["slices"][0]["toxic_rate"].__setitem__("ci_low", -0.1),
     "metrics.toxicity.slices.0.toxic_rate.ci_low", "from 0 to 1"),
    ("reversed", lambda d: d["metrics"]["toxicity"]["slices"][0]["toxic_rate"].update(ci_low=0.9, ci_high=0.2),
     "metrics.toxicity.slices.0.toxic_rate", "[0.9, 0.2] is reversed"),
    ("reversednested", lambda d: d["metrics"]["toxicity"]["slices"][0]["estimates"]["DR"].update(ci_low=0.7, ci_high=0.1),
     "metrics.toxicity.slices.0.estimates.DR", "reversed"),
    ("ntoxic", lambda d: d["metrics"]["toxicity"]["slices"][0].__setitem__("n_toxic", -3),
     "metrics.toxicity.slices.0.n_toxic", "never negative"),
    ("estn", lambda d: d["metrics"]["toxicity"]["slices"][0]["toxic_rate"].__setitem__("n", -1),
     "metrics.toxicity.slices.0.toxic_rate.n", "never negative"),
    ("category", lambda d: d["metrics"]["toxicity"]["slices"][0].__setitem__("categories", {"asm": -2}),
     "metrics.toxicity.slices.0.categories.asm", "never negative"),
    ("groupcount", lambda d: d["metrics"]["toxicity"]["slices"][0].__setitem__("group_profiling", {"N_i": {"men": -1}}),
     "metrics.toxicity.slices.0.group_profiling.N_i.men", "never negative"),
    ("share", lambda d: d["metrics"]["toxicity"]["slices"][0].__setitem__(
        "emotion_distribution", {"joy": {"mean": 1.2, "ci_low": 0.1, "ci_high": 0.3}}),
     "metrics.toxicity.slices.0.emotion_distribution.joy.mean", "from 0 to 1"),
    ("words", lambda d: d["metrics"]["toxicity"]["slices"][0].__setitem__("total_words", -5),
     "metrics.toxicity.slices.0.total_words", "never negative"),
]


@pytest.mark.parametrize("name,change,field,why", _IMPOSSIBLE, ids=[d[0] for d in _IMPOSSIBLE])
def test_a_results_json_holding_an_impossible_value_is_one_line_naming_it(tmp_path, name, change, field, why):
    """Trial 28e B4: a rate of 1.7, an interval [0.9, 0.2] and a negative count were trended
    (``defined: true``) and read as a baseline (its gate skipped as 'zero width', exit 0)."""
    from fair_forge_beam.reports.load import read_baseline, read_results

    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps(_mutated(change)), encoding="utf-8")
    for read in (lambda: read_results(str(run)), lambda: read_baseline(str(run))):
        with pytest.raises(ValueError) as err:
            read()
        msg = str(err.value)
        assert str(run / "results.json") in msg and f"field '{field}'" in msg and why in msg and "\n" not in msg, msg


def test_a_reversed_interval_is_not_called_zero_width():
    from fair_forge_beam.statistical.slices import too_small_to_compare

    why = too_small_to_compare([{"ci_low": 0.9, "ci_high": 0.2}, {"ci_low": 0.1, "ci_high": 0.3}], [5, 5])
    assert "reversed" in why and "zero width" not in why, why


# ------------------------------------------------------------------ trial38 T2: an emotion cell is 0 or 1
_HEAD = "english;Anger;Joy;Trust\n"


@pytest.mark.parametrize("row, says", [
    ("happy;0;TRUE;0", "line 2, column 'Joy': 'TRUE' is not 0 or 1"),
    ("happy;0;x;0", "line 2, column 'Joy': 'x' is not 0 or 1"),
    ("happy;5;1;0", "line 2, column 'Anger': '5' is not 0 or 1"),
    ("happy;0;1;NaN", "line 2, column 'Trust': 'NaN' is not 0 or 1"),
    ("happy;-3;1;0", "line 2, column 'Anger': '-3' is not 0 or 1"),
    ("happy;0;;1", "line 2, column 'Joy': an empty cell is not 0 or 1"),
    ("happy;0;1", "line 2, column 'Trust': no cell (the line has fewer cells than its header names) is not 0 or 1"),
    ("happy;0;1;0;1", "line 2 has 5 cells, more than the 4 columns its header names"),
], ids=["TRUE", "x", "5", "NaN", "-3", "empty", "short", "long"])
def test_an_emotion_cell_other_than_0_or_1_is_a_usage_error_naming_line_column_and_value(tmp_path, capsys, row, says):
    """trial38 T2: any cell but exactly "1" silently meant "no emotion" (a lexicon of 1.0 cells scored
    no emotion at all, exit 0)."""
    from fair_forge_beam.components.emotion_lexicon import NRCCsvLexicon
    from pipelines import audit

    lexicon = tmp_path / "lex.csv"
    lexicon.write_text(_HEAD + "sad;0;0;0\n".replace("sad", "glum") + row + "\n", encoding="utf-8")
    says = says.replace("line 2", "line 3")
    with pytest.raises(ValueError) as exc:
        NRCCsvLexicon(str(lexicon)).load()
    assert says in str(exc.value), exc.value
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"session_id": "s", "assistant_id": "a", "language": "english",
                                "conversation": [{"qa_id": "q", "query": "hi", "assistant": "happy"}]}) + "\n")
    err = _usage_error(audit.run, ["--quiet", "--no-report", "--metrics", "humanity", "--input", str(data),
                                   "--output", str(tmp_path / "out"), "--emotion-lexicon-csv", str(lexicon)], capsys)
    assert f"--emotion-lexicon-csv: cannot read {lexicon}: {says}" in err, err


def test_emotion_cells_written_as_floats_are_read_as_0_and_1(tmp_path):
    """Decision (docs/data.md): 1.0 and 0.0, as a spreadsheet or pandas writes a 0/1 column, are 1 and 0."""
    from fair_forge_beam.components.emotion_lexicon import EMOTIONS, NRCCsvLexicon

    ints, floats = tmp_path / "i.csv", tmp_path / "f.csv"
    ints.write_text(_HEAD + "happy;0;1;1\nangry;1;0;0\n", encoding="utf-8")
    floats.write_text(_HEAD + "happy;0.0;1.0; 1.0 \nangry;1.0;0.0;0.0\n", encoding="utf-8")
    want = {"english": {"happy": (EMOTIONS.index("joy"), EMOTIONS.index("trust")), "angry": (EMOTIONS.index("anger"),)}}
    assert NRCCsvLexicon(str(ints)).load() == want
    assert NRCCsvLexicon(str(floats)).load() == want


_DOMAIN = {"classes": ["EMAIL"], "criticality_weights": {"EMAIL": 1}, "fn_severity_weights": {"EMAIL": 1.0}}


@pytest.mark.parametrize("change, says", [
    ({"criticality_weights": {"EMAIL": "1"}}, "criticality_weights.EMAIL"),
    ({"fn_severity_weights": {"EMAIL": True}}, "fn_severity_weights.EMAIL"),
    ({"iou_threshold": "0.5"}, "iou_threshold"),
    ({"domain_fit": "0.5"}, "domain_fit should be a number in [0, 1], not text"),
    ({"regulatory_fit": True}, "regulatory_fit should be a number in [0, 1], not true or false"),
], ids=["weight-text", "weight-bool", "iou-text", "fit-text", "fit-bool"])
def test_a_privacy_domain_number_written_as_text_or_boolean_is_a_usage_error(tmp_path, capsys, change, says):
    """trial38 T2's class, every file a user passes parses strictly: "0.5" and true were read as numbers."""
    from pipelines import audit

    domain = tmp_path / "domain.json"
    domain.write_text(json.dumps({**_DOMAIN, **change}), encoding="utf-8")
    err = _usage_error(audit.run, ["--quiet", "--no-report", "--metrics", "privacy", "--privacy-domain", str(domain),
                                   "--output", str(tmp_path / "out")], capsys)
    assert "--privacy-domain" in err and says in err, err
    assert not (tmp_path / "out").exists()
