"""Mutation testing of the privacy code (issue 9): rerun mutmut over named modules, print the kill rate per module.

mutmut (3.x, configured in ``pyproject.toml`` under ``[tool.mutmut]``) makes every single-point change it
knows (operators, comparisons, constants, arguments, return values) to each function of the modules listed
in ``only_mutate`` and runs, for each mutant, only the tests that call the mutated function.  A mutant is
*killed* when a test fails, *survives* when all pass.  This script runs the named modules with a single
worker (the machine is shared) in one mutmut invocation (one clean pass of the selected tests, then the mutants,
cheapest first), then reads mutmut's result files (``mutants/<path>.meta``) and prints, per
module: mutants, killed, timeouts (a mutant that makes a test loop forever is detected too), survivors,
mutants no test reaches, the kill rate, and the equivalent mutants of :data:`EQUIVALENT` (each with the
reason it cannot change behaviour; ``docs/assurance.md`` lists them).

    python benchmarks/mutation.py                          # the default set, one module after the other
    python benchmarks/mutation.py dpflow/privacy/rounding.py dpflow/nodes/floaterr.py
    python benchmarks/mutation.py dpflow/nodes/base.py:change_bound,sym_max   # some functions of a module
    python benchmarks/mutation.py --report-only            # tabulate the last run without running mutmut
    python benchmarks/mutation.py --survivors              # also list every surviving mutant's name

Run from the repository root with the dev extra installed (``pip install -e '.[dev]'`` plus ``mutmut``).  The
first run collects which tests call which function (one pass of the test suite), later runs reuse it and
retest only functions whose source changed.  ``mutmut show <name>`` prints a mutant's diff.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

DEFAULT_MODULES = [
    "dpflow/privacy/rounding.py",
    "dpflow/privacy/measures.py",
    "dpflow/privacy/calibration.py",
    "dpflow/privacy/conversions.py",
    "dpflow/privacy/composition.py",
    "dpflow/privacy/pld.py",
    "dpflow/nodes/base.py:change_bound,sym_max",
    "dpflow/nodes/rules.py",
    "dpflow/nodes/floaterr.py",
    "dpflow/nodes/mechanisms.py",
    "dpflow/planner/fold.py",
    "dpflow/planner/allocate.py",
    "dpflow/budget.py",
]

_INT_STAT = ("np.asarray(x, dtype=float) vs dtype=None: a statistic is a float64 array (asarray returns it as is) or "
             "integer counts below 2^53, which every later operation promotes to the same float64 values")
_STRICT = "zip(strict=...): the noise is drawn with exactly as many entries as the lattice release has"
_ZERO_BRANCH = ("up's and down's sign tests (x > 0 vs >= 0, x < 0 vs <= 0 or < 1): they differ only at x = +-0.0, "
                "where every branch computes y = +-0.0, and nextafter(+-0.0, +-inf) does not depend on the zero's sign")
_SQUARE = "shape[1] vs shape[0]: only symmetric (square) matrices reach this line"

#: Mutants that cannot change behaviour, by mutmut name, with the reason (see docs/assurance.md).
EQUIVALENT: dict[str, str] = {
    "dpflow.nodes.rules.x_released_endpoint__mutmut_8": "v > 0 vs v >= 0 where v is +inf, -inf or NaN: same answer",
    "dpflow.nodes.rules.x_released_endpoint__mutmut_9": "v > 0 vs v > 1 where v is +inf, -inf or NaN: same answer",
    "dpflow.nodes.mechanisms.xǁPeelǁevaluate__mutmut_21": _INT_STAT,
    "dpflow.nodes.mechanisms.xǁPeelǁevaluate__mutmut_23": _INT_STAT,
    "dpflow.nodes.mechanisms.xǁLaplaceMechǁevaluate__mutmut_6": _INT_STAT,
    "dpflow.nodes.mechanisms.xǁLaplaceMechǁevaluate__mutmut_8": _INT_STAT,
    "dpflow.nodes.mechanisms.xǁLaplaceMechǁevaluate__mutmut_25": "takes_lattice(stat, None): LaplaceMech's does not "
                                                                  "read the allocation",
    "dpflow.nodes.mechanisms.x__lattice_release__mutmut_11": "nan_to_num without nan=0.0: numpy's default is 0.0",
    "dpflow.nodes.mechanisms.x__lattice_release__mutmut_29": _STRICT,
    "dpflow.nodes.mechanisms.x__lattice_release__mutmut_32": _STRICT,
    "dpflow.nodes.mechanisms.x__lattice_release__mutmut_33": _STRICT,
    "dpflow.nodes.mechanisms.x__lattice_release__mutmut_37": _SQUARE,
    "dpflow.nodes.mechanisms.x__noised_entries__mutmut_4": _SQUARE,
    "dpflow.nodes.mechanisms.x__slack__mutmut_9": "'fe is not None or True': _slack is reached only on the lattice "
                                                  "path, which needs a float-error bound (takes_lattice)",
    "dpflow.nodes.floaterr.x_gamma__mutmut_18": "1 + 5u vs 1 + 4u (u = 2^-53): 1 + 5u is the tie between 1 + 4u and "
                                                "1 + 6u and rounds to even, 1 + 4u: the same float",
    "dpflow.nodes.floaterr.xǁFloatErrorǁbound__mutmut_17": "U * 1.0 vs U / 1.0: the same float",
    "dpflow.nodes.floaterr.xǁFloatErrorǁbound__mutmut_25": "widen=None vs widen=False: both falsy, read only by `if`",
    "dpflow.nodes.mechanisms.x__lattice_noised__mutmut_39": (
        "scale_of(delta - slack) vs (delta + slack) when no lattice calibration exists: the scale functions never "
        "return inf for a finite input (they raise), so this branch has scale_of(delta + slack) = 0, i.e. "
        "delta = slack = 0, where both arguments are 0"),
    "dpflow.nodes.base.x_sym_max__mutmut_11": ">= vs > between bounds with the same factors: at equal coefficients "
                                             "a and b are equal bounds",
    "dpflow.privacy.rounding.x_up__mutmut_6": _ZERO_BRANCH,
    "dpflow.privacy.rounding.x_up__mutmut_12": _ZERO_BRANCH,
    "dpflow.privacy.rounding.x_up__mutmut_13": _ZERO_BRANCH,
    "dpflow.privacy.rounding.x_down__mutmut_7": _ZERO_BRANCH,
    "dpflow.privacy.rounding.x_down__mutmut_13": _ZERO_BRANCH,
    "dpflow.privacy.rounding.x_down__mutmut_14": _ZERO_BRANCH,
    "dpflow.privacy.rounding.x_to_float_up__mutmut_5": "q > 0 vs q >= 0 where float(q) overflowed: q is never 0",
    "dpflow.planner.fold.x__par_frac__mutmut_18": "sum(xs) vs sum(xs, Fraction(0)) of a non-empty list of Fractions: "
                                                  "the same Fraction",
}

# mutmut's exit codes (mutmut.stats.status_by_exit_code): 1 and 3 killed, 0 survived, 5 and 33 no tests,
# 36 and the SIGXCPU codes timeout, None not run yet; anything else is "suspicious".
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 36: "timeout", -24: "timeout",
          24: "timeout", 152: "timeout", 255: "timeout", None: "not checked", 34: "skipped"}


def split(spec: str) -> tuple[str, list[str]]:
    """``path.py[:f,g]`` -> (path, mutmut name patterns of the module or of functions f and g)."""
    path, _, funcs = spec.partition(":")
    mod = path.removesuffix(".py").replace("/", ".")
    # mutmut names a mutant module.x_function__mutmut_N (methods: module.xǁClassǁmethod__mutmut_N)
    return path, [f"{mod}.x_{f}__mutmut_*" for f in funcs.split(",")] if funcs else [f"{mod}.*"]


def run(patterns: list[str]) -> float:
    """Run mutmut on every mutant matching ``patterns`` with one worker; the wall time in seconds."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", "1", *patterns], check=False,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def results(path: str, patterns: list[str]) -> dict[str, str]:
    """Each mutant of ``path`` matching ``patterns`` and its status, from mutmut's result file."""
    meta = Path("mutants") / (path + ".meta")
    if not meta.exists():
        return {}
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    return {name: STATUS.get(code, "suspicious") for name, code in codes.items()
            if any(fnmatch.fnmatchcase(name, p) for p in patterns)}


