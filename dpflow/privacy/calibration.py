"""Noise calibration and budget inversion, rounded against the user.

Noise scales are rounded UP and checked against the forward privacy map (exactly, with Fractions,
whenever the map is rational); "largest budget that fits" answers are rounded DOWN and checked
against the forward conversion.  Checks use the same public functions other code uses, so a
calibrated value always realises at most its budget under dpflow's own accounting.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction

from .composition import advanced_composition
from .conversions import (
    bounded_range_to_zcdp,
    gaussian_dp_delta,
    gaussian_dp_epsilon,
    gdp_mu_of_mu2,
    pure_to_zcdp,
    zcdp_to_approx_dp,
)
from .measures import ZCDP, ApproxDP, ApproxZCDP, Measure, exact
from .rounding import down, to_float_down, to_float_up, up

__all__ = [
    "analytic_gaussian_sigma",
    "approx_zcdp_rho_for_approx_dp",
    "bounded_range_eps_for_zcdp",
    "classical_gaussian_sigma",
    "gaussian_budget_rho",
    "gaussian_sigma_for_zcdp",
    "gdp_mu_for_approx_dp",
    "laplace_scale",
    "largest_on_grid",
    "pure_dp_of_laplace",
    "pure_eps_for_approx_dp_advanced",
    "pure_eps_for_zcdp",
    "shares_by_weight",
    "zcdp_of_gaussian",
    "zcdp_rho_for_approx_dp",
]

Real = float | Fraction


def _delta_in_open_unit(delta: Real) -> float:
    d = exact(delta)
    if not 0 < d < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    return to_float_down(d)


def _nudge_until(ok: Callable[[float], bool], x: float, step: Callable[[float], float]) -> float:
    """Apply ``step`` (up or down) until ``ok`` holds; the steps compound, so this terminates fast."""
    for _ in range(10_000):
        if ok(x):
            return x
        x = step(x)
    raise ArithmeticError("calibration could not be verified")  # pragma: no cover


def _largest_valid(ok: Callable[[float], bool], lo: float, hi: float, rel_tol: float = 1e-14) -> float:
    """Bisection for the largest x in [lo, hi] with ok(x), given ok(lo) and not ok(hi); returns a valid x."""
    while hi - lo > rel_tol * hi:
        mid = lo + (hi - lo) / 2.0
        if mid <= lo or mid >= hi:
            break
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _bracket(ok: Callable[[float], bool], start: float = 1.0) -> tuple[float, float]:
    """(lo, hi) with ok(lo) and not ok(hi), hi <= 2 lo, by doubling or halving from ``start``.

    ``ok`` must be monotone (true on an initial segment) and ok(0.0) is assumed; if halving
    underflows, lo = 0.0 is returned.
    """
    if ok(start):
        lo, hi = start, 2.0 * start
        while ok(hi):
            lo, hi = hi, 2.0 * hi
            if math.isinf(hi):  # pragma: no cover - every budget here is finite
                raise ArithmeticError("no finite upper bracket")
        return lo, hi
    lo, hi = start / 2.0, start
    while lo > 0.0 and not ok(lo):
        lo, hi = lo / 2.0, lo
    return lo, hi


# ----------------------------------------------------------------------------------------------
# Gaussian mechanism


def zcdp_of_gaussian(sensitivity: Real, sigma: Real) -> Fraction:
    """The exact zCDP of the Gaussian mechanism: rho = Delta^2 / (2 sigma^2), as a Fraction.

    Sensitivity 0 gives 0 for any sigma; sigma = 0 with positive sensitivity raises ``ValueError``.

    Source: Bun & Steinke 2016, "Concentrated Differential Privacy", Prop. 1.6 (the discrete
    Gaussian has the same rho: Canonne, Kamath & Steinke 2020, Thm. 4).

    >>> zcdp_of_gaussian(1.0, 1.0)
    Fraction(1, 2)
    """
    s = exact(sensitivity)
    sig = exact(sigma)
    if s == 0:
        return Fraction(0)
    if sig == 0:
        raise ValueError("sigma must be positive when the sensitivity is positive")
    return s * s / (2 * sig * sig)


def gaussian_sigma_for_zcdp(sensitivity: Real, rho: Real) -> float:
    """sigma = Delta / sqrt(2 rho), rounded up so that ``zcdp_of_gaussian(Delta, sigma) <= rho`` exactly.

    Sensitivity 0 gives 0.0; rho = 0 with positive sensitivity raises ``ValueError``; a sigma beyond the float
    range is ``inf`` (the planner refuses a constant sensitivity there: ``planner.accuracy``).

    Source: Bun & Steinke 2016, Prop. 1.6.

    >>> sigma = gaussian_sigma_for_zcdp(1.0, 0.5)
    >>> round(sigma, 9), zcdp_of_gaussian(1.0, sigma) <= Fraction(1, 2)
    (1.0, True)
    """
    s = exact(sensitivity)
    r = exact(rho)
    if s == 0:
        return 0.0
    if r == 0:
        raise ValueError("rho must be positive when the sensitivity is positive")
    sigma = up(to_float_up(s) / math.sqrt(2.0 * to_float_down(r)))
    if sigma == math.inf:  # Delta / sqrt(2 rho) beyond the float range: infinite noise, rho-zCDP for every rho
        return sigma
    return _nudge_until(lambda x: zcdp_of_gaussian(s, x) <= r, sigma, up)


def gdp_mu_for_approx_dp(epsilon: Real, delta: Real) -> float:
    """The largest mu with mu-GDP implying (epsilon, delta)-DP, rounded down and verified.

    Solves ``gaussian_dp_delta(mu, epsilon) = delta`` with ``scipy.optimize.brentq`` in log space,
    then rounds down until ``gaussian_dp_delta(mu, epsilon) <= delta`` holds.  Calibrates
    all-Gaussian plans against an (epsilon, delta) budget: sigma = Delta / mu reproduces
    :func:`analytic_gaussian_sigma`.

    Source: Dong, Roth & Su 2022, "Gaussian Differential Privacy", Cor. 2.13; Balle & Wang 2018,
    "Improving the Gaussian Mechanism for Differential Privacy", Thm. 8.

    >>> round(1 / gdp_mu_for_approx_dp(1.0, 1e-5), 6)
    3.730632
    """
    eps = exact(epsilon)
    d = _delta_in_open_unit(delta)

    def ok(mu: float) -> bool:
        return gaussian_dp_delta(mu, eps) <= d

    lo, hi = _bracket(ok)
    if lo == 0.0:  # pragma: no cover - only for delta near the smallest subnormal
        return 0.0
    from scipy import optimize  # imported when used, not with dpflow (import time)

    log_d = math.log(d)
    root = optimize.brentq(
        lambda mu: math.log(gaussian_dp_delta(mu, eps)) - log_d, lo, hi, xtol=1e-15, rtol=1e-15, maxiter=500
    )
    return _nudge_until(ok, max(lo, down(float(root))), down)


def analytic_gaussian_sigma(epsilon: Real, delta: Real, sensitivity: Real = 1.0) -> float:
    """The smallest sigma for which the Gaussian mechanism is (epsilon, delta)-DP; rounded up and verified.

    Balle & Wang's exact condition Phi(Delta/(2 sigma) - eps sigma/Delta) - e^eps Phi(-Delta/(2 sigma)
    - eps sigma/Delta) <= delta is the mu-GDP profile at mu = Delta/sigma, solved in log space
    (``brentq`` on ln delta, :func:`gdp_mu_for_approx_dp`); sigma is then rounded up until the
    profile at an upward-rounded Delta/sigma is <= delta.

    Source: Balle & Wang, ICML 2018, "Improving the Gaussian Mechanism for Differential
    Privacy", Thm. 8 and Alg. 1.

    >>> round(analytic_gaussian_sigma(1.0, 1e-5, 1.0), 6)
    3.730632
    """
    s = exact(sensitivity)
    eps = exact(epsilon)
    d = _delta_in_open_unit(delta)
    if s == 0:
        return 0.0
    mu = gdp_mu_for_approx_dp(eps, d)
    sigma = up(to_float_up(s) / mu)
    return _nudge_until(lambda x: gaussian_dp_delta(to_float_up(s / Fraction(x)), eps) <= d, sigma, up)


def classical_gaussian_sigma(epsilon: Real, delta: Real, sensitivity: Real = 1.0) -> float:
    """Classical calibration sigma = Delta sqrt(2 ln(1.25/delta)) / epsilon, rounded up; epsilon in (0, 1).

    Raises ``ValueError`` for epsilon >= 1, where the theorem does not apply (and the formula is
    actually wrong for large epsilon, e.g. epsilon = 8.5, delta = 1e-5): use
    :func:`analytic_gaussian_sigma`, which is also smaller for every epsilon.  Rounding up makes
    the theorem's strict inequality c^2 > 2 ln(1.25/delta) hold.

    Source: Dwork & Roth 2014, "The Algorithmic Foundations of Differential Privacy", Thm. A.1.

    >>> round(classical_gaussian_sigma(0.5, 1e-5, 1.0), 6)
    9.689611
    """
    e = exact(epsilon)
    s = exact(sensitivity)
    d = _delta_in_open_unit(delta)
    if not 0 < e < 1:
        raise ValueError(
            f"the classical Gaussian calibration (Dwork & Roth Thm. A.1) needs 0 < epsilon < 1, got "
            f"epsilon={float(e)!r}; use analytic_gaussian_sigma (Balle & Wang 2018) instead"
        )
    if s == 0:
        return 0.0
    return up(to_float_up(s) * math.sqrt(2.0 * math.log(1.25 / d)) / to_float_down(e))


# ----------------------------------------------------------------------------------------------
# Laplace mechanism


def pure_dp_of_laplace(sensitivity: Real, scale: Real) -> Fraction:
    """The exact pure-DP epsilon of the Laplace mechanism: epsilon = Delta / b, as a Fraction.

    Sensitivity 0 gives 0 for any scale; scale 0 with positive sensitivity raises ``ValueError``.

    Source: Dwork, McSherry, Nissim & Smith 2006; Dwork & Roth 2014, Thm. 3.6.

    >>> pure_dp_of_laplace(1.0, 2.0)
    Fraction(1, 2)
    """
    s = exact(sensitivity)
    b = exact(scale)
    if s == 0:
        return Fraction(0)
    if b == 0:
        raise ValueError("the Laplace scale must be positive when the sensitivity is positive")
    return s / b


def laplace_scale(sensitivity: Real, epsilon: Real) -> float:
    """b = Delta / epsilon, rounded up so that ``pure_dp_of_laplace(Delta, b) <= epsilon`` exactly.

    Sensitivity 0 gives 0.0; epsilon = 0 with positive sensitivity raises ``ValueError``; a scale beyond the
    float range is ``inf`` (the planner refuses a constant sensitivity there: ``planner.accuracy``).

    Source: Dwork & Roth 2014, Thm. 3.6.

    >>> b = laplace_scale(1.0, 0.1)
    >>> b >= 10.0, pure_dp_of_laplace(1.0, b) <= Fraction(0.1)
    (True, True)
    """
    return _laplace_scale(exact(sensitivity), exact(epsilon))


def _laplace_scale_of(s: Fraction, e: Fraction) -> float:
    """:func:`laplace_scale` of exact values, cached (a plan's ledger lines, accuracy rows and lattice
    calibrations ask for the same scales again; every mechanism of a weight class shares one)."""
    if s == 0:
        return 0.0
    if e == 0:
        raise ValueError("epsilon must be positive when the sensitivity is positive")
    b = up(to_float_up(s) / to_float_down(e))
    if b == math.inf:  # Delta / epsilon beyond the float range: infinite noise, epsilon-DP for every epsilon
        return b
    return _nudge_until(lambda x: pure_dp_of_laplace(s, x) <= e, b, up)


# cached by a call, not a decorator: mutation testing (mutmut) does not mutate decorated functions
_laplace_scale = functools.lru_cache(maxsize=1 << 16)(_laplace_scale_of)


# ----------------------------------------------------------------------------------------------
# largest budgets that fit an (epsilon, delta) target


def zcdp_rho_for_approx_dp(epsilon: Real, delta: Real) -> Fraction:
    """The largest rho with ``zcdp_to_approx_dp(rho, delta) <= epsilon``: bisection, rounded down, verified.

    Source: Canonne, Kamath & Steinke 2020, Prop. 12 (inverted; as ``cdp_rho`` in IBM
    ``cdp2adp.py``).

    >>> rho = zcdp_rho_for_approx_dp(5.221535, 1e-6)
    >>> round(float(rho), 6), zcdp_to_approx_dp(rho, 1e-6) <= 5.221535
    (0.5, True)
    """
    e = exact(epsilon)
    d = _delta_in_open_unit(delta)

    def ok(rho: float) -> bool:
        return zcdp_to_approx_dp(rho, d) <= e

    lo, hi = _bracket(ok)
    rho = _largest_valid(ok, lo, hi)
    return Fraction(_nudge_until(ok, rho, lambda x: max(0.0, down(x))))


def approx_zcdp_rho_for_approx_dp(epsilon: Real, delta: Real, delta0: Real) -> Fraction:
    """The largest rho (to the bisection's resolution) with ``approx_zcdp_to_approx_dp(rho, delta0, delta) <=
    epsilon``: delta0-approximate rho-zCDP is then (epsilon, delta)-DP.  :func:`zcdp_rho_for_approx_dp` at delta -
    delta0, taken exactly and rounded down as that conversion rounds it, so the two agree to the last float.
    Raises ``ValueError`` unless delta0 < delta.

    Source: Bun & Steinke 2016, Sec. 8 with Canonne, Kamath & Steinke 2020, Prop. 12 (the proof is in
    :func:`~dpflow.privacy.conversions.approx_zcdp_to_approx_dp`).

    >>> from dpflow.privacy.conversions import approx_zcdp_to_approx_dp
    >>> rho = approx_zcdp_rho_for_approx_dp(1.0, 1e-6, 1e-7)
    >>> approx_zcdp_to_approx_dp(rho, 1e-7, 1e-6) <= 1.0, rho < zcdp_rho_for_approx_dp(1.0, 1e-6)
    (True, True)
    """
    d, d0 = exact(delta), exact(delta0)  # exact refuses negative values
    if not d0 < d:
        raise ValueError(f"delta0 must be in [0, delta): delta={float(d)!r}, delta0={float(d0)!r}")
    return zcdp_rho_for_approx_dp(epsilon, to_float_down(d - d0))


#: Significant bits of the grid that :func:`largest_on_grid` searches: consecutive grid points differ by a
#: factor of at most 1 + 2^-13 (about 1.2e-4 in rho, 6e-5 in a noise scale): finer than the privacy loss
#: grid of the PLD it searches (1e-4 in epsilon), so a finer grid would only cost search steps.
GRID_BITS = 14
_H = 1 << (GRID_BITS - 1)


def _grid_floor(x: Fraction) -> int:
    """The index of the largest grid point <= ``x`` (x > 0): point ``q H + r`` is (H + r) / H * 2^q, 0 <= r < H."""
    q = x.numerator.bit_length() - x.denominator.bit_length()  # 2^(q-1) < x < 2^(q+1)
    if x < Fraction(2) ** q:
        q -= 1
    return q * _H + math.floor(x / Fraction(2) ** q * _H) - _H


def _grid_value(j: int) -> Fraction:
    """The grid point of index ``j`` (exact)."""
    q, r = divmod(j, _H)
    return Fraction(_H + r, _H) * Fraction(2) ** q


def largest_on_grid(f: Callable[[Fraction], float], target: float, start: Fraction,
                    max_evals: int = 32) -> Fraction | None:
    """The largest point x >= ``start`` of a fixed grid with ``f(x) <= target``, for a non-decreasing ``f``;
    ``None`` when ``f`` at the grid point just below ``start`` already exceeds ``target``.

    The grid is the positive rationals with :data:`GRID_BITS` significant bits (x = m 2^e with 2^13 <= m <
    2^14), the same for every call: for a non-decreasing ``f`` the answer is the largest grid point with
    ``f(x) <= target`` whatever the search path, so a larger ``target`` never gives a smaller answer.  The
    answer is always a point where ``f`` was evaluated and found ``<= target`` (rounded down, verified).

    The search brackets the answer upward from ``start`` (extrapolating ln f as linear in ln x, slope 1/2 at
    first, with 2% overshoot), then narrows the bracket by Brent-style steps on ln f over grid indices (inverse
    quadratic interpolation through the three latest points, else a secant; each probe rounded toward the side
    opposite the latest point, so the bracket closes from both sides, and kept inside the bracket), bisecting
    when the estimate leaves the bracket (a jump of ``f``), when it cannot be drawn (an infinite value) or when
    three steps did not halve the bracket: five to eight evaluations for the PLD searches, at most
    ``max_evals``, after which the largest point verified so far is returned (still valid, possibly below the
    largest).  ``f`` may return ``inf``.

    >>> x = largest_on_grid(lambda x: float(x) ** 0.5, 2.0, Fraction(1, 3))
    >>> x, largest_on_grid(lambda x: float(x) ** 0.5, 2.0, Fraction(5)) is None
    (Fraction(4, 1), True)
    """
    if not start > 0:
        raise ValueError(f"start must be positive, got {start!r}")
    log_t = math.log(target) if target > 0 else -math.inf

    def g(j: int) -> float:  # ln f - ln target: <= 0 exactly where f(x) <= target
        v = f(_grid_value(j))
        if not v <= target:
            return math.inf if math.isinf(v) else max(math.log(v) - log_t, 0.0) or math.ulp(0.0)
        return math.log(v) - log_t if v > 0 else -math.inf

    a, evals = _grid_floor(start), 1
    ga = g(a)
    if ga > 0:
        return None
    hist = [(a, ga)]  # the evaluations so far, the latest last
    slope = 0.5  # ln f against ln x: 1/2 for a Gaussian's epsilon at small rho
    while True:  # bracket: extrapolate upward until f exceeds the target
        if evals >= max_evals:
            return _grid_value(a)
        octaves = (-ga / slope / math.log(2.0) if math.isfinite(ga) else 1.0) + 0.03
        c = a + max(1, math.ceil(min(octaves, 2.0) * _H))
        gc = g(c)
        evals += 1
        hist.append((c, gc))
        if gc > 0:
            b, gb = c, gc
            break
        if math.isfinite(ga) and math.isfinite(gc) and gc > ga:
            slope = min(max((gc - ga) / ((c - a) / _H * math.log(2.0)), 0.05), 2.0)
        a, ga = c, gc
    widths = [2 * (b - a)] * 3
    while b - a > 1 and evals < max_evals:
        x = _interpolate([p for p in hist[-3:] if math.isfinite(p[1])])
        if not a < x < b and math.isfinite(ga) and math.isfinite(gb):
            x = a + (b - a) * -ga / (gb - ga)  # regula falsi on the bracket
        if not a < x < b or 2 * (b - a) > widths[-3]:  # no estimate inside, or three steps without halving
            x = a + (b - a) / 2
        c = min(max(math.ceil(x) if hist[-1][1] <= 0 else math.floor(x), a + 1), b - 1)  # aim past the latest side
        gc = g(c)
        evals += 1
        widths.append(b - a)
        if gc <= 0:
            a, ga = c, gc
        else:
            b, gb = c, gc
        hist.append((c, gc))
    return _grid_value(a)


def _interpolate(points: list[tuple[int, float]]) -> float:
    """Where g = 0 by inverse quadratic interpolation through three points (secant through two; NaN when the
    values coincide): the root estimate of Brent's method."""
    if len(points) == 3:
        (x0, g0), (x1, g1), (x2, g2) = points
        if g0 != g1 and g1 != g2 and g0 != g2:
            return (x0 * g1 * g2 / ((g0 - g1) * (g0 - g2)) + x1 * g0 * g2 / ((g1 - g0) * (g1 - g2))
                    + x2 * g0 * g1 / ((g2 - g0) * (g2 - g1)))
        points = points[1:]
    if len(points) == 2 and points[0][1] != points[1][1]:
        (x0, g0), (x1, g1) = points
        return x1 - g1 * (x1 - x0) / (g1 - g0)
    return math.nan


def pure_eps_for_approx_dp_advanced(epsilon: Real, delta: Real, k: int) -> float:
    """Largest epsilon0 with ``advanced_composition(epsilon0, k, delta) <= epsilon``; rounded down, verified.

    The k-fold composition is then (epsilon, k delta0 + delta)-DP for (epsilon0, delta0)-DP
    components.  Bisection on the (increasing) DRV bound.

    Source: Dwork, Rothblum & Vadhan 2010, Thm. III.3; Dwork & Roth 2014, Thm. 3.20.

    >>> e0 = pure_eps_for_approx_dp_advanced(6.308, 1e-6, 100)
    >>> round(e0, 3), advanced_composition(e0, 100, 1e-6) <= 6.308
    (0.1, True)
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    e = exact(epsilon)
    d = _delta_in_open_unit(delta)

    if e == 0:
        return 0.0  # the DRV bound is positive for every epsilon0 > 0

    def ok(e0: float) -> bool:
        return advanced_composition(e0, k, d) <= e

    lo, hi = _bracket(ok)
    e0 = _largest_valid(ok, lo, hi)
    return _nudge_until(ok, e0, lambda x: max(0.0, down(x)))


# ----------------------------------------------------------------------------------------------
# zCDP shares of pure-DP and all-Gaussian mechanisms


def pure_eps_for_zcdp(rho: Real) -> Fraction:
    """The pure epsilon a zCDP share ``rho`` buys: a float just below sqrt(2 rho), rounded down and verified.

    The inverse of :func:`~dpflow.privacy.pure_to_zcdp` (an epsilon-DP mechanism is epsilon^2/2-zCDP):
    ``down(sqrt(2 rho))`` (about 1e-12 relative below), then stepped down one float at a time until
    ``pure_to_zcdp(epsilon) <= rho`` holds exactly, so a mechanism run at the returned epsilon never
    costs more than ``rho``.  rho = 0 gives 0.

    Source: Bun & Steinke 2016, "Concentrated Differential Privacy", Prop. 1.4 (inverted).

    >>> from dpflow.privacy import pure_to_zcdp
    >>> eps = pure_eps_for_zcdp(Fraction(1, 2))
    >>> pure_to_zcdp(eps) <= Fraction(1, 2), 1 - 1e-11 < eps < 1
    (True, True)
    """
    return _pure_eps_for_zcdp(exact(rho))


def _pure_eps_for_zcdp_of(r: Fraction) -> Fraction:
    """:func:`pure_eps_for_zcdp` of an exact rho, cached (every mechanism of a weight class asks for it, for its
    cost, its noise scale and its ledger line)."""
    if r == 0:
        return Fraction(0)
    eps = _nudge_until(lambda x: pure_to_zcdp(x) <= r, down(math.sqrt(2.0 * float(r))),
                       lambda x: math.nextafter(x, 0.0))
    return Fraction(eps)


_pure_eps_for_zcdp = functools.lru_cache(maxsize=1 << 16)(_pure_eps_for_zcdp_of)


def bounded_range_eps_for_zcdp(rho: Real) -> Fraction:
    """The epsilon a zCDP share ``rho`` buys a bounded-range mechanism: a float just below sqrt(8 rho),
    rounded down and verified (``bounded_range_to_zcdp(epsilon) <= rho`` exactly), as
    :func:`pure_eps_for_zcdp`.  rho = 0 gives 0.

    Source: Cesar & Rogers 2021 (eta-BR implies eta^2/8-zCDP), inverted; see
    :func:`~dpflow.privacy.conversions.bounded_range_to_zcdp` for the conditions.

    >>> from dpflow.privacy import bounded_range_to_zcdp
    >>> eps = bounded_range_eps_for_zcdp(Fraction(1, 8))
    >>> bounded_range_to_zcdp(eps) <= Fraction(1, 8), 1 - 1e-11 < eps < 1
    (True, True)
    """
    return _bounded_range_eps_for_zcdp(exact(rho))


def _bounded_range_eps_for_zcdp_of(r: Fraction) -> Fraction:
    """:func:`bounded_range_eps_for_zcdp` of an exact rho, cached (as :func:`_pure_eps_for_zcdp`)."""
    if r == 0:
        return Fraction(0)
    eps = _nudge_until(lambda x: bounded_range_to_zcdp(x) <= r, down(math.sqrt(8.0 * float(r))),
                       lambda x: math.nextafter(x, 0.0))
    return Fraction(eps)


_bounded_range_eps_for_zcdp = functools.lru_cache(maxsize=1 << 16)(_bounded_range_eps_for_zcdp_of)


def shares_by_weight(total: Real, weights: Sequence[Real]) -> list[Fraction]:
    """Split ``total`` exactly by weight: ``total * w_i / sum_j w_j``, each float weight taken at its exact
    binary value (``Fraction(w)``), so the shares add up to ``total`` exactly.

    It states the planner's allocation rule (``planner/allocate.py`` shares the remaining budget the same way;
    a mechanism of weight w in a round of weight r has weight ``Fraction(w) * Fraction(r)``), so that
    code needing a mechanism's share before certification (e.g. a public noise schedule) computes it
    here instead of restating it.  Sequential composition
    (Bun & Steinke 2016, Lemma 1.7; Dwork & Roth 2014, Thm. 3.16) makes the shares' total the cost.

    >>> [str(s) for s in shares_by_weight(Fraction(1, 2), [0.25, 0.75])]
    ['1/8', '3/8']
    """
    ws = [exact(w) for w in weights]
    whole = sum(ws, Fraction(0))
    if whole == 0:
        raise ValueError(f"weights must have a positive sum, got {list(weights)!r}")
    t = exact(total)
    return [t * w / whole for w in ws]


def gaussian_budget_rho(budget: Measure) -> Fraction:
    """The zCDP rho that an all-Gaussian plan shares among its mechanisms for ``budget``.

    ``ZCDP`` and ``ApproxZCDP``: rho itself.  ``ApproxDP(epsilon, delta)``, delta > 0: mu^2/2, where a
    composition of Gaussian mechanisms whose rhos sum to rho is sqrt(2 rho)-GDP, and mu starts at
    :func:`gdp_mu_for_approx_dp` and is lowered (a few ulps, rarely any) until the plan's own
    (epsilon, delta) conversion of mu^2 -- :func:`~dpflow.privacy.gdp_mu_of_mu2` then
    :func:`~dpflow.privacy.gaussian_dp_epsilon`, the functions ``Cost.epsilon_at`` uses -- is at most
    epsilon (rounded down to a float).  The verified search is the one place where calibration and the
    ledger's conversion, which rounds mu outward once more, are made to agree.  ``PureDP`` and
    delta = 0 raise ``ValueError``: Gaussian noise is never pure DP.

    Source: Balle & Wang 2018, "Improving the Gaussian Mechanism for Differential Privacy", Thm. 8
    (exact Gaussian-DP profile); Dong, Roth & Su 2022, Cor. 2.13 and Cor. 3.3 (mu^2 adds up);
    Bun & Steinke 2016, Prop. 1.6 (rho = mu^2 / 2).

    >>> from dpflow.privacy import ZCDP, ApproxDP, Cost
    >>> gaussian_budget_rho(ZCDP(0.5))
    Fraction(1, 2)
    >>> rho = gaussian_budget_rho(ApproxDP(1.0, 1e-5))
    >>> round(float(rho), 6), min(c.epsilon for c in Cost.gaussian_zcdp(rho).epsilon_at(1e-5)) <= 1.0
    (0.035926, True)
    """
    if isinstance(budget, (ZCDP, ApproxZCDP)):
        return budget.rho
    if not isinstance(budget, ApproxDP) or budget.delta == 0:
        raise ValueError(f"Gaussian noise cannot meet {budget.describe()}: it is never pure DP; "
                         "use a ZCDP, ApproxZCDP or ApproxDP (delta > 0) budget")
    eps_f = to_float_down(budget.epsilon)

    def ok(mu: float) -> bool:
        return gaussian_dp_epsilon(gdp_mu_of_mu2(Fraction(mu) ** 2), budget.delta) <= eps_f

    mu = _nudge_until(ok, gdp_mu_for_approx_dp(budget.epsilon, budget.delta),
                      lambda x: math.nextafter(x, 0.0) * (1.0 - 1e-15))
    return Fraction(mu) ** 2 / 2
