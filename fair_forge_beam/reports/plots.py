"""Plots of the HTML report: inline SVG from matplotlib, one function per metric.

Figures are plain ``matplotlib.figure.Figure`` objects rendered by the SVG backend: pyplot is
never imported, so no GUI backend is selected and the host's matplotlib state is untouched.

A metric's info (:class:`~fair_forge_beam.schemas.metric_info.MetricInfo`) names its plot
function (``plot``, one of :data:`PLOTS`): ``(metric, config) -> [(caption, Figure)]`` where ``metric`` is the metric's object in ``results.json`` (``headline_columns``,
``slices``, ``lexicon`` …) plus ``session_distributions`` (binned session values streamed from
the run's session shards by :func:`session_distributions`; or an in-memory ``sessions`` list)
and ``config`` the run's ``config``. A metric that
names none gets :func:`plot_generic` (its headline estimates per slice). To add a metric's plots,
write one such function, add it to :data:`PLOTS` and name it in the metric's info; the helpers :func:`interval_panel`,
:func:`grouped_intervals` and :func:`session_histograms` draw estimates with their intervals.

Plots use aggregates only (slice estimates, histograms of session values), so their size does
not grow with the number of interactions; at most :data:`MAX_SLICES` slices are drawn per panel
(``overall`` first, then the slices whose values lie farthest from ``overall``'s: the most
extreme are never left out), the captions name the slices left out.
"""
from __future__ import annotations

from fair_forge_beam.schemas.metric_info import dotted_get

import io
import math
import re
import warnings
from typing import Callable, Optional, Sequence

import matplotlib
import matplotlib.ticker
import numpy as np
from matplotlib.figure import Figure

__all__ = ["PLOTS", "MAX_SLICES", "figure_svg", "interval_panel", "grouped_intervals", "session_histograms",
           "session_distributions",
           "plot_generic", "metric_figures", "trend_figure", "CHANGE_COLOURS"]

#: most slices drawn in one panel (the shipped example data has 15 slices: all drawn)
MAX_SLICES = 16

#: matplotlib settings for self-contained SVG: text as <text> in a generic font family (no font
#: files, no URLs), "$" not read as math, ids salted per figure (set in figure_svg)
_RC = {
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    "text.parse_math": False,
    "font.size": 9,
    "axes.titlesize": 10,
    "figure.dpi": 72,
}

_ID = re.compile(r'\bid="([^"]+)"')
#: matplotlib's warning for a character its layout font lacks (``Glyph 12468 (\N{...}) missing from font(s)
#: DejaVu Sans.``): harmless in an SVG whose text the browser draws (see :func:`figure_svg`)
_MISSING_GLYPH = r"Glyph \d+ .*missing from (current )?font"


def figure_svg(fig, uid: str) -> str:
    """The figure as an ``<svg>`` element for inline use (no XML prolog or DOCTYPE, no
    metadata, every ``id`` prefixed with ``uid`` so that several plots in one page never share
    an id). Deterministic for the same figure and ``uid``."""
    uid = re.sub(r"[^A-Za-z0-9_-]", "_", uid)
    buf = io.StringIO()
    with matplotlib.rc_context({**_RC, "svg.hashsalt": uid}), warnings.catch_warnings():
        # the SVG holds text, not glyphs (svg.fonttype none): the browser draws every character with
        # its own fonts. matplotlib only measures the layout with DejaVu Sans, which has no CJK (a
        # Japanese slice value printed 5 "Glyph 12468 ... missing from font(s) DejaVu Sans" warnings,
        # trial36 T8); a font fallback list would help only where such fonts are installed
        warnings.filterwarnings("ignore", message=_MISSING_GLYPH, category=UserWarning)
        fig.savefig(buf, format="svg",
                    metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    ids = set(_ID.findall(svg))
    svg = _ID.sub(lambda m: f'id="{uid}-{m.group(1)}"', svg)
    svg = re.sub(r'(url\(#|xlink:href="#)([^)"]+)', lambda m: m.group(1) + (f"{uid}-{m.group(2)}" if m.group(2) in ids else m.group(2)), svg)
    return svg.replace("<svg ", '<svg class="plot" role="img" ', 1)


def _new(nrows=1, ncols=1, width=7.5, height=None, **kw):
    """A figure and its axes (2-D array). Plain ``Figure`` objects, never pyplot: no global
    figure registry, no GUI backend, the host application's matplotlib settings untouched."""
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(width, height or 3.0))
        return fig, fig.subplots(nrows, ncols, squeeze=False, **kw)


#: gap between side-by-side panels (points): room for half an x tick label on each side of the seam
#: (labels up to 4 characters at font size 9, about 5.4 pt each), so the last label of one panel
#: and the first of the next never touch (they read "1.00.0" when the gap was a fixed 8 % of a panel)
PANEL_GAP_PT = 28.0


