"""Every writer of the package: the sinks a pipeline attaches (batch and windowed) and the whole
files a pipeline writes once at its end. Works on every Beam filesystem (local, ``gs://``, …).

==============================  ================================================================
:func:`to_json_line`            the canonical JSON line: UTF-8, standard JSON, secrets masked in
                                values (never in keys)
:func:`write_jsonl`             ``PCollection`` → JSON Lines shards ``prefix-SSSSS-of-NNNNN.jsonl``
:func:`read_jsonl_shards`       the shards of :func:`write_jsonl` read back (local paths)
:func:`write_parquet`           ``PCollection`` of rows → Parquet shards of one schema, written as
                                Arrow tables of many rows (``BatchElements`` +
                                ``WriteToParquetBatched``), never row by row
:class:`ShardedOutputs`         several outputs' JSON Lines and Parquet shards (folders
                                ``<name>/part-SSSSS-of-NNNNN.*``) by one ``fileio.WriteToFiles``
                                for all, an empty shard for an empty output (the main job)
:func:`write_one_file`          a ``PCollection`` of one text → exactly one file (``results.json``,
                                ``stats/manifest.json``)
:func:`write_files`             a ``PCollection`` of one element → several whole files, one step
:func:`write_window_files`      windowed ``PCollection`` → one JSON Lines file per window and pane
                                (``fileio.WriteToFiles``; streaming runs)
:class:`OutputFiles`            whole files written once, in order, from inside a pipeline
                                (``generate``, ``run_assistant``)
==============================  ================================================================

Where a run's files go (the output folder, its staging and publishing) is
:mod:`fair_forge_beam.reports.output_folder`; what each file holds is documented by the module that
builds its records.
"""
from __future__ import annotations

import glob
import json
import os
from typing import Any, Callable, Optional

from fair_forge_beam._beam import beam

__all__ = ["to_json_line", "write_jsonl", "read_jsonl_shards", "write_parquet", "ShardedOutputs", "PARQUET_WRITER_OPTIONS", "scrub_table", "write_one_file", "write_files", "write_window_files", "replace_file", "replace_files",
           "OutputFiles", "sorted_dead_letters", "arrow_array", "arrow_rows_table", "UnwritableValue"]


def to_json_line(record) -> str:
    """One JSON line (UTF-8 text, ``NaN``/``inf`` rejected so every line is standard JSON), with
    the values of the API-key variables masked (:func:`~fair_forge_beam.io.secrets.scrub_known`:
    defence at the writer; judge text is scrubbed when it arrives already) and every URL's
    credentials (:func:`~fair_forge_beam.urls.mask_url_secrets`; without a key, on the line's text).

    ``record``: a dict, a ``NamedTuple`` or an object with ``as_record()`` (an interaction: its
    optional tail fields only when set). Raises ``ValueError`` on ``NaN``/``inf``."""
    from fair_forge_beam.io.secrets import known_secrets, masks_nothing, scrub_known
    from fair_forge_beam.io.edge import scrub_json_text
    from fair_forge_beam.urls import mask_url_secrets

    if hasattr(record, "as_record"):
        record = record.as_record()
    elif hasattr(record, "_asdict"):
        record = record._asdict()
    # lone surrogates (hostile text) become visible escape text: the line is always UTF-8
    # API-key values masked in the record's values, never in its keys (a key is a field name)
    if not known_secrets():  # no key: the line's URL credentials only, masked in its text (one pass, no walk)
        return scrub_json_text(mask_url_secrets(json.dumps(record, ensure_ascii=False, allow_nan=False,
                                                           separators=(",", ":"), default=str)))
    return scrub_json_text(json.dumps(record if masks_nothing(record) else scrub_known(record), ensure_ascii=False, allow_nan=False,
                                      separators=(",", ":"), default=str))


def write_jsonl(pcoll: beam.PCollection, prefix: str, label: str, num_shards: int = 0) -> beam.PCollection:
    """Write a PCollection of dicts / NamedTuples as JSON Lines shards ``prefix-SSSSS-of-NNNNN.jsonl``
    (``num_shards`` 0: the runner decides). Returns the written file names."""
    return (
        pcoll
        | f"{label}ToJson" >> beam.Map(to_json_line)
        | f"{label}Write" >> beam.io.WriteToText(prefix, file_name_suffix=".jsonl", num_shards=num_shards)
    )


