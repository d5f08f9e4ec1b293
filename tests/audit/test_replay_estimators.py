"""End-to-end record/replay audits of the newer estimators (issue 28): the Gaussian mixture plans
(sample-and-aggregate, block means, RPGMP, the warm-up chain, the standardised plan), ``heavy_tailed``'s
HT_PCE, the no-bounds scale steps (the per-column step of ``scaled_gaussian`` / ``scaled_ssp`` /
``LinearRegression`` without bounds, the KMSSU scale search of ``gaussian.fit`` without bounds, and that
whole two-plan fit), and MERR.

The replay is the one of test_replay.py (run D with seeded noise recording every mechanism invocation; run
the neighbour D' with every release forced to D's; compare the pre-noise inputs), extended to every input a
mechanism of these plans takes, each compared in the sensitivity its noise is calibrated to:

* arrays (Gaussian, Laplace, AboveThreshold; a symmetric statistic by its upper triangle): l1, l2, linf;
* sparse bin counts (the stability histograms): the counts over the union of the occupied bins;
* the dyadic table of MERR's exponential mechanism: the counts of every dyadic interval of [0, 2^L);
* order statistics (Quantile): besides their l_p bounds, the *rank utility* ``-|c(y) - q n|`` at every
  point ``y`` of the range (``c(y)`` the values below ``y``), against the declared rank sensitivity; the
  range itself must be the same on D and D' (it is public or released).

For every pair it checks that no declared bound is exceeded; on a value piece (a part of the mixtures) whose
row count changed, i.e. a record entered or left it, that the change is within the piece's declared one-sided
bounds and within the ratio of the sensitivity the planner charges the piece at (the mechanism's
``one_sided_ratio``); that the realised per-record cost (sum of share x ratio^2 in zCDP mode, share x ratio in
pure mode, the ratio in the mechanism's own norm) stays within the certified total (a weak check in plans of
many mechanisms, where no one pair moves them all: the per-invocation checks carry the power); and that the
mechanisms evaluated, their declared bounds and the noise scales and thresholds they record do not depend on
the data (given the same released state).

Neighbours (replace-one; small n and d): one row replaced by hostile values (1e6, 1e300, the largest float
with both signs, NaN in every or one coordinate, +-inf) or by a row of another cluster; pairs of far rows on
opposite sides of every ball or in orthogonal directions; and the same pairs around the replaced row's cluster
centre at a grid of distances (some just inside each ball the plan clips or partitions to).  The slow tests
add rows, seeds, a finer grid and pairs around every centre the plan releases; crafted data (exactly ``t``
tight rows) brings the terrific scores near their bound.  The estimators all declare replace-one neighbours;
the no-bounds route (the per-column scale step, the standardised rows, a private radius) is also audited under
add/remove (a row added or removed).  ``gaussian.fit`` without bounds is replayed end to end: the scale search,
then the plan built from D's release on the neighbours moved by D's released centre and scale.

Each audit can fail: :func:`test_a_halved_sensitivity_of_each_mechanism_kind_is_flagged` halves, for each
mechanism kind of each plan, the declared sensitivity of every mechanism of that kind (after certification, so
the noise shrinks with it), and the replay must flag it.  Lowered sensitivity rules in the source (one or
two characters each: the Gram's, the second moment's, the counts', the group histogram's, the terrific scores',
DyadicCounts', the ball counts', the quantile's rank and the one-sided ratio) were each caught by the default
run (issue 28's report lists them).  ``python tests/audit/test_replay_estimators.py`` prints how close each
mechanism kind comes to its declared sensitivity on the default neighbours.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import attrs
import numpy as np
import pytest
from forced_replay import NORM_OF, NORMS, Replay, replay

import dpflow as dp
from dpflow.errors import AccuracyWarning
from dpflow.estimators import discrete, gaussian, heavy_tailed, mixtures, regression
from dpflow.estimators.gaussian import unbounded
from dpflow.estimators.scale import column_scales, standardize
from dpflow.estimators.truncation import private_radius
from dpflow.nodes import Mechanism
from dpflow.nodes.types import ReleasedT, StatT
from dpflow.planner.certify import Certified, TypedScope, certify

# ------------------------------------------------------------------ neighbours

BIG = 1e6


def hostile_rows(d: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Rows a record may hold: far outliers (1e6, 1e300, the largest float with both signs: differences and
    squares overflow), NaN (all or one coordinate), +-inf, a fresh row."""
    u = np.ones(d) / np.sqrt(d)
    one_nan = rng.normal(size=d)
    one_nan[-1] = np.nan
    top = np.finfo(float).max
    signs = np.where(np.arange(d) % 2 == 0, 1.0, -1.0)
    return [BIG * rng.normal(size=d), 1e300 * u, -1e300 * u, top * signs, np.full(d, np.nan), one_nan,
            np.full(d, np.inf), np.inf * signs, rng.normal(size=d)]


