"""Slow statistical check: the quantile mechanism's sampler draws gaps with exactly the exponential
mechanism's probabilities (chi-square against the exact distribution, fixed seeds)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import dpflow as dp
from dpflow import nodes as N
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.nodes.quantile import quantile_log_weights
from dpflow.planner.certify import certify


@pytest.mark.slow
def test_quantile_sampler_matches_the_exponential_mechanism() -> None:
    data = np.array([[0.3], [0.5], [0.55], [1.7], [2.0], [2.2], [3.9]])
    lo, hi, q, eps = 0.0, 4.0, 0.4, 2.0
    b = dp.PlanBuilder(budget=dp.PureDP(eps))
    X = b.source("X", dp.Reals(), n=len(data))
    cert = certify(b.build(v=N.Quantile(q=q)(N.OrderStatistics(lower=lo, upper=hi)(X))))
    framed = np.concatenate(([lo], np.sort(data[:, 0]), [hi]))
    logw = quantile_log_weights(framed, q, eps, 1.0)
    p = np.exp(logw - logw.max())
    p /= p.sum()
    draws = 6000
    noise = dp.SeededNoise(12345)
    outs = np.array([execute(cert, {"X": data}, noise, NumpyBackend()).released["v"] for _ in range(draws)])
    counts = np.bincount(np.searchsorted(framed, outs, side="right") - 1, minlength=len(p))[: len(p)]
    chi2 = float(((counts - draws * p) ** 2 / (draws * p)).sum())
    assert chi2 < stats.chi2.ppf(0.999, df=len(p) - 1)
    # inside a gap the output is uniform: positions relative to the widest gap
    k = int(np.argmax(np.diff(framed)))
    inside = outs[(outs >= framed[k]) & (outs < framed[k + 1])]
    rel = (inside - framed[k]) / (framed[k + 1] - framed[k])
    assert stats.kstest(rel, "uniform").pvalue > 1e-3
