"""Stored statistics: each audit's per-session accumulators, as typed, versioned, columnar Parquet.

An audit writes, beside its results, the exact inputs of its slice stage — the accumulators of
the engine's session combine (:class:`~fair_forge_beam.engine.SessionLayout`) — so that
``fair-forge-beam rollup`` can merge any set of audits into one result without reading a raw
log again (DESIGN §10, docs/scheduled.md). Layout under ``--output``::

    stats/sessions/part-*.parquet   one row per session: every stored metric's accumulators
    stats/slices/part-*.parquet     one row per slice: every stored metric's slice accumulator
    stats/manifest.json             what the run was: schema version, product version,
                                    results.json's config, every option that builds the metrics,
                                    the metrics' static fields, which metrics stored their
                                    statistics (or why not), the run's additive counts, the
                                    files it read (``input_files``: path, size, mtime, sha256), and the
                                    files it wrote that a roll-up reads (``files``: size and
                                    sha256 of each, :func:`seal_manifest`)

(A second engine group — metrics of other slice dimensions — writes ``sessions1/`` and
``slices1/``, and so on.)

A session row (:func:`sessions_schema`; Parquet key-value metadata
``fair_forge_beam.stats_schema_version``):

* ``session_id``, ``assistant_id``, ``language`` (strings): the session key;
* ``meta_values`` (list of strings, ``null`` = the session does not carry the field) and
  ``meta_differ`` (bool): the session's metadata slice values, when the run sliced by metadata
  fields (:class:`~fair_forge_beam.engine.MetadataDimsCombineFn`);
* ``reader``: the reader's record summary of the row's records — those of the session in the row's
  language (a record has one language): the rows of a session of several languages add up to its
  summary once (one struct per record: declared turn,
  source file, position, turn slots, items with their ``qa_id``, the record's findings about its
  interactions in the type of ``<metric>__findings`` below;
  :class:`~fair_forge_beam.io.read.SessionRecordsCombineFn`): a roll-up numbers a session that
  spans runs as one audit of all their inputs would (from its rows' records together), recomputes
  the reader's warnings, and checks the manifest's ``interactions_read`` against their items;
* ``<metric>__session``: the metric's session accumulator, typed by its ``CombineFn``
  (:class:`~fair_forge_beam.statistical.combiners.StoredAccumulator`): e.g. Humanity's list of
  ``struct<turn_index, weight, entropy, spearman, counts>``, one per interaction; Toxicity's
  ``struct<a: answers, b: toxic answers, counts: map<group index, answers>>``;
* ``<metric>__cells``: the session's interaction-side statistics (Toxicity's group-fairness and
  lexicon inputs, one struct per answer), for a metric that has any;
* ``<metric>__findings``: the metric's data-quality findings about the session's interactions
  (``MetricSpec.interaction_warnings``: Toxicity's ``answer_truncated``, Vision's
  ``empty_description``), one struct per kind: ``kind``, ``n`` (interactions), the first
  example (``element_id`` of the interaction it names, renumbered by a roll-up as the turns are;
  ``example`` and ``example_end``, the text before and after it): a roll-up merges a cut
  session's parts (counts added, the smaller example kept) and warns once, as one audit of every
  run's inputs does. The reader's findings (``empty_answer``, ``numeric_id``) are in ``reader``,
  per record;
* ``<metric>__slice``: the session's slice value (what its session stage gave the slices), for a
  metric that declares its type;
* ``<metric>__scored`` (bool; ``null``: the metric had nothing of the session): whether the
  metric scored something in the session (:func:`~fair_forge_beam.engine.session_scored`), so a
  roll-up counts the slices' sessions as one audit of every run's inputs does; for a metric that
  declares per-session evidence (:class:`~fair_forge_beam.engine.Evidence`), ``<metric>__evidence``
  (int64: bit ``j`` set when the session holds kind ``j``), so a roll-up counts the sessions behind
  each estimate as one audit does.

A slice row (:func:`slices_schema`, the same key-value metadata): ``slice`` (string: ``overall``,
``assistant_id=…``, ``language=…``, ``<metadata field>=…``) and, per stored metric,
``<metric>__acc``: the accumulator its slice estimate was made from — the metric's slice combiner
(:class:`~fair_forge_beam.engine.PairCombineFn`) as ``struct<interaction: …, session: …, n:
int64, sessions: int64>`` (``sessions``: the scored sessions; a metric declaring per-session
evidence, :class:`~fair_forge_beam.engine.Evidence`, adds ``sessions:<kind>: int64`` per kind), each side typed by its ``CombineFn``'s stored type (``null``: the metric has nothing in
that slice). E.g. Toxicity's ``interaction`` is ``struct<f0: group fairness, f1: token counts>``
(:class:`~fair_forge_beam.statistical.group_fairness.GroupFairnessCombineFn`: counts, exact
sentiment sums as ``binary``, the Bayesian replicate sums as ``list<int64>`` per group, the
answers not drawn yet) and its ``session`` the session count; Humanity's ``session`` is
``struct<f0, f1: bootstrap statistics, f2: emotion counts>``. Exact sums of floats (units of
2**-1074, :mod:`fair_forge_beam.statistical.exact`) are signed big-endian two's-complement
``binary``. A metric stores its slices when its slice combiner declares a stored type and an
exact ``subtract``; a roll-up merges the runs' slice rows and corrects only the sessions cut
across runs (``fair_forge_beam.rollup``).

No column holds JSON text: a warehouse (DuckDB, BigQuery, Spark) reads
``humanity__session.entropy`` directly. Floats are float64 and integers int64, stored exactly, so
merging stored accumulators gives the same bits as accumulating the interactions in one run.

The manifest's ``files``: ``{path relative to the output folder: {"size": bytes, "sha256": hex}}``
of every file under :data:`SEALED_FOLDERS` (``stats/`` but the manifest itself, ``sessions/``,
``results.parquet/``, ``dead_letter/``), written once the run's files are in place
(:func:`~fair_forge_beam.rollup.seal_manifest`: by the launcher after the pipeline, or by a Flex Template job's publishing
step). A roll-up refuses a run with a file there that the manifest does not list, a listed file
missing, or a file of another size or hash (:func:`~fair_forge_beam.rollup.check_sealed`): another run's shard copied in
under Beam's exact shard name, a shard edited in place or deleted. The data files themselves carry
nothing of their run, so two runs of the same input write the same bytes.

The manifest's ``counts``: ``interactions_read``, ``dead_letters`` (``[stage, reason kind,
count]``) and ``quality`` (``{kind: count}``) — the run's own, without the session stages'
warnings (the reader's and the engine's), which a roll-up recomputes over the merged sessions —
and ``interactions_read_by_slice``. A roll-up checks each count its sealed files also hold
(:func:`~fair_forge_beam.rollup.checked_counts`): the manifest cannot list its own hash. ``quality``
is also written to :data:`QUALITY_COUNTS` (``stats/quality_counts.json``, sealed), which it is checked
against.
"""
from __future__ import annotations

