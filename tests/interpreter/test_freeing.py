"""The interpreter drops each value once its last reader has run (released values and outputs stay),
persists a value several nodes read, and the numpy backend's fused row maps reduce exactly like the
eager arrays."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import ZeroNoise

import dpflow as dp
from dpflow import nodes as N
from dpflow.interpreter import numpy_backend
from dpflow.interpreter.numpy_backend import MappedRows, NumpyBackend
from dpflow.interpreter.run import Freed, _Run, prepare_data
from dpflow.nodes.types import ReleasedT, RowsT
from dpflow.planner.certify import certify


class Counting(NumpyBackend):
    def __init__(self) -> None:
        self.persisted: list[Any] = []

    def persist(self, X: Any) -> Any:
        self.persisted.append(X)
        return super().persist(X)


def _plan() -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=3), n=400)
    C = N.Clip(radius=2.0)(X)  # read twice: persisted
    m = N.GaussianMech()(N.Mean()(C))
    s = N.GaussianMech()(N.SecondMoment()(N.Clip(radius=1.0)(C)))
    return b.build(m=m, s=s)


def test_only_released_values_and_sizes_are_left(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(numpy_backend, "BLOCK_BYTES", 256)  # lazy maps
    cert = certify(_plan())
    backend = Counting()
    run = _Run(cert, prepare_data(cert, {"X": np.ones((400, 3))}), ZeroNoise(), backend)
    env = run.space_values(cert.space, {})
    kinds = {k: type(cert.space.types[k]) for k, v in env.items() if not isinstance(v, Freed)}
    assert set(kinds.values()) == {ReleasedT}, kinds
    freed_rows = [r.id for r in cert.space.order if isinstance(cert.space.types[r.id], RowsT)]
    assert all(env[i] == Freed((400,)) and backend.nrows(env[i]) == 400 for i in freed_rows)
    clip2 = next(r.id for r in cert.space.order if isinstance(r.node, N.Clip) and r.node.radius == 2.0)
    assert len(backend.persisted) == 1 and isinstance(backend.persisted[0], MappedRows), clip2


def test_freeing_does_not_change_the_release() -> None:
    cert = certify(_plan())
    X = np.random.default_rng(0).normal(size=(400, 3)) * 3
    keep = _Run(cert, prepare_data(cert, {"X": X}), dp.SeededNoise(5), NumpyBackend())
    keep.frees = False
    full = keep.space_values(cert.space, {})
    free = _Run(cert, prepare_data(cert, {"X": X}), dp.SeededNoise(5), NumpyBackend()).space_values(cert.space, {})
    for _, nid in cert.plan.outputs:
        assert np.array_equal(full[nid], free[nid])


def test_a_recurse_loop_frees_its_rounds_and_keeps_the_state() -> None:
    from dpflow.estimators import gaussian as G

    plan = G.mean(d=4, n=2000, budget=dp.ZCDP(0.5), R=10.0, t=3)
    cert = certify(plan)
    X = np.random.default_rng(1).normal(size=(2000, 4)) + 2.0
    run = _Run(cert, prepare_data(cert, {"X": X}), dp.SeededNoise(1), Counting())
    env = run.space_values(cert.space, {})
    assert all(isinstance(v, Freed) or isinstance(cert.space.types[k], ReleasedT) for k, v in env.items())
    assert np.linalg.norm(plan.run({"X": X}, noise=dp.SeededNoise(1)).released["mean"] - 2.0) < 0.5


@pytest.mark.parametrize("n", [0, 1, 7, 1001])
def test_fused_reductions_equal_the_eager_ones(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(numpy_backend, "BLOCK_BYTES", 64)  # blocks of 2 rows: many blocks
    rng = np.random.default_rng(n)
    X = rng.normal(size=(n, 4)) * 10
    be = NumpyBackend()
    M = be.row_map(be.row_map(X, lambda Z: Z * 2.0 - 1.0), lambda Z: np.abs(Z))
    eager = np.abs(X * 2.0 - 1.0)
    assert M.shape == eager.shape and be.nrows(M) == n
    np.testing.assert_allclose(be.tree_sum(M), eager.sum(axis=0), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(be.gram(M), eager.T @ eager, rtol=1e-12, atol=1e-9)
    edges = np.array([0.0, 5.0, 20.0])
    col = be.row_map(M, lambda Z: Z[:, 0])
    assert be.histogram(col, edges).tolist() == be.histogram(eager[:, 0], edges).tolist()
    assert np.array_equal(np.asarray(M), eager) and np.array_equal(be.persist(M), eager)


def test_a_lazy_map_runs_under_the_error_state_it_was_given() -> None:
    be = NumpyBackend()
    with np.errstate(all="ignore"):
        M = be.row_map(np.array([[1e308, 0.0]]), lambda Z: Z * 10.0)
    with np.errstate(all="raise"):
        assert np.isinf(be.tree_sum(M)[0])  # no FloatingPointError: the map's own state applies


def test_pair_differences_by_rows_of_pairs() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=5)
    plan = b.build(s=N.GaussianMech()(N.SecondMoment()(N.Clip(radius=100.0)(N.PairDifferences()(X)))))
    D = np.arange(10.0).reshape(5, 2) ** 2
    out = certify(plan)
    env = _Run(out, prepare_data(out, {"X": D}), ZeroNoise(), NumpyBackend()).space_values(out.space, {})
    P = (D[0:4:2] - D[1:4:2]) / np.sqrt(2.0)
    np.testing.assert_allclose(env[dict(plan.outputs)["s"]], P.T @ P / 2, rtol=1e-12)


def test_a_map_overwrites_only_arrays_no_one_else_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpflow.nodes.transforms import project_ball

    monkeypatch.setattr(numpy_backend, "BLOCK_BYTES", 1 << 10)  # 32 rows per block
    X = np.random.default_rng(8).normal(size=(1000, 4)) * 3
    X0 = X.copy()
    calls: list[int] = []

    def alt(Z: np.ndarray) -> np.ndarray:
        calls.append(1)
        return project_ball(Z, None, 2.0, True)

    def plain(Z: np.ndarray) -> np.ndarray:
        return project_ball(Z, None, 2.0)

    be = NumpyBackend()
    ref = project_ball(X, None, 2.0)
    for first in (None, lambda Z: Z, lambda Z: Z[:, :4]):  # the base itself, or views of it
        M = be.row_map(X if first is None else be.row_map(X, first), plain, alt)
        assert np.array_equal(be.persist(M), ref)
        np.testing.assert_allclose(be.gram(M), ref.T @ ref, rtol=1e-12)
        assert not calls and np.array_equal(X, X0)
    M = be.row_map(be.row_map(X, lambda Z: Z * 1.0), plain, alt)  # a new array per block: overwritten
    assert np.array_equal(be.persist(M), ref) and len(calls) == 32 and np.array_equal(X, X0)
