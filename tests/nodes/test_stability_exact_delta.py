"""Review of the stability histograms' thresholds (docs/assurance.md, "reviewed derivations"): the exact delta of
worst-case neighbours, computed in 60-digit arithmetic from closed forms (no sampling, no numerical integration).

Neighbours x, x' of a count statistic with linf 1 and integer l1 ``D``: ``a`` bins occupied on x only (count 1
there), ``b`` on x' only, and ``c`` common bins whose counts differ by 1 (count ``n0`` on x, ``n0 + s`` on x'),
``a + b + c <= D``; the other bins are equal on both and drop out.  The exact-noise path (discrete Laplace of
scale ``b`` on the integer counts, released above ``t + 1/2``) has a discrete output per bin: "not released",
or a value whose privacy loss is +-1/b.  So the privacy loss of the whole release has a finite law, and
delta(eps) = P_x(an x-only bin is released) + E_x[(1 - e^(eps - L))_+ ; none is] exactly.

Derived bound (proved in ``StabilityHistogram``'s docstring and docs/assurance.md): delta(eps) <= max(a, b) p <=
D p with p the probability that a bin of count 1 is released, so the threshold must make p <= delta / D, which
dpflow's does for every D (OpenDP's constant at D = 1; until round 6, D >= 2 used Vadhan's, p <= delta / (2 D),
a factor 2 to spare).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from conftest import ExactZeroNoise

import dpflow as dp
from dpflow import nodes as N
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.planner.certify import certify

mp.mp.dps = 60
DELTA = Fraction(1, 10**6)


def _dlap(q: mp.mpf) -> tuple:
    """P(Z = k) and P(Z <= j) of the discrete Laplace with P(k) proportional to q^|k| (CKS20 Def. 28)."""
    def pmf(k: int) -> mp.mpf:
        return (1 - q) / (1 + q) * q ** abs(k)

    def cdf(j: int) -> mp.mpf:
        return 1 - q ** (j + 1) / (1 + q) if j >= 0 else q ** (-j) / (1 + q)

    return pmf, cdf


def _common_bin(q: mp.mpf, tq: float, n0: int, s: int) -> list[tuple[mp.mpf, mp.mpf]]:
    """The law under x of (privacy loss, probability) of one common bin, counts n0 (x) and n0 + s (x'), released
    when count + Z > tq: not released, or released with loss +1/b or -1/b (|z - s| - |z| = +-1)."""
    _, cdf = _dlap(q)
    j0 = math.floor(tq - n0) + 1  # x releases iff Z >= j0, x' iff Z >= j0 - s
    lb = -mp.log(q)  # 1 / b
    p_none, p_none_nb = cdf(j0 - 1), cdf(j0 - s - 1)
    if s == 1:  # |z - 1| - |z| = +1 for z <= 0, -1 for z >= 1
        plus = cdf(0) - cdf(j0 - 1) if j0 <= 0 else mp.mpf(0)
        minus = 1 - cdf(max(j0, 1) - 1)
    else:  # |z + 1| - |z| = -1 for z <= -1, +1 for z >= 0
        plus = 1 - cdf(max(j0, 0) - 1)
        minus = cdf(-1) - cdf(j0 - 1) if j0 <= -1 else mp.mpf(0)
    return [(mp.log(p_none / p_none_nb), p_none), (lb, plus), (-lb, minus)]


def _convolve(laws: list[list[tuple[mp.mpf, mp.mpf]]]) -> list[tuple[mp.mpf, mp.mpf]]:
    out = [(mp.mpf(0), mp.mpf(1))]
    for law in laws:
        out = [(l1 + l2, p1 * p2) for (l1, p1), (l2, p2) in itertools.product(out, law) if p2 > 0]
    return out


def exact_delta(eps: mp.mpf, q: mp.mpf, tq: float, a: int, b: int, common: list[tuple[int, int]]) -> mp.mpf:
    """delta_{x -> x'}(eps) exactly, for a x-only bins, b x'-only bins and common bins (n0, s)."""
    _, cdf = _dlap(q)
    p = 1 - cdf(math.floor(tq - 1))  # a bin of count 1 is released: Z >= floor(tq - 1) + 1
    stay = (1 - p) ** a  # none of the x-only bins released (x' never releases them)
    shift = (a - b) * mp.log(1 - p)  # the x'-only bins: never released under x, kept with 1 - p under x'
    rest = sum((pr * max(mp.mpf(0), 1 - mp.exp(eps - shift - loss)) for loss, pr in
                _convolve([_common_bin(q, tq, n0, s) for n0, s in common])), mp.mpf(0))
    return (1 - stay) + stay * rest


def _configs(D: int, tq: float) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """a x-only bins, b x'-only bins, c = D - a - b common bins (all at one placement around the threshold,
    or the first at a second one), both directions of the count change."""
    near = sorted({1, 2, max(1, math.floor(tq) - 1), math.floor(tq), math.floor(tq) + 1, math.floor(tq) + 3})
    out = []
    for a in range(D + 1):
        for b in range(D + 1 - a):
            c = D - a - b
            if c == 0:
                out.append((a, b, []))
                continue
            for n0, s in itertools.product(near, (1, -1)):
                if n0 + s >= 1:
                    out.append((a, b, [(n0, s)] * c))
                    if c > 1:
                        out.append((a, b, [(n0, s)] + [(near[-1], -s)] * (c - 1)))
    return out


@pytest.mark.parametrize("D", [1, 2, 4, 6])
def test_exact_delta_of_worst_neighbours_is_within_the_claim(D: int) -> None:
    """Every configuration, eps from 0.05 to 6: the exact delta never exceeds delta, and the worst configuration
    (all D one-sided bins on x: 1 - (1 - p)^D) comes within 3% of it (the exact path's discrete tail at t + 1/2
    is a little below p), so the bound is tight at every D (the threshold of D >= 2 was b ln 2 higher until
    round 6: the worst was then 0.498 delta)."""
    node = N.StabilityHistogram(delta=DELTA)
    worst_ratio = mp.mpf(0)
    for eps in (Fraction(1, 20), Fraction(1, 2), Fraction(1), Fraction(3), Fraction(6)):
        b, t = node.scale_threshold(float(D), eps)
        tq = math.nextafter(t + 0.5, math.inf)  # the exact path's threshold (evaluate)
        q = mp.exp(-1 / mp.mpf(Fraction(b)))
        for a, bb, common in _configs(D, tq):
            d = exact_delta(mp.mpf(eps), q, tq, a, bb, common)
            assert d <= mp.mpf(DELTA), (eps, a, bb, common)
            worst_ratio = max(worst_ratio, d / mp.mpf(DELTA))
    # the worst case is the x-only bins: with all D of them, 1 - (1 - p)^D, p <= delta / D
    assert worst_ratio >= mp.mpf("0.97"), worst_ratio  # measured: 0.997, 0.978, 0.990, 0.994 at D = 1, 2, 4, 6


def test_continuous_threshold_meets_delta_exactly_from_the_scale_used() -> None:
    """The continuous path: a bin of count 1 is released with probability exp(-(t - 1) / b) / 2, which must be
    at most delta / D, in exact arithmetic, for float-unfriendly eps and delta.  Before
    the review the threshold was computed from eps, not from the (rounded-up) b, and overshot by up to 4e-15
    relative; the scale b must be at least D / eps exactly."""
    worst = mp.mpf(0)
    for delta in (1e-5, 1e-6, 3e-7, 1e-9):
        node = N.StabilityHistogram(delta=delta)
        for eps in (0.1, 0.3, 1.0, 3.0, 0.123456789, 2.0 / 3, 7.77, Fraction(1, 3)):
            for D in (1.0, 2.0, 6.0):
                b, t = node.scale_threshold(D, eps)
                assert Fraction(b) * Fraction(eps) >= Fraction(D)
                p = mp.exp(-(mp.mpf(t) - 1) / mp.mpf(b)) / 2
                bound = mp.mpf(Fraction(delta)) / D
                assert p <= bound
                worst = max(worst, p / bound)
    assert worst > 1 - 1e-10  # and the rule is met with equality to rounding (the constant is pinned)


def test_a_run_uses_the_reviewed_scale_and_threshold() -> None:
    """The exact path of a run draws the discrete Laplace at Fraction(b) and releases above t + 1/2."""

    class Recording(ExactZeroNoise):
        scales: list[Fraction] = []

        def discrete_laplace(self, scale: Fraction, shape: tuple[int, ...]) -> np.ndarray:
            self.scales.append(scale)
            return np.zeros(shape, dtype=np.int64)

    bld = dp.PlanBuilder(budget=dp.ApproxZCDP(Fraction(1, 2), 1e-6))
    node = N.StabilityHistogram(delta=DELTA)
    h = node(N.BinCounts(width=1.0)(bld.source("X", dp.Reals(), n=20)))
    cert = certify(bld.build(h=h))
    src = Recording()
    run = execute(cert, {"X": np.arange(20.0)[:, None]}, src, NumpyBackend())
    alloc = cert.allocations[h.id]
    b, t = node.scale_threshold(2.0, node.eps(alloc.share, alloc.mode))
    assert src.scales == [Fraction(b)]
    assert run.facts[h.id][1]["threshold"] == math.nextafter(t + 0.5, math.inf)


def _dgauss_tail(sigma2: Fraction, j: int) -> mp.mpf:
    """P(Z >= j) of the discrete Gaussian N_Z(0, sigma2) (CKS20 Def. 1), exactly to 60 digits (tails summed to
    60 sigma; the rest is below e^-1800)."""
    s2 = mp.mpf(sigma2)
    top = int(60 * math.sqrt(float(sigma2))) + 1
    w = [mp.exp(-mp.mpf(k * k) / (2 * s2)) for k in range(0, top)]
    total = 2 * sum(w) - w[0]
    return sum(w[max(j, 0):]) / total if j >= 0 else 1 - sum(w[-j:]) / total


@pytest.mark.parametrize(("k", "rho"), [(2, Fraction(1, 8)), (3, Fraction(1, 2)), (5, Fraction(2))])
def test_gaussian_histogram_delta_and_conditioned_renyi(k: int, rho: Fraction) -> None:
    """GaussianStabilityHistogram on TupleCellCounts (D = 2k, Delta_2 = sqrt(2k)): the events E, E' (no
    one-sided bin released) fail with probability exactly 1 - (1 - p)^a, a <= D one-sided bins, p the exact
    tail of a count-1 bin (continuous and discrete Gaussian); the Chernoff step p <= exp(-(t-1)^2/(2 sigma^2))
    = delta / D is pinned; and conditioned on E, E' the release of c common bins shifted by 1 has Renyi
    divergence at most rho alpha (computed exactly for the thresholded discrete Gaussian, one bin, times c)."""
    D, l2 = 2 * k, math.sqrt(2 * k)
    node = N.GaussianStabilityHistogram(delta=DELTA)
    sigma, t = node.scale_threshold(float(D), l2, rho)
    s2 = Fraction(sigma) ** 2
    chernoff = mp.exp(-(mp.mpf(t) - 1) ** 2 / (2 * mp.mpf(s2)))
    assert chernoff <= mp.mpf(DELTA) / D and chernoff > mp.mpf(DELTA) / D * (1 - mp.mpf(1e-9))
    p_cont = mp.erfc((mp.mpf(t) - 1) / (mp.sqrt(2 * mp.mpf(s2)))) / 2
    p_disc = _dgauss_tail(s2, math.floor(t - 1) + 1)  # released iff 1 + Z > t
    for p in (p_cont, p_disc):
        assert 1 - (1 - p) ** D <= mp.mpf(DELTA)
    # conditioned Renyi divergence of one common bin (n0 vs n0 + 1) around the threshold, thresholded output
    j0 = math.floor(t) + 1
    for n0 in (1, j0 - 2, j0 - 1, j0):
        lo, hi = n0 - 80 * int(sigma) - 5, n0 + 80 * int(sigma) + 5
        pmf = {z: mp.exp(-mp.mpf(z * z) / (2 * mp.mpf(s2))) for z in range(lo - n0 - 2, hi - n0 + 2)}
        tot = sum(pmf.values())

        def law(n: int, pmf: dict = pmf, tot: mp.mpf = tot, lo: int = lo, hi: int = hi) -> dict:
            out = {"none": sum(pmf.get(v - n, 0) for v in range(lo, hi) if v <= t) / tot}
            out.update({v: pmf.get(v - n, 0) / tot for v in range(lo, hi) if v > t})
            return out

        P, Q = law(n0), law(n0 + 1)
        for alpha in (2, 5, 20):
            renyi = mp.log(sum(P[o] ** alpha * Q[o] ** (1 - alpha) for o in P if Q[o] > 0)) / (alpha - 1)
            assert renyi <= alpha / (2 * mp.mpf(s2)) * (1 + mp.mpf(1e-20))  # one bin: alpha / (2 sigma^2)
            assert D * alpha / (2 * mp.mpf(s2)) <= mp.mpf(rho) * alpha * (1 + mp.mpf(1e-12))  # c <= Delta_2^2
