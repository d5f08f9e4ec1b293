"""A privacy budget that outlives the process: a persistent, tamper-evident ledger of spent privacy
per dataset, backed by SQLite (standard library) with transactions.

Each dataset gets a lifetime budget once (:meth:`BudgetStore.open`): ``ZCDP(rho)`` (a zCDP filter)
or ``PureDP(epsilon)`` (a basic-epsilon filter).  A run reserves its certified cost before any data
is read (:meth:`BudgetStore.reserve`); the reservation is admitted only if everything already
reserved or committed plus the new cost stays within the budget, decided inside one ``BEGIN
IMMEDIATE`` transaction, so concurrent processes cannot together overspend.  The run then commits
the reservation, or releases it when no private value was read.  A reservation whose process died
stays *pending* and keeps counting as spent: a crash never frees budget that may have been spent.

Validity of the filters (the admitted sequence is the order of the reservations; each run is a
non-interactive mechanism whose cost is fixed before it starts, so concurrent runs compose as the
same runs in that order):

* zCDP filter "admit while sum rho_i <= rho_B": valid under full adaptivity (Feldman & Zrnic,
  NeurIPS 2021, the Renyi filter applied at every order; OpenDP cites their Remark 4.4 for
  fully adaptive zCDP composition).  Costs with delta0 > 0 (approximate zCDP) are refused: the
  approximate-zCDP filter of Whitehouse et al. (ICML 2023) is not implemented here.
* basic epsilon filter "admit while sum eps_i <= eps_B": valid under full adaptivity (Rogers,
  Roth, Ullman & Vadhan, NeurIPS 2016).  Plans without a pure epsilon are refused by it.

A PLD or f-DP filter is deliberately not offered: it is invalid under full adaptivity (Tran,
Koskela, Raisa & Honkela 2026).  All amounts are exact fractions stored as text, never floats.

Every row commits to the previous row of its dataset with HMAC-SHA256 under a secret key kept
outside the database (a keyed hash chain), so editing, inserting or deleting a row is detected by
:meth:`BudgetStore.verify`.  Admission rests on the same check: a reservation re-verifies the dataset's
chain inside its transaction and takes what was spent from the rows, never from a stored running total;
a dataset that fails verification admits no run (:class:`BudgetStoreError`), and so does a file that is
not a readable store.

The key.  ``BudgetStore(path, key_file=K)`` reads it from the file ``K``; without ``key_file`` from
``$DPFLOW_BUDGET_KEY`` (hexadecimal) if that is set, else from ``PATH.key`` beside the store.  A new store
creates a missing key file (32 random bytes in hexadecimal, mode 0600, linked into place whole).  The store
records that it is keyed and the key's id (an HMAC of a fixed label under the key, never the key), so a
missing or wrong key is refused as such, and a keyed store is never verified without its key.

Threat model.  The key protects against anyone who can write the database file but cannot read the key:
without it they cannot forge a row, zero or shrink a spent amount, raise the limit, or recompute the
chain after an edit, and ``verify`` detects every edit, insertion and deletion before the newest row.  It
does not protect against anyone holding the key or the privileges of the process that runs dpflow
(they can write valid rows), against removing the newest rows together with the head, restoring an
older copy of the whole file or copying in a dataset's chain from another store under the same key (all
detected only against a head hash kept elsewhere: ``show`` prints it), or against deleting the file.  A
key file beside the store protects only if the writers of the store cannot read it (e.g. the store is
group-writable, the key readable by one account only); keep the key in another directory or account, or
pass it through ``$DPFLOW_BUDGET_KEY``, for more.

A store written before the chain was keyed admits no run and fails ``verify`` until it is keyed once with
:meth:`BudgetStore.upgrade` (``dpflow budget upgrade``), which checks its unkeyed chain first and trusts
what that chain says: anyone who could write the file could have rewritten it.  A keyed store never turns
unkeyed by itself; one that was keyed and reads as unkeyed was tampered with: restore it from a backup.

>>> import tempfile, os, numpy as np, dpflow as dp
>>> from dpflow import nodes as N
>>> store = BudgetStore(os.path.join(tempfile.mkdtemp(), "budget.sqlite"))
>>> store.open("census", dp.ZCDP(1))
>>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
>>> X = b.source("X", dp.Vectors(d=2), n=100)
>>> plan = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))
>>> res = plan.run({"X": np.zeros((100, 2))}, budget_store=store, dataset="census")
>>> store.status("census").remaining
Fraction(1, 2)
>>> store.verify("census").ok
True
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path

import attrs

from dpflow.errors import BudgetError, DpflowError
from dpflow.planner.ledger import Ledger
from dpflow.privacy import ZCDP, Measure, PureDP

GENESIS = "0" * 64
KEY_ENV = "DPFLOW_BUDGET_KEY"
_MIN_KEY_BYTES = 16
FILTER_REFERENCES = {
    "zcdp": "zCDP filter: Feldman-Zrnic 2021 (Renyi filter, every order); fully adaptive zCDP composition",
    "pure": "basic epsilon filter: Rogers-Roth-Ullman-Vadhan 2016 (valid under full adaptivity)",
}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS datasets (
    dataset TEXT PRIMARY KEY,
    filter TEXT NOT NULL CHECK (filter IN ('zcdp', 'pure')),
    limit_value TEXT NOT NULL,
    charged TEXT NOT NULL,
    head TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('open', 'reserve', 'commit', 'release')),
    ref INTEGER,
    amount TEXT NOT NULL,
    plan_hash TEXT NOT NULL,
    created TEXT NOT NULL,
    prev TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_by_dataset ON entries (dataset, seq);
CREATE TABLE IF NOT EXISTS meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""


class BudgetExhaustedError(BudgetError):
    """The dataset's lifetime budget cannot pay for this run (decided before any data is read)."""


