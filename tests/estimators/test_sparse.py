"""Sparse mean (CWZ 2021 Alg. 3.3): accuracy against the Peel noise scale, support recovery, the
data-driven radius, bad input and the non-finite-data policy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpflow as dp
from dpflow.estimators.sparse import sparse_mean


def _data(n: int, d: int, s: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    mu = np.zeros(d)
    mu[:s] = 1.0
    return np.random.default_rng(seed).normal(size=(n, d)) + mu, mu


def test_sparse_mean_recovers_the_support_and_errs_by_the_peel_noise() -> None:
    n, d, s, rho = 20_000, 200, 5, 0.5
    X, mu = _data(n, d, s, 1)
    R = 1 + math.sqrt(2 * math.log(n))
    res = sparse_mean(d, n, s, dp.ZCDP(rho), radius=R).run({"X": X}, noise=dp.SeededNoise(2))
    est = res.released["mean"]
    assert set(np.flatnonzero(est)) == set(range(s))
    (fact,) = next(v for k, v in res.report.execution.facts.items() if k.startswith("peel"))
    lam = 2 * R / n                                                   # CWZ: ||m(Z) - m(Z')||_inf <= 2R/n
    b = lam / math.sqrt(2 * rho / (5 * s))                            # zCDP: (5/2) s (lambda/b)^2 = rho
    assert math.isclose(fact["scale"], b, rel_tol=1e-6) and fact["scale"] >= b * (1 - 1e-12)
    # Laplace(b) on s coordinates (tail: P(|L| > 12 b) < 1e-5) plus sampling error 5/sqrt(n) each
    assert np.all(np.abs(est[:s] - mu[:s]) <= 12 * b + 5 / math.sqrt(n))


def test_data_driven_radius_is_close_to_the_oracle() -> None:
    n, d, s = 10_000, 100, 5
    X, mu = _data(n, d, s, 3)
    res = sparse_mean(d, n, s, dp.ApproxDP(1.0, n**-1.1)).run({"X": X}, noise=dp.SeededNoise(4))
    R = res.released["radius"]
    oracle = 1 + math.sqrt(2 * math.log(n))
    assert 0.8 * oracle <= R <= 1.2 * oracle                          # 95 of 100 coordinates are N(0, 1)
    assert np.linalg.norm(res.released["mean"] - mu) <= 0.2
    kinds = [e.kind for e in res.report.ledger.entries if e.cost]
    assert kinds == ["LaplaceMech", "Quantile", "Peel"]


def test_sparse_mean_paper_accounting() -> None:
    n, d, s = 5000, 50, 3
    plan = sparse_mean(d, n, s, dp.ApproxDP(0.5, n**-1.1), radius=4.0, accounting="basic")
    tot = plan.check().totals[0]
    assert tot.budget_used == "100%"
    assert any(c.rule.startswith("basic composition") for c in tot.conversions)


def test_bad_input_is_refused_before_data() -> None:
    with pytest.raises(ValueError, match="s <= d"):
        sparse_mean(10, 100, 11, dp.ZCDP(0.5))
    with pytest.raises(ValueError, match="radius"):
        sparse_mean(10, 100, 2, dp.ZCDP(0.5), radius=float("nan"))
    with pytest.raises(dp.PlanTypeError, match="budget"):
        sparse_mean(10, 100, 2, dp.PureDP(1.0))
    plan = sparse_mean(10, 100, 2, dp.ZCDP(0.5), radius=2.0)
    with pytest.raises(dp.DataError):
        plan.run({"X": np.zeros((100, 9))}, noise=dp.SeededNoise(0))


@pytest.mark.parametrize("truncation", ["percentile", "magnitude"])
def test_non_finite_rows_follow_the_declared_policy(truncation: str) -> None:
    n, d, s = 400, 20, 2
    X, _ = _data(n, d, s, 5)
    X[::7, 3] = np.nan
    X[::11] = np.inf
    X[5] = -1e308
    out = sparse_mean(d, n, s, dp.ZCDP(0.5), truncation=truncation).run({"X": X}, noise=dp.SeededNoise(6)).released
    assert np.all(np.isfinite(out["mean"])) and np.all(np.isfinite(out["radius"]))
