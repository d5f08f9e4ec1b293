"""The persistent budget store: exact accounting, reservation before data, atomic commit or release,
concurrency (8 processes x 50 runs against a budget for exactly 100), crash safety and tamper evidence."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sqlite3
import sys
import time
from collections.abc import Iterator, Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.budget import BudgetExhaustedError, BudgetStore, BudgetStoreError, Status
from dpflow.cli import main

N_ROWS = 20
DATA = {"X": np.zeros((N_ROWS, 2))}


def small_plan(rho: Fraction | str = Fraction(1, 100)) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(rho))
    X = b.source("X", dp.Vectors(d=2), n=N_ROWS)
    return b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))


def laplace_plan(eps: str = "1/4") -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.PureDP(eps))
    X = b.source("X", dp.Vectors(d=2), n=N_ROWS)
    return b.build(m=N.LaplaceMech()(N.Mean()(N.Clip(box=(-1.0, 1.0))(X))))


class Poisoned(Mapping[str, Any]):
    """Data whose values must not be touched: any read fails the test."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def __getitem__(self, key: str) -> Any:
        raise AssertionError(f"private data {key!r} was read")

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


@pytest.fixture
def store(tmp_path: Path) -> BudgetStore:
    return BudgetStore(tmp_path / "budget.sqlite")


def test_runs_are_charged_exactly_and_stored_as_fraction_text(store: BudgetStore) -> None:
    store.open("census", dp.ZCDP(Fraction(1, 3)))
    for _ in range(3):
        res = small_plan(Fraction(1, 9)).run(DATA, budget_store=store, dataset="census")
        assert res.report.to_data()["budget"]["charges"][0]["amount"] == "1/9"
    st = store.status("census")
    assert (st.committed, st.pending, st.remaining, st.runs) == (Fraction(1, 3), 0, 0, 3)
    with sqlite3.connect(store.path) as con:
        kinds = {r[0] for r in con.execute("SELECT typeof(amount) FROM entries")}
        kinds |= {r[0] for r in con.execute("SELECT typeof(limit_value) || typeof(charged) FROM datasets")}
    assert kinds == {"text", "texttext"}
    with pytest.raises(BudgetExhaustedError, match="census"):
        small_plan(Fraction(1, 10**12)).run(DATA, budget_store=store, dataset="census")
    assert store.verify("census").ok


def test_refusal_happens_before_any_data_is_read(store: BudgetStore) -> None:
    store.open("d", dp.ZCDP(Fraction(1, 100)))
    with pytest.raises(BudgetExhaustedError) as err:
        small_plan(Fraction(1, 50)).run(Poisoned(("X",)), budget_store=store, dataset="d")
    assert "needs rho=1/50" in str(err.value) and err.value.node == "d"
    with pytest.raises(BudgetExhaustedError, match="no lifetime budget"):
        small_plan().run(Poisoned(("X",)), budget_store=store, dataset="unknown")
    assert store.status("d").spent == 0


def test_schema_error_releases_and_a_failure_after_reading_commits(store: BudgetStore) -> None:
    store.open("d", dp.ZCDP(1))
    with pytest.raises(dp.DataError):
        small_plan().run({"X": np.zeros((N_ROWS + 1, 2))}, budget_store=store, dataset="d")
    assert store.status("d").spent == 0
    assert [e.kind for e in store.entries("d")] == ["open", "reserve", "release"]

    class Exploding(dp.SecureNoise):
        def normal(self, sigma: float, shape: tuple[int, ...]) -> np.ndarray:
            raise RuntimeError("noise source failed")

        def discrete_gaussian(self, sigma2: Fraction, shape: tuple[int, ...]) -> np.ndarray:
            raise RuntimeError("noise source failed")

    with pytest.raises(RuntimeError):
        small_plan().run(DATA, noise=Exploding(), budget_store=store, dataset="d")
    st = store.status("d")
    assert st.committed == Fraction(1, 100) and st.pending == 0  # data was read: the cost counts
    assert store.verify("d").ok


