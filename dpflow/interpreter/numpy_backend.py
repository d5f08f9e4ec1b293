"""The embedded backend: whole-array numpy operations, with row maps fused into the reductions that read them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

BLOCK_BYTES = 1 << 23
"""Rows of a fused row map are evaluated in blocks of about this many input bytes (8 MiB: in cache-sized
pieces, so a chain such as ``Mean(Clip(Precondition(X)))`` never holds an ``(n, d)`` temporary)."""


class MappedRows:
    """Rows ``fn_k(...fn_1(base))`` not yet computed: what :meth:`NumpyBackend.row_map` returns.

    A reduction (:meth:`NumpyBackend.tree_sum`, ``gram``, ``histogram``) evaluates the maps block by
    block; anything else that needs the array (``np.asarray``) computes it whole, once per call.  The
    interpreter calls :meth:`NumpyBackend.persist` on a value read by more than one node, so a shared
    intermediate is computed once.  Every ``fn`` maps rows to rows (row ``i`` of the output depends
    only on row ``i`` of the input), which is the backend protocol's contract for ``row_map``.

    >>> R = MappedRows(np.arange(6.0).reshape(3, 2), ((lambda Z: 2 * Z, {}),))
    >>> R.shape, NumpyBackend().tree_sum(R)
    ((3, 2), array([12., 18.]))
    """

    def __init__(self, base: np.ndarray, fns: tuple[tuple[Callable[[np.ndarray], np.ndarray], dict[str, str]], ...]):
        self.base = base
        self.fns = fns
        """Each map with the floating-point error state it was given under (restored when it runs)."""
        self._cols: tuple[int, ...] | None = None

    def apply(self, rows: np.ndarray) -> np.ndarray:
        """The maps applied to some rows of the base."""
        out = rows
        for fn, err in self.fns:
            with np.errstate(**err):  # type: ignore[arg-type]
                out = fn(out)
        return out

    @property
    def shape(self) -> tuple[int, ...]:
        if self._cols is None:  # the trailing shape, from one row (the maps are row-wise)
            with np.errstate(all="ignore"):
                self._cols = tuple(np.shape(self.apply(self.base[:1])))[1:]
        return (int(self.base.shape[0]), *self._cols)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def blocks(self) -> Any:
        """The mapped rows, block by block (an even number of rows per block)."""
        n = int(self.base.shape[0])
        width = max(1, int(np.prod(self.base.shape[1:], dtype=np.int64)) * self.base.itemsize)
        step = max(2, (BLOCK_BYTES // width) // 2 * 2)
        for i in range(0, max(n, 1), step):  # one (possibly empty) block when n = 0
            yield self.apply(self.base[i:i + step])

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = np.asarray(self.apply(self.base))
        return out if dtype is None else out.astype(dtype, copy=False)

    def __len__(self) -> int:
        return self.shape[0]


def errstate() -> dict[str, str]:
    """numpy's current floating-point error state (a lazy row map restores it when it runs)."""
    return {k: str(v) for k, v in np.geterr().items()}


def bin_counts(values: Any, edges: np.ndarray) -> np.ndarray:
    """Counts of ``values`` over the bin ``edges``; out-of-range values go to the end bins, NaN to the first."""
    v = np.asarray(values, dtype=float).reshape(-1)
    k = len(edges) - 1
    idx = np.clip(np.searchsorted(edges, v, side="right") - 1, 0, k - 1)
    idx[np.isnan(v)] = 0
    return np.bincount(idx, minlength=k).astype(float)


def unique_counts(keys: Any) -> tuple[np.ndarray, np.ndarray]:
    """The distinct int64 ``keys``, sorted, and how many times each occurs.

    >>> unique_counts(np.array([3, -1, 3]))
    (array([-1,  3]), array([1, 2]))
    """
    uk, counts = np.unique(np.asarray(keys, dtype=np.int64).reshape(-1), return_counts=True)
    return uk, counts.astype(np.int64)


