"""Product distributions over {0,1}^d: PPDE (KLSU 2019 Alg. 7, gaussian.md 3.6), the naive Gaussian
baseline, and the total-variation error between product distributions.

>>> import numpy as np, dpflow as dp
>>> p = np.minimum(0.5, 1.0 / np.arange(1, 21))
>>> X = (np.random.default_rng(0).random((20_000, 20)) < p).astype(int)
>>> est = ppde(d=20, n=20_000, budget=dp.ZCDP(0.5)).run({"X": X}, noise=dp.SeededNoise(0))
>>> product_tv(est.released["p"], p) < 0.2
True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpflow import nodes
from dpflow.domains import BooleanCube
from dpflow.plan import Plan, PlanBuilder
from dpflow.plan.graph import require_budget
from dpflow.privacy import ZCDP, ApproxDP, Measure

EXACT_TV_D = 16


def _check(d: int, n: int, budget: Measure, name: str) -> None:
    require_budget(budget, name, (ZCDP, ApproxDP))
    if d < 1 or n < 1:
        raise ValueError(f"{name} needs d >= 1 and n >= 1, got d={d}, n={n}")


def clip_unit(v: Any) -> np.ndarray:
    """Entries clipped into [0, 1] (post-processing).

    >>> clip_unit(np.array([-0.1, 0.5, 1.2])).tolist()
    [0.0, 0.5, 1.0]
    """
    out: np.ndarray = np.clip(np.nan_to_num(np.asarray(v, dtype=float), nan=0.5), 0.0, 1.0)
    return out


def naive_product(d: int, n: int, budget: Measure) -> Plan:
    """The naive estimator: the mean of the rows plus Gaussian noise, l2 sensitivity sqrt(d)/n
    (replace-one, rows in {0,1}^d; gaussian.md 0.4), clipped to [0, 1].  Source ``X``; output ``p``.

    >>> import dpflow as dp
    >>> naive_product(d=10, n=1000, budget=dp.ZCDP(0.5)).check().totals[0].rho
    Fraction(1, 2)
    """
    _check(d, n, budget, "naive_product")
    b = PlanBuilder(budget=budget, neighbors="replace", name="naive_product")
    X = b.source("X", BooleanCube(d=d), n=n)
    noisy = nodes.GaussianMech()(nodes.Mean()(X))
    return b.build(p=nodes.Apply(fn=clip_unit, shape=(d,))(noisy))


def ppde_tau(mu: float, beta_row: float) -> float:
    """The truncation level for rows whose ones in play have expectation ``mu``: 2 mu + 3 ln(1 / beta_row).

    A sum of independent bits with mean mu exceeds 2 mu + t with probability at most e^(-3t/8)
    (Chernoff, gaussian.md 3.6), so a row is zeroed with probability at most ``beta_row`` (a small bias).

    >>> round(ppde_tau(7.0, 0.01), 2)
    27.82
    """
    return 2.0 * max(mu, 0.0) + 3.0 * math.log(1.0 / beta_row)


def ppde_state(d: int) -> np.ndarray:
    """The initial PPDE state: rows (in play, flipped, estimate of the flipped marginal, last noisy value)."""
    return np.stack([np.ones(d), np.zeros(d), np.zeros(d), np.zeros(d)])


def ppde_mask(state: Any) -> np.ndarray:
    """Coordinates still in play (post-processing of the released state)."""
    out: np.ndarray = np.asarray(state, dtype=float)[0].copy()
    return out


def ppde_flip(state: Any) -> np.ndarray:
    """Coordinates whose bits are complemented (post-processing of the released state)."""
    out: np.ndarray = np.asarray(state, dtype=float)[1].copy()
    return out


def ppde_pilot(noisy: Any) -> np.ndarray:
    """The state after the pilot (the noisy mean of all rows): flip the coordinates above 1/2, keep all
    in play, and record the flipped noisy marginals (their sum estimates a row's expected ones).

    >>> ppde_pilot(np.array([0.2, 0.7]))[1:].tolist()
    [[0.0, 1.0], [0.0, 0.0], [0.2, 0.30000000000000004]]
    """
    p = np.nan_to_num(np.asarray(noisy, dtype=float).reshape(-1), nan=0.0)
    flip = p > 0.5
    s = ppde_state(len(p))
    s[1] = flip
    s[3] = np.where(flip, 1.0 - p, p)
    return s


def ppde_radius(state: Any, beta_row: Any) -> float:
    """The released truncation radius of the next round, r = sqrt(min(2 tau, d)), tau = ppde_tau(mu), where
    mu is the sum of the last noisy (flipped) marginals still in play (post-processing; the noise of that
    sum has variance d sigma^2, negligible against the 3 ln(1/beta_row) slack at the benchmark sizes).

    >>> ppde_radius(ppde_pilot(np.full(4, 0.5)), 0.01)
    2.0
    """
    s = np.asarray(state, dtype=float)
    mu = float(np.sum(np.where(s[0] != 0, s[3], 0.0)))
    tau = ppde_tau(mu, float(np.asarray(beta_row)))
    return math.sqrt(min(2.0 * tau, float(s.shape[1])))


def ppde_update(state: Any, noisy: Any, level: Any) -> np.ndarray:
    """One PPDE round at level ``(u, next)`` (post-processing): finalise the coordinates in play whose noisy
    flipped marginal is >= (3/4) ``next`` (all of them when ``next`` is 0, the last round); give the
    others the provisional estimate clip(p~, 0, next) and keep them in play.

    >>> ppde_update(ppde_pilot(np.array([0.2, 0.9])), np.array([0.2, 0.01]), (1.0, 0.25))[:3].tolist()
    [[0.0, 1.0], [0.0, 1.0], [0.2, 0.01]]
    """
    s = np.asarray(state, dtype=float).copy()
    nxt = float(np.asarray(level, dtype=float).reshape(-1)[-1])
    p = np.nan_to_num(np.asarray(noisy, dtype=float).reshape(-1), nan=0.0)
    mask = s[0] != 0
    final = mask & ((p >= 0.75 * nxt) | (nxt <= 0))
    keep = mask & ~final
    s[2] = np.where(final, np.clip(p, 0.0, 1.0), np.where(keep, np.clip(p, 0.0, nxt), s[2]))
    s[3] = np.where(mask, p, s[3])
    s[0] = keep
    return s


def ppde_finish(state: Any) -> np.ndarray:
    """The estimated marginals: un-flip the estimates."""
    s = np.asarray(state, dtype=float)
    out: np.ndarray = np.where(s[1] != 0, 1.0 - s[2], s[2])
    return out


def ppde(d: int, n: int, budget: Measure, rounds: int = 1, pilot: float = 0.05, shrink: float = 4.0,
         beta_row: float = 0.01) -> Plan:
    """PPDE, private product-distribution estimation over {0,1}^d (after KLSU 2019 Alg. 7, gaussian.md 3.6:
    truncate rows to the number of ones expected among the coordinates in play, so the noise scales with
    the marginals instead of with sqrt(d)).

    Every mechanism reads all n rows (sequential composition, the weights sum to 1).  A pilot (weight
    ``pilot``) releases the plain mean (l2 sqrt(d)/n); coordinates above 1/2 are flipped and the sum mu of
    the flipped noisy marginals estimates a row's expected number of ones.  Then ``rounds`` rounds (weight
    (1 - pilot)/rounds each) at levels u_r = shrink^-(r-1) release ``TruncatedBinaryMean`` with the
    released radius r = sqrt(min(2 tau, d)), tau = 2 mu + 3 ln(1/beta_row) (l2 r/n; a row is zeroed with
    probability <= beta_row by Chernoff), mu recomputed over the coordinates still in play; round r
    finalises the coordinates with noisy marginal >= (3/4) u_(r+1), the last round all of them.

    The spec's structure (disjoint blocks of n/R rows, R = ceil(log2(d/alpha)) + 1 levels, the worst-case
    tau = 2 u d) loses to the naive estimator at d <= 1000: its noise variance carries R^2 from the blocks
    and 2 u d ones per row where p_j = 1/j puts about ln(u d).  The released mu and one round fix both
    (benchmarks/results/discrete.md, docs/discrete.md).  More rounds help when the first truncation
    leaves many coordinates well below the others' level; at p_j = min(1/2, 1/j) they cost more budget
    than they save.  Privacy holds for any constants: each mechanism's sensitivity is derived by the
    planner from the released radius.  Source ``X`` (``BooleanCube(d)``); output ``p``.

    >>> import dpflow as dp
    >>> ledger = ppde(d=50, n=10_000, budget=dp.ZCDP(0.5)).check()
    >>> ledger.totals[0].rho
    Fraction(1, 2)
    """
    _check(d, n, budget, "ppde")
    if not (shrink > 1 and 0 < pilot < 1 and 0 < beta_row < 1 and rounds >= 1):
        raise ValueError("ppde needs rounds >= 1, shrink > 1, 0 < pilot < 1 and 0 < beta_row < 1")
    b = PlanBuilder(budget=budget, neighbors="replace", name="ppde")
    X = b.source("X", BooleanCube(d=d), n=n)
    beta = b.public(float(beta_row))
    first = nodes.GaussianMech(weight=pilot)(nodes.Mean()(X))
    state = nodes.Apply(fn=ppde_pilot, shape=(4, d))(first)
    for r in range(1, rounds + 1):
        u = shrink ** -(r - 1)
        mask = nodes.Apply(fn=ppde_mask, shape=(d,))(state)
        flip = nodes.Apply(fn=ppde_flip, shape=(d,))(state)
        radius = nodes.Apply(fn=ppde_radius, shape=())(state, beta)
        query = nodes.TruncatedBinaryMean(radius=radius, mask=mask, flip=flip)(X)
        noisy = nodes.GaussianMech(weight=(1.0 - pilot) / rounds)(query)
        level = b.public([u, u / shrink if r < rounds else 0.0])
        state = nodes.Apply(fn=ppde_update, shape=(4, d))(state, noisy, level)
    return b.build(p=nodes.Apply(fn=ppde_finish, shape=(d,))(state))


def product_tv(p_hat: Any, p: Any) -> float:
    """Total variation between the product distributions with marginals ``p_hat`` and ``p``.

    Exact (enumerating {0,1}^d) for d <= 16; otherwise the chi-square bound
    ``TV <= 0.5 sqrt(chi2(P_hat || P))`` with ``chi2 = prod_j (1 + (p_hat_j - p_j)^2 / (p_j (1 - p_j))) - 1``
    for products (Cauchy-Schwarz; the KLSU 2019 TV bound of gaussian.md 3.0), capped at 1.

    >>> round(product_tv([0.5], [0.4]), 6)
    0.1
    """
    a = np.clip(np.asarray(p_hat, dtype=float).reshape(-1), 0.0, 1.0)
    b = np.clip(np.asarray(p, dtype=float).reshape(-1), 0.0, 1.0)
    d = len(b)
    if d <= EXACT_TV_D:
        bits = ((np.arange(2**d)[:, None] >> np.arange(d)[None, :]) & 1).astype(bool)
        pa = np.prod(np.where(bits, a, 1.0 - a), axis=1)
        pb = np.prod(np.where(bits, b, 1.0 - b), axis=1)
        return float(0.5 * np.abs(pa - pb).sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        chi = np.where(a == b, 0.0, (a - b) ** 2 / (b * (1.0 - b)))
    total = float(np.sum(np.log1p(chi)))
    if not math.isfinite(total) or total > 50:
        return 1.0
    return min(1.0, 0.5 * math.sqrt(math.expm1(total)))


__all__ = ["clip_unit", "naive_product", "ppde", "ppde_tau", "product_tv"]
