"""Mechanisms that claim a delta of their own (``Cost.delta0``: the stability histograms' ``delta=``) under an
(epsilon, delta) budget.

Before: zCDP mode took rho by CKS at the whole delta, so the delta0 of a ``GaussianStabilityHistogram`` (which has
no privacy loss distribution, so PLD mode never applies) pushed the composed cost over the budget and every such
plan was refused by the final budget check (``test_an_approx_dp_budget_certifies_a_gaussian_stability_histogram``
failed on main).  Now the zCDP total is the largest rho whose conversion as delta0-approximate rho-zCDP
(``approx_zcdp_to_approx_dp``: CKS at delta - delta0) meets the budget, with delta0 composed as the ledger
composes it (:func:`~dpflow.planner.allocate.zcdp_total`).
"""

from __future__ import annotations

from fractions import Fraction

import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.errors import BudgetError
from dpflow.planner.allocate import zcdp_total
from dpflow.planner.context import PlanContext
from dpflow.privacy import (
    approx_zcdp_rho_for_approx_dp,
    approx_zcdp_to_approx_dp,
    to_float_down,
    zcdp_rho_for_approx_dp,
)

EPS, DELTA = 1.0, 1e-6


def _plan(budget: dp.Measure, hist: list[float], laplace: tuple[float, ...] = (), neighbors: str = "replace",
          gauss: bool = True) -> dp.Plan:
    b = dp.PlanBuilder(budget=budget, neighbors=neighbors)
    X = b.source("X", dp.Reals(), **({"n": 1000} if neighbors == "replace" else {}))
    c = N.BinCounts(width=1.0)(X)
    outs = {f"h{i}": N.GaussianStabilityHistogram(delta=d)(c) for i, d in enumerate(hist)}
    outs |= {f"l{i}": N.StabilityHistogram(delta=d)(c) for i, d in enumerate(laplace)}
    if gauss:
        outs["m"] = N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(X)))
    return b.build(**outs)


def _expected_rho(delta0: Fraction) -> Fraction:
    return zcdp_rho_for_approx_dp(EPS, to_float_down(Fraction(DELTA) - delta0))


@pytest.mark.parametrize("neighbors", ["replace", "add_remove"])
@pytest.mark.parametrize("exact_noise", [False, True])
def test_an_approx_dp_budget_certifies_a_gaussian_stability_histogram(neighbors: str, exact_noise: bool) -> None:
    """The plan main refused: it certifies in zCDP mode at CKS(delta - delta0), and its ledger's tightest conversion
    meets the budget with almost nothing to spare."""
    cert = dp.certify(_plan(dp.ApproxDP(EPS, DELTA), [1e-7], neighbors=neighbors), exact_noise=exact_noise)
    led = cert.ledger
    assert led.allocation.startswith("zCDP mode") and "CKS at delta - delta0, delta0=1e-07" in led.allocation
    (t,) = led.totals
    assert t.cost.delta0 == Fraction(1e-7) and t.cost.rho == _expected_rho(Fraction(1e-7))
    best = t.tightest()
    assert best.rule == "zCDP -> (eps,delta) by CKS" and best.delta == DELTA
    assert EPS * (1 - 1e-9) < best.epsilon <= EPS


def test_the_zcdp_total_is_the_largest_rho_the_approximate_zcdp_conversion_allows() -> None:
    """Pins the rule: the total meets the budget as delta0-approximate zCDP, and the next float above it does not
    (up to the bisection's 1e-9: neither delta (no subtraction) nor delta - 2 delta0 nor any other slack survives)."""
    delta0 = Fraction(1e-7)
    rho, d0 = zcdp_total(PlanContext.of(_plan(dp.ApproxDP(EPS, DELTA), [1e-7])))
    assert d0 == delta0 and rho == _expected_rho(delta0)
    assert approx_zcdp_to_approx_dp(rho, d0, DELTA) <= EPS
    assert approx_zcdp_to_approx_dp(float(rho) * (1 + 1e-9), d0, DELTA) > EPS  # the bisection's resolution
    # the whole delta would have been too much: CKS at delta is a larger rho, refused by the conversion
    assert zcdp_rho_for_approx_dp(EPS, DELTA) > rho


def test_without_an_own_delta_the_zcdp_total_is_unchanged() -> None:
    rho, d0 = zcdp_total(PlanContext.of(_plan(dp.ApproxDP(EPS, DELTA), [], gauss=True)))
    assert d0 == 0 and rho == zcdp_rho_for_approx_dp(EPS, DELTA)


