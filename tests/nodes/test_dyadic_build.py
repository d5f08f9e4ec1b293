"""``DyadicTable.build`` (one sort, every level from one byte scan) against a per-level reference that
sorts nothing clever: the multi-point intervals of level j are the repeated values of ``x >> j``.
Both paths (merged-pair runs at low levels, breaks at high levels) and their switch are exercised."""

from __future__ import annotations

import numpy as np
import pytest

from dpflow.nodes.dyadic import DyadicTable


def _reference(x: np.ndarray, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    q, start, count = np.unique(np.sort(x) >> j, return_index=True, return_counts=True)
    multi = count >= 2
    return q[multi], start[multi], count[multi]


def _samples() -> list[tuple[np.ndarray, int]]:
    rng = np.random.default_rng(7)
    N = 10**18
    clustered = np.concatenate([c + rng.integers(0, 2**k, 300) for c, k in ((5 * 10**17, 10), (10**12, 30), (0, 3))])
    return [
        (rng.integers(0, N, 5000, dtype=np.int64), N),  # sparse low levels, dense high levels
        (clustered.astype(np.int64), N),  # runs at every scale
        (np.repeat(rng.integers(0, 2**40, 50), 40).astype(np.int64), 2**40),  # ties: merged at level 0
        (np.array([7], np.int64), 2**20),  # one point: no pair
        (np.array([3, 3], np.int64), 4),  # n - 1 = 1 pair
        (np.arange(1000, dtype=np.int64), 1024),  # every pair merges at level 1 or above
    ]


@pytest.mark.parametrize("k", range(6))
def test_every_level_matches_the_reference(k: int) -> None:
    x, N = _samples()[k]
    t = DyadicTable.build(x, N)
    assert (t.x == np.sort(x)).all() and len(t.levels) == t.L
    for j, lev in enumerate(t.levels):
        q, start, count = _reference(x, j)
        assert lev.q.tolist() == q.tolist(), j
        assert lev.start.tolist() == start.tolist(), j
        assert lev.count.tolist() == count.tolist(), j
        assert lev.cum.tolist() == [0, *np.cumsum(count).tolist()], j
