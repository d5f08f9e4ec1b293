"""The per-record folds: a scope's sensitive nodes as typed steps, and the generic fold over them
(reuse adds, rounds add, splits by :func:`~dpflow.planner.ledger.split_rule`: the max over pieces for one
record, and for a replaced record the worst of one piece changed within or two pieces each gaining or
losing one record, so nested value partitions charge two root-to-leaf paths).  The rule is stated once,
in the lowest planner module, because the ledger's re-walk of a composition tree uses it too."""

from __future__ import annotations

import enum
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, TypeVar

from dpflow.nodes import Mechanism, NodeRecord, Piece
from dpflow.nodes.control import Control, Input, PartitionTree, Repeat, needed
from dpflow.nodes.types import PiecesT, Relation, RowsT, SplitRule, StatT
from dpflow.planner.ledger import COST_OPS, Ops, PerRecord, of_relation, seq_pairs, split_rule, tree_rule
from dpflow.privacy import Cost
from dpflow.privacy.composition import _fsum as exact_sum
from dpflow.privacy.ratio import ONE

if TYPE_CHECKING:
    from dpflow.planner.infer import TypedScope

T = TypeVar("T")
_ZERO = Cost.zero()


class StepKind(enum.Enum):
    """How a sensitive node folds: a mechanism is a leaf, a control node charges its body by its rule (a ``Repeat``
    its rounds, a ``PartitionTree`` its paths), a split composes its pieces in parallel, rows and statistics compose
    their readers sequentially."""

    MECH = "mech"
    CONTROL = "control"
    PIECES = "pieces"
    SEQ = "seq"


_Step = tuple[StepKind, NodeRecord, tuple[str, ...], tuple[tuple[str, ...], ...], SplitRule | None]
"""Tuples of ids, not lists: a plan keeps its steps for as long as its certificate lives, and tuples of strings
are not tracked by the garbage collector (every full collection would walk a list per step)."""


def _fold_steps(space: TypedScope) -> list[_Step]:
    """The sensitive nodes of a space, children before parents, tagged with how they fold.  A split of rows of
    stability s > 1 folds its pieces sequentially: the s rows of one record are split row by row, so they may lie in
    s pieces (and a replaced record's in 2s), each of which then sees up to s rows change, which its own sensitivity
    covers; the parallel rules (one record in one piece, or one piece within, or two pieces one-sided) would not."""
    steps: list[_Step] = []
    for rec in reversed(space.order):
        kids = tuple(k.id for k in space.children.get(rec.id, ()))
        t = space.types[rec.id]
        if isinstance(rec.node, Mechanism):
            steps.append((StepKind.MECH, rec, kids, (), None))
        elif isinstance(rec.node, Control):
            steps.append((StepKind.CONTROL, rec, kids, (), None))
        elif isinstance(t, PiecesT) and t.rows.stability > 1:  # a record's rows may lie in several pieces
            steps.append((StepKind.SEQ, rec, kids, (), None))
        elif isinstance(t, PiecesT):
            groups: dict[int, list[str]] = defaultdict(list)
            for k in space.children.get(rec.id, ()):
                assert isinstance(k.node, Piece)
                groups[k.node.index].append(k.id)
            steps.append((StepKind.PIECES, rec, kids, tuple(map(tuple, groups.values())), t.rule))
        elif isinstance(t, (RowsT, StatT)):
            steps.append((StepKind.SEQ, rec, kids, (), None))
    return steps


_Program = tuple[list[_Step], dict[str, str]]


def _fold_program(steps: list[_Step]) -> _Program:
    """The steps :func:`_fold` runs, and the ids it leaves out: a one-input sequential step passes its input on
    (``seq`` of one part is that part), so it is dropped and its id stands for its input's (chains of rows
    and statistics above every mechanism fold in one step, not one per node)."""
    alias: dict[str, str] = {}
    out: list[_Step] = []
    for tag, rec, kids, groups, rule in steps:
        kids = tuple(alias.get(k, k) for k in kids)
        if tag is StepKind.SEQ and len(kids) == 1:
            alias[rec.id] = kids[0]
        else:
            out.append((tag, rec, kids, tuple(tuple(alias.get(k, k) for k in g) for g in groups), rule))
    return out, alias


