"""Predicted errors of the Gaussian estimators' routes, before any data is read (issue 29).

Every route of :func:`dpflow.estimators.gaussian.fit` has a :class:`Forecast`: the predicted error of the
mean and of the covariance at :data:`CONFIDENCE`, from public facts only (n, d, the budget's rho, the
declared bounds ``||mu|| <= R`` and ``Sigma <= K I``, or the guarantee of the private scale step):

* ``coinpress`` (:func:`joint`): the CoinPress covariance on the pair differences, then the CoinPress mean
  on the rows whitened by its preconditioner (:func:`dpflow.estimators.gaussian.gaussian`).
* ``diagonal`` (:func:`diagonal`): the mean under the isotropic bound ``Sigma <= K I`` (CoinPress mean with
  ``sigma = sqrt(K)``) and only the diagonal of the covariance (one clipped second moment); for when the
  full covariance cannot be learned at this n.

Units: the mean's l2 error and the covariance's spectral error ``||Sigma-hat - Sigma||_2`` in the units of
the rows the route estimates on (the data's, or the standardised rows' of the scale step); with a known
floor ``Sigma >= lower I`` (after the eigenvalue search) the Mahalanobis errors
``||Sigma^-1/2 (mu-hat - mu)||`` and ``||Sigma^-1/2 Sigma-hat Sigma^-1/2 - I||_2``.

>>> from fractions import Fraction
>>> f = joint(10_000, 5, Fraction(1, 2), R=10.0, K=4.0)
>>> f.route, f.covariance.metric, round(f.covariance.value, 3)
('coinpress', 'spectral (absolute)', 0.424)
>>> round(diagonal(10_000, 5, Fraction(1, 2), R=10.0, K=4.0).covariance.value, 3)
4.322
"""

from __future__ import annotations

import math
from fractions import Fraction

import attrs

from dpflow.estimators.gaussian import coinpress
from dpflow.estimators.gaussian.coinpress import default_rounds
from dpflow.estimators.tails import chi_radius
from dpflow.planner.accuracy import Prediction

CONFIDENCE = 0.9
"""The confidence of every prediction here (each model's tail probabilities are at most 0.1 in all)."""

GAUSSIAN_ROWS = ("Gaussian rows (the estimators' model: rows are clipped at chi radii, and heavier tails lose more "
                 "of their second moment; coinpress.clip_bias)")
"""The condition (``Prediction.given``) of every prediction here: the rows are Gaussian.  Measured outside it
(benchmarks/robustness.py, multivariate t5 with identity covariance, d = 1 to 20, n = 10^4 to 10^6): the
covariance's Mahalanobis error stays at 0.06 to 0.2 however large n is (the clipping bias of the t5 tails),
where the Gaussian prediction falls to 0.01."""


@attrs.frozen
class Forecast:
    """The predicted errors of one route: ``mean`` and ``covariance`` (:class:`Prediction` records)."""

    route: str
    mean: Prediction
    covariance: Prediction

    def describe(self) -> str:
        """One line for the ledger's comparison of routes.

        >>> from fractions import Fraction
        >>> joint(10_000, 5, Fraction(1, 2), R=10.0, K=4.0).describe()
        'coinpress: mean at most 0.104 (l2), covariance at most 0.424 (spectral (absolute))'
        """
        return (f"{self.route}: mean at most {self.mean.value:.3g} ({self.mean.metric}), "
                f"covariance at most {self.covariance.value:.3g} ({self.covariance.metric})")


def compare(forecasts: dict[str, Forecast], chosen: str, forced: bool) -> str:
    """The ledger text naming the chosen route and every route's predictions.

    >>> from fractions import Fraction
    >>> f = {"coinpress": joint(10_000, 5, Fraction(1, 2), 10.0, 4.0)}
    >>> compare(f, "coinpress", False).split(";")[0]
    'route coinpress (the smallest predicted covariance error)'
    """
    why = "forced by route=" if forced else "the smallest predicted covariance error"
    return f"route {chosen} ({why}); compared: " + "; ".join(f.describe() for f in forecasts.values())


def _ball(value: float, R: float, scale: float) -> float:
    """A predicted mean error capped by ``2 R scale``: the estimate is clamped into the public ball."""
    return min(value, 2.0 * R * scale)


