"""Sparse mean estimation (Cai-Wang-Zhang 2021, Algorithm 3.3): coordinate truncation, then Peeling."""

from __future__ import annotations

from typing import Any

import numpy as np

from dpflow import nodes as N
from dpflow.domains import Vectors
from dpflow.estimators.scale import column_scales, inverse_diag, times, truncation_level, warn_if_capped
from dpflow.estimators.truncation import radius_or_private, truncation_share
from dpflow.handles import Released
from dpflow.plan import Plan, PlanBuilder
from dpflow.plan.graph import require_budget
from dpflow.privacy import ZCDP, ApproxDP, Measure

PERCENTILE_MAX_D = 64
"""``truncation="auto"`` uses the per-coordinate rule up to this dimension: it spends its weight on 2d
quantiles, which stay accurate only while d is small against n epsilon (the pooled rule costs two
mechanisms for any d)."""


def sparse_mean(
    d: int,
    n: int,
    s: int,
    budget: Measure,
    radius: float | None = None,
    truncation_weight: float | None = None,
    upper: float | None = None,
    accounting: str = "auto",
    truncation: str = "auto",
) -> Plan:
    """Private s-sparse mean of n rows in R^d (CWZ 2021 Alg. 3.3; sparse_discrete_heavy.md 3.3).

    The rows are clipped coordinatewise to ``[-R, R]`` and averaged (l-infinity sensitivity
    ``lambda = 2R/n`` under replace-one), then :class:`dpflow.nodes.Peel` selects s coordinates by
    report-noisy-max and releases them with fresh Laplace noise; every other coordinate is 0.

    Data-driven truncation when ``radius`` is None (weight ``truncation_weight``; by default the share
    the data size needs for the percentile rule, :func:`dpflow.estimators.scale.scale_weight`, else 0.1):
    ``truncation="percentile"`` is per coordinate and scale-free: a private centre c_j and scale s_j
    (:func:`dpflow.estimators.scale.column_scales`) give ``R_j = |c_j| + sqrt(2 ln n) s_j`` (CWZ's
    public ``||mu||_inf + sigma sqrt(2 ln n)``, one coordinate at a time); the rows are divided by R_j
    (a map by released values), truncated to ``[-1, 1]``, peeled, and the s released coordinates
    multiplied back by their R_j.  Peel then ranks coordinates by ``|mean_j| / R_j``, which for equal
    spreads orders them as ``|mean_j|``.  ``"magnitude"`` is the pooled rule
    ``R = gaussian_factor(n) * median(|x_ij|)`` (:func:`dpflow.estimators.truncation.private_radius`),
    which needs columns of one scale.  ``"auto"``: percentile up to d = 64
    (:data:`PERCENTILE_MAX_D`) when no ``upper`` is given, else magnitude.  Budgets: ``ZCDP`` or
    ``ApproxDP``; ``accounting="basic"`` (ApproxDP only) is the paper's per-mechanism (epsilon, delta)
    accounting.  Source ``X``; outputs ``mean`` and ``radius`` (a vector under the percentile rule).

    >>> import dpflow as dp
    >>> plan = sparse_mean(d=100, n=5000, s=5, budget=dp.ZCDP(0.5), radius=4.0)
    >>> [e.kind for e in plan.check().entries if e.cost]
    ['Peel']
    """
    require_budget(budget, "sparse_mean", (ZCDP, ApproxDP))
    if not 1 <= s <= d:
        raise ValueError(f"sparse_mean needs 1 <= s <= d, got s={s}, d={d}")
    if truncation not in ("auto", "percentile", "magnitude"):
        raise ValueError(f"truncation must be 'auto', 'percentile' or 'magnitude', got {truncation!r}")
    percentile = radius is None and (
        truncation == "percentile" or (truncation == "auto" and upper is None and d <= PERCENTILE_MAX_D))
    truncation_weight, capped = truncation_share(truncation_weight, percentile, n, d, budget)
    b = PlanBuilder(budget=budget, neighbors="replace", name="sparse_mean", accounting=accounting)
    X = b.source("X", Vectors(d=d), n=n)
    if percentile:
        warn_if_capped(b, n, d, capped)
        centre, scale = column_scales(X, d, truncation_weight)
        R = N.Apply(fn=coordinate_radii, shape=(d,))(centre, scale, b.public(truncation_level(n)))
        Y = N.Precondition(matrix=N.Apply(fn=inverse_diag, shape=(d, d))(R))(X)
        peeled = N.Peel(s=s, weight=1 - truncation_weight)(N.TruncatedMean(bound=1.0)(Y))
        return b.build(mean=N.Apply(fn=times, shape=(d,))(peeled, R), radius=R)
    Rp = radius_or_private(X, n, radius, upper, truncation_weight)
    mean = N.Peel(s=s, weight=1 - truncation_weight)(N.TruncatedMean(bound=Rp)(X))
    return b.build(mean=mean, radius=Rp if isinstance(Rp, Released) else b.public(Rp))


def coordinate_radii(centre: Any, scale: Any, level: Any) -> np.ndarray:
    """``R_j = |c_j| + level * s_j``: per-coordinate truncation radii around 0.

    >>> coordinate_radii(np.array([-1.0, 2.0]), np.array([1.0, 0.5]), 2.0).tolist()
    [3.0, 3.0]
    """
    out: np.ndarray = np.abs(np.asarray(centre, float)) + float(np.asarray(level)) * np.asarray(scale, float)
    return out
