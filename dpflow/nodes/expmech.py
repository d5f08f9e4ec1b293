"""The exponential-mechanism samplers: report noisy max with Gumbel noise (continuous sources) and exact
inversion from uniform words (exact sources).

Every node that samples an exponential mechanism (``Quantile``, ``DyadicExpMech``) has finitely many
candidate groups k, each of ``m_k`` members with one score, and samples a group with probability
proportional to ``m_k exp(x_k)``, ``x_k = epsilon u_k / (2 Delta_u)`` (McSherry-Talwar 2007 Thm 6), then a
uniform member.

* Continuous sources: :func:`report_noisy_max` adds standard Gumbel noise to ``log w_k`` and reports the
  argmax, which samples ``k`` with probability ``w_k / sum_j w_j`` (the Gumbel-max trick: Gumbel 1954;
  Yellott 1977; Maddison-Tarlow-Minka 2014; Durfee-Rogers 2019).  The Gumbel variates are floating point
  and not claimed exact (docs/privacy.md).
* Exact sources: :func:`exact_choice` samples the same distribution *exactly* (:data:`EXACT_REFERENCE`): the
  log-weights are exact rationals (:class:`DistanceScores`), the choice is the inversion of one uniform real
  R in [0, 1) against the cumulative weights, and R is read from 64-bit words of the source's word stream
  (``NoiseSource.uniform_words``).  First, rigorous float64 bounds on every weight (outward error bounds on
  the scores, ``exp`` and the products) are summed exactly in 61-bit fixed point; when R's first word puts
  ``R * total`` inside one group's certain zone, that group is the draw.  Otherwise (probability stated in
  :func:`exact_choice`, counted) R is read 64 bits further and the bounds are recomputed with
  :mod:`decimal` at a precision that doubles each round (``exp`` correctly rounded there, every other
  operation rounded outward), until R is decided.  The output is the ideal draw of R, so its law is exactly
  the exponential mechanism's: no floating-point operation decides it.

The candidate set must be public and finite (``Quantile`` releases a point of a public 2^-k lattice of its
range, ``DyadicExpMech`` a dyadic interval), so the mechanism is still an exponential mechanism over a finite
set: epsilon-DP and epsilon-bounded range (Durfee-Rogers 2019), hence epsilon^2/8-zCDP (Cesar-Rogers 2021).

Report noisy max with *Laplace* noise (``Peel``) is a different mechanism with its own proof.

>>> import numpy as np
>>> from dpflow.interpreter.noise import SeededNoise
>>> report_noisy_max(np.array([0.0, -np.inf, 50.0]), SeededNoise(0))
2
>>> from fractions import Fraction
>>> s = DistanceScores(Fraction(1), np.array([0.0, 0.0]), np.array([0.0, 40.0]), -1)
>>> exact_choice(s, np.array([1, 1]), SeededNoise(0, exact=True).uniform_words)
(0, 0)
"""

from __future__ import annotations

import bisect
import decimal
import math
from collections.abc import Callable
from fractions import Fraction

import attrs
import numpy as np

from dpflow.noise_protocol import NoiseSource
from dpflow.references import Reference

__all__ = ["EXACT_REFERENCE", "DistanceScores", "exact_choice", "float_phase_miss", "report_noisy_max"]

EXACT_REFERENCE = Reference(
    "exact exponential mechanism by inversion of a lazily read uniform against rigorously bounded cumulative "
    "weights (exact sampling with random bits: Knuth-Yao 1976; no float decides the draw, Mironov 2012; "
    "Ilvento 2020 for the exponential mechanism); finite public candidates: McSherry-Talwar 2007 Thm 6",
    "accounting.md", "3")

EXP_MARGIN = 2.0**-44
"""Relative margin of every float64 weight bound: it covers numpy's ``exp`` (at most a few ulps of 2^-52) and the
two roundings of ``m_k * exp(.) * (1 +- margin)``, with a factor of more than 50 to spare.  The accuracy of
``exp`` is an assumption about the installed numpy and CPU, not a proof: it is tested over the sampler's whole
argument range [-700, 0] against an 80-bit reference checked with mpmath (tests/nodes/test_exp_accuracy_review.py:
worst 0.59 ulp with numpy 2.4 on AVX512F; the test requires 16 ulps; docs/assurance.md)."""

_TINY_ARG = -700.0
"""Weights below exp(-700) of the largest one are bounded by [0, m_k exp(-700)] in float64 (no subnormals)."""

