"""CoinPress (Biswas-Dong-Kamath-Ullman, NeurIPS 2020): iterative private mean and covariance.

Both are ``Repeat`` nodes over all n rows (no sample splitting), charged per round
at the schedule's round weight (sequential composition, Bun-Steinke 2016 Lemma 1.7).

* Mean (``MVMRec``, gaussian.md 1.1-1.2): round k clips the rows to the released ball
  ``B(c, min(sqrt(r^2 + 6r + gamma^2), r + gamma))``, releases the mean with Gaussian
  noise (l2 sensitivity ``2 clip / n``) and shrinks the ball to
  ``gamma * sqrt(1/n + sigma_k^2)``.
* Covariance (``MVCRec``, gaussian.md 1.3, with the reference code's bugs B1/B2 of
  section 1.6 fixed): rows are mapped as ``x -> A x`` (``X @ A.T``), truncated to radius
  gamma, the second moment is released (Frobenius sensitivity ``sqrt(2) gamma^2 / n``),
  truly projected onto the PSD cone, and ``A <- (Z + eta I)^{-1/2} A``; the estimate is
  ``A^{-1} Z A^{-T}`` with the last Z and the A that produced it.

Pure DP (``mech="laplace"``): the same rounds with ``LaplaceMech`` on the same statistics (l1
sensitivities derived by the nodes: the clipped mean's ``2 clip sqrt(d) / n``, the second moment's
``(d + 1) gamma^2 / n`` over the upper triangle), and the mean's next radius from the Laplace noise
(:func:`steps.mvm_next_radius_laplace`).

These are builder-level functions: they add nodes to a plan and return handles, so
the full-Gaussian plan composes them.  ``dpflow.estimators.gaussian`` wraps them in plans.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, Literal

import numpy as np
from scipy import special

from dpflow import nodes as N
from dpflow.estimators.gaussian import steps
from dpflow.estimators.tails import chi_radius
from dpflow.handles import Released, Rows, Sensitive
from dpflow.privacy import shares_by_weight
from dpflow.references import Reference, spec

REF_MEAN = Reference("Biswas-Dong-Kamath-Ullman 2020 (CoinPress) Alg. 1-2, coin-press multivariate_mean_step",
                     "gaussian.md", "1.1")
Mech = Literal["gaussian", "laplace"]
"""The noise of the rounds: Gaussian (zCDP / approximate DP) or Laplace (pure DP)."""
REF_COV = Reference("Biswas-Dong-Kamath-Ullman 2020 (CoinPress) Alg. 3-4, corrected (B1, B2)", "gaussian.md", "1.6")

MEAN_STATE = ("centre", "radius")
"""The parts of ``MVMRec``'s state, as the paper names them: the ball ``B(c, r)`` the next round clips to."""
COV_STATE = ("A_next", "A_used", "Z")
"""The parts of ``MVCRec``'s state: the next preconditioner, the one that produced ``Z``, and the released
(PSD-projected) second moment ``Z`` of the preconditioned rows."""



def default_rounds(bound: float, d: int, base: int) -> int:
    """CoinPress round count from public quantities: ``base`` (2 for the mean, 3 for the covariance: the
    coin-press defaults at ``R = 10 sqrt(d)``, ``K = 10 sqrt(d)``) plus one round per factor 8 of the
    bound beyond ``10 sqrt(d)`` (each round shrinks the ball or the spectrum bound by a large factor; the
    paper's R and K sweeps, gaussian.md 1.7).

    >>> default_rounds(10 * 50 ** 0.5, 50, 2), default_rounds(1e6, 20, 3)
    (2, 8)
    """
    excess = bound / (10.0 * math.sqrt(d))
    return base + (math.ceil(math.log2(excess) / 3.0 - 1e-9) if excess > 1.0 else 0)

