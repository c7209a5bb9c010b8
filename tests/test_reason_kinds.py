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


def test_a_number_with_thousands_separators_is_one_number():
    """Hostile-tester trial: 'record of 3,145,778 bytes is over the limit of 1,048,576 bytes' was
    grouped as 'record of N,N,N bytes ...'."""
    assert _reason_kind("record of 3,145,778 bytes is over the limit of 1,048,576 bytes") == \
        _reason_kind("record of 70,001 bytes is over the limit of 1,048,576 bytes") == \
        "record of N bytes is over the limit of 1,048,576 bytes"
    assert _reason_kind("fields a,b and 1,2 differ") == "fields a,b and N,N differ"  # a list stays a list


def test_long_reasons_are_cut():
    assert len(_reason_kind("x" * 500)) == 160


def test_a_long_reason_keeps_its_cause():
    """Trial 28: the console's dead-letter summary cut each reason near its start, so the cause said
    at its end was lost; a long kind keeps its start and its end."""
    reason = "judge call failed: HTTP 500: " + "<html>" * 60 + " upstream error: model overloaded, retry later"
    kind = _reason_kind(reason)
    assert len(kind) <= 160 and kind.startswith("judge call failed: HTTP 500: <html>")
    assert kind.endswith("upstream error: model overloaded, retry later") and " … " in kind


def test_status_codes_stay_and_a_long_reason_is_cut_between_words():
    """Trial 28 (second trial): the empty-run line said 'HTTP N' (429 and 500 are different causes),
    and the middle cut dropped 'incor' of 'incorrect header check'."""
    assert _reason_kind("judge call failed: HTTP 429: rate limited after 3 attempt(s)") == \
        "judge call failed: HTTP 429: rate limited after N attempt(s)"
    assert _reason_kind("OSError: [Errno 28] No space left on device") == "OSError: [Errno 28] No space left on device"
    reason = ("cannot read compressed file raw.jsonl.deflate: " + "the data is damaged beyond repair, " * 4
              + "zlib says: incorrect header check; records after this point are missing")
    kind = _reason_kind(reason)
    assert len(kind) <= 160 and " … " in kind
    head, tail = kind.split(" … ")
    assert reason.startswith(head) and reason.endswith(tail)
    words = set(reason.split())
    assert head.split()[-1] in words and tail.split()[0] in words, kind  # whole words at both cuts


def test_a_limit_keeps_its_number():
    """Trial 28c: results.json grouped 'over the limit of N bytes (--max-record-bytes)': the limit,
    the run's and not the record's, was lost. Numbers after 'limit of', 'limited to', 'at most',
    'more than' and an option name stay; the record's own (sizes, positions, counts) are grouped."""
    a = "record of 3,145,778 bytes is over the limit of 67,108,864 bytes (--max-record-bytes); not read"
    b = "record of 70,001,000 bytes is over the limit of 67,108,864 bytes (--max-record-bytes); not read"
    assert _reason_kind(a) == _reason_kind(b) == \
        "record of N bytes is over the limit of 67,108,864 bytes (--max-record-bytes); not read"
    assert _reason_kind("nested more than 64 levels deep (at a.b); records are limited to 64 levels") == \
        "nested more than 64 levels deep (at a.b); records are limited to 64 levels"
    assert _reason_kind("the record holds 10,004 JSON values, over the limit of 4,096 for a record "
                        "(--max-record-bytes 65,536 / 16 bytes a value)") == \
        "the record holds N JSON values, over the limit of 4,096 for a record (--max-record-bytes 65,536 / 16 bytes a value)"
    assert _reason_kind("5 of 7 interactions rejected: conversation[1]: x; and 2 more") == \
        "N of N interactions rejected: conversation[N]: x; and N more"


def test_a_code_point_stays():
    assert _reason_kind("invalid JSON: a U+0000 (NUL) character where the parser stopped (Expecting value: line 1 "
                        "column 7 (char 6))") == ("invalid JSON: a U+0000 (NUL) character where the parser stopped "
                                                  "(Expecting value: line N column N (char N))")


def test_a_host_and_port_and_a_schema_limit_stay():
    """Trial 28 (B13/B14): a redirect target was grouped as 'to N.0.2:N', a judge score over its
    schema's limit as 'less than or equal to N'."""
    assert _reason_kind("judge: HTTP 307 redirect (to 127.0.0.2:8080) not followed") == \
        "judge: HTTP 307 redirect (to 127.0.0.2:8080) not followed"
    assert _reason_kind("score: Input should be less than or equal to 1") == "score: Input should be less than or equal to 1"
    assert _reason_kind("line 7: bad; at byte 12. then 0.5") == "line N: bad; at byte N. then N"


