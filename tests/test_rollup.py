"""Issue 27, item 1: stored statistics and ``fair-forge-beam rollup``.

The property (the issue's target "roll-up equals union"): for any split of a dataset into 1–7
"days" — whole sessions, and sessions whose conversation is cut into pieces that land on
different days — ``rollup(day audits)`` writes the same ``results.json`` as one audit over all the
days' files, byte for byte, in both statistical modes. The data are real: the first sessions of
the shipped hh-rlhf slice and the original Fair Forge examples (several assistants, a Spanish
session that is dead-lettered, sessions of one turn).

Also: the stored statistics are typed columns (no JSON text) under a versioned schema; a roll-up
rolls up again; a schema-version mismatch, runs of different settings and folders without stored
statistics are one-line usage errors; what cannot be rebuilt is named.
"""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import for_its_mode, reseal, write_days, written_before_run_ids
from pipelines import audit

pytestmark = pytest.mark.slow

EXAMPLES = Path(audit.default_inputs()[1])  # hh-rlhf slice (JSON Lines, one session per line)
FAIR_FORGE = Path(audit.default_inputs()[0])  # the original's examples (JSON list: several assistants, Spanish)
COMMON = ["--quiet", "--no-report", "--metrics", "humanity,toxicity", "--group-extractor", "keyword",
          "--mc-samples", "200", "--seed", "11"]


def _sessions() -> list[dict]:
    hh = [json.loads(line) for line in EXAMPLES.read_text(encoding="utf-8").splitlines()[:10]]
    ff = json.loads(FAIR_FORGE.read_text(encoding="utf-8"))
    spanish = [s for s in ff if s["assistant_id"] == "support-bot"][:1]  # 2 turns, dead-lettered (no lexicon)
    one_turn = [s for s in ff if len(s["conversation"]) == 1][:1]
    assert spanish and one_turn
    return hh + ff[:6] + spanish + one_turn


SESSIONS = _sessions()


def _audit(out: Path, inputs: list, mode: str, *extra) -> bytes:
    audit.run(for_its_mode([*COMMON, "--mode", mode, *[a for i in inputs for a in ("--input", str(i))],
                            "--output", str(out), *extra]))
    return (out / "results.json").read_bytes()


def _rollup(out: Path, runs: list, *extra) -> bytes:
    from fair_forge_beam import rollup

    rollup.run([*[a for r in runs for a in ("--from", str(r))], "--output", str(out), "--quiet", "--no-report", *extra])
    return (out / "results.json").read_bytes()


def _write_days(root: Path, pieces: list[list[dict]]) -> list[Path]:
    """One JSON Lines file per day (session records), named so that they sort in day order."""
    return write_days(root, pieces)


@st.composite
def _split(draw):
    """A split of SESSIONS into 1–7 days: each session is cut into 1–3 consecutive pieces of its
    conversation, each piece lands on a day (pieces of one session on non-decreasing days)."""
    n_days = draw(st.integers(1, 7))
    pieces = [[] for _ in range(n_days)]
    for s in SESSIONS:
        conv = s["conversation"]
        n_cuts = draw(st.integers(0, min(2, len(conv) - 1)))
        cuts = sorted(draw(st.lists(st.integers(1, len(conv) - 1), min_size=n_cuts, max_size=n_cuts, unique=True))) \
            if n_cuts else []
        day = draw(st.integers(0, n_days - 1))
        prev = 0
        for c in [*cuts, len(conv)]:
            pieces[day].append({**s, "conversation": conv[prev:c]})
            prev = c
            day = draw(st.integers(day, n_days - 1))
    return pieces


def _check_split(root: Path, pieces: list, mode: str) -> None:
    files = _write_days(root, pieces)
    runs = []
    for d, f in enumerate(files):
        # a day without records is an empty run (exit code 4): a nightly job whose days may be empty
        # publishes it with --allow-empty, and the roll-up merges it like any other day
        _audit(root / f"audit{d}", [f], mode, *(() if pieces[d] else ("--allow-empty",)))
        runs.append(root / f"audit{d}")
    # one day: the audit of all days' files is that day's audit (the same argv), run once
    union = runs[0] if len(files) == 1 and pieces[0] else root / "union"
    if union != runs[0]:
        _audit(union, files, mode)
    assert _rollup(root / "rollup", runs) == (union / "results.json").read_bytes()
    assert_same_records(root / "rollup", union)


