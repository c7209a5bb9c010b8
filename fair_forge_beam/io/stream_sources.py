"""Unbounded sources of interactions: a never-ending retriever, a watched folder, Kafka, Pub/Sub.

Every source yields ``(source, position, payload)`` records that go through the same parsing
and validation as the batch sources (:func:`fair_forge_beam.io.read.records_to_interactions`
with ``streaming=True``), so a bad record becomes a dead letter here too; then each
interaction is stamped with its event time (:class:`~fair_forge_beam.io.event_time.AssignEventTime`).

| source | Beam primitive | watermark |
|---|---|---|
| :class:`StreamingRetriever` | a splittable ``DoFn`` over positions ``0, 1, 2, …`` of the retriever's iterator | the highest event time emitted so far (``ManualWatermarkEstimator``) |
| :class:`WatchJsonl` | ``fileio.MatchContinuously`` (``PeriodicImpulse`` + ``MatchAll``), each file read once, up to its size when matched (a stateful ``DoFn`` keyed by path; a later change is a dead letter counting the bytes not read), ``ReadMatches`` | the poll time |
| :class:`KafkaRecords` | ``ReadFromKafka`` (cross-language: a running expansion service, or its jar from Maven Central at pipeline construction) | the messages' timestamps (``CreateTime``), then the wall clock when a partition has no backlog |
| :class:`PubSubRecords` | ``ReadFromPubSub`` (needs ``apache-beam[gcp]``; runs natively on Dataflow) | Pub/Sub's, by publish time or ``timestamp_attribute`` |

Why the file source does not use ``MatchContinuously``'s own de-duplication: in Beam 2.77 it is
a ``Watch`` whose polls, on the in-memory ``FnApiRunner``, do not wait for the poll interval
(measured: 8 polls in 3 s, ending before a file dropped 4 s after start); the
``PeriodicImpulse`` path waits in real time on every runner.
"""
from __future__ import annotations

import io
import itertools
import re
import typing
from typing import Any, Iterator, Optional

from fair_forge_beam._beam import beam
from apache_beam.io import fileio
from apache_beam.transforms.core import RestrictionProvider
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker
from apache_beam.io.watermark_estimators import ManualWatermarkEstimator
from apache_beam.transforms.core import WatermarkEstimatorProvider
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import MAX_TIMESTAMP, MIN_TIMESTAMP, Duration, Timestamp

from fair_forge_beam.io.read import MAX_RECORD_BYTES
from fair_forge_beam.io.retriever import Retriever, checked_dataset, declared_keywords_problem
from fair_forge_beam.schemas.common import IterationLevel
from fair_forge_beam.io.event_time import find_timestamp, parse_timestamp
from fair_forge_beam.quoting import quoted
from fair_forge_beam.arguments import checks_arguments
from fair_forge_beam.plain import plain_reason

__all__ = [
    "StreamingRetriever", "ReadStreamingRetriever", "WatchJsonl", "KafkaRecords", "MessageEventTime", "PubSubRecords",
]

_END = 2**62  # positions of an endless iterator


class StreamingRetriever(Retriever):
    """A retriever whose :meth:`load_dataset` is an iterator of ``StreamedBatch`` (pydantic
    objects or dicts of the same shape) that may never end — a live feed.

    Records must carry ``turn_index`` (a stream cannot rank a session's turns) and, for event
    time, the timestamp field. ``load_dataset`` must be deterministic: after a checkpoint the
    source re-creates the iterator and skips the records it already emitted (within a worker
    the open iterator is reused). Define subclasses in an importable module.
    """

    @property
    def iteration_level(self) -> IterationLevel:
        return IterationLevel.STREAM_BATCHES


class _PositionsProvider(RestrictionProvider):
    def initial_restriction(self, element):
        return OffsetRange(0, _END)

    def create_tracker(self, restriction):
        return OffsetRestrictionTracker(restriction)

    def restriction_size(self, element, restriction):
        return 1  # unknown (endless)

    def split(self, element, restriction):
        yield restriction  # one iterator cannot be read from two places

    def truncate(self, element, restriction):
        return None  # on drain: stop reading


class _HighestTimestampSoFar(WatermarkEstimatorProvider):
    """Watermark = the highest event time emitted so far (starts at the minimum timestamp)."""

    def initial_estimator_state(self, element, restriction):
        return MIN_TIMESTAMP

    def create_watermark_estimator(self, state):
        return ManualWatermarkEstimator(state)


def _as_dict(item: Any) -> Any:
    return item.model_dump() if hasattr(item, "model_dump") else item


