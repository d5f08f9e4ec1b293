"""Exact discrete Laplace and discrete Gaussian samplers (Canonne, Kamath & Steinke 2020).

Only uniform integers are drawn (from the OS CSPRNG through :mod:`secrets` by default);
every probability is a rational number and every comparison is exact, so no
floating-point rounding touches the noise (Mironov 2012; accounting.md section 3).
The algorithms follow CKS20 Algorithms 1-3 (the public reference code is
``IBM/discrete-gaussian-differential-privacy``, ``discretegauss.py``):

1. Bernoulli(p) for rational p: ``U < numerator`` with U uniform below the denominator;
2. Bernoulli(exp(-x)) for x in [0, 1]: the index of the first failure of Bernoulli(x/k), odd;
3. Bernoulli(exp(-x)) for x > 1: floor(x) draws of Bernoulli(exp(-1)), then exp(-(x - floor x));
4. discrete Laplace(t): sign, then a geometric magnitude (fast/slow pair), rejecting (-, 0);
5. discrete Gaussian(sigma^2): t = floor(sigma) + 1, propose discrete Laplace(t), accept with
   Bernoulli(exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2))).

The module also holds the one home of the floating-point variates the exponential mechanisms
draw under continuous sources (``gumbel_of_laplace``, ``uniform_of_laplace``, ``uniform_int_of``): each
is a map of standard Laplace draws, exact in law and computed in floating point (not claimed exact);
exact sources sample the exponential mechanisms from uniform words (:mod:`dpflow.nodes.expmech`).

Timing: these per-draw samplers do work that depends on the value drawn (the geometric count, the
floor(x) draws of Bernoulli(exp(-1))).  Noise sources draw through the vectorised samplers of
:mod:`dpflow.interpreter.vector_samplers`, whose work does not (beyond a stated small probability);
these remain the reference implementation and the path for scales beyond int64.

>>> import random
>>> rng = IntSource(random.Random(0))
>>> isinstance(discrete_gaussian(Fraction(4), rng), int)
True
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from fractions import Fraction
from typing import Protocol

import numpy as np

__all__ = [
    "IntSource", "bernoulli_exp", "discrete_gaussian", "discrete_laplace", "gumbel_of_laplace",
    "uniform_int_of", "uniform_of_laplace",
]


class _RandRange(Protocol):
    def randrange(self, n: int, /) -> int: ...


class IntSource:
    """Uniform integers below a bound: the only randomness the samplers use.

    ``IntSource()`` draws from the OS CSPRNG (``secrets.randbelow``); ``IntSource(random.Random(s))``
    is reproducible and only for tests.

    >>> 0 <= IntSource().below(10) < 10
    True
    """

    def __init__(self, rng: _RandRange | None = None) -> None:
        self._below = secrets.randbelow if rng is None else rng.randrange

    def below(self, n: int) -> int:
        """A uniform integer in [0, n)."""
        return self._below(n)


def _bernoulli(num: int, den: int, src: IntSource) -> bool:
    return src.below(den) < num


def _bernoulli_exp_le1(x: Fraction, src: IntSource) -> bool:
    k = 1
    while _bernoulli(x.numerator, x.denominator * k, src):
        k += 1
    return k % 2 == 1


def bernoulli_exp(x: Fraction, src: IntSource) -> bool:
    """Bernoulli(exp(-x)) for rational x >= 0, exactly (CKS20 Alg. 1).

    >>> import random
    >>> bernoulli_exp(Fraction(0), IntSource(random.Random(1)))
    True
    """
    one = Fraction(1)
    while x > 1:
        if not _bernoulli_exp_le1(one, src):
            return False
        x -= 1
    return _bernoulli_exp_le1(x, src)


def _geometric_exp_slow(x: Fraction, src: IntSource) -> int:
    k = 0
    while bernoulli_exp(x, src):
        k += 1
    return k


def _geometric_exp_fast(s: int, t: int, src: IntSource) -> int:
    """Geometric with success probability 1 - exp(-s/t) for s >= 1 (CKS20 Alg. 2; its s = 0 case, a scale of
    infinity, never arises: s is a Fraction's denominator)."""
    while True:
        u = src.below(t)
        if bernoulli_exp(Fraction(u, t), src):
            break
    v = _geometric_exp_slow(Fraction(1), src)
    return (v * t + u) // s


def discrete_laplace(scale: Fraction, src: IntSource) -> int:
    """A draw with P(k) proportional to exp(-|k| / scale) on the integers (CKS20 Alg. 2).

    >>> import random
    >>> isinstance(discrete_laplace(Fraction(3), IntSource(random.Random(2))), int)
    True
    """
    if scale <= 0:
        raise ValueError("discrete_laplace needs a positive scale")
    s, t = scale.denominator, scale.numerator  # exp(-|k|/scale) = exp(-|k| s / t)
    while True:
        negative = _bernoulli(1, 2, src)
        magnitude = _geometric_exp_fast(s, t, src)
        if negative and magnitude == 0:
            continue
        return -magnitude if negative else magnitude


def discrete_gaussian(sigma2: Fraction, src: IntSource) -> int:
    """A draw with P(k) proportional to exp(-k^2 / (2 sigma2)) on the integers (CKS20 Alg. 3).

    >>> import random
    >>> isinstance(discrete_gaussian(Fraction(9, 4), IntSource(random.Random(3))), int)
    True
    """
    if sigma2 <= 0:
        raise ValueError("discrete_gaussian needs a positive variance")
    t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1
    while True:
        y = discrete_laplace(Fraction(t), src)
        bias = (abs(y) - sigma2 / t) ** 2 / (2 * sigma2)
        if bernoulli_exp(bias, src):
            return y


# --------------------------------------------------------------------------- variates for the exponential mechanisms

EXP_FLOOR = 2.0**-53
"""The Exp(1) value read for a Laplace draw of exactly 0 (numpy draws one with probability 2**-53)."""

_exp = np.frompyfunc(math.exp, 1, 1)


def gumbel_of_laplace(lap: np.ndarray) -> np.ndarray:
    """Standard Gumbel variates from standard Laplace draws: ``|L| ~ Exp(1)`` and ``-log E ~ Gumbel(0, 1)``.

    A draw of exactly 0 is read as ``EXP_FLOOR`` (the middle of its rounding interval), so every variate
    is finite; a zero-noise source then makes a Gumbel-max the plain argmax.

    >>> gumbel_of_laplace(np.array([1.0, -1.0, 0.0])).tolist() == [-0.0, -0.0, 53 * math.log(2.0)]
    True
    """
    g: np.ndarray = -np.log(np.maximum(np.abs(np.asarray(lap, dtype=float)), EXP_FLOOR))
    return g


def uniform_of_laplace(lap: np.ndarray) -> np.ndarray:
    """Uniform variates on (0, 1] from standard Laplace draws: ``exp(-E)`` with ``E = |L| ~ Exp(1)``.

    ``exp`` is the C library's (:func:`math.exp`, one call per draw), which does not depend on numpy's
    SIMD dispatch, so seeded runs give the same uniforms on every CPU.

    >>> uniform_of_laplace(np.array([0.0, -math.log(4.0)])).tolist()
    [1.0, 0.25]
    """
    u: np.ndarray = np.asarray(_exp(-np.abs(np.asarray(lap, dtype=float))), dtype=float)  # frompyfunc keeps shape
    return u


def uniform_int_of(uniform: Callable[[tuple[int, ...]], np.ndarray], size: int) -> int:
    """A uniform integer in ``[0, size)`` for ``size <= 2**62`` from ``uniform(shape)`` variates on (0, 1]:
    26 bits from each of three variates (78 bits), rejection sampled below the largest multiple of ``size``.

    Each attempt is accepted with probability > 1 - 2**-16; after 16 rejected attempts (probability
    < 2**-256) the last draw is reduced modulo ``size``.

    >>> uniform_int_of(lambda shape: np.full(shape, 0.5), 10)
    2
    >>> uniform_int_of(lambda shape: np.full(shape, 0.5), 1)
    0
    """
    if size <= 1:
        return 0
    limit = (2**78 // size) * size
    for _ in range(16):
        r = 0
        for v in np.asarray(uniform((3,)), dtype=float).tolist():
            r = (r << 26) | min(int(v * 2**26), 2**26 - 1)
        if r < limit:
            break
    return r % size
