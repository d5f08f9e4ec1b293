"""Record and replay (Re:cord-play style, Cebere et al. PETS 2026; spec recipe 6): every mechanism's
pre-noise input is recorded on neighbouring datasets, random and adversarial (far outliers, NaN and
inf rows, points on the clipping boundary, antipodal boundary points), and

* the realised distance never exceeds the declared sensitivity (in the mechanism's norm);
* the realised per-record cost (sum over mechanisms of share * (distance / sensitivity)^2 in zCDP
  mode, share * distance / sensitivity in pure mode) never exceeds the certified cost of the
  source: this is what catches a wrong composition rule, not only a wrong sensitivity;
* the sequence of noise draws (method, scale, shape) is the same on D and D': control flow and
  noise scales do not depend on the data.

The shipped mutants (a Mean whose sensitivity uses n + 1, an index split whose pieces overlap but
are composed in parallel) must be flagged.  The same replay runs on plans read back from JSON
(``Plan.to_json`` / ``Plan.from_json``): these plans, the non-adaptive estimator plans and the example
plan.  The statistical audits live in test_audit_stats.py.

Limitation: the plans here are non-adaptive (no parameter is a released value), because with zero
noise the released parameters differ between D and D' and the comparison would mix two runs.  Adaptive
plans (every round of a ``Repeat``) are replayed in test_replay.py, with D's releases forced on D'.
"""

from __future__ import annotations

import runpy
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, ClassVar

import attrs
import numpy as np
import pytest

import dpflow as dp
from dpflow import estimators
from dpflow import nodes as N
from dpflow.interpreter.noise import LaplaceDerivedDraws
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import _Ctx, _Run, prepare_data
from dpflow.nodes.base import InferContext, Mechanism
from dpflow.nodes.types import Inferred, StatT, VType
from dpflow.planner.certify import Certified, TypedScope, certify

NORM_OF = {"GaussianMech": "l2", "LaplaceMech": "l1", "Peel": "linf"}
REL_TOL = 1e-9


class RecordingNoise(LaplaceDerivedDraws):
    """A noise source that records every draw (method, scale, shape) and returns zeros, so each
    mechanism releases its pre-noise input.  ``exact`` selects the mechanisms' lattice path.  The
    derived draws (Gumbel, uniform) go through ``laplace`` and are recorded as Laplace draws."""

    description = "recording zero noise (audit tests): NOT FOR RELEASE"
    seeded = True

    def __init__(self, exact: bool = False) -> None:
        self.exact = exact
        self.calls: list[tuple[str, float, tuple[int, ...]]] = []

    def __getattr__(self, method: str) -> Callable[[Any, tuple[int, ...]], np.ndarray]:
        if method.startswith("_"):
            raise AttributeError(method)

        def draw(scale: Any, shape: tuple[int, ...]) -> np.ndarray:
            self.calls.append((method, float(scale), tuple(shape)))
            return np.zeros(shape)

        return draw


class _Capture(_Run):
    """The interpreter, keeping the values of every evaluated (sub-)space in evaluation order."""

    frees = False

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.spaces: list[tuple[TypedScope, dict[str, Any], tuple[int, ...]]] = []

    def space_values(self, space: TypedScope, env: dict[str, Any], rounds: tuple[int, ...] = ()) -> dict[str, Any]:
        out = super().space_values(space, env, rounds)
        self.spaces.append((space, dict(out), rounds))
        return out


@attrs.frozen
class MechInput:
    """One mechanism evaluation: its key, kind, pre-noise input, declared bounds and share."""

    key: str
    kind: str
    value: np.ndarray
    bounds: dict[str, float | None]
    share: Fraction


def record(cert: Certified, data: dict[str, np.ndarray], exact: bool = False) -> tuple[list[MechInput], list[Any]]:
    noise = RecordingNoise(exact)
    run = _Capture(cert, prepare_data(cert, data), noise, NumpyBackend())
    run.space_values(cert.space, {})
    out = []
    for space, env, rounds in run.spaces:
        ctx = _Ctx(run, space, env, rounds)
        for rec in space.order:
            if not isinstance(rec.node, Mechanism):
                continue
            stat = space.types[rec.inputs[0]]
            assert isinstance(stat, StatT)
            bounds = {k: None if b is None else ctx.bound(b)
                      for k, b in (("l1", stat.l1), ("l2", stat.l2), ("linf", stat.linf))}
            ctx._rec = rec
            out.append(MechInput(space.path + rec.id, rec.node.kind, noised_entries(env[rec.inputs[0]], stat),
                                 bounds, ctx.allocation().share))
    return out, noise.calls


