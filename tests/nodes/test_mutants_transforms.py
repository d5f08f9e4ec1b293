"""Mutation-testing pins of ``dpflow/nodes/transforms.py`` (first run 2026-11-29).

The static types the sensitivities downstream read: ``PairDifferences`` (box ``+-(hi - lo)/sqrt 2``, l2 bound
``diameter / sqrt 2``, a public count of ``n // 2`` rows at this node, stability kept), ``Precondition`` (an
unbounded domain of the matrix's row count), ``SplitByIndex`` (index pieces over replace-one rows only),
``Columns`` (box kept, an origin-centred l2 bound kept and any other dropped, names resolved); their refusals
whole; and the row maps' values (the affine map, the pair differences, the NaN policy of the box clip).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import attrs
import numpy as np
import pytest
from conftest import RowsCtx, ValueCtx

import dpflow as dp
from dpflow.domains import ReleasedScalar, RowCount, Sym
from dpflow.errors import DataError, DomainError, PlanError, PlanTypeError
from dpflow.handles import Ref
from dpflow.nodes.transforms import (
    Columns,
    PairDifferences,
    Precondition,
    SplitByIndex,
    _affine,
    _keys,
    _pair_differences,
    clip_box,
)
from dpflow.nodes.types import PiecesT, ReleasedT, RowsT, Size, SplitRule


def _eval(values: dict[str, Any]) -> ValueCtx:
    return ValueCtx(values, "t")


class _Infer:
    relation = "replace"
    node_id = "t"

    def __init__(self, shape: tuple[int, ...] | None = (2, 3)) -> None:
        self.shape = shape

    def type_of(self, ref: Any) -> Any:
        return ReleasedT(self.shape)

    def row_count(self) -> RowCount:
        return RowCount("t")


def _rows(domain: dp.Vectors, n: int | None = 9, stability: int = 2, changes: str = "replace",
          columns: tuple[str, ...] | None = None) -> RowsT:
    return RowsT(domain, "X", Size(True, n, RowCount("X")), stability, frozenset({changes}), columns)


def test_pair_differences_type() -> None:
    rows = _rows(dp.Vectors(d=3, box=(-1.0, 3.0)))
    out = PairDifferences().infer([rows], _Infer()).out  # type: ignore[arg-type]
    w = 4.0 / math.sqrt(2.0)
    assert out == RowsT(dp.Vectors(d=3, l2_bound=Sym.const(4.0 * math.sqrt(3)) / math.sqrt(2.0), box=(-w, w)), "X",
                        Size(True, 4, RowCount("t")), 2, frozenset({"replace"}))
    ball = _rows(dp.Vectors(d=2, l2_bound=5.0), n=None)
    out = PairDifferences().infer([ball], _Infer()).out  # type: ignore[arg-type]
    assert out.domain == dp.Vectors(d=2, l2_bound=Sym.const(10.0) / math.sqrt(2.0)) and out.size.known is None
    out = PairDifferences().infer([_rows(dp.Vectors(d=2))], _Infer()).out  # type: ignore[arg-type]
    assert out.domain == dp.Vectors(d=2)
    assert PairDifferences().infer([rows], _Infer()).derivation == (  # type: ignore[arg-type]
        f"pairs of {rows.domain.describe()}: norm <= diameter/sqrt(2) = 4.89898")


def test_pair_differences_refusals() -> None:
    with pytest.raises(DomainError) as e:
        PairDifferences().infer([_rows(dp.Vectors(d=1), n=1)], _Infer())  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem, e.value.fix) == (
        "t", "fewer than two rows to pair", "use a source with n >= 2")
    with pytest.raises(PlanError) as p:
        PairDifferences().infer([_rows(dp.Vectors(d=1), changes="add_remove")], _Infer())  # type: ignore[arg-type]
    assert p.value.problem.startswith("PairDifferences (pairs by position) needs a public row count")
    with pytest.raises(PlanTypeError) as t:
        PairDifferences().infer([ReleasedT(())], _Infer())  # type: ignore[arg-type]
    assert t.value.fix == "pass sensitive rows"


def test_precondition_type_and_refusals() -> None:
    rows = _rows(dp.Vectors(d=3, box=(0.0, 1.0)), columns=("a", "b", "c"))
    inf = Precondition(matrix=Ref("M")).infer([rows], _Infer((2, 3)))  # type: ignore[arg-type]
    assert inf.out == RowsT(dp.Vectors(d=2), "X", rows.size, 2, frozenset({"replace"}), None)
    assert inf.derivation == "affine map by M -> " + dp.Vectors(d=2).describe()
    assert Precondition(matrix=Ref("M"), d_out=5).infer([rows], _Infer((2, 3))).out.domain == dp.Vectors(d=5)  # type: ignore[arg-type]
    assert Precondition(matrix=Ref("M")).infer([rows], _Infer(None)).out.domain == dp.Vectors(d=3)  # type: ignore[arg-type]
    assert Precondition(matrix=Ref("M"), d_out=4).infer([rows], _Infer(None)).out.domain == dp.Vectors(d=4)  # type: ignore[arg-type]
    for shape in ((2, 2), (3,)):
        with pytest.raises(DomainError) as e:
            Precondition(matrix=Ref("M")).infer([rows], _Infer(shape))  # type: ignore[arg-type]
        assert (e.value.node, e.value.problem, e.value.fix) == (
            "t", f"matrix shape {shape} does not map d=3", "pass a (k, 3) matrix")
    with pytest.raises(PlanTypeError) as t:
        Precondition(matrix=[[1.0]]).infer([rows], _Infer())  # type: ignore[arg-type]
    assert (t.value.node, t.value.problem, t.value.fix) == ("t", "matrix must be a released handle",
                                                            "wrap it with public()")


def test_precondition_values() -> None:
    X = np.array([[1.0, 2.0], [3.0, -1.0], [np.inf, 0.0]])
    M = np.array([[2.0, 1.0], [0.0, -1.0], [1.0, 1.0]])
    c = np.array([1.0, 1.0])
    got = Precondition(matrix=Ref("M"), center=Ref("c")).evaluate([X], _eval({"M": M, "c": c}))  # type: ignore[arg-type]
    assert np.array_equal(got[:2], (X[:2] - c) @ M.T) and np.isinf(got[2, 0])
    got = Precondition(matrix=Ref("M")).evaluate([X[:2]], _eval({"M": M}))  # type: ignore[arg-type]
    assert np.array_equal(got, X[:2] @ M.T)
    with pytest.raises(DataError) as e:
        Precondition(matrix=Ref("M")).evaluate([X], _eval({"M": np.ones((2, 3))}))  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem, e.value.fix) == (
        "t", "the released matrix has shape (2, 3), rows have d=2", "release a (k, 2) matrix")
    with pytest.raises(DataError):
        Precondition(matrix=Ref("M")).evaluate([X], _eval({"M": np.ones(2)}))  # type: ignore[arg-type]
    assert np.array_equal(_affine(X[:2], M, None), X[:2] @ M.T)


def test_precondition_by_a_diagonal_matrix_scales_the_coordinates() -> None:
    """A diagonal matrix (CoinPress's first round) gives exactly the matrix product's rows on finite rows, tiny and
    huge entries included, without one; a row with a non-finite entry stays non-finite; a single nonzero entry off
    the diagonal (or a NaN there) takes the matrix product."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(64, 5)) * rng.choice([1e-300, 1.0, 1e300], size=(64, 5))
    X[::9, 1] = 0.0
    c = rng.normal(size=5)
    for M in (np.diag(rng.normal(size=5) * 3), np.eye(5) / math.sqrt(7.0), np.zeros((5, 5))):
        for centre in (None, c):
            got = Precondition(matrix=Ref("M"), center=None if centre is None else Ref("c")).evaluate(
                [X], _eval({"M": M, "c": c}))  # type: ignore[arg-type]
            want = (M @ (X if centre is None else X - c).T).T
            assert np.array_equal(got, want) and got.flags.c_contiguous
    bad = np.array([[np.inf, 1.0, 0.0, 0.0, 0.0], [np.nan, 0.0, 0.0, 0.0, 0.0]])
    got = Precondition(matrix=Ref("M")).evaluate([bad], _eval({"M": np.eye(5)}))  # type: ignore[arg-type]
    assert not np.isfinite(got).all(axis=1).any()
    for k in (1.0, np.nan):
        M = np.eye(5)
        M[3, 1] = k
        got = Precondition(matrix=Ref("M")).evaluate([X[:4]], _eval({"M": M}))  # type: ignore[arg-type]
        assert got.flags.f_contiguous and not got.flags.c_contiguous


def test_pair_difference_values() -> None:
    Z = np.array([[1.0, 5.0, 3.0, 1.0], [np.inf, 0.0, np.inf, 2.0]])
    with np.errstate(all="raise"):
        out = _pair_differences(Z)
    assert out[0].tolist() == [-2.0 / math.sqrt(2.0), 4.0 / math.sqrt(2.0)] and np.isnan(out[1, 0])
    assert out[1, 1] == -2.0 / math.sqrt(2.0)


def test_pair_differences_lie_in_their_declared_domain() -> None:
    """Computed differences can exceed the declared l2 bound by an ulp; ``evaluate`` projects them back."""
    lo, hi, d = -0.5728495751853906, 0.8183798304930238, 29
    dom = dp.Vectors(d=d, box=(lo, hi))
    Z = np.array([[hi] * d + [lo] * d, [lo] * d + [hi] * d])
    r = (hi - lo) * math.sqrt(d) / math.sqrt(2.0)
    assert np.linalg.norm(_pair_differences(Z), axis=1).max() > r  # the rounding the projection undoes
    out = PairDifferences().evaluate([Z.reshape(4, d)], RowsCtx(dom))  # the rows hi, lo, lo, hi
    assert out.shape == (2, d) and np.linalg.norm(out, axis=1).max() <= r
    w = (hi - lo) / math.sqrt(2.0)
    assert np.abs(out).max() <= w and np.linalg.norm(out, axis=1).min() >= r * (1 - 1e-15)
    R = 2.7466092117441523  # a ball around 0: a pair (x, -x) with |x| <= R whose difference rounds above the bound
    rng = np.random.default_rng(1)
    for _ in range(2000):
        x = rng.normal(size=35)
        x *= R / np.linalg.norm(x)
        diff = np.linalg.norm(_pair_differences(np.concatenate([x, -x])[None]))
        if np.linalg.norm(x) <= R and diff > 2 * R / math.sqrt(2):
            break
    else:
        pytest.fail("no pair rounds above the bound: the case this test needs is gone")
    out = PairDifferences().evaluate([np.stack([x, -x])], RowsCtx(dp.Vectors(d=35, l2_bound=R)))
    assert np.linalg.norm(out) <= 2 * R / math.sqrt(2.0)
    # non-finite rows follow the ball's declared policy (to 0); rows are put in the ball, then in the box
    nan = np.array([[np.nan, 1.0], [0.0, 0.0]])
    assert PairDifferences().evaluate([nan], RowsCtx(dp.Vectors(d=2, l2_bound=1.0))).tolist() == [[0.0, 0.0]]
    far = np.array([[5.0, 0.0], [0.0, 0.0]])  # outside the box it declares: ball of radius 1, then box 1/sqrt 2
    assert PairDifferences().evaluate([far], RowsCtx(dp.Vectors(d=2, box=(0.0, 1.0)))).tolist() == [
        [1.0 / math.sqrt(2.0), 0.0]]
    assert np.isnan(PairDifferences().evaluate([nan], RowsCtx(dp.Vectors(d=2)))[0, 0])


def test_split_by_index_type_and_refusals() -> None:
    rows = _rows(dp.Vectors(d=1), n=5)
    inf = SplitByIndex(pieces=3).infer([rows], _Infer())  # type: ignore[arg-type]
    assert inf.out == PiecesT(rows, 3, SplitRule.INDEX) and inf.derivation == "3 contiguous blocks by index"
    assert SplitByIndex(pieces=5).infer([rows], _Infer()).out.count == 5  # type: ignore[arg-type]
    with pytest.raises(DomainError) as e:
        SplitByIndex(pieces=6).infer([rows], _Infer())  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem, e.value.fix) == ("t", "5 rows cannot fill 6 pieces", "use fewer pieces")
    with pytest.raises(PlanTypeError) as t:
        SplitByIndex(pieces=0).infer([rows], _Infer())  # type: ignore[arg-type]
    assert (t.value.node, t.value.problem, t.value.fix) == ("t", "pieces=0", "split into at least one piece")
    with pytest.raises(PlanError) as p:
        SplitByIndex(pieces=2).infer([_rows(dp.Vectors(d=1), changes="add_remove")], _Infer())  # type: ignore[arg-type]
    assert p.value.problem.startswith(
        "SplitByIndex (splits by position; or split by a value with PartitionByBall) needs a public row count")
    out = SplitByIndex(pieces=2).evaluate([np.arange(5.0)], _eval({}))  # type: ignore[arg-type]
    assert [a.tolist() for a in out] == [[0.0, 1.0, 2.0], [3.0, 4.0]]


