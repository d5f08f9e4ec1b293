"""Privacy loss distributions (issue 16, first part): dpflow.privacy.pld and the PLD figure in every ledger total.

Cross-checks against Google's dp_accounting (its own ``PLDAccountant`` and optimistic PLDs), soundness
against exact values, monotonicity, the fold rules of ``Cost`` in PLD form, and validity in the planner
(no Gaussian PLD where a run may draw the discrete Gaussian).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from dp_accounting import dp_event, privacy_accountant
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.pld import privacy_loss_distribution as dp_pld

import dpflow as dp
from dpflow import estimators
from dpflow import nodes as N
from dpflow.estimators import gaussian as G
from dpflow.planner.ledger import Ledger, cost_from_data, cost_to_data
from dpflow.privacy import (
    PLD_RULE,
    ApproxPLD,
    Cost,
    GaussianPLD,
    LaplacePLD,
    LatticeGaussianPLD,
    PldEvents,
    PurePLD,
    gaussian_dp_epsilon,
    pld_epsilon,
)
from dpflow.privacy import pld as pld_mod
from dpflow.privacy.pld import PldEvent

REPLACE_ONE = privacy_accountant.NeighboringRelation.REPLACE_ONE


def _pld_conv(cost: Cost, delta: float) -> float | None:
    found = [c.epsilon for c in cost.epsilon_at(delta) if c.rule == PLD_RULE]
    return found[0] if found else None


# --------------------------------------------------------------------------- dp_accounting references

def _library_epsilon(events: PldEvents, delta: float) -> float:
    """dp_accounting's PLD library on the same events, one PLD per event kind, self-composed by count:
    the Gaussian (add/remove, sigma = 1/mu) and binary randomized response (REPLACE_ONE) for pure epsilon."""
    plds = []
    for e, k in events.counts:
        if isinstance(e, GaussianPLD):
            p = dp_pld.from_gaussian_mechanism(1 / math.sqrt(float(e.mu2)), value_discretization_interval=1e-4)
        else:
            assert isinstance(e, PurePLD)
            p = dp_pld.from_randomized_response(2.0 / (1.0 + math.exp(float(e.epsilon))), 2,
                                                value_discretization_interval=1e-4)
        plds.append(p.self_compose(k) if k > 1 else p)
    total = plds[0]
    for p in plds[1:]:
        total = total.compose(p)
    return float(total.get_epsilon_for_delta(delta * (1 - pld_mod.DELTA_NUMERICAL_RESERVE)))


def _accountant_epsilon(events: PldEvents, delta: float) -> float:
    """dp_accounting's own PLDAccountant on the same events (REPLACE_ONE: randomized response for pure
    epsilon; the Gaussian's REPLACE_ONE shift is 2 / noise_multiplier, so noise_multiplier = 2 / mu).
    Its randomized-response branch ignores self-composition counts (dp-accounting 0.6.0), so a pure
    event is composed once per count."""
    acc = pld_privacy_accountant.PLDAccountant(REPLACE_ONE, value_discretization_interval=1e-4)
    for e, k in events.counts:
        if isinstance(e, GaussianPLD):
            acc.compose(dp_event.GaussianDpEvent(2.0 / math.sqrt(float(e.mu2))), k)
        else:
            assert isinstance(e, PurePLD)
            for _ in range(k):
                acc.compose(dp_event.RandomizedResponseDpEvent(2.0 / (1.0 + math.exp(float(e.epsilon))), 2))
    return float(acc.get_epsilon(delta * (1 - pld_mod.DELTA_NUMERICAL_RESERVE)))


def _optimistic_epsilon(events: PldEvents, delta: float) -> float:
    """dp_accounting's optimistic PLD (privacy buckets, losses rounded down): below the true epsilon."""
    plds = []
    for e, k in events.counts:
        if isinstance(e, GaussianPLD):
            p = dp_pld.from_gaussian_mechanism(1 / math.sqrt(float(e.mu2)), pessimistic_estimate=False,
                                               use_connect_dots=False)
        else:
            assert isinstance(e, PurePLD)
            p = dp_pld.from_randomized_response(2.0 / (1.0 + math.exp(float(e.epsilon))), 2,
                                                pessimistic_estimate=False)
        plds.append(p.self_compose(k) if k > 1 else p)
    total = plds[0]
    for p in plds[1:]:
        total = total.compose(p)
    return float(total.get_epsilon_for_delta(delta))


