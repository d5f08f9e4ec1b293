"""Benchmarks of the Gaussian estimators (dpflow.estimators.gaussian): accuracy against the CoinPress
paper's numbers (gaussian.md 1.7 / 5), the condition-number sweep of KLSU's PCE, and the speed and memory
of the full-Gaussian fit.  Prints Markdown tables; ``--out FILE`` also writes them to FILE and, when
matplotlib is importable, a PNG plot next to it.

    python benchmarks/gaussian.py                       # everything (a few minutes on 2 cores)
    python benchmarks/gaussian.py --trials 20 --skip-speed
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import trim_mean
from stamp import stamp

import dpflow as dp
from dpflow.estimators import gaussian as G


def _maha(S: np.ndarray, Sigma: np.ndarray) -> float:
    w, V = np.linalg.eigh(Sigma)
    Si = (V / np.sqrt(w)) @ V.T
    return float(np.linalg.norm(Si @ S @ Si - np.eye(len(Sigma))))


def _trimmed(errs: list[float]) -> float:
    return float(trim_mean(errs, 0.1))


def bench_mean(trials: int) -> tuple[str, dict[str, list[float]]]:
    d, rho, R = 50, 0.5, 10 * np.sqrt(50)
    ns = [1000, 10000]
    targets = {1000: "0.28 / 0.221", 10000: "0.073 / 0.072"}
    methods: list[tuple[str, Callable[[int], dp.Plan] | None]] = [
        ("non-private", None),
        ("CoinPress t=2", lambda n: G.mean(d=d, n=n, budget=dp.ZCDP(rho), R=R, t=2)),
        ("KV coordinate-wise", lambda n: G.mean(d=d, n=n, budget=dp.ZCDP(rho), R=R, method="kv")),
        ("PME (KLSU)", lambda n: G.mean(d=d, n=n, budget=dp.ZCDP(rho), R=R, method="pme")),
        ("naive", lambda n: G.mean(d=d, n=n, budget=dp.ZCDP(rho), R=R, method="naive")),
    ]
    rows = ["| n | " + " | ".join(m for m, _ in methods) + " | target CoinPress / non-private |",
            "|---|" + "---|" * (len(methods) + 1)]
    curves: dict[str, list[float]] = {m: [] for m, _ in methods}
    for n in ns:
        cells = []
        for name, make in methods:
            plan = make(n) if make is not None else None
            errs = []
            for s in range(trials):
                X = np.random.default_rng(s).normal(size=(n, d))  # mu = 0, the centre of the prior ball
                est = X.mean(axis=0) if plan is None else plan.run({"X": X}, noise=dp.SeededNoise(s)).released["mean"]
                errs.append(float(np.linalg.norm(est)))
            curves[name].append(_trimmed(errs))
            cells.append(f"{_trimmed(errs):.4g}")
        rows.append(f"| {n} | " + " | ".join(cells) + f" | {targets[n]} |")
    head = (f"### 1. Mean: d={d}, rho={rho}, R=10 sqrt(d), {trials} trials, 10%-trimmed mean of ||mu_hat - mu||_2\n\n")
    return head + "\n".join(rows) + "\n", curves


def bench_cov(trials: int) -> tuple[str, dict[str, list[float]]]:
    d, rho, K = 10, 0.5, 10 * np.sqrt(10)
    targets = {3000: "0.31 / 0.191", 8000: "0.133 / 0.117"}
    rows = ["| n | non-private | CoinPress t=3 | CoinPress t=2 | NaivePCE | target t=3 / non-private |",
            "|---|---|---|---|---|---|"]
    curves: dict[str, list[float]] = {"non-private": [], "CoinPress t=3": [], "CoinPress t=2": [], "NaivePCE": []}
    eye = np.eye(d)
    for n in (3000, 8000):
        plans = {"CoinPress t=3": G.covariance(d=d, n=n, budget=dp.ZCDP(rho), K=K, t=3),
                 "CoinPress t=2": G.covariance(d=d, n=n, budget=dp.ZCDP(rho), K=K, t=2),
                 "NaivePCE": G.covariance(d=d, n=n, budget=dp.ZCDP(rho), K=K, method="naive")}
        errs: dict[str, list[float]] = {k: [] for k in curves}
        for s in range(trials):
            X = np.random.default_rng(s).normal(size=(n, d))
            errs["non-private"].append(_maha(X.T @ X / n, eye))
            for name, plan in plans.items():
                errs[name].append(_maha(plan.run({"X": X}, noise=dp.SeededNoise(s)).released["covariance"], eye))
        for k in curves:
            curves[k].append(_trimmed(errs[k]))
        rows.append(f"| {n} | " + " | ".join(f"{curves[k][-1]:.4g}" for k in curves) + f" | {targets[n]} |")
    head = (f"### 2. Covariance: d={d}, Sigma=I, K=10 sqrt(d), rho={rho}, {trials} trials, 10%-trimmed mean of "
            "||Sigma^-1/2 Sigma_hat Sigma^-1/2 - I||_F (known mean 0)\n\n")
    return head + "\n".join(rows) + "\n", curves


def bench_kappa(trials: int, n: int) -> tuple[str, dict[str, list[float]]]:
    d, rho = 20, 0.5
    kappas = [1.0, 1e2, 1e4, 1e6]
    curves: dict[str, list[float]] = {"non-private": [], "PCE (KLSU)": [], "CoinPress (default t)": [], "NaivePCE": []}
    rows = ["| kappa | " + " | ".join(curves) + " | PCE rounds | CoinPress t |", "|---|" + "---|" * 6]
    for kappa in kappas:
        rng = np.random.default_rng(1234)
        Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
        Sigma = (Q * np.geomspace(1.0, kappa, d)) @ Q.T  # random rotation, spectrum 1 .. kappa
        L = np.linalg.cholesky(Sigma)
        t_cp = G.default_rounds(kappa, d, 3)
        plans = {"PCE (KLSU)": G.covariance(d=d, n=n, budget=dp.ZCDP(rho), K=kappa, method="pce", lower=1.0),
                 "CoinPress (default t)": G.covariance(d=d, n=n, budget=dp.ZCDP(rho), K=kappa, t=t_cp),
                 "NaivePCE": G.covariance(d=d, n=n, budget=dp.ZCDP(rho), K=kappa, method="naive")}
        errs: dict[str, list[float]] = {k: [] for k in curves}
        for s in range(trials):
            X = np.random.default_rng(s).normal(size=(n, d)) @ L.T
            errs["non-private"].append(_maha(X.T @ X / n, Sigma))
            for name, plan in plans.items():
                est = plan.run({"X": X}, noise=dp.SeededNoise(s)).released["covariance"]
                errs[name].append(_maha(est, Sigma))
        for k in curves:
            curves[k].append(float(np.mean(errs[k])))
        rows.append(f"| {kappa:g} | " + " | ".join(f"{curves[k][-1]:.4g}" for k in curves)
                    + f" | {G.klsu.ppc_rounds(kappa)} | {t_cp} |")
    ratio = curves["PCE (KLSU)"][-1] / curves["PCE (KLSU)"][0]
    head = (f"### 3. Condition-number sweep: d={d}, n={n}, rho={rho}, Sigma = Q diag(geomspace(1, kappa)) Q^T, "
            f"{trials} trials, mean Mahalanobis-Frobenius error (NaivePCE gets K = kappa, known mean 0)\n\n")
    tail = f"\nPCE error at kappa=1e6 / at kappa=1: **{ratio:.3f}** (target <= 1.5)\n"
    return head + "\n".join(rows) + "\n" + tail, curves


def bench_speed(n: int, d: int = 50, repeats: int = 3) -> str:
    X = np.random.default_rng(0).normal(size=(n, d)) * 2.0 + 1.0
    t_cov, t_mean = 3, 2
    passes = t_cov + t_mean

    def fit() -> Any:
        return G.fit(X, budget=dp.ZCDP(0.5), mean_bound=10 * np.sqrt(d), cov_bound=10 * np.sqrt(d),
                     t_cov=t_cov, t_mean=t_mean, noise=dp.SeededNoise(0))

    np.cov(X, rowvar=False)
    fit()  # warm up (first-touch page faults, imports)
    covs, fits = [], []
    for _ in range(repeats):  # interleaved, so both see the same load on a shared machine
        t0 = time.perf_counter()
        np.cov(X, rowvar=False)
        covs.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        fit()
        fits.append(time.perf_counter() - t0)
    cov, full = min(covs), min(fits)
    tracemalloc.start()
    fit()
    peak_fit = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    np.cov(X, rowvar=False)
    peak_cov = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    ratio = full / ((passes + 1) * cov)
    return (
        f"### 4. Speed and memory: full Gaussian fit, n={n:,}, d={d}, t_cov={t_cov}, t_mean={t_mean} "
        f"(t = {passes} data passes)\n\n"
        "| quantity | value |\n|---|---|\n"
        f"| np.cov, one pass (best of {repeats}) | {cov:.3f} s |\n"
        f"| fit (best of {repeats}) | {full:.3f} s |\n"
        f"| **fit / ((t + 1) x np.cov)** | **{ratio:.3f}** (target <= 1.5) |\n"
        f"| fit / np.cov | {full / cov:.2f} |\n"
        f"| peak extra memory of fit / data size (tracemalloc) | **{peak_fit / X.nbytes:.2f}** (target <= 3) |\n"
        f"| peak extra memory of np.cov / data size | {peak_cov / X.nbytes:.2f} |\n"
    )


def _plot(path: Path, mean: dict[str, list[float]], kappa: dict[str, list[float]]) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "(matplotlib is not installed: no plot)"
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for name, ys in mean.items():
        a.loglog([1000, 10000], ys, marker="o", label=name)
    a.set(xlabel="n", ylabel="trimmed mean l2 error", title="Mean, d=50, rho=0.5")
    a.legend(fontsize=7)
    for name, ys in kappa.items():
        b.loglog([1, 1e2, 1e4, 1e6], ys, marker="o", label=name)
    b.set(xlabel="kappa", ylabel="Mahalanobis-Frobenius error", title="Covariance, d=20, rho=0.5")
    b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return f"![plot]({path.name})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--kappa-trials", type=int, default=10)
    ap.add_argument("--kappa-n", type=int, default=100_000)
    ap.add_argument("--speed-n", type=int, default=1_000_000)
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    parts = [
        "## dpflow Gaussian estimators\n",
        stamp(None if argv is None else ["benchmarks/gaussian.py", *argv]),
        "Timings are noisy (2 shared cores); ratios are measured within one run.\n",
    ]
    text, mean_curves = bench_mean(args.trials)
    parts.append(text)
    print(text, flush=True)
    text, _ = bench_cov(args.trials)
    parts.append(text)
    print(text, flush=True)
    text, kappa_curves = bench_kappa(args.kappa_trials, args.kappa_n)
    parts.append(text)
    print(text, flush=True)
    if not args.skip_speed:
        text = bench_speed(args.speed_n)
        parts.append(text)
        print(text, flush=True)
    parts.append(f"Total benchmark time: {time.perf_counter() - t0:.0f} s.\n")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        parts.append(_plot(args.out.with_suffix(".png"), mean_curves, kappa_curves) + "\n")
        args.out.write_text("\n".join(parts))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
