"""``approx_zcdp_rho_for_approx_dp``: the one inversion of ``approx_zcdp_to_approx_dp`` (Bun-Steinke 2016 Sec. 8 with
CKS 2020 Prop. 12), used by the planner's zCDP total and its basic calibration of mechanisms with a delta of their
own.  It must meet the conversion it inverts and be the largest rho that does (to the bisection's resolution)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpflow.privacy import approx_zcdp_rho_for_approx_dp, approx_zcdp_to_approx_dp, zcdp_rho_for_approx_dp


@settings(max_examples=40, deadline=None)
@given(eps=st.floats(0.05, 8.0), delta=st.floats(1e-10, 1e-3), frac=st.floats(0.0, 0.95))
def test_the_inverse_meets_the_conversion_and_is_the_largest(eps: float, delta: float, frac: float) -> None:
    d, d0 = Fraction(delta), Fraction(delta) * Fraction(frac)
    rho = approx_zcdp_rho_for_approx_dp(eps, d, d0)
    assert approx_zcdp_to_approx_dp(rho, d0, d) <= eps
    assert approx_zcdp_to_approx_dp(float(rho) * (1 + 1e-8), d0, d) > eps
    if d0 == 0:
        assert rho == zcdp_rho_for_approx_dp(eps, delta)


def test_a_delta0_costs_rho_and_none_is_free() -> None:
    """delta0 > 0 gives a strictly smaller rho than pure CKS at delta (the delta it leaves is smaller)."""
    assert approx_zcdp_rho_for_approx_dp(1.0, 1e-6, 1e-7) < zcdp_rho_for_approx_dp(1.0, 1e-6)
    assert approx_zcdp_rho_for_approx_dp(1.0, 1e-6, 0) == zcdp_rho_for_approx_dp(1.0, 1e-6)


@pytest.mark.parametrize(("delta", "delta0"), [(1e-6, 1e-6), (1e-6, 2e-6)])
def test_delta0_outside_zero_to_delta_is_refused(delta: float, delta0: float) -> None:
    with pytest.raises(ValueError, match=r"delta0 must be in \[0, delta\)"):
        approx_zcdp_rho_for_approx_dp(1.0, delta, delta0)
    with pytest.raises(ValueError, match="non-negative"):
        approx_zcdp_rho_for_approx_dp(1.0, delta, -1e-9)
