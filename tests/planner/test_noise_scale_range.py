"""A noise scale beyond the float range is refused at planning, naming the node and the fix.

Before (2026-11-24), a tiny share over a large constant sensitivity failed in three ways, all from public values:
``certify`` raised a bare ``ValueError`` ("privacy parameter must be finite, got inf") from the Gaussian
calibration's verification of an infinite sigma; and a certified plan run on an exact source raised
``OverflowError`` in the lattice release of GaussianMech, LaplaceMech and Peel (``Fraction(inf)``), where the
widened scale overflowed although the unwidened one did not.  The calibrations now return ``inf`` for a scale
beyond the float range (infinite noise meets every share), a lattice calibration whose widened scale is not finite
is none (the release then takes the declared infinite-noise policy: NaN), and the planner refuses a constant
sensitivity whose scale (continuous or on the lattice) is infinite (``planner.accuracy.calibrator``).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.errors import BudgetError
from dpflow.nodes.mechanisms import lattice_calibration
from dpflow.privacy import gaussian_sigma_for_zcdp, laplace_scale


def _plan(mech: Any, rho: Fraction) -> tuple[dp.Plan, str]:
    b = dp.PlanBuilder(budget=dp.ZCDP(rho))
    m = mech()(N.Sum()(N.Clip(radius=1e77)(b.source("X", dp.Vectors(d=2), n=100))))
    return b.build(m=m), m.id


@pytest.mark.parametrize(("mech", "kind", "sens"), [
    (N.GaussianMech, "GaussianMech", "2e+77"), (N.LaplaceMech, "LaplaceMech", "2.82843e+77"),
    (lambda: N.Peel(s=1), "Peel", "2e+77")])
@pytest.mark.parametrize("exact", [False, True])
def test_a_scale_beyond_the_float_range_is_refused_before_data(mech: Any, kind: str, sens: str, exact: bool) -> None:
    plan, node = _plan(mech, Fraction(1, 10**300))
    with pytest.raises(BudgetError) as info:
        dp.certify(plan, exact_noise=exact)
    e = info.value
    assert (e.node, e.problem, e.fix) == (
        node, f"the noise scale of {kind} at sensitivity {sens} and share 1e-300 (zcdp) is beyond the float range",
        "raise the budget or the mechanism's weight=, or bound its input tighter (a smaller Clip radius or box)")


@pytest.mark.parametrize("mech", [N.GaussianMech, N.LaplaceMech, lambda: N.Peel(s=1)])
def test_a_large_but_finite_scale_certifies_and_runs_on_the_exact_source(mech: Any) -> None:
    plan, _ = _plan(mech, Fraction(1, 10**200))
    out = plan.run({"X": np.ones((100, 2))}, noise=dp.SecureNoise()).released["m"]
    assert out.shape == (2,) and np.all(np.isfinite(out))


def test_the_calibrations_return_inf_beyond_the_float_range() -> None:
    assert gaussian_sigma_for_zcdp(1e300, Fraction(1, 10**300)) == math.inf
    assert laplace_scale(1e300, Fraction(1, 10**300)) == math.inf
    assert 1.0 <= gaussian_sigma_for_zcdp(1.0, Fraction(1, 2)) < 1.0 + 1e-11  # outward rounded, finite
    assert 1.0 <= laplace_scale(1.0, 1.0) < 1.0 + 1e-11


def test_no_lattice_calibration_when_the_widened_scale_is_not_finite() -> None:
    """The unwidened scale is finite (1), the widened sensitivity above 1 is not: no lattice release is made (the
    release then draws no noise and is NaN, the declared infinite-noise policy)."""
    assert lattice_calibration(1.0, 0.0, 1, False, lambda d: math.inf if d > 1.0 else d) is None
    assert lattice_calibration(1.0, 0.0, 1, False, lambda d: d) is not None