def fit(fig, label_chars: int = 8, legend: bool = False, xlabels: bool = True, wspace: Optional[float] = None,
        gap_pt: float = PANEL_GAP_PT) -> None:
    """Margins from the longest y tick label (``label_chars`` characters) and fixed heights, set
    directly: cheaper than ``tight_layout``, which draws the figure once more to measure it.
    Side-by-side panels are ``gap_pt`` points apart (``wspace`` computed from the panel width)
    unless ``wspace`` is given."""
    w, h = fig.get_size_inches()
    left = min(0.55, (label_chars * 5.4 + 16) / (w * 72))
    right = 1 - min(0.3, (140 if legend else 12) / (w * 72))
    bottom = min(0.4, (40 if xlabels else 22) / (h * 72))
    top = 1 - min(0.3, 22 / (h * 72))
    if wspace is None:
        ncols = max((ax.get_subplotspec().get_gridspec().ncols for ax in fig.axes if ax.get_subplotspec()), default=1)
        total = (right - left) * w * 72
        panel = (total - (ncols - 1) * gap_pt) / ncols if ncols > 1 else total
        wspace = gap_pt / panel if ncols > 1 and panel > 0 else 0.12
    fig.subplots_adjust(left=left, right=right, bottom=bottom, top=top, wspace=wspace)


def _relevance(s: dict, ref: Optional[dict], paths: Sequence[str], metric: str) -> float:
    """How far the slice's estimates lie from the reference slice's (``overall``): the largest
    ``|mean − mean_ref| / range`` over ``paths`` (ranges from :func:`~.estimates.value_range`);
    ``-1`` when the slice has no value on any path (nothing to draw)."""
    from fair_forge_beam.reports.estimates import value_range

    best = -1.0
    for p in paths:
        e = dotted_get(s, p)
        if not isinstance(e, dict) or e.get("mean") is None:
            continue
        r = dotted_get(ref, p) if ref else None
        base = r.get("mean") if isinstance(r, dict) and r.get("mean") is not None else None
        d = 0.0 if base is None else abs(float(e["mean"]) - float(base)) / value_range(metric, p)
        best = max(best, d)
    return best


def too_small_to_judge(s: dict, metric: str = "") -> bool:
    """Whether slice record ``s`` rests on fewer sessions (BestOf: blocks) than the scorecard judges
    (:data:`~.scorecard.MIN_SESSIONS`: one session has no interval), the scorecard's first rule."""
    from fair_forge_beam.reports.estimates import sessions_of
    from fair_forge_beam.reports.scorecard import MIN_SESSIONS

    n = sessions_of(metric, s)
    return n is not None and n < MIN_SESSIONS


def pick_slices(slices: Sequence[dict], limit: int = MAX_SLICES, paths: Sequence[str] = (),
                metric: str = "") -> tuple[list[dict], int]:
    """``overall`` first, then the slices large enough to judge (:func:`too_small_to_judge`: a
    one-session slice, far from ``overall`` by chance, never takes the place of a judged one;
    trial38 T10: the emotion plot drew five one-session assistants and left out the two judged
    ones), each group by relevance: the slices whose estimates on ``paths`` lie farthest from
    ``overall``'s (:func:`_relevance`; the most extreme values, e.g. the highest toxic rates, are
    never the ones left out), then by ``n_interactions`` and name; at most ``limit``. Without
    ``paths``: by ``n_interactions``. The chosen slices keep the results' order (``overall``
    first). Returns ``(chosen, number left out)``."""
    ref = next((s for s in slices if s.get("slice") == "overall"), None)
    rel = {id(s): (_relevance(s, ref, paths, metric) if paths else 0.0) for s in slices}
    ranked = sorted(slices, key=lambda s: (s.get("slice") != "overall", too_small_to_judge(s, metric), -rel[id(s)],
                                           -(s.get("n_interactions") or 0), str(s.get("slice"))))
    keep = {id(s) for s in ranked[:limit]}
    chosen = [s for s in slices if id(s) in keep]
    chosen.sort(key=lambda s: s.get("slice") != "overall")
    return chosen, max(0, len(ranked) - limit)


def left_out(slices: Sequence[dict], chosen: Sequence[dict]) -> list[str]:
    """Labels of the slices not drawn (in the results' order)."""
    from fair_forge_beam.reports.scorecard import slice_label

    ids = {id(s) for s in chosen}
    return [slice_label(s.get("slice")) for s in slices if id(s) not in ids]


#: the largest magnitude an estimate is drawn at: matplotlib's margins and tick locators take the
#: span of the axis, which overflows for estimates near float's limit (1e308: "arange: cannot compute
#: length", trial37 T2); a value beyond it is drawn at the limit (the tables show it as it is)
PLOT_LIMIT = 1e300


def drawn(x: float) -> float:
    """``x`` as drawn: clipped to ±:data:`PLOT_LIMIT` (every estimate a figure draws goes through it)."""
    return min(PLOT_LIMIT, max(-PLOT_LIMIT, x))


def _draw_series(ax, ys, estimates, color, ms, lw, label=None, vertical=False):
    """Points at ``mean`` and bars from ``ci_low`` to ``ci_high`` for one series, as two artists:
    at heights ``ys`` with horizontal bars, or (``vertical``) at x positions ``ys`` with vertical bars."""
    pts = [(y, drawn(e["mean"])) for y, e in zip(ys, estimates) if e and e.get("mean") is not None]
    bars = [(y, drawn(e["ci_low"]), drawn(e["ci_high"])) for y, e in zip(ys, estimates)
            if e and e.get("mean") is not None and e.get("ci_low") is not None and e.get("ci_high") is not None]
    if bars:
        yb, lo, hi = zip(*bars)
        (ax.vlines if vertical else ax.hlines)(yb, lo, hi, colors=color, lw=lw, alpha=0.6)
    if pts:
        yp, m = zip(*pts)
        ax.plot(*((yp, m) if vertical else (m, yp)), "o", color=color, ms=ms, label=label, linestyle="none")


