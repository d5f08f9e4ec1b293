"""Issue 13: one home for every planning rule.

Typed mechanism capabilities drive the planner (not kind strings), the accounting mode is a typed
value, the planner certifies the allocation of every mechanism invocation (rounds included) and the
interpreter only reads it, and the typed scopes are a public artifact.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.errors import SerializationError
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.nodes.base import Mechanism
from dpflow.planner import Accounting, TypedScope, certify
from dpflow.planner.certify import _Planner
from dpflow.privacy import PLD_RULE


def _quantile_plan(budget: dp.Measure) -> dp.Plan:
    b = dp.PlanBuilder(budget=budget)
    X = b.source("X", dp.Reals(), n=100)
    return b.build(q=N.Quantile(q=0.5)(N.OrderStatistics(lower=0.0, upper=10.0)(X)))


def test_a_quantile_only_plan_under_approx_dp_runs_in_pure_mode_with_epsilon_one():
    """The drift the review found: Quantile was not in the {"LaplaceMech", "Peel"} set, so it was
    routed through zCDP (effective epsilon 0.22); every pure-capable mechanism is now considered."""
    cert = certify(_quantile_plan(dp.ApproxDP(1.0, 1e-6)))
    (alloc,) = cert.allocations.values()
    assert (alloc.mode, alloc.share) == ("pure", Fraction(1))
    assert cert.ledger.totals[0].pure_eps == 1
    assert cert.ledger.allocation.startswith("pure mode")
    assert _Planner(_quantile_plan(dp.ApproxDP(1.0, 1e-6))).mode_and_total().accounting is Accounting.PURE


def test_every_mechanism_kind_declares_its_capabilities():
    """A new mechanism must say whether it is pure-capable and whether its cost is a Gaussian-DP profile."""
    mechs = [k for k in N.NODE_KINDS.values() if issubclass(k, Mechanism)]
    assert mechs
    for kind in mechs:
        assert "pure_capable" in vars(kind) and "gaussian_profile" in vars(kind), kind.kind
        assert not (kind.pure_capable and kind.gaussian_profile), kind.kind
    caps = {k.kind: (k.pure_capable, k.gaussian_profile) for k in mechs}
    gauss = N.GaussianMech()
    assert gauss.cost(Fraction(1, 2), "zcdp").gdp_mu2 is not None  # gaussian_profile: the cost is a GDP profile
    with pytest.raises(dp.PlanTypeError, match="is not pure DP"):
        gauss.cost(Fraction(1), "pure")
    assert caps["GaussianMech"] == (False, True)
    assert caps["StabilityHistogram"] == (False, False)
    for name in ("LaplaceMech", "Peel", "Quantile", "DyadicExpMech"):
        assert caps[name] == (True, False)


@attrs.frozen(kw_only=True)
class _ImpureLaplace(N.LaplaceMech):
    """A Laplace mechanism declared not pure-capable: the planner must read the capability."""

    pure_capable: ClassVar[bool] = False


@attrs.frozen(kw_only=True)
class _NonGdpGaussian(N.GaussianMech):
    """A Gaussian mechanism (same kind string) without the Gaussian-DP profile capability."""

    gaussian_profile: ClassVar[bool] = False


def _stat(b: dp.PlanBuilder) -> dp.Sensitive[object]:
    return N.Mean()(N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2), n=100)))


@pytest.mark.parametrize("budget", [dp.PureDP(1.0), dp.ApproxDP(1.0, 0)], ids=["pure", "approx-delta-0"])
def test_pure_mode_refuses_by_capability_naming_the_node(budget):
    b = dp.PlanBuilder(budget=budget)
    m = _ImpureLaplace()(_stat(b))
    with pytest.raises(dp.PlanTypeError) as info:
        certify(b.build(m=m))
    assert info.value.node == m.id
    assert "is not pure DP" in info.value.problem


def test_pure_capability_gates_the_approx_dp_pure_heuristic():
    b = dp.PlanBuilder(budget=dp.ApproxDP(1.0, 1e-6))
    plain = certify(b.build(m=N.LaplaceMech()(_stat(b))))
    b = dp.PlanBuilder(budget=dp.ApproxDP(1.0, 1e-6))
    impure = certify(b.build(m=_ImpureLaplace()(_stat(b))))
    assert [a.mode for a in plain.allocations.values()] == ["pure"]
    assert [a.mode for a in impure.allocations.values()] == ["zcdp"]


def test_the_exact_gdp_route_reads_the_gaussian_profile_capability():
    def plan(mech: type[N.GaussianMech]) -> dp.Plan:
        b = dp.PlanBuilder(budget=dp.ApproxDP(1.0, 1e-6))
        return b.build(m=mech()(_stat(b)))

    gdp = _Planner(plan(N.GaussianMech)).mode_and_total()
    assert gdp.accounting is Accounting.GDP and gdp.accounting.mode == "zcdp"
    assert all(a.continuous_gaussian for a in certify(plan(N.GaussianMech)).allocations.values())
    other = certify(plan(_NonGdpGaussian))
    assert _Planner(plan(_NonGdpGaussian)).mode_and_total().accounting is Accounting.ZCDP
    assert not any(a.continuous_gaussian for a in other.allocations.values())


@pytest.mark.parametrize("exact_noise", [False, True])
def test_the_lattice_pld_reads_the_gaussian_profile_capability(exact_noise: bool) -> None:
    """Only ``gaussian_profile`` mechanisms draw the discrete Gaussian through ``unit_lattice`` (lattice scale >=
    2^40), which the lattice Gaussian PLD assumes: a Gaussian cost on another mechanism gets no PLD at all."""
    def plan(mech: type[N.GaussianMech]) -> dp.Plan:
        b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
        return b.build(m=mech()(_stat(b)))

    (mine,) = certify(plan(N.GaussianMech), exact_noise).ledger.totals
    (other,) = certify(plan(_NonGdpGaussian), exact_noise).ledger.totals
    assert mine.cost.pld is not None and mine.cost.pld.has_lattice_gaussian
    assert other.cost.pld is None and mine.cost.rho == other.cost.rho


def test_accounting_modes_are_typed():
    assert [a.mode for a in Accounting] == ["pure", "zcdp", "zcdp", "pure", "zcdp"]
    assert [a.continuous_gaussian for a in Accounting] == [False, False, True, True, True]


def _loop_plan(weights: list[float]) -> tuple[dp.Plan, str]:
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    X = b.source("X", dp.Vectors(d=2), n=100)
    seen: list[str] = []

    def body(rows, state, k):
        m = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(rows)))
        seen.append(m.id)
        return m

    out = N.repeat(X, b.public([0.0, 0.0]), body, times=len(weights), round_weights=weights)
    return b.build(m=out), f"{out.id}/{seen[0]}"


def test_every_invocation_has_its_share_and_its_own_certified_cost():
    plan, key = _loop_plan([1.0, 3.0, 1.0])
    cert = certify(plan)
    loop = key.split("/")[0]
    assert cert.invocations.rounds == {loop: (0, 1, 0)}
    shares = [cert.invocations.at(key, (c,)).share for c in cert.invocations.rounds[loop]]
    assert shares == [Fraction(1, 5), Fraction(3, 5), Fraction(1, 5)]
    for c in (0, 1):
        a = cert.invocations.at(key, (c,))
        assert a.cost.rho == a.share  # the Gaussian's cost at the invocation's share, not the unit's
    assert cert.allocations[key].share == Fraction(1, 5)  # per unit round weight, as before
    assert len(cert.invocations.table) == 2  # one entry per distinct round weight, not per round


def test_the_interpreter_reads_the_invocation_table():
    """Scaling the certified invocation shares changes the noise the interpreter uses, round by round."""
    plan, key = _loop_plan([1.0, 3.0])
    cert = certify(plan)
    data = {"X": np.zeros((100, 2))}
    sigmas = [f["sigma"] for f in execute(cert, data, dp.SeededNoise(0), NumpyBackend()).facts[key]]
    table = {k: attrs.evolve(a, share=a.share * 4) for k, a in cert.invocations.table.items()}
    mutant = attrs.evolve(cert, invocations=attrs.evolve(cert.invocations, table=table))
    halved = [f["sigma"] for f in execute(mutant, data, dp.SeededNoise(0), NumpyBackend()).facts[key]]
    assert sigmas[0] == pytest.approx(np.sqrt(3) * sigmas[1])
    assert halved == pytest.approx([s / 2 for s in sigmas])


def test_typed_scopes_are_public_and_frozen():
    plan, key = _loop_plan([1.0, 2.0])
    cert = certify(plan)
    assert isinstance(cert.space, TypedScope)
    body = cert.space.bodies[key.split("/")[0]]
    assert isinstance(body, TypedScope) and body.path == key.split("/")[0] + "/"
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        cert.space.path = "x"  # type: ignore[misc]


def test_the_accounting_option_is_validated_once_where_the_plan_is_made():
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    plan = b.build(m=N.GaussianMech()(_stat(b)))
    with pytest.raises(ValueError, match="accounting must be 'auto' or 'basic', got 'zcdp'"):
        attrs.evolve(plan, accounting="zcdp")
    with pytest.raises(ValueError, match="accounting must be 'auto' or 'basic'"):
        dp.PlanBuilder(budget=dp.ZCDP(1.0), accounting="paper")
    text = plan.to_json().replace('{"budget"', '{"accounting":"bogus","budget"', 1)
    assert '"accounting":"bogus"' in text
    with pytest.raises(SerializationError, match="accounting must be"):
        dp.Plan.from_json(text)
    assert dp.Plan.from_json(plan.to_json()).hash == plan.hash  # JSON format unchanged


def _gaussian_plan(budget: Any, **kw: Any) -> dp.Plan:
    b = dp.PlanBuilder(budget=budget, **kw)
    C = N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2), n=100))
    return b.build(a=N.GaussianMech()(N.Mean()(C)), c=N.GaussianMech(weight=2)(N.Sum()(C)))


@pytest.mark.parametrize("budget", [dp.ZCDP(0.5), dp.ApproxZCDP(0.5, 1e-6)], ids=lambda b: b.describe())
def test_a_zcdp_all_gaussian_plan_under_secure_noise_never_headlines_exact_gaussian_dp(budget: Any) -> None:
    res = _gaussian_plan(budget).run({"X": np.zeros((100, 2))}, noise=dp.SecureNoise())
    facts = res.report.execution.facts
    assert all("lattice" in {k for f in facts[m] for k in f} for m in ("gaussian_mech_3", "gaussian_mech_5"))
    for ledger in (res.report.ledger, _gaussian_plan(budget).check()):
        (total,) = ledger.totals
        assert total.gdp_mu is None
        assert [c.rule for c in total.conversions if "Gaussian-DP" in c.rule] == []
        # the lattice Gaussian PLD (issue 16): pessimistic, so at least the exact continuous value 4.886554
        assert total.tightest().rule == PLD_RULE and 4.886554 < total.tightest().epsilon < 4.887
        assert total.cost.pld is not None and total.cost.pld.has_lattice_gaussian
        assert "exact Gaussian-DP" not in ledger.summary()
        assert any(note.startswith("no exact Gaussian-DP conversion") for note in ledger.composition)
        text = res.report.to_json()
        assert '"exact Gaussian-DP"' not in text


def test_the_headline_of_a_zcdp_gaussian_plan_is_the_lattice_pld_golden_value() -> None:
    total = _gaussian_plan(dp.ZCDP(0.5)).check().totals[0]
    cks = {c.rule: c.epsilon for c in total.conversions}["zCDP -> (eps,delta) by CKS"]
    assert cks == pytest.approx(5.221534, abs=1e-6)  # docs/privacy.md golden value
    assert total.tightest().epsilon == pytest.approx(4.886764, abs=1e-6)  # lattice PLD, docs/privacy.md
    assert total.tightest().delta == 1e-6


@pytest.mark.parametrize("accounting", ["auto", "basic"])
def test_plans_that_force_continuous_noise_keep_the_exact_gaussian_dp_conversion(accounting: str) -> None:
    ledger = _gaussian_plan(dp.ApproxDP(1.0, 1e-6), accounting=accounting).check(exact_noise=False)
    (total,) = ledger.totals
    assert total.gdp_mu is not None
    assert any(c.rule == "exact Gaussian-DP" for c in total.conversions)
    assert not any(note.startswith("no exact Gaussian-DP") for note in ledger.composition)
    if accounting == "auto":
        assert total.tightest().rule == "exact Gaussian-DP" and total.tightest().epsilon <= 1.0


def test_the_no_gdp_note_appears_only_when_a_gdp_accounting_was_dropped() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    C = N.Clip(box=(-1.0, 1.0))(b.source("X", dp.Vectors(d=2), n=100))
    mixed = b.build(a=N.GaussianMech()(N.Mean()(C)), c=N.LaplaceMech()(N.Sum()(C))).check(exact_noise=False)
    assert mixed.totals[0].gdp_mu is None  # not all Gaussian: never a GDP accounting
    assert not any(note.startswith("no exact Gaussian-DP") for note in mixed.composition)
