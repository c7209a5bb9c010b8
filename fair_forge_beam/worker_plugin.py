"""What every SDK worker of this package's runs does at its start: imported by Beam's worker
(``sdk_worker_main``) through the pipeline option ``--beam_plugins``, which
:func:`fair_forge_beam.beam_pipeline.pipeline_options` sets for every run (Beam's own hook for code a
worker runs before its first bundle; Dataflow's workers honour it too).

It bounds the worker's data-plane messages (:func:`fair_forge_beam._beam.bound_data_plane_messages`:
1 MB instead of 10 MiB, so that a Flink TaskManager's queue of 100 messages per stream holds about
100-200 MB, not 1 GB). An import error here is logged by Beam's worker and the worker runs on.
"""
from fair_forge_beam._beam import bound_data_plane_messages

bound_data_plane_messages()