def test_pure_filter_and_multi_source_mapping(store: BudgetStore) -> None:
    store.open("p", dp.PureDP(1))
    for _ in range(4):
        laplace_plan("1/4").run(DATA, budget_store=store, dataset="p")
    assert store.status("p").remaining == 0
    store.open("p2", dp.PureDP(1))
    with pytest.raises(BudgetExhaustedError, match="no pure-DP cost"):
        small_plan().run(DATA, budget_store=store, dataset="p2")

    b = dp.PlanBuilder(budget=dp.ZCDP(Fraction(1, 10)))
    X = b.source("X", dp.Vectors(d=2), n=N_ROWS)
    Y = b.source("Y", dp.Vectors(d=2), n=N_ROWS)
    two = b.build(x=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))),
                  y=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(Y))))
    store.open("a", dp.ZCDP(1))
    store.open("b", dp.ZCDP(Fraction(1, 20)))
    data = {"X": DATA["X"], "Y": DATA["X"]}
    two.run(data, budget_store=store, dataset="a")  # both sources: rho adds
    assert store.status("a").spent == Fraction(1, 5)
    with pytest.raises(BudgetExhaustedError):  # "b" cannot pay: neither dataset is charged
        two.run(data, budget_store=store, dataset={"X": "a", "Y": "b"})
    assert store.status("a").spent == Fraction(1, 5) and store.status("b").spent == 0
    with pytest.raises(ValueError, match="map every plan source"):
        two.run(data, budget_store=store, dataset={"X": "a"})
    with pytest.raises(ValueError, match="cannot be changed"):
        store.open("a", dp.ZCDP(2))
    with pytest.raises(ValueError, match="no filter"):
        store.open("c", dp.ApproxDP(1, 1e-6))


def _tamper(path: str, sql: str) -> None:
    con = sqlite3.connect(path)
    con.execute(sql)
    con.commit()
    con.close()


TAMPERS = [
    "UPDATE entries SET amount = '1/1000' WHERE kind = 'reserve' AND seq = 2",  # shrink a charge
    "DELETE FROM entries WHERE seq = 3",  # drop a commit
    "UPDATE datasets SET limit_value = '5'",  # raise the lifetime budget
    "UPDATE datasets SET charged = '0'",  # forget the running total
    "DELETE FROM entries WHERE seq = (SELECT max(seq) FROM entries)",  # truncate the newest row
]


@pytest.mark.parametrize("sql", TAMPERS)
def test_tampering_is_reported(store: BudgetStore, sql: str, capsys: pytest.CaptureFixture[str]) -> None:
    store.open("d", dp.ZCDP(Fraction(1, 10)))
    for _ in range(2):
        small_plan().run(DATA, budget_store=store, dataset="d")
    assert store.verify("d").ok
    _tamper(store.path, sql)
    check = store.verify("d")
    assert not check.ok and check.problems
    assert main(["budget", "verify", "d", "--budget-store", store.path]) == 1
    assert "VERIFICATION FAILED" in capsys.readouterr().out


def test_cli_open_run_show_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "s.sqlite")
    plan_file = tmp_path / "plan.py"
    plan_file.write_text(
        "import dpflow as dp\nfrom dpflow import nodes as N\n"
        "b = dp.PlanBuilder(budget=dp.ZCDP(0.25))\nX = b.source('X', dp.Vectors(d=2), n=20)\n"
        "plan = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))\n")
    np.save(tmp_path / "x.npy", np.zeros((20, 2)))
    assert main(["budget", "open", "ds", "--rho", "1/2", "--budget-store", path]) == 0
    args = ["run", str(plan_file), "--data", f"X={tmp_path / 'x.npy'}", "--dataset", "ds", "--budget-store", path]
    assert main(args + ["--report", str(tmp_path / "r1")]) == 0 and main(args + ["--report", str(tmp_path / "r2")]) == 0
    assert main(args + ["--report", str(tmp_path / "r3")]) == 2  # the third run would exceed the lifetime budget
    capsys.readouterr()
    assert main(["budget", "show", "ds", "--budget-store", path]) == 0
    out = capsys.readouterr().out
    assert "committed 1/2 in 2 runs" in out and "remaining 0" in out
    assert main(["budget", "verify", "ds", "--budget-store", path]) == 0
    assert main(["budget", "open", "x", "--budget-store", path]) == 1  # neither --rho nor --epsilon


@pytest.mark.parametrize("sql", TAMPERS)
def test_a_store_that_fails_verification_admits_no_run(store: BudgetStore, sql: str) -> None:
    store.open("d", dp.ZCDP(Fraction(1, 10)))
    for _ in range(2):
        small_plan().run(DATA, budget_store=store, dataset="d")
    _tamper(store.path, sql)
    rows = len(store.entries("d"))
    with pytest.raises(BudgetStoreError, match="fails verification") as err:
        small_plan().run(Poisoned(("X",)), budget_store=store, dataset="d")
    assert store.verify("d").problems[0] in str(err.value) and "budget verify d" in err.value.fix
    assert len(store.entries("d")) == rows  # nothing reserved


