"""Heavy-tailed covariance and mean under zCDP (Kamath-Mouzakis; sparse_discrete_heavy.md 5.2; the slides
``seeds/004``): NaiveHTPCE, OneStepHTPPCE (preconditioning by confidence ellipsoids), HT_PCE, and a
heavy-tailed mean, as plans; :func:`fit` runs both.

Assumption (accuracy only; privacy never depends on it): the rows have a bounded fourth moment in every
direction, ``E[(v^T Sigma^{-1/2} (X - mu))^4] <= kurtosis`` for unit ``v`` (3 for a Gaussian; 3(nu-2)/(nu-4)
for a multivariate t with nu > 4 degrees of freedom).  ``kurtosis`` defaults to :data:`KURTOSIS`, which
covers t with nu >= 5.  The truncation radii are derived from it:

* the bias of truncating rows with ``Sigma_W <= I`` at radius gamma is at most ``kurtosis d / gamma^2``
  (Cauchy-Schwarz, then Markov on ``||W||^4``, ``E||W||^4 <= kurtosis d^2``) [RECON]: a preconditioning
  round uses the radius minimising its whole error bound (bias + noise + sampling, :func:`spectral_error`),
  and the round count is the fewest whose predicted progress covers the condition bound
  (:func:`plan_rounds`);
* the final NaivePCE balances that bias against the noise: ``gamma^2 = max(d, sqrt(kurtosis sqrt(d) n
  sqrt(rho) / 2))`` (sparse_discrete_heavy.md 5.2.1).

Every truncation is a ``Clip`` (projection onto the ball), so the second moment's replace-one Frobenius
sensitivity is ``sqrt(2) gamma^2 / n`` whatever the data and whatever the released preconditioner.

Measured limits (benchmarks/results/unbounded.md: d = 10, condition bound u = K / lower = 4000, zCDP 0.5):

* Light tails.  On t data with nu = 10 (kurtosis 4) the non-private covariance of the pair differences
  already errs 0.57x as much as CoinPress, so no estimator reaches half of CoinPress's error there.  The
  default ``kurtosis`` = 9 (which covers nu >= 5) makes the truncation radii larger than nu = 10 needs;
  declaring the true kurtosis 4 roughly halves the gap to the non-private error.
* Small n.  At n = 2e4 (1e4 pair rows) no split of the budget lets the preconditioning rounds cover u:
  each round's error bound ``s`` (:func:`spectral_error`) stays near 0.4 (sampling ``sqrt(kurtosis d / m)``
  = 0.095 plus bias and noise about 0.3).  So the predicted progress ``(1 / (2 s))^t`` is at most about 4x,
  where 1000x is needed.  The final NaiveHTPCE then runs on a range it cannot resolve, and the error in the
  small directions is large (about 37 in Mahalanobis terms).  The plan says so in an accuracy warning
  before any data is read.  Use more rows, tighter ``K`` / ``lower``, or the Gaussian CoinPress when the
  tails are light.

>>> import numpy as np, dpflow as dp
>>> X = np.random.default_rng(0).standard_t(5, size=(20000, 3)) * [3.0, 1.0, 0.3]  # variances 5/3 scale^2
>>> f = fit(X, budget=dp.ZCDP(1.0), mean_bound=10.0, cov_bound=20.0, lower=0.05, noise=dp.SeededNoise(0))
>>> np.round(np.sqrt(np.diag(f.covariance) * 3 / 5), 1)
array([2.9, 1. , 0.3])
"""

from __future__ import annotations

import math
from typing import Any, Literal

import attrs
import numpy as np

from dpflow import nodes as N
from dpflow.domains import Vectors
from dpflow.errors import DomainError
from dpflow.estimators.gaussian import steps, total_rho
from dpflow.handles import Released, Rows, Sensitive
from dpflow.nodes.postprocess import accuracy_warning, predicted_error
from dpflow.plan import Plan, PlanBuilder
from dpflow.plan.graph import require_budget
from dpflow.privacy import ZCDP, ApproxDP, ApproxZCDP, Measure
from dpflow.references import Reference

KURTOSIS = 9.0
"""Default bound on the directional fourth moment of the whitened rows: 9 = the kurtosis of a t with
nu = 5 degrees of freedom (3 for Gaussian rows; infinite for nu <= 4)."""
BETA = 0.1
"""Failure probability shared by the accuracy bounds of the rounds (never privacy)."""
ROUND_SHARE = 0.25
"""Share of the covariance budget for the preconditioning rounds (the rest: the final NaiveHTPCE); chosen by
measurement (benchmarks/unbounded.py; 0.25 beat 0.35 and 0.5 on multivariate t, d = 10, n = 1e5)."""
ErrorBound = Literal["typical", "high_probability"]
"""How a preconditioning round sizes the error ``s`` of its confidence ellipsoid (:func:`spectral_error`):
``"typical"`` (default; measured) or ``"high_probability"`` (the [RECON] w.h.p. bound: valid but needs far
more rows before a round makes progress).  Privacy is the same either way."""


def _typical(error_bound: str) -> bool:
    if error_bound not in ("typical", "high_probability"):
        raise DomainError("heavy_tailed", f"error_bound={error_bound!r}", "pass 'typical' or 'high_probability'")
    return error_bound == "typical"


def _scaled_rows(b: PlanBuilder, X: Any, n: int, d: int, s2: float, name: str,
                 unknown_mean: bool) -> tuple[int, Any, Any]:
    """The rows (pair differences when ``unknown_mean``) scaled by the public ``1/sqrt(s2)``: the number of
    rows m, the released scale matrix and the scaled rows."""
    m = n // 2 if unknown_mean else n
    scale = N.param(b, "scale", np.eye(d) / math.sqrt(s2), f"I / sqrt({name}), {name}={s2:g}")
    return m, scale, N.Precondition(matrix=scale)(N.PairDifferences()(X) if unknown_mean else X)


