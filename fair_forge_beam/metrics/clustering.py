"""Cluster profiling moved to :mod:`fair_forge_beam.components.cluster_profile` (the Beam stage)
and :mod:`fair_forge_beam.components.clustering` (numpy fit / assign); importable from here for
existing callers."""
from fair_forge_beam.components.cluster_profile import ClusterProfile, SmallestKeysCombineFn, points_schema  # noqa: F401
from fair_forge_beam.components.clustering import (  # noqa: F401
    MIN_POINTS,
    POINTS_SCHEMA_FIELDS,
    AssignModel,
    ClusterAssignment,
    ClusterConfig,
    ClusterInput,
    FitOutcome,
    build_profile,
    fit_clusters,
    knn_vote,
    require_clustering,
    sample_key,
)

__all__ = ["ClusterInput", "ClusterAssignment", "ClusterConfig", "ClusterProfile", "FitOutcome", "AssignModel",
           "fit_clusters", "knn_vote", "sample_key", "build_profile", "SmallestKeysCombineFn", "MIN_POINTS",
           "POINTS_SCHEMA_FIELDS", "require_clustering"]
