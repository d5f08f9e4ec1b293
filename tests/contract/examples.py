"""One small example plan fragment per node kind of :data:`dpflow.nodes.NODE_KINDS`.

Every example reads one private source ``X`` (its ``domain``; ``N_ROWS`` rows under replace-one,
a private count under add/remove) and returns a :class:`Fragment`: the handles the plan releases,
the id of the node of the example's kind (``focus``) and, when the kind has a sensitivity rule,
the statistics whose declared sensitivities the contract suite checks on neighbouring datasets
(the query itself, or a query right after a transform, so that the transform's output bounds are
what is checked).  Released parameters of the checked statistics are public constants, so that
both neighbours see the same released values.

``tests/contract/test_every_node.py`` fails when a kind of ``NODE_KINDS`` has no example here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

import dpflow as dp
from dpflow import nodes as N
from dpflow.domains import RowDomain
from dpflow.handles import Sensitive
from dpflow.privacy import Measure

N_ROWS = 6
RELATIONS = ("replace", "add_remove")
REPLACE = ("replace",)


@attrs.frozen
class Fragment:
    """What an example adds to a plan: released ``outputs``, the ``focus`` node id of the example's
    kind, and the ids of the statistics (``StatT`` nodes) whose sensitivity is checked."""

    outputs: dict[str, Any]
    focus: str
    stats: tuple[str, ...] = ()


@attrs.frozen
class Example:
    """A plan fragment for one node kind.

    ``relations``: the neighbouring relations the fragment certifies under (each gets the
    sensitivity and non-finite checks).  ``special``: rows on the boundary of the declared bounds
    (the base data holds ``special[0]``; every special row is also tried as a neighbour's row).
    ``in_body``: the kind is a stand-in inside the body of the Repeat node ``focus``.
    """

    kind: str
    build: Callable[[dp.PlanBuilder, Any], Fragment]
    domain: RowDomain = dp.Vectors(d=3)
    budget: Measure = dp.ZCDP(1)
    relations: tuple[str, ...] = REPLACE
    special: tuple[tuple[float, ...], ...] = ()
    in_body: bool = False

    def plan(self, relation: str = "replace", donors: bool = False) -> tuple[dp.Plan, Fragment, dict[str, str]]:
        """The example's plan under ``relation``.  With ``donors`` the plan also holds (before the
        fragment) one node of every static type, to be wired into the focus node's input slots:
        returned as ``{"rows" | "stat" | "pieces" | "released" | "unbounded": node id}``."""
        b = dp.PlanBuilder(budget=self.budget, neighbors=relation, name=f"contract-{self.kind}")
        spare: dict[str, str] = {}
        if donors:
            W = b.source("W", dp.Vectors(d=1), n=N_ROWS if relation == "replace" else None)
            spare["rows"] = W.id
            spare["stat"] = N.Count()(W).id
            spare["released"] = b.public(1.0).id
            spare["unbounded"] = N.Sum()(W).id  # a statistic of unbounded sensitivity (not a wrong type)
            if relation == "replace":
                spare["pieces"] = b.add(N.SplitByIndex(pieces=1), (W.id,))
        X = b.source("X", self.domain, n=N_ROWS if relation == "replace" else None)
        frag = self.build(b, X)
        return b.build(**frag.outputs), frag, spare


EXAMPLES: dict[str, Example] = {}


def example(kind: str, **kw: Any) -> Callable[[Callable[[dp.PlanBuilder, Any], Fragment]],
                                              Callable[[dp.PlanBuilder, Any], Fragment]]:
    """Register the decorated fragment builder as the example of ``kind``."""

    def register(fn: Callable[[dp.PlanBuilder, Any], Fragment]) -> Callable[[dp.PlanBuilder, Any], Fragment]:
        assert kind not in EXAMPLES, kind
        EXAMPLES[kind] = Example(kind, fn, **kw)
        return fn

    return register


def unit(d: int) -> np.ndarray:
    u = np.arange(1.0, d + 1.0)
    out: np.ndarray = u / np.linalg.norm(u)
    return out


def _t(v: Any) -> tuple[float, ...]:
    return tuple(float(x) for x in np.ravel(v))


# --------------------------------------------------------------------------- sources and transforms


def _split(b: dp.PlanBuilder, X: Any, rule: N.SplitByIndex | N.PartitionByBall) -> tuple[str, tuple[Any, ...]]:
    """What :func:`dpflow.nodes.split` does, also returning the split node's id."""
    sid = b.add(rule, (X.id,))
    count = rule.pieces if isinstance(rule, N.SplitByIndex) else 2
    return sid, tuple(Sensitive(b.add(N.Piece(index=i), (sid,)), b) for i in range(count))