REF_NAIVE = Reference("Kamath-Mouzakis NaiveHTPCE (slides 004 Alg. 1): truncate, second moment, GOE noise, PSD "
                      "projection", "sparse_discrete_heavy.md", "5.2.1")
REF_STEP = Reference("Kamath-Mouzakis OneStepHTPPCE (slides 004 Alg. 2): confidence-ellipsoid preconditioning",
                     "sparse_discrete_heavy.md", "5.2.2")
REF_HTPCE = Reference("Kamath-Mouzakis HT_PCE (slides 004 Alg. 3): OneStepHTPPCE rounds then NaiveHTPCE",
                      "sparse_discrete_heavy.md", "5.2.3")
REF_MEAN = Reference("heavy-tailed mean [RECON]: coarse clipped mean, then a clipped mean around it at the radius "
                     "balancing truncation bias and noise", "sparse_discrete_heavy.md", "5.2")


def final_radius2(d: int, n: int, rho: float, kurtosis: float) -> float:
    """``gamma^2 = max(d, sqrt(kurtosis sqrt(d) n sqrt(rho) / 2))`` of the final NaiveHTPCE (bias = noise).

    >>> round(final_radius2(10, 100000, 0.5, 9.0), 3)
    1003.11
    """
    return max(float(d), math.sqrt(kurtosis * math.sqrt(d) * n * math.sqrt(rho) / 2.0))


# ------------------------------------------------------------------------------ post-processing steps


def spectral_error(gamma2: float, sigma_unit: float, n: int, d: int, kurtosis: float, beta: float,
                   typical: bool = False) -> float:
    """The bound ``s`` on ``||M - Sigma_W||_2`` of NaiveHTPCE on ``n`` rows with ``Sigma_W <= I`` truncated at
    ``gamma`` [RECON]: truncation bias ``kurtosis d / gamma^2``, plus the noise of a symmetric Gaussian
    matrix with entry scale ``sigma = sigma_unit sqrt(2) gamma^2 / n`` (``sigma (2 sqrt(d) + 2 sqrt(ln(2/beta)))``),
    plus the sampling error (matrix Bernstein with variance ``||E (YY^T)^2|| <= kurtosis d`` and
    ``||Y||^2 <= gamma^2``): ``sqrt(2 kurtosis d ln(4d/beta) / n) + gamma^2 ln(4d/beta) / (3n)``.

    ``typical``: the typical size instead of the high-probability bound: the noise's expected norm
    ``2 sigma sqrt(d)``, the sampling term ``sqrt(kurtosis d / n)``, the bias ``kurtosis / gamma^2`` (the
    Markov bound's dimension factor dropped) [RECON, chosen by measurement: benchmarks/unbounded.py].

    >>> args = (2700.0, 1.0, 10**6, 10, 9.0, 0.1)
    >>> round(spectral_error(*args), 4), round(spectral_error(*args, typical=True), 4)
    (0.1089, 0.037)
    """
    sigma = sigma_unit * math.sqrt(2.0) * gamma2 / n
    if typical:
        return kurtosis / gamma2 + 2.0 * sigma * math.sqrt(d) + math.sqrt(kurtosis * d / n)
    noise = sigma * (2.0 * math.sqrt(d) + 2.0 * math.sqrt(math.log(2.0 / beta)))
    lg = math.log(4.0 * d / beta)
    sampling = math.sqrt(2.0 * kurtosis * d * lg / n) + gamma2 * lg / (3.0 * n)
    return kurtosis * d / gamma2 + noise + sampling


def best_radius2(n: int, d: int, rho: float, kurtosis: float, beta: float, typical: bool = False) -> tuple[float,
                                                                                                      float]:
    """(gamma^2, s): the truncation radius (squared) of a preconditioning round with budget ``rho`` that
    minimises :func:`spectral_error` (over a log grid from d to 1e8 d; public quantities only), and the
    bound it gives.

    >>> g2, s = best_radius2(50000, 5, 0.05, 9.0, 0.1)
    >>> round(g2, 1), round(s, 3)
    (250.6, 0.464)
    """
    unit = 1.0 / math.sqrt(2.0 * rho) if rho > 0 else math.inf
    grid = d * np.logspace(0.0, 8.0, 161)
    errs = [spectral_error(float(g), unit, n, d, kurtosis, beta, typical) for g in grid]
    k = int(np.argmin(errs))
    return float(grid[k]), float(errs[k])


def plan_rounds(u: float, n: int, d: int, rho: float, kurtosis: float, typical: bool = False,
                max_rounds: int = 40) -> tuple[int, float, float]:
    """(t, gamma^2, s): the fewest OneStepHTPPCE rounds, sharing ``rho`` evenly, whose predicted progress
    covers ``u / 4``: a round with error bound ``s < 1/2`` multiplies the condition bound's floor
    ``lambda_min(L)`` by about ``1 / (2 s)`` (from ``L' = (M1 - s I)(M1 + s I)^{-1}`` with
    ``M1 >= lambda_min(L) + s``; the slides' Thm 3.2 takes s small enough for a factor 2), so
    ``(1 / (2 s))^t >= u / 4``.  When no count of at most ``max_rounds`` rounds gets there, the count with
    the most progress (partial preconditioning); ``t = 0`` when ``u <= 4`` or when no round can make progress
    (``s >= 1/2``: too few rows; the final NaiveHTPCE runs alone and a warning says so).

    >>> plan_rounds(1e4, 10**6, 5, 0.25, 9.0)[0], plan_rounds(1e4, 10**4, 5, 0.25, 9.0)[0]
    (6, 0)
    >>> plan_rounds(1e4, 10**4, 5, 0.25, 9.0, typical=True)[0]
    12
    """
    if u <= 4.0:
        return 0, 0.0, 0.0
    best: tuple[int, float, float] = (0, 0.0, math.inf)
    best_progress = 1.0
    for t in range(1, max_rounds + 1):
        g2, s = best_radius2(n, d, rho / t, kurtosis, BETA / t, typical)
        if not s < 0.5:
            continue
        progress = (1.0 / (2.0 * s)) ** t
        if progress >= u / 4.0:
            return t, g2, s
        if progress > best_progress:
            best, best_progress = (t, g2, s), progress
    return best


