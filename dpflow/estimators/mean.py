"""The clipped (truncated) mean of Cai, Wang & Zhang (2021), Algorithm 3.1."""

from __future__ import annotations

import math

from dpflow import nodes as N
from dpflow.domains import Vectors
from dpflow.plan import Plan, PlanBuilder
from dpflow.plan.graph import require_budget
from dpflow.privacy import ZCDP, ApproxDP, Measure


def clipped_mean(
    d: int,
    n: int,
    budget: Measure,
    mean_bound: float = 0.0,
    sigma: float = 1.0,
    radius: float | None = None,
) -> Plan:
    """Private mean of n rows in R^d: clip every coordinate to [-R, R], average, add
    Gaussian noise (CWZ 2021 Alg. 3.1; sparse_discrete_heavy.md 3.1).

    The replace-one l2 sensitivity of the mean is ``2 R sqrt(d) / n``.  Under a zCDP
    budget the noise is ``sigma = Delta / sqrt(2 rho)`` (Bun-Steinke 2016 Prop. 1.6);
    under an ``ApproxDP(eps, delta)`` budget the plan is all-Gaussian, so the planner
    calibrates by the exact Gaussian-DP profile, i.e. the analytic Gaussian of
    Balle-Wang 2018 (valid for every epsilon, and tighter than CWZ's classical
    ``sqrt(2 ln(1.25/delta)) / eps``, which is valid only for eps < 1).

    ``R`` defaults to CWZ's choice ``mean_bound + sigma * sqrt(2 ln n)`` where
    ``mean_bound`` is a public bound on ``||mu||_inf`` and ``sigma`` the per-coordinate
    standard deviation.  Source ``X``; output ``mean``.

    >>> import dpflow as dp
    >>> plan = clipped_mean(d=5, n=10_000, budget=dp.ZCDP(0.5), mean_bound=1.0)
    >>> plan.check().totals[0].rho
    Fraction(1, 2)
    """
    require_budget(budget, "clipped_mean", (ZCDP, ApproxDP))
    R = radius if radius is not None else mean_bound + sigma * math.sqrt(2.0 * math.log(n))
    b = PlanBuilder(budget=budget, neighbors="replace", name="clipped_mean")
    X = b.source("X", Vectors(d=d), n=n)
    mean = N.GaussianMech()(N.Mean()(N.Clip(box=(-R, R))(X)))
    return b.build(mean=mean)
