"""Robustness grid (issue 29, "Evidence"): dpflow given NO bounds against diffprivlib given the TRUE bounds,
OpenDP given the true bounds, and the non-private estimate, over table sizes, dimensions, budgets and data
shapes, on the same neighbouring relation.

Grid (full): d in {1, 5, 20, 50}, n in {200, 500, 2,000, 10,000, 100,000, 10^6}, epsilon in {0.5, 1, 4};
synthetic data ``gauss`` (condition number 1, mean 0), ``gauss-k1e4`` (condition number 1e4, variances from
1e-2 to 1e2, randomly rotated), ``gauss-mu1e6`` (||mu|| = 1e6), ``gauss-k1e4-mu1e6`` (both) and ``t5``
(multivariate t with 5 degrees of freedom, identity covariance); cells with n * d above ``--max-nd``
(default 2e6) are skipped (``gaussian.fit`` at d = 50, n = 1e5 alone takes about 25 s a run); then the
tables that ship with scikit-learn (diabetes raw, wine, breast cancer, iris; nothing is downloaded), each at
its own n and d.  Statistics per cell (the subset that fits ~30 minutes on 2 shared cores):

* synthetic: ``mean`` and ``covariance`` of ``dp.estimators.gaussian.fit(X, ApproxDP(eps, 1e-6))``
  (Mahalanobis errors ``||Sigma^-1/2 (m - mu)||`` and ``||Sigma^-1/2 S Sigma^-1/2 - I||_2`` against the
  population), ``median`` of the first column (``dp.stats`` quantiles, ``PureDP(eps)``: the exponential
  mechanism is pure; error = |F(estimate) - 1/2| under the population CDF);
* tables: the same three (median of every column, errors against the table's own statistics, Mahalanobis
  with the table's covariance, rank error under the table's CDF), plus ``column means`` (``dp.stats`` mean of
  every column, ``ApproxDP(eps, 1e-6)``; l2 of the errors in units of each column's standard deviation), a
  ``histogram`` of the label column as a one-hot ``dp.Category`` (``PureDP(eps)``; l1 count error / n; the
  diabetes label is the sex column), ``regression`` on diabetes (``dp.estimators.LinearRegression``, 352
  training rows, R^2 on the other 90: error = least squares' R^2 minus the private R^2) and ``mixture`` on iris
  and wine (``dp.estimators.mixtures.GaussianMixture(standardize=True)``; error = scikit-learn
  GaussianMixture's adjusted Rand index minus the private one).

Neighbouring relation: dpflow's is ``replace`` (n public).  diffprivlib's epsilon is add/remove, so it gets
epsilon / 2 (a replacement is one removal and one addition: add/remove epsilon / 2 gives replace epsilon),
split evenly (basic composition) over the columns it releases, and as dpflow's fit spends its budget on the
mean and the covariance, half for each (its covariance: the mean above, then ``covariance_eig`` of the
centred rows given their true largest norm, as diffprivlib's PCA does).  OpenDP is run with a symmetric
distance d_in = 2 (one replacement) on sized inputs: Gaussian noise at the zCDP rho of (epsilon, 1e-6)
(half of it for the mean beside a covariance, which OpenDP does not have) split over the columns, Laplace
or the exponential mechanism at epsilon where dpflow's route is pure.  diffprivlib's mechanisms are pure
(delta = 0).  diffprivlib's covariance runs only where n * d <= 5e5 (its Bingham sampler takes minutes
beyond), and any comparator run longer than 20 s is left out and listed.  Errors are reported absolute
and as a ratio to the non-private estimate's error (synthetic: against the population; tables: the median
bootstrap error of the non-private statistic).

Summaries: (1) the fraction of cells (data, d, n, epsilon, statistic) where any dpflow output was NaN or
infinite in any seed (target 0); (2) among cells where diffprivlib's own error is below the data's spread
(mean sqrt(d), covariance 1, median 1/4 (the quartiles), histogram 1, regression and mixture the non-private score), the
fraction where dpflow's median error is at most diffprivlib's (target >= 90%); (3) every prediction a dpflow
ledger carries (``report.ledger.predictions``, read generically by output name and metric, in the units of
the plan that made it) against the measured error, against the non-private statistic on the same rows and,
for synthetic data, against the population (target: within in >= 95% at the stated confidence), also on
the cells whose data meet the prediction's stated condition (``Prediction.given``: :func:`condition_met`); outputs
without a prediction are listed; (4) heatmaps of the dpflow / non-private error ratio over (n, d) per
epsilon and data kind.  AccuracyWarnings are counted per cell ("warned"); a cell is bad when an output is
non-finite, the run raised, or the error is above the data's spread; silent-bad cells (bad, not warned) are
listed apart.

    python benchmarks/robustness.py [--quick] [--seeds 3] [--out benchmarks/results]

``--quick`` (one seed, d in {1, 5}, n in {500, 10,000}, epsilon 1, all data kinds and tables) runs in under
a minute; ``--out DIR`` writes ``robustness.md`` (``robustness_quick.md`` with ``--quick``) and the heatmaps
``robustness[_quick]_<statistic>.png``.  diffprivlib, OpenDP and matplotlib are optional (``pip install
'.[bench]'``): a missing one is reported as such.
"""

from __future__ import annotations

import argparse
import math
import re
import signal
import threading
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import numpy as np
from mixtures import _match
from stamp import stamp
from unbounded import _gaussian_data, mvt

import dpflow as dp
from dpflow.estimators import LinearRegression
from dpflow.estimators import gaussian as G
from dpflow.estimators.mixtures import GaussianMixture
from dpflow.planner.accuracy import Prediction

DELTA = 1e-6
DS_FULL, NS_FULL, EPS_FULL = (1, 5, 20, 50), (200, 500, 2_000, 10_000, 100_000, 1_000_000), (0.5, 1.0, 4.0)
DS_QUICK, NS_QUICK, EPS_QUICK = (1, 5), (500, 10_000), (1.0,)
KINDS = {"gauss": (1.0, 0.0), "gauss-k1e4": (1e4, 0.0), "gauss-mu1e6": (1.0, 1e6), "gauss-k1e4-mu1e6": (1e4, 1e6),
         "t5": (1.0, 0.0)}
TABLES = ("diabetes", "wine", "breast_cancer", "iris")
MIXTURE_TABLES = ("iris", "wine")
BOOTSTRAP = 10
COMPARATOR_SECONDS = 20
"""A comparator run stops after this long and is then left out of the comparison (listed)."""
DPL_COV_MAX_ND = 500_000
"""diffprivlib's covariance runs only where n * d is at most this: its Bingham sampler for the eigenvectors
takes minutes beyond (d = 20, n = 1e5: more than 2 minutes)."""
MEDIAN_SPREAD = 0.25
"""A median whose rank error reaches 1/4 is outside the interquartile range: no better than the data's spread."""
HEATMAP_STATS = ("mean", "covariance", "median")


# --------------------------------------------------------------------------- the other libraries


def _diffprivlib() -> Any:
    """diffprivlib, or None when it is not installed (0.6 imports two names scikit-learn 1.7+ removed)."""
    try:
        import sklearn.tree._tree as tree

        for name, value in (("DOUBLE", np.float64), ("DTYPE", np.float32)):
            if not hasattr(tree, name):
                setattr(tree, name, value)
        import diffprivlib
        import diffprivlib.models.utils  # noqa: F401  (covariance_eig)
    except ImportError:
        return None
    return diffprivlib


