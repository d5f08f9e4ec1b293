"""The exact exponential mechanism (``dpflow/nodes/expmech.py::exact_choice``) that ``Quantile`` and
``DyadicExpMech`` use under exact sources (issue 9): its float64 weight bounds, exact probabilities against
empirical frequencies (chi-square, fixed seeds) on both the float and the high-precision path, work per draw
independent of the value drawn, the quantile's public lattice and its eps-DP on neighbours (brute force)."""

from __future__ import annotations

import decimal
import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy import stats
from test_lattice_counts import _dyadic_probs

import dpflow as dp
from dpflow import nodes as N
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.interpreter.vector_samplers import WordSource
from dpflow.nodes import expmech
from dpflow.nodes.dyadic import DyadicTable, _groups
from dpflow.nodes.expmech import DistanceScores, _float_bounds, exact_choice, float_phase_miss
from dpflow.nodes.ordinal import uniform_cdf
from dpflow.nodes.quantile import QUANTILE_LATTICE_BITS, lattice_quantile, quantile_lattice
from dpflow.planner.certify import certify

decimal.getcontext().prec = 60


def _exact_probs(scores: DistanceScores, mult: np.ndarray) -> np.ndarray:
    """m_k exp(x_k) / sum, in 60-digit decimal from the exact log-weights (weight 0 for non-finite a_k)."""
    ok = np.flatnonzero(scores.finite() & (mult > 0))
    xs = scores.exact(ok)
    top = max(xs)
    w = [decimal.Decimal(int(m)) * (decimal.Decimal((x - top).numerator) / decimal.Decimal((x - top).denominator)).exp()
         for x, m in zip(xs, mult[ok], strict=True)]
    z = sum(w)
    out = np.zeros(mult.size)
    out[ok] = [float(v / z) for v in w]
    return out


def _chi2_ok(counts: np.ndarray, p: np.ndarray) -> bool:
    keep = p > 0
    assert counts[~keep].sum() == 0  # never a weight-0 candidate
    draws = counts.sum()
    chi2 = float(((counts[keep] - draws * p[keep]) ** 2 / (draws * p[keep])).sum())
    return chi2 < float(stats.chi2.ppf(0.999, df=int(keep.sum()) - 1))


SCORES = DistanceScores(Fraction(7, 5), np.array([2.5, 0.1, np.inf, 20.5, 1e-3, 0.75, 4.0]),
                        np.array([3.0, 0.0, 0.0, 1.0, 2.0, 0.0, 4.0]), -1, Fraction(1, 3))
MULT = np.array([3, 1, 5, 2**40, 7, 0, 1], dtype=np.int64)


def _draws(scores: DistanceScores, mult: np.ndarray, n: int, seed: int) -> tuple[np.ndarray, int, int]:
    src = WordSource(seed=seed)
    out, rounds = np.zeros(n, dtype=np.int64), 0
    for i in range(n):
        k, r = exact_choice(scores, mult, src.draw)
        assert k is not None
        out[i], rounds = k, rounds + r
    return out, rounds, src.words


def test_exact_choice_samples_the_exponential_mechanism() -> None:
    """Frequencies against the exact probabilities (non-finite a_k and m_k = 0 have weight 0; a huge m_k);
    one word per draw, no high-precision round."""
    p = _exact_probs(SCORES, MULT)
    assert p[2] == p[5] == 0.0 and 0.05 < p[3] < 0.99
    draws, rounds, words = _draws(SCORES, MULT, 20_000, 1)
    assert _chi2_ok(np.bincount(draws, minlength=7), p)
    assert rounds == 0 and words == 20_000