def read_jsonl_shards(prefix: str) -> list[dict]:
    """Read back every shard written by :func:`write_jsonl` (local paths), in shard order."""
    out = []
    for path in sorted(glob.glob(glob.escape(prefix) + "-*-of-*.jsonl")):
        with open(path, encoding="utf-8") as f:
            out.extend(json.loads(line) for line in f if line.strip())
    return out


class UnwritableValue(ValueError):
    """A value that the Arrow column it is written to cannot hold (an integer beyond int64, text in a
    number column): a value read from outside that its edge did not bound — a bug of the package,
    since every integer field read from outside is bounded where it is validated
    (:func:`~fair_forge_beam.schemas.common.bounded_int`). Names the output, the column and the
    value, where pyarrow said ``OverflowError: Python int too large to convert to C long``."""


def _unwritable(what: str, column: str, t, values) -> UnwritableValue:
    """The :class:`UnwritableValue` of the first of ``values`` that ``t`` cannot hold (each tried
    alone: only when the whole column failed)."""
    import pyarrow as pa

    from fair_forge_beam.quoting import quoted

    bad = next((v for v in values if not _fits(pa, [v], t)), None)
    shown = quoted(bad, 60) if bad is not None else "a value"
    return UnwritableValue(f"{what}: column {quoted(column)} ({t}) cannot hold {shown}: a value read from outside "
                           "reached a writer unbounded (a bug: every field read from outside is bounded where it is read)")


def _fits(pa, values: list, t) -> bool:
    try:
        pa.array(values, type=t)
        return True
    except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
        return False


def arrow_array(values: list, t, what: str, column: str):
    """``pa.array(values, type=t)``, the one way the writers make an Arrow column of values: a value
    ``t`` cannot hold raises :class:`UnwritableValue` naming ``what`` (the output), the column and
    the value, never pyarrow's ``OverflowError`` without them (trial49b B1)."""
    import pyarrow as pa

    try:
        return pa.array(values, type=t)
    except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError):
        raise _unwritable(what, column, t, values) from None


def arrow_rows_table(rows: list, schema, what: str):
    """``pa.Table.from_pylist(rows, schema=schema)`` (rows: dicts of the schema's fields); a value a
    column cannot hold raises :class:`UnwritableValue` as :func:`arrow_array` does."""
    import pyarrow as pa

    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError):
        for f in schema:
            values = [r.get(f.name) if isinstance(r, dict) else None for r in rows]
            if not _fits(pa, values, f.type):
                raise _unwritable(what, f.name, f.type, values) from None
        raise


def _rows_table(schema, what: str):
    def fn(rows) -> "pa.Table":
        return arrow_rows_table(rows, schema, what)

    return fn