def _walk(ledger: Ledger) -> list[Cost]:
    """Each source's composed cost as a continuous-noise run would have it (the planner's fold of the
    ledger's composition tree, before the lattice drop)."""
    from dpflow.planner.ledger import recompose

    out = []
    for t in ledger.totals:
        assert t.composition is not None
        out.append(recompose(t.composition, ledger.neighbors))
    return out


# ten+ plans of the estimator library; the cross-check uses their composed PLD events
ESTIMATOR_PLANS: dict[str, Callable[[], dp.Plan]] = {
    "clipped_mean_zcdp": lambda: estimators.clipped_mean(3, 1000, dp.ZCDP(0.5), mean_bound=1.0),
    "clipped_mean_approx": lambda: estimators.clipped_mean(3, 1000, dp.ApproxDP(1, 1e-6), mean_bound=1.0),
    "naive_pce": lambda: estimators.naive_pce(3, 1000, dp.ZCDP(0.5), kappa=2.0),
    "naive_product": lambda: estimators.product.naive_product(3, 1000, dp.ZCDP(0.5)),
    "sparse_mean": lambda: estimators.sparse_mean(20, 1000, 3, dp.ApproxDP(1, 1e-6), radius=2.0),
    "sparse_mean_zcdp": lambda: estimators.sparse_mean(20, 1000, 3, dp.ZCDP(0.5), radius=2.0),
    "laplace_histogram": lambda: estimators.discrete.laplace_histogram(16, 1000, dp.PureDP(1)),
    "merr": lambda: estimators.discrete.merr(N=1000, n=1000, budget=dp.PureDP(1.0), T=6),
    "coinpress_gaussian": lambda: G.gaussian(d=2, n=4000, budget=dp.ApproxDP(1, 1e-6), R=10.0, K=30.0),
    "coinpress_covariance": lambda: G.covariance(d=2, n=3000, budget=dp.ZCDP(0.5), K=30.0),
    "coinpress_mean": lambda: G.mean(d=3, n=3000, budget=dp.ZCDP(0.5), R=10.0),
    "ppde": lambda: estimators.product.ppde(4, 2000, dp.ZCDP(0.5)),
}


def _plan_events() -> list[tuple[str, PldEvents]]:
    out = []
    for name, make in sorted(ESTIMATOR_PLANS.items()):
        for cost in _walk(make().check()):
            if cost.pld is not None and cost.pld.counts and all(
                    isinstance(e, (GaussianPLD, PurePLD)) for e, _ in cost.pld.counts):
                out.append((name, cost.pld))
    return out


def test_enough_estimator_plans_have_a_pld() -> None:
    assert len({name for name, _ in _plan_events()}) >= 10


@pytest.mark.parametrize(("name", "events"), _plan_events(), ids=lambda x: x if isinstance(x, str) else "")
def test_pld_epsilon_matches_dp_accounting_accountant_on_estimator_plans(name: str, events: PldEvents) -> None:
    ours = pld_epsilon(events, 1e-6)
    assert ours == pytest.approx(_library_epsilon(events, 1e-6), rel=1e-3)
    if sum(k for e, k in events.counts if isinstance(e, PurePLD)) <= 40:  # the accountant composes RR one by one
        assert ours == pytest.approx(_accountant_epsilon(events, 1e-6), rel=1e-3)
    assert ours >= _optimistic_epsilon(events, 1e-6)


def test_enough_plans_are_cross_checked_with_the_accountant_itself() -> None:
    small = {name for name, ev in _plan_events()
             if sum(k for e, k in ev.counts if isinstance(e, PurePLD)) <= 40}
    assert len(small) >= 10


# --------------------------------------------------------------------------- soundness and pins

@pytest.mark.parametrize(("mu", "delta"), [(1.0, 1e-6), (0.3, 1e-5), (2.0, 1e-9), (0.05, 1e-6)])
def test_single_gaussian_is_never_below_the_exact_gaussian_dp_epsilon(mu: float, delta: float) -> None:
    ev = PldEvents.of([GaussianPLD(Fraction(mu) ** 2)])
    exact = gaussian_dp_epsilon(mu, delta)  # Balle-Wang 2018 Thm 8, outward rounded
    ours = pld_epsilon(ev, delta)
    assert ours >= exact
    assert ours <= exact * (1 + 2e-3) + 1e-3