@example("Source", domain=dp.Vectors(d=2, l2_bound=dp.Sym.const(1.5), box=(-1.0, 2.0)), relations=RELATIONS,
         special=(_t(1.5 * unit(2)), (-1.0, -1.0), (1.5, 0.0)))
def _source(b: dp.PlanBuilder, X: Any) -> Fragment:
    s = N.Sum()(X)
    return Fragment({"s": N.GaussianMech()(s)}, X.id, (s.id,))


@example("Clip", relations=RELATIONS, special=(_t(2 * unit(3)), _t(-2 * unit(3))))
def _clip(b: dp.PlanBuilder, X: Any) -> Fragment:
    C = N.Clip(radius=b.public(2.0))(X)
    s = N.Sum()(C)
    return Fragment({"s": N.GaussianMech()(s)}, C.id, (s.id,))


@example("Columns", relations=RELATIONS, special=((-1.0, -1.0, -1.0), (2.0, 2.0, 2.0)))
def _columns(b: dp.PlanBuilder, X: Any) -> Fragment:
    K = N.Columns(keep=[2, 0])(N.Clip(box=(-1.0, 2.0))(X))
    s = N.Sum()(K)
    return Fragment({"s": N.LaplaceMech()(s)}, K.id, (s.id,))


@example("Precondition", relations=RELATIONS, special=((1.5, 0.0, 0.0), (-0.5, 0.0, 0.0)))
def _precondition(b: dp.PlanBuilder, X: Any) -> Fragment:
    P = N.Precondition(matrix=b.public([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0]]), center=b.public([0.5, 0.0, 0.0]))(X)
    s = N.Sum()(N.Clip(radius=1.0)(P))
    return Fragment({"s": N.GaussianMech()(s)}, P.id, (s.id,))


@example("PairDifferences", special=(_t(unit(3)), _t(-unit(3))))
def _pairs(b: dp.PlanBuilder, X: Any) -> Fragment:
    P = N.PairDifferences()(N.Clip(radius=1.0)(X))
    s = N.Sum()(P)
    return Fragment({"s": N.GaussianMech()(s)}, P.id, (s.id,))


@example("SubsampleAggregate", special=(_t(unit(3)), _t(-unit(3)), (0.0, 0.0, 0.0)))
def _subsample_aggregate(b: dp.PlanBuilder, X: Any) -> Fragment:
    B = N.SubsampleAggregate(size=2, statistic="top_projection", k=1)(X)
    m = N.Mean()(B)
    s = N.Sum()(N.SubsampleAggregate(size=3, statistic="mean", shuffle=1)(N.Clip(radius=1.0)(X)))
    return Fragment({"m": N.GaussianMech()(m), "s": N.GaussianMech()(s)}, B.id, (m.id, s.id))


@example("SplitByIndex", special=(_t(unit(3)), _t(-unit(3))))
def _split_index(b: dp.PlanBuilder, X: Any) -> Fragment:
    split_id, (left, right) = _split(b, N.Clip(radius=1.0)(X), N.SplitByIndex(pieces=2))
    s0, s1 = N.Sum()(left), N.Mean()(right)
    return Fragment({"s0": N.GaussianMech()(s0), "s1": N.GaussianMech()(s1)}, split_id, (s0.id, s1.id))


@example("PartitionByBall", relations=RELATIONS, special=(_t(0.5 * unit(3)), _t(5.0 * unit(3))))
def _partition(b: dp.PlanBuilder, X: Any) -> Fragment:
    rule = N.PartitionByBall(center=b.public([0.0, 0.0, 0.0]), radius=b.public(1.0))
    split_id, (inside, outside) = _split(b, X, rule)
    s, c = N.Sum()(N.Clip(radius=2.0)(inside)), N.Count()(outside)
    return Fragment({"s": N.GaussianMech()(s), "c": N.GaussianMech()(c)}, split_id, (s.id, c.id))


