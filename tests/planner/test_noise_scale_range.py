"""A noise scale beyond the float range is refused at planning, naming the node and the fix.

Before (2026-11-24), a tiny share over a large constant sensitivity failed in three ways, all from public values:
``certify`` raised a bare ``ValueError`` ("privacy parameter must be finite, got inf") from the Gaussian
calibration's verification of an infinite sigma; and a certified plan run on an exact source raised
``OverflowError`` in the lattice release of GaussianMech, LaplaceMech and Peel (``Fraction(inf)``), where the
widened scale overflowed although the unwidened one did not.  The calibrations now return ``inf`` for a scale
beyond the float range (infinite noise meets every share), a lattice calibration whose widened scale is not finite
is none (the release then takes the declared infinite-noise policy: NaN), and the planner refuses a constant
sensitivity whose scale (continuous or on the lattice) is infinite (``planner.accuracy.calibrator``).  The
calibrations' and the lattice's own pins are with their modules (``tests/privacy/test_mutants_calibration.py``,
``tests/nodes/test_mutants_mechanisms.py``).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.errors import BudgetError


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
