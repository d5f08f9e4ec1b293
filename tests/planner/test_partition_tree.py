"""The cost of ``PartitionTree`` (issue 31) against a brute-force composition over every tree it can realise, and
the record/replay audit on neighbours where a record moves between parts.

The brute force reads each body mechanism's own certified costs (its allocation's cost, and its one-sided cost
``Mechanism.one_sided_cost`` at its ``one_sided_ratio``: a record entering or leaving a value piece), enumerates
every tree shape within the bounds (every internal piece runs what a split evaluates, every leaf the leaf result,
after a split decision or without one), every position of the changed record (add/remove: any leaf; replace-one:
any two leaves, equal or not), composes sequentially the runs of the pieces holding the record(s) (a piece holding
x and x' sees a replacement: full cost; a piece holding one of them one-sided) and takes the worst case.  Nothing
of ``planner.fold`` or ``ledger.split_rule`` / ``tree_rule`` is used; the certified total must equal it.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from forced_replay import replay

import dpflow as dp
from dpflow import nodes as N
from dpflow.nodes.control import PartitionTree
from dpflow.nodes.types import StatT
from dpflow.planner.certify import Certified, certify
from dpflow.planner.fold import tree_cones
from dpflow.privacy import Cost

Shape = Any
"""A realised tree: ``None`` is a leaf, a tuple of ``p`` shapes a piece that split."""


def _body(parts: int) -> Any:
    """Split cone: a Laplace count (full cost one-sided: a count moves by 1 either way) and the split; leaf: a
    Gaussian sum of rows clipped to radius 1 (one-sided: a quarter of its rho) and a Laplace count."""
    def body(rows: Any, state: Any, depth: Any) -> N.TreeStep:
        b = rows.builder
        rule = (N.PartitionByBall(center=state, radius=b.public(1.0)) if parts == 2 else
                N.PartitionByNearest(k=parts - 1, centers=b.public([[float(i)] for i in range(parts - 1)])))
        pieces = N.split(rows, rule)
        decide = N.LaplaceMech(weight=2)(N.Count()(rows))
        leaf = N.Pack()(N.GaussianMech(weight=3)(N.Sum()(N.Clip(radius=1.0)(rows))),
                        N.LaplaceMech()(N.Count()(rows)))
        return N.TreeStep(split=decide, parts=list(pieces), states=[state] * parts, leaf=leaf)
    return body


def tree_plan(relation: str, max_depth: int, max_parts: int | None, parts: int = 2) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(1), neighbors=relation)
    X = b.source("X", dp.Vectors(d=1), n=50 if relation == "replace" else None)
    out = N.partition_tree(X, b.public([0.0]), _body(parts), max_depth=max_depth, max_parts=max_parts)
    m = N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(X)))  # and one mechanism outside the tree
    return b.build(tree=out, m=m)


def shapes(depth: int, max_depth: int, parts: int) -> Iterator[Shape]:
    """Every tree of at most ``max_depth - depth`` more levels."""
    yield None
    if depth < max_depth:
        for kids in itertools.product(list(shapes(depth + 1, max_depth, parts)), repeat=parts):
            yield tuple(kids)


def leaves(shape: Shape, path: tuple[int, ...] = ()) -> Iterator[tuple[int, ...]]:
    if shape is None:
        yield path
    else:
        for i, kid in enumerate(shape):
            yield from leaves(kid, (*path, i))


def nodes(shape: Shape, path: tuple[int, ...] = ()) -> Iterator[tuple[tuple[int, ...], bool]]:
    """Every piece of ``shape``: its path and whether it split."""
    yield path, shape is not None
    if shape is not None:
        for i, kid in enumerate(shape):
            yield from nodes(kid, (*path, i))


def realised_runs(shape: Shape, max_depth: int, max_parts: int | None, parts: int, split_cone: frozenset[str],
                  leaf_cone: frozenset[str]) -> dict[tuple[int, ...], set[str]] | None:
    """What each piece of ``shape`` runs, breadth first as the interpreter does: a piece may split (it runs the
    split cone first) while it is above ``max_depth`` and the part count stays within ``max_parts``; a leaf that
    could have split ran the split cone (its decision: stop) and then the leaf, any other leaf only the leaf.
    ``None`` when ``shape`` cannot be realised (a split the bounds forbid)."""
    runs: dict[tuple[int, ...], set[str]] = {}
    count = 1
    work = [((), shape)]
    while work:
        (path, sub), work = work[0], work[1:]
        may = len(path) < max_depth and (max_parts is None or count + parts - 1 <= max_parts)
        if sub is not None:
            if not may:
                return None
            count += parts - 1
            runs[path] = set(split_cone)
            work += [((*path, i), kid) for i, kid in enumerate(sub)]
        else:
            runs[path] = set(leaf_cone) | (set(split_cone) if may else set())
    return runs


def mechanism_costs(cert: Certified) -> tuple[dict[str, tuple[Cost, Cost]], frozenset[str], frozenset[str]]:
    """Each body mechanism's (one-sided, full) cost by its own rule, and the split and leaf cones."""
    (tree_rec,) = [r for r in cert.space.order if isinstance(r.node, PartitionTree)]
    body = cert.space.bodies[tree_rec.id]
    out = {}
    for rec in body.order:
        if isinstance(rec.node, N.Mechanism):
            alloc = cert.invocations.at(body.path + rec.id, ())
            stat = body.types[rec.inputs[0]]
            assert isinstance(stat, StatT)
            one = rec.node.one_sided_cost(alloc.share, alloc.mode, rec.node.one_sided_ratio(stat))
            out[rec.id] = (one, alloc.cost)
    assert isinstance(tree_rec.node, PartitionTree)
    split, leaf = tree_cones(tree_rec.node)
    return out, split, leaf


