"""Mutation-testing pins of ``dpflow/budget.py``: what a run charges, to which dataset, and the exact refusals.

The charge of a run is the sum of its sources' costs on each dataset (basic sequential composition), read from
the ledger's exact totals; a reservation is closed once; an unknown dataset never verifies.
"""

from __future__ import annotations

import re
import sqlite3
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.budget import (
    BudgetExhaustedError,
    BudgetStore,
    BudgetStoreError,
    Status,
    Verification,
    _sqlite_error,
    describe_status,
)

N_ROWS = 20
XY = {"X": np.zeros((N_ROWS, 2)), "Y": np.zeros((N_ROWS, 2))}


def two_sources(budget: dp.PureDP | dp.ZCDP | dp.ApproxDP) -> dp.Plan:
    b = dp.PlanBuilder(budget=budget)
    X = b.source("X", dp.Vectors(d=2), n=N_ROWS)
    Y = b.source("Y", dp.Vectors(d=2), n=N_ROWS)
    if isinstance(budget, dp.PureDP):
        return b.build(x=N.LaplaceMech()(N.Mean()(N.Clip(box=(-1.0, 1.0))(X))),
                       y=N.LaplaceMech()(N.Mean()(N.Clip(box=(-1.0, 1.0))(Y))))
    return b.build(x=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))),
                   y=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(Y))))


@pytest.fixture
def store(tmp_path: Path) -> BudgetStore:
    return BudgetStore(tmp_path / "budget.sqlite")


def test_a_pure_run_charges_the_sum_of_its_sources(store: BudgetStore) -> None:
    store.open("p", dp.PureDP(1))
    two_sources(dp.PureDP("1/4")).run(XY, budget_store=store, dataset="p")  # each source spends 1/4
    st = store.status("p")
    assert st.spent == Fraction(1, 2) and type(st.committed) is Fraction and type(st.pending) is Fraction
    assert (st.dataset, st.filter, st.runs, st.head) == ("p", "pure", 1, store.entries("p")[-1].hash)


def test_sources_mapped_to_datasets_charge_each_its_own(store: BudgetStore) -> None:
    store.open("a", dp.ZCDP(1))
    store.open("b", dp.ZCDP(1))
    res = two_sources(dp.ZCDP("1/10")).run(XY, budget_store=store, dataset={"X": "a", "Y": "b"})
    assert store.status("a").spent == store.status("b").spent == Fraction(1, 10)
    assert [c["dataset"] for c in res.report.to_data()["budget"]["charges"]] == ["a", "b"]
    with pytest.raises(ValueError, match=re.escape("sources ['X', 'Y'], unknown ['Z'], unmapped []")):
        two_sources(dp.ZCDP("1/10")).run(XY, budget_store=store, dataset={"X": "a", "Y": "b", "Z": "a"})


def test_filter_refusals_name_the_dataset_and_the_fix(store: BudgetStore) -> None:
    store.open("z", dp.ZCDP(1))
    b = dp.PlanBuilder(budget=dp.ApproxZCDP(1, "1/1000000"))
    X = b.source("X", dp.Ordinal(N=10), n=N_ROWS)
    stability = b.build(h=N.StabilityHistogram(delta="1/10000000")(N.BinCounts(width=1.0)(X)))
    with pytest.raises(BudgetExhaustedError) as err:
        store.reserve(stability.check(), "z")
    e = err.value
    assert e.node == "z" and e.fix == "use a ZCDP plan budget (delta0 = 0) on this dataset"
    assert re.fullmatch(r"source X costs approximate zCDP \(delta0=\d+/\d+\), which the zCDP filter cannot "
                        r"account for", e.problem)
    store.open("p", dp.PureDP(1))
    with pytest.raises(BudgetExhaustedError) as err:
        store.reserve(two_sources(dp.ZCDP(1)).check(), "p")
    e = err.value
    assert (e.node, e.problem, e.fix) == (
        "p", "source X has no pure-DP cost, so the basic epsilon filter cannot account for it",
        "use pure-DP mechanisms (a PureDP plan budget) on this dataset")


