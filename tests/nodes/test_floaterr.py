"""Floating-point error bounds of the queries (``dpflow/nodes/floaterr.py``), pinned against exact
(Fraction) computations and adversarial rounding, infinite when a sum could overflow (issue 14 items 6, 10)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from conftest import ExactZeroNoise, ZeroNoise

import dpflow as dp
from dpflow import nodes as N
from dpflow.domains import ReleasedNorm, ReleasedScalar, RowCount
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.nodes.floaterr import OVERFLOW, FloatError, U, gamma
from dpflow.nodes.regression import project_coef
from dpflow.nodes.types import RowsT, Size, StatT
from dpflow.planner.certify import certify
from dpflow.privacy.rounding import up

R, C, E = ReleasedScalar("r"), ReleasedNorm("c"), ReleasedNorm("e")


def test_the_float_error_is_infinite_when_a_sum_could_overflow() -> None:
    dom = dp.Vectors(d=2, l2_bound=dp.Sym.ref(R))
    n = dp.Sym.const(1000.0)
    b_ok = OVERFLOW / 1000.0 / (1.0 + gamma(4)) / 2.0
    assert math.isfinite(FloatError("mean", dom, n).bound({R: b_ok}, 2)[0])
    assert FloatError("mean", dom, n).bound({R: OVERFLOW / 1000.0}, 2) == (math.inf, math.inf)
    assert FloatError("sum", dom, n).bound({R: 1e300}, 2) == (math.inf, math.inf)
    # before: b * b overflowed and the gram's excess term was inf - inf = NaN
    assert FloatError("gram", dom, n).bound({R: 1e200}, 3) == (math.inf, math.inf)
    assert math.isfinite(FloatError("gram", dom, n).bound({R: math.sqrt(b_ok)}, 3)[0])
    assert FloatError("gram", dom, n).bound({R: math.sqrt(OVERFLOW / 1000.0)}, 3) == (math.inf, math.inf)
    around = dp.Vectors(d=2, l2_bound=1.0, center="c")               # small centred rows, a huge centre
    assert math.isfinite(FloatError("gram", around, n, "c").bound({C: 2.0**500}, 3)[0])
    assert FloatError("gram", around, n, "c").bound({C: 2.0**560}, 3) == (math.inf, math.inf)
    step = FloatError("step", dom, n, eta=4.0, offset=1.0)
    assert math.isfinite(step.bound({R: b_ok / 4.0}, 2)[0])
    assert step.bound({R: OVERFLOW / 4000.0}, 2) == (math.inf, math.inf)


class _SpyBackend(NumpyBackend):
    """Records every array summed, to rebuild the exact mean of the rows the node computed."""

    def __init__(self) -> None:
        self.summed: list[np.ndarray] = []

    def tree_sum(self, X: Any) -> np.ndarray:
        self.summed.append(np.array(X, dtype=float))
        return super().tree_sum(X)


def _float_step_plan(eta: float, n: int, d: int, beta: list[float], radius: float) -> tuple[dp.Plan, str]:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    Z = b.source("Z", dp.Vectors(d=d + 1), n=n)
    step = N.GradientStep(beta=b.public(beta), eta=eta, x_bound=1.0, residual_bound=2.0, radius=radius)(Z)
    return b.build(beta=N.GaussianMech()(step)), step.id


def _step_stat(cert: Any, step_id: str) -> StatT:
    t = cert.space.types[step_id]
    assert isinstance(t, StatT) and t.float_error is not None
    return t


@pytest.mark.parametrize("eta", [1e-15, 1e-9, 0.5])
def test_gradient_step_float_error_covers_the_whole_update(eta: float) -> None:
    # before: the bound covered eta * mean but not beta - eta * g (u |beta| dominates for tiny eta)
    n, d, radius = 300, 3, 1.0
    rng = np.random.default_rng(2)
    beta0 = [0.5773502691896257, -0.5773502691896257, 0.5773502691896257]
    plan, sid = _float_step_plan(eta, n, d, beta0, radius)
    cert = certify(plan)
    fe = _step_stat(cert, sid).float_error
    assert fe is not None
    assert fe.refs() == ()
    declared, _ = fe.bound({}, d)
    worst = 0.0
    for _ in range(30):
        Z = rng.normal(size=(n, d + 1)) * rng.choice([0.5, 3.0])
        spy = _SpyBackend()
        got = np.asarray(execute(cert, {"Z": Z}, ZeroNoise(), spy).released["beta"], dtype=float)
        (G,) = spy.summed
        bhat = project_coef(np.array(beta0), "l2", radius, None)
        exact = [Fraction(bhat[j]) - Fraction(eta) * sum(Fraction(g) for g in G[:, j]) / n for j in range(d)]
        err = math.sqrt(float(sum((Fraction(got[j]) - exact[j]) ** 2 for j in range(d))))
        worst = max(worst, err)
    assert worst <= declared
    if eta < 1e-6:  # u |beta| dominates: the bound is not vacuous (it was 500x too small before)
        assert worst >= declared / 40


def test_gradient_step_lattice_releases_move_at_most_the_widened_sensitivity() -> None:
    # before: with a tiny step, beta - eta * g rounds to different floats on neighbours (an ulp of beta,
    # 1.1e-16) while the widened sensitivity was about 1e-18; the float error (u ||beta|| <= u * 0.99) must
    # be counted twice (neighbours err in opposite directions) to cover the ulp
    n, d, radius = 1000, 2, 0.99
    X = np.random.default_rng(4).normal(size=(n, d + 1))
    spy = _SpyBackend()
    execute(certify(_float_step_plan(1.0, n, d, [0.7, -0.7], radius)[0]), {"Z": X}, ZeroNoise(), spy)
    G = spy.summed[0]
    i = int(np.argmax(G[:, 0] * np.sign(G[:, 0].sum())))
    Y = X.copy()
    Y[i, :d] = 0.0                                      # that row's gradient term becomes 0
    g_x, g_y = abs(G[:, 0].sum()) / n, abs(G[:, 0].sum() - G[i, 0]) / n
    eta = math.ulp(0.7) / 2 / ((g_x + g_y) / 2)           # eta * g crosses half an ulp of beta between them
    cert = certify(_float_step_plan(eta, n, d, [0.7, -0.7], radius)[0])
    a = execute(cert, {"Z": X}, ExactZeroNoise(), NumpyBackend())
    c = execute(cert, {"Z": Y}, ExactZeroNoise(), NumpyBackend())
    sens = a.facts["gaussian_mech_3"][1]["lattice"]["sensitivity"]
    dist = float(np.linalg.norm(np.asarray(a.released["beta"]) - np.asarray(c.released["beta"])))
    assert dist >= math.ulp(0.7) / 2                      # the adversarial pair does round apart
    assert dist <= sens < 2 * dist


def _adversarial_run(n: int, b: float) -> np.ndarray:
    """Values in (0, b] whose left-to-right float sum rounds down by almost half an ulp at each step
    (numpy sums the rows of an (n, d >= 2) array in this order)."""
    vals = [b]
    s = b
    for _ in range(n - 1):
        half = Fraction(math.ulp(s + b)) / 2
        target = Fraction(s) + Fraction(b) - half
        f = float(target)
        if Fraction(f) > target:
            f = math.nextafter(f, -math.inf)
        v = Fraction(f) - Fraction(s) + half - Fraction(math.ulp(b))
        assert Fraction(float(v)) == v and 0 < v <= b
        vals.append(float(v))
        s += float(v)
    return np.array(vals)


@pytest.mark.parametrize("kind", ["sum", "mean"])
def test_sum_and_mean_float_errors_cover_adversarial_rounding_and_are_tight_in_n(kind: str) -> None:
    n, r = 2000, 1.5
    v = _adversarial_run(n, r)
    rows = np.zeros((n, 2))
    rows[:, 0] = v
    exact = sum(Fraction(x) for x in v)
    got = NumpyBackend().tree_sum(rows)[0]
    if kind == "mean":
        exact, got = exact / n, got / n
    err = abs(Fraction(got) - exact)
    l2, l1 = FloatError(kind, dp.Vectors(d=2, l2_bound=r), dp.Sym.const(float(n))).bound({}, 2)
    assert float(err) <= l2
    assert float(err) >= l2 / 3  # a bound missing its factor n (or gamma_n) fails here
    assert l1 >= l2 * math.sqrt(2)


def test_mean_float_error_covers_the_division() -> None:
    # one row at the bound: no summation error, only the division by n (and the final rounding)
    n = 3
    rows = np.zeros((n, 2))
    rows[0, 0] = 1.0
    got = NumpyBackend().tree_sum(rows)[0] / n
    err = abs(Fraction(got) - Fraction(1, n))
    l2, _ = FloatError("mean", dp.Vectors(d=2, l2_bound=1.0), dp.Sym.const(float(n))).bound({}, 2)
    assert 0 < err <= l2


def test_freq_float_error_covers_counts_over_n() -> None:
    for n in (3, 7, 1000003):
        worst = max(abs(Fraction(k / n) - Fraction(k, n)) for k in (1, 2, n // 3, n - 1))
        l2, _ = FloatError("freq", dp.Vectors(d=1), dp.Sym.const(float(n))).bound({}, 1)
        assert 0 < worst <= l2 == up(U)


def _ref_bound(fe: FloatError, n: int, values: dict[Any, float]) -> Fraction:
    """The documented l2 bound, evaluated exactly from gamma and the row bounds (which
    test_row_norms_are_pinned pins), independently of FloatError.bound."""
    u = Fraction(U)
    g, gd = Fraction(gamma(n)), Fraction(gamma(fe.domain.d + 2))
    if fe.kind == "freq":
        return u
    if fe.kind == "gram":
        b, r = Fraction(fe.centred_norm(values)), Fraction(fe.centred_norm(values, widen=False))
        return g * b * b + u * b * b + (b - r + 4 * u * b) * (b + r) * Fraction(math.sqrt(2.0)) / (2 * n)
    b = Fraction(fe.row_norm(values))
    out = g * n * b + b * gd
    if fe.kind == "sum":
        return out
    out = out / n + u * b
    if fe.kind == "mean":
        return out
    return Fraction(fe.eta) * out + u * Fraction(fe.offset) + 2 * u * Fraction(fe.eta) * b


@pytest.mark.parametrize(("kind", "center", "eta", "offset"), [
    ("sum", None, 1.0, 0.0), ("mean", None, 1.0, 0.0), ("gram", None, 1.0, 0.0), ("gram", "c", 1.0, 0.0),
    ("freq", None, 1.0, 0.0), ("step", None, 1e-6, 3.0), ("step", None, 2.0, 0.25)])
@pytest.mark.parametrize(("n", "d", "r"), [(10, 1, 1.0), (12345, 7, 3.5)])
def test_float_error_formulas_are_pinned(kind: str, center: str | None, eta: float, offset: float,
                                         n: int, d: int, r: float) -> None:
    dom = dp.Vectors(d=d, l2_bound=r, center=center)
    fe = FloatError(kind, dom, dp.Sym.const(float(n)), center, eta=eta, offset=offset)  # type: ignore[arg-type]
    values = {C: 40.0} if center else {}
    l2, l1 = fe.bound(values, 5)
    ref = _ref_bound(fe, n, values)
    assert ref <= Fraction(l2) <= ref * (1 + Fraction(1, 10**9))
    assert Fraction(l2) * Fraction(math.sqrt(5)) <= Fraction(l1) <= Fraction(l2) * Fraction(math.sqrt(5)) * (1 + 1e-9)


def test_row_norms_are_pinned() -> None:
    fe = FloatError("sum", dp.Vectors(d=4, box=(-3.0, 2.0)), dp.Sym.const(10.0))
    assert fe.row_norm({}) == 3.0 * 2.0
    fe = FloatError("sum", dp.Vectors(d=4, box=(-3.0, 2.0), l2_bound=1.0), dp.Sym.const(10.0))
    assert fe.row_norm({}) == up(1.0) * (1 + gamma(6))
    fe = FloatError("sum", dp.Vectors(d=4, l2_bound=2.0, center="c"), dp.Sym.const(10.0))
    assert fe.row_norm({C: 5.0}) == up(2.0) * (1 + gamma(6)) + 5.0
    assert fe.row_norm({C: 5.0}, widen=False) == up(2.0) + 5.0
    fe = FloatError("gram", dp.Vectors(d=4, l2_bound=2.0, center="c"), dp.Sym.const(10.0), "c")
    b = up(2.0) * (1 + gamma(6))
    assert fe.centred_norm({C: 5.0}) == b + U * (b + 5.0) * 2.0
    assert fe.centred_norm({C: 5.0}, widen=False) == up(2.0)
    assert fe.centred_norm({C: 5.0}) == fe.centred_norm({C: 5.0})
    other = FloatError("gram", dp.Vectors(d=4, l2_bound=2.0, center="c"), dp.Sym.const(10.0), "e")
    assert other.centred_norm({C: 5.0, E: 1.0}) == math.inf      # a ball around another centre
    assert FloatError("sum", dp.Vectors(d=4), dp.Sym.const(10.0)).row_norm({}) == math.inf
    assert gamma(10) >= Fraction(10) * Fraction(U) / (1 - 10 * Fraction(U))
    assert gamma(10) <= 10 * U * (1 + 1e-14)


def test_queries_declare_the_float_error_of_their_computation() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=3), n=100)
    c = b.public([1.0, 2.0, 3.0])
    ball, around = N.Clip(radius=2.0)(X), N.Clip(radius=2.0, center=c)(X)
    q = {"sum": N.Sum()(ball), "mean": N.Mean()(ball), "gram0": N.SecondMoment()(ball),
         "gramc": N.SecondMoment(center=c)(around), "count": N.Count()(X),
         "freq": N.Histogram(edges=[0, 1, 2], normalize=True)(N.Columns(keep=[0])(ball)),
         "trunc": N.TruncatedMean(bound=1.5)(X),
         "step": N.GradientStep(beta=b.public([0.0, 0.0]), eta=0.25, x_bound=2.0, residual_bound=3.0,
                                radius=1.5)(X)}
    cert = certify(b.build(**{k: N.GaussianMech()(h) for k, h in q.items()}))

    def fe(name: str) -> FloatError:
        t = cert.space.types[q[name].id]
        assert isinstance(t, StatT) and t.float_error is not None
        return t.float_error

    n = dp.Sym.const(100.0)
    bounded = dp.Vectors(d=3, l2_bound=2.0)
    assert fe("sum") == FloatError("fixed_sum", bounded)
    assert fe("mean") == FloatError("mean", bounded, n)
    assert fe("gram0") == FloatError("gram", bounded, n)
    assert fe("gramc") == FloatError("gram", dp.Vectors(d=3, l2_bound=2.0, center=c.id), n, c.id)
    assert fe("count").kind == "exact" and fe("freq").kind == "freq" and fe("freq").n == n
    assert fe("trunc") == FloatError("mean", dp.Vectors(d=3, l2_bound=1.5 * math.sqrt(3)), n)
    assert fe("step") == FloatError("step", dp.Vectors(d=2, l2_bound=3.0 * 2.0 * math.sqrt(2)), n,
                                    eta=0.25, offset=1.5)
    # a sum over a private number of rows: the same fixed-point rule (no row count in it)
    ar = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="add_remove")
    s = N.Sum()(N.Clip(radius=1.0)(ar.source("X", dp.Vectors(d=2))))
    t = certify(ar.build(s=N.GaussianMech()(s))).space.types[s.id]
    assert isinstance(t, StatT) and t.float_error == FloatError("fixed_sum", dp.Vectors(d=2, l2_bound=1.0))


@pytest.mark.parametrize("kind", ["sum", "mean", "gram", "gram_sum", "step"])
def test_the_excess_of_computed_rows_counts_once_per_changed_row(kind: Any) -> None:
    """A record that changes ``stability`` rows moves each of them by up to the computed (widened) row bound,
    so the sensitivity excess of computed rows over the declared radius is counted ``stability`` times; the
    summation error itself does not grow.  Pinned: the difference between stability 3 and 1 is exactly twice
    the excess term (before rounding up: relative 1e-12)."""
    dom = dp.Vectors(d=4, l2_bound=dp.Sym.ref(R))
    n = dp.Sym.const(500.0)
    b1 = FloatError(kind, dom, n).bound({R: 2.0}, 4)[0]
    b3 = FloatError(kind, dom, n, stability=3).bound({R: 2.0}, 4)[0]
    fe = FloatError(kind, dom, n)
    if kind in ("gram", "gram_sum"):
        b, r = fe.centred_norm({R: 2.0}), fe.centred_norm({R: 2.0}, widen=False)
        excess = (b - r + 4 * U * b) * (b + r) * math.sqrt(2.0) / 2.0
        excess = excess if kind == "gram_sum" else excess / 500.0
    else:
        excess = fe.row_norm({R: 2.0}) * gamma(4 + 2)
        excess = excess if kind == "sum" else excess / 500.0
    assert b3 - b1 == pytest.approx(2 * excess, rel=1e-9)
    assert b3 > b1


class _Ctx:
    relation = "replace_one"
    node_id = "q"

    def type_of(self, ref: Any) -> Any:
        raise AssertionError(ref)

    def row_count(self) -> RowCount:
        return RowCount("X")


@pytest.mark.parametrize("stability", [1, 3])
def test_queries_carry_their_rows_stability_into_the_float_error(stability: int) -> None:
    rows = RowsT(dp.Vectors(d=2, l2_bound=1.0), "X", Size(True, 10, RowCount("X")), stability,
                 frozenset({"replace"}))
    for q in (N.Sum(), N.Mean(), N.SecondMoment(), N.Gram()):
        stat = q.infer([rows], _Ctx()).out  # type: ignore[arg-type]
        assert isinstance(stat, StatT) and stat.float_error is not None
        assert stat.float_error.stability == stability
