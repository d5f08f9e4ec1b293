"""Mutation-testing pins of ``dpflow/planner/allocate.py``: the budget check, exactly at its boundaries.

``_check_budget`` is the last word on whether a composed cost fits the budget: zCDP (rho at most rho_B, no
delta0), approximate zCDP (rho and delta0 each at most the budget's), pure DP (the pure epsilon), (epsilon,
delta)-DP (a pure epsilon at most epsilon_B is valid at every delta; otherwise the tightest valid conversion at
the float just below delta must give at most the float just below epsilon), and the basic accounting (the basic
epsilon and delta).  Each case is checked on the budget itself (passes) and one step above it (refused, with the
text), so a flipped comparison, a dropped condition or a swapped field fails.
"""

from __future__ import annotations

import math
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import attrs
import pytest

import dpflow as dp
from dpflow.errors import BudgetError
from dpflow.nodes.types import Mode
from dpflow.planner.allocate import _check_budget, approx_dp_epsilon, approx_dp_target
from dpflow.privacy import Cost, zcdp_rho_for_approx_dp
from dpflow.privacy.rounding import to_float_down

TINY = Fraction(1, 10**30)


def _ctx(budget: Any, basic: bool = False) -> Any:
    return SimpleNamespace(plan=SimpleNamespace(budget=budget), basic=basic)


def _ok(budget: Any, cost: Cost, basic: bool = False) -> bool:
    try:
        _check_budget(_ctx(budget, basic), "X", cost, "zcdp")
    except BudgetError as e:
        assert e.node == "X"
        assert e.problem == (f"the composed cost {cost.total_measure().describe()} exceeds the budget "
                             f"{budget.describe()}")
        assert e.fix == "lower the fixed costs or raise the budget"
        return False
    return True


def test_zcdp_budget() -> None:
    b = dp.ZCDP(Fraction(1, 2))
    assert _ok(b, Cost.zcdp(Fraction(1, 2)))
    assert not _ok(b, Cost.zcdp(Fraction(1, 2) + TINY))
    assert not _ok(b, Cost.approx_zcdp(Fraction(1, 4), TINY))  # any delta0 is refused


def test_approx_zcdp_budget() -> None:
    b = dp.ApproxZCDP(Fraction(1, 2), Fraction(1, 10**6))
    assert _ok(b, Cost.approx_zcdp(Fraction(1, 2), Fraction(1, 10**6)))
    assert not _ok(b, Cost.approx_zcdp(Fraction(1, 2) + TINY, Fraction(1, 10**6)))
    assert not _ok(b, Cost.approx_zcdp(Fraction(1, 2), Fraction(1, 10**6) + TINY))


def test_pure_budget() -> None:
    b = dp.PureDP(Fraction(1))
    assert _ok(b, Cost.pure(Fraction(1)))
    assert not _ok(b, Cost.pure(Fraction(1) + TINY))
    assert not _ok(b, Cost.zcdp(Fraction(1, 100)))  # no pure epsilon


def test_approx_dp_budget() -> None:
    b = dp.ApproxDP(Fraction(1), Fraction(1, 10**6))
    assert _ok(b, Cost.pure(Fraction(1)))  # exact: valid at every delta
    assert not _ok(b, Cost.pure(Fraction(2)))  # no conversion of a pure 2 gives 1 at delta 1e-6
    eps, delta = approx_dp_target(b)
    assert (eps, delta) == (to_float_down(Fraction(1)), to_float_down(Fraction(1, 10**6)))
    # a zCDP cost: admitted exactly when its tightest conversion at delta is at most eps
    for rho in (Fraction(1, 50), Fraction(1, 20), Fraction(1, 10)):
        c = Cost.zcdp(rho)
        assert _ok(b, c) == (approx_dp_epsilon(c, delta) <= eps)
    assert _ok(b, Cost.zcdp(Fraction(1, 50))) and not _ok(b, Cost.zcdp(Fraction(1, 10)))
    assert approx_dp_epsilon(Cost.zcdp(Fraction(1, 10)), delta) == min(
        x.epsilon for x in Cost.zcdp(Fraction(1, 10)).epsilon_at(delta))
    # delta = 0: only a pure epsilon counts
    b0 = dp.ApproxDP(Fraction(1), 0)
    assert _ok(b0, Cost.pure(Fraction(1)))
    assert not _ok(b0, Cost.zcdp(Fraction(1, 1000)))


