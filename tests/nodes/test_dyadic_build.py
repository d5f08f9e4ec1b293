"""``DyadicTable.build`` (one sort, each level's pairs filtered from the next one's) against a per-level reference
that sorts nothing clever: the multi-point intervals of level j are the repeated values of ``x >> j``, their count
groups the sorted ``(rank << 32 | i)``.  Both paths (merged-pair runs at low levels, breaks at high levels) and their
switch are exercised; so are both ways the exponential mechanism counts a level's intervals by count."""

from __future__ import annotations

import numpy as np
import pytest

from dpflow.nodes.dyadic import DyadicTable, _rank_counts


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
        values = np.unique(count)
        rank = np.searchsorted(values, count)
        assert lev.values.tolist() == values.tolist() and lev.rank.tolist() == rank.tolist(), j
        assert lev.keys.tolist() == np.sort((rank.astype(np.int64) << 32) | np.arange(len(count))).tolist(), j


@pytest.mark.parametrize("k", range(6))
def test_rank_counts_by_histogram_and_by_search_agree_with_brute_force(k: int) -> None:
    """``_rank_counts`` (per count value and range of intervals, as the exponential mechanism groups them) is the
    brute-force count on both of its ways: narrow ranges (a histogram of their ranks) and wide ones (binary search
    in the keys), empty and single ranges included."""
    x, N = _samples()[k]
    t = DyadicTable.build(x, N)
    rng = np.random.default_rng(k)
    for lev in t.levels:
        K = len(lev.count)
        for width in (0, 1, 3, K):
            cuts = np.sort(rng.integers(0, K + 1, 2 * int(rng.integers(1, 6))))
            i0, i1 = cuts[::2], np.minimum(cuts[::2] + width, cuts[1::2])
            g = _rank_counts(lev, i0, i1)
            want = [[int(np.count_nonzero(lev.count[a:b] == v)) for a, b in zip(i0, i1, strict=True)]
                    for v in lev.values]
            assert g.tolist() == want or (len(lev.values) == 0 and g.size == 0)
