"""Tests that read the shared datasets are skipped without them (README: ``../shared`` or
``FAIR_FORGE_SHARED``), on a clone that has no ``../shared`` (trial 28, B10:
test_text_normalisation's shipped-text test failed with ``0 > 2000`` instead).

The shared folder has one definition (``tests/helpers.py``'s ``SHARED``, the ``shared_dir``
fixture skips without it): a test module that builds its own path (``/work/shared``,
``parents[2] / "shared"``) or reads it without a check escapes the skip."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def test_the_shared_folder_has_one_definition():
    own = []
    for path in sorted(TESTS.glob("*.py")):
        if path.name in ("helpers.py", Path(__file__).name):
            continue
        text = path.read_text(encoding="utf-8")
        if "FAIR_FORGE_SHARED" in text or re.search(r"""["']/work/shared|(\.parent|parents\[\d\])\s*/\s*["']shared["']""", text):
            own.append(path.name)
    assert own == [], f"these test modules define the shared folder again (use helpers.SHARED / shared_dir): {own}"


@pytest.mark.slow
def test_the_shipped_text_test_skips_without_the_shared_data(tmp_path):
    import subprocess
    import sys

    env = {**__import__("os").environ, "FAIR_FORGE_SHARED": str(tmp_path / "no-shared")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-rs",
                           "tests/test_text_normalisation.py::test_ascii_fast_path_on_every_shipped_text",
                           "tests/test_optimizer.py::test_bad_session_is_a_dead_letter_not_a_crash"],
                          cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "2 skipped" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
