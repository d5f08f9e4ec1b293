"""The ``dpflow`` command line.

Exit status: 0 on success, 2 when the planner refuses a plan (the message names
the node and the fix) or an argument is invalid, 1 on any other error.  An engine
failure prints the node and the engine exception's type only; with the environment
variable ``DPFLOW_DEBUG=1`` the engine's exception and traceback are printed too.

    dpflow demo [--out DIR] [--seed N]
    dpflow check PLAN.py [--alpha A]
    dpflow run PLAN.py --data NAME=path.npy|.csv|.parquet [--data ...] --report DIR [--seed N]
               [--backend numpy|dask [--scheduler ADDRESS]]   (dask: also NAME=path.parquet#col1,col2)
    dpflow privacy convert --rho R --delta D [--all]
    dpflow budget open|show|verify DATASET [--budget-store PATH] [--key-file K] [--rho R | --epsilon E]
    dpflow budget upgrade [--budget-store PATH] [--key-file K]

Ctrl-C stops a run with exit status 130 (and says what the budget store charged); once the run is
complete, it no longer does: the outputs are printed, the report is written and the status is 0.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import runpy
import signal
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from dpflow.api import Result, run
from dpflow.budget import BudgetStore, describe_status, lifetime_limit
from dpflow.errors import DpflowError, PlanError, debug_requested
from dpflow.interpreter.noise import NoiseSource, SecureNoise, SeededNoise
from dpflow.plan import Plan
from dpflow.privacy import ZCDP, Cost, PureDP, exact, zcdp_to_approx_dp
from dpflow.report import NOT_FOR_RELEASE, prepare_report_dir
from dpflow.text import visible


def load_plan(path: str) -> Plan:
    """Run a Python file and return the :class:`Plan` it defines as ``plan``."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no such plan file: {path}")
    namespace = runpy.run_path(str(p), run_name="__dpflow_plan__")
    plan = namespace.get("plan")
    if not isinstance(plan, Plan):
        raise ValueError(f"{path} must define a variable `plan` holding a dpflow Plan")
    return plan


def _has_header(path: str) -> bool:
    """True when the first line of a CSV file has a field that is not a number (a header)."""
    with open(path, encoding="utf-8") as f:
        first = f.readline().strip()
    for field in first.split(","):
        try:
            float(field)
        except ValueError:
            if field.strip():
                return True
    return False


def _pandas(path: str) -> Any:
    try:
        import pandas as pd
    except ImportError as e:
        raise ValueError(f"{path}: reading a CSV file with a header or a Parquet file needs pandas "
                         "(pip install 'dpflow[pandas]')") from e
    return pd


class _Files(Mapping[str, Any]):
    """Source name -> the data read from its file when the run reads its sources (after a budget store's
    reservation), once: whether a file parses depends on its private values, so a failure counts as reading
    (``dpflow.interpreter.run.prepare_data``) and names its type only."""

    def __init__(self, readers: dict[str, Callable[[], Any]]) -> None:
        self._readers = readers
        self._read: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._read:
            self._read[name] = self._readers[name]()
        return self._read[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._readers)

    def __len__(self) -> int:
        return len(self._readers)


def _read_file(path: str) -> Any:
    """A data file's rows: ``.npy``; ``.csv`` of numbers (a value that is not a number is missing, NaN) or with
    a header row (a DataFrame); ``.parquet`` (a DataFrame)."""
    if path.endswith(".npy"):
        return np.load(path, allow_pickle=False)
    if path.endswith(".csv") and not _has_header(path):
        return np.genfromtxt(path, delimiter=",", ndmin=2)
    if path.endswith(".csv"):
        return _pandas(path).read_csv(path)
    return _pandas(path).read_parquet(path)


