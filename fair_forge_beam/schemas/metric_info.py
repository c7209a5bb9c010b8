"""The metric info: how to read a metric's results, declared by the metric (DESIGN.md §1, item 4).

Every metric class declares one :class:`MetricInfo` (``info = MetricInfo(...)``): its estimates
with labels, units, natural ranges, directions (is higher better or worse?), reference lines and
gate field names, the ``(k, n)`` counts behind its rates, its per-interaction Parquet columns and
a few presentation facts (session histograms, its plot, what one dead letter stands for). The
report, the console summary, the comparison, the gates and the trend report read the info
through :func:`fair_forge_beam.metrics.registry.metric_info`; none of them keeps a table keyed by
metric name. A ``results.json`` of a metric without an info (a newer version, a metric of your
own) is still read, generically: every estimate-shaped dict is found, labelled by its path, with
no direction, a 0–1 range and no counts.

This module is declarations only: it imports nothing beyond the standard library (pyarrow and
the result schemas only when :meth:`MetricInfo.parquet_fields` is called), so reading an info is
cheap wherever the metric module is.

Paths: an estimate's ``path`` is the dotted path of its ``{mean, ci_low, ci_high, n}`` dict in a
slice record of ``results.json`` (``toxic_rate``, ``estimates.DIDT``). A *keyed* family of
estimates has one ``{key}`` segment (``rates.{key}``: one estimate per protected attribute;
``group_profiling.group_estimates.{key}.T``: one per group).
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, Sequence, Union

from fair_forge_beam.blank import is_blank
from fair_forge_beam.quoting import quoted

__all__ = ["EstimateInfo", "MetricInfo", "DeadLetterStage", "ParquetColumns", "COLUMN_TYPES", "check_metric_name", "SessionHistogram", "KEY", "dotted_get"]

#: the placeholder of the key segment of a keyed estimate's path
KEY = "{key}"

#: counts of a rate: ``(k path, n path)`` (dotted, may hold ``{key}``), or a function of the slice
#: record returning ``{concrete estimate path: (k, n)}``
Counts = Union[tuple[str, str], Callable[[dict], dict]]


#: what a metric's name may be: it names files and folders (``sessions/<name>/``), Beam transforms,
#: ``--metrics`` lists and gates, so letters, digits, ``_`` and ``-``, a letter first
_METRIC_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")


def check_metric_name(name: Any, what: str = "metric name") -> str:
    """``name`` when it can be a metric's name (:data:`_METRIC_NAME`: letters, digits, ``_`` and
    ``-``, a letter first, at most 64), checked where a metric is declared (its class, its
    :class:`MetricInfo`, its :class:`~fair_forge_beam.engine.MetricSpec`, its registration).

    Raises:
        ValueError: one line naming it (a ``/`` once failed in Beam's finalize_write after scoring
            every interaction, trial35 T5).
    """
    if not isinstance(name, str) or not _METRIC_NAME.fullmatch(name):
        raise ValueError(f"{what} {quoted(name)} cannot name a metric: use letters, digits, _ and -, a letter first "
                         "(at most 64; the name names its output folders and --metrics)")
    return name


def declared_names(metric: Any) -> list:
    """``(what, name)`` for each place metric ``metric`` (a metric class or an instance of one) declares
    its name: its class's ``name``, its class's ``info.name``, and an instance's own ``name`` / ``info``
    when one was set on it after it was built (read by :func:`agreeing_name`)."""
    cls = metric if isinstance(metric, type) else type(metric)
    out = [(f"{cls.__name__}.name", cls.name)] if isinstance(getattr(cls, "name", None), str) else []
    if isinstance(getattr(cls, "info", None), MetricInfo):
        out.append((f"{cls.__name__}.info.name", cls.info.name))
    own = {} if isinstance(metric, type) else getattr(metric, "__dict__", {})
    if "name" in own:
        out.append(("the instance's own name (set after it was built)", own["name"]))
    if isinstance(own.get("info"), MetricInfo):
        out.append(("the instance's own info.name (set after it was built)", own["info"].name))
    return out


def agreeing_name(names: Sequence[tuple], fix: str) -> Any:
    """The one name every ``(what, name)`` pair of ``names`` gives: a metric's registered key, its
    class's ``name``, its info's name and its spec's name name the same outputs (trial37b B3: a metric
    registered as ``METRICS["h2"]`` with class name ``humanity2`` wrote ``results.json`` under one and
    its slices and Parquet rows under the other).

    Raises:
        ValueError: one line saying which differ and ``fix`` (how to make them agree).
    """
    first = names[0][1]
    if all(n == first for _, n in names):
        return first
    said = "; ".join(f"{what} is {quoted(n)}" for what, n in names)
    raise ValueError(f"a metric's names differ: {said}. One name names a metric's outputs, --metrics and gates: {fix}")


def dotted_get(record: Any, path: str):
    """``record["a"]["b"]`` for the dotted path ``"a.b"`` (``None`` when missing)."""
    for part in path.split("."):
        if not isinstance(record, dict):
            return None
        record = record.get(part)
    return record


def is_estimate(value) -> bool:
    """True for a dict with the keys ``mean``, ``ci_low`` and ``ci_high`` (how every surface finds an
    estimate). Here, not in :mod:`fair_forge_beam.statistical.slices`: the reports read it without Beam."""
    return isinstance(value, dict) and {"mean", "ci_low", "ci_high"} <= value.keys()


#: why an estimate has no value when its metric does not say (:attr:`EstimateInfo.undefined`)
NO_VALUE = "no session of the slice had what it measures (n = 0)"


@dataclass(frozen=True)
class EstimateInfo:
    """One estimate of a slice record, or one keyed family of estimates.

    Attributes:
        path: dotted path in a slice record; a keyed family has one ``{key}`` segment.
        label: short human label (report columns, plots); in a keyed family ``{key}`` stands for
            the key with underscores as spaces.
        definition: plain definition with the source of its formula (spec section or doc page);
            ``None``: none shown.
        unit: what a value is measured in, in words (``"share of answers"``, ``"bits"``).
        value_range: ``(low, high)``, the natural range of the values; the report's
            inconclusive-width check divides interval widths by ``high − low``.
        direction: ``+1`` a higher value is better, ``-1`` lower is better, ``0`` neither (the
            comparison then says higher/lower, never better/worse; no regression gate).
        reference: ``(op, threshold)`` — the report's reference line (a reading aid, not a
            standard), ``op`` one of ``<=``, ``<``, ``>=``, ``>``; ``None``: no line.
        gate: the field name gates use (``toxicity DIDT ci_high <= 0.2``); ``None``: not gateable.
        headline: a headline estimate: a scorecard column, a column of the console summary and of
            the slice tables, checked by ``regression <metric> not worse``.
        key_name: what a key of a keyed family is (``"attribute"``, ``"emotion"``, ``"group"``).
        keys: the keys the metric can produce (gates check ``for <key>`` against them; empty: any).
        counts: where the integer counts ``(k, n)`` behind a rate estimate are (:data:`Counts`):
            the comparison then uses Beta posteriors / the Agresti–Caffo interval, the report the
            Wald width of a frequentist rate.
        explained: listed with its definition at the top of the metric's report section
            (headline estimates with a definition always are).
        observed: what one observation of the estimate is (its ``n`` counts them): ``"session"``
            for most; agentic pass@k and pass^k: ``"task"`` (a task's k sessions are one
            observation). The console's and the gates' one-observation notes name it.
        undefined: why a slice's estimate has no value ("n/a": ``mean`` None), in words, naming the
            option that decides it where one does; ``None``: :data:`NO_VALUE` (nothing to measure).
            The console says it under the metric's table (trial48 B9: ``pass_at_k n/a`` with no word
            when no task had ``--agentic-k`` trials).
    """

    path: str
    label: str
    definition: Optional[str] = None
    unit: str = "share"
    value_range: tuple[float, float] = (0.0, 1.0)
    direction: int = 0
    reference: Optional[tuple[str, float]] = None
    gate: Optional[str] = None
    headline: bool = False
    key_name: Optional[str] = None
    keys: tuple[str, ...] = ()
    counts: Optional[Counts] = None
    explained: bool = True
    observed: str = "session"
    undefined: Optional[str] = None

    def __post_init__(self):
        if self.path.count(KEY) > 1:
            raise ValueError(f"{quoted(self.path)}: at most one {KEY} segment")
        if isinstance(self.counts, tuple) and (KEY in self.path) != all(c.endswith("." + KEY) for c in self.counts):
            raise ValueError(f"{quoted(self.path)}: the counts paths of a keyed estimate end in .{KEY} (and only theirs)")
        if (KEY in self.path) != (self.key_name is not None):
            raise ValueError(f"{quoted(self.path)}: a keyed path and a key_name go together")
        if self.direction not in (-1, 0, 1):
            raise ValueError(f"{quoted(self.path)}: direction must be -1, 0 or +1")
        if self.reference is not None and self.reference[0] not in ("<=", "<", ">=", ">"):
            raise ValueError(f"{quoted(self.path)}: reference op must be <=, <, >= or >")
        lo, hi = self.value_range
        if not hi > lo:
            raise ValueError(f"{quoted(self.path)}: value_range must be (low, high) with high > low")

    @property
    def keyed(self) -> bool:
        return self.key_name is not None

    @property
    def span(self) -> float:
        """Length of the natural range (``high − low``)."""
        return float(self.value_range[1] - self.value_range[0])

    @property
    def parent(self) -> str:
        """A keyed family's path up to its key (``rates`` of ``rates.{key}``)."""
        return self.path.split("." + KEY)[0] if self.keyed else self.path

    @property
    def suffix(self) -> str:
        """A keyed family's path after its key (``T`` of ``group_profiling.group_estimates.{key}.T``)."""
        return self.path.split(KEY, 1)[1].lstrip(".") if self.keyed else ""

    def concrete(self, key: Optional[str]) -> str:
        """The path of one key's estimate (the path itself when not keyed)."""
        return self.path.replace(KEY, str(key)) if self.keyed else self.path

    def match(self, path: str) -> tuple[bool, Optional[str]]:
        """``(True, key)`` when the concrete ``path`` is this estimate (``key`` ``None`` when not keyed)."""
        if not self.keyed:
            return path == self.path, None
        m = _pattern(self.path).fullmatch(path)
        return (True, m.group(1)) if m else (False, None)

    def label_for(self, key: Optional[str]) -> str:
        """The label of one key's estimate (``{key}`` filled, underscores as spaces)."""
        return self.label.replace(KEY, str(key).replace("_", " ")) if self.keyed else self.label

    def entries(self, record: dict) -> list[tuple[str, Any]]:
        """``[(key, value)]`` of a keyed family in a slice record, in the record's order (the
        value is whatever sits at the key's path; ``[]`` when the family is absent)."""
        node = dotted_get(record, self.parent)
        if not isinstance(node, dict):
            return []
        suffix = self.suffix
        return [(k, dotted_get(v, suffix) if suffix else v) for k, v in node.items()]

    def counts_in(self, record: dict) -> dict[str, tuple[int, int]]:
        """``{concrete path: (k, n)}`` of this estimate in a slice record (empty without counts)."""
        if self.counts is None:
            return {}
        if callable(self.counts):
            return dict(self.counts(record))
        k_path, n_path = self.counts
        if not self.keyed:
            k, n = dotted_get(record, k_path), dotted_get(record, n_path)
            return {self.path: (k, n)} if isinstance(k, int) and isinstance(n, int) else {}
        # keyed: both paths end in ".{key}"; keys are looked up whole (a key may hold a dot)
        k_all = dotted_get(record, k_path[:-len("." + KEY)])
        n_all = dotted_get(record, n_path[:-len("." + KEY)])
        k_all = k_all if isinstance(k_all, dict) else {}
        out = {}
        for key, n in (n_all if isinstance(n_all, dict) else {}).items():
            k = k_all.get(key)
            if isinstance(n, int) and isinstance(k, int):
                out[self.concrete(key)] = (k, n)
        return out


