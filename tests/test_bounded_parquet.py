"""Issue 28 (second hostile report), item 2: --max-record-bytes bounds a Parquet row. A 12 KB zstd
Parquet file with one 100 MB ``assistant`` cell was scored whole (peak 3.55 GB): the reader turned
the whole row group into Python objects (``to_pylist``). Each row's size is now computed in Arrow
first (``io.read.arrow_value_sizes``); a row over the limit is one dead letter naming its size and
the limit and is never converted to Python, the other rows are read."""
from __future__ import annotations

import datetime
import json
import tracemalloc

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import FNAPI
from fair_forge_beam.io.read import ReadError

MB = 2**20

_TURN = pa.struct([("qa_id", pa.string()), ("query", pa.string()), ("assistant", pa.string()),
                   ("ground_truth_assistant", pa.string())])
_SCHEMA = pa.schema([("session_id", pa.string()), ("assistant_id", pa.string()), ("language", pa.string()),
                     ("conversation", pa.list_(_TURN))])


def _row(sid, answer="I am glad to help, thank you."):
    return {"session_id": sid, "assistant_id": "bot", "language": "english",
            "conversation": [{"qa_id": f"{sid}-0", "query": "Can you help?", "assistant": answer,
                              "ground_truth_assistant": "Happy to help."}]}


def _row_bytes(row) -> int:
    """What arrow_value_sizes sums for a row of this schema: the bytes of its strings plus 8 per
    value (each string, the conversation list and each turn struct: its Python reference)."""
    strings = [row["session_id"], row["assistant_id"], row["language"]]
    strings += [v for turn in row["conversation"] for v in turn.values()]
    values = len(strings) + 1 + len(row["conversation"])
    return sum(len(s.encode("utf-8")) for s in strings if s is not None) + 8 * values


def _write(path, rows, row_group_size=None):
    pq.write_table(pa.Table.from_pylist(rows, schema=_SCHEMA), path, compression="zstd", row_group_size=row_group_size)


def test_a_parquet_row_over_the_limit_is_one_dead_letter_and_the_others_are_scored(tmp_path):
    from pipelines import audit

    huge = _row("huge", "x" * (3 * MB))
    path = tmp_path / "in.parquet"
    _write(path, [_row("s1"), huge, _row("s2")])
    assert path.stat().st_size < 100_000  # a small file: the cell compresses to nothing
    out = tmp_path / "out"
    doc = audit.run(["--quiet", "--no-report", "--metrics", "humanity", "--input", str(path), "--output", str(out),
                     "--max-record-bytes", str(MB), f"--runner={FNAPI}"])
    assert doc["summary"]["metrics"]["humanity"]["interactions_scored"] == 2
    dead = [json.loads(line) for p in sorted((out / "dead_letter").glob("*.jsonl")) for line in p.read_text().splitlines()]
    assert len(dead) == 1 and dead[0]["stage"] == "read", dead
    assert dead[0]["reason"] == (f"record of {_row_bytes(huge):,} bytes is over the limit of 1,048,576 bytes "
                                 "(--max-record-bytes); the rest of the file is read")
    assert dead[0]["source"].endswith("in.parquet:1")
    raw = json.loads(dead[0]["raw"])  # the row's small columns, and the size of the big one
    assert raw["session_id"] == "huge" and raw["conversation"] == f"<{_row_bytes(huge) - len('hugebotenglish') - 3 * 8:,} bytes>"


def test_an_oversized_parquet_row_is_never_converted_to_python(tmp_path):
    """Python allocations (traced) while reading a row group with a 64 MiB cell grow by less than
    8 MiB over the same group with a 2 MiB cell (the Arrow table itself is Arrow's memory, not
    traced: it is held, see _ReadParquetRowGroup). Before: the cell became a 64 MiB str."""
    from fair_forge_beam.io.read import _ReadParquetRowGroup

    peaks, got = {}, {}
    for n in (2, 64):
        path = tmp_path / f"in{n}.parquet"
        _write(path, [_row("s1"), _row("huge", "y" * (n * MB)), _row("s2")])
        tracemalloc.start()
        try:
            got[n] = list(_ReadParquetRowGroup(MB).process((str(path), 0)))
            peaks[n] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert [i for _, i, _ in got[n]] == [0, 1, 2]
        assert [r["session_id"] for _, _, r in (got[n][0], got[n][2])] == ["s1", "s2"]
        assert isinstance(got[n][1][2], ReadError) and "over the limit of 1,048,576 bytes" in got[n][1][2].reason
    assert peaks[64] - peaks[2] < 8 * MB, f"{(peaks[64] - peaks[2]) / MB:.0f} MiB more Python memory for a 64 MiB cell"


