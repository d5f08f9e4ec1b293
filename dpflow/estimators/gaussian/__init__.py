"""Gaussian mean and covariance without strong a-priori bounds: CoinPress, KLSU and Karwa-Vadhan
as plans in dpflow's DSL (docs/spec/gaussian.md; docs/gaussian.md).

``mean(...)``, ``covariance(...)`` and ``gaussian(...)`` return plans (inspect, ``check()``,
``run()``); ``fit(X, budget=..., mean_bound=..., cov_bound=...)`` runs the full-Gaussian plan and
returns the estimates with the report.  Every parameter a user cannot know (truncation radii,
tail probabilities, round counts, per-round noise factors) is derived from public quantities
(n, d, the declared bounds, the budget) and shown in the ledger as a named ``Public`` node; a plan
whose stated sample-size requirement is not met carries a ``warning`` parameter: listed in
``Ledger.warnings`` (``summary()``, reports, CLI) and emitted as a :class:`dpflow.errors.AccuracyWarning`.

>>> import numpy as np, dpflow as dp
>>> plan = mean(d=5, n=2000, budget=dp.ZCDP(0.5), R=10.0)
>>> plan.check().totals[0].rho
Fraction(1, 2)
>>> X = np.random.default_rng(0).normal(size=(2000, 5)) + 3.0
>>> est = plan.run({"X": X}, noise=dp.SeededNoise(1)).released["mean"]
>>> bool(np.linalg.norm(est - 3.0) < 0.5)
True
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction
from typing import Any, Literal

import attrs
import numpy as np

from dpflow import nodes as N
from dpflow.domains import Vectors
from dpflow.errors import AccuracyWarning, DomainError, PlanTypeError
from dpflow.estimators.covariance import naive_pce
from dpflow.estimators.gaussian import coinpress, klsu, kv, routes, steps, unbounded
from dpflow.estimators.gaussian.coinpress import default_rounds
from dpflow.estimators.mean import clipped_mean
from dpflow.estimators.tolerance import STEP_MAY_FAIL, choose_route, enforce
from dpflow.handles import Released, Rows, Sensitive
from dpflow.nodes.postprocess import WARNING, _caller_level, accuracy_warning
from dpflow.plan import Plan, PlanBuilder
from dpflow.plan.graph import require_budget
from dpflow.planner.accuracy import Prediction
from dpflow.privacy import ZCDP, ApproxDP, ApproxZCDP, Measure, PureDP, gaussian_budget_rho
from dpflow.privacy.split import sequential_split
from dpflow.references import spec

MeanMethod = Literal["coinpress", "kv", "pme", "naive"]
CovMethod = Literal["coinpress", "pce", "naive"]
PCE_PPC_SHARE = 0.25
"""PCE's budget share for the PPC rounds (the rest goes to the final NaivePCE); chosen by measurement."""


PURE_ERROR_WARN = 1.0
"""A ``PureDP`` :func:`gaussian` plan warns when :func:`coinpress.laplace_cov_schedule` predicts a covariance
error (Mahalanobis, spectral) above this: the estimate would be off by more than the covariance itself."""


def _refuse(where: str, problem: str, fix: str) -> DomainError:
    return DomainError(where, problem, fix)


def total_rho(budget: Measure) -> Fraction:
    """The zCDP rho the planner will share among these all-Gaussian plans
    (:func:`dpflow.privacy.gaussian_budget_rho`): rho itself, or for an ``ApproxDP(eps, delta)`` budget
    ``mu^2 / 2`` with mu the exact Gaussian-DP parameter the ledger verifies.

    >>> total_rho(ZCDP(0.5))
    Fraction(1, 2)
    """
    require_budget(budget, "gaussian", (ZCDP, ApproxZCDP, ApproxDP))
    if not (isinstance(budget, ApproxDP) and budget.delta == 0):
        return gaussian_budget_rho(budget)
    raise PlanTypeError("gaussian", f"the Gaussian estimators use Gaussian noise; got {budget.describe()}",
                        "use a ZCDP, ApproxZCDP or ApproxDP (delta > 0) budget")


def _check_common(where: str, d: int, n: int, budget: Measure) -> Fraction:
    if d < 1:
        raise _refuse(where, f"d={d}", "declare d >= 1")
    if n < 2:
        raise _refuse(where, f"n={n} rows", "these estimators need n >= 2")
    return total_rho(budget)


def _check_bound(where: str, name: str, value: float, low: float) -> None:
    if not (math.isfinite(value) and value >= low):
        raise _refuse(where, f"{name}={value} makes the plan vacuous (need a finite value >= {low:g})",
                      f"declare a finite {name} >= {low:g}")


def _warn(b: PlanBuilder, text: str) -> None:
    accuracy_warning(b, text)


def _warn_if_vacuous(b: PlanBuilder, n: int, radii: list[float]) -> None:
    if radii[-1] >= radii[0]:
        _warn(b, f"n={n} is too small: the final ball (radius {radii[-1]:.3g}) is no smaller than the prior "
                 f"({radii[0]:.3g}); the estimate is no better than the centre of the prior ball")


def _mean_part(b: PlanBuilder, X: Sensitive[Rows], n: int, d: int, R: float, rho: Fraction, weight: float,
               t: int, beta: float, sigma: float) -> Released[Any]:
    """CoinPress mean of rows with covariance <= sigma^2 I and ||mu|| <= R (rescaled when sigma != 1)."""
    rows = X
    if sigma != 1.0:
        rows = N.Precondition(matrix=N.param(b, "scale", np.eye(d) / sigma, f"1/sigma, sigma={sigma:g}"))(X)
    radii = coinpress.predicted_mean_radii(n, d, R / sigma, rho, t, beta)
    N.param(b, "predicted_radii", radii,
            f"public radius schedule if no point is clipped ({spec('gaussian.md', '1.2')})")
    _warn_if_vacuous(b, n, radii)
    init = N.Pack(names=coinpress.MEAN_STATE)(b.public(np.zeros(d)), b.public(R / sigma))
    state = coinpress.mvm_rec(rows, init, n, d, weight, t, beta)
    c = N.Get("centre")(state)
    return c if sigma == 1.0 else N.Apply(fn=steps.kv_unscale, shape=(d,))(c, b.public(np.zeros(d)), b.public(sigma))


def mean(
    d: int,
    n: int,
    budget: Measure,
    R: float,
    method: MeanMethod = "coinpress",
    t: int | None = None,
    sigma: float = 1.0,
    beta: float | None = None,
) -> Plan:
    """Private mean of n rows of N(mu, Sigma), ``Sigma <= sigma^2 I``, ``||mu||_2 <= R`` (coinpress,
    pme; for kv and naive: ``|mu_j| <= R``).  Source ``X``; output ``mean``.

    * ``coinpress``: MVMRec with t rounds (default :func:`default_rounds` of ``R / sigma``), schedule
      ``[1/4 split over t-1, 3/4]`` (BDKU 2020); ``beta`` (default 0.01) is the chi-radius tail probability.
    * ``kv``: coordinate-wise Karwa-Vadhan (KLSU's NaivePME): histograms (rho/2), clipped mean (rho/2).
    * ``pme``: KLSU's PME: coarse histograms (rho/2), one l2 clip, Gaussian mean (rho/2).
    * ``naive``: every coordinate clipped to ``[-(R + 3 sigma), R + 3 sigma]`` (CoinPress's naive baseline,
      with the clipping actually done) = :func:`dpflow.estimators.clipped_mean`.

    >>> import dpflow as dp
    >>> [e.kind for e in mean(d=2, n=100, budget=dp.ZCDP(1), R=5.0, method="pme").check().entries][-2:]
    ['Mean', 'GaussianMech']
    """
    where = f"gaussian.mean({method})"
    rho = _check_common(where, d, n, budget)
    _check_bound(where, "R", R, 0.0)
    _check_bound(where, "sigma", sigma, 1e-300)
    if method == "naive":
        return clipped_mean(d=d, n=n, budget=budget, radius=R + 3.0 * sigma)
    b = PlanBuilder(budget=budget, neighbors="replace", name=f"gaussian_mean_{method}")
    X = b.source("X", Vectors(d=d), n=n)
    refs = {"coinpress": coinpress.REF_MEAN, "kv": kv.REF, "pme": klsu.REF_PME}
    N.param(b, "algorithm", 0.0, str(refs.get(method, "")))
    if method == "coinpress":
        if t is None:
            t = default_rounds(R / sigma, d, 2)
            N.param(b, "rounds", float(t), "default_rounds(R / sigma, d, 2)")
        if t < 1:
            raise _refuse(where, f"t={t} rounds", "use t >= 1")
        out = _mean_part(b, X, n, d, R, rho, 1.0, t, 0.01 if beta is None else beta, sigma)
        out = N.Apply(fn=steps.into_ball, shape=(d,))(out, N.param(b, "ball", R, "public bound ||mu|| <= R: the "
                                                                    "estimate is projected into it (post-processing)"))
        r = coinpress.predicted_mean_radii(n, d, R / sigma, rho, t, 0.01 if beta is None else beta)[-1]
        N.predicted_error(b, "mean", "l2", min(sigma * r, 2.0 * R), routes.CONFIDENCE,
                          f"CoinPress mean under Sigma at most {sigma * sigma:.4g} I, {t} rounds: last radius {r:.4g} "
                          f"x {sigma:.4g} (coinpress.predicted_mean_radii), capped at 2R", "coinpress",
                          routes.GAUSSIAN_ROWS)
    elif method == "kv":
        out = kv.coordinate_mean(X, n, d, sigma, R, 1.0, 1.0, 0.1 if beta is None else beta)
    elif method == "pme":
        out = klsu.pme(X, n, d, sigma, R, 1.0, 1.0, 0.1 if beta is None else beta)
    else:
        raise _refuse(where, f"unknown method {method!r}", "use 'coinpress', 'kv', 'pme' or 'naive'")
    return b.build(mean=out)


