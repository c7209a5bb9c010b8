"""Names of a package loaded on first use (PEP 562), so that importing the package imports none of
its heavy dependencies (Beam, ``openai``, torch)."""
from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: name ``n`` of ``exports`` is read from the module
    ``f"{package}.{exports[n]}"`` (imported then). Any other name raises ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
