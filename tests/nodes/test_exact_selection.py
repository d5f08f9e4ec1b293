"""Peel and the stability histogram under exact noise sources: the lattice / integer rules and their proofs'
inequalities, pinned."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from conftest import ExactZeroNoise

import dpflow as dp
from dpflow import nodes as N
from dpflow.privacy.rounding import up

N_ROWS = 5000


def _peel_plan(d: int = 8, s: int = 2) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=d), n=N_ROWS)
    return b.build(top=N.Peel(s=s)(N.Mean()(N.Clip(box=(-1, 1))(X))))


def _peel_data() -> np.ndarray:
    X = np.random.default_rng(1).uniform(-0.1, 0.1, size=(N_ROWS, 8))
    X[:, 2] += 0.7
    X[:, 5] -= 0.5
    return X


def test_peel_lattice_rule_and_zero_noise_release() -> None:
    """Zero exact noise: the chosen coordinates are the top |v| and their released values the lattice rounding
    of v; the widened sensitivity is lambda + 2 x float error + one step, rounded up (a test of that sum)."""
    X = _peel_data()
    res = _peel_plan().run({"X": X}, noise=ExactZeroNoise())
    facts = res.report.execution.facts["peel_3"]
    lat = facts[1]["lattice"]
    step, slack = lat["step"], lat["float_slack"]
    lam = dp.certify(_peel_plan()).space.types["mean_2"].linf.value({})  # 2/n, rounded up
    assert lam == pytest.approx(2.0 / N_ROWS, rel=1e-11)
    assert lat["sensitivity"] == up(lam + slack + step)
    assert 0 < step < slack < 1e-9
    assert step == 2.0 ** math.floor(math.log2(step))
    v = X.mean(axis=0)
    top = res.released["top"]
    assert set(np.flatnonzero(top)) == {2, 5}
    assert np.array_equal(top[[2, 5]], np.rint(v[[2, 5]] / step) * step)


def test_peel_exact_draws_are_discrete_and_seeded_release_is_unchanged() -> None:
    X = _peel_data()
    plan = _peel_plan()
    exact = plan.run({"X": X}, noise=dp.SeededNoise(4, exact=True)).released["top"]
    facts = plan.run({"X": X}, noise=dp.SeededNoise(4, exact=True)).report.execution.facts["peel_3"]
    step = facts[1]["lattice"]["step"]
    nz = exact[exact != 0]
    assert len(nz) == 2 and np.array_equal(nz / step, np.rint(nz / step))
    cont = plan.run({"X": X}, noise=dp.SeededNoise(4)).report.execution.facts["peel_3"]
    assert len(cont) == 1  # no lattice under continuous seeded noise


def _dlap_pmf(t: float, support: np.ndarray) -> np.ndarray:
    w = np.exp(-np.abs(support) / t)
    out: np.ndarray = w / w.sum()
    return out


def _win_probs(scores: tuple[int, ...], t: float) -> np.ndarray:
    """Exact P(candidate i is the first largest of scores + discrete Laplace(t) noise) (support truncated far
    in the tails)."""
    z = np.arange(-400, 401)
    p = _dlap_pmf(t, z)
    cdf = np.cumsum(p)  # P(Z <= z)
    out = np.zeros(len(scores))
    for i, ci in enumerate(scores):
        prob = p.copy()
        for j, cj in enumerate(scores):
            if j == i:
                continue
            # j < i must be strictly below (ties go to the lowest index); j > i at most equal
            lim = ci + z - cj - (1 if j < i else 0)  # Z_j <= lim
            prob *= np.where(lim < z[0], 0.0, cdf[np.clip(lim - z[0], 0, len(z) - 1)])
        out[i] = prob.sum()
    return out


@pytest.mark.parametrize("t", [0.7, 2.0])
def test_report_noisy_max_with_discrete_laplace_is_2m_over_t(t: float) -> None:
    """The inequality of Peel's lattice proof, computed exactly on small instances: integer scores moved by
    at most m = 1 per coordinate change each selection probability by at most exp(2m/t) (ties to the lowest
    index), and that factor 2 is needed (some pair exceeds exp(m/t))."""
    worst = 0.0
    grid = [(a, b, c) for a in range(3) for b in range(3) for c in range(3)]
    for s in grid:
        ps = _win_probs(s, t)
        for shift in [(x, y, w) for x in (-1, 0, 1) for y in (-1, 0, 1) for w in (-1, 0, 1)]:
            s2 = tuple(a + d for a, d in zip(s, shift, strict=True))
            worst = max(worst, float(np.max(np.abs(np.log(ps) - np.log(_win_probs(s2, t))))))
    assert worst <= 2.0 / t + 1e-9
    assert worst > 1.0 / t


def _stability(delta: float = 1e-6) -> tuple[dp.Plan, N.StabilityHistogram]:
    b = dp.PlanBuilder(budget=dp.ApproxZCDP(0.5, 1e-5))
    X = b.source("X", dp.Ordinal(N=1000), n=600)
    node = N.StabilityHistogram(delta=delta)
    return b.build(h=node(N.BinCounts(width=1.0)(X))), node


def test_stability_exact_threshold_is_raised_by_one_half() -> None:
    plan, node = _stability()
    res0 = plan.run({"X": np.arange(600) % 3}, noise=dp.SeededNoise(0))
    t = res0.report.execution.facts["stability_histogram_2"][1]["threshold"]
    c = math.floor(t) + 1 if math.floor(t) + 1 <= t + 0.5 else math.floor(t)
    x = np.concatenate([np.full(c, 7), np.full(600 - c, 40)])
    res = plan.run({"X": x}, noise=ExactZeroNoise())
    t_exact = res.report.execution.facts["stability_histogram_2"][1]["threshold"]
    assert t_exact == math.nextafter(t + 0.5, math.inf)
    keys, counts = res.released["h"]
    assert list(keys) == ([40] if c <= t + 0.5 else [7, 40])
    assert list(counts) == [float(600 - c)] if c <= t + 0.5 else True


@pytest.mark.parametrize("eps", [0.05, 0.3, 1.0, 4.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-9])
def test_discrete_tail_at_the_raised_threshold_is_within_the_continuous_one(eps: float, delta: float) -> None:
    """For the discrete Laplace, P(1 + Z > t + 1/2) = q^j / (1 + q), j = floor(t - 1/2) + 1, q = exp(-1/b): at
    most the continuous P(1 + L > t) = q^(t - 1) / 2 for the node's parameters (the rule)."""
    node = N.StabilityHistogram(delta=delta)
    for l1 in (1.0, 2.0):
        b, t = node.scale_threshold(l1, eps)
        q = math.exp(-1 / b)
        assert q ** (math.floor(t - 0.5) + 1) / (1 + q) <= q ** (t - 1) / 2 * (1 + 1e-12)


