"""A roll-up counts each input once and never rolls up a run whose stored statistics are gone
(issue 27, fresh-user trial of scheduled audits).

* A night re-run into another folder (after a kill, as the docs advise) is a new audit run of the
  same file: each audit's ``stats/manifest.json`` records the files it read (path, size, time), and
  a roll-up given both runs is a usage error naming the file — it counted the night twice (479
  instead of 401 interactions read, 118 duplicate-turn warnings).
* A run whose ``stats/sessions/`` shards are gone (deleted, half copied) is a usage error naming the
  run — it was rolled up with its counts but without its estimates (170 read, every slice n = 88).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import reseal, written_before_run_ids
from pipelines import audit

pytestmark = pytest.mark.slow

EXAMPLES = Path(audit.default_inputs()[1])
COMMON = ["--quiet", "--no-report", "--metrics", "humanity,toxicity", "--group-extractor", "keyword", "--mode",
          "frequentist"]


def _night(tmp_path: Path, name: str, lines: slice) -> Path:
    data = tmp_path / f"{name}.jsonl"
    if not data.exists():
        data.write_text("".join(EXAMPLES.read_text(encoding="utf-8").splitlines(keepends=True)[lines]), encoding="utf-8")
    return data


def _rollup(out: Path, runs: list):
    from fair_forge_beam import rollup

    return rollup.run([*[a for r in runs for a in ("--from", str(r))], "--output", str(out), "--quiet", "--no-report"])


def test_a_night_rerun_into_another_folder_is_not_rolled_up_twice(two_nights, tmp_path, capsys):
    # a1, a2: the module's audits of the two nights (copies); a2-rerun: night b audited again
    first, second = two_nights / "night-a.jsonl", two_nights / "night-b.jsonl"
    for out, name in (("a1", "a"), ("a2", "b")):
        shutil.copytree(two_nights / name, tmp_path / out)
    audit.run([*COMMON, "--input", str(second), "--output", str(tmp_path / "a2-rerun")])
    files = json.loads((tmp_path / "a2" / "stats" / "manifest.json").read_text(encoding="utf-8"))["input_files"]
    assert [f[0] for f in files] == [str(second)] and files[0][1] == second.stat().st_size
    week = _rollup(tmp_path / "week", [tmp_path / "a1", tmp_path / "a2"])
    held = json.loads((tmp_path / "week" / "stats" / "manifest.json").read_text(encoding="utf-8"))["input_files"]
    assert sorted(f[0] for f in held) == [str(first), str(second)]  # a roll-up carries its runs' files
    capsys.readouterr()
    for runs in ([tmp_path / "a2", tmp_path / "a2-rerun"], [tmp_path / "week", tmp_path / "a2-rerun"]):
        with pytest.raises(SystemExit) as exc:
            _rollup(tmp_path / "twice", runs)
        err = capsys.readouterr().err.strip().splitlines()
        assert exc.value.code == 2 and len(err) == 1, err
        assert "the runs overlap" in err[0] and str(second) in err[0] and runs[0].name in err[0], err
        assert not (tmp_path / "twice").exists()
    assert week["summary"]["interactions_read"] > 0


def _copies(two_nights: Path, tmp_path: Path) -> tuple:
    """Copies of the module's two audited nights (:func:`two_nights`) in ``tmp_path``: ``a``, ``b``."""
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(two_nights / "a", a)
    shutil.copytree(two_nights / "b", b)
    return a, b


