"""Mutation-testing pins of ``dpflow/nodes/rules.py``: each shared sensitivity rule and run-time policy exactly.

Histogram counts (Dwork & Roth 2014, Example 3.2 / Sec. 3.3): replace-one moves one unit between two cells
(l1 2, l2 sqrt 2, linf 1), add/remove one unit in one cell (1 in every norm), both times the stability.
Dividing by n is public only for replace-one neighbours with a public count.  The released-value policies
map NaN, infinities and out-of-range values to fixed values without raising (docs/spec/accounting.md §2).
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from dpflow.domains import MAX_BOUND, Ordinal, Sym, Vectors
from dpflow.errors import DomainError
from dpflow.nodes.rules import (
    capped,
    changes_text,
    count_sensitivities,
    finite_edges,
    has_public_n,
    one_dim,
    public_n,
    released_endpoint,
    released_scale,
)
from dpflow.nodes.types import RowsT, Size

REPLACE = frozenset({"replace"})
ADD_REMOVE = frozenset({"add_remove"})
BOTH = frozenset({"replace", "add_remove"})
CTX: Any = SimpleNamespace(node_id="the_node", relation="replace")


def rows(changes: frozenset[str] = REPLACE, stability: int = 1, public: bool = True, d: int = 1) -> RowsT:
    dom = Ordinal(N=3).as_vectors() if d == 1 else Vectors(d=d, l2_bound=1.0)
    return RowsT(dom, "X", Size(public, 7 if public else None, "n:X"), stability, changes)


@pytest.mark.parametrize("stability", [1, 2, 5])
def test_count_sensitivities_are_exact(stability: int) -> None:
    k = float(stability)
    assert count_sensitivities(rows(REPLACE, stability)) == (Sym.const(2.0 * k), Sym.const(math.sqrt(2.0) * k),
                                                            Sym.const(k))
    assert count_sensitivities(rows(ADD_REMOVE, stability)) == (Sym.const(k),) * 3
    assert count_sensitivities(rows(BOTH, stability)) == (Sym.const(2.0 * k), Sym.const(math.sqrt(2.0) * k),
                                                         Sym.const(k))


def test_n_is_public_only_for_replace_one_with_a_public_count() -> None:
    assert has_public_n(rows(REPLACE))
    assert not has_public_n(rows(ADD_REMOVE))
    assert not has_public_n(rows(BOTH))
    assert not has_public_n(rows(REPLACE, public=False))
    assert public_n(rows(REPLACE), CTX, "Mean") == Sym.const(7.0)
    for bad, words in ((rows(ADD_REMOVE), "add_remove and the count is public"),
                       (rows(REPLACE, public=False), "replace and the count is private")):
        with pytest.raises(DomainError, match=words) as err:
            public_n(bad, CTX, "Mean")
        assert err.value.node == "the_node" and "Mean needs a public row count" in str(err.value)
        assert err.value.fix == ("declare neighbors='replace' and apply it before any value partition "
                                 "(or release a Sum and a Count separately)")


def test_changes_text_and_one_dim() -> None:
    assert changes_text(rows(BOTH)) == "add_remove/replace"
    assert changes_text(rows(REPLACE, 3)) == "replace x stability 3"
    one_dim(rows(d=1), CTX, "Quantile")
    with pytest.raises(DomainError) as err:
        one_dim(rows(d=2), CTX, "Quantile")
    assert (err.value.node, err.value.problem, err.value.fix) == (
        "the_node", "Quantile needs one-dimensional rows, got d=2", "select one column first (Columns)")


def test_finite_edges() -> None:
    assert finite_edges([0, 1.5, 3]) == (0.0, 1.5, 3.0)
    with pytest.raises(ValueError, match="^edges must be finite$"):
        finite_edges([0.0, math.inf])


def test_capped_policy() -> None:
    assert [capped(v) for v in (math.nan, -math.inf, -1.0, 0.0, -0.0)] == [0.0] * 5
    assert math.copysign(1.0, capped(-0.0)) == 1.0                # non-positive counts as (positive) zero
    assert capped(5e-324) == 5e-324 and capped(2.5) == 2.5
    assert capped(MAX_BOUND) == MAX_BOUND and capped(math.nextafter(MAX_BOUND, math.inf)) == MAX_BOUND
    assert capped(math.inf) == MAX_BOUND
    assert type(capped(np.float32(2.0))) is float


def test_released_endpoint_policy() -> None:
    big = float(np.finfo(float).max)
    assert released_endpoint(math.inf) == big
    assert released_endpoint(-math.inf) == 0.0 and released_endpoint(math.nan) == 0.0
    assert released_endpoint(-big) == -big and released_endpoint(big) == big and released_endpoint(-0.5) == -0.5


def test_released_scale_policy() -> None:
    assert [released_scale(v) for v in (math.nan, math.inf, -math.inf)] == [0.0] * 3
    assert released_scale(1e300) == MAX_BOUND and released_scale(-1e300) == -MAX_BOUND
    assert released_scale(MAX_BOUND) == MAX_BOUND and released_scale(-MAX_BOUND) == -MAX_BOUND
    assert released_scale(-3.0) == -3.0 and released_scale(2.0) == 2.0
