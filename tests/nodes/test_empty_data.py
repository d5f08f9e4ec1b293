"""Empty data under add/remove neighbours (issue 14 item 7): every row-reading node kind runs on 0 and 1
rows (a 0-row dataset neighbours a 1-row one) or is refused before data."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from test_terrific import _add_remove_plan as mixture_add_remove_plan

import dpflow as dp
from dpflow import nodes as N
from dpflow.errors import PlanError
from dpflow.nodes.base import PostProcess

Builder = Callable[[dp.PlanBuilder], dict[str, Any]]


def _vectors(b: dp.PlanBuilder) -> dict[str, Any]:
    X = b.source("X", dp.Vectors(d=3))
    C = N.Clip(radius=1.0)(X)
    P = N.Clip(radius=1.0)(N.Precondition(matrix=b.public(np.eye(3)), center=(0.5, 0.0, 0.0))(X))
    inside, outside = N.split(X, N.PartitionByBall(center=(0.0, 0.0, 0.0), radius=1.0))
    col = N.Columns(keep=[1])(N.Clip(box=(-1.0, 1.0))(X))
    return {
        "sum": N.GaussianMech()(N.Sum()(C)),
        "count": N.GaussianMech()(N.Count()(X)),
        "lap_count": N.LaplaceMech()(N.Count()(X)),
        "lap_sum": N.LaplaceMech()(N.Sum()(N.Clip(box=(-1.0, 1.0))(X))),
        "peel": N.Peel(s=1)(N.Sum()(N.Clip(box=(-1.0, 1.0))(X))),
        "pre": N.GaussianMech()(N.Sum()(P)),
        "inside": N.GaussianMech()(N.Count()(inside)),
        "outside": N.GaussianMech()(N.Sum()(N.Clip(radius=2.0)(outside))),
        "hist": N.LaplaceMech()(N.Histogram(edges=[-1.0, 0.0, 1.0])(col)),
        "rownorm_q": N.Quantile(q=0.5)(N.OrderStatistics(upper=2.0)(N.Magnitudes(of="rows")(X))),
        "coord_q": N.Quantile(q=0.9)(N.OrderStatistics(upper=2.0)(N.Magnitudes(of="coordinates")(X))),
        "loop": N.repeat(X, b.public([0.0, 0.0, 0.0]), _step, times=2),
        "tree": N.partition_tree(X, b.public([0.0, 0.0, 0.0]), _tree_step, max_depth=2, max_parts=3),
    }


def _tree_step(rows: Any, state: Any, depth: Any) -> N.TreeStep:
    inside, outside = N.split(rows, N.PartitionByBall(center=state, radius=rows.builder.public(1.0)))
    cnt = N.LaplaceMech()(N.Count()(rows))
    return N.TreeStep(split=cnt, parts=[inside, outside], states=[state, state],
                      leaf=N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(rows))))


def _step(rows: Any, state: Any, k: Any) -> Any:
    s = N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(rows)))
    return N.Apply(fn=np.add, shape=(3,))(s, state)


def _ordinal(b: dp.PlanBuilder) -> dict[str, Any]:
    X = b.source("X", dp.Ordinal(N=8))
    return {
        "ord": N.LaplaceMech()(N.OrdinalCounts(edges=[0, 4, 8])(X)),
        "interval": N.GaussianMech()(N.IntervalCounts(interval=b.public([2, 5]), normalize=False)(X)),
        "stab": N.StabilityHistogram(delta=1e-8)(N.BinCounts(width=1.0)(X)),
    }


def _cube(b: dp.PlanBuilder) -> dict[str, Any]:
    X = b.source("X", dp.BooleanCube(d=4))
    return {"cube": N.GaussianMech()(N.Sum()(X)), "reals": N.GaussianMech()(N.Sum()(N.Clip(box=(0.0, 1.0))(X)))}


def _reals(b: dp.PlanBuilder) -> dict[str, Any]:
    X = b.source("X", dp.Reals())
    return {"stab": N.StabilityHistogram(delta=1e-8)(N.BinCounts(width=0.5, shift=0.25)(X)),
            "q": N.Quantile(q=0.5)(N.OrderStatistics(lower=-1.0, upper=1.0)(X))}


def _tuples(b: dp.PlanBuilder) -> dict[str, Any]:
    """Rows of k = 3 points of dimension 2 (the group-level nodes of mixtures.md 8, dpflow.nodes.tuples)."""
    X = b.source("X", dp.Vectors(d=6))
    P = N.TupleProject(k=3, basis=b.public(np.eye(2)), center=b.public([0.0, 0.0]))(X)
    h = N.GaussianStabilityHistogram(delta=1e-8)(N.TupleCellCounts(k=3)(P))
    near = N.split(X, N.PartitionByNearest(k=2, centers=b.public(np.zeros((2, 6)))))
    Y = N.TupleNearest(k=3, centers=b.public(np.zeros((3, 2))), index=1)(X)
    return {"h": h, "near": N.GaussianMech()(N.Count()(near[0])), "rest": N.GaussianMech()(N.Count()(near[2])),
            "matched": N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(Y)))}


ADD_REMOVE_PLANS: dict[str, tuple[Builder, int]] = {
    "vectors": (_vectors, 3), "ordinal": (_ordinal, 1), "cube": (_cube, 4), "reals": (_reals, 1),
    "tuples": (_tuples, 6),
}


# node kinds that read rows but are refused under add/remove (they need the public n of replace-one
# neighbours): each is checked to be refused below, so the list cannot hide a kind that would run
REFUSED_UNDER_ADD_REMOVE: dict[str, Callable[[Any, dp.PlanBuilder], Any]] = {
    "Mean": lambda X, b: N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))),
    "SecondMoment": lambda X, b: N.GaussianMech()(N.SecondMoment()(N.Clip(radius=1.0)(X))),
    "PairDifferences": lambda X, b: N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(N.PairDifferences()(X)))),
    "SubsampleAggregate": lambda X, b: N.GaussianMech()(N.Mean()(N.SubsampleAggregate(size=2, statistic="mean")(
        N.Clip(radius=1.0)(X)))),
    "SplitByIndex": lambda X, b: N.GaussianMech()(N.Count()(N.split(X, N.SplitByIndex(pieces=2))[0])),
    "TruncatedMean": lambda X, b: N.GaussianMech()(N.TruncatedMean(bound=1.0)(X)),
    "GradientStep": lambda X, b: N.GaussianMech()(N.GradientStep(
        beta=b.public([0.0]), eta=0.5, x_bound=1.0, residual_bound=1.0, radius=1.0)(X)),
    "TruncatedBinaryMean": lambda X, b: N.GaussianMech()(N.TruncatedBinaryMean(tau=1)(X)),
    "DyadicCounts": lambda X, b: N.LaplaceMech()(N.DyadicCounts(N=8)(X)),
    "DyadicExpMech": lambda X, b: N.DyadicExpMech()(N.DyadicCounts(N=8)(X)),
}


STAND_INS = {"Input", "State", "Round"}  # bound by Repeat, exercised by the "loop" release


def _kinds(plan: dp.Plan) -> set[str]:
    out: set[str] = set()
    for rec in plan.records:
        out.add(rec.node.kind)
        if isinstance(rec.node, (N.Repeat, N.PartitionTree)):
            out |= {r.node.kind for r in rec.node.body.records}
    return out


def _build(make: Builder) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ApproxZCDP(1.0, 1e-6), neighbors="add_remove")
    return b.build(**make(b))


def test_every_row_reading_node_kind_is_run_on_empty_data_or_refused_under_add_remove() -> None:
    covered = set().union(*(_kinds(_build(make)) for make, _ in ADD_REMOVE_PLANS.values()))
    covered |= _kinds(mixture_add_remove_plan())  # the mixture family's kinds, run on 0 and 1 rows in test_terrific
    rows_kinds = {k for k, cls in N.NODE_KINDS.items() if not issubclass(cls, PostProcess)
                  and k not in ("Public", "PredictedError")}  # no inputs: public statements
    missing = rows_kinds - covered - set(REFUSED_UNDER_ADD_REMOVE) - STAND_INS
    assert not missing, f"node kinds neither run on empty add/remove data nor refused: {sorted(missing)}"
    assert STAND_INS <= covered


@pytest.mark.parametrize("kind", sorted(REFUSED_UNDER_ADD_REMOVE))
def test_refused_kinds_are_refused_under_add_remove(kind: str) -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="add_remove")
    dom = {"DyadicCounts": dp.Ordinal(N=8), "DyadicExpMech": dp.Ordinal(N=8), "GradientStep": dp.Vectors(d=2),
           "TruncatedBinaryMean": dp.BooleanCube(d=2)}.get(kind, dp.Vectors(d=1))
    X = b.source("X", dom)
    with pytest.raises(PlanError):
        b.build(out=REFUSED_UNDER_ADD_REMOVE[kind](X, b)).check()
    # the same plan is accepted under replace-one neighbours with a public n (so it is a real node use)
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="replace")
    b.build(out=REFUSED_UNDER_ADD_REMOVE[kind](b.source("X", dom, n=10), b)).check()


NOISES = {"seeded": lambda: dp.SeededNoise(1), "exact": lambda: dp.SeededNoise(1, exact=True)}


@pytest.mark.parametrize("noise", sorted(NOISES))
@pytest.mark.parametrize("name", sorted(ADD_REMOVE_PLANS))
@pytest.mark.parametrize("rows", [0, 1])
def test_add_remove_runs_on_zero_and_one_rows(name: str, rows: int, noise: str) -> None:
    """Under add/remove a 0-row dataset neighbours a 1-row one: both must release, never raise."""
    make, d = ADD_REMOVE_PLANS[name]
    plan = _build(make)
    X = np.full((rows, d), 0.5) if d > 1 else np.ones((rows, 1))
    res = plan.run({"X": X}, noise=NOISES[noise]())
    assert set(res.released) == {name for name, _ in plan.outputs}


def test_empty_data_of_any_empty_shape_is_zero_rows_under_add_remove() -> None:
    """An empty CSV reads as a (0, 1) array: under add/remove that is 0 rows, not a schema error."""
    plan = _build(_vectors)
    for empty in (np.zeros((0, 1)), np.zeros((0,)), np.zeros((0, 3)), []):
        res = plan.run({"X": empty}, noise=dp.SeededNoise(2))
        assert np.isfinite(res.released["sum"]).all()


def test_empty_sum_releases_noise_around_zero() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="add_remove")
    X = b.source("X", dp.Vectors(d=2))
    plan = b.build(s=N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(X))), c=N.GaussianMech()(N.Count()(X)))
    res = plan.run({"X": np.zeros((0, 2))}, noise=dp.SeededNoise(0))
    facts = res.report.execution.facts
    assert np.all(np.abs(res.released["s"]) <= 6 * facts["gaussian_mech_3"][0]["sigma"])
    assert abs(res.released["c"]) <= 6 * facts["gaussian_mech_5"][0]["sigma"]
