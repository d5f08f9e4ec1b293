"""Mutation-testing pins of ``dpflow/interpreter/samplers.py`` (2026-11-29): the exact law of CKS20's Bernoulli steps
(and, after it, of the word-level steps of ``vector_samplers.py``: rational bounds on e^n, lazily compared
uniforms, whole-word integers, scripted words; and at the end the noise sources of ``noise.py``).

The samplers' only randomness is ``IntSource.below(n)``, and Bernoulli(num / den) is ``below(den) < num``.
:func:`law` runs a sampler on every sequence of choices (a uniform draw, or a patched step branching on its outcomes
with their exact weights) down to a probability ``floor`` and returns the probability of each output over the
explored sequences and the mass left unexplored: the true law lies between, so the test pins the law itself
(Bernoulli(exp(-x)) for x below and above 1, to within 1e-12; the discrete Laplace at scales 1 and 2, built on
it, to within about 1e-5), not a sample of it.  Finer scales and the discrete Gaussian need a coarser tree than
every step of the loops: not yet.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from dpflow.interpreter import samplers
from dpflow.interpreter.samplers import IntSource, bernoulli_exp, discrete_gaussian, discrete_laplace, uniform_int_of


class _Branch(Exception):
    def __init__(self, weights: tuple[float, ...]) -> None:
        self.weights = weights


class _Tape:
    """Replays a prefix of choices; a uniform draw below n is a choice among n equal weights, and each patched
    step (a Bernoulli, or a lower-level sampler) a choice among its outcomes with their exact weights."""

    def __init__(self, prefix: tuple[int, ...]) -> None:
        self.prefix, self.i = prefix, 0

    def choose(self, weights: tuple[float, ...]) -> int:
        if self.i == len(self.prefix):
            raise _Branch(weights)
        self.i += 1
        return self.prefix[self.i - 1]

    def below(self, n: int) -> int:
        return self.choose((1.0,) * n)

    randrange = below


def _bernoulli(num: int, den: int, src: Any) -> bool:  # Bernoulli(num / den), the step bernoulli_exp builds on
    assert 0 <= num <= den
    return src.choose((num, den - num)) == 0


def law(sampler: Callable[[Any], Any], floor: float, **steps: Any) -> tuple[dict[Any, float], float]:
    """Exact output probabilities over the choice sequences of probability >= ``floor`` (each lower-level step in
    ``steps`` replaced by an exact branch on its outcomes), and the unexplored mass."""
    out: dict[Any, float] = defaultdict(float)
    lost = 0.0
    stack: list[tuple[tuple[int, ...], float]] = [((), 1.0)]
    with pytest.MonkeyPatch.context() as mp:
        for name, fake in steps.items():
            mp.setattr(samplers, name, fake)
        while stack:
            prefix, p = stack.pop()
            try:
                v = sampler(_Tape(prefix))
            except _Branch as b:
                total = sum(b.weights)
                for i, w in enumerate(b.weights):
                    q = p * w / total
                    if q >= floor:
                        stack.append((prefix + (i,), q))
                    else:
                        lost += q
                continue
            out[v] += p
    assert sum(out.values()) + lost == pytest.approx(1.0, abs=1e-9)
    return dict(out), lost


def _within(got: dict[Any, float], lost: float, want: dict[Any, float]) -> None:
    assert lost < 1e-6
    for k, p in want.items():
        g = got.get(k, 0.0)
        assert g - 1e-12 <= p <= g + lost + 1e-12, (k, g, p, lost)


@pytest.mark.parametrize("x", [Fraction(0), Fraction(1, 2), Fraction(1), Fraction(3, 2), Fraction(7, 3)])
def test_bernoulli_exp_is_exactly_exp_minus_x(x: Fraction) -> None:
    got, lost = law(lambda src: bernoulli_exp(x, src), 1e-12, _bernoulli=_bernoulli)
    _within(got, lost, {True: math.exp(-x), False: -math.expm1(-x)})


def _bernoulli_exp(x: Fraction, src: Any) -> bool:  # Bernoulli(exp(-x)), pinned above: the Laplace sampler's step
    return src.choose((math.exp(-x), -math.expm1(-x))) == 0


@pytest.mark.parametrize(("scale", "floor"), [(Fraction(1), 1e-9), (Fraction(2), 1e-8)])
def test_discrete_laplace_law(scale: Fraction, floor: float) -> None:
    """CKS20 Alg. 2: a fair sign, the geometric magnitude ``(v t + u) // s`` of the fast/slow pair, (-, 0)
    rejected: P(k) = (1 - a) / (1 + a) a^|k| with a = exp(-1 / scale); every value an int.  (The tree of a
    scale with denominator s > 1 is too wide to explore: its magnitude step is pinned by a script below.)"""
    got, lost = law(lambda src: discrete_laplace(scale, src), floor, bernoulli_exp=_bernoulli_exp,
                    _bernoulli=_bernoulli)
    a = math.exp(-1 / scale)
    assert lost < 1e-4 and all(type(k) is int for k in got)
    for k in range(-4, 5):
        g, p = got.get(k, 0.0), (1 - a) / (1 + a) * a ** abs(k)
        assert g - 1e-9 <= p <= g + lost + 1e-9, (k, g, p, lost)


def test_bernoulli_is_a_uniform_below_den_against_num() -> None:
    for num, den in ((0, 3), (1, 3), (3, 3), (2, 7)):
        got, lost = law(lambda src, num=num, den=den: samplers._bernoulli(num, den, IntSource(src)), 0.0)
        assert lost == 0 and got.get(True, 0.0) == pytest.approx(num / den, abs=1e-15)


def test_refusals_and_the_first_draws() -> None:
    with pytest.raises(ValueError, match="^discrete_laplace needs a positive scale$"):
        discrete_laplace(Fraction(0), IntSource())
    for bad in (Fraction(-1), Fraction(0)):
        with pytest.raises(ValueError, match="^discrete_gaussian needs a positive variance$"):
            discrete_gaussian(bad, IntSource())


@pytest.mark.parametrize(("sigma2", "t"), [(Fraction(1, 2), 1), (Fraction(1), 2), (Fraction(9, 4), 2),
                                           (Fraction(4), 3), (Fraction(99, 4), 5), (Fraction(10**6 + 1), 1001)])
def test_discrete_gaussian_proposal_and_acceptance(sigma2: Fraction, t: int) -> None:
    """CKS20 Alg. 3, step by step: the proposal is a discrete Laplace of scale t = floor(sqrt(sigma2)) + 1 and a
    proposal y is accepted with Bernoulli(exp(-(|y| - sigma2/t)^2 / (2 sigma2))) exactly; a rejection draws anew.
    The accepted law, P(y) ~ exp(-|y|/t - (|y| - sigma2/t)^2/(2 sigma2)) ~ exp(-y^2 / (2 sigma2)), is CKS20's."""
    proposals = iter([-3, 0, 5, 2])
    scales: list[Fraction] = []
    biases: list[Fraction] = []

    source = IntSource()

    def laplace(scale: Fraction, src: Any) -> int:
        assert src is source
        scales.append(scale)
        return next(proposals)

    def accept(x: Fraction, src: Any) -> bool:
        assert src is source
        biases.append(x)
        return len(biases) == 3  # the first two proposals are rejected

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(samplers, "discrete_laplace", laplace)
        mp.setattr(samplers, "bernoulli_exp", accept)
        assert discrete_gaussian(sigma2, source) == 5
    assert scales == [Fraction(t)] * 3 and all(type(x) is Fraction for x in scales)
    assert biases == [(y - sigma2 / t) ** 2 / (2 * sigma2) for y in (3, 0, 5)]


