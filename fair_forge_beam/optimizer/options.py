"""Options of the prompt-optimizer job (``pipelines/optimize.py``), declared once.

Same :class:`~fair_forge_beam.options.Option` declarations as the main job's options; ``feeds``
names the optimizer constructor argument each value goes to (:func:`constructor_kwargs`), and a
test compares every declared default with the constructor's own default.
"""
from __future__ import annotations

import argparse
from typing import Any, Mapping

from fair_forge_beam.options import Option, _non_negative, _positive

__all__ = ["OPTIMIZER_OPTIONS", "add_arguments", "constructor_kwargs", "validate"]

_G = "fair_forge_beam.optimizer.optimizers:GEPAOptimizer"
_M = "fair_forge_beam.optimizer.optimizers:MIPROv2Optimizer"


def _threshold(v):
    return None if 0.0 <= v <= 1.0 else f"--failure-threshold must be in [0, 1], got {v}"


OPTIMIZER_OPTIONS = (
    Option("method", "optimizer: gepa (reflective hill climbing) or miprov2 (instructions + demos, Optuna TPE)", default="gepa",
           choices=("gepa", "miprov2")),
    Option("input", "JSON file with a list of sessions (upstream Dataset records with ground_truth_assistant)", metavar="FILE"),
    Option("output", "folder for result.json, dead_letter.jsonl and report.html", metavar="DIR"),
    Option("model", "model of the proposal calls (and the executor / evaluator unless given)", default_note="required"),
    Option("base-url", "OpenAI-compatible endpoint root including /v1", default_note="api.openai.com"),
    Option("api-key-env", "environment variable holding the API key", default="OPENAI_API_KEY"),
    Option("executor-model", "model that answers with each candidate prompt", default_note="--model"),
    Option("evaluator-model", "model that scores the answers (structured output)", default_note="--model"),
    Option("judge-cache", "SQLite cache of every call (path, or 'none')", default="default"),
    Option("seed-prompt", "the prompt to improve", default_note="required, or --seed-prompt-file"),
    Option("seed-prompt-file", "file holding the prompt to improve", metavar="FILE"),
    Option("objective", "evaluation criteria given to the evaluator and the proposer", default="", feeds=(f"{_G}.objective", f"{_M}.objective")),
    Option("iterations", "GEPA: maximum iterations", type=int, default=5, validate=_positive("--iterations"), feeds=(f"{_G}.iterations",)),
    Option("candidates-per-iteration", "GEPA: prompts proposed per iteration", type=int, default=3,
           validate=_positive("--candidates-per-iteration"), feeds=(f"{_G}.candidates_per_iteration",)),
    Option("failure-threshold", "GEPA: an example scoring below this is failing", type=float, default=0.6, validate=_threshold,
           feeds=(f"{_G}.failure_threshold",)),
    Option("num-candidates", "MIPROv2: instruction variants proposed", type=int, default=10, validate=_positive("--num-candidates"),
           feeds=(f"{_M}.num_candidates",)),
    Option("num-trials", "MIPROv2: TPE trials", type=int, default=20, validate=_positive("--num-trials"), feeds=(f"{_M}.num_trials",)),
    Option("minibatch-size", "MIPROv2: examples scored per trial", type=int, default=25, validate=_positive("--minibatch-size"),
           feeds=(f"{_M}.minibatch_size",)),
    Option("max-demos-per-set", "MIPROv2: demonstrations per demo set", type=int, default=3, validate=_non_negative("--max-demos-per-set"),
           feeds=(f"{_M}.max_demos_per_set",)),
    Option("num-demo-sets", "MIPROv2: demo sets sampled", type=int, default=5, validate=_positive("--num-demo-sets"),
           feeds=(f"{_M}.num_demo_sets",)),
    Option("random-seed", "MIPROv2: seed of the TPE sampler, demo sets and minibatches", type=int, default=42,
           feeds=(f"{_M}.random_seed",)),
    Option("no-report", "do not write report.html", type=bool),
)
_BY_DEST = {o.dest: o for o in OPTIMIZER_OPTIONS}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every optimizer option to ``parser`` (``--help`` shows each default)."""
    for o in OPTIMIZER_OPTIONS:
        o.add_to(parser)


def validate(args: Any) -> None:
    """Raise ``ValueError`` with the first failing option's one-line message."""
    for d, o in _BY_DEST.items():
        v = getattr(args, d, None)
        if o.validate is not None and v is not None:
            msg = o.validate(v)
            if msg:
                raise ValueError(msg)


def constructor_kwargs(target: str, values: Mapping[str, Any]) -> dict:
    """Keyword arguments of ``target`` (``"module:Class"``) from the options that feed it."""
    out = {}
    for d, o in _BY_DEST.items():
        for f in o.feeds:
            owner, _, arg = f.rpartition(".")
            if owner == target and values.get(d) is not None:
                out[arg] = values[d]
    return out
