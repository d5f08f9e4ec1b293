"""Mutation-testing pins of ``dpflow/nodes/params.py`` (2026-11-29): the converters that refuse a bad public parameter
when a node is made, each with its exact message, and their boundaries (0 is a non-negative radius, not a positive
one; a missing value in a public array is refused as non-finite)."""

from __future__ import annotations

import pytest

from dpflow.domains import MAX_BOUND
from dpflow.nodes.params import finite, finite_tuple, magnitude, nonnegative, positive, radius


def _message(fn: object, x: object) -> str:
    with pytest.raises(ValueError) as e:
        fn(x)  # type: ignore[operator]
    return str(e.value)


def test_boundaries() -> None:
    assert nonnegative(0) == 0.0 and nonnegative(0.5) == 0.5 and radius(0) == 0.0
    assert positive(1e-300) == 1e-300 and magnitude(-MAX_BOUND) == -MAX_BOUND
    assert finite_tuple([0, 1], "edges") == (0.0, 1.0)


def test_messages() -> None:
    assert _message(finite, float("nan")) == "expected a finite number, got nan"
    assert _message(positive, 0.0) == "expected a finite positive number, got 0.0"
    assert _message(nonnegative, -0.5) == "expected a finite non-negative number, got -0.5"
    with pytest.raises(ValueError) as e:
        finite_tuple([0.0, None], "edges")
    assert str(e.value) == "edges must be finite"