@example("Piece", relations=RELATIONS, special=(_t(0.5 * unit(3)), _t(-3.0 * unit(3))))
def _piece(b: dp.PlanBuilder, X: Any) -> Fragment:
    inside, outside = N.split(X, N.PartitionByBall(center=[0.0, 0.0, 0.0], radius=1.0))
    s, c = N.Sum()(N.Clip(radius=2.0)(outside)), N.Count()(inside)
    return Fragment({"s": N.GaussianMech()(s), "c": N.LaplaceMech()(c)}, outside.id, (s.id, c.id))


@example("Magnitudes", relations=RELATIONS, special=((-3.0, 0.5, 4.0), (0.0, 0.0, 0.0)))
def _magnitudes(b: dp.PlanBuilder, X: Any) -> Fragment:
    edges = [0.0, 1.0, 2.0, 4.0]
    M = N.Magnitudes(of="coordinates")(X)
    h1 = N.Histogram(edges=edges)(M)
    h2 = N.Histogram(edges=edges)(N.Magnitudes(of="rows")(N.Clip(radius=3.0)(X)))
    return Fragment({"h1": N.LaplaceMech()(h1), "h2": N.GaussianMech()(h2)}, M.id, (h1.id, h2.id))


# --------------------------------------------------------------------------- queries


@example("Sum", relations=RELATIONS, special=((-1.0, -1.0, -1.0), (2.0, 2.0, 2.0)))
def _sum(b: dp.PlanBuilder, X: Any) -> Fragment:
    s = N.Sum()(N.Clip(box=(-1.0, 2.0))(X))
    return Fragment({"s": N.LaplaceMech()(s)}, s.id, (s.id,))


@example("Mean", special=(_t(2 * unit(3)), _t(-2 * unit(3))))
def _mean(b: dp.PlanBuilder, X: Any) -> Fragment:
    m = N.Mean()(N.Clip(radius=2.0)(X))
    return Fragment({"m": N.GaussianMech()(m)}, m.id, (m.id,))


@example("Count", relations=RELATIONS)
def _count(b: dp.PlanBuilder, X: Any) -> Fragment:
    c = N.Count()(X)
    return Fragment({"c": N.LaplaceMech()(c)}, c.id, (c.id,))


_CENTRE = [1.5, -0.5, 0.25]


@example("SecondMoment", special=(_t(np.array(_CENTRE) + 1.5 * unit(3)),
                                  _t(np.array(_CENTRE) + 1.5 * np.array([-2.0, 1.0, 0.0]) / np.sqrt(5.0))))
def _second_moment(b: dp.PlanBuilder, X: Any) -> Fragment:
    c = b.public(_CENTRE)
    S = N.SecondMoment(center=c)(N.Clip(radius=1.5, center=c)(X))
    return Fragment({"S": N.GaussianMech()(S)}, S.id, (S.id,))


@example("Histogram", domain=dp.Reals(), relations=RELATIONS, special=((-5.0,), (5.0,)))
def _histogram(b: dp.PlanBuilder, X: Any) -> Fragment:
    h = N.Histogram(edges=[-3.0, -1.0, 0.0, 0.5, 1.0, 3.0])(X)
    return Fragment({"h": N.LaplaceMech()(h)}, h.id, (h.id,))


@example("OrderStatistics", relations=RELATIONS, special=((0.0, 0.0, 0.0), (4.0, 0.0, 0.0)))
def _order_statistics(b: dp.PlanBuilder, X: Any) -> Fragment:
    z = N.OrderStatistics(lower=0.0, upper=b.public(4.0))(N.Magnitudes(of="rows")(X))
    return Fragment({"q": N.Quantile(q=0.5)(z)}, z.id, (z.id,))


@example("GradientStep", special=((1.0, 0.0, -5.0), (-1.0, 0.0, -5.0), (1.0, -1.0, -5.0), (-1.0, 1.0, 5.0)))
def _gradient_step(b: dp.PlanBuilder, X: Any) -> Fragment:
    # beta = 0 and c_x = 1: y is clipped to R = A - K = A - 1 and the residual is -y, so the rows
    # (+-1, 0, -5) move the first coordinate of the step by 2 eta c_x R / n = 2 eta (A - 1) / n
    g = N.GradientStep(beta=b.public([0.0, 0.0]), eta=0.5, x_bound=1.0, residual_bound=b.public(3.0),
                       radius=1.0, ball="l1")(X)
    return Fragment({"beta": N.GaussianMech()(g)}, g.id, (g.id,))


