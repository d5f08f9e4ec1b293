"""Karwa-Vadhan (ITCS 2018) private range finding and clipped means, in zCDP form (gaussian.md 2.1-2.4).

Range finding is a histogram over public bins of width sigma released by the Gaussian
mechanism (replace-one l2 sensitivity sqrt(2): a replaced record moves one unit between
two bins, DHS 2015 Thm 3 / gaussian.md 2.1 [REC] zCDP adaptation); its noisy argmax is
free post-processing.  The mean is then clipped to a box around the found bin and
released with Gaussian noise.  Builder-level functions; plans are in ``__init__``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpflow import nodes as N
from dpflow.errors import DomainError
from dpflow.estimators.gaussian import steps
from dpflow.handles import Released, Rows, Sensitive
from dpflow.references import Reference, spec

REF = Reference("Karwa-Vadhan 2018 Lemma 2.3 (histogram range finding) + clipped mean; zCDP form", "gaussian.md", "2.4")
MAX_BINS = 200_001


def kv_edges(R: float, sigma: float) -> np.ndarray:
    """Bins ``((j - 1/2) sigma, (j + 1/2) sigma]``, ``j = -ceil(R/sigma) .. ceil(R/sigma)`` (gaussian.md 2.2).

    >>> kv_edges(2.0, 1.0).tolist()
    [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5]
    """
    r = math.ceil(R / sigma)
    if 2 * r + 1 > MAX_BINS:
        raise DomainError("kv_range", f"R/sigma = {R / sigma:.3g} needs {2 * r + 1} bins (more than {MAX_BINS})",
                          "declare a tighter mean bound R or a larger sigma")
    return (np.arange(-r, r + 2, dtype=float) - 0.5) * sigma


def clip_width(n: int, beta: float) -> float:
    """Half-width in units of sigma of the clipping interval around the found bin:
    ``2 + sqrt(2 ln(4 n / beta))`` covers all n points w.p. 1 - beta once the bin is within
    2 sigma of the mean (gaussian.md 2.2 [REC]).

    >>> round(clip_width(1000, 0.1), 4)
    6.6036
    """
    return 2.0 + math.sqrt(2.0 * math.log(4.0 * n / beta))


def coordinate_centres(X: Sensitive[Rows], d: int, sigma: float, R: float, weight: float) -> Released[Any]:
    """Per coordinate, the centre of the largest noisy bin (width sigma, range [-R, R]): d histograms,
    each a Gaussian mechanism of ``weight``."""
    b = X.builder
    edges = kv_edges(R, sigma)
    hists = [N.GaussianMech(weight=weight)(N.Histogram(edges=edges)(N.Columns(keep=[j])(X))) for j in range(d)]
    e = N.param(b, "bin_edges", edges, f"width sigma={sigma:g}, |mu_j| <= R={R:g} ({spec('gaussian.md', '2.2')})")
    return N.Apply(fn=steps.bin_centres, shape=(d,))(e, *hists)


def coordinate_mean(
    X: Sensitive[Rows], n: int, d: int, sigma: float, R: float, weight_hist: float, weight_mean: float,
    beta: float,
) -> Released[Any]:
    """NaivePME (KLSU 2019 sec. 3.5 = KV coordinate-wise): per-coordinate ranges (``weight_hist`` in total),
    then every coordinate clipped to ``centre_j +- w sigma`` and one Gaussian release of the mean
    (``weight_mean``; l2 sensitivity ``2 w sigma sqrt(d) / n``)."""
    b = X.builder
    centres = coordinate_centres(X, d, sigma, R, weight_hist / d)
    w = sigma * clip_width(n, beta / d)
    eye = N.param(b, "identity", np.eye(d), "shift by the released centres")
    N.param(b, "clip_half_width", w, f"sigma * (2 + sqrt(2 ln(4 n d / beta))), beta={beta:g}")
    shifted = N.Precondition(matrix=eye, center=centres)(X)
    m = N.GaussianMech(weight=weight_mean)(N.Mean()(N.Clip(box=(-w, w))(shifted)))
    return N.Apply(fn=steps.add, shape=(d,))(m, centres)


def log_edges(sigma_min: float, sigma_max: float) -> np.ndarray:
    """Positive edges ``2^k0 .. 2^K`` with ``k0 = floor(log2 sigma_min) - 2``, ``K = ceil(log2 sigma_max) + 2``
    (gaussian.md 2.3 [CODE: Du et al.'s replication of KV]).

    >>> log_edges(1.0, 2.0).tolist()
    [0.25, 0.5, 1.0, 2.0, 4.0, 8.0]
    """
    k0 = math.floor(math.log2(sigma_min)) - 2
    k1 = math.ceil(math.log2(sigma_max)) + 2
    out: np.ndarray = np.exp2(np.arange(k0, k1 + 1, dtype=float))
    return out


def sigma_range(X: Sensitive[Rows], sigma_min: float, sigma_max: float, weight: float) -> Released[Any]:
    """KV unknown-variance step on one-dimensional rows: a histogram of the pair differences
    ``(x_2i - x_2i+1)/sqrt(2)`` (each record in one pair: sensitivity as for n//2 rows) over
    log-scale bins, released by the Gaussian mechanism; sigma-hat = 4 x the lower edge of the
    largest |y| bin, clamped to ``[sigma_min, 4 sigma_max]``."""
    b = X.builder
    pos = log_edges(sigma_min, sigma_max)
    edges = np.concatenate([-pos[::-1], pos])
    h = N.GaussianMech(weight=weight)(N.Histogram(edges=edges)(N.PairDifferences()(X)))
    p = N.param(b, "log_edges", pos, f"2^k for sigma in [{sigma_min:g}, {sigma_max:g}] ({spec('gaussian.md', '2.3')})")
    lo = N.param(b, "sigma_bounds", [sigma_min, 4.0 * sigma_max], "declared range of sigma")
    raw = N.Apply(fn=steps.sigma_from_log_hist, shape=())(h, p)
    return N.Apply(fn=steps.clamp, shape=())(raw, lo)


def univariate_mean(
    X: Sensitive[Rows], n: int, R: float, sigma: float | None, sigma_bounds: tuple[float, float] | None,
    beta: float,
) -> Released[Any]:
    """KVMean on one-dimensional rows (gaussian.md 2.4): known sigma: range (1/2) + mean (1/2);
    unknown sigma in ``sigma_bounds``: sigma (1/3) + range (1/3) + mean (1/3), in units of the
    released sigma-hat."""
    b = X.builder
    if sigma is not None:
        return coordinate_mean(X, n, 1, sigma, R, 1.0, 1.0, beta)
    assert sigma_bounds is not None
    s_hat = sigma_range(X, sigma_bounds[0], sigma_bounds[1], 1.0)
    Z = N.Precondition(matrix=N.Apply(fn=steps.inverse_scalar_matrix, shape=(1, 1))(s_hat))(X)
    centre = coordinate_centres(Z, 1, 1.0, R / sigma_bounds[0], 1.0)
    w = clip_width(n, beta)
    one = N.param(b, "identity", np.eye(1), "shift by the released centre")
    m = N.GaussianMech(weight=1.0)(N.Mean()(N.Clip(box=(-w, w))(N.Precondition(matrix=one, center=centre)(Z))))
    return N.Apply(fn=steps.kv_unscale, shape=(1,))(m, centre, s_hat)