import json
from typing import Any, Optional, Sequence

import pyarrow as pa

from fair_forge_beam._beam import beam
from fair_forge_beam.io.write import ShardedOutputs, write_files
from fair_forge_beam.statistical.combiners import stored_type_of

__all__ = [
    "STATS_SCHEMA_VERSION", "STATS_DIR", "SCHEMA_VERSION_KEY", "WriteSessionStats", "sessions_schema",
    "not_storable_reason", "stored_columns", "StatsSchemaMismatch", "check_schema_version", "READER",
    "SESSIONS_TABLE", "count_parts", "slice_columns", "scored_columns", "evidence_columns", "session_flags", "slices_stored", "QUALITY_COLUMN", "SLICES_TABLE",
    "slices_schema", "stored_rows_problem", "slice_accumulator_columns", "read_slice_accumulators", "MANIFEST", "SEALED_FOLDERS",
    "QUALITY_COUNTS", "open_stored", "SETTINGS", "SEALED_FILES", "manifest_settings", "RUN_IDS", "RUN_ID_FIELDS",
    "sealed_by", "run_ids_of", "check_run_ids", "check_listed_file", "READER_QUALITY", "ReaderQualityCombineFn",
    "reader_extras",
]

#: version of the stored-statistics schema (``stats/`` of an audit's output folder); a roll-up
#: refuses files of another version with a one-line usage error naming both
STATS_SCHEMA_VERSION = 10
# 3: Humanity's session values hold spearman = null for an interaction without a reference
#    emotion profile (2 stored 0.0), and its slice value a separate Spearman unit (issue 28)
# 4: the slice accumulators are stored too (stats/slices/: one row per slice, issue 27)
# 6: the manifest lists the size and sha256 of every file a roll-up reads (``files``, issue 28)
# 7: results.json and the manifest's settings (stats/settings.json) are sealed too (issue 28, trial 28e B4/B6)
# 10: a metric declaring per-session evidence (MetricSpec.evidence: Toxicity, Humanity) stores in its slice
#     accumulator one more count per kind, ``sessions:<kind>`` (the scored sessions holding it; trial30 T3)
# 8: findings made per interaction are per-session state (issue 28, fix28w; issue 27: a roll-up merges a cut
#    session's): ``<metric>__findings`` columns, and a ``findings`` list in each record of the reader's summary
#: the folder of stored statistics under ``--output``, and its session table
STATS_DIR = "stats"
SESSIONS_TABLE = "sessions"
SLICES_TABLE = "slices"
#: the run's manifest, relative to its output folder
MANIFEST = f"{STATS_DIR}/manifest.json"
#: the run's data-quality warnings per kind as its manifest's ``counts["quality"]`` holds them (the
#: run's own, without the session stages'), in a file of its own under ``stats/``: sealed (its size
#: and sha256 are in the manifest's ``files``), so a roll-up checks the manifest's counts against it
#: (:func:`~fair_forge_beam.rollup.checked_counts`) — ``data_quality/`` cannot: a roll-up's holds only
#: its session stage's warnings, its runs' per-record warnings stay in their own folders
QUALITY_COUNTS = f"{STATS_DIR}/quality_counts.json"
#: the manifest's settings (:func:`manifest_settings`: what a roll-up rebuilds the metrics from and
#: compares across runs), written beside it by the pipeline: sealed, so a roll-up refuses a manifest
#: whose settings were edited (trial 28e B6: ``mode`` bayesian -> frequentist ended in a 42-line Beam
#: traceback, 'cannot reshape array of size 20000 into shape (4,0)')
SETTINGS = f"{STATS_DIR}/settings.json"
#: the manifest's fields :data:`SETTINGS` holds (``options`` without the run-only ones, ``config``
#: without its ``inputs``: two runs of one configuration hold the same bytes); ``sealed_files`` (the
#: run's own list of :data:`SEALED_FILES`) among them, so a manifest cannot drop a file from it
SETTINGS_FIELDS = ("product_version", "config", "static", "options", "stats_schema_version", "stored", "not_stored",
                   "stored_slices", "slices_not_stored", "sealed_files")
