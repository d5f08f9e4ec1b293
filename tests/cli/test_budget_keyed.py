"""The budget store's keyed hash chain (issue 28 item 5): someone who can write the SQLite file but does not hold
the key can neither forge rows nor zero what was spent and recompute the chain."""

from __future__ import annotations

import hashlib
import hmac
import sqlite3
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.budget import BudgetStore, BudgetStoreError

N_ROWS = 20
DATA = {"X": np.zeros((N_ROWS, 2))}


def small_plan(rho: str) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(rho))
    X = b.source("X", dp.Vectors(d=2), n=N_ROWS)
    return b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))


def _text(prev: str, row: tuple[str, str, int | None, str, str, str]) -> bytes:
    dataset, kind, ref, amount, plan_hash, created = row
    return "\x1f".join([prev, dataset, kind, "" if ref is None else str(ref), amount, plan_hash, created]).encode()


def plain_sha256(prev: str, row: tuple[str, str, int | None, str, str, str]) -> str:
    return hashlib.sha256(_text(prev, row)).hexdigest()


WRONG_KEY = bytes(range(32))


def hmac_wrong_key(prev: str, row: tuple[str, str, int | None, str, str, str]) -> str:
    return hmac.new(WRONG_KEY, _text(prev, row), hashlib.sha256).hexdigest()


def rewrite_history(path: str, row_hash: Callable[[str, tuple[str, str, int | None, str, str, str]], str],
                    extra_sql: tuple[str, ...] = ()) -> None:
    """The attack: with write access to the file only, zero every spent amount, recompute every row's hash and
    link with ``row_hash``, and move the running total and the head to match."""
    con = sqlite3.connect(path)
    con.execute("UPDATE entries SET amount = '0' WHERE kind != 'open'")
    prev = "0" * 64
    rows = con.execute("SELECT seq, dataset, kind, ref, amount, plan_hash, created FROM entries WHERE dataset = 'd' "
                       "ORDER BY seq").fetchall()
    for seq, *row in rows:
        h = row_hash(prev, tuple(row))  # type: ignore[arg-type]
        con.execute("UPDATE entries SET prev = ?, hash = ? WHERE seq = ?", (prev, h, seq))
        prev = h
    con.execute("UPDATE datasets SET charged = '0', head = ? WHERE dataset = 'd'", (prev,))
    for sql in extra_sql:
        con.execute(sql)
    con.commit()
    con.close()


def _has_meta(path: str) -> bool:
    with sqlite3.connect(path) as con:
        return con.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone() is not None


ATTACKS = {
    "sha256": (plain_sha256, ()),
    "sha256, key record dropped": (plain_sha256, ("DROP TABLE IF EXISTS meta",)),
    "hmac under a wrong key": (hmac_wrong_key, ()),
}


@pytest.mark.parametrize("attack", ATTACKS)
def test_zeroing_the_spent_amounts_and_recomputing_the_chain_is_refused(tmp_path: Path, attack: str) -> None:
    path = str(tmp_path / "budget.sqlite")
    store = BudgetStore(path)
    store.open("d", dp.ZCDP(1))
    for _ in range(3):
        small_plan("1/4").run(DATA, budget_store=store, dataset="d")
    assert store.status("d").spent == Fraction(3, 4) and store.verify("d").ok
    row_hash, extra = ATTACKS[attack]
    rewrite_history(path, row_hash, extra)
    for s in (store, BudgetStore(path)):  # the store already open, and the store opened afresh
        check = s.verify("d")
        assert not check.ok, f"{attack}: the rewritten history verifies"
        with pytest.raises(BudgetStoreError, match="fails verification"):
            small_plan("1/2").run(DATA, budget_store=s, dataset="d")  # 3/4 + 1/2 > 1: never admitted
    assert len(BudgetStore(path).entries("d")) == 7  # nothing was reserved


