"""The planner: certify a plan without reading data.

Steps: (0) validate the plan, whatever built it (builder, ``Plan(...)``, JSON): sources
declared once and only at the top level, one ``Input`` and one ``State`` per ``Recurse``
body, outputs and node parameters released; (1) infer every node's static type (domain,
public size, sensitivity) in topological order, recursing into ``Recurse`` bodies; (2) fold the per-record
structure of every source (reuse adds, index splits take the max, value
partitions take the max under add/remove and the two largest under replace,
rounds of a ``Recurse`` add); (3) allocate the budget to mechanisms by weight,
exactly (``fractions.Fraction``), after fixed-cost mechanisms; (4) fold the
mechanisms' certified costs the same way and check them against the budget;
(5) write the ledger.

Allocation never lands above the budget: shares are exact fractions of the
remaining budget, folded shares equal it exactly, and every mechanism's
realised cost is at most its share (noise scales are rounded up).
"""

from __future__ import annotations

import enum
import gc
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import TypeVar

import attrs

from dpflow._version import __version__
from dpflow.errors import BudgetError, PlanError, PlanReferenceError, PlanTypeError, PostProcessingError
from dpflow.handles import Ref
from dpflow.nodes import Mechanism, NodeRecord, Piece, Recurse, Source
from dpflow.nodes.base import (
    Allocation,
    Inferred,
    Mode,
    PiecesT,
    Relation,
    ReleasedT,
    RowsT,
    StatT,
    VType,
    released_type,
    text_of,
)
from dpflow.nodes.control import Input, Round, State
from dpflow.nodes.postprocess import warning_text
from dpflow.plan.graph import Plan, topological
from dpflow.planner.ledger import (
    Charge,
    Composition,
    CostEvent,
    Ledger,
    LedgerEntry,
    Parallel,
    Rounds,
    Sequential,
    SourceTotal,
)
from dpflow.privacy import (
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    Cost,
    PureDP,
    gaussian_budget_rho,
    gdp_mu_for_approx_dp,
    zcdp_rho_for_approx_dp,
)
from dpflow.privacy.rounding import up

T = TypeVar("T")
_ZERO = Cost.zero()


_GDP_TEXT = "all mechanisms Gaussian (continuous noise): exact Gaussian-DP"


class Accounting(enum.Enum):
    """How a plan is accounted, as chosen by the planner from the budget and the mechanisms' capabilities.

    >>> Accounting.GDP.mode, Accounting.GDP.continuous_gaussian
    ('zcdp', True)
    """

    PURE = "pure"
    """Pure epsilon shares, basic composition."""
    ZCDP = "zcdp"
    """rho shares, zCDP composition (and conversion to (epsilon, delta) by CKS and friends)."""
    GDP = "zcdp-by-exact-GDP"
    """rho shares of an all-Gaussian plan certified through the exact Gaussian-DP profile: every
    Gaussian mechanism must sample continuous noise."""
    BASIC = "basic"
    """Per-mechanism (epsilon, delta) shares, basic composition (``accounting="basic"``)."""

    @property
    def mode(self) -> Mode:
        """The unit of the weighted shares: epsilon (pure, basic) or rho (zCDP, GDP)."""
        return "pure" if self in (Accounting.PURE, Accounting.BASIC) else "zcdp"

    @property
    def continuous_gaussian(self) -> bool:
        """Whether the certificate rests on the exact Gaussian-DP profile of the Gaussian mechanisms
        (proven for continuous noise only): GDP mode, and basic mode (each Gaussian calibrated by it)."""
        return self in (Accounting.GDP, Accounting.BASIC)


@attrs.frozen
class ModeChoice:
    """The planner's accounting decision: the mode, the total shared by weight (in ``mode`` units)
    and the ledger's allocation text."""

    accounting: Accounting
    total: Fraction
    text: str

REF_SEQ = "sequential composition (Bun-Steinke 2016 Lemma 1.7; Dwork-Roth 2014 Thm 3.16)"
REF_PAR = "parallel composition over disjoint pieces (McSherry 2009, PINQ)"


_Step = tuple[str, NodeRecord, list[str], list[list[str]], str]


@attrs.frozen
class _Ctx:
    relation: Relation
    node_id: str
    types: dict[str, VType]

    def type_of(self, ref: Ref) -> VType:
        return self.types[ref.id]


@attrs.frozen(eq=False)
class TypedScope:
    """One certified namespace, the top-level plan or one ``Recurse`` body: its nodes in topological
    order with their static types and ledger derivations, the nested bodies by ``Recurse`` id, and the
    sensitive-data tree (``children``/``parents``) the planner folds.  ``path`` prefixes node ids to
    node paths (``""`` at the top level, ``"recurse_4/"`` in that loop's body).

    >>> import dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=2), n=100)
    >>> scope = certify(b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))).space
    >>> scope.types["mean_2"].l2.text()
    '0.02'
    """

    path: str
    order: list[NodeRecord]
    types: dict[str, VType]
    derivations: dict[str, str]
    children: dict[str, list[NodeRecord]]
    bodies: dict[str, TypedScope]
    parents: dict[str, str] = attrs.field(init=False)
    records: dict[str, NodeRecord] = attrs.field(init=False)
    steps: list[_Step] = attrs.field(init=False)
    """The sensitive nodes, children before parents, tagged with how they fold."""

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "parents", {c.id: p for p, cs in self.children.items() for c in cs})
        object.__setattr__(self, "records", {r.id: r for r in self.order})
        object.__setattr__(self, "steps", _fold_steps(self))


