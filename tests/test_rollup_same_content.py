"""A roll-up refuses two runs that read the same data under different file names (trial 28g G7: two
audits of one log and of its renamed or ``cp -p`` copy were rolled up with every session counted
twice, exit 0, only duplicate-turn data-quality warnings). Each audit records the sha256 of every
input file it reads in its sealed ``input_files``; the roll-up compares those digests, never the
logs. Runs written before the digest keep the path, size and time check alone."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from fair_forge_beam import rollup
from fair_forge_beam.io.session_stats import file_digest
from pipelines import audit
import helpers

EXAMPLES = Path(audit.default_inputs()[1])
COMMON = ["--quiet", "--no-report", "--metrics", "humanity", "--mode", "frequentist"]


def _manifest(files, interactions_read=10):
    return {"run_id": "r", "audit_runs": [], "input_files": files,
            "counts": {"interactions_read": interactions_read, "dead_letters": []}}


@pytest.mark.slow
def test_runs_that_read_nothing_share_a_digest_without_overlapping(tmp_path):
    """An empty day published with --allow-empty ("[]" every night) holds no data to count twice: two
    such runs, or one and a run of data, roll up; two runs that read records from one content do not."""
    d = "0" * 64
    empty = [{**_manifest([["/logs/d1.json", 3, 1.0, d]], 0), "audit_runs": ["r1"]},
             {**_manifest([["/logs/d2.json", 3, 2.0, d]], 0), "audit_runs": ["r2"]}]
    assert rollup.check_no_overlap(["/runs/A", "/runs/B"], empty) == ["r1", "r2"]
    one_read = [empty[0], {**_manifest([["/logs/d2.json", 3, 2.0, d]], 5), "audit_runs": ["r2"]}]
    assert rollup.check_no_overlap(["/runs/A", "/runs/B"], one_read) == ["r1", "r2"]
    rejected = {**_manifest([["/logs/d1.json", 3, 1.0, d]], 0), "audit_runs": ["r3"]}
    rejected["counts"]["dead_letters"] = [{"stage": "read", "count": 1}]
    with pytest.raises(ValueError, match="the same content"):
        rollup.check_no_overlap(["/runs/B", "/runs/C"], [one_read[1], rejected])
    for d_ in ("d1", "d2"):  # end to end: two "[]" days published with --allow-empty, then rolled up
        (tmp_path / f"{d_}.json").write_text("[]\n", encoding="utf-8")
        assert audit.main([*COMMON, "--allow-empty", "--input", str(tmp_path / f"{d_}.json"),
                           "--output", str(tmp_path / d_)]) == 0
    assert audit.main(["rollup", "--quiet", "--no-report", "--allow-empty", "--from", str(tmp_path / "d1"), "--from",
                       str(tmp_path / "d2"), "--output", str(tmp_path / "week")]) == 0


def test_input_fingerprints_record_the_content_digest(tmp_path):
    a, empty = tmp_path / "a.jsonl", tmp_path / "e.jsonl"
    a.write_text('{"x": 1}\n', encoding="utf-8")
    empty.write_text("", encoding="utf-8")
    (got_a, got_e) = rollup.input_fingerprints([str(a), str(empty), str(a)])
    assert got_a[0] == str(a) and got_a[1] == a.stat().st_size and got_a[3] == file_digest(str(a))[1]
    assert len(got_e) == 3  # an empty file has no digest: two empty logs are not the same data


@pytest.mark.parametrize("names", [("a.jsonl", "renamed.jsonl"), ("a.jsonl", "sub/a.jsonl")])
def test_runs_whose_files_share_a_digest_are_refused_naming_both_runs_and_files(names):
    d = "0" * 64
    ms = [{**_manifest([[f"/logs/{names[0]}", 10, 1.0, d]]), "audit_runs": ["r1"]},
          {**_manifest([[f"/logs/{names[1]}", 10, 2.0, d]]), "audit_runs": ["r2"]}]
    with pytest.raises(ValueError) as exc:
        rollup.check_no_overlap(["/runs/A", "/runs/B"], ms)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(
        f"the runs overlap: /runs/A read /logs/{names[0]} and /runs/B read /logs/{names[1]}, the same content "
        "(sha256 0000000000000000…, decompressed)"), msg


def test_runs_written_before_the_digest_keep_the_path_check_alone():
    old = [{**_manifest([["/logs/a.jsonl", 10, 1.0]]), "audit_runs": ["r1"]},
           {**_manifest([["/logs/copy.jsonl", 10, 2.0]]), "audit_runs": ["r2"]}]
    assert rollup.check_no_overlap(["/runs/A", "/runs/B"], old) == ["r1", "r2"]
    new_and_old = [{**_manifest([["/logs/a.jsonl", 10, 1.0, "0" * 64]]), "audit_runs": ["r1"]},
                   {**_manifest([["/logs/a.jsonl", 10, 1.0]]), "audit_runs": ["r2"]}]
    with pytest.raises(ValueError, match="both read /logs/a.jsonl"):  # the same file by path, digest or not
        rollup.check_no_overlap(["/runs/A", "/runs/B"], new_and_old)
    one_run_two_names = [{**_manifest([["/logs/a", 10, 1.0, "1" * 64], ["/logs/b", 10, 1.0, "1" * 64]]),
                          "audit_runs": ["r1"]}]
    assert rollup.check_no_overlap(["/runs/A"], one_run_two_names) == ["r1"]  # one audit reads what it reads


@pytest.mark.slow
def test_a_rollup_of_a_log_and_its_copy_is_a_one_line_usage_error(tmp_path, capsys):
    log = tmp_path / "logs" / "night.jsonl"
    log.parent.mkdir()
    log.write_text("".join(EXAMPLES.read_text(encoding="utf-8").splitlines(keepends=True)[:40]), encoding="utf-8")
    copy = tmp_path / "logs" / "night-copy.jsonl"
    shutil.copy2(log, copy)  # cp -p: same bytes, same time, another name
    helpers.rollup_of_both_is_refused(tmp_path, capsys, COMMON, log, copy)
    files = json.loads((tmp_path / "B" / "stats" / "run_ids.json").read_text(encoding="utf-8"))["input_files"]
    assert files == [[str(copy), copy.stat().st_size, os.path.getmtime(copy), file_digest(str(copy))[1],
                      rollup.input_digests(str(copy))[1]]]  # sealed


def test_a_log_and_its_compressed_copies_share_one_digest(tmp_path):
    """The same records stored plain, gzipped at two levels (another header time too) and as xz
    are one content; a truncated gzip is hashed as stored, apart from the whole one."""
    import gzip
    import lzma

    data = "".join(EXAMPLES.read_text(encoding="utf-8").splitlines(keepends=True)[:40]).encode("utf-8")
    plain = tmp_path / "night.jsonl"
    plain.write_bytes(data)
    copies = {"fast.jsonl.gz": gzip.compress(data, 1, mtime=1), "best.jsonl.gz": gzip.compress(data, 9, mtime=2),
              "night.jsonl.xz": lzma.compress(data)}
    for name, blob in copies.items():
        (tmp_path / name).write_bytes(blob)
    digests = {rollup.content_digest(str(tmp_path / n)) for n in ["night.jsonl", *copies]}
    assert digests == {file_digest(str(plain))[1]}
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(copies["best.jsonl.gz"][:-20])
    assert rollup.content_digest(str(cut)) == file_digest(str(cut))[1] not in digests


def test_a_rollup_of_a_log_and_its_recompressed_copy_is_refused(tmp_path, capsys):
    import gzip

    log = tmp_path / "logs" / "night.jsonl"
    log.parent.mkdir()
    log.write_text("".join(EXAMPLES.read_text(encoding="utf-8").splitlines(keepends=True)[:40]), encoding="utf-8")
    packed = tmp_path / "logs" / "night-archive.jsonl.gz"
    packed.write_bytes(gzip.compress(log.read_bytes(), 6, mtime=0))
    helpers.rollup_of_both_is_refused(tmp_path, capsys, COMMON, log, packed)
