"""The tight per-record rule for nested value partitions (``planner.fold.split_rule``): a replaced record
changes at most two leaves (or one leaf within), so a depth-L tree of equal leaves is charged twice a
leaf, not 2^L times.  Checked against the realised privacy loss of adversarial neighbours: with counts
released by the Gaussian mechanism the loss of a neighbouring pair is sum_leaves (change / sigma)^2 / 2,
computed exactly from the zero-noise releases."""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from conftest import run_zero

import dpflow as dp
from dpflow import nodes as N
from dpflow.nodes.types import SplitRule
from dpflow.planner.certify import certify
from dpflow.planner.ledger import Ops, PerRecord, recompose, split_rule


def _leaves(b: dp.PlanBuilder, X: Any, depth: int, x0: float, width: float) -> list[Any]:
    """A depth-``depth`` binary tree of value partitions (balls on the first coordinate: rows with
    ``|x_0 - mid| <= width/4`` go left) with a Gaussian count at every leaf."""
    if depth == 0:
        return [N.GaussianMech()(N.Count()(X))]
    centre = x0 + width / 4
    left, right = N.split(X, N.PartitionByBall(center=[centre, 0.0], radius=width / 4))
    return _leaves(b, left, depth - 1, x0, width / 2) + _leaves(b, right, depth - 1, x0 + width / 2, width / 2)


def _tree_plan(depth: int, relation: str = "replace") -> tuple[dp.Plan, list[str]]:
    b = dp.PlanBuilder(budget=dp.ZCDP(1), neighbors=relation)
    X = b.source("X", dp.Vectors(d=2), n=2**depth if relation == "replace" else None)
    leaves = _leaves(b, X, depth, 0.0, 2.0**depth)
    return b.build(**{f"l{i}": h for i, h in enumerate(leaves)}), [h.id for h in leaves]


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_depth_l_tree_is_charged_two_leaves_under_replace(depth: int) -> None:
    plan, ids = _tree_plan(depth)
    cert = certify(plan)
    shares = {cert.allocations[i].share for i in ids}
    assert shares == {Fraction(1, 2)}  # 2 leaves of rho 1/2 use the budget of 1 (was 1 / 2^depth)
    (total,) = cert.ledger.totals
    assert total.rho == 1
    assert recompose(total.composition, "replace").rho == 1


def test_add_remove_charges_one_path() -> None:
    plan, ids = _tree_plan(2, "add_remove")
    cert = certify(plan)
    assert {cert.allocations[i].share for i in ids} == {Fraction(1)}


def test_adversarial_neighbours_realise_exactly_the_certified_total() -> None:
    """Every pair of leaf positions for the replaced record (and the hostile rows): the realised zCDP loss
    sum_leaves (count change)^2 / (2 sigma^2) is at most the certified total, and moving a record between
    two leaves reaches it: the rule cannot be lowered."""
    depth = 3
    plan, ids = _tree_plan(depth)
    cert = certify(plan)
    sigma = {i: 1.0 / np.sqrt(2 * float(cert.allocations[i].share)) for i in ids}
    (total,) = cert.ledger.totals
    n = 2**depth
    positions = [float(k) + 0.5 for k in range(n)] + [np.nan, 1e9]
    base = np.array([[k + 0.5, 0.0] for k in range(n)])
    worst = 0.0
    for p, q in itertools.product(positions, repeat=2):
        D1, D2 = base.copy(), base.copy()
        D1[0], D2[0] = [p, 0.0], [q, 0.0]
        r1, r2 = run_zero(cert, {"X": D1}), run_zero(cert, {"X": D2})
        loss = sum((r1[f"l{j}"] - r2[f"l{j}"]) ** 2 / (2 * sigma[i] ** 2) for j, i in enumerate(ids))
        worst = max(worst, float(loss))
    assert worst == pytest.approx(float(total.rho), rel=1e-9)


def test_split_rule_pins_the_value_and_index_cases() -> None:
    ops: Ops[int] = Ops(sum, max, lambda xs: sum(sorted(xs)[-2:]))
    a, b, c = PerRecord(1, 3), PerRecord(2, 2), PerRecord(1, 1)
    assert split_rule([a, b, c], SplitRule.VALUE, ops) == PerRecord(2, 3)  # max(both) 3 > top two of one 3
    assert split_rule([b, b, c], SplitRule.VALUE, ops) == PerRecord(2, 4)  # two pieces each lose/gain one
    assert split_rule([a, b, c], SplitRule.INDEX, ops) == PerRecord(2, 3)  # a record stays in its block
