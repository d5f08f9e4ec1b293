"""Scale benchmarks (issue 15): memory and speed of the numpy backend, MERR against np.sort, the fixed cost of
a small release, and the dask backend against dask's own non-private mean / second moment / histogram.
Prints Markdown tables; ``--out FILE`` also writes them and a PNG plot next to it (matplotlib, ``plot`` extra).

    python benchmarks/scale.py                                    # a few minutes on 2 cores
    python benchmarks/scale.py --out benchmarks/results/scale.md
    python benchmarks/scale.py --big                              # dask up to n = 1e8 (rows generated in blocks)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from stamp import stamp

import dpflow as dp
from dpflow import nodes as N
from dpflow.estimators import gaussian as G
from dpflow.estimators.discrete import merr
from dpflow.interpreter.numpy_backend import WORKERS, MappedRows, NumpyBackend, one_blas_thread
from dpflow.planner import certify, clear_certificates


def best(fn: Callable[[], Any], repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def wall_and_cpu(base: Callable[[], Any], fn: Callable[[], Any], rounds: int) -> tuple[tuple[float, float], ...]:
    """Best (wall, process CPU) of ``base`` and of ``fn``, run alternately ``rounds`` times.  The CPU time (user +
    system, all threads) is the work itself, which other processes' load barely changes; on a busy machine the
    wall time follows the share of the cores the process gets."""
    out: list[list[tuple[float, float]]] = [[], []]
    for _ in range(rounds):
        for k, f in enumerate((base, fn)):
            c0, t0 = _cpu(), time.perf_counter()
            f()
            out[k].append((time.perf_counter() - t0, _cpu() - c0))
    return tuple((min(w for w, _ in runs), min(c for _, c in runs)) for runs in out)


# ----------------------------------------------------------------------------- 1. memory of the Gaussian fit


def bench_gaussian_memory(n: int, d: int = 50) -> list[str]:
    X = np.random.default_rng(0).normal(size=(n, d)) * 2.0 + 1.0
    t_cov, t_mean = 3, 2

    def fit() -> Any:
        return G.fit(X, budget=dp.ZCDP(0.5), mean_bound=10 * np.sqrt(d), cov_bound=10 * np.sqrt(d),
                     t_cov=t_cov, t_mean=t_mean, noise=dp.SeededNoise(0))

    fit()
    (c, c_cpu), (f, f_cpu) = wall_and_cpu(lambda: np.cov(X, rowvar=False), fit, 3)
    tracemalloc.start()
    fit()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    np.cov(X, rowvar=False)
    peak_cov = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    passes = t_cov + t_mean + 1  # the rounds, plus the pair differences' and the whitening's reads
    return [
        f"### 1. Numpy backend: full Gaussian fit, n={n:,}, d={d}, t_cov={t_cov}, t_mean={t_mean}",
        "",
        "| quantity | value |",
        "|---|---|",
        f"| np.cov, one pass (best of 3) | {c:.3f} s wall, {c_cpu:.3f} s CPU |",
        f"| fit (best of 3) | {f:.3f} s wall, {f_cpu:.3f} s CPU |",
        f"| **fit / np.cov**, wall | **{f / c:.2f}** (target <= 4) |",
        f"| **fit / ((t + 1) x np.cov)**, per pass, wall | **{f / (passes * c):.3f}** (target <= 0.6) |",
        f"| fit / np.cov, CPU (all threads; np.cov's BLAS on its default threads) | {f_cpu / c_cpu:.2f} |",
        f"| **peak extra memory of the fit / data size** (tracemalloc) | **{peak / X.nbytes:.3f}** (target < 1.5) |",
        f"| peak extra memory of np.cov / data size | {peak_cov / X.nbytes:.3f} |",
        "",
    ]


class _TimedBackend(NumpyBackend):
    """The numpy backend, timing every data pass (wall and process CPU time): each reduction (a map fused into
    it) and each persist that computes rows (the interpreter persists the rows that several rounds read)."""

    def __init__(self) -> None:
        self.passes: list[tuple[str, float, float, float]] = []

    def _timed(self, name: str, fn: Callable[[], Any], lazy: bool = False) -> Any:
        t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        out = fn()
        if not lazy:
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            self.passes.append((name, time.perf_counter() - t0, r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime))
        return out

    def gram(self, X: Any) -> np.ndarray:
        return self._timed("Gram (covariance round)", lambda: super(_TimedBackend, self).gram(X))

    def tree_sum(self, X: Any) -> np.ndarray:
        return self._timed("sum (mean round)", lambda: super(_TimedBackend, self).tree_sum(X))

    def persist(self, X: Any) -> Any:
        return self._timed("persist (row map computed)", lambda: super(_TimedBackend, self).persist(X),
                           lazy=not isinstance(X, MappedRows))


def _cov_times(X: np.ndarray) -> tuple[float, float]:
    """One np.cov pass: wall time (BLAS on its default threads) and user CPU time with BLAS on one thread (the
    work itself: a multi-threaded BLAS also counts its threads' waiting)."""
    t0 = time.perf_counter()
    np.cov(X, rowvar=False)
    wall = time.perf_counter() - t0
    limit = one_blas_thread()
    with limit if limit is not None else contextlib.nullcontext():
        u0 = resource.getrusage(resource.RUSAGE_SELF).ru_utime
        np.cov(X, rowvar=False)
        user = resource.getrusage(resource.RUSAGE_SELF).ru_utime - u0
    return wall, user


def bench_gaussian_passes(n: int, d: int = 50, repeats: int = 5) -> list[str]:
    """Each data pass of the fit (best of ``repeats`` runs, position by position) against one np.cov pass:
    wall time, and the process's user CPU time (robust to other processes' load on a shared machine); the
    kernel time of the pass (fresh pages of a persisted array) is shown apart."""
    X = np.random.default_rng(0).normal(size=(n, d)) * 2.0 + 1.0
    plan = G.gaussian(d=d, n=n, budget=dp.ZCDP(0.5), R=10 * np.sqrt(d), K=10 * np.sqrt(d), t_cov=3, t_mean=2)
    runs, cov = [], []
    load0 = os.getloadavg()[0]
    for _ in range(repeats):  # interleaved: both see the same load on a shared machine
        cov.append(_cov_times(X))
        backend = _TimedBackend()
        plan.run({"X": X}, noise=dp.SeededNoise(0), backend=backend)
        runs.append(backend.passes)
    cw, cc = min(c[0] for c in cov), min(c[1] for c in cov)
    rows = []
    for i, (name, _, _, _) in enumerate(runs[0]):
        w, u, k = (min(r[i][j] for r in runs) for j in (1, 2, 3))
        rows.append(f"| {i + 1} | {name} | {w:.3f} | {w / cw:.2f} | {u:.3f} | {u / cc:.2f} | {k:.3f} |")
    return [
        f"Each data pass of the fit (best of {repeats} per pass; load average {load0:.1f} to "
        f"{os.getloadavg()[0]:.1f}; the blocks of a pass on {WORKERS} threads with one BLAS thread each). "
        f"np.cov, best of {repeats}: {cw:.3f} s wall (BLAS on its default threads), {cc:.3f} s user CPU (BLAS on "
        "one thread: its work alone):",
        "",
        "| pass | what | wall s | / np.cov wall | user CPU s | / np.cov user CPU | kernel CPU s |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]


# ----------------------------------------------------------------------------- 2. MERR against np.sort


def bench_merr(n: int, rounds: int = 3) -> list[str]:
    Nd, T = 10**18, 20
    x = (np.random.default_rng(7).standard_cauchy(n) * 1e15 + 4e17).clip(0, Nd - 1).astype(np.int64)
    plan = merr(N=Nd, n=n, budget=dp.PureDP(1), T=T)
    plan.run({"X": x}, noise=dp.SeededNoise(0))  # certified once, then cached
    (s, s_cpu), (r, r_cpu) = wall_and_cpu(lambda: np.sort(x), lambda: plan.run({"X": x}, noise=dp.SeededNoise(0)),
                                          rounds)
    return [
        f"### 2. MERR: n = {n:.0e}, N = 1e18, T = {T} (heavy-tailed sample; best of {rounds}, interleaved)",
        "",
        "| | np.sort of the sample | MERR plan.run (one sort, T rounds; certificate cached) | ratio (target <= 5) |",
        "|---|---|---|---|",
        f"| wall (s) | {s:.2f} | {r:.2f} | **{r / s:.1f}x** |",
        f"| CPU, all threads (s) | {s_cpu:.2f} | {r_cpu:.2f} | {r_cpu / s_cpu:.1f}x |",
        "",
    ]


# ----------------------------------------------------------------------------- 3. fixed cost of a small release


def _small_plan() -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=1), n=1000)
    return b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=3.0)(X))))


