"""Regression tests for the privacy review of the estimator nodes (each failed before its fix)."""

from __future__ import annotations

import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N


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


def test_merr_scores_are_refused_on_a_value_piece() -> None:
    b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    X = b.source("X", dp.Ordinal(N=16), n=100)
    inside, _ = N.split(X, N.PartitionByBall(center=[0.0], radius=8.0))
    with pytest.raises(dp.DomainError, match="row count"):
        b.build(j=N.DyadicExpMech()(N.DyadicCounts(N=16)(inside))).check()


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
