"""The ledger: the certificate a plan gets from the planner.

Frozen, schema-versioned data; canonical JSON; the single source of every report.
It holds no data and no digest of data: only the plan, public parameters and
the privacy derivation.

The privacy quantities are typed and exact (in the spirit of dp_accounting's ``DpEvent``): every
mechanism invocation is a :class:`CostEvent` carrying its mode, its exact share and its certified
:class:`~dpflow.privacy.Cost`; every source total carries its composed ``Cost`` and the exact
fraction of the budget it uses.  Text (``cost``, ``measure``, ``budget_used``) is rendered from
these values, never parsed back.  The JSON layout and its versions are described in
``docs/report_schema.md``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Generic, Literal, TypeAlias, TypeVar

import attrs

from dpflow.nodes.types import Mode, Relation, SplitRule
from dpflow.plan.serialize import canonical
from dpflow.planner.accuracy import Accuracy, NoiseCalibration, Prediction, accuracy_lines, accuracy_rows
from dpflow.privacy import Conversion, Cost
from dpflow.text import overview_html, overview_text, shorten, visible

LEDGER_SCHEMA = "dpflow.ledger"
LEDGER_SCHEMA_VERSION = 6
"""Version 6: a composition tree may hold a ``Tree`` (a ``PartitionTree``: ``{"tree": node, "depth", "parts",
"split", "leaf"}``), and the fixed-round loop's kind is ``Repeat`` (was ``Recurse``).  Version 4: a composition
tree's charge may carry its one-sided cost (``Charge.one``: a value piece under replace-one,
:mod:`dpflow.privacy.ratio`).  Version 3: the noise calibration of every mechanism invocation
(``noise_calibrations``, for :meth:`Ledger.accuracy`).  Version 2: typed cost events per mechanism entry and
exact composed costs per source (version 1, ``"schema": "dpflow.ledger/1"``, stored every quantity as text)."""

Accounting = Literal["auto", "basic"]


def _frac(x: Fraction | None) -> str | None:
    return None if x is None else str(x)


def cost_to_data(cost: Cost) -> dict[str, Any]:
    """A :class:`~dpflow.privacy.Cost` as JSON data: every exact field as a fraction string.

    >>> cost_to_data(Cost.zcdp(Fraction(1, 3)))["rho"]
    '1/3'
    """
    return {f.name: cost.pure_count if f.name == "pure_count" else _frac(getattr(cost, f.name))
            for f in attrs.fields(Cost)}


def cost_from_data(data: dict[str, Any]) -> Cost:
    """The inverse of :func:`cost_to_data` (exact: ``cost_from_data(cost_to_data(c)) == c``).

    >>> cost_from_data(cost_to_data(Cost.zcdp(Fraction(1, 3)))).rho
    Fraction(1, 3)
    """
    return Cost(**data)  # the converters read fraction strings exactly


@attrs.frozen
class CostEvent:
    """One mechanism invocation as certified: data, no math (dp_accounting's ``DpEvent`` style).

    ``mode`` and the exact ``share`` are the noise parameters: with the node's sensitivity (in the
    entry) they fix the noise scale.  ``cost`` is the certified cost of one invocation at that share,
    per unit round weight when ``per_round_weight`` (a mechanism inside a ``Repeat`` body).
    ``accounting`` is the plan's: under ``"basic"`` the mechanism is calibrated to be
    (``cost.basic_eps``, ``cost.basic_delta``)-DP on its own.

    >>> e = CostEvent("m", "GaussianMech", "zcdp", Fraction(1, 3), Cost.gaussian_zcdp(Fraction(1, 3)))
    >>> e.describe()
    'rho=0.3333333333 zCDP'
    """

    node: str
    kind: str
    mode: Mode
    share: Fraction
    cost: Cost
    per_round_weight: bool = False
    continuous_gaussian: bool = False
    accounting: Accounting = "auto"

    def describe(self) -> str:
        """The cost as the ledger shows it."""
        text = self.cost.total_measure().describe() + (" per unit round weight" if self.per_round_weight else "")
        if self.accounting == "basic" and self.cost.basic_eps is not None:
            text += (f"; (epsilon, delta) = ({float(self.cost.basic_eps):.6g}, "
                     f"{float(self.cost.basic_delta):.3g}) per {'round' if self.per_round_weight else 'run'}")
        return text

    def to_data(self) -> dict[str, Any]:
        """JSON data (exact fractions as strings)."""
        return {"node": self.node, "kind": self.kind, "mode": self.mode, "share": str(self.share),
                "cost": cost_to_data(self.cost), "per_round_weight": self.per_round_weight,
                "continuous_gaussian": self.continuous_gaussian, "accounting": self.accounting}

    @staticmethod
    def from_data(d: dict[str, Any]) -> CostEvent:
        """The inverse of :meth:`to_data`."""
        return CostEvent(**{**d, "share": Fraction(d["share"]), "cost": cost_from_data(d["cost"])})


T = TypeVar("T")


@dataclass(frozen=True)
class PerRecord(Generic[T]):
    """The two per-record costs of a subtree (rows, a split, a statistic) that the tight rule for nested
    value partitions needs: ``one`` when one record enters or leaves the subtree's rows (add/remove, or
    a replace-one change of which the subtree sees only one side), ``both`` when a record of the rows is
    replaced by another (both sides inside them)."""

    one: T
    both: T


@dataclass(frozen=True)
class Ops(Generic[T]):
    """How costs of type T compose: ``seq`` (the same records), ``most`` (a bound on each of them: the max)
    and ``top_two`` (a bound on any two of them together: the sum of the two largest)."""

    seq: Callable[[Sequence[T]], T]
    most: Callable[[Sequence[T]], T]
    top_two: Callable[[Sequence[T]], T]


def split_rule(pieces: Sequence[PerRecord[T]], rule: SplitRule, ops: Ops[T]) -> PerRecord[T]:
    """The per-record rule of a split (McSherry 2009 Thm. 4; tight for nested value partitions).

    An added or removed record lies in exactly one piece: ``one = max_i one_i`` (either rule).  A replaced
    record x -> x' of the split's rows: an index split keeps both in the same block
    (``both = max_i both_i``); a value partition sends x to piece i and x' to piece j, both functions of
    the record's own value and released parameters: if i = j that piece sees a replacement (``both_i``),
    otherwise piece i loses x and piece j gains x' (``one_i + one_j``), and no other piece changes.  So
    ``both = max(max_i both_i, max_{i != j} (one_i + one_j))``, bounded by ``max(max_i both_i, top_two(one))``.
    A mechanism's ``one`` is its cost at the add/remove sensitivity of its statistic with the same noise, which
    can be less than its full cost (:mod:`dpflow.privacy.ratio`: a Gaussian sum of rows in a ball costs a
    quarter of its rho when one row leaves or enters), so one split of such leaves costs one leaf, not two.

    Proof that nesting is then charged for two leaves, not 2^L: by induction on the depth, ``one`` of a
    subtree is the largest cost along one root-to-leaf path (each partition keeps the record on one path)
    and ``both`` the largest over two paths (the records x and x'), because the recursion only ever adds
    the ``one`` of two distinct pieces (the two paths part there and never meet again) or the ``both`` of
    one piece (they have not parted yet).  A depth-L tree of leaves of cost c therefore costs ``2c`` under
    replace-one, not ``2^L c`` as summing the two largest pieces at every level does.

    >>> add = Ops(sum, max, lambda xs: sum(sorted(xs)[-2:]))
    >>> leaf = PerRecord(1, 1)
    >>> inner = split_rule([leaf, leaf], SplitRule.VALUE, add)
    >>> split_rule([inner, inner], SplitRule.VALUE, add)
    PerRecord(one=1, both=2)
    """
    one = ops.most([p.one for p in pieces])
    if rule is SplitRule.INDEX:
        return PerRecord(one, ops.most([p.both for p in pieces]))
    return PerRecord(one, ops.most([ops.most([p.both for p in pieces]), ops.top_two([p.one for p in pieces])]))


def tree_rule(split: PerRecord[T], leaf: PerRecord[T], depth: int, parts: int, ops: Ops[T]) -> PerRecord[T]:
    """The per-record rule of a ``PartitionTree`` of depth bound ``D = depth`` and ``parts`` parts per split, from
    the costs of what a splitting piece evaluates (``S = split``) and of a leaf's result (``L = leaf``): the cost
    :func:`split_rule` gives the complete tree of depth D (``T_D = L``, ``T_d = seq(S, most(L, split_rule([T_(d+1)]
    * parts, VALUE)))``), in closed form: ``one = seq(S.one x D, L.one)``; ``both = most(seq(S.both x D, L.both),
    seq(S.both x a, S.one x 2(D - a), L.one x 2) for a = 1..D)`` (the second family only with two parts or more:
    the two records' paths share ``a`` pieces, then each goes on alone).  The recurrence reduces to it because a
    path's cost only grows with its length (``most(L, T_(d+1)) = T_(d+1)``) and ``split_rule`` of equal children
    is ``(one, most(both, one + one))``; the closed form composes each candidate once (no join of joins).  The
    derivation is in ``PartitionTree``'s docstring.

    >>> add = Ops(sum, max, lambda xs: sum(sorted(xs)[-2:]))
    >>> tree_rule(PerRecord(1, 1), PerRecord(10, 10), 3, 2, add)
    PerRecord(one=13, both=25)
    """
    one = ops.seq([split.one] * depth + [leaf.one])
    paths = [ops.seq([split.both] * depth + [leaf.both])]
    if parts > 1:
        paths += [ops.seq([split.both] * a + [split.one] * (2 * (depth - a)) + [leaf.one] * 2)
                  for a in range(1, depth + 1)]
    return PerRecord(one, ops.most(paths))


def seq_pairs(parts: Sequence[PerRecord[T]], ops: Ops[T]) -> PerRecord[T]:
    """Uses of the same records compose sequentially, for either kind of change.  When every part's two
    costs are the same object (a mechanism's leaf, a chain of them), ``ops.seq`` (pure) runs once."""
    ones = [p.one for p in parts]
    if all(p.both is p.one for p in parts):
        s = ops.seq(ones)
        return PerRecord(s, s)
    return PerRecord(ops.seq(ones), ops.seq([p.both for p in parts]))


def of_relation(relation: Relation, r: PerRecord[T]) -> T:
    """A source's cost: a replaced record of the source's rows (``both``) or an added/removed one."""
    return r.both if relation == "replace" else r.one


COST_OPS: Ops[Cost] = Ops(Cost.sequential, lambda xs: Cost.parallel(xs, "add_remove"),
                          lambda xs: Cost.parallel(xs, "replace"))
"""Costs compose exactly (:class:`~dpflow.privacy.Cost`): the max and the two largest are its parallel
composition under add/remove and replace-one."""


@attrs.frozen
class Charge:
    """A leaf of a composition tree: mechanism ``node`` charged ``cost`` (at its round weight).  ``one``, when
    given, is its cost when a record only enters or leaves its rows (the value piece it reads gains or loses the
    record of a replace-one change: :func:`split_rule`'s ``one``), with the same noise; else ``cost``."""

    node: str
    cost: Cost
    one: Cost | None = None


@attrs.frozen
class Sequential:
    """Sequential composition of ``parts`` (they read the same records); no parts costs nothing."""

    parts: tuple[Composition, ...]


@attrs.frozen
class Parallel:
    """Parallel composition over the disjoint pieces of a split, one part per piece.

    ``rule`` is the split's: ``"index"`` (a record stays in its block, so the max over parts) or
    ``"value"`` (the max under add/remove neighbours; under replace, the worst of one part changed within
    and two parts each gaining or losing one record: :func:`split_rule`).

    >>> t = Parallel("value", (Charge("a", Cost.pure(1)), Rounds("r", Fraction(1), 2, Charge("r/b", Cost.pure(1)))))
    >>> composition_from_data(composition_to_data(t)) == t
    True
    """

    rule: SplitRule = attrs.field(converter=SplitRule)
    parts: tuple[Composition, ...]


@attrs.frozen
class Rounds:
    """``count`` rounds of the ``Repeat`` node ``node`` at round weight ``weight``, composed
    sequentially; ``body`` is one such round (its charges are at that weight)."""

    node: str
    weight: Fraction
    count: int
    body: Composition


@attrs.frozen
class Tree:
    """The ``PartitionTree`` node ``node``: ``split`` is what a splitting piece evaluates, ``leaf`` a leaf's result,
    composed by :func:`tree_rule` over ``depth`` levels of ``parts``-way value partitions."""

    node: str
    depth: int
    parts: int
    split: Composition
    leaf: Composition


Composition: TypeAlias = "Charge | Sequential | Parallel | Rounds | Tree"
"""A per-source composition tree: data, no math; the planner's totals compose exactly this tree."""


def composition_to_data(c: Composition) -> dict[str, Any]:
    """A composition tree as JSON data (one tagged object per node).

    >>> composition_to_data(Sequential((Charge("m", Cost.zcdp(Fraction(1, 3))),)))["sequential"][0]["charge"]
    'm'
    """
    if isinstance(c, Charge):
        one = {} if c.one is None else {"one": cost_to_data(c.one)}
        return {"charge": c.node, "cost": cost_to_data(c.cost)} | one
    if isinstance(c, Sequential):
        return {"sequential": [composition_to_data(p) for p in c.parts]}
    if isinstance(c, Parallel):
        return {"parallel": c.rule, "parts": [composition_to_data(p) for p in c.parts]}
    if isinstance(c, Tree):
        return {"tree": c.node, "depth": c.depth, "parts": c.parts, "split": composition_to_data(c.split),
                "leaf": composition_to_data(c.leaf)}
    return {"rounds": c.node, "weight": str(c.weight), "count": c.count, "body": composition_to_data(c.body)}


def composition_from_data(d: dict[str, Any]) -> Composition:
    """The inverse of :func:`composition_to_data`."""
    if "charge" in d:
        return Charge(d["charge"], cost_from_data(d["cost"]), None if "one" not in d else cost_from_data(d["one"]))
    if "sequential" in d:
        return Sequential(tuple(composition_from_data(p) for p in d["sequential"]))
    if "parallel" in d:
        return Parallel(d["parallel"], tuple(composition_from_data(p) for p in d["parts"]))
    if "tree" in d:
        return Tree(d["tree"], d["depth"], d["parts"], composition_from_data(d["split"]),
                    composition_from_data(d["leaf"]))
    return Rounds(d["rounds"], Fraction(d["weight"]), d["count"], composition_from_data(d["body"]))


def recompose(c: Composition, relation: Relation) -> Cost:
    """The cost of a composition tree by its documented meaning alone: a sequence adds, a split's parts
    compose in parallel (:func:`split_rule`: one record is in one piece; a replaced
    record changes one index block, or at most two value pieces, each by one record),
    ``count`` rounds are a ``count``-fold composition, a partition tree composes its paths (:func:`tree_rule`).
    Any accountant can re-walk a ledger this way; the
    test suite checks it gives every source total the planner's fold computed.

    >>> t = Sequential((Charge("a", Cost.pure(1)), Rounds("r", Fraction(1), 2, Charge("r/b", Cost.pure(1)))))
    >>> recompose(t, "replace").pure_eps
    Fraction(3, 1)
    """
    return of_relation(relation, _recompose(c))


def _recompose(c: Composition) -> PerRecord[Cost]:
    """The per-record costs of a tree (one record added or removed, one replaced): splits by
    :func:`split_rule`, the one statement of the parallel rule."""
    if isinstance(c, Charge):
        return PerRecord(c.cost if c.one is None else c.one, c.cost)
    if isinstance(c, Sequential):
        return seq_pairs([_recompose(p) for p in c.parts], COST_OPS)
    if isinstance(c, Parallel):
        return split_rule([_recompose(p) for p in c.parts], c.rule, COST_OPS)
    if isinstance(c, Tree):
        return tree_rule(_recompose(c.split), _recompose(c.leaf), c.depth, c.parts, COST_OPS)
    body = _recompose(c.body)
    return PerRecord(body.one.scaled(c.count), body.both.scaled(c.count))


@attrs.frozen
class LedgerEntry:
    """One node: what it reads, its sensitivity and how it was derived, its noise and cost.

    ``event`` is the typed cost of a mechanism (None for other nodes); ``cost`` is its text.
    """

    node: str
    kind: str
    input: str
    output: str
    sensitivity: str
    derivation: str
    noise: str
    rule: str
    reference: str
    event: CostEvent | None = None

    @property
    def cost(self) -> str:
        """The cost in its native measure, as text ("" for a node that is not a mechanism)."""
        return "" if self.event is None else self.event.describe()

    def to_data(self) -> dict[str, Any]:
        """JSON data: the fields, the typed event and the rendered ``cost``."""
        data = {f.name: getattr(self, f.name) for f in attrs.fields(LedgerEntry)}
        return data | {"event": None if self.event is None else self.event.to_data(), "cost": self.cost}

    @staticmethod
    def from_data(d: dict[str, Any]) -> LedgerEntry:
        """The inverse of :meth:`to_data` (the rendered ``cost`` is recomputed)."""
        fields = {k: v for k, v in d.items() if k != "cost"}
        ev = fields.pop("event")
        return LedgerEntry(**fields, event=None if ev is None else CostEvent.from_data(ev))


@attrs.frozen
class SourceTotal:
    """The composed per-record cost on one source, in its native measures and in (eps, delta).

    ``cost`` is the exact composed cost, ``used`` the exact fraction of the budget it uses (in the
    plan's native unit: rho, or epsilon in pure and basic accounting).  ``composition`` is the tree
    the cost composes (None only for a total not made by the planner); ``cost`` equals the tree
    composed, except that the Gaussian-DP field is dropped when that accounting does not apply.
    """

    source: str
    cost: Cost
    used: Fraction
    conversions: tuple[Conversion, ...]
    composition: Composition | None = None

    @property
    def rho(self) -> Fraction:
        """The composed rho (zCDP)."""
        return self.cost.rho

    @property
    def delta0(self) -> Fraction:
        """The composed delta0 (approximate zCDP; 0 for exact zCDP)."""
        return self.cost.delta0

    @property
    def pure_eps(self) -> Fraction | None:
        """The composed pure epsilon, or None when some mechanism is not pure."""
        return self.cost.pure_eps

    @property
    def gdp_mu(self) -> float | None:
        """The Gaussian-DP mu (a float), or None when the exact Gaussian-DP accounting does not apply."""
        return None if self.cost.gdp_mu2 is None else float(self.cost.gdp_mu2) ** 0.5

    @property
    def measure(self) -> str:
        """The composed cost in its tightest native measure, as text."""
        return self.cost.total_measure().describe()

    @property
    def budget_used(self) -> str:
        """The fraction of the budget used, as a percentage text."""
        return f"{100 * float(self.used):.4g}%"

    def tightest(self) -> Conversion:
        """The conversion used for the headline (epsilon, delta)."""
        return next(c for c in self.conversions if c.tightest)

    def to_data(self) -> dict[str, Any]:
        """JSON data: the exact cost and fraction used, the conversions and the rendered text."""
        return {"source": self.source, "cost": cost_to_data(self.cost), "used": str(self.used),
                "conversions": [attrs.asdict(c) for c in self.conversions],
                "composition": None if self.composition is None else composition_to_data(self.composition),
                "measure": self.measure, "budget_used": self.budget_used}

    @staticmethod
    def from_data(d: dict[str, Any]) -> SourceTotal:
        """The inverse of :meth:`to_data` (the rendered text is recomputed)."""
        comp = d["composition"]
        return SourceTotal(d["source"], cost_from_data(d["cost"]), Fraction(d["used"]),
                           tuple(Conversion(**c) for c in d["conversions"]),
                           None if comp is None else composition_from_data(comp))


@attrs.frozen(repr=False)
class Ledger:
    """The certificate of a plan.  Its ``repr`` is a short overview (:meth:`overview`); :meth:`summary`
    lists every mechanism, :meth:`to_json` holds everything.

    >>> import dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=2), n=100)
    >>> ledger = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))).check()
    >>> ledger.totals[0].rho
    Fraction(1, 2)
    >>> Ledger.from_json(ledger.to_json()) == ledger
    True
    """

    plan_name: str
    plan_hash: str
    dpflow_version: str
    neighbors: str
    budget: str
    allocation: str
    report_delta: float
    entries: tuple[LedgerEntry, ...]
    totals: tuple[SourceTotal, ...]
    composition: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    noise_calibrations: tuple[NoiseCalibration, ...] = ()
    predictions: tuple[Prediction, ...] = ()
    """The errors the plan's estimator predicted before data (:class:`dpflow.nodes.PredictedError` nodes)."""
    schema: str = LEDGER_SCHEMA
    schema_version: int = LEDGER_SCHEMA_VERSION

    def events(self) -> tuple[CostEvent, ...]:
        """The typed cost event of every mechanism, in ledger order."""
        return tuple(e.event for e in self.entries if e.event is not None)

    def to_data(self) -> dict[str, Any]:
        """The ledger as JSON data."""
        data = {f.name: getattr(self, f.name) for f in attrs.fields(Ledger)}
        return data | {"entries": [e.to_data() for e in self.entries], "totals": [t.to_data() for t in self.totals],
                       "composition": list(self.composition), "warnings": list(self.warnings),
                       "noise_calibrations": [c.to_data() for c in self.noise_calibrations],
                       "predictions": [p.to_data() for p in self.predictions]}

    def to_json(self, indent: int | None = None) -> str:
        """Canonical JSON (or indented, for reading)."""
        data = self.to_data()
        return canonical(data) if indent is None else json.dumps(data, sort_keys=True, indent=indent)

    @staticmethod
    def from_json(text: str) -> Ledger:
        """Read a ledger written by :meth:`to_json` (this schema version only; anything else raises a
        ``ValueError`` saying why, as does a document whose rendered text disagrees with its values)."""
        d = json.loads(text)
        schema, version = d.get("schema"), d.get("schema_version")
        if schema != LEDGER_SCHEMA or version != LEDGER_SCHEMA_VERSION:
            found = f"schema {schema!r}" + ("" if version is None else f" version {version!r}")
            raise ValueError(f"not a {LEDGER_SCHEMA} version {LEDGER_SCHEMA_VERSION} document ({found}); a "
                             "version 1 ledger (schema 'dpflow.ledger/1') stored its costs as text, a version 2 "
                             "ledger has no noise calibrations, a version 3 ledger no one-sided charges, a "
                             "version 4 ledger no predicted errors and a version 5 ledger names loops Recurse, so "
                             "none can be read: certify the plan again (Plan.from_json(...).check()) to get a "
                             "current ledger")
        ledger = Ledger(**{**d, "entries": tuple(LedgerEntry.from_data(e) for e in d["entries"]),
                           "totals": tuple(SourceTotal.from_data(t) for t in d["totals"]),
                           "composition": tuple(d["composition"]), "warnings": tuple(d["warnings"]),
                           "noise_calibrations": tuple(NoiseCalibration.from_data(c)
                                                       for c in d["noise_calibrations"]),
                           "predictions": tuple(Prediction.from_data(p) for p in d["predictions"])})
        if ledger.to_data() != d:
            raise ValueError("the ledger's rendered text (cost, measure, budget_used) disagrees with its typed "
                             "values: the document was edited; use the ledger as the planner wrote it")
        return ledger

    MAX_SOURCES = 2
    """Sources an overview lists (then how many more)."""

    def overview(self) -> list[tuple[str, str]]:
        """The key facts as (label, value) rows: the plan, the budget, each source's total (at most
        :attr:`MAX_SOURCES` of them) and the warnings; names shortened, as :func:`dpflow.text.visible` shows them.

        >>> import dpflow as dp
        >>> from dpflow import nodes as N
        >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5), name="demo")
        >>> X = b.source("X", dp.Vectors(d=2), n=100)
        >>> print(repr(b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))).check()))  # doctest: +ELLIPSIS
        <Ledger
          plan: demo (sha256:...)
          budget: rho=0.5 zCDP, replace neighbours, 1 mechanism
          source X: rho=0.5 zCDP (100% of the budget); (4.88676, 1e-06)-DP by PLD (dp_accounting, pessimistic)>
        """
        mechanisms = len(self.events())
        rows = [("plan", f"{shorten(self.plan_name, 40)} ({self.plan_hash[:19]})"),
                ("budget", f"{self.budget}, {self.neighbors} neighbours, {mechanisms} mechanism"
                           + ("" if mechanisms == 1 else "s"))]
        shown = self.totals if len(self.totals) <= self.MAX_SOURCES else self.totals[:self.MAX_SOURCES - 1]
        for t in shown:
            best = t.tightest()
            rows.append((f"source {shorten(t.source, 30)}", f"{t.measure} ({t.budget_used} of the budget); "
                                                           f"({best.epsilon:.6g}, {best.delta:.3g})-DP by {best.rule}"))
        if len(shown) < len(self.totals):
            rows.append(("more sources", f"{len(self.totals) - len(shown)} (summary() lists every source)"))
        if self.predictions:
            rows.append((f"predicted error ({len(self.predictions)})", self.predictions[0].describe()))
        if self.warnings:
            rows.append((f"warnings ({len(self.warnings)})", self.warnings[0]))
        return rows

    def __repr__(self) -> str:
        return overview_text("Ledger", self.overview())

    def _repr_html_(self) -> str:
        return overview_html("Ledger", self.overview())

    def summary(self) -> str:
        """A short readable summary: mechanisms, their costs, and the totals (every name as
        :func:`dpflow.text.visible`: one line each, shown as it is stored)."""
        lines = [f"plan {self.plan_name} ({self.plan_hash[:19]}), neighbours: {self.neighbors}",
                 f"budget: {self.budget}; {self.allocation}"]
        for e in self.entries:
            if e.noise:
                lines.append(f"  {e.node:<28} {e.sensitivity:<34} {e.cost}")
        for t in self.totals:
            best = t.tightest()
            lines.append(
                f"source {t.source}: {t.measure} ({t.budget_used} of the budget); "
                f"({best.epsilon:.6g}, {best.delta:.3g})-DP by {best.rule}"
            )
        lines.extend(f"predicted: {p.describe()}" for p in self.predictions)
        lines.extend(f"warning: {w}" for w in self.warnings)
        return "\n".join(visible(line) for line in lines)

    def accuracy(self, alpha: float = 0.05) -> tuple[Accuracy, ...]:
        """For every mechanism invocation, the half-width of a (1 - alpha) interval of its noise, per
        coordinate, before any data is read (rules and their exactness: :mod:`dpflow.planner.accuracy`).

        >>> import dpflow as dp
        >>> from dpflow import nodes as N
        >>> b = dp.PlanBuilder(budget=dp.PureDP(1.0))
        >>> h = N.LaplaceMech()(N.Histogram(edges=[0, 1, 2])(b.source("X", dp.Ordinal(N=2), n=10)))
        >>> row = b.build(h=h).check().accuracy(0.05)[0]
        >>> row.noise, round(row.half_width, 4)
        ('Laplace b = 2', 5.9915)
        """
        return accuracy_rows(self.noise_calibrations, alpha)

    def accuracy_summary(self, alpha: float = 0.05) -> str:
        """:meth:`accuracy` as readable lines (what ``dpflow check`` prints after :meth:`summary`)."""
        return "\n".join(visible(line) for line in accuracy_lines(self.noise_calibrations, alpha))
