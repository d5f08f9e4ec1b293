"""The private per-column scale step: where each column lives and how wide it is, found from the data
under a small slice of the budget, so that estimators work on raw-scale data with no user bounds.

CWZ 2021's data-driven truncation (Sec. 5; sparse_discrete_heavy.md 3.6) in its "centre first" form,
per column j: a noisy histogram of ``|x_j|`` over the public log-scale bins ``[2^k, 2^(k+1))`` (Gaussian
noise under zCDP and approximate budgets, Laplace under pure ones)
locates the column's magnitude (``U_j = 2 x`` the right edge of the modal bin,
:class:`dpflow.nodes.ModeBinUpper`), and the private median ``c_j`` of the column clamped to
``[-U_j, U_j]`` is its centre.  A second histogram, of ``|x_j - c_j|``, locates the spread's magnitude
``U'_j``, and the private 75% quantile of ``|x_j - c_j|`` searched in ``[0, U'_j]`` is the column's
spread.  Ranges per column keep a small column's search range near its own values (a range shared with
a column a thousand times larger is a thousand times wider than it).  The quantiles are the exponential
mechanism over gaps (:class:`dpflow.nodes.Quantile`).  The scale is the spread in Gaussian units,
``s_j = spread_j / 1.1503`` (``P(|Z| <= 1.1503) = 0.75``).  Both released values move with the data's
location and scale, so a plan that standardises by them (``Precondition``) and truncates at a fixed
level is location- and scale-invariant (up to the log-scale bins, which only set the search ranges).

Why central quantiles: an extreme one (CWZ's 1%/99%) is ``0.01 n`` ranks from the end of the range, so
under a small epsilon the mechanism picks the empty stretch between the data and the range's end (its
width dwarfs the data's gaps); the median and the 75% quantile are at least ``n/4`` ranks from either
end, which outweighs any range located by the histogram.  Declared policy: a column with more than 75% of its values
on its median (an indicator column, typically) has spread 0 and is given scale 1 (left unscaled); so is one whose
spread was searched below ``2^-59`` (:data:`SPREAD_FLOOR`: the modal ``|x - c|`` was 0).

>>> import dpflow as dp
>>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
>>> X = b.source("X", dp.Vectors(d=2), n=1000)
>>> centre, scale = column_scales(X, d=2, weight=0.1)
>>> sorted({e.kind for e in b.build(c=centre, s=scale).check().entries if e.cost})
['GaussianMech', 'Quantile']
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

import numpy as np

from dpflow import nodes as N
from dpflow.estimators.base import BUDGET, NOISE, Transformer
from dpflow.handles import Released, Rows, Sensitive, Value
from dpflow.nodes.base import released_scalar
from dpflow.nodes.postprocess import accuracy_warning
from dpflow.nodes.quantile import log2_edges
from dpflow.plan import Plan
from dpflow.privacy import Measure, PureDP, gaussian_budget_rho

SPREAD_Q = 0.75
"""The quantile of ``|x_j - c_j|`` taken as the column's spread."""

SPREAD_SIGMAS = NormalDist().inv_cdf(0.5 + SPREAD_Q / 2)
"""The 75% quantile of ``|Z|``, Z ~ N(0, 1): 1.1503..., the spread of a Gaussian column in sigmas."""

HIST_BINS, HIST_MISS = len(log2_edges()) - 1, 0.01
"""The range histograms' public log-scale bins (121) and the probability that any of their noises reaches the
margin :func:`_column_costs` sizes them for."""

HIST_EPS = 16.0 * math.log(HIST_BINS / HIST_MISS)
"""A Laplace range histogram (pure budgets) needs epsilon >= HIST_EPS / n (about 150.6 / n): the modal bin holds
about n/4 rows and every one of the 121 noises, Laplace of scale ``b = 2 / epsilon`` (l1 sensitivity 2 under
replace-one), must stay below the margin n/8 in absolute value; ``P(|L| > t) = exp(-t / b)``, so
``121 exp(-n epsilon / 16) <= 0.01``."""

HIST_Z = NormalDist().inv_cdf(1.0 - HIST_MISS / (2 * HIST_BINS))
"""A Gaussian range histogram (zCDP and approximate budgets) needs rho >= (8 HIST_Z / n)^2: noise
``sigma = Delta_2 / sqrt(2 rho) = 1 / sqrt(rho)`` (l2 sensitivity sqrt 2 under replace-one) on each of the 121
bins stays below n/8 in absolute value with probability 0.99 when ``sigma HIST_Z <= n / 8``, HIST_Z = 3.94...
(the two-sided normal quantile at 0.01 / 121).  That is about 3.4x less epsilon-equivalent than Laplace."""

