"""Floating-point error of computed statistics, added to the sensitivity of exact-noise releases.

A statistic computed in floating point differs from its exact value; two neighbouring
datasets can err in opposite directions, so a release on a lattice with exact integer
noise must use ``sensitivity + 2 * error + lattice`` (accounting.md section 3; Casacuberta et
al., CCS 2022, on float sums).  The bounds are Higham's: a sum of n terms in any order is
within ``gamma_{n-1} * sum |x_i|`` of the exact sum, ``gamma_k = k u / (1 - k u)``, u = 2^-53
(Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Lemma 3.1 and eq. (4.4)).
They are evaluated at run time from public quantities only: the public row count, the
declared bounds, and the norm of a released centre.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

import attrs

from dpflow.domains import ReleasedNorm, Sym, SymRef, Vectors
from dpflow.nodes.fixedpoint import GRAM_BITS, SUM_BITS, grid_exponent
from dpflow.privacy.rounding import up

U = 2.0**-53


def gamma(k: float) -> float:
    """Higham's gamma_k = k u / (1 - k u), rounded up (k u must stay below 1/2).

    >>> gamma(10) > 10 * U
    True
    """
    ku = k * U
    if not ku < 0.5:
        raise ValueError(f"gamma_k needs k * u < 1/2, got k = {k}")
    return math.nextafter(ku / (1.0 - ku) * (1.0 + 4 * U), math.inf)


def _up(x: float) -> float:
    """``rounding.up`` of a bound that may be infinite or NaN (kept as it is: no grid then)."""
    return up(x) if math.isfinite(x) else x


OVERFLOW = 2.0**1000
"""Bounds on intermediate magnitudes at or above this make the float error infinite: the
computation might overflow (to inf on one dataset and not on its neighbour), and the bounds'
own arithmetic keeps a factor 2^23 of headroom below float64's largest value."""


