"""Writing results: every output of the main job is written by the pipeline itself, in shards.

Layout of ``--output`` (:data:`LAYOUT`):

* ``results.json`` — config, summary and per-metric slice aggregates. Combined to one element
  inside the pipeline (:class:`ResultsDocFn` over the slice records and counts) and written by
  Beam; deterministic (sorted, no timings), so the same input and seed give the same bytes on
  every runner and worker count. Its size grows with the number of slices, never with the
  number of sessions or interactions, and by a few hundred bytes per slice beyond
  :data:`MAX_DETAILED_SLICES` (summaries); texts repeated in every slice are stated once per
  metric (``common``, :data:`RUN_LEVEL_FIELDS`).
* ``results.parquet/part-SSSSS-of-NNNNN.parquet`` — one row per scored interaction, all metrics
  (union schema, nulls where a metric does not apply), built as Arrow tables of up to
  :data:`PARQUET_BATCH_ROWS` rows, one row group per table. A folder of shards: ``pyarrow.parquet.read_table`` and
  ``pandas.read_parquet`` read the folder as one table.
* ``sessions/<metric>/part-SSSSS-of-NNNNN.parquet`` — one row per session (or BestOf block):
  ``metric``, ``session_id``, ``assistant_id``, ``n_interactions``, then one typed column per field
  of the metric's session model (its class's ``session_schema``; nested models are structs,
  ``dict[str, X]`` fields maps; :func:`session_schema`), so a warehouse query reads a field
  without parsing anything; read them with :func:`fair_forge_beam.reports.load.iter_sessions` /
  ``load_sessions``.
* ``slices/<metric>/part-SSSSS-of-NNNNN.parquet`` — one row per slice record of the metric
  (:data:`SLICE_SCHEMA`: ``metric``, ``slice``, ``n_interactions``, ``n_sessions`` and ``record``, the
  whole record as JSON, run-level texts included): the per-slice detail, in full, however many
  slices there are. ``results.json`` holds the same records unless a metric has more than
  :data:`MAX_DETAILED_SLICES` slices: its slices other than ``overall`` then keep their summary
  fields only (:func:`slice_summary`); read the whole records with
  :func:`fair_forge_beam.reports.load.iter_slices`.
* ``dead_letter/part-SSSSS-of-NNNNN.jsonl`` and ``data_quality/part-…jsonl`` — rejected records
  ``{stage, reason, element_id, raw, source}`` and data-quality warnings.

Every sharded output above (and the stored statistics' tables under ``stats/``) is written by one
``fileio.WriteToFiles`` for all of them (:class:`~fair_forge_beam.io.write.ShardedOutputs`): any number
of shards per folder, named ``part-SSSSS-of-NNNNN``, and one empty shard (with the schema) in the
folder of an output with no record.
* ``run_info.json`` — runner, timing (``started_at``, ``finished_at``: UTC, ISO 8601; ``seconds``), package
  versions, arguments (written by the launching
  process after a local run; a Flex Template launch has no such process).

The launching process never reads a record back: it reads ``results.json`` only, so its memory
does not grow with sessions, interactions or dead letters (DESIGN.md §7).
"""
from __future__ import annotations

import itertools
import json
import re
import time
from collections import Counter
from datetime import datetime, timezone
from importlib import metadata
from typing import Any, Optional, Sequence

from fair_forge_beam._beam import beam
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems

from fair_forge_beam.io.secrets import masks_nothing, scrub_known
from fair_forge_beam.quoting import quoted
from fair_forge_beam.reasons import add_reason, merge_reasons, reason_class, shown_reasons


def _takes_no_text(t: pa.DataType) -> bool:
    """Whether ``pa.array`` refuses a text as a value of the Arrow type ``t`` (numbers, flags, dates,
    timestamps, null): a column of such a type can hold no text to mask. Binary types take text, as
    do strings and everything nested."""
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t)
            or pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_null(t))


def _masked_columns(names, cols, types) -> list:
    """The column values ``cols`` (lists, by column name ``names``, of the Arrow ``types`` they are
    written as) with API-key values masked (:func:`scrub_known`: names under
    :data:`~fair_forge_beam.io.secrets.NAME_FIELDS` kept), except ``record``: the JSON line
    :func:`~fair_forge_beam.io.write.to_json_line` masked already (as a structure: masking its text
    again would mask the names in it). Walked: the columns whose values hold a needle
    (:func:`~fair_forge_beam.io.secrets.masks_nothing`), unless their type takes no text
    (:func:`_takes_no_text`: Arrow refuses a text as a number, a flag, a date or a time)."""
    walk = {n: c for n, c, t in zip(names, cols, types) if n != "record" and not _takes_no_text(t) and not masks_nothing(c)}
    masked = scrub_known(walk) if walk else {}
    return [masked.get(n, c) for n, c in zip(names, cols)]
from fair_forge_beam.io.write import ShardedOutputs, arrow_array, to_json_line, write_one_file

__all__ = ["write_outputs", "slice_summary", "summary_fields", "SLICE_SCHEMA", "RESULTS_SCHEMA_VERSION",
           "RUN_LEVEL_FIELDS", "MAX_DETAILED_SLICES", "results_config", "metric_static", "build_results_doc", "results_json_bytes",
           "write_run_info", "utc_timestamp", "ResultsDocFn", "SESSION_INDEX", "session_schema", "session_table",
           "slice_row", "slice_rows_table", "SliceSummariesFn",
           "LAYOUT", "dead_letter_unit", "stage_owner"]

#: where each output lives under ``--output`` (shard folders end in ``/``)
LAYOUT = {
    "results": "results.json",
    "interactions": "results.parquet/",
    "sessions": "sessions/",
    "dead_letter": "dead_letter/",
    "data_quality": "data_quality/",
    "run_info": "run_info.json",
}

#: the first columns of every session shard (then the metric's session model, :func:`session_schema`)
SESSION_INDEX = (
    pa.field("metric", pa.string()),
    pa.field("session_id", pa.string()),
    pa.field("assistant_id", pa.string()),
    pa.field("n_interactions", pa.int64()),
)
#: record keys that are no column: ``level`` is ``"session"`` in every session record
_CONSTANT_KEYS = {"level": "session"}

#: what one dead letter of a metric's stage stands for unless its info says otherwise
#: (``MetricInfo.dead_letter_unit``: e.g. one per interaction *and* attribute for Bias)
_DEFAULT_UNIT = "interactions this metric could not score"


