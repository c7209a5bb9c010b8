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


def test_a_night_rerun_into_another_folder_is_not_rolled_up_twice(tmp_path, capsys):
    first = _night(tmp_path, "2026-12-01", slice(0, 8))
    second = _night(tmp_path, "2026-12-02", slice(8, 16))
    for out, data in (("a1", first), ("a2", second), ("a2-rerun", second)):
        audit.run([*COMMON, "--input", str(data), "--output", str(tmp_path / out)])
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


def test_a_run_without_its_stored_statistics_is_a_usage_error(tmp_path, capsys):
    data = _night(tmp_path, "night", slice(0, 8))
    audit.run([*COMMON, "--input", str(data), "--output", str(tmp_path / "a")])
    audit.run([*COMMON, "--input", str(_night(tmp_path, "other", slice(8, 16))), "--output", str(tmp_path / "b")])
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
def test_a_stray_or_duplicated_file_in_a_run_folder_is_a_usage_error_naming_it(tmp_path, capsys, folder, ext):
    a, b = tmp_path / "a", tmp_path / "b"
    audit.run([*COMMON, "--input", str(_night(tmp_path, "night", slice(0, 8))), "--output", str(a)])
    audit.run([*COMMON, "--input", str(_night(tmp_path, "other", slice(8, 16))), "--output", str(b)])
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
        named = stray if "of-00002" not in stray else f"{folder}/ holds 2 with different totals"
        assert str(bad) in err[0] and named in err[0] and "Traceback" not in err[0], err
        assert not (tmp_path / "r").exists()
    week = _rollup(tmp_path / "week", [a, b])  # a roll-up's copies (part-r000-…) are shards of its folders
    again = _rollup(tmp_path / "again", [tmp_path / "week"])
    assert again["summary"]["interactions_read"] == week["summary"]["interactions_read"] > 0


def test_a_truncated_shard_is_a_usage_error_naming_the_file(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    audit.run([*COMMON, "--input", str(_night(tmp_path, "night", slice(0, 8))), "--output", str(a)])
    audit.run([*COMMON, "--input", str(_night(tmp_path, "other", slice(8, 16))), "--output", str(b)])
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
        assert "<Buffer>" not in err[0]


@pytest.fixture(scope="module")
def two_nights(tmp_path_factory):
    """Two audits of two nights (made once; each test rolls up its own copies)."""
    base = tmp_path_factory.mktemp("nights")
    for name, lines in (("a", slice(0, 8)), ("b", slice(8, 16))):
        audit.run([*COMMON, "--input", str(_night(base, f"night-{name}", lines)), "--output", str(base / name)])
    return base


@pytest.mark.parametrize("where", ["stats/sessions", "sessions/humanity", "results.parquet"])
@pytest.mark.parametrize("copy_name", ["part-0-of-1.parquet", "part-000000-of-00001.parquet",
                                       "part-r0-00000-of-00001.parquet", "part-r000-00000-of-00001.parquet"])
def test_a_shard_copied_under_another_shard_name_is_refused(two_nights, tmp_path, capsys, where, copy_name):
    """Fresh-user trial: a copy of a shard under another shard-like name (part-0-of-1, six digits,
    a roll-up's r-prefix in a plain audit) was read as more data: 84 scored of 56 read."""
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(two_nights / "a", a)
    shutil.copytree(two_nights / "b", b)
    src = sorted((a / where).glob("part-*"))[0]
    shutil.copy(src, a / where / copy_name)
    with pytest.raises(SystemExit) as exc:
        _rollup(tmp_path / "w", [a, b])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and f"{where}/{copy_name} is not a shard" in err[0], err


def test_a_rollup_copy_of_a_run_it_did_not_merge_is_refused(two_nights, tmp_path, capsys):
    """A roll-up's copies are part-rRRR-… with R one of its runs: a fake part-r002-… in a roll-up of
    two runs was read as more data."""
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(two_nights / "a", a)
    shutil.copytree(two_nights / "b", b)
    _rollup(tmp_path / "w", [a, b])
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