def one_step_update(state: Any, M: Any, sigma_unit: Any, gamma2: Any, n: Any, kurtosis: Any, beta: Any,
                    typical: Any = 0.0) -> np.ndarray:
    """OneStepHTPPCE's update (slides 004 Alg. 2, lines 8-17) of ``state = [A, L]`` from the released noisy
    second moment ``M`` of ``A x``: eigenvalues of M projected into ``[lambda_min(L) + s, 1 - s]`` (M1),
    ``U = M1 + s I``, ``L' = U^{-1/2} (M1 - s I) U^{-1/2}``, ``A' = U^{-1/2} A``; ``s`` by :func:`spectral_error`.
    When the interval is empty (``s > (1 - lambda_min(L)) / 2``: too few rows for progress) the state is
    kept (a public decision on released values).

    >>> st = np.stack([np.eye(2), np.eye(2) / 100])
    >>> new = one_step_update(st, np.diag([1.0, 0.01]), 0.0, 1e3, 10**9, 3.0, 0.1)
    >>> bool(np.linalg.eigvalsh(new[1]).min() > 2 / 100)
    True
    """
    S = np.asarray(state, dtype=float)
    A, L = steps._finite(S[0]), steps._finite(S[1])
    d = A.shape[0]
    s = spectral_error(float(gamma2), float(sigma_unit), int(n), d, float(kurtosis), float(beta), bool(typical))
    lmin = float(np.linalg.eigvalsh((L + L.T) / 2.0).min())
    lo, hi = lmin + s, 1.0 - s
    if not (math.isfinite(s) and lo < hi):
        return S
    Mf = steps._finite(M)
    w, V = np.linalg.eigh((Mf + Mf.T) / 2.0)
    w1 = np.clip(w, lo, hi)
    Uih = (V / np.sqrt(w1 + s)) @ V.T  # U^{-1/2}, U = M1 + s I shares M1's eigenvectors
    Lnew = (V * ((w1 - s) / (w1 + s))) @ V.T
    out: np.ndarray = np.stack([Uih @ A, (Lnew + Lnew.T) / 2.0])
    return out


def first(state: Any) -> np.ndarray:
    """``state[0]``: the preconditioner A of an ``[A, L]`` state."""
    out: np.ndarray = np.asarray(state, dtype=float)[0]
    return out


def unscale_cov(A: Any, M: Any, lower: Any) -> np.ndarray:
    """``lower * A^{-1} M A^{-T}``: the covariance back in the data's units."""
    out: np.ndarray = float(lower) * steps.unwhiten(A, M)
    return out


# ------------------------------------------------------------------------------ plan fragments


def naive_htpce(rows: Sensitive[Rows], gamma2: float | Released[Any], weight: float) -> tuple[Released[Any],
                                                                                             Released[Any]]:
    """NaiveHTPCE on mean-zero ``rows``: Clip to radius gamma (``gamma2 = gamma^2``), SecondMoment (Frobenius
    sensitivity ``sqrt(2) gamma^2 / n``), Gaussian noise.  Returns (noisy second moment, its noise multiplier)."""
    r = math.sqrt(gamma2) if isinstance(gamma2, float) else N.Apply(fn=np.sqrt, shape=())(gamma2)
    M = N.GaussianMech(weight=weight)(N.SecondMoment()(N.Clip(radius=r)(rows)))
    return M, N.noise_scale(M)


def ht_pce(rows: Sensitive[Rows], n: int, d: int, u: float, rho: float, weight: float, kurtosis: float,
           typical: bool = True, round_share: float = ROUND_SHARE) -> tuple[Released[Any], Released[Any]]:
    """HT_PCE (slides 004 Alg. 3) on ``n`` mean-zero rows with ``I <= Sigma <= u I``: ``A_0 = I / sqrt(u)``,
    ``L_0 = I / u``; :func:`plan_rounds` rounds of OneStepHTPPCE (``round_share`` of ``weight``, evenly),
    then NaiveHTPCE on ``A x`` (the rest) and ``A^{-1} M A^{-T}``.  ``rho`` is the plan's total (for the
    final radius).  Returns (covariance estimate, final preconditioner A)."""
    b = rows.builder
    t, g2, s = plan_rounds(u, n, d, rho * weight * round_share, kurtosis, typical)
    init = N.param(b, "A0_L0", np.stack([np.eye(d) / math.sqrt(u), np.eye(d) / u]),
                   f"[I / sqrt(u), I / u], u = {u:.6g} (slides 004 Alg. 3)")
    if t:
        N.param(b, "step_radius2", g2, f"plan_rounds: {t} rounds, gamma^2 minimising the error bound s = {s:.4g} "
                                       f"(kurtosis={kurtosis:g}) [RECON]")
        if (1.0 / (2.0 * s)) ** t < u / 4.0:
            accuracy_warning(b, f"HT_PCE: n={n} rows are too few to precondition the whole range u={u:.3g} "
                                f"(predicted progress {(1.0 / (2.0 * s)) ** t:.3g}x of {u / 4.0:.3g}x): the error in "
                                "the small directions may be large; use more rows or tighter K / lower")

        def body(x: Sensitive[Rows], state: Released[Any], k: Released[Any]) -> Released[Any]:
            cb = x.builder
            A = N.Apply(fn=first, shape=(d, d))(state)
            M, unit = naive_htpce(N.Precondition(matrix=A)(x), g2, weight * round_share / t)
            return N.Apply(fn=one_step_update, shape=(2, d, d))(
                state, M, unit, cb.public(g2), cb.public(float(n)), cb.public(kurtosis), cb.public(BETA / t),
                cb.public(float(typical)))

        state = N.repeat(rows, init, body, times=t)
    else:
        if u > 4.0:
            accuracy_warning(b, f"HT_PCE: n={n} rows are too few for a preconditioning round to make progress "
                                f"(error bound >= 1/4) at u={u:.3g}; the final NaiveHTPCE runs on the whole range")
        state = init
    A = N.Apply(fn=first, shape=(d, d))(state)
    w_final = weight * (1.0 - round_share) if t else weight
    if typical:
        g2f = best_radius2(n, d, rho * w_final, kurtosis, BETA, True)[0]
        why = "minimises the typical error bound (spectral_error, typical=True) at rho_final [RECON]"
    else:
        g2f = final_radius2(d, n, rho * w_final, kurtosis)
        why = "max(d, sqrt(kurtosis sqrt(d) n sqrt(rho_final) / 2)) (spec 5.2.1)"
    N.param(b, "final_radius2", g2f, why)
    M, _ = naive_htpce(N.Precondition(matrix=A)(rows), g2f, w_final)
    return N.Apply(fn=steps.unwhiten, shape=(d, d))(A, N.PSDProject()(M)), A


