"""Shared sensitivity rules of the nodes, each stated once.

* :func:`public_n` / :func:`has_public_n`: dividing by (or pairing, splitting, scoring with) the row
  count n is a public operation only for replace-one neighbours with a public count.
* :func:`count_sensitivities`: l1, l2, linf of a vector of counts where a record lies in exactly one cell.
* :func:`changes_text`: the neighbour relation as shown in a node's derivation text.
* :func:`finite_edges`: converter for public bin edges.
"""

from __future__ import annotations

import math
from typing import Any

from dpflow.domains import Sym
from dpflow.errors import DomainError
from dpflow.nodes.base import InferContext, RowsT, change_bound, finite_tuple

REPLACE_ONE = frozenset({"replace"})


def has_public_n(rows: RowsT) -> bool:
    """True when the row count is public under every allowed change: replace-one neighbours only
    (add/remove changes n) and a count no value partition has made private.

    >>> from dpflow.nodes.base import RowsT, Size
    >>> from dpflow.domains import Vectors
    >>> has_public_n(RowsT(Vectors(d=1, l2_bound=1.0), "X", Size(True, 3, "n:X"), 1, REPLACE_ONE))
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

    >>> from dpflow.nodes.base import RowsT, Size
    >>> from dpflow.domains import Ordinal
    >>> rows = RowsT(Ordinal(N=3), "X", Size(True, 3, "n:X"), 1, REPLACE_ONE)
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


def finite_edges(e: Any) -> tuple[float, ...]:
    """Converter for public bin edges: a tuple of finite floats."""
    return finite_tuple(e, "edges")


__all__ = ["REPLACE_ONE", "changes_text", "count_sensitivities", "finite_edges", "has_public_n", "public_n"]
