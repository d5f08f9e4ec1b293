"""Accounting benchmark (issue 16): epsilon at delta = 1e-6 of the estimator library's default plans, by rule.

For each plan the per-record cost of its (first) source is composed from the ledger's composition tree
as a run with continuous noise has it, then converted by: dpflow's PLD (pessimistic, dp_accounting
numerics), dpflow's zCDP + CKS, the exact Gaussian-DP profile (all-Gaussian plans only),
OpenDP's zCDP composition and zCDP -> (epsilon, delta) conversion (``make_composition``,
``make_pureDP_to_zCDP``, ``make_zCDP_to_approxDP``; the ``bench`` extra), dp_accounting's RDP accountant and
dp_accounting's PLD library on the same events.  The "ledger"
column is what the certificate states: the tightest rule valid for every noise source (a Gaussian
under a zCDP budget may draw the discrete Gaussian, which has no PLD or GDP profile here).

Second section: the accuracy gain of PLD allocation over zCDP allocation for ``ApproxDP(1, 1e-6)``
budgets on mixed plans: per mechanism, the noise standard deviation under the planner's PLD-mode
allocation divided by the one under the zCDP (CKS) allocation of the same budget (both share rho by
weight; a mechanism's noise scale is proportional to 1/sqrt(rho_i), so the ratio is the error ratio).

    pip install -e '.[bench]'   # OpenDP (its column is nan without it)
    python benchmarks/accounting.py [--out benchmarks/results/accounting.md]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

from dp_accounting import dp_event, privacy_accountant
from dp_accounting.pld import privacy_loss_distribution as dp_pld
from dp_accounting.rdp import rdp_privacy_accountant
from stamp import stamp

import dpflow as dp
from dpflow import estimators
from dpflow import nodes as N
from dpflow.estimators import gaussian as G
from dpflow.planner import Accounting, ModeChoice
from dpflow.planner.allocate import allocate_budget
from dpflow.planner.context import PlanContext
from dpflow.planner.ledger import recompose
from dpflow.planner.modes import _noise_variance
from dpflow.privacy import (
    PLD_RULE,
    ApproxPLD,
    GaussianPLD,
    PldEvents,
    PurePLD,
    gaussian_dp_epsilon,
    zcdp_rho_for_approx_dp,
)
from dpflow.privacy.pld import DELTA_NUMERICAL_RESERVE, _epsilon

pld_epsilon_cache_clear = _epsilon.cache_clear

DELTA = 1e-6

def issue_example(budget: dp.Measure | None = None) -> dp.Plan:
    """Issue 16's mixed plan: two Gaussian releases and one Laplace release sharing the budget (rho = 0.5) equally."""
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5) if budget is None else budget, name="issue16")
    X = b.source("X", dp.Vectors(d=5), n=10_000)
    return b.build(g1=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))),
                   g2=N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(X))),
                   l=N.LaplaceMech()(N.Mean()(N.Clip(box=(-1.0, 1.0))(X))))


PLANS: dict[str, Callable[[], dp.Plan]] = {
    "issue 16 example: 2 Gaussian + 1 Laplace, ZCDP(0.5)": issue_example,
    "clipped_mean ZCDP(0.5)": lambda: estimators.clipped_mean(10, 10_000, dp.ZCDP(0.5), mean_bound=1.0),
    "clipped_mean ApproxDP(1,1e-6)": lambda: estimators.clipped_mean(10, 10_000, dp.ApproxDP(1, 1e-6),
                                                                     mean_bound=1.0),
    "naive_pce ZCDP(0.5)": lambda: estimators.naive_pce(5, 10_000, dp.ZCDP(0.5), kappa=2.0),
    "naive_product ZCDP(0.5)": lambda: estimators.product.naive_product(10, 10_000, dp.ZCDP(0.5)),
    "ppde ZCDP(0.5)": lambda: estimators.product.ppde(10, 10_000, dp.ZCDP(0.5)),
    "sparse_mean ZCDP(0.5)": lambda: estimators.sparse_mean(100, 10_000, 5, dp.ZCDP(0.5), radius=2.0),
    "sparse_mean ApproxDP(1,1e-6)": lambda: estimators.sparse_mean(100, 10_000, 5, dp.ApproxDP(1, 1e-6),
                                                                   radius=2.0),
    "laplace_histogram PureDP(1)": lambda: estimators.discrete.laplace_histogram(64, 10_000, dp.PureDP(1)),
    "merr PureDP(1)": lambda: estimators.discrete.merr(N=1000, n=10_000, budget=dp.PureDP(1.0), T=20),
    "coinpress mean ZCDP(0.5)": lambda: G.mean(d=5, n=10_000, budget=dp.ZCDP(0.5), R=10.0),
    "coinpress covariance ZCDP(0.5)": lambda: G.covariance(d=3, n=10_000, budget=dp.ZCDP(0.5), K=30.0),
    "coinpress gaussian ApproxDP(1,1e-6)": lambda: G.gaussian(d=3, n=10_000, budget=dp.ApproxDP(1, 1e-6), R=10.0,
                                                              K=30.0),
}