def dead_letter_unit(metric: str) -> str:
    """What one dead letter of ``metric``'s stage stands for (its info's ``dead_letter_unit``, else
    one interaction it could not score); for another stage of a metric (``prompt_evaluator.jq``,
    :func:`stage_owner`), that stage's unit."""
    from fair_forge_beam.reports.estimates import info_of

    info = info_of(metric)
    if info is None:
        owner, part = stage_owner(metric)
        if part is not None:
            return part.unit
    return (info.dead_letter_unit if info is not None else None) or _DEFAULT_UNIT


def _part_stage(metric: str, stage: str):
    """The :class:`~fair_forge_beam.schemas.metric_info.DeadLetterStage` of ``stage`` when it is
    ``metric``'s other stage — declared in its info, or named ``<metric>.<part>`` (then in a generic
    unit) — else ``None``."""
    from fair_forge_beam.reports.estimates import info_of
    from fair_forge_beam.schemas.metric_info import DeadLetterStage

    info = info_of(metric)
    for d in (info.dead_letter_stages if info is not None else ()):
        if d.stage == stage:
            return d
    if stage.startswith(metric + ".") and len(stage) > len(metric) + 1:
        part = stage[len(metric) + 1:]
        return DeadLetterStage(stage, f"dead letters of its {part} stage", part=part)
    return None


def stage_owner(stage: str, metrics: Optional[Sequence[str]] = None) -> tuple:
    """Who counts the dead letters of ``stage`` in ``results.json``'s summary: ``("read", None)``
    (records rejected at read: ``rejected_at_read``), ``("runner", None)`` (turns the assistant
    runner failed to answer: ``assistant_failed``), ``(metric, None)`` (the metric's own stage:
    its ``dead_letters``), ``(metric, DeadLetterStage)`` (another stage of the metric: its
    ``stage_dead_letters``), or ``(None, None)``: nobody (``other_dead_letters``). ``metrics``:
    the run's metrics (default every registered one)."""
    from fair_forge_beam.io.failed_turns import RUNNER_STAGE

    if stage in ("read", RUNNER_STAGE):
        return stage, None
    if metrics is None:
        from fair_forge_beam.metrics.registry import registered

        metrics = list(registered())
    if stage in metrics:
        return stage, None
    for m in metrics:
        part = _part_stage(m, stage)
        if part is not None:
            return m, part
    return None, None


def _field(rec, name: str):
    """``rec.name`` for NamedTuples, ``rec[name]`` for dicts (``None`` when missing)."""
    if isinstance(rec, dict):
        return rec.get(name)
    return getattr(rec, name, None)


#: version of ``results.json``'s layout (``config.versions.results_schema``). 2: texts repeated in
#: every slice are stated once per metric (``metrics.<name>.common``, :data:`RUN_LEVEL_FIELDS`), and a
#: metric with more than :data:`MAX_DETAILED_SLICES` slices keeps only their summary fields in
#: ``results.json`` (``metrics.<name>.detail``; every record in full in ``slices/<metric>/``).
#: 1 (no key): every slice record whole, texts repeated.
RESULTS_SCHEMA_VERSION = 2
#: slice-record fields fixed by the metric's configuration (lexicon and its licence, the group
#: extractor and sentiment analyser descriptions): stated once in ``metrics.<name>.common`` when
#: every slice of the metric holds the same value, and left out of the slice records
RUN_LEVEL_FIELDS = ("lexicon", "lexicon_licence", "group_extractor", "sentiment_analyzer")
#: above this many slices of one metric, ``results.json`` keeps the summary fields of its slices
#: other than ``overall`` (:func:`slice_summary`); every record in full is in ``slices/<metric>/``
MAX_DETAILED_SLICES = 200

#: rows per Arrow table handed to the Parquet writer (one row group each)
PARQUET_BATCH_ROWS = 10_000
#: rows per table of the slice shards (``slices/<metric>/``): a row holds a whole slice record
#: (about 9 kB for Toxicity), so a batch of :data:`PARQUET_BATCH_ROWS` waiting for the writer was
#: 94 MB at 10,000 assistants (issue 28); the same rows, in row groups of at most this many
SLICE_BATCH_ROWS = 2_000


def _column_source(names, metric) -> list:
    """Per column of the union schema, the record key(s) a record of ``metric`` fills it from:
    column ``n`` is the record's key ``n``, or, for a column ``<metric>_<key>``, the record's
    ``<key>`` (metric records keep their upstream field names)."""
    prefix = f"{metric}_"
    return [(n, n[len(prefix):] if n.startswith(prefix) else None) for n in names]


def _parquet_table(schema: pa.Schema):
    """A batch of per-interaction records (dicts) -> one ``pa.Table`` of the union ``schema``,
    built column by column (nulls where a metric has no such field); string values with an
    API-key value are masked (:func:`scrub_known`: defence at the writer)."""
    names, types = schema.names, schema.types

    def fn(recs) -> pa.Table:
        cols = [[] for _ in names]
        sources: dict = {}
        for metric, run in itertools.groupby(recs, key=lambda r: r.get("metric")):  # runs keep the row order
            group = list(run)
            if metric not in sources:
                sources[metric] = _column_source(names, metric)
            for col, (n, alt) in zip(cols, sources[metric]):
                if alt is None:
                    col.extend([r[n] if n in r else None for r in group])
                else:
                    col.extend([r[n] if n in r else r.get(alt) for r in group])
        arrays = [arrow_array(c, t, "results.parquet", n) for c, t, n in zip(_masked_columns(names, cols, types), types, names)]
        return pa.Table.from_arrays(arrays, schema=schema)

    return fn


def session_schema(name: str) -> pa.Schema:
    """Parquet schema of metric ``name``'s session shards: :data:`SESSION_INDEX`, then one column
    per field of its session model (:func:`fair_forge_beam.metrics.registry.session_model`; Arrow
    types by :func:`fair_forge_beam.schemas.arrow.arrow_fields`), in the model's order.

    A metric without a session model (every metric of this package has one; a metric of your own
    declares ``session_schema`` on its class for typed columns) gets one ``record`` column holding
    each record as JSON text.

    Raises:
        TypeError: a model field without an Arrow type (``Any``, bare ``dict``).
    """
    from fair_forge_beam.metrics.registry import session_model
    from fair_forge_beam.schemas.arrow import arrow_fields

    model = session_model(name)
    if model is None:  # a metric of your own without a session model: one JSON record column
        return pa.schema([*SESSION_INDEX, pa.field("record", pa.string())])
    index = [f.name for f in SESSION_INDEX]
    fields = [f for f in arrow_fields(model) if f.name not in index and f.name not in _CONSTANT_KEYS]
    return pa.schema([*SESSION_INDEX, *fields])