def test_rows_around_oversized_ones_keep_their_positions_across_row_groups(tmp_path):
    from fair_forge_beam.io.read import _ReadParquetRowGroup

    rows = [_row(f"s{i}", "z" * 5000 if i in (2, 3, 7) else "ok") for i in range(10)]
    path = tmp_path / "in.parquet"
    _write(path, rows, row_group_size=4)
    got = [x for rg in range(3) for x in _ReadParquetRowGroup(4000).process((str(path), rg))]
    assert [i for _, i, _ in got] == list(range(10))
    assert [i for _, i, r in got if isinstance(r, ReadError)] == [2, 3, 7]
    assert [r["session_id"] for _, _, r in got if not isinstance(r, ReadError)] == [f"s{i}" for i in (0, 1, 4, 5, 6, 8, 9)]


def test_arrow_value_sizes_of_nested_dictionary_and_fixed_width_columns():
    from fair_forge_beam.io.read import arrow_value_sizes

    turn = pa.struct([("q", pa.string()), ("a", pa.string()), ("m", pa.map_(pa.string(), pa.string()))])
    schema = pa.schema([("s", pa.string()), ("n", pa.int64()), ("conv", pa.list_(turn)), ("t", pa.timestamp("us")),
                        ("fl", pa.list_(pa.float64()))])
    rows = [{"s": "héllo", "n": 3, "conv": [{"q": "abc", "a": "de", "m": {"k": "vvv"}}], "t": datetime.datetime(2024, 1, 1),
             "fl": [1.0, 2.0]},
            {"s": None, "n": None, "conv": None, "t": None, "fl": None},
            {"s": "x", "n": 1, "conv": [{"q": None, "a": "z" * 100, "m": None}, {"q": "q", "a": "", "m": {"a": "b", "c": "d"}}],
             "t": None, "fl": []}]
    table = pa.Table.from_pylist(rows, schema=schema)
    sizes = {name: arrow_value_sizes(table.column(name).chunks[0]).tolist() for name in table.column_names}
    # data bytes + 8 per value (a null 8): conv row 0 = list 8 + struct 8 + "abc" 11 + "de" 10 + map 8 + "k" 9 + "vvv" 11
    assert sizes == {"s": [14, 8, 9], "n": [16, 8, 16], "conv": [65, 8, 209], "t": [16, 8, 8], "fl": [40, 8, 8]}
    assert arrow_value_sizes(table.column("conv").chunks[0].slice(1)).tolist() == [8, 209]  # a slice: its own rows
    words = pa.array(["aa", None, "bbbb", "aa"]).dictionary_encode()
    assert arrow_value_sizes(words).tolist() == [10, 8, 12, 10] and arrow_value_sizes(words.slice(2)).tolist() == [12, 10]
    pairs = pa.array([[1, 2], [3, 4], None], type=pa.list_(pa.int32(), 2))
    assert arrow_value_sizes(pairs).tolist() == [32, 32, 8] and arrow_value_sizes(pairs.slice(1)).tolist() == [32, 8]
    assert arrow_value_sizes(pa.array([None, None])).tolist() == [8, 8]


