"""The one noise protocol and the one exponential-mechanism sampler.

Pins the maps from Laplace draws to Gumbel and uniform variates, the 78-bit uniform integer, the
Gumbel-max rule and its non-finite policy, and checks that ``Quantile`` and ``DyadicExpMech`` draw
through the protocol (a scripted source steers them)."""

from __future__ import annotations

import math
import typing
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from conftest import ExactZeroNoise, ZeroNoise

import dpflow as dp
import dpflow.interpreter.noise as noise_module
import dpflow.nodes.base as base_module
from dpflow import nodes as N
from dpflow.estimators.discrete import merr
from dpflow.interpreter.noise import LaplaceDerivedDraws, SecureNoise, SeededNoise
from dpflow.interpreter.samplers import gumbel_of_laplace, uniform_int_of, uniform_of_laplace
from dpflow.nodes.dyadic import DyadicTable, _groups
from dpflow.nodes.expmech import report_noisy_max
from dpflow.noise_protocol import NoiseSource

EULER_GAMMA = 0.5772156649015329


class Scripted(LaplaceDerivedDraws):
    """Laplace draws from a script (cycled), every call recorded; the derived draws are the shared ones."""

    description = "scripted (tests only): NOT FOR RELEASE"
    seeded = True
    exact = False

    def __init__(self, values: list[float]) -> None:
        self.values = values
        self.calls: list[tuple[str, Any, tuple[int, ...]]] = []

    def laplace(self, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        self.calls.append(("laplace", scale, tuple(shape)))
        size = int(np.prod(shape, dtype=np.int64))
        return np.resize(np.asarray(self.values, dtype=float), size).reshape(shape)

    def normal(self, sigma: float, shape: tuple[int, ...]) -> np.ndarray:
        return np.zeros(shape)

    def discrete_gaussian(self, sigma2: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        return np.zeros(shape, dtype=np.int64)

    def discrete_laplace(self, scale: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        return np.zeros(shape, dtype=np.int64)


class Steered(SeededNoise):
    """Seeded noise whose Gumbel draws are given (and every derived draw counted)."""

    def __init__(self, gumbels: np.ndarray | None = None, uniform: float | None = None) -> None:
        super().__init__(0)
        self.gumbels = gumbels
        self.fixed_uniform = uniform
        self.calls: list[tuple[str, Any]] = []

    def gumbel(self, shape: tuple[int, ...]) -> np.ndarray:
        self.calls.append(("gumbel", tuple(shape)))
        if self.gumbels is None:
            return super().gumbel(shape)
        return np.resize(self.gumbels, int(np.prod(shape, dtype=np.int64))).reshape(shape)

    def uniform(self, shape: tuple[int, ...]) -> np.ndarray:
        self.calls.append(("uniform", tuple(shape)))
        return super().uniform(shape) if self.fixed_uniform is None else np.full(shape, self.fixed_uniform)

    def uniform_int(self, size: int) -> int:
        self.calls.append(("uniform_int", size))
        return super().uniform_int(size)


# --------------------------------------------------------------------------- the protocol


def test_one_noise_protocol() -> None:
    assert not hasattr(base_module, "NoiseLike")
    assert noise_module.NoiseSource is NoiseSource and dp.NoiseSource is NoiseSource
    hints = typing.get_type_hints(base_module.EvalContext.noise.fget)  # type: ignore[attr-defined]
    assert hints["return"] is NoiseSource
    for src in (SecureNoise(), SeededNoise(0), SeededNoise(0, exact=True), ZeroNoise(), ExactZeroNoise(),
                Scripted([0.0])):
        assert isinstance(src, NoiseSource)
    for method in ("gumbel", "uniform", "uniform_int"):
        assert method in NoiseSource.__dict__


def test_mechanisms_read_the_protocols_exact_flag() -> None:
    """A source without the protocol's ``exact`` flag is an error, not silently the float path."""

    class NoFlag(Scripted):
        def __getattribute__(self, name: str) -> Any:
            if name == "exact":
                raise AttributeError(name)
            return super().__getattribute__(name)

    b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    X = b.source("X", dp.Vectors(d=1), n=10)
    plan = b.build(m=N.LaplaceMech()(N.Mean()(N.Clip(radius=1.0)(X))))
    with pytest.raises(AttributeError, match="exact"):
        plan.run({"X": np.zeros((10, 1))}, noise=NoFlag([0.0]))


# --------------------------------------------------------------------------- the derived draws


def test_gumbel_and_uniform_maps_of_laplace_draws() -> None:
    lap = [1.5, -0.25, 0.0, 36.0, -1e-300]
    src = Scripted(lap)
    g = src.gumbel((5,))
    assert g.tolist() == [-math.log(1.5), -math.log(0.25), 53 * math.log(2.0), -math.log(36.0), 53 * math.log(2.0)]
    assert gumbel_of_laplace(np.array(lap)).tolist() == g.tolist()
    u = src.uniform((5,))
    assert u.tolist() == [math.exp(-1.5), math.exp(-0.25), 1.0, math.exp(-36.0), 1.0]
    assert uniform_of_laplace(np.array(lap)).tolist() == u.tolist()
    assert src.calls == [("laplace", 1.0, (5,)), ("laplace", 1.0, (5,))]  # one standard Laplace draw per variate
    assert src.uniform((2, 3)).shape == (2, 3) and src.gumbel((2, 3)).shape == (2, 3)


def test_uniform_int_packs_26_bits_per_uniform_and_rejects_above_the_limit() -> None:
    script = iter([[1.0, 1.0, 1.0], [0.25, 0.0, 0.5]])
    shapes: list[tuple[int, ...]] = []

    def uniform(shape: tuple[int, ...]) -> np.ndarray:
        shapes.append(shape)
        return np.array(next(script))

    size = 3 * 2**60  # limit = 262143 * 2**60: the all-ones draw 2**78 - 1 is rejected
    assert uniform_int_of(uniform, size) == (2**76 + 2**25) % size == 2**60 + 2**25
    assert shapes == [(3,), (3,)]
    assert uniform_int_of(lambda shape: np.ones(shape), 2**62) == 2**62 - 1  # 1.0 reads as 26 one bits
    assert uniform_int_of(lambda shape: np.ones(shape), 1) == 0
    src = Scripted([-math.log(0.5)])  # every uniform is 0.5: r = 2**25 (2**52 + 2**26 + 1)
    assert src.uniform_int(10**18) == (2**25 * (2**52 + 2**26 + 1)) % 10**18


def test_derived_draws_have_the_right_laws() -> None:
    src = SeededNoise(5)
    g = np.sort(src.gumbel((100_000,)))
    ecdf = np.arange(1, g.size + 1) / g.size
    assert np.abs(ecdf - np.exp(-np.exp(-g))).max() < 0.01          # KS distance to Gumbel(0, 1)
    assert abs(g.mean() - EULER_GAMMA) < 0.015
    u = np.sort(src.uniform((100_000,)))
    assert np.abs(ecdf - u).max() < 0.01 and u.min() > 0 and u.max() <= 1
    ints = np.array([src.uniform_int(7) for _ in range(7000)])
    counts = np.bincount(ints, minlength=7)
    assert counts.size == 7 and np.all(np.abs(counts - 1000) < 150)


# --------------------------------------------------------------------------- report noisy max


def test_report_noisy_max_is_the_argmax_of_log_weight_plus_gumbel() -> None:
    lw = np.array([0.0, 1.0, 2.0])
    assert report_noisy_max(lw, Steered(np.array([0.0, 0.0, 0.0]))) == 2
    assert report_noisy_max(lw, Steered(np.array([2.5, 0.0, 0.0]))) == 0     # 0 + 2.5 > 2 + 0
    assert report_noisy_max(lw, Steered(np.array([0.0, 1.5, 0.0]))) == 1     # 1 + 1.5 > 2
    assert report_noisy_max(lw, Steered(np.array([0.0, 0.5, 0.0]))) == 2     # ties go to the first


def test_report_noisy_max_non_finite_policy() -> None:
    lw = np.array([np.nan, np.inf, -np.inf, -5.0])
    src = Steered(np.array([100.0, 100.0, 100.0, 0.0]))
    assert report_noisy_max(lw, src) == 3            # non-finite log-weights have weight 0
    assert src.calls == [("gumbel", (4,))]           # one Gumbel per candidate, whatever the weights
    none = Steered(np.zeros(3))
    assert report_noisy_max(np.array([np.nan, np.inf, -np.inf]), none) is None
    assert none.calls == [("gumbel", (3,))]


def test_report_noisy_max_samples_the_exponential_mechanism() -> None:
    weights = np.array([1.0, 2.0, 3.0, 4.0, 0.0])
    with np.errstate(divide="ignore"):
        lw = np.log(weights)
    src = SeededNoise(8)
    draws = np.array([report_noisy_max(lw, src) for _ in range(20_000)])
    freq = np.bincount(draws, minlength=5) / draws.size
    assert freq[4] == 0.0
    assert 0.5 * np.abs(freq - weights / weights.sum()).sum() < 0.015


# --------------------------------------------------------------------------- the nodes draw through it


def _median_plan() -> tuple[dp.Plan, dict[str, Any]]:
    b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    X = b.source("X", dp.Reals(), n=9)
    plan = b.build(m=N.Quantile(q=0.5)(N.OrderStatistics(lower=0.0, upper=10.0)(X)))
    return plan, {"X": np.arange(1.0, 10.0)}


def test_quantile_draws_through_the_protocol() -> None:
    plan, data = _median_plan()
    steer = np.zeros(10)
    steer[7] = 1e3                                   # the gap [7, 8] wins, u = 0.25 inside it
    src = Steered(steer, uniform=0.25)
    assert plan.run(data, noise=src).released["m"] == 7.25
    assert src.calls == [("gumbel", (10,)), ("uniform", (1,))]


def test_quantile_with_zero_noise_is_the_highest_weight_gap() -> None:
    """Equal Gumbel draws make the Gumbel-max the argmax: gaps 4 and 5 tie (q n = 4.5), the first wins,
    and the zero-noise uniform 1 gives the gap's upper end."""
    plan, data = _median_plan()
    assert plan.run(data, noise=ZeroNoise()).released["m"] == 5.0


def test_dyadic_expmech_draws_through_the_protocol() -> None:
    x = np.random.default_rng(3).integers(0, 2**10, 60)
    src = Steered()
    plan = merr(N=2**10, n=60, budget=dp.PureDP(10.0), T=2)
    plan.run({"X": x}, noise=src)
    kinds = [c[0] for c in src.calls]  # round 1 picks a group (a uniform member), round 2 one interval
    assert kinds == ["gumbel", "uniform_int", "uniform", "gumbel"]
    assert src.calls[2] == ("uniform", (3,))  # uniform_int: 3 uniforms of 26 bits


def test_dyadic_expmech_with_no_finite_score_releases_the_first_point() -> None:
    table = DyadicTable.build(np.array([0, 0, 1, 2, 2, 2, 7, 8, 12, 12]), 16)
    P, F = np.array([-1, 0, 15]), np.array([0.0, 1.7e308, -1.7e308])  # slopes overflow: every score is inf
    with np.errstate(over="ignore", invalid="ignore"):
        for seed in range(5):
            assert _groups(table, P, F, 1.0, SeededNoise(seed)) == (0, 0)
