"""The product's version, without importing Beam or anything else heavy (``fair-forge-beam --version``
answers in the time Python takes to start)."""
from __future__ import annotations

__all__ = ["product_version"]


def product_version() -> str:
    """The installed distribution's version (``importlib.metadata.version("fair_forge_beam")``, e.g.
    ``"0.1.0"``); from a checkout that is not installed, the package's ``__version__``."""
    from importlib import metadata

    try:
        return metadata.version("fair_forge_beam")
    except metadata.PackageNotFoundError:
        from fair_forge_beam import __version__

        return __version__
