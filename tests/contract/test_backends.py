"""Every node kind's example plan gives the same release on the dask backend as on numpy under the same
seeded noise (sums up to floating-point reassociation, everything else exactly), on ordinary and on
hostile rows; sources as dask arrays, ``.npy`` memory maps, Parquet and CSV; an engine failure releases
nothing; the report records the engine's settings."""

from __future__ import annotations

import math
import os
import warnings
from typing import Any

import numpy as np
import pytest

import dpflow as dp
from contract.examples import EXAMPLES, N_ROWS
from contract.test_every_node import base_data, ex, hostile_data
from dpflow import nodes as N
from dpflow.errors import ExecutionError

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
from dpflow.interpreter.dask_backend import DaskBackend, read_table  # noqa: E402

KINDS = sorted(EXAMPLES)


@pytest.fixture(autouse=True)
def _synchronous() -> Any:
    with dask.config.set(scheduler="synchronous"):  # fast and deterministic; the cluster test makes its own
        yield


def _same(a: Any, b: Any) -> None:
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
        return
    A, B = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert A.shape == B.shape
    np.testing.assert_allclose(A, B, rtol=1e-9, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_releases_the_same_on_both_backends(kind: str) -> None:
    e = ex(kind)
    plan, _, _ = e.plan("replace")
    for D in (base_data(e, np.random.default_rng(3)), hostile_data(e, N_ROWS)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ref = plan.run({"X": D}, noise=dp.SeededNoise(9)).released
            got = plan.run({"X": D}, noise=dp.SeededNoise(9), backend=DaskBackend(chunk_rows=2)).released
        assert set(ref) == set(got)
        for name in ref:
            _same(got[name], ref[name])


def _mean_plan(n: int, d: int = 3) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=d), n=n)
    C = N.Clip(radius=5.0)(X)
    return b.build(m=N.GaussianMech()(N.Mean()(C)), s=N.GaussianMech()(N.SecondMoment()(C)))


def test_sources_dask_array_memmap_parquet_csv(tmp_path: Any) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    X = np.random.default_rng(0).normal(size=(501, 3)) * 2
    plan = _mean_plan(501)
    ref = plan.run({"X": X}, noise=dp.SeededNoise(1)).released
    np.save(tmp_path / "x.npy", X)
    frame = pd.DataFrame({"b": X[:, 1], "label": ["r"] * 501, "a": X[:, 0], "c": X[:, 2]})
    frame.to_parquet(tmp_path / "x.parquet")
    frame.to_csv(tmp_path / "x.csv", index=False)
    sources = [da.from_array(X, chunks=(100, 3)), np.load(tmp_path / "x.npy", mmap_mode="r"), tmp_path / "x.npy",
               read_table(tmp_path / "x.parquet", ["a", "b", "c"]), read_table(tmp_path / "x.csv", ["a", "b", "c"])]
    for src in sources:
        got = plan.run({"X": src}, noise=dp.SeededNoise(1), backend=DaskBackend(chunk_rows=64)).released
        for k in ref:
            _same(got[k], ref[k])


def test_the_gaussian_fit_on_dask_matches_numpy() -> None:
    from dpflow.estimators import gaussian as G

    X = np.random.default_rng(4).normal(size=(3001, 4)) * 1.5 + 2.0
    plan = G.gaussian(d=4, n=3001, budget=dp.ZCDP(0.5), R=20.0, K=10.0)
    ref = plan.run({"X": X}, noise=dp.SeededNoise(2)).released
    got = plan.run({"X": da.from_array(X, chunks=(250, 4))}, noise=dp.SeededNoise(2), backend="dask").released
    for k in ref:
        _same(got[k], ref[k])


def test_a_failing_block_raises_a_clear_error_and_releases_nothing() -> None:
    def broken() -> np.ndarray:
        raise OSError("worker lost")

    good = da.from_array(np.ones((100, 3)), chunks=(50, 3))
    bad = da.from_delayed(dask.delayed(broken)(), shape=(50, 3), dtype=float)
    plan = _mean_plan(150)
    with pytest.raises(ExecutionError, match=r"dask computation failed \(OSError\).*Nothing was released"):
        plan.run({"X": da.concatenate([good, bad])}, noise=dp.SeededNoise(0), backend="dask")