@attrs.frozen
class InvocationTable:
    """The allocation of every mechanism invocation, rounds included: what the interpreter reads.

    A mechanism inside ``Recurse`` loops is invoked once per round of each enclosing loop, at the
    product of those rounds' weights.  ``rounds[loop][k]`` is the weight class of round ``k`` of the
    loop at path ``loop`` (an index into its sorted distinct round weights), and ``table`` is keyed by
    the mechanism's path and the classes of its enclosing loops, outermost first (``()`` outside
    loops), so its size is the number of distinct weight combinations, not of rounds.  Every entry
    carries its share and its certified cost at that share.

    >>> import dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=2), n=100)
    >>> body = lambda rows, state, k: N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(rows)))
    >>> out = N.recurse(X, b.public([0.0, 0.0]), body, times=3, round_weights=[1.0, 1.0, 3.0])
    >>> inv = certify(b.build(m=out)).invocations
    >>> inv.rounds
    {'recurse_2': (0, 0, 1)}
    >>> [str(inv.at("recurse_2/b1.gaussian_mech_5", (c,)).share) for c in inv.rounds["recurse_2"]]
    ['1/10', '1/10', '3/10']
    """

    rounds: dict[str, tuple[int, ...]]
    table: dict[tuple[str, tuple[int, ...]], Allocation]

    def at(self, node: str, classes: tuple[int, ...]) -> Allocation:
        """The allocation of mechanism ``node`` (a path) in the rounds of weight classes ``classes``."""
        return self.table[node, classes]


@attrs.frozen(eq=False)
class Certified:
    """A certified plan: the plan, its typed scopes, the budget allocations and the ledger.

    ``space`` is the typed top-level :class:`TypedScope` (loop bodies in ``space.bodies``).
    ``allocations`` is keyed by node path (``recurse_4/b1.gaussian_mech_3`` inside a Recurse body,
    where the share is per unit round weight); ``invocations`` has the allocation of every invocation
    (round weights applied), which is what the interpreter uses.
    """

    plan: Plan
    space: TypedScope
    allocations: dict[str, Allocation]
    ledger: Ledger
    invocations: InvocationTable


def _key(space: TypedScope, nid: str) -> str:
    return f"{space.path}{nid}"


def _infer_space(records: Sequence[NodeRecord], relation: Relation, path: str,
                 bindings: dict[type, VType] | None = None) -> TypedScope:
    order = topological(tuple(records), "plan" if not path else f"body of {path.rstrip('/')}")
    types: dict[str, VType] = {}
    derivations: dict[str, str] = {}
    children: dict[str, list[NodeRecord]] = defaultdict(list)
    bodies: dict[str, TypedScope] = {}
    for rec in order:
        ctx = _Ctx(relation, path + rec.id, types)
        node = rec.node
        ins = [types[i] for i in rec.inputs]
        if isinstance(node, (Input, State, Round)):
            if bindings is None or type(node) not in bindings:
                raise PlanTypeError(ctx.node_id, f"{node.kind} stand-in outside a Recurse body",
                                    "build loops with dpflow.nodes.recurse")
            res = Inferred(bindings[type(node)], f"{node.kind} stand-in")
        elif isinstance(node, Recurse):
            res = _infer_recurse(rec, ins, relation, path, bodies)
        else:
            res = node.infer(ins, ctx)
        if isinstance(node, Mechanism):
            stat = ins[0]
            assert isinstance(stat, StatT)
            derivations[rec.id] = node.check_input(stat, ctx)
        else:
            derivations[rec.id] = res.derivation
        types[rec.id] = res.out
        if rec.inputs and not isinstance(types[rec.inputs[0]], ReleasedT):
            children[rec.inputs[0]].append(rec)
    return TypedScope(path, order, types, derivations, children, bodies)


def _infer_recurse(rec: NodeRecord, ins: list[VType], relation: Relation, path: str,
                   bodies: dict[str, TypedScope]) -> Inferred:
    node = rec.node
    assert isinstance(node, Recurse)
    nid = path + rec.id
    if len(ins) != 2 or not isinstance(ins[0], RowsT) or not isinstance(ins[1], ReleasedT):
        raise PlanTypeError(nid, "Recurse takes sensitive rows and a released initial state",
                            "call dpflow.nodes.recurse(rows, init, body, times)")
    body = _infer_space(node.body.records, relation, f"{nid}/",
                        {Input: ins[0], State: ins[1], Round: ReleasedT(())})
    out = body.types.get(node.body.output)
    if not isinstance(out, ReleasedT):
        raise PlanTypeError(nid, "the body must return a released value", "return a mechanism's output")
    bodies[rec.id] = body
    return Inferred(ReleasedT(out.shape), f"{node.times} rounds of a {len(node.body.records)}-node body")