def _opendp() -> Any:
    try:
        import opendp.prelude as odp
    except ImportError:
        return None
    odp.enable_features("contrib")
    return odp


def rho_of(eps: float, delta: float) -> float:
    """The largest zCDP rho whose conversion rho + 2 sqrt(rho ln(1/delta)) is at most (eps, delta)-DP."""
    L = math.log(1.0 / delta)
    return (math.sqrt(L + eps) - math.sqrt(L)) ** 2


def _box(col: np.ndarray) -> tuple[float, float]:
    lo, hi = float(np.min(col)), float(np.max(col))
    return (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)


def dpl_means(dpl: Any, X: np.ndarray, eps: float, rng: np.random.RandomState) -> np.ndarray:
    """diffprivlib's mean of each column given its true min and max, ``eps`` split evenly over the columns."""
    d = X.shape[1]
    return np.array([dpl.tools.mean(X[:, j], epsilon=eps / d, bounds=_box(X[:, j]), random_state=rng)
                     for j in range(d)])


def dpl_covariance(dpl: Any, X: np.ndarray, mean: np.ndarray, eps: float, rng: np.random.RandomState) -> np.ndarray:
    """diffprivlib's PCA covariance: ``covariance_eig`` of the rows centred at the private mean, given their true
    largest norm."""
    Z = X - mean
    norm = float(np.linalg.norm(Z, axis=1).max()) or 1.0
    w, V = dpl.models.utils.covariance_eig(Z, epsilon=eps, norm=norm, random_state=rng)
    return np.asarray((V * w) @ V.T / len(X), dtype=float)


def odp_means(odp: Any, X: np.ndarray, rho: float) -> np.ndarray:
    """OpenDP's sized bounded mean of each column (true bounds, d_in = 2) with Gaussian noise, rho split evenly."""
    n, d = X.shape
    out = []
    for j in range(d):
        lo, hi = _box(X[:, j])
        t = odp.t.make_mean(odp.vector_domain(odp.atom_domain(bounds=(lo, hi)), size=n), odp.symmetric_distance())
        m = t >> odp.m.then_gaussian(float(t.map(2)) / math.sqrt(2.0 * rho / d) * 1.0001)
        assert m.map(2) <= rho / d
        out.append(m(np.clip(X[:, j], lo, hi).tolist()))
    return np.array(out, dtype=float)


def odp_median(odp: Any, col: np.ndarray, eps: float) -> float:
    """OpenDP's private median (exponential mechanism over 1,024 candidates between the true min and max)."""
    lo, hi = _box(col)
    dom = odp.vector_domain(odp.atom_domain(T=float, nan=False), size=len(col))
    cands = np.linspace(lo, hi, 1024).tolist()

    def make(scale: float) -> Any:
        return odp.m.make_private_quantile(dom, odp.symmetric_distance(), odp.max_divergence(), cands, 0.5, scale)

    return float(make(odp.binary_search_param(make, d_in=2, d_out=eps))(col.tolist()))


def odp_counts(odp: Any, codes: np.ndarray, k: int, eps: float) -> np.ndarray:
    """OpenDP's counts by category (Laplace, d_in = 2)."""
    t = odp.t.make_count_by_categories(odp.vector_domain(odp.atom_domain(T=int)), odp.symmetric_distance(),
                                       categories=list(range(k)), null_category=False)

    def make(scale: float) -> Any:
        return t >> odp.m.then_laplace(scale)

    return np.asarray(make(odp.binary_search_param(make, d_in=2, d_out=eps))(codes.astype(int).tolist()), float)


# --------------------------------------------------------------------------- errors


def inv_sqrt(S: np.ndarray) -> np.ndarray:
    w, V = np.linalg.eigh(S)
    return np.asarray((V / np.sqrt(np.maximum(w, 1e-300))) @ V.T)


def _finite(*xs: Any) -> bool:
    return all(np.all(np.isfinite(np.asarray(x, dtype=float))) for x in xs)


def maha_mean(m: np.ndarray, mu: np.ndarray, W: np.ndarray) -> float:
    return float(np.linalg.norm(W @ (np.asarray(m, float) - mu))) if _finite(m) else math.inf


def maha_cov(C: np.ndarray, S: np.ndarray, W: np.ndarray) -> float:
    if not _finite(C):
        return math.inf
    return float(np.linalg.norm(W @ np.asarray(C, float) @ W.T - np.eye(len(S)), 2))


def rank_error(x: float, cdf: Callable[[float], float]) -> float:
    return abs(cdf(x) - 0.5) if math.isfinite(x) else math.inf


def empirical_cdf(col: np.ndarray) -> Callable[[float], float]:
    """The mid-rank CDF of the rows (ties count half), so the sample median has rank error about 0."""
    s = np.sort(col)
    return lambda x: float(np.searchsorted(s, x, "left") + np.searchsorted(s, x, "right")) / (2 * len(s))




# --------------------------------------------------------------------------- predicted vs measured


class Target:
    """One dpflow output, for checking the ledger's predictions about it: the estimate and the truths
    (``sample``: the non-private statistic of the same rows; ``pop``: the population's, synthetic data only)
    in the units of the plan that released it, with what each metric needs (``W``: Sigma^-1/2 for Mahalanobis
    metrics; ``cdf``: for rank errors at quantile ``level``)."""

    def __init__(self, est: Any, sample: Any, pop: Any = None, W: tuple[Any, Any] = (None, None),
                 cdf: tuple[Any, Any] = (None, None), level: Any = None, step_ok: bool = True) -> None:
        self.est, self.truths = est, {"sample": (sample, W[0], cdf[0]), "pop": (pop, W[1], cdf[1])}
        self.level, self.step_ok = level, step_ok


def measured(metric: str, t: Target, against: str) -> float | None:
    """The error of ``t`` in ``metric`` (matched by keywords; None when the metric is not one this harness
    knows, or the truth is not known)."""
    truth, W, cdf = t.truths[against]
    m = metric.lower()
    if truth is None and not ("rank" in m or "kolmogorov" in m):
        return None
    est = np.asarray(t.est, dtype=float)
    if not _finite(est):
        return math.inf
    if "rank" in m or "kolmogorov" in m:
        if cdf is None or t.level is None:
            return None
        return max(abs(cdf(float(x)) - float(q)) for x, q in zip(np.ravel(est), np.ravel(t.level), strict=True))
    tr = np.asarray(truth, dtype=float)
    if est.shape != tr.shape:  # fewer parts found than asked (a mixture's typed "not found"): nothing matched
        return math.inf
    diff = est - tr
    if "centre" in m or "center" in m:
        return _match(est, tr)[1]
    if "mahalanobis" in m or "relative spectral" in m:
        if W is None:
            return None
        return maha_cov(est, tr, W) if est.ndim == 2 else maha_mean(est, tr, W)
    if "r^2" in m or "r2" in m:
        return float(np.max(tr - est))
    if "spectral" in m or "operator" in m:
        return float(np.linalg.norm(diff, 2)) if diff.ndim == 2 else float(np.linalg.norm(diff))
    if "frobenius" in m:
        return float(np.linalg.norm(diff))
    if "l1" in m or "total variation" in m:
        return float(np.abs(diff).sum())
    if "linf" in m or "max" in m:
        return float(np.abs(diff).max())
    if "l2" in m:
        return float(np.linalg.norm(diff))
    if "abs" in m:
        return float(np.abs(diff).max())
    return None


