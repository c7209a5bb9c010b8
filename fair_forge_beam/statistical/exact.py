"""Exactly rounded, order-independent float accumulation.

Float sums differ in their last bits between runners and shardings (DESIGN §9), so every
accumulator whose output must be bit-identical across runners sums floats *exactly*: each
finite float64 is an integer multiple of 2**-1074, so ``x * 2**1074`` is an integer and
Python integers add exactly and associatively. The total is rounded once, at the end
(``math.fsum`` semantics). Cost: about 1 µs per added value.
"""
from __future__ import annotations

import math

from fair_forge_beam.quoting import quoted

__all__ = ["to_exact", "from_exact", "exact_ratio", "exact_to_bytes", "exact_from_bytes"]

_SHIFT = 1074
_ONE = 1 << _SHIFT


def to_exact(x: float) -> int:
    """Return the integer ``x * 2**1074`` (exact for every finite float).

    Raises:
        ValueError: ``x`` is NaN or infinite.
    """
    if not math.isfinite(x):
        raise ValueError(f"cannot accumulate a non-finite value: {quoted(x)}")
    num, den = float(x).as_integer_ratio()
    return num * (_ONE // den)


def from_exact(total: int) -> float:
    """Round an exact sum (in units of 2**-1074) to the nearest float.

    Python's ``int / int`` is correctly rounded for integers of any size (what
    ``float(Fraction(total, 2**1074))`` computes after reducing the fraction), without building
    a ``Fraction``.

    Raises:
        OverflowError: the value is beyond the float range.
    """
    return total / _ONE


def exact_ratio(num: int, den: int) -> float:
    """Correctly rounded ``num / den`` of two exact sums (same scale): ``int / int``, correctly
    rounded for any size (the same float as ``float(Fraction(num, den))``, whose zero has no sign:
    ``0 / -n`` is ``0.0``, where ``int / int`` gives ``-0.0``).

    Raises:
        ZeroDivisionError: ``den`` is 0.
        OverflowError: the ratio is beyond the float range.
    """
    if num == 0 and den != 0:
        return 0.0
    return num / den


def exact_to_bytes(total: int) -> bytes:
    """An exact sum (any Python integer) as its signed big-endian two's-complement bytes, the
    fewest that hold it (``0`` → one zero byte): how stored statistics keep exact sums in a typed
    ``binary`` column (a sum of float64 values in units of 2**-1074 needs up to ~140 bytes)."""
    return int(total).to_bytes(int(total).bit_length() // 8 + 1, "big", signed=True)


def exact_from_bytes(data: bytes) -> int:
    """The integer :func:`exact_to_bytes` wrote (signed big-endian two's complement)."""
    return int.from_bytes(data, "big", signed=True)
