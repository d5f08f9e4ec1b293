"""Declared bounds and domains (``dpflow/domains.py``): validated where they are made, and the float64
overflow cap MAX_BOUND on public domains (issue 14 items 4-5)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from conftest import ZeroNoise

import dpflow as dp
from dpflow import nodes as N
from dpflow.domains import MAX_BOUND
from dpflow.errors import DomainError
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.planner.certify import certify


@pytest.mark.parametrize("bad", [-1.0, -1e-300, math.nan, math.inf, -math.inf])
def test_bounds_must_be_finite_and_non_negative(bad: float) -> None:
    with pytest.raises(ValueError, match="finite and non-negative"):
        dp.Sym(bad)
    with pytest.raises(ValueError, match="finite and non-negative"):
        dp.Sym.const(bad)
    with pytest.raises(ValueError):
        dp.Vectors(d=2, l2_bound=dp.Sym(bad))
    with pytest.raises(ValueError):
        dp.Vectors(d=2, l2_bound=bad)
    assert dp.Sym(0.0).coef == 0.0 and dp.Vectors(d=2, l2_bound=3).l2_bound == dp.Sym.const(3.0)


def test_a_negative_bound_cannot_reach_peel() -> None:
    # before: Vectors(l2_bound=Sym(-1.0)) certified, Peel computed noise scale 0 and released the exact mean
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    with pytest.raises(ValueError, match="finite and non-negative"):
        b.source("X", dp.Vectors(d=5, l2_bound=dp.Sym(-1.0)), n=100)


def test_domain_sizes_must_be_integers() -> None:
    for bad in (2.5, True, "3", 0):
        with pytest.raises(ValueError):
            dp.Vectors(d=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            dp.Ordinal(N=bad)  # type: ignore[arg-type]
    assert dp.Vectors(d=np.int64(3), l2_bound=np.int64(2)).l2_bound == dp.Sym.const(2.0)
    assert dp.Ordinal(N=np.int64(5)).as_vectors().box == (0.0, 4.0)


def test_reals_bounds_are_validated() -> None:
    for lo, hi in [(0.0, math.nan), (-math.inf, 1.0), (2.0, 1.0)]:
        with pytest.raises(ValueError):
            dp.Reals(lower=lo, upper=hi)
    assert dp.Reals(lower=-1.0, upper=1.0).as_vectors().box == (-1.0, 1.0)
    assert dp.Reals(lower=np.int64(-1), upper=np.float32(2.0)).as_vectors().box == (-1.0, 2.0)


def _mean_plan(domain: Any, n: int) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", domain, n=n)
    return b.build(m=N.GaussianMech()(N.Mean()(X)))


def test_public_domains_whose_sums_can_overflow_are_refused() -> None:
    # before: a Mean over box (0, 1e308) was certified; it is inf on [1e308, 1e308] and finite on [1e308, 0]
    with pytest.raises(DomainError, match="overflow"):
        certify(_mean_plan(dp.Vectors(d=1, box=(0.0, 1e308)), 2))
    with pytest.raises(DomainError, match="overflow"):
        certify(_mean_plan(dp.Reals(lower=-1e300, upper=0.0), 2))
    with pytest.raises(DomainError, match="overflow"):
        certify(_mean_plan(dp.Vectors(d=2, l2_bound=1e300), 2))
    # the cap is exactly MAX_BOUND = 2^256
    assert MAX_BOUND == 2.0**256
    certify(_mean_plan(dp.Vectors(d=1, box=(-MAX_BOUND, MAX_BOUND)), 2))
    certify(_mean_plan(dp.Vectors(d=2, l2_bound=MAX_BOUND), 2))
    with pytest.raises(DomainError):
        certify(_mean_plan(dp.Vectors(d=1, box=(0.0, math.nextafter(MAX_BOUND, math.inf))), 2))
    with pytest.raises(DomainError):
        certify(_mean_plan(dp.Vectors(d=2, l2_bound=math.nextafter(MAX_BOUND, math.inf)), 2))


def test_at_the_cap_sums_stay_finite() -> None:
    plan = _mean_plan(dp.Vectors(d=2, box=(-MAX_BOUND, MAX_BOUND)), 1000)
    ex = execute(certify(plan), {"X": np.full((1000, 2), 1e300)}, ZeroNoise(), NumpyBackend())
    assert np.all(ex.released["m"] == MAX_BOUND)