def _days_rolled_up(root: Path, pieces: list[list[dict]], mode: str) -> bytes:
    """Each day's audit of ``pieces`` (:func:`_write_days`), one audit of every day's file
    (``root/union``) and the roll-up of the days (``root/roll``), whose ``results.json`` is checked
    to be the union's, byte for byte; returns it."""
    files = _write_days(root, pieces)
    for d, f in enumerate(files):
        _audit(root / f"a{d}", [f], mode)
    union_bytes = _audit(root / "union", files, mode)
    assert _rollup(root / "roll", [root / f"a{d}" for d in range(len(files))]) == union_bytes
    return union_bytes


def _records(folder: Path) -> list:
    """Every record of an output folder's Parquet (``*.parquet`` files anywhere under it) or
    JSON Lines (``part-*.jsonl``) shards, in a canonical order (shard names and row order are the
    runner's business, the records are not)."""
    rows = [json.dumps(r, sort_keys=True, default=str) for f in sorted(folder.rglob("part-*")) if f.is_file()
            for r in (pq.read_table(f).to_pylist() if f.suffix == ".parquet"
                      else [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines()])]
    return sorted(rows)


def assert_same_records(rolled: Path, union: Path) -> None:
    """The roll-up's per-record and per-session outputs hold the same records as the union audit's:
    the same element ids and turn numbers for a conversation cut across days (the roll-up numbers
    each run's turns as one audit of every run's inputs numbers them), the same dead letters."""
    for name in ("results.parquet", "dead_letter", "sessions", "slices"):
        if (union / name).exists() or (rolled / name).exists():
            assert _records(rolled / name) == _records(union / name), name


# Each audit costs a few CPU seconds of Beam's fixed cost whatever the data, and an example runs up
# to 7 + 2 of them: two examples in Bayesian mode, one in frequentist mode (derandomized: the same
# examples every run), besides the fixed splits of the tests below.
_SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                         HealthCheck.too_slow])


@settings(max_examples=2, **_SETTINGS)
@given(pieces=_split())
def test_rollup_equals_one_audit_of_all_days_bayesian(tmp_path_factory, pieces):
    _check_split(tmp_path_factory.mktemp("days"), pieces, "bayesian")


@settings(max_examples=1, **_SETTINGS)
@given(pieces=_split())
def test_rollup_equals_one_audit_of_all_days_frequentist(tmp_path_factory, pieces):
    _check_split(tmp_path_factory.mktemp("days"), pieces, "frequentist")


def test_split_sessions_are_one_session_and_warned_once(tmp_path):
    """A conversation cut over two days is one session of the roll-up (its turns numbered as one
    audit of both files numbers them) and its ``session_split`` warning comes back, as in the union."""
    s = SESSIONS[0]
    conv = s["conversation"]
    files = _write_days(tmp_path, [[{**s, "conversation": conv[:1]}], [{**s, "conversation": conv[1:]}]])
    runs = []
    for d, f in enumerate(files):
        _audit(tmp_path / f"a{d}", [f], "bayesian")
        runs.append(tmp_path / f"a{d}")
    union_bytes = _audit(tmp_path / "union", files, "bayesian")
    union = json.loads(union_bytes)
    rolled = json.loads(_rollup(tmp_path / "roll", runs))
    assert rolled == union
    assert_same_records(tmp_path / "roll", tmp_path / "union")
    # the roll-up records its runs' settings: a comparison (or a trend) finds none of its own --from
    from fair_forge_beam.reports.compare import run_differences

    def info(run):
        return json.loads((tmp_path / run / "run_info.json").read_text())

    assert run_differences(rolled, union, info("roll"), info("union")) == []
    # a roll-up stored its own statistics: rolled up again (days -> weeks -> months), still the union
    assert _rollup(tmp_path / "again", [tmp_path / "roll"]) == union_bytes
    assert rolled["summary"]["data_quality_by_kind"] == {"session_split": 1}
    sessions = pq.read_table(tmp_path / "roll" / "sessions" / "humanity").to_pylist()
    assert len(sessions) == 1 and sessions[0]["n_interactions"] == len(conv)
    day = [json.loads((tmp_path / f"a{d}" / "results.json").read_text())["summary"]["data_quality_by_kind"] for d in (0, 1)]
    assert day == [{}, {}]  # neither day alone sees the split

    # gates of a nightly job on the roll-up: per-slice coverage (its denominators, the interactions
    # read per assistant, come from the runs' stored counts) and a regression against a baseline
    # run; the same checks, values and exit code as one gated audit of both files. The baseline is an
    # earlier night that holds none of their data (one of the merged nights is refused as a baseline:
    # its regression gate fails, trial34 T3, tests/test_baseline_comparable.py)
    (tmp_path / "earlier").mkdir()
    _audit(tmp_path / "baseline", _write_days(tmp_path / "earlier", [[{**s, "session_id": f"{s['session_id']}-earlier"}]]),
           "bayesian")
    gates = ["--gate", "coverage dead_letter_share <= 0.05 in every assistant_id",
             "--gate", "regression humanity not worse", "--gate", "coverage assistants_of_baseline",
             "--baseline", str(tmp_path / "baseline")]
    _audit(tmp_path / "gated_union", files, "bayesian", *gates)
    _rollup(tmp_path / "gated_roll", runs, *gates)
    for name in ("results.json", "gates.json"):
        assert (tmp_path / "gated_roll" / name).read_bytes() == (tmp_path / "gated_union" / name).read_bytes(), name
    checks = json.loads((tmp_path / "gated_roll" / "gates.json").read_text())
    assert checks["n_failed"] == 0 and checks["n_gates"] == 3