@attrs.frozen
class FloatError:
    """How a query's floating-point error is bounded.

    ``kind``: ``sum`` (a float sum of n rows), ``mean`` (sum over the public n), ``gram`` (the second
    moment about ``gram_center``), ``gram_sum`` (the same sum of outer products, not divided: ``n`` is then
    a public bound on the number of rows, which may be private), ``fixed_sum`` and ``fixed_gram`` (a sum
    of rows, and of outer products about ``gram_center``, computed exactly in fixed point on the public grid
    :meth:`grid`, :mod:`dpflow.nodes.fixedpoint`: the bound is half the sensitivity excess of the computed
    statistic, independent of the number of rows, which may be private), ``step`` (``beta - eta * mean``, a
    gradient step from a released ``beta`` with ``||beta||_2 <= offset``), ``exact`` (computed without rounding: integer
    counts, held exactly below 2**53, or clamped and sorted values: no error) or ``freq`` (counts over
    n: one correctly rounded division each, entries summing to at most 1, so the error is at most u in
    l2 and l1).  ``n``: the public number of rows summed; the row bounds come from ``domain``.
    """

    kind: Literal["sum", "mean", "gram", "gram_sum", "fixed_sum", "fixed_gram", "step", "exact", "freq"]
    domain: Vectors
    n: Sym | None = None
    gram_center: str | None = None
    eta: float = 1.0
    """``step`` only: the public step size multiplying the mean."""
    offset: float = 0.0
    """``step`` only: a public bound on the l2 norm of the vector the scaled mean is subtracted from."""
    stability: int = 1
    """How many summed rows one record changes (the rows' stability): each changed row may exceed the
    declared radius, so the sensitivity excess of computed rows counts that many times."""

    def row_norm(self, value: Mapping[SymRef, float], widen: bool = True) -> float:
        """A bound on the l2 norm of one computed row: the declared bound, widened (unless
        ``widen`` is false) by the relative error of the norm computed inside ``Clip``
        ((d + 2) u, Higham Lemma 3.1)."""
        dom = self.domain
        slack = 1.0 + gamma(dom.d + 2) if widen else 1.0
        bounds = []
        if dom.box is not None:
            bounds.append(max(abs(dom.box[0]), abs(dom.box[1])) * math.sqrt(dom.d))
        if dom.l2_bound is not None:
            r = dom.l2_bound.value(value) * slack
            c = 0.0 if dom.center is None else value[ReleasedNorm(dom.center)]
            bounds.append(r + c)
        return min(bounds) if bounds else math.inf

    def centred_norm(self, value: Mapping[SymRef, float], widen: bool = True) -> float:
        """A bound on the norm of ``x - c`` for the gram's centre c, as computed (declared if not ``widen``)."""
        dom = self.domain
        if self.gram_center is None:
            return self.row_norm(value, widen)
        if dom.l2_bound is None or dom.center != self.gram_center:
            return math.inf
        if not widen:
            return dom.l2_bound.value(value)
        r = dom.l2_bound.value(value) * (1.0 + gamma(dom.d + 2))
        return r + U * (r + value[ReleasedNorm(self.gram_center)]) * 2.0

    def grid(self, value: Mapping[SymRef, float]) -> int | None:
        """The exponent ``e`` of the fixed-point grid ``q = 2**e`` of a ``fixed_sum`` (``fixed_gram``): from
        the widened bound on a computed (centred) row, which bounds each of its coordinates
        (:func:`dpflow.nodes.fixedpoint.grid_exponent`); ``None`` for other kinds or without a finite bound.
        The query quantises on this grid and the mechanism's error bound assumes it: one statement for both.

        >>> FloatError("fixed_sum", Vectors(d=2, l2_bound=Sym.const(1.0))).grid({})
        -39
        """
        # (rounded up: the bound's few float operations may round below the exact bound on a coordinate)
        if self.kind == "fixed_sum":
            return grid_exponent(_up(self.row_norm(value)), SUM_BITS)
        if self.kind == "fixed_gram":
            return grid_exponent(_up(self.centred_norm(value)), GRAM_BITS)
        return None

    def refs(self) -> tuple[SymRef, ...]:
        """Run-time names the bound needs (see :meth:`bound`); none for exact counts, whose number of
        rows may be private."""
        if self.kind == "exact":
            return ()
        names: list[SymRef] = []
        if self.n is not None:
            names += self.n.refs()
        if self.domain.l2_bound is not None:
            names += self.domain.l2_bound.refs()
        for c in (self.domain.center, self.gram_center):
            if c is not None:
                names.append(ReleasedNorm(c))
        return tuple(names)

    def bound(self, value: Mapping[SymRef, float], entries: int) -> tuple[float, float]:
        """(l2, l1) bounds on ``computed - exact`` given the run-time values of :meth:`refs`.

        >>> fe = FloatError("mean", Vectors(d=2, l2_bound=Sym.const(1.0)), Sym.const(100.0))
        >>> l2, l1 = fe.bound({}, 2)
        >>> 0 < l2 < 1e-12
        True
        """
        if self.kind == "exact":
            return 0.0, 0.0
        if self.kind in ("fixed_sum", "fixed_gram"):
            return self._fixed_bound(value, entries)
        n = self.n.value(value) if self.n is not None else math.inf
        if not math.isfinite(n):
            return math.inf, math.inf
        if self.kind == "freq":  # each count (exact) divided by n: relative error u per entry
            l2 = U * 1.0
        elif self.kind in ("gram", "gram_sum"):
            b, r = self.centred_norm(value), self.centred_norm(value, widen=False)
            if not n * b * b < OVERFLOW:  # (b >= u ||c||: a huge centre trips this too)
                return math.inf, math.inf
            # entries sum at most n products: error <= gamma_n sum_i |z_ij z_ik|, Frobenius <= gamma_n n b^2
            # (a sum of m <= n rows errs by at most gamma_m m b^2 <= gamma_n n b^2); plus half the sensitivity
            # excess of rows within b rather than the declared radius r (sqrt(2) b^2 against sqrt(2) r^2;
            # r^2 against r^2 for an added row is smaller); b - r is exact (Sterbenz) but b itself was
            # rounded in the few additions that made it (at most u b each, comparable to the widening
            # (d + 2) u r): 4 u b restores an upper bound
            excess = (b - r + 4 * U * b) * (b + r) * math.sqrt(2.0) * self.stability
            if self.kind == "gram_sum":
                l2 = gamma(n) * n * b * b + excess / 2.0
            else:  # everything divided by n, and the division's own rounding (relative u)
                l2 = gamma(n) * b * b + U * b * b + excess / (2.0 * n)
        else:
            b = self.row_norm(value)
            if not n * b * max(self.eta, 1.0) + self.offset < OVERFLOW:
                return math.inf, math.inf
            # a sum of n rows in any order; plus half the diameter excess of computed rows (2 b vs 2 r)
            l2 = gamma(n) * n * b + b * gamma(self.domain.d + 2) * self.stability
            if self.kind != "sum":  # the division by n: relative u of the computed mean (|mean| <= b)
                l2 = l2 / n + U * b
            if self.kind == "step":
                # beta - eta * m for the computed mean m (|m| <= b): the error of m scaled by eta, the
                # rounding of eta * m (u eta b) and of the subtraction (u (||beta|| + eta b))
                l2 = self.eta * l2 + U * self.offset + 2 * U * self.eta * b
        return self._rounded(l2, entries)

    def _fixed_bound(self, value: Mapping[SymRef, float], entries: int) -> tuple[float, float]:
        """Half the sensitivity excess of a fixed-point sum (:mod:`dpflow.nodes.fixedpoint`): each changed row
        exceeds the declared radius by at most ``b gamma_{d+2}`` as computed (the float sum's term) and moves
        by at most ``q sqrt(d) / 2`` when quantised; no term grows with the number of rows."""
        e = self.grid(value)
        if e is None:
            return math.inf, math.inf
        half_cell = math.ldexp(1.0, e) * math.sqrt(self.domain.d) / 2.0  # q sqrt(d) / 2
        if self.kind == "fixed_sum":
            l2 = (self.row_norm(value) * gamma(self.domain.d + 2) + half_cell) * self.stability
        else:
            # ||q Q(z)|| <= b + q sqrt(d) / 2 = b1 for computed centred rows within b: the Gram's excess over the
            # declared sqrt(2) r^2 (replace) or r^2 (add/remove) is at most sqrt(2) (b1^2 - r^2), halved; 4 u b1
            # restores an upper bound on b1 - r as for gram_sum
            b1, r = self.centred_norm(value) + half_cell, self.centred_norm(value, widen=False)
            if not b1 * b1 < OVERFLOW:
                return math.inf, math.inf
            l2 = (b1 - r + 4 * U * b1) * (b1 + r) * math.sqrt(2.0) * self.stability / 2.0
        return self._rounded(l2, entries)

    @staticmethod
    def _rounded(l2: float, entries: int) -> tuple[float, float]:
        # rounded up (relative 1e-12, rounding.up): covers the rounding of the dozen operations above and
        # the second-order terms left out (|m| <= (1 + gamma_n) b, not b: a relative u gamma_n of the total)
        l2 = up(l2)
        return l2, up(l2 * math.sqrt(entries))