def _undeclared(value, t: pa.DataType, path: str):
    """The first dotted path in ``value`` (a record's value for a column of type ``t``) whose key
    the type does not declare, else ``None``: a struct drops unknown keys silently, so the writer
    checks them (a session record must match its metric's declared model). One value; a writer
    checks its rows with :func:`undeclared_checker`, built once per column type."""
    check = undeclared_checker(t)
    return None if check is None else check(value, path)


def undeclared_checker(t: pa.DataType):
    """:func:`_undeclared` for type ``t`` as a function ``(value, path) -> path or None``, built
    once (``None``: a type with no struct below it, where nothing can be undeclared). Why: the
    session writers check every record's every value, and reading a struct type's fields from
    Arrow (a new Python object per field) per value cost more than the rest of the table."""
    if pa.types.is_struct(t):
        fields = {f.name: undeclared_checker(f.type) for f in t}

        def struct(value, path):
            if not isinstance(value, dict):
                return None
            for k, v in value.items():
                if k not in fields:
                    return f"{path}.{k}"
                check = fields[k]
                if check is not None:
                    bad = check(v, f"{path}.{k}")
                    if bad:
                        return bad
            return None

        return struct
    if pa.types.is_map(t):
        item = undeclared_checker(t.item_type)
        if item is None:
            return None

        def mapping(value, path):
            if isinstance(value, dict):
                for k, v in value.items():
                    bad = item(v, f"{path}[{quoted(k)}]")
                    if bad:
                        return bad
            return None

        return mapping
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        element = undeclared_checker(t.value_type)
        if element is None:
            return None

        def listing(value, path):
            if isinstance(value, (list, tuple)):
                for i, v in enumerate(value):
                    bad = element(v, f"{path}[{i}]")
                    if bad:
                        return bad
            return None

        return listing
    return None


def session_table(name: str, schema: Optional[pa.Schema] = None):
    """A batch of metric ``name``'s session records (dicts) -> one ``pa.Table`` of
    :func:`session_schema` (string values with an API-key value masked, :func:`scrub_known`).

    Raises:
        ValueError: a record with a key its metric's session model does not declare (at any depth;
            a programming error of the metric, never a data error: every record of a metric has
            the same shape), or a ``level`` other than ``"session"``.
    """
    schema = schema if schema is not None else session_schema(name)
    declared = set(schema.names) | set(_CONSTANT_KEYS)
    checks = [(f.name, c) for f in schema if (c := undeclared_checker(f.type)) is not None]

    def n_of(n):
        return int(n) if isinstance(n, (int, float)) and not isinstance(n, bool) else None

    def fn(recs) -> pa.Table:
        if schema.names[len(SESSION_INDEX):] == ["record"]:
            cols = [[name] * len(recs), [None if r.get("session_id") is None else str(r["session_id"]) for r in recs],
                    [None if r.get("assistant_id") is None else str(r["assistant_id"]) for r in recs],
                    [n_of(r.get("n_interactions")) for r in recs], [to_json_line(r) for r in recs]]
            return pa.Table.from_arrays([arrow_array(c, f.type, f"sessions/{name}", f.name)
                                         for c, f in zip(_masked_columns(schema.names, cols, schema.types), schema)], schema=schema)
        for r in recs:
            extra = [k for k in r if k not in declared]
            bad = [f"{k} = {quoted(r[k])}" for k, v in _CONSTANT_KEYS.items() if k in r and r[k] != v]
            if not extra and not bad:
                bad = [p for p in (check(r.get(n), n) for n, check in checks) if p]
            if extra or bad:
                raise ValueError(f"{name}: a session record does not match its session model "
                                 f"(undeclared: {sorted(extra) + bad})")
        cols = [[name] * len(recs),
                [None if r.get("session_id") is None else str(r["session_id"]) for r in recs],
                [None if r.get("assistant_id") is None else str(r["assistant_id"]) for r in recs],
                [n_of(r.get("n_interactions")) for r in recs]]
        cols += [[r.get(f.name) for r in recs] for f in list(schema)[len(SESSION_INDEX):]]
        arrays = [arrow_array(c, f.type, f"sessions/{name}", f.name)
                  for c, f in zip(_masked_columns(schema.names, cols, schema.types), schema)]
        return pa.Table.from_arrays(arrays, schema=schema)

    return fn


def session_records(table: pa.Table) -> list[dict]:
    """The session records of a table of session shards (the inverse of :func:`session_table`):
    ``{"metric", "level": "session", ...}`` with every column (``None`` where the record had no
    such field); maps become dicts. A shard of an earlier version (one ``record`` JSON column)
    gives its records as they were written."""
    if "record" in table.column_names and "n_interactions" in table.column_names and table.num_columns == 5:
        return [json.loads(r) for r in table.column("record").to_pylist()]
    conv = [(f.name, _plain_of(f.type)) for f in table.schema]
    out = []
    for row in table.to_pylist():
        rec = {"metric": row["metric"], **_CONSTANT_KEYS}
        for n, c in conv[1:]:
            rec[n] = c(row[n]) if c is not None else row[n]
        out.append(rec)
    return out


def _plain_of(t: pa.DataType):
    """A converter of a ``to_pylist`` value of type ``t`` to the record's plain form (maps -> dicts,
    at any depth), or ``None`` when the value is already plain."""
    if pa.types.is_map(t):
        item = _plain_of(t.item_type)
        return lambda v: None if v is None else {k: (item(x) if item else x) for k, x in v}
    if pa.types.is_struct(t):
        parts = [(f.name, _plain_of(f.type)) for f in t]
        if all(c is None for _, c in parts):
            return None
        return lambda v: None if v is None else {n: (c(v[n]) if c else v[n]) for n, c in parts}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = _plain_of(t.value_type)
        return None if item is None else (lambda v: None if v is None else [item(x) for x in v])
    return None


#: columns of ``slices/<metric>/part-*.parquet``: one row per slice record, the record in full as JSON
SLICE_SCHEMA = pa.schema([
    pa.field("metric", pa.string()),
    pa.field("slice", pa.string()),
    pa.field("n_interactions", pa.int64()),
    pa.field("n_sessions", pa.int64()),
    pa.field("record", pa.string()),
])


