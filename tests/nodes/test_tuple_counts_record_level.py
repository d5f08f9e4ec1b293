"""Review of the tuple histogram's replace-one sensitivity (l1 2k, l2 sqrt(2k), linf 1; docs/assurance.md,
"reviewed derivations") at the level of records, not group rows: a replaced record changes one block of
consecutive rows (``SubsampleAggregate``), hence one k-means group, hence at most k cells lose 1 and k gain 1.
Adversarial replacements (outliers, NaN, infinities, a copy of another block's row, the block's own centre)
never exceed it, and the worst case is reached from records too."""

from __future__ import annotations

import math

import numpy as np

from dpflow.nodes.blocks import block_statistic
from dpflow.nodes.tuples import group_cell_keys, tuple_points


def _cells(X: np.ndarray, size: int, k: int, seed: int) -> dict[int, int]:
    G = block_statistic(X, size, "kmeans", k=k)
    uk, c = np.unique(group_cell_keys(tuple_points(G, k), seed, 4.0), return_counts=True)
    return dict(zip(uk.tolist(), c.tolist(), strict=True))


def test_adversarial_replaced_records_move_at_most_2k_cells_by_one() -> None:
    rng = np.random.default_rng(1)
    k, size, w = 3, 9, 2
    worst = 0.0
    specials = [np.array([1e6, -1e6]), np.array([np.nan, 0.0]), np.array([np.inf, -np.inf]), np.array([0.0, 0.0])]
    for trial in range(120):
        centres = rng.normal(size=(k, w)) * 10
        X = centres[rng.integers(k, size=8 * size)] + rng.normal(size=(8 * size, w)) * 0.3
        Y = X.copy()
        i = int(rng.integers(8 * size))
        choice = trial % 6
        Y[i] = specials[choice] if choice < 4 else X[int(rng.integers(8 * size))] if choice == 4 else (
            rng.normal(size=w) * 50)
        a, b = _cells(X, size, k, trial), _cells(Y, size, k, trial)
        diff = np.array([a.get(key, 0) - b.get(key, 0) for key in set(a) | set(b)], dtype=float)
        assert np.abs(diff).max(initial=0) <= 1 and np.abs(diff).sum() <= 2 * k
        assert float(np.linalg.norm(diff)) <= math.sqrt(2 * k) + 1e-12
        worst = max(worst, float(np.abs(diff).sum()))
    assert worst == 2 * k  # some replaced record moves its group to k new cells
