"""The dyadic-interval statistic and the exact exponential mechanism over all dyadic intervals used by
MERR (Diakonikolas-Hardt-Schmidt 2015, Fig. 2 FindBadInterval; McSherry-Talwar 2007), with the grouped
sampler of sparse_discrete_heavy.md 4.5-4.6: the counts of every dyadic interval of [0, 2^L) are held
implicitly (:class:`DyadicTable`), and intervals with equal scores are sampled as one group.

Declared policy (never a data-dependent exception): ordinal values outside [0, N) are clamped to the
ends and NaN counts as 0 (:func:`~dpflow.nodes.ordinal.ordinal_values`).

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

from dpflow.domains import Sym, integral
from dpflow.errors import DomainError, UnboundedSensitivityError
from dpflow.handles import Ref
from dpflow.nodes.base import EvalContext, InferContext, Query, change_bound, need, released_type, text_of
from dpflow.nodes.expmech import EXACT_REFERENCE, DistanceScores, exact_choice, report_noisy_max
from dpflow.nodes.mechanisms import EpsilonMechanism
from dpflow.nodes.ordinal import MAX_N, cdf_knots, knots_cdf_at, ordinal_values, uniform_cdf
from dpflow.nodes.params import optional_ref, positive
from dpflow.nodes.rules import changes_text, one_dim, public_n
from dpflow.nodes.types import Inferred, Mode, ReleasedT, RowsT, StatT, VType
from dpflow.noise_protocol import NoiseSource
from dpflow.privacy import BOUNDED_RANGE_REFERENCE, opt_exact
from dpflow.references import Reference


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
        elif int(count.max()) <= 4 * len(count) + 64:  # a histogram over the counts is no longer than they are
            hist = np.bincount(count)
            values = np.flatnonzero(hist)
            rank = (np.cumsum(hist > 0) - 1)[count]
        else:  # few intervals, one holding most points (high levels): never a histogram of length n
            values = np.unique(count)
            rank = np.searchsorted(values, count)
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

        One sort; then adjacent sorted points share a level-j interval iff the bit length of their xor
        is <= j, so each level's multi-point intervals are the runs of merged adjacent pairs, found from
        one byte scan of those bit lengths: from the merged pairs while they are few (low levels), from
        the breaks between intervals once those are fewer (high levels).  No per-level sort.
        """
        x = np.asarray(values, dtype=np.int64)
        if len(x) > 1 and not bool(np.all(x[1:] >= x[:-1])):  # the backend's sorted_values hands it sorted
            x = np.sort(x)
        L = max(1, (N - 1).bit_length())
        n = len(x)
        merge = _bit_length(x[1:] ^ x[:-1]) if n > 1 else np.zeros(0, np.int8)
        upto = np.cumsum(np.bincount(merge, minlength=L + 1)) if n > 1 else np.zeros(L + 1, np.int64)
        levels = []
        for j in range(L):
            c = int(upto[j])  # merged pairs at level j; the other n - 1 - c pairs are breaks
            if c == 0:
                s = e = np.zeros(0, np.int64)
            elif 2 * c <= n - 1:  # runs of merged pairs: pairs s..e-1 merged is points s..e
                m = np.flatnonzero(merge <= j)
                brk = np.flatnonzero(np.diff(m) != 1)
                s = m[np.concatenate(([0], brk + 1))]
                e = m[np.concatenate((brk, [c - 1]))] + 1
            else:  # intervals between breaks, keeping those of two or more points
                b = np.flatnonzero(merge > j)
                starts = np.concatenate(([0], b + 1))
                ends = np.concatenate((b, [n - 1]))
                multi = ends > starts
                s, e = starts[multi], ends[multi]
            levels.append(DyadicLevel.of(x, j, s.astype(np.int64), (e - s + 1).astype(np.int64)))
        return DyadicTable(N, L, x, tuple(levels))

    def counts_at(self, j: int, q: np.ndarray) -> np.ndarray:
        """Counts of the level-j intervals ``q`` (any q in [0, 2^(L-j)))."""
        q = np.asarray(q, dtype=np.int64)
        out: np.ndarray = np.searchsorted(self.x, (q + 1) << j) - np.searchsorted(self.x, q << j)
        return out