def load_data(specs: Sequence[str], backend: str = "numpy") -> Mapping[str, Any]:
    """Parse ``NAME=path`` options: ``.npy``, ``.csv`` (numbers only, or a header row: read as a DataFrame,
    so a source's declared ``columns`` select by name) and ``.parquet`` (a DataFrame).  Only the paths are
    checked here (public): the files are read when the run reads its sources (:class:`_Files`).  With
    ``backend="dask"`` nothing is read here: ``.npy`` files are memory-mapped and read block by block, and
    ``NAME=path.parquet#a,b`` or ``NAME=path.csv#a,b`` read the named columns through dask.dataframe on the
    workers (a source's declared columns are then selected from them by name, as from a whole file on numpy)."""
    out: dict[str, Any] = {}
    readers: dict[str, Callable[[], Any]] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name:
            raise ValueError(f"--data expects NAME=path, got {spec!r}")
        path, hashmark, cols = path.partition("#")
        if backend == "dask":
            from dpflow.interpreter.dask_backend import read_table

            if path.endswith(".npy"):
                out[name] = path
            elif hashmark and path.endswith((".csv", ".parquet", ".pq")):
                out[name] = read_table(path, [c for c in cols.split(",") if c])
            else:
                raise ValueError(f"--data {spec!r}: with --backend dask, pass a .npy file or a .parquet/.csv "
                                 "file with its columns: NAME=path.parquet#col1,col2")
            continue
        if hashmark:
            raise ValueError(f"--data {spec!r}: columns by name need --backend dask")
        if not path.endswith((".npy", ".csv", ".parquet", ".pq")):
            raise ValueError(f"--data {spec!r}: only .npy, .csv and .parquet files are read")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"--data {spec!r}: no such file {path}")
        if path.endswith((".parquet", ".pq")):
            _pandas(path)  # a missing extra is named before anything is charged
        readers[name] = functools.partial(_read_file, path)
    return out if backend == "dask" else _Files(readers)


def _noise(seed: int | None) -> NoiseSource:
    return SecureNoise() if seed is None else SeededNoise(seed)


def _cmd_check(args: argparse.Namespace) -> int:
    ledger = load_plan(args.plan).check()
    print(ledger.summary())
    accuracy = ledger.accuracy_summary(args.alpha)
    if accuracy:
        print(accuracy)
    return 0


def _store(path: str | None, create: bool, key_file: str | None = None) -> BudgetStore:
    return BudgetStore(path or os.environ.get("DPFLOW_BUDGET_STORE", "dpflow-budget.sqlite"), create=create,
                       key_file=key_file)


@contextmanager
def _complete() -> Iterator[None]:
    """A completed run is finished, not stopped, by Ctrl-C: its outputs are printed and its report written
    (the run may have been charged), and the exit status is 0."""
    def finish(signum: int, frame: Any) -> None:
        print("dpflow: the run is complete: writing its report before exiting", file=sys.stderr)

    try:
        before = signal.signal(signal.SIGINT, finish)
    except ValueError:  # not the main thread: Ctrl-C does not arrive here
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _cmd_run(args: argparse.Namespace) -> int:
    plan = load_plan(args.plan)
    plan.check()  # a refused plan writes nothing
    store = _store(args.budget_store, create=False, key_file=args.key_file) if args.dataset else None
    out = prepare_report_dir(args.report)  # checked before any budget is reserved, made when the report is written
    data = load_data(args.data, args.backend)
    backend: Any = args.backend
    if args.scheduler is not None:
        if args.backend != "dask":
            raise ValueError("--scheduler needs --backend dask")
        from dpflow.interpreter.dask_backend import DaskBackend

        backend = DaskBackend.connect(args.scheduler)
    result = run(plan, data, noise=_noise(args.seed), backend=backend, budget_store=store, dataset=args.dataset)
    with _complete():
        return _finish(result, out)


def _finish(result: Result, out: Path) -> int:
    """Print a completed run's outputs and write its report."""
    report = result.report
    print(report.ledger.summary())
    if report.execution.seeded:
        print(NOT_FOR_RELEASE)
    for name, value in sorted(result.released.items()):
        print(f"{visible(name)} = {np.array2string(np.asarray(value), precision=5)}")
    if report.budget is not None:
        for c in report.budget["charges"]:
            print(visible(f"charged {c['amount']} to dataset {c['dataset']} (reservation {c['reservation']}) in the "
                          f"budget store {report.budget['store']}"))
    try:
        paths = report.write(out)
    except OSError as e:
        print(f"dpflow: error: the report could not be written: {e}", file=sys.stderr)
        print("dpflow: " + ("the run was charged (see above); " if report.budget is not None else "")
              + "the report JSON follows on standard output, so it is not lost", file=sys.stderr)
        print(report.to_json())
        return 1
    for path in paths:
        print(f"wrote {path}")
    if report.execution.seeded:
        print(NOT_FOR_RELEASE)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from dpflow.demo import run_demo

    return run_demo(out=args.out, seed=args.seed)


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _rho_arg(text: str) -> float:
    """``--rho``: a finite rho >= 0 (an argparse type: a bad value is a usage error, exit status 2)."""
    v = _number(text)
    if not (math.isfinite(v) and v >= 0.0):
        raise argparse.ArgumentTypeError(f"rho must be a finite number >= 0, got {text}")
    return v


