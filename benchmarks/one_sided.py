"""One-sided costs of value pieces (issue 10): every mechanism's share and noise std with the tight replace-one
rule of a value split (a record moving between two pieces charges each its one-sided cost) against the rule
before it (the two pieces in full), measured in the same run: the baseline certifies the same plan with every
one-sided ratio set to 1.

Plans: a hand-written split into two Gaussian sums (rows in a ball, d = 5), the same with a Laplace histogram,
and the mixture estimator's plans (k = 3, d = 5, n = 8,000; the default RPGMP and sample-and-aggregate) under
an (epsilon, delta) and a zCDP budget.  Noise std ratio = sqrt(share before / share after) (Gaussian, and
Laplace in zCDP mode; epsilon ratio in pure mode).

    python benchmarks/one_sided.py
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
from collections.abc import Callable, Iterator
from fractions import Fraction

from stamp import stamp

import dpflow as dp
from dpflow import nodes as N
from dpflow.estimators.mixtures import gaussian_mixture_plan
from dpflow.nodes.base import Mechanism


@contextlib.contextmanager
def charged_in_full() -> Iterator[None]:
    """The rule before: every mechanism's one-sided ratio is 1 (the one-sided change charged in full)."""
    saved = {cls: cls.__dict__["one_sided_ratio"] for cls in (Mechanism, N.GaussianMech, N.LaplaceMech)
             if "one_sided_ratio" in cls.__dict__}
    try:
        for cls in saved:
            cls.one_sided_ratio = lambda self, stat: Fraction(1)  # type: ignore[method-assign]
        yield
    finally:
        for cls, fn in saved.items():
            cls.one_sided_ratio = fn  # type: ignore[method-assign]


def one_split(d: int, laplace: bool) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=d), n=8000))
    a, c = N.split(X, N.PartitionByBall(center=(0.0,) * d, radius=0.5))
    outs = {"sa": N.GaussianMech()(N.Sum()(a)), "sc": N.GaussianMech()(N.Sum()(c))}
    if laplace:
        outs["ha"] = N.LaplaceMech()(N.Histogram(edges=[-1.0, 0.0, 1.0])(N.Columns(keep=[0])(a)))
    return b.build(**outs)


PLANS: dict[str, Callable[[], dp.Plan]] = {
    "one split: 2 Gaussian sums, zCDP 0.5": lambda: one_split(5, False),
    "one split: 2 Gaussian sums + Laplace histogram": lambda: one_split(5, True),
    "mixtures rpgmp k=3 d=5, (2, 1e-6)": lambda: gaussian_mixture_plan(5, 8000, 3, dp.ApproxDP(2.0, 1e-6),
                                                                      method="rpgmp"),
    "mixtures rpgmp k=3 d=5, zCDP 0.5 (delta 1e-6)": lambda: gaussian_mixture_plan(5, 8000, 3,
                                                                                  dp.ApproxZCDP(0.5, 1e-6),
                                                                                  method="rpgmp"),
    "mixtures sample_aggregate k=3 d=5, (2, 1e-6)": lambda: gaussian_mixture_plan(
        5, 8000, 3, dp.ApproxDP(2.0, 1e-6), method="sample_aggregate"),
}


def shares(plan: dp.Plan) -> tuple[str, dict[str, tuple[str, Fraction]]]:
    cert = dp.certify(plan)
    mode = cert.ledger.allocation.split(":")[0]
    return mode, {e.node: (e.kind, e.event.share) for e in cert.ledger.entries if e.event is not None}


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    print(stamp() + "\n")
    print("| plan | mode before -> after | mechanisms | share after / before (min, median, max) | "
          "noise std after / before (median; Gaussian min) |")
    print("|---|---|---|---|---|")
    for name, make in PLANS.items():
        plan = make()
        with charged_in_full():
            mode0, before = shares(plan)
        mode1, after = shares(plan)
        ratios = [(kind, after[k][1] / s) for k, (kind, s) in before.items() if s > 0]
        std = [float(1 / r) ** 0.5 for _, r in ratios]
        gauss = [float(1 / r) ** 0.5 for kind, r in ratios if kind == "GaussianMech"]
        rs = [float(r) for _, r in ratios]
        print(f"| {name} | {mode0} -> {mode1} | {len(rs)} | {min(rs):.3f}, {statistics.median(rs):.3f}, "
              f"{max(rs):.3f} | {statistics.median(std):.3f}; {min(gauss):.3f} |")


if __name__ == "__main__":
    main()