class BudgetStoreError(DpflowError):
    """The budget store cannot be trusted or used: the file is missing, is not a readable store, or a
    dataset's rows fail verification.  Raised before any run is admitted on it.

    >>> raise BudgetStoreError("b.sqlite", "file is not a database", "restore it from a backup")
    Traceback (most recent call last):
    ...
    dpflow.budget.BudgetStoreError: budget store b.sqlite: file is not a database. Fix: restore it from a backup.
    """

    def __init__(self, path: str, problem: str, fix: str) -> None:
        self.path = path
        self.problem = problem
        self.fix = fix
        super().__init__(f"budget store {path}: {problem}. Fix: {fix}.")


def _declare_fix(dataset: str, path: str) -> str:
    """How to give ``dataset`` a lifetime budget, on the command line and in Python."""
    return (f"declare one first: `dpflow budget open {dataset} --rho R --budget-store {path}` (or --epsilon E); "
            f"in Python, BudgetStore({path!r}).open({dataset!r}, ZCDP(rho) or PureDP(epsilon))")


def _sqlite_error(path: str, e: sqlite3.Error, timeout: float) -> BudgetStoreError:
    """A clear message for an SQLite failure: what is wrong with the file and how to recover."""
    text = str(e)
    if "locked" in text or "busy" in text:
        return BudgetStoreError(path, f"another process held the store locked for more than {timeout:g} s "
                                f"(SQLite: {text})", "retry when the other run has finished")
    if "unable to open" in text:
        return BudgetStoreError(path, f"the file cannot be opened (SQLite: {text})",
                                "check that --budget-store names a store file in an existing, writable directory")
    if "no such table" in text or "no such column" in text:
        return BudgetStoreError(path, f"this SQLite file is not a dpflow budget store (SQLite: {text})",
                                "point --budget-store at the budget store file")
    return BudgetStoreError(path, f"the file is not a readable budget store: it is corrupted, truncated or not "
                            f"a store (SQLite: {text})",
                            "restore the store from a backup and check it with `dpflow budget verify DATASET`; "
                            "do not delete it or start a new one for the same data, since what was spent would "
                            "be forgotten")


def _approx(x: Fraction) -> str:
    """A short decimal form of an exact amount (never overflows)."""
    try:
        return f"{float(x):.6g}"
    except OverflowError:
        return f"about 10^{len(str(abs(x.numerator) // x.denominator)) - 1}"


@attrs.frozen
class Entry:
    """One row of a dataset's hash chain."""

    seq: int
    dataset: str
    kind: str
    ref: int | None
    amount: str
    plan_hash: str
    created: str
    prev: str
    hash: str


@attrs.frozen
class Status:
    """A dataset's budget: the limit, what is committed, what is pending (counted as spent)."""

    dataset: str
    filter: str
    limit: Fraction
    committed: Fraction
    pending: Fraction
    pending_ids: tuple[int, ...]
    runs: int
    head: str

    @property
    def spent(self) -> Fraction:
        """Committed plus pending: everything that counts against the limit."""
        return self.committed + self.pending

    @property
    def remaining(self) -> Fraction:
        """What later runs may still reserve."""
        return self.limit - self.spent


@attrs.frozen
class Verification:
    """The result of :meth:`BudgetStore.verify`: ``ok``, the problems found, and the id of the key the chain
    was checked under (None: the store is not keyed, and then ``ok`` is False)."""

    dataset: str
    ok: bool
    problems: tuple[str, ...]
    rows: int
    key_id: str | None

    @property
    def proves(self) -> str:
        """Exactly what this verification established.

        >>> print(Verification("d", True, (), 3, "0123456789abcdef").proves)
        3 rows verified under the HMAC-SHA256 key 0123456789abcdef: nobody without that key edited, inserted or \
removed a row before the head, and the spent total is the rows' own; not excluded: the newest rows removed \
with the head, or an older copy of the whole file (compare the head with a copy kept elsewhere)
        """
        if not self.ok:
            return f"{self.rows} rows, VERIFICATION FAILED: " + "; ".join(self.problems)
        return (f"{self.rows} rows verified under the HMAC-SHA256 key {self.key_id}: nobody without that key edited, "
                "inserted or removed a row before the head, and the spent total is the rows' own; not excluded: the "
                "newest rows removed with the head, or an older copy of the whole file (compare the head with a copy "
                "kept elsewhere)")


