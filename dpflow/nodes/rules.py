"""Shared sensitivity rules of the nodes, each stated once.

* :func:`public_n` / :func:`has_public_n`: dividing by (or pairing, splitting, scoring with) the row
  count n is a public operation only for replace-one neighbours with a public count.
* :func:`count_sensitivities`: l1, l2, linf of a vector of counts where a record lies in exactly one cell.
* :func:`dyadic_sensitivities`: l1, l2, linf of the counts of every dyadic interval (one cell per level).
* :func:`sum_sensitivities`: l1, l2, linf of a sum of rows (Sum, Mean), one-hot groups typed as simplices.
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

from dpflow.domains import MAX_BOUND, Bound, Sym, Vectors
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


def dyadic_sensitivities(rows: RowsT, L: int) -> tuple[Bound, Bound, Bound]:
    """(l1, l2, linf) of the counts of every dyadic interval of ``L`` levels (``DyadicCounts``): a record lies
    in one interval per level, so a replaced one moves one unit between two intervals of each level (l1 2L,
    l2 sqrt(2L)) and an added or removed one changes one interval per level (l1 L, l2 sqrt(L)); linf 1.  Both
    scaled by the stability.

    >>> from dpflow.nodes.types import RowsT, Size
    >>> from dpflow.domains import Ordinal, RowCount
    >>> rows = RowsT(Ordinal(N=8), "X", Size(True, 3, RowCount("X")), 1, REPLACE_ONE)
    >>> [round(b.value(), 6) for b in dyadic_sensitivities(rows, 3)]
    [6.0, 2.44949, 1.0]
    """
    l1 = change_bound(rows, Sym.const(2.0 * L), Sym.const(float(L)))
    l2 = change_bound(rows, Sym.const(math.sqrt(2.0 * L)), Sym.const(math.sqrt(L)))
    linf = change_bound(rows, Sym.const(1.0), Sym.const(1.0))
    return l1, l2, linf


def _tighter(a: Bound, b: Bound) -> Bound:
    """The smaller of two true bounds (either is sound; a run-time one is kept when they cannot be compared)."""
    if a is None or b is None:
        return b if a is None else a
    return a if not (a.is_const and b.is_const) or a.coef <= b.coef else b


def onehot_extent(dom: Vectors) -> tuple[tuple[Bound, Bound, Bound], tuple[Bound, Bound, Bound]] | None:
    """((l1, l2, linf) diameters, (l1, l2, linf) norms) of the rows of ``dom`` seen as the product of its
    one-hot groups and its other coordinates; ``None`` when ``dom`` has no one-hot group.

    The rows lie in ``P = I^m x S_1 x ... x S_g``: the m coordinates outside the groups in the box
    ``I = [lo, hi]`` (width ``w``, largest magnitude ``R``; unbounded without a box), and group j, of k_j
    coordinates, in the vertices ``S_j = {0, e_1, ..., e_kj}`` of the simplex.  Two vertices differ by
    ``e_a - e_b`` (l1 2, squared l2 2) or ``e_a - 0`` (1 and 1), so ``S_j`` has l1 diameter and squared
    l2 diameter ``c_j = min(k_j, 2)``, linf diameter 1, and every vertex has norm at most 1 in each norm.
    Norms of a product add over its factors (l1), add in squares (l2), take the max (linf), hence

    * diameters: l1 ``m w + sum_j c_j``, l2 ``sqrt(m w^2 + sum_j c_j)``, linf ``max(w, 1)``;
    * norms: l1 ``m R + g``, l2 ``sqrt(m R^2 + g)``, linf ``max(R, 1)``

    (``w`` and ``R`` count only when m > 0).  A replaced record moves a sum of the rows by the difference
    of two points of P (at most the diameter), an added or removed one by one point (its norm): Dwork-Roth
    2014 Def. 3.1; for one group alone this is the histogram rule of :func:`count_sensitivities` (Example
    3.2: one unit moves between two cells), whatever k: l1 2, l2 sqrt(2) under replace, 1 under add/remove.

    >>> diam, norm = onehot_extent(Vectors(d=11, onehot=(tuple(range(11)),)))
    >>> [b.text() for b in diam], [b.text() for b in norm]
    (['2', '1.41421', '1'], ['1', '1', '1'])
    >>> [b.text() for b in onehot_extent(Vectors(d=4, box=(0.0, 3.0), onehot=((1, 2, 3),)))[0]]
    ['5', '3.31662', '3']
    """
    if not dom.onehot:
        return None
    m = dom.d - sum(len(g) for g in dom.onehot)
    g = len(dom.onehot)
    c = sum(min(len(grp), 2) for grp in dom.onehot)
    if m and dom.box is None:
        return (None, None, None), (None, None, None)
    w = 0.0 if not m or dom.box is None else dom.box[1] - dom.box[0]
    r = 0.0 if not m or dom.box is None else max(abs(dom.box[0]), abs(dom.box[1]))
    diam = (Sym.const(m * w + c), Sym.const(math.sqrt(m * w * w + c)), Sym.const(max(w, 1.0)))
    norm = (Sym.const(m * r + g), Sym.const(math.sqrt(m * r * r + g)), Sym.const(max(r, 1.0)))
    return diam, norm


def sum_sensitivities(rows: RowsT) -> tuple[Bound, Bound, Bound, str]:
    """(l1, l2, linf) of how far one record's change moves the sum of ``rows``, and the rule's text.

    A replaced row moves the sum by at most the rows' diameter, an added or removed row by its norm
    (Dwork-Roth 2014 Def. 3.1), times the stability: the domain's ball and box bounds, or, when smaller,
    the one-hot product bounds of :func:`onehot_extent`.  Sum and Mean (over a public n) share it.

    >>> from dpflow.nodes.types import RowsT, Size
    >>> from dpflow.domains import RowCount
    >>> dom = Vectors(d=10, box=(0.0, 1.0), onehot=(tuple(range(10)),))
    >>> l1, l2, linf, _ = sum_sensitivities(RowsT(dom, "X", Size(True, 5, RowCount("X")), 1, REPLACE_ONE))
    >>> l1.text(), l2.text(), linf.text()
    ('2', '1.41421', '1')
    """
    dom = rows.domain
    diam = (dom.diameter_l1(), dom.diameter_l2(), dom.diameter_linf())
    norm = (dom.norm_l1(), dom.norm_l2(), dom.norm_linf())
    extent = onehot_extent(dom)
    text = ""
    if extent is not None:
        diam = (_tighter(diam[0], extent[0][0]), _tighter(diam[1], extent[0][1]), _tighter(diam[2], extent[0][2]))
        norm = (_tighter(norm[0], extent[1][0]), _tighter(norm[1], extent[1][1]), _tighter(norm[2], extent[1][2]))
        text = (" (one-hot groups of k coordinates are simplex vertices: diameter l1 = box widths + min(k, 2) "
                "per group, l2 = sqrt(box widths^2 + min(k, 2) per group); norm 1 per group)")
    l1, l2, linf = (change_bound(rows, a, b) for a, b in zip(diam, norm, strict=True))
    return l1, l2, linf, text


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
           "one_dim", "onehot_extent", "public_n", "released_endpoint", "released_scale", "sum_sensitivities"]