def test_own_deltas_compose_as_the_ledger_composes_them() -> None:
    """Two histograms on one source add their delta0 (sequential composition, Bun-Steinke 2016 Lemma 8.2); a
    Laplace stability histogram's delta (approximate DP, Prop. 1.13) counts too; the ledger agrees."""
    plan = _plan(dp.ApproxDP(EPS, DELTA), [1e-7, 2e-7], laplace=(5e-8,))
    want = Fraction(1e-7) + Fraction(2e-7) + Fraction(5e-8)
    rho, d0 = zcdp_total(PlanContext.of(plan))
    assert d0 == want and rho == _expected_rho(want)
    (t,) = dp.certify(plan).ledger.totals
    assert t.cost.delta0 == want and t.tightest().epsilon <= EPS


def test_the_largest_own_delta_over_sources_sets_the_total() -> None:
    """Sources are separate datasets: each must meet the budget, so the total is set by the largest delta0."""
    b = dp.PlanBuilder(budget=dp.ApproxDP(EPS, DELTA), neighbors="replace")
    X = b.source("X", dp.Reals(), n=100)
    Y = b.source("Y", dp.Reals(), n=100)
    cx, cy = N.BinCounts(width=1.0)(X), N.BinCounts(width=1.0)(Y)
    plan = b.build(a=N.GaussianStabilityHistogram(delta=1e-7)(cx),
                   b=N.GaussianStabilityHistogram(delta=3e-7)(cy),
                   c=N.GaussianStabilityHistogram(delta=1e-7)(cy))
    rho, d0 = zcdp_total(PlanContext.of(plan))
    assert d0 == Fraction(3e-7) + Fraction(1e-7) and rho == _expected_rho(d0)
    totals = dp.certify(plan).ledger.totals
    assert [float(t.cost.delta0) for t in totals] == [1e-7, float(d0)]
    assert all(t.tightest().epsilon <= EPS for t in totals)


def test_an_own_delta_that_uses_the_whole_delta_is_refused_before_data() -> None:
    """delta0 >= delta leaves nothing to convert: a clear refusal naming the source and the fix (on main the
    conversion raised a bare ValueError from the ledger)."""
    with pytest.raises(BudgetError, match=r"source X claim delta=1e-06 of their own.*lower the delta="):
        dp.certify(_plan(dp.ApproxDP(EPS, DELTA), [1e-6]))
    with pytest.raises(BudgetError, match="claim delta="):
        dp.certify(_plan(dp.ApproxDP(EPS, DELTA), [6e-7, 4e-7]))  # the sum reaches delta
    assert dp.certify(_plan(dp.ApproxDP(EPS, DELTA), [6e-7, 3e-7])).ledger.totals[0].tightest().epsilon <= EPS


def test_a_run_releases_under_the_new_total() -> None:
    """The certified plan runs (exact noise too) and its histogram finds a heavy bin."""
    import numpy as np

    plan = _plan(dp.ApproxDP(EPS, DELTA), [1e-7])
    data = {"X": np.full((1000, 1), 3.5)}
    for noise in (dp.SeededNoise(0), dp.SeededNoise(0, exact=True)):
        keys, _ = plan.run(data, noise=noise).released["h0"]
        assert list(keys) == [3]


# ---------------------------------------------------------------------------------------------------------
# basic (epsilon, delta) accounting: each mechanism (eps_i, delta_i)-DP on its own, delta_i = delta eps_i / eps


BUDGET_DELTA = dp.ApproxDP(EPS, DELTA).delta  # the budget's delta as dpflow holds it (exact decimal 1e-6)


def _basic(hist: type, delta_h: float | str) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ApproxDP(EPS, DELTA), neighbors="replace", accounting="basic")
    X = b.source("X", dp.Reals(), n=1000)
    return b.build(h=hist(delta=delta_h)(N.BinCounts(width=1.0)(X)), m=N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(X))))