@attrs.frozen
class Reservation:
    """Reserved budget: one reserve row per dataset, all written in one transaction."""

    ids: tuple[tuple[str, int], ...]
    amounts: tuple[tuple[str, Fraction], ...]
    plan_hash: str


def _row_hash(key: bytes | None, prev: str, dataset: str, kind: str, ref: int | None, amount: str, plan_hash: str,
              created: str) -> str:
    """HMAC-SHA256 under ``key`` of the fields joined by the unit separator; plain sha256 without a key (the
    format of stores written before the chain was keyed, read only to verify and upgrade them)."""
    text = "\x1f".join([prev, dataset, kind, "" if ref is None else str(ref), amount, plan_hash, created]).encode()
    return hashlib.sha256(text).hexdigest() if key is None else hmac.new(key, text, hashlib.sha256).hexdigest()


def _key_id(key: bytes) -> str:
    """What the store records to recognise its key: an HMAC of a fixed label under the key (not the key)."""
    return hmac.new(key, b"dpflow budget store key id", hashlib.sha256).hexdigest()[:16]


def lifetime_limit(budget: Measure) -> tuple[str, Fraction]:
    """The filter and the limit of a lifetime budget, which must be positive and finite as a double
    (else ``ValueError``); check it before writing anything.

    >>> lifetime_limit(ZCDP("1/2"))
    ('zcdp', Fraction(1, 2))
    """
    if isinstance(budget, ZCDP):
        filt, limit = "zcdp", budget.rho
    elif isinstance(budget, PureDP):
        filt, limit = "pure", budget.epsilon
    else:
        raise ValueError(f"a lifetime budget is ZCDP(rho) (zCDP filter) or PureDP(epsilon) (basic epsilon "
                         f"filter), got {budget.describe()}: no filter for it is implemented")
    if not 0 < limit <= Fraction(sys.float_info.max):
        unit = "rho" if filt == "zcdp" else "epsilon"
        raise ValueError(f"a lifetime budget must be positive and at most {sys.float_info.max:.6g}, got "
                         f"{unit}={_approx(limit)}")
    return filt, limit


def _amount(filt: str, ledger: Ledger, sources: list[str], dataset: str) -> Fraction:
    """The cost a run charges to one dataset: the sum over the plan sources drawn from it
    (basic sequential composition, valid whether or not the sources share records), read from the
    ledger's exact typed totals."""
    total = Fraction(0)
    for t in ledger.totals:
        if t.source not in sources:
            continue
        if filt == "zcdp":
            if t.delta0 != 0:
                raise BudgetExhaustedError(dataset, f"source {t.source} costs approximate zCDP "
                                           f"(delta0={t.delta0}), which the zCDP filter cannot account for",
                                           "use a ZCDP plan budget (delta0 = 0) on this dataset")
            total += t.rho
        else:
            if t.pure_eps is None:
                raise BudgetExhaustedError(dataset, f"source {t.source} has no pure-DP cost, so the basic "
                                           "epsilon filter cannot account for it",
                                           "use pure-DP mechanisms (a PureDP plan budget) on this dataset")
            total += t.pure_eps
    return total


def datasets_of(ledger: Ledger, dataset: str | Mapping[str, str]) -> dict[str, list[str]]:
    """Dataset id -> the plan sources charged to it.  A single id takes every source.

    >>> import dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=2), n=100)
    >>> datasets_of(b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))).check(), "d1")
    {'d1': ['X']}
    """
    names = [t.source for t in ledger.totals]
    if isinstance(dataset, str):
        return {dataset: names}
    unknown = sorted(set(dataset) - set(names))
    missing = sorted(set(names) - set(dataset))
    if unknown or missing:
        raise ValueError(f"dataset= must map every plan source to a dataset id: sources {names}, "
                         f"unknown {unknown}, unmapped {missing}")
    out: dict[str, list[str]] = {}
    for src in names:
        out.setdefault(dataset[src], []).append(src)
    return out


@attrs.frozen
class _Audit:
    """A dataset's rows re-walked: its filter and limit, what the rows say is spent, and any problem."""

    filter: str
    limit: Fraction
    charged: Fraction
    problems: tuple[str, ...]
    rows: int


_KEY_FIX = (f"give the store's key: key_file= in Python, --key-file PATH on the command line, or ${KEY_ENV} "
            "(hexadecimal); without it no run is admitted and nothing is verified")
_UNKEYED = ("the store is not keyed: its hash chain has no secret, so anyone who could write the file could have "
            "rewritten it")
