"""The accuracy contract's building blocks: predicted errors in the ledger, route choice, the tolerance."""

from __future__ import annotations

import json
import math
import warnings

import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.estimators.tolerance import choose_route, enforce, smallest_n
from dpflow.planner.accuracy import Prediction


def _plan(value: float) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=1), n=10)
    N.predicted_error(b, "m", "absolute", value, 0.9, "two sigma of the Gaussian noise", "clipped")
    return b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))


@pytest.mark.parametrize("value", [0.0, 0.25, math.inf])
def test_a_predicted_error_is_in_the_ledger_its_json_and_its_summary(value: float) -> None:
    ledger = _plan(value).check()
    assert ledger.predictions == (Prediction("m", "absolute", value, 0.9, "two sigma of the Gaussian noise",
                                             "clipped"),)
    text = ledger.to_json()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert dp.Ledger.from_json(text) == ledger
    assert "predicted: m: absolute error <= " in ledger.summary() and "route: clipped" in ledger.summary()
    assert "predicted error" in repr(ledger)


@pytest.mark.parametrize("bad", [-1.0, math.nan])
def test_a_predicted_error_is_a_non_negative_number(bad: float) -> None:
    with pytest.raises(ValueError, match="non-negative"):
        N.PredictedError(output="m", metric="l2", value=bad, confidence=0.9, derivation="")
    with pytest.raises(ValueError, match="non-negative"):  # the ledger's record keeps the same rule
        Prediction("m", "l2", bad, 0.9, "")


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5])
def test_a_confidence_is_a_probability_strictly_between_0_and_1(bad: float) -> None:
    with pytest.raises(ValueError, match="probability"):
        N.PredictedError(output="m", metric="l2", value=1.0, confidence=bad, derivation="")


def test_the_route_is_the_smallest_prediction_or_the_forced_one() -> None:
    p = {r: Prediction("m", "l2", v, 0.9, "") for r, v in (("a", 3.0), ("b", 1.0), ("c", 1.0))}
    assert choose_route(p, None) == "b"  # the first listed among equals
    assert choose_route(p, "a") == "a"
    with pytest.raises(ValueError, match="unknown route 'z'"):
        choose_route(p, "z")


def test_smallest_n_is_the_exact_threshold() -> None:
    assert smallest_n(lambda n: 1000.0 / n, 1.0, start=3) == 1000
    assert smallest_n(lambda n: 1000.0 / n, 1.0, start=5000) == 5000
    assert smallest_n(lambda n: 1.0 + 1.0 / n, 1.0, start=1) is None


def test_enforce_warns_above_the_tolerance_and_strict_refuses() -> None:
    p = Prediction("mean(x)", "absolute", 5.0, 0.9, "Laplace noise")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert enforce([p], 10.0, True, "stats") == ()  # within: nothing said
    with pytest.warns(dp.AccuracyWarning, match=r"mean\(x\) is predicted to err by up to 5 .* tolerance is 1. "
                                                r"Fix: 500 rows"):
        assert len(enforce([p], 1.0, False, "stats", "500 rows")) == 1
    with pytest.raises(dp.AccuracyError, match="Nothing was read or charged. Fix: 500 rows"):
        enforce([p], 1.0, True, "stats", "500 rows")
    with pytest.warns(dp.AccuracyWarning, match="no finite error can be promised"):
        enforce([Prediction("m", "l2", math.inf, 0.9, "")], None, False, "stats")
    with pytest.raises(ValueError, match="max_error must be positive"):
        enforce([p], 0.0, False, "stats")


def test_a_strict_refusal_names_where_once() -> None:
    p = Prediction("mean(x)", "absolute", 5.0, 0.9, "Laplace noise")
    with pytest.raises(dp.AccuracyError) as caught:
        enforce([p], 1.0, True, "dp.stats", "500 rows")
    assert str(caught.value).startswith("dp.stats: mean(x) is predicted") and str(caught.value).count("dp.stats") == 1