def test_unknown_datasets(store: BudgetStore) -> None:
    with pytest.raises(BudgetExhaustedError) as err:
        store.reserve(two_sources(dp.ZCDP(1)).check(), "nope")
    assert err.value.node == "nope"
    assert err.value.problem == "the budget store has no lifetime budget for this dataset"
    assert store.verify("nope") == Verification("nope", False, ("unknown dataset 'nope'",), 0, store.key_id)
    with pytest.raises(BudgetStoreError, match=re.escape("no dataset 'nope' (the store holds: none)")) as serr:
        store.status("nope")
    assert serr.value.path == str(store.path)
    store.open("a", dp.ZCDP(1))
    store.open("b", dp.ZCDP(1))
    with pytest.raises(BudgetStoreError, match=re.escape("no dataset 'nope' (the store holds: a, b)")):
        store.status("nope")
    v = store.verify("a")
    assert (v.dataset, v.ok, v.problems, v.rows, v.key_id) == ("a", True, (), 1, store.key_id)
    assert store.key_id is not None and len(store.key_id) == 16


def test_a_dataset_failing_verification_is_named_with_every_problem(store: BudgetStore) -> None:
    store.open("d", dp.ZCDP(1))
    with sqlite3.connect(store.path) as con:
        con.execute("UPDATE datasets SET charged = '1/2', head = 'x'")
    problems = store.verify("d").problems
    assert problems == ("the chain's last row is not the recorded head (rows were removed or added)",
                        "the running total 1/2 differs from the rows' total 0")
    with pytest.raises(BudgetStoreError) as err:
        store.reserve(two_sources(dp.ZCDP("1/10")).check(), "d")
    assert err.value.path == str(store.path)
    assert err.value.problem == f"dataset 'd' fails verification, so no run is admitted on it: {'; '.join(problems)}"
    assert err.value.fix == (f"see `dpflow budget verify d --budget-store {store.path}`; restore the store from a "
                             "backup whose chain verifies")


def test_a_reservation_closes_once(store: BudgetStore) -> None:
    store.open("d", dp.ZCDP(1))
    r = store.reserve(two_sources(dp.ZCDP("1/10")).check(), "d")
    store.commit(r)
    seq = r.ids[0][1]
    for close in (store.commit, store.release):
        with pytest.raises(ValueError, match=f"^reservation {seq} on 'd' was already committed$"):
            close(r)
    r2 = store.reserve(two_sources(dp.ZCDP("1/10")).check(), "d")
    store.release(r2)
    with pytest.raises(ValueError, match=f"^reservation {r2.ids[0][1]} on 'd' was already released$"):
        store.commit(r2)
    assert store.status("d").committed == Fraction(1, 5) and store.verify("d").ok