def test_uniform_int_gives_up_after_16_rejections() -> None:
    """After 16 rejected attempts (each below probability 2^-16) the last draw is reduced modulo the size."""
    calls: list[tuple[int, ...]] = []

    def ones(shape: tuple[int, ...]) -> np.ndarray:
        calls.append(shape)
        return np.ones(shape)

    size = 3 * 2**60  # the all-ones draw 2**78 - 1 is above the limit 262143 * 2**60
    assert uniform_int_of(ones, size) == (2**78 - 1) % size
    assert len(calls) == 16


def test_uniform_int_rejects_the_limit_itself_and_draws_nothing_for_one_value() -> None:
    """Accepted draws are those below limit = (2^78 // size) size: a draw equal to it is rejected (else the value
    0 would have one extra draw).  Sizes 0 and 1 have one answer and draw nothing; size 2 draws."""
    size = 3 * 2**60
    top = (2**78 - 2**60) >> 52  # the limit's top 26 bits (its other 52 are 0)
    script = iter([[top / 2**26, 0.0, 0.0], [0.25, 0.0, 0.5]])
    assert uniform_int_of(lambda shape: np.array(next(script)), size) == 2**60 + 2**25  # the second draw

    def nothing(shape: tuple[int, ...]) -> np.ndarray:
        raise AssertionError("no draw for a single value")

    assert uniform_int_of(nothing, 1) == uniform_int_of(nothing, 0) == 0
    assert uniform_int_of(lambda shape: np.ones(shape), 2) == 1  # 2**78 - 1 is odd