def _fold_steps(space: TypedScope) -> list[_Step]:
    """The sensitive nodes of a space, children before parents, tagged with how they fold."""
    steps: list[_Step] = []
    for rec in reversed(space.order):
        kids = [k.id for k in space.children.get(rec.id, [])]
        t = space.types[rec.id]
        if isinstance(rec.node, Mechanism):
            steps.append(("mech", rec, kids, [], ""))
        elif isinstance(rec.node, Recurse):
            steps.append(("recurse", rec, kids, [], ""))
        elif isinstance(t, PiecesT):
            groups: dict[int, list[str]] = defaultdict(list)
            for k in space.children.get(rec.id, []):
                assert isinstance(k.node, Piece)
                groups[k.node.index].append(k.id)
            steps.append(("pieces", rec, kids, list(groups.values()), t.rule))
        elif isinstance(t, (RowsT, StatT)):
            steps.append(("seq", rec, kids, [], ""))
    return steps


def _fold(space: TypedScope, start: str, leaf: Callable[[TypedScope, NodeRecord], T],
          rec_fn: Callable[[TypedScope, NodeRecord], T], seq: Callable[[Sequence[T]], T],
          par: Callable[[Sequence[T], str], T]) -> T:
    """Fold the per-record cost structure below ``start`` (children before parents)."""
    acc: dict[str, T] = {}
    for tag, rec, kids, groups, rule in space.steps:
        if tag == "seq":
            acc[rec.id] = seq([acc[k] for k in kids])
        elif tag == "mech":
            acc[rec.id] = leaf(space, rec)
        elif tag == "recurse":
            acc[rec.id] = rec_fn(space, rec)
        else:
            acc[rec.id] = par([seq([acc[k] for k in g]) for g in groups], rule)
    return acc[start]


def _mechanisms(space: TypedScope) -> list[tuple[TypedScope, NodeRecord, Mechanism]]:
    out: list[tuple[TypedScope, NodeRecord, Mechanism]] = []
    for rec in space.order:
        if isinstance(rec.node, Mechanism):
            out.append((space, rec, rec.node))
        elif isinstance(rec.node, Recurse):
            out.extend(_mechanisms(space.bodies[rec.id]))
    return out


def _source_of(space: TypedScope, rec: NodeRecord) -> str:
    t = space.types[rec.inputs[0]]
    assert isinstance(t, StatT)
    return t.source


def _source_name(rec: NodeRecord) -> str:
    assert isinstance(rec.node, Source)
    return rec.node.name


def _sum_frac(xs: Sequence[Fraction]) -> Fraction:
    return sum(xs, Fraction(0))


def _mech(rec: NodeRecord) -> Mechanism:
    assert isinstance(rec.node, Mechanism)
    return rec.node


def _body_start(body: TypedScope) -> str:
    return next(r.id for r in body.order if isinstance(r.node, Input))


def _round_weights(node: Recurse) -> Counter[Fraction]:
    return Counter(Fraction(node.weight_of_round(k)) for k in range(node.times))


def _check_records(records: Sequence[NodeRecord], path: str, sources: dict[str, str]) -> None:
    """Refuse, before inference, what the per-source folds cannot charge: a ``Source`` inside a
    ``Recurse`` body (the folds start at the top-level sources), a source name declared twice (the
    data and the ledger are keyed by name), and a body without exactly one ``Input`` and one
    ``State`` stand-in and at most one ``Round`` (a body's fold starts at its single ``Input``), and a
    stand-in with inputs (the loop binds it; inputs would be ignored or unfolded)."""
    for rec in records:
        node = rec.node
        if isinstance(node, Source):
            if path:
                raise PlanTypeError(path + rec.id, f"source {node.name} is declared inside a Recurse body",
                                    "declare every source on the top-level builder and pass its rows into the "
                                    "body as the first argument of recurse")
            if node.name in sources:
                raise PlanTypeError(rec.id, f"source {node.name} is declared twice (also by {sources[node.name]})",
                                    "declare each source once and reuse its handle")
            sources[node.name] = rec.id
        elif isinstance(node, (Input, State, Round)) and rec.inputs:
            raise PlanTypeError(path + rec.id, f"the {node.kind} stand-in is given inputs {list(rec.inputs)}",
                                "stand-ins take no inputs: build the body with dpflow.nodes.recurse")
        elif isinstance(node, Recurse):
            counts = Counter(type(r.node) for r in node.body.records)
            for stand_in, least in ((Input, 1), (State, 1), (Round, 0)):
                if not least <= counts[stand_in] <= 1:
                    raise PlanTypeError(path + rec.id, f"the body has {counts[stand_in]} {stand_in.kind} stand-ins",
                                        "build the body with dpflow.nodes.recurse (one Input, one State, "
                                        "at most one Round)")
            _check_records(node.body.records, f"{path}{rec.id}/", sources)


def _check_released(plan: Plan, space: TypedScope) -> None:
    """Refuse, after inference, an output or a node parameter that is not a released value of its
    own namespace (top level for outputs): only released values may leave the plan or steer a node."""
    if not plan.outputs:
        raise PlanTypeError(plan.name, "the plan releases nothing", "name at least one released output")
    for name, nid in plan.outputs:
        t = space.types.get(nid)
        if t is None:
            raise PlanReferenceError(nid, f"output {name!r} refers to {nid!r}, which is not a top-level node "
                                     "of the plan", "point the output at a released top-level node")
        if not isinstance(t, ReleasedT):
            raise PostProcessingError(nid, f"output {name!r} is a sensitive {type(t).__name__.removesuffix('T')} "
                                      f"({space.records[nid].node.kind}), not a released value",
                                      "release it through a mechanism (GaussianMech, LaplaceMech, ...) first")
    for sp in _spaces(space):
        for rec in sp.order:
            node = rec.node
            for ref in node.refs():
                slot = next((f.name for f in attrs.fields(type(node)) if getattr(node, f.name) is ref), "parameter")
                released_type(ref, _Ctx(plan.neighbors, _key(sp, rec.id), sp.types), slot)


