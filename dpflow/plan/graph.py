"""The immutable plan: a DAG of node records with a budget and a neighbouring relation."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

import attrs

from dpflow.errors import PlanReferenceError, PlanTypeError, SerializationError
from dpflow.nodes import NodeRecord
from dpflow.nodes.types import Relation
from dpflow.plan.serialize import (
    canonical,
    decode_measure,
    decode_record,
    encode_measure,
    encode_record,
    legacy_sym_names,
)
from dpflow.privacy import ZCDP, ApproxDP, ApproxZCDP, Measure, PureDP

if TYPE_CHECKING:
    import networkx as nx
    import numpy as np

    from dpflow.api import Result
    from dpflow.planner.ledger import Ledger

SCHEMA = "dpflow.plan/2"
"""Version 2 (from version 1): a bound's run-time refs are typed (``{"$n": node}``, ``{"$released": node}``,
``{"$norm": node}``) instead of strings; version 1 documents are still read."""
LEGACY_SCHEMAS = ("dpflow.plan/1",)


def check_budget(budget: object, plan_name: str = "plan") -> None:
    """Refuse a plan budget that is not a privacy measure, or that allows no privacy loss at all.

    A bare number is ambiguous (epsilon? rho?), and a zero epsilon or rho leaves every mechanism a
    zero share, which no noise scale meets.

    >>> try:
    ...     check_budget(0.5)
    ... except PlanTypeError as e:
    ...     print(e.problem)
    budget=0.5 is a float, not a privacy measure
    """
    if not isinstance(budget, (PureDP, ZCDP, ApproxDP, ApproxZCDP)):
        x = budget if isinstance(budget, (int, float)) and not isinstance(budget, bool) else "..."
        raise PlanTypeError(plan_name, f"budget={budget!r} is a {type(budget).__name__}, not a privacy measure",
                            f"write budget=dp.PureDP({x}) for epsilon-DP, dp.ZCDP({x}) for rho-zCDP, "
                            "or dp.ApproxDP(epsilon, delta)")
    if isinstance(budget, (PureDP, ApproxDP)) and budget.epsilon == 0:
        raise PlanTypeError(plan_name, f"the budget {budget.describe()} has epsilon=0, which allows no release",
                            "give the budget a positive epsilon")
    if isinstance(budget, (ZCDP, ApproxZCDP)) and budget.rho == 0:
        raise PlanTypeError(plan_name, f"the budget {budget.describe()} has rho=0, which allows no release",
                            "give the budget a positive rho")


def require_budget(budget: object, where: str, kinds: tuple[type, ...]) -> None:
    """The one budget check of the ready-made estimators: ``budget`` is a measure of one of ``kinds``
    (a bare number or a zero budget gets :func:`check_budget`'s message), else a ``PlanTypeError``
    naming the estimator and the budgets it takes.

    >>> try:
    ...     require_budget(PureDP(1), "clipped_mean", (ZCDP, ApproxDP))
    ... except PlanTypeError as e:
    ...     print(e.fix)
    use one of: ZCDP, ApproxDP
    """
    check_budget(budget, where)
    if not isinstance(budget, kinds):
        assert isinstance(budget, (PureDP, ZCDP, ApproxDP, ApproxZCDP))
        raise PlanTypeError(where, f"{where} does not take a {budget.describe()} budget",
                            "use one of: " + ", ".join(k.__name__ for k in kinds))


def _valid_budget(plan: Plan, _attribute: object, budget: Measure) -> None:
    check_budget(budget, plan.name)


def build_graph(records: tuple[NodeRecord, ...], what: str = "plan") -> nx.DiGraph:
    """The networkx DAG of ``records``; refuses undefined references and cycles."""
    import networkx as nx  # imported when a graph is built (a plan out of order, or .graph()), not with dpflow

    g = nx.DiGraph()
    for i, rec in enumerate(records):
        if rec.id in g:
            raise PlanReferenceError(rec.id, f"the id is used twice in the {what}", "give every node its own id")
        g.add_node(rec.id, order=i, record=rec)
    for rec in records:
        deps = list(rec.inputs) + [r.id for r in rec.node.refs()]
        for dep in deps:
            if dep not in g:
                raise PlanReferenceError(rec.id, f"refers to {dep!r}, which is not defined in the {what}",
                                         "define the node it refers to, or fix the reference")
            g.add_edge(dep, rec.id)
    if not nx.is_directed_acyclic_graph(g):
        cycle = nx.find_cycle(g)
        raise PlanReferenceError(cycle[0][0], f"the references form a cycle: {cycle}",
                                 "a node may only use nodes computed before it; use Repeat for loops")
    return g


def topological(records: tuple[NodeRecord, ...], what: str = "plan") -> list[NodeRecord]:
    """Records in deterministic topological order (ties broken by insertion order).

    This is networkx's lexicographical topological sort keyed by insertion order.  When
    every node only refers to nodes inserted before it (always so for built plans) that
    order is the insertion order itself, which is returned without building the graph.
    """
    seen: set[str] = set()
    for rec in records:
        if rec.id in seen or any(d not in seen for d in rec.inputs) or any(r.id not in seen for r in rec.node.refs()):
            break
        seen.add(rec.id)
    else:
        return list(records)
    import networkx as nx

    g = build_graph(records, what)
    order = nx.lexicographical_topological_sort(g, key=lambda n: g.nodes[n]["order"])
    return [g.nodes[n]["record"] for n in order]


AccountingOption = Literal["auto", "basic"]
"""A plan's accounting option: ``"auto"`` (zCDP or pure, chosen by the planner) or ``"basic"``."""


def accounting_option(value: object) -> AccountingOption:
    """Validate a plan's accounting option (the one check, for the builder, ``Plan(...)`` and JSON).

    >>> accounting_option("basic")
    'basic'
    """
    if value == "auto":
        return "auto"
    if value == "basic":
        return "basic"
    raise ValueError(f"accounting must be 'auto' or 'basic', got {value!r}")


@attrs.frozen
class Plan:
    """A privacy-typed estimation plan: immutable, serialisable, hashable.

    Made by :class:`dpflow.PlanBuilder` (or by an estimator); ``check()`` certifies
    it without touching data and ``run()`` executes it.

    >>> import dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=2), n=100)
    >>> plan = b.build(mean=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))
    >>> dp.Plan.from_json(plan.to_json()).hash == plan.hash
    True
    """

    budget: Measure = attrs.field(validator=_valid_budget)
    neighbors: Relation
    records: tuple[NodeRecord, ...]
    outputs: tuple[tuple[str, str], ...]
    report_delta: float | None = None
    name: str = "plan"
    accounting: AccountingOption = attrs.field(default="auto", converter=accounting_option)
    """``"auto"`` (zCDP or pure, chosen by the planner) or ``"basic"`` (per-mechanism (epsilon, delta)
    shares, basic composition; ApproxDP budgets only)."""
    _hash: str | None = attrs.field(default=None, init=False, eq=False, repr=False)
    """:attr:`hash`, once computed: every field is immutable (frozen records, parameters converted to tuples
    and floats), so a run of the same plan object looks its certificate up without writing its JSON again."""

    def graph(self) -> nx.DiGraph:
        """The plan as a networkx DiGraph (nodes carry ``record`` and ``order``)."""
        return build_graph(self.records)

    def to_data(self) -> dict[str, Any]:
        """The plan as JSON data (``accounting`` only when it is not the default, so hashes of
        existing plans do not change)."""
        extra = {} if self.accounting == "auto" else {"accounting": self.accounting}
        return {
            **extra,
            "schema": SCHEMA,
            "name": self.name,
            "budget": encode_measure(self.budget),
            "neighbors": self.neighbors,
            "report_delta": self.report_delta,
            "nodes": [encode_record(r) for r in self.records],
            "outputs": {name: nid for name, nid in self.outputs},
        }

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, compact): equal plans give equal text."""
        return canonical(self.to_data())

    @staticmethod
    def from_json(text: str) -> Plan:
        """Read a plan written by :meth:`to_json`."""
        data = json.loads(text)
        if data.get("schema") in LEGACY_SCHEMAS:
            data = legacy_sym_names(data)
        elif data.get("schema") != SCHEMA:
            raise SerializationError(f"not a {SCHEMA} document (schema={data.get('schema')!r})")
        neighbors = data["neighbors"]
        if neighbors not in ("replace", "add_remove"):
            raise SerializationError(f"unknown neighbouring relation {neighbors!r}")
        return Plan(
            budget=decode_measure(data["budget"]),
            neighbors=neighbors,
            records=tuple(decode_record(r) for r in data["nodes"]),
            outputs=tuple(sorted((str(k), str(v)) for k, v in data["outputs"].items())),
            report_delta=data.get("report_delta"),
            name=str(data.get("name", "plan")),
            accounting=_decoded_accounting(data.get("accounting", "auto")),
        )

    @property
    def hash(self) -> str:
        """Stable content hash: sha256 of the canonical JSON."""
        if self._hash is None:
            object.__setattr__(self, "_hash", "sha256:" + hashlib.sha256(self.to_json().encode()).hexdigest())
        assert self._hash is not None
        return self._hash

    def check(self, exact_noise: bool = True) -> Ledger:
        """Certify the plan (no data is read) for the noise a default run draws; raises a
        :class:`dpflow.PlanError` if it cannot.  See :func:`dpflow.check`."""
        return _entry().check(self, exact_noise)

    def run(self, data: Mapping[str, Any] | np.ndarray, **options: Any) -> Result:
        """Certify, then execute on ``data`` (source name -> array; one array when the plan has a
        single source); see :func:`dpflow.run`."""
        return _entry().run(self, data, **options)


class Entry(Protocol):
    """What ``Plan.check`` and ``Plan.run`` delegate to: :mod:`dpflow.api`, which registers itself when
    the ``dpflow`` package is imported, so this module never imports the layers above it."""

    def check(self, plan: Plan, exact_noise: bool = True) -> Ledger:
        """Certify ``plan`` (for exact or continuous noise) and return its ledger."""
        ...

    def run(self, plan: Plan, data: Mapping[str, Any] | np.ndarray, **options: Any) -> Result:
        """Certify and run ``plan`` on ``data``."""
        ...


_ENTRY: list[Entry] = []


def register_entry(entry: Entry) -> None:
    """Make ``entry`` the one that ``Plan.check``/``Plan.run`` use (called by :mod:`dpflow.api`)."""
    _ENTRY[:] = [entry]


def _entry() -> Entry:
    if not _ENTRY:  # dpflow/__init__ imports dpflow.api, which registers itself: this cannot happen
        raise RuntimeError("dpflow.api is not loaded: import dpflow")
    return _ENTRY[0]


def _decoded_accounting(value: object) -> AccountingOption:
    try:
        return accounting_option(value)
    except ValueError as e:
        raise SerializationError(str(e)) from e