def test_uniform_variates_are_float64_of_the_same_shape() -> None:
    for lap in (np.array(0.5), np.zeros((2, 3)), np.array([1, -2])):
        u = samplers.uniform_of_laplace(lap)
        assert u.dtype == np.float64 and u.shape == lap.shape
        assert u.ravel().tolist() == [math.exp(-abs(float(v))) for v in lap.ravel()]


class _Script:
    """An ``IntSource`` stand-in that returns scripted uniform draws and records their bounds."""

    def __init__(self, draws: list[int]) -> None:
        self.draws, self.bounds = iter(draws), []  # type: list[int]

    def below(self, n: int) -> int:
        self.bounds.append(n)
        return next(self.draws)


def test_geometric_magnitude_of_a_fractional_scale() -> None:
    """CKS20 Alg. 2's fast geometric for exp(-s/t) (scale t/s = 3/2: s = 2, t = 3): u uniform below t, kept with
    Bernoulli(exp(-u/t)) (else drawn anew), v ~ Geometric(1 - exp(-1)) by the slow loop, magnitude (v t + u) // s;
    the sign is Bernoulli(1/2) first."""
    calls: list[Fraction] = []
    accept = iter([False, True, True, True, False])  # u = 1 rejected, u = 2 kept, then v = 2

    def bexp(x: Fraction, src: Any) -> bool:
        calls.append(x)
        return next(accept)

    src = _Script([1, 1, 2])  # sign: 1 (not negative: below(2) < 1 is false), then u = 1, u = 2
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(samplers, "bernoulli_exp", bexp)
        y = discrete_laplace(Fraction(3, 2), src)  # type: ignore[arg-type]
    assert y == (2 * 3 + 2) // 2 == 4 and type(y) is int
    assert src.bounds == [2, 3, 3]
    assert calls == [Fraction(1, 3), Fraction(2, 3), 1, 1, 1] and type(calls[2]) is Fraction
    accept = iter([True, True, False])  # u = 1 kept, v = 1: (3 + 1) // 2 = 2, negative
    calls.clear()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(samplers, "bernoulli_exp", bexp)
        assert discrete_laplace(Fraction(3, 2), _Script([0, 1])) == -2  # type: ignore[arg-type]
    assert calls == [Fraction(1, 3), 1, 1]


# --------------------------------------------------------------------------- vector_samplers.py's exact helpers


def test_exp_pos_bounds_are_the_taylor_sum_and_its_geometric_remainder() -> None:
    """lo = sum_{k < terms} n^k / k!, hi = lo + (n^terms / terms!) / (1 - n / (terms + 1)), and lo <= e^n <= hi."""
    import mpmath

    from dpflow.interpreter.vector_samplers import _exp_pos_bounds

    assert _exp_pos_bounds(1, 3) == (Fraction(5, 2), Fraction(5, 2) + Fraction(1, 6) / (1 - Fraction(1, 4)))
    assert _exp_pos_bounds(2, 4) == (Fraction(19, 3), Fraction(19, 3) + Fraction(2, 3) / (1 - Fraction(2, 5)))
    mpmath.mp.prec = 200
    for n, terms in ((1, 2), (1, 5), (3, 5), (3, 12), (7, 20), (40, 100)):
        lo, hi = _exp_pos_bounds(n, terms)
        e = mpmath.exp(n)
        assert mpmath.mpf(lo.numerator) / lo.denominator <= e <= mpmath.mpf(hi.numerator) / hi.denominator


class _Words:
    """A stand-in ``WordSource`` handing out scripted 64-bit words."""

    def __init__(self, words: list[int]) -> None:
        self.words, self.continuations, self._next = 0, 0, iter(words)

    def word(self) -> int:
        self.words += 1
        return next(self._next)

    def int_source(self) -> IntSource:
        from dpflow.interpreter.vector_samplers import _WordRandom

        return IntSource(_WordRandom(self))  # type: ignore[arg-type]


