"""Review of the discrete ``AboveThreshold`` (exact noise path, docs/assurance.md "reviewed derivations"): its
output law computed exactly on neighbouring inputs and compared with the claimed epsilon.

The exact path floors the answers to a lattice of step ``2^(e - 1 - LATTICE_BITS)`` (``Delta = m 2^e``), draws
the discrete Laplace ``rho`` (scale ``t1``) and ``nu_i`` (scale ``t2``) on the integers and releases the first
``i`` with ``q_i + nu_i >= T + rho``.  With ``LATTICE_BITS = 0`` the lattice is coarse (``D`` = 1 or 2 units), so
the code's own scales and decision rule can be read off and the law enumerated: P(release k) = sum_rho P(rho)
prod_{i<k} P(nu < T + rho - q_i) P(nu >= T + rho - q_k), with the discrete Laplace cdf in closed form
(P(Z <= j) = 1 - q^(j+1)/(1+q) for j >= 0, q^-j/(1+q) below; CKS20) and rho summed over |rho| <= R; the rest
has mass 2 q1^(R+1)/(1+q1), added to the numerator of every ratio (a proven upper bound).  Sums of positive
float64 terms err by less than 1e-12 relative here, far inside the 1e-9 tolerance.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from conftest import ExactZeroNoise

import dpflow as dp
from dpflow import nodes as N
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.nodes import sparse_vector as S
from dpflow.nodes.sparse_vector import NOT_FOUND, AboveThreshold, svt_split
from dpflow.planner.certify import certify


class _Ctx:
    """The part of an EvalContext ``_exact`` uses: records and a noise source replaying given draws."""

    def __init__(self, draws: list[np.ndarray] | None = None) -> None:
        self.facts: dict[str, Any] = {}
        self.scales: list[Fraction] = []
        self.draws = draws
        self.noise = self

    def record(self, key: str, value: Any) -> None:
        self.facts[key] = value

    def discrete_laplace(self, scale: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        self.scales.append(scale)
        if self.draws is None:
            return np.zeros(shape, dtype=np.int64)
        return self.draws.pop(0).reshape(shape)


def _code_scales(monkeypatch: pytest.MonkeyPatch, delta: float, eps: Fraction) -> tuple[int, Fraction, Fraction]:
    """D and the integer scales (t1, t2) that ``AboveThreshold._exact`` uses on a coarse lattice."""
    monkeypatch.setattr(S, "LATTICE_BITS", 0)
    ctx = _Ctx()
    e1, e2 = svt_split(eps)
    AboveThreshold(threshold=0.0)._exact(np.zeros(2), 0.0, delta, e1, e2, ctx)  # type: ignore[arg-type]
    D = ctx.facts["lattice"]["sensitivity_units"]
    assert ctx.facts["lattice"]["step"] == math.ldexp(1.0, math.frexp(delta)[1] - 1)
    return D, ctx.scales[0], ctx.scales[1]


def _law(q: tuple[int, ...], T: int, t1: Fraction, t2: Fraction) -> tuple[np.ndarray, float]:
    """(P(release 0), ..., P(release m-1), P(not found)) summed over |rho| <= R, and the omitted rho mass."""
    q1, q2 = math.exp(-1 / float(t1)), math.exp(-1 / float(t2))
    R = int(120 * float(t1)) + 1
    rho = np.arange(-R, R + 1)
    prho = (1 - q1) / (1 + q1) * q1 ** np.abs(rho)

    def below(x: np.ndarray) -> np.ndarray:  # P(nu < x) = P(nu <= x - 1)
        j = (x - 1).astype(float)
        with np.errstate(over="ignore"):
            out: np.ndarray = np.where(j >= 0, 1 - q2 ** (np.maximum(j, 0) + 1) / (1 + q2),
                                       q2 ** np.maximum(-j, 0) / (1 + q2))
        return out

    alive, out = np.ones_like(prho), []
    for qi in q:
        b = below(T + rho - qi)
        out.append(float(np.sum(prho * alive * (1 - b))))
        alive = alive * b
    out.append(float(np.sum(prho * alive)))
    return np.array(out), 2 * q1 ** (R + 1) / (1 + q1)


def _loss(q: tuple[int, ...], q2: tuple[int, ...], t1: Fraction, t2: Fraction) -> float:
    """max over outputs of ln(P_q(o) / P_q2(o)), the omitted rho mass added to the numerator."""
    P, tail = _law(q, 0, t1, t2)
    Q, _ = _law(q2, 0, t1, t2)
    return float(np.max(np.log((P + tail) / Q)))


def test_the_codes_decision_rule_is_the_enumerated_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replayed draws: ``_exact`` halts at the first i with floor(f_i) + nu_i >= floor(T) + rho, as enumerated."""
    monkeypatch.setattr(S, "LATTICE_BITS", 0)
    e1, e2 = svt_split(Fraction(1))
    rng = np.random.default_rng(0)
    for _ in range(300):
        f = rng.integers(-4, 5, size=4).astype(float) + rng.choice([0.0, 0.25, 0.75], size=4)
        T = float(rng.integers(-3, 4)) + 0.5
        rho, nu = rng.integers(-3, 4, size=1), rng.integers(-3, 4, size=4)
        got = AboveThreshold(threshold=0.0)._exact(f, T, 1.0, e1, e2, _Ctx([rho, nu]))  # type: ignore[arg-type]
        hits = np.flatnonzero(np.floor(f) + nu >= math.floor(T) + rho[0])
        assert got == (int(hits[0]) if hits.size else NOT_FOUND)