def slice_row(name: str):
    """A slice record (dict) of metric ``name`` -> its row of :data:`SLICE_SCHEMA` as a tuple
    ``(metric, slice, n_interactions, n_sessions, record as one JSON line)``. The slice writer
    batches these rows, not the records: a Toxicity slice record is about 33 kB of Python objects
    and 9 kB as its JSON line, and a batch holds up to :data:`PARQUET_BATCH_ROWS` of them (issue 28:
    memory at 10,000 assistants)."""

    def n_of(n):
        return int(n) if isinstance(n, int) and not isinstance(n, bool) else None

    def fn(r) -> tuple:
        return (name, None if r.get("slice") is None else str(r["slice"]), n_of(r.get("n_interactions")),
                n_of(r.get("n_sessions")), to_json_line(r))

    return fn


def slice_rows_table(rows) -> pa.Table:
    """A batch of :func:`slice_row` tuples -> one ``pa.Table`` of :data:`SLICE_SCHEMA` (string
    values with an API-key value masked, :func:`scrub_known`)."""
    cols = [list(c) for c in zip(*rows)] if rows else [[] for _ in SLICE_SCHEMA]
    return pa.Table.from_arrays([arrow_array(c, f.type, "slices", f.name)
                                 for c, f in zip(_masked_columns(SLICE_SCHEMA.names, cols, SLICE_SCHEMA.types), SLICE_SCHEMA)],
                                schema=SLICE_SCHEMA)


def results_config(metrics, mode, inputs, slices=None) -> dict:
    """The ``config`` object of ``results.json`` (known before the pipeline runs). ``slices``:
    the slice dimensions, recorded (key ``slices``) when they are not the default ``overall,
    assistant_id, language`` — e.g. with a session metadata field — so a default audit's
    ``results.json`` keeps its bytes. ``versions``: the product version and the version of the
    stored-statistics schema (:data:`fair_forge_beam.io.session_stats.STATS_SCHEMA_VERSION`), so a
    run over time says what wrote it (no timestamp: the same input and seed still give the same bytes)."""
    from fair_forge_beam.io.session_stats import STATS_SCHEMA_VERSION
    from fair_forge_beam.slices import SLICE_DIMENSIONS
    from fair_forge_beam.version import product_version

    extra = {"slices": list(slices)} if slices is not None and tuple(slices) != SLICE_DIMENSIONS else {}
    return {
        "inputs": list(inputs),
        "metrics": list(metrics),
        "mode": "bayesian" if mode.is_bayesian else "frequentist",
        "statistical_mode": repr(mode),
        "seed": mode.rng_seed,
        "mc_samples": mode.mc_samples,
        "ci_level": mode.ci_level,
        "beta_prior_a": mode.beta_prior_a,
        "beta_prior_b": mode.beta_prior_b,
        **extra,
        "versions": {"fair_forge_beam": product_version(), "statistics_schema": STATS_SCHEMA_VERSION,
                     "results_schema": RESULTS_SCHEMA_VERSION},
    }


def metric_static(transforms: dict) -> dict:
    """Per metric, the fields of ``results.json`` fixed by the metric's configuration."""
    out = {}
    for name, t in transforms.items():
        lex = getattr(t, "lexicon", None)
        out[name] = {"headline_columns": list(getattr(t, "headline_columns", ())),
                     "lexicon": getattr(lex, "name", None), "lexicon_licence": getattr(lex, "licence", None)}
        scorer = getattr(t, "scorer_description", None)  # what the metric's headline rate measures
        if scorer is not None:
            out[name]["scorer"] = scorer
    return out


# ----------------------------------------------------------------------------- results.json
class ResultsDocFn(beam.CombineFn):
    """Combines the small parts of a run into the ``results.json`` document.

    Input elements are tagged tuples ``(kind, key, value)``:
    ``("read", None, n)`` with the number of interactions read (one element, or one per input
    part: counts add up); ``("read_slice", slice key, n)`` with the interactions read in one
    slice (only when ``read_slice_dims`` is set: coverage gates); ``("dead", (stage, reason), 1)`` per dead
    letter (grouped by the reason's class, each group shown by a real reason of it: :mod:`~fair_forge_beam.reasons`); ``("quality", kind, 1)`` per data-quality warning; ``("scored", metric, n)`` per
    session (``n`` = its ``n_interactions``); ``("left_out", metric, n)``: the interactions of the
    sessions the metric's ``MetricSpec.scored`` test leaves out; ``("slice", metric, record)`` per slice record
    (plain JSON values), or ``("slices", metric, pairs)`` with the :class:`SliceSummariesFn` output
    of some of a metric's slice records (what the main job sends). The accumulator holds integer counters and the slice records only, so
    its size grows with the number of slices and reason kinds, never with sessions or
    interactions; integer sums make merge order irrelevant. ``extract_output`` sorts everything
    (slices: ``overall`` first, then by key), so the document is the same on every runner.
    """

    def __init__(self, config: dict, static: dict, read_slice_dims: tuple = (), count_records: bool = False):
        self.config, self.static, self.read_slice_dims = config, static, tuple(read_slice_dims)
        self.count_records = count_records

    def create_accumulator(self):
        return {"read": 0, "dead": {}, "quality": Counter(), "scored": Counter(), "slices": {},
                "read_slice": Counter(), "records": 0, "left_out": Counter()}

    def _add_slice(self, acc, metric: str, rec: dict) -> None:
        """Keep ``rec``'s summary (:func:`slice_summary`), and the whole record while the metric
        has at most :data:`MAX_DETAILED_SLICES` slices (``overall`` always): the accumulator's size
        does not grow with the detail of thousands of slices."""
        _add_slice_pair(acc["slices"].setdefault(metric, []), metric, rec, self.static)

    def add_input(self, acc, el):
        kind, key, value = el
        if kind == "read":
            acc["read"] += value
        elif kind == "records":
            acc["records"] += value
        elif kind == "read_slice":
            if key.split("=", 1)[0] in self.read_slice_dims:  # counted for the stored statistics only
                acc["read_slice"][key] += value
        elif kind == "dead":  # (stage, reason): grouped by the reason's class (fair_forge_beam.reasons)
            add_reason(acc["dead"], str(key[0]), str(key[1]), value)
        elif kind == "quality":
            acc["quality"][key] += value
        elif kind == "scored":
            acc["scored"][key] += value
        elif kind == "left_out":
            acc["left_out"][key] += value
        elif kind == "slice":
            self._add_slice(acc, key, value)
        elif kind == "slices":  # a part of a metric's slices already summarised (SliceSummariesFn)
            _merge_slice_pairs(acc["slices"].setdefault(key, []), value)
        return acc

    def merge_accumulators(self, accs):
        accs = iter(accs)
        out = next(accs)
        for a in accs:
            out["read"] += a["read"]
            out["records"] += a.get("records", 0)
            merge_reasons(out["dead"], a["dead"])
            for k in ("quality", "scored", "read_slice", "left_out"):
                out[k].update(a[k])
            for m, recs in a["slices"].items():
                _merge_slice_pairs(out["slices"].setdefault(m, []), recs)
        return out

    def extract_output(self, acc):
        slices = {m: [summary if whole is None else whole for summary, whole in recs] for m, recs in acc["slices"].items()}
        detailed = {m: len(recs) <= MAX_DETAILED_SLICES for m, recs in acc["slices"].items()}
        return build_results_doc(self.config, self.static, acc["read"], Counter(shown_reasons(acc["dead"])), acc["quality"], acc["scored"],
                                 slices, acc["read_slice"] if self.read_slice_dims else None, detailed,
                                 acc["records"] if self.count_records else None, acc["left_out"])


