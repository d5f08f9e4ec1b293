"""Converters for the public parameters of nodes (attrs ``converter=``), each refusing a bad value
with a ``ValueError`` when the node is constructed, before any plan is certified or data read.

* finite numbers: :func:`finite`, :func:`positive`, :func:`nonnegative`, :func:`finite_tuple`;
* bounds on the rows, at most ``MAX_BOUND`` in magnitude so that no sum over the rows can overflow
  float64 (:data:`dpflow.domains.MAX_BOUND`): :func:`magnitude`, :func:`radius`,
  :func:`positive_radius`;
* a released handle or a public number: ``released_or_*`` (a :class:`~dpflow.handles.Ref` is kept and
  checked at plan time; a number is checked here), and :func:`optional_ref`.

The run-time policy for a released radius is :func:`dpflow.nodes.rules.capped`.

>>> positive(0.5), radius(2), finite_tuple([0, 1.5], "edges")
(0.5, 2.0, (0.0, 1.5))
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dpflow.domains import MAX_BOUND
from dpflow.handles import Ref, param


def finite_tuple(values: Any, name: str) -> tuple[float, ...]:
    """A public array parameter as a tuple of finite floats."""
    arr = np.asarray(values, dtype=float).ravel()
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return tuple(float(v) for v in arr)


def finite(x: Any) -> float:
    """Converter for a public parameter that must be a finite number."""
    v = float(x)
    if not math.isfinite(v):
        raise ValueError(f"expected a finite number, got {x!r}")
    return v


def positive(x: Any) -> float:
    """Converter for a public parameter that must be a finite positive number (a weight, a step, a width)."""
    v = finite(x)
    if not v > 0:
        raise ValueError(f"expected a finite positive number, got {x!r}")
    return v


def nonnegative(x: Any) -> float:
    """Converter for a public parameter that must be a finite non-negative number (a radius, a bound)."""
    v = finite(x)
    if not v >= 0:
        raise ValueError(f"expected a finite non-negative number, got {x!r}")
    return v


def magnitude(x: Any) -> float:
    """Converter for a public bound on the rows' values (a box endpoint, a centre coordinate): finite,
    with ``|x| <= MAX_BOUND`` so that no sum over the rows can overflow (see :data:`dpflow.domains.MAX_BOUND`).

    >>> magnitude(-3.0)
    -3.0
    """
    v = finite(x)
    if not abs(v) <= MAX_BOUND:
        raise ValueError(f"a bound on the rows must be at most {MAX_BOUND:.6g} in magnitude (sums of such "
                         f"rows could overflow float64), got {x!r}")
    return v


def radius(x: Any) -> float:
    """Converter for a public radius or clipping bound: finite, non-negative and at most ``MAX_BOUND``."""
    return magnitude(nonnegative(x))


def positive_radius(x: Any) -> float:
    """Converter for a public positive radius or clipping bound, at most ``MAX_BOUND``."""
    return magnitude(positive(x))


def _released_or(x: Any, check: Callable[[Any], float]) -> Any:
    x = param(x)
    return x if isinstance(x, Ref) else check(x)


def released_or_finite(x: Any) -> Any:
    """Converter: a released handle (kept as a :class:`Ref`) or a finite public number."""
    return _released_or(x, finite)


def released_or_positive(x: Any) -> Any:
    """Converter: a released handle (kept as a :class:`Ref`) or a finite positive public number."""
    return _released_or(x, positive)


def released_or_nonnegative(x: Any) -> Any:
    """Converter: a released handle (kept as a :class:`Ref`) or a finite non-negative public number."""
    return _released_or(x, nonnegative)


def released_or_radius(x: Any) -> Any:
    """Converter: a released handle (kept as a :class:`Ref`) or a public radius (see :func:`radius`)."""
    return _released_or(x, radius)


def released_or_positive_radius(x: Any) -> Any:
    """Converter: a released handle (kept as a :class:`Ref`) or a public positive radius."""
    return _released_or(x, positive_radius)


def optional_ref(x: Any) -> Ref | None:
    """Converter: ``None``, or a released (or public) handle of the plan kept as a :class:`Ref`; anything else
    is refused (a bare number would reach the planner where a handle is read).

    >>> optional_ref(2.0)
    Traceback (most recent call last):
    ...
    TypeError: expected a released or public value of the plan (b.public(...) for a constant) or None, got 2.0
    """
    ref = param(x)  # None stays None
    if ref is None or isinstance(ref, Ref):
        return ref
    raise TypeError(f"expected a released or public value of the plan (b.public(...) for a constant) or None, "
                    f"got {x!r}")


__all__ = [
    "finite", "finite_tuple", "magnitude", "nonnegative", "optional_ref", "positive", "positive_radius", "radius",
    "released_or_finite", "released_or_nonnegative", "released_or_positive", "released_or_positive_radius",
    "released_or_radius",
]
