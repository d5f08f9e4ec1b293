"""Mutation-testing pins of ``dpflow/nodes/blocks.py`` (2026-11-29): ``SubsampleAggregate`` (NRS 2007).

The output domain each block statistic declares is what every downstream query's sensitivity reads: the mean keeps
the input's ball (around its centre) and box, the median the box, k-means centres the box and ``sqrt(k) r`` around
the origin, the second moment ``r^2``, the top-k projector ``sqrt(k)``, the log-eigenvalues nothing.  The row count
becomes ``n // size`` (public), the stability carries over.  Also the block arithmetic: non-finite entries as 0,
float64 whatever the input, the scaling that keeps a block's second moment from overflowing before the division by
the block size, the farthest-first start and Lloyd steps of the block k-means.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest
from conftest import InferCtx, RowsCtx

from dpflow.domains import RowCount, Sym, Vectors
from dpflow.errors import DomainError, PlanTypeError
from dpflow.nodes.base import text_of
from dpflow.nodes.blocks import SubsampleAggregate, block_kmeans, block_statistic
from dpflow.nodes.types import ReleasedT, RowsT, Size


def _Infer() -> InferCtx:
    return InferCtx("s")


def _rows(dom: Vectors, n: int | None = 40, public: bool = True, stability: int = 2) -> RowsT:
    return RowsT(dom, "X", Size(public, n, RowCount("X")), stability,
                 frozenset({"replace" if public else "add_remove"}), None)


BALL = Vectors(d=2, l2_bound=3.0, box=(-2.0, 2.0), center="c")
ORIGIN = Vectors(d=2, l2_bound=2.5, box=(-2.0, 2.0))
_BOX_R: Any = Vectors(d=2, box=(-1.0, 1.0)).norm_l2()  # sqrt(2), rounded up


@pytest.mark.parametrize(("stat", "k", "dom", "want"), [
    ("mean", 1, BALL, Vectors(d=2, box=(-2.0, 2.0))),  # a ball around a centre and a box: the box alone
    ("mean", 1, ORIGIN, ORIGIN),  # both, the ball around the origin and 0 in the box
    ("mean", 1, Vectors(d=2, l2_bound=1.0, box=(0.0, 1.0)), Vectors(d=2, l2_bound=1.0, box=(0.0, 1.0))),
    ("mean", 1, Vectors(d=2, l2_bound=1.0, box=(-1.0, 0.0)), Vectors(d=2, l2_bound=1.0, box=(-1.0, 0.0))),
    ("mean", 1, Vectors(d=2, l2_bound=3.0, center="c"), Vectors(d=2, l2_bound=3.0, center="c")),
    ("kmeans", 2, Vectors(d=2, box=(1.0, 2.0)), Vectors(d=4, box=(1.0, 2.0))),  # 0 outside the box
    ("kmeans", 2, Vectors(d=2, box=(-2.0, -1.0)), Vectors(d=4, box=(-2.0, -1.0))),
    ("median", 1, BALL, Vectors(d=2, box=(-2.0, 2.0))),
    ("kmeans", 3, ORIGIN, Vectors(d=6, box=(-2.0, 2.0), l2_bound=Sym.const(2.5) * math.sqrt(3))),
    ("kmeans", 2, Vectors(d=2), Vectors(d=4)),
    ("second_moment", 1, ORIGIN, Vectors(d=4, l2_bound=Sym.const(2.5) * Sym.const(2.5))),
    ("second_moment", 1, Vectors(d=2, box=(-1.0, 1.0)), Vectors(d=4, l2_bound=_BOX_R * _BOX_R)),
    ("second_moment", 1, Vectors(d=2), Vectors(d=4)),
    ("top_projection", 2, ORIGIN, Vectors(d=4, l2_bound=Sym.const(math.sqrt(2)))),
    ("log2_eigenvalues", 1, ORIGIN, Vectors(d=2)),
])
def test_declared_block_domains(stat: str, k: int, dom: Vectors, want: Vectors) -> None:
    node = SubsampleAggregate(size=4, statistic=stat, k=k)
    rows = _rows(dom)
    inf = node.infer([rows], _Infer())  # type: ignore[arg-type]
    out = inf.out
    assert out.domain == want
    assert out.domain.l2_bound == want.l2_bound and out.domain.box == want.box and out.domain.center == want.center
    assert (out.size, out.stability, out.source, out.changes) == (
        Size(public=True, known=10, ref=RowCount("s")), 2, "X", rows.changes)
    what = {"top_projection": f"top-{k} projection", "kmeans": f"{k}-means centres"}.get(stat, stat)
    assert inf.derivation == (f"{what} of disjoint blocks of 4 rows: a replaced record changes one block (stability "
                              f"2); -> {want.describe()} (l2 bound {text_of(want.l2_bound)})")


def test_shuffle_and_unknown_n_in_the_derivation() -> None:
    node = SubsampleAggregate(size=4, statistic="mean", shuffle=7)
    inf = node.infer([_rows(ORIGIN, n=None)], _Infer())  # type: ignore[arg-type]
    assert inf.out.size == Size(public=True, known=None, ref=RowCount("s"))
    assert inf.derivation == (f"mean of disjoint blocks of 4 rows (rows in the public permutation of seed 7): a "
                              f"replaced record changes one block (stability 2); -> {ORIGIN.describe()} (l2 bound "
                              f"{text_of(ORIGIN.l2_bound)})")


def test_refusals() -> None:
    def refused(node: Any, rows: Any) -> Any:
        with pytest.raises((DomainError, PlanTypeError)) as e:
            node.infer([rows], _Infer())
        return e.value

    cases = [(SubsampleAggregate(size=4, statistic="top_projection", k=3), "top_projection with k=3 in d=2",
              "pass 1 <= k <= 2"),
             (SubsampleAggregate(size=4, statistic="top_projection", k=0), "top_projection with k=0 in d=2",
              "pass 1 <= k <= 2"),
             (SubsampleAggregate(size=4, statistic="kmeans", k=0), "kmeans with k=0 in d=2", "pass k >= 1"),
             (SubsampleAggregate(size=50, statistic="mean"), "40 rows do not fill one block of 50",
              "use a smaller block size")]
    for node, problem, fix in cases:
        e = refused(node, _rows(ORIGIN))
        assert (e.node, e.problem, e.fix) == ("s", problem, fix)
    SubsampleAggregate(size=4, statistic="top_projection", k=2).infer([_rows(ORIGIN)], _Infer())  # type: ignore[arg-type]
    SubsampleAggregate(size=40, statistic="kmeans", k=5).infer([_rows(ORIGIN)], _Infer())  # type: ignore[arg-type]
    e = refused(SubsampleAggregate(size=4, statistic="mean"), _rows(ORIGIN, n=None, public=False))
    assert e.node == "s" and e.problem.startswith(
        "SubsampleAggregate (blocks by position: under add/remove one record shifts every later block) needs a "
        "public row count")
    assert refused(SubsampleAggregate(size=4, statistic="mean"), ReleasedT((2,))).fix == "pass sensitive rows"
    for size in (True, 2.5, 0):
        with pytest.raises(ValueError) as v:
            SubsampleAggregate(size=size, statistic="mean")
        assert str(v.value) == f"SubsampleAggregate size must be an integer >= 1, got {size!r}"


def test_block_arithmetic() -> None:
    X = np.array([[1.0, np.nan], [3.0, np.inf], [5.0, 2.0], [7.0, 4.0], [9.0, 9.0]])
    assert block_statistic(X, 2, "mean").tolist() == [[2.0, 0.0], [6.0, 3.0]]
    assert block_statistic(X.astype(np.float32), 2, "mean").dtype == np.float64
    big = block_statistic(np.full((3, 1), 1e154), 3, "second_moment")  # the sum of squares alone overflows
    assert big.tolist() == [[pytest.approx(1e308, rel=1e-12)]]
    lw = block_statistic(np.array([[3.0, 4.0]]), 1, "log2_eigenvalues")  # one row: one nonzero eigenvalue
    assert lw[0, 0] == pytest.approx(math.log2(25.0), rel=1e-12) and lw[0, 1] == -np.inf
    P = block_statistic(np.array([[1.0, 0.0, 0.0]]), 1, "top_projection", k=2).reshape(3, 3)
    assert P == pytest.approx(np.diag([1.0, 0.0, 0.0]))  # a block of one row spans one direction
    assert block_statistic(np.zeros((1, 2)), 2, "second_moment").shape == (0, 4)
    with warnings.catch_warnings():  # a zero block (log2 of 0) and NaN rows warn nothing: private values
        warnings.simplefilter("error")
        for stat in ("log2_eigenvalues", "second_moment", "top_projection", "mean", "median"):
            block_statistic(np.array([[0.0, 0.0], [0.0, 0.0], [np.nan, 1e300], [np.inf, 1e-300]]), 2, stat)
    node = SubsampleAggregate(size=3, statistic="kmeans", k=2)
    out = node.evaluate([np.array([[0.0], [1.0], [10.0]])], RowsCtx(Vectors(d=1)))  # type: ignore[arg-type]
    assert out.tolist() == [[0.5, 10.0]]


def test_block_kmeans_start_and_steps() -> None:
    Y = np.array([[[0.0, 0.0], [1.0, 0.0], [9.0, 0.0], [0.0, 4.0]]])
    assert block_kmeans(Y, 3, rounds=0).tolist() == [[[0.0, 0.0], [9.0, 0.0], [0.0, 4.0]]]  # farthest first
    assert block_kmeans(np.full((1, 3, 1), 5.0), 2).tolist() == [[[5.0], [5.0]]]  # an empty centre keeps its place
    Y = np.array([[[2.0, 5.0], [2.0, 1.0], [5.0, 1.0], [2.0, 1.0], [2.0, 2.0]]])  # a centre ends with one row
    assert block_kmeans(Y, 2).tolist() == [[[2.0, 5.0], [2.75, 1.25]]]


def test_block_statistics_are_moved_into_the_declared_domain() -> None:
    """Rounding puts computed block statistics just outside the domain they declare (the mean of three 0.1 is
    0.10000000000000002); evaluate moves them in, so the sensitivities downstream nodes derive hold."""
    X = np.full((3, 1), 0.1)
    assert block_statistic(X, 3, "mean")[0, 0] > 0.1  # the rounding this guards against
    mean = SubsampleAggregate(size=3, statistic="mean")
    assert mean.evaluate([X], RowsCtx(Vectors(d=1, box=(0.0, 0.1))))[0, 0] == 0.1  # type: ignore[arg-type]
    assert mean.evaluate([X], RowsCtx(Vectors(d=1, l2_bound=0.1)))[0, 0] <= 0.1  # type: ignore[arg-type]
    ctx = RowsCtx(Vectors(d=1, l2_bound=0.1, center="c"), {"c": np.array([5.0])})
    out = mean.evaluate([X + 5.2], ctx)  # type: ignore[arg-type]
    assert out[0, 0] == pytest.approx(5.1, abs=1e-12) and abs(out[0, 0] - 5.0) <= 0.1  # the released centre's ball
    rng = np.random.default_rng(3)
    P = SubsampleAggregate(size=4, statistic="top_projection", k=2)
    Y = rng.normal(size=(400, 3))
    raw = np.linalg.norm(block_statistic(Y, 4, "top_projection", 2), axis=1)
    got = np.linalg.norm(P.evaluate([Y], RowsCtx(Vectors(d=3))), axis=1)  # type: ignore[arg-type]
    assert np.any(raw > math.sqrt(2)) and np.all(got <= math.sqrt(2))
    assert got == pytest.approx(raw, rel=1e-11)  # moved by rounding only
    K = SubsampleAggregate(size=3, statistic="kmeans", k=1)  # the box of a k-means domain (0 outside it)
    assert K.evaluate([X], RowsCtx(Vectors(d=1, box=(0.05, 0.1))))[0, 0] == 0.1  # type: ignore[arg-type]
