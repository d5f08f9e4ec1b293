"""Issue 12, accuracy before data: ``Ledger.accuracy(alpha)`` gives every release's per-coordinate (1 - alpha)
noise half-width from the certified calibration (Gaussian, Laplace, discrete Gaussian and discrete Laplace on
the release lattice); ``dpflow check`` prints it and the Markdown report shows it; a slow test checks the
coverage empirically under continuous and exact seeded noise."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import dpflow as dp
from dpflow import nodes as N
from dpflow.cli import main
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.planner.accuracy import (
    NoiseCalibration,
    accuracy_rows,
    discrete_gaussian_quantile,
    discrete_laplace_quantile,
    gaussian_half_width,
    laplace_half_width,
    realised_rows,
)
from dpflow.planner.certify import certify
from dpflow.planner.ledger import Ledger
from dpflow.privacy.rounding import up
from dpflow.report.report import Report

ROOT = Path(__file__).resolve().parents[2]
ALPHAS = (0.01, 0.05, 0.2, 0.5)


# --------------------------------------------------------------------------- the quantile rules


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("scale", [1e-3, 0.7, 1.0, 25.0])
def test_continuous_half_widths_are_the_two_sided_quantiles(scale: float, alpha: float) -> None:
    g = stats.norm.isf(alpha / 2, scale=scale)  # P(|N(0, sigma^2)| > g) = alpha
    lap = stats.laplace.isf(alpha / 2, scale=scale)  # P(|Laplace(b)| > t) = alpha, t = b ln(1/alpha)
    assert g <= gaussian_half_width(scale, alpha) <= g * (1 + 1e-11)
    assert lap <= laplace_half_width(scale, alpha) <= lap * (1 + 1e-11)


def _tail(weights_of: object, s: float, k: int) -> float:
    """P(|Z| > k) by exact summation of the unnormalised mass ``weights_of(j)`` over |j| <= 100 s + 50."""
    j = np.arange(-int(100 * s) - 50, int(100 * s) + 51)
    w = weights_of(j.astype(float))  # type: ignore[operator]
    return float(w[np.abs(j) > k].sum() / w.sum())


def _dg(s: float) -> object:
    return lambda j: np.exp(-j * j / (2 * s * s))


def _dl(t: float) -> object:
    return lambda j: np.exp(-np.abs(j) / t)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("s", [0.3, 0.8, 1.0, 2.5, 7.0, 40.0, 300.0])
def test_discrete_quantiles_against_exact_sums(s: float, alpha: float) -> None:
    # discrete Laplace: the exact quantile (smallest k with P(|Z| > k) <= alpha)
    k = discrete_laplace_quantile(s, alpha)
    assert _tail(_dl(s), s, k) <= alpha and (k == 0 or _tail(_dl(s), s, k - 1) > alpha)
    # discrete Gaussian: a bound, never below the exact quantile and at most one above it
    k = discrete_gaussian_quantile(s, alpha)
    assert _tail(_dg(s), s, k) <= alpha
    assert k <= 1 or _tail(_dg(s), s, k - 2) > alpha


def test_discrete_gaussian_bound_is_the_continuous_quantile_rounded_up() -> None:
    assert discrete_gaussian_quantile(3.0, 0.05) == math.ceil(3.0 * stats.norm.isf(0.025)) == 6
    s = 2.0**40 / 3  # about the lattice ratio of a release: k is ceil(s z) up to the outward rounding
    k, exact = discrete_gaussian_quantile(s, 0.05), s * stats.norm.isf(0.025)
    assert math.ceil(exact) <= k <= math.ceil(exact * (1 + 3e-12))


def test_alpha_must_be_a_probability() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    ledger = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2), n=10))))).check()
    for bad in (0.0, 1.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match="alpha must be strictly between 0 and 1"):
            ledger.accuracy(bad)


# --------------------------------------------------------------------------- ledger rows


def _two_mechs(budget: object = None) -> dp.Plan:
    b = dp.PlanBuilder(budget=budget or dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=4), n=100)
    g = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))
    lap = N.LaplaceMech()(N.Mean()(N.Clip(box=(-1, 1))(X)))
    return b.build(g=g, l=lap)


def test_rows_use_the_certified_scale_and_the_run_records_the_same() -> None:
    cert = certify(_two_mechs())
    g, lap = cert.ledger.accuracy(0.05)
    assert g.kind == "GaussianMech" and not g.per_unit and g.rounds == "" and g.entries == 4
    assert cert.allocations[g.node].share == Fraction(1, 4)
    assert g.half_width == pytest.approx(stats.norm.isf(0.025) * 0.02 / math.sqrt(0.5), rel=1e-11)
    # Laplace on l1 = 2 * 4 / 100 at epsilon = sqrt(2 * 1/4): b ln(1/alpha)
    assert lap.half_width == pytest.approx(0.08 / math.sqrt(0.5) * math.log(20), rel=1e-11)
    # the realised scales of a run (continuous and exact sources) are the calibration's
    cal = {c.node: c for c in cert.ledger.noise_calibrations}
    data = {"X": np.zeros((100, 4))}
    cont = execute(cert, data, dp.SeededNoise(0), NumpyBackend()).facts
    exact = execute(cert, data, dp.SeededNoise(0, exact=True), NumpyBackend()).facts
    assert cont[g.node][0]["sigma"] == cal[g.node].scale and cont[lap.node][0]["scale"] == cal[lap.node].scale
    assert exact[g.node][0]["sigma"] == cal[g.node].lattice_scale
    assert exact[g.node][1]["lattice"]["step"] == cal[g.node].lattice_step
    assert exact[lap.node][0]["scale"] == cal[lap.node].lattice_scale
    assert exact[lap.node][1]["lattice"]["step"] == cal[lap.node].lattice_step
    # exact sources: (k + 1/2) steps, k the discrete quantile at scale / step
    for row in (g, lap):
        c = cal[row.node]
        assert c.lattice_step is not None and c.lattice_scale is not None
        quantile = discrete_gaussian_quantile if c.family == "gaussian" else discrete_laplace_quantile
        k = quantile(c.lattice_scale / c.lattice_step, 0.05)
        assert row.exact_half_width == up((k + 0.5) * c.lattice_step)  # exactly: half a step is 1e-13 relative
        assert row.exact_half_width is not None and row.half_width is not None
        assert row.exact_half_width >= row.half_width  # widened sensitivity, rounding and the bound


def test_forced_continuous_gaussian_has_no_lattice_row() -> None:
    """An all-Gaussian plan under an (epsilon, delta) budget is certified by the exact Gaussian-DP profile,
    which forces continuous noise on every source: no lattice half-width."""
    ledger = _two_mechs(dp.ApproxDP(1.0, 1e-6)).check(exact_noise=False)
    b = dp.PlanBuilder(budget=dp.ApproxDP(1.0, 1e-6))
    X = b.source("X", dp.Vectors(d=4), n=100)
    (g,) = b.build(g=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))).check(exact_noise=False).accuracy(0.05)
    assert g.exact_half_width is None and g.note == "continuous noise on every source"
    # with a Laplace the plan is certified through the PLD (issue 16), which also forces continuous Gaussian
    # noise: only the Laplace release has a lattice row
    gauss, lap = ledger.accuracy(0.05)
    assert gauss.exact_half_width is None and lap.exact_half_width is not None


def test_half_widths_scale_with_alpha_as_the_quantiles_do() -> None:
    ledger = _two_mechs().check(exact_noise=False)
    g1, l1 = ledger.accuracy(0.05)
    g2, l2 = ledger.accuracy(0.01)
    assert g2.half_width / g1.half_width == pytest.approx(stats.norm.isf(0.005) / stats.norm.isf(0.025))
    assert l2.half_width / l1.half_width == pytest.approx(math.log(100) / math.log(20))


def test_symbolic_sensitivity_gives_the_half_width_per_unit() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=3), n=1000)
    r = N.Quantile(q=0.9)(N.OrderStatistics(upper=2.0)(N.Magnitudes(of="rows")(X)))
    m = N.GaussianMech()(N.Mean()(N.Clip(radius=r)(X)))
    cert = certify(b.build(r=r, m=m))
    q, g = cert.ledger.accuracy(0.05)
    assert q.kind == "Quantile" and q.half_width is None and "not an additive-noise release" in q.note
    assert g.per_unit and g.sensitivity == "0.002*quantile_3"
    alloc = cert.allocations[g.node]
    unit = N.GaussianMech().noise_multiplier(alloc.share, alloc.mode)
    assert g.half_width == pytest.approx(unit * stats.norm.isf(0.025), rel=1e-11)
    assert g.exact_half_width is None and "known after data" in g.describe()
    # after a run: the realised scale is the per-unit scale times the realised sensitivity
    rows = np.random.default_rng(0).normal(size=(1000, 3))
    ex = execute(cert, {"X": rows}, dp.SeededNoise(0), NumpyBackend())
    radius = float(ex.released["r"])
    realised = ex.facts[g.node][0]["sigma"]
    assert realised == pytest.approx(unit * 2 * max(radius, 0.0) / 1000, rel=1e-9)
    (after,) = realised_rows(cert.ledger.noise_calibrations, ex.facts, 0.05)
    assert after.node == g.node and after.half_width == gaussian_half_width(realised, 0.05)
    report = Report(cert.ledger, ex).to_markdown()
    assert "Realised noise intervals" in report and f"+/- {after.half_width:.6g} (realised)" in report
    # exact sources: the realised lattice release, (k + 1/2) steps at the recorded scale
    ex = execute(cert, {"X": rows}, dp.SeededNoise(0, exact=True), NumpyBackend())
    (after,) = realised_rows(cert.ledger.noise_calibrations, ex.facts, 0.05)
    sigma, step = ex.facts[g.node][0]["sigma"], ex.facts[g.node][1]["lattice"]["step"]
    assert after.half_width == up((discrete_gaussian_quantile(sigma / step, 0.05) + 0.5) * step)


def test_realised_rows_take_the_largest_round() -> None:
    c = NoiseCalibration("m", "LaplaceMech", "laplace", scale=1.0, per_unit=True, sensitivity="r")
    (row,) = realised_rows([c], {"m": [{"scale": 1.0}, {"scale": 3.0}, {"scale": 2.0}]}, 0.1)
    assert row.half_width == laplace_half_width(3.0, 0.1) and "3 invocations, the largest" in row.note
    assert realised_rows([NoiseCalibration("q", "Quantile", "none")], {"q": [{"scale": 1.0}]}) == ()


def test_peel_and_loops_get_one_row_per_round_weight() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=6), n=100)
    top = N.Peel(s=2)(N.Mean()(N.Clip(box=(-1, 1))(X)))
    body = lambda rows, state, k: N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(rows)))  # noqa: E731
    out = N.repeat(X, b.public([0.0] * 6), body, times=3, round_weights=[1.0, 1.0, 3.0])
    cert = certify(b.build(top=top, u=out))
    rows = cert.ledger.accuracy(0.05)
    peel = [r for r in rows if r.kind == "Peel"][0]
    assert peel.noise.startswith("Laplace") and "selection" in peel.note
    assert peel.exact_half_width == pytest.approx(peel.half_width, rel=1e-3)  # exact sources: lattice Peel
    cal = [c for c in cert.ledger.noise_calibrations if c.kind == "Peel"][0]
    assert peel.half_width == pytest.approx(cal.scale * math.log(20), rel=1e-11)
    loop = [r for r in rows if r.kind == "GaussianMech"]
    assert [r.rounds for r in loop] == ["rounds 0, 1 of repeat_5", "round 2 of repeat_5"]
    shares = [cert.invocations.at(loop[0].node, (c,)).share for c in (0, 1)]
    assert shares[1] == 3 * shares[0]
    assert loop[0].half_width == pytest.approx(loop[1].half_width * math.sqrt(3), rel=1e-11)


def test_calibrations_round_trip_through_json() -> None:
    ledger = _two_mechs().check()
    back = Ledger.from_json(ledger.to_json())
    assert back == ledger and back.accuracy(0.1) == ledger.accuracy(0.1)
    assert json.loads(ledger.to_json())["noise_calibrations"][0]["scale"] == ledger.noise_calibrations[0].scale
    row = accuracy_rows([NoiseCalibration("m", "DyadicExpMech", "none", note="x")])[0]
    assert row.half_width is None and row.describe() == "m: no additive noise; x"


# --------------------------------------------------------------------------- surfaces


def test_check_prints_the_accuracy_lines(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(ROOT / "examples" / "clipped_mean_plan.py")]) == 0
    out = capsys.readouterr().out.splitlines()
    head = [i for i, line in enumerate(out) if line.startswith("accuracy before data")]
    assert head and head[0] > 0 and out[head[0] + 1].strip().startswith("gaussian_mech_")
    assert "per coordinate at 95%" in out[head[0] + 1] and "known after data" in out[head[0] + 1]  # n from data
    assert main(["check", str(ROOT / "examples" / "clipped_mean_plan.py"), "--alpha", "0.1"]) == 0
    assert "per coordinate at 90%" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main(["check", str(ROOT / "examples" / "clipped_mean_plan.py"), "--alpha", "1.5"])
    assert e.value.code == 2


def test_markdown_report_has_an_accuracy_section() -> None:
    res = _two_mechs().run({"X": np.zeros((100, 4))}, noise=dp.SeededNoise(0))
    md = res.report.to_markdown()
    assert "### Accuracy (95% intervals of the noise, per coordinate)" in md
    g = res.report.ledger.accuracy(0.05)[0]
    assert f"| {g.node} | - | Gaussian sigma = " in md and f"{g.half_width:.6g}" in md


# --------------------------------------------------------------------------- coverage


@pytest.mark.slow
@pytest.mark.parametrize("exact", [False, True], ids=["continuous", "exact"])
def test_empirical_coverage_matches_one_minus_alpha(exact: bool) -> None:
    """2,000 runs of a Gaussian and a Laplace release of a mean of zeros (statistic exactly 0), 4 coordinates
    each: the fraction of coordinates inside the half-width is within 4 binomial standard errors of 1 - alpha
    (the discrete bounds are above the true quantiles by about 2^-40 relative: not measurable)."""
    cert = certify(_two_mechs())
    alpha, runs = 0.1, 2000
    rows = {r.node: r for r in cert.ledger.accuracy(alpha)}
    data = {"X": np.zeros((100, 4))}
    inside: dict[str, int] = dict.fromkeys(rows, 0)
    for seed in range(runs):
        ex = execute(cert, data, dp.SeededNoise(seed, exact=exact), NumpyBackend())
        for name, node in (("g", "gaussian_mech_3"), ("l", "laplace_mech_6")):
            hw = rows[node].exact_half_width if exact else rows[node].half_width
            assert hw is not None
            inside[node] += int(np.sum(np.abs(ex.released[name]) <= hw))
    total = 4 * runs
    se = math.sqrt(alpha * (1 - alpha) / total)
    for node, count in inside.items():
        assert abs(count / total - (1 - alpha)) <= 4 * se, (node, count / total)


def test_accuracy_rows_and_runs_read_the_same_capabilities() -> None:
    """The family and the lattice choice come from the mechanism (``noise_family``, ``takes_lattice``), not
    from kind names: a Laplace mechanism that declines the lattice is ledgered and drawn as continuous."""
    import attrs as _attrs

    from dpflow.nodes.types import Allocation, StatT

    assert (N.GaussianMech.noise_family, N.LaplaceMech.noise_family, N.Peel.noise_family) == (
        "gaussian", "laplace", "laplace")
    assert N.Quantile.noise_family is None and N.Peel.accuracy_note

    @_attrs.frozen(kw_only=True)
    class ContinuousLaplace(N.LaplaceMech):
        def takes_lattice(self, stat: StatT, alloc: Allocation) -> bool:
            return False

    b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    X = b.source("X", dp.Vectors(d=2), n=100)
    mean = N.Mean()(N.Clip(radius=1.0)(X))
    plan = b.build(a=N.LaplaceMech()(mean), c=ContinuousLaplace()(mean))
    rows = {r.node: r for r in plan.check().accuracy(0.05)}
    assert len(rows) == 2
    lat, cont = (rows[k] for k in sorted(rows))
    assert lat.exact_half_width is not None and cont.exact_half_width is None
    facts = plan.run({"X": np.zeros((100, 2))}, noise=dp.SeededNoise(0, exact=True)).report.execution.facts
    assert sum("lattice" in f for fs in facts.values() for f in fs) == 1
