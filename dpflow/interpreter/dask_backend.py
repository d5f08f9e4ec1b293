"""The dask backend: rows as a dask array split by rows (blocks on the workers), every row map a
``map_blocks``, every reduction a per-block partial (sum, Gram matrix, bin counts) added in a fixed tree on
the workers, so the driver receives one statistic; noise is added once, on the driver, by the mechanisms.

Needs the ``dask`` extra (``pip install 'dpflow[dask]'``).  Sources may be dask arrays, numpy arrays or
``.npy`` memory maps (read block by block), dask or pandas DataFrames, or Parquet / CSV files read through
``dask.dataframe`` by column name (:func:`read_table`).  A source's declared ``columns`` are read as on numpy
(:func:`dpflow.tables.to_rows`: by name from a DataFrame, by position from an array, categories encoded),
with the same refusals from public facts (a DataFrame's column names and dtypes, an array's shape) before
any value is read.

Sums over rows are the same as numpy's up to the order of floating-point additions; counts, histograms
and order statistics (``sorted_values``: each block sorted on its worker, the sorted runs merged on the
driver) and the occupied bins of ``BinCounts`` (``key_counts``: each block counted on its worker, the counts
merged in a tree) are identical under the same seeded noise.  Mechanisms (``Peel`` too) read only the reduced
statistic, never rows.

>>> import numpy as np, dpflow as dp
>>> from dpflow import nodes as N
>>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
>>> X = b.source("X", dp.Vectors(d=2), n=1000)
>>> plan = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))
>>> data = np.full((1000, 2), 0.25)
>>> d = plan.run(data, backend="dask", noise=dp.SeededNoise(0)).released["m"]
>>> bool(np.allclose(d, plan.run(data, noise=dp.SeededNoise(0)).released["m"]))
True
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dpflow.errors import DataError, DpflowError, ExecutionError
from dpflow.interpreter.numpy_backend import (
    NumpyBackend,
    add_exact,
    bin_counts,
    block_gram,
    column_sums,
    errstate,
    merge_counts,
    unique_counts,
)
from dpflow.tables import Category, Column, check_array_columns, encoded_names, is_frame, to_rows

try:
    import dask
    import dask.array as da
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError("the dask backend needs the dask extra: pip install 'dpflow[dask]'") from e

CHUNK_BYTES = 1 << 26
"""Rows per block when dpflow splits an in-memory array or memory map: about 64 MiB of rows."""


def read_table(path: str | os.PathLike[str], columns: Sequence[str]) -> Any:
    """The named ``columns`` of a Parquet (``.parquet``, ``.pq`` or a directory) or CSV file, as a lazy
    dask DataFrame (pass it as a source's data; the file is read on the workers, block by block).

    >>> import pandas as pd, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0], "name": ["x", "y"]}).to_csv(p, index=False)
    >>> list(read_table(p, ["b", "a"]).columns)
    ['b', 'a']
    """
    import dask.dataframe as dd

    name = os.fspath(path)
    cols = list(columns)
    if name.endswith(".csv"):
        return dd.read_csv(name, usecols=cols)[cols]
    return dd.read_parquet(name, columns=cols)[cols]


def _call(block: np.ndarray, fn: Callable[[np.ndarray], np.ndarray], err: dict[str, str]) -> np.ndarray:
    with np.errstate(**err):  # type: ignore[arg-type]
        return fn(block)


FAN_IN = 8
"""Partials added per node of the reduction tree."""


def _add(*parts: np.ndarray) -> np.ndarray:
    out = np.array(parts[0], dtype=float)
    for p in parts[1:]:
        out += p
    return out


def _sorted_run(block: np.ndarray, fn: Callable[[np.ndarray], np.ndarray], err: dict[str, str]) -> np.ndarray:
    return np.sort(np.asarray(_call(block, fn, err)).reshape(-1))


def _block_counts(block: np.ndarray, fn: Callable[[np.ndarray], np.ndarray],
                  err: dict[str, str]) -> tuple[np.ndarray, np.ndarray]:
    return unique_counts(_call(np.asarray(block), fn, err))


class DaskBackend:
    """Row work on a dask array, on the threads of this process or on a ``dask.distributed`` cluster.

    ``client``: a ``distributed.Client`` (default: dask's current scheduler, which is the client made
    last in this process, if any).  ``chunk_rows``: rows per block when dpflow splits an in-memory array
    or memory map (default about 64 MiB); dask arrays and DataFrames keep their own blocks.

    >>> DaskBackend().settings()["chunking"]
    'rows split into blocks of about 64 MiB (dask inputs keep their own blocks)'
    """

    name = "dask"

    def __init__(self, client: Any = None, chunk_rows: int | None = None) -> None:
        if chunk_rows is not None and chunk_rows < 2:
            raise ValueError(f"chunk_rows must be at least 2, got {chunk_rows}")
        self.client = client
        self.chunk_rows = chunk_rows
        self._chunks: dict[str, tuple[int, ...]] = {}

    @classmethod
    def connect(cls, address: str, chunk_rows: int | None = None) -> DaskBackend:
        """A backend on the ``dask.distributed`` scheduler at ``address`` (e.g. ``tcp://10.0.0.5:8786``)."""
        from distributed import Client

        return cls(Client(address), chunk_rows)

    # ------------------------------------------------------------------ run facts for the report

    def workers(self) -> int:
        """Number of workers (of the client's cluster; threads of the local scheduler without one)."""
        if self.client is not None:
            return len(self.client.scheduler_info().get("workers", {}))
        return int(dask.config.get("num_workers", None) or os.cpu_count() or 1)

    def settings(self) -> dict[str, Any]:
        """Backend, chunking and workers, as the report records them."""
        rows = f"{self.chunk_rows} rows" if self.chunk_rows else "about 64 MiB"
        out: dict[str, Any] = {
            "backend": self.name,
            "scheduler": "distributed" if self.client is not None else str(dask.config.get("scheduler", "threads")),
            "workers": self.workers(),
            "chunking": f"rows split into blocks of {rows} (dask inputs keep their own blocks)",
        }
        if self._chunks:
            out["blocks"] = {name: {"count": len(c), "largest": max(c, default=0)} for name, c in self._chunks.items()}
        return out

    # ------------------------------------------------------------------ sources

    def _rows(self, raw: Any, columns: Sequence[Column] | None, node_id: str) -> Any:
        """``raw`` as a dask array of rows, the source's declared ``columns`` read and encoded as on numpy
        (:func:`dpflow.tables.to_rows`, block by block on the workers); a schema error (a missing column, a
        text column declared numeric, a wrong width) is raised from public facts (names, dtypes, shapes)."""
        if isinstance(raw, (str, os.PathLike)) and os.fspath(raw).endswith(".npy"):
            raw = np.load(os.fspath(raw), mmap_mode="r")
        if hasattr(raw, "to_dask_array"):  # a dask DataFrame or Series
            return self._frame_rows(raw, columns, node_id)
        if not isinstance(raw, (da.Array, np.memmap)):  # in memory (pandas, arrays, lists): exactly as numpy
            raw, columns = to_rows(raw, columns, node_id), None
        if isinstance(raw, da.Array):
            X = raw
        else:
            arr = raw if isinstance(raw, np.ndarray) else np.asarray(raw)  # a memmap stays a memmap
            width = max(1, int(np.prod(arr.shape[1:], dtype=np.int64)) * max(arr.itemsize, 1))
            rows = self.chunk_rows or max(2, CHUNK_BYTES // width)
            X = da.from_array(arr, chunks=(rows, *arr.shape[1:]) if arr.ndim else -1)
        if columns is None:
            return X
        check_array_columns(X.shape, columns, node_id)
        X = (X.reshape(-1, 1) if X.ndim == 1 else X).rechunk({1: -1})
        return X.map_blocks(to_rows, columns, node_id, dtype=float,
                            chunks=(X.chunks[0], (len(encoded_names(columns)),)))

    def _frame_rows(self, frame: Any, columns: Sequence[Column] | None, node_id: str) -> Any:
        """A dask DataFrame's (or Series') rows: the schema checked on its public ``_meta`` (an empty pandas
        frame with the columns' dtypes) as numpy checks a pandas frame, then each partition through
        :func:`dpflow.tables.to_rows` on its worker."""
        meta = frame._meta
        width = to_rows(meta, columns, node_id).shape[1]  # the public schema: names and dtypes
        if columns is not None and is_frame(meta):  # read only the declared columns
            labels = {str(c): c for c in meta.columns}
            frame = frame[[labels[c.name if isinstance(c, Category) else c] for c in columns]]
        parts = frame.to_delayed()
        lengths = self.compute([dask.delayed(len)(p) for p in parts], node_id)  # the engine reads the table
        blocks = [da.from_delayed(dask.delayed(to_rows)(p, columns, node_id), shape=(int(k), width), dtype=float)
                  for p, k in zip(parts, lengths, strict=True)]
        return da.concatenate(blocks) if blocks else da.zeros((0, width))

    def source(self, node: Any, raw: Any, node_id: str, relation: Any) -> Any:
        X = self._rows(raw, node.columns, node_id)
        if X.ndim and any(np.isnan(c) for c in X.chunks[0]):
            raise DataError(node_id, "the source's number of rows is unknown to dask",
                            "pass a dask DataFrame (its lengths are computed) or an array with known chunks")
        X = node.checked(X, node_id, relation)
        X = X.rechunk({1: -1})  # whole rows in each block
        meta = node.policy(np.zeros((1, X.shape[1]), dtype=X.dtype))
        self._chunks[node.name] = tuple(int(c) for c in X.chunks[0])
        return X.map_blocks(node.policy, dtype=meta.dtype)

    # ------------------------------------------------------------------ the protocol

    def row_map(self, X: Any, fn: Callable[[np.ndarray], np.ndarray],
                overwrite: Callable[[np.ndarray], np.ndarray] | None = None) -> Any:
        """``fn`` on every block (``overwrite`` is not used: a dask block may be read by other tasks)."""
        if not isinstance(X, da.Array):
            X = da.from_array(np.asarray(X), chunks=(self.chunk_rows or 1 << 16, *np.shape(X)[1:]))
        err = errstate()
        with np.errstate(all="ignore"):
            meta = np.asarray(fn(np.zeros((1, *X.shape[1:]), dtype=X.dtype)))  # the shape of one mapped row
        if meta.ndim == 1:
            return X.map_blocks(_call, fn, err, dtype=meta.dtype, drop_axis=list(range(1, X.ndim)),
                                chunks=(X.chunks[0],))
        return X.map_blocks(_call, fn, err, dtype=meta.dtype, chunks=(X.chunks[0], *((s,) for s in meta.shape[1:])))

    def _reduce(self, X: Any, fn: Callable[..., np.ndarray], *args: Any,
                add: Callable[..., np.ndarray] = _add) -> np.ndarray:
        """``fn`` of every block, added by ``add`` in a fixed tree of fan-in :data:`FAN_IN` on the workers
        (the same order of additions for the same blocks); the driver receives one partial."""
        if not isinstance(X, da.Array):
            return fn(np.asarray(X), *args)
        parts = [dask.delayed(fn)(b, *args) for b in X.to_delayed().ravel()]
        while len(parts) > 1:
            parts = [dask.delayed(add)(*parts[i:i + FAN_IN]) for i in range(0, len(parts), FAN_IN)]
        out: np.ndarray = self.compute(parts[0])
        return out

    def tree_sum(self, X: Any) -> np.ndarray:
        return self._reduce(X, column_sums)

    def gram(self, X: Any) -> np.ndarray:
        return self._reduce(X, block_gram)

    def exact_sum(self, X: Any, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """``fn`` of every block on its worker, the integer partials added exactly in the same tree."""
        return self._reduce(X, fn, add=add_exact)

    def histogram(self, values: Any, edges: np.ndarray) -> np.ndarray:
        return self._reduce(values, bin_counts, np.asarray(edges, dtype=float))

    def sorted_values(self, X: Any, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        if not isinstance(X, da.Array):
            return NumpyBackend().sorted_values(X, fn)
        err = errstate()
        runs = self.compute([dask.delayed(_sorted_run)(b, fn, err) for b in X.to_delayed().ravel()])
        out: np.ndarray = np.sort(np.concatenate(runs), kind="stable")  # a merge of sorted runs
        return out

    def key_counts(self, X: Any, fn: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Each block's occupied keys counted on its worker, the counts merged in a fixed tree of fan-in
        :data:`FAN_IN` on the workers (integer counts: the same as numpy's, exactly)."""
        if not isinstance(X, da.Array):
            return NumpyBackend().key_counts(X, fn)
        err = errstate()
        parts = [dask.delayed(_block_counts)(b, fn, err) for b in X.to_delayed().ravel()]
        while len(parts) > 1:
            parts = [dask.delayed(merge_counts)(*parts[i:i + FAN_IN]) for i in range(0, len(parts), FAN_IN)]
        out: tuple[np.ndarray, np.ndarray] = self.compute(parts[0])
        return out

    def pair_rows(self, X: Any) -> Any:
        if not isinstance(X, da.Array):
            return NumpyBackend().pair_rows(X)
        m, d = X.shape[0] // 2, X.shape[1]
        step = max(2, max(X.chunks[0], default=2) // 2 * 2)
        Y = X[: 2 * m].rechunk({0: step})  # even blocks: no pair straddles two
        return Y.map_blocks(lambda b: b.reshape(-1, 2 * d), dtype=Y.dtype,
                            chunks=(tuple(c // 2 for c in Y.chunks[0]), (2 * d,)))

    def nrows(self, X: Any) -> int:
        return int(np.shape(X)[0])

    def persist(self, X: Any) -> Any:
        if not isinstance(X, da.Array):
            return X
        try:
            return self.client.persist(X) if self.client is not None else X.persist()
        except DpflowError:
            raise
        except Exception as e:
            raise _failure(e) from e

    def compute(self, x: Any, node: str = "dask") -> Any:
        """Compute a dask collection (or a list of delayed values); an engine failure becomes an
        :class:`dpflow.errors.ExecutionError` (naming ``node``; nothing is released)."""
        try:
            if self.client is not None:
                return self.client.gather(self.client.compute(x))
            return dask.compute(x)[0]
        except DpflowError:
            raise
        except Exception as e:
            raise _failure(e, node) from e


def _failure(e: Exception, node: str = "dask") -> ExecutionError:
    """The engine's failure ``e`` as an :class:`ExecutionError` naming its type only, with ``e`` as its cause
    (the run drops the cause unless debugging: the declared policy in ExecutionError's docstring)."""
    return ExecutionError(node, f"the dask computation failed ({type(e).__name__})",
                          "check the cluster (workers, memory) and run the plan again; with a budget store "
                          "the failed run's reservation stays counted")
