"""The embedded backend: whole-array numpy operations, with row maps fused into the reductions that read them."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np

from dpflow.blas import blas_controller, one_blas_thread

BLOCK_BYTES = 1 << 23
"""Rows of a fused row map are evaluated in blocks of about this many input bytes (8 MiB: in cache-sized
pieces, so a chain such as ``Mean(Clip(Precondition(X)))`` never holds an ``(n, d)`` temporary)."""

WORKERS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
"""Threads that evaluate the blocks of a pass at once (numpy and BLAS release the GIL), each with a
one-thread BLAS; set it to 1 for passes on the calling thread.  Threads are used only when ``threadpoolctl``
(the ``fast`` extra) holds BLAS to one thread meanwhile: otherwise each block's BLAS call would start
threads of its own and oversubscribe the cores."""

T = TypeVar("T")


def in_threads(work: Callable[[slice], T], slices: list[slice]) -> list[T]:
    """``work`` of each slice, in slice order: on up to :data:`WORKERS` threads with a one-thread BLAS, or
    one after the other (one slice, ``WORKERS = 1``, or no ``threadpoolctl``).  Every slice's value is
    computed the same way either way, so results never depend on the threads or their scheduling.

    >>> in_threads(lambda s: s.start, [slice(0, 2), slice(2, 4)])
    [0, 2]
    """
    k = min(WORKERS, len(slices))
    limit = one_blas_thread() if k > 1 else None
    if limit is None:
        return [work(s) for s in slices]
    err = errstate()  # numpy's error state is per thread: the workers take the caller's

    def in_state(s: slice) -> T:
        with np.errstate(**err):  # type: ignore[arg-type]
            return work(s)

    with limit, ThreadPoolExecutor(k, thread_name_prefix="dpflow-block") as pool:
        return list(pool.map(in_state, slices))


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

    def __init__(self, base: np.ndarray, fns: tuple[tuple[Callable[[np.ndarray], np.ndarray], dict[str, str]], ...],
                 overwrites: tuple[Callable[[np.ndarray], np.ndarray] | None, ...] | None = None):
        self.base = base
        self.fns = fns
        """Each map with the floating-point error state it was given under (restored when it runs)."""
        self.overwrites = (None,) * len(fns) if overwrites is None else overwrites
        """Each map's variant that may write into its argument (``row_map(..., overwrite=)``), or None."""
        self._cols: tuple[int, ...] | None = None

    def apply(self, rows: np.ndarray) -> np.ndarray:
        """The maps applied to some rows of the base.

        A map's ``overwrite`` variant is called instead of it on an array that no one else reads: one that an
        earlier map of this chain made, sharing no memory with that map's argument (by the protocol's contract
        a map returns a new array or a view of its argument), or a view of such an array.  Never on the base.
        """
        out, owned = rows, False
        for (fn, err), alt in zip(self.fns, self.overwrites, strict=True):
            with np.errstate(**err):  # type: ignore[arg-type]
                new = alt(out) if owned and alt is not None else fn(out)
            owned = owned or not np.may_share_memory(new, out)
            out = new
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

    def slices(self) -> list[slice]:
        """The base rows of each block (an even number of rows per block; one, possibly empty, block when
        n = 0)."""
        n = int(self.base.shape[0])
        width = max(1, int(np.prod(self.base.shape[1:], dtype=np.int64)) * self.base.itemsize)
        step = max(2, (BLOCK_BYTES // width) // 2 * 2)
        return [slice(i, i + step) for i in range(0, max(n, 1), step)]

    def map_blocks(self, fn: Callable[[np.ndarray], T]) -> list[T]:
        """``fn`` of each block of mapped rows, in block order (the blocks on threads: :func:`in_threads`).

        >>> MappedRows(np.arange(4.0).reshape(2, 2), ((lambda Z: Z + 1, {}),)).map_blocks(np.sum)
        [np.float64(10.0)]
        """
        return in_threads(lambda s: fn(self.apply(self.base[s])), self.slices())

    def compute(self) -> np.ndarray:
        """The mapped rows as one array, written block by block on threads (:func:`in_threads`) in the first
        block's memory order: no full-size temporary of an intermediate map, and no BLAS call on several
        threads."""
        slices = self.slices()
        first = np.asarray(self.apply(self.base[slices[0]]))
        if len(slices) == 1:
            return first
        fortran = first.ndim > 1 and first.flags.f_contiguous and not first.flags.c_contiguous
        out: np.ndarray = np.empty((int(self.base.shape[0]), *first.shape[1:]), dtype=first.dtype,
                                   order="F" if fortran else "C")
        out[slices[0]] = first

        def put(s: slice) -> None:
            out[s] = self.apply(self.base[s])

        in_threads(put, slices[1:])
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.compute()
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


def column_sums(B: Any) -> np.ndarray:
    """The column sums of one block of rows, as floats (numpy's pairwise summation)."""
    out: np.ndarray = np.asarray(B, dtype=float).sum(axis=0)
    return out


def add_exact(*parts: np.ndarray) -> np.ndarray:
    """The sum of integer partials (object arrays of Python ints): exact, so in any order."""
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def block_gram(B: Any) -> np.ndarray:
    """``B^T B`` of one block of rows, as floats (one operand transposed: numpy calls BLAS syrk)."""
    A = np.asarray(B, dtype=float)
    out: np.ndarray = A.T @ A
    return out


class NumpyBackend:
    """Rows are an in-memory ``(n, d)`` array; every operation is vectorised.

    ``row_map`` of more than one block of rows is lazy (a :class:`MappedRows`); the reductions evaluate a
    chain of maps in blocks, so peak memory stays near the data's own size.

    >>> NumpyBackend().histogram(np.array([0.5, 1.5, 9.0]), np.array([0.0, 1.0, 2.0]))
    array([1., 2.])
    """

    name = "numpy"

    def row_map(self, X: Any, fn: Callable[[np.ndarray], np.ndarray],
                overwrite: Callable[[np.ndarray], np.ndarray] | None = None) -> Any:
        if isinstance(X, MappedRows):
            return MappedRows(X.base, (*X.fns, (fn, errstate())), (*X.overwrites, overwrite))
        A = np.asarray(X)
        if A.nbytes <= BLOCK_BYTES:  # one block: computed now (no fixed cost for small releases)
            return fn(A)
        return MappedRows(A, ((fn, errstate()),), (overwrite,))

    def sorted_values(self, X: Any, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        out: np.ndarray = np.sort(np.asarray(self.row_map(X, fn)))
        return out

    def pair_rows(self, X: Any) -> np.ndarray:
        A = np.asarray(X)
        m = A.shape[0] // 2
        return A[: 2 * m].reshape(m, 2 * A.shape[1])  # a view of C-ordered rows

    def settings(self) -> dict[str, Any]:
        threads = WORKERS if blas_controller() is not None else 1
        return {"backend": self.name, "workers": 1, "threads": threads,
                "chunking": f"in memory; row maps fused into reductions in blocks of {BLOCK_BYTES >> 20} MiB, "
                            f"on {threads} thread{'s' if threads > 1 else ''}"}

    def source(self, node: Any, raw: Any, node_id: str, relation: Any) -> np.ndarray:
        out: np.ndarray = node.prepare(raw, node_id, relation)
        return out

    def persist(self, X: Any) -> Any:
        """``X`` computed (a value several nodes read is computed once)."""
        return X.compute() if isinstance(X, MappedRows) else X

    def tree_sum(self, X: Any) -> np.ndarray:
        if isinstance(X, MappedRows):
            parts = X.map_blocks(column_sums)
            total: np.ndarray = np.sum(parts, axis=0) if len(parts) > 1 else parts[0]
            return total
        return column_sums(X)

    def gram(self, X: Any) -> np.ndarray:
        if isinstance(X, MappedRows):
            parts = X.map_blocks(block_gram)
            total = parts[0]
            for G in parts[1:]:  # in block order: the same sum on any number of threads
                total = total + G
            return total
        return block_gram(X)

    def exact_sum(self, X: Any, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """``fn`` of each block of rows (of the fused maps, or of the array itself: no full-size temporary),
        the integer partials added exactly."""
        rows = X if isinstance(X, MappedRows) else MappedRows(np.asarray(X), ())
        return add_exact(*rows.map_blocks(fn))

    def histogram(self, values: Any, edges: np.ndarray) -> np.ndarray:
        if not isinstance(values, MappedRows):
            return bin_counts(values, edges)
        parts = values.map_blocks(lambda B: bin_counts(B, edges))
        counts = np.zeros(len(edges) - 1)
        for c in parts:
            counts += c
        return counts

    def key_counts(self, X: Any, fn: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(X, MappedRows):
            return merge_counts(*X.map_blocks(lambda B: unique_counts(fn(np.asarray(B)))))
        return unique_counts(fn(np.asarray(X)))

    def nrows(self, X: Any) -> int:
        return int(np.shape(X)[0])
