"""Kamath-Li-Singhal-Ullman (COLT 2019): PME, and covariance by recursive private preconditioning.

* ``pme``: coarse per-coordinate centre (KV histograms), one l2 clip around it, one
  Gaussian release (gaussian.md 3.5).
* ``ppc``: a ``Repeat`` over WeakPPC rounds (gaussian.md 3.2-3.3 [RECON]): round r maps the
  rows by the current preconditioner A, truncates them to ``sqrt(K_r) * gamma``, releases
  their second moment (Frobenius sensitivity ``sqrt(2) K_r gamma^2 / n``), and halves the
  scale of the noisy eigen-directions with eigenvalue >= K_r / 2; ``K_{r+1} = (5/8) K_r``.
  Every round is charged (sequential composition, Bun-Steinke 2016 Lemma 1.7).
* ``pce``: PPC, then NaivePCE (KLSU Alg. 1) on the preconditioned rows with bound ``K_R``, then
  ``A^{-1} S A^{-T}`` (gaussian.md 3.4).

Privacy never depends on the [RECON] constants (threshold K/2, shrink 5/8, K_stop): the
truncation alone bounds every row, whatever A is.  They only change post-processing and
the public round schedule.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpflow import nodes as N
from dpflow.estimators.gaussian import steps
from dpflow.estimators.gaussian.kv import coordinate_centres
from dpflow.estimators.tails import chi_radius
from dpflow.handles import Released, Rows, Sensitive
from dpflow.references import Reference

REF_PME = Reference("KLSU 2019 sec. 3.5 PME (coarse range + one l2 clip + Gaussian mechanism)", "gaussian.md", "3.5")
REF_PCE = Reference("KLSU 2019 Alg. 2-4 WeakPPC/PPC/PCE, constants reconstructed [RECON]", "gaussian.md", "3.2-3.4")
SHRINK = 5.0 / 8.0
K_STOP = 4.0


def pme(X: Sensitive[Rows], n: int, d: int, sigma: float, R: float, weight_hist: float, weight_mean: float,
        beta: float) -> Released[Any]:
    """PME: centres from per-coordinate histograms (``weight_hist`` in total), then rows clipped to
    ``B(c, 2 sigma sqrt(d) + sigma gamma(d, beta/(2n)))`` and the mean released (l2 sensitivity 2r/n)."""
    b = X.builder
    centres = coordinate_centres(X, d, sigma, R, weight_hist / d)
    r = 2.0 * sigma * math.sqrt(d) + sigma * chi_radius(d, beta / (2 * n))
    N.param(b, "clip_radius", r, f"2 sigma sqrt(d) + sigma chi_radius(d, beta/(2n)), beta={beta:g}")
    return N.GaussianMech(weight=weight_mean)(N.Mean()(N.Clip(radius=r, center=centres)(X)))


def ppc_rounds(kappa: float, k_stop: float = K_STOP) -> int:
    """Number of WeakPPC rounds to bring the bound from kappa to at most ``k_stop``:
    ``ceil(log(kappa / k_stop) / log(8/5))`` (0 when kappa <= k_stop).  ``K_STOP = 4`` was chosen by
    measurement (docs/gaussian.md); the [RECON] argument of gaussian.md 3.2 uses 16.

    >>> ppc_rounds(1e6)
    27
    """
    if kappa <= k_stop:
        return 0
    return math.ceil(math.log(kappa / k_stop) / math.log(1.0 / SHRINK) - 1e-12)


def ppc(rows: Sensitive[Rows], n: int, d: int, kappa: float, weight: float, beta: float,
        k_stop: float = K_STOP) -> tuple[Released[Any], float]:
    """PPC over ``rows`` (n mean-zero rows, ``I <= Sigma <= kappa I``): returns the released
    preconditioner A and the public bound ``K`` with ``A Sigma A^T <= K I`` (w.h.p.).  ``weight`` is
    split evenly over the rounds; with no round needed, ``A = I`` and ``K = kappa``."""
    b = rows.builder
    R = ppc_rounds(kappa, k_stop)
    eye = b.public(np.eye(d))
    if R == 0:
        return eye, float(kappa)
    bounds = [kappa * SHRINK**r for r in range(R)]
    gamma = chi_radius(d, beta / (R * n))
    radii = [math.sqrt(K) * gamma for K in bounds]

    def body(x: Sensitive[Rows], A: Released[Any], k: Released[Any]) -> Released[Any]:
        cb = x.builder
        kb = N.param(cb, "K_r", bounds, f"kappa (5/8)^r, {R} rounds to K <= {k_stop:g} [RECON]")
        rad = N.param(cb, "trunc_radius", radii, f"sqrt(K_r) chi_radius(d, beta/(R n)) = sqrt(K_r) * {gamma:.6g}")
        w = N.Clip(radius=N.Apply(fn=steps.pick, shape=())(rad, k))(N.Precondition(matrix=A)(x))
        S = N.GaussianMech(weight=weight / R)(N.SecondMoment()(w))
        return N.Apply(fn=steps.weak_ppc_update, shape=(d, d))(S, A, kb, k)

    return N.repeat(rows, eye, body, times=R), kappa * SHRINK**R


def pce(rows: Sensitive[Rows], n: int, d: int, kappa: float, weight_ppc: float, weight_final: float,
        beta: float, k_stop: float = K_STOP) -> Released[Any]:
    """PCE: PPC (``weight_ppc``), then NaivePCE on ``A x`` truncated to ``sqrt(K) gamma(d, beta/(2n))``
    (``weight_final``), then ``A^{-1} S A^{-T}``."""
    b = rows.builder
    A, K = ppc(rows, n, d, kappa, weight_ppc, beta / 2, k_stop)
    radius = math.sqrt(K) * chi_radius(d, beta / (2 * n))
    N.param(b, "final_radius", radius, f"sqrt(K={K:.6g}) chi_radius(d, beta/(2n)), beta={beta:g}")
    w = N.Clip(radius=radius)(N.Precondition(matrix=A)(rows))
    S = N.PSDProject()(N.GaussianMech(weight=weight_final)(N.SecondMoment()(w)))
    return N.Apply(fn=steps.unwhiten, shape=(d, d))(A, S)
