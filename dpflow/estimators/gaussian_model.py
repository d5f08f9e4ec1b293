"""The private Gaussian location and covariance (:func:`dpflow.estimators.gaussian.fit`) as a scikit-learn
estimator, :class:`Covariance` (its own module: ``gaussian`` imports ``covariance``, so the class cannot live
there)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dpflow.errors import ParameterError
from dpflow.estimators.base import BOOLEAN, BUDGET, NOISE, Constraint, Estimator, in_range, optional, positive
from dpflow.plan import Plan
from dpflow.privacy import Measure


class Covariance(Estimator):
    """A private Gaussian location and covariance (:func:`dpflow.estimators.gaussian.fit`: CoinPress under public
    bounds, or without them a private scale search or the per-column scale step first) as a scikit-learn
    estimator: after ``fit``, ``location_`` and ``covariance_`` (released), ``route_`` (the route taken, chosen
    by predicted error before any data), ``plan_`` (the last plan run), ``report_`` (its report: ledger and run
    facts) and ``scale_search_`` (the scale search's :class:`dpflow.estimators.gaussian.ScaleSearch` of a fit
    without bounds, else ``None``).  ``mean_bound`` bounds ``||mu||_2`` and ``cov_bound`` ``Sigma <= cov_bound I``
    (both or neither); ``route``, ``split``, ``max_error`` and ``strict`` are :func:`~dpflow.estimators.gaussian.fit`'s.
    :meth:`make_plan` is the first plan ``fit`` runs for d features and n rows (the only one with the bounds).
    ``score`` is the mean Gaussian log-likelihood of rows under the released estimates (post-processing).

    >>> import numpy as np, dpflow as dp
    >>> X = np.random.default_rng(0).normal(size=(5000, 3)) * [1.0, 2.0, 3.0]
    >>> cov = Covariance(dp.ZCDP(0.5), mean_bound=10.0, cov_bound=30.0, noise=dp.SeededNoise(0)).fit(X)
    >>> cov.route_, bool(np.abs(np.diag(cov.covariance_) - [1.0, 4.0, 9.0]).max() < 1.0)
    ('coinpress', True)
    """

    constraints = {"budget": BUDGET, "mean_bound": optional(positive()), "cov_bound": optional(positive()),
                   "route": optional(Constraint(lambda v: isinstance(v, str), "a route name")),
                   "split": in_range(0.0, 1.0), "max_error": optional(positive()), "strict": BOOLEAN,
                   "noise": NOISE}
    min_rows = 4  # the scale search's pairs (gaussian.fit)

    def __init__(self, budget: Measure, mean_bound: float | None = None, cov_bound: float | None = None,
                 route: str | None = None, split: float = 0.5, max_error: float | None = None, strict: bool = False,
                 noise: Any = None) -> None:
        self.budget, self.mean_bound, self.cov_bound, self.route = budget, mean_bound, cov_bound, route
        self.split, self.max_error, self.strict, self.noise = split, max_error, strict, noise

    def _check_params(self) -> None:
        if (self.mean_bound is None) != (self.cov_bound is None):
            raise ParameterError("Covariance", "only one of mean_bound and cov_bound was given",
                                 "pass both bounds, or neither (the scale is then found privately)")

    def make_plan(self, d: int, n: int) -> Plan:
        """The first plan ``fit`` runs on n rows of d features (:func:`dpflow.estimators.gaussian.first_plan`):
        public facts only, nothing read or charged."""
        from dpflow.estimators.gaussian import first_plan

        self.validate_params()
        return first_plan(d, n, self.budget, self.mean_bound, self.cov_bound, split=self.split, route=self.route,
                          max_error=self.max_error, strict=self.strict)

    def fit(self, X: Any, y: Any = None) -> Covariance:
        """Estimate the location and covariance of the rows of ``X`` (n x d array or DataFrame); ``y`` is
        ignored."""
        from dpflow.estimators.gaussian import fit

        self.validate_params()
        f = fit(self._rows(X, reset=True), self.budget, self.mean_bound, self.cov_bound, split=self.split,
                noise=self._noise(), route=self.route, max_error=self.max_error, strict=self.strict)
        self.location_, self.covariance_, self.route_ = f.mean, f.covariance, f.route
        self.report_, self.scale_search_, self.plan_ = f.report, f.scale, f.plan
        return self

    def score(self, X: Any, y: Any = None) -> float:
        """The mean log-likelihood of the rows of ``X`` under ``N(location_, covariance_)`` (post-processing;
        on held-out public data it costs nothing, on the private training data it is not a private release)."""
        from scipy import stats

        self._require_fitted("score")
        rows = self._rows(X, reset=False)
        return float(np.mean(stats.multivariate_normal(self.location_, self.covariance_,
                                                       allow_singular=True).logpdf(rows)))