def _every_kind_of_big_value(big: str):
    """(name, array) pairs: each array's value 1 holds the string ``big`` once (value 0 a short one,
    value 2 a null), through every Arrow type that can hold text."""
    import pyarrow as pa

    s = pa.string()
    st = pa.struct([("q", s)])
    vals = ["ab", big, None]
    out = [(str(t), pa.array(vals, type=t)) for t in
           (pa.string(), pa.large_string(), pa.string_view(), pa.binary(), pa.large_binary(), pa.binary_view())]
    lists = [["ab"], [big], None]
    for make in (pa.list_, pa.large_list, pa.list_view, pa.large_list_view, lambda c: pa.list_(c, 1)):
        out.append((str(make(s)), pa.array(lists, type=make(s))))
        out.append((str(make(st)), pa.array([None if v is None else [{"q": v[0]}] for v in lists], type=make(st))))
    out.append(("map", pa.array([[("k", "ab")], [("k", big)], None], type=pa.map_(s, s))))
    out.append(("map key", pa.array([[("ab", "v")], [(big, "v")], None], type=pa.map_(s, s))))
    out.append(("dictionary", pa.array(vals).dictionary_encode()))
    out.append(("run-end encoded", pa.RunEndEncodedArray.from_arrays(pa.array([1, 2, 3], pa.int32()), pa.array(vals))))
    out.append(("sparse union", pa.UnionArray.from_sparse(pa.array([0, 1, 0], pa.int8()),
                                                          [pa.array(["ab", "x", None]), pa.array(["", big, ""])])))
    out.append(("dense union", pa.UnionArray.from_dense(pa.array([0, 1, 0], pa.int8()), pa.array([0, 0, 1], pa.int32()),
                                                        [pa.array(["ab", None]), pa.array([big])])))
    out.append(("list_view of map of list_view", pa.array(
        [[{"k": ["ab"]}], [{"k": [big]}], None], type=pa.list_view(pa.map_(s, pa.list_view(s))))))
    return out


def test_arrow_value_sizes_count_the_real_bytes_of_every_arrow_type():
    """Issue 28 (hostile trial 3): a list_view / large_list_view value counted 8 bytes, so a 150 MB
    query in a list_view column was scored. Every type that holds text counts its bytes, in a
    slice too; a view or run repeated counts each time."""
    import pyarrow as pa
    from fair_forge_beam.io.read import arrow_value_sizes

    big = "Q" * 100_000
    for name, arr in _every_kind_of_big_value(big):
        sizes = arrow_value_sizes(arr).tolist()
        assert sizes[1] >= len(big) and sizes[0] <= 2 + 8 * 6 and sizes[2] == 8, (name, sizes)
        assert arrow_value_sizes(arr.slice(1)).tolist() == sizes[1:], name
        assert arrow_value_sizes(arr.slice(1, 1)).tolist() == sizes[1:2], name
    # a list view whose three values share one child range: three times its bytes
    shared = pa.ListViewArray.from_arrays(pa.array([0, 0, 0], pa.int32()), pa.array([1, 1, 1], pa.int32()), pa.array([big]))
    assert arrow_value_sizes(shared).tolist() == [8 + len(big) + 8] * 3
    ree = pa.RunEndEncodedArray.from_arrays(pa.array([5], pa.int32()), pa.array([big]))
    assert arrow_value_sizes(ree).tolist() == [len(big) + 8] * 5 and arrow_value_sizes(ree.slice(3)).tolist() == [len(big) + 8] * 2
    fixed = [pa.float16(), pa.month_day_nano_interval(), pa.duration("s"), pa.date64(), pa.time32("s"),
             pa.decimal32(5, 2), pa.decimal256(40, 2), pa.bool_()]
    for t in fixed:
        arr = pa.array([None, None], type=t)
        assert arrow_value_sizes(arr).tolist() == [8, 8], t
    assert arrow_value_sizes(pa.array([1.5], pa.float16())).tolist() == [2 + 8]
    assert arrow_value_sizes(pa.array([(1, 2, 3)], pa.month_day_nano_interval())).tolist() == [16 + 8]


@pytest.mark.parametrize("kind", ["list_view", "large_list_view", "string_view", "binary_view"])
def test_a_parquet_row_over_the_limit_in_any_arrow_type_is_a_dead_letter(tmp_path, kind):
    """The hostile repro: a list_view conversation with a huge query was read whole. Parquet keeps
    the Arrow schema, so a file may hold any of these types."""
    from fair_forge_beam.io.read import _ReadParquetRowGroup

    big = "Q" * (2 * MB)
    turn = pa.struct([("qa_id", pa.string()), ("query", pa.string()), ("assistant", pa.string())])
    conv = [[{"qa_id": "a", "query": "hi", "assistant": "ok"}], [{"qa_id": "b", "query": big, "assistant": "ok"}],
            [{"qa_id": "c", "query": "hi", "assistant": "ok"}]]
    cols = {"session_id": pa.array(["s0", "huge", "s2"]), "assistant_id": pa.array(["bot"] * 3)}
    if kind in ("list_view", "large_list_view"):
        cols["conversation"] = pa.array(conv, type=getattr(pa, kind)(turn))
    else:
        cols["conversation"] = pa.array(conv, type=pa.list_(turn))
        cols["extra"] = pa.array([b"x", big.encode(), b"y"], type=getattr(pa, kind)())
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table(cols), path)
    schema = pq.read_schema(path)
    assert str(schema.field("conversation" if "list" in kind else "extra").type).startswith(kind)
    got = list(_ReadParquetRowGroup(MB).process((str(path), 0)))
    assert [i for _, i, _ in got] == [0, 1, 2]
    assert isinstance(got[1][2], ReadError) and "over the limit of 1,048,576 bytes" in got[1][2].reason, got[1][2]
    assert [r["session_id"] for _, _, r in (got[0], got[2])] == ["s0", "s2"]