# ------------------------------------------------------------------------------ plans


def _check(where: str, d: int, n: int, budget: Measure, K: float, lower: float, kurtosis: float) -> float:
    require_budget(budget, where, (ZCDP, ApproxZCDP, ApproxDP))
    if d < 1 or n < 4:
        raise DomainError(where, f"d={d}, n={n}", "declare d >= 1 and n >= 4")
    if not (math.isfinite(lower) and lower > 0 and math.isfinite(K) and K >= lower):
        raise DomainError(where, f"K={K}, lower={lower}", "pass finite 0 < lower <= K (lower I <= Sigma <= K I)")
    if not (math.isfinite(kurtosis) and kurtosis >= 1.0):
        raise DomainError(where, f"kurtosis={kurtosis}", "pass a finite kurtosis >= 1 (3 for Gaussian data)")
    return float(total_rho(budget))


def naive_covariance(d: int, n: int, budget: Measure, K: float, kurtosis: float = KURTOSIS,
                     unknown_mean: bool = True) -> Plan:
    """NaiveHTPCE as a plan (slides 004 Alg. 1) for rows with ``Sigma <= K I``: rows (or pair differences)
    scaled by ``1/sqrt(K)``, truncated at the final radius, second moment + Gaussian noise, PSD projection,
    scaled back.  Source ``X``; output ``covariance``.

    >>> import dpflow as dp
    >>> naive_covariance(3, 10000, dp.ZCDP(0.5), K=4.0).check().totals[0].rho
    Fraction(1, 2)
    """
    rho = _check("heavy_tailed.naive_covariance", d, n, budget, K, K, kurtosis)
    b = PlanBuilder(budget=budget, neighbors="replace", name="naive_htpce")
    X = b.source("X", Vectors(d=d), n=n)
    N.param(b, "algorithm", 0.0, str(REF_NAIVE))
    m, scale, rows = _scaled_rows(b, X, n, d, K, "K", unknown_mean)
    g2 = final_radius2(d, m, rho, kurtosis)
    N.param(b, "radius2", g2, "max(d, sqrt(kurtosis sqrt(d) n sqrt(rho) / 2)) (spec 5.2.1)")
    M, _ = naive_htpce(rows, g2, 1.0)
    return b.build(covariance=N.Apply(fn=steps.unwhiten, shape=(d, d))(scale, N.PSDProject()(M)))


def one_step(d: int, n: int, budget: Measure, u: float, kurtosis: float = KURTOSIS) -> Plan:
    """One OneStepHTPPCE round as a plan, from ``A = I / sqrt(u)``, ``L = I / u`` on mean-zero rows with
    ``I <= Sigma <= u I``: output ``state`` = ``[A', L']`` with ``L' <= A' Sigma A' <= I`` w.h.p. and
    ``lambda_min(L') >= 2 / u`` once n is large enough (slides Thm 3.2).

    >>> import dpflow as dp
    >>> one_step(3, 10000, dp.ZCDP(0.5), u=100.0).check().totals[0].rho
    Fraction(1, 2)
    """
    _check("heavy_tailed.one_step", d, n, budget, u, 1.0, kurtosis)
    b = PlanBuilder(budget=budget, neighbors="replace", name="one_step_htppce")
    X = b.source("X", Vectors(d=d), n=n)
    N.param(b, "algorithm", 0.0, str(REF_STEP))
    st = N.param(b, "A0_L0", np.stack([np.eye(d) / math.sqrt(u), np.eye(d) / u]), f"u = {u:g}")
    g2, _ = best_radius2(n, d, float(total_rho(budget)), kurtosis, BETA)
    A = N.Apply(fn=first, shape=(d, d))(st)
    M, unit = naive_htpce(N.Precondition(matrix=A)(X), g2, 1.0)
    return b.build(state=N.Apply(fn=one_step_update, shape=(2, d, d))(
        st, M, unit, b.public(g2), b.public(float(n)), b.public(kurtosis), b.public(BETA)))


def covariance(d: int, n: int, budget: Measure, K: float, lower: float = 1.0, kurtosis: float = KURTOSIS,
               unknown_mean: bool = True, error_bound: ErrorBound = "typical") -> Plan:
    """HT_PCE as a plan for rows with ``lower I <= Sigma <= K I`` and directional kurtosis ``<= kurtosis``:
    rows (pair differences when ``unknown_mean``) scaled by ``1/sqrt(lower)`` (public), HT_PCE with
    ``u = K / lower``, scaled back.  Source ``X``; output ``covariance``.

    >>> import dpflow as dp
    >>> covariance(3, 10000, dp.ZCDP(0.5), K=100.0).check().totals[0].rho
    Fraction(1, 2)
    """
    rho = _check("heavy_tailed.covariance", d, n, budget, K, lower, kurtosis)
    b = PlanBuilder(budget=budget, neighbors="replace", name="ht_pce")
    X = b.source("X", Vectors(d=d), n=n)
    N.param(b, "algorithm", 0.0, str(REF_HTPCE))
    m, scale, rows = _scaled_rows(b, X, n, d, lower, "lower", unknown_mean)
    cov, _ = ht_pce(rows, m, d, K / lower, rho, 1.0, kurtosis, _typical(error_bound))
    return b.build(covariance=N.Apply(fn=steps.unwhiten, shape=(d, d))(scale, cov))


