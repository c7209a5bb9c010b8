"""Cluster profiling for Toxicity, the Beam stage (spec §6.1 "Clustering"): UMAP + HDBSCAN over answer embeddings,
then the toxic-word ratio of every cluster.

What it computes
----------------
Every answer is a :class:`ClusterInput` ``(element_id, embedding, toxic_words, total_words)``.
The embeddings are reduced with UMAP (McInnes, Healy & Melville 2018, "UMAP: Uniform Manifold
Approximation and Projection for Dimension Reduction", arXiv:1802.03426) and clustered with
HDBSCAN (Campello, Moulavi & Sander 2013, "Density-Based Clustering Based on Hierarchical Density
Estimates", PAKDD; ``sklearn.cluster.HDBSCAN``, excess-of-mass selection). For every label ``c``
(``-1`` = noise) the profile reports

    score_c = Σ_{i in c} toxic_words_i / Σ_{i in c} total_words_i      (0.0 when the sum of words is 0)

a ratio in ``[0, 1]`` computed from exact integer sums.

Upstream parameter names (spec §6.1 constructor table) map as: ``toxicity_min_cluster_size`` →
``min_cluster_size``, ``toxicity_cluster_selection_epsilon`` → ``cluster_selection_epsilon``,
``toxicity_cluster_use_latent_space`` → ``use_latent_space``, ``umap_*`` unchanged, and
``toxicity_cluster_selection_method`` → ``metric``: upstream passes that value to HDBSCAN as its
*distance metric*, not as its cluster-selection method (spec §17 item 7); HDBSCAN's selection
method stays "eom". The name here says what the value does.

Why a bounded global stage (spec §17 item 30, §18.3)
----------------------------------------------------
UMAP and HDBSCAN need the whole matrix in one process and cannot be combined from partial
results. So the stage is fitted on at most ``cap`` points:

1. every point gets a key ``stable_hash64(seed, "cluster-sample", element_id)`` (BLAKE2b, never
   Python's salted ``hash()``);
2. one mergeable, bounded ``CombineGlobally`` (:class:`SmallestKeysCombineFn`: the count and a
   heap of the ``cap`` smallest 64-bit keys, memory O(cap) integers, like ``Top.Smallest``) gives
   the threshold key; the points whose key is at or below it form the fitted sample (all points
   when n ≤ cap);
3. the sample is read by the single fitting DoFn as a list side input (O(cap) points), sorted by
   ``element_id`` (then by the embedding bytes and word counts, so even duplicate ids have one
   order) and fitted once;
4. the other points are assigned in parallel with the fitted model as a side input (below);
5. ``(toxic_words, total_words)`` are summed per label with a ``CombinePerKey`` of integers.

Assignment of points outside the sample
---------------------------------------
sklearn's HDBSCAN has no ``approximate_predict``. Points outside the sample are assigned by:

* **latent coordinates**: ``UMAP.transform`` of the new points into the fitted embedding (UMAP's own
  out-of-sample method);
* **label**: a majority vote of the HDBSCAN labels of the ``k`` nearest *fitted* points
  (``k = assign_neighbors``, default ``min_cluster_size``, at most the number of fitted points),
  searched exactly with ``sklearn.neighbors.NearestNeighbors`` in the space HDBSCAN clustered
  (the UMAP latent space, or the raw embeddings when ``use_latent_space=False``) under HDBSCAN's
  ``metric``. Noise (``-1``) is a label like any other in the vote, so a point whose neighbours
  are mostly noise stays noise. Ties: the label with the smaller sum of distances among its voters,
  then the smaller label. Neighbours at equal distance are ordered by their position in the sorted
  sample.

UMAP's ``transform`` of one point depends on the other points transformed with it (one shared
random stream, batch-dependent epoch count). To keep results independent of Beam's bundling, the
points to assign are grouped into canonical batches — bucket ``key % n_buckets`` with
``n_buckets = ceil((n − cap) / assign_batch_size)`` from the global count — and each batch is
sorted by ``element_id`` before the transform. The batches depend only on the set of input
points, so the same input gives the same coordinates and labels on every runner and bundle order
(a different ``assign_batch_size`` or ``cap`` gives other batches, hence possibly slightly other
coordinates).

Differences from upstream at n ≤ cap: the rows are fitted in ``element_id`` order, not arrival
order (UMAP and HDBSCAN results depend on row order, so labels can be numbered or split
differently from an upstream run on the same data), and UMAP sees each distinct embedding once.

Small and degenerate inputs (spec §17 item 21)
----------------------------------------------
* no points → one profile with ``status="empty"``;
* fewer than ``max(min_cluster_size, 5)`` points (upstream crashes below 5 answers): nothing is
  fitted, every point is labelled ``-1`` (noise — what HDBSCAN does with fewer points than
  ``min_cluster_size``), ``status="too_few"``;
* UMAP is fitted on the *distinct* embeddings (duplicates share one position; identical rows made
  UMAP invent structure or crash in our checks) with ``n_neighbors`` lowered to
  ``distinct − 1`` when there are not more distinct points than ``umap_n_neighbors``
  (recorded in ``params.umap.n_neighbors_used``). With fewer than ``max(5, n_components + 2)``
  distinct embeddings UMAP is skipped and HDBSCAN clusters the raw embeddings (noted in
  ``notes``); if UMAP fails or returns non-finite coordinates, likewise;
* UMAP is fitted only when its output is used (``use_latent_space=True`` or ``points_path``);
  upstream fits it always.

Outputs of :class:`ClusterProfile` (a dict of PCollections)
-----------------------------------------------------------
* ``"profile"``: exactly one ``dict`` (see :func:`build_profile` for the fields); raw embeddings
  and coordinates never go into it;
* ``"assignments"``: one :class:`ClusterAssignment` per clustered point;
* ``"dead_letter"``: :class:`~fair_forge_beam.io.elements.DeadLetter` for points that cannot be
  clustered (non-finite or non-1-D embedding, impossible word counts, an embedding dimension
  other than the sample's);
* with ``points_path``: one Parquet file (``WriteToParquet``, one shard, exactly that path) with a
  row per point: ``element_id``, ``embedding`` (list<float32>), ``latent`` (list<float32>, null
  when UMAP was not fitted), ``x``, ``y`` (the first two latent coordinates, upstream's
  ``latent_space`` when ``n_components=2``), ``cluster_label``, ``fitted``, ``toxic_words``,
  ``total_words``. Row order in the file is not defined; its set of rows is deterministic.

Costs (see ``benchmarks/bench_clustering.py``): one worker fits UMAP on ≤ cap points
(single-threaded: ``random_state`` forces ``n_jobs=1``), ≈75–110 s for 50,000 × 384 on the
development machine; the assignment costs ≈0.9 ms per point (UMAP transform ≈90 %, kNN vote ≈10 %)
and runs in parallel over batches. umap-learn compiles its numba kernels on first use (≈25–35 s
per process); with ``numba_cache=True`` (default) the compiled kernels of umap and pynndescent
that can be cached are written to numba's on-disk cache (``$NUMBA_CACHE_DIR``, by default the
user cache folder ``~/.cache/fair_forge_beam/numba``, never the installed packages:
:func:`fair_forge_beam.components.clustering.numba_cache_dir`) so later processes load them in well under a second.
pynndescent's per-index closures (used from 4,096 distinct points on) cannot be cached and cost
≈30 s of compilation per fitting process. The fitted model travels to the assigning workers as a
pickled side input (≈190 MB at cap = 50,000 × 384: UMAP keeps its training data and search
index), decoded once per worker process.

Heavy libraries (umap, numba, pynndescent, sklearn) are imported only inside the DoFns and the
fitting functions, never when this module is imported.
"""
from __future__ import annotations