def test_basic_budget() -> None:
    b = dp.ApproxDP(Fraction(1), Fraction(1, 10**6))
    base = Cost.zcdp(Fraction(1, 1000))
    assert _ok(b, base.with_basic(Fraction(1), Fraction(1, 10**6)), basic=True)
    assert not _ok(b, base.with_basic(Fraction(1) + TINY, Fraction(1, 10**6)), basic=True)
    assert not _ok(b, base.with_basic(Fraction(1), Fraction(1, 10**6) + TINY), basic=True)
    assert not _ok(b, base, basic=True)  # no basic epsilon


@pytest.mark.parametrize("delta", [Fraction(1, 3 * 10**6), Fraction(1, 7)])
def test_approx_dp_target_rounds_both_down(delta: Fraction) -> None:
    eps, d = approx_dp_target(dp.ApproxDP(Fraction(1, 3), delta))
    assert eps == to_float_down(Fraction(1, 3)) and Fraction(eps) <= Fraction(1, 3)
    assert d == to_float_down(delta) and Fraction(d) <= delta


def _basic_plan(epsilon: Fraction) -> tuple[Any, list[Any]]:
    b = dp.PlanBuilder(budget=dp.ApproxDP(epsilon, Fraction(1, 10**6)), accounting="basic")
    X = b.source("X", dp.Vectors(d=2), n=100)
    rows = dp.nodes.Clip(radius=1.0)(X)
    g = dp.nodes.GaussianMech(weight=1.0)(dp.nodes.Mean()(rows))
    lap = dp.nodes.LaplaceMech(weight=3.0)(dp.nodes.Mean()(rows))
    return b.build(g=g, lap=lap), [g, lap]


@pytest.mark.parametrize("epsilon", [Fraction(1), Fraction(2), Fraction(1, 3)])
def test_basic_accounting_splits_delta_in_proportion_to_epsilon(epsilon: Fraction) -> None:
    """Each mechanism of a basic plan gets epsilon_i = epsilon w_i / sum w and delta_i = delta epsilon_i /
    epsilon; the Gaussian is run in zCDP at its exact Gaussian-DP profile, the Laplace mechanism in pure DP
    (delta_i charged 0): the composed basic cost is (epsilon, delta / 4) here."""
    from dpflow.planner.certify import certify

    plan, (g, lap) = _basic_plan(epsilon)
    cert = certify(plan)
    a_g, a_lap = cert.allocations[g.id], cert.allocations[lap.id]
    d = Fraction(1, 10**6)
    assert a_g.mode == "zcdp" and a_lap.mode == "pure"
    assert (a_g.cost.basic_eps, a_g.cost.basic_delta) == (epsilon / 4, d * (epsilon / 4) / epsilon)
    assert (a_lap.cost.basic_eps, a_lap.cost.basic_delta) == (epsilon * 3 / 4, 0)
    assert a_lap.share == epsilon * 3 / 4
    (total,) = cert.ledger.totals
    assert total.cost.basic_eps == epsilon and total.cost.basic_delta == d / 4


def test_shortfall_needs_a_lower_bound_strictly_above_the_budget() -> None:
    from dpflow.planner.allocate import _shortfall
    from dpflow.privacy.calibration import _grid_value

    start = _grid_value(20000)
    assert _shortfall(lambda y: 1.0, 1.0, start) is None  # equal to the budget proves nothing
    assert _shortfall(lambda y: 1.0 + 2**-52, 1.0, start) == _grid_value(20000 + 8) / start - 1