def _plan_file(tmp_path: Path, rho: str) -> Path:
    plan_file = tmp_path / "plan.py"
    plan_file.write_text(
        "import dpflow as dp\nfrom dpflow import nodes as N\n"
        f"b = dp.PlanBuilder(budget=dp.ZCDP({rho!r}))\nX = b.source('X', dp.Vectors(d=2), n=20)\n"
        "plan = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))\n")
    np.save(tmp_path / "x.npy", np.zeros((20, 2)))
    return plan_file


def test_cli_run_rests_on_the_verified_chain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # issue 14 item 11: an edited `charged` column let two more runs through, beyond the lifetime limit
    path = str(tmp_path / "s.sqlite")
    plan_file = _plan_file(tmp_path, "1/2")
    assert main(["budget", "open", "ds", "--rho", "1", "--budget-store", path]) == 0
    args = ["run", str(plan_file), "--data", f"X={tmp_path / 'x.npy'}", "--dataset", "ds", "--budget-store", path]
    assert main(args + ["--report", str(tmp_path / "r1")]) == 0 and main(args + ["--report", str(tmp_path / "r2")]) == 0
    _tamper(path, "UPDATE datasets SET charged = '0'")
    capsys.readouterr()
    for i in (3, 4):
        assert main(args + ["--report", str(tmp_path / f"r{i}")]) == 1
        err = capsys.readouterr().err
        assert "fails verification" in err and "running total 0 differs from the rows' total 1" in err
    assert BudgetStore(path).status("ds").spent == 1 and len(BudgetStore(path).entries("ds")) == 5
    assert main(["budget", "show", "ds", "--budget-store", path]) == 1
    assert "FAILS VERIFICATION" in capsys.readouterr().err


@pytest.mark.parametrize("flag, value", [("--rho", "1e400"), ("--epsilon", "1e400"), ("--rho", "0"),
                                         ("--rho", "-1"), ("--rho", "nan")])
def test_budget_open_validates_the_limit_before_writing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        flag: str, value: str) -> None:
    path = tmp_path / "s.sqlite"
    assert main(["budget", "open", "d", flag, value, "--budget-store", str(path)]) == 1
    assert "dpflow: error:" in capsys.readouterr().err
    assert not path.exists()  # nothing written, not even an empty store


def test_lifetime_limit_bounds() -> None:
    from dpflow.budget import describe_status, lifetime_limit
    top = Fraction(sys.float_info.max)
    assert lifetime_limit(dp.ZCDP(top)) == ("zcdp", top)
    assert lifetime_limit(dp.PureDP(Fraction(1, 10**400))) == ("pure", Fraction(1, 10**400))
    for bad in (top + Fraction(1, 10**9), Fraction(0)):
        with pytest.raises(ValueError, match="must be positive and at most"):
            lifetime_limit(dp.ZCDP(bad))
    # a store written before the check still shows
    text = describe_status(Status("d", "zcdp", Fraction(10**400), Fraction(0), Fraction(0), (), 0, "0" * 64))
    assert "about 10^400" in text


