"""Test helpers: plain functions and constants that test modules import (``from helpers import …``;
tests/ is on ``sys.path`` as it is for ``conftest``). Fixtures live in tests/conftest.py."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# ../shared (next to the checkout) holds the real public datasets and the regression cases.
SHARED = Path(os.environ.get("FAIR_FORGE_SHARED", REPO.parent / "shared"))

FNAPI = "apache_beam.runners.portability.fn_api_runner.FnApiRunner"
#: the keyword audit of the shipped example data, Bayesian, in memory: the runner suite's in-memory
#: reference; tests/test_pipeline_outputs.py, test_toxicity_runners.py and test_report.py share its one
#: run through ``audit_once`` (same argv, so the same run)
KEYWORD_AUDIT = ("--quiet", "--mode", "bayesian", "--seed", "7", "--mc-samples", "1000", "--metrics", "humanity,toxicity",
                 "--group-extractor", "keyword", "--toxicity-scorer", "hurtlex", f"--runner={FNAPI}")


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (:func:`fair_forge_beam.procfs.alive`)."""
    from fair_forge_beam import procfs

    return procfs.alive(pid)


# ------------------------------------------------------------------ pipelines
def fnapi_pipeline(*argv: str, **kw):
    """A blocking ``TestPipeline`` on FnApiRunner in memory whose options (``argv``) are a
    :class:`~fair_forge_beam.beam_pipeline.ViewsOnceOptions`, as every run of the package's
    commands has (:func:`~fair_forge_beam.beam_pipeline.pipeline_options`): Beam's ``view_as``
    otherwise builds an argparse parser per call, about 1,000 per small pipeline (a pipeline of
    ``ReadInteractions`` and three writes: 0.53 -> 0.36 CPU s). ``kw`` goes to ``TestPipeline``."""
    from apache_beam.testing.test_pipeline import TestPipeline

    from fair_forge_beam.beam_pipeline import ViewsOnceOptions

    kw.setdefault("blocking", True)
    return TestPipeline(runner=FNAPI, options=ViewsOnceOptions(list(argv)), **kw)


# ------------------------------------------------------------------ interactions
def ix(session_id: str, assistant_id: str, turn: int, answer: str, *, language: str = "english", context: str = "",
       query=None, gt=None, observation=None, weight=None, agentic=None, gta=None, logprobs=None, qa_id=None,
       qa_id_format: str = "{session_id}-q{turn}", query_format: str = ""):
    """An :class:`~fair_forge_beam.io.elements.Interaction` of session ``session_id`` (element id
    from :func:`~fair_forge_beam.io.elements.make_element_id`): turn ``turn`` of ``assistant_id``
    answering ``answer`` (ground truth ``gt``, ground-truth agentic ``gta``).

    ``qa_id`` and ``query``, when not given, are ``qa_id_format`` and ``query_format`` filled with
    ``session_id``, ``assistant_id`` and ``turn`` (a given ``qa_id`` or ``query`` is used as it is).
    A test module with defaults of its own binds them once: ``ix = partial(helpers.ix, context=…)``.
    """
    from fair_forge_beam.io.elements import Interaction, make_element_id

    ids = {"session_id": session_id, "assistant_id": assistant_id, "turn": turn}
    return Interaction(
        element_id=make_element_id(session_id, assistant_id, turn),
        session_id=session_id,
        assistant_id=assistant_id,
        language=language,
        context=context,
        turn_index=turn,
        qa_id=qa_id if qa_id is not None else qa_id_format.format(**ids),
        query=query if query is not None else query_format.format(**ids),
        assistant=answer,
        ground_truth_assistant=gt,
        observation=observation,
        weight=weight,
        agentic=agentic,
        ground_truth_agentic=gta,
        logprobs=logprobs,
    )


# ------------------------------------------------------------------ judged-metric test helpers
def handler_for(srv, tmp_path, **kw):
    """An ``OpenAIJudgeHandler`` for the scripted server ``srv``: own cache file, no retries, no key."""
    from fair_forge_beam.components.judge import OpenAIJudgeHandler

    kw.setdefault("cache_path", str(tmp_path / "cache.sqlite3"))
    kw.setdefault("num_retries", 0)
    kw.setdefault("client_retries", 0)
    kw.setdefault("api_key_env", "FFB_TEST_UNSET_KEY")
    return OpenAIJudgeHandler("judge-model", srv.base_url, **kw)