@pytest.mark.parametrize("item", ["int8", "null"])
def test_a_row_of_many_small_items_counts_what_python_holds(tmp_path, item):
    """Issue 28 (trial 28, B2): a list of 60M int8 counted 60 MB (< 64 MiB, scored: peak 2.18 GB)
    and a list of 40M nulls 0 bytes (1.49 GB). Each item becomes a Python object held by an
    8-byte reference: a row of 200,000 tiny items is 1.6 MB, over a 1 MiB limit."""
    import numpy as np
    from fair_forge_beam.io.read import _ReadParquetRowGroup

    n = 200_000
    child = {"int8": pa.array(np.zeros(n, "int8")), "null": pa.nulls(n)}[item]
    junk = pa.ListArray.from_arrays(pa.array([0, 0, n, n], pa.int32()), child)
    table = pa.Table.from_pylist([_row("s0"), _row("huge"), _row("s2")], schema=_SCHEMA).append_column("junk", junk)
    path = tmp_path / "in.parquet"
    pq.write_table(table, path)
    got = list(_ReadParquetRowGroup(MB).process((str(path), 0)))
    assert [i for _, i, _ in got] == [0, 1, 2]
    assert isinstance(got[1][2], ReadError) and "over the limit of 1,048,576 bytes" in got[1][2].reason, got[1][2]
    assert [r["session_id"] for _, _, r in (got[0], got[2])] == ["s0", "s2"]


def test_sizing_a_long_list_of_fixed_width_items_holds_nothing_per_item():
    """Sizing itself was 24 bytes per item (sizes, cumulative sums, a copy): 1.4 GB for the 60M
    int8 of the trial. Lists of nulls or of fixed-width values without nulls are sized from their
    offsets: traced allocations stay under 1 MiB for 5M items; items with nulls are summed."""
    import numpy as np
    from fair_forge_beam.io.read import arrow_value_sizes

    n = 5_000_000
    for child in (pa.array(np.zeros(n, "int8")), pa.nulls(n)):
        arr = pa.ListArray.from_arrays(pa.array([0, 1, n], pa.int32()), child)
        tracemalloc.start()
        try:
            sizes = arrow_value_sizes(arr).tolist()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        each = 8 + (1 if child.type == pa.int8() else 0)
        assert sizes == [8 + each, 8 + each * (n - 1)], (child.type, sizes)
        assert peak < MB, f"{child.type}: {peak / MB:.0f} MiB traced while sizing"
    with_nulls = pa.array([[1, None, 3], None, []], pa.list_(pa.int8()))
    assert arrow_value_sizes(with_nulls).tolist() == [8 + 9 + 8 + 9, 8, 8]
    assert arrow_value_sizes(with_nulls.slice(1)).tolist() == [8, 8]
    empty = pa.array([[{}] * 3, []], pa.list_(pa.struct([])))  # each {} is a Python dict
    assert arrow_value_sizes(empty).tolist() == [8 + 3 * 8, 8]


