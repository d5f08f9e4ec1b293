"""Mutation-testing pins of ``dpflow/nodes/base.py``: how a record's change bounds a sum of row features.

:func:`change_bound` is the rule every query's sensitivity starts from: a replaced row moves a sum by the
diameter, an added or removed one by the norm, and a transform of stability k lets one record change k
rows, multiplying both.  With stability 1 (every ordinary plan) multiplying and dividing by the stability
agree, so these tests use stabilities 2 and 3 (the pooled-coordinates transform of ``quantile.py`` makes
stability d).  Dwork & Roth 2014, Def. 2.4 / Sec. 3.3; McSherry 2009 (PINQ), stable transformations.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpflow.domains import ReleasedScalar, RowCount, Sym, Vectors
from dpflow.errors import PlanTypeError
from dpflow.nodes.base import change_bound, finite_or_zero, released_scalar, square_problem, sym_max
from dpflow.nodes.types import RowsT, Size

REPLACE = frozenset({"replace"})
ADD_REMOVE = frozenset({"add_remove"})
BOTH = frozenset({"replace", "add_remove"})


def rows(changes: frozenset[str], stability: int) -> RowsT:
    return RowsT(Vectors(d=2, l2_bound=1.0), "X", Size(True, 10, RowCount("X")), stability, changes)


@pytest.mark.parametrize("stability", [1, 2, 3])
def test_change_bound_is_the_stability_times_the_diameter_or_the_norm(stability: int) -> None:
    diameter, norm = Sym.const(4.0), Sym.const(1.5)
    assert change_bound(rows(REPLACE, stability), diameter, norm) == Sym.const(4.0 * stability)
    assert change_bound(rows(ADD_REMOVE, stability), diameter, norm) == Sym.const(1.5 * stability)
    # both relations allowed: the larger of the two, times the stability
    assert change_bound(rows(BOTH, stability), diameter, norm) == Sym.const(4.0 * stability)
    assert change_bound(rows(BOTH, stability), Sym.const(1.0), Sym.const(2.5)) == Sym.const(2.5 * stability)


def test_change_bound_keeps_run_time_factors_and_scales_the_coefficient() -> None:
    r = Sym.ref(ReleasedScalar("radius"))
    out = change_bound(rows(REPLACE, 3), r * 2.0, r)
    assert out == Sym(6.0, ((ReleasedScalar("radius"), 1),))
    assert out is not None and out.value({ReleasedScalar("radius"): 0.5}) == pytest.approx(3.0, rel=1e-11)
    assert out.value({ReleasedScalar("radius"): 0.5}) >= 3.0                   # Sym.value rounds up


def test_change_bound_is_unbounded_when_the_relevant_bound_is() -> None:
    assert change_bound(rows(REPLACE, 2), None, Sym.const(1.0)) is None
    assert change_bound(rows(ADD_REMOVE, 2), Sym.const(1.0), None) is None
    assert change_bound(rows(BOTH, 2), Sym.const(1.0), None) is None
    assert change_bound(rows(BOTH, 2), None, Sym.const(1.0)) is None
    # the other relation's bound does not matter
    assert change_bound(rows(REPLACE, 2), Sym.const(1.0), None) == Sym.const(2.0)
    assert change_bound(rows(ADD_REMOVE, 2), None, Sym.const(1.0)) == Sym.const(2.0)


def test_sym_max_takes_the_larger_bound_and_none_wins() -> None:
    a, b = Sym.const(2.0), Sym.const(3.0)
    assert sym_max(a, b) == b and sym_max(b, a) == b
    assert sym_max(a, a) == a
    assert sym_max(None, a) is None and sym_max(a, None) is None
    r2, r3 = Sym.ref(ReleasedScalar("r")) * 2.0, Sym.ref(ReleasedScalar("r")) * 3.0
    assert sym_max(r2, r3) == r3 and sym_max(r3, r2) == r3
    # a zero bound is dominated by anything, whatever its factors
    assert sym_max(Sym.const(0.0), r2) == r2 and sym_max(r2, Sym.const(0.0)) == r2
    with pytest.raises(PlanTypeError) as err:
        sym_max(Sym.const(1.0), r2)
    assert err.value.node == "bound" and "cannot compare" in err.value.problem
    assert err.value.fix == "declare constant bounds, or bounds with the same released factors"


def test_a_released_scalar_is_its_first_entry_as_a_float() -> None:
    """The declared policy of every node that reads a released radius, bound, scale or index: the first entry,
    whatever shape the value was released with, as a Python float (non-finite values pass through; each caller
    states its own policy for them)."""
    assert released_scalar(np.array([[0.5, 9.0], [7.0, 8.0]])) == 0.5
    assert released_scalar([3, 4]) == 3.0 and type(released_scalar(np.array([3], dtype=np.int64))) is float
    assert released_scalar(np.float32(0.25)) == 0.25
    assert math.isnan(released_scalar([float("nan"), 1.0])) and math.isnan(released_scalar([None, 1.0]))


def test_finite_or_zero_is_float64() -> None:
    """A released value's non-finite entries (a missing one included) are 0, and the result is float64 whatever the
    value's dtype (a float32 matrix is not solved or decomposed in single precision)."""
    out = finite_or_zero(np.array([1.5, np.inf, np.nan], dtype=np.float32))
    assert out.dtype == np.float64 and out.tolist() == [1.5, 0.0, 0.0]
    assert finite_or_zero([2.0, None]).tolist() == [2.0, 0.0]


def test_square_problem_accepts_the_least_side() -> None:
    for least in (1, 2):
        assert square_problem("K", (least, least), least) is None
        assert square_problem("K", (least - 1, least - 1), least) == (
            f"K needs a square matrix of side >= {least}, got shape {(least - 1, least - 1)}")
    assert square_problem("K", (2, 3), 1) == "K needs a square matrix of side >= 1, got shape (2, 3)"
    assert square_problem("K", (2, 2, 2), 1) == "K needs a square matrix of side >= 1, got shape (2, 2, 2)"