def brute_force(cert: Certified, relation: str, max_depth: int, max_parts: int | None, parts: int) -> Cost:
    """The worst per-record cost over every realised tree and every position of the changed record(s)."""
    costs, split_cone, leaf_cone = mechanism_costs(cert)
    outside = [r for r in cert.space.order if isinstance(r.node, N.Mechanism)]
    (m,) = outside
    m_cost = cert.invocations.at(m.id, ()).cost  # the mechanism on all rows: a replacement or an add/remove
    worst: Cost | None = None
    for shape in shapes(0, max_depth, parts):
        runs = realised_runs(shape, max_depth, max_parts, parts, split_cone, leaf_cone)
        if runs is None:
            continue
        ends = list(leaves(shape))
        pairs = [(u, u) for u in ends] if relation == "add_remove" else list(itertools.product(ends, ends))
        for u, v in pairs:
            events = [m_cost]
            for path, mechs in runs.items():
                has_x, has_y = u[:len(path)] == path, v[:len(path)] == path
                if not (has_x or has_y):
                    continue
                full = has_x and has_y and relation == "replace"
                events += [costs[k][1] if full else costs[k][0] for k in sorted(mechs) if k in costs]
            total = Cost.sequential(events)
            if worst is None or total.rho > worst.rho:
                worst = total
    assert worst is not None
    return worst


CASES = [(3, None, 2), (3, 3, 2), (3, 4, 2), (2, None, 3), (2, 5, 3), (1, 2, 2), (0, None, 2), (4, 3, 2)]
LOOSE = {(3, 4, 2, "replace")}
"""Where the rule is sound but not tight: with 4 parts, two paths of 3 levels that part at the root need 5 splits (6
parts), so they cannot both be realised; the rule bounds each path by the depth bound on its own."""


@pytest.mark.parametrize("relation", ["replace", "add_remove"])
@pytest.mark.parametrize(("max_depth", "max_parts", "parts"), CASES)
def test_certified_cost_is_the_worst_realised_tree(relation: str, max_depth: int, max_parts: int | None,
                                                   parts: int) -> None:
    """The certified total is at least the brute-force composition over every realised tree (sound), and equal to it
    (tight: the worst tree and positions reach it) except in :data:`LOOSE`."""
    cert = certify(tree_plan(relation, max_depth, max_parts, parts))
    (total,) = cert.ledger.totals
    node = next(r.node for r in cert.space.order if isinstance(r.node, PartitionTree))
    assert isinstance(node, PartitionTree)
    worst = brute_force(cert, relation, max_depth, max_parts, parts)
    assert total.cost.rho >= worst.rho
    assert (total.cost.rho == worst.rho) is ((max_depth, max_parts, parts, relation) not in LOOSE)
    assert total.cost.delta0 == worst.delta0 == 0


def test_the_depth_bound_follows_max_parts() -> None:
    """k parts of binary splits: at most k - 1 levels (the brute force above enumerates within it)."""
    for max_parts, depth in ((None, 5), (1, 0), (2, 1), (3, 2), (6, 5), (100, 5)):
        plan = tree_plan("replace", 5, max_parts)
        node = next(r.node for r in plan.records if isinstance(r.node, PartitionTree))
        assert isinstance(node, PartitionTree) and node.depth() == depth