def test_a_failed_settlement_says_the_reservation_stays_pending(store: BudgetStore,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    store.open("d", dp.ZCDP(1))

    def broken(_r: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(store, "commit", broken)
    with pytest.raises(OSError) as err:
        two_sources(dp.ZCDP("1/10")).run(XY, budget_store=store, dataset="d")
    seq = store.status("d").pending_ids[0]
    assert err.value.__notes__[0] == (f"budget store {store.path}: left pending (counted as spent): 1/5 on dataset "
                                      f"'d' (reservation {seq}); the store could not be updated")


def test_describe_status_with_pending_reservations() -> None:
    s = Status("d", "pure", Fraction(2), Fraction(1, 3), Fraction(1, 2), (4, 7), 2, "h")
    assert describe_status(s) == (
        "dataset d: basic epsilon filter, lifetime epsilon = 2 (2)\n"
        "  committed 1/3 in 2 runs, pending 1/2 (2 reservations), remaining 7/6 (1.16667)\n"
        "  pending reservations (counted as spent): 4, 7\n"
        "  head h")


@pytest.mark.parametrize(("sqlite_text", "problem", "fix"), [
    ("database is locked", "another process held the store locked for more than 2.5 s (SQLite: database is locked)",
     "retry when the other run has finished"),
    ("database is busy", "another process held the store locked for more than 2.5 s (SQLite: database is busy)",
     "retry when the other run has finished"),
    ("unable to open database file", "the file cannot be opened (SQLite: unable to open database file)",
     "check that --budget-store names a store file in an existing, writable directory"),
    ("no such table: entries", "this SQLite file is not a dpflow budget store (SQLite: no such table: entries)",
     "point --budget-store at the budget store file"),
    ("no such column: head", "this SQLite file is not a dpflow budget store (SQLite: no such column: head)",
     "point --budget-store at the budget store file"),
    ("file is not a database", "the file is not a readable budget store: it is corrupted, truncated or not a store "
     "(SQLite: file is not a database)",
     "restore the store from a backup and check it with `dpflow budget verify DATASET`; do not delete it or start "
     "a new one for the same data, since what was spent would be forgotten"),
])
def test_sqlite_failures_are_named_with_a_recovery(sqlite_text: str, problem: str, fix: str) -> None:
    e = _sqlite_error("s.sqlite", sqlite3.OperationalError(sqlite_text), 2.5)
    assert (e.path, e.problem, e.fix) == ("s.sqlite", problem, fix)
    assert str(e) == f"budget store s.sqlite: {problem}. Fix: {fix}."


def test_describe_status_of_a_zcdp_dataset() -> None:
    s = Status("census", "zcdp", Fraction(1, 3), Fraction(1, 12), Fraction(0), (), 1, "abc")
    assert describe_status(s) == (
        "dataset census: zCDP filter, lifetime rho = 1/3 (0.333333)\n"
        "  committed 1/12 in 1 runs, pending 0 (0 reservations), remaining 1/4 (0.25)\n"
        "  head abc")


def test_row_hash_format() -> None:
    """HMAC-SHA256 under the key (plain sha256 without one: the unkeyed format of stores written before issue 28,
    read to verify and upgrade them) of the fields joined by the unit separator, an absent ref as the empty string
    (the chain's format: a store written today verifies tomorrow)."""
    import hashlib
    import hmac

    from dpflow.budget import GENESIS, _row_hash

    key = bytes(range(32))
    for ref, ref_text in ((None, ""), (5, "5")):
        text = "\x1f".join([GENESIS, "d", "commit", ref_text, "1/3", "h", "2026-11-23T17:00:00Z"]).encode()
        assert _row_hash(key, GENESIS, "d", "commit", ref, "1/3", "h", "2026-11-23T17:00:00Z") == \
            hmac.new(key, text, hashlib.sha256).hexdigest()
        assert _row_hash(None, GENESIS, "d", "commit", ref, "1/3", "h", "2026-11-23T17:00:00Z") == \
            hashlib.sha256(text).hexdigest()


def _forge(store: BudgetStore, dataset: str, kind: str, ref: int | None, amount: Fraction,
           charged: str | None = None) -> None:
    """Append a row with a valid hash (what a forger with write access can do), optionally moving the total."""
    with store._transaction() as con:
        store._append(con, dataset, kind, ref, amount, "forged")
        if charged is not None:
            con.execute("UPDATE datasets SET charged = ? WHERE dataset = ?", (charged, dataset))


def test_forged_outcomes_and_overspending_are_reported(store: BudgetStore) -> None:
    store.open("d", dp.ZCDP(1))
    r = store.reserve(two_sources(dp.ZCDP("1/10")).check(), "d")
    store.commit(r)
    seq = r.ids[0][1]
    _forge(store, "d", "release", seq, Fraction(1, 5), charged="0")  # a second outcome for a committed run
    assert store.verify("d").problems == (f"row {seq + 2}: release of reservation {seq} does not match one open "
                                          "reservation", "the running total 0 differs from the rows' total 1/5")
    store.open("e", dp.ZCDP(1))
    _forge(store, "e", "commit", 99, Fraction(1, 5))  # an outcome of no reservation
    assert store.verify("e").problems == ("row 6: commit of reservation 99 does not match one open reservation",)
    store.open("f", dp.ZCDP(1))
    _forge(store, "f", "reserve", None, Fraction(2), charged="2")  # more than the lifetime budget
    assert store.verify("f").problems == ("spent 2 exceeds the lifetime budget 1",)
    with pytest.raises(BudgetStoreError, match="spent 2 exceeds the lifetime budget 1"):
        store.reserve(two_sources(dp.ZCDP("1/10")).check(), "f")


def test_unreadable_amounts_and_a_missing_open_row_are_reported(store: BudgetStore) -> None:
    store.open("d", dp.ZCDP(1))
    for _ in range(2):
        two_sources(dp.ZCDP("1/10")).run(XY, budget_store=store, dataset="d")
    with sqlite3.connect(store.path) as con:
        con.execute("UPDATE entries SET amount = 'x' WHERE seq = 2")
        con.execute("UPDATE entries SET kind = 'reserve' WHERE seq = 1")
    assert store.verify("d").problems == (
        "row 1: its content does not match its hash (the row was edited)",
        "row 1: the chain must start with exactly one 'open' row",
        "row 2: its content does not match its hash (the row was edited)",
        "row 2: amount 'x' is not an exact fraction",
        "row 3: commit of reservation 2 does not match one open reservation",
        "the running total 2/5 differs from the rows' total 1/5")
    with sqlite3.connect(store.path) as con:
        con.execute("UPDATE datasets SET limit_value = 'y'")
    assert "the lifetime budget 'y' is not an exact fraction" in store.verify("d").problems


def test_exhausted_and_invalid_budgets_are_named_in_their_unit(store: BudgetStore) -> None:
    from dpflow.budget import lifetime_limit

    store.open("p", dp.PureDP(1))
    two_sources(dp.PureDP("1/4")).run(XY, budget_store=store, dataset="p")
    with pytest.raises(BudgetExhaustedError) as err:
        store.reserve(two_sources(dp.PureDP("1/3")).check(), "p")
    assert (err.value.node, err.value.problem, err.value.fix) == (
        "p", "this run needs epsilon=2/3 but only 1/2 of the lifetime budget epsilon=1 remains (spent or "
        "reserved: 1/2)", "lower the plan's budget, or use another dataset")
    for budget, text in ((dp.ZCDP(0), "rho=0"), (dp.PureDP(0), "epsilon=0")):
        with pytest.raises(ValueError, match=f"^a lifetime budget must be positive and at most 1.79769e\\+308, got "
                                             f"{text}$"):
            lifetime_limit(budget)


# ------------------------------------------------------------------ store setup (round 6: every survivor checked)


def test_a_store_is_built_beside_its_path_in_wal_mode_and_linked_into_place(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store is made in a hidden temporary file beside the path and hard-linked into place, so the path never
    shows a half-made store and a crash leaves at most a '.NAME.*.new' file; it needs only the store's directory to
    be writable (not $TMPDIR); the temporary file is gone afterwards; the store is in WAL mode; the default lock
    wait is 120 s.  Since issue 28 the store's key file 'b.sqlite.key' is made the same way (first, mode 0600) and
    the store records its key id in a 'meta' table."""
    import os
    import tempfile

    linked: list[str] = []
    real_link = os.link

    def spy(src: str, dst: Path) -> None:
        linked.append(src)
        real_link(src, dst)

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-tmpdir"))
    monkeypatch.setattr(os, "link", spy)
    path = tmp_path / "b.sqlite"
    store = BudgetStore(path)
    key_src, src = linked
    assert Path(key_src).parent == tmp_path and Path(key_src).name.startswith(".b.sqlite.key.")
    assert Path(src).parent == tmp_path and Path(src).name.startswith(".b.sqlite.") and src.endswith(".new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.sqlite", "b.sqlite.key"]
    assert (tmp_path / "b.sqlite.key").stat().st_mode & 0o777 == 0o600
    assert store.timeout == 120.0 and store.path == str(path)
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} == {
            "datasets", "entries", "meta", "sqlite_sequence"}


def test_a_failed_creation_names_the_store_and_leaves_nothing_beside_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An SQLite failure while the store is built is named with the store's path and its lock wait; the temporary
    file and any WAL / shared-memory files SQLite left beside it are removed; a directory that does not exist is
    named with its fix."""
    import dpflow.budget as budget_module

    def failing(name: str, **_kw: object) -> sqlite3.Connection:
        for suffix in ("-wal", "-shm"):
            Path(name + suffix).write_text("")
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(budget_module.sqlite3, "connect", failing)
    path = tmp_path / "b.sqlite"
    with pytest.raises(BudgetStoreError) as err:
        BudgetStore(path, timeout=7)
    assert (err.value.path, err.value.problem, err.value.fix) == (
        str(path), "another process held the store locked for more than 7 s (SQLite: database is locked)",
        "retry when the other run has finished")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    missing = tmp_path / "no-such-dir" / "b.sqlite"
    with pytest.raises(BudgetStoreError) as err:
        BudgetStore(missing)
    assert (err.value.path, err.value.problem, err.value.fix) == (
        str(missing), "the store file cannot be created (No such file or directory)",
        "give a path in an existing, writable directory")


def test_what_is_not_a_store_is_named_with_its_fix(tmp_path: Path) -> None:
    """The exact refusals of a path that is a directory, a missing file with create=False, and a file without
    the two tables; a file holding exactly the two tables (no sqlite_sequence) is a store."""
    def refusal(path: Path, **kw: bool) -> tuple[str, str, str]:
        with pytest.raises(BudgetStoreError) as err:
            BudgetStore(path, **kw)
        return err.value.path, err.value.problem, err.value.fix

    assert refusal(tmp_path) == (str(tmp_path), "this is a directory, not a store file",
                                 "give the path of the store file, e.g. DIR/dpflow-budget.sqlite")
    missing = tmp_path / "s.sqlite"
    assert refusal(missing, create=False) == (
        str(missing), "no such store file", "check the path (--budget-store or $DPFLOW_BUDGET_STORE); a "
        "new store is created by `dpflow budget open DATASET --rho R --budget-store PATH`")
    assert not missing.exists()
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE datasets (x)")
    assert refusal(other) == (str(other), "the file holds no budget store (no datasets/entries tables): it is "
                              "empty, truncated, or another kind of file",
                              "restore the store from a backup, or give the path of the store file")
    two = tmp_path / "two.sqlite"
    with sqlite3.connect(two) as con:
        con.execute("CREATE TABLE datasets (dataset TEXT PRIMARY KEY, filter, limit_value, charged, head)")
        con.execute("CREATE TABLE entries (seq INTEGER PRIMARY KEY, dataset, kind, ref, amount, plan_hash, created, "
                    "prev, hash)")
    assert BudgetStore(two, create=False).datasets() == []


def test_a_store_waits_for_a_lock_as_long_as_its_timeout(tmp_path: Path) -> None:
    """A transaction held by another process delays a change by the store's timeout, then the refusal names it
    (sqlite3's own default wait is 5 s)."""
    import time

    store = BudgetStore(tmp_path / "b.sqlite", timeout=0.2)
    holder = sqlite3.connect(store.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        t0 = time.monotonic()
        with pytest.raises(BudgetStoreError, match=re.escape("locked for more than 0.2 s")):
            store.open("d", dp.ZCDP(1))
        assert time.monotonic() - t0 < 3.0
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    store.open("d", dp.ZCDP(1))


def test_rows_are_stamped_in_utc(store: BudgetStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each row's time is UTC in ISO 8601 (YYYY-MM-DDTHH:MM:SSZ), whatever the local time zone."""
    import datetime
    import time

    monkeypatch.setenv("TZ", "XYZ+05:30")
    time.tzset()
    try:
        store.open("d", dp.ZCDP(1))
        two_sources(dp.ZCDP("1/10")).run(XY, budget_store=store, dataset="d")
    finally:
        monkeypatch.undo()
        time.tzset()
    now = datetime.datetime.now(datetime.UTC)
    for e in store.entries("d"):
        t = datetime.datetime.strptime(e.created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
        assert abs((now - t).total_seconds()) < 600, e.created


def test_open_is_idempotent_and_refuses_a_change(store: BudgetStore) -> None:
    store.open("d", dp.ZCDP(1))
    store.open("d", dp.ZCDP(1))  # the same budget again: nothing written
    assert [e.kind for e in store.entries("d")] == ["open"]
    for other in (dp.ZCDP(2), dp.PureDP(1)):
        with pytest.raises(ValueError, match=re.escape("dataset 'd' already has the lifetime budget zcdp 1; a "
                                                       "lifetime budget cannot be changed")):
            store.open("d", other)
    with pytest.raises(ValueError, match="^a dataset id must be a non-empty string$"):
        store.open("", dp.ZCDP(1))
    assert store.datasets() == ["d"] and len(store.entries("d")) == 1


def test_a_commit_to_a_dataset_removed_by_hand_writes_nothing(store: BudgetStore) -> None:
    """A dataset whose datasets row was deleted after a reservation gets no row outside a chain: the commit is
    refused, and the reservation's rows are left as they were."""
    store.open("d", dp.ZCDP(1))
    r = store.reserve(two_sources(dp.ZCDP("1/10")).check(), "d")
    with sqlite3.connect(store.path) as con:
        con.execute("DELETE FROM datasets WHERE dataset = 'd'")
    with pytest.raises(BudgetStoreError) as err:
        store.commit(r)
    assert (err.value.path, err.value.problem, err.value.fix) == (
        store.path, "dataset 'd' has no row in the datasets table (it was removed)",
        "restore the store from a backup whose chain verifies")
    assert [e.kind for e in store.entries("d")] == ["open", "reserve"]


def test_the_charge_note_lists_every_dataset(store: BudgetStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.open("a", dp.ZCDP(1))
    store.open("b", dp.ZCDP(1))

    def broken(_r: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(store, "commit", broken)
    with pytest.raises(OSError) as err:
        two_sources(dp.ZCDP("1/10")).run(XY, budget_store=store, dataset={"X": "a", "Y": "b"})
    (sa,), (sb,) = store.status("a").pending_ids, store.status("b").pending_ids
    assert err.value.__notes__[0] == (f"budget store {store.path}: left pending (counted as spent): 1/10 on dataset "
                                      f"'a' (reservation {sa}), 1/10 on dataset 'b' (reservation {sb}); the store "
                                      "could not be updated")


def test_a_reference_that_is_not_an_integer_matches_no_reservation(store: BudgetStore) -> None:
    """A row whose ref was edited to text reads as reservation -1 (no row has that seq), and is reported."""
    store.open("d", dp.ZCDP(1))
    two_sources(dp.ZCDP("1/10")).run(XY, budget_store=store, dataset="d")
    with sqlite3.connect(store.path) as con:
        con.execute("UPDATE entries SET ref = 'x' WHERE kind = 'commit'")
    assert [e.ref for e in store.entries("d")] == [None, None, -1]
    assert "row 3: commit of reservation -1 does not match one open reservation" in store.verify("d").problems
