"""The large libraries a job imports are kept out of the cyclic collector's walks
(``fair_forge_beam._gc.unscanned_imports``, issue 26: README's job ran 8 of its 12 collections,
about 0.23 of 0.31 CPU s, inside the imports of Beam, scikit-learn and matplotlib).

Each check runs in a fresh interpreter (``sys.executable``): what is imported, collected and frozen
is process state. A collection is counted as "inside a library's import" when it starts while a
module of that library is being executed by the import system."""
from __future__ import annotations

import pytest

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: prints, as JSON on its last line, the collections that started inside an import of each watched
#: library, the frozen count and whether the collector runs, after the snippet's BODY
PROBE = textwrap.dedent("""
    import gc, json, sys
    WATCH = {watch!r}
    inside = {{lib: 0 for lib in WATCH}}

    def on_gc(phase, info):
        if phase != "start":
            return
        f, importing, libs = sys._getframe(1), False, set()
        while f is not None:
            name = f.f_code.co_filename
            importing = importing or "importlib._bootstrap" in name
            libs.update(lib for lib in WATCH if "/" + lib + "/" in name and f.f_code.co_name == "<module>")
            f = f.f_back
        for lib in libs if importing else ():
            inside[lib] += 1

    gc.callbacks.append(on_gc)
    {body}
    gc.callbacks.remove(on_gc)
    print(json.dumps({{"inside": inside, "frozen": gc.get_freeze_count(), "enabled": gc.isenabled()}}))
""")


def _probe(body: str, watch: tuple, tmp_path: Path) -> dict:
    script = PROBE.format(watch=list(watch), body=textwrap.dedent(body).strip())
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_block_pauses_the_collector_and_freezes_only_when_it_imported(tmp_path):
    """Paused inside (a nested block leaves it paused), running after (unless it was off before),
    a freeze only when a module was imported."""
    script = textwrap.dedent("""
        import gc
        from fair_forge_beam._gc import unscanned_imports
        seen = []
        with unscanned_imports():
            seen.append(gc.isenabled())
            with unscanned_imports():
                import json.tool
            seen.append(gc.isenabled())
            rings = [[] for _ in range(200_000)]
            for r in rings:
                r.append(r)
            del rings
            seen.append(gc.get_count()[0] > 100_000)
        seen.append(gc.isenabled())
        frozen = gc.get_freeze_count()
        with unscanned_imports():
            import json.tool
        seen.append(gc.get_freeze_count() == frozen > 0)
        gc.disable()
        with unscanned_imports():
            pass
        seen.append(gc.isenabled())
        print(seen)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["[False,", "False,", "True,", "True,", "True,", "False]"]


def test_the_audits_parser_imports_beam_unwalked(tmp_path):
    got = _probe("""
        from pipelines.audit import build_parser
        build_parser()
    """, ("apache_beam", "pandas", "pyarrow", "pydantic"), tmp_path)
    assert got["inside"] == {"apache_beam": 0, "pandas": 0, "pyarrow": 0, "pydantic": 0}, got
    assert got["frozen"] > 0 and got["enabled"]


def test_the_classifier_imports_scikit_learn_unwalked(tmp_path):
    got = _probe("""
        from fair_forge_beam.components.toxicity_classifier import ProfanityCheckClassifier
        c = ProfanityCheckClassifier()
        c.setup()
        assert c.probabilities(["hello there"])[0] < 0.5
    """, ("sklearn", "scipy", "profanity_check"), tmp_path)
    assert got["inside"] == {"sklearn": 0, "scipy": 0, "profanity_check": 0}, got
    assert got["frozen"] > 0 and got["enabled"]


@pytest.mark.slow
def test_the_report_imports_matplotlib_unwalked(tmp_path):
    got = _probe("""
        import pathlib
        from fair_forge_beam.reports.html import write_report
        run = pathlib.Path("run")
        run.mkdir()
        slice_ = {"slice": "overall", "n_interactions": 10, "n_toxic": 3,
                  "toxic_rate": {"mean": 0.3, "ci_low": 0.1, "ci_high": 0.6, "n": 10}}
        doc = {"config": {"mode": "frequentist", "ci_level": 0.95, "seed": 1, "inputs": []},
               "metrics": {"toxicity": {"headline_columns": [], "slices": [slice_]}}}
        write_report(str(run), doc=doc, run_info={},
                     dead_letters={"total": 0, "by_stage": {}, "by_reason": [], "first": [], "unreadable": 0})
        assert "<svg" in (run / "report.html").read_text(encoding="utf-8")
    """, ("matplotlib", "jinja2", "PIL"), tmp_path)
    assert got["inside"] == {"matplotlib": 0, "jinja2": 0, "PIL": 0}, got
    assert got["frozen"] > 0 and got["enabled"]
