"""The plan builder: where handles come from."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpflow.domains import RowDomain, Vectors
from dpflow.errors import PlanReferenceError, PlanTypeError, PostProcessingError
from dpflow.handles import Released, Rows, Sensitive, Value
from dpflow.nodes import Node, NodeRecord, Public, Source, SubPlan
from dpflow.nodes.types import Relation
from dpflow.plan.graph import Plan, accounting_option, check_budget
from dpflow.privacy import Measure
from dpflow.tables import Column, column_param, encoded_names


def _snake(kind: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()


class PlanBuilder:
    """Builds a :class:`Plan` node by node.

    ``budget`` is the total privacy budget (``ZCDP``, ``PureDP``, ``ApproxDP`` or
    ``ApproxZCDP``); ``neighbors`` is ``"replace"`` (one record substituted, n public)
    or ``"add_remove"``.  ``report_delta`` is the delta at which a budget without one
    is also reported in (epsilon, delta) (default 1e-6).  ``accounting="basic"`` (with an
    ``ApproxDP`` budget) gives every mechanism its own (epsilon_i, delta_i) share and composes them
    by basic composition (the accounting of CWZ 2021); the default ``"auto"`` is zCDP / pure.

    >>> import dpflow as dp
    >>> from dpflow import nodes as N
    >>> with dp.PlanBuilder(budget=dp.ZCDP(0.5)) as b:
    ...     X = b.source("X", dp.Vectors(d=3), n=1000)
    ...     plan = b.build(mean=N.GaussianMech()(N.Mean()(N.Clip(radius=2.0)(X))))
    >>> plan.outputs
    (('mean', 'gaussian_mech_3'),)
    """

    def __init__(
        self,
        budget: Measure,
        neighbors: Relation = "replace",
        report_delta: float | None = None,
        name: str = "plan",
        _prefix: str = "",
        accounting: str = "auto",
    ) -> None:
        if neighbors not in ("replace", "add_remove"):
            raise ValueError(f"neighbors must be 'replace' or 'add_remove', got {neighbors!r}")
        check_budget(budget, name)
        self.budget = budget
        self.neighbors: Relation = neighbors
        self.report_delta = report_delta
        self.name = name
        self.accounting = accounting_option(accounting)
        self._records: list[NodeRecord] = []
        self._ids: set[str] = set()
        self._prefix = _prefix
        self._children = 0

    def __enter__(self) -> PlanBuilder:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def node_ids(self) -> frozenset[str]:
        """The ids of the nodes added so far (what a helper added is the difference of two calls)."""
        return frozenset(self._ids)

    def add(self, node: Node, inputs: tuple[str, ...]) -> str:
        """Add ``node`` reading the nodes ``inputs``; return its new id."""
        for ref in list(inputs) + [r.id for r in node.refs()]:
            if ref not in self._ids:
                raise PlanReferenceError(
                    node.kind, f"uses {ref!r}, which was not made by this builder",
                    "use handles of one plan; pass outer values into a control body through its state",
                )
        nid = f"{self._prefix}{_snake(node.kind)}_{len(self._records)}"
        self._records.append(NodeRecord(nid, node, inputs))
        self._ids.add(nid)
        return nid

    def source(self, name: str, domain: RowDomain | None = None, n: int | None = None,
               columns: Sequence[Column] | None = None) -> Sensitive[Rows]:
        """Declare a private dataset ``name`` of rows in ``domain`` (``n`` public under replace).

        ``columns`` names the columns to read from a DataFrame (numeric names, or :class:`dpflow.Category`
        for categorical ones, encoded through their public category list); later nodes may select them
        by name (``Columns(keep=["age"])``).  Without ``domain`` the rows are ``Vectors(d)`` with one
        coordinate per encoded column.  Only on the top-level builder: a control body reads the rows
        passed to ``repeat`` or ``partition_tree``.

        >>> import dpflow as dp
        >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
        >>> X = b.source("X", columns=["age", dp.Category("sex", ["F", "M"])], n=100)
        >>> b._records[0].node.domain.describe()
        'Vectors(d=4)'
        """
        cols = column_param(columns)
        if domain is None:
            if cols is None:
                raise PlanTypeError(name, "the source declares neither a domain nor columns",
                                    "pass a domain (dp.Vectors(d=...)) or columns=[...]")
            domain = Vectors(d=len(encoded_names(cols)))
        if self._prefix:
            raise PlanTypeError(name, "a source is declared inside a control body",
                                "declare every source on the top-level builder and pass its rows into the "
                                "body as the first argument of repeat or partition_tree")
        if any(isinstance(r.node, Source) and r.node.name == name for r in self._records):
            raise PlanTypeError(name, "the source is declared twice", "declare each source once")
        return Sensitive(self.add(Source(name=name, domain=domain, n=n, columns=cols), ()), self)

    def public(self, value: Any) -> Released[Value]:
        """A public constant (scalar or array), released by definition."""
        arr = np.asarray(value, dtype=float)
        if not np.all(np.isfinite(arr)):
            raise ValueError("public constants must be finite")
        return Released(self.add(Public(values=tuple(arr.ravel()), shape=arr.shape), ()), self)

    def child(self) -> PlanBuilder:
        """A builder for a control body (Repeat, PartitionTree)."""
        self._children += 1
        return PlanBuilder(self.budget, self.neighbors, self.report_delta, self.name,
                           _prefix=f"{self._prefix}b{self._children}.", accounting=self.accounting)

    def freeze(self, output: str) -> SubPlan:
        """The nodes added so far as a sub-plan returning ``output``."""
        return SubPlan(tuple(self._records), output)

    def build(self, **outputs: Released[Any]) -> Plan:
        """The immutable plan releasing ``outputs`` (name -> released handle)."""
        if not outputs:
            raise PlanTypeError(self.name, "the plan releases nothing", "pass name=handle to build()")
        pairs = []
        for name, h in sorted(outputs.items()):
            if isinstance(h, Sensitive):
                raise PostProcessingError(h.id, f"output {name!r} is a sensitive value",
                                          "release it through a mechanism first")
            if not isinstance(h, Released) or h.id not in self._ids:
                raise PlanReferenceError(str(name), "the output is not a handle of this plan",
                                         "pass a released handle made by this builder")
            pairs.append((name, h.id))
        return Plan(
            budget=self.budget,
            neighbors=self.neighbors,
            records=tuple(self._records),
            outputs=tuple(pairs),
            report_delta=self.report_delta,
            name=self.name,
            accounting=self.accounting,
        )