def test_lazy_uniform_compares_word_by_word() -> None:
    """R < f is decided by R's first 64 bits against floor(f 2^64), and on a tie by the next word against the next
    64 bits of f (one more word drawn, one continuation counted)."""
    from dpflow.interpreter.vector_samplers import _LazyUniform

    f = Fraction(1, 3)
    t = 2**64 // 3  # f's first word; its second is 0x5555...5 as well
    for first, rest, want in ((t - 1, [], True), (t + 1, [], False), (t, [0], True), (t, [2**64 - 1], False),
                              (t, [t, 0], True)):
        src = _Words(rest)
        assert _LazyUniform(first, src).below(f) is want  # type: ignore[arg-type]
        assert src.words == len(rest) and src.continuations == 1
    assert _LazyUniform(0, _Words([])).below(Fraction(1)) is True  # type: ignore[arg-type]
    assert _LazyUniform(2**64 - 1, _Words([])).below(Fraction(0)) is False  # type: ignore[arg-type]


def test_whole_word_integers_draw_the_words_that_cover_n_minus_one() -> None:
    from dpflow.interpreter.vector_samplers import WordSource

    for n, words in ((1, 0), (2, 1), (3, 1), (2**64, 1), (2**64 + 1, 2), (2**128, 2), (2**128 + 1, 3)):
        src = WordSource(seed=5)
        rng = src.int_source()
        assert 0 <= rng.below(n) < n and src.words == words, n


class _Drawn(_Words):
    """A stand-in ``WordSource`` whose ``draw(n)`` hands out scripted uint64 arrays."""

    def __init__(self, arrays: list[list[int]], words: list[int] | None = None) -> None:
        super().__init__(words or [])
        self._arrays = iter(arrays)

    def draw(self, n: int) -> np.ndarray:
        a = np.array(next(self._arrays), dtype=np.uint64)
        assert a.size == n
        self.words += n
        return a


@pytest.mark.parametrize("offset", [-300, -1, 1, 300])
def test_bern_exp_frac_compares_words_in_integers(offset: int) -> None:
    """Column k of Bernoulli(exp(-f)) is Bernoulli(1/k) and R_k < f with R_k's first word against floor(f 2^64) in
    uint64: a word a few units from the threshold (one float64 apart) is decided at once, with no continuation."""
    from dpflow.interpreter import vector_samplers as V

    f64 = 2**64 // 3  # f = 1/3
    c = np.ones((1, V.BERN_COLUMNS), dtype=np.int64)
    c[0, 0] = 0  # column 1's Bernoulli(1/1) succeeds, column 2's fails
    src = _Drawn([[f64 + offset] + [0] * (V.BERN_COLUMNS - 1)])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(V, "uniform_below", lambda n, s: c)
        out = V._bern_exp_frac(np.array([1], dtype=object), 3, src)  # type: ignore[arg-type]
    # R_1 < 1/3 (the word below the threshold): K = 2, even, False; else K = 1, odd, True
    assert out.tolist() == [offset > 0] and src.continuations == 0


def test_bern_exp_frac_resolves_a_tie_with_the_next_word() -> None:
    """A first word equal to floor(f 2^64) decides nothing: the next word is compared with f's next 64 bits."""
    from dpflow.interpreter import vector_samplers as V

    f64 = 2**64 // 3
    c = np.ones((1, V.BERN_COLUMNS), dtype=np.int64)
    c[0, 0] = 0
    for nxt, want in ((0, False), (2**64 - 1, True)):  # R_1 below 1/3 (K = 2, False), or above (K = 1, True)
        src = _Drawn([[f64] + [0] * (V.BERN_COLUMNS - 1)], [nxt])
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(V, "uniform_below", lambda n, s: c)
            out = V._bern_exp_frac(np.array([1], dtype=object), 3, src)  # type: ignore[arg-type]
        assert out.tolist() == [want] and src.continuations == 1 and src.words == V.BERN_COLUMNS + 1


def test_whole_word_integers_reject_from_the_largest_multiple_and_join_words_high_first() -> None:
    from dpflow.interpreter.vector_samplers import _WordRandom

    src = _Words([2**64 - 1, 5])  # n = 3: the limit is 2^64 - 1 itself, so the first word is rejected
    assert _WordRandom(src).randrange(3) == 2 and src.words == 2  # type: ignore[arg-type]
    src = _Words([1, 2])  # n = 2^64 + 1 takes two words, the first the high one: r = 2^64 + 2
    assert _WordRandom(src).randrange(2**64 + 1) == 1 and src.words == 2  # type: ignore[arg-type]


