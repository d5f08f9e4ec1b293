"""The planner: refusals (type, node named, fix given) and exact budget allocation."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from conftest import ZeroNoise

import dpflow as dp
from dpflow import nodes as N
from dpflow.errors import BudgetError
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.planner.certify import certify


def assert_refusal(err: BaseException, *node_ids: str) -> None:
    """The message names (one of) the offending node(s) and says how to fix it."""
    msg = str(err)
    assert any(nid in msg for nid in node_ids), (node_ids, msg)
    assert "Fix:" in msg, msg
    fix = msg.split("Fix:", 1)[1].strip()
    assert len(fix) > 5, msg


def clipped_mean_plan(budget: Any = None, n: int | None = 100, d: int = 2,
                      relation: str = "replace") -> dp.Plan:
    b = dp.PlanBuilder(budget=budget or dp.ZCDP(0.5), neighbors=relation)
    X = b.source("X", dp.Vectors(d=d), n=n)
    return b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))


# =========================================================================== refusals


def test_gaussian_on_unclipped_mean_is_unbounded():
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=3), n=100)
    g = N.GaussianMech()(N.Mean()(X))
    with pytest.raises(dp.UnboundedSensitivityError) as info:
        certify(b.build(m=g))
    assert_refusal(info.value, g.id)
    assert info.value.node == g.id
    assert "Clip" in info.value.fix


def test_laplace_on_unclipped_sum_is_unbounded():
    b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    X = b.source("X", dp.Vectors(d=3), n=100)
    m = N.LaplaceMech()(N.Sum()(X))
    with pytest.raises(dp.UnboundedSensitivityError) as info:
        certify(b.build(m=m))
    assert_refusal(info.value, m.id)


def test_fixed_costs_over_budget():
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=100)
    m = N.Mean()(N.Clip(radius=1.0)(X))
    g1 = N.GaussianMech(rho=0.4)(m)
    g2 = N.GaussianMech(rho=0.4)(m)
    with pytest.raises(dp.BudgetError) as info:
        certify(b.build(a=g1, b=g2))
    assert_refusal(info.value, g1.id, g2.id)
    msg = str(info.value)
    # the per-node breakdown: every fixed-cost node with its cost
    assert f"{g1.id} rho=0.4" in msg and f"{g2.id} rho=0.4" in msg, msg
    assert "0.8" in msg and "0.5" in msg, msg


def test_fixed_costs_exactly_at_budget_are_accepted():
    b = dp.PlanBuilder(budget=dp.ZCDP("0.5"))
    X = b.source("X", dp.Vectors(d=2), n=100)
    m = N.Mean()(N.Clip(radius=1.0)(X))
    ledger = certify(b.build(a=N.GaussianMech(rho="0.25")(m), b=N.GaussianMech(rho="0.25")(m))).ledger
    assert Fraction(ledger.totals[0].rho) == Fraction(1, 2)


def _edited(plan: dp.Plan, edit: Any) -> str:
    data = json.loads(plan.to_json())
    edit(data["nodes"])
    return json.dumps(data)


def _node(nodes: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(n for n in nodes if n["kind"] == kind)


def test_undefined_reference_in_hand_edited_json():
    plan = clipped_mean_plan()

    def edit(nodes: list[dict[str, Any]]) -> None:
        _node(nodes, "Mean")["inputs"] = ["clip_99"]

    text = _edited(plan, edit)
    mean_id = _node(json.loads(text)["nodes"], "Mean")["id"]
    with pytest.raises(dp.PlanReferenceError) as info:
        certify(dp.Plan.from_json(text))
    assert_refusal(info.value, mean_id)
    assert "clip_99" in str(info.value)


def test_undefined_parameter_reference_in_hand_edited_json():
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=100)
    c = b.public([0.0, 0.0])
    plan = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0, center=c)(X))))

    def edit(nodes: list[dict[str, Any]]) -> None:
        _node(nodes, "Clip")["params"]["center"] = {"$ref": "ghost_7"}

    text = _edited(plan, edit)
    clip_id = _node(json.loads(text)["nodes"], "Clip")["id"]
    with pytest.raises(dp.PlanReferenceError) as info:
        certify(dp.Plan.from_json(text))
    assert_refusal(info.value, clip_id)


def test_cycle_in_hand_edited_json():
    plan = clipped_mean_plan()
    nodes = json.loads(plan.to_json())["nodes"]
    clip_id, mean_id = _node(nodes, "Clip")["id"], _node(nodes, "Mean")["id"]

    def edit(nodes: list[dict[str, Any]]) -> None:
        _node(nodes, "Clip")["inputs"] = [mean_id]  # clip <- mean <- clip

    with pytest.raises(dp.PlanReferenceError) as info:
        certify(dp.Plan.from_json(_edited(plan, edit)))
    assert_refusal(info.value, clip_id, mean_id)
    assert info.value.node in (clip_id, mean_id)
    assert "cycle" in str(info.value)


def test_duplicate_id_in_hand_edited_json():
    plan = clipped_mean_plan()
    data = json.loads(plan.to_json())
    clip = _node(data["nodes"], "Clip")
    _node(data["nodes"], "Mean")["id"] = clip["id"]
    with pytest.raises(dp.PlanReferenceError) as info:
        certify(dp.Plan.from_json(json.dumps(data)))
    assert_refusal(info.value, clip["id"])


def test_undefined_reference_inside_a_recurse_body():
    plan = recurse_plan(2, None)[0]
    data = json.loads(plan.to_json())
    rec = _node(data["nodes"], "Repeat")
    body = rec["params"]["body"]["$subplan"]["records"]
    mean = next(r for r in body if r["kind"] == "Mean")
    mean["inputs"] = ["nowhere_1"]
    with pytest.raises(dp.PlanReferenceError) as info:
        certify(dp.Plan.from_json(json.dumps(data)))
    assert_refusal(info.value, mean["id"])


def test_post_processing_of_a_sensitive_node_in_hand_edited_json():
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=100)
    mean = N.Mean()(N.Clip(radius=1.0)(X))
    g = N.GaussianMech()(mean)
    plan = b.build(m=N.PSDProject()(g))

    def edit(nodes: list[dict[str, Any]]) -> None:
        _node(nodes, "PSDProject")["inputs"] = [mean.id]  # skip the mechanism

    text = _edited(plan, edit)
    psd_id = _node(json.loads(text)["nodes"], "PSDProject")["id"]
    with pytest.raises(dp.PostProcessingError) as info:
        certify(dp.Plan.from_json(text))
    assert_refusal(info.value, psd_id)


@pytest.mark.parametrize("post", ["apply", "psd"])
def test_post_processing_of_a_sensitive_handle_is_refused(post):
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=100)
    mean = N.Mean()(N.Clip(radius=1.0)(X))
    node = N.Apply(fn=np.abs) if post == "apply" else N.PSDProject()
    with pytest.raises(dp.PostProcessingError) as info:
        node(mean)
    assert_refusal(info.value, mean.id)


def test_sensitive_handle_as_a_parameter_is_refused():
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=100)
    mean = N.Mean()(N.Clip(radius=1.0)(X))
    with pytest.raises(dp.PostProcessingError) as info:
        N.Clip(radius=1.0, center=mean)
    assert_refusal(info.value, mean.id)


def test_releasing_a_sensitive_handle_is_refused():
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=100)
    mean = N.Mean()(N.Clip(radius=1.0)(X))
    with pytest.raises(dp.PostProcessingError) as info:
        b.build(m=mean)
    assert_refusal(info.value, mean.id)


# --------------------------------------------------------------------------- data vs. schema


def two_source_plan() -> tuple[dp.Plan, str, str]:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=10)
    Y = b.source("Y", dp.Vectors(d=3), n=5)
    mx = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))
    my = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(Y)))
    return b.build(x=mx, y=my), X.id, Y.id


GOOD = {"X": np.zeros((10, 2)), "Y": np.zeros((5, 3))}


def run_spy(plan: dp.Plan, data: dict[str, Any]) -> ZeroNoise:
    noise = ZeroNoise()
    execute(certify(plan), data, noise, NumpyBackend())
    return noise


def test_good_data_runs_and_draws_noise():
    assert run_spy(two_source_plan()[0], GOOD).calls == 2


def test_data_for_an_unknown_source():
    plan = two_source_plan()[0]
    noise = ZeroNoise()
    with pytest.raises(dp.UnknownSourceError) as info:
        execute(certify(plan), {**GOOD, "Z": np.zeros((3, 2))}, noise, NumpyBackend())
    assert_refusal(info.value, "Z")
    assert noise.calls == 0


def test_missing_source_data():
    plan = two_source_plan()[0]
    noise = ZeroNoise()
    with pytest.raises(dp.UnknownSourceError) as info:
        execute(certify(plan), {"X": GOOD["X"]}, noise, NumpyBackend())
    assert_refusal(info.value, "Y")
    assert noise.calls == 0


BAD_DATA = {  # no dtype is a schema error: values convert by the table policy (tests/nodes/test_tables.py)
    "wrong d": {"X": np.zeros((10, 2)), "Y": np.zeros((5, 4))},
    "wrong n": {"X": np.zeros((10, 2)), "Y": np.zeros((6, 3))},
    "transposed": {"X": np.zeros((10, 2)), "Y": np.zeros((3, 5))},
    "1-d for d>1": {"X": np.zeros((10, 2)), "Y": np.zeros(5)},
}


@pytest.mark.parametrize("what", sorted(BAD_DATA))
def test_data_not_matching_the_schema_raises_before_any_value_is_used(what):
    plan, _, y_id = two_source_plan()
    noise = ZeroNoise()
    with pytest.raises(dp.DataError) as info:
        execute(certify(plan), BAD_DATA[what], noise, NumpyBackend())
    assert y_id in str(info.value), str(info.value)
    assert noise.calls == 0  # no mechanism ran: the check happens before any value is used


@pytest.mark.parametrize("what", ["wrong d", "wrong n", "transposed"])
def test_data_error_message_gives_a_fix(what):
    plan = two_source_plan()[0]
    with pytest.raises(dp.DataError) as info:
        execute(certify(plan), BAD_DATA[what], ZeroNoise(), NumpyBackend())
    assert "Fix:" in str(info.value)


# --------------------------------------------------------------------------- domains and types


def test_histogram_needs_one_dimensional_rows():
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=10)
    h = N.Histogram(edges=[0, 1, 2])(N.Clip(radius=1.0)(X))
    with pytest.raises(dp.DomainError) as info:
        certify(b.build(h=N.GaussianMech()(h)))
    assert_refusal(info.value, h.id)


def test_peel_with_s_above_d():
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=3), n=10)
    p = N.Peel(s=4)(N.Mean()(N.Clip(box=(-1, 1))(X)))
    with pytest.raises(dp.DomainError) as info:
        certify(b.build(p=p))
    assert_refusal(info.value, p.id)


def test_peel_with_s_equal_d_is_accepted():
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=3), n=10)
    certify(b.build(p=N.Peel(s=3)(N.Mean()(N.Clip(box=(-1, 1))(X)))))


@pytest.mark.parametrize("budget", [dp.PureDP(1.0), dp.ApproxDP(1.0, 0)], ids=["pure", "approx-delta-0"])
def test_gaussian_under_a_pure_budget(budget):
    b = dp.PlanBuilder(budget=budget)
    X = b.source("X", dp.Vectors(d=2), n=10)
    g = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))
    with pytest.raises(dp.PlanTypeError) as info:
        certify(b.build(g=g))
    assert_refusal(info.value, g.id)


def _released_vector_plan(slot: str) -> tuple[dp.Plan, str]:
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=3), n=10)
    if slot == "radius":  # a released 3-vector used as a scalar radius
        v = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))
        clip = N.Clip(radius=v)
    else:  # a released 2-vector used as the centre of 3-dimensional rows
        clip = N.Clip(radius=1.0, center=b.public([0.0, 0.0]))
    rows = clip(X)
    return b.build(s=N.GaussianMech()(N.Sum()(rows))), rows.id


@pytest.mark.parametrize("slot", ["radius", "center"])
def test_released_clip_parameter_of_the_wrong_shape_is_refused_statically(slot):
    plan, clip_id = _released_vector_plan(slot)
    with pytest.raises(dp.PlanError) as info:
        certify(plan)
    assert_refusal(info.value, clip_id)


def test_public_clip_centre_of_the_wrong_dimension_is_refused():
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=3), n=10)
    rows = N.Clip(radius=1.0, center=[0.0, 0.0])(X)
    with pytest.raises(dp.DomainError) as info:
        certify(b.build(s=N.GaussianMech()(N.Sum()(rows))))
    assert_refusal(info.value, rows.id)


def test_index_split_under_add_remove():
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="add_remove")
    X = b.source("X", dp.Vectors(d=2))
    s = N.SplitByIndex(pieces=2)
    a, _ = N.split(X, s)
    plan = b.build(a=N.GaussianMech()(N.Count()(a)))
    split_id = next(r.id for r in plan.records if r.node.kind == "SplitByIndex")
    with pytest.raises(dp.DomainError) as info:
        certify(plan)
    assert_refusal(info.value, split_id)


def test_pair_differences_under_add_remove():
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="add_remove")
    X = b.source("X", dp.Vectors(d=2))
    p = N.PairDifferences()(N.Clip(radius=1.0)(X))
    with pytest.raises(dp.DomainError) as info:
        certify(b.build(s=N.GaussianMech()(N.Count()(p))))
    assert_refusal(info.value, p.id)


@pytest.mark.parametrize("query", ["mean", "second_moment"])
def test_dividing_by_a_private_count_under_add_remove(query):
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="add_remove")
    X = b.source("X", dp.Vectors(d=2))
    q = (N.Mean() if query == "mean" else N.SecondMoment())(N.Clip(radius=1.0)(X))
    with pytest.raises(dp.DomainError) as info:
        certify(b.build(m=N.GaussianMech()(q)))
    assert_refusal(info.value, q.id)


def test_declaring_n_under_add_remove():
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="add_remove")
    X = b.source("X", dp.Vectors(d=2), n=10)
    with pytest.raises(dp.DomainError) as info:
        certify(b.build(c=N.GaussianMech()(N.Count()(X))))
    assert_refusal(info.value, X.id)


# =========================================================================== allocation


def sequential_plan(weights: list[float], budget: Any) -> tuple[dp.Plan, list[str]]:
    b = dp.PlanBuilder(budget=budget)
    X = b.source("X", dp.Vectors(d=2), n=50)
    C = N.Clip(radius=1.0)(X)
    mechs = [N.GaussianMech(weight=w)(N.Mean()(C)) for w in weights]
    return b.build(**{f"m{i}": m for i, m in enumerate(mechs)}), [m.id for m in mechs]


@pytest.mark.parametrize("weights", [[1.0], [1.0, 1.0], [1.0, 2.5, 0.3], [0.1, 0.7, 3.3, 1e-3, 9.0]])
@pytest.mark.parametrize("budget", ["0.5", "0.7", "1/3"])
def test_shares_are_exact_and_sum_to_the_budget(weights, budget):
    plan, ids = sequential_plan(weights, dp.ZCDP(budget))
    cert = certify(plan)
    shares = [cert.allocations[i].share for i in ids]
    assert all(type(s) is Fraction for s in shares)
    assert sum(shares, Fraction(0)) == Fraction(budget)
    assert Fraction(cert.ledger.totals[0].rho) == Fraction(budget)
    # proportional to the weights, exactly
    for s, w in zip(shares, weights, strict=True):
        assert s / shares[0] == Fraction(w) / Fraction(weights[0])


def test_weights_one_to_three():
    plan, (a, c) = sequential_plan([1, 3], dp.ZCDP(1))
    cert = certify(plan)
    assert cert.allocations[a].share == Fraction(1, 4)
    assert cert.allocations[c].share == Fraction(3, 4)


def test_fixed_cost_is_taken_first_and_weights_share_the_rest():
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=2), n=50)
    m = N.Mean()(N.Clip(radius=1.0)(X))
    f, w1, w2 = N.GaussianMech(rho="0.4")(m), N.GaussianMech(weight=1)(m), N.GaussianMech(weight=2)(m)
    cert = certify(b.build(f=f, a=w1, b=w2))
    assert cert.allocations[f.id].share == Fraction(2, 5)
    assert cert.allocations[w1.id].share == Fraction(1, 5)
    assert cert.allocations[w2.id].share == Fraction(2, 5)
    assert Fraction(cert.ledger.totals[0].rho) == 1


def test_parallel_index_pieces_each_get_the_full_budget():
    b = dp.PlanBuilder(budget=dp.ZCDP("0.6"))
    X = b.source("X", dp.Vectors(d=2), n=90)
    pieces = N.split(X, N.SplitByIndex(pieces=3))
    mechs = [N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(p))) for p in pieces]
    cert = certify(b.build(**{f"m{i}": m for i, m in enumerate(mechs)}))
    for m in mechs:
        assert cert.allocations[m.id].share == Fraction(3, 5)
    assert Fraction(cert.ledger.totals[0].rho) == Fraction(3, 5)
    assert any("max over index blocks" in e.rule for e in cert.ledger.entries)


def test_two_mechanisms_in_one_index_piece_share_that_piece():
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=2), n=90)
    p0, p1 = N.split(X, N.SplitByIndex(pieces=2))
    m0 = N.Mean()(N.Clip(radius=1.0)(p0))
    a, c = N.GaussianMech()(m0), N.GaussianMech()(m0)
    other = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(p1)))
    cert = certify(b.build(a=a, c=c, o=other))
    # piece 0 has weight 2, piece 1 weight 1: max = 2, so one unit of weight is half the budget
    assert cert.allocations[a.id].share == Fraction(1, 2)
    assert cert.allocations[c.id].share == Fraction(1, 2)
    assert cert.allocations[other.id].share == Fraction(1, 2)
    assert Fraction(cert.ledger.totals[0].rho) == 1


@pytest.mark.parametrize(("relation", "share"), [("replace", Fraction(4, 5)), ("add_remove", Fraction(1))])
def test_value_partition_shares(relation, share):
    """Replace-one: the Gaussian sum is charged (1/2)^2 of its rho when a record enters or leaves its piece (norm 1
    against the diameter 2), the count in full, so the weights fold to max(1, 1, 1/4 + 1) = 5/4 and each share is
    4/5 (the two largest pieces in full would give 1/2 each)."""
    b = dp.PlanBuilder(budget=dp.ZCDP(1), neighbors=relation)
    X = b.source("X", dp.Vectors(d=2))
    inside, outside = N.split(X, N.PartitionByBall(center=[0.0, 0.0], radius=1.0))
    a = N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(inside)))
    c = N.GaussianMech()(N.Count()(outside))
    cert = certify(b.build(a=a, c=c))
    assert cert.allocations[a.id].share == share
    assert cert.allocations[c.id].share == share
    assert Fraction(cert.ledger.totals[0].rho) == 1
    rules = " ".join(e.rule for e in cert.ledger.entries)
    assert ("two pieces one-sided" in rules) == (relation == "replace")


def recurse_plan(times: int, round_weights: list[float] | None, budget: str = "1",
                 outer_weight: float | None = None) -> tuple[dp.Plan, str]:
    b = dp.PlanBuilder(budget=dp.ZCDP(budget))
    X = b.source("X", dp.Vectors(d=2), n=100)

    def step(rows: Any, state: Any, k: Any) -> Any:
        return N.GaussianMech()(N.Mean()(N.Clip(radius=1.0, center=state)(rows)))

    last = N.repeat(X, b.public([0.0, 0.0]), step, times=times, round_weights=round_weights)
    outs = {"last": last}
    if outer_weight is not None:
        outs["sum"] = N.GaussianMech(weight=outer_weight)(N.Sum()(N.Clip(radius=1.0)(X)))
    plan = b.build(**outs)
    return plan, last.id


def body_mech_key(cert: Any, rec_id: str) -> str:
    keys = [k for k in cert.allocations if k.startswith(rec_id + "/")]
    assert len(keys) == 1, keys
    return keys[0]


@pytest.mark.parametrize(
    ("times", "round_weights", "outer"),
    [(1, None, None), (3, None, None), (4, [1, 2, 3, 4], None), (3, [0.5, 1.5, 1.0], 2.0), (5, None, 1.0)],
)
def test_recurse_charges_every_round(times, round_weights, outer):
    plan, rec_id = recurse_plan(times, round_weights, "0.9", outer)
    cert = certify(plan)
    assert Fraction(cert.ledger.totals[0].rho) == Fraction(9, 10)
    key = body_mech_key(cert, rec_id)
    unit = cert.allocations[key].share
    rw = [Fraction(w) for w in (round_weights or [1] * times)]
    total_weight = sum(rw, Fraction(0)) + (Fraction(outer) if outer is not None else 0)
    assert unit == Fraction(9, 10) / total_weight
    # observe the per-round noise: rho_k = Delta^2 / (2 sigma_k^2) = unit * w_k (sigma rounded up)
    ex = execute(cert, {"X": np.zeros((100, 2))}, ZeroNoise(), NumpyBackend())
    sigmas = [f["sigma"] for f in ex.facts[key]]
    assert len(sigmas) == times
    delta = 2 * 1.0 / 100
    for s, w in zip(sigmas, rw, strict=True):
        rho_k = delta**2 / (2 * s**2)
        assert rho_k <= float(unit * w) * (1 + 1e-12)
        assert rho_k == pytest.approx(float(unit * w), rel=1e-9)


def test_nested_recurse_charges_every_inner_round():
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=2), n=100)

    def inner(rows: Any, state: Any, k: Any) -> Any:
        return N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(rows)))

    def outer(rows: Any, state: Any, k: Any) -> Any:
        return N.repeat(rows, state, inner, times=3, round_weights=[1, 2, 3])

    cert = certify(b.build(o=N.repeat(X, b.public([0.0, 0.0]), outer, times=2, round_weights=[1, 4])))
    (key,) = cert.allocations
    assert cert.allocations[key].share == Fraction(1, 30)  # (1 + 4) * (1 + 2 + 3) units of weight
    assert Fraction(cert.ledger.totals[0].rho) == 1
    ex = execute(cert, {"X": np.zeros((100, 2))}, ZeroNoise(), NumpyBackend())
    sigmas = [f["sigma"] for f in ex.facts[key]]
    assert len(sigmas) == 6
    rhos = [(2 / 100) ** 2 / (2 * s * s) for s in sigmas]
    assert sum(rhos) == pytest.approx(1.0, rel=1e-9) and sum(rhos) <= 1.0
    expected = [Fraction(o * i, 30) for o in (1, 4) for i in (1, 2, 3)]
    for r, e in zip(rhos, expected, strict=True):
        assert r == pytest.approx(float(e), rel=1e-9)


def test_fixed_cost_in_a_recurse_body_is_charged_every_round():
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=100)

    def body(rows: Any, state: Any, k: Any) -> Any:
        return N.GaussianMech(rho="0.2")(N.Mean()(N.Clip(radius=1.0)(rows)))

    last = N.repeat(X, b.public([0.0, 0.0]), body, times=3)
    with pytest.raises(dp.BudgetError) as info:
        certify(b.build(o=last))
    assert_refusal(info.value, f"{last.id}/")
    assert "0.6" in str(info.value)


def test_recurse_rounds_cost_more_than_one_round():
    one = certify(recurse_plan(1, None, "1", 1.0)[0])
    four = certify(recurse_plan(4, None, "1", 1.0)[0])
    # the outer mechanism's share shrinks: all four rounds are charged against the same budget
    outer_one = next(k for k in one.allocations if "/" not in k)
    outer_four = next(k for k in four.allocations if "/" not in k)
    assert one.allocations[outer_one].share == Fraction(1, 2)
    assert four.allocations[outer_four].share == Fraction(1, 5)


def gaussian_only(budget: Any) -> dp.Plan:
    b = dp.PlanBuilder(budget=budget)
    X = b.source("X", dp.Vectors(d=2), n=100)
    C = N.Clip(radius=1.0)(X)
    return b.build(a=N.GaussianMech()(N.Mean()(C)), c=N.GaussianMech(weight=2)(N.Sum()(C)))


def test_approx_dp_all_gaussian_uses_exact_gaussian_dp():
    ledger = certify(gaussian_only(dp.ApproxDP(1.0, 1e-6))).ledger
    best = ledger.totals[0].tightest()
    assert best.rule == "exact Gaussian-DP"
    assert 0.99 <= best.epsilon <= 1.0
    assert best.delta == pytest.approx(1e-6)
    assert sum(c.tightest for c in ledger.totals[0].conversions) == 1
    assert all(c.epsilon >= best.epsilon for c in ledger.totals[0].conversions)


def test_approx_dp_mixed_laplace_gaussian_uses_the_pld():
    """Issue 16: a mixed plan under ApproxDP is allocated through the PLD (it was zCDP + CKS)."""
    b = dp.PlanBuilder(budget=dp.ApproxDP(1.0, 1e-6))
    X = b.source("X", dp.Vectors(d=2), n=100)
    C = N.Clip(radius=1.0)(X)
    ledger = certify(b.build(a=N.GaussianMech()(N.Mean()(C)), c=N.LaplaceMech()(N.Sum()(C)))).ledger
    assert ledger.allocation.startswith("PLD mode")
    total = ledger.totals[0]
    assert total.gdp_mu is None  # not all Gaussian: no exact GDP accounting
    best = total.tightest()
    assert best.rule == dp.privacy.PLD_RULE
    assert 0.9999 < best.epsilon <= 1.0  # the budget is used, not wasted
    cks = next(c for c in total.conversions if "CKS" in c.rule)
    assert cks.epsilon > 1.0  # more than CKS could certify


def test_pure_budget_laplace_and_peel_sum_to_epsilon_exactly():
    b = dp.PlanBuilder(budget=dp.PureDP("0.9"))
    X = b.source("X", dp.Vectors(d=4), n=100)
    peel = N.Peel(s=2)(N.Mean()(N.Clip(box=(-1, 1))(X)))
    lap = N.LaplaceMech(weight=3)(N.Sum()(N.Clip(radius=1.0)(X)))
    cert = certify(b.build(p=peel, s=lap))
    assert Fraction(cert.ledger.totals[0].pure_eps) == Fraction(9, 10)
    assert cert.allocations[peel.id].share == Fraction(9, 40)
    assert cert.allocations[lap.id].share == Fraction(27, 40)
    total = cert.ledger.totals[0]
    pure = next(c for c in total.conversions if c.delta == 0.0)
    assert pure.epsilon == pytest.approx(0.9)
    # at the report delta the PLD of the exact composition (rounded once, issue 16) is a little tighter
    assert total.tightest().epsilon <= pure.epsilon


def test_ledger_entries_carry_derivations_and_noise():
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=3), n=10)
    C = N.Clip(radius=4.0)(X)
    mean = N.Mean()(C)
    hist = N.Histogram(edges=[0, 1, 2, 3])(b.source("Y", dp.Ordinal(N=3), n=10))
    g = N.GaussianMech()(mean)
    lap = N.LaplaceMech()(hist)
    ledger = certify(b.build(m=g, h=lap)).ledger
    by_node = {e.node: e for e in ledger.entries}
    for q in (mean.id, hist.id):
        assert by_node[q].derivation.strip(), q
        assert by_node[q].sensitivity.strip(), q
    assert "2*4/10" in by_node[mean.id].derivation or "0.8" in by_node[mean.id].derivation
    assert by_node[g.id].noise.startswith("Gaussian")
    assert "sigma" in by_node[g.id].noise
    assert by_node[lap.id].noise.startswith("Laplace")
    for m in (g.id, lap.id):
        e = by_node[m]
        assert e.cost and e.rule and e.reference and e.sensitivity, e
    assert all(not e.noise for e in ledger.entries if e.kind not in ("GaussianMech", "LaplaceMech", "Peel"))


def test_certify_reads_no_data():
    """Certification needs only the plan: the same plan certifies identically before and after a run."""
    plan = clipped_mean_plan()
    before = certify(plan).ledger.to_json()
    plan.run({"X": np.full((100, 2), math.pi)}, noise=dp.SeededNoise(0))
    assert certify(plan).ledger.to_json() == before


def test_mechanism_deltas_that_use_the_whole_budget_delta_still_get_a_ledger() -> None:
    from dpflow.nodes.stability import BinCounts, StabilityHistogram

    b = dp.PlanBuilder(budget=dp.ApproxZCDP(0.5, 1e-6))
    h = StabilityHistogram(delta=1e-6)(BinCounts(width=1.0)(b.source("X", dp.Reals(), n=100)))
    ledger = b.build(h=h).check()
    (total,) = ledger.totals
    assert total.delta0 == Fraction(1e-6)
    assert all(c.delta > 1e-6 for c in total.conversions if c.rule.startswith("zCDP"))


def test_fixed_costs_that_use_the_whole_budget_name_the_starved_weighted_mechanism() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    C = N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2), n=100))
    plan = b.build(a=N.GaussianMech(rho=0.5)(N.Sum()(C)), c=N.GaussianMech()(N.Sum()(C)))
    with pytest.raises(BudgetError, match=r"^gaussian_mech_5: the fixed-cost mechanisms on source X use the whole "
                                          r"budget.*Fix: lower the fixed costs"):
        plan.check()
    # a fixed cost just below the budget leaves a positive share: accepted
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    C = N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2), n=100))
    b.build(a=N.GaussianMech(rho="0.4999")(N.Sum()(C)), c=N.GaussianMech()(N.Sum()(C))).check()
