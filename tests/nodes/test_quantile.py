"""Private quantiles: neighbouring-datasets tests of the order statistics (l_p and rank
sensitivities), the exact privacy of the exponential mechanism's output density, the data-driven
truncation helper, and the declared policies for non-finite data."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from conftest import ZeroNoise, run_zero
from hypothesis import given, settings
from hypothesis import strategies as st

import dpflow as dp
from dpflow import nodes as N
from dpflow.estimators.truncation import gaussian_factor, private_radius, truncated_mean
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.nodes.quantile import log2_edges, quantile_log_weights
from dpflow.planner.certify import certify

SETTINGS = settings(max_examples=60, deadline=None)


def _order_plan(d: int, n: int, of: str, hi: float) -> tuple[Any, str]:
    b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    X = b.source("X", dp.Vectors(d=d), n=n)
    os_ = N.OrderStatistics(lower=0.0, upper=hi)(N.Magnitudes(of=of)(X))
    return certify(b.build(out=N.LaplaceMech()(os_))), os_.id


def _below(framed: np.ndarray, t: np.ndarray) -> np.ndarray:
    z = framed[1:-1]
    return np.searchsorted(np.sort(z), t, side="right")


@SETTINGS
@given(st.integers(1, 4), st.integers(1, 9), st.sampled_from(["coordinates", "rows"]), st.integers(0, 2**31))
def test_order_statistics_random_and_adversarial_neighbours(d: int, n: int, of: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    hi = 3.0
    cert, sid = _order_plan(d, n, of, hi)
    stat = cert.space.types[sid]
    assert isinstance(stat, N.StatT) and stat.rank is not None and stat.l1 is not None
    D = rng.normal(size=(n, d)) * 2
    D[0, 0] = hi                                                   # on the clamp boundary
    D2 = D.copy()
    i = rng.integers(n)
    D2[i] = [rng.standard_cauchy() * 1e6, np.nan, np.inf, -np.inf][seed % 4] * np.ones(d)
    a = np.asarray(run_zero(cert, {"X": D})["out"])
    b = np.asarray(run_zero(cert, {"X": D2})["out"])
    for norm, bound in ((1, stat.l1), (2, stat.l2), (np.inf, stat.linf)):
        assert bound is not None
        assert np.linalg.norm(a - b, ord=norm) <= bound.coef + 1e-12
    t = np.linspace(-1, hi + 1, 200)                               # rank: count below any threshold
    assert np.abs(_below(a, t) - _below(b, t)).max() <= stat.rank.coef
    assert a[0] == 0.0 and a[-1] == hi and np.all(np.diff(a) >= 0)


def _density(framed: np.ndarray, q: float, eps: float, du: float, x: np.ndarray) -> np.ndarray:
    """The exact output density of the quantile mechanism at points x."""
    logw = quantile_log_weights(framed, q, eps, du)
    p = np.exp(logw - logw[np.isfinite(logw)].max())
    p /= p.sum()
    gaps = np.diff(framed)
    k = np.clip(np.searchsorted(framed, x, side="right") - 1, 0, len(gaps) - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        dens = np.where(gaps[k] > 0, p[k] / gaps[k], 0.0)
    return dens


@SETTINGS
@given(st.integers(1, 12), st.floats(0.0, 1.0), st.floats(0.1, 3.0), st.integers(0, 2**31))
def test_exponential_mechanism_density_ratio_is_at_most_e_eps(n: int, q: float, eps: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    lo, hi = 0.0, 5.0
    z = np.clip(rng.uniform(-1, 6, size=n), lo, hi)
    z2 = z.copy()
    z2[rng.integers(n)] = rng.choice([lo, hi, rng.uniform(lo, hi)])
    f1 = np.concatenate(([lo], np.sort(z), [hi]))
    f2 = np.concatenate(([lo], np.sort(z2), [hi]))
    pts = np.unique(np.concatenate([f1, f2]))
    x = (pts[:-1] + pts[1:]) / 2                                   # one point inside every common piece
    d1, d2 = _density(f1, q, eps, 1.0, x), _density(f2, q, eps, 1.0, x)
    assert np.all(d1 > 0) and np.all(d2 > 0)                      # full support on [lo, hi]
    assert np.all(d1 <= math.exp(eps) * d2 * (1 + 1e-9)) and np.all(d2 <= math.exp(eps) * d1 * (1 + 1e-9))


def test_quantile_release_accuracy_and_exactness_of_the_sampler() -> None:
    n = 4000
    rng = np.random.default_rng(2)
    data = rng.normal(size=(n, 1))
    b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    X = b.source("X", dp.Reals(), n=n)
    med = N.Quantile(q=0.5)(N.OrderStatistics(lower=-10.0, upper=10.0)(X))
    plan = b.build(median=med)
    outs = np.array([plan.run({"X": data}, noise=dp.SeededNoise(s)).released["median"] for s in range(40)])
    ranks = np.searchsorted(np.sort(data[:, 0]), outs)
    # utility gap of 2 ln(n / beta) / eps ranks holds with prob >= 1 - beta (McSherry-Talwar Thm 8):
    # with beta = 1e-3 and eps = 1 that is 2 * ln(4e6) ~ 30.4 ranks, plus the mass of the outer gaps
    assert np.all(np.abs(ranks - n / 2) <= 2 * math.log(n / 1e-3) + 2)
    assert len(np.unique(outs)) == len(outs)                     # continuous output: uniform inside a gap


def test_quantile_never_raises_on_non_finite_data_and_zero_noise() -> None:
    n = 50
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    X = b.source("X", dp.Vectors(d=2), n=n)
    r = private_radius(X, factor=2.0)
    cert = certify(b.build(r=r))
    D = np.full((n, 2), np.nan)
    D[::3] = np.inf
    out = execute(cert, {"X": D}, ZeroNoise(), NumpyBackend()).released["r"]
    assert math.isfinite(out) and out >= 0
    out2 = execute(cert, {"X": D}, dp.SeededNoise(1), NumpyBackend()).released["r"]
    assert math.isfinite(out2) and out2 >= 0


def test_quantile_of_a_degenerate_range_is_the_lower_end() -> None:
    b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    X = b.source("X", dp.Reals(), n=5)
    plan = b.build(q=N.Quantile(q=0.5)(N.OrderStatistics(lower=1.0, upper=1.0)(X)))
    assert plan.run({"X": np.arange(5.0)}, noise=dp.SeededNoise(0)).released["q"] == 1.0


def test_quantile_refuses_inputs_without_rank_sensitivity() -> None:
    b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    X = b.source("X", dp.Vectors(d=1), n=5)
    with pytest.raises(dp.UnboundedSensitivityError, match="OrderStatistics"):
        b.build(q=N.Quantile(q=0.5)(N.Mean()(N.Clip(radius=1.0)(X)))).check()
    with pytest.raises(ValueError):
        N.Quantile(q=1.5)
    with pytest.raises(ValueError):
        N.OrderStatistics(lower=2.0, upper=1.0)
    with pytest.raises(ValueError):
        N.OrderStatistics(upper=math.inf)
    with pytest.raises(dp.DomainError, match="one-dimensional"):
        b2 = dp.PlanBuilder(budget=dp.PureDP(1.0))
        Y = b2.source("Y", dp.Vectors(d=2), n=5)
        b2.build(q=N.Quantile(q=0.5)(N.OrderStatistics(upper=1.0)(Y))).check()


def test_data_driven_radius_finds_the_scale_without_a_public_range() -> None:
    n, d = 3000, 4
    for scale in (1e-3, 1.0, 1e4):
        X = np.random.default_rng(4).normal(size=(n, d)) * scale
        b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
        S = b.source("X", dp.Vectors(d=d), n=n)
        plan = b.build(r=private_radius(S, factor=gaussian_factor(n)))
        r = plan.run({"X": X}, noise=dp.SeededNoise(3)).released["r"]
        target = scale * math.sqrt(2 * math.log(n))                 # CWZ's sigma sqrt(2 ln n)
        assert 0.9 * target <= r <= 1.1 * target
    ledger = plan.check()
    kinds = [e.kind for e in ledger.entries if e.cost]
    assert kinds == ["LaplaceMech", "Quantile"]                      # its own slice of the budget, in the ledger
    assert len(log2_edges()) == 122


def test_truncated_mean_data_driven_vs_oracle() -> None:
    n, d, rho = 20_000, 5, 0.5
    X = np.random.default_rng(8).normal(size=(n, d)) + 1.0
    oracle = 1.0 + math.sqrt(2 * math.log(n))
    # the pooled magnitude rule (the per-coordinate default is tested in estimators/test_scale_free.py)
    res = truncated_mean(d, n, dp.ZCDP(rho), truncation="magnitude").run({"X": X}, noise=dp.SeededNoise(9))
    R = res.released["radius"]
    assert oracle <= R <= 1.6 * oracle       # median |N(1,1)| / 0.6745 > 1: a bit above the oracle
    sigma = 2 * R * math.sqrt(d) / n / math.sqrt(2 * rho * 0.9)      # the Gaussian's 90% share
    assert np.abs(res.released["mean"] - X.mean(axis=0)).max() <= 5 * sigma


def test_order_statistics_over_a_private_count_have_no_vector_sensitivity() -> None:
    # with n private the sorted vector's length reveals n: only the rank utility may be used
    b = dp.PlanBuilder(budget=dp.PureDP(1.0), neighbors="add_remove")
    X = b.source("X", dp.Reals())
    stats = N.OrderStatistics(lower=0.0, upper=1.0)(X)
    with pytest.raises(dp.UnboundedSensitivityError):
        b.build(o=N.LaplaceMech()(stats)).check()
    b2 = dp.PlanBuilder(budget=dp.PureDP(1.0), neighbors="add_remove")
    X2 = b2.source("X", dp.Reals())
    assert b2.build(q=N.Quantile(q=0.5)(N.OrderStatistics(lower=0.0, upper=1.0)(X2))).check()