def _add_slice_pair(recs: list, metric: str, rec: dict, static: dict) -> None:
    """Append ``[summary, whole record or None]`` of ``rec`` to ``recs``, one metric's pairs (see
    :meth:`ResultsDocFn._add_slice`)."""
    whole = rec if rec.get("slice") == "overall" or len(recs) < MAX_DETAILED_SLICES else None
    recs.append([slice_summary(metric, rec, static.get(metric, {}).get("headline_columns")), whole])
    if len(recs) == MAX_DETAILED_SLICES + 1:  # from now on the metric's slices are summaries
        _drop_whole(recs)


def _merge_slice_pairs(mine: list, recs: list) -> None:
    """Add another part's ``[summary, whole]`` pairs of the same metric to ``mine``."""
    mine.extend(recs)
    if len(mine) > MAX_DETAILED_SLICES:
        _drop_whole(mine)


class SliceSummariesFn(beam.CombineFn):
    """One metric's slice records → the ``[summary, whole record or None]`` pairs that
    :class:`ResultsDocFn` keeps of them (the same rule: whole records while the metric has at
    most :data:`MAX_DETAILED_SLICES` slices, ``overall`` always). Combined next to the estimator,
    so what reaches the results combine is the summaries, not every slice record in full (issue
    28: the runner buffers the input of the results combine whole; at 10,000 assistants that was
    20,000 records of up to 9 kB)."""

    def __init__(self, metric: str, static: dict):
        self.metric, self.static = metric, static

    def create_accumulator(self):
        return []

    def add_input(self, acc, rec):
        _add_slice_pair(acc, self.metric, json.loads(to_json_line(rec)), self.static)
        return acc

    def merge_accumulators(self, accs):
        accs = iter(accs)
        out = list(next(accs))
        for a in accs:
            _merge_slice_pairs(out, a)
        return out

    def extract_output(self, acc):
        return acc


class _TaggedSliceSummariesFn(SliceSummariesFn):
    """:class:`SliceSummariesFn` whose output is the results combine's element ``("slices", metric,
    pairs)`` itself (a step that only tagged it was one transform per metric)."""

    def extract_output(self, acc):
        return "slices", self.metric, acc


def _drop_whole(recs: list) -> None:
    """Keep only the summaries of ``[summary, whole]`` pairs, but ``overall``'s whole record."""
    for r in recs:
        if r[1] is not None and r[1].get("slice") != "overall":
            r[1] = None


def summary_fields(metric: str, headline: Optional[Sequence[str]] = None) -> tuple[str, ...]:
    """The top-level fields of ``metric``'s slice records that hold a headline or gateable
    estimate, or the counts behind one (its :class:`~fair_forge_beam.schemas.metric_info.MetricInfo`;
    ``headline``: the run's headline columns, for a metric without an info): what the console,
    the scorecard, the gates, the comparison of headline estimates and the trend read."""
    from fair_forge_beam.reports.estimates import info_of

    info = info_of(metric)
    paths = list(headline or ())
    if info is not None:
        for e in info.estimates:
            if e.headline or e.gate:
                paths.append(e.path)
                if isinstance(e.counts, tuple):
                    paths.extend(e.counts)
        if info.sessions_field:
            paths.append(info.sessions_field)
    return tuple(dict.fromkeys(p.split(".", 1)[0] for p in paths))


def slice_summary(metric: str, rec: dict, headline: Optional[Sequence[str]] = None) -> dict:
    """The summary of one slice record that ``results.json`` keeps when the metric has more than
    :data:`MAX_DETAILED_SLICES` slices: its scalar fields (slice key, counts, mode, ...) and the
    fields of :func:`summary_fields`, in the record's order; the whole record is in
    ``slices/<metric>/``."""
    keep = set(summary_fields(metric, headline)) | set(RUN_LEVEL_FIELDS)  # run-level texts: stated once (common)
    return {k: v for k, v in rec.items() if k in keep or v is None or isinstance(v, (str, int, float, bool))}


def _slice_order(r):
    s = r["slice"]
    return (0 if s == "overall" else 1, s)