def _key(name: str) -> str:
    return re.sub(r"[^0-9a-z]", "", name.lower())


def _attribute_predictions(obj: Any) -> list[Prediction]:
    """The :class:`Prediction` records an estimator or result keeps as attributes (directly, in a list, tuple or
    dict, or as fields of an attrs record such as a route's forecast)."""
    found: list[Prediction] = []

    def visit(v: Any, depth: int) -> None:
        if isinstance(v, Prediction):
            found.append(v)
        elif depth and isinstance(v, (list, tuple)):
            for x in v:
                visit(x, depth - 1)
        elif depth and isinstance(v, dict):
            for x in v.values():
                visit(x, depth - 1)
        elif depth and attrs.has(type(v)):
            for f in attrs.fields(type(v)):
                visit(getattr(v, f.name, None), depth - 1)

    for name in dir(obj):
        if name.startswith("_") or name in ("report", "report_", "plan", "plan_"):
            continue
        try:
            value = getattr(obj, name)
        except Exception:  # noqa: BLE001  (a property that needs a fit, say)
            continue
        if not callable(value):
            visit(value, 2)
    return found


def condition_met(given: str, data: str, step_ok: bool = True) -> bool:
    """Whether the data of a cell meets a prediction's stated condition (``Prediction.given``), where this
    harness knows: "Gaussian rows" holds on the synthetic Gaussian kinds only (not on t5, nor on the tables); "the
    private scale step succeeds" as :func:`step_located` judged the released interval (``step_ok``); any other
    condition is counted as met."""
    if "scale step succeeds" in given and not step_ok:
        return False
    return "Gaussian rows" not in given or data.startswith("gauss")


def step_located(interval: Any, col: np.ndarray) -> bool:
    """A proxy for "the private scale step succeeded" on one column (dp.stats' released interval ``(lo, hi)``): the
    interval holds the column's median and its half-width is between 1 and 100 standard deviations (the step
    aims at ``sqrt(2 ln n)``, 2.5 to 5.3 of them; a failed step is off by orders of magnitude)."""
    lo, hi = (float(x) for x in interval)
    sd = float(np.std(col))
    return bool(lo <= float(np.median(col)) <= hi and sd <= (hi - lo) / 2 <= 100.0 * sd) if sd > 0 else False


def check_predictions(sources: Sequence[Any], targets: dict[str, Target], where: dict[str, Any]
                      ) -> tuple[list[dict[str, Any]], list[str]]:
    """Every prediction in the sources' ledgers (``report.ledger.predictions``) or attributes against the
    measured error of the output it names; and the outputs that carry none."""
    keyed = {_key(k): (k, t) for k, t in targets.items()}
    rows, covered, seen = [], set(), set()
    for src in sources:
        ledger = getattr(src, "ledger", None)
        listed = list(getattr(ledger, "predictions", ()) or ()) if ledger is not None else _attribute_predictions(src)
        for p in listed:
            if (p.output, p.metric, p.value, p.route) in seen:
                continue
            seen.add((p.output, p.metric, p.value, p.route))
            name, t = keyed.get(_key(p.output), (p.output, None))
            row = {**where, "output": p.output, "metric": p.metric, "value": float(p.value),
                   "confidence": float(p.confidence), "route": p.route, "sample": None, "pop": None,
                   "met": condition_met(getattr(p, "given", ""), str(where.get("data", "")), t is None or t.step_ok)}
            if t is not None:
                covered.add(name)
                row["sample"], row["pop"] = measured(p.metric, t, "sample"), measured(p.metric, t, "pop")
            rows.append(row)
    return rows, [k for k in targets if k not in covered]


# --------------------------------------------------------------------------- running dpflow