def univariate_mean(
    n: int,
    budget: Measure,
    R: float,
    sigma: float | None = None,
    sigma_bounds: tuple[float, float] | None = None,
    beta: float = 0.1,
) -> Plan:
    """KVMean (Karwa-Vadhan 2018, zCDP form, gaussian.md 2.4) of n reals with ``|mu| <= R``: with a known
    ``sigma``, or with ``sigma`` unknown in ``sigma_bounds`` (range found on pair differences over
    log-scale bins, gaussian.md 2.3).  Source ``X`` (d = 1); output ``mean`` (shape (1,)).

    >>> import dpflow as dp
    >>> univariate_mean(1000, dp.ZCDP(0.5), R=100.0, sigma_bounds=(0.1, 10.0)).check().totals[0].rho
    Fraction(1, 2)
    """
    where = "gaussian.univariate_mean"
    _check_common(where, 1, n, budget)
    _check_bound(where, "R", R, 0.0)
    if (sigma is None) == (sigma_bounds is None):
        raise _refuse(where, "give exactly one of sigma and sigma_bounds", "pass sigma=... or sigma_bounds=(lo, hi)")
    if sigma is not None:
        _check_bound(where, "sigma", sigma, 1e-300)
    if sigma_bounds is not None and not (0 < sigma_bounds[0] <= sigma_bounds[1] < math.inf):
        raise _refuse(where, f"sigma_bounds={sigma_bounds}", "pass 0 < lo <= hi < inf")
    b = PlanBuilder(budget=budget, neighbors="replace", name="gaussian_univariate_mean")
    X = b.source("X", Vectors(d=1), n=n)
    N.param(b, "algorithm", 0.0, str(kv.REF))
    return b.build(mean=kv.univariate_mean(X, n, R, sigma, sigma_bounds, beta))


def _cov_part(b: PlanBuilder, rows: Sensitive[Rows], m: int, d: int, K: float, method: CovMethod, weight: float,
              t: int, beta: float | None, mech: coinpress.Mech = "gaussian",
              sched: tuple[Fraction, ...] | None = None) -> tuple[Released[Any], Released[Any] | None]:
    """(covariance estimate, whitening preconditioner or None) of m mean-zero rows."""
    if m < d + 1:
        _warn(b, f"only {m} (pair) rows for d={d}: the second moment is rank deficient")
    if method == "coinpress":
        A0 = N.param(b, "A0", np.eye(d) / math.sqrt(K), f"I / sqrt(K), K={K:g} ({spec('gaussian.md', '1.3')})")
        state = coinpress.mvc_rec(rows, A0, m, d, weight, t, 0.1 if beta is None else beta, sched, mech)
        return N.Apply(fn=steps.cov_from_state, shape=(d, d))(state), N.Get("A_next")(state)
    if method == "pce":
        R = klsu.ppc_rounds(K)
        if R:
            need = 64.0 * d**1.5 / math.sqrt(float(total_rho(b.budget)) * weight * PCE_PPC_SHARE / R)
            if m < need:
                _warn(b, f"m={m} rows < 64 d^1.5 / sqrt(rho_r) = {need:.3g}: WeakPPC rounds may fail to "
                         f"shrink the spectrum ({spec('gaussian.md', '3.2')})")
        N.param(b, "pce_split", [PCE_PPC_SHARE, 1 - PCE_PPC_SHARE],
                "PPC rounds, final NaivePCE (chosen by measurement: docs/gaussian.md)")
        return klsu.pce(rows, m, d, K, weight * PCE_PPC_SHARE, weight * (1 - PCE_PPC_SHARE),
                        0.1 if beta is None else beta), None
    raise _refuse("gaussian.covariance", f"unknown method {method!r}", "use 'coinpress', 'pce' or 'naive'")


def covariance(
    d: int,
    n: int,
    budget: Measure,
    K: float,
    method: CovMethod = "coinpress",
    t: int | None = None,
    unknown_mean: bool = False,
    beta: float | None = None,
    lower: float | None = None,
) -> Plan:
    """Private covariance of n rows of N(mu, Sigma) with ``Sigma <= K I`` (and, for ``pce``,
    ``Sigma >= lower I``).  With ``unknown_mean`` the estimators run on the ``n // 2`` pair differences.
    Source ``X``; output ``covariance``.

    * ``coinpress``: MVCRec with t rounds (default :func:`default_rounds` of K; BDKU 2020, corrected per
      gaussian.md 1.6).
    * ``pce``: KLSU PCE: PPC rounds (rho/4) and NaivePCE (3 rho/4) (gaussian.md 3.2-3.4 [RECON]).  PCE
      assumes ``I <= Sigma`` and its error is relative to that floor: on data with smaller eigenvalues
      its error is that of ``Sigma = I``, many times the non-private one.  Whether the floor holds is a
      property of the private data, so it is the user's public statement: ``lower`` is required, the
      rows are rescaled by the public ``1 / sqrt(lower)`` (free: a public map before the clipping),
      PCE runs with ``kappa = K / lower`` and the estimate is scaled back by ``lower``.  A loose
      (small) ``lower`` costs only more PPC rounds (``log(K / lower)``), never privacy.
    * ``naive``: :func:`dpflow.estimators.naive_pce` with ``kappa = K``.

    >>> import dpflow as dp
    >>> covariance(d=3, n=3000, budget=dp.ZCDP(0.5), K=30.0).check().totals[0].rho
    Fraction(1, 2)
    >>> covariance(d=3, n=3000, budget=dp.ZCDP(0.5), K=3.0, method="pce", lower=0.01).check().totals[0].rho
    Fraction(1, 2)
    """
    where = f"gaussian.covariance({method})"
    _check_common(where, d, n, budget)
    if method == "pce":
        if lower is None:
            raise _refuse(where, "PCE assumes Sigma >= lower I (its error is relative to lower) and no lower "
                          "bound was given", "pass lower=..., a public lower bound on the smallest eigenvalue "
                          "of Sigma (a loose one costs only more preconditioning rounds)")
        _check_bound(where, "lower", lower, 1e-300)
        _check_bound(where, "K", K, lower)
    else:
        if lower is not None:
            raise _refuse(where, f"lower={lower} is used only by method='pce'", "drop lower= or use method='pce'")
        _check_bound(where, "K", K, 1.0)
    if t is not None and t < 1:
        raise _refuse(where, f"t={t} rounds", "use t >= 1")
    if method == "naive":
        return naive_pce(d=d, n=n, budget=budget, kappa=K, beta=0.1 if beta is None else beta,
                         unknown_mean=unknown_mean)
    b = PlanBuilder(budget=budget, neighbors="replace", name=f"gaussian_covariance_{method}")
    X = b.source("X", Vectors(d=d), n=n)
    N.param(b, "algorithm", 0.0, str(coinpress.REF_COV if method == "coinpress" else klsu.REF_PCE))
    rows = N.PairDifferences()(X) if unknown_mean else X
    m = n // 2 if unknown_mean else n
    if method == "pce":
        assert lower is not None
        scale = N.param(b, "scale", np.eye(d) / math.sqrt(lower), f"I / sqrt(lower), lower={lower:g}: "
                        "rows rescaled so that Sigma / lower >= I (public)")
        cov, _ = _cov_part(b, N.Precondition(matrix=scale)(rows), m, d, K / lower, method, 1.0, 1, beta)
        return b.build(covariance=N.Apply(fn=steps.unwhiten, shape=(d, d))(scale, cov))
    if t is None and method == "coinpress":
        t = default_rounds(K, d, 3)
        N.param(b, "rounds", float(t), "default_rounds(K, d, 3)")
    cov, _ = _cov_part(b, rows, m, d, K, method, 1.0, t or 1, beta)
    if method == "coinpress":
        absolute, _ = coinpress.predicted_cov_errors(m, d, total_rho(budget), K, t or 1, 0.1 if beta is None else beta)
        N.predicted_error(b, "covariance", "spectral (absolute)", K * absolute, routes.CONFIDENCE,
                          f"CoinPress covariance, {t} rounds over {m} rows (coinpress.predicted_cov_errors), Sigma "
                          f"at most {K:.4g} I", "coinpress", routes.GAUSSIAN_ROWS)
    return b.build(covariance=cov)


