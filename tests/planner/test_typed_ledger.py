"""The typed ledger (issue 13 item 3): exact totals and cost events, text rendered from them, the
budget store reading the typed values, and versioned canonical JSON."""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import attrs
import numpy as np
import pytest
from test_plan_json import every_kind_plan

import dpflow as dp
from dpflow import nodes as N
from dpflow.budget import BudgetExhaustedError, BudgetStore
from dpflow.estimators import gaussian as G
from dpflow.planner.ledger import (
    LEDGER_SCHEMA_VERSION,
    Charge,
    Composition,
    CostEvent,
    Ledger,
    Parallel,
    Rounds,
    Sequential,
    Tree,
    cost_from_data,
    cost_to_data,
    recompose,
)
from dpflow.privacy import Cost
from dpflow.report.report import REPORT_SCHEMA_VERSION


def two_mech(budget: dp.Measure, accounting: str = "auto") -> dp.Plan:
    """A Gaussian (weight 1) and a Laplace (weight 2) mechanism on one source."""
    b = dp.PlanBuilder(budget=budget, accounting=accounting)
    X = b.source("X", dp.Vectors(d=2), n=100)
    return b.build(g=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))),
                   l=N.LaplaceMech(weight=2)(N.Mean()(N.Clip(radius=1.0)(X))))


def third_ledger() -> Ledger:
    """Two Gaussian mechanisms (weights 1 and 2): a total of rho = 1/3 exactly (not a terminating decimal)."""
    b = dp.PlanBuilder(budget=dp.ZCDP("1/3"))
    X = b.source("X", dp.Vectors(d=2), n=100)
    return b.build(g=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))),
                   h=N.GaussianMech(weight=2)(N.Mean()(N.Clip(radius=1.0)(X)))).check()


# --------------------------------------------------------------------------- typed values

def test_totals_and_events_are_exact_fractions() -> None:
    ledger = third_ledger()
    (total,) = ledger.totals
    assert type(total.rho) is Fraction and total.rho == Fraction(1, 3)
    assert total.delta0 == 0 and total.pure_eps is None and total.gdp_mu is None
    assert total.used == 1
    assert total.cost.rho == Fraction(1, 3)
    g, h = ledger.events()
    assert (g.node, g.kind, g.mode, g.share) == ("gaussian_mech_3", "GaussianMech", "zcdp", Fraction(1, 9))
    assert (h.node, h.kind, h.mode, h.share) == ("gaussian_mech_6", "GaussianMech", "zcdp", Fraction(2, 9))
    assert g.cost.rho == Fraction(1, 9) and h.cost.rho == Fraction(2, 9)
    assert not g.per_round_weight and not g.continuous_gaussian and g.accounting == "auto"
    # the text is rendered from the typed values (rounded for reading only)
    assert total.measure == "rho=0.3333333333 zCDP" and total.budget_used == "100%"
    assert [e.cost for e in ledger.entries if e.event] == ["rho=0.1111111111 zCDP", "rho=0.2222222222 zCDP"]
    assert all(e.cost == "" for e in ledger.entries if e.event is None)
    # a Laplace mechanism realises at most its share (its scale is rounded up)
    lap = two_mech(dp.ZCDP("1/3")).check().events()[1]
    assert lap.share == Fraction(2, 9) and 0 < Fraction(2, 9) - lap.cost.rho < Fraction(1, 10**12)


def test_events_inside_a_recurse_body_are_per_unit_round_weight() -> None:
    ledger = G.covariance(d=2, n=3000, budget=dp.ZCDP("1/3"), K=30.0).check()
    (event,) = ledger.events()
    assert event.node == "repeat_6/b1.gaussian_mech_8" and event.per_round_weight
    assert ledger.totals[0].rho == Fraction(1, 3)


