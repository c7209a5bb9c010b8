"""Outputs written by the pipeline (issue 12 item 3) and summary units (issue 13 item 5).

* ``results.json`` is combined and written inside the pipeline: the serialized job graph alone
  (what a Flex Template launcher hands to Dataflow) writes the same ``results.json``, session,
  interaction and dead-letter shards as a local run, and the launcher does nothing after it.
* :class:`ResultsDocFn` gives the same document for any split of its input into bundles and any
  merge order (hypothesis).
* The summary names one unit per line: Bias with one interaction whose five guardian calls all
  fail says 3 interactions scored, 1 not scored, 5 dead letters (one per interaction and
  attribute) — not "3 interactions scored, 5 not scored".
"""
from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import apache_beam as beam
from fair_forge_beam.reports.load import iter_dead_letters, read_sessions
from fair_forge_beam.reports.results import ResultsDocFn, results_json_bytes
from fair_forge_beam.reports.summary import metric_summary_lines, summary_table
from fair_forge_beam.testing.openai_server import Fault, ScriptedOpenAIServer
from pipelines import audit
from helpers import FNAPI, KEYWORD_AUDIT

# the keyword audit of tests/test_runners_integration.py, in memory: its run is shared (audit_once)
ARGS = list(KEYWORD_AUDIT)


def _shards(out: Path) -> dict:
    import pyarrow.parquet as pq

    rows = Counter(json.dumps(r, sort_keys=True, default=str) for r in pq.read_table(out / "results.parquet").to_pylist())
    sessions = {m: Counter(json.dumps(r, sort_keys=True, default=str) for r in pq.read_table(out / "sessions" / m).to_pylist())
                for m in ("humanity", "toxicity")}  # typed rows, as multisets
    dead = Counter(json.dumps(d, sort_keys=True) for d in iter_dead_letters(str(out)))
    return {"rows": rows, "sessions": sessions, "dead": dead}


@pytest.fixture(scope="module")
def local_run(audit_once):
    doc, out = audit_once(ARGS)  # the output folder is shared: read it only
    return out, doc


@pytest.mark.slow
def test_template_graph_alone_writes_the_same_outputs(local_run, tmp_path, monkeypatch):
    """The job graph is serialized to its runner-API proto (what a Flex Template launch ships),
    rebuilt from the proto alone and run; the launcher process, seeing ``--template_location``,
    does nothing after building the graph. The outputs equal the local run's: ``results.json``
    byte for byte, the shards as multisets."""
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    ref_out, ref_doc = local_run
    original_run = beam.Pipeline.run
    shipped = []

    def run_from_proto(self, test_runner_api="AUTO"):
        proto = self.to_runner_api()
        shipped.append(proto)
        # Dataflow runs the shipped graph: here the in-memory runner does, in the launcher's place
        rebuilt = beam.Pipeline.from_runner_api(proto, FnApiRunner(), self._options)
        return original_run(rebuilt, test_runner_api=False)

    monkeypatch.setattr(beam.Pipeline, "run", run_from_proto)
    out = tmp_path / "tmpl"
    # the Flex Template launcher passes --runner=DataflowRunner (another runner is refused: trial39 T3)
    dataflow = ["--runner=DataflowRunner", "--project=my-project", "--region=europe-west1",
                "--temp_location=gs://my-bucket/tmp"]
    doc = audit.run([*[a for a in ARGS if a != f"--runner={FNAPI}"], *dataflow, "--output", str(out),
                     f"--template_location={tmp_path / 'template.json'}"])
    assert doc == {} and len(shipped) == 1  # a template launch: no results in the launcher
    assert (out / "results.json").read_bytes() == (ref_out / "results.json").read_bytes()
    assert json.loads((out / "results.json").read_text(encoding="utf-8")) == ref_doc
    assert _shards(out) == _shards(ref_out)
    assert not (out / "run_info.json").exists() and not (out / "report.html").exists()
    # the job wrote into a stage beside the folder and published it as its last step (issue 27)
    assert json.loads((out / "_SUCCESS").read_text(encoding="utf-8"))["run"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("tmpl.")] == []
    # published after the stored statistics' sinks too (their manifest names the output folder: not compared whole)
    manifest = [json.loads((o / "stats" / "manifest.json").read_text(encoding="utf-8")) for o in (out, ref_out)]
    assert manifest[0]["stored"] == manifest[1]["stored"] == {"humanity": "stats/sessions/", "toxicity": "stats/sessions/"}
    # and its publishing step sealed the manifest (issue 28): every file a roll-up reads, with its size and hash
    from fair_forge_beam.rollup import check_sealed

    folders = [{f.rsplit("/", 1)[0] for f in m["files"]} for m in manifest]
    # run_info.json is the launcher's file (sealed by it after the job: seal28), so only the local run lists it
    assert "run_info.json" in folders[1] and "run_info.json" not in folders[0]
    assert folders[0] == folders[1] - {"run_info.json"} and "stats/sessions" in folders[0] and "results.parquet" in folders[0]
    check_sealed(str(out), manifest[0])
    # compare names such a run for what it is (trial39 T3: "a run of an older layout, or a partial copy")
    from fair_forge_beam.reports.compare import provenance_gaps

    assert "(a Flex Template launch's run: its Dataflow job published it" in provenance_gaps(str(out))
    assert provenance_gaps(str(ref_out)) is None