CONFIDENCE = 0.9
"""The confidence of the predicted errors (each of the four terms of the mean's prediction, and the
covariance's, fails with probability at most (1 - CONFIDENCE) / 4)."""


def tail_bias(r: float, d: int, v: float, kurtosis: float) -> float:
    """A bound on the norm of the bias of clipping rows with covariance ``<= v I`` and directional kurtosis
    ``<= kurtosis`` onto the ball of radius ``r`` about their mean: ``E[(||w|| - r)_+]`` with
    ``E||w||^2 <= v d`` and ``E||w||^4 <= kurtosis v^2 d^2`` (Minkowski), so at most
    ``min(kurtosis v^2 d^2 / r^3, sqrt(kurtosis) v^1.5 d^1.5 / r^2)`` (Markov on ``||w||^4``; Cauchy-Schwarz
    then Markov) [RECON]; infinite when ``r <= 0``.

    >>> round(tail_bias(60.0, 10, 1.0, 9.0), 5)
    0.00417
    """
    if not r > 0:
        return math.inf
    return float(min(kurtosis * v * v * d * d / r**3, math.sqrt(kurtosis) * (v * d) ** 1.5 / r**2))


def _chi(d: int) -> float:
    """``sqrt`` of the chi-square quantile with d degrees of freedom at one term's confidence."""
    from scipy import stats
    return math.sqrt(float(stats.chi2.ppf(1.0 - (1.0 - CONFIDENCE) / 4, d)))


def mean_radii(n: int, d: int, R: float, v: float, rho1: float, rho2: float, kurtosis: float,
               v_true: float | None = None) -> tuple[float, float, float]:
    """(r1, r2, err): the radii of the two clipped means of :func:`mean_part` for ``n`` rows with covariance
    ``<= v I`` and ``||mu|| <= R``, and the predicted l2 error of the second, from public inputs only.

    The coarse mean clips about 0 at ``r1 = R + sqrt(v d / 0.05)`` (Chebyshev keeps 95% of the rows inside);
    its error ``e1`` is its tail bias (:func:`tail_bias` at ``r1 - R``) plus its Gaussian noise (l2
    sensitivity ``2 r1 / n`` under replace, sigma ``2 r1 / (n sqrt(2 rho1))``, l2 norm at
    ``sqrt(chi2_d)``) plus the sampling error ``sqrt(v chi2_d / n)`` (the central limit theorem).  The second
    clips about the coarse mean at the ``r2`` (a log grid) minimising the same three terms with the tail bias
    at ``r2 - e1``: with the fourth moment bounded, the bias falls as ``r^-3`` where Chebyshev's ``trace / r``
    fell as ``r^-1``, so ``r2`` is a few times the rows' typical norm instead of hundreds (measured:
    multivariate t5, d = 10, n = 1e5) [RECON].  ``v_true``: the error at those radii when the rows'
    covariance is in fact at most ``v_true I`` (default ``v``).

    >>> r1, r2, err = mean_radii(100_000, 10, 8.0, 2.0, 0.05, 0.15, 9.0)
    >>> round(r1, 2), 10 < r2 < 100, round(err, 4)
    (28.0, True, 0.0401)
    """
    chi = _chi(d)
    base = math.sqrt(v * d / 0.05)
    r1 = R + base
    noise = 2.0 / (n * math.sqrt(2.0 * rho1)) if rho1 > 0 else math.inf
    sampling = math.sqrt(v / n) * chi
    e1 = tail_bias(base, d, v, kurtosis) + noise * r1 * chi + sampling
    grid = e1 + math.sqrt(v * d) * np.geomspace(0.1, 1e4, 241)
    sigma2 = 2.0 / (n * math.sqrt(2.0 * rho2)) if rho2 > 0 else math.inf
    errs = [tail_bias(float(r) - e1, d, v, kurtosis) + sigma2 * float(r) * chi + sampling for r in grid]
    r2 = float(grid[int(np.argmin(errs))])
    vt = v if v_true is None else v_true
    e1t = tail_bias(r1 - R, d, vt, kurtosis) + noise * r1 * chi + math.sqrt(vt / n) * chi
    return r1, r2, tail_bias(r2 - e1t, d, vt, kurtosis) + sigma2 * r2 * chi + math.sqrt(vt / n) * chi


def mean_part(X: Sensitive[Rows], n: int, d: int, R: Released[Any] | float, trace: float, weight: float,
              rho: float, R_public: float | None = None, kurtosis: float = KURTOSIS) -> tuple[Released[Any], float]:
    """Heavy-tailed mean of ``n`` rows with ``||mu|| <= R`` and ``E||x - mu||^2 <= trace`` (covariance at most
    ``trace / d`` times I): a coarse clipped mean around 0 at radius ``R + sqrt(trace / 0.05)`` (1/4 of
    ``weight``), then a clipped mean around it at the radius of :func:`mean_radii` (the rest).  ``R`` may be
    released (the plan's whitened bound); ``R_public`` is its public proxy for choosing the second radius
    (default ``R``).  Returns the mean and its predicted l2 error (:func:`mean_radii`)."""
    b = X.builder
    v = trace / d
    base = math.sqrt(trace / 0.05)
    R_pub = float(R) if R_public is None and not isinstance(R, Released) else float(R_public or 0.0)
    rho1, rho2 = rho * weight / 4, rho * weight * 3 / 4
    _, r2, err = mean_radii(n, d, R_pub, v, rho1, rho2, kurtosis)
    r1 = N.Apply(fn=_plus, shape=())(R if isinstance(R, Released) else b.public(R), b.public(base))
    c1 = N.GaussianMech(weight=weight / 4)(N.Mean()(N.Clip(radius=r1)(X)))
    N.param(b, "mean_radius", r2, f"minimises the predicted error (mean_radii: tail bias from kurtosis={kurtosis:g} "
                                  "+ noise + sampling, around the coarse mean) [RECON]")
    return N.GaussianMech(weight=weight * 3 / 4)(N.Mean()(N.Clip(radius=r2, center=c1)(X))), err


