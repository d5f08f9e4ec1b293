"""Directed ("outward") rounding helpers: the only place where dpflow decides how floats are rounded.

Policy (round against the user):

* every privacy loss (epsilon, rho, delta) computed in floating point is rounded UP (:func:`up`);
* every noise scale is rounded UP;
* every "largest budget that fits" is rounded DOWN (:func:`down`);
* exact quantities are :class:`fractions.Fraction` and are converted to floats with an exact
  ceiling or floor (:func:`to_float_up`, :func:`to_float_down`).

:func:`up` inflates a value by the relative margin :data:`REL_MARGIN` (1e-12) and then moves one
more float toward +inf with :func:`math.nextafter`.  The relative margin dominates the
floating-point error of the handful of operations in each formula: a correctly rounded operation
errs by at most 2**-53 (about 1.1e-16) relative, and the libm / scipy special functions used
(``exp``, ``expm1``, ``log``, ``log1p``, ``sqrt``, ``erfc``, ``erfcx``) err by a few ulps, so even a chain
of a few dozen operations with condition number up to ~1e2 stays four orders of magnitude below
1e-12.  Formulas that subtract nearly equal quantities are *not* protected by a final relative
margin; they instead round every term in the safe direction (see ``conversions.py``), or evaluate
the polynomial part exactly with Fractions.

The extra ``nextafter`` step makes ``up(x) > x`` (and ``down(x) < x``) strictly for every finite
``x``, including ``0.0`` and subnormals, where a relative margin alone would vanish.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

__all__ = [
    "REL_MARGIN",
    "down",
    "frac_down",
    "frac_up",
    "to_float_down",
    "to_float_up",
    "up",
]

#: Relative safety margin applied by :func:`up` and :func:`down`.
REL_MARGIN = 1e-12

_MAX = sys.float_info.max


def up(x: float) -> float:
    """Round ``x`` outward toward +inf: inflate by a relative 1e-12, then one ``nextafter`` step.

    Used for privacy losses and noise scales computed in floating point.  The relative margin
    dominates the floating-point error of the handful of operations in each formula (policy in the
    module docstring; cf. the outward-rounded ``inf_*`` arithmetic of OpenDP and IEEE 754-2008
    Sec. 4.3.2 directed rounding).

    >>> up(1.0) > 1.0 + 0.9e-12
    True
    >>> up(0.0) > 0.0
    True
    >>> up(-2.0) > -2.0
    True
    """
    if math.isnan(x):
        raise ValueError("cannot round nan")
    if x == math.inf:
        return x
    if x > 0.0:
        y = x * (1.0 + REL_MARGIN)
    elif x < 0.0:
        y = x * (1.0 - REL_MARGIN)
    else:
        y = 0.0
    return math.nextafter(y, math.inf)


def down(x: float) -> float:
    """Round ``x`` toward -inf: deflate by a relative 1e-12, then one ``nextafter`` step (mirrors :func:`up`).

    Used for "largest budget that fits" answers and for the lower end of interval evaluations
    (policy in the module docstring; cf. OpenDP's ``neg_inf_*`` arithmetic, IEEE 754-2008 Sec. 4.3.2).

    >>> down(1.0) < 1.0 - 0.9e-12
    True
    >>> down(0.0) < 0.0
    True
    """
    if math.isnan(x):
        raise ValueError("cannot round nan")
    if x == -math.inf:
        return x
    if x > 0.0:
        y = x * (1.0 - REL_MARGIN)
    elif x < 0.0:
        y = x * (1.0 + REL_MARGIN)
    else:
        y = 0.0
    return math.nextafter(y, -math.inf)


def frac_up(x: float) -> Fraction:
    """The exact Fraction of ``up(x)``: an exact upper bound for a float-computed loss (see :func:`up`).

    (Outward rounding as in OpenDP's ``inf_*`` arithmetic; IEEE 754-2008 Sec. 4.3.2.)

    >>> frac_up(0.5) > Fraction(1, 2)
    True
    """
    return Fraction(up(x))


def frac_down(x: float) -> Fraction:
    """The exact Fraction of ``down(x)``: an exact lower bound for a float-computed budget (see :func:`down`).

    (Rounding toward -inf as in OpenDP's ``neg_inf_*`` arithmetic; IEEE 754-2008 Sec. 4.3.2.)

    >>> frac_down(0.5) < Fraction(1, 2)
    True
    """
    return Fraction(down(x))


def to_float_up(q: Fraction | float | int) -> float:
    """The smallest float ``>= q`` (exact ceiling; no relative margin is needed because ``q`` is exact).

    Floats are returned unchanged; ``inf`` is returned when ``q`` exceeds the float range.
    (IEEE 754-2008 directed rounding toward +inf, Sec. 4.3.2.)

    >>> to_float_up(Fraction(1, 3)) >= Fraction(1, 3)
    True
    >>> to_float_up(Fraction(1, 2))
    0.5
    """
    if isinstance(q, float):
        return q
    try:
        f = float(q)
    except OverflowError:
        return math.inf if q > 0 else -_MAX
    if Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    return f


def to_float_down(q: Fraction | float | int) -> float:
    """The largest float ``<= q`` (exact floor; mirror of :func:`to_float_up`).

    (IEEE 754-2008 directed rounding toward -inf, Sec. 4.3.2.)

    >>> to_float_down(Fraction(1, 3)) <= Fraction(1, 3)
    True
    >>> to_float_down(Fraction(1, 3)) < to_float_up(Fraction(1, 3))
    True
    """
    if isinstance(q, float):
        return q
    try:
        f = float(q)
    except OverflowError:
        return _MAX if q > 0 else -math.inf
    if Fraction(f) > q:
        f = math.nextafter(f, -math.inf)
    return f