def test_plan_size_and_certification_do_not_grow_with_depth() -> None:
    """The body is certified once: the plan has the same nodes at every depth bound, and certifying a tree 40 deep
    (2^40 pieces) takes under a second."""
    sizes, times = [], []
    for depth in (1, 40):
        plan = tree_plan("replace", depth, None)
        sizes.append(len(plan.records) + sum(len(r.node.body.records) for r in plan.records
                                             if isinstance(r.node, PartitionTree)))
        t0 = time.perf_counter()
        cert = certify(plan)
        times.append(time.perf_counter() - t0)
        assert cert.ledger.totals[0].cost.rho <= 1
    assert sizes[0] == sizes[1]
    assert times[1] < 1.0


@pytest.mark.parametrize("moves", [(0, 1), (0, 3), (1, 2), (2, 3), (0, 0), (3, 3)])
def test_replay_where_a_record_moves_between_parts(moves: tuple[int, int]) -> None:
    """Record/replay (``tests/audit/forced_replay.py``) on replace-one neighbours where one record moves from one
    part to another at the root or deeper (positions 0..3 on a line: each level's ball holds one position, the
    next part's centre moves one step on), with D's releases forced on D': every statistic's realised change is
    within its declared (and, for a piece it enters or leaves, one-sided) bound, and the realised per-record cost
    is within the certified one."""
    def body(rows: Any, state: Any, depth: Any) -> N.TreeStep:
        b = rows.builder
        inside, outside = N.split(rows, N.PartitionByBall(center=state, radius=b.public(0.5)))
        decide = N.LaplaceMech(weight=2)(N.Count()(rows))
        nxt = N.Apply(fn=np.add, shape=(1,))(state, b.public([1.0]))
        leaf = N.GaussianMech(weight=3)(N.Sum()(N.Clip(radius=4.0)(rows)))
        return N.TreeStep(split=decide, parts=[inside, outside], states=[state, nxt], leaf=leaf, size=decide)

    b = dp.PlanBuilder(budget=dp.ZCDP(50), neighbors="replace")
    X = b.source("X", dp.Vectors(d=1), n=40)
    out = N.partition_tree(X, b.public([0.0]), body, max_depth=3, max_parts=4)
    cert = certify(b.build(tree=out), exact_noise=False)
    base = np.repeat(np.arange(4.0), 10).reshape(-1, 1)
    u, v = moves
    D2 = base.copy()
    D2[u * 10] = [float(v)]
    outcome = replay(cert, {"X": base}, {"X": D2})
    assert outcome.found == []
    assert outcome.spent <= outcome.certified
    assert len(outcome.released["tree"]) <= 4


def test_the_run_records_the_realised_tree() -> None:
    """After a run the report holds the tree as it was realised (breadth first, each leaf's released size), at most
    max_parts leaves, and the output is the leaves' results in that order."""
    b = dp.PlanBuilder(budget=dp.ZCDP(1e6), neighbors="replace")
    X = b.source("X", dp.Vectors(d=1), n=40)

    def body(rows: Any, state: Any, depth: Any) -> N.TreeStep:
        bb = rows.builder
        inside, outside = N.split(rows, N.PartitionByBall(center=state, radius=bb.public(0.5)))
        cnt = N.LaplaceMech()(N.Count()(rows))
        nxt = N.Apply(fn=np.add, shape=(1,))(state, bb.public([1.0]))
        more = N.Apply(fn=np.subtract, shape=())(cnt, bb.public(15.0))  # split a piece of more than 15 rows
        return N.TreeStep(split=more, parts=[inside, outside], states=[state, nxt], leaf=cnt, size=cnt)

    out = N.partition_tree(X, b.public([0.0]), body, max_depth=5, max_parts=3)
    data = np.repeat(np.arange(4.0), 10).reshape(-1, 1)
    res = b.build(tree=out).run({"X": data}, noise=dp.SeededNoise(1))
    facts = res.report.to_data()["run"]["noise_scales"]
    (tree,) = [f["tree"] for fs in facts.values() for f in fs if "tree" in f]
    assert [(t["part"], t.get("split"), t.get("leaf")) for t in tree] == [
        ("root", 2, None), ("0", None, 0), ("1", 2, None), ("10", None, 1), ("11", None, 2)]
    assert [round(t["size"]) for t in tree if "leaf" in t] == [10, 10, 20]
    assert [round(float(x)) for x in res.released["tree"]] == [10, 10, 20]
    line = next(x for x in res.report.to_markdown().splitlines() if x.startswith("- partition_tree_") and "root" in x)
    assert line.count("split into 2") == 2 and line.count(": leaf ") == 3 and "10: leaf 1, size " in line
