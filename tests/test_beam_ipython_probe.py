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
        try:  # Beam's interactive environment loads only with the pandas of Beam's interactive extra
            import apache_beam.runners.interactive.interactive_environment
            loads = True
        except Exception:
            loads = False
        print(loads)
        print(pipeline.is_in_ipython(), interactive_utils.is_in_ipython(), interactive_utils.is_in_notebook())
        IPython.get_ipython = lambda: None  # imported, no shell running
        print(pipeline.is_in_ipython(), interactive_utils.is_in_ipython())
    """)
    loads, *answers = out.splitlines()
    # in a shell: Beam's answer when its interactive mode can load, else as outside IPython (trial37b B8)
    shell = "True True" if loads == "True" else "False False"
    assert answers == [f"{shell} False", "False False"], out


@pytest.mark.slow
def test_a_metric_runs_inside_an_ipython_shell():
    """trial37b B8: inside IPython or Jupyter every pipeline failed in Pipeline.apply (Beam's interactive
    environment imports apache_beam.dataframe, which this package's pandas 3 cannot load: 'DataFrame has
    no attribute first'). It runs as outside IPython, with one warning saying why."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()  # a running shell, as a notebook kernel has
        import logging
        logging.basicConfig(level=logging.WARNING)
    """) + textwrap.dedent(_RUN) + "\nprint('ran')\n"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ran", proc.stderr[-3000:]
    try:
        import apache_beam.runners.interactive.interactive_environment  # noqa: F401
    except Exception:  # noqa: BLE001 - this environment's pandas: the warning is said, once
        assert proc.stderr.count("Beam's interactive mode cannot load in this IPython session") == 1, proc.stderr


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
