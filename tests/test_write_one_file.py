"""write_one_file: one text → exactly one file, written by one step (issue 26: README's job at most 5 CPU s)."""
from __future__ import annotations

from apache_beam.testing.util import assert_that, equal_to

from fair_forge_beam._beam import beam
from fair_forge_beam.beam_pipeline import pipeline_options, run_pipeline
from fair_forge_beam.io.write import write_one_file


def _leaves(pipeline, label: str) -> list[str]:
    out = []

    def walk(node):
        if not node.parts and node.full_label.startswith(label):
            out.append(node.full_label)
        for part in node.parts:
            walk(part)

    walk(pipeline._root_transform())
    return out


def test_the_file_holds_the_text_exactly_and_its_name_is_returned(tmp_path):
    text = '{\n  "name": "bøt-✓"\n}'  # no newline added, UTF-8
    path = str(tmp_path / "sub" / "results.json")
    with run_pipeline(pipeline_options()) as p:
        names = write_one_file(p | beam.Create([text]), path, "WriteOne")
        assert_that(names, equal_to([path]))
    assert (tmp_path / "sub" / "results.json").read_bytes() == text.encode("utf-8")
    assert sorted(f.name for f in (tmp_path / "sub").iterdir()) == ["results.json"]  # no temp folder left


def test_one_step_not_a_sharded_sink(tmp_path):
    """A one-shard WriteToText expanded to 11 transforms (about 4 stages: DoOnce, GroupByKey,
    finalize), three times in README's job."""
    p = beam.Pipeline(options=pipeline_options())
    write_one_file(p | beam.Create(["x"]), str(tmp_path / "a.json"), "WriteOne")
    assert _leaves(p, "WriteOne") == ["WriteOne"]


def test_whole_files_are_never_written_in_place(tmp_path, monkeypatch):
    """A step's whole file (results.json, the manifest, generate's and run_assistant's files) is written
    under a unique partial name and renamed: two attempts at one bundle cannot interleave their bytes,
    and a second attempt replaces the first whole."""
    from apache_beam.io.filesystems import FileSystems

    from fair_forge_beam.io.write import OutputFiles, _write_whole_file

    created = []
    real_create = FileSystems.create
    monkeypatch.setattr(FileSystems, "create",
                        staticmethod(lambda path, *a, **k: (created.append(path), real_create(path, *a, **k))[1]))
    target = str(tmp_path / "results.json")
    _write_whole_file("first attempt, longer", target)
    _write_whole_file("second", target)
    OutputFiles(str(tmp_path)).put("sorted.jsonl", b"{}\n")
    assert len(set(created)) == 3 and not {target, str(tmp_path / "sorted.jsonl")} & set(created)
    assert (tmp_path / "results.json").read_text() == "second"
    assert sorted(f.name for f in tmp_path.iterdir()) == ["results.json", "sorted.jsonl"]  # no partial left