MEDIAN_EPS, SPREAD_EPS = 4.0, 8.0
"""The quantiles' needs, as epsilon times n over ``L = ln(4n) + 2`` (the log of the ratio between a search range
and the data's gaps, plus slack): the median's utility gap n/4 (half the ranks to either end) times epsilon/2
must beat L, so epsilon >= 4L/n; the spread (75% quantile) has n/4 ranks to the top end: epsilon >= 8L/n.  Under
zCDP the exponential mechanism costs epsilon^2 / 8 (bounded range)."""


def _column_costs(n: int, pure: bool) -> tuple[float, float, float, float]:
    """What each mechanism of one column needs (range of ``|x|``, median, range of ``|x - c|``, spread): epsilon
    under a pure budget, rho otherwise (Gaussian range histograms, the quantiles at epsilon^2 / 8).

    >>> [int(c * 1000**2) for c in _column_costs(1000, pure=False)]
    [991, 211, 991, 847]
    """
    L = math.log(4.0 * max(n, 2)) + 2.0
    median, spread = MEDIAN_EPS * L / n, SPREAD_EPS * L / n
    if pure:
        return (HIST_EPS / n, median, HIST_EPS / n, spread)
    hist = (8.0 * HIST_Z / n) ** 2
    return (hist, median**2 / 8.0, hist, spread**2 / 8.0)


SHARES = (0.25, 0.25, 0.25, 0.25)
"""A column's weight split between its four mechanisms (range of ``|x|``, median, range of ``|x - c|``,
spread): equal.  A split in proportion to each mechanism's need for a reliable answer at n = 10^4 (about 0.23,
0.11, 0.23, 0.42 under the Laplace-era rule) assumes the median's search range is about the data's width, but a
column whose mean is far from 0 relative to its spread (``|mu| / sd = 10^6``) has a range ``10^6`` times wider:
its median then missed in up to 58 of 60 seeds.  Measured over one column of N(mu, 1) at (n, epsilon) = (200, 4),
(500, 1), (2,000, 0.25), (10,000, 0.05) and mu in {0, 10, 10^3, 10^6}, the step at half the budget: misses
162/960 by that split, 1/960 equal, 10/960 with 0.3 for the ranges (benchmarks/results/scale_step.md)."""


def short_by(need: float, cost: Any, pure: bool) -> float:
    """A step mechanism's need (:func:`_column_costs`) over its certified ``cost`` (a ledger ``Cost``) in the
    step's currency: epsilon under a pure budget, rho otherwise.  At most 1 when the need is met; the factor its
    share must grow by otherwise; infinite when the cost is not known (a Gaussian event has no pure epsilon).

    >>> from fractions import Fraction
    >>> from dpflow.privacy import Cost
    >>> short_by(0.5, Cost.pure(Fraction(1, 4)), pure=True), short_by(0.01, Cost.gaussian_zcdp(Fraction(1, 50)), False)
    (2.0, 0.5)
    """
    have = cost.pure_eps if pure else cost.rho
    return math.inf if have is None or have <= 0 else need / float(have)


PRECISION_MARGIN = 2.0
"""The step is sized for this many times what each mechanism needs for a reliable answer (:func:`_column_costs`):
at exactly its need the spread's rank error can reach ``(2 / epsilon)(L + ln 100) / n = 0.35`` (the 75% quantile
searched between the 40% and 100% ones: a scale off by a factor up to about 2), at twice the rho 0.25.  Measured
(``truncated_mean``, d = 10, n = 2,000, ApproxDP(1, n^-1.1), 20 seeds): its per-column route's predicted error
held in 16 of 20 seeds at 1x, 19 of 20 at 2x."""

MIN_SCALE_WEIGHT, MAX_SCALE_WEIGHT = 0.02, 0.5
"""The range of the scale step's share chosen by :func:`scale_weight`."""


