"""``NoiseScale``: the noise multiplier the planner certified for a mechanism's invocation, released for free.

It must be exactly the mechanism's own calibration at unit sensitivity (``Mechanism.noise_multiplier``,
one rule used by the mechanism's noise and by ``NoiseScale``), looked up per invocation (round weights
of a loop), free in the ledger, and refused at plan time for anything that is not the output of a
noise-adding mechanism of the same scope.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.errors import PlanTypeError, PostProcessingError
from dpflow.handles import Ref
from dpflow.planner.certify import certify
from dpflow.privacy import gaussian_sigma_for_zcdp, laplace_scale, pure_eps_for_zcdp

ROWS = np.linspace(-1.0, 1.0, 20).reshape(10, 2)


def _run(plan: dp.Plan, data: Any = ROWS, exact: bool = False) -> Any:
    return plan.run({"X": data}, noise=dp.SeededNoise(5, exact=exact))


def _source(budget: Any, d: int = 2) -> tuple[dp.PlanBuilder, Any]:
    b = dp.PlanBuilder(budget=budget)
    return b, b.source("X", dp.Vectors(d=d), n=10)


# --------------------------------------------------------------------------- the value, per mechanism


def test_gaussian_noise_scale_is_the_certified_sigma_per_unit_l2() -> None:
    b, X = _source(dp.ZCDP(Fraction(1, 2)))
    m = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))
    plan = b.build(m=m, u=N.noise_scale(m))
    res = _run(plan)
    u = res.released["u"]
    assert u == gaussian_sigma_for_zcdp(1, Fraction(1, 2))   # 1/sqrt(2 rho), rho = 1/2, rounded up
    assert 1.0 < u < 1.0 + 1e-11
    (fact,) = res.report.execution.facts["gaussian_mech_3"]
    l2 = certify(plan).space.types["mean_2"].l2.value({})  # diameter 2 r over a public n = 10, rounded up
    assert l2 == pytest.approx(0.2, rel=1e-11)
    assert fact["sigma"] == N.GaussianMech().noise_scale(l2, Fraction(1, 2), "zcdp")
    assert fact["sigma"] == pytest.approx(u * l2, rel=1e-11)


def test_laplace_noise_scale_is_b_per_unit_l1() -> None:
    b = dp.PlanBuilder(budget=dp.PureDP(Fraction(1, 2)))
    X = b.source("X", dp.Ordinal(N=2), n=10)
    h = N.LaplaceMech()(N.Histogram(edges=[0, 1, 2])(X))
    res = b.build(h=h, u=N.noise_scale(h)).run({"X": np.zeros(10, dtype=int)}, noise=dp.SeededNoise(1))
    assert res.released["u"] == laplace_scale(1, Fraction(1, 2))   # 1/epsilon = 2, rounded up
    (fact,) = res.report.execution.facts["laplace_mech_2"]
    assert fact["scale"] == pytest.approx(2.0 * res.released["u"], rel=1e-11)   # Histogram l1 = 2


def test_laplace_under_zcdp_uses_the_epsilon_its_share_buys() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(Fraction(1, 8)))
    X = b.source("X", dp.Ordinal(N=2), n=10)
    h = N.LaplaceMech()(N.Histogram(edges=[0, 1, 2])(X))
    res = b.build(h=h, u=N.noise_scale(h)).run({"X": np.zeros(10, dtype=int)}, noise=dp.SeededNoise(1))
    assert res.released["u"] == laplace_scale(1, pure_eps_for_zcdp(Fraction(1, 8)))   # eps = sqrt(2 rho) = 1/2


def test_peel_noise_scale_is_b_per_unit_linf() -> None:
    b, X = _source(dp.PureDP(3), d=4)
    top = N.Peel(s=2)(N.Mean()(N.Clip(box=(-1, 1))(X)))
    res = b.build(top=top, u=N.noise_scale(top)).run({"X": np.zeros((10, 4))}, noise=dp.SeededNoise(2))
    # 2s pure steps: s noisy-max rounds of 2u and s releases of u, so 3 s u = epsilon: u = 1/2, b/lambda = 2
    # (lambda / u rounded up exactly: 2 is a float, so no step above it)
    assert res.released["u"] == 2.0
    (fact,) = res.report.execution.facts["peel_3"]
    assert fact["scale"] == pytest.approx(res.released["u"] * 2.0 / 10, rel=1e-11)   # linf of a box mean


@pytest.mark.parametrize("exact", [False, True])
def test_recorded_scale_is_the_mechanisms_rule_applied_to_the_sensitivity(exact: bool) -> None:
    """The scale the mechanism recorded is ``noise_scale(sensitivity)`` and NoiseScale is the same rule at
    sensitivity 1 (exact sources: the widened lattice sensitivity, same rule)."""
    b, X = _source(dp.ZCDP(Fraction(1, 3)), d=3)
    m = N.GaussianMech()(N.Sum()(N.Clip(radius=2.0)(X)))
    plan = b.build(m=m, u=N.noise_scale(m))
    res = _run(plan, np.ones((10, 3)), exact=exact)
    facts = {k: v for f in res.report.execution.facts["gaussian_mech_3"] for k, v in f.items()}
    l2 = certify(plan).space.types["sum_2"].l2.value({})  # 2 r = 4 (replace-one), rounded up
    sens = facts["lattice"]["sensitivity"] if exact else l2
    mech = N.GaussianMech()
    assert facts["sigma"] == mech.noise_scale(sens, Fraction(1, 3), "zcdp")
    assert res.released["u"] == mech.noise_multiplier(Fraction(1, 3), "zcdp")
    assert facts["sigma"] == pytest.approx(res.released["u"] * sens, rel=1e-11)


# --------------------------------------------------------------------------- per invocation, free


def _loop_plan(budget: Any = None, accounting: str = "auto", weights: Any = (1.0, 1.0, 3.0)) -> dp.Plan:
    b = dp.PlanBuilder(budget=budget or dp.ZCDP(Fraction(1, 2)), accounting=accounting)
    X = b.source("X", dp.Vectors(d=2), n=10)

    def body(x: Any, state: Any, k: Any) -> Any:
        m = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(x)))
        return N.Apply(fn=np.append, shape=None)(state, N.noise_scale(m))

    return b.build(u=N.repeat(X, b.public(np.zeros(0)), body, times=3, round_weights=weights))


def test_each_round_gets_its_own_certified_multiplier() -> None:
    """Rounds of weight 1, 1, 3 of rho = 1/2: rho_k = 1/10, 1/10, 3/10 (the per-invocation table, not the
    share per unit round weight)."""
    u = np.asarray(_run(_loop_plan()).released["u"])
    want = [gaussian_sigma_for_zcdp(1, r) for r in (Fraction(1, 10), Fraction(1, 10), Fraction(3, 10))]
    assert u.tolist() == want


def test_basic_accounting_multiplier_is_the_gdp_calibrated_one() -> None:
    plan = _loop_plan(dp.ApproxDP(1.0, 1e-6), accounting="basic", weights=None)
    cert = certify(plan)
    (key,) = [k for k in cert.allocations if "gaussian_mech" in k]
    rho = cert.invocations.at(key, (0,)).share
    assert np.asarray(_run(plan).released["u"]).tolist() == [gaussian_sigma_for_zcdp(1, rho)] * 3


def test_noise_scale_is_free_and_shown_in_the_ledger() -> None:
    b, X = _source(dp.ZCDP(1))
    m = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))
    with_scale = b.build(m=m, u=N.noise_scale(m)).check()
    b2, X2 = _source(dp.ZCDP(1))
    without = b2.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X2)))).check()
    assert with_scale.totals == without.totals
    (entry,) = [e for e in with_scale.entries if e.kind == "NoiseScale"]
    assert not entry.cost and "gaussian_mech_3" in entry.derivation


def test_plan_with_noise_scale_round_trips_through_json() -> None:
    plan = _loop_plan()
    again = dp.Plan.from_json(plan.to_json())
    assert again.hash == plan.hash
    assert np.asarray(_run(again).released["u"]).tolist() == np.asarray(_run(plan).released["u"]).tolist()


# --------------------------------------------------------------------------- refusals, before any data


def _refused(plan: dp.Plan, node: str, exc: type = PlanTypeError) -> Any:
    with pytest.raises(exc) as info:
        certify(plan)
    assert info.value.node == node and "Fix:" in str(info.value)
    return info.value


def test_refuses_a_public_value() -> None:
    b, X = _source(dp.ZCDP(1))
    c = b.public(1.0)
    nid = b.add(N.NoiseScale(of=c), ())
    err = _refused(b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))), u=dp.handles.Released(nid, b)), nid)
    assert "noise-adding mechanism" in err.problem


def test_refuses_post_processing_of_a_mechanism_output() -> None:
    b, X = _source(dp.ZCDP(1))
    m = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))
    u = N.noise_scale(N.Apply(fn=np.abs)(m))
    _refused(b.build(u=u), u.id)


def test_refuses_an_exponential_mechanism() -> None:
    b, X = _source(dp.ZCDP(1))
    q = N.Quantile(q=0.5)(N.OrderStatistics(upper=4.0)(N.Magnitudes(of="rows")(X)))
    u = N.noise_scale(q)
    err = _refused(b.build(q=q, u=u), u.id)
    assert "GaussianMech, LaplaceMech or Peel" in err.fix


def test_refuses_a_loop_state_that_came_from_a_mechanism_outside() -> None:
    """A body's State has the initial value's type; NoiseScale must still refuse it (it names no mechanism
    of the body, and the invocation table has no entry for it)."""
    b, X = _source(dp.ZCDP(1))
    init = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))
    ids: list[str] = []

    def body(x: Any, state: Any, k: Any) -> Any:
        u = N.noise_scale(state)
        ids.append(u.id)
        return N.Apply(fn=np.add)(N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(x))), u)

    out = N.repeat(X, init, body, times=2)
    _refused(b.build(out=out), f"{out.id}/{ids[0]}")


def test_refuses_inputs_and_sensitive_handles() -> None:
    b, X = _source(dp.ZCDP(1))
    m = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))
    nid = b.add(N.NoiseScale(of=m), (m.id,))
    _refused(b.build(u=dp.handles.Released(nid, b)), nid)
    with pytest.raises(PostProcessingError):
        N.NoiseScale(of=X)
    with pytest.raises(PlanTypeError):
        N.noise_scale(X)
    b2, X2 = _source(dp.ZCDP(1))
    rows_ref = b2.add(N.NoiseScale(of=Ref(X2.id)), ())
    _refused(b2.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X2))), u=dp.handles.Released(rows_ref, b2)),
             rows_ref, PostProcessingError)


# --------------------------------------------------------------------------- estimators read it instead of copying


def test_ssp_reads_its_gaussians_noise_scale_without_certifying_twice(monkeypatch: Any) -> None:
    """Before NoiseScale, ``sufficient_statistics`` certified a draft plan to read the Gaussian's share."""
    import importlib

    planner = importlib.import_module("dpflow.planner.certify")
    from dpflow.estimators import regression

    calls: list[Any] = []
    real = planner.certify
    monkeypatch.setattr(planner, "certify", lambda plan: calls.append(plan) or real(plan))
    plan = regression.sufficient_statistics(d=3, n=2000, budget=dp.ZCDP(0.5))
    assert calls == []
    (scale,) = [r for r in plan.records if isinstance(r.node, N.NoiseScale)]
    assert next(r for r in plan.records if r.id == scale.node.of.id).node.kind == "GaussianMech"