def noised_entries(value: Any, stat: StatT) -> np.ndarray:
    """The entries a mechanism noises: the upper triangle of a symmetric statistic (mirrored after the
    noise, so its sensitivities are over the upper triangle), else all."""
    v = np.asarray(value, dtype=float)
    return v[np.triu_indices(v.shape[0])] if stat.symmetric else v


def distance(a: np.ndarray, b: np.ndarray, norm: str) -> float:
    diff = (a - b).ravel()
    assert np.all(np.isfinite(diff)), "a pre-noise statistic is not finite"
    if norm == "l1":
        return float(np.abs(diff).sum())
    if norm == "l2":
        return float(np.linalg.norm(diff))
    return float(np.abs(diff).max(initial=0.0))


def audit_pair(cert: Certified, D: dict[str, np.ndarray], D2: dict[str, np.ndarray],
               exact: bool = False) -> list[str]:
    """Everything record/replay finds wrong on one neighbouring pair (empty when nothing is)."""
    a, calls_a = record(cert, D, exact)
    b, calls_b = record(cert, D2, exact)
    found = []
    if calls_a != calls_b:
        found.append(f"the noise draws depend on the data: {calls_a} vs {calls_b}")
    if [m.key for m in a] != [m.key for m in b]:
        found.append("the mechanisms evaluated depend on the data")
        return found
    total = cert.ledger.totals[0]
    mode = cert.allocations[a[0].key].mode if a else "zcdp"
    spent = Fraction(0)
    for ma, mb in zip(a, b, strict=True):
        r = realised_ratio(ma.kind, ma.bounds, ma.value, mb.value, str(ma.key), found)
        spent += ma.share * (Fraction(r) ** 2 if mode == "zcdp" else Fraction(r))
    certified = Fraction(total.rho) if mode == "zcdp" else Fraction(total.pure_eps or 0)
    if spent > certified * (1 + Fraction(REL_TOL)):
        found.append(f"realised per-record cost {float(spent):.6g} exceeds the certified {float(certified):.6g}")
    return found


def realised_ratio(kind: str, bounds: dict[str, float | None], va: Any, vb: Any, label: str,
                   found: list[str]) -> float:
    """The realised change of one mechanism's pre-noise input over its declared bound, in the norm its
    noise is calibrated to (``NORM_OF``); every norm whose bound is exceeded is appended to ``found``."""
    ratios = []
    for norm, bound in bounds.items():
        if bound is None:
            continue
        dist = distance(va, vb, norm)
        if dist > bound * (1 + REL_TOL) + 1e-300:
            found.append(f"{label}: realised {norm} change {dist:.6g} exceeds the declared {bound:.6g}")
        ratios.append((norm, dist / bound if bound > 0 else (0.0 if dist == 0 else np.inf)))
    return max((x for n, x in ratios if n == NORM_OF.get(kind, n)), default=0.0)


# ------------------------------------------------------------------ neighbours

RADIUS, BOX = 2.0, (-1.0, 1.0)