@pytest.mark.parametrize(("script", "want", "words", "continuations"), [
    ([0, 0, 1], False, 19, 2),  # K = 17 + 1 = 18: Bernoulli(1/17) (0 mod 17) and R < f, then Bernoulli(1/18) fails
    ([0, 0, 18, 2**64 - 1], False, 20, 3),  # Bernoulli(1/18) succeeds (18 mod 18), R > f ends it: K = 18
    ([0, 0, 0, 0, 1], True, 21, 3),  # two more columns: K = 19
    ([5], True, 17, 1),  # Bernoulli(1/17) fails at once (5 mod 17): K = 17
])
def test_bern_exp_frac_continues_past_the_last_column_exactly(script: list[int], want: bool, words: int,
                                                              continuations: int) -> None:
    """Every column succeeding (probability < 2^-44) continues CKS20's loop one column at a time: column kk is
    Bernoulli(1/kk) (a whole-word uniform below kk) and R_kk < f (a lazily compared uniform)."""
    from dpflow.interpreter import vector_samplers as V

    c = np.zeros((1, V.BERN_COLUMNS), dtype=np.int64)  # every Bernoulli(1/k) succeeds
    src = _Drawn([[0] * V.BERN_COLUMNS], script)  # and every R_k < 1/3
    src.continuations = 5  # counted on from where they were
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(V, "uniform_below", lambda n, s: c)
        out = V._bern_exp_frac(np.array([1], dtype=object), 3, src)  # type: ignore[arg-type]
    assert out.tolist() == [want] and src.words == words and src.continuations == 5 + continuations
    c[0, -1] = 1  # column 16 fails: K = 16, no continuation
    src = _Drawn([[0] * V.BERN_COLUMNS])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(V, "uniform_below", lambda n, s: c)
        assert V._bern_exp_frac(np.array([1], dtype=object), 3, src).tolist() == [False]  # type: ignore[arg-type]
    assert src.continuations == 0


def test_bern_exp_int_one_word_against_the_table() -> None:
    """Bernoulli(exp(-n)) for integers: true for n = 0, else the word against floor(exp(-n) 2^64) (the table up to
    GEOM_TABLE, 0 beyond it, where only a lazily extended word of 0 can be below)."""
    from dpflow.interpreter import vector_samplers as V

    n = np.array([0, 1, V.GEOM_TABLE - 1, V.GEOM_TABLE, V.GEOM_TABLE, V.GEOM_TABLE + 1, 10**6], dtype=object)
    t = [V.exp_neg_bits(int(v), 64) for v in n[1:5]]
    w = [2**64 - 1, t[0] - 1, t[1], t[2] - 1, t[3] + 1, 1, 1]
    src = _Drawn([w], [0])  # the tie at n = GEOM_TABLE - 1 takes one more word: 0, below exp(-n)'s next bits
    out = V._bern_exp_int(n, src)  # type: ignore[arg-type]
    assert out.tolist() == [True, True, True, True, False, False, False]
    assert src.continuations == 1 and src.words == 8
    assert V._bern_exp_int(np.array([], dtype=object), _Drawn([[]])).shape == (0,)  # type: ignore[arg-type]


def test_discrete_gaussian_array_refuses_and_hands_huge_scales_to_the_exact_per_draw_sampler() -> None:
    """A proposal scale t = floor(sigma) + 1 of 2^56 or more (beyond exact int64 arithmetic) draws each value with
    the per-draw CKS20 sampler on an IntSource over the same words; below it the vectorised path runs."""
    from dpflow.interpreter import vector_samplers as V

    for bad in (Fraction(0), Fraction(-1)):
        with pytest.raises(ValueError, match="^discrete_gaussian_array needs a positive variance$"):
            V.discrete_gaussian_array(bad, 3, V.WordSource(seed=1))
    calls: list[Fraction] = []

    def per_draw(sigma2: Fraction, rng: IntSource) -> int:
        calls.append(sigma2)
        return rng.below(7)

    src = V.WordSource(seed=2)
    big = Fraction((V._MAX_INT - 1) ** 2)  # t = 2^56 exactly
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(V, "discrete_gaussian", per_draw)
        out = V.discrete_gaussian_array(big, 3, src)
        assert out.dtype == object and len(out) == 3 and all(0 <= v < 7 for v in out)
        assert calls == [big] * 3 and src.words == 3  # one whole word per draw below 7
        small = V.discrete_gaussian_array(Fraction(4), 2, V.WordSource(seed=3))
    assert len(calls) == 3 and small.dtype == np.int64