def test_keys_repeated_across_days_are_one_warning_per_session_as_in_the_union(tmp_path):
    """Issue 28: a session whose 12 qa_ids each come back on the next day gives ONE
    ``duplicate_qa_id`` warning (naming the first 3 and how many), in the union audit and in the
    roll-up alike: the same ``results.json`` and the same warnings (before: one per repeated qa_id).
    The second day's answers differ (a file of the same bytes as the first day's is the same data
    delivered again, which a roll-up refuses: test_rollup_same_content)."""
    s = SESSIONS[0]
    conv = [{**t, "qa_id": f"q{i:02d}"} for i, t in enumerate((s["conversation"] * 12)[:12])]
    again = [{**t, "assistant": t["assistant"] + " (asked again)"} for t in conv]
    union_bytes = _days_rolled_up(tmp_path, [[{**s, "conversation": conv}], [{**s, "conversation": again}]], "frequentist")
    assert json.loads(union_bytes)["summary"]["data_quality_by_kind"] == {"duplicate_qa_id": 1, "session_split": 1}
    from fair_forge_beam.reports.load import iter_quality_warnings

    def dup(run):
        return [q for q in iter_quality_warnings(str(tmp_path / run)) if q["kind"] == "duplicate_qa_id"]

    assert dup("roll") == dup("union")
    (w,) = dup("union")
    assert "12 qa_ids given more than once" in w["message"] and "'q00' (2 times)" in w["message"]
    assert "and 9 more" in w["message"]


