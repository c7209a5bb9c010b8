"""A non-editable install (what Beam workers and Dataflow get) ships every module and data file."""
import shutil
import subprocess
import sys

from conftest import REPO


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
