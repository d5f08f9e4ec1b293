"""The one exponential-mechanism sampler: report noisy max with Gumbel noise.

Every node that samples an exponential mechanism (``Quantile``, ``DyadicExpMech``) computes its
candidates' log-weights ``log w_k`` (``epsilon u_k / (2 Delta_u)`` plus the log of a group size or a
gap length) and calls :func:`report_noisy_max`.  Adding independent standard Gumbel noise to each
log-weight and reporting the index of the maximum samples ``k`` with probability exactly
``w_k / sum_j w_j`` (the Gumbel-max trick: Gumbel 1954; Yellott 1977; Maddison-Tarlow-Minka 2014), so
the output is distributed as the exponential mechanism (McSherry-Talwar 2007 Thm 6; Durfee-Rogers 2019
for report-noisy-max with Gumbel noise).  Floating point: the Gumbel variates come from the noise
source (``NoiseSource.gumbel``) and are not claimed exact (docs/privacy.md).

Report noisy max with *Laplace* noise (``Peel``) is a different mechanism with its own proof.

>>> import numpy as np
>>> from dpflow.interpreter.noise import SeededNoise
>>> report_noisy_max(np.array([0.0, -np.inf, 50.0]), SeededNoise(0))
2
"""

from __future__ import annotations

import numpy as np

from dpflow.noise_protocol import NoiseSource

__all__ = ["report_noisy_max"]


def report_noisy_max(log_weights: np.ndarray, noise: NoiseSource) -> int | None:
    """The index of a draw from the distribution with weights ``exp(log_weights)`` (flattened), by
    Gumbel-max: ``argmax_k log_weights[k] + G_k`` with ``G_k`` standard Gumbel.

    Declared policy: a non-finite log-weight (``-inf``, ``+inf`` or NaN) gives its candidate weight 0;
    ``None`` when no candidate has positive weight.  One Gumbel variate is drawn per entry of
    ``log_weights``, before anything else, whatever the weights are.

    >>> from dpflow.interpreter.noise import SeededNoise
    >>> report_noisy_max(np.array([np.nan, np.inf, -np.inf]), SeededNoise(0)) is None
    True
    """
    lw = np.asarray(log_weights, dtype=float).ravel()
    g = noise.gumbel(lw.shape)
    keys = np.where(np.isfinite(lw), lw + g, -np.inf)
    keys = np.where(np.isnan(keys), -np.inf, keys)
    if not np.any(keys > -np.inf):
        return None
    return int(np.argmax(keys))
