"""Type inference: each scope's nodes in topological order with their static types (domain, public
size, sensitivity), loop bodies included, and the helpers that walk the typed scopes."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import attrs

from dpflow.domains import RowCount
from dpflow.errors import PlanError, PlanTypeError
from dpflow.handles import Ref
from dpflow.nodes import Mechanism, Node, NodeRecord, Source, SubPlan
from dpflow.nodes.control import Control, Input, Round, State
from dpflow.nodes.types import Inferred, Relation, ReleasedT, RowsT, StatT, VType
from dpflow.plan.graph import topological
from dpflow.planner.fold import _fold_program, _fold_steps, _Program, _Step


@attrs.frozen
class _Ctx:
    relation: Relation
    node_id: str
    types: dict[str, VType]
    local_id: str = ""
    bodies: dict[str, TypedScope] | None = None

    def type_of(self, ref: Ref) -> VType:
        return self.types[ref.id]

    def infer_body(self, body: SubPlan, bindings: Mapping[type, VType]) -> Mapping[str, VType]:
        """Type a control node's body (its node path the prefix of the body's paths) and keep it for the folds."""
        assert self.bodies is not None  # a control node is inferred in its scope
        scope = _infer_space(body.records, self.relation, f"{self.node_id}/", dict(bindings))
        self.bodies[self.local_id] = scope
        return scope.types

    def row_count(self) -> RowCount:
        """Scope-local, as the interpreter evaluates a bound from its own scope's values."""
        return RowCount(self.local_id)


@attrs.frozen(eq=False)
class TypedScope:
    """One certified namespace, the top-level plan or one control body (``Repeat``, ``PartitionTree``): its nodes in
    topological order with their static types and ledger derivations, the nested bodies by control node id, and the
    sensitive-data tree (``children``/``parents``) the planner folds.  ``path`` prefixes node ids to
    node paths (``""`` at the top level, ``"repeat_4/"`` in that loop's body).

    >>> import dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=2), n=100)
    >>> scope = dp.certify(b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))).space
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
    reads: dict[str, tuple[str, ...]] = attrs.field(init=False)
    """The ids each node reads: its input slots, then the released values its parameters refer to."""
    steps: list[_Step] = attrs.field(init=False)
    """The sensitive nodes, children before parents, tagged with how they fold."""
    program: _Program = attrs.field(init=False)
    """The steps a fold runs (one-input sequential steps passed on): see ``fold._fold_program``."""

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "parents", {c.id: p for p, cs in self.children.items() for c in cs})
        object.__setattr__(self, "records", {r.id: r for r in self.order})
        object.__setattr__(self, "reads", {r.id: (*r.inputs, *(x.id for x in r.node.refs())) for r in self.order})
        object.__setattr__(self, "steps", _fold_steps(self))
        object.__setattr__(self, "program", _fold_program(self.steps))


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
        ctx = _Ctx(relation, path + rec.id, types, rec.id, bodies)
        node = rec.node
        ins = [types[i] for i in rec.inputs]
        if isinstance(node, (Input, State, Round)):
            if bindings is None or type(node) not in bindings:
                raise PlanTypeError(ctx.node_id, f"{node.kind} stand-in outside a control body",
                                    "build loops with dpflow.nodes.repeat, trees with dpflow.nodes.partition_tree")
            res = Inferred(_bound_here(bindings[type(node)], ctx), f"{node.kind} stand-in")
        elif isinstance(node, Control):
            res = node.infer(ins, ctx)
        else:
            res = node.infer(ins, ctx)
            if isinstance(res.out, StatT) and ins and isinstance(ins[0], RowsT) and ins[0].changes == _BOTH:
                res = attrs.evolve(res, out=_with_one_sided(node, ins, ctx, res.out))
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


_BOTH = frozenset({"replace", "add_remove"})
_ADD_REMOVE = frozenset({"add_remove"})


def _with_one_sided(node: Node, ins: list[VType], ctx: _Ctx, stat: StatT) -> StatT:
    """``stat`` with its one-sided sensitivities (:attr:`StatT.one_sided`) when they are less: the same query
    inferred again on the same rows with add/remove changes only.  That is the definition: the rows of a value
    piece under replace-one change either by a replacement within them or by one record entering or leaving (the
    record moved to or from another piece), and the query's own rule for add/remove rows bounds the latter.  A
    query that refuses add/remove rows keeps the relation's sensitivity (charged in full)."""
    rows = ins[0]
    assert isinstance(rows, RowsT)
    try:
        alt = node.infer([attrs.evolve(rows, changes=_ADD_REMOVE), *ins[1:]], ctx).out
    except PlanError:
        return stat
    if not isinstance(alt, StatT) or (alt.l1, alt.l2, alt.linf) == (stat.l1, stat.l2, stat.linf):
        return stat
    return attrs.evolve(stat, one_sided=(alt.l1, alt.l2, alt.linf))


def _bound_here(t: VType, ctx: _Ctx) -> VType:
    """A stand-in's type in the body: an outer row count is resolved to the stand-in's own (the loop binds
    the stand-in to the outer rows, so it counts the same rows in the body's scope)."""
    if isinstance(t, RowsT) and t.size.public and t.size.known is None:
        return attrs.evolve(t, size=attrs.evolve(t.size, ref=ctx.row_count()))
    return t


def _mechanisms(space: TypedScope) -> list[tuple[TypedScope, NodeRecord, Mechanism]]:
    out: list[tuple[TypedScope, NodeRecord, Mechanism]] = []
    for rec in space.order:
        if isinstance(rec.node, Mechanism):
            out.append((space, rec, rec.node))
        elif isinstance(rec.node, Control):
            out.extend(_mechanisms(space.bodies[rec.id]))
    return out


def _source_of(space: TypedScope, rec: NodeRecord) -> str:
    t = space.types[rec.inputs[0]]
    assert isinstance(t, StatT)
    return t.source


def _source_name(rec: NodeRecord) -> str:
    assert isinstance(rec.node, Source)
    return rec.node.name


def _mech(rec: NodeRecord) -> Mechanism:
    assert isinstance(rec.node, Mechanism)
    return rec.node


def _spaces(space: TypedScope) -> list[TypedScope]:
    out = [space]
    for b in space.bodies.values():
        out.extend(_spaces(b))
    return out