def judged_through(srv, tmp_path, requests, **kw):
    """Judge ``requests`` with a real handler (:func:`handler_for`, no re-ask of an invalid answer)
    on the scripted server ``srv``: the handler's results, in order."""
    handler = handler_for(srv, tmp_path, invalid_answer_retries=0, **kw)
    client = handler.create_client()
    try:
        return handler.request(requests, client)
    finally:
        client.close()


METRIC_OUTPUTS = ("interactions", "sessions", "slices", "dead_letter", "quality")


def run_judge(handler, requests, out_dir):
    """Run ``RunJudge`` with ``handler`` over ``requests`` on FnApiRunner; returns (results, dead
    letters, counters)."""
    from fair_forge_beam._beam import beam  # noqa: F401  (Beam as the package sets it up)
    from fair_forge_beam.components.judge import RunJudge, judge_counters
    from fair_forge_beam.io.write import read_jsonl_shards, write_jsonl

    p = fnapi_pipeline()
    out = p | beam.Create(requests) | RunJudge(handler)
    write_jsonl(out.results, str(out_dir / "results"), "Results")
    write_jsonl(out.dead_letters, str(out_dir / "dead"), "Dead")
    result = p.run()
    result.wait_until_finish()
    return read_jsonl_shards(str(out_dir / "results")), read_jsonl_shards(str(out_dir / "dead")), judge_counters(result)


def run_metric(metric, interactions, out):
    """Run ``metric`` over ``interactions`` on FnApiRunner; its outputs as lists of dicts."""
    from fair_forge_beam._beam import beam
    from fair_forge_beam.io.write import read_jsonl_shards, write_jsonl

    p = fnapi_pipeline()
    res = p | beam.Create(interactions) | metric
    for name in METRIC_OUTPUTS:
        write_jsonl(res[name], str(out / name), f"W{name}")
    p.run().wait_until_finish()
    return {name: read_jsonl_shards(str(out / name)) for name in METRIC_OUTPUTS}


# ------------------------------------------------------------------ headless Chromium (HTML reports)
#: Debian's chromium, driven by playwright-core (no browser download); .ci/run installs it
CHROMIUM = "/usr/bin/chromium"


def chromium_or_skip():
    """playwright's sync API, or a skip (a failure in CI) when Debian's chromium is missing."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{CHROMIUM} missing in CI (.ci/run installs Debian's chromium package)")
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)")
    return pytest.importorskip("playwright.sync_api")


def open_page(browser, path: Path, shot: Path):
    """Open the local file ``path`` in a new page, record console errors, page errors and every
    request, save a full-page screenshot to ``shot``; returns ``(page, errors, requests, url)``."""
    page = browser.new_page()
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    url = path.resolve().as_uri()
    page.goto(url, wait_until="load")
    page.screenshot(path=str(shot), full_page=True)
    return page, errors, requests, url


def append_line_sink(path):
    """Test sink for in-process runners: a ``DoFn`` appending one JSON line per record
    (:func:`~fair_forge_beam.io.write.to_json_line`) to the local file ``path``."""
    from fair_forge_beam._beam import beam

    class AppendLine(beam.DoFn):
        def __init__(self, target):
            self.path = str(target)

        def process(self, rec):
            from fair_forge_beam.io.write import to_json_line

            with open(self.path, "a", encoding="utf-8") as f:
                f.write(to_json_line(rec) + "\n")

    return AppendLine(path)


# ------------------------------------------------------------------ memory of a child process
_PEAK_RSS_RUNNER = """
import atexit, runpy, sys
out, module = sys.argv[1], sys.argv[2]
def _peak():
    with open("/proc/self/status") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    with open(out, "w") as f:
        f.write(str(kb))
