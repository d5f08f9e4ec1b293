"""Product distributions: the truncated Boolean mean's sensitivity (public tau and released radius; random
and adversarial neighbours), PPDE's ledger (sequential composition on all rows), the TV error function,
and accuracy against the non-private baseline."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from conftest import bound_value, run_zero

import dpflow as dp
from dpflow import nodes as N
from dpflow.errors import DomainError
from dpflow.estimators.product import naive_product, ppde, product_tv
from dpflow.nodes.types import StatT
from dpflow.planner.certify import certify

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("tau", [None, 1, 3, 50])
def test_truncated_binary_mean_neighbours(tau: int | None) -> None:
    d, n = 8, 12
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.BooleanCube(d=d), n=n)
    mask = b.public([1, 1, 0, 1, 1, 1, 0, 1])
    flip = b.public([0, 1, 0, 0, 1, 0, 0, 0])
    q = N.TruncatedBinaryMean(tau=tau, mask=mask, flip=flip)(X)
    cert = certify(b.build(m=N.GaussianMech()(q)))
    st = cert.space.types[q.id]
    assert isinstance(st, StatT) and st.l2 is not None and st.l1 is not None and st.linf is not None
    t_eff = d if tau is None else min(tau, d)
    assert st.l2.coef == pytest.approx(math.sqrt(min(2 * t_eff, d)) / n)
    x = (RNG.random((n, d)) < 0.3).astype(float)
    base = run_zero(cert, {"X": x})["m"]
    t1 = min(t_eff + 1, d)  # rows on the truncation boundary and just past it
    specials = [np.ones(d), np.zeros(d), np.full(d, np.nan), np.full(d, np.inf), np.full(d, -np.inf),
                np.r_[np.ones(t_eff), np.zeros(d - t_eff)], np.r_[np.ones(t1), np.zeros(d - t1)],
                np.full(d, 1e30), np.full(d, 0.5)]
    for k in range(40):
        y = x.copy()
        y[int(RNG.integers(n))] = specials[k] if k < len(specials) else (RNG.random(d) < RNG.random()).astype(float)
        diff = run_zero(cert, {"X": y})["m"] - base
        assert np.abs(diff).sum() <= st.l1.coef * (1 + 1e-12)
        assert np.linalg.norm(diff) <= st.l2.coef * (1 + 1e-12)
        assert np.abs(diff).max() <= st.linf.coef * (1 + 1e-12)


@pytest.mark.parametrize("radius", [-1.0, 0.0, 1.0, 1.5, 2.0, 2.9, 3.0, 10.0])
def test_truncated_binary_mean_released_radius_neighbours(radius: float) -> None:
    d, n = 9, 12
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.BooleanCube(d=d), n=n)
    flip = b.public([0, 1, 0, 0, 1, 0, 0, 0, 1])
    rad = b.public(radius)
    q = N.TruncatedBinaryMean(radius=rad, flip=flip)(X)
    cert = certify(b.build(m=N.GaussianMech()(q)))
    st = cert.space.types[q.id]
    assert isinstance(st, StatT) and st.l2 is not None and st.l1 is not None and st.linf is not None
    env = {rad.id: radius}
    r = max(radius, 0.0)
    l2, l1, linf = bound_value(st.l2, env), bound_value(st.l1, env), bound_value(st.linf, env)
    assert l2 == pytest.approx(r / n) and l1 == pytest.approx(r * r / n) and linf == pytest.approx(1 / n)
    x = (RNG.random((n, d)) < 0.3).astype(float)
    base = run_zero(cert, {"X": x})["m"]
    k = int(r * r // 2)  # rows with k ones sit on the truncation boundary, k + 1 just past it
    specials = [np.ones(d), np.zeros(d), np.full(d, np.nan), np.full(d, np.inf), np.full(d, -np.inf),
                np.full(d, 1e30), np.full(d, 0.5), 1.0 - x[0]]
    specials += [np.r_[np.ones(j), np.zeros(d - j)] for j in (min(k, d), min(k + 1, d))]
    for t in range(50):
        y = x.copy()
        y[int(RNG.integers(n))] = specials[t] if t < len(specials) else (RNG.random(d) < RNG.random()).astype(float)
        diff = run_zero(cert, {"X": y})["m"] - base
        assert np.abs(diff).sum() <= l1 * (1 + 1e-9) + 1e-15
        assert np.linalg.norm(diff) <= l2 * (1 + 1e-9) + 1e-15
        assert np.abs(diff).max() <= linf * (1 + 1e-12)


def test_truncated_binary_mean_needs_unit_box() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=3), n=10)
    with pytest.raises(DomainError):
        b.build(m=N.GaussianMech()(N.TruncatedBinaryMean(tau=2)(X))).check()
    Y = b.source("Y", dp.BooleanCube(d=3), n=10)
    with pytest.raises(DomainError):
        b.build(m=N.GaussianMech()(N.TruncatedBinaryMean(tau=2, radius=b.public(1.0))(Y))).check()


def test_ppde_ledger_shows_sequential_composition() -> None:
    ledger = ppde(d=200, n=20_000, budget=dp.ZCDP(0.5), rounds=3).check()
    gauss = [e for e in ledger.entries if e.kind == "GaussianMech"]
    assert len(gauss) == 4  # the pilot and three rounds, all on the whole of X
    assert [e.cost for e in gauss] == ["rho=0.025 zCDP"] + ["rho=0.1583333333 zCDP"] * 3
    assert ledger.totals[0].rho == Fraction(1, 2)


def test_ppde_refusals() -> None:
    with pytest.raises(ValueError):
        ppde(d=100, n=1000, budget=dp.ZCDP(0.5), rounds=0)
    with pytest.raises(dp.PlanTypeError, match="does not take"):
        ppde(d=100, n=1000, budget=dp.PureDP(1))
    with pytest.raises(ValueError):
        ppde(d=100, n=1000, budget=dp.ZCDP(0.5), shrink=1.0)
    with pytest.raises(ValueError):
        ppde(d=100, n=1000, budget=dp.ZCDP(0.5), pilot=1.0)


def test_product_tv_exact_and_bound() -> None:
    for d in (1, 3, 10):
        p = RNG.uniform(0.05, 0.95, d)
        q = np.clip(p + RNG.normal(0, 0.05, d), 0.01, 0.99)
        exact = product_tv(q, p)
        big_p, big_q = np.r_[p, np.full(20, 0.5)], np.r_[q, np.full(20, 0.5)]  # same TV, bound path
        bound = product_tv(big_q, big_p)
        assert exact <= bound + 1e-12
        assert bound <= 1.0
    assert product_tv([0.3, 0.6], [0.3, 0.6]) == 0.0
    assert product_tv(np.full(30, 0.5), np.r_[np.zeros(1), np.full(29, 0.5)]) == 1.0


def _empirical_tv(X: np.ndarray, p: np.ndarray) -> float:
    return product_tv(X.mean(axis=0), p)


@pytest.mark.parametrize("case", ["skewed", "balanced"])
def test_ppde_and_naive_accuracy(case: str) -> None:
    d, n, rho = 40, 40_000, 0.5
    p = np.minimum(0.5, 1.0 / np.arange(1, d + 1)) if case == "skewed" else np.full(d, 0.5)
    X = (np.random.default_rng(3).random((n, d)) < p).astype(np.int8)
    base = _empirical_tv(X, p)
    # naive: Gaussian noise sigma = sqrt(d) / (n sqrt(2 rho)) per coordinate adds ~ sigma^2 sum 1/(p(1-p))
    # to the chi-square
    sig = math.sqrt(d) / (n * math.sqrt(2 * rho))
    chi_naive = sig**2 * float(np.sum(1 / (p * (1 - p))))
    nv = naive_product(d=d, n=n, budget=dp.ZCDP(rho)).run({"X": X}, noise=dp.SeededNoise(3)).released["p"]
    assert product_tv(nv, p) <= base + 0.5 * math.sqrt(4 * chi_naive)
    # PPDE: every round reads all n rows with l2 <= sqrt(d)/n and weight 0.95 (one round, pilot 0.05); a row
    # is truncated with probability <= 0.01, a bias below 0.01 + 0.01 p_j (counted as 0.02 per coordinate)
    sig_p = math.sqrt(d) / (n * math.sqrt(2 * rho * 0.95))
    chi_ppde = (sig_p**2 + 1 / n + 0.02**2) * float(np.sum(1 / (p * (1 - p))))
    for rounds in (1, 2):
        est = ppde(d=d, n=n, budget=dp.ZCDP(rho), rounds=rounds).run({"X": X}, noise=dp.SeededNoise(3))
        assert product_tv(est.released["p"], p) <= 0.5 * math.sqrt(4 * chi_ppde)