def _corrupt(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "s.sqlite"
    if kind == "directory":
        path.mkdir()
        return path
    if kind == "random":
        path.write_bytes(np.random.default_rng(0).bytes(5000))
        return path
    if kind == "foreign":
        with sqlite3.connect(path) as con:
            con.execute("CREATE TABLE people (name TEXT)")
        return path
    store = BudgetStore(path)
    store.open("d", dp.ZCDP(1))
    for _ in range(20):
        small_plan().run(DATA, budget_store=store, dataset="d")
    with sqlite3.connect(path) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    os.truncate(path, 0 if kind == "emptied" else 4096)
    return path


@pytest.mark.parametrize("kind", ["random", "truncated", "emptied", "directory", "foreign"])
def test_a_corrupted_store_file_is_named_with_a_recovery(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          kind: str) -> None:
    path = _corrupt(tmp_path, kind)
    before = {p.name for p in tmp_path.iterdir()}
    plan_file = _plan_file(tmp_path, "1/100")
    commands = [["budget", "show", "d", "--budget-store", str(path)],
                ["budget", "verify", "d", "--budget-store", str(path)],
                ["budget", "open", "e", "--rho", "1", "--budget-store", str(path)],
                ["run", str(plan_file), "--data", f"X={tmp_path / 'x.npy'}", "--report", str(tmp_path / "r"),
                 "--dataset", "d", "--budget-store", str(path)]]
    for argv in commands:
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert err.startswith(f"dpflow: error: budget store {path}: ") and "Fix:" in err, err
        if kind != "directory":
            assert "restore the store from a backup" in err
    with pytest.raises(BudgetStoreError):
        BudgetStore(path)
    assert {p.name for p in tmp_path.iterdir()} <= before | {"plan.py", "x.npy"}  # nothing created


def test_show_of_an_unknown_dataset_creates_nothing_and_names_the_cli_fix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.sqlite"
    for command in ("show", "verify"):
        assert main(["budget", command, "zz", "--budget-store", str(path)]) == 1
        err = capsys.readouterr().err
        assert "no such store file" in err and "dpflow budget open" in err and "plan refused" not in err
    assert not path.exists()
    plan_file = _plan_file(tmp_path, "1/100")
    run_args = ["run", str(plan_file), "--data", f"X={tmp_path / 'x.npy'}", "--report", str(tmp_path / "r"),
                "--dataset", "zz", "--budget-store", str(path)]
    assert main(run_args) == 1 and not path.exists()
    capsys.readouterr()
    assert main(["budget", "open", "a", "--rho", "1", "--budget-store", str(path)]) == 0
    capsys.readouterr()
    assert main(["budget", "show", "zz", "--budget-store", str(path)]) == 1
    err = capsys.readouterr().err
    assert "no dataset 'zz' (the store holds: a)" in err
    assert f"dpflow budget open zz --rho R --budget-store {path}" in err
    assert "plan refused" not in err
    assert BudgetStore(path).datasets() == ["a"]
    assert main(run_args) == 2  # the run names the CLI fix too
    assert f"`dpflow budget open zz --rho R --budget-store {path}`" in capsys.readouterr().err


# ------------------------------------------------------------------ concurrency and crashes

WORKERS, RUNS_EACH = 8, 50


def _worker(path: str, out: Any) -> None:
    store = BudgetStore(path)
    plan = small_plan(Fraction(1, 100))
    ok = refused = 0
    for _ in range(RUNS_EACH):
        try:
            plan.run(DATA, budget_store=store, dataset="shared")
            ok += 1
        except BudgetExhaustedError:
            refused += 1
    out.put((ok, refused))


def test_concurrent_processes_never_overspend(store: BudgetStore) -> None:
    store.open("shared", dp.ZCDP(1))  # exactly 100 runs at rho = 1/100
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(store.path, out)) for _ in range(WORKERS)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert sum(r[0] for r in results) == 100
    assert sum(r[1] for r in results) == WORKERS * RUNS_EACH - 100
    st = store.status("shared")
    assert (st.committed, st.pending, st.runs) == (1, 0, 100)
    assert len(store.entries("shared")) == 1 + 2 * 100  # open + reserve/commit per run: nothing lost
    assert store.verify("shared").ok


