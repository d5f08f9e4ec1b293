"""dpflow's estimators against scikit-learn's API (issue 32): one base (dpflow.estimators.base.Estimator) for
LinearRegression, GaussianMixture, PCA, StandardScaler and Covariance.

Fast (unmarked): clone, the get_params / set_params round trip, the declared constraints refused before any
data is read, the plan each estimator shows before fit being the plan fit runs, private steps in a Pipeline and
in cross_val_score.  Slow: scikit-learn's own API checks (``parametrize_with_checks``) on all five, each expected
failure listed with its reason in :func:`expected_failures` and run strict (a listed check that passes fails).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest
import sklearn
from sklearn.base import clone
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline

import dpflow as dp
from dpflow.estimators import PCA, Covariance, GaussianMixture, LinearRegression, StandardScaler
from dpflow.estimators.base import Estimator
from dpflow.estimators.mixtures import gaussian_mixture_plan, leaf_outputs, part_count
from dpflow.plan import Plan


def _estimators(noise: Any = None) -> list[Estimator]:
    """One of each, as the conformance checks take them (``noise=None``: fresh OS entropy per fit, so a fit does
    not change its parameters; a seeded source is a stateful object the fit advances)."""
    return [
        LinearRegression(budget=dp.ZCDP(1.0), noise=noise),
        # scikit-learn's checks fit on 20 to 200 rows: at (1, 1e-6) the part's noisy count often misses its
        # threshold there (a released "not found": nothing to predict with); the checks are about the API
        GaussianMixture(1, dp.ApproxZCDP(100.0, 1e-3), radius=100.0, sigma_range=(0.1, 10.0), noise=noise),
        PCA(2, dp.ZCDP(1.0), noise=noise),
        StandardScaler(dp.ZCDP(1.0), noise=noise),
        Covariance(dp.ZCDP(1.0), noise=noise),
    ]


NOT_A_NUMBER = ("an entry that is not a number (here a dict) is missing by dpflow's table policy "
                "(dpflow.tables.to_rows), as every private value: raising would depend on the data")
FRESH_NOISE = "each fit is a new private release with fresh noise: two fits on the same data differ"


def expected_failures(estimator: Estimator) -> dict[str, str]:
    """The scikit-learn checks each estimator fails, and why: each assumes deterministic output or behaviour a
    private estimator must not have (raising on a private value).  Checks scikit-learn skips itself for a
    ``non_deterministic`` estimator (``check_pipeline_consistency``, ``check_transformer_general``,
    ``check_methods_*`` comparisons of two fits) are not listed."""
    out = {"check_dtype_object": NOT_A_NUMBER}
    if not isinstance(estimator, (GaussianMixture, Covariance)):  # one component predicts 0; no predict at all
        out["check_fit_idempotent"] = FRESH_NOISE + " (the check compares them)"
    if isinstance(estimator, LinearRegression):
        out |= {
            "check_regressor_data_not_an_array": FRESH_NOISE + " (the check compares a fit on an array with one "
                                                 "on a list)",
            "check_regressors_int": FRESH_NOISE + " (the check compares a fit on integer y with one on float y)",
            "check_supervised_y_2d": FRESH_NOISE + " (the check compares a fit on y with one on y[:, None])",
            "check_supervised_y_no_nan": "a response that is not a finite number follows the declared policy (the "
                                         "row adds nothing to the fit): raising would depend on the data",
        }
    if isinstance(estimator, StandardScaler):  # sparse input is refused: test_sparse_and_complex_input_are_refused
        reason = ("the check sets scikit-learn's own StandardScaler parameter with_mean=False, chosen by the class "
                  "name; dpflow's has no such parameter")
        out |= {"check_estimator_sparse_array": reason, "check_estimator_sparse_matrix": reason}
    return out


@pytest.mark.slow
@pytest.mark.skipif(tuple(int(p) for p in sklearn.__version__.split(".")[:2]) < (1, 8),
                    reason="expected_failed_checks with xfail_strict needs scikit-learn >= 1.8")
def test_scikit_learn_api_checks() -> None:
    """Every check of ``sklearn.utils.estimator_checks`` on every estimator passes but the expected failures,
    and those fail (a comparison of two private fits may agree by chance within its tolerance: those may pass)."""
    from sklearn.utils.estimator_checks import check_estimator

    for est in _estimators():
        expected = expected_failures(est)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dp.AccuracyWarning)
            results = check_estimator(est, expected_failed_checks=expected, on_fail=None)
        failed = {r["check_name"] for r in results if r["status"] == "failed"}
        xfailed = {r["check_name"] for r in results if r["status"] == "xfail"}
        assert failed == set(), (type(est).__name__, [(r["check_name"], r["exception"]) for r in results
                                                      if r["status"] == "failed"])
        must_fail = {name for name, why in expected.items() if not why.startswith(FRESH_NOISE)}
        assert must_fail <= xfailed <= set(expected), (type(est).__name__, must_fail - xfailed)


def _data(n: int = 3000, d: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.arange(1.0, d + 1.0) + 10.0
    return X, X @ np.linspace(1.0, 2.0, d) + rng.normal(size=n)


@pytest.mark.parametrize("est", _estimators(), ids=lambda e: type(e).__name__)
def test_clone_and_the_params_round_trip(est: Estimator) -> None:
    params = est.get_params()
    assert set(params) == set(est._param_names())
    twin = clone(est)
    assert type(twin) is type(est) and twin is not est
    assert all(twin.get_params()[k] == v for k, v in params.items() if k != "budget") and \
        twin.get_params()["budget"] == params["budget"]
    assert est.set_params(**params) is est and est.get_params() == params
    with pytest.raises(dp.errors.ParameterError, match="invalid parameters"):
        est.set_params(alpha=1.0)


@pytest.mark.parametrize("est", _estimators(), ids=lambda e: type(e).__name__)
def test_a_broken_constraint_is_kept_by_init_and_refused_by_fit_before_any_data(
        est: Estimator, monkeypatch: pytest.MonkeyPatch) -> None:
    """scikit-learn's protocol: ``__init__`` and ``set_params`` store; the declared constraints are checked by
    fit (public facts) before any plan runs."""
    ran: list[int] = []
    monkeypatch.setattr(Plan, "run", lambda *a, **k: ran.append(1))
    est = clone(est).set_params(noise="seed 0")
    assert est.get_params()["noise"] == "seed 0"
    X, y = _data(200)
    with pytest.raises(dp.errors.ParameterError, match="noise='seed 0' is not a dpflow noise source"):
        est.fit(X, y)
    with pytest.raises(dp.PlanTypeError, match="not a privacy measure"):
        clone(est).set_params(noise=None, budget=0.5).fit(X, y)
    assert ran == [] and not hasattr(est, "plan_")


def test_the_declared_constraints_accept_and_refuse_by_value_only() -> None:
    from dpflow.estimators.base import BOOLEAN, one_of, optional, positive

    assert all(positive(integer=True).test(v) for v in (1, 2, np.int64(3), 4.0))
    assert not any(positive(integer=True).test(v) for v in (0, -1, 2.5, True, float("inf"), float("nan"), "2", None))
    assert all(positive().test(v) for v in (1e-300, 2, np.float32(0.5)))
    assert not any(positive().test(v) for v in (0.0, -1.0, float("inf"), float("nan"), False))
    assert optional(positive()).test(None) and BOOLEAN.test(np.bool_(True)) and not BOOLEAN.test(1)
    assert one_of(None, "ssp").test("ssp") and not one_of(None, True).test(1) and not one_of("a").test(["a"])


def test_predict_before_fit_is_a_not_fitted_error_also_scikit_learn_s() -> None:
    from sklearn.exceptions import NotFittedError

    X, _ = _data(10)
    for est in _estimators():
        method = getattr(est, "predict", None) or getattr(est, "transform", None) or est.score
        with pytest.raises(NotFittedError, match="call fit first") as e:
            method(X)
        assert isinstance(e.value, dp.errors.NotFittedError)


@pytest.mark.parametrize("est", _estimators(dp.SeededNoise(0)), ids=lambda e: type(e).__name__)
def test_the_plan_shown_before_fit_is_the_plan_fit_runs(est: Estimator) -> None:
    X, y = _data(3000)
    shown = est.make_plan(3, 3000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.AccuracyWarning)
        est.fit(pd.DataFrame(X, columns=["a", "b", "c"]), y)
    ran = est.scale_search_.plan if isinstance(est, Covariance) and est.scale_search_ else est.plan_
    assert shown.to_json() == ran.to_json()
    assert est.n_features_in_ == 3 and est.feature_names_in_.tolist() == ["a", "b", "c"]


@pytest.mark.parametrize("method", ["sample_aggregate", "rpgmp", "warmup"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_the_mixture_plan_names_every_leaf_output_explicitly(method: str, k: int) -> None:
    """GaussianMixture reads its leaves by the names leaf_outputs gives, part_count of them (it counted outputs
    ending in "_n" before)."""
    plan = gaussian_mixture_plan(d=2, n=4000, k=k, budget=dp.ApproxZCDP(1.0, 1e-6), method=method)
    leaves = {name for name, _ in plan.outputs if name.startswith("leaf")}
    assert leaves == {name for i in range(part_count(method, k)) for name in leaf_outputs(i)}


def test_sparse_and_complex_input_are_refused() -> None:
    from scipy import sparse

    for est in _estimators():
        with pytest.raises(dp.errors.ParameterError, match="sparse input is not supported"):
            est.fit(sparse.csr_matrix(np.eye(20, 3)), np.zeros(20))
        with pytest.raises(dp.errors.ParameterError, match="Complex data"):
            est.fit(np.ones((20, 3), dtype=complex), np.zeros(20))


def test_private_steps_compose_in_a_pipeline_and_in_cross_val_score() -> None:
    """A Pipeline of private steps: each step's fit spends its own budget (the total is their sum, by sequential
    composition), each later step sees rows mapped by released values (post-processing, stability 1)."""
    X, y = _data(6000, 3, 1)
    X = X * [1.0, 100.0, 0.01]
    steps = (StandardScaler(dp.ZCDP(0.2), noise=dp.SeededNoise(1)), PCA(3, dp.ZCDP(0.3), noise=dp.SeededNoise(2)),
             LinearRegression(budget=dp.ZCDP(0.5), noise=dp.SeededNoise(3)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.AccuracyWarning)
        pipe = make_pipeline(*steps).fit(X, y)
        assert pipe.score(X, y) > 0.9
        assert pipe.named_steps["pca"].transform(pipe.named_steps["standardscaler"].transform(X)).shape == (6000, 3)
        scores = cross_val_score(make_pipeline(*[clone(s) for s in steps]), X, y, cv=3)
    assert np.all(scores > 0.9)
    cov = make_pipeline(StandardScaler(dp.ZCDP(0.2)), Covariance(dp.ApproxZCDP(0.5, 1e-6))).fit(X)
    assert cov[-1].covariance_.shape == (3, 3) and np.isfinite(cov.score(X))
