"""The row transforms of ``dpflow/nodes/transforms.py``: Clip parameters (positive, at most MAX_BOUND), a
huge released radius capped, Columns' declared bounds, and Source's clipping of ordinal data into range."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from conftest import ZeroNoise, bound_value

import dpflow as dp
from dpflow import nodes as N
from dpflow.domains import MAX_BOUND
from dpflow.errors import (
    UnboundedSensitivityError,
)
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.nodes.types import StatT
from dpflow.planner.certify import certify


@pytest.mark.parametrize("radius", [0, 0.0, -1.0, math.nan, math.inf, 2.0**257])
def test_clip_radius_must_be_positive(radius: float) -> None:
    with pytest.raises(ValueError, match=r"^Clip radius must be a finite positive number at most MAX_BOUND, got .*"
                                         r"Fix: pass 0 < radius <= 2\*\*256, or clip to a box only$") as err:
        N.Clip(radius=radius)
    assert ("maps every row to the centre" in str(err.value)) == (radius == 0)


def test_clip_smallest_positive_radius_is_accepted() -> None:
    assert N.Clip(radius=5e-324).radius == 5e-324


def test_public_clip_and_step_parameters_beyond_the_cap_are_refused() -> None:
    big = math.nextafter(MAX_BOUND, math.inf)
    for kwargs in ({"radius": big}, {"radius": 1e200}, {"box": (0.0, 1e300)}, {"box": (-big, 0.0)},
                   {"radius": 1.0, "center": [0.0, 1e300]}):
        with pytest.raises(ValueError, match="at most"):
            N.Clip(**kwargs)
    N.Clip(radius=MAX_BOUND, center=[MAX_BOUND, -MAX_BOUND], box=(-MAX_BOUND, MAX_BOUND))
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    beta = b.public([0.0])
    base = {"eta": 1.0, "x_bound": 1.0, "residual_bound": 1.0, "radius": 1.0}
    for key in base:
        with pytest.raises(ValueError, match="at most"):
            N.GradientStep(beta=beta, **{**base, key: big})
    with pytest.raises(ValueError, match="at most"):
        N.TruncatedMean(bound=big)


def _released_radius_plan(radius: float, n: int) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=n)
    return b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=b.public(radius))(X))))


def test_a_huge_released_radius_is_capped_not_an_exception() -> None:
    # before: project_ball squared the radius with ** and raised OverflowError above ~1.34e154
    cert = certify(_released_radius_plan(1e300, 2))
    for rows in ([[1e308, 0.0], [1e308, 0.0]], [[1e308, 0.0], [0.0, 0.0]], [[math.nan, 1.0], [math.inf, 0.0]]):
        ex = execute(cert, {"X": np.array(rows)}, ZeroNoise(), NumpyBackend())
        m = ex.released["m"]
        assert np.all(np.isfinite(m)) and np.linalg.norm(m) <= MAX_BOUND
    ex = execute(cert, {"X": np.array([[1e308, 0.0], [1e308, 0.0]])}, ZeroNoise(), NumpyBackend())
    assert ex.released["m"][0] == pytest.approx(MAX_BOUND, rel=1e-11)


def _declared_covers_or_refused(plan: dp.Plan, X: np.ndarray, Y: np.ndarray, name: str) -> None:
    """Either the planner refuses the plan, or the statistic moves by at most its declared l2 sensitivity."""
    try:
        cert = certify(plan)
    except UnboundedSensitivityError:
        return
    a = execute(cert, {"X": X}, ZeroNoise(), NumpyBackend())
    c = execute(cert, {"X": Y}, ZeroNoise(), NumpyBackend())
    mech = next(r for r in cert.plan.records if r.id.startswith("gaussian_mech"))
    stat = cert.space.types[mech.inputs[0]]
    assert isinstance(stat, StatT) and stat.l2 is not None
    sens = bound_value(stat.l2, {"source_0": float(X.shape[0])})
    assert np.linalg.norm(np.asarray(a.released[name]) - np.asarray(c.released[name])) <= sens * (1 + 1e-9)


def test_columns_after_a_clip_around_another_centre_drops_the_norm_bound() -> None:
    n = 10
    X = np.full((n, 2), 100.0)
    Y = X.copy()
    Y[0] = [101.0, 101.0]
    X[0] = [99.0, 99.0]
    for neighbors in ("replace", "add_remove"):
        b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors=neighbors)
        src = b.source("X", dp.Vectors(d=2), n=n if neighbors == "replace" else None)
        cols = N.Columns(keep=[0])(N.Clip(radius=1.5, center=b.public([100.0, 100.0]))(src))
        query = N.SecondMoment() if neighbors == "replace" else N.Sum()
        plan = b.build(s=N.GaussianMech()(query(cols)))
        with pytest.raises(UnboundedSensitivityError):
            certify(plan)
        _declared_covers_or_refused(plan, X, Y, "s")


def test_columns_keeps_a_bound_around_the_origin_and_the_box() -> None:
    for kwargs, sens in (({"radius": 2.0}, 2 * 2.0 / 10), ({"box": (-1.0, 3.0)}, 4.0 / 10)):
        b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
        cols = N.Columns(keep=[1])(N.Clip(**kwargs)(b.source("X", dp.Vectors(d=3), n=10)))
        cert = certify(b.build(m=N.GaussianMech()(N.Mean()(cols))))
        stat = cert.space.types["mean_3"]
        assert isinstance(stat, StatT) and stat.l2 is not None and stat.l2.value({}) == pytest.approx(sens)


def test_ordinal_integer_data_outside_the_range_is_clipped_into_it() -> None:
    N_ = 7
    src = N.Source(name="X", domain=dp.Ordinal(N=N_), n=None)
    ints = np.array([-5, -1, 0, 3, 6, 7, 100, np.iinfo(np.int64).min, np.iinfo(np.int64).max])
    assert src.prepare(ints, "s")[:, 0].tolist() == [0, 0, 0, 3, 6, 6, 6, 0, 6]
    # before: unsigned values above 2^63 wrapped to negative int64 and landed in bin 0
    uints = np.array([0, 6, 7, 2**63, 2**64 - 1], dtype=np.uint64)
    assert src.prepare(uints, "s")[:, 0].tolist() == [0, 6, 6, 6, 6]
    small = np.array([-128, 127], dtype=np.int8)
    assert src.prepare(small, "s")[:, 0].tolist() == [0, 6]
    one = N.Source(name="X", domain=dp.Ordinal(N=1), n=None)
    assert one.prepare(np.array([True, False]), "s")[:, 0].tolist() == [0, 0]
    two = N.Source(name="X", domain=dp.Ordinal(N=2), n=None)
    assert two.prepare(np.array([True, False]), "s").tolist() == [[1], [0]]
    out = src.prepare(np.array([-0.5, 6.9, 7.0, 1e300, -math.inf, math.nan]), "s")
    assert out[:, 0].tolist() == [0, 6, 6, 6, 0, 0] and out.dtype == np.int64


@pytest.mark.parametrize("centre", [None, np.array([0.5, -1.0, 2.0])])
def test_project_ball_overwriting_gives_the_same_rows_and_spares_what_it_may_not_write(centre: Any) -> None:
    from dpflow.nodes.transforms import project_ball

    rng = np.random.default_rng(4)
    A = rng.normal(size=(200, 3)) * 3
    A[0], A[1, 0], A[2, 1], A[3] = np.nan, np.inf, -np.inf, 1e300
    A[4] = (centre if centre is not None else 0.0) + np.array([2.0, 0.0, 0.0])  # on the boundary
    ref = project_ball(A.copy(), centre, 2.0)
    mine = A.copy()
    out = project_ball(mine, centre, 2.0, True)
    assert out is mine and np.array_equal(out, ref)
    frozen = A.copy()
    frozen.flags.writeable = False
    assert np.array_equal(project_ball(frozen, centre, 2.0, True), ref)
    assert np.array_equal(frozen, A, equal_nan=True)


@pytest.mark.parametrize("box", [[(0.0, 1.0), (0.0, 100.0)], np.array([[0.0, 1.0], [18.0, 90.0], [0.0, 5.0]]),
                                 [(0.0, 1.0)]])
def test_clip_refuses_one_box_per_column_naming_the_fix(box: Any) -> None:
    """Clip's box is one interval for every coordinate (the domain type ``Vectors.box`` is one pair); a box per
    column was a bare ``TypeError`` from ``float((0, 1))`` (issue 28)."""
    with pytest.raises(ValueError, match=r"one box per column.*Fix: rescale the columns to one box first, e\.g\. "
                                         r"Precondition\(.*or clip each column on its own"):
        N.Clip(box=box)


@pytest.mark.parametrize("box", [(0, 1, 2), ((0, 1), (0, 1, 2)), 5, "ab"])
def test_clip_refuses_a_box_that_is_not_a_pair(box: Any) -> None:
    with pytest.raises(ValueError, match=r"Clip box is one \(lower, upper\) pair .* Fix: pass box=\(lower, upper\)"):
        N.Clip(box=box)


def test_the_named_fix_for_per_column_boxes_works() -> None:
    """The fix the refusal names: rescale each column onto [0, 1] by a public diagonal map, clip to one box, and
    map the released mean back; the l2 sensitivity is the unit box's sqrt(d) / n."""
    lo, hi = np.array([0.0, 18.0]), np.array([1.0, 90.0])
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=1000)
    Y = N.Clip(box=(0.0, 1.0))(N.Precondition(matrix=b.public(np.diag(1 / (hi - lo))), center=lo)(X))
    plan = b.build(m=N.GaussianMech()(N.Mean()(Y)))
    [entry] = [e for e in plan.check().entries if e.cost]
    assert "0.00141421" in entry.sensitivity                             # sqrt(2) / n
    rows = np.column_stack([np.linspace(-1, 2, 1000), np.linspace(0, 120, 1000)])
    released = execute(certify(plan), {"X": rows}, ZeroNoise(), NumpyBackend()).released["m"]
    assert np.allclose(lo + (hi - lo) * released, np.clip(rows, lo, hi).mean(axis=0))