def test_findings_per_answer_of_a_session_cut_across_days_are_one_warning_as_in_the_union(tmp_path):
    """Issue 27 + 28 (roll36): the findings made per answer — the reader's ``empty_answer`` and
    ``numeric_id``, Toxicity's ``answer_truncated`` — are one warning per session and kind. A
    session cut across two days with such findings on both days is one warning of each kind in the
    roll-up as in the union audit: the same ``results.json`` and the same warnings, their counts
    and their first example (before: 2 per kind in the roll-up, one per day's part). The findings
    travel in the stored per-session state; the first ``answer_truncated`` example is day 1's,
    whose turns the union numbers otherwise (its element id renumbered as the union names it)."""
    from fair_forge_beam.metrics.toxicity import MAX_ANALYSIS_CHARS
    from fair_forge_beam.reports.load import iter_quality_warnings

    long = "a long answer " * (MAX_ANALYSIS_CHARS // 14 + 10)
    # single-interaction records of session 4242 (a JSON number: numeric_id), turns interleaved across the days
    # (day 0: turns 1 and 3, day 1: turns 0 and 2): each day numbers its two records 0, 1, the union 0..3
    answers = {0: "", 1: "", 2: long, 3: long}
    streamed = {t: {"metadata": {"session_id": 4242, "assistant_id": "bot", "language": "english"}, "turn_index": t,
                    "batch": {"qa_id": f"q{t}", "query": "How do I bake bread?", "assistant": answers[t]}}
                for t in range(4)}
    s = SESSIONS[0]  # a conversation cut over the days, an empty answer and a long one in each part
    conv = [{**t, "qa_id": f"c{i}", "assistant": ("", long)[i % 2]} for i, t in enumerate((s["conversation"] * 4)[:4])]
    union_bytes = _days_rolled_up(tmp_path, [[streamed[1], streamed[3], {**s, "conversation": conv[:2]}],
                                             [streamed[0], streamed[2], {**s, "conversation": conv[2:]}]], "frequentist")
    kinds = ("answer_truncated", "empty_answer", "numeric_id")
    assert json.loads(union_bytes)["summary"]["data_quality_by_kind"] == {
        "answer_truncated": 2, "empty_answer": 2, "numeric_id": 1, "session_split": 1}

    def found(run):
        return sorted((q["kind"], q["key"], q["message"]) for q in iter_quality_warnings(str(tmp_path / run))
                      if q["kind"] in kinds)

    assert found("roll") == found("union")
    by = {(k, key): m for k, key, m in found("union")}
    assert by[("numeric_id", "4242/bot")].startswith("4 interactions of this session; the first: session_id 4242 at ")
    assert by[("empty_answer", "4242/bot")].startswith("2 interactions of this session; the first: ")
    assert by[("answer_truncated", "4242/bot")].startswith(
        "2 interactions of this session; the first: interaction 4242/bot/2: "), by  # day 1's second record
    key = f"{s['session_id']}/{s['assistant_id']}"
    assert by[("answer_truncated", key)].startswith(f"2 interactions of this session; the first: interaction {key}/1: ")
    assert by[("empty_answer", key)].startswith("2 interactions of this session; the first: ")
    assert_same_records(tmp_path / "roll", tmp_path / "union")


def test_dead_letters_of_a_cut_conversation_are_numbered_as_in_the_union(tmp_path):
    """A conversation no metric can score (Spanish), cut over two days: the roll-up's dead letters
    name the same element ids, and hold the same interaction, as one audit of both files, and its
    ``session_split`` warning comes back (the days stored the session, though nothing was scored)."""
    s = next(x for x in SESSIONS if x["assistant_id"] == "support-bot")
    conv = s["conversation"]
    files = _write_days(tmp_path, [[{**s, "conversation": conv[:1]}], [{**s, "conversation": conv[1:]}]])
    for d, f in enumerate(files):
        _audit(tmp_path / f"a{d}", [f], "frequentist", "--allow-empty")
    union_bytes = _audit(tmp_path / "union", files, "frequentist", "--allow-empty")
    assert _rollup(tmp_path / "roll", [tmp_path / "a0", tmp_path / "a1"], "--allow-empty") == union_bytes  # its session_split too
    union = _records(tmp_path / "union" / "dead_letter")
    assert len(union) == 2 * len(conv) and len({json.loads(r)["element_id"] for r in union}) == len(conv)
    assert_same_records(tmp_path / "roll", tmp_path / "union")


@pytest.fixture(scope="module")
def one_audit(tmp_path_factory):
    root = tmp_path_factory.mktemp("one")
    path = root / "in.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in SESSIONS), encoding="utf-8")
    _audit(root / "a", [path], "bayesian")
    return root / "a"


def test_stored_statistics_are_typed_columns_under_a_versioned_schema(one_audit):
    from fair_forge_beam.io.session_stats import SCHEMA_VERSION_KEY, STATS_SCHEMA_VERSION

    manifest = json.loads((one_audit / "stats" / "manifest.json").read_text())
    assert manifest["stats_schema_version"] == STATS_SCHEMA_VERSION
    assert manifest["stored"] == {"humanity": "stats/sessions/", "toxicity": "stats/sessions/"}
    assert manifest["counts"]["interactions_read"] == sum(len(s["conversation"]) for s in SESSIONS)
    schema = pq.read_schema(next((one_audit / "stats" / "sessions").glob("part-*.parquet")))
    assert schema.metadata[SCHEMA_VERSION_KEY] == str(STATS_SCHEMA_VERSION).encode()
    assert {"humanity__session", "toxicity__session", "toxicity__cells", "reader", "humanity__slice", "toxicity__slice",
            "quality"} <= set(schema.names)

    def leaves(t):
        if pa.types.is_struct(t):
            return [x for f in t for x in leaves(f.type)]
        if pa.types.is_map(t):
            return leaves(t.key_type) + leaves(t.item_type)
        if pa.types.is_list(t):
            return leaves(t.value_type)
        return [t]

    kinds = {str(x) for f in schema for x in leaves(f.type)}
    assert kinds <= {"string", "int64", "double", "bool"}, kinds  # no JSON text, no binary
    table = pq.read_table(one_audit / "stats" / "sessions")
    # a warehouse reads one statistic without parsing anything: the entropy of every stored turn
    entropies = pa.compute.list_flatten(table.column("humanity__session")).combine_chunks().field("entropy")
    scored = json.loads((one_audit / "results.json").read_text())["summary"]["metrics"]["humanity"]["interactions_scored"]
    assert len(entropies) == scored > 0


@pytest.fixture(scope="module")
def one_rollup(one_audit, tmp_path_factory):
    """The roll-up of :func:`one_audit` alone, made once, with the session reducers of Humanity and
    Toxicity made to raise (a session of one run is never reduced again): read-only."""
    from fair_forge_beam.metrics import humanity, toxicity

    def no_reduce(self, key, combined):
        raise AssertionError(f"reduced again: {key}")

    out = tmp_path_factory.mktemp("one-rollup") / "r"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(humanity._SessionReducer, "reduce", no_reduce)
        mp.setattr(toxicity._SessionReducer, "reduce", no_reduce)
        _rollup(out, [one_audit])
    return out


def test_rollup_of_one_audit_is_that_audit(one_audit, one_rollup):
    assert (one_rollup / "results.json").read_bytes() == (one_audit / "results.json").read_bytes()
    info = json.loads((one_rollup / "run_info.json").read_text())
    assert info["rollup"]["runs"] == [str(one_audit)]
    assert "data_quality/" in info["rollup"]["not_rebuilt"]


def test_the_rollups_console_masks_the_runs_keys_as_the_audits_does(one_audit, tmp_path, monkeypatch, capsys):
    """A key variable registered (here inherited, as a roll-up that a job runs after its audits)
    and its value in the output's path: the console table masks it, as the audit's does; names
    stay (issue 28 — the roll-up printed the table unmasked)."""
    from fair_forge_beam import rollup
    from fair_forge_beam.io.secrets import NAMES_ENV

    key = "sk-ffb-rollup-0123456789abcdef"
    monkeypatch.setenv("FFB_TEST_ROLLUP_KEY", key)
    monkeypatch.setenv(NAMES_ENV, "FFB_TEST_ROLLUP_KEY")
    out = tmp_path / f"week-{key}"
    rollup.run(["--from", str(one_audit), "--output", str(out), "--no-report"])
    console = capsys.readouterr().out
    assert "overall" in console and "humanity" in console and "week-***" in console
    assert key not in console


def test_a_session_of_one_run_is_not_reduced_again(one_audit, one_rollup):
    """Schema version 2: a session found in one run reaches the slices with its stored slice value,
    its record is the run's and its warnings are the stored ones — no session reducer runs (it
    would raise: :func:`one_rollup` ran with them raising) and the outputs are the audit's:
    results.json byte for byte, the same session records and the same stored statistics."""
    assert (one_rollup / "results.json").read_bytes() == (one_audit / "results.json").read_bytes()

    def rows(folder):
        t = pq.read_table(folder)
        return sorted(t.to_pylist(), key=lambda r: (r["session_id"], r["assistant_id"], r.get("language") or ""))

    for folder in ("sessions/humanity", "sessions/toxicity", "stats/sessions"):
        assert rows(one_rollup / folder) == rows(one_audit / folder), folder


def test_stages_and_unfinished_runs_are_never_rolled_up(one_audit, tmp_path, capsys):
    """A glob over the nightly folders also matches stages (``OUT.staging-…``: a run being written,
    or one SIGKILLed before publishing): skipped. A run folder without ``_SUCCESS`` (an object
    store's run being published) is a usage error, not half a run merged."""
    import shutil

    shutil.copytree(one_audit, tmp_path / "a.staging-20261203T205422Z-2dbd9331")
    (tmp_path / "a.staging-20261203T205422Z-2dbd9331.lock").write_text("")
    shutil.copytree(one_audit, tmp_path / "a")
    from fair_forge_beam.rollup import resolve_runs

    assert resolve_runs([str(tmp_path / "a*")]) == [str(tmp_path / "a")]
    (tmp_path / "a" / "_SUCCESS").unlink()
    with pytest.raises(SystemExit) as exc:
        _rollup(tmp_path / "r", [tmp_path / "a*"])
    assert exc.value.code == 2
    assert "has no _SUCCESS" in capsys.readouterr().err


def test_schema_version_mismatch_is_a_one_line_usage_error(one_audit, tmp_path, capsys):
    import shutil

    from fair_forge_beam.io.session_stats import STATS_SCHEMA_VERSION

    run = tmp_path / "old"
    shutil.copytree(one_audit, run)
    manifest = json.loads((run / "stats" / "manifest.json").read_text())
    manifest["stats_schema_version"] = 3  # a run of schema version 3 (before the slice accumulators were stored)
    (run / "stats" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SystemExit) as exc:
        _rollup(tmp_path / "r", [run])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert any("schema version 3" in line and f"version {STATS_SCHEMA_VERSION}" in line for line in err), err


def test_runs_of_other_settings_and_bare_folders_are_usage_errors(one_audit, tmp_path, capsys):
    import shutil

    other = tmp_path / "other"
    shutil.copytree(one_audit, other)
    manifest = json.loads((other / "stats" / "manifest.json").read_text())
    manifest["config"]["seed"] = 12
    (other / "stats" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SystemExit) as exc:
        _rollup(tmp_path / "r", [one_audit, other])
    assert exc.value.code == 2 and "seed: 11 vs 12" in capsys.readouterr().err
    (tmp_path / "bare").mkdir()
    with pytest.raises(SystemExit) as exc:
        _rollup(tmp_path / "r2", [tmp_path / "bare"])
    assert exc.value.code == 2 and "holds no stored statistics" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        _rollup(tmp_path / "r3", [tmp_path / "nothing-*"])
    assert exc.value.code == 2 and "no run folder matches" in capsys.readouterr().err


def test_rollup_of_judge_metrics(tmp_path, monkeypatch):
    """Context (a judge verdict per interaction: exact also for a session split across days) and
    Conversational (its prompt carries the session's earlier turns: exact for sessions within a
    day) against a scripted OpenAI-compatible server on 127.0.0.1; the roll-up calls no judge."""
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer
    from test_main_job_judges import answer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    s0, s1 = SESSIONS[10], SESSIONS[1]  # a Fair Forge session (with context) and an hh-rlhf one
    with ScriptedOpenAIServer(answer) as srv:
        judge = ["--judge-base-url", srv.base_url, "--judge-model", "judge-model", "--judge-cache", str(tmp_path / "c")]
        for metrics, pieces in (
            ("context", [[{**s0, "conversation": s0["conversation"][:1]}, s1],
                         [{**s0, "conversation": s0["conversation"][1:]}]]),
            ("conversational", [[s0], [s1]]),
        ):
            root = tmp_path / metrics
            root.mkdir()
            files = _write_days(root, pieces)
            argv = ["--quiet", "--no-report", "--metrics", metrics, "--mode", "bayesian", "--mc-samples", "200", *judge]
            for d, f in enumerate(files):
                audit.run([*argv, "--input", str(f), "--output", str(root / f"a{d}")])
            audit.run([*argv, *[a for f in files for a in ("--input", str(f))], "--output", str(root / "union")])
            calls = srv.count()
            assert _rollup(root / "roll", [root / "a0", root / "a1"]) == (root / "union" / "results.json").read_bytes()
            assert srv.count() == calls  # no judge call


def test_overlapping_inputs_are_refused_naming_the_runs(tmp_path, capsys):
    """Every stored run knows the audit runs it is made of (``stats/manifest.json``: ``run_id``, the
    id its ``_SUCCESS`` holds, and ``audit_runs``; a roll-up's are the union of its inputs'). A
    roll-up given a roll-up and a run it already holds — directly, through a nested roll-up, as a
    copy, or the same folder twice by another path — is a usage error naming both, never a double
    count. A run of an older version (no ``audit_runs``) counts as one run, known by its folder."""
    import shutil

    files = _write_days(tmp_path, [SESSIONS[:5], SESSIONS[5:10], SESSIONS[10:]])
    days = []
    for d, f in enumerate(files):
        _audit(tmp_path / f"d{d}", [f], "bayesian")
        days.append(tmp_path / f"d{d}")
    ids = [json.loads((d / "_SUCCESS").read_text())["run"] for d in days]
    for d, i in zip(days, ids):
        manifest = json.loads((d / "stats" / "manifest.json").read_text())
        assert manifest["run_id"] == i and manifest["audit_runs"] == [i]
    _rollup(tmp_path / "week", days[:2])
    week = json.loads((tmp_path / "week" / "stats" / "manifest.json").read_text())
    assert week["audit_runs"] == sorted(ids[:2]) and week["run_id"] == json.loads(
        (tmp_path / "week" / "_SUCCESS").read_text())["run"]
    _rollup(tmp_path / "month", [tmp_path / "week", days[2]])  # disjoint: fine, and nested ids carried
    assert json.loads((tmp_path / "month" / "stats" / "manifest.json").read_text())["audit_runs"] == sorted(ids)
    shutil.copytree(days[0], tmp_path / "copy")
    (tmp_path / "link").symlink_to(days[1])
    capsys.readouterr()
    for inputs, named in [
        ([tmp_path / "week", days[0]], ("week", "d0", ids[0])),  # the trial's 188-instead-of-162 case
        ([days[2], tmp_path / "month"], ("d2", "month", ids[2])),  # through a nested roll-up
        ([tmp_path / "month", tmp_path / "week"], ("month", "week")),
        ([days[0], tmp_path / "copy"], ("d0", "copy", ids[0])),
        ([days[1], f"{days[1]}/"], ("d1", "same folder")),
        ([days[1], tmp_path / "link"], ("d1", "link", "same folder")),
    ]:
        before = sorted(p.name for p in tmp_path.iterdir())
        with pytest.raises(SystemExit) as exc:
            _rollup(tmp_path / "r", inputs)
        err = capsys.readouterr().err.strip().splitlines()
        assert exc.value.code == 2 and "the runs overlap" in err[0] and all(n in err[0] for n in named), err
        assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written
    # older runs: no audit_runs in the manifest -> each is its own folder's only member
    for d in days[:2]:  # as written before audit_runs (and before seal28 sealed the run ids: resealed)
        written_before_run_ids(d)
        manifest = json.loads((d / "stats" / "manifest.json").read_text())
        del manifest["audit_runs"], manifest["run_id"]
        reseal(d, manifest)
        (d / "stats" / "manifest.json").write_text(json.dumps(manifest))
    _rollup(tmp_path / "old", days[:2])
    assert json.loads((tmp_path / "old" / "stats" / "manifest.json").read_text())["audit_runs"] == sorted(
        f"folder:{d.resolve()}" for d in days[:2])
    with pytest.raises(SystemExit) as exc:
        _rollup(tmp_path / "r", [tmp_path / "old", days[0]])
    assert exc.value.code == 2 and f"audit run folder:{days[0].resolve()}" in capsys.readouterr().err


def test_a_mode_mix_names_the_mode_first(one_audit, tmp_path, capsys):
    """A frequentist and a Bayesian run differ in derived settings too (the Beta prior); the error
    names what the user set: --mode, in plain words."""
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in SESSIONS[:3]), encoding="utf-8")
    _audit(tmp_path / "freq", [path], "frequentist")
    with pytest.raises(SystemExit) as exc:
        _rollup(tmp_path / "r", [one_audit, tmp_path / "freq"])
    err = capsys.readouterr().err.strip().splitlines()[0]
    assert exc.value.code == 2, err
    assert "cannot roll up a bayesian run with a frequentist run" in err and "--mode frequentist" in err, err
    assert "beta_prior" not in err