def test_the_high_precision_path_samples_the_same_law(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the float bounds made loose (a margin of 1/4 instead of 2^-40) most draws go to the decimal rounds;
    the law is still the exact one."""
    monkeypatch.setattr(expmech, "EXP_MARGIN", 0.25)
    p = _exact_probs(SCORES, MULT)
    draws, rounds, words = _draws(SCORES, MULT, 3000, 2)
    assert rounds > 1000 and words == 3000 + rounds
    assert _chi2_ok(np.bincount(draws, minlength=7), p)


def test_a_one_off_threshold_goes_to_the_exact_rounds() -> None:
    """Two equal weights: R = 1/2 exactly splits them, and a first word of 2^63 - 1 (R just below 1/2) cannot be
    settled by the float bounds; the next words decide, as the real R would."""
    scores = DistanceScores(Fraction(1), np.zeros(2), np.zeros(2), -1)

    def choose(*seq: int) -> tuple[int | None, int]:
        words = iter(seq)
        return exact_choice(scores, np.array([1, 1]), lambda n: np.array([next(words)], dtype=np.uint64))

    assert choose(2**63 - 1, 0) == (0, 1)
    assert choose(2**63 - 1, 2**64 - 1, 0) == (0, 2)  # R's interval then ends at 1/2 exactly: one more word
    assert choose(2**63, 1) == (1, 1)  # R in [1/2 + 2^-128, ...): the second candidate, after one round
    assert choose(2**63 + 2**40) == (1, 0)  # well inside the second half: one word


def test_float_bounds_contain_the_exact_weights() -> None:
    """lo_k <= 2^s m_k exp(x_k - M) <= hi_k, checked in decimal, on scores near their float rounding, tiny
    weights (below exp(-700) of the largest) and multiplicities up to 2^52."""
    rng = np.random.default_rng(5)
    a = np.concatenate((rng.normal(0, 50, 40), [1e-300, 0.5 + 2**-40, 7e4]))
    c = np.concatenate((rng.integers(0, 100, 40), [0, 0, 0])).astype(float)
    scores = DistanceScores(Fraction(1, 10), a, c, -1, Fraction(1, 7))
    mult = np.concatenate((rng.integers(1, 2**52, 40), [1, 3, 2**52]))
    x, err = scores.approx()
    xs = scores.exact(np.arange(a.size))
    assert all(abs(Fraction(float(xh)) - xe) <= Fraction(float(e)) for xh, xe, e in zip(x, xs, err, strict=True))
    bounds = _float_bounds(x, err, mult)
    assert bounds is not None
    lo, hi, s = bounds
    M = Fraction(float(x.max()))
    for k in range(a.size):
        y = xs[k] - M
        w = decimal.Decimal(int(mult[k])) * (decimal.Decimal(y.numerator) / decimal.Decimal(y.denominator)).exp()
        scaled = w * decimal.Decimal(2) ** s
        assert decimal.Decimal(int(lo[k])) <= scaled <= decimal.Decimal(int(hi[k]))
    assert int(hi.sum()) < 2**62 and lo[-1] == 0 and hi[-1] >= 1  # tiny weights: [0, 1 unit]


def test_scores_error_bound_is_not_vacuous() -> None:
    """The float log-weights' error bound is 2^-50 relative (plus the offset's rounding), not more."""
    scores = DistanceScores(Fraction(1, 3), np.array([10.0]), np.array([3.0]), 1, Fraction(1, 3))
    x, err = scores.approx()
    assert float(x[0]) == pytest.approx(7.333333333333333 / 3) and err[0] < 2.0**-48 * abs(x[0])


def _quantile_scores(n: int, q: float, eps: float) -> tuple[DistanceScores, np.ndarray]:
    t = Fraction(q) * n
    return (DistanceScores(Fraction(eps) / 2, np.full(n + 1, float(t)), np.arange(n + 1, dtype=float), -1,
                           t - Fraction(float(t))),
            np.random.default_rng(n).integers(1, 2**40, n + 1))


@pytest.mark.parametrize(("n", "eps"), [(1000, 1.0), (100_000, 0.1), (1_000_000, 2.0)])
def test_the_float_phase_decides_all_but_a_tiny_fraction_of_draws(n: int, eps: float) -> None:
    scores, mult = _quantile_scores(n, 0.37, eps)
    assert float_phase_miss(scores, mult) < 2.0**-30


def test_float_phase_miss_bounds_the_measured_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(expmech, "EXP_MARGIN", 2.0**-12)
    scores, mult = _quantile_scores(50, 0.5, 1.0)
    bound = float_phase_miss(scores, mult)
    _, rounds, _ = _draws(scores, mult, 4000, 4)
    assert 0 < rounds / 4000 <= bound + 4 * math.sqrt(bound / 4000)


def test_words_per_draw_do_not_depend_on_the_value() -> None:
    """Every draw reads exactly one word (no round in 3,000), whichever candidate it picks: the same count in
    each quartile of the drawn index (the old Gumbel path drew one variate per candidate, also constant)."""
    scores, mult = _quantile_scores(400, 0.5, 0.05)
    src = WordSource(seed=9)
    picks, used = [], []
    for _ in range(3000):
        before = src.words
        k, r = exact_choice(scores, mult, src.draw)
        picks.append(k)
        used.append(src.words - before)
        assert r == 0
    q = np.quantile(picks, [0.25, 0.5, 0.75])
    groups = np.searchsorted(q, picks)
    assert {float(np.mean(np.array(used)[groups == g])) for g in range(4)} == {1.0}


def test_no_positive_weight_is_none_after_one_word() -> None:
    src = WordSource(seed=1)
    s = DistanceScores(Fraction(1), np.array([np.nan, np.inf]), np.zeros(2), -1)
    assert exact_choice(s, np.array([1, 1]), src.draw) == (None, 0) and src.words == 1
    assert exact_choice(SCORES, np.zeros(7, dtype=np.int64), src.draw) == (None, 0)


def test_a_log_weight_beyond_float64_goes_to_the_exact_rounds() -> None:
    s = DistanceScores(Fraction(2**1000), np.array([0.0, 0.0]), np.array([0.0, 1.0]), 1)
    k, rounds = exact_choice(s, np.array([1, 1]), WordSource(seed=0).draw)
    assert (k, rounds) == (1, 1)  # weight exp(2^1000) against 1


# --------------------------------------------------------------------------- the quantile's lattice


def test_quantile_lattice_rule() -> None:
    step, m_lo, m_hi = quantile_lattice(-3.0, 5.0)
    assert step == 2.0 ** (4 - 1 - QUANTILE_LATTICE_BITS) == 2.0**-37 and m_lo == -3 * 2**37 and m_hi == 5 * 2**37
    assert QUANTILE_LATTICE_BITS == 40
    # a narrow range far from 0: the float spacing at the largest magnitude bounds the step from below
    step, m_lo, m_hi = quantile_lattice(2.0**52, 2.0**52 + 64)
    assert step == 1.0 and (m_lo, m_hi) == (2**52, 2**52 + 64)
    step, m_lo, m_hi = quantile_lattice(0.1, 0.3)  # lo not on the lattice: the first point is above it
    assert m_lo * step >= 0.1 > (m_lo - 1) * step and m_hi * step <= 0.3 < (m_hi + 1) * step
    step, _, _ = quantile_lattice(-1.5e308, 1.5e308)  # the width overflows float64
    assert step == 2.0 ** (1025 - 1 - 40)


def _lattice_probs(data: np.ndarray, lo: float, hi: float, q: float, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Brute force over the lattice points y: exp(-eps |#{z < y} - q n| / 2)."""
    step, m_lo, m_hi = quantile_lattice(lo, hi)
    ys = np.arange(m_lo, m_hi + 1) * step
    z = np.clip(data, lo, hi)
    c = (z[None, :] < ys[:, None]).sum(axis=1)
    logw = -eps * np.abs(c - q * len(data)) / 2
    w = np.exp(logw - logw.max())
    return ys, w / w.sum()


