"""Mutation-testing pins of ``dpflow/interpreter/samplers.py`` (2026-11-29): the exact law of CKS20's Bernoulli steps.

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

import pytest

from dpflow.interpreter import samplers
from dpflow.interpreter.samplers import IntSource, bernoulli_exp, discrete_gaussian, discrete_laplace


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
    rejected: P(k) = (1 - a) / (1 + a) a^|k| with a = exp(-1 / scale)."""
    got, lost = law(lambda src: discrete_laplace(scale, src), floor, bernoulli_exp=_bernoulli_exp,
                    _bernoulli=_bernoulli)
    a = math.exp(-1 / scale)
    assert lost < 1e-4
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
    with pytest.raises(ValueError, match="^discrete_gaussian needs a positive variance$"):
        discrete_gaussian(Fraction(-1), IntSource())