def _two_days(root: Path, cut: bool) -> tuple[list[Path], list[Path]]:
    """SESSIONS over two days (every other session on day 1); with ``cut``, the first two sessions of
    several turns are cut in two, their second part on day 1. Returns (files, day audits)."""
    days: list[list[dict]] = [[], []]
    n_cut = 0
    for i, s in enumerate(SESSIONS):
        conv = s["conversation"]
        if cut and len(conv) > 1 and n_cut < 2:
            days[0].append({**s, "conversation": conv[:1]})
            days[1].append({**s, "conversation": conv[1:]})
            n_cut += 1
        else:
            days[i % 2].append(s)
    files = _write_days(root, days)
    runs = []
    for d, f in enumerate(files):
        _audit(root / f"a{d}", [f], "bayesian")
        runs.append(root / f"a{d}")
    return files, runs


def _slice_stage_spies(monkeypatch) -> dict:
    """Counts, in this process, the slice stage's per-session adds (``PairCombineFn.add_input``) and
    the subtractions of slice accumulators (``FusedCombineFn.subtract``)."""
    from fair_forge_beam import engine

    calls = {"add_input": 0, "subtract": 0}
    add, sub = engine.PairCombineFn.add_input, engine.FusedCombineFn.subtract

    def counted_add(self, acc, element):
        calls["add_input"] += 1
        return add(self, acc, element)

    def counted_sub(self, acc, other):
        calls["subtract"] += 1
        return sub(self, acc, other)

    monkeypatch.setattr(engine.PairCombineFn, "add_input", counted_add)
    monkeypatch.setattr(engine.FusedCombineFn, "subtract", counted_sub)
    return calls


