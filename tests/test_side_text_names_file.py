"""A side file that is not UTF-8 text is named in its error (issue 28, trial 28h H12): generate over
a corpus folder holding one such file said "error: not UTF-8 text (invalid start byte at byte 0)",
no file named. The shared reader, io.edge.read_side_text, raises SideFileNotText ("<what>: cannot
read <path>: not UTF-8 text (…)"), which plain_reason and side_file_error give as it is."""
from __future__ import annotations

import pytest

from fair_forge_beam.io.edge import read_side_text
from fair_forge_beam.plain import plain_reason, side_file_error

BAD = b"\xff\xfe# B\n"


def test_the_shared_reader_names_the_file(tmp_path):
    bad = tmp_path / "b.md"
    bad.write_bytes(BAD)
    with pytest.raises(UnicodeDecodeError) as exc:  # still a UnicodeDecodeError for every caller catching that
        read_side_text(bad, "generator source file")
    said = f"generator source file: cannot read {bad}: not UTF-8 text (invalid start byte at byte 0)"
    assert plain_reason(exc.value) == said
    assert side_file_error("generator source file", bad, exc.value) == said  # named once


def _generate(tmp_path, capsys, *extra):
    from pipelines import generate

    with pytest.raises(SystemExit) as exc:
        generate.main([*extra, "--num-queries", "1", "--generator-base-url", "http://127.0.0.1:9/v1",
                       "--generator-model", "m", "--output", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1, err
    assert not (tmp_path / "o").exists()
    return err[0]


def test_generate_names_the_corpus_file_that_is_not_text(tmp_path, capsys):
    corpus = tmp_path / "corp_mix"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\nSome text about things.\n", encoding="utf-8")
    (corpus / "b.md").write_bytes(BAD)
    err = _generate(tmp_path, capsys, "--corpus", str(corpus))
    assert f"generator source file: cannot read {corpus / 'b.md'}: not UTF-8 text (invalid start byte at byte 0)" in err, err


def test_generate_names_the_system_prompt_file_that_is_not_text(tmp_path, capsys):
    corpus = tmp_path / "c.md"
    corpus.write_text("# A\n\nSome text about things.\n", encoding="utf-8")
    prompt = tmp_path / "prompt.txt"
    prompt.write_bytes(BAD)
    err = _generate(tmp_path, capsys, "--corpus", str(corpus), "--system-prompt-file", str(prompt))
    assert f"--system-prompt-file: cannot read {prompt}: not UTF-8 text (invalid start byte at byte 0)" in err, err
