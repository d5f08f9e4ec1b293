"""The rules of ``dpflow/nodes/control.py``'s ``PartitionTree`` (issue 31): the exact constants of its cost rule
(``ledger.tree_rule``), its depth bound, its split decision, and the plans it refuses before data.  The rule against
a brute-force composition of every realised tree: ``tests/planner/test_partition_tree.py``."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.errors import PlanError, PlanTypeError
from dpflow.nodes.control import PartitionTree, _splits
from dpflow.planner.ledger import COST_OPS, Ops, PerRecord, tree_rule
from dpflow.privacy import Cost

F = Fraction
FRAC = Ops(sum, max, lambda xs: sum(sorted(xs)[-2:]))


@pytest.mark.parametrize(("depth", "parts", "expected"), [
    (0, 2, (5, 7)),
    (1, 2, (6, 13)),   # one: S + L; both: S.both + max(L.both, 2 L.one) = 3 + 10
    (2, 2, (7, 16)),   # both: max(2*3 + 7, 3 + 2*(1 + 5), 2*3 + 2*5) = 16
    (3, 2, (8, 19)),
    (2, 3, (7, 16)),   # three parts: a replaced record still changes at most two
    (2, 1, (7, 13)),   # one part: never two paths, D S.both + L.both
])
def test_tree_rule_constants(depth: int, parts: int, expected: tuple[int, int]) -> None:
    out = tree_rule(PerRecord(F(1), F(3)), PerRecord(F(5), F(7)), depth, parts, FRAC)
    assert (out.one, out.both) == expected


def test_tree_rule_closed_form() -> None:
    """``one = D S.one + L.one``; ``both = max(D S.both + L.both, max_{a=1..D} a S.both + 2((D-a) S.one + L.one))``."""
    for s1, s2, l1, l2 in [(1, 3, 5, 7), (2, 2, 1, 9), (1, 4, 0, 0), (3, 3, 3, 3)]:
        for d in range(6):
            out = tree_rule(PerRecord(F(s1), F(s2)), PerRecord(F(l1), F(l2)), d, 2, FRAC)
            assert out.one == d * s1 + l1
            assert out.both == max([d * s2 + l2] + [a * s2 + 2 * ((d - a) * s1 + l1) for a in range(1, d + 1)])


def test_tree_rule_on_costs_adds_rho_along_paths() -> None:
    s, leaf = PerRecord(Cost.zcdp(F(1, 4)), Cost.zcdp(F(1))), PerRecord(Cost.zcdp(F(1, 2)), Cost.zcdp(F(2)))
    out = tree_rule(s, leaf, 2, 2, COST_OPS)
    # one: 2/4 + 1/2; both: max(2 * 1 + 2, 1 + 2 (1/4 + 1/2), 2 * 1 + 2 * 1/2) = 4
    assert (out.one.rho, out.both.rho) == (F(1), F(4))


def _body(rows: Any, state: Any, depth: Any) -> N.TreeStep:
    inside, outside = N.split(rows, N.PartitionByBall(center=state, radius=rows.builder.public(1.0)))
    cnt = N.LaplaceMech()(N.Count()(rows))
    return N.TreeStep(split=cnt, parts=[inside, outside], states=[state, state], leaf=cnt)


def _tree(body: Any = _body, max_depth: int = 3, max_parts: int | None = None, rows: Any = None) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=1 if rows is None else 2), n=10)
    return b.build(t=N.partition_tree(X if rows is None else rows(X), b.public([0.0]), body, max_depth, max_parts))


def test_depth_bound() -> None:
    node = PartitionTree(body=None, max_depth=7, max_parts=4, split="s",  # type: ignore[arg-type]
                         parts=["a", "b"], states=["c", "d"])
    assert node.depth() == 3
    assert attrs_evolve(node, max_parts=None).depth() == 7
    assert attrs_evolve(node, max_parts=1).depth() == 0
    three = attrs_evolve(node, parts=("a", "b", "e"), states=("c", "d", "f"), max_parts=6)
    assert three.depth() == 2  # (6 - 1) // 2
    single = attrs_evolve(node, parts=("a",), states=("c",), max_parts=2)
    assert single.depth() == 7  # one part: the count never grows
    for bad, msg in [({"max_depth": -1}, "max_depth >= 0"), ({"max_parts": 0}, "max_parts >= 1"),
                     ({"states": ("c",)}, "one state per part")]:
        with pytest.raises(ValueError, match=msg):
            attrs_evolve(node, **bad)


def attrs_evolve(node: PartitionTree, **kw: Any) -> PartitionTree:
    import attrs
    return attrs.evolve(node, **kw)


def test_split_decision() -> None:
    """Split on a finite positive released value, read as a scalar (its first entry, ``released_scalar``); NaN
    ("not found"), infinity, zero, negatives and what is not a number are leaves."""
    assert _splits(1.0) and _splits(np.array(0.5)) and _splits(3) and _splits(np.array([1.0, -2.0]))
    assert not any(_splits(x) for x in (0.0, -1.0, math.nan, math.inf, np.array([-1.0, 2.0]), "x", None))


def test_refusals_before_data() -> None:
    def reads_a_part(rows: Any, state: Any, depth: Any) -> N.TreeStep:
        step = _body(rows, state, depth)
        leaf = N.LaplaceMech()(N.Count()(step.parts[0]))
        return N.TreeStep(split=step.split, parts=step.parts, states=step.states, leaf=leaf)

    def index_split(rows: Any, state: Any, depth: Any) -> N.TreeStep:
        a, c = N.split(rows, N.SplitByIndex(pieces=2))
        cnt = N.LaplaceMech()(N.Count()(rows))
        return N.TreeStep(split=cnt, parts=[a, c], states=[state, state], leaf=cnt)

    def mapped(rows: Any, state: Any, depth: Any) -> N.TreeStep:
        return _body(N.Clip(radius=1.0)(rows), state, depth)

    def other_state(rows: Any, state: Any, depth: Any) -> N.TreeStep:
        step = _body(rows, state, depth)
        packed = N.Pack(names=["c"])(state)
        return N.TreeStep(split=step.split, parts=step.parts, states=[packed, packed], leaf=step.leaf)

    cases = [(reads_a_part, None, "the body reads its split or a part"),
             (index_split, None, "needs a public row count"),  # SplitByIndex of a piece: refused by its own rule
             (mapped, None, "not distinct pieces of one value partition"),
             (other_state, None, "part state"),
             (_body, lambda X: N.Magnitudes(of="coordinates")(X), "stability 2")]
    for body, rows, problem in cases:
        with pytest.raises(PlanError) as e:
            _tree(body, rows=rows).check()
        assert problem in e.value.problem and e.value.node.startswith("partition_tree_")

    with pytest.raises(PlanTypeError, match="not a TreeStep"):
        _tree(lambda rows, state, depth: N.LaplaceMech()(N.Count()(rows)))
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=1), n=10)
    outer = N.LaplaceMech()(N.Count()(X))
    with pytest.raises(PlanTypeError, match="outside its sub-plan"):
        N.partition_tree(X, b.public([0.0]), lambda rows, state, depth: N.TreeStep(
            split=outer, parts=[], states=[], leaf=outer), 2)


def test_the_ledger_states_the_bound() -> None:
    ledger = _tree(max_depth=5, max_parts=3).check()
    (entry,) = [e for e in ledger.entries if e.kind == "PartitionTree"]
    assert "at most 3 parts, depth <= 2 (max_depth=5)" in entry.derivation
    assert "two paths under replace-one" in entry.derivation
    assert any(note.startswith("PartitionTree: a record's root-to-leaf path is charged") for note in ledger.composition)
    body = [e for e in ledger.entries if e.event is not None and e.node.startswith("partition_tree_")]
    assert body and not any(e.event.per_round_weight or "round" in e.cost for e in body if e.event is not None)