class _Blocking(dp.SecureNoise):
    """Signals that the run has read its data, then hangs until the process is killed."""

    def __init__(self, flag: str) -> None:
        super().__init__()
        self.flag = flag

    def _hang(self) -> None:
        Path(self.flag).write_text("reading")
        time.sleep(60)

    def normal(self, sigma: float, shape: tuple[int, ...]) -> np.ndarray:
        self._hang()
        raise AssertionError("unreachable")

    def discrete_gaussian(self, sigma2: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        self._hang()
        raise AssertionError("unreachable")


def _hanging_run(path: str, flag: str) -> None:
    small_plan(Fraction(1, 4)).run(DATA, noise=_Blocking(flag), budget_store=BudgetStore(path), dataset="d")


def _looping_runs(path: str) -> None:
    store = BudgetStore(path)
    plan = small_plan(Fraction(1, 10**6))
    while True:
        plan.run(DATA, budget_store=store, dataset="d")


def _wait_for(cond: Any, seconds: float = 30.0) -> None:
    end = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def test_a_killed_run_keeps_its_reservation_and_the_store_stays_consistent(store: BudgetStore,
                                                                             tmp_path: Path) -> None:
    store.open("d", dp.ZCDP(1))
    ctx = mp.get_context("fork")
    flag = str(tmp_path / "flag")
    p = ctx.Process(target=_hanging_run, args=(store.path, flag))
    p.start()
    _wait_for(lambda: os.path.exists(flag))
    assert p.pid is not None
    os.kill(p.pid, signal.SIGKILL)  # crash between reserve and commit, after data was read
    p.join(timeout=30)
    st = store.status("d")
    assert st.pending == Fraction(1, 4) and len(st.pending_ids) == 1 and st.remaining == Fraction(3, 4)
    assert store.verify("d").ok

    # kill a process at an arbitrary point of a stream of runs (possibly inside a transaction)
    q = ctx.Process(target=_looping_runs, args=(store.path,))
    q.start()
    _wait_for(lambda: store.status("d").runs >= 5)
    assert q.pid is not None
    os.kill(q.pid, signal.SIGKILL)
    q.join(timeout=30)
    check = store.verify("d")
    assert check.ok, check.problems
    st = store.status("d")
    assert len(st.pending_ids) <= 2 and st.spent == Fraction(1, 4) * (1 + 0) + Fraction(st.runs, 10**6) + (
        Fraction(len(st.pending_ids) - 1, 10**6))


def _admit_until_exhausted(path: str, out: Any) -> None:
    """Run plans of rho = 1/50 on dataset 'd' until the store refuses one, then report how many ran (a process to
    be killed gets no queue: killed while writing to it, it could leave the queue's lock held)."""
    store = BudgetStore(path)
    plan = small_plan(Fraction(1, 50))
    ran = 0
    while True:
        try:
            plan.run(DATA, budget_store=store, dataset="d")
        except BudgetExhaustedError:
            if out is not None:
                out.put(ran)
            return
        ran += 1


@pytest.mark.slow
def test_processes_admitting_at_once_with_one_killed_mid_run(store: BudgetStore, tmp_path: Path) -> None:
    """Issue 28: five processes admit runs of 1/50 on one dataset at once while a sixth, which reserved 1/4 and
    read its data, is killed with SIGKILL, and so is one of the five at an arbitrary point of its runs (maybe inside
    a transaction).  The killed run's reservation stays pending and counts as spent; the survivors stop only when
    the next run would not fit, so the budget is used up to less than one run and never beyond it; every
    admitted run is in the rows; the keyed chain verifies afterwards."""
    store.open("d", dp.ZCDP(1))
    ctx = mp.get_context("fork")
    flag = str(tmp_path / "flag")
    victim = ctx.Process(target=_hanging_run, args=(store.path, flag))  # reserves 1/4, reads, hangs
    victim.start()
    _wait_for(lambda: os.path.exists(flag))
    out = ctx.Queue()
    workers = [ctx.Process(target=_admit_until_exhausted, args=(store.path, out if i else None)) for i in range(5)]
    for p in workers:
        p.start()
    _wait_for(lambda: store.status("d").runs >= 5)
    for p in (victim, workers[0]):
        assert p.pid is not None
        os.kill(p.pid, signal.SIGKILL)
        p.join(timeout=30)
    ran = [out.get(timeout=60) for _ in workers[1:]]
    for p in workers[1:]:
        p.join(timeout=30)
        assert p.exitcode == 0
    check = store.verify("d")
    assert check.ok and check.key_id == store.key_id, check.problems
    st = store.status("d")
    victim_seq = store.entries("d")[1].seq
    assert store.entries("d")[1].amount == "1/4" and victim_seq in st.pending_ids
    assert st.pending in (Fraction(1, 4), Fraction(1, 4) + Fraction(1, 50))  # + the killed worker's run in flight
    assert st.committed == Fraction(st.runs, 50) and sum(ran) <= st.runs
    assert 1 - Fraction(1, 50) < st.spent <= 1  # used up, never exceeded


def test_budgets_typed_as_decimals_mean_the_decimal(store: BudgetStore) -> None:
    """ZCDP(0.05) is exactly 1/20 (issue 12): a lifetime budget of 1.0 admits exactly 20 runs of 0.05, where
    the binary float just above 1/20 admitted only 19."""
    assert dp.ZCDP(0.05).rho == Fraction(1, 20) and dp.PureDP(0.1).epsilon == Fraction(1, 10)
    assert dp.ApproxDP(0.3, 1e-6).delta == Fraction(1, 10**6) and dp.ApproxZCDP(0.05, 1e-9).rho == Fraction(1, 20)
    assert dp.ZCDP(Fraction(0.05)).rho == Fraction(0.05)  # an explicit Fraction is taken as it is
    store.open("d20", dp.ZCDP(1.0))
    for _ in range(20):
        small_plan(0.05).run(DATA, budget_store=store, dataset="d20")
    assert store.status("d20").remaining == 0
    with pytest.raises(BudgetExhaustedError):
        small_plan(0.05).run(DATA, budget_store=store, dataset="d20")