def rdp_epsilon(events: PldEvents) -> float:
    """dp_accounting's RDP accountant (REPLACE_ONE: binary randomized response for a pure epsilon)."""
    acc = rdp_privacy_accountant.RdpAccountant(neighboring_relation=privacy_accountant.NeighboringRelation.REPLACE_ONE)
    for e, k in events.counts:
        if isinstance(e, GaussianPLD):
            acc.compose(dp_event.GaussianDpEvent(1 / math.sqrt(float(e.mu2))), k)
        elif isinstance(e, PurePLD):
            acc.compose(dp_event.RandomizedResponseDpEvent(2 / (1 + math.exp(float(e.epsilon))), 2), k)
        else:
            return math.nan
    return float(acc.get_epsilon(DELTA))


def opendp_epsilon(events: PldEvents) -> float:
    """OpenDP on the same events: each Gaussian a ``make_gaussian`` of scale 1/mu (rho = mu^2/2), each pure
    event a ``make_laplace`` of scale 1/epsilon turned into zCDP by ``make_pureDP_to_zCDP`` (epsilon^2/2),
    all composed by ``make_composition`` (rho adds) and converted by ``make_zCDP_to_approxDP``; nan without
    OpenDP, for (epsilon, delta) events, or past 2,000 events."""
    try:
        import opendp.prelude as odp
    except ImportError:
        return math.nan
    if any(isinstance(e, ApproxPLD) for e, _ in events.counts) or sum(k for _, k in events.counts) > 2000:
        return math.nan
    odp.enable_features("contrib")
    space = {"input_domain": odp.atom_domain(T=float, nan=False), "input_metric": odp.absolute_distance(T=float)}
    parts = []
    for e, k in events.counts:
        if isinstance(e, GaussianPLD):
            m = odp.m.make_gaussian(**space, scale=1 / math.sqrt(float(e.mu2)))
        else:
            m = odp.c.make_pureDP_to_zCDP(odp.m.make_laplace(**space, scale=1 / float(e.epsilon)))
        parts += [m] * k
    curve = odp.c.make_zCDP_to_approxDP(odp.c.make_composition(parts)).map(1.0)
    return float(curve.epsilon(DELTA))


def library_pld_epsilon(events: PldEvents) -> float:
    """dp_accounting's PLD library, event by event (pessimistic, grid 1e-4), at the same delta."""
    total = None
    for e, k in events.counts:
        if isinstance(e, GaussianPLD):
            p = dp_pld.from_gaussian_mechanism(1 / math.sqrt(float(e.mu2)))
        elif isinstance(e, PurePLD):
            p = dp_pld.from_randomized_response(2 / (1 + math.exp(float(e.epsilon))), 2)
        else:
            assert isinstance(e, ApproxPLD)
            return math.nan
        p = p.self_compose(k) if k > 1 else p
        total = p if total is None else total.compose(p)
    assert total is not None
    return float(total.get_epsilon_for_delta(DELTA * (1 - DELTA_NUMERICAL_RESERVE)))


def row(name: str, make: Callable[[], dp.Plan]) -> str:
    ledger = make().check()  # the certificate of a default (SecureNoise) run
    total = ledger.totals[0]
    assert total.composition is not None
    cost = recompose(total.composition, ledger.neighbors)
    pld_epsilon_cache_clear()
    t0 = time.perf_counter()
    convs = {c.rule: c.epsilon for c in cost.epsilon_at(DELTA)}
    t_conv = time.perf_counter() - t0
    cks = convs["zCDP -> (eps,delta) by CKS"]
    pld = convs.get(PLD_RULE, math.nan)
    lattice = next((c.epsilon for c in cost.for_lattice_noise().epsilon_at(DELTA) if c.rule == PLD_RULE), math.nan)
    gdp = gaussian_dp_epsilon(math.sqrt(float(cost.gdp_mu2)), DELTA) if cost.gdp_mu2 else math.nan
    events = cost.pld if cost.pld is not None else PldEvents(())
    rdp = rdp_epsilon(events) if events.counts else math.nan
    lib = library_pld_epsilon(events) if events.counts else math.nan
    odp_eps = opendp_epsilon(events) if events.counts else math.nan
    best = total.tightest()
    n_ev = sum(k for _, k in events.counts)
    return (f"| {name} | {n_ev} | {best.epsilon:.4f} ({best.rule}) | {pld:.4f} | {lattice:.4f} | {cks:.4f} | "
            f"{gdp:.4f} | {odp_eps:.4f} | {rdp:.4f} | {lib:.4f} | {cks / pld:.3f} | {pld / lib:.5f} | {t_conv:.3f} |")


