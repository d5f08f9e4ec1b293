"""Mutation-testing pins of ``dpflow/privacy/measures.py``: exact parameters and their refusals."""

from __future__ import annotations

from fractions import Fraction

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
