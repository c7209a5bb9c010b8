"""Issue 28, "Earlier notes, still open": each item fixed, or a documented decision, with a test."""
from __future__ import annotations

import json
import logging
from importlib import metadata

import pytest


def test_run_info_names_the_torch_and_transformers_versions(tmp_path):
    from fair_forge_beam.reports.results import write_run_info

    versions = write_run_info(str(tmp_path), {})["versions"]
    for pkg in ("torch", "transformers", "sentence-transformers"):
        try:
            expected = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            expected = None
        assert pkg in versions and versions[pkg] == expected
    assert json.loads((tmp_path / "run_info.json").read_text())["versions"] == versions