def row_limits(n: int) -> tuple[float, float]:
    """The y limits of a panel of ``n`` rows at 0 … n−1: every row panel of a figure uses them, so
    side-by-side panels put the same row at the same height."""
    return (-0.7, n - 0.3)


def _row_axes(ax, y, labels: Sequence[str], title: str, xlabel: str, xlim: Optional[tuple]) -> None:
    """One labelled row per ``y`` position, optional x limits, title, x label, vertical grid."""
    ax.set_yticks(y)
    ax.set_yticklabels([_short(lbl) for lbl in labels])
    ax.set_ylim(*row_limits(len(labels)))
    if xlim:
        ax.set_xlim(*xlim)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)


def interval_panel(ax, labels: Sequence[str], estimates: Sequence[Optional[dict]], title: str = "",
                   xlabel: str = "", color: str = "C0", xlim: Optional[tuple] = None) -> None:
    """Horizontal point-and-interval chart: one row per label, the point at ``mean`` and a bar
    from ``ci_low`` to ``ci_high`` (point only without interval; "n/a" without value)."""
    y = np.arange(len(labels))[::-1]
    _draw_series(ax, y, estimates, color, 4, 2)
    for yi, est in zip(y, estimates):
        if not est or est.get("mean") is None:
            ax.text(0.01, yi, "n/a", va="center", transform=ax.get_yaxis_transform(), color="0.5")
    _row_axes(ax, y, labels, title, xlabel, xlim)


def grouped_intervals(ax, categories: Sequence[str], series: Sequence[tuple[str, Sequence[Optional[dict]]]],
                      title: str = "", xlabel: str = "", xlim: Optional[tuple] = None) -> None:
    """Several series of estimates over the same categories (rows), slightly offset, with a
    legend: e.g. the emotion shares of several slices."""
    k = max(1, len(series))
    y0 = np.arange(len(categories))[::-1].astype(float)
    for j, (label, ests) in enumerate(series):
        off = (j - (k - 1) / 2) * (0.7 / k)
        _draw_series(ax, y0 + off, ests, f"C{j % 10}", 3.5, 1.6, label=_short(label))
    _row_axes(ax, y0, categories, title, xlabel, xlim)
    if ax.get_legend_handles_labels()[0]:  # a series without any point draws no labelled artist
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)


def session_value(rec: dict, spec) -> Optional[float]:
    """The value a :class:`~fair_forge_beam.schemas.metric_info.SessionHistogram` draws of one
    session record: the value at its ``path``, or the observed share of its ``share_of`` counts
    (``None`` without trials); ``None`` when absent or not a number."""
    if spec.share_of is None:
        v = dotted_get(rec, spec.path)
    else:
        k, n = (dotted_get(rec, p) for p in spec.share_of)
        v = k / n if all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in (k, n)) and n else None
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _session_specs(metric: str) -> list:
    """Session values the report draws for ``metric`` (its info's ``session_histograms``):
    ``[(label, SessionHistogram, (lo, hi), bins)]``."""
    from fair_forge_beam.reports.estimates import info_of

    info = info_of(metric)
    return [(v.label, v, v.value_range, v.bins) for v in (info.session_histograms if info else ())]


def session_distributions(metric: str, sessions) -> dict:
    """Binned session values of ``metric`` from an iterable of session records, streamed: the
    result holds bin counts only, so memory does not grow with the number of sessions.

    Returns ``{"n_sessions": int, "values": {label: {"counts": [int], "range": (lo, hi), "n":
    values present, "lo"/"hi": smallest/largest value in range or None}}}``. Values outside the
    range are left out of the counts (as ``numpy.histogram`` does), ``None`` values are not
    counted in ``n``.
    """
    specs = _session_specs(metric)
    acc = {label: {"counts": np.zeros(bins, dtype=np.int64), "range": rng, "n": 0, "lo": None, "hi": None}
           for label, _, rng, bins in specs}
    n_sessions = 0
    buf: dict[str, list] = {label: [] for label, *_ in specs}

    def flush():
        for label, _, rng, bins in specs:
            if buf[label]:
                vals = np.asarray(buf[label], dtype=float)
                a = acc[label]
                a["counts"] += np.histogram(vals, bins=bins, range=rng)[0]
                a["n"] += vals.size
                inside = vals[(vals >= rng[0]) & (vals <= rng[1])]
                if inside.size:
                    lo, hi = float(inside.min()), float(inside.max())
                    a["lo"] = lo if a["lo"] is None else min(a["lo"], lo)
                    a["hi"] = hi if a["hi"] is None else max(a["hi"], hi)
                buf[label] = []

    for rec in sessions:
        n_sessions += 1
        for label, spec, _, _ in specs:
            v = session_value(rec, spec)
            if v is not None:
                buf[label].append(v)
        if n_sessions % 65536 == 0:
            flush()
    flush()
    return {"n_sessions": n_sessions, "values": acc}


def _distributions(name: str, metric: dict) -> Optional[dict]:
    """The metric's binned session values: precomputed (``session_distributions``, as the report
    attaches them from the session shards) or computed from an in-memory ``sessions`` list."""
    if metric.get("session_distributions") is not None:
        return metric["session_distributions"]
    if metric.get("sessions"):
        return session_distributions(name, metric["sessions"])
    return None


