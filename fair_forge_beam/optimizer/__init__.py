"""Prompt optimizer (spec §12): GEPA and MIPROv2, candidates scored by Beam pipelines.

Names load on first use::

    from fair_forge_beam.optimizer import GEPAOptimizer, MIPROv2Optimizer

See ``docs/optimizer.md``.
"""
from __future__ import annotations

from fair_forge_beam._lazy import lazy_exports

_EXPORTS = {
    "GEPAOptimizer": "optimizers", "MIPROv2Optimizer": "optimizers", "OptimizationResult": "optimizers",
    "IterationResult": "optimizers", "MIPROv2Result": "optimizers", "ProposedPrompts": "optimizers",
    "DEFAULT_TIPS": "optimizers", "keyed_rng": "optimizers", "sample_demo_sets": "optimizers", "build_prompt": "optimizers",
    "Example": "evaluation", "EvaluatorScore": "evaluation", "CandidateScore": "evaluation", "load_examples": "evaluation",
    "evaluate_prompts": "evaluation",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
