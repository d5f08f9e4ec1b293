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
from fractions import Fraction
from typing import Any, Literal

import attrs
import numpy as np

from dpflow import nodes as N
from dpflow.domains import Vectors
from dpflow.errors import DomainError, PlanTypeError
from dpflow.estimators.covariance import naive_pce
from dpflow.estimators.gaussian import coinpress, klsu, kv, routes, steps, unbounded
from dpflow.estimators.mean import clipped_mean
from dpflow.handles import Released, Rows, Sensitive
from dpflow.nodes.postprocess import accuracy_warning
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


def default_rounds(bound: float, d: int, base: int) -> int:
    """CoinPress round count from public quantities: ``base`` (2 for the mean, 3 for the covariance: the
    coin-press defaults at ``R = 10 sqrt(d)``, ``K = 10 sqrt(d)``) plus one round per factor 8 of the
    bound beyond ``10 sqrt(d)`` (each round shrinks the ball or the spectrum bound by a large factor; the
    paper's R and K sweeps, gaussian.md 1.7).

    >>> default_rounds(10 * 50 ** 0.5, 50, 2), default_rounds(1e6, 20, 3)
    (2, 8)
    """
    excess = bound / (10.0 * math.sqrt(d))
    return base + (math.ceil(math.log2(excess) / 3.0 - 1e-9) if excess > 1.0 else 0)


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
    ``lower``: :func:`fit` after its scale search); ``note`` (a route comparison) is added to the ledger.

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
        forecast = _pure_forecast(n, d, eps, R, K, split, t_mean, predicted)
    else:
        forecast = routes.joint(n, d, rho, R, K, split, t_cov, t_mean, lower)
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
    _record(b, routes.diagonal(n, d, rho, R, K, split, t_mean), note)
    return b.build(mean=mu, covariance=cov)


def _record(b: PlanBuilder, forecast: routes.Forecast, note: str | None) -> None:
    """The route's predictions (``PredictedError`` nodes) and the route comparison, on the plan."""
    if note is not None:
        N.param(b, "routes", 0.0, note)
    for p in (forecast.mean, forecast.covariance):
        N.predicted_error(b, p.output, p.metric, p.value, p.confidence, p.derivation, p.route)


def _pure_forecast(n: int, d: int, eps: float, R: float, K: float, split: float, t_mean: int,
                   cov_error: float) -> routes.Forecast:
    """The ``PureDP`` :func:`gaussian` plan's predictions: the covariance from
    :func:`coinpress.laplace_cov_schedule` (``cov_error``, relative; times K: absolute), the mean from the
    Laplace rounds' radius schedule (:func:`steps.mvm_next_radius_laplace` at ``eps (1 - split) s_k``)."""
    from dpflow.estimators.tails import chi_radius

    gamma, r = chi_radius(d, 0.01), float(R)
    for s_k in coinpress.schedule(t_mean):
        clip = steps.mvm_clip(r, gamma)
        r = steps.mvm_next_radius_laplace(clip, 1.0 / (eps * (1.0 - split) * float(s_k)), gamma, n, d)
    mean = Prediction("mean", "l2", min(r * math.sqrt(K * (1.0 + cov_error)), 2.0 * R), routes.CONFIDENCE,
                      f"Laplace CoinPress mean, {t_mean} rounds at epsilon {eps * (1 - split):.4g}: last radius "
                      f"{r:.4g} in whitened units, times sqrt(K (1 + covariance error))", "coinpress")
    cov = Prediction("covariance", "spectral (absolute)", K * cov_error, routes.CONFIDENCE,
                     "Laplace CoinPress covariance: coinpress.laplace_cov_schedule (relative error) times K",
                     "coinpress")
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


