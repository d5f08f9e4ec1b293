"""``Gram`` (an unnormalised second moment, usable on value pieces of private size) claims the float-error bound
of a sum of at most n outer products, n the public row count of the rows it was split from, so a Gaussian
mechanism on it releases on the 2^-k lattice with exact discrete noise (issue 9): the rule pinned term by term,
covering adversarial float rows, and the release of neighbouring pieces within the widened sensitivity."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from conftest import ExactZeroNoise
from test_secure_noise_kinds import EXACT, RecordingSecureNoise

import dpflow as dp
from dpflow import nodes as N
from dpflow.domains import ReleasedNorm, ReleasedScalar
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.nodes.floaterr import FloatError, U, gamma
from dpflow.nodes.types import StatT
from dpflow.planner.certify import certify
from dpflow.privacy.rounding import up

N_ROWS, D = 400, 3


def test_gram_sum_bound_is_pinned() -> None:
    """gamma_n n b^2 (a sum of at most n products, Higham Lemma 3.1) plus half the excess sqrt(2)(b^2 - r^2) of
    computed rows within b rather than r; not divided by n (the normalised ``gram`` kind is)."""
    dom = dp.Vectors(d=D, l2_bound=dp.Sym.ref(ReleasedScalar("radius")), center="c")
    values = {ReleasedNorm("c"): 5.0, ReleasedScalar("radius"): 2.0}
    n = dp.Sym.const(1000.0)
    fe = FloatError("gram_sum", dom, n, "c")
    b, r, nv = fe.centred_norm(values), fe.centred_norm(values, widen=False), n.value()
    l2 = gamma(nv) * nv * b * b + (b - r + 4 * U * b) * (b + r) * math.sqrt(2.0) / 2.0
    assert fe.bound(values, 6) == (up(l2), up(up(l2) * math.sqrt(6)))
    normalised = FloatError("gram", dom, n, "c").bound(values, 6)[0]
    assert fe.bound(values, 6)[0] > 0.99 * nv * normalised  # the sum's error is n times the mean's


def test_gram_sum_bound_is_infinite_when_the_sum_could_overflow() -> None:
    dom = dp.Vectors(d=1, box=(-1.0, 1.0))
    assert FloatError("gram_sum", dom, dp.Sym.const(2.0**1000)).bound({}, 1) == (math.inf, math.inf)
    assert FloatError("gram_sum", dom, None).bound({}, 1) == (math.inf, math.inf)


def _piece_plan(relation: str = "replace", nested: bool = False) -> tuple[dp.Plan, str]:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors=relation)  # type: ignore[arg-type]
    X = b.source("X", dp.Vectors(d=D), n=N_ROWS if relation == "replace" else None)
    c = b.public([0.0] * D)
    inside, _ = N.split(X, N.PartitionByBall(center=c, radius=3.0))
    if nested:
        inside, _ = N.split(inside, N.PartitionByBall(center=c, radius=2.0))
    G = N.Gram(center=c)(N.Clip(radius=1.5, center=c)(inside))
    return b.build(G=N.GaussianMech()(G)), G.id


def _float_error(plan: dp.Plan, gid: str) -> FloatError | None:
    t = certify(plan).space.types[gid]
    assert isinstance(t, StatT)
    return t.float_error


@pytest.mark.parametrize("nested", [False, True])
def test_a_piece_bounds_its_gram_by_the_public_count_it_was_split_from(nested: bool) -> None:
    plan, gid = _piece_plan(nested=nested)
    fe = _float_error(plan, gid)
    assert fe == FloatError("gram_sum", dp.Vectors(d=D, l2_bound=1.5, center=fe.gram_center if fe else None),
                            dp.Sym.const(float(N_ROWS)), fe.gram_center if fe else None)
    ledger = str(plan.check().to_json())
    assert "continuous noise on every source" not in ledger


def test_a_gram_on_public_n_rows_uses_n_and_without_any_public_count_is_fixed_point() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    G = N.Gram()(N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2), n=50)))
    fe = _float_error(b.build(G=N.GaussianMech()(G)), G.id)
    assert fe == FloatError("gram_sum", dp.Vectors(d=2, l2_bound=1.0), dp.Sym.const(50.0))
    plan, gid = _piece_plan("add_remove")
    fe = _float_error(plan, gid)  # no public count anywhere: the exact fixed-point Gram, on the lattice
    assert fe is not None and fe.kind == "fixed_gram" and fe.n is None
    assert not [e.noise for e in plan.check().entries if "continuous noise" in e.noise]


def _adversarial_rows(m: int, seed: int) -> np.ndarray:
    """Rows at the clipping radius with coordinates of mixed signs and magnitudes (off-diagonal products cancel,
    so their float sums carry errors of the order of the bound's gamma_n sum |z_ij z_ik|)."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(m, D)) * rng.choice([1e-8, 1.0, 1e3], size=(m, D))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    return Z * 1.5 * (1.0 - 2.0**-40)


@pytest.mark.parametrize("m", [1, 37, N_ROWS])
def test_gram_sum_bound_covers_the_computed_gram_of_any_piece_size(m: int) -> None:
    fe = FloatError("gram_sum", dp.Vectors(d=D, l2_bound=1.5), dp.Sym.const(float(N_ROWS)))
    l2, _ = fe.bound({}, D * (D + 1) // 2)
    for seed in range(5):
        Z = _adversarial_rows(m, seed)
        got = NumpyBackend().gram(Z)
        F = [[Fraction(float(v)) for v in row] for row in Z]
        err2 = sum((Fraction(float(got[j, k])) - sum(r[j] * r[k] for r in F)) ** 2
                   for j in range(D) for k in range(D))
        assert float(err2) <= l2 * l2
    # the bound is the sum's (n b^2 scale), not the mean's: one row's gram at the radius already errs
    assert l2 >= gamma(N_ROWS) * N_ROWS * 1.5**2


def test_neighbouring_pieces_release_within_the_widened_sensitivity() -> None:
    """A record moved into the ball (replace-one on the source, add on the piece): the lattice releases of the two
    pieces' Gram matrices (zero noise) differ by at most the recorded widened sensitivity, which is the declared
    one plus the lattice and twice the float error."""
    plan, _ = _piece_plan()
    cert = certify(plan)
    X = _adversarial_rows(N_ROWS, 9) * 1.5
    Y = X.copy()
    Y[0] = [1.5, 0.0, 0.0]
    X[0] = [10.0, 0.0, 0.0]  # outside the ball of radius 3 in X, inside in Y
    a = execute(cert, {"X": X}, ExactZeroNoise(), NumpyBackend())
    c = execute(cert, {"X": Y}, ExactZeroNoise(), NumpyBackend())
    (gid,) = [k for k, v in a.facts.items() if any("lattice" in f for f in v)]
    lat = next(f["lattice"] for f in a.facts[gid] if "lattice" in f)
    assert lat["float_slack"] > 0 and lat["sensitivity"] >= 1.5**2 + lat["float_slack"]
    Ga, Gc = np.asarray(a.released["G"]), np.asarray(c.released["G"])
    iu = np.triu_indices(D)
    dist = float(np.linalg.norm(Ga[iu] - Gc[iu]))
    assert 0.9 * 1.5**2 <= dist <= lat["sensitivity"]


def test_secure_runs_of_a_gram_on_a_piece_draw_discrete_noise_only() -> None:
    plan, _ = _piece_plan()
    X = np.random.default_rng(3).normal(size=(N_ROWS, D))

    noise = RecordingSecureNoise()
    out = plan.run({"X": X}, noise=noise)
    assert "normal" not in noise.calls and set(noise.calls) <= EXACT and noise.words.words > 0
    assert np.asarray(out.released["G"]).shape == (D, D)
