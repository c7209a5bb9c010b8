"""The main job's windowed / streaming run (``--window``, ``--watch``, ``--kafka-*``, ``--pubsub-*``).

Graph: source → parse and validate (dead letter) → event time from ``--timestamp-field`` →
``WindowInto`` (``--window``, ``--early-firing``, ``--allowed-lateness``) → each metric,
unchanged → window and pane fields added to every session and slice record → JSONL files per
window and pane (``fileio.WriteToFiles``) under ``<output>/windows/``:

* ``<metric>-slices-<window start>-<window end>-<pane>-<shard>-of-<n>.jsonl`` — one record
  per slice and pane: the metric's slice record plus ``window_start``, ``window_end`` (ISO 8601
  UTC), ``window_start_s``, ``window_end_s`` and ``pane {timing, index, is_first, is_last}``;
* ``<metric>-sessions-…`` — session records of the pane (see
  :mod:`fair_forge_beam.streaming.windows` on sessions split across panes);
* ``dead_letter-…`` — rejected records (read and metric stages, and in a streaming run the
  records later than the allowed lateness: stage ``window``, reason ``late: …``,
  :mod:`fair_forge_beam.streaming.late`), in 1-minute windows of their arrival;
* ``data_quality-…`` — data-quality warnings (read and metric stages: split sessions, duplicate
  ids, metadata slice values that disagree, …), likewise.

A bounded run (files given with ``--input`` plus ``--window``) ends like a batch run and also
writes ``windowed_results.json``: every slice record, sorted by metric, window, slice and
pane, and the counts of dead letters (``late_records`` among them) and data-quality warnings written. An unbounded run (``--watch`` without ``--watch-stop-after``, Kafka without
``--kafka-max-records``, Pub/Sub) runs until cancelled; pass ``--streaming`` to Beam (set
automatically for these sources). Kafka's event time is the ``--timestamp-field`` of the payload
(``--kafka-event-time field``, default) or the message timestamp (``--kafka-event-time message``).
"""
from __future__ import annotations

from fair_forge_beam.console import say  # console output never fails a run

import json
import time
from typing import Optional

from fair_forge_beam._beam import beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.transforms import window as _window
from apache_beam.utils.timestamp import Timestamp

from fair_forge_beam.engine import apply_metrics
from fair_forge_beam.plain import folder_path
from fair_forge_beam.io.read import ReadInteractions, records_to_interactions
from fair_forge_beam.beam_pipeline import pipeline_options, run_pipeline
from fair_forge_beam.io.write import write_window_files
from fair_forge_beam.io.event_time import AssignEventTime
from fair_forge_beam.streaming.windows import AddWindowFields, KeepRepresentableWindows, WindowSpec, parse_duration
from fair_forge_beam.io.edge import read_all  # whole files in pieces: Beam's .gz reader stops at 16 MiB

__all__ = ["is_windowed_run", "build_source", "window_interactions", "write_windowed", "run_windowed", "read_windowed"]


def is_windowed_run(args) -> bool:
    """Whether the main job's arguments ask for a windowed or streaming run."""
    return bool(args.window or args.watch or args.kafka_topic or args.pubsub_subscription or args.pubsub_topic)


def _streaming_source(args) -> Optional[str]:
    given = [n for n, v in (("--watch", args.watch), ("--kafka-topic", args.kafka_topic),
                             ("--pubsub-subscription/--pubsub-topic", args.pubsub_subscription or args.pubsub_topic)) if v]
    if len(given) > 1:
        raise ValueError(f"give one streaming source, got {', '.join(given)}")
    return given[0] if given else None