def neighbours(X: np.ndarray, rng: np.random.Generator, relation: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Pairs (D, D') differing in one row: random and adversarial, at every row index of small data."""
    n, d = X.shape
    unit = np.ones(d) / np.sqrt(d)
    rows = (1e6 * rng.normal(size=d), np.full(d, np.nan), np.full(d, np.inf), RADIUS * unit, -RADIUS * unit,
            np.full(d, BOX[1]), rng.normal(size=d))
    pairs = []
    if relation == "add_remove":  # one row added or removed
        for i in range(n):
            pairs.append((X, np.delete(X, i, axis=0)))
        for new in rows:
            pairs.append((X, np.vstack([X, new[None, :]])))
        return pairs
    for i in range(n):
        for new in rows:
            Y = X.copy()
            Y[i] = new
            pairs.append((X, Y))
        A, B = X.copy(), X.copy()  # antipodal points on the clipping boundaries
        A[i], B[i] = RADIUS * unit, -RADIUS * unit
        pairs.append((A, B))
        A, B = X.copy(), X.copy()
        A[i], B[i] = np.full(d, BOX[1]), np.full(d, BOX[0])
        pairs.append((A, B))
    return pairs


# ------------------------------------------------------------------ plans and mutants


@attrs.frozen(kw_only=True)
class MeanNPlus1(N.Mean):
    """MUTANT: a Mean whose declared sensitivity divides by n + 1 instead of n."""

    kind: ClassVar[str] = "Mean"

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        inf = super().infer(ins, ctx)
        stat = inf.out
        assert isinstance(stat, StatT) and isinstance(ins[0], N.RowsT) and ins[0].size.known is not None
        f = ins[0].size.known / (ins[0].size.known + 1)
        return Inferred(attrs.evolve(stat, l1=None if stat.l1 is None else stat.l1 * f,
                                     l2=None if stat.l2 is None else stat.l2 * f,
                                     linf=None if stat.linf is None else stat.linf * f), inf.derivation)


@attrs.frozen(kw_only=True)
class OverlappingSplit(N.SplitByIndex):
    """MUTANT: pieces overlap (each piece also holds the first row of the next) while the planner
    composes them in parallel as if they were disjoint."""

    kind: ClassVar[str] = "SplitByIndex"

    def evaluate(self, ins: Sequence[Any], ctx: Any) -> Any:
        X = np.asarray(ins[0])
        bounds = np.cumsum([0] + [len(p) for p in np.array_split(X, self.pieces)])
        return [X[bounds[k]: min(bounds[k + 1] + 1, len(X))] for k in range(self.pieces)]


def plan_of(name: str, d: int, n: int, mean: type[N.Mean] = N.Mean,
            splitter: type[N.SplitByIndex] = N.SplitByIndex) -> dp.Plan:
    relation = "add_remove" if name in ("sum_add_remove", "count_add_remove") else "replace"
    budget = dp.PureDP(1) if name in ("laplace_sum", "histogram", "peel") else dp.ZCDP(1)
    b = dp.PlanBuilder(budget=budget, neighbors=relation)
    X = b.source("X", dp.Vectors(d=d), n=None if relation == "add_remove" else n)
    ball, box = N.Clip(radius=RADIUS)(X), N.Clip(box=BOX)(X)
    outs: dict[str, Any]
    if name == "mean":
        outs = {"m": N.GaussianMech()(mean()(ball))}
    elif name == "mean_and_moment":  # sequential composition on one source
        outs = {"m": N.GaussianMech()(mean()(ball)), "s": N.GaussianMech(weight=2)(N.SecondMoment()(ball))}
    elif name == "laplace_sum":
        outs = {"s": N.LaplaceMech()(N.Sum()(box))}
    elif name == "histogram":
        outs = {"h": N.LaplaceMech()(N.Histogram(edges=(-2.0, -0.5, 0.0, 0.5, 2.0))(N.Columns(keep=(0,))(box)))}
    elif name == "peel":
        outs = {"p": N.Peel(s=min(2, d))(mean()(box))}
    elif name == "index_split":  # parallel composition over disjoint index pieces
        pieces = N.split(X, splitter(pieces=2))
        outs = {f"s{k}": N.GaussianMech()(N.Sum()(N.Clip(radius=RADIUS)(p))) for k, p in enumerate(pieces)}
    elif name == "value_partition":
        pieces = N.split(X, N.PartitionByBall(center=[0.0] * d, radius=1.0))
        outs = {f"s{k}": N.GaussianMech()(N.Sum()(N.Clip(radius=RADIUS)(p))) for k, p in enumerate(pieces)}
    elif name == "sum_add_remove":
        outs = {"s": N.GaussianMech()(N.Sum()(ball)), "c": N.GaussianMech()(N.Count()(ball))}
    elif name == "count_add_remove":
        outs = {"c": N.LaplaceMech()(N.Count()(X))}
    else:
        raise AssertionError(name)
    return b.build(**outs)


PLANS = ("mean", "mean_and_moment", "laplace_sum", "histogram", "peel", "index_split", "value_partition",
         "sum_add_remove", "count_add_remove")


def findings(plan: dp.Plan, n: int, d: int, seed: int, exact: bool = False) -> list[str]:
    cert = certify(plan)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 1.5
    out = []
    for D, D2 in neighbours(X, rng, plan.neighbors):
        for first, second in ((D, D2), (D2, D)):
            out += audit_pair(cert, {"X": first}, {"X": second}, exact)
    return out


@pytest.mark.parametrize("name", PLANS)
@pytest.mark.parametrize("d", [1, 3])
def test_record_replay_finds_nothing_on_correct_plans(name: str, d: int) -> None:
    assert findings(plan_of(name, d, 5), 5, d, seed=d) == []


@pytest.mark.parametrize("name", PLANS)
def test_record_replay_on_the_exact_lattice_path(name: str) -> None:
    """The same replay with a noise source that reports ``exact``: the mechanisms take their lattice
    path (discrete draws), whose draw sequence must not depend on the data either."""
    assert findings(plan_of(name, 2, 4), 4, 2, seed=7, exact=True) == []


def test_mutant_mean_with_n_plus_1_is_flagged() -> None:
    found = findings(plan_of("mean", 3, 5, mean=MeanNPlus1), 5, 3, seed=0)
    assert any("exceeds the declared" in f for f in found)
    assert any("per-record cost" in f for f in found)


def test_mutant_overlapping_split_composed_in_parallel_is_flagged() -> None:
    plan = plan_of("index_split", 2, 6, splitter=OverlappingSplit)
    assert certify(plan).ledger.totals[0].rho == Fraction(1)  # the planner believes the pieces are disjoint
    found = findings(plan, 6, 2, seed=0)
    assert found and all("per-record cost" in f for f in found)  # each piece alone respects its bound


def test_data_dependent_noise_draws_are_flagged() -> None:
    """A noise source is handed (method, scale, shape): an implementation whose draws depend on the
    data (here: skipping the draw when the statistic is zero) must be caught by the replay."""

    @attrs.frozen(kw_only=True)
    class LeakyGauss(N.GaussianMech):
        kind: ClassVar[str] = "GaussianMech"

        def evaluate(self, ins: Sequence[Any], ctx: Any) -> Any:
            if not np.any(np.asarray(ins[0])):
                return np.asarray(ins[0], dtype=float)
            return super().evaluate(ins, ctx)

    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=2), n=3)
    cert = certify(b.build(m=LeakyGauss()(N.Mean()(N.Clip(radius=1.0)(X)))))
    found = audit_pair(cert, {"X": np.zeros((3, 2))}, {"X": np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])})
    assert any("noise draws depend on the data" in f for f in found)


