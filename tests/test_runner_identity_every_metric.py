"""docs (data.md, runners.md, index.md, statistics.md): the same input and seed give a byte-identical
``results.json`` on every runner. test_shard_invariance and test_runners_integration compare runners
for humanity/toxicity; test_bestof and the prompt_evaluator tests for theirs. This one covers every other
metric (fix51b, trial50 C1): context, conversational, bias, role_adherence, privacy (expected spans,
Bayesian: its F-beta draws run), regulatory and vision in one audit, agentic in a second (its records
are agent benchmark tasks), each on the in-memory runner and on two worker processes
(``--direct_running_mode=multi_processing --direct_num_workers=2``; test_shard_invariance's options).
The judges are a ScriptedOpenAIServer whose replies are a function of the prompt: each field of the
schema the request carries gets a value drawn from a hash of the prompt (the guardian, asked in plain
text, "safe" or "unsafe" the same way), so a runner that sent another prompt, or joined a reply to
another interaction, would show in the bytes."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer
from pipelines import audit
from test_shard_invariance import BAYES, IN_MEMORY, MULTI_PROCESS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "fair_forge_beam" / "data"
PRIVACY = DATA / "privacy" / "privacy_roles_sample.json"  # 4 sessions, 9 answers, 7 expected spans
EXAMPLES = DATA / "examples" / "fair_forge_examples.json"


def _value(schema: dict, seed: bytes):
    """A value of JSON schema ``schema`` drawn from ``seed`` (a function of the prompt alone)."""
    h = int.from_bytes(hashlib.sha256(seed).digest()[:8], "big")
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][h % len(schema["enum"])]
    if kind == "object":
        return {k: _value(v, seed + k.encode()) for k, v in (schema.get("properties") or {}).items()}
    if kind == "boolean":
        return bool(h & 1)
    if kind in ("number", "integer"):
        lo, hi = schema.get("minimum", 0), schema.get("maximum", 1)
        x = lo + (hi - lo) * (h % 1001) / 1000
        return round(x) if kind == "integer" else round(x, 3)
    if kind == "array":
        return []
    return f"scripted {h % 97}"


def _judge(req):
    prompt = req.prompt.encode("utf-8")
    schema = req.json_schema
    if schema is None:  # the guardian (plain text)
        return "unsafe\nS1" if hashlib.sha256(prompt).digest()[0] % 3 == 0 else "safe"
    return _value(schema, prompt)


def _small_examples(folder: Path) -> Path:
    """The first 6 sessions of the shipped examples (references for context, vision and regulatory)."""
    path = folder / "examples6.json"
    path.write_text(json.dumps(json.loads(EXAMPLES.read_text(encoding="utf-8"))[:6]), encoding="utf-8")
    return path


def _small_tau(shared_dir: Path, folder: Path) -> Path:
    """The tau-bench trials (4 a task) of the airline file's first 8 tasks: 32 agent conversations."""
    import gzip

    raw = json.load(gzip.open(shared_dir / "data" / "tau_bench" / "gpt-4o-airline.json.gz", "rt"))
    tasks = list(dict.fromkeys(r["task_id"] for r in raw))[:8]
    path = folder / "tau8.json"
    path.write_text(json.dumps([r for r in raw if r["task_id"] in tasks]), encoding="utf-8")
    return path


def _audits(srv, folder: Path, runner: list, examples: Path, tau: Path) -> dict:
    judge = ["--judge-base-url", srv.base_url, "--judge-model", "judge", "--judge-retries", "0",
             "--guardian-base-url", srv.base_url, "--guardian-model", "guard"]
    out = {}
    audit.run([*BAYES, *runner, "--output", str(folder / "judged"), "--input", str(PRIVACY), "--input", str(examples),
               "--metrics", "context,conversational,bias,role_adherence,privacy,regulatory,vision",
               "--regulatory-corpus", str(DATA / "regulatory" / "airline"), "--regulatory-embedder", "hashing",
               "--similarity-embedder", "hashing", "--judge-cache", str(folder / "cache.sqlite3"), *judge])
    out["judged"] = (folder / "judged" / "results.json").read_bytes()
    audit.run([*BAYES, *runner, "--output", str(folder / "agentic"), "--input", str(tau), "--input-format", "tau_bench",
               "--metrics", "agentic", "--agentic-k", "3"])
    out["agentic"] = (folder / "agentic" / "results.json").read_bytes()
    return out


def test_results_json_byte_identical_in_memory_vs_two_worker_processes_for_every_other_metric(tmp_path, shared_dir):
    with ScriptedOpenAIServer(_judge) as srv:
        (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
        inputs = _small_examples(tmp_path), _small_tau(shared_dir, tmp_path)
        a = _audits(srv, tmp_path / "a", IN_MEMORY, *inputs)
        b = _audits(srv, tmp_path / "b", MULTI_PROCESS, *inputs)
    doc = json.loads(a["judged"])
    assert set(doc["metrics"]) >= {"context", "conversational", "bias", "role_adherence", "privacy", "regulatory", "vision"}
    scored = {m: s["interactions_scored"] for m, s in doc["summary"]["metrics"].items()}
    assert scored == {"context": 34, "conversational": 34, "bias": 34, "role_adherence": 8, "privacy": 34, "regulatory": 31,
                      "vision": 25}, scored
    privacy = doc["metrics"]["privacy"]["slices"][0]
    assert privacy["slice"] == "overall" and privacy["ground_truth_count"] == 7  # the expected spans were read
    assert privacy["score"]["ci_low"] < privacy["score"]["mean"] < privacy["score"]["ci_high"]  # from the F-beta draws
    agentic = json.loads(a["agentic"])["metrics"]["agentic"]["slices"][0]
    assert (agentic["slice"], agentic["n_sessions"], agentic["n_tasks"]) == ("overall", 32, 8)
    for name in a:  # the runs really were on different runners (run_info.json, not results.json, says it)
        argv = [" ".join(json.loads((tmp_path / x / name / "run_info.json").read_text())["argv"]) for x in "ab"]
        assert "multi_processing" not in argv[0] and "multi_processing" in argv[1]
    for name, got in a.items():
        if got != b[name]:
            (tmp_path / f"{name}-a.json").write_bytes(got), (tmp_path / f"{name}-b.json").write_bytes(b[name])
        assert got == b[name], f"results.json of the {name} audit differs between in_memory and multi_processing"
