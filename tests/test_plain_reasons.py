"""A dead letter's or warning's reason is plain words, never a Python exception class name or
repr (issue 28, class 2): every reader run on broken inputs — JSON Lines, ``.json`` (a whole
JSON array), gzip, Parquet, the agentic loaders, hh-rlhf, the watched-folder line reader — and
the exceptions a metric or judge turns into a reason (JSON, Arrow, UTF-8, pydantic, zlib)."""
from __future__ import annotations

import gzip
import io
import json
import re

import pytest

from fair_forge_beam._beam import beam

CLASS_NAME = re.compile(r"[A-Z][a-z]+(Error|Exception|Invalid)\b")
#: advice that names a Python call (``use sys.set_int_max_str_digits to increase the limit``): a user of
#: the command line has no way to follow it (trial 10 T9)
PYTHON_ADVICE = re.compile(r"\bsys\.[a-z_]+")
HUGE_NUMBER = "9" * 50_000

GOOD = json.dumps({"session_id": "s", "assistant_id": "a", "conversation": [{"qa_id": "q", "query": "hi", "assistant": "yo"}]})


def _parquet_bytes() -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.table({"session_id": ["s"], "assistant_id": ["a"], "qa_id": ["q"], "query": ["x"],
                             "assistant": ["y"]}), buf)
    return buf.getvalue()


def _cases() -> dict:
    g = GOOD
    return {
        "nul.jsonl": (g + "\n" + g[:10] + "\x00" + g[10:] + "\n").encode(),
        "cr_only.jsonl": (g + "\r" + g + "\r").encode(),
        "control.jsonl": (g[:10] + "\x1b" + g[10:] + "\n").encode(),
        "cr_in_string.jsonl": (g[:10] + "\r" + g[10:] + "\n").encode(),
        "bad_json.jsonl": b'{"session_id": }\n',
        "not_utf8.jsonl": b'{"session_id": "\xff"}\n',
        "not_an_object.jsonl": b'null\n[1]\n"text"\n',
        "bad_interaction.jsonl": json.dumps({"session_id": "s", "assistant_id": "a",
                                             "conversation": [{"qa_id": 5}, 7, None]}).encode() + b"\n",
        "nul.json": ("[" + g + ",\n" + g[:10] + "\x00" + g[10:] + "]").encode(),
        "cr_only.json": ("[" + g + ",\r" + g[:10] + "\r" + g[10:] + "]").encode(),
        "control.json": ("[" + g[:10] + "\x1b" + g[10:] + "," + g + "]").encode(),
        "bad_json.json": ("[" + g + ', {"session_id": }]').encode(),
        "truncated.json": ("[" + g + ", " + g[:20]).encode(),
        "not_utf8.json": b'[{"session_id": "\xff"}]',
        "huge_number.jsonl": (g + "\n" + g[:-1] + ', "turn_index": ' + HUGE_NUMBER + "}\n").encode(),
        "huge_number.json": ("[" + g + ", " + g[:-1] + ', "turn_index": ' + HUGE_NUMBER + "}]").encode(),
        "truncated.jsonl.gz": gzip.compress(((g + "\n") * 50).encode())[:-30],
        "garbage.jsonl.gz": b"\x1f\x8b\x08\x00garbagegarbage",
        "truncated.json.gz": gzip.compress(b"[" + g.encode() + b",")[:-10],
        "garbage.parquet": b"PAR1garbagegarbagePAR1",
        "truncated.parquet": _parquet_bytes()[:-40],
    }


def _assert_plain(reasons: list, where: str) -> None:
    assert reasons, f"{where}: no reason at all"
    for r in reasons:
        assert not CLASS_NAME.search(r) and "Traceback" not in r and not PYTHON_ADVICE.search(r), f"{where}: {r!r}"


def _read_reasons(path, tmp_path) -> list:
    """The reasons of the dead letters and warnings of ``ReadInteractions(path)``."""
    from apache_beam.testing.util import assert_that

    from fair_forge_beam.io.read import ReadInteractions
    from helpers import fnapi_pipeline

    dump = tmp_path / f"{path.name}.reasons.json"

    def keep(lists, dump=str(dump)):
        with open(dump, "w") as f:
            json.dump(lists[0], f)

    with fnapi_pipeline() as p:
        out = p | ReadInteractions(str(path))
        texts = ((out["dead_letter"] | beam.Map(lambda d: d.reason)),
                 (out["quality"] | "Q" >> beam.Map(lambda w: w.message)))
        assert_that(texts | beam.Flatten() | beam.combiners.ToList(), keep)
    return json.loads(dump.read_text())