def build_source(args, inputs, fields_read=None):
    """The main job's source as ``(PTransform PBegin → {interactions, dead_letter, quality}, unbounded)``;
    ``fields_read``: the content fields the run's metrics read (the reader's ``fields_read``).

    Raises:
        ValueError: several sources, bad durations, Kafka/Pub/Sub argument errors, ``--input``
            files that match nothing.
    """
    from fair_forge_beam.audit_config import parse_slices
    from fair_forge_beam.options import absolute_paths
    from fair_forge_beam.slices import metadata_dimensions

    args = absolute_paths(args)  # --watch is matched by a worker, in its own folder
    source = _streaming_source(args)
    if source is None and getattr(args, "early_firing", None):
        # files are read whole: each window fires once, on time (and the in-memory runner has no
        # processing-time clock for the early trigger: it failed deep in Beam)
        raise ValueError("--early-firing needs an unbounded source (--watch, --kafka-topic, --pubsub-subscription or "
                         "--pubsub-topic): files given with --input are read whole, so each window fires once, on "
                         "time. Drop --early-firing")
    ts_field, policy = args.timestamp_field, args.timestamp_policy
    fields = metadata_dimensions(parse_slices(args.slices)) if getattr(args, "slices", None) else ()
    if source is None:
        return ReadInteractions(inputs, file_format=args.input_format, timestamp_field=ts_field, timestamp_policy=policy,
                                slice_fields=fields, max_record_bytes=args.max_record_bytes, fields_read=fields_read,
                                max_id_chars=args.max_id_chars), False
    if args.watch:
        from fair_forge_beam.io.stream_sources import WatchJsonl

        stop = parse_duration(args.watch_stop_after, "--watch-stop-after") if args.watch_stop_after else None
        records = WatchJsonl(args.watch, parse_duration(args.watch_interval, "--watch-interval"), stop,
                             max_record_bytes=args.max_record_bytes)
    elif args.kafka_topic:
        from fair_forge_beam.io.stream_sources import KafkaRecords

        records = KafkaRecords(args.kafka_bootstrap_servers, args.kafka_topic, expansion_service=args.kafka_expansion_service,
                               max_num_records=getattr(args, "kafka_max_records", None))
        if getattr(args, "kafka_event_time", "field") == "message":
            return _ParseStream(records, None, policy, message_time=True, slice_fields=fields,
                                fields_read=fields_read, max_id_chars=args.max_id_chars), not records.bounded
        return _ParseStream(records, ts_field, policy, slice_fields=fields, fields_read=fields_read,
                            max_id_chars=args.max_id_chars), not records.bounded
    else:
        from fair_forge_beam.io.stream_sources import PubSubRecords

        records = PubSubRecords(args.pubsub_subscription, args.pubsub_topic, args.pubsub_timestamp_attribute)
    return _ParseStream(records, ts_field, policy, slice_fields=fields, fields_read=fields_read,
                        max_id_chars=args.max_id_chars), True


class _ParseStream(beam.PTransform):
    """Records → ``{interactions, dead_letter, quality}``; with ``message_time`` each interaction's
    event time is its element timestamp (Kafka's message timestamp), not a payload field."""

    def __init__(self, records: beam.PTransform, timestamp_field, timestamp_policy, message_time: bool = False,
                 slice_fields=(), fields_read=None, max_id_chars=None):
        super().__init__()
        self.records, self.timestamp_field, self.timestamp_policy = records, timestamp_field, timestamp_policy
        self.message_time, self.slice_fields, self.fields_read = message_time, tuple(slice_fields), fields_read
        self.max_id_chars = max_id_chars

    def expand(self, pbegin):
        recs = pbegin | "Records" >> self.records
        out = records_to_interactions(recs, timestamp_field=self.timestamp_field, timestamp_policy=self.timestamp_policy,
                                      streaming=True, slice_fields=self.slice_fields, fields_read=self.fields_read,
                                      max_id_chars=self.max_id_chars)
        if self.message_time:
            from fair_forge_beam.io.stream_sources import MessageEventTime

            out = {**out, "interactions": out["interactions"] | "MessageEventTime" >> beam.ParDo(MessageEventTime())}
        return out


