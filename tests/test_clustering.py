"""Cluster profiling stage (fair_forge_beam.components.cluster_profile, with the numerical part in
fair_forge_beam.components.clustering): UMAP + HDBSCAN as a bounded
global Beam stage, per-cluster toxic-word ratios, sampling above the cap, deterministic
assignment of the other points, tiny and degenerate inputs, the optional points file."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fair_forge_beam._beam import beam
from fair_forge_beam.components.cluster_profile import ClusterProfile, SmallestKeysCombineFn
from fair_forge_beam.components.clustering import MIN_POINTS, ClusterInput, knn_vote, sample_key
from helpers import FNAPI, REPO


# FnApiRunner (in-memory) runs the DoFns in this process: module-level sinks collect the output.
_SINK: dict = {}


def _put(x, tag):
    """Module-level (pickled by reference), so the in-process runner appends to this module's dict."""
    _SINK.setdefault(tag, []).append(x)


def blobs(n_per: int, k: int = 3, d: int = 16, seed: int = 0, prefix: str = "p") -> list:
    """``k`` well-separated Gaussian blobs; blob ``c`` has its own toxic-word rate (varied counts)."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(k, d)) * 10.0
    out = []
    for c in range(k):
        for i in range(n_per):
            e = (centers[c] + rng.normal(size=d)).astype(np.float32)
            total = int(rng.integers(5, 40))
            toxic = int(rng.binomial(total, 0.1 * c))
            out.append(ClusterInput(f"{prefix}{c}-{i:04d}", e, toxic, total))
    return out


def blob_of(element_id: str) -> int:
    return int(element_id.split("-")[0][-1])


def run_scenarios(scenarios: dict, options: list | None = None) -> dict:
    """Run several independent ClusterProfile branches in one pipeline (Beam's per-pipeline cost
    dominates these small cases). ``scenarios``: ``{name: (points, reshuffle, kwargs)}``.
    Returns ``{name: {profile, assignments, dead}}``."""
    from apache_beam.options.pipeline_options import PipelineOptions

    run_id = os.urandom(4).hex()
    with beam.Pipeline(options=PipelineOptions(options or [f"--runner={FNAPI}"])) as p:
        for name, (points, reshuffle, kw) in scenarios.items():
            pc = p | f"Create[{name}]" >> beam.Create(points)
            if reshuffle:
                pc = pc | f"Reshuffle[{name}]" >> beam.Reshuffle()
            out = pc | f"Cluster[{name}]" >> ClusterProfile(**kw)
            for part in ("profile", "assignments", "dead_letter"):
                out[part] | f"Sink[{name}/{part}]" >> beam.Map(_put, f"{run_id}/{name}/{part}")
    return {
        name: {
            "profile": _SINK.get(f"{run_id}/{name}/profile", []),
            "assignments": sorted(_SINK.get(f"{run_id}/{name}/assignments", [])),
            "dead": _SINK.get(f"{run_id}/{name}/dead_letter", []),
        }
        for name in scenarios
    }


def run(points: list, reshuffle: bool = False, **kw) -> dict:
    return run_scenarios({"one": (points, reshuffle, kw)})["one"]


def only_profile(res: dict) -> dict:
    assert len(res["profile"]) == 1, res["profile"]
    return res["profile"][0]


def expected_scores(points: list, label_of: dict) -> dict:
    sums: dict = {}
    for p in points:
        t = sums.setdefault(label_of[p.element_id], [0, 0])
        t[0] += p.toxic_words
        t[1] += p.total_words
    return {str(c): (t / w if w else 0.0) for c, (t, w) in sums.items()}


def assert_blob_purity(points: list, assignments: list) -> dict:
    """Every blob maps to exactly one non-noise cluster and vice versa; returns element -> label."""
    label_of = {a.element_id: a.cluster_label for a in assignments}
    assert set(label_of) == {p.element_id for p in points}
    by_blob: dict = {}
    for eid, lab in label_of.items():
        by_blob.setdefault(blob_of(eid), set()).add(lab)
    assert all(len(v) == 1 for v in by_blob.values()), by_blob
    labels = [next(iter(v)) for v in by_blob.values()]
    assert -1 not in labels and len(set(labels)) == len(labels)
    return label_of


# ------------------------------------------------------------------ one pipeline, many cases
BLOBS = blobs(30)
CAPPED = blobs(67, seed=11)[:200]
SHUFFLED = [CAPPED[i] for i in np.random.default_rng(123).permutation(len(CAPPED))]
TINY = blobs(2, k=2, seed=5)
IDENTICAL = [ClusterInput(f"s{i:02d}", np.ones(8, dtype=np.float32), i % 2, 4) for i in range(20)]
BAD = [
    ClusterInput("nan", np.array([np.nan] * 16, np.float32), 0, 1),
    ClusterInput("counts", np.ones(16, np.float32), 3, 2),
    ClusterInput("matrix", np.ones((2, 8), np.float32), 0, 1),
    ClusterInput("dim", np.ones(5, np.float32), 0, 1),
]
CAP_KW = dict(cap=60, seed=7)


@pytest.fixture(scope="module")
def points_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("points")


@pytest.fixture(scope="module")
def results(points_dir):
    """Every case runs once per module. Beam's cost grows with the size of one pipeline graph, so
    the cases run as a few small pipelines; the small ones share one."""
    out = {}
    out.update(run_scenarios({"blobs": (BLOBS + BAD, False, {})}))
    out.update(run_scenarios({"raw_space": (blobs(25, seed=3), False, dict(use_latent_space=False, cap=40))}))
    out.update(run_scenarios({"tiny0": ([], False, dict(points_path=str(points_dir / "empty.parquet")))}))
    for n in (1, 2, 4):
        out.update(run_scenarios({f"tiny{n}": (TINY[:n], False, {})}))
    out.update(run_scenarios({"identical": (IDENTICAL, False, {})}))
    out.update(run_scenarios({"few": (blobs(4, k=2, seed=2), False, {})}))
    out.update(run_scenarios({"capped": (CAPPED, False, dict(CAP_KW, points_path=str(points_dir / "points.parquet")))}))
    # shuffled input order and reshuffled bundles
    out.update(run_scenarios({"capped_shuffled": (SHUFFLED, True, CAP_KW)}))
    return out


@pytest.mark.slow
def test_three_blobs_give_three_clusters_with_their_toxic_ratios(results):
    res = results["blobs"]
    prof = only_profile(res)
    assert prof["status"] == "ok" and prof["n_points"] == 90
    assert prof["n_fitted"] == 90 and prof["n_assigned"] == 0 and not prof["sampled"]
    assert prof["n_clusters"] == 3
    label_of = assert_blob_purity(BLOBS, res["assignments"])
    assert prof["cluster_profiling"] == expected_scores(BLOBS, label_of)  # exact integer sums
    assert prof["cluster_sizes"] == {"0": 30, "1": 30, "2": 30}
    # blob c has toxic rate ~0.1*c: the cluster of blob 0 has no toxic words at all
    assert prof["cluster_profiling"][str(label_of["p0-0000"])] == 0.0
    assert prof["params"]["umap"]["fitted"] and prof["clustered_space"] == "latent"
    assert prof["params"]["hdbscan"]["metric"] == "euclidean" and prof["params"]["hdbscan"]["cluster_selection_method"] == "eom"
    assert "all points fitted" in prof["method"]
    assert len(json.dumps(prof)) < 3000  # no raw vectors or coordinates in the record
    assert all(a.fitted and a.latent is not None and len(a.latent) == 2 for a in res["assignments"])


@pytest.mark.slow
def test_without_latent_space_clusters_raw_embeddings_and_skips_umap(results):
    prof = only_profile(results["raw_space"])
    assert prof["status"] == "ok" and prof["clustered_space"] == "embedding"
    assert prof["params"]["umap"]["fitted"] is False
    assert prof["n_fitted"] == 40 and prof["n_assigned"] == 35 and prof["n_clusters"] == 3
    assert all(a.latent is None for a in results["raw_space"]["assignments"])


# ------------------------------------------------------------------ tiny / degenerate inputs
@pytest.mark.parametrize("n", [0, 1, 2, 4])
@pytest.mark.slow
def test_tiny_inputs_do_not_crash(results, n):
    res, pts = results[f"tiny{n}"], TINY[:n]
    prof = only_profile(res)
    assert prof["n_points"] == n and prof["n_assigned"] == 0
    if n == 0:
        assert prof["status"] == "empty" and prof["cluster_profiling"] == {} and prof["cluster_sizes"] == {}
    else:
        assert prof["status"] == "too_few" and n < MIN_POINTS
        assert prof["cluster_sizes"] == {"-1": n}
        assert prof["cluster_profiling"] == expected_scores(pts, {p.element_id: -1 for p in pts})
        assert all(a.cluster_label == -1 and a.latent is None for a in res["assignments"])


@pytest.mark.slow
def test_identical_embeddings_and_few_points_do_not_crash(results):
    prof = only_profile(results["identical"])
    assert prof["status"] == "ok" and prof["n_points"] == 20
    assert prof["params"]["umap"]["fitted"] is False and prof["params"]["umap"]["distinct_points"] == 1
    assert any("UMAP skipped" in s for s in prof["notes"])
    assert prof["cluster_profiling"] == {"-1": 10 / 80}  # one stack of identical points: HDBSCAN calls it noise
    # fewer points than n_neighbors: n_neighbors is lowered to distinct - 1, recorded in params
    prof = only_profile(results["few"])
    assert prof["status"] == "ok" and prof["params"]["umap"]["n_neighbors_used"] == 7
    assert any("lowered from 15 to 7" in s for s in prof["notes"])


@pytest.mark.slow
def test_bad_points_go_to_the_dead_letter(results):
    res = results["blobs"]
    prof = only_profile(res)
    assert sorted(d.element_id for d in res["dead"]) == ["counts", "dim", "matrix", "nan"]
    assert all(d.stage == "cluster_profile" and d.reason for d in res["dead"])
    assert prof["n_rejected"] == 4 and prof["n_points"] == 90


# ------------------------------------------------------------------ above the cap
@pytest.mark.slow
def test_above_cap_samples_deterministically_and_assigns_the_rest(results):
    res = results["capped"]
    prof = only_profile(res)
    assert prof["status"] == "ok" and prof["sampled"]
    assert prof["n_points"] == 200 and prof["n_fitted"] == 60 and prof["n_assigned"] == 140
    # the sample is the 60 smallest BLAKE2b keys of (seed, element_id)
    expected_sample = {p.element_id for p in sorted(CAPPED, key=lambda p: sample_key(7, p.element_id))[:60]}
    assert {a.element_id for a in res["assignments"] if a.fitted} == expected_sample
    assert all(a.latent is not None and np.isfinite(a.latent).all() for a in res["assignments"])
    label_of = assert_blob_purity(CAPPED, res["assignments"])
    assert prof["cluster_profiling"] == expected_scores(CAPPED, label_of)
    assert "nearest fitted points" in prof["method"] and prof["params"]["assign_neighbors"] == 5


@pytest.mark.slow
def test_shuffled_input_gives_identical_profile_and_labels(results):
    """Shuffled input order and reshuffled bundles: the same profile and the same labels and UMAP
    coordinates, bit for bit."""
    a, b = results["capped"], results["capped_shuffled"]
    assert json.dumps(only_profile(b), sort_keys=True) == json.dumps(only_profile(a), sort_keys=True)
    assert b["assignments"] == a["assignments"]


@pytest.mark.slow
def test_points_parquet_file_has_one_row_per_point(results, points_dir):
    import pyarrow.parquet as pq

    assert sorted(os.listdir(points_dir)) == ["empty.parquet", "points.parquet"]
    table = pq.read_table(points_dir / "points.parquet")
    assert table.num_rows == 200
    assert table.column_names == ["element_id", "embedding", "latent", "x", "y", "cluster_label", "fitted", "toxic_words", "total_words"]
    rows = {r["element_id"]: r for r in table.to_pylist()}
    assert set(rows) == {p.element_id for p in CAPPED}
    by_id = {a.element_id: a for a in results["capped"]["assignments"]}
    for p in CAPPED:
        r = rows[p.element_id]
        assert np.array_equal(np.asarray(r["embedding"], np.float32), p.embedding)
        assert r["cluster_label"] == by_id[p.element_id].cluster_label and r["fitted"] == by_id[p.element_id].fitted
        assert (r["x"], r["y"]) == tuple(r["latent"]) == tuple(float(np.float32(v)) for v in by_id[p.element_id].latent)
        assert (r["toxic_words"], r["total_words"]) == (p.toxic_words, p.total_words)
    assert sum(r["fitted"] for r in rows.values()) == 60
    # empty input still writes one (empty) file with the schema
    assert only_profile(results["tiny0"])["status"] == "empty"
    assert pq.read_table(points_dir / "empty.parquet").num_rows == 0


# ------------------------------------------------------------------ units and configuration
def test_knn_vote_majority_and_tie_breaks():
    labels = np.array([[1, 1, 2, 2, 2], [1, 1, 2, 2, -1], [2, 1, 1, 2, 0], [3, 3, -1, -1, -1]])
    dists = np.array([[0.1, 0.2, 0.3, 0.4, 0.5], [0.1, 0.2, 0.3, 0.4, 0.5], [0.1, 0.2, 0.2, 0.3, 0.3], [0.1, 0.1, 0.2, 0.2, 0.2]])
    # majority; tie on votes -> smaller distance sum; tie on both -> smaller label; noise can win
    assert knn_vote(labels, dists).tolist() == [2, 1, 1, -1]
    assert knn_vote(np.array([[4, 3]]), np.array([[0.5, 0.5]])).tolist() == [3]
    assert knn_vote(np.empty((0, 3)), np.empty((0, 3))).tolist() == []


def test_smallest_keys_combiner_is_bounded_and_merge_order_free():
    fn = SmallestKeysCombineFn(cap=7)
    keys = [sample_key(1, f"e{i}") for i in range(100)]
    rng = np.random.default_rng(0)
    for _ in range(5):
        parts = np.array_split(rng.permutation(len(keys)), rng.integers(1, 6))  # 64-bit keys stay Python ints
        accs = []
        for part in parts:
            acc = fn.create_accumulator()
            for i in part:
                acc = fn.add_input(acc, keys[i])
            accs.append(acc)
        rng.shuffle(accs)
        assert fn.extract_output(fn.merge_accumulators(accs)) == (100, sorted(keys)[6])
    assert fn.extract_output(fn.create_accumulator()) == (0, None)
    # memory is O(cap), not O(n): the accumulator of 10,000 keys is no larger than that of 100
    # (checked on its pickled size, whatever the accumulator's inner layout)
    import pickle

    def acc_of(n):
        acc = fn.create_accumulator()
        for i in range(n):
            acc = fn.add_input(acc, sample_key(1, f"m{i}"))
        return acc

    assert len(pickle.dumps(acc_of(10_000))) <= len(pickle.dumps(acc_of(100))) + 16
    few = fn.add_input(fn.create_accumulator(), 5)
    assert fn.extract_output(few) == (1, 5)


def test_sample_key_is_stable_and_seeded():
    assert sample_key(42, "s/0") == sample_key(42, "s/0")
    assert sample_key(42, "s/0") != sample_key(43, "s/0")
    # pinned BLAKE2b value: the same in every process (Python's hash() is salted per process)
    assert sample_key(42, "s/0") == 207357664668380974


@pytest.mark.slow
def test_invalid_configuration_fails_fast():
    with pytest.raises(ValueError, match="cap"):
        ClusterProfile(cap=3)
    with pytest.raises(ValueError, match="min_cluster_size"):
        ClusterProfile(min_cluster_size=1)
    with pytest.raises(ValueError, match="umap_min_dist"):
        ClusterProfile(umap_min_dist=float("nan"))
    with pytest.raises(ValueError, match="not a distance HDBSCAN accepts"):
        with beam.Pipeline(runner=FNAPI) as p:
            p | beam.Create([]) | ClusterProfile(metric="no-such-metric")
    with pytest.raises(ValueError, match="not a UMAP metric"):
        with beam.Pipeline(runner=FNAPI) as p:
            p | beam.Create([]) | ClusterProfile(umap_metric="no-such-metric")


@pytest.mark.slow
def test_importing_the_module_stays_light():
    code = textwrap.dedent(
        """
        import sys, json
        import fair_forge_beam.components.cluster_profile, fair_forge_beam.components.clustering
        print(json.dumps(sorted(m for m in ("umap", "numba", "pynndescent", "sklearn", "hdbscan", "pyarrow") if m in sys.modules)))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    heavy = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert not heavy & {"umap", "numba", "pynndescent", "sklearn", "hdbscan"}, heavy