_UPGRADE_FIX = ("if an older dpflow wrote it, key it once with `dpflow budget upgrade` (BudgetStore.upgrade()); a "
                "store that was keyed never becomes unkeyed by itself: then restore it from a backup")


def _recorded_key_id(con: sqlite3.Connection) -> str | None:
    """The key id the store records; None for a store without one (written before the chain was keyed)."""
    if con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone() is None:
        return None
    row = con.execute("SELECT value FROM meta WHERE name = 'key_id'").fetchone()
    return None if row is None else str(row[0])


def _entry(r: tuple[object, ...]) -> Entry:
    seq, dataset, kind, ref, amount, plan_hash, created, prev, h = r
    return Entry(int(str(seq)), str(dataset), str(kind), ref if ref is None or isinstance(ref, int) else -1,
                 str(amount), str(plan_hash), str(created), str(prev), str(h))


def _fraction(text: str) -> Fraction | None:
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


def _audit(con: sqlite3.Connection, dataset: str, key: bytes | None) -> _Audit | None:
    """Check ``dataset``'s hash chain (under ``key``; plain sha256 without one), declared limit, reservation
    outcomes and running total, and recompute what was spent (reserved and not released) from its rows; None
    for an unknown dataset."""
    row = con.execute("SELECT filter, limit_value, charged, head FROM datasets WHERE dataset = ?",
                      (dataset,)).fetchone()
    if row is None:
        return None
    filt, limit_text, charged_text, head = (str(x) for x in row)
    entries = [_entry(r) for r in con.execute(
        "SELECT seq, dataset, kind, ref, amount, plan_hash, created, prev, hash FROM entries WHERE dataset = ? "
        "ORDER BY seq", (dataset,))]
    problems: list[str] = []
    limit = _fraction(limit_text)
    if limit is None:
        problems.append(f"the lifetime budget {limit_text!r} is not an exact fraction")
    prev = GENESIS
    reserved: dict[int, Fraction] = {}
    outcome: dict[int, str] = {}
    for i, e in enumerate(entries):
        if e.prev != prev:
            problems.append(f"row {e.seq}: does not follow the previous row (a row was removed or edited)")
        if _row_hash(key, e.prev, e.dataset, e.kind, e.ref, e.amount, e.plan_hash, e.created) != e.hash:
            problems.append(f"row {e.seq}: its content does not match its hash (the row was edited)")
        prev = e.hash
        amount = _fraction(e.amount)
        if amount is None:
            problems.append(f"row {e.seq}: amount {e.amount!r} is not an exact fraction")
            continue
        if (i == 0) != (e.kind == "open"):
            problems.append(f"row {e.seq}: the chain must start with exactly one 'open' row")
        elif e.kind == "open" and (e.plan_hash != filt or amount != limit):
            problems.append(f"row {e.seq}: the declared budget {filt} {limit_text} differs from the chain's "
                            f"{e.plan_hash} {e.amount}")
        elif e.kind == "reserve":
            reserved[e.seq] = amount
        elif e.kind in ("commit", "release"):
            if e.ref not in reserved or e.ref in outcome or reserved[e.ref] != amount:
                problems.append(f"row {e.seq}: {e.kind} of reservation {e.ref} does not match one open "
                                "reservation")
            else:
                outcome[e.ref] = e.kind
    if prev != head:
        problems.append("the chain's last row is not the recorded head (rows were removed or added)")
    charged = sum((a for s, a in reserved.items() if outcome.get(s) != "release"), Fraction(0))
    if charged != _fraction(charged_text):
        problems.append(f"the running total {charged_text} differs from the rows' total {charged}")
    if limit is not None and charged > limit:
        problems.append(f"spent {charged} exceeds the lifetime budget {limit_text}")
    return _Audit(filt, Fraction(0) if limit is None else limit, charged, tuple(problems), len(entries))


