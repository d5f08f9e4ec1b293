"""Mutation-testing pins of ``dpflow/nodes/tuples.py`` (first run 2026-11-29).

The group histogram's sensitivity (``2k`` / ``sqrt(2k)`` replace-one, ``k`` / ``sqrt(k)`` add/remove, linf 1, all
times the stability), the row maps' output types and values (``TupleProject``, ``TupleNearest``), the value
partition by nearest centre, the self-scaled cell keys (levels, grids, the +-2^40 clamp, one key per group and
cell), and every refusal whole.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from conftest import InferCtx, ValueCtx

import dpflow as dp
from dpflow.domains import RowCount
from dpflow.errors import DomainError, PlanTypeError
from dpflow.handles import Ref
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.rules import changes_text
from dpflow.nodes.tuples import (
    LEVEL_LIMIT,
    PartitionByNearest,
    TupleCellCounts,
    TupleNearest,
    TupleProject,
    decode_tuple_key,
    group_cell_keys,
    group_levels,
    level_grid,
    tuple_keys,
)
from dpflow.nodes.types import PiecesT, ReleasedT, RowsT, Size, SplitRule


def _Infer(shapes: dict[str, tuple[int, ...] | None] | None = None) -> InferCtx:
    return InferCtx("u", shapes)


def _rows(d: int, changes: str = "replace", stability: int = 1) -> RowsT:
    return RowsT(dp.Vectors(d=d), "X", Size(True, 9, RowCount("X")), stability, frozenset({changes}), None)


@pytest.mark.parametrize(("changes", "stability", "m"), [("replace", 1, 6), ("add_remove", 1, 3), ("replace", 2, 6),
                                                         ("add_remove", 3, 3)])
def test_group_histogram_sensitivity(changes: str, stability: int, m: int) -> None:
    """k = 3 points per group: a group occupies at most 3 cells; a replaced group empties 3 and fills 3."""
    rows = _rows(6, changes, stability)
    inf = TupleCellCounts(k=3).infer([rows], _Infer())  # type: ignore[arg-type]
    stat = inf.out
    assert stat.shape == () and stat.float_error == FloatError("exact", rows.domain)
    assert (stat.l1.coef, stat.l2.coef, stat.linf.coef) == (m * stability, math.sqrt(m) * stability, stability)
    assert inf.derivation == (f"group counts of self-scaled cells, {changes_text(rows)}: l1 {stat.l1.text()}, "
                              f"l2 {stat.l2.text()}, linf {stat.linf.text()}")


def test_parameters_and_refusals() -> None:
    with pytest.raises(DomainError) as e:
        TupleCellCounts(k=4).infer([_rows(6)], _Infer())  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem, e.value.fix) == (
        "u", "rows of d=6 do not hold k=4 points of one dimension",
        "pass rows of k * w values (SubsampleAggregate(statistic='kmeans'))")
    with pytest.raises(PlanTypeError) as t:
        TupleCellCounts(k=2).infer([ReleasedT(())], _Infer())  # type: ignore[arg-type]
    assert t.value.fix == "pass sensitive rows of k-tuples"
    TupleCellCounts(k=2).infer([_rows(12)], _Infer())  # type: ignore[arg-type]  # w = 6 is keyed
    with pytest.raises(ValueError) as v:
        TupleCellCounts(k=2).infer([_rows(14)], _Infer())  # type: ignore[arg-type]
    assert str(v.value) == ("cells of at most 6 dimensions are keyed, got w=7: project the tuples first "
                            "(TupleProject onto a private basis)")
    assert TupleCellCounts(k=2, div=1).div == 1.0
    for div in (0.99, math.inf, math.nan):
        with pytest.raises(ValueError) as v:
            TupleCellCounts(k=2, div=div)
        assert str(v.value) == f"div must be a finite number >= 1, got {div!r}"


def test_tuple_project() -> None:
    rows = _rows(6, stability=2)
    inf = TupleProject(k=3, basis=Ref("V"), center=Ref("c")).infer([rows], _Infer({"V": (2, 1), "c": (2,)}))  # type: ignore[arg-type]
    assert inf.out == RowsT(dp.Vectors(d=3), "X", rows.size, 2, rows.changes, None)
    assert inf.derivation == "each of 3 points projected onto V"
    fix = "pass a w x q matrix (TopEigenvectors)"
    for shape in (None, (3, 1), (2,)):
        with pytest.raises(DomainError) as e:
            TupleProject(k=3, basis=Ref("V"), center=Ref("c")).infer([rows], _Infer({"V": shape, "c": (2,)}))  # type: ignore[arg-type]
        assert (e.value.node, e.value.problem, e.value.fix) == ("u", f"basis V has shape {shape}, points have w=2", fix)
    with pytest.raises(DomainError) as e:
        TupleProject(k=3, basis=Ref("V"), center=Ref("c")).infer([rows], _Infer({"V": (2, 1), "c": (3,)}))  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem, e.value.fix) == ("u", "center c has shape (3,)",
                                                            "pass a point of dimension w")
    TupleProject(k=3, basis=Ref("V"), center=Ref("c")).infer([rows], _Infer({"V": (2, 1), "c": None}))  # type: ignore[arg-type]
    X = np.array([[1, 2, 3, 4], [0, 0, 5, 7]])
    V = np.array([[1.0, 0.0], [0.0, np.nan]])
    out = TupleProject(k=2, basis=Ref("V"), center=Ref("c")).evaluate(
        [X], ValueCtx({"V": V, "c": np.array([[1.0, np.inf]])}))
    assert out.tolist() == [[0.0, 0.0, 2.0, 0.0], [-1.0, 0.0, 4.0, 0.0]]


def test_tuple_nearest() -> None:
    rows = _rows(6)
    inf = TupleNearest(k=3, centers=Ref("C"), index=1).infer([rows], _Infer({"C": (3, 2)}))  # type: ignore[arg-type]
    assert inf.out == RowsT(dp.Vectors(d=2), "X", rows.size, 1, rows.changes, None)
    assert inf.derivation == "each group's point nearest to row 1 of C"
    with pytest.raises(DomainError) as e:
        TupleNearest(k=3, centers=Ref("C"), index=1).infer([rows], _Infer({"C": (2, 3)}))  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem, e.value.fix) == ("u", "centers C has shape (2, 3)",
                                                            "pass a 3 x 2 array (TupleCenters)")
    X = np.array([[0, 0, 5, 5, 1, 1], [9, 9, 2, 2, 2, 2]])
    C = np.array([[0.0, 0.0], [1.0, 1.0], [7.0, 7.0]])
    nearest = TupleNearest(k=3, centers=Ref("C"), index=1)
    assert nearest.evaluate([X], ValueCtx({"C": C})).tolist() == [[1.0, 1.0], [2.0, 2.0]]  # a tie: the earlier one
    far = C.copy()
    far[1, 0] = np.nan  # a non-finite location counts as the origin
    assert nearest.evaluate([X], ValueCtx({"C": far})).tolist() == [[0.0, 0.0], [2.0, 2.0]]
    assert nearest.evaluate([np.zeros((0, 6))], ValueCtx({"C": C})).shape == (0, 2)


def test_partition_by_nearest() -> None:
    rows = _rows(2)
    inf = PartitionByNearest(k=2, centers=Ref("C")).infer([rows], _Infer({"C": (2, 2)}))  # type: ignore[arg-type]
    assert inf.out == PiecesT(rows, 3, SplitRule.VALUE) and inf.derivation == "nearest of 2 centres (C)"
    with pytest.raises(DomainError) as e:
        PartitionByNearest(k=2, centers=Ref("C")).infer([rows], _Infer({"C": (2, 3)}))  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem, e.value.fix) == ("u", "centers C has shape (2, 3)", "pass a 2 x 2 array")
    with pytest.raises(PlanTypeError) as t:
        PartitionByNearest(k=2, centers=Ref("C")).infer([ReleasedT(())], _Infer())  # type: ignore[arg-type]
    assert t.value.fix == "pass sensitive rows"
    X = np.array([[0, 0], [4, 4], [2, 2], [np.nan, 0]])
    pieces = PartitionByNearest(k=2, centers=Ref("C")).evaluate([X], ValueCtx({"C": np.array([[0.0, 0.0], [4, 4]])}))
    assert [p.tolist() for p in pieces[:2]] == [[[0.0, 0.0], [2.0, 2.0]], [[4.0, 4.0]]]  # the tie to the lower index
    assert np.isnan(pieces[2][0, 0]) and pieces[2].shape == (1, 2)


def test_levels_grids_and_keys() -> None:
    """A group's level is floor(log2(closest pair) + u), clamped to +-60 (-60 for coincident points); its grid has
    side 2^(level - u) / div and shift frac(v + level a); cell coordinates are clamped to +-2^40, NaN as 0; a
    group's repeated keys count once."""
    rng = np.random.default_rng(0)
    u, v = rng.uniform(), rng.uniform(size=2)
    side, shift = level_grid(np.array([-1, 0, 3]), 0, 2, 4.0)
    assert decode_tuple_key(int(tuple_keys(np.array([2]), np.array([[2**30, -(2**30)]]))[0]), 2) == (
        2, [2.0**26 - 1, -(2.0**26 - 1)])  # w = 2: 27 bits a coordinate
    assert side.tolist() == (np.exp2(np.array([-1.0, 0.0, 3.0]) - u) / 4.0).tolist()
    a = np.array([0.6180339887498949, 0.7548776662466927])
    assert np.array_equal(shift, np.mod(v[None, :] + np.array([-1.0, 0.0, 3.0])[:, None] * a[None, :], 1.0))
    P = np.array([[[0.0], [8.0], [3.0]], [[1.0], [1.0], [5.0]], [[0.0], [1e30], [-1e30]], [[0.0], [2e-10], [1e15]],
                  [[0.0], [1e-30], [2.0]], [[0.0], [1e300], [-1e300]]])
    assert group_levels(P, 0).tolist() == [math.floor(math.log2(3.0) + u), -LEVEL_LIMIT, LEVEL_LIMIT,
                                           math.floor(math.log2(2e-10) + u), -LEVEL_LIMIT, -LEVEL_LIMIT]
    assert group_levels(np.zeros((0, 3, 1)), 0).shape == (0,)
    lv = group_levels(P, 0)
    s, sh = level_grid(lv, 0, 1, 4.0)
    z = np.floor(P[:, :, 0] / s[:, None] - sh[:, 0][:, None])
    cells = np.clip(z, -2.0**40, 2.0**40).astype(np.int64)
    want = [sorted(set(tuple_keys(np.repeat(lv[g], 3), cells[g][:, None]).tolist())) for g in range(len(P))]
    assert group_cell_keys(P, 0, 4.0).tolist() == [key for keys in want for key in keys]
    assert abs(cells[3]).max() == 2**40 and len(want[0]) == 3  # the far point clamped
    assert len(want[1]) == 1  # level -60: all three points on the clamped edge, one key for the group