def write_windowed(read: dict, results: dict, out: str) -> None:
    """Attach the windowed sinks (see the module docstring)."""
    for name, r in results.items():
        for part in ("slices", "sessions"):
            windowed = r[part] | f"Window{part}_{name}" >> beam.ParDo(AddWindowFields())
            write_window_files(windowed, f"{out}/windows", f"{name}-{part}", f"{part}_{name}")
    dead = [read["dead_letter"]] + [
        r["dead_letter"] | f"DeadWindow_{name}" >> beam.WindowInto(_window.GlobalWindows()) for name, r in results.items()
    ]
    _write_by_arrival(dead, out, "dead_letter", ("FlattenDead", "ArrivalTime", "DeadLetterWindows"))
    quality = [read["quality"] | "QualityWindow_read" >> beam.WindowInto(_window.GlobalWindows())] + [
        r["quality"] | f"QualityWindow_{name}" >> beam.WindowInto(_window.GlobalWindows()) for name, r in results.items()
    ]
    _write_by_arrival(quality, out, "data_quality", ("FlattenQuality", "QualityArrivalTime", "QualityWindows"))


def _write_by_arrival(pcolls: list, out: str, prefix: str, labels: tuple) -> None:
    """Records of the read and metric stages (dead letters, warnings) to ``<out>/windows/<prefix>-…``,
    in 1-minute windows of their arrival (they have no event time of their own)."""
    flatten, arrival, windows = labels
    write_window_files(
        tuple(pcolls)
        | flatten >> beam.Flatten()
        | arrival >> beam.Map(lambda d: _window.TimestampedValue(d, Timestamp.now()))
        | windows >> beam.WindowInto(_window.FixedWindows(60)),
        f"{out}/windows", prefix, prefix,
    )


def _count_late(out: str) -> int:
    """Late records among the dead letters written under ``<out>/windows``
    (:func:`~fair_forge_beam.streaming.late.is_late_dead_letter`)."""
    from fair_forge_beam.streaming.late import is_late_dead_letter

    n = 0
    for m in FileSystems.match([f"{out}/windows/dead_letter-*.jsonl"])[0].metadata_list:
        with FileSystems.open(m.path) as f:
            n += sum(1 for line in read_all(f).decode("utf-8").splitlines()
                     if line.strip() and is_late_dead_letter(json.loads(line)))
    return n


def window_interactions(interactions, spec, unbounded: bool, dead_letters: Optional[list] = None):
    """The event-timed, windowed interactions of a run and its late records:
    ``(windowed PCollection, late dead letters or None)``. In a streaming (``unbounded``) run,
    records later than the allowed lateness are routed to dead letters before the windows'
    grouping would drop them (:class:`~fair_forge_beam.streaming.late.RouteLateRecords`); a
    bounded run (batch) drops nothing as late and routes nothing. Records whose windows fall outside
    the dates a window can have (years 1..9999: :class:`KeepRepresentableWindows`) never reach the
    windows: their dead letters are appended to ``dead_letters`` (a list of PCollections) when given."""
    timed = interactions | "EventTime" >> beam.ParDo(AssignEventTime())
    ranged = timed | "WindowRange" >> beam.ParDo(KeepRepresentableWindows(spec.window_fn())).with_outputs(
        "dead_letter", main="interactions")
    timed = ranged.interactions
    if dead_letters is not None:
        dead_letters.append(ranged.dead_letter)
    late = None
    if unbounded:
        from fair_forge_beam.streaming.late import RouteLateRecords

        routed = timed | "Late" >> RouteLateRecords(spec)
        timed, late = routed["interactions"], routed["dead_letter"]
    return timed | spec.window_into("Window"), late


