"""Golden released values of the sampling nodes under seeded noise.

The exponential-mechanism samplers (``Quantile``, ``DyadicExpMech``) and the Gumbel and uniform
variates they draw are built from the noise source's Laplace draws.  These values were recorded on
main before the samplers were single-sourced (one ``gumbel``/``uniform``/``uniform_int`` on the noise
source, one ``report_noisy_max``), so a change to the draws, their order or the maps from Laplace
draws to Gumbel and uniform variates shows up here.  They also pin the stability histogram and the
data-driven truncation estimators that sit downstream of the quantile.

One deliberate change when the samplers were single-sourced: ``merr`` (``DyadicExpMech``) used to map
a Laplace draw L to a uniform through the Laplace CDF and to a Gumbel as ``-log(-log CDF(L))``, while
``Quantile`` used ``exp(-|L|)`` and ``-log |L|``.  One map had to go; the shared sampler keeps
Quantile's (so every quantile-based estimator is unchanged) and ``merr``'s values were re-recorded.
The Laplace draws themselves (count, scale, shape, order) are unchanged: with the old maps plugged
into the new code, ``merr`` reproduces its old values exactly.  Since issue 14 item 16 the released
CDF is projected onto valid CDFs (isotonic regression, clipped to [0, 1]): same knots, pooled values.

Issue 9 (exact noise everywhere): the ``exact=True`` entries of ``merr``, ``stability`` and ``truncated_mean``
were re-recorded when the exact samplers became the vectorised word samplers (other draws of the same laws)
and the stability histogram moved to the discrete Laplace under exact sources; every ``exact=False`` entry is
unchanged.
Since issue 16 (bounded range) a quantile's zCDP share rho buys epsilon = sqrt(8 rho) instead of sqrt(2 rho)
(the exponential mechanism is epsilon-bounded range, hence epsilon^2/8-zCDP): ``radius``'s ``r_rows``
(a weighted quantile under ``ZCDP(0.5)``) changed from 2.313259000743731 to 2.996875743303094, both
noise modes; ``r_free`` and the plans under pure budgets did not change.
Issue 9 (exact exponential mechanism): under exact sources ``Quantile`` releases a point of a 2^-k lattice of
its range and ``DyadicExpMech`` samples its groups, both by exact inversion of uniform words
(``dpflow.nodes.expmech.exact_choice``) instead of Gumbel-max: the ``exact=True`` entries of ``quantiles``,
``merr``, ``truncated_mean`` and ``radius`` were re-recorded (other draws of the same laws); every
``exact=False`` entry is unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.estimators.discrete import merr
from dpflow.estimators.truncation import private_radius, truncated_mean


def _flat(value: Any) -> list[Any]:
    if isinstance(value, tuple):
        return [v for part in value for v in _flat(part)]
    if value is None:
        return [None]
    return np.asarray(value).ravel().tolist()


def _quantiles() -> tuple[dp.Plan, dict[str, Any]]:
    b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    X = b.source("X", dp.Reals(), n=300)
    z = N.OrderStatistics(lower=-5.0, upper=5.0)(X)
    plan = b.build(median=N.Quantile(q=0.5)(z), q90=N.Quantile(q=0.9, weight=2.0)(z))
    return plan, {"X": np.random.default_rng(11).normal(size=(300, 1))}


def _merr() -> tuple[dp.Plan, dict[str, Any]]:
    x = np.random.default_rng(12).integers(0, 2**20, 400) // 7 * 7
    return merr(N=2**20, n=400, budget=dp.PureDP(1.0), T=3), {"X": x}


def _stability() -> tuple[dp.Plan, dict[str, Any]]:
    b = dp.PlanBuilder(budget=dp.ApproxZCDP(0.5, 1e-5))
    X = b.source("X", dp.Ordinal(N=1000), n=600)
    plan = b.build(h=N.StabilityHistogram(delta=1e-6)(N.BinCounts(width=1.0)(X)))
    x = np.concatenate([np.full(300, 7), np.full(250, 40), np.arange(50) + 100])
    return plan, {"X": x}


def _truncated_mean() -> tuple[dp.Plan, dict[str, Any]]:
    X = np.random.default_rng(13).normal(size=(500, 3)) * 3.0 + 1.0
    # the pooled magnitude rule (the default before issue 12's per-coordinate rule, pinned in test_scale_free.py)
    return truncated_mean(d=3, n=500, budget=dp.ZCDP(0.5), truncation="magnitude"), {"X": X}


def _radius() -> tuple[dp.Plan, dict[str, Any]]:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=200)
    plan = b.build(r_rows=private_radius(X, of="rows", upper=50.0, factor=2.0),
                   r_free=private_radius(X, q=0.8))
    return plan, {"X": np.random.default_rng(14).standard_t(3, size=(200, 2))}


PLANS = {"quantiles": _quantiles, "merr": _merr, "stability": _stability,
         "truncated_mean": _truncated_mean, "radius": _radius}


def released(name: str, exact: bool) -> dict[str, list[Any]]:
    """The released values of a golden plan under ``SeededNoise(0, exact)``, flattened."""
    plan, data = PLANS[name]()
    out = plan.run(data, noise=dp.SeededNoise(0, exact=exact)).released
    return {k: _flat(v) for k, v in sorted(out.items())}


GOLDEN: dict[tuple[str, bool], dict[str, list[Any]]] = {
    ('quantiles', False): {
        'median': [0.08502649047941951],
        'q90': [1.1971940336638467],
    },
    ('quantiles', True): {
        'median': [0.10614119561796542],
        'q90': [1.0711782203943585],
    },
    ('merr', False): {
        'cdf': [
            -1, 211112, 211113, 281994, 281995, 422813, 422814, 1048575, 0.0, 0.16472031345664684,
            0.16472031345664684, 0.22184593797459146, 0.22184593797459146, 0.4368720179649037,
            0.4368720179649037, 1.0
        ],
    },
    ('merr', True): {
        'cdf': [
            -1, 46803, 46805, 445071, 445075, 1005051, 1005053, 1048575, 0.0, 0.033839071363019,
            0.1500154058676486, 0.508030235337138, 0.508030235337138, 0.9401944681063839,
            0.9479631419230543, 1.0
        ],
    },
    ('stability', False): {
        'h': [7, 40, 300.6401994503162, 248.76604719875743],
    },
    ('stability', True): {
        'h': [7, 40, 301.0, 254.0],
    },
    ('truncated_mean', False): {
        'mean': [0.9084802561969447, 0.8482412790849375, 1.067004085149174],
        'radius': [11.089242405663274],
    },
    ('truncated_mean', True): {
        'mean': [1.0606490525153731, 0.9519365157285051, 1.1399897650505295],
        'radius': [11.03921078248669],
    },
    ('radius', False): {
        'r_free': [1.6371181033515654],
        'r_rows': [2.996875743303094],
    },
    ('radius', True): {
        'r_free': [1.7780778995911533],
        'r_rows': [3.0270610154839233],
    },
}


@pytest.mark.parametrize("key", sorted(GOLDEN), ids=lambda k: f"{k[0]}-{'exact' if k[1] else 'float'}")
def test_released_values_are_unchanged(key: tuple[str, bool]) -> None:
    assert released(*key) == GOLDEN[key]
