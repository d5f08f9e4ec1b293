"""Record/replay of adaptive plans (issue 9; spec recipe 6 extended to every round).

In an adaptive plan (CoinPress rounds, PPC, noisy gradient descent, NIHT, anything inside ``Repeat``)
a later round's input depends on earlier releases: run as is on a neighbour D', it would see different
released parameters, and comparing its pre-noise inputs with D's would mix two different rounds.  So:

1. run D with seeded noise, recording every mechanism invocation (node path and occurrence: the k-th
   evaluation of a mechanism in a loop body is round k), its pre-noise input, the sensitivity the
   certificate declares for it at that round's released values, and its release;
2. run D' with every mechanism's release *forced* to D's (the interpreter's one evaluation hook,
   ``_Run.evaluate``), so each round of D' sees exactly the released state D's round saw;
3. check, for every invocation, that the pre-noise inputs on D and D' differ by at most the declared
   sensitivity (in l1, l2, linf) and that the realised per-record cost (sum of share * (distance /
   sensitivity)^2 in zCDP mode) is at most the certified cost.

This is what adaptive composition needs (Bun-Steinke 2016 Lemma 2.3, Dwork-Roth 2014 Thm 3.16): each
round is private for every fixed value of the earlier releases, and forcing D's releases is one such value.
Neighbours are random and adversarial: far outliers, NaN and inf rows, antipodal and orthogonal far rows
(on every clipping boundary, whatever the released centre), and a response flipped against its features.
A mutant that lowers the declared sensitivity of a loop body's mechanism must be flagged, in later rounds
too (which the non-adaptive replay of test_audit.py cannot reach).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import numpy as np
import pytest
from forced_replay import Replay, replay

import dpflow as dp
from dpflow.estimators import gaussian, regression
from dpflow.nodes import Mechanism, Repeat
from dpflow.nodes.types import StatT
from dpflow.planner.certify import Certified, TypedScope, certify

# ------------------------------------------------------------------ plans, data and neighbours

BIG = 1e6


@attrs.frozen
class Adaptive:
    """An adaptive estimator plan, its source name and a dataset for it."""

    make: Callable[[], dp.Plan]
    source: str
    data: Callable[[np.random.Generator], np.ndarray]


def _gaussian_rows(n: int, d: int, scale: float = 1.0) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.normal(size=(n, d)) * scale + 0.5


def _regression_rows(n: int, d: int, noise: float = 0.1) -> Callable[[np.random.Generator], np.ndarray]:
    def make(rng: np.random.Generator) -> np.ndarray:
        x = rng.normal(size=(n, d)) / np.sqrt(d)
        beta = np.zeros(d)
        beta[0] = 0.8
        return np.column_stack([x, x @ beta + noise * rng.normal(size=n)])
    return make


ZCDP = dp.ZCDP(1)
PLANS: dict[str, Adaptive] = {
    "coinpress_mean": Adaptive(lambda: gaussian.mean(d=2, n=60, budget=ZCDP, R=20.0, t=3), "X",
                               _gaussian_rows(60, 2)),
    "coinpress_covariance": Adaptive(lambda: gaussian.covariance(d=2, n=60, budget=ZCDP, K=8.0, t=3), "X",
                                     _gaussian_rows(60, 2, 1.5)),
    "ppc_covariance": Adaptive(lambda: gaussian.covariance(d=2, n=60, budget=ZCDP, K=8.0, method="pce",
                                                           lower=0.5), "X", _gaussian_rows(60, 2, 1.5)),
    "noisy_gd": Adaptive(lambda: regression.noisy_gd(d=2, n=60, budget=ZCDP, x_bound=1.0, coef_bound=1.0,
                                                     response_bound=2.0, iterations=3), "Z", _regression_rows(60, 2)),
    "noisy_gd_released_bound": Adaptive(lambda: regression.noisy_gd(d=2, n=200, budget=ZCDP, x_bound=1.0,
                                                                    coef_bound=0.5, iterations=3,
                                                                    truncation_weight=0.5), "Z",
                                        _regression_rows(200, 2, noise=3.0)),
    "niht": Adaptive(lambda: regression.niht(d=3, n=60, s=1, budget=ZCDP, x_bound=1.0, coef_bound=1.0,
                                             response_bound=2.0, iterations=3), "Z", _regression_rows(60, 3)),
}


def neighbours(X: np.ndarray, rng: np.random.Generator, rows: tuple[int, ...]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Replace-one pairs at each index of ``rows``: one row replaced by a far outlier, NaN, inf or a fresh
    random row; and pairs of far rows on opposite sides of every ball (antipodal), in orthogonal
    directions (the worst case of a second moment) and with the last coordinate (a response) flipped."""
    d = X.shape[1]
    u = np.ones(d) / np.sqrt(d)
    far = BIG * u
    e0, e1 = np.eye(d)[0] * BIG, np.eye(d)[1] * BIG
    up, flipped = np.full(d, BIG), np.full(d, BIG)  # far features, the response far above or below them
    up[-1], flipped[-1] = BIG, -BIG
    singles = (BIG * rng.normal(size=d), np.full(d, np.nan), np.full(d, np.inf), rng.normal(size=d))
    pairs = []
    for i in rows:
        for new in singles:
            Y = X.copy()
            Y[i] = new
            pairs.append((X, Y))
        for first, second in ((far, -far), (e0, e1), (up, flipped)):
            A, B = X.copy(), X.copy()
            A[i], B[i] = first, second
            pairs.append((A, B))
    return pairs


