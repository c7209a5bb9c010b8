"""Packaging for fair_forge_beam.

Install with ``pip install -e .`` (core: the lexicon metrics, keyword group detection, judges,
reports; no torch), ``pip install -e '.[embeddings]'`` (MiniLM embeddings and UMAP/HDBSCAN
clustering: torch, sentence-transformers, umap-learn, numba ...), ``'.[test]'`` (the test suite's
tools), ``'.[optimizer]'`` (Optuna for MIPROv2), ``'.[explain]'`` (interpreto token attributions) or
``'.[all]'`` (everything; what CI installs). The pins live in ``requirements.txt`` and
``requirements-<extra>.txt``. Beam worker processes import the
installed package (never ``__main__``), so every DoFn and coder lives inside ``fair_forge_beam``.
"""
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent


def _requirements(name: str = "requirements.txt") -> list[str]:
    lines = (HERE / name).read_text(encoding="utf-8").splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


EXTRAS = {name: _requirements(f"requirements-{name}.txt") for name in ("embeddings", "test", "optimizer", "explain")}
EXTRAS["explain"] += EXTRAS["embeddings"]  # interpreto attributes a transformers model on torch
EXTRAS["all"] = sorted(set(EXTRAS["embeddings"] + EXTRAS["test"] + EXTRAS["optimizer"] + EXTRAS["explain"]))


setup(
    name="fair_forge_beam",
    version="0.1.0",
    description="Fairness, safety and quality metrics for AI assistants as Apache Beam pipelines",
    long_description=(HERE / "README.md").read_text(encoding="utf-8") if (HERE / "README.md").exists() else "",
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=find_packages(include=["fair_forge_beam", "fair_forge_beam.*", "pipelines", "pipelines.*"]),
    package_data={"fair_forge_beam": ["data/examples/*", "data/hurtlex/*", "data/groups/*", "data/regulatory/*.md",
                                      "data/regulatory/*/*", "data/corpora/*.md", "data/corpora/*/*", "data/privacy/*",
                                      "data/*.md", "templates/*.j2", "testing/java/*.java"]},
    include_package_data=True,
    install_requires=_requirements(),
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["fair-forge-beam=pipelines.launcher:main"]},
    license="MIT",
)
