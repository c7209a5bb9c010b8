"""Issue 26 (the audit against the work alone): the writers' masking of key values and URL
credentials walked every value of every output row in Python (about 15 % of a 20k keyword audit's
CPU under cProfile, with no key registered and no URL anywhere). A column or record is now looked at
first for the texts a masked value must hold (``secrets.known_needles``: ``@`` and ``=`` for a URL's
credentials; with a key, the key, a backslash for its escaped spellings and its first caseless
character for its loose ones) — in its JSON text (``secrets.masks_nothing``) or with Arrow's substring
search (``write.scrub_table``) — and walked only when one is there. These tests hold the screen to
what the walk does: whatever the screen lets pass, the walk leaves as it is."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

KEY_LONG = "sk-proj-Ab12Cd34Ef56Gh78"  # loose spellings too (16 characters or more)
KEY_SHORT = "pw_9x7k2q"  # plain and escaped spellings only


@pytest.fixture
def keys(monkeypatch):
    from fair_forge_beam.io import secrets as sec

    monkeypatch.setattr(sec, "_ENVS", set())
    monkeypatch.setattr(sec, "_ENVS_SNAPSHOT", frozenset())
    monkeypatch.delenv(sec.NAMES_ENV, raising=False)

    def use(*values):
        for i, v in enumerate(values):
            monkeypatch.setenv(f"FFB_SCREEN_KEY{i}", v)
            sec.register_secret_env(f"FFB_SCREEN_KEY{i}")
    return use


def _spellings(key: str) -> list:
    """The ways a text can hold ``key`` that the walk masks."""
    return [key, key.upper(), " ".join(key), "\u200b".join(key), "".join(f"\\u{ord(c):04x}" for c in key),
            key[:4] + "\\\\u%04x" % ord(key[4]) + key[5:], key[:3] + "\\n" + key[3:]]


_PIECES = ["plain words", "ünïcödé", "a\"quote", "back\\slash", "user:pw@host", "http://u:p@h.example/x",
           "https://h.example/q?api_key=abc123&x=1", "k=v", "x@y", "tab\there", "line\nbreak", "", "   "]


def _texts(keys_: tuple):
    pieces = _PIECES + [s for k in keys_ for s in _spellings(k)]
    return st.lists(st.sampled_from(pieces), max_size=4).map("".join)


def _values(keys_: tuple):
    names = st.sampled_from(["answer", "metric", "slice", "argv", "options", "x", "assistant_id"])
    leaf = st.one_of(_texts(keys_), st.none(), st.integers(-5, 5), st.floats(allow_nan=False))
    return st.recursive(leaf, lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                                                      st.dictionaries(names, inner, max_size=4)), max_leaves=12)


@pytest.mark.parametrize("registered", [(), (KEY_SHORT,), (KEY_LONG,), (KEY_LONG, KEY_SHORT)])
def test_what_the_screen_lets_pass_the_walk_leaves_as_it_is(keys, registered):
    from fair_forge_beam.io.secrets import masks_nothing, scrub_known

    keys(*registered)
    seen = {True: 0, False: 0}

    @settings(max_examples=300, deadline=None, database=None)
    @given(_values(registered))
    def check(value):
        clean = masks_nothing(value)
        seen[clean] += 1
        if clean:
            assert scrub_known(value) == value
    check()
    assert seen[True] and seen[False]  # both ways taken: the screen decides something


def test_the_screen_sends_every_masked_spelling_to_the_walk(keys):
    from fair_forge_beam.io.secrets import masks_nothing, scrub_known

    keys(KEY_LONG, KEY_SHORT)
    for key in (KEY_LONG, KEY_SHORT):
        for text in _spellings(key)[: None if key == KEY_LONG else 1] + ["\\u" + f"{ord(key[0]):04x}" + key[1:]]:
            value = {"answer": [text], "n": 1}
            assert scrub_known(value) != value, text  # the walk masks it
            assert not masks_nothing(value), text
    for text in ("http://u:p@h.example/x", "https://h.example/q?api_key=abc123"):
        assert scrub_known({"a": text}) != {"a": text} and not masks_nothing({"a": text})
    assert masks_nothing({"answer": "no key here", "n": [1, 2.5, None]})


def test_a_loose_key_without_a_caseless_character_is_always_walked(keys):
    from fair_forge_beam.io.secrets import known_needles, masks_nothing

    keys("abcdefghijklmnopqrstuv")  # letters only: any long text may hold it loosely spelt
    assert known_needles() is None and not masks_nothing({"a": "hello"})


def test_values_without_json_text_are_walked(keys):
    from fair_forge_beam.io.secrets import masks_nothing

    loop: list = []
    loop.append(loop)
    assert not masks_nothing(loop) and not masks_nothing({("a", 1): "x"})


def _column(spelling: str):
    import pyarrow as pa

    clean = [{"key": "k", "vals": ["a", None], "m": [("b", "c")]}] * 4
    dirty = {"key": "k", "vals": ["a", spelling], "m": [("b", "c")]}
    t = pa.struct([("key", pa.string()), ("vals", pa.list_(pa.string())), ("m", pa.map_(pa.string(), pa.string()))])
    return pa.table({"metric": ["humanity"] * 4, "deep": pa.array(clean + [dirty], type=t)[1:]})


@pytest.mark.parametrize("registered", [(), (KEY_LONG,)])
def test_scrub_table_masks_what_the_walk_masks_at_any_depth(keys, registered):
    """A text deep in a struct's list (and in a map's values), in a column sliced as Beam hands it on:
    the table masks it exactly as the column walked value by value."""
    from fair_forge_beam.io.secrets import scrub_known
    from fair_forge_beam.io.write import scrub_table

    keys(*registered)
    for spelling in ["http://u:p@h.example/x"] + [s for k in registered for s in _spellings(k)]:
        table = _column(spelling)
        walked = scrub_known({n: table[n].to_pylist() for n in table.column_names})
        assert scrub_table(table).to_pylist() == [dict(zip(walked, row)) for row in zip(*walked.values())], spelling
        assert scrub_table(table).to_pylist() != table.to_pylist(), spelling
    import pyarrow as pa

    m = pa.table({"m": pa.array([[("http://u:p@h.example/k", "v")]], type=pa.map_(pa.string(), pa.string()))})
    assert scrub_table(m).to_pylist() == [{"m": [(scrub_known("http://u:p@h.example/k"), "v")]}]  # a map's key too
    assert scrub_table(_column("fine")).equals(_column("fine"))


def test_clean_columns_are_not_read_into_python(keys, monkeypatch):
    """The mechanism: a table and a batch of rows holding no needle never reach the walk."""
    import pyarrow as pa

    from fair_forge_beam.io import secrets as sec
    from fair_forge_beam.io import write
    from fair_forge_beam.reports import results

    keys(KEY_LONG)
    calls = []
    real = sec.scrub
    monkeypatch.setattr(sec, "scrub", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    table = pa.table({"answer": ["plain text", None], "nested": [[{"t": "words"}], []]})
    assert write.scrub_table(table).equals(table) and calls == []
    types = [pa.string(), pa.float64()]
    assert results._masked_columns(["answer", "n"], [["plain", None], [1.5, 2.0]], types) == [["plain", None], [1.5, 2.0]]
    assert calls == []
    assert results._masked_columns(["answer"], [[f"x {KEY_LONG}"]], [pa.string()]) == [["x ***"]] and len(calls) == 1


def test_a_column_arrow_writes_text_into_is_walked_whatever_its_type(keys):
    """Arrow refuses a text as a number, flag, date or timestamp (so such a column holds none), but
    takes one as binary: a key in a binary (or nested) column is masked as before."""
    import pyarrow as pa

    from fair_forge_beam.reports import results

    keys(KEY_LONG)
    for t in (pa.float64(), pa.int64(), pa.bool_(), pa.timestamp("us", tz="UTC"), pa.date32(), pa.decimal128(10, 2)):
        with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError)):
            pa.array([KEY_LONG], type=t)
        assert results._takes_no_text(t)
    for t in (pa.binary(), pa.large_binary(), pa.string(), pa.list_(pa.string()), pa.struct([("a", pa.binary())])):
        assert not results._takes_no_text(t)
    assert results._masked_columns(["blob", "answer"], [[KEY_LONG], [f"a {KEY_LONG}"]], [pa.binary(), pa.string()]) == [
        ["***"], ["a ***"]]