def findings(cert: Certified, case: Adaptive, seed: int, rows: tuple[int, ...] = (0, 37)) -> list[str]:
    rng = np.random.default_rng(seed)
    X = case.data(rng)
    out = []
    for D, D2 in neighbours(X, rng, rows):
        for first, second in ((D, D2), (D2, D)):
            out += replay(cert, {case.source: first}, {case.source: second}).found
    return out


def _loop_scopes(space: TypedScope) -> list[tuple[str, TypedScope]]:
    out = []
    for rec in space.order:
        if isinstance(rec.node, Repeat):
            body = space.bodies[rec.id]
            out += [(space.path + rec.id, body), *_loop_scopes(body)]
    return out


# ------------------------------------------------------------------ tests


@pytest.mark.parametrize("name", sorted(PLANS))
def test_every_round_of_an_adaptive_plan_respects_its_certified_sensitivity(name: str) -> None:
    case = PLANS[name]
    cert = certify(case.make())
    assert _loop_scopes(cert.space), "the plan is adaptive: it has a loop"
    assert findings(cert, case, seed=1) == []


@pytest.mark.parametrize("name", sorted(PLANS))
def test_the_replay_reaches_every_round(name: str) -> None:
    """Every round of every loop is recorded, and the forced run sees D's state (its releases are D's)."""
    case = PLANS[name]
    plan = case.make()
    cert = certify(plan)
    X = case.data(np.random.default_rng(0))
    a = Replay(cert, {case.source: X})
    a.space_values(cert.space, {})
    Y = X.copy()
    Y[0] = BIG
    b = Replay(cert, {case.source: Y}, forced=a.releases)
    released = b.space_values(cert.space, {})
    loops = [(r.node.times, cert.space.bodies[r.id]) for r in cert.space.order if isinstance(r.node, Repeat)]
    assert loops
    for times, body in loops:
        mechs = [body.path + r.id for r in body.order if isinstance(r.node, Mechanism)]
        assert mechs and all(sorted(k[1] for k in a.releases if k[0] == m) == list(range(times)) for m in mechs)
    outputs = dict(plan.outputs)
    again = Replay(cert, {case.source: X})
    mine = again.space_values(cert.space, {})
    for nid in outputs.values():  # D' forced to D's releases outputs D's release
        assert np.array_equal(np.asarray(released[nid], dtype=float), np.asarray(mine[nid], dtype=float),
                              equal_nan=True)


@pytest.mark.parametrize("name", sorted(PLANS))
def test_a_lowered_round_sensitivity_is_flagged_in_later_rounds(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """MUTANT: the certified type of a loop body's mechanism input declares half its sensitivity (the
    noise then shrinks with it).  The replay must flag it, in rounds after the first too."""
    case = PLANS[name]
    cert = certify(case.make())
    loop, body = _loop_scopes(cert.space)[0]
    rec = next(r for r in body.order if isinstance(r.node, Mechanism))
    stat = body.types[rec.inputs[0]]
    assert isinstance(stat, StatT)
    half = {k: None if getattr(stat, k) is None else getattr(stat, k) * 0.5 for k in ("l1", "l2", "linf")}
    monkeypatch.setitem(body.types, rec.inputs[0], attrs.evolve(stat, **half))
    found = findings(cert, case, seed=2, rows=(0,))
    flagged = [f for f in found if f.startswith(f"{body.path}{rec.id}#") and "exceeds the declared" in f]
    assert flagged, found
    assert any(not f.startswith(f"{body.path}{rec.id}#0 ") for f in flagged), flagged  # a later round too


def worst_ratios(name: str, seed: int = 2) -> dict[tuple[str, int], float]:
    """Per invocation, the largest realised / declared change over the shipped neighbours at row 0, in the
    mechanism's own norm: how tight each round's certified sensitivity is (docs/assurance.md)."""
    case = PLANS[name]
    cert = certify(case.make())
    rng = np.random.default_rng(seed)
    X = case.data(rng)
    worst: dict[tuple[str, int], float] = {}
    for D, D2 in neighbours(X, rng, (0,)):
        for first, second in ((D, D2), (D2, D)):
            replay(cert, {case.source: first}, {case.source: second}, ratios=worst)
    return worst


if __name__ == "__main__":  # python tests/audit/test_replay.py: the table of docs/assurance.md
    for plan_name in PLANS:
        print(plan_name, {f"{k[0]}#{k[1]}": round(v, 3) for k, v in worst_ratios(plan_name).items()})
