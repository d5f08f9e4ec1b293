"""AboveThreshold (sparse vector, c = 1): the exact scales, the exact privacy loss of its output
distribution on worst-case neighbours (computed by numerical integration, not sampled), the exact
discrete path and the released "not found"."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from conftest import ExactZeroNoise, ZeroNoise
from scipy import stats

import dpflow as dp
from dpflow import nodes as N
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.nodes.sparse_vector import NOT_FOUND, THRESHOLD_SHARE, AboveThreshold, svt_split
from dpflow.planner.certify import certify
from dpflow.privacy import laplace_scale


def _output_probs(f: np.ndarray, T: float, b1: float, b2: float) -> np.ndarray:
    """P(release i) for i < m and P(not found), for continuous Laplace noise of scales b1 (threshold) and
    b2 (answers), by integrating over the threshold noise on a fine grid."""
    r = np.linspace(-60 * b1, 60 * b1, 120_001)
    w = stats.laplace.pdf(r, scale=b1)
    below = np.ones_like(r)
    out = []
    for fi in f:
        F = stats.laplace.cdf(T + r - fi, scale=b2)
        out.append(np.trapezoid(w * below * (1 - F), r))
        below = below * F
    out.append(np.trapezoid(w * below, r))
    return np.array(out)


def _worst_loss(b1: float, b2: float, delta: float, m: int = 30) -> float:
    """The privacy loss of releasing the last index (and of "not found") between answers 0 and the
    neighbour whose earlier answers drop by Delta and whose last answer rises by Delta: the pair that makes
    the bound of Lyu-Su-Li Thm 2 tight as m grows."""
    f = np.zeros(m)
    g = f.copy()
    g[:-1] -= delta
    g[-1] += delta
    p, q = _output_probs(f, 0.0, b1, b2), _output_probs(g, 0.0, b1, b2)
    return float(max(np.log(q[-2] / p[-2]), np.log(p[-1] / q[-1]), np.log(p[-2] / q[-2])))


def test_split_sums_to_epsilon_and_is_the_lsl_optimum() -> None:
    e1, e2 = svt_split(Fraction(3, 2))
    assert e1 + e2 == Fraction(3, 2)
    assert float(THRESHOLD_SHARE) == pytest.approx(1 / (1 + 2 ** (2 / 3)), abs=1e-6)


@pytest.mark.parametrize("eps,delta", [(1.0, 1.0), (0.5, 3.0)])
def test_scales_are_delta_over_eps1_and_two_delta_over_eps2(eps: float, delta: float) -> None:
    node = AboveThreshold(threshold=0.0)
    e1, e2 = svt_split(Fraction(eps))
    b1, b2 = node.scales(delta, Fraction(eps), "pure")
    assert b1 == laplace_scale(delta, e1) and b2 == laplace_scale(2 * delta, e2)
    # zCDP share rho buys sqrt(2 rho)
    assert node.scales(delta, Fraction(eps * eps / 2), "zcdp")[0] == pytest.approx(b1, rel=1e-9)


def test_worst_case_neighbours_lose_at_most_epsilon_and_the_bound_is_tight() -> None:
    eps, delta = 1.0, 1.0
    b1, b2 = AboveThreshold(threshold=0.0).scales(delta, Fraction(eps), "pure")
    loss = _worst_loss(b1, b2, delta)
    assert 0.95 * eps < loss <= eps * (1 + 1e-4)


@pytest.mark.parametrize("factor1,factor2", [(1.0, 0.5), (0.5, 1.0)])
def test_halving_either_scale_breaks_privacy(factor1: float, factor2: float) -> None:
    """The rule is pinned: without the 2 on the answers' scale, or with half the threshold's, the loss of
    the same neighbours exceeds epsilon."""
    b1, b2 = AboveThreshold(threshold=0.0).scales(1.0, Fraction(1), "pure")
    assert _worst_loss(b1 * factor1, b2 * factor2, 1.0) > 1.2


def _plan(threshold: Any) -> tuple[dp.Plan, str]:
    b = dp.PlanBuilder(budget=dp.PureDP(1))
    X = b.source("X", dp.Reals(), n=100)
    i = N.AboveThreshold(threshold=threshold)(N.Histogram(edges=[0.0, 1.0, 2.0, 3.0])(X))
    return b.build(i=i), i.id


_DATA = {"X": np.repeat([0.5, 1.5, 2.5], [10, 30, 60]).reshape(-1, 1)}


def test_releases_first_index_above_and_not_found() -> None:
    plan, _ = _plan(20.0)
    assert execute(certify(plan), _DATA, ZeroNoise(), NumpyBackend()).released["i"] == 1
    plan, _ = _plan(61.0)
    assert execute(certify(plan), _DATA, ZeroNoise(), NumpyBackend()).released["i"] == NOT_FOUND
    assert N.found_index(NOT_FOUND) is None


def test_records_its_scales_and_cost_is_pure_epsilon_with_reference() -> None:
    plan, nid = _plan(20.0)
    cert = certify(plan)
    share = cert.allocations[nid].share
    assert cert.allocations[nid].cost.pure_eps == share and 1 - 1e-9 < share <= 1
    facts = execute(cert, _DATA, dp.SeededNoise(0), NumpyBackend()).facts[nid]
    # the run evaluates Delta = 1 through the outward-rounded bound arithmetic (a few ulps above 1)
    assert facts[0]["scales"] == pytest.approx(AboveThreshold(threshold=0.0).scales(1.0, share, "pure"), rel=1e-11)
    assert facts[0]["scales"] >= AboveThreshold(threshold=0.0).scales(1.0, share, "pure")
    assert "Lyu-Su-Li 2017" in cert.ledger.to_json() and "mixtures.md" in cert.ledger.to_json()


class _Recording(ExactZeroNoise):
    def __init__(self) -> None:
        super().__init__()
        self.scales: list[Fraction] = []

    def laplace(self, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        raise AssertionError("an exact source must not draw continuous Laplace noise")

    def discrete_laplace(self, scale: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        self.scales.append(scale)
        return np.zeros(shape, dtype=np.int64)


def test_exact_source_draws_discrete_laplace_at_the_lattice_scales() -> None:
    """Counts (float error 0): step 2^-40 for Delta = 1 (Histogram, replace-one linf 1), so D = 2^40
    lattice units and the integer scales are D / eps1 and 2 D / eps2, exactly."""
    plan, nid = _plan(20.0)
    src = _Recording()
    cert = certify(plan)
    run = execute(cert, _DATA, src, NumpyBackend())
    out = run.released["i"]
    e1, e2 = svt_split(cert.allocations[nid].share)
    D = run.facts[nid][1]["lattice"]["sensitivity_units"]
    assert run.facts[nid][1]["lattice"]["step"] == 2.0**-40 and 2**40 <= D <= 2**40 + 8
    assert src.scales == [Fraction(D) / e1, Fraction(2 * D) / e2]
    assert out == 1


def test_exact_source_seeded_run_is_in_range() -> None:
    plan, _ = _plan(20.0)
    for seed in range(3):
        out = execute(certify(plan), _DATA, dp.SeededNoise(seed, exact=True), NumpyBackend()).released["i"]
        assert out in (NOT_FOUND, 0, 1, 2)


def test_zcdp_budget_and_released_threshold() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Reals(), n=100)
    i = N.AboveThreshold(threshold=b.public(40.0))(N.Histogram(edges=[0.0, 1.0, 2.0, 3.0])(X))
    cert = certify(b.build(i=i))
    assert cert.allocations[i.id].cost.pure_eps is not None
    assert execute(cert, _DATA, ZeroNoise(), NumpyBackend()).released["i"] == 2


def test_refuses_matrix_and_unbounded_input() -> None:
    b = dp.PlanBuilder(budget=dp.PureDP(1))
    X = b.source("X", dp.Vectors(d=2), n=100)
    with pytest.raises(dp.errors.DpflowError, match="AboveThreshold|vector|unbounded"):
        certify(b.build(i=N.AboveThreshold(threshold=1.0)(N.Sum()(X))))
