"""Data-driven truncation: a private scale estimate that sets the clipping radius of a later node,
paid for with its own small slice of the budget (its nodes appear in the ledger like any other).

The default rule (sparse_discrete_heavy.md 3.6, CWZ 2021 Sec. 5 as reconstructed there): the private
median ``m`` of the magnitudes ``|x_ij|`` (pooled over coordinates, stability d) or of the row norms,
by the exponential mechanism over the gaps of the sorted data (:class:`dpflow.nodes.Quantile`),
then ``R = factor * m``.  For Gaussian data the median of ``|x|`` is ``0.6745 sigma``, so
``factor = sqrt(2 ln n) / 0.6745`` gives CWZ's ``R = sigma sqrt(2 ln n)``.  The quantile needs a
range ``[0, upper]``: when no public ``upper`` is known the first step is a histogram of the
row norms (stability 1) over the public log-scale bins ``[2^k, 2^(k+1))``, k = -60..60 (all values below or above
land in the end bins), released with Laplace noise; the range is ``[0, 2^(k*+2)]`` for the modal
bin k*.  The bins are public and finite, so this is the plain Laplace histogram (pure DP, no delta),
not the stability histogram that an unbounded set of bins would need.

>>> import dpflow as dp
>>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
>>> X = b.source("X", dp.Vectors(d=5), n=1000)
>>> R = private_radius(X, factor=gaussian_factor(1000))
>>> plan = b.build(radius=R)
>>> [e.kind for e in plan.check().entries if e.cost]
['LaplaceMech', 'Quantile']
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

from dpflow import nodes as N
from dpflow.domains import Vectors
from dpflow.estimators.scale import (
    column_scales,
    scale_weight,
    standardize,
    times,
    truncation_level,
    unstandardize,
    warn_if_capped,
)
from dpflow.handles import Released, Rows, Sensitive, Value
from dpflow.nodes.quantile import log2_edges
from dpflow.plan import Plan, PlanBuilder
from dpflow.plan.graph import require_budget
from dpflow.privacy import ZCDP, ApproxDP, Measure

HALF_NORMAL_MEDIAN = NormalDist().inv_cdf(0.75)
"""The median of |Z| for Z ~ N(0, 1): 0.6744897..."""


def gaussian_factor(n: int) -> float:
    """``sqrt(2 ln n) / 0.6745``: turns a median of |x| into CWZ's truncation level ``sigma sqrt(2 ln n)``.

    >>> round(gaussian_factor(10_000), 4)
    6.3632
    """
    if n < 2:
        raise ValueError(f"gaussian_factor needs n >= 2, got {n}")
    return math.sqrt(2.0 * math.log(n)) / HALF_NORMAL_MEDIAN


def private_radius(
    rows: Sensitive[Rows],
    *,
    of: str = "coordinates",
    q: float = 0.5,
    factor: float = 1.0,
    shift: float = 0.0,
    upper: float | None = None,
    weight: float = 1.0,
    range_weight: float = 0.5,
) -> Released[Value]:
    """Add the data-driven radius ``factor * quantile_q(magnitudes) + shift`` to a plan.

    ``of`` is ``"coordinates"`` (|x_ij| pooled, for coordinate clipping) or ``"rows"`` (row norms, for
    l2 clipping).  ``upper`` is a public bound on the magnitudes; ``None`` adds the log-scale
    histogram step (weight ``range_weight``).  ``weight`` is the quantile's budget weight.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    >>> R = private_radius(b.source("X", dp.Reals(), n=100), upper=10.0)
    """
    if not (math.isfinite(factor) and factor > 0 and math.isfinite(shift) and shift >= 0):
        raise ValueError(f"factor must be finite and positive and shift finite and >= 0, got {factor}, {shift}")
    mags = N.Magnitudes(of=of)(rows)
    hi: Any
    if upper is None:
        # the range is located from the row norms (stability 1, so the histogram's l1 sensitivity is 2, not 2d);
        # every |x_ij| is at most its row's norm, so the range covers the pooled magnitudes too
        edges = log2_edges()
        counts = N.LaplaceMech(weight=range_weight)(N.Histogram(edges=edges)(N.Magnitudes(of="rows")(rows)))
        hi = N.ModeBinUpper(edges=edges, factor=2.0)(counts)
    else:
        if not (math.isfinite(upper) and upper > 0):
            raise ValueError(f"upper must be finite and positive, got {upper}")
        hi = upper
    quant = N.Quantile(q=q, weight=weight)(N.OrderStatistics(lower=0.0, upper=hi)(mags))
    return N.ScaleShift(scale=factor, shift=shift)(quant)


def radius_or_private(
    X: Sensitive[Rows], n: int, radius: float | None, upper: float | None, truncation_weight: float
) -> Any:
    """The public ``radius`` if given (checked), else :func:`private_radius` with the Gaussian factor
    for n and ``truncation_weight`` of the budget (split with the range step when ``upper`` is None)."""
    if radius is None:
        return private_radius(X, factor=gaussian_factor(n), upper=upper,
                              weight=truncation_weight / (1 if upper is not None else 2),
                              range_weight=truncation_weight / 2)
    if not (math.isfinite(radius) and radius > 0):
        raise ValueError(f"radius must be finite and positive, got {radius}")
    return radius


def truncation_share(weight: float | None, percentile: bool, n: int, d: int, budget: Measure) -> tuple[float, bool]:
    """The truncation step's share: ``weight`` if given (checked to be in (0, 1)), else the scale step's
    data-size share (:func:`dpflow.estimators.scale.scale_weight`) for the percentile rule and 0.1 for the
    others; and whether the scale step's share was capped."""
    if weight is not None:
        if not 0 < weight < 1:
            raise ValueError(f"truncation_weight must be in (0, 1), got {weight}")
        return weight, False
    return scale_weight(n, d, budget) if percentile else (0.1, False)