_FIXED_BITS = 60
"""The fixed-point scale: the float upper bound of the total weight is below 2^60 units (exact int64 sums)."""

_START_DIGITS = 40
"""Decimal digits of the first high-precision round (doubled each further round)."""


def report_noisy_max(log_weights: np.ndarray, noise: NoiseSource) -> int | None:
    """The index of a draw from the distribution with weights ``exp(log_weights)`` (flattened), by
    Gumbel-max: ``argmax_k log_weights[k] + G_k`` with ``G_k`` standard Gumbel.

    Declared policy: a non-finite log-weight (``-inf``, ``+inf`` or NaN) gives its candidate weight 0;
    ``None`` when no candidate has positive weight.  One Gumbel variate is drawn per entry of
    ``log_weights``, before anything else, whatever the weights are.

    >>> from dpflow.interpreter.noise import SeededNoise
    >>> report_noisy_max(np.array([np.nan, np.inf, -np.inf]), SeededNoise(0)) is None
    True
    """
    lw = np.asarray(log_weights, dtype=float).ravel()
    g = noise.gumbel(lw.shape)
    keys = np.where(np.isfinite(lw), lw + g, -np.inf)  # (finite + finite Gumbel is never NaN)
    if not np.any(keys > -np.inf):
        return None
    return int(np.argmax(keys))


_U = 2.0**-52  # u / (1 - u) < 2^-52 for the float64 unit roundoff u = 2^-53


@attrs.frozen(eq=False)
class DistanceScores:
    """Exact log-weights ``x_k = sign * beta * |a_k + offset - c_k|``: ``a_k`` public floats, ``offset`` an exact
    public rational shared by all entries (the part of ``q n`` that float64 does not hold), ``c_k`` integer
    counts (floats below 2^53), ``beta >= 0`` exact, ``sign`` +1 or -1.  Entries with a non-finite ``a_k`` have
    weight 0 (declared policy).

    >>> s = DistanceScores(Fraction(1, 2), np.array([2.5]), np.array([1.0]), -1)
    >>> s.exact(np.array([0])), s.approx()[0].tolist()
    ([Fraction(-3, 4)], [-0.75])
    """

    beta: Fraction
    a: np.ndarray
    c: np.ndarray
    sign: int
    offset: Fraction = Fraction(0)

    def finite(self) -> np.ndarray:
        """The entries with a finite ``a_k`` (the others have weight 0)."""
        out: np.ndarray = np.isfinite(self.a)
        return out

    def approx(self) -> tuple[np.ndarray, np.ndarray]:
        """``(x_hat, err)``: float64 log-weights and rigorous bounds ``|x_hat_k - x_k| <= err_k``.

        With u' = 2^-52 (u / (1 - u)), each of the four roundings errs by u' relative to its result:
        ``d1 = a - c``, ``d2 = d1 + o`` (o = float(offset), |o - offset| <= o_err), ``beta_hat = float(beta)``
        and ``x_hat = beta_hat |d2|``.  So ``|t_hat - t| <= u' (2.01 |d2| + |o|) + o_err`` for ``t = |a + offset
        - c|`` and ``|x_hat - beta t| <= u' |x_hat| + u' beta_hat t_hat + 1.01 beta_hat (u' (2.01 t_hat + |o|)
        + o_err) <= 2^-50 (|x_hat| + beta_hat |o|) + 1.01 beta_hat o_err``; the bound is inflated by
        1 + 2^-40 and 2^-1070 for its own rounding and underflow.
        """
        o = float(self.offset)
        o_err = float(abs(Fraction(o) - self.offset)) * (1.0 + 2.0**-40)  # 0.0 when the offset is a float
        b = float(self.beta)
        with np.errstate(all="ignore"):
            t = np.abs((self.a - self.c) + o)
            x = self.sign * (b * t)
            err = ((abs(x) + b * abs(o)) * 2.0**-50 + 1.01 * b * o_err) * (1.0 + 2.0**-40) + 2.0**-1070
        return x, err

    def exact(self, idx: np.ndarray) -> list[Fraction]:
        """The exact log-weights of the entries ``idx`` (finite ``a_k`` only)."""
        s = self.sign * self.beta
        return [s * abs(Fraction(float(a)) + self.offset - int(c)) for a, c in zip(self.a[idx], self.c[idx],
                                                                                   strict=True)]


