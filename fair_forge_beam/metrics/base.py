"""What every metric shares: the ``PTransform`` base, slice keys and the upstream-style ``run``."""
from __future__ import annotations

import inspect
import tempfile
from typing import Any, ClassVar, Optional, Sequence

from fair_forge_beam._beam import beam
from fair_forge_beam.quoting import quoted

from fair_forge_beam.schemas.metric_info import MetricInfo, check_metric_name
from fair_forge_beam.statistical.base import StatisticalMode
from fair_forge_beam.statistical.frequentist import FrequentistMode
from fair_forge_beam.slices import SLICE_DIMENSIONS, metadata_dimensions, slice_name_problems
from fair_forge_beam.arguments import a_type, checks_arguments

__all__ = ["MetricTransform", "MetricResults", "nest_session_interactions", "run_keyword_hints"]


def nest_session_interactions(res: "MetricResults") -> "MetricResults":
    """Upstream shape of a one-shot run whose list holds per-interaction objects: one session
    object per session, each with its ``interactions`` nested in turn order (ties by element
    id). ``.interactions`` keeps the flat list; sessions, slices, dead letter and quality are
    unchanged."""
    per_qa = list(res)
    by_session: dict[tuple, list] = {}
    for r in sorted(per_qa, key=lambda r: (r.turn_index, r.element_id)):
        by_session.setdefault((r.session_id, r.assistant_id, r.language), []).append(r)
    sessions = [
        s.model_copy(update={"interactions": by_session.get((s.session_id, s.assistant_id, s.language), [])})
        for s in res.sessions
    ]
    out = MetricResults(sessions, sessions, res.slices, res.dead_letter, res.quality)
    out.interactions = per_qa
    return out


def run_keyword_hints(cls: type, metric_keywords: Sequence[str], retriever_kwargs: dict) -> dict[str, str]:
    """What to tell of each keyword ``cls.run`` passes on to the retriever, should the retriever not
    take or read it: the Python spelling of the command-line option it is named like
    (``toxicity_scorer`` → ``toxicity_classifier='profanity-check'``), or the metric keyword it is
    nearest to (``statistcal_mode`` → ``statistical_mode``)."""
    from fair_forge_beam.options import python_spelling
    from fair_forge_beam.quoting import closest

    out = {}
    for k in retriever_kwargs:
        spelt = python_spelling(str(k), cls.__name__)
        if spelt:
            out[k] = f"the command line's --{str(k).replace('_', '-')}; in Python: {cls.__name__}({spelt})"
            continue
        near = closest(str(k), metric_keywords)
        if near is not None:
            out[k] = f"not a keyword of {cls.__name__}: did you mean {near}=?"
    return out


class MetricResults(list):
    """The upstream result list plus the aggregates: one object per interaction (spec §6.x), or
    one per slice for metrics whose upstream result is a single aggregate (Toxicity: ``[0]`` is
    the ``overall`` slice).

    Attributes:
        interactions: the per-interaction result objects.
        sessions: session-level result objects.
        slices: slice-level result objects (``overall``, per assistant, per language).
        dead_letter: records that could not be read or scored (dicts ``{stage, reason, element_id, raw}``).
        quality: data-quality warnings (dicts ``{kind, key, message}``).
    """

    def __init__(self, items=(), sessions=(), slices=(), dead_letter=(), quality=()):
        super().__init__(items)
        self.interactions = list(items)
        self.sessions, self.slices = list(sessions), list(slices)
        self.dead_letter, self.quality = list(dead_letter), list(quality)


class _Headlines:
    def __get__(self, obj, cls) -> tuple:
        return cls.info.headline_columns() if cls.info is not None else ()


