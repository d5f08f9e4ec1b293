"""Private quantiles: magnitudes of rows, order statistics over a public or released range, the
exponential mechanism over the gaps of the sorted data (exact sampling), and the small
post-processing steps that turn a released quantile or a log-scale histogram into a radius.

The quantile mechanism is Smith's (2011) exponential mechanism over the continuum ``[lo, hi]``:
with ``z_(0) = lo <= z_(1) <= ... <= z_(n) <= z_(n+1) = hi`` (the data clamped and sorted), every
point of the gap ``I_k = [z_(k), z_(k+1)]`` has utility ``u_k = -|k - q n|``, and one record's change
moves the count of values below any point by at most ``Delta_u`` (its stability), so ``u`` moves by
at most ``Delta_u``.  Sampling a gap with probability proportional to
``|I_k| exp(epsilon u_k / (2 Delta_u))`` and then a uniform point inside it is epsilon-DP
(McSherry-Talwar 2007 Thm 6).  Continuous sources draw the gap by the Gumbel-max trick, which samples
that distribution exactly up to floating point: ``argmax_k log w_k + G_k``
(:func:`~dpflow.nodes.expmech.report_noisy_max`, shared with ``DyadicExpMech``).  Exact sources (the
release default) run the same mechanism over the points of a public 2^-k lattice of the range, sampled
exactly (:func:`lattice_quantile`, :func:`~dpflow.nodes.expmech.exact_choice`).

>>> import dpflow as dp
>>> from dpflow import nodes as N
>>> b = dp.PlanBuilder(budget=dp.PureDP(1.0))
>>> X = b.source("X", dp.Vectors(d=3), n=500)
>>> med = N.Quantile(q=0.5)(N.OrderStatistics(lower=0.0, upper=10.0)(N.Magnitudes()(X)))
>>> plan = b.build(median=med)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np

from dpflow.domains import ReleasedScalar, Sym, Vectors
from dpflow.errors import DomainError, UnboundedSensitivityError
from dpflow.handles import Ref
from dpflow.nodes.base import (
    EvalContext,
    InferContext,
    PostProcess,
    Query,
    Transform,
    need,
    released_scalar,
    released_type,
    text_of,
)
from dpflow.nodes.expmech import EXACT_REFERENCE, DistanceScores, exact_choice, report_noisy_max
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.mechanisms import EpsilonMechanism
from dpflow.nodes.params import finite, positive, released_or_finite
from dpflow.nodes.rules import finite_edges, has_public_n, released_endpoint
from dpflow.nodes.types import Inferred, Mode, ReleasedT, RowsT, Size, StatT, VType
from dpflow.noise_protocol import NoiseSource
from dpflow.privacy import BOUNDED_RANGE_REFERENCE, opt_exact


@attrs.frozen(kw_only=True)
class Magnitudes(Transform):
    """One-dimensional rows of magnitudes: ``of="coordinates"`` pools ``|x_ij|`` over the d
    coordinates (n*d rows, stability d: one record moves d of them), ``of="rows"`` gives the row
    norms ``||x_i||_2`` (n rows, stability 1).  NaN counts as 0 and +-inf as +inf (declared
    policy; later nodes clamp).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> Z = Magnitudes(of="rows")(b.source("X", dp.Vectors(d=2), n=10))
    """

    kind: ClassVar[str] = "Magnitudes"
    reference: ClassVar[str] = "row-wise map; pooling d coordinates of a record gives stability d (Dwork-Roth 2.2)"
    of: str = "coordinates"

    def __attrs_post_init__(self) -> None:
        if self.of not in ("coordinates", "rows"):
            raise ValueError(f"Magnitudes of must be 'coordinates' or 'rows', got {self.of!r}")

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        dom = rows.domain
        if self.of == "rows":
            nb = dom.norm_l2()
            out = Vectors(d=1, box=None if nb is None or not nb.is_const else (0.0, nb.coef))
            return Inferred(attrs.evolve(rows, domain=out, columns=None), f"row l2 norms of {dom.describe()}")
        nb = dom.norm_linf()
        out = Vectors(d=1, box=None if nb is None or not nb.is_const else (0.0, nb.coef))
        known = None if rows.size.known is None else rows.size.known * dom.d
        size = Size(public=rows.size.public, known=known, ref=ctx.row_count())
        return Inferred(attrs.evolve(rows, domain=out, size=size, stability=rows.stability * dom.d, columns=None),
                        f"|x_ij| pooled over d={dom.d} coordinates: stability x {dom.d}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        X = np.asarray(ins[0], dtype=float)
        A = np.where(np.isnan(X), 0.0, X)
        if self.of == "rows":
            with np.errstate(all="ignore"):
                return ctx.backend.row_map(A, lambda Z: np.linalg.norm(Z, axis=1, keepdims=True))
        return np.abs(A).reshape(-1, 1)


def _range_syms(lower: float | Ref, upper: float | Ref) -> Sym | None:
    """The width ``upper - lower`` as a bound (products only: a released upper needs lower = 0)."""
    if not isinstance(lower, Ref) and not isinstance(upper, Ref):
        return Sym.const(max(upper - lower, 0.0))
    if isinstance(upper, Ref) and not isinstance(lower, Ref) and lower == 0.0:
        return Sym.ref(ReleasedScalar(upper.id))
    return None


@attrs.frozen(kw_only=True)
class OrderStatistics(Query):
    """The one-dimensional rows clamped into ``[lower, upper]`` and sorted, framed by the two ends:
    ``(lower, z_(1), ..., z_(n), upper)``.  NaN rows count as ``lower`` (declared policy).

    Sensitivities: sorting is non-expansive in every l_p norm, so a replaced row moves the vector
    by at most ``upper - lower`` in l1, l2 and linf (times the stability); the *rank* (count of
    values below any threshold) moves by at most the stability, which is what ``Quantile`` uses.
    ``upper`` may be released (a range found by a log-scale histogram) when ``lower`` is 0.

    Floating-point error (for the exact lattice release of Laplace/GaussianMech): clamping and
    sorting do no arithmetic, so the computed vector *is* the exact one for the rows as given, and
    the ``upper - lower`` bound holds for any rows (a row map before this node, such as
    ``Magnitudes``, is part of the record): error zero (``FloatError`` kind ``exact``).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> z = OrderStatistics(lower=0.0, upper=4.0)(b.source("X", dp.Reals(), n=10))
    """

    kind: ClassVar[str] = "OrderStatistics"
    reference: ClassVar[str] = ("Smith 2011 (private quantiles); sorting is non-expansive in l_p "
                                "(rearrangement inequality, Hardy-Littlewood-Polya Thm 368)")
    lower: float | Ref = attrs.field(default=0.0, converter=released_or_finite)
    upper: float | Ref = attrs.field(converter=released_or_finite)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.lower, Ref) and not isinstance(self.upper, Ref) and self.lower > self.upper:
            raise ValueError(f"OrderStatistics needs lower <= upper, got [{self.lower}, {self.upper}]")

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        if rows.domain.d != 1:
            raise DomainError(ctx.node_id, f"order statistics need one-dimensional rows, got d={rows.domain.d}",
                              "select one column (Columns) or take Magnitudes first")
        for slot in ("lower", "upper"):
            ref = getattr(self, slot)
            if isinstance(ref, Ref):
                t = released_type(ref, ctx, slot)
                if t.shape is not None and t.shape != ():
                    raise DomainError(ctx.node_id, f"{slot} refers to {ref.id} of shape {t.shape}",
                                      "pass a released scalar")
        width = _range_syms(self.lower, self.upper)
        diam = None if width is None else width * float(rows.stability)
        if not has_public_n(rows):
            # with a private count the sorted vector's length (and alignment) changes with one record:
            # only the rank utility (for Quantile) is bounded, not the vector itself
            diam = None
        rank = Sym.const(float(rows.stability))
        n = rows.size.known if rows.size.public else None
        stat = StatT(((n or 0) + 2,), rows.source, diam, diam, diam, rank=rank,
                     float_error=FloatError("exact", rows.domain))
        return Inferred(stat, f"sorted values clamped to [{_txt(self.lower)}, {_txt(self.upper)}], "
                              f"n={rows.size.text()}: rank sensitivity {text_of(rank)}, l_p {text_of(diam)}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        lo = _scalar_value(ctx, self.lower)
        hi = max(_scalar_value(ctx, self.upper), lo)
        def clamped(Z: np.ndarray) -> np.ndarray:
            z = np.asarray(Z, dtype=float)[:, 0]
            out: np.ndarray = np.clip(np.where(np.isnan(z), lo, z), lo, hi)
            return out

        return np.concatenate(([lo], ctx.backend.sorted_values(ins[0], clamped), [hi]))


def _txt(x: float | Ref) -> str:
    return x.id if isinstance(x, Ref) else f"{x:.6g}"


def _scalar_value(ctx: EvalContext, x: float | Ref) -> float:
    if not isinstance(x, Ref):
        return x
    return released_endpoint(released_scalar(ctx.value(x)))


QUANTILE_LATTICE_BITS = 40
"""Under an exact source a quantile is a point of the lattice ``step Z`` inside its range, ``step`` the power of
two at or below width / 2^40 (at least 2^40 candidates), and at least the spacing of float64 at the range's
largest magnitude (every lattice point is then a float)."""


def quantile_lattice(lo: float, hi: float) -> tuple[float, int, int]:
    """``(step, m_lo, m_hi)``: the candidates of an exact-source quantile over ``[lo, hi]`` (lo < hi) are the
    floats ``m step``, ``m_lo <= m <= m_hi`` (public: a function of the public range only).

    >>> step, m_lo, m_hi = quantile_lattice(0.0, 10.0)
    >>> step == 2.0**-37, m_lo, m_hi == int(10.0 / step)
    (True, 0, True)
    """
    width = hi - lo
    e_w = math.frexp(width)[1] if math.isfinite(width) else math.frexp(hi / 2.0 - lo / 2.0)[1] + 1
    e_top = math.frexp(max(abs(lo), abs(hi)))[1]
    step = max(math.ldexp(1.0, e_w - 1 - QUANTILE_LATTICE_BITS), math.ldexp(1.0, e_top - 53), math.ulp(0.0))
    return step, math.ceil(Fraction(lo) / Fraction(step)), math.floor(Fraction(hi) / Fraction(step))


def _lattice_below(z: np.ndarray, step: float) -> np.ndarray:
    """``floor(z / step)`` exactly.  ``step`` is a power of two, so ``z / step`` is exact unless it underflows
    (``|z / step| < 2^-1022``, no overflow: ``|z| < 2^53 step`` inside the range); then the true floor is 0 or -1
    and the rounded quotient's floor can only be 0 in place of -1 (a negative quotient rounded to -0.0), which the
    one correction repairs."""
    with np.errstate(all="ignore"):
        k = np.floor(z / step)
        k = np.where(k * step > z, k - 1.0, k)
    out: np.ndarray = k.astype(np.int64)
    return out


def lattice_quantile(framed: np.ndarray, q: float, beta: Fraction, noise: NoiseSource) -> float:
    """The exact-source quantile: the exponential mechanism over the lattice points y of ``[lo, hi]``
    (:func:`quantile_lattice`) with utility ``-|c(y) - q n|``, ``c(y)`` the number of data values below y, and
    weights ``exp(-beta |c(y) - q n|)``, ``beta = epsilon / (2 Delta_u)``.  The points with ``c(y) = k`` are those
    of ``(z_(k), z_(k+1)]`` (``[lo, z_(1)]`` for k = 0), ``N_k`` of them: a group k is drawn with probability
    proportional to ``N_k exp(-beta |k - q n|)`` by :func:`~dpflow.nodes.expmech.exact_choice` (q n exact, as
    a rational), then one of its points uniformly (an exact uniform integer).

    Privacy: one record moves every ``c(y)`` by at most its stability ``Delta_u`` (under add/remove, c by 0 or
    1 and q n by q: ``|delta - q| <= 1``), the candidate set depends only on the public range, so this is the
    exponential mechanism over a finite set (McSherry-Talwar 2007 Thm 6), epsilon-bounded range.

    >>> from dpflow.interpreter.noise import SeededNoise
    >>> y = lattice_quantile(np.array([0.0, 1.0, 2.0, 3.0, 4.0]), 0.5, Fraction(1), SeededNoise(0, exact=True))
    >>> 0.0 <= y <= 4.0 and (y / quantile_lattice(0.0, 4.0)[0]).is_integer()
    True
    """
    lo, hi = float(framed[0]), float(framed[-1])
    if not hi > lo:  # one point: nothing to choose (the word is still drawn)
        noise.uniform_words(1)
        return lo
    scores, mult, first, step = lattice_groups(framed, q, beta)
    k, _ = exact_choice(scores, mult, noise.uniform_words)
    if k is None:
        return lo
    return float((int(first[k]) + noise.uniform_int(int(mult[k]))) * step)


def lattice_groups(framed: np.ndarray, q: float, beta: Fraction) -> tuple[DistanceScores, np.ndarray, np.ndarray,
                                                                          float]:
    """The groups of :func:`lattice_quantile` for ``framed = (lo, z_(1..n), hi)``, lo < hi: their exact
    log-weights ``-beta |k - q n|``, sizes ``N_k``, the lattice index of each group's first point and the step.

    >>> _, mult, first, step = lattice_groups(np.array([0.0, 1.0, 1.0, 4.0]), 0.5, Fraction(1))
    >>> mult.tolist() == [2**38 + 1, 0, 3 * 2**38], int(first[0]), step == 2.0**-38
    (True, 0, True)
    """
    n = framed.shape[0] - 2
    step, m_lo, _ = quantile_lattice(float(framed[0]), float(framed[-1]))
    G = _lattice_below(framed, step) - m_lo + 1  # lattice points in [lo, z] for each framed value
    G[0] = 0
    target = Fraction(q) * n
    a = float(target)
    scores = DistanceScores(beta, np.full(n + 1, a), np.arange(n + 1, dtype=float), -1, target - Fraction(a))
    return scores, np.diff(G), m_lo + G[:-1], step


def quantile_log_weights(framed: np.ndarray, q: float, epsilon: float, rank_sensitivity: float) -> np.ndarray:
    """Log-probabilities (unnormalised) of the gaps of ``framed = (lo, z_(1..n), hi)`` under the
    exponential mechanism for the q-quantile: ``log|I_k| + epsilon u_k / (2 Delta_u)``,
    ``u_k = -|k - q n|``; empty gaps get ``-inf``.

    >>> w = quantile_log_weights(np.array([0.0, 1.0, 2.0]), 0.5, 1.0, 1.0)
    >>> bool(w[0] == w[1])
    True
    """
    n = framed.shape[0] - 2
    gaps = np.diff(framed)
    k = np.arange(n + 1, dtype=float)
    with np.errstate(divide="ignore"):
        out: np.ndarray = np.log(gaps) - epsilon * np.abs(k - q * n) / (2.0 * rank_sensitivity)  # log 0 = -inf
    return out


@attrs.frozen(kw_only=True)
class Quantile(EpsilonMechanism):
    """The private ``q``-quantile of :class:`OrderStatistics` by the exponential mechanism over the
    gaps of the sorted data: Gumbel-max over the gaps, then uniform in the gap (continuous sources); over
    the points of a public 2^-k lattice of the range, sampled exactly (exact sources: :func:`lattice_quantile`).

    Cost: epsilon-DP (McSherry-Talwar 2007 Thm 6, Smith 2011) and epsilon-bounded range: the log density
    ratio of two neighbours at a point y is epsilon (u(y, x) - u(y, x')) / (2 Delta_u) plus a constant, and
    the score differences lie in [-Delta_u, Delta_u] (the Lebesgue base measure, or the counting measure of the
    public lattice, does not depend on the data), so it is epsilon^2/8-zCDP (Cesar-Rogers 2021): under a zCDP
    budget a share rho becomes
    epsilon = sqrt(8 rho).  ``epsilon`` fixes the cost.
    Output: a released scalar in ``[lower, upper]`` (``lower`` when the range is empty).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> z = OrderStatistics(upper=4.0)(b.source("X", dp.Reals(), n=10))
    >>> med = Quantile(q=0.5)(z)
    """

    kind: ClassVar[str] = "Quantile"
    pure_capable: ClassVar[bool] = True
    gaussian_profile: ClassVar[bool] = False
    bounded_range: ClassVar[bool] = True
    reference: ClassVar[str] = ("exponential mechanism, McSherry-Talwar 2007 Thm 6; private quantile over gaps, "
                                f"Smith 2011; zCDP: {BOUNDED_RANGE_REFERENCE}; exact sources: {EXACT_REFERENCE.text}")
    q: float = attrs.field(converter=float)
    weight: float = attrs.field(default=1.0, converter=positive)
    epsilon: Fraction | None = attrs.field(default=None, converter=opt_exact)

    def __attrs_post_init__(self) -> None:
        if not 0.0 <= self.q <= 1.0:
            raise ValueError(f"Quantile needs 0 <= q <= 1, got {self.q}")

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        need(ins, StatT, ctx, "order statistics (OrderStatistics)")
        return Inferred(ReleasedT(()), "")

    def check_input(self, stat: StatT, ctx: InferContext) -> str:
        if stat.rank is None:
            raise UnboundedSensitivityError(ctx.node_id, "Quantile needs order statistics (a rank sensitivity)",
                                            "feed it OrderStatistics(lower=..., upper=...)")
        return f"rank utility = {stat.rank.text()}"

    def noise_text(self, stat: StatT, share: Fraction, mode: Mode) -> str:
        return (f"exponential mechanism over gaps, weights |I_k| exp({float(self.eps(share, mode)):.6g} u_k / "
                f"(2*{text_of(stat.rank)})), u_k = -|k - {self.q:g} n|; exact sources: the same over the points "
                f"of a 2^-k lattice of the range (|I_k| = points in the gap), sampled exactly")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        stat = ctx.stat()
        alloc = ctx.allocation()
        assert stat.rank is not None  # check_input refused the plan otherwise
        framed = np.asarray(ins[0], dtype=float)
        eps_exact = self.eps(alloc.share, alloc.mode)
        eps = float(eps_exact)
        ctx.record("epsilon", eps)
        if ctx.noise.exact:
            return lattice_quantile(framed, self.q, eps_exact / (2 * Fraction(ctx.bound(stat.rank))), ctx.noise)
        k = report_noisy_max(quantile_log_weights(framed, self.q, eps, ctx.bound(stat.rank)), ctx.noise)
        u = float(ctx.noise.uniform((1,))[0])  # drawn whatever k is: the draws do not depend on the data
        if k is None:  # every gap is empty: the range is one point
            return float(framed[0])
        return float(min(framed[k] + u * (framed[k + 1] - framed[k]), framed[k + 1]))


@attrs.frozen(kw_only=True)
class ScaleShift(PostProcess):
    """``scale * x + shift`` of a released scalar (a radius from a quantile, a residual bound).

    >>> import dpflow as dp
    >>> r = ScaleShift(scale=2.0, shift=1.0)(dp.PlanBuilder(budget=dp.ZCDP(0.5)).public(3.0))
    """

    kind: ClassVar[str] = "ScaleShift"
    scale: float = attrs.field(converter=finite)
    shift: float = attrs.field(default=0.0, converter=finite)

    def __attrs_post_init__(self) -> None:
        if self.scale < 0 or self.shift < 0:
            raise ValueError("ScaleShift keeps radii non-negative: scale and shift must be >= 0")

    def out_shape(self, ins: Sequence[ReleasedT]) -> tuple[int, ...] | None:
        return ()

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        x = released_scalar(ins[0])
        return self.scale * (x if x > 0 else 0.0) + self.shift


@attrs.frozen(kw_only=True)
class ModeBinUpper(PostProcess):
    """``factor`` times the right edge of the largest bin of a released histogram over ``edges``
    (the range ``[0, 2^(k*+2)]`` of CWZ's data-driven truncation when the bins are powers of two
    and ``factor`` is 2).

    >>> import dpflow as dp
    >>> hi = ModeBinUpper(edges=[0.0, 1.0, 2.0, 4.0])(dp.PlanBuilder(budget=dp.ZCDP(0.5)).public([1.0, 5.0, 2.0]))
    """

    kind: ClassVar[str] = "ModeBinUpper"
    edges: tuple[float, ...] = attrs.field(converter=finite_edges)
    factor: float = attrs.field(default=2.0, converter=finite)

    def out_shape(self, ins: Sequence[ReleasedT]) -> tuple[int, ...] | None:
        return ()

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        counts = np.nan_to_num(np.asarray(ins[0], dtype=float).reshape(-1), nan=-np.inf)
        k = int(np.argmax(counts))
        return self.factor * self.edges[min(k + 1, len(self.edges) - 1)]


def log2_edges(lo_exp: int = -60, hi_exp: int = 60) -> tuple[float, ...]:
    """Public log-scale bin edges ``(0, 2^lo_exp, ..., 2^hi_exp)`` for magnitudes.

    >>> log2_edges(-1, 1)
    (0.0, 0.5, 1.0, 2.0)
    """
    return (0.0,) + tuple(2.0**k for k in range(lo_exp, hi_exp + 1))
