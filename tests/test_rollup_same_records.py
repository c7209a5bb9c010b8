"""Issue 28 H14: a roll-up of two audits of the same data, the second's lines and sessions shuffled
and its files named otherwise (a .json array re-indented too), exited 0 with every session counted
twice (n 4,032 for 2,016): the content sha256 of the decoded bytes differs for a reordered copy.
Each audit now records, beside the content digest, an order-independent digest of each input
file's records (input_files' 5th field: the sum mod 2**256 of the sha256 of each record's
canonical JSON), and the roll-up compares it as it compares the content digest."""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from fair_forge_beam import rollup
from pipelines import audit
import helpers

EXAMPLES = Path(audit.default_inputs()[1])
COMMON = ["--quiet", "--no-report", "--metrics", "humanity", "--mode", "frequentist"]


def _lines(n=40):
    return EXAMPLES.read_text(encoding="utf-8").splitlines()[:n]


def _variants(tmp_path: Path) -> dict:
    """The same records in several orders and layouts."""
    lines = _lines()
    recs = [json.loads(x) for x in lines]
    shuffled = list(lines)
    random.Random(3).shuffle(shuffled)
    out = {"night.jsonl": "\n".join(lines) + "\n",
           "shuffled.jsonl": "\n".join(shuffled) + "\n",
           "crlf_bom_blank.jsonl": "\ufeff" + "\r\n\r\n".join(reversed(lines)) + "\r\n",
           "respaced.jsonl": "".join(json.dumps(json.loads(x), indent=None, separators=(" ,", " : ")) + "\n"
                                     for x in shuffled),
           "array.json": json.dumps(list(reversed(recs)), indent=2),
           "keys_reordered.json": json.dumps([dict(reversed(list(r.items()))) for r in recs], ensure_ascii=True)}
    for name, text in out.items():
        (tmp_path / name).write_text(text, encoding="utf-8", newline="")
    (tmp_path / "packed.json.gz").write_bytes(gzip.compress(out["array.json"].encode("utf-8"), mtime=0))
    (tmp_path / "utf16.jsonl").write_bytes(out["shuffled.jsonl"].encode("utf-16"))
    return {name: tmp_path / name for name in [*out, "packed.json.gz", "utf16.jsonl"]}


def test_the_same_records_in_any_order_or_layout_share_one_records_digest(tmp_path):
    files = _variants(tmp_path)
    got = {name: rollup.input_digests(str(p)) for name, p in files.items()}
    records = {r for _, r in got.values()}
    assert len(records) == 1 and next(iter(records)).startswith("records:"), got
    for name, p in files.items():  # the content digest is the one content_digest gives, from the same pass
        assert got[name][0] == rollup.content_digest(str(p)), name
    assert len({c for c, _ in got.values()}) == len(files) - 1  # packed.json.gz decodes to array.json's bytes


@pytest.mark.parametrize("change", ["drop", "duplicate", "edit"])
def test_other_records_have_another_records_digest(tmp_path, change):
    lines = _lines()
    other = {"drop": lines[1:], "duplicate": lines + lines[:1],
             "edit": [lines[0].replace('"assistant_id"', '"assistant_id_x"', 1), *lines[1:]]}[change]
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "b.jsonl").write_text("\n".join(other) + "\n", encoding="utf-8")
    assert rollup.input_digests(str(tmp_path / "a.jsonl"))[1] != rollup.input_digests(str(tmp_path / "b.jsonl"))[1]


def test_files_of_no_record_or_not_counted_have_no_records_digest(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "blank.jsonl").write_text("\n\n", encoding="utf-8")
    (tmp_path / "empty.json").write_text("[]", encoding="utf-8")
    pq.write_table(pa.table({"session_id": ["s"]}), tmp_path / "t.parquet")
    for name in ("blank.jsonl", "empty.json", "t.parquet"):
        content, records = rollup.input_digests(str(tmp_path / name))
        assert content == rollup.content_digest(str(tmp_path / name)) and records is None, name
    fp = rollup.input_fingerprints([str(tmp_path / "t.parquet"), str(tmp_path / "blank.jsonl")])
    assert [len(f) for f in fp] == [4, 4]


def _manifest(files, run_id, interactions_read=10):
    return {"run_id": run_id, "audit_runs": [run_id], "input_files": files,
            "counts": {"interactions_read": interactions_read, "dead_letters": []}}


R = "records:" + "ab" * 32


def test_runs_whose_files_share_a_records_digest_are_refused_naming_both():
    ms = [_manifest([["/logs/a.jsonl", 10, 1.0, "1" * 64, R]], "r1"),
          _manifest([["/logs/b.json", 12, 2.0, "2" * 64, R]], "r2")]
    with pytest.raises(ValueError) as exc:
        rollup.check_no_overlap(["/runs/A", "/runs/B"], ms)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("the runs overlap: /runs/A read /logs/a.jsonl and /runs/B read "
                                              "/logs/b.json, the same records in another order or layout"), msg
    # runs written before the records digest (four fields) are compared as before
    old = [_manifest([["/logs/a.jsonl", 10, 1.0, "1" * 64]], "r1"), _manifest([["/logs/b.json", 12, 2.0, "2" * 64]], "r2")]
    assert rollup.check_no_overlap(["/runs/A", "/runs/B"], old) == ["r1", "r2"]
    # a run that read nothing is not compared (an empty day published with --allow-empty)
    empty = [_manifest([["/logs/a.json", 2, 1.0, "1" * 64, R]], "r1", 0), _manifest([["/logs/b.json", 2, 2.0, "2" * 64, R]], "r2", 0)]
    assert rollup.check_no_overlap(["/runs/A", "/runs/B"], empty) == ["r1", "r2"]


def test_the_same_records_split_into_files_otherwise_are_refused():
    one, two = (1 << 200) + 5, (1 << 255) + 7
    both = (one + two) % (1 << 256)
    ms = [_manifest([["/logs/a.jsonl", 10, 1.0, "1" * 64, f"records:{one:064x}"],
                     ["/logs/b.jsonl", 10, 1.0, "2" * 64, f"records:{two:064x}"]], "r1"),
          _manifest([["/logs/all.jsonl", 20, 2.0, "3" * 64, f"records:{both:064x}"]], "r2")]
    with pytest.raises(ValueError, match="read the same records, split into files in another way"):
        rollup.check_no_overlap(["/runs/A", "/runs/B"], ms)
    ms[1]["input_files"][0][4] = f"records:{(both + 1):064x}"
    assert rollup.check_no_overlap(["/runs/A", "/runs/B"], ms) == ["r1", "r2"]


def test_a_rollup_of_a_log_and_its_shuffled_reformatted_copy_is_refused(tmp_path, capsys):
    files = _variants(tmp_path)
    helpers.rollup_of_both_is_refused(tmp_path, capsys, COMMON, files["night.jsonl"], files["array.json"],
                                      says="the same records in another order or layout")
    sealed = json.loads((tmp_path / "B" / "stats" / "run_ids.json").read_text(encoding="utf-8"))["input_files"]
    assert len(sealed) == 1 and sealed[0][4] == rollup.input_digests(str(files["night.jsonl"]))[1], sealed