def scale_weight(n: int, d: int, budget: Measure) -> tuple[float, bool]:
    """The share of ``budget`` the scale step of d columns needs on n rows (public inputs only), and
    whether it was capped at :data:`MAX_SCALE_WEIGHT` (then n is too small for this budget: the plan
    carries an accuracy warning).  Each column gets ``1 / d`` of the step's weight, split by :data:`SHARES`, so
    the step needs ``PRECISION_MARGIN d max_k (cost_k / share_k)`` of :func:`_column_costs`: of the budget's
    epsilon under ``PureDP`` (pure composition adds epsilons), of its zCDP rho otherwise
    (:func:`dpflow.privacy.gaussian_budget_rho`); kept within ``[0.02, 0.5]``.

    >>> import dpflow as dp
    >>> w, capped = scale_weight(44_352, 11, dp.ApproxDP(1.0, 1e-6)); round(w, 3), capped
    (0.02, False)
    >>> scale_weight(352, 11, dp.ApproxDP(1.0, 1e-6))
    (0.5, True)
    """
    pure = isinstance(budget, PureDP)
    total = float(budget.epsilon) if isinstance(budget, PureDP) else float(gaussian_budget_rho(budget))
    need = PRECISION_MARGIN * d * max(c / s for c, s in zip(_column_costs(n, pure), SHARES, strict=True))
    share = need / total if total > 0 else math.inf
    return min(max(share, MIN_SCALE_WEIGHT), MAX_SCALE_WEIGHT), share > MAX_SCALE_WEIGHT


def warn_if_capped(builder: Any, n: int, d: int, capped: bool) -> None:
    """Record an accuracy warning (public: n, d and the budget) when the scale step's share was capped."""
    if capped:
        accuracy_warning(builder, f"n={n} rows are too few for a reliable private scale step of {d} columns under "
                                  f"this budget (it would need more than {MAX_SCALE_WEIGHT:.0%} of it): the centres "
                                  "and scales may be far off. Fix: give public bounds (radius=, upper=, bounds=), "
                                  "a larger budget, or more rows")


def truncation_level(n: int) -> float:
    """CWZ's truncation ``sqrt(2 ln n)`` in units of the column scale (sigma for Gaussian columns).

    >>> round(truncation_level(10_000), 4)
    4.2919
    """
    return math.sqrt(2.0 * math.log(max(n, 2)))


def negate(x: Any) -> float:
    """``-x`` of a released scalar (the lower end of a symmetric range).

    >>> negate(2.0)
    -2.0
    """
    return -released_scalar(x)


def stack(*values: Any) -> np.ndarray:
    """Released scalars as one vector.

    >>> stack(1.0, np.array([2.0])).tolist()
    [1.0, 2.0]
    """
    out: np.ndarray = np.asarray([released_scalar(v) for v in values], dtype=float)
    return out


SPREAD_FLOOR = 2.0**-58
"""A spread at most this was searched in the range of the two lowest log-scale bins (below ``2^-59``): the
modal ``|x - c|`` was 0, most values on the median (a 0/1 column with 70% zeros, say).  It counts as a zero
spread; dividing by it would blow the column up by ``2^58`` or more."""


def spread_scale(*spreads: Any) -> np.ndarray:
    """The released spreads as scales in Gaussian units (``spread / 1.1503``); a zero (or NaN) spread, or one
    at most :data:`SPREAD_FLOOR`, gives scale 1 (the declared policy for columns with most values on their
    median).

    >>> spread_scale(0.0, 1.1503493803760079, 1e-18).tolist()
    [1.0, 1.0, 1.0]
    """
    v = np.nan_to_num(stack(*spreads), nan=0.0)
    out: np.ndarray = np.where(v > SPREAD_FLOOR, v / SPREAD_SIGMAS, 1.0)
    return out


def inverse_diag(scale: Any) -> np.ndarray:
    """``diag(1 / scale_j)`` (a zero scale maps its column to 0).

    >>> inverse_diag(np.array([2.0, 0.0])).tolist()
    [[0.5, 0.0], [0.0, 0.0]]
    """
    s = np.asarray(scale, dtype=float).reshape(-1)
    with np.errstate(divide="ignore"):
        inv = np.where(s > 0, 1.0 / np.where(s > 0, s, 1.0), 0.0)
    out: np.ndarray = np.diag(inv)
    return out


def times(a: Any, b: Any) -> np.ndarray:
    """``a * b`` elementwise (released vectors; an importable function, so plans keep their JSON form).

    >>> times(np.array([1.0, 2.0]), 3.0).tolist()
    [3.0, 6.0]
    """
    out: np.ndarray = np.asarray(a, dtype=float) * np.asarray(b, dtype=float)
    return out


