"""Sparse mean estimation (Cai-Wang-Zhang 2021, Algorithm 3.3): coordinate truncation, then Peeling."""

from __future__ import annotations

from dpflow import nodes as N
from dpflow.domains import Vectors
from dpflow.estimators.truncation import radius_or_private
from dpflow.handles import Released
from dpflow.plan import Plan, PlanBuilder
from dpflow.plan.graph import require_budget
from dpflow.privacy import ZCDP, ApproxDP, Measure


def sparse_mean(
    d: int,
    n: int,
    s: int,
    budget: Measure,
    radius: float | None = None,
    truncation_weight: float = 0.1,
    upper: float | None = None,
    accounting: str = "auto",
) -> Plan:
    """Private s-sparse mean of n rows in R^d (CWZ 2021 Alg. 3.3; sparse_discrete_heavy.md 3.3).

    The rows are clipped coordinatewise to ``[-R, R]`` and averaged (l-infinity sensitivity
    ``lambda = 2R/n`` under replace-one), then :class:`dpflow.nodes.Peel` selects s coordinates by
    report-noisy-max and releases them with fresh Laplace noise; every other coordinate is 0.

    ``radius=None`` (the default) picks R from the data: ``gaussian_factor(n) * median(|x_ij|)``
    (:func:`dpflow.estimators.truncation.private_radius`, weight ``truncation_weight``).  CWZ's
    public choice is ``R = ||mu||_inf bound + sigma sqrt(2 ln n)``.  Budgets: ``ZCDP`` or ``ApproxDP``;
    ``accounting="basic"`` (ApproxDP only) is the paper's per-mechanism (epsilon, delta) accounting.
    Source ``X``; outputs ``mean`` and ``radius``.

    >>> import dpflow as dp
    >>> plan = sparse_mean(d=100, n=5000, s=5, budget=dp.ZCDP(0.5), radius=4.0)
    >>> [e.kind for e in plan.check().entries if e.cost]
    ['Peel']
    """
    require_budget(budget, "sparse_mean", (ZCDP, ApproxDP))
    if not 1 <= s <= d:
        raise ValueError(f"sparse_mean needs 1 <= s <= d, got s={s}, d={d}")
    if not 0 < truncation_weight < 1:
        raise ValueError(f"truncation_weight must be in (0, 1), got {truncation_weight}")
    b = PlanBuilder(budget=budget, neighbors="replace", name="sparse_mean", accounting=accounting)
    X = b.source("X", Vectors(d=d), n=n)
    R = radius_or_private(X, n, radius, upper, truncation_weight)
    mean = N.Peel(s=s, weight=1 - truncation_weight)(N.TruncatedMean(bound=R)(X))
    return b.build(mean=mean, radius=R if isinstance(R, Released) else b.public(R))