def test_basic_accounting_events_carry_their_own_epsilon_delta() -> None:
    ledger = two_mech(dp.ApproxDP(1, "1/1000000"), accounting="basic").check()
    g, lap = ledger.events()
    assert g.accounting == lap.accounting == "basic"
    assert (g.cost.basic_eps, g.cost.basic_delta) == (Fraction(1, 3), Fraction(1, 3_000_000))
    assert (lap.cost.basic_eps, lap.cost.basic_delta) == (Fraction(2, 3), Fraction(0))
    assert g.describe().endswith("; (epsilon, delta) = (0.333333, 3.33e-07) per run")
    # the same cost outside basic accounting shows no per-mechanism (epsilon, delta)
    assert attrs.evolve(lap, accounting="auto").describe() == "epsilon=0.6666666667 pure DP"
    assert attrs.evolve(g, per_round_weight=True).describe().endswith(" per unit round weight; (epsilon, delta) = "
                                                                       "(0.333333, 3.33e-07) per round")


# --------------------------------------------------------------------------- golden text

GOLDEN = {
    "zcdp": (two_mech, (dp.ZCDP("1/3"), "auto"),
             "plan plan (HASH), neighbours: replace\n"
             "budget: rho=0.3333333333 zCDP; zCDP mode: rho=0.333333 shared by weight\n"
             "  gaussian_mech_3              l2 = 0.02                          rho=0.1111111111 zCDP\n"
             "  laplace_mech_6               l1 = 0.0282843                     epsilon=0.6666666667 pure DP\n"
             # issue 16 round 3: the lattice Gaussian PLD (and the pure Laplace) is tighter than CKS
             "source X: rho=0.3333333333 zCDP (100% of the budget); (2.73735, 1e-06)-DP by PLD "
             "(dp_accounting, pessimistic)"),
    "basic": (two_mech, (dp.ApproxDP(1, "1/1000000"), "basic"),
              "plan plan (HASH), neighbours: replace\n"
              "budget: (epsilon=1, delta=1e-06)-DP; basic (epsilon, delta) mode: mechanism i gets (epsilon, delta) "
              "* w_i / W of (1, 1e-06) and is calibrated to be (epsilon_i, delta_i)-DP on its own (Gaussian: exact "
              "Gaussian-DP profile; other mechanisms: the less noisy of pure epsilon_i and zCDP converted by CKS); "
              "totals by basic composition (Dwork-Roth 2014 Thm 3.16): the per-step accounting of Cai-Wang-Zhang "
              "2021\n"
              "  gaussian_mech_3              l2 = 0.02                          rho=0.003214781921 zCDP; (epsilon, "
              "delta) = (0.333333, 3.33e-07) per run\n"
              "  laplace_mech_6               l1 = 0.0282843                     epsilon=0.6666666667 pure DP; "
              "(epsilon, delta) = (0.666667, 0) per run\n"
              # issue 16: the PLD of the continuous Gaussian and the pure Laplace is tighter than basic composition
              "source X: rho=0.2254370041 zCDP (100% of the budget); (0.972343, 1e-06)-DP by PLD "
              "(dp_accounting, pessimistic)"),
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_summary_text_is_unchanged(name: str) -> None:
    """The summary the string ledger printed (recorded before the ledger became typed)."""
    make, args, expected = GOLDEN[name]
    text = re.sub(r"sha256:[0-9a-f]{12}", "HASH", make(*args).check(exact_noise=False).summary())
    assert text == expected


def test_recurse_summary_line_is_unchanged() -> None:
    text = G.covariance(d=2, n=3000, budget=dp.ZCDP("1/3"), K=30.0).check(exact_noise=False).summary()
    assert ("  repeat_6/b1.gaussian_mech_8  l2 = 0.00513694                    rho=0.3333333333 zCDP per unit "
            "round weight") in text.splitlines()


# --------------------------------------------------------------------------- the budget store

def test_budget_store_composes_the_exact_typed_totals(tmp_path: Path) -> None:
    """Three runs of rho = 1/3 fill a lifetime rho = 1 exactly: the rendered 0.3333333333 would leave
    1e-10 over, and would admit a fourth run of the rounded-down text on a limit of 4/3 - 1e-10."""
    store = BudgetStore(tmp_path / "b.sqlite")
    store.open("d", dp.ZCDP(1))
    ledger = third_ledger()
    for _ in range(3):
        store.commit(store.reserve(ledger, "d"))
    assert store.status("d").remaining == 0
    assert [e.amount for e in store.entries("d")][1::2] == ["1/3"] * 3
    with pytest.raises(BudgetExhaustedError, match=r"needs rho=1/3 but only 0 "):
        store.reserve(ledger, "d")
    store.open("e", dp.ZCDP(Fraction(4, 3) - Fraction(1, 10**10)))
    for _ in range(3):
        store.commit(store.reserve(ledger, "e"))
    with pytest.raises(BudgetExhaustedError):
        store.reserve(ledger, "e")


def with_cost(ledger: Ledger, cost: Cost) -> Ledger:
    return attrs.evolve(ledger, totals=tuple(attrs.evolve(t, cost=cost) for t in ledger.totals))


def test_budget_store_reads_typed_delta0_and_pure_epsilon(tmp_path: Path) -> None:
    store = BudgetStore(tmp_path / "b.sqlite")
    store.open("z", dp.ZCDP(1))
    approx = with_cost(third_ledger(), Cost.approx_zcdp(Fraction(1, 3), Fraction(1, 10**9)))
    with pytest.raises(BudgetExhaustedError, match=r"approximate zCDP \(delta0=1/1000000000\)"):
        store.reserve(approx, "z")
    store.open("p", dp.PureDP(1))
    pure = with_cost(third_ledger(), Cost.pure(Fraction(1, 3)))
    for _ in range(3):
        store.commit(store.reserve(pure, "p"))
    assert store.status("p").remaining == 0
    with pytest.raises(BudgetExhaustedError, match="no pure-DP cost"):
        store.reserve(third_ledger(), "p")


# --------------------------------------------------------------------------- JSON

def test_cost_json_is_exact() -> None:
    c = Cost.gaussian_zcdp(Fraction(1, 3)).then(Cost.pure(Fraction(2, 7))).with_basic(Fraction(1, 3), Fraction(1, 9))
    data = cost_to_data(c)
    assert data["rho"] == str(c.rho) and data["pure_count"] == 1 and data["pure_eps"] is None
    assert cost_from_data(json.loads(json.dumps(data))) == c


@pytest.mark.parametrize("make", [third_ledger,
                                  lambda: two_mech(dp.ApproxDP(1, "1/1000000"), "basic").check(),
                                  lambda: G.gaussian(d=2, n=4000, budget=dp.ApproxDP(1, 1e-6), R=10.0,
                                                     K=30.0).check()],
                         ids=["zcdp", "basic", "recurse-gdp"])
def test_ledger_json_round_trip_keeps_the_typed_fields(make: object) -> None:
    ledger = make()  # type: ignore[operator]
    text = ledger.to_json()
    data = json.loads(text)
    assert (data["schema"], data["schema_version"]) == ("dpflow.ledger", LEDGER_SCHEMA_VERSION) == ("dpflow.ledger", 6)
    total = data["totals"][0]
    assert total["cost"]["rho"] == str(ledger.totals[0].rho) and total["used"] == str(ledger.totals[0].used)
    assert total["measure"] == ledger.totals[0].measure  # the rendered text is in the JSON for readers
    mechs = [e for e in data["entries"] if e["event"] is not None]
    assert [e["event"]["share"] for e in mechs] == [str(ev.share) for ev in ledger.events()]
    assert [e["cost"] for e in mechs] == [e.cost for e in ledger.entries if e.event]
    back = Ledger.from_json(text)
    assert back == ledger and back.to_json() == text
    assert back.events() == ledger.events() and all(isinstance(ev, CostEvent) for ev in back.events())
    assert Ledger.from_json(ledger.to_json(indent=2)) == ledger


def test_old_or_edited_ledger_json_is_refused_clearly() -> None:
    data = json.loads(third_ledger().to_json())
    old = {k: v for k, v in data.items() if k != "schema_version"} | {"schema": "dpflow.ledger/1"}
    with pytest.raises(ValueError, match=r"version 1 ledger .* certify the plan again"):
        Ledger.from_json(json.dumps(old))
    with pytest.raises(ValueError, match="version 6 document"):
        Ledger.from_json(json.dumps(data | {"schema_version": 7}))
    v4 = {k: v for k, v in data.items() if k != "predictions"} | {"schema_version": 4}
    with pytest.raises(ValueError, match=r"version 4 ledger no predicted errors.* certify the plan again"):
        Ledger.from_json(json.dumps(v4))
    with pytest.raises(ValueError, match=r"version 3 ledger no one-sided charges.* certify the plan again"):
        Ledger.from_json(json.dumps(data | {"schema_version": 3}))
    v2 = {k: v for k, v in data.items() if k != "noise_calibrations"} | {"schema_version": 2}
    with pytest.raises(ValueError, match=r"version 2 ledger has no noise calibrations.* certify the plan again"):
        Ledger.from_json(json.dumps(v2))
    edited = json.loads(json.dumps(data))
    edited["totals"][0]["measure"] = "rho=0.1 zCDP"
    with pytest.raises(ValueError, match="rendered text"):
        Ledger.from_json(json.dumps(edited))
    edited = json.loads(json.dumps(data))
    edited["totals"][0]["cost"]["rho"] = "1/10"
    with pytest.raises(ValueError, match="rendered text"):
        Ledger.from_json(json.dumps(edited))


def test_report_json_has_a_schema_version() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP("1/3"))
    X = b.source("X", dp.Vectors(d=2), n=100)
    res = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))).run(
        {"X": np.zeros((100, 2))}, noise=dp.SeededNoise(0))
    data = json.loads(res.report.to_json())
    assert (data["schema"], data["schema_version"]) == ("dpflow.report", REPORT_SCHEMA_VERSION) == ("dpflow.report", 5)
    assert data["ledger"]["schema_version"] == 6
    assert Ledger.from_json(json.dumps(data["ledger"])) == res.report.ledger
    assert "ledger schema dpflow.ledger version 6" in res.report.to_markdown()