def unstandardize(values: Any, centre: Any, scale: Any) -> np.ndarray:
    """``centre + scale * values``: a released standardised vector back on the data's scale.

    >>> unstandardize(np.array([1.0, -1.0]), np.array([10.0, 0.0]), np.array([2.0, 3.0])).tolist()
    [12.0, -3.0]
    """
    out: np.ndarray = np.asarray(centre, dtype=float) + np.asarray(scale, dtype=float) * np.asarray(values, float)
    return out


SPREAD_RANGE_CAP = 4.0
"""The spread's search range is at most this times the column's range ``U`` (:func:`spread_range`)."""


def spread_range(found: Any, upper: Any) -> float:
    """The search range of ``|x - c|``: the range its own histogram located, at most ``4 U`` (post-processing).

    The centre ``c`` is clamped into ``[-U, U]``, so ``|x - c| <= |x| + U``: the 75% quantile of ``|x - c|``
    is at most ``U`` plus that of ``|x|``, within ``2 U`` whenever ``U`` covers three quarters of the
    column (the histogram's mode holds them; twice its right edge, with a factor 2 to spare).  A second
    histogram that fails (under a small epsilon, noise on an empty bin far above the data beats the true
    mode) would otherwise send the 75% quantile into an empty stretch up to ``2^61``, and the column's scale
    with it (measured: one column in ten at n = 2,000, d = 10, epsilon = 1; benchmarks/sparse_regression.py).

    >>> spread_range(2.0**50, 8.0), spread_range(4.0, 8.0)
    (32.0, 4.0)
    """
    return min(float(found), SPREAD_RANGE_CAP * released_scalar(upper))


def _range(rows: Sensitive[Rows], weight: float) -> Released[Value]:
    """``U``: twice the right edge of the modal log-scale bin of the row norms: a Laplace histogram under a pure
    budget, a Gaussian one otherwise (:data:`HIST_Z`: the same reliability for about 3.4x less)."""
    edges = log2_edges()
    mech = N.LaplaceMech if isinstance(rows.builder.budget, PureDP) else N.GaussianMech
    counts = mech(weight=weight)(N.Histogram(edges=edges)(N.Magnitudes(of="rows")(rows)))
    return N.ModeBinUpper(edges=edges, factor=2.0)(counts)


def _centre(col: Sensitive[Rows], w_range: float, w_median: float) -> tuple[Released[Value], Released[Value]]:
    """The private median of one column, searched in ``[-U, U]``, and ``U`` (located by a log-scale histogram)."""
    upper = _range(col, w_range)
    median = N.Quantile(q=0.5, weight=w_median)(
        N.OrderStatistics(lower=N.Apply(fn=negate, shape=())(upper), upper=upper)(col))
    return median, upper


def column_centres(X: Sensitive[Rows], d: int, weight: float) -> Released[Value]:
    """The released centres (private medians) of the d columns of ``X`` alone, under ``weight`` of the budget
    (split equally between the columns, and within each as :data:`SHARES` splits the centre's two mechanisms)."""
    w_range, w_median = (weight / d * share / (SHARES[0] + SHARES[1]) for share in SHARES[:2])
    medians = [_centre(N.Columns(keep=[j])(X), w_range, w_median)[0] for j in range(d)]
    return N.Apply(fn=stack, shape=(d,))(*medians)


def column_centre_scale(col: Sensitive[Rows], weight: float) -> tuple[Released[Value], Released[Value]]:
    """The private centre (median) and spread (75% quantile of ``|x - c|``) of one column, each searched
    in a range located by its own log-scale histogram; ``weight`` is split by :data:`SHARES`."""
    w_range, w_median, w_spread_range, w_spread = (weight * share for share in SHARES)
    median, upper = _centre(col, w_range, w_median)
    centred = N.Precondition(matrix=col.builder.public([[1.0]]), center=N.Apply(fn=stack, shape=(1,))(median))(col)
    spread_upper = N.Apply(fn=spread_range, shape=())(_range(centred, w_spread_range), upper)
    spread = N.Quantile(q=SPREAD_Q, weight=w_spread)(
        N.OrderStatistics(lower=0.0, upper=spread_upper)(N.Magnitudes(of="rows")(centred)))
    return median, spread


def missing_as_zero(X: Sensitive[Rows]) -> Sensitive[Rows]:
    """The rows a scale step reads when the statistic it serves counts a missing value by its own policy
    (``dpflow.stats``, :func:`dpflow.estimators.regression.scaled_ssp`): a NaN entry counts as 0 and +-inf
    as +-``MAX_BOUND`` (a box clip's policy), the same in every node of the step."""
    from dpflow.domains import MAX_BOUND

    return N.Clip(box=(-MAX_BOUND, MAX_BOUND))(X)