#: the manifest's fields of the run itself (not settings: they differ between two runs of one
#: input), written by the pipeline beside it: sealed, so a roll-up and a trend refuse a manifest
#: whose ``audit_runs`` or ``input_files`` were edited (they decide what counts as an overlap)
RUN_IDS = f"{STATS_DIR}/run_ids.json"
#: the manifest's fields :data:`RUN_IDS` holds
RUN_ID_FIELDS = ("run_id", "audit_runs", "input_files")
#: the files whose size and hash the manifest lists besides every file under :data:`SEALED_FOLDERS`:
#: ``results.json`` (read by ``trend``, ``--baseline`` and ``--compare``:
#: :func:`fair_forge_beam.reports.load.read_results` checks it against the manifest), ``run_info.json``
#: (read by them and by a roll-up: :func:`fair_forge_beam.reports.load.read_run_info`; written and sealed
#: after the others, :func:`~fair_forge_beam.rollup.seal_more`; a Flex Template job writes none) and
#: :data:`RUN_IDS` (under ``stats/``, sealed as its folder is; listed here so that a run that wrote it must
#: have it). A run lists them in its manifest's (and settings') ``sealed_files``; a run written before
#: that field (stats schema 7 still) sealed ``results.json`` alone (:func:`sealed_by`)
SEALED_FILES = ("results.json", "run_info.json", RUN_IDS)
#: what :func:`sealed_by` gives for a manifest without ``sealed_files``
_SEALED_BEFORE = ("results.json",)
#: the folders of an output folder whose every file the manifest lists (``files``): all a roll-up
#: reads of a run besides the manifest itself (and ``run_info.json``'s recorded options, which
#: hold the run's times: not data, and not the same for two runs of one input)
SEALED_FOLDERS = (f"{STATS_DIR}/", "sessions/", "results.parquet/", "dead_letter/")
#: bytes read at once when a file is hashed (:func:`file_digest`): the memory it needs, whatever the file's size
HASH_PIECE = 1 << 20
#: the Parquet key-value metadata key holding :data:`STATS_SCHEMA_VERSION`
SCHEMA_VERSION_KEY = b"fair_forge_beam.stats_schema_version"
#: the name of the reader's slot (:class:`~fair_forge_beam.engine.SessionLayout` extras)
READER = "reader"
#: the name of the slot of the reader's warnings of a session (:class:`~fair_forge_beam.engine.SessionLayout`
#: extras; not a column: they go to the ``quality`` column of one row of the session, its first language's)
READER_QUALITY = "reader_quality"

_KEY_FIELDS = [pa.field("session_id", pa.string(), nullable=False), pa.field("assistant_id", pa.string(), nullable=False),
               pa.field("language", pa.string(), nullable=False)]


#: the key columns of every stored row table (stored statistics, session records, results.parquet):
#: text, never null
_STORED_KEYS = ("session_id", "assistant_id", "language")


def _counts(name: str) -> bool:
    """Whether a stored integer field of this name is a count (never null, never negative): ``n``,
    ``n_…`` (``n_interactions``, ``n_units``, ``n_flagged``) and ``counts``."""
    return name == "n" or name.startswith("n_") or name == "counts"


def _checked(field: pa.Field, counting: bool = False) -> bool:
    """Whether a stored field or one inside it falls under a rule of :func:`stored_rows_problem`."""
    t = field.type
    counting = counting or _counts(field.name)
    if not field.nullable or (counting and pa.types.is_integer(t)):
        return True
    if pa.types.is_struct(t):
        return any(_checked(t.field(i)) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _checked(t.key_field) or _checked(t.item_field, counting)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _checked(t.value_field, counting)
    return False


def _nested_problem(arr, field: pa.Field, rows, present, path: str, counting: bool = False):
    """The first ``(row index, field path, what)`` of ``arr`` (the values of ``field``; ``rows``: the
    row each value belongs to; ``present``: whether the value's parents hold one) that breaks a
    rule, or ``None``: a field the stored schema declares not null, or a count, that is null where
    its parent holds a value; a count below 0. Lists and maps are followed into their items
    (a count list's items, a count map's values are counts)."""
    import numpy as np
    import pyarrow.compute as pc

    t = field.type
    counting = counting or _counts(field.name)
    is_count = counting and pa.types.is_integer(t)
    null = np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool) if arr.null_count else np.zeros(len(arr), bool)
    if (not field.nullable or is_count) and (present & null).any():
        i = int(np.argmax(present & null))
        return int(rows[i]), path, "null"
    valid = present & ~null
    if is_count and len(arr):
        negative = valid & np.asarray(pc.fill_null(pc.less(arr, 0), False).to_numpy(zero_copy_only=False), dtype=bool)
        if negative.any():
            i = int(np.argmax(negative))
            return int(rows[i]), path, f"{arr[i].as_py():,} (a count is never negative)"
    if pa.types.is_struct(t):
        for k in range(t.num_fields):
            child = t.field(k)
            if _checked(child):
                found = _nested_problem(arr.field(k), child, rows, valid, f"{path}.{child.name}")
                if found:
                    return found
        return None
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        offsets = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
        lengths = np.diff(offsets)
        values = arr.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0])) if len(offsets) else arr.values.slice(0, 0)
        rows, present = np.repeat(rows, lengths), np.repeat(valid, lengths)
        if pa.types.is_map(t):
            for child, sub, counts in ((t.key_field, values.field(0), False), (t.item_field, values.field(1), counting)):
                if _checked(child, counts):
                    found = _nested_problem(sub, child, rows, present, f"{path}[{'key' if child is t.key_field else 'value'}]",
                                            counts)
                    if found:
                        return found
            return None
        if _checked(t.value_field, counting):
            return _nested_problem(values, t.value_field, rows, present, f"{path}[]", counting)
    return None


def stored_rows_problem(pf) -> Optional[str]:
    """Why the rows of a stored Parquet file (``pf``: a ``pyarrow.parquet.ParquetFile``) do not fit
    the rules of what this package writes, in one phrase naming the row (1-based) and the column
    (and, inside it, the field: ``humanity__session[].turn_index``, ``[]`` for a list's items), or
    ``None``. One rule set, applied to every field the stored schema holds, at any depth: a key
    column (:data:`_STORED_KEYS`) that is not text or holds a null; a field the schema declares not
    null that holds a null where its parent holds a value; a count (an integer field ``n``,
    ``n_…`` or ``counts``, and the items or values of a list or map so named) that is null there or
    negative. A run folder is data from outside (edited and resealed, trial 28 B6: a null
    ``session_id`` ended in a pydantic traceback deep in the engine); reads the columns that hold a
    field under a rule only."""
    import numpy as np

    from fair_forge_beam.quoting import quoted

    schema = pf.schema_arrow
    keys = [n for n in _STORED_KEYS if n in schema.names]
    for name in keys:
        t = schema.field(name).type
        if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
            return f"column {quoted(name)} holds {t}, not text"
    checked = [f.name for f in schema if f.name not in keys and _checked(f)]
    if not keys and not checked:
        return None
    table = pf.read(columns=keys + checked, use_threads=False)
    n = table.num_rows
    for name in keys + checked:
        field = schema.field(name)
        if name in keys:  # a key is never null, whatever the stored schema says
            field = field.with_nullable(False)
        found = _nested_problem(table.column(name).combine_chunks(), field, np.arange(n), np.ones(n, bool), name)
        if found:
            row, path, what = found
            where = f"column {quoted(name)}" if path == name else f"column {quoted(name)}, field {quoted(path)}"
            return f"row {row + 1:,}: {where} is {what}"
    return None