import hashlib
import pickle
import time
import typing
from typing import Optional

import numpy as np

from fair_forge_beam.options import SEED
from fair_forge_beam._beam import beam
from apache_beam.metrics import Metrics
from fair_forge_beam.io.elements import dead_letter
from fair_forge_beam.statistical.combiners import CountAndSmallestCombineFn, SumCombineFn
from fair_forge_beam.components.clustering import (  # the numerical part (no Beam)
    AssignModel,
    ClusterAssignment,
    ClusterConfig,
    ClusterInput,
    STAGE,
    _Labelled,
    _Quiet,
    _import_umap,
    _order_key,
    build_profile,
    fit_clusters,
    sample_key,
)
from fair_forge_beam.quoting import quoted
from fair_forge_beam.arguments import checks_arguments

__all__ = ["ClusterProfile", "SmallestKeysCombineFn", "points_schema"]

PROFILE, ASSIGNMENTS, DEAD = "profile", "assignments", "dead_letter"
_MODEL, _SUMMARY, _LABELLED = "model", "summary", "labelled"


@beam.typehints.with_output_types(typing.Union[beam.pvalue.TaggedOutput, typing.Tuple[typing.Any, ClusterInput]])
class _Validate(beam.DoFn):
    """Checks one :class:`ClusterInput`; emits ``(sample_key, point)`` with a float32 embedding,
    or a dead letter."""

    def __init__(self, seed: int):
        self.seed = seed

    def process(self, p):
        try:
            element_id, emb, toxic, total = p
        except (TypeError, ValueError):
            yield beam.pvalue.TaggedOutput(DEAD, dead_letter(STAGE, "not a ClusterInput (element_id, embedding, toxic_words, total_words)", repr(p)[:1000]))
            return
        if not isinstance(element_id, str) or not element_id:
            yield beam.pvalue.TaggedOutput(DEAD, dead_letter(STAGE, "element_id must be a non-empty string", repr(element_id)[:1000]))
            return
        try:
            e = np.asarray(emb, dtype=np.float32)
        except (TypeError, ValueError):
            e = None
        reason = None
        if e is None or e.ndim != 1 or e.size == 0:
            reason = "embedding must be a non-empty 1-D numeric vector"
        elif not np.isfinite(e).all():
            reason = "embedding has non-finite values"
        elif not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (toxic, total)) or not (0 <= toxic <= total):
            reason = "toxic_words and total_words must be integers with 0 <= toxic_words <= total_words"
        if reason:
            raw = {"element_id": element_id, "toxic_words": repr(toxic), "total_words": repr(total), "embedding_shape": list(np.shape(emb)) if e is not None else None}
            yield beam.pvalue.TaggedOutput(DEAD, dead_letter(STAGE, reason, raw, element_id))
            return
        yield (sample_key(self.seed, element_id), ClusterInput(element_id, np.ascontiguousarray(e), int(toxic), int(total)))