def column_scales(X: Sensitive[Rows], d: int, weight: float) -> tuple[Released[Value], Released[Value]]:
    """Released ``(centre, scale)`` vectors of the d columns of ``X`` under ``weight`` of the budget
    (split equally between the columns).

    Columns are separate views of the same record, so their costs add (the planner composes them).
    """
    centres, spreads = [], []
    for j in range(d):
        c, sp = column_centre_scale(N.Columns(keep=[j])(X), weight / d)
        centres.append(c)
        spreads.append(sp)
    return N.Apply(fn=stack, shape=(d,))(*centres), N.Apply(fn=spread_scale, shape=(d,))(*spreads)


def standardize(X: Sensitive[Rows], centre: Released[Value], scale: Released[Value], d: int) -> Sensitive[Rows]:
    """The rows mapped to ``(x_j - centre_j) / scale_j`` (a row-wise map by released values, stability 1)."""
    return N.Precondition(matrix=N.Apply(fn=inverse_diag, shape=(d, d))(scale), center=centre)(X)


class StandardScaler(Transformer):
    """The private per-column scale step (:func:`column_scales`) as a scikit-learn transformer: ``fit`` releases
    each column's centre and scale under the whole ``budget``, ``transform`` maps rows to ``(x - mean_) / scale_``
    and ``inverse_transform`` back (post-processing: no charge).  ``mean_`` is the released centre, a private
    median (for a symmetric column, its mean), ``scale_`` the released spread in Gaussian units (a column with
    most values on its median gets scale 1: :func:`spread_scale`).  :meth:`make_plan` is the plan for d columns
    and n rows, before any data; ``noise`` defaults to OS entropy (:class:`dpflow.SecureNoise`).

    >>> import numpy as np, dpflow as dp
    >>> X = np.random.default_rng(0).normal(size=(5000, 2)) * [1.0, 1e4] + [0.0, -3e5]
    >>> s = StandardScaler(budget=dp.ZCDP(1.0), noise=dp.SeededNoise(0)).fit(X)
    >>> Z = s.transform(X)
    >>> bool(np.all(np.abs(Z.mean(axis=0)) < 0.1) and np.all(np.abs(Z.std(axis=0) - 1) < 0.1))
    True
    >>> bool(np.allclose(s.inverse_transform(Z), X))
    True
    """

    constraints = {"budget": BUDGET, "noise": NOISE}

    def __init__(self, budget: Measure, noise: Any = None) -> None:
        self.budget, self.noise = budget, noise

    def make_plan(self, d: int, n: int) -> Plan:
        """The plan ``fit`` runs on n rows of d columns (outputs ``centre`` and ``scale``); no data is read."""
        from dpflow.domains import Vectors
        from dpflow.plan import PlanBuilder

        self.validate_params()
        b = PlanBuilder(budget=self.budget, neighbors="replace", name="standard_scaler")
        X = b.source("X", Vectors(d=d), n=n)
        centre, scale = column_scales(X, d, 1.0)
        return b.build(centre=centre, scale=scale)

    def fit(self, X: Any, y: Any = None) -> StandardScaler:
        """Release the centres and scales of the columns of ``X`` (n x d array or DataFrame; a value that is not a
        number is missing, counted by the nodes' declared policies); ``y`` is ignored."""
        self.validate_params()
        Xa = self._rows(X, reset=True)
        plan = self.make_plan(Xa.shape[1], Xa.shape[0])
        result = plan.run({"X": Xa}, noise=self._noise())
        self.mean_ = np.asarray(result.released["centre"], dtype=float).reshape(-1)
        self.scale_ = np.asarray(result.released["scale"], dtype=float).reshape(-1)
        self.report_, self.plan_ = result.report, plan
        return self

    def transform(self, X: Any) -> np.ndarray:
        """``(x - mean_) / scale_`` per row (post-processing)."""
        self._require_fitted("transform")
        out: np.ndarray = (self._rows(X, reset=False) - self.mean_) / self.scale_
        return out

    def inverse_transform(self, X: Any) -> np.ndarray:
        """``x * scale_ + mean_`` per row: standardised rows back in the data's units (post-processing)."""
        self._require_fitted("inverse_transform")
        return unstandardize(self._rows(X, reset=False), self.mean_, self.scale_)
