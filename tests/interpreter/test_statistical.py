"""Slow statistical checks: the realised noise has exactly the distribution the ledger certifies.

Run with ``pytest -m slow`` (CI runs them).  Seeds are fixed; the bands are 99.9% bands, so a
wrongly calibrated mechanism (a scale off by 10%) fails them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import dpflow as dp
from dpflow import nodes as N

pytestmark = pytest.mark.slow

TRIALS, D, NROWS = 400, 5, 1000


def _noise_samples(mechanism: dp.nodes.Mechanism, budget: dp.privacy.Measure, key: str) -> tuple[np.ndarray, float]:
    b = dp.PlanBuilder(budget=budget)
    X = b.source("X", dp.Vectors(d=D), n=NROWS)
    plan = b.build(out=mechanism(N.Mean()(N.Clip(box=(-1.0, 1.0))(X))))
    data = {"X": np.full((NROWS, D), 0.25)}
    noise = dp.SeededNoise(12345)
    draws, scales = [], set()
    for _ in range(TRIALS):
        res = plan.run(data, noise=noise)
        draws.append(res.released["out"] - 0.25)
        scales.add(res.report.execution.facts["gaussian_mech_3" if key == "sigma" else "laplace_mech_3"][0][key])
    assert len(scales) == 1
    return np.concatenate(draws), scales.pop()


def test_gaussian_noise_variance_matches_the_certified_sigma() -> None:
    z, sigma = _noise_samples(N.GaussianMech(), dp.ZCDP(0.5), "sigma")
    delta2 = 2.0 * math.sqrt(D) / NROWS                        # box [-1, 1]^5: diameter 2 sqrt(5)
    assert math.isclose(sigma, delta2 / math.sqrt(2 * 0.5), rel_tol=1e-9)
    k = z.size
    lo, hi = stats.chi2.ppf([0.0005, 0.9995], k) / k
    assert lo <= np.mean(z**2) / sigma**2 <= hi
    assert stats.kstest(z / sigma, "norm").pvalue > 0.001


def test_laplace_noise_scale_matches_the_certified_scale() -> None:
    z, b = _noise_samples(N.LaplaceMech(), dp.PureDP(1.0), "scale")
    assert math.isclose(b, 2.0 * D / NROWS / 1.0, rel_tol=1e-9)  # l1 diameter of the box over n, eps = 1
    # |Laplace(b)| is Exponential(b): 2 k mean / b is chi-square with 2k degrees of freedom
    k = z.size
    lo, hi = stats.chi2.ppf([0.0005, 0.9995], 2 * k) / (2 * k)
    assert lo <= np.mean(np.abs(z)) / b <= hi
    assert stats.kstest(z / b, "laplace").pvalue > 0.001
