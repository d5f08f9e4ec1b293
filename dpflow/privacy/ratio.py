"""The cost of an additive-noise release for a change smaller than the sensitivity its noise was calibrated to:
the one-sided cost that the tight replace-one rule of a value partition charges a piece.

Rule.  Let ``M(D) = f(D) + Z`` with Z calibrated for a sensitivity Delta of f in the noise's norm, so that M
costs ``c`` for every pair of neighbours.  If a class of changes moves f by at most ``Delta' <= q Delta``
(``0 <= q <= 1``), then for those changes the same release costs:

* Gaussian ``N(0, sigma^2 I)``: the privacy loss of a shift v is ``N(|v|^2 / (2 sigma^2), |v|^2 / sigma^2)``,
  which depends on ``|v|_2`` only and is stochastically increasing in it (Balle & Wang 2018, Thm. 8; Dong,
  Roth & Su 2022, Thm. 2.7), so the release is ``q^2 rho``-zCDP (Bun & Steinke 2016, Prop. 1.6), ``q mu``-GDP
  and its Gaussian PLD is at ``q^2 mu^2``;
* Laplace of scale b on every entry: the density ratio at shift v is at most ``exp(|v|_1 / b)`` (Dwork,
  McSherry, Nissim & Smith 2006), so the release is ``q epsilon``-DP, hence ``(q epsilon)^2 / 2``-zCDP (Bun &
  Steinke 2016, Prop. 1.4) with the pure PLD at ``q epsilon``;
* the same on a lattice (discrete Gaussian, discrete Laplace) when the widened sensitivity the noise is
  calibrated to bounds the widened one-sided change divided by q (``nodes.mechanisms.lattice_calibration``).

So in a mechanism's own budget unit the one-sided cost is at most :func:`share_at_ratio` of its share:
``q epsilon`` in pure mode, ``q^2 rho`` in zCDP mode.

Where it is used (the tight rule of one value split under replace-one, McSherry 2009 Thm. 4 and
``planner.ledger.split_rule``): a replaced record x -> x' that moves from piece i to piece j removes one row
from piece i and adds one to piece j.  Each piece sees an add/remove change, whose sensitivity (a row's norm r)
can be half the replace-one diameter 2r that the piece's statistic is calibrated to; the pieces' releases are
independent, so the change costs ``one_i + one_j`` with ``one`` at the ratio q of the two sensitivities and the
same noise, and a change within one piece costs that piece's ``both``.  For a Gaussian sum of rows in a ball,
``q = 1/2``: ``max(rho, rho/4 + rho/4) = rho`` instead of ``2 rho``.

>>> share_at_ratio(Fraction(1, 2), Fraction(1, 2), "zcdp"), share_at_ratio(Fraction(1), Fraction(1, 2), "pure")
(Fraction(1, 8), Fraction(1, 2))
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Literal

__all__ = ["ONE", "RATIO_BITS", "RATIO_REFERENCE", "sensitivity_ratio", "share_at_ratio"]

ONE = Fraction(1)
"""The ratio of a change charged in full (one object, so the planner's folds can test it by identity)."""

RATIO_BITS = 20
"""Ratios are rounded up to multiples of 2^-20 (small exact fractions; at most 1e-6 looser than exact)."""

RATIO_REFERENCE = ("one-sided cost of an additive-noise release at a smaller change (Gaussian: Balle-Wang 2018 "
                   "Thm. 8, Bun-Steinke 2016 Prop. 1.6; Laplace: Dwork-McSherry-Nissim-Smith 2006); value pieces "
                   "under replace-one: McSherry 2009 Thm. 4 with one_i + one_j (dpflow.privacy.ratio)")


def sensitivity_ratio(one: float, both: float) -> Fraction:
    """An upper bound ``q`` on ``one / both`` (the one-sided sensitivity over the one the noise is calibrated to),
    rounded up to a multiple of 2^-:data:`RATIO_BITS`, in ``[2^-20, 1]``: 1 when ``both`` is not a positive
    finite number or ``one`` is not below it (the one-sided change is then charged in full).  Never 0, so that a
    lattice release can divide its float slack by it.

    >>> sensitivity_ratio(1.0, 2.0), sensitivity_ratio(3.0, 2.0), sensitivity_ratio(0.0, 2.0)
    (Fraction(1, 2), Fraction(1, 1), Fraction(1, 1048576))
    >>> sensitivity_ratio(1.0, math.sqrt(2.0)) >= Fraction(1.0) / Fraction(math.sqrt(2.0))
    True
    """
    if not (math.isfinite(one) and math.isfinite(both) and both > 0) or one >= both:
        return ONE
    grid = 1 << RATIO_BITS
    exact_ratio = Fraction(max(one, 0.0)) / Fraction(both)
    q = Fraction(max(math.ceil(exact_ratio * grid), 1), grid)
    return ONE if q == 1 else q


def share_at_ratio(share: Fraction, ratio: Fraction, mode: Literal["zcdp", "pure"]) -> Fraction:
    """The bound on the cost, in the share's unit, of an additive-noise mechanism run at ``share`` for a change of
    at most ``ratio`` times its sensitivity (module docstring): ``ratio * epsilon`` in pure mode, ``ratio^2 * rho``
    in zCDP mode.  The planner allocates with it, so the one-sided costs it composes never exceed it.

    >>> share_at_ratio(Fraction(1, 3), Fraction(1), "zcdp")
    Fraction(1, 3)
    """
    return share * ratio if mode == "pure" else share * ratio * ratio
