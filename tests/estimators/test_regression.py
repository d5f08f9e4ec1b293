"""LinearRegression (SSP default, noisy GD, NIHT): accuracy against thresholds derived from the noise
the run certified and from the non-private baselines, bad input, and the non-finite-data policy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpflow as dp
from dpflow.estimators.regression import LinearRegression
from dpflow.nodes.transforms import project_ball


def _data(n: int, d: int, s: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    beta = np.zeros(d)
    beta[:s] = 1 / math.sqrt(s)
    X = rng.uniform(-math.sqrt(3), math.sqrt(3), size=(n, d))
    return X, X @ beta + rng.normal(size=n), beta


def test_ssp_is_within_the_perturbation_bound_of_its_clipped_ridge_baseline() -> None:
    n, d = 20_000, 3
    X, y, beta = _data(n, d, d, 1)
    # the unscaled SSP (one radius for [x, 1, y]); the scale step's plan is tested in test_scale_free.py
    model = LinearRegression(budget=dp.ZCDP(0.5), standardize=False, noise=dp.SeededNoise(2)).fit(X, y)
    ex = model.report_.execution
    sigma = next(v for k, v in ex.facts.items() if k.startswith("gaussian"))[0]["sigma"]
    r = ex.released["radius"] if "radius" in ex.released else model.report_.released["radius"]
    Z = project_ball(np.hstack([X, np.ones((n, 1)), y[:, None]]), None, r)
    M = Z.T @ Z / n
    p = d + 1
    node = next(r_.node for r_ in model.plan_.records if r_.node.kind == "RidgeSolve")
    lam = node.ridge * sigma  # lambda = ridge sqrt(d + 1) sigma, sigma the Gaussian's certified per-entry noise
    A = M[:p, :p] + lam * np.eye(p)
    base = np.linalg.solve(A, M[:p, p])                              # same clip, same ridge, no noise
    E = 1.5 * sigma * (p + 1)                                        # ||E||_F <= 1.5 sigma (p+1) w.h.p.;
    bound = E * (1 + np.linalg.norm(base)) / (np.linalg.eigvalsh(A)[0] - E)   # PSD projection is 1-Lipschitz
    est = np.append(model.coef_, model.intercept_)
    assert np.linalg.norm(est - base) <= bound
    ols = np.linalg.lstsq(np.hstack([X, np.ones((n, 1))]), y, rcond=None)[0]
    assert np.linalg.norm(est - ols) <= 0.1 and abs(model.intercept_) <= 0.1
    assert np.allclose(model.predict(X[:3]), X[:3] @ model.coef_ + model.intercept_)


def test_noisy_gd_error_matches_its_noise_and_zcdp_beats_the_paper_accounting() -> None:
    n, d = 50_000, 5
    X, y, beta = _data(n, d, d, 3)
    errs = {}
    for acc in ("zcdp", "paper"):
        model = LinearRegression(budget=dp.ApproxDP(1.0, n**-1.1), method="gd", accounting=acc, x_bound=math.sqrt(3),
                                 coef_bound=2.0, response_bound=math.sqrt(2) * math.sqrt(2 * math.log(n)),
                                 fit_intercept=False, noise=dp.SeededNoise(4)).fit(X, y)
        facts = [v for k, v in model.report_.execution.facts.items() if "gaussian" in k][0]
        sigma = facts[0]["sigma"]
        T = len(facts)
        assert T == math.ceil(math.log(n))                           # one Gaussian release per iteration
        # each step adds N(0, sigma^2 I_d), then a non-expansive projection; the contraction of GD with
        # eta = 0.5 on an isotropic design (||I - eta Sigma|| = 0.5) keeps the accumulated noise below
        # sigma sqrt(d) / (1 - 0.5) plus the optimisation error 0.5^T ||beta|| and the OLS error
        errs[acc] = float(np.linalg.norm(model.coef_ - beta))
        assert errs[acc] <= 3 * sigma * math.sqrt(d) / 0.5 + 0.5**T + 0.05
        assert model.report_.ledger.allocation.startswith("basic" if acc == "paper" else "all mechanisms Gaussian")
    assert errs["zcdp"] < errs["paper"]


def test_niht_recovers_the_support_at_large_n() -> None:
    n, d, s = 40_000, 50, 2
    X, y, beta = _data(n, d, s, 5)
    model = LinearRegression(budget=dp.ZCDP(2.0), sparsity=s, x_bound=math.sqrt(3), coef_bound=2.0,
                             fit_intercept=False, noise=dp.SeededNoise(6)).fit(X, y)
    assert set(np.flatnonzero(model.coef_)) == set(range(s))
    iht = np.zeros(d)                                                  # non-private IHT, same schedule
    for _ in range(math.ceil(math.log(n))):
        g = X.T @ (X @ iht - y) / n
        v = iht - 0.5 * g
        keep = np.argsort(-np.abs(v))[:s]
        iht = np.zeros(d)
        iht[keep] = v[keep]
    b = max(f[0]["scale"] for k, f in model.report_.execution.facts.items() if "peel" in k)
    # Peel releases s coordinates with Laplace(b) (tail 12 b with prob > 1 - 1e-5 each), every iteration
    assert np.linalg.norm(model.coef_ - iht) <= 2 * 12 * b * math.sqrt(s) + 0.05


def test_bad_input_raises_before_any_data_is_used() -> None:
    X, y, _ = _data(100, 4, 2, 7)
    m = LinearRegression(budget=dp.ZCDP(0.5), noise=dp.SeededNoise(0))
    with pytest.raises(ValueError, match="shape"):
        m.fit(X, y[:-1])
    with pytest.raises(ValueError, match="2-d"):
        m.fit(X[:, 0], y)
    with pytest.raises(ValueError, match="exceeds"):
        LinearRegression(budget=dp.ZCDP(0.5), sparsity=5, x_bound=1.0, coef_bound=1.0).fit(X, y)
    with pytest.raises(ValueError, match="x_bound"):
        LinearRegression(budget=dp.ZCDP(0.5), method="gd", x_bound=float("inf"), coef_bound=1.0).fit(X, y)
    with pytest.raises(ValueError, match="ApproxDP"):
        LinearRegression(budget=dp.ZCDP(0.5), accounting="paper").make_plan(4, 100)
    with pytest.raises(dp.errors.ParameterError, match="method='lasso' is not one of"):
        LinearRegression(budget=dp.ZCDP(0.5), method="lasso").fit(X, y)
    with pytest.raises(ValueError, match="fit"):
        m.predict(X)


@pytest.mark.parametrize("method", ["ssp", "gd", "niht"])
def test_non_finite_data_follows_the_declared_policy(method: str) -> None:
    X, y, _ = _data(500, 4, 2, 8)
    X[::5, 1] = np.nan
    X[3] = np.inf
    y[::7] = -np.inf
    y[2] = np.nan
    m = LinearRegression(budget=dp.ZCDP(0.5), method=method, sparsity=2 if method == "niht" else None,
                         x_bound=2.0, coef_bound=2.0, noise=dp.SeededNoise(1)).fit(X, y)
    assert m.coef_ is not None and np.all(np.isfinite(m.coef_)) and math.isfinite(m.intercept_)


@pytest.mark.parametrize("method", ["ssp", "gd", "niht"])
def test_a_missing_response_follows_the_features_policy_a_row_that_adds_nothing(method: str) -> None:
    """Issue 28 item 6: a row whose y (or any x) is not a finite number adds nothing, in every method (SSP clips it
    to the origin; the gradient step gives it a zero term); the old gradient step counted a missing y as 0 and
    kept its features.  Pinned by zero-noise runs: such rows release exactly what zero rows release."""
    from conftest import run_zero

    from dpflow.estimators.regression import niht, noisy_gd, sufficient_statistics
    from dpflow.planner.certify import certify

    n, d = 300, 3
    X, y, _ = _data(n, d, d, 4)
    Z = np.column_stack([X, y])
    plan = {"ssp": lambda: sufficient_statistics(d, n, dp.ZCDP(0.5), radius=3.0),
            "gd": lambda: noisy_gd(d, n, dp.ZCDP(0.5), x_bound=2.0, coef_bound=2.0, response_bound=3.0),
            "niht": lambda: niht(d, n, 2, dp.ZCDP(0.5), x_bound=2.0, coef_bound=2.0, response_bound=3.0)}[method]()
    cert = certify(plan)
    zero = Z.copy()
    zero[:30] = 0.0
    missing = Z.copy()
    missing[:10, d] = np.nan
    missing[10:20, d] = np.inf
    missing[20:30, 0] = np.nan
    want = run_zero(cert, {"Z": zero})["coef"]
    assert np.array_equal(run_zero(cert, {"Z": missing})["coef"], want)
    assert not np.array_equal(run_zero(cert, {"Z": Z})["coef"], want)  # the rows did count before


def test_fit_reads_a_response_with_missing_values_and_states_the_policy() -> None:
    X, y, _ = _data(400, 2, 2, 6)
    ys: list[object] = [float(v) for v in y]
    ys[:3] = [None, "n/a", " 1.5 "]  # a list of objects: converted by the table policy, never refused
    for method in ("ssp", "gd"):
        m = LinearRegression(budget=dp.ZCDP(0.5), method=method, standardize=False, x_bound=2.0, coef_bound=2.0,
                             noise=dp.SeededNoise(0)).fit(X, ys)
        assert m.coef_ is not None and np.isfinite(m.coef_).all()
        texts = [e.derivation for e in m.report_.ledger.entries]
        assert any("missing values: a row with a NaN or infinite entry" in t for t in texts), method
