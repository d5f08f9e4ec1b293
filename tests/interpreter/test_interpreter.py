"""End-to-end runs: reproducibility, release status, accuracy implied by the guarantee,
Repeat rounds and the non-finite policy."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest
from conftest import ZeroNoise

import dpflow as dp
from dpflow import nodes as N
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.planner.certify import certify
from dpflow.privacy import gaussian_sigma_for_zcdp


def mean_plan(n: int, d: int = 3, radius: float = 20.0, rho: str = "0.5") -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(rho))
    X = b.source("X", dp.Vectors(d=d), n=n)
    C = N.Clip(radius=radius)(X)
    return b.build(mean=N.GaussianMech()(N.Mean()(C)), count=N.LaplaceMech()(N.Sum()(C)))


def data(n: int, d: int = 3, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.5, 1.0, (n, d))


def test_seeded_runs_are_reproducible():
    plan, X = mean_plan(200), data(200)
    a = plan.run({"X": X}, noise=dp.SeededNoise(7)).released
    b = plan.run({"X": X}, noise=dp.SeededNoise(7)).released
    c = plan.run({"X": X}, noise=dp.SeededNoise(8)).released
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert not np.array_equal(a["mean"], c["mean"])


def test_secure_runs_differ():
    plan, X = mean_plan(200), data(200)
    a = plan.run({"X": X}, noise=dp.SecureNoise()).released
    b = plan.run({"X": X}, noise=dp.SecureNoise()).released
    assert not np.array_equal(a["mean"], b["mean"])


def test_seeded_report_says_not_for_release():
    res = mean_plan(100).run({"X": data(100)}, noise=dp.SeededNoise(1))
    run = res.report.to_data()["run"]
    assert run["seeded"] is True
    assert "NOT FOR RELEASE" in run["release_status"]
    assert "NOT FOR RELEASE" in run["noise"]
    assert "NOT FOR RELEASE" in res.report.to_markdown()
    assert "NOT FOR RELEASE" in res.report.to_json()


def test_secure_report_is_releasable():
    res = mean_plan(100).run({"X": data(100)}, noise=dp.SecureNoise())
    run = res.report.to_data()["run"]
    assert run["seeded"] is False
    assert "NOT FOR RELEASE" not in res.report.to_json()
    assert "NOT FOR RELEASE" not in res.report.to_markdown()
    assert run["backend"] == "numpy"


def test_default_noise_is_secure():
    res = mean_plan(100).run({"X": data(100)})
    assert res.report.execution.seeded is False


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clipped_mean_accuracy_follows_from_the_guarantee(seed):
    n, d, radius, rho = 20000, 3, 20.0, 0.5
    X = data(n, d, seed)
    assert np.max(np.linalg.norm(X, axis=1)) < radius  # no clipping bias: the only error is the noise
    plan = mean_plan(n, d, radius)
    res = plan.run({"X": X}, noise=dp.SeededNoise(seed))
    cert = certify(plan)
    mech = next(r.id for r in plan.records if r.node.kind == "GaussianMech")
    share = float(cert.allocations[mech].share)
    delta = 2 * radius / n
    sigma = delta / math.sqrt(2 * share)
    # the realised sigma is the guarantee's sigma (rounded up, never down)
    realised = res.report.execution.facts[mech][0]["sigma"]
    assert sigma <= realised <= sigma * (1 + 1e-9)
    assert share == pytest.approx(rho / 2)  # two mechanisms of weight 1
    err = np.abs(res.released["mean"] - X.mean(axis=0))
    assert np.all(err <= 6 * sigma), (err, sigma)
    assert np.any(err > 0)  # noise was added


def test_sigma_matches_calibration_for_a_released_radius():
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=2), n=50)
    r = b.public(3.0)
    plan = b.build(s=N.GaussianMech()(N.Sum()(N.Clip(radius=r)(X))))
    ex = execute(certify(plan), {"X": data(50, 2)}, ZeroNoise(), NumpyBackend())
    (mech,) = ex.facts
    assert ex.facts[mech][0]["sigma"] == pytest.approx(gaussian_sigma_for_zcdp(6.0, 1), rel=1e-9)


def recurse_plan(times: int) -> tuple[dp.Plan, str]:
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=2), n=500)

    def step(rows: Any, state: Any, k: Any) -> Any:
        return N.GaussianMech()(N.Mean()(N.Clip(radius=1.0, center=state)(rows)))

    last = N.repeat(X, b.public([5.0, 5.0]), step, times=times)
    return b.build(last=last), last.id


@pytest.mark.parametrize("times", [1, 3, 5])
def test_recurse_runs_times_rounds(times):
    plan, rec_id = recurse_plan(times)
    res = plan.run({"X": np.zeros((500, 2))}, noise=dp.SeededNoise(0))
    facts = res.report.execution.facts
    body = [k for k in facts if k.startswith(rec_id + "/")]
    assert len(body) == 1
    sigmas = [f["sigma"] for f in facts[body[0]]]
    assert len(sigmas) == times
    assert len(set(sigmas)) == 1  # equal round weights: equal noise
    assert sigmas[0] == pytest.approx(gaussian_sigma_for_zcdp(2 * 1.0 / 500, 1 / times), rel=1e-9)


@pytest.mark.parametrize("times", [1, 2, 4])
def test_recurse_threads_the_state(times):
    """Each round clips around the previous round's release: from (5, 5), with radius 1, a mean of zero
    rows moves one unit towards the origin per round (zero noise)."""
    plan, _ = recurse_plan(times)
    ex = execute(certify(plan), {"X": np.zeros((500, 2))}, ZeroNoise(), NumpyBackend())
    expected = np.array([5.0, 5.0]) * max(0.0, 1 - times / (5 * math.sqrt(2)))
    np.testing.assert_allclose(ex.released["last"], expected, atol=1e-12)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_rows_do_not_raise(bad):
    X = data(300)
    X[3] = bad
    X[10, 1] = bad
    X[20] = [bad, 0.0, 1.0]
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    S = b.source("X", dp.Vectors(d=3), n=300)
    c = b.public([0.5, 0.5, 0.5])
    C = N.Clip(radius=3.0)(S)
    plan = b.build(
        mean=N.GaussianMech()(N.Mean()(C)),
        cov=N.GaussianMech()(N.SecondMoment(center=c)(N.Clip(radius=3.0, center=c)(S))),
        box=N.Peel(s=2)(N.Mean()(N.Clip(box=(-1.0, 2.0))(S))),
        hist=N.LaplaceMech()(N.Histogram(edges=[-1.0, 0.0, 1.0, 2.0])(N.Columns(keep=[1])(S))),
        pairs=N.GaussianMech()(N.Sum()(N.PairDifferences()(C))),
    )
    res = plan.run({"X": X}, noise=dp.SeededNoise(0))
    for name, v in res.released.items():
        assert np.all(np.isfinite(v)), name
    # the non-finite rows count as the centre: the noiseless mean equals the mean with those rows zeroed
    ex = execute(certify(plan), {"X": X}, ZeroNoise(), NumpyBackend())
    Z = X.copy()
    Z[[3, 10, 20]] = 0.0
    clipped = Z * np.minimum(1.0, 3.0 / np.maximum(np.linalg.norm(Z, axis=1), 1e-300))[:, None]
    np.testing.assert_allclose(ex.released["mean"], clipped.mean(axis=0), atol=1e-12)


def _clip_sum_plan() -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=2), n=4)
    return b.build(s=N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(X))))


def test_moderate_values_emit_no_warning():
    D = np.zeros((4, 2))
    D[0] = [1e100, -3.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = _clip_sum_plan().run({"X": D}, noise=dp.SeededNoise(0))
    assert np.all(np.isfinite(res.released["s"]))


def test_huge_finite_values_emit_no_data_dependent_warning():
    D = np.zeros((4, 2))
    D[0] = [1e200, 1e200]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ex = execute(certify(_clip_sum_plan()), {"X": D}, ZeroNoise(), NumpyBackend())
    np.testing.assert_allclose(ex.released["s"], [math.sqrt(0.5), math.sqrt(0.5)])


def test_execution_records_noise_source_and_backend():
    ex = execute(certify(mean_plan(50)), {"X": data(50)}, dp.SeededNoise(4), NumpyBackend())
    assert ex.seeded is True and "seed=4" in ex.noise
    assert ex.backend == "numpy"
    assert set(ex.released) == {"mean", "count"}
    assert all(len(v) == 1 for v in ex.facts.values())


NOISES = {"seeded": lambda: dp.SeededNoise(1), "exact": lambda: dp.SeededNoise(1, exact=True)}


def _released_radius_plan(mech: Any, budget: Any, radius: float, neighbors: str = "replace") -> dp.Plan:
    b = dp.PlanBuilder(budget=budget, neighbors=neighbors)
    X = b.source("X", dp.Vectors(d=2), n=10 if neighbors == "replace" else None)
    r = N.Apply(fn=lambda v: v * radius, shape=())(b.public(1.0))
    query = N.Mean() if neighbors == "replace" else N.Sum()
    return b.build(m=mech(query(N.Clip(radius=r)(X))))


@pytest.mark.parametrize("neighbors", ["replace", "add_remove"])
@pytest.mark.parametrize("noise", sorted(NOISES))
@pytest.mark.parametrize("radius", [math.inf, math.nan])
@pytest.mark.parametrize("mech,budget,key", [(N.GaussianMech, dp.ZCDP(0.5), "sigma"),
                                             (N.GaussianMech, dp.ApproxDP(1.0, 1e-6), "sigma"),
                                             (N.LaplaceMech, dp.PureDP(1.0), "scale")])
def test_an_infinite_released_bound_releases_infinite_noise(mech: Any, budget: Any, key: str, radius: float,
                                                            noise: str, neighbors: str) -> None:
    """Sym.value: a released factor that is not finite makes the bound infinite, and the mechanism then
    releases noise of infinite scale (NaN entries whatever the data), never an exception."""
    plan = _released_radius_plan(mech(), budget, radius, neighbors)
    with np.errstate(all="ignore"):
        res = plan.run({"X": np.ones((10, 2))}, noise=NOISES[noise]())
    assert np.isnan(res.released["m"]).all() and res.released["m"].shape == (2,)
    (fact,) = next(iter(res.report.execution.facts.values()))
    assert fact == {key: math.inf}
    finite = _released_radius_plan(mech(), budget, 1.0, neighbors).run({"X": np.ones((10, 2))}, noise=NOISES[noise]())
    assert np.isfinite(finite.released["m"]).all()


def test_an_unknown_output_name_lists_the_outputs() -> None:
    """``result.released["meen"]`` was a bare ``KeyError: 'meen'`` (issue 28): the error (still a KeyError)
    names the close match and every output."""
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=100)
    rows = N.Clip(radius=1.0)(X)
    plan = b.build(mean=N.GaussianMech()(N.Mean()(rows)), moment=N.GaussianMech()(N.SecondMoment()(rows)))
    res = plan.run(np.zeros((100, 2)), noise=dp.SeededNoise(0))
    with pytest.raises(KeyError, match=r"^no value named 'meen'; did you mean 'mean'.*\? The result has: 'mean', "
                                       r"'moment'\.$"):
        res.released["meen"]
    assert set(res.released) == {"mean", "moment"} and res.released["mean"].shape == (2,)
