"""The persistent budget store: exact accounting, reservation before data, atomic commit or release,
concurrency (8 processes x 50 runs against a budget for exactly 100), crash safety and tamper evidence."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sqlite3
import time
from collections.abc import Iterator, Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.budget import BudgetExhaustedError, BudgetStore
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


@pytest.mark.parametrize("sql", [
    "UPDATE entries SET amount = '1/1000' WHERE kind = 'reserve' AND seq = 2",  # shrink a charge
    "DELETE FROM entries WHERE seq = 3",  # drop a commit
    "UPDATE datasets SET limit_value = '5'",  # raise the lifetime budget
    "UPDATE datasets SET charged = '0'",  # forget the running total
    "DELETE FROM entries WHERE seq = (SELECT max(seq) FROM entries)",  # truncate the newest row
])
def test_tampering_is_reported(store: BudgetStore, sql: str, capsys: pytest.CaptureFixture[str]) -> None:
    store.open("d", dp.ZCDP(Fraction(1, 10)))
    for _ in range(2):
        small_plan().run(DATA, budget_store=store, dataset="d")
    assert store.verify("d").ok
    _tamper(store.path, sql)
    check = store.verify("d")
    assert not check.ok and check.problems
    assert main(["budget", "verify", "d", "--store", store.path]) == 1
    assert "VERIFICATION FAILED" in capsys.readouterr().out


def test_cli_open_run_show_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "s.sqlite")
    plan_file = tmp_path / "plan.py"
    plan_file.write_text(
        "import dpflow as dp\nfrom dpflow import nodes as N\n"
        "b = dp.PlanBuilder(budget=dp.ZCDP(0.25))\nX = b.source('X', dp.Vectors(d=2), n=20)\n"
        "plan = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))\n")
    np.save(tmp_path / "x.npy", np.zeros((20, 2)))
    assert main(["budget", "open", "ds", "--rho", "1/2", "--store", path]) == 0
    args = ["run", str(plan_file), "--data", f"X={tmp_path / 'x.npy'}", "--report", str(tmp_path / "r"),
            "--seed", "1", "--dataset", "ds", "--budget-store", path]
    assert main(args) == 0 and main(args) == 0
    assert main(args) == 2  # the third run would exceed the lifetime budget
    capsys.readouterr()
    assert main(["budget", "show", "ds", "--store", path]) == 0
    out = capsys.readouterr().out
    assert "committed 1/2 in 2 runs" in out and "remaining 0" in out
    assert main(["budget", "verify", "ds", "--store", path]) == 0
    assert main(["budget", "open", "x", "--store", path]) == 1  # neither --rho nor --epsilon


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