def bench_small(repeats: int = 200) -> list[str]:
    X = np.random.default_rng(0).normal(size=(1000, 1))
    plan = _small_plan()
    noise = dp.SeededNoise(0)

    def per_call(fn: Callable[[], Any]) -> float:
        fn()
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return float(np.median(ts))

    def cold() -> None:
        clear_certificates()
        _small_plan().run({"X": X}, noise=noise)

    rows = [
        ("certify only (no cache)", per_call(lambda: certify(_small_plan()))),
        ("build + certify + run, certificate not cached", per_call(cold)),
        ("build + run, certificate cached by plan hash", per_call(lambda: _small_plan().run({"X": X}, noise=noise))),
        ("run of one plan object again", per_call(lambda: plan.run({"X": X}, noise=noise))),
        ("np.mean", per_call(lambda: np.mean(X))),
    ]
    out = ["### 3. Fixed cost of a small release: clipped mean of 1,000 rows, SeededNoise (median of "
           f"{repeats})", "", "| what | time (ms) |", "|---|---|"]
    out += [f"| {name} | {t * 1e3:.3f} |" for name, t in rows]
    return out + [""]


# ----------------------------------------------------------------------------- 4. dask backend


def _dask_plans(n: int, d: int) -> dict[str, dp.Plan]:
    def one(make: Callable[[Any], Any]) -> dp.Plan:
        b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
        return b.build(out=make(b.source("X", dp.Vectors(d=d), n=n)))

    edges = np.linspace(-4, 4, 33)
    return {
        "mean": one(lambda X: N.GaussianMech()(N.Mean()(N.Clip(radius=10.0)(X)))),
        "second moment": one(lambda X: N.GaussianMech()(N.SecondMoment()(N.Clip(radius=10.0)(X)))),
        "histogram": one(lambda X: N.GaussianMech()(N.Histogram(edges=tuple(edges))(N.Columns(keep=(0,))(X)))),
    }


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


