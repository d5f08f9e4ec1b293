"""Private distributions on an ordinal domain [N] (Diakonikolas-Hardt-Schmidt 2015, "Differentially
private learning of structured discrete distributions"): the Laplace histogram, the t-histogram over a
public partition, MERR (private Kolmogorov approximation, pure DP), its k-piece histogram
post-processing, and the error metrics of the DHS experiments.

A distribution estimate is a piecewise-linear CDF given by knots ``(P, F)``: int64 positions
``P[0] = -1 < ... < P[-1] = N - 1`` and values ``F`` with ``F[0] = 0``; on the integers
``P[k] < x <= P[k+1]`` the mass per point is ``(F[k+1] - F[k]) / (P[k+1] - P[k])``.  A histogram with
integer edges ``e`` and masses ``m`` is the CDF with knots ``e - 1`` and ``cumsum(m)`` (:func:`histogram_cdf`).

>>> import numpy as np, dpflow as dp
>>> plan = merr(N=10**18, n=10_000, budget=dp.PureDP(1.0), T=5)
>>> x = np.random.default_rng(0).integers(0, 10**17, 10_000)
>>> P, F = plan.run({"X": x}, noise=dp.SeededNoise(0)).released["cdf"]
>>> kolmogorov_distance((P, F), lambda t: np.clip((t + 1) / 1e17, 0, 1)) < 0.2
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dpflow import nodes
from dpflow.domains import Ordinal
from dpflow.nodes.ordinal import MAX_N, knots_cdf_at, uniform_cdf
from dpflow.nodes.postprocess import accuracy_warning
from dpflow.plan import Plan, PlanBuilder
from dpflow.plan.graph import require_budget
from dpflow.privacy import ZCDP, ApproxDP, ApproxZCDP, Measure, PureDP, zcdp_rho_for_approx_dp

CDF = tuple[np.ndarray, np.ndarray]
Reference = Callable[[np.ndarray], np.ndarray] | CDF
"""A reference distribution: knots ``(P, F)`` or a function ``t -> P(X <= t)`` on int64 arrays."""

_SMALL_N = 2**22


def _check_budget(budget: Measure, name: str) -> None:
    require_budget(budget, name, (PureDP, ZCDP, ApproxDP, ApproxZCDP))


def _check_n(n: int) -> None:
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")


def project_simplex(v: Any) -> np.ndarray:
    """Euclidean projection onto the probability simplex (Duchi et al. 2008, Fig. 1); post-processing.

    >>> project_simplex(np.array([0.5, 0.7, -0.2])).tolist()
    [0.4, 0.6, 0.0]
    """
    x = np.nan_to_num(np.asarray(v, dtype=float).reshape(-1), nan=0.0)
    u = np.sort(x)[::-1]
    css = np.cumsum(u) - 1.0
    k = np.arange(1, len(x) + 1)
    rho = int(np.flatnonzero(u - css / k > 0)[-1]) + 1
    out: np.ndarray = np.maximum(x - css[rho - 1] / rho, 0.0)
    return out


def histogram_cdf(edges: Sequence[int], masses: Any) -> CDF:
    """The CDF knots of a histogram with integer ``edges`` (0 = e_0 < ... < e_k = N) and ``masses``.

    >>> P, F = histogram_cdf([0, 2, 4], [0.25, 0.75])
    >>> P.tolist(), F.tolist()
    ([-1, 1, 3], [0.0, 0.25, 1.0])
    """
    e = np.asarray([int(v) for v in edges], dtype=np.int64)
    m = np.asarray(masses, dtype=float).reshape(-1)
    return e - 1, np.concatenate(([0.0], np.cumsum(m)))


def laplace_histogram(N: int, n: int, budget: Measure) -> Plan:
    """The Laplace histogram learner on [N] for small N (DHS 2015 Thm 3; sparse_discrete_heavy.md 4.1).

    Counts of every value of [N], normalised by the public n (replace-one l1 sensitivity 2/n), plus
    Laplace noise ``2 / (n eps)``, projected onto the simplex (post-processing).  eps-DP under a
    ``PureDP`` budget; TV error O(sqrt(N/n) + N/(eps n)).  Source ``X`` (``Ordinal(N)``, values outside
    [0, N) clamped); output ``pmf`` (N masses).

    >>> import dpflow as dp
    >>> laplace_histogram(16, 1000, dp.PureDP(1.0)).check().totals[0].pure_eps
    Fraction(1, 1)
    """
    _check_budget(budget, "laplace_histogram")
    _check_n(n)
    if not 1 <= N <= _SMALL_N:
        raise ValueError(f"laplace_histogram enumerates [N]: needs 1 <= N <= 2**22, got N={N}; use merr or "
                         "t_histogram for large domains")
    b = PlanBuilder(budget=budget, neighbors="replace", name="laplace_histogram")
    X = b.source("X", Ordinal(N=N), n=n)
    noisy = nodes.LaplaceMech()(nodes.OrdinalCounts(edges=range(N + 1), normalize=True)(X))
    return b.build(pmf=nodes.Apply(fn=project_simplex, shape=(N,))(noisy))


def clip_normalise(v: Any) -> np.ndarray:
    """Masses clipped at 0 and renormalised (uniform when nothing is left); post-processing.

    >>> clip_normalise(np.array([0.5, -0.1, 0.5])).tolist()
    [0.5, 0.0, 0.5]
    """
    x = np.clip(np.nan_to_num(np.asarray(v, dtype=float).reshape(-1), nan=0.0), 0.0, None)
    s = float(x.sum())
    out: np.ndarray = x / s if s > 0 else np.full(len(x), 1.0 / len(x))
    return out


def t_histogram(edges: Sequence[int], n: int, budget: Measure) -> Plan:
    """The t-histogram over a public partition of [N] (DHS 2015 Thm 4; sparse_discrete_heavy.md 4.2).

    ``edges`` are integers 0 = e_0 < ... < e_t = N (N <= 2**62, exact).  Each part's count over the
    public n gets Laplace noise ``2 / (n eps)``; masses are clipped at 0 and renormalised.  eps-DP;
    error <= OPT_flatten + O(sqrt(t/n) + t/(eps n)).  Source ``X``; output ``masses`` (t values);
    :func:`histogram_cdf` turns them into a CDF.

    >>> import dpflow as dp
    >>> t_histogram([0, 10**9, 10**18], 1000, dp.PureDP(0.5)).check().totals[0].pure_eps
    Fraction(1, 2)
    """
    _check_budget(budget, "t_histogram")
    _check_n(n)
    e = [int(v) for v in edges]
    if len(e) < 2 or e[0] != 0 or e[-1] > MAX_N or any(q <= p for p, q in zip(e, e[1:], strict=False)):
        raise ValueError("t_histogram needs integer edges 0 = e_0 < ... < e_t = N <= 2**62")
    b = PlanBuilder(budget=budget, neighbors="replace", name="t_histogram")
    X = b.source("X", Ordinal(N=e[-1]), n=n)
    noisy = nodes.LaplaceMech()(nodes.OrdinalCounts(edges=e, normalize=True)(X))
    return b.build(masses=nodes.Apply(fn=clip_normalise, shape=(len(e) - 1,))(noisy))


def monotone_cdf(cdf: Any) -> CDF:
    """A released CDF made valid, as post-processing (free): the knot values are replaced by their
    least-squares non-decreasing fit (isotonic regression, pool-adjacent-violators) and clipped to
    [0, 1]; the end values stay ``F[0] = 0``, ``F[-1] = 1``.  Both steps are sup-norm contractions
    towards every non-decreasing sequence in [0, 1], so the Kolmogorov distance at the knots to any
    valid CDF never grows.

    >>> P, F = monotone_cdf((np.array([-1, 2, 5, 9]), np.array([0.0, 0.7, 0.5, 1.0])))
    >>> np.round(F, 12).tolist()
    [0.0, 0.6, 0.6, 1.0]
    >>> monotone_cdf((np.array([-1, 2, 5, 9]), np.array([0.0, -0.6, 2.0, 1.0])))[1].tolist()
    [0.0, 0.0, 1.0, 1.0]
    """
    from scipy.optimize import isotonic_regression

    P = np.asarray(cdf[0], dtype=np.int64)
    F = np.nan_to_num(np.asarray(cdf[1], dtype=float), nan=0.0, posinf=1.0, neginf=0.0)
    out = np.clip(isotonic_regression(F).x, 0.0, 1.0)
    out[0], out[-1] = 0.0, 1.0
    return P, out


MERR_BETA = 0.1
"""Failure probability of the per-round selection guarantee that :func:`merr_round_slack` states."""


def merr_round_epsilon(budget: Measure, T: int) -> float:
    """The epsilon of each of MERR's 2T pure-DP mechanisms, as the planner shares the budget by weight:
    ``eps / (2T)`` under ``PureDP``; ``sqrt(2 rho / (2T))`` under ``ZCDP``/``ApproxZCDP``; under
    ``ApproxDP(eps, delta)`` the smaller of the basic-composition and the CKS shares (a lower bound for
    warnings only; the ledger has the exact costs).

    >>> merr_round_epsilon(PureDP(1.0), 20), merr_round_epsilon(ZCDP(0.5), 20)
    (0.025, 0.15811388300841897)
    """
    if isinstance(budget, PureDP):
        return float(budget.epsilon) / (2 * T)
    if isinstance(budget, (ZCDP, ApproxZCDP)):
        return math.sqrt(float(budget.rho) / T)
    assert isinstance(budget, ApproxDP)
    basic = float(budget.epsilon) / (2 * T)
    if budget.delta == 0:
        return basic
    return min(basic, math.sqrt(float(zcdp_rho_for_approx_dp(budget.epsilon, budget.delta)) / T))


def merr_round_slack(N: int, n: int, budget: Measure, T: int) -> float:
    """The exponential mechanism's guarantee for one MERR round, in probability mass: with probability
    >= 1 - MERR_BETA the chosen interval's discrepancy is within ``(2 / (n eps_t)) ln(2^(L+1) / beta)``
    of the worst one (McSherry-Talwar 2007; L = ceil(log2 N), 2^(L+1) - 1 dyadic intervals).  A
    discrepancy is at most 1, so at 1/2 or more the rounds pick intervals nearly at random.

    >>> round(merr_round_slack(1000, 1000, PureDP(1.0), 20), 4)
    0.7942
    """
    L = (int(N) - 1).bit_length()
    return 2.0 * math.log(2.0 ** (L + 1) / MERR_BETA) / (n * merr_round_epsilon(budget, T))


def _merr_max_rounds(N: int, n: int, budget: Measure) -> int:
    """The largest T whose per-round slack is below 1/2 (0 if even T = 1 is not); the slack grows with T."""
    if merr_round_slack(N, n, budget, 1) >= 0.5:
        return 0
    lo, hi = 1, 2
    while merr_round_slack(N, n, budget, hi) < 0.5:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if merr_round_slack(N, n, budget, mid) < 0.5 else (lo, mid)
    return lo


def merr(N: int, n: int, budget: Measure, T: int = 20) -> Plan:
    """MERR, the Maximum Error Rule (DHS 2015 Fig. 2): a private piecewise-linear CDF on [N], N <= 2**62.

    Starting from the uniform CDF, each of ``T`` rounds picks the dyadic interval J whose hypothesis
    weight is furthest from its empirical weight with the exact exponential mechanism over *all*
    dyadic intervals (:class:`~dpflow.nodes.DyadicExpMech`, eps_t-DP; sparse_discrete_heavy.md 4.5),
    then releases the weights of ``[0, a)`` and ``J`` with Laplace noise ``2 / (n eps_t)`` (replace-one
    l1 2/n: the spec's issue U1 fixed) and adds the two knots (post-processing); the released CDF is
    made monotone and [0, 1]-valued by :func:`monotone_cdf` (post-processing).  Every mechanism gets
    weight 1: under ``PureDP(eps)`` eps_t = eps / (2T) and the plan is eps-DP (basic composition; the
    ledger lists the 2T costs).  Under zCDP budgets each gets rho / (2T) as eps_t = sqrt(2 rho_t).

    Guarantee (exponential mechanism, McSherry-Talwar 2007): with probability >= 1 - beta each round's
    interval has score within ``(2 / eps_t) ln(2^(L+1) / beta)`` counts of the worst one, L = ceil(log2 N).
    When that slack, over n (:func:`merr_round_slack`, beta = 0.1), is 1/2 or more, T is too large for
    n and the budget: the plan carries an accuracy warning (ledger ``warnings``, :class:`dpflow.errors.AccuracyWarning`)
    naming the largest T that avoids it.
    Time per round O((m + D) L log n) (intervals with equal scores are grouped), after one sort; the weights are
    counted in the sorted sample too (binary search, no pass over the rows).
    Source ``X`` (``Ordinal(N)``, values outside [0, N) clamped to the ends); output ``cdf`` (knots).
    Post-process with :func:`k_piece_histogram`.

    >>> import dpflow as dp
    >>> ledger = merr(N=10**8, n=10_000, budget=dp.PureDP(1.0), T=4).check()
    >>> ledger.totals[0].pure_eps
    Fraction(1, 1)
    """
    _check_budget(budget, "merr")
    _check_n(n)
    if not 2 <= N <= MAX_N:
        raise ValueError(f"merr needs 2 <= N <= 2**62, got N={N}")
    if T < 1:
        raise ValueError(f"merr needs T >= 1 rounds, got T={T}")
    b = PlanBuilder(budget=budget, neighbors="replace", name="merr")
    X = b.source("X", Ordinal(N=N), n=n)
    slack = merr_round_slack(N, n, budget, T)
    if slack >= 0.5:
        t_max = _merr_max_rounds(N, n, budget)
        fix = (f"use T <= {t_max} or give more data or budget" if t_max
               else "even T = 1 is too many: give more data or budget")
        accuracy_warning(b, f"merr: T={T} rounds is too many for n={n} under {budget.describe()}: each round's "
                            f"interval is only guaranteed within {slack:.3g} (of at most 1) of the worst "
                            f"discrepancy, with probability 0.9; {fix}")
    table = nodes.DyadicCounts(N=N)(X)
    cdf = None
    for _ in range(T):
        J = nodes.DyadicExpMech(cdf=cdf)(table)
        w = nodes.LaplaceMech()(nodes.IntervalCounts(interval=J)(X, table))  # counted in the table's sorted sample
        cdf = nodes.AddKnots(N=N)(J, w) if cdf is None else nodes.AddKnots(N=N)(cdf, J, w)
    assert cdf is not None
    return b.build(cdf=nodes.Apply(fn=monotone_cdf)(cdf))


# --------------------------------------------------------------------------- k-piece histogram


def _pieces(cdf: CDF) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    P = np.asarray(cdf[0], dtype=np.int64)
    F = np.asarray(cdf[1], dtype=float)
    mass = clip_normalise(np.diff(F))
    return P[:-1], P[1:], mass / (P[1:] - P[:-1]).astype(float)


def _a1_error(segs: list[tuple[int, int, float]], value: float) -> float:
    acc, hi, lo = 0.0, 0.0, 0.0
    for a, b, v in segs:
        acc += (v - value) * (b - a)
        hi, lo = max(hi, acc), min(lo, acc)
    return hi - lo


def k_piece_histogram(cdf: CDF, k: int) -> CDF:
    """Merge a CDF's pieces into at most k + 1 flat pieces (the ADLS-style merging of DHS's
    ``HistogramApproximation.jl``; sparse_discrete_heavy.md 4.7).  Post-processing of a released CDF.

    Negative masses are clipped to 0 first.  A greedy pass cuts the domain into chunks of mass at most
    ``sqrt(k/m) / (4k)`` (splitting pieces at integer points); rounds then merge neighbouring pairs,
    keeping the ``floor(k/2)`` pairs with the largest A1 error unmerged, until <= k + 1 chunks remain.

    >>> P, F = k_piece_histogram((np.array([-1, 9, 19, 29, 39]), np.array([0.0, 0.1, 0.2, 0.6, 1.0])), 1)
    >>> len(P) - 1 <= 2
    True
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    los, his, dens = _pieces(cdf)
    m = len(dens)
    max_w = math.sqrt(k / m) / (4.0 * k)
    chunks: list[list[tuple[int, int, float]]] = []
    cur: list[tuple[int, int, float]] = []
    acc = 0.0
    for lo, hi, v in zip(los.tolist(), his.tolist(), dens.tolist(), strict=True):
        pos = lo
        while pos < hi:
            if acc + v * (hi - pos) <= max_w:
                cur.append((pos, hi, v))
                acc += v * (hi - pos)
                pos = hi
                continue
            take = int((max_w - acc) / v) if v > 0 else hi - pos
            take = min(max(take, 1 if not cur else 0), hi - pos)
            if take > 0:
                cur.append((pos, pos + take, v))
                pos += take
            chunks.append(cur)
            cur, acc = [], 0.0
    if cur:
        chunks.append(cur)
    held_out = k // 2
    while len(chunks) > k + 1:
        pairs = [(chunks[i], chunks[i + 1]) for i in range(0, len(chunks) - 1, 2)]
        errs = []
        for a, b in pairs:
            segs = a + b
            length = segs[-1][1] - segs[0][0]
            errs.append(_a1_error(segs, sum(v * (y - x) for x, y, v in segs) / length))
        keep = set(np.argsort(errs, kind="stable")[len(pairs) - held_out:].tolist()) if held_out else set()
        merged: list[list[tuple[int, int, float]]] = []
        for i, (a, b) in enumerate(pairs):
            merged.extend([a, b] if i in keep else [a + b])
        if len(chunks) % 2:
            merged.append(chunks[-1])
        chunks = merged
    P = np.array([chunks[0][0][0]] + [c[-1][1] for c in chunks], dtype=np.int64)
    masses = [sum(v * (y - x) for x, y, v in c) for c in chunks]
    return P, np.concatenate(([0.0], np.cumsum(masses)))


