"""Certification time of the 10,000-node benchmark plans, this checkout against a baseline source tree, in
the same minutes: on a shared machine only such ratios mean anything.

Every measurement runs in a fresh process (so *first* is a certification with cold caches, what a user pays
once per process; *best* is the best of ``--repeat`` more, PLD cache cleared each time, as
``benchmarks/planner.py`` reports), baseline and branch alternating plan by plan for ``--rounds`` rounds.
Times are CPU seconds of the process (``time.process_time``), which other jobs on the machine disturb less
than wall time.  The baseline is a directory holding a ``dpflow`` package, e.g. main's:

    git archive main dpflow | tar -x -C /tmp/main_src
    python benchmarks/planner_compare.py --baseline /tmp/main_src [--rounds 3] [--size 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHAPES = ("wide", "deep", "mixed")


def worker(shape: str, size: int, repeat: int) -> dict[str, float]:
    """Time one plan's certification in this process: the first run, then the best of ``repeat``."""
    import time

    import dpflow as dp
    sys.path.insert(0, str(HERE))
    from planner import deep_plan, mixed_plan, pld_epsilon_cache_clear, wide_plan

    plan = {"wide": wide_plan, "deep": deep_plan, "mixed": mixed_plan}[shape](size)
    plan.hash  # noqa: B018 - the plan's content hash is computed on build in both trees; not a planner cost
    times = []
    for _ in range(1 + repeat):
        pld_epsilon_cache_clear()
        t0 = time.process_time()
        dp.certify(plan)
        times.append(time.process_time() - t0)
    return {"first": times[0], "best": min(times[1:])}


def measure(src: str | None, shape: str, size: int, repeat: int) -> dict[str, float]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, __file__, "--worker", shape, "--size", str(size), "--repeat", str(repeat)],
                         env=env, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", help="a directory holding the baseline dpflow package")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--size", type=int, default=10_000)
    ap.add_argument("--worker", choices=SHAPES, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.size, args.repeat)))
        return
    if not args.baseline:
        ap.error("--baseline is required")
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    runs: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(args.rounds):
        for shape in SHAPES:
            for label, src in (("baseline", args.baseline), ("branch", None)):
                runs.setdefault((shape, label), []).append(measure(src, shape, args.size, args.repeat))
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"| plan ({args.size:,} nodes) | baseline first / best (CPU s) | branch first / best (CPU s) | "
          "ratio first / best |")
    print("|---|---|---|---|")
    for shape in SHAPES:
        b, n = runs[shape, "baseline"], runs[shape, "branch"]
        bf, bb = min(r["first"] for r in b), min(r["best"] for r in b)
        nf, nb = min(r["first"] for r in n), min(r["best"] for r in n)
        print(f"| {shape} | {bf:.3f} / {bb:.3f} | {nf:.3f} / {nb:.3f} | {nf / bf:.2f} / {nb / bb:.2f} |")


if __name__ == "__main__":
    main()
