"""trial39 T8: a baseline caveat names only what can change results. "The runs differ in Beam options"
compares Beam's options that can (options.RESULT_BEAM_OPTIONS), never the runner's address, ports,
environment_config or cache millis (every Flink run had a new --job_endpoint port, so every gate carried
a caveat); package versions are compared only for the packages either run imports
(options.packages_read: a keyword run differed from its baseline in torch, transformers and
sentence-transformers)."""
from __future__ import annotations

from fair_forge_beam import options as O
from fair_forge_beam.reports.compare import run_differences


def _doc(metrics=("humanity", "toxicity")):
    return {"config": {"inputs": ["/a/x.jsonl"], "metrics": list(metrics), "mode": "bayesian", "seed": 42, "mc_samples": 5000,
                       "ci_level": 0.95, "beta_prior_a": 1.0, "beta_prior_b": 1.0},
            "summary": {"interactions_read": 10}, "metrics": {m: {"lexicon": "NRC", "slices": []} for m in metrics}}


FLINK = ["--runner=PortableRunner", "--job_endpoint=localhost:51489", "--environment_type=PROCESS",
         '--environment_config={"command":"/tmp/t39/flink/bin/beam-boot"}', "--parallelism=2",
         "--environment_cache_millis=60000", "--job_server_timeout=86400",
         "--pipeline_resources_detector_factory_class=x.NothingToStage", "--direct_num_workers=2",
         "--direct_running_mode=multi_processing", "--job_port", "8099", "--max_bundle_size=7"]
NO_MINILM = {"torch": None, "transformers": None, "sentence-transformers": None}
MINILM = {"torch": "2.5.1", "transformers": "4.46.0", "sentence-transformers": "3.3.1"}


def _info(beam, versions, **options):
    return {"options": options, "beam_args": beam, "versions": {"numpy": "2.4.6", "nrclex": "4.1.0", **versions}}


def test_runner_plumbing_and_unused_packages_are_no_difference():
    for typed in (True, False):  # run_info's typed options, or an older run's argv
        cur, base = _info(FLINK, NO_MINILM), _info([], MINILM)
        if not typed:
            cur, base = ({"argv": i["beam_args"], "versions": i["versions"]} for i in (cur, base))
        assert run_differences(_doc(), _doc(), cur, base) == [], typed


def test_what_can_change_results_still_differs():
    cur = _info(FLINK + ["--streaming"], MINILM, group_extractor="embedding")
    base = _info([], {**NO_MINILM, "numpy": "2.4.5"})
    msgs = [d["message"] for d in run_differences(_doc(), _doc(), cur, base)]
    assert msgs == ["--group-extractor: current embedding, baseline keyword",
                    "Beam options: current [--streaming], baseline []",
                    "version of numpy: current 2.4.6, baseline 2.4.5",
                    "version of sentence-transformers: current 3.3.1, baseline not set",
                    "version of torch: current 2.5.1, baseline not set",
                    "version of transformers: current 4.46.0, baseline not set"], msgs
    # nrclex is humanity's: a toxicity-only pair of runs never names it
    cur, base = _info([], {"nrclex": "4.2.0"}), _info([], {})
    assert [d["message"] for d in run_differences(_doc(("toxicity",)), _doc(("toxicity",)), cur, base)] == []
    assert [d["what"] for d in run_differences(_doc(), _doc(), cur, base)] == ["version of nrclex"]


def test_the_lists_are_declared_once():
    assert set(O.recorded_packages()) >= {"fair_forge_beam", "apache-beam", "numpy", "nrclex", "torch", "transformers",
                                          "sentence-transformers"}
    beam = {a.dest for a in O._beam_parser()._actions}
    assert O.RESULT_BEAM_OPTIONS <= beam  # each names a Beam option
    for plumbing in ("job_endpoint", "environment_config", "environment_cache_millis", "job_port", "parallelism",
                     "direct_num_workers", "runner", "job_server_timeout", "artifact_port", "flink_master"):
        assert plumbing not in O.RESULT_BEAM_OPTIONS
    assert O.result_beam_options(FLINK) == []
    assert O.result_beam_options(["--streaming", "--requirements_file", "r.txt"]) == ["--requirements_file=r.txt", "--streaming"]
    # a MiniLM option's value decides: keyword groups import no torch
    assert "torch" not in O.packages_read(["toxicity"], "bayesian", {"group_extractor": "keyword"})
    assert "torch" in O.packages_read(["toxicity"], "bayesian", {"group_extractor": "embedding"})
    assert "torch" in O.packages_read(["regulatory"], "bayesian", {})  # its default embedder is MiniLM
    assert "torch" not in O.packages_read(["humanity"], "bayesian", {"regulatory_embedder": "minilm"})  # not read


def _versioned(statistics_schema, results_schema=3):
    doc = _doc()
    doc["config"]["versions"] = {"fair_forge_beam": "0.1.0", "statistics_schema": statistics_schema,
                                 "results_schema": results_schema}
    return doc


def test_a_baseline_written_by_another_statistics_schema_differs_with_or_without_run_info():
    """trial48 B4: a baseline whose results.json says statistics schema 9 (this version writes 10) passed a
    regression gate without a caveat whenever both runs had run_info.json, whose versions are the packages'."""
    info = _info([], {})
    for infos in ((info, info), (None, None), (info, None)):
        diffs = run_differences(_versioned(10), _versioned(9), *infos)
        assert [(d["what"], d["current"], d["baseline"]) for d in diffs] == [("version of statistics_schema", 10, 9)], infos
        diffs = run_differences(_versioned(10, 4), _versioned(10, 3), *infos)
        assert [d["what"] for d in diffs] == ["version of results_schema"], infos
        assert run_differences(_versioned(10), _versioned(10), *infos) == [], infos