def test_a_failed_run_keeps_its_budget_reservation(tmp_path: Any) -> None:
    from fractions import Fraction

    from dpflow.budget import BudgetStore

    def broken() -> np.ndarray:
        raise ConnectionError("worker lost")

    store = BudgetStore(tmp_path / "budget.sqlite")
    store.open("d", dp.ZCDP(1))
    bad = da.concatenate([da.from_array(np.ones((100, 3)), chunks=(50, 3)),
                          da.from_delayed(dask.delayed(broken)(), shape=(50, 3), dtype=float)])
    with pytest.raises(ExecutionError):
        dp.run(_mean_plan(150), {"X": bad}, backend="dask", budget_store=store, dataset="d")
    assert store.status("d").spent == Fraction(1, 2)  # data was read: the reservation stays counted


def test_unknown_backend_and_unknown_lengths_are_refused() -> None:
    plan = _mean_plan(10)
    with pytest.raises(ValueError, match="unknown backend 'spark'"):
        plan.run({"X": np.zeros((10, 3))}, backend="spark")
    unknown = da.from_array(np.zeros((10, 3)), chunks=(5, 3))[da.from_array(np.ones(10, bool), chunks=5)]
    with pytest.raises(dp.DataError, match="number of rows is unknown"):
        plan.run({"X": unknown}, backend="dask", noise=dp.SeededNoise(0))


def test_the_report_records_backend_chunking_and_workers() -> None:
    res = _mean_plan(300).run({"X": np.zeros((300, 3))}, backend=DaskBackend(chunk_rows=100),
                              noise=dp.SeededNoise(0))
    run = res.report.to_data()["run"]
    assert run["backend"] == "dask"
    s = run["backend_settings"]
    assert s["blocks"] == {"X": {"count": 3, "largest": 100}} and s["workers"] >= 1 and "100 rows" in s["chunking"]
    assert "workers:" in res.report.to_markdown()


def test_a_local_cluster_gives_the_same_release() -> None:
    distributed = pytest.importorskip("distributed")
    X = np.random.default_rng(6).normal(size=(1000, 3))
    plan = _mean_plan(1000)
    ref = plan.run({"X": X}, noise=dp.SeededNoise(3)).released
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as c, \
            distributed.Client(c) as client:
        res = plan.run({"X": X}, noise=dp.SeededNoise(3), backend=DaskBackend(client, chunk_rows=128))
    assert res.report.to_data()["run"]["backend_settings"]["workers"] == 2
    for k in ref:
        _same(res.released[k], ref[k])
    assert not math.isnan(float(np.asarray(res.released["m"])[0]))


def _die() -> np.ndarray:
    os._exit(1)  # the worker process dies while computing this block


@pytest.mark.slow
def test_a_worker_killed_mid_run_gives_a_clear_error_and_no_release() -> None:
    distributed = pytest.importorskip("distributed")
    good = da.from_array(np.ones((100, 3)), chunks=(50, 3))
    bad = da.from_delayed(dask.delayed(_die)(), shape=(50, 3), dtype=float)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                     dashboard_address=None) as c, distributed.Client(c) as client:
        with pytest.raises(ExecutionError, match=r"KilledWorker.*Nothing was released"):
            _mean_plan(150).run({"X": da.concatenate([good, bad])}, noise=dp.SeededNoise(0),
                                backend=DaskBackend(client))


def _no_gather(monkeypatch: Any) -> None:
    def refuse(self: Any, *a: Any, **k: Any) -> Any:
        raise AssertionError("rows gathered to the driver with np.asarray")

    monkeypatch.setattr(da.Array, "__array__", refuse)


