"""The two accountings of the iterative estimators: basic (epsilon, delta) composition (the paper's
epsilon/T, delta/T per step) and zCDP (the default).  Property tests of the basic fields of Cost,
the planner's basic mode, and the ledgers of the regression plans."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpflow as dp
from dpflow import nodes as N
from dpflow.estimators.regression import niht, noisy_gd
from dpflow.planner.certify import certify
from dpflow.privacy import Cost, gaussian_dp_delta

SETTINGS = settings(max_examples=60, deadline=None)
EPS = st.fractions(min_value=Fraction(1, 1000), max_value=3, max_denominator=10**6)
DELTA = st.fractions(min_value=Fraction(1, 10**9), max_value=Fraction(1, 100), max_denominator=10**12)
EVENT = st.one_of(
    st.builds(Cost.pure, EPS),
    st.builds(Cost.approx_dp, EPS, DELTA),
    st.builds(lambda r, e, d: Cost.zcdp(r).with_basic(e, d), EPS, EPS, DELTA),
)


@SETTINGS
@given(st.lists(EVENT, min_size=1, max_size=6))
def test_basic_fields_add_under_sequential_composition(events: list[Cost]) -> None:
    tot = Cost.sequential(events)
    assert tot.basic_eps == sum((c.basic_eps for c in events), Fraction(0))   # type: ignore[misc]
    assert tot.basic_delta == sum((c.basic_delta for c in events), Fraction(0))
    assert events[0].then(Cost.zero()) == events[0]
    k = 3
    assert events[0].scaled(k).basic_eps == k * events[0].basic_eps             # type: ignore[operator]


@SETTINGS
@given(st.lists(EVENT, min_size=1, max_size=5))
def test_basic_fields_under_parallel_composition(events: list[Cost]) -> None:
    rep = Cost.parallel(events, "replace")
    ar = Cost.parallel(events, "add_remove")
    eps = sorted((c.basic_eps for c in events), reverse=True)                  # type: ignore[type-var]
    assert ar.basic_eps == eps[0] and rep.basic_eps == sum(eps[:2], Fraction(0))
    assert ar.basic_delta <= rep.basic_delta <= Cost.sequential(events).basic_delta


@SETTINGS
@given(EPS, DELTA)
def test_basic_conversion_is_listed_at_its_own_delta(e: Fraction, d: Fraction) -> None:
    c = Cost.zcdp(e * e / 100).with_basic(e, d)
    rules = {x.rule: x for x in c.epsilon_at(float(d) * 2)}
    assert "basic composition (epsilon, delta)" in rules
    assert rules["basic composition (epsilon, delta)"].delta >= float(d)
    assert "basic composition (epsilon, delta)" not in {x.rule for x in c.epsilon_at(float(d) / 2)}
    assert c.group(2).basic_eps is None and c.group(1) == c                    # delta growth not used


def test_a_delta_that_reaches_one_is_dropped() -> None:
    c = Cost.approx_dp(Fraction(1), Fraction(1, 3)).scaled(3)
    assert c.basic_eps is None


def _peel_plan(budget: dp.ApproxDP, accounting: str, times: int = 11, round_weights: list[float] | None = None,
               fixed: bool = False) -> dp.Plan:
    b = dp.PlanBuilder(budget=budget, accounting=accounting)
    X = b.source("X", dp.Vectors(d=30), n=1000)

    def body(rows, state, k):  # type: ignore[no-untyped-def]
        peel = N.Peel(s=3, epsilon="0.01") if fixed else N.Peel(s=3)
        return peel(N.Mean()(N.Clip(box=(-1, 1))(rows)))

    return b.build(out=N.repeat(X, b.public([0.0] * 30), body, times=times, round_weights=round_weights))


def test_basic_mode_gives_every_round_eps_over_t_and_composes_to_the_budget() -> None:
    budget = dp.ApproxDP(1.0, 1e-5)
    ledger = _peel_plan(budget, "basic").check()
    assert ledger.allocation.startswith("basic (epsilon, delta) mode")
    entry = next(e for e in ledger.entries if e.kind == "Peel")
    assert "per round" in entry.cost and "per unit round weight" in entry.cost
    tot = ledger.totals[0]
    rules = {c.rule: c for c in tot.conversions}
    # the paper's accounting and the zCDP view of the same noise, side by side
    assert "zCDP -> (eps,delta) by CKS" in rules
    assert rules["zCDP -> (eps,delta) by CKS"].epsilon <= 1.0
    cert = certify(_peel_plan(budget, "basic"))
    (alloc,) = cert.allocations.values()
    assert alloc.cost.basic_eps == Fraction(1.0) / 11
    assert alloc.cost.basic_delta * 11 <= Fraction(1e-5)


def test_auto_mode_prefers_zcdp_over_many_rounds_of_peel() -> None:
    ledger = _peel_plan(dp.ApproxDP(1.0, 1e-5), "auto").check()
    assert ledger.allocation.startswith("PLD mode")  # rho shares (as zCDP mode), the total found through the PLD
    one_round = _peel_plan(dp.ApproxDP(1.0, 1e-5), "auto", times=1).check()
    # s = 3, one round: the 2s pure steps' exact composition (rounded to the PLD grid once, issue 16) meets
    # (1, 1e-5) at a pure epsilon slightly above 1 (1.0002), so PLD mode is a hair less noisy than pure mode
    assert one_round.allocation.startswith("PLD mode")
    (t,) = one_round.totals
    assert t.pure_eps is not None and 1 < t.pure_eps < Fraction(10003, 10000) and t.tightest().epsilon <= 1.0


def test_basic_mode_refusals() -> None:
    with pytest.raises(dp.PlanTypeError, match="ApproxDP"):
        b = dp.PlanBuilder(budget=dp.ZCDP(0.5), accounting="basic")
        X = b.source("X", dp.Vectors(d=2), n=10)
        b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))).check()
    with pytest.raises(dp.PlanTypeError, match="round weights"):
        _peel_plan(dp.ApproxDP(1.0, 1e-5), "basic", times=2, round_weights=[1, 2]).check()
    with pytest.raises(dp.PlanTypeError, match="fixed-cost"):
        _peel_plan(dp.ApproxDP(1.0, 1e-5), "basic", fixed=True).check()
    with pytest.raises(ValueError, match="accounting"):
        dp.PlanBuilder(budget=dp.ZCDP(0.5), accounting="paper")


def test_accounting_round_trips_and_keeps_old_hashes() -> None:
    basic = _peel_plan(dp.ApproxDP(1.0, 1e-5), "basic")
    auto = _peel_plan(dp.ApproxDP(1.0, 1e-5), "auto")
    assert dp.Plan.from_json(basic.to_json()).accounting == "basic"
    assert "accounting" not in auto.to_json() and basic.hash != auto.hash


def test_noisy_gd_ledgers_show_per_iteration_costs_and_both_accountings() -> None:
    n, T = 50_000, 11
    kw = dict(d=10, n=n, x_bound=3**0.5, coef_bound=2.0, response_bound=4.0, iterations=T)
    paper = certify(noisy_gd(budget=dp.ApproxDP(0.5, n**-1.1), accounting="basic", **kw))  # type: ignore[arg-type]
    zcdp = certify(noisy_gd(budget=dp.ApproxDP(0.5, n**-1.1), **kw))  # type: ignore[arg-type]
    (pa,) = paper.allocations.values()
    (za,) = zcdp.allocations.values()
    # paper: each step is (eps/T, delta/T)-DP by the exact Gaussian profile
    assert pa.cost.basic_eps == Fraction(0.5) / T
    mu = float(2 * pa.share) ** 0.5
    assert gaussian_dp_delta(mu, 0.5 / T) <= n**-1.1 / T
    # zCDP across iterations: each step gets rho/T, about T times the variance budget of eps/T steps
    assert za.share / pa.share > 3
    assert "per unit round weight" in next(e.cost for e in zcdp.ledger.entries if e.kind == "GaussianMech")
    assert "exact Gaussian-DP" in zcdp.ledger.allocation


def test_niht_ledger_and_bad_input() -> None:
    plan = niht(d=200, n=20_000, s=5, budget=dp.ZCDP(0.5), x_bound=3**0.5, coef_bound=2.0)
    ledger = plan.check()
    peel = next(e for e in ledger.entries if e.kind == "Peel")
    assert "linf (lambda)" in peel.sensitivity and "every round" in peel.rule
    with pytest.raises(ValueError, match="sparsity"):
        niht(d=5, n=100, s=6, budget=dp.ZCDP(0.5), x_bound=1.0, coef_bound=1.0)
    with pytest.raises(ValueError, match="x_bound"):
        niht(d=5, n=100, s=2, budget=dp.ZCDP(0.5), x_bound=float("nan"), coef_bound=1.0)
    with pytest.raises(ValueError, match="coef_bound"):
        noisy_gd(d=5, n=100, budget=dp.ZCDP(0.5), x_bound=1.0, coef_bound=float("inf"))
