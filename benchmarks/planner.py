"""Planner speed: certify plans of 100, 1,000 and 10,000 nodes, no data read.

Three shapes: a *wide* composition (one source, many clipped means each released with
its own Gaussian mechanism, alternating with index splits), a *deep* Repeat (a
loop whose body is a long chain of preconditioning, clipping, a query and a
mechanism), and a *wide mixed* plan (Gaussian and Laplace releases) under an
``ApproxDP`` budget, allocated in PLD mode.  Target (issue 2): the 10,000-node plan is certified in under a second.

    python benchmarks/planner.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

from stamp import stamp

import dpflow as dp
from dpflow import nodes as N
from dpflow.privacy.pld import _epsilon

pld_epsilon_cache_clear = _epsilon.cache_clear


def wide_plan(nodes: int) -> dp.Plan:
    """About ``nodes`` nodes: groups of Clip -> Mean -> GaussianMech, every 4th group on index pieces."""
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0), name=f"wide_{nodes}")
    X = b.source("X", dp.Vectors(d=10), n=100_000)
    outs = {}
    k = 0
    while len(b._records) < nodes - 4:
        if k % 4 == 3:
            a, c = N.split(X, N.SplitByIndex(pieces=2))
            outs[f"m{k}a"] = N.GaussianMech()(N.Sum()(N.Clip(radius=1.0 + k)(a)))
            outs[f"m{k}c"] = N.GaussianMech()(N.Sum()(N.Clip(radius=1.0 + k)(c)))
        else:
            outs[f"m{k}"] = N.GaussianMech(weight=1 + k % 3)(N.Mean()(N.Clip(radius=1.0 + k)(X)))
        k += 1
    return b.build(**outs)


def mixed_plan(nodes: int) -> dp.Plan:
    """The wide shape under ApproxDP(1, 1e-6) with a Laplace release in every 4th group: the planner
    searches the PLD-mode total (issue 16), one allocation and fold per step of the search."""
    b = dp.PlanBuilder(budget=dp.ApproxDP(1.0, 1e-6), name=f"mixed_{nodes}")
    X = b.source("X", dp.Vectors(d=10), n=100_000)
    outs = {}
    k = 0
    while len(b._records) < nodes - 4:
        if k % 4 == 3:
            outs[f"m{k}"] = N.LaplaceMech()(N.Sum()(N.Clip(box=(-1.0, 1.0))(X)))
        else:
            outs[f"m{k}"] = N.GaussianMech(weight=1 + k % 3)(N.Mean()(N.Clip(radius=1.0 + k)(X)))
        k += 1
    return b.build(**outs)


def deep_plan(nodes: int, times: int = 10) -> dp.Plan:
    """A Repeat whose body is a chain of about ``nodes`` nodes (precondition / clip / mean / release)."""
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0), name=f"deep_{nodes}")
    X = b.source("X", dp.Vectors(d=10), n=100_000)

    def body(rows: dp.Sensitive[dp.nodes.base.Rows], state: dp.Released[object],
             k: dp.Released[object]) -> dp.Released[object]:
        out = state
        while len(rows.builder._records) < nodes - 6:  # type: ignore[attr-defined]
            centred = N.Clip(radius=5.0, center=out)(rows)
            out = N.GaussianMech()(N.Mean()(centred))
        return out

    last = N.repeat(X, b.public([0.0] * 10), body, times=times, round_weights=[1.0 + i for i in range(times)])
    return b.build(mean=last)


def timed(plan: dp.Plan, repeat: int, exact_noise: bool) -> float:
    best = float("inf")
    for _ in range(repeat):
        pld_epsilon_cache_clear()  # every run computes its PLD figures afresh
        t0 = time.perf_counter()
        dp.certify(plan, exact_noise=exact_noise)
        best = min(best, time.perf_counter() - t0)
    return best


def count_nodes(plan: dp.Plan) -> int:
    total = 0
    stack = list(plan.records)
    while stack:
        rec = stack.pop()
        total += 1
        if isinstance(rec.node, N.Repeat):
            stack.extend(rec.node.body.records)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(stamp())
    print(f"| shape | nodes | mechanisms | certify, continuous noise (s, best of {args.repeat}) "
          "| certify, SecureNoise (the default run) |")
    print("|---|---|---|---|---|")
    for size in (100, 1_000, 10_000):
        for name, make in (("wide", wide_plan), ("deep Repeat", deep_plan),
                           ("wide mixed, ApproxDP (PLD mode)", mixed_plan)):
            plan = make(size)
            n_mech = sum(1 for _ in dp.certify(plan).allocations)
            cont, secure = timed(plan, args.repeat, False), timed(plan, args.repeat, True)
            print(f"| {name} | {count_nodes(plan)} | {n_mech} | {cont:.3f} | {secure:.3f} |")


if __name__ == "__main__":
    main()
