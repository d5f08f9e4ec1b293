"""How often the private per-column scale step (dpflow.estimators.scale.column_centre_scale) misses, by how
its weight is split between its four mechanisms (range of |x|, median, range of |x - c|, spread).

One column of N(mu, 1), n rows, the step given half of ApproxDP(eps, 1e-6)'s Gaussian-DP rho (the share
``scale_weight`` caps it at) as a zCDP budget (Gaussian range histograms), exact seeded noise.  A miss: the
centre more than 2 sd from mu, or the scale outside [1/4, 4] sd.  ``SHARES`` in dpflow/estimators/scale.py
cites the result.

    python benchmarks/scale_step.py --out benchmarks/results
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
from stamp import stamp

import dpflow as dp
from dpflow.estimators import scale as S
from dpflow.privacy import gaussian_budget_rho

SPLITS = {
    "by need at n = 1e4 (the Laplace-era rule)": (0.2349, 0.1060, 0.2349, 0.4241),
    "equal": (0.25, 0.25, 0.25, 0.25),
    "ranges 0.3, quantiles 0.2": (0.3, 0.2, 0.3, 0.2),
}
SETTINGS = [(200, 4.0), (500, 1.0), (2000, 0.25), (10_000, 0.05)]
MUS = [0.0, 10.0, 1e3, 1e6]


def misses(shares: tuple[float, ...], n: int, eps: float, mu: float, seeds: int) -> int:
    S.SHARES = shares  # the module constant the step reads when a plan is built
    rho = gaussian_budget_rho(dp.ApproxDP(eps, 1e-6))
    b = dp.PlanBuilder(budget=dp.ZCDP(rho / 2))
    X = b.source("X", dp.Vectors(d=1), n=n)
    c, s = S.column_scales(X, 1, 1.0)
    plan = b.build(c=c, s=s)
    out = 0
    for seed in range(seeds):
        Z = np.random.default_rng(seed).normal(mu, 1.0, (n, 1))
        r = plan.run({"X": Z}, noise=dp.SeededNoise(seed, exact=True)).released
        cc, ss = float(np.ravel(r["c"])[0]), float(np.ravel(r["s"])[0])
        out += int(abs(cc - mu) > 2.0 or not 0.25 <= ss <= 4.0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=60)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    original = S.SHARES
    lines = [f"# Scale step misses by weight split\n\n{stamp()}\n", __doc__.split("\n\n")[1].replace("\n", " ") + "\n",
             f"Misses out of {args.seeds} seeds, for mu = {', '.join(f'{m:g}' for m in MUS)} (sd 1).\n",
             "| split (range, median, spread range, spread) | " + " | ".join(
                 f"n={n}, eps={e:g}" for n, e in SETTINGS) + " | total |", "|---|" + "---|" * (len(SETTINGS) + 1)]
    try:
        for name, shares in SPLITS.items():
            cells = [[misses(shares, n, e, mu, args.seeds) for mu in MUS] for n, e in SETTINGS]
            total = sum(map(sum, cells))
            row = f"| {name} ({', '.join(f'{x:.2f}' for x in shares)}) | " + " | ".join(
                "/".join(map(str, c)) for c in cells) + f" | {total}/{args.seeds * len(MUS) * len(SETTINGS)} |"
            lines.append(row)
            print(row, flush=True)
    finally:
        S.SHARES = original
    text = "\n".join(lines) + "\n"
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "scale_step.md").write_text(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