def build_results_doc(config: dict, static: dict, n_read: int, dead: Counter, quality: Counter, scored: Counter,
                      slices: dict, read_by_slice: Optional[Counter] = None, detailed: Optional[dict] = None,
                      records_read: Optional[int] = None, left_out: Optional[Counter] = None) -> dict:
    """The ``results.json`` document from the combined counts (see :class:`ResultsDocFn`).

    ``summary.metrics.<name>`` names one unit per field: ``interactions_scored`` (interactions
    that entered the metric's aggregates, the sum of its sessions' ``n_interactions``; also
    under the older key ``scored``), ``interactions_not_scored`` (interactions read that did not:
    ``interactions_read − interactions_scored``, never below 0), ``interactions_left_out`` (only
    when above 0: of those not scored, the interactions of sessions the metric read and its
    estimates leave out after a verdict, ``MetricSpec.scored``: BestOf's walkover blocks,
    Regulatory's sessions without a rated interaction; from ``left_out``; not a block whose every
    match failed: :func:`session_outcome`), ``dead_letters`` (records the
    metric's stage dead-lettered; :func:`dead_letter_unit` says what one stands for, e.g. one
    failed guardian verdict per interaction *and* attribute for Bias) and
    ``dead_letter_reasons`` (counts per group of reasons, adding up to ``dead_letters``; a group is
    named by a real reason of it, ``"e.g. "`` first when its reasons differ: :mod:`~fair_forge_beam.reasons`),
    and ``stage_dead_letters`` (only when one wrote some): ``{stage: {dead_letters, dead_letter_unit,
    dead_letter_reasons}}`` for the metric's other stages (:func:`stage_owner`: PromptEvaluator's
    failed JQ judgements and generations, each in its own unit).

    Every dead letter is counted once (trial40 J2/J3: the stages other than ``read`` and the metric's
    name were counted nowhere): besides the above, ``summary.assistant_failed`` and
    ``assistant_failed_reasons`` (only when above 0) count the turns the assistant runner failed to
    answer (stage ``runner``; interactions read, scored by no metric), and
    ``summary.other_dead_letters`` (only when any) the stages no metric of the run claims. A run
    without such dead letters has none of these fields.

    ``read_by_slice`` (given when a coverage gate needs it): ``summary.interactions_read_by_slice``,
    the interactions read per slice ``{"overall": n, "assistant_id=…": n, "language=…": n}``,
    ``overall`` first, then by key — the denominators of ``dead_letter_share``. Left out
    otherwise, so a run without coverage gates keeps its bytes.

    ``records_read`` (given when a ``coverage rejected_share`` gate needs it):
    ``summary.records_read``, the input records that gave at least one interaction (a record kept
    in part counts here and, for its rejected interactions, once in ``rejected_at_read``) — with
    ``rejected_at_read`` the denominator of ``rejected_share``. Left out otherwise.

    ``metrics.<name>.common``: the :data:`RUN_LEVEL_FIELDS` every slice of the metric holds with the
    same value, stated once and left out of the slice records (a slice record in full is
    ``{**common, **record}``: :func:`fair_forge_beam.reports.load.full_slice`). ``detailed``:
    ``{metric: False}`` when the slices other than ``overall`` are summaries (:func:`slice_summary`);
    the metric then says so in ``metrics.<name>.detail``.
    """
    from fair_forge_beam.io.failed_turns import RUNNER_STAGE

    by_stage: Counter = Counter()
    for (stage, _), c in dead.items():
        by_stage[stage] += c

    def reasons(stage: str) -> dict:
        return _ranked({r: c for (s, r), c in dead.items() if s == stage})

    failed_turns = by_stage.get(RUNNER_STAGE, 0)
    doc: dict[str, Any] = {
        "config": config,
        "summary": {
            "interactions_read": n_read,
            **({"records_read": int(records_read)} if records_read is not None else {}),
            "rejected_at_read": by_stage.get("read", 0),
            "rejected_at_read_reasons": reasons("read"),
            # turns the assistant runner failed to answer: read, scored by no metric (only when there are)
            **({"assistant_failed": failed_turns, "assistant_failed_reasons": reasons(RUNNER_STAGE)} if failed_turns else {}),
            "data_quality_warnings": sum(quality.values()),
            "data_quality_by_kind": dict(sorted(quality.items())),
            "metrics": {},
        },
        "metrics": {},
    }
    claimed = {"read", RUNNER_STAGE, *static}  # stages counted by the summary; the rest: other_dead_letters
    for name, st in static.items():
        n_scored = int(scored.get(name, 0))
        n_dead = by_stage.get(name, 0)
        doc["summary"]["metrics"][name] = {
            "scored": n_scored,
            "interactions_scored": n_scored,
            "interactions_not_scored": max(n_read - n_scored, 0),
            **({"interactions_left_out": int(left_out[name])} if left_out and left_out.get(name) else {}),
            "dead_letters": n_dead,
            "dead_letter_unit": dead_letter_unit(name),
            "dead_letter_reasons": reasons(name),
        }
        parts = {}  # the metric's other stages' dead letters, each in its own unit (only stages that wrote some)
        for stage in sorted(by_stage):
            part = _part_stage(name, stage) if by_stage[stage] and stage not in claimed else None
            if part is not None:
                claimed.add(stage)
                parts[stage] = {"dead_letters": by_stage[stage], "dead_letter_unit": part.unit,
                                "dead_letter_reasons": reasons(stage)}
        if parts:
            doc["summary"]["metrics"][name]["stage_dead_letters"] = parts
        recs = sorted(slices.get(name, []), key=_slice_order)
        common = {k: recs[0][k] for k in RUN_LEVEL_FIELDS
                  if recs and k in recs[0] and all(k in r and r[k] == recs[0][k] for r in recs)}
        entry = {**st}
        if common:
            entry["common"] = common
            recs = [{k: v for k, v in r.items() if k not in common} for r in recs]
        if detailed is not None and not detailed.get(name, True):
            entry["detail"] = {"slices": f"slices/{name}/", "kept": list(summary_fields(name, st.get("headline_columns"))),
                               "note": f"more than {MAX_DETAILED_SLICES} slices: the slices other than overall keep "
                                       "their scalar fields and these; every slice record in full is in the Parquet "
                                       "shards named (docs/data.md)"}
        doc["metrics"][name] = {**entry, "slices": recs}
    others = {s: {"dead_letters": n, "dead_letter_reasons": reasons(s)} for s, n in sorted(by_stage.items())
              if n and s not in claimed}
    if others:  # a stage no metric of the run claims: counted all the same (every dead letter written is counted)
        doc["summary"]["other_dead_letters"] = others
    if read_by_slice is not None:
        counts = {"overall": n_read, **{k: int(v) for k, v in read_by_slice.items()}}
        doc["summary"]["interactions_read_by_slice"] = {k: counts[k] for k in sorted(counts, key=lambda k: (k != "overall", k))}
    return doc


def results_json_bytes(doc: dict) -> bytes:
    """``results.json``'s exact bytes (UTF-8, indent 2, no NaN, no trailing newline). The slice
    summaries of a metric with ``detail`` (more than :data:`MAX_DETAILED_SLICES` slices) are
    written one slice per line (compact JSON), so the file stays small and each slice greps as one
    line; the document is the same JSON either way."""
    doc = scrub_known(doc)  # API-key values masked in values, never in keys (a key is a field name)
    import uuid

    nonce = uuid.uuid4().hex  # placeholders that no value can hold; the bytes do not depend on it
    lines, metrics = {}, {}
    for name, m in (doc.get("metrics") or {}).items():
        if isinstance(m, dict) and m.get("detail"):
            slices = []
            for r in m.get("slices") or []:
                if r.get("slice") == "overall":
                    slices.append(r)
                    continue
                key = f"{nonce}:{len(lines)}"
                lines[key] = json.dumps(r, ensure_ascii=False, allow_nan=False, separators=(", ", ": "))
                slices.append(key)
            m = {**m, "slices": slices}
        metrics[name] = m
    text = json.dumps({**doc, "metrics": metrics} if lines else doc, indent=2, ensure_ascii=False, allow_nan=False)
    if lines:
        text = re.sub(f'"({nonce}:[0-9]+)"', lambda mt: lines[mt.group(1)], text)
    return text.encode("utf-8")


