"""Mutation-testing pins of ``dpflow/nodes/control.py`` (2026-11-29): ``Repeat``'s static bound and round weights
(the planner charges every one of ``times`` rounds, round k ``round_weights[k]`` times its share: a weight must be
finite and positive) and the refusals of ``repeat``."""

from __future__ import annotations

from typing import Any

import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.errors import PlanTypeError
from dpflow.nodes.control import Repeat


def _body(b: dp.PlanBuilder) -> Any:
    X = b.source("X", dp.Vectors(d=1), n=10)
    return X, b.public([0.0])


def test_times_and_weights() -> None:
    rec = Repeat(times=1, body=None, round_weights=[2.5])  # type: ignore[arg-type]
    assert rec.weight_of_round(0) == 2.5 and Repeat(times=2, body=None).weight_of_round(1) == 1.0  # type: ignore[arg-type]
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError) as e:
            Repeat(times=1, body=None, round_weights=[bad])  # type: ignore[arg-type]
        assert str(e.value) == "round weights must be finite and positive"
    with pytest.raises(ValueError) as e:
        Repeat(times=0, body=None)  # type: ignore[arg-type]
    assert str(e.value) == "Repeat needs times >= 1, got 0"
    with pytest.raises(ValueError) as e:
        Repeat(times=2, body=None, round_weights=[1.0])  # type: ignore[arg-type]
    assert str(e.value) == "round_weights has 1 entries for 2 rounds"


def test_repeat_types_itself() -> None:
    """Repeat's typing lives in its module (issue 31): it refuses inputs that are not rows and a released state."""
    class Ctx:
        node_id = "r"

    rec = Repeat(times=1, body=None)  # type: ignore[arg-type]
    with pytest.raises(PlanTypeError) as e:
        rec.infer([], Ctx())  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem, e.value.fix) == (
        "r", "Repeat takes sensitive rows and a released initial state",
        "call dpflow.nodes.repeat(rows, init, body, times)")


def test_recurse_refusals() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    X, init = _body(b)
    with pytest.raises(PlanTypeError) as e:
        N.repeat(X, init, lambda rows, state, k: rows, times=2)  # type: ignore[arg-type,return-value]
    assert (e.value.node, e.value.problem, e.value.fix) == (
        "repeat", "the body must return a released value (the next state)",
        "return the output of a mechanism or of post-processing")
    with pytest.raises(PlanTypeError) as e:
        N.repeat(X, init, lambda rows, state, k: init, times=2)
    assert (e.value.node, e.value.problem, e.value.fix) == (
        init.id, "the body returned a handle from outside its sub-plan", "pass outer values in through the state")
