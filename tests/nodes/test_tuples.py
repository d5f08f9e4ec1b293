"""Group-level aggregation of k-tuples (mixtures.md 8; ``dpflow.nodes.tuples``), the block k-means of
``SubsampleAggregate`` and the two stability histograms' rules for counts where one record moves many bins:
the declared sensitivities are pinned and reached by adversarial neighbours, the keys of a group depend on
that group alone, and the thresholds are pinned to their formulas."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.nodes.blocks import block_kmeans, block_statistic
from dpflow.nodes.tuples import (
    cell_centres,
    group_cell_keys,
    group_levels,
    level_grid,
    merged_cells,
    tuple_keys,
    tuple_points,
)
from dpflow.planner.certify import certify


def _counts(X: np.ndarray, k: int, seed: int = 0, div: float = 4.0) -> dict[int, int]:
    uk, c = np.unique(group_cell_keys(tuple_points(X, k), seed, div), return_counts=True)
    return dict(zip(uk.tolist(), c.tolist(), strict=True))


def _diff(a: dict[int, int], b: dict[int, int]) -> np.ndarray:
    return np.array([a.get(key, 0) - b.get(key, 0) for key in set(a) | set(b)], dtype=float)


def _declared(relation: str, k: int) -> tuple[float, float, float]:
    b = dp.PlanBuilder(budget=dp.ApproxZCDP(1, 1e-6), neighbors=relation)
    X = b.source("X", dp.Vectors(d=2 * k), n=10 if relation == "replace" else None)
    c = N.TupleCellCounts(k=k)(X)
    cert = certify(b.build(h=N.GaussianStabilityHistogram(delta=1e-7)(c)))
    s = cert.space.types[c.id]
    return s.l1.coef, s.l2.coef, s.linf.coef


def test_declared_cell_count_sensitivities_are_2k_and_sqrt_2k_under_replace_k_under_add_remove() -> None:
    for k in (2, 3, 5):
        assert _declared("replace", k) == (2 * k, math.sqrt(2 * k), 1.0)
        assert _declared("add_remove", k) == (k, math.sqrt(k), 1.0)


def test_a_replaced_group_reaches_the_declared_l1_and_l2_exactly() -> None:
    """Worst case: the old group's k points in k distinct cells, the new group's in k other distinct cells
    (same closest-pair distance, so the same level), all other groups elsewhere: 2k bins move by 1."""
    k, w = 3, 2
    base = np.array([[0.0, 0.0, 10.0, 0.0, 20.0, 0.0]] * 6)
    other = base + np.array([0.0, 100.0] * k)
    X = np.vstack([base, other[:1]])
    Y = X.copy()
    Y[-1] = base[0] + np.array([0.0, -100.0] * k)
    diff = _diff(_counts(X.reshape(-1, k * w), k), _counts(Y.reshape(-1, k * w), k))
    l1, l2, linf = _declared("replace", k)
    assert np.abs(diff).sum() == l1 and math.isclose(float(np.linalg.norm(diff)), l2) and np.abs(diff).max() == linf
    # a group's distinct points are in distinct cells (side <= closest pair / 4) unless clamped at the edge
    # of the key range (declared policy); there the group counts once: counts are of groups, not points
    far = np.array([[1e12, 0.0, 1e12 + 1.0, 0.0, 1e12 + 3.0, 0.0]])
    assert list(_counts(far, k).values()) == [1]


def test_random_neighbours_move_each_count_by_at_most_one_and_l1_by_at_most_2k() -> None:
    rng = np.random.default_rng(0)
    k = 3
    for trial in range(200):
        X = rng.normal(size=(20, k * 2)) * rng.choice([0.3, 3.0, 30.0])
        if trial % 3 == 0:  # tuples of a mixture: the same level for most groups
            X = np.tile([0.0, 0.0, 8.0, 0.0, 0.0, 8.0], (20, 1)) + rng.normal(size=(20, 6)) * 0.3
        Y = X.copy()
        Y[rng.integers(20)] = rng.normal(size=k * 2) * rng.choice([0.3, 3.0, 30.0])
        diff = _diff(_counts(X, k, seed=trial), _counts(Y, k, seed=trial))
        assert np.abs(diff).max(initial=0) <= 1 and np.abs(diff).sum() <= 2 * k
        assert float(np.linalg.norm(diff)) <= math.sqrt(2 * k) + 1e-12
        assert np.count_nonzero(diff) <= 2 * k


def test_keys_and_levels_of_a_group_depend_on_that_group_alone() -> None:
    rng = np.random.default_rng(1)
    P = rng.normal(size=(30, 3, 2)) * 5
    lv = group_levels(P, 3)
    lv2 = group_levels(np.concatenate([P[:1], rng.normal(size=(50, 3, 2)) * 100]), 3)
    assert lv[0] == lv2[0]
    assert set(group_cell_keys(P[:1], 3, 4.0)) == set(group_cell_keys(P[:1], 3, 4.0)) <= set(group_cell_keys(P, 3, 4.0))
    # the level is floor(log2 of the closest pair + u), u public
    u = np.random.default_rng(3).uniform()
    m = min(np.linalg.norm(P[0, i] - P[0, j]) for i in range(3) for j in range(i + 1, 3))
    assert lv[0] == math.floor(math.log2(m) + u)
    # coinciding points: the declared level -60, and non-finite entries count as 0
    assert group_levels(np.zeros((1, 2, 1)), 0)[0] == -60
    assert tuple_points(np.array([[np.inf, 1.0]]), 2).tolist() == [[[0.0], [1.0]]]


def test_level_grids_and_keys_decode() -> None:
    side, shift = level_grid(np.array([3, 4]), 5, 3, 4.0)
    u = np.random.default_rng(5).uniform()
    assert side[0] == pytest.approx(2 ** (3 - u) / 4.0) and side[1] == pytest.approx(2 * side[0])
    assert np.all((0 <= shift) & (shift < 1))
    keys = tuple_keys(np.array([3, -2]), np.array([[1, -4, 7], [0, 0, 0]]))
    assert len(set(keys.tolist())) == 2
    c, s = cell_centres(keys, 3, 5, 4.0)
    assert s[0] == pytest.approx(side[0])
    assert np.allclose(c[0], (np.array([1, -4, 7]) + shift[0] + 0.5) * side[0])


def test_merged_cells_join_face_neighbours_but_never_components_a_scale_apart() -> None:
    cs = np.array([[0.5, 0.5], [1.5, 0.5], [5.5, 0.5]])
    out = merged_cells(cs, np.ones(3), np.array([10.0, 4.0, 8.0]), 3)
    assert [n for _, n in out] == [14.0, 8.0] and np.allclose(out[0][0], [(0.5 * 10 + 1.5 * 4) / 14, 0.5])
    # diagonal neighbours (sqrt 2 sides apart) stay apart: MERGE is 1.01 sides
    assert len(merged_cells(np.array([[0.5, 0.5], [1.5, 1.5]]), np.ones(2), np.array([3.0, 2.0]), 2)) == 2
    # at most k clusters, heaviest first
    assert len(merged_cells(cs, np.ones(3), np.array([1.0, 2.0, 3.0]), 1)) == 1
    # two components a scale apart, answers at the cell centres' worst offsets: never merged when
    # div > 1 + sqrt(w) (the rule behind dpflow.estimators.mixtures.sa_div)
    rng = np.random.default_rng(2)
    for w in (1, 2, 3, 5):
        div = 1.5 + math.sqrt(w)
        side = 1.0 / div
        for _ in range(200):
            a = rng.normal(size=w)
            b = a + _unit(rng, w)
            ca = (np.floor(a / side) + 0.5) * side
            cb = (np.floor(b / side) + 0.5) * side
            assert len(merged_cells(np.array([ca, cb]), np.array([side, side]), np.array([2.0, 1.0]), 2)) == 2


def _unit(rng: np.random.Generator, w: int) -> np.ndarray:
    v = rng.normal(size=w)
    out: np.ndarray = v / np.linalg.norm(v)
    return out


def test_block_kmeans_fits_each_block_from_its_own_rows() -> None:
    rng = np.random.default_rng(3)
    comps = np.array([[0.0, 0.0], [20.0, 0.0], [0.0, 20.0]])
    X = comps[rng.integers(3, size=900)] + rng.normal(size=(900, 2))
    C = block_statistic(X, 9, "kmeans", 3).reshape(100, 3, 2)
    err = np.array([[np.linalg.norm(c - comps, axis=1).min() for c in g] for g in C])
    assert np.median(err) < 1.0
    Y = X.copy()
    Y[4] = [1e6, -1e6]  # a replaced record of block 0 changes block 0's answer only
    D = block_statistic(Y, 9, "kmeans", 3).reshape(100, 3, 2)
    assert not np.allclose(D[0], C[0]) and np.array_equal(D[1:], C[1:])
    assert block_kmeans(np.zeros((2, 4, 1)), 2).shape == (2, 2, 1)
    # centres are means of block rows: inside the block's box
    assert np.all(C.min(axis=(0, 1)) >= X.min(axis=0) - 1e-9) and np.all(C.max(axis=(0, 1)) <= X.max(axis=0) + 1e-9)


def test_kmeans_statistic_keeps_the_box_and_bounds_the_norm_by_sqrt_k_r() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    G = N.SubsampleAggregate(size=4, statistic="kmeans", k=3)(b.source("X", dp.Vectors(d=2, l2_bound=2.0), n=40))
    cert = certify(b.build(s=N.GaussianMech()(N.Sum()(G))))
    dom = cert.space.types[G.id].domain
    assert dom.d == 6 and dom.l2_bound.coef == pytest.approx(2.0 * math.sqrt(3))
    with pytest.raises(dp.errors.DpflowError, match="k >= 1"):
        b2 = dp.PlanBuilder(budget=dp.ZCDP(1))
        bad = N.SubsampleAggregate(size=4, statistic="kmeans", k=0)(b2.source("X", dp.Vectors(d=2), n=40))
        certify(b2.build(s=N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(bad)))))


def test_gaussian_stability_histogram_pins_sigma_threshold_and_cost() -> None:
    node = N.GaussianStabilityHistogram(delta=1e-7)
    rho = Fraction(1, 8)
    sigma, t = node.scale_threshold(6.0, math.sqrt(6.0), rho)
    assert sigma == pytest.approx(math.sqrt(6.0) / math.sqrt(2 * 0.125), rel=1e-9) and sigma >= math.sqrt(6.0) / 0.5
    assert t == pytest.approx(1.0 + sigma * math.sqrt(2.0 * math.log(6.0 / 1e-7)), rel=1e-9)
    assert t >= 1.0 + sigma * math.sqrt(2.0 * math.log(6.0 / 1e-7))
    # one one-sided bin (count 1) passes with probability <= delta / D (the subgaussian tail)
    assert math.exp(-((t - 1) ** 2) / (2 * sigma**2)) <= 1e-7 / 6.0 * (1 + 1e-9)
    cost = node.cost(rho, "zcdp")
    assert cost.rho == rho and cost.delta0 == Fraction(1e-7)
    with pytest.raises(dp.errors.DpflowError):
        node.cost(rho, "pure")


def test_gaussian_stability_histogram_releases_only_heavy_bins_and_refuses_stable_inputs() -> None:
    b = dp.PlanBuilder(budget=dp.ApproxZCDP(1, 1e-6))
    X = b.source("X", dp.Reals(), n=2000)
    h = N.GaussianStabilityHistogram(delta=1e-7)(N.BinCounts(width=1.0)(X))
    data = np.concatenate([np.full(1990, 3.5), np.arange(10) * 10.0 + 100.5])[:, None]
    keys, counts = b.build(h=h).run({"X": data}, noise=dp.SeededNoise(0)).released["h"]
    assert keys.tolist() == [3] and abs(counts[0] - 1990) < 30
    keys, _ = b.build(h=h).run({"X": data}, noise=dp.SecureNoise()).released["h"]
    assert keys.tolist() == [3]
    b2 = dp.PlanBuilder(budget=dp.ApproxZCDP(1, 1e-6))
    Y = b2.source("X", dp.Reals(), n=20)
    twice = N.SubsampleAggregate(size=1, statistic="mean")(Y)
    with pytest.raises(dp.errors.DpflowError, match="linf 1"):
        certify(b2.build(h=N.GaussianStabilityHistogram(delta=1e-7)(N.Sum()(N.Clip(radius=1.0)(twice)))))


def test_laplace_stability_histogram_threshold_for_l1_d() -> None:
    node = N.StabilityHistogram(delta=1e-7)
    b6, t6 = node.scale_threshold(6.0, 0.5)
    assert b6 == pytest.approx(12.0) and t6 == pytest.approx(1.0 + 12.0 * math.log(6.0 / 2e-7))
    b2, t2 = node.scale_threshold(2.0, 0.5)
    assert b2 == pytest.approx(4.0) and t2 == pytest.approx(1.0 + 4.0 * math.log(2.0 / 2e-7))
    b1, t1 = node.scale_threshold(1.0, 0.5)
    assert b1 == pytest.approx(2.0) and t1 == pytest.approx(1.0 + 2.0 * math.log(1.0 / 2e-7))
    # D one-sided bins of count 1 pass with probability <= D exp(-(t - 1) / b) / 2 = delta (the bound of the
    # docstring: delta <= max(a, b) p <= D p)
    assert 6 * math.exp(-(t6 - 1) / b6) / 2 <= 1e-7 * (1 + 1e-9)
    b = dp.PlanBuilder(budget=dp.ApproxZCDP(1, 1e-6))
    h = N.StabilityHistogram(delta=1e-7)(N.TupleCellCounts(k=3)(b.source("X", dp.Vectors(d=6), n=50)))
    assert "l1 = 6" in "\n".join(e.sensitivity for e in certify(b.build(h=h)).ledger.entries)


def test_tuple_centres_lift_through_the_basis_and_not_found_is_nan() -> None:
    keys = tuple_keys(np.array([2, 2]), np.array([[1], [-3]]))
    hist = (keys, np.array([50.0, 40.0]))
    out = N.TupleCenters(k=3, w=1).evaluate([hist], None)  # type: ignore[arg-type]
    c, _ = cell_centres(keys, 1, 0, 4.0)
    assert np.allclose(out[:2, 0], c[:, 0]) and np.all(np.isnan(out[2]))
    lifted = N.TupleCenters(k=3, w=1).evaluate([hist, np.array([[1.0], [1.0]]), np.array([10.0, 0.0])], None)  # type: ignore[arg-type]
    assert lifted.shape == (3, 2) and np.allclose(lifted[0], [10.0 + c[0, 0], c[0, 0]])
    empty = N.TupleCenters(k=2, w=1).evaluate([(np.zeros(0, dtype=np.int64), np.zeros(0))], None)  # type: ignore[arg-type]
    assert np.all(np.isnan(empty))
    with pytest.raises(ValueError, match="at most 6"):
        N.TupleCenters(k=2, w=7)
    with pytest.raises(ValueError, match="k must be >= 2"):
        N.TupleCellCounts(k=1)


def test_partition_by_nearest_splits_by_the_nearest_finite_centre() -> None:
    node = N.PartitionByNearest(k=2, centers=dp.PlanBuilder(budget=dp.ZCDP(1)).public([[0.0], [10.0]]))

    class Ctx:
        def __init__(self, v: np.ndarray) -> None:
            self.v = v

        def value(self, ref: object) -> np.ndarray:
            return self.v

    X = np.array([[1.0], [9.0], [5.0], [np.nan], [-100.0]])
    a, c, rest = node.evaluate([X], Ctx(np.array([[0.0], [10.0]])))  # type: ignore[arg-type]
    assert a[:, 0].tolist() == [1.0, 5.0, -100.0] and c[:, 0].tolist() == [9.0] and np.isnan(rest[0, 0])
    a, c, rest = node.evaluate([X], Ctx(np.array([[np.nan], [10.0]])))  # type: ignore[arg-type]
    assert len(a) == 0 and len(c) == 4 and len(rest) == 1
    a, c, rest = node.evaluate([X], Ctx(np.full((2, 1), np.nan)))  # type: ignore[arg-type]
    assert len(a) == len(c) == 0 and len(rest) == 5


def test_tuple_nearest_gives_each_group_one_row_whatever_the_order_of_its_points() -> None:
    """TupleNearest is a row map: each group's output row is its point nearest to the location (ties to the
    earlier position), the same for every order of the group's points, so a replaced group changes exactly
    one output row (stability 1, carried by the planner); a NaN location reads the first point."""
    C = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])

    class Ctx:
        def __init__(self, v: np.ndarray) -> None:
            self.v = v

        def value(self, ref: object) -> np.ndarray:
            return self.v

    rng = np.random.default_rng(3)
    P = C[None, :, :] + rng.normal(scale=2.0, size=(200, 3, 2))
    node = N.TupleNearest(k=3, centers=dp.PlanBuilder(budget=dp.ZCDP(1)).public(C.tolist()), index=1)
    out = node.evaluate([P.reshape(200, 6)], Ctx(C))  # type: ignore[arg-type]
    want = P[np.arange(200), np.argmin(np.sum((P - C[1]) ** 2, axis=2), axis=1)]
    assert np.array_equal(out, want)
    for perm in ((2, 0, 1), (1, 2, 0)):
        again = node.evaluate([P[:, perm, :].reshape(200, 6)], Ctx(C))  # type: ignore[arg-type]
        assert np.array_equal(again, out)
    Q = P.copy()
    Q[7] = rng.normal(scale=50.0, size=(3, 2))  # a replaced group
    moved = node.evaluate([Q.reshape(200, 6)], Ctx(C))  # type: ignore[arg-type]
    assert np.flatnonzero(np.any(moved != out, axis=1)).tolist() == [7]
    tie = node.evaluate([np.array([[10.0, 1.0, 10.0, -1.0, 0.0, 0.0]])], Ctx(C))  # type: ignore[arg-type]
    assert tie.tolist() == [[10.0, 1.0]]
    nan = node.evaluate([P[:2].reshape(2, 6)], Ctx(np.full((3, 2), np.nan)))  # type: ignore[arg-type]
    assert np.array_equal(nan, P[:2, 0])
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    G = b.source("X", dp.Vectors(d=6), n=10)
    Y = N.TupleNearest(k=3, centers=b.public(C.tolist()), index=2)(G)
    cert = certify(b.build(s=N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(Y)))))
    assert cert.space.types[Y.id].domain.d == 2 and cert.space.types[Y.id].stability == 1
    with pytest.raises(ValueError, match="index"):
        N.TupleNearest(k=3, centers=b.public(C.tolist()), index=3)
    with pytest.raises(dp.errors.DomainError, match="3 x 2"):
        certify(b.build(s=N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(
            N.TupleNearest(k=3, centers=b.public([[0.0]]), index=0)(G))))))
