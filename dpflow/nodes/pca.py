"""Private PCA by Analyze Gauss (Dwork-Talwar-Thakurta-Zhang 2014, Alg. 1; mixtures.md 2.9): the
second moment of rows clipped to a ball, released with symmetric Gaussian noise (``SecondMoment`` +
``GaussianMech``, whose Frobenius sensitivity ``sqrt(2) r^2 / n`` under replace-one is the spec's
``Delta_F`` over n), then post-processing: the top-``k`` eigenvectors (:class:`TopEigenvectors`) and
the projection of the rows onto them (:class:`Project`, a row map of stability 1).

>>> import numpy as np, dpflow as dp
>>> b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
>>> X = b.source("X", dp.Vectors(d=3), n=2000)
>>> V = private_pca(X, k=1, radius=10.0)
>>> rng = np.random.default_rng(0)
>>> data = rng.normal(size=(2000, 3)) * [5.0, 0.5, 0.5]
>>> v = b.build(V=V).run({"X": data}, noise=dp.SeededNoise(0)).released["V"]
>>> bool(abs(v[0, 0]) > 0.99)
True
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from dpflow.domains import Vectors
from dpflow.errors import DomainError
from dpflow.handles import Ref, Released, Sensitive, Value, param
from dpflow.nodes.base import (
    EvalContext,
    InferContext,
    Query,
    SquareInput,
    Transform,
    change_bound,
    finite_or_zero,
    float_rows,
    need,
    released_type,
    text_of,
)
from dpflow.nodes.fixedpoint import FixedPoint, gram_units
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.mechanisms import GaussianMech
from dpflow.nodes.queries import SecondMoment, centred_radius, centred_rows
from dpflow.nodes.rules import changes_text, has_public_n
from dpflow.nodes.transforms import Clip
from dpflow.nodes.types import Inferred, ReleasedT, RowsT, StatT, VType
from dpflow.references import Reference

__all__ = ["Gram", "Project", "TopEigenvectors", "analyze_gauss", "private_pca"]


def _pos_int(x: Any) -> int:
    if isinstance(x, bool) or int(x) != x or int(x) < 1:
        raise ValueError(f"k must be a positive integer, got {x!r}")
    return int(x)


@attrs.frozen(kw_only=True)
class TopEigenvectors(SquareInput):
    """The ``k`` eigenvectors of the largest eigenvalues of a released symmetric matrix, as the columns of
    a d x k matrix (largest first; all d when k > d).  Declared policy: non-finite entries count as 0.  A
    matrix that is not square is refused (its shape is public).

    >>> import dpflow as dp
    >>> V = TopEigenvectors(k=1)(dp.PlanBuilder(budget=dp.ZCDP(0.5)).public([[1.0, 0.0], [0.0, 3.0]]))
    """

    kind: ClassVar[str] = "TopEigenvectors"
    reference: ClassVar[str] = "post-processing of released values (Dwork-Roth 2014 Prop. 2.1)"
    square_fix: ClassVar[str] = "pass a released symmetric d x d matrix (a second moment)"
    k: int = attrs.field(converter=_pos_int)

    def out_shape(self, ins: Sequence[ReleasedT]) -> tuple[int, ...] | None:
        s = ins[0].shape
        return None if s is None else (s[0], min(self.k, s[0]))

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        S = self.square(ins[0], ctx)
        w, V = np.linalg.eigh(S + S.T)  # the eigenvectors of (S + S^T) / 2, in the same order
        return V[:, np.argsort(w)[::-1][:self.k]]


@attrs.frozen(kw_only=True)
class Project(Transform):
    """Rows mapped to ``(x - c) V`` for a released d x k ``basis`` V (the identity when absent: a
    re-centring) and a released or public ``center`` c (the origin when absent): a row map, so stability 1;
    the output rows have no bound (clip them again).  Declared policies: non-finite entries of V or c
    count as 0; a non-finite row gives a non-finite output row (which ``Clip`` maps to its centre).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> Y = Project(basis=b.public([[1.0], [0.0]]))(b.source("X", dp.Vectors(d=2), n=10))
    """

    kind: ClassVar[str] = "Project"
    reference: ClassVar[str] = "row-wise map of public parameters (stability 1, Dwork-Roth 2014 Prop. 2.1)"
    basis: Ref | None = attrs.field(default=None, converter=param)
    center: Ref | None = attrs.field(default=None, converter=param)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        k = rows.domain.d
        if self.basis is not None:
            t = released_type(self.basis, ctx, "basis")
            if t.shape is None or len(t.shape) != 2 or t.shape[0] != rows.domain.d:
                raise DomainError(ctx.node_id, f"basis {self.basis.id} has shape {t.shape}, rows have "
                                  f"d={rows.domain.d}", "pass a d x k matrix (TopEigenvectors of a second moment)")
            k = t.shape[1]
        if self.center is not None:
            c = released_type(self.center, ctx, "center")
            if c.shape is not None and c.shape != (rows.domain.d,):
                raise DomainError(ctx.node_id, f"center {self.center.id} has shape {c.shape}",
                                  "pass a centre of the rows' dimension")
        out = Vectors(d=k)
        onto = "identity" if self.basis is None else self.basis.id
        return Inferred(attrs.evolve(rows, domain=out), f"projection onto {onto}: d={k}, unbounded")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        V = None if self.basis is None else finite_or_zero(ctx.value(self.basis))
        c = None if self.center is None else finite_or_zero(ctx.value(self.center))

        def proj(A: np.ndarray) -> np.ndarray:
            with np.errstate(all="ignore"):
                Z = A if c is None else A - c
                out: np.ndarray = Z if V is None else Z @ V
            return out

        return ctx.backend.row_map(float_rows(ctx, ins[0]), proj)


PCA_REFERENCE = Reference("Analyze Gauss, Dwork-Talwar-Thakurta-Zhang 2014 Alg. 1", "mixtures.md", "2.9")


def private_pca(x: Sensitive[Any], k: int, radius: float | Released[Value],
                center: Released[Value] | None = None, weight: float = 1.0) -> Released[Value]:
    """Analyze Gauss: the top-``k`` eigenvectors (d x k) of the second moment of the rows clipped to the
    ball ``B(center, radius)``, released by ``GaussianMech`` (symmetric noise on the upper triangle,
    sigma = sqrt(2) radius^2 / (n sqrt(2 rho)) under replace-one); the eigenvectors are post-processing.
    ``weight`` is the Gaussian mechanism's share of the budget.  Needs a public row count (SecondMoment).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> V = private_pca(b.source("X", dp.Vectors(d=4), n=100), k=2, radius=1.0)
    """
    return TopEigenvectors(k=k)(analyze_gauss(x, radius, center, weight))


def analyze_gauss(x: Sensitive[Any], radius: float | Released[Value], center: Released[Value] | None = None,
                  weight: float = 1.0) -> Released[Value]:
    """Analyze Gauss's release (:func:`private_pca` before its eigenvectors): the second moment about ``center``
    (the origin when absent) of the rows clipped to the ball ``B(center, radius)``, with symmetric Gaussian
    noise under ``weight`` of the budget.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> S = analyze_gauss(b.source("X", dp.Vectors(d=3), n=100), radius=1.0)
    """
    clipped = Clip(radius=radius, center=center)(x)
    return GaussianMech(weight=weight)(SecondMoment(center=center)(clipped))


@attrs.frozen(kw_only=True)
class Gram(Query):
    """The unnormalised second moment ``sum_i (x_i - c)(x_i - c)^T`` about the origin or a released centre
    c: usable on pieces of private size (divide by a released count afterwards).

    Frobenius sensitivity for rows with ``||x - c|| <= r`` (clip around the same centre first): a replaced
    row moves it by ``||ww^T - vv^T||_F <= sqrt(2) r^2`` (``||w||^4 + ||v||^4 - 2 (w.v)^2 <= 2 r^4``), an
    added or removed one by ``||ww^T||_F = ||w||^2 <= r^2`` (mixtures.md 2.9); times the stability.

    Floating-point error (for the exact lattice release): that of a sum of at most n outer products
    (``FloatError`` kind ``gram_sum``), n the public row count or, on a value piece, the public count of the
    rows it was split from (``Size.at_most``).  Without any public count (an add/remove source) an exact
    noise source gets the Gram computed exactly in fixed point (``fixed_gram``, :mod:`dpflow.nodes.fixedpoint`:
    rows quantised to a public power-of-two grid, integer products summed in int64 blocks that cannot
    overflow), whose error term does not grow with the private count; continuous noise adds to the float Gram.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="add_remove")
    >>> G = Gram()(Clip(radius=1.0)(b.source("X", dp.Vectors(d=2))))
    """

    kind: ClassVar[str] = "Gram"
    reference: ClassVar[Reference] = Reference("Analyze Gauss sensitivity: r^2 add/remove, sqrt(2) r^2 replace-one",
                                               "mixtures.md", "2.9")
    center: Ref | None = attrs.field(default=None, converter=param)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        dom = rows.domain
        r = centred_radius(rows, self.center, ctx)
        fro = None if r is None else change_bound(rows, r.pow(2) * math.sqrt(2.0), r.pow(2))
        stat = StatT((dom.d, dom.d), rows.source, None, fro, None, symmetric=True, float_error=self._error(rows))
        around = "origin" if self.center is None else self.center.id
        return Inferred(stat, f"Gram about {around} over {dom.describe()}, {changes_text(rows)}: "
                              f"Frobenius {text_of(fro)}")

    def _error(self, rows: RowsT) -> FloatError:
        """The float error of a sum of at most n rows (n the public row count, or the public bound on a value
        piece's private count, the rows it was split from), or without one the fixed-point Gram's."""
        n = rows.size.sym() if has_public_n(rows) else rows.size.at_most
        c = None if self.center is None else self.center.id
        if n is None:
            return FloatError("fixed_gram", rows.domain, None, c, stability=rows.stability)
        return FloatError("gram_sum", rows.domain, n, c, stability=rows.stability)

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        Z = centred_rows(ins[0], self.center, ctx)
        if ctx.noise.exact:
            rows = ctx.input_type(0)
            assert isinstance(rows, RowsT)
            fe = self._error(rows)
            e = fe.grid(ctx.public_values(fe.refs()))
            if e is not None:  # fixed_gram only; (without a finite grid the error bound is infinite: NaN)
                return FixedPoint(ctx.backend.exact_sum(Z, functools.partial(gram_units, exponent=e)), 2 * e)  # q^2 G
        return ctx.backend.gram(Z)