def _count_lines(out: str, prefix: str) -> int:
    """Records in the ``<out>/windows/<prefix>-*.jsonl`` files (a bounded run's dead letters or warnings)."""
    n = 0
    for m in FileSystems.match([f"{out}/windows/{prefix}-*.jsonl"])[0].metadata_list:
        with FileSystems.open(m.path) as f:
            n += sum(1 for line in read_all(f).decode("utf-8").splitlines() if line.strip())
    return n


def read_windowed(out: str, kind: str = "slices") -> list[dict]:
    """Every ``<metric>-<kind>`` record written under ``<out>/windows`` (any filesystem), sorted
    by metric, window, slice or session, and pane index."""
    recs = []
    for m in FileSystems.match([f"{out}/windows/*-{kind}-*.jsonl"])[0].metadata_list:
        with FileSystems.open(m.path) as f:
            recs.extend(json.loads(line) for line in read_all(f).decode("utf-8").splitlines() if line.strip())
    recs.sort(key=lambda r: (r.get("metric", ""), r.get("window_start_s", 0), r.get("slice", r.get("session_id", "")),
                             r.get("assistant_id") or "", r.get("pane", {}).get("index", 0)))
    return recs


def _runs_stages_whole(options) -> bool:
    """Whether the pipeline's runner is Beam's in-memory ``FnApiRunner`` (the default runner): it
    runs each step over all of its input before the next one starts, and its grouping builds Beam's
    trigger driver without a processing-time clock (Beam 2.77, ``fn_api_runner/execution.py``:
    ``create_trigger_driver(windowing, True)``, no ``clock``)."""
    runner = options.view_as(StandardOptions).runner
    name = runner if isinstance(runner, str) else type(runner).__name__
    return str(name).rsplit(".", 1)[-1].lower() in ("fnapirunner", "fn_api_runner")


def _early_firing_on(spec: WindowSpec, options, args) -> WindowSpec:
    """``spec`` as the runner can run it. ``--early-firing`` is a processing-time trigger
    (``AfterProcessingTime``): its first element asks the trigger context for the current
    processing time, and the in-memory runner gives its trigger driver no clock, so Beam failed
    with ``'NoneType' object has no attribute 'time'`` (issue 28, B14). That runner groups a step's
    whole input at once, so an early pane could carry nothing the on-time pane does not: on it the
    windows fire on time (and late, with ``--allowed-lateness``) and the console says so once."""
    if spec.early_firing is None or not _runs_stages_whole(options):
        return spec
    import dataclasses

    if not getattr(args, "quiet", False):
        say(f"--early-firing {args.early_firing}: the in-memory runner (FnApiRunner, the default) runs each step over "
            f"its whole input and has no processing-time clock, so it fires no early panes; each window fires "
            f"on time (early panes need a streaming runner: --runner FlinkRunner)")
    return dataclasses.replace(spec, early_firing=None)


