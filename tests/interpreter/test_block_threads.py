"""The numpy backend evaluates the blocks of a pass on threads with a one-thread BLAS (``in_threads``): the
results are bit-for-bit those of the blocks one after the other, blocks run on worker threads only when BLAS
can be held to one thread, the limit is lifted afterwards, and a map's error reaches the caller."""

from __future__ import annotations

import threading
import warnings
from typing import Any

import numpy as np
import pytest

from dpflow.interpreter import numpy_backend
from dpflow.interpreter.numpy_backend import MappedRows, NumpyBackend, in_threads

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_threads() -> int:
    return max(i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas")


def _passes(X: np.ndarray, workers: int, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    monkeypatch.setattr(numpy_backend, "WORKERS", workers)
    be = NumpyBackend()
    A = np.random.default_rng(1).normal(size=(X.shape[1], X.shape[1]))
    M = be.row_map(be.row_map(X, lambda Z: (A @ Z.T).T), lambda Z: Z / (1.0 + np.abs(Z)))
    keys = be.key_counts(M, lambda Z: np.floor(Z[:, 0] * 8).astype(np.int64))
    col = be.row_map(M, lambda Z: Z[:, 1])
    return [be.tree_sum(M), be.gram(M), be.histogram(col, np.linspace(-1, 1, 9)), *keys, be.persist(M)]


def test_threaded_passes_equal_sequential_ones_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(numpy_backend, "BLOCK_BYTES", 1 << 12)  # blocks of 50 rows: 61 blocks
    X = np.random.default_rng(0).normal(size=(3001, 10)) * 5
    one, many = _passes(X, 1, monkeypatch), _passes(X, 4, monkeypatch)
    for a, b in zip(one, many, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    # and the blocks add up to the whole
    np.testing.assert_allclose(many[1], np.asarray(many[-1]).T @ many[-1], rtol=1e-12)


def test_blocks_run_on_threads_with_one_blas_thread_then_the_limit_is_lifted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(numpy_backend, "WORKERS", 2)
    before = _blas_threads()
    seen = in_threads(lambda s: (threading.current_thread().name, _blas_threads()), [slice(i, i + 1) for i in range(8)])
    assert all(name.startswith("dpflow-block") and k == 1 for name, k in seen), seen
    assert _blas_threads() == before


@pytest.mark.parametrize("why", ["one worker", "no threadpoolctl", "one block"])
def test_blocks_stay_on_the_calling_thread(why: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(numpy_backend, "WORKERS", 1 if why == "one worker" else 2)
    if why == "no threadpoolctl":
        monkeypatch.setattr(numpy_backend, "one_blas_thread", lambda: None)
    slices = [slice(0, 1)] if why == "one block" else [slice(i, i + 1) for i in range(4)]
    assert set(in_threads(lambda s: threading.current_thread().name, slices)) == {threading.current_thread().name}


def test_compute_keeps_the_maps_memory_order_and_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(numpy_backend, "BLOCK_BYTES", 1 << 10)
    X = np.random.default_rng(2).normal(size=(1000, 6))
    A = np.random.default_rng(3).normal(size=(4, 6))
    M = MappedRows(X, ((lambda Z: Z + 1.0, {}), (lambda Z: (A @ Z.T).T, {})))
    out = M.compute()
    assert out.shape == (1000, 4) and out.flags.f_contiguous
    np.testing.assert_allclose(out, (X + 1.0) @ A.T, rtol=1e-12, atol=1e-12)


def test_an_error_in_a_block_reaches_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(numpy_backend, "BLOCK_BYTES", 1 << 8)
    X = np.ones((400, 2))
    X[-1] = 1e308
    with np.errstate(over="raise"):
        M = NumpyBackend().row_map(X, lambda Z: Z * 10.0)
    with pytest.raises(FloatingPointError):  # the map's own error state, in a worker thread
        NumpyBackend().tree_sum(M)


@pytest.mark.parametrize("workers", [1, 2])
def test_reductions_on_threads_run_under_the_callers_error_state(workers: int,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(numpy_backend, "BLOCK_BYTES", 1 << 8)
    monkeypatch.setattr(numpy_backend, "WORKERS", workers)
    X = np.ones((400, 2))
    X[-2:] = 1e308  # the last block's column sums overflow
    with np.errstate(all="ignore"):
        M = NumpyBackend().row_map(X, lambda Z: Z * 1.0)
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        NumpyBackend().tree_sum(M)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isinf(NumpyBackend().tree_sum(M)[0])
