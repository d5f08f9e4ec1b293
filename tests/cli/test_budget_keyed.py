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
