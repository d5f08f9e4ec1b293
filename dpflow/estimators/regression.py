"""Private linear regression: sufficient-statistics perturbation (the default), noisy gradient descent
(Cai-Wang-Zhang 2021 Alg. 4.1) and noisy iterative hard thresholding (CWZ Alg. 4.2), as plans over
one source ``Z`` of rows ``[x, y]``, and a scikit-learn-like :class:`LinearRegression` on top.

Accountings.  ``accounting="auto"`` (the default) lets the planner compose in zCDP: Gaussian steps
add rho, Peel's Laplace steps add eps^2/2 each (Bun-Steinke 2016 Prop. 1.4, Lemma 1.7), and the
total converts to (epsilon, delta) by the tightest valid rule.  ``accounting="basic"`` is the
paper's: with an ``ApproxDP(eps, delta)`` budget every iteration gets (eps/T, delta/T) and the
iterations compose by basic composition.  Both plans show the per-iteration cost in the ledger
(the mechanism inside the ``Repeat`` body, "per unit round weight") and the ledger's allocation
line says which accounting was used; a "basic" ledger also lists the zCDP conversion of the same
noise, so the two accountings stand side by side.

>>> import numpy as np, dpflow as dp
>>> rng = np.random.default_rng(0)
>>> X = rng.uniform(-1, 1, size=(5000, 3)); y = X @ np.array([1.0, -1.0, 0.5]) + 0.1 * rng.normal(size=5000)
>>> model = LinearRegression(budget=dp.ZCDP(0.5), noise=dp.SeededNoise(1)).fit(X, y)
>>> bool(np.abs(model.coef_ - [1.0, -1.0, 0.5]).max() < 0.2)
True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpflow import nodes as N
from dpflow.domains import Vectors
from dpflow.errors import ParameterError
from dpflow.estimators.base import BOOLEAN, BUDGET, NOISE, Constraint, Estimator, in_range, one_of, optional, positive
from dpflow.estimators.scale import _range as magnitude_range
from dpflow.estimators.scale import column_scales, missing_as_zero, negate, standardize, warn_if_capped
from dpflow.estimators.scale import scale_weight as auto_scale_weight
from dpflow.estimators.tolerance import choose_route, enforce, smallest_n
from dpflow.estimators.truncation import gaussian_factor, private_radius, release_noise
from dpflow.handles import Released, Rows, Sensitive, Value
from dpflow.nodes.base import finite_or_zero, released_scalar
from dpflow.nodes.regression import l1_bound
from dpflow.plan import Plan, PlanBuilder
from dpflow.plan.graph import require_budget
from dpflow.planner.accuracy import Prediction
from dpflow.privacy import ZCDP, ApproxDP, Measure, PureDP, gaussian_budget_rho

ROW_FACTOR = 1.5
"""SSP clips rows at 1.5 x the private median row norm: norms of sub-Gaussian rows concentrate, so this
clips under 1% of rows in the benchmark design (d = 10) while the noise grows only like r^2.  Clipping
half the rows (factor 1) shrinks the coefficients by ~10%: rows whose noise has the sign of x'beta are
longer, so they are clipped more."""
GD_STATE = ("beta", "residual_bound")
"""The parts of the noisy gradient descent and NIHT loop state (CWZ 2023 Alg. 4.1-4.2): the iterate beta and
the released residual bound its gradient steps truncate to."""


def _pos(name: str, x: float | None) -> float:
    if x is None or not (math.isfinite(float(x)) and float(x) > 0):
        raise ValueError(f"{name} must be a finite positive number, got {x!r}")
    return float(x)


def _common(d: int, n: int, budget: Measure, truncation_weight: float) -> None:
    require_budget(budget, "regression", (ZCDP, ApproxDP))
    if d < 1 or n < 2:
        raise ValueError(f"regression needs d >= 1 and n >= 2, got d={d}, n={n}")
    if not 0 < truncation_weight < 1:
        raise ValueError(f"truncation_weight must be in (0, 1), got {truncation_weight}")


def _residual_bound(Z: Sensitive[Rows], d: int, n: int, x_bound: float, K: float,
                    response_bound: float | None, truncation_weight: float) -> Released[Value]:
    """``A = R + c_x K``: public R, or R = gaussian_factor(n) * private median |y| (CWZ Sec. 5, spec 3.6)."""
    if response_bound is not None:
        return Z.builder.public(_pos("response_bound", response_bound) + x_bound * K)
    y = N.Columns(keep=[d])(Z)
    return private_radius(y, factor=gaussian_factor(n), shift=x_bound * K,
                          weight=truncation_weight / 2, range_weight=truncation_weight / 2)


def _iterative(name: str, d: int, n: int, budget: Measure, x_bound: float, coef_bound: float,
               iterations: int | None, step: float, response_bound: float | None, truncation_weight: float,
               accounting: str, sparsity: int | None, prediction: Prediction | None = None) -> Plan:
    _common(d, n, budget, truncation_weight)
    cx, C, eta = _pos("x_bound", x_bound), _pos("coef_bound", coef_bound), _pos("step", step)
    if sparsity is not None and not 1 <= sparsity <= d:
        raise ValueError(f"sparsity must be in [1, d={d}], got {sparsity}")
    T = iterations if iterations is not None else max(1, math.ceil(math.log(n)))
    if T < 1:
        raise ValueError(f"iterations must be >= 1, got {T}")
    K = l1_bound("l2", C, sparsity, d)
    b = PlanBuilder(budget=budget, neighbors="replace", name=name, accounting=accounting)
    Z = b.source("Z", Vectors(d=d + 1), n=n)
    A = _residual_bound(Z, d, n, cx, K, response_bound, truncation_weight)
    w = (1.0 - truncation_weight) / T

    def body(rows: Sensitive[Rows], state: Released[Any], k: Released[Any]) -> Released[Value]:
        beta, a = N.Get("beta")(state), N.Get("residual_bound")(state)
        grad = N.GradientStep(beta=beta, eta=eta, x_bound=cx, residual_bound=a, radius=C, sparsity=sparsity)(rows)
        if sparsity is None:  # CWZ Alg. 4.1: Gaussian step, projection onto the l2 ball
            new = N.ProjectCoef(radius=C)(N.GaussianMech(weight=w)(grad))
        else:  # CWZ Alg. 4.2: Peeling keeps s coordinates, projection onto the l2 ball
            new = N.ProjectCoef(radius=C, sparsity=sparsity)(N.Peel(s=sparsity, weight=w)(grad))
        return N.Pack(names=GD_STATE)(new, a)

    final = N.repeat(Z, N.Pack(names=GD_STATE)(b.public(np.zeros(d)), A), body, times=T)
    record_prediction(b, prediction)
    return b.build(coef=N.Get("beta")(final), residual_bound=A)


def noisy_gd(
    d: int,
    n: int,
    budget: Measure,
    x_bound: float,
    coef_bound: float,
    iterations: int | None = None,
    step: float = 0.5,
    response_bound: float | None = None,
    truncation_weight: float = 0.1,
    accounting: str = "auto",
    prediction: Prediction | None = None,
) -> Plan:
    """Noisy gradient descent for low-dimensional least squares (CWZ 2021 Alg. 4.1; spec 3.4).

    ``T`` (default ``ceil(ln n)``) rounds of ``beta <- Pi_C(beta - eta grad + N(0, sigma^2 I))`` from
    ``beta = 0``, with ``|x_ij| <= x_bound`` (c_x) and the l2 ball of radius ``coef_bound`` (C).
    The step's l2 sensitivity is ``2 eta c_x sqrt(d) (R + c_x sqrt(d) C) / n``
    (:class:`dpflow.nodes.GradientStep`).  R, the response truncation, is ``response_bound`` or
    data-driven (``gaussian_factor(n) * private median |y|``).  Source ``Z`` = rows ``[x, y]``;
    outputs ``coef`` and ``residual_bound``.

    >>> import dpflow as dp
    >>> plan = noisy_gd(d=5, n=10_000, budget=dp.ApproxDP(1.0, 1e-5), x_bound=1.0, coef_bound=2.0,
    ...                 response_bound=3.0, accounting="basic")
    >>> sum(e.kind == "GaussianMech" for e in plan.check().entries)
    1
    """
    return _iterative("noisy_gd", d, n, budget, x_bound, coef_bound, iterations, step, response_bound,
                      truncation_weight, accounting, None, prediction)


def niht(
    d: int,
    n: int,
    s: int,
    budget: Measure,
    x_bound: float,
    coef_bound: float,
    iterations: int | None = None,
    step: float = 0.5,
    response_bound: float | None = None,
    truncation_weight: float = 0.1,
    accounting: str = "auto",
    prediction: Prediction | None = None,
) -> Plan:
    """Noisy iterative hard thresholding for s-sparse high-dimensional least squares (CWZ 2021
    Alg. 4.2; spec 3.5).

    ``T`` rounds of ``beta <- Pi_C(Peel_s(beta - eta grad))``; Peel's lambda is the step's
    l-infinity sensitivity ``2 eta c_x (R + c_x sqrt(s) C) / n`` (s-sparse iterates in the l2 ball).
    Source ``Z``; outputs ``coef`` and ``residual_bound``.

    >>> import dpflow as dp
    >>> plan = niht(d=50, n=10_000, s=3, budget=dp.ZCDP(0.5), x_bound=1.0, coef_bound=2.0)
    >>> sorted({e.kind for e in plan.check().entries if e.cost})
    ['LaplaceMech', 'Peel', 'Quantile']
    """
    return _iterative("niht", d, n, budget, x_bound, coef_bound, iterations, step, response_bound,
                      truncation_weight, accounting, s, prediction)


def ssp_ridge_scale(noise_scale: Any, radius: Any, n: Any) -> float:
    """sqrt(sigma), sigma = (sqrt(2) r^2 / n) * noise_scale: the per-entry noise of SSP's second moment
    (its Frobenius sensitivity times the Gaussian's certified sigma per unit sensitivity).  ``RidgeSolve``
    squares its ``scale``, so ``lambda = ridge sqrt(d + 1) sigma``.  A non-finite radius gives 0.

    >>> round(ssp_ridge_scale(0.5, 2.0, 8.0) ** 2, 6)
    0.353553
    """
    r = float(radius)
    sigma = math.sqrt(2.0) * r * r / float(n) * float(noise_scale)
    return math.sqrt(sigma) if math.isfinite(sigma) and sigma > 0 else 0.0


def _ssp(d: int, n: int, budget: Measure, radius: float | None, ridge: float, truncation_weight: float,
         accounting: str, prediction: Prediction | None = None) -> Plan:
    b = PlanBuilder(budget=budget, neighbors="replace", name="ssp_regression", accounting=accounting)
    Z = b.source("Z", Vectors(d=d + 1), n=n)
    r: Any = radius if radius is not None else private_radius(
        Z, of="rows", factor=ROW_FACTOR, weight=truncation_weight / 2, range_weight=truncation_weight / 2)
    noisy = N.GaussianMech(weight=1.0 - truncation_weight)(N.SecondMoment()(N.Clip(radius=r)(Z)))
    r_out = r if isinstance(r, Released) else b.public(r)
    scale = N.Apply(fn=ssp_ridge_scale, shape=())(N.noise_scale(noisy), r_out, b.public(float(n)))
    coef = N.RidgeSolve(ridge=ridge * math.sqrt(d + 1), scale=scale)(N.PSDProject()(noisy))
    record_prediction(b, prediction)
    return b.build(coef=coef, radius=r_out)


def raw_coefficients(beta: Any, centre: Any, scale: Any, intercept: Any) -> np.ndarray:
    """Coefficients on the data's own scale from ``beta`` fitted on standardised rows.

    The standardised model ``(y - c_y)/s_y = sum_j b_j (x_j - c_j)/s_j [+ b_0]`` is
    ``y = sum_j (s_y b_j / s_j) x_j + (c_y + s_y b_0 - sum_j c_j s_y b_j / s_j)``; ``centre`` and
    ``scale`` hold the d feature columns then y.  ``intercept`` (1 or 0, public) says whether the last
    coordinate of ``beta`` is b_0; the result has the same layout as ``beta``.  Declared policy (the
    "shrink toward the intercept" step, post-processing of released values): a non-finite result (a scale
    step whose scale underflowed or overflowed) is replaced by the intercept-only model, slopes 0 and the
    intercept at the released centre of y (0 without intercept).

    >>> raw_coefficients(np.array([0.5, 0.1]), np.array([1.0, 3.0]), np.array([2.0, 4.0]), 1.0).tolist()
    [1.0, 2.4]
    >>> raw_coefficients(np.array([0.5, 0.1]), np.array([1.0, 3.0]), np.array([0.0, 4.0]), 1.0).tolist()
    [0.0, 3.0]
    """
    b = np.asarray(beta, dtype=float).reshape(-1)
    c, sc = finite_or_zero(centre).reshape(-1), np.asarray(scale, dtype=float).reshape(-1)
    d = c.shape[0] - 1
    with np.errstate(all="ignore"):
        coef = sc[d] * b[:d] / sc[:d]
        full = coef if released_scalar(intercept) == 0.0 else np.append(coef, c[d] + sc[d] * b[d] - coef @ c[:d])
    if np.all(np.isfinite(full)):
        return full
    out: np.ndarray = np.zeros_like(full)
    if released_scalar(intercept) != 0.0:
        out[d] = c[d]
    return out


def intercept_centre(centre: Any) -> np.ndarray:
    """The centre of rows ``[x, 1, y]`` from the centre of ``[x, y]`` (the constant column stays 1)."""
    c = np.asarray(centre, dtype=float).reshape(-1)
    return np.concatenate([c[:-1], [0.0], c[-1:]])


def intercept_scale(scale: Any) -> np.ndarray:
    """The scale of rows ``[x, 1, y]`` from the scale of ``[x, y]`` (the constant column keeps scale 1)."""
    s = np.asarray(scale, dtype=float).reshape(-1)
    return np.concatenate([s[:-1], [1.0], s[-1:]])


def zero_centre(scale: Any) -> np.ndarray:
    """No centring (a model without intercept must not be shifted): zeros of the scale's shape."""
    return np.zeros_like(np.asarray(scale, dtype=float))


def scaled_ssp(d: int, n: int, budget: Measure, fit_intercept: bool = True, ridge: float = 1.0,
               truncation_weight: float = 0.1, scale_weight: float | None = None, accounting: str = "auto",
               prediction: Prediction | None = None) -> Plan:
    """Scale-free SSP: a private per-column scale step, then :func:`sufficient_statistics` on the
    standardised rows, and the coefficients mapped back to the data's scale.

    Source ``Z`` holds rows ``[x, 1, y]`` (``[x, y]`` without intercept).  The scale step
    (:func:`dpflow.estimators.scale.column_scales`, weight ``scale_weight``, by default the share the
    data size needs, :func:`dpflow.estimators.scale.scale_weight`) releases a centre and a
    scale for the d features and y; the rows are standardised (a ``Precondition`` by released values,
    stability 1; the constant column is left as it is; without intercept nothing is centred), clipped at
    the data-driven row radius and their second moment released with Gaussian noise as in SSP.  The
    solve and :func:`raw_coefficients` are post-processing.  With one clipping radius for the whole
    row, raw scales let the largest column drown the others (the diabetes target, 25 to 346, against
    features around 0.05); standardising first removes that.  Outputs ``coef`` (raw scale, intercept
    last), ``radius``, ``centre`` and ``scale``.

    >>> import dpflow as dp
    >>> plan = scaled_ssp(d=3, n=10_000, budget=dp.ZCDP(0.5))
    >>> sorted({e.kind for e in plan.check().entries if e.cost})
    ['GaussianMech', 'LaplaceMech', 'Quantile']
    """
    _common(d, n, budget, truncation_weight)
    capped = False
    if scale_weight is None:
        scale_weight, capped = auto_scale_weight(n, d + 1, budget)
    if not 0 < scale_weight < 1 - truncation_weight:
        raise ValueError(f"scale_weight must be in (0, 1 - truncation_weight), got {scale_weight}")
    p = d + (1 if fit_intercept else 0)
    b = PlanBuilder(budget=budget, neighbors="replace", name="scaled_ssp_regression", accounting=accounting)
    warn_if_capped(b, n, d + 1, capped)
    Z = b.source("Z", Vectors(d=p + 1), n=n)
    centre, scale = column_scales(missing_as_zero(N.Columns(keep=[*range(d), p])(Z)), d + 1, scale_weight)
    if fit_intercept:
        full_c = N.Apply(fn=intercept_centre, shape=(p + 1,))(centre)
        full_s = N.Apply(fn=intercept_scale, shape=(p + 1,))(scale)
    else:
        full_c, full_s = N.Apply(fn=zero_centre, shape=(p + 1,))(scale), scale
    S = standardize(Z, full_c, full_s, p + 1)
    r = private_radius(S, of="rows", factor=ROW_FACTOR, weight=truncation_weight / 2,
                       range_weight=truncation_weight / 2)
    noisy = N.GaussianMech(weight=1.0 - truncation_weight - scale_weight)(N.SecondMoment()(N.Clip(radius=r)(S)))
    ridge_scale = N.Apply(fn=ssp_ridge_scale, shape=())(N.noise_scale(noisy), r, b.public(float(n)))
    beta = N.RidgeSolve(ridge=ridge * math.sqrt(p + 1), scale=ridge_scale)(N.PSDProject()(noisy))
    coef = N.Apply(fn=raw_coefficients, shape=(p,))(beta, full_c if not fit_intercept else centre, scale,
                                                     b.public(1.0 if fit_intercept else 0.0))
    record_prediction(b, prediction)
    return b.build(coef=coef, radius=r, centre=centre, scale=scale)


def sufficient_statistics(
    d: int,
    n: int,
    budget: Measure,
    radius: float | None = None,
    ridge: float = 1.0,
    truncation_weight: float = 0.1,
    accounting: str = "auto",
    prediction: Prediction | None = None,
) -> Plan:
    """Sufficient-statistics perturbation: clip the rows ``z = [x, y]`` to the l2 ball of radius r,
    release the second moment ``(1/n) sum z z^T`` once with Gaussian noise (Frobenius sensitivity
    ``sqrt(2) r^2 / n``, KLSU 2019 / gaussian.md 0.4), project it onto the PSD cone and solve
    ``(M_xx + lambda I) beta = M_xy`` (post-processing).  ``lambda = ridge * sqrt(d + 1) * sigma``
    where sigma is the per-entry noise (``sqrt(2) r^2 / (n sqrt(2 rho))``): the ridge tracks the
    noise's spectral size so the solve stays stable.  ``radius=None`` uses 1.5 x the private median
    of the row norms (:func:`private_radius` with ``of="rows"``, see ``ROW_FACTOR``).  Rows are scaled as a whole, so
    clipping keeps ``y = x' beta + noise`` on every row.  Source ``Z``; outputs ``coef``, ``radius``.

    Sources: Dwork-Talwar-Thakurta-Zhang 2014 (analyze Gauss); Sheffet 2017; Wang 2018 (AdaSSP).

    >>> import dpflow as dp
    >>> plan = sufficient_statistics(d=3, n=10_000, budget=dp.ZCDP(0.5), radius=4.0)
    >>> [e.kind for e in plan.check().entries if e.cost]
    ['GaussianMech']
    """
    _common(d, n, budget, truncation_weight)
    if radius is not None:
        _pos("radius", radius)
    if not (math.isfinite(ridge) and ridge >= 0):
        raise ValueError(f"ridge must be finite and >= 0, got {ridge}")
    return _ssp(d, n, budget, radius, ridge, truncation_weight, accounting, prediction)


CONFIDENCE = 0.9
"""The confidence of every predicted error of :class:`LinearRegression`."""
METRIC = "R^2"
"""The predictions' metric: the in-sample R^2 the private fit loses against the non-private fit with the same
clipping and ridge on the same rows (its excess mean squared error over Var(y)); 1 is the loss of predicting
y's mean when the fit explains everything."""
R2_OUTPUT = "r2"
"""The output a :data:`METRIC` prediction is about: the fitted model's R^2 (``score``), not the coefficients
themselves (an R^2 loss is a statement about the predictions ``X @ coef_ + intercept_``)."""
SCALE_SLACK2, CENTRE_SLACK2, ROW_MEDIAN_SLACK = 1.5, 0.25, 1.5
"""What the ``"scaled"`` prediction assumes of the scale step when it has the share it needs
(:func:`dpflow.estimators.scale.scale_weight` not capped) and of the data: each released scale within a factor
``sqrt(1.5)`` of its column's standard deviation, each centre within half a standard deviation of the column's
mean, and the median squared row norm at most 1.5 times its mean.  Benchmarked, not proven: the scale step's
quantiles have these margins at the share it is given; a column far from Gaussian (heavy tails, a few
values) may break them, and then the prediction is optimistic."""
COEF_NORM2 = SCALE_SLACK2 * (1.0 + CENTRE_SLACK2)
"""The squared norm the ``"scaled"`` prediction allows the standardised coefficients: slopes of squared norm at
most Var(y/s) <= 1.5 (the explained variance, for features that are not strongly collinear) and an intercept
at most the centre's error, half a deviation, in units of the scale."""
EXCESS_RISK = "excess risk (y units^2)"
"""The metric of the ``"gd"`` and ``"niht"`` predictions (forced routes only): the in-sample mean squared
error above the non-private least-squares fit, in y's units squared."""
CENTRE_RANGE_SHARE = 0.4
"""The ``"intercept"`` route's split: this share locates the range of y (a log-scale histogram), the rest
its private median."""
ROUTES = ("intercept", "radius", "gd", "niht", "scaled")
"""The routes of :class:`LinearRegression`, in the order that breaks ties between equal predictions (two
infinite ones: the intercept-only model first, a public bound before the scale step)."""


def record_prediction(builder: PlanBuilder, prediction: Prediction | None) -> None:
    """Add ``prediction`` to the plan being built (:func:`dpflow.nodes.predicted_error`); None adds nothing."""
    if prediction is not None:
        N.predicted_error(builder, prediction.output, prediction.metric, prediction.value, prediction.confidence,
                          prediction.derivation, prediction.route, prediction.given)


def intercept_model(centre: Any, d: Any) -> np.ndarray:
    """The intercept-only model: d slopes 0, then the released centre of y (a non-finite centre as 0).

    >>> intercept_model(3.5, 2.0).tolist()
    [0.0, 0.0, 3.5]
    """
    out: np.ndarray = np.append(np.zeros(int(released_scalar(d))), finite_or_zero(released_scalar(centre)))
    return out


def intercept_only(d: int, n: int, budget: Measure, prediction: Prediction | None = None) -> Plan:
    """The intercept-only model (predict y's private median): the route a hopeless fit shrinks to.

    Source ``Z`` holds rows ``[x, 1, y]`` as for :func:`scaled_ssp`; only y is read: a noisy histogram of
    ``|y|`` over the public log-scale bins locates its range ``[-U, U]`` (``CENTRE_RANGE_SHARE`` of the
    budget), the private median of y in that range is the intercept.  Outputs ``coef`` (d zeros, then the
    intercept) and ``centre``.

    >>> import dpflow as dp
    >>> sorted({e.kind for e in intercept_only(3, 400, dp.ZCDP(0.5)).check().entries if e.cost})
    ['GaussianMech', 'Quantile']
    """
    _common(d, n, budget, 0.5)
    b = PlanBuilder(budget=budget, neighbors="replace", name="intercept_only_regression")
    y = missing_as_zero(N.Columns(keep=[d + 1])(b.source("Z", Vectors(d=d + 2), n=n)))
    upper = magnitude_range(y, CENTRE_RANGE_SHARE)
    centre = N.Quantile(q=0.5, weight=1.0 - CENTRE_RANGE_SHARE)(
        N.OrderStatistics(lower=N.Apply(fn=negate, shape=())(upper), upper=upper)(y))
    record_prediction(b, prediction)
    return b.build(coef=N.Apply(fn=intercept_model, shape=(d + 1,))(centre, b.public(float(d))), centre=centre)


def chi2_quantile(k: int, q: float = CONFIDENCE) -> float:
    """The q-quantile of a chi-square with k degrees of freedom.

    >>> round(chi2_quantile(2), 4)
    4.6052
    """
    from scipy.stats import chi2

    return float(chi2.ppf(q, k))


def _pure_eps(plan: Plan, kind: str) -> float:
    """The certified epsilon of the (single) pure-DP mechanism of ``kind`` in ``plan`` (no data read)."""
    return next(float(e.event.cost.pure_eps) for e in plan.check().entries
                if e.kind == kind and e.event is not None and e.event.cost.pure_eps is not None)


def _gaussian_multiplier(plan: Plan) -> float:
    """The certified sigma per unit l2 sensitivity of the plan's release (:func:`release_noise`), no data read."""
    return release_noise(plan)[0]


def scaled_prediction(d: int, n: int, multiplier: float, ridge: float, fit_intercept: bool) -> float:
    """The ``"scaled"`` route's predicted R^2 loss (:data:`METRIC`) from public facts: d, n, the Gaussian's
    certified noise ``multiplier`` and ``ridge``, under the scale step's guarantee (:data:`SCALE_SLACK2`).

    Rows ``[x/s, 1, y/s]``: each standardised column has second moment at most ``m = g2 (1 + c2)``
    (:data:`SCALE_SLACK2` g2, :data:`CENTRE_SLACK2` c2), so the private radius (1.5 x the median row norm,
    the median of the squared norm at most :data:`ROW_MEDIAN_SLACK` times its mean) is ``r^2 <= 1.5^2 x 1.5
    (m (d + 1) + 1)``; the per-entry noise of the second moment is ``sigma = sqrt(2) r^2 multiplier / n`` and
    ``lambda = ridge sqrt(p + 1) sigma``.  Against the ridge fit ``beta`` with the same lambda, the noisy
    solve moves by ``Delta = (M + lambda)^-1 v`` with ``v = e - E beta``, whose excess risk ``Delta' M Delta
    <= ||v||^2 / (4 lambda)`` (``mu / (mu + lambda)^2 <= 1 / (4 lambda)`` for every eigenvalue mu);
    ``||v||^2 <= sigma^2 (1 + ||beta||^2) chi2_p(0.9)`` with ``||beta||^2 <=`` :data:`COEF_NORM2`; divided by
    ``Var(y/s) >= 1 / g2``.  First order in the noise (the PSD projection keeps the solve's matrix above
    lambda).  ``ridge=0``: no bound (inf).

    >>> round(scaled_prediction(1, 20_000, 4.75, 1.0, True), 4)
    0.0154
    """
    p = d + (1 if fit_intercept else 0)
    second_moment = SCALE_SLACK2 * (1.0 + CENTRE_SLACK2)
    r2 = ROW_FACTOR**2 * ROW_MEDIAN_SLACK * (second_moment * (d + 1) + (1 if fit_intercept else 0))
    sigma = math.sqrt(2.0) * r2 * multiplier / n
    lam = ridge * math.sqrt(p + 1) * sigma
    if not lam > 0:
        return math.inf
    return SCALE_SLACK2 * sigma**2 * (1.0 + COEF_NORM2) * chi2_quantile(p) / (4.0 * lam)


def centre_prediction(n: int, range_found: bool, median_eps: float) -> float:
    """The ``"intercept"`` route's predicted R^2 loss (:data:`METRIC`): the fit's own R^2 (at most 1) plus the
    squared error of the private median as an estimate of y's mean, in standard deviations.

    The log-scale histogram finds the range when its certified cost meets the scale step's need
    (``range_found``: :func:`range_met`), else no bound (inf).  The exponential mechanism's median is
    within ``k = (2 / eps) (L + ln 10)`` ranks of the middle with probability 0.9, ``L = ln(4 n) + 2`` the
    log of the ratio between the range and the data's gaps (the scale step's allowance), so it lies between
    the ``1/2 -+ t`` quantiles, ``t = k / n``; a ``q``-quantile is within ``sqrt(q / (1 - q))`` standard
    deviations of the mean (Cantelli).  ``t >= 1/2``: no bound.

    >>> round(centre_prediction(400, True, 0.6), 4)
    2.4835
    """
    if not range_found:
        return math.inf
    t = 2.0 / median_eps * (math.log(4.0 * n) + 2.0 + math.log(10.0)) / n
    return 1.0 + (0.5 + t) / (0.5 - t) if t < 0.5 else math.inf


def range_met(plan: Plan, n: int) -> bool:
    """Whether the (single) range histogram of ``plan`` is certified at least what the scale step needs for n
    rows (:func:`dpflow.estimators.scale._column_costs`: epsilon under a pure budget, rho otherwise)."""
    from dpflow.estimators.scale import _column_costs, short_by

    pure = isinstance(plan.budget, PureDP)
    cost = next(e.event.cost for e in plan.check().entries
                if e.kind in ("LaplaceMech", "GaussianMech") and e.event is not None)
    return short_by(_column_costs(n, pure)[0], cost, pure) <= 1.0


def _no_r2(bound: str) -> str:
    return (f"{bound}; the R^2 loss is that over Var(y) and, on raw rows, depends on the coefficients' size, "
            "neither public: no bound")


class LinearRegression(Estimator):
    """Differentially private least squares with a scikit-learn surface (``fit``, ``predict``, ``score``,
    ``get_params``/``set_params`` from :class:`dpflow.estimators.base.Estimator`: it works with
    ``sklearn.base.clone``, in a ``Pipeline`` and in ``cross_val_score``; each fit spends its budget).  The
    parameters are checked when a plan is made (``fit``, :meth:`make_plan`, :meth:`predictions`), before any
    data is read: a :class:`dpflow.errors.ParameterError` names the parameter and the fix.

    Routes, chosen before any data is read by their predicted error (:meth:`predictions`: the in-sample R^2
    the fit is predicted to lose, :data:`METRIC`, with probability 0.9, from n, d, the budget and the bounds
    given; the smallest wins, :func:`dpflow.estimators.tolerance.choose_route`): ``"scaled"`` (the private
    per-column scale step, then SSP with a ridge proportional to the predicted noise of the second moment),
    ``"radius"`` (SSP on raw rows clipped at a public ``radius`` or a private one), ``"gd"`` and ``"niht"``
    (public ``x_bound`` and ``coef_bound``) and ``"intercept"`` (the intercept-only model at y's private
    median: where a hopeless fit shrinks to).  SSP on raw rows cannot bound an R^2 loss from public facts (it
    depends on Var(y) and on the coefficients' size): it predicts inf and is taken only when forced or when
    nothing predicts better, so a loose public radius never silently beats the scale step.  ``"gd"`` and
    ``"niht"`` are taken only when forced; they predict the excess risk in y's units squared
    (:data:`EXCESS_RISK`) from their bounds.  ``route=`` forces a route; ``method="gd"``/``"niht"`` force
    theirs, ``method="ssp"`` keeps to the SSP routes, ``standardize=True``/``False`` forces
    ``"scaled"``/``"radius"``.  The chosen prediction is in the ledger (with the routes compared) and in
    ``route_`` and ``predicted_error_``.  ``max_error`` (in the prediction's metric; default for R^2: 1,
    worse than predicting y's mean) is the tolerance: a prediction above it, or an infinite one, warns
    (:class:`dpflow.AccuracyWarning`, naming the rows needed); ``strict=True`` raises
    :class:`dpflow.AccuracyError` in ``fit`` before any data is read or budget spent.

    ``method``: ``"ssp"`` (sufficient-statistics perturbation, the default without ``sparsity``),
    ``"gd"`` (noisy gradient descent) or ``"niht"`` (the default with ``sparsity``).  ``accounting``:
    ``"zcdp"`` (default) or ``"paper"`` (per-iteration (eps/T, delta/T) and basic composition; needs
    an ``ApproxDP`` budget).  ``gd`` and ``niht`` need public ``x_bound`` (|x_ij| <= x_bound) and
    ``coef_bound`` (||beta||_2 <= coef_bound); every radius nobody gives is chosen privately from the
    data.  The scale step (:func:`scaled_ssp`, ``scale_weight`` of the budget, by default the share the
    data size needs) means raw-scale data need no bounds at all.  With ``fit_intercept`` a constant column
    is appended (it counts in ``sparsity`` as one more coordinate).  ``X`` may be a DataFrame (its columns'
    names are kept in ``feature_names_in_``).  After ``fit``: ``coef_``, ``intercept_``, ``plan_``, ``report_``
    (the ledger, the released values and the run settings), ``route_`` and ``predicted_error_``.

    >>> import numpy as np, dpflow as dp
    >>> rng = np.random.default_rng(1)
    >>> X = rng.normal(size=(2000, 2)); y = X @ [2.0, 0.0] + 1.0
    >>> m = LinearRegression(budget=dp.ZCDP(1.0), noise=dp.SeededNoise(0)).fit(X, y)
    >>> bool(abs(m.intercept_ - 1.0) < 0.3), bool(m.score(X, y) > 0.95)
    (True, True)
    """

    _estimator_type = "regressor"
    estimator_kind = "regressor"
    min_rows = 2
    constraints = {
        "budget": BUDGET, "sparsity": optional(positive(integer=True)), "method": one_of(None, "ssp", "gd", "niht"),
        "route": one_of(None, *ROUTES), "accounting": one_of("zcdp", "paper"), "fit_intercept": BOOLEAN,
        "max_error": optional(positive()), "strict": BOOLEAN, "standardize": one_of(None, True, False),
        "scale_weight": optional(in_range(0.0, 1.0)), "truncation_weight": in_range(0.0, 1.0),
        "iterations": optional(positive(integer=True)), "noise": NOISE,
        **{k: optional(positive()) for k in ("x_bound", "coef_bound", "response_bound", "radius")},
        **{k: Constraint(lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < math.inf,
                         "a finite number >= 0") for k in ("step", "ridge")},
    }

    def __init__(
        self,
        budget: Measure,
        sparsity: int | None = None,
        method: str | None = None,
        route: str | None = None,
        accounting: str = "zcdp",
        fit_intercept: bool = True,
        x_bound: float | None = None,
        coef_bound: float | None = None,
        response_bound: float | None = None,
        radius: float | None = None,
        iterations: int | None = None,
        step: float = 0.5,
        ridge: float = 1.0,
        truncation_weight: float = 0.1,
        standardize: bool | None = None,
        scale_weight: float | None = None,
        max_error: float | None = None,
        strict: bool = False,
        noise: Any = None,
    ) -> None:
        self.budget, self.sparsity, self.method, self.accounting = budget, sparsity, method, accounting
        self.route, self.max_error, self.strict = route, max_error, strict
        self.fit_intercept, self.x_bound, self.coef_bound = fit_intercept, x_bound, coef_bound
        self.response_bound, self.radius, self.iterations = response_bound, radius, iterations
        self.step, self.ridge, self.truncation_weight, self.noise = step, ridge, truncation_weight, noise
        self.standardize, self.scale_weight = standardize, scale_weight

    @property
    def method_(self) -> str:
        """The method in use (``method``, or its default for ``sparsity``)."""
        return self.method or ("ssp" if self.sparsity is None else "niht")

    def _check_params(self) -> None:
        """The constraints between parameters (:meth:`dpflow.estimators.base.Estimator.validate_params`)."""
        def refuse(problem: str, fix: str) -> ParameterError:
            return ParameterError("LinearRegression", problem, fix)

        if self.accounting == "paper" and not isinstance(self.budget, ApproxDP):
            raise refuse(f"accounting='paper' with {self.budget.describe()}: the paper accounting needs an "
                         "ApproxDP(epsilon, delta) budget", "pass an ApproxDP budget or accounting='zcdp'")
        if (self.method_ == "niht" or self.route == "niht") and self.sparsity is None:
            raise refuse("method='niht' needs sparsity=s", "pass sparsity=s")
        if self.method_ in ("gd", "niht") or self.route in ("gd", "niht"):
            for name in ("x_bound", "coef_bound"):
                if getattr(self, name) is None:
                    raise refuse(f"{self.route or self.method_} needs a public {name}", f"pass {name}=")
        if self.method_ in ("gd", "niht") and self.standardize:
            raise refuse("standardize=True is for method='ssp' (gd and niht take public bounds)",
                         "drop standardize= or method=")
        if self.standardize and self.radius is not None:
            raise refuse("standardize=True finds the radius privately on standardised rows", "drop radius=")
        if self.route == "intercept" and not self.fit_intercept:
            raise refuse("route='intercept' needs fit_intercept=True", "pass fit_intercept=True")
        family = self._family_route()
        ssp_only = self.method == "ssp" and self.route not in (None, "scaled", "radius")
        if self.route is not None and (ssp_only or (family is not None and self.route != family)):
            raise refuse(f"route={self.route!r} contradicts method={self.method!r}, sparsity={self.sparsity!r}, "
                         f"standardize={self.standardize!r}", "give one of them")

    def _family_route(self) -> str | None:
        """The route ``method``/``standardize`` force, if any."""
        if self.method_ in ("gd", "niht"):
            return self.method_
        if self.standardize is not None:
            return "scaled" if self.standardize else "radius"
        return None

    def _routes(self) -> tuple[str, ...]:
        """The routes this configuration may take (in :data:`ROUTES` order), the forced one alone."""
        forced = self.route or self._family_route()
        if forced is not None:
            return (forced,)
        ok = {"intercept": self.fit_intercept and self.method is None, "radius": self.radius is not None,
              "gd": False, "niht": False, "scaled": True}  # gd and niht predict in another metric: forced only
        return tuple(r for r in ROUTES if ok[r])

    def _build(self, route: str, d: int, n: int, prediction: Prediction | None = None) -> Plan:
        p = d + (1 if self.fit_intercept else 0)
        acc = "basic" if self.accounting == "paper" else "auto"
        if route == "intercept":
            return intercept_only(d, n, self.budget, prediction)
        if route == "scaled":
            return scaled_ssp(d, n, self.budget, self.fit_intercept, self.ridge, self.truncation_weight,
                              self.scale_weight, acc, prediction=prediction)
        if route == "radius":
            return sufficient_statistics(p, n, self.budget, self.radius, self.ridge, self.truncation_weight, acc,
                                         prediction=prediction)
        assert self.x_bound is not None and self.coef_bound is not None
        cx = max(self.x_bound, 1.0) if self.fit_intercept else self.x_bound
        if route == "gd":
            return noisy_gd(p, n, self.budget, cx, self.coef_bound, self.iterations, self.step,
                            self.response_bound, self.truncation_weight, acc, prediction=prediction)
        assert self.sparsity is not None
        s = min(self.sparsity + (1 if self.fit_intercept else 0), p)
        return niht(p, n, s, self.budget, cx, self.coef_bound, self.iterations, self.step,
                    self.response_bound, self.truncation_weight, acc, prediction=prediction)

    def _scale_share_ok(self, d: int, n: int) -> bool:
        """Whether the scale step gets the share it needs (public: n, d, the budget, ``scale_weight``)."""
        need, capped = auto_scale_weight(n, d + 1, self.budget)
        return not capped and (self.scale_weight is None or self.scale_weight >= need)

    def _predict(self, route: str, d: int, n: int) -> Prediction:
        """The predicted R^2 loss of ``route`` (public facts only; candidate plans are certified, not run)."""
        p = d + (1 if self.fit_intercept else 0)
        if route == "scaled":
            if not self._scale_share_ok(d, n):
                return Prediction(R2_OUTPUT, METRIC, math.inf, CONFIDENCE,
                                  f"n={n} rows are too few for the scale step of {d + 1} columns under this budget: "
                                  "its centres and scales carry no guarantee", route)
            mult = _gaussian_multiplier(self._build(route, d, n))
            value = scaled_prediction(d, n, mult, self.ridge, self.fit_intercept)
            return Prediction(R2_OUTPUT, METRIC, value, CONFIDENCE,
                              f"SSP after the scale step: noise {mult:.4g} x sqrt(2) r^2 / n per entry of the "
                              f"second moment, ridge {self.ridge:g} sqrt(p+1) x that, excess risk <= ||v||^2 / "
                              "(4 lambda) over Var(y/s), scales within sqrt(1.5) of the columns' deviations, "
                              "centres within half of one, standardised coefficients of squared norm <= 1.9 "
                              "(scaled_prediction)", route)
        if route == "intercept":
            plan = self._build(route, d, n)
            value = centre_prediction(n, range_met(plan, n), _pure_eps(plan, "Quantile"))
            return Prediction(R2_OUTPUT, METRIC, value, CONFIDENCE,
                              "the intercept-only model loses the fit's R^2 (<= 1) plus the private median's "
                              "squared distance to y's mean in deviations (centre_prediction)", route)
        if route == "radius":
            mult = _gaussian_multiplier(self._build(route, d, n))
            noise = (f"radius {self.radius:g}: noise {math.sqrt(2.0) * self.radius**2 * mult / n:.4g}"
                     if self.radius is not None else f"a private radius r: noise sqrt(2) r^2 x {mult:.4g} / n")
            return Prediction(R2_OUTPUT, METRIC, math.inf, CONFIDENCE, _no_r2(
                f"SSP on raw rows at {noise} per entry of the second moment, in y's units squared"), route)
        assert self.coef_bound is not None and self.x_bound is not None
        cx = max(self.x_bound, 1.0) if self.fit_intercept else self.x_bound
        risk = p * cx**2 * (2.0 * self.coef_bound) ** 2
        return Prediction("coef", EXCESS_RISK, risk, CONFIDENCE,
                          f"{route}: the released coefficients and, by the declared coef_bound, the fitted ones lie in "
                          f"the l2 ball of radius {self.coef_bound:g}, and |x_ij| <= {cx:g} gives M <= p x_bound^2 I: "
                          "excess risk <= p x_bound^2 (2 coef_bound)^2, whatever the noise (an R^2 loss would "
                          "need Var(y), not public)", route)

    def predictions(self, d: int, n: int) -> dict[str, Prediction]:
        """The predicted R^2 loss of every route this configuration may take, for d features and n rows (public
        facts only: no data is read, nothing is charged)."""
        self.validate_params()
        if self.sparsity is not None and self.sparsity > d:
            raise ParameterError("LinearRegression", f"sparsity s={self.sparsity} exceeds the number of features "
                                 f"d={d}", "pass sparsity <= d")
        return {r: self._predict(r, d, n) for r in self._routes()}

    def _chosen(self, d: int, n: int) -> tuple[str, Prediction]:
        preds = self.predictions(d, n)
        route = choose_route(preds, None)
        compared = ", ".join(f"{r} {v.value:.4g}" for r, v in preds.items())
        chosen = preds[route]
        why = "forced" if len(preds) == 1 else f"smallest of: {compared}"
        return route, Prediction(chosen.output, chosen.metric, chosen.value, chosen.confidence,
                                 f"{chosen.derivation}; route {route}, {why}", route)

    def make_plan(self, d: int, n: int) -> Plan:
        """The plan ``fit`` runs for ``d`` features (before the intercept column) and ``n`` rows: the route
        with the smallest predicted error (or the forced one), its prediction recorded in the ledger."""
        route, prediction = self._chosen(d, n)
        return self._build(route, d, n, prediction)

    def _rows_needed(self, d: int, n: int, tolerance: float) -> str:
        """The rows the scale-step route would need for ``tolerance`` (public), as a fix text."""
        if (self.route or self._family_route()) not in (None, "scaled", "intercept"):
            return "a larger budget, more rows, or a larger max_error"
        rho = float(gaussian_budget_rho(self.budget))

        def predict(m: int) -> float:  # the Gaussian's multiplier from the budget's rho (an estimate, for the text)
            weight, capped = auto_scale_weight(m, d + 1, self.budget)
            share = 1.0 - self.truncation_weight - (self.scale_weight or weight)
            if capped or not share > 0:
                return math.inf
            return scaled_prediction(d, m, 1.0 / math.sqrt(2.0 * rho * share), self.ridge, self.fit_intercept)

        rows = smallest_n(predict, tolerance, n)
        return (f"about {rows} rows for the scale-step route, or a larger budget" if rows is not None
                else "a larger budget") + ", or a larger max_error"

    def fit(self, X: Any, y: Any = None) -> LinearRegression:
        """Choose the route from the predictions (public: n, d, the budget, the bounds), check the tolerance
        (``strict=True`` raises here, before any data is read or budget spent), then certify and run the plan on
        ``X`` (n x d array or DataFrame) and ``y`` (n,); public shape errors raise first.  Values are read by the
        table policy (:mod:`dpflow.tables`: numeric text is its number, anything else that is not a number is
        missing).  Declared policy, the same for x and y in every method and stated in the report's ledger: a
        row with an entry that is not a finite number (missing, or +-inf) adds nothing to the moments or
        gradients the fit releases (the SSP clip sends it to the centre, the gradient step gives it a zero
        term); the private scale steps (of the scaled fit and of the intercept-only model) count such an entry
        as 0 (:func:`dpflow.estimators.scale.missing_as_zero`)."""
        from dpflow.tables import to_rows

        self.validate_params()
        if y is None:
            raise ParameterError("LinearRegression", "LinearRegression requires y to be passed, but the target y is "
                                 "None", "pass y, one response per row")
        Xa, ya = self._rows(X, reset=True), np.asarray(to_rows(y, None, "y"))
        if ya.ndim == 2 and ya.shape[1] == 1:
            ya = ya[:, 0]
        if ya.ndim != 1 or ya.shape[0] != Xa.shape[0]:
            raise ParameterError("LinearRegression", f"y must have shape ({Xa.shape[0]},) to match X {Xa.shape}, "
                                 f"got {ya.shape}", "pass one response per row")
        if ya.dtype.kind not in "biuf":
            raise ParameterError("LinearRegression", f"y must be numeric, got dtype {ya.dtype}", "pass numbers")
        n, d = Xa.shape
        route, prediction = self._chosen(d, n)
        tolerance = self.max_error if self.max_error is not None else (1.0 if prediction.metric == METRIC else None)
        fix = self._rows_needed(d, n, tolerance) if tolerance is not None and prediction.value > tolerance else ""
        enforce([prediction], tolerance, self.strict, f"LinearRegression (route {route})", fix)
        plan = self._build(route, d, n, prediction)
        Z = [Xa.astype(float)] + ([np.ones((n, 1))] if self.fit_intercept else [])
        result = plan.run({"Z": np.hstack(Z + [ya.astype(float)[:, None]])},
                          noise=self._noise())
        coef = np.asarray(result.released["coef"], dtype=float)
        self.coef_ = coef[:d]
        self.intercept_ = float(coef[d]) if self.fit_intercept else 0.0
        self.plan_, self.report_ = plan, result.report
        self.route_, self.predicted_error_ = route, prediction.value
        return self

    def predict(self, X: Any) -> np.ndarray:
        """``X @ coef_ + intercept_`` (post-processing of the released coefficients)."""
        self._require_fitted("predict")
        out: np.ndarray = self._rows(X, reset=False) @ self.coef_ + self.intercept_
        return out

    def score(self, X: Any, y: Any) -> float:
        """The coefficient of determination R^2 of ``predict(X)`` against ``y`` (as scikit-learn's);
        evaluating on held-out public data costs nothing, on the private training data it is not a
        private release."""
        from dpflow.tables import to_rows

        yt = np.asarray(to_rows(y, None, "y"), dtype=float).reshape(-1)
        resid = yt - self.predict(X)
        total = float(((yt - yt.mean()) ** 2).sum())
        return 1.0 - float(resid @ resid) / total if total > 0 else (1.0 if not resid.any() else 0.0)