@pytest.mark.parametrize("second", [80, 1])  # 80: the modulus is t kk = 90 (not 80); 1: not below u = 1
def test_bern_exp_ratio_columns_and_their_continuation(second: int) -> None:
    """Bernoulli(exp(-u/t)) for integers u < t: column k succeeds when a uniform below t k is below u (strictly);
    K, the first failure, decides by its parity; a row of 16 successes continues with whole-word uniforms below
    t kk, kk = 17, 18, ..."""
    from dpflow.interpreter import vector_samplers as V

    a = np.zeros((2, V.BERN_COLUMNS), dtype=np.int64)
    a[0, :2] = [2, 9]  # row 0, u = 2: column 1 fails (2 is not below 2): K = 1, True
    seen: list[np.ndarray] = []

    def uniform_below(n: np.ndarray, s: Any) -> np.ndarray:
        seen.append(n)
        return a

    a = np.vstack([a, np.zeros((1, V.BERN_COLUMNS), dtype=np.int64)])
    a[2, -1] = 4  # row 2, u = 1: only column 16 fails: K = 16, even, no continuation
    src = _Words([0, second])  # row 1 (all 16 succeed, u = 1): 0 mod 85 < 1 succeeds, the second fails: K = 18
    src.continuations = 5  # counted on from where they were
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(V, "uniform_below", uniform_below)
        out = V._bern_exp_ratio(np.array([2, 1, 1]), 5, src)  # type: ignore[arg-type]
    assert out.tolist() == [True, False, False] and src.words == 2 and src.continuations == 6
    assert seen[0].tolist() == [[5 * k for k in range(1, V.BERN_COLUMNS + 1)]] * 3


def test_uniform_below_rejects_exactly_the_top_2_64_mod_n_words() -> None:
    """A word is accepted below the largest multiple of n under 2^64, i.e. below 2^64 - (2^64 mod n), and reduced
    mod n; n = 3: 2^64 - 2 is accepted (value 2), 2^64 - 1 rejected and redrawn; a power of two rejects nothing."""
    from dpflow.interpreter.vector_samplers import uniform_below

    src = _Drawn([[2**64 - 2, 2**64 - 1, 2**64 - 1], [7]])
    assert uniform_below(np.array([3, 3, 4]), src).tolist() == [2, 1, 3]  # type: ignore[arg-type]
    assert src.words == 4


def test_geometric_exp1_counts_the_table_entries_above_the_word() -> None:
    """V = #{v >= 1 : R < exp(-v)}: one word against floor(exp(-v) 2^64) for v = 1..44; a tie, or a word below the
    whole table, continues word by word (R < exp(-v) decided exactly)."""
    from dpflow.interpreter import vector_samplers as V

    table = [V.exp_neg_bits(v, 64) for v in range(1, V.GEOM_TABLE + 1)]
    w = [2**64 - 1, table[0], table[0] - 1, table[3] - 1, table[3] + 1, table[3], table[3], 0]
    src = _Drawn([w], [0, 0, 2**64 - 1, 2**64 - 1])  # next words of the ties (exp(-1), exp(-4) twice), the 0 word
    v = V._geometric_exp1(len(w), src)  # type: ignore[arg-type]
    assert v.tolist() == [0, 1, 1, 4, 3, 4, 3, V.GEOM_TABLE] and v.dtype == np.int64
    assert src.words == len(w) + 4 and src.continuations == 4


def test_word_source_reads_the_os_csprng_unless_seeded() -> None:
    """``WordSource()`` (every SecureNoise run) reads os.urandom, never a generator; a seed makes a PCG64."""
    from dpflow.interpreter import vector_samplers as V

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(V.os, "urandom", lambda k: bytes(range(1, k + 1)))
        src = V.WordSource()
        assert src.draw(2).tolist() == [int.from_bytes(bytes(range(1, 9)), "little"),
                                        int.from_bytes(bytes(range(9, 17)), "little")]
    assert V.WordSource()._gen is None and isinstance(V.WordSource(seed=1)._gen, np.random.PCG64)


def test_uniform_below_rejects_the_top_words_on_every_redraw() -> None:
    """A redrawn word is tested against the same limit 2^64 - (2^64 mod n): 2^64 - 1 rejected again for n = 3."""
    from dpflow.interpreter.vector_samplers import uniform_below

    src = _Drawn([[2**64 - 1], [2**64 - 1], [2**64 - 2]])
    assert uniform_below(np.array([3]), src).tolist() == [2] and src.words == 3  # type: ignore[arg-type]


