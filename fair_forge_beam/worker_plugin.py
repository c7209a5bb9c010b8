"""Imported by each SDK worker of a batch job that :class:`~fair_forge_beam.testing.flink_cluster.FlinkCluster`
sizes by its input (Beam's ``--beam_plugins``: the worker imports the module before it makes its harness).

Beam's Flink runner gives each task's stage a bundle descriptor of its own (``DefaultJobBundleFactory``: a new
``stageIdGenerator`` id for each task's prepared client), and the Python SDK keeps each descriptor's bundle
processor, with its ``DoFn`` objects and their state, until it has been idle
``sdk_worker.DEFAULT_BUNDLE_PROCESSOR_CACHE_SHUTDOWN_THRESHOLD_S`` (Beam: 60 s). With one subtask per 22 MB of
input a worker runs ten subtasks of a stage in turn at 1M interactions, and the processors of the finished ones
stayed: the largest worker 608 and 714 MB at 1M against 502 at 100k (1.21x, 1.42x). Idle for
:data:`IDLE_BUNDLE_PROCESSOR_SECONDS` they now end: 520 MB against 501 (1.04x), ``results.json`` identical
(docs/performance.md, "one subtask per 22 MB of input"). A processor of a descriptor that runs again after that
is made again, as for a new task."""
import fair_forge_beam._beam  # noqa: F401 - Beam's first import under the logging guard (case-006)
from apache_beam.runners.worker import sdk_worker

#: how long a worker keeps a bundle processor that has run no bundle (Beam's default: 60 s)
IDLE_BUNDLE_PROCESSOR_SECONDS = 5

sdk_worker.DEFAULT_BUNDLE_PROCESSOR_CACHE_SHUTDOWN_THRESHOLD_S = IDLE_BUNDLE_PROCESSOR_SECONDS