def _session_histograms(name: str, metric: dict, title: str) -> list:
    """``[(title, figure)]``: the histograms of metric ``name``'s session values, ``[]`` without sessions."""
    dist = _distributions(name, metric)
    return [(title, _histograms_from_counts(dist["values"]))] if dist and dist["n_sessions"] else []


def _histograms_from_counts(values: dict, xlabel: str = "session value"):
    """One histogram per entry of :func:`session_distributions`'s ``values``."""
    names = list(values)
    fig, axes = _new(1, max(1, len(names)), height=2.4)
    for ax, name in zip(axes[0], names):
        v = values[name]
        counts = np.asarray(v["counts"])
        edges = np.linspace(v["range"][0], v["range"][1], counts.size + 1)
        if v["n"]:
            ax.hist(edges[:-1], bins=edges, weights=counts, color="C0", alpha=0.8)
        else:
            ax.text(0.5, 0.5, "no sessions", ha="center", transform=ax.transAxes, color="0.5")
        ax.set_title(f"{name} (sessions: {v['n']})")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("sessions")
    fit(fig, 9, wspace=0.3)
    return fig


def _box_stats(v: dict, label: str) -> dict:
    """Box-plot statistics (quartiles, 1.5 IQR whiskers) read off fine bin counts (bin centres)."""
    counts = np.asarray(v["counts"])
    total = int(counts.sum())
    if not total:
        return {"label": label, "med": np.nan, "q1": np.nan, "q3": np.nan, "whislo": np.nan, "whishi": np.nan}
    edges = np.linspace(v["range"][0], v["range"][1], counts.size + 1)
    centres = (edges[:-1] + edges[1:]) / 2
    cum = np.cumsum(counts)

    def q(p):
        return float(centres[np.searchsorted(cum, p * total, side="left").clip(0, counts.size - 1)])

    q1, med, q3 = q(0.25), q(0.5), q(0.75)
    iqr = q3 - q1
    present = centres[counts > 0]
    lo = present[present >= q1 - 1.5 * iqr]
    hi = present[present <= q3 + 1.5 * iqr]
    return {"label": label, "med": med, "q1": q1, "q3": q3, "whislo": float(lo.min()) if lo.size else q1,
            "whishi": float(hi.max()) if hi.size else q3}


def session_histograms(values: dict[str, Sequence[float]], bins: int = 20, xlabel: str = "session value",
                       ranges: Optional[dict[str, tuple]] = None):
    """One histogram per named list of session values (``None`` values dropped); the values are
    binned first (``numpy.histogram``) and drawn by the same code as the report's streamed bins,
    so the figure holds only bin counts, whatever the number of sessions."""
    binned = {}
    for name, vs in values.items():
        vals = np.asarray([v for v in vs if v is not None], dtype=float)
        rng = (ranges or {}).get(name)
        if rng is None:
            lo, hi = (float(vals.min()), float(vals.max())) if vals.size else (0.0, 1.0)
            rng = (lo - 0.5, hi + 0.5) if lo == hi else (lo, hi)  # numpy's rule for a single value
        counts, _ = np.histogram(vals, bins=bins, range=rng)
        binned[name] = {"counts": counts, "range": rng, "n": int(vals.size)}
    return _histograms_from_counts(binned, xlabel)


def _short(s, n: int = 34) -> str:
    s = str(s)
    return s if len(s) <= n else s[: n - 1] + "…"


def _slice_panels(slices, paths: Sequence[str], titles: Optional[Sequence[str]] = None, xlims=None,
                  metric: str = ""):
    """One panel per path, one row per slice (the :data:`MAX_SLICES` most relevant, see
    :func:`pick_slices`); undefined estimates (:func:`~.scorecard.is_undefined`) are drawn as
    "n/a"; a path no slice has a value of gets no panel, named in the note. Returns ``(figure, caption
    note on the panels and slices not drawn)``, or ``None`` and the note saying why when no path has a value."""
    from fair_forge_beam.reports.estimates import is_undefined
    from fair_forge_beam.reports.scorecard import slice_label

    chosen, _ = pick_slices(slices, MAX_SLICES, paths, metric)
    labels = [slice_label(s["slice"]) for s in chosen]
    named = dict(zip(paths, titles or paths))
    # a panel with no value in any slice is not drawn; the caption names it (drawn_or_said's rule)
    valued = [p for p in paths if any(not is_undefined(metric, p, dotted_get(s, p)) for s in chosen)]
    if not valued:
        return None, ": not drawn, no slice has a value of it"
    fig, axes = _new(1, len(valued), height=0.32 * len(labels) + 1.2)
    for i, (ax, p) in enumerate(zip(axes[0], valued)):
        ests = [None if is_undefined(metric, p, dotted_get(s, p)) else dotted_get(s, p) for s in chosen]
        interval_panel(ax, labels if i == 0 else [""] * len(labels), ests,
                       title=named[p], color=f"C{paths.index(p) % 10}", xlim=(xlims or {}).get(p))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    fit(fig, max(len(_short(lbl)) for lbl in labels))
    missing = [named[p] for p in paths if p not in valued]
    gone = f" (not drawn, no slice has a value of it: {', '.join(repr(m) for m in missing)})" if missing else ""
    return fig, gone + _left_note(slices, chosen, metric)


