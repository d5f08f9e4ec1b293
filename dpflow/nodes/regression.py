"""Least-squares regression nodes: the clipped gradient step of noisy gradient descent and noisy
iterative hard thresholding (Cai-Wang-Zhang 2021 Alg. 4.1 and 4.2), the projection of the
coefficients onto the feasible set, and the ridge solve of sufficient-statistics perturbation.

Rows are ``[x, y]`` (d + 1 columns, the response last).  The gradient step enforces its own
bounds, so its sensitivity does not depend on how the rows were declared: a row with an entry that is
not a finite number (a missing x or y: NaN, or +-inf) adds nothing (its term is 0, as a row that the
sufficient-statistics fits clip to the origin), every coordinate of x
is clipped to ``[-c_x, c_x]``, the coefficients are projected onto the feasible
set (then ``||beta||_1 <= K``), and y is clipped to ``[-R, R]`` with ``R = A - c_x K`` so that the
residual obeys ``|x' beta - y| <= c_x K + R = A`` (the residual is also clipped to ``[-A, A]``,
which guarantees the bound in floating point).  One row's gradient ``r x`` then has
``|r x_j| <= A c_x``, so replacing one row moves the step ``beta - eta * mean(r x)`` by at most

* ``2 eta c_x A / n`` in l-infinity (CWZ's lambda = eta B / n with B = 2 c_x (R + c_x K)),
* ``2 eta c_x sqrt(d) A / n`` in l2 (CWZ Alg. 4.1, B2 = c_x sqrt(d) (R + c_x sqrt(d) C)),
* ``2 eta c_x d A / n`` in l1,

where ``K = C sqrt(s)`` for s-sparse coefficients in the l2 ball of radius C, ``C sqrt(d)`` for the
dense l2 ball and ``C`` for the l1 ball (sparse_discrete_heavy.md 3.4-3.5).

>>> import dpflow as dp
>>> from dpflow import nodes as N
>>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
>>> Z = b.source("Z", dp.Vectors(d=4), n=1000)
>>> step = N.GradientStep(beta=b.public([0.0] * 3), eta=0.5, x_bound=1.0, residual_bound=3.0, radius=2.0)(Z)
>>> plan = b.build(beta=N.ProjectCoef(radius=2.0)(N.GaussianMech()(step)))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from dpflow.domains import ReleasedScalar, Sym, Vectors
from dpflow.errors import DataError, DomainError
from dpflow.handles import Ref, param
from dpflow.nodes.base import (
    EvalContext,
    InferContext,
    PostProcess,
    Query,
    SquareInput,
    finite_or_zero,
    float_rows,
    need,
    released_scalar,
    released_type,
    text_of,
)
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.params import positive, positive_radius, released_or_positive, released_or_positive_radius
from dpflow.nodes.rules import capped, public_n, released_scale
from dpflow.nodes.transforms import clip_box
from dpflow.nodes.types import Inferred, ReleasedT, RowsT, StatT, VType
from dpflow.references import Reference


def _ball(x: Any) -> str:
    if x not in ("l2", "l1"):
        raise ValueError(f"ball must be 'l2' or 'l1', got {x!r}")
    return str(x)


def _opt_sparsity(x: Any) -> int | None:
    if x is None:
        return None
    if isinstance(x, bool) or int(x) != x or int(x) < 1:
        raise ValueError(f"sparsity must be a positive integer, got {x!r}")
    return int(x)


def l1_bound(ball: str, radius: float, sparsity: int | None, d: int) -> float:
    """``K``: the largest ``||beta||_1`` over the feasible set (l2 ball of ``radius``, s-sparse when
    ``sparsity`` is set; or the l1 ball).  ``||beta||_1 <= sqrt(#nonzeros) ||beta||_2`` (Cauchy-Schwarz).

    >>> l1_bound("l2", 2.0, 4, 100), l1_bound("l1", 2.0, None, 100)
    (4.0, 2.0)
    """
    if ball == "l1":
        return radius
    return radius * math.sqrt(min(sparsity or d, d))


def project_l1(v: np.ndarray, radius: float) -> np.ndarray:
    """Euclidean projection onto the l1 ball (Duchi, Shalev-Shwartz, Singer & Chandra 2008, Fig. 1).

    >>> project_l1(np.array([3.0, -1.0]), 2.0)
    array([ 2., -0.])
    """
    a = np.abs(v)
    if a.sum() <= radius:
        return v.copy()
    u = np.sort(a)[::-1]
    css = np.cumsum(u)
    k = np.arange(1, u.size + 1)
    rho = int(np.nonzero(u * k > css - radius)[0][-1])
    theta = (css[rho] - radius) / (rho + 1.0)
    out: np.ndarray = np.sign(v) * np.maximum(a - theta, 0.0)
    # floating point: shrink once more if the sum still exceeds the radius
    s = np.abs(out).sum()
    if s > radius:
        out *= radius / s * (1.0 - 4.0 * np.finfo(float).eps)
    return out


def project_coef(beta: np.ndarray, ball: str, radius: float, sparsity: int | None) -> np.ndarray:
    """Keep the ``sparsity`` largest entries (ties by index), then project onto the ball.

    Non-finite entries count as 0 (the input is released, so this is only a safeguard).

    >>> project_coef(np.array([3.0, 0.1, -4.0]), "l2", 1.0, 1)
    array([ 0.,  0., -1.])
    """
    b = finite_or_zero(beta).reshape(-1)
    if sparsity is not None and sparsity < b.size:
        keep = np.argsort(-np.abs(b), kind="stable")[:sparsity]
        mask = np.zeros(b.size, dtype=bool)
        mask[keep] = True
        b = np.where(mask, b, 0.0)
    if ball == "l1":
        return project_l1(b, radius)
    nrm = float(np.linalg.norm(b))
    if nrm > radius:
        b = b * (radius / nrm)
        while float(np.linalg.norm(b)) > radius:
            b = b * (1.0 - 4.0 * np.finfo(float).eps)
    out: np.ndarray = b
    return out


@attrs.frozen(kw_only=True)
class GradientStep(Query):
    """``beta - eta * (1/n) sum_i (x_i' beta - y_i) x_i`` on rows ``[x, y]`` with the bounds enforced
    as described in the module docstring; ``beta`` is a released (or public) vector, projected
    onto the feasible set first.

    ``residual_bound`` A may be released (a data-driven truncation); y is clipped to
    ``A - c_x K``.  Replace-one neighbours with a public n.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> Z = b.source("Z", dp.Vectors(d=3), n=100)
    >>> g = GradientStep(beta=b.public([0.0, 0.0]), eta=0.5, x_bound=1.0, residual_bound=2.0, radius=1.0)(Z)
    """

    kind: ClassVar[str] = "GradientStep"
    reference: ClassVar[Reference] = Reference("Cai-Wang-Zhang 2021 Alg. 4.1 / 4.2 (least-squares gradient with "
                                               "truncated responses); sensitivity derived in "
                                               "dpflow/nodes/regression.py", "sparse_discrete_heavy.md", "3.4-3.5")
    beta: Ref = attrs.field(converter=param)
    eta: float = attrs.field(converter=positive_radius)
    x_bound: float = attrs.field(converter=positive_radius)
    residual_bound: float | Ref = attrs.field(converter=released_or_positive_radius)
    radius: float = attrs.field(converter=positive_radius)
    ball: str = attrs.field(default="l2", converter=_ball)
    sparsity: int | None = attrs.field(default=None, converter=_opt_sparsity)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows [x, y]")
        d = rows.domain.d - 1
        if d < 1:
            raise DomainError(ctx.node_id, "rows must be [x, y] with at least one feature",
                              "pass rows with d + 1 >= 2 columns, the response last")
        if not isinstance(self.beta, Ref):
            raise DomainError(ctx.node_id, "beta must be a released handle", "wrap a constant with public()")
        bt = released_type(self.beta, ctx, "beta")
        if bt.shape is not None and bt.shape != (d,):
            raise DomainError(ctx.node_id, f"beta {self.beta.id} has shape {bt.shape}, rows have d={d} features",
                              f"pass a coefficient vector of shape ({d},)")
        if self.sparsity is not None and self.sparsity > d:
            raise DomainError(ctx.node_id, f"sparsity s={self.sparsity} exceeds d={d}", "choose s <= d")
        if isinstance(self.residual_bound, Ref):
            rt = released_type(self.residual_bound, ctx, "residual_bound")
            if rt.shape is not None and rt.shape != ():
                raise DomainError(ctx.node_id, "residual_bound must be a released scalar", "release a scalar")
        n = public_n(rows, ctx, "GradientStep (divides by n)")
        K = l1_bound(self.ball, self.radius, self.sparsity, d)
        A = Sym.ref(ReleasedScalar(self.residual_bound.id)) if isinstance(self.residual_bound, Ref) else Sym.const(
            self.residual_bound)
        unit = A * (2.0 * self.eta * self.x_bound * rows.stability) / n
        linf, l2, l1 = unit, unit * math.sqrt(d), unit * float(d)
        # each row's term x_i clip(residual_i) has l2 norm <= c_x sqrt(d) A (clipping is exact); the step
        # is beta - eta * (their mean), with ||beta||_2 <= radius after the projection (||.||_2 <= ||.||_1)
        row = A * (self.x_bound * math.sqrt(d))
        fe = FloatError("step", Vectors(d=d, l2_bound=row), rows.size.sym(), eta=self.eta, offset=self.radius,
                        stability=rows.stability)
        stat = StatT((d,), rows.source, l1, l2, linf, float_error=fe)
        return Inferred(stat, f"gradient step over rows [x, y] of d={d}, n={rows.size.text()}: "
                              f"|x_j| <= c_x = {self.x_bound:g}, ||beta||_1 <= K = {K:.6g} ({self.ball} ball"
                              f"{'' if self.sparsity is None else f', s={self.sparsity}'}), |residual| <= A = "
                              f"{A.text()}; linf = stability*2*eta*c_x*A/n = {text_of(linf)}, "
                              f"l2 = linf*sqrt(d) = {text_of(l2)}; missing values: a row with a NaN or "
                              "infinite entry adds nothing")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        Z = float_rows(ctx, ins[0])
        d = Z.shape[1] - 1
        beta = np.asarray(ctx.value(self.beta), dtype=float).reshape(-1)
        if beta.shape != (d,):
            raise DataError(ctx.node_id, f"the released beta has shape {beta.shape}, expected ({d},)",
                            f"release a coefficient vector of shape ({d},)")
        beta = project_coef(beta, self.ball, self.radius, self.sparsity)
        A = self.residual_bound
        if isinstance(A, Ref):  # declared policy for a released bound (rules.capped)
            A = capped(released_scalar(ctx.value(A)))
        R = max(A - self.x_bound * l1_bound(self.ball, self.radius, self.sparsity, d), 0.0)
        cx = self.x_bound

        def grad_terms(B: np.ndarray) -> np.ndarray:
            X = clip_box(B[:, :d], -cx, cx)
            y = clip_box(B[:, d], -R, R)
            with np.errstate(all="ignore"):
                r = np.clip(X @ beta - y, -A, A)
                r[~np.isfinite(B).all(axis=1)] = 0.0  # a row with a missing (non-finite) entry adds nothing
                out: np.ndarray = X * r[:, None]
            return out

        G = ctx.backend.row_map(Z, grad_terms)
        g = ctx.backend.tree_sum(G) / ctx.backend.nrows(Z)
        return beta - self.eta * g


@attrs.frozen(kw_only=True)
class ProjectCoef(PostProcess):
    """Project released coefficients onto the feasible set: keep the ``sparsity`` largest entries
    (if set), then the Euclidean projection onto the ``ball`` of ``radius`` (CWZ's Pi_C).

    >>> import dpflow as dp
    >>> p = ProjectCoef(radius=1.0)(dp.PlanBuilder(budget=dp.ZCDP(0.5)).public([3.0, 4.0]))
    """

    kind: ClassVar[str] = "ProjectCoef"
    radius: float = attrs.field(converter=positive)
    ball: str = attrs.field(default="l2", converter=_ball)
    sparsity: int | None = attrs.field(default=None, converter=_opt_sparsity)

    def out_shape(self, ins: Sequence[ReleasedT]) -> tuple[int, ...] | None:
        return ins[0].shape

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        return project_coef(np.asarray(ins[0], dtype=float), self.ball, self.radius, self.sparsity)


@attrs.frozen(kw_only=True)
class RidgeSolve(SquareInput):
    """Coefficients from a released second-moment matrix ``M`` of rows ``[x, y]``:
    ``(M_xx + lambda I) beta = M_xy`` with ``lambda = ridge * scale^2`` (``scale`` public or a
    released radius, so lambda tracks the noise of a data-driven clip).  Least squares, so a
    singular system never raises.

    >>> import dpflow as dp
    >>> M = dp.PlanBuilder(budget=dp.ZCDP(0.5)).public([[2.0, 2.0], [2.0, 3.0]])
    >>> beta = RidgeSolve(ridge=0.0)(M)
    """

    kind: ClassVar[str] = "RidgeSolve"
    least_side: ClassVar[int] = 2
    square_fix: ClassVar[str] = "pass the released (d + 1) x (d + 1) second moment of rows [x, y], d >= 1"
    ridge: float = attrs.field(converter=float)
    scale: float | Ref = attrs.field(default=1.0, converter=released_or_positive)

    def __attrs_post_init__(self) -> None:
        if not (math.isfinite(self.ridge) and self.ridge >= 0):
            raise ValueError(f"ridge must be finite and >= 0, got {self.ridge}")

    def out_shape(self, ins: Sequence[ReleasedT]) -> tuple[int, ...] | None:
        shape = ins[0].shape
        return None if shape is None else (shape[0] - 1,)

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        M = self.square(ins[0], ctx)
        d = M.shape[0] - 1
        s = self.scale
        if isinstance(s, Ref):
            s = released_scale(released_scalar(ctx.value(s)))
        lam = self.ridge * s * s
        A = M[:d, :d] + lam * np.eye(d)
        beta, *_ = np.linalg.lstsq(A, M[:d, d], rcond=None)
        return beta