def rate(c: Counter[str]) -> str:
    """(killed + timeout) / (checked - equivalent) as a percentage."""
    live = c["checked"] - c["equivalent"]
    return f"{100.0 * (c['killed'] + c['timeout']) / live:.1f}%" if live else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("modules", nargs="*", default=DEFAULT_MODULES)
    ap.add_argument("--report-only", action="store_true", help="tabulate the last run, run nothing")
    ap.add_argument("--survivors", action="store_true", help="list the surviving mutants")
    args = ap.parse_args()
    specs = [split(m) for m in args.modules]
    secs = 0.0 if args.report_only else run([p for _, pats in specs for p in pats])
    head = ("module", "mutants", "checked", "killed", "timeout", "survived", "no tests", "equivalent", "kill rate")
    rows: list[list[str]] = []
    totals = Counter[str]()
    survivors: list[str] = []
    for (path, pats), module in zip(specs, args.modules, strict=True):
        status = results(path, pats)
        c = Counter(s for name, s in status.items() if name not in EQUIVALENT)
        c["mutants"] = len(status)
        c["checked"] = sum(1 for s in status.values() if s != "not checked")
        c["equivalent"] = sum(1 for name in status if name in EQUIVALENT)
        totals.update(c)
        survivors += [n for n, s in status.items() if s == "survived" and n not in EQUIVALENT]
        rows.append([module, *(str(c[k]) for k in head[1:-1]), rate(c)])
    rows.append(["all", *(str(totals[k]) for k in head[1:-1]), rate(totals)])
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"kill rate = (killed + timeout) / (checked - equivalent); mutmut ran {secs:.0f} s")
    if args.survivors and survivors:
        print("\nsurvivors (mutmut show NAME):")
        print("\n".join(f"  {n}" for n in survivors))


if __name__ == "__main__":
    main()