@beam.typehints.with_output_types(typing.Any)
class _Route(beam.DoFn):
    """Sampled points (key ≤ threshold) to the fit; the others keyed by a canonical batch."""

    def __init__(self, batch_size: int, cap: int):
        self.batch_size, self.cap = batch_size, cap

    def process(self, kp, sample):
        n_valid, threshold = sample
        key, p = kp
        if threshold is not None and key <= threshold:
            yield p
        else:
            n_buckets = max(1, -(-max(n_valid - self.cap, 1) // self.batch_size))
            yield beam.pvalue.TaggedOutput("pending", (key % n_buckets, (key, p)))


def _points_dim(points: list) -> tuple:
    """The sample's embedding dimension (most frequent; ties: smallest) and the odd points."""
    dims: dict = {}
    for p in points:
        dims[p.embedding.shape[0]] = dims.get(p.embedding.shape[0], 0) + 1
    if not dims:
        return None, points, []
    dim = min(dims, key=lambda d: (-dims[d], d))
    return dim, [p for p in points if p.embedding.shape[0] == dim], [p for p in points if p.embedding.shape[0] != dim]


@beam.typehints.with_output_types(typing.Union[beam.pvalue.TaggedOutput, _Labelled])
class _Fit(beam.DoFn):
    """Fits the sample (a list side input of ≤ cap points; runs once, in one worker). Outputs: labelled sample points
    (main), the pickled :class:`AssignModel` (``model``), a JSON-able summary (``summary``)."""

    def __init__(self, cfg: ClusterConfig, keep_embeddings: bool):
        self.cfg, self.keep_embeddings = cfg, keep_embeddings

    def setup(self):
        if self.cfg.need_latent:
            _import_umap(self.cfg.numba_cache)

    def process(self, _trigger, points):
        cfg = self.cfg
        t0 = time.perf_counter()
        points = sorted(points, key=_order_key)
        Metrics.distribution(STAGE, "gather_sample_ms").update(int((time.perf_counter() - t0) * 1000))
        dim, points, odd = _points_dim(points)
        for p in odd:
            yield beam.pvalue.TaggedOutput(DEAD, dead_letter(
                STAGE, f"embedding dimension {p.embedding.shape[0]} differs from the sample's {dim}",
                {"element_id": p.element_id, "embedding_shape": list(p.embedding.shape)}, p.element_id))
        X = np.stack([p.embedding for p in points]) if points else np.empty((0, 0), np.float32)
        t0 = time.perf_counter()
        fit = fit_clusters(X, cfg)
        Metrics.distribution(STAGE, "fit_ms").update(int((time.perf_counter() - t0) * 1000))
        Metrics.counter(STAGE, "points_fitted").inc(len(points))
        for i, p in enumerate(points):
            yield _Labelled(
                p.element_id, int(fit.labels[i]), p.toxic_words, p.total_words, True,
                tuple(float(v) for v in fit.latent[i]) if fit.latent is not None else None,
                p.embedding if self.keep_embeddings else None,
            )
        model = None
        if fit.status == "ok":
            space_points = fit.latent if fit.space == "latent" else X
            model = AssignModel(space_points, fit.labels, fit.space, cfg.metric, cfg.k, fit.umap_model, dim, cfg.need_latent)
        blob = pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL)
        token = hashlib.blake2b(blob, digest_size=16).hexdigest()
        yield beam.pvalue.TaggedOutput(_MODEL, (token, blob))
        yield beam.pvalue.TaggedOutput(_SUMMARY, {
            "status": fit.status,
            "clustered_space": fit.space,
            "umap": fit.umap_info,
            "notes": fit.notes,
            "k": int(min(cfg.k, len(points))) if fit.status == "ok" else None,
        })


class _Holder:
    """Weak-referenceable holder for a decoded model (``apache_beam.utils.shared.Shared``)."""

    def __init__(self, model):
        self.model = model


@beam.typehints.with_output_types(typing.Any)
class _Assign(beam.DoFn):
    """Labels one canonical batch of non-sampled points with the fitted model (side input).

    The model is decoded once per process and token (``Shared``), not per bundle. umap is
    imported on the first batch rather than in ``setup`` so that workers which never receive a
    batch (the usual case: n ≤ cap) do not pay the import."""

    def __init__(self, keep_embeddings: bool, numba_cache: bool):
        self.keep_embeddings, self.numba_cache = keep_embeddings, numba_cache
        self._token, self._holder = None, None

    def setup(self):
        from apache_beam.utils.shared import Shared

        self._shared = Shared()

    def _model(self, model_kv) -> Optional[AssignModel]:
        token, blob = model_kv
        if token != self._token:
            def load():
                return _Holder(pickle.loads(blob))

            self._holder = self._shared.acquire(load, tag=token)
            self._token = token
        return self._holder.model

    def process(self, kv, model_kv):
        _, items = kv
        pts = sorted((p for _, p in items), key=_order_key)
        if not pts:
            return
        model = self._model(model_kv)
        if model is not None and model.umap_model is not None:
            _import_umap(self.numba_cache)  # already imported by unpickling; switches the numba cache on
        if model is None:  # cannot happen when the sample is complete; never lose points silently
            for p in pts:
                yield beam.pvalue.TaggedOutput(DEAD, dead_letter(STAGE, "no fitted model to assign the point", {"element_id": p.element_id}, p.element_id))
            return
        good = [p for p in pts if p.embedding.shape[0] == model.dim]
        for p in pts:
            if p.embedding.shape[0] != model.dim:
                yield beam.pvalue.TaggedOutput(DEAD, dead_letter(
                    STAGE, f"embedding dimension {p.embedding.shape[0]} differs from the sample's {model.dim}",
                    {"element_id": p.element_id, "embedding_shape": list(p.embedding.shape)}, p.element_id))
        if not good:
            return
        t0 = time.perf_counter()
        labels, latent = model.assign(np.stack([p.embedding for p in good]))
        Metrics.distribution(STAGE, "assign_batch_ms").update(int((time.perf_counter() - t0) * 1000))
        Metrics.counter(STAGE, "points_assigned").inc(len(good))
        for i, p in enumerate(good):
            lat = None
            if latent is not None and np.isfinite(latent[i]).all():
                lat = tuple(float(v) for v in latent[i])
            yield _Labelled(p.element_id, int(labels[i]), p.toxic_words, p.total_words, False, lat,
                            p.embedding if self.keep_embeddings else None)


#: count + the cap smallest sampling keys (Beam's CountCombineFn and TopCombineFn, statistical/)
SmallestKeysCombineFn = CountAndSmallestCombineFn


def _to_row(x: _Labelled) -> dict:
    lat = list(x.latent) if x.latent is not None else None
    return {
        "element_id": x.element_id,
        "embedding": x.embedding.tolist() if x.embedding is not None else None,
        "latent": lat,
        "x": lat[0] if lat is not None and len(lat) >= 1 else None,
        "y": lat[1] if lat is not None and len(lat) >= 2 else None,
        "cluster_label": int(x.cluster_label),
        "fitted": bool(x.fitted),
        "toxic_words": int(x.toxic_words),
        "total_words": int(x.total_words),
    }


def points_schema():
    """pyarrow schema of the points file (imports pyarrow)."""
    import pyarrow as pa

    return pa.schema([
        ("element_id", pa.string()),
        ("embedding", pa.list_(pa.float32())),
        ("latent", pa.list_(pa.float32())),
        ("x", pa.float32()),
        ("y", pa.float32()),
        ("cluster_label", pa.int64()),
        ("fitted", pa.bool_()),
        ("toxic_words", pa.int64()),
        ("total_words", pa.int64()),
    ])


def _check_metrics(cfg: ClusterConfig) -> None:
    """Fail fast (at pipeline construction) on a metric name HDBSCAN or UMAP does not accept, or
    on a missing clustering dependency (:func:`~fair_forge_beam.components.clustering.require_clustering`)."""
    from fair_forge_beam.components.clustering import require_clustering

    require_clustering()
    from sklearn.cluster import HDBSCAN

    probe = np.array([[0.0, 0.1], [0.2, 0.0], [0.1, 0.3], [1.0, 1.1], [1.2, 1.0], [1.1, 1.3]])
    try:
        with _Quiet():
            HDBSCAN(min_cluster_size=2, metric=cfg.metric, copy=True).fit(probe)
    except Exception as e:  # noqa: BLE001 - sklearn's ValueError, a KeyError of an unknown name ...
        from fair_forge_beam.plain import plain_reason

        raise ValueError(f"metric={quoted(cfg.metric)} (upstream toxicity_cluster_selection_method) is not a distance HDBSCAN "
                         f"accepts: {plain_reason(e)}") from None
    if cfg.need_latent:
        _import_umap(cfg.numba_cache)
        from umap import distances

        if cfg.umap_metric not in distances.named_distances:
            raise ValueError(f"umap_metric={quoted(cfg.umap_metric)} is not a UMAP metric; use one of {sorted(distances.named_distances)}")


class ClusterProfile(beam.PTransform):
    """UMAP + HDBSCAN cluster profiling of answer embeddings as a bounded global Beam stage.

    Input: ``PCollection[ClusterInput]``. Output: ``{"profile", "assignments", "dead_letter"}``
    (plus ``"points_written"`` with ``points_path``); see the module docstring.

    Args:
        min_cluster_size: HDBSCAN ``min_cluster_size`` (≥ 2; upstream
            ``toxicity_min_cluster_size``, default 5). ``min_samples`` stays HDBSCAN's default
            (= ``min_cluster_size``).
        cluster_selection_epsilon: HDBSCAN ``cluster_selection_epsilon`` (≥ 0, distance units of
            the clustered space; default 0.01).
        metric: HDBSCAN's distance metric (default "euclidean"). Upstream calls this
            ``toxicity_cluster_selection_method`` but passes it as ``metric`` (spec §17 item 7).
            Also the metric of the nearest-neighbour vote for non-sampled points.
        use_latent_space: cluster the UMAP coordinates (True) or the raw embeddings (False).
        umap_n_components, umap_n_neighbors, umap_min_dist, umap_random_state, umap_metric:
            UMAP parameters (defaults 2, 15, 0.1, :data:`~fair_forge_beam.options.SEED`, "cosine"); ``n_jobs=1`` (deterministic).
        cap: most points UMAP/HDBSCAN are fitted on (default 50,000; ≥ ``max(min_cluster_size, 5)``).
            Memory of the fitting worker grows with ``cap × d`` (50,000 × 384 float32 ≈ 77 MB,
            several copies inside UMAP).
        seed: seed of the sampling keys (default and ``None``: :data:`~fair_forge_beam.options.SEED`).
        points_path: optional Parquet file path for the per-point rows (one file, exactly this
            path); ``None`` writes nothing.
        assign_neighbors: ``k`` of the vote for non-sampled points (default ``min_cluster_size``).
        assign_batch_size: target points per canonical assignment batch (default 4096).
        numba_cache: enable numba's on-disk cache for umap/pynndescent kernels (default True).

    Raises:
        ValueError: invalid parameters (at construction) or metric names HDBSCAN/UMAP do not
            know (when the transform is applied).
    """

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(
        self,
        min_cluster_size: int = ClusterConfig.min_cluster_size,
        cluster_selection_epsilon: float = ClusterConfig.cluster_selection_epsilon,
        metric: str = ClusterConfig.metric,
        use_latent_space: bool = ClusterConfig.use_latent_space,
        umap_n_components: int = ClusterConfig.umap_n_components,
        umap_n_neighbors: int = ClusterConfig.umap_n_neighbors,
        umap_min_dist: float = ClusterConfig.umap_min_dist,
        umap_random_state: int = ClusterConfig.umap_random_state,
        umap_metric: str = ClusterConfig.umap_metric,
        cap: int = ClusterConfig.cap,
        seed: Optional[int] = ClusterConfig.seed,
        points_path: Optional[str] = None,
        assign_neighbors: Optional[int] = ClusterConfig.assign_neighbors,
        assign_batch_size: int = ClusterConfig.assign_batch_size,
        numba_cache: bool = ClusterConfig.numba_cache,
        label: Optional[str] = None,
    ):
        super().__init__(label)
        self.points_path = points_path
        self.cfg = ClusterConfig(
            min_cluster_size=min_cluster_size,
            cluster_selection_epsilon=cluster_selection_epsilon,
            metric=metric,
            use_latent_space=bool(use_latent_space),
            umap_n_components=umap_n_components,
            umap_n_neighbors=umap_n_neighbors,
            umap_min_dist=umap_min_dist,
            umap_random_state=umap_random_state,
            umap_metric=umap_metric,
            cap=cap,
            seed=SEED if seed is None else seed,
            assign_neighbors=assign_neighbors,
            assign_batch_size=assign_batch_size,
            need_latent=bool(use_latent_space) or points_path is not None,
            numba_cache=bool(numba_cache),
        )
        self.cfg.validate()
        if points_path is not None and (not isinstance(points_path, str) or not points_path):
            raise ValueError(f"points_path must be a file path or None, got {quoted(points_path)}")

    def expand(self, pcoll):
        cfg = self.cfg
        _check_metrics(cfg)
        keep = self.points_path is not None
        checked = pcoll | "Validate" >> beam.ParDo(_Validate(cfg.seed)).with_outputs(DEAD, main="ok")
        valid = checked.ok
        # (n, threshold): one bounded combiner gives the count and the cap smallest keys
        sample = (
            valid
            | "SampleKeys" >> beam.Map(lambda kp: kp[0])
            | "CountAndSmallestKeys" >> beam.CombineGlobally(SmallestKeysCombineFn(cfg.cap))
        )
        routed = valid | "Route" >> beam.ParDo(
            _Route(cfg.assign_batch_size, cfg.cap), sample=beam.pvalue.AsSingleton(sample)
        ).with_outputs("pending", main="sample")
        # the fit runs once (on one trigger element) and reads the ≤ cap sampled
        # points as a side input: gathered in one worker, O(cap) memory
        fitted = pcoll.pipeline | "FitTrigger" >> beam.Create([None]) | "Fit" >> beam.ParDo(_Fit(cfg, keep), points=beam.pvalue.AsList(routed.sample)).with_outputs(
            _MODEL, _SUMMARY, DEAD, main=_LABELLED
        )
        assigned = (
            routed.pending
            | "CanonicalBatches" >> beam.GroupByKey()
            | "Assign" >> beam.ParDo(_Assign(keep, cfg.numba_cache), model_kv=beam.pvalue.AsSingleton(fitted[_MODEL])).with_outputs(DEAD, main=_LABELLED)
        )
        labelled = (fitted[_LABELLED], assigned[_LABELLED]) | "AllLabelled" >> beam.Flatten()
        dead = (checked[DEAD], fitted[DEAD], assigned[DEAD]) | "AllDead" >> beam.Flatten()
        sums = (
            (
                labelled | "PerLabel" >> beam.Map(lambda x: (("label", x.cluster_label), (x.toxic_words, x.total_words, 1, 0 if x.fitted else 1))),
                dead | "PerRejected" >> beam.Map(lambda _: (("rejected",), (0, 0, 1, 0))),
            )
            | "CountParts" >> beam.Flatten()
            | "SumPerLabel" >> beam.CombinePerKey(beam.combiners.TupleCombineFn(*(SumCombineFn() for _ in range(4))))
        )
        profile = sample | "BuildProfile" >> beam.Map(
            lambda nt, summary, sums: build_profile(nt[0], summary, sums, cfg),
            summary=beam.pvalue.AsSingleton(fitted[_SUMMARY]),
            sums=beam.pvalue.AsList(sums),
        )
        assignments = labelled | "Assignments" >> beam.Map(lambda x: ClusterAssignment(x.element_id, x.cluster_label, x.fitted, x.latent))
        out = {PROFILE: profile, ASSIGNMENTS: assignments, DEAD: dead}
        if self.points_path is not None:
            out["points_written"] = (
                labelled
                | "PointRows" >> beam.Map(_to_row)
                | "WritePoints" >> beam.io.WriteToParquet(self.points_path, points_schema(), num_shards=1, shard_name_template="")
            )
        return out
