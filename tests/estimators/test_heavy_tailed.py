"""Heavy-tailed covariance and mean (Kamath-Mouzakis, sparse_discrete_heavy.md 5.2): the pinned truncation
sensitivities, the confidence-ellipsoid update, accuracy on multivariate t data against the non-private
baseline, hostile data and refusals."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import dpflow as dp
from dpflow.errors import BudgetError, DomainError, PlanTypeError
from dpflow.estimators import heavy_tailed as H


def mvt(rng: np.random.Generator, n: int, nu: float, scales: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """Multivariate t rows with covariance ``Q diag(scales^2) Q^T`` (one chi-square scale per row)."""
    w = np.sqrt(nu / rng.chisquare(nu, size=n))[:, None] * math.sqrt((nu - 2) / nu)
    return ((rng.normal(size=(n, len(scales))) * scales) * w) @ Q.T


def test_kurtosis_default_is_documented() -> None:
    assert H.KURTOSIS == 9.0 == 3 * (5 - 2) / (5 - 4)  # a t with 5 degrees of freedom


def test_naive_htpce_sensitivity_is_sqrt2_gamma2_over_m() -> None:
    d, n, rho = 4, 10000, 0.5
    plan = H.naive_covariance(d, n, dp.ZCDP(rho), K=4.0)
    g2 = H.final_radius2(d, n // 2, rho, H.KURTOSIS)
    assert g2 == max(4.0, math.sqrt(9.0 * 2.0 * 5000 * math.sqrt(0.5) / 2.0))
    entry = [e for e in plan.check().entries if e.kind == "SecondMoment"][0]
    assert f"l2 {math.sqrt(2) * g2 / 5000:.6g}" in entry.sensitivity


def test_one_step_update_is_a_confidence_ellipsoid() -> None:
    """If ||M - Sigma_W|| <= s then L' <= A' Sigma A'^T <= I (slides 004 Alg. 2), here with the worst
    errors +-s along the eigenvectors; and the floor lambda_min(L) grows."""
    rng = np.random.default_rng(0)
    d, u = 4, 1000.0
    Q = np.linalg.qr(rng.normal(size=(d, d)))[0]
    Sigma = (Q * np.array([1.0, 0.3, 0.01, 1.0 / u])) @ Q.T  # I/u <= Sigma <= I
    state = np.stack([np.eye(d), np.eye(d) / u])
    args = (1.0, 1e3, 10**9, 3.0, 0.1)  # sigma_unit, gamma2, n, kurtosis, beta
    s = H.spectral_error(1e3, 1.0, 10**9, d, 3.0, 0.1)
    assert 0.0 < s < 0.1
    for sign in (-1.0, 1.0, 0.0):
        E = sign * s * np.eye(d) if sign else (Q * (s * rng.uniform(-1, 1, d))) @ Q.T
        new = H.one_step_update(state, Sigma + E, *args)
        A, L = new[0], new[1]
        C = A @ Sigma @ A.T
        assert np.linalg.eigvalsh(np.eye(d) - C).min() >= -1e-12
        assert np.linalg.eigvalsh(C - L).min() >= -1e-12
        assert np.linalg.eigvalsh(L).min() > 2.0 / u
    # too large an error bound: no interval, the state is kept
    kept = H.one_step_update(state, Sigma, 1e6, 1e3, 10**3, 3.0, 0.1)
    assert np.array_equal(kept, state)


def test_plan_rounds_pins() -> None:
    assert H.plan_rounds(4.0, 10**6, 5, 0.5, 9.0) == (0, 0.0, 0.0)
    t, g2, s = H.plan_rounds(1e4, 10**6, 5, 0.25, 9.0)
    assert s < 0.5 and (1 / (2 * s)) ** t >= 1e4 / 4
    assert (g2, s) == H.best_radius2(10**6, 5, 0.25 / t, 9.0, H.BETA / t)
    assert H.plan_rounds(1e4, 1000, 5, 0.25, 9.0)[0] == 0
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        H.covariance(5, 2000, dp.ZCDP(0.1), K=1e4, error_bound="high_probability")
    assert any("too few" in str(x.message) for x in w)


@pytest.mark.parametrize("nu", [3.0, 5.0, 10.0])
def test_ht_pce_on_multivariate_t_against_the_non_private_error(nu: float) -> None:
    rng = np.random.default_rng(1)
    d, n = 5, 60000
    Q = np.linalg.qr(rng.normal(size=(d, d)))[0]
    scales = np.logspace(0, 1, d)
    X = mvt(rng, n, nu, scales, Q) + 50.0
    W = (Q / scales) @ Q.T
    Zp = (X[0::2] - X[1::2]) / math.sqrt(2)
    base = float(np.linalg.norm(W @ (Zp.T @ Zp / len(Zp)) @ W.T - np.eye(d), 2))
    f = H.fit(X, budget=dp.ZCDP(1.0), mean_bound=200.0, cov_bound=200.0, lower=0.5, noise=dp.SeededNoise(2))
    err = float(np.linalg.norm(W @ f.covariance @ W.T - np.eye(d), 2))
    assert err < base + 0.25, (err, base)
    assert np.linalg.norm(W @ (f.mean - 50.0)) < 0.1


@pytest.mark.parametrize("kind", ["all_equal", "nan", "huge", "inf_mixed"])
def test_heavy_tailed_fit_never_raises_on_hostile_data(kind: str) -> None:
    n, d = 2000, 3
    rng = np.random.default_rng(0)
    X = {"all_equal": np.full((n, d), 7.0), "nan": np.full((n, d), np.nan), "huge": np.full((n, d), 1e300),
         "inf_mixed": np.where(rng.random((n, d)) < 0.2, -np.inf, rng.normal(size=(n, d)) * 1e300)}[kind]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = H.fit(X, budget=dp.ZCDP(1.0), mean_bound=10.0, cov_bound=100.0, noise=dp.SeededNoise(0))
    assert f.mean.shape == (d,) and f.covariance.shape == (d, d)
    assert np.all(np.isfinite(f.covariance))


def test_refusals_name_the_problem() -> None:
    with pytest.raises(DomainError, match="kurtosis"):
        H.covariance(3, 1000, dp.ZCDP(1), K=10.0, kurtosis=0.5)
    with pytest.raises(DomainError, match="lower"):
        H.covariance(3, 1000, dp.ZCDP(1), K=1.0, lower=2.0)
    with pytest.raises(DomainError, match="error_bound"):
        H.covariance(3, 1000, dp.ZCDP(1), K=10.0, error_bound="loose")  # type: ignore[arg-type]
    with pytest.raises((PlanTypeError, BudgetError)):
        H.mean(3, 1000, dp.PureDP(1), R=1.0, K=1.0)
    with pytest.raises(DomainError):
        H.fit(np.zeros((0, 3)), budget=dp.ZCDP(1), mean_bound=1.0, cov_bound=1.0)
    with pytest.raises(DomainError, match="shape"):
        H.fit(np.zeros(5), budget=dp.ZCDP(1), mean_bound=1.0, cov_bound=1.0)


def test_plans_spend_the_budget_exactly() -> None:
    for p in (H.covariance(3, 5000, dp.ZCDP(0.5), K=1e3), H.mean(3, 5000, dp.ZCDP(0.5), R=1.0, K=1.0),
              H.one_step(3, 5000, dp.ZCDP(0.5), u=10.0), H.plan(3, 5000, dp.ZCDP(0.5), R=1.0, K=10.0)):
        assert p.check().totals[0].rho == 0.5