class BudgetStore:
    """A persistent ledger of spent privacy per dataset identifier (SQLite file at ``path``).

    Safe to share between processes: every change is one ``BEGIN IMMEDIATE`` transaction, and each
    call opens its own connection (so a store object survives ``fork``) and waits up to ``timeout`` seconds
    (default 120) for another process's transaction to end.  A missing file is created
    (an empty store) unless ``create=False``; an existing file must hold a store (an empty file is
    refused too: it may be an emptied store), else :class:`BudgetStoreError` says what is wrong and
    how to recover.

    The chain's key comes from ``key_file``, else ``$DPFLOW_BUDGET_KEY`` (hexadecimal), else ``PATH.key``;
    a new store creates a missing key file (mode 0600).  A keyed store whose key is missing or wrong is
    refused here; ``key_id`` is the id of the store's key (None for a store written before the chain was
    keyed: see :meth:`upgrade`).
    """

    def __init__(self, path: str | Path, timeout: float = 120.0, create: bool = True,
                 key_file: str | Path | None = None) -> None:
        self.path = str(path)
        self.timeout = timeout
        self.key_file: str | None = (str(key_file) if key_file is not None else
                                     None if KEY_ENV in os.environ else self.path + ".key")
        self._key: bytes | None = None
        p = Path(self.path)
        if p.is_dir():
            raise BudgetStoreError(self.path, "this is a directory, not a store file",
                                   "give the path of the store file, e.g. DIR/dpflow-budget.sqlite")
        if not p.exists():
            if not create:
                raise BudgetStoreError(self.path, "no such store file",
                                       "check the path (--budget-store or $DPFLOW_BUDGET_STORE); a new "
                                       "store is created by `dpflow budget open DATASET --rho R --budget-store PATH`")
            self._create(p)
        with self._read() as con:
            tables = {str(r[0]) for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"datasets", "entries"} <= tables:
                raise BudgetStoreError(self.path, "the file holds no budget store (no datasets/entries tables): it "
                                       "is empty, truncated, or another kind of file",
                                       "restore the store from a backup, or give the path of the store file")
            self.key_id = _recorded_key_id(con)
        if self.key_id is not None:
            key = self._load_key(create=False)
            if key is None:
                raise BudgetStoreError(self.path, f"the store is keyed (key id {self.key_id}) but its key file "
                                       f"{self.key_file} does not exist", _KEY_FIX)
            if _key_id(key) != self.key_id:
                raise BudgetStoreError(self.path, f"the key from {self._key_source} (key id {_key_id(key)}) is not "
                                       f"the store's key (key id {self.key_id}), or the store's key record was "
                                       "edited", _KEY_FIX)
            self._key = key

    @property
    def _key_source(self) -> str:
        return "$" + KEY_ENV if self.key_file is None else self.key_file

    def _load_key(self, create: bool) -> bytes | None:
        """The key from its source; None if the key file does not exist and ``create`` is False, else a
        missing key file is created (32 random bytes, hexadecimal, mode 0600, linked into place whole, so a
        concurrent reader sees the whole key or none; if another process linked one first, its key is used)."""
        try:
            if self.key_file is None:
                text = os.environ[KEY_ENV]
            else:
                kf = Path(self.key_file)
                if not kf.exists():
                    if not create:
                        return None
                    fd, tmp = tempfile.mkstemp(dir=kf.parent, prefix=f".{kf.name}.", suffix=".new")
                    try:
                        with os.fdopen(fd, "w") as f:
                            f.write(secrets.token_hex(32) + "\n")
                            f.flush()
                            os.fsync(f.fileno())
                        os.link(tmp, kf)
                    except FileExistsError:
                        pass
                    finally:
                        os.unlink(tmp)
                text = kf.read_text()
        except OSError as e:
            raise BudgetStoreError(self.path, f"the key file {self.key_file} cannot be read or created "
                                   f"({e.strerror})", _KEY_FIX) from e
        try:
            key = bytes.fromhex(text.strip())
        except ValueError:
            key = b""
        if len(key) < _MIN_KEY_BYTES:
            raise BudgetStoreError(self.path, f"the key from {self._key_source} is not a key: {_MIN_KEY_BYTES} or "
                                   "more bytes in hexadecimal are needed", _KEY_FIX)
        return key

    def _create(self, p: Path) -> None:
        """Build an empty store beside ``p`` and link it into place: the path never shows a half-made
        store, so an existing file without the tables is always an error (an emptied store is not
        silently replaced).  If another process created ``p`` meanwhile, its store is used."""
        try:
            fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".new")
        except OSError as e:
            raise BudgetStoreError(self.path, f"the store file cannot be created ({e.strerror})",
                                   "give a path in an existing, writable directory") from e
        os.close(fd)
        try:
            con = sqlite3.connect(tmp, isolation_level=None)
            try:
                con.executescript(_SCHEMA)
                con.execute("PRAGMA journal_mode=WAL")
                key = self._load_key(create=True)
                assert key is not None
                con.execute("INSERT INTO meta (name, value) VALUES ('key_id', ?)", (_key_id(key),))
            finally:
                con.close()
            os.link(tmp, p)
        except FileExistsError:
            pass
        except sqlite3.Error as e:
            raise _sqlite_error(self.path, e, self.timeout) from e
        finally:
            for leftover in (tmp, tmp + "-wal", tmp + "-shm"):
                if os.path.lexists(leftover):
                    os.unlink(leftover)

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        con.execute("PRAGMA synchronous=FULL")
        return con

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A connection outside any transaction; SQLite failures become :class:`BudgetStoreError`."""
        try:
            con = self._connect()
            try:
                yield con
            finally:
                con.close()
        except sqlite3.Error as e:
            raise _sqlite_error(self.path, e, self.timeout) from e

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._read() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    def _append(self, con: sqlite3.Connection, dataset: str, kind: str, ref: int | None, amount: Fraction,
                plan_hash: str) -> int:
        """Append one row to ``dataset``'s chain and move its head (inside the caller's transaction)."""
        if self._key is None:
            raise BudgetStoreError(self.path, _UNKEYED, _UPGRADE_FIX)
        row = con.execute("SELECT head FROM datasets WHERE dataset = ?", (dataset,)).fetchone()
        if row is None:  # its datasets row was deleted by hand after the reservation: write no row outside a chain
            raise BudgetStoreError(self.path, f"dataset {dataset!r} has no row in the datasets table (it was removed)",
                                   "restore the store from a backup whose chain verifies")
        prev = str(row[0])
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        h = _row_hash(self._key, prev, dataset, kind, ref, str(amount), plan_hash, created)
        cur = con.execute(
            "INSERT INTO entries (dataset, kind, ref, amount, plan_hash, created, prev, hash) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (dataset, kind, ref, str(amount), plan_hash, created, prev, h))
        con.execute("UPDATE datasets SET head = ? WHERE dataset = ?", (h, dataset))
        seq = cur.lastrowid
        assert seq is not None
        return seq

    def _dataset(self, con: sqlite3.Connection, dataset: str) -> tuple[str, Fraction, Fraction]:
        row = con.execute("SELECT filter, limit_value, charged FROM datasets WHERE dataset = ?",
                          (dataset,)).fetchone()
        if row is None:
            known = [str(r[0]) for r in con.execute("SELECT dataset FROM datasets ORDER BY dataset")]
            raise BudgetStoreError(self.path, f"no dataset {dataset!r} (the store holds: "
                                   f"{', '.join(known) or 'none'})", _declare_fix(dataset, self.path))
        return str(row[0]), Fraction(row[1]), Fraction(row[2])

    def open(self, dataset: str, budget: Measure) -> None:
        """Declare ``dataset``'s lifetime budget (once; opening again with the same budget is a no-op).

        The limit must be positive and finite as a double; it is checked before anything is written.
        """
        filt, limit = lifetime_limit(budget)
        if not dataset:
            raise ValueError("a dataset id must be a non-empty string")
        with self._transaction() as con:
            row = con.execute("SELECT filter, limit_value FROM datasets WHERE dataset = ?", (dataset,)).fetchone()
            if row is not None:
                if (str(row[0]), _fraction(str(row[1]))) != (filt, limit):
                    raise ValueError(f"dataset {dataset!r} already has the lifetime budget {row[0]} {row[1]}; "
                                     "a lifetime budget cannot be changed")
                return
            con.execute("INSERT INTO datasets (dataset, filter, limit_value, charged, head) VALUES (?, ?, ?, '0', ?)",
                        (dataset, filt, str(limit), GENESIS))
            self._append(con, dataset, "open", None, limit, filt)

    def _check(self, con: sqlite3.Connection, dataset: str) -> _Audit | None:
        """The dataset's audit under the store's key; an unkeyed store fails it (whatever its chain says)."""
        audit = _audit(con, dataset, self._key)
        if audit is None or self._key is not None:
            return audit
        return attrs.evolve(audit, problems=(f"{_UNKEYED}; {_UPGRADE_FIX}", *audit.problems))

    def _verified(self, con: sqlite3.Connection, dataset: str) -> _Audit:
        """The dataset's audit, for admitting a run: refuses an unknown dataset or one failing verification."""
        audit = self._check(con, dataset)
        if audit is None:
            raise BudgetExhaustedError(dataset, "the budget store has no lifetime budget for this dataset",
                                       _declare_fix(dataset, self.path))
        if audit.problems:
            raise BudgetStoreError(self.path, f"dataset {dataset!r} fails verification, so no run is admitted on "
                                   f"it: {'; '.join(audit.problems)}",
                                   f"see `dpflow budget verify {dataset} --budget-store {self.path}`; restore the "
                                   "store from a backup whose chain verifies")
        return audit

    def reserve(self, ledger: Ledger, dataset: str | Mapping[str, str]) -> Reservation:
        """Reserve the certified cost of ``ledger`` on ``dataset`` (one id, or plan source -> id).

        All datasets are charged in one transaction, or none is.  What each dataset has spent is
        recomputed from its verified rows inside that transaction; raises
        :class:`BudgetExhaustedError` if any would exceed its lifetime budget, and
        :class:`BudgetStoreError` if any fails verification.
        """
        groups = datasets_of(ledger, dataset)
        ids: list[tuple[str, int]] = []
        amounts: list[tuple[str, Fraction]] = []
        with self._transaction() as con:
            for ds, sources in sorted(groups.items()):
                audit = self._verified(con, ds)
                limit, charged = audit.limit, audit.charged
                amount = _amount(audit.filter, ledger, sources, ds)
                if charged + amount > limit:
                    unit = "rho" if audit.filter == "zcdp" else "epsilon"
                    raise BudgetExhaustedError(
                        ds, f"this run needs {unit}={amount} but only {limit - charged} of the lifetime budget "
                        f"{unit}={limit} remains (spent or reserved: {charged})",
                        "lower the plan's budget, or use another dataset")
                con.execute("UPDATE datasets SET charged = ? WHERE dataset = ?", (str(charged + amount), ds))
                ids.append((ds, self._append(con, ds, "reserve", None, amount, ledger.plan_hash)))
                amounts.append((ds, amount))
        return Reservation(tuple(ids), tuple(amounts), ledger.plan_hash)

    def _close(self, reservation: Reservation, kind: str) -> None:
        with self._transaction() as con:
            for (ds, seq), (_, amount) in zip(reservation.ids, reservation.amounts, strict=True):
                done = con.execute("SELECT kind FROM entries WHERE dataset = ? AND ref = ?", (ds, seq)).fetchone()
                if done is not None:
                    past = "committed" if done[0] == "commit" else "released"
                    raise ValueError(f"reservation {seq} on {ds!r} was already {past}")
                if kind == "release":
                    _, _, charged = self._dataset(con, ds)
                    con.execute("UPDATE datasets SET charged = ? WHERE dataset = ?", (str(charged - amount), ds))
                self._append(con, ds, kind, seq, amount, reservation.plan_hash)

    def commit(self, reservation: Reservation) -> None:
        """Mark the reserved cost as spent (atomically, for every dataset of the reservation)."""
        self._close(reservation, "commit")

    def release(self, reservation: Reservation) -> None:
        """Give the reserved budget back.  Only correct when no private value was read."""
        self._close(reservation, "release")

    @contextmanager
    def charge(self, ledger: Ledger, dataset: str | Mapping[str, str]) -> Iterator[Charge]:
        """Reserve on entry; on exit commit, or release if the block failed before :meth:`Charge.reading`.

        Once ``reading()`` was called the cost is committed whatever happens, since data was read.  An
        exception (also ``KeyboardInterrupt``) leaving the block carries a note saying what was charged.
        """
        ch = Charge(self, self.reserve(ledger, dataset))
        try:
            yield ch
        except BaseException as exc:
            self._settle(ch.reservation, ch.read)
            exc.add_note(self._charge_note(ch.reservation, "committed" if ch.read else "released",
                                           "private data had been read, so the cost counts" if ch.read else
                                           "no private data had been read, so the budget was given back"))
            raise
        self._settle(ch.reservation, True)

    def _settle(self, reservation: Reservation, commit: bool) -> None:
        """Commit or release; if that fails (or is interrupted), say that the reservation stays pending."""
        try:
            if commit:
                self.commit(reservation)
            else:
                self.release(reservation)
        except BaseException as e:
            e.add_note(self._charge_note(reservation, "left pending (counted as spent)",
                                         "the store could not be updated"))
            raise

    def _charge_note(self, reservation: Reservation, outcome: str, why: str) -> str:
        charges = ", ".join(f"{amount} on dataset {ds!r} (reservation {seq})"
                            for (ds, seq), (_, amount) in zip(reservation.ids, reservation.amounts, strict=True))
        return f"budget store {self.path}: {outcome}: {charges}; {why}"

    def entries(self, dataset: str) -> list[Entry]:
        """The dataset's rows, oldest first."""
        with self._read() as con:
            rows = con.execute("SELECT seq, dataset, kind, ref, amount, plan_hash, created, prev, hash "
                               "FROM entries WHERE dataset = ? ORDER BY seq", (dataset,)).fetchall()
        return [_entry(r) for r in rows]

    def datasets(self) -> list[str]:
        """Every dataset id the store knows."""
        with self._read() as con:
            return [str(r[0]) for r in con.execute("SELECT dataset FROM datasets ORDER BY dataset")]

    def status(self, dataset: str) -> Status:
        """The dataset's limit, committed and pending amounts (from its rows)."""
        with self._read() as con:
            filt, limit, _ = self._dataset(con, dataset)
            head = str(con.execute("SELECT head FROM datasets WHERE dataset = ?", (dataset,)).fetchone()[0])
        reserved: dict[int, Fraction] = {}
        outcome: dict[int, str] = {}
        for e in self.entries(dataset):
            if e.kind == "reserve":
                reserved[e.seq] = Fraction(e.amount)
            elif e.kind in ("commit", "release") and e.ref is not None:
                outcome[e.ref] = e.kind
        committed = sum((a for s, a in reserved.items() if outcome.get(s) == "commit"), Fraction(0))
        pending_ids = tuple(s for s in reserved if s not in outcome)
        pending = sum((reserved[s] for s in pending_ids), Fraction(0))
        runs = sum(1 for s in reserved if outcome.get(s) == "commit")
        return Status(dataset, filt, limit, committed, pending, pending_ids, runs, head)

    def verify(self, dataset: str) -> Verification:
        """Check the keyed hash chain, the declared limit, the reservation outcomes and the running total
        (the same check that admits a run); :attr:`Verification.proves` says what was established.  A store
        that is not keyed fails."""
        with self._read() as con:
            audit = self._check(con, dataset)
        if audit is None:
            return Verification(dataset, False, (f"unknown dataset {dataset!r}",), 0, self.key_id)
        return Verification(dataset, not audit.problems, audit.problems, audit.rows, self.key_id)

    def upgrade(self) -> str:
        """Key a store written before the chain was keyed; returns the new key id.

        Every dataset's unkeyed chain must verify first (else :class:`BudgetStoreError` and nothing is
        changed); then, in one transaction, every row is re-hashed under the key and the key id recorded.
        The key is a new key file (refused if the file already exists: a store that was keyed and now reads
        as unkeyed was tampered with), or ``$DPFLOW_BUDGET_KEY`` when that is the key's source.  What the
        unkeyed chain said is trusted: anyone who could write the file could have rewritten it, so compare
        its heads with copies kept elsewhere before upgrading.
        """
        if self.key_id is not None:
            raise ValueError(f"budget store {self.path} is already keyed (key id {self.key_id})")
        with self._transaction() as con:
            if _recorded_key_id(con) is not None:
                raise BudgetStoreError(self.path, "another process keyed the store meanwhile", "open it again")
            datasets = [str(r[0]) for r in con.execute("SELECT dataset FROM datasets ORDER BY dataset")]
            for ds in datasets:
                audit = _audit(con, ds, None)
                if audit is not None and audit.problems:
                    raise BudgetStoreError(self.path, f"dataset {ds!r} fails verification, so the store is not "
                                           f"keyed: {'; '.join(audit.problems)}",
                                           "restore the store from a backup whose chain verifies, then upgrade it")
            if self.key_file is not None and os.path.lexists(self.key_file):
                raise BudgetStoreError(self.path, f"the key file {self.key_file} already exists, but the store is not "
                                       "keyed: a keyed store never becomes unkeyed by itself",
                                       "if the store was keyed with that key, it was tampered with: restore it from a "
                                       "backup; if the key belongs to nothing, move it away and upgrade again")
            key = self._load_key(create=True)
            assert key is not None
            try:
                con.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
                for ds in datasets:
                    prev = GENESIS
                    for e in [_entry(r) for r in con.execute(
                            "SELECT seq, dataset, kind, ref, amount, plan_hash, created, prev, hash FROM entries "
                            "WHERE dataset = ? ORDER BY seq", (ds,))]:
                        h = _row_hash(key, prev, e.dataset, e.kind, e.ref, e.amount, e.plan_hash, e.created)
                        con.execute("UPDATE entries SET prev = ?, hash = ? WHERE seq = ?", (prev, h, e.seq))
                        prev = h
                    con.execute("UPDATE datasets SET head = ? WHERE dataset = ?", (prev, ds))
                con.execute("INSERT INTO meta (name, value) VALUES ('key_id', ?)", (_key_id(key),))
            except BaseException:
                if self.key_file is not None:  # the key this call created keys nothing: remove it
                    os.unlink(self.key_file)
                raise
        self._key, self.key_id = key, _key_id(key)
        return self.key_id