def schedule(t: int) -> tuple[Fraction, ...]:
    """CoinPress's default budget schedule: 3/4 on the last round, 1/4 split evenly over the others
    (gaussian.md 1.2 [CODE]); ``(1,)`` for one round.

    >>> [str(f) for f in schedule(3)]
    ['1/8', '1/8', '3/4']
    """
    if t < 1:
        raise ValueError(f"CoinPress needs t >= 1 rounds, got {t}")
    if t == 1:
        return (Fraction(1),)
    return tuple([Fraction(1, 4 * (t - 1))] * (t - 1) + [Fraction(3, 4)])


def _round_rhos(rho: Fraction, sched: Sequence[Fraction]) -> list[Fraction]:
    """The rho of each round of a part whose rounds share ``rho``, as the planner allocates it: by the
    round weights ``float(s_k)`` that :func:`mvm_rec` declares (:func:`dpflow.privacy.shares_by_weight`).
    Only for the radius prediction made before the plan exists; the plan itself reads each round's
    certified sigma through ``NoiseScale``."""
    return shares_by_weight(rho, [float(s) for s in sched])


def part_rhos(rho: Fraction, parts: Sequence[tuple[float, int]]) -> list[Fraction]:
    """The rho of each CoinPress part of a plan whose only mechanisms are these parts' Gaussians: a part
    ``(weight, t)`` is a ``Repeat`` of ``t`` rounds (round weights ``float(s_k)`` of :func:`schedule`) with
    one mechanism of ``weight``, so it gets ``rho * weight * sum_k s_k / sum over parts``, exactly as the
    planner shares by weight (:func:`dpflow.privacy.shares_by_weight`).

    >>> [str(r) for r in part_rhos(Fraction(1, 2), [(0.5, 3), (0.5, 2)])]
    ['1/4', '1/4']
    """
    ws = [Fraction(weight) * sum((Fraction(float(s)) for s in schedule(t)), Fraction(0)) for weight, t in parts]
    return shares_by_weight(rho, ws)


def predicted_mean_radii(n: int, d: int, R: float, rho: Fraction, t: int, beta: float = 0.01) -> list[float]:
    """The public radius schedule of :func:`mvm_rec` (what the rounds would release were no
    point clipped): ``[R, r_1, ..., r_t]``.  Used to warn when a plan is vacuous.

    >>> [round(x, 4) for x in predicted_mean_radii(1000, 50, 10 * 50 ** 0.5, Fraction(1, 2), 2)]
    [70.7107, 2.8268, 0.3798]
    """
    gamma = chi_radius(d, beta)
    radii = [float(R)]
    for rk in _round_rhos(rho, schedule(t)):
        clip = steps.mvm_clip(radii[-1], gamma)
        sigma = 2.0 * clip / n / math.sqrt(2.0 * float(rk))
        radii.append(gamma * math.sqrt(1.0 / n + sigma * sigma))
    return radii


