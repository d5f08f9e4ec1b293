"""Property tests over the plan builder: random valid plans are certified within their budget, run,
and pass record/replay on a random adversarial neighbour; random invalid plans are refused with a
PlanError before any data is read."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_audit import audit_pair
from test_budget import Poisoned

import dpflow as dp
from dpflow import nodes as N
from dpflow.planner.certify import certify

SETTINGS = settings(max_examples=40, deadline=None)


@st.composite
def valid_plans(draw: st.DrawFn) -> tuple[dp.Plan, int, int]:
    relation = draw(st.sampled_from(["replace", "add_remove"]))
    pure = draw(st.booleans())
    d = draw(st.integers(1, 4))
    n = draw(st.integers(2, 12))
    budget = dp.PureDP(draw(st.sampled_from(["1/2", "1", "3"]))) if pure else draw(st.sampled_from(
        [dp.ZCDP("1/2"), dp.ZCDP(2), dp.ApproxDP(1, 1e-6)]))
    b = dp.PlanBuilder(budget=budget, neighbors=relation)
    X = b.source("X", dp.Vectors(d=d), n=n if relation == "replace" else None)
    outs: dict[str, Any] = {}
    for k in range(draw(st.integers(1, 3))):
        box = draw(st.booleans())
        rows = N.Clip(box=(-1.0, 2.0))(X) if box else N.Clip(radius=draw(st.sampled_from([0.5, 1.0, 4.0])))(X)
        queries = ["sum", "count"] + (["mean"] + ([] if pure else ["m2"]) if relation == "replace" else [])
        query = draw(st.sampled_from(queries))
        stat = {"sum": N.Sum, "count": N.Count, "mean": N.Mean, "m2": N.SecondMoment}[query]()(rows)
        mechs = ["laplace"] if query != "m2" else []
        if not pure:
            mechs.append("gauss")
        if query in ("sum", "mean"):
            mechs.append("peel")
        mech = draw(st.sampled_from(mechs))
        weight = draw(st.sampled_from([0.5, 1.0, 3.0]))
        if mech == "gauss":
            outs[f"o{k}"] = N.GaussianMech(weight=weight)(stat)
        elif mech == "laplace":
            outs[f"o{k}"] = N.LaplaceMech(weight=weight)(stat)
        else:
            outs[f"o{k}"] = N.Peel(s=draw(st.integers(1, d)), weight=weight)(stat)
    return b.build(**outs), n, d


@SETTINGS
@given(valid_plans(), st.integers(0, 2**32 - 1))
def test_random_valid_plans_are_certified_within_budget_and_run(case: tuple[dp.Plan, int, int], seed: int) -> None:
    plan, n, d = case
    cert = certify(plan)
    total = cert.ledger.totals[0]
    budget = plan.budget
    if isinstance(budget, dp.ZCDP):
        assert Fraction(total.rho) <= budget.rho
    elif isinstance(budget, dp.PureDP):
        assert total.pure_eps is not None and Fraction(total.pure_eps) <= budget.epsilon
    else:
        assert total.tightest().epsilon <= float(budget.epsilon)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 3
    X[0] = np.nan
    res = plan.run({"X": X}, noise=dp.SeededNoise(seed))
    for name, _ in plan.outputs:
        assert np.all(np.isfinite(np.asarray(res.released[name], dtype=float)))
    Y = X.copy()
    Y[-1] = 1e9 * rng.normal(size=d) if plan.neighbors == "replace" else Y[-1]
    if plan.neighbors == "add_remove":
        Y = X[:-1]
    assert audit_pair(cert, {"X": X}, {"X": Y}) == []


MISTAKES = ("no_clip", "gauss_under_pure", "fixed_cost_over_budget", "mean_without_public_n", "peel_too_many",
            "sensitive_output", "mechanism_on_rows")


@SETTINGS
@given(st.sampled_from(MISTAKES), st.integers(1, 4), st.sampled_from(["replace", "add_remove"]))
def test_random_invalid_plans_are_refused_before_data_is_read(mistake: str, d: int, relation: str) -> None:
    def build() -> dp.Plan:
        pure = mistake == "gauss_under_pure"
        rel = "add_remove" if mistake == "mean_without_public_n" else relation  # n is private only there
        b = dp.PlanBuilder(budget=dp.PureDP(1) if pure else dp.ZCDP(1), neighbors=rel)
        X = b.source("X", dp.Vectors(d=d), n=None if mistake == "mean_without_public_n" else 10)
        rows = N.Clip(radius=1.0)(X)
        if mistake == "no_clip":
            return b.build(m=N.GaussianMech()(N.Sum()(X)))
        if mistake == "gauss_under_pure":
            return b.build(m=N.GaussianMech()(N.Sum()(rows)))
        if mistake == "fixed_cost_over_budget":
            return b.build(m=N.GaussianMech(rho=Fraction(3, 2))(N.Sum()(rows)))
        if mistake == "mean_without_public_n":
            return b.build(m=N.GaussianMech()(N.Mean()(rows)))
        if mistake == "peel_too_many":
            return b.build(m=N.Peel(s=d + 1)(N.Sum()(N.Clip(box=(0.0, 1.0))(X))))
        if mistake == "sensitive_output":
            return b.build(m=N.Sum()(rows))  # type: ignore[arg-type]
        return b.build(m=N.GaussianMech()(rows))  # type: ignore[arg-type]

    refused = False
    try:
        build().run(Poisoned(("X",)))
    except dp.PlanError:
        refused = True
    assert refused