def test_pure_fixed_epsilon_is_taken_in_pure_units() -> None:
    """Under a pure budget a Laplace mechanism with its own epsilon costs that epsilon (not its zCDP rho,
    epsilon^2 / 2), and the weighted mechanisms share the rest."""
    from dpflow.planner.certify import certify

    b = dp.PlanBuilder(budget=dp.PureDP(1))
    X = b.source("X", dp.Vectors(d=2), n=100)
    rows = dp.nodes.Clip(radius=1.0)(X)
    fixed = dp.nodes.LaplaceMech(epsilon=Fraction(1, 4))(dp.nodes.Mean()(rows))
    weighted = dp.nodes.LaplaceMech(weight=1.0)(dp.nodes.Mean()(rows))
    cert = certify(b.build(f=fixed, w=weighted))
    assert cert.allocations[fixed.id].share == Fraction(1, 4)
    assert cert.allocations[weighted.id].share == Fraction(3, 4)
    (total,) = cert.ledger.totals
    assert total.cost.pure_eps == 1


def test_a_pure_mechanism_in_weighted_rounds_costs_its_pure_share_per_round() -> None:
    """Under a pure budget each round's invocation runs at the share times the round weight and costs exactly
    that pure epsilon (its cost is taken in the allocation's mode)."""
    from dpflow.planner.certify import certify

    b = dp.PlanBuilder(budget=dp.PureDP(1))
    X = b.source("X", dp.Vectors(d=2), n=100)

    def body(rows: Any, state: Any, k: int) -> Any:
        return dp.nodes.LaplaceMech()(dp.nodes.Mean()(dp.nodes.Clip(radius=1.0)(rows)))

    out = dp.nodes.repeat(X, b.public([0.0, 0.0]), body, times=2, round_weights=[1.0, 3.0])
    cert = certify(b.build(m=out))
    inv = cert.invocations
    (loop,) = inv.rounds
    (path,) = {node for node, _ in inv.table}
    shares = [inv.at(path, (c,)) for c in inv.rounds[loop]]
    assert [a.share for a in shares] == [Fraction(1, 4), Fraction(3, 4)]
    assert [a.mode for a in shares] == ["pure", "pure"]
    assert [a.cost.pure_eps for a in shares] == [Fraction(1, 4), Fraction(3, 4)]


# --- round 6 (mut7): the refusals a user meets in the allocation, with their texts (node named, fix named) ---


@attrs.frozen(kw_only=True)
class _RefusingLaplace(dp.nodes.LaplaceMech):
    """A Laplace mechanism whose cost refuses every share (as a node kind without a calibration at some share
    would): the planner must re-raise the refusal as a static one naming the node's path."""

    def cost(self, share: Fraction, mode: Mode) -> Cost:
        raise dp.PlanTypeError(self.kind, f"no calibration at share {share}", "raise the share")


def _looped(budget: Any, mech: Any) -> Any:
    """A plan running ``mech`` on the rows of source X in each of two rounds of a loop."""
    b = dp.PlanBuilder(budget=budget)
    X = b.source("X", dp.Vectors(d=1), n=100)
    out = dp.nodes.repeat(X, b.public([0.0]), lambda rows, state, k: mech(rows), times=2)
    return b.build(m=out)


def test_a_cost_refusal_is_re_raised_naming_the_node_path() -> None:
    """A ``PlanError`` from a node's ``cost`` becomes a ``PlanTypeError`` keyed by the node's path (inside a loop
    body: ``repeat_2/b1.<id>``), with the node's own problem and fix, raised from it."""
    from dpflow.planner.certify import certify

    plan = _looped(dp.ZCDP(Fraction(1, 2)), lambda rows: _RefusingLaplace()(dp.nodes.Mean()(
        dp.nodes.Clip(radius=1.0)(rows))))
    with pytest.raises(dp.PlanTypeError) as info:
        certify(plan)
    e = info.value
    assert e.node == "repeat_2/b1.laplace_mech_5"
    assert (e.problem, e.fix) == ("no calibration at share 1/4", "raise the share")
    assert isinstance(e.__cause__, dp.PlanTypeError) and e.__cause__.node == "LaplaceMech"


