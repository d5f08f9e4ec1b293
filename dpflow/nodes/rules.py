"""Shared sensitivity rules of the nodes, each stated once.

* :func:`public_n` / :func:`has_public_n`: dividing by (or pairing, splitting, scoring with) the row
  count n is a public operation only for replace-one neighbours with a public count.
* :func:`count_sensitivities`: l1, l2, linf of a vector of counts where a record lies in exactly one cell.
* :func:`changes_text`: the neighbour relation as shown in a node's derivation text.
* :func:`finite_edges`: converter for public bin edges.
* :func:`one_dim`: the refusal of rows that are not one-dimensional (ordinal, bin and dyadic counts).

Released scalars read at run time (never an exception; one declared policy per role).  A plan-time
sensitivity formula uses the released value through ``Sym.value`` (NaN makes it infinite, a negative
factor counts as 0), so each policy below only ever maps a value to one that is no larger in the role
the sensitivity formula gives it:

* a radius or clipping bound: :func:`capped` (Clip, TruncatedMean, GradientStep,
  TruncatedBinaryMean);
* an endpoint of a clamping range: :func:`released_endpoint` (OrderStatistics);
* a scale factor applied in post-processing: :func:`released_scale` (RidgeSolve).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpflow.domains import MAX_BOUND, Sym
from dpflow.errors import DomainError
from dpflow.nodes.base import InferContext, change_bound
from dpflow.nodes.params import finite_tuple
from dpflow.nodes.types import RowsT

REPLACE_ONE = frozenset({"replace"})


def has_public_n(rows: RowsT) -> bool:
    """True when the row count is public under every allowed change: replace-one neighbours only
    (add/remove changes n) and a count no value partition has made private.

    >>> from dpflow.nodes.types import RowsT, Size
    >>> from dpflow.domains import RowCount, Vectors
    >>> has_public_n(RowsT(Vectors(d=1, l2_bound=1.0), "X", Size(True, 3, RowCount("X")), 1, REPLACE_ONE))
    True
    """
    return rows.size.public and rows.changes == REPLACE_ONE


def public_n(rows: RowsT, ctx: InferContext, what: str) -> Sym:
    """The public row count n for ``what`` (a node that divides by n or otherwise uses it), or a
    :class:`DomainError` naming the node when n is private (see :func:`has_public_n`).

    The check is on public plan information only, so it raises before any data is read.
    """
    if not has_public_n(rows):
        count = "public" if rows.size.public else "private"
        raise DomainError(
            ctx.node_id,
            f"{what} needs a public row count under replace-one neighbours; here the neighbours are "
            f"{'/'.join(sorted(rows.changes))} and the count is {count}",
            "declare neighbors='replace' and apply it before any value partition "
            "(or release a Sum and a Count separately)",
        )
    return rows.size.sym()


def count_sensitivities(rows: RowsT) -> tuple[Sym | None, Sym | None, Sym | None]:
    """(l1, l2, linf) of a vector of counts where each record lies in exactly one cell.

    Replace-one moves one unit from one cell to another: l1 2, l2 sqrt(2), linf 1; add/remove
    changes one cell by one: 1 in every norm (Dwork-Roth 2014, Example 3.2 / Sec. 3.3, histogram
    queries).  Both scaled by the stability (that many records may change).

    >>> from dpflow.nodes.types import RowsT, Size
    >>> from dpflow.domains import Ordinal, RowCount
    >>> rows = RowsT(Ordinal(N=3), "X", Size(True, 3, RowCount("X")), 1, REPLACE_ONE)
    >>> [round(b.value(), 6) for b in count_sensitivities(rows)]
    [2.0, 1.414214, 1.0]
    """
    l1 = change_bound(rows, Sym.const(2.0), Sym.const(1.0))
    l2 = change_bound(rows, Sym.const(math.sqrt(2.0)), Sym.const(1.0))
    linf = change_bound(rows, Sym.const(1.0), Sym.const(1.0))
    return l1, l2, linf


def changes_text(rows: RowsT) -> str:
    """The neighbour relation as text, e.g. ``"replace x stability 2"``."""
    return "/".join(sorted(rows.changes)) + (f" x stability {rows.stability}" if rows.stability != 1 else "")


def one_dim(rows: RowsT, ctx: InferContext, what: str) -> None:
    """Refuse rows that are not one-dimensional (a :class:`DomainError` naming ``what``)."""
    if rows.domain.d != 1:
        raise DomainError(ctx.node_id, f"{what} needs one-dimensional rows, got d={rows.domain.d}",
                          "select one column first (Columns)")


def finite_edges(e: Any) -> tuple[float, ...]:
    """Converter for public bin edges: a tuple of finite floats."""
    return finite_tuple(e, "edges")


def capped(v: float) -> float:
    """The declared policy for a released radius or clipping bound read at run time: a NaN or
    non-positive value counts as 0 and a value above ``MAX_BOUND`` (inf included) as ``MAX_BOUND``.

    Sensitivities are evaluated with the released value itself, which is at least the one used,
    so the policy only ever overstates them; the cap keeps every sum over the rows finite.

    >>> capped(float("nan")), capped(-1.0), capped(2.0), capped(float("inf")) == MAX_BOUND
    (0.0, 0.0, 2.0, True)
    """
    return 0.0 if not v > 0 else min(float(v), MAX_BOUND)


def released_endpoint(v: float) -> float:
    """The declared policy for a released endpoint of a clamping range ``[lower, upper]``: a finite
    value is used as is, +inf as the largest float, NaN and -inf as 0 (and a reversed range as empty).

    Sound: the sensitivity is ``upper - lower`` through ``Sym.value``, which is infinite as soon as an
    endpoint is NaN or infinite, and otherwise exactly the width used; clamping to the policy's range
    never moves a value farther than that.

    >>> released_endpoint(float("nan")), released_endpoint(float("-inf")), released_endpoint(-2.5)
    (0.0, 0.0, -2.5)
    >>> released_endpoint(float("inf")) == float(np.finfo(float).max)
    True
    """
    return v if math.isfinite(v) else (float(np.finfo(float).max) if v > 0 else 0.0)


def released_scale(v: float) -> float:
    """The declared policy for a released scale factor used in post-processing (no sensitivity
    depends on it): NaN and +-inf count as 0, a finite value is clipped to ``[-MAX_BOUND, MAX_BOUND]``
    so that its square (a ridge ``ridge * scale^2``) stays finite.

    >>> released_scale(float("nan")), released_scale(float("inf")), released_scale(-3.0)
    (0.0, 0.0, -3.0)
    >>> released_scale(1e300) == MAX_BOUND
    True
    """
    return min(max(float(v), -MAX_BOUND), MAX_BOUND) if math.isfinite(v) else 0.0


__all__ = ["REPLACE_ONE", "capped", "changes_text", "count_sensitivities", "finite_edges", "has_public_n",
           "one_dim", "public_n", "released_endpoint", "released_scale"]
