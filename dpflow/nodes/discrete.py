"""Nodes for discrete data: exact counts on an ordinal domain [N] (N up to 2**62, held in int64),
the stability-based histogram over an unknown bin set, the dyadic-interval statistic and the exact
exponential mechanism over all dyadic intervals used by MERR (Diakonikolas-Hardt-Schmidt 2015), and
the truncated mean of {0,1} rows used by PPDE (KLSU 2019 Alg. 7).

Declared policies (never a data-dependent exception): ordinal values outside [0, N) are clamped to
the ends and NaN counts as 0; bin keys are clamped to +-2**62; Boolean rows with more than ``tau``
ones are replaced by the zero row.

>>> import numpy as np, dpflow as dp
>>> from dpflow import nodes as N
>>> b = dp.PlanBuilder(budget=dp.PureDP(1.0))
>>> X = b.source("X", dp.Ordinal(N=10**18), n=1000)
>>> J = N.DyadicExpMech()(N.DyadicCounts(N=10**18)(X))       # the worst-fitting dyadic interval
>>> w = N.LaplaceMech()(N.IntervalCounts(interval=J)(X))     # its noisy weight and the weight left of it
>>> cdf = N.AddKnots(N=10**18)(J, w)
>>> r = b.build(cdf=cdf).run({"X": np.arange(1000) * 10**15}, noise=dp.SeededNoise(0)).released["cdf"]
>>> int(r[0][0]), int(r[0][-1])
(-1, 999999999999999999)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np

from dpflow.domains import Sym, Vectors
from dpflow.errors import DomainError, PlanTypeError, UnboundedSensitivityError
from dpflow.handles import Ref, param
from dpflow.nodes.base import (
    EvalContext,
    InferContext,
    Inferred,
    Mode,
    PostProcess,
    Query,
    ReleasedT,
    RowsT,
    StatT,
    VType,
    capped,
    change_bound,
    finite,
    need,
    positive,
    released_type,
    text_of,
)
from dpflow.nodes.expmech import report_noisy_max
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.mechanisms import EpsilonMechanism
from dpflow.nodes.rules import changes_text, count_sensitivities, public_n
from dpflow.noise_protocol import NoiseSource
from dpflow.privacy import Cost, exact, opt_exact
from dpflow.references import Reference

MAX_N = 2**62
_KEY_LIMIT = 2**62


# --------------------------------------------------------------------------- helpers


def ordinal_values(X: Any, N: int) -> np.ndarray:
    """One-dimensional rows as exact int64 values in ``[0, N)``: NaN -> 0, clamped to the ends.

    >>> ordinal_values(np.array([[-5.0], [np.nan], [3.7], [np.inf]]), 10).tolist()
    [0, 0, 3, 9]
    """
    a = np.asarray(X)
    a = a.reshape(-1) if a.ndim <= 1 else a[:, 0]
    if a.dtype.kind in "iub":
        return np.clip(a.astype(np.int64), 0, N - 1)
    with np.errstate(all="ignore"):
        f = np.nan_to_num(a.astype(float), nan=0.0, posinf=float(N), neginf=0.0)
        f = np.floor(np.clip(f, 0.0, float(N)))
        out = np.where(f >= float(N), N - 1, f.astype(np.int64))
    return np.clip(out, 0, N - 1)


def _one_dim(rows: RowsT, ctx: InferContext, what: str) -> None:
    if rows.domain.d != 1:
        raise DomainError(ctx.node_id, f"{what} needs one-dimensional rows, got d={rows.domain.d}",
                          "select one column first (Columns)")


def _bit_length(v: np.ndarray) -> np.ndarray:
    """Exact bit lengths (int8) of non-negative int64 values: the float64 exponent, corrected where
    the conversion rounded up to the next power of two (only possible above 2**53)."""
    f = v.astype(np.float64)
    e = ((f.view(np.int64) >> 52) - 1022).astype(np.int8)
    e[v == 0] = 0
    big = np.flatnonzero(v >= 2**53)
    if len(big):
        eb = e[big].astype(np.int64)
        e[big] = eb - ((v[big] >> (eb - 1)) == 0)
    return e


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
        _one_dim(rows, ctx, "OrdinalCounts")
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
        x = ordinal_values(ins[0], self.edges[-1])
        e = np.asarray(self.edges, dtype=np.int64)
        idx = np.searchsorted(e, x, side="right") - 1
        counts = np.bincount(idx, minlength=len(e) - 1).astype(float)
        return counts / ctx.backend.nrows(ins[0]) if self.normalize else counts


# --------------------------------------------------------------------------- stability histogram


@attrs.frozen
class SparseCounts:
    """Counts of the occupied bins only: sorted int64 ``keys`` and their ``counts``."""

    keys: np.ndarray
    counts: np.ndarray




@attrs.frozen(kw_only=True)
class BinCounts(Query):
    """Counts over the unbounded grid of bins ``floor((x - shift) / width)`` of one-dimensional rows;
    only occupied bins are materialised (the bin set is never enumerated).

    Bin keys are clamped to +-2**62 and NaN rows fall in the bin of 0 (declared policies).  A record
    lies in one bin: replace-one l1 2, linf 1; add/remove 1.  ``shift`` may be a public random offset
    (a randomly shifted grid, sparse_discrete_heavy.md 1.4).  Release it with
    :class:`StabilityHistogram`.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ApproxZCDP(0.5, 1e-6))
    >>> c = BinCounts(width=0.5)(b.source("X", dp.Reals(), n=10))
    """

    kind: ClassVar[str] = "BinCounts"
    reference: ClassVar[Reference] = Reference("stability histogram: one record is in one bin",
                                               "sparse_discrete_heavy.md", "1")
    width: float = attrs.field(converter=positive)
    shift: float = attrs.field(default=0.0, converter=finite)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        _one_dim(rows, ctx, "BinCounts")
        l1, l2, linf = count_sensitivities(rows)
        return Inferred(StatT((), rows.source, l1, l2, linf),
                        f"BinCounts, width {self.width:.6g}, shift {self.shift:.6g}, {changes_text(rows)}: "
                        f"l1 {text_of(l1)}, linf {text_of(linf)}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        a = np.asarray(ins[0])
        v = a.reshape(-1) if a.ndim <= 1 else a[:, 0]
        if v.dtype.kind in "iu" and self.width == 1.0 and self.shift == 0.0:
            keys = np.clip(v.astype(np.int64), -_KEY_LIMIT, _KEY_LIMIT)
        else:
            with np.errstate(all="ignore"):
                z = np.floor((np.nan_to_num(v.astype(float), nan=0.0) - self.shift) / self.width)
                z = np.nan_to_num(np.clip(z, -float(_KEY_LIMIT), float(_KEY_LIMIT)), nan=0.0)
            keys = z.astype(np.int64)
        uk, counts = np.unique(keys, return_counts=True)
        return SparseCounts(uk, counts.astype(float))


def _opt_delta(x: Any) -> Fraction:
    d = exact(x)
    if not 0 < d < 1:
        raise ValueError(f"delta must be in (0, 1), got {x!r}")
    return d


@attrs.frozen(kw_only=True)
class StabilityHistogram(EpsilonMechanism):
    """The stability-based histogram: Laplace noise on the occupied bins only, released when above a
    threshold; (epsilon, delta)-DP with ``delta`` a fixed public parameter.

    Replace-one (l1 sensitivity 2): noise Lap(2/eps), threshold ``1 + 2 ln(2/delta)/eps`` (Vadhan's
    survey Prop. 3.5 / BNSV, PSI-library constant).  Add/remove (l1 1): Lap(1/eps), threshold
    ``1 + ln(1/(2 delta))/eps`` (OpenDP ``make_laplace_threshold``).  The input must be a count
    statistic of stability 1 (linf 1).  Output: ``(keys, noisy_counts)`` of the released bins; an
    empty release is the private "not found".  Costed as delta-approximate eps^2/2-zCDP (Bun-Steinke
    2016 Prop. 1.13), so it needs an ``ApproxZCDP`` budget whose delta covers ``delta``.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ApproxZCDP(0.5, 1e-6))
    >>> h = StabilityHistogram(delta=1e-7)(BinCounts(width=1.0)(b.source("X", dp.Reals(), n=10)))
    """

    kind: ClassVar[str] = "StabilityHistogram"
    pure_capable: ClassVar[bool] = False
    gaussian_profile: ClassVar[bool] = False
    reference: ClassVar[Reference] = Reference(
        "stability histogram: Vadhan 2017 Prop. 3.5 / Bun-Nissim-Stemmer-Vadhan 2015 (replace-one), OpenDP "
        "make_laplace_threshold (add/remove); cost as approximate zCDP by "
        "Bun-Steinke 2016 Prop. 1.13", "sparse_discrete_heavy.md", "1.1-1.2"
    )
    delta: Fraction = attrs.field(converter=_opt_delta)
    weight: float = attrs.field(default=1.0, converter=positive)
    epsilon: Fraction | None = attrs.field(default=None, converter=opt_exact)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        need(ins, StatT, ctx, "a count statistic (BinCounts)")
        return Inferred(ReleasedT(None), "")

    def _l1(self, stat: StatT) -> float:
        assert stat.l1 is not None
        return stat.l1.coef

    def check_input(self, stat: StatT, ctx: InferContext) -> str:
        if stat.l1 is None or stat.linf is None:
            raise UnboundedSensitivityError(ctx.node_id, "its input has unbounded sensitivity", "feed it BinCounts")
        if not (stat.l1.is_const and stat.linf.is_const and stat.linf.coef == 1.0 and stat.l1.coef in (1.0, 2.0)):
            raise DomainError(ctx.node_id, f"the thresholds need counts of stability 1 (l1 1 or 2, linf 1); got "
                              f"l1 {stat.l1.text()}, linf {stat.linf.text()}",
                              "apply BinCounts directly to the rows (no stability > 1 transform)")
        return f"l1 = {stat.l1.text()}, linf = 1"

    def cost(self, share: Fraction, mode: Mode) -> Cost:
        if mode == "pure":
            raise self.pure_refusal(self.kind)
        return Cost.approx_dp(self.eps(share, mode), self.delta)

    def scale_threshold(self, l1: float, eps: float) -> tuple[float, float]:
        """Laplace scale and release threshold (rounded against the user)."""
        d = float(self.delta)
        if l1 == 2.0:
            return math.nextafter(2.0 / eps, math.inf), math.nextafter(1.0 + 2.0 * math.log(2.0 / d) / eps, math.inf)
        return math.nextafter(1.0 / eps, math.inf), math.nextafter(1.0 + math.log(1.0 / (2.0 * d)) / eps, math.inf)

    def noise_text(self, stat: StatT, share: Fraction, mode: Mode) -> str:
        if mode == "pure":
            return ""
        eps = float(self.eps(share, mode))
        b, t = self.scale_threshold(self._l1(stat), eps)
        return f"Laplace b = {b:.6g} on occupied bins, released above t = {t:.6g} (eps={eps:.6g}, delta={self.delta})"

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        alloc = ctx.allocation()
        b, t = self.scale_threshold(self._l1(ctx.stat()), float(self.eps(alloc.share, alloc.mode)))
        ctx.record("scale", b)
        ctx.record("threshold", t)
        sc: SparseCounts = ins[0]
        noisy = sc.counts + ctx.noise.laplace(b, sc.counts.shape)
        keep = noisy > t
        return sc.keys[keep], noisy[keep]


def stable_mode(released: Any) -> int | None:
    """The key of the largest released count of a :class:`StabilityHistogram`, or ``None``
    ("not found", a released outcome).

    >>> stable_mode((np.array([3, 7]), np.array([10.0, 12.0])))
    7
    """
    keys, counts = released
    if len(keys) == 0:
        return None
    return int(keys[int(np.argmax(counts))])


# --------------------------------------------------------------------------- dyadic intervals (MERR)


@attrs.frozen(eq=False)
class DyadicLevel:
    """Level j of a :class:`DyadicTable`: the occupied level-j intervals holding >= 2 points.

    ``q`` (sorted) indexes the interval ``[q 2^j, (q+1) 2^j)``, ``count`` its points, ``start`` the index
    of its first point in the sorted sample, ``cum`` the prefix sums of ``count`` (leading 0),
    ``keys`` = ``rank(count) << 32 | i`` sorted (group members by count), ``values`` the distinct counts.
    """

    q: np.ndarray
    count: np.ndarray
    start: np.ndarray
    cum: np.ndarray
    keys: np.ndarray
    values: np.ndarray

    @staticmethod
    def of(x: np.ndarray, j: int, start: np.ndarray, count: np.ndarray) -> DyadicLevel:
        """The level from the start index and point count of each multi-point interval."""
        if len(count) == 0:
            values = np.zeros(0, np.int64)
            rank = np.zeros(0, np.int64)
        else:
            hist = np.bincount(count)
            values = np.flatnonzero(hist)
            rank = (np.cumsum(hist > 0) - 1)[count]
        idx = np.arange(len(count), dtype=np.int64)
        if len(values) < 2**16:  # stable radix sort by rank keeps positions ordered within a rank
            keys = (rank.astype(np.int64) << 32 | idx)[np.argsort(rank.astype(np.uint16), kind="stable")]
        else:
            keys = np.sort((rank.astype(np.int64) << 32) | idx)
        cum = np.concatenate(([0], np.cumsum(count)))
        return DyadicLevel(x[start] >> j, count, start, cum, keys, values.astype(np.int64))


@attrs.frozen(eq=False)
class DyadicTable:
    """The counts of every dyadic interval of [0, 2^L), held implicitly: the sorted sample and, per
    level, the intervals with at least two points (an occupied interval not listed holds one point).

    Built in one sort plus one pass per level over a byte array; no interval is enumerated.
    """

    N: int
    L: int
    x: np.ndarray
    levels: tuple[DyadicLevel, ...]

    @staticmethod
    def build(values: np.ndarray, N: int) -> DyadicTable:
        """The table of the int64 sample ``values`` (in [0, N)).

        Adjacent sorted points share a level-j interval iff the bit length of their xor is <= j; the
        pairs sorted by that level (a radix sort) give the merged pairs of every level incrementally.
        """
        x = np.sort(np.asarray(values, dtype=np.int64))
        L = max(1, (N - 1).bit_length())
        n = len(x)
        merge = _bit_length(x[1:] ^ x[:-1]) if n > 1 else np.zeros(0, np.int8)
        order = np.argsort(merge, kind="stable")  # radix sort on int8; ties stay in position order
        upto = np.cumsum(np.bincount(merge, minlength=L + 1)) if n > 1 else np.zeros(L + 1, np.int64)
        levels = []
        merged = np.zeros(0, np.int64)  # sorted pair indices merged so far (sparse path)
        prev_c = 0
        for j in range(L):
            c = int(upto[j])
            if c <= n // 4:
                if c > prev_c:
                    merged = np.sort(np.concatenate((merged, order[prev_c:c])), kind="stable")
                brk = np.flatnonzero(np.diff(merged) != 1) if c else np.zeros(0, np.int64)
                s = merged[np.concatenate(([0], brk + 1))] if c else merged
                e = merged[np.concatenate((brk, [c - 1]))] + 1 if c else merged
            else:
                pad = np.zeros(n + 1, np.int8)
                pad[1:n] = merge <= j
                d = np.diff(pad)
                s = np.flatnonzero(d == 1)
                e = np.flatnonzero(d == -1)
            prev_c = c
            levels.append(DyadicLevel.of(x, j, s.astype(np.int64), (e - s + 1).astype(np.int64)))
        return DyadicTable(N, L, x, tuple(levels))

    def counts_at(self, j: int, q: np.ndarray) -> np.ndarray:
        """Counts of the level-j intervals ``q`` (any q in [0, 2^(L-j)))."""
        q = np.asarray(q, dtype=np.int64)
        out: np.ndarray = np.searchsorted(self.x, (q + 1) << j) - np.searchsorted(self.x, q << j)
        return out


def knots_cdf_at(P: np.ndarray, F: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The piecewise-linear CDF with knots (P, F) at integer points t (exact int64 offsets; flat
    outside the knots).

    >>> knots_cdf_at(np.array([-1, 3]), np.array([0.0, 1.0]), np.array([-1, 0, 3])).tolist()
    [0.0, 0.25, 1.0]
    """
    t = np.clip(np.asarray(t, dtype=np.int64), P[0], P[-1])
    k = np.clip(np.searchsorted(P, t, side="right") - 1, 0, len(P) - 2)
    span = (P[k + 1] - P[k]).astype(float)
    out: np.ndarray = F[k] + (F[k + 1] - F[k]) * ((t - P[k]).astype(float) / span)
    return out


