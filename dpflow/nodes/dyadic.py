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

from collections.abc import Sequence
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np

from dpflow.domains import integral
from dpflow.errors import DomainError, UnboundedSensitivityError
from dpflow.handles import Ref
from dpflow.nodes.base import EvalContext, InferContext, Query, need, released_type, text_of
from dpflow.nodes.expmech import EXACT_REFERENCE, DistanceScores, exact_choice, report_noisy_max
from dpflow.nodes.mechanisms import EpsilonMechanism
from dpflow.nodes.ordinal import MAX_N, cdf_knots, knots_cdf_at, ordinal_values, uniform_cdf
from dpflow.nodes.params import optional_ref, positive
from dpflow.nodes.rules import changes_text, dyadic_sensitivities, one_dim, public_n
from dpflow.nodes.types import DyadicT, Inferred, Mode, ReleasedT, RowsT, StatT, VType
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
    ``keys`` = ``rank(count) << 32 | i`` sorted (group members by count), ``values`` the distinct counts,
    ``rank`` (int32) the rank of each interval's count in ``values``.
    """

    q: np.ndarray
    count: np.ndarray
    start: np.ndarray
    cum: np.ndarray
    keys: np.ndarray
    values: np.ndarray
    rank: np.ndarray

    @staticmethod
    def of(x: np.ndarray, j: int, start: np.ndarray, count: np.ndarray) -> DyadicLevel:
        """The level from the start index and point count (int64) of each multi-point interval."""
        if len(count) == 0:
            values = np.zeros(0, np.int64)
            rank = np.zeros(0, np.int32)
        elif int(count.max()) <= 4 * len(count) + 64:  # a histogram over the counts is no longer than they are
            hist = np.bincount(count)
            values = np.flatnonzero(hist)
            rank = (np.cumsum(hist > 0) - 1).astype(np.int32)[count]
        else:  # few intervals, one holding most points (high levels): never a histogram of length n
            values = np.unique(count)
            rank = np.searchsorted(values, count).astype(np.int32)
        # positions sorted by rank, in order within a rank (a stable sort; radix while ranks fit 16 bits), then
        # keys = rank << 32 | position with the ranks laid out by their sizes (no gather of the ranks)
        order = np.argsort(rank.astype(np.uint16) if len(values) < 2**16 else rank, kind="stable")
        sizes = np.bincount(rank, minlength=len(values))
        keys = np.repeat(np.arange(len(values), dtype=np.int64) << 32, sizes) | order
        cum = np.zeros(len(count) + 1, np.int64)
        np.cumsum(count, out=cum[1:])
        q = x[start]
        q >>= j
        return DyadicLevel(q, count, start, cum, keys, values.astype(np.int64), rank)


def _runs(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, count) of the runs of consecutive merged pairs ``m`` (sorted): pairs s..e-1 merged is points s..e."""
    brk = np.flatnonzero(np.diff(m) != 1)
    first = m[np.concatenate(([0], brk + 1))]
    last = m[np.concatenate((brk, [len(m) - 1]))]
    return first, last - first + 2


