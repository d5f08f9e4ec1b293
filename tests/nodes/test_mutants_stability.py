"""Pins for the stability histograms' release step (mutation run of ``nodes/stability.py``, 2026-11-23 night):
the noise each path draws (continuous Laplace / Gaussian, or under an exact source the discrete Laplace of the same
scale and the discrete Gaussian of variance sigma^2), its sign, and the threshold compared, all restated from
``scale_threshold`` at the certified share.  Before these, a discrete Gaussian drawn at variance 2 sigma (or
sigma^3) in place of sigma^2 passed every subject test."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from conftest import ZeroNoise

import dpflow as dp
from dpflow import nodes as N
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute

SHIFT = 7  # every draw: counts of 1 pass no threshold here, counts of 400 always do


class _Constant(ZeroNoise):
    """Every draw is SHIFT, and each call's scale argument is recorded by kind."""

    def __init__(self, exact: bool) -> None:
        super().__init__()
        self.exact = exact  # type: ignore[misc]
        self.seen: list[tuple[str, Any]] = []

    def normal(self, sigma: float, shape: tuple[int, ...]) -> np.ndarray:
        self.seen.append(("normal", sigma))
        return np.full(shape, float(SHIFT))

    def laplace(self, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        self.seen.append(("laplace", scale))
        return np.full(shape, float(SHIFT))

    def discrete_gaussian(self, sigma2: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        self.seen.append(("discrete_gaussian", sigma2))
        return np.full(shape, SHIFT, dtype=np.int64)

    def discrete_laplace(self, scale: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        self.seen.append(("discrete_laplace", scale))
        return np.full(shape, SHIFT, dtype=np.int64)


DATA = np.concatenate([np.full(400, 0.5), np.full(300, 3.5), [9.5]])  # bins 0, 3 (heavy) and 9 (one row)


def _run(node: Any, exact: bool) -> tuple[Any, Any, _Constant, Fraction]:
    b = dp.PlanBuilder(budget=dp.ApproxZCDP(Fraction(1, 2), 1e-6), neighbors="replace")
    X = b.source("X", dp.Reals(), n=len(DATA))
    h = node(N.BinCounts(width=1.0)(X))
    cert = dp.certify(b.build(h=h), exact_noise=exact)
    noise = _Constant(exact)
    keys, values = execute(cert, {"X": DATA}, noise, NumpyBackend()).released["h"]
    return keys, values, noise, cert.allocations[h.id].share


@pytest.mark.parametrize("exact", [False, True])
def test_gaussian_histogram_draws_sigma_and_releases_counts_plus_noise_above_t(exact: bool) -> None:
    node = N.GaussianStabilityHistogram(delta=1e-7)
    keys, values, noise, share = _run(node, exact)
    sigma, t = node.scale_threshold(2.0, math.sqrt(2.0), share)  # replace-one: l1 2, l2 sqrt 2
    assert noise.seen == ([("discrete_gaussian", Fraction(sigma) ** 2)] if exact else [("normal", sigma)])
    assert sorted(np.asarray(values).tolist()) == [300 + SHIFT, 400 + SHIFT]  # + the draw, bin 9 below t
    assert 1 + SHIFT <= t < 300


@pytest.mark.parametrize("exact", [False, True])
def test_laplace_histogram_draws_b_and_releases_counts_plus_noise_above_t(exact: bool) -> None:
    node = N.StabilityHistogram(delta=1e-7)
    keys, values, noise, share = _run(node, exact)
    b, t = node.scale_threshold(2.0, node.eps(share, "zcdp"))
    assert noise.seen == ([("discrete_laplace", Fraction(b))] if exact else [("laplace", b)])
    assert sorted(np.asarray(values).tolist()) == [300 + SHIFT, 400 + SHIFT]
    assert 1 + SHIFT <= t < 300


@pytest.mark.parametrize("exact", [False, True])
def test_a_count_exactly_at_the_threshold_is_not_released(exact: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Released strictly above t (above the raised t + 1/2 under an exact source): a bin whose noisy count equals
    the threshold stays out."""
    node = N.GaussianStabilityHistogram(delta=1e-7)
    real = N.GaussianStabilityHistogram.scale_threshold

    def at_401(self: Any, l1: float, l2: float, rho: Fraction) -> tuple[float, float]:
        sigma, _ = real(self, l1, l2, rho)
        return sigma, float(400 + SHIFT)  # bin 0's noisy count exactly

    monkeypatch.setattr(N.GaussianStabilityHistogram, "scale_threshold", at_401)
    _, values, _, _ = _run(node, exact)
    assert sorted(np.asarray(values).tolist()) == []


def test_laplace_count_exactly_at_the_threshold_is_not_released(monkeypatch: pytest.MonkeyPatch) -> None:
    node = N.StabilityHistogram(delta=1e-7)
    real = N.StabilityHistogram.scale_threshold

    def at_407(self: Any, l1: float, eps: Any) -> tuple[float, float]:
        return real(self, l1, eps)[0], float(400 + SHIFT)

    monkeypatch.setattr(N.StabilityHistogram, "scale_threshold", at_407)
    assert np.asarray(_run(node, False)[1]).tolist() == []
    # an exact source compares with the raised t + 1/2 (a float strictly above it): 407 passes 406.5+
    monkeypatch.setattr(N.StabilityHistogram, "scale_threshold", lambda self, l1, eps: (real(self, l1, eps)[0], 406.0))
    assert sorted(np.asarray(_run(node, True)[1]).tolist()) == [400 + SHIFT]
