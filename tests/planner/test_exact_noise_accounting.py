"""Certificates for exact noise sources: no Gaussian mechanism rests on an accounting proven for continuous
noise only (the exact Gaussian-DP profile, the continuous Gaussian PLD); the discrete Gaussian they draw is
accounted by the lattice Gaussian PLD (issue 16), so ApproxDP plans still allocate through the PLD; continuous
sources keep the exact Gaussian-DP profile (and their released values)."""

from __future__ import annotations

import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.planner.certify import certify
from dpflow.planner.ledger import Ledger
from dpflow.planner.modes import Accounting
from dpflow.privacy import PLD_RULE, zcdp_rho_for_approx_dp


def _gauss(accounting: str = "auto", laplace: bool = False) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ApproxDP(1.0, 1e-5), accounting=accounting)
    X = b.source("X", dp.Vectors(d=3), n=1000)
    rows = N.Clip(radius=1.0)(X)
    out = {"m": N.GaussianMech()(N.Mean()(rows))}
    if laplace:
        out["h"] = N.LaplaceMech()(N.Histogram(edges=[-1.0, 0.0, 1.0])(N.Columns(keep=[0])(rows)))
    return b.build(**out)


def _data() -> dict[str, np.ndarray]:
    return {"X": np.random.default_rng(0).normal(size=(1000, 3))}


def test_all_gaussian_approx_dp_plan_is_pld_for_exact_sources() -> None:
    plan = _gauss()
    cont, exact = certify(plan), certify(plan, exact_noise=True)
    assert cont.ledger.allocation.startswith("all mechanisms Gaussian")
    a, g = exact.allocations["gaussian_mech_3"], cont.allocations["gaussian_mech_3"]
    assert not a.continuous_gaussian and a.mode == "zcdp"
    cks = zcdp_rho_for_approx_dp(plan.budget.epsilon, plan.budget.delta)
    # the lattice PLD beats CKS by about 8% of rho and never exceeds the exact continuous profile
    assert 1.07 * cks < a.share <= g.share < 1.01 * a.share
    assert exact.ledger.allocation.startswith("PLD mode") and "lattice Gaussian PLD" in exact.ledger.allocation
    assert "mu=" not in exact.ledger.to_json() and "mu=" in cont.ledger.to_json()
    (total,) = exact.ledger.totals
    assert total.tightest().rule == PLD_RULE and total.tightest().epsilon <= 1.0
    assert total.cost.pld is not None and total.cost.pld.has_lattice_gaussian and not total.cost.pld.has_gaussian
    assert "LatticeGaussianPLD" in total.tightest().reference  # the ledger names the rule that won
    assert Ledger.from_json(exact.ledger.to_json()).totals == exact.ledger.totals  # lattice events round-trip


def test_secure_run_draws_the_discrete_gaussian_and_seeded_keeps_gdp() -> None:
    plan = _gauss()
    secure = plan.run(_data(), noise=dp.SecureNoise()).report
    assert "lattice" in {k for f in secure.execution.facts["gaussian_mech_3"] for k in f}
    assert secure.ledger.allocation.startswith("PLD mode")
    seeded = plan.run(_data(), noise=dp.SeededNoise(0)).report
    assert [set(f) for f in seeded.execution.facts["gaussian_mech_3"]] == [{"sigma"}]
    assert seeded.ledger.allocation.startswith("all mechanisms Gaussian")


def test_pld_mode_on_exact_sources_draws_the_discrete_gaussian() -> None:
    plan = _gauss(laplace=True)
    cont = certify(plan)
    exact = certify(plan, exact_noise=True)
    assert exact.allocations["gaussian_mech_3"].continuous_gaussian is False
    assert exact.ledger.allocation.startswith("PLD mode")
    assert cont.ledger.allocation.startswith("PLD mode") and cont.allocations["gaussian_mech_3"].continuous_gaussian
    # the same total up to the PLD search's grid: the lattice event is the continuous one within float rounding
    ratio = exact.allocations["gaussian_mech_3"].share / cont.allocations["gaussian_mech_3"].share
    assert 0.999 < ratio <= 1
    secure = plan.run(_data(), noise=dp.SecureNoise()).report
    assert "lattice" in {k for f in secure.execution.facts["gaussian_mech_3"] for k in f}


def test_basic_accounting_calibrates_gaussians_by_cks_for_exact_sources() -> None:
    plan = _gauss("basic")
    cont, exact = certify(plan), certify(plan, exact_noise=True)
    g_cont, g_exact = cont.allocations["gaussian_mech_3"], exact.allocations["gaussian_mech_3"]
    assert g_cont.continuous_gaussian and not g_exact.continuous_gaussian
    assert g_exact.share == zcdp_rho_for_approx_dp(plan.budget.epsilon, plan.budget.delta)
    assert g_exact.share < g_cont.share  # CKS is looser than the exact profile: more noise, never less
    assert "calibrated by the zCDP conversion" in exact.ledger.allocation


@pytest.mark.parametrize("budget", [dp.ZCDP(0.5), dp.PureDP(1.0)])
def test_other_budgets_certify_alike(budget: dp.Measure) -> None:
    b = dp.PlanBuilder(budget=budget)
    X = b.source("X", dp.Vectors(d=3), n=100)
    rows = N.Clip(radius=1.0)(X)
    plan = b.build(h=N.LaplaceMech()(N.Mean()(rows)))
    assert certify(plan).ledger.to_json() == certify(plan, exact_noise=True).ledger.to_json()


def test_accounting_flag_is_what_the_allocation_reads() -> None:
    assert Accounting.GDP.continuous_gaussian and not Accounting.ZCDP.continuous_gaussian