@example("TruncatedMean", special=((2.0, 2.0, 2.0), (-2.0, -2.0, -2.0)))
def _truncated_mean(b: dp.PlanBuilder, X: Any) -> Fragment:
    m = N.TruncatedMean(bound=b.public(2.0))(X)
    return Fragment({"m": N.GaussianMech()(m)}, m.id, (m.id,))


@example("OrdinalCounts", domain=dp.Ordinal(N=10), budget=dp.PureDP(1), relations=RELATIONS,
         special=((0.0,), (9.0,)))
def _ordinal_counts(b: dp.PlanBuilder, X: Any) -> Fragment:
    h = N.OrdinalCounts(edges=[0, 3, 10])(X)
    return Fragment({"h": N.LaplaceMech()(h)}, h.id, (h.id,))


@example("BinCounts", domain=dp.Reals(), budget=dp.ApproxZCDP(1, "1/1000000"), relations=RELATIONS,
         special=((0.1,), (-7.3,)))
def _bin_counts(b: dp.PlanBuilder, X: Any) -> Fragment:
    q = N.BinCounts(width=0.5, shift=0.1)(X)
    return Fragment({"h": N.StabilityHistogram(delta="1/10000000")(q)}, q.id, (q.id,))


@example("DyadicCounts", domain=dp.Ordinal(N=64), budget=dp.PureDP(1), special=((0.0,), (63.0,)))
def _dyadic_counts(b: dp.PlanBuilder, X: Any) -> Fragment:
    q = N.DyadicCounts(N=64)(X)
    return Fragment({"J": N.DyadicExpMech()(q)}, q.id, (q.id,))


@example("IntervalCounts", domain=dp.Ordinal(N=8), budget=dp.PureDP(1), relations=RELATIONS,
         special=((1.0,), (3.0,)))
def _interval_counts(b: dp.PlanBuilder, X: Any) -> Fragment:
    q = N.IntervalCounts(interval=b.public([2, 5]), normalize=False)(X)
    return Fragment({"w": N.LaplaceMech()(q)}, q.id, (q.id,))


@example("TruncatedBinaryMean", domain=dp.Vectors(d=4), special=((1.0, 0.0, 0.0, 0.0), (0.0, 1.0, 1.0, 1.0)))
def _truncated_binary_mean(b: dp.PlanBuilder, X: Any) -> Fragment:
    # with flip (0, 1, 0, 0) the special rows become y = (1, 1, 0, 0) and (0, 0, 1, 1): ||y - y'||^2 = 2 tau
    C = N.Clip(box=(0.0, 1.0))(X)
    m = N.TruncatedBinaryMean(tau=2, mask=b.public([1, 1, 1, 1]), flip=b.public([0, 1, 0, 0]))(C)
    r = N.TruncatedBinaryMean(radius=b.public(1.5))(C)
    return Fragment({"m": N.GaussianMech()(m), "r": N.GaussianMech()(r)}, m.id, (m.id, r.id))


# --------------------------------------------------------------------------- mechanisms


@example("GaussianMech")
def _gaussian(b: dp.PlanBuilder, X: Any) -> Fragment:
    g = N.GaussianMech(weight=2)(N.Mean()(N.Clip(radius=1.0)(X)))
    return Fragment({"g": g}, g.id)


@example("LaplaceMech", relations=RELATIONS)
def _laplace(b: dp.PlanBuilder, X: Any) -> Fragment:
    m = N.LaplaceMech()(N.Sum()(N.Clip(box=(-1.0, 1.0))(X)))
    return Fragment({"m": m}, m.id)


@example("Peel")
def _peel(b: dp.PlanBuilder, X: Any) -> Fragment:
    p = N.Peel(s=1)(N.Mean()(N.Clip(box=(-1.0, 1.0))(X)))
    return Fragment({"p": p}, p.id)


@example("Quantile")
def _quantile(b: dp.PlanBuilder, X: Any) -> Fragment:
    q = N.Quantile(q=0.25)(N.OrderStatistics(lower=0.0, upper=4.0)(N.Magnitudes(of="rows")(X)))
    return Fragment({"q": q}, q.id)