def test_pure_composition_is_never_below_the_exact_randomized_response() -> None:
    # 10-fold RR(0.1) at delta = 1e-6: only the top atom L = 1 exceeds the epsilon, so the exact epsilon is
    # 1 + ln(1 - delta / P[L = 1]) (Kairouz-Oh-Viswanath 2015); the PLD must not undercut it
    top = (math.exp(0.1) / (1 + math.exp(0.1))) ** 10
    exact = 1 + math.log(1 - 1e-6 / top)
    ours = pld_epsilon([(PurePLD(Fraction(1, 10)), 10)], 1e-6)
    assert exact <= ours <= exact + 1e-5


def test_pessimistic_grid_and_delta_reserve_are_pinned() -> None:
    assert pld_mod.VALUE_DISCRETIZATION_INTERVAL == 1e-4
    assert pld_mod.DELTA_NUMERICAL_RESERVE == 1e-3
    g = dp_pld.from_gaussian_mechanism(2.0, pessimistic_estimate=True, value_discretization_interval=1e-4)
    ref = g.get_epsilon_for_delta(1e-6 * (1 - 1e-3))
    ours = pld_epsilon([GaussianPLD(Fraction(1, 4))], 1e-6)
    assert ref < ours <= ref * (1 + 1e-9)  # rounded up, by no more than the margin


def test_pure_event_uses_the_worst_case_not_the_laplace_pld() -> None:
    # the Laplace-specific PLD is tighter, and valid only for one-dimensional continuous Laplace
    pure = pld_epsilon([(PurePLD(Fraction(1, 10)), 100)], 1e-6)
    lap = pld_epsilon([(LaplacePLD(Fraction(1, 10)), 100)], 1e-6)
    assert lap < pure
    assert lap == pytest.approx(4.6927, abs=2e-3)  # accounting.md 1.4: PLD, Laplace-specific
    assert pure < 4.8  # the optimal generic composition (KOV 2015) grid point is 4.8


def test_approx_event_has_its_delta_at_infinity() -> None:
    ev = [(ApproxPLD(Fraction(1, 2), Fraction(1, 10**7)), 5)]
    assert pld_epsilon(ev, 1e-6) < 2.5
    assert pld_epsilon(ev, 4e-7) == math.inf  # 5e-7 of the mass is at +inf


@pytest.mark.parametrize("events", [
    [(GaussianPLD(Fraction(1, 3)), 2), PurePLD(Fraction(1, 2))],
    [(PurePLD(Fraction(1, 5)), 7)],
    [(ApproxPLD(Fraction(1, 3), Fraction(1, 10**8)), 3), GaussianPLD(Fraction(1, 2))],
])
def test_monotone_in_delta_and_in_composition_count(events: list[PldEvent | tuple[PldEvent, int]]) -> None:
    ev = PldEvents.of(events)
    by_delta = [pld_epsilon(ev, d) for d in (1e-3, 1e-4, 1e-5, 1e-6, 1e-7)]
    assert by_delta == sorted(by_delta)
    by_count = [pld_epsilon(ev.scaled(k), 1e-6) for k in (1, 2, 3, 5)]
    assert by_count == sorted(by_count) and by_count[0] < by_count[-1]


def test_limits_give_no_figure() -> None:
    assert pld_epsilon([(PurePLD(Fraction(30)), 2)], 1e-6) == math.inf  # loss width 120 > 100 nats
    many = Cost.sequential([Cost.pure(Fraction(1, 1000 + i)) for i in range(pld_mod.MAX_DISTINCT_EVENTS + 1)])
    assert many.pld is None
    assert Cost.sequential([Cost.pure(Fraction(1, 1000 + i)) for i in range(pld_mod.MAX_DISTINCT_EVENTS)]).pld


# --------------------------------------------------------------------------- the issue's example