def clip_bias(d: int, beta: float = 0.1) -> float:
    """The relative bias of the clipped second moment of the final round of :func:`mvc_rec`: rows clipped to
    ``gamma = chi_radius(d, beta)`` lose the part of their second moment beyond ``gamma``.  Public (d, beta).

    Derivation.  Clipping maps ``x -> x min(1, gamma / ||x||)``, so ``x x^T`` loses ``x x^T (1 - gamma^2 /
    ||x||^2)_+``.  For ``x ~ N(0, C)`` with ``C <= v I`` the loss in direction ``i`` over ``C_ii`` is
    ``E[z_i^2 (1 - gamma^2 / ||x||^2)_+]``, increasing in every eigenvalue of ``C``, so at most its value at
    ``C = v I``: ``E[(v Q - gamma^2)_+] / (d v)`` with ``Q ~ chi^2_d``, which is
    ``P(chi^2_{d+2} > g) - (g / d) P(chi^2_d > g)`` at ``g = gamma^2 / v`` (``E[Q; Q > g] = d P(chi^2_{d+2} > g)``).
    The preconditioner is built from the previous rounds' clipped (so shrunken by the same factor) second
    moments, so the preconditioned covariance reaches ``v = 1 / (1 - b)`` at most: the fixed point, iterated
    from ``v = 1``.  Laurent-Massart's ``gamma`` is conservative (``P(||x|| > gamma)`` is far below beta), so
    the bias is small; it is the error that remains at large n (measured, benchmarks/robustness.py cells
    d = 1, n = 10^6, every epsilon: 0.0079 against the sample covariance; this predicts 0.0062, the rest
    is the pair differences' sampling error).  It holds for Gaussian rows only: heavier tails lose more
    (multivariate t5, d = 1 to 20: 0.07 to 0.2).

    >>> round(clip_bias(1), 5), round(clip_bias(50), 5)
    (0.00625, 0.00096)
    """
    g2 = chi_radius(d, beta) ** 2
    v, b = 1.0, 0.0
    for _ in range(CLIP_BIAS_ITERATIONS):
        g = g2 / v
        b = float(special.gammaincc((d + 2) / 2.0, g / 2.0) - g / d * special.gammaincc(d / 2.0, g / 2.0))
        v = 1.0 / (1.0 - b)
    return b


CLIP_BIAS_ITERATIONS = 8
""":func:`clip_bias`'s fixed-point iterations (it contracts by a factor ``b << 1`` per step: 8 is exact to
float precision for every d)."""

def predicted_cov_errors(m: int, d: int, rho: Fraction, K: float, t: int, beta: float = 0.1) -> tuple[float, float]:
    """Predicted spectral errors of :func:`mvc_rec` with Gaussian rounds (schedule :func:`schedule` of ``t``
    rounds sharing ``rho``) over ``m`` mean-zero Gaussian rows from ``Sigma <= K I``: ``(absolute, mahalanobis)``
    with probability about 0.9.  Public quantities only.

    Model.  Round k releases the second moment of rows clipped to ``gamma`` with Gaussian noise of
    ``sigma_k = sqrt(2) gamma^2 / (m sqrt(2 rho_k))`` per entry, spectral norm about ``nu_k = 2 sigma_k sqrt(d)``
    (Wigner); the sampling error of a second moment is ``s = 2 sqrt(d / m) + d / m`` (the mean edge of the
    Marchenko-Pastur law); the clipping bias is :func:`clip_bias` (relative).  The final round errs by
    ``nu_t + s`` in the preconditioned units, and by the bias.

    * ``mahalanobis`` (``||Sigma^-1/2 Sigma-hat Sigma^-1/2 - I||``, when also ``Sigma >= I``): the final
      noise over the floor ``l`` of the preconditioned covariance, which rises from ``1 / K`` as
      ``l <- l / (l + eta + 2 nu_k / (3 pi))`` (the model of :func:`laplace_cov_schedule`), plus the bias.
    * ``absolute`` (``||Sigma-hat - Sigma||_2 / K``, any ``Sigma <= K I``): when every preconditioning round's
      noise is below 1 the rounds contract and this is the Mahalanobis error at condition 1; otherwise the
      preconditioner can be no better than the noise and the mapped-back error grows by
      ``prod_k (1 + eta + nu_k + s)`` (each noisy round shrinks a direction by up to that factor), and the
      Mahalanobis error is then bounded only by ``K`` times it.  The bias (relative, so at most ``b K`` in
      absolute units) is added to both.

    Measured (8 seeds, 90th percentile; d, m, rho, K): (5, 1000, 0.1, 100) predicted 1.14 / measured 0.89
    Mahalanobis; (20, 10000, 0.1, 100) 0.29 / 0.17; (50, 5000, 0.014, 1) 8.4 / 7.9; (10, 50000, 0.5, 1e4)
    0.034 / 0.028; (50, 5000, 0.014, 100) (noisy rounds) absolute 1019 / 23, Mahalanobis 1e5 / 2330.
    Without the bias and with the mean sampling term the Mahalanobis prediction of ``gaussian.fit``'s
    ``kmssu+coinpress`` route covered 69% of benchmarks/robustness.py's cells (benchmarks/results/robustness.md):
    every Gaussian miss was at d = 1, n = 10^6 (measured 0.0079, predicted 0.0033, all of it bias), the rest
    were the t5 cells (outside the model: heavier tails are clipped more).

    >>> [round(x, 3) for x in predicted_cov_errors(10000, 20, Fraction(1, 10), 100.0, 4)]
    [0.248, 0.29]
    """
    g2 = chi_radius(d, beta) ** 2
    eta = 0.5 * (2.0 * math.sqrt(d / m) + d / m)
    samp = 2.0 * math.sqrt(d / m) + d / m
    bias = clip_bias(d, beta)
    nus = [2.0 * math.sqrt(d) * g2 / (m * math.sqrt(float(r))) if r > 0 else math.inf
           for r in _round_rhos(rho, schedule(t))]
    floor, unit, growth = 1.0 / K, 1.0, 1.0
    for nu in nus[:-1]:
        floor = floor / (floor + eta + 2.0 / (3.0 * math.pi) * nu)
        unit = unit / (unit + eta + 2.0 / (3.0 * math.pi) * nu)
        growth *= 1.0 + eta + nu + samp
    last = nus[-1] + samp
    if all(nu < 1.0 for nu in nus[:-1]):
        return last / unit + bias, last / floor + bias
    return last * growth + bias, (last * growth + bias) * K


