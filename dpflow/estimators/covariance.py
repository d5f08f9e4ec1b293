"""NaivePCE: the naive private covariance estimator (KLSU 2019, Algorithm 1)."""

from __future__ import annotations

import math

from dpflow import nodes as N
from dpflow.domains import Vectors
from dpflow.estimators.tails import chi_radius
from dpflow.plan import Plan, PlanBuilder
from dpflow.plan.graph import require_budget
from dpflow.privacy import ZCDP, ApproxDP, Measure


def naive_pce(
    d: int,
    n: int,
    budget: Measure,
    kappa: float,
    beta: float = 0.1,
    unknown_mean: bool = True,
) -> Plan:
    """Private covariance of N(mu, Sigma) data with Sigma <= kappa I (KLSU 2019 Alg. 1;
    gaussian.md 3.1).

    Rows (or, with ``unknown_mean``, the m = n // 2 pair differences
    ``(x_2i - x_2i+1)/sqrt(2)``, which are N(0, Sigma)) are clipped to the l2 ball of
    radius ``sqrt(T)``, ``T = kappa * chi_radius(d, beta / m)^2`` (all rows fit with
    probability >= 1 - beta); their second moment has replace-one Frobenius
    sensitivity ``sqrt(2) T / m``; Gaussian noise on the upper triangle, then the PSD
    projection.  Accurate once kappa = O(1); use it after preconditioning.
    Source ``X``; output ``covariance``.

    >>> import dpflow as dp
    >>> plan = naive_pce(d=3, n=10_000, budget=dp.ZCDP(0.5), kappa=4.0)
    >>> plan.check().totals[0].rho
    Fraction(1, 2)
    """
    require_budget(budget, "naive_pce", (ZCDP, ApproxDP))
    if kappa <= 0:
        raise ValueError(f"kappa must be positive, got {kappa}")
    m = n // 2 if unknown_mean else n
    radius = math.sqrt(kappa) * chi_radius(d, beta / max(m, 1))
    b = PlanBuilder(budget=budget, neighbors="replace", name="naive_pce")
    X = b.source("X", Vectors(d=d), n=n)
    rows = N.PairDifferences()(X) if unknown_mean else X
    noisy = N.GaussianMech()(N.SecondMoment()(N.Clip(radius=radius)(rows)))
    return b.build(covariance=N.PSDProject()(noisy))