def test_a_forged_key_record_is_a_wrong_key(tmp_path: Path) -> None:
    """The attacker re-keys everything with a key of their own and records that key's id: the store's own key no
    longer matches, and nothing is admitted."""
    from dpflow.budget import _key_id

    path = str(tmp_path / "budget.sqlite")
    store = BudgetStore(path)
    store.open("d", dp.ZCDP(1))
    small_plan("1/4").run(DATA, budget_store=store, dataset="d")
    rewrite_history(path, hmac_wrong_key, (f"UPDATE meta SET value = '{_key_id(WRONG_KEY)}' WHERE name = 'key_id'",))
    with pytest.raises(BudgetStoreError, match="is not the store's key") as err:
        BudgetStore(path)
    assert str(tmp_path / "budget.sqlite.key") in err.value.problem
    assert not store.verify("d").ok  # the object opened before the attack still holds the right key
    with pytest.raises(BudgetStoreError, match="fails verification"):
        small_plan("1/2").run(DATA, budget_store=store, dataset="d")


def test_the_key_lives_outside_the_store_which_records_only_its_id(tmp_path: Path) -> None:
    from dpflow.budget import _key_id

    path = tmp_path / "budget.sqlite"
    store = BudgetStore(path)
    key_file = tmp_path / "budget.sqlite.key"
    assert store.key_file == str(key_file) and key_file.stat().st_mode & 0o777 == 0o600
    key = bytes.fromhex(key_file.read_text())
    assert len(key) == 32 and store.key_id == _key_id(key)
    store.open("d", dp.ZCDP(1))
    small_plan("1/4").run(DATA, budget_store=store, dataset="d")
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("budget.sqlite*") if p != key_file)
    assert key.hex().encode() not in raw and key not in raw
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT name, value FROM meta").fetchall() == [("key_id", store.key_id)]
    check = store.verify("d")
    assert check.ok and check.key_id == store.key_id and f"under the HMAC-SHA256 key {store.key_id}" in check.proves


