"""Nodes on an ordinal domain [N] (N up to 2**62, held exactly in int64): exact counts over a public
partition (the Laplace histogram and t-histogram of Diakonikolas-Hardt-Schmidt 2015, Thm 3/4), the
counts of a released interval and the CDF knots of MERR's Update (DHS 2015 Fig. 2), and the
piecewise-linear CDF helpers the dyadic nodes and the estimators share.

Declared policy (never a data-dependent exception): ordinal values outside [0, N) are clamped to the
ends and NaN counts as 0 (:func:`ordinal_values`).

>>> import numpy as np, dpflow as dp
>>> from dpflow import nodes as N
>>> b = dp.PlanBuilder(budget=dp.PureDP(1.0))
>>> X = b.source("X", dp.Ordinal(N=10**18), n=1000)
>>> c = N.LaplaceMech()(N.OrdinalCounts(edges=[0, 10**15, 10**18], normalize=True)(X))
>>> r = b.build(c=c).run({"X": np.arange(1000) * 10**15}, noise=dp.SeededNoise(0)).released["c"]
>>> r.shape
(2,)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from dpflow.domains import integral
from dpflow.errors import DomainError, PlanTypeError
from dpflow.handles import Ref, Rows, Sensitive, Stat, param
from dpflow.nodes.base import EvalContext, InferContext, PostProcess, Query, need, released_type, text_of
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.rules import changes_text, count_sensitivities, dyadic_sensitivities, one_dim, public_n
from dpflow.nodes.types import DyadicT, Inferred, RowsT, StatT, VType
from dpflow.references import Reference

MAX_N = 2**62


def first_column(X: Any) -> np.ndarray:
    """One-dimensional rows as a vector: a vector as it is, an (n, d) array's first column.

    >>> first_column(np.array([[3, 9], [4, 9]])).tolist()
    [3, 4]
    """
    a = np.asarray(X)
    out: np.ndarray = a.reshape(-1) if a.ndim <= 1 else a[:, 0]
    return out


def ordinal_values(X: Any, N: int) -> np.ndarray:
    """One-dimensional rows (:func:`first_column`) as exact int64 values in ``[0, N)``, the declared policy of
    an ``Ordinal(N)`` source: NaN -> 0, other values floored and clamped to the ends (+-inf included).  Unsigned
    integers are clamped before the cast to int64 (a uint64 above 2^63 would wrap to a negative value); a float
    at or above ``float(N)`` (which rounds N when N > 2^53) is N - 1.

    >>> ordinal_values(np.array([[-5.0], [np.nan], [3.7], [np.inf]]), 10).tolist()
    [0, 0, 3, 9]
    >>> ordinal_values(np.array([2**64 - 1], dtype=np.uint64), 2**62).tolist() == [2**62 - 1]
    True
    """
    a = first_column(X)
    if a.dtype.kind == "u":  # clamped first: the cast of a uint64 above 2^63 would wrap
        a = np.minimum(a, np.uint64(N - 1))
    if a.dtype.kind in "iub":
        return np.clip(a.astype(np.int64), 0, N - 1)
    f = np.floor(np.clip(np.nan_to_num(a.astype(float)), 0.0, float(N)))  # NaN -> 0, +-inf -> +-max float
    out: np.ndarray = np.where(f >= float(N), N - 1, f.astype(np.int64))
    return out


# --------------------------------------------------------------------------- exact ordinal counts


def _int_edges(e: Any) -> tuple[int, ...]:
    out = tuple(int(v) for v in e)
    if any(int(v) != v for v in e):
        raise ValueError("OrdinalCounts edges must be integers")
    return out


@attrs.frozen(kw_only=True)
class OrdinalCounts(Query):
    """Exact counts of ordinal values over a public partition of [N] given by integer ``edges``.

    Bin i holds the integers ``edges[i] <= x < edges[i+1]``; ``edges`` must start at 0 and end at N
    (N <= 2**62, held exactly in int64).  Values outside [0, N) were clamped to the ends (declared
    policy).  A record lies in exactly one bin: replace-one l1 2, l2 sqrt(2), linf 1; add/remove 1.
    ``normalize=True`` divides by the public n.

    Floating-point error (for the exact lattice release of Laplace/GaussianMech): the counts come from
    an integer ``bincount`` and are exact as floats (a count is at most the number of rows, far below
    2**53), so their error is zero (``FloatError`` kind ``exact``); normalised, each entry is one
    correctly rounded division ``c_i / n``, off by at most ``u c_i / n`` with ``sum c_i = n``: error
    at most u = 2**-53 in l2 and l1 (kind ``freq``).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    >>> c = OrdinalCounts(edges=[0, 10, 10**18])(b.source("X", dp.Ordinal(N=10**18), n=10))
    """

    kind: ClassVar[str] = "OrdinalCounts"
    reference: ClassVar[str] = "DHS 2015 Thm 3/4 (Laplace histogram, t-histogram): one record moves one unit"
    edges: tuple[int, ...] = attrs.field(converter=_int_edges)
    normalize: bool = False

    def __attrs_post_init__(self) -> None:
        e = self.edges
        if len(e) < 2 or e[0] != 0 or e[-1] > MAX_N or any(b <= a for a, b in zip(e, e[1:], strict=False)):
            raise ValueError("OrdinalCounts edges must be strictly increasing integers from 0 to N <= 2**62")

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        one_dim(rows, ctx, "OrdinalCounts")
        l1, l2, linf = count_sensitivities(rows)
        if self.normalize:
            n = public_n(rows, ctx, "a normalised OrdinalCounts")
            l1, l2, linf = (None if b is None else b / n for b in (l1, l2, linf))
        k = len(self.edges) - 1
        fe = FloatError("freq" if self.normalize else "exact", rows.domain, rows.size.sym())
        return Inferred(StatT((k,), rows.source, l1, l2, linf, float_error=fe),
                        f"OrdinalCounts, {k} public bins of [{self.edges[-1]}], {changes_text(rows)}: "
                        f"l1 {text_of(l1)}, l2 {text_of(l2)}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        e = np.asarray(self.edges, dtype=np.int64)
        N = self.edges[-1]

        def bin_of(Z: np.ndarray) -> np.ndarray:  # exact in int64; the bin index is a small integer
            out: np.ndarray = (np.searchsorted(e, ordinal_values(Z, N), side="right") - 1).astype(float)
            return out

        k = len(e) - 1
        counts = ctx.backend.histogram(ctx.backend.row_map(ins[0], bin_of), np.arange(k + 1, dtype=float))
        return counts / ctx.backend.nrows(ins[0]) if self.normalize else counts


def _check_table(rows: RowsT, tables: Sequence[VType], ctx: InferContext) -> None:
    """Refuse a second input of IntervalCounts that is not one DyadicCounts of rows like ``rows``: a table of
    2^(L+1) - 2 dyadic counts from the same source with the sensitivities those rows give them."""
    t = tables[0]
    size = t.shape[0] if isinstance(t, DyadicT) and len(t.shape) == 1 else 0
    L = (size + 2).bit_length() - 2
    if len(tables) != 1 or not isinstance(t, DyadicT) or L < 1 or size != 2 ** (L + 1) - 2 \
            or (t.source, t.l1, t.l2, t.linf) != (rows.source, *dyadic_sensitivities(rows, L)):
        raise PlanTypeError(ctx.node_id, "IntervalCounts reads its counts from a second input only when it is "
                                         "DyadicCounts(N) of its rows",
                            "pass (X, DyadicCounts(N)(X)) or only the rows X")


@attrs.frozen(kw_only=True)
class IntervalCounts(Query):
    """The counts of ``[0, a)`` and ``[a, b]`` for a released interval ``[a, b]`` (MERR's Update).

    A replaced record can leave one of the two cells and enter the other: l1 2 (DHS's code assumed 1,
    valid only under add/remove: spec issue U1), linf 1; add/remove: 1.  ``normalize`` (default)
    divides by the public n.  Values outside [0, N) were clamped by the source.

    ``IntervalCounts(interval=J)(X)`` counts in a pass over the rows; ``IntervalCounts(interval=J)(X, table)``,
    ``table = DyadicCounts(N)(X)``, reads the same counts from the table's sorted sample by binary search
    (MERR's rounds: one sort, no pass per round).  The planner checks that ``table`` has the type DyadicCounts
    gives these rows (same source, same changes and stability): the counts of its sample then have the
    sensitivities above whichever rows of that type it was built from (each rule is the dyadic one over L).

    Floating-point error (for the exact lattice release of MERR's weights): the two counts are
    ``count_nonzero`` integers, exact as floats (at most the number of rows, far below 2**53): error
    zero (``FloatError`` kind ``exact``); normalised, each is one correctly rounded division by n of
    counts summing to at most n: error at most u = 2**-53 in l2 and l1 (kind ``freq``).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    >>> c = IntervalCounts(interval=b.public([2, 5]))(b.source("X", dp.Ordinal(N=8), n=10))
    """

    kind: ClassVar[str] = "IntervalCounts"
    reference: ClassVar[Reference] = Reference("DHS 2015 Fig. 2 Update; replace-one l1 2 (issue U1)",
                                               "sparse_discrete_heavy.md", "4.3")
    interval: Ref = attrs.field(converter=param)
    normalize: bool = True

    def __call__(self, x: Sensitive[Rows], table: Sensitive[Stat] | None = None) -> Sensitive[Stat]:
        return Sensitive(x.builder.add(self, (x.id,) if table is None else (x.id, table.id)), x.builder)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins[:1], RowsT, ctx, "sensitive rows")
        one_dim(rows, ctx, "IntervalCounts")
        if len(ins) > 1:
            _check_table(rows, ins[1:], ctx)
        t = released_type(self.interval, ctx, "interval")
        if t.shape is not None and t.shape != (2,):
            raise DomainError(ctx.node_id, f"interval has shape {t.shape}", "pass a released [a, b] pair")
        l1, l2, linf = count_sensitivities(rows)
        if self.normalize:
            n = public_n(rows, ctx, "normalised IntervalCounts")
            l1, l2, linf = (None if b is None else b / n for b in (l1, l2, linf))
        fe = FloatError("freq" if self.normalize else "exact", rows.domain, rows.size.sym())
        return Inferred(StatT((2,), rows.source, l1, l2, linf, float_error=fe),
                        f"counts of [0, a) and [a, b], {changes_text(rows)}: l1 {text_of(l1)}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        iv = np.asarray(ctx.value(self.interval)).reshape(-1)
        a, b = int(iv[0]), int(iv[1])
        X = ins[0]

        def cells(Z: np.ndarray) -> np.ndarray:  # indicators of x < a and x <= b (integer comparisons)
            x = first_column(Z)
            return np.stack([x < a, x <= b], axis=1).astype(float)

        if len(ins) > 1:  # the table's sorted sample: x < a and x < b + 1, integers in [0, 2**62)
            below, upto = (float(np.searchsorted(ins[1].x, min(max(v, 0), MAX_N))) for v in (a, b + 1))
        else:
            below, upto = (float(v) for v in ctx.backend.tree_sum(ctx.backend.row_map(X, cells)))  # exact counts
        out = np.array([below, max(upto - below, 0.0)])
        return out / ctx.backend.nrows(X) if self.normalize else out


# --------------------------------------------------------------------------- CDF knots (MERR's Update)


def knots_cdf_at(P: np.ndarray, F: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The piecewise-linear CDF with knots (P, F) at integer points t (exact int64 offsets; flat
    outside the knots).

    >>> knots_cdf_at(np.array([-1, 3]), np.array([0.0, 1.0]), np.array([-1, 0, 3])).tolist()
    [0.0, 0.25, 1.0]
    """
    t = np.clip(np.asarray(t, dtype=np.int64), P[0], P[-1])
    k = np.minimum(np.searchsorted(P, t, side="right") - 1, len(P) - 2)  # >= 0: t >= P[0]
    span = (P[k + 1] - P[k]).astype(float)
    out: np.ndarray = F[k] + (F[k + 1] - F[k]) * ((t - P[k]).astype(float) / span)
    return out


def uniform_cdf(N: int) -> tuple[np.ndarray, np.ndarray]:
    """The uniform CDF on [N] as knots: positions (-1, N-1), values (0, 1).

    >>> uniform_cdf(4)[0].tolist()
    [-1, 3]
    """
    return np.array([-1, N - 1], dtype=np.int64), np.array([0.0, 1.0])


def cdf_knots(value: Any) -> tuple[np.ndarray, np.ndarray]:
    """A released CDF ``(positions, values)`` as knot arrays: int64 positions, values with NaN as 0 and
    +-inf as 1 / 0 (declared policy)."""
    P = np.asarray(value[0], dtype=np.int64)
    F = np.nan_to_num(np.asarray(value[1], dtype=float), nan=0.0, posinf=1.0, neginf=0.0)
    return P, F


def add_knots(N: int, cdf: Any, interval: Any, weights: Any) -> tuple[np.ndarray, np.ndarray]:
    """MERR's Update as post-processing: add the knots ``(a - 1, w_left)`` and ``(b, w_left + w_in)``
    to the CDF (only strictly inside (-1, N-1) and not already knots; DHS's code).

    >>> P, F = add_knots(8, uniform_cdf(8), np.array([2, 5]), np.array([0.25, 0.5]))
    >>> P.tolist(), F.tolist()
    ([-1, 1, 5, 7], [0.0, 0.25, 0.75, 1.0])
    """
    P, F = cdf_knots(cdf)
    iv = np.asarray(interval).reshape(-1)
    w = np.nan_to_num(np.asarray(weights, dtype=float).reshape(-1), nan=0.0)
    a, b = int(iv[0]), int(iv[1])
    for p, f in ((a - 1, float(w[0])), (b, float(w[0] + w[1]))):
        if -1 < p < N - 1 and not np.any(P == p):
            k = int(np.searchsorted(P, p))
            P = np.insert(P, k, np.int64(p))
            F = np.insert(F, k, f)
    return P, F


@attrs.frozen(kw_only=True)
class AddKnots(PostProcess):
    """Post-processing node of MERR's Update: ``AddKnots(N)(interval, weights)`` starts from the
    uniform CDF on [N]; ``AddKnots(N)(cdf, interval, weights)`` extends a released CDF (:func:`add_knots`).
    The value is ``(positions int64, cdf values)``.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    >>> c = AddKnots(N=8)(b.public([2, 5]), b.public([0.25, 0.5]))
    """

    kind: ClassVar[str] = "AddKnots"
    reference: ClassVar[str] = "DHS 2015 Fig. 2 Update (post-processing of the released weights)"
    N: int = attrs.field(converter=integral)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        if len(ins) not in (2, 3):
            raise PlanTypeError(ctx.node_id, f"AddKnots takes 2 or 3 inputs, got {len(ins)}",
                                "pass (interval, weights) or (cdf, interval, weights)")
        return super().infer(ins, ctx)

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        cdf = uniform_cdf(self.N) if len(ins) == 2 else ins[0]
        return add_knots(self.N, cdf, ins[-2], ins[-1])


__all__ = [
    "MAX_N", "AddKnots", "IntervalCounts", "OrdinalCounts", "add_knots", "cdf_knots", "first_column", "knots_cdf_at",
    "ordinal_values",
    "uniform_cdf",
]
