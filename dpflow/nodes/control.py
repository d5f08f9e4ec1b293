"""Control: nodes whose body is a sub-plan, traced once and certified once, with a static bound on how often it runs.

* ``Repeat``: a fixed number of rounds on the same rows, threading a released state (round k's mechanisms get
  ``round_weights[k]`` times their weight); the planner charges every round.
* ``PartitionTree``: recursion over the pieces of value partitions, at most ``max_depth`` deep and ``max_parts``
  parts; the planner charges one record's root-to-leaf path (two under replace-one) from the body's certificate.

A control node types its body through ``InferContext.infer_body`` and runs it through ``EvalContext.run_body``;
the planner folds its per-record cost (``planner.fold``, the rules of ``planner.ledger``: ``Rounds``,
``tree_rule``).  The stand-ins ``Input``, ``State`` and ``Round`` are what a body is traced with.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

import attrs

from dpflow.domains import integral
from dpflow.errors import PlanTypeError
from dpflow.handles import Released, Rows, Sensitive, Value
from dpflow.nodes.base import EvalContext, InferContext, Node, NodeRecord, SubPlan, released_scalar
from dpflow.nodes.transforms import Piece
from dpflow.nodes.types import Inferred, PiecesT, ReleasedT, RowsT, Size, SplitRule, VType


@attrs.frozen(kw_only=True)
class Input(Node):
    """Stand-in for the sensitive rows a control body works on (a ``Repeat``'s rows, a ``PartitionTree``'s piece)."""

    kind: ClassVar[str] = "Input"


@attrs.frozen(kw_only=True)
class State(Node):
    """Stand-in for the released state a control body receives."""

    kind: ClassVar[str] = "State"


@attrs.frozen(kw_only=True)
class Round(Node):
    """Stand-in for the public round index (0, 1, ...) of a ``Repeat`` body, or a ``PartitionTree`` piece's depth."""

    kind: ClassVar[str] = "Round"


def _weights(x: Any) -> tuple[float, ...] | None:
    if x is None:
        return None
    w = tuple(float(v) for v in x)
    if any(not (v > 0 and v < float("inf")) for v in w):
        raise ValueError("round weights must be finite and positive")
    return w



@attrs.frozen(kw_only=True)
class Control(Node):
    """A node with a body: a sub-plan traced once (with the stand-ins ``Input``, ``State``, ``Round``) and certified
    once.  The planner types it through ``InferContext.infer_body`` and folds its per-record cost from the body's
    certificate and the node's static bound; the interpreter runs it through ``EvalContext.run_body``."""

    body: SubPlan


@attrs.frozen(kw_only=True)
class Repeat(Control):
    """Run ``body`` ``times`` times on the same rows, threading a released state.

    Built with :func:`repeat`.  Privacy: sequential composition over all rounds (Bun-Steinke 2016 Lemma 1.7),
    charged for the static bound (``planner.ledger.Rounds``); round k's mechanisms get ``round_weights[k]``
    times their weight.  Plans of schema 1 and 2 that name the kind ``"Recurse"`` are read as this node
    (``plan.serialize.KIND_ALIASES``).
    """

    kind: ClassVar[str] = "Repeat"
    reference: ClassVar[str] = "sequential composition over a static number of rounds (Bun-Steinke 2016 Lemma 1.7)"
    times: int = attrs.field(converter=integral)
    round_weights: tuple[float, ...] | None = attrs.field(default=None, converter=_weights)

    def __attrs_post_init__(self) -> None:
        if self.times < 1:
            raise ValueError(f"Repeat needs times >= 1, got {self.times}")
        if self.round_weights is not None and len(self.round_weights) != self.times:
            raise ValueError(f"round_weights has {len(self.round_weights)} entries for {self.times} rounds")

    def weight_of_round(self, k: int) -> float:
        """Budget multiplier of round k."""
        return 1.0 if self.round_weights is None else self.round_weights[k]

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        if len(ins) != 2 or not isinstance(ins[0], RowsT) or not isinstance(ins[1], ReleasedT):
            raise PlanTypeError(ctx.node_id, "Repeat takes sensitive rows and a released initial state",
                                "call dpflow.nodes.repeat(rows, init, body, times)")
        types = ctx.infer_body(self.body, {Input: ins[0], State: ins[1], Round: ReleasedT(())})
        out = _released_out(types, self.body.output, ctx, "the body must return a released value")
        _same_fields(out, ins[1], ctx, "the body returns a state")  # each round's state is the last round's output
        return Inferred(ReleasedT(out.shape, fields=out.fields),
                        f"{self.times} rounds of a {len(self.body.records)}-node body")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        state = ins[1]
        for k in range(self.times):
            bind: dict[type, Any] = {Input: ins[0], State: state, Round: float(k)}
            state = ctx.run_body(bind, (self.body.output,), round_index=k)[self.body.output]
        return state