def test_columns_types_and_refusals() -> None:
    rows = _rows(dp.Vectors(d=3, l2_bound=2.0, box=(-1.0, 1.0)), columns=("a", "b", "c"))
    inf = Columns(keep=["c", 0]).infer([rows], _Infer())  # type: ignore[arg-type]
    assert inf.out == RowsT(dp.Vectors(d=2, l2_bound=Sym.const(2.0), box=(-1.0, 1.0)), "X", rows.size, 2,
                            frozenset({"replace"}), ("c", "a"))
    assert inf.derivation == "columns ['c', 0] -> " + inf.out.domain.describe()
    centred = _rows(dp.Vectors(d=3, l2_bound=2.0, center=(1.0, 0.0, 0.0)))
    assert Columns(keep=[1]).infer([centred], _Infer()).out.domain == dp.Vectors(d=1)  # type: ignore[arg-type]
    assert Columns(keep=1).indices(rows, "t") == (1,) and _keys("a") == ("a",) and _keys([2.0, "b"]) == (2, "b")
    for keep in (["z"], [3], [0, 0], [], [-1]):
        with pytest.raises(DomainError) as e:
            Columns(keep=keep).indices(rows, "t")
        assert (e.value.node, e.value.problem, e.value.fix) == (
            "t", f"columns {keep} do not select from d=3 (columns ['a', 'b', 'c'])",
            "pass distinct column names or indices in [0, 3)")
    unnamed = _rows(dp.Vectors(d=3))
    with pytest.raises(DomainError) as e:
        Columns(keep=["a"]).indices(unnamed, "t")
    assert (e.value.problem, e.value.fix) == (
        "columns ['a'] are named, but the rows have no column names",
        "declare the source's columns (b.source(name, columns=[...])) or keep by index")
    with pytest.raises(DomainError) as e:
        Columns(keep=[5]).indices(unnamed, "t")
    assert e.value.problem == "columns [5] do not select from d=3"


