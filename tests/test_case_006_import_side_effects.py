"""case-006: importing the library must not change the host application.

Each check runs in a fresh interpreter (a subprocess), because the module cache of the test
process has long imported everything."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


MODULES = ["fair_forge_beam", "fair_forge_beam.metrics.humanity", "fair_forge_beam.io.read", "pipelines.audit"]

PRELUDE = textwrap.dedent(
    """
    import json, logging, sys, warnings

    def snapshot():
        root = logging.getLogger()
        return {
            "level": root.level,
            "handlers": [f"{type(h).__name__}@{id(h)}" for h in root.handlers],
            "disable": logging.root.manager.disable,
        }

    def lib_loggers():
        out = {}
        for name, lg in sorted(logging.root.manager.loggerDict.items()):
            if isinstance(lg, logging.Logger) and (name == "fair_forge_beam" or name.startswith(("fair_forge_beam.", "pipelines"))):
                out[name] = {
                    "handlers": [type(h).__name__ for h in lg.handlers],
                    "propagate": lg.propagate,
                    "disabled": lg.disabled,
                }
        return out
    """
)


def run_script(body: str, tmp_path: Path) -> tuple[dict, subprocess.CompletedProcess]:
    result_file = tmp_path / "result.json"
    script = PRELUDE + textwrap.dedent(body) + textwrap.dedent(
        f"""
        with open({str(result_file)!r}, "w") as f:
            json.dump(RESULT, f)
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    proc = subprocess.run([sys.executable, "-c", script], cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(result_file.read_text()), proc


def test_import_keeps_the_hosts_logging_configuration(tmp_path):
    body = f"""
    class HostHandler(logging.Handler):
        def __init__(self):
            super().__init__()
            self.records = []
        def emit(self, record):
            self.records.append(record.getMessage())

    host = HostHandler()
    logging.getLogger().addHandler(host)
    logging.getLogger().setLevel(logging.ERROR)
    before = snapshot()
    import fair_forge_beam
    after_package = snapshot()
    for name in {MODULES!r}:
        __import__(name)
    after_all = snapshot()
    RESULT = {{
        "before": before,
        "after_package": after_package,
        "after_all": after_all,
        "host_still_attached": host in logging.getLogger().handlers,
        "lib_loggers": lib_loggers(),
    }}
    """
    res, proc = run_script(body, tmp_path)
    assert res["after_package"] == res["before"]
    assert res["after_all"] == res["before"], "importing the library changed the root logger"
    assert res["host_still_attached"]
    for name, info in res["lib_loggers"].items():
        assert set(info["handlers"]) <= {"NullHandler"}, f"{name} adds handlers {info['handlers']}"
        assert info["propagate"] and not info["disabled"], (name, info)
    assert proc.stdout == "", f"import printed to stdout: {proc.stdout!r}"


def test_import_without_logging_configuration_adds_no_root_handler(tmp_path):
    body = """
    before = snapshot()
    import fair_forge_beam
    RESULT = {"before": before, "after": snapshot()}
    """
    res, proc = run_script(body, tmp_path)
    assert res["before"]["handlers"] == []
    assert res["after"]["handlers"] == []
    assert res["after"] == res["before"]
    assert proc.stdout == ""
    assert "%|" not in proc.stderr and "it/s" not in proc.stderr  # no progress bar


def test_host_configures_logging_after_importing_the_library(tmp_path):
    """The usual application layout: imports first, ``logging.basicConfig`` in ``main()``.

    ``basicConfig`` does nothing when the root logger already has a handler, so a library that
    (directly or through a dependency) installs a root handler at import silently discards the
    application's logging configuration."""
    body = f"""
    for name in {MODULES!r}:
        __import__(name)
    after_import = snapshot()
    logging.basicConfig(level=logging.DEBUG, format="HOST %(message)s", stream=sys.stderr)
    root = logging.getLogger()
    RESULT = {{
        "after_import": after_import,
        "level": root.level,
        "formats": [getattr(h.formatter, "_fmt", None) for h in root.handlers],
    }}
    """
    res, proc = run_script(body, tmp_path)
    assert proc.stdout == ""
    assert res["after_import"]["handlers"] == [], f"import installed root handlers {res['after_import']['handlers']}; stderr: {proc.stderr!r}"
    assert res["level"] == 10  # DEBUG: the host's basicConfig took effect
    assert res["formats"] == ["HOST %(message)s"]


def test_importing_the_main_job_does_not_run_it(tmp_path):
    body = """
    import pipelines.audit as audit
    RESULT = {"has_run": callable(audit.run), "has_main": callable(audit.main)}
    """
    res, proc = run_script(body, tmp_path)
    assert res == {"has_run": True, "has_main": True}
    assert proc.stdout == ""
    assert not (tmp_path / "fair_forge_output").exists()


def _beam_import_unguarded(path: Path) -> list:
    """The ``apache_beam`` imports of ``path`` that may be Beam's first in a process without going
    through ``fair_forge_beam._beam`` first (in the module, or earlier in the same function)."""
    import ast

    def guard(n):
        return (isinstance(n, ast.Import) and any(a.name == "fair_forge_beam._beam" for a in n.names)
                or isinstance(n, ast.ImportFrom) and n.module == "fair_forge_beam._beam")

    def beam(n):
        return (isinstance(n, ast.Import) and any(a.name.split(".")[0] == "apache_beam" for a in n.names)
                or isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "apache_beam")

    def imports(node):
        return sorted((n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))),
                      key=lambda n: (n.lineno, n.col_offset))

    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    found, guarded = [], False
    for node in top:
        for n in imports(node):
            guarded = guarded or guard(n)
            if beam(n) and not guarded:
                found.append(n.lineno)
    if guarded:
        return found
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            here = False
            for n in imports(fn):
                here = here or guard(n)
                if beam(n) and not here:
                    found.append(n.lineno)
    return sorted(set(found))


def test_every_beam_import_goes_through_the_logging_guard():
    """case-006's class (trial37: ``flink_cluster start`` and every Flink worker printed Beam's
    ``WARNING:root:apitools not found …``): a module whose import of ``apache_beam`` can be the
    process's first — in a function, when the module imported Beam lazily — imports
    ``fair_forge_beam._beam`` before it, whose ``NullHandler`` keeps Beam's root-logger warning from
    installing a handler and from reaching stderr. 20 such imports in 11 modules before."""
    root = Path(__file__).resolve().parents[1]
    files = [p for p in sorted([*root.glob("fair_forge_beam/**/*.py"), *root.glob("pipelines/**/*.py")])
             if p.name != "_beam.py"]
    assert len(files) > 100
    bad = [f"{p.relative_to(root)}:{line}" for p in files for line in _beam_import_unguarded(p)]
    assert not bad, "import fair_forge_beam._beam first: " + ", ".join(bad)


def test_the_runner_helpers_print_nothing_of_beams_own(tmp_path):
    """What ``flink_cluster start`` does first (the installed Beam's version, with Beam not imported
    yet) writes nothing to stderr: Beam's apitools notice went to a new root handler before."""
    _, proc = run_script("""
    from fair_forge_beam.testing.beam_runners import beam_version
    RESULT = {"version": beam_version()}
    """, tmp_path)
    assert proc.stderr == "", proc.stderr
