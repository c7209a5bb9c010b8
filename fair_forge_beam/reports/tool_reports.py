"""``report.html`` of the prompt optimizer (``pipelines/optimize.py``) and of the explainability
job (``pipelines/explain.py``): self-contained HTML like the audit report (inline CSS, inline
SVG from matplotlib, no script, a Content-Security-Policy that loads nothing).

    from fair_forge_beam.reports.tool_reports import write_optimizer_report, write_explain_report
    write_optimizer_report("out/", result_dict, dead_letters, params)   # -> out/report.html
    write_explain_report("out/", results, dead_letters, params)         # -> out/report.html

Templates: ``fair_forge_beam/templates/optimizer_report.html.j2`` and ``explain_report.html.j2``,
rendered by jinja2 with autoescaping on. Prompts, answers, tokens and dead-letter records are
text from outside: every one is escaped, never rendered as HTML (a prompt holding ``<script>``
shows as those characters).

Explain colour scale: each element's background is red ``rgb(214, 39, 40)`` with opacity equal
to its ``normalized_score`` ∈ [0, 1] (min-max over the item, spec §13: 0 = transparent = the
item's lowest raw score, 1 = full red = its highest; every element 0.5 when all scores are
equal). The raw signed score is in each element's tooltip and in the item's table.
"""
from __future__ import annotations

import os
from collections import Counter
from typing import Any, Mapping, Optional, Sequence

__all__ = ["render_optimizer_report", "write_optimizer_report", "render_explain_report", "write_explain_report",
           "attribution_colour", "MAX_DEAD_ROWS"]

#: dead-letter records shown in full (the rest are counted by stage and reason)
MAX_DEAD_ROWS = 50
#: characters of a raw dead-letter record shown
_MAX_RAW = 2000


def _env():
    from jinja2 import Environment, PackageLoader

    env = Environment(loader=PackageLoader("fair_forge_beam", "templates"), autoescape=True,
                      trim_blocks=True, lstrip_blocks=True)
    from fair_forge_beam.quoting import fixed, shown, shown_key

    env.filters["shown"], env.filters["shown_key"] = shown, shown_key  # values from the data, as a person reads them
    env.filters["fmt"] = lambda x, d=4: "n/a" if x is None else (fixed(x, d) if isinstance(x, float) else str(x))
    return env


def _dead_summary(dead: Sequence[Mapping[str, Any]]) -> dict:
    """``{"n", "by_stage": [(stage, reason-prefix, count)], "rows": first MAX_DEAD_ROWS}``; the texts
    shown masked (:func:`~fair_forge_beam.io.secrets.scrub_shown`: key values and secret-shaped
    strings, trial33 O1) before they are cut, so a secret across a cut is masked whole."""
    from fair_forge_beam.io.secrets import scrub_shown

    def shown(text, n: int) -> str:
        return scrub_shown(str(text)[:n + 256])[:n]

    by = Counter((str(d.get("stage", "")), shown(d.get("reason", ""), 120)) for d in dead)
    rows = [{"stage": d.get("stage"), "reason": shown(d.get("reason", ""), 500), "element_id": scrub_shown(d.get("element_id")),
             "raw": shown(d.get("raw", ""), _MAX_RAW)} for d in list(dead)[:MAX_DEAD_ROWS]]
    return {"n": len(dead), "by_stage": [(s, r, c) for (s, r), c in sorted(by.items())], "rows": rows}


def _trajectory_svg(points: Sequence[tuple], best: Sequence[tuple], xlabel: str, uid: str) -> Optional[str]:
    """Scores per iteration / trial (dots) and the best so far (line), as an inline SVG."""
    if not points:
        return None
    from fair_forge_beam.reports.plots import _new, figure_svg, fit

    fig, axes = _new(width=7.0, height=2.8)
    ax = axes[0][0]
    ax.scatter([p[0] for p in points], [p[1] for p in points], s=18, color="#1f77b4", label="candidate score", zorder=3)
    if best:
        ax.step([b[0] for b in best], [b[1] for b in best], where="post", color="#d62728", lw=1.5, label="best so far")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_ylabel("mean score")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fit(fig, label_chars=6)
    return figure_svg(fig, uid)


def _optimizer_view(result: Mapping[str, Any]) -> dict:
    evals = list(result.get("evaluations") or [])
    method = result.get("method", "")
    pts, best, running = [], [], None
    for e in evals:
        parts = str(e.get("stage", "")).split()
        if parts == ["seed"]:
            x = 0
        elif len(parts) == 2 and parts[1].isdigit():
            x = int(parts[1]) + (1 if parts[0] == "trial" else 0)
        else:
            continue
        if e.get("score") is None:
            continue
        pts.append((x, float(e["score"])))
    if method == "gepa":
        best = [(0, float(result["initial_score"]))] if result.get("initial_score") is not None else []
        best += [(int(h["iteration"]), float(h["best_score"]))
                                                        for h in result.get("history") or [] if h.get("best_score") is not None]
    else:
        for x, y in pts:
            if x == 0:
                continue
            running = y if running is None else max(running, y)
            best.append((x, running))
    return {"evaluations": evals, "points": pts, "best": best,
            "n_scored": sum(int(e.get("n_scored") or 0) for e in evals),
            "n_dead_examples": sum(int(e.get("n_dead") or 0) for e in evals)}


