"""Exact fixed-point sums over rows: what a ``Sum`` (and a ``Gram`` without a public row count) hands an exact
noise source, so that its release never rests on a floating-point error bound that grows with a private n.

**The grid.**  For a public bound ``B`` on every coordinate of a computed row (the widened row norm of
:class:`dpflow.nodes.floaterr.FloatError`), ``q = 2**e`` with ``e = max(E - P, MIN_EXPONENT)``, where
``2**(E-1) <= B < 2**E`` (``math.frexp``) and ``P`` is :data:`SUM_BITS` (sums) or :data:`GRAM_BITS` (Gram).
A row ``x`` becomes the integers ``Q(x) = rint(x / q)``, computed as ``rint(x * 2**-e)``: multiplying a float
by a power of two is exact unless the product overflows or is subnormal; it cannot overflow below ``2**P``
(``|x| <= B < 2**E``), and a subnormal product is below 1/2 in magnitude, where the computed and the exact
quotient both round to 0.  So ``Q(x)`` is exactly the round-half-even of ``x / q``, a function of the row
alone, with ``|Q(x)_j| <= 2**P`` and ``||Q(x)||_2 <= ||x||_2 / q + sqrt(d) / 2`` (each coordinate moves by at
most 1/2).  Declared policy for rows outside the bound (never produced by a bounded query's input): entries
are clamped to ``[-2**P, 2**P]`` and NaN counts as 0, so the integer bounds hold for every input.

**The sum.**  ``S = sum_i Q(x_i)`` in integers.  Within a block of at most :data:`SUM_BLOCK` = 2^22 rows the
int64 partial sums are at most ``2^22 * 2^40 = 2^62 < 2^63`` in magnitude, so int64 never overflows; the
block sums are combined exactly (:func:`exact_total`: split into 31-bit halves, added in int64, joined as
Python ints).  The Gram ``G = sum_i Q(z_i) Q(z_i)^T`` is the same with products of at most ``2^52``
(``P = 26``) in blocks of :data:`GRAM_BLOCK` = 2^10 rows: ``2^10 * 2^52 = 2^62``.  ``q S`` (``q^2 G``) is an
exact function of the rows; neither the order of additions nor the backend's blocks change it.

**Sensitivity.**  A record's change moves ``q S`` by at most what it moves the exact sum of the rows, plus
``q sqrt(d) / 2`` per changed row (the rounding of each of the two rows of a replacement, or of the one
added or removed row).  So ``q S`` has the declared sensitivity plus ``2 E``, with the half-excess
``E = stability * (b gamma_{d+2} + q sqrt(d) / 2)`` for computed rows within ``b`` (the excess of computed
rows over the declared radius, as for the float sum, plus the rounding), whatever n is; for the Gram,
``E = stability * sqrt(2) (b' - r)(b' + r) / 2`` with ``b' = b + q sqrt(d) / 2``.  This is the float-error
term the lattice release adds (``sensitivity + lattice + 2 x error``; :meth:`FloatError.bound`).

**The release.**  The mechanism rounds ``q S`` to its lattice step ``s = 2**k`` in integer arithmetic
(:func:`lattice_units`): ``S * 2**(e - k)`` when ``e >= k``, else ``S`` shifted right with rounding, which
moves each entry by at most ``s / 2`` (the lattice term of the widened sensitivity).  A float conversion of
``q S`` would err by ``u |q S|``, unbounded in n; it is used only by continuous noise, which has no error term.

>>> import numpy as np
>>> e = grid_exponent(1.0, SUM_BITS)
>>> units = sum_units(np.array([[0.5, -1.0], [0.25, 1.0]]), e)
>>> FixedPoint(units, e).as_float().tolist()
[0.75, 0.0]
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

SUM_BITS = 40
"""Sums: every quantised coordinate is at most 2^40 in magnitude (q = 2^-40 of the row bound, rounded up to a
power of two)."""

SUM_BLOCK = 1 << 22
"""Rows per int64 partial sum: 2^22 * 2^40 = 2^62 < 2^63."""

GRAM_BITS = 26
"""Gram matrices: quantised coordinates at most 2^26, products at most 2^52."""

GRAM_BLOCK = 1 << 10
"""Rows per int64 partial Gram: 2^10 * 2^52 = 2^62 < 2^63."""

MIN_EXPONENT = -600
"""The finest grid, 2^-600 (a bound of 0 or a tiny one): ``2**-e`` stays a finite float."""

HALF = 31
"""Block sums (at most 2^62) are split into ``hi * 2^31 + lo`` with ``|hi| <= 2^31``, ``0 <= lo < 2^31``; up
to 2^31 blocks of halves add in int64 below 2^62."""


def grid_exponent(bound: float, bits: int) -> int | None:
    """``e`` of the grid ``q = 2**e`` for coordinates at most ``bound`` in magnitude, so that
    ``|x / q| < 2**bits``; ``None`` when the bound is not finite or not below 2^1000 (no grid: the release
    treats the error as infinite).

    >>> grid_exponent(1.0, 40), grid_exponent(0.75, 40), grid_exponent(0.0, 40), grid_exponent(math.inf, 40)
    (-39, -40, -40, None)
    """
    if not (bound >= 0.0 and bound < 2.0**1000):
        return None
    return max(math.frexp(bound)[1] - bits, MIN_EXPONENT)


def quantise(B: Any, exponent: int, bits: int) -> np.ndarray:
    """``rint(x * 2**-exponent)`` of every entry as int64, clamped to ``[-2**bits, 2**bits]``, NaN as 0
    (declared policy; see the module docstring for why this is exact).

    >>> quantise(np.array([[2.0**-41, 3 * 2.0**-41, np.nan, -np.inf]]), -40, 40).tolist()
    [[0, 2, 0, -1099511627776]]
    """
    with np.errstate(all="ignore"):
        t = np.multiply(np.asarray(B, dtype=float), math.ldexp(1.0, -exponent))  # a new array: written in place
        np.rint(t, out=t)
    lim = float(1 << bits)
    np.clip(t, -lim, lim, out=t)
    np.nan_to_num(t, copy=False, nan=0.0)
    out: np.ndarray = t.astype(np.int64)
    return out


def exact_total(parts: np.ndarray) -> np.ndarray:
    """The exact sum over the first axis of int64 ``parts`` (each at most 2^62 in magnitude, fewer than
    2^31 of them), as Python ints (an object array): every part is split into ``hi * 2^31 + lo``, the halves
    are added in int64 (no overflow) and joined as Python ints.

    >>> exact_total(np.array([[2**62], [2**62], [-3]])).tolist()
    [9223372036854775805]
    """
    hi = parts >> HALF
    lo = parts & ((1 << HALF) - 1)
    h = hi.sum(axis=0, dtype=np.int64).astype(object)
    low = lo.sum(axis=0, dtype=np.int64).astype(object)
    out: np.ndarray = h * (1 << HALF) + low
    return out


def sum_units(B: Any, exponent: int) -> np.ndarray:
    """``sum_i Q(x_i)`` over the rows of one block, exactly (Python ints, shape ``(d,)``).

    >>> sum_units(np.array([[1.0], [2.0**-40]]), -40).tolist()
    [1099511627777]
    """
    Q = quantise(B, exponent, SUM_BITS)
    if Q.shape[0] == 0:
        return np.zeros(Q.shape[1:], dtype=np.int64).astype(object)
    # blocks of at most 2^22 rows: every partial sum at most 2^62 in magnitude
    parts = np.add.reduceat(Q, np.arange(0, Q.shape[0], SUM_BLOCK), axis=0, dtype=np.int64)
    return exact_total(parts)


def gram_units(B: Any, exponent: int) -> np.ndarray:
    """``sum_i Q(z_i) Q(z_i)^T`` over the rows of one block, exactly (Python ints, shape ``(d, d)``).

    >>> gram_units(np.array([[1.0, 2.0], [3.0, 0.0]]), 0).tolist()
    [[10, 2], [2, 4]]
    """
    Q = quantise(B, exponent, GRAM_BITS)
    n, d = Q.shape
    k = -(-n // GRAM_BLOCK)
    P = np.zeros((max(k, 1) * GRAM_BLOCK, d), dtype=np.int64)
    P[:n] = Q  # zero rows pad the last block
    blocks = P.reshape(-1, GRAM_BLOCK, d)
    parts = np.einsum("kmi,kmj->kij", blocks, blocks)  # int64; <= 2^10 products of <= 2^52 each: |.| <= 2^62
    return exact_total(parts)


@attrs.frozen(eq=False)
class FixedPoint:
    """An exact statistic ``units * 2**exponent``: ``units`` an object array of Python ints.  What a
    fixed-point query hands a mechanism; ``np.asarray`` gives its float view (for continuous noise only).

    >>> FixedPoint(np.array([3, -1], dtype=object), -1).as_float().tolist()
    [1.5, -0.5]
    """

    units: np.ndarray
    exponent: int

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.units.shape)

    def as_float(self) -> np.ndarray:
        """The nearest floats (each integer rounded to a float, then scaled: post-processing of an exact value)."""
        out: np.ndarray = np.array([to_float(int(u), self.exponent) for u in self.units.ravel()],
                                   dtype=float).reshape(self.units.shape)
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.as_float()
        return out if dtype is None else out.astype(dtype, copy=False)


def to_float(k: int, exponent: int) -> float:
    """``k * 2**exponent`` as a float, or +-inf (the sign of ``k``) beyond the float range: never raises.  The
    top 64 bits of ``k`` (truncated) are rounded to a float and scaled, so the result is within one ulp.

    >>> to_float(3, -1), to_float(2**2000, 0), to_float(-(2**2000), -3000)
    (1.5, inf, -9.332636185032189e-302)
    """
    shift = max(k.bit_length() - 64, 0)
    try:
        return math.ldexp(float(k >> shift), exponent + shift)
    except OverflowError:
        return math.inf if k > 0 else -math.inf


def lattice_units(value: Any, step: float, floor: bool = False) -> np.ndarray:
    """``value / step`` rounded to integers (to the nearest, or down with ``floor``), for a power-of-two
    ``step``: exactly in integer arithmetic for a :class:`FixedPoint` (an object array of Python ints),
    else as floats from the float value (``rint``/``floor``; NaN and infinities as 0).

    >>> lattice_units(FixedPoint(np.array([5, -5, 7], dtype=object), 0), 2.0).tolist()
    [3, -2, 4]
    >>> lattice_units(FixedPoint(np.array([5, -5], dtype=object), 0), 2.0, floor=True).tolist()
    [2, -3]
    >>> lattice_units(np.array([2.5, np.nan]), 1.0).tolist()
    [2.0, 0.0]
    """
    if not isinstance(value, FixedPoint):
        v = np.nan_to_num(np.asarray(value, dtype=float), nan=0.0, posinf=0.0, neginf=0.0) / step
        out: np.ndarray = np.floor(v) if floor else np.rint(v)
        return out
    k = math.frexp(step)[1] - 1
    if step != math.ldexp(1.0, k):
        raise ValueError(f"the lattice step must be a power of two, got {step!r}")
    shift = k - value.exponent
    u = value.units
    if shift <= 0:
        scaled: np.ndarray = u * (1 << -shift)
        return scaled
    if floor:
        return u >> shift
    return (u + (1 << (shift - 1))) >> shift