@contextmanager
def _recorded() -> Iterator[list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def run_dpflow(fn: Callable[[], Any]) -> tuple[Any, int, str]:
    """``fn()``, the number of AccuracyWarnings it emitted, and the exception it raised ("" if none: a refusal
    is loud, so recorded, not fatal)."""
    with _recorded() as caught:
        try:
            out, raised = fn(), ""
        except Exception as e:  # noqa: BLE001  (any refusal is a measured outcome)
            out, raised = None, f"{type(e).__name__}: {str(e)[:160]}"
    return out, sum(issubclass(w.category, dp.AccuracyWarning) for w in caught), raised


class _TimeLimit(Exception):
    pass


@contextmanager
def _time_limit(seconds: int) -> Iterator[None]:
    """Stop the block after ``seconds`` (SIGALRM: a Unix main thread; elsewhere no limit)."""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise _TimeLimit

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


class Cell:
    """The rows of one (data, d, n, epsilon, seed): per statistic and method its error; dpflow's flags."""

    def __init__(self, data: str, d: int, n: int, eps: float, seed: int) -> None:
        self.where = {"data": data, "d": d, "n": n, "eps": eps, "seed": seed}
        self.rows: list[dict[str, Any]] = []
        self.preds: list[dict[str, Any]] = []
        self.unpredicted: list[tuple[str, str]] = []
        self.timeouts: list[str] = []

    def add(self, stat: str, method: str, error: float, spread: float, np_error: float = math.nan,
            nonfinite: bool = False, warned: int = 0, raised: str = "", cost: float = math.nan) -> None:
        """One method's error; ``cost`` is its error against the non-private statistic of the same rows (the
        privacy cost alone), where the error is against the population."""
        self.rows.append({**self.where, "stat": stat, "method": method, "error": float(error), "spread": spread,
                          "np_error": float(np_error), "nonfinite": nonfinite, "warned": warned, "raised": raised,
                          "cost": float(cost)})

    def other(self, stat: str, method: str, fn: Callable[[], float | tuple[float, float]], spread: float) -> None:
        """A comparator's error, or (error, cost) (its library missing: not recorded; its failure: infinite; a
        run longer than :data:`COMPARATOR_SECONDS`: not recorded, listed in ``timeouts``)."""
        try:
            with _time_limit(COMPARATOR_SECONDS):
                out = fn()
        except _TimeLimit:
            self.timeouts.append(f"{method} {stat}")
            return
        except Exception:  # noqa: BLE001  (a comparator that fails is shown as inf)
            out = (math.inf, math.inf)
        err, cost = out if isinstance(out, tuple) else (out, math.nan)
        self.add(stat, method, err, spread, cost=cost)

    def predictions(self, stat: str, reports: Sequence[Any], targets: dict[str, Target]) -> None:
        rows, missing = check_predictions(reports, targets, {**self.where, "stat": stat})
        self.preds += rows
        self.unpredicted += [(stat, m) for m in missing]


def scales_located(f: Any, X: np.ndarray) -> bool:
    """A proxy for "the private scale step succeeded" on gaussian.fit's per-column route (its released ``centre``
    and ``scale``, as the condition states it): every centre within 4 standard deviations of its column's mean and
    every scale within a factor 2 of its standard deviation.  True where no such step ran."""
    out = getattr(getattr(f.report, "execution", None), "released", {}) or {}
    if "centre" not in out or "scale" not in out:
        return True
    c, s = np.ravel(np.asarray(out["centre"], float)), np.ravel(np.asarray(out["scale"], float))
    mu, sd = X.mean(axis=0), X.std(axis=0)
    return bool(np.all(np.abs(c - mu) <= 4.0 * sd) and np.all((s >= sd / 2.0) & (s <= 2.0 * sd)))


def _fit_targets(f: Any, sample: tuple[np.ndarray, np.ndarray], pop: tuple[Any, Any],
                 step_ok: bool = True) -> dict[str, Target]:
    """gaussian.fit's mean and covariance in the units of the plan that released them: without bounds, the
    rows recentred at the scale search's centre and divided by sqrt of its floor, or (the per-column route)
    standardised by the released column centres and scales."""
    bounds = getattr(getattr(f, "scale", None), "bounds", None)
    out = getattr(getattr(f.report, "execution", None), "released", {}) or {}
    c: Any = 0.0
    s: Any = 1.0
    if getattr(bounds, "found", False):
        c, s = np.asarray(bounds.center, float), math.sqrt(float(bounds.lower))
    elif "centre" in out and "scale" in out:
        c, s = np.ravel(np.asarray(out["centre"], float)), np.ravel(np.asarray(out["scale"], float))

    def m(v: Any) -> Any:
        return None if v is None else (np.asarray(v, float) - c) / s

    def C(v: Any) -> Any:
        return None if v is None else np.asarray(v, float) / np.outer(s, s)

    Ws = inv_sqrt(C(sample[1]))
    Wp = None if pop[1] is None else inv_sqrt(C(pop[1]))
    return {"mean": Target(m(f.mean), m(sample[0]), m(pop[0]), (Ws, Wp), step_ok=step_ok),
            "covariance": Target(C(f.covariance), C(sample[1]), C(pop[1]), (Ws, Wp), step_ok=step_ok)}


def _reports(f: Any) -> list[Any]:
    """Where a fit's predictions are: its plans' ledgers, then its own attributes."""
    scale = getattr(f, "scale", None)
    return [f.report] + ([scale.report] if scale is not None else []) + [f]


def _cov(X: np.ndarray) -> np.ndarray:
    Z = X - X.mean(axis=0)
    return np.asarray(Z.T @ Z / len(X))


def fit_cell(cell: Cell, X: np.ndarray, eps: float, seed: int, mu: np.ndarray, Sigma: np.ndarray,
             np_errors: tuple[float, float], population: bool, libs: dict[str, Any]) -> None:
    """``mean`` and ``covariance``: gaussian.fit without bounds vs diffprivlib (true box, true row norm) vs
    OpenDP (mean only, true box) vs the non-private estimate (errors against ``mu``, ``Sigma``)."""
    d = X.shape[1]
    W = inv_sqrt(Sigma)
    xbar, S = X.mean(axis=0), _cov(X)
    Ws = inv_sqrt(S)
    f, warned, raised = run_dpflow(lambda: G.fit(X, dp.ApproxDP(eps, DELTA), noise=dp.SeededNoise(seed)))
    spread = {"mean": math.sqrt(d), "covariance": 1.0}
    if f is None:
        for stat in spread:
            cell.add(stat, "dpflow", math.inf, spread[stat], np_errors[stat == "covariance"], False, warned, raised)
    else:
        bad = not _finite(f.mean, f.covariance)
        cell.add("mean", "dpflow", maha_mean(f.mean, mu, W), spread["mean"], np_errors[0], bad, warned,
                 cost=maha_mean(f.mean, xbar, Ws))
        cell.add("covariance", "dpflow", maha_cov(f.covariance, Sigma, W), 1.0, np_errors[1], bad, warned,
                 cost=maha_cov(f.covariance, S, Ws))
        pop = (mu, Sigma) if population else (None, None)
        cell.predictions("mean+covariance", _reports(f), _fit_targets(f, (X.mean(axis=0), _cov(X)), pop,
                                                                      scales_located(f, X)))
    dpl, odp = libs["diffprivlib"], libs["opendp"]
    if dpl is not None:
        rng = np.random.RandomState(seed)
        m = np.full(d, math.inf)

        def mean() -> tuple[float, float]:
            m[:] = dpl_means(dpl, X, eps / 4, rng)
            return maha_mean(m, mu, W), maha_mean(m, xbar, Ws)

        def cov() -> tuple[float, float]:
            C = dpl_covariance(dpl, X, m, eps / 4, rng)
            return maha_cov(C, Sigma, W), maha_cov(C, S, Ws)

        cell.other("mean", "diffprivlib", mean, spread["mean"])
        if X.size <= DPL_COV_MAX_ND:
            cell.other("covariance", "diffprivlib", cov, 1.0)
    if odp is not None:
        def odp_mean() -> tuple[float, float]:
            m2 = odp_means(odp, X, rho_of(eps, DELTA) / 2)
            return maha_mean(m2, mu, W), maha_mean(m2, xbar, Ws)

        cell.other("mean", "opendp", odp_mean, spread["mean"])


def median_cell(cell: Cell, X: np.ndarray, eps: float, seed: int, cdfs: list[Callable[[float], float]],
                np_error: float, pop_cdf: Callable[[float], float] | None, libs: dict[str, Any]) -> None:
    """``median`` of every column of ``X`` (mean rank error over the columns): dp.stats without bounds under
    PureDP(eps) vs diffprivlib (eps / 2 over the columns, true bounds) vs OpenDP (eps over the columns)."""
    d = X.shape[1]
    names = [f"c{j}" for j in range(d)]
    data = {nm: X[:, j] for j, nm in enumerate(names)}
    sample = [empirical_cdf(X[:, j]) for j in range(d)]

    def errors(est: Sequence[float]) -> tuple[float, float]:
        """The mean rank error over the columns against ``cdfs`` and against the rows' own CDFs."""
        e = [float(np.mean([rank_error(x, c) for x, c in zip(est, cs, strict=True)])) for cs in (cdfs, sample)]
        return e[0], e[1]

    def ask() -> Any:
        q = dp.stats.Statistics(budget=dp.PureDP(eps))
        for nm in names:
            q.quantiles(nm, [0.5])
        return q.run(data, noise=dp.SeededNoise(seed))

    res, warned, raised = run_dpflow(ask)
    if res is None:
        cell.add("median", "dpflow", math.inf, MEDIAN_SPREAD, np_error, False, warned, raised)
    else:
        est = [float(np.ravel(res[f"quantiles({nm})"])[0]) for nm in names]
        err, cost = errors(est)
        cell.add("median", "dpflow", err, MEDIAN_SPREAD, np_error, not _finite(est), warned, cost=cost)
        located = {nm: nm not in res.bounds or step_located(res.bounds[nm], X[:, j]) for j, nm in enumerate(names)}
        targets = {f"quantiles({nm})": Target(np.ravel(res[f"quantiles({nm})"]), [np.median(X[:, j])],
                                               None if pop_cdf is None or j else [pop_median(pop_cdf)],
                                               cdf=(empirical_cdf(X[:, j]), pop_cdf if j == 0 else None),
                                               level=[0.5], step_ok=located[nm]) for j, nm in enumerate(names)}
        cell.predictions("median", [res.report, res], targets)
    dpl, odp = libs["diffprivlib"], libs["opendp"]
    if dpl is not None:
        rng = np.random.RandomState(seed)
        cell.other("median", "diffprivlib", lambda: errors([
            dpl.tools.median(X[:, j], epsilon=eps / 2 / d, bounds=_box(X[:, j]), random_state=rng)
            for j in range(d)]), MEDIAN_SPREAD)
    if odp is not None:
        cell.other("median", "opendp", lambda: errors([odp_median(odp, X[:, j], eps / d) for j in range(d)]),
                   MEDIAN_SPREAD)


def pop_median(cdf: Callable[[float], float]) -> float:
    """The population median (bisection on its CDF)."""
    lo, hi = -1e12, 1e12
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < 0.5 else (lo, mid)
    return (lo + hi) / 2


# --------------------------------------------------------------------------- synthetic cells


def synthetic(kind: str, d: int, n: int, eps: float, seed: int, libs: dict[str, Any]) -> Cell:
    from scipy import stats as st

    kappa, mu_norm = KINDS[kind]
    rng = np.random.default_rng(1_000_003 * seed + 7919 * d + n)
    if kind == "t5":
        Q, scales = np.linalg.qr(rng.normal(size=(d, d)))[0], np.ones(d)
        mu = np.zeros(d)
        X = mvt(rng, n, 5.0, scales, Q)
    else:
        X, mu, Q, scales = _gaussian_data(rng, n, d, kappa, mu_norm)
    Sigma = (Q * scales**2) @ Q.T
    W = inv_sqrt(Sigma)
    cell = Cell(kind, d, n, eps, seed)
    np_errors = (maha_mean(X.mean(axis=0), mu, W), maha_cov(_cov(X), Sigma, W))
    fit_cell(cell, X, eps, seed, mu, Sigma, np_errors, True, libs)
    sd0, mu0 = math.sqrt(Sigma[0, 0]), float(mu[0])
    if kind == "t5":
        def cdf(x: float) -> float:
            return float(st.t.cdf((x - mu0) / (sd0 * math.sqrt(3 / 5)), 5))
    else:
        def cdf(x: float) -> float:
            return float(st.norm.cdf((x - mu0) / sd0))
    col = X[:, :1]
    median_cell(cell, col, eps, seed, [cdf], rank_error(float(np.median(col)), cdf), cdf, libs)
    return cell


# --------------------------------------------------------------------------- tables


def load_table(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The raw features, the label codes (0..k-1; diabetes: its sex column) and the regression target."""
    from sklearn import datasets

    if name == "diabetes":
        X, y = datasets.load_diabetes(return_X_y=True, scaled=False)
        return X, np.unique(X[:, 1], return_inverse=True)[1], y
    X, labels = getattr(datasets, f"load_{name}")(return_X_y=True)
    return X, labels, labels.astype(float)


def _boot(X: np.ndarray, stat: Callable[[np.ndarray], float], seed: int) -> float:
    """The non-private statistic's sampling error: the median of ``stat`` over bootstrap resamples."""
    rng = np.random.default_rng(seed)
    return float(np.median([stat(X[rng.integers(len(X), size=len(X))]) for _ in range(BOOTSTRAP)]))


def table(name: str, eps: float, seed: int, libs: dict[str, Any], mixtures: bool) -> Cell:
    X, labels, y = load_table(name)
    n, d = X.shape
    cell = Cell(name, d, n, eps, seed)
    mu, S = X.mean(axis=0), _cov(X)
    W = inv_sqrt(S)
    np_errors = (_boot(X, lambda B: maha_mean(B.mean(axis=0), mu, W), seed),
                 _boot(X, lambda B: maha_cov(_cov(B), S, W), seed))
    fit_cell(cell, X, eps, seed, mu, S, np_errors, False, libs)
    cdfs = [empirical_cdf(X[:, j]) for j in range(d)]
    np_med = _boot(X, lambda B: float(np.mean([rank_error(float(np.median(B[:, j])), cdfs[j]) for j in range(d)])),
                   seed)
    median_cell(cell, X, eps, seed, cdfs, np_med, None, libs)
    column_means(cell, X, eps, seed, libs)
    histogram(cell, labels, eps, seed, libs)
    if name == "diabetes":
        regression(cell, X, y, eps, seed, libs)
    if mixtures and name in MIXTURE_TABLES:
        mixture(cell, X, labels, eps, seed, libs)
    return cell


def column_means(cell: Cell, X: np.ndarray, eps: float, seed: int, libs: dict[str, Any]) -> None:
    n, d = X.shape
    mu, sd = X.mean(axis=0), X.std(axis=0)
    names = [f"c{j}" for j in range(d)]

    def err(m: Any) -> float:
        return float(np.linalg.norm((np.asarray(m, float) - mu) / sd)) if _finite(m) else math.inf

    def ask() -> Any:
        q = dp.stats.Statistics(budget=dp.ApproxDP(eps, DELTA))
        for nm in names:
            q.mean(nm)
        return q.run({nm: X[:, j] for j, nm in enumerate(names)}, noise=dp.SeededNoise(seed))

    res, warned, raised = run_dpflow(ask)
    np_error = _boot(X, lambda B: err(B.mean(axis=0)), seed)
    spread = math.sqrt(d)
    if res is None:
        cell.add("column means", "dpflow", math.inf, spread, np_error, False, warned, raised)
    else:
        m = [float(res[f"mean({nm})"]) for nm in names]
        cell.add("column means", "dpflow", err(m), spread, np_error, not _finite(m), warned)
        cell.predictions("column means", [res.report, res],  # in each column's sd, as the metric says
                         {f"mean({nm})": Target([m[j] / sd[j]], [mu[j] / sd[j]], step_ok=nm not in res.bounds or
                                                step_located(res.bounds[nm], X[:, j])) for j, nm in enumerate(names)})
    dpl, odp = libs["diffprivlib"], libs["opendp"]
    if dpl is not None:
        cell.other("column means", "diffprivlib", lambda: err(dpl_means(dpl, X, eps / 2, np.random.RandomState(seed))),
                   spread)
    if odp is not None:
        cell.other("column means", "opendp", lambda: err(odp_means(odp, X, rho_of(eps, DELTA))), spread)


def histogram(cell: Cell, codes: np.ndarray, eps: float, seed: int, libs: dict[str, Any]) -> None:
    """The label counts: a one-hot Category under PureDP(eps) (l1 error / n)."""
    n, k = len(codes), int(codes.max()) + 1
    true = np.bincount(codes, minlength=k).astype(float)

    def err(c: Any) -> float:
        return float(np.abs(np.asarray(c, float) - true).sum() / n) if _finite(c) else math.inf

    cat = dp.Category("label", list(range(k)), unseen="none")

    def ask() -> Any:
        return dp.stats.Statistics(budget=dp.PureDP(eps)).histogram(cat).run({"label": codes},
                                                                             noise=dp.SeededNoise(seed))

    res, warned, raised = run_dpflow(ask)
    np_error = _boot(codes[:, None], lambda B: err(np.bincount(B[:, 0], minlength=k) * 1.0), seed)
    if res is None:
        cell.add("histogram", "dpflow", math.inf, 1.0, np_error, False, warned, raised)
    else:
        v = res["histogram(label)"]
        counts = np.array([float(v[str(j)]) for j in range(k)] if isinstance(v, dict) else np.ravel(v)[:k], float)
        cell.add("histogram", "dpflow", err(counts), 1.0, np_error, not _finite(counts), warned)
        cell.predictions("histogram", [res.report, res], {"histogram(label)": Target(counts, true)})
    dpl, odp = libs["diffprivlib"], libs["opendp"]
    if dpl is not None:
        cell.other("histogram", "diffprivlib", lambda: err(dpl.tools.histogram(
            codes, epsilon=eps / 2, bins=k, range=(-0.5, k - 0.5), random_state=np.random.RandomState(seed))[0]), 1.0)
    if odp is not None:
        cell.other("histogram", "opendp", lambda: err(odp_counts(odp, codes, k, eps)), 1.0)


def regression(cell: Cell, X: np.ndarray, y: np.ndarray, eps: float, seed: int, libs: dict[str, Any]) -> None:
    """R^2 on 90 held-out rows (352 training rows): the loss against least squares."""
    from sklearn.linear_model import LinearRegression as OLS

    idx = np.random.default_rng(0).permutation(len(y))
    tr, te = idx[:352], idx[352:]
    ols = OLS().fit(X[tr], y[tr])
    r2 = float(ols.score(X[te], y[te]))
    model, warned, raised = run_dpflow(lambda: LinearRegression(budget=dp.ApproxDP(eps, DELTA),
                                                                noise=dp.SeededNoise(seed)).fit(X[tr], y[tr]))
    if model is None:
        cell.add("regression", "dpflow", math.inf, r2, math.nan, False, warned, raised)
    else:
        coef = np.asarray(model.coef_, float)
        ok = _finite(coef, model.intercept_)
        score = float(model.score(X[te], y[te])) if ok else -math.inf
        cell.add("regression", "dpflow", r2 - score if math.isfinite(score) else math.inf, r2, math.nan, not ok, warned)
        cell.predictions("regression", [model.report_, model], {
            "coef": Target(coef, ols.coef_), "intercept": Target([model.intercept_], [ols.intercept_]),
            "r2": Target([score], [r2])})
    dpl = libs["diffprivlib"]
    if dpl is not None:
        def theirs() -> float:
            m = dpl.models.LinearRegression(epsilon=eps / 2, bounds_X=(X.min(0), X.max(0)),
                                            bounds_y=(float(y.min()), float(y.max())), random_state=seed)
            s = float(m.fit(X[tr], y[tr]).score(X[te], y[te]))
            return r2 - s if math.isfinite(s) else math.inf

        cell.other("regression", "diffprivlib", theirs, r2)


def mixture(cell: Cell, X: np.ndarray, labels: np.ndarray, eps: float, seed: int, libs: dict[str, Any]) -> None:
    """Adjusted Rand index against the labels: the loss against scikit-learn's GaussianMixture."""
    from sklearn.metrics import adjusted_rand_score as ari
    from sklearn.mixture import GaussianMixture as GMM

    k = int(labels.max()) + 1
    best = float(ari(labels, GMM(k, random_state=seed).fit(X).predict(X)))
    gm, warned, raised = run_dpflow(lambda: GaussianMixture(k, dp.ApproxDP(eps, DELTA), standardize=True,
                                                            noise=dp.SeededNoise(seed)).fit(X))
    if gm is None:
        cell.add("mixture", "dpflow", math.inf, best, math.nan, False, warned, raised)
    else:
        found = gm.n_found_ > 0
        ok = not found or _finite(gm.means_)
        score = float(ari(labels, gm.predict(X))) if found and ok else 0.0
        cell.add("mixture", "dpflow", best - score if ok else math.inf, best, math.nan, not ok, warned)
        truth = np.array([X[labels == j].mean(axis=0) for j in range(k)])
        means = gm.means_ if found else np.zeros((0, X.shape[1]))
        cell.predictions("mixture", [gm.report_, gm], {"means": Target(means, truth)})
    dpl = libs["diffprivlib"]
    if dpl is not None:
        cell.other("mixture", "diffprivlib", lambda: best - float(ari(labels, dpl.models.KMeans(
            n_clusters=k, epsilon=eps / 2, bounds=(X.min(0), X.max(0)), random_state=seed).fit(X).predict(X))), best)


# --------------------------------------------------------------------------- summaries


METHODS = ("dpflow", "diffprivlib", "opendp")


def aggregate(cells: list[Cell]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Per (data, d, n, eps, statistic): each method's median error over the seeds, the non-private error,
    the spread and dpflow's flags (seeds with a non-finite output, warned, raised)."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for c in cells:
        for r in c.rows:
            groups[(r["data"], r["d"], r["n"], r["eps"], r["stat"])].append(r)
    out = {}
    for key, rows in groups.items():
        agg: dict[str, Any] = {"spread": rows[0]["spread"]}
        for m in METHODS:
            errs = [r["error"] for r in rows if r["method"] == m]
            agg[m] = float(np.median(errs)) if errs else None
            costs = [r["cost"] for r in rows if r["method"] == m and not math.isnan(r["cost"])]
            agg[m + " cost"] = float(np.median(costs)) if costs else None
        ours = [r for r in rows if r["method"] == "dpflow"]
        agg["np"] = float(np.median([r["np_error"] for r in ours])) if ours else math.nan
        agg["seeds"] = len(ours)
        agg["nonfinite"] = sum(r["nonfinite"] for r in ours)
        agg["warned"] = sum(r["warned"] > 0 for r in ours)
        agg["raised"] = sorted({r["raised"] for r in ours if r["raised"]})
        e = agg["dpflow"]
        agg["bad"] = bool(agg["nonfinite"] or agg["raised"] or e is None or not e < agg["spread"])
        out[key] = agg
    return out


def _pct(a: int, b: int) -> str:
    return f"{a}/{b} = {100.0 * a / b:.1f}%" if b else "0/0 (no cells)"


def _g(x: float | None) -> str:
    if x is None:
        return "-"
    return "nan" if math.isnan(x) else "inf" if math.isinf(x) else f"{x:.3g}"


def summarise(agg: dict[tuple[Any, ...], dict[str, Any]], cells: list[Cell]) -> list[str]:
    keys = sorted(agg, key=lambda k: (k[4], str(k[0]), k[1], k[2], k[3]))
    nonfinite = [k for k in keys if agg[k]["nonfinite"]]
    raised = [k for k in keys if agg[k]["raised"]]
    lines = ["## Summary", "",
             f"**(1) Cells with NaN or infinity in a dpflow output** (any seed; target 0): "
             f"{_pct(len(nonfinite), len(keys))}.  Cells where dpflow raised instead: {_pct(len(raised), len(keys))}."]
    lines.append("")
    for other in ("diffprivlib", "opendp"):
        fair = [k for k in keys if agg[k][other] is not None and agg[k][other] < agg[k]["spread"]]
        wins = [k for k in fair if agg[k]["dpflow"] is not None and agg[k]["dpflow"] <= agg[k][other]]
        target = " (target >= 90%)" if other == "diffprivlib" else " (no target)"
        lines.append(f"**(2) dpflow without bounds at most {other} given the true bounds**, among the cells where "
                     f"{other}'s own median error is below the data's spread{target}: {_pct(len(wins), len(fair))}.")
        by: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for k in fair:
            by[k[4]][1] += 1
            by[k[4]][0] += k in wins
        lines.append("  By statistic: " + "; ".join(f"{s} {_pct(*v)}" for s, v in sorted(by.items())) + ".")
        both = [k for k in fair if agg[k]["dpflow cost"] is not None and agg[k][other + " cost"] is not None]
        cheaper = [k for k in both if agg[k]["dpflow cost"] <= agg[k][other + " cost"]]
        lines.append(f"  The privacy cost alone (each error against the non-private statistic of the same rows, "
                     f"where the errors above are against the population: synthetic means, covariances and "
                     f"medians): dpflow at most {other} in {_pct(len(cheaper), len(both))}.")
        lines.append("")
    lines += predictions_summary(cells)
    bad = [k for k in keys if agg[k]["bad"]]
    silent = [k for k in bad if not agg[k]["warned"] and not agg[k]["raised"]]
    lines += ["", f"**Bad cells** (a non-finite output, a refusal, or dpflow's median error above the data's "
              f"spread): {_pct(len(bad), len(keys))}; warned or refused: {len(bad) - len(silent)}; "
              f"**silent** (bad, no AccuracyWarning, no refusal): {len(silent)}.", ""]
    if silent:
        lines += ["| statistic | data | d | n | epsilon | dpflow error | spread | non-finite seeds |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {k[4]} | {k[0]} | {k[1]} | {k[2]} | {k[3]:g} | {_g(agg[k]['dpflow'])} | "
                  f"{_g(agg[k]['spread'])} | {agg[k]['nonfinite']}/{agg[k]['seeds']} |" for k in silent]
    if raised:
        lines += ["", "Refusals: " + "; ".join(sorted({r for k in raised for r in agg[k]["raised"]}))]
    stopped: dict[str, int] = defaultdict(int)
    for c in cells:
        for t in c.timeouts:
            stopped[t] += 1
    if stopped:
        lines += ["", f"Comparator runs stopped after {COMPARATOR_SECONDS} s (left out of the comparison): " +
                  "; ".join(f"{t} ({k})" for t, k in sorted(stopped.items())) + "."]
    return lines


def predictions_summary(cells: list[Cell]) -> list[str]:
    preds = [p for c in cells for p in c.preds]
    matched = [p for p in preds if p["sample"] is not None]
    within = [p for p in matched if p["sample"] <= p["value"]]
    with_pop = [p for p in preds if p["pop"] is not None]
    within_pop = [p for p in with_pop if p["pop"] <= p["value"]]
    infinite = [p for p in preds if math.isinf(p["value"])]
    lines = [f"**(3) Predicted vs measured** (target: within the prediction in >= 95% at the stated confidence): "
             f"{len(preds)} predictions in the ledgers ({len(infinite)} infinite: 'no useful bound'); "
             "measured against the non-private statistic of the same rows: within in "
             f"{_pct(len(within), len(matched))}; "
             f"against the population (synthetic data): within in {_pct(len(within_pop), len(with_pop))}.  "
             "On the data that meets each prediction's stated condition (`given`: Gaussian rows on the Gaussian "
             f"kinds only): within in {_pct(sum(p['met'] for p in within), sum(p['met'] for p in matched))} "
             f"(rows), {_pct(sum(p['met'] for p in within_pop), sum(p['met'] for p in with_pop))} (population).  "
             "Each prediction is measured in the units of the plan that made it (gaussian.fit without bounds: the "
             "rows recentred and scaled by its scale search; the other surfaces: the data's).", ""]
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for p in preds:
        groups[(p["stat"], p["output"], p["metric"], p["route"])].append(p)
    if groups:
        lines += ["| statistic | output | metric | route | predictions | confidence | median predicted | "
                  "median measured (rows) | within (rows) | within (population) | within, condition met "
                  "(rows) |", "|---" * 11 + "|"]
        for (stat, out, metric, route), ps in sorted(groups.items()):
            ms = [p for p in ps if p["sample"] is not None]
            mp = [p for p in ps if p["pop"] is not None]
            med = _g(float(np.median([p["sample"] for p in ms]))) if ms else "unmatched metric/output"
            lines.append(f"| {stat} | {out} | {metric} | {route or '-'} | {len(ps)} | "
                         f"{np.median([p['confidence'] for p in ps]):g} | "
                         f"{_g(float(np.median([p['value'] for p in ps])))} | {med} | "
                         f"{_pct(sum(p['sample'] <= p['value'] for p in ms), len(ms))} | "
                         f"{_pct(sum(p['pop'] <= p['value'] for p in mp), len(mp))} | "
                         f"{_pct(sum(p['met'] and p['sample'] <= p['value'] for p in ms), sum(p['met'] for p in ms))}"
                         " |")
    missing: dict[tuple[str, str], int] = defaultdict(int)
    for c in cells:
        for stat, output in c.unpredicted:  # the columns of a table as one
            missing[(stat, re.sub(r"\(c\d+\)", "(each column)", output))] += 1
    if missing:
        lines += ["", "Outputs with **no prediction** in their ledger (runs): " +
                  "; ".join(f"{s} / {o} ({k})" for (s, o), k in sorted(missing.items())) + "."]
    return lines


def detail(agg: dict[tuple[Any, ...], dict[str, Any]]) -> list[str]:
    lines = ["", "## Every cell", "",
             "Median errors over the seeds (absolute, in each statistic's metric); ratio = dpflow / non-private; "
             "warned = seeds with an AccuracyWarning; flags: nonfinite (seeds), raised, bad (above the spread).", ""]
    for stat in sorted({k[4] for k in agg}):
        lines += [f"### {stat}", "", "| data | d | n | epsilon | dpflow | diffprivlib | opendp | non-private | ratio | "
                  "warned | flags |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for k in sorted((k for k in agg if k[4] == stat), key=lambda k: (str(k[0]), k[1], k[2], k[3])):
            a = agg[k]
            ratio = a["dpflow"] / a["np"] if a["dpflow"] is not None and a["np"] > 0 else math.nan
            flags = [f"nonfinite {a['nonfinite']}" if a["nonfinite"] else "", "raised" if a["raised"] else "",
                     "bad" if a["bad"] else ""]
            lines.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]:g} | {_g(a['dpflow'])} | {_g(a['diffprivlib'])} | "
                         f"{_g(a['opendp'])} | {_g(a['np'])} | {_g(ratio)} | {a['warned']}/{a['seeds']} | "
                         f"{' '.join(f for f in flags if f) or '-'} |")
        lines.append("")
    return lines


def heatmaps(agg: dict[tuple[Any, ...], dict[str, Any]], ds: Sequence[int], ns: Sequence[int],
             epss: Sequence[float], kinds: Sequence[str], out: Path, prefix: str) -> list[str]:
    """One PNG per statistic: log10(dpflow / non-private) over (n, d), a panel per data kind and epsilon."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ["(matplotlib is not installed: no heatmaps)"]
    links = []
    cmap = plt.get_cmap("viridis").copy()
    cmap.set_over("red")  # a ratio above 1e4, or a non-finite output (annotated "inf")
    cmap.set_bad("lightgrey")  # not run
    for stat in HEATMAP_STATS:
        fig, axes = plt.subplots(len(kinds), len(epss), figsize=(1.2 + 3.0 * len(epss), 0.8 + 2.0 * len(kinds)),
                                 squeeze=False, layout="constrained")
        im = None
        for i, kind in enumerate(kinds):
            for j, eps in enumerate(epss):
                R = np.full((len(ds), len(ns)), np.nan)
                for a, d in enumerate(ds):
                    for b, n in enumerate(ns):
                        cell = agg.get((kind, d, n, eps, stat))
                        if cell is not None and cell["dpflow"] is not None and cell["np"] > 0:
                            R[a, b] = cell["dpflow"] / cell["np"]
                with np.errstate(all="ignore"):
                    M = np.where(np.isinf(R), 99.0, np.log10(np.maximum(R, 1e-3)))
                ax = axes[i][j]
                im = ax.imshow(np.ma.masked_invalid(M), cmap=cmap, vmin=-1, vmax=4, origin="lower", aspect="auto")
                for a in range(len(ds)):
                    for b in range(len(ns)):
                        if not np.isnan(R[a, b]):
                            ax.text(b, a, "inf" if np.isinf(R[a, b]) else f"{R[a, b]:.2g}", ha="center", va="center",
                                    fontsize=6, color="w")
                ax.set_xticks(range(len(ns)), [f"{n:.0e}" for n in ns], fontsize=6)
                ax.set_yticks(range(len(ds)), [str(d) for d in ds], fontsize=6)
                ax.set_xlabel("n", fontsize=6)
                ax.set_ylabel("d", fontsize=6)
                ax.set_title(f"{kind}, eps={eps:g}", fontsize=7)
        fig.suptitle(f"{stat}: dpflow (no bounds) error / non-private error\n(grey: not run; red: > 1e4 or inf)",
                     fontsize=8)
        if im is not None:
            fig.colorbar(im, ax=axes, label="log10 ratio", shrink=0.6, extend="max")
        path = out / f"{prefix}_{stat}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        links.append(f"![{stat}]({path.name})")
    return links


# --------------------------------------------------------------------------- main


def _list(text: str, kind: Callable[[str], Any]) -> tuple[Any, ...]:
    return tuple(kind(x) for x in text.split(",") if x)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the smoke grid (one seed, d 1 and 5, n 500 and 1e4, eps 1)")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per cell (default 3; 1 with --quick)")
    ap.add_argument("--d", type=str, default=None, help="comma-separated dimensions (overrides the grid's)")
    ap.add_argument("--n", type=str, default=None, help="comma-separated row counts")
    ap.add_argument("--eps", type=str, default=None, help="comma-separated epsilons")
    ap.add_argument("--kinds", type=str, default=",".join(KINDS), help="synthetic data kinds ('' for none)")
    ap.add_argument("--tables", type=str, default=",".join(TABLES), help="scikit-learn tables ('' for none)")
    ap.add_argument("--no-mixtures", action="store_true", help="skip the GaussianMixture cells")
    ap.add_argument("--max-nd", type=float, default=2e6, help="skip synthetic cells with n * d above this")
    ap.add_argument("--out", type=Path, default=None, help="directory for robustness[_quick].md and the heatmaps")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")  # each dpflow call records its own (run_dpflow); the comparators' are noise
    ds = _list(args.d, int) if args.d else DS_QUICK if args.quick else DS_FULL
    ns = _list(args.n, int) if args.n else NS_QUICK if args.quick else NS_FULL
    epss = _list(args.eps, float) if args.eps else EPS_QUICK if args.quick else EPS_FULL
    kinds, tables = _list(args.kinds, str), _list(args.tables, str)
    seeds = args.seeds if args.seeds is not None else 1 if args.quick else 3
    libs = {"diffprivlib": _diffprivlib(), "opendp": _opendp()}
    t0 = time.perf_counter()
    cells: list[Cell] = []
    skipped = [(d, n) for d in ds for n in ns if n * d > args.max_nd]
    for kind in kinds:
        for d in ds:
            for n in ns:
                if n * d > args.max_nd:
                    continue
                for eps in epss:
                    t = time.perf_counter()
                    cells += [synthetic(kind, d, n, eps, s, libs) for s in range(seeds)]
                    print(f"{kind} d={d} n={n} eps={eps:g}: {time.perf_counter() - t:.1f} s", flush=True)
    for name in tables:
        for eps in epss:
            t = time.perf_counter()
            cells += [table(name, eps, s, libs, not args.no_mixtures) for s in range(seeds)]
            print(f"{name} eps={eps:g}: {time.perf_counter() - t:.1f} s", flush=True)
    agg = aggregate(cells)
    argv_shown = None if argv is None else ["benchmarks/robustness.py", *argv]
    versions = ", ".join(f"{k} {getattr(v, '__version__', 'installed') if v is not None else 'NOT INSTALLED'}"
                         for k, v in (("diffprivlib", libs["diffprivlib"]), ("opendp", _opendp_version())))
    head = ["# Robustness: dpflow without bounds vs diffprivlib and OpenDP given the true bounds (issue 29)", "",
            stamp(argv_shown), "",
            f"Grid: d in {list(ds)}, n in {list(ns)}, epsilon in {list(epss)}, synthetic {list(kinds)}, tables "
            f"{list(tables)}; {seeds} seed(s) per cell"
            + (f"; skipped (n * d > {args.max_nd:g}): {skipped}" if skipped else "") + ".  " + versions + ".", "",
            "Statistics: synthetic cells `mean` and `covariance` (gaussian.fit, ApproxDP(eps, 1e-6), Mahalanobis "
            "errors against the population) and `median` of the first column (dp.stats, PureDP(eps), rank error); "
            "tables the same plus `column means` (dp.stats, ApproxDP), `histogram` of the label (one-hot Category, "
            "PureDP), `regression` (diabetes: R^2 loss against least squares on 90 held-out rows) and `mixture` "
            "(iris, wine: adjusted Rand index loss against scikit-learn's GaussianMixture).  Mixtures, "
            "regression and histograms are not run on the synthetic grid, nor covariances by OpenDP (it has none), "
            f"nor diffprivlib's covariance where n * d > {DPL_COV_MAX_ND:g} (its Bingham sampler takes minutes).",
            "",
            "Same neighbouring relation: dpflow's is replace-one (n public); diffprivlib's epsilon is add/remove, "
            "so it gets epsilon / 2 (add/remove epsilon / 2 implies replace epsilon), split evenly over the "
            "columns it releases, half for the mean and half for the covariance beside a mean (as dpflow's fit "
            "spends on both); OpenDP runs with symmetric distance d_in = 2 (one replacement) on sized data.  "
            "diffprivlib's mechanisms are pure (delta = 0); dpflow's and OpenDP's Gaussian ones use delta = 1e-6.  "
            "Non-private error: synthetic, the sample estimate against the population; tables, the median "
            f"error of the statistic over {BOOTSTRAP} bootstrap resamples.", ""]
    body = summarise(agg, cells)
    links: list[str] = []
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        prefix = "robustness_quick" if args.quick else "robustness"
        if kinds:
            links = heatmaps(agg, ds, [n for n in ns], epss, kinds, args.out, prefix)
    text = "\n".join(head + body + ([""] + links if links else []) + detail(agg) +
                     [f"Total time {time.perf_counter() - t0:.0f} s."]) + "\n"
    print(text)
    if args.out is not None:
        (args.out / f"{'robustness_quick' if args.quick else 'robustness'}.md").write_text(text)
    return 0


def _opendp_version() -> Any:
    try:
        import opendp
    except ImportError:
        return None
    return opendp


if __name__ == "__main__":
    raise SystemExit(main())
