"""Vectorised exact discrete Laplace and discrete Gaussian samplers with output-independent work.

The algorithms are Canonne-Kamath-Steinke 2020 (CKS20) Algorithms 1-3, as in
:mod:`dpflow.interpreter.samplers`, drawn for a whole array at once with numpy integer arithmetic.
Only uniform 64-bit words are drawn (:class:`WordSource`: the OS CSPRNG, or a seeded PCG64 for tests);
every accept test compares integers, so no floating-point operation decides a draw.

Two kinds of comparison are used:

* a Bernoulli(a / m) with integers ``a < m < 2^63``: a uniform integer below ``m`` (rejection from a
  64-bit word, :func:`uniform_below`) against ``a``;
* a Bernoulli(c) for a real ``c`` in [0, 1] known to any precision (``exp(-n)`` for an integer n, or a
  rational): the 64-bit word W is the first 64 bits of a uniform real R, compared with ``floor(c 2^64)``;
  W below decides "R < c", W above decides "R > c", and only W equal to it (probability 2^-64) reads
  further words (:class:`_LazyUniform`).  The decision is that of the real R: exact.

**Work independent of the value drawn.**  Every stage is either a rejection step whose number of trials
is independent of the value it accepts (a geometric count: the accepted proposal is independent of how
many were rejected), or a fixed amount of work: the CKS loop for Bernoulli(exp(-x)), x in [0, 1], always
draws ``BERN_COLUMNS`` columns, the geometric count of the discrete Laplace is one word compared with a
table, and Bernoulli(exp(-floor x)) is one word.  Only two events of small probability do value-dependent
extra work, both exact continuations of the same draw: the loop needing more than ``BERN_COLUMNS`` columns
(probability at most 1/BERN_COLUMNS! < 2^-44 per loop) and a word equal to a threshold or a geometric
count of at least ``GEOM_TABLE`` (probability < 2^-58 per draw).  :class:`WordSource` counts the words and
the continuations, so tests measure the dependence (docs/assurance.md).  This is OpenDP's approach
(a fixed number of trials, constant work per trial) with a stated exception probability, not a proof
of constant time in the micro-architectural sense (Python and numpy are not constant-time).

>>> src = WordSource(seed=0)
>>> z = discrete_laplace_array(Fraction(3), 5, src)
>>> z.dtype == np.int64 and z.shape == (5,)
True
"""

from __future__ import annotations

import bisect
import functools
import math
import os
from fractions import Fraction

import numpy as np

from dpflow.interpreter.samplers import IntSource, discrete_gaussian, discrete_laplace

__all__ = ["BERN_COLUMNS", "GEOM_TABLE", "WordSource", "discrete_gaussian_array", "discrete_laplace_array",
           "uniform_below"]

BERN_COLUMNS = 16
"""Columns of the CKS loop for Bernoulli(exp(-x)), x in [0, 1], always drawn: the loop runs past them with
probability x^16 / 16! < 2^-44."""

GEOM_TABLE = 44
"""Thresholds floor(exp(-v) 2^64), v = 1..44, for the geometric count (one word); a count of 44 or more
(probability exp(-44) < 2^-63) continues word by word."""

_MAX_INT = 2**56
"""Largest scale numerator of the vectorised paths (products stay below 2^63); beyond, the per-draw
samplers of :mod:`dpflow.interpreter.samplers` are used."""

_TWO64 = 2**64