def _left_note(slices: Sequence[dict], chosen: Sequence[dict], metric: str = "") -> str:
    """Caption note naming the slices not drawn, by why (:func:`pick_slices`): too small to judge,
    then the least relevant (closest to ``overall``)."""
    from fair_forge_beam.reports.scorecard import MIN_SESSIONS

    ids = {id(s) for s in chosen}
    left = [s for s in slices if id(s) not in ids]
    if not left:
        return ""
    small = {id(s) for s in left if too_small_to_judge(s, metric)}
    parts = []
    for why, group in ((f"too small to judge (under {MIN_SESSIONS} sessions)", [s for s in left if id(s) in small]),
                       ("closest to the overall value", [s for s in left if id(s) not in small])):
        names = left_out(group, [])
        if names:
            parts.append(f"{why}: " + ", ".join(_short(n, 24) for n in names[:6])
                         + (f" and {len(names) - 6} more" if len(names) > 6 else ""))
    return f" (not drawn, {'; '.join(parts)}; all slices are in the table)"


# ----------------------------------------------------------------------------------- metrics
def plot_generic(metric: dict, config: dict) -> list:
    """Headline estimates (``headline_columns``) per slice with their intervals."""
    heads = list(metric.get("headline_columns") or [])[:4]
    if not heads or not metric.get("slices"):
        return []
    fig, note = _slice_panels(metric["slices"], heads)
    return [("Headline estimates per slice with intervals" + note, fig)]


def plot_humanity(metric: dict, config: dict) -> list:
    """Emotion distributions (pooled emotion-word shares, Dirichlet intervals in Bayesian mode)
    of the largest slices; mean entropy and Spearman ρ per slice; session distributions."""
    out = []
    slices = metric.get("slices") or []
    if slices:
        emotions = list((slices[0].get("emotion_distribution") or {}).keys())
        chosen, _ = pick_slices(slices, 6, [f"emotion_distribution.{e}" for e in emotions], "humanity")
        if emotions:
            from fair_forge_beam.reports.scorecard import slice_label

            fig, ax = _new(height=0.42 * len(emotions) + 1.2)
            grouped_intervals(ax[0][0], emotions, [(slice_label(s["slice"]), [(s.get("emotion_distribution") or {}).get(e) for e in emotions]) for s in chosen],
                              xlabel="share of emotion words")
            fit(fig, max(len(e) for e in emotions), legend=True)
            out.append(("Emotion distribution per slice" + _left_note(slices, chosen, "humanity"), fig))
        fig, note = _slice_panels(slices, ["mean_entropy", "mean_spearman"],
                                  ["emotional entropy (bits)", "Spearman ρ vs reference"], metric="humanity")
        out.append(("Entropy and reference agreement per slice" + note, fig))
    return out + _session_histograms("humanity", metric, "Distribution of session means")


def plot_toxicity(metric: dict, config: dict) -> list:
    """Per group of the ``overall`` slice: mentions N_i and toxicity rate T_i with interval;
    per slice: toxic-answer rate and DR/DTO/ASB/DIDT with intervals; the toxic-word ratio per
    answer cluster (when clustering ran); session toxic rates."""
    out = []
    slices = metric.get("slices") or []
    overall = next((s for s in slices if s.get("slice") == "overall"), slices[0] if slices else None)
    if overall:
        gp = overall.get("group_profiling") or {}
        groups = list(gp.get("groups") or [])
        if groups:
            n_i = gp.get("N_i") or {}
            ge = gp.get("group_estimates") or {}
            fig, axes = _new(1, 2, height=0.3 * len(groups) + 1.2, gridspec_kw={"width_ratios": [1, 2]})
            y = np.arange(len(groups))[::-1]
            labels = [g.replace("_", " ") for g in groups]
            axes[0][0].barh(y, [n_i.get(g, 0) for g in groups], color="C7")
            # the same rows and limits as the T_i panel (row_limits): a group's bar and its T_i
            # interval sit at the same height (barh alone autoscaled to ±0.4 plus margins)
            _row_axes(axes[0][0], y, labels, "N_i: answers mentioning the group", "answers", None)
            interval_panel(axes[0][1], [""] * len(groups), [(ge.get(g) or {}).get("T") for g in groups],
                           title="T_i: toxic share of those answers", color="C3", xlim=(0, 1))
            fit(fig, max(len(_short(g)) for g in labels))
            from fair_forge_beam.reports.scorecard import toxic_rule

            rule = toxic_rule(metric)  # the run's rule: the classifier's, not the lexicon's threshold (trial38 T9)
            out.append(("Groups, overall slice" + (f" (toxic: {rule})" if rule else ""), fig))
    if slices:
        fig, note = _slice_panels(slices, ["toxic_rate"], ["toxic-answer rate"], {"toxic_rate": (0, 1)},
                                  metric="toxicity")
        out.append(("Toxic-answer rate per slice" + note, fig))
        paths = ["estimates.DR", "estimates.DTO", "estimates.ASB", "estimates.DIDT"]
        # every score lies in [0, 1] (spec §6.1): a common axis from 0 keeps "no disparity" in view
        fig, note = _slice_panels(slices, paths, ["DR", "DTO", "ASB", "DIDT"], {p: (-0.02, 1.02) for p in paths},
                                  metric="toxicity")
        out.append(("Group disparity scores per slice (0 = no disparity)" + note, fig))
    clusters = (overall or {}).get("cluster_profiling") or {}
    if clusters:
        sizes = ((overall.get("clustering") or {}).get("cluster_sizes") or {})
        labels = sorted(clusters, key=lambda c: (len(c), c))
        fig, ax = _new(height=2.8)
        a = ax[0][0]
        for noise, color in ((False, "C1"), (True, "0.5")):
            pick = [c for c in labels if (c == "-1") == noise]
            if pick:
                a.scatter([sizes.get(c, 1) for c in pick], [clusters[c] for c in pick], s=14, color=color,
                          label="noise (-1)" if noise else "clusters")
        a.set_xscale("log")
        a.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))  # no mathtext
        a.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        a.set_xlabel("answers in the cluster")
        a.set_ylabel("toxic-word ratio")
        a.legend(fontsize=7, frameon=False)
        a.grid(alpha=0.3)
        fit(fig, 6)
        out.append((f"Toxic-word ratio per answer cluster, overall slice ({len(clusters)} clusters incl. noise; "
                    "UMAP + HDBSCAN)", fig))
    return out + _session_histograms("toxicity", metric, "Distribution of session toxic-answer rates")


