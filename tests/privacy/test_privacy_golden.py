"""Golden values of accounting.md Sec. 1.1-1.6 (tolerance 1e-6 unless the spec gives fewer digits)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from scipy import stats

from dpflow.privacy import (
    PLD_RULE,
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    Cost,
    PureDP,
    advanced_composition,
    analytic_gaussian_sigma,
    approx_dp_to_approx_zcdp,
    approx_zcdp_to_approx_dp,
    bun_steinke_epsilon,
    cks_delta,
    classical_gaussian_sigma,
    exact,
    gaussian_dp_delta,
    gaussian_dp_epsilon,
    gaussian_sigma_for_zcdp,
    gdp_mu_for_approx_dp,
    laplace_scale,
    pure_dp_of_laplace,
    pure_eps_for_approx_dp_advanced,
    pure_to_approx_dp,
    pure_to_zcdp,
    zcdp_of_gaussian,
    zcdp_rho_for_approx_dp,
    zcdp_to_approx_dp,
)

TOL = 1e-6

# (rho, delta): (BS16 Prop 1.3, CKS20, exact Gaussian with mu = sqrt(2 rho))  -- accounting.md 1.2
TABLE_1_2 = [
    (0.5, 1e-6, 5.756522, 5.221534, 4.886554),
    (0.1, 1e-6, 2.450788, 2.141939, 1.994527),
    (1.0, 1e-5, 7.786140, 7.077197, 6.572970),
    (0.01, 1e-9, 0.920456, 0.810174, 0.768212),
]


# ---------------------------------------------------------------------------------------------- 1.1


@pytest.mark.parametrize(
    ("eps", "rho"),
    [("0.1", Fraction(1, 200)), ("1.0", Fraction(1, 2)), ("2.0", Fraction(2)), ("5.0", Fraction(25, 2))],
)
def test_pure_to_zcdp_is_exact(eps: str, rho: Fraction) -> None:
    assert pure_to_zcdp(eps) == rho
    assert Cost.pure(exact(eps)).rho == rho


# ---------------------------------------------------------------------------------------------- 1.2


@pytest.mark.parametrize(("rho", "delta", "bs", "cks", "gauss"), TABLE_1_2)
def test_zcdp_to_approx_dp_table(rho: float, delta: float, bs: float, cks: float, gauss: float) -> None:
    assert zcdp_to_approx_dp(rho, delta) == pytest.approx(cks, abs=TOL)
    assert bun_steinke_epsilon(rho, delta) == pytest.approx(bs, abs=TOL)
    assert gaussian_dp_epsilon(math.sqrt(2 * rho), delta) == pytest.approx(gauss, abs=TOL)


def test_cks_matches_opendp_to_full_precision() -> None:
    # OpenDP make_zCDP_to_approxDP(...).map(1).epsilon(1e-6) = 5.22153444453017 (accounting.md 1.2)
    eps = zcdp_to_approx_dp(0.5, 1e-6)
    assert eps == pytest.approx(5.22153444453017, abs=1e-9)
    assert cks_delta(0.5, eps) <= 1e-6
    assert cks_delta(0.5, 5.22153444453017) == pytest.approx(1e-6, rel=1e-8)


def test_exact_gaussian_golden_mu_one() -> None:
    assert gaussian_dp_epsilon(1.0, 1e-6) == pytest.approx(4.886554, abs=TOL)
    assert gaussian_dp_delta(1.0, 4.886554) == pytest.approx(1e-6, rel=1e-5)


def test_rho_zero_gives_epsilon_zero() -> None:
    assert zcdp_to_approx_dp(0.0, 1e-6) == 0.0
    assert bun_steinke_epsilon(0.0, 1e-6) == 0.0
    assert cks_delta(0.0, 0.0) == 0.0
    assert all(c.epsilon == 0.0 for c in Cost.zero().epsilon_at(1e-6))


# ---------------------------------------------------------------------------------------------- 1.3


def test_approx_dp_to_approx_zcdp() -> None:
    assert approx_dp_to_approx_zcdp("1", "1e-6") == ApproxZCDP(Fraction(1, 2), Fraction(1, 10**6))
    c = Cost.approx_dp(Fraction(1), Fraction(1, 10**6))
    assert (c.rho, c.delta0, c.pure_eps, c.gdp_mu2) == (Fraction(1, 2), Fraction(1, 10**6), None, None)


def test_approx_zcdp_conversion_subtracts_delta0() -> None:
    assert approx_zcdp_to_approx_dp(0.5, 1e-6, 2e-6) == pytest.approx(5.221534, abs=TOL)
    assert approx_zcdp_to_approx_dp(0.5, 0.0, 1e-6) == zcdp_to_approx_dp(0.5, 1e-6)
    with pytest.raises(ValueError, match="delta0"):
        approx_zcdp_to_approx_dp(0.5, 1e-6, 1e-6)
    c = Cost.approx_zcdp(Fraction(1, 2), Fraction(1, 10**6))
    with pytest.raises(ValueError, match=r"1e-06"):
        c.epsilon_at(1e-6)
    rules = {conv.rule: conv for conv in c.epsilon_at(2e-6)}
    assert set(rules) == {"zCDP -> (eps,delta) by CKS"}
    assert rules["zCDP -> (eps,delta) by CKS"].epsilon == pytest.approx(5.221534, abs=TOL)


def test_meiser_pure_to_approx_dp() -> None:
    assert pure_to_approx_dp(1.0, 0.0) == 1.0
    expected = math.log(math.e - 1e-3)
    got = pure_to_approx_dp(1.0, 1e-3)
    assert expected <= got <= expected + 1e-9
    assert pure_to_approx_dp(0.0, 0.5) == 0.0


# ---------------------------------------------------------------------------------------------- 1.4


def test_gaussian_composition_goldens() -> None:
    # 10 x Gaussian(sigma=5) at delta = 1e-6: exact 2.921601, zCDP -> CKS 3.131056
    convs = {c.rule: c for c in Cost.gaussian(Fraction(1), Fraction(5)).scaled(10).epsilon_at(1e-6)}
    assert convs["exact Gaussian-DP"].epsilon == pytest.approx(2.921601, abs=TOL)
    assert convs["exact Gaussian-DP"].tightest
    assert convs["zCDP -> (eps,delta) by CKS"].epsilon == pytest.approx(3.131056, abs=TOL)


@pytest.mark.parametrize(("k", "basic", "drv", "cks"), [(10, 1.0, 1.767, 1.4716), (100, 10.0, 6.308, 5.2215)])
def test_laplace_composition_goldens(k: int, basic: float, drv: float, cks: float) -> None:
    convs = {c.rule: c for c in Cost.pure(Fraction(1, 10)).scaled(k).epsilon_at(1e-6)}
    assert convs["basic composition (pure)"].epsilon == pytest.approx(basic, abs=TOL)
    assert convs["basic composition (pure)"].delta == 0.0
    assert convs["advanced composition (DRV)"].epsilon == pytest.approx(drv, abs=5e-4)
    assert convs["zCDP -> (eps,delta) by CKS"].epsilon == pytest.approx(cks, abs=5e-5)
    assert advanced_composition(0.1, k, 1e-6) == pytest.approx(drv, abs=5e-4)
    tightest = [c for c in convs.values() if c.tightest]
    assert len(tightest) == 1
    # the worst-case pure-DP PLD (randomized response, Kairouz-Oh-Viswanath 2015) is the tightest: at k = 10 the
    # exact epsilon of 10-fold RR(0.1) is 1 + ln(1 - delta / P[L = 1]) (only the top atom exceeds it)
    assert tightest[0].rule == PLD_RULE
    if k == 10:
        top = (math.exp(0.1) / (1 + math.exp(0.1))) ** 10
        exact_rr = 1 + math.log(1 - 1e-6 / top)
        assert exact_rr <= convs[PLD_RULE].epsilon <= exact_rr + 1e-6  # delta reserve: pld.DELTA_NUMERICAL_RESERVE


def test_advanced_composition_formula() -> None:
    k, e0, dp = 50, 0.2, 1e-7
    expected = math.sqrt(2 * k * math.log(1 / dp)) * e0 + k * e0 * (math.exp(e0) - 1)
    got = advanced_composition(e0, k, dp)
    assert expected <= got <= expected * (1 + 1e-10)
    assert advanced_composition(0.0, 5, 1e-6) == 0.0
    assert advanced_composition(0.3, 0, 1e-6) == 0.0


# ---------------------------------------------------------------------------------------------- 1.5


def test_parallel_composition_rules() -> None:
    a, b, c = (Cost.pure(Fraction(e)) for e in (1, 2, 3))
    add_remove = Cost.parallel([a, b, c], "add_remove")
    replace = Cost.parallel([a, b, c], "replace")
    assert (add_remove.pure_eps, add_remove.rho) == (Fraction(3), Fraction(9, 2))
    assert (replace.pure_eps, replace.rho) == (Fraction(5), Fraction(13, 2))
    assert (add_remove.pure_count, replace.pure_count, replace.pure_max) == (1, 2, Fraction(3))
    g = Cost.gaussian(Fraction(1), Fraction(2))
    assert Cost.parallel([g, a], "add_remove").gdp_mu2 is None
    assert Cost.parallel([g, g], "replace").gdp_mu2 == Fraction(1, 2)
    assert Cost.parallel([], "replace") == Cost.zero()
    with pytest.raises(ValueError):
        Cost.parallel([a], "bounded")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------- 1.6


@pytest.mark.parametrize(
    ("eps", "delta", "sigma"),
    [(1.0, 1e-5, 3.730632), (0.5, 1e-5, 7.031827), (1.0, 1e-6, 4.224679), (2.0, 1e-6, 2.230476)],
)
def test_analytic_gaussian_goldens(eps: float, delta: float, sigma: float) -> None:
    got = analytic_gaussian_sigma(eps, delta, 1.0)
    assert got == pytest.approx(sigma, abs=TOL)
    assert gaussian_dp_delta(1.0 / got, eps) <= delta
    assert 1.0 / gdp_mu_for_approx_dp(eps, delta) == pytest.approx(sigma, abs=TOL)
    assert analytic_gaussian_sigma(eps, delta, 3.0) == pytest.approx(3.0 * sigma, abs=3 * TOL)


def test_classical_gaussian_formula_and_waste() -> None:
    sigma = classical_gaussian_sigma(0.5, 1e-5, 2.0)
    expected = 2.0 * math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.5
    assert expected <= sigma <= expected * (1 + 1e-10)
    # the classical formula wastes noise compared with the analytic calibration
    assert analytic_gaussian_sigma(0.5, 1e-5, 2.0) < sigma


@pytest.mark.parametrize("eps", [1.0, 2.0, 8.5])
def test_classical_gaussian_raises_at_large_epsilon(eps: float) -> None:
    with pytest.raises(ValueError, match="analytic"):
        classical_gaussian_sigma(eps, 1e-5, 1.0)


def test_classical_gaussian_is_invalid_at_eps_8_5_regression() -> None:
    # accounting.md 1.6: at delta = 1e-5 the classical formula first fails at eps ~ 8.5 (true delta 1.044e-5)
    eps, delta = 8.5, 1e-5
    sigma = math.sqrt(2 * math.log(1.25 / delta)) / eps
    # independent analytic check (Balle-Wang Thm 8), plain scipy
    true_delta = stats.norm.cdf(1 / (2 * sigma) - eps * sigma) - math.exp(eps) * stats.norm.cdf(
        -1 / (2 * sigma) - eps * sigma
    )
    assert true_delta > delta
    assert true_delta == pytest.approx(1.044e-5, rel=1e-3)
    assert gaussian_dp_delta(1 / sigma, eps) >= true_delta
    assert analytic_gaussian_sigma(eps, delta) > sigma


def test_laplace_calibration() -> None:
    b = laplace_scale(1.0, 0.1)
    assert b == pytest.approx(10.0, rel=1e-9)
    assert pure_dp_of_laplace(1.0, b) <= Fraction(0.1)
    assert pure_dp_of_laplace(2, 4) == Fraction(1, 2)
    assert laplace_scale(0, 1.0) == 0.0


def test_zcdp_gaussian_calibration() -> None:
    sigma = gaussian_sigma_for_zcdp(1.0, Fraction(1, 2))
    assert sigma == pytest.approx(1.0, rel=1e-9)
    assert zcdp_of_gaussian(1.0, sigma) <= Fraction(1, 2)
    assert zcdp_of_gaussian(3, 2) == Fraction(9, 8)


def test_budget_inversions() -> None:
    rho = zcdp_rho_for_approx_dp(5.221535, 1e-6)
    assert float(rho) == pytest.approx(0.5, abs=1e-5)
    assert zcdp_to_approx_dp(rho, 1e-6) <= 5.221535
    e0 = pure_eps_for_approx_dp_advanced(6.308, 1e-6, 100)
    assert e0 == pytest.approx(0.1, abs=1e-4)
    assert advanced_composition(e0, 100, 1e-6) <= 6.308


def test_group_privacy() -> None:
    assert Cost.pure(Fraction(1)).group(3).pure_eps == Fraction(3)
    assert Cost.zcdp(Fraction(1, 2)).group(2).rho == Fraction(2)
    assert Cost.gaussian(Fraction(1), Fraction(4)).group(2).gdp_mu2 == Fraction(1, 4)
    with pytest.raises(ValueError, match="delta0"):
        Cost.approx_zcdp(Fraction(1), Fraction(1, 10**6)).group(2)


# ---------------------------------------------------------------------------------------------- measures


def test_measures_exact_and_validated() -> None:
    assert exact("0.1") == Fraction(1, 10)
    assert exact(0.1) == Fraction(0.1) != Fraction(1, 10)
    for bad in (float("nan"), float("inf"), -1, "nan", "-0.5"):
        with pytest.raises(ValueError):
            exact(bad)
    with pytest.raises(ValueError):
        ApproxDP(1, 1)
    assert ZCDP("0.5").describe() == "rho=0.5 zCDP"
    assert PureDP(2).describe() == "epsilon=2 pure DP"
    assert Cost.pure(Fraction(1)).total_measure() == PureDP(1)
    assert Cost.zcdp(Fraction(1)).total_measure() == ZCDP(1)
    assert Cost.approx_dp(Fraction(1), Fraction(1, 10)).total_measure() == ApproxZCDP(Fraction(1, 2), "0.1")