class MetricTransform(beam.PTransform):
    """Base of metric ``PTransform``s: ``PCollection[Interaction]`` → dict of result PCollections.

    Subclasses set ``name``, the schemas and ``info``, and declare the metric for the engine: a
    method ``spec(windowed=False)`` returning a :class:`~fair_forge_beam.engine.MetricSpec`; the
    inherited ``expand`` runs :class:`~fair_forge_beam.engine.Engine` with just this metric, and
    the main job fuses it with the run's other metrics.
    """

    name: ClassVar[str] = "metric"
    #: what ``run()``'s list holds, as upstream: ``"interactions"`` (one object per interaction)
    #: or ``"slices"`` (one aggregate per slice, ``overall`` first — upstream's single record)
    run_returns: ClassVar[str] = "interactions"
    interaction_schema: ClassVar[Any] = None
    session_schema: ClassVar[Any] = None
    slice_schema: ClassVar[Any] = None
    #: how to read the results (:class:`~fair_forge_beam.schemas.metric_info.MetricInfo`): estimates,
    #: labels, ranges, directions, reference lines, gate fields, Parquet columns; ``None``: read generically
    info: ClassVar[Optional[MetricInfo]] = None
    #: the slice columns the main job's summary prints: ``info``'s headline estimates (none without
    #: an info), of the class and of an instance that sets no columns of its own
    headline_columns = _Headlines()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "name" in vars(cls):  # checked where declared, not after a whole run (trial35 T5)
            check_metric_name(cls.name, f"{cls.__name__}.name:")
        cls._check_info_name()

    @classmethod
    def _check_info_name(cls) -> None:
        """Raise ``ValueError`` when ``cls.info`` names another metric than ``cls.name``: run where the
        class is declared and again when it is instantiated, so that a name set on the class after its
        creation (``Late.name = "late"``, trial36b B10) is refused before its outputs split between both."""
        info = cls.info
        if isinstance(info, MetricInfo) and info.name != cls.name:  # trial35b B6: the outputs split between both
            if "info" in vars(cls):
                raise ValueError(f"{cls.__name__}.info.name {quoted(info.name)} is not {cls.__name__}.name "
                                 f"{quoted(cls.name)}: one name names a metric's outputs, --metrics and gates; give "
                                 "both the same")
            parent = next(b.__name__ for b in cls.__mro__ if "info" in vars(b))  # the info describes another metric
            raise ValueError(f"{cls.__name__}.name {quoted(cls.name)} is not the name of the info it inherits "
                             f"({parent}.info, {quoted(info.name)}): declare its own, e.g. info = "
                             f"dataclasses.replace({parent}.info, name={quoted(cls.name)}), or keep the name")

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, statistical_mode: Optional[StatisticalMode] = None, slices: Sequence[str] = SLICE_DIMENSIONS):
        super().__init__()
        check_metric_name(type(self).name, f"{type(self).__name__}.name:")
        type(self)._check_info_name()
        if statistical_mode is not None and not isinstance(statistical_mode, StatisticalMode):
            raise ValueError(f"statistical_mode must be a StatisticalMode, got {a_type(statistical_mode)}")  # never its repr
        if isinstance(slices, str):  # ("region") is a string: its letters are not dimensions
            raise ValueError(f"slices must be a sequence of names, e.g. ('overall', {quoted(slices)}), got the string {quoted(slices)}")
        problems = slice_name_problems(slices)
        if problems:
            raise ValueError(f"slices: {'; '.join(problems)}; choose from {list(SLICE_DIMENSIONS)} or the name of a "
                             "session metadata field")
        self.mode = statistical_mode or FrequentistMode()
        self.slices = tuple(slices)

    def __setattr__(self, attribute, value):
        """Refuses ``name`` and ``info`` set on a built metric (trial37b B3: ``m.name = "x"`` named its
        ``results.json`` entry one way and its slice records another): a metric's name is its class's."""
        if attribute in ("name", "info"):
            cls = type(self).__name__
            raise ValueError(f"{cls}.{attribute} cannot be set on a built metric: one name names a metric's outputs, "
                             f"--metrics and gates, and it is its class's; declare a subclass with its own name and "
                             f"info = dataclasses.replace({cls}.info, name=...)")
        super().__setattr__(attribute, value)

    def expand(self, interactions):
        from fair_forge_beam.engine import Engine, engine_spec

        return (interactions | "Engine" >> Engine([engine_spec(self, interactions)]))[self.name]

    @classmethod
    def run(cls, retriever, verbose: bool = False, pipeline_args: Optional[Sequence[str]] = None, **kwargs) -> MetricResults:
        """Upstream-style one-shot run: read ``retriever`` (a :class:`Retriever` subclass), compute,
        return a :class:`MetricResults` (a list of per-interaction result objects with
        ``.sessions``, ``.slices``, ``.dead_letter`` and ``.quality``): objects of the class's
        ``interaction_schema``, ``session_schema`` and ``slice_schema``, or the records as dicts
        where it declares none.

        Keyword arguments this metric's constructor accepts configure the metric; the rest are
        passed to the retriever (as upstream), which must take each (its ``__init__`` declares it:
        checked before the pipeline) or read it (``self.kwargs``, with ``Retriever``'s own
        ``__init__``: checked once its data are loaded): a keyword neither reads is a ``TypeError``
        naming it and the metric keyword or the Python spelling of the command-line option it is
        nearest to (trial36 T1: ``statistcal_mode=`` ran in the default mode, ``toxicity_scorer=``
        with the default scorer, without a word). The pipeline runs on ``FnApiRunner`` unless
        ``pipeline_args`` names another runner. ``verbose``: print one line of what the run did
        (interactions scored, sessions, slices, dead letters, data-quality warnings) to stderr.
        """
        from fair_forge_beam.options import checked_pipeline_args
        from fair_forge_beam.run_scope import one_run

        pipeline_args = checked_pipeline_args(pipeline_args)  # Beam's values as the command line checks them (trial47 B4)
        params = inspect.signature(cls.__init__).parameters
        metric_kwargs = {k: v for k, v in kwargs.items() if k in params and k != "self"}
        retriever_kwargs = {k: v for k, v in kwargs.items() if k not in metric_kwargs}
        hints = run_keyword_hints(cls, [k for k in params if k != "self"], retriever_kwargs)
        with one_run():  # what the metric registers in the process (a judge's key variable) is this run's (trial44)
            return cls._run(retriever, verbose, pipeline_args, metric_kwargs, retriever_kwargs, hints)

    @classmethod
    def _run(cls, retriever, verbose, pipeline_args, metric_kwargs: dict, retriever_kwargs: dict, hints) -> MetricResults:
        """:meth:`run` once its keywords are sorted: the metric built, the pipeline run, its outputs read."""
        from fair_forge_beam.io.read import ReadInteractions
        from fair_forge_beam.beam_pipeline import pipeline_options, run_pipeline
        from fair_forge_beam.io.write import read_jsonl_shards, write_jsonl

        transform = cls(**metric_kwargs)
        with tempfile.TemporaryDirectory(prefix="fair_forge_beam_") as tmp:
            with run_pipeline(pipeline_options(pipeline_args)) as p:
                read = p | "Read" >> ReadInteractions(retriever=retriever, retriever_kwargs=retriever_kwargs,
                                                      keyword_hints=hints,
                                                      slice_fields=metadata_dimensions(transform.slices),
                                                      fields_read=transform.spec().reads)
                res = read["interactions"] | cls.__name__ >> transform
                dead = (read["dead_letter"], res["dead_letter"]) | "FlattenDead" >> beam.Flatten()
                quality = (read["quality"], res["quality"]) | "FlattenQuality" >> beam.Flatten()
                for name, pc in (("interactions", res["interactions"]), ("sessions", res["sessions"]),
                                 ("slices", res["slices"]), ("dead_letter", dead), ("quality", quality)):
                    write_jsonl(pc, f"{tmp}/{name}", f"Collect{name}")
            order = lambda r: (r.get("session_id", ""), r.get("assistant_id", ""), r.get("turn_index", 0))
            items = sorted(read_jsonl_shards(f"{tmp}/interactions"), key=order)
            sessions = sorted(read_jsonl_shards(f"{tmp}/sessions"), key=order)
            slices = sorted(read_jsonl_shards(f"{tmp}/slices"), key=lambda r: (r["slice"] != "overall", r["slice"]))
            # a class that declares no result schema (one written from docs/engine.md) returns its plain dicts
            typed = lambda schema, recs: [schema.model_validate(r) for r in recs] if schema is not None else recs
            per_qa, slice_objs = typed(cls.interaction_schema, items), typed(cls.slice_schema, slices)
            res = MetricResults(
                slice_objs if cls.run_returns == "slices" else per_qa,
                typed(cls.session_schema, sessions),
                slice_objs,
                read_jsonl_shards(f"{tmp}/dead_letter"),
                read_jsonl_shards(f"{tmp}/quality"),
            )
            res.interactions = per_qa
            if verbose:  # upstream's flag: one line of what the run did (trial36 T1: it was read by nobody)
                import sys

                print(f"{cls.__name__}.run: {len(per_qa):,} interactions scored, {len(res.sessions):,} sessions, "
                      f"{len(slice_objs):,} slices, {len(res.dead_letter):,} dead letters, {len(res.quality):,} "
                      "data-quality warnings", file=sys.stderr)
            return res