def merge_counts(*parts: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Several ``(keys, counts)`` of :func:`unique_counts` merged into one (counts of a key added; exact).

    >>> merge_counts((np.array([1, 4]), np.array([2, 1])), (np.array([4]), np.array([5])))
    (array([1, 4]), array([2, 6]))
    """
    keys = np.concatenate([p[0] for p in parts])
    uk, inv = np.unique(keys, return_inverse=True)
    counts = np.zeros(uk.shape[0], dtype=np.int64)
    np.add.at(counts, inv.reshape(-1), np.concatenate([p[1] for p in parts]))
    return uk, counts


class NumpyBackend:
    """Rows are an in-memory ``(n, d)`` array; every operation is vectorised.

    ``row_map`` of more than one block of rows is lazy (a :class:`MappedRows`); the reductions evaluate a
    chain of maps in blocks, so peak memory stays near the data's own size.

    >>> NumpyBackend().histogram(np.array([0.5, 1.5, 9.0]), np.array([0.0, 1.0, 2.0]))
    array([1., 2.])
    """

    name = "numpy"

    def row_map(self, X: Any, fn: Callable[[np.ndarray], np.ndarray]) -> Any:
        if isinstance(X, MappedRows):
            return MappedRows(X.base, (*X.fns, (fn, errstate())))
        A = np.asarray(X)
        if A.nbytes <= BLOCK_BYTES:  # one block: computed now (no fixed cost for small releases)
            return fn(A)
        return MappedRows(A, ((fn, errstate()),))

    def sorted_values(self, X: Any, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        out: np.ndarray = np.sort(np.asarray(self.row_map(X, fn)))
        return out

    def pair_rows(self, X: Any) -> np.ndarray:
        A = np.asarray(X)
        m = A.shape[0] // 2
        return A[: 2 * m].reshape(m, 2 * A.shape[1])  # a view of C-ordered rows

    def settings(self) -> dict[str, Any]:
        return {"backend": self.name, "workers": 1,
                "chunking": f"in memory; row maps fused into reductions in blocks of {BLOCK_BYTES >> 20} MiB"}

    def source(self, node: Any, raw: Any, node_id: str, relation: Any) -> np.ndarray:
        out: np.ndarray = node.prepare(raw, node_id, relation)
        return out

    def persist(self, X: Any) -> Any:
        """``X`` computed (a value several nodes read is computed once)."""
        return np.asarray(X) if isinstance(X, MappedRows) else X

    def tree_sum(self, X: Any) -> np.ndarray:
        if isinstance(X, MappedRows):
            parts = [np.asarray(B, dtype=float).sum(axis=0) for B in X.blocks()]
            total: np.ndarray = np.sum(parts, axis=0) if len(parts) > 1 else parts[0]
            return total
        out: np.ndarray = np.asarray(X, dtype=float).sum(axis=0)  # numpy's pairwise summation
        return out

    def gram(self, X: Any) -> np.ndarray:
        if isinstance(X, MappedRows):
            total: np.ndarray | None = None
            for B in X.blocks():
                A = np.asarray(B, dtype=float)
                total = A.T @ A if total is None else total + A.T @ A
            assert total is not None
            return total
        A = np.asarray(X, dtype=float)
        out: np.ndarray = A.T @ A
        return out

    def histogram(self, values: Any, edges: np.ndarray) -> np.ndarray:
        blocks = values.blocks() if isinstance(values, MappedRows) else [values]
        counts = np.zeros(len(edges) - 1)
        for B in blocks:
            counts += bin_counts(B, edges)
        return counts

    def key_counts(self, X: Any, fn: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(X, MappedRows):
            return merge_counts(*(unique_counts(fn(np.asarray(B))) for B in X.blocks()))
        return unique_counts(fn(np.asarray(X)))

    def nrows(self, X: Any) -> int:
        return int(np.shape(X)[0])
