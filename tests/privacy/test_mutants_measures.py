"""Mutation-testing pins of ``dpflow/privacy/measures.py``: exact parameters and their refusals."""

from __future__ import annotations

import numbers
import re
from fractions import Fraction

import numpy as np
import pytest

from dpflow.privacy.measures import ZCDP, ApproxDP, ApproxZCDP, PureDP, decimal, exact, opt_exact


@pytest.mark.parametrize("cls", [ApproxDP, ApproxZCDP])
@pytest.mark.parametrize("delta", [1, "1", 1.5])
def test_delta_must_be_below_one(cls: type, delta: object) -> None:
    with pytest.raises(ValueError, match=r"^delta must be in \[0, 1\), got "):
        cls(1, delta)


def test_exact_and_decimal_values() -> None:
    assert exact(0.1) == Fraction(0.1) != Fraction(1, 10) and decimal(0.1) == Fraction(1, 10)
    assert exact(3) == 3 and exact(Fraction(2, 3)) == Fraction(2, 3) and exact(" 1/3 ") == Fraction(1, 3)
    assert decimal(Fraction(1, 3)) == Fraction(1, 3) and opt_exact(None) is None
    assert ZCDP(0.05).rho == Fraction(1, 20) and PureDP("0.5").epsilon == Fraction(1, 2)
    assert ApproxDP(1, 0).delta == 0
    for bad, err in ((-1, ValueError), (float("nan"), ValueError), (float("inf"), ValueError), ("x", ValueError),
                     (True, TypeError), (None, TypeError), ("1/0", ValueError)):
        with pytest.raises(err):
            exact(bad)  # type: ignore[arg-type]


def test_refusal_texts() -> None:
    """Each refusal names the problem and the value (mutants blanked or recased the texts)."""
    for bad in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(ValueError, match=rf"^privacy parameter must be finite, got {bad!r}$"):
            exact(bad)
    with pytest.raises(TypeError, match="^privacy parameter must be a number or a numeric string, got a bool$"):
        exact(True)
    with pytest.raises(ValueError, match="^privacy parameter must be a finite number, got '1/0'$"):
        exact("1/0")
    with pytest.raises(TypeError, match="^privacy parameter must be float, int, str or Fraction, got list$"):
        exact([1])  # type: ignore[arg-type]


class _Half(Fraction):
    """A Fraction subclass (not ``type(x) is Fraction``): reaches the isinstance branch."""


class _Ratio:
    """A rational number that is not a Fraction (as gmpy2's mpq): reaches the ``numbers.Rational`` branch."""

    def __init__(self, p: int, q: int) -> None:
        self.numerator, self.denominator = p, q


numbers.Rational.register(_Ratio)


def test_fraction_subclasses_and_other_rationals_are_read_exactly() -> None:
    assert exact(_Half(1, 3)) == Fraction(1, 3) and type(exact(_Half(1, 3))) in (Fraction, _Half)
    assert exact(_Ratio(2, 6)) == Fraction(1, 3)  # type: ignore[arg-type]
    assert exact(_Ratio(7, 1)) == 7  # type: ignore[arg-type]


def test_describe_prints_ten_significant_digits() -> None:
    assert ZCDP(Fraction(1, 3)).describe() == "rho=0.3333333333 zCDP"
    assert ApproxDP(Fraction(2, 3), Fraction(1, 7)).describe() == "(epsilon=0.6666666667, delta=0.1428571429)-DP"
    assert PureDP(Fraction(10**12 + 1, 3)).describe() == "epsilon=3.333333333e+11 pure DP"


def test_numpy_floats_are_read_exactly_and_must_be_finite() -> None:
    """numpy scalars are not ``type(x) is float``: they take the ``numbers.Real`` branch."""
    assert exact(np.float64(0.1)) == Fraction(0.1) and exact(np.float32(0.75)) == Fraction(3, 4)  # type: ignore[arg-type]
    assert exact(np.float32(0.1)) == Fraction(float(np.float32(0.1)))  # type: ignore[arg-type]
    for bad in (np.float64("nan"), np.float32("inf")):
        with pytest.raises(ValueError, match=f"^privacy parameter must be finite, got {re.escape(repr(bad))}$"):
            exact(bad)  # type: ignore[arg-type]
