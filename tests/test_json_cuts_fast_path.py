"""Issue 26 (suite and reader speed): the streaming JSON splitter (``io/edge.json_values``) found the
structure of every 1 MiB chunk with a dozen numpy passes, even when the chunk lies inside one long
string (an image in base64, a transcript, the hostile report's 256 MiB decompression bomb): ~25 s per
pass over 256 MiB, and a run makes two (the launcher's input digest and the reader). A chunk that
holds no quote and no backslash, and is inside a string or holds no bracket or comma, changes
nothing of the structure and is now crossed with a few byte searches (``edge._changes_nothing``).
These tests hold the fast path to the full one: the same values, problems and carried state."""
from __future__ import annotations

import io
import json

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st


def _values(text: bytes, chunk: int, fast: bool, monkeypatch) -> list:
    from fair_forge_beam.io import edge

    if not fast:
        monkeypatch.setattr(edge, "_changes_nothing", lambda a, state: False)
    try:
        return [tuple(v) for v in edge.json_values(io.BytesIO(text).read, limit=1 << 20, chunk_bytes=chunk)]
    finally:
        monkeypatch.undo()


_PIECES = [b'"', b"\\", b"\\\\", b'\\"', b"[", b"]", b"{", b"}", b",", b" ", b"a" * 7, b"x" * 40, b"1", b":", b"\n"]


@settings(max_examples=400, deadline=None, database=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=60), st.integers(1, 24), st.booleans())
@example([b'"', b"\\", b"aaa", b'"', b",", b"1"], 3, True)  # a chunk ends on a backslash, the next is plain
@example([b'"', b"\\", b"x" * 40, b'"', b",", b'"', b"\\", b'"', b'"'], 4, True)
def test_the_fast_path_cuts_every_text_as_the_full_scan(pieces, chunk, wrap):
    import pytest

    mp = pytest.MonkeyPatch()
    body = b"".join(pieces)
    text = b"[" + body + b"]" if wrap else body
    assert _values(text, chunk, True, mp) == _values(text, chunk, False, mp)


def test_real_arrays_with_long_strings_are_cut_the_same(monkeypatch):
    """JSON arrays of records with long string values (longer than a chunk, with escapes and
    brackets inside some of them), cut in chunks of several sizes: the same values both ways,
    each one parses back to its record."""
    rng = np.random.default_rng(26)
    records = []
    for i in range(40):
        n = int(rng.integers(0, 300))
        filler = "".join(rng.choice(list("abc xyz[]{},\\\"é"), n)) if i % 3 == 0 else "q" * n
        records.append({"session_id": f"s{i}", "answer": filler, "nested": [{"k": [i, filler[:5]]}]})
    text = json.dumps(records, ensure_ascii=False).encode("utf-8")
    for chunk in (7, 64, 333, 1 << 20):
        fast = _values(text, chunk, True, monkeypatch)
        assert fast == _values(text, chunk, False, monkeypatch)
        assert [json.loads(v[2]) for v in fast] == records


def test_a_long_string_is_crossed_without_the_full_scan(monkeypatch):
    """The mechanism: 64 chunks inside one string take the fast path (the full scan runs on the
    chunks that hold the string's quotes only)."""
    from fair_forge_beam.io import edge

    calls = []
    real = edge._structure
    monkeypatch.setattr(edge, "_structure", lambda a, state: calls.append(a.size) or real(a, state))
    text = b'[{"a": "' + b"z" * (64 * 4096) + b'"}, {"b": 1}]'
    got = list(edge.json_values(io.BytesIO(text).read, limit=1 << 20, chunk_bytes=4096))
    assert [json.loads(v.text) for v in got] == [{"a": "z" * (64 * 4096)}, {"b": 1}]
    assert len(calls) <= 3, calls
