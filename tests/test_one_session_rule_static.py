"""The one-session rule is applied by the engine alone (issue 29): no metric module applies it by hand.

The engine estimates a one-session slice again with its modes observed and removes the interval of
every estimate resting on fewer than 2 sessions (``statistical/slices.py``: ``one_session_estimator``,
``without_one_session_intervals``). A metric whose estimates rest on part of a slice's sessions says
on which evidence (``accs.rests_on(kind, mode, estimate)``, one call that also chooses the mode:
``engine.SliceAccumulators``); it never decides the rule itself. Before, seven metric modules did
(``single_session``, ``slice_estimate``, ``estimate_mode``, ``behind`` and ``slice_rate``'s ``sessions``
in bias, privacy, prompt_evaluator, toxicity, humanity, agentic and best_of), each a copy to keep
in step with the engine's.
"""
from __future__ import annotations

import ast
from pathlib import Path

METRICS = Path(__file__).resolve().parent.parent / "fair_forge_beam" / "metrics"

#: the rule's own functions and names (statistical/slices.py): the engine's to call
RULE = frozenset({"single_session", "slice_estimate", "slice_estimates", "estimate_mode", "behind", "ObservedMode",
                  "one_session_estimator", "without_one_session_intervals", "rests_on_one_session",
                  "SINGLE_SESSION_NOTE", "slice_resampling"})
#: the one exception, and why: BestOf's unit is the block, and with one block its Bayesian strengths lose their
#: intervals but stay Bayesian, and its probability of being best, expected rank and estimator text (not
#: estimates) go; the engine's observed re-estimate would make the strengths a frequentist MLE (other values)
EXCEPT = {"best_of.py": frozenset({"single_session", "slice_estimate", "SINGLE_SESSION_NOTE"})}


def by_hand(source: str, filename: str = "<src>") -> list:
    """``["<file>:<line>: <name>", ...]``: where ``source`` applies the one-session rule by hand."""
    allowed = EXCEPT.get(Path(filename).name, frozenset())
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        names = []
        if isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        found += [f"{filename}:{node.lineno}: {n}" for n in names if n in RULE and n not in allowed]
    return sorted(set(found))


def test_the_check_finds_each_way_of_applying_the_rule():
    src = ("from fair_forge_beam.statistical.slices import single_session, slice_rate\n"
           "from fair_forge_beam.statistical import slices\n"
           "def estimate(accs, mode, k, n, ev):\n"
           "    if single_session(accs.n_sessions, mode):\n"
           "        return slices.slice_estimate(slice_rate(k, n, accs.n_sessions, mode), 1, mode)\n"
           "    return slices.estimate_mode(mode, ev), behind(ev, n)\n")
    assert by_hand(src, "toxicity.py") == ["toxicity.py:1: single_session", "toxicity.py:4: single_session",
                                           "toxicity.py:5: slice_estimate", "toxicity.py:6: behind",
                                           "toxicity.py:6: estimate_mode"]
    assert by_hand(src, "best_of.py") == ["best_of.py:6: behind", "best_of.py:6: estimate_mode"]  # its exception only
    assert by_hand("def f(accs, m):\n    return accs.rests_on('task', m, lambda mode: 1)\n") == []


def test_no_metric_module_applies_the_one_session_rule_by_hand():
    found = [hit for path in sorted(METRICS.glob("*.py"))
             for hit in by_hand(path.read_text(encoding="utf-8"), path.name)]
    assert found == [], ("apply the one-session rule in the engine only: declare the evidence an estimate rests on "
                         "(accs.rests_on, engine.SliceAccumulators):\n" + "\n".join(found))