_PATTERNS: dict[str, re.Pattern] = {}


def _pattern(path: str) -> re.Pattern:
    p = _PATTERNS.get(path)
    if p is None:
        head, tail = path.split(KEY, 1)
        p = _PATTERNS[path] = re.compile(re.escape(head) + r"(.+)" + re.escape(tail))
    return p


#: the column types of :attr:`ParquetColumns.columns`: each name (pyarrow's, and the natural
#: spellings) -> the pyarrow type function
COLUMN_TYPES = {"string": "string", "str": "string", "bool_": "bool_", "bool": "bool_", "boolean": "bool_",
                "int64": "int64", "int": "int64", "int32": "int32", "float64": "float64", "float": "float64",
                "double": "float64", "float32": "float32"}

#: the columns every row of ``results.parquet`` starts with, written by the engine (name, type name):
#: a metric declares none of them (``metrics.registry.BASE_FIELDS`` is built from this)
PARQUET_HEADER = (("metric", "string"), ("element_id", "string"), ("session_id", "string"),
                  ("assistant_id", "string"), ("language", "string"), ("turn_index", "int64"), ("qa_id", "string"))


@dataclass(frozen=True)
class ParquetColumns:
    """Per-interaction Parquet columns of a metric (``results.parquet``).

    Either derived from a pydantic result model — ``model`` (``"module:Class"``), the field
    ``names`` and a column-name ``prefix`` (:func:`fair_forge_beam.schemas.arrow.arrow_fields`) —
    or given directly as ``columns``: ``(name, type name)`` pairs, a type name one of
    :data:`COLUMN_TYPES` (``"string"``, ``"bool"``, ``"int64"``, ``"float64"``, …).

    Raises:
        ValueError: a column type name not in :data:`COLUMN_TYPES`, or a column name that is empty
            or blank, given twice or one of the header's (:data:`PARQUET_HEADER`, written by the engine)
            (when declared, one line; trial35b B10: an empty name was written, ``session_id``
            declared int64 was ignored).
    """

    model: Optional[str] = None
    names: tuple[str, ...] = ()
    prefix: str = ""
    columns: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        for column in self.columns:
            pair = isinstance(column, (tuple, list)) and len(column) == 2
            if not pair or not isinstance(column[1], str) or column[1] not in COLUMN_TYPES:
                raise ValueError(f"ParquetColumns: column {quoted(column)} must be a (name, type) pair with a type "
                                 f"of {', '.join(COLUMN_TYPES)}")
        header = {name for name, _ in PARQUET_HEADER}
        seen: set = set()
        for name, _ in self.columns:
            if not isinstance(name, str) or is_blank(name):
                raise ValueError(f"ParquetColumns: column name {quoted(name)} must be a non-blank string")
            if name in header:
                raise ValueError(f"ParquetColumns: column {quoted(name)} is one of the columns every row of "
                                 f"results.parquet starts with ({', '.join(sorted(header))}), written by the "
                                 "engine: name the metric's column otherwise")
            if name in seen:
                raise ValueError(f"ParquetColumns: column {quoted(name)} is declared twice")
            seen.add(name)

    def fields(self) -> list:
        import pyarrow as pa

        if self.model is None:
            return [pa.field(name, getattr(pa, COLUMN_TYPES[typ])()) for name, typ in self.columns]
        import importlib

        from fair_forge_beam.schemas.arrow import union_fields

        module, cls = self.model.split(":")
        return union_fields([(getattr(importlib.import_module(module), cls), list(self.names), self.prefix)])