def test_issue_example_two_gaussians_and_a_laplace_at_rho_half() -> None:
    # total rho = 0.5 shared equally: two Gaussians (rho 1/6: mu^2 = 1/3) and a Laplace (eps = sqrt(1/3))
    eps_lap = Fraction(math.sqrt(1 / 3))
    cost = Cost.sequential([Cost.gaussian_zcdp(Fraction(1, 6)), Cost.gaussian_zcdp(Fraction(1, 6)),
                            Cost.pure(eps_lap)])
    convs = {c.rule: c for c in cost.epsilon_at(1e-6)}
    assert convs["zCDP -> (eps,delta) by CKS"].epsilon == pytest.approx(5.2215, abs=1e-3)
    assert convs[PLD_RULE].tightest
    # the worst-case pure-DP PLD for the Laplace; the issue's "about 4.54" is not reproduced by this split
    ev = PldEvents.of([(GaussianPLD(Fraction(1, 3)), 2), PurePLD(eps_lap)])
    ref = _accountant_epsilon(ev, 1e-6)
    assert convs[PLD_RULE].epsilon == pytest.approx(ref, rel=1e-6)
    assert convs[PLD_RULE].epsilon == pytest.approx(4.3855, abs=1e-3)


def test_plan_with_continuous_gaussian_reports_the_pld() -> None:
    # basic (epsilon, delta) accounting calibrates Gaussians by the exact GDP profile: continuous noise
    b = dp.PlanBuilder(budget=dp.ApproxDP(1, "1/1000000"), accounting="basic")
    X = b.source("X", dp.Vectors(d=2), n=100)
    plan = b.build(g=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))),
                   l=N.LaplaceMech(weight=2)(N.Mean()(N.Clip(radius=1.0)(X))))
    (total,) = plan.check(exact_noise=False).totals
    assert total.cost.pld is not None and total.cost.pld.has_gaussian
    assert total.tightest().rule == PLD_RULE and total.tightest().epsilon < 1.0


def test_lattice_gaussian_run_claims_the_lattice_pld() -> None:
    # under a zCDP budget an exact noise source draws the discrete Gaussian: no GDP, the lattice Gaussian PLD
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=100)
    plan = b.build(g1=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))),
                   g2=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))),
                   l=N.LaplaceMech()(N.Mean()(N.Clip(radius=1.0)(X))))
    ledger = plan.check(exact_noise=False)
    (total,) = ledger.totals
    assert total.cost.gdp_mu2 is None
    assert total.cost.pld is not None and not total.cost.pld.has_gaussian and total.cost.pld.has_lattice_gaussian
    assert PLD_RULE in {c.rule for c in total.conversions}
    assert not any("no privacy-loss-distribution (PLD) figure" in n for n in ledger.composition)
    # the fold itself had the (continuous-noise) PLD: the planner made it the lattice one, same mu^2
    (walked,) = _walk(ledger)
    assert walked.pld is not None and walked.pld.has_gaussian
    assert walked.pld.on_lattice() == total.cost.pld


def test_pure_plan_total_has_the_pld() -> None:
    ledger = estimators.discrete.merr(N=1000, n=1000, budget=dp.PureDP(1.0), T=6).check()
    (total,) = ledger.totals
    assert total.cost.pld is not None
    assert PLD_RULE in {c.rule for c in total.conversions}
    assert not any("no privacy-loss-distribution" in n for n in ledger.composition)


# --------------------------------------------------------------------------- Cost folds in PLD form

def _ev(c: Cost) -> PldEvents:
    assert c.pld is not None
    return c.pld


def test_constructors_carry_the_right_event() -> None:
    assert _ev(Cost.gaussian(Fraction(1), Fraction(2))) == PldEvents.of([GaussianPLD(Fraction(1, 4))])
    assert _ev(Cost.gaussian_zcdp(Fraction(1, 8))) == PldEvents.of([GaussianPLD(Fraction(1, 4))])
    assert _ev(Cost.pure(Fraction(1, 3))) == PldEvents.of([PurePLD(Fraction(1, 3))])
    assert _ev(Cost.approx_dp(Fraction(1), Fraction(1, 10**6))) == PldEvents.of(
        [ApproxPLD(Fraction(1), Fraction(1, 10**6))])
    assert _ev(Cost.zero()).counts == ()
    assert Cost.zcdp(Fraction(1, 2)).pld is None
    assert Cost.approx_zcdp(Fraction(1, 2), Fraction(1, 10**6)).pld is None
    assert Cost.pure(Fraction(1)).group(2).pld is None and Cost.pure(Fraction(1)).group(1).pld is not None
    assert Cost.zcdp(Fraction(1, 8)).then(Cost.pure(Fraction(1))).pld is None