LAPLACE_SHARES = tuple(Fraction(k, 8) for k in range(1, 8))
"""The preconditioning rounds' total shares :func:`laplace_cov_schedule` chooses from (the final round gets
the rest)."""
LAPLACE_MAX_ROUNDS = 64
"""The most rounds :func:`laplace_cov_schedule` considers."""
LAPLACE_ERROR_SLACK = 1.25
""":func:`laplace_cov_schedule` takes, among the schedules whose predicted error is within this factor of the
smallest, the one with the least noisy preconditioning rounds (the model is an average: near
:data:`LAPLACE_MAX_NOISE` some draws fail to converge; measured at d = 5, n = 640,000, kappa = 1e9)."""
LAPLACE_MAX_NOISE = 0.5
"""The largest noise norm ``nu_k`` (:func:`steps.laplace_noise_edge`) a preconditioning round of
:func:`laplace_cov_schedule` may have.  Above about 0.8 the rounds stop converging (measured, d = 5,
n = 160,000, kappa 1e6 and 1e12: every schedule with ``nu_k <= 0.7`` and enough rounds reached an error
within 1.7x of the best, every one with ``nu_k >= 0.8`` erred 5x to 17x more): the update
``(Z + eta I)^{-1/2}`` scales a direction whose noise was projected to 0 by up to ``lambda / eta``, far above 1
when the noise is large, and the clipped rows of the next round then under-read it."""