@dataclass(frozen=True)
class SessionHistogram:
    """A session value the report draws as a histogram: ``label``, dotted ``path`` in a session
    record, natural ``value_range`` and number of ``bins``.

    ``share_of``: ``(successes, trials)``, dotted paths of a session record's counts; the value
    drawn is then the session's observed share ``successes / trials`` (``path`` unused). A rate's
    Bayesian session estimate is a posterior mean pulled towards the prior (Beta(1, 1): 0 of 2 is
    0.25), so a histogram of it shows sessions with no event at 0.2–0.33 (trial38 T4): a rate is
    drawn from its counts, the same in both modes."""

    label: str
    path: Optional[str] = None
    value_range: tuple[float, float] = (0, 1)
    bins: int = 20
    share_of: Optional[tuple[str, str]] = None

    def __post_init__(self):
        if (self.path is None) == (self.share_of is None):
            raise ValueError(f"session histogram {self.label!r}: give a path or share_of, one of them")


@dataclass(frozen=True)
class DeadLetterStage:
    """A stage of a metric other than the one named after it whose dead letters are the metric's
    (``prompt_evaluator.jq``: one failed JQ judgement each): ``results.json``'s summary counts them
    for the metric under ``stage_dead_letters.<stage>``, in this unit, and the console prints them.

    Attributes:
        stage: the dead letters' ``stage``.
        unit: what one of them stands for ("failed JQ judgements (one per generated answer)").
        part: the name of what the stage computes, for a reader ("JQ").
        feeds: the path of the estimate the stage alone feeds (``"jq"``), or ``None``: when the
            stage wrote dead letters and the ``overall`` slice has no value of it, the console
            says the part scored nothing.
    """

    stage: str
    unit: str
    part: Optional[str] = None
    feeds: Optional[str] = None


