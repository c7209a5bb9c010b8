"""A stage is ours only when it carries the mark a run writes when it makes it (trial48c D): a folder or file
the user named ``OUT.staging-…`` or ``OUT/.staging-…`` is never removed, renamed, published or locked, and
never crashes a run (``fair_forge_beam.reports.output_folder``, ``STAGE_OWNER_MARK``)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fair_forge_beam.reports.output_folder import STAGE_OWNER_MARK, clean_stale_stages, staged_output


def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _a_run(out: Path, text: str = "new") -> None:
    with staged_output(str(out)) as stage:
        (Path(stage) / "results.json").write_text(text)


def test_the_users_folders_named_like_stages_are_kept(tmp_path):
    """(1) ``mine.staging-notes/`` beside and ``mine/.staging-notes/`` inside: both were deleted without a word."""
    out = tmp_path / "mine"
    (tmp_path / "mine.staging-notes").mkdir()
    (tmp_path / "mine.staging-notes" / "n.txt").write_text("x")
    (out / ".staging-notes").mkdir(parents=True)
    (out / ".staging-notes" / "n.txt").write_text("y")
    (tmp_path / "mine.staging-20260101T000000Z-0badc0de").mkdir()  # an id's shape, no mark: not ours either
    (tmp_path / "mine.staging-20260101T000000Z-0badc0de" / "n.txt").write_text("z")
    (tmp_path / "mine.staging-notes.lock").write_text("my lock notes")  # a user's file a lock's name: kept
    _a_run(out)
    _a_run(out, "again")
    assert (out / "results.json").read_text() == "again"
    assert (tmp_path / "mine.staging-notes" / "n.txt").read_text() == "x"
    assert (out / ".staging-notes" / "n.txt").read_text() == "y"
    assert (tmp_path / "mine.staging-20260101T000000Z-0badc0de" / "n.txt").read_text() == "z"
    assert (tmp_path / "mine.staging-notes.lock").read_text() == "my lock notes"
    assert not (out / STAGE_OWNER_MARK).exists()  # the mark is never published


def test_the_users_files_named_like_stages_do_not_crash_a_run(tmp_path):
    """(2) a file ``m3.staging-notes.txt`` beside, or ``m3/.staging-file`` inside: every later run failed with a
    traceback (NotADirectoryError in _settle -> _remove_tree)."""
    out = tmp_path / "m3"
    (tmp_path / "m3.staging-notes.txt").write_text("beside")
    out.mkdir()
    (out / ".staging-file").write_text("inside")
    _a_run(out)
    assert clean_stale_stages(str(out)) == []
    _a_run(out, "again")
    assert (out / "results.json").read_text() == "again"
    assert (tmp_path / "m3.staging-notes.txt").read_text() == "beside"
    assert (out / ".staging-file").read_text() == "inside"


def test_a_users_backup_named_like_a_stage_is_never_published(tmp_path):
    """(3) ``cp -a o11 o11.staging-backup; rm -rf o11``, then a failed run: it said "o11 is left as it was", but
    the backup had been moved into place as o11."""
    out = tmp_path / "o11"
    _a_run(out, "the good run")
    backup = tmp_path / "o11.staging-backup"
    out.rename(backup)  # as cp -a then rm -rf
    before = _tree(backup)
    with pytest.raises(RuntimeError):
        with staged_output(str(out)):
            raise RuntimeError("the run failed")
    assert not out.exists() and _tree(backup) == before


def test_a_stage_of_ours_is_still_cleaned_and_completed(tmp_path):
    """The mark is what makes a stage ours: a killed run's marked stage goes, a complete one is published."""
    out = tmp_path / "out"
    _a_run(out, "old")
    from fair_forge_beam.reports import output_folder

    killed = tmp_path / "out.staging-20260101T000000Z-0badc0de"
    killed.mkdir()
    output_folder.mark_stage(str(killed))
    (killed / "results.json").write_text("partial")
    assert json.loads((killed / STAGE_OWNER_MARK).read_text()) == {"stage": "20260101T000000Z-0badc0de"}
    assert clean_stale_stages(str(out)) == [str(killed)] and not killed.exists()
    assert (out / "results.json").read_text() == "old"
