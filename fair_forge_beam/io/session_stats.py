"""Stored statistics: each audit's per-session accumulators, as typed, versioned, columnar Parquet.

An audit writes, beside its results, the exact inputs of its slice stage — the accumulators of
the engine's session combine (:class:`~fair_forge_beam.engine.SessionLayout`) — so that
``fair-forge-beam rollup`` can merge any set of audits into one result without reading a raw
log again (DESIGN §10, docs/scheduled.md). Layout under ``--output``::

    stats/manifest.json                 what the run was: schema version, product version, the
                                        statistical mode, the metrics and every option that builds
                                        them, the slices, each metric's static fields, and which
                                        metrics stored their statistics (or why not)
    stats/<metric>/part-*.parquet       one row per session of that metric
    stats/counts/part-*.parquet         the run's additive counts: interactions read, dead letters
                                        per (stage, reason kind), data-quality warnings per kind
                                        (except the session stage's own, which a roll-up recomputes)

A session row (schema :func:`metric_schema`; Parquet key-value metadata
``fair_forge_beam.stats_schema_version``):

* ``session_id``, ``assistant_id``, ``language`` (strings): the session key;
* ``meta_values`` (list of strings, ``null`` = the session does not carry the field) and
  ``meta_differ`` (bool): the session's metadata slice values, when the run sliced by metadata
  fields (:class:`~fair_forge_beam.engine.MetadataDimsCombineFn`);
* ``session``: the metric's session accumulator, typed by its ``CombineFn``
  (:class:`~fair_forge_beam.statistical.combiners.StoredAccumulator`): e.g. Humanity's list of
  ``struct<turn_index, weight, entropy, spearman, counts>``, one per interaction, Toxicity's
  ``struct<a: answers, b: toxic answers, counts: map<group index, answers>>``;
* ``cells``: the session's interaction-side statistics (Toxicity's group-fairness and token
  inputs, one struct per answer), when the metric has any.

No column holds JSON text: a warehouse (DuckDB, BigQuery, Spark) reads ``session.turn_index`` or
``cells.flagged`` directly. Floats are float64 and integers int64, stored exactly, so merging
stored accumulators gives the same bits as accumulating the interactions in one run.
"""
from __future__ import annotations

import json
from typing import Any, Optional, Sequence

import pyarrow as pa

from fair_forge_beam._beam import beam

__all__ = [
    "STATS_SCHEMA_VERSION", "STATS_DIR", "SCHEMA_VERSION_KEY", "WriteSessionStats", "metric_schema",
    "not_storable_reason", "decode_rows", "COUNTS_SCHEMA", "READER_SCHEMA", "StatsSchemaMismatch", "check_schema_version",
    "write_table", "reader_summary",
]

#: version of the stored-statistics schema (``stats/`` of an audit's output folder); a roll-up
#: refuses files of another version with a one-line usage error naming both
STATS_SCHEMA_VERSION = 1
#: the folder of stored statistics under ``--output``
STATS_DIR = "stats"
#: the Parquet key-value metadata key holding :data:`STATS_SCHEMA_VERSION`
SCHEMA_VERSION_KEY = b"fair_forge_beam.stats_schema_version"

#: each session's record summary as the reader saw it (``stats/reader``): what its turn numbering
#: and its reader warnings depend on (:func:`fair_forge_beam.io.read.session_records`), so that a
#: roll-up numbers a session split across runs as one audit of all their inputs would
READER_SCHEMA = pa.schema([
    pa.field("session_id", pa.string(), nullable=False), pa.field("assistant_id", pa.string(), nullable=False),
    pa.field("records", pa.list_(pa.struct([
        ("declared", pa.int64()), ("source", pa.string()), ("position", pa.int64()), ("n_slots", pa.int64()),
        ("from_session", pa.bool_()), ("items", pa.list_(pa.struct([("at", pa.int64()), ("qa_id", pa.string())]))),
    ]))),
], metadata={SCHEMA_VERSION_KEY: str(STATS_SCHEMA_VERSION).encode()})

#: the additive counts of a run (``stats/counts``): ``kind`` is ``read`` (``count`` = interactions
#: read), ``dead`` (``stage``, ``reason`` = reason kind) or ``quality`` (``reason`` = warning kind)
COUNTS_SCHEMA = pa.schema([("kind", pa.string()), ("stage", pa.string()), ("reason", pa.string()),
                           ("count", pa.int64())], metadata={SCHEMA_VERSION_KEY: str(STATS_SCHEMA_VERSION).encode()})

_KEY_FIELDS = [pa.field("session_id", pa.string(), nullable=False), pa.field("assistant_id", pa.string(), nullable=False),
               pa.field("language", pa.string(), nullable=False)]


class StatsSchemaMismatch(ValueError):
    """Stored statistics of another schema version than this package reads."""


