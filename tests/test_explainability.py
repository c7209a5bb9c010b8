"""Explainability (issue 17 item 2): interpreto attributions of a tiny random GPT-2 (no download).

Skipped with a reason when the optional ``interpreto`` (extra ``[explain]``) is not installed.
"""
from __future__ import annotations

import pytest

from fair_forge_beam.explainability import (AttributionMethod, AttributionResult, Granularity, InterpretoResultParser,
                                            TokenAttribution, min_max_normalize)


def test_min_max_normalisation():
    assert min_max_normalize([1.0, 3.0, 2.0]) == [0.0, 1.0, 0.5]
    assert min_max_normalize([2.0, 2.0]) == [0.5, 0.5] and min_max_normalize([]) == []


def test_parser_shapes():
    p = InterpretoResultParser()
    assert p.parse({"tokens": ["a", "b"], "scores": [1, 2]}) == (["a", "b"], [1.0, 2.0])
    assert p.parse((["a", "b"], [[1, 2], [3, 4]])) == (["a", "b"], [4.0, 6.0])  # summed over target tokens
    with pytest.raises(ValueError):
        p.parse({"tokens": ["a"], "scores": [1, 2]})
    with pytest.raises(ValueError):
        p.parse(42)


def test_top_k_sorts_by_absolute_score():
    r = AttributionResult(prompt="p", target="t", method=AttributionMethod.LIME, granularity=Granularity.WORD, attributions=[
        TokenAttribution(text="a", score=0.1, position=0, normalized_score=0.5),
        TokenAttribution(text="b", score=-0.9, position=1, normalized_score=0.0),
        TokenAttribution(text="c", score=0.5, position=2, normalized_score=1.0)])
    assert [a.text for a in r.get_top_k(2)] == ["b", "c"]
    assert r.to_dict_for_visualization()["tokens"] == ["a", "b", "c"]


def test_missing_interpreto_names_the_extra(monkeypatch):
    import sys

    from fair_forge_beam.explainability import require_interpreto

    monkeypatch.setitem(sys.modules, "interpreto", None)
    with pytest.raises(ImportError, match=r"fair_forge_beam\[explain\]"):
        require_interpreto()


@pytest.mark.parametrize("method", ["Saliency", "InputXGradient", "IntegratedGradients", "Occlusion", "Lime"])
@pytest.mark.parametrize("gran", ["token", "word"])
@pytest.mark.slow
def test_tiny_gpt2_attributions_are_reproducible_and_normalised(method, gran):
    pytest.importorskip("interpreto", reason="optional extra [explain] (interpreto) not installed")
    from fair_forge_beam.explainability import AttributionExplainer
    from fair_forge_beam.testing.tiny_lm import tiny_gpt2

    ex = AttributionExplainer(*tiny_gpt2(0), seed=3)
    r1 = ex.explain("the cat sat on a mat", "the dog ran", method=method, granularity=gran)
    r2 = AttributionExplainer(*tiny_gpt2(0), seed=3).explain("the cat sat on a mat", "the dog ran", method=method, granularity=gran)
    assert [a.text for a in r1.attributions] == "the cat sat on a mat the dog ran".split()
    assert [a.score for a in r1.attributions] == [a.score for a in r2.attributions]
    norm = [a.normalized_score for a in r1.attributions]
    assert min(norm) == 0.0 and max(norm) == 1.0 or set(norm) == {0.5}
    assert r1.metadata["max_length"] == 512 and r1.method.value == method


