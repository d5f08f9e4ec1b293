"""Splitting one budget into the budgets of plans run one after the other on the same data, so that
their sequential composition is within the whole (for estimators that make a public decision from a
first plan's release before building the next plan: the unbounded Gaussian learner).

Rules (each part is a budget of the same measure, with the fraction ``s_i`` of every parameter;
``sum s_i <= 1``):

* ``ZCDP(rho)``: rho-zCDP composes additively (Bun & Steinke 2016, Lemma 2.3);
* ``ApproxZCDP(rho, delta)``: delta-approximate zCDP composes additively in rho and delta (Bun &
  Steinke 2016, Lemma 8.3);
* ``ApproxDP(eps, delta)``: basic composition (Dwork & Roth 2014, Thm. 3.16);
* ``PureDP(eps)``: basic composition (Dwork & Roth 2014, Thm. 3.16).

>>> [b.describe() for b in sequential_split(ApproxZCDP("0.5", "1e-6"), [Fraction(1, 5), Fraction(4, 5)])]
['rho=0.1, delta=2e-07 approximate zCDP', 'rho=0.4, delta=8e-07 approximate zCDP']
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from .measures import ZCDP, ApproxDP, ApproxZCDP, Measure, PureDP

SPLIT_REFERENCE = ("sequential composition of separately run plans: zCDP Bun-Steinke 2016 Lemma 2.3, approximate "
                   "zCDP Lemma 8.3, (eps, delta) and pure DP Dwork-Roth 2014 Thm. 3.16")


def sequential_split(budget: Measure, shares: Sequence[Fraction]) -> list[Measure]:
    """Budgets of the same measure, the fraction ``shares[i]`` of every parameter of ``budget`` each,
    whose sequential composition is within ``budget`` (see the module docstring for the rule of each
    measure).  The shares are exact fractions in (0, 1] summing to at most 1.

    >>> sequential_split(ZCDP(1), [Fraction(1, 4), Fraction(3, 4)])
    [ZCDP(rho=Fraction(1, 4)), ZCDP(rho=Fraction(3, 4))]
    """
    fr = [Fraction(s) for s in shares]
    if not fr or any(not 0 < s <= 1 for s in fr) or sum(fr) > 1:
        raise ValueError(f"shares must be in (0, 1] and sum to at most 1, got {[str(s) for s in fr]}")
    if isinstance(budget, ZCDP):
        return [ZCDP(budget.rho * s) for s in fr]
    if isinstance(budget, ApproxZCDP):
        return [ApproxZCDP(budget.rho * s, budget.delta * s) for s in fr]
    if isinstance(budget, ApproxDP):
        return [ApproxDP(budget.epsilon * s, budget.delta * s) for s in fr]
    return [PureDP(budget.epsilon * s) for s in fr]


__all__ = ["SPLIT_REFERENCE", "sequential_split"]
