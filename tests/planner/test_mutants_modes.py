"""Mutation-testing pins of ``dpflow/planner/modes.py`` and of the own-delta rules of ``planner/allocate.py``.

The ledger's allocation text is what a reviewer reads to learn how a plan was accounted, and a refusal's text is
what a user reads to fix a plan: each is pinned whole, per mode and per refusal, with the node it names.  The
rules pinned besides: PLD mode replaces zCDP mode only for a strictly larger total (a tie keeps the simpler
accounting and its noise), an (epsilon, 0) budget is accounted in pure mode at epsilon, a loop without round
weights is accounted in basic mode, a mechanism without a zCDP cost claims no delta of its own, and a refusal
for the mechanisms' own delta names the source with the largest one (the first on a tie).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.errors import PlanError, PlanTypeError
from dpflow.nodes.types import Mode
from dpflow.planner.allocate import pld_total, zcdp_total
from dpflow.planner.certify import certify
from dpflow.planner.context import PlanContext
from dpflow.planner.modes import Accounting, ModeChoice, PldSearch, mode_and_total, own_delta
from dpflow.privacy import Cost, zcdp_rho_for_approx_dp
from dpflow.privacy.rounding import to_float_down

BASIC_TEXT = ("basic (epsilon, delta) mode: mechanism i gets (epsilon, delta) * w_i / W of (1, 1e-06) and is "
              "calibrated to be (epsilon_i, delta_i)-DP on its own (Gaussian: exact Gaussian-DP profile; other "
              "mechanisms: the less noisy of pure epsilon_i and zCDP converted by CKS); totals by basic composition "
              "(Dwork-Roth 2014 Thm 3.16): the per-step accounting of Cai-Wang-Zhang 2021")
EXACT_TEXT = ("; exact discrete Gaussian noise: the exact Gaussian-DP profile is proven for continuous noise only, "
              "so it is not used")
OWN_DELTA_TEXT = ("; a mechanism with a delta of its own (a stability histogram): the less noisy of the (epsilon_i, "
                  "delta') point its cost declares (delta' <= delta_i) and its approximate zCDP converted at delta_i "
                  "less its delta (Bun-Steinke 2016 Sec. 8)")


def _plan(budget: dp.Measure, kinds: list[Any], accounting: str = "auto") -> dp.Plan:
    b = dp.PlanBuilder(budget=budget, accounting=accounting)
    X = b.source("X", dp.Vectors(d=2), n=100)
    rows = N.Clip(radius=1.0)(X)
    return b.build(**{f"m{i}": k()(N.Mean()(rows)) for i, k in enumerate(kinds)})


def _hist_plan(deltas: list[float], accounting: str = "auto", gauss: bool = False) -> dp.Plan:
    """One ``GaussianStabilityHistogram`` per delta, each on a source of its own (X0, X1, ...)."""
    b = dp.PlanBuilder(budget=dp.ApproxDP(1, 1e-6), accounting=accounting)
    outs = {}
    for i, d in enumerate(deltas):
        X = b.source(f"X{i}", dp.Reals(), n=1000)
        outs[f"h{i}"] = N.GaussianStabilityHistogram(delta=d)(N.BinCounts(width=1.0)(X))
        if gauss:
            outs[f"g{i}"] = N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(X)))
    return b.build(**outs)


def _refusal(plan: dp.Plan, **kw: Any) -> tuple[str, str | None, str, str]:
    with pytest.raises(PlanError) as info:
        certify(plan, **kw)
    e = info.value
    return type(e).__name__, e.node, e.problem, e.fix


# --- the mode texts -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("budget", "accounting", "total", "text"), [
    (dp.PureDP(1), Accounting.PURE, Fraction(1), "pure mode: epsilon=1 shared by weight"),
    (dp.ZCDP(Fraction(1, 2)), Accounting.ZCDP, Fraction(1, 2), "zCDP mode: rho=0.5 shared by weight"),
    (dp.ApproxDP(1, 0), Accounting.PURE, Fraction(1), "pure mode (delta = 0): epsilon shared by weight"),
])
def test_the_mode_of_a_pure_zcdp_or_delta_zero_budget(budget: dp.Measure, accounting: Accounting, total: Fraction,
                                                     text: str) -> None:
    choice = mode_and_total(PlanContext.of(_plan(budget, [N.LaplaceMech])), pld_total, zcdp_total)
    assert choice == ModeChoice(accounting, total, text)


def test_the_gdp_mode_text_gives_mu_and_rho() -> None:
    """mu = sqrt(2 rho) with rho the exact Gaussian-DP total of (1, 1e-6)."""
    cert = certify(_plan(dp.ApproxDP(1, 1e-6), [N.GaussianMech]))
    assert cert.ledger.allocation == ("all mechanisms Gaussian (continuous noise): exact Gaussian-DP mu=0.236704 "
                                      "meets (1, 1e-06); rho=mu^2/2=0.0280145 shared by weight")


@pytest.mark.parametrize("exact_noise", [False, True])
def test_the_zcdp_mode_text_by_cks(exact_noise: bool) -> None:
    """Without a PLD (the search handed in finds none) a mixed plan is in zCDP mode at the CKS total; under exact
    sources the text says the Gaussian-DP profile is not used."""
    ctx = PlanContext.of(_plan(dp.ApproxDP(1, 1e-6), [N.GaussianMech, N.LaplaceMech]), exact_noise=exact_noise)
    choice = mode_and_total(ctx, lambda ctx, rho: None, zcdp_total)
    assert choice.accounting is Accounting.ZCDP
    assert choice.total == zcdp_rho_for_approx_dp(1, to_float_down(Fraction(1e-6)))
    assert choice.text == ("zCDP mode: rho=0.024356 (CKS) meets (1, 1e-06); shared by weight"
                           + (EXACT_TEXT if exact_noise else ""))


def test_the_zcdp_mode_text_with_the_mechanisms_own_delta() -> None:
    choice = mode_and_total(PlanContext.of(_hist_plan([1e-7], gauss=True)), pld_total, zcdp_total)
    assert choice.accounting is Accounting.ZCDP  # rho = CKS at (1, 9e-7)
    assert choice.text == ("zCDP mode: rho=0.0241296 (CKS at delta - delta0, delta0=1e-07 the mechanisms' own: "
                           "approximate zCDP, Bun-Steinke 2016 Sec. 8) meets (1, 1e-06); shared by weight")


@pytest.mark.parametrize("gain", [Fraction(0), Fraction(1, 10**9)])
def test_pld_mode_replaces_zcdp_mode_only_for_a_larger_total(gain: Fraction) -> None:
    """A PLD total equal to the zCDP one buys nothing: the plan stays in zCDP mode (whose certificate needs no
    continuous Gaussian noise); one a little larger is taken."""
    ctx = PlanContext.of(_plan(dp.ApproxDP(1, 1e-6), [N.GaussianMech, N.LaplaceMech]))
    rho, _ = zcdp_total(ctx)
    choice = mode_and_total(ctx, lambda ctx, start: PldSearch(start + gain, None), zcdp_total)
    assert (choice.accounting, choice.total) == ((Accounting.PLD, rho + gain) if gain else (Accounting.ZCDP, rho))


@pytest.mark.parametrize(("exact_noise", "suffix"), [
    (False, ""), (True, EXACT_TEXT + " (each Gaussian is calibrated by the zCDP conversion instead)")])
def test_the_basic_mode_text(exact_noise: bool, suffix: str) -> None:
    plan = _plan(dp.ApproxDP(1, 1e-6), [N.GaussianMech, N.LaplaceMech], accounting="basic")
    assert certify(plan, exact_noise=exact_noise).ledger.allocation == BASIC_TEXT + suffix


def test_the_basic_mode_text_with_a_mechanisms_own_delta() -> None:
    assert certify(_hist_plan([1e-7], accounting="basic")).ledger.allocation == BASIC_TEXT + OWN_DELTA_TEXT


# --- the refusals ---------------------------------------------------------------------------------------------

_NEEDS_APPROX = "use dp.ApproxDP(epsilon, delta), or accounting='auto'"


@pytest.mark.parametrize(("budget", "got"), [(dp.PureDP(1), "epsilon=1 pure DP"),
                                             (dp.ApproxDP(1, 0), "(epsilon=1, delta=0)-DP")])
def test_basic_mode_refuses_a_budget_without_delta(budget: dp.Measure, got: str) -> None:
    assert _refusal(_plan(budget, [N.LaplaceMech], accounting="basic")) == (
        "PlanTypeError", "plan",
        f"basic (epsilon, delta) accounting needs an ApproxDP budget with delta > 0, got {got}", _NEEDS_APPROX)


def test_basic_mode_refuses_a_fixed_cost_mechanism() -> None:
    plan = _plan(dp.ApproxDP(1, 1e-6), [lambda: N.GaussianMech(rho=0.01)], accounting="basic")
    (_, node), = plan.outputs
    assert _refusal(plan) == ("PlanTypeError", node, "a fixed-cost mechanism in basic (epsilon, delta) accounting",
                              "give it a weight= instead")


def _loop_plan(round_weights: list[float] | None) -> tuple[dp.Plan, str]:
    b = dp.PlanBuilder(budget=dp.ApproxDP(1, 1e-6), accounting="basic")
    X = b.source("X", dp.Vectors(d=2), n=100)

    def body(rows: Any, state: Any, k: int) -> Any:
        return N.GaussianMech()(N.Mean()(N.Clip(radius=1.0, center=state)(rows)))

    out = N.repeat(X, b.public([0.0, 0.0]), body, times=2, round_weights=round_weights)
    return b.build(m=out), out.id


def test_basic_mode_refuses_round_weights_and_accounts_equal_rounds() -> None:
    plan, loop = _loop_plan([1.0, 3.0])
    assert _refusal(plan) == ("PlanTypeError", loop, "round weights in basic (epsilon, delta) accounting",
                              "drop round_weights (every round gets an equal share)")
    cert = certify(_loop_plan(None)[0])
    assert cert.ledger.allocation == BASIC_TEXT
    (total,) = cert.ledger.totals
    assert total.cost.basic_eps == 1


def test_basic_mode_refuses_a_histogram_whose_own_delta_exceeds_its_share() -> None:
    plan = _hist_plan([2e-6], accounting="basic")
    node = dict(plan.outputs)["h0"]
    assert _refusal(plan) == (
        "BudgetError", node, "GaussianStabilityHistogram claims delta=2e-06 of its own, which leaves nothing of its "
        "basic share of delta (1e-06: delta * its epsilon share)",
        "lower its delta=, raise its weight= or the budget's delta, or use accounting='auto'")


class _ShrinkingDelta(N.GaussianStabilityHistogram):
    """A histogram whose own delta falls with its share (no dpflow mechanism does this): its approximate-zCDP
    calibration at delta - delta0 then claims more than delta0, and it has no (epsilon, delta) point."""

    def cost(self, share: Fraction, mode: Mode) -> Cost:
        return Cost.approx_zcdp(share, Fraction(self.delta) * Fraction(1, 100) / share)


def test_basic_mode_refuses_a_mechanism_without_an_epsilon_delta_calibration() -> None:
    b = dp.PlanBuilder(budget=dp.ApproxDP(1, 1e-6), accounting="basic")
    X = b.source("X", dp.Reals(), n=1000)
    h = _ShrinkingDelta(delta=1e-7)(N.BinCounts(width=1.0)(X))
    assert _refusal(b.build(h=h)) == ("PlanTypeError", h.id, "GaussianStabilityHistogram has no (epsilon, delta) "
                                      "calibration",
                                      "use accounting='auto'")


@pytest.mark.parametrize(("deltas", "source", "claimed"), [
    ([2e-6], "X0", "2e-06"), ([2e-6, 3e-6], "X1", "3e-06"), ([3e-6, 2e-6], "X0", "3e-06"),
    ([2e-6, 2e-6], "X0", "2e-06")])
def test_zcdp_mode_refuses_own_deltas_that_leave_no_delta(deltas: list[float], source: str, claimed: str) -> None:
    """The refusal names the source with the largest own delta (the first of equal ones)."""
    assert _refusal(_hist_plan(deltas)) == (
        "BudgetError", source, f"the mechanisms on source {source} claim delta={claimed} of their own (approximate "
        "zCDP), which leaves nothing of the budget's delta=1e-06",
        "lower the delta= of the stability histograms, or raise the budget's delta")


class _PureOnly(N.LaplaceMech):
    """A mechanism without a zCDP cost."""

    def cost(self, share: Fraction, mode: Mode) -> Cost:
        if mode != "pure":
            raise PlanTypeError(self.kind, "no zCDP cost", "use a pure budget")
        return super().cost(share, mode)


def test_own_delta_reads_the_unit_zcdp_cost() -> None:
    assert own_delta(N.GaussianStabilityHistogram(delta=1e-9))
    assert not own_delta(N.GaussianMech()) and not own_delta(_PureOnly())


@pytest.mark.parametrize(("shortfall", "exact_noise"), [(None, False), (Fraction(3, 4000), True)])
def test_the_pld_mode_text(shortfall: Fraction | None, exact_noise: bool) -> None:
    ctx = PlanContext.of(_plan(dp.ApproxDP(1, 1e-6), [N.GaussianMech, N.LaplaceMech]), exact_noise=exact_noise)
    choice = mode_and_total(ctx, lambda ctx, start: PldSearch(Fraction(1, 25), shortfall), zcdp_total)
    bound = ("no bound on the shortfall proven" if shortfall is None else
             "the largest admissible total is less than 0.075% above it")
    noise = ("exact sources draw the discrete Gaussian, accounted by the lattice Gaussian PLD (the smoothed "
             "continuous Gaussian, dpflow.privacy.pld.LatticeGaussianPLD)" if exact_noise else
             "every Gaussian mechanism draws continuous noise (the Gaussian PLD is proven for continuous noise only)")
    assert choice == ModeChoice(Accounting.PLD, Fraction(1, 25), (
        "PLD mode: rho=0.04 shared by weight (as in zCDP mode), a total whose composed cost meets (1, 1e-06) on "
        "every source by its tightest valid conversion, the privacy loss distribution among them (pessimistic "
        f"dp_accounting numerics; search rounded down; {bound}); " + noise))


def test_a_pure_capable_plan_compares_pure_and_pld_mode_by_noise_variance() -> None:
    """Laplace only: pure mode at epsilon = 1 against the PLD total; the least total noise variance wins (pure
    here: epsilon 1/2 for each of the two, against sqrt(2 x 0.02) = 0.2 from a total rho of 0.04), and pure mode's
    text says delta is spared."""
    ctx = PlanContext.of(_plan(dp.ApproxDP(1, 1e-6), [N.LaplaceMech, N.LaplaceMech]))
    choice = mode_and_total(ctx, lambda ctx, start: PldSearch(Fraction(1, 25), None), zcdp_total)
    assert choice == ModeChoice(Accounting.PURE, Fraction(1),
                                "pure mode: basic composition meets the budget with delta to spare")


def test_noise_variance_sums_inverse_rho_over_every_source_and_round() -> None:
    """The mode choice's measure: the sum over sources of 1/rho of each mechanism at its share, a loop counted once
    per round.  Source X: Gaussian weights 1 and 3 (shares T/4, 3T/4); source Y: a loop of two rounds with round
    weights 1 and 3 around a Gaussian (its weight folds to 4, unit T/4, each round counted at that unit); source Z:
    one Gaussian of weight 1 (share T)."""
    from dpflow.planner.modes import _noise_variance

    b = dp.PlanBuilder(budget=dp.ApproxDP(1, 1e-6))
    X = b.source("X", dp.Vectors(d=2), n=100)
    Y = b.source("Y", dp.Vectors(d=2), n=100)
    rows = N.Clip(radius=1.0)(X)

    def body(r: Any, state: Any, k: int) -> Any:
        return N.GaussianMech()(N.Mean()(N.Clip(radius=1.0, center=state)(r)))

    Z = b.source("Z", dp.Vectors(d=2), n=100)
    plan = b.build(a=N.GaussianMech()(N.Mean()(rows)), c=N.GaussianMech(weight=3.0)(N.Sum()(rows)),
                   y=N.repeat(Y, b.public([0.0, 0.0]), body, times=2, round_weights=[1.0, 3.0]),
                   z=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(Z))))
    T = Fraction(1, 10)
    assert _noise_variance(PlanContext.of(plan), "zcdp", T) == 4 / T + 4 / (3 * T) + 2 * 4 / T + 1 / T



def test_noise_variance_under_a_partition_with_one_sided_shares() -> None:
    """Replace-one neighbours, two Gaussian sums over the two pieces of a value partition of rows in the box
    [-1/4, 1]^2: a one-sided change moves a sum by the norm (1 sqrt 2), a replacement by the diameter (5/4 sqrt 2),
    ratio q = 4/5 (rounded up on 20 bits), one-sided factor f = share_at_ratio(1, q, zcdp) = q^2.  A record that
    moves between the pieces charges both one-sided: the weights fold to max(1, 1, f + f) = 2f (in zCDP units;
    q in pure units, f = 1 without the factor, both differ), the unit share is T / 2f and each sum's 1/rho is
    2f / T, folded the same way: 4f / T.  A source no mechanism reads (W) adds nothing (it has no weight to
    divide by)."""
    from dpflow.planner.context import one_sided_ratio
    from dpflow.planner.modes import _noise_variance
    from dpflow.privacy.ratio import share_at_ratio

    def context(mech: Any) -> PlanContext:
        b = dp.PlanBuilder(budget=dp.ApproxDP(1, 1e-6))
        X = b.source("X", dp.Vectors(d=2), n=100)
        b.source("W", dp.Vectors(d=2), n=100)
        inside, outside = N.split(N.Clip(box=(-0.25, 1.0))(X), N.PartitionByBall(center=(0.0, 0.0), radius=0.5))
        return PlanContext.of(b.build(a=mech()(N.Sum()(inside)), c=mech()(N.Sum()(outside))))

    ctx = context(N.GaussianMech)
    assert [s.id for s in ctx.sources] == ["source_0", "source_1"] and ctx.relation == "replace"
    q = Fraction(838861, 2**20)
    assert [one_sided_ratio(ctx, sp, rec) for sp, rec, _ in ctx.mechs] == [q, q]
    f = share_at_ratio(Fraction(1), q, "zcdp")
    assert f == q * q
    T = Fraction(1, 10)
    assert _noise_variance(ctx, "zcdp", T) == 4 * f / T
    # Laplace sums in pure mode: the l1 ratio is q too, f = q, the weights fold to 2q, epsilon = T / 2q, a Laplace
    # mechanism's 1/rho is 2 / epsilon^2, folded to twice that
    ctx = context(N.LaplaceMech)
    assert [one_sided_ratio(ctx, sp, rec) for sp, rec, _ in ctx.mechs] == [q, q]
    assert _noise_variance(ctx, "pure", T) == 2 * 2 / (T / (2 * q)) ** 2

def test_basic_mode_takes_the_laplace_histograms_own_point_at_epsilon_i() -> None:
    """The Laplace stability histogram declares (eps, delta) at the zCDP share eps^2/2: at eps_i = 1 it is (1, 1e-7)
    (eps rounded down), within (1, 1e-6), and less noisy than any CKS calibration (rho 1/2 against about 0.024)."""
    b = dp.PlanBuilder(budget=dp.ApproxDP(1, 1e-6), accounting="basic")
    h = N.StabilityHistogram(delta=1e-7)(N.BinCounts(width=1.0)(b.source("X", dp.Reals(), n=1000)))
    alloc = certify(b.build(h=h)).allocations[h.id]
    assert (alloc.mode, alloc.share) == ("zcdp", Fraction(1, 2))
    assert alloc.cost.basic_eps is not None and 1 - Fraction(1, 10**9) < alloc.cost.basic_eps <= 1  # rounded down
    assert alloc.cost.basic_delta == Fraction(1e-7)
