"""Exact-noise releases of counts and order statistics (issue 14 item 8), and end-to-end checks of the
exponential-mechanism nodes against brute-force probabilities (issue 14 item 10).

Under an exact source (``SecureNoise``, ``SeededNoise(exact=True)``) LaplaceMech and GaussianMech over
``OrdinalCounts`` (the Laplace histogram and t-histogram), ``IntervalCounts`` (MERR's weights) and
``OrderStatistics`` must take the lattice path their ledger entries describe: integer noise from the
exact discrete sampler at the recorded scale, releases on the 2^-k lattice, and the float-error slack
of the statistic (zero for exact counts and sorted values, about u for counts over n).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from conftest import ExactZeroNoise
from scipy import stats

import dpflow as dp
from dpflow import nodes as N
from dpflow.estimators.discrete import laplace_histogram, merr, t_histogram
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.nodes.floaterr import FloatError, U
from dpflow.planner.certify import certify


class RecordingNoise(dp.SeededNoise):
    """An exact seeded source that records every draw: (sampler, parameter, shape)."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed, exact=True)
        self.calls: list[tuple[str, Any, tuple[int, ...]]] = []

    def normal(self, sigma: float, shape: tuple[int, ...]) -> np.ndarray:
        self.calls.append(("normal", sigma, shape))
        return super().normal(sigma, shape)

    def laplace(self, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        self.calls.append(("laplace", scale, shape))
        return super().laplace(scale, shape)

    def discrete_gaussian(self, sigma2: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        self.calls.append(("discrete_gaussian", sigma2, shape))
        return super().discrete_gaussian(sigma2, shape)

    def discrete_laplace(self, scale: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        self.calls.append(("discrete_laplace", scale, shape))
        return super().discrete_laplace(scale, shape)


RNG = np.random.default_rng(14)


def _order_stats(mech: str) -> tuple[dp.Plan, dict[str, Any]]:
    b = dp.PlanBuilder(budget=dp.PureDP(1.0) if mech == "laplace" else dp.ZCDP(0.5))
    X = b.source("X", dp.Reals(), n=7)
    z = N.OrderStatistics(lower=-1.0, upper=3.0)(X)
    m = N.LaplaceMech()(z) if mech == "laplace" else N.GaussianMech()(z)
    return b.build(z=m), {"X": RNG.normal(size=(7, 1)) * 2}


def _raw_counts() -> tuple[dp.Plan, dict[str, Any]]:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Ordinal(N=2**40), n=30)
    c = N.LaplaceMech()(N.OrdinalCounts(edges=[0, 5, 2**20, 2**40])(X))
    w = N.GaussianMech()(N.IntervalCounts(interval=b.public([3, 2**30]), normalize=False)(X))
    return b.build(c=c, w=w), {"X": RNG.integers(0, 2**40, 30)}


PLANS: dict[str, Callable[[], tuple[dp.Plan, dict[str, Any]]]] = {
    "laplace_histogram": lambda: (laplace_histogram(8, 49, dp.PureDP(1.0)), {"X": RNG.integers(0, 8, 49)}),
    "t_histogram": lambda: (t_histogram([0, 3, 2**40, 2**62], 49, dp.PureDP(1.0)),
                            {"X": RNG.integers(0, 2**41, 49)}),
    "merr": lambda: (merr(N=64, n=49, budget=dp.PureDP(1.0), T=2), {"X": RNG.integers(0, 64, 49)}),
    "order_stats_laplace": lambda: _order_stats("laplace"),
    "order_stats_gaussian": lambda: _order_stats("gaussian"),
    "raw_counts": _raw_counts,
}
NORMALISED = {"laplace_histogram", "t_histogram", "merr"}


def _mechanisms(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if e["kind"] in ("LaplaceMech", "GaussianMech")]


def _ledger_scale(text: str) -> float:
    """The numeric scale the ledger states: the last ``= value`` before the ';'."""
    return float(text.split(";")[0].rsplit("=", 1)[1])


@pytest.mark.parametrize("name", sorted(PLANS))
def test_exact_sources_take_the_lattice_path_the_ledger_describes(name: str) -> None:
    plan, data = PLANS[name]()
    noise = RecordingNoise(3)
    res = plan.run(data, noise=noise)
    entries = res.report.to_data()["ledger"]["entries"]
    facts = res.report.execution.facts
    mechs = _mechanisms(entries)
    assert mechs
    drawn = [c for c in noise.calls if c[0].startswith("discrete_")]
    assert len(drawn) == len(mechs)                       # one exact draw per Laplace/Gaussian mechanism
    assert not [c for c in noise.calls if c[0] == "normal"]
    if name != "merr":                                    # MERR's selector (Gumbel-max) is the only other draw
        assert not [c for c in noise.calls if c[0] == "laplace"]
    for e in mechs:
        gauss = e["kind"] == "GaussianMech"
        key, sampler = ("sigma", "discrete_gaussian") if gauss else ("scale", "discrete_laplace")
        f = {k: v for d in facts[e["node"]] for k, v in d.items()}
        assert "discrete " + ("Gaussian" if gauss else "Laplace") + " on a 2^-k lattice" in e["noise"]
        scale, lat = f[key], f["lattice"]
        step = lat["step"]
        # the drawn integer noise has exactly the recorded scale on the recorded lattice
        ratio = Fraction(scale) / Fraction(step)
        assert any(c[0] == sampler and c[1] == (ratio * ratio if gauss else ratio) for c in drawn)
        # the scale drawn is the ledger's, widened only by the lattice and the float-error slack
        stated = _ledger_scale(e["noise"])
        assert stated * (1 - 1e-5) <= scale <= stated * (1 + 1e-5)
        if name in NORMALISED:                            # counts over n: one rounded division, ~u per entry
            assert 0.0 < lat["float_slack"] < 16 * U
        else:                                             # exact counts and sorted values: no float error
            assert lat["float_slack"] == 0.0
    if name in ("order_stats_laplace", "order_stats_gaussian", "raw_counts"):
        for out_name, node in plan.outputs:
            step = next(d["lattice"]["step"] for d in facts[node] if "lattice" in d)
            v = np.asarray(res.released[out_name], dtype=float)
            assert np.all(np.rint(v / step) * step == v)  # released on the lattice


@pytest.mark.parametrize("name", ["laplace_histogram", "merr", "order_stats_laplace", "order_stats_gaussian"])
def test_secure_noise_releases_counts_and_order_statistics_on_the_lattice(name: str) -> None:
    plan, data = PLANS[name]()
    res = plan.run(data)                                  # SecureNoise is the default
    assert res.report.to_data()["run"]["seeded"] is False
    for e in _mechanisms(res.report.to_data()["ledger"]["entries"]):
        assert any("lattice" in d for d in res.report.execution.facts[e["node"]])


def test_normalised_count_float_error_covers_the_computed_division() -> None:
    n, m = 49, 6
    counts = np.bincount(RNG.integers(0, m, n), minlength=m).astype(float)
    err = sum(abs(Fraction(float(v)) - Fraction(int(c), n)) for v, c in zip(counts / n, counts, strict=True))
    l2, l1 = FloatError("freq", dp.Vectors(d=1), dp.Sym.const(float(n))).bound({}, m)
    assert 0 < err <= l2 <= l1


def _neighbour_rows(x: np.ndarray) -> list[np.ndarray]:
    out = []
    for i, v in itertools.product(range(len(x)), [np.nan, np.inf, -np.inf, 1e300, -1e300, 3.0, -1.0, 0.5]):
        y = x.copy()
        y[i] = v
        out.append(y)
    return out


@pytest.mark.parametrize("what", ["ordinal", "interval", "order"])
def test_lattice_releases_of_neighbours_move_at_most_the_widened_sensitivity(what: str) -> None:
    b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    if what == "order":
        X = b.source("X", dp.Reals(), n=7)
        stat = N.OrderStatistics(lower=-1.0, upper=3.0)(X)
        x = RNG.normal(size=(7, 1))
    else:
        X = b.source("X", dp.Ordinal(N=8), n=7)
        stat = (N.OrdinalCounts(edges=range(9), normalize=True)(X) if what == "ordinal"
                else N.IntervalCounts(interval=b.public([2, 5]))(X))
        x = RNG.integers(0, 8, (7, 1)).astype(float)
    cert = certify(b.build(r=N.LaplaceMech()(stat)))
    base = execute(cert, {"X": x}, ExactZeroNoise(), NumpyBackend())
    for y in _neighbour_rows(x):
        ex = execute(cert, {"X": y}, ExactZeroNoise(), NumpyBackend())
        mech = next(k for k in ex.facts if k.startswith("laplace_mech"))
        sens = next(d["lattice"]["sensitivity"] for d in ex.facts[mech] if "lattice" in d)
        assert np.abs(np.asarray(ex.released["r"]) - np.asarray(base.released["r"])).sum() <= sens


# --------------------------------------------------------------------------- exponential mechanisms end to end


def _dyadic_probs(x: np.ndarray, N_: int, eps: float) -> dict[tuple[int, int], float]:
    """Brute force: every dyadic interval [a, b] of [0, N) (N a power of two, levels j < L) with
    probability proportional to exp(eps |n |J| / N - c(J)| / 2) (score sensitivity 1)."""
    L = (N_ - 1).bit_length()
    w = {}
    for j in range(L):
        for q in range(2 ** (L - j)):
            a, b = q << j, ((q + 1) << j) - 1
            c = int(np.count_nonzero((x >= a) & (x <= b)))
            w[(a, b)] = math.exp(eps * abs(len(x) * (b - a + 1) / N_ - c) / 2)
    z = sum(w.values())
    return {k: v / z for k, v in w.items()}


def _chi2_ok(counts: np.ndarray, p: np.ndarray) -> bool:
    draws = counts.sum()
    chi2 = float(((counts - draws * p) ** 2 / (draws * p)).sum())
    return chi2 < float(stats.chi2.ppf(0.999, df=len(p) - 1))


def test_dyadic_exp_mech_end_to_end_matches_brute_force_and_is_eps_dp() -> None:
    """The node's output distribution is the certified exp(eps q / (2 Delta)) one (a doubled exponent
    gives chi^2 ~ 160 against a 0.999 quantile of ~35), and that rule is eps-DP on every neighbour pair."""
    N_, n, eps = 8, 3, 1.5
    b = dp.PlanBuilder(budget=dp.PureDP(eps))
    X = b.source("X", dp.Ordinal(N=N_), n=n)
    cert = certify(b.build(J=N.DyadicExpMech()(N.DyadicCounts(N=N_)(X))))
    entry = next(e for e in cert.ledger.to_data()["entries"] if e["kind"] == "DyadicExpMech")
    assert entry["cost"] == "epsilon=1.5 pure DP"
    x = np.array([1, 1, 6])
    p = _dyadic_probs(x, N_, eps)
    keys = sorted(p)
    noise, backend = dp.SeededNoise(0), NumpyBackend()
    draws = 1000
    seen = {k: 0 for k in keys}
    for _ in range(draws):
        ex = execute(cert, {"X": x}, noise, backend)
        a, bb = (int(v) for v in ex.released["J"])
        seen[(a, bb)] += 1                                # KeyError: not a dyadic interval of a level j < L
    assert ex.facts["dyadic_exp_mech_2"] == [{"epsilon": eps}]
    assert _chi2_ok(np.array([seen[k] for k in keys]), np.array([p[k] for k in keys]))
    # the certified rule on every replace-one neighbour pair of [8]^3: ratio within exp(eps)
    logp = {xs: np.log([_dyadic_probs(np.array(xs), N_, eps)[k] for k in keys])
            for xs in itertools.product(range(N_), repeat=n)}
    worst = 0.0
    for xs, lx in logp.items():
        for i, v in itertools.product(range(n), range(N_)):
            worst = max(worst, float(np.abs(lx - logp[xs[:i] + (v,) + xs[i + 1:]]).max()))
    assert worst <= eps


def _quantile_gap_probs(framed: np.ndarray, q: float, eps: float) -> np.ndarray:
    """Brute force: gap k of the framed sorted data with probability ~ |I_k| exp(-eps |k - q n| / 2)."""
    n = len(framed) - 2
    w = np.array([(framed[k + 1] - framed[k]) * math.exp(-eps * abs(k - q * n) / 2) for k in range(n + 1)])
    out: np.ndarray = w / w.sum()
    return out


def _quantile_density(framed: np.ndarray, q: float, eps: float, t: np.ndarray) -> np.ndarray:
    p = _quantile_gap_probs(framed, q, eps)
    k = np.clip(np.searchsorted(framed, t, side="right") - 1, 0, len(p) - 1)
    out: np.ndarray = p[k] / np.diff(framed)[k]
    return out


def test_quantile_end_to_end_matches_brute_force_and_is_eps_dp() -> None:
    lo, hi, q, eps = 0.0, 4.0, 0.4, 2.0
    data = np.array([[0.3], [0.5], [0.55], [1.7], [2.0], [2.2], [3.9]])
    b = dp.PlanBuilder(budget=dp.PureDP(eps))
    X = b.source("X", dp.Reals(), n=len(data))
    cert = certify(b.build(v=N.Quantile(q=q)(N.OrderStatistics(lower=lo, upper=hi)(X))))
    framed = np.concatenate(([lo], np.sort(data[:, 0]), [hi]))
    p = _quantile_gap_probs(framed, q, eps)
    noise, backend = dp.SeededNoise(7), NumpyBackend()
    outs = np.array([execute(cert, {"X": data}, noise, backend).released["v"] for _ in range(1500)])
    counts = np.bincount(np.searchsorted(framed, outs, side="right") - 1, minlength=len(p))
    assert counts.size == len(p) and _chi2_ok(counts, p)
    # the certified rule on adversarial neighbours: density ratio within exp(eps) everywhere
    for i, v in itertools.product(range(len(data)), [lo, hi, 1.0, 3.0]):
        z2 = data[:, 0].copy()
        z2[i] = v
        f2 = np.concatenate(([lo], np.sort(z2), [hi]))
        pts = np.unique(np.concatenate([framed, f2]))
        t = (pts[:-1] + pts[1:]) / 2
        ratio = np.log(_quantile_density(framed, q, eps, t) / _quantile_density(f2, q, eps, t))
        assert np.abs(ratio).max() <= eps * (1 + 1e-12)


@pytest.mark.parametrize("mech", ["laplace", "gaussian"])
def test_a_sum_over_a_private_row_count_is_ledgered_and_drawn_on_the_lattice(mech: str) -> None:
    """A sum over a private row count (add/remove) is computed in fixed point, whose error term does not need
    the count: an exact source takes the lattice path, the ledger says so, and the run draws exact noise only
    (before issue 9's fixed-point sum it drew continuous noise)."""
    budget = dp.PureDP(1.0) if mech == "laplace" else dp.ZCDP(0.5)
    b = dp.PlanBuilder(budget=budget, neighbors="add_remove")
    X = b.source("X", dp.Vectors(d=2))
    s = N.Sum()(N.Clip(radius=1.0)(X))
    plan = b.build(s=N.LaplaceMech()(s) if mech == "laplace" else N.GaussianMech()(s))
    cert = certify(plan)
    entry = next(e for e in cert.ledger.entries if e.kind in ("LaplaceMech", "GaussianMech"))
    assert "2^-k lattice" in entry.noise and "continuous noise" not in entry.noise
    noise = RecordingNoise(1)
    execute(cert, {"X": RNG.normal(size=(20, 2))}, noise, NumpyBackend())
    assert [c[0] for c in noise.calls] == ["discrete_laplace" if mech == "laplace" else "discrete_gaussian"]


def test_a_statistic_with_float_error_bound_promises_the_lattice() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=20)
    cert = certify(b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))))
    entry = next(e for e in cert.ledger.entries if e.kind == "GaussianMech")
    assert "discrete Gaussian on a 2^-k lattice" in entry.noise


