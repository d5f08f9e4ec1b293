"""Floating-point-safe releases: exact discrete samplers, lattice rounding, float-error slack."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest
from conftest import ExactZeroNoise
from scipy import stats

import dpflow as dp
from dpflow import nodes as N
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.interpreter.samplers import IntSource, bernoulli_exp, discrete_gaussian, discrete_laplace
from dpflow.nodes.floaterr import FloatError, gamma
from dpflow.planner.certify import certify


def _pmf_pvalue(draws: np.ndarray, ks: np.ndarray, weights: np.ndarray) -> float:
    """Chi-square p-value of integer draws against the PMF proportional to ``weights`` on ``ks``
    (cells with expected count < 5 pooled, mass outside ``ks`` pooled with them)."""
    expected = weights / weights.sum() * draws.size
    observed = np.array([(draws == k).sum() for k in ks])
    keep = expected >= 5
    obs = np.append(observed[keep], draws.size - observed[keep].sum())
    exp = np.append(expected[keep], draws.size - expected[keep].sum())
    return float(stats.chisquare(obs, exp).pvalue)


@pytest.mark.slow
@pytest.mark.parametrize("sigma2", [Fraction(1, 2), Fraction(9, 4), Fraction(25)])
def test_discrete_gaussian_matches_its_pmf(sigma2: Fraction) -> None:
    src = IntSource(random.Random(7))
    draws = np.array([discrete_gaussian(sigma2, src) for _ in range(20_000)])
    ks = np.arange(-int(12 * math.sqrt(sigma2)) - 2, int(12 * math.sqrt(sigma2)) + 3)
    assert _pmf_pvalue(draws, ks, np.exp(-(ks.astype(float) ** 2) / (2 * float(sigma2)))) > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("scale", [Fraction(1, 2), Fraction(3)])
def test_discrete_laplace_matches_its_pmf(scale: Fraction) -> None:
    src = IntSource(random.Random(8))
    draws = np.array([discrete_laplace(scale, src) for _ in range(20_000)])
    ks = np.arange(-40, 41)
    assert _pmf_pvalue(draws, ks, np.exp(-np.abs(ks) / float(scale))) > 1e-3


def test_bernoulli_exp_frequency() -> None:
    src = IntSource(random.Random(9))
    hits = sum(bernoulli_exp(Fraction(3, 2), src) for _ in range(20_000))
    p = math.exp(-1.5)
    assert abs(hits / 20_000 - p) < 4 * math.sqrt(p * (1 - p) / 20_000)


def _mean_plan(center: bool) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=3), n=200)
    c = b.public([1e3, 1e3, 1e3]) if center else None
    rows = N.Clip(radius=2.0, center=c)(X) if center else N.Clip(radius=2.0)(X)
    out = {"mean": N.GaussianMech(weight=3)(N.Mean()(rows)),
           "second": N.GaussianMech(weight=1)(N.SecondMoment(center=c)(rows)),
           "hist": N.LaplaceMech(weight=1)(
               N.Histogram(edges=[-1e9, 0.0, 1e9], normalize=True)(N.Columns(keep=[0])(rows)))}
    return b.build(**out)


def test_lattice_release_lands_on_the_lattice_with_the_certified_spread() -> None:
    plan = _mean_plan(center=False)
    X = np.random.default_rng(0).normal(size=(200, 3))
    res = plan.run({"X": X}, noise=dp.SeededNoise(3, exact=True))
    facts = res.report.execution.facts["gaussian_mech_3"]
    sigma = facts[0]["sigma"]
    lattice = facts[1]["lattice"]
    step = lattice["step"]
    assert step == 2.0 ** math.floor(math.log2(step)) and sigma / 2**42 < step <= sigma / 2**39
    mean = res.released["mean"]
    assert np.all(np.rint(mean / step) * step == mean)
    assert lattice["sensitivity"] >= 2 * 2.0 / 200
    assert lattice["sensitivity"] - 2 * 2.0 / 200 < 1e-9                  # the widening is tiny
    assert np.all(np.abs(mean - X.mean(axis=0)) < 5 * sigma)


@pytest.mark.parametrize("center", [False, True])
def test_lattice_releases_move_at_most_the_widened_sensitivity(center: bool) -> None:
    plan = _mean_plan(center)
    cert = certify(plan)
    rng = np.random.default_rng(11)
    X = rng.normal(size=(200, 3)) * 3 + 1e3 * center
    for trial in range(20):
        Y = X.copy()
        i = int(rng.integers(200))
        Y[i] = [np.nan, 1e300, -1e300][trial % 3] if trial < 3 else rng.normal(size=3) * 10 ** rng.integers(0, 8)
        outs = []
        for data in (X, Y):
            ex = execute(cert, {"X": data}, ExactZeroNoise(), NumpyBackend())
            outs.append((ex.released, ex.facts))
        (a, fa), (bb, fb) = outs
        ids = [n for n in fa if n.startswith(("gaussian_mech", "laplace_mech"))]
        gm, gs, lm = sorted(ids)
        for name, mech in (("mean", gm), ("second", gs)):
            sens = fa[mech][1]["lattice"]["sensitivity"]
            assert np.linalg.norm(np.asarray(a[name]) - np.asarray(bb[name])) <= sens
        sens1 = fa[lm][1]["lattice"]["sensitivity"]
        assert np.abs(np.asarray(a["hist"]) - np.asarray(bb["hist"])).sum() <= sens1


def test_float_error_bounds_cover_the_computed_error() -> None:
    rng = np.random.default_rng(5)
    n, d, r = 5000, 4, 3.0
    dom = dp.Vectors(d=d, l2_bound=dp.Sym.const(r))
    rows = N.project_ball(rng.normal(size=(n, d)) * 1e3, None, r)
    exact_mean = np.array([math.fsum(rows[:, j]) for j in range(d)]) / n
    err = np.linalg.norm(rows.sum(axis=0) / n - exact_mean)
    l2, _ = FloatError("mean", dom, dp.Sym.const(float(n))).bound({}, d)
    assert err <= l2
    G = rows.T @ rows / n
    exact_G = np.array([[math.fsum(rows[:, i] * rows[:, j]) for j in range(d)] for i in range(d)]) / n
    l2g, _ = FloatError("gram", dom, dp.Sym.const(float(n))).bound({}, d * (d + 1) // 2)
    assert np.linalg.norm(G - exact_G) <= l2g
    assert gamma(n) >= n * 2.0**-53


def test_exact_gaussian_dp_certificates_keep_continuous_noise() -> None:
    """A certificate resting on the exact Gaussian-DP profile (certified for continuous sources) makes the
    interpreter draw continuous noise even from an exact source; ``run`` never pairs the two: it certifies for
    its source, so an exact run of the same plan is accounted by the lattice Gaussian PLD (issue 16) and released
    on the lattice."""
    b = dp.PlanBuilder(budget=dp.ApproxDP(1.0, 1e-6))
    X = b.source("X", dp.Vectors(d=2), n=100)
    plan = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))
    ex = execute(certify(plan), {"X": np.zeros((100, 2))}, dp.SeededNoise(1, exact=True), NumpyBackend())
    assert [list(f) for f in ex.facts["gaussian_mech_3"]] == [["sigma"]]  # no lattice: continuous noise
    res = plan.run({"X": np.zeros((100, 2))}, noise=dp.SeededNoise(1, exact=True))
    facts = res.report.execution.facts["gaussian_mech_3"]
    assert [list(f) for f in facts] == [["sigma"], ["lattice"]]
    text = res.report.ledger.allocation
    assert text.startswith("PLD mode") and "lattice Gaussian PLD" in text


def test_secure_noise_is_the_default_and_says_so() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=100)
    res = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))).run({"X": np.zeros((100, 2))})
    data = res.report.to_data()["run"]
    assert data["seeded"] is False and "exact discrete" in data["noise"]
    assert "lattice" in res.report.execution.facts["gaussian_mech_3"][1]


class _Spy(dp.SeededNoise):
    def __init__(self) -> None:
        super().__init__(0, exact=True)
        self.continuous = 0

    def normal(self, sigma: float, shape: tuple[int, ...]) -> np.ndarray:
        self.continuous += 1
        return super().normal(sigma, shape)


def test_gradient_step_and_truncated_means_take_the_lattice_path() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    Z = b.source("Z", dp.Vectors(d=4), n=100)
    step = N.GradientStep(beta=b.public([0.0] * 3), eta=0.5, x_bound=1.0, residual_bound=3.0, radius=2.0)(Z)
    binary = N.TruncatedBinaryMean(tau=2)(N.Clip(box=(0.0, 1.0))(Z))
    coords = N.TruncatedMean(bound=2.0)(Z)
    plan = b.build(g=N.GaussianMech()(step), t=N.GaussianMech()(binary), m=N.GaussianMech()(coords))
    spy = _Spy()
    res = plan.run({"Z": np.random.default_rng(0).normal(size=(100, 4))}, noise=spy)
    assert spy.continuous == 0
    lattices = [f for facts in res.report.execution.facts.values() for f in facts if "lattice" in f]
    assert len(lattices) == 3
