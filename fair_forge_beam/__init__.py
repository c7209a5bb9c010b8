"""fair_forge_beam: fairness, safety and quality metrics for AI assistants as Apache Beam pipelines.

Importing the package has no side effects (no logging configuration, no Beam import): names
below are loaded on first use. One exception, under a file size limit (``ulimit -f``) only: Python
then writes no bytecode caches, and this module's own, written before it ran, is removed (CPython
renames a ``.pyc`` into place even when the limit cut it short, and every later import of it failed:
"marshal data too short"; trial46 B1, trial46b B1).

    from fair_forge_beam import Humanity, BayesianMode, ReadInteractions, Retriever
"""
from __future__ import annotations

import os as _os
import sys as _sys

try:
    import resource as _resource

    _FILE_SIZE_LIMITED = _resource.getrlimit(_resource.RLIMIT_FSIZE)[0] != _resource.RLIM_INFINITY
except (ImportError, OSError, ValueError):  # pragma: no cover - no resource module (Windows)
    _FILE_SIZE_LIMITED = False


def _drop_own_cache(cached) -> None:
    """Under a file size limit: no more bytecode caches, and the calling module's own (``cached``: its
    ``__cached__``, written before its code ran, maybe cut by the limit) removed."""
    if _FILE_SIZE_LIMITED:
        _sys.dont_write_bytecode = True
        try:
            _os.unlink(cached)
        except (OSError, TypeError):
            pass


_drop_own_cache(globals().get("__cached__"))

from fair_forge_beam._lazy import lazy_exports  # noqa: E402 - after the guard: its cache is the next written

__version__ = "0.1.0"

_EXPORTS = {
    "Humanity": "metrics.humanity",
    "ReadInteractions": "io.read",
    "Retriever": "io.retriever",
    "Interaction": "io.elements",
    "StatisticalMode": "statistical.base",
    "FrequentistMode": "statistical.frequentist",
    "BayesianMode": "statistical.bayesian",
    "Batch": "schemas.common",
    "Dataset": "schemas.common",
    "SessionMetadata": "schemas.common",
    "StreamedBatch": "schemas.common",
    "IterationLevel": "schemas.common",
    "Estimate": "schemas.common",
}

__all__ = sorted(_EXPORTS) + ["__version__"]
__getattr__ = lazy_exports(__name__, _EXPORTS)
