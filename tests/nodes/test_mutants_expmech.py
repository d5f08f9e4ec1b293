"""Mutation-testing pins of ``dpflow/nodes/expmech.py`` (the exponential-mechanism samplers; first run
2026-11-24, 99 survivors of 493).

The exact sampler decides a draw only where every weight consistent with its error bounds gives the same
answer, so a tightened bound is a privacy failure that no frequency test sees (the bounds have room to spare
on ordinary scores).  Pinned here: the decision rules at their exact boundaries (a zone edge equal to
``top`` or ``bottom`` decides, one unit more does not), the decimal bounds' directed roundings at low
precision (where a round-to-nearest in place of floor or ceiling crosses the true cumulative weight), the
float64 error bounds' every constant (``2^-50``, ``1.01``, ``1 + 2^-40``, ``2^-1070``, the ``2^-20`` cut, the
``(1 - e)`` and ``(1 + 2 e)`` interval factors, ``EXP_MARGIN``, the fixed-point scale) on inputs where each moves
the result, and the non-finite policies of both samplers.
"""

from __future__ import annotations

import decimal
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

from dpflow.nodes import expmech
from dpflow.nodes.expmech import (
    DistanceScores,
    _decide,
    _decide_fixed,
    _decimal_bounds,
    _float_bounds,
    exact_choice,
    float_phase_miss,
    report_noisy_max,
)

D = decimal.Decimal


def _i64(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int64)


# --------------------------------------------------------------------------- the decision rules


def _spec(W: int, bits: int, lower: list[int], upper: list[int]) -> int | None:
    """The decision rule in exact rationals: R in [W 2^-bits, (W + 1) 2^-bits) and S_i in [lower_i, upper_i]
    put R S_N in [W L_N 2^-bits, (W + 1) U_N 2^-bits); the first i with lower_i at or above the top is the draw
    when upper_(i-1) is at or below the bottom."""
    top, bottom = Fraction((W + 1) * upper[-1], 1 << bits), Fraction(W * lower[-1], 1 << bits)
    i = next((k for k, v in enumerate(lower) if v >= top), len(lower))
    return i if i < len(lower) and (i == 0 or upper[i - 1] <= bottom) else None


def _boundary_words(lower: list[int], upper: list[int], bits: int) -> list[int]:
    """Words whose R interval ends or starts at each zone edge, and their neighbours."""
    out = {0, (1 << bits) - 1}
    for v in lower + upper:
        for tot in (lower[-1], upper[-1]):
            w = (v << bits) // tot
            out.update(x for x in range(w - 2, w + 3) if 0 <= x < 1 << bits)
    return sorted(out)


def test_decide_fixed_at_its_exact_boundaries() -> None:
    """S = (2^58, 2^60) exactly: R below 1/4 draws 0, R from 1/4 on draws 1.  The word just below 1/4 has
    ``top = 2^58 = S_0`` (decided: R S_N < top); the word at 1/4 has ``bottom = 2^58 = S_0`` (decided: S_0 <=
    R S_N)."""
    S = _i64(2**58, 2**60)
    assert _decide_fixed(2**62 - 1, S, S) == 0
    assert _decide_fixed(2**62, S, S) == 1
    assert _decide_fixed(0, S, S) == 0 and _decide_fixed(2**64 - 1, S, S) == 1
    lo, hi = _i64(2**58 - 1, 2**60), _i64(2**58, 2**60)  # a zone one unit wide around S_0
    assert _decide_fixed(2**62 - 1, lo, hi) is None   # top = 2^58 > lower_0, bottom = 2^58 - 1 < upper_0
    assert _decide_fixed(2**62 - 17, lo, hi) == 0     # top = 2^58 - 1 = lower_0
    assert _decide_fixed(2**62, lo, hi) == 1          # bottom = 2^58 = upper_0
    assert _decide_fixed(2**64 - 1, _i64(5, 10), _i64(5, 12)) is None  # top above every lower bound


