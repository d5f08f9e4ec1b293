"""Coordinate truncation by a public or released bound, and the mean of the truncated rows.

``TruncatedMean(bound=R)`` is CWZ's ``(1/n) sum_i Pi_R(x_i)`` (coordinatewise clipping to
``[-R, R]``, Cai-Wang-Zhang 2021 Alg. 3.1 / 3.3).  With a public R it equals
``Mean()(Clip(box=(-R, R))(X))``; the node exists because R may be *released* (a data-driven
radius from :mod:`dpflow.nodes.quantile`), which a box domain cannot carry.  Replacing one row
moves the mean by at most ``2R/n`` in l-infinity, ``2R sqrt(d)/n`` in l2 and ``2R d/n`` in l1
(times the stability).  NaN entries count as 0 and infinities clip to +-R (declared policy).

>>> import dpflow as dp
>>> from dpflow import nodes as N
>>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
>>> m = N.GaussianMech()(N.TruncatedMean(bound=3.0)(b.source("X", dp.Vectors(d=4), n=100)))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import attrs

from dpflow.domains import ReleasedScalar, Sym, Vectors
from dpflow.errors import DomainError
from dpflow.handles import Ref
from dpflow.nodes.base import EvalContext, InferContext, Query, need, released_scalar, released_type
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.params import released_or_radius
from dpflow.nodes.rules import capped, public_n
from dpflow.nodes.transforms import clip_box
from dpflow.nodes.types import Inferred, RowsT, StatT, VType


@attrs.frozen(kw_only=True)
class TruncatedMean(Query):
    """Mean of the rows clipped coordinatewise to ``[-bound, bound]`` (public or released bound).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> m = TruncatedMean(bound=1.0)(b.source("X", dp.Vectors(d=2), n=10))
    """

    kind: ClassVar[str] = "TruncatedMean"
    reference: ClassVar[str] = "Cai-Wang-Zhang 2021 Alg. 3.1 / 3.3 (Pi_R coordinate truncation); replace-one 2R/n"
    bound: float | Ref = attrs.field(converter=released_or_radius)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        n = public_n(rows, ctx, "TruncatedMean (divides by n)")
        if isinstance(self.bound, Ref):
            t = released_type(self.bound, ctx, "bound")
            if t.shape is not None and t.shape != ():
                raise DomainError(ctx.node_id, f"bound refers to {self.bound.id} of shape {t.shape}",
                                  "pass a released scalar")
            R = Sym.ref(ReleasedScalar(self.bound.id))
        else:
            R = Sym.const(self.bound)
        d = rows.domain.d
        unit = R * (2.0 * rows.stability) / n
        # rows in [-R, R]^d have l2 norm <= R sqrt(d): the float-error bound of their mean
        fe = FloatError("mean", Vectors(d=d, l2_bound=R * math.sqrt(d)), rows.size.sym(), stability=rows.stability)
        stat = StatT((d,), rows.source, unit * float(d), unit * math.sqrt(d), unit, float_error=fe)
        return Inferred(stat, f"mean of rows clipped to [-{R.text()}, {R.text()}]^{d}, n={rows.size.text()}: "
                              f"linf = stability*2R/n = {unit.text()}, l2 = linf*sqrt(d)")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        X = ins[0]
        R = self.bound
        if isinstance(R, Ref):
            R = capped(released_scalar(ctx.value(R)))  # declared policy for a released bound
        r = R
        C = ctx.backend.row_map(X, lambda A: clip_box(A, -r, r))
        return ctx.backend.tree_sum(C) / ctx.backend.nrows(X)
