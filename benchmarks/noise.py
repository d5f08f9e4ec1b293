"""Noise throughput and the work of the exact samplers, against numpy's float samplers.

Prints, from one run:

1. the time per draw of numpy's samplers, the per-draw CKS samplers (``dpflow.interpreter.samplers``, what
   ``SecureNoise`` used before issue 9) and the vectorised exact samplers (``vector_samplers``, used now),
   all at the scale of a lattice release (2^40 lattice steps);
2. the Laplace histogram learner (``laplace_histogram``, N bins) under ``SecureNoise`` against the same
   plan under continuous seeded noise and against ``rng.laplace`` of N values;
3. a d = 1000 Gaussian clipped-mean release, exact lattice against continuous;
4. a private median by the exponential mechanism: Gumbel-max (continuous sources) against the exact lattice
   sampler (``SecureNoise``), with the bound on the probability of its high-precision round;
5. the timing-dependence table: words (or uniform integers) drawn per draw, by quartile of |value|
   (work counted, not wall time; docs/assurance.md);
6. the exact fixed-point sum of issue 9 (``dpflow.nodes.fixedpoint``, what ``Sum`` computes for exact sources)
   against numpy's float sum on ``--fixed-rows`` x 10 rows (default 1e7), the exact Gram (``Gram`` without a
   public count) against the float Gram on ``--fixed-rows`` / 50 x 50 rows, and the accuracy cost of the exact
   release: the noise scale of an add/remove ``Sum`` under ``SecureNoise`` (lattice, widened sensitivity)
   against continuous noise (what a secure run drew before), and at a public n = 1e7 against the float sum's
   Higham error term that ``Sum`` used before.

    python benchmarks/noise.py [--large] [--fixed-rows N] [--only-fixed]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from fractions import Fraction

import numpy as np
from stamp import stamp

import dpflow as dp
from dpflow import nodes as N
from dpflow.estimators.discrete import laplace_histogram
from dpflow.interpreter import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.interpreter.samplers import IntSource, discrete_gaussian, discrete_laplace
from dpflow.interpreter.vector_samplers import WordSource, discrete_gaussian_array, discrete_laplace_array
from dpflow.nodes.expmech import float_phase_miss, report_noisy_max
from dpflow.nodes.fixedpoint import SUM_BITS, gram_units, grid_exponent, sum_units
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.mechanisms import unit_lattice
from dpflow.nodes.quantile import lattice_groups, lattice_quantile, quantile_log_weights
from dpflow.planner import certify


def per_draw(fn: Callable[[int], object], count: int) -> float:
    t0 = time.perf_counter()
    fn(count)
    return (time.perf_counter() - t0) / count


def best(fn: Callable[[], object], repeat: int = 3) -> float:
    out = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t0)
    return out


class _Counting(random.Random):
    calls = 0

    def randrange(self, n: int) -> int:  # type: ignore[override]
        self.calls += 1
        return super().randrange(n)


def work_table(n: int) -> list[tuple[str, list[float]]]:
    """Mean work per draw by quartile of |value|: (sampler, [q1, q2, q3, q4])."""
    rows = []
    for name, law, arg in (("discrete Laplace, scale 3", "lap", Fraction(3)),
                           ("discrete Gaussian, sigma^2 = 25", "gau", Fraction(25))):
        rng = _Counting(1)
        ints = IntSource(rng)
        src = WordSource(seed=1)
        scalar = discrete_laplace if law == "lap" else discrete_gaussian
        vector = discrete_laplace_array if law == "lap" else discrete_gaussian_array
        for label, draw in (
            ("per-draw CKS (uniform integers)", lambda f=scalar, a=arg, i=ints: f(a, i)),
            ("vectorised (64-bit words)", lambda f=vector, a=arg, s=src: int(f(a, 1, s)[0])),
        ):
            values, work = np.zeros(n), np.zeros(n)
            for i in range(n):
                before = rng.calls if label.startswith("per-draw") else src.words
                values[i] = draw()
                work[i] = (rng.calls if label.startswith("per-draw") else src.words) - before
            a = np.abs(values)
            bucket = np.searchsorted(np.quantile(a, [0.25, 0.5, 0.75]), a, side="right")
            rows.append((f"{name}: {label}", [float(work[bucket == b].mean()) if (bucket == b).any() else float("nan")
                                              for b in range(4)]))
    return rows


def interleaved(fns: list[Callable[[], object]], repeat: int = 3) -> list[float]:
    """Best-of-``repeat`` wall times of ``fns``, run in turn each round (a loaded machine slows all alike)."""
    out = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            out[i] = min(out[i], time.perf_counter() - t0)
    return out


def fixed_point_tables(n: int) -> None:
    """Section 6: fixed-point sum speed against numpy's float sum, and the accuracy cost of the exact release."""
    d, radius = 10, 1.0
    rng = np.random.default_rng(5)
    X = rng.normal(size=(n, d)) * 0.3
    backend = NumpyBackend()
    e = grid_exponent(FloatError("fixed_sum", dp.Vectors(d=d, l2_bound=radius)).row_norm({}), SUM_BITS)
    assert e is not None
    t_np, t_tree, t_fixed = interleaved([lambda: X.sum(axis=0), lambda: backend.tree_sum(X),
                                         lambda: backend.exact_sum(X, lambda B: sum_units(B, e))])
    print()
    print(f"| sum of {n:,} x {d} rows | time (s, best of 3, interleaved) | ratio to numpy sum |")
    print("|---|---|---|")
    for name, t in (("numpy X.sum(axis=0) (float)", t_np), ("NumpyBackend.tree_sum (float, blocks on threads)", t_tree),
                    ("exact fixed point (Sum under SecureNoise)", t_fixed)):
        print(f"| {name} | {t:.3f} | {t / t_np:.2f} |")

    G = rng.normal(size=(n // 50, 50))
    t_blas, t_exact = interleaved([lambda: backend.gram(G), lambda: backend.exact_sum(G, lambda B: gram_units(B, -20))])
    print()
    print(f"| Gram of {G.shape[0]:,} x 50 rows | time (s, best of 3, interleaved) | ratio to the float Gram |")
    print("|---|---|---|")
    print(f"| NumpyBackend.gram (float, BLAS) | {t_blas:.3f} | 1.00 |")
    print(f"| exact fixed point (Gram without a public count; int64 products, no BLAS) | {t_exact:.3f} | "
          f"{t_exact / t_blas:.1f} |")

    b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="add_remove")
    plan = b.build(s=N.GaussianMech()(N.Sum()(N.Clip(radius=radius)(b.source("X", dp.Vectors(d=d))))))
    small = X[:10_000]

    def sigma(noise: dp.NoiseSource) -> float:
        facts = execute(certify(plan, exact_noise=noise.exact), {"X": small}, noise, backend).facts
        return float(next(f["sigma"] for fs in facts.values() for f in fs if "sigma" in f))

    s_cont, s_exact = sigma(dp.SeededNoise(1)), sigma(dp.SecureNoise())
    fe_old = FloatError("sum", dp.Vectors(d=d, l2_bound=radius), dp.Sym.const(float(n)))
    fe_new = FloatError("fixed_sum", dp.Vectors(d=d, l2_bound=radius))
    rho = Fraction(1, 2)
    old = unit_lattice("l2", radius, tuple(2 * x for x in fe_old.bound({}, d)), d,  # type: ignore[arg-type]
                       lambda x: N.GaussianMech().noise_scale(x, rho, "zcdp"))
    new = unit_lattice("l2", radius, tuple(2 * x for x in fe_new.bound({}, d)), d,  # type: ignore[arg-type]
                       lambda x: N.GaussianMech().noise_scale(x, rho, "zcdp"))
    assert old is not None and new is not None
    print()
    print(f"| Sum of clipped rows (radius {radius}, d = {d}), zCDP 0.5 | noise std | ratio to continuous |")
    print("|---|---|---|")
    print(f"| add/remove, continuous noise (what SecureNoise drew before) | {s_cont:.9g} | 1 |")
    print(f"| add/remove, SecureNoise: exact fixed-point sum on the lattice | {s_exact:.9g} | "
          f"{s_exact / s_cont:.12f} |")
    print(f"| public n = {n:,}, SecureNoise before: float sum, Higham term | {old.scale:.9g} | "
          f"{old.scale / s_cont:.12f} |")
    print(f"| public n = {n:,}, SecureNoise now: fixed-point sum | {new.scale:.9g} | {new.scale / s_cont:.12f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--large", action="store_true", help="N = 1e6 bins and 1e6 draws (default 1e5)")
    ap.add_argument("--fixed-rows", type=int, default=10**7, help="rows of the fixed-point sum table (default 1e7)")
    ap.add_argument("--only-fixed", action="store_true", help="print only the fixed-point tables (section 6)")
    args = ap.parse_args()
    if args.only_fixed:
        fixed_point_tables(args.fixed_rows)
        return
    big = 10**6 if args.large else 10**5
    os_words = WordSource()
    ints = IntSource()
    rng = np.random.default_rng(0)
    k = 3000
    rows = [
        ("numpy normal (float, seeded PCG64)", per_draw(lambda c: rng.normal(0, 1, c), 10**6)),
        ("numpy laplace (float, seeded PCG64)", per_draw(lambda c: rng.laplace(0, 1, c), 10**6)),
        ("per-draw discrete Laplace scale=2^40, OS CSPRNG (before)", per_draw(
            lambda c: [discrete_laplace(Fraction(2**40), ints) for _ in range(c)], k)),
        ("per-draw discrete Gaussian sigma=2^40, OS CSPRNG (before)", per_draw(
            lambda c: [discrete_gaussian(Fraction(2**80), ints) for _ in range(c)], k)),
        ("vectorised discrete Laplace scale=2^40, OS CSPRNG", per_draw(
            lambda c: discrete_laplace_array(Fraction(2**40), c, os_words), big)),
        ("vectorised discrete Gaussian sigma=2^40, OS CSPRNG", per_draw(
            lambda c: discrete_gaussian_array(Fraction(2**80), c, os_words), big // 2)),
    ]
    print(stamp())
    print("| sampler | time per draw (us) | ratio to numpy laplace |")
    print("|---|---|---|")
    for name, t in rows:
        print(f"| {name} | {t * 1e6:.3f} | {t / rows[1][1]:.0f} |")

    nbins, n = big, 10_000
    plan = laplace_histogram(nbins, n, dp.PureDP(1.0))
    data = {"X": rng.integers(0, nbins, n)}
    t_secure = best(lambda: plan.run(data, noise=dp.SecureNoise()))
    t_seeded = best(lambda: plan.run(data, noise=dp.SeededNoise(1)))
    t_np = best(lambda: rng.laplace(0.0, 1.0, nbins))
    print()
    print(f"| laplace_histogram, N = {nbins:,} bins, n = {n:,} | time (s, best of 3) | us per bin |")
    print("|---|---|---|")
    for name, t in (("exact lattice (SecureNoise)", t_secure), ("continuous (seeded)", t_seeded),
                    (f"numpy rng.laplace of {nbins:,} values", t_np)):
        print(f"| {name} | {t:.4f} | {t / nbins * 1e6:.3f} |")
    print(f"| ratio exact / numpy laplace | {t_secure / t_np:.1f} | |")

    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=1000), n=10_000)
    mplan = b.build(mean=N.GaussianMech()(N.Mean()(N.Clip(radius=5.0)(X))))
    mdata = {"X": rng.normal(size=(10_000, 1000))}
    t_c = best(lambda: mplan.run(mdata, noise=dp.SeededNoise(1)))
    t_e = best(lambda: mplan.run(mdata, noise=dp.SecureNoise()))
    print()
    print("| d = 1000 clipped-mean release, n = 10,000 | time (s, best of 3) |")
    print("|---|---|")
    print(f"| continuous (seeded) | {t_c:.3f} |")
    print(f"| exact lattice (SecureNoise) | {t_e:.3f} |")
    print(f"| ratio exact / continuous | {t_e / t_c:.2f} |")

    print()
    print("| quantile (median, eps = 1) of n values | Gumbel-max, continuous (ms) | exact lattice (ms) | ratio | "
          "P(decimal round) bound |")
    print("|---|---|---|---|---|")
    for nq in (10**4, big, 10 * big):
        framed = np.concatenate(([-10.0], np.sort(rng.normal(size=nq)), [10.0]))
        t_g = best(lambda f=framed: report_noisy_max(quantile_log_weights(f, 0.5, 1.0, 1.0), dp.SeededNoise(1)))
        t_x = best(lambda f=framed: lattice_quantile(f, 0.5, Fraction(1, 2), dp.SecureNoise()))
        scores, mult, _, _ = lattice_groups(framed, 0.5, Fraction(1, 2))
        miss = float_phase_miss(scores, mult)
        print(f"| n = {nq:,} | {t_g * 1e3:.1f} | {t_x * 1e3:.1f} | {t_x / t_g:.2f} | {miss:.1e} |")

    print()
    print("| work per draw by quartile of abs(value) (2,000 single draws) | q1 | q2 | q3 | q4 | q4 / q1 |")
    print("|---|---|---|---|---|---|")
    for name, means in work_table(2000):
        print(f"| {name} | " + " | ".join(f"{m:.2f}" for m in means) + f" | {means[3] / means[0]:.2f} |")

    fixed_point_tables(args.fixed_rows)


if __name__ == "__main__":
    main()