Curves = dict[str, dict[str, list[float]]]


def bench_dask(ns: list[int], d: int, workers: int,
               partial: Callable[[list[str]], None] | None = None) -> tuple[list[str], Curves]:
    import dask.array as da
    from distributed import Client, LocalCluster

    from dpflow.interpreter.dask_backend import DaskBackend

    edges = np.linspace(-4, 4, 33)
    baselines: dict[str, Callable[[Any], Any]] = {
        "mean": lambda X: X.mean(axis=0).compute(),
        "second moment": lambda X: (X.T @ X).compute(),
        "histogram": lambda X: da.histogram(X[:, 0], bins=edges)[0].compute(),
    }
    out = [f"### 4. Dask backend: LocalCluster of {workers} worker processes x 1 thread, d = {d}, rows in blocks "
           "of 2^17; time per data pass (best of 2; one pass each above 1e7 rows, the dpflow one under "
           "tracemalloc), against dask's own non-private computation of the same statistic on the same array "
           "(persisted up to 2 GiB; larger ones are generated on the workers in every pass, by both), and the "
           "numpy backend on the array in memory (up to 1 GiB)", "",
           "| n | statistic | dask (non-private) s | dpflow dask s | ratio | dpflow numpy s | driver peak extra "
           "MiB (tracemalloc) | worker peak RSS MiB |",
           "|---|---|---|---|---|---|---|---|"]
    curves: dict[str, dict[str, list[float]]] = {s: {"dask": [], "dpflow dask": [], "dpflow numpy": []}
                                                 for s in baselines}
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      memory_limit="3GiB") as cluster, Client(cluster) as client:
        backend = DaskBackend(client)
        for n in ns:
            out += _dask_rows(client, backend, n, d, workers, baselines, curves)
            if partial is not None:
                partial(out)
    return out + [""], curves


