"""Group-level aggregation of k-tuples (sample and aggregate for sets of k answers, mixtures.md 8): every
input row is one *group* holding ``k`` points of dimension ``w`` one after the other (``k * w`` values), such
as the k centres of a non-private k-means fit of one block of records
(``SubsampleAggregate(statistic="kmeans")``).  The points of a group come in no meaningful order (the
permutation ambiguity of mixtures.md 8), so nothing here reads the order: every count counts a *group* at
most once per cell, whichever of its points fall there.

- :class:`TupleProject`: each of the k points mapped to ``(x - c) V`` (a released basis: private PCA), so
  that the grids below live in a space of at most 7 dimensions;
- :class:`TupleGridMax`: for every public (side, shifted grid) pair, the largest number of groups with a
  point in one cell (the scale search: ``AboveThreshold`` picks the first grid where one cell holds most
  groups);
- :class:`TupleCellCounts`: the group counts of the cells of the chosen grid, released by
  ``StabilityHistogram`` (l1 ``2k``);
- :class:`TupleCenters`: the ``k`` heaviest released cells, adjacent cells merged, decoded (and lifted back
  through the basis): the k component locations, or NaN rows for the ones not found;
- :class:`PartitionByNearest`: the records split by their nearest released location (a value partition), so
  that each part is estimated on its own rows (PGME).

>>> import numpy as np, dpflow as dp
>>> from dpflow import nodes as N
>>> b = dp.PlanBuilder(budget=dp.ApproxZCDP(1.0, 1e-6))
>>> G = N.SubsampleAggregate(size=8, statistic="kmeans", k=2)(b.source("X", dp.Vectors(d=1), n=8000))
>>> sides = (0.5, 1.0, 2.0)
>>> j = N.AboveThreshold(threshold=800.0, weight=0.3)(TupleGridMax(k=2, sides=sides, tries=4)(G))
>>> h = N.StabilityHistogram(delta=1e-7)(TupleCellCounts(k=2, sides=sides, tries=4, choice=j)(G))
>>> C = TupleCenters(k=2, w=1, sides=sides, tries=4)(j, h)
>>> rng = np.random.default_rng(0)
>>> X = np.where(rng.random((8000, 1)) < 0.5, 0.0, 30.0) + rng.normal(size=(8000, 1))
>>> c = b.build(C=C).run({"X": X}, noise=dp.SeededNoise(0)).released["C"]
>>> np.round(np.sort(c[:, 0]) / 10).tolist()
[0.0, 3.0]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from dpflow.domains import Sym, Vectors
from dpflow.errors import DomainError
from dpflow.handles import Ref, param
from dpflow.nodes.base import EvalContext, InferContext, Node, PostProcess, Query, Transform, need, released_type
from dpflow.nodes.base import text_of
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.rules import changes_text
from dpflow.nodes.stability import SparseCounts
from dpflow.nodes.terrific import cell_coordinates, cell_keys, decode_key, grid_shifts
from dpflow.nodes.types import Inferred, PiecesT, ReleasedT, RowsT, SplitRule, StatT, VType
from dpflow.references import Reference

__all__ = ["PartitionByNearest", "TupleCellCounts", "TupleCenters", "TupleGridMax", "TupleProject",
           "group_cell_keys", "tuple_points"]

REFERENCE = Reference("sample and aggregate over k-tuples: one group counted at most once per cell "
                      "(group-level 1-cluster)", "mixtures.md", "8")


def _pos_int(x: Any) -> int:
    if isinstance(x, bool) or int(x) != x or int(x) < 1:
        raise ValueError(f"expected a positive integer, got {x!r}")
    return int(x)


def _sides(x: Any) -> tuple[float, ...]:
    r = tuple(float(v) for v in x)
    if not r or not all(math.isfinite(v) and v > 0 for v in r) or any(b <= a for a, b in zip(r, r[1:], strict=False)):
        raise ValueError("sides must be a non-empty increasing tuple of finite positive numbers")
    return r


def tuple_points(X: np.ndarray, k: int) -> np.ndarray:
    """The rows of ``X`` (B, k*w) as a (B, k, w) array of points; non-finite entries count as 0 (declared
    policy of this module).

    >>> tuple_points(np.array([[1.0, 2.0, np.nan, 4.0]]), 2).tolist()
    [[[1.0, 2.0], [0.0, 4.0]]]
    """
    A = np.asarray(X, dtype=float)
    A = np.where(np.isfinite(A), A, 0.0)
    return A.reshape(A.shape[0], k, A.shape[1] // k)


def group_cell_keys(P: np.ndarray, side: float, shift: np.ndarray) -> np.ndarray:
    """The cell keys (:func:`~dpflow.nodes.terrific.cell_keys`) of the points ``P`` (B, k, w), with each
    group's repeated keys removed: one key per (group, occupied cell), flattened.  A function of each
    group's own points only.

    >>> P = np.array([[[0.1], [0.2], [5.0]]])
    >>> len(group_cell_keys(P, 1.0, np.zeros(1)))
    2
    """
    B, k, w = P.shape
    keys, _ = cell_keys(cell_coordinates(P.reshape(B * k, w), side, shift))
    K = np.sort(keys.reshape(B, k), axis=1)
    first = np.ones((B, k), dtype=bool)
    first[:, 1:] = K[:, 1:] != K[:, :-1]
    out: np.ndarray = K[first]
    return out


def _grids(sides: tuple[float, ...], tries: int, seed: int, w: int) -> list[tuple[float, np.ndarray]]:
    """The public grids, side-major: index ``i * tries + j`` is side ``sides[i]`` with shift ``j``."""
    shifts = grid_shifts(seed, tries, w)
    return [(s, shifts[j]) for s in sides for j in range(tries)]


def _tuple_rows(node: Any, ins: Sequence[VType], ctx: InferContext) -> RowsT:
    rows: RowsT = need(ins, RowsT, ctx, "sensitive rows of k-tuples")
    if rows.domain.d % node.k:
        raise DomainError(ctx.node_id, f"rows of d={rows.domain.d} do not hold k={node.k} points of one dimension",
                          "pass rows of k * w values (SubsampleAggregate(statistic='kmeans'))")
    return rows


def _group_hist_sens(rows: RowsT, k: int) -> tuple[Sym, Sym, Sym]:
    """A group adds 1 to each of at most k cells: add/remove l1 k, l2 sqrt(k); replace-one takes 1 from
    at most k cells and adds 1 to at most k (a cell in both is unchanged): l1 2k, l2 sqrt(2k); linf 1."""
    m = 2 * k if "replace" in rows.changes else k
    s = float(rows.stability)
    return Sym.const(m * s), Sym.const(math.sqrt(m) * s), Sym.const(s)


@attrs.frozen(kw_only=True)
class TupleProject(Transform):
    """Each of the ``k`` points ``x_j`` of a group row mapped to ``(x_j - c) V`` for a released ``w x q``
    ``basis`` V and a released ``center`` c: a row map of released parameters (stability carries, either
    relation); the output rows (``k * q`` values) have no bound.  Non-finite entries of V or c count as 0,
    non-finite entries of a row as 0 (declared policies).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> Y = TupleProject(k=2, basis=b.public([[1.0], [0.0]]), center=b.public([0.0, 0.0]))(
    ...     b.source("X", dp.Vectors(d=4), n=10))
    """

    kind: ClassVar[str] = "TupleProject"
    reference: ClassVar[str] = "row-wise map of released parameters (stability 1, Dwork-Roth 2014 Prop. 2.1)"
    k: int = attrs.field(converter=_pos_int)
    basis: Ref = attrs.field(converter=param)
    center: Ref = attrs.field(converter=param)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows = _tuple_rows(self, ins, ctx)
        w = rows.domain.d // self.k
        t = released_type(self.basis, ctx, "basis")
        if t.shape is None or len(t.shape) != 2 or t.shape[0] != w:
            raise DomainError(ctx.node_id, f"basis {self.basis.id} has shape {t.shape}, points have w={w}",
                              "pass a w x q matrix (TopEigenvectors)")
        c = released_type(self.center, ctx, "center")
        if c.shape is not None and c.shape != (w,):
            raise DomainError(ctx.node_id, f"center {self.center.id} has shape {c.shape}", "pass a point of dimension w")
        out = Vectors(d=self.k * t.shape[1])
        return Inferred(attrs.evolve(rows, domain=out), f"each of {self.k} points projected onto {self.basis.id}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        V = np.nan_to_num(np.asarray(ctx.value(self.basis), dtype=float), nan=0.0, posinf=0.0, neginf=0.0)
        c = np.nan_to_num(np.asarray(ctx.value(self.center), dtype=float).reshape(-1), nan=0.0, posinf=0.0,
                          neginf=0.0)
        P = tuple_points(np.asarray(ins[0], dtype=float), self.k)
        with np.errstate(all="ignore"):
            out: np.ndarray = ((P - c) @ V).reshape(P.shape[0], -1)
        return out


@attrs.frozen(kw_only=True)
class TupleGridMax(Query):
    """For every public grid (side ``sides[i]``, shift ``j`` of ``tries`` drawn from the public ``seed``;
    answer ``i * tries + j``): the largest number of groups with at least one of their ``k`` points in one
    cell.  Small sides first, so ``AboveThreshold`` finds the finest grid on which one cell holds most
    groups: the scale at which the groups' answers for one component agree.

    Sensitivity (l-infinity): a group counts at most once in each cell, so a replaced (or added/removed)
    group moves every cell's count by at most 1, and so the maximum; over the ``m = len(sides) * tries``
    answers, l1 ``m`` and l2 ``sqrt(m)`` times that (times the stability).  Integers (floating-point error 0).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    >>> g = TupleGridMax(k=2, sides=(1.0, 2.0), tries=3)(b.source("X", dp.Vectors(d=4), n=50))
    """

    kind: ClassVar[str] = "TupleGridMax"
    reference: ClassVar[Reference] = REFERENCE
    k: int = attrs.field(converter=_pos_int)
    sides: tuple[float, ...] = attrs.field(converter=_sides)
    tries: int = attrs.field(default=10, converter=_pos_int)
    seed: int = attrs.field(default=0, converter=int)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows = _tuple_rows(self, ins, ctx)
        m = len(self.sides) * self.tries
        linf = Sym.const(float(rows.stability))
        stat = StatT((m,), rows.source, linf * float(m), linf * math.sqrt(m), linf,
                     float_error=FloatError("exact", rows.domain))
        return Inferred(stat, f"largest group count of a cell on {m} grids, {changes_text(rows)}: linf {text_of(linf)}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        P = tuple_points(np.asarray(ins[0], dtype=float), self.k)
        grids = _grids(self.sides, self.tries, self.seed, P.shape[2])
        out = np.zeros(len(grids))
        if P.shape[0] == 0:
            return out
        for i, (side, shift) in enumerate(grids):  # a public number of grids, each vectorised over groups
            out[i] = float(np.unique(group_cell_keys(P, side, shift), return_counts=True)[1].max())
        return out


def _choice(ctx: EvalContext, ref: Ref, m: int) -> int | None:
    v = float(np.asarray(ctx.value(ref), dtype=float).reshape(-1)[0])
    return int(v) if math.isfinite(v) and 0 <= v < m and v == int(v) else None


@attrs.frozen(kw_only=True)
class TupleCellCounts(Query):
    """The group counts of the occupied cells of grid number ``choice`` (a released index into the grids
    of :class:`TupleGridMax`, e.g. its ``AboveThreshold``), as
    :class:`~dpflow.nodes.stability.SparseCounts`: each cell counts the groups with at least one point in
    it.  Release it with ``StabilityHistogram``.  An invalid choice (NOT_FOUND) gives no cells (declared
    policy).

    Sensitivity: a group adds 1 to each of the at most ``k`` cells its points occupy.  Add/remove: l1
    ``k``, l2 ``sqrt(k)``; replace-one: the old group's at most k cells lose 1 and the new group's at most
    k cells gain 1 (a cell in both is unchanged), l1 ``2k``, l2 ``sqrt(2k)``; linf 1 under both (times the
    stability).  Treating the ``k`` points as ``k`` records would cost group privacy of size k instead.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ApproxZCDP(1.0, 1e-6))
    >>> c = TupleCellCounts(k=2, sides=(1.0,), tries=2, choice=b.public(0.0))(b.source("X", dp.Vectors(d=4), n=50))
    """

    kind: ClassVar[str] = "TupleCellCounts"
    reference: ClassVar[Reference] = REFERENCE
    k: int = attrs.field(converter=_pos_int)
    sides: tuple[float, ...] = attrs.field(converter=_sides)
    choice: Ref = attrs.field(converter=param)
    tries: int = attrs.field(default=10, converter=_pos_int)
    seed: int = attrs.field(default=0, converter=int)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows = _tuple_rows(self, ins, ctx)
        released_type(self.choice, ctx, "choice")
        l1, l2, linf = _group_hist_sens(rows, self.k)
        return Inferred(StatT((), rows.source, l1, l2, linf, float_error=FloatError("exact", rows.domain)),
                        f"group counts of the cells of grid {self.choice.id}, {changes_text(rows)}: l1 {text_of(l1)}, "
                        f"linf {text_of(linf)}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        P = tuple_points(np.asarray(ins[0], dtype=float), self.k)
        grids = _grids(self.sides, self.tries, self.seed, P.shape[2])
        j = _choice(ctx, self.choice, len(grids))
        if j is None or P.shape[0] == 0:
            return SparseCounts(np.zeros(0, dtype=np.int64), np.zeros(0))
        uk, counts = np.unique(group_cell_keys(P, *grids[j]), return_counts=True)
        return SparseCounts(uk, counts.astype(float))


def merged_cells(keys: np.ndarray, counts: np.ndarray, w: int, k: int) -> list[tuple[np.ndarray, float]]:
    """The released cells (integer coordinates, count) merged into at most ``k`` clusters: heaviest cell
    first, every remaining cell within one cell of it (Chebyshev distance <= 1: one component's answers
    cut by a cell border) joins it; each cluster's position is the count-weighted mean of its cells.

    >>> from dpflow.nodes.terrific import cell_keys
    >>> keys = cell_keys(np.array([[0], [1], [9]]))[0]
    >>> [(c.tolist(), n) for c, n in merged_cells(keys, np.array([5.0, 5.0, 4.0]), 1, 2)]
    [([0.5], 10.0), ([9.0], 4.0)]
    """
    cells = np.array([decode_key(int(key), w) for key in keys]).reshape(len(keys), w)
    left = list(np.argsort(-counts, kind="stable"))
    out = []
    while left and len(out) < k:  # at most k clusters of released (public) cells
        top = left[0]
        near = [i for i in left if np.max(np.abs(cells[i] - cells[top])) <= 1]
        wts = counts[near]
        out.append((np.average(cells[near], axis=0, weights=wts), float(wts.sum())))
        left = [i for i in left if i not in near]
    return out


@attrs.frozen(kw_only=True)
class TupleCenters(PostProcess):
    """The ``k`` component locations from a released ``StabilityHistogram`` of :class:`TupleCellCounts`:
    inputs ``(choice, histogram)`` or ``(choice, histogram, basis, origin)``; output a ``k x D`` array, the
    centres of the merged heaviest cells (:func:`merged_cells`) by decreasing count, lifted to
    ``origin + V c`` when a basis is given (``D`` its row count, else ``w``), NaN rows for the components
    not found (declared policy; nothing found, or an invalid choice, gives all NaN).  Cells must be
    decodable: ``w <= 7`` (project first).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> c = TupleCenters(k=2, w=1, sides=(1.0,), tries=1)(b.public(0.0), b.public(0.0))
    """

    kind: ClassVar[str] = "TupleCenters"
    reference: ClassVar[str] = "post-processing of released values (Dwork-Roth 2014 Prop. 2.1)"
    k: int = attrs.field(converter=_pos_int)
    w: int = attrs.field(converter=_pos_int)
    sides: tuple[float, ...] = attrs.field(converter=_sides)
    tries: int = attrs.field(default=10, converter=_pos_int)
    seed: int = attrs.field(default=0, converter=int)

    def out_shape(self, ins: Sequence[ReleasedT]) -> tuple[int, ...] | None:
        if len(ins) < 4:
            return (self.k, self.w)
        V = ins[2].shape
        return None if V is None or len(V) != 2 else (self.k, V[0])

    def __attrs_post_init__(self) -> None:
        if self.w > 7:
            raise ValueError(f"TupleCenters decodes cells of at most 7 dimensions, got w={self.w}: project the "
                             "tuples first (TupleProject onto a private basis)")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        V = None if len(ins) < 4 else np.asarray(ins[2], dtype=float)
        o = None if len(ins) < 4 else np.asarray(ins[3], dtype=float).reshape(-1)
        D = self.w if V is None else V.shape[0]
        out = np.full((self.k, D), np.nan)
        grids = _grids(self.sides, self.tries, self.seed, self.w)
        v = float(np.asarray(ins[0], dtype=float).reshape(-1)[0])
        hist = ins[1]
        if not (math.isfinite(v) and 0 <= v < len(grids) and v == int(v)) or not isinstance(hist, tuple) \
                or len(hist[0]) == 0:
            return out
        side, shift = grids[int(v)]
        for j, (cell, _) in enumerate(merged_cells(np.asarray(hist[0]), np.asarray(hist[1], dtype=float),
                                                   self.w, self.k)):
            c = (cell + shift + 0.5) * side
            out[j] = c if V is None or o is None else o + V @ c
        return out


@attrs.frozen(kw_only=True)
class PartitionByNearest(Node):
    """Split rows by their nearest released location: ``centers`` is a released ``k x d`` array; piece
    ``j < k`` holds the rows whose nearest finite centre is row j (ties to the lower index), piece ``k``
    the rows when no centre is finite and non-finite rows (declared policy).  The rule reads only the row
    and released values, so it is a value partition (private piece sizes; a replaced record changes at most
    two pieces, mixtures.md 2.4); the planner composes the pieces in parallel.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> near0, near1, rest = dp.nodes.split(b.source("X", dp.Vectors(d=1), n=10),
    ...                                     PartitionByNearest(k=2, centers=b.public([[0.0], [5.0]])))
    """

    kind: ClassVar[str] = "PartitionByNearest"
    reference: ClassVar[Reference] = Reference("parallel composition over a partition by released parameters",
                                               "mixtures.md", "2.4")
    k: int = attrs.field(converter=_pos_int)
    centers: Ref = attrs.field(converter=param)

    @property
    def pieces(self) -> int:
        """k pieces, one per centre, and the rest."""
        return self.k + 1

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        t = released_type(self.centers, ctx, "centers")
        if t.shape is not None and t.shape != (self.k, rows.domain.d):
            raise DomainError(ctx.node_id, f"centers {self.centers.id} has shape {t.shape}",
                              f"pass a {self.k} x {rows.domain.d} array")
        return Inferred(PiecesT(rows, self.pieces, SplitRule.VALUE), f"nearest of {self.k} centres ({self.centers.id})")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        X = np.asarray(ins[0], dtype=float)
        C = np.asarray(ctx.value(self.centers), dtype=float).reshape(self.k, -1)
        with np.errstate(all="ignore"):
            D = np.sum((X[:, None, :] - C[None, :, :]) ** 2, axis=2)
        D = np.where(np.isfinite(D), D, np.inf)
        which = np.where(np.isfinite(D.min(axis=1)), np.argmin(D, axis=1), self.k)
        return [X[which == j] for j in range(self.k + 1)]