def laplace_cov_schedule(n: int, d: int, eps: float, K: float, t: int | None = None,
                         beta: float = 0.1) -> tuple[tuple[Fraction, ...], float]:
    """Round count and budget schedule of a pure-DP (Laplace) CoinPress covariance recursion over ``n``
    mean-zero rows at ``eps`` (the recursion's whole epsilon) from ``Sigma <= K I``, derived from the
    per-round contraction; returns ``(schedule, predicted error)``.  Public quantities only.

    Model.  A round at ``eps_k`` adds symmetric Laplace noise of scale ``b_k = (d + 1) gamma^2 / (n eps_k)``
    (the second moment's l1 sensitivity), whose spectral norm is about ``nu_k`` =
    :func:`steps.laplace_noise_edge`.  The update ``A <- (Z + eta I)^{-1/2} A`` maps an eigenvalue ``lambda``
    of the preconditioned covariance far below the noise to about ``lambda / (eta + q_k)``, where ``q_k`` is
    the PSD-projected noise in its direction: on average the mean of the semicircle's positive part,
    ``2 nu_k / (3 pi)``.  So the floor ``l`` (from ``1/K``) rises as ``l <- l / (l + eta + q_k)``.
    Measured (the noise alone, d = 2, 5, 20, Laplace b from 1e-3 to 0.1, spectrum over 12 decades): the
    condition number falls 0.57 to 2.25 decades a round; this predicts at most 0.02 decade more, and up to 0.45
    less (d = 2 at large noise).  Laplace noise is about d times the Gaussian rounds' (l1 sensitivity
    ``(d + 1) gamma^2 / n`` on each of ``d (d + 1) / 2`` entries), so a round shrinks the condition number
    far less than the factor 8 per round :func:`default_rounds` assumes, and more
    rounds at a smaller epsilon each shrink less; rounds noisier than :data:`LAPLACE_MAX_NOISE` are not
    considered (unless ``t`` is given).  The final round (``(1 - p) eps``) errs by about
    ``nu_final / floor`` (Mahalanobis, spectral).  This picks ``t`` (up to :data:`LAPLACE_MAX_ROUNDS`, or the
    given ``t``) and the preconditioning share ``p`` in :data:`LAPLACE_SHARES` with the least noisy rounds
    among those whose predicted error is within :data:`LAPLACE_ERROR_SLACK` of the smallest: schedule
    ``[p / (t - 1)] * (t - 1) + [1 - p]``.  The prediction leaves out the sampling error (about the
    non-private error).  Accuracy only: any schedule is private (the planner charges the rounds' weights).

    >>> sched, err = laplace_cov_schedule(80_000, 5, 0.4, 1e6)
    >>> len(sched), str(sched[-1]), round(err, 3)
    (7, '1/2', 0.043)
    >>> laplace_cov_schedule(80_000, 5, 0.4, 1e6, t=1)[0]
    (Fraction(1, 1),)
    """
    gamma = chi_radius(d, beta)
    eta = 0.5 * (2.0 * math.sqrt(d / n) + d / n)
    nu = steps.laplace_noise_edge((d + 1) * gamma * gamma / n, d)  # per unit epsilon
    # (predicted error, preconditioning rounds' noise, schedule)
    options: list[tuple[float, float, tuple[Fraction, ...]]] = [(nu / eps * K, 0.0, (Fraction(1),))]
    for rounds in range(2, LAPLACE_MAX_ROUNDS + 1) if t is None else ([t] if t > 1 else []):
        for p in LAPLACE_SHARES:
            nu_k = nu * (rounds - 1) / (eps * float(p))
            if nu_k > LAPLACE_MAX_NOISE and t is None:
                continue
            c = eta + 2.0 / (3.0 * math.pi) * nu_k
            floor = 1.0 / K
            for _ in range(rounds - 1):
                floor = floor / (floor + c)
            err = nu / (eps * float(1 - p)) / floor
            options.append((err, nu_k, tuple([p / (rounds - 1)] * (rounds - 1) + [1 - p])))
    best = min(o[0] for o in options)
    pick = min((o for o in options if o[0] <= LAPLACE_ERROR_SLACK * best), key=lambda o: (o[1], o[0]))
    return pick[2], pick[0]


