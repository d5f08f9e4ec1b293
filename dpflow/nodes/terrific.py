"""Terrific balls (Kamath-Sheffet-Singhal-Ullman 2019; mixtures.md 4): the private radius search
(TerrificRadius: :class:`TerrificScores` + ``AboveThreshold`` over a public radius grid), the modified
GoodCenter (:class:`GridMaxCounts` + ``AboveThreshold`` over public random shifted grids,
:class:`CellCounts` + ``StabilityHistogram`` for the heavy cell, two private means of the points near it),
and the certification of the ball (:class:`ShellCounts` + ``LaplaceMech``).  :func:`terrific_ball` wires
them; it releases a ball ``(centre, radius)`` or the released "not found" (a NaN centre and radius), which
later nodes handle by their declared policies (a ``PartitionByBall`` of radius NaN puts every row outside).

Every sensitivity below is derived in the class docstring and checked on adversarial neighbours by the
contract suite and ``tests/nodes/test_terrific.py``.

>>> import numpy as np, dpflow as dp
>>> b = dp.PlanBuilder(budget=dp.ApproxZCDP(2.0, 1e-6))
>>> Y = b.source("Y", dp.Vectors(d=2), n=2000)
>>> ball = terrific_ball(Y, t=500, radii=radius_grid(0.25, 40.0), center=[0.0, 0.0], radius=100.0)
>>> rng = np.random.default_rng(0)
>>> data = np.concatenate([rng.normal(size=(1000, 2)), rng.normal(size=(1000, 2)) + [30.0, 0.0]])
>>> c, r = b.build(ball=ball).run({"Y": data}, noise=dp.SeededNoise(1)).released["ball"]
>>> bool(np.isfinite(r) and (np.linalg.norm(c) < 3 or np.linalg.norm(c - [30.0, 0.0]) < 3) and 2 < r < 20)
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from dpflow.domains import Sym
from dpflow.errors import DomainError
from dpflow.handles import Ref, Released, Sensitive, Value, param
from dpflow.nodes.base import (
    EvalContext,
    InferContext,
    Node,
    PostProcess,
    Query,
    need,
    released_scalar,
    released_type,
    text_of,
)
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.mechanisms import GaussianMech, LaplaceMech
from dpflow.nodes.params import positive, released_or_positive
from dpflow.nodes.pca import Project
from dpflow.nodes.postprocess import Get, noise_scale
from dpflow.nodes.quantile import ScaleShift
from dpflow.nodes.queries import Count, Sum
from dpflow.nodes.rules import changes_text
from dpflow.nodes.sparse_vector import AboveThreshold
from dpflow.nodes.stability import SparseCounts, StabilityHistogram
from dpflow.nodes.transforms import Clip, PartitionByBall, split
from dpflow.nodes.types import Inferred, PiecesT, ReleasedT, RowsT, SplitRule, StatT, VType
from dpflow.references import Reference

__all__ = [
    "BallCounts", "BallMean", "CellBall", "CellCounts", "GateBall", "GridMaxCounts", "GridValue",
    "PartitionByProjectedBall", "ShellCounts", "ShellRadii",
    "TerrificDecision", "TerrificScores", "ball_mean", "radius_grid", "terrific_ball",
]

_BLOCK = 1 << 22
"""Entries of a block of the pairwise-distance matrix (rows x n): about 32 MB of float64."""


def radius_grid(r_min: float, r_max: float, ratio: float = 1.25) -> tuple[float, ...]:
    """The public geometric radius grid ``r_min * ratio^j`` up to the first value at or above ``r_max``
    (mixtures.md 4.2: ratio 1.25).

    >>> radius_grid(1.0, 2.0)
    (1.0, 1.25, 1.5625, 1.953125, 2.44140625)
    """
    if not (0 < r_min <= r_max and math.isfinite(r_max) and ratio > 1):
        raise ValueError(f"radius_grid needs 0 < r_min <= r_max (finite) and ratio > 1, got {r_min}, {r_max}, {ratio}")
    n = math.ceil(math.log(r_max / r_min) / math.log(ratio) - 1e-12) + 1
    return tuple(r_min * ratio**j for j in range(n))


def _finite_rows(X: np.ndarray) -> np.ndarray:
    """Declared policy of this module's queries: a row with a non-finite entry counts as the origin."""
    ok = np.all(np.isfinite(X), axis=1)
    return X if bool(ok.all()) else np.where(ok[:, None], X, 0.0)