def joint(n: int, d: int, rho: Fraction, R: float, K: float, split: float = 0.5, t_cov: int | None = None,
          t_mean: int | None = None, lower: float | None = None, units: str = "",
          given: str = GAUSSIAN_ROWS) -> Forecast:
    """The ``coinpress`` route (:func:`dpflow.estimators.gaussian.gaussian`) with the budget's zCDP ``rho``.

    Covariance: :func:`coinpress.predicted_cov_errors` over the ``n // 2`` pair differences (its part of rho).
    Mean: the last radius ``r`` of :func:`coinpress.predicted_mean_radii` in the whitened units; back in the
    rows' units it grows by at most ``sqrt(K (1 + e))`` (``e`` the covariance's relative error: the whitening
    preconditioner's inverse), in the Mahalanobis metric by ``sqrt(1 + e)``; capped at ``2 R`` (the estimate
    is clamped into the ball).  With ``lower`` (``Sigma >= lower I`` is known: ``K`` is then relative to it)
    the predictions are Mahalanobis.  ``given``: the condition the predictions assume (:data:`GAUSSIAN_ROWS`).
    """

    t_cov = default_rounds(K, d, 3) if t_cov is None else t_cov
    t_mean = default_rounds(R, d, 2) if t_mean is None else t_mean
    rho_cov, rho_mean = coinpress.part_rhos(rho, [(split, t_cov), (1.0 - split, t_mean)])
    absolute, mahal = coinpress.predicted_cov_errors(n // 2, d, rho_cov, K, t_cov)
    r = coinpress.predicted_mean_radii(n, d, R, rho_mean, t_mean)[-1]
    cov_how = (f"CoinPress covariance, {t_cov} rounds over {n // 2} pair differences at rho {float(rho_cov):.4g}: "
               f"Wigner noise norm per round, sampling 2 sqrt(d/m), preconditioner contraction "
               f"(coinpress.predicted_cov_errors), Sigma at most {K:.4g} I")
    mean_how = (f"CoinPress mean, {t_mean} rounds at rho {float(rho_mean):.4g} from the ball of radius {R:.4g}: "
                f"last radius {r:.4g} (coinpress.predicted_mean_radii) in whitened units")
    if lower is not None:
        mean = Prediction("mean", "Mahalanobis", _ball(r * math.sqrt(1.0 + mahal), R, 1.0), CONFIDENCE,
                          mean_how + ", times sqrt(1 + covariance error)", "coinpress", given)
        cov = Prediction("covariance", "Mahalanobis (spectral, relative)", mahal, CONFIDENCE,
                         cov_how + f" and at least {lower:.4g} I (Mahalanobis: the floor's contraction)", "coinpress",
                         given)
        return Forecast("coinpress", mean, cov)
    mean = Prediction("mean", f"l2{units}", _ball(r * math.sqrt(K * (1.0 + absolute)), R, 1.0), CONFIDENCE,
                      mean_how + ", times sqrt(K (1 + covariance error / K))", "coinpress", given)
    cov = Prediction("covariance", f"spectral (absolute){units}", K * absolute, CONFIDENCE, cov_how, "coinpress",
                     given)
    return Forecast("coinpress", mean, cov)


def diagonal_noise(m: int, d: int, rho: Fraction, beta: float = 0.1) -> float:
    """The largest error of the ``d`` variances of one clipped second moment of ``m`` mean-zero rows under
    ``rho`` (in units of the bound ``K``), with probability ``CONFIDENCE``: Gaussian noise
    ``sigma = gamma^2 / (m sqrt(rho))`` per entry and the sampling error ``sqrt(2 / m)`` of a variance, times the
    two-sided quantile ``sqrt(2 ln(2 d / (1 - CONFIDENCE)))`` over the d entries.

    >>> round(diagonal_noise(5000, 5, Fraction(1, 4)), 4)
    0.0806
    """
    g2 = chi_radius(d, beta) ** 2
    z = math.sqrt(2.0 * math.log(2.0 * d / (1.0 - CONFIDENCE)))
    return z * (g2 / (m * math.sqrt(float(rho))) + math.sqrt(2.0 / m)) if rho > 0 else math.inf


def diagonal(n: int, d: int, rho: Fraction, R: float, K: float, split: float = 0.5, t_mean: int | None = None,
             sigma: float | None = None, clip: float | None = None, units: str = "",
             given: str = GAUSSIAN_ROWS) -> Forecast:
    """The ``diagonal`` route (:func:`dpflow.estimators.gaussian.diagonal_gaussian`): the mean under
    ``Sigma <= sigma^2 I`` (``sigma`` default ``sqrt(K)``; CoinPress mean, radius schedule
    :func:`coinpress.predicted_mean_radii`, capped at ``2 R``), and the diagonal of one clipped second moment
    (:func:`diagonal_noise` times ``clip``, the bound its rows are scaled by: default ``K``) plus the off-diagonal
    part it leaves out: ``||Sigma - diag(Sigma)||_2 <= K`` (its eigenvalues lie in ``[-K, K]`` when
    ``0 <= Sigma <= K I``), none when d = 1.
    """

    s = math.sqrt(K) if sigma is None else sigma
    t_mean = default_rounds(R / s, d, 2) if t_mean is None else t_mean
    rho_cov, rho_mean = coinpress.part_rhos(rho, [(split, 1), (1.0 - split, t_mean)])
    r = coinpress.predicted_mean_radii(n, d, R / s, rho_mean, t_mean)[-1]
    mean = Prediction("mean", f"l2{units}", _ball(s * r, R, 1.0), CONFIDENCE,
                      f"CoinPress mean under Sigma at most {s * s:.4g} I, {t_mean} rounds, rho {float(rho_mean):.4g}: "
                      f"last radius {r:.4g} x {s:.4g} (coinpress.predicted_mean_radii)", "diagonal", given)
    noise = (K if clip is None else clip) * diagonal_noise(n // 2, d, rho_cov)
    off = K if d > 1 else 0.0
    cov = Prediction("covariance", f"spectral (absolute){units}", off + noise, CONFIDENCE,
                     f"diagonal only: variances from one clipped second moment of {n // 2} pair differences at rho "
                     f"{float(rho_cov):.4g} err at most {noise:.4g} (routes.diagonal_noise); the off-diagonal part is "
                     f"not estimated (0): the norm of Sigma - diag(Sigma) is at most {off:.4g}", "diagonal", given)
    return Forecast("diagonal", mean, cov)


def in_bounds(f: Forecast, d: int, R: float, K: float, off_z: float) -> Forecast:
    """A forecast on the standardised rows of the per-column scale step, as a worst case in the data's units
    under the public bounds ``||mu||_2 <= R`` and ``Sigma <= K I``.  Each column's scale is about its standard
    deviation, at most ``sqrt(K)``, so with ``S = diag(s)``: the mean's l2 error ``||S e||`` is at most
    ``sqrt(K)`` times the standardised one (and at most ``2 R``: the estimate is clamped into the ball), the
    covariance's ``||S E S||_2`` at most ``K`` times.  The ``diagonal`` route leaves out the off-diagonal part,
    bounded by ``off_z`` in the standardised units; in the data's units ``||Sigma - diag(Sigma)||_2 <= K``
    (``0 <= Sigma <= K I``) replaces ``K off_z``.  The worst case is the data filling its bounds; the scale
    step's own error (a few percent when its share is not capped) is not included.

    >>> from fractions import Fraction
    >>> z = joint(10_000, 5, Fraction(1, 2), R=8.0, K=10.0)
    >>> w = in_bounds(z, 5, R=100.0, K=4.0, off_z=10.0)
    >>> round(w.mean.value / z.mean.value, 6), round(w.covariance.value / z.covariance.value, 6), w.mean.metric
    (2.0, 4.0, 'l2')
    """
    mean = _ball(f.mean.value * math.sqrt(K), R, 1.0)
    cov = K * f.covariance.value
    how = f"worst case in the data's units under the bounds (column scales at most sqrt(K) = {math.sqrt(K):.4g})"
    if f.route == "diagonal" and d > 1:
        cov = K * (f.covariance.value - off_z) + K
        how += f"; the off-diagonal part at most K = {K:.4g} (0 <= Sigma <= K I)"
    return Forecast(f.route,
                    attrs.evolve(f.mean, value=mean, metric="l2", derivation=f"{f.mean.derivation}; {how}"),
                    attrs.evolve(f.covariance, value=cov, metric="spectral (absolute)",
                                 derivation=f"{f.covariance.derivation}; {how}"))


__all__ = ["CONFIDENCE", "GAUSSIAN_ROWS", "Forecast", "compare", "diagonal", "diagonal_noise", "in_bounds", "joint"]