def _validated_space(plan: Plan) -> TypedScope:
    """The typed top-level space of ``plan``, whatever built it (builder, ``Plan(...)``, JSON): the
    first step of certification, so ``certify``, ``Plan.check`` and ``run`` all go through it."""
    _check_records(plan.records, "", {})
    space = _infer_space(plan.records, plan.neighbors, "")
    _check_released(plan, space)
    return space


class _Planner:
    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.relation: Relation = plan.neighbors
        self.space = _validated_space(plan)
        self.mechs = _mechanisms(self.space)
        self.sources = [r for r in self.space.order if isinstance(r.node, Source)]
        self.basic = plan.accounting == "basic"
        self._memo: dict[tuple[Mechanism, int, int, int, int], Allocation] = {}

    # -- generic folds over one source ------------------------------------------------------
    def _par_frac(self, xs: Sequence[Fraction], rule: str) -> Fraction:
        if not xs:
            return Fraction(0)
        s = sorted(xs, reverse=True)
        if rule == "value" and self.relation == "replace":
            return sum(s[:2], Fraction(0))
        return s[0]

    def fold_frac(self, start: str, leaf: Callable[[TypedScope, NodeRecord], Fraction],
                  per_round: bool, space: TypedScope | None = None) -> Fraction:
        def rec_fn(sp: TypedScope, rec: NodeRecord) -> Fraction:
            node = rec.node
            assert isinstance(node, Recurse)
            body = sp.bodies[rec.id]
            inner = self.fold_frac(_body_start(body), leaf, per_round, body)
            mult = sum(_round_weights(node).elements(), Fraction(0)) if per_round else Fraction(node.times)
            return inner * mult

        return _fold(space or self.space, start, leaf, rec_fn, _sum_frac, self._par_frac)

    def fold_cost(self, start: str, leaf: Callable[[TypedScope, NodeRecord, Fraction], Cost],
                  space: TypedScope | None = None, mult: Fraction = Fraction(1)) -> Cost:
        def rec_fn(sp: TypedScope, rec: NodeRecord) -> Cost:
            node = rec.node
            assert isinstance(node, Recurse)
            body = sp.bodies[rec.id]
            total = _ZERO
            for w, count in sorted(_round_weights(node).items()):
                total = total.then(self.fold_cost(_body_start(body), leaf, body, mult * w).scaled(count))
            return total

        def par(xs: Sequence[Cost], rule: str) -> Cost:
            if not xs:
                return _ZERO
            return Cost.parallel(xs, "add_remove" if rule == "index" else self.relation)


        return _fold(space or self.space, start, lambda sp, r: leaf(sp, r, mult), rec_fn, Cost.sequential, par)

    # -- budget -------------------------------------------------------------------------------
    def mode_and_total(self) -> ModeChoice:
        """Choose the accounting from the budget and the mechanisms' capabilities (``pure_capable``,
        ``gaussian_profile``); a pure choice is then checked by :meth:`_refuse_impure`."""
        budget = self.plan.budget
        if self.basic:
            return self._basic_mode()
        mechs = [m for _, _, m in self.mechs]
        if isinstance(budget, PureDP):
            return ModeChoice(Accounting.PURE, budget.epsilon,
                              f"pure mode: epsilon={float(budget.epsilon):.6g} shared by weight")
        if isinstance(budget, (ZCDP, ApproxZCDP)):
            return ModeChoice(Accounting.ZCDP, budget.rho, f"zCDP mode: rho={float(budget.rho):.6g} shared by weight")
        assert isinstance(budget, ApproxDP)
        eps, delta = float(budget.epsilon), float(budget.delta)
        if delta <= 0:
            return ModeChoice(Accounting.PURE, budget.epsilon, "pure mode (delta = 0): epsilon shared by weight")
        if mechs and all(m.gaussian_profile for m in mechs):
            rho = gaussian_budget_rho(budget)
            mu = math.sqrt(float(2 * rho))
            return ModeChoice(Accounting.GDP, rho, (f"{_GDP_TEXT} mu={mu:.6g} meets ({eps:.6g}, {delta:.3g}); "
                                                    f"rho=mu^2/2={float(rho):.6g} shared by weight"))
        rho = zcdp_rho_for_approx_dp(budget.epsilon, budget.delta)
        text = f"zCDP mode: rho={float(rho):.6g} (CKS) meets ({eps:.6g}, {delta:.3g}); shared by weight"
        if mechs and all(m.pure_capable and m.fixed_share("pure") is None for m in mechs):
            if self._noise_variance("pure", budget.epsilon) <= self._noise_variance("zcdp", rho):
                return ModeChoice(Accounting.PURE, budget.epsilon,
                                  "pure mode: basic composition meets the budget with delta to spare")
        return ModeChoice(Accounting.ZCDP, rho, text)

    def _refuse_impure(self) -> None:
        """Refuse, in pure mode, every mechanism that is not ``pure_capable`` (the first one in plan order)."""
        for sp, rec, node in self.mechs:
            if not node.pure_capable:
                raise node.pure_refusal(_key(sp, rec.id))

    def _noise_variance(self, mode: Mode, total: Fraction) -> Fraction:
        """Total noise variance (up to a common factor) if the budget is shared by weight in ``mode``.

        A mechanism's variance is proportional to 1 / (the rho it realises at its share): 1/eps^2 vs
        1/(2 rho) for Laplace, and right for Peel too (3s vs 5s/2 unit losses); every round of a
        Recurse counts (pure shares shrink like 1/T, zCDP variances only like T).
        """
        var = Fraction(0)
        for src in self.sources:
            weights = self.fold_frac(src.id, lambda sp, r: Fraction(_mech(r).weight), per_round=True)
            if weights > 0:
                unit = total / weights

                def leaf(sp: TypedScope, r: NodeRecord, unit: Fraction = unit) -> Fraction:
                    return 1 / _mech(r).cost(unit * Fraction(_mech(r).weight), mode).rho

                var += self.fold_frac(src.id, leaf, per_round=False)
        return var

    def _basic_mode(self) -> ModeChoice:
        """Basic (epsilon, delta) accounting: epsilon shared by weight (pure-mode folds), delta alongside."""
        budget = self.plan.budget
        if not isinstance(budget, ApproxDP) or budget.delta <= 0:
            raise PlanTypeError(self.plan.name, "basic (epsilon, delta) accounting needs an ApproxDP budget "
                                f"with delta > 0, got {budget.describe()}",
                                "use dp.ApproxDP(epsilon, delta), or accounting='auto'")
        for sp, rec, m in self.mechs:
            if m.fixed_share("pure") is not None or m.fixed_share("zcdp") is not None:
                raise PlanTypeError(_key(sp, rec.id), "a fixed-cost mechanism in basic (epsilon, delta) accounting",
                                    "give it a weight= instead")
        for sp in _spaces(self.space):
            for rec in sp.order:
                if isinstance(rec.node, Recurse) and rec.node.round_weights is not None:
                    raise PlanTypeError(_key(sp, rec.id), "round weights in basic (epsilon, delta) accounting",
                                        "drop round_weights (every round gets an equal share)")
        text = (f"basic (epsilon, delta) mode: mechanism i gets (epsilon, delta) * w_i / W of "
                f"({float(budget.epsilon):.6g}, {float(budget.delta):.3g}) and is calibrated to be "
                "(epsilon_i, delta_i)-DP on its own (Gaussian: exact Gaussian-DP profile; other mechanisms: "
                "the less noisy of pure epsilon_i and zCDP converted by CKS); totals by basic composition "
                "(Dwork-Roth 2014 Thm 3.16): the per-step accounting of Cai-Wang-Zhang 2021")
        return ModeChoice(Accounting.BASIC, budget.epsilon, text)

    def _basic_allocation(self, sp: TypedScope, rec: NodeRecord, node: Mechanism, eps: Fraction) -> Allocation:
        """The native (mode, share) that makes ``node`` (eps, delta_i)-DP, delta_i = delta * eps / epsilon."""
        budget = self.plan.budget
        assert isinstance(budget, ApproxDP)
        delta = budget.delta * eps / budget.epsilon
        if node.gaussian_profile:  # the exact Gaussian-DP profile (Balle-Wang 2018 Thm 8)
            rho = Fraction(gdp_mu_for_approx_dp(eps, delta)) ** 2 / 2
            return Allocation("zcdp", rho, node.cost(rho, "zcdp").with_basic(eps, delta),
                              continuous_gaussian=Accounting.BASIC.continuous_gaussian)
        best: tuple[Mode, Fraction, Cost] | None = None
        shares: list[tuple[Mode, Fraction]] = [("pure", eps)] if node.pure_capable else []
        shares.append(("zcdp", zcdp_rho_for_approx_dp(eps, delta)))
        for mode, share in shares:  # CKS (Canonne-Kamath-Steinke 2020 Prop 12) is valid for every rho-zCDP event
            cost = node.cost(share, mode)
            if cost.delta0 == 0 and (best is None or cost.rho > best[2].rho):  # more rho = less noise
                best = (mode, share, cost)
        if best is None:
            raise PlanTypeError(_key(sp, rec.id), f"{node.kind} has no (epsilon, delta) calibration",
                                "use accounting='auto'")
        mode, share, cost = best
        return Allocation(mode, share, cost.with_basic(eps, Fraction(0) if mode == "pure" else delta))

    def certify(self) -> Certified:
        choice = self.mode_and_total()
        mode, total, alloc_text = choice.accounting.mode, choice.total, choice.text
        if choice.accounting is Accounting.PURE:
            self._refuse_impure()
        allocations: dict[str, Allocation] = {}
        shares: dict[str, Fraction] = {}
        warnings: list[str] = []

        def fixed_leaf(sp: TypedScope, rec: NodeRecord) -> Fraction:
            f = _mech(rec).fixed_share(mode)
            return f if f is not None else Fraction(0)

        def weight_leaf(sp: TypedScope, rec: NodeRecord) -> Fraction:
            m = _mech(rec)
            return Fraction(0) if m.fixed_share(mode) is not None else Fraction(m.weight)

        per_source: dict[str, tuple[Fraction, Fraction]] = {}
        for src in self.sources:
            fixed = self.fold_frac(src.id, fixed_leaf, per_round=False)
            weights = self.fold_frac(src.id, weight_leaf, per_round=True)
            name = _source_name(src)
            if fixed > total:
                self._refuse_budget(name, mode, total, fixed)
            per_source[name] = (total - fixed, weights)
            if weights == 0 and fixed == 0:
                warnings.append(f"source {name} is read by no mechanism")
        warnings.extend(dict.fromkeys(w for sp in _spaces(self.space) for rec in sp.order
                                      if (w := warning_text(rec.node))))
        for sp, rec, node in self.mechs:
            f = node.fixed_share(mode)
            if f is None:
                remaining, weights = per_source[_source_of(sp, rec)]
                if remaining == 0:
                    raise BudgetError(_key(sp, rec.id), f"the fixed-cost mechanisms on source {_source_of(sp, rec)} "
                                      "use the whole budget, leaving nothing for this weighted mechanism",
                                      "lower the fixed costs, or give every mechanism on the source a weight=")
                f = remaining * Fraction(node.weight) / weights
            shares[_key(sp, rec.id)] = f
            if self.basic:
                allocations[_key(sp, rec.id)] = self._basic_allocation(sp, rec, node, f)
                continue
            try:
                cost = node.cost(f, mode)
            except PlanError as e:
                raise PlanTypeError(_key(sp, rec.id), e.problem, e.fix) from e
            allocations[_key(sp, rec.id)] = Allocation(
                mode, f, cost, continuous_gaussian=choice.accounting.continuous_gaussian and node.gaussian_profile)

        def cost_leaf(sp: TypedScope, rec: NodeRecord, mult: Fraction) -> Cost:
            return self._invocation(allocations[_key(sp, rec.id)], _mech(rec), mult).cost

        totals = []
        report_delta = self._report_delta()
        gdp_valid = _gdp_valid(choice.accounting, self.mechs)
        gdp_dropped = pld_missing = False
        for src in self.sources:
            name = _source_name(src)
            cost = self.fold_cost(src.id, cost_leaf)
            gdp_dropped |= not gdp_valid and bool(cost.gdp_mu2)
            if not gdp_valid:  # a run may draw the discrete Gaussian: no GDP profile, no Gaussian PLD
                cost = cost.without_continuous_gaussian()
            pld_missing |= cost.pld is None
            self._check_budget(name, cost, mode)
            totals.append(self._source_total(name, cost, mode, total, report_delta, gdp_valid))
        ledger = Ledger(
            plan_name=self.plan.name,
            plan_hash=self.plan.hash,
            dpflow_version=__version__,
            neighbors=self.relation,
            budget=self.plan.budget.describe(),
            allocation=alloc_text,
            report_delta=report_delta,
            entries=tuple(self._entries(self.space, allocations, mode)),
            totals=tuple(attrs.evolve(t, composition=_composition_tree(self.space, src.id, cost_leaf))
                         for t, src in zip(totals, self.sources, strict=True)),
            composition=tuple(self._composition_notes() + ([_NO_GDP_TEXT] if gdp_dropped else [])
                              + ([_NO_PLD_TEXT] if pld_missing else [])),
            warnings=tuple(warnings),
        )
        rounds: dict[str, tuple[int, ...]] = {}
        table: dict[tuple[str, tuple[int, ...]], Allocation] = {}
        self._invocations(self.space, allocations, (), Fraction(1), rounds, table)
        return Certified(self.plan, self.space, allocations, ledger, InvocationTable(rounds, table))

    def _invocation(self, unit: Allocation, node: Mechanism, mult: Fraction) -> Allocation:
        """The allocation of one invocation of ``node`` at round weight ``mult`` (the product of the
        round weights of its enclosing loops; 1 outside loops), from its allocation per unit round
        weight ``unit``: the share times ``mult`` and its cost, unless the node fixes its own share
        (then every round gets it).  The one place a share is multiplied by a round weight."""
        if mult == 1 or node.fixed_share(unit.mode) is not None:
            return unit
        key = (node, unit.share.numerator, unit.share.denominator, mult.numerator, mult.denominator)
        hit = self._memo.get(key)
        if hit is None:  # mechanisms repeat across rounds and weights: cost each share once
            share = unit.share * mult
            hit = self._memo[key] = attrs.evolve(unit, share=share, cost=node.cost(share, unit.mode))
        return hit

    def _invocations(self, space: TypedScope, allocations: dict[str, Allocation], classes: tuple[int, ...],
                     mult: Fraction, rounds: dict[str, tuple[int, ...]],
                     table: dict[tuple[str, tuple[int, ...]], Allocation]) -> None:
        """Fill ``table`` with the allocation of every mechanism invocation, keyed by node path and the
        round-weight classes of the enclosing loops (``rounds[loop][k]``: the class of round k, an
        index into the loop's sorted distinct round weights)."""
        for rec in space.order:
            key = _key(space, rec.id)
            if isinstance(rec.node, Mechanism):
                table[key, classes] = self._invocation(allocations[key], rec.node, mult)
            elif isinstance(rec.node, Recurse):
                weights = sorted(_round_weights(rec.node))
                index = {w: i for i, w in enumerate(weights)}
                rounds[key] = tuple(index[Fraction(rec.node.weight_of_round(k))] for k in range(rec.node.times))
                for i, w in enumerate(weights):
                    self._invocations(space.bodies[rec.id], allocations, (*classes, i), mult * w, rounds, table)

    def _conversion_delta(self, cost: Cost, delta: float) -> float:
        """The delta of the (eps, delta) totals: the plan's, or, when the mechanisms' own delta0 already
        uses all of it, delta0 plus the plan's reporting delta (default 1e-6), rounded up."""
        if Fraction(delta) > cost.delta0:
            return delta
        extra = self.plan.report_delta if self.plan.report_delta is not None else 1e-6
        return up(float(cost.delta0) + extra)

    def _report_delta(self) -> float:
        b = self.plan.budget
        if isinstance(b, (ApproxDP, ApproxZCDP)) and b.delta > 0:
            return float(b.delta)
        return self.plan.report_delta if self.plan.report_delta is not None else 1e-6

    def _refuse_budget(self, source: str, mode: Mode, total: Fraction, fixed: Fraction) -> None:
        unit = "rho" if mode == "zcdp" else "epsilon"
        rows = []
        worst, worst_f = "", Fraction(-1)
        for sp, rec, m in self.mechs:
            f = m.fixed_share(mode)
            if f is not None and _source_of(sp, rec) == source:
                rows.append(f"{_key(sp, rec.id)} {unit}={float(f):.6g}")
                if f > worst_f:
                    worst, worst_f = _key(sp, rec.id), f
        raise BudgetError(
            worst,
            f"the mechanisms on source {source} need {unit}={float(fixed):.6g} but the budget allows "
            f"{unit}={float(total):.6g} (per node: {', '.join(rows)})",
            f"lower the fixed cost of {worst} (or use weight=), or raise the budget",
        )

    def _check_budget(self, source: str, cost: Cost, mode: Mode) -> None:
        b = self.plan.budget
        ok = True
        if self.basic:
            assert isinstance(b, ApproxDP)
            ok = cost.basic_eps is not None and cost.basic_eps <= b.epsilon and cost.basic_delta <= b.delta
        elif isinstance(b, PureDP):
            ok = cost.pure_eps is not None and cost.pure_eps <= b.epsilon
        elif isinstance(b, ZCDP):
            ok = cost.rho <= b.rho and cost.delta0 == 0
        elif isinstance(b, ApproxZCDP):
            ok = cost.rho <= b.rho and cost.delta0 <= b.delta
        else:
            if b.delta == 0:
                ok = cost.pure_eps is not None and cost.pure_eps <= b.epsilon
            else:
                best = min(c.epsilon for c in cost.epsilon_at(float(b.delta)))
                ok = best <= float(b.epsilon)
        if not ok:
            raise BudgetError(source, f"the composed cost {cost.total_measure().describe()} exceeds the budget "
                              f"{b.describe()}", "lower the fixed costs or raise the budget")

    def _source_total(self, name: str, cost: Cost, mode: Mode, total: Fraction, delta: float,
                      gdp_valid: bool) -> SourceTotal:
        """The per-source totals; the exact Gaussian-DP accounting only when ``gdp_valid`` (see :func:`_gdp_valid`)."""
        if not gdp_valid and cost.gdp_mu2 is not None:
            cost = attrs.evolve(cost, gdp_mu2=None)
        used = cost.rho if mode == "zcdp" else (cost.pure_eps or Fraction(0))
        if self.basic:
            used = cost.basic_eps or Fraction(0)
        return SourceTotal(
            source=name,
            cost=cost,
            used=used / total if total > 0 else Fraction(0),
            conversions=tuple(cost.epsilon_at(self._conversion_delta(cost, delta))),
        )

    def _rule_text(self, space: TypedScope, rec: NodeRecord) -> str:
        parts = []
        cur = rec.inputs[0]
        parents, records = space.parents, space.records
        while cur in parents:
            node = records[cur].node
            if isinstance(node, Piece):
                split_id = parents[cur]
                pt = space.types[split_id]
                assert isinstance(pt, PiecesT)
                how = ("max over index blocks" if pt.rule == "index"
                       else ("two largest pieces add (replace-one)" if self.relation == "replace" else "max"))
                parts.append(f"piece {node.index} of {space.path}{split_id}: parallel, {how}")
            cur = parents[cur]
        src_t = space.types[rec.inputs[0]]
        source = src_t.source if isinstance(src_t, (StatT, RowsT)) else "?"
        head = f"sequential on source {source}"
        if space.path:
            head += f"; in every round of {space.path.rstrip('/')} (x round weight, all rounds charged)"
        return "; ".join([head] + parts)

    def _entries(self, space: TypedScope, allocations: dict[str, Allocation], mode: Mode) -> list[LedgerEntry]:
        out: list[LedgerEntry] = []
        for rec in space.order:
            node = rec.node
            key = _key(space, rec.id)
            t = space.types[rec.id]
            ins = ", ".join(_describe(space.types[i]) for i in rec.inputs)
            sens, noise, rule = "", "", ""
            event = None
            deriv = space.derivations[rec.id]
            if isinstance(node, Mechanism):
                stat = space.types[rec.inputs[0]]
                assert isinstance(stat, StatT)
                alloc = allocations[key]
                sens = deriv
                deriv = space.derivations[rec.inputs[0]]
                noise = node.noise_text(stat, alloc.share, alloc.mode)
                event = CostEvent(key, node.kind, alloc.mode, alloc.share, alloc.cost, bool(space.path),
                                  alloc.continuous_gaussian, "basic" if self.basic else "auto")
                rule = self._rule_text(space, rec)
            elif isinstance(t, StatT):
                sens = f"l2 {text_of(t.l2)}; l1 {text_of(t.l1)}; linf {text_of(t.linf)}"
            out.append(LedgerEntry(node=key, kind=node.kind, input=ins, output=_describe(t), sensitivity=sens,
                                   derivation=deriv, noise=noise, rule=rule, reference=type(node).reference,
                                   event=event))
            if isinstance(node, Recurse):
                out.extend(self._entries(space.bodies[rec.id], allocations, mode))
        return out

    def _composition_notes(self) -> list[str]:
        notes = [f"per source, mechanisms reading the same records compose by {REF_SEQ}"]
        has_index = has_value = has_rec = False
        for sp in _spaces(self.space):
            for rec in sp.order:
                t = sp.types[rec.id]
                if isinstance(t, PiecesT):
                    has_index |= t.rule == "index"
                    has_value |= t.rule == "value"
                has_rec |= isinstance(rec.node, Recurse)
        if has_index:
            notes.append(f"index splits: a record stays in its block, so pieces take the max ({REF_PAR})")
        if has_value:
            how = ("a replaced record can leave one piece and enter another: the two largest pieces add"
                   if self.relation == "replace" else "one record is in one piece: max")
            notes.append(f"value partitions: {how} ({REF_PAR}; accounting.md 1.5)")
        if has_rec:
            notes.append("Recurse: every round up to the static bound is charged, round k at its round weight")
        return notes