def test_clip_box_policy() -> None:
    out = clip_box(np.array([[np.nan, 5.0, -np.inf, 0.5]]), -1.0, 2.0)
    assert out.tolist() == [[0.0, 2.0, -1.0, 0.5]]
    assert clip_box(np.array([np.nan]), 1.0, 2.0).tolist() == [1.0]  # NaN counts as 0, then clipped


def test_piece_types() -> None:
    """Index blocks: public sizes as np.array_split makes them (the first n mod k blocks one longer); value pieces:
    private size bounded by the parent's public n, add/remove changes; refusals whole."""
    from dpflow.nodes.transforms import Piece

    rows = _rows(dp.Vectors(d=1), n=11)
    sizes = [Piece(index=i).infer([PiecesT(rows, 4, SplitRule.INDEX)], _Infer()).out.size for i in range(4)]  # type: ignore[arg-type]
    assert sizes == [Size(True, k, RowCount("t")) for k in (3, 3, 3, 2)]
    assert [len(a) for a in np.array_split(np.arange(11), 4)] == [3, 3, 3, 2]
    inf = Piece(index=3).infer([PiecesT(rows, 4, SplitRule.INDEX)], _Infer())  # type: ignore[arg-type]
    assert inf.derivation == "block 3 of 4, n=2"
    unknown = _rows(dp.Vectors(d=1), n=None)
    assert Piece(index=0).infer([PiecesT(unknown, 2, SplitRule.INDEX)], _Infer()).out.size == Size(  # type: ignore[arg-type]
        True, None, RowCount("t"))
    inf = Piece(index=1).infer([PiecesT(rows, 2, SplitRule.VALUE)], _Infer())  # type: ignore[arg-type]
    assert inf.out == RowsT(rows.domain, "X", Size(False, None, RowCount("t"), at_most=Sym.const(11.0)), 2,
                            frozenset({"replace", "add_remove"}))
    assert inf.derivation == "value piece 1: private size, a record may move in or out"
    for index in (2, -1):
        with pytest.raises(PlanTypeError) as e:
            Piece(index=index).infer([PiecesT(rows, 2, SplitRule.VALUE)], _Infer())  # type: ignore[arg-type]
        assert (e.value.node, e.value.problem, e.value.fix) == ("t", f"piece {index} of 2", "use a valid index")
    with pytest.raises(PlanTypeError) as e:
        Piece(index=0).infer([rows], _Infer())  # type: ignore[arg-type]
    assert e.value.fix == "pass the pieces of a split"


