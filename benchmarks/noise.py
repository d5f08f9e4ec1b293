"""Noise throughput: exact discrete samplers on the OS CSPRNG against numpy's float samplers.

Prints, from one run, the time per draw of each sampler and the cost of a d = 1000 Gaussian
release (clipped mean, lattice path) against the same release with continuous seeded noise.

    python benchmarks/noise.py
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from fractions import Fraction

import numpy as np

import dpflow as dp
from dpflow import nodes as N
from dpflow.interpreter.samplers import IntSource, discrete_gaussian, discrete_laplace


def per_draw(fn: Callable[[int], object], count: int) -> float:
    t0 = time.perf_counter()
    fn(count)
    return (time.perf_counter() - t0) / count


def main() -> None:
    src = IntSource()
    rng = np.random.default_rng(0)
    k = 5000
    rows = [
        ("numpy normal (float, seeded PCG64)", per_draw(lambda c: rng.normal(0, 1, c), 10**6)),
        ("numpy laplace (float, seeded PCG64)", per_draw(lambda c: rng.laplace(0, 1, c), 10**6)),
        ("discrete Gaussian sigma=2^40, OS CSPRNG", per_draw(
            lambda c: [discrete_gaussian(Fraction(2**80), src) for _ in range(c)], k)),
        ("discrete Laplace scale=2^40, OS CSPRNG", per_draw(
            lambda c: [discrete_laplace(Fraction(2**40), src) for _ in range(c)], k)),
    ]
    print(f"machine: {platform.machine()}, {platform.python_implementation()} {platform.python_version()}")
    print("| sampler | time per draw (us) | ratio to numpy normal |")
    print("|---|---|---|")
    for name, t in rows:
        print(f"| {name} | {t * 1e6:.3f} | {t / rows[0][1]:.0f} |")

    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=1000), n=10_000)
    plan = b.build(mean=N.GaussianMech()(N.Mean()(N.Clip(radius=5.0)(X))))
    data = {"X": rng.normal(size=(10_000, 1000))}
    times = {}
    for name, noise in (("continuous (seeded)", dp.SeededNoise(1)), ("exact lattice (SecureNoise)", dp.SecureNoise())):
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            plan.run(data, noise=noise)
            best = min(best, time.perf_counter() - t0)
        times[name] = best
    print()
    print("| d = 1000 clipped-mean release, n = 10,000 | time (s, best of 3) |")
    print("|---|---|")
    for name, t in times.items():
        print(f"| {name} | {t:.3f} |")
    print(f"| ratio exact / continuous | {times['exact lattice (SecureNoise)'] / times['continuous (seeded)']:.2f} |")


if __name__ == "__main__":
    main()