def test_cell_counts_values() -> None:
    """Each occupied cell counts the groups in it; no group, no cell."""
    X = np.array([[0.0, 8.0, 3.0], [0.1, 8.1, 3.1]])
    got = TupleCellCounts(k=3).evaluate([X], ValueCtx())
    keys = np.concatenate([group_cell_keys(X[g:g + 1, :, None], 0, 4.0) for g in range(2)])
    uk, counts = np.unique(keys, return_counts=True)
    assert got.keys.tolist() == uk.tolist() and got.counts.tolist() == counts.astype(float).tolist()
    empty = TupleCellCounts(k=3).evaluate([np.zeros((0, 3))], ValueCtx())
    assert empty.keys.dtype == np.int64 and empty.keys.shape == (0,) and empty.counts.shape == (0,)



def test_released_slots_are_named() -> None:
    from dpflow.errors import PostProcessingError

    rows = _rows(6)
    for node, slot, ref in ((TupleProject(k=3, basis=Ref("V"), center=Ref("c")), "basis", "V"),
                            (TupleNearest(k=3, centers=Ref("C"), index=0), "centers", "C"),
                            (PartitionByNearest(k=2, centers=Ref("C")), "centers", "C")):
        with pytest.raises(PostProcessingError) as p:
            node.infer([rows], InferCtx("u", other=_rows(2)))  # type: ignore[arg-type]
        assert p.value.problem == f"parameter {slot!r} refers to {ref}, which is not released"

    class CentreOnly(InferCtx):
        def type_of(self, ref: Any) -> Any:
            return _rows(2) if ref.id == "c" else ReleasedT((2, 1))

    with pytest.raises(PostProcessingError) as p:
        TupleProject(k=3, basis=Ref("V"), center=Ref("c")).infer([rows], CentreOnly())  # type: ignore[arg-type]
    assert p.value.problem == "parameter 'center' refers to c, which is not released"


