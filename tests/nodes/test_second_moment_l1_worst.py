"""Review of ``SecondMoment``'s pure-DP l1 rule over the upper triangle (docs/assurance.md, "reviewed
derivations"): a search for the worst replaced row, by optimisation over adversarial pairs of rows.

Replace-one changes (1/n) sum x x^T by (w w^T - v v^T) / n for rows ||w||, ||v|| <= r.  The rule declares
(d + 1) r^2 / n: each row's triangle has l1 (||w||_1^2 + ||w||_2^2) / 2 <= (d + 1) r^2 / 2 (tight alone, at
w = r 1 / sqrt(d)), and the triangle inequality adds the two.  The worst pair found (200 restarts of
Nelder-Mead per d, a slow test) is far from adding both: sqrt(5) r^2 at d = 2 (w, v orthonormal at the angle
with tan 2 theta = 1/2), sqrt(33)/2 r^2 at d = 3, sqrt(13) r^2 at d = 4, i.e. the rule is valid and 1.34-1.39x above the
worst case found (2x at d = 1).  A rule with half the constant, (d + 1) r^2 / (2 n), is broken by these pairs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize

import dpflow as dp
from dpflow import nodes as N
from dpflow.planner.certify import certify

#: the worst upper-triangle l1 of w w^T - v v^T found for ||w||, ||v|| <= 1 (module docstring)
WORST_FOUND = {1: 1.0, 2: math.sqrt(5.0), 3: math.sqrt(33.0) / 2, 4: math.sqrt(13.0)}
#: the pairs (w, v) that reach it (to 1e-9)
WORST_PAIRS = {
    1: ([1.0], [0.0]),
    2: ([math.cos(math.atan(0.5) / 2), math.sin(math.atan(0.5) / 2)],
        [-math.sin(math.atan(0.5) / 2), math.cos(math.atan(0.5) / 2)]),
    3: ([-0.254569947861, -0.683810698031, 0.68381069815], [-0.967054362806, 0.18000813654, -0.180008139142]),
    4: ([0.204908337385, 0.20490833907, 0.676766255929, 0.676766267396],
        [0.676766266009, 0.676766258805, -0.204908337007, -0.204908334533]),
}


def _triangle_l1(w: np.ndarray, v: np.ndarray) -> float:
    A = np.outer(w, w) - np.outer(v, v)
    return float(np.abs(A[np.triu_indices(w.size)]).sum())


def _ball(u: np.ndarray) -> np.ndarray:
    out: np.ndarray = u / max(1.0, float(np.linalg.norm(u)))
    return out


def _search(d: int, restarts: int, seed: int) -> tuple[float, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    best = (0.0, np.zeros(d), np.zeros(d))
    for _ in range(restarts):
        res = minimize(lambda z: -_triangle_l1(_ball(z[:d]), _ball(z[d:])), rng.normal(size=2 * d),
                       method="Nelder-Mead", options={"maxiter": 3000, "xatol": 1e-10, "fatol": 1e-13})
        if -res.fun > best[0]:
            best = (-res.fun, _ball(res.x[:d]), _ball(res.x[d:]))
    return best


def _declared_l1(d: int, n: int) -> float:
    b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    S = N.SecondMoment()(N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=d), n=n)))
    cert = certify(b.build(s=N.LaplaceMech()(S)))
    l1 = cert.space.types[S.id].l1
    assert l1 is not None and l1.is_const
    return float(l1.coef)


@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_the_worst_pair_found_reaches_its_value_within_the_rule(d: int) -> None:
    """The pinned pair, replaced in a dataset of n rows: the released statistic moves by exactly the pinned
    l1 / n, at most the declared (d + 1) / n and, from d = 2, more than half of it."""
    n = 50
    declared = _declared_l1(d, n)
    assert declared == pytest.approx((d + 1) / n, rel=1e-12)
    w, v = (np.array(x) for x in WORST_PAIRS[d])
    assert np.linalg.norm(w) <= 1 + 1e-11 and np.linalg.norm(v) <= 1 + 1e-11
    X = np.random.default_rng(d).normal(size=(n, d)) / (2 * math.sqrt(d))
    Y = X.copy()
    X[7], Y[7] = w, v
    diff = (X.T @ X - Y.T @ Y) / n
    moved = float(np.abs(diff[np.triu_indices(d)]).sum())
    assert moved == pytest.approx(WORST_FOUND[d] / n, rel=1e-9) and moved <= declared
    if d >= 2:  # half the rule's constant would be broken by the worst pair
        assert moved > (d + 1) / (2 * n)


@pytest.mark.parametrize("d", [2, 3])
def test_a_short_search_beats_neither_the_pinned_worst_nor_the_rule(d: int) -> None:
    found, _, _ = _search(d, restarts=4, seed=d)
    assert found <= WORST_FOUND[d] * (1 + 1e-9) <= d + 1


@pytest.mark.slow
@pytest.mark.parametrize("d", [2, 3, 4, 5])
def test_a_wide_search_finds_nothing_worse_than_the_pinned_case(d: int) -> None:
    """60 restarts per d: the best pair found is the pinned one (d <= 4), and below the rule (d = 5: 4.272)."""
    found, _, _ = _search(d, restarts=60, seed=100 + d)
    assert found <= (d + 1) * (1 + 1e-12)
    if d in WORST_FOUND:
        assert found == pytest.approx(WORST_FOUND[d], rel=1e-6)


def test_the_two_dimensional_worst_case_in_closed_form() -> None:
    """w = (cos t, sin t), v = (-sin t, cos t): the triangle of w w^T - v v^T has l1 2 |cos 2t| + |sin 2t|,
    largest (sqrt 5) at tan 2t = 1/2; the search never beats it."""
    t = math.atan(0.5) / 2
    w, v = np.array([math.cos(t), math.sin(t)]), np.array([-math.sin(t), math.cos(t)])
    assert _triangle_l1(w, v) == pytest.approx(math.sqrt(5.0), rel=1e-12)
    assert _search(2, restarts=10, seed=11)[0] <= math.sqrt(5.0) * (1 + 1e-9)