def render_optimizer_report(result: Mapping[str, Any], dead_letters: Sequence[Mapping[str, Any]],
                            params: Optional[Mapping[str, Any]] = None, seed_prompt: str = "", with_plots: bool = True) -> str:
    """The optimizer report as an HTML string.

    Args:
        result: ``result.json``'s object (``OptimizationResult`` / ``MIPROv2Result.to_dict()``
            without ``dead_letters``, plus ``"method"``: ``"gepa"`` or ``"miprov2"``).
        dead_letters: the run's dead-letter dicts (``dead_letter.jsonl``), counted by stage.
        params: the method's parameters as given (name → value), shown as a table.
        seed_prompt: the prompt the run started from.
        with_plots: draw the score trajectory (off: the table only).

    Shows the method and parameters, the seed and best prompt (escaped), the score per
    iteration (GEPA, x = iteration, 0 = the seed) or trial (MIPROv2, x = trial + 1, 0 = the
    seed on all examples), every candidate evaluation with its mean score and examples scored
    / dead-lettered, the stopping reason and the dead letters.
    """
    view = _optimizer_view(result)
    xlabel = "iteration (0 = seed prompt)" if result.get("method") == "gepa" else "trial + 1 (0 = seed prompt)"
    svg = _trajectory_svg(view["points"], view["best"], xlabel, "opt-trajectory") if with_plots else None
    return _env().get_template("optimizer_report.html.j2").render(
        title=f"Prompt optimizer report ({result.get('method', '')})", r=result, params=dict(params or {}),
        seed_prompt=seed_prompt, view=view, svg=svg, dead=_dead_summary(dead_letters))


def write_optimizer_report(out_dir: str, result: Mapping[str, Any], dead_letters: Sequence[Mapping[str, Any]],
                           params: Optional[Mapping[str, Any]] = None, seed_prompt: str = "") -> str:
    """Write ``out_dir/report.html`` (:func:`render_optimizer_report`); returns its path."""
    path = os.path.join(out_dir, "report.html")
    from fair_forge_beam.io.secrets import scrub_known_text
    from fair_forge_beam.io.write import replace_files

    # no URL credentials nor key values (trial33 O1); the whole page or none (a full disk leaves the old one)
    replace_files([(path, scrub_known_text(render_optimizer_report(result, dead_letters, params, seed_prompt)))])
    return path


def attribution_colour(normalized_score: float) -> str:
    """CSS background of one element: ``rgba(214, 39, 40, a)`` with ``a`` = the normalised score
    clipped to [0, 1], three decimals (see the module docstring)."""
    a = min(1.0, max(0.0, float(normalized_score)))
    return f"rgba(214, 39, 40, {a:.3f})"


def render_explain_report(results: Sequence[Mapping[str, Any]], dead_letters: Sequence[Mapping[str, Any]],
                          params: Optional[Mapping[str, Any]] = None) -> str:
    """The explainability report as an HTML string.

    Args:
        results: attribution records (``attributions-*.jsonl``: ``{id, prompt, target, method,
            granularity, attributions: [{text, score, position, normalized_score}], metadata}``),
            shown in order of ``id`` (then prompt), so the page does not depend on shard order.
        dead_letters: the run's dead-letter dicts, counted by stage.
        params: the job's settings (model, default method, granularity, seed, max length).

    Per item: its elements coloured by ``normalized_score`` (:func:`attribution_colour`), the
    method, granularity and normalisation, and a table of raw and normalised scores.
    """
    items = []
    for r in sorted(results, key=lambda r: (str(r.get("id")), str(r.get("prompt")), str(r.get("target")))):
        atts = sorted(r.get("attributions") or [], key=lambda a: int(a.get("position", 0)))
        items.append({"id": r.get("id"), "prompt": r.get("prompt"), "target": r.get("target"), "method": r.get("method"),
                      "granularity": r.get("granularity"), "metadata": r.get("metadata") or {},
                      "atts": [dict(a, colour=attribution_colour(a.get("normalized_score", 0.0)),
                                    dark=float(a.get("normalized_score", 0.0)) > 0.6) for a in atts]})
    return _env().get_template("explain_report.html.j2").render(
        title="Explainability report", items=items, params=dict(params or {}), dead=_dead_summary(dead_letters),
        scale=[(x / 4, attribution_colour(x / 4)) for x in range(5)])


def write_explain_report(out_dir: str, results: Sequence[Mapping[str, Any]], dead_letters: Sequence[Mapping[str, Any]],
                         params: Optional[Mapping[str, Any]] = None) -> str:
    """Write ``out_dir/report.html`` (:func:`render_explain_report`); returns its path."""
    path = os.path.join(out_dir, "report.html")
    from fair_forge_beam.io.secrets import scrub_known_text
    from fair_forge_beam.io.write import replace_files

    # no URL credentials nor key values (trial33 O1); the whole page or none (a full disk leaves the old one)
    replace_files([(path, scrub_known_text(render_explain_report(results, dead_letters, params)))])
    return path