def test_partition_by_ball() -> None:
    from dpflow.nodes.transforms import PartitionByBall

    rows = _rows(dp.Vectors(d=2))
    inf = PartitionByBall(center=(1.0, 0.0), radius=2.0).infer([rows], _Infer())  # type: ignore[arg-type]
    assert inf.out == PiecesT(rows, 2, SplitRule.VALUE) and inf.derivation == "inside / outside the ball (public(1,0))"
    with pytest.raises(DomainError) as e:
        PartitionByBall(center=(1.0, 0.0, 0.0), radius=2.0).infer([rows], _Infer())  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem, e.value.fix) == (
        "t", "center has 3 entries, rows have d=2", "pass a centre of the rows' dimension")
    for node, slot, shape in ((PartitionByBall(center=Ref("c"), radius=1.0), "center", "(2,)"),
                              (PartitionByBall(center=(0.0, 0.0), radius=Ref("c")), "radius", "()")):
        with pytest.raises(DomainError) as e:
            node.infer([rows], _Infer((5,)))  # type: ignore[arg-type]
        assert e.value.problem == f"parameter {slot!r} refers to c of shape (5,), expected {shape}"
    X = np.array([[3.0, 0.0], [1.0, 2.0], [np.nan, 0.0], [-1.5, 0.0]])
    inside, outside = PartitionByBall(center=(1.0, 0.0), radius=2.0).evaluate([X], _eval({}))  # type: ignore[arg-type]
    assert inside.tolist() == [[3.0, 0.0], [1.0, 2.0]] and outside[1].tolist() == [-1.5, 0.0]
    with pytest.raises(DataError) as d:
        PartitionByBall(center=(0.0, 0.0), radius=Ref("r")).evaluate([X], _eval({"r": np.ones(2)}))  # type: ignore[arg-type]
    assert (d.value.problem, d.value.fix) == ("the released radius r has shape (2,), expected a scalar",
                                              "release a scalar radius")


def test_into_ball() -> None:
    """Non-finite rows to the centre, rows beyond r scaled onto the sphere, rows whose sum of squares overflows
    rescaled each by its own largest entry, rows inside (or on the sphere) unchanged."""
    from dpflow.nodes.transforms import _into_ball

    D = np.array([[3.0, 4.0], [0.3, 0.4], [np.inf, 1.0], [1e200, 1e200], [-1e300, 3e299], [0.6, 0.8]])
    with np.errstate(over="ignore"):
        norms = np.sqrt(np.einsum("ij,ij->i", D, D))
    out = _into_ball(D.copy(), norms, 1.0)
    assert np.allclose(out[0], [0.6, 0.8], rtol=1e-15) and out[1].tolist() == [0.3, 0.4]
    assert out[2].tolist() == [0.0, 0.0] and out[5].tolist() == [0.6, 0.8]
    assert np.allclose(out[3], [math.sqrt(0.5)] * 2, rtol=1e-15)
    assert np.allclose(out[4], np.array([-10.0, 3.0]) / math.sqrt(109.0), rtol=1e-15)
    assert bool(np.all(np.linalg.norm(out, axis=1) <= 1.0))
    one = _into_ball(np.array([[np.nan, 0.5]]), np.array([np.nan]), 0.25)
    assert one.tolist() == [[0.0, 0.0]]
    # each overflowing row by its own largest entry: by the largest of all, the second row's squares would be
    # subnormal and its norm off in the last bit
    H = np.array([[1.7e308, 0.0], [1.4e154 * 1.0000001, 1.4e154 * 0.9999993]])
    with np.errstate(over="ignore"):
        out = _into_ball(H.copy(), np.sqrt(np.einsum("ij,ij->i", H, H)), 1.0)
    for row, x in zip(out, H, strict=True):
        unit = x / np.max(np.abs(x))
        assert row.tolist() == (unit * (1.0 / np.linalg.norm(unit))).tolist()
    # a row whose scaled norm still exceeds r (found by search) is shrunk once by 1 - 4 eps
    V = np.array([[-5.442589828573099, -3.1630015636915454, 4.116305363741328, 10.425133694426776,
                   -1.2853466294403426, 13.664634705496859, -6.651946734866136]])
    r = 1.9768495835653253
    norms = np.sqrt(np.einsum("ij,ij->i", V, V))
    scaled = V * (r / norms)[:, None]
    assert np.linalg.norm(scaled) > r
    assert _into_ball(V.copy(), norms, r).tolist() == (scaled * (1.0 - 4.0 * np.finfo(float).eps)).tolist()
    # and one that still does (here: given a norm below its own) goes to the centre
    assert _into_ball(np.array([[3.0, 4.0]]), np.array([0.5]), 1.0).tolist() == [[0.0, 0.0]]


CLIP_CASES = [  # (rows' domain, the clip, the output domain): every branch of Clip.infer
    (dp.Vectors(d=2), dict(radius=3.0), dp.Vectors(d=2, l2_bound=3.0)),
    (dp.Vectors(d=2, box=(-1.0, 2.0)), dict(radius=3.0), dp.Vectors(d=2, l2_bound=3.0, box=(-1.0, 2.0))),
    (dp.Vectors(d=2, box=(0.5, 2.0)), dict(radius=3.0), dp.Vectors(d=2, l2_bound=3.0)),  # origin outside the box
    (dp.Vectors(d=2, box=(0.0, 2.0)), dict(radius=3.0), dp.Vectors(d=2, l2_bound=3.0, box=(0.0, 2.0))),
    (dp.Vectors(d=2, box=(-2.0, 0.0)), dict(radius=3.0), dp.Vectors(d=2, l2_bound=3.0, box=(-2.0, 0.0))),
    (dp.Vectors(d=2, box=(-1.0, 2.0)), dict(radius=3.0, center=(1.0, 1.0)),
     dp.Vectors(d=2, l2_bound=3.0, center="public(1,1)")),
    (dp.Vectors(d=2, box=(-1.0, 2.0)), dict(radius=3.0, center=Ref("c")), dp.Vectors(d=2, l2_bound=3.0, center="c")),
    (dp.Vectors(d=2), dict(radius=Ref("r")), dp.Vectors(d=2, l2_bound=Sym.ref(ReleasedScalar("r")))),
    (dp.Vectors(d=2, l2_bound=5.0), dict(box=(-1.0, 1.0)), dp.Vectors(d=2, l2_bound=5.0, box=(-1.0, 1.0))),
    (dp.Vectors(d=2, l2_bound=5.0), dict(box=(0.5, 1.0)), dp.Vectors(d=2, box=(0.5, 1.0))),  # 0 outside: ball lost
    (dp.Vectors(d=2, l2_bound=5.0), dict(box=(0.0, 1.0)), dp.Vectors(d=2, l2_bound=5.0, box=(0.0, 1.0))),
    (dp.Vectors(d=2, l2_bound=5.0), dict(box=(-1.0, 0.0)), dp.Vectors(d=2, l2_bound=5.0, box=(-1.0, 0.0))),
    (dp.Vectors(d=2, l2_bound=5.0, center="c"), dict(box=(-1.0, 1.0)), dp.Vectors(d=2, box=(-1.0, 1.0))),
    (dp.Vectors(d=2, box=(-3.0, 0.5)), dict(box=(-1.0, 1.0)), dp.Vectors(d=2, box=(-1.0, 0.5))),
    (dp.Vectors(d=2, box=(2.0, 3.0)), dict(box=(-1.0, 1.0)), dp.Vectors(d=2, box=(1.0, 1.0))),
    (dp.Vectors(d=2), dict(radius=2.0, box=(-1.0, 1.0)), dp.Vectors(d=2, l2_bound=2.0, box=(-1.0, 1.0))),
]


