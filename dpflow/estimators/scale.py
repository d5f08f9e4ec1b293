"""The private per-column scale step: where each column lives and how wide it is, found from the data
under a small slice of the budget, so that estimators work on raw-scale data with no user bounds.

CWZ 2021's data-driven truncation (Sec. 5; sparse_discrete_heavy.md 3.6) in its "centre first" form,
per coordinate: one Laplace histogram of the row norms over the public log-scale bins
``[2^k, 2^(k+1))`` locates the data's magnitude (``U = 2 x`` the right edge of the modal bin,
:class:`dpflow.nodes.ModeBinUpper`; every ``|x_ij|`` is at most its row's norm).  For every column j the
private median ``c_j`` of the column clamped to ``[-U, U]`` is its centre.  A second histogram, of the
norms of the centred rows ``x - c``, locates their magnitude ``U'``, and the private 75% quantile of
``|x_j - c_j|`` searched in ``[0, U']`` is the column's spread.  The quantiles are the exponential
mechanism over gaps (:class:`dpflow.nodes.Quantile`).  The scale is the spread in Gaussian units,
``s_j = spread_j / 1.1503`` (``P(|Z| <= 1.1503) = 0.75``).  Both released values move with the data's
location and scale, so a plan that standardises by them (``Precondition``) and truncates at a fixed
level is location- and scale-invariant (up to the log-scale bins, which only set the search ranges).

Why central quantiles: an extreme one (CWZ's 1%/99%) is ``0.01 n`` ranks from the end of the range, so
under a small epsilon the mechanism picks the empty stretch between the data and the range's end (its
width dwarfs the data's gaps); the median and the 75% quantile are at least ``n/4`` ranks from either
end, which outweighs any range located by the histogram.  Declared policy: a column with more than 75% of its values
on its median (an indicator column, typically) has spread 0 and is given scale 1 (left unscaled).

>>> import dpflow as dp
>>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
>>> X = b.source("X", dp.Vectors(d=2), n=1000)
>>> centre, scale = column_scales(X, d=2, weight=0.1)
>>> sorted({e.kind for e in b.build(c=centre, s=scale).check().entries if e.cost})
['LaplaceMech', 'Quantile']
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

import numpy as np

from dpflow import nodes as N
from dpflow.handles import Released, Rows, Sensitive, Value
from dpflow.nodes.quantile import log2_edges

SPREAD_Q = 0.75
"""The quantile of ``|x_j - c_j|`` taken as the column's spread."""

SPREAD_SIGMAS = NormalDist().inv_cdf(0.5 + SPREAD_Q / 2)
"""The 75% quantile of ``|Z|``, Z ~ N(0, 1): 1.1503..., the spread of a Gaussian column in sigmas."""

RANGE_SHARE = 0.2
"""The share of the scale step's weight spent on the two range histograms; the 2d quantiles share the rest."""


def truncation_level(n: int) -> float:
    """CWZ's truncation ``sqrt(2 ln n)`` in units of the column scale (sigma for Gaussian columns).

    >>> round(truncation_level(10_000), 4)
    4.2919
    """
    return math.sqrt(2.0 * math.log(max(n, 2)))


def negate(x: Any) -> float:
    """``-x`` of a released scalar (the lower end of a symmetric range).

    >>> negate(2.0)
    -2.0
    """
    return -float(np.asarray(x, dtype=float).reshape(-1)[0])


def stack(*values: Any) -> np.ndarray:
    """Released scalars as one vector.

    >>> stack(1.0, np.array([2.0])).tolist()
    [1.0, 2.0]
    """
    out: np.ndarray = np.asarray([float(np.asarray(v, dtype=float).reshape(-1)[0]) for v in values])
    return out


def spread_scale(*spreads: Any) -> np.ndarray:
    """The released spreads as scales in Gaussian units (``spread / 1.1503``); a zero (or NaN) spread
    gives scale 1 (the declared policy for columns with most values on their median).

    >>> spread_scale(0.0, 1.1503493803760079).tolist()
    [1.0, 1.0]
    """
    v = np.nan_to_num(stack(*spreads), nan=0.0)
    out: np.ndarray = np.where(v > 0, v / SPREAD_SIGMAS, 1.0)
    return out


def inverse_diag(scale: Any) -> np.ndarray:
    """``diag(1 / scale_j)`` (a zero scale maps its column to 0).

    >>> inverse_diag(np.array([2.0, 0.0])).tolist()
    [[0.5, 0.0], [0.0, 0.0]]
    """
    s = np.asarray(scale, dtype=float).reshape(-1)
    with np.errstate(divide="ignore"):
        inv = np.where(s > 0, 1.0 / np.where(s > 0, s, 1.0), 0.0)
    out: np.ndarray = np.diag(inv)
    return out


def times(a: Any, b: Any) -> np.ndarray:
    """``a * b`` elementwise (released vectors; an importable function, so plans keep their JSON form).

    >>> times(np.array([1.0, 2.0]), 3.0).tolist()
    [3.0, 6.0]
    """
    out: np.ndarray = np.asarray(a, dtype=float) * np.asarray(b, dtype=float)
    return out


def unstandardize(values: Any, centre: Any, scale: Any) -> np.ndarray:
    """``centre + scale * values``: a released standardised vector back on the data's scale.

    >>> unstandardize(np.array([1.0, -1.0]), np.array([10.0, 0.0]), np.array([2.0, 3.0])).tolist()
    [12.0, -3.0]
    """
    out: np.ndarray = np.asarray(centre, dtype=float) + np.asarray(scale, dtype=float) * np.asarray(values, float)
    return out


def _range(rows: Sensitive[Rows], weight: float) -> Released[Value]:
    """``U``: twice the right edge of the modal log-scale bin of the row norms (a Laplace histogram)."""
    edges = log2_edges()
    counts = N.LaplaceMech(weight=weight)(N.Histogram(edges=edges)(N.Magnitudes(of="rows")(rows)))
    return N.ModeBinUpper(edges=edges, factor=2.0)(counts)


def column_scales(X: Sensitive[Rows], d: int, weight: float) -> tuple[Released[Value], Released[Value]]:
    """Released ``(centre, scale)`` vectors of the d columns of ``X`` under ``weight`` of the budget.

    Columns are separate views of the same record, so their costs add (the planner composes them).
    """
    upper = _range(X, weight * RANGE_SHARE / 2)
    lower = N.Apply(fn=negate, shape=())(upper)
    w = weight * (1.0 - RANGE_SHARE) / (2 * d)
    centres = [N.Quantile(q=0.5, weight=w)(N.OrderStatistics(lower=lower, upper=upper)(N.Columns(keep=[j])(X)))
               for j in range(d)]
    centre = N.Apply(fn=stack, shape=(d,))(*centres)
    centred = N.Precondition(matrix=X.builder.public(np.eye(d)), center=centre)(X)
    spread_upper = _range(centred, weight * RANGE_SHARE / 2)
    spreads = [N.Quantile(q=SPREAD_Q, weight=w)(N.OrderStatistics(lower=0.0, upper=spread_upper)(
        N.Magnitudes(of="rows")(N.Columns(keep=[j])(centred)))) for j in range(d)]
    return centre, N.Apply(fn=spread_scale, shape=(d,))(*spreads)


def standardize(X: Sensitive[Rows], centre: Released[Value], scale: Released[Value], d: int) -> Sensitive[Rows]:
    """The rows mapped to ``(x_j - centre_j) / scale_j`` (a row-wise map by released values, stability 1)."""
    return N.Precondition(matrix=N.Apply(fn=inverse_diag, shape=(d, d))(scale), center=centre)(X)