# ------------------------------------------------------------------ plans read from JSON


def read_back(plan: dp.Plan) -> dp.Plan:
    """``plan`` after a JSON round trip: the same text, hash and ledger (so the same certified claim)."""
    back = dp.Plan.from_json(plan.to_json())
    assert back.to_json() == plan.to_json() and back.hash == plan.hash
    assert certify(back).ledger.to_json() == certify(plan).ledger.to_json()
    return back


def _example_plan() -> dp.Plan:
    plan = runpy.run_path(str(Path(__file__).resolve().parents[2] / "examples" / "clipped_mean_plan.py"))["plan"]
    assert isinstance(plan, dp.Plan)
    return plan


# name -> (d, plan on n = 6 rows of source X): the non-adaptive estimator plans and the example plan
ESTIMATOR_PLANS: dict[str, tuple[int, Callable[[], dp.Plan]]] = {
    "clipped_mean": (3, lambda: estimators.clipped_mean(3, 6, dp.ZCDP(1), mean_bound=1.0)),
    "clipped_mean_approx_dp": (2, lambda: estimators.clipped_mean(2, 6, dp.ApproxDP(1, 1e-6), mean_bound=1.0)),
    "naive_pce": (3, lambda: estimators.naive_pce(3, 6, dp.ZCDP(1), kappa=2.0)),
    "naive_product": (3, lambda: estimators.product.naive_product(3, 6, dp.ZCDP(1))),
    "sparse_mean": (3, lambda: estimators.sparse_mean(3, 6, 1, dp.ApproxDP(1, 1e-6), radius=2.0)),
    "laplace_histogram": (1, lambda: estimators.discrete.laplace_histogram(4, 6, dp.PureDP(1))),
    "example_clipped_mean_plan": (5, _example_plan),
}


@pytest.mark.parametrize("name", PLANS)
def test_record_replay_on_plans_read_from_json(name: str) -> None:
    assert findings(read_back(plan_of(name, 3, 5)), 5, 3, seed=3) == []


@pytest.mark.parametrize("name", sorted(ESTIMATOR_PLANS))
def test_record_replay_on_estimator_and_example_plans_read_from_json(name: str) -> None:
    d, make = ESTIMATOR_PLANS[name]
    assert findings(read_back(make()), 6, d, seed=d) == []