@pytest.mark.parametrize(("dom", "kw", "want"), CLIP_CASES)
def test_clip_output_domain(dom: dp.Vectors, kw: dict[str, Any], want: dp.Vectors) -> None:
    """The domain every downstream sensitivity reads: a ball around the origin or a named centre, a box kept only
    where the projection keeps it (the origin inside it, no centre), a box intersected monotonically, a ball lost
    when a box clip does not contain 0 or the ball has a centre."""
    from dpflow.nodes.transforms import Clip

    rows = _rows(dom)
    inf = Clip(**kw).infer([rows], _Infer((2,) if kw.get("center") is not None else ()))  # type: ignore[arg-type]
    assert inf.out == attrs.evolve(rows, domain=want)
    assert inf.derivation == f"clip {dom.describe()} -> {want.describe()}; missing values: " + (
        "a row with a NaN or infinite entry goes to the centre" if kw.get("radius") is not None else
        "NaN counts as 0, then clipped (+-inf to the nearest end)")


def test_clip_refusals() -> None:
    from dpflow.nodes.transforms import Clip

    for kw, text in ((dict(), "Clip needs a radius, a box, or both"),
                     (dict(box=(2.0, 1.0)), "Clip box must have lower <= upper, got (2.0, 1.0)"),
                     (dict(box=(0.0, 1.0), center=(0.0, 0.0)), "Clip center needs a radius")):
        with pytest.raises(ValueError) as v:
            Clip(**kw)
        assert str(v.value) == text
    assert Clip(box=(1.0, 1.0)).box == (1.0, 1.0)  # a single point is a box

    with pytest.raises(DomainError) as e:
        Clip(radius=1.0, center=(0.0, 0.0, 0.0)).infer([_rows(dp.Vectors(d=2))], _Infer())  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem, e.value.fix) == (
        "t", "center has 3 entries, rows have d=2", "pass a centre of the rows' dimension")
    for kw, slot, shape in ((dict(radius=1.0, center=Ref("c")), "center", "(2,)"), (dict(radius=Ref("c")), "radius",
                                                                                    "()")):
        with pytest.raises(DomainError) as e:
            Clip(**kw).infer([_rows(dp.Vectors(d=2))], _Infer((5,)))  # type: ignore[arg-type]
        assert e.value.problem == f"parameter {slot!r} refers to c of shape (5,), expected {shape}"
    with pytest.raises(PlanTypeError) as t:
        Clip(radius=1.0).infer([ReleasedT(())], _Infer())  # type: ignore[arg-type]
    assert t.value.fix == "pass sensitive rows"


def _exact_dist2(y: np.ndarray, c: np.ndarray) -> Fraction:
    return sum(((Fraction(float(a)) - Fraction(float(b))) ** 2 for a, b in zip(y, c, strict=True)), Fraction(0))