def test_a_row_group_over_the_limit_by_its_metadata_is_never_decoded(tmp_path, monkeypatch):
    """Trial 28b (B7): a 2.9 MB file, one row of list<bool> of 500M values: the row became a correct
    dead letter, but decoding its row group first peaked 3.6 GB. The column chunks' metadata shows
    the values before any read (8 bytes each once converted): a row group whose rows hold more than
    rows x --max-record-bytes is one dead letter naming it, its size and the limit, never decoded;
    the other row groups are read."""
    import numpy as np
    from fair_forge_beam.io.read import _ReadParquetRowGroup

    n = 2_000_000
    bools = pa.ListArray.from_arrays(pa.array([0, n], pa.int32()), pa.array(np.ones(n, dtype=bool)))
    table = pa.table({"session_id": ["big"], "assistant_id": ["bot"], "tags": bools})
    small = pa.table({"session_id": ["s0"], "assistant_id": ["bot"], "tags": pa.array([[True]], bools.type)})
    path = tmp_path / "in.parquet"
    with pq.ParquetWriter(path, table.schema) as w:
        w.write_table(small)
        w.write_table(table)
        w.write_table(small)
    decoded = []
    real = pq.ParquetFile.iter_batches  # the reader decodes a row group through it, a slice at a time
    monkeypatch.setattr(pq.ParquetFile, "iter_batches",
                        lambda self, *a, **k: decoded.extend(k["row_groups"]) or real(self, *a, **k))
    got = [item for rg in range(3) for item in _ReadParquetRowGroup(MB).process((str(path), rg))]
    assert decoded == [0, 2]
    assert [r["session_id"] for _, _, r in got if not isinstance(r, ReadError)] == ["s0", "s0"]
    [(_, _, dead)] = [g for g in got if isinstance(g[2], ReadError)]
    assert dead.reason == (f"row group 1 of Parquet file {path} holds at least {8 * n:,} bytes of values once converted "
                           "(8 per value of its largest column, from its metadata), over the limit of 1,048,576 bytes "
                           "for its 1 row(s) (--max-record-bytes per row); its rows are not read, the other row groups are")


def test_the_metadata_bound_never_refuses_a_row_group_whose_rows_are_within_the_limit(tmp_path):
    """The bound is a lower bound of what the rows' sizes (arrow_value_sizes) sum to, for nulls at any
    depth, empty and null lists, lists of null structs, maps, dictionaries: a row group is refused only
    when some row is over the limit."""
    import numpy as np
    from fair_forge_beam.io.read import arrow_value_sizes, row_group_least_size

    turn = pa.struct([("a", pa.string()), ("b", pa.int64()), ("c", pa.list_(pa.string()))])
    rows = [None, [], [None] * 50, [{"a": None, "b": None, "c": None}] * 7, [{"a": "x", "b": 1, "c": []}],
            [{"a": "y" * 30, "b": 2, "c": [None, "z", ""]}] * 3]
    table = pa.table({
        "conversation": pa.array(rows, pa.list_(turn)),
        "m": pa.array([None, [], [("k", None)], [("k", "v")] * 9, None, [("a", "b")]], pa.map_(pa.string(), pa.string())),
        "d": pa.array(["u", None, "u", "v", "u", None]).dictionary_encode(),
        "n": pa.array([[None] * 40, None, [], [1], [None, 2], [3] * 5], pa.list_(pa.int8())),
        "f": pa.array(np.arange(6, dtype="float64")),
    })
    path = tmp_path / "in.parquet"
    pq.write_table(table, path, row_group_size=2)
    pf = pq.ParquetFile(path)
    for rg in range(pf.num_row_groups):
        part = pf.read_row_group(rg)
        sizes = sum(arrow_value_sizes(part.column(c).combine_chunks()) for c in part.column_names)
        least, most = row_group_least_size(pf.metadata.row_group(rg), int(sizes.max()))
        assert least <= int(sizes.sum()) <= most, (rg, least, sizes)


def test_a_row_group_refused_by_its_metadata_keeps_its_good_rows(tmp_path, monkeypatch):
    """Issue 28 (fix28j): a row group whose metadata shows a row over the limit was one dead letter
    for all its rows (the good ones lost). It is now read a slice at a time when that bound is at
    most max(limit, PARQUET_DECODE_BYTES): only the row over the limit is a dead letter (the usual
    one, naming its size), the others are read; over that bound, or for a one-row group, it is still
    one dead letter, never decoded."""
    import numpy as np
    import fair_forge_beam.io.read as read
    from fair_forge_beam.io.read import _ReadParquetRowGroup, oversized_reason

    n = 2_000_000
    bools = pa.ListArray.from_arrays(pa.array([0, 1, n + 1, n + 2], pa.int32()), pa.array(np.ones(n + 2, dtype=bool)))
    table = pa.table({"session_id": ["s0", "big", "s1"], "assistant_id": ["bot"] * 3, "tags": bools})
    path = tmp_path / "in.parquet"
    pq.write_table(table, path)  # one row group of 3 rows
    meta = pq.ParquetFile(path).metadata.row_group(0)
    least, most = read.row_group_least_size(meta, MB)
    assert least > most  # refused by its metadata before
    got = list(_ReadParquetRowGroup(MB).process((str(path), 0)))
    assert [i for _, i, _ in got] == [0, 1, 2]
    assert [r["session_id"] for _, _, r in (got[0], got[2])] == ["s0", "s1"]
    dead = got[1][2]
    assert isinstance(dead, ReadError) and dead.reason == oversized_reason(9 * n + 8 + 2 * (3 + 8), MB)  # 8 + 1 per item
    assert json.loads(dead.raw)["session_id"] == "big"
    # over the decode bound: one dead letter, never decoded
    monkeypatch.setattr(read, "PARQUET_DECODE_BYTES", least - 1)
    decoded = []
    real = pq.ParquetFile.iter_batches
    monkeypatch.setattr(pq.ParquetFile, "iter_batches", lambda self, *a, **k: decoded.append(k) or real(self, *a, **k))
    [(_, rg, dead)] = list(_ReadParquetRowGroup(MB).process((str(path), 0)))
    assert decoded == [] and rg == 0 and dead.reason.startswith(f"row group 0 of Parquet file {path} holds at least {least:,}")