def test_basic_accounting_with_exact_noise_calibrates_the_gaussian_by_the_zcdp_conversion() -> None:
    """For an exact source the Gaussian-DP profile (continuous noise only) is not used: the Gaussian is a
    mechanism like any other, run in zCDP mode at the CKS inversion of its (epsilon_i, delta_i), charged that
    basic pair; the Laplace mechanism beside it stays pure (its pure epsilon buys more rho)."""
    from dpflow.planner.certify import certify

    plan, (g, lap) = _basic_plan(Fraction(1))
    cert = certify(plan, exact_noise=True)
    a_g, a_lap = cert.allocations[g.id], cert.allocations[lap.id]
    d = Fraction(1, 10**6)
    assert (a_g.mode, a_g.share) == ("zcdp", zcdp_rho_for_approx_dp(Fraction(1, 4), d / 4))
    assert not a_g.continuous_gaussian
    assert (a_g.cost.basic_eps, a_g.cost.basic_delta) == (Fraction(1, 4), d / 4)
    assert (a_lap.mode, a_lap.share, a_lap.cost.basic_delta) == ("pure", Fraction(3, 4), 0)


def _two_pieces(budget: Any) -> tuple[Any, Any, Any]:
    """A builder, and the pieces of source X (n = 6, one value split by a ball): replace-one neighbours."""
    b = dp.PlanBuilder(budget=budget)
    X = b.source("X", dp.Vectors(d=1), n=6)
    lo, hi = dp.nodes.split(X, dp.nodes.PartitionByBall(center=[1.0], radius=1.0))
    return b, lo, hi


def test_fixed_costs_above_the_budget_are_refused_naming_each_fixed_node() -> None:
    """The fixed shares on a source are folded as the costs are (two pieces under replace-one: both, a count's
    one-sided change being its full one) and refused above the budget, in the budget's unit (a pure budget:
    epsilon), listing every fixed mechanism on that source only (not the weighted one, not source Y's) and
    naming the first of the largest."""
    from dpflow.planner.certify import certify

    b, lo, hi = _two_pieces(dp.PureDP(1))
    Y = b.source("Y", dp.Vectors(d=1), n=6)
    c_lo = dp.nodes.LaplaceMech(epsilon=Fraction(3, 5))(dp.nodes.Count()(lo))
    c_hi = dp.nodes.LaplaceMech(epsilon=Fraction(3, 5))(dp.nodes.Count()(hi))
    w = dp.nodes.LaplaceMech()(dp.nodes.Count()(lo))
    y = dp.nodes.LaplaceMech(epsilon=Fraction(1, 2))(dp.nodes.Count()(Y))
    with pytest.raises(BudgetError) as info:
        certify(b.build(lo=c_lo, hi=c_hi, w=w, y=y))
    e = info.value
    assert e.node == c_lo.id
    assert e.problem == (f"the mechanisms on source X need epsilon=1.2 but the budget allows epsilon=1 (per node: "
                         f"{c_lo.id} epsilon=0.6, {c_hi.id} epsilon=0.6)")
    assert e.fix == f"lower the fixed cost of {c_lo.id} (or use weight=), or raise the budget"


def test_pure_shares_fold_one_sided_values_at_the_pure_factor() -> None:
    """Under replace-one a count moves by 1 in each piece (ratio 1) and a histogram by 1 of its full l1 2 (ratio
    1/2); in pure units the one-sided value is the share times the ratio (not its square, the zCDP factor).
    Weighted: max(1, 1, 1 + 1/2) = 3/2 per unit weight, shares 2/3; fixed: 3/5 and 4/5 fold to max(3/5, 4/5,
    3/5 + 2/5) = 1, exactly the budget (their plain sum, 7/5, would be refused)."""
    from dpflow.planner.certify import certify

    def plan(e_lo: Fraction | None, e_hi: Fraction | None) -> tuple[Any, Any, Any]:
        b, lo, hi = _two_pieces(dp.PureDP(1))
        c = dp.nodes.LaplaceMech(epsilon=e_lo)(dp.nodes.Count()(lo))
        h = dp.nodes.LaplaceMech(epsilon=e_hi)(dp.nodes.Histogram(edges=[2, 3, 4, 5])(hi))
        return b.build(c=c, h=h), c, h

    p, c, h = plan(None, None)
    cert = certify(p)
    assert cert.allocations[c.id].share == cert.allocations[h.id].share == Fraction(2, 3)
    p, c, h = plan(Fraction(3, 5), Fraction(4, 5))
    cert = certify(p)
    assert (cert.allocations[c.id].share, cert.allocations[h.id].share) == (Fraction(3, 5), Fraction(4, 5))
    assert cert.ledger.totals[0].pure_eps == 1