def _masked(doc: dict) -> dict:
    """The manifest's values masked as run_info.json's are (its ``options`` hold the endpoints' URLs:
    their credentials, and the key values, :func:`~fair_forge_beam.io.secrets.scrub_known`)."""
    from fair_forge_beam.io.secrets import scrub_known

    return scrub_known(doc)


class StatsSchemaMismatch(ValueError):
    """Stored statistics of another schema version than this package reads."""


#: the reasons a metric's declaration can remove (:func:`not_storable_reason`), with what declares it
NO_STORED_TYPE = {
    "its session values declare no stored type":
        "MetricSpec.session_value_type (the type of one session value: int, float, a typing.NamedTuple…)",
    "its interaction-side values declare no stored type":
        "MetricSpec.cell_value_type (the type of one cell value: int, float, a typing.NamedTuple…)",
}


def not_storable_reason(layout, slot: int) -> Optional[str]:
    """Why metric ``slot`` of ``layout`` cannot store its session statistics (``None``: it can)."""
    spec = layout.specs[slot]
    if spec.session_value is None and spec.cell_value is None:
        return "it has no session statistics"
    no_session, no_cell = NO_STORED_TYPE
    if spec.session_value is not None and stored_type_of(layout.fns[slot]) is None:
        return no_session
    if spec.cell_value is not None and stored_type_of(layout.fns[layout.cell_slot(slot)]) is None:
        return no_cell
    if spec.aux is not None:
        return "its estimator needs a whole-dataset stage (e.g. cluster profiling over the vectors)"
    return None


def not_stored_text(reason: str) -> str:
    """A manifest's ``not_stored`` reason as the roll-up says it: naming the declaration that would
    store the metric's statistics (:data:`NO_STORED_TYPE`) when it is one."""
    field = NO_STORED_TYPE.get(reason)
    return f"{reason}: a metric stores them when it declares {field.split(' (')[0]}" if field else reason


def _say_not_storable(name: str, reason: str) -> None:
    """One warning when the run starts that a roll-up cannot merge metric ``name`` of this run, for
    a metric of one's own whose declaration lacks a stored type (:data:`NO_STORED_TYPE`; the
    package's metrics without one are listed in docs/scheduled.md, and say nothing)."""
    from fair_forge_beam.options import DECLARED_METRICS

    field = NO_STORED_TYPE.get(reason)
    if field and name not in DECLARED_METRICS:
        import logging

        logging.getLogger(__name__).warning(
            "%s cannot be rolled up (fair-forge-beam rollup): %s; set %s to store its statistics "
            "(docs/engine.md)", name, reason, field)


#: the stored column of a session's session-stage warnings
QUALITY_COLUMN = "quality"
_QUALITY_TYPE = pa.list_(pa.struct([("kind", pa.string()), ("key", pa.string()), ("message", pa.string())]))


def _slice_type(spec) -> Optional[pa.DataType]:
    """The stored type of ``spec``'s session slice value (``None``: not stored)."""
    if spec.slice_value_type is None or spec.session_reducer is None or spec.session_value is None:
        return None
    from fair_forge_beam.schemas.arrow import value_type

    return value_type(spec.slice_value_type)


def slice_columns(layout, metrics: Sequence[str]) -> list:
    """``(column name, slot, Arrow type)`` of the stored slice values (``<metric>__slice``) of
    ``layout``'s ``metrics``."""
    names = set(metrics)
    return [(f"{spec.name}__slice", slot, t) for slot, spec in enumerate(layout.specs)
            if spec.name in names and (t := _slice_type(spec)) is not None]


def scored_columns(layout, metrics: Sequence[str]) -> list:
    """``(column name, slot)`` of the stored scored-session flags (``<metric>__scored``) of
    ``layout``'s ``metrics``."""
    names = set(metrics)
    return [(f"{spec.name}__scored", slot) for slot, spec in enumerate(layout.specs) if spec.name in names]


def evidence_columns(layout, metrics: Sequence[str]) -> list:
    """``(column name, slot)`` of the stored evidence flags (``<metric>__evidence``, int64: bit ``j``
    set when the session holds kind ``j`` of the metric's :class:`~fair_forge_beam.engine.Evidence`)
    of ``layout``'s ``metrics`` that declare evidence."""
    names = set(metrics)
    return [(f"{spec.name}__evidence", slot) for slot, spec in enumerate(layout.specs)
            if spec.name in names and spec.evidence is not None]


def session_flags(scored, evidence) -> Optional[int]:
    """A session's flags as the engine sends them to its slices (bit 0: scored; bit ``j + 1``:
    evidence kind ``j``), from its stored ``<metric>__scored`` and ``<metric>__evidence`` values;
    ``None`` when the metric had nothing of the session."""
    return None if scored is None else int(bool(scored)) | (int(evidence or 0) << 1)


def slices_stored(layout, metrics: Sequence[str]) -> bool:
    """Whether the session rows of ``layout``'s ``metrics`` keep everything their session stage
    gave the slices (each metric with sessions stores its slice value): then a roll-up takes a
    session found in one run to the slices as stored, without reducing it again."""
    names = set(metrics)
    return all(_slice_type(spec) is not None for spec in layout.specs
               if spec.name in names and spec.session_value is not None and spec.session_reducer is not None)


def _columns(layout, slot: int) -> list:
    """``(column name, slot)`` of metric ``slot``'s stored accumulators."""
    spec = layout.specs[slot]
    out = []
    if spec.session_value is not None:
        out.append((f"{spec.name}__session", slot))
    if spec.cell_value is not None:
        out.append((f"{spec.name}__cells", layout.cell_slot(slot)))
    if layout.findings_slot(slot) is not None:
        out.append((f"{spec.name}__findings", layout.findings_slot(slot)))
    return out