def test_tuple_centers() -> None:
    """Merged heaviest cells by decreasing count (ties by position), lifted to origin + V c with a basis; NaN rows
    for components not found; the output shape (k, w) or (k, rows of V)."""
    from conftest import ValueCtx

    from dpflow.nodes.tuples import TupleCenters, cell_centres, merged_cells

    node = TupleCenters(k=2, w=1)
    assert node.out_shape([ReleasedT(())]) == (2, 1)
    assert node.out_shape([ReleasedT(()), ReleasedT((3, 1)), ReleasedT((3,))]) == (2, 3)
    assert node.out_shape([ReleasedT(()), ReleasedT(None), ReleasedT((3,))]) is None
    assert node.out_shape([ReleasedT(()), ReleasedT((3,)), ReleasedT((3,))]) is None
    keys = tuple_keys(np.array([0, 0, 0]), np.array([[0], [10], [20]]))
    hist = (keys, np.array([2.0, 9.0, 5.0]))
    centres, sides = cell_centres(keys, 1, 0, 4.0)
    first, second = (np.average(centres[[i]], axis=0, weights=[w]) for i, w in ((1, 9.0), (2, 5.0)))
    out = node.evaluate([hist], ValueCtx())
    assert out.tolist() == [first.tolist(), second.tolist()]
    V, o = np.array([[2.0], [0.0], [1.0]]), np.array([1.0, 2.0, 3.0])
    lifted = node.evaluate([hist, V, o], ValueCtx())
    assert lifted.tolist() == [(o + V @ first).tolist(), (o + V @ second).tolist()]
    one = node.evaluate([(keys[:1], np.array([2.0]))], ValueCtx())
    assert one[0].tolist() == np.average(centres[[0]], axis=0, weights=[2.0]).tolist() and np.isnan(one[1]).all()
    for empty in ((keys[:0], np.zeros(0)), 0.0):
        assert np.isnan(node.evaluate([empty], ValueCtx())).all()
    counts = np.random.default_rng(0).integers(1, 4, size=40).astype(float)
    ties = merged_cells(np.arange(40.0)[:, None] * 10, np.ones(40), counts, 40)
    order = sorted(range(40), key=lambda i: (-counts[i], i))  # equal counts: by position
    assert [c.tolist() for c, _ in ties] == [[10.0 * i] for i in order]
    edge = merged_cells(np.array([[0.0], [1.01]]), np.ones(2), np.array([2.0, 1.0]), 2)
    assert len(edge) == 1 and edge[0][1] == 3.0  # 1.01 sides apart: merged


def test_row_maps_never_warn_on_private_values() -> None:
    """Huge entries overflow to inf inside the maps without a floating-point warning (the values are private)."""
    import warnings

    X = np.array([[1e308, -1e308, 1.0, 2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = TupleProject(k=2, basis=Ref("V"), center=Ref("c")).evaluate(
            [X], ValueCtx({"V": np.array([[1e10], [1e10]]), "c": np.array([-1e308, 1e308])}))
        near = TupleNearest(k=2, centers=Ref("C"), index=0).evaluate([X], ValueCtx({"C": np.array([[0.0, 0.0]] * 2)}))
        levels = group_levels(np.array([[[1e308], [-1e308], [0.0]]]), 0)
        keys = group_cell_keys(np.array([[[1e308], [-1e308], [0.0]]]), 0, 4.0)
    assert not np.isfinite(out[0, 0]) and near.tolist() == [[1.0, 2.0]] and levels.shape == (1,) and keys.size >= 1
