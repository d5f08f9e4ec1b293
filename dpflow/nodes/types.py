"""The static types the planner infers for node outputs, and the budget allocation it hands a mechanism.

``infer`` maps the static types of a node's inputs to the static type of its output: sensitive rows
(:class:`RowsT`, with their public or private :class:`Size`, stability and neighbour changes), a split
into disjoint pieces (:class:`PiecesT`), a sensitive aggregate with its l1/l2/linf sensitivities
(:class:`StatT`; l1 sensitivity as in Dwork-Roth 2014 Def. 3.1, l2 and linf alike), or a released
value (:class:`ReleasedT`).  :class:`Allocation` is a mechanism's certified share of the budget.
Data only: the rules that produce these types live with the nodes.

>>> from dpflow.domains import RowCount, Vectors
>>> rows = RowsT(Vectors(d=2, l2_bound=1.0), "X", Size(True, 100, RowCount("X")), 1, frozenset({"replace"}))
>>> rows.describe()
'Vectors(d=2, l2<=1), n=100, replace, source X'
"""

from __future__ import annotations

import enum
from fractions import Fraction
from typing import Literal

import attrs

from dpflow.domains import Bound, RowCount, Sym, Vectors
from dpflow.nodes.floaterr import FloatError
from dpflow.privacy import Cost

Relation = Literal["replace", "add_remove"]
Mode = Literal["zcdp", "pure"]


@attrs.frozen
class Size:
    """The row count of a dataset node: public or private, known at plan time or not.

    ``ref`` is the typed run-time count in sensitivity formulas (printed ``n:<node>``); when
    ``known`` is set the formulas use the number instead.
    """

    public: bool
    known: int | None
    ref: RowCount
    at_most: Sym | None = None
    """A public bound on the count when the count itself is private: a value piece has at most the public
    row count of the rows it was split from, on every neighbour (``None``: no public bound)."""

    def sym(self) -> Sym:
        """The count as a bound (constant when known)."""
        return Sym.const(float(self.known)) if self.known is not None else Sym.ref(self.ref)

    def text(self) -> str:
        """Readable form."""
        if not self.public:
            return "private"
        return str(self.known) if self.known is not None else self.ref.text()


@attrs.frozen
class RowsT:
    """Static type of a sensitive dataset.

    ``stability``: how many of its rows change when one record of ``source`` changes.
    ``changes``: how a row of it can change (``replace`` one row keeping the count,
    ``add_remove`` one row).
    """

    domain: Vectors
    source: str
    size: Size
    stability: int
    changes: frozenset[str]
    columns: tuple[str, ...] | None = None
    """The coordinates' names (a source's declared columns, kept by the maps that keep coordinates)."""

    def describe(self) -> str:
        """Readable form used in ledgers."""
        ch = "/".join(sorted(self.changes))
        stab = "" if self.stability == 1 else f", stability {self.stability}"
        return f"{self.domain.describe()}, n={self.size.text()}, {ch}{stab}, source {self.source}"


class SplitRule(enum.StrEnum):
    """How a split assigns records to pieces, which decides its parallel-composition rule.

    ``INDEX``: by position (a record stays in its block under either relation: the max over pieces).
    ``VALUE``: by a predicate on released parameters (a replaced record can leave one piece and enter
    another: the two largest pieces add under replace-one, the max under add/remove).  A ``str`` enum, so
    the ledger JSON keeps writing ``"index"`` / ``"value"``.
    """

    INDEX = "index"
    VALUE = "value"


@attrs.frozen
class PiecesT:
    """Static type of a dataset split into disjoint pieces."""

    rows: RowsT
    count: int
    rule: SplitRule


@attrs.frozen
class StatT:
    """Static type of a sensitive aggregate with its sensitivities (``None``: unbounded)."""

    shape: tuple[int, ...]
    source: str
    l1: Bound
    l2: Bound
    linf: Bound
    symmetric: bool = False
    float_error: FloatError | None = None
    """How to bound the distance between the statistic as computed in floating point and its
    exact value (``None``: not bounded, e.g. a sum over a private number of rows).  Lattice
    releases add twice the bound to the sensitivity (neighbours may err in opposite ways)."""
    rank: Bound = None
    """Order statistics only: how far one record's change can move the count of values below any
    threshold (the utility sensitivity of a private quantile); ``None`` for every other statistic."""
    one_sided: tuple[Bound, Bound, Bound] | None = None
    """The (l1, l2, linf) sensitivities when one record only enters or leaves the rows (an add/remove change),
    where the rows also allow replacements and that is less: a value piece under replace-one, whose rows lose
    or gain the record that moves to or from another piece.  Derived by the planner, which infers the query
    again on the same rows with add/remove changes only (``planner.infer``); ``None`` when not less.  A
    mechanism whose cost scales with its sensitivity charges a piece ``one`` at it with the same noise
    (:mod:`dpflow.privacy.ratio`)."""


@attrs.frozen
class DyadicT(StatT):
    """Static type of ``DyadicCounts``: the counts of every dyadic interval, held as a ``DyadicTable`` (the sorted
    sample and its levels), in which ``IntervalCounts`` may count instead of a pass over the rows."""


@attrs.frozen
class ReleasedT:
    """Static type of a released value (``shape`` ``None`` when not known statically)."""

    shape: tuple[int, ...] | None = None
    noised_by: str | None = None
    """The path of the mechanism whose own output this is, when that mechanism has a noise multiplier
    (:attr:`Mechanism.noise_unit`); ``None`` for every other released value.  :class:`NoiseScale
    <dpflow.nodes.postprocess.NoiseScale>` accepts only such a value of its own scope."""
    fields: tuple[str, ...] | None = None
    """The names of the parts of a released tuple (``Pack(names=...)``, a loop whose state is one), which
    ``Get("name")`` reads; ``None`` when its parts are not named."""


VType = RowsT | PiecesT | StatT | ReleasedT


@attrs.frozen
class Inferred:
    """What ``infer`` returns: the output type and how it was derived."""

    out: VType
    derivation: str = ""


@attrs.frozen
class Allocation:
    """A mechanism's share of the budget, and its certified cost."""

    mode: Mode
    share: Fraction
    cost: Cost
    continuous_gaussian: bool = False
    """True when the certificate rests on the exact Gaussian-DP profile, which is proven for
    continuous Gaussian noise: the mechanism then samples continuous noise, not the lattice form."""

__all__ = ["Allocation", "DyadicT", "Inferred", "Mode", "PiecesT", "Relation", "ReleasedT", "RowsT", "Size", "StatT",
           "VType"]