def _histogram_and_count() -> dp.Plan:
    """A Gaussian stability histogram (approximate zCDP, no privacy loss distribution) beside a Gaussian count."""
    b = dp.PlanBuilder(budget=dp.ApproxDP(1, Fraction(1, 10**6)))
    X = b.source("X", dp.Reals(), n=100)
    h = dp.nodes.GaussianStabilityHistogram(delta=Fraction(1, 10**8))(dp.nodes.BinCounts(width=1.0)(X))
    return b.build(h=h, g=dp.nodes.GaussianMech()(dp.nodes.Count()(X)))


def test_pld_search_with_a_cost_without_pld_falls_back() -> None:
    """A cost with no privacy loss distribution (approximate zCDP: the Gaussian stability histogram) ends the PLD
    search (no PLD total); the plan is then certified by the zCDP route (CKS at delta - delta0), never crashes."""
    from dpflow.planner.certify import certify

    assert certify(_histogram_and_count()).ledger.allocation.startswith("zCDP mode")


def test_pld_search_answers_a_repeated_total_as_the_first_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The PLD search memoises each total's composed costs (the search and the shortfall probes ask again): a
    second question at the same total must get the first answer, an admissible total its epsilon and a total
    where the PLD does not apply (a cost without PLD) infinity, not a cached placeholder."""
    import dpflow.planner.allocate as allocate
    from dpflow.planner.certify import certify

    real = allocate.largest_on_grid
    asked: list[float] = []

    def twice(f: Any, target: float, start: Fraction, *args: Any) -> Fraction | None:
        def g(x: Fraction) -> float:
            v = f(x)
            assert f(x) == v
            asked.append(v)
            return v
        return real(g, target, start, *args)

    monkeypatch.setattr(allocate, "largest_on_grid", twice)
    b = dp.PlanBuilder(budget=dp.ApproxDP(1, Fraction(1, 10**6)))
    X = b.source("X", dp.Vectors(d=2), n=1000)
    g = dp.nodes.GaussianMech()(dp.nodes.Sum()(dp.nodes.Clip(radius=1.0)(X)))
    c = dp.nodes.LaplaceMech()(dp.nodes.Count()(X))
    certify(b.build(g=g, c=c))
    assert asked and all(0 < v < math.inf for v in asked[:1])
    asked.clear()
    certify(_histogram_and_count())
    assert asked == [math.inf]


def test_pld_shortfall_is_proven_by_the_lower_bound_at_the_first_probe_above_the_budget() -> None:
    """The shortfall bound is y / found - 1 for the first probe y (8, 64, 512 grid steps above the total found)
    where the lower bound on every source's epsilon (``_epsilon_lower`` of the planner's own allocation and
    folds at y) exceeds the budget's epsilon: restated here from those parts."""
    from dpflow.planner.allocate import (
        SHORTFALL_PROBES,
        _epsilon_lower,
        allocate_budget,
        cost_leaf,
        pld_total,
        source_cost,
    )
    from dpflow.planner.certify import _Planner
    from dpflow.planner.modes import Accounting, ModeChoice
    from dpflow.privacy.calibration import _grid_floor, _grid_value

    b = dp.PlanBuilder(budget=dp.ApproxDP(Fraction(3, 10), Fraction(1, 10**6)))
    X = b.source("X", dp.Vectors(d=2), n=1000)
    counts = {f"c{w}": dp.nodes.LaplaceMech(weight=w)(dp.nodes.Count()(X)) for w in (1, 2, 3)}
    ctx = _Planner(b.build(**counts)).ctx
    search = pld_total(ctx, Fraction(1, 10**6))
    assert search is not None and search.shortfall is not None
    eps, delta = approx_dp_target(ctx.plan.budget)

    def lower(y: Fraction) -> float:
        allocations, _ = allocate_budget(ctx, ModeChoice(Accounting.PLD, y, ""))
        leaf = cost_leaf(ctx, allocations)
        return max(_epsilon_lower(source_cost(ctx, src, leaf), delta) for src in ctx.sources)

    j = _grid_floor(search.total)
    probes = [_grid_value(j + k) for k in SHORTFALL_PROBES]
    first = next(y for y in probes if lower(y) > eps)
    assert search.shortfall == first / search.total - 1
    assert first == probes[1]  # the first probe proves nothing here: the bound reads the lower bound
    assert all(lower(y) <= eps for y in probes[:probes.index(first)])