def truncated_mean(
    d: int,
    n: int,
    budget: Measure,
    radius: float | None = None,
    truncation_weight: float | None = None,
    upper: float | None = None,
    accounting: str = "auto",
    truncation: str = "auto",
) -> Plan:
    """Private mean by coordinate truncation and the Gaussian mechanism (CWZ 2021 Alg. 3.1,
    sparse_discrete_heavy.md 3.1) with a data-driven truncation by default.

    With neither ``radius`` nor ``upper`` (``truncation="auto"``, the default, or ``"percentile"``) the
    truncation is CWZ's rule centred first,
    location- and scale-invariant: a private centre c_j (median) and scale s_j (from the 75% quantile of
    ``|x_j - c_j|``) per coordinate (:func:`dpflow.estimators.scale.column_scales`, weight
    ``truncation_weight``, by default the share the data size needs,
    :func:`dpflow.estimators.scale.scale_weight`); the rows are standardised to ``(x_j - c_j) / s_j``, truncated to
    ``[-T, T]`` with ``T = sqrt(2 ln n)`` (CWZ's ``sigma sqrt(2 ln n)``), averaged with Gaussian noise
    (l2 sensitivity ``2 T sqrt(d) / n``) and mapped back (``c + s * mean``, post-processing).  Output
    ``radius`` is then the per-coordinate truncation half-width ``T s_j``.
    With a public ``upper`` bound on the magnitudes, or ``truncation="magnitude"``, the level is the pooled
    ``R = gaussian_factor(n) * median(|x_ij|)`` (:func:`private_radius`, the quantile searched in
    ``[0, upper]`` or in a range from a log-scale histogram), which needs data centred near 0 with columns
    of one scale; with ``radius`` it is public.
    The l2 sensitivity of the truncated mean is ``2 R sqrt(d) / n``.  Source ``X``; outputs ``mean``
    and ``radius``.

    >>> import dpflow as dp
    >>> plan = truncated_mean(d=5, n=10_000, budget=dp.ZCDP(0.5))
    >>> plan.check().totals[0].budget_used
    '100%'
    """
    require_budget(budget, "truncation", (ZCDP, ApproxDP))
    if truncation not in ("auto", "percentile", "magnitude"):
        raise ValueError(f"truncation must be 'auto', 'percentile' or 'magnitude', got {truncation!r}")
    percentile = radius is None and (truncation == "percentile" or (truncation == "auto" and upper is None))
    truncation_weight, capped = truncation_share(truncation_weight, percentile, n, d, budget)
    b = PlanBuilder(budget=budget, neighbors="replace", name="truncated_mean", accounting=accounting)
    X = b.source("X", Vectors(d=d), n=n)
    if percentile:
        warn_if_capped(b, n, d, capped)
        centre, scale = column_scales(X, d, truncation_weight)
        T = truncation_level(n)
        noisy = N.GaussianMech(weight=1 - truncation_weight)(N.TruncatedMean(bound=T)(standardize(X, centre, scale, d)))
        mean = N.Apply(fn=unstandardize, shape=(d,))(noisy, centre, scale)
        return b.build(mean=mean, radius=N.Apply(fn=times, shape=(d,))(scale, b.public(T)))
    R = radius_or_private(X, n, radius, upper, truncation_weight)
    mean = N.GaussianMech(weight=1 - truncation_weight)(N.TruncatedMean(bound=R)(X))
    return b.build(mean=mean, radius=R if isinstance(R, Released) else b.public(R))