@example("StabilityHistogram", domain=dp.Ordinal(N=10), budget=dp.ApproxZCDP(1, "1/1000000"), relations=RELATIONS)
def _stability_histogram(b: dp.PlanBuilder, X: Any) -> Fragment:
    h = N.StabilityHistogram(delta="1/10000000")(N.BinCounts(width=1.0)(X))
    return Fragment({"h": h}, h.id)


@example("DyadicExpMech", domain=dp.Ordinal(N=16), budget=dp.PureDP(1))
def _dyadic_exp_mech(b: dp.PlanBuilder, X: Any) -> Fragment:
    J = N.DyadicExpMech()(N.DyadicCounts(N=16)(X))
    return Fragment({"J": J}, J.id)


# --------------------------------------------------------------------------- post-processing and constants


def _released_mean(b: dp.PlanBuilder, X: Any) -> Any:
    return N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))


def _released_moment(b: dp.PlanBuilder, X: Any) -> Any:
    return N.GaussianMech()(N.SecondMoment()(N.Clip(radius=1.0)(X)))


@example("Public")
def _public(b: dp.PlanBuilder, X: Any) -> Fragment:
    r = N.param(b, "radius", 2.0, "a public choice")
    return Fragment({"m": N.GaussianMech()(N.Mean()(N.Clip(radius=r)(X))), "r": r}, r.id)


@example("PredictedError")
def _predicted_error(b: dp.PlanBuilder, X: Any) -> Fragment:
    p = N.predicted_error(b, "m", "l2", 0.1, 0.9, "a public statement")
    return Fragment({"p": p}, p.id)


@example("Apply")
def _apply(b: dp.PlanBuilder, X: Any) -> Fragment:
    a = N.Apply(fn=np.abs)(_released_mean(b, X))
    return Fragment({"a": a}, a.id)


@example("PSDProject")
def _psd(b: dp.PlanBuilder, X: Any) -> Fragment:
    p = N.PSDProject(floor=0.01)(_released_moment(b, X))
    return Fragment({"p": p}, p.id)


@example("Eigh")
def _eigh(b: dp.PlanBuilder, X: Any) -> Fragment:
    e = N.Eigh()(_released_moment(b, X))
    return Fragment({"w": N.Get(index=0)(e)}, e.id)


@example("Get")
def _get(b: dp.PlanBuilder, X: Any) -> Fragment:
    g = N.Get(index=1)(_released_mean(b, X))
    return Fragment({"g": g}, g.id)


@example("Pack")
def _pack(b: dp.PlanBuilder, X: Any) -> Fragment:
    p = N.Pack(names=("centre", "radius"))(_released_mean(b, X), b.public(1.0))
    return Fragment({"p": p, "r": N.Get("radius")(p)}, p.id)


@example("NoiseScale")
def _noise_scale(b: dp.PlanBuilder, X: Any) -> Fragment:
    m = _released_mean(b, X)
    s = N.noise_scale(m)
    return Fragment({"m": m, "s": s}, s.id)


@example("ScaleShift")
def _scale_shift(b: dp.PlanBuilder, X: Any) -> Fragment:
    q = N.Quantile(q=0.5)(N.OrderStatistics(upper=4.0)(N.Magnitudes(of="rows")(X)))
    s = N.ScaleShift(scale=2.0, shift=1.0)(q)
    return Fragment({"s": s}, s.id)


@example("ModeBinUpper")
def _mode_bin_upper(b: dp.PlanBuilder, X: Any) -> Fragment:
    edges = [0.0, 1.0, 2.0, 4.0]
    m = N.ModeBinUpper(edges=edges)(N.LaplaceMech()(N.Histogram(edges=edges)(N.Magnitudes(of="rows")(X))))
    return Fragment({"m": m}, m.id)


@example("ProjectCoef")
def _project_coef(b: dp.PlanBuilder, X: Any) -> Fragment:
    g = N.GradientStep(beta=b.public([0.0, 0.0]), eta=0.5, x_bound=1.0, residual_bound=2.0, radius=1.0)(X)
    p = N.ProjectCoef(radius=1.0, sparsity=1)(N.GaussianMech()(g))
    return Fragment({"p": p}, p.id)