# --------------------------------------------------------------------------- composition trees

def charges(c: Composition) -> list[Charge]:
    if isinstance(c, Charge):
        return [c]
    if isinstance(c, Rounds):
        return charges(c.body)
    if isinstance(c, Tree):
        return charges(c.split) + charges(c.leaf)
    return [x for p in c.parts for x in charges(p)]


TREE_PLANS = {
    "every-kind-replace": lambda: every_kind_plan(),
    "partitions-replace": lambda: partitions("replace"),
    "partitions-add-remove": lambda: partitions("add_remove"),
    "coinpress-gdp": lambda: G.gaussian(d=2, n=4000, budget=dp.ApproxDP(1, 1e-6), R=10.0, K=30.0),
    "coinpress-zcdp": lambda: G.covariance(d=2, n=3000, budget=dp.ZCDP("1/3"), K=30.0),
    "basic": lambda: two_mech(dp.ApproxDP(1, "1/1000000"), "basic"),
    "two-sources": lambda: third_ledger_plan_two_sources(),
}


def partitions(neighbors: str) -> dp.Plan:
    """A value partition (max, or two largest under replace), inside an index split (max) under replace."""
    b = dp.PlanBuilder(budget=dp.PureDP(1), neighbors=neighbors)
    X = b.source("X", dp.Vectors(d=2), n=100 if neighbors == "replace" else None)
    left, right = N.split(X, N.SplitByIndex(pieces=2)) if neighbors == "replace" else (X, X)
    inside, outside = N.split(left, N.PartitionByBall(center=[0.0, 0.0], radius=1.0))
    return b.build(a=N.LaplaceMech()(N.Count()(inside)), b=N.LaplaceMech(weight=2)(N.Count()(outside)),
                   c=N.LaplaceMech(weight=3)(N.Count()(right)), d=N.LaplaceMech()(N.Count()(X)))


