"""Stored statistics: each audit's per-session accumulators, as typed, versioned, columnar Parquet.

(Being built for issue 27: the writer, the reader and the roll-up that merges them.)
"""
from __future__ import annotations

__all__ = ["STATS_SCHEMA_VERSION"]

#: version of the stored-statistics schema (``stats/`` of an audit's output folder); a roll-up
#: refuses files of another version with a one-line usage error naming both
STATS_SCHEMA_VERSION = 1