def _framed(data: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return np.concatenate(([lo], np.sort(np.clip(data, lo, hi)), [hi]))


def test_lattice_quantile_matches_brute_force_with_ties_and_off_lattice_values() -> None:
    lo, hi, q, eps = 2.0**52, 2.0**52 + 40, 0.3, 0.8
    data = lo + np.array([3.0, 3.0, 7.0, 12.0, 12.0, 12.0, 30.0, 50.0, -5.0])
    ys, p = _lattice_probs(data, lo, hi, q, eps)
    noise = dp.SeededNoise(11, exact=True)
    framed = _framed(data, lo, hi)
    outs = np.array([lattice_quantile(framed, q, Fraction(eps) / 2, noise) for _ in range(8000)])
    idx = np.searchsorted(ys, outs)
    assert np.array_equal(ys[idx], outs)  # every output is a lattice point
    assert _chi2_ok(np.bincount(idx, minlength=len(ys)), p)


def test_lattice_quantile_is_eps_dp_on_every_neighbour() -> None:
    """The lattice mechanism's exact law (brute force, which the test above ties to the sampler) moves by at most
    exp(eps) at every point when one value is replaced by any other (including ties and the ends)."""
    lo, hi, q, eps = 2.0**52, 2.0**52 + 16, 0.5, 1.0
    base = lo + np.array([1.0, 4.0, 4.0, 9.0])
    _, p = _lattice_probs(base, lo, hi, q, eps)
    worst = 0.0
    for i, v in itertools.product(range(4), np.arange(-2.0, 19.0, 0.5)):
        other = base.copy()
        other[i] = lo + v
        _, p2 = _lattice_probs(other, lo, hi, q, eps)
        worst = max(worst, float(np.abs(np.log(p) - np.log(p2)).max()))
    assert eps * 0.7 < worst <= eps + 1e-12


def test_quantile_node_releases_a_lattice_point_under_an_exact_source() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Reals(), n=500)
    plan = b.build(m=N.Quantile(q=0.5)(N.OrderStatistics(lower=-1.0, upper=3.0)(X)))
    data = np.random.default_rng(0).normal(1.0, 0.5, (500, 1))
    step, _, _ = quantile_lattice(-1.0, 3.0)
    for seed in range(5):
        m = plan.run({"X": data}, noise=dp.SeededNoise(seed, exact=True)).released["m"]
        assert (m / step).is_integer() and abs(m - float(np.median(data))) < 0.2
    secure = plan.run({"X": data}).released["m"]
    assert (secure / step).is_integer()
    assert "2^-k lattice of the range" in str(plan.check().to_json())


