"""The loop's stages publish together or not at all (trial48c F): a good loop into L, then the same loop with
another seed and an assistant answering HTTP 500 to every call: exit 4, and L — generated/, run/, audit/,
loop_summary.json — is exactly as it was (the new generated/ was published beside the old run/ and audit/)."""
from __future__ import annotations

from pathlib import Path

import pytest


def _tree(root: Path) -> dict:
    """Every file under ``root`` with its bytes, the stages an empty run keeps beside its folder left out."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".staging-" not in str(p.relative_to(root))}


@pytest.mark.slow
def test_an_empty_loop_run_leaves_every_stage_as_it_was(tmp_path):
    from fair_forge_beam.reports.empty_run import EmptyRun
    from fair_forge_beam.testing.openai_server import Fault, ScriptedOpenAIServer
    from pipelines import loop

    def generator(req):
        return {"queries": [{"query": f"How many bags can a gold member check? ({len(str(req))})"}],
                "chunk_summary": "baggage"}

    out = tmp_path / "L"

    def argv(seed: str, gen, bot) -> list:
        return ["--quiet", "--corpus", "airline", "--num-samples", "2", "--chunks-per-sample", "1", "--num-queries", "1",
                "--seed", seed, "--generator-base-url", gen.base_url, "--generator-model", "gen",
                "--generator-cache", str(tmp_path / "gen.sqlite3"), "--assistant-url", bot.base_url, "--assistant-model", "bot",
                "--assistant-retries", "0", "--metrics", "humanity", "--output", str(out)]

    with ScriptedOpenAIServer(generator) as gen, ScriptedOpenAIServer("I am glad to help, thank you.") as bot:
        loop.run(argv("3", gen, bot))
    before = _tree(out)
    assert {"generated/dataset.jsonl", "run/dataset.jsonl", "audit/results.json", "loop_summary.json"} <= set(before)
    with ScriptedOpenAIServer(generator) as gen, \
            ScriptedOpenAIServer("fine", faults=[Fault("server_error", retry_after=None)]) as bot:
        with pytest.raises(EmptyRun):
            loop.run(argv("4", gen, bot))
    assert _tree(out) == before
    assert sorted(p.name for p in out.iterdir() if ".staging-" not in p.name) == \
        ["audit", "generated", "loop_summary.json", "run"]
    assert not [p for p in out.iterdir() if ".staging-" in p.name and not p.name.startswith("run.staging-")]