def sessions_schema(layout, stored: Sequence[int]) -> pa.Schema:
    """The Parquet schema of the session rows of ``layout``'s metrics ``stored`` (slots)."""
    fields = list(_KEY_FIELDS)
    if layout.dims:
        fields += [pa.field("meta_values", pa.list_(pa.string())), pa.field("meta_differ", pa.bool_())]
    if READER in layout.extra_slots:
        fields.append(pa.field(READER, stored_type_of(layout.fns[layout.extra_slots[READER]])))
    for slot in stored:
        fields += [pa.field(name, stored_type_of(layout.fns[s])) for name, s in _columns(layout, slot)]
    names = [layout.specs[s].name for s in stored]
    fields += [pa.field(name, t) for name, _, t in slice_columns(layout, names)]
    fields += [pa.field(name, pa.bool_()) for name, _ in scored_columns(layout, names)]
    fields += [pa.field(name, pa.int64()) for name, _ in evidence_columns(layout, names)]
    fields.append(pa.field(QUALITY_COLUMN, _QUALITY_TYPE))
    return pa.schema(fields, metadata={SCHEMA_VERSION_KEY: str(STATS_SCHEMA_VERSION).encode(),
                                       b"fair_forge_beam.metrics": json.dumps(names).encode(),
                                       b"fair_forge_beam.slices": json.dumps(list(layout.specs[0].slices)).encode()})


class ReaderQualityCombineFn(beam.CombineFn):
    """The reader's warnings of a session (``(kind, key, message)`` tuples), given to one session key
    (its first language's): their concatenation (a key gets one element in an audit, the merged
    session's warnings in a roll-up)."""

    def create_accumulator(self):
        return ()

    def add_input(self, acc, element):
        return (*acc, *element)

    def merge_accumulators(self, accumulators):
        return tuple(w for a in accumulators for w in a)

    def extract_output(self, acc):
        return acc


def reader_extras() -> list:
    """The reader's extra session slots, ``(name, CombineFn)``, of an audit's and a roll-up's
    :class:`~fair_forge_beam.engine.SessionLayout`: :data:`READER` (each session key's record
    summary: its own records, :class:`~fair_forge_beam.io.read.SessionRecordsCombineFn`) and
    :data:`READER_QUALITY` (the session's reader warnings, on one of its keys)."""
    from fair_forge_beam.io.read import SessionRecordsCombineFn

    return [(READER, SessionRecordsCombineFn()), (READER_QUALITY, ReaderQualityCombineFn())]


# what Beam infers for it whatever its input (Any): declared, so Beam does not derive it from process's bytecode
@beam.typehints.with_output_types(Any)
class _ToRow(beam.DoFn):
    """``(session key, [accumulator per slot], {slot: slice value}, [warnings], {slot: scored})`` (the engine's
    :data:`~fair_forge_beam.engine.STORED` output) → its row (nothing when neither a stored metric
    nor the reader has a value for that session: a session every metric dead-lettered keeps its
    row, with its reader summary and no metric value, so that a roll-up numbers its turns and
    warns about it as one audit of every run's inputs does). ``quality``: the session stage's warnings of this session key — the
    metrics' and the engine's, and, on the row of the session's first language only, the reader's of the
    whole session (:data:`READER_QUALITY`: a session of two languages warned once, as the run counts it) — sorted."""

    def __init__(self, layout, stored: Sequence[int]):
        self.layout = layout
        self.columns = [c for slot in stored for c in _columns(layout, slot)]
        self.slices = [(name, slot) for name, slot, _ in slice_columns(layout, [layout.specs[s].name for s in stored])]
        self.scored = scored_columns(layout, [layout.specs[s].name for s in stored])
        self.evidence = evidence_columns(layout, [layout.specs[s].name for s in stored])

    def process(self, element):
        row = self._row(*element)
        if row is not None:  # no bare return beside yield in a DoFn: Beam warns about every such class
            yield row

    def _row(self, key, accs, slices, warnings, scored):
        lay = self.layout
        values = {name: accs[s] for name, s in self.columns}
        reader = accs[lay.extra_slots[READER]] if READER in lay.extra_slots else None
        if all(v is None for v in values.values()) and not reader:
            return None  # a session key no stored metric saw and the reader did not either
        row = {"session_id": key[0], "assistant_id": key[1], "language": key[2]}
        if lay.dims:
            dims = accs[lay.dims_slot]
            meta, differ = dims if dims is not None else ((None,) * len(lay.dims), False)
            row["meta_values"], row["meta_differ"] = list(meta), bool(differ)
        quality = list(warnings)
        if READER in lay.extra_slots:
            s = lay.extra_slots[READER]
            row[READER] = None if accs[s] is None else lay.fns[s].to_stored(accs[s])
        if READER_QUALITY in lay.extra_slots:  # the reader's warnings of the session: on one of its rows
            quality += [tuple(w) for w in accs[lay.extra_slots[READER_QUALITY]] or ()]
        for name, s in self.columns:
            row[name] = None if values[name] is None else lay.fns[s].to_stored(values[name])
        for name, slot in self.slices:
            row[name] = slices.get(slot)
        for name, slot in self.scored:
            row[name] = None if slot not in scored else bool(int(scored[slot]) & 1)
        for name, slot in self.evidence:  # the evidence kinds the session held (engine.session_flags)
            row[name] = None if slot not in scored else int(scored[slot]) >> 1
        row[QUALITY_COLUMN] = sorted(w if type(w) is tuple else (str(w.kind), str(w.key), str(w.message)) for w in quality)
        return row


def slice_accumulator_columns(layout, fused, metrics: Sequence[str]) -> list:
    """``(column name, slot)`` of the stored slice accumulators (``<metric>__acc``) of ``layout``'s
    ``metrics`` whose slice combiner (``fused.fns[slot]``) declares a stored type and ``subtract``."""
    from fair_forge_beam.statistical.combiners import can_subtract

    names = set(metrics)
    return [(f"{spec.name}__acc", slot) for slot, spec in enumerate(layout.specs)
            if spec.name in names and stored_type_of(fused.fns[slot]) is not None and can_subtract(fused.fns[slot])]