def test_a_run_without_its_stored_statistics_is_a_usage_error(two_nights, tmp_path, capsys):
    _copies(two_nights, tmp_path)
    shutil.copytree(tmp_path / "b", tmp_path / "gone")
    shutil.rmtree(tmp_path / "gone" / "stats" / "sessions")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        _rollup(tmp_path / "r", [tmp_path / "a", tmp_path / "gone"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and "gone" in err[0] and "stats/sessions/" in err[0], err
    assert "not a complete run" in err[0] and not (tmp_path / "r").exists()


# Issue 28 (second hostile report): the check counted names matching "-N-of-M.parquet" while the
# readers globbed "part-*", so a copied shard (part-00000-of-00001-copy.parquet) was read as more
# data ("36 scored (of 24 read)"); a truncated shard failed with pyarrow's "<Buffer>" naming no file.
@pytest.mark.parametrize("folder,ext", [("stats/sessions", "parquet"), ("stats/slices", "parquet"),
                                        ("sessions/humanity", "parquet"), ("results.parquet", "parquet"),
                                        ("dead_letter", "jsonl")])
def test_a_stray_or_duplicated_file_in_a_run_folder_is_a_usage_error_naming_it(two_nights, rolled_up_twice, tmp_path,
                                                                              capsys, folder, ext):
    a, b = _copies(two_nights, tmp_path)
    shard = f"part-00000-of-00001.{ext}"
    assert (b / folder / shard).is_file()
    for stray in (f"part-00000-of-00001-copy.{ext}", f"copy of {shard}", f"part-00001-of-00002.{ext}"):
        bad = tmp_path / "bad"
        shutil.rmtree(bad, ignore_errors=True)
        shutil.copytree(b, bad)
        shutil.copy(bad / folder / shard, bad / folder / stray)
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            _rollup(tmp_path / "r", [a, bad])
        err = capsys.readouterr().err.strip().splitlines()
        assert exc.value.code == 2 and len(err) == 1, err
        named = stray if "of-00002" not in stray else f"{folder}/ holds 2 shard(s) of different totals"
        assert str(bad) in err[0] and named in err[0] and "Traceback" not in err[0], err
        assert not (tmp_path / "r").exists()
    _, week, again = rolled_up_twice  # a roll-up's copies (part-r000-…) are shards of its folders
    assert again["summary"]["interactions_read"] == week["summary"]["interactions_read"] > 0


def test_a_truncated_shard_is_a_usage_error_naming_the_file(two_nights, tmp_path, capsys):
    a, b = _copies(two_nights, tmp_path)
    for folder in ("stats/sessions", "sessions/toxicity", "results.parquet"):
        bad = tmp_path / "bad"
        shutil.rmtree(bad, ignore_errors=True)
        shutil.copytree(b, bad)
        shard = bad / folder / "part-00000-of-00001.parquet"
        shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            _rollup(tmp_path / "r", [a, bad])
        err = capsys.readouterr().err.strip().splitlines()
        assert exc.value.code == 2 and len(err) == 1, err
        assert f"{bad}: {folder}/part-00000-of-00001.parquet cannot be read as Parquet" in err[0], err
        assert "<Buffer>" not in err[0] and "ArrowInvalid" not in err[0], err


@pytest.fixture(scope="module")
def two_nights(tmp_path_factory):
    """Two audits of two nights and their files ``night-a.jsonl``, ``night-b.jsonl`` (made once; each
    test rolls up its own copies; :func:`sealed_runs` copies ``b``)."""
    base = tmp_path_factory.mktemp("nights")
    for name, lines in (("a", slice(0, 8)), ("b", slice(8, 16))):
        audit.run([*COMMON, "--input", str(_night(base, f"night-{name}", lines)), "--output", str(base / name)])
    return base


@pytest.fixture(scope="module")
def rolled_up_twice(two_nights, tmp_path_factory):
    """``(folder, week, again)``: ``folder/week`` is the roll-up of copies of :func:`two_nights`'
    audits, ``folder/again`` the roll-up of that roll-up (whose run's shards are the first roll-up's
    ``part-r000-…`` copies), made once for the module (read-only: a test that edits one copies it);
    ``week`` and ``again`` their results. They were the same roll-ups of the same unmodified copies
    in each of the stray-file test's 5 cases, and the first one again in the fake-copy test."""
    root = tmp_path_factory.mktemp("rolled-up-twice")
    a, b = _copies(two_nights, root)
    return root, _rollup(root / "week", [a, b]), _rollup(root / "again", [root / "week"])


@pytest.mark.parametrize("where", ["stats/sessions", "sessions/humanity", "results.parquet"])
@pytest.mark.parametrize("copy_name", ["part-0-of-1.parquet", "part-000000-of-00001.parquet",
                                       "part-r0-00000-of-00001.parquet", "part-r000-00000-of-00001.parquet"])
def test_a_shard_copied_under_another_shard_name_is_refused(two_nights, tmp_path, capsys, where, copy_name):
    """Fresh-user trial: a copy of a shard under another shard-like name (part-0-of-1, six digits,
    a roll-up's r-prefix in a plain audit) was read as more data: 84 scored of 56 read."""
    a, b = _copies(two_nights, tmp_path)
    src = sorted((a / where).glob("part-*"))[0]
    shutil.copy(src, a / where / copy_name)
    with pytest.raises(SystemExit) as exc:
        _rollup(tmp_path / "w", [a, b])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and f"{where}/{copy_name} is not a shard" in err[0], err


def test_a_rollup_copy_of_a_run_it_did_not_merge_is_refused(rolled_up_twice, tmp_path, capsys):
    """A roll-up's copies are part-rRRR-… with R one of its runs: a fake part-r002-… in a roll-up of
    two runs was read as more data."""
    shutil.copytree(rolled_up_twice[0] / "week", tmp_path / "w")  # the roll-up of the two nights' audits
    folder = tmp_path / "w" / "stats" / "sessions"
    real = sorted(folder.glob("part-r000-*"))[0]
    shutil.copy(real, folder / real.name.replace("part-r000-", "part-r002-"))
    with pytest.raises(SystemExit) as exc:
        _rollup(tmp_path / "w2", [tmp_path / "w"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and "part-r002-" in err[-1] and "is not a shard" in err[-1], err


def test_nights_whose_metrics_differ_only_in_order_roll_up_as_one_audit(tmp_path):
    """``--metrics humanity,toxicity`` one night and ``toxicity,humanity`` the next are the same
    settings (fresh-user trial: the roll-up refused them, '"humanity,toxicity" vs
    "toxicity,humanity"'); the roll-up equals one audit of both nights in the first night's order."""
    a, b = _night(tmp_path, "a", slice(0, 40)), _night(tmp_path, "b", slice(40, 80))
    common = [x for x in COMMON if x not in ("--metrics", "humanity,toxicity")]
    audit.main([*common, "--metrics", "humanity,toxicity", "--input", str(a), "--output", str(tmp_path / "n1")])
    audit.main([*common, "--metrics", "toxicity,humanity", "--input", str(b), "--output", str(tmp_path / "n2")])
    audit.main([*common, "--metrics", "humanity,toxicity", "--input", str(a), "--input", str(b),
                "--output", str(tmp_path / "union")])
    _rollup(tmp_path / "week", [tmp_path / "n1", tmp_path / "n2"])
    assert (tmp_path / "week" / "results.json").read_bytes() == (tmp_path / "union" / "results.json").read_bytes()


# Issue 28 (hostile trial): a shard of another run copied into a run's folder under Beam's exact
# shard name was rolled up (inconsistent results), and so were a shard edited in place, a run with
# a shard deleted and a roll-up with an extra copy named as one of its own. Each run's
# stats/manifest.json now lists the size and sha256 of every file a roll-up reads (``files``); the
# data files carry nothing of their run (fix28c's run ids in the Parquet metadata were reverted:
# two runs of one input wrote different files).
BROKEN = '{"session_id": "broken", "assistant_id": "bot", "language": "english"}\n'  # a dead letter: no conversation
SEALED = [("stats/sessions", "parquet"), ("stats/slices", "parquet"), ("sessions/humanity", "parquet"),
          ("sessions/toxicity", "parquet"), ("results.parquet", "parquet"), ("dead_letter", "jsonl")]


@pytest.fixture(scope="module")
def sealed_runs(two_nights, tmp_path_factory):
    """Audits made once: ``a`` (night a and a record without conversation: one dead letter), ``b``
    and ``b-again`` (night b twice, the same settings: ``b`` is a copy of :func:`two_nights`' audit
    of night b, ``b-again`` a second audit of the same file), ``b-same-input`` (night b, Humanity
    alone, Bayesian) and ``w``, the roll-up of ``a`` and ``b``."""
    base = tmp_path_factory.mktemp("sealed")
    night_a = _night(base, "night-a", slice(0, 8))
    night_a.write_text(night_a.read_text(encoding="utf-8") + BROKEN, encoding="utf-8")
    night_b = two_nights / "night-b.jsonl"
    audit.run([*COMMON, "--input", str(night_a), "--output", str(base / "a")])
    shutil.copytree(two_nights / "b", base / "b")
    audit.run([*COMMON, "--input", str(night_b), "--output", str(base / "b-again")])
    same = [x for x in COMMON if x not in ("--metrics", "humanity,toxicity", "--mode", "frequentist")]
    audit.run([*same, "--metrics", "humanity", "--mode", "bayesian", "--input", str(night_b),
               "--output", str(base / "b-same-input")])
    _rollup(base / "w", [base / "a", base / "b"])
    return base


def _refused(tmp_path, runs: list, capsys) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        _rollup(tmp_path / "out", runs)
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and "Traceback" not in err[0], err
    assert not (tmp_path / "out").exists()
    return err[0]


def _manifest(run: Path) -> dict:
    return json.loads((run / "stats" / "manifest.json").read_text(encoding="utf-8"))


# the same input: every folder but sessions/toxicity/ (Humanity alone wrote none) and dead_letter/ (the
# same rejected records: the same bytes, so a copy changes nothing)
@pytest.mark.parametrize("folder,ext,source", [*[(f, e, "other input") for f, e in SEALED],
                                               *[(f, e, "same input") for f, e in SEALED[:3] + SEALED[4:5]]])
def test_another_runs_shard_copied_under_the_exact_name_is_refused(sealed_runs, tmp_path, capsys, folder, ext, source):
    name = f"part-00000-of-00001.{ext}"
    src = sealed_runs / ("a" if source == "other input" else "b-same-input") / folder / name
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(sealed_runs / "a", a)
    shutil.copytree(sealed_runs / "b", b)
    assert src.read_bytes() != (b / folder / name).read_bytes()  # a copy that changes the run's data
    shutil.copy(src, b / folder / name)
    err = _refused(tmp_path, [a, b], capsys)
    assert f"{b}: {folder}/{name} is not the file the run wrote" in err and "sha256" in err, err


@pytest.mark.parametrize("folder,ext", SEALED)
def test_a_shard_edited_in_place_by_one_byte_is_refused(sealed_runs, tmp_path, capsys, folder, ext):
    """One byte the readers do not check: Parquet's ``created_by`` text in the footer, a character
    of a dead letter's reason."""
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(sealed_runs / "a", a)
    shutil.copytree(sealed_runs / "b", b)
    shard = a / folder / f"part-00000-of-00001.{ext}"
    data = bytearray(shard.read_bytes())
    at = data.find(b"parquet-cpp-arrow") + len("parquet-") if ext == "parquet" else data.find(b"not a session")
    assert at > 10, shard
    data[at] = ord("C") if data[at] != ord("C") else ord("c")
    shard.write_bytes(bytes(data))
    err = _refused(tmp_path, [a, b], capsys)
    assert f"{a}: {folder}/{shard.name} is not the file the run wrote" in err, err


@pytest.mark.parametrize("folder", ["sessions/humanity", "sessions/toxicity", "results.parquet", "dead_letter",
                                    "stats/sessions"])
def test_a_deleted_shard_is_refused(sealed_runs, tmp_path, capsys, folder):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(sealed_runs / "a", a)
    shutil.copytree(sealed_runs / "b", b)
    (shard,) = (a / folder).glob("part-*")
    shard.unlink()
    err = _refused(tmp_path, [a, b], capsys)
    if folder == "stats/sessions":  # found before, by the shard check (a required table): that message stays
        assert f"{a}: stats/sessions/ holds 0 shard(s)" in err, err
    else:
        assert f"{a}: {folder}/{shard.name} is missing (stats/manifest.json lists it" in err, err


@pytest.mark.parametrize("folder", ["dead_letter", "results.parquet"])
def test_a_shard_replaced_by_a_fifo_is_refused_not_read_forever(sealed_runs, tmp_path, capsys, folder):
    """Hashing a FIFO in place of a shard waited for a writer forever (the second trial of issue 28
    found it for run files). A thread opens the FIFO for writing after 60 s so that the old code
    fails instead of hanging the suite."""
    import os
    import threading

    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(sealed_runs / "a", a)
    shutil.copytree(sealed_runs / "b", b)
    (shard,) = (a / folder).glob("part-*")
    shard.unlink()
    os.mkfifo(shard)
    done = threading.Event()

    def unblock():
        if not done.wait(60):
            with open(shard, "wb"):
                pass

    threading.Thread(target=unblock, daemon=True).start()
    try:
        err = _refused(tmp_path, [a, b], capsys)
    finally:
        done.set()
    assert f"{shard} is a FIFO (named pipe), not a regular file" in err, err


@pytest.mark.parametrize("extra", ["stats/sessions/part-r001-r000-00000-of-00001.parquet",
                                   "results.parquet/part-r000-r000-00000-of-00001.parquet",
                                   "dead_letter/part-r001-r000-00000-of-00001.jsonl",
                                   "stats/sessions1/part-00000-of-00001.parquet"])
def test_an_extra_file_the_run_did_not_write_is_refused(sealed_runs, tmp_path, capsys, extra):
    """A roll-up of two runs holds copies ``part-rRRR-…`` with R below 2, and a roll-up of roll-ups
    ``part-rRRR-rQQQ-…``: an extra copy under such a name (another run's shard) passed every name
    check and was read as more data; a table the manifest does not name is not the run's either."""
    w = tmp_path / "w"
    shutil.copytree(sealed_runs / "w", w)
    ext = extra.rsplit(".", 1)[1]
    src = sealed_runs / "b-again" / ("dead_letter" if ext == "jsonl" else "results.parquet") / f"part-00000-of-00001.{ext}"
    if extra.startswith("stats/"):
        src = sealed_runs / "b-again" / "stats" / "sessions" / "part-00000-of-00001.parquet"
    (w / extra).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, w / extra)
    err = _refused(tmp_path, [w], capsys)
    assert f"{w}: {extra} is not a file the run wrote (stats/manifest.json does not list it)" in err, err


def test_two_audits_of_one_input_write_the_same_data_files_and_list_each_with_its_hash(sealed_runs, tmp_path):
    """No data file carries its run (the run id is in the manifest and ``_SUCCESS`` only): the two
    audits of night b list the same files, each file the same bytes or — where the runner wrote
    the records of a shard in another order (PCollections are unordered: docs/data.md) — the same
    schema, key-value metadata and records; each listed size and sha256 is the file's."""
    import hashlib

    import pyarrow.parquet as pq

    runs = [sealed_runs / "b", sealed_runs / "b-again"]
    manifests = [_manifest(r) for r in runs]
    assert sorted(manifests[0]["files"]) == sorted(manifests[1]["files"])
    # fix28j: stats/quality_counts.json (the manifest's quality counts, sealed) is listed too; fix28u (trial
    # 28e B4, B6): results.json and stats/settings.json (the manifest's settings) too; seal28: run_info.json
    # and stats/run_ids.json (the manifest's run id, audit runs and input files) too — the run's own record,
    # not data: each holds its run (times, the run id), so they are left out of the same-bytes checks below
    single = ["stats/quality_counts.json", "stats/settings.json", "results.json"]
    own = ["run_info.json", "stats/run_ids.json"]
    assert {f.split("/part-")[0] for f in manifests[0]["files"]} == {f for f, _ in SEALED} | set(single) | set(own)
    for run, m in zip(runs, manifests):
        on_disk = sorted([str(p.relative_to(run)) for f, _ in SEALED for p in (run / f).iterdir()] + single + own)
        assert sorted(m["files"]) == on_disk
        for rel, entry in m["files"].items():
            data = (run / rel).read_bytes()
            assert entry == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}, rel
            run_id = m["run_id"].encode()
            assert rel in own or run_id not in data, rel  # nor in a Parquet key-value: those are in the bytes
    for rel in (r for r in manifests[0]["files"] if r not in own):
        first, second = ((r / rel) for r in runs)
        if first.read_bytes() == second.read_bytes():
            assert manifests[0]["files"][rel] == manifests[1]["files"][rel]
            continue
        if rel.endswith(".parquet"):
            t1, t2 = pq.read_table(first), pq.read_table(second)
            assert t1.schema.equals(t2.schema, check_metadata=True), rel
            assert sorted(map(_row_text, t1.to_pylist())) == sorted(map(_row_text, t2.to_pylist())), rel
        else:
            assert sorted(first.read_text().splitlines()) == sorted(second.read_text().splitlines()), rel
    week = _rollup(tmp_path / "week", [sealed_runs / "a", sealed_runs / "b-again"])  # a sealed run rolls up
    assert week["summary"]["interactions_read"] > 0


def _row_text(row: dict) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def _add_to_dead_letters(c: dict) -> None:
    c["dead_letters"][0][2] += 1000


def _invent_dead_letters(c: dict) -> None:
    c["dead_letters"].append(["toxicity", "an invented reason", 5])


def _add_to_a_slice(c: dict) -> None:
    c["interactions_read_by_slice"]["assistant_id=hh-chosen"] += 1000


def _add_to_read(c: dict) -> None:
    c["interactions_read"] += 1000


def _invent_quality(c: dict) -> None:
    c["quality"]["numeric_id"] = 5


@pytest.mark.parametrize("run,edit,named", [
    ("a", _add_to_read, "counts interactions_read = "),
    ("w", _add_to_read, "counts interactions_read = "),  # a roll-up's manifest: its copies hold the numbers
    ("a", _add_to_a_slice, 'counts interactions_read_by_slice["assistant_id=hh-chosen"] = '),
    ("a", _add_to_dead_letters, 'counts dead_letters of stage "read" = 1001, but the run\'s files hold 1'),
    ("a", _invent_dead_letters, 'counts dead_letters of stage "toxicity" = 5, but the run\'s files hold 0'),
    ("a", _invent_quality, 'counts quality["numeric_id"] = 5, but the run\'s files hold 0'),  # fix28j: was rolled up
    ("w", _invent_quality, 'counts quality["numeric_id"] = 5, but the run\'s files hold 0'),
])
def test_a_count_edited_in_the_manifest_is_refused(sealed_runs, tmp_path, capsys, run, edit, named):
    """The manifest cannot list its own hash, so its ``counts`` were rolled up as written: 1000
    added to ``interactions_read`` in a night's manifest gave a roll-up (exit 0) claiming 1000 more
    interactions read (issue 27, fresh-user trial). Every count the stored files also hold
    (interactions read, per slice, dead letters per stage, quality warnings per kind — fix28j) is
    checked against them: a usage error
    naming the run and both numbers."""
    runs = [tmp_path / r for r in (["a", "b"] if run == "a" else [run])]
    for r in runs:
        shutil.copytree(sealed_runs / r.name, r)
    edited = runs[0]
    m = _manifest(edited)
    edit(m["counts"])
    (edited / "stats" / "manifest.json").write_text(json.dumps(m, indent=2, ensure_ascii=False), encoding="utf-8")
    err = _refused(tmp_path, runs, capsys)
    assert f": {edited}: stats/manifest.json {named}" in err, err


def test_the_counts_a_rollup_takes_are_those_its_runs_files_hold(sealed_runs):
    """Unedited runs: the counts checked against the files are the manifest's (reader items per
    session, dead letters per stage and reason kind), for an audit and for a roll-up."""
    from fair_forge_beam.rollup import checked_counts

    for name in ("a", "b", "w"):
        m = _manifest(sealed_runs / name)
        assert checked_counts(str(sealed_runs / name), m) == m["counts"], name
    assert sum(n for *_, n in _manifest(sealed_runs / "a")["counts"]["dead_letters"]) == 1  # the broken record


@pytest.mark.parametrize("folder,column,value,named", [
    ("stats/sessions", "session_id", None, "row 1: column 'session_id' is null"),
    ("sessions/toxicity", "assistant_id", None, "row 1: column 'assistant_id' is null"),
    ("sessions/toxicity", "n_interactions", -5, "row 1: column 'n_interactions' is -5 (a count is never negative)"),
])
def test_a_resealed_shard_whose_rows_break_the_stored_rules_is_a_usage_error(sealed_runs, tmp_path, capsys, folder,
                                                                             column, value, named):
    """Trial 28 (B6): a stats Parquet with a null session_id, its manifest's checksums resealed after
    the edit, ended in a pydantic traceback in Engine/ReduceSessions (exit 1): a stored row is
    checked where the shard is read, one line naming the file, the row and the column (exit 2)."""
    import pyarrow as pa

    def edit(values, field):  # the first row's value replaced; the column made nullable
        return pa.field(column, field.type), [value] + values[1:]

    a, b, rel = _edited_and_resealed(sealed_runs, tmp_path, folder, column, edit)
    err = _refused(tmp_path, [a, b], capsys)
    assert f"{b}: {rel}: {named}: not a row this package writes" in err, err


@pytest.mark.parametrize("folder,column,edit,named", [
    ("stats/sessions", "humanity__session", lambda v: [{**v[0], "counts": [-1] + list(v[0]["counts"])[1:]}, *v[1:]],
     "row 1: column 'humanity__session', field 'humanity__session[].counts[]' is -1 (a count is never negative)"),
    ("stats/sessions", "toxicity__session", lambda v: {**v, "a": v["a"], "counts": [(k, -4) for k, _ in v["counts"]] or [(0, -4)]},
     "row 1: column 'toxicity__session', field 'toxicity__session.counts[value]' is -4 (a count is never negative)"),
])
def test_a_resealed_shard_with_a_nested_count_edited_is_a_usage_error(sealed_runs, tmp_path, capsys, folder, column, edit,
                                                                      named):
    """Issue 28: the stored rules covered top-level columns only; a count inside a stored accumulator
    (a list's items, a map's values), edited and resealed, reached the engine."""
    def edit_first(values, field):  # the first row (it holds a value) edited; the schema kept
        assert next(k for k, v in enumerate(values) if v) == 0, values[:2]
        return field, [edit(values[0])] + values[1:]

    a, b, rel = _edited_and_resealed(sealed_runs, tmp_path, folder, column, edit_first)
    err = _refused(tmp_path, [a, b], capsys)
    assert f"{b}: {rel}: {named}: not a row this package writes" in err, err


def _edited_and_resealed(sealed_runs, tmp_path, folder, column, edit):
    """Copies of the runs ``a`` and ``b``; in ``b``'s shard of ``folder``, ``column`` replaced by
    ``edit(values, field) -> (field, values)`` and the manifest's checksum of the shard resealed
    (so only the stored-row rules can refuse it). Returns ``(a, b, the shard's path in the run)``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fair_forge_beam.io.session_stats import file_digest

    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(sealed_runs / "a", a)
    shutil.copytree(sealed_runs / "b", b)
    rel = f"{folder}/part-00000-of-00001.parquet"
    shard = b / rel
    t = pq.read_table(shard)
    field, values = edit(t.column(column).to_pylist(), t.schema.field(column))
    t = t.set_column(t.schema.get_field_index(column), field, pa.array(values, field.type))
    pq.write_table(t, shard)
    m = _manifest(b)
    m["files"][rel]["size"], m["files"][rel]["sha256"] = file_digest(str(shard))
    (b / "stats" / "manifest.json").write_text(json.dumps(m, indent=2, ensure_ascii=False), encoding="utf-8")
    return a, b, rel


def _swap_in(target: Path, source: Path) -> None:
    """``source``'s files published as ``target`` (a re-run's publication: the folder replaced)."""
    old = target.with_name(target.name + ".old")
    target.rename(old)
    shutil.copytree(source, target)
    shutil.rmtree(old)


def _edit_count(run: Path) -> None:
    doc = _manifest(run)
    doc["counts"]["interactions_read"] += 1
    (run / "stats" / "manifest.json").write_text(json.dumps(doc), encoding="utf-8")


def _edit_shard(run: Path) -> None:
    shard = run / "results.parquet" / "part-00000-of-00001.parquet"
    data = bytearray(shard.read_bytes())
    at = data.find(b"parquet-cpp")  # the footer's created_by text: a byte no reader checks
    data[at] ^= 0x20
    shard.write_bytes(bytes(data))


@pytest.mark.parametrize("change", ["republished", "count edited", "shard edited"])
def test_a_run_that_changes_while_the_rollup_reads_it_is_refused_and_nothing_published(
        sealed_runs, tmp_path, capsys, monkeypatch, change):
    """Trial 28e B8 (TOCTOU): night b re-published while the roll-up ran gave exit 0 and a roll-up of
    the old night's totals with the new night's slices. The runs are checked again after the pipeline
    and the copies read them, before publishing: one line naming the run, exit 1, nothing published."""
    from fair_forge_beam import rollup

    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(sealed_runs / "a", a)
    shutil.copytree(sealed_runs / "b", b)
    place = rollup._place_reused_rows

    def during(*args, **kwargs):  # after the pipeline read the runs, before the copies and the publication
        {"republished": lambda: _swap_in(b, sealed_runs / "b-again"), "count edited": lambda: _edit_count(b),
         "shard edited": lambda: _edit_shard(b)}[change]()
        return place(*args, **kwargs)

    monkeypatch.setattr(rollup, "_place_reused_rows", during)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        _rollup(tmp_path / "out", [a, b])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 1 and len(err) == 1 and "Traceback" not in err[0], err
    assert f"{b} changed while the roll-up read it" in err[0] and "nothing was published" in err[0], err
    assert ("run id" in err[0]) == (change == "republished"), err
    assert not (tmp_path / "out").exists()


def _set_setting(doc: dict, key: str, value) -> None:
    for part in ("config", "options"):
        doc[part][key] = value


@pytest.mark.parametrize("key,value,named", [("mode", "bayesian", '--mode: "frequentist" vs "bayesian"'),
                                             ("mc_samples", 1000, "--mc-samples: "),
                                             ("seed", 7, "--seed: 42 vs 7"),
                                             ("group_extractor", "declared", '--group-extractor: "keyword" vs "declared"')])
@pytest.mark.parametrize("both", [True, False], ids=["both runs", "one run"])
def test_a_setting_edited_in_the_manifest_is_refused(sealed_runs, tmp_path, capsys, key, value, named, both):
    """Trial 28e B6: both nights' manifests edited (mode bayesian -> frequentist, or mc_samples
    5000 -> 1000) ended in a 42-line Beam traceback, 'cannot reshape array of size 20000 into shape
    (4,0)'. The settings are sealed (stats/settings.json): one line naming the run and the setting."""
    runs = [tmp_path / "a", tmp_path / "b"]
    for r in runs:
        shutil.copytree(sealed_runs / r.name, r)
    for r in runs if both else runs[-1:]:
        m = _manifest(r)
        _set_setting(m, key, value)
        (r / "stats" / "manifest.json").write_text(json.dumps(m, indent=2, ensure_ascii=False), encoding="utf-8")
    err = _refused(tmp_path, runs, capsys)
    edited = runs[0] if both else runs[1]
    assert f": {edited}: stats/manifest.json is not the manifest the run wrote" in err and named in err, err