def test_bin_counts_and_peel_never_gather_rows(monkeypatch: Any) -> None:
    """BinCounts counts each block on its worker (``key_counts``) and Peel reads only the reduced mean: neither
    turns the dask rows into a driver-side array, and both release what numpy releases under the same noise."""
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.normal(size=997) * 3, [np.nan, np.inf, -np.inf, 1e300]])[:, None]
    b = dp.PlanBuilder(budget=dp.ApproxZCDP(1, "1/1000000"))
    h = N.StabilityHistogram(delta="1/10000000")(N.BinCounts(width=0.5, shift=0.1)(b.source("X", dp.Reals(), n=1001)))
    hist = b.build(h=h)
    from dpflow.estimators.sparse import sparse_mean

    V = rng.normal(size=(1001, 20)) + np.r_[5.0, -4.0, np.zeros(18)]
    peel = sparse_mean(d=20, n=1001, s=2, budget=dp.ZCDP(1), radius=10.0)
    refs = [(p, D, p.run({"X": D}, noise=dp.SeededNoise(4)).released) for p, D in ((hist, x), (peel, V))]
    _no_gather(monkeypatch)
    for plan, D, ref in refs:
        got = plan.run({"X": da.from_array(D, chunks=(64, D.shape[1]))}, noise=dp.SeededNoise(4),
                       backend=DaskBackend()).released
        assert set(got) == set(ref)
        for k in ref:
            _same(got[k], ref[k])
    assert len(refs[0][2]["h"][0]) > 3  # bins were released (the comparison is not of two empty releases)


def test_key_counts_merge_blocks_exactly(monkeypatch: Any) -> None:
    from dpflow.interpreter import numpy_backend
    from dpflow.interpreter.numpy_backend import MappedRows, NumpyBackend

    monkeypatch.setattr(numpy_backend, "BLOCK_BYTES", 800)  # numpy's lazy rows in blocks of 100 rows too

    keys = np.random.default_rng(6).integers(-50, 50, size=(5000, 1))
    want = np.unique(keys, return_counts=True)
    for backend, X in ((DaskBackend(), da.from_array(keys, chunks=(37, 1))),
                       (NumpyBackend(), MappedRows(keys, ((lambda a: a, {}),)))):
        uk, counts = backend.key_counts(X, lambda a: a[:, 0])
        np.testing.assert_array_equal(uk, want[0])
        np.testing.assert_array_equal(counts, want[1])


# ---------------------------------------------------------------- declared columns: matched by name on dask too

COLUMNS = ["age", "bmi", dp.Category("sex", ["F", "M"]), "bp"]


def _columns_plan(n: int, columns: Any = tuple(COLUMNS)) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    X = b.source("X", columns=list(columns), n=n)
    return b.build(m=N.GaussianMech()(N.Mean()(N.Clip(box=(0.0, 200.0))(X))))


def _table(n: int = 2000) -> Any:
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(11)
    # scales far apart (a swap of two columns moves the release by far more than its noise), a column the plan
    # does not declare, and a missing category value
    return pd.DataFrame({"ssn_last4": rng.integers(0, 10_000, n).astype(float), "bp": rng.uniform(100, 180, n),
                         "sex": rng.choice(np.array(["F", "M", None], dtype=object), n),
                         "bmi": rng.uniform(15, 40, n), "age": rng.uniform(1, 9, n)})


def _dask_sources(frame: Any, tmp_path: Any) -> dict[str, Any]:
    dd = pytest.importorskip("dask.dataframe")
    pytest.importorskip("pyarrow")
    frame.to_parquet(tmp_path / "t.parquet")
    frame.to_csv(tmp_path / "t.csv", index=False)
    return {"pandas": frame, "dask frame": dd.from_pandas(frame, npartitions=3),
            "parquet": read_table(tmp_path / "t.parquet", list(frame.columns)),
            "csv": read_table(tmp_path / "t.csv", list(frame.columns))}


def test_declared_columns_are_read_by_name_on_dask_as_on_numpy(tmp_path: Any) -> None:
    """The frame's columns in another order than the declaration (and an undeclared column first), a
    Category among them: every dask source releases what numpy releases under the same seed."""
    frame = _table()
    plan = _columns_plan(len(frame))
    ref = plan.run({"X": frame}, noise=dp.SeededNoise(5)).released["m"]
    assert abs(ref[0] - frame["age"].mean()) < 1.0 and abs(ref[1] - frame["bmi"].mean()) < 1.0  # by name
    for label, src in _dask_sources(frame, tmp_path).items():
        got = plan.run({"X": src}, noise=dp.SeededNoise(5), backend=DaskBackend(chunk_rows=64)).released["m"]
        np.testing.assert_allclose(got, ref, rtol=1e-9, err_msg=label)


