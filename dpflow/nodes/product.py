"""The truncated mean of rows in [0, 1]^d used by PPDE, the private product-distribution estimator of
Kamath-Li-Singhal-Ullman 2019 (Alg. 7): rows with too many ones are zeroed, so the mean's l2
sensitivity is sqrt(2 tau)/n instead of sqrt(d)/n (gaussian.md 0.4).

Declared policies (never a data-dependent exception): entries are clipped into [0, 1] and NaN counts
as 0; a row with more than ``tau`` ones (or past a released radius) is replaced by the zero row.

>>> import numpy as np, dpflow as dp
>>> from dpflow import nodes as N
>>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
>>> m = N.GaussianMech()(N.TruncatedBinaryMean(tau=3)(b.source("X", dp.BooleanCube(d=10), n=100)))
>>> b.build(m=m).run({"X": np.eye(10)[np.arange(100) % 10]}, noise=dp.SeededNoise(0)).released["m"].shape
(10,)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from dpflow.domains import ReleasedScalar, Sym, Vectors
from dpflow.errors import DomainError
from dpflow.handles import Ref
from dpflow.nodes.base import EvalContext, InferContext, Query, need, released_scalar, released_type
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.params import optional_ref
from dpflow.nodes.rules import capped, changes_text, public_n
from dpflow.nodes.types import Inferred, RowsT, StatT, VType
from dpflow.references import Reference


def _opt_pos_int(x: Any) -> int | None:
    if x is None:
        return None
    v = int(x)
    if v != x or v < 1:
        raise ValueError(f"tau must be a positive integer, got {x!r}")
    return v


@attrs.frozen(kw_only=True)
class TruncatedBinaryMean(Query):
    """Mean over the public n of rows ``y = mask * |x - flip|`` with ``x`` in the box [0, 1]^d, where a row
    whose sum exceeds ``tau`` is replaced by the zero row (KLSU 2019 Alg. 7 truncation).

    ``mask`` and ``flip`` are released {0,1} vectors (``None``: all ones / all zeros).  For y, y' in
    [0,1]^d with sums <= tau, ``||y - y'||_2^2 <= sum |y_j - y'_j| <= sum y_j + sum y'_j <= 2 tau``:
    and ``||y - y'||_2^2 <= d`` in the box, so replace-one l2 ``sqrt(min(2 tau, d)) / n`` (gaussian.md 0.4),
    l1 ``min(2 tau, d) / n``, linf 1/n.  Entries are clipped into
    [0, 1] and NaN counts as 0 (declared policy).

    ``radius`` (a released scalar r, instead of ``tau``) sets the level at run time: when r^2 < d a row
    with ``2 sum y > r^2`` is zeroed (so ``||y - y'||_2^2 <= sum y + sum y' <= r^2``), when r^2 >= d none
    is (``||y - y'||_2^2 <= d <= r^2``); replace-one l2 ``r / n``, l1 ``r^2 / n``, linf 1/n.  A negative
    r counts as 0 (only all-zero rows are kept; sensitivity 0), a NaN one makes the sensitivity infinite.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> m = TruncatedBinaryMean(tau=3)(b.source("X", dp.BooleanCube(d=10), n=100))
    """

    kind: ClassVar[str] = "TruncatedBinaryMean"
    reference: ClassVar[Reference] = Reference("KLSU 2019 Alg. 7 (PPDE) truncation; sensitivity sqrt(2 tau)/n",
                                               "gaussian.md", "0.4")
    tau: int | None = attrs.field(default=None, converter=_opt_pos_int)
    mask: Ref | None = attrs.field(default=None, converter=optional_ref)
    flip: Ref | None = attrs.field(default=None, converter=optional_ref)
    radius: Ref | None = attrs.field(default=None, converter=optional_ref)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        dom = rows.domain
        if self.radius is not None and self.tau is not None:
            raise DomainError(ctx.node_id, "both tau and radius are set", "give a public tau or a released radius")
        if dom.box is None or dom.box[0] < 0.0 or dom.box[1] > 1.0:
            raise DomainError(ctx.node_id, f"rows must lie in [0, 1]^d, got {dom.describe()}",
                              "declare a BooleanCube source or Clip(box=(0, 1))")
        for slot, ref in (("mask", self.mask), ("flip", self.flip)):
            if ref is not None:
                t = released_type(ref, ctx, slot)
                if t.shape is not None and t.shape != (dom.d,):
                    raise DomainError(ctx.node_id, f"{slot} has shape {t.shape}, rows have d={dom.d}",
                                      f"pass a released vector of length {dom.d}")
        n = public_n(rows, ctx, "TruncatedBinaryMean")
        if self.radius is not None:
            t = released_type(self.radius, ctx, "radius")
            if t.shape is not None and t.shape != ():
                raise DomainError(ctx.node_id, f"radius refers to {self.radius.id} of shape {t.shape}",
                                  "pass a released scalar")
            r = Sym.ref(ReleasedScalar(self.radius.id))
            l2r = r * float(rows.stability) / n
            fe = FloatError("mean", Vectors(d=dom.d, l2_bound=Sym.const(math.sqrt(dom.d))), rows.size.sym(),
                            stability=rows.stability)
            return Inferred(StatT((dom.d,), rows.source, r.pow(2) * float(rows.stability) / n, l2r,
                                  Sym.const(float(rows.stability)) / n, float_error=fe),
                            f"truncated mean of [0,1]^{dom.d} rows, rows with 2 sum > r^2 zeroed (r = "
                            f"{self.radius.id}), n={rows.size.text()}, {changes_text(rows)}: l2 = r/n = {l2r.text()}")
        t_eff = dom.d if self.tau is None else min(self.tau, dom.d)
        sq = min(2 * t_eff, dom.d)  # also ||y - y'||^2 <= d in the unit box
        l2 = Sym.const(math.sqrt(sq) * rows.stability) / n
        l1 = Sym.const(float(sq) * rows.stability) / n
        linf = Sym.const(float(rows.stability)) / n
        fe = FloatError("mean", Vectors(d=dom.d, l2_bound=Sym.const(math.sqrt(t_eff))), rows.size.sym(),
                        stability=rows.stability)
        return Inferred(StatT((dom.d,), rows.source, l1, l2, linf, float_error=fe),
                        f"truncated mean of [0,1]^{dom.d} rows, tau={t_eff}, n={rows.size.text()}, "
                        f"{changes_text(rows)}: l2 = sqrt(min(2 tau, d))/n = {l2.text()}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        d = int(ins[0].shape[1])
        f = None if self.flip is None else np.asarray(ctx.value(self.flip), dtype=float).reshape(-1)[:d] != 0
        keep = None if self.mask is None else np.asarray(ctx.value(self.mask), dtype=float).reshape(-1)[:d] != 0
        tau = self.tau
        r2 = None
        if self.radius is not None:
            r2 = capped(released_scalar(ctx.value(self.radius))) ** 2  # radius policy

        def truncated(Z: np.ndarray) -> np.ndarray:
            X: np.ndarray = np.clip(np.nan_to_num(np.asarray(Z, dtype=float), nan=0.0), 0.0, 1.0)
            if f is not None:
                X = np.where(f[None, :], 1.0 - X, X)
            if keep is not None:
                X = X * keep[None, :]
            if tau is not None:
                X = X * (X.sum(axis=1) <= tau)[:, None]
            if r2 is not None and r2 < d:  # the margin keeps the rounding of r * r from admitting a row past the bound
                X = X * (2.0 * X.sum(axis=1) <= r2 * (1.0 - 1e-12))[:, None]
            return X

        out: np.ndarray = ctx.backend.tree_sum(ctx.backend.row_map(ins[0], truncated)) / ctx.backend.nrows(ins[0])
        return out


__all__ = [
    "TruncatedBinaryMean",
]
