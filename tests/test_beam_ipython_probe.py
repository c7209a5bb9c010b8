"""``_beam.probe_ipython_only_when_imported``: a process that runs our pipelines outside IPython no longer
imports IPython to learn that (Beam's ``is_in_ipython``, asked for every applied transform: 0.04-0.06
CPU s of README's main job, issue 26); inside IPython Beam's own answer is given, as before."""
import importlib.util
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("IPython") is None, reason="IPython is not installed")

_RUN = """
    import sys
    import apache_beam.testing.util
    from fair_forge_beam._beam import beam
    from fair_forge_beam.beam_pipeline import pipeline_options, run_pipeline

    with run_pipeline(pipeline_options([])) as p:
        got = p | beam.Create([1, 2]) | beam.Map(lambda x: x * 2)
        beam.testing.util.assert_that(got, beam.testing.util.equal_to([2, 4]))
"""


def _child(*code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", "".join(textwrap.dedent(c) for c in code)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip()


def test_a_pipeline_run_outside_ipython_does_not_import_it():
    assert _child(_RUN, """
    print("IPython" in sys.modules, "IPython" in " ".join(sys.modules))
    """) == "False False"


def test_inside_ipython_beams_own_answer_is_given():
    out = _child("""
        import types
        import IPython  # as in a shell or kernel: imported before the user's code
        IPython.get_ipython = lambda: types.SimpleNamespace(config={})  # a running shell, as Beam asks for it
        from apache_beam import pipeline
        from apache_beam.utils import interactive_utils
        from fair_forge_beam._beam import probe_ipython_only_when_imported

        probe_ipython_only_when_imported()
        print(pipeline.is_in_ipython(), interactive_utils.is_in_ipython(), interactive_utils.is_in_notebook())
        IPython.get_ipython = lambda: None  # imported, no shell running
        print(pipeline.is_in_ipython(), interactive_utils.is_in_ipython())
    """)
    assert out.splitlines() == ["True True False", "False False"]


def test_every_beam_module_that_asks_uses_the_answer_without_the_import():
    """A Beam version that asks elsewhere, under another name, would import IPython again: caught
    here and by the first test."""
    out = _child(_RUN, """
    from apache_beam.utils import interactive_utils
    probe = interactive_utils.is_in_ipython
    original = probe.__wrapped_original__
    users = sorted(n for n, m in sys.modules.items()
                   if n.startswith("apache_beam") and getattr(m, "is_in_ipython", None) is not None)
    print(" ".join(users))
    print(all(sys.modules[n].is_in_ipython is probe for n in users), original.__module__)
    """)
    users, same = out.splitlines()
    assert "apache_beam.pipeline" in users.split() and "apache_beam.utils.interactive_utils" in users.split()
    assert same == "True apache_beam.utils.interactive_utils"