def local_centre(X: np.ndarray, i: int) -> np.ndarray:
    """The coordinate-wise median of the quarter of the rows nearest to row ``i``: the centre of its cluster."""
    near = np.argsort(np.linalg.norm(X - X[i], axis=1))[: max(2, len(X) // 4)]
    out: np.ndarray = np.median(X[near], axis=0)
    return out


RADII = tuple(2.0 ** (k / 2) for k in range(-2, 14))
"""Distances from a cluster's centre at which rows are placed (0.5 to 90, ratio sqrt 2): some fall just inside
each clipping ball.  The default run takes every other one (ratio 2)."""

Pairs = list[tuple[np.ndarray, np.ndarray]]


@attrs.frozen
class Search:
    """Where neighbours are looked for: the rows replaced (or removed), the distances of :func:`replace_pairs`
    and, besides each replaced row's cluster centre, the points they are measured from."""

    rows: tuple[int, ...] = (0,)
    radii: tuple[float, ...] = RADII[::2]
    centres: tuple[np.ndarray, ...] = ()


def replace_pairs(X: np.ndarray, rng: np.random.Generator, search: Search) -> Pairs:
    """Replace-one pairs at each of the search's rows: the row replaced by each hostile row and by a row of
    another cluster (the record moves between parts); pairs of far rows on opposite sides of every ball
    (antipodal) and in orthogonal directions (a second moment's worst case); and the same two kinds of pairs
    around the row's cluster centre (and the search's centres) at every distance of the search, so that some
    lie just inside each ball a plan clips to."""
    d = X.shape[1]
    u = np.ones(d) / np.sqrt(d)
    e0, e1 = np.eye(d)[0], np.eye(d)[min(1, d - 1)] * (1 if d > 1 else -1)
    pairs = []
    for i in search.rows:
        far = X[np.argmax(np.linalg.norm(X - X[i], axis=1))]
        for new in [*hostile_rows(d, rng), far]:
            Y = X.copy()
            Y[i] = new
            pairs.append((X, Y))
        around = [(m + r * a, m + r * b) for m in (local_centre(X, i), *search.centres) for r in search.radii
                  for a, b in ((u, -u), (e0, e1))]
        for first, second in [(BIG * u, -BIG * u), (BIG * e0, BIG * e1), *around]:
            A, B = X.copy(), X.copy()
            A[i], B[i] = first, second
            pairs.append((A, B))
    return pairs


def add_remove_pairs(X: np.ndarray, rng: np.random.Generator, search: Search) -> Pairs:
    """Add/remove pairs: each of the search's rows removed, and each hostile row added."""
    pairs = [(X, np.delete(X, i, axis=0)) for i in search.rows]
    return pairs + [(X, np.vstack([X, new[None, :]])) for new in hostile_rows(X.shape[1], rng)]


def ordinal_pairs(x: np.ndarray, N: int, rows: tuple[int, ...]) -> Pairs:
    """Replace-one pairs of ordinal data: the row replaced by 17 values spread over [0, N) (both ends included:
    the record moves into every released interval of width N/16 or more), values beyond either end, NaN and
    +-inf (the source's declared policies clamp them), and a row moved from one end to the other."""
    pairs = []
    for i in rows:
        for new in (*np.round(np.linspace(0.0, N - 1.0, 17)), 1e300, -1e300, np.nan, np.inf, -np.inf):
            y = x.copy()
            y[i] = new
            pairs.append((x, y))
        a, b = x.copy(), x.copy()
        a[i], b[i] = 0.0, N - 1.0
        pairs.append((a, b))
    return pairs


# ------------------------------------------------------------------ plans and data

N_ROWS = 40


@attrs.frozen
class Audited:
    """An estimator's plan, its source, a dataset for it and the neighbouring pairs of that dataset."""

    make: Callable[[], dp.Plan]
    source: str
    data: Callable[[np.random.Generator], np.ndarray]
    pairs: Callable[[np.ndarray, np.random.Generator, Search], Pairs] = replace_pairs


def _two_clusters(n: int, d: int) -> Callable[[np.random.Generator], np.ndarray]:
    def make(rng: np.random.Generator) -> np.ndarray:
        X = rng.normal(size=(n, d))
        X[: n // 2, 0] += 20.0
        return X
    return make


def _one_tight_cluster(n: int, d: int) -> Callable[[np.random.Generator], np.ndarray]:
    """Exactly ``t`` = n / 4 (the target part size of k = 2) nearly equal rows, the rest spread thin: the terrific
    scores' worst case (mixtures.md 4.2).  The top t scores are the cluster's, each exactly t at the radii
    holding the cluster, so a cluster record moved into their annulus lowers each by 1 + lam and its own from t:
    close to the declared ``t (2 + lam)`` (no random dataset comes near it)."""
    def make(rng: np.random.Generator) -> np.ndarray:
        X = rng.uniform(-60.0, 60.0, size=(n, d))
        X[: math.ceil(n / 4)] = 20.0 * np.eye(d)[0] + 1e-3 * rng.normal(size=(math.ceil(n / 4), d))
        return X
    return make


def _heavy(n: int, d: int) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.standard_t(5, size=(n, d)) * np.linspace(3.0, 1.0, d) + 2.0


def _raw_scale(n: int, d: int) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.normal(size=(n, d)) * np.logspace(-2, 2, d) + np.linspace(-300.0, 5.0, d)


def _regression_rows(n: int, d: int) -> Callable[[np.random.Generator], np.ndarray]:
    def make(rng: np.random.Generator) -> np.ndarray:
        x = rng.normal(size=(n, d)) * 10.0 + 3.0
        return np.column_stack([x, np.ones(n), x @ np.linspace(1.0, -1.0, d) + rng.normal(size=n) + 25.0])
    return make


def _ordinal(n: int, N: int) -> Callable[[np.random.Generator], np.ndarray]:
    """A quarter of the rows in [0, N/16), the rest in [N/4, N/2): the worst-fitting dyadic intervals then have
    rows on their left, so a record can move from ``[0, a)`` into ``[a, b]`` (MERR's counts' l1 2/n)."""
    def make(rng: np.random.Generator) -> np.ndarray:
        x = rng.integers(N // 4, N // 2, size=n).astype(float)
        x[: n // 4] = rng.integers(0, N // 16, size=n // 4)
        return x
    return make


def _merr_pairs(N: int) -> Callable[[np.ndarray, np.random.Generator, Search], Pairs]:
    return lambda x, rng, search: ordinal_pairs(x, N, search.rows)


def _mixture(**kw: Any) -> Callable[[], dp.Plan]:
    """A mixture plan on ``N_ROWS`` rows; the large budget makes the small sample find its parts (the leaves'
    mechanisms then read rows), the sensitivities do not depend on it."""
    args: dict[str, Any] = {"d": 2, "n": N_ROWS, "k": 2, "budget": dp.ApproxZCDP(10_000, 1e-6), "radius": 100.0,
                            "sigma_range": (0.5, 2.0)}
    return lambda: mixtures.gaussian_mixture_plan(**(args | kw))


def _no_bounds_route(relation: str, budget: dp.Measure, d: int = 2) -> dp.Plan:
    """The per-column scale step (the first part of every no-bounds plan) and what the scaled estimators do with
    it, under ``relation``: the rows standardised by the released centres and scales, a private row radius,
    the clipped sum of the standardised rows and the row count (a second moment needs a public n)."""
    b = dp.PlanBuilder(budget=budget, neighbors=relation)
    X = b.source("X", dp.Vectors(d=d), n=N_ROWS if relation == "replace" else None)
    centre, scale = column_scales(X, d, 0.6)
    Z = standardize(X, centre, scale, d)
    r = private_radius(Z, of="rows", factor=1.5, weight=0.1, range_weight=0.1)
    return b.build(centre=centre, scale=scale, count=dp.nodes.LaplaceMech(weight=0.1)(dp.nodes.Count()(X)),
                   sum=dp.nodes.GaussianMech(weight=0.1)(dp.nodes.Sum()(dp.nodes.Clip(radius=r)(Z))))


HT = {"K": 100.0, "kurtosis": 1.0}  # kurtosis 1 and a large rho: preconditioning rounds at n = 40 (a loop)
PLANS: dict[str, Audited] = {
    # Gaussian mixtures
    "mixture_sample_aggregate": Audited(_mixture(), "X", _two_clusters(N_ROWS, 2)),
    "mixture_block_means": Audited(_mixture(means="blocks"), "X", _two_clusters(N_ROWS, 2)),
    "mixture_rpgmp": Audited(_mixture(method="rpgmp"), "X", _two_clusters(N_ROWS, 2)),
    "mixture_warmup": Audited(_mixture(method="warmup"), "X", _two_clusters(N_ROWS, 2)),
    "mixture_rpgmp_tight_cluster": Audited(_mixture(method="rpgmp"), "X", _one_tight_cluster(N_ROWS, 2)),
    "mixture_warmup_tight_cluster": Audited(_mixture(method="warmup"), "X", _one_tight_cluster(N_ROWS, 2)),
    "mixture_standardized": Audited(_mixture(budget=dp.ApproxDP(1000, 1e-6), standardize=True), "X",
                                    _two_clusters(N_ROWS, 2)),
    "mixture_one_component": Audited(_mixture(k=1, d=3), "X", _two_clusters(N_ROWS, 3)),
    # heavy-tailed covariance (HT_PCE) and its fit
    "ht_covariance": Audited(lambda: heavy_tailed.covariance(2, N_ROWS, dp.ZCDP(10_000), **HT), "X",
                             _heavy(N_ROWS, 2)),
    "ht_covariance_known_mean": Audited(lambda: heavy_tailed.covariance(2, N_ROWS, dp.ZCDP(10_000), unknown_mean=False,
                                                                        **HT), "X", _heavy(N_ROWS, 2)),
    "ht_fit_plan": Audited(lambda: heavy_tailed.plan(2, N_ROWS, dp.ZCDP(10_000), R=10.0, **HT), "X",
                           _heavy(N_ROWS, 2)),
    # the no-bounds scale steps
    "scale_step_zcdp": Audited(lambda: _no_bounds_route("replace", dp.ZCDP(1)), "X", _raw_scale(N_ROWS, 2)),
    "scale_step_add_remove": Audited(lambda: _no_bounds_route("add_remove", dp.ZCDP(1)), "X", _raw_scale(N_ROWS, 2),
                                     add_remove_pairs),
    "scaled_gaussian": Audited(lambda: gaussian.scaled_gaussian(2, N_ROWS, dp.ZCDP(1)), "X", _raw_scale(N_ROWS, 2)),
    "linear_regression_no_bounds": Audited(lambda: regression.LinearRegression(dp.ZCDP(1)).make_plan(2, N_ROWS), "Z",
                                           _regression_rows(N_ROWS, 2)),
    "scale_search_approx": Audited(lambda: unbounded.scale_plan(2, N_ROWS, dp.ApproxZCDP(1, 1e-6)), "X",
                                   _raw_scale(N_ROWS, 2)),
    "scale_search_approx_dp": Audited(lambda: unbounded.scale_plan(2, N_ROWS, dp.ApproxDP(1, 1e-6)), "X",
                                      _raw_scale(N_ROWS, 2)),
    "scale_search_zcdp": Audited(lambda: unbounded.scale_plan(2, N_ROWS, dp.ZCDP(1)), "X", _raw_scale(N_ROWS, 2)),
    "scale_search_pure": Audited(lambda: unbounded.scale_plan(2, N_ROWS, dp.PureDP(1)), "X", _raw_scale(N_ROWS, 2)),
    # MERR (a large budget: each round picks the worst-fitting interval, not one at random)
    "merr_pure": Audited(lambda: discrete.merr(64, 16, dp.PureDP(100), T=3), "X", _ordinal(16, 64), _merr_pairs(64)),
    "merr_zcdp": Audited(lambda: discrete.merr(64, 16, dp.ZCDP(100), T=3), "X", _ordinal(16, 64), _merr_pairs(64)),
}


def certified(name: str, exact: bool = False) -> Certified:
    with warnings.catch_warnings():  # small n: the plans' accuracy warnings are expected
        warnings.simplefilter("ignore", AccuracyWarning)
        return certify(PLANS[name].make(), exact_noise=exact)


def released_centres(cert: Certified, source: str, X: np.ndarray) -> tuple[np.ndarray, ...]:
    """Every finite released point of the rows' dimension (a released vector of length d, or a row of a released
    d-column matrix) of a run on ``X``, post-processed values included: the centres a plan clips and partitions
    around (bounding centre, part locations and means), so that pairs placed around them reach each ball's
    boundary from inside."""
    if X.ndim != 2:  # ordinal data: no centres
        return ()
    a = Replay(cert, {source: X})
    a.run()
    d = X.shape[1]
    out: dict[bytes, np.ndarray] = {}
    for nid, value in a.env.items():
        if not isinstance(cert.space.types.get(nid), ReleasedT):
            continue
        try:
            v = np.asarray(value, dtype=float)
        except (TypeError, ValueError):  # tuples of a stability histogram's keys and counts
            continue
        for p in ([v] if v.shape == (d,) else list(v) if v.ndim == 2 and v.shape[1] == d else []):
            if np.all(np.isfinite(p)):
                out[p.tobytes()] = p
    return tuple(out.values())


def findings(name: str, seed: int, search: Search = Search(), cert: Certified | None = None,
             ratios: dict[tuple[str, int], float] | None = None, noise: Any = None,
             stop: Callable[[str], bool] | None = None, targeted: bool = False) -> list[str]:
    """Everything the replay finds on the neighbours of ``name``'s dataset (seeded), in both directions; with
    ``targeted``, pairs are also placed around the centres D's run releases; with ``stop``, returns as soon as a
    finding satisfies it."""
    case = PLANS[name]
    cert = certified(name) if cert is None else cert
    rng = np.random.default_rng(seed)
    X = case.data(rng)
    if targeted:
        search = attrs.evolve(search, centres=released_centres(cert, case.source, X))
    out: list[str] = []
    for D, D2 in case.pairs(X, rng, search):
        for first, second in ((D, D2), (D2, D)):
            out += replay(cert, {case.source: first}, {case.source: second}, ratios, noise).found
            if stop is not None and any(stop(f) for f in out):
                return out
    return out


def kinds_and_inputs(cert: Certified) -> dict[str, list[tuple[TypedScope, str]]]:
    """Each mechanism kind of the plan, with the (scope, input id) of every mechanism of that kind."""
    out: dict[str, list[tuple[TypedScope, str]]] = {}

    def walk(space: TypedScope) -> None:
        for rec in space.order:
            if isinstance(rec.node, Mechanism):
                out.setdefault(rec.node.kind, []).append((space, rec.inputs[0]))
        for body in space.bodies.values():
            walk(body)

    walk(cert.space)
    return out


def halve(space: TypedScope, stat_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """MUTANT: the certified type of a mechanism's input declares half of each of its sensitivities (the noise,
    or the exponential mechanism's score scale, then shrinks with it)."""
    stat = space.types[stat_id]
    assert isinstance(stat, StatT)
    half = {k: None if getattr(stat, k) is None else getattr(stat, k) * 0.5 for k in NORMS}
    monkeypatch.setitem(space.types, stat_id, attrs.evolve(stat, **half))


# ------------------------------------------------------------------ tests

EXACT = ("merr_pure", "ht_covariance", "scale_step_zcdp")
EXACT_SLOW = ("scaled_gaussian", "mixture_sample_aggregate", "scale_search_zcdp", "merr_zcdp")  # exact draws: slow


@pytest.mark.parametrize("name", sorted(PLANS))
def test_every_mechanism_of_the_estimator_respects_its_certified_sensitivity(name: str) -> None:
    assert findings(name, seed=1) == []


@pytest.mark.parametrize("name", [*EXACT, *(pytest.param(n, marks=pytest.mark.slow) for n in EXACT_SLOW)])
def test_the_replay_on_the_exact_lattice_path(name: str) -> None:
    """The same replay with an exact noise source: the Laplace and Gaussian mechanisms take their lattice path
    (fixed-point sums), the quantiles and MERR's exponential mechanism their exact samplers."""
    assert findings(name, seed=5, cert=certified(name, exact=True), noise=dp.SeededNoise(0, exact=True)) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PLANS))
def test_more_rows_seeds_and_distances(name: str) -> None:
    """Three rows (the first, the eighth, the last: both clusters of the mixtures), two more datasets and
    twice as many distances from the clusters' centres."""
    for seed in (2, 3):
        assert findings(name, seed=seed, search=Search(rows=(0, 7, -1), radii=RADII)) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PLANS))
def test_pairs_around_the_centres_the_plan_releases(name: str) -> None:
    """Targeted neighbours: pairs placed around every centre D's run releases (bounding centre, part locations,
    part means), from inside each ball the plan clips and partitions around."""
    assert findings(name, seed=1, search=Search(rows=(0, -1)), targeted=True) == []


def test_the_audited_plans_are_the_ones_the_estimators_run() -> None:
    """The estimators' user surfaces (GaussianMixture, heavy_tailed.fit, LinearRegression without bounds) run
    exactly the plans audited here."""
    rng = np.random.default_rng(0)
    X = _two_clusters(N_ROWS, 2)(rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AccuracyWarning)
        for method, name in (("sample_aggregate", "mixture_sample_aggregate"), ("rpgmp", "mixture_rpgmp"),
                             ("warmup", "mixture_warmup")):
            gm = mixtures.GaussianMixture(2, dp.ApproxZCDP(10_000, 1e-6), radius=100.0, sigma_range=(0.5, 2.0),
                                          method=method, noise=dp.SeededNoise(0)).fit(X)
            assert gm.plan_ is not None
            # the estimator's plan also states its predicted error (a public node, no cost): the audited plan
            # with the same statement is the same plan
            (pred,) = gm.plan_.check().predictions
            kw = {} if method == "sample_aggregate" else {"method": method}
            assert gm.plan_.hash == _mixture(prediction=pred, **kw)().hash
            costs = [[(e.kind, e.event.share) for e in plan.check().entries if e.event]
                     for plan in (gm.plan_, PLANS[name].make())]
            assert costs[0] == costs[1]  # the audited plan: the same mechanisms at the same shares
        f = heavy_tailed.fit(X, dp.ZCDP(10_000), mean_bound=10.0, cov_bound=HT["K"], kurtosis=HT["kurtosis"],
                             noise=dp.SeededNoise(0))
        assert f.plan.hash == PLANS["ht_fit_plan"].make().hash
        Z = _regression_rows(N_ROWS, 2)(rng)
        lr = regression.LinearRegression(dp.ZCDP(1), noise=dp.SeededNoise(0)).fit(Z[:, :2], Z[:, 3])
        assert lr.plan_ is not None and lr.plan_.hash == PLANS["linear_regression_no_bounds"].make().hash


@pytest.mark.parametrize("name", sorted(PLANS))
def test_a_halved_sensitivity_of_each_mechanism_kind_is_flagged(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit can fail: for each mechanism kind of the plan, halving the declared sensitivities of every
    mechanism of that kind (in loop bodies too) is flagged on the shipped neighbours, in the norm (or rank) that
    kind's noise is calibrated to."""
    cert = certified(name)
    kinds = kinds_and_inputs(cert)
    assert kinds
    for kind, inputs in sorted(kinds.items()):
        with monkeypatch.context() as m:
            for space, stat_id in dict.fromkeys(inputs):
                halve(space, stat_id, m)

            def flags(f: str, kind: str = kind) -> bool:  # exceeded in the norm the noise is calibrated to
                return f"({kind}): realised {NORM_OF[kind]} change" in f and "exceeds the declared" in f

            found = findings(name, seed=1, cert=cert, stop=flags)
            assert any(flags(f) for f in found), (kind, found[:5])


# ------------------------------------------------------------------ gaussian.fit without bounds: two plans


def _fit_plans(X: np.ndarray, budget: dp.Measure, monkeypatch: pytest.MonkeyPatch) -> list[tuple[dp.Plan, Any, Any]]:
    """The plans ``gaussian.fit`` runs on ``X`` without bounds, with the data and the release of each."""
    calls: list[tuple[dp.Plan, Any, Any]] = []
    original = dp.Plan.run

    def run(plan: dp.Plan, data: Any, **options: Any) -> Any:
        res = original(plan, data, **options)
        calls.append((plan, data, res.released))
        return res

    with monkeypatch.context() as m, warnings.catch_warnings():
        warnings.simplefilter("ignore", AccuracyWarning)
        m.setattr(dp.Plan, "run", run)
        # the two-plan route (the eigenvalue search, then CoinPress), forced: at this n the route choice may
        # prefer the one-plan per-column route, audited as scaled_gaussian
        gaussian.fit(X, budget=budget, noise=dp.SeededNoise(0, exact=False), route="kmssu")
    return calls


@pytest.mark.parametrize("budget", [dp.ZCDP(10_000), dp.PureDP(1000), dp.ApproxZCDP(10_000, 1e-6)], ids=repr)
def test_gaussian_fit_without_bounds_end_to_end(budget: dp.Measure, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole no-bounds fit: the scale search replayed on D and D'; then the second plan, built from D's
    release, replayed on D and D' moved and scaled by D's released centre and floor (a public row map, so the
    mapped rows are neighbours too).  Each plan's realised cost is within its certified one, and the two
    certified costs add up to within the fit's budget (sequential composition)."""
    rng = np.random.default_rng(7)
    X = _raw_scale(N_ROWS, 2)(rng)
    (p1, data1, rel1), (p2, data2, _) = _fit_plans(X, budget, monkeypatch)
    c1, c2 = certify(p1), certify(p2)
    sc = unbounded.bounds_from(rel1, 2)
    assert sc.found
    assert np.array_equal(data2["X"], (X - sc.center) / math.sqrt(sc.lower))  # the fit's public row map
    total = budget.epsilon if isinstance(budget, dp.PureDP) else budget.rho
    reached = 0
    for D, D2 in replace_pairs(X, rng, Search(radii=RADII[::4])):
        for first, second in ((D, D2), (D2, D)):
            o1 = replay(c1, {"X": first}, {"X": second})
            assert o1.found == []
            for name, value in rel1.items() if first is X else ():  # the replay's run of X is the fit's own
                assert np.array_equal(np.asarray(o1.released[name]), np.asarray(value), equal_nan=True)
            s = unbounded.bounds_from(o1.released, 2)
            if not s.found:  # the private "not found": the fit stops, nothing more is read
                continue
            reached += 1
            if first is X:
                c2_here = c2
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", AccuracyWarning)
                    c2_here = certify(gaussian.gaussian(d=2, n=N_ROWS, budget=p2.budget, R=s.R, K=s.K))
            with np.errstate(all="ignore"):
                mapped = [(Z - s.center) / math.sqrt(s.lower) for Z in (first, second)]
            o2 = replay(c2_here, {"X": mapped[0]}, {"X": mapped[1]})
            assert o2.found == []
            assert o1.certified + o2.certified <= Fraction(total)
    assert reached > 0


def worst_ratios(name: str, seed: int = 1) -> dict[tuple[str, int], float]:
    """Per invocation, the largest realised / declared change over the default neighbours, in the mechanism's
    own norm: how tight each certified sensitivity is on these neighbours (docs/assurance.md)."""
    ratios: dict[tuple[str, int], float] = {}
    findings(name, seed=seed, ratios=ratios)
    return ratios


if __name__ == "__main__":  # python tests/audit/test_replay_estimators.py: the tightness table
    for plan_name in PLANS:
        worst = worst_ratios(plan_name)
        by_kind: dict[str, list[float]] = {}
        for (path, _), v in worst.items():
            by_kind.setdefault(path.rsplit(".", 1)[-1].rsplit("_", 1)[0], []).append(v)
        print(plan_name, {k: f"{len(v)} invocations, min {min(v):.2f}, max {max(v):.2f}" for k, v in by_kind.items()})