def gaussian(
    d: int,
    n: int,
    budget: Measure,
    R: float,
    K: float,
    t_cov: int | None = None,
    t_mean: int | None = None,
    split: float = 0.5,
    lower: float | None = None,
    note: str | None = None,
    alerts: tuple[str, ...] = (),
    units: str = "",
) -> Plan:
    """Unknown mean and covariance (gaussian.md 1.4): CoinPress covariance on the ``n // 2`` pair
    differences with ``split`` of the budget, then CoinPress mean on all n rows whitened by the released
    preconditioner ``A`` (ball ``B(0, ||A|| R)``) with the rest; ``mu = A^{-1} c``, projected into the public
    ball (:func:`steps.into_ball`, free).  Both parts read every record: sequential composition.
    ``||mu|| <= R``, ``Sigma <= K I``.  Outputs ``mean``, ``covariance`` (PSD: the rounds' second moments
    are projected onto the PSD cone).

    The plan records its predicted errors before data (:mod:`.routes`: :func:`routes.joint`; under
    ``PureDP`` the Laplace rounds' :func:`coinpress.laplace_cov_schedule` and radius schedule), in the
    Mahalanobis metrics when ``lower`` says that ``Sigma >= lower I`` is known (the rows are then in units of
    ``lower``: :func:`fit` after its scale search); ``note`` (a route comparison) and ``alerts`` (tolerance
    warnings already emitted) are added to the ledger; ``units`` names the units of the rows in the metrics.

    A ``PureDP`` budget runs the same rounds with Laplace noise (:mod:`.coinpress`, ``mech="laplace"``:
    each round a clipped mean or a clipped second moment, l1 sensitivities ``2 clip sqrt(d) / n`` and
    ``(d + 1) gamma^2 / n`` derived by the ``Mean`` and ``SecondMoment`` nodes).  The covariance rounds and
    their budget schedule come from the Laplace rounds' per-round contraction
    (:func:`coinpress.laplace_cov_schedule`; ``t_cov`` fixes the count), shown in the ledger as
    ``cov_schedule`` with the predicted covariance error; above :data:`PURE_ERROR_WARN` the plan warns before
    reading data.  The mean's radius schedule is not predicted (no vacuity warning).

    >>> import dpflow as dp
    >>> gaussian(d=3, n=4000, budget=dp.ZCDP(0.5), R=10.0, K=30.0).check().totals[0].rho
    Fraction(1, 2)
    >>> gaussian(d=3, n=4000, budget=dp.PureDP(1), R=10.0, K=30.0).check().totals[0].pure_eps
    Fraction(1, 1)
    """
    where = "gaussian.gaussian"
    pure = isinstance(budget, PureDP)
    if pure:
        if d < 1 or n < 2:
            raise _refuse(where, f"d={d}, n={n}", "declare d >= 1 and n >= 2")
        rho = Fraction(0)
    else:
        rho = _check_common(where, d, n, budget)
    _check_bound(where, "R", R, 0.0)
    _check_bound(where, "K", K, 1.0)
    if not 0.0 < split < 1.0:
        raise _refuse(where, f"split={split}", "pass 0 < split < 1 (the covariance's share of the budget)")
    if (t_cov is not None and t_cov < 1) or (t_mean is not None and t_mean < 1):
        raise _refuse(where, f"t_cov={t_cov}, t_mean={t_mean}", "use at least one round each")
    sched: tuple[Fraction, ...] | None = None
    predicted = math.inf
    eps = float(budget.epsilon) if isinstance(budget, PureDP) else 0.0
    if pure:  # Laplace rounds: the schedule from their per-round contraction (coinpress.laplace_cov_schedule)
        sched, predicted = coinpress.laplace_cov_schedule(n // 2, d, eps * split, K, t_cov)
        t_cov = len(sched)
    t_cov = default_rounds(K, d, 3) if t_cov is None else t_cov
    t_mean = default_rounds(R, d, 2) if t_mean is None else t_mean
    b = PlanBuilder(budget=budget, neighbors="replace", name="gaussian_full")
    _alerts(b, alerts)
    X = b.source("X", Vectors(d=d), n=n)
    N.param(b, "algorithm", 0.0, f"{spec('gaussian.md', '1.4')} [REC]: {coinpress.REF_COV}; then {coinpress.REF_MEAN}")
    N.param(b, "split", [split, 1.0 - split], "budget shares: covariance, mean (user-overridable)")
    if sched is None:
        N.param(b, "rounds", [float(t_cov), float(t_mean)], "covariance, mean: default_rounds(K, d, 3), (R, d, 2)")
    else:
        N.param(b, "rounds", [float(t_cov), float(t_mean)], "covariance: coinpress.laplace_cov_schedule (Laplace "
                "rounds' contraction), mean: default_rounds(R, d, 2)")
        N.param(b, "cov_schedule", [float(s) for s in sched], "covariance rounds' shares of its budget: "
                f"coinpress.laplace_cov_schedule(n // 2, d, eps * split, K); predicted error {predicted:.3g}")
        if predicted > PURE_ERROR_WARN:
            _warn(b, f"PureDP: n={n} rows are too few for d={d}, K={K:.3g} at epsilon={eps:g}: "
                     f"the Laplace CoinPress rounds cannot shrink the condition bound enough (predicted covariance "
                     f"error {predicted:.3g}, Mahalanobis; coinpress.laplace_cov_schedule); more rows, a larger "
                     f"epsilon, a tighter bound K or a zCDP / approximate-DP budget fix this")
    mech: coinpress.Mech = "laplace" if pure else "gaussian"
    cov, A = _cov_part(b, N.PairDifferences()(X), n // 2, d, K, "coinpress", split, t_cov, None, mech, sched)
    assert A is not None
    Y = N.Precondition(matrix=A)(X)
    if not pure:
        rho_mean = coinpress.part_rhos(rho, [(split, t_cov), (1.0 - split, t_mean)])[1]
        radii = coinpress.predicted_mean_radii(n, d, R, rho_mean, t_mean)
        N.param(b, "predicted_radii", radii,
                f"whitened-mean radius schedule if ||A|| = 1 ({spec('gaussian.md', '1.2')})")
        _warn_if_vacuous(b, n, radii)
    radius = N.Apply(fn=steps.scaled_norm, shape=())(A, b.public(R))
    init = N.Pack(names=coinpress.MEAN_STATE)(b.public(np.zeros(d)), radius)
    state = coinpress.mvm_rec(Y, init, n, d, 1.0 - split, t_mean, mech=mech)
    mu = N.Apply(fn=steps.unmap_mean, shape=(d,))(A, N.Get("centre")(state))
    mu = N.Apply(fn=steps.into_ball, shape=(d,))(mu, N.param(b, "ball", R, "public bound ||mu|| <= R: the "
                                                              "estimate is projected into it (post-processing)"))
    if pure:
        forecast = _pure_forecast(n, d, eps, R, K, split, t_mean, predicted, units)
    else:
        forecast = routes.joint(n, d, rho, R, K, split, t_cov, t_mean, lower, units)
    _record(b, forecast, note)
    return b.build(mean=mu, covariance=cov)


def diagonal_gaussian(
    d: int,
    n: int,
    budget: Measure,
    R: float,
    K: float,
    split: float = 0.5,
    t_mean: int | None = None,
    note: str | None = None,
    alerts: tuple[str, ...] = (),
    units: str = "",
) -> Plan:
    """The route for when the full covariance cannot be learned at this n: the mean under the isotropic
    bound ``Sigma <= K I`` (CoinPress mean of the rows scaled by ``1 / sqrt(K)``, projected into the ball
    ``||mu|| <= R``) with ``1 - split`` of the budget, and only the diagonal of the covariance: one clipped
    second moment of the ``n // 2`` pair differences scaled by ``1 / sqrt(K)`` (a one-round CoinPress
    covariance) with ``split``, its diagonal kept and floored at 0 (:func:`steps.diagonal_part`; the
    off-diagonal entries are 0: not estimated).  Predictions: :func:`routes.diagonal`.  Outputs ``mean``,
    ``covariance``.

    >>> import dpflow as dp
    >>> p = diagonal_gaussian(d=3, n=4000, budget=dp.ZCDP(0.5), R=10.0, K=30.0)
    >>> p.check().totals[0].rho, [q.route for q in p.check().predictions]
    (Fraction(1, 2), ['diagonal', 'diagonal'])
    """
    where = "gaussian.diagonal_gaussian"
    rho = _check_common(where, d, n, budget)
    _check_bound(where, "R", R, 0.0)
    _check_bound(where, "K", K, 1e-300)
    if not 0.0 < split < 1.0:
        raise _refuse(where, f"split={split}", "pass 0 < split < 1 (the covariance's share of the budget)")
    sigma = math.sqrt(K)
    t_mean = default_rounds(R / sigma, d, 2) if t_mean is None else t_mean
    if t_mean < 1:
        raise _refuse(where, f"t_mean={t_mean}", "use t_mean >= 1")
    b = PlanBuilder(budget=budget, neighbors="replace", name="gaussian_diagonal")
    _alerts(b, alerts)
    X = b.source("X", Vectors(d=d), n=n)
    N.param(b, "algorithm", 0.0, f"{coinpress.REF_MEAN} under Sigma <= K I; the variances from one clipped "
                                 f"second moment ({coinpress.REF_COV}, one round), off-diagonal not estimated")
    N.param(b, "split", [split, 1.0 - split], "budget shares: covariance (diagonal), mean")
    cov, _ = _cov_part(b, N.PairDifferences()(X), n // 2, d, K, "coinpress", split, 1, None)
    rho_mean = coinpress.part_rhos(rho, [(split, 1), (1.0 - split, t_mean)])[1]
    mu = _mean_part(b, X, n, d, R, rho_mean, 1.0 - split, t_mean, 0.01, sigma)
    mu = N.Apply(fn=steps.into_ball, shape=(d,))(mu, N.param(b, "ball", R, "public bound ||mu|| <= R: the "
                                                              "estimate is projected into it (post-processing)"))
    cov = N.Apply(fn=steps.diagonal_part, shape=(d, d))(cov)
    _record(b, routes.diagonal(n, d, rho, R, K, split, t_mean, units=units), note)
    return b.build(mean=mu, covariance=cov)


def _alerts(b: PlanBuilder, alerts: tuple[str, ...]) -> None:
    """The tolerance warnings :func:`fit` emitted before building the plan, listed first in its
    ``Ledger.warnings`` (the order they were emitted in)."""
    for line in alerts:
        N.param(b, WARNING, 0.0, line)


def _record(b: PlanBuilder, forecast: routes.Forecast, note: str | None) -> None:
    """The route's predictions (``PredictedError`` nodes) and the route comparison, on the plan."""
    if note is not None:
        N.param(b, "routes", 0.0, note)
    for p in (forecast.mean, forecast.covariance):
        N.predicted_error(b, p.output, p.metric, p.value, p.confidence, p.derivation, p.route, p.given)


def _pure_forecast(n: int, d: int, eps: float, R: float, K: float, split: float, t_mean: int,
                   cov_error: float, units: str = "") -> routes.Forecast:
    """The ``PureDP`` :func:`gaussian` plan's predictions: the covariance from
    :func:`coinpress.laplace_cov_schedule` (``cov_error``, relative; times K: absolute), the mean from the
    Laplace rounds' radius schedule (:func:`steps.mvm_next_radius_laplace` at ``eps (1 - split) s_k``)."""
    from dpflow.estimators.tails import chi_radius

    gamma, r = chi_radius(d, 0.01), float(R)
    for s_k in coinpress.schedule(t_mean):
        clip = steps.mvm_clip(r, gamma)
        r = steps.mvm_next_radius_laplace(clip, 1.0 / (eps * (1.0 - split) * float(s_k)), gamma, n, d)
    mean = Prediction("mean", f"l2{units}", min(r * math.sqrt(K * (1.0 + cov_error)), 2.0 * R), routes.CONFIDENCE,
                      f"Laplace CoinPress mean, {t_mean} rounds at epsilon {eps * (1 - split):.4g}: last radius "
                      f"{r:.4g} in whitened units, times sqrt(K (1 + covariance error))", "coinpress",
                      routes.GAUSSIAN_ROWS)
    cov = Prediction("covariance", f"spectral (absolute){units}", K * cov_error, routes.CONFIDENCE,
                     "Laplace CoinPress covariance: coinpress.laplace_cov_schedule (relative error) times K",
                     "coinpress", routes.GAUSSIAN_ROWS)
    return routes.Forecast("coinpress", mean, cov)


SCALED_R_PER_COORD = 4.0
"""After the private scale step each standardised coordinate's mean is within 4 scales of its private
median (the mean and the median of a Gaussian coincide; 4 covers the median's error): ``R = 4 sqrt(d)``."""

SCALED_K_PER_COORD = 2.0
"""Standardised coordinates have variance about 1, so ``Sigma_z <= trace <= 2 d I`` with slack 2 for the
private scales' error."""


def unscale_covariance(cov: Any, scale: Any) -> np.ndarray:
    """``diag(s) C diag(s)``: a covariance of standardised rows back on the data's scale.

    >>> unscale_covariance(np.eye(2), np.array([2.0, 3.0])).tolist()
    [[4.0, 0.0], [0.0, 9.0]]
    """
    sc = np.asarray(scale, dtype=float)
    out: np.ndarray = np.asarray(cov, dtype=float) * np.outer(sc, sc)
    return out


def scaled_forecasts(d: int, n: int, budget: Measure, split: float = 0.5,
                     weight: float | None = None) -> dict[str, routes.Forecast]:
    """The predicted errors of :func:`scaled_gaussian`'s two routes on the standardised rows (public: n, d,
    the budget), in the units of the private column scales: ``coinpress`` (:func:`routes.joint` at
    ``R = 4 sqrt(d)``, ``K = 2d``) and ``diagonal`` (:func:`routes.diagonal`: the mean under
    ``Sigma_z <= 2 I``, the variances of rows scaled by ``1 / sqrt 2``, the off-diagonal part left out
    bounded by ``K = 2d``), with the rho of the budget's CoinPress share.  When the scale step's default share
    is capped (n is too small for it: :func:`dpflow.estimators.scale.scale_weight`) its centres and scales may be
    off by many orders of magnitude (measured: at n = 500, d = 2 .. 20 and at n = 2,000, d = 20, errors up to
    1e18 in about half the seeds), so every prediction is conditional on the step succeeding (its ``given``
    says so, :data:`SCALE_STEP_GIVEN`; the plan warns, :func:`dpflow.estimators.scale.warn_if_capped`, and the
    tolerance sees it as infinite: :func:`dpflow.estimators.tolerance.unconditional`).

    >>> import dpflow as dp
    >>> f = scaled_forecasts(50, 10_000, dp.ApproxDP(1, 1e-6))
    >>> f["coinpress"].covariance.value > f["diagonal"].covariance.value
    True
    >>> f = scaled_forecasts(5, 500, dp.ApproxDP(1, 1e-6))["diagonal"].mean
    >>> f.value < math.inf, SCALE_STEP_GIVEN in f.given
    (True, True)
    """
    from dpflow.estimators.scale import scale_weight

    capped = False
    if weight is None:
        weight, capped = scale_weight(n, d, budget)
    rho = total_rho(budget) * Fraction(1.0 - weight)
    R, K = SCALED_R_PER_COORD * math.sqrt(d), SCALED_K_PER_COORD * d
    units = " (standardised rows: units of the private column scales)"
    out = {"diagonal": routes.diagonal(n, d, rho, R, K, split, sigma=math.sqrt(SCALED_K_PER_COORD),
                                       clip=SCALED_K_PER_COORD, units=units),
           "coinpress": routes.joint(n, d, rho, R, K, split, units=units)}  # diagonal first: it wins ties
    if not capped:
        return out
    given = (f"{SCALE_STEP_GIVEN}: n={n} rows are too few for a reliable step of {d} columns "
             "under this budget (its share is capped), and when it fails the centres and scales may be off by many "
             f"orders of magnitude); {routes.GAUSSIAN_ROWS}")
    return {r: attrs.evolve(f, mean=attrs.evolve(f.mean, given=given), covariance=attrs.evolve(f.covariance,
                                                                                              given=given))
            for r, f in out.items()}


SCALE_STEP_GIVEN = STEP_MAY_FAIL + (" (each column's centre within 4 standard deviations of its mean and its scale "
                                    "within a factor 2 of its standard deviation")
"""How the ``given`` of a :func:`scaled_forecasts` prediction begins when the scale step's share is capped (it
is expected to fail): a conditional prediction (:func:`dpflow.estimators.tolerance.unconditional`)."""


SCALED_RELATIVE_TOLERANCE = 1.0
"""``fit`` warns after a ``scaled+coinpress`` release whose :func:`scaled_relative_error` exceeds this: the
spread of the Mahalanobis covariance metric (an error of 1 is that of estimating ``Sigma`` by 0)."""


def scaled_relative_error(cov_z: Any, n: int, d: int, budget: Measure, split: float = 0.5) -> tuple[float, float]:
    """After a :func:`scaled_gaussian` ``coinpress`` release: its predicted Mahalanobis (relative spectral) covariance
    error and the smallest eigenvalue ``lam`` of the released standardised covariance ``cov_z`` (public:
    post-processing of the release).  The route's public prediction is absolute, in the units of the column
    scales (:func:`scaled_forecasts`): standardisation bounds ``Sigma_z <= 2d I`` but not from below, and the
    Mahalanobis error of CoinPress grows with the condition number it has to undo
    (:func:`coinpress.predicted_cov_errors` at ``K``).  So this evaluates that prediction at the condition the
    release shows, ``K = 2d / lam`` (its rounds' count and budget as the plan ran them); ``lam <= 0`` (the
    PSD projection removed a direction: the noise exceeded it) gives infinity.  A plug-in, not a bound: the
    released ``lam`` is an estimate (noise and the preconditioner's ``eta`` tend to raise it).  Measured
    (benchmarks/robustness.py cells, condition number 1e4, d = 5 and 20, n = 2,000 to 10^5): ``lam`` about 1e-16
    where the Mahalanobis error was 1 to 73, so infinity; condition 1, d = 5 and 20: 0.26 to 1.1 where it was
    0.12 to 0.52.

    >>> import dpflow as dp
    >>> bool(scaled_relative_error(np.eye(5), 10_000, 5, dp.ApproxDP(1, 1e-6))[0] < 1.0)
    True
    >>> scaled_relative_error(np.diag([1.0, 1.0, 0.0]), 10_000, 3, dp.ApproxDP(1, 1e-6))[0]
    inf
    """
    lam = float(np.linalg.eigvalsh((cov_z + np.transpose(cov_z)) / 2.0)[0]) if np.all(np.isfinite(cov_z)) else 0.0
    from dpflow.estimators.scale import scale_weight

    weight, _ = scale_weight(n, d, budget)
    R, K = SCALED_R_PER_COORD * math.sqrt(d), SCALED_K_PER_COORD * d
    t_cov, t_mean = default_rounds(K, d, 3), default_rounds(R, d, 2)
    rho = total_rho(budget) * Fraction(1.0 - weight)
    rho_cov = coinpress.part_rhos(rho, [(split, t_cov), (1.0 - split, t_mean)])[0]
    if not lam > 0.0:
        return math.inf, lam
    return coinpress.predicted_cov_errors(n // 2, d, rho_cov, max(K / lam, 1.0), t_cov)[1], lam


def scaled_gaussian(d: int, n: int, budget: Measure, split: float = 0.5, weight: float | None = None,
                    route: str | None = None, note: str | None = None, alerts: tuple[str, ...] = (),
                    bounds: tuple[float, float] | None = None) -> Plan:
    """:func:`gaussian` with no bounds at all: the private per-column scale step first
    (:func:`dpflow.estimators.scale.column_scales`, ``weight`` of the budget, by default the share the data
    size needs), then on the standardised rows ``(x - c) / s`` the route with the smaller predicted
    covariance error (:func:`scaled_forecasts`; ``route=`` forces one): ``coinpress``, CoinPress with the public
    bounds ``R = 4 sqrt(d)`` and ``K = 2d`` that standardisation makes true (up to the scales' error), or
    ``diagonal`` (when the full covariance cannot be learned at this n), the mean under ``Sigma_z <= 2 I`` (each
    standardised coordinate has variance about 1; correlated columns make the clipping radius cover less)
    and the variances only; the estimates mapped back (``c + s mu``, ``diag(s) Sigma diag(s)``:
    post-processing).  Location- and scale-invariant.  The plan is no longer all-Gaussian (the scale step's
    histograms and quantiles), so an ``ApproxDP`` budget is met by the planner's general rule (PLD / zCDP +
    CKS) instead of the exact Gaussian-DP profile; the predictions (radius schedule, :func:`scaled_forecasts`)
    use the Gaussian-DP rho times the CoinPress share (an approximation: the planner's rho is within a few
    percent of it).  The scale step's share is the one :func:`dpflow.estimators.scale.scale_weight` names.
    Outputs ``mean``, ``covariance``, ``centre``, ``scale``.  With public ``bounds = (R, K)`` (``||mu||_2 <= R``,
    ``Sigma <= K I``) the mean is clamped into the ball and the covariance's eigenvalues into ``[0, K]``
    (post-processing), and the predictions are worst cases in the data's units (:func:`routes.in_bounds`).

    >>> import numpy as np, dpflow as dp
    >>> plan = scaled_gaussian(d=3, n=20_000, budget=dp.ZCDP(0.5))
    >>> X = np.random.default_rng(0).normal(size=(20_000, 3)) * [1.0, 100.0, 0.01] + [5.0, -300.0, 0.0]
    >>> out = plan.run({"X": X}, noise=dp.SeededNoise(1)).released
    >>> bool(np.all(np.abs(out["mean"] - X.mean(axis=0)) < 0.05 * X.std(axis=0)))
    True
    """
    from dpflow.estimators.scale import column_scales, scale_weight, standardize, unstandardize, warn_if_capped

    where = "gaussian.scaled_gaussian"
    rho = _check_common(where, d, n, budget)
    if not 0.0 < split < 1.0:
        raise _refuse(where, f"split={split}", "pass 0 < split < 1 (the covariance's share of the budget)")
    forecasts = scaled_forecasts(d, n, budget, split, weight)  # before the default: a capped share predicts inf
    if bounds is not None:
        _check_bound(where, "mean_bound", bounds[0], 0.0)
        _check_bound(where, "cov_bound", bounds[1], 1.0)
        forecasts = {r: routes.in_bounds(f, d, bounds[0], bounds[1], SCALED_K_PER_COORD * d)
                     for r, f in forecasts.items()}
    capped = False
    if weight is None:
        weight, capped = scale_weight(n, d, budget)
    if not 0.0 < weight < 1.0:
        raise _refuse(where, f"weight={weight}", "pass 0 < weight < 1 (the scale step's share)")
    chosen = _choose(where, forecasts, route)
    note = routes.compare(forecasts, chosen, route is not None) + (f"; {note}" if note else "")
    R, K = SCALED_R_PER_COORD * math.sqrt(d), SCALED_K_PER_COORD * d
    t_cov, t_mean = default_rounds(K, d, 3), default_rounds(R, d, 2)
    rest = 1.0 - weight
    b = PlanBuilder(budget=budget, neighbors="replace", name="gaussian_scaled")
    _alerts(b, alerts)
    warn_if_capped(b, n, d, capped)
    X = b.source("X", Vectors(d=d), n=n)
    N.param(b, "algorithm", 0.0, f"private scale step; then {spec('gaussian.md', '1.4')} [REC] on the standardised "
                                 f"rows: {coinpress.REF_COV}; then {coinpress.REF_MEAN}")
    N.param(b, "bounds", [R, K], "R = 4 sqrt(d), K = 2 d on standardised rows (public: they follow from d)")
    centre, scale = column_scales(X, d, weight)
    Z = standardize(X, centre, scale, d)
    if chosen == "diagonal":
        mean, cov = _into_bounds(b, d, *_scaled_diagonal(b, Z, n, d, rho * Fraction(rest), split, rest, centre, scale),
                                 bounds)
        _record(b, forecasts[chosen], note)
        return b.build(mean=mean, covariance=cov, centre=centre, scale=scale)
    cov_z, A = _cov_part(b, N.PairDifferences()(Z), n // 2, d, K, "coinpress", split * rest, t_cov, None)
    assert A is not None
    rho_mean = coinpress.part_rhos(Fraction(rho) * Fraction(rest),
                                   [(split, t_cov), (1.0 - split, t_mean)])[1]
    radii = coinpress.predicted_mean_radii(n, d, R, rho_mean, t_mean)
    N.param(b, "predicted_radii", radii, f"whitened-mean radius schedule if ||A|| = 1 ({spec('gaussian.md', '1.2')})")
    _warn_if_vacuous(b, n, radii)
    radius = N.Apply(fn=steps.scaled_norm, shape=())(A, b.public(R))
    init = N.Pack(names=coinpress.MEAN_STATE)(b.public(np.zeros(d)), radius)
    state = coinpress.mvm_rec(N.Precondition(matrix=A)(Z), init, n, d, (1.0 - split) * rest, t_mean)
    mu_z = N.Apply(fn=steps.unmap_mean, shape=(d,))(A, N.Get("centre")(state))
    mean = N.Apply(fn=unstandardize, shape=(d,))(mu_z, centre, scale)
    cov = N.Apply(fn=unscale_covariance, shape=(d, d))(cov_z, scale)
    mean, cov = _into_bounds(b, d, mean, cov, bounds)
    _record(b, forecasts[chosen], note)
    return b.build(mean=mean, covariance=cov, centre=centre, scale=scale)


def _into_bounds(b: PlanBuilder, d: int, mean: Released[Any], cov: Released[Any],
                 bounds: tuple[float, float] | None) -> tuple[Released[Any], Released[Any]]:
    """With public ``bounds = (R, K)``: the mean clamped into the ball ``||mu|| <= R``, the covariance's
    eigenvalues into ``[0, K]`` (post-processing into what is public)."""
    if bounds is None:
        return mean, cov
    return (N.Apply(fn=steps.into_ball, shape=(d,))(mean, b.public(bounds[0])),
            N.Apply(fn=steps.into_spectrum, shape=(d, d))(cov, b.public(bounds[1])))


def _scaled_diagonal(b: PlanBuilder, Z: Sensitive[Rows], n: int, d: int, rho: Fraction, split: float, rest: float,
                     centre: Released[Any], scale: Released[Any]) -> tuple[Released[Any], Released[Any]]:
    """The ``diagonal`` route of :func:`scaled_gaussian` on the standardised rows ``Z``: the variances of the
    pair differences scaled by ``1 / sqrt 2`` (one clipped second moment) and the CoinPress mean under
    ``Sigma_z <= 2 I`` in the ball ``4 sqrt(d)``, both mapped back."""
    from dpflow.estimators.scale import unstandardize

    R, k_z = SCALED_R_PER_COORD * math.sqrt(d), SCALED_K_PER_COORD
    sigma = math.sqrt(k_z)
    t_mean = default_rounds(R / sigma, d, 2)
    N.param(b, "bounds", [R, k_z], "diagonal route: R = 4 sqrt(d), Sigma_z <= 2 I on standardised rows (each "
                                   "coordinate's variance is about 1 after the scale step)")
    cov_z, _ = _cov_part(b, N.PairDifferences()(Z), n // 2, d, k_z, "coinpress", split * rest, 1, None)
    rho_mean = coinpress.part_rhos(rho, [(split, 1), (1.0 - split, t_mean)])[1]
    mu_z = _mean_part(b, Z, n, d, R, rho_mean, (1.0 - split) * rest, t_mean, 0.01, sigma)
    mu_z = N.Apply(fn=steps.into_ball, shape=(d,))(mu_z, b.public(R))
    mean = N.Apply(fn=unstandardize, shape=(d,))(mu_z, centre, scale)
    diag = N.Apply(fn=steps.diagonal_part, shape=(d, d))(cov_z)
    return mean, N.Apply(fn=unscale_covariance, shape=(d, d))(diag, scale)


def _choose(where: str, forecasts: dict[str, routes.Forecast], route: str | None) -> str:
    """The route with the smallest predicted covariance error (public), or the forced one."""
    if route is not None and route not in forecasts:
        raise _refuse(where, f"unknown route {route!r}", f"use one of {sorted(forecasts)} or route=None")
    return choose_route({r: f.covariance for r, f in forecasts.items()}, route)


@attrs.frozen(eq=False)
class ScaleSearch:
    """The first plan of a no-bounds :func:`fit`: its report (ledger: the ``share`` of the budget spent
    on finding the scale), and the public bounds derived from its release."""

    share: Fraction
    report: Any
    plan: Plan
    bounds: unbounded.Scale


@attrs.frozen(eq=False)
class Fit:
    """What :func:`fit` returns: the estimates and the report (ledger, run facts); ``scale`` holds the
    scale search of a fit without bounds (``None`` when the bounds were given or the search was not run);
    ``route`` names the route that produced the estimates (``Fit.report.ledger`` lists its predicted errors
    and the routes compared); ``found`` is False only when a ``PureDP`` scale search released "not found"
    (no fallback exists under pure DP: the estimates are then zeros, and a warning says so)."""

    mean: np.ndarray
    covariance: np.ndarray
    report: Any
    plan: Plan
    scale: ScaleSearch | None = None
    route: str = ""
    found: bool = True


def fit(
    X: Any,
    budget: Measure,
    mean_bound: float | None = None,
    cov_bound: float | None = None,
    t_cov: int | None = None,
    t_mean: int | None = None,
    split: float = 0.5,
    noise: Any = None,
    scale_share: Fraction = unbounded.SCALE_SHARE,
    route: str | None = None,
    max_error: float | None = None,
    strict: bool = False,
) -> Fit:
    """Estimate the mean and covariance of the rows of ``X`` (n x d) privately.  ``mean_bound`` bounds
    ``||mu||_2``, ``cov_bound`` bounds ``Sigma <= cov_bound I`` (pass both or neither).  ``X`` may be a
    DataFrame; ``noise`` defaults to OS entropy (``dpflow.SecureNoise``).

    Before any data is read every route's error is predicted from public facts (n, d, the budget, the
    bounds: :mod:`.routes`) and the route is chosen from the predictions (``route=`` forces one); the chosen
    route's predictions are in the ledger (``Fit.report.ledger.predictions``) with the routes compared.

    With the bounds: ``coinpress`` (:func:`gaussian`: CoinPress covariance, then the whitened CoinPress mean)
    or ``diagonal`` (:func:`diagonal_gaussian`: the mean under the isotropic bound and only the variances, when
    the full covariance cannot be learned at this n), whichever has the smaller predicted covariance error.

    Without the bounds: ``kmssu`` when the private eigenvalue search is predicted to find the scale
    (:func:`unbounded.search_outlook`): a first plan spends ``scale_share`` of the budget finding it
    (:mod:`dpflow.estimators.gaussian.unbounded`: under ``ApproxZCDP``/``ApproxDP`` KMSSU's EigenvalueEstimator
    and a stability-histogram centre; under ``ZCDP`` and ``PureDP`` the float64 exponent grid), then
    ``coinpress`` or ``diagonal`` runs with the rest on the rows moved to the found centre and scaled by the
    found floor (``fit(...).scale.report`` is the first plan's report; the plans compose sequentially,
    :func:`dpflow.privacy.split.sequential_split`).  Otherwise ``scaled``: :func:`scaled_gaussian` (a
    per-column private scale step, then ``coinpress`` or ``diagonal`` on the standardised rows) with the whole
    budget.  Routes are named ``"kmssu+coinpress"``, ``"scaled+diagonal"`` and so on; ``route="kmssu"`` forces the
    search and leaves the rest to the predictions.  If the search runs and releases "not found", the
    rest of the budget (decided before data: the search's share is spent) runs the ``scaled`` route, with a
    warning; under ``PureDP`` (no scale step) the estimates are zeros, ``found`` is False and a warning
    says so.  No estimate is ever NaN or infinite.

    ``max_error`` is the largest acceptable predicted error of each output in its own metric (default: the
    data's own spread in that metric, ``sqrt(d K)`` for the mean's l2 error and ``K`` for the covariance's
    spectral error under ``Sigma <= K I``; ``sqrt(d)`` and 1 in the Mahalanobis metrics).  A prediction above it
    gives an :class:`dpflow.errors.AccuracyWarning` (also listed in the ledger's warnings); with ``strict=True``
    an :class:`dpflow.AccuracyError` refuses before any data is read and before any budget is charged (without
    bounds: on the predictions made before the search; the second plan's predictions, made from the
    search's release, then only warn).

    >>> import numpy as np, dpflow as dp
    >>> X = np.random.default_rng(0).normal(size=(5000, 3))
    >>> f = fit(X, budget=dp.ZCDP(0.5), mean_bound=10.0, cov_bound=30.0, noise=dp.SeededNoise(0))
    >>> f.covariance.shape, f.report.ledger.totals[0].rho, f.route
    ((3, 3), Fraction(1, 2), 'coinpress')
    >>> X = np.random.default_rng(0).normal(size=(40000, 2)) * [1e-4, 1e4] + [1e7, -3.0]
    >>> f = fit(X, budget=dp.ApproxZCDP(1, 1e-6), noise=dp.SeededNoise(0))
    >>> bool(abs(f.mean[0] - 1e7) < 1e-3 and abs(f.covariance[1, 1] / 1e8 - 1) < 0.1), f.route
    (True, 'kmssu+coinpress')
    >>> round(float(f.scale.report.ledger.totals[0].rho), 9), f.report.ledger.totals[0].rho
    (0.2, Fraction(4, 5))
    >>> f = fit(X, budget=dp.PureDP(2), noise=dp.SeededNoise(0))
    >>> bool(abs(f.mean[0] - 1e7) < 1e-3 and abs(f.covariance[1, 1] / 1e8 - 1) < 0.2)
    True
    >>> f.scale.report.ledger.totals[0].pure_eps, f.report.ledger.totals[0].pure_eps
    (Fraction(2, 5), Fraction(8, 5))
    """
    from dpflow.tables import to_rows

    X = to_rows(X, None, "gaussian.fit")
    shape = np.shape(X)
    if len(shape) != 2:
        raise _refuse("gaussian.fit", f"X has shape {shape}", "pass an (n, d) array")
    n, d = shape
    start = _start(d, n, budget, mean_bound, cov_bound, t_cov, t_mean, split, Fraction(scale_share), route,
                   max_error, strict)
    if start.b_fit is None:  # one plan: the bounded routes, or the per-column scale route
        res = start.plan.run({"X": X}, noise=noise)
        if start.route == "scaled+coinpress":
            _warn_scaled_condition(res.released, start.route, n, d, budget, split)
        return _finish(res.released["mean"], res.released["covariance"], res.report, start.plan, None, start.route)
    return _fit_unbounded(X, start, t_cov, t_mean, split, noise, max_error)


def first_plan(d: int, n: int, budget: Measure, mean_bound: float | None = None, cov_bound: float | None = None,
               t_cov: int | None = None, t_mean: int | None = None, split: float = 0.5,
               scale_share: Fraction = unbounded.SCALE_SHARE, route: str | None = None,
               max_error: float | None = None, strict: bool = False) -> Plan:
    """The plan :func:`fit` runs first on n rows of d columns with these arguments, decided from public facts only
    (no data is read, nothing is charged; ``strict=True`` refuses here as in ``fit``): with the bounds the only
    plan; without them the per-column scale route's, or the private scale search's (route ``kmssu``: the plan that
    follows it is made from its release).

    >>> import dpflow as dp
    >>> first_plan(3, 5000, dp.ZCDP(0.5), mean_bound=10.0, cov_bound=30.0).name
    'gaussian_full'
    >>> first_plan(3, 5000, dp.ApproxZCDP(0.5, 1e-6)).name   # the scale search's; the next plan uses its release
    'gaussian_scale_search'
    """
    return _start(d, n, budget, mean_bound, cov_bound, t_cov, t_mean, split, Fraction(scale_share), route,
                  max_error, strict).plan


@attrs.frozen(eq=False)
class _Start:
    """What :func:`fit` decides before any data: the first plan and, for a one-plan fit, its route's name; for the
    scale search (``b_fit`` set) the budget left for the second plan, the route asked of it and the outlook."""

    plan: Plan
    route: str
    b_fit: Measure | None = None
    cov_route: str = ""
    outlook: str = ""
    share: Fraction = Fraction(0)


def _start(d: int, n: int, budget: Measure, mean_bound: float | None, cov_bound: float | None, t_cov: int | None,
           t_mean: int | None, split: float, share: Fraction, route: str | None, max_error: float | None,
           strict: bool) -> _Start:
    where = "gaussian.fit"
    if (mean_bound is None) != (cov_bound is None):
        raise _refuse(where, "only one of mean_bound and cov_bound was given",
                      "pass both bounds, or neither (the scale is then found privately)")
    if max_error is not None and not max_error > 0:
        raise _refuse(where, f"max_error={max_error}", "pass a positive max_error, or None")
    if mean_bound is not None and cov_bound is not None:
        if d < 1 or n < 2:
            raise _refuse(where, f"d={d}, n={n}", "declare d >= 1 and n >= 2")
        if not isinstance(budget, PureDP):
            total_rho(budget)
        _check_bound(where, "mean_bound", mean_bound, 0.0)
        _check_bound(where, "cov_bound", cov_bound, 1.0)
        bounds = (float(mean_bound), float(cov_bound))
        search, _, cov_route = (route or "").partition("+")
        why: str | None = "per-column scale route forced by route= (the bounds clamp its estimates)"
        if search != "scaled":
            forecasts = bounded_forecasts(d, n, budget, mean_bound, cov_bound, split, t_cov, t_mean)
            chosen = _choose(where, forecasts, route)
            cov_route = ""
            why = None if route is not None else _scaled_instead(d, n, budget, split, bounds, forecasts[chosen])
        if why is not None:
            scaled, plan = _scaled_plan(d, n, budget, split, cov_route or None, max_error, strict, why, bounds)
            return _Start(plan, f"scaled+{scaled}")
        lines = _enforce(forecasts[chosen], (math.sqrt(d * cov_bound), cov_bound), max_error, strict, where)
        note = routes.compare(forecasts, chosen, route is not None)
        return _Start(_bounded_plan(chosen, d, n, budget, mean_bound, cov_bound, t_cov, t_mean, split, None, note,
                                    lines), chosen)
    return _unbounded_start(d, n, budget, split, share, route, max_error, strict)


SCALED_REGRET = 2.0
"""With public bounds :func:`fit` runs the per-column scale route (bounds used only to clamp its estimates)
instead of the bounded one when the scale route's worst-case predictions (the data filling its bounds:
:func:`routes.in_bounds`) are at most this many times the bounded route's, for the mean and the covariance.
The scale route's error follows the data's own scale, which bounds may overstate by any factor, so it costs at
most this factor when the bounds are tight and gains their slack when they are not.  Measured (issue 29's case:
d = 50, n = 10,000, ApproxDP(1, 1e-6), R = 1e4 sqrt(d), K = 1e4, Sigma = I): the bounded ``diagonal`` route's mean
error was 125-137 times the non-private one (4 seeds), the scale route's about 3 times; its worst-case mean
prediction is 1.52 times the bounded route's (1.42 for the covariance)."""


def _scaled_instead(d: int, n: int, budget: Measure, split: float, bounds: tuple[float, float],
                    bounded: routes.Forecast) -> str | None:
    """Before data: the ledger note when :func:`fit` with ``bounds`` should run the per-column scale route
    (:data:`SCALED_REGRET`), ``None`` otherwise (PureDP: the scale route needs a zCDP or approximate budget)."""
    if isinstance(budget, PureDP):
        return None
    worst = {r: routes.in_bounds(f, d, bounds[0], bounds[1], SCALED_K_PER_COORD * d)
             for r, f in scaled_forecasts(d, n, budget, split).items()}
    best = worst[choose_route({r: f.covariance for r, f in worst.items()}, None)]
    with np.errstate(all="ignore"):
        ratio = max(np.float64(best.mean.value) / bounded.mean.value,
                    np.float64(best.covariance.value) / bounded.covariance.value)
    if not ratio <= SCALED_REGRET:
        return None
    return (f"bounds given: the per-column scale route's worst-case predictions (the data filling its bounds) are "
            f"{float(ratio):.3g} times the bounded {bounded.route} route's at most "
            f"(SCALED_REGRET = {SCALED_REGRET:g}), "
            f"and its error follows the data's own scale; the bounds clamp its estimates")


def bounded_forecasts(d: int, n: int, budget: Measure, R: float, K: float, split: float = 0.5,
                      t_cov: int | None = None, t_mean: int | None = None,
                      units: str = "") -> dict[str, routes.Forecast]:
    """The predicted errors of :func:`fit`'s routes under the bounds ``||mu|| <= R``, ``Sigma <= K I``
    (public): ``coinpress`` (:func:`routes.joint`) and ``diagonal`` (:func:`routes.diagonal`); under ``PureDP``
    only ``coinpress`` (its Laplace rounds' predictions).

    >>> import dpflow as dp
    >>> f = bounded_forecasts(5, 442, dp.ApproxDP(1, 1e-6), R=400.0, K=2000.0)
    >>> f["coinpress"].covariance.value > f["diagonal"].covariance.value
    True
    """
    if isinstance(budget, PureDP):
        eps = float(budget.epsilon)
        _, predicted = coinpress.laplace_cov_schedule(n // 2, d, eps * split, K, t_cov)
        t_m = default_rounds(R, d, 2) if t_mean is None else t_mean
        return {"coinpress": _pure_forecast(n, d, eps, R, K, split, t_m, predicted, units)}
    rho = total_rho(budget)
    return {"coinpress": routes.joint(n, d, rho, R, K, split, t_cov, t_mean, units=units),
            "diagonal": routes.diagonal(n, d, rho, R, K, split, t_mean, units=units)}


def _bounded_plan(chosen: str, d: int, n: int, budget: Measure, R: float, K: float, t_cov: int | None,
                  t_mean: int | None, split: float, lower: float | None, note: str, alerts: tuple[str, ...],
                  units: str = "") -> Plan:
    if chosen == "diagonal":
        return diagonal_gaussian(d=d, n=n, budget=budget, R=R, K=K, split=split, t_mean=t_mean, note=note,
                                 alerts=alerts, units=units)
    return gaussian(d=d, n=n, budget=budget, R=R, K=K, t_cov=t_cov, t_mean=t_mean, split=split, lower=lower,
                    note=note, alerts=alerts, units=units)


def _enforce(forecast: routes.Forecast, tolerances: tuple[float, float], max_error: float | None, strict: bool,
             where: str) -> tuple[str, ...]:
    """:func:`dpflow.estimators.tolerance.enforce` on the route's two predictions, each against ``max_error``
    or its default tolerance (``tolerances``: the mean's, the covariance's); returns the warning lines."""
    fix = ("more rows, a larger budget, or tighter public bounds (mean_bound=, cov_bound=); the report lists "
           "every route's prediction")
    lines: tuple[str, ...] = ()
    for p, tol in zip((forecast.mean, forecast.covariance), tolerances, strict=True):
        lines += enforce([p], tol if max_error is None else max_error, strict, where, fix)
    return lines


def _finish(mean: Any, cov: Any, report: Any, plan: Plan, search: ScaleSearch | None, route: str,
            found: bool = True) -> Fit:
    """The :class:`Fit`, with a last guard: a non-finite entry of a released estimate (post-processing of
    public values) becomes 0 (NaN) or the largest float (infinity), with a warning."""
    m, c = np.asarray(mean, dtype=float), np.asarray(cov, dtype=float)
    if not (np.all(np.isfinite(m)) and np.all(np.isfinite(c))):
        warnings.warn(f"gaussian.fit ({route}): a released estimate had non-finite entries (an overflow of the "
                      "mapping back to the data's units); they were replaced by 0 (NaN) or the largest float",
                      AccuracyWarning, stacklevel=_caller_level())
        m, c = np.nan_to_num(m), np.nan_to_num(c)
    return Fit(m, c, report, plan, search, route, found)


def _pure_reach(n: int, d: int, b_fit: Measure, split: float) -> str | None:
    """Before any data is read: under ``PureDP`` the warning that the Laplace CoinPress rounds cannot reach a
    covariance error of ``PURE_ERROR_WARN`` even for the smallest bound the scale search can release
    (``K = 32``: the spherical case, :func:`unbounded.bounds_from`); ``None`` otherwise."""
    if not isinstance(b_fit, PureDP):
        return None
    eps = float(b_fit.epsilon) * split
    _, err = coinpress.laplace_cov_schedule(n // 2, d, eps, unbounded.SMALLEST_K)
    if err <= PURE_ERROR_WARN:
        return None
    return (f"PureDP: n={n} rows are too few for d={d}: even for a spherical Gaussian (K = "
            f"{unbounded.SMALLEST_K:g}) the Laplace CoinPress rounds at epsilon={eps:g} are predicted to err "
            f"{err:.3g} (Mahalanobis; coinpress.laplace_cov_schedule), and more for larger condition numbers; more "
            f"rows, a larger epsilon or a zCDP / approximate-DP budget fix this")




def _unbounded_start(d: int, n: int, budget: Measure, split: float, share: Fraction, route: str | None,
                     max_error: float | None, strict: bool) -> _Start:
    """The first plan of a fit without bounds: the per-column scale route's, or the scale search's."""
    where = "gaussian.fit"
    require_budget(budget, where, (ZCDP, ApproxZCDP, ApproxDP, PureDP))  # the user's, before the split
    if isinstance(budget, (ApproxZCDP, ApproxDP)) and budget.delta == 0:
        raise _refuse(where, f"{budget.describe()} has delta = 0", "pass delta > 0, or a ZCDP or PureDP budget")
    if not 0 < share < 1:
        raise _refuse(where, f"scale_share={share}", "pass 0 < scale_share < 1")
    pure = isinstance(budget, PureDP)
    search, _, cov_route = (route or "").partition("+")
    if search not in ("", "kmssu", "scaled") or cov_route not in ("", "coinpress", "diagonal") or (
            pure and (search == "scaled" or cov_route == "diagonal")):
        raise _refuse(where, f"unknown route {route!r} for a fit without bounds under {budget.describe()}",
                      "use 'kmssu' or 'scaled' (ZCDP / approximate budgets), optionally with '+coinpress' or "
                      "'+diagonal'; PureDP has only 'kmssu+coinpress'")
    b_scale, b_fit = sequential_split(budget, [share, 1 - share])
    feasible, why = unbounded.search_outlook(d, n, b_scale)
    search = search or ("kmssu" if feasible or pure else "scaled")
    outlook = (f"scale step: the eigenvalue search (share {share} of the budget) is "
               f"{'' if feasible else 'not '}expected to find the scale ({why})")
    if search == "scaled":
        why_route = "forced by route=" if route else "chosen: the search is not expected to succeed"
        chosen, plan = _scaled_plan(d, n, budget, split, cov_route or None, max_error, strict,
                                    f"{outlook}; per-column scale route {why_route}")
        return _Start(plan, f"scaled+{chosen}")
    if strict or not feasible:  # before any data: the prediction at the smallest bounds the search releases
        if not feasible:
            inf = Prediction("mean", "Mahalanobis", math.inf, routes.CONFIDENCE, outlook, "kmssu")
            pre = routes.Forecast("kmssu", inf, attrs.evolve(inf, output="covariance"))
        elif pure:
            pre = bounded_forecasts(d, n, b_fit, 8.0 * math.sqrt(d), unbounded.SMALLEST_K, split)["coinpress"]
        else:
            pre = routes.joint(n, d, total_rho(b_fit), 8.0 * math.sqrt(d), unbounded.SMALLEST_K, split, lower=1.0)
        _enforce(pre, (math.sqrt(d), 1.0), max_error, strict, where)
    p1 = unbounded.scale_plan(d, n, b_scale, share, budget, _pure_reach(n, d, b_fit, split))
    return _Start(p1, "", b_fit, cov_route, outlook, share)


def _fit_unbounded(X: Any, start: _Start, t_cov: int | None, t_mean: int | None, split: float, noise: Any,
                   max_error: float | None) -> Fit:
    """A fit without bounds after the scale search (``start``): its run, then the bounded route on the rows in
    the units it found, or the per-column scale route with the rest of the budget when it found nothing."""
    where = "gaussian.fit"
    n, d = np.shape(X)
    p1, b_fit, cov_route, outlook = start.plan, start.b_fit, start.cov_route, start.outlook
    assert b_fit is not None
    pure = isinstance(b_fit, PureDP)
    r1 = p1.run({"X": X}, noise=noise)
    sc = unbounded.bounds_from(r1.released, d)
    found = ScaleSearch(start.share, r1.report, p1, sc)
    if not sc.found:  # the private "not found": a public fact; the fallback's budget was fixed before data
        lost = f"{where}: the private scale search released 'not found' ({outlook})"
        if pure:
            warnings.warn(f"{lost}; under PureDP there is no fallback route: the estimates are zeros "
                          "(Fit.found is False). Fix: more rows, a larger epsilon, a zCDP / approximate-DP "
                          "budget, or public bounds (mean_bound=, cov_bound=)", AccuracyWarning,
                          stacklevel=_caller_level())
            return Fit(np.zeros(d), np.zeros((d, d)), r1.report, p1, found, "kmssu", False)
        warnings.warn(f"{lost}; the per-column scale route ran with the rest of the budget, "
                      f"{b_fit.describe()}", AccuracyWarning, stacklevel=_caller_level())
        return _fit_scaled(X, b_fit, split, noise, cov_route or None, max_error, False,
                           f"{lost}: fallback to the per-column scale route with the rest of the budget "
                           f"({b_fit.describe()}, decided before data)", found, "kmssu->scaled")
    units = " (rows in units of the square root of the search's floor)"
    forecasts = bounded_forecasts(d, n, b_fit, sc.R, sc.K, split, t_cov, t_mean, units)
    lower = None if pure else 1.0  # rows in units of the found floor: Sigma >= I there
    if lower is not None:  # compared in the Mahalanobis metric: the diagonal's absolute error bounds its own there
        forecasts["coinpress"] = routes.joint(n, d, total_rho(b_fit), sc.R, sc.K, split, t_cov, t_mean, lower)
    chosen = _choose(where, forecasts, cov_route or None)
    shown = forecasts[chosen]
    tol = (math.sqrt(d), 1.0) if lower is not None and chosen == "coinpress" else (math.sqrt(d * sc.K), sc.K)
    lines = _enforce(shown, tol, max_error, False, where)
    note = f"{outlook}; bounds from the search (rows in units of its floor): R = {sc.R:.4g}, K = {sc.K:.4g}; " + \
        routes.compare(forecasts, chosen, bool(cov_route))
    plan = _bounded_plan(chosen, d, n, b_fit, sc.R, sc.K, t_cov, t_mean, split, lower, note, lines, units)
    s = math.sqrt(sc.lower)
    with np.errstate(all="ignore"):  # a public map of the rows; non-finite rows are clipped by the plan
        Y = (np.asarray(X, dtype=float) - sc.center) / s
    res = plan.run({"X": Y}, noise=noise)
    with np.errstate(all="ignore"):
        mean = sc.center + s * np.asarray(res.released["mean"], dtype=float)
        cov = sc.lower * np.asarray(res.released["covariance"], dtype=float)
    return _finish(mean, cov, res.report, plan, found, f"kmssu+{chosen}")


def _scaled_plan(d: int, n: int, budget: Measure, split: float, cov_route: str | None, max_error: float | None,
                 strict: bool, note: str, bounds: tuple[float, float] | None = None) -> tuple[str, Plan]:
    """The ``scaled`` route of :func:`fit` (:func:`scaled_gaussian`) under ``budget``: its covariance route and
    plan, decided before data; with public ``bounds`` its predictions and tolerances are in the data's units
    (:func:`routes.in_bounds`)."""
    forecasts = scaled_forecasts(d, n, budget, split)
    K = SCALED_K_PER_COORD * d
    tol = (math.sqrt(K), K)
    if bounds is not None:
        forecasts = {r: routes.in_bounds(f, d, bounds[0], bounds[1], K) for r, f in forecasts.items()}
        tol = (math.sqrt(d * bounds[1]), bounds[1])
    chosen = _choose("gaussian.fit", forecasts, cov_route)
    lines = _enforce(forecasts[chosen], tol, max_error, strict, "gaussian.fit")
    return chosen, scaled_gaussian(d=d, n=n, budget=budget, split=split, route=cov_route, note=note, alerts=lines,
                                   bounds=bounds)


def _fit_scaled(X: Any, budget: Measure, split: float, noise: Any, cov_route: str | None,
                max_error: float | None, strict: bool, note: str, search: ScaleSearch | None, name: str) -> Fit:
    """The ``scaled`` route of :func:`fit` (:func:`scaled_gaussian`) under ``budget``, run on ``X``."""
    n, d = np.shape(X)
    chosen, plan = _scaled_plan(d, n, budget, split, cov_route, max_error, strict, note)
    res = plan.run({"X": X}, noise=noise)
    if chosen == "coinpress":
        _warn_scaled_condition(res.released, f"{name}+coinpress", n, d, budget, split)
    return _finish(res.released["mean"], res.released["covariance"], res.report, plan, search, f"{name}+{chosen}")


def _warn_scaled_condition(released: Any, route: str, n: int, d: int, budget: Measure, split: float) -> None:
    """After a ``scaled+coinpress`` release: warn when :func:`scaled_relative_error` at the released standardised
    covariance exceeds :data:`SCALED_RELATIVE_TOLERANCE` (post-processing of released values)."""
    with np.errstate(all="ignore"):  # post-processing of the released covariance and column scales
        scale = np.asarray(released["scale"], dtype=float)
        cov_z = np.asarray(released["covariance"], dtype=float) / np.outer(scale, scale)
    relative, lam = scaled_relative_error(cov_z, n, d, budget, split)
    if relative > SCALED_RELATIVE_TOLERANCE:
        warnings.warn(f"gaussian.fit ({route}): the released standardised covariance (the covariance "
                      f"in units of the private column scales) has smallest eigenvalue {lam:.3g}; at that "
                      f"condition the CoinPress rounds (run for K = {SCALED_K_PER_COORD * d:g}, d={d}, n={n}) are "
                      f"predicted to err by {relative:.3g} in the Mahalanobis metric (relative; "
                      "scaled_relative_error), above its spread 1: the covariance's small directions are not "
                      "learned. Fix: more rows, a larger budget, or public bounds (mean_bound=, cov_bound=)",
                      AccuracyWarning, stacklevel=_caller_level())


__all__ = ["Fit", "ScaleSearch", "bounded_forecasts", "coinpress", "covariance", "default_rounds",
           "diagonal_gaussian", "first_plan", "fit", "gaussian", "klsu", "kv", "mean", "routes", "scaled_forecasts",
           "scaled_gaussian", "steps", "total_rho", "unbounded", "univariate_mean"]