def test_a_missing_or_wrong_key_is_refused_as_such(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "budget.sqlite"
    BudgetStore(path).open("d", dp.ZCDP(1))
    key_file = tmp_path / "budget.sqlite.key"
    key_file.rename(tmp_path / "elsewhere.key")
    with pytest.raises(BudgetStoreError, match="is keyed .* but its key file .*budget.sqlite.key does not exist"):
        BudgetStore(path)
    assert not key_file.exists()  # a keyed store never gets a new key
    store = BudgetStore(path, key_file=tmp_path / "elsewhere.key")
    assert store.verify("d").ok
    other = BudgetStore(tmp_path / "other.sqlite")  # another store, another key
    with pytest.raises(BudgetStoreError, match="other.sqlite.key .* is not the store's key"):
        BudgetStore(path, key_file=other.key_file)
    monkeypatch.setenv("DPFLOW_BUDGET_KEY", (tmp_path / "elsewhere.key").read_text().strip())
    assert BudgetStore(path).verify("d").ok  # the environment's key, when no key file is given
    monkeypatch.setenv("DPFLOW_BUDGET_KEY", "00" * 32)
    with pytest.raises(BudgetStoreError, match=r"the key from \$DPFLOW_BUDGET_KEY .* is not the store's key"):
        BudgetStore(path)


@pytest.mark.parametrize("bad", ["zz" * 32, "ab" * 15, ""])
def test_a_key_from_the_environment_is_checked_before_anything_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv("DPFLOW_BUDGET_KEY", bad)
    with pytest.raises(BudgetStoreError, match=r"the key from \$DPFLOW_BUDGET_KEY is not a key: 16 or more bytes"):
        BudgetStore(tmp_path / "budget.sqlite")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("DPFLOW_BUDGET_KEY", "ab" * 32)
    store = BudgetStore(tmp_path / "budget.sqlite")
    store.open("d", dp.ZCDP(1))
    assert store.key_file is None and store.verify("d").ok
    assert sorted(p.name for p in tmp_path.iterdir()) == ["budget.sqlite"]  # no key file


def _unkeyed(tmp_path: Path) -> str:
    """A store as dpflow wrote it before issue 28: a plain sha256 chain, no key record, no key file."""
    path = str(tmp_path / "budget.sqlite")
    store = BudgetStore(path)
    store.open("d", dp.ZCDP(1))
    for _ in range(2):
        small_plan("1/4").run(DATA, budget_store=store, dataset="d")
    con = sqlite3.connect(path)
    prev = "0" * 64
    for seq, *row in con.execute("SELECT seq, dataset, kind, ref, amount, plan_hash, created FROM entries "
                                 "ORDER BY seq").fetchall():
        h = plain_sha256(prev, tuple(row))  # type: ignore[arg-type]
        con.execute("UPDATE entries SET prev = ?, hash = ? WHERE seq = ?", (prev, h, seq))
        prev = h
    con.execute("UPDATE datasets SET head = ?", (prev,))
    con.execute("DROP TABLE meta")
    con.commit()
    con.close()
    return path


def test_an_unkeyed_store_admits_nothing_until_it_is_upgraded(tmp_path: Path) -> None:
    path = _unkeyed(tmp_path)
    store = BudgetStore(path)
    assert store.key_id is None
    check = store.verify("d")
    assert not check.ok and check.key_id is None and check.problems[0].startswith("the store is not keyed")
    with pytest.raises(BudgetStoreError, match="no run is admitted on it: the store is not keyed"):
        small_plan("1/4").run(DATA, budget_store=store, dataset="d")
    with pytest.raises(BudgetStoreError, match="dpflow budget upgrade"):
        store.open("e", dp.ZCDP(1))
    with pytest.raises(BudgetStoreError, match="key file .* already exists, but the store is not keyed"):
        store.upgrade()  # its old key file is still there: the store was keyed and rewritten
    Path(path + ".key").unlink()
    key_id = store.upgrade()
    assert store.key_id == key_id == BudgetStore(path).key_id
    assert Path(path + ".key").stat().st_mode & 0o777 == 0o600
    assert store.verify("d").ok and store.status("d").spent == Fraction(1, 2)
    small_plan("1/2").run(DATA, budget_store=store, dataset="d")
    with pytest.raises(ValueError, match="already keyed"):
        store.upgrade()


def test_an_unkeyed_store_whose_chain_fails_is_not_upgraded(tmp_path: Path) -> None:
    path = _unkeyed(tmp_path)
    Path(path + ".key").unlink()
    with sqlite3.connect(path) as con:
        con.execute("UPDATE entries SET amount = '0' WHERE seq = 2")
    store = BudgetStore(path)
    with pytest.raises(BudgetStoreError, match="dataset 'd' fails verification, so the store is not keyed: row 2"):
        store.upgrade()
    assert store.key_id is None and not Path(path + ".key").exists()


def test_cli_key_file_verify_and_upgrade(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dpflow.cli import main

    path, key = str(tmp_path / "s.sqlite"), str(tmp_path / "k" / "budget.key")
    (tmp_path / "k").mkdir()
    assert main(["budget", "open", "ds", "--rho", "1", "--budget-store", path, "--key-file", key]) == 0
    assert Path(key).stat().st_mode & 0o777 == 0o600 and not Path(path + ".key").exists()
    capsys.readouterr()
    assert main(["budget", "verify", "ds", "--budget-store", path, "--key-file", key]) == 0
    key_id = BudgetStore(path, key_file=key).key_id
    assert f"ds: 1 rows verified under the HMAC-SHA256 key {key_id}" in capsys.readouterr().out
    assert main(["budget", "verify", "ds", "--budget-store", path]) == 1
    assert "s.sqlite.key does not exist" in capsys.readouterr().err

    old = _unkeyed(tmp_path / "k")
    Path(old + ".key").unlink()
    assert main(["budget", "verify", "d", "--budget-store", old]) == 1
    assert "the store is not keyed" in capsys.readouterr().err
    assert main(["budget", "upgrade", "--budget-store", old]) == 0
    assert "chain keyed with HMAC-SHA256" in capsys.readouterr().out
    assert main(["budget", "verify", "d", "--budget-store", old]) == 0