@example("RidgeSolve")
def _ridge(b: dp.PlanBuilder, X: Any) -> Fragment:
    M = N.GaussianMech()(N.SecondMoment()(N.Clip(radius=2.0)(X)))
    r = N.RidgeSolve(ridge=0.1, scale=b.public(2.0))(M)
    return Fragment({"r": r}, r.id)


@example("AddKnots", domain=dp.Ordinal(N=8), budget=dp.PureDP(1))
def _add_knots(b: dp.PlanBuilder, X: Any) -> Fragment:
    table = N.DyadicCounts(N=8)(X)
    J = N.DyadicExpMech()(table)
    cdf = N.AddKnots(N=8)(J, N.LaplaceMech()(N.IntervalCounts(interval=J)(X, table)))  # MERR's round
    return Fragment({"cdf": cdf}, cdf.id)


@example("TopEigenvectors")
def _top_eigenvectors(b: dp.PlanBuilder, X: Any) -> Fragment:
    V = N.private_pca(X, k=2, radius=2.0)
    return Fragment({"V": V}, V.id)


@example("Project", relations=RELATIONS, special=((3.0, 0.0, 0.0), (-3.0, 1.0, 0.0)))
def _project(b: dp.PlanBuilder, X: Any) -> Fragment:
    P = N.Project(basis=b.public([[0.6, 0.0], [0.8, 0.0], [0.0, 1.0]]), center=b.public([0.5, 0.0, 0.0]))(X)
    s = N.Sum()(N.Clip(radius=1.0)(P))
    return Fragment({"s": N.GaussianMech()(s)}, P.id, (s.id,))


@example("AboveThreshold", domain=dp.Reals(), budget=dp.PureDP(1), relations=RELATIONS)
def _above_threshold(b: dp.PlanBuilder, X: Any) -> Fragment:
    h = N.Histogram(edges=[-3.0, -1.0, 0.0, 1.0, 3.0])(X)
    i = N.AboveThreshold(threshold=b.public(2.0))(h)
    return Fragment({"i": i}, i.id, (h.id,))


_APPROX = dp.ApproxZCDP(1, "1/1000000")


@example("TerrificScores", relations=RELATIONS, budget=dp.PureDP(1), special=((0.0, 0.0, 0.0), (0.6, 0.0, 0.0)))
def _terrific_scores(b: dp.PlanBuilder, X: Any) -> Fragment:
    s = N.TerrificScores(radii=(0.25, 0.5, 1.0, 2.0), t=2)(X)
    return Fragment({"j": N.AboveThreshold(threshold=2.0)(s)}, s.id, (s.id,))


@example("GridValue", budget=dp.PureDP(1))
def _grid_value(b: dp.PlanBuilder, X: Any) -> Fragment:
    j = N.AboveThreshold(threshold=2.0)(N.TerrificScores(radii=(0.5, 1.0), t=2)(X))
    r = N.GridValue(values=(0.5, 1.0))(j)
    return Fragment({"r": r}, r.id)


@example("GridMaxCounts", relations=RELATIONS, budget=dp.PureDP(1), special=((0.0, 0.0, 0.0), (0.99, 0.0, 0.0)))
def _grid_max(b: dp.PlanBuilder, X: Any) -> Fragment:
    g = N.GridMaxCounts(radius=b.public(0.5), factor=2.0, tries=4, seed=3)(X)
    return Fragment({"j": N.AboveThreshold(threshold=3.0)(g)}, g.id, (g.id,))


@example("CellCounts", relations=RELATIONS, budget=_APPROX, special=((0.0, 0.0, 0.0), (0.99, 0.0, 0.0)))
def _cell_counts(b: dp.PlanBuilder, X: Any) -> Fragment:
    c = N.CellCounts(radius=0.5, choice=b.public(1.0), factor=2.0, tries=4, seed=3)(X)
    return Fragment({"h": N.StabilityHistogram(delta="1/10000000")(c)}, c.id, (c.id,))


@example("CellBall", budget=_APPROX)
def _cell_ball(b: dp.PlanBuilder, X: Any) -> Fragment:
    r = b.public(0.5)
    j = N.AboveThreshold(threshold=3.0)(N.GridMaxCounts(radius=r, factor=2.0, tries=4)(X))
    h = N.StabilityHistogram(delta="1/10000000")(N.CellCounts(radius=r, choice=j, factor=2.0, tries=4)(X))
    cb = N.CellBall(d=3, factor=2.0, tries=4)(r, j, h, b.public([0.0, 0.0, 0.0]), b.public(5.0))
    return Fragment({"cb": cb}, cb.id)