# ---------------------------------------------------------------- what a user reads (fresh13)
_JUDGE = ["judge: invalid answer after 3 attempt(s): score: Field required",
          "judge: invalid answer after 3 attempt(s): score: Field required",
          "judge: prompt of 1,234 characters is over the limit of 50 characters (--judge-max-prompt-chars); not sent",
          "judge: prompt of 987 characters is over the limit of 50 characters (--judge-max-prompt-chars); not sent"]
_READ = ["line is not valid UTF-8: 'utf-8' codec can't decode byte 0x9c in position 3: invalid start byte",
         "line is not valid UTF-8: 'utf-8' codec can't decode byte 0xff in position 41: invalid start byte"]


def _no_placeholder(texts):
    import re

    for t in texts:
        assert not re.search(r"\bN\b|UTF-N|0xNN", t), t


def test_grouped_reasons_are_shown_by_a_real_reason_with_the_count():
    """Fresh-user trial (fresh13): the judge failure summary read 'invalid answer after N
    attempt(s)' and 'prompt of N characters': a class with its digits replaced reads as a broken
    template. A group is shown by one real reason of it (the smallest), 'e.g. ' first when its
    reasons differ, with the group's count: in results.json, the stored counts, the report's
    table and a loop stage's summary."""
    from fair_forge_beam.io.session_stats import _CountsCombineFn
    from fair_forge_beam.reasons import group_reasons
    from fair_forge_beam.reports.results import ResultsDocFn

    assert group_reasons(_JUDGE) == {
        "judge: invalid answer after 3 attempt(s): score: Field required": 2,
        "e.g. judge: prompt of 1,234 characters is over the limit of 50 characters (--judge-max-prompt-chars); not sent": 2}
    els = [("read", None, 10)] + [("dead", ("context", r), 1) for r in _JUDGE] + [("dead", ("read", r), 1) for r in _READ]
    for order in (els, els[::-1]):  # any merge order gives the same text
        fn = ResultsDocFn({}, {"context": {}})
        accs = [fn.add_input(fn.create_accumulator(), e) for e in order]
        doc = fn.extract_output(fn.merge_accumulators(accs))
        reasons = doc["summary"]["metrics"]["context"]["dead_letter_reasons"]
        assert reasons == group_reasons(_JUDGE), reasons
        read = doc["summary"]["rejected_at_read_reasons"]
        assert read == {"e.g. " + _READ[0]: 2}, read
        _no_placeholder([*reasons, *read])
        counts = _CountsCombineFn()
        manifest = counts.extract_output(counts.merge_accumulators([counts.add_input(counts.create_accumulator(), e)
                                                                    for e in order]))
        _no_placeholder(r for _, r, _ in manifest["dead_letters"])
        assert sum(n for *_, n in manifest["dead_letters"]) == 6
        # a roll-up's input (the stored counts) groups the same way again
        fn = ResultsDocFn({}, {"context": {}})
        acc = fn.create_accumulator()
        for s, r, n in manifest["dead_letters"]:
            fn.add_input(acc, ("dead", (s, r), n))
        assert fn.extract_output(acc)["summary"]["metrics"]["context"]["dead_letter_reasons"] == reasons


def test_the_reports_and_a_loop_stages_reasons_are_real_reasons(tmp_path):
    import json

    from fair_forge_beam.loop_jobs import dead_letter_reasons
    from fair_forge_beam.reports.load import dead_letter_summary
    from fair_forge_beam.reasons import group_reasons

    (tmp_path / "dead_letter").mkdir()
    (tmp_path / "dead_letter" / "part-00000-of-00001.jsonl").write_text(
        "".join(json.dumps({"stage": "context", "reason": r, "raw": "{}"}) + "\n" for r in _JUDGE), encoding="utf-8")
    s = dead_letter_summary(str(tmp_path))
    assert sorted(s["by_reason"]) == sorted(("context", r, n) for r, n in group_reasons(_JUDGE).items()), s["by_reason"]
    _no_placeholder(r for _, r, _ in s["by_reason"])
    (tmp_path / "dead_letter.jsonl").write_text(
        "".join(json.dumps({"stage": "run", "reason": r}) + "\n" for r in _READ), encoding="utf-8")
    assert dead_letter_reasons(str(tmp_path)) == {"e.g. " + _READ[0]: 2}