def uniform_cdf(N: int) -> tuple[np.ndarray, np.ndarray]:
    """The uniform CDF on [N] as knots: positions (-1, N-1), values (0, 1).

    >>> uniform_cdf(4)[0].tolist()
    [-1, 3]
    """
    return np.array([-1, N - 1], dtype=np.int64), np.array([0.0, 1.0])


def _knots(value: Any, N: int) -> tuple[np.ndarray, np.ndarray]:
    P = np.asarray(value[0], dtype=np.int64)
    F = np.nan_to_num(np.asarray(value[1], dtype=float), nan=0.0, posinf=1.0, neginf=0.0)
    return P, F


def _groups(table: DyadicTable, P: np.ndarray, F: np.ndarray, scale: float,
            noise: NoiseSource) -> tuple[int, int]:
    """The exponential mechanism over all dyadic intervals of [0, 2^L): returns (j, q) of the chosen
    interval.  Intervals with equal scores (same level and CDF piece, same count) form one group,
    weighted by its size (:func:`~dpflow.nodes.expmech.report_noisy_max` over log-weights with
    log-size offsets, then a uniform member).  If no score is finite (only with a degenerate released
    CDF) the interval [0, 0] is returned (declared policy)."""
    n = len(table.x)
    top = (1 << table.L) - 1
    if P[-1] < top:
        P = np.append(P, np.int64(top))
        F = np.append(F, F[-1])
    span = (P[1:] - P[:-1]).astype(float)
    slope = (F[1:] - F[:-1]) / span
    inner = P[1:-1]
    logw: list[np.ndarray] = []
    meta: list[np.ndarray] = []  # rows: (kind, j, piece or q, rank)
    for j in range(table.L):
        size = 1 << j
        lo = (P[:-1] >> j) + 1
        hi = ((P[1:] + 1) >> j) - 1
        ok = hi >= lo
        lo, hi, a = lo[ok], hi[ok], n * slope[ok] * float(size)
        pieces = np.flatnonzero(ok)
        lev = table.levels[j]
        pts = np.searchsorted(table.x, (hi + 1) << j) - np.searchsorted(table.x, lo << j)
        i0 = np.searchsorted(lev.q, lo)
        i1 = np.searchsorted(lev.q, hi + 1)
        mass = lev.cum[i1] - lev.cum[i0]
        singles = pts - mass
        empties = (hi - lo + 1) - (i1 - i0) - singles
        for kind, cnt, sc in ((0, empties, np.abs(a)), (1, singles, np.abs(a - 1.0))):
            has = cnt > 0
            logw.append(scale * sc[has] + np.log(cnt[has].astype(float)))
            meta.append(np.stack([np.full(int(has.sum()), kind), np.full(int(has.sum()), j), pieces[has],
                                  np.zeros(int(has.sum()), np.int64)], axis=1))
        if len(lev.values):
            rk = np.arange(len(lev.values), dtype=np.int64)[:, None] << 32
            g = np.searchsorted(lev.keys, rk | i1[None, :]) - np.searchsorted(lev.keys, rk | i0[None, :])
            rr, kk = np.nonzero(g > 0)
            sc = np.abs(a[kk] - lev.values[rr].astype(float))
            logw.append(scale * sc + np.log(g[rr, kk].astype(float)))
            meta.append(np.stack([np.full(len(rr), 2), np.full(len(rr), j), pieces[kk], rr], axis=1))
        straddle = inner[(inner & (size - 1)) != size - 1]
        if len(straddle):
            qs = np.unique(straddle >> j)
            c = table.counts_at(j, qs)
            aj = knots_cdf_at(P, F, ((qs + 1) << j) - 1) - knots_cdf_at(P, F, (qs << j) - 1)
            logw.append(scale * np.abs(n * aj - c))
            meta.append(np.stack([np.full(len(qs), 3), np.full(len(qs), j), qs, np.zeros(len(qs), np.int64)],
                                 axis=1))
    lw = np.concatenate(logw)
    mt = np.concatenate(meta)
    win = report_noisy_max(lw, noise)
    if win is None:
        return 0, 0
    kind, j, k, r = (int(v) for v in mt[win].tolist())
    if kind == 3:
        return j, k
    lo_k = (int(P[k]) >> j) + 1
    hi_k = ((int(P[k + 1]) + 1) >> j) - 1
    lev = table.levels[j]
    w0 = int(np.searchsorted(lev.q, lo_k))
    w1 = int(np.searchsorted(lev.q, hi_k + 1))
    if kind == 2:
        base = int(r) << 32
        s0 = int(np.searchsorted(lev.keys, base | w0))
        s1 = int(np.searchsorted(lev.keys, base | w1))
        member = int(lev.keys[s0 + noise.uniform_int(s1 - s0)]) & 0xFFFFFFFF
        return j, int(lev.q[member])
    p0 = int(np.searchsorted(table.x, lo_k << j))
    p1 = int(np.searchsorted(table.x, (hi_k + 1) << j))
    if kind == 1:  # the t-th point of the piece that is alone in its interval
        blocks = lev.start[w0:w1]
        before = blocks - p0 - (lev.cum[w0:w1] - lev.cum[w0])
        t = noise.uniform_int((p1 - p0) - int(lev.cum[w1] - lev.cum[w0]))
        b = int(np.searchsorted(before, t, side="right"))
        idx = p0 + t + int(lev.cum[w0 + b] - lev.cum[w0])
        return j, int(table.x[idx] >> j)
    occ = table.x[p0:p1] >> j  # sorted, with repeats: the occupied q's of the piece
    occ = occ[np.concatenate(([True], occ[1:] != occ[:-1]))] if len(occ) else occ
    t = noise.uniform_int((hi_k - lo_k + 1) - len(occ))
    missing = occ - lo_k - np.arange(len(occ))  # empty q's before each occupied one
    b = int(np.searchsorted(missing, t, side="right"))
    return j, lo_k + t + b


