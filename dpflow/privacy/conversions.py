"""Conversions between privacy measures, rounded against the user.

Conventions for every function here:

* a privacy loss given as input (rho, mu, a pure epsilon) is converted to float rounding UP;
* the point at which a profile is evaluated (epsilon in delta(epsilon), delta in epsilon(delta)) is
  converted rounding DOWN, since a smaller point gives a larger (more conservative) answer;
* results that are privacy losses (epsilon or delta) are rounded UP (``rounding.up`` or an exact
  ceiling of a Fraction), and whenever an answer is obtained by a search it is *verified*
  afterwards against the forward formula.

Inputs may be floats, ints or Fractions.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from fractions import Fraction

from .measures import ApproxZCDP, exact
from .rounding import down, to_float_down, to_float_up, up

__all__ = [
    "BOUNDED_RANGE_REFERENCE",
    "approx_dp_to_approx_zcdp",
    "approx_zcdp_to_approx_dp",
    "bounded_range_to_zcdp",
    "bun_steinke_epsilon",
    "cks_delta",
    "gaussian_dp_delta",
    "gaussian_dp_epsilon",
    "gdp_mu_of_mu2",
    "pure_to_approx_dp",
    "pure_to_zcdp",
    "zcdp_to_approx_dp",
]

Real = float | Fraction

#: Smallest Renyi order searched.  Any order alpha > 1 gives a valid bound, so the search needs no
#: care; OpenDP and IBM ``cdp2adp.py`` stop at 1.01, but we go down to 1 + 2^-40 so that the CKS
#: bound is never worse than Bun-Steinke Prop. 1.3 (whose optimum can lie below 1.01 when rho is
#: large).  Near 1 the logarithms are evaluated with exact arguments (see ``_ln_one_minus_inv_up``).
_ALPHA_MIN = 1.0 + 2.0**-40
#: Largest Renyi order searched (avoids overflow; again any alpha is valid).
_ALPHA_MAX = 1e200


# ----------------------------------------------------------------------------------------------
# input handling


def _finite_nonneg(name: str, x: Real) -> Fraction:
    if isinstance(x, float) and not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {x!r}")
    try:
        return exact(x)
    except ValueError as err:
        raise ValueError(f"{name} must be finite and non-negative, got {x!r}") from err


def _loss_up(name: str, x: Real) -> float:
    """A privacy loss, as the smallest float >= x."""
    return to_float_up(_finite_nonneg(name, x))


def _point_down(name: str, x: Real) -> float:
    """An evaluation point (profiles are monotone decreasing in it), as the largest float <= x."""
    return to_float_down(_finite_nonneg(name, x))


def _delta_target(name: str, x: Real) -> float:
    d = _point_down(name, x)
    if d > 1.0:
        raise ValueError(f"{name} must be at most 1, got {x!r}")
    return d


def _bisect_sign(f: Callable[[float], float], lo: float, hi: float) -> float:
    """Bisect on the sign of an increasing function until the float midpoint stops moving.

    Returns the last midpoint (as OpenDP ``cdp_delta`` / IBM ``cdp2adp``); the result is used only
    as a free parameter of a bound that is valid for every value, so no care is needed here.
    """
    if f(lo) >= 0.0:
        return lo
    if f(hi) <= 0.0:
        return hi
    while True:
        mid = lo + (hi - lo) / 2.0
        if mid <= lo or mid >= hi:
            return mid
        if f(mid) < 0.0:
            lo = mid
        else:
            hi = mid


# ----------------------------------------------------------------------------------------------
# pure DP and approximate DP -> zCDP


def pure_to_zcdp(epsilon: float | int | str | Fraction) -> Fraction:
    """rho = epsilon^2 / 2, exactly: every epsilon-DP mechanism is (epsilon^2/2)-zCDP.

    Source: Bun & Steinke 2016, "Concentrated Differential Privacy", Prop. 1.4 (= Prop. 3.3).

    >>> pure_to_zcdp("1")
    Fraction(1, 2)
    >>> pure_to_zcdp("0.1")
    Fraction(1, 200)
    """
    e = exact(epsilon)
    return e * e / 2


#: The citation of :func:`bounded_range_to_zcdp`, for the ledger's references of the mechanisms that use it.
BOUNDED_RANGE_REFERENCE = ("the exponential mechanism is epsilon-bounded range (Durfee & Rogers 2019; Dong, Durfee & "
                           "Rogers 2020), and eta-bounded range implies eta^2/8-zCDP (Cesar & Rogers 2021, ALT; "
                           "proof: Steinke 2021, differentialprivacy.org, Lemma 3 and Thm. 5)")


def bounded_range_to_zcdp(eta: float | int | str | Fraction) -> Fraction:
    """rho = eta^2 / 8, exactly: every eta-bounded-range mechanism is (eta^2/8)-zCDP.

    A mechanism M is eta-bounded range (eta-BR) when for every pair of neighbours x, x' there is a t with
    ln(P[M(x) = y] / P[M(x') = y]) in [t, t + eta] for every outcome y (Durfee & Rogers 2019).
    The privacy loss is then supported on an interval of length eta, so Hoeffding's lemma bounds its
    moment generating function by exp(lambda E[Z] + lambda^2 eta^2 / 8); at lambda = -1, E[e^-Z] = 1 gives
    E[Z] <= eta^2/8, hence rho = eta^2/8.  eta-BR also implies eta-DP (the interval contains 0).

    Which mechanisms are eta-BR at their epsilon (the ``bounded_range`` mechanism capability): the
    exponential mechanism P[y] ~ exp(epsilon u(x, y) / (2 Delta)) whose score moves by at most Delta
    between neighbours (McSherry-Talwar calibration; with any data-independent base measure), and so
    report-noisy-max with Gumbel noise, which samples it exactly.  Not: the Laplace mechanism (its loss
    spans [-epsilon, epsilon], 2 epsilon-BR, which gives back epsilon^2/2), report-noisy-max with Laplace
    noise, or compositions (their ranges add, and the rule is applied per mechanism).

    Source: Cesar & Rogers 2021, "Bounding, Concentrating, and Truncating: Unifying Privacy Loss
    Composition for Data Analytics" (ALT); bounded range: Durfee & Rogers 2019 (NeurIPS), Dong, Durfee &
    Rogers 2020 (ICML); both proofs as written in Steinke 2021, "The Exponential Mechanism and Bounded
    Range Privacy", differentialprivacy.org: Lemma 3 (the exponential mechanism is epsilon-BR; its
    footnote: half the range of the score differences may replace Delta) and Thm. 5 (eta^2/8-zCDP).

    >>> bounded_range_to_zcdp("1")
    Fraction(1, 8)
    >>> bounded_range_to_zcdp("0.2") * 4 == pure_to_zcdp("0.2")
    True
    """
    e = exact(eta)
    return e * e / 8


def approx_dp_to_approx_zcdp(
    epsilon: float | int | str | Fraction, delta: float | int | str | Fraction
) -> ApproxZCDP:
    """(epsilon, delta)-DP implies delta-approximate (epsilon^2/2)-zCDP, exactly.

    Source: Bun & Steinke 2016, Prop. 1.13 (approximate zCDP: Sec. 1.2.6 and Sec. 8).

    >>> approx_dp_to_approx_zcdp("1", "1e-6").describe()
    'rho=0.5, delta=1e-06 approximate zCDP'
    """
    return ApproxZCDP(rho=pure_to_zcdp(epsilon), delta=delta)


# ----------------------------------------------------------------------------------------------
# zCDP -> (epsilon, delta): Canonne-Kamath-Steinke 2020


def _ln_one_minus_inv_up(alpha: float) -> Fraction:
    """An upper bound on ln(1 - 1/alpha) for a float alpha > 1.

    For alpha < 2 it is ln(alpha - 1) - ln(alpha) with the exact argument alpha - 1 (Sterbenz), each
    logarithm rounded in the safe direction and the difference taken exactly.  For alpha >= 2,
    log1p(-1/alpha) has condition number below 1.5, so the rounding of -1/alpha and of log1p is
    dominated by the relative margin of ``up``.
    """
    if alpha < 2.0:
        return Fraction(up(math.log(alpha - 1.0))) - Fraction(down(math.log(alpha)))
    return Fraction(up(math.log1p(-1.0 / alpha)))


def _cks_log_delta_up(rho: float, eps: float, alpha: float) -> float:
    """Upper bound on ln delta_alpha(eps) = (a-1)(a rho - eps) + a ln(1 - 1/a) - ln(a - 1).

    The polynomial part is exact (Fractions); each logarithm is rounded in the safe direction.
    """
    a = Fraction(alpha)
    poly = (a - 1) * (a * Fraction(rho) - Fraction(eps))
    ln_a_minus_one = down(math.log(to_float_down(a - 1)))  # <= ln(alpha - 1)
    return to_float_up(poly + a * _ln_one_minus_inv_up(alpha) - Fraction(ln_a_minus_one))


def _cks_eps_up(rho: float, delta: float, alpha: float) -> float:
    """Upper bound on eps_alpha(delta) = a rho + [ln(1/delta) + (a-1) ln(1-1/a) - ln a] / (a-1)."""
    a = Fraction(alpha)
    log_inv_delta = up(-math.log(delta))
    ln_a = down(math.log(alpha))
    num = Fraction(log_inv_delta) + (a - 1) * _ln_one_minus_inv_up(alpha) - Fraction(ln_a)
    return to_float_up(a * Fraction(rho) + num / (a - 1))


def cks_delta(rho: Real, epsilon: Real) -> float:
    """delta such that rho-zCDP implies (epsilon, delta)-DP, minimised over the Renyi order.

    delta = min_{alpha>1} exp((alpha-1)(alpha rho - epsilon)) / (alpha-1) * (1 - 1/alpha)^alpha.
    The optimal alpha is the root of (2 alpha - 1) rho - epsilon + ln(1 - 1/alpha) = 0, found by
    bisection on the sign of the derivative over (1, (epsilon+1)/(2 rho) + 2] as in OpenDP
    ``cdp_delta`` and IBM ``cdp2adp.py``; any alpha gives a valid bound.  The value is evaluated
    with outward rounding and capped at 1.  rho = 0 gives 0.

    Source: Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for Differential Privacy",
    Prop. 12 (also Balle et al. 2020, Thm. 21; Asoodeh et al. 2020, Eq. 20).

    >>> round(cks_delta(0.5, 5.221534444530), 9)
    1e-06
    >>> cks_delta(0.0, 1.0)
    0.0
    """
    rho_f = _loss_up("rho", rho)
    eps_f = _point_down("epsilon", epsilon)
    if rho_f == 0.0:
        return 0.0
    a_max = min((eps_f + 1.0) / (2.0 * rho_f) + 2.0, _ALPHA_MAX)
    alpha = _bisect_sign(
        lambda a: (2.0 * a - 1.0) * rho_f - eps_f + math.log1p(-1.0 / a), _ALPHA_MIN, a_max
    )
    log_delta = _cks_log_delta_up(rho_f, eps_f, alpha)
    if log_delta >= 0.0:
        return 1.0
    return min(1.0, up(math.exp(log_delta)))


def zcdp_to_approx_dp(rho: Real, delta: Real) -> float:
    """The Canonne-Kamath-Steinke epsilon: rho-zCDP implies (epsilon, delta)-DP; rounded up.

    epsilon = min_{alpha>1} alpha rho + [ln(1/delta) + (alpha-1) ln(1-1/alpha) - ln alpha]/(alpha-1).
    The minimiser solves rho (alpha-1)^2 = ln(1/delta) - ln(alpha) (found by bisection on the sign
    of the derivative; any alpha is valid), the value is evaluated with exact Fractions plus
    outward-rounded logarithms, and the result is verified: ``cks_delta(rho, result) <= delta``
    (nudged up if needed).  rho = 0 gives 0.0; delta = 1 gives 0.0; delta = 0 with rho > 0 raises.
    This is the stable public zCDP -> approximate-DP conversion of dpflow.

    Source: Canonne, Kamath & Steinke 2020, Prop. 12 (arXiv v4); the same bound as Balle et al.
    2020, Thm. 21, and Asoodeh et al. 2020, Eq. 20.

    >>> round(zcdp_to_approx_dp(0.5, 1e-6), 6)
    5.221534
    >>> zcdp_to_approx_dp(0.0, 1e-6)
    0.0
    """
    rho_f = _loss_up("rho", rho)
    d = _delta_target("delta", delta)
    if rho_f == 0.0 or d >= 1.0:
        return 0.0
    if d <= 0.0:
        raise ValueError(f"delta must be positive when rho > 0 (rho={rho!r}, delta={delta!r})")
    log_inv_delta = -math.log(d)
    a_max = min(1.0 + math.sqrt(log_inv_delta / rho_f) + 1.0, _ALPHA_MAX)
    alpha = _bisect_sign(
        lambda a: rho_f - (log_inv_delta - math.log(a)) / ((a - 1.0) * (a - 1.0)), _ALPHA_MIN, a_max
    )
    eps = max(0.0, _cks_eps_up(rho_f, d, alpha))
    return _verify_cks_epsilon(rho_f, d, eps)


# cached by a call, not a decorator (mutmut does not mutate decorated functions): every ledger reports its
# sources' totals at the report delta (:func:`approx_zcdp_to_approx_dp`), and a plan certified again (a new plan
# object, a cleared certificate cache) asks for the same figure
_cks_epsilon = functools.lru_cache(maxsize=512)(zcdp_to_approx_dp)


def _verify_cks_epsilon(rho_f: float, d: float, eps: float) -> float:
    """Nudge eps up (geometrically growing steps) until cks_delta(rho, eps) <= d."""
    candidate = eps
    step = max(eps * 1e-12, 1e-15)
    for _ in range(400):
        if cks_delta(rho_f, candidate) <= d:
            return candidate
        candidate = up(eps + step)
        step *= 2.0
    raise ArithmeticError(  # pragma: no cover
        f"could not verify the CKS epsilon for rho={rho_f!r}, delta={d!r}"
    )


def bun_steinke_epsilon(rho: Real, delta: Real) -> float:
    """epsilon = rho + 2 sqrt(rho ln(1/delta)): rho-zCDP implies (epsilon, delta)-DP; rounded up.

    Looser than :func:`zcdp_to_approx_dp`; kept as an independent check.  All terms are
    non-negative, so a final relative margin covers the float error.

    Source: Bun & Steinke 2016, "Concentrated Differential Privacy", Prop. 1.3.

    >>> round(bun_steinke_epsilon(0.5, 1e-6), 6)
    5.756522
    """
    rho_f = _loss_up("rho", rho)
    d = _delta_target("delta", delta)
    if rho_f == 0.0:
        return 0.0
    if d <= 0.0:
        raise ValueError(f"delta must be positive when rho > 0 (rho={rho!r}, delta={delta!r})")
    return up(rho_f + 2.0 * math.sqrt(rho_f * max(0.0, -math.log(d))))


def approx_zcdp_to_approx_dp(rho: Real, delta0: Real, delta: Real) -> float:
    """epsilon such that delta0-approximate rho-zCDP implies (epsilon, delta)-DP; rounded up.

    epsilon = CKS epsilon of rho at delta - delta0 (the subtraction is exact and rounded down, as
    OpenDP ``make_fix_delta``).  Raises ``ValueError`` if delta <= delta0.

    Source: Bun & Steinke 2016, Sec. 8 (approximate zCDP is (delta0, rho)-zCDP on an event of
    probability 1 - delta0) with Canonne, Kamath & Steinke 2020, Prop. 12.

    Why no factor 1 / (1 - delta0): events E, E' of probability p, p' >= 1 - delta0 with
    D_alpha(M(x)|E || M(x')|E') <= rho alpha give the mixtures M(x) = (1 - delta0) P + delta0 P'' with
    P = M(x)|E (split M(x) = p M(x)|E + (1 - p) M(x)|E^c and move p - (1 - delta0) of the first part into
    P''), and M(x') = (1 - delta0) Q + delta0 Q'' with Q = M(x')|E' likewise (Steinke 2022's mixture form).
    P is (epsilon, delta1)-indistinguishable from Q by the CKS conversion, so for every set S:
    M(x)(S) <= (1 - delta0) P(S) + delta0 <= (1 - delta0)(e^epsilon Q(S) + delta1) + delta0
    <= e^epsilon M(x')(S) + delta1 + delta0, as (1 - delta0) Q(S) <= M(x')(S).

    >>> round(approx_zcdp_to_approx_dp(0.5, 1e-6, 2e-6), 6)
    5.221534
    """
    d0 = _finite_nonneg("delta0", delta0)
    d = _finite_nonneg("delta", delta)
    if d <= d0:
        raise ValueError(
            f"delta must exceed delta0 of the approximate zCDP guarantee: delta={float(d)!r}, "
            f"delta0={float(d0)!r}"
        )
    return _cks_epsilon(rho, to_float_down(min(d - d0, Fraction(1))))


# ----------------------------------------------------------------------------------------------
# Gaussian differential privacy (exact for Gaussian mechanisms)


_SQRT2_LO = math.nextafter(math.sqrt(2.0), 0.0)  # <= sqrt(2): the float sqrt(2) is within 1 ulp
_SQRT2_HI = math.nextafter(math.sqrt(2.0), 3.0)  # >= sqrt(2)


def gaussian_dp_delta(mu: Real, epsilon: Real) -> float:
    """The exact privacy profile of mu-GDP, rounded up.

    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).  With u1 = (eps/mu - mu/2)/sqrt 2
    and u2 = (eps/mu + mu/2)/sqrt 2 one has u2^2 - u1^2 = eps, so with the scaled complementary
    error function erfcx(u) = e^(u^2) erfc(u) (``scipy.special.erfcx``)

        delta = (1/2) e^(-u1^2) [erfcx(u1) - erfcx(u2)]   (u1 >= 0),
        delta = (1/2) [erfc(u1) - e^(-u1^2) erfcx(u2)]     (u1 < 0),

    and no e^eps is ever formed.  u1^2 is exact (Fractions); every other argument and term is
    rounded in the safe direction (erfc and erfcx are decreasing), so the result is a valid upper
    bound.  Its relative looseness is about 1e-12 / (1 - e^eps Phi(x - mu) / Phi(x)), x = -eps/mu +
    mu/2, i.e. small unless mu is tiny and eps/mu large.  mu = 0 gives 0.0.  For a Gaussian
    mechanism mu = Delta/sigma (all-Gaussian compositions: mu^2 adds up).

    Source: Dong, Roth & Su 2022, "Gaussian Differential Privacy", Cor. 2.13 (Gaussian mechanism
    Thm. 2.7); equivalently Balle & Wang 2018, "Improving the Gaussian Mechanism", Thm. 8.

    >>> round(gaussian_dp_delta(1.0, 4.886554), 8)
    1e-06
    >>> gaussian_dp_delta(0.0, 1.0)
    0.0
    """
    from scipy import special  # imported when used, not with dpflow (import time)

    mu_f = _loss_up("mu", mu)
    eps_f = _point_down("epsilon", epsilon)
    if mu_f == 0.0:
        return 0.0
    m, e = Fraction(mu_f), Fraction(eps_f)
    q1 = e / m - m / 2  # sqrt(2) u1, exact
    q2 = e / m + m / 2  # sqrt(2) u2, exact, > 0
    u1_sq = q1 * q1 / 2
    u1_lo = down(to_float_down(q1) / (_SQRT2_HI if q1 >= 0 else _SQRT2_LO))
    u2_hi = up(to_float_up(q2) / _SQRT2_LO)
    erfcx_u2_lo = down(float(special.erfcx(u2_hi)))
    if q1 >= 0:
        exp_hi = up(math.exp(-to_float_down(u1_sq)))
        erfcx_u1_hi = up(float(special.erfcx(u1_lo)))
        bracket = up(erfcx_u1_hi - max(0.0, erfcx_u2_lo))
        value = up(0.5 * up(exp_hi * bracket))
    else:
        exp_lo = max(0.0, down(math.exp(-to_float_up(u1_sq))))
        erfc_u1_hi = up(float(special.erfc(u1_lo)))
        value = up(0.5 * up(erfc_u1_hi - max(0.0, down(exp_lo * max(0.0, erfcx_u2_lo)))))
    return min(1.0, max(0.0, value))


def gdp_mu_of_mu2(mu2: Real) -> float:
    """mu = sqrt(mu2) as a float rounded up: the GDP parameter of a composition of Gaussian mechanisms.

    Gaussian mechanisms with parameters mu_i compose to sqrt(sum mu_i^2)-GDP, so costs carry mu^2
    exactly (a Fraction); this is the one place it becomes a float mu for :func:`gaussian_dp_epsilon`
    (``to_float_up``, then ``up`` of the square root).  mu2 = 0 gives 0.0.

    Source: Dong, Roth & Su 2022, "Gaussian Differential Privacy", Cor. 3.3; the profile it feeds is
    Balle & Wang 2018, Thm. 8.

    >>> gdp_mu_of_mu2(1) > 1.0, gdp_mu_of_mu2(1) < 1.0 + 1e-11, gdp_mu_of_mu2(0)
    (True, True, 0.0)
    """
    m = _finite_nonneg("mu2", mu2)
    return 0.0 if m == 0 else up(math.sqrt(to_float_up(m)))


def gaussian_dp_epsilon(mu: Real, delta: Real) -> float:
    """The smallest epsilon with mu-GDP implying (epsilon, delta)-DP; rounded up and verified.

    Bisection on the exact profile :func:`gaussian_dp_delta` keeping the invariant
    ``gaussian_dp_delta(mu, hi) <= delta``; the returned value satisfies it.  mu = 0 gives 0.0.

    Source: Dong, Roth & Su 2022, Cor. 2.13; Balle & Wang 2018, Thm. 8.

    >>> round(gaussian_dp_epsilon(1.0, 1e-6), 6)
    4.886554
    """
    mu_f = _loss_up("mu", mu)
    d = _delta_target("delta", delta)
    if mu_f == 0.0 or d >= 1.0:
        return 0.0
    if d <= 0.0:
        raise ValueError(f"delta must be positive when mu > 0 (mu={mu!r}, delta={delta!r})")
    if gaussian_dp_delta(mu_f, 0.0) <= d:
        return 0.0
    lo = 0.0
    hi = bun_steinke_epsilon(mu_f * mu_f / 2.0 * (1.0 + 1e-9), d)
    while gaussian_dp_delta(mu_f, hi) > d:  # pragma: no cover - the zCDP bound is always valid
        lo, hi = hi, 2.0 * hi + 1.0
    while hi - lo > 1e-15 * hi and hi > 1e-300:
        mid = lo + (hi - lo) / 2.0
        if mid <= lo or mid >= hi:
            break
        if gaussian_dp_delta(mu_f, mid) <= d:
            hi = mid
        else:
            lo = mid
    return hi


# ----------------------------------------------------------------------------------------------
# pure DP -> (epsilon, delta)


def pure_to_approx_dp(epsilon: Real, delta: Real) -> float:
    """epsilon-DP implies (ln(e^epsilon - delta), delta)-DP; rounded up (equals epsilon when delta = 0).

    Evaluated as epsilon + log1p(-delta e^-epsilon) with each step rounded in the safe direction;
    clamped at 0 (a smaller epsilon with the same delta is always weaker).

    Source: Meiser 2018, "Approximate and Probabilistic Differential Privacy Definitions",
    IACR ePrint 2018/277, "Subtlety 2".

    >>> pure_to_approx_dp(1.0, 0.0)
    1.0
    >>> pure_to_approx_dp(1.0, 1e-3) < 1.0
    True
    """
    eps_f = _loss_up("epsilon", epsilon)
    d = _point_down("delta", delta)
    if d >= 1.0:
        raise ValueError(f"delta must be < 1, got {delta!r}")
    if d == 0.0:
        return eps_f
    t_lo = down(d * down(math.exp(-eps_f)))
    return max(0.0, up(eps_f + up(math.log1p(-t_lo))))
