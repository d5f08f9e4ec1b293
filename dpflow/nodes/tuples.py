"""Group-level aggregation of k-tuples (sample and aggregate for sets of k answers, mixtures.md 8): every
input row is one *group* holding ``k`` points of dimension ``w`` one after the other (``k * w`` values), such
as the k centres of a non-private k-means fit of one block of records
(``SubsampleAggregate(statistic="kmeans")``).  The points of a group come in no meaningful order (the
permutation ambiguity of mixtures.md 8), so nothing here reads the order: every count counts a *group* at
most once per cell, whichever of its points fall there.

- :class:`TupleProject`: each of the k points mapped to ``(x - c) V`` (a released basis: private PCA), so
  that the grids below live in a space of at most 6 dimensions;
- :class:`TupleCellCounts`: the group counts of self-scaled cells (each group's grid has a side set by
  the distance between its two closest points, so no scale is searched), released by
  ``GaussianStabilityHistogram`` (l1 ``2k``, l2 ``sqrt(2k)``);
- :class:`TupleCenters`: the ``k`` heaviest released cells, face neighbours merged, decoded (and lifted back
  through the basis): the k component locations, or NaN rows for the ones not found;
- :class:`PartitionByNearest`: the records split by their nearest released location (a value partition), so
  that each part is estimated on its own rows (PGME);
- :class:`TupleNearest`: each group's point nearest to one released location, so that the block answers of
  one component can be averaged (a clipped mean over groups).

>>> import numpy as np, dpflow as dp
>>> from dpflow import nodes as N
>>> b = dp.PlanBuilder(budget=dp.ApproxZCDP(1.0, 1e-6))
>>> G = N.SubsampleAggregate(size=8, statistic="kmeans", k=2)(b.source("X", dp.Vectors(d=1), n=8000))
>>> C = TupleCenters(k=2, w=1)(N.GaussianStabilityHistogram(delta=1e-7)(TupleCellCounts(k=2)(G)))
>>> rng = np.random.default_rng(0)
>>> X = np.where(rng.random((8000, 1)) < 0.5, 0.0, 30.0) + rng.normal(size=(8000, 1))
>>> c = b.build(C=C).run({"X": X}, noise=dp.SeededNoise(0)).released["C"]
>>> (np.round(np.sort(c[:, 0]) / 10) + 0.0).tolist()
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
from dpflow.nodes.base import (
    EvalContext,
    InferContext,
    Node,
    PostProcess,
    Query,
    Transform,
    finite_or_zero,
    need,
    released_type,
    text_of,
)
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.rules import changes_text
from dpflow.nodes.stability import SparseCounts
from dpflow.nodes.terrific import _pos_int
from dpflow.nodes.types import Inferred, PiecesT, ReleasedT, RowsT, SplitRule, StatT, VType
from dpflow.references import Reference

__all__ = ["PartitionByNearest", "TupleCellCounts", "TupleCenters", "TupleNearest", "TupleProject", "group_cell_keys",
           "tuple_keys", "tuple_points"]

REFERENCE = Reference("sample and aggregate over k-tuples: one group counted at most once per cell "
                      "(group-level 1-cluster)", "mixtures.md", "8")


def tuple_points(X: np.ndarray, k: int) -> np.ndarray:
    """The rows of ``X`` (B, k*w) as a (B, k, w) array of points; non-finite entries count as 0 (declared
    policy of this module).

    >>> tuple_points(np.array([[1.0, 2.0, np.nan, 4.0]]), 2).tolist()
    [[[1.0, 2.0], [0.0, 4.0]]]
    """
    A = np.asarray(X, dtype=float)
    A = np.where(np.isfinite(A), A, 0.0)
    return A.reshape(A.shape[0], k, A.shape[1] // k)


LEVEL_LIMIT = 60
"""Scale levels are clamped to +-60 (scales 2^-60 .. 2^60 of the closest pair; declared policy)."""

_LEVEL_RATIO = np.array([0.6180339887498949, 0.7548776662466927, 0.5698402909980532, 0.8191725133961645,
                         0.5310100564595835, 0.8566748838545029, 0.5086478048493867])
"""Per-coordinate steps of the public shifts across levels (low-discrepancy: fractional parts of multiples)."""


def level_grid(level: np.ndarray, seed: int, w: int, div: float) -> tuple[np.ndarray, np.ndarray]:
    """The public grid of scale level ``level``: side ``2^(level - u) / div`` and shift (fractions of the
    side) ``frac(v + level * a)``, with ``u`` (in [0, 1)) and ``v`` drawn from the public ``seed``.
    Vectorised over levels.

    >>> side, shift = level_grid(np.array([0, 1]), 0, 2, 4.0)
    >>> bool(side[1] == 2 * side[0]) and shift.shape == (2, 2)
    True
    """
    rng = np.random.default_rng(seed)
    u, v = rng.uniform(), rng.uniform(size=w)
    lv = np.asarray(level, dtype=float)
    side = np.exp2(lv - u) / div
    shift = np.mod(v[None, :] + lv[:, None] * _LEVEL_RATIO[None, :w], 1.0)
    return side, shift


def group_levels(P: np.ndarray, seed: int) -> np.ndarray:
    """Each group's scale level: ``floor(log2(m_g) + u)`` for ``m_g`` the smallest distance between two of
    its k points (``u`` the public offset of :func:`level_grid`), clamped to +-60; a group whose points
    coincide gets level -60 (declared policy).  A function of the group alone.

    >>> int(group_levels(np.array([[[0.0], [8.0], [3.0]]]), 0)[0]) in (1, 2)
    True
    """
    B, k, _ = P.shape
    u = np.random.default_rng(seed).uniform()
    with np.errstate(all="ignore"):
        D = np.sqrt(np.sum((P[:, :, None, :] - P[:, None, :, :]) ** 2, axis=3))
        D[:, np.arange(k), np.arange(k)] = np.inf
        m = D.reshape(B, k * k).min(axis=1)  # (B = 0: an empty minimum per row, no row)
        lv = np.floor(np.log2(m) + u)
    lv = np.where(np.isfinite(lv), lv, -LEVEL_LIMIT)
    out: np.ndarray = np.clip(lv, -LEVEL_LIMIT, LEVEL_LIMIT).astype(np.int64)
    return out


_COORD_BITS = 54


def tuple_keys(level: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """One int64 key per point: its level (8 bits) and its ``w <= 6`` cell coordinates (``54 // w`` bits
    each, clamped to ``+-(2^(bits-1) - 1)``: a declared policy; far cells merge at the edge), decodable by
    :func:`decode_tuple_key`.

    >>> k = tuple_keys(np.array([-3]), np.array([[5, -7]]))
    >>> decode_tuple_key(int(k[0]), 2)
    (-3, [5.0, -7.0])
    """
    w = cells.shape[1]
    bits = _COORD_BITS // w
    half = 2 ** (bits - 1) - 1
    key = np.asarray(level, dtype=np.int64) + 128
    c = np.clip(cells, -half, half) + half
    for a in range(w):  # w <= 6 coordinates, vectorised over points
        key = key * (2**bits) + c[:, a]
    out: np.ndarray = key
    return out


def decode_tuple_key(key: int, w: int) -> tuple[int, list[float]]:
    """The level and cell coordinates of a :func:`tuple_keys` key."""
    bits = _COORD_BITS // w
    half = 2 ** (bits - 1) - 1
    out = []
    for _ in range(w):
        out.append(float(key % (2**bits) - half))
        key //= 2**bits
    return int(key) - 128, out[::-1]


def group_cell_keys(P: np.ndarray, seed: int, div: float) -> np.ndarray:
    """One key per (group, occupied cell): each group's k points put in the cells of its own level's grid
    (:func:`group_levels`, :func:`level_grid`), keyed by ``(level, cell coordinates)``
    (:func:`tuple_keys`, ``w <= 6``), a group's repeated keys removed.
    A function of each group's own points only.

    >>> P = np.array([[[0.0], [0.0], [8.0]], [[0.0], [7.9], [16.0]]])
    >>> len(group_cell_keys(P, 0, 4.0))  # the first group's two equal points share a cell
    5
    """
    B, k, w = P.shape
    lv = group_levels(P, seed)
    side, shift = level_grid(lv, seed, w, div)
    with np.errstate(all="ignore"):
        z = np.floor(P / side[:, None, None] - shift[:, None, :])
    cells = np.clip(z, -2.0**40, 2.0**40).astype(np.int64)  # P finite, side > 0: z is never NaN (inf clamps)
    keys = tuple_keys(np.repeat(lv, k), cells.reshape(B * k, w))
    K = np.sort(keys.reshape(B, k), axis=1)
    first = np.ones((B, k), dtype=bool)
    first[:, 1:] = K[:, 1:] != K[:, :-1]
    out: np.ndarray = K[first]
    return out


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
            raise DomainError(ctx.node_id, f"center {self.center.id} has shape {c.shape}",
                              "pass a point of dimension w")
        out = Vectors(d=self.k * t.shape[1])
        return Inferred(attrs.evolve(rows, domain=out), f"each of {self.k} points projected onto {self.basis.id}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        V = finite_or_zero(ctx.value(self.basis))
        c = finite_or_zero(ctx.value(self.center)).reshape(-1)
        P = tuple_points(np.asarray(ins[0], dtype=float), self.k)
        with np.errstate(all="ignore"):
            out: np.ndarray = ((P - c) @ V).reshape(P.shape[0], self.k * V.shape[1])
        return out


@attrs.frozen(kw_only=True)
class TupleNearest(Transform):
    """Each group row's point nearest to location ``index`` of the released ``k x w`` ``centers``: the
    group-level matching of sample and aggregate (mixtures.md 8, step 4: "average over groups of the single
    point closest to the current centre"), so that a clipped mean over the output rows averages each
    component's block answers.  A row map of released parameters: one group gives one output row whatever
    order its points come in (ties to the earlier position), stability carries under either relation; the
    rows have no bound (clip them).  Non-finite entries of a row count as 0; a non-finite location counts as
    the origin (declared policies: a NaN location's ball holds nothing downstream).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> G = b.source("X", dp.Vectors(d=4), n=10)
    >>> Y = TupleNearest(k=2, centers=b.public([[0.0, 0.0], [5.0, 5.0]]), index=1)(G)
    """

    kind: ClassVar[str] = "TupleNearest"
    reference: ClassVar[str] = "row-wise map of released parameters (stability 1, Dwork-Roth 2014 Prop. 2.1)"
    k: int = attrs.field(converter=_pos_int)
    centers: Ref = attrs.field(converter=param)
    index: int = attrs.field(converter=int)

    @index.validator
    def _check_index(self, _: Any, value: int) -> None:
        if not 0 <= value < self.k:
            raise ValueError(f"index must be in [0, k) = [0, {self.k}), got {value}")

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows = _tuple_rows(self, ins, ctx)
        w = rows.domain.d // self.k
        t = released_type(self.centers, ctx, "centers")
        if t.shape is not None and t.shape != (self.k, w):
            raise DomainError(ctx.node_id, f"centers {self.centers.id} has shape {t.shape}",
                              f"pass a {self.k} x {w} array (TupleCenters)")
        return Inferred(attrs.evolve(rows, domain=Vectors(d=w)),
                        f"each group's point nearest to row {self.index} of {self.centers.id}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        P = tuple_points(np.asarray(ins[0], dtype=float), self.k)
        c = np.asarray(ctx.value(self.centers), dtype=float).reshape(self.k, -1)[self.index]
        c = np.where(np.all(np.isfinite(c)), c, 0.0)  # a non-finite location counts as the origin
        with np.errstate(all="ignore"):  # huge points: an infinite distance, never nearer than a finite one
            D = np.sum((P - c) ** 2, axis=2)
        out: np.ndarray = P[np.arange(P.shape[0]), np.argmin(D, axis=1)]
        return out


def _k2(x: Any) -> int:
    k = _pos_int(x)
    if k < 2:
        raise ValueError(f"a group's scale is the distance between its two closest points: k must be >= 2, got {k}")
    return k


def _w(x: Any) -> int:
    w = _pos_int(x)
    if w > 6:
        raise ValueError(f"cells of at most 6 dimensions are keyed, got w={w}: project the tuples first "
                         "(TupleProject onto a private basis)")
    return w


def _div(x: Any) -> float:
    v = float(x)
    if not (math.isfinite(v) and v >= 1):
        raise ValueError(f"div must be a finite number >= 1, got {x!r}")
    return v


@attrs.frozen(kw_only=True)
class TupleCellCounts(Query):
    """The group counts of occupied cells, as :class:`~dpflow.nodes.stability.SparseCounts`: each cell
    counts the groups with at least one point in it (whichever position the point has in the group).  The
    grids scale themselves: a group's points are put in the grid of its own scale level (the distance
    between its two closest points, rounded down to a power of two with a public random offset), of side
    ``1 / div`` of that scale and a public shift per level (:func:`group_cell_keys`); groups of one mixture
    share a level, so their answers for one component fall in one cell, with no search over scales.  Release
    it with ``GaussianStabilityHistogram`` (or ``StabilityHistogram``) and decode with :class:`TupleCenters`.

    Sensitivity: a group's keys are a function of the group alone, and it adds 1 to each of the at most
    ``k`` cells its points occupy.  Add/remove: l1 ``k``, l2 ``sqrt(k)``; replace-one: the old group's at
    most k cells lose 1 and the new group's at most k cells gain 1 (a cell in both is unchanged), l1
    ``2k``, l2 ``sqrt(2k)``; linf 1 under both (times the stability).  Treating the ``k`` points as ``k``
    records would cost group privacy of size k instead.  Non-finite entries count as 0 (declared policy).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ApproxZCDP(1.0, 1e-6))
    >>> c = TupleCellCounts(k=2)(b.source("X", dp.Vectors(d=4), n=50))
    """

    kind: ClassVar[str] = "TupleCellCounts"
    reference: ClassVar[Reference] = REFERENCE
    k: int = attrs.field(converter=_k2)
    div: float = attrs.field(default=4.0, converter=_div)
    seed: int = attrs.field(default=0, converter=int)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows = _tuple_rows(self, ins, ctx)
        _w(rows.domain.d // self.k)
        l1, l2, linf = _group_hist_sens(rows, self.k)
        return Inferred(StatT((), rows.source, l1, l2, linf, float_error=FloatError("exact", rows.domain)),
                        f"group counts of self-scaled cells, {changes_text(rows)}: l1 {text_of(l1)}, "
                        f"l2 {text_of(l2)}, linf {text_of(linf)}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        P = tuple_points(np.asarray(ins[0], dtype=float), self.k)
        uk, counts = np.unique(group_cell_keys(P, self.seed, self.div), return_counts=True)  # none when no group
        return SparseCounts(uk, counts.astype(float))


def cell_centres(keys: np.ndarray, w: int, seed: int, div: float) -> tuple[np.ndarray, np.ndarray]:
    """The centres (n x w) and sides of the cells of :func:`tuple_keys` keys.

    >>> c, side = cell_centres(tuple_keys(np.array([2]), np.array([[0]])), 1, 0, 4.0)
    >>> bool(0.5 * side[0] <= c[0, 0] <= 1.5 * side[0])
    True
    """
    dec = [decode_tuple_key(int(key), w) for key in keys]
    lv = np.array([lvl for lvl, _ in dec], dtype=np.int64)
    cells = np.array([c for _, c in dec], dtype=float).reshape(len(dec), w)
    side, shift = level_grid(lv, seed, w, div)
    return (cells + shift + 0.5) * side[:, None], side


MERGE = 1.01
"""Released cells whose centres are within 1.01 sides merge (face neighbours on one level; a cell and the
overlapping cells of the next level)."""


def merged_cells(centres: np.ndarray, sides: np.ndarray, counts: np.ndarray, k: int) -> list[tuple[np.ndarray, float]]:
    """Released cells merged into at most ``k`` clusters: heaviest cell first; every remaining cell whose
    centre lies within :data:`MERGE` times the larger of the two sides of its centre (a face neighbour: one
    component's answers cut by a cell border, or split between two levels) joins it; a cluster's position
    is the count-weighted mean of its cells' centres.  With cells of side ``scale / div`` and components at
    least ``scale`` apart, ``div > 1 + sqrt(w)`` keeps two components from merging (their cells' centres
    are within ``sqrt(w) side / 2`` of their answers).

    >>> cs = np.array([[0.5], [1.5], [9.5]])
    >>> [(c.tolist(), n) for c, n in merged_cells(cs, np.ones(3), np.array([5.0, 5.0, 4.0]), 2)]
    [([1.0], 10.0), ([9.5], 4.0)]
    """
    left = list(np.argsort(-counts, kind="stable"))
    out: list[tuple[np.ndarray, float]] = []
    while left and len(out) < k:  # at most k clusters of released (public) cells
        top = left[0]
        near = [i for i in left if np.linalg.norm(centres[i] - centres[top]) <= MERGE * max(sides[i], sides[top])]
        wts = counts[near]
        out.append((np.average(centres[near], axis=0, weights=wts), float(wts.sum())))
        left = [i for i in left if i not in near]
    return out


@attrs.frozen(kw_only=True)
class TupleCenters(PostProcess):
    """The ``k`` component locations from a released histogram of :class:`TupleCellCounts`: inputs
    ``(histogram,)`` or ``(histogram, basis, origin)``; output a ``k x D`` array, the centres of the merged
    heaviest cells (:func:`merged_cells`) by decreasing count, lifted to ``origin + V c`` when a basis is
    given (``D`` its row count, else ``w``), NaN rows for the components not found (declared policy).
    ``div`` and ``seed`` must be those of the counts.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> c = TupleCenters(k=2, w=1)(b.public(0.0))
    """

    kind: ClassVar[str] = "TupleCenters"
    reference: ClassVar[str] = "post-processing of released values (Dwork-Roth 2014 Prop. 2.1)"
    k: int = attrs.field(converter=_k2)
    w: int = attrs.field(converter=_w)
    div: float = attrs.field(default=4.0, converter=_div)
    seed: int = attrs.field(default=0, converter=int)

    def out_shape(self, ins: Sequence[ReleasedT]) -> tuple[int, ...] | None:
        if len(ins) < 3:
            return (self.k, self.w)
        V = ins[1].shape
        return None if V is None or len(V) != 2 else (self.k, V[0])

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        V = None if len(ins) < 3 else np.asarray(ins[1], dtype=float).reshape(-1, self.w)
        o = None if len(ins) < 3 else np.asarray(ins[2], dtype=float).reshape(-1)
        out = np.full((self.k, self.w if V is None else V.shape[0]), np.nan)
        hist = ins[0]
        if not isinstance(hist, tuple) or len(hist[0]) == 0:
            return out
        centres, sides = cell_centres(np.asarray(hist[0]), self.w, self.seed, self.div)
        for j, (c, _) in enumerate(merged_cells(centres, sides, np.asarray(hist[1], dtype=float), self.k)):
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

