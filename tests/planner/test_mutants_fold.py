"""Mutation-testing pins of ``dpflow/planner/fold.py``: the parallel rule on shares and weights.

Index blocks take the max over pieces under either relation (a record stays in its block); a value partition
takes the sum of the two largest pieces under replace-one (a replaced record can leave one piece and enter
another) and the max under add/remove (McSherry 2009, Thm. 4; docs/spec/accounting.md §1.5).
"""

from __future__ import annotations

from fractions import Fraction

from dpflow.nodes.types import SplitRule
from dpflow.planner.fold import _par_frac

XS = [Fraction(1, 5), Fraction(1, 2), Fraction(1, 3)]


def test_parallel_fold_of_fractions() -> None:
    assert _par_frac("replace", XS, SplitRule.VALUE) == Fraction(1, 2) + Fraction(1, 3)
    assert _par_frac("add_remove", XS, SplitRule.VALUE) == Fraction(1, 2)
    assert _par_frac("replace", XS, SplitRule.INDEX) == Fraction(1, 2)
    assert _par_frac("add_remove", XS, SplitRule.INDEX) == Fraction(1, 2)
    assert _par_frac("replace", [Fraction(1, 7)], SplitRule.VALUE) == Fraction(1, 7)
    assert _par_frac("replace", [], SplitRule.VALUE) == 0 and _par_frac("add_remove", [], SplitRule.INDEX) == 0