def not_storable_reason(layout, slot: int) -> Optional[str]:
    """Why metric ``slot`` of ``layout`` cannot store its session statistics (``None``: it can)."""
    spec = layout.specs[slot]
    if spec.session_value is None and spec.cell_value is None:
        return "it has no session statistics"
    if spec.session_value is not None and _stored_type(layout.fns[slot]) is None:
        return "its session values declare no stored type"
    if spec.cell_value is not None and _stored_type(layout.fns[layout.cell_slot(slot)]) is None:
        return "its interaction-side values declare no stored type"
    if spec.aux is not None:
        return "its estimator needs a whole-dataset stage (e.g. cluster profiling over the vectors)"
    return None


def _stored_type(fn) -> Optional[pa.DataType]:
    get = getattr(fn, "stored_type", None)
    return get() if get is not None else None


def metric_schema(layout, slot: int) -> pa.Schema:
    """The Parquet schema of metric ``slot``'s session rows (see the module docstring)."""
    spec = layout.specs[slot]
    fields = list(_KEY_FIELDS)
    if layout.dims:
        fields += [pa.field("meta_values", pa.list_(pa.string())), pa.field("meta_differ", pa.bool_())]
    if spec.session_value is not None:
        fields.append(pa.field("session", _stored_type(layout.fns[slot])))
    if spec.cell_value is not None:
        fields.append(pa.field("cells", _stored_type(layout.fns[layout.cell_slot(slot)])))
    return pa.schema(fields, metadata={SCHEMA_VERSION_KEY: str(STATS_SCHEMA_VERSION).encode(),
                                       b"fair_forge_beam.metric": spec.name.encode(),
                                       b"fair_forge_beam.slices": json.dumps(list(spec.slices)).encode()})


class _ToRows(beam.DoFn):
    """``(session key, [accumulator per slot])`` → metric ``slot``'s row dict (nothing when the
    session has no value of that metric)."""

    def __init__(self, layout, slot: int):
        self.layout, self.slot = layout, slot

    def process(self, kv):
        key, accs = kv
        lay, slot = self.layout, self.slot
        spec = lay.specs[slot]
        session = accs[slot] if spec.session_value is not None else None
        cells = accs[lay.cell_slot(slot)] if spec.cell_value is not None else None
        if session is None and cells is None:
            return
        row = {"session_id": key[0], "assistant_id": key[1], "language": key[2]}
        if lay.dims:
            dims = accs[lay.dims_slot]
            values, differ = dims if dims is not None else ((None,) * len(lay.dims), False)
            row["meta_values"], row["meta_differ"] = list(values), bool(differ)
        if spec.session_value is not None:
            row["session"] = None if session is None else lay.fns[slot].to_stored(session)
        if spec.cell_value is not None:
            row["cells"] = None if cells is None else lay.fns[lay.cell_slot(slot)].to_stored(cells)
        yield row


def _table(schema: pa.Schema):
    def fn(rows) -> pa.Table:
        return pa.Table.from_pylist(rows, schema=schema)

    return fn


def write_table(pcoll, label: str, prefix: str, schema: pa.Schema, rows_per_table: int = 10_000):
    """Rows (dicts) → Parquet shards ``prefix-SSSSS-of-NNNNN.parquet`` of ``schema``, as Arrow
    tables of up to ``rows_per_table`` rows (``BatchElements`` + ``WriteToParquetBatched``)."""
    return (
        pcoll
        | f"{label}Batch" >> beam.BatchElements(min_batch_size=rows_per_table, max_batch_size=rows_per_table)
        | f"{label}Table" >> beam.Map(_table(schema))
        | f"Write{label}" >> beam.io.WriteToParquetBatched(prefix, schema, file_name_suffix=".parquet")
    )


