"""Data domains and the symbolic bounds that sensitivities are computed from.

A *domain* says what one record (one row) can be.  Its bounds are what the planner
turns into sensitivities: ``Clip(radius=4.0)`` maps ``Vectors(d)`` to
``Vectors(d, l2_bound=4.0)`` and a mean of such rows moves by at most ``2*4/n`` when
one row is replaced.

A bound is a :class:`Sym`: a public constant times a product of *released* or
public run-time scalars (a radius computed from an earlier private release, the
public size of a dataset).  The planner only needs the shape of the bound to
certify a plan: the privacy cost of a mechanism is fixed by the budget, and its
noise scale is the sensitivity (evaluated when the released factors are known)
divided by that cost.

>>> from dpflow.domains import Vectors, Sym
>>> Vectors(d=3, l2_bound=Sym.const(2.0)).diameter_l2().text()
'4'
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import attrs

from dpflow.privacy.rounding import to_float_up, up

_MIN_NORMAL = sys.float_info.min
_MAX_FLOAT = sys.float_info.max


def _fmt(x: float) -> str:
    return f"{x:.6g}"


MAX_BOUND = 2.0**256
"""The largest magnitude a public bound on the rows may declare (about 1.16e77).

A box endpoint, an l2 radius, a centre coordinate or a clipping bound above it is refused
where it is declared (a released one is capped at it by the node that reads it).  With every
row norm within a small multiple of ``MAX_BOUND * sqrt(d)``, no computation dpflow does on at
most 2^63 rows can overflow float64: sums stay below 2^(63 + 258) sqrt(d), second moments below
2^(63 + 516) d, a gradient step (three such factors) below 2^(63 + 770) d.  Without the cap a
sum could overflow to inf on one dataset and not on its neighbour, which no noise hides.
"""


def _checked_coef(value: float) -> float:
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"a bound must be finite and non-negative, got {value!r}")
    return value


def _bound_coef(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    _checked_coef(value)


@attrs.frozen
class RowCount:
    """The public number of rows of the dataset node ``node``: the interpreter counts the rows that node holds.

    >>> RowCount("clip_2").text()
    'n:clip_2'
    """

    node: str = attrs.field(validator=attrs.validators.instance_of(str))

    def text(self) -> str:
        """How formulas print it."""
        return f"n:{self.node}"


@attrs.frozen
class ReleasedScalar:
    """The released (or public) scalar that node ``node`` outputs.

    >>> ReleasedScalar("radius_4").text()
    'radius_4'
    """

    node: str = attrs.field(validator=attrs.validators.instance_of(str))

    def text(self) -> str:
        """How formulas print it."""
        return self.node


@attrs.frozen
class ReleasedNorm:
    """The l2 norm, rounded up, of the released (or public) vector that node ``node`` outputs.

    >>> ReleasedNorm("centre_3").text()
    'norm:centre_3'
    """

    node: str = attrs.field(validator=attrs.validators.instance_of(str))

    def text(self) -> str:
        """How formulas print it."""
        return f"norm:{self.node}"


SymRef = RowCount | ReleasedScalar | ReleasedNorm
"""A run-time public value a bound depends on: typed, so that no planning or run-time decision parses a name."""



def _ref_key(factor: tuple[SymRef, int]) -> str:
    """Factors are kept in the order of their printed form (a canonical order only, never a decision)."""
    return factor[0].text()


def _bound_factors(_: object, attribute: attrs.Attribute[tuple[tuple[SymRef, int], ...]],
                   value: tuple[tuple[SymRef, int], ...]) -> None:
    for f in value:
        if not (isinstance(f, tuple) and len(f) == 2 and isinstance(f[0], (RowCount, ReleasedScalar, ReleasedNorm))
                and isinstance(f[1], int) and not isinstance(f[1], bool)):
            raise ValueError(f"a bound's factors must be (RowCount | ReleasedScalar | ReleasedNorm, integer power) "
                             f"pairs, got {f!r}")


@attrs.frozen
class Sym:
    """A non-negative scalar ``coef * prod(value(ref) ** power)``.

    Each ref is a typed run-time public value (:data:`SymRef`): the public row count of a dataset
    node (:class:`RowCount`), a released scalar (:class:`ReleasedScalar`) or the norm of a released
    vector (:class:`ReleasedNorm`).  The planner checks that each names a node of the right type.

    >>> r = Sym.ref(ReleasedScalar("radius"), 1)
    >>> (r * 2.0 / Sym.ref(RowCount("X"), 1)).text()
    '2*radius/n:X'
    >>> 3.0 <= (r * 2.0).value({ReleasedScalar("radius"): 1.5}) < 3.0 + 1e-9
    True
    """

    coef: float = attrs.field(converter=float, validator=_bound_coef)
    """Finite and non-negative: a negative bound would turn into a zero noise scale."""
    factors: tuple[tuple[SymRef, int], ...] = attrs.field(default=(), validator=_bound_factors)

    @staticmethod
    def const(x: float) -> Sym:
        """A public constant (finite and non-negative, else ``ValueError``)."""
        return Sym(float(x))

    @staticmethod
    def ref(ref: SymRef, power: int = 1) -> Sym:
        """The run-time public value ``ref`` raised to ``power``."""
        return Sym(1.0, ((ref, power),))

    def _combine(self, other: Sym | float, sign: int) -> Sym:
        if not isinstance(other, Sym):  # a constant, checked as :meth:`const` checks it: the factors stay
            c = _checked_coef(float(other))
            if c == 1.0:
                return self
            return Sym(self.coef * c if sign > 0 else self.coef / c, self.factors)
        if not other.factors:
            return Sym(self.coef * other.coef if sign > 0 else self.coef / other.coef, self.factors)
        powers: dict[SymRef, int] = dict(self.factors)
        for ref, p in other.factors:
            powers[ref] = powers.get(ref, 0) + sign * p
        facs = tuple(sorted(((k, v) for k, v in powers.items() if v != 0), key=_ref_key))
        coef = self.coef * other.coef if sign > 0 else self.coef / other.coef
        return Sym(coef, facs)

    def __mul__(self, other: Sym | float) -> Sym:
        return self._combine(other, 1)

    __rmul__ = __mul__

    def __truediv__(self, other: Sym | float) -> Sym:
        return self._combine(other, -1)

    def pow(self, k: int) -> Sym:
        """``self ** k`` for a positive integer k."""
        return Sym(self.coef**k, tuple((name, p * k) for name, p in self.factors))

    @property
    def is_const(self) -> bool:
        """True when the bound has no run-time factor."""
        return not self.factors

    def refs(self) -> tuple[SymRef, ...]:
        """The run-time values the bound depends on."""
        return tuple(ref for ref, _ in self.factors)

    def value(self, env: Mapping[SymRef, float] | None = None) -> float:
        """Evaluate, rounding up so that a sensitivity is never under-stated; no value raises.

        A run-time factor that is NaN or +inf makes the bound infinite (the mechanism then
        releases noise of infinite scale, which is private); a negative one (-inf included)
        counts as zero, and zero to a negative power (a bound that divides by it) is infinite
        too.  The product is computed in floats and rounded up (:func:`up`) while every partial
        product is a normal float; otherwise (one would overflow, or underflow into the
        subnormals, where floats lose relative precision) exactly, rounded up to a float
        (inf above the float range, never 0 for a positive product).

        >>> n = RowCount("X")
        >>> Sym.ref(n, -1).value({n: 0.0}), Sym.ref(n, -1).value({n: 5e-324}), Sym.ref(n, -2).value({n: 1e308})
        (inf, inf, 5e-324)
        """
        vals: list[tuple[float, int]] = []
        for ref, p in self.factors:
            if env is None or ref not in env:
                raise KeyError(f"bound {self.text()} needs the run-time value {ref.text()!r}")
            v = float(env[ref])
            if math.isnan(v) or v == math.inf:
                return math.inf
            v = max(v, 0.0)
            if v == 0.0 and p < 0:
                return math.inf
            vals.append((v, p))
        out = self.coef
        if out == 0.0 or any(v == 0.0 for v, _ in vals):
            return 0.0
        try:
            for v, p in vals:
                term = v**p
                out *= term
                if not (_MIN_NORMAL <= term and _MIN_NORMAL <= out <= _MAX_FLOAT):
                    raise OverflowError
        except OverflowError:  # raised by ** above the float range, or by the check
            exact = Fraction(self.coef)
            for v, p in vals:
                exact *= Fraction(v) ** p
            return to_float_up(exact)
        return up(out)

    def text(self) -> str:
        """A readable formula such as ``2*radius/n:X``."""
        num = [r.text() if p == 1 else f"{r.text()}^{p}" for r, p in self.factors if p > 0]
        den = [r.text() if p == -1 else f"{r.text()}^{-p}" for r, p in self.factors if p < 0]
        head = _fmt(self.coef)
        if num:
            head = "*".join(num) if self.coef == 1.0 else head + "*" + "*".join(num)
        if den:
            head += "/" + "/".join(den)
        return head


Bound = Sym | None


def _min_bound(a: Bound, b: Bound) -> Bound:
    if a is None:
        return b
    if b is None:
        return a
    if a.is_const and b.is_const:
        return a if a.coef <= b.coef else b
    return a


def _opt_sym(x: Sym | float | None) -> Sym | None:
    """A bound given as a number is a public constant (validated by :class:`Sym`)."""
    if x is None or isinstance(x, Sym):
        return x
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise ValueError(f"an l2 bound must be a Sym or a number, got {x!r}")
    return Sym.const(float(x))


def _groups(value: object) -> tuple[tuple[int, ...], ...]:
    """Converter for one-hot groups: a tuple of tuples of coordinate indices (checked by :class:`Vectors`)."""
    if not isinstance(value, (tuple, list)) or not all(isinstance(g, (tuple, list)) for g in value):
        raise ValueError(f"one-hot groups are a list of lists of coordinate indices, got {value!r}")
    out = []
    for g in value:
        if not g or not all(isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in g):
            raise ValueError(f"a one-hot group is a non-empty list of coordinate indices, got {g!r}")
        out.append(tuple(int(i) for i in g))
    return tuple(out)


def _group_text(g: tuple[int, ...]) -> str:
    run = g == tuple(range(g[0], g[0] + len(g)))
    return f"{g[0]}..{g[-1]}" if run and len(g) > 2 else ",".join(str(i) for i in g)


def integral(x: Any) -> Any:
    """A public count or dimension as a Python int when it is integral (``int``, any numpy integer: a
    ``numbers.Integral`` that is not a ``bool``), anything else unchanged for its field's own check.

    >>> import numpy as np
    >>> integral(np.int64(1000)), integral(np.uint8(3)), integral(2.5), integral(True)
    (1000, 3, 2.5, True)
    """
    return int(x) if isinstance(x, numbers.Integral) and not isinstance(x, bool) else x


def _opt_pair(b: tuple[float, float] | None) -> tuple[float, float] | None:
    if b is None:
        return None
    if len(b) != 2:
        raise ValueError(f"a box is a (lower, upper) pair, got {b!r}")
    return float(b[0]), float(b[1])


@attrs.frozen(kw_only=True)
class Vectors:
    """Rows in R^d, optionally inside an l2 ball and/or a coordinate box.

    ``center`` names the released or public vector the l2 ball is centred on
    (``None``: the origin).  ``box`` is the same interval for every coordinate.
    ``onehot`` lists disjoint groups of coordinate indices; in every row the coordinates of a group
    are 0 except at most one, which is 1: a vertex of the simplex ``{0, e_1, ..., e_k}`` (a one-hot
    encoded :class:`dpflow.Category`; a source types it from its declared columns and enforces it,
    ``Columns`` and ``Clip`` keep it where it still holds).  The sensitivity rule over such rows is
    ``dpflow.nodes.rules.sum_sensitivities``.

    >>> Vectors(d=2, box=(0.0, 1.0)).diameter_l1().text()
    '2'
    >>> Vectors(d=5, box=(0.0, 1.0), onehot=((1, 2, 3, 4),)).describe()
    'Vectors(d=5, box=[0, 1], one-hot [1..4])'
    """

    d: int = attrs.field(converter=integral)
    l2_bound: Sym | None = attrs.field(default=None, converter=_opt_sym)
    box: tuple[float, float] | None = attrs.field(default=None, converter=_opt_pair)
    center: str | None = None
    onehot: tuple[tuple[int, ...], ...] = attrs.field(default=(), converter=_groups)

    def __attrs_post_init__(self) -> None:
        if isinstance(self.d, bool) or not isinstance(self.d, numbers.Integral) or self.d < 1:
            raise ValueError(f"Vectors needs an integer d >= 1, got d={self.d!r}")
        flat = [i for g in self.onehot for i in g]
        if len(set(flat)) != len(flat) or not all(0 <= i < self.d for i in flat):
            raise ValueError(f"one-hot groups must be disjoint coordinate indices in [0, {self.d}), "
                             f"got {self.onehot}")
        if self.box is not None:
            lo, hi = self.box
            if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
                raise ValueError(f"box must be finite with lower <= upper, got {self.box}")

    def largest_bound(self) -> float:
        """The largest constant the domain declares: box endpoints (in magnitude), a constant l2 bound.

        >>> Vectors(d=2, box=(-5.0, 1.0), l2_bound=2.0).largest_bound()
        5.0
        """
        out = 0.0 if self.box is None else max(abs(self.box[0]), abs(self.box[1]))
        if self.l2_bound is not None and self.l2_bound.is_const:
            out = max(out, self.l2_bound.coef)
        return out

    def describe(self) -> str:
        """Readable form used in ledgers."""
        parts = [f"d={self.d}"]
        if self.l2_bound is not None:
            around = "" if self.center is None else f" around {self.center}"
            parts.append(f"l2<={self.l2_bound.text()}{around}")
        if self.box is not None:
            parts.append(f"box=[{_fmt(self.box[0])}, {_fmt(self.box[1])}]")
        if self.onehot:
            parts.append("one-hot " + " ".join(f"[{_group_text(g)}]" for g in self.onehot))
        return f"Vectors({', '.join(parts)})"

    def _box_width(self) -> float | None:
        return None if self.box is None else self.box[1] - self.box[0]

    def _box_radius(self) -> float | None:
        return None if self.box is None else max(abs(self.box[0]), abs(self.box[1]))

    def diameter_l2(self) -> Bound:
        """Largest l2 distance between two rows."""
        w = self._box_width()
        from_box = None if w is None else Sym.const(w * math.sqrt(self.d))
        from_ball = None if self.l2_bound is None else self.l2_bound * 2.0
        return _min_bound(from_ball, from_box)

    def diameter_l1(self) -> Bound:
        """Largest l1 distance between two rows."""
        w = self._box_width()
        from_box = None if w is None else Sym.const(w * self.d)
        from_ball = None if self.l2_bound is None else self.l2_bound * (2.0 * math.sqrt(self.d))
        return _min_bound(from_ball, from_box)

    def diameter_linf(self) -> Bound:
        """Largest coordinate-wise distance between two rows."""
        w = self._box_width()
        from_box = None if w is None else Sym.const(w)
        from_ball = None if self.l2_bound is None else self.l2_bound * 2.0
        return _min_bound(from_ball, from_box)

    def norm_l2(self) -> Bound:
        """Largest l2 norm of a row (distance from the origin)."""
        r = self._box_radius()
        from_box = None if r is None else Sym.const(r * math.sqrt(self.d))
        from_ball = self.l2_bound if self.center is None else None
        return _min_bound(from_ball, from_box)

    def norm_l1(self) -> Bound:
        """Largest l1 norm of a row."""
        r = self._box_radius()
        from_box = None if r is None else Sym.const(r * self.d)
        from_ball = None
        if self.center is None and self.l2_bound is not None:
            from_ball = self.l2_bound * math.sqrt(self.d)
        return _min_bound(from_ball, from_box)

    def norm_linf(self) -> Bound:
        """Largest absolute coordinate of a row."""
        r = self._box_radius()
        from_box = None if r is None else Sym.const(r)
        from_ball = self.l2_bound if self.center is None else None
        return _min_bound(from_ball, from_box)


@attrs.frozen(kw_only=True)
class Reals:
    """Scalar records, optionally inside ``[lower, upper]``.

    >>> Reals(lower=0.0, upper=1.0).as_vectors().describe()
    'Vectors(d=1, box=[0, 1])'
    """

    lower: float | None = None
    upper: float | None = None

    def __attrs_post_init__(self) -> None:
        for v in (self.lower, self.upper):
            if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v)):
                raise ValueError(f"Reals bounds must be finite numbers, got {self.lower!r}, {self.upper!r}")
        if self.lower is not None and self.upper is not None and not self.lower <= self.upper:
            raise ValueError(f"Reals needs lower <= upper, got [{self.lower}, {self.upper}]")

    def describe(self) -> str:
        """Readable form used in ledgers."""
        return f"Reals([{self.lower}, {self.upper}])"

    def as_vectors(self) -> Vectors:
        """The same records seen as one-dimensional vectors."""
        if self.lower is None or self.upper is None:
            return Vectors(d=1)
        return Vectors(d=1, box=(self.lower, self.upper))


@attrs.frozen(kw_only=True)
class BooleanCube:
    """Records in {0, 1}^d.

    >>> BooleanCube(d=4).as_vectors().diameter_l2().text()
    '2'
    """

    d: int = attrs.field(converter=integral)

    def describe(self) -> str:
        """Readable form used in ledgers."""
        return f"BooleanCube(d={self.d})"

    def as_vectors(self) -> Vectors:
        """The cube as a box in R^d."""
        return Vectors(d=self.d, box=(0.0, 1.0))


@attrs.frozen(kw_only=True)
class Ordinal:
    """Integer records in ``[0, N)``; N up to 2**62 is held exactly in int64.

    >>> Ordinal(N=10).describe()
    'Ordinal(N=10)'
    """

    N: int = attrs.field(converter=integral)

    def __attrs_post_init__(self) -> None:
        if isinstance(self.N, bool) or not isinstance(self.N, numbers.Integral) or not 1 <= self.N <= 2**62:
            raise ValueError(f"Ordinal needs an integer 1 <= N <= 2**62, got N={self.N!r}")

    def describe(self) -> str:
        """Readable form used in ledgers."""
        return f"Ordinal(N={self.N})"

    def as_vectors(self) -> Vectors:
        """The values as one-dimensional vectors in ``[0, N-1]``."""
        return Vectors(d=1, box=(0.0, float(self.N - 1)))


@attrs.frozen(kw_only=True)
class SymmetricMatrices:
    """Symmetric d x d matrices (the values of second-moment statistics).

    >>> SymmetricMatrices(d=3).describe()
    'SymmetricMatrices(d=3)'
    """

    d: int

    def describe(self) -> str:
        """Readable form used in ledgers."""
        return f"SymmetricMatrices(d={self.d})"


RowDomain = Vectors | Reals | BooleanCube | Ordinal
"""Domains a data source can declare."""


def as_vectors(domain: RowDomain) -> Vectors:
    """View any row domain as vectors (the form every query works on).

    >>> as_vectors(BooleanCube(d=2)).box
    (0.0, 1.0)
    """
    return domain if isinstance(domain, Vectors) else domain.as_vectors()