def test_bern_exp_int_resolves_a_tie_at_n_one() -> None:
    """A word equal to floor(exp(-1) 2^64) is decided by the next word, for n = 1 as for any n >= 1."""
    from dpflow.interpreter import vector_samplers as V

    t1 = V.exp_neg_bits(1, 64)
    for nxt, want in ((0, True), (2**64 - 1, False)):
        src = _Drawn([[t1]], [nxt])
        assert V._bern_exp_int(np.array([1], dtype=object), src).tolist() == [want]  # type: ignore[arg-type]
        assert src.continuations == 1 and src.words == 2


def test_discrete_laplace_array_refuses_and_hands_huge_scales_to_the_exact_per_draw_sampler() -> None:
    """A numerator or a denominator of 2^56 or more (scale = t/s) draws each value with the per-draw CKS20 sampler
    (object output); below it the vectorised path runs."""
    from dpflow.interpreter import vector_samplers as V

    for bad in (Fraction(0), Fraction(-1)):
        with pytest.raises(ValueError, match="^discrete_laplace_array needs a positive scale$"):
            V.discrete_laplace_array(bad, 3, V.WordSource(seed=1))
    calls: list[Fraction] = []

    def per_draw(scale: Fraction, rng: IntSource) -> int:
        calls.append(scale)
        return rng.below(7)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(V, "discrete_laplace", per_draw)
        for scale in (Fraction(V._MAX_INT), Fraction(1, V._MAX_INT), Fraction(V._MAX_INT + 1, V._MAX_INT - 1)):
            calls.clear()
            src = V.WordSource(seed=2)
            out = V.discrete_laplace_array(scale, 3, src)
            assert out.dtype == object and len(out) == 3 and all(0 <= v < 7 for v in out)
            assert calls == [scale] * 3 and src.words == 3
        calls.clear()
        small = V.discrete_laplace_array(Fraction(V._MAX_INT - 1, 3), 2, V.WordSource(seed=3))
    assert calls == [] and small.dtype == np.int64


def _laplace_scripted(scale: Fraction, u: list[int], v: list[int], signs: list[int]) -> np.ndarray:
    """discrete_laplace_array's vectorised loop with its steps scripted: U (accepted at once), V and the sign words
    (a single draw runs the same steps on Python integers: ``test_vector_samplers`` checks them equal)."""
    from dpflow.interpreter import vector_samplers as V

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(V, "uniform_below", lambda n, s: np.array(u, dtype=np.int64))
        mp.setattr(V, "_bern_exp_ratio", lambda c, t, s: np.ones(c.size, dtype=bool))
        mp.setattr(V, "_geometric_exp1", lambda m, s: np.array(v, dtype=np.int64))
        return V._laplace_vector(scale.numerator, scale.denominator, len(u), _Drawn([signs]))  # type: ignore[arg-type]