@beam.typehints.with_output_types(Any)
class _ReadRetrieverFn(beam.DoFn):
    """Splittable ``DoFn``: claims positions of the retriever's iterator one by one, emits
    ``(source, position, record)`` at the record's event time, checkpoints every
    ``records_per_bundle`` records (a runner can resume, scale or drain it)."""

    def __init__(self, retriever_cls, kwargs: dict, timestamp_field: Optional[str], records_per_bundle: int):
        self.retriever_cls, self.kwargs = retriever_cls, dict(kwargs)
        self.timestamp_field, self.records_per_bundle = timestamp_field, int(records_per_bundle)
        self.source = f"retriever:{retriever_cls.__module__}.{retriever_cls.__qualname__}"

    def setup(self):
        self._open: Optional[tuple[int, Iterator]] = None  # (next position, iterator)

    def _iterator_at(self, position: int) -> Iterator:
        if self._open is not None and self._open[0] == position:
            return self._open[1]
        retriever = self.retriever_cls(**self.kwargs)
        it = iter(checked_dataset(self.retriever_cls, IterationLevel(retriever.iteration_level), retriever.load_dataset(),
                                    any_iterable=True))
        return itertools.islice(it, position, None) if position else it

    def process(
        self,
        element,
        tracker=beam.DoFn.RestrictionParam(_PositionsProvider()),
        watermark=beam.DoFn.WatermarkEstimatorParam(_HighestTimestampSoFar()),
    ):
        position = tracker.current_restriction().start
        it = self._iterator_at(position)
        self._open = None
        for _ in range(self.records_per_bundle):
            item = next(it, _END)
            if item is _END:
                tracker.try_claim(_END)  # the iterator ended: the restriction is done
                return
            if not tracker.try_claim(position):
                return
            from fair_forge_beam.io.read import retriever_item

            # hostile records become ReadErrors here, before any coder; one naming its file is placed there
            placed = retriever_item(self.source, position, _as_dict(item))
            ts = self._timestamp(placed[2])
            yield TimestampedValue(placed, ts)
            if ts > watermark.current_watermark():
                watermark.set_watermark(ts)
            position += 1
        self._open = (position, it)
        tracker.defer_remainder()

    def _timestamp(self, rec) -> Timestamp:
        if self.timestamp_field and isinstance(rec, dict):
            value = find_timestamp(self.timestamp_field, rec.get("batch"), rec.get("metadata"), rec)
            try:
                return Timestamp.of(parse_timestamp(value))
            except ValueError:
                pass  # the parse step dead-letters it (or stamps processing time)
        return Timestamp.now()


class ReadStreamingRetriever(beam.PTransform):
    """``PBegin`` → unbounded ``(source, position, record)`` from a :class:`StreamingRetriever`.

    Args:
        retriever: a :class:`StreamingRetriever` subclass (instantiated on a worker).
        retriever_kwargs: its keyword arguments.
        timestamp_field: the event-time field (sets the output timestamps, hence the watermark).
        records_per_bundle: records between two checkpoints (default 500).

    Raises:
        ValueError: not a :class:`StreamingRetriever` subclass; ``records_per_bundle < 1``.
    """

    def __init__(self, retriever, retriever_kwargs: Optional[dict] = None, timestamp_field: Optional[str] = "timestamp",
                 records_per_bundle: int = 500):
        super().__init__()
        if not (isinstance(retriever, type) and issubclass(retriever, StreamingRetriever)):
            raise ValueError(f"retriever must be a StreamingRetriever subclass, got {quoted(retriever)}")
        if int(records_per_bundle) < 1:
            raise ValueError(f"records_per_bundle must be >= 1, got {quoted(records_per_bundle)}")
        problem = declared_keywords_problem(retriever, retriever_kwargs or {})  # before any pipeline (trial36 T1)
        if problem:
            raise TypeError(problem)
        self.fn = _ReadRetrieverFn(retriever, retriever_kwargs or {}, timestamp_field, records_per_bundle)

    def expand(self, pbegin):
        return pbegin | "Seed" >> beam.Create([None]) | "ReadRetriever" >> beam.ParDo(self.fn)


