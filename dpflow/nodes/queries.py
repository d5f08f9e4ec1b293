"""Queries: sensitive rows in, a sensitive aggregate with derived sensitivities out.

Sensitivities are with respect to one change of one record of the source: a
replaced row moves a sum of row features by at most the domain's diameter, an
added or removed row by its norm, and ``stability`` rows may change.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from dpflow.domains import Sym
from dpflow.errors import DomainError
from dpflow.handles import Ref, param
from dpflow.nodes.base import (
    EvalContext,
    InferContext,
    Query,
    change_bound,
    float_rows,
    need,
    released_type,
    text_of,
)
from dpflow.nodes.fixedpoint import FixedPoint, sum_units
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.rules import changes_text, count_sensitivities, finite_edges, public_n, sum_sensitivities
from dpflow.nodes.types import Inferred, RowsT, StatT, VType
from dpflow.references import Reference


def _div(b: Sym | None, n: Sym) -> Sym | None:
    return None if b is None else b / n


@attrs.frozen(kw_only=True)
class Sum(Query):
    """Sum of the rows.  Sensitivity: diameter (replace) or norm (add/remove) of a row.

    For an exact noise source the sum is computed exactly in fixed point (:mod:`dpflow.nodes.fixedpoint`:
    rows quantised to a public power-of-two grid, summed in integers), so its lattice release adds an error
    term that does not grow with the number of rows, which may be private (``FloatError`` kind
    ``fixed_sum``); continuous noise adds to the float sum.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> s = dp.nodes.Sum()(dp.nodes.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2), n=10)))
    """

    kind: ClassVar[str] = "Sum"
    reference: ClassVar[str] = ("sensitivity (Dwork-Roth 2014 Def 3.1) of a sum of bounded rows: a replaced row "
                                "moves it by at most the domain's diameter, an added or removed row by its norm")

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        dom = rows.domain
        l1, l2, linf, rule = sum_sensitivities(rows)
        stat = StatT((dom.d,), rows.source, l1, l2, linf, float_error=_fixed_error(rows))
        return Inferred(stat, f"Sum over {dom.describe()}, {changes_text(rows)}: l2 {text_of(l2)}, l1 {text_of(l1)}"
                        + rule)

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        if ctx.noise.exact:
            input_type = ctx.input_type(0)
            assert isinstance(input_type, RowsT)
            fe = _fixed_error(input_type)
            e = fe.grid(ctx.public_values(fe.refs()))
            if e is not None:  # (without a finite grid the error bound is infinite: the release is NaN)
                return FixedPoint(ctx.backend.exact_sum(ins[0], functools.partial(sum_units, exponent=e)), e)
        return ctx.backend.tree_sum(ins[0])


def _fixed_error(rows: RowsT) -> FloatError:
    """The error rule of a fixed-point sum of ``rows``: the one statement ``Sum.infer`` and ``Sum.evaluate`` share."""
    return FloatError("fixed_sum", rows.domain, stability=rows.stability)


@attrs.frozen(kw_only=True)
class Mean(Query):
    """Mean of the rows over a public row count.

    Replace-one: l2 sensitivity ``stability * diameter / n`` (e.g. ``2r/n`` for rows
    in a ball of radius r).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> m = dp.nodes.Mean()(dp.nodes.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2), n=10)))
    """

    kind: ClassVar[str] = "Mean"
    reference: ClassVar[str] = ("sensitivity (Dwork-Roth 2014 Def 3.1) of a sum of bounded rows over a public n "
                                "(replace-one): diameter / n")

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        n = public_n(rows, ctx, "Mean")
        dom = rows.domain
        s1, s2, sinf, rule = sum_sensitivities(rows)  # replace-one only (public_n): the diameters
        l1, l2, linf = _div(s1, n), _div(s2, n), _div(sinf, n)
        fe = FloatError("mean", dom, n, stability=rows.stability)
        stat = StatT((dom.d,), rows.source, l1, l2, linf, float_error=fe)
        return Inferred(
            stat,
            f"Mean over {dom.describe()}, n={rows.size.text()}, {changes_text(rows)}: "
            f"l2 = stability*diameter/n = {text_of(l2)}{rule}",
        )

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        X = ins[0]
        return ctx.backend.tree_sum(X) / ctx.backend.nrows(X)


@attrs.frozen(kw_only=True)
class Count(Query):
    """Number of rows: sensitivity 0 under replace-one (n is public), 1 per add/remove.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="add_remove")
    >>> c = dp.nodes.Count()(b.source("X", dp.Vectors(d=2)))
    """

    kind: ClassVar[str] = "Count"
    reference: ClassVar[str] = ("counting query: sensitivity 1 per added or removed record (Dwork-Roth 2014 "
                                "Example 3.1); 0 under replace-one, where n is public")

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        one = Sym.const(1.0)
        s = change_bound(rows, Sym.const(0.0), one)
        stat = StatT((), rows.source, s, s, s, float_error=FloatError("exact", rows.domain))
        return Inferred(stat, f"Count, {changes_text(rows)}: sensitivity {text_of(s)}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        return np.float64(ctx.backend.nrows(ins[0]))


def centred_radius(rows: RowsT, center: Ref | None, ctx: InferContext) -> Sym | None:
    """The bound ``r`` on ``||x - c||`` that a second moment about ``center`` (the origin when ``None``)
    may use: the rows' l2 norm about the origin, or their declared l2 bound when they were clipped around
    that same released centre; ``None`` (unbounded) otherwise.  Refuses a centre of the wrong dimension.
    Shared by :class:`SecondMoment` and the unnormalised ``Gram``."""
    dom = rows.domain
    if center is None:
        return dom.norm_l2()
    ct = released_type(center, ctx, "center")
    if ct.shape is not None and ct.shape != (dom.d,):
        raise DomainError(ctx.node_id, f"center {center.id} has shape {ct.shape}, rows have d={dom.d}",
                          "pass a centre of the rows' dimension")
    return dom.l2_bound if dom.center == center.id else None


def centred_rows(X: Any, center: Ref | None, ctx: EvalContext) -> Any:
    """The rows as floats minus the released centre (row maps through the backend)."""
    rows = float_rows(ctx, X)
    if center is None:
        return rows
    c = np.asarray(ctx.value(center), dtype=float)
    return ctx.backend.row_map(rows, lambda Z: Z - c)


@attrs.frozen(kw_only=True)
class SecondMoment(Query):
    """``(1/n) sum (x - c)(x - c)^T`` about the origin or a public/released centre.

    Replace-one Frobenius sensitivity ``stability * sqrt(2) * r^2 / n`` for rows with
    ``||x - c|| <= r``: ``||ww^T - vv^T||_F^2 = ||w||^4 + ||v||^4 - 2 (w.v)^2 <= 2 r^4``
    (gaussian.md 0.4).  l1 sensitivity over the upper triangle (the entries a mechanism noises and
    mirrors): ``stability * (d + 1) * r^2 / n``, since the upper triangle of ``ww^T`` has l1 norm
    ``(||w||_1^2 + ||w||_2^2) / 2 <= (d + 1) r^2 / 2`` (``||w||_1 <= sqrt(d) ||w||_2``) and the triangle
    inequality adds the two rows'.  Clip around the same centre first.  With a released mean as
    the centre this is a covariance.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> S = dp.nodes.SecondMoment()(dp.nodes.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2), n=10)))
    """

    kind: ClassVar[str] = "SecondMoment"
    reference: ClassVar[Reference] = Reference("KLSU 2019 Alg. 1 (NaivePCE) sensitivity; tight constant sqrt(2)",
                                               "gaussian.md", "0.4")
    center: Ref | None = attrs.field(default=None, converter=param)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        n = public_n(rows, ctx, "SecondMoment")
        dom = rows.domain
        r = centred_radius(rows, self.center, ctx)
        fro = None if r is None else r.pow(2) * (math.sqrt(2.0) * rows.stability) / n
        l1 = None if r is None else r.pow(2) * ((dom.d + 1) * rows.stability) / n
        fe = FloatError("gram", dom, n, None if self.center is None else self.center.id, stability=rows.stability)
        stat = StatT((dom.d, dom.d), rows.source, l1, fro, None, symmetric=True, float_error=fe)
        around = "origin" if self.center is None else self.center.id
        return Inferred(
            stat,
            f"SecondMoment about {around} over {dom.describe()}, n={rows.size.text()}: "
            f"Frobenius = stability*sqrt(2)*r^2/n = {text_of(fro)}; "
            f"l1 (upper triangle) = stability*(d+1)*r^2/n = {text_of(l1)}",
        )

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        X = centred_rows(ins[0], self.center, ctx)
        return ctx.backend.gram(X) / ctx.backend.nrows(X)


@attrs.frozen(kw_only=True)
class Histogram(Query):
    """Counts over public bins ``edges`` (K = len(edges) - 1 bins) of one-dimensional rows.

    Values below the first edge count in the first bin, above the last in the last
    bin, NaN in the first bin (declared policy).  Replace-one: l1 2, l2 sqrt(2),
    linf 1 (times the stability); add/remove: 1.  ``normalize=True`` divides by the
    public n.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> h = dp.nodes.Histogram(edges=[0, 1, 2, 3])(b.source("X", dp.Ordinal(N=3), n=10))
    """

    kind: ClassVar[str] = "Histogram"
    reference: ClassVar[str] = "DHS 2015 Thm 3 (Laplace histogram); a replaced record moves one unit between two bins"
    edges: tuple[float, ...] = attrs.field(converter=finite_edges)
    normalize: bool = False

    def __attrs_post_init__(self) -> None:
        e = np.asarray(self.edges)
        if e.size < 2 or not np.all(np.diff(e) > 0):
            raise ValueError("Histogram edges must be at least two strictly increasing numbers")

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        if rows.domain.d != 1:
            raise DomainError(ctx.node_id, f"Histogram needs one-dimensional rows, got d={rows.domain.d}",
                              "select one column first")
        l1, l2, linf = count_sensitivities(rows)
        if self.normalize:
            n = public_n(rows, ctx, "a normalised Histogram")
            l1, l2, linf = _div(l1, n), _div(l2, n), _div(linf, n)
        k = len(self.edges) - 1
        return Inferred(
            StatT((k,), rows.source, l1, l2, linf,
                  float_error=FloatError("freq" if self.normalize else "exact", rows.domain, rows.size.sym())),
            f"Histogram, {k} public bins, {changes_text(rows)}: l1 {text_of(l1)}, l2 {text_of(l2)}",
        )

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        X = ins[0]
        counts = ctx.backend.histogram(ctx.backend.row_map(X, _first_column), np.asarray(self.edges, dtype=float))
        return counts / ctx.backend.nrows(X) if self.normalize else counts


def _first_column(Z: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.asarray(Z)[:, 0]
    return out
