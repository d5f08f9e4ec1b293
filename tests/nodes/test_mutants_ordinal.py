"""Mutation-testing pins of ``dpflow/nodes/ordinal.py`` (2026-11-29): exact ordinal counts and MERR's CDF knots.

``OrdinalCounts`` and ``IntervalCounts`` put each record in one cell (replace-one l1 2, l2 sqrt(2), linf 1, times
the stability; add/remove 1; divided by the public n when normalised; DHS 2015 Thm 3/4, spec issue U1); the
Ordinal policy (NaN -> 0, floor, clamp to [0, N), uint64 clamped before the cast); the knots MERR's Update adds
(``(a - 1, w_left)`` and ``(b, w_left + w_in)``, strictly inside (-1, N - 1), never twice) and the piecewise-linear
CDF read at integer points.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from conftest import InferCtx, ValueCtx

from dpflow.domains import Ordinal, RowCount, Vectors
from dpflow.errors import DomainError, PlanTypeError, PostProcessingError
from dpflow.handles import Ref
from dpflow.nodes.base import text_of
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.ordinal import (
    AddKnots,
    IntervalCounts,
    OrdinalCounts,
    add_knots,
    cdf_knots,
    first_column,
    knots_cdf_at,
    ordinal_values,
    uniform_cdf,
)
from dpflow.nodes.rules import changes_text
from dpflow.nodes.types import ReleasedT, RowsT, Size

N_ROWS = {RowCount("X"): 8.0}


def _Infer(shapes: dict[str, Any] | None = None) -> InferCtx:
    return InferCtx("o", shapes, (2,))


def _rows(stability: int = 1, changes: str = "replace", d: int = 1) -> RowsT:
    dom = Ordinal(N=10).as_vectors() if d == 1 else Vectors(d=d)
    return RowsT(dom, "X", Size(changes == "replace", 8 if changes == "replace" else None, RowCount("X")), stability,
                 frozenset({changes}), None)


def _values(stat: Any) -> tuple[float, float, float]:
    return stat.l1.value(N_ROWS), stat.l2.value(N_ROWS), stat.linf.value(N_ROWS)


CASES = [  # (stability, relation, normalize, (l1, l2, linf))
    (1, "replace", False, (2.0, math.sqrt(2.0), 1.0)),
    (3, "replace", False, (6.0, 3 * math.sqrt(2.0), 3.0)),
    (3, "replace", True, (6.0 / 8, 3 * math.sqrt(2.0) / 8, 3.0 / 8)),
    (1, "add_remove", False, (1.0, 1.0, 1.0)),
    (2, "add_remove", False, (2.0, 2.0, 2.0)),
]


@pytest.mark.parametrize(("stability", "changes", "normalize", "want"), CASES)
def test_ordinal_counts_bounds(stability: int, changes: str, normalize: bool, want: tuple[float, ...]) -> None:
    rows = _rows(stability, changes)
    node = OrdinalCounts(edges=[0, 3, 7, 10], normalize=normalize)
    inf = node.infer([rows], _Infer())  # type: ignore[arg-type]
    st = inf.out
    assert st.shape == (3,)
    assert _values(st) == pytest.approx(want, rel=1e-11)
    assert st.float_error == FloatError("freq" if normalize else "exact", rows.domain, rows.size.sym())
    assert inf.derivation == (f"OrdinalCounts, 3 public bins of [10], {changes_text(rows)}: l1 {text_of(st.l1)}, "
                              f"l2 {text_of(st.l2)}")


@pytest.mark.parametrize(("stability", "changes", "normalize", "want"), CASES)
def test_interval_counts_bounds(stability: int, changes: str, normalize: bool, want: tuple[float, ...]) -> None:
    rows = _rows(stability, changes)
    inf = IntervalCounts(interval=Ref("j"), normalize=normalize).infer([rows], _Infer())  # type: ignore[arg-type]
    st = inf.out
    assert st.shape == (2,)
    assert _values(st) == pytest.approx(want, rel=1e-11)
    assert st.float_error == FloatError("freq" if normalize else "exact", rows.domain, rows.size.sym())
    assert inf.derivation == f"counts of [0, a) and [a, b], {changes_text(rows)}: l1 {text_of(st.l1)}"


def test_refusals() -> None:
    def refused(node: Any, rows: Any, shapes: dict[str, Any] | None = None) -> Any:
        with pytest.raises((DomainError, PlanTypeError)) as e:
            node.infer([rows], _Infer(shapes))
        return e.value

    for node, what in ((OrdinalCounts(edges=[0, 10]), "OrdinalCounts"),
                       (IntervalCounts(interval=Ref("j")), "IntervalCounts")):
        e = refused(node, _rows(d=2))
        assert (e.node, e.problem, e.fix) == ("o", f"{what} needs one-dimensional rows, got d=2",
                                             "select one column first (Columns)")
        assert refused(node, ReleasedT((1,))).fix == "pass sensitive rows"
    for node, what in ((OrdinalCounts(edges=[0, 10], normalize=True), "a normalised OrdinalCounts"),
                       (IntervalCounts(interval=Ref("j")), "normalised IntervalCounts")):
        e = refused(node, _rows(changes="add_remove"))
        assert e.node == "o" and e.problem.startswith(f"{what} needs a public row count")
    e = refused(IntervalCounts(interval=Ref("j")), _rows(), {"j": (3,)})
    assert (e.node, e.problem, e.fix) == ("o", "interval has shape (3,)", "pass a released [a, b] pair")
    for shape in ((2,), None):
        IntervalCounts(interval=Ref("j")).infer([_rows()], _Infer({"j": shape}))  # type: ignore[arg-type]
    with pytest.raises(PostProcessingError) as p:
        IntervalCounts(interval=Ref("j")).infer([_rows()], InferCtx("o", other=_rows()))  # type: ignore[arg-type]
    assert (p.value.node, p.value.problem) == ("o", "parameter 'interval' refers to j, which is not released")


def test_edges_are_checked_when_the_node_is_made() -> None:
    with pytest.raises(ValueError) as e:
        OrdinalCounts(edges=[0, 1.5, 3])
    assert str(e.value) == "OrdinalCounts edges must be integers"
    bad = [[0], [1, 5], [0, 2**62 + 1], [0, 5, 2**62 + 1], [0, 5, 5], [0, 5, 3, 10], [0, 7, 3]]
    for edges in bad:
        with pytest.raises(ValueError) as e:
            OrdinalCounts(edges=edges)
        assert str(e.value) == "OrdinalCounts edges must be strictly increasing integers from 0 to N <= 2**62"
    for edges in ([0, 5], [0, 2**62], [0, 3, 7]):
        assert OrdinalCounts(edges=edges).edges == tuple(edges)


def test_counts_evaluate() -> None:
    X = np.array([[-1.0], [2.9], [3.0], [6.5], [7.0], [9.99], [12.0], [np.nan]])  # -> 0 2 3 6 7 9 9 0
    ctx = ValueCtx()
    assert OrdinalCounts(edges=[0, 3, 7, 10]).evaluate([X], ctx).tolist() == [3.0, 2.0, 3.0]  # type: ignore[arg-type]
    assert OrdinalCounts(edges=[0, 3, 7, 10], normalize=True).evaluate(  # type: ignore[arg-type]
        [X], ctx).tolist() == [3 / 8, 2 / 8, 3 / 8]
    v = np.array([2, 3, 5, 6, 7], dtype=np.int64)
    for data in (v, v[:, None]):
        for iv in ([3, 6], [[3, 6]]):
            c = ValueCtx({"j": np.array(iv)})
            assert IntervalCounts(interval=Ref("j"), normalize=False).evaluate([data], c).tolist() == [1.0, 3.0]  # type: ignore[arg-type]
            assert IntervalCounts(interval=Ref("j")).evaluate([data], c).tolist() == [1 / 5, 3 / 5]  # type: ignore[arg-type]
    empty = ValueCtx({"j": np.array([4, 4])})  # no value is 4: the inside cell is empty
    assert IntervalCounts(interval=Ref("j"), normalize=False).evaluate([v], empty).tolist() == [2.0, 0.0]  # type: ignore[arg-type]
    reversed_ = ValueCtx({"j": np.array([6, 2])})  # b < a: x <= b counts fewer than x < a, the inside cell is 0
    assert IntervalCounts(interval=Ref("j"), normalize=False).evaluate([v], reversed_).tolist() == [3.0, 0.0]  # type: ignore[arg-type]


def test_ordinal_policy() -> None:
    N = 10
    assert first_column(np.array([[1, 5], [2, 6]])).tolist() == [1, 2]
    assert first_column(np.array(4)).tolist() == [4] and first_column([4, 5]).tolist() == [4, 5]
    assert ordinal_values(np.array([[1.0, 5.0], [2.0, 6.0]]), N).tolist() == [1, 2]
    assert ordinal_values(np.array([-4, 3, 12]), N).tolist() == [0, 3, 9]
    assert ordinal_values(np.array([-4, 3, 12], dtype=np.int8), N).tolist() == [0, 3, 9]
    assert ordinal_values(np.array([True, False]), N).tolist() == [1, 0]
    assert ordinal_values(np.array([2**64 - 1, 3], dtype=np.uint64), N).tolist() == [9, 3]
    f = ordinal_values(np.array([-np.inf, np.nan, 0.5, 9.0, 9.99, 10.0, 1e300, np.inf]), N)
    assert f.dtype == np.int64 and f.tolist() == [0, 0, 0, 9, 9, 9, 9, 9]
    assert ordinal_values(np.array([3.5], dtype=np.float32), N).tolist() == [3]
    big = 2**62  # float(N - 1) rounds to N: a float at N is N - 1, below it exact
    assert ordinal_values(np.array([float(big), float(2**61)]), big).tolist() == [big - 1, 2**61]


def test_cdf_read_at_integer_points() -> None:
    P, F = np.array([-1, 3, 7], dtype=np.int64), np.array([0.06, 0.87, 1.0])
    assert knots_cdf_at(P, F, np.array([-5, -1, 1, 3, 5, 7, 20])).tolist() == [
        0.06, 0.06, 0.06 + 0.81 * 0.5, 0.87, 0.87 + (1.0 - 0.87) * 0.5, 1.0, 1.0]
    assert knots_cdf_at(P, F, np.array([1.5, 3.9])).tolist() == knots_cdf_at(P, F, np.array([1, 3])).tolist()
    assert knots_cdf_at(np.array([-1, 3]), np.array([0.0, 1.0]), np.array([-3, 9])).tolist() == [0.0, 1.0]


def test_cdf_knots_policy() -> None:
    P, F = cdf_knots(([-1.0, 3.0, 5.0, 7.0], [np.nan, np.inf, -np.inf, 1.0]))
    assert P.dtype == np.int64 and P.tolist() == [-1, 3, 5, 7]
    assert F.dtype == np.float64 and F.tolist() == [0.0, 1.0, 0.0, 1.0]
    assert cdf_knots(([-1, 7], [0, 1]))[1].dtype == np.float64
    U = uniform_cdf(8)
    assert U[0].dtype == np.int64 and U[0].tolist() == [-1, 7] and U[1].tolist() == [0.0, 1.0]


def test_add_knots() -> None:
    N, w = 8, np.array([0.25, 0.5])
    P, F = add_knots(N, uniform_cdf(N), np.array([2, 5]), w)
    assert (P.dtype, P.tolist(), F.tolist()) == (np.int64, [-1, 1, 5, 7], [0.0, 0.25, 0.75, 1.0])
    P, F = add_knots(N, uniform_cdf(N), np.array([[1, 5]]), w[None, :])  # any shape: the entries in order
    assert (P.tolist(), F.tolist()) == ([-1, 0, 5, 7], [0.0, 0.25, 0.75, 1.0])
    P, F = add_knots(N, uniform_cdf(N), np.array([3, 6]), np.array([np.nan, 0.5]))  # NaN weight -> 0
    assert (P.tolist(), F.tolist()) == ([-1, 2, 6, 7], [0.0, 0.0, 0.5, 1.0])
    P, F = add_knots(N, uniform_cdf(N), np.array([3, 6]), [None, 0.5])  # a missing weight too
    assert (P.tolist(), F.tolist()) == ([-1, 2, 6, 7], [0.0, 0.0, 0.5, 1.0])
    P, F = add_knots(N, uniform_cdf(N), np.array([3, 7]), w)  # b = N - 1 is the last knot already
    assert (P.tolist(), F.tolist()) == ([-1, 2, 7], [0.0, 0.25, 1.0])
    P, F = add_knots(N, uniform_cdf(N), np.array([3, 30]), w)  # b beyond N - 1: no knot
    assert (P.tolist(), F.tolist()) == ([-1, 2, 7], [0.0, 0.25, 1.0])
    P, F = add_knots(N, (P, F), np.array([3, 4]), np.array([0.5, 0.1]))  # a - 1 = 2 is a knot: kept as it is
    assert (P.tolist(), F.tolist()) == ([-1, 2, 4, 7], [0.0, 0.25, 0.6, 1.0])
    inner = (np.array([2, 5]), np.array([0.5, 0.75]))  # a CDF without the ends: only (-1, N - 1) is filled in
    P, F = add_knots(N, inner, np.array([0, 7]), w)
    assert (P.tolist(), F.tolist()) == ([2, 5], [0.5, 0.75])
    P, F = add_knots(N, inner, np.array([1, 6]), w)
    assert (P.tolist(), F.tolist()) == ([0, 2, 5, 6], [0.25, 0.5, 0.75, 0.75])
    P, F = add_knots(N, (np.array([-1, 7]), np.array([0, 1])), np.array([2, 5]), w)  # integer CDF values
    assert F.tolist() == [0.0, 0.25, 0.75, 1.0]


def test_add_knots_node() -> None:
    node, ctx = AddKnots(N=8), ValueCtx()
    iv, w = np.array([2, 5]), np.array([0.25, 0.5])
    P, F = node.evaluate([iv, w], ctx)  # type: ignore[arg-type]
    assert (P.tolist(), F.tolist()) == ([-1, 1, 5, 7], [0.0, 0.25, 0.75, 1.0])
    P, F = node.evaluate([(np.array([-1, 3, 7]), np.array([0.0, 0.5, 1.0])), iv, w], ctx)  # type: ignore[arg-type]
    assert (P.tolist(), F.tolist()) == ([-1, 1, 3, 5, 7], [0.0, 0.25, 0.5, 0.75, 1.0])
    for k in (2, 3):
        assert node.infer([ReleasedT((2,))] * k, _Infer()).out == ReleasedT(None)  # type: ignore[arg-type]
    for k in (1, 4):
        with pytest.raises(PlanTypeError) as e:
            node.infer([ReleasedT((2,))] * k, _Infer())  # type: ignore[arg-type]
        assert (e.value.node, e.value.problem, e.value.fix) == (
            "o", f"AddKnots takes 2 or 3 inputs, got {k}", "pass (interval, weights) or (cdf, interval, weights)")


def test_source_applies_the_ordinal_policy() -> None:
    """An ``Ordinal(N)`` source keeps (n, 1) int64 rows in [0, N): with N = 2^62, float(N - 1) rounds up to N, and a
    clip to it let a value of N through."""
    from dpflow.nodes.transforms import Source

    big = 2**62
    out = Source(name="X", domain=Ordinal(N=big)).policy(np.array([[1e300], [float(big)], [np.nan], [-3.0], [5.0]]))
    assert out.dtype == np.int64 and out.tolist() == [[big - 1], [big - 1], [0], [0], [5]]
    out = Source(name="X", domain=Ordinal(N=10)).policy(np.array([[2**64 - 1], [3]], dtype=np.uint64))
    assert out.tolist() == [[9], [3]]
