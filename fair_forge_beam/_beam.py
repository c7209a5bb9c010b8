"""Import Apache Beam without changing the host application's logging (case-006).

When the optional ``apitools`` package is missing, ``import apache_beam`` logs a warning
through the *root* logger; with no handler configured yet, Python's ``logging.warning`` then
calls ``basicConfig()`` and installs a stderr handler, so an application that configures
logging after importing us would find its ``basicConfig`` silently ignored. Every module of
this package imports Beam through here: a temporary ``NullHandler`` keeps the root logger
untouched during that first import.
"""
import logging

_root = logging.getLogger()
_guard = None
if not _root.handlers:
    _guard = logging.NullHandler()
    _root.addHandler(_guard)
try:
    import apache_beam as beam  # noqa: E402
finally:
    if _guard is not None:
        _root.removeHandler(_guard)

__all__ = ["beam"]
