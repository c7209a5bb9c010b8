"""A function never imports again a name its module already imports at the top.

Such an import makes the name local to the WHOLE function, so a use of it above the import line
raises ``UnboundLocalError`` — only on the path that reaches that use, often an error path no fast
test takes. Two merges in a row shipped it: ``audit_config._read_toml`` (a missing ``--config``)
and ``metrics/agentic._Score.process`` (a malformed tool trace: the pipeline failed instead of
dead-lettering the record). pyflakes does not report it when the use sits in an ``except`` block
above the import, hence this check over the shipped code (package, pipelines, benchmarks).
"""
from __future__ import annotations

import pytest

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHIPPED = ("fair_forge_beam", "pipelines", "benchmarks")


def _top_level_imports(tree: ast.Module) -> set:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def reimports(source: str, filename: str = "<src>") -> list:
    """``["<file>:<line>: <function> imports <name> again", ...]`` for ``source``."""
    tree = ast.parse(source, filename)
    top = _top_level_imports(tree)
    found = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    for alias in node.names:
                        name = (alias.asname or alias.name).split(".")[0]
                        if name in top:
                            found.append(f"{filename}:{node.lineno}: {fn.name} imports {name} again")
    return found


def test_the_check_finds_the_shape_that_broke():
    src = (
        "from fair_forge_beam.plain import plain_reason\n"
        "def process(x):\n"
        "    try:\n"
        "        x()\n"
        "    except ValueError as exc:\n"
        "        return plain_reason(exc)\n"
        "    if x:\n"
        "        from fair_forge_beam.plain import plain_reason\n"
        "        return plain_reason(x)\n"
    )
    assert reimports(src) == ["<src>:8: process imports plain_reason again"]
    namespace: dict = {}
    exec(compile(src, "<src>", "exec"), namespace)  # the failure it stands for
    try:
        namespace["process"](lambda: int("x"))
    except UnboundLocalError:
        pass
    else:
        raise AssertionError("expected UnboundLocalError")


@pytest.mark.slow
def test_no_function_of_the_shipped_code_imports_a_module_name_again():
    found = []
    for folder in SHIPPED:
        for path in sorted((REPO / folder).rglob("*.py")):
            found += reimports(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    assert not found, "\n".join(found)
