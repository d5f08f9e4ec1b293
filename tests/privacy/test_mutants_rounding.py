"""Mutation-testing pins of ``dpflow/privacy/rounding.py``: outward rounding, exactly.

``up(x)`` is ``nextafter(x * (1 + 1e-12), +inf)`` for x > 0, ``nextafter(x * (1 - 1e-12), +inf)`` for x < 0
and the smallest positive subnormal for 0; ``down`` mirrors it; ``to_float_up`` / ``to_float_down`` are the
exact ceiling and floor of a Fraction in the floats (IEEE 754-2008 Sec. 4.3.2 directed rounding).
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import pytest

from dpflow.privacy.rounding import REL_MARGIN, down, frac_down, frac_up, to_float_down, to_float_up, up

TINY = 5e-324


def test_margin() -> None:
    assert REL_MARGIN == 1e-12


@pytest.mark.parametrize("x", [1.0, 3.7, 1e-300, 1e300, TINY])
def test_up_and_down_of_positive_values(x: float) -> None:
    assert up(x) == math.nextafter(x * (1.0 + 1e-12), math.inf)
    assert down(x) == math.nextafter(x * (1.0 - 1e-12), -math.inf)
    assert up(-x) == math.nextafter(-x * (1.0 - 1e-12), math.inf) == -down(x)
    assert down(-x) == -up(x)


def test_up_and_down_of_zero_and_infinities() -> None:
    assert up(0.0) == TINY and up(-0.0) == TINY
    assert down(0.0) == -TINY
    assert up(math.inf) == math.inf and down(-math.inf) == -math.inf
    assert up(-math.inf) == -sys.float_info.max and down(math.inf) == sys.float_info.max
    assert up(sys.float_info.max) == math.inf


def test_nan_is_refused() -> None:
    with pytest.raises(ValueError, match="^cannot round nan$"):
        up(math.nan)
    with pytest.raises(ValueError, match="^cannot round nan$"):
        down(math.nan)


def test_fraction_forms() -> None:
    assert frac_up(0.5) == Fraction(up(0.5)) and frac_down(0.5) == Fraction(down(0.5))


@pytest.mark.parametrize("q", [Fraction(1, 3), Fraction(-1, 3), Fraction(2, 7), Fraction(10**30 + 1, 10**10)])
def test_to_float_up_and_down_are_the_exact_ceiling_and_floor(q: Fraction) -> None:
    hi, lo = to_float_up(q), to_float_down(q)
    assert Fraction(lo) < q < Fraction(hi)
    assert math.nextafter(lo, math.inf) == hi


def test_to_float_of_representable_values_and_overflow() -> None:
    assert to_float_up(Fraction(1, 2)) == 0.5 == to_float_down(Fraction(1, 2))
    assert to_float_up(3) == 3.0 == to_float_down(3)
    assert to_float_up(0.1) == 0.1 and to_float_down(0.1) == 0.1     # floats unchanged
    huge = Fraction(10) ** 400
    assert to_float_up(huge) == math.inf and to_float_down(huge) == sys.float_info.max
    assert to_float_up(-huge) == -sys.float_info.max and to_float_down(-huge) == -math.inf
