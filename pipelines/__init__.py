"""The commands. The package :mod:`fair_forge_beam` is imported first: under a file size limit it
turns Python's bytecode caches off before any command module is compiled (its docstring says why)."""
import fair_forge_beam  # noqa: F401