def _segments(b: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, count) of the segments of n points between the breaks ``b`` (sorted pairs) that hold two or more."""
    edges = np.concatenate(([-1], b, [n - 1]))  # segment k is points edges[k] + 1 .. edges[k + 1]
    size = np.diff(edges)
    multi = np.flatnonzero(size >= 2)
    return edges[multi] + 1, size[multi]


@attrs.frozen(eq=False)
class DyadicTable:
    """The counts of every dyadic interval of [0, 2^L), held implicitly: the sorted sample and, per
    level, the intervals with at least two points (an occupied interval not listed holds one point).

    Built from the sorted sample with no further sort of the points; no interval is enumerated.
    """

    N: int
    L: int
    x: np.ndarray
    levels: tuple[DyadicLevel, ...]

    @staticmethod
    def build(values: np.ndarray, N: int) -> DyadicTable:
        """The table of the int64 sample ``values`` (in [0, N)).

        One sort; then adjacent sorted points share a level-j interval iff the bit length of their xor
        is <= j, so each level's multi-point intervals are the runs of merged adjacent pairs (low levels, while
        they are at most half the pairs) or the segments between breaks (high levels).  The merged pairs of a
        level are those of the next level up whose bit length is <= j, the breaks those of the level below whose
        bit length is > j: each level filters the previous one's list (two scans of all pairs in all).
        """
        x = np.asarray(values, dtype=np.int64)
        if len(x) > 1 and not bool(np.all(x[1:] >= x[:-1])):  # the backend's sorted_values hands it sorted
            x = np.sort(x)
        L = max(1, (N - 1).bit_length())
        n = len(x)
        merge = _bit_length(x[1:] ^ x[:-1]) if n > 1 else np.zeros(0, np.int8)
        upto = np.cumsum(np.bincount(merge, minlength=L + 1)) if n > 1 else np.zeros(L + 1, np.int64)
        none = np.zeros(0, np.int64)
        runs: list[tuple[np.ndarray, np.ndarray]] = [(none, none)] * L
        low = [j for j in range(L) if 0 < 2 * int(upto[j]) <= n - 1]  # upto[j] merged pairs at level j
        m: np.ndarray | None = None
        for j in reversed(low):
            m = np.flatnonzero(merge <= j) if m is None else m[merge[m] <= j]
            runs[j] = _runs(m)
        b: np.ndarray | None = None
        for j in range(low[-1] + 1 if low else 0, L):
            if upto[j] == 0:
                continue
            b = np.flatnonzero(merge > j) if b is None else b[merge[b] > j]
            runs[j] = _segments(b, n)
        return DyadicTable(N, L, x, tuple(DyadicLevel.of(x, j, s, c) for j, (s, c) in enumerate(runs)))

    def counts_at(self, j: int, q: np.ndarray) -> np.ndarray:
        """Counts of the level-j intervals ``q`` (any q in [0, 2^(L-j)))."""
        q = np.asarray(q, dtype=np.int64)
        out: np.ndarray = np.searchsorted(self.x, (q + 1) << j) - np.searchsorted(self.x, q << j)
        return out


def _rank_counts(lev: DyadicLevel, i0: np.ndarray, i1: np.ndarray) -> np.ndarray:
    """``g[r, k]``: how many of the level's multi-point intervals ``i0[k] <= i < i1[k]`` hold ``values[r]`` points.
    By binary search in ``keys`` (2 R m searches), or, when the ranges hold fewer intervals than that (they are
    disjoint: one per piece of the CDF), from the ranks of those intervals in one histogram; the same counts."""
    R, M = len(lev.values), len(i0)
    width = i1 - i0
    total = int(width.sum())
    if total <= 8 * R * M:
        piece = np.repeat(np.arange(M, dtype=np.int64), width)
        pos = np.arange(total, dtype=np.int64) + np.repeat(i0 - (np.cumsum(width) - width), width)
        out: np.ndarray = np.bincount(lev.rank[pos] * np.int64(M) + piece, minlength=R * M).reshape(R, M)
        return out
    rk = np.arange(R, dtype=np.int64)[:, None] << 32
    found: np.ndarray = np.searchsorted(lev.keys, rk | i1[None, :]) - np.searchsorted(lev.keys, rk | i0[None, :])
    return found


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
    js = np.arange(table.L, dtype=np.int64)[:, None]
    # the whole level-j intervals q = lo..hi inside each CDF piece k, every level at once, by level then piece
    lo_all = (P[None, :-1] >> js) + 1
    hi_all = ((P[None, 1:] + 1) >> js) - 1
    jj, kk = np.nonzero(hi_all >= lo_all)
    lo, hi = lo_all[jj, kk], hi_all[jj, kk]
    a = (n * slope)[kk] * np.ldexp(1.0, jj)  # the public n A(J) of each of them: n slope 2^j
    pts = np.searchsorted(table.x, (hi + 1) << jj) - np.searchsorted(table.x, lo << jj)
    bounds = np.searchsorted(jj, np.arange(table.L + 1))
    i0, i1, mass = np.empty_like(lo), np.empty_like(lo), np.empty_like(lo)
    ranked: list[tuple[np.ndarray, ...]] = []  # per level: (a, count, size, j, piece, rank) of the count groups
    for j in range(table.L):
        s, e = int(bounds[j]), int(bounds[j + 1])
        if s == e:
            continue
        lev = table.levels[j]
        i0[s:e] = np.searchsorted(lev.q, lo[s:e])
        i1[s:e] = np.searchsorted(lev.q, hi[s:e] + 1)
        mass[s:e] = lev.cum[i1[s:e]] - lev.cum[i0[s:e]]
        if len(lev.values):
            g = _rank_counts(lev, i0[s:e], i1[s:e])
            rr, kr = np.nonzero(g > 0)
            ranked.append((a[s:e][kr], lev.values[rr].astype(float), g[rr, kr], np.full(len(rr), j), kk[s:e][kr], rr))
    singles = pts - mass
    empties = (hi - lo + 1) - (i1 - i0) - singles
    # the intervals holding an inner knot p and p + 1 (p not the last point of its level-j interval), by level
    # then q, each once
    sj, sk = np.nonzero((inner[None, :] & ((1 << js) - 1)) != (1 << js) - 1)
    qv = inner[sk] >> sj
    order = np.lexsort((qv, sj))
    sj, qv = sj[order], qv[order]
    first = np.ones(len(sj), bool)
    first[1:] = (sj[1:] != sj[:-1]) | (qv[1:] != qv[:-1])
    sj, qv = sj[first], qv[first]
    straddling = np.searchsorted(table.x, (qv + 1) << sj) - np.searchsorted(table.x, qv << sj)
    aj = knots_cdf_at(P, F, ((qv + 1) << sj) - 1) - knots_cdf_at(P, F, (qv << sj) - 1)
    # the groups: per level, the empty intervals of each piece (kind 0), the one-point ones (1), the multi-point
    # ones by count (2), the straddling ones (3)
    parts: list[tuple[np.ndarray, ...]] = []  # (a, c, size, kind, j, piece or q, rank) of each group
    for kind, cnt, c in ((0, empties, 0.0), (1, singles, 1.0)):
        has = cnt > 0
        lv = jj[has]
        parts.append((a[has], np.full(len(lv), c), cnt[has], np.full(len(lv), kind), lv, kk[has], np.zeros_like(lv)))
    parts += [(ar, cr, gr, np.full(len(jr), 2), jr, pr, rr) for ar, cr, gr, jr, pr, rr in ranked]
    parts.append((n * aj, straddling.astype(float), np.ones(len(qv), np.int64), np.full(len(qv), 3), sj, qv,
                  np.zeros_like(sj)))
    A, C, S, kinds, levels, ks, ranks = (np.concatenate(col) for col in zip(*parts, strict=True))
    by = np.argsort(levels * 4 + kinds, kind="stable")  # level by level, in that order of kinds
    A, C, S = A[by], C[by], S[by].astype(np.int64)
    mt = np.stack([kinds, levels, ks, ranks], axis=1)[by]
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
        L = self.levels()
        l1, l2, linf = dyadic_sensitivities(rows, L)
        n_int = 2 ** (L + 1) - 2  # 2^(L - j) intervals at each level j < L
        return Inferred(DyadicT((n_int,), rows.source, l1, l2, linf),
                        f"DyadicCounts over [{self.N}], L={L} levels, {changes_text(rows)}: "
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
        if not isinstance(stat, DyadicT) or stat.linf is None or not stat.linf.is_const or len(stat.shape) != 1:
            raise UnboundedSensitivityError(ctx.node_id, "the scores need DyadicCounts' table and its constant linf "
                                            "bound", "feed it DyadicCounts(N)(rows)")
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
