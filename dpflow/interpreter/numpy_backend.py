"""The embedded backend: whole-array numpy operations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


class NumpyBackend:
    """Rows are an in-memory ``(n, d)`` array; every operation is vectorised.

    >>> NumpyBackend().histogram(np.array([0.5, 1.5, 9.0]), np.array([0.0, 1.0, 2.0]))
    array([1., 2.])
    """

    name = "numpy"

    def row_map(self, X: Any, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        return fn(np.asarray(X))

    def tree_sum(self, X: Any) -> np.ndarray:
        out: np.ndarray = np.asarray(X, dtype=float).sum(axis=0)  # numpy's pairwise summation
        return out

    def gram(self, X: Any) -> np.ndarray:
        A = np.asarray(X, dtype=float)
        out: np.ndarray = A.T @ A
        return out

    def histogram(self, values: Any, edges: np.ndarray) -> np.ndarray:
        v = np.asarray(values, dtype=float)
        k = len(edges) - 1
        idx = np.clip(np.searchsorted(edges, v, side="right") - 1, 0, k - 1)
        idx[np.isnan(v)] = 0
        return np.bincount(idx, minlength=k).astype(float)

    def nrows(self, X: Any) -> int:
        return int(np.shape(X)[0])