class WordSource:
    """Uniform 64-bit words: the only randomness of the vectorised samplers.

    ``WordSource()`` reads the OS CSPRNG (:func:`os.urandom`); ``WordSource(seed=s)`` a seeded PCG64, for
    tests only.  ``words`` counts the words drawn and ``continuations`` the rare value-dependent
    continuations (module docstring), so tests can measure the work of a draw.

    >>> w = WordSource(seed=1); _ = w.draw(3); w.words
    3
    """

    def __init__(self, seed: int | None = None) -> None:
        self._gen = None if seed is None else np.random.PCG64(seed)
        self.words = 0
        self.continuations = 0

    def draw(self, n: int) -> np.ndarray:
        """``n`` uniform uint64 words."""
        self.words += n
        if self._gen is None:
            return np.frombuffer(os.urandom(8 * n), dtype=np.uint64).copy()
        out: np.ndarray = self._gen.random_raw(n).astype(np.uint64)
        return out

    def word(self) -> int:
        """One uniform word as a Python int."""
        return int(self.draw(1)[0])

    def int_source(self) -> IntSource:
        """An :class:`~dpflow.interpreter.samplers.IntSource` drawing from these words (for the per-draw
        samplers and continuations)."""
        return IntSource(_WordRandom(self))


class _WordRandom:
    """``randrange`` over a :class:`WordSource` (rejection from whole words; exact)."""

    def __init__(self, words: WordSource) -> None:
        self._words = words

    def randrange(self, n: int) -> int:
        k = ((n - 1).bit_length() + 63) // 64  # whole words covering n - 1 (none for n = 1)
        limit = (_TWO64**k // n) * n
        while True:
            r = 0
            for _ in range(k):
                r = (r << 64) | self._words.word()
            if r < limit:
                return r % n


def uniform_below(n: np.ndarray, src: WordSource) -> np.ndarray:
    """Uniform integers in ``[0, n)`` for each entry of ``n`` (int64, 1 <= n < 2^63): a word is accepted
    below the largest multiple of n under 2^64 and reduced mod n; rejected entries redraw (probability
    < n / 2^64; the value accepted is independent of the number of redraws).

    >>> v = uniform_below(np.array([1, 5, 2**40]), WordSource(seed=2))
    >>> bool(v[0] == 0 and 0 <= v[1] < 5 and 0 <= v[2] < 2**40)
    True
    """
    m = np.ascontiguousarray(n, dtype=np.uint64)
    top = np.uint64(0) - m  # 2^64 - m: w is accepted when its multiple of m, w - w % m, is at most this
    w = src.draw(m.size).reshape(m.shape)
    out = w % m
    bad = np.flatnonzero(w - out > top)
    while bad.size:  # rare: redraw the rejected entries
        mi, ti = m.ravel()[bad], top.ravel()[bad]
        w2 = src.draw(bad.size)
        r2 = w2 % mi
        ok = w2 - r2 <= ti
        out.ravel()[bad[ok]] = r2[ok]
        bad = bad[~ok]
    return out.astype(np.int64)


# --------------------------------------------------------------------------- constants to any precision

def _exp_pos_bounds(n: int, terms: int) -> tuple[Fraction, Fraction]:
    """Rational bounds lo <= e^n <= hi from the Taylor series (remainder bounded geometrically)."""
    total, term = Fraction(0), Fraction(1)
    for k in range(terms):
        total += term
        term = term * n / (k + 1)
    ratio = Fraction(n, terms + 1)
    return total, total + term / (1 - ratio)


@functools.lru_cache(maxsize=4096)
def exp_neg_bits(n: int, bits: int) -> int:
    """``floor(exp(-n) 2^bits)`` exactly, for an integer n >= 0 (rigorous Taylor bounds, refined until
    the floor is determined; exp(-n) 2^bits is irrational for n >= 1, so this terminates).

    >>> exp_neg_bits(1, 64) == int(math.exp(-1) * 2**64) or abs(exp_neg_bits(1, 64) - math.exp(-1) * 2**64) < 2**12
    True
    """
    if n == 0:
        return 1 << bits
    terms = 2 * n + bits + 16
    while True:
        lo, hi = _exp_pos_bounds(n, terms)
        a, b = (1 << bits) * hi.denominator // hi.numerator, (1 << bits) * lo.denominator // lo.numerator
        if a == b:
            return a
        terms *= 2


@functools.lru_cache(maxsize=1)
def _exp_table() -> np.ndarray:
    """floor(exp(-v) 2^64) for v = 0..GEOM_TABLE (entry 0 is 2^64 - 1, never compared)."""
    return np.array([_TWO64 - 1] + [exp_neg_bits(v, 64) for v in range(1, GEOM_TABLE + 1)], dtype=np.uint64)


class _LazyUniform:
    """A uniform real R in [0, 1) whose first 64 bits are ``word``; more words are drawn on demand."""

    def __init__(self, word: int, src: WordSource) -> None:
        self._prefix, self._bits, self._src = word, 64, src
        src.continuations += 1

    def _extend(self) -> None:
        self._prefix = (self._prefix << 64) | self._src.word()
        self._bits += 64

    def below_exp(self, n: int) -> bool:
        """Whether R < exp(-n)."""
        while True:
            t = exp_neg_bits(n, self._bits)
            if self._prefix != t:
                return self._prefix < t
            self._extend()

    def below(self, f: Fraction) -> bool:
        """Whether R < f (f rational in [0, 1])."""
        while True:
            t = (f.numerator << self._bits) // f.denominator
            if self._prefix != t:
                return self._prefix < t
            self._extend()


# --------------------------------------------------------------------------- Bernoulli(exp(-x)), x in [0, 1]

_COLUMNS = np.arange(1, BERN_COLUMNS + 1, dtype=np.int64)


def _first_failure(success: np.ndarray) -> np.ndarray:
    """1-based index of the first False column (BERN_COLUMNS + 1 when every column is True)."""
    fail = ~success
    idx = np.argmax(fail, axis=1) + 1
    return np.where(fail.any(axis=1), idx, BERN_COLUMNS + 1)


def _bern_exp_ratio(u: np.ndarray, t: int, src: WordSource) -> np.ndarray:
    """Bernoulli(exp(-u / t)) for integers 0 <= u < t (CKS20 Alg. 1: K is the first k with Bernoulli(x/k)
    false; the result is K odd).  Column k is Bernoulli(u / (t k)): a uniform below t k against u."""
    a = uniform_below(np.broadcast_to(t * _COLUMNS, (u.size, BERN_COLUMNS)), src)
    k = _first_failure(a < u[:, None])
    for i in np.flatnonzero(k > BERN_COLUMNS):  # probability < 2^-44: the same loop, continued exactly
        src.continuations += 1
        kk, rng = BERN_COLUMNS + 1, src.int_source()
        while rng.below(t * kk) < int(u[i]):
            kk += 1
        k[i] = kk
    odd: np.ndarray = k % 2 == 1
    return odd


def _bern_exp_frac(rem: np.ndarray, den: int, src: WordSource) -> np.ndarray:
    """Bernoulli(exp(-f)) for rationals f = rem / den in [0, 1) (``rem`` an object array of Python ints):
    column k is Bernoulli(1/k) and R_k < f, R_k decided by its first word against floor(f 2^64) (lazily
    on a tie)."""
    m = rem.size
    f64 = ((rem << 64) // den).astype(np.uint64)
    c = uniform_below(np.broadcast_to(_COLUMNS, (m, BERN_COLUMNS)), src)
    w = src.draw(m * BERN_COLUMNS).reshape(m, BERN_COLUMNS)
    below = w < f64[:, None]
    for i, j in zip(*np.nonzero(w == f64[:, None]), strict=True):
        below[i, j] = _LazyUniform(int(w[i, j]), src).below(Fraction(int(rem[i]), den))
    k = _first_failure((c == 0) & below)
    for i in np.flatnonzero(k > BERN_COLUMNS):
        src.continuations += 1
        kk, rng, f = BERN_COLUMNS + 1, src.int_source(), Fraction(int(rem[i]), den)
        while rng.below(kk) == 0 and _LazyUniform(src.word(), src).below(f):
            kk += 1
        k[i] = kk
    odd: np.ndarray = k % 2 == 1
    return odd


def _bern_exp_int(n: np.ndarray, src: WordSource) -> np.ndarray:
    """Bernoulli(exp(-n)) for integers n >= 0 (an object array of Python ints): one word against
    floor(exp(-n) 2^64), which is 0 beyond the table (word by word on a tie)."""
    table = _exp_table()
    w = src.draw(n.size)
    small = np.array([min(int(v), GEOM_TABLE + 1) for v in n], dtype=np.int64)  # (0,) for no n
    t = np.where(small <= GEOM_TABLE, table[np.minimum(small, GEOM_TABLE)], np.uint64(0))
    out = (small == 0) | (w < t)
    for i in np.flatnonzero((w == t) & (small > 0)):
        out[i] = _LazyUniform(int(w[i]), src).below_exp(int(n[i]))
    result: np.ndarray = out
    return result


def _geometric_exp1(m: int, src: WordSource) -> np.ndarray:
    """V with P(V >= v) = exp(-v): the number of v >= 1 with R < exp(-v), R read from one word against the
    table (word by word on a tie or when V may reach the end of the table)."""
    table = _exp_table()[1:]
    w = src.draw(m)
    v: np.ndarray = (w[:, None] < table[None, :]).sum(axis=1).astype(np.int64)
    tie = (w[:, None] == table[None, :]).any(axis=1) | (v == GEOM_TABLE)
    for i in np.flatnonzero(tie):
        r = _LazyUniform(int(w[i]), src)
        k = 0
        while r.below_exp(k + 1):
            k += 1
        v[i] = k
    return v


# --------------------------------------------------------------------------- the samplers

def discrete_laplace_array(scale: Fraction, size: int, src: WordSource) -> np.ndarray:
    """``size`` draws with P(k) proportional to exp(-|k| / scale) on the integers (CKS20 Alg. 2), int64.

    Per draw: U uniform below t (scale = t/s) accepted with Bernoulli(exp(-U/t)) (rejection), V geometric
    (one word), magnitude (V t + U) // s, a sign, and (-, 0) rejected: every loop is a rejection step or
    fixed work (module docstring).

    >>> z = discrete_laplace_array(Fraction(1, 2), 2000, WordSource(seed=3))
    >>> bool(abs(z).max() < 40 and (z == 0).mean() > 0.6)
    True
    """
    if scale <= 0:
        raise ValueError("discrete_laplace_array needs a positive scale")
    t, s = scale.numerator, scale.denominator
    if t >= _MAX_INT or s >= _MAX_INT:
        rng = src.int_source()
        return np.array([discrete_laplace(scale, rng) for _ in range(size)], dtype=object)
    if size == 1:  # a scalar release: the same steps on Python integers (numpy's per-call cost was most of it)
        z = _laplace_one(t, s, src)
        return np.array([z], dtype=np.int64 if abs(z) < 2**62 else object)
    return _laplace_vector(t, s, size, src)


def _laplace_vector(t: int, s: int, size: int, src: WordSource) -> np.ndarray:
    """:func:`discrete_laplace_array` of scale t/s for integers below ``_MAX_INT``, whole arrays at once."""
    out = np.zeros(size, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:
        m = pending.size
        u = np.zeros(m, dtype=np.int64)
        need = np.arange(m)
        while need.size:  # U: rejection sampling, accepted with exp(-U/t)
            cand = uniform_below(np.full(need.size, t, dtype=np.int64), src)
            ok = _bern_exp_ratio(cand, t, src)
            u[need[ok]] = cand[ok]
            need = need[~ok]
        v = _geometric_exp1(m, src)
        if bool((v < GEOM_TABLE).all()):  # (v t + u) < 2^62: int64
            mag = (v * t + u) // s
        else:  # probability < 2^-63: Python integers, and object output if they leave int64
            mag = (v.astype(object) * t + u.astype(object)) // s
            if any(abs(int(x)) >= 2**62 for x in mag):
                out = out.astype(object)
        negative = (src.draw(m) >> np.uint64(63)) == 1
        ok = ~(negative & (mag == 0))
        out[pending[ok]] = np.where(negative, -mag, mag)[ok]
        pending = pending[~ok]
    return out


# --------------------------------------------------------------------------- one draw, on Python integers

def _below_each(moduli: list[int], src: WordSource) -> list[int]:
    """:func:`uniform_below` of a list of moduli, on Python integers: the same words, redrawn in the same order."""
    words = src.draw(len(moduli)).tolist()
    out = [w % m for w, m in zip(words, moduli, strict=True)]
    bad = [i for i, w in enumerate(words) if w - out[i] > _TWO64 - moduli[i]]
    while bad:
        again = []
        for i, w in zip(bad, src.draw(len(bad)).tolist(), strict=True):
            r = w % moduli[i]
            if w - r <= _TWO64 - moduli[i]:
                out[i] = r
            else:
                again.append(i)
        bad = again
    return out


@functools.lru_cache(maxsize=1)
def _exp_thresholds() -> tuple[int, ...]:
    """:func:`_exp_table` for v = 1..GEOM_TABLE as Python integers, ascending (v = GEOM_TABLE first)."""
    return tuple(int(x) for x in _exp_table()[:0:-1])


def _laplace_one(t: int, s: int, src: WordSource) -> int:
    """One draw of :func:`discrete_laplace_array` (scale t/s): the steps of its loop for a single pending
    entry, each drawing the words it draws there, so the same words give the same value (tests check it)."""
    thresholds = _exp_thresholds()
    while True:
        while True:  # U: rejection sampling, accepted with exp(-U/t) (_bern_exp_ratio's columns)
            u = _below_each([t], src)[0]
            a = _below_each([t * k for k in range(1, BERN_COLUMNS + 1)], src)
            k = next((j for j, x in enumerate(a, 1) if not x < u), BERN_COLUMNS + 1)
            if k > BERN_COLUMNS:  # probability < 2^-44: the same loop, continued exactly
                src.continuations += 1
                k, rng = BERN_COLUMNS + 1, src.int_source()
                while rng.below(t * k) < u:
                    k += 1
            if k % 2 == 1:
                break
        w = src.word()  # V: _geometric_exp1, the number of thresholds above w
        i = bisect.bisect_right(thresholds, w)
        v = GEOM_TABLE - i
        if v == GEOM_TABLE or (i > 0 and thresholds[i - 1] == w):
            r = _LazyUniform(w, src)
            v = 0
            while r.below_exp(v + 1):
                v += 1
        mag = (v * t + u) // s
        if src.word() >> 63 == 0:
            return mag
        if mag != 0:  # (-, 0) is rejected
            return -mag


def discrete_gaussian_array(sigma2: Fraction, size: int, src: WordSource) -> np.ndarray:
    """``size`` draws with P(k) proportional to exp(-k^2 / (2 sigma2)) on the integers (CKS20 Alg. 3), int64.

    Proposal Y from the discrete Laplace of scale t = floor(sigma) + 1, accepted with Bernoulli(exp(-x)),
    x = (|Y| - sigma2/t)^2 / (2 sigma2) = n + f: Bernoulli(exp(-n)) (one word) and Bernoulli(exp(-f))
    (``BERN_COLUMNS`` columns); x is computed with Python integers (exact), so only integers decide.

    >>> z = discrete_gaussian_array(Fraction(4), 3000, WordSource(seed=4))
    >>> bool(abs(float(np.var(z)) - 4.0) < 0.5)
    True
    """
    if sigma2 <= 0:
        raise ValueError("discrete_gaussian_array needs a positive variance")
    t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1
    if t >= _MAX_INT:
        rng = src.int_source()
        return np.array([discrete_gaussian(sigma2, rng) for _ in range(size)], dtype=object)
    a, b = sigma2.numerator, sigma2.denominator
    den = 2 * a * b * t * t  # x = (|Y| b t - a)^2 / (2 a b t^2)
    out = np.zeros(size, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:
        y = discrete_laplace_array(Fraction(t), pending.size, src)
        num = (np.abs(y).astype(object) * (b * t) - a) ** 2
        whole = num // den
        ok = _bern_exp_int(whole, src) & _bern_exp_frac(num - whole * den, den, src)
        out[pending[ok]] = y[ok]
        pending = pending[~ok]
    return out