@example("BallMean")
def _ball_mean(b: dp.PlanBuilder, X: Any) -> Fragment:
    m = N.ball_mean(X, b.public([0.0, 0.0, 0.0]), b.public(1.0), 1.0, 1.0)
    return Fragment({"m": m}, m.id)


@example("ShellCounts", relations=RELATIONS, budget=dp.PureDP(1), special=((1.0, 0.0, 0.0), (2.0, 0.0, 0.0)))
def _shell_counts(b: dp.PlanBuilder, X: Any) -> Fragment:
    c = N.ShellCounts(center=b.public([0.0, 0.0, 0.0]), inner=b.public(1.0), outer=b.public(2.0))(X)
    return Fragment({"c": N.LaplaceMech()(c)}, c.id, (c.id,))


@example("ShellRadii")
def _shell_radii(b: dp.PlanBuilder, X: Any) -> Fragment:
    r = N.ShellRadii(which=1)(N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))
    return Fragment({"r": r}, r.id)


@example("TerrificDecision", budget=_APPROX)
def _terrific_decision(b: dp.PlanBuilder, X: Any) -> Fragment:
    ball = N.terrific_ball(X, t=2, radii=(0.5, 1.0, 2.0), center=[0.0, 0.0, 0.0], radius=5.0, tries=3)
    return Fragment({"ball": ball}, ball.id)


@example("BallCounts", relations=RELATIONS, budget=dp.PureDP(1), special=((1.0, 0.0, 0.0), (0.0, 2.0, 0.0)))
def _ball_counts(b: dp.PlanBuilder, X: Any) -> Fragment:
    c = N.BallCounts(center=b.public([0.0, 0.0, 0.0]), radii=(1.0, 2.0))(X)
    return Fragment({"j": N.AboveThreshold(threshold=3.0)(c)}, c.id, (c.id,))


@example("PartitionByProjectedBall", relations=RELATIONS, special=((1.0, 0.0, 0.0), (3.0, 0.0, 0.0)))
def _projected_partition(b: dp.PlanBuilder, X: Any) -> Fragment:
    rule = N.PartitionByProjectedBall(center=b.public([0.5]), radius=b.public(1.0),
                                      basis=b.public([[1.0], [0.0], [0.0]]), origin=b.public([0.0, 0.0, 0.0]))
    split_id, (inside, outside) = _split(b, X, rule)
    s, c = N.Sum()(N.Clip(radius=2.0)(inside)), N.Count()(outside)
    return Fragment({"s": N.GaussianMech()(s), "c": N.GaussianMech()(c)}, split_id, (s.id, c.id))


@example("GateBall")
def _gate_ball(b: dp.PlanBuilder, X: Any) -> Fragment:
    m = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))
    g = N.GateBall(limit=1)(N.Pack()(m, b.public(1.0)), N.Pack()(m, b.public(2.0)))
    return Fragment({"g": g}, g.id)


@example("Gram", relations=RELATIONS, special=(_t(np.array(_CENTRE) + 1.5 * unit(3)),
                                               _t(np.array(_CENTRE) - 1.5 * unit(3))))
def _gram(b: dp.PlanBuilder, X: Any) -> Fragment:
    c = b.public(_CENTRE)
    G = N.Gram(center=c)(N.Clip(radius=1.5, center=c)(X))
    return Fragment({"G": N.GaussianMech()(G)}, G.id, (G.id,))


# --------------------------------------------------------------------------- control


def _body(rows: Any, state: Any, k: Any) -> Any:
    step = N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(rows)))
    total = N.Apply(fn=np.add, shape=(3,))(N.Get(index=0)(state), step)
    return N.Pack()(total, N.Apply(fn=np.add, shape=())(k, k))


def _recurse(b: dp.PlanBuilder, X: Any) -> Fragment:
    """A two-round loop; its body holds the three stand-ins (their examples focus on the Repeat node
    whose body holds them: ``in_body``)."""
    init = N.Pack()(b.public([0.0, 0.0, 0.0]), b.public(0.0))
    rec = N.repeat(X, init, _body, times=2, round_weights=[1, 2])
    return Fragment({"rec": rec}, rec.id)


