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
import warnings
from statistics import NormalDist
from typing import Any

import attrs

from dpflow import nodes as N
from dpflow.domains import Vectors
from dpflow.errors import AccuracyWarning
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
from dpflow.planner.accuracy import Prediction
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


CONFIDENCE = 0.9
"""The probability at which :func:`truncated_mean` states its predicted error."""


def release_noise(plan: Plan) -> tuple[float, bool]:
    """The certified noise of the plan's mean (its last Gaussian mechanism: the scale step's range histograms come
    first): sigma, or sigma per unit of its sensitivity when that is a released value; read from the certificate
    (no data is read)."""
    cal = [c for c in plan.check().noise_calibrations if c.family == "gaussian"][-1]
    return cal.scale, cal.per_unit


def _l2_quantile(d: int, per_coordinate: float) -> float:
    """The ``CONFIDENCE`` quantile of the l2 norm of d independent N(0, per_coordinate^2) entries."""
    from scipy.stats import chi2

    return per_coordinate * math.sqrt(float(chi2.ppf(CONFIDENCE, d)))


def _route_predictions(d: int, n: int, budget: Measure, truncation_weight: float | None,
                       accounting: str) -> dict[str, Prediction]:
    """Both no-bounds routes, built and certified (no data), each with its predicted l2 error of the mean at
    ``CONFIDENCE``: noise and sampling error per coordinate.

    * ``percentile``: in units of the columns' scales (sigma_j for Gaussian columns), whatever their location:
      the rows are standardised by the released centre and scale.  Infinite when the scale step's share was
      capped (:func:`dpflow.estimators.scale.scale_weight`): at that n, d and budget it is unreliable.
    * ``magnitude``: in units of ``m``, the median of |x_ij| (the truncation is ``R = gaussian_factor(n) m``);
      the sampling term uses ``sigma <= m / 0.6745`` (the median of |N(mu, sigma^2)| is smallest at mu = 0).
      It is origin-centred: rows far from the origin have ``m`` far above sigma.
    """
    out: dict[str, Prediction] = {}
    for route in ("percentile", "magnitude"):
        plan = _build(d, n, budget, None, truncation_weight, None, accounting, route)
        sigma, per_unit = release_noise(plan)
        if route == "percentile":
            _, capped = truncation_share(truncation_weight, True, n, d, budget)
            value = math.inf if capped else _l2_quantile(d, math.hypot(sigma, 1.0 / math.sqrt(n)))
            why = ("per-column private centre and scale (location- and scale-invariant), truncation at "
                   f"T = sqrt(2 ln n) = {truncation_level(n):.3g} scales: " +
                   ("its scale step needs more than half the budget at this n, d: unreliable" if capped else
                    f"noise sigma {sigma:.3g} and sampling 1/sqrt(n) per coordinate"))
            metric = "l2 in column scales"
        else:
            noise = sigma * 2.0 * gaussian_factor(n) * math.sqrt(d) / n if per_unit else sigma
            value = _l2_quantile(d, math.hypot(noise, 1.0 / (HALF_NORMAL_MEDIAN * math.sqrt(n))))
            why = (f"pooled private magnitude m = median |x_ij| (one range and one quantile for all {d} columns), "
                   f"truncation at R = {gaussian_factor(n):.3g} m: noise sigma {noise:.3g} m and sampling "
                   "m / (0.6745 sqrt(n)) per coordinate")
            metric = "l2 in units of median |x_ij|"
        out[route] = Prediction("mean", metric, value, CONFIDENCE, why, route)
    return out


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

    With neither ``radius`` nor ``upper`` and ``truncation="auto"``, the route is chosen before data by the
    smaller predicted error (:func:`_route_predictions`, public: n, d and the budget): the per-column route
    unless its scale step is unreliable at this n (then the pooled magnitude route, which needs one column's
    budget instead of d; measured at d = 10, n = 500, epsilon = 0.5: a median error of 2e16 for the per-column
    route against 1.2 for the pooled one).  The chosen route's prediction is in the ledger
    (``Ledger.predictions``) with both routes' figures.

    >>> import dpflow as dp
    >>> plan = truncated_mean(d=5, n=10_000, budget=dp.ZCDP(0.5))
    >>> plan.check().totals[0].budget_used
    '100%'
    >>> p = plan.check().predictions[0]; p.route, round(p.value, 3)
    ('percentile', 0.031)
    >>> truncated_mean(d=10, n=500, budget=dp.ZCDP(0.05)).check().predictions[0].route
    'magnitude'
    """
    require_budget(budget, "truncation", (ZCDP, ApproxDP))
    if truncation not in ("auto", "percentile", "magnitude"):
        raise ValueError(f"truncation must be 'auto', 'percentile' or 'magnitude', got {truncation!r}")
    if radius is None and upper is None:
        with warnings.catch_warnings():  # candidates only: the chosen plan is built again and warns itself
            warnings.simplefilter("ignore", AccuracyWarning)
            routes = _route_predictions(d, n, budget, truncation_weight, accounting)
        # the per-column route's error in scales is at most the magnitude route's (the same truncation T in
        # sigma units for centred rows, a smaller one otherwise): it is chosen whenever it is reliable
        auto = "percentile" if math.isfinite(routes["percentile"].value) else "magnitude"
        chosen = auto if truncation == "auto" else truncation
        others = "; ".join(f"{r}: {p.value:.3g}" for r, p in routes.items() if r != chosen)
        pred = routes[chosen]
        pred = attrs.evolve(pred, derivation=f"{pred.derivation} (compared with {others})")
        return _build(d, n, budget, None, truncation_weight, None, accounting, chosen, pred)
    return _build(d, n, budget, radius, truncation_weight, upper, accounting, truncation)


def _build(d: int, n: int, budget: Measure, radius: float | None, truncation_weight: float | None,
           upper: float | None, accounting: str, truncation: str, prediction: Prediction | None = None) -> Plan:
    """The truncated-mean plan of one route (see :func:`truncated_mean`), with its predicted error if given."""
    percentile = radius is None and (truncation == "percentile" or (truncation == "auto" and upper is None))
    truncation_weight, capped = truncation_share(truncation_weight, percentile, n, d, budget)
    b = PlanBuilder(budget=budget, neighbors="replace", name="truncated_mean", accounting=accounting)
    X = b.source("X", Vectors(d=d), n=n)
    if prediction is not None:
        p = prediction
        N.predicted_error(b, p.output, p.metric, p.value, p.confidence, p.derivation, p.route, p.given)
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
