"""Mutation-testing pins of ``dpflow/nodes/params.py`` (2026-11-29): the converters that refuse a bad public parameter
when a node is made, each with its exact message, and their boundaries (0 is a non-negative radius, not a positive
one; a missing value in a public array is refused as non-finite)."""

from __future__ import annotations

import re

import pytest

from dpflow.domains import MAX_BOUND
from dpflow.handles import Ref, param
from dpflow.nodes.params import finite, finite_tuple, magnitude, nonnegative, optional_ref, positive, radius


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


def test_optional_ref_keeps_handles_and_refuses_anything_else() -> None:
    import dpflow as dp

    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    h = b.public([1.0, 2.0])
    assert optional_ref(None) is None
    assert optional_ref(Ref("r")) == Ref("r")
    ref = optional_ref(h)
    assert isinstance(ref, Ref) and ref == param(h)
    for bad in (2.0, 0, "", (1.0,)):
        with pytest.raises(TypeError, match=r"^expected a released or public value of the plan \(b\.public\(\.\.\.\) "
                                            r"for a constant\) or None, got " + re.escape(repr(bad)) + "$"):
            optional_ref(bad)
