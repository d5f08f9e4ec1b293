"""Canonical plan JSON: round trips for every node kind, a stable content hash, refused lambdas,
and ledgers / reports that round-trip and hold no data."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.errors import SerializationError
from dpflow.plan.serialize import decode
from dpflow.planner.certify import certify
from dpflow.planner.ledger import Ledger


def _body(rows: Any, state: Any, k: Any) -> Any:
    centre = N.Get(index=0)(state)
    step = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0, center=centre)(rows)))
    return N.Pack()(step, N.Apply(fn=np.add, shape=())(k, k))


def _tree_body(rows: Any, state: Any, depth: Any) -> Any:
    inside, outside = N.split(rows, N.PartitionByBall(center=state, radius=rows.builder.public(1.0)))
    cnt = N.LaplaceMech()(N.Count()(rows))
    leaf = N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(rows)))
    return N.TreeStep(split=cnt, parts=[inside, outside], states=[state, state], leaf=leaf, size=cnt)


def every_kind_plan(radius: float = 2.0, budget: Any = None) -> dp.Plan:
    """One plan that uses every node kind of dpflow.nodes.NODE_KINDS."""
    b = dp.PlanBuilder(budget=budget or dp.ApproxZCDP(1, "1/1000000"), name="every-kind")  # delta: StabilityHistogram
    X = b.source("X", dp.Vectors(d=3), n=40)
    Y = b.source("Y", dp.Ordinal(N=5), n=40)
    A = b.public(np.eye(3))
    P = N.Precondition(matrix=A, center=b.public([0.0, 0.0, 0.0]))(X)
    C = N.Clip(radius=radius)(P)
    left, right = N.split(C, N.SplitByIndex(pieces=2))
    inside, outside = N.split(X, N.PartitionByBall(center=[0.0, 0.0, 0.0], radius=1.0))
    s = N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(inside)))
    cnt = N.GaussianMech(rho="1/20")(N.Count()(outside))
    m = N.GaussianMech(weight=2)(N.Mean()(left))
    sm = N.GaussianMech()(N.SecondMoment()(N.PairDifferences()(right)))
    h = N.LaplaceMech()(N.Histogram(edges=[0, 1, 2, 3, 4, 5])(Y))
    pk = N.Peel(s=1)(N.Mean()(N.Clip(box=(-1, 1))(right)))
    hx = N.GaussianMech()(N.Histogram(edges=[-1.0, 0.0, 1.0])(N.Columns(keep=[2])(C)))
    psd = N.PSDProject(floor=0.01)(sm)
    w = N.Get(index=0)(N.Eigh()(psd))
    ab = N.Apply(fn=np.abs)(m)
    packed = N.Pack()(ab, w, N.param(b, "gamma", 2.5, "a named public parameter"))
    init = N.Pack()(b.public([0.0, 0.0, 0.0]), b.public(0.0))
    rec = N.repeat(X, init, _body, times=2, round_weights=[1, 2])
    tree = N.partition_tree(X, b.public([0.0, 0.0, 0.0]), _tree_body, max_depth=2, max_parts=3)
    N.predicted_error(b, "s", "l2", 0.5, 0.9, "a public statement", "the only route")
    return b.build(s=s, c=cnt, h=h, hx=hx, p=pk, packed=packed, rec=rec, tree=tree, **_quantile_regression_kinds(b, X),
                   **_discrete_kinds(b, X, Y), **_mixture_kinds(X), **_tuple_kinds(X), unit_b=N.noise_scale(pk))


def _mixture_kinds(X: Any) -> dict[str, Any]:
    """The node kinds of dpflow/nodes/sparse_vector.py, pca.py and terrific.py."""
    b = X.builder
    ball = N.terrific_ball(X, t=5, radii=(0.5, 1.0, 2.0), center=[0.0, 0.0, 0.0], radius=5.0, tries=3)
    V = N.private_pca(X, k=2, radius=2.0)
    origin = b.public([0.0, 0.0, 0.0])
    j = N.AboveThreshold(threshold=20.0)(N.BallCounts(center=origin, radii=(1.0, 2.0))(X))
    gated = N.GateBall(limit=1)(ball, ball)
    inside, _ = N.split(X, N.PartitionByProjectedBall(center=N.Get(index=0)(gated), radius=N.Get(index=1)(gated),
                                                       basis=V, origin=origin))
    G = N.GaussianMech()(N.Gram(center=origin)(N.Clip(radius=1.0, center=origin)(inside)))
    return {"ball": ball, "V": V, "j": j, "G": G}


def _tuple_kinds(X: Any) -> dict[str, Any]:
    """The node kinds of dpflow/nodes/tuples.py (and GaussianStabilityHistogram): sample-and-aggregate."""
    b = X.builder
    origin = b.public([0.0, 0.0, 0.0])
    V = b.public([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    G = N.SubsampleAggregate(size=4, statistic="kmeans", k=3)(N.Clip(radius=2.0)(X))
    h = N.GaussianStabilityHistogram(delta="1/10000000")(N.TupleCellCounts(k=3)(N.TupleProject(k=3, basis=V,
                                                                                               center=origin)(G)))
    C = N.TupleCenters(k=3, w=2)(h, V, origin)
    near = N.split(X, N.PartitionByNearest(k=3, centers=C))
    Y = N.TupleNearest(k=3, centers=C, index=0)(G)
    return {"tuple_h": h, "near": N.GaussianMech()(N.Count()(near[0])),
            "matched": N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(Y)))}


def _quantile_regression_kinds(b: dp.PlanBuilder, Z: Any) -> dict[str, Any]:
    """The node kinds of dpflow/nodes/quantile.py, regression.py and truncation.py."""
    mags = N.Magnitudes(of="rows")(Z)
    edges = [0.0, 1.0, 2.0, 4.0]
    hi = N.ModeBinUpper(edges=edges)(N.LaplaceMech()(N.Histogram(edges=edges)(mags)))
    A = N.ScaleShift(scale=2.0, shift=1.0)(N.Quantile(q=0.5)(N.OrderStatistics(upper=hi)(mags)))
    g = N.GradientStep(beta=b.public([0.0, 0.0]), eta=0.5, x_bound=1.0, residual_bound=A, radius=1.0)(Z)
    coef = N.ProjectCoef(radius=1.0, sparsity=1)(N.GaussianMech()(g))
    tm = N.GaussianMech()(N.TruncatedMean(bound=A)(Z))
    ridge = N.RidgeSolve(ridge=0.1, scale=A)(N.GaussianMech()(N.SecondMoment()(N.Clip(radius=A)(Z))))
    return {"coef": coef, "tm": tm, "ridge": ridge}


def _discrete_kinds(b: dp.PlanBuilder, X: Any, Y: Any) -> dict[str, Any]:
    """The node kinds of dpflow/nodes/ordinal.py, stability.py, dyadic.py, product.py and blocks.py."""
    J = N.DyadicExpMech()(N.DyadicCounts(N=5)(Y))
    cdf = N.AddKnots(N=5)(J, N.LaplaceMech()(N.IntervalCounts(interval=J)(Y)))
    J2 = N.DyadicExpMech(cdf=cdf)(N.DyadicCounts(N=5)(Y))
    cdf2 = N.AddKnots(N=5)(cdf, J2, N.LaplaceMech()(N.IntervalCounts(interval=J2)(Y)))
    oc = N.LaplaceMech()(N.OrdinalCounts(edges=[0, 2, 5])(Y))
    sh = N.StabilityHistogram(delta="1/10000000")(N.BinCounts(width=1.0)(Y))
    tb = N.GaussianMech()(N.TruncatedBinaryMean(tau=2, mask=b.public([1, 0, 1]))(N.Clip(box=(0, 1))(X)))
    sa = N.GaussianMech()(N.Mean()(N.SubsampleAggregate(size=4, statistic="top_projection", k=1)(X)))
    return {"cdf": cdf2, "oc": oc, "sh": sh, "tb": tb, "sa": sa}


def kinds(records: tuple[N.NodeRecord, ...]) -> set[str]:
    out: set[str] = set()
    for r in records:
        out.add(r.node.kind)
        if isinstance(r.node, (N.Repeat, N.PartitionTree)):
            out |= kinds(r.node.body.records)
    return out


def test_every_kind_plan_uses_every_node_kind_and_certifies():
    plan = every_kind_plan()
    assert kinds(plan.records) == set(N.NODE_KINDS)
    certify(plan)


def test_round_trip_every_node_kind():
    plan = every_kind_plan()
    text = plan.to_json()
    back = dp.Plan.from_json(text)
    assert back.to_json() == text
    assert back.hash == plan.hash
    assert kinds(back.records) == set(N.NODE_KINDS)
    # the read-back plan means the same thing: same ledger, and it runs
    assert certify(back).ledger.to_json() == certify(plan).ledger.to_json()
    # Apply's function is restored as the same importable function
    applies = [r.node for r in back.records if r.node.kind == "Apply"]
    assert applies and all(a.fn is np.abs for a in applies)


def test_round_tripped_plan_runs_like_the_original():
    plan = every_kind_plan()
    back = dp.Plan.from_json(plan.to_json())
    rng = np.random.default_rng(0)
    data = {"X": rng.normal(size=(40, 3)), "Y": rng.integers(0, 5, size=40)}
    r1 = plan.run(data, noise=dp.SeededNoise(3)).released
    r2 = back.run(data, noise=dp.SeededNoise(3)).released
    assert sorted(r1) == sorted(r2)
    for k in r1:
        np.testing.assert_equal(r1[k], r2[k])


@pytest.mark.parametrize(
    "budget",
    [dp.ZCDP("0.5"), dp.PureDP(1), dp.ApproxDP("1", "1e-6"), dp.ApproxZCDP("0.5", "1e-7"), dp.ZCDP(0.1)],
    ids=["zcdp", "pure", "approx-dp", "approx-zcdp", "zcdp-binary"],
)
@pytest.mark.parametrize("relation", ["replace", "add_remove"])
def test_round_trip_budgets_and_relations(budget, relation):
    b = dp.PlanBuilder(budget=budget, neighbors=relation, report_delta=1e-8, name="small")
    X = b.source("X", dp.Vectors(d=2, box=(-1.0, 1.0)))
    plan = b.build(c=N.LaplaceMech()(N.Count()(X)), s=N.LaplaceMech(weight=2)(N.Sum()(X)))
    back = dp.Plan.from_json(plan.to_json())
    assert back.to_json() == plan.to_json()
    assert back.hash == plan.hash
    assert back.budget == plan.budget
    assert back.neighbors == relation
    assert back.report_delta == 1e-8


@pytest.mark.parametrize(
    "domain",
    [dp.Vectors(d=2), dp.Vectors(d=2, box=(0.0, 1.0)), dp.Vectors(d=2, l2_bound=dp.Sym.const(3.0)),
     dp.Reals(lower=-1.0, upper=4.0), dp.BooleanCube(d=2), dp.Ordinal(N=7)],
    ids=lambda dom: dom.describe(),
)
def test_round_trip_source_domains(domain):
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", domain, n=10)
    plan = b.build(c=N.GaussianMech()(N.Count()(X)))
    back = dp.Plan.from_json(plan.to_json())
    assert back.records[0].node.domain == domain
    assert back.hash == plan.hash


def test_hash_is_stable_and_content_based():
    a, b = every_kind_plan(), every_kind_plan()
    assert a is not b
    assert a.hash == b.hash
    assert a.hash.startswith("sha256:") and len(a.hash) == len("sha256:") + 64
    assert every_kind_plan(radius=2.5).hash != a.hash
    assert every_kind_plan(budget=dp.ZCDP("0.9")).hash != a.hash


def test_hash_changes_with_any_parameter():
    def plan(radius: float = 1.0, weight: float = 1.0, relation: str = "replace", n: int = 50) -> dp.Plan:
        b = dp.PlanBuilder(budget=dp.ZCDP(1), neighbors=relation)
        X = b.source("X", dp.Vectors(d=2), n=n if relation == "replace" else None)
        return b.build(s=N.GaussianMech(weight=weight)(N.Sum()(N.Clip(radius=radius)(X))))

    base = plan().hash
    assert plan().hash == base
    variants = {plan(radius=1.5).hash, plan(weight=2.0).hash, plan(relation="add_remove").hash,
                plan(n=51).hash}
    assert base not in variants and len(variants) == 4


def test_lambda_in_apply_is_refused_when_read_back():
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=2), n=10)
    out = N.Apply(fn=lambda v: 2 * v)(N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(X))))
    plan = b.build(o=out)
    certify(plan)  # fine in memory
    text = plan.to_json()
    with pytest.raises(dp.SerializationError):
        dp.Plan.from_json(text)


def test_local_function_in_apply_is_refused_when_read_back():
    def double(v: Any) -> Any:
        return 2 * v

    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=2), n=10)
    plan = b.build(o=N.Apply(fn=double)(N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(X)))))
    with pytest.raises(dp.SerializationError):
        dp.Plan.from_json(plan.to_json())


def test_unknown_node_kind_and_schema_are_refused():
    data = json.loads(every_kind_plan().to_json())
    data["nodes"][0]["kind"] = "Teleport"
    with pytest.raises(dp.SerializationError):
        dp.Plan.from_json(json.dumps(data))
    data = json.loads(every_kind_plan().to_json())
    data["schema"] = "dpflow.plan/999"
    with pytest.raises(dp.SerializationError):
        dp.Plan.from_json(json.dumps(data))


# --------------------------------------------------------------------------- ledger and report

SECRET = 123456.789


def test_ledger_round_trip():
    ledger = certify(every_kind_plan()).ledger
    text = ledger.to_json()
    back = Ledger.from_json(text)
    assert back == ledger
    assert back.to_json() == text
    assert back.plan_hash == every_kind_plan().hash
    assert back.totals[0].tightest() == ledger.totals[0].tightest()


def secret_run() -> tuple[dp.Result, np.ndarray]:
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=2), n=50)
    Y = b.source("Y", dp.Reals(), n=50)
    C = N.Clip(radius=1.0)(X)
    plan = b.build(
        mean=N.GaussianMech()(N.Mean()(C)),
        cov=N.GaussianMech()(N.SecondMoment()(C)),
        hist=N.GaussianMech()(N.Histogram(edges=[0.0, 1.0, 2.0])(Y)),
    )
    data = np.zeros((50, 2))
    data[7] = [SECRET, -SECRET]
    data[8] = [SECRET, 1.0]
    ys = np.full(50, SECRET)
    return plan.run({"X": data, "Y": ys}, noise=dp.SeededNoise(1)), data


def test_ledger_and_run_settings_contain_no_data():
    res, _ = secret_run()
    report = res.report.to_data()
    for needle in ("123456.789", "123456", "1.23456789e+05", "-123456"):
        assert needle not in json.dumps(report["ledger"]), needle
        assert needle not in json.dumps(report["run"]), needle
        stripped = {k: v for k, v in report.items() if k != "released"}
        assert needle not in json.dumps(stripped), needle
    ledger_back = Ledger.from_json(res.report.ledger.to_json())
    assert ledger_back == res.report.ledger


def test_report_json_round_trips_through_text():
    res, _ = secret_run()
    text = res.report.to_json()
    data = json.loads(text)
    assert data["ledger"] == json.loads(res.report.ledger.to_json())
    assert set(data["released"]) == {"mean", "cov", "hist"}
    assert data["run"]["seeded"] is True


def _peel_plan_json() -> str:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=5, l2_bound=dp.Sym.const(1.0)), n=100)
    return b.build(top=N.Peel(s=2)(N.Mean()(X))).to_json()


@pytest.mark.parametrize("coef", ["-1.0", "-0.5", "NaN", "Infinity", "1e400", "true", "\"1\""])
def test_json_bounds_are_validated_when_decoded(coef: str) -> None:
    text = _peel_plan_json()
    assert '{"$sym":[1.0,[]]}' in text
    assert dp.Plan.from_json(text).hash == dp.Plan.from_json(text).hash
    with pytest.raises(SerializationError):
        dp.Plan.from_json(text.replace('{"$sym":[1.0,[]]}', '{"$sym":[' + coef + ',[]]}'))


@pytest.mark.parametrize("factor", [["radius", 0.5], ["radius", True], [3, 1], ["radius", "1"]])
def test_json_bound_factors_are_not_coerced(factor: list[Any]) -> None:
    # before: int(0.5) == 0 silently dropped the released factor from the bound
    with pytest.raises((ValueError, SerializationError)):
        decode(json.loads(json.dumps({"$sym": [2.0, [factor]]})))
    assert decode({"$sym": [2.0, [[{"$released": "radius"}, 1]]]}) == dp.Sym(2.0, ((dp.ReleasedScalar("radius"), 1),))


def test_an_old_plan_naming_recurse_loads_and_certifies_to_the_same_ledger() -> None:
    """Issue 31: ``Recurse`` is now ``Repeat``.  Plans written before the rename (``data/recurse_plans_v2.json``:
    a hand-written loop with round weights and CoinPress covariance, with the ledgers dpflow certified for them at
    568d9a4) still load, and certify to the same ledger: every entry, cost event, composed total and composition
    tree, only the kind's name, the plan hash (of the re-encoded plan) and the ledger schema version differ."""
    from pathlib import Path

    docs = json.loads((Path(__file__).parent / "data" / "recurse_plans_v2.json").read_text())
    for doc in docs:
        assert '"kind": "Recurse"' in json.dumps(doc["plan"])
        plan = dp.Plan.from_json(json.dumps(doc["plan"]))
        assert any(isinstance(r.node, N.Repeat) for r in plan.records)
        new = json.loads(certify(plan).ledger.to_json())
        for p in new.get("predictions", []):  # a field added after 568d9a4 (issue 29), empty for these plans
            assert p.pop("given") == ""
        old = json.loads(json.dumps(doc["ledger"]).replace('"Recurse"', '"Repeat"').replace("Recurse:", "Repeat:"))
        assert (old.pop("schema_version"), new.pop("schema_version")) == (5, 6)
        assert old.pop("plan_hash") != new.pop("plan_hash")
        assert new == old