def plot_bias(metric: dict, config: dict) -> list:
    """Guardian-flagged rate per protected attribute (rows) for the largest slices (series)."""
    slices = metric.get("slices") or []
    if not slices:
        return []
    keys = sorted({a for s in slices for a in (s.get("rates") or {})})
    chosen, _ = pick_slices(slices, 6, [f"rates.{a}" for a in keys], "bias")
    attrs = []
    for s in chosen:
        for a in (s.get("rates") or {}):
            if a not in attrs:
                attrs.append(a)
    if not attrs:
        return []
    fig, ax = _new(height=0.45 * len(attrs) + 1.2)
    grouped_intervals(ax[0][0], attrs, [(s["slice"], [(s.get("rates") or {}).get(a) for a in attrs]) for s in chosen],
                      xlabel="share of interactions flagged", xlim=(0, 1))
    fit(fig, max(len(_short(a)) for a in attrs), legend=True)
    return [("Bias rate per protected attribute" + _left_note(slices, chosen, "bias"), fig)]


def plot_context(metric: dict, config: dict) -> list:
    """Context awareness (0–1) per slice; distribution of session scores."""
    out = []
    if metric.get("slices"):
        fig, note = _slice_panels(metric["slices"], ["context_awareness"], ["context awareness (0–1)"],
                                  {"context_awareness": (0, 1)}, metric="context")
        out.append(("Context awareness per slice" + note, fig))
    return out + _session_histograms("context", metric, "Distribution of session context awareness")


def plot_conversational(metric: dict, config: dict) -> list:
    """The seven judge dimensions (0–10) for the largest slices; session means per dimension."""
    from fair_forge_beam.schemas.conversational import RESULT_FIELDS

    out = []
    slices = metric.get("slices") or []
    dims = [f for f in RESULT_FIELDS if any(f in s for s in slices)]
    if slices and dims:
        chosen, _ = pick_slices(slices, 6, dims, "conversational")
        fig, ax = _new(height=0.45 * len(dims) + 1.2)
        grouped_intervals(ax[0][0], [d.replace("conversational_", "") for d in dims],
                          [(s["slice"], [s.get(d) for d in dims]) for s in chosen], xlabel="judge score (0–10)", xlim=(0, 10))
        fit(fig, 15, legend=True)
        out.append(("Conversational dimensions per slice" + _left_note(slices, chosen, "conversational"), fig))
    dist = _distributions("conversational", metric)
    if dist and dist["n_sessions"] and dims:
        fig, ax = _new(height=2.8)
        ax[0][0].bxp([_box_stats(dist["values"][d], str(i + 1)) for i, d in enumerate(dims)], showfliers=False)
        ax[0][0].set_xticks(range(1, len(dims) + 1))
        ax[0][0].set_xticklabels([d.replace("conversational_", "") for d in dims], rotation=30, ha="right")
        ax[0][0].set_ylabel("session mean (0–10)")
        fig.set_size_inches(7.5, 3.4)
        fit(fig, 6)
        fig.subplots_adjust(bottom=0.3)
        out.append((f"Session means per dimension ({dist['n_sessions']} sessions; boxes: quartiles, whiskers: 1.5 IQR)", fig))
    return out


