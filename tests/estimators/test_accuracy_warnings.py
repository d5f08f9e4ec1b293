"""Issue 14 item 16: silently bad releases.  MERR's CDF is projected to a valid CDF and warns when T is
too large for n and the budget; accuracy warnings reach ``Ledger.warnings``, ``summary()``, the CLI
and Python's ``warnings``; PCE takes a public lower bound on Sigma and rescales by it."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import dpflow as dp
from dpflow.cli import main
from dpflow.errors import AccuracyWarning
from dpflow.estimators import gaussian as G
from dpflow.estimators.discrete import (
    kolmogorov_distance,
    merr,
    merr_round_epsilon,
    merr_round_slack,
    monotone_cdf,
)
from dpflow.privacy import zcdp_rho_for_approx_dp


def _pava(y: np.ndarray) -> np.ndarray:
    """Reference least-squares isotonic fit: pool adjacent violators, one block at a time."""
    blocks: list[list[float]] = []  # [sum, count]
    for v in y.tolist():
        blocks.append([v, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += c
    return np.concatenate([np.full(int(c), s / c) for s, c in blocks])


# --------------------------------------------------------------------------- MERR: a valid CDF


def test_monotone_cdf_is_isotonic_regression_then_clip() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        m = int(rng.integers(2, 40))
        F = np.concatenate(([0.0], rng.normal(0.5, 0.8, m - 2), [1.0]))
        P = np.arange(-1, m - 1, dtype=np.int64)
        P2, G2 = monotone_cdf((P, F))
        assert np.array_equal(P2, P)
        np.testing.assert_allclose(G2, np.clip(_pava(F), 0.0, 1.0), atol=1e-12)
        assert G2[0] == 0.0 and G2[-1] == 1.0 and np.all(np.diff(G2) >= 0)
        # a sup-norm contraction towards any valid CDF at the knots
        g = np.sort(rng.random(m))
        g[0], g[-1] = 0.0, 1.0
        assert np.max(np.abs(G2 - g)) <= np.max(np.abs(F - g)) + 1e-12
    assert monotone_cdf((np.array([-1, 3, 9]), np.array([0.0, np.nan, 1.0])))[1].tolist() == [0.0, 0.0, 1.0]


def test_merr_at_small_n_eps_releases_a_valid_cdf() -> None:
    # the case: n * eps small, T = 20; the unprojected CDF ran from -0.07 to 1.61 here
    N_, n = 1000, 1000
    x = np.random.default_rng(0).integers(0, N_, n)
    with pytest.warns(AccuracyWarning):
        plan = merr(N=N_, n=n, budget=dp.PureDP(1.0), T=20)
    for seed in range(3):
        P, F = plan.run({"X": x}, noise=dp.SeededNoise(seed)).released["cdf"]
        assert np.all(np.diff(P) > 0) and int(P[0]) == -1 and int(P[-1]) == N_ - 1
        assert np.all(np.diff(F) >= 0) and F[0] == 0.0 and F[-1] == 1.0
    assert plan.check().entries[-1].kind == "Apply"  # the projection is post-processing: no cost
    assert dp.Plan.from_json(plan.to_json()).hash == plan.hash


def test_merr_projection_keeps_a_good_estimate_good() -> None:
    N_, n = 10**6, 50_000
    x = np.random.default_rng(1).integers(0, N_, n)
    P, F = merr(N=N_, n=n, budget=dp.PureDP(1.0), T=6).run({"X": x}, noise=dp.SeededNoise(2)).released["cdf"]
    assert kolmogorov_distance((P, F), lambda t: np.clip((t + 1) / N_, 0, 1)) < 0.05


# --------------------------------------------------------------------------- MERR: the warning rule


def test_merr_round_epsilon_per_budget() -> None:
    assert merr_round_epsilon(dp.PureDP(1.0), 20) == 1.0 / 40
    assert merr_round_epsilon(dp.ZCDP(0.5), 20) == math.sqrt(0.5 / 20)  # rho / (2T) each, eps = sqrt(2 rho_t)
    cks = float(zcdp_rho_for_approx_dp(1.0, 1e-6))
    assert merr_round_epsilon(dp.ApproxDP(1.0, 1e-6), 1) == math.sqrt(cks)  # below the basic 1/2
    assert merr_round_epsilon(dp.ApproxDP(1.0, 1e-6), 1000) == 1.0 / 2000  # below the CKS share


def test_merr_round_slack_formula() -> None:
    # (2 / (n eps_t)) ln(2^(L+1) / 0.1), L = ceil(log2 N)
    s = merr_round_slack(1000, 1000, dp.PureDP(1.0), 20)
    assert math.isclose(s, 2 / (1000 / 40) * math.log(2**11 / 0.1), rel_tol=1e-12)
    assert math.isclose(merr_round_slack(1024, 1000, dp.PureDP(1.0), 20), s, rel_tol=1e-12)  # L = 10
    assert math.isclose(merr_round_slack(1025, 1000, dp.PureDP(1.0), 20),
                        2 / (1000 / 40) * math.log(2**12 / 0.1), rel_tol=1e-12)  # L = 11


def _warnings_of(plan: dp.Plan) -> tuple[str, ...]:
    return plan.check().warnings


def test_merr_warns_exactly_when_the_round_slack_reaches_one_half() -> None:
    # slack(T) = 4 T ln(20480) / 1000 = 0.0397 T: T = 12 gives 0.477, T = 13 gives 0.516
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = merr(N=1000, n=1000, budget=dp.PureDP(1.0), T=12)
    assert _warnings_of(quiet) == ()
    with pytest.warns(AccuracyWarning, match=r"T=13 rounds is too many .* use T <= 12"):
        loud = merr(N=1000, n=1000, budget=dp.PureDP(1.0), T=13)
    (w,) = _warnings_of(loud)
    assert "within 0.516" in w and "use T <= 12" in w
    assert f"warning: {w}" in loud.check().summary()
    with pytest.warns(AccuracyWarning, match="even T = 1 is too many"):
        merr(N=1000, n=20, budget=dp.PureDP(0.1), T=3)


# --------------------------------------------------------------------------- warnings reach every surface


def test_gaussian_fit_with_three_rows_warns_in_python_summary_and_report() -> None:
    X = np.random.default_rng(0).normal(size=(3, 2))
    with pytest.warns(AccuracyWarning) as rec:
        f = G.fit(X, budget=dp.ZCDP(0.5), mean_bound=10.0, cov_bound=30.0, noise=dp.SeededNoise(0))
    texts = [str(r.message) for r in rec if r.category is AccuracyWarning]
    assert any("only 1 (pair) rows for d=2" in t for t in texts)
    assert any("n=3 is too small" in t for t in texts)  # the whitened mean's ball does not shrink
    assert all(r.filename == __file__ for r in rec)  # points at the caller, not inside dpflow
    assert tuple(texts) == f.report.ledger.warnings
    summary = f.report.summary()
    for t in texts:
        assert f"warning: {t}" in summary
    assert "NOT FOR RELEASE" in summary
    assert all(t in f.report.to_markdown() for t in texts)
    # the warning is part of the plan: a plan read back from JSON still carries it
    assert dp.Plan.from_json(f.plan.to_json()).check().warnings == f.report.ledger.warnings


def test_a_plan_without_problems_has_no_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan = G.gaussian(d=3, n=4000, budget=dp.ZCDP(0.5), R=10.0, K=30.0)
    assert plan.check().warnings == ()


PLAN_FILE = """
import dpflow as dp
from dpflow.estimators.discrete import merr
plan = merr(N=1000, n=1000, budget=dp.PureDP(1.0), T=20)
"""


def test_cli_check_and_run_print_the_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "merr_plan.py"
    path.write_text(PLAN_FILE)
    with pytest.warns(AccuracyWarning):
        assert main(["check", str(path)]) == 0
    assert "warning: merr: T=20 rounds is too many for n=1000" in capsys.readouterr().out
    np.save(tmp_path / "x.npy", np.random.default_rng(0).integers(0, 1000, 1000))
    with pytest.warns(AccuracyWarning):
        assert main(["run", str(path), "--data", f"X={tmp_path / 'x.npy'}", "--report", str(tmp_path / "rep"),
                     "--seed", "1"]) == 0
    assert "warning: merr: T=20 rounds is too many" in capsys.readouterr().out
    assert "T=20 rounds is too many" in (tmp_path / "rep" / "report.md").read_text()


# --------------------------------------------------------------------------- PCE: a stated lower bound


def test_pce_requires_a_public_lower_bound() -> None:
    with pytest.raises(dp.DomainError, match="lower"):
        G.covariance(d=3, n=1000, budget=dp.ZCDP(1), K=100.0, method="pce")
    for bad in (0.0, -1.0, math.inf, math.nan, 200.0):  # 200 > K
        with pytest.raises(dp.DomainError):
            G.covariance(d=3, n=1000, budget=dp.ZCDP(1), K=100.0, method="pce", lower=bad)
    with pytest.raises(dp.DomainError, match="only by method='pce'"):
        G.covariance(d=3, n=1000, budget=dp.ZCDP(1), K=100.0, lower=1.0)
    # K below 1 is fine once the floor is stated
    plan = G.covariance(d=3, n=1000, budget=dp.ZCDP(1), K=0.5, method="pce", lower=0.01)
    assert plan.check().totals[0].rho == Fraction(1)


def test_pce_with_lower_is_pce_on_rescaled_rows_scaled_back() -> None:
    # covariance(K, lower) on X == lower * covariance(K / lower, lower=1) on X / sqrt(lower), same noise
    d, n, lower = 3, 4000, 0.04
    X = np.random.default_rng(3).normal(size=(n, d)) * 0.3
    a = G.covariance(d=d, n=n, budget=dp.ZCDP(1), K=4.0, method="pce", lower=lower)
    b = G.covariance(d=d, n=n, budget=dp.ZCDP(1), K=4.0 / lower, method="pce", lower=1.0)
    ca = a.run({"X": X}, noise=dp.SeededNoise(7)).released["covariance"]
    cb = b.run({"X": X / math.sqrt(lower)}, noise=dp.SeededNoise(7)).released["covariance"]
    np.testing.assert_allclose(ca, lower * cb, rtol=1e-9, atol=1e-12)
    scale = [e for e in a.check().entries if e.derivation.startswith("scale = ")]
    assert scale and "lower=0.04" in scale[0].derivation


def test_pce_error_on_small_covariance_is_close_to_non_private() -> None:
    # Sigma = 1e-4 I: with lower = 1 (the old implicit assumption) the error was ~8000x the non-private
    # one; with the stated lower bound it is within a small factor
    d, n, s2 = 5, 20_000, 1e-4
    X = np.random.default_rng(0).normal(size=(n, d)) * math.sqrt(s2)
    non_private = np.linalg.norm(X.T @ X / n - s2 * np.eye(d))
    plan = G.covariance(d=d, n=n, budget=dp.ZCDP(1.0), K=100 * s2, method="pce", lower=s2)
    est = plan.run({"X": X}, noise=dp.SeededNoise(2)).released["covariance"]
    assert np.linalg.norm(est - s2 * np.eye(d)) < 4 * non_private
