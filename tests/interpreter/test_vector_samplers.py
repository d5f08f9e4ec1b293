"""The vectorised exact samplers: their laws, their constants, and work that does not depend on the value drawn."""

from __future__ import annotations

import math
import random
from decimal import Decimal, getcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from test_exact_noise import _pmf_pvalue

import dpflow as dp
from dpflow.interpreter import vector_samplers as vs
from dpflow.interpreter.samplers import IntSource, discrete_gaussian, discrete_laplace
from dpflow.interpreter.vector_samplers import WordSource, discrete_gaussian_array, discrete_laplace_array


@pytest.mark.parametrize("scale", [Fraction(1, 2), Fraction(3), Fraction(7, 3)])
def test_discrete_laplace_array_matches_its_pmf(scale: Fraction) -> None:
    draws = discrete_laplace_array(scale, 40_000, WordSource(seed=8))
    ks = np.arange(-60, 61)
    assert draws.dtype == np.int64
    assert _pmf_pvalue(draws, ks, np.exp(-np.abs(ks) / float(scale))) > 1e-3


@pytest.mark.parametrize("sigma2", [Fraction(1, 2), Fraction(9, 4), Fraction(25), Fraction(1000, 7)])
def test_discrete_gaussian_array_matches_its_pmf(sigma2: Fraction) -> None:
    draws = discrete_gaussian_array(sigma2, 40_000, WordSource(seed=7))
    r = int(12 * math.sqrt(sigma2)) + 3
    ks = np.arange(-r, r + 1)
    assert _pmf_pvalue(draws, ks, np.exp(-(ks.astype(float) ** 2) / (2 * float(sigma2)))) > 1e-3


def test_lattice_scales_have_the_right_spread() -> None:
    """At the scales the lattice releases use (about 2^40 lattice steps) the draws are int64 with the variance
    of the law: 2 e^{-1/s} / (1 - e^{-1/s})^2 ~ 2 s^2 for the discrete Laplace, sigma^2 for the discrete
    Gaussian (equal to within 1e-12 relative at this sigma)."""
    src = WordSource(seed=3)
    s = 2**40 + 12345
    z = discrete_laplace_array(Fraction(s), 20_000, src).astype(float)
    assert abs(np.var(z) / (2.0 * s * s) - 1) < 0.08 and abs(np.mean(z)) < 5 * s * math.sqrt(2 / 20_000)
    g = discrete_gaussian_array(Fraction(s) ** 2 / 9, 20_000, src).astype(float)
    assert abs(np.var(g) / (s * s / 9) - 1) < 0.05


def test_exp_thresholds_are_the_exact_binary_expansion() -> None:
    """floor(exp(-n) 2^bits) against a 120-digit decimal computation."""
    getcontext().prec = 120
    for n, bits in [(1, 64), (2, 64), (7, 128), (44, 64), (45, 64), (60, 192)]:
        assert vs.exp_neg_bits(n, bits) == int(Decimal(-n).exp() * (Decimal(2) ** bits))
    table = vs._exp_table()
    assert table.size == vs.GEOM_TABLE + 1 and bool(np.all(np.diff(table[1:].astype(float)) < 0))


def test_uniform_below_is_uniform_and_rejects_the_top() -> None:
    u = vs.uniform_below(np.full(60_000, 6, dtype=np.int64), WordSource(seed=5))
    assert float(stats.chisquare(np.bincount(u, minlength=6)).pvalue) > 1e-3

    class Top(WordSource):  # the first word is the largest, in the rejected region for every n
        def __init__(self) -> None:
            super().__init__(seed=0)
            self.first = True

        def draw(self, n: int) -> np.ndarray:
            if self.first:
                self.first = False
                self.words += n
                return np.full(n, 2**64 - 1, dtype=np.uint64)
            return super().draw(n)

    src = Top()
    out = vs.uniform_below(np.array([3, 2**40 + 1], dtype=np.int64), src)
    assert src.words == 4 and 0 <= out[0] < 3 and 0 <= out[1] < 2**40 + 1


def test_the_continuations_are_exact() -> None:
    """Forcing a tie against every threshold (words equal to floor(c 2^64)) goes through the word-by-word
    comparison: Bernoulli(exp(-n)) still has its law."""
    src = WordSource(seed=11)
    hits = 0
    for _ in range(4000):
        r = vs._LazyUniform(vs.exp_neg_bits(1, 64), src)  # the first 64 bits tie with exp(-1)
        hits += r.below_exp(1)
    # given the tie, R < exp(-1) iff the rest of R is below the rest of exp(-1)'s expansion
    rest = Fraction(int(Decimal(-1).exp() * Decimal(2) ** 128) - (vs.exp_neg_bits(1, 64) << 64), 2**64)
    p = float(rest)
    assert abs(hits / 4000 - p) < 4 * math.sqrt(p * (1 - p) / 4000)
    assert src.continuations == 4000