@attrs.define
class Charge:
    """A reservation in progress (see :meth:`BudgetStore.charge`)."""

    store: BudgetStore
    reservation: Reservation
    read: bool = False

    def reading(self) -> None:
        """From now on private data is read: the cost is committed whatever happens."""
        self.read = True


def describe_status(s: Status) -> str:
    """The text ``dpflow budget show`` prints.

    >>> print(describe_status(Status("d", "zcdp", Fraction(1), Fraction(1, 4), Fraction(0), (), 1, GENESIS)))
    dataset d: zCDP filter, lifetime rho = 1 (1)
      committed 1/4 in 1 runs, pending 0 (0 reservations), remaining 3/4 (0.75)
      head 0000000000000000000000000000000000000000000000000000000000000000
    """
    unit = "rho" if s.filter == "zcdp" else "epsilon"
    name = "zCDP filter" if s.filter == "zcdp" else "basic epsilon filter"
    lines = [
        f"dataset {s.dataset}: {name}, lifetime {unit} = {s.limit} ({_approx(s.limit)})",
        f"  committed {s.committed} in {s.runs} runs, pending {s.pending} ({len(s.pending_ids)} reservations), "
        f"remaining {s.remaining} ({_approx(s.remaining)})",
        f"  head {s.head}",
    ]
    if s.pending_ids:
        lines.insert(2, f"  pending reservations (counted as spent): {', '.join(map(str, s.pending_ids))}")
    return "\n".join(lines)


__all__ = ["BudgetExhaustedError", "BudgetStore", "BudgetStoreError", "Charge", "Entry", "Reservation", "Status",
           "Verification", "datasets_of", "describe_status", "lifetime_limit"]