def slices_schema(layout, fused, columns: Sequence[tuple]) -> pa.Schema:
    """The Parquet schema of the slice rows (module docstring) of ``columns``
    (:func:`slice_accumulator_columns`)."""
    fields = [pa.field("slice", pa.string(), nullable=False)]
    fields += [pa.field(name, fused.fns[slot].stored_type()) for name, slot in columns]
    return pa.schema(fields, metadata={SCHEMA_VERSION_KEY: str(STATS_SCHEMA_VERSION).encode(),
                                       b"fair_forge_beam.slices": json.dumps(list(layout.specs[0].slices)).encode()})


# what Beam infers for it whatever its input (Any): declared, so Beam does not derive it from process's bytecode
@beam.typehints.with_output_types(Any)
class _SliceToRow(beam.DoFn):
    """``(slice key, [slice accumulator per slot])`` → its stored row (module docstring)."""

    def __init__(self, fused, columns: Sequence[tuple]):
        self.fused, self.columns = fused, list(columns)

    def process(self, kv):
        key, accs = kv
        row = {"slice": key}
        for name, slot in self.columns:
            row[name] = None if accs[slot] is None else self.fused.fns[slot].to_stored(accs[slot])
        yield row


def open_stored(path: str):
    """A stored Parquet file opened for ``pyarrow``: a local file memory-mapped (read without a
    copy through a Python file object: the roll-up reads hundreds of megabytes of stored
    statistics), any other path through Beam's filesystems. A context manager either way; the
    values read are the same (a column's decoded buffers are pyarrow's own, never the map's)."""
    if "://" not in path:
        return pa.memory_map(path)
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.open(path)


def read_slice_accumulators(path: str, fused, columns: Sequence[tuple]) -> list:
    """One stored slice table file → ``[(slice key, [slice accumulator per slot of fused, None
    where not stored])]``, each column decoded at once (``CombineFn.from_arrow``).

    Raises:
        StatsSchemaMismatch: the file's schema version is not :data:`STATS_SCHEMA_VERSION`."""
    import pyarrow.parquet as pq

    with open_stored(path) as f:
        table = pq.read_table(f, use_threads=False)  # megabytes of exact sums: threads cost CPU, not save it
    meta = table.schema.metadata or {}
    version = meta.get(SCHEMA_VERSION_KEY)
    check_schema_version(int(version) if version is not None and version.isdigit() else version, path)
    keys = table.column("slice").to_pylist()
    out = [[None] * len(fused.fns) for _ in keys]
    for name, slot in columns:
        for row, acc in zip(out, fused.fns[slot].from_arrow(table.column(name).combine_chunks())):
            row[slot] = acc
    return list(zip(keys, out))


class WriteSessionStats:
    """The main job's stored statistics (see the module docstring). Give :meth:`session_inputs`
    to :func:`~fair_forge_beam.engine.apply_metrics` as ``extra_session_inputs`` and the object
    itself as ``on_session_accumulators`` (it writes each engine's session rows), then call
    :meth:`write_manifest` with the run's counting elements.

    Args:
        out: the output folder.
        manifest: the run's description (:func:`fair_forge_beam.rollup.audit_manifest`); which
            metrics stored their statistics (or why not) is added to it.

    ``outputs``: the run's :class:`~fair_forge_beam.io.write.ShardedOutputs`, to which the stored
    tables are added (``stats/sessions/``, ``stats/slices/``): written with the run's other sharded
    outputs by one writer (:func:`~fair_forge_beam.reports.results.write_outputs` calls its ``write``).
    ``written``: the results of the other sinks attached so far (PCollections of the written file
    names: the manifest's files), for a step that must run after them
    (``reports.output_folder.publish_after``).
    """

    def __init__(self, out: str, manifest: dict):
        self.out, self.manifest = out, dict(manifest)
        self.outputs = ShardedOutputs(out)
        self.written: list = []
        self.stored: dict[str, str] = {}
        self.not_stored: dict[str, str] = {}
        self.session_quality: list = []
        self.stored_slices: dict[str, str] = {}
        self.slices_not_stored: dict[str, str] = {}
        self._tables = 0
        self._slice_tables = 0

    def session_inputs(self, records, reader_quality) -> list:
        """The engine's extra session inputs: the reader's record summaries ``records``
        (``((session_id, assistant_id, language), summary)``: each key's own records) and the reader's
        warnings of each session ``reader_quality`` (``((session_id, assistant_id, first language),
        ((kind, key, message), …))``: one key of the session), in the slots of :func:`reader_extras`."""
        return [(name, pcoll, fn) for (name, fn), pcoll in zip(reader_extras(), (records, reader_quality))]

    def __call__(self, accumulators, layout, session_quality: Sequence = ()) -> None:
        self.session_quality += list(session_quality)
        stored = []
        for slot, spec in enumerate(layout.specs):
            reason = not_storable_reason(layout, slot)
            if reason is None:
                stored.append(slot)
            else:
                self.not_stored[spec.name] = reason
                _say_not_storable(spec.name, reason)
        if not stored:
            return
        table = SESSIONS_TABLE if not self._tables else f"{SESSIONS_TABLE}{self._tables}"
        self._tables += 1
        for slot in stored:
            self.stored[layout.specs[slot].name] = f"{STATS_DIR}/{table}/"
        rows = accumulators | f"Stats{table}/Rows" >> beam.ParDo(_ToRow(layout, stored))
        self.outputs.parquet(rows, f"Stats{table}/", f"{STATS_DIR}/{table}", sessions_schema(layout, stored), 10_000)

    def slices(self, slices, layout, fused) -> None:
        """The engine's ``on_slice_accumulators``: writes the slice accumulators (``(slice key,
        [accumulator per slot])``) of the metrics whose session statistics are stored and whose
        slice combiner stores and subtracts (``stats/slices/``); the others are named in the
        manifest's ``slices_not_stored``."""
        names = [spec.name for spec in layout.specs if spec.name in self.stored]
        columns = slice_accumulator_columns(layout, fused, names)
        kept = {layout.specs[slot].name for _, slot in columns}
        for spec in layout.specs:
            if spec.name not in kept:
                self.slices_not_stored[spec.name] = (
                    "its session statistics are not stored" if spec.name not in self.stored
                    else "its slice combiner declares no stored type or no exact subtract")
        if not columns:
            return
        table = SLICES_TABLE if not self._slice_tables else f"{SLICES_TABLE}{self._slice_tables}"
        self._slice_tables += 1
        for name in sorted(kept):
            self.stored_slices[name] = f"{STATS_DIR}/{table}/"
        rows = slices | f"Stats{table}/Rows" >> beam.ParDo(_SliceToRow(fused, columns))
        self.outputs.parquet(rows, f"Stats{table}/", f"{STATS_DIR}/{table}", slices_schema(layout, fused, columns), 64)

    def write_manifest(self, parts, session_quality: Sequence = (), parts_never_empty: bool = False) -> None:
        """``stats/manifest.json``, written by the pipeline (a Flex Template launch writes it too),
        with the run's counts from ``parts`` — its ``("read", None, n)``, ``("dead", (stage,
        reason), 1)`` (stored grouped, a real reason per group: :mod:`~fair_forge_beam.reasons`) and ``("quality", kind, 1)`` elements — less the warnings of the
        session stages: the engine's and ``session_quality`` (the reader's). ``parts_never_empty``:
        ``parts`` holds an element in every run (a ``("read", None, 0)``), so its combine needs no
        default."""
        minus = [q | f"StatsSessionQuality{i}" >> beam.Map(lambda w: ("quality", str(w.kind), -1))
                 for i, q in enumerate([*self.session_quality, *session_quality])]
        every = (parts, *minus) | "StatsCountParts" >> beam.Flatten() if minus else parts
        doc = {**self.manifest, "stats_schema_version": STATS_SCHEMA_VERSION,
               "stored": dict(sorted(self.stored.items())), "not_stored": dict(sorted(self.not_stored.items())),
               "stored_slices": dict(sorted(self.stored_slices.items())),
               "slices_not_stored": dict(sorted(self.slices_not_stored.items())), "sealed_files": list(SEALED_FILES)}
        combine = beam.CombineGlobally(_CountsCombineFn())
        # a caller whose parts always hold an element (write_outputs: its ("read", None, 0)) needs no
        # default: the default's DoOnce and side input were 4 transforms and 2 stages (issue 26)
        counts = every | "StatsCounts" >> (combine.without_defaults() if parts_never_empty else combine)
        settings, run_ids = manifest_settings(doc), run_ids_of(_masked(doc))
        # the four files in one step (two transforms per file were a text and a write)
        self.written.append(write_files(counts, [
            (f"{self.out}/{STATS_DIR}/manifest.json",
             lambda counts, d=doc: json.dumps(_masked({**d, "counts": counts}), indent=2, ensure_ascii=False,
                                              allow_nan=False)),
            # sealed (under stats/): the manifest's settings are checked against it
            (f"{self.out}/{SETTINGS}", lambda _, d=settings: json.dumps(
                d, indent=2, ensure_ascii=False, allow_nan=False, sort_keys=True)),
            # sealed (under stats/): the manifest's run ids and input files are checked against it
            (f"{self.out}/{RUN_IDS}", lambda _, d=run_ids: json.dumps(
                d, indent=2, ensure_ascii=False, allow_nan=False, sort_keys=True)),
            # sealed (under stats/): the manifest's quality counts are checked against it
            (f"{self.out}/{QUALITY_COUNTS}", lambda c: json.dumps({"quality": c["quality"]}, indent=2,
                                                                  ensure_ascii=False, allow_nan=False)),
        ], "WriteStats"))


