"""Neighbouring-datasets tests for the regression and truncation nodes: the realised change of the
pre-noise statistic never exceeds the sensitivity the planner declares (random and adversarial
neighbours: far outliers, NaN / inf rows, points on the clipping boundary)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from conftest import ZeroNoise, bound_value, run_zero
from hypothesis import given, settings
from hypothesis import strategies as st

import dpflow as dp
from dpflow import nodes as N
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.nodes.regression import l1_bound, project_coef, project_l1
from dpflow.planner.certify import Certified, certify

SETTINGS = settings(max_examples=40, deadline=None)
TOL = 1e-9
CX = 1.5
C = 2.0

BALLS = [("l2", None), ("l2", 2), ("l1", None)]


def _adversarial_row(rng: np.random.Generator, d: int, R: float, kind: int) -> np.ndarray:
    """A replacement row [x, y]: outliers, non-finite entries, the clipping boundary."""
    if kind == 0:
        return rng.normal(size=d + 1) * 1e300
    if kind == 1:
        row = rng.normal(size=d + 1)
        row[rng.integers(d + 1)] = np.nan
        return row
    if kind == 2:
        return np.where(rng.random(d + 1) < 0.5, np.inf, -np.inf)
    if kind == 3:
        return np.concatenate([rng.choice([-CX, CX], size=d), [rng.choice([-R, R])]])
    return np.concatenate([rng.choice([-CX, CX], size=d) * 1e6, [rng.choice([-1.0, 1.0]) * 1e6]])


def _step_plan(d: int, n: int, ball: str, s: int | None, beta: np.ndarray, A: float, released: bool) -> tuple[
        Certified, str, dict[str, float]]:
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    Z = b.source("Z", dp.Vectors(d=d + 1), n=n)
    a: Any = b.public(A) if released else A
    g = N.GradientStep(beta=b.public(beta), eta=0.7, x_bound=CX, residual_bound=a, radius=C, ball=ball,
                       sparsity=s)(Z)
    cert = certify(b.build(out=N.GaussianMech()(g)))
    env = {a.id: A} if released else {}
    return cert, g.id, env


def _check(cert: Certified, sid: str, env: dict[str, float], D: np.ndarray, D2: np.ndarray, src: str = "Z") -> None:
    stat = cert.space.types[sid]
    assert isinstance(stat, N.StatT)
    v1 = np.asarray(run_zero(cert, {src: D})["out"])
    v2 = np.asarray(run_zero(cert, {src: D2})["out"])
    diff = v1 - v2
    assert np.all(np.isfinite(v1)) and np.all(np.isfinite(v2))
    for norm, bound in ((np.inf, stat.linf), (2, stat.l2), (1, stat.l1)):
        assert bound is not None
        limit = bound_value(bound, env)
        assert np.linalg.norm(diff, ord=norm) <= limit * (1 + TOL) + 1e-15


@pytest.mark.parametrize("ball,s", BALLS)
@pytest.mark.parametrize("released", [False, True])
def test_gradient_step_adversarial_neighbours(ball: str, s: int | None, released: bool) -> None:
    rng = np.random.default_rng(7)
    d, n = 4, 30
    K = l1_bound(ball, C, s, d)
    A = 1.0 + CX * K
    R = A - CX * K
    for trial in range(12):
        beta = rng.normal(size=d) * (5.0 if trial % 2 else 0.5)   # also outside the feasible set
        cert, sid, env = _step_plan(d, n, ball, s, beta, A, released)
        D = np.hstack([rng.uniform(-2 * CX, 2 * CX, size=(n, d)), rng.normal(size=(n, 1)) * 3])
        D[0] = np.concatenate([np.full(d, CX), [R]])              # a row on the boundary
        for kind in range(5):
            D2 = D.copy()
            D2[rng.integers(n)] = _adversarial_row(rng, d, R, kind)
            _check(cert, sid, env, D, D2)


@SETTINGS
@given(st.integers(0, 2), st.integers(1, 5), st.integers(2, 12), st.integers(0, 2**31))
def test_gradient_step_random_neighbours(ball_i: int, d: int, n: int, seed: int) -> None:
    ball, s = BALLS[ball_i]
    s = None if s is None else min(s, d)
    rng = np.random.default_rng(seed)
    A = float(rng.uniform(0.1, 10.0))
    cert, sid, env = _step_plan(d, n, ball, s, rng.normal(size=d) * 3, A, bool(seed % 2))
    D = rng.normal(size=(n, d + 1)) * rng.uniform(0.1, 5)
    D2 = D.copy()
    D2[rng.integers(n)] = rng.standard_cauchy(size=d + 1)
    _check(cert, sid, env, D, D2)


def test_gradient_step_sensitivity_formulas_in_the_ledger() -> None:
    d, n = 10, 1000
    cert, sid, _ = _step_plan(d, n, "l2", 3, np.zeros(d), 5.0, False)
    stat = cert.space.types[sid]
    assert isinstance(stat, N.StatT) and stat.linf is not None and stat.l2 is not None
    assert math.isclose(stat.linf.coef, 2 * 0.7 * CX * 5.0 / n)           # CWZ lambda = eta B / n
    assert math.isclose(stat.l2.coef, 2 * 0.7 * CX * 5.0 * math.sqrt(d) / n)
    entry = next(e for e in cert.ledger.entries if e.kind == "GradientStep")
    assert "K = 3.4641" in entry.derivation and "regression.py" in entry.reference


def test_projection_guarantees_the_l1_bound() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        v = rng.standard_cauchy(size=7) * 10
        for ball, s in BALLS:
            p = project_coef(v, ball, C, s)
            assert np.abs(p).sum() <= l1_bound(ball, C, s, 7) * (1 + 1e-12)
            if s is not None:
                assert np.count_nonzero(p) <= s
        w = project_l1(v, 1.0)
        assert np.abs(w).sum() <= 1.0
    assert np.array_equal(project_coef(np.array([np.nan, 3.0]), "l2", 1.0, None), np.array([0.0, 1.0]))


@pytest.mark.parametrize("released", [False, True])
def test_truncated_mean_adversarial_neighbours(released: bool) -> None:
    rng = np.random.default_rng(11)
    d, n, R = 5, 20, 1.3
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    X = b.source("X", dp.Vectors(d=d), n=n)
    bound: Any = b.public(R) if released else R
    m = N.TruncatedMean(bound=bound)(X)
    cert = certify(b.build(out=N.GaussianMech()(m)))
    env = {bound.id: R} if released else {}
    for trial in range(30):
        D = rng.normal(size=(n, d)) * 2
        D2 = D.copy()
        D2[rng.integers(n)] = _adversarial_row(rng, d - 1, R, trial % 5)
        _check(cert, m.id, env, D, D2, "X")


def test_ssp_second_moment_of_rows_with_released_radius() -> None:
    """The SSP path reuses Clip(radius=released) + SecondMoment; its Frobenius bound holds on [x, y]."""
    rng = np.random.default_rng(5)
    d, n, r = 3, 15, 2.5
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    Z = b.source("Z", dp.Vectors(d=d + 1), n=n)
    rr = b.public(r)
    sm = N.SecondMoment()(N.Clip(radius=rr)(Z))
    cert = certify(b.build(out=N.GaussianMech()(sm)))
    stat = cert.space.types[sm.id]
    assert isinstance(stat, N.StatT) and stat.l2 is not None
    for kind in range(10):
        D = rng.normal(size=(n, d + 1)) * 2
        D2 = D.copy()
        D2[rng.integers(n)] = _adversarial_row(rng, d, r, kind % 5)
        diff = np.asarray(run_zero(cert, {"Z": D})["out"]) - np.asarray(run_zero(cert, {"Z": D2})["out"])
        assert np.linalg.norm(diff) <= bound_value(stat.l2, {rr.id: r}) * (1 + TOL)


def test_a_huge_released_residual_bound_cannot_overflow_the_gradient() -> None:
    # before: A = 1e298 let the residual reach 1e298, and the sum of x * r overflowed on some data only
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    Z = b.source("Z", dp.Vectors(d=3), n=4)
    step = N.GradientStep(beta=b.public([0.0, 0.0]), eta=1.0, x_bound=1e10, residual_bound=b.public(1e298),
                          radius=1.0)(Z)
    cert = certify(b.build(beta=N.GaussianMech()(step)))
    outs = []
    for y in (1e300, 0.0):
        Zd = np.ones((4, 3)) * 1e10
        Zd[:, 2] = y
        outs.append(execute(cert, {"Z": Zd}, ZeroNoise(), NumpyBackend()).released["beta"])
    assert all(np.all(np.isfinite(o)) for o in outs)


def test_a_huge_released_truncation_bound_cannot_overflow_the_mean() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=1), n=2)
    cert = certify(b.build(m=N.GaussianMech()(N.TruncatedMean(bound=b.public(1e308))(X))))
    for rows in ([[1e308], [1e308]], [[1e308], [0.0]]):
        m = execute(cert, {"X": np.array(rows)}, ZeroNoise(), NumpyBackend()).released["m"]
        assert np.all(np.isfinite(m))