def test_a_manifest_edited_and_resealed_whose_statistics_do_not_fit_its_mode_is_one_line(sealed_runs, tmp_path, capsys):
    """The manifest and its settings file edited together and resealed: the stored slice
    accumulators are decoded under the settings before the pipeline (a Beam traceback before)."""
    runs = [tmp_path / "a", tmp_path / "b"]
    for r in runs:
        shutil.copytree(sealed_runs / r.name, r)
        m = _manifest(r)
        _set_setting(m, "mode", "bayesian")
        _set_setting(m, "mc_samples", 1000)
        reseal(r, m)
        (r / "stats" / "manifest.json").write_text(json.dumps(m, indent=2, ensure_ascii=False), encoding="utf-8")
    err = _refused(tmp_path, runs, capsys)
    assert "of stats/slices/, column" in err and "does not fit the manifest's settings (--mode bayesian" in err, err


def test_an_edited_results_json_is_not_read_as_the_runs(sealed_runs, tmp_path):
    """Trial 28e B4: results.json was not sealed; an edited one was trended and read as a baseline.
    It is listed in the manifest's files now: a value edited (still possible) is refused where read,
    and by a roll-up."""
    from fair_forge_beam.reports.load import read_baseline, read_results

    run = tmp_path / "a"
    shutil.copytree(sealed_runs / "a", run)
    assert "results.json" in _manifest(run)["files"]
    assert read_results(str(run))["metrics"]
    doc = json.loads((run / "results.json").read_text(encoding="utf-8"))
    doc["metrics"]["toxicity"]["slices"][0]["toxic_rate"]["mean"] = 0.01
    (run / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    for read in (lambda: read_results(str(run)), lambda: read_baseline(str(run))):
        with pytest.raises(ValueError) as err:
            read()
        assert f"{run / 'results.json'} is not the file its run wrote" in str(err.value), err.value
        assert "\n" not in str(err.value)


def _edit_json(path: Path, edit) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    edit(doc)
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")


def _trend_refusal(runs: list) -> str:
    from fair_forge_beam.reports.trend import TrendUsageError, iter_runs

    with pytest.raises(TrendUsageError) as err:
        list(iter_runs([str(r) for r in runs]))
    assert "\n" not in str(err.value)
    return str(err.value)


@pytest.mark.parametrize("edit,named", [
    (lambda d: d["options"].update(seed=7), "run_info.json is not the file"),
    (lambda d: d.update(started_at="2020-01-01T00:00:00.000Z"), "run_info.json is not the file"),
])
def test_an_edited_run_info_json_is_refused_by_rollup_trend_and_compare(sealed_runs, tmp_path, capsys, edit, named):
    """seal28 (issue 28): run_info.json (the options a comparison states, the times a trend orders by)
    was not sealed: an edited one was read as the run's. It is listed in the manifest's files now."""
    from fair_forge_beam.reports.compare import _info
    from fair_forge_beam.reports.load import read_run_info

    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(sealed_runs / "a", a)
    shutil.copytree(sealed_runs / "b", b)
    assert "run_info.json" in _manifest(a)["files"] and read_run_info(str(a))["options"]
    _edit_json(a / "run_info.json", edit)
    err = _refused(tmp_path, [a, b], capsys)
    assert f"{a}: run_info.json is not the file the run wrote" in err, err
    assert f"{a / 'run_info.json'} is not the file its run wrote" in _trend_refusal([a, b])
    for read in (lambda: read_run_info(str(a)), lambda: _info(str(a))):
        with pytest.raises(ValueError) as exc:
            read()
        assert named in str(exc.value) and "\n" not in str(exc.value), exc.value


@pytest.mark.parametrize("field", ["audit_runs", "input_files", "run_id", "files"])
def test_an_edited_run_id_audit_runs_or_input_files_in_the_manifest_is_refused(sealed_runs, tmp_path, capsys, field):
    """seal28 (issue 28): the manifest's ``audit_runs`` and ``input_files`` (what a roll-up and a
    trend count as one audit run or one input) were not sealed: an edit made two runs of one night
    look apart. They are sealed in stats/run_ids.json; ``files``: run_info.json's entry removed (its
    run sealed it: stats/settings.json's ``sealed_files``)."""
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(sealed_runs / "a", a)
    shutil.copytree(sealed_runs / "b", b)

    def edit(m):
        if field == "audit_runs":
            m["audit_runs"] = sorted([*m["audit_runs"], "20260101T000000Z-00000000"])
        elif field == "input_files":
            m["input_files"][0][2] += 1.0
        elif field == "run_id":
            m["run_id"] = m["audit_runs"][0] = "20260101T000000Z-00000000"
        else:
            del m["files"]["run_info.json"]

    _edit_json(b / "stats" / "manifest.json", edit)
    err = _refused(tmp_path, [a, b], capsys)
    if field == "files":
        assert f"{b}: run_info.json is not a file the run wrote" in err, err
        assert f"{b / 'run_info.json'} is not listed in stats/manifest.json, whose run sealed it" in _trend_refusal([a, b])
        return
    assert (f"{b}: stats/manifest.json is not the manifest the run wrote: its {field} differs from the sealed "
            "stats/run_ids.json") in err, err
    assert f"its {field} differs from the sealed stats/run_ids.json" in _trend_refusal([a, b])


def test_runs_written_before_run_info_and_run_ids_were_sealed_still_roll_up_and_trend(sealed_runs, tmp_path):
    """The contract of seal28: runs of this stats schema (7) written before it — no ``sealed_files``
    in the manifest or stats/settings.json, no stats/run_ids.json, run_info.json not listed — are
    read as before (their results.json alone sealed). A guard: it passes on the code before too."""
    import hashlib

    from fair_forge_beam.reports.trend import iter_runs

    runs = [tmp_path / "a", tmp_path / "b"]
    for r in runs:
        shutil.copytree(sealed_runs / r.name, r)
        written_before_run_ids(r)
        m = _manifest(r)
        settings = (r / "stats" / "settings.json").read_bytes()
        assert b"sealed_files" not in settings and m["files"]["stats/settings.json"]["sha256"] == \
            hashlib.sha256(settings).hexdigest()
    assert _rollup(tmp_path / "w", runs)["summary"]["interactions_read"] > 0
    assert len(list(iter_runs([str(r) for r in runs]))) == 2


def test_a_later_slice_edited_and_resealed_is_refused_not_only_the_first(sealed_runs, tmp_path, capsys):
    """fix28u decoded only the first stored slice of each file holding a value before the pipeline:
    a later slice edited and resealed (Monte Carlo draws in a frequentist run's group fairness)
    reached the pipeline. Every slice is decoded now: one line naming its row."""
    def edit(values, field):
        assert len(values) > 2 and all(v["interaction"]["f0"]["gamma"] == [] for v in values if v)
        values[-1]["interaction"]["f0"]["gamma"] = [{"group": 0, "sums": b"\x00" * 8}]
        return field, values

    a, b, rel = _edited_and_resealed(sealed_runs, tmp_path, "stats/slices", "toxicity__acc", edit)
    err = _refused(tmp_path, [a, b], capsys)
    assert f"{b}: part-00000-of-00001.parquet of stats/slices/, column toxicity__acc, does not fit" in err, err
    assert "holds Monte Carlo draws" in err and f"row {len(_slices(b))}:" in err, err


def _slices(run: Path) -> list:
    import pyarrow.parquet as pq

    return pq.read_table(run / "stats" / "slices" / "part-00000-of-00001.parquet").column("slice").to_pylist()


def test_a_roll_ups_console_summary_says_roll_up():
    """fresh14: the roll-up's console summary began 'fair_forge_beam audit:'."""
    from fair_forge_beam.reports.summary import summary_table

    doc = {"config": {"mode": "frequentist"}, "summary": {"interactions_read": 0, "rejected_at_read": 0,
                                                          "data_quality_warnings": 0, "metrics": {}}, "metrics": {}}
    assert summary_table(doc, "out", [], "roll-up").startswith("fair_forge_beam roll-up: mode frequentist")
    assert summary_table(doc, "out", []).startswith("fair_forge_beam audit: mode frequentist")


def test_hidden_files_in_a_run_folder_are_passed_over(two_nights, tmp_path):
    """Trial34 T8: a ``.DS_Store`` (Finder writes one when someone browses a shared audits folder) or
    a Hadoop checksum ``.part-….crc`` in a run's folder made the roll-up refuse the run as holding a
    stray file. Names starting with ``.`` or ``_`` are hidden, as Beam's, Hadoop's and Arrow's readers
    treat them: passed over, the roll-up the same as without them."""
    a, b = _copies(two_nights, tmp_path)
    week = _rollup(tmp_path / "week", [a, b])
    for folder in ("stats/sessions", "sessions/toxicity", "results.parquet", "dead_letter"):
        if (b / folder).is_dir():
            for hidden in (".DS_Store", ".part-00000-of-00001.parquet.crc", "_SUCCESS", "_tmp-part-00001-of-00002.parquet"):
                (b / folder / hidden).write_bytes(b"junk")
    again = _rollup(tmp_path / "again", [a, b])
    assert again["summary"]["interactions_read"] == week["summary"]["interactions_read"] > 0
    assert again["metrics"] == week["metrics"]