def _work(draw: object, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(values, words drawn) of ``n`` single draws."""
    values, words = np.zeros(n), np.zeros(n)
    for i in range(n):
        v, w = draw()  # type: ignore[operator]
        values[i], words[i] = v, w
    return values, words


def _by_value(values: np.ndarray, work: np.ndarray) -> list[float]:
    """Mean work in the four quartiles of |value|."""
    a = np.abs(values)
    edges = np.quantile(a, [0.25, 0.5, 0.75])
    bucket = np.searchsorted(edges, a, side="right")
    return [float(work[bucket == b].mean()) for b in range(4) if (bucket == b).any()]


class _Counting(random.Random):
    """A seeded ``random.Random`` counting the uniform integers the per-draw samplers ask for."""

    calls = 0

    def randrange(self, n: int) -> int:  # type: ignore[override]
        self.calls += 1
        return super().randrange(n)


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_work_does_not_depend_on_the_value_drawn(kind: str) -> None:
    """Words drawn per draw, conditioned on the quartile of |value|: every stage is a rejection step (trials
    independent of the value accepted) or fixed work, so the conditional means agree (within 6 standard
    errors); the per-draw CKS samplers do visibly more work for larger values (the geometric count,
    Bernoulli(exp(-x)) for x > 1), which is what the test would catch."""
    n = 3000
    src = WordSource(seed=21)

    def new() -> tuple[int, int]:
        before = src.words
        f = discrete_laplace_array if kind == "laplace" else discrete_gaussian_array
        v = f(Fraction(3) if kind == "laplace" else Fraction(25), 1, src)
        return int(v[0]), src.words - before

    values, words = _work(new, n)
    means = _by_value(values, words)
    se = float(np.std(words)) / math.sqrt(n / 4)
    assert max(means) - min(means) < 6 * se, means
    assert src.continuations == 0

    rng = _Counting(5)
    ints = IntSource(rng)

    def old() -> tuple[int, int]:
        before = rng.calls
        v = discrete_laplace(Fraction(3), ints) if kind == "laplace" else discrete_gaussian(Fraction(25), ints)
        return v, rng.calls - before

    values, calls = _work(old, n)
    means_old = _by_value(values, calls)
    assert means_old[-1] - means_old[0] > 6 * float(np.std(calls)) / math.sqrt(n / 4), means_old


def test_secure_and_seeded_sources_use_the_word_sampler() -> None:
    a = dp.SeededNoise(3, exact=True).discrete_laplace(Fraction(5), (2, 3))
    b = dp.SeededNoise(3, exact=True).discrete_laplace(Fraction(5), (2, 3))
    assert a.shape == (2, 3) and a.dtype == np.int64 and (a == b).all()
    noise = dp.SecureNoise()
    g = noise.discrete_gaussian(Fraction(2**80), (1000,))
    assert g.dtype == np.int64 and noise.words.words > 1000 and 0.8 < float(np.std(g.astype(float))) / 2**40 < 1.2


class _Scripted(WordSource):
    """A seeded word source whose first words are given: forces the rare branches (a rejected word, all
    ``BERN_COLUMNS`` columns true, a geometric word equal to a threshold)."""

    def __init__(self, script: list[int], seed: int) -> None:
        super().__init__(seed=seed)
        self.script = list(script)

    def draw(self, n: int) -> np.ndarray:
        k = min(n, len(self.script))
        head, self.script = self.script[:k], self.script[k:]
        rest = super().draw(n - k) if n > k else np.zeros(0, dtype=np.uint64)
        self.words += k
        return np.concatenate([np.array(head, dtype=np.uint64), rest])


def test_one_laplace_draw_is_the_vector_samplers_draw_from_the_same_words() -> None:
    """A single draw (a scalar release) runs on Python integers: it must draw the same words, in the same order,
    and return the same value as the vectorised loop, rare branches included."""
    ties = vs._exp_thresholds()
    scripts = [[], [5, *[0] * 16], [2**64 - 1, 2**64 - 2, 4], [1, *[2**64 - 1] * 16, ties[0]],
               [3, *[2**63] * 16, ties[3]], [7, *[2**63 + 5] * 16, ties[-1], ties[-2]]]
    continued = 0
    for seed in range(600):
        for scale in (Fraction(1, 3), Fraction(7, 2), Fraction(10), Fraction(2**40 * 100 + 7, 100)):
            script = scripts[seed % len(scripts)]
            one, vec = _Scripted(script, seed), _Scripted(script, seed)
            z = vs._laplace_one(scale.numerator, scale.denominator, one)
            assert [z] == vs._laplace_vector(scale.numerator, scale.denominator, 1, vec).tolist()
            assert (one.words, one.continuations) == (vec.words, vec.continuations)
            continued += one.continuations > 0
    assert continued > 100  # the continuations were exercised
    z1 = discrete_laplace_array(Fraction(3), 1, WordSource(seed=4))
    assert z1.dtype == np.int64 and z1.tolist() == vs._laplace_vector(3, 1, 1, WordSource(seed=4)).tolist()