@pytest.mark.parametrize("name", sorted(_cases()))
def test_every_reader_reason_is_plain_words(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(_cases()[name])
    _assert_plain(_read_reasons(path, tmp_path), name)


@pytest.mark.slow
def test_the_json_reader_names_cr_and_control_characters_as_the_jsonl_reader_does(tmp_path):
    """A ``.json`` element with a raw CR inside a string, or a NUL / ESC, is told what the
    character is (U+000D, U+0000, U+001B), as a JSON Lines line is."""
    got = {}
    for name in ("cr_only.json", "nul.json", "control.json", "nul.jsonl", "control.jsonl", "cr_in_string.jsonl"):
        path = tmp_path / name
        path.write_bytes(_cases()[name])
        got[name] = " | ".join(_read_reasons(path, tmp_path))
    assert "U+000D (CR, carriage return)" in got["cr_only.json"]
    assert "U+000D (CR, carriage return)" in got["cr_in_string.jsonl"]
    for ext in ("json", "jsonl"):
        assert "U+0000 (NUL)" in got[f"nul.{ext}"] and "U+001B (ESC)" in got[f"control.{ext}"]


@pytest.mark.parametrize("name", ["truncated.jsonl.gz", "garbage.jsonl.gz", "truncated.json.gz", "bad_json.jsonl",
                                  "not_utf8.json", "truncated.json"])
def test_agentic_loader_reasons_are_plain_words(tmp_path, name):
    from fair_forge_beam.io.agentic_sources import _file_records
    from fair_forge_beam.io.read import ReadError

    path = tmp_path / name
    path.write_bytes(_cases()[name])
    _assert_plain([r.reason for r in _file_records(str(path)) if isinstance(r, ReadError)], name)


def test_hh_rlhf_skipped_reasons_are_plain_words(tmp_path):
    from fair_forge_beam.io.hh_rlhf import hh_rlhf_sessions

    path = tmp_path / "hh.jsonl"
    path.write_bytes(b'{"chosen": 5}\n{"rejected": "x"}\nnot json\n\xff\n[1]\n')
    skipped: list = []
    hh_rlhf_sessions(str(path), skipped=skipped)
    assert len(skipped) == 5
    _assert_plain([r for _, r in skipped], "hh-rlhf")


@pytest.mark.parametrize("name", ["truncated.jsonl.gz", "garbage.jsonl.gz"])
def test_watched_file_reasons_are_plain_words(tmp_path, name):
    from types import SimpleNamespace

    from fair_forge_beam.io.read import ReadError
    from fair_forge_beam.io.stream_sources import _ReadLines

    path = tmp_path / name
    path.write_bytes(_cases()[name])
    out = list(_ReadLines(1 << 20).process(SimpleNamespace(metadata=SimpleNamespace(path=str(path)))))
    _assert_plain([x[2].reason for x in out if isinstance(x[2], ReadError)], name)


def _library_errors() -> list:
    import zlib

    import pyarrow as pa
    from pydantic import BaseModel

    out = []
    for make in (lambda: json.loads("{"), lambda: b"\xff".decode("utf-8"), lambda: zlib.decompress(b"garbage"),
                 lambda: pa.array(["x"]).cast(pa.int64()), lambda: {}["score"],
                 lambda: type("M", (BaseModel,), {"__annotations__": {"x": int}}).model_validate({"x": "no"}),
                 lambda: gzip.decompress(gzip.compress(b"abc" * 100)[:-12])):
        try:
            make()
        except Exception as exc:  # noqa: BLE001
            out.append(exc)
    return out


def test_plain_reason_of_library_exceptions():
    from fair_forge_beam.plain import plain_reason, repr_reason

    errors = _library_errors()
    assert len(errors) == 7
    for exc in errors:
        reason = plain_reason(exc)
        assert reason and not CLASS_NAME.search(reason) and "\n" not in reason, (type(exc), reason)
    assert plain_reason(KeyError("score")) == "missing 'score'"
    assert repr_reason("RuntimeError('unexpected bug')") == "unexpected bug"
    assert not CLASS_NAME.search(repr_reason("pyarrow.lib.ArrowInvalid('bad (ValueError: x)')"))


def test_usage_errors_that_embed_an_exception_say_it_in_plain_words(tmp_path):
    """A usage error that quotes an exception names no class (issue 28, B7: a truncated stats
    Parquet was "cannot be read as Parquet (ArrowInvalid: …)", a --config loop "(OSError: …)")."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fair_forge_beam import rollup
    from fair_forge_beam.audit_config import ConfigError, load_config

    shard = tmp_path / "part-00000-of-00001.parquet"
    pq.write_table(pa.table({"session_id": ["a", "b"]}), shard)
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    with pytest.raises(ValueError) as exc:
        rollup._read_parquet(str(shard))
    assert "cannot be read as Parquet (" in str(exc.value) and not CLASS_NAME.search(str(exc.value)), exc.value
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(ConfigError) as exc:
        load_config(str(loop))
    assert "cannot read the file (" in str(exc.value) and not CLASS_NAME.search(str(exc.value)), exc.value



@pytest.mark.parametrize("name", ["huge_number.jsonl", "huge_number.json"])
def test_a_number_longer_than_python_converts_is_said_as_such(tmp_path, name):
    """A JSON number of 50,000 digits is valid JSON that Python refuses to convert: the record's
    dead letter says how long the number is and the limit, not "invalid JSON" with Python's advice
    (trial 10 T9); the good record beside it is read."""
    path = tmp_path / name
    path.write_bytes(_cases()[name])
    reasons = _read_reasons(path, tmp_path)
    assert any("a number of 50,000 digits; numbers are limited to 4,300 digits" in r for r in reasons), reasons
    assert not any("invalid JSON" in r for r in reasons), reasons


def test_python_advice_is_never_a_reason(tmp_path):
    """Every path that turns Python's integer-digits refusal into words says it plainly: an int too long
    to print, and a --config holding one (tomllib converts TOML integers as Python does)."""
    from fair_forge_beam.audit_config import ConfigError, load_config
    from fair_forge_beam.plain import plain_reason

    try:
        str(10 ** 5000)
    except ValueError as exc:
        assert plain_reason(exc) == "a number of more than 4,300 digits; numbers are limited to 4,300 digits"
    config = tmp_path / "audit.toml"
    config.write_text("seed = " + HUGE_NUMBER[:5000] + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_config(str(config))
    assert "a number of 5,000 digits; numbers are limited to 4,300 digits" in str(exc.value), exc.value
    assert not PYTHON_ADVICE.search(str(exc.value)), exc.value