def third_ledger_plan_two_sources() -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.PureDP("1/3"))
    X = b.source("X", dp.Vectors(d=2), n=100)
    Y = b.source("Y", dp.Reals(), n=100)
    return b.build(x=N.LaplaceMech()(N.Mean()(N.Clip(box=(-1.0, 1.0))(X))),
                   y=N.LaplaceMech(weight=2)(N.Mean()(N.Clip(box=(-1.0, 1.0))(Y))))


@pytest.mark.parametrize("name", sorted(TREE_PLANS))
def test_every_total_is_its_composition_tree_re_walked(name: str) -> None:
    """Any accountant can re-walk the ledger: composing the tree from its data gives the total."""
    ledger = TREE_PLANS[name]().check()
    assert ledger.totals
    for t in ledger.totals:
        assert t.composition is not None
        walked = recompose(t.composition, ledger.neighbors)
        assert walked == attrs.evolve(t.cost, gdp_mu2=walked.gdp_mu2, pld=walked.pld)
        assert t.cost.gdp_mu2 in (None, walked.gdp_mu2)
        # lattice events where a run may draw the discrete Gaussian (issue 16)
        assert t.cost.pld in (None, walked.pld, None if walked.pld is None else walked.pld.on_lattice())
        assert {c.node for c in charges(t.composition)} <= {e.node for e in ledger.events()}
    back = Ledger.from_json(ledger.to_json())
    assert [t.composition for t in back.totals] == [t.composition for t in ledger.totals]