def _delta_arg(text: str) -> float:
    """``--delta``: 0 < delta < 1 (an argparse type: a bad value is a usage error, exit status 2)."""
    v = _number(text)
    if not 0.0 < v < 1.0:
        raise argparse.ArgumentTypeError(
            f"delta must be strictly between 0 and 1, got {text}"
            + (" (at delta >= 1 every mechanism is (0, delta)-DP, so the epsilon says nothing)" if v >= 1 else "")
            + "; use a small delta such as 1e-6")
    return v


def _alpha_arg(text: str) -> float:
    """``--alpha``: 0 < alpha < 1 (an argparse type: a bad value is a usage error, exit status 2)."""
    v = _number(text)
    if not 0.0 < v < 1.0:
        raise argparse.ArgumentTypeError(f"alpha must be strictly between 0 and 1, got {text}")
    return v


def _cmd_convert(args: argparse.Namespace) -> int:
    if args.all:
        rho = exact(args.rho)
        print(f"any rho-zCDP mechanism (rho = {args.rho:g}):")
        for c in Cost.zcdp(rho).epsilon_at(args.delta):
            print(f"{c.epsilon:.9g}\t{c.rule}{'  (tightest valid)' if c.tightest else ''}")
        print("-\tno PLD: a generic rho-zCDP guarantee has no privacy loss distribution")
        for title, cost in (("a continuous Gaussian mechanism with this rho (mu = sqrt(2 rho)):",
                             Cost.gaussian_zcdp(rho)),
                            ("the discrete Gaussian on dpflow's lattice with this rho (SecureNoise; lattice PLD):",
                             Cost.gaussian_zcdp(rho).for_lattice_noise())):
            print(title)
            for c in cost.epsilon_at(args.delta):
                print(f"{c.epsilon:.9g}\t{c.rule}{'  (tightest valid)' if c.tightest else ''}")
        return 0
    print(repr(zcdp_to_approx_dp(args.rho, args.delta)))
    return 0


def _cmd_budget(args: argparse.Namespace) -> int:
    if args.store is not None:  # the deprecated name of --budget-store, accepted silently
        if args.budget_store not in (None, args.store):
            raise ValueError("--store and --budget-store name different stores: pass --budget-store only")
        args.budget_store = args.store
    if args.budget_command == "open":
        if (args.rho is None) == (args.epsilon is None):
            raise ValueError("budget open needs exactly one of --rho (zCDP filter) or --epsilon (pure filter)")
        budget = ZCDP(args.rho) if args.rho is not None else PureDP(args.epsilon)
        lifetime_limit(budget)  # refuse a bad limit before any file is written
        store = _store(args.budget_store, create=True, key_file=args.key_file)
        store.open(args.dataset, budget)
        print(describe_status(store.status(args.dataset)))
        return 0
    store = _store(args.budget_store, create=False, key_file=args.key_file)
    if args.budget_command == "upgrade":
        key_id = store.upgrade()
        print(f"{store.path}: chain keyed with HMAC-SHA256, key id {key_id}, key from "
              f"{store.key_file or '$DPFLOW_BUDGET_KEY'} (keep it where the store's writers cannot read it)")
        return 0
    if args.budget_command == "show":
        print(describe_status(store.status(args.dataset)))
        for e in store.entries(args.dataset):
            ref = f" of {e.ref}" if e.ref is not None else ""
            print(f"  {e.seq:>6} {e.created} {e.kind:<8}{ref:<10} {e.amount:<24} {e.plan_hash[:23]}")
    check = store.verify(args.dataset)
    for p in check.problems:
        print(f"dpflow: budget store: {p}", file=sys.stderr)
    if args.budget_command == "show":
        if not check.ok:
            print(f"dpflow: budget store: dataset {args.dataset} FAILS VERIFICATION: no run is admitted on it",
                  file=sys.stderr)
        return 0 if check.ok else 1
    print(f"{args.dataset}: {check.proves}")
    return 0 if check.ok else 1


def parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    ap = argparse.ArgumentParser(prog="dpflow", description="Differentially private statistics as certified plans")
    sub = ap.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run a real plan end to end on embedded synthetic data")
    demo.add_argument("--out", default=None, help="directory for report.json and report.md (default: the first "
                      "free dpflow-demo-report[-k]; an earlier report is never overwritten)")
    demo.add_argument("--seed", type=int, default=None, help="seeded noise (reports say NOT FOR RELEASE)")
    demo.set_defaults(fn=_cmd_demo)

    check = sub.add_parser("check", help="certify a plan file (a Python file defining `plan`)")
    check.add_argument("plan")
    check.add_argument("--alpha", type=_alpha_arg, default=0.05,
                       help="accuracy lines give per-coordinate (1 - alpha) noise intervals (default 0.05)")
    check.set_defaults(fn=_cmd_check)

    runp = sub.add_parser("run", help="certify and run a plan file on data")
    runp.add_argument("plan")
    runp.add_argument("--data", action="append", default=[], metavar="NAME=PATH",
                      help=".npy, .csv (a header row names the columns) or .parquet")
    runp.add_argument("--report", required=True, help="directory for report.json and report.md")
    runp.add_argument("--seed", type=int, default=None, help="seeded noise (reports say NOT FOR RELEASE)")
    runp.add_argument("--backend", choices=("numpy", "dask"), default="numpy",
                      help="execution engine (dask: pip install 'dpflow[dask]')")
    runp.add_argument("--scheduler", default=None, metavar="ADDRESS",
                      help="dask.distributed scheduler address (default: dask's local threads)")
    runp.add_argument("--dataset", default=None, help="charge the run to this dataset in the budget store")
    runp.add_argument("--budget-store", default=None, help="SQLite budget store (default $DPFLOW_BUDGET_STORE "
                      "or dpflow-budget.sqlite)")
    runp.add_argument("--key-file", default=None, help="the budget store's HMAC key (default $DPFLOW_BUDGET_KEY, "
                      "else STORE.key)")
    runp.set_defaults(fn=_cmd_run)

    priv = sub.add_parser("privacy", help="privacy calculus")
    psub = priv.add_subparsers(dest="privacy_command", required=True)
    conv = psub.add_parser("convert", help="rho-zCDP -> epsilon at delta (Canonne-Kamath-Steinke bound)")
    conv.add_argument("--rho", type=_rho_arg, required=True)
    conv.add_argument("--delta", type=_delta_arg, required=True, help="0 < delta < 1")
    conv.add_argument("--all", action="store_true", help="print every valid conversion")
    conv.set_defaults(fn=_cmd_convert)

    bud = sub.add_parser("budget", help="the persistent privacy budget store")
    bsub = bud.add_subparsers(dest="budget_command", required=True)
    for name, text in (("open", "declare a dataset's lifetime budget"), ("show", "budget, spending and rows"),
                       ("verify", "check the keyed hash chain and the totals (exit 1 if tampered)"),
                       ("upgrade", "key the hash chain of a store written before dpflow keyed it")):
        bp = bsub.add_parser(name, help=text)
        if name != "upgrade":
            bp.add_argument("dataset")
        bp.add_argument("--budget-store", default=None, help="SQLite budget store (default "
                        "$DPFLOW_BUDGET_STORE or dpflow-budget.sqlite)")
        bp.add_argument("--store", default=None, help=argparse.SUPPRESS)  # deprecated: --budget-store
        bp.add_argument("--key-file", default=None, help="the chain's HMAC key (default $DPFLOW_BUDGET_KEY, hex, "
                        "else STORE.key; created with mode 0600 by `open` on a new store)")
        if name == "open":
            bp.add_argument("--rho", type=str, default=None, help="lifetime rho (zCDP filter), exact: 1/2 or 0.5")
            bp.add_argument("--epsilon", type=str, default=None, help="lifetime epsilon (basic epsilon filter)")
        bp.set_defaults(fn=_cmd_budget)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dpflow`` console script."""
    args = parser().parse_args(argv)
    try:
        code: Any = args.fn(args)
        return int(code)
    except PlanError as e:
        print(f"dpflow: plan refused: {visible(e)}", file=sys.stderr)
        _print_notes(e)
        return 2
    except (DpflowError, OSError, ValueError, ImportError) as e:  # an ImportError: a missing extra
        if e.__cause__ is not None and debug_requested():  # an engine failure's cause is kept only then
            traceback.print_exception(e.__cause__, file=sys.stderr)
        print(f"dpflow: error: {visible(e)}", file=sys.stderr)
        _print_notes(e)
        return 1
    except KeyboardInterrupt as e:
        print("dpflow: interrupted", file=sys.stderr)
        if not _print_notes(e) and args.command == "run" and args.dataset:
            print("dpflow: no budget was charged by this run, unless the interrupt came while the budget store "
                  "was being updated: a reservation left then stays pending (counted as spent); see "
                  f"`dpflow budget show {args.dataset}`", file=sys.stderr)
        return 130


def _print_notes(e: BaseException) -> bool:
    """Print what an exception's notes say (e.g. what a failed run charged); False if it has none."""
    notes = [str(n) for n in getattr(e, "__notes__", ())]
    for note in notes:
        print(f"dpflow: {note}", file=sys.stderr)
    return bool(notes)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