@pytest.mark.parametrize("mech", ["gaussian", "laplace"])
def test_a_released_radius_of_zero_releases_on_the_smallest_lattice_without_an_exception(mech: str) -> None:
    """A released clipping radius of 0 gives a subnormal noise scale; the lattice step must not underflow
    to 0 (it did: ZeroDivisionError after the budget was spent)."""
    from dpflow.nodes.mechanisms import MIN_LATTICE_STEP, _lattice_step

    assert _lattice_step(5e-324) == MIN_LATTICE_STEP and _lattice_step(1.0) == 2.0**-40
    b = dp.PlanBuilder(budget=dp.PureDP(1.0) if mech == "laplace" else dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=50)
    zero = N.ScaleShift(scale=0.0, shift=0.0)(b.public(1.0))
    stat = N.Mean()(N.Clip(radius=zero)(X))
    plan = b.build(m=N.LaplaceMech()(stat) if mech == "laplace" else N.GaussianMech()(stat))
    out = np.asarray(plan.run({"X": np.ones((50, 2))}, noise=dp.SeededNoise(0, exact=True)).released["m"])
    assert np.all(np.isfinite(out)) and np.all(np.abs(out) < 1e-150)
    assert np.all(np.rint(out / MIN_LATTICE_STEP) * MIN_LATTICE_STEP == out)
