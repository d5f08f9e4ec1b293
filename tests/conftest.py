"""Shared helpers for the plan, planner, interpreter and sensitivity tests."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import settings

from dpflow.domains import Sym
from dpflow.interpreter.noise import LaplaceDerivedDraws
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.planner.certify import Certified, clear_certificates

# CI runs the property tests on a fixed set of examples (the same every run), so a green CI means the same thing
# twice; developers' runs stay random, to keep finding new cases.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def clear_function_caches() -> None:
    """Empty every ``functools`` cache at module level in dpflow (the calibration, PLD and sigma caches).

    mutmut tests each mutant in a process forked from one whose dpflow caches are already filled with
    unmutated results, which a cache would then hand to the mutant's tests (every mutant of a function reached only
    through ``pld._epsilon`` survived for that reason)."""
    for name, module in list(sys.modules.items()):
        if name == "dpflow" or name.startswith("dpflow."):
            for value in list(vars(module).values()):
                if callable(value) and hasattr(value, "cache_clear"):
                    value.cache_clear()


@pytest.fixture(autouse=True, scope="session")
def _fresh_function_caches() -> None:
    """Each test session starts with empty caches (:func:`clear_function_caches`)."""
    clear_function_caches()


@pytest.fixture(autouse=True)
def _fresh_certificates() -> None:
    """Every test certifies from scratch: a test that patches a privacy rule must not get a certificate
    cached by an earlier test (``dpflow.planner.certified``)."""
    clear_certificates()


class ZeroNoise(LaplaceDerivedDraws):
    """A noise source whose draws are all zero: mechanisms then output their input statistic (the
    exponential mechanisms, whose Gumbel draws are then all equal, their highest-weight candidate)."""

    description = "zero noise (tests only): NOT FOR RELEASE"
    seeded = True

    def __init__(self) -> None:
        self.calls = 0

    def normal(self, sigma: float, shape: tuple[int, ...]) -> np.ndarray:
        self.calls += 1
        return np.zeros(shape)

    def laplace(self, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        self.calls += 1
        return np.zeros(shape)

    exact = False

    def discrete_gaussian(self, sigma2: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        self.calls += 1
        return np.zeros(shape, dtype=np.int64)

    def discrete_laplace(self, scale: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        self.calls += 1
        return np.zeros(shape, dtype=np.int64)


class ExactZeroNoise(ZeroNoise):
    """Zero draws through the exact (lattice) path: releases are the lattice-rounded statistics."""

    exact = True


def run_zero(cert: Certified, data: Mapping[str, Any]) -> dict[str, Any]:
    """Execute a certified plan with zero noise; the released values are the pre-noise statistics."""
    return execute(cert, data, ZeroNoise(), NumpyBackend()).released


def bound_value(bound: Sym, env: Mapping[str, float] | None = None) -> float:
    """A declared sensitivity as a number; ``env`` holds, by node id, the run-time values its typed refs name
    (a dataset node's row count, a released scalar, a released vector's norm)."""
    return bound.coef if bound.is_const else bound.value({r: (env or {})[r.node] for r in bound.refs()})


def exact_bound(bound: Sym, env: Mapping[Any, float]) -> Fraction | float:
    """A bound's value at the run-time values ``env`` (by ref) in exact arithmetic, by its declared policy
    (``Sym.value``): a NaN or +inf value makes it unbounded (inf), a negative one (-inf included) counts as 0, and
    0 to a negative power (a bound that divides by it) is unbounded."""
    q = Fraction(bound.coef)
    for ref, p in bound.factors:
        v = float(env[ref])
        if math.isnan(v) or v == math.inf:
            return math.inf
        v = max(v, 0.0)
        if v == 0.0 and p < 0:
            return math.inf
        q *= Fraction(v) ** p
    return q


class EvalCtx:
    """The part of the interpreter's EvalContext a mechanism's ``evaluate`` uses: a fixed statistic, bound value,
    allocation (zCDP 1/2 by default), noise source (zero draws by default) and public values; facts recorded."""

    def __init__(self, stat: Any, bound: float, exact: bool, alloc: Any = None, noise: Any = None,
                 values: Mapping[Any, float] | None = None) -> None:
        from dpflow.nodes.types import Allocation
        from dpflow.privacy import Cost

        self._stat, self._bound, self._values = stat, bound, dict(values or {})
        self.noise = noise or (ExactZeroNoise() if exact else ZeroNoise())
        self.alloc = alloc or Allocation("zcdp", Fraction(1, 2), Cost.zcdp(Fraction(1, 2)))
        self.facts: dict[str, Any] = {}

    def stat(self) -> Any:
        return self._stat

    def allocation(self) -> Any:
        return self.alloc

    def bound(self, b: Sym) -> float:
        return self._bound

    def public_values(self, names: Any) -> dict[Any, float]:
        return self._values

    def record(self, key: str, value: Any) -> None:
        self.facts[key] = value


class InferCtx:
    """The part of the planner's InferContext a node's ``infer`` uses: the neighbour relation, the node's id and row
    count, and each released parameter's static type (shape ``shapes[id]``, else ``default``; with ``other`` every
    parameter has that type instead, e.g. sensitive rows, to test the refusal of a parameter that is not released)."""

    relation = "replace"

    def __init__(self, node_id: str = "n", shapes: Mapping[str, Any] | None = None, default: Any = None,
                 other: Any = None) -> None:
        self.node_id, self.shapes, self.default, self.other = node_id, dict(shapes or {}), default, other

    def type_of(self, ref: Any) -> Any:
        from dpflow.nodes.types import ReleasedT

        return self.other if self.other is not None else ReleasedT(self.shapes.get(ref.id, self.default))

    def row_count(self) -> Any:
        from dpflow.domains import RowCount

        return RowCount(self.node_id)


class ValueCtx:
    """The part of the interpreter's EvalContext a row map or post-processing node's ``evaluate`` uses: the numpy
    backend, a node id and released values by handle id."""

    backend = NumpyBackend()

    def __init__(self, values: Mapping[str, Any] | None = None, node_id: str = "n") -> None:
        self.values, self.node_id = dict(values or {}), node_id

    def value(self, ref: Any) -> Any:
        return self.values[ref.id]


class RowsCtx(ValueCtx):
    """A :class:`ValueCtx` that also knows the input's static type (sensitive rows of ``domain``) and evaluates
    bounds at their constants (the interpreter's are rounded up 1e-12: a projection onto them shows here)."""

    def __init__(self, domain: Any, values: Mapping[str, Any] | None = None) -> None:
        from dpflow.domains import RowCount
        from dpflow.nodes.types import RowsT, Size

        super().__init__(values)
        self.rows = RowsT(domain, "X", Size(True, None, RowCount("X")), 1, frozenset({"replace"}), None)

    def input_type(self, k: int = 0) -> Any:
        return self.rows

    def bound(self, sym: Sym) -> float:
        return sym.coef


HOSTILE_KINDS = ("normal", "nan_rows", "huge", "constant", "t1", "inf")
"""The kinds of hostile table :func:`hostile_table` makes (the estimators' no-NaN property tests draw them)."""


def hostile_table(n: int, d: int, kind: str, rng: np.random.Generator, raw_scale: bool = False) -> np.ndarray:
    """An (n, d) table of ``kind``: Gaussian rows, a third of them NaN, scaled by 1e300, a constant first
    column, Cauchy (t1) rows, or a fifth of the entries +inf; with ``raw_scale`` each column is first scaled by
    its own 10^U(-3, 3) (columns of very different units)."""
    X = rng.normal(size=(n, d))
    if raw_scale:
        X = X * 10.0 ** rng.uniform(-3, 3, size=d)
    if kind == "nan_rows":
        X[: n // 3] = np.nan
    elif kind == "huge":
        X = X * 1e300
    elif kind == "constant":
        X[:, 0] = 3.0
    elif kind == "t1":
        X = rng.standard_t(1, size=(n, d))
    elif kind == "inf":
        X[rng.random((n, d)) < 0.2] = np.inf
    return X