@dataclass(frozen=True)
class MetricInfo:
    """How to read one metric's results (see the module docstring).

    Attributes:
        name: the metric name (``--metrics``; key of ``results.json``'s ``metrics``).
        estimates: its estimates, headline estimates first in column order; estimates of a slice
            record not listed here are read generically.
        repeats: :mod:`fnmatch` patterns of estimate-shaped dicts that repeat another estimate
            under another name (left out of every listing, e.g. Toxicity's upstream-shaped copy).
        parquet: its per-interaction Parquet columns, in order.
        dead_letter_unit: what one of its dead letters stands for, when not one interaction.
        dead_letter_stages: its other stages that write dead letters (:class:`DeadLetterStage`);
            a stage ``<name>.<part>`` not declared is the metric's too, in a generic unit.
        left_out: what the sessions its ``MetricSpec.scored`` test leaves out are, in its own words
            (``interactions_left_out`` of the summary: "blocks never compared"); ``None``: "sessions
            its estimates leave out".
        slice_dimensions: the slice dimensions it can be sliced by (``None``: any).
        sessions_field: the slice-record field holding the number of resampling units (sessions,
            or BestOf's blocks); ``None``: none.
        sessions_unit: what one resampling unit is, in messages ("the slice rests on 1 block"):
            ``"session"``, BestOf's ``"block"``.
        session_histograms: the session values the report draws as histograms.
        plot: name of its plot function in :mod:`fair_forge_beam.reports.plots` (``None``: the
            generic plot of the headline estimates).
    """

    name: str
    estimates: tuple[EstimateInfo, ...]
    repeats: tuple[str, ...] = ()
    parquet: tuple[ParquetColumns, ...] = ()
    dead_letter_unit: Optional[str] = None
    dead_letter_stages: tuple[DeadLetterStage, ...] = ()
    left_out: Optional[str] = None
    slice_dimensions: Optional[tuple[str, ...]] = None
    sessions_field: Optional[str] = "n_sessions"
    sessions_unit: str = "session"
    session_histograms: tuple[SessionHistogram, ...] = ()
    plot: Optional[str] = None

    def __post_init__(self):
        check_metric_name(self.name, "MetricInfo: the name")
        gates = [e.gate for e in self.estimates if e.gate]
        if len(gates) != len(set(gates)):
            raise ValueError(f"{self.name}: a gate field declared twice")
        heads = [e for e in self.estimates if e.headline]
        if self.estimates[:len(heads)] != tuple(heads):
            raise ValueError(f"{self.name}: headline estimates come first")

    def find(self, path: str) -> tuple[Optional[EstimateInfo], Optional[str]]:
        """``(estimate info, key)`` of a concrete estimate path (``(None, None)`` when not declared)."""
        for e in self.estimates:
            ok, key = e.match(path)
            if ok:
                return e, key
        return None, None

    def is_repeat(self, path: str) -> bool:
        """True when ``path`` matches :attr:`repeats`."""
        return any(fnmatch.fnmatchcase(path, p) for p in self.repeats)

    def headline_columns(self, keys: Optional[Sequence[str]] = None) -> tuple[str, ...]:
        """The concrete paths of the headline estimates, in order; a keyed headline family is
        expanded over ``keys`` (default: its declared keys)."""
        out: list[str] = []
        for e in self.estimates:
            if e.headline:
                out.extend(e.concrete(k) for k in (keys if keys is not None else e.keys)) if e.keyed \
                    else out.append(e.path)
        return tuple(out)

    def gate_fields(self) -> dict[str, EstimateInfo]:
        """Gate field name → estimate, in declaration order."""
        return {e.gate: e for e in self.estimates if e.gate}

    def counts(self, record: dict) -> dict[str, tuple[int, int]]:
        """``{estimate path: (k, n)}`` of the record's rate estimates."""
        out: dict[str, tuple[int, int]] = {}
        for e in self.estimates:
            out.update(e.counts_in(record))
        return out

    def parquet_fields(self) -> list:
        """Its per-interaction Parquet columns as ``pyarrow.Field`` objects."""
        return [f for part in self.parquet for f in part.fields()]

    def explained(self, headline: Sequence[str]) -> Iterator[tuple[EstimateInfo, Optional[str]]]:
        """The estimates defined at the top of the metric's report section: each path of
        ``headline`` that has a definition, then every other explained estimate with a
        definition, in declaration order (a keyed family once, with key ``None``)."""
        seen = set()
        for path in headline:
            e, key = self.find(path)
            if e is not None and e.definition:
                seen.add(e.path)
                yield e, key
        for e in self.estimates:
            if e.path not in seen and e.explained and e.definition and not e.headline:
                yield e, None