def _released_out(types: Any, nid: str, ctx: InferContext, problem: str) -> ReleasedT:
    out = types.get(nid)
    if not isinstance(out, ReleasedT):
        raise PlanTypeError(ctx.node_id, problem, "return a mechanism's output or its post-processing")
    return out


def _same_fields(out: ReleasedT, init: ReleasedT, ctx: InferContext, what: str) -> None:
    if out.fields != init.fields:
        raise PlanTypeError(ctx.node_id, f"{what} with parts {_parts(out)} but the initial state has parts "
                            f"{_parts(init)}", "pack the initial state and the body's states with the same "
                            "Pack(names=...)")


def _parts(t: ReleasedT) -> str:
    return "unnamed" if t.fields is None else str(list(t.fields))


Body = Callable[[Sensitive[Rows], Released[Any], Released[Any]], Released[Any]]


def _trace(data: Sensitive[Rows], body: Callable[..., Any]) -> tuple[Any, Any]:
    """Trace ``body(rows, state, round)`` on a child builder of ``data``'s: the builder and what the body returned."""
    child = data.builder.child()
    rows: Sensitive[Rows] = Sensitive(child.add(Input(), ()), child)
    state: Released[Any] = Released(child.add(State(), ()), child)
    k: Released[Any] = Released(child.add(Round(), ()), child)
    return child, body(rows, state, k)


def _own(child: Any, h: Any, what: str) -> str:
    if not isinstance(h, (Released, Sensitive)):
        raise PlanTypeError("body", f"{what} is a {type(h).__name__}, not a handle",
                            "build it from the body's arguments")
    if h.builder is not child:
        raise PlanTypeError(h.id, "the body returned a handle from outside its sub-plan",
                            "pass outer values in through the state")
    return h.id


def repeat(
    data: Sensitive[Rows],
    init: Released[Any],
    body: Body,
    times: int,
    round_weights: Sequence[float] | None = None,
) -> Released[Value]:
    """Trace ``body(rows, state, round)`` into a sub-plan and run it ``times`` times.

    The body may only use its three arguments (and public constants it creates
    with ``rows.builder.public``); it returns the next state.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=2), n=100)
    >>> def step(rows, state, k):
    ...     return dp.nodes.GaussianMech()(dp.nodes.Mean()(dp.nodes.Clip(radius=1.0)(rows)))
    >>> last = dp.nodes.repeat(X, b.public([0.0, 0.0]), step, times=3)
    """
    child, out = _trace(data, body)
    if not isinstance(out, Released):
        raise PlanTypeError("repeat", "the body must return a released value (the next state)",
                            "return the output of a mechanism or of post-processing")
    node = Repeat(times=times, body=child.freeze(_own(child, out, "the body's result")), round_weights=round_weights)
    return Released(data.builder.add(node, (data.id, init.id)), data.builder)


@attrs.frozen
class TreeStep:
    """What a :func:`partition_tree` body returns for its piece: ``split``, a released value (the piece splits when it
    is finite and positive: a found radius, a 0/1 flag), ``parts``, the pieces of one value partition of the body's
    rows (the children's rows), ``states``, the released state of each child, and ``leaf``, the piece's result when
    it is a leaf (``size``: optionally a released size of the piece, shown in the realised tree)."""

    split: Released[Any]
    parts: Sequence[Sensitive[Rows]]
    states: Sequence[Released[Any]]
    leaf: Released[Any]
    size: Released[Any] | None = None


def _ids(x: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in x)


def needed(records: Iterable[NodeRecord], wanted: Iterable[str]) -> frozenset[str]:
    """The ids of ``records`` that computing ``wanted`` reads (inputs and released parameters, transitively): what a
    run of a control body evaluates for ``wanted``, and what the planner charges for it.

    >>> sorted(needed([NodeRecord("a", Input()), NodeRecord("b", State()), NodeRecord("c", Round(), ("a",))], ["c"]))
    ['a', 'c']
    """
    by_id = {r.id: r for r in records}
    out: set[str] = set()
    todo = [w for w in wanted if w in by_id]
    while todo:
        nid = todo.pop()
        if nid in out:
            continue
        out.add(nid)
        rec = by_id[nid]
        todo.extend(d for d in (*rec.inputs, *(r.id for r in rec.node.refs())) if d in by_id)
    return frozenset(out)