# ------------------------------------------------------------------ runners
@pytest.mark.slow
def test_same_result_in_memory_and_multi_process(results):
    """Two SDK worker processes (as in tests/test_shard_invariance.py) give the same profile."""
    multi = [f"--runner={FNAPI}", "--direct_num_workers=2", "--direct_running_mode=multi_processing"]
    b = _run_multi(CAPPED, multi, **CAP_KW)
    assert json.dumps(b, sort_keys=True) == json.dumps(only_profile(results["capped"]), sort_keys=True)


def _run_multi(points, options, **kw) -> dict:
    """Multi-process run: the profile comes back through a file (workers do not share memory)."""
    import tempfile

    from apache_beam.options.pipeline_options import PipelineOptions

    d = tempfile.mkdtemp()
    with beam.Pipeline(options=PipelineOptions(options)) as p:
        out = p | beam.Create(points) | beam.Reshuffle() | ClusterProfile(**kw)
        (
            out["profile"]
            | beam.Map(lambda r: json.dumps(r, sort_keys=True))
            | beam.io.WriteToText(os.path.join(d, "profile"), num_shards=1, shard_name_template="")
        )
    lines = Path(d, "profile").read_text().splitlines()
    assert len(lines) == 1
    return json.loads(lines[0])


_FIT_SCRIPT = textwrap.dedent(
    """
    import hashlib, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from fair_forge_beam.components.clustering import ClusterConfig, fit_clusters
    rng = np.random.default_rng(3)
    X = np.concatenate([rng.normal(size=(120, 24)) + 6 * rng.normal(size=(1, 24)) for _ in range(4)]).astype(np.float32)
    fit = fit_clusters(X, ClusterConfig())
    h = hashlib.sha256(fit.labels.tobytes() + fit.latent.tobytes()).hexdigest()
    print(fit.status, int(fit.labels.max()) + 1, h)
    """
)


