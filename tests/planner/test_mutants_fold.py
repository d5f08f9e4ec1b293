"""Mutation-testing pins of ``dpflow/planner/fold.py`` and the fold rules of ``dpflow/planner/ledger.py``.

The per-record fold decides how a budget is shared: fractions (fixed shares and weights) fold exactly as the
costs do.  Under replace-one a value partition is charged the larger of one piece's replacement and two pieces
each gaining or losing one record (McSherry 2009, Thm. 4; ``ledger.split_rule``), so with three pieces of
unequal weight the two LARGEST pieces must use the budget exactly: the two smallest would overspend it (the
ledger's budget check would then refuse the plan), the three largest would leave budget unused.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.nodes.types import SplitRule
from dpflow.planner.certify import certify
from dpflow.planner.fold import _max_frac, _sum_frac, _top_two_frac
from dpflow.planner.ledger import Ops, PerRecord, of_relation, recompose, seq_pairs, split_rule
from dpflow.privacy import Cost


def _three_pieces(relation: str) -> tuple[list[Fraction], Fraction]:
    b = dp.PlanBuilder(budget=dp.ZCDP(1), neighbors=relation)
    X = b.source("X", dp.Vectors(d=1), n=10 if relation == "replace" else None)
    pieces = N.split(X, N.PartitionByNearest(k=2, centers=b.public([[0.0], [5.0]])))
    ms = [N.GaussianMech(weight=w)(N.Count()(p)) for w, p in zip((2, 1, 4), pieces, strict=True)]
    cert = certify(b.build(**{f"m{i}": m for i, m in enumerate(ms)}))
    (total,) = cert.ledger.totals
    return [cert.allocations[m.id].share for m in ms], total.rho


def test_replace_one_charges_the_two_largest_pieces() -> None:
    shares, rho = _three_pieces("replace")
    assert shares == [Fraction(2, 6), Fraction(1, 6), Fraction(4, 6)]  # weights over 4 + 2, the two largest
    assert rho == 1


def test_add_remove_charges_the_largest_piece() -> None:
    shares, rho = _three_pieces("add_remove")
    assert shares == [Fraction(2, 4), Fraction(1, 4), Fraction(1)]
    assert rho == 1


def test_a_source_read_only_by_an_unused_split_is_read_by_no_mechanism() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=1), n=10)
    Y = b.source("Y", dp.Vectors(d=1), n=10)
    N.split(Y, N.PartitionByNearest(k=2, centers=b.public([[0.0], [5.0]])))
    cert = certify(b.build(m=N.GaussianMech()(N.Count()(X))))
    assert cert.ledger.warnings == ("source Y is read by no mechanism",)


def test_fraction_folds() -> None:
    xs = [Fraction(1, 3), Fraction(5, 2), Fraction(3, 4), Fraction(1, 7)]
    assert _top_two_frac(xs) == Fraction(5, 2) + Fraction(3, 4)
    assert _top_two_frac([Fraction(2, 3)]) == Fraction(2, 3)
    assert _top_two_frac([]) == 0
    assert _max_frac(xs) == Fraction(5, 2) and _max_frac([]) == 0
    assert _sum_frac(xs) == sum(xs, Fraction(0)) and _sum_frac([]) == 0
    assert all(isinstance(f(xs), Fraction) for f in (_top_two_frac, _max_frac, _sum_frac))


def test_seq_pairs_composes_each_side() -> None:
    calls: list[list[int]] = []

    def seq(xs: list[int]) -> int:
        calls.append(list(xs))
        return sum(xs)

    ops = Ops(seq, max, lambda xs: sum(sorted(xs)[-2:]))
    a, b = PerRecord(1, 5), PerRecord(2, 7)
    assert seq_pairs([a, b], ops) == PerRecord(3, 12)
    assert calls == [[1, 2], [5, 7]]
    calls.clear()
    same = PerRecord(4, 4)
    out = seq_pairs([same, same], ops)
    assert out == PerRecord(8, 8) and calls == [[4, 4]]  # one side computed once when every part is one object
    assert out.both is out.one


def test_of_relation_picks_the_side() -> None:
    r = PerRecord("one", "both")
    assert of_relation("replace", r) == "both"
    assert of_relation("add_remove", r) == "one"


@pytest.mark.parametrize("rule", [SplitRule.VALUE, SplitRule.INDEX])
def test_split_rule_on_three_unequal_pieces(rule: SplitRule) -> None:
    ops = Ops(sum, max, lambda xs: sum(sorted(xs)[-2:]))
    pieces = [PerRecord(2, 3), PerRecord(1, 1), PerRecord(4, 5)]
    out = split_rule(pieces, rule, ops)
    assert out.one == 4
    assert out.both == (max(5, 4 + 2) if rule is SplitRule.VALUE else 5)


@pytest.mark.parametrize("relation", ["replace", "add_remove"])
def test_a_fixed_share_in_a_loop_is_charged_per_round_not_per_round_weight(relation: str) -> None:
    """A mechanism with its own rho inside a 3-round loop of round weights 1, 1, 3 costs 3 rho (every round gets
    it); the weights fold multiplies by the sum of round weights (5) instead, on both sides of the pair."""
    b = dp.PlanBuilder(budget=dp.ZCDP(1), neighbors=relation)
    X = b.source("X", dp.Vectors(d=2), n=100 if relation == "replace" else None)

    def body(rows: object, state: object, k: int) -> object:
        N.GaussianMech(rho=0.1)(N.Sum()(N.Clip(radius=1.0)(rows)))  # a body node: run (and charged) every round
        return N.GaussianMech(weight=2.0)(N.Sum()(N.Clip(radius=1.0)(rows)))

    out = N.repeat(X, b.public([0.0, 0.0]), body, times=3, round_weights=[1.0, 1.0, 3.0])
    other = N.GaussianMech(weight=1.0)(N.Sum()(N.Clip(radius=1.0)(X)))
    cert = certify(b.build(m=out, o=other))
    remaining = 1 - 3 * Fraction(0.1)
    assert cert.allocations[other.id].share == remaining * Fraction(1, 2 * 5 + 1)
    (total,) = cert.ledger.totals
    assert total.rho == 1


# ------------------------------------------------------------ splits of rows of stability s (one record owns s rows)


def _split_of_stability(stability: int, relation: str, budget: dp.Measure) -> tuple[dp.Certified, list[str]]:
    """Magnitudes of d = ``stability`` coordinates (stability d) split by value into two pieces, a histogram
    released on each with weights 1 and 3 (Gaussian under zCDP, Laplace under pure DP)."""
    b = dp.PlanBuilder(budget=budget, neighbors=relation)
    X = N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=stability), n=4 if relation == "replace" else None))
    lo, hi = N.split(N.Magnitudes()(X), N.PartitionByBall(center=[0.25], radius=0.25))
    mech = N.GaussianMech if isinstance(budget, dp.ZCDP) else N.LaplaceMech
    ms = [mech(weight=1.0)(N.Histogram(edges=[0.0, 0.25, 0.5])(lo)),
          mech(weight=3.0)(N.Histogram(edges=[0.5, 1.0])(hi))]
    return certify(b.build(lo=ms[0], hi=ms[1])), [m.id for m in ms]


@pytest.mark.parametrize("budget", [dp.ZCDP(1), dp.PureDP(1)], ids=["zcdp", "pure"])
@pytest.mark.parametrize("relation", ["replace", "add_remove"])
@pytest.mark.parametrize("stability", [1, 2, 3])
def test_a_value_split_composes_its_pieces_sequentially_exactly_when_a_record_owns_two_rows_or_more(
        stability: int, relation: str, budget: dp.Measure) -> None:
    """A split of rows of stability s >= 2 (``fold._fold_steps``): a record's s rows may lie in different pieces,
    so the total charged is the SUM of the pieces' costs (sequential composition), at s = 2 as at s = 3.  At s = 1
    a record lies in one piece: add/remove charges the largest piece; replace-one the larger of one piece in full
    and two pieces one-sided (``ledger.split_rule``), which for these histograms (one-sided cost at most half the
    full one: l2 1 of sqrt 2, l1 1 of 2) is again the largest piece.  The weights 1 : 3 tell the two apart."""
    cert, ids = _split_of_stability(stability, relation, budget)
    (total,) = cert.ledger.totals
    costs = [cert.allocations[i].cost for i in ids]
    size = (lambda c: c.rho) if isinstance(budget, dp.ZCDP) else (lambda c: c.pure_eps)
    shares = [cert.allocations[i].share for i in ids]
    assert shares[1] == 3 * shares[0]
    if stability >= 2:
        assert size(total.cost) == size(Cost.sequential(costs))
        assert size(total.cost) == size(costs[0]) + size(costs[1]) == 1
        assert shares == [Fraction(1, 4), Fraction(3, 4)]
    else:
        assert size(total.cost) == max(size(c) for c in costs) == size(costs[1]) == 1
        assert size(costs[0]) + size(costs[1]) > size(total.cost)
        assert shares == [Fraction(1, 3), Fraction(1)]
    assert recompose(total.composition, relation).rho == total.rho  # the ledger's re-walk applies the same rule
    rules = " ".join(e.rule for e in cert.ledger.entries)
    assert (f"sequential (a record has {stability} rows, which may lie in different pieces)" in rules) == (
        stability >= 2)
    assert ("parallel" in rules) == (stability == 1)