def _groups(table: DyadicTable, P: np.ndarray, F: np.ndarray, scale: float,
            noise: NoiseSource, beta: Fraction | None = None) -> tuple[int, int]:
    """The exponential mechanism over all dyadic intervals of [0, 2^L): returns (j, q) of the chosen
    interval.  Intervals with equal scores (same level and CDF piece, same count) form one group,
    weighted by its size, then a uniform member.  A group's score is ``|a - c|``, ``a`` the public expected
    count ``n A(J)`` (a float, computed from the released CDF alone) and ``c`` the integer count, so one record
    moves it by at most 1 exactly.  Continuous sources: :func:`~dpflow.nodes.expmech.report_noisy_max` over
    the log-weights ``scale |a - c| + log(size)``; exact sources (``beta`` = eps / (2 Delta), exact):
    :func:`~dpflow.nodes.expmech.exact_choice` over the weights ``size exp(beta |a - c|)``.  If no score is
    finite (only with a degenerate released CDF) the interval [0, 0] is returned (declared policy)."""
    n = len(table.x)
    top = (1 << table.L) - 1
    if P[-1] < top:
        P = np.append(P, np.int64(top))
        F = np.append(F, F[-1])
    span = (P[1:] - P[:-1]).astype(float)
    slope = (F[1:] - F[:-1]) / span
    inner = P[1:-1]
    expected: list[np.ndarray] = []  # a: the public n A(J) of each group
    counted: list[np.ndarray] = []   # c: its members' count
    sizes: list[np.ndarray] = []     # its number of members
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
        for kind, cnt, one in ((0, empties, 0.0), (1, singles, 1.0)):
            has = cnt > 0
            expected.append(a[has])
            counted.append(np.full(int(has.sum()), one))
            sizes.append(cnt[has])
            meta.append(np.stack([np.full(int(has.sum()), kind), np.full(int(has.sum()), j), pieces[has],
                                  np.zeros(int(has.sum()), np.int64)], axis=1))
        if len(lev.values):
            rk = np.arange(len(lev.values), dtype=np.int64)[:, None] << 32
            g = np.searchsorted(lev.keys, rk | i1[None, :]) - np.searchsorted(lev.keys, rk | i0[None, :])
            rr, kk = np.nonzero(g > 0)
            expected.append(a[kk])
            counted.append(lev.values[rr].astype(float))
            sizes.append(g[rr, kk])
            meta.append(np.stack([np.full(len(rr), 2), np.full(len(rr), j), pieces[kk], rr], axis=1))
        straddle = inner[(inner & (size - 1)) != size - 1]
        if len(straddle):
            qs = np.unique(straddle >> j)
            c = table.counts_at(j, qs)
            aj = knots_cdf_at(P, F, ((qs + 1) << j) - 1) - knots_cdf_at(P, F, (qs << j) - 1)
            expected.append(n * aj)
            counted.append(c.astype(float))
            sizes.append(np.ones(len(qs), np.int64))
            meta.append(np.stack([np.full(len(qs), 3), np.full(len(qs), j), qs, np.zeros(len(qs), np.int64)],
                                 axis=1))
    A, C, S = np.concatenate(expected), np.concatenate(counted), np.concatenate(sizes).astype(np.int64)
    mt = np.concatenate(meta)
    if beta is not None:
        win, _ = exact_choice(DistanceScores(beta, A, C, 1), S, noise.uniform_words)
    else:
        win = report_noisy_max(scale * np.abs(A - C) + np.log(S.astype(float)), noise)
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
    N: int = attrs.field(converter=integral)

    def __attrs_post_init__(self) -> None:
        if not 2 <= self.N <= MAX_N:
            raise ValueError(f"DyadicCounts needs 2 <= N <= 2**62, got N={self.N}")

    def levels(self) -> int:
        """L = ceil(log2 N): the number of levels."""
        return (self.N - 1).bit_length()

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        one_dim(rows, ctx, "DyadicCounts")
        # the scores |n A(J) - c(J)| use the row count: with a private count (a value piece, add/remove)
        # one record moves them by up to max |A(J)|, which a released CDF does not bound by 1
        public_n(rows, ctx, "DyadicCounts (the MERR scores use n)")
        L = float(self.levels())
        l1 = change_bound(rows, Sym.const(2.0 * L), Sym.const(L))
        l2 = change_bound(rows, Sym.const(math.sqrt(2.0 * L)), Sym.const(math.sqrt(L)))
        linf = change_bound(rows, Sym.const(1.0), Sym.const(1.0))
        n_int = 2 ** (self.levels() + 1) - 2  # 2^(L - j) intervals at each level j < L
        return Inferred(StatT((n_int,), rows.source, l1, l2, linf),
                        f"DyadicCounts over [{self.N}], L={int(L)} levels, {changes_text(rows)}: "
                        f"linf {text_of(linf)}, l1 {text_of(l1)}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        N = self.N
        return DyadicTable.build(ctx.backend.sorted_values(ins[0], lambda Z: ordinal_values(Z, N)), N)


@attrs.frozen(kw_only=True)
class DyadicExpMech(EpsilonMechanism):
    """The exponential mechanism over *all* dyadic intervals of [0, 2^L): picks J with probability
    proportional to ``exp(eps q(J) / (2 Delta))``, ``q(J) = |n A(J) - c(J)|`` where A is the released
    hypothesis CDF ``cdf`` (knots; ``None``: uniform on [N]) and Delta the linf sensitivity of the
    counts (1).  The candidate set is data-independent, so this is pure eps-DP (McSherry-Talwar 2007) and
    eps-bounded range (the score moves by at most Delta), hence eps^2/8-zCDP (Cesar-Rogers 2021): in zCDP
    mode eps = sqrt(8 rho).  MERR's FindBadInterval
    (DHS 2015 Fig. 2) with the exact sampler of sparse_discrete_heavy.md 4.5: intervals with equal
    scores are grouped, so a round costs O((m + D) L log n), never one step per occupied interval; under an
    exact source the group is drawn by :func:`~dpflow.nodes.expmech.exact_choice` (no float decides it).
    Needs replace-one neighbours (n public).  Output: the interval ``[a, b]`` as int64 (``[0, 0]`` if no
    score is finite, which only a degenerate released CDF can cause: declared policy).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    >>> J = DyadicExpMech()(DyadicCounts(N=1024)(b.source("X", dp.Ordinal(N=1024), n=10)))
    """

    kind: ClassVar[str] = "DyadicExpMech"
    pure_capable: ClassVar[bool] = True
    gaussian_profile: ClassVar[bool] = False
    bounded_range: ClassVar[bool] = True
    reference: ClassVar[str] = (
        "exponential mechanism (McSherry-Talwar 2007; Dwork-Roth 2014 Thm 3.10) over all dyadic intervals, "
        f"Gumbel-max sampling (continuous sources); DHS 2015 Fig. 2 scores; zCDP: {BOUNDED_RANGE_REFERENCE}; "
        f"exact sources: {EXACT_REFERENCE.text}"
    )
    cdf: Ref | None = attrs.field(default=None, converter=optional_ref)
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
        return (f"exponential mechanism, eps={e:.6g}: P(J) ~ exp(eps q(J) / (2*{text_of(stat.linf)})); exact sources: "
                "sampled exactly")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        table: DyadicTable = ins[0]
        alloc = ctx.allocation()
        assert ctx.stat().linf is not None
        delta = ctx.bound(ctx.stat().linf)  # type: ignore[arg-type]
        e = float(self.eps(alloc.share, alloc.mode))
        ctx.record("epsilon", e)
        P, F = uniform_cdf(table.N) if self.cdf is None else cdf_knots(ctx.value(self.cdf))
        beta = self.eps(alloc.share, alloc.mode) / (2 * Fraction(delta)) if ctx.noise.exact else None
        j, q = _groups(table, P, F, e / (2.0 * delta), ctx.noise, beta)
        return np.array([q << j, ((q + 1) << j) - 1], dtype=np.int64)


__all__ = [
    "DyadicCounts", "DyadicExpMech", "DyadicLevel", "DyadicTable",
]