# ------------------------------------------------------------------ watched folder
class _FirstTimeSeen(beam.DoFn):
    """``(path, metadata)`` → ``metadata`` the first time a path is seen (state per path: the size
    and modification time it had then, and as last reported); a later match of the same path whose
    size or modification time differ from the last seen → one ``ReadError`` record (output
    ``changed``) saying how many bytes after the ones read were not read — a watched file is read once
    (trial39 T5: lines appended after the read were lost without a word)."""

    SEEN = ReadModifyWriteStateSpec("seen_size_mtime", beam.coders.PickleCoder())

    def process(self, kv, seen=beam.DoFn.StateParam(SEEN)):
        path, m = kv
        now = (int(m.size_in_bytes or 0), float(getattr(m, "last_updated_in_seconds", 0) or 0))
        state = seen.read()
        if state is None:
            seen.write((now, now))
            yield m
            return
        read, last = state
        if now == last:
            return
        seen.write((read, now))
        yield beam.pvalue.TaggedOutput("changed", (path, 0, _changed_file_error(path, read[0], now[0])))


def _changed_file_error(path: str, read: int, size: int):
    """The ``ReadError`` of a watched file that changed after its first ``read`` bytes were read."""
    from fair_forge_beam.io.read import ReadError

    if size > read:
        what = (f"grew after it was read: {size - read:,} bytes after its first {read:,} were not read "
                f"(now {size:,} bytes)")
    else:
        what = f"changed after it was read (its first {read:,} bytes; now {size:,} bytes): it is not read again"
    return ReadError(f"watched file {path} {what}; a watched file is read once, when it first matches: write it "
                     "elsewhere and rename it into the folder (docs/streaming.md)", "")


class _Capped(io.RawIOBase):
    """The first ``size`` bytes of binary file ``f``: a watched file is read as it was matched."""

    def __init__(self, f, size: int):
        self.f, self.left = f, size

    def readable(self):
        return True

    def readinto(self, b):
        n = min(len(b), self.left)
        data = self.f.read(n) if n else b""
        b[:len(data)] = data
        self.left -= len(data)
        return len(data)


class _ReadLines(beam.DoFn):
    """A readable file → ``(path, byte offset, line bytes)`` (the offset is the line's stable
    position); an unreadable file → one ``ReadError`` record naming it. An uncompressed file is
    read up to the size it had when matched (:class:`_FirstTimeSeen` names what came after)."""

    def __init__(self, max_record_bytes: int):
        self.max_record_bytes = int(max_record_bytes)

    def process(self, readable):
        from fair_forge_beam.io.edge import CompressedDataError, compression_suffix, open_input
        from fair_forge_beam.io.read import ReadError, compressed_end_reason, compressed_refusal, file_lines

        path, lines = readable.metadata.path, 0
        size = getattr(readable.metadata, "size_in_bytes", None)
        try:
            refused = compressed_refusal(path)  # a damaged compressed file: one dead letter, none of its lines
            if refused is not None:
                yield (path, 0, refused)
                return
            with open_input(path) as f:  # compressed files in bounded pieces (Beam's reader expands 16 MiB reads)
                if size is not None and not compression_suffix(path.lower()):
                    f = io.BufferedReader(_Capped(f, int(size)))
                for item in file_lines(path, f, self.max_record_bytes):
                    yield item
                    lines += 1
        except CompressedDataError as exc:  # cut short, or data after its last stream: after the lines before
            yield (path, 0, ReadError(compressed_end_reason(path, exc, lines, "line"), ""))
        except Exception as exc:  # noqa: BLE001 - a corrupt/vanished file is a dead letter naming it
            yield (path, 0, ReadError(f"cannot read file {path} ({plain_reason(exc)})", ""))


class _KeyByShownPath(beam.DoFn):
    """A match → ``(path as it can be encoded, match)``: a name with bytes that are not UTF-8 is keyed
    by its escaped form (``caf\\xe9.jsonl``), as Beam's string coder cannot write it."""

    def process(self, m):
        from fair_forge_beam.plain import shown_text

        yield shown_text(m.path), m


class _RefuseUndecodableNames(beam.DoFn):
    """A match whose name holds bytes that are not UTF-8 → one ``ReadError`` record naming it escaped
    (output ``refused``), never read (issue 28, trial 28f B4: such a file appearing under ``--watch``
    ended the stream with a UnicodeEncodeError; given up front, such a name is a usage error)."""

    def process(self, m):
        from fair_forge_beam.io.read import ReadError
        from fair_forge_beam.plain import path_name_problem, shown_text

        problem = path_name_problem(m.path, "watched file")
        if problem is None:
            yield m
            return
        yield beam.pvalue.TaggedOutput("refused", (shown_text(m.path), 0, ReadError(problem, "")))