class _CountsCombineFn(beam.CombineFn):
    """``("read"|"read_slice"|"dead"|"quality", key, n)`` elements → the manifest's ``counts``
    (sorted, so the same run gives the same text)."""

    def create_accumulator(self):
        return {}

    def add_input(self, acc, el):
        kind, key, n = el
        if kind == "dead":  # (stage, reason): grouped by the reason's class, a real reason shown (fair_forge_beam.reasons)
            from fair_forge_beam.reasons import add_reason

            add_reason(acc.setdefault("dead", {}), str(key[0]), str(key[1]), n)
            return acc
        k = (kind, None if kind == "read" else str(key))
        acc[k] = acc.get(k, 0) + n
        return acc

    def merge_accumulators(self, accs):
        from fair_forge_beam.reasons import merge_reasons

        out: dict = {}
        for a in accs:
            for k, n in a.items():
                if k == "dead":
                    merge_reasons(out.setdefault("dead", {}), n)
                else:
                    out[k] = out.get(k, 0) + n
        return out

    def extract_output(self, acc):
        from fair_forge_beam.reasons import shown_reasons

        dead = sorted([*k, n] for k, n in shown_reasons(acc.get("dead") or {}).items() if n)
        acc = {k: v for k, v in acc.items() if k != "dead"}
        quality = {k[1]: n for k, n in sorted(acc.items(), key=lambda kv: str(kv[0])) if k[0] == "quality" and n}
        by_slice = {k[1]: n for k, n in sorted(acc.items(), key=lambda kv: str(kv[0])) if k[0] == "read_slice" and n}
        return {"interactions_read": acc.get(("read", None), 0), "interactions_read_by_slice": by_slice,
                "dead_letters": dead, "quality": quality}


def manifest_settings(doc: dict) -> dict:
    """The part of a manifest ``doc`` that :data:`SETTINGS` seals (:data:`SETTINGS_FIELDS`; the
    options a roll-up ignores, ``RUN_ONLY_OPTIONS``, and the config's ``inputs`` left out)."""
    from fair_forge_beam.options import RUN_ONLY_OPTIONS

    out = {k: doc[k] for k in SETTINGS_FIELDS if k in doc}
    if isinstance(out.get("options"), dict):
        out["options"] = {k: v for k, v in out["options"].items() if k not in RUN_ONLY_OPTIONS}
    if isinstance(out.get("config"), dict):
        out["config"] = {k: v for k, v in out["config"].items() if k != "inputs"}
    return out


def run_ids_of(doc: dict) -> dict:
    """The part of a manifest ``doc`` that :data:`RUN_IDS` seals (:data:`RUN_ID_FIELDS`), as JSON
    reads it back (``input_files``' tuples as lists)."""
    return json.loads(json.dumps({k: doc[k] for k in RUN_ID_FIELDS if k in doc}, allow_nan=False))