class ReadCountsFn(beam.CombineFn):
    """Interactions → their counts as ``[("read", None, n), ("read_slice", "<dimension>=<value>", n)
    …]``: all of them, and those of each slice of ``dims`` (attributes of an interaction, e.g.
    ``assistant_id``). One dictionary entry per distinct tuple of ``dims`` values is added to per
    interaction; the slices' counts are summed from those at the end. Nothing counted gives ``[]``.
    Why: one combine input per interaction, where a key per count and slice (a ``FlatMap`` to 1 +
    len(dims) keys, then ``Count.PerElement``) made three elements per interaction cross two more
    steps each (docs/performance.md, "The read counts")."""

    def __init__(self, dims: Sequence[str] = ()):
        self.dims = tuple(dims)

    def create_accumulator(self):
        return {}

    def add_input(self, acc, x):
        key = tuple([getattr(x, d) for d in self.dims])
        acc[key] = acc.get(key, 0) + 1
        return acc

    def merge_accumulators(self, accumulators):
        accs = iter(accumulators)
        out = next(accs)
        for a in accs:
            for key, n in a.items():
                out[key] = out.get(key, 0) + n
        return out

    def extract_output(self, acc):
        if not acc:
            return []
        per_slice: Counter = Counter()
        for key, n in acc.items():
            for d, v in zip(self.dims, key):
                per_slice[f"{d}={v}"] += n
        return [("read", None, sum(acc.values())), *(("read_slice", k, n) for k, n in sorted(per_slice.items()))]


# what Beam infers for it whatever its input (Any): declared, so Beam does not derive it from process's bytecode
@beam.typehints.with_output_types(Any)
class _ScoredPerBundle(beam.DoFn):
    """A metric's session records → one ``("scored", metric, n)`` per bundle, ``n`` the sum of their
    ``n_interactions`` (:class:`ResultsDocFn` adds them up): one element per bundle instead of one per
    session through the results' ``Flatten``, which FnApiRunner writes and reads again. A bundle without
    a session record gives none. The main job's sessions are in the global window (batch).

    ``scored``: the metric's ``MetricSpec.scored`` test (``None``: every session record counts):
    only the sessions it passes count, the ones the metric's estimates rest on (the engine's
    ``n_sessions``), so ``interactions_scored`` is what the estimate rests on — BestOf's walkover
    blocks, never compared, are read but not scored (trial35 T7: "60 scored" of which 57 were in
    walkovers); their interactions go out as ``("left_out", metric, n)``."""

    def __init__(self, metric: str, scored=None):
        self.metric, self.scored = metric, scored

    def start_bundle(self):
        self._n = None
        self._left_out = 0

    def process(self, rec):
        n = int(rec.get("n_interactions") or 0)
        outcome = session_outcome(self.scored, rec)
        self._n = (self._n or 0) + (n if outcome == "scored" else 0)
        self._left_out += n if outcome == "left_out" else 0

    def finish_bundle(self):
        if self._n is not None:
            from apache_beam.transforms.window import GlobalWindows

            yield GlobalWindows.windowed_value(("scored", self.metric, self._n))
            if self._left_out:
                yield GlobalWindows.windowed_value(("left_out", self.metric, self._left_out))
        self._n = None


def session_outcome(test, rec: dict) -> Optional[str]:
    """What a metric's session record ``rec`` counts as in ``summary.metrics.<name>``: ``"scored"``
    (its interactions are ``interactions_scored``), ``"left_out"`` (read and given a verdict that
    its estimates leave out: ``interactions_left_out``) or ``None`` (the metric judged nothing in
    it, every judgement failed: only not scored). ``test``: the metric's ``MetricSpec.scored``
    (``None``: every record is scored; the test returning ``None``: judged nothing). One rule for
    the audit's counts and a roll-up's (``rollup._copied_scored``), on which the empty-run rule
    rests (:func:`~fair_forge_beam.reports.empty_run.empty_run_reason`)."""
    if test is None:
        return "scored"
    kept = test(rec)
    return "scored" if kept else None if kept is None else "left_out"


def scored_tests(specs: dict) -> dict:
    """``{metric: MetricSpec.scored}`` of the metrics that declare one (``specs``: ``{name:
    MetricSpec}``): :func:`write_outputs`'s ``scored_tests``."""
    return {name: spec.scored for name, spec in specs.items() if getattr(spec, "scored", None) is not None}