def test_a_rollup_without_cut_sessions_never_runs_the_slice_stage_per_session(tmp_path, monkeypatch):
    """Issue 27 (cells): the runs' stored slice accumulators are merged as they are; no session of a
    roll-up without a session found in several runs goes through the slice stage (no per-session
    add into a slice combiner, no subtraction) — and results.json is still the union audit's."""
    files, runs = _two_days(tmp_path, cut=False)
    union = _audit(tmp_path / "union", files, "bayesian")
    calls = _slice_stage_spies(monkeypatch)
    assert _rollup(tmp_path / "roll", runs) == union
    assert calls == {"add_input": 0, "subtract": 0}
    assert_same_records(tmp_path / "roll", tmp_path / "union")


def test_cut_sessions_are_subtracted_from_the_stored_slices_and_match_the_union(tmp_path, monkeypatch):
    """Sessions cut across the days: each run's part of them is taken out of the merged stored
    slices (subtracted) and the merged session added, so only those sessions pass through the
    slice stage; the roll-up (and a roll-up of it) is the union audit, byte for byte."""
    files, runs = _two_days(tmp_path, cut=True)
    union = _audit(tmp_path / "union", files, "bayesian")
    calls = _slice_stage_spies(monkeypatch)
    assert _rollup(tmp_path / "roll", runs) == union
    assert calls["subtract"] > 0
    # 2 cut sessions × (the merged session + each run's part) × (Humanity's slice value + Toxicity's
    # answers and session count): the other sessions never reach the slice stage
    assert 0 < calls["add_input"] <= 2 * 3 * 3
    assert_same_records(tmp_path / "roll", tmp_path / "union")
    assert _rollup(tmp_path / "again", [tmp_path / "roll"]) == union


