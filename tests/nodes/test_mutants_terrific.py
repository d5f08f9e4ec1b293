"""Mutation-testing pins of ``dpflow/nodes/terrific.py`` (2026-11-29): every query's sensitivity, exactly.

``TerrificScores``: linf ``t (2 + lam)`` replace-one, ``t (1 + max(1, lam))`` add/remove (the larger when a piece
sees both), l1 ``m`` and l2 ``sqrt(m)`` times it over ``m`` radii; ``GridMaxCounts`` and ``BallCounts``: linf 1
per entry, l1 ``m``, l2 ``sqrt(m)``; ``CellCounts`` and ``ShellCounts``: one record in one bin (l1 2, l2 sqrt 2
replace-one; 1 add/remove; linf 1); all times the rows' stability, all integers (float error 0).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import dpflow as dp
from dpflow.domains import RowCount
from dpflow.handles import Ref
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.rules import changes_text
from dpflow.nodes.terrific import BallCounts, CellCounts, GridMaxCounts, ShellCounts, TerrificScores
from dpflow.nodes.types import ReleasedT, RowsT, Size


class _Infer:
    relation = "replace"
    node_id = "q"

    def type_of(self, ref: Any) -> Any:
        return ReleasedT({"c": (2,), "r": (), "j": ()}.get(ref.id))

    def row_count(self) -> RowCount:
        return RowCount("q")


def _rows(changes: frozenset[str], stability: int) -> RowsT:
    return RowsT(dp.Vectors(d=2), "X", Size(True, 9, RowCount("X")), stability, changes, None)


REPLACE, ADD, BOTH = frozenset({"replace"}), frozenset({"add_remove"}), frozenset({"replace", "add_remove"})


@pytest.mark.parametrize(("changes", "s", "t", "lam", "linf"), [
    (REPLACE, 1, 4, 1, 12.0), (ADD, 1, 4, 1, 8.0), (REPLACE, 1, 3, 2, 12.0), (ADD, 1, 3, 2, 9.0),
    (BOTH, 1, 3, 2, 12.0), (BOTH, 2, 4, 1, 24.0), (ADD, 3, 2, 1, 12.0)])
def test_terrific_scores_sensitivity(changes: frozenset[str], s: int, t: int, lam: int, linf: float) -> None:
    rows = _rows(changes, s)
    inf = TerrificScores(radii=(1.0, 2.0, 4.0), t=t, lam=lam).infer([rows], _Infer())  # type: ignore[arg-type]
    st = inf.out
    assert st.shape == (3,) and st.float_error == FloatError("exact", rows.domain)
    assert (st.linf.coef, st.l1.coef, st.l2.coef) == (linf, 3 * linf, linf * math.sqrt(3))
    assert inf.derivation == (f"terrific scores t*L_T over 3 radii, t={t}, ratio=3, lam={lam}, {changes_text(rows)}: "
                              f"linf {st.linf.text()}")


@pytest.mark.parametrize(("changes", "s"), [(REPLACE, 1), (ADD, 1), (REPLACE, 2), (ADD, 3)])
def test_count_queries_sensitivity(changes: frozenset[str], s: int) -> None:
    rows = _rows(changes, s)
    grid = GridMaxCounts(radius=1.0, tries=5).infer([rows], _Infer())  # type: ignore[arg-type]
    balls = BallCounts(center=Ref("c"), radii=(1.0, 2.0)).infer([rows], _Infer())  # type: ignore[arg-type]
    for inf, m in ((grid, 5), (balls, 2)):
        st = inf.out
        assert st.shape == (m,) and st.float_error == FloatError("exact", rows.domain)
        assert (st.linf.coef, st.l1.coef, st.l2.coef) == (s, m * s, math.sqrt(m) * s)
    assert grid.derivation == f"max cell count of 5 shifted grids, {changes_text(rows)}: linf {grid.out.linf.text()}"
    assert balls.derivation == f"counts within 2 radii, {changes_text(rows)}: linf {balls.out.linf.text()}"
    l1, l2 = (2.0, math.sqrt(2.0)) if changes == REPLACE else (1.0, 1.0)
    cells = CellCounts(radius=1.0, choice=Ref("j")).infer([rows], _Infer())  # type: ignore[arg-type]
    shell = ShellCounts(center=Ref("c"), inner=Ref("r"), outer=Ref("r")).infer([rows], _Infer())  # type: ignore[arg-type]
    for inf, shape in ((cells, ()), (shell, (3,))):
        st = inf.out
        assert st.shape == shape and st.float_error == FloatError("exact", rows.domain)
        assert (st.l1.coef, st.l2.coef, st.linf.coef) == (l1 * s, l2 * s, s)
    assert cells.derivation == f"cell counts of grid j, {changes_text(rows)}: l1 {cells.out.l1.text()}, linf 1"
    assert shell.derivation == f"counts inside / annulus / outside, {changes_text(rows)}: l1 {shell.out.l1.text()}"


def test_radius_grid() -> None:
    """r_min ratio^j up to the first value at or above r_max (ratio 1.25 by default); a grid of one radius when
    r_min = r_max; every other input refused whole."""
    from dpflow.nodes.terrific import radius_grid

    assert radius_grid(1.0, 1.0) == (1.0,)
    assert radius_grid(1.0, 1.25) == (1.0, 1.25)  # r_max on the grid: not one more
    assert radius_grid(1.0, 1.26) == (1.0, 1.25, 1.5625)
    assert radius_grid(2.0, 17.0, 2.0) == (2.0, 4.0, 8.0, 16.0, 32.0)
    assert radius_grid(0.5, 2.0, 2.0) == (0.5, 1.0, 2.0)
    for args in ((0.0, 1.0), (2.0, 1.0), (1.0, math.inf), (1.0, 2.0, 1.0), (-1.0, 2.0)):
        with pytest.raises(ValueError) as v:
            radius_grid(*args)
        r_min, r_max, ratio = (*args, 1.25)[:3]
        assert str(v.value) == (f"radius_grid needs 0 < r_min <= r_max (finite) and ratio > 1, got {r_min}, "
                                f"{r_max}, {ratio}")


def test_cell_keys_both_paths() -> None:
    """Up to 7 coordinates: mixed radix of 62 // d bits, each clamped to +-(2^(bits-1) - 1); from 8 on: the public
    hash sum_a c_a m_a (mod 2^64, m odd, drawn from seed 12345 below 2^61) shifted right by 2."""
    from dpflow.nodes.terrific import cell_coordinates, cell_keys, decode_key

    seven = np.array([[3, -2, 0, 1, 2**40, -(2**40), 5]])
    k, ok = cell_keys(seven)
    half = 2 ** (62 // 7 - 1) - 1
    assert ok and decode_key(int(k[0]), 7).tolist() == [3.0, -2.0, 0.0, 1.0, half, -half, 5.0]
    eight = np.array([[3, -2, 0, 1, 7, -9, 5, 11], [0, 0, 0, 0, 0, 0, 0, 1]])
    k, ok = cell_keys(eight)
    mult = np.random.default_rng(12345).integers(1, 2**61, size=8, dtype=np.int64) | 1
    want = [(sum(int(c) * int(m) for c, m in zip(row, mult, strict=True)) % 2**64) >> 2 for row in eight]
    assert not ok and k.dtype == np.int64 and k.tolist() == want
    twelve = np.arange(12)[None, :] - 5
    m12 = np.random.default_rng(12345).integers(1, 2**61, size=12, dtype=np.int64) | 1
    assert cell_keys(twelve)[0].tolist() == [(sum(int(c) * int(m) for c, m in zip(twelve[0], m12, strict=True))
                                              % 2**64) >> 2]
    assert cell_coordinates(np.array([[1e300, -1e300, np.nan]]), 1.0, np.zeros(3)).tolist() == [
        [2**40, -(2**40), 0]]


def test_count_query_refusals() -> None:
    """A centre of another dimension, a released radius that is not a scalar."""
    from dpflow.errors import DomainError, PlanTypeError

    rows = _rows(REPLACE, 1)

    class Shapes(_Infer):
        def type_of(self, ref: Any) -> Any:
            return ReleasedT((3,))

    for node in (BallCounts(center=Ref("c"), radii=(1.0,)), ShellCounts(center=Ref("c"), inner=Ref("r"),
                                                                         outer=Ref("r"))):
        with pytest.raises(DomainError) as e:
            node.infer([rows], Shapes())  # type: ignore[arg-type]
        assert (e.value.node, e.value.problem, e.value.fix) == ("q", "center has shape (3,), rows have d=2",
                                                                "pass a centre of the rows' dimension")
        with pytest.raises(PlanTypeError) as t:
            node.infer([ReleasedT(())], _Infer())  # type: ignore[arg-type]
        assert t.value.fix == "pass sensitive rows"
    for node in (GridMaxCounts(radius=Ref("c")), CellCounts(radius=Ref("c"), choice=Ref("j"))):
        with pytest.raises(DomainError) as e:
            node.infer([rows], _Infer())  # type: ignore[arg-type]
        assert (e.value.node, e.value.problem, e.value.fix) == (
            "q", "radius refers to c of shape (2,)", "pass a released scalar (GridValue of an AboveThreshold)")


def test_partition_by_projected_ball() -> None:
    """Two disjoint pieces covering the rows: ||(x - o) V - c|| <= r (the boundary inside) and the rest; a
    non-finite row, or any non-finite parameter, goes to piece 1."""
    from conftest import ValueCtx

    from dpflow.errors import PostProcessingError
    from dpflow.nodes.terrific import PartitionByProjectedBall
    from dpflow.nodes.types import PiecesT, SplitRule

    node = PartitionByProjectedBall(center=Ref("c"), radius=Ref("r"), basis=Ref("V"), origin=Ref("o"))
    rows = _rows(REPLACE, 2)
    inf = node.infer([rows], _Infer())  # type: ignore[arg-type]
    assert inf.out == PiecesT(rows, 2, SplitRule.VALUE) and inf.derivation == "inside / outside a projected ball (c)"

    class NotReleased(_Infer):
        def type_of(self, ref: Any) -> Any:
            return rows

    with pytest.raises(PostProcessingError) as p:
        node.infer([rows], NotReleased())  # type: ignore[arg-type]
    assert p.value.problem == "parameter 'center' refers to c, which is not released"
    # projected onto the first coordinate less the origin's: 1, 4, 2.5, NaN, 6 around c = 2, r = 1
    X = np.array([[4.0, 5.0], [7.0, -3.0], [5.5, 100.0], [np.nan, 0.0], [9.0, 9.0]])
    vals = {"c": np.array([2.0]), "r": np.array(1.0), "V": np.array([[1.0], [0.0]]), "o": np.array([3.0, 7.0])}
    inside, outside = node.evaluate([X], ValueCtx(vals))
    assert inside.tolist() == [[4.0, 5.0], [5.5, 100.0]]  # |(4 - 3) - 2| = 1: on the boundary, inside
    assert outside[[0, 2]].tolist() == [[7.0, -3.0], [9.0, 9.0]] and np.isnan(outside[1, 0]) and len(outside) == 3
    for name in vals:
        bad = dict(vals, **{name: np.full(np.shape(vals[name]), np.inf)})
        inside, outside = node.evaluate([X], ValueCtx(bad))
        assert inside.shape == (0, 2) and np.array_equal(outside, X, equal_nan=True)


def test_ball_counts_values() -> None:
    """Rows within each radius (the boundary counted), non-finite rows outside every ball; a non-finite centre or
    no rows: zeros."""
    from conftest import ValueCtx

    node = BallCounts(center=Ref("c"), radii=(1.0, 2.0, 5.0))
    X = np.array([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0], [np.inf, 1.0], [4.0, 5.0]])
    got = node.evaluate([X], ValueCtx({"c": np.array([1.0, 1.0])}))
    assert got.dtype == np.float64 and got.tolist() == [2.0, 3.0, 4.0]
    assert node.evaluate([X], ValueCtx({"c": np.array([np.nan, 1.0])})).tolist() == [0.0, 0.0, 0.0]
    assert node.evaluate([np.zeros((0, 2))], ValueCtx({"c": np.array([1.0, 1.0])})).tolist() == [0.0, 0.0, 0.0]
    assert node.evaluate([X[:1]], ValueCtx({"c": np.array([1.0, 1.0])})).tolist() == [1.0, 1.0, 1.0]


def test_terrific_decision() -> None:
    """tau = 2 b1 ln(3 / beta); found when in >= t - tau, out >= t - tau and annulus <= max(tau, fraction t): the
    centre with radius sqrt(r_in r_out) of r_bounds; else (or for a radius that is not positive and finite, a
    non-finite centre or count) NaN."""
    from conftest import ValueCtx

    from dpflow.nodes.terrific import TerrificDecision, r_bounds

    node = TerrificDecision(t=100, beta=0.05, annulus_fraction=0.1)
    b1 = 2.0
    tau = 2.0 * b1 * math.log(3.0 / 0.05)
    r_in, r_out = r_bounds(1.5, 3.0, 1.0)

    def run(counts: list[float], r: float = 1.5, c: Any = (1.0, 2.0)) -> Any:
        return node.evaluate([np.array(c), np.array(r), np.array(counts), np.array(b1)], ValueCtx())

    found = run([100 - tau, max(tau, 10.0), 100 - tau])
    assert found[0].tolist() == [1.0, 2.0] and found[1] == math.sqrt(r_in * r_out)
    edge = math.nextafter(100 - tau, -math.inf)
    for counts in ([edge, 0.0, 100.0], [100.0, 0.0, edge], [100.0, math.nextafter(tau, math.inf), 100.0]):
        out = run(counts)
        assert np.isnan(out[0]).all() and math.isnan(out[1])
    assert TerrificDecision(t=1000, annulus_fraction=0.1).evaluate(
        [np.array([0.0]), np.array(1.0), np.array([1000.0, 100.0, 1000.0]), np.array(b1)], ValueCtx())[1] > 0
    for bad in (dict(r=0.0), dict(r=math.inf), dict(c=(np.nan, 0.0)), dict(counts=[100.0, np.nan, 100.0])):
        kw = {"counts": [100.0, 0.0, 100.0], **bad}
        out = run(**kw)
        assert math.isnan(out[1]) and out[0].shape == (2,) and np.isnan(out[0]).all()


def test_shell_counts_values() -> None:
    """(inside <= inner, inner < annulus <= outer, the rest), non-finite rows outside; a non-finite centre or
    radius, or no rows: every row outside."""
    from conftest import ValueCtx

    node = ShellCounts(center=Ref("c"), inner=Ref("a"), outer=Ref("b"))
    X = np.array([[2.0, 1.0], [2.0, 2.0], [2.0, 3.0], [2.0, 5.0], [np.nan, 0.0], [2.0, -1.5]])
    vals = {"c": np.array([2.0, 0.0]), "a": np.array(1.0), "b": np.array(3.0)}
    got = node.evaluate([X], ValueCtx(vals))
    assert got.dtype == np.float64 and got.tolist() == [1.0, 3.0, 2.0]
    assert node.evaluate([X[:1]], ValueCtx(vals)).tolist() == [1.0, 0.0, 0.0]
    for name, bad in (("c", np.array([np.inf, 0.0])), ("a", np.array(np.nan)), ("b", np.array(np.inf))):
        assert node.evaluate([X], ValueCtx(dict(vals, **{name: bad}))).tolist() == [0.0, 0.0, 6.0]
    assert node.evaluate([np.zeros((0, 2))], ValueCtx(vals)).tolist() == [0.0, 0.0, 0.0]


def test_small_post_processing() -> None:
    """GridValue: values[i] for a valid integer index, else NaN; ShellRadii: r_in or r_out of r_bounds, NaN for a
    radius that is not positive and finite; GateBall: the ball while fewer than ``limit`` earlier balls are
    found (a found ball: a pair whose radius is finite); BallMean: centre + sum / max(count, 1)."""
    from conftest import ValueCtx

    from dpflow.nodes.terrific import BallMean, GateBall, GridValue, ShellRadii, r_bounds

    g = GridValue(values=(1.0, 2.0, 4.0))
    assert [g.evaluate([np.array(i)], ValueCtx()) for i in (0.0, 2.0)] == [1.0, 4.0]
    assert all(math.isnan(g.evaluate([np.array(i)], ValueCtx())) for i in (-1.0, 3.0, 1.5, np.nan, np.inf))
    assert g.out_shape([]) == () and ShellRadii(which=0).out_shape([]) == ()
    for which in (0, 1):
        node = ShellRadii(which=which, ratio=5.0, error=0.5)
        assert node.evaluate([np.array(2.0)], ValueCtx()) == r_bounds(2.0, 5.0, 0.5)[which]
        assert all(math.isnan(node.evaluate([np.array(r)], ValueCtx())) for r in (0.0, -1.0, np.inf, np.nan))
        assert node.evaluate([np.array(0.5)], ValueCtx()) == r_bounds(0.5, 5.0, 0.5)[which]
    assert r_bounds(2.0, 5.0, 0.5) == (3.0, 9.0) and r_bounds(1.0, 3.0, 1.0) == (2.0, 2.4)
    ball = (np.array([1.0, 2.0]), 3.0)
    found, lost = (np.zeros(2), 1.0), (np.zeros(2), math.nan)
    gate = GateBall(limit=2)
    assert gate.evaluate([ball, found, lost], ValueCtx()) is ball
    assert gate.evaluate([ball, found, lost, np.zeros(2), (np.zeros(2),), (0.0, 1.0, 2.0)], ValueCtx()) is ball
    closed = gate.evaluate([ball, found, found], ValueCtx())
    assert np.isnan(closed[0]).all() and closed[0].shape == (2,) and math.isnan(closed[1])
    mean = BallMean().evaluate([ball, np.array([4.0, -2.0]), np.array(2.0)], ValueCtx())
    assert mean.tolist() == [3.0, 1.0]
    assert BallMean().evaluate([np.array([1.0]), np.array([4.0]), np.array(0.5)], ValueCtx()).tolist() == [5.0]
    assert BallMean().evaluate([np.array([1.0, 3.0]), np.array([4.0, 2.0]), np.array(2.0)], ValueCtx()).tolist() == [
        3.0, 4.0]  # a centre alone, not a (centre, radius) pair
    assert BallMean().evaluate([np.array([1.0]), np.array([4.0]), np.array(np.nan)], ValueCtx()).tolist() == [5.0]


def test_cell_ball() -> None:
    """The heavy cell's centre (decoded key + the grid's shift + 1/2) times the side (factor radius) and its
    half-diagonal side sqrt(d) / 2; hashed keys (d > 7): the node ball; nothing found or an invalid radius or
    choice: NaN."""
    from conftest import ValueCtx

    from dpflow.nodes.terrific import CellBall, cell_keys, grid_shifts

    keys, _ = cell_keys(np.array([[1, -2], [0, 0]]))
    hist = (keys[::-1], np.array([3.0, 7.0]))  # the heavier cell second
    node = CellBall(d=2, factor=4.0, tries=10, seed=3)
    centre, r = node.evaluate([np.array(0.5), np.array(4.0), hist, np.zeros(2), np.array(9.0)], ValueCtx())
    side = 4.0 * 0.5
    assert centre.tolist() == ((np.array([1.0, -2.0]) + grid_shifts(3, 10, 2)[4] + 0.5) * side).tolist()
    assert r == side * math.sqrt(2.0) / 2.0
    first, _ = node.evaluate([np.array(0.5), np.array(0.0), hist, np.zeros(2), np.array(9.0)], ValueCtx())
    assert first.tolist() == ((np.array([1.0, -2.0]) + grid_shifts(3, 10, 2)[0] + 0.5) * side).tolist()  # grid 0
    for radius, choice, h in ((0.0, 4.0, hist), (np.inf, 4.0, hist), (0.5, 10.0, hist), (0.5, -1.0, hist),
                              (0.5, np.nan, hist), (0.5, 4.0, (keys[:0], np.zeros(0))), (0.5, 4.0, 0.0)):
        c, r = node.evaluate([np.array(radius), np.array(choice), h, np.zeros(2), np.array(9.0)], ValueCtx())
        assert c.shape == (2,) and np.isnan(c).all() and math.isnan(r)
    seven = CellBall(d=7, tries=10)
    k7, _ = cell_keys(np.array([[1, 2, 3, 4, 5, 6, 7]]))
    c, r = seven.evaluate([np.array(0.5), np.array(4.0), (k7, np.array([1.0])), np.zeros(7), np.array(9.0)],
                          ValueCtx())
    assert r == 4.0 * 0.5 * math.sqrt(7.0) / 2.0  # decoded, not the node ball
    wide = CellBall(d=8, tries=10)
    c, r = wide.evaluate([np.array(0.5), np.array(4.0), hist, np.arange(8.0), np.array(9.0)], ValueCtx())
    assert c.tolist() == list(range(8)) and r == 9.0


def _nodes(plan: dp.Plan) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for rec in plan.records:
        out.setdefault(type(rec.node).__name__, []).append(rec.node)
    return out


def test_terrific_ball_plan() -> None:
    """PTerrificBall's wiring with the documented defaults (ratio 3, lam 1, beta 0.05, 100 tries, factor 4, seed 0,
    delta 1e-7, weights 0.35 / 0.1 / 0.1 / 0.25 / 0.2): the radius search at t^2 (never below t^2 / 2), the grid
    search at t, the heavy cell's stability histogram, four means at a quarter of the mean weight, a shell count
    certified by TerrificDecision."""
    from dpflow.nodes.terrific import terrific_ball

    b = dp.PlanBuilder(budget=dp.ApproxZCDP(1.0, 1e-6))
    ball = terrific_ball(b.source("X", dp.Vectors(d=2), n=100), t=20, radii=(1.0, 2.0), center=[0.5, 0.0],
                         radius=10.0)
    n = _nodes(b.build(ball=ball))
    clip = n["Clip"][0]
    assert clip.radius == 10.0 and isinstance(clip.center, Ref)
    assert n["TerrificScores"] == [TerrificScores(radii=(1.0, 2.0), t=20, ratio=3.0, lam=1)]
    radius_search, grid_search = n["AboveThreshold"]
    assert (radius_search.threshold, radius_search.margin_beta, radius_search.min_threshold, radius_search.weight) \
        == (400.0, 0.05, 200.0, 0.35)
    assert (grid_search.threshold, grid_search.margin_beta, grid_search.min_threshold, grid_search.weight) \
        == (20.0, 0.05, None, 0.1)
    gm, cc = n["GridMaxCounts"][0], n["CellCounts"][0]
    assert (gm.factor, gm.tries, gm.seed, cc.factor, cc.tries, cc.seed) == (4.0, 100, 0, 4.0, 100, 0)
    sh = n["StabilityHistogram"][0]
    assert (float(sh.delta), sh.weight) == (1e-7, 0.1)
    cb = n["CellBall"][0]
    assert (cb.d, cb.factor, cb.tries, cb.seed) == (2, 4.0, 100, 0)
    assert [m.weight for m in n["GaussianMech"]] == [0.25 / 4] * 2
    assert [m.weight for m in n["LaplaceMech"]] == [0.25 / 4] * 2 + [0.2]
    assert n["ScaleShift"][0].scale == 2.0 and [s.which for s in n["ShellRadii"]] == [0, 1]
    assert all(s.ratio == 3.0 for s in n["ShellRadii"])
    dec = n["TerrificDecision"][0]
    assert (dec.t, dec.ratio, dec.beta) == (20, 3.0, 0.05)
    assert n["GridValue"][0].values == (1.0, 2.0)
    with pytest.raises(ValueError, match="^terrific_ball needs d= \\(the rows' dimension\\) when the centre is a "
                                         "released handle$"):
        terrific_ball(b.source("Y", dp.Vectors(d=2), n=100), t=20, radii=(1.0,), center=b.public([0.0, 0.0]),
                      radius=10.0)


def test_grid_helpers_and_cell_counts() -> None:
    """The public shifts are the seed's uniform [0, 1) draws; cell coordinates never warn (overflow to the clamp);
    decoded keys are floats; a released choice is a valid grid index or None; cell counts of one row, of no row,
    and of an invalid choice or radius."""
    import warnings

    from conftest import ValueCtx

    from dpflow.handles import Ref as R
    from dpflow.nodes.terrific import _choice, cell_coordinates, decode_key, grid_shifts

    assert np.array_equal(grid_shifts(7, 3, 2), np.random.default_rng(7).uniform(0.0, 1.0, (3, 2)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cell_coordinates(np.array([[1e308, -1e308]]), 1e-10, np.zeros(2)).tolist() == [[2**40, -(2**40)]]
    assert decode_key(5, 1).dtype == np.float64
    for v, want in ((0.0, 0), (9.0, 9), (10.0, None), (-1.0, None), (1.5, None), (np.nan, None), (np.inf, None)):
        assert _choice(ValueCtx({"j": np.array([v])}), R("j"), 10) == want
    node = CellCounts(radius=1.0, choice=R("j"), tries=10)
    one = node.evaluate([np.array([[0.3, 0.4]])], ValueCtx({"j": np.array(2.0)}))
    assert one.counts.tolist() == [1.0] and one.keys.dtype == np.int64
    for X, j in ((np.zeros((0, 2)), 2.0), (np.array([[0.3, 0.4]]), 10.0)):
        none = node.evaluate([X], ValueCtx({"j": np.array(j)}))
        assert none.keys.dtype == np.int64 and none.keys.shape == (0,) and none.counts.shape == (0,)


def test_ball_mean_plan() -> None:
    """The rows inside the released ball, re-centred on its centre and clipped to its radius, summed (Gaussian) and
    counted (Laplace) at the given weights."""
    from dpflow import nodes as N
    from dpflow.nodes.terrific import ball_mean

    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    c, r = b.public([1.0, 2.0]), b.public(3.0)
    n = _nodes(b.build(m=ball_mean(b.source("X", dp.Vectors(d=2), n=50), c, r, 0.3, 0.7)))
    assert n["PartitionByBall"][0].center == Ref(c.id) and n["PartitionByBall"][0].radius == Ref(r.id)
    assert n["Project"][0].center == Ref(c.id) and n["Project"][0].basis is None
    assert n["Clip"][0].radius == Ref(r.id) and n["Clip"][0].center is None
    assert [m.weight for m in n["GaussianMech"]] == [0.3] and [m.weight for m in n["LaplaceMech"]] == [0.7]
    assert isinstance(n["Sum"][0], N.Sum) and isinstance(n["Count"][0], N.Count)


def test_terrific_sums_against_brute_force() -> None:
    """t L_T(r) is the sum of the t largest s_i(r) = max(min(in_i, out_i, t) - lam ann_i, 0), counted pair by pair
    (the row itself inside), zero-padded when n < t; rows with a non-finite entry count as the origin."""
    from dpflow.nodes.terrific import terrific_sums

    def reference(X: np.ndarray, radii: tuple[float, ...], t: int, ratio: float, lam: int) -> list[int]:
        X = np.where(np.all(np.isfinite(X), axis=1)[:, None], X, 0.0)
        D = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2))
        out = []
        for r in radii:
            inn = (D <= r).sum(axis=1)
            ann = ((D > r) & (D <= ratio * r)).sum(axis=1)
            s = np.maximum(np.minimum(np.minimum(inn, len(X) - inn - ann), t) - lam * ann, 0)
            out.append(int(np.sort(s)[::-1][:t].sum()))
        return out

    rng = np.random.default_rng(5)
    radii = (0.5, 1.0, 2.0)
    for trial in range(40):
        n, t, lam = int(rng.integers(1, 40)), int(rng.integers(1, 12)), int(rng.integers(1, 3))
        X = rng.integers(0, 8, size=(n, 2)) * 0.5 + (rng.normal(size=(n, 2)) * 0.01 if trial % 2 else 0.0)
        if trial % 5 == 0:
            X[0, 0] = np.nan
        assert terrific_sums(X, radii, t, 3.0, lam).tolist() == reference(X, radii, t, 3.0, lam)


def test_grid_max_counts_values_and_refusals() -> None:
    from conftest import ValueCtx

    from dpflow.errors import PostProcessingError
    from dpflow.nodes.terrific import cell_coordinates, cell_keys, grid_shifts

    node = GridMaxCounts(radius=Ref("r"), factor=2.0, tries=3, seed=1)
    X = np.array([[0.1, 0.1], [0.2, 0.3], [5.0, 5.0]])
    got = node.evaluate([X], ValueCtx({"r": np.array(1.0)}))
    want = [max(np.unique(cell_keys(cell_coordinates(X, 2.0, s))[0], return_counts=True)[1])
            for s in grid_shifts(1, 3, 2)]
    assert got.tolist() == [float(w) for w in want]
    assert node.evaluate([X[:1]], ValueCtx({"r": np.array(1.0)})).tolist() == [1.0, 1.0, 1.0]
    for r in (np.nan, 0.0, -1.0, np.inf):
        assert node.evaluate([X], ValueCtx({"r": np.array(r)})).tolist() == [0.0, 0.0, 0.0]
    assert node.evaluate([np.zeros((0, 2))], ValueCtx({"r": np.array(1.0)})).tolist() == [0.0, 0.0, 0.0]

    class NotReleased(_Infer):
        def type_of(self, ref: Any) -> Any:
            return _rows(REPLACE, 1)

    for q in (ShellCounts(center=Ref("c"), inner=Ref("a"), outer=Ref("b")), BallCounts(center=Ref("c"), radii=(1.0,))):
        with pytest.raises(PostProcessingError) as p:
            q.infer([_rows(REPLACE, 1)], NotReleased())  # type: ignore[arg-type]
        assert p.value.problem == "parameter 'center' refers to c, which is not released"


def test_terrific_ball_plan_passes_its_parameters() -> None:
    """Non-default parameters reach every node; a released centre (with d) and a released node radius are used
    as they are."""
    from dpflow.nodes.terrific import terrific_ball

    b = dp.PlanBuilder(budget=dp.ApproxZCDP(1.0, 1e-6))
    c, rad = b.public([0.5, 0.0, 1.0]), b.public(7.0)
    ball = terrific_ball(b.source("X", dp.Vectors(d=3), n=100), t=10, radii=(1.0, 2.0, 3.0), center=c, radius=rad,
                         ratio=4.0, lam=2, beta=0.1, tries=7, factor=2.5, seed=3, delta=1e-8,
                         weights=(0.3, 0.2, 0.1, 0.2, 0.2), d=3)
    n = _nodes(b.build(ball=ball))
    assert n["Clip"][0].center == Ref(c.id) and n["Clip"][0].radius == Ref(rad.id)
    assert n["TerrificScores"] == [TerrificScores(radii=(1.0, 2.0, 3.0), t=10, ratio=4.0, lam=2)]
    assert [(a.threshold, a.margin_beta, a.weight) for a in n["AboveThreshold"]] == [(100.0, 0.1, 0.3),
                                                                                    (10.0, 0.1, 0.2)]
    for q in (n["GridMaxCounts"][0], n["CellCounts"][0], n["CellBall"][0]):
        assert (q.factor, q.tries, q.seed) == (2.5, 7, 3)
    assert float(n["StabilityHistogram"][0].delta) == 1e-8 and n["CellBall"][0].d == 3
    cell_ball = next(r for r in b.build(ball=ball).records if type(r.node).__name__ == "CellBall")
    assert cell_ball.inputs[3:] == (c.id, rad.id)
    assert all(s.ratio == 4.0 for s in n["ShellRadii"])
    dec = n["TerrificDecision"][0]
    assert (dec.t, dec.ratio, dec.beta) == (10, 4.0, 0.1)


def test_radii_parameter() -> None:
    assert TerrificScores(radii=[1, 2.5], t=1).radii == (1.0, 2.5)
    for radii in ((), (0.0, 1.0), (1.0, 1.0), (2.0, 1.0), (1.0, math.inf), (1.0, 2.0, 2.0), (1.0, math.nan)):
        with pytest.raises(ValueError) as v:
            TerrificScores(radii=radii, t=1)
        assert str(v.value) == "radii must be a non-empty increasing tuple of finite positive numbers"



def test_small_sides_and_integer_parameters() -> None:
    """A grid side or node radius below 1 is valid; ratio must exceed 1; t and lam are positive integers."""
    from conftest import ValueCtx

    from dpflow.nodes.terrific import CellBall, cell_keys

    keys, _ = cell_keys(np.array([[1, -2]]))
    centre, r = CellBall(d=2, factor=4.0, tries=10).evaluate(
        [np.array(0.2), np.array(1.0), (keys, np.array([2.0])), np.zeros(2), np.array(9.0)], ValueCtx())
    assert r == 0.8 * math.sqrt(2.0) / 2.0 and np.isfinite(centre).all()
    assert TerrificScores(radii=(1.0,), t=1, ratio=1.5).ratio == 1.5
    with pytest.raises(ValueError, match="^TerrificScores needs ratio > 1, got 1.0$"):
        TerrificScores(radii=(1.0,), t=1, ratio=1.0)
    for t in (True, 1.5, 0):
        with pytest.raises(ValueError, match="^expected a positive integer, got "):
            TerrificScores(radii=(1.0,), t=t)
    assert TerrificScores(radii=(1.0,), t=3.0, lam=2.0).lam == 2


def test_every_released_slot_is_named() -> None:
    from dpflow.errors import PostProcessingError

    rows = _rows(REPLACE, 1)
    refs = {"center": Ref("c"), "inner": Ref("a"), "outer": Ref("b"), "radius": Ref("r"), "choice": Ref("j")}

    for slot, node in (("inner", ShellCounts(center=Ref("c"), inner=Ref("a"), outer=Ref("b"))),
                       ("outer", ShellCounts(center=Ref("c"), inner=Ref("a"), outer=Ref("b"))),
                       ("radius", GridMaxCounts(radius=Ref("r"))),
                       ("choice", CellCounts(radius=1.0, choice=Ref("j")))):
        class OneMissing(_Infer):
            def type_of(self, ref: Any, slot: str = slot) -> Any:
                return rows if ref == refs[slot] else super().type_of(ref)

        with pytest.raises(PostProcessingError) as p:
            node.infer([rows], OneMissing())  # type: ignore[arg-type]
        assert p.value.problem == f"parameter {slot!r} refers to {refs[slot].id}, which is not released"


def test_every_query_needs_rows() -> None:
    from dpflow.errors import PlanTypeError
    from dpflow.nodes.terrific import PartitionByProjectedBall

    for node in (TerrificScores(radii=(1.0,), t=1), GridMaxCounts(radius=1.0), CellCounts(radius=1.0, choice=Ref("j")),
                 PartitionByProjectedBall(center=Ref("c"), radius=Ref("r"), basis=Ref("V"), origin=Ref("o"))):
        with pytest.raises(PlanTypeError) as t:
            node.infer([ReleasedT(())], _Infer())  # type: ignore[arg-type]
        assert (t.value.node, t.value.fix) == ("q", "pass sensitive rows")


def test_partition_by_projected_ball_in_two_dimensions() -> None:
    from conftest import ValueCtx

    from dpflow.nodes.terrific import PartitionByProjectedBall

    node = PartitionByProjectedBall(center=Ref("c"), radius=Ref("r"), basis=Ref("V"), origin=Ref("o"))
    X = np.array([[1.0, 1.0, 5.0], [3.0, 1.0, 0.0]])
    vals = {"c": np.array([1.0, 1.0]), "r": np.array(0.5), "V": np.eye(3)[:, :2], "o": np.zeros(3)}
    inside, outside = node.evaluate([X], ValueCtx(vals))
    assert inside.tolist() == [[1.0, 1.0, 5.0]] and outside.tolist() == [[3.0, 1.0, 0.0]]



def test_a_released_scalar_is_its_first_entry() -> None:
    """The declared policy of this module's released scalars (a radius, a grid choice): the first entry, whatever
    the shape the value was released with."""
    from conftest import ValueCtx

    from dpflow.handles import Ref as R
    from dpflow.nodes.terrific import _choice, _side

    assert _choice(ValueCtx({"j": np.array([2.0, 5.0])}), R("j"), 10) == 2
    assert _side(ValueCtx({"r": np.array([[0.5, 9.0]])}), R("r"), 4.0) == 2.0