@pytest.mark.slow
def test_beam_stage_explains_and_dead_letters_bad_items():
    pytest.importorskip("interpreto", reason="optional extra [explain] (interpreto) not installed")
    from apache_beam.testing.test_pipeline import TestPipeline
    from apache_beam.testing.util import assert_that, equal_to

    from fair_forge_beam._beam import beam
    from fair_forge_beam.explainability import AttributionExplainer, ExplainAttributions
    from fair_forge_beam.beam_pipeline import pipeline_options
    from fair_forge_beam.testing.tiny_lm import tiny_gpt2

    items = [{"id": "a", "prompt": "the cat sat", "target": "on a mat"}, {"id": "b", "prompt": "hello world", "target": "yes"},
             {"id": "bad", "prompt": "", "target": "x"}, {"id": "long", "prompt": " ".join(["cat"] * 40), "target": "dog"}]
    direct = AttributionExplainer(*tiny_gpt2(0), "Occlusion", "word", seed=5)
    expected = [(it["id"], tuple(a.score for a in direct.explain(it["prompt"], it["target"]).attributions)) for it in items[:2]]
    with TestPipeline(options=pipeline_options()) as p:
        out = p | beam.Create(items) | ExplainAttributions(tiny_gpt2, "Occlusion", "word", seed=5, max_length=32)
        assert_that(out["results"] | "S" >> beam.Map(lambda r: (r["id"], tuple(a["score"] for a in r["attributions"]))),
                    equal_to(expected), label="results")
        assert_that(out["dead_letter"] | "D" >> beam.Map(lambda d: (d.stage, d.element_id)),
                    equal_to([("explain", "bad"), ("explain", "long")]), label="dead")


@pytest.mark.slow
def test_cli_with_the_builtin_tiny_model(tmp_path):
    pytest.importorskip("interpreto", reason="optional extra [explain] (interpreto) not installed")
    from pipelines import explain

    from fair_forge_beam.io.write import read_jsonl_shards

    inp = tmp_path / "items.jsonl"
    inp.write_text('{"id": "1", "prompt": "the cat sat", "target": "on a mat"}\nnot json\n', encoding="utf-8")
    # the command's main in this process (the interpreter of `python -m pipelines.explain` is run by
    # test_cli_report_on_the_tiny_model; a second one here only imported interpreto again)
    assert explain.main(["--input", str(inp), "--output", str(tmp_path / "o"), "--model", "tiny-random",
                         "--method", "Occlusion"]) == 0
    res = read_jsonl_shards(str(tmp_path / "o" / "attributions"))
    dead = read_jsonl_shards(str(tmp_path / "o" / "dead_letter"))
    assert [r["id"] for r in res] == ["1"] and len(res[0]["attributions"]) == 6
    assert [d["stage"] for d in dead] == ["explain.read"]


def test_report_colours_each_element_by_its_normalised_score_and_escapes_text():
    import re

    from fair_forge_beam.reports.tool_reports import attribution_colour, render_explain_report

    results = [{"id": "z", "prompt": "p", "target": "t", "method": "Lime", "granularity": "word", "metadata": {"seed": 1},
                "attributions": [{"text": "b", "score": 2.0, "position": 1, "normalized_score": 1.0},
                                 {"text": "<script>", "score": -1.0, "position": 0, "normalized_score": 0.0}]},
               {"id": "a", "prompt": "</pre><b>", "target": "t", "method": "Occlusion", "granularity": "token", "metadata": {},
                "attributions": [{"text": "x", "score": 0.5, "position": 0, "normalized_score": 0.5}]}]
    dead = [{"stage": "explain.read", "reason": "invalid JSON", "raw": "<img src=x>"}]
    page = render_explain_report(results, dead, {"model": "m"})
    assert "<script" not in page and "<img" not in page and "</pre><b>" not in page
    spans = re.findall(r'<span class="tok[^"]*" style="background: ([^"]+)" title="[^"]*">([^<]*)</span>', page)
    assert spans == [("rgba(214, 39, 40, 0.500)", "x"), ("rgba(214, 39, 40, 0.000)", "&lt;script&gt;"),
                     ("rgba(214, 39, 40, 1.000)", "b")]  # items by id, elements by position
    assert attribution_colour(1.7) == "rgba(214, 39, 40, 1.000)" and attribution_colour(-1) == "rgba(214, 39, 40, 0.000)"
    assert re.search(r'id="n-results">2<', page) and re.search(r'id="n-dead">1<', page)
    assert "method Occlusion · granularity token" in page and "min-max per item" in page