def write_outputs(read: dict, results: dict, out: str, parquet_schema: pa.Schema, config: dict,
                  static: dict, stats=None, read_counts=None, write_interactions: bool = True,
                  read_slice_dims: tuple = (), count_records: bool = False, scored_tests: Optional[dict] = None) -> list:
    """Attach every sink of the main job to the pipeline (see the module docstring for the layout).

    Args:
        read: ``ReadInteractions`` outputs (``interactions``, ``dead_letter``, ``quality``).
        results: ``{metric name: metric outputs}`` (``interactions``, ``sessions``, ``slices``,
            ``dead_letter``, ``quality``).
        out: the output folder (any Beam filesystem).
        parquet_schema: union schema of the per-interaction rows.
        config / static: :func:`results_config` and :func:`metric_static` of the run.
        stats: a :class:`~fair_forge_beam.io.session_stats.WriteSessionStats` given to the engine:
            the run's counts and manifest are stored too (``stats/``).
        read_counts: the counts of the reading stage as ``("read", None, n)``, ``("dead", (stage,
            reason kind), n)`` and ``("quality", kind, n)`` elements, instead of counting ``read``
            (a roll-up: the stored counts of its runs).
        write_interactions: ``False``: no ``results.parquet/`` (a roll-up copies its runs' shards).
        read_slice_dims: slice dimensions among ``assistant_id`` and ``language`` whose
            interactions-read counts go into ``results.json`` (coverage gates; default none).
        count_records: ``summary.records_read`` goes into ``results.json`` (a ``coverage
            rejected_share`` gate): counted from ``read["records_read"]`` (one count per session),
            or a roll-up's ``("records", None, n)`` elements in ``read_counts``.
        scored_tests: ``{metric: MetricSpec.scored}`` (:func:`scored_tests`): a metric's
            ``interactions_scored`` counts only the sessions its test passes; a metric left out
            counts every session record's ``n_interactions``.

    Returns:
        The sinks' results (PCollections of the written file names: the sharded outputs', the
        stored statistics' tables included, and ``results.json``), complete only once every file is
        in place: :func:`~fair_forge_beam.reports.output_folder.publish_after` waits on them (with
        ``stats.written``, the manifest's files).
    """
    dead = (
        tuple([read["dead_letter"]] + [r["dead_letter"] for r in results.values()])
        | "FlattenDeadLetter" >> beam.Flatten()
    )
    quality = (
        tuple([read["quality"]] + [r["quality"] for r in results.values()])
        | "FlattenQuality" >> beam.Flatten()
    )
    # every sharded output (the stored statistics' tables too) is written by one writer, below
    shards = stats.outputs if stats is not None else ShardedOutputs(out)
    shards.jsonl(dead, "dead_letter", "DeadLetter")
    shards.jsonl(quality, "data_quality", "Quality")
    if write_interactions:
        shards.parquet(
            tuple(r["interactions"] for r in results.values()),  # each metric's rows made into tables on its own
            "Parquet", "results.parquet", parquet_schema, PARQUET_BATCH_ROWS, _parquet_table(parquet_schema), masked=True)
    parts = [
        dead | "TagDead" >> beam.Map(lambda d: ("dead", (str(_field(d, "stage")), str(_field(d, "reason"))), 1)),
        quality | "TagQuality" >> beam.Map(lambda q: ("quality", str(_field(q, "kind")), 1)),
    ]
    # one ("read", None, 0) in every run: both combines below (ResultsDocFn, the manifest's _CountsCombineFn)
    # count it as nothing, and it spares each its default (a DoOnce and a side input: 4 transforms, 2 stages)
    parts.append(dead.pipeline | "ReadCountSeed" >> beam.Create([("read", None, 0)]))
    # interactions read per slice (counted per key first, then one element per slice): in
    # results.json for coverage gates (read_slice_dims), always in the stored counts (a roll-up's
    # coverage gates); a roll-up (read_counts: its runs' stored counts) has no interactions to count
    from fair_forge_beam.slices import CORE_SLICE_FIELDS, SLICE_DIMENSIONS

    wanted = tuple(d for d in read_slice_dims if d in CORE_SLICE_FIELDS)
    stored_dims = tuple(d for d in CORE_SLICE_FIELDS if d in (config.get("slices") or SLICE_DIMENSIONS))
    dims = tuple(dict.fromkeys((*wanted, *(stored_dims if stats is not None else ()))))
    if read_counts is None:  # one count per run and slice, not one tagged element per interaction through the results combine
        # the interactions read and those of each slice in one count per key: ("read", None) and
        # ("read_slice", "dimension=value") (a count of all and a count per slice were 10 transforms and
        # 2 shuffles); nothing read gives no ("read", None, n) from here (the seed above counts 0)
        parts.insert(0, read.get("counted", read["interactions"])  # the turns the assistant failed to answer too
                     | "CountRead" >> beam.CombineGlobally(ReadCountsFn(dims)).without_defaults()
                     | "TagRead" >> beam.FlatMap(lambda counts: counts))
    else:
        parts.insert(0, read_counts)
    if count_records and read_counts is None and "records_read" in read:
        parts.append(read["records_read"]
                     | "CountRecords" >> beam.CombineGlobally(sum).without_defaults()
                     | "TagRecords" >> beam.Map(lambda n: ("records", None, n)))
    if stats is not None:
        reader_quality = [read["session_quality"]] if "session_quality" in read else []
        stats.write_manifest(tuple(parts) | "FlattenCountParts" >> beam.Flatten(), reader_quality, parts_never_empty=True)
    for name, r in results.items():
        schema = session_schema(name)
        shards.parquet(r["sessions"], f"Sessions_{name}", f"sessions/{name}", schema, PARQUET_BATCH_ROWS,
                       session_table(name, schema), masked=True)
        # rows, not records, wait in the writer's batches (slice_row)
        rows = r["slices"] | f"SliceRows_{name}" >> beam.Map(slice_row(name))
        shards.parquet(rows, f"Slices_{name}", f"slices/{name}", SLICE_SCHEMA, SLICE_BATCH_ROWS, slice_rows_table,
                       masked=True)
        parts.append(r["sessions"] | f"TagScored_{name}" >> beam.ParDo(_ScoredPerBundle(name, (scored_tests or {}).get(name))))
        parts.append(
            r["slices"]
            | f"SliceSummaries_{name}" >> beam.CombineGlobally(_TaggedSliceSummariesFn(name, static)).without_defaults())
    written = [shards.write(), write_one_file(
        tuple(parts)
        | "FlattenResultParts" >> beam.Flatten()
        | "CombineResults" >> beam.CombineGlobally(ResultsDocFn(config, static, read_slice_dims, count_records)
                                                   ).without_defaults(),  # parts hold the seed: never empty
        f"{out}/results.json", "WriteResultsJson", to_text=lambda doc: results_json_bytes(doc).decode("utf-8"))]
    return written


# ----------------------------------------------------------------------------- driver side
def _versions() -> dict:
    from fair_forge_beam.options import recorded_packages

    out = {}
    # the packages that can change results, declared in one place (None: not installed)
    for pkg in recorded_packages():
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def utc_timestamp(seconds: Optional[float] = None) -> str:
    """``seconds`` since the epoch (default: now) as ISO 8601 in UTC to the millisecond,
    ``2025-05-01T02:00:00.123Z``: the form of ``run_info.json``'s ``started_at`` / ``finished_at``."""
    t = datetime.fromtimestamp(time.time() if seconds is None else seconds, tz=timezone.utc)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def write_run_info(out: str, run_info: dict) -> dict:
    """Write ``run_info.json`` (``run_info`` plus ``finished_at``, unless given: now, see
    :func:`utc_timestamp`, and package versions); returns what was written. The trend report
    orders runs by ``started_at``, else ``finished_at`` (docs/report.md)."""
    info = {**run_info, "finished_at": run_info.get("finished_at") or utc_timestamp(), "versions": _versions()}
    with FileSystems.create(f"{out}/run_info.json") as f:
        f.write(json.dumps(scrub_known(info), indent=2, allow_nan=False).encode("utf-8"))  # values masked, never keys
    return info


#: the class reasons are grouped by (tests and older callers; fair_forge_beam.reasons is the helper)
_reason_kind = reason_class


def _ranked(counts: dict, top: int = 20) -> dict:
    """Counts per reason kind, most frequent first, ties by text (deterministic); the rest in
    one ``"other (K kinds)"`` entry so the counts always add up."""
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    out = dict(ranked[:top])
    rest = ranked[top:]
    if rest:
        out[f"other ({len(rest)} kinds)"] = sum(v for _, v in rest)
    return out

