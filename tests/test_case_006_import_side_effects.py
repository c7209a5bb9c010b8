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
from typing import Optional

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


def _imported(n) -> Optional[str]:
    """The module the AST node ``n`` imports (``import x``, ``from x import y``, and the calls
    ``importlib.import_module("x")``, ``import_module("x")``, ``__import__("x")`` with a literal
    name), or ``None``. ``from fair_forge_beam import _beam`` imports ``fair_forge_beam._beam``."""
    import ast

    if isinstance(n, ast.Import):
        names = [a.name for a in n.names]
        return next((m for m in names if m.split(".")[0] == "apache_beam"), None) or (
            "fair_forge_beam._beam" if "fair_forge_beam._beam" in names else names[0])
    if isinstance(n, ast.ImportFrom):
        if n.module == "fair_forge_beam" and any(a.name == "_beam" for a in n.names):
            return "fair_forge_beam._beam"
        return n.module
    if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str):
        f = n.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        if name in ("import_module", "__import__"):
            return n.args[0].value
    return None


def _beam_import_unguarded(source: str) -> list:
    """The lines of ``source`` whose import of ``apache_beam`` may be Beam's first in a process
    without going through ``fair_forge_beam._beam`` first. A guard counts for an import when it is
    a statement of the same block as the import, or of a block that holds it, and comes before it
    (``if``/``try``/``with``/``for`` bodies and class bodies are blocks; a guard in another branch,
    under ``if TYPE_CHECKING:`` or in another function does not count); in a function, a guard
    among the module's own statements counts too (the module ran them when it was imported)."""
    import ast

    def is_guard(stmt) -> bool:
        node = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else stmt
        return _imported(node) == "fair_forge_beam._beam"

    tree = ast.parse(source)
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    module_guarded = any(is_guard(s) for s in tree.body)
    found = []
    for n in ast.walk(tree):
        if (_imported(n) or "").split(".")[0] != "apache_beam":
            continue
        node, guarded, in_function = n, False, False
        while node in parents and not guarded:
            parent = parents[node]
            for field in ("body", "orelse", "finalbody"):
                block = getattr(parent, field, None)
                if isinstance(block, list):
                    at = next((i for i, s in enumerate(block) if s is node), None)
                    if at is not None:
                        guarded = any(is_guard(s) for s in block[:at])
                        in_function = in_function or (field == "body" and isinstance(
                            parent, (ast.FunctionDef, ast.AsyncFunctionDef)))
            in_function = in_function or isinstance(parent, ast.Lambda)
            node = parent
        if not guarded and not (in_function and module_guarded):
            found.append(n.lineno)
    return sorted(set(found))


#: synthetic modules: (source, the lines the rule must name)
GUARD_CASES = {
    "guarded module": ("import fair_forge_beam._beam\nimport apache_beam\ndef f():\n    import apache_beam.io\n", []),
    "guarded function": ("def f():\n    import fair_forge_beam._beam\n    import apache_beam\n", []),
    "from-import guard": ("def f():\n    from fair_forge_beam import _beam\n    from apache_beam import io\n", []),
    "guard, then a block": ("import fair_forge_beam._beam\nif x:\n    import apache_beam\n", []),
    "importlib": ("import importlib\ndef f():\n    return importlib.import_module('apache_beam.io')\n", [3]),
    "import_module": ("from importlib import import_module\nbeam = import_module('apache_beam')\n", [2]),
    "__import__": ("def f():\n    return __import__('apache_beam')\n", [2]),
    "class body": ("class C:\n    import apache_beam as beam\n", [2]),
    "guard only under TYPE_CHECKING": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                       "    import fair_forge_beam._beam\ndef f():\n    import apache_beam\n", [5]),
    "guard in another branch": ("def f(x):\n    if x:\n        import fair_forge_beam._beam\n    else:\n"
                                "        import apache_beam\n", [5]),
    "guard in a nested def": ("def f():\n    def never():\n        import fair_forge_beam._beam\n"
                              "    import apache_beam\n", [4]),
    "guard in a class body": ("class C:\n    import fair_forge_beam._beam\ndef f():\n    import apache_beam\n", [4]),
    "guard after the import": ("try:\n    import apache_beam\nexcept ImportError:\n    pass\n"
                               "import fair_forge_beam._beam\n", [2]),
}


@pytest.mark.parametrize("case", list(GUARD_CASES))
def test_the_guard_rule_sees_every_form_of_a_beam_import(case):
    """trial37b B9: the rule below missed importlib.import_module / __import__ of Beam, an import in
    a class body, and counted a guard under ``if TYPE_CHECKING:``, in another branch or in a nested
    def. (Today's code has none of these; the synthetic modules show each form is caught.)"""
    source, lines = GUARD_CASES[case]
    assert _beam_import_unguarded(source) == lines


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
    bad = [f"{p.relative_to(root)}:{line}" for p in files for line in _beam_import_unguarded(p.read_text(encoding="utf-8"))]
    assert not bad, "import fair_forge_beam._beam first: " + ", ".join(bad)


def test_the_runner_helpers_print_nothing_of_beams_own(tmp_path):
    """What ``flink_cluster start`` does first (the installed Beam's version, with Beam not imported
    yet) writes nothing to stderr: Beam's apitools notice went to a new root handler before."""
    _, proc = run_script("""
    from fair_forge_beam.testing.beam_runners import beam_version
    RESULT = {"version": beam_version()}
    """, tmp_path)
    assert proc.stderr == "", proc.stderr
