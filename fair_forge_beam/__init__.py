"""fair_forge_beam: fairness, safety and quality metrics for AI assistants as Apache Beam pipelines.

Importing the package has no side effects (no logging configuration, no Beam import): names
below are loaded on first use. One exception, in a process with a file size limit (``ulimit -f``,
``RLIMIT_FSIZE``) only: Python then writes no bytecode caches (``sys.dont_write_bytecode``), as
CPython renames a ``.pyc`` into place even when the limit cut its one ``write`` short, and every
later import of that module fails (``EOFError: marshal data too short``; trial46 B1). This is the
first module of the package any process imports (the commands, the SDK workers, the loop's
stages), so only its own cache and that of ``pipelines/__init__`` (each under 2 KB) are written
before it.

    from fair_forge_beam import Humanity, BayesianMode, ReadInteractions, Retriever
"""
from __future__ import annotations

import sys as _sys

try:
    import resource as _resource

    if _resource.getrlimit(_resource.RLIMIT_FSIZE)[0] != _resource.RLIM_INFINITY:
        _sys.dont_write_bytecode = True
except (ImportError, OSError, ValueError):  # pragma: no cover - no resource module (Windows)
    pass

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
