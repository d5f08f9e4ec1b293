"""The first estimators: accuracy against thresholds computed from their guarantees."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import dpflow as dp
from dpflow import estimators as E
from dpflow.estimators import chi_radius, clipped_mean, discrete, gaussian, naive_pce, product, truncation
from dpflow.privacy import analytic_gaussian_sigma


def test_chi_radius_golden() -> None:
    assert abs(chi_radius(50, 0.01) - 9.4636) < 1e-4
    assert abs(chi_radius(10, 0.1) - 4.9196) < 1e-4


def test_clipped_mean_zcdp_error_within_noise_and_sampling_bounds() -> None:
    d, n, rho = 5, 20_000, 0.5
    rng = np.random.default_rng(1)
    mu = rng.uniform(-1, 1, size=d)
    X = rng.normal(size=(n, d)) + mu
    res = clipped_mean(d=d, n=n, budget=dp.ZCDP(rho), mean_bound=1.0).run({"X": X}, noise=dp.SeededNoise(2))
    R = 1.0 + math.sqrt(2 * math.log(n))
    sigma = 2 * R * math.sqrt(d) / n / math.sqrt(2 * rho)          # CWZ Alg. 3.1, Bun-Steinke Prop 1.6
    (fact,) = res.report.execution.facts["gaussian_mech_3"]
    assert math.isclose(fact["sigma"], sigma, rel_tol=1e-9) and fact["sigma"] >= sigma
    err = np.abs(res.released["mean"] - mu)
    assert np.all(err <= 5 * sigma + 5 / math.sqrt(n))
    assert np.abs(res.released["mean"] - X.mean(axis=0)).max() <= 5 * sigma + 1e-9


def test_clipped_mean_approx_dp_uses_the_analytic_gaussian() -> None:
    d, n = 4, 10_000
    plan = clipped_mean(d=d, n=n, budget=dp.ApproxDP(1.0, 1e-6), radius=3.0)
    ledger = plan.check(exact_noise=False)  # the continuous noise of SeededNoise; SecureNoise declines GDP
    best = ledger.totals[0].tightest()
    assert best.rule == "exact Gaussian-DP" and 0.999 <= best.epsilon <= 1.0
    X = np.random.default_rng(3).normal(size=(n, d))
    res = plan.run({"X": X}, noise=dp.SeededNoise(4))
    delta2 = 2 * 3.0 * math.sqrt(d) / n
    (fact,) = res.report.execution.facts["gaussian_mech_3"]
    # an all-Gaussian plan calibrated by the exact GDP profile is the analytic Gaussian (Balle-Wang)
    assert math.isclose(fact["sigma"], analytic_gaussian_sigma(1.0, 1e-6, delta2), rel_tol=1e-6)
    # and it beats the classical formula, which is not even valid at eps = 1
    assert fact["sigma"] < delta2 * math.sqrt(2 * math.log(1.25 / 1e-6))


def test_naive_pce_error_is_the_noise_only() -> None:
    d, n, rho, kappa = 3, 50_000, 0.5, 4.0
    rng = np.random.default_rng(5)
    Sigma = np.diag([1.0, 2.0, 3.0])
    X = rng.multivariate_normal(np.full(d, 5.0), Sigma, size=n)
    res = naive_pce(d=d, n=n, budget=dp.ZCDP(rho), kappa=kappa).run({"X": X}, noise=dp.SeededNoise(6))
    m = n // 2
    pairs = (X[0:2 * m:2] - X[1:2 * m:2]) / math.sqrt(2)
    T = kappa * chi_radius(d, 0.1 / m) ** 2
    assert np.all(np.sum(pairs**2, axis=1) <= T)              # no row was clipped at this seed
    S = pairs.T @ pairs / m                                    # the non-private estimate on the same pairs
    sigma = math.sqrt(2) * T / m / math.sqrt(2 * rho)          # KLSU Alg. 1 Frobenius sensitivity
    est = res.released["covariance"]
    assert np.all(np.linalg.eigvalsh(est) >= -1e-12)           # PSD projection
    # the PSD projection is a projection onto a convex set containing S: it can only get closer
    assert np.linalg.norm(est - S) <= 5 * sigma * d
    assert np.linalg.norm(est - Sigma) <= 5 * sigma * d + 6 * np.linalg.norm(Sigma) * math.sqrt(2 / m)


def test_naive_pce_known_mean_uses_all_rows() -> None:
    ledger = naive_pce(d=2, n=1000, budget=dp.ZCDP(0.5), kappa=1.0, unknown_mean=False).check()
    mech = next(e for e in ledger.entries if e.kind == "GaussianMech")
    T = chi_radius(2, 0.1 / 1000) ** 2
    assert f"{math.sqrt(2) * T / 1000:.6g}" in mech.sensitivity


ESTIMATOR_CALLS = {
    "clipped_mean": lambda b: E.clipped_mean(d=2, n=100, budget=b, radius=1.0),
    "naive_pce": lambda b: E.naive_pce(d=2, n=100, budget=b, kappa=2.0),
    "gaussian.mean": lambda b: gaussian.mean(d=2, n=100, budget=b, R=1.0),
    "gaussian.fit": lambda b: gaussian.fit(np.zeros((100, 2)), budget=b, mean_bound=1.0, cov_bound=2.0),
    "laplace_histogram": lambda b: discrete.laplace_histogram(8, 100, b),
    "merr": lambda b: discrete.merr(N=64, n=100, budget=b),
    "sparse_mean": lambda b: E.sparse_mean(d=5, n=100, s=2, budget=b, radius=1.0),
    "naive_product": lambda b: product.naive_product(d=5, n=100, budget=b),
    "LinearRegression": lambda b: E.LinearRegression(budget=b).fit(np.zeros((100, 2)), np.zeros(100)),
    "truncated_mean": lambda b: truncation.truncated_mean(d=2, n=100, budget=b, radius=1.0),
}


@pytest.mark.parametrize("name", sorted(ESTIMATOR_CALLS))
def test_every_estimator_refuses_a_bare_number_budget_naming_the_fix(name: str) -> None:
    with pytest.raises(dp.PlanTypeError, match=r"not a privacy measure") as e:
        ESTIMATOR_CALLS[name](0.5)
    assert "dp.ZCDP(0.5)" in e.value.fix


_I = np.int64
_NUMPY_INT_PLANS = {
    "clipped_mean": lambda: clipped_mean(d=_I(3), n=_I(20_000), budget=dp.ZCDP(0.5), radius=1.0),
    "naive_pce": lambda: naive_pce(d=_I(3), n=_I(20_000), budget=dp.ZCDP(0.5), kappa=4.0),
    "sparse_mean": lambda: E.sparse_mean(d=_I(100), n=_I(20_000), s=_I(5), budget=dp.ZCDP(0.5)),
    "gaussian": lambda: gaussian.gaussian(d=_I(3), n=_I(20_000), budget=dp.ZCDP(0.5), R=10.0, K=10.0, t_cov=_I(3),
                                          t_mean=_I(2)),
    "gaussian.mean kv": lambda: gaussian.mean(d=_I(3), n=_I(20_000), budget=dp.ZCDP(0.5), R=10.0, method="kv"),
    "scaled_gaussian": lambda: gaussian.scaled_gaussian(d=_I(3), n=_I(20_000), budget=dp.ZCDP(0.5)),
    "heavy_tailed": lambda: E.heavy_tailed.plan(_I(3), _I(20_000), dp.ZCDP(1.0), 10.0, 10.0),
    "ppde": lambda: product.ppde(d=_I(5), n=_I(20_000), budget=dp.ZCDP(0.5), rounds=_I(2)),
    "laplace_histogram": lambda: discrete.laplace_histogram(_I(16), _I(20_000), dp.PureDP(1.0)),
    "merr": lambda: discrete.merr(_I(2**20), _I(20_000), dp.ZCDP(1.0), T=_I(5)),
    "truncated_mean": lambda: truncation.truncated_mean(d=_I(3), n=_I(20_000), budget=dp.ZCDP(0.5)),
    "LinearRegression niht": lambda: E.LinearRegression(budget=dp.ZCDP(1.0), sparsity=_I(2), x_bound=1.0,
                                                        coef_bound=2.0).make_plan(_I(5), _I(2000)),
    "mixture": lambda: E.mixtures.gaussian_mixture_plan(d=_I(2), n=_I(20_000), k=_I(2), budget=dp.ApproxDP(1.0, 1e-6),
                                                        radius=10.0, sigma_range=(0.5, 2.0)),
}


@pytest.mark.parametrize("name", sorted(_NUMPY_INT_PLANS))
def test_estimators_take_numpy_integers(name: str) -> None:
    """``n=np.int64(...)`` (e.g. ``X.shape[0]`` of a numpy computation) and the other integer arguments were
    refused when the plan was hashed ("cannot encode a int64"), or failed (``bit_length``) (issue 28)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.errors.AccuracyWarning)
        plan = _NUMPY_INT_PLANS[name]()
    assert dp.Plan.from_json(plan.to_json()).hash == plan.hash


def test_every_estimator_module_is_reachable_after_import_dpflow() -> None:
    """``dp.estimators.mixtures`` raised AttributeError after ``import dpflow`` (issue 28): every module of the
    package is an attribute of it, as the README's table names them."""
    import pkgutil

    names = {m.name for m in pkgutil.iter_modules(E.__path__)}
    assert names >= {"mixtures", "gaussian", "heavy_tailed", "discrete", "product", "regression", "truncation"}
    assert [n for n in sorted(names) if not hasattr(E, n)] == []
    assert names <= set(E.__all__)