def _dask_rows(client: Any, backend: Any, n: int, d: int, workers: int,
               baselines: dict[str, Callable[[Any], Any]], curves: dict[str, dict[str, list[float]]]) -> list[str]:
    import dask.array as da
    from distributed import wait

    X = da.random.default_rng(0).normal(size=(n, d), chunks=(1 << 17, d))
    if n * d * 8 <= 2 * 1024**3:  # bigger ones are regenerated on the workers in every pass
        X = client.persist(X)
        wait(X)
    local = np.asarray(X) if n * d * 8 <= 1024**3 else None
    rows = []
    for stat, plan in _dask_plans(n, d).items():
        f = baselines[stat]

        def private(data: Any, engine: Any, p: dp.Plan = plan) -> Any:
            return p.run({"X": data}, noise=dp.SeededNoise(0), backend=engine)

        repeats = 2 if n <= 10**7 else 1
        base = best(lambda: f(X), repeats)  # noqa: B023 (called inside this iteration)
        ours = best(lambda: private(X, backend), repeats) if n <= 10**7 else float("inf")  # noqa: B023
        tracemalloc.start()
        t0 = time.perf_counter()
        private(X, backend)
        ours = min(ours, time.perf_counter() - t0)
        driver = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        rss = max(client.run(_rss_mb).values())
        nump = best(lambda: private(local, None), 2) if local is not None else float("nan")  # noqa: B023
        curves[stat]["dask"].append(base)
        curves[stat]["dpflow dask"].append(ours)
        curves[stat]["dpflow numpy"].append(nump)
        rows.append(f"| {n:.0e} | {stat} | {base:.3f} | {ours:.3f} | {ours / base:.2f} | {nump:.3f} | "
                    f"{driver:.1f} | {rss:.0f} |")
    return rows


def _plot(path: Path, ns: list[int], curves: dict[str, dict[str, list[float]]]) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "(matplotlib not installed: no plot)"
    fig, axes = plt.subplots(1, len(curves), figsize=(4.2 * len(curves), 3.6), sharey=True)
    for ax, (stat, series) in zip(np.atleast_1d(axes), curves.items(), strict=True):
        for label, ys in series.items():
            ax.loglog(ns[: len(ys)], ys, marker="o", label=label)
        ax.set_title(stat)
        ax.set_xlabel("rows n")
        ax.grid(True, which="both", alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("seconds per pass")
    np.atleast_1d(axes)[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return f"![cost against n]({path.name})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gauss-n", type=int, default=1_000_000)
    ap.add_argument("--merr-n", type=int, default=10_000_000)
    ap.add_argument("--dask-d", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dask-ns", default="1e6,4e6,1e7", help="comma-separated row counts for the dask section")
    ap.add_argument("--big", action="store_true", help="dask up to n = 1e8 (adds 3e7 and 1e8)")
    ap.add_argument("--skip", default="", help="comma-separated sections to skip: gauss,merr,small,dask")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    t0 = time.perf_counter()
    head = stamp(None if argv is None else ["benchmarks/scale.py", *argv])
    lines = [f"## dpflow scale benchmarks (issue 15)\n\n{head}\n\nLoad average at start "
             f"{os.getloadavg()[0]:.1f} on the shared cores: timings on a busy machine vary by up to 2x.\n"]
    if "gauss" not in skip:
        lines += bench_gaussian_memory(args.gauss_n)
        lines += bench_gaussian_passes(args.gauss_n)
    if "merr" not in skip:
        lines += bench_merr(args.merr_n)
    if "small" not in skip:
        lines += bench_small()
    ns = [int(float(v)) for v in args.dask_ns.split(",")] + ([3 * 10**7, 10**8] if args.big else [])
    curves: dict[str, dict[str, list[float]]] = {}
    if "dask" not in skip:
        def partial(rows: list[str]) -> None:  # what finished so far, in case a big n does not
            print("\n".join(rows), file=sys.stderr, flush=True)
            if args.out:
                Path(args.out).with_suffix(".partial.md").write_text("\n".join(lines + rows) + "\n")

        text, curves = bench_dask(ns, args.dask_d, args.workers, partial)
        lines += text
    lines.append(f"Total benchmark time: {time.perf_counter() - t0:.0f} s.\n")
    text = "\n".join(lines)
    if args.out:
        out = Path(args.out)
        if curves:
            text += "\n" + _plot(out.with_suffix(".png"), ns, curves) + "\n"
        out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
