"""Named released state (issue 13): ``Pack(names=...)`` names the parts of a released tuple, a loop's
state keeps its names through every round and in its output, and ``Get("name")`` reads a part; an
unknown name is refused before data, naming the node.  CoinPress reads ``Get("centre")`` and
``Get("radius")``, the iterative regressions ``Get("beta")`` and ``Get("residual_bound")``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.errors import PlanTypeError
from dpflow.estimators import gaussian
from dpflow.estimators.gaussian import coinpress
from dpflow.estimators.regression import GD_STATE, noisy_gd
from dpflow.nodes.types import ReleasedT
from dpflow.planner.certify import certify


def _public_state(b: dp.PlanBuilder) -> Any:
    return N.Pack(names=("centre", "radius"))(b.public([1.0, 2.0]), b.public(3.0))


def _mean(b: dp.PlanBuilder) -> Any:
    return N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2), n=10))))


def test_get_reads_a_named_part_as_the_index_does() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    st = _public_state(b)
    plan = b.build(c=N.Get("centre")(st), r=N.Get("radius")(st), r1=N.Get(index=1)(st), m=_mean(b))
    out = plan.run({"X": np.zeros((10, 2))}, noise=dp.SeededNoise(0)).released
    assert np.array_equal(out["c"], [1.0, 2.0]) and out["r"] == 3.0 == out["r1"]
    assert certify(plan).space.types[st.id] == ReleasedT(None, fields=("centre", "radius"))


@pytest.mark.parametrize("name", ["centr", "Centre", "radius_"])
def test_an_unknown_part_name_is_refused_before_data_naming_the_node(name: str) -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    g = N.Get(name)(_public_state(b))
    with pytest.raises(PlanTypeError, match=rf"^{g.id}: Get\('{name}'\) reads a part that its input does not have: "
                                            r"the input has the parts \['centre', 'radius'\]. Fix: name one of"):
        b.build(g=g, m=_mean(b)).check()


def test_a_name_on_an_unnamed_tuple_is_refused_naming_the_fix() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    g = N.Get("centre")(N.Pack()(b.public([1.0]), b.public(2.0)))
    with pytest.raises(PlanTypeError, match=rf"^{g.id}: .*has no named parts. Fix: name the parts with Pack"):
        b.build(g=g, m=_mean(b)).check()


def test_names_are_validated_where_the_node_is_made() -> None:
    for bad in ((), ("a", "a"), ("a b",), ("1x",), (3,)):
        with pytest.raises(ValueError, match="distinct identifiers"):
            N.Pack(names=bad)  # type: ignore[arg-type]
    for kw in ({}, {"name": "a", "index": 0}):
        with pytest.raises(ValueError, match="exactly one"):
            N.Get(**kw)  # type: ignore[arg-type]
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    p = N.Pack(names=("a", "b", "c"))(b.public(1.0), b.public(2.0))
    with pytest.raises(PlanTypeError, match=rf"^{p.id}: Pack has 2 parts but 3 names"):
        b.build(p=p, m=_mean(b)).check()


def _step(rows: Any, state: Any, k: Any) -> Any:
    m = N.GaussianMech()(N.Mean()(N.Clip(radius=N.Get("radius")(state), center=N.Get("centre")(state))(rows)))
    return N.Pack(names=("centre", "radius"))(m, N.Get("radius")(state))


def test_a_loop_keeps_the_names_of_its_state() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=50)
    out = N.repeat(X, _public_state(b), _step, times=3)
    plan = b.build(c=N.Get("centre")(out), r=N.Get("radius")(out))
    assert certify(plan).space.types[out.id] == ReleasedT(None, fields=("centre", "radius"))
    res = plan.run({"X": np.ones((50, 2))}, noise=dp.SeededNoise(1)).released
    assert res["r"] == 3.0 and res["c"].shape == (2,)


def test_a_loop_whose_body_renames_its_state_is_refused() -> None:
    def renamed(rows: Any, state: Any, k: Any) -> Any:
        m = N.GaussianMech()(N.Mean()(N.Clip(radius=N.Get("radius")(state))(rows)))
        return N.Pack(names=("mean", "radius"))(m, N.Get("radius")(state))

    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    out = N.repeat(b.source("X", dp.Vectors(d=2), n=50), _public_state(b), renamed, times=2)
    with pytest.raises(PlanTypeError, match=rf"^{out.id}: the body returns a state with parts \['mean', 'radius'\] "
                                            r"but the initial state has parts \['centre', 'radius'\]"):
        b.build(o=out).check()


def test_coinpress_and_gradient_descent_read_their_state_by_the_papers_names() -> None:
    cert = certify(gaussian.mean(d=3, n=1000, budget=dp.ZCDP(0.5), R=10.0))
    loops = [t for t in cert.space.types.values() if isinstance(t, ReleasedT) and t.fields]
    assert coinpress.MEAN_STATE == ("centre", "radius") and loops[-1].fields == coinpress.MEAN_STATE
    gets = {r.node.name for sp in [cert.space, *cert.space.bodies.values()] for r in sp.order
            if isinstance(r.node, N.Get)}
    assert gets == {"centre", "radius"}
    gd = certify(noisy_gd(d=3, n=1000, budget=dp.ZCDP(0.5), x_bound=1.0, coef_bound=1.0))
    assert any(isinstance(t, ReleasedT) and t.fields == GD_STATE for t in gd.space.types.values())


def test_a_named_plan_round_trips_through_json() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    plan = b.build(r=N.Get("radius")(_public_state(b)), m=_mean(b))
    again = dp.Plan.from_json(plan.to_json())
    assert again == plan and again.hash == plan.hash
    assert '"names":["centre","radius"]' in plan.to_json()
