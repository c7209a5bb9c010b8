"""A run stopped by its machine's storage — no space left, a quota, a read-only file system — ends
in one line naming the cause and exit 1, nothing published (trial 28: a full disk ended in an
``ENOSPC`` traceback through Beam's ``RuntimeError: OSError: [Errno 28] … [while running
'WriteParquet/…']``). Any other failure keeps its traceback."""
from __future__ import annotations

import errno

import pytest

from fair_forge_beam.console import environment_failure
from pipelines import audit

BEAM_WRAPPED = RuntimeError("OSError: [Errno 28] No space left on device [while running 'WriteParquet/Write/WriteImpl/WriteBundles']")


def test_the_storage_failure_is_found_in_beams_text_and_in_causes():
    assert environment_failure(BEAM_WRAPPED) == "No space left on device (in the pipeline's step WriteParquet/Write/WriteImpl/WriteBundles)"
    try:
        try:
            raise OSError(errno.EROFS, "Read-only file system", "/data/out/x.parquet")
        except OSError as inner:
            raise ValueError("writing failed") from inner
    except ValueError as outer:
        assert environment_failure(outer) == "Read-only file system (/data/out/x.parquet)"
    assert environment_failure(OSError(errno.EDQUOT, "Disk quota exceeded")) == "Disk quota exceeded"
    for other in (ValueError("bad"), OSError(errno.ENOENT, "No such file"), RuntimeError("[Errno 2] missing"), KeyError(28)):
        assert environment_failure(other) is None


@pytest.mark.parametrize("command", [[], ["rollup", "--from", "x", "--output", "y"]])
def test_the_console_script_says_it_in_one_line_and_exits_1(monkeypatch, capsys, command):
    import importlib

    def full(*_a, **_k):
        raise BEAM_WRAPPED

    monkeypatch.setattr(audit, "_audit_main", full)
    monkeypatch.setattr(importlib.import_module("pipelines.rollup"), "main", full)
    assert audit.main(command) == 1
    err = capsys.readouterr().err.strip().splitlines()
    # a named command names itself (0a6ebed): "fair-forge-beam rollup: error: ..."
    prog = "fair-forge-beam" + (f" {command[0]}" if command else "")
    assert len(err) == 1 and err[0].startswith(f"{prog}: error: the {command[0] if command else 'audit'} stopped: "
                                               "No space left on device"), err


def test_other_failures_keep_their_traceback(monkeypatch):
    def broken(*_a, **_k):
        raise RuntimeError("a bug [while running 'Score']")

    monkeypatch.setattr(audit, "_audit_main", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        audit.main([])