def scaled_gaussian(d: int, n: int, budget: Measure, split: float = 0.5, weight: float | None = None) -> Plan:
    """:func:`gaussian` with no bounds at all: the private per-column scale step first
    (:func:`dpflow.estimators.scale.column_scales`, ``weight`` of the budget, by default the share the data
    size needs), then CoinPress on the standardised rows ``(x - c) / s`` with the public bounds
    ``R = 4 sqrt(d)`` and ``K = 2d`` that standardisation makes true (up to the scales' error), and the
    estimates mapped back (``c + s mu``, ``diag(s) Sigma diag(s)``: post-processing).  Location- and
    scale-invariant.  The plan is no longer all-Gaussian (the scale step's histograms and quantiles), so an
    ``ApproxDP`` budget is met by the planner's general rule (PLD / zCDP + CKS) instead of the exact
    Gaussian-DP profile; the predicted radius schedule in the ledger uses the Gaussian-DP rho times the
    CoinPress share (an approximation: it only feeds the warnings).  Outputs ``mean``, ``covariance``,
    ``centre``, ``scale``.

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
    capped = False
    if weight is None:
        weight, capped = scale_weight(n, d, budget)
    if not 0.0 < weight < 1.0:
        raise _refuse(where, f"weight={weight}", "pass 0 < weight < 1 (the scale step's share)")
    R, K = SCALED_R_PER_COORD * math.sqrt(d), SCALED_K_PER_COORD * d
    t_cov, t_mean = default_rounds(K, d, 3), default_rounds(R, d, 2)
    rest = 1.0 - weight
    b = PlanBuilder(budget=budget, neighbors="replace", name="gaussian_scaled")
    warn_if_capped(b, n, d, capped)
    X = b.source("X", Vectors(d=d), n=n)
    N.param(b, "algorithm", 0.0, f"private scale step; then {spec('gaussian.md', '1.4')} [REC] on the standardised "
                                 f"rows: {coinpress.REF_COV}; then {coinpress.REF_MEAN}")
    N.param(b, "bounds", [R, K], "R = 4 sqrt(d), K = 2 d on standardised rows (public: they follow from d)")
    centre, scale = column_scales(X, d, weight)
    Z = standardize(X, centre, scale, d)
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
    return b.build(mean=mean, covariance=cov, centre=centre, scale=scale)


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
    scale search of a fit without bounds (``None`` when the bounds were given)."""

    mean: np.ndarray
    covariance: np.ndarray
    report: Any
    plan: Plan
    scale: ScaleSearch | None = None


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
) -> Fit:
    """Estimate the mean and covariance of the rows of ``X`` (n x d) privately with :func:`gaussian`:
    ``mean_bound`` bounds ``||mu||_2``, ``cov_bound`` bounds ``Sigma <= cov_bound I``; with neither, a
    private scale search runs first (KMSSU under approximate budgets, a float64 exponent search under zCDP;
    its ``scale_share`` of the budget is in ``Fit.scale``), then :func:`gaussian` on the recentred rows
    (:func:`scaled_gaussian` is the one-plan alternative: a per-column scale step, then CoinPress).  ``X`` may
    be a DataFrame.  ``noise`` defaults to
    OS entropy (``dpflow.SecureNoise``).  When n is too small for d and the budget the plan's warnings are
    emitted as :class:`dpflow.errors.AccuracyWarning` and shown by ``fit(...).report.summary()``.

    Without the bounds (pass neither), a first plan spends ``scale_share`` of the budget finding the
    scale (:mod:`dpflow.estimators.gaussian.unbounded`: under ``ApproxZCDP``/``ApproxDP`` budgets with no
    range assumed, KMSSU's EigenvalueEstimator and a stability-histogram centre; under ``ZCDP`` and
    ``PureDP`` over the float64 exponent grid, with Gaussian or Laplace noise), then :func:`gaussian`
    (under ``PureDP`` its Laplace rounds) runs with the rest on the rows moved to the found
    centre and scaled by the found eigenvalue floor, and the estimates are mapped back.  The two plans
    compose sequentially (:func:`dpflow.privacy.split.sequential_split`); ``fit(...).scale.report`` is the
    first plan's report.  If the search releases "not found" the estimates are NaN.

    >>> import numpy as np, dpflow as dp
    >>> X = np.random.default_rng(0).normal(size=(5000, 3))
    >>> f = fit(X, budget=dp.ZCDP(0.5), mean_bound=10.0, cov_bound=30.0, noise=dp.SeededNoise(0))
    >>> f.covariance.shape, f.report.ledger.totals[0].rho
    ((3, 3), Fraction(1, 2))
    >>> X = np.random.default_rng(0).normal(size=(40000, 2)) * [1e-4, 1e4] + [1e7, -3.0]
    >>> f = fit(X, budget=dp.ApproxZCDP(1, 1e-6), noise=dp.SeededNoise(0))
    >>> bool(abs(f.mean[0] - 1e7) < 1e-3 and abs(f.covariance[1, 1] / 1e8 - 1) < 0.1)
    True
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
    if (mean_bound is None) != (cov_bound is None):
        raise _refuse("gaussian.fit", "only one of mean_bound and cov_bound was given",
                      "pass both bounds, or neither (the scale is then found privately)")
    if mean_bound is not None and cov_bound is not None:
        plan = gaussian(d=shape[1], n=shape[0], budget=budget, R=mean_bound, K=cov_bound, t_cov=t_cov,
                        t_mean=t_mean, split=split)
        res = plan.run({"X": X}, noise=noise)
        return Fit(np.asarray(res.released["mean"]), np.asarray(res.released["covariance"]), res.report, plan)
    return _fit_unbounded(X, budget, t_cov, t_mean, split, noise, Fraction(scale_share))


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


def _fit_unbounded(X: Any, budget: Measure, t_cov: int | None, t_mean: int | None, split: float, noise: Any,
                   share: Fraction) -> Fit:
    n, d = np.shape(X)
    require_budget(budget, "gaussian.fit", (ZCDP, ApproxZCDP, ApproxDP, PureDP))  # the user's, before the split
    if isinstance(budget, (ApproxZCDP, ApproxDP)) and budget.delta == 0:
        raise _refuse("gaussian.fit", f"{budget.describe()} has delta = 0",
                      "pass delta > 0, or a ZCDP or PureDP budget")
    if not 0 < share < 1:
        raise _refuse("gaussian.fit", f"scale_share={share}", "pass 0 < scale_share < 1")
    b_scale, b_fit = sequential_split(budget, [share, 1 - share])
    p1 = unbounded.scale_plan(d, n, b_scale, share, budget, _pure_reach(n, d, b_fit, split))
    r1 = p1.run({"X": X}, noise=noise)
    sc = unbounded.bounds_from(r1.released, d)
    plan = gaussian(d=d, n=n, budget=b_fit, R=sc.R, K=sc.K, t_cov=t_cov, t_mean=t_mean, split=split)
    search = ScaleSearch(share, r1.report, p1, sc)
    if not sc.found:  # the private "not found": nothing more is read
        return Fit(np.full(d, math.nan), np.full((d, d), math.nan), r1.report, p1, search)
    s = math.sqrt(sc.lower)
    with np.errstate(all="ignore"):  # a public map of the rows; non-finite rows are clipped by the plan
        Y = (np.asarray(X, dtype=float) - sc.center) / s
    res = plan.run({"X": Y}, noise=noise)
    mean = sc.center + s * np.asarray(res.released["mean"], dtype=float)
    cov = sc.lower * np.asarray(res.released["covariance"], dtype=float)
    return Fit(mean, cov, res.report, plan, search)


__all__ = ["Fit", "ScaleSearch", "coinpress", "covariance", "default_rounds", "fit", "gaussian", "klsu", "kv", "mean",
           "scaled_gaussian", "steps", "total_rho", "unbounded",
           "univariate_mean"]