@pytest.mark.parametrize(("delta", "eps"), [(1.0, Fraction(1)), (1.5, Fraction(1)), (1.0, Fraction(1, 2)),
                                            (1.0, Fraction(2))])
def test_worst_neighbours_lose_at_most_epsilon_and_the_bound_is_reached(monkeypatch: pytest.MonkeyPatch,
                                                                      delta: float, eps: Fraction) -> None:
    """The code's scales are t1 = D / eps1 and t2 = 2 D / eps2; on the tight family (m = 30 answers at c, the
    neighbour's first 29 lowered by D and the last raised by D: Lyu-Su-Li's worst case) the exact loss of the
    last index reaches eps to 1e-4 and never exceeds it; "not found" loses at most eps1."""
    D, t1, t2 = _code_scales(monkeypatch, delta, eps)
    e1, e2 = svt_split(eps)
    assert (D, t1, t2) == ((1 if delta == 1.0 else 2), D / e1, 2 * D / e2)
    worst = 0.0
    for c in range(-4 * D, 4 * D + 1):
        f, g = (c,) * 30, (c - D,) * 29 + (c + D,)
        P, tp = _law(f, 0, t1, t2)
        Q, tq = _law(g, 0, t1, t2)
        worst = max(worst, math.log((Q[-2] + tq) / P[-2]), math.log((P[-1] + tp) / Q[-1]))
        assert math.log((P[-1] + tp) / Q[-1]) <= float(e1) * (1 + 1e-9)
    assert float(eps) * (1 - 1e-4) < worst <= float(eps) * (1 + 1e-9)


def test_every_neighbour_of_short_sequences(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exhaustive: every integer answer pair within 3 D of the threshold and every neighbour moving each answer
    by at most D (non-monotone), both of the code's lattices: the worst loss is at most eps."""
    for delta in (1.0, 1.5):
        D, t1, t2 = _code_scales(monkeypatch, delta, Fraction(1))
        span = range(-3 * D, 3 * D + 1)
        laws = {q: _law(q, 0, t1, t2) for q in itertools.product(range(-4 * D, 4 * D + 1), repeat=2)}
        worst = 0.0
        for q in itertools.product(span, repeat=2):
            P, tail = laws[q]
            for v in itertools.product(range(-D, D + 1), repeat=2):
                Q, _ = laws[(q[0] + v[0], q[1] + v[1])]
                worst = max(worst, float(np.max(np.log((P + tail) / Q))))
        assert 0.5 < worst <= 1.0 + 1e-9


@pytest.mark.parametrize(("f1", "f2"), [(0.5, 1.0), (1.0, 0.5)])
def test_a_smaller_scale_breaks_the_bound(monkeypatch: pytest.MonkeyPatch, f1: float, f2: float) -> None:
    """The constants are pinned: half the threshold's scale, or the answers' scale without its factor 2, and
    the same tight family loses more than eps."""
    D, t1, t2 = _code_scales(monkeypatch, 1.0, Fraction(1))
    t1, t2 = t1 * Fraction(f1), t2 * Fraction(f2)
    worst = max(_loss((c - D,) * 29 + (c + D,), (c,) * 30, t1, t2) for c in range(-4, 5))
    assert worst > 1.3


def test_the_widened_sensitivity_is_summed_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Delta + 2 x float error is summed exactly before D = ceil(. / step): a float slack that puts the exact sum
    2^-70 above a multiple k of the step has a float sum equal to k steps (rounded down), but the answers can
    move by the exact sum, i.e. their floors by k + 1 units, so D must be k + 1 (the review found the float
    sum; the excess was one unit in 2^40, an epsilon 2^-40 relative too small)."""
    b = dp.PlanBuilder(budget=dp.PureDP(1))
    h = N.Histogram(edges=[0.0, 1.0, 2.0])(b.source("X", dp.Reals(), n=10))
    i = N.AboveThreshold(threshold=20.0)(h)
    cert = certify(b.build(i=i))
    seen: list[float | Fraction] = []
    inner = AboveThreshold._exact

    def spy(self: AboveThreshold, f: np.ndarray, T: float, delta: float | Fraction, *rest: Any) -> int:
        seen.append(delta)
        return inner(self, f, T, delta, *rest)

    monkeypatch.setattr(AboveThreshold, "_exact", spy)
    monkeypatch.setattr(S, "float_slack", lambda *_: (0.0, 0.0))
    execute(cert, {"X": np.full((10, 1), 0.5)}, ExactZeroNoise(), NumpyBackend())
    d0 = float(seen[0])  # the run's Delta (the declared linf, rounded up)
    step = 2.0**-40
    k = math.ceil(Fraction(d0) / Fraction(step))
    slack = float(Fraction(k) * Fraction(step) - Fraction(d0)) + 2.0**-70
    assert d0 + slack == k * step and Fraction(d0) + Fraction(slack) > k * step
    monkeypatch.setattr(S, "float_slack", lambda *_: (slack, slack))
    run = execute(cert, {"X": np.full((10, 1), 0.5)}, ExactZeroNoise(), NumpyBackend())
    assert run.facts[i.id][1]["lattice"] == {"step": step, "sensitivity_units": k + 1}