atexit.register(_peak)
sys.argv = [module, *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def run_module_peak_rss(module: str, args, tmp_path: Path, **popen) -> tuple:
    """Run ``python -m module args`` (``sys.executable``) and return ``(completed process, peak
    resident set in MB)`` of that process alone: its own ``VmHWM`` (/proc/self/status, read at
    exit), which starts afresh at exec. ``ru_maxrss`` (getrusage, wait4) does not: a child forked
    from a large test worker keeps the worker's size as its peak (a 270 MB audit read 1,085 MB)."""
    import subprocess
    import sys

    out = tmp_path / f"peak-rss-{os.getpid()}.txt"
    proc = subprocess.run([sys.executable, "-c", _PEAK_RSS_RUNNER, str(out), module, *map(str, args)],
                          capture_output=True, text=True, **popen)
    peak = int(out.read_text()) / 1024 if out.exists() else float("nan")
    return proc, peak


def reseal(run: Path, doc: dict) -> None:
    """``doc`` (to be written as ``run``'s stats/manifest.json by the caller) made consistent by hand:
    ``run``'s stats/settings.json edited to match it and that file's hash listed again in ``doc``
    (a manifest edited and resealed by hand)."""
    import hashlib
    import json

    from fair_forge_beam.io.session_stats import manifest_settings

    settings = json.dumps(manifest_settings(doc), indent=2, ensure_ascii=False, sort_keys=True).encode("utf-8")
    (run / "stats" / "settings.json").write_bytes(settings)
    doc["files"]["stats/settings.json"] = {"size": len(settings), "sha256": hashlib.sha256(settings).hexdigest()}


def written_before_run_ids(run: Path) -> None:
    """Make ``run`` (an audit of this version) look like one written before its ids were sealed:
    no stats/run_ids.json, no ``sealed_files``, run_info.json not listed, resealed."""
    import json

    (run / "stats" / "run_ids.json").unlink()
    path = run / "stats" / "manifest.json"
    m = json.loads(path.read_text(encoding="utf-8"))
    del m["sealed_files"], m["files"]["run_info.json"], m["files"]["stats/run_ids.json"]
    reseal(run, m)
    path.write_text(json.dumps(m, indent=2, ensure_ascii=False), encoding="utf-8")


def rollup_of_both_is_refused(tmp_path, capsys, common, log, other, says="the same content"):
    """Audit ``log`` into ``tmp_path/A`` and ``other`` into ``tmp_path/B`` (options ``common``); their
    roll-up is one usage line (exit 2) naming both runs and files and saying ``says``, nothing written."""
    import pytest

    from fair_forge_beam import rollup
    from pipelines import audit

    audit.run([*common, "--input", str(log), "--output", str(tmp_path / "A")])
    audit.run([*common, "--input", str(other), "--output", str(tmp_path / "B")])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        rollup.run(["--from", str(tmp_path / "A"), "--from", str(tmp_path / "B"), "--output", str(tmp_path / "R"),
                    "--quiet", "--no-report"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1, err
    assert f"the runs overlap: {tmp_path / 'A'} read {log} and {tmp_path / 'B'} read {other}, {says}" in err[0], err
    assert not (tmp_path / "R").exists()


def for_its_mode(argv):
    """``argv`` without the options of a mode it does not run (``--seed``, ``--mc-samples``: a run
    without ``--mode bayesian`` refuses them, trial34 T4): a test's shared flags given to both modes."""
    from fair_forge_beam.options import OPTIONS

    argv = [str(a) for a in argv]
    mode = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--mode"), "frequentist")
    drop = {o.flag for o in OPTIONS.values() if o.read_in_modes and mode not in o.read_in_modes}
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in drop:
            skip = True
        elif a.split("=", 1)[0] not in drop:
            out.append(a)
    return out


def uncounted_dead_letters(run: Path) -> tuple:
    """``(dead letters written, dead letters results.json's summary counts)`` of the audit in ``run``:
    every dead letter written to ``dead_letter/`` is counted once — ``rejected_at_read``,
    ``assistant_failed``, each metric's ``dead_letters`` and ``stage_dead_letters``, and
    ``other_dead_letters`` (trial40 J2/J3: the JQ stage's and the runner's were written, not counted)."""
    import json

    written = sum(1 for p in sorted((run / "dead_letter").glob("*")) if p.is_file()
                  for line in p.read_text(encoding="utf-8").splitlines() if line.strip())
    s = json.loads((run / "results.json").read_text(encoding="utf-8"))["summary"]
    counted = s.get("rejected_at_read", 0) + s.get("assistant_failed", 0)
    counted += sum(o["dead_letters"] for o in (s.get("other_dead_letters") or {}).values())
    for m in s["metrics"].values():
        counted += m["dead_letters"] + sum(p["dead_letters"] for p in (m.get("stage_dead_letters") or {}).values())
    return written, counted


def write_days(root: Path, pieces: list) -> list:
    """One JSON Lines file per day (``pieces``: each day's records), ``day<i>.jsonl`` under ``root``,
    named so that they sort in day order; returns their paths."""
    import json

    files = []
    for d, recs in enumerate(pieces):
        path = root / f"day{d}.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), encoding="utf-8")
        files.append(path)
    return files