@attrs.frozen(kw_only=True)
class DyadicCounts(Query):
    """The counts of all dyadic intervals ``[q 2^j, (q+1) 2^j)`` of [0, 2^L), L = ceil(log2 N), j < L,
    of ordinal rows (values outside [0, N) clamped to the ends; N <= 2**62 held exactly in int64).

    A record lies in one interval per level: linf 1 (a replaced record changes any one count by at
    most 1), l1 2L (replace) or L (add/remove).  The value is a :class:`DyadicTable` (implicit, built
    once); :class:`DyadicExpMech` scores intervals from it.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    >>> c = DyadicCounts(N=2**40)(b.source("X", dp.Ordinal(N=2**40), n=10))
    """

    kind: ClassVar[str] = "DyadicCounts"
    reference: ClassVar[Reference] = Reference("DHS 2015 Fig. 2 scores; one record per level",
                                               "sparse_discrete_heavy.md", "4.5-4.6")
    N: int

    def __attrs_post_init__(self) -> None:
        if not 2 <= self.N <= MAX_N:
            raise ValueError(f"DyadicCounts needs 2 <= N <= 2**62, got N={self.N}")

    def levels(self) -> int:
        """L = ceil(log2 N): the number of levels."""
        return (self.N - 1).bit_length()

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        _one_dim(rows, ctx, "DyadicCounts")
        # the scores |n A(J) - c(J)| use the row count: with a private count (a value piece, add/remove)
        # one record moves them by up to max |A(J)|, which a released CDF does not bound by 1
        public_n(rows, ctx, "DyadicCounts (the MERR scores use n)")
        L = float(self.levels())
        l1 = change_bound(rows, Sym.const(2.0 * L), Sym.const(L))
        l2 = change_bound(rows, Sym.const(math.sqrt(2.0 * L)), Sym.const(math.sqrt(L)))
        linf = change_bound(rows, Sym.const(1.0), Sym.const(1.0))
        n_int = 2 ** (self.levels() + 1) - 1
        return Inferred(StatT((n_int,), rows.source, l1, l2, linf),
                        f"DyadicCounts over [{self.N}], L={int(L)} levels, {changes_text(rows)}: "
                        f"linf {text_of(linf)}, l1 {text_of(l1)}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        return DyadicTable.build(ordinal_values(ins[0], self.N), self.N)


def _opt_ref(x: Any) -> Ref | None:
    return None if x is None else param(x)


@attrs.frozen(kw_only=True)
class DyadicExpMech(EpsilonMechanism):
    """The exponential mechanism over *all* dyadic intervals of [0, 2^L): picks J with probability
    proportional to ``exp(eps q(J) / (2 Delta))``, ``q(J) = |n A(J) - c(J)|`` where A is the released
    hypothesis CDF ``cdf`` (knots; ``None``: uniform on [N]) and Delta the linf sensitivity of the
    counts (1).  The candidate set is data-independent, so this is pure eps-DP (McSherry-Talwar 2007);
    in zCDP mode eps = sqrt(2 rho) (Bun-Steinke 2016 Prop. 1.4).  MERR's FindBadInterval
    (DHS 2015 Fig. 2) with the exact sampler of sparse_discrete_heavy.md 4.5: intervals with equal
    scores are grouped, so a round costs O((m + D) L log n), never one step per occupied interval.
    Needs replace-one neighbours (n public).  Output: the interval ``[a, b]`` as int64 (``[0, 0]`` if no
    score is finite, which only a degenerate released CDF can cause: declared policy).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    >>> J = DyadicExpMech()(DyadicCounts(N=1024)(b.source("X", dp.Ordinal(N=1024), n=10)))
    """

    kind: ClassVar[str] = "DyadicExpMech"
    pure_capable: ClassVar[bool] = True
    gaussian_profile: ClassVar[bool] = False
    reference: ClassVar[str] = (
        "exponential mechanism (McSherry-Talwar 2007; Dwork-Roth 2014 Thm 3.10) over all dyadic intervals, "
        "Gumbel-max sampling; DHS 2015 Fig. 2 scores; zCDP via Bun-Steinke 2016 Prop. 1.4"
    )
    cdf: Ref | None = attrs.field(default=None, converter=_opt_ref)
    weight: float = attrs.field(default=1.0, converter=positive)
    epsilon: Fraction | None = attrs.field(default=None, converter=opt_exact)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        stat: StatT = need(ins, StatT, ctx, "DyadicCounts")
        if self.cdf is not None:
            released_type(self.cdf, ctx, "cdf")
        if ctx.relation != "replace":
            raise DomainError(ctx.node_id, "the score n A(J) - c(J) needs the public n of replace-one neighbours",
                              "declare neighbors='replace'")
        return Inferred(ReleasedT((2,)), f"{stat.shape[0]} dyadic candidates")

    def check_input(self, stat: StatT, ctx: InferContext) -> str:
        if stat.linf is None or not stat.linf.is_const or len(stat.shape) != 1:
            raise UnboundedSensitivityError(ctx.node_id, "the scores need the constant linf bound of DyadicCounts",
                                            "feed it DyadicCounts(N)(rows)")
        return f"score sensitivity = linf of the counts = {stat.linf.text()}"

    def noise_text(self, stat: StatT, share: Fraction, mode: Mode) -> str:
        e = float(self.eps(share, mode))
        return f"exponential mechanism, eps={e:.6g}: P(J) ~ exp(eps q(J) / (2*{text_of(stat.linf)}))"

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        table: DyadicTable = ins[0]
        alloc = ctx.allocation()
        assert ctx.stat().linf is not None
        delta = ctx.bound(ctx.stat().linf)  # type: ignore[arg-type]
        e = float(self.eps(alloc.share, alloc.mode))
        ctx.record("epsilon", e)
        P, F = uniform_cdf(table.N) if self.cdf is None else _knots(ctx.value(self.cdf), table.N)
        j, q = _groups(table, P, F, e / (2.0 * delta), ctx.noise)
        return np.array([q << j, ((q + 1) << j) - 1], dtype=np.int64)


@attrs.frozen(kw_only=True)
class IntervalCounts(Query):
    """The counts of ``[0, a)`` and ``[a, b]`` for a released interval ``[a, b]`` (MERR's Update).

    A replaced record can leave one of the two cells and enter the other: l1 2 (DHS's code assumed 1,
    valid only under add/remove: spec issue U1), linf 1; add/remove: 1.  ``normalize`` (default)
    divides by the public n.  Values outside [0, N) were clamped by the source.

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

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        _one_dim(rows, ctx, "IntervalCounts")
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
        X = np.asarray(ins[0])
        x = X.reshape(-1) if X.ndim <= 1 else X[:, 0]
        below = float(np.count_nonzero(x < a))
        upto = float(np.count_nonzero(x <= b))
        out = np.array([below, max(upto - below, 0.0)])
        return out / ctx.backend.nrows(X) if self.normalize else out


def add_knots(N: int, cdf: Any, interval: Any, weights: Any) -> tuple[np.ndarray, np.ndarray]:
    """MERR's Update as post-processing: add the knots ``(a - 1, w_left)`` and ``(b, w_left + w_in)``
    to the CDF (only strictly inside (-1, N-1) and not already knots; DHS's code), ``b`` clamped to N-1.

    >>> P, F = add_knots(8, uniform_cdf(8), np.array([2, 5]), np.array([0.25, 0.5]))
    >>> P.tolist(), F.tolist()
    ([-1, 1, 5, 7], [0.0, 0.25, 0.75, 1.0])
    """
    P, F = _knots(cdf, N)
    iv = np.asarray(interval).reshape(-1)
    w = np.nan_to_num(np.asarray(weights, dtype=float).reshape(-1), nan=0.0)
    a, b = int(iv[0]), min(int(iv[1]), N - 1)
    new_p = [a - 1, b]
    new_f = [float(w[0]), float(w[0] + w[1])]
    for p, f in zip(new_p, new_f, strict=True):
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
    N: int

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        if len(ins) not in (2, 3):
            raise PlanTypeError(ctx.node_id, f"AddKnots takes 2 or 3 inputs, got {len(ins)}",
                                "pass (interval, weights) or (cdf, interval, weights)")
        return super().infer(ins, ctx)

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        cdf = uniform_cdf(self.N) if len(ins) == 2 else ins[0]
        return add_knots(self.N, cdf, ins[-2], ins[-1])


# --------------------------------------------------------------------------- PPDE truncated mean


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
    mask: Ref | None = attrs.field(default=None, converter=_opt_ref)
    flip: Ref | None = attrs.field(default=None, converter=_opt_ref)
    radius: Ref | None = attrs.field(default=None, converter=_opt_ref)

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
            r = Sym.ref(self.radius.id)
            l2r = r * float(rows.stability) / n
            fe = FloatError("mean", Vectors(d=dom.d, l2_bound=Sym.const(math.sqrt(dom.d))), rows.size.sym())
            return Inferred(StatT((dom.d,), rows.source, r.pow(2) * float(rows.stability) / n, l2r,
                                  Sym.const(float(rows.stability)) / n, float_error=fe),
                            f"truncated mean of [0,1]^{dom.d} rows, rows with 2 sum > r^2 zeroed (r = "
                            f"{self.radius.id}), n={rows.size.text()}, {changes_text(rows)}: l2 = r/n = {l2r.text()}")
        t_eff = dom.d if self.tau is None else min(self.tau, dom.d)
        sq = min(2 * t_eff, dom.d)  # also ||y - y'||^2 <= d in the unit box
        l2 = Sym.const(math.sqrt(sq) * rows.stability) / n
        l1 = Sym.const(float(sq) * rows.stability) / n
        linf = Sym.const(float(rows.stability)) / n
        fe = FloatError("mean", Vectors(d=dom.d, l2_bound=Sym.const(math.sqrt(t_eff))), rows.size.sym())
        return Inferred(StatT((dom.d,), rows.source, l1, l2, linf, float_error=fe),
                        f"truncated mean of [0,1]^{dom.d} rows, tau={t_eff}, n={rows.size.text()}, "
                        f"{changes_text(rows)}: l2 = sqrt(min(2 tau, d))/n = {l2.text()}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        X = np.clip(np.nan_to_num(np.asarray(ins[0], dtype=float), nan=0.0), 0.0, 1.0)
        d = X.shape[1]
        if self.flip is not None:
            f = np.asarray(ctx.value(self.flip), dtype=float).reshape(-1)[:d] != 0
            X = np.where(f[None, :], 1.0 - X, X)
        if self.mask is not None:
            X = X * (np.asarray(ctx.value(self.mask), dtype=float).reshape(-1)[:d] != 0)[None, :]
        if self.tau is not None:
            X = X * (X.sum(axis=1) <= self.tau)[:, None]
        if self.radius is not None:
            r2 = capped(float(np.asarray(ctx.value(self.radius), dtype=float).reshape(-1)[0])) ** 2  # radius policy
            if r2 < d:  # the margin keeps the rounding of r * r from admitting a row past the bound
                X = X * (2.0 * X.sum(axis=1) <= r2 * (1.0 - 1e-12))[:, None]
        out: np.ndarray = X.sum(axis=0) / ctx.backend.nrows(ins[0])
        return out


__all__ = [
    "AddKnots", "BinCounts", "DyadicCounts", "DyadicExpMech", "DyadicTable", "IntervalCounts", "OrdinalCounts",
    "SparseCounts", "StabilityHistogram", "TruncatedBinaryMean", "add_knots", "ordinal_values",
    "stable_mode", "uniform_cdf",
]