def _plus(a: Any, b: Any) -> float:
    return float(a) + float(b)


def mean(d: int, n: int, budget: Measure, R: float, K: float) -> Plan:
    """Heavy-tailed mean as a plan for rows with ``||mu|| <= R`` and ``Sigma <= K I`` (only the second moment
    is used): :func:`mean_part` with ``trace = K d``.  Source ``X``; output ``mean``.

    >>> import dpflow as dp
    >>> mean(3, 10000, dp.ZCDP(0.5), R=10.0, K=4.0).check().totals[0].rho
    Fraction(1, 2)
    """
    rho = _check("heavy_tailed.mean", d, n, budget, K, K, KURTOSIS)
    if not (math.isfinite(R) and R >= 0):
        raise DomainError("heavy_tailed.mean", f"R={R}", "pass a finite R >= 0")
    b = PlanBuilder(budget=budget, neighbors="replace", name="ht_mean")
    X = b.source("X", Vectors(d=d), n=n)
    N.param(b, "algorithm", 0.0, str(REF_MEAN))
    mu, err = mean_part(X, n, d, R, K * d, 1.0, rho)
    predicted_error(b, "mean", "l2", err, CONFIDENCE, "tail bias + noise + sampling (mean_radii)", "clipped")
    return b.build(mean=mu)


def covariance_error(m: int, d: int, u: float, rho: float, kurtosis: float, typical: bool,
                     round_share: float = ROUND_SHARE) -> float:
    """The predicted relative spectral error ``||Sigma^{-1/2} Sigma_hat Sigma^{-1/2} - I||_2`` of
    :func:`ht_pce` on ``m`` rows with ``I <= Sigma <= u I`` under ``rho`` (public inputs only) [RECON]:
    the final NaiveHTPCE's typical error ``s`` (:func:`spectral_error` with ``typical=True``: the w.h.p. bound's
    Markov and union factors made it 20 to 40 times the measured error) on the preconditioned rows ``A x``
    divided by the predicted floor of
    ``A Sigma A^T``: ``1 / u`` without rounds, else ``min(1 - 2 s_r, (1 / (2 s_r))^t / u)`` after the ``t``
    rounds of :func:`plan_rounds` with error ``s_r`` each.  Infinite when the floor is not positive.
    Conservative: measured on multivariate t5 (d = 10, m = 5e4, u = 2000, rho 0.25) 0.06 to 0.08 against
    a prediction of about 0.5 (the floor is a worst case over directions).

    >>> round(covariance_error(50_000, 10, 20.0, 0.25, 9.0, True), 3)
    0.478
    """
    t, g2, s_r = plan_rounds(u, m, d, rho * round_share, kurtosis, typical)
    floor = 1.0 / u if not t else min(1.0 - 2.0 * s_r, (1.0 / (2.0 * s_r)) ** t / u)
    rho_f = rho * (1.0 - round_share) if t else rho
    g2f = best_radius2(m, d, rho_f, kurtosis, BETA, True)[0] if typical else final_radius2(d, m, rho_f, kurtosis)
    s_f = spectral_error(g2f, 1.0 / math.sqrt(2.0 * rho_f), m, d, kurtosis, (1.0 - CONFIDENCE) / 4, True)
    return s_f / floor if floor > 0 else math.inf