def mvm_rec(
    rows: Sensitive[Rows],
    init: Released[Any],
    n: int,
    d: int,
    weight: float,
    t: int,
    beta: float = 0.01,
    sched: Sequence[Fraction] | None = None,
    mech: Mech = "gaussian",
) -> Released[Any]:
    """Add CoinPress ``MVMRec`` over ``rows`` (n rows in R^d, covariance <= I) starting from the released
    ``init = Pack(names=MEAN_STATE)(centre, radius)``; returns the final state, read with ``Get("centre")``
    and ``Get("radius")``.

    ``weight`` is the mechanisms' weight (the planner allocates the noise).  Round k's next radius uses
    the sigma_k the round's Gaussian certifies: ``2 clip / n`` (the l2 sensitivity of the mean of rows
    clipped to radius ``clip``, replace-one) times its :func:`~dpflow.nodes.noise_scale`.  ``beta`` is
    the tail probability of the chi radius gamma (the code's 0.01: no union bound over n, gaussian.md 1.1).
    """
    sched = tuple(sched) if sched is not None else schedule(t)
    gamma = chi_radius(d, beta)

    def body(x: Sensitive[Rows], state: Released[Any], k: Released[Any]) -> Released[Any]:
        cb = x.builder
        gk = N.param(cb, "gamma", gamma, f"chi_radius(d={d}, beta={beta:g}) ({spec('gaussian.md', '0.3')})")
        nk = N.param(cb, "n", float(n), "public row count")
        c = N.Get("centre")(state)
        clip = N.Apply(fn=steps.mvm_clip, shape=())(N.Get("radius")(state), gk)
        mean = N.Mean()(N.Clip(radius=clip, center=c)(x))
        if mech == "laplace":
            m = N.LaplaceMech(weight=weight)(mean)
            r_next = N.Apply(fn=steps.mvm_next_radius_laplace, shape=())(clip, N.noise_scale(m), gk, nk,
                                                                         cb.public(float(d)))
        else:
            m = N.GaussianMech(weight=weight)(mean)
            r_next = N.Apply(fn=steps.mvm_next_radius, shape=())(clip, N.noise_scale(m), gk, nk)
        return N.Pack(names=MEAN_STATE)(m, r_next)

    return N.repeat(rows, init, body, times=len(sched), round_weights=[float(s) for s in sched])


def mvc_rec(
    rows: Sensitive[Rows],
    init_A: Released[Any],
    n: int,
    d: int,
    weight: float,
    t: int,
    beta: float = 0.1,
    sched: Sequence[Fraction] | None = None,
    mech: Mech = "gaussian",
) -> Released[Any]:
    """Add CoinPress ``MVCRec`` over ``rows`` (n mean-zero rows in R^d) starting from the released
    preconditioner ``init_A`` (``A Sigma A^T <= I``, e.g. ``I / sqrt(K)``); returns the final state
    ``Pack(names=COV_STATE)(A_next, A_used, Z)``: :func:`steps.cov_from_state` gives the estimate, ``A_next`` the
    whitening preconditioner.

    ``gamma = chi_radius(d, beta)`` (the code's beta = 0.1) and ``eta = (2 sqrt(d/n) + d/n) / 2``
    (gaussian.md 1.3 [CODE]).
    """
    sched = tuple(sched) if sched is not None else schedule(t)
    gamma = chi_radius(d, beta)
    eta = 0.5 * (2.0 * math.sqrt(d / n) + d / n)

    def body(x: Sensitive[Rows], state: Released[Any], k: Released[Any]) -> Released[Any]:
        cb = x.builder
        e = N.param(cb, "eta", eta, f"(2 sqrt(d/n) + d/n)/2, d={d}, n={n} ({spec('gaussian.md', '1.3')})")
        A = N.Get("A_next")(state)
        w = N.Clip(radius=gamma)(N.Precondition(matrix=A)(x))
        noise = N.LaplaceMech(weight=weight) if mech == "laplace" else N.GaussianMech(weight=weight)
        Z = N.PSDProject()(noise(N.SecondMoment()(w)))
        return N.Pack(names=COV_STATE)(N.Apply(fn=steps.mvc_update, shape=(d, d))(Z, A, e), A, Z)

    init = N.Pack(names=COV_STATE)(init_A, init_A, rows.builder.public(np.zeros((d, d))))
    return N.repeat(rows, init, body, times=len(sched), round_weights=[float(s) for s in sched])