def test_project_ball_far_centre_meets_the_bound_downstream_reads() -> None:
    """Around a centre far from the origin ``||x - c||^2`` computed as ``||x||^2 - 2 x.c + ||c||^2`` is off by
    units (here rows at distance 1.5 compute anywhere in [-8, 8]): only the rigorous slack ``4 (d + 3) eps
    (||x|| + ||c||)^2`` keeps such rows out of the fast path.  Every output row meets, exactly (in rationals),
    the bound ``FloatError.centred_norm`` charges downstream: ``r (1 + gamma(d + 2)) + 2 u (r + ||c||)``."""
    from dpflow.nodes.floaterr import U, gamma
    from dpflow.nodes.transforms import project_ball

    rng = np.random.default_rng(0)
    d, r = 20, 1.0
    c = rng.normal(size=d) * 3e7
    u = rng.normal(size=(600, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    X = c + np.repeat([0.5, 0.999, 1.001, 1.5, 3.0, 1e9], 100)[:, None] * u
    out = project_ball(X, c, r)
    cn = math.sqrt(float(c @ c)) * (1 + 1e-12)
    bound = Fraction(r * (1 + gamma(d + 2)) + 2 * U * (r + cn)) ** 2
    assert all(_exact_dist2(y, c) <= bound for y in out)
    assert np.array_equal(out[:100], X[:100])  # well inside: unchanged


def test_project_ball_fast_path_is_the_documented_test() -> None:
    """A row is returned as it is (the input array itself) exactly when ``dist2 + slack <= (r (1 - 1e-12))^2``
    with ``slack = 4 (d + 3) eps (||x|| + ||c||)^2`` (0 without a centre), ``<=`` included; otherwise it takes
    the exact path (a copy)."""
    from dpflow.nodes.transforms import project_ball

    rng = np.random.default_rng(1)
    eps = np.finfo(float).eps
    for c, r in ((None, 1.0), (np.array([3.0, -4.0, 12.0]), 1.0), (np.array([0.25, 0.5, -1.0]), 2.0)):
        u = rng.normal(size=(400, 3))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        X = (0.0 if c is None else c) + r * (1 - rng.uniform(0, 4e-12, size=400))[:, None] * u
        inner = r * (1.0 - 1e-12)
        kept = []
        for x in X:
            row = x[None, :].copy()
            sq = float(row[0] @ row[0])
            if c is None:
                want = sq <= inner * inner
            else:
                cc = float(c @ c)
                dist2 = sq - 2.0 * float(row[0] @ c) + cc
                want = dist2 + 4.0 * 6 * eps * (math.sqrt(sq) + math.sqrt(cc)) ** 2 <= inner * inner
            kept.append(want)
            assert (project_ball(row, c, r) is row) == want
        assert 50 < sum(kept) < 350  # both sides of the threshold are tried
    tie = np.array([[1.0 * (1.0 - 1e-12)]])  # its square is exactly inner * inner
    assert project_ball(tie, None, 1.0) is tie


def test_project_ball_leaves_its_input_and_converts_integers() -> None:
    from dpflow.nodes.transforms import project_ball

    X = np.array([[3.0, 4.0], [0.3, 0.4]])
    out = project_ball(X, None, 1.0)
    assert X.tolist() == [[3.0, 4.0], [0.3, 0.4]] and out is not X
    assert np.allclose(out, [[0.6, 0.8], [0.3, 0.4]], rtol=1e-15)
    assert project_ball(np.array([[3, 4], [0, 0]]), None, 1.0).tolist() == out[:1].tolist() + [[0.0, 0.0]]


def test_clip_evaluate_in_blocks_and_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """Integer rows become floats, then (rows of several blocks, the conversion's own copy) are moved into the ball
    around the released centre by the in-place variant: the same rows as ``project_ball`` on a copy."""
    from dpflow.interpreter import numpy_backend
    from dpflow.nodes.transforms import Clip, project_ball

    monkeypatch.setattr(numpy_backend, "BLOCK_BYTES", 256)
    X = np.random.default_rng(2).integers(-9, 9, size=(64, 2))
    c = np.array([1.0, -2.0])
    for radius, values in ((Ref("r"), {"c": c, "r": np.array(2.5)}), (2.5, {"c": c})):
        out = Clip(radius=radius, center=Ref("c")).evaluate([X], _eval(values))  # type: ignore[arg-type]
        assert isinstance(out, numpy_backend.MappedRows)
        want = project_ball(X.astype(float), c, 2.5)
        assert np.array_equal(np.asarray(out), want) and not np.array_equal(want, X)
        mine = X.astype(float)  # the in-place variant, as the backend calls it on an array no one else reads
        alt = out.overwrites[-1]
        assert alt is not None and alt(mine) is mine and np.array_equal(mine, want)
    ball = Clip(radius=3.0).evaluate([X], _eval({}))
    assert np.array_equal(np.asarray(ball), project_ball(X.astype(float), None, 3.0))


def test_clip_evaluate_refuses_released_parameters_of_the_wrong_shape() -> None:
    from dpflow.nodes.transforms import Clip

    X = np.zeros((4, 2))
    with pytest.raises(DataError) as e:
        Clip(radius=1.0, center=Ref("c")).evaluate([X], _eval({"c": np.zeros(3)}))
    assert (e.value.node, e.value.problem, e.value.fix) == (
        "t", "a released vector parameter has shape (3,), expected (2,)", "release a vector of the rows' dimension")
    with pytest.raises(DataError) as e:
        Clip(radius=Ref("r")).evaluate([X], _eval({"r": np.ones(2)}))
    assert (e.value.problem, e.value.fix) == ("the released radius r has shape (2,), expected a scalar",
                                              "release a scalar radius")


class _NotReleased(_Infer):
    def type_of(self, ref: Any) -> Any:
        return _rows(dp.Vectors(d=2))


def test_transform_parameter_refusals_name_the_node_slot_and_fix() -> None:
    """Every transform's input must be rows; a released parameter must be released and of the needed shape; a
    public vector must be finite; a Clip radius positive (0 explained)."""
    from dpflow.errors import PostProcessingError
    from dpflow.nodes.transforms import Clip, PartitionByBall

    for node in (Precondition(matrix=Ref("A")), SplitByIndex(pieces=2), PartitionByBall(center=(0.0,), radius=1.0),
                 Columns(keep=(0,))):
        with pytest.raises(PlanTypeError) as t:
            node.infer([ReleasedT(())], _Infer())  # type: ignore[arg-type]
        assert (t.value.node, t.value.fix) == ("t", "pass sensitive rows")
    with pytest.raises(PostProcessingError) as p:
        Precondition(matrix=Ref("A")).infer([_rows(dp.Vectors(d=2))], _NotReleased())  # type: ignore[arg-type]
    assert p.value.problem == "parameter 'matrix' refers to A, which is not released"
    with pytest.raises(PostProcessingError) as p:
        Clip(radius=1.0, center=Ref("c")).infer([_rows(dp.Vectors(d=2))], _NotReleased())  # type: ignore[arg-type]
    assert p.value.problem == "parameter 'center' refers to c, which is not released"
    with pytest.raises(DomainError) as e:
        Precondition(matrix=Ref("A"), center=Ref("c")).infer([_rows(dp.Vectors(d=3))], _Infer((3, 3)))  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem, e.value.fix) == (
        "t", "parameter 'center' refers to c of shape (3, 3), expected (3,)", "pass a released value of shape (3,)")
    with pytest.raises(ValueError, match="^a public vector parameter must be finite$"):
        Precondition(matrix=Ref("A"), center=(math.nan, 0.0))
    fix = ". Fix: pass 0 < radius <= 2**256, or clip to a box only"
    with pytest.raises(ValueError) as v:
        Clip(radius=0.0)
    assert str(v.value) == ("Clip radius must be a finite positive number at most MAX_BOUND, got 0.0 (radius 0 maps "
                            "every row to the centre: nothing about the data could be released)" + fix)
    with pytest.raises(ValueError) as v:
        Clip(radius=-1.0)
    assert str(v.value) == "Clip radius must be a finite positive number at most MAX_BOUND, got -1.0" + fix


def test_public_centre_names_and_column_keys() -> None:
    from dpflow.nodes.transforms import Clip

    for c, name in (((1.0, 2.0, 3.0, 4.0), "public(1,2,3,4)"), ((1.0, 2.0, 3.0, 4.0, 5.0), "public(1,2,3,4,...)")):
        inf = Clip(radius=1.0, center=c).infer([_rows(dp.Vectors(d=len(c)))], _Infer())  # type: ignore[arg-type]
        assert inf.out.domain.center == name
    keep = Columns(keep=[np.int64(1), "a"]).keep
    assert keep == (1, "a") and type(keep[0]) is int
    names = tuple(f"c{i}" for i in range(25))
    with pytest.raises(DomainError) as e:
        Columns(keep=("zz",)).infer([_rows(dp.Vectors(d=25), columns=names)], _Infer())  # type: ignore[arg-type]
    assert e.value.problem == f"columns ['zz'] do not select from d=25 (columns {list(names[:20])})"
    with pytest.raises(DomainError) as e:
        Columns(keep=("a",)).infer([_rows(dp.Vectors(d=2))], _Infer())  # type: ignore[arg-type]
    assert e.value.node == "t"


def test_released_parameters_as_integers_or_one_entry_arrays() -> None:
    """A released radius may be any one-entry array; a released integer centre is read as floats (its square norm
    does not wrap around in int64)."""
    from dpflow.nodes.transforms import Clip, project_ball

    X = np.array([[2.0**32 + 3.0, 4.0], [2.0**32, 0.5]])
    c = np.array([2**32, 0], dtype=np.int64)
    out = Clip(radius=Ref("r"), center=Ref("c")).evaluate([X], _eval({"r": np.array([1.0]), "c": c}))
    assert np.array_equal(out, project_ball(X, c.astype(float), 1.0))
    assert out.tolist() == [[2.0**32 + 0.6, 0.8], [2.0**32, 0.5]]
    with pytest.raises(DataError) as e:
        Clip(radius=Ref("r")).evaluate([X], _eval({"r": np.ones(2)}))
    assert e.value.node == "t"


def test_precondition_and_partition_evaluate() -> None:
    from dpflow.nodes.transforms import PartitionByBall

    X = np.array([[1, 2], [3, -4]])
    A = np.array([[2, 0], [0, 1]])
    out = Precondition(matrix=Ref("A"), center=Ref("c")).evaluate([X], _eval({"A": A, "c": np.array([1.0, 1.0])}))
    assert out.dtype == np.float64 and out.tolist() == [[0.0, 1.0], [4.0, -5.0]]
    for node in (Precondition(matrix=Ref("A"), center=Ref("c")), PartitionByBall(center=Ref("c"), radius=1.0)):
        with pytest.raises(DataError) as e:
            node.evaluate([X], _eval({"A": A, "c": np.zeros(3)}))
        assert (e.value.node, e.value.problem) == ("t", "a released vector parameter has shape (3,), expected (2,)")
    big = np.array([[2**62, -(2**62)]], dtype=np.int64)  # one pair (x, y) side by side: x - y = 2^63 wraps in int64
    assert _pair_differences(big).tolist() == [[2.0**63 / math.sqrt(2.0)]]


CHECKED_REFUSALS = [  # (the source's d and n, the array, relation, problem, fix)
    (2, None, np.array([["a", "b"]]), "replace", "source X needs numeric data, got dtype <U1",
     "pass a numeric array, or declare categorical columns with columns=[..., dpflow.Category(name, [categories])]"),
    (3, None, np.zeros(5), "replace", "source X expects an (n, 3) array, got shape (5,)",
     "pass 3 columns, or declare the source's dimension as 5"),
    (3, 5, np.zeros((3, 5)), "replace", "source X expects an (n, 3) array with one row per record, got shape (3, 5): "
     "it looks transposed", "transpose it (pass X.T) so that the rows are records and the 3 columns are coordinates"),
    (3, None, np.zeros((3, 4)), "replace", "source X expects an (n, 3) array with one row per record, got shape "
     "(3, 4): it looks transposed", "transpose it (pass X.T) so that the rows are records and the 3 columns are "
     "coordinates (or, if the rows really have 4 coordinates, declare d=4)"),
    (3, None, np.zeros((2, 4)), "replace", "source X expects an (n, 3) array, got shape (2, 4)",
     "pass 3 columns, or declare the source's dimension as 4"),
    (2, 4, np.zeros((3, 2)), "replace", "source X declares n=4 but the data has 3 rows",
     "pass the declared number of rows, or declare n=None to read it from the data"),
    *[(2, None, empty, "replace", "source X is empty (n is public under replace-one neighbours)",
       "pass at least one row") for empty in (np.zeros((0, 2)), np.zeros(0), np.zeros((3, 0)))],
]


@pytest.mark.parametrize(("d", "n", "arr", "relation", "problem", "fix"), CHECKED_REFUSALS)
def test_source_schema_refusals(d: int, n: int | None, arr: np.ndarray, relation: Any, problem: str,
                                fix: str) -> None:
    from dpflow.nodes.transforms import Source

    with pytest.raises(DataError) as e:
        Source(name="X", domain=dp.Vectors(d=d), n=n).checked(arr, "s", relation)
    assert (e.value.node, e.value.problem, e.value.fix) == ("s", problem, fix)


def test_source_schema_accepts() -> None:
    from dpflow.nodes.transforms import Source

    one = Source(name="X", domain=dp.Reals(), n=None)
    assert one.checked(np.arange(4), "s", "replace").shape == (4, 1)
    assert one.checked(np.zeros((2, 1), dtype=bool), "s", "replace").shape == (2, 1)
    three = Source(name="X", domain=dp.Vectors(d=3))
    assert three.checked(np.zeros((0, 1)), "s", "add_remove").shape == (0, 3)
    assert three.checked(np.zeros((2, 3)), "s", "add_remove").shape == (2, 3)


def test_source_policies() -> None:
    """Ordinal: NaN to 0, +inf to N - 1, -inf to 0, floor; BooleanCube: non-zero to 1, NaN to 0."""
    from dpflow.nodes.transforms import Source

    ordinal = Source(name="X", domain=dp.Ordinal(N=5)).policy(np.array([[math.nan], [math.inf], [-math.inf], [2.7],
                                                                         [-0.2], [4.5]]))
    assert ordinal.dtype == np.int64 and ordinal[:, 0].tolist() == [0, 4, 0, 2, 0, 4]
    cube = Source(name="X", domain=dp.BooleanCube(d=5)).policy(np.array([[math.nan, 0.0, -0.0, 2.0, -math.inf]]))
    assert cube.dtype == np.float64 and cube.tolist() == [[0.0, 0.0, 0.0, 1.0, 1.0]]
    ints = Source(name="X", domain=dp.BooleanCube(d=3)).policy(np.array([[0, 3, -1]]))
    assert ints.tolist() == [[0.0, 1.0, 1.0]]


def test_a_source_is_never_evaluated_as_a_node() -> None:
    from dpflow.nodes.transforms import Source

    with pytest.raises(PlanTypeError) as e:
        Source(name="X", domain=dp.Vectors(d=2)).evaluate([], _eval({}))  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem, e.value.fix) == ("t", "sources are bound by the interpreter",
                                                            "report this as a dpflow bug")