@pytest.mark.slow
def test_summary_table_is_derived_from_results_json(local_run, capsys):
    out, doc = local_run
    on_disk = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert on_disk == doc and all("sessions" not in m for m in on_disk["metrics"].values())
    table = summary_table(on_disk, str(out))
    assert "humanity: interactions: 2016 scored, 26 not scored (of 2042 read)" in table
    assert "  dead letters: 26 interactions this metric could not score" in table
    assert "toxicity: interactions: 2042 scored, 0 not scored (of 2042 read)" in table
    # the session shards hold what results.json used to: one record per session, counts adding up
    for name in ("humanity", "toxicity"):
        sessions = read_sessions(str(out), name)
        overall = on_disk["metrics"][name]["slices"][0]
        assert overall["slice"] == "overall" and overall["n_sessions"] == len(sessions)
        assert sum(s["n_interactions"] for s in sessions) == on_disk["summary"]["metrics"][name]["interactions_scored"]


# ------------------------------------------------------------------ the combine, any bundling
_PART = st.one_of(
    st.tuples(st.just("read"), st.none(), st.just(1)),
    # every stage a dead letter can carry: read, the runner's failed turns, a metric's own, a metric's other
    # stage (declared: agentic_tools; named <metric>.<part>), another metric's stage and one nobody claims
    st.tuples(st.just("dead"), st.tuples(st.sampled_from(["read", "runner", "humanity", "bias", "humanity.extra",
                                                          "prompt_evaluator.jq", "mystery"]),
                                         st.sampled_from(["bad weight", "no lexicon", "HTTP 500"])), st.just(1)),
    st.tuples(st.just("quality"), st.sampled_from(["duplicate_qa_id", "language"]), st.just(1)),
    st.tuples(st.just("scored"), st.sampled_from(["humanity", "bias"]), st.integers(0, 7)),
    st.tuples(st.just("slice"), st.sampled_from(["humanity", "bias"]),
              st.fixed_dictionaries({"slice": st.sampled_from(["overall", "assistant_id=a", "assistant_id=b", "language=en"]),
                                     "x": st.floats(allow_nan=False, allow_infinity=False)})),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(_PART, max_size=40), seed=st.integers(0, 2**32 - 1))
