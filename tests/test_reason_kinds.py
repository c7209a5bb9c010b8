"""Dead-letter reasons are grouped into kinds for the summary (``results.json``
``dead_letter_reasons`` / ``rejected_at_read_reasons``): reasons that differ only in positions,
counts or byte values share a kind, and the kind still reads as the reason (a fresh user saw
"UTF-N" and paths with their digits replaced)."""
from fair_forge_beam.reports.results import _reason_kind


def test_positions_and_bytes_group_together():
    a = "line is not valid UTF-8: 'utf-8' codec can't decode byte 0x9c in position 3: invalid start byte"
    b = "line is not valid UTF-8: 'utf-8' codec can't decode byte 0xff in position 41: invalid start byte"
    assert _reason_kind(a) == _reason_kind(b) == (
        "line is not valid UTF-8: 'utf-8' codec can't decode byte 0xNN in position N: invalid start byte")
    assert _reason_kind("invalid JSON: Expecting value: line 1 column 5 (char 4)") == \
        _reason_kind("invalid JSON: Expecting value: line 3 column 12 (char 30)")


def test_digits_inside_names_stay():
    kind = _reason_kind("/data/run2/part-00001.jsonl.gz: records after this point are missing (line 17)")
    assert kind == "/data/run2/part-00001.jsonl.gz: records after this point are missing (line N)"
    assert _reason_kind("no emotion lexicon for language 'e5'") == "no emotion lexicon for language 'e5'"


def test_long_reasons_are_cut():
    assert len(_reason_kind("x" * 500)) == 160
