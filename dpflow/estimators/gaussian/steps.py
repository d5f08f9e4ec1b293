"""Post-processing steps of the Gaussian estimators (free: Dwork-Roth 2014 Prop. 2.1).

Every function here takes released values and public parameters only; they are
module-level so that plans using them round-trip through JSON (``Apply`` stores
``module:qualname``).  Nothing here may raise on a released value: non-finite or
degenerate inputs give a defined (if useless) output.

>>> import numpy as np
>>> inv_sqrt_psd(np.diag([4.0, 1.0]))
array([[0.5, 0. ],
       [0. , 1. ]])
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpflow.blas import serial_blas

_TINY = 1e-300


def _finite(a: Any) -> np.ndarray:
    out: np.ndarray = np.nan_to_num(np.asarray(a, dtype=float), nan=0.0, posinf=1e300, neginf=-1e300)
    return out


def pick(values: Any, k: Any) -> float:
    """Entry ``k`` (a released round index) of a public vector.

    >>> pick([1.0, 2.0, 3.0], 1.0)
    2.0
    """
    v = np.ravel(np.asarray(values, dtype=float))
    return float(v[min(max(int(k), 0), v.size - 1)])


def inv_sqrt_psd(S: Any, floor: float = 0.0) -> np.ndarray:
    """``(S + floor I)^{-1/2}`` of a symmetric matrix via ``eigh``; eigenvalues are clipped at a tiny
    positive value first so the result is always defined."""
    S = _finite(S)
    with serial_blas():
        w, V = np.linalg.eigh((S + S.T) / 2.0)
    w = np.maximum(w + floor, 1e-12 * max(1.0, float(np.max(np.abs(w)))) + _TINY)
    out: np.ndarray = (V / np.sqrt(w)) @ V.T
    return out


# ------------------------------------------------------------------------------------------ CoinPress mean


def mvm_clip(r: Any, gamma: Any) -> float:
    """CoinPress mean step clip radius ``min(sqrt(r^2 + 6 r + gamma^2), r + gamma)`` (coin-press
    ``multivariate_mean_step``; gaussian.md 1.1 [CODE]).

    >>> round(mvm_clip(10 * 50 ** 0.5, 9.4636), 4)
    74.2551
    """
    r, g = max(float(r), 0.0), float(gamma)
    if not math.isfinite(r):
        return math.sqrt(float(np.finfo(float).max))
    return float(min(math.sqrt(r * r + 6.0 * r + g * g), r + g))


def mvm_next_radius(clip: Any, noise_scale: Any, gamma: Any, n: Any) -> float:
    """Next CoinPress ball radius ``gamma * sqrt(1/n + sigma_k^2)`` with ``sigma_k = (2 clip / n) *
    noise_scale``: the l2 sensitivity of the round's clipped mean times the round's certified sigma per
    unit sensitivity (``NoiseScale``; gaussian.md 1.1 [CODE]).

    >>> round(mvm_next_radius(1.0, 1.0, 2.0, 4.0), 6)
    1.414214
    """
    sigma = 2.0 * float(clip) / float(n) * float(noise_scale)
    return float(gamma) * math.sqrt(1.0 / float(n) + sigma * sigma)


def mvm_next_radius_laplace(clip: Any, noise_scale: Any, gamma: Any, n: Any, d: Any) -> float:
    """Next CoinPress ball radius of a pure-DP (Laplace) round: ``gamma * sqrt(1/n + s^2)`` with
    ``s = 2 b``, ``b = (2 clip sqrt(d) / n) * noise_scale`` the per-coordinate Laplace scale (the l1
    sensitivity of the round's clipped mean times its certified b per unit sensitivity): ``s`` is the
    Laplace standard deviation ``sqrt(2) b`` times ``sqrt(2)`` for its heavier tail.  Accuracy only.

    >>> round(mvm_next_radius_laplace(1.0, 1.0, 2.0, 4.0, 1.0), 6)
    2.236068
    """
    b = 2.0 * float(clip) * math.sqrt(float(d)) / float(n) * float(noise_scale)
    return float(gamma) * math.sqrt(1.0 / float(n) + 4.0 * b * b)


def mvm_radius(clip: Any, factors: Any, k: Any, gamma: Any, n: Any) -> float:
    """Next CoinPress ball radius with ``sigma_k = clip * factors[k]``: the form of plans saved before
    :func:`mvm_next_radius` (their public ``sigma_per_clip`` factors), kept so that they still run."""
    sigma = float(clip) * pick(factors, k)
    return float(gamma) * math.sqrt(1.0 / float(n) + sigma * sigma)


def mat_vec(A: Any, c: Any) -> np.ndarray:
    """``A c``."""
    out: np.ndarray = _finite(A) @ _finite(c)
    return out


def scaled_norm(A: Any, R: Any) -> float:
    """``||A||_2 * R``: a ball of radius R maps into one of this radius under ``x -> A x``."""
    return float(np.linalg.norm(_finite(A), 2)) * float(R)


def into_ball(mean: Any, radius: Any) -> np.ndarray:
    """``mean`` projected onto the public ball ``||mu||_2 <= radius`` (a mean with a public bound is clamped
    into it: post-processing); a non-finite mean maps to the ball's centre 0.

    >>> into_ball(np.array([3.0, 4.0]), 5.0).tolist(), into_ball(np.array([6.0, 8.0]), 5.0).tolist()
    ([3.0, 4.0], [3.0, 4.0])
    >>> into_ball([np.nan, 1.0], 2.0).tolist()
    [0.0, 0.0]
    """
    m = np.asarray(mean, dtype=float).reshape(-1)
    r = max(float(radius), 0.0)
    if not np.all(np.isfinite(m)):
        return np.zeros_like(m)
    norm = float(np.linalg.norm(m))
    out: np.ndarray = m if norm <= r else m * (r / norm)
    return out


def unmap_mean(A: Any, c: Any) -> np.ndarray:
    """``A^{-1} c`` (least squares when A is singular): the mean back in the original coordinates."""
    with serial_blas():
        out: np.ndarray = np.linalg.lstsq(_finite(A), _finite(c), rcond=None)[0]
    return out


# ------------------------------------------------------------------------------------------ CoinPress covariance


def mvc_update(Z: Any, A: Any, eta: Any) -> np.ndarray:
    """Next preconditioner ``(Z + eta I)^{-1/2} A`` (gaussian.md 1.3, corrected: a true PSD projection
    of Z happens before, and rows are mapped as ``x -> A x``)."""
    out: np.ndarray = inv_sqrt_psd(Z, float(eta)) @ _finite(A)
    return out


def laplace_noise_edge(b: float, d: int) -> float:
    """The spectral norm of a symmetric d x d matrix whose upper-triangle entries (the diagonal included) are
    i.i.d. Laplace(b), at the edge of its semicircle: ``2 sigma sqrt(d)`` with the Laplace standard deviation
    ``sigma = sqrt(2) b`` (Wigner; Bandeira-van Handel 2016: the norm concentrates there).  Measured medians
    per unit b (2,000 draws): 0.71, 4.75, 7.82, 12.0, 19.6 at d = 1, 5, 10, 20, 50; this 2.83, 6.32, 8.94,
    12.6, 20.0.  Accuracy only (:func:`dpflow.estimators.gaussian.coinpress.laplace_cov_schedule`).

    >>> round(laplace_noise_edge(1.0, 5), 4)
    6.3246
    """
    return 2.0 * math.sqrt(2.0 * d) * float(b)


def unwhiten(A: Any, Z: Any) -> np.ndarray:
    """``A^{-1} Z A^{-T}`` (gaussian.md 1.3: the last Z with the A that produced it), symmetrised."""
    A, Z = _finite(A), _finite(Z)
    with serial_blas():
        left = np.linalg.lstsq(A, Z, rcond=None)[0]
        out = np.linalg.lstsq(A, left.T, rcond=None)[0]
    sym: np.ndarray = (out + out.T) / 2.0
    return sym


def cov_from_state(state: Any) -> np.ndarray:
    """The covariance estimate from a CoinPress covariance state ``(A_next, A_used, Z)``."""
    return unwhiten(state[1], state[2])


# ------------------------------------------------------------------------------------------ KLSU preconditioning


def weak_ppc_update(S: Any, A: Any, bounds: Any, k: Any) -> np.ndarray:
    """One WeakPPC round (gaussian.md 3.2 [RECON]): eigen-directions of the noisy second moment with
    eigenvalue >= K_k / 2 are scaled by 1/2; returns ``A_r A``."""
    S = _finite(S)
    half = pick(bounds, k) / 2.0
    w, V = np.linalg.eigh((S + S.T) / 2.0)
    big = V[:, w >= half]
    Ar = np.eye(S.shape[0]) - 0.5 * (big @ big.T)
    out: np.ndarray = Ar @ _finite(A)
    return out


# ------------------------------------------------------------------------------------------ Karwa-Vadhan ranges


def bin_centres(edges: Any, *hists: Any) -> np.ndarray:
    """For each noisy histogram, the midpoint of its largest bin (Karwa-Vadhan 2018 Lemma 2.3 range
    finding: the noisy argmax)."""
    e = np.asarray(edges, dtype=float)
    mids = (e[:-1] + e[1:]) / 2.0
    idx = [int(np.argmax(_finite(h))) for h in hists]
    out: np.ndarray = mids[idx]
    return out


def sigma_from_log_hist(hist: Any, log_edges: Any) -> float:
    """KV ``sigma`` range finding on pair differences (gaussian.md 2.3 [CODE: Du et al.]): the histogram
    is over symmetric edges ``-2^K..-2^k0, 2^k0..2^K``; mirrored bins are added, and the estimate is
    4 x the lower edge of the largest ``|y|`` bin (a conservative over-estimate)."""
    h = _finite(hist)
    pos = np.asarray(log_edges, dtype=float)  # 2^k0 .. 2^K (ascending)
    k = pos.size - 1  # bins [2^j, 2^(j+1)) on each side
    neg_bins = h[:k][::-1]  # [-2^(j+1), -2^j) mirrored to ascending |y|
    centre = h[k]  # (-2^k0, 2^k0): |y| below the lowest edge
    pos_bins = h[k + 1:]
    folded = np.concatenate([[centre], neg_bins + pos_bins])
    lower = np.concatenate([[pos[0] / 2.0], pos[:-1]])
    return float(4.0 * lower[int(np.argmax(folded))])


def inverse_scalar_matrix(s: Any) -> np.ndarray:
    """``[[1 / s]]`` (a 1x1 preconditioner); s is clipped to a tiny positive value."""
    return np.array([[1.0 / max(float(s), 1e-300)]])


def kv_unscale(m: Any, centre: Any, scale: Any) -> np.ndarray:
    """``scale * (centre + m)``: a mean found in centred, scaled units back in the original units."""
    out: np.ndarray = float(scale) * (_finite(centre) + _finite(m))
    return out


def add(a: Any, b: Any) -> np.ndarray:
    """``a + b``."""
    out: np.ndarray = _finite(a) + _finite(b)
    return out


def clamp(x: Any, bounds: Any) -> float:
    """``x`` clamped into ``[bounds[0], bounds[1]]`` (NaN goes to the upper bound).

    >>> clamp(7.0, [1.0, 4.0])
    4.0
    """
    lo, hi = (float(v) for v in np.ravel(bounds))
    v = float(x)
    return hi if math.isnan(v) else min(max(v, lo), hi)


def into_spectrum(C: Any, K: Any) -> np.ndarray:
    """A symmetric covariance estimate with its eigenvalues clipped into the public ``[0, K]`` (``Sigma <= K I`` is
    declared: post-processing into what is public); non-finite entries count as 0 (the released-matrix
    eigendecomposition of :class:`dpflow.nodes.PSDProject`).

    >>> into_spectrum([[5.0, 0.0], [0.0, -1.0]], 4.0).tolist()
    [[4.0, 0.0], [0.0, 0.0]]
    """
    from dpflow.nodes.postprocess import _eigh

    w, V = _eigh(C)
    out: np.ndarray = (V * np.clip(w, 0.0, float(K))) @ V.T
    return out


def diagonal_part(C: Any) -> np.ndarray:
    """The diagonal of a covariance estimate, each variance floored at 0 (PSD), the off-diagonal set to 0.

    >>> diagonal_part([[2.0, 1.0], [1.0, -0.5]]).tolist()
    [[2.0, 0.0], [0.0, 0.0]]
    """
    v = np.maximum(np.diag(_finite(C)), 0.0)
    out: np.ndarray = np.diag(v)
    return out