_NO_GDP_TEXT = ("no exact Gaussian-DP conversion: this allocation lets exact noise sources (SecureNoise) draw the "
                "discrete Gaussian, which has the same rho-zCDP (Canonne-Kamath-Steinke 2020 Thm 4) but no proven "
                "Gaussian-DP profile; an ApproxDP budget on an all-Gaussian plan forces continuous noise and that "
                "conversion")


_NO_PLD_TEXT = ("no privacy-loss-distribution (PLD) figure for a source with: a Gaussian mechanism that may draw the "
                "discrete Gaussian (exact noise sources; no PLD is derived for the lattice release), a generic "
                "zCDP event, group privacy, or more distinct events than the PLD layer composes; that source's "
                "totals fall back to the zCDP (CKS) and other conversions (dpflow.privacy.pld)")


_NOTHING = Sequential(())


def _composition_tree(space: TypedScope, start: str, leaf: Callable[[TypedScope, NodeRecord, Fraction], Cost],
                      mult: Fraction = Fraction(1)) -> Composition:
    """The composition tree below ``start``: the structure ``_Planner.fold_cost`` composes, with each
    mechanism charged ``leaf``'s cost at its round weight (parts that charge nothing are left out, a
    one-part sequence is its part: neither changes the composed cost)."""
    def seq(parts: Sequence[Composition]) -> Composition:
        kept = tuple(p for p in parts if not (isinstance(p, Sequential) and not p.parts))
        return kept[0] if len(kept) == 1 else Sequential(kept)

    def rec_fn(sp: TypedScope, rec: NodeRecord) -> Composition:
        node = rec.node
        assert isinstance(node, Recurse)
        body = sp.bodies[rec.id]
        return seq([Rounds(_key(sp, rec.id), w, count, _composition_tree(body, _body_start(body), leaf, mult * w))
                    for w, count in sorted(_round_weights(node).items())])

    def par(parts: Sequence[Composition], rule: str) -> Composition:
        kept = tuple(p for p in parts if not (isinstance(p, Sequential) and not p.parts))
        return Parallel(rule, kept) if kept else _NOTHING

    return _fold(space, start, lambda sp, r: Charge(_key(sp, r.id), leaf(sp, r, mult)), rec_fn, seq, par)