@pytest.mark.parametrize("b", [0.5, 1.0, 30.0])
def test_the_raise_of_one_half_is_needed(b: float) -> None:
    """With t - 1 just below an integer, the discrete tail at t itself, or at t + 1/4, exceeds the continuous
    one: a raise of 1/2 is what the proof needs (2 sqrt(q) <= 1 + q), and less is not enough."""
    q = math.exp(-1 / b)
    for raise_by in (0.0, 0.25):
        t = 6.0 - raise_by - 1e-9
        assert q ** (math.floor(t - 1 + raise_by) + 1) / (1 + q) > q ** (t - 1) / 2


def test_stability_exact_counts_are_integers() -> None:
    plan, _ = _stability()
    x = np.concatenate([np.full(300, 7), np.full(250, 40), np.arange(50) + 100])
    keys, counts = plan.run({"X": x}, noise=dp.SeededNoise(2, exact=True)).released["h"]
    assert list(keys) == [7, 40] and np.array_equal(counts, np.rint(counts))
    assert Fraction(2) > 0


def test_peel_lattice_release_has_the_laplace_spread() -> None:
    """The released coordinates of the lattice Peel spread like Laplace(b) (variance 2 b^2; 400 seeded runs,
    within 20%), and the selection still finds the planted coordinates."""
    X = _peel_data()
    plan = _peel_plan()
    v = X.mean(axis=0)
    noise = dp.SeededNoise(9, exact=True)
    errs, hits = [], 0
    for _ in range(400):
        res = plan.run({"X": X}, noise=noise)
        top = res.released["top"]
        b = res.report.execution.facts["peel_3"][0]["scale"]
        chosen = np.flatnonzero(top)
        hits += set(chosen) == {2, 5}
        errs.extend((top[chosen] - v[chosen]).tolist())
    assert abs(float(np.var(errs)) / (2 * b * b) - 1) < 0.2
    assert hits == 400
