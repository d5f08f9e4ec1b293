"""Issue 13: the eps <-> rho inverse and the ApproxDP -> rho rule of all-Gaussian plans live in
``dpflow.privacy`` once, and the mechanisms, the planner and the Gaussian estimators all call them."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.estimators import gaussian as G
from dpflow.estimators.gaussian import coinpress, steps
from dpflow.planner.certify import certify
from dpflow.privacy import (
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    Cost,
    PureDP,
    gaussian_budget_rho,
    gaussian_dp_epsilon,
    gdp_mu_for_approx_dp,
    gdp_mu_of_mu2,
    pure_eps_for_zcdp,
    pure_to_zcdp,
    shares_by_weight,
)
from dpflow.privacy.rounding import to_float_down

# ------------------------------------------------------------------------------------------------
# eps <-> rho (Bun-Steinke 2016 Prop 1.4)

# The values of the inverse before it moved out of nodes/mechanisms.py: the move changes no number.
GOLDEN_EPS = [
    (Fraction(1, 2), "0x1.fffffffffdcd0p-1"),
    (Fraction(1, 200), "0x1.9999999997d73p-4"),
    (Fraction(0.1) ** 2 / 2, "0x1.9999999997d73p-4"),
    (Fraction(1, 3), "0x1.a20bd700c0f83p-1"),
    (Fraction(2), "0x1.fffffffffdcd0p+0"),
    (Fraction(1, 10**9), "0x1.7726636ae54afp-15"),
    (Fraction(9, 8), "0x1.7ffffffffe59cp+0"),
]


@pytest.mark.parametrize(("rho", "hexeps"), GOLDEN_EPS)
def test_pure_eps_for_zcdp_golden(rho: Fraction, hexeps: str) -> None:
    assert pure_eps_for_zcdp(rho) == Fraction(float.fromhex(hexeps))


def test_pure_eps_for_zcdp_never_exceeds_and_is_tight() -> None:
    rnd = random.Random(13)
    rhos = [Fraction(rnd.randint(1, 10**12), rnd.randint(1, 10**12)) for _ in range(300)]
    rhos += [Fraction(rnd.random() * s) for s in (1e-12, 1e-6, 1.0, 1e3) for _ in range(50)]
    rhos += [pure_to_zcdp(Fraction(e)) for e in (0.1, 0.5, 1.0, 3.0)]  # exact squares: sqrt(2 rho) is a float
    for rho in rhos:
        eps = pure_eps_for_zcdp(rho)
        assert Fraction(float(eps)) == eps  # a float
        assert pure_to_zcdp(eps) <= rho  # never costs more than the share (exact check)
        assert eps >= math.sqrt(2 * float(rho)) * (1 - 3e-12)  # and gives away at most ~1e-12
    assert pure_eps_for_zcdp(0) == 0
    assert pure_eps_for_zcdp(0.125) == pure_eps_for_zcdp(Fraction(1, 8))


def test_epsilon_mechanisms_use_the_privacy_rule() -> None:
    lap = N.LaplaceMech(epsilon=Fraction(3, 10))
    assert lap.fixed_share("pure") == Fraction(3, 10)
    assert lap.fixed_share("zcdp") == pure_to_zcdp(Fraction(3, 10)) == Fraction(9, 200)
    for share in (Fraction(1, 2), Fraction(1, 3), Fraction(7, 10**6)):
        assert N.LaplaceMech().eps(share, "zcdp") == pure_eps_for_zcdp(share)
        assert N.LaplaceMech().eps(share, "pure") == share
        assert N.LaplaceMech().cost(share, "zcdp").rho <= share


PEEL_CASES = [(1, Fraction(3, 10)), (2, Fraction(1, 7)), (3, Fraction(1)), (5, Fraction(1, 100)), (4, Fraction(0.3))]


@pytest.mark.parametrize(("s", "eps"), PEEL_CASES)
def test_peel_fixed_share_is_its_cost(s: int, eps: Fraction) -> None:
    p = N.Peel(s=s, epsilon=eps)
    at_eps = p.cost(eps, "pure")  # the mechanism run at its fixed epsilon
    assert p.fixed_share("pure") == at_eps.pure_eps == eps
    assert p.fixed_share("zcdp") == at_eps.rho
    u = eps / (3 * s)  # s noisy-max rounds at 2u, s releases at u
    assert p.fixed_share("zcdp") == s * pure_to_zcdp(2 * u) + s * pure_to_zcdp(u) == Fraction(5, 2) * s * u * u
    # at its fixed share the certified cost is at most the share, within the inverse's rounding
    rho = p.cost(p.fixed_share("zcdp") or Fraction(0), "zcdp").rho
    assert at_eps.rho * (1 - 1e-11) < rho <= at_eps.rho


@pytest.mark.parametrize("s", [1, 2, 3, 7])
def test_peel_unit_pins_the_composition(s: int) -> None:
    p = N.Peel(s=s)
    for share in (Fraction(1, 2), Fraction(1, 3), Fraction(2, 10**5)):
        assert p.unit(share, "pure") == share / (3 * s)
        assert p.unit(share, "zcdp") == pure_eps_for_zcdp(share / (5 * s))
        assert p.cost(share, "pure").pure_eps == share
        assert p.cost(share, "zcdp").rho <= share


# ------------------------------------------------------------------------------------------------
# ApproxDP -> rho of all-Gaussian plans (Balle-Wang 2018 Thm 8)

ADP = [(0.3, 1e-5), (1.0, 1e-7), (2.0, 1e-6), (8.0, 1e-9), ("0.3", "1e-7"), ("2.2", 1e-12), (1.0, 1e-6)]


def _ledger_gdp_eps(rho: Fraction, delta: float) -> float:
    return next(c.epsilon for c in Cost.gaussian_zcdp(rho).epsilon_at(delta) if c.rule == "exact Gaussian-DP")


@pytest.mark.parametrize(("eps", "delta"), ADP)
def test_gaussian_budget_rho_agrees_with_the_ledger_conversion(eps: float | str, delta: float | str) -> None:
    budget = ApproxDP(eps, delta)
    rho = gaussian_budget_rho(budget)
    mu0 = gdp_mu_for_approx_dp(budget.epsilon, budget.delta)
    assert Fraction(_ledger_gdp_eps(rho, float(budget.delta))) <= budget.epsilon  # exact, not half an ulp above
    assert gaussian_dp_epsilon(gdp_mu_of_mu2(2 * rho), budget.delta) <= to_float_down(budget.epsilon)
    assert Fraction(mu0) ** 2 / 2 * (1 - 1e-13) < rho <= Fraction(mu0) ** 2 / 2  # only a few ulps below


def test_gaussian_budget_rho_nudges_where_the_calibration_alone_fails() -> None:
    """(1, 1e-7): mu from gdp_mu_for_approx_dp alone converts, in the ledger, to epsilon > 1."""
    budget = ApproxDP(1.0, 1e-7)
    mu0 = gdp_mu_for_approx_dp(1.0, 1e-7)
    assert _ledger_gdp_eps(Fraction(mu0) ** 2 / 2, 1e-7) > 1.0
    assert gaussian_budget_rho(budget) < Fraction(mu0) ** 2 / 2
    assert _ledger_gdp_eps(gaussian_budget_rho(budget), 1e-7) <= 1.0


def test_gaussian_budget_rho_other_budgets() -> None:
    assert gaussian_budget_rho(ZCDP(0.5)) == Fraction(1, 2)
    assert gaussian_budget_rho(ApproxZCDP(0.25, 1e-6)) == Fraction(1, 4)
    for bad in (PureDP(1.0), ApproxDP(1.0, 0)):
        with pytest.raises(ValueError, match="never pure DP"):
            gaussian_budget_rho(bad)


@pytest.mark.parametrize(("eps", "delta"), ADP)
def test_planner_shares_gaussian_budget_rho(eps: float | str, delta: float | str) -> None:
    budget = ApproxDP(eps, delta)
    b = dp.PlanBuilder(budget=budget)
    X = b.source("X", dp.Vectors(d=2), n=10)
    m1 = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))
    m2 = N.GaussianMech(weight=3.0)(N.Mean()(N.Clip(radius=1.0)(X)))
    cert = certify(b.build(a=m1, b=m2))
    assert sum(a.share for a in cert.allocations.values()) == gaussian_budget_rho(budget)
    assert f"meets ({float(budget.epsilon):.6g}" in cert.ledger.allocation


def test_shares_by_weight() -> None:
    assert shares_by_weight(Fraction(1), [1.0, 3.0]) == [Fraction(1, 4), Fraction(3, 4)]
    thirds = shares_by_weight(Fraction(1, 2), [1 / 3, 1 / 3, 0.5])  # float weights at their exact value
    assert sum(thirds) == Fraction(1, 2)
    assert thirds[0] == Fraction(1, 2) * Fraction(1 / 3) / (2 * Fraction(1 / 3) + Fraction(1, 2))
    with pytest.raises(ValueError, match="positive sum"):
        shares_by_weight(Fraction(1), [0.0])


# ------------------------------------------------------------------------------------------------
# the estimators' radius schedules use the sigma the certificate gives each round (NoiseScale)


def _mean_loops(cert: Any) -> dict[str, tuple[Any, str, list[Fraction]]]:
    """Per CoinPress mean loop (a Repeat body reading a NoiseScale): (the body scope, the path of the
    Gaussian the NoiseScale names, the rho_k the planner allocates to it round by round)."""
    out = {}
    for rec in cert.space.order:
        body = cert.space.bodies.get(rec.id)
        scales = [r.node for r in body.order if isinstance(r.node, N.NoiseScale)] if body is not None else []
        if scales:
            mech = body.path + scales[0].of.id
            shares = [cert.invocations.at(mech, (c,)).share for c in cert.invocations.rounds[rec.id]]
            out[rec.id] = (body, mech, shares)
    return out


SCHEDULE_PLANS = {
    "mean_zcdp": lambda: G.mean(d=3, n=3000, budget=dp.ZCDP(0.5), R=10.0, t=3),
    "mean_adp_nudged": lambda: G.mean(d=3, n=3000, budget=dp.ApproxDP(1.0, 1e-7), R=10.0, t=4),
    "mean_adp_str": lambda: G.mean(d=3, n=3000, budget=dp.ApproxDP("0.3", "1e-7"), R=10.0, t=2),
    "full_uneven_rounds": lambda: G.gaussian(d=3, n=3000, budget=dp.ZCDP(0.5), R=10.0, K=30.0, t_cov=4, t_mean=3),
    "full_adp_split": lambda: G.gaussian(d=3, n=3000, budget=dp.ApproxDP(2.0, 1e-6), R=10.0, K=30.0, t_cov=4,
                                         t_mean=3, split=0.3),
}


@pytest.mark.parametrize("name", sorted(SCHEDULE_PLANS))
@pytest.mark.filterwarnings("ignore::dpflow.errors.AccuracyWarning")
def test_coinpress_reads_sigma_k_from_the_certificate(name: str) -> None:
    """No copy of the allocator: the mean loop has no public sigma schedule, and its next radius is
    gamma sqrt(1/n + sigma_k^2) with the sigma_k its Gaussian recorded (checked through the next round's
    sigma, which is calibrated to 2 mvm_clip(r_{k+1}) / n at the next round's certified rho)."""
    plan = SCHEDULE_PLANS[name]()
    cert = certify(plan)
    loops = _mean_loops(cert)
    assert len(loops) == 1
    (body, mech_path, rhos), = loops.values()
    assert not any(isinstance(r.node, N.Public) and r.node.name == "sigma_per_clip" for r in body.order)
    param = {r.node.name: r.node.values[0] for r in body.order if isinstance(r.node, N.Public) and r.node.name}
    gamma, n = param["gamma"], param["n"]
    rng = np.random.default_rng(0)
    ex = plan.run({"X": rng.normal(1.0, 1.0, size=(3000, 3))}, noise=dp.SeededNoise(1)).report.execution
    sigmas = [f["sigma"] for f in ex.facts[mech_path]]
    assert len(sigmas) == len(rhos)
    mech = body.records[mech_path.rsplit("/", 1)[1]].node
    for k in range(len(rhos) - 1):
        r_next = gamma * math.sqrt(1.0 / n + sigmas[k] ** 2)
        want = mech.noise_scale(2.0 * steps.mvm_clip(r_next, gamma) / n, rhos[k + 1], "zcdp")
        assert sigmas[k + 1] == pytest.approx(want, rel=1e-9)


@pytest.mark.filterwarnings("ignore::dpflow.errors.AccuracyWarning")
def test_predicted_radii_use_the_allocated_rho() -> None:
    budget = dp.ApproxDP(1.0, 1e-7)
    plan = G.mean(d=3, n=3000, budget=budget, R=10.0, t=3)
    ((_, _, allocated),) = _mean_loops(certify(plan)).values()
    assert sum(allocated) == G.total_rho(budget) == gaussian_budget_rho(budget)
    assert coinpress._round_rhos(G.total_rho(budget), coinpress.schedule(3)) == allocated
