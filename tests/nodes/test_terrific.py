"""TerrificBall (mixtures.md 4.2-4.3): the terrific score's sensitivity on adversarial neighbours (found
by search, pinned: the declared constants cannot be lowered), Lemma A, the grid and shell counts, and the
whole PTerrificBall on separated and on unsplittable data (a released "not found", never an exception)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import run_zero

import dpflow as dp
from dpflow import nodes as N
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.nodes.terrific import cell_coordinates, cell_keys, decode_key, r_bounds, terrific_sums
from dpflow.planner.certify import certify
from dpflow.planner.ledger import recompose

RADII = [0.5, 1.0, 2.0, 4.0]


def _declared(relation: str, t: int, lam: int = 1) -> float:
    b = dp.PlanBuilder(budget=dp.PureDP(1), neighbors=relation)
    X = b.source("X", dp.Vectors(d=1), n=8 if relation == "replace" else None)
    s = N.TerrificScores(radii=tuple(RADII), t=t, lam=lam)(X)
    cert = certify(b.build(j=N.AboveThreshold(threshold=1.0)(s)))
    stat = cert.space.types[s.id]
    assert stat.l1.coef == len(RADII) * stat.linf.coef and stat.l2.coef == 2 * stat.linf.coef
    return float(stat.linf.coef)


def test_declared_sensitivities_are_t_2_plus_lam_and_t_1_plus_max_1_lam() -> None:
    assert _declared("replace", 4) == 12.0 and _declared("add_remove", 4) == 8.0
    assert _declared("replace", 3, lam=2) == 12.0 and _declared("add_remove", 3, lam=2) == 9.0


def test_adversarial_neighbours_found_by_search_exceed_the_next_smaller_rule() -> None:
    """Points on a lattice of step 0.5 put distances exactly on the radii (ties at every boundary).  The
    replace-one pair moves the score by 2.5 t > (1 + lam) t, the add/remove pair by 1.75 t > max(1, lam) t:
    neither constant can drop its ``+1``, and both stay within the declared bounds."""
    t = 4
    X = np.array([0.5, 1.0, 0.5, 3.0, 3.5, 2.5, 0.5, 2.5])[:, None]
    Y = np.array([0.5, 1.0, 0.5, 1.5, 3.5, 2.5, 0.5, 2.5])[:, None]
    moved = np.abs(terrific_sums(X, RADII, t, 3.0, 1) - terrific_sums(Y, RADII, t, 3.0, 1)).max()
    assert moved == 2.5 * t and 2 * t < moved <= 3 * t
    X = np.array([1.5, 1.5, 3.5, 1.5, 3.0, 0.0, 3.5, 3.5])[:, None]
    Z = np.array([1.5, 1.5, 1.5, 3.0, 0.0, 3.5, 3.5])[:, None]
    moved = np.abs(terrific_sums(X, RADII, t, 3.0, 1) - terrific_sums(Z, RADII, t, 3.0, 1)).max()
    assert moved == 1.75 * t and t < moved <= 2 * t


def test_random_and_targeted_neighbours_stay_within_the_bounds() -> None:
    rng = np.random.default_rng(11)
    for _ in range(300):
        n, t, lam = int(rng.integers(3, 12)), int(rng.integers(1, 6)), int(rng.integers(1, 3))
        X = rng.integers(0, 10, size=(n, 2)).astype(float) * 0.5
        S = terrific_sums(X, RADII, t, 3.0, lam)
        Y = X.copy()
        i = int(rng.integers(n))
        # targeted: move a point into the annulus of another (distance between r and 3r for r = 1)
        Y[i] = X[(i + 1) % n] + [1.5, 0.0] if rng.random() < 0.5 else rng.integers(0, 10, size=2) * 0.5
        assert np.abs(S - terrific_sums(Y, RADII, t, 3.0, lam)).max() <= t * (2 + lam)
        Z = np.delete(X, i, axis=0)
        assert np.abs(S - terrific_sums(Z, RADII, t, 3.0, lam)).max() <= t * (1 + max(1, lam))


def test_lemma_a_terrific_ball_gives_the_maximal_score() -> None:
    """A (2c+1, r, t)-terrific ball (c = 3, r = 1: t points within 1 of p, none in (1, 7], t beyond 7)
    gives L_T(2r) = t, i.e. t * L_T = t^2."""
    rng = np.random.default_rng(2)
    t = 30
    inner = rng.uniform(-0.7, 0.7, size=(t, 2))
    outer = rng.uniform(-1, 1, size=(t + 5, 2)) + [20.0, 0.0]
    s = terrific_sums(np.concatenate([inner, outer]), [2.0], t, 3.0, 1)
    assert s.tolist() == [t * t]


def test_grid_keys_decode_and_cells_are_per_row() -> None:
    cells = cell_coordinates(np.array([[0.2, 5.3, -7.9]]), 2.0, np.array([0.5, 0.0, 0.25]))
    assert cells.tolist() == [[-1, 2, -5]]
    k, ok = cell_keys(cells)
    assert ok and decode_key(int(k[0]), 3).tolist() == [-1.0, 2.0, -5.0]
    many = np.arange(16).reshape(2, 8)
    k, ok = cell_keys(many)
    assert not ok and k[0] != k[1] and np.all(k >= 0)


def _counts_plan(query: N.Query, relation: str = "replace") -> tuple[dp.Plan, str]:
    b = dp.PlanBuilder(budget=dp.PureDP(1), neighbors=relation)
    X = b.source("X", dp.Vectors(d=2), n=6 if relation == "replace" else None)
    s = b.add(query, (X.id,))
    return b.build(c=dp.handles.Released(b.add(N.LaplaceMech(), (s,)), b)), s


def test_grid_max_counts_move_by_at_most_one() -> None:
    plan, _ = _counts_plan(N.GridMaxCounts(radius=0.5, factor=2.0, tries=5, seed=1))
    cert = certify(plan)
    X = np.zeros((6, 2))
    Y = X.copy()
    Y[0] = [7.0, 7.0]
    a, b_ = run_zero(cert, {"X": X})["c"], run_zero(cert, {"X": Y})["c"]
    assert np.all(a == 6) and np.all(b_ == 5)  # one record leaves the one occupied cell: every answer drops by 1


def test_shell_counts_and_radii() -> None:
    b = dp.PlanBuilder(budget=dp.PureDP(1))
    X = b.source("X", dp.Vectors(d=2), n=5)
    c = N.ShellCounts(center=b.public([0.0, 0.0]), inner=b.public(1.0), outer=b.public(2.0))(X)
    cert = certify(b.build(c=N.LaplaceMech()(c)))
    data = np.array([[0.0, 1.0], [1.5, 0.0], [2.0, 0.0], [3.0, 0.0], [np.nan, 0.0]])
    assert run_zero(cert, {"X": data})["c"].tolist() == [1.0, 2.0, 2.0]  # NaN row: outside
    assert r_bounds(2.0, 3.0, 1.0) == (4.0, pytest.approx(4.8))


def _two_clusters(n: int, sep: float, seed: int, d: int = 2) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shift = np.zeros(d)
    shift[0] = sep
    return np.concatenate([rng.normal(size=(n // 2, d)), rng.normal(size=(n - n // 2, d)) + shift])


def _ball_plan(n: int, t: int, d: int = 2) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ApproxZCDP(2.0, 1e-6))
    Y = b.source("Y", dp.Vectors(d=d), n=n)
    ball = N.terrific_ball(Y, t=t, radii=N.radius_grid(0.25, 80.0), center=[0.0] * d, radius=100.0)
    return b.build(ball=ball)


def test_separated_clusters_give_a_pure_ball() -> None:
    plan = _ball_plan(4000, 1000)
    for seed in range(2):
        data = _two_clusters(4000, 30.0, seed)
        c, r = plan.run({"Y": data}, noise=dp.SeededNoise(seed)).released["ball"]
        assert np.isfinite(r)
        inside = np.linalg.norm(data - c, axis=1) <= r
        # the ball holds exactly one of the two clusters
        assert inside[:2000].all() != inside[2000:].all() and inside.sum() in (2000,)


def test_one_gaussian_is_not_found_and_nothing_raises() -> None:
    plan = _ball_plan(3000, 750)
    data = np.random.default_rng(5).normal(size=(3000, 2))
    c, r = plan.run({"Y": data}, noise=dp.SeededNoise(0)).released["ball"]
    assert math.isnan(r) and np.all(np.isnan(c))
    hostile = data.copy()
    hostile[:10] = np.nan
    hostile[10:20] = np.inf
    plan.run({"Y": hostile}, noise=dp.SeededNoise(1))


def test_exact_source_runs_and_ledger_recomposes() -> None:
    plan = _ball_plan(2000, 500)
    cert = certify(plan)
    (total,) = cert.ledger.totals
    assert recompose(total.composition, "replace").rho <= total.rho
    assert {"AboveThreshold", "StabilityHistogram", "GaussianMech", "LaplaceMech"} <= {
        e.kind for e in cert.ledger.events()}
    out = execute(cert, {"Y": _two_clusters(2000, 30.0, 3)}, dp.SeededNoise(3, exact=True), NumpyBackend())
    c, r = out.released["ball"]
    assert np.isfinite(r) or math.isnan(r)


def _add_remove_plan() -> dp.Plan:
    """Every row-reading kind of the mixture family under add/remove (private n)."""
    b = dp.PlanBuilder(budget=dp.ApproxZCDP(1.0, 1e-6), neighbors="add_remove")
    X = b.source("X", dp.Vectors(d=2))
    ball = N.terrific_ball(X, t=3, radii=(0.5, 1.0), center=[0.0, 0.0], radius=5.0, tries=3)
    V = b.public([[1.0], [0.0]])
    j = N.AboveThreshold(threshold=1.0)(N.BallCounts(center=b.public([0.0, 0.0]), radii=(1.0, 2.0))(X))
    inside, _ = N.split(X, N.PartitionByProjectedBall(center=b.public([0.0]), radius=b.public(1.0), basis=V,
                                                       origin=b.public([0.0, 0.0])))
    G = N.GaussianMech()(N.Gram()(N.Clip(radius=1.0)(N.Project(basis=V)(inside))))
    return b.build(ball=ball, j=j, G=G)


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("rows", [0, 1])
def test_add_remove_runs_on_zero_and_one_rows(rows: int, exact: bool) -> None:
    """Under add/remove a 0-row dataset neighbours a 1-row one: every kind releases, nothing raises."""
    out = _add_remove_plan().run({"X": np.ones((rows, 2))}, noise=dp.SeededNoise(1, exact=exact)).released
    assert set(out) == {"ball", "j", "G"}