def _fold(space: TypedScope, start: str, leaf: Callable[[TypedScope, NodeRecord], T],
          rec_fn: Callable[[TypedScope, NodeRecord], T], seq: Callable[[Sequence[T]], T],
          par: Callable[[Sequence[T], SplitRule], T]) -> T:
    """Walk the per-record cost structure below ``start`` (children before parents).  ``seq`` of one part
    must be that part (it is for every caller: composing one cost is the cost), so a one-input step passes
    its input on without calling ``seq`` (:func:`_fold_program`)."""
    steps, alias = space.program
    acc: dict[str, T] = {}
    for tag, rec, kids, groups, rule in steps:
        if tag is StepKind.SEQ:
            acc[rec.id] = seq([acc[k] for k in kids])
        elif tag is StepKind.MECH:
            acc[rec.id] = leaf(space, rec)
        elif tag is StepKind.CONTROL:
            acc[rec.id] = rec_fn(space, rec)
        else:
            assert rule is not None  # PIECES steps carry their split's rule
            acc[rec.id] = par([seq([acc[k] for k in g]) for g in groups], rule)
    return acc[alias.get(start, start)]


def _fold_pairs(space: TypedScope, start: str, leaf: Callable[[TypedScope, NodeRecord], PerRecord[T]],
                rec_fn: Callable[[TypedScope, NodeRecord], PerRecord[T]], ops: Ops[T]) -> PerRecord[T]:
    """The per-record costs below ``start``: a mechanism's pair is ``leaf``'s (its cost when a record only enters
    or leaves its rows, and its full cost), uses of the same rows add, splits follow
    :func:`~dpflow.planner.ledger.split_rule`."""
    return _fold(space, start, leaf, rec_fn, lambda ps: seq_pairs(ps, ops),
                 lambda ps, rule: split_rule(ps, rule, ops))


def _top_two_frac(xs: Sequence[Fraction]) -> Fraction:
    return sum(sorted(xs, reverse=True)[:2], Fraction(0))


def _max_frac(xs: Sequence[Fraction]) -> Fraction:
    return max(xs, default=Fraction(0))


def _sum_frac(xs: Sequence[Fraction]) -> Fraction:
    return exact_sum(xs)


def _body_start(body: TypedScope) -> str:
    return next(r.id for r in body.order if isinstance(r.node, Input))


def _round_weights(node: Repeat) -> Counter[Fraction]:
    return Counter(Fraction(node.weight_of_round(k)) for k in range(node.times))


def tree_cones(node: PartitionTree) -> tuple[frozenset[str], frozenset[str]]:
    """The body nodes a splitting piece evaluates and those a leaf evaluates (``control.needed``): what the split and
    leaf costs of :func:`~dpflow.planner.ledger.tree_rule` charge."""
    recs = node.body.records
    return needed(recs, node.split_heads()), needed(recs, node.leaf_heads())


def _masked(fn: Callable[[TypedScope, NodeRecord], T], mask: frozenset[str] | None,
            zero: T) -> Callable[[TypedScope, NodeRecord], T]:
    """``fn``, charging nothing for the nodes outside ``mask`` (``None``: every node charged)."""
    if mask is None:
        return fn
    return lambda sp, rec: fn(sp, rec) if rec.id in mask else zero


Factor = Callable[["TypedScope", NodeRecord], Fraction]
"""A mechanism's one-sided factor: its cost when a record only enters or leaves its rows is at most this fraction
of its full cost (``privacy.ratio.share_at_ratio`` of a unit share; ``privacy.ratio.ONE`` when charged in full)."""