def _has_text(t) -> bool:
    import pyarrow as pa

    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return True
    if pa.types.is_struct(t):
        return any(_has_text(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _has_text(t.value_type)
    if pa.types.is_map(t):
        return _has_text(t.key_type) or _has_text(t.item_type)
    return False


def _holds_any(col, needles: tuple) -> bool:
    """Whether a text of the Arrow column ``col`` (at any depth of its structs, lists and maps, as
    :func:`_has_text` finds them) may hold one of ``needles``: Arrow's substring search over each
    text array (children in full: the values of null structs and of sliced lists can only add a
    hit); a type it cannot look into counts as a hit."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def texts(arr):
        t = arr.type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            yield arr
        elif pa.types.is_struct(t):
            for i in range(t.num_fields):
                yield from texts(arr.field(i))
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            yield from texts(arr.values)
        elif pa.types.is_map(t):
            yield from texts(arr.keys)
            yield from texts(arr.items)
        elif _has_text(t):
            yield None  # cannot look into it: a hit

    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    for arr in (a for chunk in chunks for a in texts(chunk)):
        if arr is None or any(pc.any(pc.match_substring(arr, n)).as_py() for n in needles):
            return True
    return False


def scrub_table(table):
    """``table`` (a ``pyarrow.Table``) with the values of the API-key variables masked in every
    text it holds, at any depth (structs, lists), except the names under
    :data:`~fair_forge_beam.io.secrets.NAME_FIELDS` (:func:`~fair_forge_beam.io.secrets.scrub_known`),
    and the credentials of every URL (:func:`~fair_forge_beam.urls.mask_url_secrets`, with or
    without a key). The same table when no text holds one. A column none of whose texts holds a
    needle of :func:`~fair_forge_beam.io.secrets.known_needles` (Arrow's substring search) is kept
    without reading its values into Python."""
    import pyarrow as pa

    from fair_forge_beam.io.secrets import known_needles, scrub_known

    needles = known_needles()
    cols = []
    for name, col in zip(table.column_names, table.columns):
        if _has_text(col.type) and (needles is None or _holds_any(col, needles)):  # most columns: no walk
            values = col.to_pylist()
            masked = scrub_known({name: values})[name]
            col = pa.array(masked, type=col.type) if masked != values else col
        cols.append(col)
    return pa.Table.from_arrays(cols, schema=table.schema)


def _table_fn(schema, to_table: Optional[Callable], masked: bool, what: str) -> Callable:
    """A batch of rows → its ``pyarrow.Table`` of ``schema`` (``to_table``, default: the rows are
    dicts of ``schema``'s fields), every text masked (:func:`scrub_table`) unless ``masked``."""
    make = to_table or _rows_table(schema, what)
    return make if masked else (lambda batch: scrub_table(make(batch)))


def _batched_tables(pcoll, label: str, rows: int, table_fn: Callable) -> list:
    """``pcoll`` (a PCollection, or a tuple of them) → one PCollection of ``table_fn``'s tables per
    input, each of batches of up to ``rows`` rows (``BatchElements``): the rows of several inputs are
    never flattened, only what ``table_fn`` makes of them (:func:`write_parquet`)."""
    many = isinstance(pcoll, (tuple, list)) and len(pcoll) > 1
    pcolls = list(pcoll) if isinstance(pcoll, (tuple, list)) else [pcoll]
    # declared, not inferred: Beam's type inference walks the bytecode of the function and of what it
    # calls (pyarrow, scrub_table), 0.06 CPU s for README's job's two stats tables, to find Any
    return [pc
            | f"{label}Batch{f'/{i}' if many else ''}" >> beam.BatchElements(min_batch_size=rows, max_batch_size=rows)
            | f"{label}Table{f'/{i}' if many else ''}" >> beam.Map(table_fn).with_output_types(Any)
            for i, pc in enumerate(pcolls)]


def write_parquet(pcoll, label: str, prefix: str, schema, rows: int,
                  to_table: Optional[Callable] = None, masked: bool = False) -> beam.PCollection:
    """``pcoll`` of rows → Parquet shards ``prefix-SSSSS-of-NNNNN.parquet`` of ``schema`` (a
    ``pyarrow.Schema``), as Arrow tables of up to ``rows`` rows (``BatchElements`` +
    ``WriteToParquetBatched``). ``to_table``: a list of ``pcoll``'s elements → ``pyarrow.Table``
    (default: the elements are dicts of ``schema``'s fields). Every text value is masked on its way
    out (:func:`scrub_table`), unless ``masked``: ``to_table`` masks its values itself. Returns the
    written file names. The main job writes its outputs with :class:`ShardedOutputs` instead (one
    writer for all).

    ``pcoll`` may be a tuple of PCollections (e.g. the interaction records of several metrics): each
    is batched and made into tables on its own and only the tables are flattened, since a runner that
    materialises a ``Flatten`` of several inputs (FnApiRunner) would otherwise write and read every
    row once more (docs/performance.md). A table then holds rows of one input only."""
    tables = _batched_tables(pcoll, label, rows, _table_fn(schema, to_table, masked, prefix))
    merged = tuple(tables) | f"{label}Tables" >> beam.Flatten() if len(tables) > 1 else tables[0]
    return merged | f"Write{label}" >> beam.io.WriteToParquetBatched(prefix, schema, file_name_suffix=".parquet")


#: the options of Beam's ``WriteToParquetBatched`` (its defaults, which :func:`write_parquet` keeps):
#: :class:`ShardedOutputs` writes a table with the same ``pyarrow.parquet.ParquetWriter`` settings, so
#: a shard of the same tables has the same bytes
PARQUET_WRITER_OPTIONS = {"compression": "none", "use_deprecated_int96_timestamps": False,
                          "use_compliant_nested_type": False}


def _make_folder(folder: str) -> None:
    """``folder`` made (local; nothing to make on an object store); there already is fine."""
    from apache_beam.io.filesystems import FileSystems

    try:
        FileSystems.mkdirs(folder)
    except OSError:  # Beam's LocalFileSystem: the folder exists (a file there fails the create or move after)
        pass


class _ShardSink:
    """One output's ``fileio.FileSink`` (``open``, ``write``, ``flush``, ``create_metadata``; duck-typed,
    so that importing this module does not import ``fileio``): the records it is given are
    ``(destination, payload)``. ``folder``: the output's final folder, made before its first file
    is written: ``WriteToFiles``' final move renames into it, and Beam's local rename neither makes a
    missing folder nor fails the step when it is missing (it logs and goes on)."""

    mime_type = "application/octet-stream"

    def __init__(self, folder: str):
        self.folder = folder
        self._fh = None

    def create_metadata(self, destination: str, full_file_name: str):
        from apache_beam.io.filesystem import CompressionTypes
        from apache_beam.io.fileio import FileMetadata

        _make_folder(self.folder)
        return FileMetadata(mime_type=self.mime_type, compression_type=CompressionTypes.UNCOMPRESSED)

    def open(self, fh) -> None:
        self._fh = fh


class _JsonLinesSink(_ShardSink):
    """JSON Lines as ``WriteToText`` writes them: each text UTF-8, then a newline."""

    mime_type = "text/plain"

    def write(self, record) -> None:
        self._fh.write(record[1].encode("utf-8"))
        self._fh.write(b"\n")

    def flush(self) -> None:
        self._fh.flush()


class _ParquetSink(_ShardSink):
    """Arrow tables of one schema as one Parquet file, as ``WriteToParquetBatched`` writes them
    (:data:`PARQUET_WRITER_OPTIONS`, a row group per table); ``flush`` writes the footer (``fileio``
    calls it once, before it closes the file)."""

    mime_type = "application/x-parquet"

    def __init__(self, folder: str, schema):
        super().__init__(folder)
        self.schema = schema
        self._writer = None

    def open(self, fh) -> None:
        import pyarrow.parquet as pq

        self._writer = pq.ParquetWriter(fh, self.schema, **PARQUET_WRITER_OPTIONS)

    def write(self, record) -> None:
        try:
            self._writer.write_table(record[1])
        except BaseException:
            self._abandon()
            raise

    def flush(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except BaseException:
                self._abandon()
                raise
            self._writer = None

    def _abandon(self) -> None:
        """A write that failed, or a bundle that failed before this file's ``flush`` (a full disk, ``ulimit
        -f``): the file is cut short and goes with its stage, and the writer is never closed again —
        pyarrow's ``ParquetWriter.__del__`` would write the footer into the full disk once more when the
        failed bundle's sinks are collected, each time an ``Exception ignored … OSError: [Errno 27]``
        traceback on stderr after the command's one line (the loop's audit stage under ``ulimit -f``: two)."""
        if self._writer is not None:
            self._writer.is_open = False
            self._writer = None

    def __del__(self):  # never flushed: a failed bundle's sink (runs before its writer's own __del__)
        self._abandon()


class _Outputs:
    """The outputs of a :class:`ShardedOutputs` as ``WriteToFiles`` asks for them: a destination
    (the output's folder, relative to the root) → its sink (called) and its shard names
    (:meth:`name`)."""

    def __init__(self, folder: str, outputs: dict):
        self.folder = folder
        self.outputs = outputs  # destination -> (suffix, schema or None)

    def path(self, destination: str) -> str:
        from apache_beam.io.filesystems import FileSystems

        return FileSystems.join(self.folder, destination)

    def __call__(self, destination: str):
        suffix, schema = self.outputs[destination]
        return _JsonLinesSink(self.path(destination)) if schema is None else _ParquetSink(self.path(destination), schema)

    def name(self, window, pane, shard_index, total_shards, compression, destination) -> str:
        """``WriteToFiles``' ``file_naming``: ``<destination>/part-SSSSS-of-NNNNN<suffix>``, Beam's
        shard names (its final move knows each destination's shard index and count)."""
        return f"{destination}/part-{shard_index:05d}-of-{total_shards:05d}{self.outputs[destination][0]}"


def _complete_outputs(_, outputs: _Outputs, temp: str, written) -> list:
    """After ``WriteToFiles``' final move (``written``: its ``FileResult`` records): its temporary folder
    ``temp`` removed, every moved shard checked in place, and each output that got no shard given
    its empty one, ``part-00000-of-00001`` (a Parquet file with the schema and no row; an empty JSON
    Lines file), as Beam's ``WriteToText`` and ``WriteToParquetBatched`` write for an empty input:
    readers, roll-ups and the manifest's sealed files expect one. Returns every shard's path, sorted.
    Idempotent (a retried step writes the same empty shards)."""
    from apache_beam.io.filesystems import FileSystems

    # every temporary file was moved (or is a retried bundle's left-over): fileio's folder holds files only
    left = [m.path for m in FileSystems.match([FileSystems.join(temp, "*")])[0].metadata_list]
    if left:
        FileSystems.delete(left)
    if FileSystems.exists(temp):  # a local folder (an object store has none)
        FileSystems.delete([temp])
    names: dict = {}
    for r in written:
        names.setdefault(r.destination, []).append(FileSystems.join(outputs.folder, r.file_name))
    paths = []
    for destination in outputs.outputs:
        moved = names.get(destination)
        if moved:
            found = {m.path for m in FileSystems.match([FileSystems.join(outputs.path(destination), "part-*")])[0].metadata_list}
            missing = sorted(set(moved) - found)
            if missing:  # fileio's move logs a failed rename and goes on: never a run with a shard left out
                raise OSError(f"{len(missing)} shard(s) of {destination}/ were not moved into place: {missing[0]} "
                              f"(from the temporary folder {temp})")
            paths.extend(moved)
            continue
        path = FileSystems.join(outputs.folder, outputs.name(None, None, 0, 1, "", destination))
        sink = outputs(destination)
        fh = FileSystems.create(path, **sink.create_metadata(destination, path)._asdict())
        try:
            sink.open(fh)
            sink.flush()
        finally:
            fh.close()
        paths.append(path)
    return sorted(paths)


class _WriteOutputs(beam.PTransform):
    """The records of several outputs (``(destination, payload)``; PCollections, flattened here) →
    their shards, by one ``fileio.WriteToFiles`` (:class:`ShardedOutputs`)."""

    def __init__(self, outputs: _Outputs):
        super().__init__()
        self.outputs = outputs

    def expand(self, parts):
        import uuid

        from apache_beam.io import fileio
        from apache_beam.io.filesystems import FileSystems
        from apache_beam.options.value_provider import StaticValueProvider

        # fileio's own temporary folder name (.temp<uuid>), in the output folder: output_folder's
        # TEMPORARY_PATTERNS, never published (and removed by the step after the move)
        temp = FileSystems.join(self.outputs.folder, f".temp{uuid.uuid4()}")
        records = parts | "Flatten" >> beam.Flatten() if len(parts) > 1 else parts[0]
        written = records | "WriteToFiles" >> fileio.WriteToFiles(
            path=self.outputs.folder, file_naming=self.outputs.name, destination=_destination_of,
            temp_directory=StaticValueProvider(str, temp), sink=self.outputs,
            # one writer per output in a bundle: no record is spilled to fileio's sharded path (a shuffle)
            max_writers_per_bundle=max(len(self.outputs.outputs), fileio.WriteToFiles.MAX_NUM_WRITERS_PER_BUNDLE))
        return (
            records.pipeline
            | "Once" >> beam.Impulse()  # one element (Create([None]) was four transforms)
            | "Complete" >> beam.FlatMap(_complete_outputs, self.outputs, temp, beam.pvalue.AsList(written))
        )


def _destination_of(record) -> str:
    return record[0]


def _tag_line(record, destination: str) -> tuple:
    return destination, to_json_line(record)


class _TagTable:
    """A batch of rows → ``(destination, its table)``."""

    def __init__(self, destination: str, table_fn: Callable):
        self.destination, self.table_fn = destination, table_fn

    def __call__(self, batch) -> tuple:
        return self.destination, self.table_fn(batch)


class ShardedOutputs:
    """Several sharded outputs of one pipeline under one ``folder`` (any Beam filesystem), written
    by one ``fileio.WriteToFiles`` for all of them: each output is a folder of shards
    ``<folder>/<name>/part-SSSSS-of-NNNNN.<jsonl|parquet>``, written as :func:`write_jsonl` and
    :func:`write_parquet` write theirs (the same bytes for the same records and tables; any number
    of shards), and an output with no record still gets its one empty shard (with the schema).

    Add the outputs (:meth:`jsonl`, :meth:`parquet`), then :meth:`write` once. One writer instead of
    a ``WriteImpl`` per output (issue 26): README's job had nine, 144 of its 301 transforms and 36 of
    its 62 bundles (each a ``DoOnce``, a ``GroupByKey`` of its bundles' results, a pre-finalize and a
    finalize step)."""

    def __init__(self, folder: str):
        self.folder = folder
        self._outputs: dict = {}  # name -> (suffix, schema or None)
        self._parts: list = []

    def _add(self, name: str, suffix: str, schema) -> str:
        name = name.strip("/")
        if name in self._outputs:
            raise ValueError(f"{name}/ is written twice")
        self._outputs[name] = (suffix, schema)
        return name

    def jsonl(self, pcoll: beam.PCollection, name: str, label: str) -> None:
        """``pcoll`` of dicts / NamedTuples (:func:`to_json_line`) → JSON Lines shards in ``<folder>/<name>/``."""
        name = self._add(name, ".jsonl", None)
        self._parts.append(pcoll | f"{label}ToJson" >> beam.Map(_tag_line, name).with_output_types(Any))

    def parquet(self, pcoll, label: str, name: str, schema, rows: int, to_table: Optional[Callable] = None,
                masked: bool = False) -> None:
        """``pcoll`` of rows (a PCollection, or a tuple of them) → Parquet shards of ``schema`` in
        ``<folder>/<name>/``, as Arrow tables of up to ``rows`` rows; ``to_table`` and ``masked`` as
        :func:`write_parquet`'s."""
        name = self._add(name, ".parquet", schema)
        self._parts.extend(_batched_tables(pcoll, label, rows, _TagTable(name, _table_fn(schema, to_table, masked, name))))

    def write(self, label: str = "WriteOutputs") -> beam.PCollection:
        """Attach the one writer of every output added; returns the written shards' paths (complete
        once every shard is in place, the empty ones too)."""
        if not self._parts:
            raise ValueError("no output to write")
        return tuple(self._parts) | label >> _WriteOutputs(_Outputs(self.folder, dict(self._outputs)))


def replace_file(path: str, write: Callable[[Any], None]) -> str:
    """Write a whole file at ``path`` (local or remote, Beam's ``FileSystems``) from inside a pipeline
    step: ``write(f)`` writes its bytes to a binary file object. Returns ``path``.

    Written under a unique ``<path>.<hex>.partial`` name, then renamed onto ``path`` (replacing it):
    two attempts at one bundle (a retry, a runner's backup attempt) never interleave their bytes in one
    file, and a reader never sees a half-written one; the last rename wins, the same bytes either way."""
    import uuid

    from apache_beam.io.filesystems import FileSystems

    partial = f"{path}.{uuid.uuid4().hex}.partial"
    try:
        with FileSystems.create(partial) as f:
            write(f)
        keep_metadata(path, partial)  # the replaced file's mode, group and ACLs (trial37 T4)
        FileSystems.rename([partial], [path])
    except BaseException:  # a full disk, a quota: no half-written .partial left behind
        _remove_quietly([partial])
        raise
    return path


def keep_metadata(existing: str, new: str, writing: bool = False) -> None:
    """Give ``new`` (a file or folder that is about to replace ``existing``) the metadata of
    ``existing``: its group (and owner, as root), its mode with the setgid / sticky bits, and its
    extended attributes — POSIX ACLs included (``shutil.copystat``, times left as ``new``'s). Local
    paths only (an object store has none of these); nothing to do when ``existing`` is not there.
    What the filesystem refuses (a group the user is not in, an xattr namespace) is left as the
    defaults gave it. ``writing``: ``new`` is a folder still to be written, so it keeps its owner's
    ``rwx`` until the final call (a ``555`` folder is replaced by a ``555`` one, written first).

    Called before every replacement of something the user owns (docs/data.md, "what is atomic
    where"): a run's stage before it is swapped in (and when it is made, so what is created inside
    it gets a setgid folder's group and a default ACL as it would have in the folder itself), and
    a whole file replaced by a rename (:func:`replace_file`, :func:`replace_files`) — trial37 T4."""
    import shutil
    import stat

    if "://" in existing or "://" in new:
        return
    try:
        st = os.stat(existing)
        before = os.stat(new)
    except OSError:
        return
    for uid, gid in ((-1, st.st_gid), (st.st_uid, -1)):  # the group, then the owner (root only)
        if (gid != -1 and gid != before.st_gid) or (uid != -1 and uid != before.st_uid and os.geteuid() == 0):
            try:
                os.chown(new, uid, gid)
            except OSError:
                pass
    try:
        shutil.copystat(existing, new)  # mode (setgid, sticky), flags, xattrs and ACLs; times restored below
    except OSError:
        try:
            os.chmod(new, stat.S_IMODE(st.st_mode))
        except OSError:
            pass
    try:
        os.utime(new, ns=(before.st_atime_ns, before.st_mtime_ns))
        if writing and stat.S_ISDIR(st.st_mode):
            os.chmod(new, stat.S_IMODE(st.st_mode) | stat.S_IRWXU)
    except OSError:
        pass


def _remove_quietly(paths: list) -> None:
    from apache_beam.io.filesystems import FileSystems

    for p in paths:
        try:
            if FileSystems.exists(p):
                FileSystems.delete([p])
        except Exception:  # noqa: BLE001 - best effort: the original error is what is raised
            pass


def replace_files(files, output: Optional[str] = None, existed: Optional[bool] = None) -> list:
    """Publish several whole files together, all or nothing (local or remote, Beam's ``FileSystems``):
    ``files`` is a sequence of ``(path, data)``, ``data`` bytes or text (written UTF-8). Returns the paths.

    Every file is written in full under a unique ``<path>.<hex>.partial`` name first; only when all
    are written are they renamed onto their paths. A failure while writing (a full disk: ``ENOSPC``,
    a quota, ``ulimit -f``) removes the partial files and leaves every path as it was, then raises
    :class:`~fair_forge_beam.console.OutputWriteError` naming ``output`` (default: the one file, or the
    folder of several) and saying it is as it was (``existed``: whether it was there before the command;
    default, looked at now); the commands' 'nothing was published' is then true. The renames themselves
    need no space."""
    from fair_forge_beam.console import writing

    files = [(str(path), data) for path, data in files]
    if output is None:  # the one file, or the folder of several (optimize's three, in its --output)
        folders = {os.path.dirname(p) or "." for p, _ in files}
        output = files[0][0] if len(files) == 1 else folders.pop() if len(folders) == 1 else ", ".join(p for p, _ in files)
    with writing(output, existed, "output file" if len(files) == 1 and output == files[0][0] else "output folder"):
        return _replace_files(files)


def _replace_files(files: list) -> list:
    import uuid

    from apache_beam.io.filesystems import FileSystems

    staged = []
    try:
        for path, data in files:
            partial = f"{path}.{uuid.uuid4().hex}.partial"
            staged.append((partial, path))
            raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
            with FileSystems.create(partial) as f:
                f.write(raw)
        for partial, path in staged:
            keep_metadata(path, partial)  # the replaced file's mode, group and ACLs (trial37 T4)
            FileSystems.rename([partial], [path])
    except BaseException:
        _remove_quietly([partial for partial, _ in staged])
        raise
    return [path for _, path in staged]


def _write_whole_file(text: str, path: str) -> str:
    from fair_forge_beam.urls import mask_url_secrets

    data = mask_url_secrets(text).encode("utf-8")  # no URL credentials in any file (trial 28e B2)
    return replace_file(path, lambda f: f.write(data))


def _write_files_of(element, files) -> list:
    return [_write_whole_file(to_text(element), path) for path, to_text in files]


def write_one_file(texts: beam.PCollection, path: str, label: str,
                   to_text: Optional[Callable[[Any], str]] = None) -> beam.PCollection:
    """A ``PCollection`` holding one text → the file ``path`` exactly, UTF-8 (no shard name, no
    newline added), written by one step through Beam's ``FileSystems`` (local or remote). Returns
    the written file name. ``to_text``: the element → its text, in the same step (default: the
    element is the text).

    One ``Map``: a ``WriteToText`` of one shard expands to 11 transforms and about 4 stages (its
    ``DoOnce``, a ``GroupByKey``, the finalize step), and the README's job writes three such files."""
    if to_text is None:
        return texts | label >> beam.Map(_write_whole_file, path)
    return write_files(texts, [(path, to_text)], label)


def write_files(elements: beam.PCollection, files: list, label: str) -> beam.PCollection:
    """A ``PCollection`` holding one element → several whole files, written by one step, in
    order (each as :func:`write_one_file` writes one): ``files`` is a list of ``(path, to_text)``,
    ``to_text`` the element → that file's text. Returns the written file names.

    One step for all: a ``Map`` that makes a text and a ``Map`` that writes it were two
    transforms per file (issue 26: each transform costs graph construction, translation and a
    bundle processor's set-up)."""
    return elements | label >> beam.FlatMap(_write_files_of, list(files))


def write_window_files(pcoll: beam.PCollection, folder: str, prefix: str, label: str) -> None:
    """A windowed ``PCollection`` of records → one JSON Lines file per window and pane under
    ``folder`` (``fileio.WriteToFiles``, names ``prefix-<window>-<pane>…jsonl``)."""
    from apache_beam.io import fileio

    (
        pcoll
        | f"{label}Json" >> beam.Map(to_json_line)
        | f"{label}Write" >> fileio.WriteToFiles(path=folder, file_naming=fileio.default_file_naming(prefix, ".jsonl"),
                                                 shards=1)
    )


class OutputFiles:
    """Whole files written into one output folder through Beam's ``FileSystems`` (local or
    remote), once each, in the order asked; ``written`` lists their paths. Used by the commands
    that write a few sorted files at the end of a pipeline (``generate``, ``run_assistant``)."""

    def __init__(self, out: str):
        self.out = out
        self.written: list[str] = []

    def put(self, name: str, data: bytes) -> str:
        """Write ``data`` to ``<out>/<name>`` (replacing it); returns the path."""
        from apache_beam.io.filesystems import FileSystems

        path = replace_file(FileSystems.join(self.out, name), lambda f: f.write(data))
        self.written.append(path)
        return path

    def put_jsonl(self, name: str, records) -> str:
        """One JSON line per record (:func:`to_json_line`)."""
        return self.put(name, "".join(to_json_line(r) + "\n" for r in records).encode("utf-8"))

    def put_json(self, name: str, doc: dict) -> str:
        """``doc`` as indented JSON with sorted keys and a final newline, its values masked
        (:func:`~fair_forge_beam.io.secrets.scrub_known`: key values, URL credentials; never keys)."""
        from fair_forge_beam.io.secrets import scrub_known

        return self.put(name, (json.dumps(scrub_known(doc), indent=2, sort_keys=True, allow_nan=False) + "\n").encode("utf-8"))


def sorted_dead_letters(dead) -> list[dict]:
    """``DeadLetter`` records as dicts in a stable order (their canonical JSON), so the written file
    does not depend on the order the runner delivered them in."""
    return sorted((d._asdict() for d in dead), key=lambda d: json.dumps(d, sort_keys=True, ensure_ascii=False))
