"""The private data given to a run: one array for a one-source plan, shape mistakes named with their fix,
empty data under replace-one (issue 14 item 15)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.errors import DataError, UnknownSourceError


def test_empty_data_under_replace_is_a_public_schema_error() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2))
    plan = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))
    with pytest.raises(DataError, match="empty"):
        plan.run({"X": np.zeros((0, 2))}, noise=dp.SeededNoise(0))


def _mean_plan(budget: Any = None, n: int | None = 100, d: int = 2, **kw: Any) -> dp.Plan:
    b = dp.PlanBuilder(budget=budget if budget is not None else dp.ZCDP(0.5), **kw)
    X = b.source("X", dp.Vectors(d=d), n=n)
    return b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))


def test_one_array_is_the_data_of_a_one_source_plan() -> None:
    X = np.random.default_rng(0).normal(size=(100, 2))
    a = _mean_plan().run(X, noise=dp.SeededNoise(3)).released["m"]
    b = _mean_plan().run({"X": X}, noise=dp.SeededNoise(3)).released["m"]
    assert np.array_equal(a, b)


def test_one_array_for_a_plan_with_two_sources_names_them() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X, Y = b.source("X", dp.Vectors(d=2), n=10), b.source("Y", dp.Vectors(d=2), n=10)
    plan = b.build(x=N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(X))),
                   y=N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(Y))))
    with pytest.raises(UnknownSourceError, match=r"ndarray.*\['X', 'Y'\].*Fix: pass a dict.*'X': \.\.\., 'Y': \.\.\."):
        plan.run(np.zeros((10, 2)), noise=dp.SeededNoise(0))


@pytest.mark.parametrize("n", [100, None])
def test_a_transposed_array_is_told_to_transpose(n: int | None) -> None:
    with pytest.raises(DataError, match=r"got shape \(2, 100\): it looks transposed. Fix: transpose it") as err:
        _mean_plan(n=n).run({"X": np.zeros((2, 100))}, noise=dp.SeededNoise(0))
    assert ("declare d=100" in str(err.value)) == (n is None)
    with pytest.raises(DataError, match="it looks transposed"):  # one coordinate: a (1, n) row
        _mean_plan(n=n, d=1).run({"X": np.zeros((1, 100))}, noise=dp.SeededNoise(0))


def test_a_wrong_number_of_columns_is_not_called_transposed() -> None:
    with pytest.raises(DataError, match=r"expects an \(n, 2\) array, got shape \(100, 3\). Fix: pass 2 columns"):
        _mean_plan().run({"X": np.zeros((100, 3))}, noise=dp.SeededNoise(0))