def _curve_figure(slices: Sequence[dict], at: str, pow_: str):
    """pass^k (``pow_``) and pass@k (``at``) of each curve point against k, one series per slice of
    ``slices`` (those with a value at some k: a slice without one is no series). Returns ``(figure,
    caption note on the slices not drawn)``, or ``(None, "")`` when no slice has a value."""
    def has_value(s):
        return any((p.get(f) or {}).get("mean") is not None for p in s.get("curve") or () for f in (at, pow_))

    with_values = [s for s in slices if has_value(s)]
    chosen, _ = pick_slices(with_values, 6, [pow_, at], "agentic")
    if not chosen:
        return None, ""
    fig, axes = _new(1, 2, height=2.8)
    for ax, key, title in ((axes[0][0], pow_, "pass^k: all k trials succeed"),
                           (axes[0][1], at, "pass@k: one of k succeeds")):
        for j, s in enumerate(chosen):
            pts = [(p["k"], p.get(key) or {}) for p in s["curve"]]
            ks = [k for k, e in pts if e.get("mean") is not None]
            ax.plot(ks, [drawn(e["mean"]) for _, e in pts if e.get("mean") is not None], "o-", color=f"C{j % 10}",
                    ms=3.5, lw=1.2, label=_short(s["slice"]))
            bars = [(k, drawn(e["ci_low"]), drawn(e["ci_high"])) for k, e in pts
                    if e.get("ci_low") is not None and e.get("ci_high") is not None]
            if bars:
                kb, lo, hi = zip(*bars)
                ax.vlines([k + 0.04 * (j - len(chosen) / 2) for k in kb], lo, hi, colors=f"C{j % 10}", lw=1.6, alpha=0.6)
        ax.set_title(title)
        ax.set_xlabel("k")
        ax.set_ylim(0, 1)
        ax.set_xticks(sorted({p["k"] for s in chosen for p in s["curve"]}))
        ax.grid(alpha=0.3)
    axes[0][1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    fit(fig, 4, legend=True, wspace=0.35)
    return fig, _left_note(with_values, chosen, "agentic")


def plot_agentic(metric: dict, config: dict) -> list:
    """pass@k and pass^k against k (1…k) for the largest slices, with their intervals: per task over
    its trials (the slices' ``pass_at_k`` / ``pass_pow_k`` curve), and per conversation (the
    ``conversation_*`` curve, the original's plug-in). A curve no slice has a value of is not drawn;
    its caption says why (trial37 T5: with no task id the task figure was drawn with axes, a legend
    and no point, and the conversation curve was not drawn at all)."""
    slices = [s for s in metric.get("slices") or [] if s.get("curve")]
    if not slices:
        return []
    out = []
    fig, note = _curve_figure(slices, "pass_at_k", "pass_pow_k")
    task = "pass^k and pass@k against k, per task over its trials"
    if fig is not None:
        out.append((task + note, fig))
    else:
        n_tasks = sum(s.get("n_tasks") or 0 for s in slices if s.get("slice") == "overall")
        why = ("no conversation has a task id (--agentic-task-field): the per-task curve needs repeated trials of a task"
               if not n_tasks else "no task has k or more trials in any slice")
        out.append((f"{task}: not drawn, {why}", None))
    fig, note = _curve_figure(slices, "conversation_pass_at_k", "conversation_pass_pow_k")
    if fig is not None:
        out.append(("pass^k and pass@k against k, per conversation (plug-in, from its share of correct interactions)"
                    + note, fig))
    return out


def _rank_label(row: dict, ranking: Sequence[dict]) -> str:
    """A ranking row's label: ``"1. a"``; ``"1= a"`` for a rank it shares (equal estimates,
    docs/metrics/bestof.md); ``"– a"`` without a rank (no judged match)."""
    rank = row.get("rank")
    if rank is None:
        return f"– {row.get('assistant_id')}"
    shared = sum(r.get("rank") == rank for r in ranking) > 1
    return f"{rank}{'=' if shared else '.'} {row.get('assistant_id')}"


def plot_bestof(metric: dict, config: dict) -> list:
    """The ranking of each of the largest slices: Bradley–Terry log-strength with its interval
    (win rate where no strength exists)."""
    out = []
    ranked = [s for s in metric.get("slices") or [] if s.get("ranking")]
    chosen, left = pick_slices(ranked, 3, (), "bestof")  # by size: a ranking has no single value to compare
    for s in chosen:
        ranking = sorted(s["ranking"], key=lambda r: (r.get("rank") is None, r.get("rank") or 0))  # stable: listed order
        labels = [_rank_label(r, ranking) for r in ranking]
        has_strength = any((r.get("strength") or {}).get("mean") is not None for r in ranking)
        ests = [r.get("strength") if has_strength else {"mean": r.get("win_rate"), "ci_low": None, "ci_high": None}
                for r in ranking]
        fig, ax = _new(height=0.32 * len(labels) + 1.2)
        interval_panel(ax[0][0], labels, ests, xlabel="Bradley–Terry log-strength (0 = average)" if has_strength else "win rate",
                       xlim=None if has_strength else (0, 1))
        fit(fig, max(len(_short(lbl)) for lbl in labels))
        out.append((f"BestOf ranking, {s['slice']} ({s.get('n_contests', 0)} contests)", fig))
    if out and left:
        out[-1] = (out[-1][0] + f" ({left} smaller slice{'s' if left != 1 else ''} not drawn)", out[-1][1])
    return out


# ----------------------------------------------------------------------------------- trend
#: ring colours of the changes the trend report marks (verdicts of :mod:`~.compare`): worse red,
#: better green, higher/lower (no better side) blue
CHANGE_COLOURS = {"worse": "#a31515", "better": "#1b6e20", "higher": "#1f4e9a", "lower": "#1f4e9a"}
#: x tick labels of a trend panel at most (evenly spaced, first and last run always labelled)
TREND_TICKS = 8


def trend_figure(run_labels: Sequence[str], panels: Sequence[tuple[str, Sequence[Optional[dict]], dict]],
                 ylabel: str = "", ncols: int = 4):
    """Small multiples over runs: one panel per series (e.g. one per assistant), the runs on the
    x axis in order (position ``i`` = ``run_labels[i]``, oldest first), each run's estimate as a
    point at ``mean`` with a vertical bar from ``ci_low`` to ``ci_high``, a thin line through the
    points, and a ring of :data:`CHANGE_COLOURS` around a point where a change from the previous
    run was claimed. The panels share both axes, so heights compare across series.

    Args:
        run_labels: one label per run (x ticks, shortened; at most :data:`TREND_TICKS` shown).
        panels: ``[(title, [estimate dict or None per run], {run index: verdict})]``.
        ylabel: the estimate's label (left column of panels).
        ncols: panels per row.

    Returns:
        a matplotlib ``Figure``.
    """
    n = max(1, len(panels))
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    fig, axes = _new(nrows, ncols, width=9.5, height=1.9 * nrows + 1.0, sharex=True, sharey=True)
    x = np.arange(len(run_labels))
    ticks = x if len(x) <= TREND_TICKS else np.unique(np.round(np.linspace(0, len(x) - 1, TREND_TICKS)).astype(int))
    for k, ax in enumerate(axes.flat):
        if k >= len(panels):
            ax.set_visible(False)
            continue
        title, ests, marks = panels[k]
        pts = [(i, drawn(e["mean"])) for i, e in enumerate(ests) if e and e.get("mean") is not None]
        if pts:
            ax.plot(*zip(*pts), "-", color="0.6", lw=0.8)
        _draw_series(ax, x, ests, "C0", 3.5, 1.6, vertical=True)
        for i, verdict in sorted(marks.items()):
            e = ests[i] if i < len(ests) else None
            if e and e.get("mean") is not None:
                ax.plot([i], [drawn(e["mean"])], "o", ms=9, mfc="none", mec=CHANGE_COLOURS.get(verdict, "0.3"), mew=1.8)
        if not pts:
            ax.text(0.5, 0.5, "n/a", ha="center", va="center", transform=ax.transAxes, color="0.5")
        ax.set_title(_short(title, 28), fontsize=8.5)
        ax.grid(alpha=0.3)
        ax.set_xlim(-0.5, max(len(x) - 0.5, 0.5))
        ax.set_xticks(ticks)
        ax.set_xticklabels([_short(run_labels[i], 20) for i in ticks], rotation=35, ha="right", fontsize=7)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        last_in_column = k + ncols >= len(panels)
        ax.tick_params(axis="x", labelbottom=last_in_column)
        if k % ncols == 0:
            ax.set_ylabel(_short(ylabel, 30), fontsize=8)
    fit(fig, 6)
    fig.subplots_adjust(bottom=min(0.45, 78 / ((1.9 * nrows + 1.0) * 72)), hspace=0.75)
    return fig


#: the plot functions a metric's info can name (``MetricInfo.plot``), by function name
PLOTS: dict[str, Callable[[dict, dict], list]] = {f.__name__: f for f in (
    plot_humanity, plot_toxicity, plot_bias, plot_context, plot_conversational, plot_agentic, plot_bestof)}


def _finite_points(ax) -> int:
    """How many finite data points a panel draws: line vertices, scatter offsets, interval bars'
    segments and bars (text such as "n/a", grids and legends are not data)."""
    n = 0
    for line in ax.lines:
        xy = np.asarray(line.get_xydata(), dtype=float).reshape(-1, 2)
        n += int(np.isfinite(xy).all(axis=1).sum())
    for coll in ax.collections:
        segs = coll.get_segments() if hasattr(coll, "get_segments") else []
        n += sum(int(np.isfinite(np.asarray(sg, dtype=float)).all()) for sg in segs if len(sg))
        if not len(segs):
            off = np.asarray(coll.get_offsets(), dtype=float).reshape(-1, 2)
            n += int(np.isfinite(off).all(axis=1).sum())
    for patch in ax.patches:
        bbox = patch.get_bbox()
        n += int(np.isfinite([bbox.x0, bbox.x1, bbox.y0, bbox.y1]).all())
    return n


def drawn_or_said(caption: str, fig):
    """One report figure under the rule of every plot: a panel with no finite point is not drawn, and
    the caption says so (trial37 T5: an empty pass^k / pass@k figure with axes and a legend).

    Returns ``(caption, figure or None)``: the figure with its empty panels hidden (each named in the
    caption), or ``None`` with the caption saying why when no panel has a point; a ``None`` figure
    (the plot function said why itself) stays ``None``."""
    if fig is None:
        return caption, None
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]
    empty = [ax for ax in panels if not _finite_points(ax)]
    if not empty:
        return caption, fig
    if len(empty) == len(panels):
        return f"{caption}: not drawn, no slice has a value of it", None
    for ax in empty:
        ax.set_visible(False)
    names = ", ".join(repr(ax.get_title() or ax.get_xlabel() or "a panel") for ax in empty)
    return f"{caption} (not drawn, no slice has a value of it: {names})", fig


def metric_figures(name: str, metric: dict, config: dict) -> list[tuple[str, str]]:
    """``[(caption, inline svg)]`` for one metric (the plot function its info names, else
    :func:`plot_generic`), each under :func:`drawn_or_said`: a figure with no point is its caption
    alone (``svg`` ``""``)."""
    from fair_forge_beam.reports.estimates import info_of

    info = info_of(name)
    fn = PLOTS.get(info.plot, plot_generic) if info is not None and info.plot else plot_generic
    with matplotlib.rc_context(_RC):
        figs = [drawn_or_said(caption, fig) for caption, fig in fn(metric, config)]
        return [(caption, "" if fig is None else figure_svg(fig, f"{name}-{i}")) for i, (caption, fig) in enumerate(figs)]