def test_a_missing_or_text_column_is_refused_on_dask_before_reading_nothing_charged(tmp_path: Any) -> None:
    """A declared column the frame lacks (the classic: a sum of ``ssn_last4`` released as "age"): the numpy
    error, on every dask source, before the budget store is told that data is read (the reservation is given
    back).  A text column declared numeric is not refused (its type can depend on its values: a CSV reader
    infers it): its values go through the table policy (numeric text parsed, other text missing), on dask as
    on numpy."""
    from dpflow.budget import BudgetStore

    frame = _table()
    store = BudgetStore(tmp_path / "budget.sqlite")
    store.open("d", dp.ZCDP(1))
    numeric = frame[["ssn_last4", "bmi", "bp"]]  # as wide as the declaration, but no "age"
    for broken, columns, match in ((numeric, ["age", "bmi", "bp"], r"no column\(s\) \['age'\]"),
                                   (frame.drop(columns=["age"]), COLUMNS, r"no column\(s\) \['age'\]")):
        plan = _columns_plan(len(broken), columns)
        with pytest.raises(dp.DataError, match=match):
            plan.run({"X": broken}, noise=dp.SeededNoise(0))
        for label, src in _dask_sources(broken, tmp_path).items():
            with pytest.raises(dp.DataError, match=match):
                dp.run(plan, {"X": src}, backend="dask", budget_store=store, dataset="d")
            status = store.status("d")
            assert status.spent == 0 and not status.pending, label
    text = frame.assign(bmi=frame["sex"])
    plan = _columns_plan(len(text), COLUMNS)
    ref = plan.run({"X": text}, noise=dp.SeededNoise(0)).released
    for label, src in _dask_sources(text, tmp_path).items():
        got = plan.run({"X": src}, noise=dp.SeededNoise(0), backend="dask").released
        for k in ref:
            np.testing.assert_allclose(got[k], ref[k], rtol=1e-9, err_msg=label)


def test_arrays_with_declared_columns_are_encoded_on_dask(tmp_path: Any) -> None:
    """An array's declared columns are positional (one raw column each, a Category holding codes): numpy
    arrays, memory maps and dask arrays on dask release what numpy releases; a wrong width is refused."""
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    X = b.source("X", columns=["x", dp.Category("g", [0, 1, 2])], n=300)
    plan = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(box=(0.0, 10.0))(X))))
    rng = np.random.default_rng(2)
    A = np.column_stack([rng.uniform(0, 10, 300), rng.integers(0, 4, 300).astype(float)])
    ref = plan.run({"X": A}, noise=dp.SeededNoise(1)).released["m"]
    np.save(tmp_path / "a.npy", A)
    for src in (A, np.load(tmp_path / "a.npy", mmap_mode="r"), tmp_path / "a.npy", da.from_array(A, chunks=(70, 2))):
        got = plan.run({"X": src}, noise=dp.SeededNoise(1), backend=DaskBackend(chunk_rows=50)).released["m"]
        np.testing.assert_allclose(got, ref, rtol=1e-9)
    for src in (A[:, :1], da.from_array(np.zeros((300, 3)), chunks=(70, 3))):
        with pytest.raises(dp.DataError, match=r"declares 2 columns \['x', 'g'\], got an array of shape \(300, "):
            plan.run({"X": src}, noise=dp.SeededNoise(1), backend="dask")


def test_a_table_that_fails_to_parse_is_charged_as_read(tmp_path: Any) -> None:
    """A text value in a later block of a numeric CSV column makes dask's parser fail while the row counts are
    read (whether it fails depends on the values): an engine failure after data was read, so the reservation
    stays counted, as any engine failure's does (no free probe of the values)."""
    from fractions import Fraction

    from dpflow.budget import BudgetStore

    dd = pytest.importorskip("dask.dataframe")
    lines = ["age,bmi,bp"] + [f"{i % 9},{20 + i % 7},{120 + i % 11}" for i in range(400)]
    lines[-3] = "abc,21,121"
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    store = BudgetStore(tmp_path / "budget.sqlite")
    store.open("d", dp.ZCDP(2))
    plan = _columns_plan(400, ["age", "bmi", "bp"])
    with pytest.raises(ExecutionError, match="dask computation failed"):
        dp.run(plan, {"X": dd.read_csv(tmp_path / "t.csv", blocksize=1000)}, backend="dask", budget_store=store,
               dataset="d")
    assert store.status("d").spent == Fraction(1)