def _float_bounds(x: np.ndarray, err: np.ndarray, mult: np.ndarray) -> tuple[np.ndarray, np.ndarray, int] | None:
    """``(lo, hi, s)``: fixed-point integers ``lo_k <= 2^s m_k exp(x_k - M) <= hi_k`` (int64) for the true
    log-weights x_k within ``err_k`` of ``x`` (all finite), M = max x; the sums of ``hi`` stay below 2^62.
    ``None`` when an error bound exceeds 2^-20 (the float phase is then skipped)."""
    d = x - x.max()
    e = (err + _U * np.abs(d)) * (1.0 + 2.0**-40)  # the rounding of x - M, then of e itself
    if not float(e.max()) <= 2.0**-20:  # scores beyond 2^30 in size: float64 bounds cannot decide
        return None
    # the true weight is m exp(d') with |d' - d| <= e <= 2^-20: exp(d) exp(-e) >= exp(d) (1 - e) and
    # exp(d) exp(e) <= exp(d) (1 + 2 e); exp(d) itself errs by less than EXP_MARGIN (relative)
    m = mult.astype(float)
    ed = m * np.exp(np.maximum(d, _TINY_ARG))
    w_lo = np.where(d - e >= _TINY_ARG, ed * (1.0 - e) * (1.0 - EXP_MARGIN), 0.0)
    w_hi = ed * (1.0 + 2.0 * e) * (1.0 + EXP_MARGIN)
    s = _FIXED_BITS - math.frexp(float(w_hi.sum()))[1]  # the float sum errs by < N u: the true one is < 2^61
    lo = np.floor(np.ldexp(w_lo, s)).astype(np.int64)
    hi = np.maximum(np.ceil(np.ldexp(w_hi, s)), 1.0).astype(np.int64)
    return lo, hi, s


def _decide_fixed(W: int, lower: np.ndarray, upper: np.ndarray) -> int | None:
    """The index i with ``S_(i-1) <= R S_N < S_i`` for every R in [W 2^-64, (W+1) 2^-64) and every cumulative
    sums S with ``lower_i <= S_i <= upper_i`` (int64 fixed point), or None when the word does not settle it.
    ``R S_N`` lies in [bottom, top): the first i with ``lower_i >= top`` is the draw if ``upper_(i-1) <= bottom``."""
    top = -((-(W + 1) * int(upper[-1])) >> 64)  # ceil((W + 1) U_N / 2^64), below 2^62
    bottom = (W * int(lower[-1])) >> 64         # floor(W L_N / 2^64)
    i = int(np.searchsorted(lower, top, side="left"))
    if i < lower.size and (i == 0 or int(upper[i - 1]) <= bottom):
        return i
    return None


def _decide(V: int, bits: int, lower: list[decimal.Decimal], upper: list[decimal.Decimal]) -> int | None:
    """:func:`_decide_fixed` for R in [V 2^-bits, (V+1) 2^-bits) and decimal bounds (exact comparisons)."""
    top = Fraction(V + 1, 1 << bits) * Fraction(upper[-1])  # R S_N is below this ...
    bottom = Fraction(V, 1 << bits) * Fraction(lower[-1])   # ... and at least this
    i = bisect.bisect_left(lower, top)  # the first i with S_i surely above R S_N
    if i < len(lower) and (i == 0 or upper[i - 1] <= bottom):
        return i
    return None


def float_phase_miss(scores: DistanceScores, mult: np.ndarray) -> float:
    """An upper bound on the probability that :func:`exact_choice` needs a high-precision round: the first
    word leaves the draw open only when ``bottom = floor(W L_N / 2^64)`` falls within ``D = U_N - L_N + 2`` below
    a zone ``[L_j, U_j]``; each integer value of ``bottom`` has probability at most 1 / L_N + 2^-64 < 1.125 / L_N
    (L_N < 2^61), so the bound is 1.125 (the integers of the union of ``[L_j - D, U_j]``) / L_N (evaluated in
    float64: an estimate to 2^-50 relative).

    >>> s = DistanceScores(Fraction(1), np.zeros(1000), np.arange(1000.0), -1)
    >>> float_phase_miss(s, np.ones(1000, dtype=np.int64)) < 2**-30
    True
    """
    m = np.asarray(mult, dtype=np.int64).ravel()
    ok = np.flatnonzero(scores.finite() & (m > 0))
    x, err = scores.approx()
    if ok.size == 0:
        return 0.0
    bounds = _float_bounds(x[ok], err[ok], m[ok]) if bool(np.isfinite(x[ok]).all()) else None
    if bounds is None:
        return 1.0
    lo, hi, _ = bounds
    L, U = np.cumsum(lo).astype(float), np.cumsum(hi).astype(float)
    D = U[-1] - L[-1] + 2.0
    start, end = L - D, U
    prev = np.concatenate(([-np.inf], end[:-1]))  # U increases strictly (every hi_k >= 1): each term is >= 2
    union = float((end - np.maximum(start, prev) + 1.0).sum())
    return 1.125 * union / float(L[-1])


