"""Privacy measures as exact, immutable values.

Every parameter is stored as a :class:`fractions.Fraction` obtained with :func:`exact`, so that
accounting arithmetic (sums, products, maxima) is exact; floating point appears only in the
conversions of ``conversions.py``, which round outward (see ``rounding.py``).
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Any, TypeAlias

import attrs

__all__ = ["ApproxDP", "ApproxZCDP", "Measure", "PureDP", "ZCDP", "decimal", "exact", "opt_exact"]


def exact(x: float | int | str | Fraction) -> Fraction:
    """Convert ``x`` to an exact, non-negative :class:`~fractions.Fraction`.

    Floats are converted exactly as binary numbers (``exact(0.1) == Fraction(0.1)``, which is not
    1/10); strings are read as exact decimals or ratios (``exact("0.1") == Fraction(1, 10)``).
    Raises ``ValueError`` for nan, infinities and negative numbers, ``TypeError`` for bools and
    other types.  (Python ``fractions`` semantics; exact arithmetic as in OpenDP's use of
    rationals for privacy parameters.)

    >>> exact("0.1")
    Fraction(1, 10)
    >>> exact(0.5)
    Fraction(1, 2)
    >>> exact(-1)
    Traceback (most recent call last):
    ...
    ValueError: privacy parameter must be non-negative, got -1
    """
    q: Fraction
    if type(x) is Fraction:  # the common cases first, without abstract-base-class checks
        q = x
    elif type(x) is float:
        if not math.isfinite(x):
            raise ValueError(f"privacy parameter must be finite, got {x!r}")
        q = Fraction(*x.as_integer_ratio())  # Fraction(x) exactly, without Fraction's abstract-base-class checks
    elif isinstance(x, bool):
        raise TypeError("privacy parameter must be a number or a numeric string, got a bool")
    elif isinstance(x, Fraction):
        q = x
    elif isinstance(x, numbers.Integral):
        q = Fraction(int(x))
    elif isinstance(x, numbers.Rational):
        q = Fraction(int(x.numerator), int(x.denominator))
    elif isinstance(x, (float, numbers.Real)):
        f = float(x)
        if not math.isfinite(f):
            raise ValueError(f"privacy parameter must be finite, got {x!r}")
        q = Fraction(f)
    elif isinstance(x, str):
        try:
            q = Fraction(x.strip())
        except (ValueError, ZeroDivisionError) as err:
            raise ValueError(f"privacy parameter must be a finite number, got {x!r}") from err
    else:
        raise TypeError(f"privacy parameter must be float, int, str or Fraction, got {type(x).__name__}")
    if q.numerator < 0:  # a Fraction's sign is its numerator's (q < 0 goes through numbers.Rational checks)
        raise ValueError(f"privacy parameter must be non-negative, got {x!r}")
    return q


def decimal(x: float | int | str | Fraction) -> Fraction:
    """A budget parameter as the user wrote it: a float means the decimal it prints as (``repr``, the
    shortest decimal that reads back as the same float), so ``ZCDP(0.05)`` is exactly 1/20, not the
    binary float just above it; everything else as :func:`exact`.  Used for the parameters of the
    measures a user declares (budgets), never for costs or sensitivities, which stay exact binary values
    rounded outward.

    >>> decimal(0.05), exact(0.05) > Fraction(1, 20)
    (Fraction(1, 20), True)
    """
    if isinstance(x, float) and math.isfinite(x):
        return exact(repr(x))
    return exact(x)


def opt_exact(x: float | int | str | Fraction | None) -> Fraction | None:
    """:func:`exact` for an optional parameter: ``None`` stays ``None`` (an attrs converter; exact
    rationals as in PEP 3141 ``fractions``).

    >>> opt_exact(None), opt_exact("0.5")
    (None, Fraction(1, 2))
    """
    return None if x is None else exact(x)


def _delta_below_one(_instance: Any, attribute: attrs.Attribute[Fraction], value: Fraction) -> None:
    if value >= 1:
        raise ValueError(f"{attribute.name} must be in [0, 1), got {value}")


def _fmt(q: Fraction) -> str:
    if q.denominator == 1:
        return str(q.numerator)
    return format(float(q), ".10g")


@attrs.frozen
class PureDP:
    """Pure epsilon-differential privacy (Dwork, McSherry, Nissim & Smith 2006; Dwork & Roth 2014, Def. 2.4).

    >>> PureDP("1.5").describe()
    'epsilon=1.5 pure DP'
    """

    epsilon: Fraction = attrs.field(converter=decimal)

    def describe(self) -> str:
        """Human-readable summary (Dwork & Roth 2014, Def. 2.4).

        >>> PureDP(1).describe()
        'epsilon=1 pure DP'
        """
        return f"epsilon={_fmt(self.epsilon)} pure DP"


@attrs.frozen
class ZCDP:
    """rho-zero-concentrated differential privacy (Bun & Steinke 2016, Def. 1.1).

    >>> ZCDP("0.5").describe()
    'rho=0.5 zCDP'
    """

    rho: Fraction = attrs.field(converter=decimal)

    def describe(self) -> str:
        """Human-readable summary (Bun & Steinke 2016, Def. 1.1).

        >>> ZCDP(0.5).describe()
        'rho=0.5 zCDP'
        """
        return f"rho={_fmt(self.rho)} zCDP"


@attrs.frozen
class ApproxZCDP:
    """delta-approximate rho-zCDP (Bun & Steinke 2016, Def. 8.1 / Sec. 1.2.6); ``delta`` in [0, 1).

    >>> ApproxZCDP("0.5", "1e-6").describe()
    'rho=0.5, delta=1e-06 approximate zCDP'
    """

    rho: Fraction = attrs.field(converter=decimal)
    delta: Fraction = attrs.field(converter=decimal, validator=_delta_below_one)

    def describe(self) -> str:
        """Human-readable summary (Bun & Steinke 2016, Def. 8.1).

        >>> ApproxZCDP(1, 0).describe()
        'rho=1, delta=0 approximate zCDP'
        """
        return f"rho={_fmt(self.rho)}, delta={_fmt(self.delta)} approximate zCDP"


@attrs.frozen
class ApproxDP:
    """(epsilon, delta)-DP (Dwork, Kenthapadi, McSherry, Mironov & Naor 2006; Dwork & Roth 2014, Def. 2.4).

    >>> ApproxDP("1", "1e-5").describe()
    '(epsilon=1, delta=1e-05)-DP'
    """

    epsilon: Fraction = attrs.field(converter=decimal)
    delta: Fraction = attrs.field(converter=decimal, validator=_delta_below_one)

    def describe(self) -> str:
        """Human-readable summary (Dwork & Roth 2014, Def. 2.4).

        >>> ApproxDP(2, "0.000001").describe()
        '(epsilon=2, delta=1e-06)-DP'
        """
        return f"(epsilon={_fmt(self.epsilon)}, delta={_fmt(self.delta)})-DP"


#: Any of the native privacy measures.
Measure: TypeAlias = PureDP | ZCDP | ApproxZCDP | ApproxDP
