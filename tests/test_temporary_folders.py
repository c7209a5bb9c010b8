"""fix38a: temporary folders left in the system's temporary folder, by the test suite and by the package.

Beam's ``Pipeline()`` makes a ``beam-pipeline-temp*`` folder and removes it only in ``run()``: every
test that built a graph without running it left one in /tmp (264 after one full run), and so did
:func:`fair_forge_beam.beam_pipeline.run_pipeline` when its block raised while the graph was built.
The test session now has a temporary folder of its own, removed whole at its end (tests/conftest.py:
``pytest_configure`` / ``pytest_unconfigure``), and ``run_pipeline`` removes the pipeline's folder
however its block ends.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from fair_forge_beam.beam_pipeline import run_pipeline

TESTS = Path(__file__).resolve().parent

#: a test module whose tests leave what tests of the suite left: a graph built and not run, a folder
#: made by tempfile and not removed, in the test process and in a process it starts
LEAKY = textwrap.dedent('''
    import subprocess
    import sys
    import tempfile

    from fair_forge_beam._beam import beam


    def test_a_graph_built_and_not_run():
        p = beam.Pipeline()
        _ = p | beam.Create([1, 2])


    def test_a_folder_made_and_left():
        tempfile.mkdtemp()
        tempfile.mkdtemp(prefix="beam-temp")


    def test_a_process_that_leaves_a_folder():
        subprocess.run([sys.executable, "-c", "import tempfile; tempfile.mkdtemp()"], check=True)
''')


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["0", "1"])
def test_a_test_session_leaves_nothing_in_the_temporary_folder_and_touches_no_other_folder(tmp_path, workers):
    """A session of the suite's conftest (one process, or an xdist controller and its worker) over tests that leave
    folders behind: afterwards the temporary folder holds what it held before (another process's
    folders, here one made before the session) and pytest's own ``pytest-of-<user>`` only."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    others = {"beam-pipeline-tempOTHER", "tmpOTHER", "beam-tempOTHER"}
    for name in others:
        (temp / name).mkdir()
    (tmp_path / "test_leaky.py").write_text(LEAKY, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("FAIR_FORGE_TEST_SESSION_TMP", "PYTEST_XDIST_WORKER",
                                                            "PYTEST_XDIST_TESTRUNUID", "PYTEST_ADDOPTS")}
    env["TMPDIR"] = str(temp)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])])
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest",
                          "--rootdir", str(tmp_path), "-n", workers, str(tmp_path / "test_leaky.py")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "3 passed" in run.stdout, run.stdout[-2000:]
    left = {p.name for p in temp.iterdir()}
    assert left - others == {f"pytest-of-{_user()}"}, sorted(left)
    assert others <= left  # never another process's folder


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (ImportError, KeyError, OSError):
        return "unknown"


def test_this_session_has_a_temporary_folder_of_its_own():
    """The folder the tests of this session write temporary files into is the session's (and its
    processes', through TMPDIR), not the system's."""
    root = os.environ.get("FAIR_FORGE_TEST_SESSION_TMP")
    assert root and Path(root).name.startswith("fair-forge-tests-") and Path(root).is_dir(), root
    assert tempfile.gettempdir() == root and os.environ["TMPDIR"] == root


@pytest.mark.parametrize("raises", [False, True])
def test_run_pipeline_leaves_no_folder_of_beam_behind(tmp_path, monkeypatch, raises):
    """``run_pipeline`` (every run of the package's commands): Beam's ``beam-pipeline-temp*`` folder is
    removed when the run ends and when its block raises while the graph is built (before: left)."""
    from apache_beam.options.pipeline_options import PipelineOptions

    from fair_forge_beam._beam import beam

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    options = PipelineOptions(["--runner=apache_beam.runners.portability.fn_api_runner.FnApiRunner"])
    with pytest.raises(RuntimeError) if raises else _nothing():
        with run_pipeline(options) as p:
            _ = p | beam.Create([1, 2]) | beam.Map(lambda x: x + 1)
            assert [x.name for x in tmp_path.iterdir()][0].startswith("beam-pipeline-temp")
            if raises:
                raise RuntimeError("a usage error found while the graph is built")
    assert list(tmp_path.iterdir()) == []


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