def _pairwise_counts(X: np.ndarray, radii: np.ndarray, ratio: float) -> tuple[np.ndarray, np.ndarray]:
    """For every row i and radius r_j: ``in_i(r_j) = |{l : ||x_l - x_i|| <= r_j}|`` and
    ``ann_i(r_j) = |{l : r_j < ||x_l - x_i|| <= ratio r_j}|`` (n x m int64 each).

    Each distance is computed from the two rows alone (differences, squares, a sum over the d
    coordinates in a fixed order), so it depends on nothing else in the data: the premise of the
    sensitivity proof.  Blocks of rows bound the memory; within a block everything is vectorised: each
    distance gets the index of its radius bin (``searchsorted`` on the public grid), a ``bincount`` per row
    and a cumulative sum give the counts at every radius."""
    n, d = X.shape
    m = radii.shape[0]
    inn = np.zeros((n, m), dtype=np.int64)
    ann = np.zeros((n, m), dtype=np.int64)
    if n == 0:
        return inn, ann
    grid = np.concatenate([radii, radii * ratio])
    order = np.argsort(grid, kind="stable")
    sorted_grid = grid[order]
    # column of each original grid value in the cumulative counts over the merged sorted grid
    col = np.empty(2 * m, dtype=np.int64)
    col[order] = np.arange(2 * m)
    rows = max(1, _BLOCK // max(n, 1))
    for lo in range(0, n, rows):  # blocks of rows bound the memory; not a loop over single rows
        B = X[lo:lo + rows]
        b = B.shape[0]
        D = np.zeros((b, n))
        with np.errstate(all="ignore"):
            for a in range(d):  # the d coordinates in a fixed order: each distance depends on its two rows only
                D += np.square(B[:, a, None] - X[None, :, a])
            D = np.sqrt(D)  # finite rows (_finite_rows): never NaN, inf where the square overflows
        k = np.searchsorted(sorted_grid, D, side="left") + (np.arange(b) * (2 * m + 1))[:, None]
        cum = np.bincount(k.ravel(), minlength=b * (2 * m + 1)).reshape(b, 2 * m + 1).cumsum(axis=1)
        c_in, c_out = cum[:, col[:m]], cum[:, col[m:]]
        inn[lo:lo + b] = c_in
        ann[lo:lo + b] = c_out - c_in
    return inn, ann


def terrific_sums(X: np.ndarray, radii: Sequence[float], t: int, ratio: float, lam: int) -> np.ndarray:
    """``t * L_T(r_j)`` for every radius: the sum of the ``t`` largest
    ``s_i(r) = clip_[0,t](min(in_i(r), out_i(r), t) - lam * ann_i(r))`` (zero-padded when n < t).

    >>> X = np.array([[0.0], [0.1], [10.0], [10.1]])
    >>> terrific_sums(X, [0.5], t=2, ratio=3.0, lam=1).tolist()
    [4]
    """
    X = _finite_rows(np.asarray(X, dtype=float))
    r = np.asarray(radii, dtype=float)
    n = X.shape[0]
    inn, ann = _pairwise_counts(X, r, ratio)
    out = n - inn - ann
    s = np.maximum(np.minimum(np.minimum(inn, out), t) - lam * ann, 0)  # in [0, t]: the cap t applies first
    s = -np.sort(-s, axis=0)[:t]  # the t largest per radius (all n when n < t: zero padding adds nothing)
    total: np.ndarray = s.sum(axis=0).astype(np.int64)
    return total


def _terrific_linf(rows: RowsT, t: int, lam: int) -> Sym:
    per: list[float] = []
    if "replace" in rows.changes:
        per.append(float(t * (2 + lam)))
    if "add_remove" in rows.changes:
        per.append(float(t * (1 + max(1, lam))))
    return Sym.const(max(per) * rows.stability)


def _vector_norms(linf: Sym, m: int) -> tuple[Sym, Sym]:
    """l1 and l2 bounds of an m-vector whose every entry moves by at most ``linf``: ``m linf``, ``sqrt(m) linf``."""
    return linf * float(m), linf * math.sqrt(m)


def _pos_int(x: Any) -> int:
    if isinstance(x, bool) or int(x) != x or int(x) < 1:
        raise ValueError(f"expected a positive integer, got {x!r}")
    return int(x)


def _radii(x: Any) -> tuple[float, ...]:
    r = tuple(float(v) for v in x)
    if not r or not all(math.isfinite(v) and v > 0 for v in r) or any(b <= a for a, b in zip(r, r[1:], strict=False)):
        raise ValueError("radii must be a non-empty increasing tuple of finite positive numbers")
    return r


@attrs.frozen(kw_only=True)
class TerrificScores(Query):
    """The terrific scores of a public radius grid: ``t * L_T(r_j)`` for every ``r_j`` of ``radii``, with
    ``L_T(r) = (1/t) (sum of the t largest s_i(r))`` and
    ``s_i(r) = clip_[0,t](min(in_i(r), out_i(r), t) - lam * ann_i(r))`` where, around the data point x_i,
    ``in`` counts the points within r (x_i included), ``ann`` those in (r, ratio r] and ``out`` those beyond
    ``ratio r`` (mixtures.md 4.2).  Integers, computed exactly.

    Sensitivity (l-infinity, per radius).  Replace-one: the changed record enters or leaves each of the
    other points' three regions, so ``in_i`` and ``ann_i`` (and ``out_i``) move by at most 1 each and
    ``s_i`` by at most ``1 + lam`` (clipping is 1-Lipschitz); the changed point's own entry, in [0, t], is
    swapped for another.  The sum of the t largest entries moves by at most t times the largest entry-wise
    change, plus t for the swapped entry: ``t (2 + lam)``.  Add/remove: the record is in exactly one region
    of every other point, so ``s_i`` moves by at most ``max(1, lam)``, and one entry in [0, t] appears or
    disappears (zero padding when n < t): ``t (1 + max(1, lam))``.  Times the stability.  ``t`` and ``lam``
    are integers, so the answers are exact integers (floating-point error 0).  Over the m radii: l1 ``m``
    and l2 ``sqrt(m)`` times the l-infinity bound.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    >>> s = TerrificScores(radii=(1.0, 2.0), t=5)(b.source("X", dp.Vectors(d=2), n=50))
    """

    kind: ClassVar[str] = "TerrificScores"
    reference: ClassVar[Reference] = Reference(
        "terrific score (top-t trick of NSV16 with an annulus penalty), sensitivity t(2+lam) replace-one, "
        "t(1+max(1,lam)) add/remove", "mixtures.md", "4.2")
    radii: tuple[float, ...] = attrs.field(converter=_radii)
    t: int = attrs.field(converter=_pos_int)
    ratio: float = attrs.field(default=3.0, converter=positive)
    lam: int = attrs.field(default=1, converter=_pos_int)

    def __attrs_post_init__(self) -> None:
        if not self.ratio > 1:
            raise ValueError(f"TerrificScores needs ratio > 1, got {self.ratio}")

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        linf = _terrific_linf(rows, self.t, self.lam)
        l1, l2 = _vector_norms(linf, len(self.radii))
        stat = StatT((len(self.radii),), rows.source, l1, l2, linf, float_error=FloatError("exact", rows.domain))
        return Inferred(stat, f"terrific scores t*L_T over {len(self.radii)} radii, t={self.t}, ratio={self.ratio:g}, "
                              f"lam={self.lam}, {changes_text(rows)}: linf {text_of(linf)}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        return terrific_sums(np.asarray(ins[0], dtype=float), self.radii, self.t, self.ratio, self.lam).astype(float)


def _side(ctx: EvalContext, radius: float | Ref, factor: float) -> float:
    """The grid side ``factor * radius``; NaN when the radius is not a positive finite number (declared
    policy: the grid is then empty, every answer 0)."""
    r = radius if not isinstance(radius, Ref) else released_scalar(ctx.value(radius))
    side = factor * r
    return side if math.isfinite(side) and side > 0 else math.nan


def grid_shifts(seed: int, tries: int, d: int) -> np.ndarray:
    """The public random shifts (fractions of the side, in [0, 1)) of the ``tries`` grids: drawn from the
    public ``seed``, so they do not depend on the data.

    >>> grid_shifts(0, 2, 3).shape
    (2, 3)
    """
    return np.random.default_rng(seed).uniform(0.0, 1.0, (tries, d))


_COORD_LIMIT = 2**40


def cell_coordinates(X: np.ndarray, side: float, shift: np.ndarray) -> np.ndarray:
    """Integer cell coordinates ``floor(x / side - shift)``, clamped to +-2^40 (declared policy).

    >>> cell_coordinates(np.array([[0.5, -0.5]]), 1.0, np.zeros(2)).tolist()
    [[0, -1]]
    """
    with np.errstate(all="ignore"):
        z = np.floor(np.asarray(X, dtype=float) / side - shift)
    out: np.ndarray = np.clip(np.where(np.isnan(z), 0.0, z), -_COORD_LIMIT, _COORD_LIMIT).astype(np.int64)
    return out


_BITS = 62


def cell_keys(cells: np.ndarray) -> tuple[np.ndarray, bool]:
    """One int64 key per row: the cell coordinates in mixed radix when they fit (at most 7 coordinates,
    each clamped to ``+-(2^(bits-1) - 1)`` with ``bits = 62 // d``: decodable by :func:`decode_key`), else a
    public hash of them (collisions merge cells).  Both are functions of the row's own cell only.

    >>> k, ok = cell_keys(np.array([[1, -2]]))
    >>> ok and decode_key(int(k[0]), 2).tolist() == [1, -2]
    True
    """
    d = cells.shape[1]
    bits = _BITS // d
    if d <= 7:
        half = 2 ** (bits - 1) - 1
        c = np.clip(cells, -half, half) + half
        key = np.zeros(cells.shape[0], dtype=np.int64)
        for a in range(d):  # d <= 7 coordinates, vectorised over rows
            key = key * (2**bits) + c[:, a]
        return key, True
    mult = np.random.default_rng(12345).integers(1, 2**61, size=d, dtype=np.int64) | 1
    with np.errstate(over="ignore"):
        h = (cells.astype(np.uint64) * mult.astype(np.uint64)).sum(axis=1, dtype=np.uint64)
    return (h >> np.uint64(2)).astype(np.int64), False


def decode_key(key: int, d: int) -> np.ndarray:
    """The cell coordinates of a mixed-radix key (:func:`cell_keys` with d <= 7)."""
    bits = _BITS // d
    half = 2 ** (bits - 1) - 1
    out = []
    for _ in range(d):
        out.append(key % (2**bits) - half)
        key //= 2**bits
    return np.array(out[::-1], dtype=float)


def _grid_params(node: Any, ctx: InferContext) -> None:
    if isinstance(node.radius, Ref):
        t = released_type(node.radius, ctx, "radius")
        if t.shape is not None and t.shape != ():
            raise DomainError(ctx.node_id, f"radius refers to {node.radius.id} of shape {t.shape}",
                              "pass a released scalar (GridValue of an AboveThreshold)")


@attrs.frozen(kw_only=True)
class GridMaxCounts(Query):
    """For each of ``tries`` public randomly shifted grids of side ``factor * radius``: the largest number
    of rows in one cell (mixtures.md 3.2, practical GoodCenter step (a)).  ``radius`` may be released (the
    TerrificRadius output); when it is not a positive finite number every answer is 0 (declared policy).

    Sensitivity (l-infinity): one record is in one cell of each grid, so a replaced record lowers one
    cell's count by 1 and raises another's by 1, and an added/removed one moves one count by 1: the
    maximum moves by at most 1 (times the stability); over the tries, l1 ``tries`` and l2 ``sqrt(tries)``
    times that.  Integers (floating-point error 0).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    >>> g = GridMaxCounts(radius=1.0, tries=10)(b.source("X", dp.Vectors(d=2), n=50))
    """

    kind: ClassVar[str] = "GridMaxCounts"
    reference: ClassVar[Reference] = Reference("max cell count of a randomly shifted grid, sensitivity 1",
                                               "mixtures.md", "3.2")
    radius: float | Ref = attrs.field(converter=released_or_positive)
    factor: float = attrs.field(default=4.0, converter=positive)
    tries: int = attrs.field(default=100, converter=_pos_int)
    seed: int = attrs.field(default=0, converter=int)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        _grid_params(self, ctx)
        linf = Sym.const(float(rows.stability))
        l1, l2 = _vector_norms(linf, self.tries)
        stat = StatT((self.tries,), rows.source, l1, l2, linf, float_error=FloatError("exact", rows.domain))
        return Inferred(stat, f"max cell count of {self.tries} shifted grids, {changes_text(rows)}: "
                              f"linf {text_of(linf)}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        X = _finite_rows(np.asarray(ins[0], dtype=float))
        side = _side(ctx, self.radius, self.factor)
        out = np.zeros(self.tries)
        if math.isnan(side) or X.shape[0] == 0:
            return out
        shifts = grid_shifts(self.seed, self.tries, X.shape[1])
        for j in range(self.tries):  # public number of grids, each vectorised over the rows
            keys, _ = cell_keys(cell_coordinates(X, side, shifts[j]))
            out[j] = float(np.unique(keys, return_counts=True)[1].max())
        return out


def _choice(ctx: EvalContext, ref: Ref, tries: int) -> int | None:
    v = released_scalar(ctx.value(ref))
    return int(v) if math.isfinite(v) and 0 <= v < tries and v == int(v) else None


@attrs.frozen(kw_only=True)
class CellCounts(Query):
    """Counts of the occupied cells of grid number ``choice`` (a released index, e.g. an
    ``AboveThreshold`` over :class:`GridMaxCounts`) as :class:`~dpflow.nodes.stability.SparseCounts` keyed
    by :func:`cell_keys`; release it with ``StabilityHistogram``.  An invalid choice (NOT_FOUND) gives no
    cells (declared policy).  A record is in one cell: replace-one l1 2, linf 1; add/remove 1.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ApproxZCDP(1.0, 1e-6))
    >>> c = CellCounts(radius=1.0, choice=b.public(0.0))(b.source("X", dp.Vectors(d=2), n=50))
    """

    kind: ClassVar[str] = "CellCounts"
    reference: ClassVar[Reference] = Reference("stability histogram over the cells of a public grid: one record is "
                                               "in one cell", "mixtures.md", "2.5")
    radius: float | Ref = attrs.field(converter=released_or_positive)
    choice: Ref = attrs.field(converter=param)
    factor: float = attrs.field(default=4.0, converter=positive)
    tries: int = attrs.field(default=100, converter=_pos_int)
    seed: int = attrs.field(default=0, converter=int)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        _grid_params(self, ctx)
        released_type(self.choice, ctx, "choice")
        l1, l2, linf = _histogram_sens(rows)
        return Inferred(StatT((), rows.source, l1, l2, linf, float_error=FloatError("exact", rows.domain)),
                        f"cell counts of grid {self.choice.id}, {changes_text(rows)}: l1 {text_of(l1)}, linf 1")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        X = _finite_rows(np.asarray(ins[0], dtype=float))
        side = _side(ctx, self.radius, self.factor)
        j = _choice(ctx, self.choice, self.tries)
        if math.isnan(side) or j is None:
            return SparseCounts(np.zeros(0, dtype=np.int64), np.zeros(0))
        keys, _ = cell_keys(cell_coordinates(X, side, grid_shifts(self.seed, self.tries, X.shape[1])[j]))
        uk, counts = np.unique(keys, return_counts=True)
        return SparseCounts(uk, counts.astype(float))


def _histogram_sens(rows: RowsT) -> tuple[Sym, Sym, Sym]:
    """A record in one bin: replace-one moves two bins by 1 (l1 2, l2 sqrt 2, linf 1), add/remove one."""
    l1, l2 = (2.0, math.sqrt(2.0)) if "replace" in rows.changes else (1.0, 1.0)
    s = float(rows.stability)
    return Sym.const(l1 * s), Sym.const(l2 * s), Sym.const(s)


@attrs.frozen(kw_only=True)
class CellBall(PostProcess):
    """The ball around the heavy cell of a released ``StabilityHistogram`` of :class:`CellCounts`: inputs
    ``(radius, choice, histogram, node_center, node_radius)``; output ``(centre, half-diagonal)`` of the
    cell with the largest released count.  When the keys are hashed (d > 7) the cell cannot be decoded and
    the ball is the node ball ``(node_center, node_radius)``; when nothing was found (or the radius or
    choice is invalid), a NaN centre and radius (declared policy).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> p = b.public
    >>> cb = CellBall(d=2)(p(1.0), p(0.0), p(0.0), p([0.0, 0.0]), p(10.0))
    """

    kind: ClassVar[str] = "CellBall"
    reference: ClassVar[str] = "post-processing of released values (Dwork-Roth 2014 Prop. 2.1)"
    d: int = attrs.field(converter=_pos_int)
    factor: float = attrs.field(default=4.0, converter=positive)
    tries: int = attrs.field(default=100, converter=_pos_int)
    seed: int = attrs.field(default=0, converter=int)

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        side = self.factor * released_scalar(ins[0])
        v = released_scalar(ins[1])
        hist = ins[2]
        nan = (np.full(self.d, np.nan), math.nan)
        if not (math.isfinite(side) and side > 0 and math.isfinite(v) and 0 <= v < self.tries) or \
                not isinstance(hist, tuple) or len(hist[0]) == 0:
            return nan
        if self.d > 7:
            return (np.asarray(ins[3], dtype=float).reshape(-1), released_scalar(ins[4]))
        keys, counts = hist
        key = int(keys[int(np.argmax(counts))])
        shift = grid_shifts(self.seed, self.tries, self.d)[int(v)]
        centre = (decode_key(key, self.d) + shift + 0.5) * side
        return (centre, side * math.sqrt(self.d) / 2.0)


@attrs.frozen(kw_only=True)
class GridValue(PostProcess):
    """``values[i]`` for a released index ``i`` (an ``AboveThreshold`` output); NaN for NOT_FOUND or any
    invalid index (declared policy).

    >>> import dpflow as dp
    >>> r = GridValue(values=(1.0, 2.0))(dp.PlanBuilder(budget=dp.ZCDP(0.5)).public(1.0))
    """

    kind: ClassVar[str] = "GridValue"
    reference: ClassVar[str] = "post-processing of released values (Dwork-Roth 2014 Prop. 2.1)"
    values: tuple[float, ...] = attrs.field(converter=_radii)

    def out_shape(self, ins: Sequence[ReleasedT]) -> tuple[int, ...] | None:
        return ()

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        i = released_scalar(ins[0])
        ok = math.isfinite(i) and i == int(i) and 0 <= i < len(self.values)
        return self.values[int(i)] if ok else math.nan


@attrs.frozen(kw_only=True)
class BallMean(PostProcess):
    """``centre + sum / max(count, 1)`` from a released ball ``(centre, radius)`` (or a centre alone), a
    released sum of the rows re-centred on it, and a released count; a NaN centre stays NaN.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> m = BallMean()(b.public([1.0, 1.0]), b.public([4.0, 0.0]), b.public(2.0))
    """

    kind: ClassVar[str] = "BallMean"
    reference: ClassVar[str] = "post-processing of released values (Dwork-Roth 2014 Prop. 2.1)"

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        c = ins[0][0] if isinstance(ins[0], tuple) else ins[0]
        c = np.asarray(c, dtype=float)
        s = np.asarray(ins[1], dtype=float)
        n = released_scalar(ins[2])
        return c + s / max(n if math.isfinite(n) else 1.0, 1.0)


@attrs.frozen(kw_only=True)
class ShellCounts(Query):
    """Counts of the rows ``(inside, annulus, outside)`` of a released centre ``center``: distances
    ``<= inner``, in ``(inner, outer]``, ``> outer`` (``inner``, ``outer`` released; non-finite ones make
    every row "outside": declared policy, as are non-finite rows).  A record is in one region: replace-one
    l1 2, l2 sqrt 2, linf 1; add/remove 1 (times the stability).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    >>> c = ShellCounts(center=b.public([0.0, 0.0]), inner=b.public(1.0), outer=b.public(2.0))(
    ...     b.source("X", dp.Vectors(d=2), n=50))
    """

    kind: ClassVar[str] = "ShellCounts"
    reference: ClassVar[Reference] = Reference("histogram of three regions of a released ball, one record per region",
                                               "mixtures.md", "4.3")
    center: Ref = attrs.field(converter=param)
    inner: Ref = attrs.field(converter=param)
    outer: Ref = attrs.field(converter=param)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        c = released_type(self.center, ctx, "center")
        if c.shape is not None and c.shape != (rows.domain.d,):
            raise DomainError(ctx.node_id, f"center has shape {c.shape}, rows have d={rows.domain.d}",
                              "pass a centre of the rows' dimension")
        released_type(self.inner, ctx, "inner")
        released_type(self.outer, ctx, "outer")
        l1, l2, linf = _histogram_sens(rows)
        return Inferred(StatT((3,), rows.source, l1, l2, linf, float_error=FloatError("exact", rows.domain)),
                        f"counts inside / annulus / outside, {changes_text(rows)}: l1 {text_of(l1)}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        X = np.asarray(ins[0], dtype=float)
        c = np.asarray(ctx.value(self.center), dtype=float).reshape(-1)
        a = released_scalar(ctx.value(self.inner))
        b = released_scalar(ctx.value(self.outer))
        if not (np.all(np.isfinite(c)) and math.isfinite(a) and math.isfinite(b)) or X.shape[0] == 0:
            return np.array([0.0, 0.0, float(X.shape[0])])
        with np.errstate(all="ignore"):
            dist = np.linalg.norm(X - c, axis=1)
        dist = np.where(np.isfinite(dist), dist, np.inf)
        inside = int(np.count_nonzero(dist <= a))
        ann = int(np.count_nonzero((dist > a) & (dist <= b)))
        return np.array([float(inside), float(ann), float(X.shape[0] - inside - ann)])


@attrs.frozen(kw_only=True)
class TerrificDecision(PostProcess):
    """The certification of PTerrificBall (mixtures.md 4.3): inputs ``(centre, radius r, noisy shell
    counts (in, annulus, out), Laplace noise multiplier b1)``; with ``tau = 2 b1 ln(3 / beta)`` (the l1
    sensitivity 2 of the shell counts times the multiplier), the ball ``(centre, sqrt(r_in r_out))`` with
    ``r_in = (1 + error) r``, ``r_out = max(ratio r - error r, 1.2 r_in)`` is released when
    ``in >= t - tau``, ``out >= t - tau`` and ``annulus <= max(tau, annulus_fraction t)``; else the "not
    found" ball (NaN centre and radius).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> ball = TerrificDecision(t=10)(b.public([0.0]), b.public(1.0), b.public([50.0, 0.0, 50.0]), b.public(1.0))
    """

    kind: ClassVar[str] = "TerrificDecision"
    reference: ClassVar[str] = "post-processing of released values (Dwork-Roth 2014 Prop. 2.1)"
    t: int = attrs.field(converter=_pos_int)
    ratio: float = attrs.field(default=3.0, converter=positive)
    error: float = attrs.field(default=1.0, converter=positive)
    beta: float = attrs.field(default=0.05, converter=positive)
    annulus_fraction: float = attrs.field(default=0.02, converter=positive)

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        c = np.asarray(ins[0], dtype=float).reshape(-1)
        r = released_scalar(ins[1])
        noisy = np.asarray(ins[2], dtype=float).reshape(-1)
        b1 = released_scalar(ins[3])
        nan = (np.full(c.shape, np.nan), math.nan)
        if not (np.all(np.isfinite(c)) and math.isfinite(r) and r > 0 and np.all(np.isfinite(noisy))):
            return nan
        r_in, r_out = r_bounds(r, self.ratio, self.error)
        tau = 2.0 * b1 * math.log(3.0 / self.beta)
        ok = (noisy[0] >= self.t - tau and noisy[2] >= self.t - tau
              and noisy[1] <= max(tau, self.annulus_fraction * self.t))
        return (c, math.sqrt(r_in * r_out)) if ok else nan


def r_bounds(r: float, ratio: float, error: float) -> tuple[float, float]:
    """``(r_in, r_out)`` of the certified annulus for a found radius r and a centre error ``error * r``.

    >>> r_bounds(1.0, 3.0, 1.0)
    (2.0, 2.4)
    """
    r_in = (1.0 + error) * r
    return r_in, max(ratio * r - error * r, 1.2 * r_in)


@attrs.frozen(kw_only=True)
class ShellRadii(PostProcess):
    """``r_in`` (``which=0``) or ``r_out`` (``which=1``) of :func:`r_bounds` for a released radius; NaN
    for a radius that is not positive and finite.

    >>> import dpflow as dp
    >>> r_in = ShellRadii(which=0)(dp.PlanBuilder(budget=dp.ZCDP(0.5)).public(1.0))
    """

    kind: ClassVar[str] = "ShellRadii"
    reference: ClassVar[str] = "post-processing of released values (Dwork-Roth 2014 Prop. 2.1)"
    which: int = attrs.field(converter=int)
    ratio: float = attrs.field(default=3.0, converter=positive)
    error: float = attrs.field(default=1.0, converter=positive)

    def out_shape(self, ins: Sequence[ReleasedT]) -> tuple[int, ...] | None:
        return ()

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        r = released_scalar(ins[0])
        if not (math.isfinite(r) and r > 0):
            return math.nan
        return r_bounds(r, self.ratio, self.error)[self.which]


def ball_mean(rows: Sensitive[Any], center: Released[Value], radius: Released[Value],
              sum_weight: float, count_weight: float) -> Released[Value]:
    """The private mean of the rows within ``radius`` of ``center`` (both released): a value partition
    (``PartitionByBall``), the rows inside re-centred and clipped to the radius (``Project`` + ``Clip``),
    their sum by ``GaussianMech`` and their count by ``LaplaceMech``, then ``center + sum / count``
    (mixtures.md 2.8).  NaN centre or radius: every row is outside, the mean stays NaN.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> m = ball_mean(b.source("X", dp.Vectors(d=2), n=50), b.public([0.0, 0.0]), b.public(1.0), 1.0, 1.0)
    """
    inside, _ = split(rows, PartitionByBall(center=center, radius=radius))
    z = Clip(radius=radius)(Project(center=center)(inside))
    s = GaussianMech(weight=sum_weight)(Sum()(z))
    n = LaplaceMech(weight=count_weight)(Count()(inside))
    return BallMean()(center, s, n)


def terrific_ball(rows: Sensitive[Any], t: int, radii: Sequence[float], center: Sequence[float] | Released[Value],
                  radius: float | Released[Value], ratio: float = 3.0, lam: int = 1, beta: float = 0.05,
                  tries: int = 100, factor: float = 4.0, seed: int = 0, delta: float = 1e-7,
                  weights: tuple[float, float, float, float, float] = (0.35, 0.1, 0.1, 0.25, 0.2),
                  d: int | None = None) -> Released[Value]:
    """PTerrificBall (mixtures.md 4.3 [P]) as a plan: the rows clipped to the public or released node ball
    ``B(center, radius)``, TerrificRadius over the public ``radii``, the modified GoodCenter (shifted grids,
    heavy cell, mean near the cell, refined mean in ``B(p1, 2r)``), then the certification.  Releases
    ``(centre, split radius)`` or the "not found" ball (NaN centre and radius).

    ``weights`` are the relative budget shares of (radius search, grid search, heavy cell, the two means,
    certification); each mechanism's cost is in the ledger.  ``t`` is the target cluster size; the
    AboveThreshold of the radius search uses the threshold ``t * (t - alpha)`` with ``alpha`` the accuracy
    margin of the certified share at failure probability ``beta``, and does not search (releases NOT_FOUND,
    a public decision) when ``alpha > t / 2``.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ApproxZCDP(1.0, 1e-6))
    >>> ball = terrific_ball(b.source("X", dp.Vectors(d=2), n=100), t=20, radii=(1.0, 2.0), center=[0.0, 0.0],
    ...                      radius=10.0)
    """
    w_rad, w_grid, w_cell, w_mean, w_cert = weights
    if isinstance(center, Released):
        if d is None:
            raise ValueError("terrific_ball needs d= (the rows' dimension) when the centre is a released handle")
        c_ref: Any = center
    else:
        d = len(center)
        c_ref = rows.builder.public([float(v) for v in center])
    Y = Clip(radius=radius, center=c_ref)(rows)
    scores = TerrificScores(radii=tuple(radii), t=t, ratio=ratio, lam=lam)(Y)
    j = AboveThreshold(threshold=float(t * t), margin_beta=beta, min_threshold=float(t * t) / 2.0,
                       weight=w_rad)(scores)
    r = GridValue(values=tuple(radii))(j)
    gm = GridMaxCounts(radius=r, factor=factor, tries=tries, seed=seed)(Y)
    choice = AboveThreshold(threshold=float(t), margin_beta=beta, weight=w_grid)(gm)
    hist = StabilityHistogram(delta=delta, weight=w_cell)(
        CellCounts(radius=r, choice=choice, factor=factor, tries=tries, seed=seed)(Y))
    r_node = radius if isinstance(radius, Released) else rows.builder.public(float(radius))
    cell = CellBall(d=d, factor=factor, tries=tries, seed=seed)(r, choice, hist, c_ref, r_node)
    p1 = ball_mean(Y, Get(index=0)(cell), Get(index=1)(cell), w_mean / 4, w_mean / 4)
    two_r = ScaleShift(scale=2.0)(r)  # NaN (not found) counts as 0: every row outside the ball
    p2 = ball_mean(Y, p1, two_r, w_mean / 4, w_mean / 4)
    r_in, r_out = ShellRadii(which=0, ratio=ratio)(r), ShellRadii(which=1, ratio=ratio)(r)
    shell = LaplaceMech(weight=w_cert)(ShellCounts(center=p2, inner=r_in, outer=r_out)(Y))
    return TerrificDecision(t=t, ratio=ratio, beta=beta)(p2, r, shell, noise_scale(shell))


@attrs.frozen(kw_only=True)
class BallCounts(Query):
    """Counts of the rows within each public radius of ``radii`` around a released or public ``center``
    (the private bounding-ball search of mixtures.md 5.3: ``AboveThreshold`` on these counts).  A record is
    in a ball or not: each count moves by at most 1 under either relation (times the stability); over the
    m radii, l1 ``m`` and l2 ``sqrt(m)`` times that.  Non-finite rows and a non-finite centre count as
    outside every ball (declared policy).  Integers (floating-point error 0).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    >>> c = BallCounts(center=b.public([0.0, 0.0]), radii=(1.0, 2.0))(b.source("X", dp.Vectors(d=2), n=50))
    """

    kind: ClassVar[str] = "BallCounts"
    reference: ClassVar[Reference] = Reference("counts of nested public balls around a released centre, "
                                               "sensitivity 1 each", "mixtures.md", "5.3")
    center: Ref = attrs.field(converter=param)
    radii: tuple[float, ...] = attrs.field(converter=_radii)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        c = released_type(self.center, ctx, "center")
        if c.shape is not None and c.shape != (rows.domain.d,):
            raise DomainError(ctx.node_id, f"center has shape {c.shape}, rows have d={rows.domain.d}",
                              "pass a centre of the rows' dimension")
        linf = Sym.const(float(rows.stability))
        l1, l2 = _vector_norms(linf, len(self.radii))
        return Inferred(StatT((len(self.radii),), rows.source, l1, l2, linf,
                              float_error=FloatError("exact", rows.domain)),
                        f"counts within {len(self.radii)} radii, {changes_text(rows)}: linf {text_of(linf)}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        X = np.asarray(ins[0], dtype=float)
        c = np.asarray(ctx.value(self.center), dtype=float).reshape(-1)
        if X.shape[0] == 0 or not np.all(np.isfinite(c)):
            return np.zeros(len(self.radii))
        with np.errstate(all="ignore"):
            dist = np.linalg.norm(X - c, axis=1)
        dist = np.sort(np.where(np.isfinite(dist), dist, np.inf))
        return np.searchsorted(dist, np.asarray(self.radii), side="right").astype(float)


@attrs.frozen(kw_only=True)
class PartitionByProjectedBall(Node):
    """Split rows by a ball in a projected space: piece 0 holds the rows with
    ``||(x - origin) V - center|| <= radius`` for a released d x k ``basis`` V, a released ``origin`` (in
    R^d) and a released ball ``(center, radius)`` in R^k; piece 1 the rest.  The rule reads only the row
    and released values, so it is a value partition (private piece sizes; mixtures.md 2.4).  A non-finite
    row, centre or radius puts the row in piece 1 (declared policy).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> rule = PartitionByProjectedBall(center=b.public([0.0]), radius=b.public(1.0),
    ...                                 basis=b.public([[1.0], [0.0]]), origin=b.public([0.0, 0.0]))
    >>> inside, outside = split(b.source("X", dp.Vectors(d=2), n=10), rule)
    """

    kind: ClassVar[str] = "PartitionByProjectedBall"
    reference: ClassVar[Reference] = Reference("parallel composition over a partition by released parameters",
                                               "mixtures.md", "2.4")
    center: Ref = attrs.field(converter=param)
    radius: Ref = attrs.field(converter=param)
    basis: Ref = attrs.field(converter=param)
    origin: Ref = attrs.field(converter=param)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        for slot in ("center", "radius", "basis", "origin"):
            released_type(getattr(self, slot), ctx, slot)
        return Inferred(PiecesT(rows, 2, SplitRule.VALUE), f"inside / outside a projected ball ({self.center.id})")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        X = np.asarray(ins[0], dtype=float)
        V = np.asarray(ctx.value(self.basis), dtype=float)
        o = np.asarray(ctx.value(self.origin), dtype=float).reshape(-1)
        c = np.asarray(ctx.value(self.center), dtype=float).reshape(-1)
        r = released_scalar(ctx.value(self.radius))
        if not (np.all(np.isfinite(V)) and np.all(np.isfinite(o)) and np.all(np.isfinite(c)) and math.isfinite(r)):
            return [X[:0], X]
        with np.errstate(all="ignore"):
            inside = np.linalg.norm((X - o) @ V - c, axis=1) <= r
        return [X[inside], X[~inside]]


@attrs.frozen(kw_only=True)
class GateBall(PostProcess):
    """Recursion's branch on a released condition: the first input (a ball ``(centre, radius)``) is kept
    when fewer than ``limit`` of the other inputs (earlier balls) are found, else the "not found" ball (NaN
    centre and radius).  With ``limit = k - 1`` splits, a breadth-first recursion never makes more than k
    parts (mixtures.md 5.2).  Post-processing: the cost of the gated branch is charged whatever it decides.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> g = GateBall(limit=1)(b.public([0.0, 1.0]), b.public([1.0, 2.0]))
    """

    kind: ClassVar[str] = "GateBall"
    reference: ClassVar[str] = "post-processing of released values (Dwork-Roth 2014 Prop. 2.1)"
    limit: int = attrs.field(converter=int)

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        found = sum(1 for ball in ins[1:] if _is_found(ball))
        ball = ins[0]
        if found < self.limit:
            return ball
        c = np.asarray(ball[0], dtype=float)
        return (np.full(c.shape, np.nan), math.nan)


def _is_found(ball: Any) -> bool:
    return isinstance(ball, tuple) and len(ball) == 2 and math.isfinite(released_scalar(ball[1]))