ALLOCATION_BUDGET = dp.ApproxDP(1, 1e-6)

MIXED: dict[str, Callable[[dp.Measure], dp.Plan]] = {
    "issue 16 example (2 Gaussian + 1 Laplace)": issue_example,
    "truncated_mean": lambda b: estimators.truncation.truncated_mean(d=3, n=10_000, budget=b),
    "truncated_mean, upper bound given": lambda b: estimators.truncation.truncated_mean(d=3, n=10_000, budget=b,
                                                                                         upper=50.0),
    "noisy_gd": lambda b: estimators.regression.noisy_gd(d=3, n=10_000, budget=b, x_bound=1.0, coef_bound=2.0),
    "sufficient_statistics": lambda b: estimators.regression.sufficient_statistics(d=3, n=10_000, budget=b),
    "niht": lambda b: estimators.regression.niht(d=6, n=10_000, s=2, budget=b, x_bound=1.0, coef_bound=2.0),
    "sparse_mean": lambda b: estimators.sparse_mean(100, 10_000, 5, b, radius=2.0),
}


def allocation_rows(name: str, make: Callable[[dp.Measure], dp.Plan]) -> list[str]:
    """Per mechanism: the zCDP (CKS) and PLD-mode rho, and the noise std ratio PLD / zCDP."""
    plan = make(ALLOCATION_BUDGET)
    pld_epsilon_cache_clear()
    t0 = time.perf_counter()
    cert = dp.certify(plan)
    t_cert = time.perf_counter() - t0
    mode = cert.ledger.allocation.split(":")[0]
    ctx = PlanContext.of(plan)
    cks = zcdp_rho_for_approx_dp(ALLOCATION_BUDGET.epsilon, ALLOCATION_BUDGET.delta)
    zcdp, _ = allocate_budget(ctx, ModeChoice(Accounting.ZCDP, cks, ""))
    previous = zcdp  # the choice before PLD allocation: pure mode when all pure-capable and less noisy
    if all(m.pure_capable and m.fixed_share("pure") is None for _, _, m in ctx.mechs) and (
            _noise_variance(ctx, "pure", ALLOCATION_BUDGET.epsilon) <= _noise_variance(ctx, "zcdp", cks)):
        previous, _ = allocate_budget(ctx, ModeChoice(Accounting.PURE, ALLOCATION_BUDGET.epsilon, ""))
    best = cert.ledger.totals[0].tightest()
    head = f"| {name} | {mode} | {best.epsilon:.5f} ({best.rule.split(' (')[0]}) | {t_cert:.2f} |"
    rows = []
    for key, alloc in cert.allocations.items():
        ratio = math.sqrt(zcdp[key].cost.rho / alloc.cost.rho)
        before = math.sqrt(previous[key].cost.rho / alloc.cost.rho)
        kind = key.rsplit(".", 1)[-1].rsplit("_", 1)[0]
        rows.append(f"{head if not rows else '| | | | |'} {kind} | {float(zcdp[key].share):.5g} | "
                    f"{float(alloc.share):.5g} | {ratio:.3f} | {before:.3f} |")
    return rows


SECURE: dict[str, Callable[[dp.Measure], dp.Plan]] = {
    "clipped_mean (all Gaussian)": lambda b: estimators.clipped_mean(10, 10_000, b, mean_bound=1.0),
    "coinpress gaussian (all Gaussian)": lambda b: G.gaussian(d=3, n=10_000, budget=b, R=10.0, K=30.0),
    **{k: v for k, v in MIXED.items() if k not in ("niht", "sparse_mean")},  # the mixed plans with a Gaussian
}


