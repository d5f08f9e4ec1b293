"""Private PCA (Analyze Gauss) as a plan: its noise scale, the tight Frobenius sensitivity on worst-case
neighbours, the projection of mixture data, and the post-processing policies."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import run_zero

import dpflow as dp
from dpflow import nodes as N
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.planner.certify import certify


def _pca_plan(n: int, d: int, k: int, radius: float, rho: float = 0.5) -> tuple[dp.Plan, str]:
    b = dp.PlanBuilder(budget=dp.ZCDP(rho))
    X = b.source("X", dp.Vectors(d=d), n=n)
    V = N.private_pca(X, k=k, radius=radius)
    return b.build(V=V), V.id


def test_noise_is_sqrt2_r2_over_n_over_sqrt_2rho() -> None:
    """sigma = sqrt(2) r^2 / n / sqrt(2 rho) (replace-one Frobenius sensitivity, mixtures.md 2.9 over n)."""
    plan, _ = _pca_plan(n=400, d=3, k=1, radius=2.0, rho=0.5)
    cert = certify(plan)
    g = next(c for c in cert.ledger.noise_calibrations if c.kind == "GaussianMech")
    assert g.scale == pytest.approx(math.sqrt(2) * 4.0 / 400 / math.sqrt(1.0), rel=1e-9)
    assert "Analyze Gauss" in N.pca.PCA_REFERENCE.text


def test_worst_case_neighbours_reach_the_frobenius_bound() -> None:
    """Orthogonal rows of norm r are the worst case: ||zz^T - z'z'^T||_F = sqrt(2) r^2 exactly."""
    r, n = 2.0, 5
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=3), n=n)
    S = N.SecondMoment()(N.Clip(radius=r)(X))
    cert = certify(b.build(S=N.GaussianMech()(S)))
    base = np.zeros((n, 3))
    D1, D2 = base.copy(), base.copy()
    D1[0] = [5.0, 0.0, 0.0]  # clipped to norm r
    D2[0] = [0.0, 0.0, -9.0]
    diff = run_zero(cert, {"X": D1})["S"] - run_zero(cert, {"X": D2})["S"]
    declared = math.sqrt(2) * r**2 / n
    assert np.linalg.norm(diff) == pytest.approx(declared, rel=1e-12)
    rng = np.random.default_rng(3)
    for _ in range(50):  # random neighbours stay within it
        A = rng.normal(size=(n, 3)) * 3
        B = A.copy()
        B[rng.integers(n)] = rng.normal(size=3) * 3
        d = run_zero(cert, {"X": A})["S"] - run_zero(cert, {"X": B})["S"]
        assert np.linalg.norm(d) <= declared * (1 + 1e-12)


def test_projection_keeps_separated_means_apart() -> None:
    rng = np.random.default_rng(0)
    n, d, k = 4000, 20, 2
    means = np.zeros((2, d))
    means[0, 0], means[1, 1] = 8.0, -8.0
    labels = rng.integers(2, size=n)
    data = means[labels] + rng.normal(size=(n, d))
    plan, vid = _pca_plan(n=n, d=d, k=k, radius=20.0, rho=1.0)
    V = plan.run({"X": data}, noise=dp.SeededNoise(1)).released["V"]
    assert V.shape == (d, k)
    # the mean difference lies in the released subspace (up to the DTTZ14 error)
    diff = means[0] - means[1]
    assert np.linalg.norm(V.T @ diff) / np.linalg.norm(diff) > 0.98


def test_project_node_maps_rows() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=3)
    P = N.Project(basis=b.public([[1.0], [1.0]]), center=b.public([1.0, 0.0]))(X)
    cert = certify(b.build(s=N.GaussianMech()(N.Sum()(N.Clip(radius=100.0)(P)))))
    out = run_zero(cert, {"X": np.array([[1.0, 2.0], [3.0, 4.0], [0.0, 0.0]])})["s"]
    assert out == pytest.approx([2.0 + 6.0 - 1.0])


def test_top_eigenvectors_order_and_nan_policy() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    V = N.TopEigenvectors(k=2)(b.public([[1.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 2.0]]))
    X = b.source("X", dp.Vectors(d=1), n=3)
    cert = certify(b.build(V=V, c=N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(X)))))
    out = execute(cert, {"X": np.zeros((3, 1))}, dp.SeededNoise(0), NumpyBackend()).released["V"]
    assert np.abs(out[:, 0]) == pytest.approx([0, 1, 0]) and np.abs(out[:, 1]) == pytest.approx([0, 0, 1])
    with pytest.raises(ValueError, match="positive integer"):
        N.TopEigenvectors(k=0)


def test_project_refuses_wrong_basis_shape() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=3), n=3)
    P = N.Project(basis=b.public([[1.0], [1.0]]))(X)
    with pytest.raises(dp.errors.DomainError, match="basis"):
        certify(b.build(s=N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(P)))))