def test_sequential_and_scaled_add_the_multisets() -> None:
    p, g = Cost.pure(Fraction(1, 2)), Cost.gaussian_zcdp(Fraction(1, 8))
    c = p.then(g).then(p).scaled(3)
    assert _ev(c) == PldEvents.of([(PurePLD(Fraction(1, 2)), 6), (GaussianPLD(Fraction(1, 4)), 3)])
    assert _ev(Cost.zero().then(p)) == _ev(p)


def test_parallel_rules() -> None:
    a, b = Cost.pure(Fraction(1, 2)), Cost.pure(Fraction(1, 3))
    ab = a.then(b)
    z = Cost.zero()
    # identical pieces: add/remove -> the piece; replace -> the piece twice
    assert _ev(Cost.parallel([a, a, a], "add_remove")) == _ev(a)
    assert _ev(Cost.parallel([a, a, a], "replace")) == _ev(a.scaled(2))
    # a piece that charges nothing is dominated; one charged piece is itself under either relation
    assert _ev(Cost.parallel([a, z], "replace")) == _ev(a)
    # a chain of sub-multisets: the largest (add/remove), the largest two (replace)
    assert _ev(Cost.parallel([a, ab, ab.then(b)], "add_remove")) == _ev(ab.then(b))
    assert _ev(Cost.parallel([a, ab, ab.then(b)], "replace")) == _ev(ab.then(ab.then(b)))
    # a chain by dominance (the same family at smaller parameters): the largest, the largest two
    assert _ev(Cost.parallel([a, b], "add_remove")) == _ev(a)
    assert _ev(Cost.parallel([a, b, a], "replace")) == _ev(a.scaled(2))
    # pieces that are not a chain: the sequential composition of all of them (valid, looser)
    g = Cost.gaussian_zcdp(Fraction(1, 8))
    assert _ev(Cost.parallel([a, g], "add_remove")) == _ev(a.then(g))
    assert _ev(Cost.parallel([a, g, a], "replace")) == _ev(a.then(g).then(a))
    # a piece with no PLD: none
    assert Cost.parallel([a, Cost.zcdp(Fraction(1, 8))], "add_remove").pld is None


def test_parallel_never_reports_more_than_sequential() -> None:
    a, b = Cost.pure(Fraction(1, 2)), Cost.pure(Fraction(1, 3))
    for rel in ("add_remove", "replace"):
        par = _pld_conv(Cost.parallel([a, b], rel), 1e-6)  # type: ignore[arg-type]
        seq = _pld_conv(a.then(b), 1e-6)
        assert par is not None and seq is not None and par <= seq


def test_for_lattice_noise() -> None:
    g, p = Cost.gaussian_zcdp(Fraction(1, 8)), Cost.pure(Fraction(1, 2))
    assert g.then(p).for_lattice_noise().pld == PldEvents.of([LatticeGaussianPLD(Fraction(1, 4)), p_event(p)])
    assert g.for_lattice_noise().gdp_mu2 is None and g.for_lattice_noise().rho == g.rho
    assert p.for_lattice_noise() == p
    h = Cost.approx_dp(Fraction(1, 2), Fraction(1, 10**6))
    assert h.for_lattice_noise().pld == h.pld
    assert Cost.zcdp(Fraction(1, 8)).for_lattice_noise().pld is None


def p_event(c: Cost) -> PurePLD:
    ((e, _),) = _ev(c).counts
    assert isinstance(e, PurePLD)
    return e


def test_epsilon_at_marks_the_pld_tightest_only_when_it_is() -> None:
    gauss = {c.rule: c for c in Cost.gaussian_zcdp(Fraction(1, 2)).epsilon_at(1e-6)}
    assert gauss["exact Gaussian-DP"].tightest and not gauss[PLD_RULE].tightest  # Gaussian-only: GDP is exact
    mixed = {c.rule: c for c in Cost.gaussian_zcdp(Fraction(1, 4)).then(Cost.pure(Fraction(1, 2))).epsilon_at(1e-6)}
    assert mixed[PLD_RULE].tightest
    assert mixed[PLD_RULE].epsilon < mixed["zCDP -> (eps,delta) by CKS"].epsilon
    assert "dp_accounting" in mixed[PLD_RULE].reference and "Doroshenko" in mixed[PLD_RULE].reference