def test_results_doc_fn_is_independent_of_bundling(parts, seed):
    # one slice record per (metric, slice key), as the pipeline gives
    seen, unique = set(), []
    for p in parts:
        if p[0] == "slice":
            k = (p[1], p[2]["slice"])
            if k in seen:
                continue
            seen.add(k)
        unique.append(p)
    fn = ResultsDocFn({"mode": "test"}, {"humanity": {"headline_columns": []}, "bias": {"headline_columns": []}})

    def combine(elements, n_bundles, rng):
        bundles = [fn.create_accumulator() for _ in range(n_bundles)]
        for e in elements:
            fn.add_input(bundles[rng.randrange(n_bundles)], e)
        rng.shuffle(bundles)
        return results_json_bytes(fn.extract_output(fn.merge_accumulators(bundles)))

    rng = random.Random(seed)
    one = combine(unique, 1, rng)
    shuffled = list(unique)
    rng.shuffle(shuffled)
    assert combine(shuffled, rng.randint(1, 6), rng) == one
    doc = json.loads(one)
    s = doc["summary"]
    assert s["interactions_read"] == sum(1 for p in unique if p[0] == "read")
    assert s["rejected_at_read"] == sum(1 for p in unique if p[0] == "dead" and p[1][0] == "read")
    for m in ("humanity", "bias"):
        ms = s["metrics"][m]
        assert ms["interactions_scored"] == sum(p[2] for p in unique if p[0] == "scored" and p[1] == m)
        assert ms["dead_letters"] == sum(ms["dead_letter_reasons"].values())
        assert ms["interactions_not_scored"] == max(s["interactions_read"] - ms["interactions_scored"], 0)
        keys = [r["slice"] for r in doc["metrics"][m]["slices"]]
        assert keys == sorted(keys, key=lambda k: (k != "overall", k))
    # every dead letter is counted once, each in its place (trial40 J2/J3: a stage other than read and the
    # metric's own name was counted nowhere)
    dead = Counter(p[1][0] for p in unique if p[0] == "dead")
    assert s.get("assistant_failed", 0) == dead["runner"] == sum((s.get("assistant_failed_reasons") or {}).values())
    parts = s["metrics"]["humanity"].get("stage_dead_letters") or {}
    assert {k: v["dead_letters"] for k, v in parts.items()} == ({"humanity.extra": dead["humanity.extra"]} if dead["humanity.extra"] else {})
    assert all(v["dead_letter_unit"] == "dead letters of its extra stage" for v in parts.values())
    other = s.get("other_dead_letters") or {}
    assert {k: v["dead_letters"] for k, v in other.items()} == {k: dead[k] for k in ("mystery", "prompt_evaluator.jq") if dead[k]}
    counted = s["rejected_at_read"] + s.get("assistant_failed", 0) + sum(v["dead_letters"] for v in other.values())
    counted += sum(ms["dead_letters"] + sum(v["dead_letters"] for v in (ms.get("stage_dead_letters") or {}).values())
                   for ms in s["metrics"].values())
    assert counted == sum(dead.values())


def test_results_doc_fn_on_empty_input():
    fn = ResultsDocFn({"mode": "x"}, {"humanity": {"headline_columns": ["a"]}})
    doc = fn.extract_output(fn.create_accumulator())
    assert doc["summary"]["interactions_read"] == 0
    assert doc["summary"]["metrics"]["humanity"] == {
        "scored": 0, "interactions_scored": 0, "interactions_not_scored": 0, "dead_letters": 0,
        "dead_letter_unit": doc["summary"]["metrics"]["humanity"]["dead_letter_unit"], "dead_letter_reasons": {}}
    assert doc["metrics"]["humanity"] == {"headline_columns": ["a"], "slices": []}


# ------------------------------------------------------------------ summary units (issue 13 item 5)
SESSIONS = [
    {"session_id": "s1", "assistant_id": "bot", "language": "english",
     "conversation": [{"qa_id": "1", "query": "Hi", "assistant": "Hello there."},
                      {"qa_id": "2", "query": "Tickets?", "assistant": "This call fails [boom]"}]},
    {"session_id": "s2", "assistant_id": "bot", "language": "english",
     "conversation": [{"qa_id": "1", "query": "Hi", "assistant": "Good day."},
                      {"qa_id": "2", "query": "Price?", "assistant": "30 EUR."}]},
]


def _guardian(req):
    return "safe"


@pytest.mark.slow
def test_bias_summary_counts_interactions_and_dead_letters_in_their_own_units(tmp_path, monkeypatch, capsys,
                                                                             short_beam_backoff):
    """4 interactions; the five guardian calls (one per protected attribute) of one of them fail:
    3 interactions scored, 1 not scored, and 5 dead letters, each named for what it is. (The
    failing batch is still tried 1 + 3 times; Beam's waits between the attempts, about 23 of this
    test's 27 s, are made short: ``short_beam_backoff``.)"""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    inp = tmp_path / "in.json"
    inp.write_text(json.dumps(SESSIONS), encoding="utf-8")
    with ScriptedOpenAIServer(_guardian, faults=[Fault("server_error", match="[boom]", retry_after=None)]) as srv:
        doc = audit.run([f"--runner={FNAPI}", "--input", str(inp), "--output", str(tmp_path / "out"), "--no-report",
                         "--metrics", "bias", "--guardian-base-url", srv.base_url, "--guardian-model", "guard",
                         "--judge-cache", str(tmp_path / "cache.sqlite3"), "--judge-retries", "0"])
    printed = capsys.readouterr().out
    ms = doc["summary"]["metrics"]["bias"]
    assert doc["summary"]["interactions_read"] == 4
    assert (ms["interactions_scored"], ms["interactions_not_scored"], ms["dead_letters"]) == (3, 1, 5)
    assert sum(ms["dead_letter_reasons"].values()) == 5
    assert len([d for d in iter_dead_letters(str(tmp_path / "out")) if d["stage"] == "bias"]) == 5
    lines = printed.splitlines()
    assert "bias: interactions: 3 scored, 1 not scored (of 4 read)" in lines
    (dead_line,) = [ln for ln in lines if ln.startswith("  dead letters:")]
    assert dead_line.startswith("  dead letters: 5 failed guardian verdicts (one per interaction and protected attribute)")
    assert "5 not scored" not in printed