def _decimal_bounds(xs: list[Fraction], M: Fraction, mult: np.ndarray,
                    digits: int) -> tuple[list[decimal.Decimal], list[decimal.Decimal]]:
    """Cumulative sums of ``m_k exp(x_k - M)`` bounded below and above at ``digits`` significant digits: the
    exponent rounded outward, ``exp`` correctly rounded (decimal) then moved one unit outward, the products and
    sums rounded outward."""
    kw = {"prec": digits, "Emin": decimal.MIN_EMIN, "Emax": decimal.MAX_EMAX}
    near = decimal.Context(rounding=decimal.ROUND_HALF_EVEN, **kw)  # type: ignore[arg-type]
    down = decimal.Context(rounding=decimal.ROUND_FLOOR, **kw)  # type: ignore[arg-type]
    up = decimal.Context(rounding=decimal.ROUND_CEILING, **kw)  # type: ignore[arg-type]
    zero = decimal.Decimal(0)
    lo_sum, hi_sum = zero, zero
    lows, highs = [], []
    for x, m in zip(xs, mult.tolist(), strict=True):
        y = x - M
        num, den = decimal.Decimal(y.numerator), decimal.Decimal(y.denominator)
        w_lo = down.multiply(near.exp(down.divide(num, den)).next_minus(near), m)
        w_hi = up.multiply(near.exp(up.divide(num, den)).next_plus(near), m)
        lo_sum, hi_sum = down.add(lo_sum, w_lo), up.add(hi_sum, w_hi)
        lows.append(lo_sum)
        highs.append(hi_sum)
    return lows, highs


def exact_choice(scores: DistanceScores, mult: np.ndarray,
                 words: Callable[[int], np.ndarray]) -> tuple[int | None, int]:
    """An exact draw of k with probability ``m_k exp(x_k) / sum_j m_j exp(x_j)`` (``x`` the exact log-weights of
    ``scores``, ``m = mult`` non-negative integers below 2^53), and the number of high-precision rounds it took.
    ``None`` when no entry has positive weight (declared policy, as :func:`report_noisy_max`).

    Work: one 64-bit word and a fixed number of whole-array passes, whatever is drawn.  High-precision rounds
    (one more word each, and a pass over all entries in :mod:`decimal`) happen only when R's first word does
    not settle the draw, with probability at most :func:`float_phase_miss` (each zone's width is about 2^-43
    of its cumulative weight plus one fixed-point unit per entry, units of 2^-60 of the total: for the
    scores of ``Quantile`` and ``DyadicExpMech`` it is below 2^-30, measured in tests/nodes/test_exact_expmech.py
    up to 10^6 entries); the rounds are counted and returned.

    >>> s = DistanceScores(Fraction(2), np.zeros(3), np.array([0.0, 1.0, 2.0]), -1)
    >>> from dpflow.interpreter.noise import SeededNoise
    >>> k, rounds = exact_choice(s, np.array([1, 1, 0]), SeededNoise(3, exact=True).uniform_words)
    >>> k in (0, 1), rounds
    (True, 0)
    """
    m = np.asarray(mult, dtype=np.int64).ravel()
    ok = np.flatnonzero(scores.finite() & (m > 0))
    V = int(words(1)[0])
    if ok.size == 0:
        return None, 0
    x, err = scores.approx()
    x, err, mk = x[ok], err[ok], m[ok]
    bounds = _float_bounds(x, err, mk) if bool(np.isfinite(x).all()) else None
    if bounds is not None:
        i = _decide_fixed(V, np.cumsum(bounds[0]), np.cumsum(bounds[1]))
        if i is not None:
            return int(ok[i]), 0
    xs = scores.exact(ok)  # (only the exact rounds when a log-weight is beyond float64's reach)
    M = max(xs)  # any reference point gives the same law; the largest keeps every exp(x - M) at most 1
    bits, digits, rounds = 64, _START_DIGITS, 0
    while True:
        V = (V << 64) | int(words(1)[0])
        bits, digits, rounds = bits + 64, 2 * digits, rounds + 1
        lows, highs = _decimal_bounds(xs, M, mk, digits)
        i = _decide(V, bits, lows, highs)
        if i is not None:
            return int(ok[i]), rounds