def test_pld_round_trips_through_the_ledger_json() -> None:
    c = Cost.gaussian_zcdp(Fraction(1, 3)).then(Cost.pure(Fraction(2, 7))).then(
        Cost.approx_dp(Fraction(1, 5), Fraction(1, 10**6))).scaled(2)
    back = cost_from_data(json.loads(json.dumps(cost_to_data(c))))
    assert back == c and back.pld == c.pld
    assert cost_from_data(json.loads(json.dumps(cost_to_data(Cost.zcdp(Fraction(1, 3)))))).pld is None
    assert cost_from_data(json.loads(json.dumps(cost_to_data(Cost.zero())))).pld == PldEvents(())
    with pytest.raises(ValueError, match="not a PLD event"):
        PldEvents.parse("weird(1)x2")


def test_events_validate_their_parameters() -> None:
    with pytest.raises(ValueError):
        GaussianPLD(Fraction(0))
    with pytest.raises(ValueError):
        PurePLD(Fraction(-1))
    with pytest.raises(ValueError):
        ApproxPLD(Fraction(1), Fraction(0))
    with pytest.raises(ValueError):
        PldEvents.of([(PurePLD(Fraction(1)), -1)])
    with pytest.raises(ValueError):
        pld_epsilon([PurePLD(Fraction(1))], 0.0)


def test_certifying_stays_fast_with_many_pure_mechanisms() -> None:
    import time

    b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    X = b.source("X", dp.Vectors(d=2), n=100)
    outs = {f"m{i}": N.LaplaceMech(weight=1 + i % 3)(N.Mean()(N.Clip(radius=1.0)(X))) for i in range(300)}
    plan = b.build(**outs)
    t0 = time.perf_counter()
    (total,) = plan.check().totals
    assert time.perf_counter() - t0 < 5.0
    assert total.cost.pld is not None and len(total.cost.pld.counts) == 3
    assert np.isfinite(total.tightest().epsilon)


def test_privacy_convert_all_shows_the_gaussian_pld_and_says_plain_zcdp_has_none(
        capsys: pytest.CaptureFixture[str]) -> None:
    from dpflow.cli import main

    assert main(["privacy", "convert", "--rho", "0.5", "--delta", "1e-6", "--all"]) == 0
    out = capsys.readouterr().out
    generic, gaussian = out.split("a continuous Gaussian mechanism with this rho")
    assert "no PLD: a generic rho-zCDP guarantee has no privacy loss distribution" in generic
    assert PLD_RULE not in generic.replace("no PLD", "")
    lines = {line.split("\t")[1].split("  (")[0]: float(line.split("\t")[0])
             for line in gaussian.splitlines() if "\t" in line}
    assert lines[PLD_RULE] == pytest.approx(4.8868, abs=1e-3)
    assert "exact Gaussian-DP  (tightest valid)" in gaussian


# --------------------------------------------------------------------------- speed without changing a number

@pytest.mark.parametrize("sigma", [0.15, 0.5, 1.0, 2.7, 40.0])
def test_vectorised_gaussian_pld_is_dp_accountings_own(sigma: float) -> None:
    """``_gaussian_pld`` evaluates the hockey-stick divergence on the whole grid at once; it must build
    exactly the PMF of ``from_gaussian_mechanism`` (pessimistic, connect-the-dots, its defaults)."""
    ref = dp_pld.from_gaussian_mechanism(sigma, sensitivity=1.0, pessimistic_estimate=True,
                                         value_discretization_interval=pld_mod.VALUE_DISCRETIZATION_INTERVAL)
    ours = pld_mod._gaussian_pld(sigma)
    a, b = ref._pmf_remove, ours._pmf_remove
    assert a._lower_loss == b._lower_loss and a._infinity_mass == b._infinity_mass
    np.testing.assert_array_equal(a._probs, b._probs)
    assert ref.get_epsilon_for_delta(1e-6) == ours.get_epsilon_for_delta(1e-6)


