"""Declared bounds: validation where they are made and decoded, the float64 overflow cap, and the
floating-point error bounds pinned against exact (Fraction) computations (issue 14, items 4-6, 10)."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from conftest import ExactZeroNoise, ZeroNoise

import dpflow as dp
from dpflow import nodes as N
from dpflow.domains import MAX_BOUND
from dpflow.errors import DomainError, SerializationError, UnboundedSensitivityError
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.nodes.floaterr import OVERFLOW, FloatError, U, gamma
from dpflow.nodes.regression import project_coef
from dpflow.nodes.rules import capped
from dpflow.nodes.types import StatT
from dpflow.plan.serialize import decode
from dpflow.planner.certify import certify
from dpflow.privacy.rounding import up

# --------------------------------------------------------------------------- item 4: negative bounds


@pytest.mark.parametrize("bad", [-1.0, -1e-300, math.nan, math.inf, -math.inf])
def test_bounds_must_be_finite_and_non_negative(bad: float) -> None:
    with pytest.raises(ValueError, match="finite and non-negative"):
        dp.Sym(bad)
    with pytest.raises(ValueError, match="finite and non-negative"):
        dp.Sym.const(bad)
    with pytest.raises(ValueError):
        dp.Vectors(d=2, l2_bound=dp.Sym(bad))
    with pytest.raises(ValueError):
        dp.Vectors(d=2, l2_bound=bad)
    assert dp.Sym(0.0).coef == 0.0 and dp.Vectors(d=2, l2_bound=3).l2_bound == dp.Sym.const(3.0)


def test_a_negative_bound_cannot_reach_peel() -> None:
    # before: Vectors(l2_bound=Sym(-1.0)) certified, Peel computed noise scale 0 and released the exact mean
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    with pytest.raises(ValueError, match="finite and non-negative"):
        b.source("X", dp.Vectors(d=5, l2_bound=dp.Sym(-1.0)), n=100)


def _peel_plan_json() -> str:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=5, l2_bound=dp.Sym.const(1.0)), n=100)
    return b.build(top=N.Peel(s=2)(N.Mean()(X))).to_json()


@pytest.mark.parametrize("coef", ["-1.0", "-0.5", "NaN", "Infinity", "1e400", "true", "\"1\""])
def test_json_bounds_are_validated_when_decoded(coef: str) -> None:
    text = _peel_plan_json()
    assert '{"$sym":[1.0,[]]}' in text
    assert dp.Plan.from_json(text).hash == dp.Plan.from_json(text).hash
    with pytest.raises(SerializationError):
        dp.Plan.from_json(text.replace('{"$sym":[1.0,[]]}', '{"$sym":[' + coef + ',[]]}'))


@pytest.mark.parametrize("factor", [["radius", 0.5], ["radius", True], [3, 1], ["radius", "1"]])
def test_json_bound_factors_are_not_coerced(factor: list[Any]) -> None:
    # before: int(0.5) == 0 silently dropped the released factor from the bound
    with pytest.raises((ValueError, SerializationError)):
        decode(json.loads(json.dumps({"$sym": [2.0, [factor]]})))
    assert decode({"$sym": [2.0, [["radius", 1]]]}) == dp.Sym(2.0, (("radius", 1),))


def test_domain_sizes_must_be_integers() -> None:
    for bad in (2.5, True, "3", 0):
        with pytest.raises(ValueError):
            dp.Vectors(d=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            dp.Ordinal(N=bad)  # type: ignore[arg-type]
    assert dp.Vectors(d=np.int64(3), l2_bound=np.int64(2)).l2_bound == dp.Sym.const(2.0)
    assert dp.Ordinal(N=np.int64(5)).as_vectors().box == (0.0, 4.0)


def test_reals_bounds_are_validated() -> None:
    for lo, hi in [(0.0, math.nan), (-math.inf, 1.0), (2.0, 1.0)]:
        with pytest.raises(ValueError):
            dp.Reals(lower=lo, upper=hi)
    assert dp.Reals(lower=-1.0, upper=1.0).as_vectors().box == (-1.0, 1.0)
    assert dp.Reals(lower=np.int64(-1), upper=np.float32(2.0)).as_vectors().box == (-1.0, 2.0)


# --------------------------------------------------------------------------- item 5: float overflow


def _mean_plan(domain: Any, n: int) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", domain, n=n)
    return b.build(m=N.GaussianMech()(N.Mean()(X)))


def test_public_domains_whose_sums_can_overflow_are_refused() -> None:
    # before: a Mean over box (0, 1e308) was certified; it is inf on [1e308, 1e308] and finite on [1e308, 0]
    with pytest.raises(DomainError, match="overflow"):
        certify(_mean_plan(dp.Vectors(d=1, box=(0.0, 1e308)), 2))
    with pytest.raises(DomainError, match="overflow"):
        certify(_mean_plan(dp.Reals(lower=-1e300, upper=0.0), 2))
    with pytest.raises(DomainError, match="overflow"):
        certify(_mean_plan(dp.Vectors(d=2, l2_bound=1e300), 2))
    # the cap is exactly MAX_BOUND = 2^256
    assert MAX_BOUND == 2.0**256
    certify(_mean_plan(dp.Vectors(d=1, box=(-MAX_BOUND, MAX_BOUND)), 2))
    certify(_mean_plan(dp.Vectors(d=2, l2_bound=MAX_BOUND), 2))
    with pytest.raises(DomainError):
        certify(_mean_plan(dp.Vectors(d=1, box=(0.0, math.nextafter(MAX_BOUND, math.inf))), 2))
    with pytest.raises(DomainError):
        certify(_mean_plan(dp.Vectors(d=2, l2_bound=math.nextafter(MAX_BOUND, math.inf)), 2))


def test_at_the_cap_sums_stay_finite() -> None:
    plan = _mean_plan(dp.Vectors(d=2, box=(-MAX_BOUND, MAX_BOUND)), 1000)
    ex = execute(certify(plan), {"X": np.full((1000, 2), 1e300)}, ZeroNoise(), NumpyBackend())
    assert np.all(ex.released["m"] == MAX_BOUND)


def test_public_clip_and_step_parameters_beyond_the_cap_are_refused() -> None:
    big = math.nextafter(MAX_BOUND, math.inf)
    for kwargs in ({"radius": big}, {"radius": 1e200}, {"box": (0.0, 1e300)}, {"box": (-big, 0.0)},
                   {"radius": 1.0, "center": [0.0, 1e300]}):
        with pytest.raises(ValueError, match="at most"):
            N.Clip(**kwargs)
    N.Clip(radius=MAX_BOUND, center=[MAX_BOUND, -MAX_BOUND], box=(-MAX_BOUND, MAX_BOUND))
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    beta = b.public([0.0])
    base = {"eta": 1.0, "x_bound": 1.0, "residual_bound": 1.0, "radius": 1.0}
    for key in base:
        with pytest.raises(ValueError, match="at most"):
            N.GradientStep(beta=beta, **{**base, key: big})
    with pytest.raises(ValueError, match="at most"):
        N.TruncatedMean(bound=big)


def test_released_bounds_follow_the_cap_policy() -> None:
    assert capped(math.inf) == MAX_BOUND and capped(1e300) == MAX_BOUND and capped(MAX_BOUND) == MAX_BOUND
    assert capped(math.nan) == 0.0 and capped(-1.0) == 0.0 and capped(0.0) == 0.0 and capped(3.5) == 3.5


def _released_radius_plan(radius: float, n: int) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=n)
    return b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=b.public(radius))(X))))


def test_a_huge_released_radius_is_capped_not_an_exception() -> None:
    # before: project_ball squared the radius with ** and raised OverflowError above ~1.34e154
    cert = certify(_released_radius_plan(1e300, 2))
    for rows in ([[1e308, 0.0], [1e308, 0.0]], [[1e308, 0.0], [0.0, 0.0]], [[math.nan, 1.0], [math.inf, 0.0]]):
        ex = execute(cert, {"X": np.array(rows)}, ZeroNoise(), NumpyBackend())
        m = ex.released["m"]
        assert np.all(np.isfinite(m)) and np.linalg.norm(m) <= MAX_BOUND
    ex = execute(cert, {"X": np.array([[1e308, 0.0], [1e308, 0.0]])}, ZeroNoise(), NumpyBackend())
    assert ex.released["m"][0] == pytest.approx(MAX_BOUND, rel=1e-11)


def test_a_huge_released_residual_bound_cannot_overflow_the_gradient() -> None:
    # before: A = 1e298 let the residual reach 1e298, and the sum of x * r overflowed on some data only
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    Z = b.source("Z", dp.Vectors(d=3), n=4)
    step = N.GradientStep(beta=b.public([0.0, 0.0]), eta=1.0, x_bound=1e10, residual_bound=b.public(1e298),
                          radius=1.0)(Z)
    cert = certify(b.build(beta=N.GaussianMech()(step)))
    outs = []
    for y in (1e300, 0.0):
        Zd = np.ones((4, 3)) * 1e10
        Zd[:, 2] = y
        outs.append(execute(cert, {"Z": Zd}, ZeroNoise(), NumpyBackend()).released["beta"])
    assert all(np.all(np.isfinite(o)) for o in outs)


def test_a_huge_released_truncation_bound_cannot_overflow_the_mean() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=1), n=2)
    cert = certify(b.build(m=N.GaussianMech()(N.TruncatedMean(bound=b.public(1e308))(X))))
    for rows in ([[1e308], [1e308]], [[1e308], [0.0]]):
        m = execute(cert, {"X": np.array(rows)}, ZeroNoise(), NumpyBackend()).released["m"]
        assert np.all(np.isfinite(m))


def test_the_float_error_is_infinite_when_a_sum_could_overflow() -> None:
    dom = dp.Vectors(d=2, l2_bound=dp.Sym.ref("r"))
    n = dp.Sym.const(1000.0)
    b_ok = OVERFLOW / 1000.0 / (1.0 + gamma(4)) / 2.0
    assert math.isfinite(FloatError("mean", dom, n).bound({"r": b_ok}, 2)[0])
    assert FloatError("mean", dom, n).bound({"r": OVERFLOW / 1000.0}, 2) == (math.inf, math.inf)
    assert FloatError("sum", dom, n).bound({"r": 1e300}, 2) == (math.inf, math.inf)
    # before: b * b overflowed and the gram's excess term was inf - inf = NaN
    assert FloatError("gram", dom, n).bound({"r": 1e200}, 3) == (math.inf, math.inf)
    assert math.isfinite(FloatError("gram", dom, n).bound({"r": math.sqrt(b_ok)}, 3)[0])
    assert FloatError("gram", dom, n).bound({"r": math.sqrt(OVERFLOW / 1000.0)}, 3) == (math.inf, math.inf)
    around = dp.Vectors(d=2, l2_bound=1.0, center="c")               # small centred rows, a huge centre
    assert math.isfinite(FloatError("gram", around, n, "c").bound({"norm:c": 2.0**500}, 3)[0])
    assert FloatError("gram", around, n, "c").bound({"norm:c": 2.0**560}, 3) == (math.inf, math.inf)
    step = FloatError("step", dom, n, eta=4.0, offset=1.0)
    assert math.isfinite(step.bound({"r": b_ok / 4.0}, 2)[0])
    assert step.bound({"r": OVERFLOW / 4000.0}, 2) == (math.inf, math.inf)


# --------------------------------------------------------------------------- item 6: GradientStep


class _SpyBackend(NumpyBackend):
    """Records every array summed, to rebuild the exact mean of the rows the node computed."""

    def __init__(self) -> None:
        self.summed: list[np.ndarray] = []

    def tree_sum(self, X: Any) -> np.ndarray:
        self.summed.append(np.array(X, dtype=float))
        return super().tree_sum(X)


def _step_plan(eta: float, n: int, d: int, beta: list[float], radius: float) -> tuple[dp.Plan, str]:
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
    plan, sid = _step_plan(eta, n, d, beta0, radius)
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
    execute(certify(_step_plan(1.0, n, d, [0.7, -0.7], radius)[0]), {"Z": X}, ZeroNoise(), spy)
    G = spy.summed[0]
    i = int(np.argmax(G[:, 0] * np.sign(G[:, 0].sum())))
    Y = X.copy()
    Y[i, :d] = 0.0                                      # that row's gradient term becomes 0
    g_x, g_y = abs(G[:, 0].sum()) / n, abs(G[:, 0].sum() - G[i, 0]) / n
    eta = math.ulp(0.7) / 2 / ((g_x + g_y) / 2)           # eta * g crosses half an ulp of beta between them
    cert = certify(_step_plan(eta, n, d, [0.7, -0.7], radius)[0])
    a = execute(cert, {"Z": X}, ExactZeroNoise(), NumpyBackend())
    c = execute(cert, {"Z": Y}, ExactZeroNoise(), NumpyBackend())
    sens = a.facts["gaussian_mech_3"][1]["lattice"]["sensitivity"]
    dist = float(np.linalg.norm(np.asarray(a.released["beta"]) - np.asarray(c.released["beta"])))
    assert dist >= math.ulp(0.7) / 2                      # the adversarial pair does round apart
    assert dist <= sens < 2 * dist


# --------------------------------------------------------------------------- item 10: rules pinned


def _declared_covers_or_refused(plan: dp.Plan, X: np.ndarray, Y: np.ndarray, name: str) -> None:
    """Either the planner refuses the plan, or the statistic moves by at most its declared l2 sensitivity."""
    try:
        cert = certify(plan)
    except UnboundedSensitivityError:
        return
    a = execute(cert, {"X": X}, ZeroNoise(), NumpyBackend())
    c = execute(cert, {"X": Y}, ZeroNoise(), NumpyBackend())
    mech = next(r for r in cert.plan.records if r.id.startswith("gaussian_mech"))
    stat = cert.space.types[mech.inputs[0]]
    assert isinstance(stat, StatT) and stat.l2 is not None
    sens = stat.l2.value({"n:source_0": float(X.shape[0])})
    assert np.linalg.norm(np.asarray(a.released[name]) - np.asarray(c.released[name])) <= sens * (1 + 1e-9)


def test_columns_after_a_clip_around_another_centre_drops_the_norm_bound() -> None:
    n = 10
    X = np.full((n, 2), 100.0)
    Y = X.copy()
    Y[0] = [101.0, 101.0]
    X[0] = [99.0, 99.0]
    for neighbors in ("replace", "add_remove"):
        b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors=neighbors)
        src = b.source("X", dp.Vectors(d=2), n=n if neighbors == "replace" else None)
        cols = N.Columns(keep=[0])(N.Clip(radius=1.5, center=b.public([100.0, 100.0]))(src))
        query = N.SecondMoment() if neighbors == "replace" else N.Sum()
        plan = b.build(s=N.GaussianMech()(query(cols)))
        with pytest.raises(UnboundedSensitivityError):
            certify(plan)
        _declared_covers_or_refused(plan, X, Y, "s")


def test_columns_keeps_a_bound_around_the_origin_and_the_box() -> None:
    for kwargs, sens in (({"radius": 2.0}, 2 * 2.0 / 10), ({"box": (-1.0, 3.0)}, 4.0 / 10)):
        b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
        cols = N.Columns(keep=[1])(N.Clip(**kwargs)(b.source("X", dp.Vectors(d=3), n=10)))
        cert = certify(b.build(m=N.GaussianMech()(N.Mean()(cols))))
        stat = cert.space.types["mean_3"]
        assert isinstance(stat, StatT) and stat.l2 is not None and stat.l2.value({}) == pytest.approx(sens)


def test_ordinal_integer_data_outside_the_range_is_clipped_into_it() -> None:
    N_ = 7
    src = N.Source(name="X", domain=dp.Ordinal(N=N_), n=None)
    ints = np.array([-5, -1, 0, 3, 6, 7, 100, np.iinfo(np.int64).min, np.iinfo(np.int64).max])
    assert src.prepare(ints, "s")[:, 0].tolist() == [0, 0, 0, 3, 6, 6, 6, 0, 6]
    # before: unsigned values above 2^63 wrapped to negative int64 and landed in bin 0
    uints = np.array([0, 6, 7, 2**63, 2**64 - 1], dtype=np.uint64)
    assert src.prepare(uints, "s")[:, 0].tolist() == [0, 6, 6, 6, 6]
    small = np.array([-128, 127], dtype=np.int8)
    assert src.prepare(small, "s")[:, 0].tolist() == [0, 6]
    one = N.Source(name="X", domain=dp.Ordinal(N=1), n=None)
    assert one.prepare(np.array([True, False]), "s")[:, 0].tolist() == [0, 0]
    two = N.Source(name="X", domain=dp.Ordinal(N=2), n=None)
    assert two.prepare(np.array([True, False]), "s").tolist() == [[1], [0]]
    out = src.prepare(np.array([-0.5, 6.9, 7.0, 1e300, -math.inf, math.nan]), "s")
    assert out[:, 0].tolist() == [0, 6, 6, 6, 0, 0] and out.dtype == np.int64


# --------------------------------------------------------------------------- float-error margins


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


def _ref_bound(fe: FloatError, n: int, values: dict[str, float]) -> Fraction:
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
    values = {"norm:c": 40.0} if center else {}
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
    assert fe.row_norm({"norm:c": 5.0}) == up(2.0) * (1 + gamma(6)) + 5.0
    assert fe.row_norm({"norm:c": 5.0}, widen=False) == up(2.0) + 5.0
    fe = FloatError("gram", dp.Vectors(d=4, l2_bound=2.0, center="c"), dp.Sym.const(10.0), "c")
    b = up(2.0) * (1 + gamma(6))
    assert fe.centred_norm({"norm:c": 5.0}) == b + U * (b + 5.0) * 2.0
    assert fe.centred_norm({"norm:c": 5.0}, widen=False) == up(2.0)
    assert fe.centred_norm({"norm:c": 5.0}) == fe.centred_norm({"norm:c": 5.0})
    other = FloatError("gram", dp.Vectors(d=4, l2_bound=2.0, center="c"), dp.Sym.const(10.0), "e")
    assert other.centred_norm({"norm:c": 5.0, "norm:e": 1.0}) == math.inf      # a ball around another centre
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
    assert fe("sum") == FloatError("sum", bounded, n)
    assert fe("mean") == FloatError("mean", bounded, n)
    assert fe("gram0") == FloatError("gram", bounded, n)
    assert fe("gramc") == FloatError("gram", dp.Vectors(d=3, l2_bound=2.0, center=c.id), n, c.id)
    assert fe("count").kind == "exact" and fe("freq").kind == "freq" and fe("freq").n == n
    assert fe("trunc") == FloatError("mean", dp.Vectors(d=3, l2_bound=1.5 * math.sqrt(3)), n)
    assert fe("step") == FloatError("step", dp.Vectors(d=2, l2_bound=3.0 * 2.0 * math.sqrt(2)), n,
                                    eta=0.25, offset=1.5)
    # a sum over a private number of rows has no float-error bound (its release is continuous)
    ar = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="add_remove")
    s = N.Sum()(N.Clip(radius=1.0)(ar.source("X", dp.Vectors(d=2))))
    t = certify(ar.build(s=N.GaussianMech()(s))).space.types[s.id]
    assert isinstance(t, StatT) and t.float_error is None