def test_discrete_laplace_magnitude_is_exact_in_integers_at_every_size() -> None:
    """The magnitude (V t + U) // s in int64 (V below the table's end) and in Python integers beyond (V >= 44,
    probability < 2^-63), the output turned to Python integers when a magnitude reaches 2^62; no float touches
    them (U = 2^55 + 1 is not a float64)."""
    from dpflow.interpreter import vector_samplers as V

    t, s = 2**55 + 3, 3
    u, v = [2**55 + 1, 5, 1], [2**10, V.GEOM_TABLE, V.GEOM_TABLE]
    out = _laplace_scripted(Fraction(t, s), u, v, [0, 2**63, 0])
    want = [(2**10 * t + 2**55 + 1) // 3, -((44 * t + 5) // 3), (44 * t + 1) // 3]
    assert out.dtype == object and out.tolist() == want and all(type(x) is int for x in out)
    out = _laplace_scripted(Fraction(2**55 + 3), [2**55 + 1], [0], [0])  # the int64 path: U itself
    assert out.dtype == np.int64 and out.tolist() == [2**55 + 1]
    out = _laplace_scripted(Fraction(2**55), [0], [128], [0])  # exactly 2^62: Python integers
    assert out.dtype == object and out.tolist() == [2**62]
    out = _laplace_scripted(Fraction(2**55), [2**55 - 1], [127], [2**63])  # 2^62 - 1 (V >= 44): int64 still
    assert out.dtype == np.int64 and out.tolist() == [-(2**62 - 1)]
    for z, kind in ((2**62 - 1, np.int64), (-(2**62), object), (2**62, object)):  # a single draw: the same rule
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(V, "_laplace_one", lambda t, s, src, z=z: z)
            one = V.discrete_laplace_array(Fraction(3), 1, V.WordSource(seed=0))
        assert one.dtype == kind and one.tolist() == [z]


# ----------------------------------------------------------------- dpflow/interpreter/noise.py (round 11)

def test_secure_continuous_draws_come_from_256_fresh_os_bits_per_draw() -> None:
    """SecureNoise's continuous draws: a PCG64DXSM generator seeded with ``secrets.randbits(256)`` for every call,
    centred at 0 with the scale asked for; a scale of 0 draws nothing, a negative one is refused by numpy."""
    from dpflow.interpreter import noise as N

    asked: list[int] = []

    def randbits(k: int) -> int:
        asked.append(k)
        return 12345

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(N.secrets, "randbits", randbits)
        got = N.SecureNoise().normal(2.5, (2, 3))
        lap = N.SecureNoise().laplace(0.5, (4,))
        assert N.SecureNoise().normal(0.0, (2,)).tolist() == [0.0, 0.0] and asked == [256, 256]
        assert N.SecureNoise().laplace(0.0, (1, 2)).tolist() == [[0.0, 0.0]] and asked == [256, 256]
    ref = np.random.Generator(np.random.PCG64DXSM(12345))
    assert got.shape == (2, 3) and np.array_equal(got, ref.normal(0.0, 2.5, (2, 3)))
    assert np.array_equal(lap, np.random.Generator(np.random.PCG64DXSM(12345)).laplace(0.0, 0.5, (4,)))
    for draw in (N.SecureNoise().normal, N.SecureNoise().laplace, N.SeededNoise(1).normal, N.SeededNoise(1).laplace):
        with pytest.raises(ValueError):
            draw(-1.0, (2,))
        assert np.isnan(draw(float("nan"), (2,))).all()


def test_seeded_draws_are_reproducible_and_zero_scales_do_not_advance_the_stream() -> None:
    from dpflow.interpreter.noise import SeededNoise

    s = SeededNoise(7)
    assert s.normal(0.0, (3,)).shape == (3,) and s.laplace(0.0, (2, 2)).shape == (2, 2)
    ref = np.random.default_rng(7)
    assert np.array_equal(s.normal(1.5, (2,)), ref.normal(0.0, 1.5, (2,)))
    assert np.array_equal(s.laplace(0.5, (2,)), ref.laplace(0.0, 0.5, (2,)))
    assert s.seed == 7 and not s.exact and SeededNoise(7, exact=True).exact
    assert s.description == "seeded (seed=7, continuous floating-point samplers): NOT FOR RELEASE"
    assert SeededNoise(3, exact=True).description == "seeded (seed=3, exact discrete samplers): NOT FOR RELEASE"


def test_exact_draws_keep_their_shape_and_uniform_int_draws_a_word_only_for_two_values_or_more() -> None:
    from dpflow.interpreter.noise import SeededNoise, _size

    s = SeededNoise(4, exact=True)
    assert s.discrete_gaussian(Fraction(4), (2, 3)).shape == (2, 3)
    assert s.discrete_laplace(Fraction(2), (3, 1)).shape == (3, 1)
    assert _size(()) == 1 and _size((2, 0)) == 0 and _size((3, 4)) == 12
    words = s.words.words
    assert s.uniform_int(1) == 0 and s.uniform_int(0) == 0 and s.words.words == words
    assert {s.uniform_int(2) for _ in range(64)} == {0, 1} and s.words.words == words + 64
    assert s.uniform_words(3).dtype == np.uint64 and s.words.words == words + 67


def test_derived_uniform_words_scale_a_uniform_by_2_64_below_its_top() -> None:
    """Words from a uniform on (0, 1] (sources with no word stream): u 2^64, capped at the largest float below 2^64
    (2^64 - 2048), as uint64."""
    from dpflow.interpreter.noise import LaplaceDerivedDraws

    class Fixed(LaplaceDerivedDraws):
        def uniform(self, shape: tuple[int, ...]) -> np.ndarray:  # type: ignore[override]
            return np.array([1.0, 0.5, 3 * 2.0**-64])[: shape[0]]

    out = Fixed().uniform_words(3)
    assert out.dtype == np.uint64 and out.tolist() == [2**64 - 2048, 2**63, 3]

    class Single(LaplaceDerivedDraws):  # float32 variates: scaled in float64 (in float32 the cap rounds to 2^64)
        def uniform(self, shape: tuple[int, ...]) -> np.ndarray:  # type: ignore[override]
            return np.ones(shape, dtype=np.float32)

    with np.errstate(invalid="raise"):
        assert Single().uniform_words(1).tolist() == [2**64 - 2048]