def test_quantile_on_a_one_point_range_is_that_point() -> None:
    noise = dp.SeededNoise(0, exact=True)
    assert lattice_quantile(np.array([2.0, 2.0, 2.0, 2.0]), 0.5, Fraction(1), noise) == 2.0


# --------------------------------------------------------------------------- DyadicExpMech


def test_dyadic_exact_groups_match_brute_force() -> None:
    """Every dyadic interval of [0, 16) with probability ~ exp(eps |n |J| / N - c(J)| / 2): the exact path over
    the groups and a uniform member (exact uniform integers)."""
    x, N_, eps = np.array([1, 1, 6, 9, 9, 9, 14]), 16, 1.2
    p = _dyadic_probs(x, N_, eps)
    keys = sorted(p)
    table = DyadicTable.build(np.sort(x), N_)
    P, F = uniform_cdf(N_)
    noise = dp.SeededNoise(5, exact=True)
    seen = dict.fromkeys(keys, 0)
    for _ in range(1500):
        j, q = _groups(table, P, F, eps / 2, noise, Fraction(eps) / 2)
        seen[(q << j, ((q + 1) << j) - 1)] += 1
    assert _chi2_ok(np.array([seen[k] for k in keys]), np.array([p[k] for k in keys]))
    assert noise.words.words >= 1500


def test_dyadic_node_under_secure_noise_reads_words_only() -> None:
    b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    X = b.source("X", dp.Ordinal(N=1024), n=50)
    cert = certify(b.build(J=N.DyadicExpMech()(N.DyadicCounts(N=1024)(X))))
    x = np.random.default_rng(1).integers(0, 1024, 50)
    noise = dp.SecureNoise()
    a, c = (int(v) for v in execute(cert, {"X": x}, noise, NumpyBackend()).released["J"])
    assert 0 <= a <= c < 1024 and ((c - a + 1) & (c - a)) == 0 and noise.words.words >= 1


def test_dyadic_scores_rarely_need_a_high_precision_round(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpflow.nodes import dyadic

    seen: list[tuple[DistanceScores, np.ndarray]] = []

    def spy(scores: DistanceScores, mult: np.ndarray, words: Any) -> tuple[int | None, int]:
        seen.append((scores, mult))
        return exact_choice(scores, mult, words)

    monkeypatch.setattr(dyadic, "exact_choice", spy)
    N_, n = 2**30, 20_000
    x = np.sort(np.random.default_rng(0).integers(0, N_, n) // 7 * 7)
    P, F = uniform_cdf(N_)
    _groups(DyadicTable.build(x, N_), P, F, 0.1, dp.SeededNoise(0, exact=True), Fraction(1, 10))
    (scores, mult), = seen
    assert mult.size > 200 and float_phase_miss(scores, mult) < 2.0**-30