def test_tree_shapes_are_typed() -> None:
    (total,) = third_ledger().totals
    assert total.composition == Sequential((Charge("gaussian_mech_3", Cost.gaussian_zcdp(Fraction(1, 9))),
                                            Charge("gaussian_mech_6", Cost.gaussian_zcdp(Fraction(2, 9)))))
    total = every_kind_plan().check().totals[0]
    found: list[str] = []

    def walk(c: Composition) -> None:
        found.append(type(c).__name__ + (f":{c.rule}" if isinstance(c, Parallel) else ""))
        if isinstance(c, Rounds):
            assert c.count >= 1 and c.weight > 0
            walk(c.body)
        elif isinstance(c, Tree):
            assert (c.depth, c.parts) == (2, 2)
            walk(c.split)
            walk(c.leaf)
        elif not isinstance(c, Charge):
            for p in c.parts:
                walk(p)

    assert total.composition is not None
    walk(total.composition)
    assert {"Parallel:index", "Parallel:value", "Rounds", "Sequential", "Charge", "Tree"} <= set(found)
    # CoinPress: a Repeat per moment, its rounds grouped by round weight (weights sum to 1 per Repeat)
    rounds: list[Rounds] = []

    def collect(c: Composition) -> None:
        if isinstance(c, Rounds):
            rounds.append(c)
        elif not isinstance(c, (Charge, Tree)):
            for p in c.parts:
                collect(p)

    comp = G.gaussian(d=2, n=4000, budget=dp.ZCDP(1), R=10.0, K=30.0).check().totals[0].composition
    assert comp is not None
    collect(comp)
    assert {r.node for r in rounds} == {"repeat_8", "repeat_17"}
    for node in ("repeat_8", "repeat_17"):
        assert sum(r.count * r.weight for r in rounds if r.node == node) == pytest.approx(1)
        assert all(isinstance(r.body, Charge) and r.body.node.startswith(node + "/") for r in rounds if r.node == node)


def test_report_json_is_strict_json_when_a_release_is_not_finite() -> None:
    """A released NaN or infinity (an infinite-noise release, a post-processing that overflows) is written as the
    string "nan", "inf" or "-inf": report.json stays strict JSON and the value is visible, never a bare NaN."""
    b = dp.PlanBuilder(budget=dp.ZCDP("1/3"))
    X = b.source("X", dp.Vectors(d=2), n=100)
    m = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))
    odd = N.Apply(fn=lambda v: np.array([np.nan, np.inf, -np.inf]), shape=(3,))(m)
    res = b.build(m=m, odd=odd).run({"X": np.zeros((100, 2))}, noise=dp.SeededNoise(0))
    text = res.report.to_json()
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert data["released"]["odd"] == ["nan", "inf", "-inf"]