def predicted_errors(n: int, d: int, rho: float, R: float, K: float, lower: float, kurtosis: float, split: float,
                     typical: bool) -> tuple[float, float]:
    """(covariance, mean): the predicted relative spectral error of the covariance (:func:`covariance_error`)
    and Mahalanobis error of the mean of :func:`plan`'s estimation under ``rho`` (its share after any scale
    step), from public inputs only (:func:`plan` makes both infinite when the scale step's share was capped:
    its units are then unreliable).  The mean's rows are whitened by the released covariance, so their
    covariance is at most ``I / (1 - e_c)`` and the Mahalanobis error is ``sqrt(1 + e_c)`` times the whitened
    one (:func:`mean_radii`); never more than ``2 R / sqrt(lower)`` (the mean is clamped into its ball).

    >>> [round(x, 3) for x in predicted_errors(100_000, 10, 0.49, 12.65, 20.0, 0.01, 9.0, 0.5, True)]
    [0.516, 0.048]
    """
    e_c = covariance_error(n // 2, d, K / lower, rho * split, kurtosis, typical)
    clamp = 2.0 * R / math.sqrt(lower)
    if not e_c < 1.0:
        return e_c, clamp
    _, _, e_w = mean_radii(n, d, R / math.sqrt(lower), 2.0, rho * (1 - split) / 4, rho * (1 - split) * 3 / 4,
                           kurtosis, 1.0 / (1.0 - e_c))
    return e_c, min(e_w * math.sqrt(1.0 + e_c), clamp)


ROUTES = ("clipped",)
"""The routes of :func:`plan`: ``"clipped"`` (HT_PCE, then the two-step clipped mean of the whitened rows).
A median-of-means route does not exist in dpflow; the Gaussian route is :func:`dpflow.estimators.gaussian.fit`
(its truncation assumes Gaussian tails, so its error on heavy tails has no prediction here)."""

SCALED_R_PER_COORD, SCALED_K_PER_COORD = 4.0, 2.0
"""Without bounds the rows are standardised by the private scale step and the public bounds are
``R = 4 sqrt(d)`` and ``K = 2 d`` in units of the released scales (as
:func:`dpflow.estimators.gaussian.scaled_gaussian`)."""


SCALED_LOWER = 0.01
"""The default ``lower`` without bounds, in units of the released scales: standardised columns can be strongly
correlated, and a floor below the truth only costs rounds.  Measured (multivariate t5, d = 10, n = 1e5, zCDP 0.5,
a rotated spectrum with scales 1 to 10, 3 seeds): lower = 1 lost the covariance in one seed (relative error 1.0,
the mean 1800 times the non-private error); 0.1 gave 0.14 to 0.21 and 0.01 gave 0.07 to 0.08 (isotropic
rows: 0.06)."""


def plan(d: int, n: int, budget: Measure, R: float | None = None, K: float | None = None, lower: float | None = None,
         kurtosis: float = KURTOSIS, split: float = 0.5, error_bound: ErrorBound = "typical",
         route: str | None = None) -> Plan:
    """Covariance (HT_PCE on the pair differences, ``split`` of the budget) and mean (rows whitened by the
    released HT_PCE preconditioner, :func:`mean_part` with trace ``2 d`` in whitened units, the rest), both
    reading every record: sequential composition.  Outputs ``mean``, ``covariance``.

    With neither ``R`` nor ``K`` the private per-column scale step runs first in the same plan
    (:func:`dpflow.estimators.scale.column_scales`, its share by :func:`dpflow.estimators.scale.scale_weight`),
    the rows are standardised by the released centre and scale, the bounds are ``R = 4 sqrt(d)``,
    ``K = 2 d`` and ``lower`` (default :data:`SCALED_LOWER`; 1 with bounds) in units of the released scales,
    and the estimates are mapped back (outputs also ``centre`` and ``scale``).

    Before data, the plan records its predicted errors at :data:`CONFIDENCE` (``Ledger.predictions``): the
    mean's Mahalanobis error ``||Sigma^{-1/2} (mu_hat - mu)||`` (:func:`mean_radii`, the whitening's error from
    :func:`covariance_error`; with bounds also its l2 error), and the covariance's relative spectral error
    (:func:`covariance_error`).  The mean is projected onto its ball ``||mu|| <= R`` (in standardised units
    without bounds): post-processing, named in the ledger.

    >>> import dpflow as dp
    >>> plan(3, 10000, dp.ZCDP(0.5), R=10.0, K=100.0).check().totals[0].rho
    Fraction(1, 2)
    >>> [p.output for p in plan(3, 10000, dp.ZCDP(0.5)).check().predictions]
    ['covariance', 'mean']
    """
    from dpflow.estimators.gaussian import unscale_covariance
    from dpflow.estimators.scale import column_scales, scale_weight, standardize, unstandardize, warn_if_capped
    from dpflow.estimators.tolerance import choose_route
    from dpflow.planner.accuracy import Prediction

    where = "heavy_tailed.plan"
    if (R is None) != (K is None):
        raise DomainError(where, "only one of R (mean_bound) and K (cov_bound) was given",
                          "pass both bounds, or neither (the private scale step then runs first)")
    scaled = R is None or K is None
    R_ = SCALED_R_PER_COORD * math.sqrt(d) if R is None else float(R)
    K_ = SCALED_K_PER_COORD * d if K is None else float(K)
    lower = (SCALED_LOWER if scaled else 1.0) if lower is None else float(lower)
    rho = _check(where, d, n, budget, K_, lower, kurtosis)
    if not (math.isfinite(R_) and R_ >= 0 and 0 < split < 1):
        raise DomainError(where, f"R={R_}, split={split}", "pass a finite R >= 0 and 0 < split < 1")
    w_scale, capped = scale_weight(n, d, budget) if scaled else (0.0, False)
    rest = 1.0 - w_scale
    typical = _typical(error_bound)
    b = PlanBuilder(budget=budget, neighbors="replace", name="heavy_tailed")
    X = b.source("X", Vectors(d=d), n=n)
    N.param(b, "algorithm", 0.0, f"{REF_HTPCE}; {REF_MEAN}" + ("; after the private scale step" if scaled else ""))
    units = "in units of the released column scales" if scaled else "in the data's units"
    # predictions before data (public inputs only)
    e_c, maha = predicted_errors(n, d, rho * rest, R_, K_, lower, kurtosis, split, typical)
    if capped:  # the scale step is unreliable at this n: its units, and so every prediction, are not bounded
        e_c = maha = math.inf
        units += f" (unreliable: n={n} is too few for the scale step of {d} columns under this budget)"
    why = (f"the assumptions: ||mu|| <= {R_:.6g}, {lower:.6g} I <= Sigma <= {K_:.6g} I {units}, directional "
           f"kurtosis <= {kurtosis:g}")
    routes = {"clipped": Prediction("mean", "mahalanobis", maha, CONFIDENCE,
                                    f"two-step clipped mean (mean_radii: tail bias + noise + sampling) of rows "
                                    f"whitened by the released covariance (relative error {e_c:.3g}), at most the "
                                    f"clamp's 2R / sqrt(lower); {why}; routes compared: clipped (median-of-means "
                                    "does not exist in dpflow)", "clipped")}
    chosen = choose_route(routes, route)
    if scaled:
        warn_if_capped(b, n, d, capped)
        centre, scale = column_scales(X, d, w_scale)
        X = standardize(X, centre, scale, d)
    sc = N.param(b, "scale", np.eye(d) / math.sqrt(lower), f"I / sqrt(lower), lower={lower:g}")
    cov_s, A = ht_pce(N.Precondition(matrix=sc)(N.PairDifferences()(X)), n // 2, d, K_ / lower, rho, split * rest,
                      kurtosis, typical)
    cov = N.Apply(fn=steps.unwhiten, shape=(d, d))(sc, cov_s)
    W = N.Apply(fn=steps.inv_sqrt_psd, shape=(d, d))(cov)  # whitening by the released covariance
    mu_w, _ = mean_part(N.Precondition(matrix=W)(X), n, d, N.Apply(fn=steps.scaled_norm, shape=())(W, b.public(R_)),
                        float(d) * 2.0, (1.0 - split) * rest, rho, R_ / math.sqrt(lower), kurtosis)
    N.param(b, "mean_clamp", R_, f"post-processing: the mean projected onto its public ball ||mu|| <= R {units}")
    mean = N.Apply(fn=steps.into_ball, shape=(d,))(N.Apply(fn=steps.unmap_mean, shape=(d,))(W, mu_w), b.public(R_))
    p = routes[chosen]
    predicted_error(b, "covariance", "relative spectral", e_c, CONFIDENCE,
                    f"covariance_error: the final NaiveHTPCE's bound over the predicted floor of the preconditioned "
                    f"covariance; {why}", chosen)
    predicted_error(b, "mean", p.metric, p.value, p.confidence, p.derivation, chosen)
    if not scaled:
        predicted_error(b, "mean", "l2", min(maha * math.sqrt(K_ * (1.0 + e_c)), 2.0 * R_), CONFIDENCE,
                        "sqrt(||Sigma_hat||) times the Mahalanobis prediction, at most 2R (the clamp)", chosen)
        return b.build(mean=mean, covariance=cov)
    return b.build(mean=N.Apply(fn=unstandardize, shape=(d,))(mean, centre, scale),
                   covariance=N.Apply(fn=unscale_covariance, shape=(d, d))(cov, scale), centre=centre, scale=scale)


@attrs.frozen(eq=False)
class Fit:
    """What :func:`fit` returns: the estimates, the report and the plan (``centre``, ``scale``: the scale
    step's release when no bounds were given)."""

    mean: np.ndarray
    covariance: np.ndarray
    report: Any
    plan: Plan
    centre: np.ndarray | None = None
    scale: np.ndarray | None = None


def fit(X: Any, budget: Measure, mean_bound: float | None = None, cov_bound: float | None = None,
        lower: float | None = None, kurtosis: float = KURTOSIS, split: float = 0.5, noise: Any = None,
        error_bound: ErrorBound = "typical", max_error: float | None = None, strict: bool = False,
        route: str | None = None) -> Fit:
    """Private mean and covariance of heavy-tailed rows ``X`` (n x d, or a DataFrame) with
    ``||mu|| <= mean_bound``, ``lower I <= Sigma <= cov_bound I`` and directional kurtosis at most ``kurtosis``
    (default :data:`KURTOSIS` = 9, a t with 5 degrees of freedom): :func:`plan`.  With neither bound the
    private per-column scale step runs first inside the same plan and budget (``lower`` is then in units of
    the released scales).  ``noise`` defaults to OS entropy.

    Before any data is read the predicted errors (:func:`plan`, ``Ledger.predictions``) are checked
    (:func:`dpflow.estimators.tolerance.enforce`) against ``max_error`` (default: the data's own spread,
    ``sqrt(d)`` for the mean's Mahalanobis error and 1 for the covariance's relative error): above it an
    :class:`dpflow.errors.AccuracyWarning`, or with ``strict=True`` an :class:`dpflow.errors.AccuracyError`
    before anything is read or charged.  ``route`` forces a route of :data:`ROUTES`.

    >>> import numpy as np, dpflow as dp
    >>> X = np.random.default_rng(1).standard_t(6, size=(20000, 2)) + 100.0
    >>> f = fit(X, budget=dp.ZCDP(1.0), mean_bound=1e3, cov_bound=10.0, noise=dp.SeededNoise(0))
    >>> bool(np.all(np.abs(f.mean - 100.0) < 0.1))
    True
    >>> f = fit(X * 1e4, budget=dp.ZCDP(1.0), noise=dp.SeededNoise(0))
    >>> bool(np.all(np.abs(f.mean / 1e4 - 100.0) < 0.1))
    True
    """
    from dpflow.estimators.tolerance import enforce, smallest_n
    from dpflow.tables import to_rows

    X = to_rows(X, None, "heavy_tailed.fit")
    shape = np.shape(X)
    if len(shape) != 2:
        raise DomainError("heavy_tailed.fit", f"X has shape {shape}", "pass an (n, d) array")
    n, d = shape

    p = plan(d, n, budget, mean_bound, cov_bound, lower, kurtosis, split, error_bound, route)
    scaled = mean_bound is None
    R_ = SCALED_R_PER_COORD * math.sqrt(d) if mean_bound is None else float(mean_bound)
    K_ = SCALED_K_PER_COORD * d if cov_bound is None else float(cov_bound)
    low = (SCALED_LOWER if scaled else 1.0) if lower is None else float(lower)
    rho = float(total_rho(budget))
    for q in [q for q in p.check().predictions if q.metric != "l2"]:
        tol = max_error if max_error is not None else (math.sqrt(d) if q.output == "mean" else 1.0)

        def predict(rows: int, k: int = 1 if q.output == "mean" else 0) -> float:
            from dpflow.estimators.scale import scale_weight

            w, capped = scale_weight(rows, d, budget) if scaled else (0.0, False)
            if capped:
                return math.inf
            return predicted_errors(rows, d, rho * (1.0 - w), R_, K_, low, kurtosis, split, _typical(error_bound))[k]

        if q.value > tol or math.isinf(q.value):
            need = smallest_n(predict, tol, n)
            fix = (f"about {need} rows would bring it under {tol:.3g}" if need else "no number of rows does") + \
                ", or a larger budget, or tighter bounds"
        else:
            fix = ""
        enforce([q], tol, strict, "heavy_tailed.fit", fix)
    res = p.run({"X": X}, noise=noise)
    rel = res.released
    centre = np.asarray(rel["centre"], dtype=float) if "centre" in rel else None
    scale = np.asarray(rel["scale"], dtype=float) if "scale" in rel else None
    return Fit(np.asarray(rel["mean"]), np.asarray(rel["covariance"]), res.report, p, centre, scale)


__all__ = ["CONFIDENCE", "KURTOSIS", "ROUTES", "SCALED_LOWER", "Fit", "covariance", "covariance_error", "fit", "mean",
           "mean_radii", "naive_covariance", "one_step", "plan", "predicted_errors", "tail_bias"]