@pytest.mark.parametrize("n", [np.int64(1000), np.int32(1000), np.uint16(1000), 1000])
def test_a_numpy_integer_n_is_an_int(n: Any) -> None:
    """``n=np.int64(1000)`` was refused when the plan was hashed ("cannot encode a int64"); any integral number
    (numbers.Integral, not bool) is declared as the int it is, on the builder and on Source itself."""
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=np.int64(2), box=(0.0, 1.0)), n=n)
    plan = b.build(m=N.GaussianMech()(N.Mean()(X)))
    node = N.Source(name="X", domain=dp.Vectors(d=2), n=n)
    assert type(node.n) is int and node.n == 1000 and type(node.domain.d) is int
    assert dp.Plan.from_json(plan.to_json()).hash == plan.hash
    [entry] = [e for e in plan.check().entries if e.cost]
    assert "0.00141421" in entry.sensitivity                             # sqrt(2) / n
    assert plan.run({"X": np.full((1000, 2), 0.5)}, noise=dp.SeededNoise(0)).released["m"].shape == (2,)


@pytest.mark.parametrize("n", [1000.0, True, "1000", 999.5])
def test_a_source_n_that_is_not_an_integer_is_refused_by_name(n: Any) -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=1, box=(0.0, 1.0)), n=n)
    with pytest.raises(dp.DomainError, match=r"source X declares n=.* not an integer\. Fix: declare n as an int"):
        b.build(m=N.GaussianMech()(N.Mean()(X))).check()


def test_integer_node_parameters_take_numpy_integers() -> None:
    """Every integer parameter a plan stores (counts, sizes, indices) is held as an int: the plan hashes and
    round-trips through JSON."""
    i = np.int64
    held = [N.Peel(s=i(3)).s, N.DyadicCounts(N=i(2**20)).N, N.SplitByIndex(pieces=i(2)).pieces,
            N.Piece(index=i(1)).index, N.AddKnots(N=i(8)).N, dp.Ordinal(N=i(10)).N, dp.BooleanCube(d=i(4)).d]
    assert [type(v) for v in held] == [int] * len(held)
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=i(100))
    last = N.repeat(X, b.public([0.0, 0.0]), lambda rows, state, k: N.GaussianMech()(N.Mean()(
        N.Clip(radius=1.0)(rows))), times=i(3))
    plan = b.build(m=last)
    assert dp.Plan.from_json(plan.to_json()).hash == plan.hash and plan.check().entries
