"""The shared sensitivity rules of ``dpflow/nodes/rules.py``: each stated once, each pinned here."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from test_empty_data import REFUSED_UNDER_ADD_REMOVE

import dpflow as dp
from dpflow import nodes as N
from dpflow.domains import MAX_BOUND, Ordinal, RowCount, Sym, as_vectors
from dpflow.errors import DomainError
from dpflow.handles import Ref
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.nodes.rules import (
    REPLACE_ONE,
    capped,
    count_sensitivities,
    has_public_n,
    released_endpoint,
    released_scale,
)
from dpflow.nodes.types import RowsT, Size, StatT
from dpflow.planner.certify import certify

# --------------------------------------------------------------------------- public_n

NEEDS_N: dict[str, Callable[[Any, dp.PlanBuilder], Any]] = {
    **REFUSED_UNDER_ADD_REMOVE,
    "Histogram(normalize)": lambda X, b: N.GaussianMech()(N.Histogram(edges=[0, 4, 8], normalize=True)(X)),
    "OrdinalCounts(normalize)": lambda X, b: N.GaussianMech()(N.OrdinalCounts(edges=[0, 4, 8], normalize=True)(X)),
    "IntervalCounts": lambda X, b: N.LaplaceMech()(N.IntervalCounts(interval=b.public([2, 5]))(X)),
}
DOMAINS = {"GradientStep": dp.Vectors(d=2), "TruncatedBinaryMean": dp.BooleanCube(d=2), "DyadicCounts": Ordinal(N=8),
           "DyadicExpMech": Ordinal(N=8), "Histogram(normalize)": Ordinal(N=8), "IntervalCounts": Ordinal(N=8),
           "OrdinalCounts(normalize)": Ordinal(N=8)}


@pytest.mark.parametrize("neighbors", ["add_remove", "replace+value partition"])
@pytest.mark.parametrize("kind", sorted(NEEDS_N))
def test_every_use_of_n_is_refused_with_the_one_public_n_message(kind: str, neighbors: str) -> None:
    """All nodes that use n refuse a private n through ``public_n``: one message, one fix."""
    dom = DOMAINS.get(kind, dp.Vectors(d=1))
    if neighbors == "add_remove":
        b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="add_remove")
        X = b.source("X", dom)
    else:  # a value partition makes the count of a piece private, also under replace-one
        b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="replace")
        X = N.split(b.source("X", dom, n=10), N.PartitionByBall(center=[0.0] * as_vectors(dom).d, radius=9.0))[0]
    with pytest.raises(DomainError) as info:
        b.build(out=NEEDS_N[kind](X, b)).check()
    text = str(info.value)
    assert "needs a public row count under replace-one neighbours" in text, text
    assert "declare neighbors='replace' and apply it before any value partition" in text, text
    relation = "add_remove" if neighbors == "add_remove" else "add_remove/replace"  # a record can move pieces
    assert f"here the neighbours are {relation} and the count is private" in text, text


def _rows(changes: frozenset[str], public: bool = True, stability: int = 1) -> RowsT:
    return RowsT(Ordinal(N=4), "X", Size(public, 5, RowCount("X")), stability, changes)


def test_has_public_n_needs_exactly_replace_one_and_a_public_count() -> None:
    assert has_public_n(_rows(REPLACE_ONE))
    assert not has_public_n(_rows(REPLACE_ONE, public=False))
    assert not has_public_n(_rows(frozenset({"add_remove"})))
    assert not has_public_n(_rows(frozenset({"replace", "add_remove"})))


# --------------------------------------------------------------------------- count_sensitivities


def _values(bounds: tuple[Sym | None, Sym | None, Sym | None]) -> list[float]:
    out = []
    for b in bounds:
        assert b is not None
        out.append(b.value())
    return out


@pytest.mark.parametrize(("changes", "stability", "want"), [
    (frozenset({"replace"}), 1, (2.0, math.sqrt(2.0), 1.0)),
    (frozenset({"add_remove"}), 1, (1.0, 1.0, 1.0)),
    (frozenset({"replace", "add_remove"}), 1, (2.0, math.sqrt(2.0), 1.0)),
    (frozenset({"replace"}), 3, (6.0, 3 * math.sqrt(2.0), 3.0)),
    (frozenset({"add_remove"}), 3, (3.0, 3.0, 3.0)),
])
def test_count_sensitivities_are_the_histogram_rule(changes: frozenset[str], stability: int,
                                                    want: tuple[float, float, float]) -> None:
    """Dwork-Roth 2014 histogram sensitivity: replace moves one unit between two cells (l1 2, l2 sqrt 2,
    linf 1), add/remove changes one cell by one; times the stability.  ``Sym.value`` rounds up, so the
    pinned values are approached from above within a relative 1e-9."""
    got = _values(count_sensitivities(_rows(changes, stability=stability)))
    for g, w in zip(got, want, strict=True):
        assert w <= g <= w * (1 + 1e-9), (got, want)


@pytest.mark.parametrize("make", [
    lambda: N.Histogram(edges=[0, 2, 4]), lambda: N.OrdinalCounts(edges=[0, 2, 4]), lambda: N.BinCounts(width=1.0)])
@pytest.mark.parametrize("neighbors", ["replace", "add_remove"])
def test_count_nodes_declare_count_sensitivities(make: Callable[[], Any], neighbors: str) -> None:
    b = dp.PlanBuilder(budget=dp.ApproxZCDP(0.5, 1e-6), neighbors=neighbors)
    counts = make()(b.source("X", Ordinal(N=4), n=10 if neighbors == "replace" else None))
    plan = b.build(out=N.LaplaceMech()(counts))
    stat = certify(plan).space.types[counts.id]
    assert isinstance(stat, StatT)
    want = _values(count_sensitivities(_rows(frozenset({neighbors}))))
    assert _values((stat.l1, stat.l2, stat.linf)) == want


# --------------------------------------------------------------------------- released scalar policies

BAD = [math.nan, math.inf, -math.inf, 1e300, -1e300]


class _Released:
    """An evaluation context whose every released value is ``v`` (the nodes below read only that)."""

    def __init__(self, v: Any) -> None:
        self.v = v
        self.backend = NumpyBackend()

    def value(self, ref: Ref) -> Any:
        return np.asarray(self.v, dtype=float)


def test_released_endpoint_policy_pins_each_case() -> None:
    top = float(np.finfo(float).max)
    got = [released_endpoint(v) for v in (math.nan, math.inf, -math.inf, 1e300, -1e300, -2.5)]
    assert got == [0.0, top, 0.0, 1e300, -1e300, -2.5]


def test_released_scale_policy_pins_each_case() -> None:
    got = [released_scale(v) for v in (math.nan, math.inf, -math.inf, 1e300, -1e300, -3.0, 2.0)]
    assert got == [0.0, 0.0, 0.0, MAX_BOUND, -MAX_BOUND, -3.0, 2.0]


def test_released_radius_policy_is_capped() -> None:
    got = [capped(v) for v in (math.nan, math.inf, -math.inf, 1e300, -1.0, 0.0, 2.0)]
    assert got == [0.0, MAX_BOUND, 0.0, MAX_BOUND, 0.0, 0.0, 2.0]


@pytest.mark.parametrize("v", BAD)
def test_order_statistics_read_bad_released_endpoints_by_the_policy(v: float) -> None:
    node = N.OrderStatistics(lower=Ref("lo"), upper=Ref("hi"))
    X = np.array([[-1.0], [0.5], [3.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = node.evaluate([X], _Released(v))
    lo = released_endpoint(v)
    assert out[0] == lo and out[-1] == lo  # a reversed or empty range clamps everything to lower
    assert np.all(out == lo)


@pytest.mark.parametrize("v", BAD + [2.0])
def test_ridge_solve_reads_a_bad_released_scale_by_the_policy(v: float) -> None:
    """A huge released scale used to make the ridge infinite and lstsq raise LinAlgError."""
    M = np.array([[2.0, 0.0, 1.0], [0.0, 2.0, 1.0], [1.0, 1.0, 3.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = N.RidgeSolve(ridge=0.5, scale=Ref("s")).evaluate([M], _Released(v))
    s = released_scale(v)
    want, *_ = np.linalg.lstsq(M[:2, :2] + 0.5 * s * s * np.eye(2), M[:2, 2], rcond=None)
    assert np.all(np.isfinite(out)) and np.array_equal(out, want)


@pytest.mark.parametrize(("v", "kept"), [(math.nan, 0), (-1.0, 0), (0.0, 0), (1.2, 1), (math.inf, 3),
                                         (1e300, 3)])
def test_truncated_binary_mean_reads_a_bad_released_radius_by_the_policy(v: float, kept: int) -> None:
    """Radius policy ``capped``: rows with 2 * sum > r^2 are zeroed; NaN or negative r keeps only the
    zero row (the sensitivity is then infinite or zero), inf or huge r keeps all."""
    X = np.array([[0.0, 0.0], [0.5, 0.0], [1.0, 1.0], [0.0, 1.0]])
    node = N.TruncatedBinaryMean(radius=Ref("r"))
    out = node.evaluate([X], _Released(v))
    sums = X.sum(axis=1)
    want = (X * (np.argsort(np.argsort(sums)) < kept + 1)[:, None]).sum(axis=0) / 4
    assert np.array_equal(out, want), (out, want)


def test_released_bounds_follow_the_cap_policy() -> None:
    assert capped(math.inf) == MAX_BOUND and capped(1e300) == MAX_BOUND and capped(MAX_BOUND) == MAX_BOUND
    assert capped(math.nan) == 0.0 and capped(-1.0) == 0.0 and capped(0.0) == 0.0 and capped(3.5) == 3.5