class WriteSessionStats:
    """The main job's stored statistics (see the module docstring): give it to
    :func:`~fair_forge_beam.engine.apply_metrics` as ``on_session_accumulators`` (it writes each
    storable metric's session rows), then call :meth:`write_counts` and :meth:`write_manifest`.

    Args:
        out: the output folder.
        manifest: the run's description (:func:`fair_forge_beam.rollup.audit_manifest`); the
            metrics that stored or could not store their statistics are added to it.

    ``written``: the results of the sinks attached so far (PCollections of the written file
    names), for a step that must run after them (``reports.output_folder.publish_after``).
    """

    def __init__(self, out: str, manifest: dict):
        self.out, self.manifest = out, dict(manifest)
        self.written: list = []
        self.stored: dict[str, str] = {}
        self.not_stored: dict[str, str] = {}
        self.session_quality: list = []

    def __call__(self, accumulators, layout, session_quality: Sequence = ()) -> None:
        self.session_quality += list(session_quality)
        for slot, spec in enumerate(layout.specs):
            reason = not_storable_reason(layout, slot)
            if reason is not None:
                self.not_stored[spec.name] = reason
                continue
            self.stored[spec.name] = f"{STATS_DIR}/{spec.name}/"
            rows = accumulators | f"Stats_{spec.name}/Rows" >> beam.ParDo(_ToRows(layout, slot))
            self.written.append(write_table(rows, f"Stats_{spec.name}/", f"{self.out}/{STATS_DIR}/{spec.name}/part",
                                            metric_schema(layout, slot)))

    def write_reader(self, records) -> None:
        """The reader's record summaries ``((session_id, assistant_id), summary)`` → ``stats/reader``."""
        rows = records | "StatsReaderRows" >> beam.Map(_reader_row)
        self.written.append(write_table(rows, "StatsReader", f"{self.out}/{STATS_DIR}/reader/part", READER_SCHEMA))

    def write_counts(self, parts, session_quality: Sequence = ()) -> None:
        """``parts``: the run's ``("read", None, n)``, ``("dead", (stage, reason kind), 1)`` and
        ``("quality", kind, 1)`` elements (the results document's counting inputs); the warnings
        of the session stages — the engine's and ``session_quality`` (the reader's) — are
        subtracted: a roll-up recomputes them."""
        minus = [q | f"StatsSessionQuality{i}" >> beam.Map(lambda w: ("quality", str(w.kind), -1))
                 for i, q in enumerate([*self.session_quality, *session_quality])]
        every = (parts, *minus) | "StatsCountParts" >> beam.Flatten() if minus else parts
        rows = (
            every
            | "StatsCountKeys" >> beam.Map(_count_key)
            | "StatsCountSum" >> beam.CombinePerKey(sum)
            | "StatsCountRows" >> beam.MapTuple(lambda k, n: {"kind": k[0], "stage": k[1], "reason": k[2], "count": n})
        )
        self.written.append(write_table(rows, "StatsCounts", f"{self.out}/{STATS_DIR}/counts/part", COUNTS_SCHEMA))

    def write_manifest(self, p) -> None:
        """``stats/manifest.json`` from the pipeline (a Flex Template launch writes it too)."""
        doc = {**self.manifest, "stats_schema_version": STATS_SCHEMA_VERSION,
               "stored": dict(sorted(self.stored.items())), "not_stored": dict(sorted(self.not_stored.items()))}
        text = json.dumps(doc, indent=2, ensure_ascii=False)  # key order kept: static fields are written as given
        self.written.append(
            p
            | "StatsManifest" >> beam.Create([text])
            | "WriteStatsManifest" >> beam.io.WriteToText(f"{self.out}/{STATS_DIR}/manifest.json", num_shards=1,
                                                          shard_name_template="", append_trailing_newlines=False))


def _reader_row(kv) -> dict:
    (session_id, assistant_id), records = kv
    return {"session_id": session_id, "assistant_id": assistant_id, "records": [
        {"declared": rk[0], "source": rk[1], "position": rk[2], "n_slots": n, "from_session": bool(fs),
         "items": [{"at": at, "qa_id": qa} for at, qa in items]}
        for rk, (n, fs, items) in sorted(records.items())]}


def reader_summary(row: dict) -> tuple:
    """A ``stats/reader`` row → ``((session_id, assistant_id), summary)`` (the inverse of the writer)."""
    return (row["session_id"], row["assistant_id"]), {
        (r["declared"], r["source"], r["position"]): (r["n_slots"], r["from_session"],
                                                      [(i["at"], i["qa_id"]) for i in r["items"]])
        for r in row["records"]}


def _count_key(el) -> tuple:
    kind, key, value = el
    if kind == "read":
        return ("read", None, None), value
    if kind == "dead":
        return ("dead", str(key[0]), str(key[1])), value
    return ("quality", None, str(key)), value


def decode_rows(rows, layout, slot: int):
    """Stored session rows (dicts, as ``pyarrow``'s ``to_pylist`` gives them) of metric ``slot``
    → ``(session key, (slot, Combined(accumulator)))`` inputs of the session combine (also for
    the cell slot and the metadata slot)."""
    from fair_forge_beam.engine import Combined

    spec = layout.specs[slot]
    for row in rows:
        key = (row["session_id"], row["assistant_id"], row["language"])
        if layout.dims:
            values = tuple(row["meta_values"] or ())
            yield key, (layout.dims_slot, Combined((values, bool(row["meta_differ"]))))
        if spec.session_value is not None and row.get("session") is not None:
            yield key, (slot, Combined(layout.fns[slot].from_stored(row["session"])))
        if spec.cell_value is not None and row.get("cells") is not None:
            cs = layout.cell_slot(slot)
            yield key, (cs, Combined(layout.fns[cs].from_stored(row["cells"])))


def check_schema_version(found: Any, where: str) -> None:
    """Raises :class:`StatsSchemaMismatch` (one line naming both versions) unless ``found`` is
    this package's :data:`STATS_SCHEMA_VERSION`."""
    try:
        ok = int(found) == STATS_SCHEMA_VERSION
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise StatsSchemaMismatch(
            f"{where}: stored statistics of schema version {found}, but this fair_forge_beam reads version "
            f"{STATS_SCHEMA_VERSION}: roll up runs made by the same version (or re-run the audits)")
