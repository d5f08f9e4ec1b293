"""Real data at raw scale: dpflow vs diffprivlib (given the true bounds) vs non-private, at equal epsilon,
on the datasets that ship inside scikit-learn (diabetes, breast cancer; nothing is downloaded).

Tasks (each cell: mean +- standard deviation over the seeds):

* ``diabetes regression``: test R^2 of a linear model; train = 352 rows tiled to n = 44,200 (the issue's
  setting) or the 352 rows themselves, test = the other 90 rows.  dpflow ``LinearRegression`` (SSP with the
  private scale step, (epsilon, 1e-6)); diffprivlib ``LinearRegression`` (epsilon-DP functional
  mechanism) given the true ``bounds_X`` and ``bounds_y``; scikit-learn's least squares.
* ``breast cancer means``: the mean of each of the 30 raw columns (n = 569 tiled to 11,380), error =
  median over columns of |estimate - mean| / |mean|.  dpflow ``truncated_mean`` (no bounds) and
  ``dp.stats`` (one-call, no bounds); diffprivlib ``tools.mean`` per column given the true bounds, the
  budget split evenly over the 30 columns (basic composition).
* ``breast cancer medians`` and ``variances``: the same for the first 5 columns; dpflow ``dp.stats``
  (no bounds) vs diffprivlib ``tools.median`` / ``tools.var`` (true bounds, epsilon / 5 each).

On the 352 rows alone no method recovers a useful model at these budgets without public bounds: dpflow
predicts so before any data is read (the scale step would need more than half of the budget: its range
histograms would pick empty bins and the scales be off by orders of magnitude) and fits the intercept-only
model at y's private median instead, with an accuracy warning (test R^2 a little below 0, where the scale
step's coefficients gave -1e19 to -1e64); diffprivlib's functional mechanism, even given the true bounds,
collapses (as it does on 44,352 rows at these epsilons; at epsilon = 100 it reaches least squares' R^2).

Privacy notes: dpflow's epsilon is a ``replace`` epsilon (n public); diffprivlib's is an add/remove one,
which gives only 2 epsilon against replacement: equal nominal epsilon favours diffprivlib.  dpflow's
Gaussian releases carry delta = 1e-6; diffprivlib's mechanisms here are pure (delta = 0).  OpenDP has none
of these estimators ready-made (its mean and variance need explicit bounds and a data type pipeline), so it
is not in the table.

Run: ``python benchmarks/real_data.py [--seeds 5] [--out benchmarks/results]`` (needs ``pip install
'.[bench]'``; about a minute).  diffprivlib 0.6 imports two names that scikit-learn 1.7+ removed from
``sklearn.tree._tree`` (used only by its forests); the script restores them before importing it.
"""

from __future__ import annotations

import argparse
import platform
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.linear_model import LinearRegression as OLS
from stamp import stamp

import dpflow as dp
from dpflow.estimators import LinearRegression
from dpflow.estimators.truncation import truncated_mean

EPS = (0.5, 1.0, 2.0)
DELTA = 1e-6


def _diffprivlib() -> object:
    import sklearn.tree._tree as tree

    for name, value in (("DOUBLE", np.float64), ("DTYPE", np.float32)):
        if not hasattr(tree, name):
            setattr(tree, name, value)
    import diffprivlib

    return diffprivlib


def _stats(xs: list[float]) -> str:
    """Mean +- standard deviation; a task whose runs collapse (R^2 below -10) shows its median and how many."""
    a = np.asarray(xs, dtype=float)
    bad = int(np.sum(~(a > -10.0)))
    if bad:
        return f"collapses in {bad}/{a.size} runs (median {np.median(a):.2g})"
    return f"{a.mean():.3f} +- {a.std():.3f}"


def diabetes(seeds: int, tiles: int) -> list[str]:
    dpl = _diffprivlib()
    X, y = load_diabetes(return_X_y=True)
    idx = np.random.default_rng(0).permutation(len(y))
    tr, te = idx[:352], idx[352:]
    Xtr, ytr = np.tile(X[tr], (tiles, 1)), np.tile(y[tr], tiles)
    r2_ols = OLS().fit(Xtr, ytr).score(X[te], y[te])
    rows = [f"\n### Diabetes linear regression, n = {len(ytr)} ({tiles} x 352), test R^2 on 90 held-out rows\n",
            "| epsilon | non-private OLS | dpflow (no bounds) | dpflow, one radius (no scale step) | "
            "diffprivlib (true bounds) |", "|---|---|---|---|---|"]
    for eps in EPS:
        ours, unscaled, theirs = [], [], []
        for s in range(seeds):
            m = LinearRegression(budget=dp.ApproxDP(eps, DELTA), noise=dp.SeededNoise(s)).fit(Xtr, ytr)
            ours.append(m.score(X[te], y[te]))
            u = LinearRegression(budget=dp.ApproxDP(eps, DELTA), standardize=False, noise=dp.SeededNoise(s))
            unscaled.append(u.fit(Xtr, ytr).score(X[te], y[te]))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                d = dpl.models.LinearRegression(epsilon=eps, bounds_X=(X.min(0), X.max(0)),  # type: ignore[attr-defined]
                                                bounds_y=(float(y.min()), float(y.max())), random_state=s)
                theirs.append(d.fit(Xtr, ytr).score(X[te], y[te]))
        rows.append(f"| {eps} | {r2_ols:.3f} | {_stats(ours)} | {_stats(unscaled)} | {_stats(theirs)} |")
    return rows