def test_source_refusals_and_defaults() -> None:
    """The declared row count and inputs are checked at planning; ``prepare`` checks under replace-one by default
    and names the node in every refusal (a DataFrame's missing columns too); float rows without bounds are
    returned as they are (no copy)."""
    import pandas as pd

    from dpflow.domains import MAX_BOUND
    from dpflow.nodes.transforms import Source

    src = Source(name="X", domain=dp.Vectors(d=2), n=0)
    for node, ins, relation, problem, fix in (
            (Source(name="X", domain=dp.Vectors(d=2)), [_rows(dp.Vectors(d=2))], "replace",
             "a source has no inputs", "remove the inputs"),
            (src, [], "replace", "source X declares n=0", "declare n >= 1"),
            (Source(name="X", domain=dp.Vectors(d=2), n=5), [], "add_remove",
             "source X declares n=5, but n is private under add_remove neighbours",
             "drop n, or declare neighbors='replace'"),
            (Source(name="X", domain=dp.Vectors(d=2, box=(0.0, 2 * MAX_BOUND))), [], "replace",
             f"source X declares a bound of {2 * MAX_BOUND:.6g}, beyond {MAX_BOUND:.6g}: sums of such rows can "
             "overflow float64", "rescale the data so that its bounds are at most 1e77"),
            *[(Source(name="X", domain=dom), [], "replace", "a source's l2 bound must be a constant around the origin",
               "declare Vectors(d, l2_bound=Sym.const(r)), or Clip after the source")
              for dom in (dp.Vectors(d=2, l2_bound=1.0, center="c"),
                          dp.Vectors(d=2, l2_bound=Sym.ref(ReleasedScalar("r"))))],
            *[(Source(name="X", domain=dp.Vectors(d=2, l2_bound=1.0, box=box)), [], "replace",
               "a source with both an l2 bound and a box needs 0 inside the box",
               "declare one of the two bounds, or Clip after the source") for box in ((0.5, 1.0), (-1.0, -0.5))],
            (Source(name="X", domain=dp.Vectors(d=3), columns=("a", "b")), [], "replace",
             "source X declares d=3 but its columns encode to 2 coordinates ['a', 'b']",
             "declare d=2, or omit the domain (b.source(name, columns=...))"),
            (Source(name="X", domain=dp.Vectors(d=3), columns=tuple(f"c{i}" for i in range(13))), [], "replace",
             f"source X declares d=3 but its columns encode to 13 coordinates {[f'c{i}' for i in range(12)]}",
             "declare d=13, or omit the domain (b.source(name, columns=...))")):
        ctx = _Infer()
        ctx.relation = relation
        with pytest.raises(PlanError) as e:
            node.infer(ins, ctx)  # type: ignore[arg-type]
        assert (e.value.node, e.value.problem, e.value.fix) == ("t", problem, fix)
    for box in ((0.0, 1.0), (-1.0, 0.0)):  # 0 on the box's edge is inside it
        Source(name="X", domain=dp.Vectors(d=2, l2_bound=1.0, box=box)).infer([], _Infer())  # type: ignore[arg-type]
    for relation, size in (("replace", Size(True, 5, RowCount("t"))), ("add_remove", Size(False, None, RowCount("t")))):
        ctx = _Infer()
        ctx.relation = relation
        n = 5 if relation == "replace" else None
        inf = Source(name="X", domain=dp.Reals(lower=0.0, upper=2.0), n=n, columns=("a",)).infer([], ctx)  # type: ignore[arg-type]
        assert inf.out == RowsT(dp.Vectors(d=1, box=(0.0, 2.0)), "X", size, 1, frozenset({relation}), ("a",))
        assert inf.derivation == f"source X: {dp.Reals(lower=0.0, upper=2.0).describe()}, n={size.text()}"
    edge = Source(name="X", domain=dp.Vectors(d=2, box=(-MAX_BOUND, MAX_BOUND)))
    assert edge.infer([], _Infer()).out.domain.box == (-MAX_BOUND, MAX_BOUND)  # type: ignore[arg-type]
    free = Source(name="X", domain=dp.Vectors(d=2))
    with pytest.raises(DataError) as d:
        free.prepare(np.zeros((0, 2)), "s")
    assert (d.value.node, d.value.problem) == ("s", "source X is empty (n is public under replace-one neighbours)")
    assert free.prepare(np.zeros((0, 2)), "s", "add_remove").shape == (0, 2)
    X = np.ones((3, 2))
    assert free.prepare(X, "s") is X
    named = Source(name="X", domain=dp.Vectors(d=2), columns=("a", "b"))
    with pytest.raises(DataError) as d:
        named.prepare(pd.DataFrame({"a": [1.0]}), "s")
    assert d.value.node == "s"
