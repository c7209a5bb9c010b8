"""Issue 28 leftovers, item 5: every reader of a user's file holds a bounded amount of it.

``io/hh_rlhf.py`` iterated a file's lines whole (a 3 GB line was held whole, and only ``.gz`` was
decompressed): it now reads through ``io.read.bounded_lines`` over ``io.edge.open_input`` with the
record limit. The files read whole — an emotion lexicon, a ``--config`` file, a regulatory or
generator corpus document, a ``--privacy-domain`` file, a seed prompt, the explain job's input — were
read without any bound (``open().read()``): each now goes through ``io.edge.read_side_file``, which
refuses a file over ``MAX_SIDE_FILE_BYTES`` with one line naming the option, the file and the limit."""
from __future__ import annotations

import json
import tracemalloc

import pytest

MB = 2**20


def _pair(i: int) -> bytes:
    return json.dumps({"chosen": f"\n\nHuman: hi {i}\n\nAssistant: hello", "rejected": f"\n\nHuman: hi {i}\n\nAssistant: go"}).encode() + b"\n"


def test_hh_rlhf_reads_lines_bounded_in_any_compression(tmp_path):
    import zstandard

    from fair_forge_beam.io.hh_rlhf import hh_rlhf_sessions

    def write(n_mib: int):
        path = tmp_path / f"pairs{n_mib}.jsonl.zst"
        comp = zstandard.ZstdCompressor().compressobj()
        with open(path, "wb") as f:
            f.write(comp.compress(_pair(0) + b'{"chosen": "'))
            for _ in range(n_mib):
                f.write(comp.compress(b"a" * MB))
            f.write(comp.compress(b'", "rejected": "x"}\n' + _pair(2)))
            f.write(comp.flush())
        return path

    peaks = {}
    for n in (2, 48):
        path = write(n)
        skipped: list = []
        tracemalloc.start()
        try:
            sessions = hh_rlhf_sessions(str(path), skipped=skipped, max_record_bytes=MB)
            peaks[n] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert sorted({s["session_id"] for s in sessions}) == ["hh-00000", "hh-00002"]
        assert [i for i, _ in skipped] == [1] and "over the limit of 1,048,576 bytes" in skipped[0][1], skipped
    assert peaks[48] - peaks[2] < 8 * MB, f"a 48 MiB line held {(peaks[48] - peaks[2]) / MB:.0f} MiB more than a 2 MiB one"


def _readers(tmp_path):
    """``(name, file, read)`` of every reader of a user's file read whole, each ``read()`` given a
    file of 2,000 bytes of valid content."""
    from fair_forge_beam.audit_config import load_config
    from fair_forge_beam.components.corpus import LocalCorpusConnector
    from fair_forge_beam.components.emotion_lexicon import NRCCsvLexicon
    from fair_forge_beam.generators.loader import LocalMarkdownLoader
    from fair_forge_beam.metrics import registry

    def file(name: str, head: str, fill: str, tail: str = "") -> str:
        path = tmp_path / name
        path.write_text(head + fill * ((2000 - len(head) - len(tail)) // len(fill)) + tail, encoding="utf-8")
        return str(path)

    lexicon = file("lex.csv", "English;anger;joy\n", "word;0;1\n")
    config = file("audit.toml", "seed = 7\n", "# padding\n")
    corpus = file("policy.md", "# Policy\n", "Text of the policy. ")
    markdown = file("source.md", "# Source\n", "Text of the source. ")
    domain = file("domain.json", '{"x": "', "a", '"}')
    prompt = file("prompt.txt", "", "Answer the question. ")
    return [
        ("--emotion-lexicon-csv", lexicon, lambda: NRCCsvLexicon(lexicon).load()),
        ("--config", config, lambda: load_config(config)),
        ("regulatory corpus file", corpus, lambda: LocalCorpusConnector(corpus).load_documents()),
        ("generator source file", markdown, lambda: LocalMarkdownLoader().load(markdown)),
        ("--privacy-domain", domain, lambda: registry._privacy(None, {"privacy_domain": domain})),
        ("--seed-prompt-file", prompt, lambda: registry._prompt_evaluator(None, {"seed_prompt_file": prompt})),
    ]


def test_every_user_file_read_whole_is_refused_over_its_limit(tmp_path, monkeypatch):
    from fair_forge_beam.io import edge

    readers = _readers(tmp_path)
    monkeypatch.setattr(edge, "MAX_SIDE_FILE_BYTES", 1000)
    for what, path, read in readers:
        with pytest.raises(ValueError) as exc:
            read()
        message = str(exc.value)
        assert f"{what}: {path} is larger than 1,000 bytes" in message and "\n" not in message, (what, message)


def test_a_user_file_under_the_limit_reads_as_before(tmp_path):
    """The same files under the default limit are read (the privacy domain and the seed prompt's
    evaluator then check what these files and options do not give: a domain's fields, a generator
    endpoint — other errors, not the size)."""
    for what, _, read in _readers(tmp_path):
        try:
            read()
        except ValueError as exc:
            assert what in ("--privacy-domain", "--seed-prompt-file") and "larger than" not in str(exc), (what, exc)


@pytest.mark.parametrize("command", ["trend", "baseline", "rollup"])
def test_a_runs_damaged_or_oversized_json_is_one_line_naming_the_file(tmp_path, monkeypatch, command):
    """A run folder's ``results.json`` / ``run_info.json`` / manifest a user points at (trend, a
    ``--baseline``, a roll-up's ``--from``) is read bounded and, when damaged, refused in one line that
    names the file (it said only ``Expecting value: line 2 column 1 (char 6)``)."""
    from fair_forge_beam.io import edge
    from fair_forge_beam.reports.load import read_baseline, read_results
    from fair_forge_beam.rollup import _read_json

    run = tmp_path / "run"
    run.mkdir()
    target = run / ("stats_manifest.json" if command == "rollup" else "results.json")
    target.write_text('{"metrics":\n\n', encoding="utf-8")
    read = {"trend": lambda: read_results(str(run)), "baseline": lambda: read_baseline(str(run)),
            "rollup": lambda: _read_json(str(target))}[command]
    with pytest.raises(ValueError) as err:
        read()
    assert str(target) in str(err.value) and "\n" not in str(err.value)
    target.write_text(json.dumps({"metrics": {}, "pad": "x" * 2000}), encoding="utf-8")
    read()  # whole and valid: read
    monkeypatch.setattr(edge, "MAX_SIDE_FILE_BYTES", 1000)
    with pytest.raises(ValueError, match="larger than 1,000 bytes"):
        read()