class WatchJsonl(beam.PTransform):
    """``PBegin`` → ``(path, offset, line)`` of every JSONL file that appears under ``pattern``,
    each file read once, up to its size when first matched; a later change of its size or modification
    time is one dead letter per change, saying how many bytes were not read (never re-read, so no
    line is counted twice).

    Args:
        pattern: a glob (any Beam filesystem), e.g. ``/data/incoming/*.jsonl``; a ``**/`` matches zero
            or more folders (:func:`~fair_forge_beam.io.read.globstar_patterns`).
        interval: seconds between two matches (default 10).
        stop_after: stop watching after this many seconds (``None``: never; the pipeline then
            ends when the last files are processed — for tests and bounded back-fills).
        max_record_bytes: the longest line read (bytes, as encoded in the file); a longer one is
            a ``ReadError`` naming its size and the limit, never held whole
            (:func:`~fair_forge_beam.io.read.file_lines`). Default ``--max-record-bytes``' default.

    Raises:
        ValueError: a non-positive interval or stop time.
    """

    def __init__(self, pattern: str, interval: float = 10.0, stop_after: Optional[float] = None,
                 max_record_bytes: Optional[int] = None):
        super().__init__()
        if not interval or interval <= 0:
            raise ValueError(f"watch interval must be > 0 seconds, got {quoted(interval)}")
        if stop_after is not None and stop_after <= 0:
            raise ValueError(f"stop_after must be > 0 seconds, got {quoted(stop_after)}")
        self.pattern, self.interval, self.stop_after = pattern, float(interval), stop_after
        self.max_record_bytes = max_record_bytes

    def expand(self, pbegin):
        start = Timestamp.now()
        stop = start + Duration.of(self.stop_after) if self.stop_after else MAX_TIMESTAMP
        from fair_forge_beam.io.read import globstar_patterns

        # a "**/" matches zero or more folders, as for --input (io.read.globstar_patterns): one match
        # per Beam pattern, a file two of them reach seen once (_FirstTimeSeen, by path)
        matched = [
            pbegin
            | f"MatchContinuously{f' {i}' if i else ''}" >> fileio.MatchContinuously(
                p, interval=self.interval, has_deduplication=False, start_timestamp=start, stop_timestamp=stop
            )
            for i, p in enumerate(globstar_patterns(self.pattern))
        ]
        seen = (
            (matched[0] if len(matched) == 1 else tuple(matched) | "EveryDepth" >> beam.Flatten())
            | "KeyByPath" >> beam.ParDo(_KeyByShownPath()).with_output_types(typing.Tuple[str, typing.Any])
            | "FirstTimeSeen" >> beam.ParDo(_FirstTimeSeen()).with_outputs("changed", main="files")
        )
        named = seen.files | "Names" >> beam.ParDo(_RefuseUndecodableNames()).with_outputs("refused", main="files")
        lines = (
            named.files
            | "ReadMatches" >> fileio.ReadMatches()
            | "ReadLines" >> beam.ParDo(_ReadLines(self.max_record_bytes or MAX_RECORD_BYTES))
        )
        return (lines, named.refused, seen.changed) | "WithRefused" >> beam.Flatten()


