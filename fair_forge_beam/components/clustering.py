"""Cluster profiling, the numerical part: UMAP + HDBSCAN fit on a sample of answer embeddings,
assignment of every other point to a fitted cluster, and the per-cluster toxic-word profile —
plain numpy / umap-learn / scikit-learn, no Beam (the Beam stage around it is
:mod:`fair_forge_beam.components.cluster_profile`, whose docstring describes the whole method
and its sources: McInnes, Healy & Melville 2018 for UMAP; Campello, Moulavi & Sander 2013 for
HDBSCAN).

Pieces: :class:`ClusterConfig` (validated settings), :func:`sample_key` (stable 64-bit sampling
key of a point), :func:`fit_clusters` (fit on the sample → :class:`FitOutcome` with an
:class:`AssignModel`), :meth:`AssignModel.assign` (k-nearest-neighbour vote of unfitted points,
:func:`knn_vote`) and :func:`build_profile` (exact integer sums → score per cluster). Heavy
imports (umap, numba, sklearn) happen inside the functions that need them.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import warnings
from dataclasses import dataclass
from typing import Any, Iterable, NamedTuple, Optional

import numpy as np

from fair_forge_beam.options import SEED
from fair_forge_beam.quoting import quoted
from fair_forge_beam.statistical.base import check_nonnegative
from fair_forge_beam.statistical.seeding import stable_hash64
from fair_forge_beam.arguments import checks_arguments

__all__ = [
    "ClusterInput",
    "ClusterAssignment",
    "ClusterConfig",
    "FitOutcome",
    "AssignModel",
    "fit_clusters",
    "knn_vote",
    "sample_key",
    "build_profile",
    "MIN_POINTS",
]

_LOG = logging.getLogger(__name__)

#: Fewest points the stage clusters (below it: ``status="too_few"``; upstream crashes below 5).
MIN_POINTS = 5

STAGE = "cluster_profile"


class ClusterInput(NamedTuple):
    """One answer to cluster.

    ``embedding``: 1-D float vector ``(d,)`` (converted to float32); ``toxic_words`` and
    ``total_words``: integer token counts with ``0 ≤ toxic_words ≤ total_words``.
    ``element_id`` must be unique (it keys the sample and the output rows).
    """

    element_id: str
    embedding: np.ndarray
    toxic_words: int
    total_words: int


class ClusterAssignment(NamedTuple):
    """The label of one point: ``cluster_label`` (``-1`` = noise), whether the point was in the
    fitted sample (``fitted``) or assigned afterwards, and its UMAP coordinates (``latent``, a
    tuple of ``n_components`` floats; ``None`` when UMAP was not fitted)."""

    element_id: str
    cluster_label: int
    fitted: bool
    latent: Optional[tuple]


class _Labelled(NamedTuple):
    element_id: str
    cluster_label: int
    toxic_words: int
    total_words: int
    fitted: bool
    latent: Optional[tuple]
    embedding: Optional[np.ndarray]  # kept only when the points file is written


@dataclass(frozen=True)
class ClusterConfig:
    """Parameters of the stage (see :class:`ClusterProfile` for their meaning)."""

    min_cluster_size: int = 5
    cluster_selection_epsilon: float = 0.01
    metric: str = "euclidean"
    use_latent_space: bool = True
    umap_n_components: int = 2
    umap_n_neighbors: int = 15
    umap_min_dist: float = 0.1
    umap_random_state: int = SEED
    umap_metric: str = "cosine"
    cap: int = 50_000
    seed: int = SEED
    assign_neighbors: Optional[int] = None
    assign_batch_size: int = 4096
    need_latent: bool = True  # fit UMAP at all (use_latent_space or a points file)
    numba_cache: bool = True

    @property
    def min_points(self) -> int:
        """Fewest points that are clustered: ``max(min_cluster_size, MIN_POINTS)``."""
        return max(self.min_cluster_size, MIN_POINTS)

    @property
    def k(self) -> int:
        return self.assign_neighbors if self.assign_neighbors is not None else self.min_cluster_size

    def validate(self) -> None:
        def pos_int(name, v, low=1):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {quoted(v)}")

        pos_int("min_cluster_size", self.min_cluster_size, 2)
        pos_int("umap_n_components", self.umap_n_components, 1)
        pos_int("umap_n_neighbors", self.umap_n_neighbors, 2)
        pos_int("assign_batch_size", self.assign_batch_size, 1)
        if self.assign_neighbors is not None:
            pos_int("assign_neighbors", self.assign_neighbors, 1)
        pos_int("cap", self.cap, self.min_points)
        for name in ("cluster_selection_epsilon", "umap_min_dist"):
            check_nonnegative(name, getattr(self, name))
        for name in ("metric", "umap_metric"):
            v = getattr(self, name)
            if not isinstance(v, str) or not v:
                raise ValueError(f"{name} must be a metric name (str), got {quoted(v)}")
        if not isinstance(self.umap_random_state, (int, np.integer)) or isinstance(self.umap_random_state, bool):
            raise ValueError(f"umap_random_state must be an int, got {quoted(self.umap_random_state)}")
        if not isinstance(self.seed, (int, np.integer)) or isinstance(self.seed, bool):
            raise ValueError(f"seed must be an int, got {quoted(self.seed)}")

    def hdbscan_params(self) -> dict:
        return {
            "min_cluster_size": int(self.min_cluster_size),
            "min_samples": None,
            "cluster_selection_epsilon": float(self.cluster_selection_epsilon),
            "metric": self.metric,
            "cluster_selection_method": "eom",
        }

    def umap_params(self) -> dict:
        return {
            "n_components": int(self.umap_n_components),
            "n_neighbors": int(self.umap_n_neighbors),
            "min_dist": float(self.umap_min_dist),
            "random_state": int(self.umap_random_state),
            "metric": self.umap_metric,
            "n_jobs": 1,
        }


# ------------------------------------------------------------------ heavy imports (lazy)
_NUMBA_LOCK = threading.Lock()
_NUMBA_CACHED = False


def numba_cache_dir() -> str:
    """Where numba writes its compiled kernels: ``$NUMBA_CACHE_DIR`` when the user set it, else the
    user cache folder ``$XDG_CACHE_HOME/fair_forge_beam/numba`` (``~/.cache`` when
    ``XDG_CACHE_HOME`` is unset), which this function puts in ``NUMBA_CACHE_DIR`` (and numba's
    config, when numba is already imported) for this process and those it starts. Called before
    numba is imported (:func:`_import_umap`): numba's default writes into the installed
    packages' ``__pycache__`` folders (site-packages), which fails on a read-only install and
    dirties a shared one (issue 28). Returns the folder."""
    given = os.environ.get("NUMBA_CACHE_DIR")
    if given:
        return given
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "fair_forge_beam", "numba")
    os.environ["NUMBA_CACHE_DIR"] = path
    config = sys.modules.get("numba.core.config")
    if config is not None and not getattr(config, "CACHE_DIR", ""):
        config.CACHE_DIR = path  # numba read the environment at its import, before this
    return path


# at import too: a worker that unpickles a fitted UMAP (a side input) imports umap and numba
# without calling _import_umap, but has imported this module (its DoFn's) first
numba_cache_dir()


def _enable_numba_cache() -> int:
    """Turn on numba's on-disk cache for the compiled kernels of umap and pynndescent.

    umap-learn declares most of its ``numba.njit`` kernels without ``cache=True``, so every new
    process spends ≈25–35 s compiling them. This enables caching on those module-level dispatchers
    (numba keys the cache by source file and signature and invalidates it when the file changes);
    kernels numba cannot cache just keep compiling. Returns the number of dispatchers switched."""
    global _NUMBA_CACHED
    with _NUMBA_LOCK:
        if _NUMBA_CACHED:
            return 0
        from numba.core.caching import NullCache
        from numba.core.registry import CPUDispatcher

        n = 0
        for name, mod in list(sys.modules.items()):
            if mod is None or not (name.startswith("umap.") or name.startswith("pynndescent.")):
                continue
            for obj in list(vars(mod).values()):
                if (
                    isinstance(obj, CPUDispatcher)
                    and isinstance(obj._cache, NullCache)
                    and getattr(obj.py_func, "__module__", None) == name
                ):
                    try:
                        obj.enable_caching()
                        n += 1
                    except Exception:  # a kernel numba cannot cache keeps compiling
                        pass
        _NUMBA_CACHED = True
        return n


def require_clustering() -> None:
    """Check (without importing them) that umap-learn, pynndescent and numba are installed.

    Raises:
        fair_forge_beam.extras.MissingExtraError: one is missing; the message names the ``embeddings``
            extra and ``--no-clustering``.
    """
    from fair_forge_beam.extras import CLUSTERING_MODULES, require

    require("embeddings", "Toxicity's cluster profiling (UMAP + HDBSCAN)", CLUSTERING_MODULES,
            alternative="turn it off (clustering=False; main job: --no-clustering)")


def _import_umap(numba_cache: bool = True):
    """``import umap`` (≈3–8 s: numba, pynndescent, sklearn) with the numba cache switched on.

    Raises:
        fair_forge_beam.extras.MissingExtraError: umap-learn and its dependencies (the
            ``embeddings`` extra) are not installed.
    """
    require_clustering()
    numba_cache_dir()  # before numba is imported: its cache goes to the user cache folder, not site-packages
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import umap  # noqa: F401  (heavy; only here)
    if numba_cache:
        _enable_numba_cache()
    return umap


class _Quiet:
    """Capture library warnings (UMAP's n_jobs override, sklearn FutureWarnings) and log them at
    DEBUG level instead of printing them per call."""

    def __enter__(self):
        self._cm = warnings.catch_warnings(record=True)
        self.records = self._cm.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        self._cm.__exit__(*exc)
        for w in self.records:
            _LOG.debug("clustering: %s: %s", getattr(w.category, "__name__", "Warning"), w.message)
        return False


# ------------------------------------------------------------------ pure functions
def sample_key(seed: int, element_id: str) -> int:
    """64-bit sampling key of a point: ``stable_hash64(seed, "cluster-sample", element_id)``.
    The ``cap`` points with the smallest keys form the fitted sample."""
    return stable_hash64(int(seed), "cluster-sample", element_id)


def _order_key(p: ClusterInput) -> tuple:
    """Canonical order of points: element_id, then content (only matters for duplicate ids)."""
    return (p.element_id, p.embedding.tobytes(), p.toxic_words, p.total_words)


def knn_vote(neigh_labels: np.ndarray, neigh_dists: np.ndarray) -> np.ndarray:
    """Majority label of each row's neighbours.

    ``neigh_labels``, ``neigh_dists``: ``(b, k)`` arrays (labels int, distances ≥ 0). Per row the
    label with most voters wins; ties go to the label with the smaller sum of voter distances, then
    to the smaller label. Returns ``(b,)`` int64."""
    L = np.asarray(neigh_labels, dtype=np.int64)
    D = np.asarray(neigh_dists, dtype=np.float64)
    if L.ndim != 2 or L.shape != D.shape:
        raise ValueError(f"labels and distances must be (b, k) arrays of one shape, got {L.shape} and {D.shape}")
    if L.shape[0] == 0:
        return np.empty(0, dtype=np.int64)
    same = L[:, :, None] == L[:, None, :]  # (b, k, k)
    votes = same.sum(axis=2)
    dsum = (same * D[:, None, :]).sum(axis=2)
    # lexsort: the last key is the primary one -> most votes, then least distance, then smallest label
    order = np.lexsort((L, dsum, -votes), axis=-1)
    return L[np.arange(L.shape[0]), order[:, 0]]


def _sorted_neighbours(dists: np.ndarray, idx: np.ndarray) -> tuple:
    """Order each row's neighbours by (distance, index) so equal distances have one order."""
    order = np.lexsort((idx, dists), axis=-1)
    rows = np.arange(dists.shape[0])[:, None]
    return dists[rows, order], idx[rows, order]


@dataclass
class FitOutcome:
    """Result of :func:`fit_clusters` on ``n`` sorted points.

    ``labels``: ``(n,)`` int64 HDBSCAN labels (``-1`` = noise); ``latent``: ``(n, n_components)``
    float32 UMAP coordinates or ``None``; ``umap_model``: the fitted ``umap.UMAP`` or ``None``;
    ``space``: ``"latent"`` or ``"embedding"`` (what HDBSCAN clustered); ``umap_info``: what was
    fitted (JSON-able); ``notes``: deterministic remarks (skips, fallbacks)."""

    status: str
    labels: np.ndarray
    latent: Optional[np.ndarray]
    umap_model: Any
    space: str
    umap_info: dict
    notes: list


def _single_threaded():
    """Context: BLAS/OpenMP pools limited to one thread (``threadpoolctl``) and numba's thread
    count set to 1 (restored after), so the fit and the assignment cannot depend on how many
    threads the worker offers (UMAP's spectral initialisation runs ARPACK on BLAS; pynndescent and
    umap kernels are numba-parallel)."""
    from contextlib import ExitStack, contextmanager

    from threadpoolctl import threadpool_limits

    @contextmanager
    def numba_one():
        try:
            import numba
        except ImportError:  # pragma: no cover - umap needs numba
            yield
            return
        prev = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            yield
        finally:
            numba.set_num_threads(prev)

    stack = ExitStack()
    stack.enter_context(threadpool_limits(limits=1))
    stack.enter_context(numba_one())
    return stack


def fit_clusters(X: np.ndarray, cfg: ClusterConfig) -> FitOutcome:
    """Fit UMAP (optional) and HDBSCAN on the rows of ``X`` (``(n, d)`` float32, already in the
    canonical order). Never raises for small or degenerate inputs (see the module docstring).
    Runs single-threaded (BLAS, OpenMP, numba), so its output depends on ``X`` and ``cfg`` only."""
    with _single_threaded():
        return _fit_clusters(X, cfg)


def _fit_clusters(X: np.ndarray, cfg: ClusterConfig) -> FitOutcome:
    X = np.ascontiguousarray(X, dtype=np.float32)
    n = X.shape[0]
    umap_info = dict(cfg.umap_params(), fitted=False, n_neighbors_used=None, distinct_points=None)
    notes: list = []
    if n == 0:
        return FitOutcome("empty", np.empty(0, np.int64), None, None, "none", umap_info, notes)
    if n < cfg.min_points:
        notes.append(f"{n} points < {cfg.min_points} = max(min_cluster_size, {MIN_POINTS}): not clustered, all labelled -1 (noise)")
        return FitOutcome("too_few", np.full(n, -1, np.int64), None, None, "none", umap_info, notes)

    latent = None
    model = None
    if cfg.need_latent:
        _, first, inverse = np.unique(X, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        # distinct rows in order of first occurrence (the canonical point order), not byte order
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        U = X[first[order]]
        inv = rank[inverse]
        m = U.shape[0]
        umap_info["distinct_points"] = int(m)
        min_umap = max(MIN_POINTS, cfg.umap_n_components + 2)
        if m < min_umap:
            notes.append(f"UMAP skipped: {m} distinct embeddings < {min_umap}; HDBSCAN clustered the raw embeddings")
        else:
            nn = min(cfg.umap_n_neighbors, m - 1)
            umap_info["n_neighbors_used"] = int(nn)
            if nn < cfg.umap_n_neighbors:
                notes.append(f"UMAP n_neighbors lowered from {cfg.umap_n_neighbors} to {nn} ({m} distinct embeddings)")
            umap = _import_umap(cfg.numba_cache)
            try:
                with _Quiet():
                    model = umap.UMAP(
                        n_components=cfg.umap_n_components,
                        n_neighbors=nn,
                        min_dist=cfg.umap_min_dist,
                        random_state=cfg.umap_random_state,
                        metric=cfg.umap_metric,
                        n_jobs=1,
                        verbose=False,
                    )
                    emb = np.asarray(model.fit_transform(U), dtype=np.float32)
                if not np.isfinite(emb).all():
                    bad = int((~np.isfinite(emb).all(axis=1)).sum())
                    notes.append(f"UMAP gave non-finite coordinates for {bad} points; HDBSCAN clustered the raw embeddings")
                    model = None
                else:
                    latent = emb[inv]
                    umap_info["fitted"] = True
            except Exception as e:  # degrade visibly rather than lose the whole run
                from fair_forge_beam.plain import plain_reason

                notes.append(f"UMAP failed ({plain_reason(e)[:200]}); HDBSCAN clustered the raw embeddings")
                model = None

    space = "latent" if (cfg.use_latent_space and latent is not None) else "embedding"
    if cfg.use_latent_space and latent is None:
        notes.append("use_latent_space=True but no UMAP coordinates: clustered the raw embeddings")
    data = latent if space == "latent" else X
    from sklearn.cluster import HDBSCAN

    with _Quiet():
        labels = HDBSCAN(
            min_cluster_size=cfg.min_cluster_size,
            cluster_selection_epsilon=float(cfg.cluster_selection_epsilon),
            metric=cfg.metric,
            copy=True,
        ).fit_predict(np.asarray(data, dtype=np.float64))
    return FitOutcome("ok", np.asarray(labels, dtype=np.int64), latent, model, space, umap_info, notes)


class AssignModel:
    """What the assignment of non-sampled points needs: the fitted points in the clustered space
    (``(n_fit, D)``), their labels, the fitted UMAP (or ``None``) and the vote size ``k``.

    :meth:`assign` is deterministic for a given batch (same rows in the same order ⇒ same output)
    and thread-safe (UMAP's search index keeps per-call workspaces, so transforms are serialised).
    """

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, points: np.ndarray, labels: np.ndarray, space: str, metric: str, k: int, umap_model: Any, dim: int, need_latent: bool):
        self.points = np.ascontiguousarray(points, dtype=np.float32)  # (n_fit, 2) latent or (n_fit, d) raw
        self.labels = np.asarray(labels, dtype=np.int64)
        self.space, self.metric, self.dim, self.need_latent = space, metric, int(dim), need_latent
        self.k = int(min(k, self.points.shape[0]))
        self.umap_model = umap_model
        self._nn = None
        self._lock = threading.Lock()

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_nn"] = None
        d.pop("_lock", None)
        return d

    def __setstate__(self, d):
        self.__dict__.update(d)
        self._lock = threading.Lock()

    def _index(self):
        if self._nn is None:
            from sklearn.neighbors import NearestNeighbors

            self._nn = NearestNeighbors(n_neighbors=self.k, metric=self.metric).fit(self.points)
        return self._nn

    def assign(self, X: np.ndarray) -> tuple:
        """Labels ``(b,)`` int64 and latent ``(b, n_components)`` float32 (or ``None``) of the rows
        of ``X`` (``(b, dim)``). Rows whose UMAP coordinates are not finite get label ``-1``."""
        X = np.ascontiguousarray(X, dtype=np.float32)
        b = X.shape[0]
        latent = None
        with self._lock, _single_threaded():
            if self.umap_model is not None and (self.need_latent or self.space == "latent"):
                with _Quiet():
                    latent = np.asarray(self.umap_model.transform(X), dtype=np.float32)
            labels = np.full(b, -1, dtype=np.int64)
            query = latent if self.space == "latent" else X
            ok = np.isfinite(query).all(axis=1)
            if ok.any() and self.k > 0:
                with _Quiet():
                    dists, idx = self._index().kneighbors(np.ascontiguousarray(query[ok], dtype=np.float32))
                dists, idx = _sorted_neighbours(dists, idx)
                labels[ok] = knn_vote(self.labels[idx], dists)
        return labels, latent


# ------------------------------------------------------------------ profile record
def _label_key(label: int) -> str:
    return str(int(label))


def build_profile(n_valid: int, summary: dict, sums: Iterable, cfg: ClusterConfig, n_rejected: int = 0) -> dict:
    """The one profile record.

    Fields: ``status`` ("ok" | "too_few" | "empty"); ``n_points`` (points clustered =
    ``n_fitted + n_assigned``); ``n_fitted`` (points in the fitted sample; in "too_few" the points
    labelled without a fit); ``n_assigned`` (points labelled by the nearest-neighbour vote);
    ``n_rejected`` (dead letters); ``sampled`` (more valid points than ``cap``); ``cap``; ``seed``;
    ``n_clusters`` (labels ≥ 0); ``cluster_profiling`` ``{label: toxic/total}`` (labels as strings
    of ints, ``"-1"`` = noise, sorted by label; 0.0 when a cluster has no words);
    ``cluster_sizes`` ``{label: points}``; ``cluster_word_counts`` ``{label: [toxic, total]}``;
    ``params`` (HDBSCAN and UMAP parameters used); ``clustered_space`` ("latent" | "embedding" |
    "none"); ``method`` (how points were labelled); ``notes``.

    ``sums``: ``(("label", c), (toxic_words, total_words, points, assigned_points))`` integer tuples,
    plus ``(("rejected",), (0, 0, dead letters, 0))``; ``n_rejected`` is added to the latter."""
    per = {}
    n_rejected = int(n_rejected)
    for key, (toxic, total, count, assigned) in sums:
        if key[0] == "rejected":
            n_rejected += int(count)
        else:
            per[int(key[1])] = (int(toxic), int(total), int(count), int(assigned))
    labels = sorted(per)
    n_points = sum(v[2] for v in per.values())
    n_assigned = sum(v[3] for v in per.values())
    k = summary.get("k")
    status = summary["status"]
    sampled = int(n_valid) > cfg.cap
    if status == "empty":
        method = "no points"
    elif status == "too_few":
        method = f"too few points to cluster (fewer than {cfg.min_points}); every point labelled -1 (noise)"
    elif not sampled:
        method = "all points fitted: UMAP + HDBSCAN labels (no assignment needed)"
    else:
        space = "UMAP latent space" if summary["clustered_space"] == "latent" else "embedding space"
        method = (
            f"fitted on a deterministic sample of {cfg.cap} points (smallest BLAKE2b keys of (seed, element_id)); "
            f"other points: UMAP transform into the fitted latent space in canonical batches, then the majority "
            f"HDBSCAN label of their {k} nearest fitted points in the {space} ({cfg.metric}); ties: smaller sum of "
            f"distances, then smaller label; noise (-1) votes like a label"
        )
    return {
        "status": status,
        "n_points": n_points,
        "n_fitted": n_points - n_assigned,
        "n_assigned": n_assigned,
        "n_rejected": int(n_rejected),
        "sampled": sampled,
        "cap": int(cfg.cap),
        "seed": int(cfg.seed),
        "n_clusters": sum(1 for c in labels if c >= 0),
        "cluster_profiling": {_label_key(c): (per[c][0] / per[c][1] if per[c][1] else 0.0) for c in labels},
        "cluster_sizes": {_label_key(c): per[c][2] for c in labels},
        "cluster_word_counts": {_label_key(c): [per[c][0], per[c][1]] for c in labels},
        "params": {
            "hdbscan": cfg.hdbscan_params(),
            "umap": summary["umap"],
            "use_latent_space": bool(cfg.use_latent_space),
            "assign_neighbors": k,
            "assign_batch_size": int(cfg.assign_batch_size),
        },
        "clustered_space": summary["clustered_space"],
        "method": method,
        "notes": list(summary["notes"]),
    }


# ------------------------------------------------------------------ DoFns
