"""SubsampleAggregate: the block rule (one replaced record changes exactly one block row), the bounds
each block statistic declares, the add/remove refusal, and hostile data (no data-dependent exception)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import RowsCtx

import dpflow as dp
from dpflow import nodes as N
from dpflow.errors import DomainError
from dpflow.nodes.blocks import block_statistic


def _naive(X: np.ndarray, m: int, stat: str, k: int = 1) -> np.ndarray:
    out = []
    for j in range(X.shape[0] // m):
        Y = X[j * m:(j + 1) * m]
        if stat == "mean":
            out.append(Y.mean(axis=0))
        elif stat == "median":
            out.append(np.median(Y, axis=0))
        else:
            S = Y.T @ Y / m
            _, sv, vh = np.linalg.svd(Y)  # relative accuracy for the small eigenvalues of a wide spectrum
            if stat == "second_moment":
                out.append(S.ravel())
            elif stat == "log2_eigenvalues":
                out.append(2 * np.log2(sv) - np.log2(m))
            else:
                out.append((vh[:k].T @ vh[:k]).ravel())
    return np.array(out)


@pytest.mark.parametrize("stat", ["mean", "median", "second_moment", "log2_eigenvalues", "top_projection"])
def test_block_statistic_matches_per_block_loop(stat: str) -> None:
    X = np.random.default_rng(1).normal(size=(103, 4)) * [1e-6, 1.0, 1e3, 1e6]
    got = block_statistic(X, 10, stat, k=2)
    want = _naive(X, 10, stat, k=2)
    assert got.shape == want.shape == (10, 16 if stat in ("second_moment", "top_projection") else 4)
    if stat == "log2_eigenvalues":
        np.testing.assert_allclose(got, want, atol=1e-6)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())


@pytest.mark.parametrize("stat", ["mean", "median", "second_moment", "log2_eigenvalues", "top_projection"])
def test_replacing_one_record_changes_exactly_one_block(stat: str) -> None:
    rng = np.random.default_rng(2)
    X = rng.normal(size=(60, 3))
    for i in (0, 17, 59):
        X2 = X.copy()
        X2[i] = [1e3, -1e3, 5.0]
        a, b = block_statistic(X, 6, stat), block_statistic(X2, 6, stat)
        changed = np.flatnonzero(np.any(a != b, axis=1))
        assert list(changed) == [i // 6]


def test_remainder_rows_are_dropped() -> None:
    X = np.arange(14.0).reshape(7, 2)
    assert block_statistic(X, 3, "mean").shape == (2, 2)
    X2 = X.copy()
    X2[6] = 1e9  # the dropped row
    np.testing.assert_array_equal(block_statistic(X, 3, "mean"), block_statistic(X2, 3, "mean"))


def test_projection_rows_have_frobenius_norm_sqrt_k_and_worst_pair_sqrt_2k() -> None:
    X = np.random.default_rng(3).normal(size=(50, 5))
    P = block_statistic(X, 10, "top_projection", k=2)
    np.testing.assert_allclose(np.linalg.norm(P, axis=1), math.sqrt(2), rtol=1e-12)
    # worst case: orthogonal subspaces, ||P - P'||_F = sqrt(2k) <= the declared diameter 2 sqrt(k)
    e = np.eye(5)
    w = np.repeat([1.0, 2.0], 5)[:, None]
    a = block_statistic(np.repeat(e[:2], 5, axis=0) * w, 10, "top_projection", 2)
    b = block_statistic(np.repeat(e[2:4], 5, axis=0) * w, 10, "top_projection", 2)
    assert np.linalg.norm(a - b) == pytest.approx(2.0)


def _plan(stat: str, k: int = 1, domain: dp.Vectors | None = None, n: int = 40) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    X = b.source("X", domain or dp.Vectors(d=3), n=n)
    B = N.SubsampleAggregate(size=4, statistic=stat, k=k)(X)
    rows = B if stat in ("top_projection", "mean", "second_moment") and domain is not None or stat == "top_projection" \
        else N.Clip(radius=1.0)(B)
    return b.build(m=N.GaussianMech()(N.Mean()(rows)))


def test_declared_sensitivities_pin_the_block_bounds() -> None:
    # top_projection: l2 bound sqrt(k) -> Mean over 10 blocks has l2 sensitivity 2 sqrt(k) / 10
    text = _plan("top_projection", k=2).check().entries[-1].sensitivity
    assert "0.282843" in text  # 2 sqrt(2) / 10
    # mean keeps an l2 ball: 2 * 1.5 / 10
    assert "0.3" in _plan("mean", domain=dp.Vectors(d=3, l2_bound=1.5)).check().entries[-1].sensitivity
    # second moment of rows with ||x|| <= 1.5 has Frobenius norm <= 2.25: 2 * 2.25 / 10
    assert "0.45" in _plan("second_moment", domain=dp.Vectors(d=3, l2_bound=1.5)).check().entries[-1].sensitivity


def test_refused_under_add_remove_and_for_bad_parameters() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0), neighbors="add_remove")
    X = b.source("X", dp.Vectors(d=2))
    with pytest.raises(DomainError, match="add/remove one record shifts every later block"):
        b.build(m=N.GaussianMech()(N.Mean()(N.SubsampleAggregate(size=2, statistic="top_projection")(X)))).check()
    with pytest.raises(DomainError, match="do not fill one block"):
        _plan("mean", n=3).check()
    with pytest.raises(DomainError, match="1 <= k <= 3"):
        _plan("top_projection", k=4).check()
    with pytest.raises(ValueError, match="statistic must be one of"):
        N.SubsampleAggregate(size=2, statistic="variance")
    with pytest.raises(ValueError, match="integer >= 1"):
        N.SubsampleAggregate(size=0, statistic="mean")


@pytest.mark.parametrize("X", [
    np.zeros((0, 3)), np.full((40, 3), 7.0), np.full((40, 3), np.nan), np.full((40, 3), 1e300),
    np.full((40, 3), -np.inf), np.vstack([np.full((20, 3), 1e300), np.full((20, 3), 1e-300)]),
])
@pytest.mark.parametrize("stat", ["median", "log2_eigenvalues", "top_projection", "second_moment"])
def test_hostile_blocks_raise_nothing(X: np.ndarray, stat: str) -> None:
    out = block_statistic(X, 4, stat)
    assert out.shape[0] == X.shape[0] // 4
    if stat == "top_projection" and len(out):
        np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-12)
    if stat == "log2_eigenvalues" and len(out) and np.all(X == 1e300):
        assert out[0, 0] == pytest.approx(math.log2(3) + 2 * math.log2(1e300))


def test_runs_in_a_plan_with_the_reference_in_the_ledger() -> None:
    plan = _plan("top_projection")
    entry = [e for e in plan.check().entries if e.kind == "SubsampleAggregate"][0]
    assert "Nissim-Raskhodnikova-Smith" in str(entry.reference)
    X = np.random.default_rng(0).normal(size=(40, 3)) * [100.0, 1.0, 1.0]
    assert plan.run({"X": X}, noise=dp.SeededNoise(0)).released["m"].shape == (9,)


def test_shuffle_takes_blocks_in_a_public_permutation_and_a_replaced_record_still_changes_one() -> None:
    """``shuffle=seed``: the blocks of the rows in the order of ``default_rng(seed).permutation(n)`` (a function
    of the public seed and n only), so a replaced record still changes exactly one block row: the one holding
    its permuted position.  Rows stored in order (two halves) give blocks of one half each without it, mixed
    blocks with it; the ledger names the permutation."""
    rng = np.random.default_rng(3)
    X = np.concatenate([rng.normal(size=(30, 2)), rng.normal(size=(30, 2)) + 50.0])
    perm = np.random.default_rng(7).permutation(60)
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    node = N.SubsampleAggregate(size=6, statistic="mean", shuffle=7)
    G = node(N.Clip(radius=100.0)(b.source("X", dp.Vectors(d=2), n=60)))
    plan = b.build(m=N.GaussianMech()(N.Mean()(G)))
    entry = [e for e in plan.check().entries if e.kind == "SubsampleAggregate"][0]
    assert "public permutation of seed 7" in entry.derivation
    ctx = RowsCtx(dp.Vectors(d=2, l2_bound=100.0))
    out = node.evaluate([X], ctx)  # type: ignore[arg-type]
    np.testing.assert_array_equal(out, block_statistic(X[perm], 6, "mean"))
    plain = N.SubsampleAggregate(size=6, statistic="mean").evaluate([X], ctx)  # type: ignore[arg-type]
    assert set(np.round(plain[:, 0] / 50)) == {0.0, 1.0}  # every consecutive block is one half
    assert np.all((out[:, 0] > 2) & (out[:, 0] < 48))  # every shuffled block mixes the halves
    where = np.argsort(perm)  # row i sits at position where[i] of the permuted order
    for i in (0, 29, 59):
        X2 = X.copy()
        X2[i] = [-1e3, 1e3]
        changed = np.flatnonzero(np.any(node.evaluate([X2], ctx) != out, axis=1))  # type: ignore[arg-type]
        assert list(changed) == [where[i] // 6]
