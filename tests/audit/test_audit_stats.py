"""Statistical privacy audits (spec recipes 4 and 5), seeded so CI is deterministic, and the
mutants they must flag.

Samples: the plans release a d-dimensional vector on neighbours D, D' that shift every coordinate
by the same amount, and the noise of distinct coordinates is independent.  The output
distribution is then a product of d identical per-coordinate distributions, and both Renyi
divergences (zCDP) and the pure privacy loss add over independent coordinates, so a certified
rho-zCDP (mu-GDP, eps-DP) run makes each coordinate rho/d-zCDP (mu/sqrt(d)-GDP, eps/d-DP) for this
pair.  Each run thus gives d samples of a one-dimensional mechanism with a known claim.

* Histogram test (Google's approximate-DP test, recipe 4; Gilbert-McMillan): bin the samples on
  fixed bins, estimate sum_y max(0, P_A(y) - e^eps P_B(y)) in both directions at several eps and
  compare with the claimed delta(eps) (CKS for zCDP, exact GDP profile when all Gaussian).  The
  tolerance is a rigorous bound: the L1 error of an empirical k-bin histogram exceeds
  sqrt(2 (k ln 2 + ln(1/beta)) / m) with probability at most beta (Bretagnolle-Huber-Carol),
  and the estimate is 1-Lipschitz in P_A and e^eps-Lipschitz in P_B (L1).
* Event-based epsilon lower bound (recipe 5): eps_lb = ln(CP_lower(P_A(S)) / CP_upper(P_B(S)))
  with Clopper-Pearson bounds at 97.5% each; flagged when eps_lb exceeds the claim.

Every audit also runs on its plan read back from JSON (``Plan.to_json`` / ``Plan.from_json``).

Mutants (each must be flagged): the noise scale halved (the interpreter handed 4x the certified
rho share, or 2x the epsilon share), a Mean whose sensitivity uses n + 1 (with n = 1 it halves the
noise), and a Peel whose rounds reuse one noise draw for every score.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import attrs
import numpy as np
import pytest
from scipy import stats
from test_audit import MeanNPlus1, read_back

import dpflow as dp
from dpflow import nodes as N
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.planner.certify import Certified, certify
from dpflow.privacy import cks_delta, gaussian_dp_delta

BETA = 1e-6  # per comparison: a correct implementation fails with probability < 8 * BETA per audit
EPS_GRID = (0.0, 0.25, 0.5, 1.0)


def samples(cert: Certified, data: dict[str, np.ndarray], runs: int, seed: int, out: str,
            noise: Callable[[int], Any] = dp.SeededNoise) -> np.ndarray:
    src = noise(seed)
    return np.concatenate([np.asarray(execute(cert, data, src, NumpyBackend()).released[out], dtype=float).ravel()
                           for _ in range(runs)])


def hockey_stick_excess(a: np.ndarray, b: np.ndarray, edges: np.ndarray,
                        claim: Callable[[float], float]) -> float:
    """max over eps and both directions of (estimated divergence - tolerance - claimed delta(eps))."""
    k = len(edges) + 1
    pa = np.bincount(np.searchsorted(edges, a), minlength=k) / a.size
    pb = np.bincount(np.searchsorted(edges, b), minlength=k) / b.size
    err = math.sqrt(2 * (k * math.log(2) + math.log(1 / BETA)) / min(a.size, b.size))
    worst = -math.inf
    for eps in EPS_GRID:
        for p, q in ((pa, pb), (pb, pa)):
            est = float(np.maximum(0.0, p - math.exp(eps) * q).sum())
            worst = max(worst, est - (1 + math.exp(eps)) * err - claim(eps))
    return worst


def clopper_pearson(k: int, m: int, level: float = 0.975) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(stats.beta.ppf(1 - level, k, m - k + 1))
    hi = 1.0 if k == m else float(stats.beta.ppf(level, k + 1, m - k))
    return lo, hi


def epsilon_lower_bound(a: np.ndarray, b: np.ndarray) -> float:
    """ln(CP_lower(P_A(S)) / CP_upper(P_B(S))) for S = {y == True}."""
    lo, _ = clopper_pearson(int(a.sum()), a.size)
    _, hi = clopper_pearson(int(b.sum()), b.size)
    return math.log(lo / hi) if lo > 0 else -math.inf


def claim_zcdp(cert: Certified, d: int) -> Callable[[float], float]:
    t = cert.ledger.totals[0]
    rho = Fraction(t.rho) / d
    mu = None if t.gdp_mu is None else t.gdp_mu / math.sqrt(d)
    return lambda eps: min(1.0, cks_delta(rho, eps) if eps > 0 else 1.0,
                           gaussian_dp_delta(mu, eps) if mu is not None else 1.0)


def halve_noise(cert: Certified) -> Certified:
    """MUTANT: the interpreter uses 4x the certified rho share (2x the epsilon share): half the noise."""
    table = {k: attrs.evolve(a, share=a.share * (4 if a.mode == "zcdp" else 2))
             for k, a in cert.invocations.table.items()}
    return attrs.evolve(cert, invocations=attrs.evolve(cert.invocations, table=table))


# ------------------------------------------------------------------ Gaussian: histogram test

D_GAUSS, RUNS_GAUSS = 400, 100


def gaussian_plan(mean: type[N.Mean] = N.Mean, composed: bool = False, via_json: bool = False) -> Certified:
    """rho = 50 over d = 400 coordinates, n = 1: each coordinate is a 1/8-zCDP (mu = 1/2) Gaussian
    (``via_json``: the plan read back from its JSON)."""
    b = dp.PlanBuilder(budget=dp.ZCDP(50))
    X = b.source("X", dp.Vectors(d=D_GAUSS), n=1)
    m = mean()(N.Clip(box=(-1.0, 1.0))(X))
    if composed:  # two releases of the same mean: sequential composition, combined by inverse variance
        first, second = N.GaussianMech(weight=1)(m), N.GaussianMech(weight=3)(m)
        plan = b.build(out=N.Apply(fn=_average_1_3)(first, second))
    else:
        plan = b.build(out=N.GaussianMech()(m))
    return certify(read_back(plan) if via_json else plan)


def _average_1_3(a: Any, b: Any) -> np.ndarray:
    """The inverse-variance combination of two releases with rho shares 1 : 3 (a sufficient statistic)."""
    return (np.asarray(a) + 3 * np.asarray(b)) / 4


def gaussian_excess(cert: Certified, seed: int) -> float:
    plus, minus = {"X": np.ones((1, D_GAUSS))}, {"X": -np.ones((1, D_GAUSS))}
    a = samples(cert, plus, RUNS_GAUSS, seed, "out")
    b = samples(cert, minus, RUNS_GAUSS, seed + 1, "out")
    sigma = 2 * math.sqrt(D_GAUSS) / math.sqrt(2 * 50)  # the certified noise of the whole release
    edges = np.linspace(-1 - 2 * sigma, 1 + 2 * sigma, 21)
    return hockey_stick_excess(a, b, edges, claim_zcdp(cert, D_GAUSS))


JSON = pytest.mark.parametrize("via_json", [False, True], ids=["built", "read_from_json"])


@JSON
def test_gaussian_mechanism_passes_the_histogram_test(via_json: bool) -> None:
    assert gaussian_excess(gaussian_plan(via_json=via_json), seed=1) <= 0


@JSON
def test_composed_plan_passes_the_histogram_test(via_json: bool) -> None:
    assert gaussian_excess(gaussian_plan(composed=True, via_json=via_json), seed=2) <= 0


@JSON
def test_mutant_halved_gaussian_noise_is_flagged(via_json: bool) -> None:
    assert gaussian_excess(halve_noise(gaussian_plan(via_json=via_json)), seed=1) > 0


@JSON
def test_mutant_halved_noise_in_a_composed_plan_is_flagged(via_json: bool) -> None:
    assert gaussian_excess(halve_noise(gaussian_plan(composed=True, via_json=via_json)), seed=2) > 0


def test_mutant_mean_with_n_plus_1_is_flagged_statistically() -> None:
    assert gaussian_excess(gaussian_plan(mean=MeanNPlus1), seed=1) > 0


# ------------------------------------------------------------------ Laplace: event-based lower bound

D_LAP, RUNS_LAP = 200, 100


def laplace_eps_lb(cert: Certified, seed: int) -> float:
    """Each coordinate: Laplace(b = 2) around +1 or -1, eps = 1 per coordinate; S = {y > 1}."""
    a = samples(cert, {"X": np.ones((1, D_LAP))}, RUNS_LAP, seed, "out") > 1
    b = samples(cert, {"X": -np.ones((1, D_LAP))}, RUNS_LAP, seed + 1, "out") > 1
    return epsilon_lower_bound(a, b)


def laplace_plan(via_json: bool = False) -> Certified:
    b = dp.PlanBuilder(budget=dp.PureDP(D_LAP))
    X = b.source("X", dp.Vectors(d=D_LAP), n=1)
    plan = b.build(out=N.LaplaceMech()(N.Mean()(N.Clip(box=(-1.0, 1.0))(X))))
    return certify(read_back(plan) if via_json else plan)


@JSON
def test_laplace_mechanism_event_lower_bound_is_below_its_epsilon(via_json: bool) -> None:
    cert = laplace_plan(via_json)
    assert Fraction(cert.ledger.totals[0].pure_eps or 0) / D_LAP == 1
    lb = laplace_eps_lb(cert, seed=3)
    assert 0.7 < lb <= 1.0  # tight event: the audit has power, and the claim holds


@JSON
def test_mutant_halved_laplace_noise_is_flagged(via_json: bool) -> None:
    assert laplace_eps_lb(halve_noise(laplace_plan(via_json)), seed=3) > 1.0


# ------------------------------------------------------------------ Peel: selection event

RUNS_PEEL = 300


class ReusedDraws:
    """MUTANT noise: each draw is one value reused for every entry (a Peel round reuses its noise
    across all scores, so the selection is the noiseless argmax)."""

    description = "mutant: one draw reused for every entry: NOT FOR RELEASE"
    seeded = True
    exact = False

    def __init__(self, seed: int) -> None:
        self.inner = dp.SeededNoise(seed)

    def __getattr__(self, method: str) -> Callable[[Any, tuple[int, ...]], np.ndarray]:
        if method.startswith("_"):
            raise AttributeError(method)
        draw = getattr(self.inner, method)
        return lambda scale, shape: np.broadcast_to(draw(scale, (1,) * len(shape)), shape).copy()


def peel_eps_lb(noise: Callable[[int], Any], seed: int, via_json: bool = False) -> float:
    """Peel s = 1 of d = 2 coordinates, pure eps = 1; S = {coordinate 0 selected}."""
    b = dp.PlanBuilder(budget=dp.PureDP(1))
    X = b.source("X", dp.Vectors(d=2), n=1)
    plan = b.build(out=N.Peel(s=1)(N.Mean()(N.Clip(box=(-1.0, 1.0))(X))))
    cert = certify(read_back(plan) if via_json else plan)
    a = samples(cert, {"X": np.array([[1.0, 0.0]])}, RUNS_PEEL, seed, "out", noise).reshape(-1, 2)[:, 0] != 0
    b_ = samples(cert, {"X": np.array([[0.0, 1.0]])}, RUNS_PEEL, seed + 1, "out", noise).reshape(-1, 2)[:, 0] != 0
    return epsilon_lower_bound(a, b_)


@JSON
def test_peel_selection_event_lower_bound_is_below_its_epsilon(via_json: bool) -> None:
    assert peel_eps_lb(dp.SeededNoise, seed=4, via_json=via_json) <= 1.0


@JSON
def test_mutant_peel_reusing_noise_is_flagged(via_json: bool) -> None:
    assert peel_eps_lb(ReusedDraws, seed=4, via_json=via_json) > 1.0


# ------------------------------------------------------------------ the exact discrete samplers


@pytest.mark.slow
def test_exact_lattice_release_passes_the_histogram_test() -> None:
    """The same audit with the exact discrete samplers (seeded integer source)."""
    cert = gaussian_plan()
    plus, minus = {"X": np.ones((1, D_GAUSS))}, {"X": -np.ones((1, D_GAUSS))}

    def exact(seed: int) -> Any:
        return dp.SeededNoise(seed, exact=True)

    a = samples(cert, plus, RUNS_GAUSS, 5, "out", exact)
    b = samples(cert, minus, RUNS_GAUSS, 6, "out", exact)
    sigma = 2 * math.sqrt(D_GAUSS) / math.sqrt(2 * 50)
    edges = np.linspace(-1 - 2 * sigma, 1 + 2 * sigma, 21)
    assert hockey_stick_excess(a, b, edges, claim_zcdp(cert, D_GAUSS)) <= 0
