"""Benchmarks of the CWZ estimators: sparse mean, low-dimensional mean, NIHT and noisy GD against
the reference tables of sparse_discrete_heavy.md 3.8, the zCDP accounting's gain, SSP vs noisy GD vs
NIHT, and data-driven truncation vs an oracle radius.

Every cell is the mean l2 error over the replicates.  Columns:

* ``spec``: the reference table (numbers copied from the spec, 3.8);
* ``spec formulas``: a numpy transcription of the spec's formulas (classical Gaussian, DSZ Peeling scale
  ``2 lambda sqrt(3 s ln(1/delta)) / eps``, (eps/T, delta/T) per step), mean +- standard error over the
  replicates: it checks that the benchmark's data and replicates reproduce the table;
* ``dpflow paper``: dpflow's plan with ``accounting="basic"`` (the same per-step (eps/T, delta/T) split
  and basic composition, but every step calibrated by a tighter valid rule: the exact Gaussian-DP
  profile, and for Peel the less noisy of pure basic composition and zCDP + CKS);
* ``dpflow zCDP``: the default accounting; ``paper/zCDP`` is the ratio of the two errors;
* the non-private baseline (top-s of the mean, the mean, IHT, OLS).

Run: ``python benchmarks/sparse_regression.py [--reps-scale 1.0] [--out benchmarks/results]``.
Writes Markdown to stdout (and ``sparse_regression.md`` plus PNG plots when ``--out`` is given and
matplotlib is importable).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
from stamp import stamp

import dpflow as dp
from dpflow.estimators.regression import niht, noisy_gd, sufficient_statistics
from dpflow.estimators.sparse import sparse_mean
from dpflow.estimators.truncation import truncated_mean

EPS = (0.5, 1.0)
SPEC_SPARSE = {0.5: [4.15, 3.16, 1.07, 0.297, 0.180], 1.0: [2.91, 1.61, 0.262, 0.154, 0.081],
               "np": [0.100, 0.072, 0.045, 0.031, 0.021]}
SPEC_MEAN = {0.5: [1.395, 0.736, 0.422, 0.177, 0.102], 1.0: [0.715, 0.372, 0.201, 0.103, 0.053],
             "np": [0.146, 0.099, 0.066, 0.044, 0.030]}
SPEC_NIHT = {0.5: [1.76, 1.43, 1.05, 0.83], 1.0: [1.59, 1.12, 0.84, 0.29], "np": [0.017, 0.010, 0.007, 0.006]}
SPEC_GD = {0.5: [2.25, 2.18, 1.98, 0.85, 0.48], 1.0: [2.09, 1.88, 1.51, 0.38, 0.22],
           "np": [0.077, 0.042, 0.030, 0.014, 0.009]}


# ------------------------------------------------------------------------------ spec formulas (numpy)


def peel_ref(v: np.ndarray, s: int, eps: float, delta: float, lam: float, rng: np.random.Generator) -> np.ndarray:
    """CWZ Alg. 3.2 exactly as the spec writes it (DSZ scale)."""
    b = lam * 2 * math.sqrt(3 * s * math.log(1 / delta)) / eps
    scores = np.abs(v)[None, :] + rng.laplace(0, b, size=(s, v.size))
    chosen = np.zeros(v.size, dtype=bool)
    for i in range(s):
        chosen[int(np.argmax(np.where(chosen, -np.inf, scores[i])))] = True
    out = np.zeros(v.size)
    out[chosen] = v[chosen] + rng.laplace(0, b, size=int(chosen.sum()))
    return out


def proj_l2(b: np.ndarray, C: float) -> np.ndarray:
    nrm = float(np.linalg.norm(b))
    return b if nrm <= C else b * (C / nrm)


def niht_ref(X: np.ndarray, y: np.ndarray, s: int, eps: float, delta: float, T: int, R: float, C: float,
             cx: float, rng: np.random.Generator, private: bool = True) -> np.ndarray:
    n, d = X.shape
    yc = np.clip(y, -R, R)
    B = 2 * cx * (R + cx * math.sqrt(s) * C)
    beta = np.zeros(d)
    for _ in range(T):
        half = beta - 0.5 * X.T @ (X @ beta - yc) / n
        if private:
            beta = proj_l2(peel_ref(half, s, eps / T, delta / T, 0.5 * B / n, rng), C)
        else:
            keep = np.argsort(-np.abs(half))[:s]
            beta = np.zeros(d)
            beta[keep] = half[keep]
    return beta


def gd_ref(X: np.ndarray, y: np.ndarray, eps: float, delta: float, T: int, R: float, C: float, cx: float,
           rng: np.random.Generator) -> np.ndarray:
    n, d = X.shape
    yc = np.clip(y, -R, R)
    B2 = cx * math.sqrt(d) * (R + cx * math.sqrt(d) * C)
    st = (2 * 0.5 * B2 / n) * math.sqrt(2 * math.log(1.25 * T / delta)) / (eps / T)
    beta = np.zeros(d)
    for _ in range(T):
        beta = proj_l2(beta - 0.5 * X.T @ (X @ beta - yc) / n + rng.normal(0, st, size=d), C)
    return beta


# ------------------------------------------------------------------------------ helpers


def fmt(x: float) -> str:
    return f"{x:.3g}"


def pm(values: list[float]) -> str:
    """Mean +- standard error of the replicates."""
    se = float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) > 1 else math.nan
    return f"{fmt(float(np.mean(values)))} ± {fmt(se)}"


def table(title: str, header: list[str], rows: list[list[str]]) -> str:
    out = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def err(plan: dp.Plan, data: dict[str, np.ndarray], key: str, truth: np.ndarray, seed: int) -> float:
    return float(np.linalg.norm(plan.run(data, noise=dp.SeededNoise(seed)).released[key][: truth.size] - truth))


def regression_data(n: int, d: int, s: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    beta = np.zeros(d)
    beta[:s] = 1 / math.sqrt(s)
    X = rng.uniform(-math.sqrt(3), math.sqrt(3), size=(n, d))
    return X, X @ beta + rng.normal(size=n), beta


# ------------------------------------------------------------------------------ experiments


def bench_sparse_mean(reps: int, plots: dict[str, object]) -> str:
    d, s, ns = 1000, 10, [1000, 2000, 5000, 10000, 20000]
    rows = []
    for i, n in enumerate(ns):
        R = 1 + math.sqrt(2 * math.log(n))
        delta = n**-1.1
        acc: dict[str, list[float]] = {}
        for rep in range(reps):
            rng = np.random.default_rng(1000 * n + rep)
            mu = np.zeros(d)
            mu[:s] = 1.0
            X = rng.normal(size=(n, d)) + mu
            m = np.clip(X, -R, R).mean(axis=0)
            top = np.zeros(d)
            keep = np.argsort(-np.abs(X.mean(axis=0)))[:s]
            top[keep] = X.mean(axis=0)[keep]
            acc.setdefault("np", []).append(float(np.linalg.norm(top - mu)))
            for eps in EPS:
                acc.setdefault(f"ref{eps}", []).append(
                    float(np.linalg.norm(peel_ref(m, s, eps, delta, 2 * R / n, rng) - mu)))
                for a in ("basic", "auto"):
                    plan = sparse_mean(d, n, s, dp.ApproxDP(eps, delta), radius=R, accounting=a)
                    acc.setdefault(f"{a}{eps}", []).append(err(plan, {"X": X}, "mean", mu, rep))
                if eps == 1.0:
                    plan = sparse_mean(d, n, s, dp.ApproxDP(eps, delta))
                    acc.setdefault("dd", []).append(err(plan, {"X": X}, "mean", mu, rep))
        mean = {k: float(np.mean(v)) for k, v in acc.items()}
        for eps in EPS:
            rows.append([str(n), str(eps), fmt(SPEC_SPARSE[eps][i]), pm(acc[f"ref{eps}"]),
                         fmt(mean[f"basic{eps}"]), fmt(mean[f"auto{eps}"]),
                         fmt(mean[f"basic{eps}"] / mean[f"auto{eps}"]),
                         fmt(mean["dd"] / mean["auto1.0"]) if eps == 1.0 else "",
                         fmt(mean["np"])])
        plots.setdefault("sparse mean d=1000 s=10 (eps=1)", []).append(  # type: ignore[attr-defined]
            (n, mean["ref1.0"], mean["basic1.0"], mean["auto1.0"], mean["np"]))
    return table(f"Sparse mean (Alg. 3.3), d = {d}, s = {s}, delta = n^-1.1, R = 1 + sqrt(2 ln n), {reps} reps",
                 ["n", "eps", "spec", "spec formulas", "dpflow paper", "dpflow zCDP", "paper/zCDP",
                  "data-driven R / oracle R (zCDP)", "non-private top-s"], rows)


def bench_mean(reps: int) -> str:
    d, ns = 10, [500, 1000, 2000, 5000, 10000]
    rows = []
    for i, n in enumerate(ns):
        R = 1 + math.sqrt(2 * math.log(n))
        delta = n**-1.1
        acc: dict[str, list[float]] = {}
        for rep in range(reps):
            rng = np.random.default_rng(7000 * n + rep)
            mu = np.ones(d)
            X = rng.normal(size=(n, d)) + mu
            m = np.clip(X, -R, R).mean(axis=0)
            acc.setdefault("np", []).append(float(np.linalg.norm(X.mean(axis=0) - mu)))
            for eps in EPS:
                sd = 2 * R * math.sqrt(d) / n * math.sqrt(2 * math.log(1.25 / delta)) / eps
                acc.setdefault(f"ref{eps}", []).append(float(np.linalg.norm(m + rng.normal(0, sd, d) - mu)))
                for a in ("basic", "auto"):
                    plan = truncated_mean(d, n, dp.ApproxDP(eps, delta), radius=R, accounting=a)
                    acc.setdefault(f"{a}{eps}", []).append(err(plan, {"X": X}, "mean", mu, rep))
                plan = truncated_mean(d, n, dp.ApproxDP(eps, delta))
                acc.setdefault(f"dd{eps}", []).append(err(plan, {"X": X}, "mean", mu, rep))
        mean = {k: float(np.mean(v)) for k, v in acc.items()}
        for eps in EPS:
            rows.append([str(n), str(eps), fmt(SPEC_MEAN[eps][i]), pm(acc[f"ref{eps}"]),
                         fmt(mean[f"basic{eps}"]), fmt(mean[f"auto{eps}"]),
                         fmt(mean[f"dd{eps}"] / mean[f"auto{eps}"]), fmt(mean["np"])])
    return table(f"Low-dimensional truncated mean (Alg. 3.1), d = {d}, mu = 1, delta = n^-1.1, {reps} reps "
                 "(one Gaussian release: both accountings are the analytic Gaussian)",
                 ["n", "eps", "spec", "spec formulas", "dpflow paper", "dpflow zCDP",
                  "data-driven R / oracle R", "non-private"], rows)


def bench_niht(reps: int, plots: dict[str, object]) -> str:
    d, s, C, cx, ns = 200, 5, 2.0, math.sqrt(3), [20000, 50000, 100000, 200000]
    rows = []
    for i, n in enumerate(ns):
        T = math.ceil(math.log(n))
        R = math.sqrt(2) * math.sqrt(2 * math.log(n))
        delta = n**-1.1
        acc: dict[str, list[float]] = {}
        for rep in range(reps):
            rng = np.random.default_rng(3000 * n + rep)
            X, y, beta = regression_data(n, d, s, rng)
            Z = {"Z": np.hstack([X, y[:, None]])}
            acc.setdefault("np", []).append(float(np.linalg.norm(
                niht_ref(X, y, s, 1.0, delta, T, R, C, cx, rng, private=False) - beta)))
            for eps in EPS:
                acc.setdefault(f"ref{eps}", []).append(float(np.linalg.norm(
                    niht_ref(X, y, s, eps, delta, T, R, C, cx, rng) - beta)))
                for a in ("basic", "auto"):
                    plan = niht(d, n, s, dp.ApproxDP(eps, delta), x_bound=cx, coef_bound=C, response_bound=R,
                                accounting=a)
                    acc.setdefault(f"{a}{eps}", []).append(err(plan, Z, "coef", beta, rep))
        mean = {k: float(np.mean(v)) for k, v in acc.items()}
        for eps in EPS:
            rows.append([str(n), str(eps), fmt(SPEC_NIHT[eps][i]), pm(acc[f"ref{eps}"]),
                         fmt(mean[f"basic{eps}"]), fmt(mean[f"auto{eps}"]),
                         fmt(mean[f"basic{eps}"] / mean[f"auto{eps}"]), fmt(mean["np"])])
        plots.setdefault("NIHT d=200 s=5 (eps=1)", []).append(  # type: ignore[attr-defined]
            (n, mean["ref1.0"], mean["basic1.0"], mean["auto1.0"], mean["np"]))
    return table(f"NIHT (Alg. 4.2), d = {d}, s = {s}, C = 2, eta = 0.5, T = ceil(ln n), R = sqrt(2) sqrt(2 ln n), "
                 f"{reps} reps", ["n", "eps", "spec", "spec formulas", "dpflow paper", "dpflow zCDP", "paper/zCDP",
                                  "non-private IHT"], rows)


def bench_gd(reps: int, plots: dict[str, object]) -> str:
    d, C, cx, ns = 10, 2.0, math.sqrt(3), [2000, 5000, 10000, 50000, 100000]
    rows = []
    for i, n in enumerate(ns):
        T = math.ceil(math.log(n))
        R = math.sqrt(2) * math.sqrt(2 * math.log(n))
        delta = n**-1.1
        acc: dict[str, list[float]] = {}
        for rep in range(reps):
            rng = np.random.default_rng(5000 * n + rep)
            X, y, beta = regression_data(n, d, d, rng)
            Z = {"Z": np.hstack([X, y[:, None]])}
            acc.setdefault("np", []).append(float(np.linalg.norm(np.linalg.lstsq(X, y, rcond=None)[0] - beta)))
            for eps in EPS:
                acc.setdefault(f"ref{eps}", []).append(float(np.linalg.norm(
                    gd_ref(X, y, eps, delta, T, R, C, cx, rng) - beta)))
                for a in ("basic", "auto"):
                    plan = noisy_gd(d, n, dp.ApproxDP(eps, delta), x_bound=cx, coef_bound=C, response_bound=R,
                                    accounting=a)
                    acc.setdefault(f"{a}{eps}", []).append(err(plan, Z, "coef", beta, rep))
                if eps == 1.0:
                    plan = noisy_gd(d, n, dp.ApproxDP(eps, delta), x_bound=cx, coef_bound=C)
                    acc.setdefault("dd", []).append(err(plan, Z, "coef", beta, rep))
        mean = {k: float(np.mean(v)) for k, v in acc.items()}
        for eps in EPS:
            rows.append([str(n), str(eps), fmt(SPEC_GD[eps][i]), pm(acc[f"ref{eps}"]),
                         fmt(mean[f"basic{eps}"]), fmt(mean[f"auto{eps}"]),
                         fmt(mean[f"basic{eps}"] / mean[f"auto{eps}"]),
                         fmt(mean["dd"] / mean["auto1.0"]) if eps == 1.0 else "", fmt(mean["np"])])
        plots.setdefault("noisy GD d=10 (eps=1)", []).append(  # type: ignore[attr-defined]
            (n, mean["ref1.0"], mean["basic1.0"], mean["auto1.0"], mean["np"]))
    return table(f"Noisy GD (Alg. 4.1), d = {d}, C = 2, eta = 0.5, T = ceil(ln n), {reps} reps",
                 ["n", "eps", "spec", "spec formulas", "dpflow paper", "dpflow zCDP", "paper/zCDP",
                  "data-driven R / oracle R (zCDP)", "OLS"], rows)


def bench_compare(reps: int) -> str:
    d, C, cx, eps = 10, 2.0, math.sqrt(3), 1.0
    rows = []
    for n in [2000, 10000, 50000, 100000]:
        delta = n**-1.1
        acc: dict[str, list[float]] = {}
        times: dict[str, float] = {}
        budget = dp.ApproxDP(eps, delta)
        plans = {"ssp": sufficient_statistics(d, n, budget), "gd": noisy_gd(d, n, budget, x_bound=cx, coef_bound=C),
                 "niht": niht(d, n, d, budget, x_bound=cx, coef_bound=C)}
        for rep in range(reps):
            rng = np.random.default_rng(9000 * n + rep)
            X, y, beta = regression_data(n, d, d, rng)
            Z = {"Z": np.hstack([X, y[:, None]])}
            acc.setdefault("ols", []).append(float(np.linalg.norm(np.linalg.lstsq(X, y, rcond=None)[0] - beta)))
            for name, plan in plans.items():
                t0 = time.perf_counter()
                acc.setdefault(name, []).append(err(plan, Z, "coef", beta, rep))
                times[name] = times.get(name, 0.0) + time.perf_counter() - t0
        mean = {k: float(np.mean(v)) for k, v in acc.items()}
        rows.append([str(n), fmt(mean["ssp"]), fmt(mean["gd"]), fmt(mean["niht"]), fmt(mean["gd"] / mean["ssp"]),
                     fmt(mean["ols"]), fmt(times["gd"] / times["ssp"])])
    return table(f"SSP vs noisy GD vs NIHT (s = d), d = {d}, eps = {eps}, delta = n^-1.1, zCDP, every radius "
                 f"data-driven, {reps} reps", ["n", "SSP", "noisy GD", "NIHT", "GD / SSP", "OLS",
                                                "time GD / time SSP"], rows)


def write_plots(plots: dict[str, object], out: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    names = []
    for title, pts in plots.items():
        arr = np.asarray(pts, dtype=float)
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for j, label in enumerate(["spec formulas", "dpflow paper", "dpflow zCDP", "non-private"], start=1):
            ax.loglog(arr[:, 0], arr[:, j], marker="o", label=label)
        ax.set_xlabel("n")
        ax.set_ylabel("mean l2 error")
        ax.set_title(title)
        ax.legend()
        name = "sparse_regression_" + "".join(c if c.isalnum() else "_" for c in title.split(" (")[0]) + ".png"
        fig.tight_layout()
        fig.savefig(out / name, dpi=100)
        plt.close(fig)
        names.append(name)
    return names


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps-scale", type=float, default=1.0, help="multiply the spec's replicate counts")
    ap.add_argument("--out", type=Path, default=None, help="directory for sparse_regression.md and PNGs")
    args = ap.parse_args()

    def reps(k: int) -> int:
        return max(1, round(k * args.reps_scale))

    t0 = time.perf_counter()
    plots: dict[str, object] = {}
    parts = [
        "# CWZ estimators: sparse mean, truncated mean, NIHT, noisy GD, SSP\n",
        stamp() + "\n",
        bench_sparse_mean(reps(20), plots),
        bench_mean(reps(50)),
        bench_niht(reps(10), plots),
        bench_gd(reps(20), plots),
        bench_compare(reps(10)),
    ]
    parts.append(f"Total time {time.perf_counter() - t0:.0f} s.\n")
    text = "\n".join(parts)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        pngs = write_plots(plots, args.out)
        if pngs:
            text += "\nPlots: " + ", ".join(f"`{p}`" for p in pngs) + "\n"
        else:
            text += "\nPlots: matplotlib is not installed, so no PNG was written.\n"
        (args.out / "sparse_regression.md").write_text(text)


if __name__ == "__main__":
    main()