_SLICE_PEAK = r"""
import sys
import pyarrow as pa
from fair_forge_beam.io.read import _ReadParquetRowGroup
n = 0
for _, _, r in _ReadParquetRowGroup(2**20).process((sys.argv[1], 0)):
    n += 1
print(n, pa.default_memory_pool().max_memory())
"""


@pytest.mark.slow
def test_a_row_group_is_decoded_a_slice_at_a_time(tmp_path):
    """Issue 28 (fix28j): a row group within the metadata bound was decoded whole as Arrow data (up
    to rows x the limit: here 4,000 rows of 100 KB, 400 MB; Arrow's pool peaked at ~650 MB). It is
    read a slice at a time (about 8 MiB of rows), its pages streamed: Arrow's pool peaks under 64 MiB
    (measured ~20 MB), every row read."""
    import subprocess
    import sys

    n = 4000
    table = pa.table({"session_id": [f"s{i}" for i in range(n)], "assistant_id": ["bot"] * n,
                      "language": pa.array([f"{i}" + "y" * 100_000 for i in range(n)])})
    path = tmp_path / "in.parquet"
    pq.write_table(table, path, row_group_size=n, compression="zstd", write_batch_size=8)  # pages of ~1 MB
    assert pq.ParquetFile(path).metadata.num_row_groups == 1
    out = subprocess.run([sys.executable, "-c", _SLICE_PEAK, str(path)], capture_output=True, text=True, check=True)
    rows, peak = map(int, out.stdout.split())
    assert rows == n
    assert peak < 64 * MB, f"Arrow's pool peaked at {peak / MB:.0f} MiB"


def test_a_row_group_over_the_limit_by_its_data_bytes_is_never_decoded(tmp_path, monkeypatch):
    """Trial 28c (B2): a 41 KB zstd file whose second row group is one row of a 1.2 GB string was
    decoded (3.85 GB peak): the bound counted 8 bytes per value, not a string's bytes. The column
    chunks' uncompressed sizes (metadata) are in the bound too: never decoded, one dead letter."""
    from fair_forge_beam.io.read import _ReadParquetRowGroup

    n = 8 * MB
    schema = pa.schema([("session_id", pa.string()), ("assistant_id", pa.string()), ("answer", pa.string())])
    path = tmp_path / "in.parquet"
    with pq.ParquetWriter(path, schema, compression="zstd") as w:
        for sid, answer in (("s0", "ok"), ("big", "x" * n), ("s1", "ok")):
            w.write_table(pa.table({"session_id": [sid], "assistant_id": ["bot"], "answer": [answer]}, schema=schema))
    assert path.stat().st_size < 64 * 1024
    decoded = []
    real = pq.ParquetFile.iter_batches
    monkeypatch.setattr(pq.ParquetFile, "iter_batches",
                        lambda self, *a, **k: decoded.extend(k["row_groups"]) or real(self, *a, **k))
    got = [item for rg in range(3) for item in _ReadParquetRowGroup(MB).process((str(path), rg))]
    assert decoded == [0, 2]
    assert [r["session_id"] for _, _, r in got if not isinstance(r, ReadError)] == ["s0", "s1"]
    [(_, _, dead)] = [g for g in got if isinstance(g[2], ReadError)]
    assert "its column chunks' uncompressed data, from its metadata), over the limit of 1,048,576 bytes" in dead.reason
