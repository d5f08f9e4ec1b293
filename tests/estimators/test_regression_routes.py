"""LinearRegression's accuracy contract (issue 29): every route predicts its error before data (an R^2 loss at
confidence 0.9, or an excess risk for the bounded gradient routes), the route is chosen from the predictions
alone (public facts), the tolerance warns or refuses before any data is read, a hopeless fit shrinks to the
intercept-only model, and no NaN or infinity is released on hostile data."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.datasets import load_diabetes
from sklearn.model_selection import KFold, cross_val_score

import dpflow as dp
from dpflow.estimators.regression import LinearRegression, raw_coefficients
from dpflow.plan import Plan


def _quiet_fit(model: LinearRegression, X: np.ndarray, y: np.ndarray) -> tuple[LinearRegression, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, y)
    return model, [str(w.message) for w in caught if issubclass(w.category, dp.AccuracyWarning)]


def _ols_r2(X: np.ndarray, y: np.ndarray) -> float:
    A = np.hstack([X, np.ones((len(y), 1))])
    resid = y - A @ np.linalg.lstsq(A, y, rcond=None)[0]
    return 1.0 - float(resid @ resid) / float(((y - y.mean()) ** 2).sum())


def test_diabetes_cross_validation_is_finite_and_no_worse_than_the_intercept_only_model() -> None:
    # the case: 10 raw features, n = 353 per training fold, ApproxDP(1, 1e-6); main gave R^2 -1e51..-1e64
    X, y = load_diabetes(return_X_y=True, scaled=False)
    folds = KFold(5)
    mean_only = [1.0 - float(((y[te] - y[tr].mean()) ** 2).sum()) / float(((y[te] - y[te].mean()) ** 2).sum())
                 for tr, te in folds.split(X)]
    for seed in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            scores = cross_val_score(LinearRegression(budget=dp.ApproxDP(1, 1e-6), noise=dp.SeededNoise(seed)),
                                     X, y, cv=folds)
        assert np.all(np.isfinite(scores))
        # the private median costs R^2 against the mean: over 12 seeds x 5 folds the loss had median 0.043 and
        # worst 0.165 (the median within about half a deviation of the mean at eps * n ~ 110)
        assert np.all(scores >= np.asarray(mean_only) - 0.3), (scores, mean_only)
        assert np.mean(scores) >= np.mean(mean_only) - 0.15, (scores, mean_only)
        # every fold is hopeless for a 10-feature fit at this size: each warns that it fell back to the mean
        assert sum("route intercept" in str(w.message) for w in caught) == 5


def test_the_fitted_model_exposes_its_route_and_prediction_and_the_ledger_names_the_routes_compared() -> None:
    X, y = load_diabetes(return_X_y=True, scaled=False)
    m, lines = _quiet_fit(LinearRegression(budget=dp.ApproxDP(1, 1e-6), noise=dp.SeededNoise(0)), X, y)
    assert m.route_ == "intercept" and np.all(m.coef_ == 0) and y.min() <= m.intercept_ <= y.max()
    (pred,) = m.report_.ledger.predictions
    assert pred.route == "intercept" and pred.value == m.predicted_error_ and pred.metric == "R^2"
    assert "smallest of: intercept" in pred.derivation and "scaled inf" in pred.derivation
    assert len(lines) == 1 and "rows for the scale-step route" in lines[0]      # above the default tolerance 1
    assert _ols_r2(X, y) - m.score(X, y) <= m.predicted_error_                  # its prediction holds


def _hostile(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_cauchy(size=(n, d)) * 1e12
    X[::4] = np.nan
    X[:, 0] = 3.0                                                         # a constant column
    y = np.full(n, 1e15)
    y[1::3] = -np.inf
    return X, y


@pytest.mark.parametrize("n, d, budget", [(400, 2, dp.ZCDP(0.5)), (5_000, 3, dp.ApproxDP(1.0, 1e-6)),
                                          (60, 1, dp.ZCDP(2.0))])
def test_the_route_and_the_ledger_depend_only_on_public_facts(n: int, d: int, budget: dp.Measure) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    y = X @ np.ones(d) + rng.normal(size=n)
    a, _ = _quiet_fit(LinearRegression(budget=budget, noise=dp.SeededNoise(1)), X, y)
    b, _ = _quiet_fit(LinearRegression(budget=budget, noise=dp.SeededNoise(2)), *_hostile(n, d, 3))
    assert a.route_ == b.route_ and a.predicted_error_ == b.predicted_error_
    assert b.coef_ is not None and np.all(np.isfinite(b.coef_)) and math.isfinite(b.intercept_)
    assert a.report_.ledger == b.report_.ledger
    before = a.make_plan(d, n).check(exact_noise=False)  # decided before data, as fit decided it (continuous noise)
    assert before.entries == a.report_.ledger.entries and before.predictions == a.report_.ledger.predictions


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(2, 300), d=st.integers(1, 4), eps=st.sampled_from([0.1, 1.0, 8.0]), seed=st.integers(0, 99),
       hostile=st.booleans(), route=st.sampled_from([None, "scaled", "intercept", "radius"]))
def test_no_nan_or_infinity_is_released(n: int, d: int, eps: float, seed: int, hostile: bool,
                                        route: str | None) -> None:
    if hostile:
        X, y = _hostile(n, d, seed)
    else:
        rng = np.random.default_rng(seed)
        X, y = rng.normal(size=(n, d)), rng.normal(size=n)
    m, _ = _quiet_fit(LinearRegression(budget=dp.ApproxDP(eps, 1e-6), route=route, noise=dp.SeededNoise(seed)), X, y)
    assert m.coef_ is not None and np.all(np.isfinite(m.coef_)) and math.isfinite(m.intercept_)
    assert m.predicted_error_ is not None and m.predicted_error_ >= 0


def test_a_failed_scale_step_shrinks_to_the_intercept_only_model() -> None:
    # a zero (underflowed) feature scale makes the slope infinite: the released model is the intercept-only one
    coef = raw_coefficients(np.array([0.3, 2.0]), np.array([1.0, 5.0]), np.array([0.0, 2.0]), 1.0)
    assert coef.tolist() == [0.0, 5.0]
    assert raw_coefficients(np.array([0.3, 2.0]), np.zeros(3), np.array([1e-320, 1.0, 1e300]), 0.0).tolist() == [0, 0]


def test_strict_refuses_before_any_data_is_read_and_max_error_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = load_diabetes(return_X_y=True, scaled=False)
    ran: list[int] = []
    run = Plan.run

    def spy(self: Plan, *args: object, **kwargs: object) -> object:
        ran.append(1)
        return run(self, *args, **kwargs)

    monkeypatch.setattr(Plan, "run", spy)
    m = LinearRegression(budget=dp.ApproxDP(1, 1e-6), strict=True)
    with pytest.raises(dp.AccuracyError, match="route intercept"):
        m.fit(X, y)
    assert ran == [] and not hasattr(m, "coef_") and not hasattr(m, "route_")
    # a tolerance the prediction meets: no warning, the plan runs once
    rng = np.random.default_rng(0)
    Xg = rng.normal(size=(20_000, 2))
    yg = Xg @ [1.0, -1.0] + rng.normal(size=20_000)
    ok, lines = _quiet_fit(LinearRegression(budget=dp.ZCDP(1.0), max_error=0.5, strict=True,
                                            noise=dp.SeededNoise(0)), Xg, yg)
    assert ok.route_ == "scaled" and ok.predicted_error_ is not None and ok.predicted_error_ <= 0.5
    assert lines == [] and ran == [1]
    # a tighter tolerance warns (not strict), naming the rows needed
    _, lines = _quiet_fit(LinearRegression(budget=dp.ZCDP(1.0), max_error=1e-4, noise=dp.SeededNoise(0)), Xg, yg)
    assert len(lines) == 1 and "rows for the scale-step route" in lines[0]
    with pytest.raises(ValueError, match="max_error"):
        LinearRegression(budget=dp.ZCDP(1.0), max_error=-1.0).make_plan(2, 100)


def test_clone_keeps_the_new_parameters_and_cross_val_score_runs() -> None:
    m = LinearRegression(budget=dp.ZCDP(1.0), route="scaled", max_error=0.3, strict=False, noise=dp.SeededNoise(1))
    c = clone(m)
    assert (c.route, c.max_error, c.strict) == ("scaled", 0.3, False)
    assert {k: v for k, v in c.get_params().items() if k != "noise"} == {
        k: v for k, v in m.get_params().items() if k != "noise"}
    rng = np.random.default_rng(4)
    X = rng.normal(size=(6_000, 2))
    y = X @ [2.0, 0.5] + 1.0 + rng.normal(size=6_000)
    scores = cross_val_score(c, X, y, cv=3)
    assert np.all(scores > 0.5)
    with pytest.raises(ValueError, match="route"):
        LinearRegression(budget=dp.ZCDP(1.0), route="lasso").make_plan(2, 6_000)
    for contradiction in ({"standardize": True}, {"method": "ssp", "route": "intercept"},
                          {"sparsity": 2, "x_bound": 1.0, "coef_bound": 1.0}):
        with pytest.raises(ValueError, match="contradicts"):
            LinearRegression(budget=dp.ZCDP(1.0), **{"route": "radius", **contradiction}).make_plan(2, 6_000)
    assert LinearRegression(budget=dp.ZCDP(1.0), method="ssp", route="scaled").route == "scaled"


def test_a_loose_public_radius_does_not_beat_the_scale_step() -> None:
    # the case: y = 27 + 0.1 age + noise at raw scale, n = 20,000; radius=200 is valid but loose
    rng = np.random.default_rng(0)
    n = 20_000
    age = rng.uniform(18, 90, n)
    X, y = age[:, None], 27 + 0.1 * age + rng.normal(0, 2, n)
    default, _ = _quiet_fit(LinearRegression(budget=dp.ApproxDP(1, 1e-6), noise=dp.SeededNoise(0)), X, y)
    given_r, lines = _quiet_fit(LinearRegression(budget=dp.ApproxDP(1, 1e-6), radius=200.0,
                                                 noise=dp.SeededNoise(0)), X, y)
    assert given_r.route_ == "scaled" and lines == []
    assert given_r.predicted_error_ is not None and math.isfinite(given_r.predicted_error_)
    assert given_r.score(X, y) >= default.score(X, y) - given_r.predicted_error_
    forced, lines = _quiet_fit(LinearRegression(budget=dp.ApproxDP(1, 1e-6), radius=200.0, route="radius",
                                                noise=dp.SeededNoise(0)), X, y)
    assert forced.route_ == "radius" and forced.predicted_error_ == math.inf and len(lines) == 1
    gd, lines = _quiet_fit(LinearRegression(budget=dp.ApproxDP(1, 1e-6), method="gd", x_bound=100.0,
                                            coef_bound=50.0, noise=dp.SeededNoise(0)), X, y)
    (pred,) = gd.report_.ledger.predictions
    assert gd.route_ == "gd" and pred.metric.startswith("excess risk")
    resid = y - gd.predict(X)
    A = np.hstack([X, np.ones((n, 1))])
    ols_resid = y - A @ np.linalg.lstsq(A, y, rcond=None)[0]
    assert float(resid @ resid - ols_resid @ ols_resid) / n <= pred.value            # its bound holds, loose as it is


@pytest.mark.parametrize("n, d", [(3_000, 2), (20_000, 5)])
def test_the_predicted_r2_loss_holds_on_seeds(n: int, d: int) -> None:
    rng = np.random.default_rng(n + d)
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 100, d) + rng.uniform(-50, 50, d)
    y = X @ rng.normal(size=d) + 10 + rng.normal(0, 5, n)
    best = _ols_r2(X, y)
    for seed in range(3):
        m, _ = _quiet_fit(LinearRegression(budget=dp.ZCDP(0.5), noise=dp.SeededNoise(seed)), X, y)
        assert m.route_ == "scaled" and m.predicted_error_ is not None
        assert best - m.score(X, y) <= m.predicted_error_


def test_indicator_features_with_most_values_on_the_median_do_not_blow_up() -> None:
    # 0/1 columns with 70% zeros: the scale step's spread range was the lowest log bin (the modal |x - c| is 0)
    # and its spread ~1e-18 made raw coefficients ~1e30; such a spread now counts as zero (scale 1)
    rng = np.random.default_rng(7)
    n = 5_000
    X = (rng.uniform(size=(n, 2)) < 0.3).astype(float)
    y = X @ [3.0, -2.0] + 40 + rng.normal(size=n)
    for seed in range(2):
        m, _ = _quiet_fit(LinearRegression(budget=dp.ApproxDP(1, 1e-6), noise=dp.SeededNoise(seed)), X, y)
        assert m.route_ == "scaled" and m.predicted_error_ is not None
        assert _ols_r2(X, y) - m.score(X, y) <= m.predicted_error_


@pytest.mark.slow
def test_r2_has_a_prediction_that_covers_the_in_sample_loss() -> None:
    """The ``r2`` output had no prediction (benchmarks/results/robustness.md, "no prediction: regression / r2"):
    the R^2 loss is now predicted for the model's R^2 (output ``r2``), and it covers the in-sample loss against
    least squares in at least 95% of 40 seeded runs (raw-scale features, the scaled route)."""
    from sklearn.linear_model import LinearRegression as OLS

    hits = []
    for seed in range(40):
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(5000, 3)) * [1.0, 10.0, 100.0] + [5.0, -3.0, 1000.0]
        y = X @ np.array([0.5, 0.1, 0.01]) + rng.normal(size=5000) * 2.0 + 27.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = LinearRegression(budget=dp.ApproxDP(1, 1e-6), noise=dp.SeededNoise(seed)).fit(X, y)
        (p,) = [p for p in m.report_.ledger.predictions if p.output == "r2"]
        hits.append(OLS().fit(X, y).score(X, y) - m.score(X, y) <= p.value)
    assert sum(hits) >= 38, sum(hits)