def test_sequential_groups_repeated_costs_into_self_compositions() -> None:
    """Many copies of the same cost object compose as one self-composition each: the same Cost, exactly."""
    g, p = Cost.gaussian_zcdp(Fraction(1, 30)), Cost.pure(Fraction(1, 7))
    many = [g, p, g, g, p, g, g, g, p, g, Cost.pure(Fraction(1, 7))]
    one_by_one = Cost.zero()
    for c in many:
        one_by_one = one_by_one.then(c)
    assert Cost.sequential(many) == one_by_one
    assert Cost.sequential(many).pld == PldEvents.of([(GaussianPLD(Fraction(1, 15)), 7), (PurePLD(Fraction(1, 7)), 4)])


def _exact_rr_power_epsilon(eps: float, k: int, delta: float) -> float:
    """The exact epsilon at delta of k-fold epsilon randomized response (Kairouz, Oh & Viswanath 2015, Thm. 3.3):
    delta(e) = sum_j P[J = j] (1 - e^(e - (2j - k) eps))_+, J ~ Binomial(k, e^eps / (1 + e^eps)); bisection."""
    from scipy.stats import binom

    j = np.arange(k + 1)
    loss, p = (2 * j - k) * eps, binom.pmf(j, k, 1 / (1 + math.exp(-eps)))

    def hockey(e: float) -> float:
        return float(np.sum(p * np.clip(1 - np.exp(e - loss), 0, None)))

    lo, hi = 0.0, k * eps
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if hockey(mid) > delta else (lo, mid)
    return hi


@pytest.mark.parametrize(("eps", "k"), [(0.0029845, 833), (0.00987, 300), (0.1, 10), (0.25, 40), (1.0, 3)])
def test_pure_self_composition_is_rounded_once(eps: float, k: int) -> None:
    """k copies of a pure event are one exactly-known law (KOV 2015), rounded to the loss grid once: never below
    the exact epsilon, at most about one grid step above it, where composing k rounded copies errs by up to k
    steps (dp_accounting's ``self_compose`` of ``from_privacy_parameters``: 0.0029845 is rounded to 0.003, and
    833 copies end 4% above)."""
    e = Fraction(eps)
    exact = _exact_rr_power_epsilon(float(e), k, 1e-6 * (1 - pld_mod.DELTA_NUMERICAL_RESERVE))
    ours = pld_epsilon([(PurePLD(e), k)], 1e-6)
    v = pld_mod.VALUE_DISCRETIZATION_INTERVAL
    assert exact * (1 - 1e-9) <= ours <= exact + 2 * v  # 1e-9: float error of the two hockey-stick sums
    lower = pld_mod.pld_epsilon_lower(PldEvents.of([(PurePLD(e), k)]), 1e-6)
    assert exact - 5 * v <= lower <= _exact_rr_power_epsilon(float(e), k, 1e-6)
    rr = dp_pld.from_privacy_parameters(dp_pld.common.DifferentialPrivacyParameters(float(e), 0.0))
    library = float(rr.self_compose(k).get_epsilon_for_delta(1e-6 * (1 - 1e-3)))
    # dp_accounting rounds float(0.1) to 1000 grid steps: one step under ours at k = 10
    assert ours <= library + v * (1 + 1e-6)
    if k > 100:
        assert ours < library - 50 * v  # where k rounded copies cost dp_accounting k steps


@pytest.mark.parametrize("events", [
    [GaussianPLD(Fraction(1))],
    [(GaussianPLD(Fraction(1, 30)), 7), (PurePLD(Fraction(1, 20)), 12)],
    [(PurePLD(Fraction(3, 1000)), 833), (GaussianPLD(Fraction(1, 50)), 100)],
])
def test_lower_bound_is_below_the_pessimistic_epsilon_and_close(
        events: list[PldEvent | tuple[PldEvent, int]]) -> None:
    ev = PldEvents.of(events)
    lower, upper = pld_mod.pld_epsilon_lower(ev, 1e-6), pld_epsilon(ev, 1e-6)
    assert lower <= upper <= lower + 5 * pld_mod.VALUE_DISCRETIZATION_INTERVAL
    mu = math.sqrt(float(sum((e.mu2 * k for e, k in ev.counts if isinstance(e, GaussianPLD)), Fraction(0))))
    if len(ev.counts) == 1:
        assert lower <= gaussian_dp_epsilon(mu, 1e-6)  # below the exact Gaussian-DP epsilon (Balle-Wang)
    assert pld_mod.pld_epsilon_lower(PldEvents.of([(ApproxPLD(Fraction(1), Fraction(1, 10**8)), 2)]), 1e-6) == 0.0