def sealed_by(manifest: dict) -> tuple:
    """The files outside :data:`SEALED_FOLDERS` (and :data:`RUN_IDS`) that the run of ``manifest``
    seals: its ``sealed_files`` (known names only), else ``("results.json",)`` (a run written
    before the field; a manifest that drops it differs from its sealed :data:`SETTINGS`)."""
    listed = manifest.get("sealed_files") if isinstance(manifest, dict) else None
    if not isinstance(listed, list):
        return _SEALED_BEFORE
    return tuple(name for name in SEALED_FILES if name in listed)


def check_listed_file(folder: str, rel: str, manifest: dict) -> bool:
    """The file ``rel`` of the run folder ``folder`` is the one its manifest lists (size and sha256,
    :func:`file_digest`) when the manifest lists it or its ``sealed_files`` name it (:func:`sealed_by`;
    a manifest without that field requires nothing, as before it); returns
    whether it was checked (``False``: not sealed by that run, or sealed but never written — a Flex
    Template job writes no ``run_info.json`` — and absent).

    Raises:
        ValueError: one line naming the file — of another size or hash (edited or replaced), listed
            but missing, or present, sealed by its run and not listed (its entry removed)."""
    from apache_beam.io.filesystems import FileSystems

    files = manifest.get("files") if isinstance(manifest, dict) else None
    files = files if isinstance(files, dict) else {}
    want = files.get(rel)
    p = f"{folder.rstrip('/')}/{rel}"
    if want is None:
        declared = isinstance(manifest, dict) and isinstance(manifest.get("sealed_files"), list)
        if declared and rel in sealed_by(manifest) and FileSystems.exists(p):
            raise ValueError(f"{p} is not listed in {MANIFEST}, whose run sealed it (its entry removed: an edited "
                             "manifest); re-run that audit")
        return False
    if not FileSystems.exists(p):
        raise ValueError(f"{p} is missing ({MANIFEST} lists it): not a complete run; re-run that audit")
    size, sha256 = file_digest(p)
    if not isinstance(want, dict) or (size, sha256) != (want.get("size"), want.get("sha256")):
        listed = want if isinstance(want, dict) else {}
        raise ValueError(f"{p} is not the file its run wrote ({size} bytes, sha256 {sha256[:16]}…; {MANIFEST} "
                         f"lists {listed.get('size')} bytes, sha256 {str(listed.get('sha256'))[:16]}…): edited or "
                         "replaced since (a damaged or edited run file); re-run that audit")
    return True


def check_run_ids(folder: str, manifest: dict) -> None:
    """The manifest's ``run_id``, ``audit_runs`` and ``input_files`` are those its sealed
    :data:`RUN_IDS` holds, when its run wrote that file (:func:`sealed_by`; check the file's own
    hash first: :func:`check_listed_file` or a roll-up's ``check_sealed``): what a roll-up and a
    trend count as one audit run, or one input, is the run's own.

    Raises:
        ValueError: one line naming the run folder and the first field that differs."""
    from fair_forge_beam.io.edge import read_side_json

    if RUN_IDS not in sealed_by(manifest):
        return
    try:
        sealed = read_side_json(f"{folder.rstrip('/')}/{RUN_IDS}", "a run's stats/run_ids.json")
    except (OSError, ValueError) as exc:
        reason = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ValueError(f"{folder}: {RUN_IDS} cannot be read ({reason}): not a complete run; re-run that "
                         "audit") from None
    listed = run_ids_of(manifest)
    if listed != sealed:
        sealed = sealed if isinstance(sealed, dict) else {}
        field = next(k for k in RUN_ID_FIELDS if listed.get(k) != sealed.get(k))
        raise ValueError(f"{folder}: {MANIFEST} is not the manifest the run wrote: its {field} differs from the sealed "
                         f"{RUN_IDS} (an edited manifest); re-run that audit")


def count_parts(counts: dict) -> list:
    """A manifest's ``counts`` → the results document's counting elements (a roll-up's input)."""
    out = [("read", None, int(counts.get("interactions_read", 0)))]
    out += [("dead", (stage, reason), int(n)) for stage, reason, n in counts.get("dead_letters", ())]
    out += [("quality", kind, int(n)) for kind, n in (counts.get("quality") or {}).items()]
    out += [("read_slice", key, int(n)) for key, n in (counts.get("interactions_read_by_slice") or {}).items()]
    return out


def stored_columns(layout, metrics: Sequence[str]) -> list:
    """``(column name, slot, Arrow type)`` of every stored accumulator column of ``layout``'s
    ``metrics``: what a roll-up decodes from a session row (with the slot's
    ``CombineFn.from_plain``) and merges into that slot of the session's accumulators."""
    names = set(metrics)
    return [(column, s, stored_type_of(layout.fns[s])) for slot, spec in enumerate(layout.specs) if spec.name in names
            for column, s in _columns(layout, slot)]


def check_schema_version(found: Any, where: str) -> None:
    """Raises :class:`StatsSchemaMismatch` (one line naming both versions) unless ``found`` is
    this package's :data:`STATS_SCHEMA_VERSION`."""
    if type(found) is not int or found != STATS_SCHEMA_VERSION:  # a number, never "2" or 2.0 or true
        raise StatsSchemaMismatch(
            f"{where}: stored statistics of schema version {found}, but this fair_forge_beam reads version "
            f"{STATS_SCHEMA_VERSION}: roll up runs made by the same version (or re-run the audits)")


def file_digest(path: str) -> tuple[int, str]:
    """``(size in bytes, sha256 as 64 hex digits)`` of the file ``path`` (any Beam filesystem,
    read as stored: never decompressed by its extension), read in pieces of 1 MiB — memory
    bounded by the piece, whatever the file's size (``hashlib``).

    Raises:
        OSError: the file cannot be read."""
    import hashlib

    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    digest, size = hashlib.sha256(), 0
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        while piece := f.read(HASH_PIECE):
            digest.update(piece)
            size += len(piece)
    return size, digest.hexdigest()