# --------------------------------------------------------------------------- error metrics


def cdf_at(cdf: CDF, t: Any) -> np.ndarray:
    """The piecewise-linear CDF at integer points ``t`` (int64, exact offsets; flat outside the knots).

    >>> cdf_at(uniform_cdf(4), np.array([-1, 0, 3])).tolist()
    [0.0, 0.25, 1.0]
    """
    return knots_cdf_at(np.asarray(cdf[0], dtype=np.int64), np.asarray(cdf[1], dtype=float), np.asarray(t))


def _ref_at(ref: Reference, t: np.ndarray) -> np.ndarray:
    if callable(ref):
        return np.asarray(ref(t), dtype=float)
    return cdf_at(ref, t)


def _grid(N: int, points: int) -> np.ndarray:
    if N <= points:
        return np.arange(N, dtype=np.int64)
    return ((np.arange(points, dtype=np.float64) + 0.5) * (N / points)).astype(np.int64)


def kolmogorov_distance(cdf: CDF, ref: Reference, points: int = 10**6) -> float:
    """``sup_t |F(t) - F_ref(t)|`` over [N], evaluated at every knot of ``cdf`` (and its neighbours),
    every knot of a knot-given reference, and a grid of ``points`` points (exact when N <= points).

    >>> round(kolmogorov_distance(uniform_cdf(10), histogram_cdf([0, 5, 10], [0.7, 0.3])), 12)
    0.2
    """
    P = np.asarray(cdf[0], dtype=np.int64)
    N = int(P[-1]) + 1
    ts = [_grid(N, points), P, P - 1, P + 1]
    if not callable(ref):
        ts.append(np.asarray(ref[0], dtype=np.int64))
    t = np.clip(np.concatenate(ts), -1, N - 1)
    return float(np.max(np.abs(cdf_at(cdf, t) - _ref_at(ref, t))))


def l1_distance(cdf: CDF, ref: Reference, points: int = 10**6) -> float:
    """L1 distance between the probability mass functions on [N]: ``sum_x |p(x) - p_ref(x)|``, exact
    when N <= ``points``, else ``N * mean |p(x_b) - p_ref(x_b)|`` over ``points`` evenly spread points
    (the DHS experiments' estimator, sparse_discrete_heavy.md 4.8).

    >>> round(l1_distance(uniform_cdf(10), histogram_cdf([0, 5, 10], [0.7, 0.3])), 12)
    0.4
    """
    P = np.asarray(cdf[0], dtype=np.int64)
    N = int(P[-1]) + 1
    x = _grid(N, points)
    p = cdf_at(cdf, x) - cdf_at(cdf, x - 1)
    q = _ref_at(ref, x) - _ref_at(ref, x - 1)
    return float(np.abs(p - q).sum() * (N / len(x)))


__all__ = [
    "cdf_at", "clip_normalise", "histogram_cdf", "k_piece_histogram", "kolmogorov_distance", "l1_distance",
    "laplace_histogram", "merr", "merr_round_epsilon", "merr_round_slack", "monotone_cdf", "project_simplex",
    "t_histogram", "uniform_cdf",
]
