"""fix51a: every record a shipped retriever cannot use is a dead letter (plain reason, the record as
``raw``, its file and position as ``source``), never a silent skip; a compressed file cut short keeps
its complete records, as the audit's reader does."""
import gzip
import json

import pytest


def _pair(i: int) -> dict:
    return {"chosen": f"\n\nHuman: hi {i}\n\nAssistant: hello there friend {i}",
            "rejected": f"\n\nHuman: hi {i}\n\nAssistant: go {i}"}


def test_hh_rlhf_refused_records_are_dead_letters_with_plain_reasons_and_file_offsets(tmp_path):
    """trial50 B1: 5 records skipped, ``len(m.dead_letter) == 0``, two reasons Python error text."""
    from fair_forge_beam.io.hh_rlhf import HHRLHFPairs
    from fair_forge_beam.metrics.humanity import Humanity

    bad = [b'{"chosen": 5, "rejected": "x"}', b"[1]", b"null",
           json.dumps({"chosen": "Assistant first\n\nHuman: x", "rejected": "\n\nHuman: x\n\nAssistant: y"}).encode(),
           b"\xff\xfe"]
    lines = [json.dumps(_pair(i)).encode() for i in range(3)] + bad
    path = tmp_path / "hh.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    offsets = [sum(len(x) + 1 for x in lines[:k]) for k in range(3, 8)]
    m = Humanity.run(HHRLHFPairs, path=str(path))
    dead = sorted(m.dead_letter, key=lambda d: int(d["source"].rsplit(":", 1)[1]))
    assert [d["source"] for d in dead] == [f"{path}:{o}" for o in offsets], dead
    reasons = [d["reason"] for d in dead]
    assert reasons[:3] == ["the 'chosen' transcript is a number, not text", "record is a list, not an object",
                           "record is null, not an object"], reasons
    assert "text before the first 'Human:' turn ('Assistant first')" in reasons[3], reasons
    assert reasons[4].startswith("line is not valid UTF-8"), reasons
    for r in reasons:
        assert "subscriptable" not in r and "indices" not in r and "Error" not in r, r
    assert [d["raw"].strip() for d in dead[:3]] == ['{"chosen": 5, "rejected": "x"}', "[1]", "null"]


def test_hh_rlhf_cut_gzip_keeps_the_records_before_the_cut_and_one_dead_letter(tmp_path):
    """trial50 B1: a cut ``.jsonl.gz`` made ``Humanity.run`` raise ``CompressedDataCut``, no record read."""
    from fair_forge_beam.io.hh_rlhf import HHRLHFPairs
    from fair_forge_beam.io.read import ReadError

    rows = "".join(json.dumps(_pair(i)) + "\n" for i in range(2000)).encode()
    blob = gzip.compress(rows)
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(blob[: len(blob) // 2])
    got = HHRLHFPairs(path=str(path)).load_dataset()
    errors = [g for g in got if isinstance(g, ReadError)]
    sessions = [g for g in got if not isinstance(g, ReadError)]
    assert len(errors) == 1 and got[-1] is errors[0], errors
    n = len(sessions) // 2
    assert 0 < n < 2000 and {s["session_id"] for s in sessions} == {f"hh-{i:05d}" for i in range(n)}
    assert f"it is cut short: {n:,} lines read before the cut" in errors[0].reason, errors[0].reason
    assert errors[0].at == (str(path), sum(len(x) + 1 for x in rows.split(b"\n")[:n])), errors[0].at