def test_a_metadata_slice_left_by_its_only_cut_session_is_dropped(tmp_path):
    """Sliced by a metadata field: a session cut over two days whose parts carry different values
    (``eu``, then ``us``) is one ``eu`` session of the union (the smallest value). Day 1's
    ``region=us`` slice holds only that part: the roll-up subtracts it and the slice is gone, as in
    the union — not an empty slice."""
    region = ["--slices", "overall,assistant_id,region"]
    days: list[list[dict]] = [[], []]
    cut = next(s for s in SESSIONS if len(s["conversation"]) > 1)
    for i, s in enumerate(SESSIONS):
        if s is cut:
            days[0].append({**s, "region": "eu", "conversation": s["conversation"][:1]})
            days[1].append({**s, "region": "us", "conversation": s["conversation"][1:]})
        else:
            days[i % 2].append({**s, "region": "eu"} if i % 3 else s)
    files = _write_days(tmp_path, days)
    runs = []
    for d, f in enumerate(files):
        _audit(tmp_path / f"a{d}", [f], "bayesian", *region)
        runs.append(tmp_path / f"a{d}")
    day1 = json.loads((tmp_path / "a1" / "results.json").read_text())
    assert "region=us" in json.dumps(day1)
    union = _audit(tmp_path / "union", files, "bayesian", *region)
    assert "region=us" not in union.decode()
    assert _rollup(tmp_path / "roll", runs) == union
    assert_same_records(tmp_path / "roll", tmp_path / "union")