def fold_frac(space: TypedScope, relation: Relation, start: str, leaf: Callable[[TypedScope, NodeRecord], Fraction],
              per_round: bool, factor: Factor | None = None) -> Fraction:
    """Fold fractions (shares, weights) below ``start``; a loop multiplies by the sum of its round
    weights (``per_round``) or by its number of rounds, a partition tree composes its paths (``tree_rule``).
    With ``factor``, a mechanism's one-sided value is its
    value times its factor (the folds that allocate the budget: they bound the one-sided costs)."""
    return of_relation(relation, _fold_frac(space, start, leaf, per_round, factor))


_FRAC_OPS: Ops[Fraction] = Ops(_sum_frac, _max_frac, _top_two_frac)


_FRAC_ZERO = PerRecord(Fraction(0), Fraction(0))


def _fold_frac(space: TypedScope, start: str, leaf: Callable[[TypedScope, NodeRecord], Fraction],
               per_round: bool, factor: Factor | None, mask: frozenset[str] | None = None) -> PerRecord[Fraction]:
    def rec_fn(sp: TypedScope, rec: NodeRecord) -> PerRecord[Fraction]:
        node = rec.node
        body = sp.bodies[rec.id]
        if isinstance(node, PartitionTree):
            split, leaves = (_fold_frac(body, _body_start(body), leaf, per_round, factor, m) for m in tree_cones(node))
            return tree_rule(split, leaves, node.depth(), len(node.parts), _FRAC_OPS)
        assert isinstance(node, Repeat)
        inner = _fold_frac(body, _body_start(body), leaf, per_round, factor)
        mult = sum(_round_weights(node).elements(), Fraction(0)) if per_round else Fraction(node.times)
        return PerRecord(inner.one * mult, inner.both * mult)

    def leaf2(sp: TypedScope, rec: NodeRecord) -> PerRecord[Fraction]:
        x = leaf(sp, rec)
        f = ONE if factor is None else factor(sp, rec)
        return PerRecord(x, x) if f is ONE else PerRecord(x * f, x)

    return _fold_pairs(space, start, _masked(leaf2, mask, _FRAC_ZERO), _masked(rec_fn, mask, _FRAC_ZERO), _FRAC_OPS)


CostLeaf = Callable[["TypedScope", NodeRecord, Fraction], PerRecord[Cost]]
"""A mechanism's certified costs at a round weight: when a record only enters or leaves its rows, and in full."""


def fold_cost(space: TypedScope, relation: Relation, start: str, leaf: CostLeaf, mult: Fraction = Fraction(1)) -> Cost:
    """Fold the certified costs below ``start``, each mechanism charged ``leaf``'s costs at round weight ``mult``."""
    return of_relation(relation, _fold_cost(space, start, leaf, mult))


_COST_ZERO = PerRecord(_ZERO, _ZERO)


def _fold_cost(space: TypedScope, start: str, leaf: CostLeaf, mult: Fraction,
               mask: frozenset[str] | None = None) -> PerRecord[Cost]:
    def rec_fn(sp: TypedScope, rec: NodeRecord) -> PerRecord[Cost]:
        node = rec.node
        body = sp.bodies[rec.id]
        if isinstance(node, PartitionTree):
            split, leaves = (_fold_cost(body, _body_start(body), leaf, mult, m) for m in tree_cones(node))
            return tree_rule(split, leaves, node.depth(), len(node.parts), COST_OPS)
        assert isinstance(node, Repeat)
        one, both = _ZERO, _ZERO
        for w, count in sorted(_round_weights(node).items()):
            inner = _fold_cost(body, _body_start(body), leaf, mult * w)
            one, both = one.then(inner.one.scaled(count)), both.then(inner.both.scaled(count))
        return PerRecord(one, both)

    return _fold_pairs(space, start, _masked(lambda sp, r: leaf(sp, r, mult), mask, _COST_ZERO),
                       _masked(rec_fn, mask, _COST_ZERO), COST_OPS)
