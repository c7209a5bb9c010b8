"""The commands. The package :mod:`fair_forge_beam` is imported first: under a file size limit it
turns Python's bytecode caches off before any command module is compiled, and this package's own
cache, written before, is removed (its docstring says why)."""
import fair_forge_beam

fair_forge_beam._drop_own_cache(globals().get("__cached__"))