@pytest.mark.slow
def test_fit_does_not_depend_on_the_thread_count_of_the_worker():
    """UMAP + HDBSCAN fitted in processes offering 1 and 2 BLAS/OpenMP/numba threads: the same
    labels and UMAP coordinates, bit for bit (the fit runs single-threaded whatever is offered)."""
    outs = []
    for n in ("1", "2"):
        env = {**os.environ, "OMP_NUM_THREADS": n, "OPENBLAS_NUM_THREADS": n, "MKL_NUM_THREADS": n, "NUMBA_NUM_THREADS": n}
        proc = subprocess.run([sys.executable, "-c", _FIT_SCRIPT, str(REPO)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.append(proc.stdout.strip().splitlines()[-1])
    assert outs[0] == outs[1]
    status, n_clusters, _ = outs[0].split()
    assert status == "ok" and int(n_clusters) == 4


def test_fit_restores_the_callers_thread_settings():
    from threadpoolctl import threadpool_info

    from fair_forge_beam.components.clustering import ClusterConfig, fit_clusters

    fit_clusters(np.ones((3, 4), np.float32), ClusterConfig())  # loads the libraries it limits
    before = [(p["filepath"], p["num_threads"]) for p in threadpool_info()]
    fit = fit_clusters(np.ones((3, 4), np.float32), ClusterConfig())  # too few points: no UMAP
    assert fit.status == "too_few"
    assert [(p["filepath"], p["num_threads"]) for p in threadpool_info()] == before


# ------------------------------------------------------------------ numba's cache (issue 28)
_NUMBA_PROBE = textwrap.dedent(
    """
    import json, os, sys
    import fair_forge_beam.components.clustering as C
    before = os.environ.get("NUMBA_CACHE_DIR")
    import numba.core.config as config
    print(json.dumps({"env": before, "numba": config.CACHE_DIR, "again": C.numba_cache_dir()}))
    """
)


def _env_without_numba_dir(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    env.update(extra, PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
    return env


def test_numba_cache_goes_to_the_user_cache_folder(tmp_path):
    """Without NUMBA_CACHE_DIR numba's cache is the user cache folder (XDG_CACHE_HOME honoured, else
    ~/.cache), set before numba is imported; a NUMBA_CACHE_DIR the user set is kept."""
    cases = {
        "xdg": (_env_without_numba_dir(XDG_CACHE_HOME=str(tmp_path / "xdg")), str(tmp_path / "xdg" / "fair_forge_beam" / "numba")),
        "home": (_env_without_numba_dir(HOME=str(tmp_path / "home")), str(tmp_path / "home" / ".cache" / "fair_forge_beam" / "numba")),
        "user": (_env_without_numba_dir(NUMBA_CACHE_DIR=str(tmp_path / "mine")), str(tmp_path / "mine")),
    }
    for name, (env, want) in cases.items():
        proc = subprocess.run([sys.executable, "-c", _NUMBA_PROBE], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        assert got == {"env": want, "numba": want, "again": want}, (name, got)


_NUMBA_RUN = textwrap.dedent(
    """
    import json, os, sys, sysconfig, time
    import numpy as np
    start = time.time() - 1
    from fair_forge_beam.components.clustering import ClusterConfig, fit_clusters
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(c, 0.05, size=(40, 8)) for c in (0.0, 1.0, 2.0)]).astype(np.float32)
    fit_clusters(X, ClusterConfig(min_cluster_size=5))
    roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], os.path.dirname(os.path.dirname(
        sys.modules["fair_forge_beam"].__file__))}
    written = []
    for root in roots:
        for d, _, files in os.walk(root):
            written += [os.path.join(d, f) for f in files if f.endswith((".nbi", ".nbc"))
                        and os.path.getmtime(os.path.join(d, f)) >= start]
    cache = os.environ["NUMBA_CACHE_DIR"]
    mine = [f for d, _, fs in os.walk(cache) for f in fs if f.endswith((".nbi", ".nbc"))]
    print(json.dumps({"written": written, "mine": len(mine)}))
    """
)


@pytest.mark.slow
def test_a_clustering_run_writes_nothing_into_the_installed_packages(tmp_path):
    """Issue 28: umap/pynndescent's numba kernels were cached into site-packages (a read-only
    install fails; a shared one gets dirty). A fit in a fresh process writes its kernels to the user
    cache folder and no numba cache file under site-packages or the package's own tree."""
    env = _env_without_numba_dir(XDG_CACHE_HOME=str(tmp_path / "xdg"))
    proc = subprocess.run([sys.executable, "-c", _NUMBA_RUN], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["written"] == [], got["written"]
    assert got["mine"] > 0, got
