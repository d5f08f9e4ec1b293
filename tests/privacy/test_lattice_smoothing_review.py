"""Review of :class:`dpflow.privacy.pld.LatticeGaussianPLD`'s smoothing argument, step by step, where every
term is visible: small smoothing widths t (0.4-0.6, so gamma is 1e-3 to 0.2 instead of dpflow's 1e-77) and
small lattice scales s, with s'^2 and gamma taken from the code (:func:`lattice_smoothed_mu2`,
:func:`lattice_smoothing_slack`).  docs/assurance.md, "reviewed derivations".

1. Pointwise: the law of K(N(a, s'^2)) (K: y -> N_Z(y, t^2)) is within e^{+-gamma} of N_Z(a, s^2) at every k
   (computed by quadrature of the smooth, Gaussian-decaying integrand: spectrally accurate trapezoids).
2. The hockey-stick step: delta_P(eps) <= e^Gamma delta_P'(eps - 2 Gamma) for the discrete pair P and the
   smoothed pair P', and delta_P'(eps) <= delta_Gauss(|v| / s', eps) (post-processing of the continuous pair,
   Balle & Wang 2018 Thm. 8 in closed form), for every shift up to 3 lattice units.
3. Adaptive composition: a 1-D release, then a 2-D release whose integer shift (l2 norm <= 3) the adversary
   picks from the first output; the optimal adaptive adversary over that finite set is computed exactly (the
   hockey-stick divergence splits over the first output, so the best shift per output is the best strategy)
   and stays below the composed bound e^Gamma delta_Gauss(mu', eps - 2 Gamma), Gamma = 3 gamma.  It is above
   the continuous Gaussian's delta at the unsmoothed mu: the discrete Gaussian at a small scale is not
   dominated by the continuous one, so the smoothing (or some correction) is needed, not a formality.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.special import ndtr
from test_lattice_pld import DELTA, exact_epsilon, smoothed_epsilon

from dpflow.privacy import pld as P


def _s_prime(s: float, t: float) -> float:
    """s' from the code's rule: mu'^2 / mu^2 = s^2 / s'^2."""
    return s / math.sqrt(float(P.lattice_smoothed_mu2(Fraction(1), Fraction(s), Fraction(t))))


def _discrete(s: float, a: float, k: np.ndarray) -> np.ndarray:
    w = np.exp(-((k - a) ** 2) / (2 * s * s))
    full = np.arange(-math.ceil(40 * s) - 40, math.ceil(40 * s) + 41)
    out: np.ndarray = w / np.exp(-((full - a) ** 2) / (2 * s * s)).sum()
    return out


def _smoothed(s: float, t: float, a: float, k: np.ndarray) -> np.ndarray:
    """P(K(Y) = k), Y ~ N(a, s'^2), K(y) ~ N_Z(y, t^2): trapezoids on a 1/400 grid over a +- 14 s'."""
    sp = _s_prime(s, t)
    y = np.arange(a - 14 * sp, a + 14 * sp, 1 / 400)
    j = np.arange(-40, 41)
    frac = y - np.round(y)
    theta = np.exp(-((j[:, None] - frac[None, :]) ** 2) / (2 * t * t)).sum(axis=0)  # Theta(y), 1-periodic
    dens = np.exp(-((y - a) ** 2) / (2 * sp * sp)) / (sp * math.sqrt(2 * math.pi))
    kern = np.exp(-((k[:, None] - y[None, :]) ** 2) / (2 * t * t)) / theta[None, :]
    out: np.ndarray = (kern * dens[None, :]).sum(axis=1) / 400
    return out


def _gauss_delta(mu: float, eps: float) -> float:
    """Balle & Wang 2018 Thm. 8: delta(eps) of N(0, 1) against N(mu, 1)."""
    return float(ndtr(-eps / mu + mu / 2) - math.exp(eps) * ndtr(-eps / mu - mu / 2))


def _hockey(p: np.ndarray, q: np.ndarray, eps: float) -> float:
    return float(np.clip(p - math.exp(eps) * q, 0.0, None).sum())


@pytest.mark.parametrize(("s", "t"), [(0.42, 0.4), (1.0, 0.4), (1.5, 0.4), (2.0, 0.6), (1.2, 0.8)])
def test_pointwise_within_e_gamma_of_the_smoothed_continuous_gaussian(s: float, t: float) -> None:
    """|ln P'(k) / N_Z(a, s^2)(k)| <= gamma at every k within 8 s (both tails), integer a.  The convolution
    averages the periodic 1 / Theta(y) over y ~ N(a, s'^2), so the ratio is far inside the bound when s' is
    large (0.0096 against gamma = 0.196 at s = 1, t = 0.4) and approaches it as s' -> 0 (0.106 at s = 0.42)."""
    gamma = P.lattice_smoothing_slack(t, 1)
    for a in (0, 3):
        k = np.arange(a - math.ceil(8 * s), a + math.ceil(8 * s) + 1)
        ratio = np.log(_smoothed(s, t, a, k) / _discrete(s, a, k))
        assert np.abs(ratio).max() <= gamma
        if s == 0.42:
            assert np.abs(ratio).max() >= 0.5 * gamma
    # a wrong smoothing variance (s'^2 = s^2 - t^2 / 2 instead of s^2 - t^2) tilts the ratio out of the bound
    sp_wrong = math.sqrt(s * s - t * t / 2)
    k = np.arange(-math.ceil(8 * s), math.ceil(8 * s) + 1)
    wrong = np.exp(-(k**2) / (2 * (sp_wrong**2 + t * t)))
    wrong = np.log(wrong / wrong.sum() / _discrete(s, 0, k))
    assert np.abs(wrong).max() > gamma


@pytest.mark.parametrize(("s", "t"), [(1.5, 0.4), (2.0, 0.5), (3.0, 0.6)])
def test_hockey_stick_step_and_post_processing(s: float, t: float) -> None:
    gamma = P.lattice_smoothing_slack(t, 1)
    sp = _s_prime(s, t)
    k = np.arange(-math.ceil(12 * s) - 3, math.ceil(12 * s) + 4)
    for v in (1, 2, 3):
        p, q = _discrete(s, 0, k), _discrete(s, v, k)
        ps, qs = _smoothed(s, t, 0, k), _smoothed(s, t, v, k)
        for eps in np.linspace(0.0, 4.0, 17):
            for a_, b_, as_, bs_ in ((p, q, ps, qs), (q, p, qs, ps)):
                smoothed = _hockey(as_, bs_, eps - 2 * gamma)
                assert _hockey(a_, b_, eps) <= math.exp(gamma) * smoothed + 1e-12
                assert smoothed <= _gauss_delta(v / sp, eps - 2 * gamma) + 1e-12


def test_optimal_adaptive_adversary_stays_below_the_composed_bound() -> None:
    s, t = 2.0, 0.5
    gamma = P.lattice_smoothing_slack(t, 1)
    Gamma = 3 * gamma  # one 1-D and one 2-D lattice release
    v1, r2 = 2, 3
    k = np.arange(-math.ceil(14 * s), math.ceil(14 * s) + 1)
    p1, q1 = _discrete(s, 0, k), _discrete(s, v1, k)
    loss1 = np.log(p1 / q1)
    g = _discrete(s, 0, k)
    p2 = np.outer(g, g)
    shifts = [(a, b) for a in range(-r2, r2 + 1) for b in range(-r2, r2 + 1) if 0 < a * a + b * b <= r2 * r2]
    q2 = {v: np.outer(_discrete(s, v[0], k), _discrete(s, v[1], k)) for v in shifts}
    mu_prime = math.sqrt(float(P.lattice_smoothed_mu2(Fraction(v1 * v1 + r2 * r2, 4), Fraction(s), Fraction(t))))
    for eps in (0.5, 1.0, 2.0, 3.0):
        best = 0.0
        for pk, lk in zip(p1, loss1, strict=True):  # the best second shift for each first output
            best += pk * max(_hockey(p2, q2[v], eps - lk) for v in shifts)
        fixed = max(sum(pk * _hockey(p2, q2[v], eps - lk) for pk, lk in zip(p1, loss1, strict=True))
                    for v in ((3, 0), (2, 2)))
        bound = math.exp(Gamma) * _gauss_delta(mu_prime, eps - 2 * Gamma)
        assert fixed <= best <= bound
        # the smoothing is needed: at this small scale the discrete pair is NOT dominated by the continuous
        # Gaussian of the same mu (exact delta 0.53756 > 0.53709 at eps 0.5)
        assert best > _gauss_delta(math.sqrt((v1 * v1 + r2 * r2) / s**2), eps)


def test_every_three_dimensional_shift_below_the_bound() -> None:
    """Every integer shift of l2 norm at most 3 in three dimensions (up to signs and order: the laws are
    symmetric), exact epsilon by enumeration, against the bound at that norm with Gamma over 3 entries."""
    s = 4.0
    shifts = [(a, b, c) for a in range(4) for b in range(a + 1) for c in range(b + 1) if 0 < a * a + b * b + c * c <= 9]
    for v in shifts:
        norm = math.sqrt(sum(x * x for x in v))
        assert exact_epsilon(v, s, DELTA) <= smoothed_epsilon(norm, s, DELTA, 3, 1.5)