@attrs.frozen(kw_only=True)
class PartitionTree(Control):
    """Recursion over pieces: the body runs on a piece (the tree's rows at the root) and either stops, the piece's
    result being its ``leaf``, or splits the piece by a value partition into parts, each of which recurses with its
    released state; at most ``max_depth`` deep and ``max_parts`` parts (breadth first: a piece splits only while
    the parts, counted from released decisions, stay within ``max_parts``).  Built with :func:`partition_tree`; the
    output is the tuple of the leaves' results, breadth first.  The body is typed and certified once.

    **Cost rule** (``planner.ledger.tree_rule``, applied by ``planner.fold``).  Let ``D`` be the depth bound
    (:meth:`depth`), ``p`` the parts per split, ``S`` the per-record cost pair (``one``: a record enters or leaves
    the piece; ``both``: a record of the piece is replaced) of what a splitting piece evaluates (the body's nodes
    that the split decision, the parts and their states read: :func:`needed`), ``L`` that of the leaf's result.
    The tree is charged ``T_0`` where ``T_D = L`` and ``T_d = seq(S, most(L, split_rule([T_(d+1)] * p, VALUE)))``
    (``tree_rule`` composes its closed form): ``T_0.one = D S.one + L.one`` and, under replace-one, ``T_0.both`` is
    the largest of ``D S.both + L.both`` and ``a S.both + 2 ((D - a) S.one + L.one)`` over ``a = 1..D`` (the root
    holds both records).  It is the cost ``split_rule`` gives the complete p-ary tree of depth ``D`` (what RPGMP's
    plan unrolled before this node: 2^D - 1 copies of the body), computed in O(D) compositions.  Derivation:

    1. *One certificate for every piece.*  The body is typed on a value piece of the tree's rows (``Piece``'s type:
       private size at most the rows' public bound, a record may enter or leave; a norm bound stated by released
       values outside the body is dropped: the body bounds its rows itself, e.g. by ``Clip``).  A part of a value
       piece has that type again, and the root's rows are the one piece of the trivial partition, so the body's
       certified costs ``S`` and ``L`` bound every run on every piece (rows of stability > 1 are refused: a
       record's rows could then follow several paths).
    2. *One path per record* (``planner/fold.py``, ``ledger.split_rule``; McSherry 2009 Thm 4).  Fix neighbours
       and a transcript of released values: the tree's shape, every partition and state are functions of it and of
       public parameters, and a value partition puts a record in one part, so the record lies in the pieces of one
       root-to-leaf path; a run on a piece without the changed record has the same output law on both neighbours.
       On the path, each piece above the leaf ran ``S`` once, the leaf at most ``S`` (when the body decided to
       stop) then ``L``, or ``L`` alone (stopped by the bounds), and the path has at most ``D`` pieces above the
       leaf.  Padding the path with runs of constant output to the fixed sequence ``S, ..., S, L`` (``D`` times
       ``S``), adaptive sequential composition with fixed costs (``privacy/composition.py``: ``Cost.sequential``,
       valid for adaptively chosen mechanisms: Bun-Steinke 2016 Lemma 2.3, Dong-Roth-Su 2022 Thm 3.2, the PLD of
       dominating pairs) gives ``D S.one + L.one`` for a record added or removed.
    3. *Two paths under replace-one.*  A record x replaced by x' follows the same pieces down to the piece at
       depth ``a`` where the partition sends them to different parts; those ``a`` runs of ``S`` see a replacement
       (``S.both``), then each path goes on alone and its pieces only gain x' or lose x: the one-sided costs of
       value pieces (``privacy/ratio.py``, ``Mechanism.one_sided_cost``: a record entering or leaving a piece),
       ``(D - a) S.one + L.one`` on each path; if they never part, ``D S.both + L.both``.  The recurrence is this
       maximum: ``split_rule``'s ``both = max(max_i both_i, top_two(one))`` adds two children's ``one`` where the
       paths part and keeps one child's ``both`` where they do not.
    4. *Depth bound.*  A split turns one part into ``p``, the part count never falls, and a piece splits only if the
       count stays within ``max_parts``; a piece at depth ``k`` has ``k`` splits above it, so
       ``1 + k (p - 1) <= max_parts``: ``D = min(max_depth, (max_parts - 1) // (p - 1))``.

    The tests compose every realised tree of small cases by brute force (``tests/planner/test_partition_tree.py``).
    """

    kind: ClassVar[str] = "PartitionTree"
    reference: ClassVar[str] = ("per-record composition over a depth-bounded tree of value partitions: one "
                                "root-to-leaf path per record, two under replace-one (McSherry 2009 Thm 4; "
                                "Bun-Steinke 2016 Lemma 2.3)")
    max_depth: int = attrs.field(converter=integral)
    max_parts: int | None = attrs.field(default=None, converter=attrs.converters.optional(integral))
    split: str
    parts: tuple[str, ...] = attrs.field(converter=_ids)
    states: tuple[str, ...] = attrs.field(converter=_ids)
    size: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.max_depth < 0:
            raise ValueError(f"PartitionTree needs max_depth >= 0, got {self.max_depth}")
        if self.max_parts is not None and self.max_parts < 1:
            raise ValueError(f"PartitionTree needs max_parts >= 1, got {self.max_parts}")
        if not self.parts or len(self.parts) != len(self.states):
            raise ValueError(f"PartitionTree needs one state per part, got {len(self.parts)} parts and "
                             f"{len(self.states)} states")

    def depth(self) -> int:
        """The static depth bound ``D``: ``max_depth``, and at most ``(max_parts - 1) // (p - 1)`` splits."""
        p = len(self.parts)
        if self.max_parts is None or p == 1:
            return self.max_depth
        return min(self.max_depth, (self.max_parts - 1) // (p - 1))

    def split_heads(self) -> tuple[str, ...]:
        """What a splitting piece evaluates: the decision, the parts and their states."""
        return (self.split, *self.parts, *self.states)

    def leaf_heads(self) -> tuple[str, ...]:
        """What a leaf evaluates: its result (and its released size)."""
        return (self.body.output,) if self.size is None else (self.body.output, self.size)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        if len(ins) != 2 or not isinstance(ins[0], RowsT) or not isinstance(ins[1], ReleasedT):
            raise PlanTypeError(ctx.node_id, "PartitionTree takes sensitive rows and a released initial state",
                                "call dpflow.nodes.partition_tree(rows, init, body, max_depth)")
        rows = ins[0]
        if rows.stability != 1:
            raise PlanTypeError(ctx.node_id, f"PartitionTree on rows of stability {rows.stability}: a record's rows "
                                "could follow several paths", "partition the rows before any map that makes "
                                "several rows of one record")
        at_most = rows.size.sym() if rows.size.public else rows.size.at_most
        dom = rows.domain
        if dom.center is not None or (dom.l2_bound is not None and dom.l2_bound.refs()):
            dom = attrs.evolve(dom, l2_bound=None, center=None)  # a bound by outer released values: not in the body
        piece = attrs.evolve(rows, domain=dom, changes=rows.changes | {"add_remove"}, size=Size(
            public=False, known=None, ref=rows.size.ref, at_most=at_most if at_most and not at_most.refs() else None))
        types = ctx.infer_body(self.body, {Input: piece, State: ins[1], Round: ReleasedT(())})
        _released_out(types, self.body.output, ctx, "the body's leaf result must be a released value")
        _released_out(types, self.split, ctx, "the body's split decision must be a released value")
        if self.size is not None:
            _released_out(types, self.size, ctx, "the body's part size must be a released value")
        for s in self.states:
            _same_fields(_released_out(types, s, ctx, "a part's state must be a released value"), ins[1], ctx,
                         f"the body gives part state {s}")
        self._check_parts(types, ctx)
        d = self.depth()
        bound = f"at most {self.max_parts} parts, " if self.max_parts is not None else ""
        return Inferred(ReleasedT(None), f"tree of {len(self.parts)}-way value partitions, {bound}depth <= {d} "
                        f"(max_depth={self.max_depth}): per record {d} split runs and one leaf on one path, two "
                        f"paths under replace-one, from one {len(self.body.records)}-node body")

    def _check_parts(self, types: Any, ctx: InferContext) -> None:
        """The parts are distinct pieces of one value partition of the body's rows, read by nothing in the body."""
        recs = {r.id: r for r in self.body.records}
        inp = next(r.id for r in self.body.records if isinstance(r.node, Input))
        splits = {recs[p].inputs[0] if p in recs and isinstance(recs[p].node, Piece) else None for p in self.parts}
        sid = next(iter(splits))
        t = types.get(sid) if sid is not None else None
        if sid is None or len(splits) != 1 or len(set(self.parts)) != len(self.parts) or recs[sid].inputs != (inp,) \
                or not isinstance(t, PiecesT) or t.rule is not SplitRule.VALUE:
            raise PlanTypeError(ctx.node_id, "the body's parts are not distinct pieces of one value partition of "
                                "its rows", "return N.split(rows, rule) of the body's own rows (a value partition "
                                "such as PartitionByBall)")
        for r in self.body.records:
            if sid in r.inputs and not isinstance(r.node, Piece) or set(self.parts) & set(r.inputs):
                raise PlanTypeError(ctx.node_id, f"the body reads its split or a part ({r.id}): the parts are the "
                                    "children's rows", "read a part in the next level's body run, not in this one")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        d, p = self.depth(), len(self.parts)
        work: deque[tuple[Any, Any, int, str]] = deque([(ins[0], ins[1], 0, "")])
        count, leaves, tree = 1, [], []
        while work:
            rows, state, depth, at = work.popleft()
            bind: dict[type, Any] = {Input: rows, State: state, Round: float(depth)}
            env = None
            if depth < d and (self.max_parts is None or count + p - 1 <= self.max_parts):
                env = ctx.run_body(bind, self.split_heads())
                if _splits(env[self.split]):
                    count += p - 1
                    work.extend((env[q], env[s], depth + 1, f"{at}{i}") for i, (q, s) in
                                enumerate(zip(self.parts, self.states, strict=True)))
                    tree.append({"part": at or "root", "depth": depth, "split": p})
                    continue
            env = ctx.run_body(bind, self.leaf_heads(), env)
            leaves.append(env[self.body.output])
            size = None if self.size is None else released_scalar(env[self.size])
            tree.append({"part": at or "root", "depth": depth, "leaf": len(leaves) - 1, "size": size})
        ctx.record("tree", tree)
        return tuple(leaves)


def _splits(decision: Any) -> bool:
    """The released split decision, read as a scalar (its first entry: ``released_scalar``): split when it is a
    finite positive number (NaN, "not found", 0, a negative number, what is not a number: a leaf)."""
    try:
        x = released_scalar(decision)
    except (TypeError, ValueError):
        return False
    return math.isfinite(x) and x > 0


TreeBody = Callable[[Sensitive[Rows], Released[Any], Released[Any]], TreeStep]


def partition_tree(data: Sensitive[Rows], init: Released[Any], body: TreeBody, max_depth: int,
                   max_parts: int | None = None) -> Released[Value]:
    """Trace ``body(rows, state, depth)`` once into a :class:`PartitionTree`: the body returns a :class:`TreeStep`
    (the split decision, the parts of a value partition of ``rows`` with their states, and the leaf result).

    >>> import dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    >>> X = b.source("X", dp.Vectors(d=1), n=100)
    >>> def body(rows, state, depth):
    ...     inside, outside = N.split(rows, N.PartitionByBall(center=state, radius=rows.builder.public(1.0)))
    ...     cnt = N.LaplaceMech()(N.Count()(rows))
    ...     return N.TreeStep(split=cnt, parts=[inside, outside], states=[state, state], leaf=cnt)
    >>> leaves = N.partition_tree(X, b.public([0.0]), body, max_depth=3, max_parts=4)
    """
    child, step = _trace(data, body)
    if not isinstance(step, TreeStep):
        raise PlanTypeError("partition_tree", f"the body returned a {type(step).__name__}, not a TreeStep",
                            "return N.TreeStep(split=..., parts=..., states=..., leaf=...)")
    leaf = _own(child, step.leaf, "the leaf result")
    node = PartitionTree(
        body=child.freeze(leaf), max_depth=max_depth, max_parts=max_parts, split=_own(child, step.split, "split"),
        parts=[_own(child, q, "a part") for q in step.parts], states=[_own(child, s, "a state") for s in step.states],
        size=None if step.size is None else _own(child, step.size, "the size"))
    return Released(data.builder.add(node, (data.id, init.id)), data.builder)
