"""Which noise every mechanism kind of the registry draws under ``SecureNoise``: exact draws only (discrete
Gaussian and Laplace integers, and the uniform words and exact uniform integers of the exponential mechanisms);
docs/privacy.md, "Noise"; docs/assurance.md has the table.

The example plan of each kind (``tests/contract/examples.py``) runs under a ``SecureNoise`` that records every
draw by method; a new mechanism kind that draws continuous noise under ``SecureNoise`` fails here.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from contract.examples import EXAMPLES

import dpflow as dp
from dpflow import nodes as N

CONTINUOUS = {"normal", "laplace", "gumbel", "uniform"}
EXACT = {"discrete_gaussian", "discrete_laplace", "uniform_words", "uniform_int"}

MECHANISMS = sorted(k for k, c in N.NODE_KINDS.items() if isinstance(c, type) and issubclass(c, N.Mechanism))


class RecordingSecureNoise(dp.SecureNoise):
    """``SecureNoise`` that records the method of every draw."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def normal(self, sigma: float, shape: tuple[int, ...]) -> np.ndarray:
        self.calls.append("normal")
        return super().normal(sigma, shape)

    def laplace(self, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        self.calls.append("laplace")
        return super().laplace(scale, shape)

    def gumbel(self, shape: tuple[int, ...]) -> np.ndarray:
        self.calls.append("gumbel")
        return super().gumbel(shape)

    def uniform(self, shape: tuple[int, ...]) -> np.ndarray:
        self.calls.append("uniform")
        return super().uniform(shape)

    def discrete_gaussian(self, sigma2: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        self.calls.append("discrete_gaussian")
        return super().discrete_gaussian(sigma2, shape)

    def discrete_laplace(self, scale: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        self.calls.append("discrete_laplace")
        return super().discrete_laplace(scale, shape)

    def uniform_words(self, n: int) -> np.ndarray:
        self.calls.append("uniform_words")
        return super().uniform_words(n)

    def uniform_int(self, size: int) -> int:
        self.calls.append("uniform_int")
        return super().uniform_int(size)


def _kinds(plan: dp.Plan) -> set[str]:
    out: set[str] = set()
    stack = list(plan.records)
    while stack:
        r = stack.pop()
        out.add(r.node.kind)
        if isinstance(r.node, N.Repeat):
            stack.extend(r.node.body.records)
    return out


def _draws(kind: str) -> tuple[set[str], set[str]]:
    e = EXAMPLES[kind]
    plan, _, _ = e.plan(e.relations[0])
    rng = np.random.default_rng(0)
    d = getattr(e.domain, "d", 1)
    X = rng.integers(0, e.domain.N, size=(40, d)).astype(float) if isinstance(e.domain, dp.Ordinal) \
        else rng.normal(0.0, 1.5, size=(40, d))
    if e.relations[0] == "replace":
        X = X[:6]
    noise = RecordingSecureNoise()
    plan.run({"X": X}, noise=noise)
    return set(noise.calls), _kinds(plan)


def test_the_registry_has_the_mechanisms_this_test_knows() -> None:
    assert set(MECHANISMS) == {"AboveThreshold", "GaussianMech", "LaplaceMech", "Peel", "DyadicExpMech", "Quantile",
                               "StabilityHistogram", "GaussianStabilityHistogram"}


@pytest.mark.parametrize("kind", MECHANISMS)
def test_secure_runs_draw_exact_noise(kind: str) -> None:
    calls, _ = _draws(kind)
    assert calls, f"{kind}'s example drew no noise"
    assert not calls & CONTINUOUS, f"{kind} drew {sorted(calls & CONTINUOUS)} under SecureNoise"
    assert calls <= EXACT


@pytest.mark.parametrize("kind", ["Quantile", "DyadicExpMech"])
def test_exponential_mechanisms_draw_words_and_exact_integers(kind: str) -> None:
    calls, kinds = _draws(kind)
    assert kind in kinds and "uniform_words" in calls


def test_secure_description_says_every_draw_is_exact() -> None:
    text = dp.SecureNoise().description
    assert "exact discrete" in text and "exact exponential mechanism" in text
    assert "Quantile" in text and "DyadicExpMech" in text and "Gumbel" not in text
