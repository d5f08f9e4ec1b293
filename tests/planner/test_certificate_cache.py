"""``certified``: certificates cached by plan content hash and by the identity of node functions."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.planner import certified, certify, clear_certificates

certify_module = importlib.import_module("dpflow.planner.certify")


def _plan(fn: object = np.abs, rho: float = 0.5) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(rho))
    m = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2), n=50))))
    return b.build(m=N.Apply(fn=fn, shape=(2,))(m))


def test_an_equal_plan_reuses_the_certificate() -> None:
    a, b = _plan(), _plan()
    assert a is not b and a.hash == b.hash
    assert certified(a) is certified(b)
    assert certified(a).ledger.to_json() == certify(a).ledger.to_json()  # what certify writes


def test_a_different_plan_or_function_is_certified_anew() -> None:
    base = certified(_plan())
    assert certified(_plan(rho=0.25)) is not base
    other = _plan(fn=np.negative)  # a different function: the JSON names it, the cache must not mix them up
    assert certified(other) is not base and certified(other).plan is other


def test_a_lambda_with_the_same_json_is_not_confused() -> None:
    p, q = _plan(fn=lambda v: v), _plan(fn=lambda v: -v)
    X = np.full((50, 2), 0.5)
    assert certified(p) is not certified(q)
    rp = p.run({"X": X}, noise=dp.SeededNoise(3)).released["m"]
    rq = q.run({"X": X}, noise=dp.SeededNoise(3)).released["m"]
    assert np.array_equal(rp, -rq)


def test_clear_and_bounded_size(monkeypatch: pytest.MonkeyPatch) -> None:
    a = certified(_plan())
    clear_certificates()
    assert certified(_plan()) is not a
    monkeypatch.setattr(certify_module, "CACHE_SIZE", 2)
    for r in (0.1, 0.2, 0.3):
        certified(_plan(rho=r))
    assert len(certify_module._CACHE) == 2