def secure_row(name: str, make: Callable[[dp.Measure], dp.Plan]) -> str:
    """A SecureNoise run's certificate (exact discrete noise, ``certify(plan, exact_noise=True)``) against the
    zCDP (CKS) allocation, which is what such a run got before the lattice Gaussian PLD, and against the
    certificate for continuous noise (SeededNoise): noise std ratios of the Gaussian mechanisms."""
    plan = make(ALLOCATION_BUDGET)
    pld_epsilon_cache_clear()
    t0 = time.perf_counter()
    secure = dp.certify(plan, exact_noise=True)
    t_cert = time.perf_counter() - t0
    cont = dp.certify(plan)
    zcdp, _ = allocate_budget(PlanContext.of(plan, exact_noise=True), ModeChoice(
        Accounting.ZCDP, zcdp_rho_for_approx_dp(ALLOCATION_BUDGET.epsilon, ALLOCATION_BUDGET.delta), ""))
    key = next(k for k, a in secure.allocations.items() if k.rsplit(".", 1)[-1].startswith("gaussian_mech"))
    rho = secure.allocations[key].cost.rho
    best = secure.ledger.totals[0].tightest()
    return (f"| {name} | {secure.ledger.allocation.split(':')[0]} | {best.epsilon:.5f} ({best.rule.split(' (')[0]}) | "
            f"{t_cert:.2f} | {math.sqrt(zcdp[key].cost.rho / rho):.3f} | "
            f"{math.sqrt(cont.allocations[key].cost.rho / rho):.4f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=None, help="also write the table to this markdown file")
    args = ap.parse_args()
    # sanity: the RDP accountant's Gaussian under REPLACE_ONE is sensitivity 1 (rho = 1/2 gives CKS 5.2215)
    acc = rdp_privacy_accountant.RdpAccountant(neighboring_relation=privacy_accountant.NeighboringRelation.REPLACE_ONE)
    acc.compose(dp_event.GaussianDpEvent(1.0))
    assert abs(acc.get_epsilon(DELTA) - 5.2215) < 1e-3
    lines = [
        stamp(),
        "",
        f"epsilon at delta = {DELTA:g} of each plan's per-record cost (first source); nan = rule not applicable",
        "",
        "| plan | events | ledger (SecureNoise certificate) | dpflow PLD | dpflow lattice PLD | dpflow zCDP+CKS "
        "| exact GDP | OpenDP zCDP | dp_accounting RDP | dp_accounting PLD | CKS / PLD | PLD / dp_acc. PLD "
        "| all conversions (s, uncached) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [row(name, make) for name, make in PLANS.items()]
    lines += [
        "",
        f"Accuracy gain of PLD allocation over zCDP allocation under ApproxDP(1, 1e-6): noise std of each "
        f"mechanism under the planner's allocation / under the zCDP (CKS, rho = "
        f"{float(zcdp_rho_for_approx_dp(1, 1e-6)):.6g}) allocation",
        "",
        "| plan | mode chosen | ledger epsilon (rule) | certify (s, uncached) | mechanism | zCDP rho_i | PLD rho_i "
        "| noise std ratio PLD / zCDP | ratio to the choice before PLD allocation |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, make in MIXED.items():
        lines += allocation_rows(name, make)
    lines += [
        "",
        "Secure runs (SecureNoise: exact discrete noise) under ApproxDP(1, 1e-6): the Gaussian mechanisms' noise std "
        "under the secure certificate / under the zCDP (CKS) allocation that secure runs got before the lattice "
        "Gaussian PLD / under the certificate for continuous noise (SeededNoise)",
        "",
        "| plan | mode chosen | ledger epsilon (rule) | certify (s, uncached) | Gaussian noise std / zCDP (CKS) "
        "| Gaussian noise std / continuous certificate |",
        "|---|---|---|---|---|---|",
    ]
    lines += [secure_row(name, make) for name, make in SECURE.items()]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write("# Accounting benchmark\n\nCommand: `python benchmarks/accounting.py --out "
                    "benchmarks/results/accounting.md` (2-core x86_64 machine shared with other jobs).\n\n"
                    + text + "\n\n" + NOTES)


NOTES = """Reading the table:

* "dpflow PLD" is the cost composed as a run with **continuous** noise has it (pessimistic
  dp_accounting numerics, grid 1e-4, evaluated at delta (1 - 1e-3), rounded up); pure-epsilon mechanisms
  (Laplace, Peel, exponential mechanism, quantiles) enter through the worst-case pure-DP PLD (binary
  randomized response), valid for every noise source.
* "dpflow lattice PLD" is the same cost as a SecureNoise run pays it: every Gaussian event is the lattice
  Gaussian event (``dpflow.privacy.pld.LatticeGaussianPLD``: the discrete Gaussian on dpflow's lattice,
  lattice noise scale >= 2^40, dominated by a smoothed continuous Gaussian at s'^2 = s^2 - 9, with losses
  raised by 2 Gamma and delta divided by e^Gamma, Gamma < 1e-57).  It equals the continuous PLD to the
  digits shown (and is never below it).
* The "ledger" column is what the certificate of a default (SecureNoise) run states: the lattice PLD for
  plans with Gaussian mechanisms (the exact Gaussian-DP profile is proven for continuous noise only, so the
  all-Gaussian ApproxDP plans show the PLD's 1.0000, just below the budget, where a continuous certificate
  shows the exact profile).  Before round 3 of issue 16 the Gaussian plans showed CKS here (5.2215 at
  rho = 0.5).
* "CKS / PLD" is how much the zCDP route over-states epsilon for the same noise; "PLD / dp_acc. PLD"
  checks dpflow against dp_accounting's own PLD on the same events (the cross-check in tests/privacy/test_pld.py).
* dp_accounting's RDP accountant takes each pure event as binary randomized response (REPLACE_ONE).
* The second table: under an ApproxDP budget a plan that is not all-Gaussian is allocated in PLD mode when
  that has the least noise variance: rho shared by weight as in zCDP mode, with the largest total whose
  composed cost meets (1, 1e-6) by its tightest valid conversion (the PLD for every plan with a Gaussian),
  certified for continuous noise (Gaussians forced to continuous noise). Every mechanism's noise std
  shrinks by the same factor, sqrt(rho_CKS / R). The last column compares with what the planner chose
  before (zCDP mode, or pure mode for the all-pure-capable plans where that was less noisy, e.g.
  sparse_mean, a Peel alone here: its PLD total buys the same noise as pure epsilon 1 to three decimals).
  "certify" includes the search for R (about 6 PLD evaluations for plans with a Gaussian, up to about 10
  cheap ones for pure plans whose PLD jumps at the grid of the loss) and the shortfall bound (one or two
  optimistic PLDs).
* Bounded range: the exponential mechanisms (Quantile, DyadicExpMech) are epsilon-bounded range, hence
  epsilon^2/8-zCDP (Cesar & Rogers 2021), while their PLD is still the pure-DP worst case (no
  bounded-range PLD here): for ``merr`` (40 exponential-mechanism and Laplace steps) zCDP + CKS (0.545) now
  beats the PLD (0.627) and OpenDP's epsilon^2/2 route (0.700), and the ledger picks it.
* The third table: a SecureNoise run of an ApproxDP plan with Gaussian mechanisms is now allocated in PLD
  mode through the lattice Gaussian PLD (before: zCDP mode, CKS, which needs about 8% more noise for an
  all-Gaussian plan).  Its Gaussian noise is within the PLD search grid of the continuous certificate's: the
  all-Gaussian plans' continuous certificate uses the exact Gaussian-DP profile (no discretisation, no delta
  reserve), which the PLD misses by about 1e-4 relative.
* Pure events: k copies of an epsilon-DP event enter as one PLD built from the exact k-fold randomized
  response law and rounded to the loss grid once (dp_accounting's self-composition rounds each copy: the
  "PLD / dp_acc. PLD" column falls below 1 for plans with many pure events).
* "OpenDP zCDP" composes the same events in OpenDP 0.16 (rho adds; a pure epsilon enters as epsilon^2/2,
  OpenDP's ``make_pureDP_to_zCDP``) and converts with ``make_zCDP_to_approxDP``: it equals dpflow's
  zCDP + CKS to four decimals wherever dpflow's rho is epsilon^2/2 per pure event (both use the
  Canonne-Kamath-Steinke 2020 conversion); where dpflow's exponential mechanisms are bounded range
  (epsilon^2/8-zCDP) dpflow's own zCDP figure is lower.  OpenDP 0.16 has no PLD accountant, and its
  Renyi-DP measure was not used here (not checked whether its mechanisms compose in it).
* Issue 16 quotes "about 4.54" for its example; with rho shared equally (Gaussians mu^2 = 1/3 each, the
  Laplace at epsilon = sqrt(1/3)) dp_accounting directly gives 4.3549 (Laplace-specific PLD, valid for a
  one-dimensional continuous Laplace) and 4.3853 (worst-case pure-DP PLD, randomized response, what dpflow
  uses for vector and lattice releases); its PLDAccountant agrees (4.3549), its RDP accountant gives 4.63
  (add/remove) to 4.66 (replace-one, the column above), CKS 5.2215.  dpflow's pessimistic 4.38546 and
  its optimistic lower bound 4.38513 bracket the exact worst-case value, so 4.3855 is right for the
  events dpflow certifies and 4.355 for a scalar continuous Laplace; no variant tried reproduces 4.54,
  which is above both (an RDP-type bound, looser than the PLD, would fit).
"""


if __name__ == "__main__":
    main()