def test_run_cost_is_the_cost_itself_only_with_a_valid_profile_and_a_covered_lattice() -> None:
    """``run_cost``, the one statement of which cost a run is certified by (the ledger and the PLD search read
    it): the cost as it is only when both hold; a valid profile with an uncovered lattice drops a PLD holding a
    Gaussian event whole, an invalid profile gives the lattice events and no Gaussian-DP profile."""
    from dpflow.planner.allocate import run_cost
    from dpflow.privacy import Cost

    g = Cost.gaussian_zcdp(Fraction(1, 8)).then(Cost.pure(Fraction(1, 2)))
    assert run_cost(g, True, True) is g
    lat = run_cost(g, False, True)
    assert str(lat.pld) == "lattice_gaussian(1/4)x1; pure(1/2)x1" and lat.gdp_mu2 is None and lat.rho == g.rho
    assert run_cost(g, True, False).pld is None and run_cost(g, False, False).pld is None
    assert run_cost(g, True, False).gdp_mu2 is None
    p = Cost.pure(Fraction(1, 2))
    assert run_cost(p, False, False) == p  # no Gaussian event: nothing to drop


def test_worst_epsilon_over_sources() -> None:
    from dpflow.planner.allocate import _worst
    from dpflow.privacy import Cost

    seen: list[float] = []

    def eps_of(c: Cost, delta: float) -> float:
        seen.append(delta)
        return float(c.rho)

    assert _worst(None, eps_of, 0.25) == math.inf and _worst([], eps_of, 0.25) == 0.0
    assert _worst([Cost.zcdp(Fraction(1, 4)), Cost.zcdp(Fraction(3, 4)), Cost.zcdp(Fraction(1, 2))], eps_of,
                  0.25) == 0.75
    assert seen == [0.25] * 3


def test_pld_search_does_not_apply_when_the_own_delta0_reaches_the_budget_delta() -> None:
    """A Laplace stability histogram claiming the whole delta (delta0 = delta, a float the budget holds exactly):
    the PLD search reports no total (``None``) instead of asking for an epsilon at delta = delta0 (which
    ``Cost.epsilon_at`` refuses); the plan is then refused by the zCDP route with the fix named."""
    from dpflow.planner.allocate import pld_total
    from dpflow.planner.certify import _Planner

    delta = 2.0 ** -20
    b = dp.PlanBuilder(budget=dp.ApproxDP(1.0, delta))
    X = b.source("X", dp.Reals(), n=1000)
    plan = b.build(h=dp.nodes.StabilityHistogram(delta=delta)(dp.nodes.BinCounts(width=1.0)(X)),
                   c=dp.nodes.LaplaceMech()(dp.nodes.Count()(X)))
    assert pld_total(_Planner(plan).ctx, Fraction(1, 10**6)) is None
    with pytest.raises(BudgetError, match="leaves nothing of the budget's delta"):
        dp.certify(plan)
