"""The tight replace-one rule of one value split (``privacy.ratio``, ``planner.ledger.split_rule``): a record that
moves from piece i to piece j removes one row from piece i and adds one to piece j, so each is charged its
one-sided cost (its add/remove sensitivity, with the same noise), and a change within one piece its full cost.

Checked on adversarial neighbours against the realised privacy loss: with zero noise a Gaussian release of a
change v costs ``|v|^2 / (2 sigma^2)`` (zCDP) and a Laplace one ``|v|_1 / b`` (pure), summed over the pieces."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from conftest import bound_value, run_zero

import dpflow as dp
from dpflow import nodes as N
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.nodes.base import unit_ratio
from dpflow.nodes.mechanisms import lattice_calibration
from dpflow.nodes.types import StatT
from dpflow.planner.certify import certify
from dpflow.planner.ledger import Ledger, recompose
from dpflow.privacy import Cost
from dpflow.privacy.ratio import sensitivity_ratio, share_at_ratio

R = 1.0  # clipping radius = partition radius: a row on the sphere is inside, every other row of norm R outside


def _sum_count_plan(relation: str = "replace", budget: dp.Measure | None = None,
                    accounting: str = "auto") -> tuple[dp.Plan, str, str]:
    """Inside the ball: a Gaussian sum of the rows clipped to radius R (one-sided l2 R, full 2R); outside: a
    Gaussian count (sensitivity 1 either way)."""
    b = dp.PlanBuilder(budget=budget or dp.ZCDP(1), neighbors=relation, accounting=accounting)
    X = b.source("X", dp.Vectors(d=2), n=4 if relation == "replace" else None)
    inside, outside = N.split(X, N.PartitionByBall(center=[0.0, 0.0], radius=R))
    s = N.GaussianMech()(N.Sum()(N.Clip(radius=R)(inside)))
    c = N.GaussianMech()(N.Count()(outside))
    return b.build(s=s, c=c), s.id, c.id


def _loss(cert: Any, ids: dict[str, str], D1: np.ndarray, D2: np.ndarray) -> float:
    """The realised zCDP loss of the pair: sum over the Gaussian releases of (change / sigma)^2 / 2."""
    r1, r2 = run_zero(cert, {"X": D1}), run_zero(cert, {"X": D2})
    total = 0.0
    for out, nid in ids.items():
        stat = cert.space.types[cert.space.records[nid].inputs[0]]
        sigma = bound_value(stat.l2) / np.sqrt(2 * float(cert.allocations[nid].share))
        total += float(np.sum((np.asarray(r1[out]) - np.asarray(r2[out])) ** 2)) / (2 * sigma**2)
    return total


def test_one_split_shares_use_the_tight_total() -> None:
    """max(full sum, full count, one-sided sum + count) = max(1, 1, 1/4 + 1) = 5/4 per unit weight: shares 4/5
    (the two largest pieces in full, the rule before, gave 1/2 each)."""
    plan, s, c = _sum_count_plan()
    cert = certify(plan)
    assert cert.allocations[s].share == cert.allocations[c].share == Fraction(4, 5)
    (total,) = cert.ledger.totals
    assert total.rho == 1
    assert recompose(total.composition, "replace").rho == total.rho


def test_adversarial_neighbours_reach_the_certified_total_between_pieces() -> None:
    """A record on the sphere (inside) replaced by one outside: the sum moves by R (one-sided), the count by 1,
    loss (1/5) + (4/5) = 1 = the certified total; a replacement within the ball moves the sum by 2R, loss 4/5.
    No pair exceeds the total, and the move between pieces reaches it: the one-sided cost cannot be lower."""
    plan, s, c = _sum_count_plan()
    cert = certify(plan)
    total = float(cert.ledger.totals[0].rho)
    base = np.array([[0.2, 0.0], [0.0, 0.3], [3.0, 4.0], [-5.0, 0.0]])
    rows = [np.array(v) for v in ([R, 0.0], [-R, 0.0], [0.0, R], [2.0, 0.0], [0.0, -7.0], [0.1, 0.1], [1e9, 0.0])]
    worst = 0.0
    for i, (a, b) in itertools.product(range(len(base)), itertools.product(rows, repeat=2)):
        D1, D2 = base.copy(), base.copy()
        D1[i], D2[i] = a, b
        worst = max(worst, _loss(cert, {"s": s, "c": c}, D1, D2))
    assert worst == pytest.approx(total, rel=1e-9)
    D1, D2 = base.copy(), base.copy()
    D1[0], D2[0] = [R, 0.0], [-R, 0.0]  # within the ball: the full sensitivity 2R
    assert _loss(cert, {"s": s, "c": c}, D1, D2) == pytest.approx(0.8, rel=1e-9)


def test_record_moving_between_pieces_changes_each_within_its_one_sided_bound() -> None:
    plan, s, c = _sum_count_plan()
    cert = certify(plan)
    stat = cert.space.types[cert.space.records[s].inputs[0]]
    assert isinstance(stat, StatT) and stat.one_sided is not None
    one_l1, one_l2, one_linf = (bound_value(b) for b in stat.one_sided)
    assert (one_l2, bound_value(stat.l2)) == (R, 2 * R)
    base = np.array([[0.5, 0.0], [3.0, 4.0], [0.0, 0.1], [-2.0, 0.0]])
    for inside, outside in itertools.product([[R, 0.0], [0.0, -R], [0.6, 0.8]], [[2.0, 0.0], [0.0, 9.0], [1e6, 1e6]]):
        D1, D2 = base.copy(), base.copy()
        D1[0], D2[0] = inside, outside
        v = np.asarray(run_zero(cert, {"X": D1})["s"]) - np.asarray(run_zero(cert, {"X": D2})["s"])
        assert np.linalg.norm(v) <= one_l2 * (1 + 1e-12)
        assert np.abs(v).sum() <= one_l1 * (1 + 1e-12) and np.abs(v).max() <= one_linf * (1 + 1e-12)


def test_pure_laplace_histograms_in_two_pieces() -> None:
    """Two Laplace histograms in two pieces: one-sided l1 1 against 2, so epsilon * 1/2 each side of a move and
    the whole epsilon within: every histogram gets the whole budget (the two largest pieces gave half)."""
    b = dp.PlanBuilder(budget=dp.PureDP(1))
    X = b.source("X", dp.Vectors(d=1), n=6)
    lo, hi = N.split(X, N.PartitionByBall(center=[1.0], radius=1.0))
    h_lo = N.LaplaceMech()(N.Histogram(edges=[0, 1, 2])(lo))
    h_hi = N.LaplaceMech()(N.Histogram(edges=[2, 3, 4, 5])(hi))
    cert = certify(b.build(lo=h_lo, hi=h_hi))
    assert cert.allocations[h_lo.id].share == cert.allocations[h_hi.id].share == 1
    assert cert.ledger.totals[0].pure_eps == 1
    scale = {k: 2.0 / float(cert.allocations[i].share) for k, i in (("lo", h_lo.id), ("hi", h_hi.id))}
    base = np.array([[0.5], [1.5], [2.5], [3.5], [4.5], [0.2]])
    worst = 0.0
    for a, c in itertools.product([0.5, 1.5, 2.5, 3.5, 4.5, -9.0, np.nan], repeat=2):
        D1, D2 = base.copy(), base.copy()
        D1[0], D2[0] = a, c
        r1, r2 = run_zero(cert, {"X": D1}), run_zero(cert, {"X": D2})
        worst = max(worst, sum(float(np.abs(r1[k] - r2[k]).sum()) / scale[k] for k in scale))
    assert worst == pytest.approx(1.0, rel=1e-12)


def test_nested_value_pieces_of_gaussian_sums_are_charged_one_leaf() -> None:
    """Pieces of pieces: every leaf's one-sided cost is a quarter of its full cost, so two leaves one-sided
    (1/2) never exceed one leaf in full: every leaf gets the whole budget (the rule before gave half)."""
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = N.Clip(radius=4.0)(b.source("X", dp.Vectors(d=1), n=8))
    left, right = N.split(X, N.PartitionByBall(center=[-2.0], radius=2.0))
    leaves = [*N.split(left, N.PartitionByBall(center=[-3.0], radius=1.0)),
              *N.split(right, N.PartitionByBall(center=[1.0], radius=1.0))]
    outs = {f"l{k}": N.GaussianMech()(N.Sum()(leaf)) for k, leaf in enumerate(leaves)}
    cert = certify(b.build(**outs))
    assert {cert.allocations[h.id].share for h in outs.values()} == {1}
    (total,) = cert.ledger.totals
    assert total.rho == 1 and recompose(total.composition, "replace").rho == total.rho
    ids = {k: h.id for k, h in outs.items()}
    base = np.array([[-3.5], [-2.5], [-1.5], [-0.5], [0.5], [1.5], [2.5], [3.5]])
    worst = 0.0
    for a, c in itertools.product([-4.0, -3.0, -1.0, 0.0, 2.0, 4.0, 1e9], repeat=2):
        D1, D2 = base.copy(), base.copy()
        D1[0], D2[0] = a, c
        worst = max(worst, _loss(cert, ids, D1, D2))
    assert worst <= 1.0 * (1 + 1e-12)


def test_add_remove_sources_and_index_splits_are_unchanged() -> None:
    plan, s, c = _sum_count_plan("add_remove")
    cert = certify(plan)
    assert cert.allocations[s].share == cert.allocations[c].share == 1  # one record in one piece: the max
    stat = cert.space.types[cert.space.records[s].inputs[0]]
    assert isinstance(stat, StatT) and stat.one_sided is None
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2), n=10))
    p, q = N.split(X, N.SplitByIndex(pieces=2))
    hp, hq = N.GaussianMech()(N.Sum()(p)), N.GaussianMech()(N.Sum()(q))
    cert = certify(b.build(p=hp, q=hq))
    assert cert.allocations[hp.id].share == 1
    assert all(isinstance(t, StatT) and t.one_sided is None for t in cert.space.types.values() if isinstance(t, StatT))


def test_statistics_that_depend_on_the_piece_size_keep_their_full_charge() -> None:
    """A count moves by 1 whether the record moves or is replaced within: no one-sided saving, so two Gaussian
    counts in two pieces still take half each (a move changes both counts by one)."""
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=2), n=10)
    p, q = N.split(X, N.PartitionByBall(center=[0.0, 0.0], radius=1.0))
    hp, hq = N.GaussianMech()(N.Count()(p)), N.GaussianMech()(N.Count()(q))
    cert = certify(b.build(p=hp, q=hq))
    assert cert.allocations[hp.id].share == cert.allocations[hq.id].share == Fraction(1, 2)
    assert all(t.one_sided is None for t in cert.space.types.values() if isinstance(t, StatT))


def test_gram_in_a_piece_is_charged_half_its_rho_one_sided() -> None:
    """Gram of rows in a ball of radius r: Frobenius r^2 one-sided against sqrt(2) r^2 in full, so the ratio is
    1/sqrt(2) rounded up to 2^-20 and the one-sided rho about half."""
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=3), n=10))
    p, q = N.split(X, N.PartitionByBall(center=[0.0, 0.0, 0.0], radius=0.5))
    gp, gq = N.GaussianMech()(N.Gram()(p)), N.GaussianMech()(N.Gram()(q))
    cert = certify(b.build(p=gp, q=gq))
    stat = cert.space.types[cert.space.records[gp.id].inputs[0]]
    assert isinstance(stat, StatT)
    ratio = unit_ratio(stat, "l2")
    assert ratio == sensitivity_ratio(1.0, np.sqrt(2.0)) and 0 <= ratio - Fraction(1) / Fraction(np.sqrt(2.0)) < 2**-20
    # max(1, 2 ratio^2): the ratio rounded up makes the second just above 1 (the rule before gave 1/2)
    assert cert.allocations[gp.id].share == 1 / (2 * ratio * ratio) and 1 - 1e-5 < 2 * ratio * ratio < 1 + 1e-5


def test_recurse_rounds_inside_a_piece_charge_one_sided_rounds() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2), n=10))
    p, q = N.split(X, N.PartitionByBall(center=[0.0, 0.0], radius=0.5))

    def body(rows: Any, state: Any, k: Any) -> Any:
        return N.GaussianMech()(N.Sum()(rows))

    loop = N.repeat(p, b.public([0.0, 0.0]), body, times=3)
    other = N.GaussianMech()(N.Sum()(q))
    cert = certify(b.build(loop=loop, other=other))
    # both: max(3 rounds in full, 1 in full, (3 rounds + 1) one-sided) = max(3, 1, 4/4) = 3 per unit weight
    assert cert.allocations[other.id].share == Fraction(1, 3)
    (total,) = cert.ledger.totals
    assert total.rho == 1 and recompose(total.composition, "replace").rho == total.rho


def test_stability_above_one_splits_compose_their_pieces_sequentially() -> None:
    """Magnitudes gives a record d rows, which a value split may send to different pieces (both pieces change
    even under add/remove): the pieces compose sequentially, so two Gaussian histograms take half each."""
    for relation in ("replace", "add_remove"):
        b = dp.PlanBuilder(budget=dp.ZCDP(1), neighbors=relation)
        X = N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=3), n=2 if relation == "replace" else None))
        lo, hi = N.split(N.Magnitudes()(X), N.PartitionByBall(center=[0.25], radius=0.25))
        h = [N.GaussianMech()(N.Histogram(edges=[0.0, 0.25, 0.5])(lo)),
             N.GaussianMech()(N.Histogram(edges=[0.5, 1.0])(hi))]
        cert = certify(b.build(lo=h[0], hi=h[1]))
        assert {cert.allocations[x.id].share for x in h} == {Fraction(1, 2)}, relation
        assert "sequential (a record has 3 rows" in " ".join(e.rule for e in cert.ledger.entries)
        # a record with magnitudes (0.1, 0.7, 0.7) is in both pieces: both histograms change
        D = np.array([[0.1, 0.7, 0.7], [0.2, 0.2, 0.2]])
        D2 = D[1:] if relation == "add_remove" else np.array([[0.2, 0.2, 0.2], [0.2, 0.2, 0.2]])
        r1, r2 = run_zero(cert, {"X": D}), run_zero(cert, {"X": D2})
        assert np.abs(r1["lo"] - r2["lo"]).sum() > 0 and np.abs(r1["hi"] - r2["hi"]).sum() > 0


def test_pld_mode_composes_one_sided_events_by_dominance() -> None:
    """Under an (epsilon, delta) budget (a Laplace count on the whole source keeps the plan off the all-Gaussian
    path) the PLD of a split of two Gaussian sums is the larger of one piece in full and two one-sided pieces (a
    chain by dominance: mu^2/4 + mu^2/4 <= mu^2), so one Gaussian event, not two."""
    b = dp.PlanBuilder(budget=dp.ApproxDP(1.0, 1e-6))
    X = N.Clip(radius=R)(b.source("X", dp.Vectors(d=2), n=4))
    inside, outside = N.split(X, N.PartitionByBall(center=[0.0, 0.0], radius=R / 2))
    g1, g2 = N.GaussianMech()(N.Sum()(inside)), N.GaussianMech()(N.Sum()(outside))
    cnt = N.LaplaceMech()(N.Histogram(edges=[-2, 0, 2])(N.Columns(keep=[0])(X)))
    cert = certify(b.build(g1=g1, g2=g2, c=cnt))
    (total,) = cert.ledger.totals
    assert total.cost.pld is not None
    expected = cert.allocations[g1.id].cost.then(cert.allocations[cnt.id].cost)
    assert cert.allocations[g1.id].share == cert.allocations[g2.id].share
    assert total.cost.pld in (expected.pld, expected.for_lattice_noise().pld)
    assert recompose(total.composition, "replace").rho == total.rho


def test_ledger_json_keeps_the_one_sided_charges() -> None:
    plan, s, _ = _sum_count_plan()
    ledger = certify(plan).ledger
    text = ledger.to_json()
    assert Ledger.from_json(text) == ledger
    charges = json.dumps(json.loads(text)["totals"][0]["composition"])
    assert charges.count('"one"') == 1  # the sum's; the count is charged in full
    entry = next(e for e in ledger.entries if e.node == s)
    assert "at most 0.5 x that (one-sided)" in entry.sensitivity


def test_basic_accounting_charges_one_sided_changes_in_full() -> None:
    """Basic accounting calibrates every mechanism to its own (epsilon, delta), so no one-sided saving: two pieces
    in full, epsilon/2 each."""
    plan, s, _ = _sum_count_plan(budget=dp.ApproxDP(1.0, 1e-6), accounting="basic")
    basic = certify(plan)
    assert basic.ledger.totals[0].cost.basic_eps == 1
    assert basic.allocations[s].cost.basic_eps == Fraction(1, 2)


# ---------------------------------------------------------------------------------------------- the math, pinned


def test_ratio_and_share_rules_are_pinned() -> None:
    assert sensitivity_ratio(1.0, 2.0) == Fraction(1, 2)
    assert sensitivity_ratio(1.0, 3.0) == Fraction(349526, 2**20)  # ceil(2^20 / 3)
    assert sensitivity_ratio(2.0, 2.0) == sensitivity_ratio(5.0, 2.0) == 1
    assert sensitivity_ratio(1.0, float("inf")) == sensitivity_ratio(1.0, 0.0) == 1
    assert sensitivity_ratio(-1.0, 2.0) == Fraction(1, 2**20)
    assert share_at_ratio(Fraction(1), Fraction(1, 2), "zcdp") == Fraction(1, 4)
    assert share_at_ratio(Fraction(1), Fraction(1, 2), "pure") == Fraction(1, 2)
    g, lap = N.GaussianMech(), N.LaplaceMech()
    assert g.one_sided_cost(Fraction(1), "zcdp", Fraction(1, 2)) == Cost.gaussian_zcdp(Fraction(1, 4))
    assert lap.one_sided_cost(Fraction(1), "pure", Fraction(1, 2)) == Cost.pure(Fraction(1, 2))
    assert lap.one_sided_cost(Fraction(1, 2), "zcdp", Fraction(1, 2)).rho <= Fraction(1, 8)
    assert N.Peel(s=1).one_sided_cost(Fraction(1), "pure", Fraction(1, 2)) == N.Peel(s=1).cost(Fraction(1), "pure")


def test_lattice_release_divides_its_slack_by_the_ratio() -> None:
    """On the lattice the one-sided change moves the rounded statistic by at most q Delta + slack + rounding,
    which must be at most q times the widened sensitivity the noise is calibrated to."""
    full = lattice_calibration(2.0, 1e-6, 3, False, lambda d: 10 * d)
    half = lattice_calibration(2.0, 1e-6, 3, False, lambda d: 10 * d, Fraction(1, 2))
    assert full is not None and half is not None and full.step == half.step
    extra = 1e-6 + half.step * np.sqrt(3)
    assert half.sensitivity >= 2.0 + 2 * extra and Fraction(1, 2) * half.sensitivity >= 1.0 + extra
    assert full.sensitivity < 2.0 + 2 * extra


def test_lattice_runs_use_the_divided_slack_and_the_ledger_says_the_same() -> None:
    """An exact source releases a Laplace histogram and a Gaussian Gram of value pieces on the lattice at the
    widening of ``lattice_calibration`` with their ratio; the ledger's accuracy rows give the same scales."""
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=3), n=50))
    p, q = N.split(X, N.PartitionByBall(center=[0.0, 0.0, 0.0], radius=0.5))
    h = N.LaplaceMech()(N.Histogram(edges=[-1, 0, 1])(N.Columns(keep=[0])(p)))
    g = N.GaussianMech()(N.Gram()(q))
    cert = certify(b.build(h=h, g=g), exact_noise=True)
    cal = {c.node: c for c in cert.ledger.noise_calibrations}
    data = {"X": np.random.default_rng(0).normal(size=(50, 3)) * 0.5}
    facts = execute(cert, data, dp.SeededNoise(0, exact=True), NumpyBackend()).facts
    for node, key in ((h.id, "scale"), (g.id, "sigma")):
        stat = cert.space.types[cert.space.records[node].inputs[0]]
        assert isinstance(stat, StatT) and unit_ratio(stat, "l1" if key == "scale" else "l2") < 1
        if cal[node].lattice_scale is not None:  # known before data (the histogram's exact float error)
            assert facts[node][0][key] == cal[node].lattice_scale
        lattice = facts[node][1]["lattice"]
        assert lattice["sensitivity"] > bound_value(stat.l1 if key == "scale" else stat.l2)
    alloc, h_node = cert.allocations[h.id], N.LaplaceMech()
    slack = facts[h.id][1]["lattice"]["float_slack"]
    l1 = cert.space.types[cert.space.records[h.id].inputs[0]].l1  # type: ignore[union-attr]
    want = lattice_calibration(l1.value({}), slack, 2, True, lambda d: h_node.noise_scale(d, alloc.share, alloc.mode),
                               Fraction(1, 2))
    assert want is not None and facts[h.id][1]["lattice"]["sensitivity"] == want.sensitivity