def test_bestof_summary_lines_name_matches_not_interactions():
    ms = {"scored": 14, "interactions_scored": 14, "interactions_not_scored": 0, "dead_letters": 1,
          "dead_letter_unit": "failed matches (one per judge call between two contestants)",
          "dead_letter_reasons": {"judge: invalid answer": 1}}
    assert metric_summary_lines("bestof", ms, 14) == [
        "bestof: interactions: 14 scored, 0 not scored (of 14 read)",
        "  dead letters: 1 failed matches (one per judge call between two contestants) (judge: invalid answer: 1)",
    ]


# ------------------------------------------------------------------ what the launcher loads
_LAUNCHER = """
import json, sys
from pipelines import audit
audit.run(sys.argv[1:])
print(json.dumps(sorted(m for m in ("torch", "transformers", "sentence_transformers") if m in sys.modules)))
"""


@pytest.mark.slow
def test_launcher_of_a_keyword_run_never_imports_torch(tmp_path):
    """After the job the launcher reads results.json, renders the report and asks for judge
    counters only when an endpoint was called: importing the judge package pulled in torch
    (about 0.5 GB of the launcher's peak memory) for runs without any judge."""
    import os
    import subprocess
    import sys

    from helpers import REPO

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _LAUNCHER, "--quiet", f"--runner={FNAPI}", "--metrics", "humanity,toxicity",
                           "--group-extractor", "keyword", "--toxicity-scorer", "hurtlex", "--output", str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
    assert (tmp_path / "out" / "report.html").is_file()


def test_every_stage_the_audit_tags_a_dead_letter_with_is_counted_by_the_summary():
    """trial40 J2/J3's class: the summary counted the stages ``read`` and ``<metric>`` only, so the dead
    letters of PromptEvaluator's JQ and generation stages, Agentic's tool stage, Toxicity's cluster profile
    and the runner's failed turns were written and counted nowhere. Every stage name the audit's code
    passes to ``dead_letter``/``restage``/``JudgeScorer`` (a literal or a module constant; the metric's own
    name otherwise) has an owner in the summary (:func:`~fair_forge_beam.reports.results.stage_owner`)."""
    import ast
    import importlib

    from fair_forge_beam.reports.results import stage_owner

    root = Path(__file__).resolve().parent.parent
    files = [*sorted((root / "fair_forge_beam" / "metrics").glob("*.py")),
             *(root / "fair_forge_beam" / f for f in ("engine.py", "io/read.py", "io/failed_turns.py",
                                                      "components/cluster_profile.py"))]
    stages = set()
    for path in files:
        module = importlib.import_module(".".join(path.relative_to(root).with_suffix("").parts))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            pos = {"dead_letter": 0, "restage": 0, "JudgeScorer": 3}.get(node.func.id)
            arg = node.args[pos] if pos is not None and len(node.args) > pos else None
            if node.func.id == "JudgeScorer":
                arg = next((k.value for k in node.keywords if k.arg == "stage"), arg)
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                stages.add(arg.value)
            elif isinstance(arg, ast.Name) and isinstance(getattr(module, arg.id, None), str):
                stages.add(getattr(module, arg.id))
    assert {"read", "runner", "agentic_tools", "cluster_profile", "prompt_evaluator.generation",
            "prompt_evaluator.jq", "toxicity", "bias", "regulatory"} <= stages, stages
    assert {s: stage_owner(s) for s in stages if stage_owner(s) == (None, None)} == {}
