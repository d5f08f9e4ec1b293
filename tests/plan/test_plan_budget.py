"""A plan's budget is checked where the plan is made (builder, ``Plan(...)``, JSON): a bare number names the
measures, a zero budget is refused, a tiny positive one is not (issue 14 item 15)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.errors import PlanTypeError


def _mean_plan() -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=100)
    return b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))


@pytest.mark.parametrize("budget", [0.5, 1, "0.5", None, (1.0, 1e-6)])
def test_a_bare_number_budget_names_the_measures(budget: Any) -> None:
    with pytest.raises(PlanTypeError, match=r"is a \w+, not a privacy measure. Fix: write budget=dp.PureDP") as err:
        dp.PlanBuilder(budget=budget)
    if isinstance(budget, float):
        assert "dp.PureDP(0.5) for epsilon-DP, dp.ZCDP(0.5) for rho-zCDP" in str(err.value)


def test_a_plan_made_directly_or_read_back_checks_its_budget() -> None:
    plan = _mean_plan()
    with pytest.raises(PlanTypeError, match="not a privacy measure"):
        attrs.evolve(plan, budget=0.5)
    text = plan.to_json().replace('"rho":"1/2"', '"rho":"0"')
    assert text != plan.to_json()
    with pytest.raises(PlanTypeError, match="rho=0"):
        dp.Plan.from_json(text)


@pytest.mark.parametrize("budget", [dp.ZCDP(0), dp.PureDP(0), dp.ApproxDP(0, 1e-6), dp.ApproxDP(0, 0),
                                    dp.ApproxZCDP(0, 1e-6)], ids=lambda b: b.describe())
def test_a_zero_budget_is_refused_when_the_plan_is_made(budget: Any) -> None:
    unit = "rho" if isinstance(budget, (dp.ZCDP, dp.ApproxZCDP)) else "epsilon"
    with pytest.raises(PlanTypeError, match=rf"^plan: the budget .* has {unit}=0, which allows no release. "
                                            rf"Fix: give the budget a positive {unit}"):
        dp.PlanBuilder(budget=budget)


@pytest.mark.parametrize("budget", [dp.ZCDP("1e-300"), dp.PureDP("1e-300"), dp.ApproxDP("1e-300", 1e-6)],
                         ids=lambda b: b.describe())
def test_a_tiny_positive_budget_is_not_refused_as_zero(budget: Any) -> None:
    dp.PlanBuilder(budget=budget)
