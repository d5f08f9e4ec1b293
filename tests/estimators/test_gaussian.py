"""Gaussian estimators (CoinPress, KLSU, Karwa-Vadhan): ledger totals, per-round charges, neighbouring-
datasets sensitivity of every released step, bad input, and seeded accuracy against thresholds derived
from the noise the ledger certifies and the non-private error on the same data."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from conftest import ZeroNoise, run_zero

import dpflow as dp
from dpflow import nodes as N
from dpflow.estimators import gaussian as G
from dpflow.estimators.gaussian import coinpress, klsu, kv, steps
from dpflow.estimators.tails import chi_radius
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.planner.certify import certify

BUDGETS = [dp.ZCDP(0.5), dp.ZCDP("1/3"), dp.ApproxDP(1.0, 1e-6)]


def _plans(budget: Any) -> list[dp.Plan]:
    return [
        G.mean(d=4, n=500, budget=budget, R=20.0, method="coinpress", t=3),
        G.mean(d=4, n=500, budget=budget, R=20.0, method="kv"),
        G.mean(d=4, n=500, budget=budget, R=20.0, method="pme"),
        G.mean(d=4, n=500, budget=budget, R=20.0, method="naive"),
        G.mean(d=4, n=500, budget=budget, R=20.0, sigma=2.0),
        G.univariate_mean(500, budget, R=50.0, sigma=1.0),
        G.univariate_mean(500, budget, R=50.0, sigma_bounds=(0.01, 100.0)),
        G.covariance(d=3, n=600, budget=budget, K=50.0, method="coinpress", t=4),
        G.covariance(d=3, n=600, budget=budget, K=1e4, method="pce", unknown_mean=True, lower=1.0),
        G.covariance(d=3, n=600, budget=budget, K=2.0, method="pce", lower=1.0),
        G.covariance(d=3, n=600, budget=budget, K=50.0, method="naive"),
        G.gaussian(d=3, n=600, budget=budget, R=10.0, K=50.0, split=0.3),
    ]


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: b.describe())
def test_ledger_total_equals_the_budget(budget: Any) -> None:
    for plan in _plans(budget):
        ledger = plan.check(exact_noise=False)
        (total,) = ledger.totals
        if isinstance(budget, dp.ZCDP):
            assert Fraction(total.rho) == budget.rho, plan.name
        else:
            best = total.tightest()
            assert best.rule == "exact Gaussian-DP" and 0.999 <= best.epsilon <= 1.0, plan.name
        assert dp.Plan.from_json(plan.to_json()).hash == plan.hash


def test_recurse_is_charged_per_round_at_the_coinpress_schedule() -> None:
    d, n, R = 50, 1000, 10 * math.sqrt(50)
    plan = G.mean(d=d, n=n, budget=dp.ZCDP(0.5), R=R, t=2)
    cert = certify(plan)
    (mech,) = [k for k in cert.allocations if "gaussian_mech" in k]
    assert cert.allocations[mech].share == Fraction(1, 2)  # per unit round weight
    X = np.random.default_rng(0).normal(size=(n, d))
    facts = plan.run({"X": X}, noise=dp.SeededNoise(1)).report.execution.facts[mech]
    sig = [f["sigma"] for f in facts]
    # worked example (gaussian.md 1.2): round 1 clip 74.2551, sigma 0.29702 at rho/4; round 2 at 3 rho/4
    assert len(sig) == 2 and abs(sig[0] - 0.29702) < 1e-5
    clip1 = steps.mvm_clip(R, chi_radius(d, 0.01))
    assert math.isclose(sig[0], 2 * clip1 / n / math.sqrt(2 * 0.125), rel_tol=1e-9)
    assert 0.02 < sig[1] < 0.03  # its clip depends on the released radius (0.02471 in the example)


def test_predicted_radii_match_the_worked_example() -> None:
    r = coinpress.predicted_mean_radii(1000, 50, 10 * math.sqrt(50), Fraction(1, 2), 2)
    assert [round(x, 4) for x in r] == [70.7107, 2.8268, 0.3798]
    assert [str(s) for s in coinpress.schedule(10)] == ["1/36"] * 9 + ["3/4"]


def test_pce_rounds_are_charged_evenly_and_the_ledger_shows_the_defaults() -> None:
    plan = G.covariance(d=3, n=5000, budget=dp.ZCDP(1), K=1e3, method="pce", lower=1.0)
    ledger = plan.check()
    rounds = klsu.ppc_rounds(1e3)
    mechs = [e for e in ledger.entries if e.kind == "GaussianMech"]
    assert len(mechs) == 2 and "every round" in mechs[0].rule
    cert = certify(plan)
    shares = {k: a.share for k, a in cert.allocations.items()}
    per_round = next(v for k, v in shares.items() if "/" in k)
    final = next(v for k, v in shares.items() if "/" not in k)
    assert per_round * rounds + final == 1 and abs(final - Fraction(3, 4)) < 1e-15
    params = {e.derivation.split(" = ")[0] for e in ledger.entries if e.kind == "Public"}
    assert {"K_r", "trunc_radius", "final_radius", "pce_split"} <= params


def test_small_n_is_warned_in_the_ledger() -> None:
    def warned(plan: dp.Plan) -> bool:
        return any(e.kind == "Public" and e.derivation.startswith("warning") for e in plan.check().entries)

    assert warned(G.mean(d=50, n=20, budget=dp.ZCDP(0.5), R=5.0))
    assert not warned(G.mean(d=50, n=2000, budget=dp.ZCDP(0.5), R=5.0))
    assert warned(G.covariance(d=5, n=4, budget=dp.ZCDP(1), K=10.0))
    assert warned(G.covariance(d=5, n=1000, budget=dp.ZCDP(1), K=1e4, method="pce", lower=1.0))
    assert not warned(G.covariance(d=5, n=1000, budget=dp.ZCDP(1), K=10.0))


@pytest.mark.parametrize("call, err", [
    (lambda: G.mean(d=0, n=100, budget=dp.ZCDP(1), R=1.0), dp.DomainError),
    (lambda: G.mean(d=2, n=1, budget=dp.ZCDP(1), R=1.0), dp.DomainError),
    (lambda: G.mean(d=2, n=100, budget=dp.ZCDP(1), R=math.inf), dp.DomainError),
    (lambda: G.mean(d=2, n=100, budget=dp.ZCDP(1), R=-1.0), dp.DomainError),
    (lambda: G.mean(d=2, n=100, budget=dp.ZCDP(1), R=1.0, t=0), dp.DomainError),
    (lambda: G.mean(d=2, n=100, budget=dp.ZCDP(1), R=1e9, method="kv"), dp.DomainError),
    (lambda: G.mean(d=2, n=100, budget=dp.PureDP(1), R=1.0), dp.PlanTypeError),
    (lambda: G.covariance(d=2, n=100, budget=dp.ZCDP(1), K=0.5), dp.DomainError),
    (lambda: G.gaussian(d=2, n=100, budget=dp.ZCDP(1), R=1.0, K=2.0, split=1.0), dp.DomainError),
    (lambda: G.univariate_mean(100, dp.ZCDP(1), R=1.0), dp.DomainError),
    (lambda: G.univariate_mean(100, dp.ZCDP(1), R=1.0, sigma_bounds=(2.0, 1.0)), dp.DomainError),
])
def test_vacuous_or_wrong_parameters_are_refused_before_data(call: Any, err: type) -> None:
    with pytest.raises(err):
        call()


def test_wrong_dimension_and_dtype_raise_public_data_errors() -> None:
    plan = G.gaussian(d=3, n=100, budget=dp.ZCDP(1), R=10.0, K=10.0)
    with pytest.raises(dp.DataError):
        plan.run({"X": np.zeros((100, 4))}, noise=dp.SeededNoise(0))
    with pytest.raises(dp.DataError):
        plan.run({"X": np.zeros((99, 3))}, noise=dp.SeededNoise(0))
    # text is not refused (its dtype can depend on its values, issue 28): every entry is missing, by the policy
    out = plan.run({"X": np.array([["a"] * 3] * 100)}, noise=dp.SeededNoise(0)).released
    assert all(np.all(np.isfinite(v)) for v in out.values())
    with pytest.raises(dp.DomainError):
        G.fit(np.zeros(10), budget=dp.ZCDP(1), mean_bound=1.0, cov_bound=2.0)


def test_nan_and_inf_rows_follow_the_declared_policy() -> None:
    rng = np.random.default_rng(2)
    X = rng.normal(size=(2000, 3))
    X[:7] = np.nan
    X[7:9] = np.inf
    X[9, 1] = -np.inf
    for plan in [G.gaussian(d=3, n=2000, budget=dp.ZCDP(1), R=10.0, K=10.0),
                 G.mean(d=3, n=2000, budget=dp.ZCDP(1), R=10.0, method="kv"),
                 G.mean(d=3, n=2000, budget=dp.ZCDP(1), R=10.0, method="pme"),
                 G.covariance(d=3, n=2000, budget=dp.ZCDP(1), K=1e3, method="pce", lower=1.0)]:
        out = plan.run({"X": X}, noise=dp.SeededNoise(3)).released
        assert all(np.all(np.isfinite(v)) for v in out.values())
    Y = rng.normal(size=(500, 1))
    Y[:3] = np.nan
    out = G.univariate_mean(500, dp.ZCDP(1), R=10.0, sigma_bounds=(0.1, 10.0)).run({"X": Y}).released
    assert np.all(np.isfinite(out["mean"]))


# ----------------------------------------------------------------------------------- neighbouring datasets


def _neighbours(X: np.ndarray, scale: float, rng: np.random.Generator,
                boundary: tuple[list[float], ...] = ()) -> list[np.ndarray]:
    """Replace-one neighbours: random rows, far outliers, NaN/inf rows, and rows on a clipping boundary."""
    out = []
    d = X.shape[1]
    for row in ([np.nan] * d, [np.inf] + [0.0] * (d - 1), [-1e300] * d, [1e6 * scale] * d,
                rng.normal(size=d) * scale, list(np.eye(d)[0] * scale), *boundary):
        for i in (0, X.shape[0] - 1, int(rng.integers(X.shape[0]))):
            Y = X.copy()
            Y[i] = row
            out.append(Y)
    return out


def _first_step_plans(n: int, d: int) -> list[tuple[dp.Plan, Any, tuple[list[float], ...]]]:
    """Single released steps with public parameters, each with a function giving its declared sensitivity
    and rows on (and just outside) its clipping boundary."""
    plans: list[tuple[dp.Plan, Any, tuple[list[float], ...]]] = []
    R = 3.0
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=d), n=n)
    state = coinpress.mvm_rec(X, N.Pack(names=coinpress.MEAN_STATE)(b.public([0.5] * d), b.public(R)), n, d, 1.0, t=1)
    clip = steps.mvm_clip(R, chi_radius(d, 0.01))
    e = np.eye(d)[0]
    plans.append((b.build(m=N.Get("centre")(state)), lambda: 2 * clip / n,
                  (list(0.5 + clip * e), list(0.5 - clip * (1 + 1e-15) * e))))
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=d), n=n)
    A = b.public(np.diag(np.arange(1.0, d + 1)))
    state = coinpress.mvc_rec(X, A, n, d, 1.0, t=1)  # the released Z is the PSD projection: 1-Lipschitz
    gamma = chi_radius(d, 0.1)
    plans.append((b.build(z=N.Get(index=2)(state)), lambda: math.sqrt(2) * gamma**2 / n,
                  (list(gamma * e), list(-gamma / d * np.eye(d)[d - 1]))))
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=d), n=n)
    c = b.public([0.25] * d)
    w = d * kv.clip_width(n, 0.1 / d)
    m = N.GaussianMech()(N.Mean()(N.Clip(box=(-w, w))(N.Precondition(matrix=b.public(np.eye(d)), center=c)(X))))
    plans.append((b.build(m=m), lambda: 2 * w * math.sqrt(d) / n, ([0.25 + w] * d, [0.25 - w] * d)))
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=d), n=n)
    hs = [N.GaussianMech()(N.Histogram(edges=kv.kv_edges(4.0, 1.0))(N.Columns(keep=[j])(X))) for j in range(d)]
    plans.append((b.build(**{f"h{j}": h for j, h in enumerate(hs)}), lambda: math.sqrt(2 * d),
                  ([0.5] * d, [-4.5] * d)))
    return plans


def _ppc_round_plan(n: int, d: int, K: float) -> tuple[dp.Plan, float]:
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=d), n=n)
    bounds = [K]
    radius = math.sqrt(K) * chi_radius(d, 0.1 / n)

    def body(x: Any, A: Any, k: Any) -> Any:
        r = N.Apply(fn=steps.pick, shape=())(N.param(x.builder, "trunc_radius", [radius]), k)
        S = N.GaussianMech()(N.SecondMoment()(N.Clip(radius=r)(N.Precondition(matrix=A)(x))))
        return N.Pack()(S, N.Apply(fn=steps.weak_ppc_update, shape=(d, d))(S, A, x.builder.public(bounds), k))

    out = N.repeat(X, b.public(np.diag([3.0] + [1.0] * (d - 1))), body, times=1)
    return b.build(s=N.Get(index=0)(out)), math.sqrt(2) * radius**2 / n


def _max_change(cert: Any, X: np.ndarray, neighbours: list[np.ndarray]) -> float:
    base = run_zero(cert, {"X": X})
    worst = 0.0
    for Y in neighbours:
        other = run_zero(cert, {"X": Y})
        diff = np.concatenate([np.ravel(np.asarray(other[k]) - np.asarray(base[k])) for k in sorted(base)])
        worst = max(worst, float(np.linalg.norm(diff)))
    return worst


@pytest.mark.parametrize("seed", [0, 1])
def test_every_released_step_respects_its_declared_sensitivity(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, d = 40, 3
    X = rng.normal(size=(n, d)) * 2.0
    X[0] = [30.0, 0.0, 0.0]  # an outlier already in D: the neighbour may remove it
    for plan, declared, boundary in _first_step_plans(n, d):
        cert = certify(plan)
        change = _max_change(cert, X, _neighbours(X, 3.0, rng, boundary))
        assert change <= declared() * (1 + 1e-9), plan.name
        assert change >= 0.2 * declared(), "the adversarial neighbours should come close to the bound"
    plan, declared_ppc = _ppc_round_plan(n, d, 9.0)
    change = _max_change(certify(plan), X, _neighbours(X, 10.0, rng))
    assert 0.2 * declared_ppc <= change <= declared_ppc * (1 + 1e-9)


def test_the_ledger_sensitivity_is_the_one_tested() -> None:
    n, d = 40, 3
    (plan, declared, _), *_ = _first_step_plans(n, d)
    mech = next(e for e in plan.check().entries if e.kind == "GaussianMech")
    assert mech.sensitivity.startswith(f"l2 = {2 / n:g}*")  # 2 * clip / n, clip released
    zero = ZeroNoise()
    execute(certify(plan), {"X": np.zeros((n, d))}, zero, NumpyBackend())
    assert zero.calls == 1
    assert declared() > 0


# ----------------------------------------------------------------------------------- accuracy (seeded)


def _maha(S: np.ndarray, Sigma: np.ndarray) -> float:
    w, V = np.linalg.eigh(Sigma)
    Si = (V / np.sqrt(w)) @ V.T
    return float(np.linalg.norm(Si @ S @ Si - np.eye(len(Sigma))))


def test_coinpress_mean_error_is_the_sampling_error_plus_the_certified_noise() -> None:
    d, n = 20, 5000
    rng = np.random.default_rng(4)
    mu = rng.normal(size=d)
    mu *= 40.0 / np.linalg.norm(mu)  # far from the prior centre, inside the prior ball
    X = rng.normal(size=(n, d)) + mu
    plan = G.mean(d=d, n=n, budget=dp.ZCDP(0.5), R=50.0, t=3)
    res = plan.run({"X": X}, noise=dp.SeededNoise(5))
    (mech,) = [k for k in res.report.execution.facts if "gaussian_mech" in k]
    sigma_t = res.report.execution.facts[mech][-1]["sigma"]
    err = np.linalg.norm(res.released["mean"] - mu)
    nonpriv = np.linalg.norm(X.mean(axis=0) - mu)
    # the last round clips nothing here, so the estimate is the empirical mean plus N(0, sigma_t^2 I):
    # its norm is at most sigma_t * chi_radius(d, 1e-3) except with probability 1e-3
    assert err <= nonpriv + sigma_t * chi_radius(d, 1e-3)
    assert np.linalg.norm(res.released["mean"] - X.mean(axis=0)) <= sigma_t * chi_radius(d, 1e-3)


@pytest.mark.parametrize("method", ["kv", "pme"])
def test_coordinate_range_estimators_find_the_mean(method: str) -> None:
    d, n = 5, 4000
    rng = np.random.default_rng(6)
    mu = rng.uniform(-30, 30, size=d)
    X = rng.normal(size=(n, d)) + mu
    res = G.mean(d=d, n=n, budget=dp.ZCDP(0.5), R=40.0, method=method).run({"X": X}, noise=dp.SeededNoise(7))
    facts = res.report.execution.facts
    last = max(facts, key=lambda k: int(k.rsplit("_", 1)[1]))  # the mean's mechanism comes last
    sigma = facts[last][0]["sigma"]
    nonpriv = np.linalg.norm(X.mean(axis=0) - mu)
    assert np.linalg.norm(res.released["mean"] - mu) <= nonpriv + sigma * chi_radius(d, 1e-3)


def test_univariate_kv_with_unknown_sigma() -> None:
    n = 4000
    rng = np.random.default_rng(8)
    X = rng.normal(size=(n, 1)) * 3.0 + 17.0
    res = G.univariate_mean(n, dp.ZCDP(0.5), R=100.0, sigma_bounds=(0.01, 100.0)).run(
        {"X": X}, noise=dp.SeededNoise(9))
    facts = res.report.execution.facts
    last = max(facts, key=lambda k: int(k.rsplit("_", 1)[1]))
    # in units of sigma-hat (at most 4 x 2 sigma): mean noise sigma_m * sigma_hat, 4.5 standard deviations
    bound = abs(X.mean() - 17.0) + 4.5 * facts[last][0]["sigma"] * 4 * 2 * 3.0
    assert abs(res.released["mean"][0] - 17.0) <= bound


def test_coinpress_covariance_is_close_to_the_non_private_error() -> None:
    d, n = 5, 20_000
    rng = np.random.default_rng(10)
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    Sigma = (Q * np.geomspace(1, 20, d)) @ Q.T
    X = rng.normal(size=(n, d)) @ np.linalg.cholesky(Sigma).T
    res = G.covariance(d=d, n=n, budget=dp.ZCDP(0.5), K=50.0).run({"X": X}, noise=dp.SeededNoise(11))
    est = res.released["covariance"]
    assert np.all(np.linalg.eigvalsh(est) >= -1e-9)
    assert _maha(est, Sigma) <= 2.0 * _maha(X.T @ X / n, Sigma)


def test_fit_recovers_mean_and_covariance() -> None:
    d, n = 4, 20_000
    rng = np.random.default_rng(12)
    mu = np.array([5.0, -3.0, 0.0, 8.0])
    Sigma = np.diag([1.0, 4.0, 9.0, 0.5])
    X = rng.normal(size=(n, d)) @ np.sqrt(Sigma) + mu
    f = G.fit(X, budget=dp.ZCDP(0.5), mean_bound=20.0, cov_bound=20.0, noise=dp.SeededNoise(13))
    assert Fraction(f.report.ledger.totals[0].rho) == Fraction(1, 2)
    w = np.sqrt(np.diag(Sigma))
    np_mean = np.linalg.norm((X.mean(axis=0) - mu) / w)
    assert np.linalg.norm((f.mean - mu) / w) <= 3.0 * np_mean + 0.05
    pairs = (X[0::2] - X[1::2]) / math.sqrt(2)
    assert _maha(f.covariance, Sigma) <= 2.0 * _maha(pairs.T @ pairs / len(pairs), Sigma)


def test_default_rounds_grow_with_the_bounds_and_are_shown_in_the_ledger() -> None:
    assert G.default_rounds(10 * math.sqrt(50), 50, 2) == 2  # the coin-press defaults at 10 sqrt(d)
    assert G.default_rounds(10 * math.sqrt(10), 10, 3) == 3
    assert G.default_rounds(80 * math.sqrt(10), 10, 3) == 4
    ledger = G.covariance(d=5, n=5000, budget=dp.ZCDP(0.5), K=1e6).check()
    (rounds,) = [e for e in ledger.entries if e.kind == "Public" and e.derivation.startswith("rounds")]
    t = G.default_rounds(1e6, 5, 3)
    assert rounds.derivation.startswith(f"rounds = {t}")
    (rec,) = [e for e in ledger.entries if e.kind == "Repeat"]
    assert rec.derivation.startswith(f"{t} rounds")


@pytest.mark.parametrize("sigma", [0.3, 3.0, 30.0])
def test_kv_sigma_range_overestimates_by_a_bounded_factor(sigma: float) -> None:
    n = 2000
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=1), n=n)
    plan = b.build(s=kv.sigma_range(X, 0.01, 100.0, 1.0))
    Y = np.random.default_rng(int(sigma * 10)).normal(size=(n, 1)) * sigma + 5.0
    s_hat = plan.run({"X": Y}, noise=dp.SeededNoise(1)).released["s"]
    assert sigma / 2 <= s_hat <= 4 * sigma  # 4 x the lower edge of the largest |y| bin (KV / Du et al.)


@pytest.mark.parametrize("centre_norm", [0.0, 1e3, 1e8])
def test_project_ball_fast_path_keeps_only_rows_exactly_inside(centre_norm: float) -> None:
    """``project_ball`` (core, used by every Clip here) takes its copy-free fast path only for rows whose
    distance to the centre is certified <= r despite rounding (checked here in exact rational arithmetic);
    the other rows get the floating-point guarantee of the exact path (computed norm <= r)."""
    from fractions import Fraction as F

    from dpflow.nodes.transforms import project_ball

    rng = np.random.default_rng(int(centre_norm) % 97)
    d, r = 7, 2.5
    c = rng.normal(size=d)
    c *= centre_norm / max(np.linalg.norm(c), 1e-300)
    u = rng.normal(size=(400, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    scale = r * (1.0 + rng.choice([-1e-9, -1e-13, -1e-16, 0.0, 1e-16, 1e-13], size=400))
    X = c + u * scale[:, None]
    Y = project_ball(X, c, r)
    fast = np.linalg.norm(X - c, axis=1) < r * (1 - 1e-9)  # well inside: the fast path keeps them
    assert 0 < fast.sum() < len(X)
    for x, y, kept in zip(X, Y, fast, strict=True):
        if kept:
            assert np.array_equal(x, y)
            assert sum((F(float(a)) - F(float(b))) ** 2 for a, b in zip(y, c, strict=True)) <= F(r) ** 2
        # every row: inside up to the rounding of adding the centre back
        assert np.linalg.norm(y - c) <= r * (1 + 1e-12) + 4 * np.finfo(float).eps * centre_norm


def test_predicted_cov_errors_laws() -> None:
    """The covariance prediction (issue 29) falls with more rows and more budget, the Mahalanobis error at
    condition K is at least the absolute error relative to K at condition 1, and noisy preconditioning rounds
    switch to the growth bound (Mahalanobis = K times absolute)."""
    base = coinpress.predicted_cov_errors(5000, 10, Fraction(1, 10), 100.0, 4)
    assert coinpress.predicted_cov_errors(50_000, 10, Fraction(1, 10), 100.0, 4)[0] < base[0]
    assert coinpress.predicted_cov_errors(5000, 10, Fraction(1, 1), 100.0, 4)[0] < base[0]
    assert base[1] >= base[0] * 0.99
    absolute, mahal = coinpress.predicted_cov_errors(5000, 50, Fraction(14, 1000), 100.0, 4)
    assert absolute > 100.0 and mahal == pytest.approx(100.0 * absolute)


def test_post_processing_steps_into_ball_and_diagonal_part() -> None:
    """The mean's projection never leaves the public ball nor moves a point inside it; the diagonal part is
    PSD whatever the input (NaN, negative variances)."""
    rng = np.random.default_rng(0)
    for _ in range(50):
        x, R = rng.normal(size=4) * 10.0 ** rng.uniform(-3, 3), float(rng.uniform(0.1, 10.0))
        y = steps.into_ball(x, R)
        assert np.linalg.norm(y) <= R * (1 + 1e-12)
        if np.linalg.norm(x) <= R:
            assert np.array_equal(y, x)
    assert np.array_equal(steps.into_ball([np.inf, 1.0], 3.0), [0.0, 0.0])
    D = steps.diagonal_part([[np.nan, 2.0], [2.0, -1.0]])
    assert np.array_equal(D, np.zeros((2, 2)))
