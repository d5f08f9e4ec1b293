"""Byte-identity check of the planner's output on the benchmark plans of ``benchmarks/planner.py``.

A planner speed-up must not change what is certified.  ``--write FILE`` certifies every benchmark plan
(100, 1,000 and 10,000 nodes; the noise-agnostic preview and the exact-noise certificate) and writes its
ledger JSON, every allocation and every invocation (share, mode and exact cost) to FILE; ``--check FILE``
does the same and reports every plan whose output differs byte for byte.  Run ``--write`` on the commit
before a change and ``--check`` after it.

    python benchmarks/planner_ledgers.py --write /tmp/before.json
    python benchmarks/planner_ledgers.py --check /tmp/before.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import dpflow as dp
from dpflow.nodes.types import Allocation
from dpflow.plan.serialize import canonical
from dpflow.planner.ledger import cost_to_data

sys.path.insert(0, str(Path(__file__).parent))
from planner import deep_plan, mixed_plan, wide_plan  # noqa: E402

SHAPES = (("wide", wide_plan), ("deep", deep_plan), ("mixed", mixed_plan))


def _alloc(a: Allocation) -> dict[str, object]:
    return {"mode": a.mode, "share": str(a.share), "cost": cost_to_data(a.cost),
            "continuous_gaussian": a.continuous_gaussian}


def certificate_text(plan: dp.Plan, exact_noise: bool) -> str:
    """The ledger JSON, the allocations and the invocation table of ``plan``, as one canonical text."""
    cert = dp.certify(plan, exact_noise=exact_noise)
    return canonical({
        "ledger": cert.ledger.to_json(),
        "allocations": {k: _alloc(a) for k, a in cert.allocations.items()},
        "rounds": {k: list(v) for k, v in cert.invocations.rounds.items()},
        "invocations": [[path, list(classes), _alloc(a)]
                        for (path, classes), a in cert.invocations.table.items()],
    })


def certificates(sizes: tuple[int, ...]) -> dict[str, str]:
    """Every benchmark plan's certificate text, keyed by shape, size and noise."""
    out = {}
    for size in sizes:
        for name, make in SHAPES:
            plan = make(size)
            for exact in (False, True):
                out[f"{name}_{size}_{'exact' if exact else 'agnostic'}"] = certificate_text(plan, exact)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", type=Path)
    group.add_argument("--check", type=Path)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 10_000])
    args = ap.parse_args()
    got = certificates(tuple(args.sizes))
    if args.write is not None:
        args.write.write_text(json.dumps(got, sort_keys=True))
        for k, v in got.items():
            print(f"{k}: {len(v)} bytes, sha256 {hashlib.sha256(v.encode()).hexdigest()[:16]}")
        return
    want = json.loads(args.check.read_text())
    bad = [k for k in got if want.get(k) != got[k]]
    for k in got:
        print(f"{k}: {'identical' if k not in bad else 'DIFFERS'} ({len(got[k])} bytes)")
    if bad:
        sys.exit(f"{len(bad)} certificate(s) differ: {', '.join(bad)}")
    print(f"all {len(got)} certificates byte-identical")


if __name__ == "__main__":
    main()