def _gdp_valid(accounting: Accounting, mechs: Sequence[tuple[TypedScope, NodeRecord, Mechanism]]) -> bool:
    """Whether the exact Gaussian-DP conversion holds for every noise source a run may use.

    It is proven for continuous Gaussian noise only (Dong-Roth-Su 2022; Balle-Wang 2018), so either the
    accounting forces continuous noise on every ``gaussian_profile`` mechanism (it certifies through
    that profile: GDP and basic modes), or there is none; otherwise an exact source draws the discrete
    Gaussian.
    """
    return accounting.continuous_gaussian or not any(m.gaussian_profile for _, _, m in mechs)


def _spaces(space: TypedScope) -> list[TypedScope]:
    out = [space]
    for b in space.bodies.values():
        out.extend(_spaces(b))
    return out


def _describe(t: VType) -> str:
    if isinstance(t, RowsT):
        return t.describe()
    if isinstance(t, PiecesT):
        return f"{t.count} pieces by {t.rule} of ({t.rows.describe()})"
    if isinstance(t, StatT):
        return f"statistic {t.shape} of source {t.source}"
    return "released" + ("" if t.shape is None else f" {t.shape}")


def certify(plan: Plan) -> Certified:
    """Certify ``plan``: infer, allocate, compose and write the ledger (no data is read).

    >>> import dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=2), n=100)
    >>> c = certify(b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))))
    >>> c.allocations["gaussian_mech_3"].share
    Fraction(1, 2)
    """
    enabled = gc.isenabled()
    gc.disable()  # the planner allocates many small objects and no cycles: skip collection passes
    try:
        return _Planner(plan).certify()
    finally:
        if enabled:
            gc.enable()