def test_basic_accounting_calibrates_a_gaussian_stability_histogram_at_delta_i_minus_its_delta() -> None:
    """Main refused it ("no (epsilon, delta) calibration"); now delta0-approximate rho-zCDP converted at
    delta_i - delta0 (two equal weights: eps_i = 1/2, delta_i = delta / 2), the largest such rho."""
    cert = dp.certify(_basic(N.GaussianStabilityHistogram, 1e-7))
    (key,) = [k for k in cert.allocations if k.startswith("gaussian_stability")]
    a = cert.allocations[key]
    eps_i, delta_i, d0 = Fraction(1, 2), BUDGET_DELTA / 2, Fraction(1e-7)
    assert a.mode == "zcdp" and a.share == approx_zcdp_rho_for_approx_dp(eps_i, delta_i, d0)
    assert (a.cost.basic_eps, a.cost.basic_delta, a.cost.delta0) == (eps_i, delta_i, d0)
    assert approx_zcdp_to_approx_dp(a.share, d0, delta_i) <= eps_i
    assert approx_zcdp_to_approx_dp(float(a.share) * (1 + 1e-9), d0, delta_i) > eps_i
    (t,) = cert.ledger.totals
    assert (t.cost.basic_eps, t.cost.basic_delta) == (1, BUDGET_DELTA)
    assert "converted at delta_i less its delta" in cert.ledger.allocation  # the ledger names the rule
    plain = dp.PlanBuilder(budget=dp.ApproxDP(EPS, DELTA), accounting="basic")
    X = plain.source("X", dp.Reals())
    assert "its delta" not in dp.certify(plain.build(m=N.LaplaceMech()(N.Count()(X)))).ledger.allocation


def test_basic_accounting_gives_a_laplace_stability_histogram_its_own_epsilon_delta_point() -> None:
    """The Laplace histogram is (eps, delta_h)-DP itself (Cost.approx_dp): at eps_i = 1/2 it gets Lap(2 / (1/2)) =
    Lap(4) and charges (1/2, delta_h), less noise than approximate zCDP converted at delta_i - delta_h."""
    cert = dp.certify(_basic(N.StabilityHistogram, 1e-7))
    (key,) = [k for k in cert.allocations if k.startswith("stability")]
    a = cert.allocations[key]
    assert a.mode == "zcdp" and a.share == Fraction(1, 8)
    half = Fraction(1, 2)
    assert a.cost.basic_eps is not None and half * (1 - Fraction(1, 10**9)) < a.cost.basic_eps <= half
    assert a.cost.basic_delta == Fraction(1e-7)
    assert a.share > approx_zcdp_rho_for_approx_dp(Fraction(1, 2), BUDGET_DELTA / 2, Fraction(1e-7))
    (t,) = cert.ledger.totals
    assert t.cost.basic_delta == Fraction(1e-7) + BUDGET_DELTA / 2 and t.tightest().epsilon <= EPS
    (entry,) = [e for e in cert.ledger.entries if e.node == key]
    assert "Laplace b = 4 " in entry.noise


@pytest.mark.parametrize("hist", [N.GaussianStabilityHistogram, N.StabilityHistogram])
def test_basic_accounting_refuses_an_own_delta_above_the_mechanisms_delta_share(hist: type) -> None:
    """delta_h = 6e-7 > delta_i = 5e-7: a clear refusal before data naming the node and the fix; at exactly 5e-7
    the Laplace histogram's own point still fits (delta_h <= delta_i) and the Gaussian one does not (needs <)."""
    with pytest.raises(BudgetError, match=r"claims delta=6e-07 of its own.*raise its weight="):
        dp.certify(_basic(hist, 6e-7))
    if hist is N.StabilityHistogram:
        assert dp.certify(_basic(hist, "1/2000000")).ledger.totals[0].cost.basic_delta == BUDGET_DELTA
    else:
        with pytest.raises(BudgetError, match="claims delta=5e-07"):
            dp.certify(_basic(hist, "1/2000000"))


def test_a_fixed_cost_above_the_total_is_refused_by_the_allocation_as_before() -> None:
    """The trial allocation behind the own delta0 (at the CKS total) refuses fixed costs above it: the delta0 is then
    taken as 0 and the zCDP allocation raises its own refusal, naming the node and its fixed cost."""
    b = dp.PlanBuilder(budget=dp.ApproxDP(EPS, DELTA), neighbors="replace")
    X = b.source("X", dp.Reals(), n=100)
    plan = b.build(h=N.GaussianStabilityHistogram(delta=1e-7, rho=1)(N.BinCounts(width=1.0)(X)))
    assert zcdp_total(PlanContext.of(plan)) == (zcdp_rho_for_approx_dp(EPS, DELTA), 0)
    with pytest.raises(BudgetError, match=r"need rho=1 but the budget allows rho=0\.02435"):
        dp.certify(plan)