# ------------------------------------------------------------------ Kafka
class KafkaRecords(beam.PTransform):
    """``PBegin`` → ``(f"kafka:{topic}/{partition}", offset, value bytes)`` from Kafka topics,
    through Beam's cross-language ``ReadFromKafka`` (Java KafkaIO; needs a JVM, and an expansion
    service: ``expansion_service`` names a running one, otherwise Beam fetches its expansion
    service jar from Maven Central when the pipeline is built).

    Each record's value is one JSON object — a session, a ``StreamedBatch`` record or a flat
    interaction — parsed by :func:`fair_forge_beam.io.read.records_to_interactions`; a message
    that is not (not UTF-8, invalid JSON, a tombstone with no value, the wrong shape) becomes a
    dead letter whose ``source`` is ``kafka:<topic>/<partition>:<offset>``.

    Element timestamps are the messages' Kafka timestamps (``CreateTime``: set by the producer,
    or by the producer's client when it sends); KafkaIO's watermark follows them and, once a
    partition has no backlog, the wall clock. Event time is then either that timestamp
    (``event_time="message"``: :class:`MessageEventTime` copies it into the interaction) or a
    payload field (``"field"``, the main job's ``--timestamp-field``): payload times older than
    the watermark are late data (dropped unless ``--allowed-lateness`` covers them), so
    producers should set the message timestamp to the payload's.

    Args:
        bootstrap_servers: ``host:port[,host:port...]``.
        topics: one topic or a list.
        consumer_config: more Kafka consumer settings (``group.id``, ``auto.offset.reset``, ...;
            default ``auto.offset.reset=earliest``).
        expansion_service: ``host:port`` of a running expansion service (optional).
        max_num_records: stop after this many records — a bounded read (tests, back-fills).

    Raises:
        ValueError: no or malformed bootstrap servers, no topic, a non-positive
            ``max_num_records`` (raised here, before any Java is started).
    """

    _HOSTPORT = re.compile(r"^[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$")

    @checks_arguments  # a wrong value is named, never shown; max_num_records in --kafka-max-records's range
    def __init__(self, bootstrap_servers: str, topics, consumer_config: Optional[dict] = None,
                 expansion_service: Optional[str] = None, max_num_records: Optional[int] = None):
        super().__init__()
        servers = [s.strip() for s in str(bootstrap_servers or "").split(",") if s.strip()]
        if not servers:
            raise ValueError("Kafka needs bootstrap servers: --kafka-bootstrap-servers host:port[,host:port]")
        bad = [s for s in servers if not self._HOSTPORT.match(s)]
        if bad:
            raise ValueError(f"Kafka bootstrap servers must be host:port, got {bad}")
        topics = [topics] if isinstance(topics, str) else list(topics or [])
        topics = [t.strip() for t in topics if t and t.strip()]
        if not topics:
            raise ValueError("Kafka needs at least one topic: --kafka-topic NAME")
        if max_num_records is not None and int(max_num_records) < 1:
            raise ValueError(f"max_num_records must be >= 1, got {quoted(max_num_records)}")
        from apache_beam.io.kafka import ReadFromKafka

        config = {"bootstrap.servers": ",".join(servers), "auto.offset.reset": "earliest", **(consumer_config or {})}
        self.consumer_config, self.topics = config, topics
        self.bounded = max_num_records is not None
        self.read = ReadFromKafka(
            consumer_config=config,
            topics=topics,
            with_metadata=True,
            timestamp_policy=ReadFromKafka.create_time_policy,
            max_num_records=int(max_num_records) if max_num_records is not None else None,
            expansion_service=expansion_service,
        )

    def expand(self, pbegin):
        return (
            pbegin
            | "ReadFromKafka" >> self.read
            | "KafkaRecords" >> beam.Map(_kafka_record)
        )


def _kafka_record(r) -> tuple:
    """A KafkaIO record with metadata → ``(f"kafka:{topic}/{partition}", offset, value)``."""
    return (f"kafka:{r.topic}/{int(r.partition)}", int(r.offset), r.value)


class MessageEventTime(beam.DoFn):
    """``Interaction`` → the same with ``event_time`` = its element timestamp (for Kafka, the
    message's timestamp), in seconds since the epoch; the element keeps that timestamp."""

    def process(self, x, ts=beam.DoFn.TimestampParam):
        yield TimestampedValue(x._replace(event_time=float(ts.micros) / 1e6), ts)


# ------------------------------------------------------------------ Pub/Sub
class PubSubRecords(beam.PTransform):
    """``PBegin`` → ``(f"pubsub:{subscription or topic}#{message id}", 0, data bytes)`` through
    Beam's ``ReadFromPubSub`` (exactly one of ``subscription`` / ``topic``, full resource paths).

    Args:
        subscription: ``projects/<project>/subscriptions/<name>``.
        topic: ``projects/<project>/topics/<name>`` (a temporary subscription is created).
        timestamp_attribute: message attribute holding the event time (then Pub/Sub's watermark
            follows it); ``None``: publish time.

    Raises:
        ValueError: neither or both given; a malformed path (Beam's own check).
    """

    def __init__(self, subscription: Optional[str] = None, topic: Optional[str] = None,
                 timestamp_attribute: Optional[str] = None):
        super().__init__()
        if (subscription is None) == (topic is None):
            raise ValueError("Pub/Sub: give exactly one of --pubsub-subscription or --pubsub-topic")
        from apache_beam.io.gcp.pubsub import ReadFromPubSub

        self.name = subscription or topic
        self.read = ReadFromPubSub(
            topic=topic, subscription=subscription, with_attributes=True, timestamp_attribute=timestamp_attribute
        )

    def expand(self, pbegin):
        name = self.name
        return (
            pbegin
            | "ReadFromPubSub" >> self.read
            | "PubSubRecords" >> beam.Map(lambda m: (f"pubsub:{name}#{m.message_id}", 0, m.data))
        )