for _kind in ("Repeat", "Input", "State", "Round"):
    example(_kind, relations=RELATIONS, in_body=_kind != "Repeat")(_recurse)


def _tree_body(rows: Any, state: Any, depth: Any) -> N.TreeStep:
    inside, outside = N.split(rows, N.PartitionByBall(center=state, radius=rows.builder.public(1.0)))
    cnt = N.LaplaceMech()(N.Count()(rows))
    leaf = N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(rows)))
    return N.TreeStep(split=cnt, parts=[inside, outside], states=[state, state], leaf=leaf, size=cnt)


@example("PartitionTree", relations=RELATIONS, special=((1.0, 0.0, 0.0), (0.0, 0.0, 0.0)))
def _partition_tree(b: dp.PlanBuilder, X: Any) -> Fragment:
    """A tree of ball partitions, depth at most 2 and 3 parts: split while a piece's noisy count is positive."""
    tree = N.partition_tree(X, b.public([0.0, 0.0, 0.0]), _tree_body, max_depth=2, max_parts=3)
    return Fragment({"tree": tree}, tree.id)


# --------------------------------------------------------------------------- k-tuples of block answers (tuples.py)


@example("TupleProject", relations=RELATIONS, special=((3.0, -3.0, 0.0), (0.5, 0.5, 0.5)))
def _tuple_project(b: dp.PlanBuilder, X: Any) -> Fragment:
    P = N.TupleProject(k=3, basis=b.public([[2.0]]), center=b.public([0.5]))(X)
    s = N.Sum()(N.Clip(radius=1.0)(P))
    return Fragment({"s": N.GaussianMech()(s)}, P.id, (s.id,))


@example("TupleNearest", relations=RELATIONS, special=((3.0, -3.0, 0.0), (0.9, 0.1, 0.5)))
def _tuple_nearest(b: dp.PlanBuilder, X: Any) -> Fragment:
    Y = N.TupleNearest(k=3, centers=b.public([[0.0], [1.0], [-2.0]]), index=1)(X)
    s = N.Sum()(N.Clip(radius=1.0)(Y))
    return Fragment({"s": N.GaussianMech()(s)}, Y.id, (s.id,))


@example("TupleCellCounts", relations=RELATIONS, budget=_APPROX, special=((0.0, 0.0, 0.99), (0.0, 0.5, 1.0)))
def _tuple_cell_counts(b: dp.PlanBuilder, X: Any) -> Fragment:
    c = N.TupleCellCounts(k=3, seed=2)(X)
    return Fragment({"h": N.GaussianStabilityHistogram(delta="1/10000000")(c)}, c.id, (c.id,))


@example("GaussianStabilityHistogram", domain=dp.Reals(), budget=_APPROX, relations=RELATIONS)
def _gaussian_stability_histogram(b: dp.PlanBuilder, X: Any) -> Fragment:
    h = N.GaussianStabilityHistogram(delta="1/10000000")(N.BinCounts(width=1.0)(X))
    return Fragment({"h": h}, h.id)


@example("TupleCenters", budget=_APPROX)
def _tuple_centers(b: dp.PlanBuilder, X: Any) -> Fragment:
    h = N.GaussianStabilityHistogram(delta="1/10000000")(N.TupleCellCounts(k=3)(X))
    c = N.TupleCenters(k=3, w=1)(h, b.public([[1.0], [0.0], [0.0]]), b.public([0.0, 0.0, 0.0]))
    return Fragment({"c": c}, c.id)


@example("PartitionByNearest", relations=RELATIONS, special=((1.0, 0.0, 0.0), (-1.0, 0.0, 0.0)))
def _partition_nearest(b: dp.PlanBuilder, X: Any) -> Fragment:
    rule = N.PartitionByNearest(k=2, centers=b.public([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]]))
    sid = b.add(rule, (X.id,))
    a, c, rest = (Sensitive(b.add(N.Piece(index=i), (sid,)), b) for i in range(3))
    s, n, m = N.Sum()(N.Clip(radius=2.0)(a)), N.Count()(c), N.Count()(rest)
    return Fragment({"s": N.GaussianMech()(s), "n": N.GaussianMech()(n), "m": N.GaussianMech()(m)}, sid,
                    (s.id, n.id, m.id))