def _rel(est: np.ndarray, true: np.ndarray) -> float:
    return float(np.median(np.abs(est - true) / np.abs(true)))


def breast_cancer(seeds: int) -> list[str]:
    dpl = _diffprivlib()
    X = np.tile(load_breast_cancer().data, (20, 1))
    n, d = X.shape
    true = X.mean(axis=0)
    lo, hi = X.min(axis=0), X.max(axis=0)
    rows = [f"\n### Breast cancer, raw columns, n = {n} (20 x 569): median relative error over columns\n",
            "| task | epsilon | dpflow truncated_mean (no bounds) | dpflow stats (no bounds) | "
            "diffprivlib (true bounds) |", "|---|---|---|---|---|"]
    for eps in EPS:
        tm, st, dl = [], [], []
        for s in range(seeds):
            out = truncated_mean(d, n, dp.ApproxDP(eps, DELTA)).run(X, noise=dp.SeededNoise(s)).released
            tm.append(_rel(out["mean"], true))
            data = {f"c{j}": X[:, j] for j in range(d)}
            q = dp.stats.Statistics(budget=dp.ApproxDP(eps, DELTA))
            for j in range(d):
                q.mean(f"c{j}")
            res = q.run(data, noise=dp.SeededNoise(s))
            st.append(_rel(np.array([res[f"mean(c{j})"] for j in range(d)]), true))
            rng = np.random.RandomState(s)
            dl.append(_rel(np.array([dpl.tools.mean(X[:, j], epsilon=eps / d, bounds=(lo[j], hi[j]),  # type: ignore[attr-defined]
                                                    random_state=rng) for j in range(d)]), true))
        rows.append(f"| mean (30 columns) | {eps} | {_stats(tm)} | {_stats(st)} | {_stats(dl)} |")
    k = 5
    for task, ours_of, theirs_of, truth_of in (
            ("median (5 columns)", lambda q, c: q.quantiles(c, [0.5]),
             lambda x, e, b, r: dpl.tools.median(x, epsilon=e, bounds=b, random_state=r),  # type: ignore[attr-defined]
             np.median),
            ("variance (5 columns)", lambda q, c: q.variance(c),
             lambda x, e, b, r: dpl.tools.var(x, epsilon=e, bounds=b, random_state=r),  # type: ignore[attr-defined]
             np.var)):
        truth = np.array([truth_of(X[:, j]) for j in range(k)])
        for eps in EPS:
            st, dl = [], []
            for s in range(seeds):
                q = dp.stats.Statistics(budget=dp.ApproxDP(eps, DELTA))
                for j in range(k):
                    ours_of(q, f"c{j}")
                res = q.run({f"c{j}": X[:, j] for j in range(k)}, noise=dp.SeededNoise(s))
                est = np.array([float(np.ravel(v)[0]) for v in res.values.values()])
                st.append(_rel(est, truth))
                rng = np.random.RandomState(s)
                dl.append(_rel(np.array([theirs_of(X[:, j], eps / k, (lo[j], hi[j]), rng) for j in range(k)]),
                               truth))
            rows.append(f"| {task} | {eps} | - | {_stats(st)} | {_stats(dl)} |")
    return rows


TOLD = "\n".join([
    "", "### What each library needed to be told", "",
    "| | dpflow | diffprivlib | non-private |", "|---|---|---|---|",
    "| regression | nothing (n is public under `replace`): a private scale step finds each column's centre and "
    "scale, a private radius clips the standardised rows | `bounds_X` (min and max of every feature) and "
    "`bounds_y`, here the true ones (which are themselves a release of the data) | nothing |",
    "| column means | nothing | `bounds` per column (the true min and max), and the split of epsilon over the "
    "columns | nothing |",
    "| medians, variances | nothing | `bounds` per column | nothing |", ""])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None, help="directory for real_data.md")
    args = ap.parse_args()
    t0 = time.perf_counter()
    parts: list[Callable[[], list[str]]] = [lambda: diabetes(args.seeds, 126), lambda: diabetes(args.seeds, 1),
                                            lambda: breast_cancer(args.seeds)]
    lines = ["# Real data at raw scale: dpflow vs diffprivlib vs non-private", "", stamp(), "",
             f"{args.seeds} seeds; dpflow budgets ApproxDP(epsilon, {DELTA:g}) (replace neighbours), diffprivlib "
             "pure epsilon (add/remove); see the notes in benchmarks/real_data.py."]
    for part in parts:
        lines += part()
    lines.append(TOLD)
    lines.append(f"\n{time.perf_counter() - t0:.0f} s on {platform.machine()} ({platform.python_version()}, "
                 f"numpy {np.__version__}, dpflow {dp.__version__}, diffprivlib "
                 f"{getattr(_diffprivlib(), '__version__', '?')})\n")
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "real_data.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