@pytest.mark.slow
def test_cli_report_on_the_tiny_model(tmp_path):
    pytest.importorskip("interpreto", reason="optional extra [explain] (interpreto) not installed")
    import html
    import json
    import re
    import subprocess
    import sys

    from fair_forge_beam.io.write import read_jsonl_shards

    inp = tmp_path / "items.jsonl"
    inp.write_text(json.dumps({"id": "1", "prompt": "the <script>alert(1)</script> sat", "target": "on a mat"}) + "\nnot json\n",
                   encoding="utf-8")
    from pipelines import explain

    args = ["--input", str(inp), "--model", "tiny-random", "--method", "Occlusion"]
    proc = subprocess.run([sys.executable, "-m", "pipelines.explain", *args, "--output", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # --no-report in this process: the command's main, without a second interpreter importing interpreto again
    assert explain.main([*args, "--output", str(tmp_path / "q"), "--no-report"]) == 0
    assert (tmp_path / "q" / "attributions-00000-of-00001.jsonl").exists() and not (tmp_path / "q" / "report.html").exists()
    res = read_jsonl_shards(str(tmp_path / "o" / "attributions"))
    dead = read_jsonl_shards(str(tmp_path / "o" / "dead_letter"))
    page = (tmp_path / "o" / "report.html").read_text(encoding="utf-8")
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert re.search(r'id="n-results">(\d+)<', page).group(1) == str(len(res)) == "1"
    # the bad line, and the <script> word interpreto's word split dropped (issue 28: told, never silent)
    assert re.search(r'id="n-dead">(\d+)<', page).group(1) == str(len(dead)) == "2"
    assert [d["reason"] for d in dead if "attribution" in d["reason"]] == [
        "1 piece(s) of the text got no attribution (dropped by the word split): '<script>alert(1)</script>'; the other "
        "elements are in the results"]
    spans = re.findall(r'<span class="tok[^"]*" style="background: rgba\(214, 39, 40, ([0-9.]+)\)" title="[^"]*">([^<]*)</span>',
                       page)  # the colour-scale swatches have no title: not matched
    atts = res[0]["attributions"]
    assert [html.unescape(t) for _, t in spans] == [a["text"] for a in atts]
    assert [float(a) for a, _ in spans] == [round(a["normalized_score"], 3) for a in atts]


@pytest.mark.slow
def test_a_failing_explain_leaves_the_previous_folder_and_a_new_one_replaces_every_shard(tmp_path, monkeypatch):
    """explain wrote its shards straight into --output (issue 28, seal28): a run failing after them
    (here: its report, a full disk) left new attributions beside the old report, and shards of an
    earlier run with another shard count stayed and were read as this run's. It writes into a stage
    now, swapped into place on success; its shards, by pattern, are replaced whole."""
    pytest.importorskip("interpreto", reason="optional extra [explain] (interpreto) not installed")
    from pipelines import explain

    from fair_forge_beam.io.write import read_jsonl_shards
    from fair_forge_beam.reports import tool_reports

    def tree(root):
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    inp, out = tmp_path / "items.jsonl", tmp_path / "o"
    inp.write_text('{"id": "1", "prompt": "the cat sat", "target": "on a mat"}\n', encoding="utf-8")
    args = ["--input", str(inp), "--output", str(out), "--model", "tiny-random", "--method", "Occlusion"]
    assert explain.main(args) == 0
    (out / "attributions-00001-of-00002.jsonl").write_text('{"id": "stale"}\n', encoding="utf-8")  # an earlier run's
    (out / "mine.txt").write_text("the user's", encoding="utf-8")
    before = tree(out)
    # (a target in the tiny model's words: "far away" is its [UNK], refused since trial35 T6)
    inp.write_text('{"id": "2", "prompt": "a dog ran", "target": "fast"}\nnot json\n', encoding="utf-8")

    def full_disk(*a, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tool_reports, "write_explain_report", full_disk)
    with pytest.raises(OSError):
        explain.main(args)
    assert tree(out) == before  # byte for byte: no new shard beside the old report
    assert sorted(p.name for p in tmp_path.iterdir()) == ["items.jsonl", "o"]  # no stage left
    monkeypatch.undo()
    assert explain.main(args) == 0
    assert [r["id"] for r in read_jsonl_shards(str(out / "attributions"))] == ["2"]  # the stale shard is gone
    assert "explain.read" in [d["stage"] for d in read_jsonl_shards(str(out / "dead_letter"))]
    assert (out / "mine.txt").read_text() == "the user's" and "report.html" in tree(out)


@pytest.mark.slow
def test_an_explain_input_with_no_item_is_an_empty_run_told_before_the_model_loads(tmp_path, monkeypatch, capsys):
    """trial29 T9: an empty --input exited 0 "attributions written" after loading the model; it is an
    empty run (exit 4) like generate's, run_assistant's and optimize's, said before any model is loaded."""
    pytest.importorskip("interpreto", reason="optional extra [explain] (interpreto) not installed")
    from pipelines import explain

    from fair_forge_beam.reports.empty_run import EMPTY_RUN_EXIT_CODE

    def no_load(*a, **kw):
        raise AssertionError("the model was loaded for an input with no item")

    monkeypatch.setattr(explain, "load_hf", no_load)
    inp, out = tmp_path / "items.jsonl", tmp_path / "o"
    for text in ("", "\n  \n\n"):
        inp.write_text(text, encoding="utf-8")
        with pytest.raises(SystemExit) as exc:
            explain.main(["--input", str(inp), "--output", str(out), "--model", "tiny-random"])
        assert exc.value.code == EMPTY_RUN_EXIT_CODE
        err = capsys.readouterr().err
        assert "explain: empty run: no input record" in err and "holds no item" in err
        assert not out.exists()


def test_explain_whose_every_item_is_a_dead_letter_exits_4_with_our_reasons(tmp_path, capsys):
    """trial29 T9/T10: every item a dead letter exited 0; a prompt of combining marks only reached the
    model and was dead-lettered with torch's words ("ArrayRef: invalid slice, N = 1; size = 0")."""
    pytest.importorskip("interpreto", reason="optional extra [explain] (interpreto) not installed")
    from pipelines import explain

    from fair_forge_beam.io.write import read_jsonl_shards

    inp, out = tmp_path / "items.jsonl", tmp_path / "o"
    inp.write_text('{"id": "a", "prompt": "\\u200b", "target": "yes"}\n{"id": "b", "prompt": "hello", "target": "\\u00a0\\u2060"}\n'
                   '{"id": "c", "prompt": "\\u0301\\u0301", "target": "no"}\nnot json\n', encoding="utf-8")
    assert explain.main(["--input", str(inp), "--output", str(out), "--model", "tiny-random", "--no-report"]) == 4
    err = capsys.readouterr().err
    assert "explain: empty run: no item was explained (4 dead letters; most common: " in err
    # nothing published (trial48 B1): the dead letters are read in the stage the line names
    (stage,) = [p for p in tmp_path.iterdir() if p.name.startswith("o.staging-")]
    assert not out.exists() and f"kept unpublished in {stage} until the next run into {out} (exit code 4)" in err
    out = stage
    reasons = {d.get("element_id"): d["reason"] for d in read_jsonl_shards(str(out / "dead_letter"))}
    assert reasons["a"].startswith("blank prompt: ") and reasons["b"].startswith("blank target: ")
    assert reasons["c"] == "blank prompt: the prompt holds only combining marks (no character for them to sit on)"
    assert read_jsonl_shards(str(out / "attributions")) == []


def test_a_model_failure_is_a_reason_naming_the_stage_the_item_and_the_method():
    """Any exception of the explainer's model (a library's words alone: "ArrayRef: invalid slice") is a
    dead letter naming the stage, the item and the method, with the library's words after them."""
    pytest.importorskip("interpreto", reason="optional extra [explain] (interpreto) not installed")
    from fair_forge_beam.explainability.attributions import ModelFailure, _ExplainFn
    from fair_forge_beam.testing.tiny_lm import tiny_gpt2

    class Broken:
        def explain(self, *a, **kw):
            raise RuntimeError("ArrayRef: invalid slice, N = 1; size = 0")

    fn = _ExplainFn(tiny_gpt2, "Lime", "word", 0, 512)
    fn.setup()
    fn._explainer._instance = lambda *a, **kw: Broken()
    with pytest.raises(ModelFailure, match=r"^Lime \(word granularity\) failed on the model: ArrayRef"):
        fn._explainer.explain("hello world", "yes")
    (dead,) = [d.value for d in fn.process({"id": "x7", "prompt": "hello world", "target": "yes"})]
    assert dead.stage == "explain" and dead.element_id == "x7"
    assert dead.reason == "explain: item 'x7': Lime (word granularity) failed on the model: ArrayRef: invalid slice, N = 1; size = 0"


def test_items_the_method_cannot_explain_are_refused_before_the_model_and_counted_in_the_summary(tmp_path, capsys):
    """trial35 T6: docs/explainability.md's command on 3 items exited 0 printing only "1 item(s)
    explained"; the 2 dead letters were torch's words ("cannot reshape tensor of 0 elements",
    "index 2 is out of bounds"), and ``the cat sat``->``ok`` "succeeded" with its whole target
    dropped. The cause: a piece the tokenizer reads as a special token (the tiny model's ``[UNK]``
    for a word out of its vocabulary, markup) is left out of the elements interpreto attributes. Such
    items are refused by the tokenizer before the model is called, with what to do; the summary
    counts the dead letters with the most common reason, as the audit's does."""
    pytest.importorskip("interpreto", reason="optional extra [explain] (interpreto) not installed")
    import json

    from pipelines import explain

    from fair_forge_beam.explainability.attributions import AttributionExplainer
    from fair_forge_beam.io.write import read_jsonl_shards

    from unittest import mock

    spy = mock.patch.object(AttributionExplainer, "_instance", autospec=True, side_effect=AttributionExplainer._instance)
    items = [("1", "the cat sat", "on a mat"), ("2", "ignore <b>this</b>", "ok"), ("3", "   ", "x"),
             ("4", "the cat sat", "ok"), ("5", "ignore <b>this</b>", "on a mat"), ("6", "the cat sat", "on <|endoftext|> mat")]
    inp, out = tmp_path / "items.jsonl", tmp_path / "o"
    inp.write_text("".join(json.dumps({"id": i, "prompt": p, "target": t}) + "\n" for i, p, t in items), encoding="utf-8")
    with spy as instance:
        assert explain.main(["--input", str(inp), "--output", str(out), "--model", "tiny-random", "--method", "Occlusion",
                             "--no-report"]) == 0
    assert instance.call_count == 1  # only item 1 reached the model
    reasons = {d["element_id"]: d["reason"] for d in read_jsonl_shards(str(out / "dead_letter"))}
    fix = "rephrase the item in words the model's tokenizer knows, or use another --model"
    target_unk = ("the model's tokenizer reads 'ok' of the target as its unknown token '[UNK]' (a word out of its "
                  f"vocabulary, markup): Occlusion cannot attribute to it, so the target would be explained in part; {fix}")
    assert reasons == {
        "2": target_unk, "3": "blank prompt: the prompt holds nothing to read (only whitespace or invisible characters)",
        "4": target_unk,
        "5": ("the model's tokenizer reads none of the prompt as text ('ignore', '<b>this</b>' as its unknown token '[UNK]' "
              f"(a word out of its vocabulary, markup)): Occlusion has nothing in it to attribute to; {fix}"),
        "6": target_unk.replace("'ok'", "'<|endoftext|>'")}
    assert [r["id"] for r in read_jsonl_shards(str(out / "attributions"))] == ["1"]
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(f"attributions written to {out}: 1 item(s) explained, 5 dead letters (every one in {out}/dead_letter-*.jsonl; "
                           "most common: the model's tokenizer reads "), line


def test_an_item_with_interpretos_mask_token_is_refused_in_any_position(tmp_path):
    """trial35b B8: two identical items ``the cat sat on``->``a [REPLACE]`` with another between: the
    first was refused (``[REPLACE]`` read as ``[UNK]``), the second explained, because building
    Occlusion added ``[REPLACE]`` to the shared tokenizer. interpreto's mask token is refused
    whatever ran before, in the same words; a special token other than the unknown one is called a
    control token, not "a word out of its vocabulary, markup"."""
    pytest.importorskip("interpreto", reason="optional extra [explain] (interpreto) not installed")
    import json

    from pipelines import explain

    from fair_forge_beam.io.write import read_jsonl_shards

    items = [("r1", "the cat sat on", "a [REPLACE]"), ("ok1", "the cat sat", "on a mat"),
             ("r2", "the cat sat on", "a [REPLACE]"), ("r3", "the [REPLACE] sat", "on a mat"),
             ("p1", "the cat sat", "on [PAD] mat")]
    inp, out = tmp_path / "items.jsonl", tmp_path / "o"
    inp.write_text("".join(json.dumps({"id": i, "prompt": p, "target": t}) + "\n" for i, p, t in items), encoding="utf-8")
    assert explain.main(["--input", str(inp), "--output", str(out), "--model", "tiny-random", "--method", "Occlusion",
                         "--no-report"]) == 0
    reasons = {d["element_id"]: d["reason"] for d in read_jsonl_shards(str(out / "dead_letter"))}
    assert [r["id"] for r in read_jsonl_shards(str(out / "attributions"))] == ["ok1"]
    assert reasons["r1"] == reasons["r2"] and reasons["r1"].startswith(
        "the target holds '[REPLACE]', the token interpreto adds to a tokenizer without a mask token"), reasons
    assert reasons["r3"].startswith("the prompt holds '[REPLACE]'"), reasons
    assert "its special token '[PAD]' (a control token of the model, not text)" in reasons["p1"], reasons
    assert "out of its vocabulary" not in reasons["p1"]


def test_repeated_ids_are_a_warning_and_an_item_without_an_id_a_dead_letter(tmp_path, caplog, capsys):
    """trial40 J7: two items with id "1" and one with a null id were explained without a word; the
    attributions held two rows with id "1" and one with id null (a consumer joining by id gets a
    collision, or a row it cannot join). A repeated id is one warning line (every item explained, as
    the audit does for a repeated qa_id); an item without a usable id is a dead letter, before the model.
    A lone surrogate is named as such, not "invalid JSON"."""
    pytest.importorskip("interpreto", reason="optional extra [explain] (interpreto) not installed")
    import json

    from pipelines import explain

    from fair_forge_beam.io.write import read_jsonl_shards

    inp, out = tmp_path / "items.jsonl", tmp_path / "o"
    items = [{"id": "1", "prompt": "the cat sat", "target": "on a mat"}, {"id": 1, "prompt": "a dog ran", "target": "fast"},
             {"id": None, "prompt": "the cat sat", "target": "on a mat"}, {"prompt": "the cat sat", "target": "on a mat"},
             {"id": " ", "prompt": "the cat sat", "target": "on a mat"}, {"id": ["x"], "prompt": "the cat sat", "target": "ok"}]
    inp.write_text("".join(json.dumps(i) + "\n" for i in items) + '{"id": "s", "prompt": "a \\ud800", "target": "b"}\n',
                   encoding="utf-8")
    with caplog.at_level("WARNING"):
        assert explain.main(["--input", str(inp), "--output", str(out), "--model", "tiny-random", "--method", "Occlusion",
                             "--no-report"]) == 0
    said = [r.getMessage() for r in caplog.records if "more than once" in r.getMessage()]
    assert said == [f"1 item id given more than once in {inp}: '1' (2 times); every item is explained, and their "
                    "attributions share the id (a join by id cannot tell them apart): give each item its own id"], said
    assert sorted(r["id"] for r in read_jsonl_shards(str(out / "attributions"))) == ["1", "1"]
    dead = read_jsonl_shards(str(out / "dead_letter"))
    reasons = sorted(d["reason"].split(":")[0] for d in dead)
    assert reasons == ["prompt holds a lone surrogate U+D800", "the item has a blank 'id'", "the item has a null 'id'",
                       "the item has no 'id'", "the item's 'id' is a list, not text or a number; give every item its own 'id'"
                       ], reasons
    assert "8 item(s)" not in capsys.readouterr().out


# ------------------------------------------------------------------ fix50b: explain reads as the audit reads
_BAD_LINES = ["not json", '{"id": "s", "prompt": "a \\ud800", "target": "b"}', '{"id": "r", "id": "q"}']


def _audit_reasons(lines: list, encoding: str, folder) -> list:
    """The reasons the audit's reader gives ``lines`` written in ``encoding`` (its dead letters, in line order)."""
    from fair_forge_beam.io.read import ReadInteractions
    from fair_forge_beam.io.write import read_jsonl_shards, write_jsonl
    from helpers import fnapi_pipeline

    path = folder / f"audit-{encoding}.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode(encoding))
    return [reason for reason, _ in _audit_dead_letters(path)]


def _as_the_audits(dead: list, path) -> int:
    """How many of explain's dead letters ``dead`` of file ``path`` there are, each asserted to be one the
    audit's reader gives it: the same source, the same reason (the audit refuses explain's items too:
    no session record)."""
    audit = dict((source, reason) for reason, source in _audit_dead_letters(path))
    assert {d.source: d.reason for d in dead} == {d.source: audit.get(d.source) for d in dead}
    return len(dead)


def _audit_dead_letters(path) -> list:
    """``(reason, source)`` of the dead letters the audit's reader gives file ``path``, in file order."""
    from fair_forge_beam.io.read import ReadInteractions
    from fair_forge_beam.io.write import read_jsonl_shards, write_jsonl
    from helpers import fnapi_pipeline

    out = path.parent / f"{path.name}-audit"
    p = fnapi_pipeline()
    write_jsonl((p | ReadInteractions(str(path)))["dead_letter"], str(out / "d"), "D")
    p.run().wait_until_finish()
    dead = sorted(read_jsonl_shards(str(out / "d")), key=lambda d: int(d["source"].rsplit(":", 1)[1]))
    return [(d["reason"], d["source"]) for d in dead]


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-16-be", "utf-32"])
def test_explain_reads_its_input_as_the_audit_reads_its_own(tmp_path, encoding):
    """fix50b: explain cut its --input at b"\\n" and decoded it as UTF-8 itself: a BOM made its first item
    "invalid JSON", a UTF-16 or UTF-32 file had no item at all (every line a dead letter). It now reads
    through the audit's reader: the same items and, for lines that are no item, the audit's dead letters
    with the same reasons."""
    from pipelines import explain

    items = [{"id": "1", "prompt": "the cat sat", "target": "on a mat"}, {"id": 2, "prompt": "a dog", "target": "ran"}]
    import json

    lines = [json.dumps(items[0]), "", *_BAD_LINES, "  \u200b", json.dumps(items[1])]
    path = tmp_path / "items.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode(encoding))
    got, dead = explain.read_items(str(path))
    assert got == items
    assert [d.reason for d in dead] == _audit_reasons(_BAD_LINES, encoding, tmp_path)
    # fix51b: the audit's sources too (the absolute path, the line's offset), not "items.jsonl:3" (a line number)
    assert _as_the_audits(dead, path) == 3


_WORDS = "red blue green black white grey brown pink gold tan big small old new warm cold".split()


def _cut_gzip(path, n_items: int):
    """``path`` (a ``.jsonl.gz``): ``n_items`` item lines gzipped, only the first half of the bytes kept;
    returns how many of the items are whole before the cut."""
    import gzip
    import json
    import zlib

    lines = b"".join(json.dumps({"id": str(i), "prompt": f"the {_WORDS[i * 7 % 16]} cat sat", "target": f"on a {_WORDS[i % 16]} mat"}).encode() + b"\n"
                     for i in range(n_items))
    data = gzip.compress(lines, mtime=0)
    path.write_bytes(data[:len(data) // 2])
    got = zlib.decompressobj(31).decompress(data[:len(data) // 2])
    return got.count(b"\n")


@pytest.mark.parametrize("case", ["cut", "empty", "plain"])
def test_explain_reads_a_compressed_input_as_the_audit_and_names_places_as_it(tmp_path, monkeypatch, case):
    """fix51b (trial50 B2, B3): a .jsonl.gz cut short was a usage error for explain (exit 2, no item) where
    the audit reads the records before the cut and writes one dead letter; a .jsonl.gz of 0 bytes likewise
    (the audit: one dead letter). And a dead letter's source was the path as typed with a line number
    ("items.jsonl:2") where the audit gives the absolute path and the byte offset. Now: the audit's items,
    dead letters, reasons and sources, the input given by a relative path."""
    from pipelines import explain

    monkeypatch.chdir(tmp_path)
    if case == "cut":
        path, whole = tmp_path / "cut.jsonl.gz", _cut_gzip(tmp_path / "cut.jsonl.gz", 400)
        assert 0 < whole < 400
    elif case == "empty":
        path, whole = tmp_path / "z.jsonl.gz", 0
        path.write_bytes(b"")
    else:
        path, whole = tmp_path / "items.jsonl", 1
        path.write_bytes(b'{"id": "a", "prompt": "p", "target": "t"}\nnot json\n')
    items, dead = explain.read_items(path.name)
    assert len(items) == whole and _as_the_audits(dead, path) == 1
    assert dead[0].source.startswith(str(path) + ":")


def test_explain_of_a_cut_and_an_empty_gzip_input_explains_what_the_audit_reads(tmp_path):
    """End to end (trial50 B2): the items before the cut are explained and the cut is a dead letter (main:
    exit 2, "--input: cannot read … cut short"); a .jsonl.gz of 0 bytes is an empty run, exit 4 (main: 2)."""
    pytest.importorskip("interpreto", reason="optional extra [explain] (interpreto) not installed")
    from pipelines import explain

    from fair_forge_beam.io.write import read_jsonl_shards

    cut, empty = tmp_path / "cut.jsonl.gz", tmp_path / "z.jsonl.gz"
    whole = _cut_gzip(cut, 16)
    empty.write_bytes(b"")
    args = ["--model", "tiny-random", "--method", "Occlusion", "--no-report"]
    assert explain.main(["--input", str(cut), "--output", str(tmp_path / "o"), *args]) == 0
    dead = read_jsonl_shards(str(tmp_path / "o" / "dead_letter"))  # the tiny model's word split drops some
    [letter] = [d for d in dead if d["stage"] == "explain.read"]
    assert "cut short" in letter["reason"] and letter["source"].startswith(f"{cut}:")
    done = {r["id"] for r in read_jsonl_shards(str(tmp_path / "o" / "attributions"))}
    assert done | {d["element_id"] for d in dead if d is not letter} == {str(i) for i in range(whole)} and done
    assert explain.main(["--input", str(empty), "--output", str(tmp_path / "e"), *args]) == 4


def test_an_explain_item_with_a_nan_id_is_a_dead_letter_as_a_record_with_one_is_for_the_audit(tmp_path):
    """fix50b: an item whose id was NaN (a pandas export's missing value) was explained under the id
    "nan", and 3.0 under "3.0"; the audit refuses a NaN id and reads 3.0 as "3"."""
    from fair_forge_beam.explainability.attributions import read_item_id
    from fair_forge_beam.schemas.common import id_text

    assert read_item_id({"id": 3.0}) == ("3", None) and read_item_id({"id": -0.0}) == ("0", None)
    for bad in (float("nan"), float("inf"), 2.5, 2.0**60):
        with pytest.raises(ValueError) as audit_says:
            id_text(bad)
        assert read_item_id({"id": bad}) == (None, f"the item's 'id' {audit_says.value}")


def test_explain_of_a_utf16_file_with_a_nan_id_gives_the_audits_dead_letters(tmp_path):
    """End to end: a UTF-16 --input (BOM) with an item, an item whose id is NaN and a line that is no
    JSON: one item explained, two dead letters with the audit's reasons (main: 0 explained, exit 4)."""
    pytest.importorskip("interpreto", reason="optional extra [explain] (interpreto) not installed")
    from pipelines import explain

    from fair_forge_beam.io.write import read_jsonl_shards

    inp, out = tmp_path / "items.jsonl", tmp_path / "o"
    inp.write_bytes(('{"id": 7.0, "prompt": "the cat sat", "target": "on a mat"}\n'
                     '{"id": NaN, "prompt": "the cat sat", "target": "on a mat"}\nnot json\n').encode("utf-16"))
    assert explain.main(["--input", str(inp), "--output", str(out), "--model", "tiny-random", "--method", "Occlusion",
                         "--no-report"]) == 0
    assert [r["id"] for r in read_jsonl_shards(str(out / "attributions"))] == ["7"]
    reasons = sorted(d["reason"] for d in read_jsonl_shards(str(out / "dead_letter")))
    assert reasons[0].startswith("invalid JSON") and reasons[1].startswith("the item's 'id' is NaN, not an id: ")
    assert reasons[0] == _audit_reasons(["not json"], "utf-16", tmp_path)[0]