def run_windowed(args, beam_args, metrics, transforms, mode, inputs) -> dict:
    """Build and run the windowed pipeline; returns ``windowed_results.json``'s content.

    A bounded run (files with ``--window``) writes into a stage and replaces ``--output`` only when
    it succeeds (:func:`~fair_forge_beam.reports.output_folder.staged_output`); one that scored
    nothing for a metric is an empty run (exit code 4, nothing published) unless ``--allow-empty``.
    A streaming run (``--watch``, Kafka, Pub/Sub), whose files appear as windows fire, writes in
    place: a folder holding a finished run is refused
    (:func:`~fair_forge_beam.reports.output_folder.finished_run_problem`), an earlier stream's
    leftovers are removed first (:func:`~fair_forge_beam.reports.output_folder.prepare_output_folder`).

    Raises:
        ValueError: argument errors (before the pipeline starts).
        EmptyRun: a bounded run that scored nothing for a metric, without ``--allow-empty``.
    """
    from fair_forge_beam.reports.output_folder import finished_run_problem, prepare_output_folder, staged_output

    if not args.window:
        raise ValueError("a streaming source needs --window (e.g. --window fixed:1h)")
    spec = WindowSpec.parse(args.window, args.early_firing, args.allowed_lateness)
    from fair_forge_beam.engine import engine_spec, fields_read

    source, unbounded = build_source(args, inputs, fields_read(engine_spec(t) for t in transforms.values()))
    options = pipeline_options(beam_args)
    if unbounded:
        options.view_as(StandardOptions).streaming = True
        spec = _early_firing_on(spec, options, args)
        problem = finished_run_problem(args.output, FileSystems)  # checked by the launcher too, as a usage error
        if problem:
            raise ValueError(problem)
        out = prepare_output_folder(args.output, FileSystems)  # an earlier stream's leftovers only, never a user's file
        from fair_forge_beam.console import note_in_place, writing

        note_in_place(out)
        # the machine's failure (a full disk): OutputWriteError naming the folder, which holds what fired before it
        with writing(out, True, left=f"the output folder {out} holds what the stream wrote before the failure (the files "
                                     "of the windows that fired, if any; a streaming run writes in place)"):
            return _run_windowed_into(out, out, args, options, source, spec, metrics, transforms, mode, unbounded=True)
    with staged_output(args.output) as stage:  # an exception (an empty run too) leaves --output untouched
        return _run_windowed_into(stage, folder_path(args.output), args, options, source, spec, metrics,
                                  transforms, mode, empty_check=not getattr(args, "allow_empty", False))


def _run_windowed_into(folder: str, shown: str, args, options, source, spec, metrics, transforms, mode,
                       empty_check: bool = False, unbounded: bool = False) -> dict:
    """Run the windowed pipeline writing into ``folder`` (published as ``shown``, named in messages)."""
    started = time.time()
    with run_pipeline(options) as p:
        read = p | "Read" >> source
        out_of_range = []
        windowed, late = window_interactions(read["interactions"], spec, unbounded, out_of_range)
        dead = [read["dead_letter"], *out_of_range] + ([late] if late is not None else [])
        read = {**read, "dead_letter": tuple(dead) | "WithLate" >> beam.Flatten()}
        results = apply_metrics(windowed, transforms)  # engine metrics share their shuffles
        write_windowed(read, results, folder)
    doc = {
        "config": {
            "metrics": list(metrics),
            "mode": "bayesian" if mode.is_bayesian else "frequentist",
            "seed": mode.rng_seed,
            "mc_samples": mode.mc_samples,
            "window": args.window,
            "early_firing": args.early_firing,
            "allowed_lateness": args.allowed_lateness,
            "timestamp_field": args.timestamp_field,
            "timestamp_policy": args.timestamp_policy,
        },
        "slices": read_windowed(folder, "slices"),
        "dead_letters": _count_lines(folder, "dead_letter"),
        # streaming runs: records dropped as later than --allowed-lateness, each a dead letter
        # (what is and is not counted: fair_forge_beam/streaming/late.py); bounded runs drop none
        "late_records": _count_late(folder) if unbounded else 0,
        "data_quality_warnings": _count_lines(folder, "data_quality"),
    }
    if empty_check:
        from fair_forge_beam.reports.empty_run import fail_empty_run, windowed_empty_run_reason

        reason = windowed_empty_run_reason(doc, metrics)
        if reason:
            fail_empty_run(reason, shown, stage=folder)  # the stage kept, unpublished, for its dead letters to be read
    from fair_forge_beam.io.secrets import scrub_known

    with FileSystems.create(f"{folder}/windowed_results.json") as f:  # values masked, never keys
        f.write(json.dumps(scrub_known(doc), indent=2, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    if not args.quiet:
        say(f"windowed audit: {len(doc['slices'])} slice records, {doc['dead_letters']} dead letters "
              f"({doc['late_records']} later than the allowed lateness), "
              f"{doc['data_quality_warnings']} data-quality warnings in {time.time() - started:.1f} s; "
              f"outputs: {shown}/windows/, {shown}/windowed_results.json")
    return doc