@pytest.mark.parametrize("seed", range(4))
def test_decide_rules_match_the_exact_rule_at_every_zone_edge(seed: int) -> None:
    """Both rules against :func:`_spec` on random cumulative bounds (totals not powers of two, so the top is a
    ceiling and the bottom a floor that matter), for the words at and next to every zone edge."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 6))
    lo_w = rng.integers(0, 2**57 // n, n)
    hi_w = lo_w + rng.integers(0, 3, n) * int(rng.integers(0, 2))
    lower, upper = np.cumsum(lo_w), np.cumsum(hi_w)
    lower[-1] = max(int(lower[-1]), 1)
    upper = np.maximum(upper, lower)
    L, U = [int(v) for v in lower], [int(v) for v in upper]
    seen = set()
    for W in _boundary_words(L, U, 64):
        want = _spec(W, 64, L, U)
        assert _decide_fixed(W, lower, upper) == want
        V = (W << 64) | int(rng.integers(0, 2**63))
        assert _decide(V, 128, [D(v) for v in L], [D(v) for v in U]) == _spec(V, 128, L, U)
        seen.add(want)
    assert None in seen or len(seen) > 1


def test_decide_on_decimal_bounds_at_its_exact_boundaries() -> None:
    """The high-precision rule, R in [V 2^-bits, (V + 1) 2^-bits): the same boundaries as the fixed-point rule."""
    S = [D(1), D(4)]
    bits = 128
    quarter = 1 << (bits - 2)
    assert _decide(quarter - 1, bits, S, S) == 0   # top = 4 (quarter) / 2^bits = 1 = S_0
    assert _decide(quarter, bits, S, S) == 1       # bottom = 1 = S_0
    assert _decide(quarter - 1, bits, [D("0.999"), D(4)], S) is None
    assert _decide(quarter, bits, S, [D("1.001"), D(4)]) is None
    assert _decide(0, bits, S, S) == 0 and _decide((1 << bits) - 1, bits, S, S) == 1
    assert _decide((1 << bits) - 1, bits, [D(1), D(3)], S) is None  # past the last lower bound


# --------------------------------------------------------------------------- the decimal bounds


def _true_cumsum(xs: list[Fraction], M: Fraction, mult: list[int]) -> list[D]:
    ctx = decimal.Context(prec=80, Emin=decimal.MIN_EMIN, Emax=decimal.MAX_EMAX)
    out, acc = [], Fraction(0)
    for x, m in zip(xs, mult, strict=True):
        y = x - M
        acc += m * Fraction(ctx.exp(ctx.divide(D(y.numerator), D(y.denominator))))
        out.append(acc)
    return [ctx.divide(D(v.numerator), D(v.denominator)) for v in out]


@pytest.mark.parametrize("digits", [2, 3, 5, 9])
def test_decimal_bounds_enclose_the_weights_at_low_precision(digits: int) -> None:
    """At 2 to 9 digits a round-to-nearest anywhere (the exponent's division, the products, the sums) crosses the
    true cumulative weight on some of these inputs; the directed roundings never do.  The 80-digit reference errs
    by far less than the gaps (checked: the bounds are never equal to the reference)."""
    rng = np.random.default_rng(digits)
    for _ in range(60):
        n = int(rng.integers(1, 8))
        xs = [Fraction(int(rng.integers(-10**6, 10**6)), int(rng.integers(1, 10**4))) for _ in range(n)]
        mult = [int(v) for v in rng.integers(1, 2**52, n)]
        M = max(xs)
        lows, highs = _decimal_bounds(xs, M, np.array(mult, dtype=np.int64), digits)
        true = _true_cumsum(xs, M, mult)
        assert all(lo < t < hi for lo, t, hi in zip(lows, true, highs, strict=True))


def test_decimal_bounds_keep_tiny_weights_positive() -> None:
    """exp(-10^7) is about 10^-4342945, below decimal's default exponent range: the bounds' contexts take the
    whole range, so the weight is bounded by two positive numbers, not by 0 (which would make a decision
    impossible for a draw that falls in it)."""
    lows, highs = _decimal_bounds([Fraction(-10**7)], Fraction(0), _i64(1), 30)
    assert 0 < lows[0] < highs[0] < D("1e-4342944")
    lows, highs = _decimal_bounds([Fraction(0)], Fraction(0), _i64(1), 30)
    assert lows[0] == D(1).next_minus(decimal.Context(prec=30))
    assert highs[0] == D(1).next_plus(decimal.Context(prec=30))


def test_decimal_bounds_hold_their_precision() -> None:
    """``digits`` significant digits: the bounds of one weight are a few units of the 30th digit apart."""
    lows, highs = _decimal_bounds([Fraction(-1, 3)], Fraction(0), _i64(3), 30)
    assert lows[0] < highs[0] and (highs[0] - lows[0]) / highs[0] < D("1e-28")


# --------------------------------------------------------------------------- the float64 error bounds


def _approx_err(a: float, c: float, b: float, o: float, o_err: float) -> tuple[float, float]:
    """The documented bound, term by term (``DistanceScores.approx``)."""
    x = b * abs((a - c) + o)
    return x, ((x + b * abs(o)) * 2.0**-50 + 1.01 * b * o_err) * (1.0 + 2.0**-40) + 2.0**-1070


def test_score_error_bound_term_by_term() -> None:
    """Each term of the bound moves it: the relative 2^-50 of |x| and of beta |o|, 1.01 beta o_err (the offset's
    own rounding, inflated by 1 + 2^-40), the final 1 + 2^-40 and the 2^-1070 floor."""
    third = Fraction(1, 3)
    o_err = float(abs(Fraction(float(third)) - third)) * (1.0 + 2.0**-40)
    cases = [  # (beta, a, c, sign, offset)
        (Fraction(1), 3.0, 1.0, -1, Fraction(0)),
        (Fraction(1, 10), 10.0, 3.0, 1, Fraction(1, 2)),
        (Fraction(7, 5), 2.5, 3.0, -1, third),
        (Fraction(1), 0.0, 0.0, -1, Fraction(0)),
        (Fraction(3), 1.0, 5.0, -1, -third),
    ]
    for beta, a, c, sign, offset in cases:
        x, err = DistanceScores(beta, np.array([a]), np.array([c]), sign, offset).approx()
        o = float(offset)
        xe, ee = _approx_err(a, c, float(beta), o, o_err if abs(offset) == third else 0.0)
        assert float(x[0]) == sign * xe and float(err[0]) == ee
    assert DistanceScores(Fraction(1), np.zeros(1), np.zeros(1), -1).approx()[1][0] == 2.0**-1070


def test_score_error_bound_covers_the_offset_rounding() -> None:
    """The offset's rounding error alone: a score of exactly 0 after rounding whose true value is beta o_err."""
    off = Fraction(1, 3)
    o = float(off)
    s = DistanceScores(Fraction(2**60), np.array([-o]), np.zeros(1), 1, off)
    x, err = s.approx()
    true = s.exact(np.array([0]))[0]
    assert float(x[0]) == 0.0 and 0 < true <= Fraction(float(err[0]))


def test_score_bounds_are_computed_silently() -> None:
    """Non-finite ``a_k`` and log-weights beyond float64 are part of the declared policy: no warning."""
    s = DistanceScores(Fraction(2**1023), np.array([np.inf, np.nan, 0.0, 0.0]), np.array([0.0, 0.0, 4.0, 0.0]), 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x, err = s.approx()
    assert np.isinf(x[2]) and np.isinf(err[2]) and x[3] == 0.0


def _float_ref(x: np.ndarray, err: np.ndarray, mult: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The documented float bounds, step by step (``_float_bounds``)."""
    d = x - x.max()
    e = (err + 2.0**-52 * np.abs(d)) * (1.0 + 2.0**-40)
    ed = mult.astype(float) * np.exp(np.maximum(d, -700.0))
    w_lo = np.where(d - e >= -700.0, ed * (1.0 - e) * (1.0 - 2.0**-44), 0.0)
    w_hi = ed * (1.0 + 2.0 * e) * (1.0 + 2.0**-44)
    s = 60 - math.frexp(float(w_hi.sum()))[1]
    return (np.floor(np.ldexp(w_lo, s)).astype(np.int64),
            np.maximum(np.ceil(np.ldexp(w_hi, s)), 1.0).astype(np.int64), s)


@pytest.mark.parametrize("err0", [0.0, 2.0**-21, 2.0**-20 / (1 + 2.0**-39)])
def test_float_bounds_step_by_step(err0: float) -> None:
    """A single large weight (its margins move the fixed-point ends by units at 2^59), a weight with a large
    error, one at the exp(-700) cut and one below it."""
    x = np.array([0.0, -3.5, -700.0 + 2.0**-30, -650.0, -701.0])
    err = np.array([err0, 2.0**-21, 2.0**-40, 0.0, 0.0])
    mult = np.array([1, 3, 2**52, 2**40, 5], dtype=np.int64)
    got = _float_bounds(x, err, mult)
    assert got is not None
    ref = _float_ref(x, err, mult)
    assert np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1]) and got[2] == ref[2]
    assert got[0][-1] == 0 and got[1][-1] == 1
    assert got[0].dtype == got[1].dtype == np.int64  # exact cumulative sums up to 2^62 (float64 would round)


def test_float_bounds_of_one_exact_weight() -> None:
    """x = 0 exactly, m = 1: the bounds are (1 -+ 2^-44) 2^59, to the unit."""
    lo, hi, s = _float_bounds(np.zeros(1), np.zeros(1), _i64(1)) or (None, None, None)
    assert s == 59 and int(lo[0]) == 2**59 - 2**15 and int(hi[0]) == 2**59 + 2**15


def test_float_bounds_cut_at_2_to_minus_20() -> None:
    """An error bound of at most 2^-20 (after its own 1 + 2^-40) is used; beyond it the float phase is skipped."""
    edge = 2.0**-20 / (1.0 + 2.0**-40)
    while edge * (1.0 + 2.0**-40) <= 2.0**-20:
        edge = math.nextafter(edge, 1.0)
    assert _float_bounds(np.zeros(1), np.array([edge]), _i64(1)) is None
    assert _float_bounds(np.zeros(1), np.array([math.nextafter(edge, 0.0)]), _i64(1)) is not None
    # the rounding of d enters e: |d| 2^-52 at d = -2^32 is 2^-20
    assert _float_bounds(np.array([0.0, -2.0**32]), np.zeros(2), _i64(1, 1)) is None
    assert _float_bounds(np.array([0.0, -2.0**31]), np.zeros(2), _i64(1, 1)) is not None


# --------------------------------------------------------------------------- the samplers' policies


class _Gumbel:
    def __init__(self, g: np.ndarray) -> None:
        self.g = g
        self.shapes: list[tuple[int, ...]] = []

    def gumbel(self, shape: tuple[int, ...]) -> np.ndarray:
        self.shapes.append(tuple(shape))
        return np.resize(self.g, shape)


def test_report_noisy_max_policy() -> None:
    """Non-finite log-weights weigh 0 whatever their noise; one variate per (flattened) entry; ties go to the
    first index; None when nothing has positive weight."""
    lw = np.array([[np.nan, 1.0], [np.inf, -np.inf]])
    src = _Gumbel(np.array([100.0, 0.0, 100.0, 100.0]))
    assert report_noisy_max(lw, src) == 1 and src.shapes == [(4,)]  # type: ignore[arg-type]
    assert report_noisy_max(np.array([0.0, 0.0]), _Gumbel(np.zeros(2))) == 0  # type: ignore[arg-type]
    assert report_noisy_max(np.array([-5.0, 0.0]), _Gumbel(np.array([10.0, 0.0]))) == 0  # type: ignore[arg-type]
    none = _Gumbel(np.zeros(3))
    assert report_noisy_max(np.array([np.nan, np.inf, -np.inf]), none) is None  # type: ignore[arg-type]
    assert none.shapes == [(3,)]
    # an infinite Gumbel variate on a finite weight is that weight's (the key is +inf), never a non-finite one's
    assert report_noisy_max(np.array([np.inf, 0.0]), _Gumbel(np.array([0.0, np.inf]))) == 1  # type: ignore[arg-type]
    assert report_noisy_max(np.array([0.0, 1.0]), _Gumbel(np.array([-np.inf, -np.inf]))) is None  # type: ignore[arg-type]


def test_exact_choice_policy_and_word_count() -> None:
    """Non-finite ``a_k`` and ``m_k = 0`` weigh 0; the first word is read before anything else; the index is the
    original entry's."""
    read: list[int] = []

    def words(n: int) -> np.ndarray:
        read.append(n)
        return np.array([2**63 + 2**40], dtype=np.uint64)

    s = DistanceScores(Fraction(1), np.array([np.nan, 0.0, np.inf, 0.0, 0.0]), np.zeros(5), -1)
    assert exact_choice(s, _i64(1, 0, 1, 1, 1), words) == (4, 0) and read == [1]
    assert exact_choice(s, _i64(1, 0, 1, 0, 0), words) == (None, 0) and read == [1, 1]


def test_exact_choice_reads_one_word_per_round_and_doubles_the_precision(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two equal weights and R's first words at 1/2 - 2^-64 and 1/2 - 2^-128: two high-precision rounds, one word
    each, at 80 then 160 digits; multiplicities given as floats are read as integers."""
    seq = iter([2**63 - 1, 2**64 - 1, 0])
    read: list[int] = []
    digits: list[int] = []

    def words(n: int) -> np.ndarray:
        read.append(n)
        return np.array([next(seq)], dtype=np.uint64)

    real = expmech._decimal_bounds

    def spy(xs: list[Fraction], M: Fraction, mult: np.ndarray, d: int) -> tuple[list[D], list[D]]:
        digits.append(d)
        return real(xs, M, mult, d)

    monkeypatch.setattr(expmech, "_decimal_bounds", spy)
    s = DistanceScores(Fraction(1), np.zeros(2), np.zeros(2), -1)
    assert exact_choice(s, np.array([1.0, 1.0]), words) == (0, 2)
    assert read == [1, 1, 1] and digits == [80, 160]


def test_exact_choice_with_a_log_weight_beyond_float64() -> None:
    """A log-weight that overflows float64 (+inf) is still an exact rational: the exact rounds decide."""
    s = DistanceScores(Fraction(2**1023), np.zeros(2), np.array([0.0, 4.0]), 1)
    assert np.isinf(s.approx()[0][1])
    assert exact_choice(s, _i64(1, 1), lambda n: np.array([2**63], dtype=np.uint64)) == (1, 1)


def test_float_phase_miss_edge_cases() -> None:
    """0 when nothing has positive weight, 1 when the float bounds cannot decide (an error beyond 2^-20 or a
    log-weight beyond float64), otherwise the documented union formula."""
    zero = DistanceScores(Fraction(1), np.array([np.nan]), np.zeros(1), -1)
    assert float_phase_miss(zero, _i64(1)) == 0.0
    s = DistanceScores(Fraction(1), np.zeros(2), np.array([0.0, 1.0]), -1)
    assert float_phase_miss(s, _i64(0, 0)) == 0.0
    assert float_phase_miss(DistanceScores(Fraction(2**40), np.zeros(2), np.array([0.0, 1.0]), -1), _i64(1, 1)) == 1.0
    assert float_phase_miss(DistanceScores(Fraction(2**1023), np.zeros(2), np.array([0.0, 4.0]), 1), _i64(1, 1)) == 1.0
    x, err = s.approx()
    lo, hi, _ = _float_bounds(x, err, _i64(1, 1)) or (None, None, None)
    L, U = np.cumsum(lo).astype(float), np.cumsum(hi).astype(float)
    Dw = U[-1] - L[-1] + 2.0
    union = (U[0] - (L[0] - Dw) + 1.0) + (U[1] - max(L[1] - Dw, U[0]) + 1.0)
    assert float_phase_miss(s, _i64(1, 1)) == 1.125 * union / L[-1]
    # a first weight of one fixed-point unit: its term, D + 2, is exact in float64
    tiny = DistanceScores(Fraction(1), np.zeros(2), np.array([800.0, 0.0]), -1)
    x, err = tiny.approx()
    lo, hi, _ = _float_bounds(x, err, _i64(1, 1)) or (None, None, None)
    assert (int(lo[0]), int(hi[0])) == (0, 1)
    L, U = np.cumsum(lo).astype(float), np.cumsum(hi).astype(float)
    Dw = U[-1] - L[-1] + 2.0
    union = (Dw + 2.0) + (U[1] - max(L[1] - Dw, U[0]) + 1.0)
    assert float_phase_miss(tiny, _i64(1, 1)) == 1.125 * union / L[-1]


def test_exact_margin_is_the_documented_one() -> None:
    assert expmech.EXP_MARGIN == 2.0**-44 and expmech._FIXED_BITS == 60 and expmech._START_DIGITS == 40
