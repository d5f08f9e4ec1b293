"""Mutation-testing pins of ``dpflow/nodes/sparse_vector.py`` (AboveThreshold; first run 2026-11-24).

The release step on both paths (which noise is drawn, at which scale and shape, its sign, ``>=`` at the noisy
threshold), the exact path's lattice (the step, a floor and not a rounding of exact answers, the widening by the
l2 float slack), the declared policies (a NaN answer is never above, nothing is above a NaN or +inf threshold, an
infinite sensitivity or a too-small lowered threshold releases "not found" after drawing as many values), the
accuracy margin's formula, and the texts.  Before these, the declared policies did not always hold: the exact
path placed +-inf at +-2^1100 lattice units, which a finite answer passes when the lattice step is tiny (a
sensitivity near 1e-300), so a +inf threshold was crossed and a NaN answer found; and on the continuous path a
NaN answer was "above" a -inf released threshold (-inf >= -inf) and a +inf answer above a +inf one.  Both paths
now decide the infinities before comparing (public thresholds; the policy on answers as declared).
"""

from __future__ import annotations

import math
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from conftest import EvalCtx

import dpflow as dp
from dpflow import nodes as N
from dpflow.domains import RowCount, Sym, Vectors
from dpflow.errors import DomainError, PlanError
from dpflow.handles import Ref
from dpflow.nodes import sparse_vector
from dpflow.nodes.fixedpoint import FixedPoint
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.mechanisms import float_slack
from dpflow.nodes.sparse_vector import NOT_FOUND, AboveThreshold, found_index, margin, svt_split
from dpflow.nodes.types import Allocation, ReleasedT, StatT
from dpflow.privacy import Cost


class _Noise:
    """The first continuous draw is ``rho`` (the threshold's), later ones ``nu``; discrete ones ``k``; all recorded."""

    def __init__(self, exact: bool, rho: float = 0.0, nu: float = 0.0, k: int = 0) -> None:
        self.exact, self.rho, self.nu, self.k = exact, rho, nu, k
        self.seen: list[tuple[str, Any, tuple[int, ...]]] = []

    def laplace(self, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        self.seen.append(("laplace", scale, shape))
        return np.full(shape, self.rho if len(self.seen) == 1 else self.nu)

    def discrete_laplace(self, scale: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        self.seen.append(("discrete_laplace", scale, shape))
        return np.full(shape, self.k, dtype=np.int64)


def _Ctx(stat: StatT, bound: float, noise: _Noise) -> EvalCtx:
    return EvalCtx(stat, bound, noise.exact, Allocation("pure", Fraction(1), Cost.pure(Fraction(1))), noise,
                   {RowCount("X"): 1e4})


_FE = FloatError("sum", Vectors(d=1, box=(-1e3, 1e3)), Sym.const(1e4))


def _stat(m: int, float_error: FloatError | None = None) -> StatT:
    one = Sym.const(1.0)
    return StatT((m,), "X", one, one, one, float_error=float_error)


def _run(node: AboveThreshold, f: list[float] | FixedPoint, noise: _Noise, bound: float = 1.0,
         float_error: FloatError | None = None) -> tuple[int, _Ctx]:
    m = len(f.units) if isinstance(f, FixedPoint) else len(f)
    ctx = _Ctx(_stat(m, float_error), bound, noise)
    return node.evaluate([f if isinstance(f, FixedPoint) else np.array(f)], ctx), ctx  # type: ignore[arg-type]


# --- the continuous release ------------------------------------------------------------------------------------


def test_continuous_release_draws_one_threshold_noise_then_m_answer_noises_and_halts_at_ge() -> None:
    """T_hat = T + rho, halt at the first f_i + nu_i >= T_hat: with rho = 1, nu = 0.5 and T = 2 the answer 2.5
    meets T_hat = 3 exactly."""
    node = AboveThreshold(threshold=2.0)
    noise = _Noise(False, rho=1.0, nu=0.5)
    out, ctx = _run(node, [0.0, 1.5, 2.5, 9.0], noise)
    b1, b2 = node.scales(1.0, Fraction(1), "pure")
    assert out == 2 and noise.seen == [("laplace", b1, (1,)), ("laplace", b2, (4,))]
    assert ctx.facts == {"scales": (b1, b2)}
    assert _run(node, [0.0, 1.5, 2.4], _Noise(False, rho=1.0, nu=0.5))[0] == NOT_FOUND


@pytest.mark.parametrize("exact", [False, True])
def test_a_nan_answer_is_never_above_and_nothing_is_above_an_infinite_threshold(
        exact: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """An infinite threshold is a released one (+inf also stands for NaN): patched in here."""
    node = AboveThreshold(threshold=0.0)
    monkeypatch.setattr(sparse_vector, "_threshold_value", lambda ctx, t: -math.inf)
    assert _run(node, [math.nan, 3.0], _Noise(exact), float_error=_FE)[0] == 1
    monkeypatch.setattr(sparse_vector, "_threshold_value", lambda ctx, t: math.inf)
    assert _run(node, [1e300, math.inf], _Noise(exact), float_error=_FE)[0] == NOT_FOUND


def test_the_exact_path_decides_infinities_before_any_floor() -> None:
    """A tiny sensitivity makes a tiny lattice step: 1e300 is about 2^2030 units, beyond the +-2^1100 that stood
    for +-inf before (so the old code found the first answer here, and the NaN one in the second case)."""
    node, (eps1, eps2) = AboveThreshold(threshold=0.0), svt_split(Fraction(1))
    ctx = _Ctx(_stat(1), 1e-300, _Noise(True))
    assert node._exact(np.array([1e300]), math.inf, 1e-300, eps1, eps2, ctx) == NOT_FOUND  # type: ignore[arg-type]
    ctx = _Ctx(_stat(2), 1e-300, _Noise(True))
    assert node._exact(np.array([-math.inf, -1e300]), -1e300, 1e-300, eps1, eps2, ctx) == 1  # type: ignore[arg-type]


# --- the exact release -----------------------------------------------------------------------------------------


def test_exact_release_floors_exact_answers_and_draws_discrete_laplace_in_units() -> None:
    """delta = 2^41: step 2 (2^-40 of delta's power of two), D = 2^40 units.  The exact answer 7 floors to 3 units
    (rounding would give 4), below floor(8 / 2) = 4; 9 floors to 4 and halts."""
    eps1, eps2 = svt_split(Fraction(1))
    delta = 2.0**41
    D = 2**40
    for units, want in (([7], NOT_FOUND), ([7, 9], 1)):
        noise = _Noise(True)
        ctx = _Ctx(_stat(len(units)), delta, noise)
        fixed = FixedPoint(np.array(units, dtype=object), 0)
        got = AboveThreshold(threshold=8.0)._exact(fixed.as_float(), 8.0, delta, eps1, eps2, ctx, fixed)  # type: ignore[arg-type]
        assert got == want
        t1, t2 = Fraction(D) / eps1, Fraction(2 * D) / eps2
        assert noise.seen == [("discrete_laplace", t1, (1,)), ("discrete_laplace", t2, (len(units),))]
        assert ctx.facts == {"scales": (float(t1) * 2.0, float(t2) * 2.0), "lattice": {"step": 2.0,
                                                                                       "sensitivity_units": D}}


def test_exact_release_of_a_zero_sensitivity_is_on_the_unit_lattice() -> None:
    eps1, eps2 = svt_split(Fraction(1))
    ctx = _Ctx(_stat(2), 0.0, _Noise(True))
    assert AboveThreshold(threshold=1.0)._exact(np.array([0.5, 1.0]), 1.0, Fraction(0), eps1, eps2, ctx) == 1  # type: ignore[arg-type]
    assert ctx.facts["lattice"] == {"step": 1.0, "sensitivity_units": 1}
    assert ctx.facts["scales"] == (float(1 / eps1), float(2 / eps2))


def test_exact_release_widens_by_the_l2_float_slack_of_the_answers() -> None:
    """The answers' sensitivity is l-infinity: the l2 slack (>= linf) widens it, not the larger l1 one."""
    m = 3
    stat = _stat(m, _FE)
    slack_l2, slack_l1 = float_slack(stat, {}, m)
    assert slack_l1 > slack_l2 > 0
    out, ctx = _run(AboveThreshold(threshold=1.0), [0.0, 0.5, 2.0], _Noise(True), float_error=_FE)
    step = ctx.facts["lattice"]["step"]
    assert out == 2 and step == 2.0**-40
    assert ctx.facts["lattice"]["sensitivity_units"] == math.ceil((1 + Fraction(slack_l2)) / Fraction(step))


def test_continuous_sources_take_the_continuous_path_whatever_the_float_error() -> None:
    out, ctx = _run(AboveThreshold(threshold=1.0), [0.0, 2.0], _Noise(False), float_error=_FE)
    assert out == 1 and set(ctx.facts) == {"scales"}


@pytest.mark.parametrize(("exact", "bound", "float_error"), [
    (False, math.inf, None), (True, math.inf, _FE),
    (True, 1.0, FloatError("sum", Vectors(d=1, box=(-1e300, 1e300)), Sym.const(1e10)))])  # slack inf
def test_an_infinite_sensitivity_releases_not_found_after_as_many_draws(exact: bool, bound: float,
                                                                        float_error: FloatError | None) -> None:
    noise = _Noise(exact)
    out, ctx = _run(AboveThreshold(threshold=0.0), [5.0, 6.0], noise, bound=bound, float_error=float_error)
    assert out == NOT_FOUND and ctx.facts == {"scales": (math.inf, math.inf)}
    assert noise.seen == [("discrete_laplace", Fraction(1), (3,)) if exact else ("laplace", 1.0, (3,))]


# --- the lowered threshold -------------------------------------------------------------------------------------


def test_margin_formula() -> None:
    got = margin(1.5, 7, 0.3, 0.7, 0.05)
    assert got == pytest.approx(1.5 * math.log(1 / 0.05) / 0.3 + 2 * 1.5 * math.log(7 / 0.05) / 0.7, rel=1e-14)


def test_a_lowered_threshold_below_its_minimum_releases_not_found_without_looking() -> None:
    eps1, eps2 = svt_split(Fraction(1))
    T = 10.0 - margin(1.0, 2, float(eps1), float(eps2), 0.1)
    at_min = AboveThreshold(threshold=10.0, margin_beta=0.1, min_threshold=T)
    out, ctx = _run(at_min, [-1e6, 1e6], _Noise(False))
    assert out == 1 and ctx.facts["threshold"] == T
    above_min = AboveThreshold(threshold=10.0, margin_beta=0.1, min_threshold=math.nextafter(T, math.inf))
    assert _run(above_min, [1e6, 1e6], _Noise(False))[0] == NOT_FOUND
    assert _run(above_min, [1e6, 1e6], _Noise(True), float_error=_FE)[0] == NOT_FOUND


# --- parameters, refusals and texts ----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0.0, 1.0, 2.0])
def test_margin_beta_is_in_the_open_unit_interval(bad: float) -> None:
    with pytest.raises(ValueError) as info:
        AboveThreshold(threshold=0.0, margin_beta=bad)
    assert str(info.value) == f"margin_beta must be in (0, 1), got {bad!r}"
    assert AboveThreshold(threshold=0.0, margin_beta=0.5).margin_beta == 0.5


def test_min_threshold_is_finite() -> None:
    with pytest.raises(ValueError) as info:
        AboveThreshold(threshold=0.0, min_threshold=math.inf)
    assert str(info.value) == "min_threshold must be finite, got inf"


def test_found_index() -> None:
    assert found_index(0) == 0 and found_index(np.int64(4)) == 4 and found_index(NOT_FOUND) is None


_CTX: Any = SimpleNamespace(node_id="at", relation="replace")


def _refusal(f: Any) -> tuple[str, str | None, str, str]:
    with pytest.raises(PlanError) as info:
        f()
    e = info.value
    return type(e).__name__, e.node, e.problem, e.fix


def test_the_refusals() -> None:
    node = AboveThreshold(threshold=0.0)
    what = "a vector of query answers (Histogram, TerrificScores, ...)"
    assert _refusal(lambda: node.infer([ReleasedT(())], _CTX)) == (
        "PlanTypeError", "at", f"expects {what}, got Released", f"pass {what}")
    for shape in ((), (0,), (2, 2)):
        assert _refusal(lambda shape=shape: node.infer([StatT(shape, "X", None, None, None)], _CTX)) == (
            "DomainError", "at", f"AboveThreshold scans a non-empty vector of answers, got shape {shape}",
            "feed it a vector statistic (one answer per query)")
    assert _refusal(lambda: node.check_input(StatT((2,), "X", None, None, None), _CTX)) == (
        "UnboundedSensitivityError", "at", "its answers have unbounded l-infinity sensitivity",
        "bound the rows (Clip) before the query")
    assert node.check_input(_stat(2), _CTX) == "linf (Delta) = 1"


def test_a_released_threshold_must_be_a_scalar_and_the_release_is_one() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(Fraction(1, 2)))
    X = b.source("X", dp.Reals(), n=50)
    h = N.Histogram(edges=[0, 1, 2])(X)
    t = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(b.source("Y", dp.Vectors(d=2), n=50))))
    at = AboveThreshold(threshold=t)(h)
    with pytest.raises(DomainError) as info:
        dp.certify(b.build(at=at))
    assert (info.value.node, info.value.problem, info.value.fix) == (
        at.id, f"threshold refers to {t.id} of shape (2,)", "pass a released scalar")
    b = dp.PlanBuilder(budget=dp.ZCDP(Fraction(1, 2)))
    at = AboveThreshold(threshold=1.0)(N.Histogram(edges=[0, 1, 2])(b.source("X", dp.Reals(), n=50)))
    assert dp.certify(b.build(at=at)).space.types[at.id] == ReleasedT(())


def test_the_noise_text() -> None:
    node = AboveThreshold(threshold=0.0)
    eps1, eps2 = svt_split(Fraction(1))
    head = f"threshold Laplace b = 1 / {float(eps1):.6g}, answers Laplace b = 2*1 / {float(eps2):.6g}"
    assert node.noise_text(_stat(2), Fraction(1), "pure") == (
        head + "; continuous noise on every source (no floating-point error bound)")
    assert node.noise_text(_stat(2, _FE), Fraction(1), "pure") == (
        head + "; exact sources: discrete Laplace on a 2^-k lattice of the answers")


def test_a_nan_released_threshold_counts_as_plus_inf() -> None:
    ctx: Any = SimpleNamespace(value=lambda ref: np.array(math.nan))
    assert sparse_vector._threshold_value(ctx, Ref("t")) == math.inf
    ctx = SimpleNamespace(value=lambda ref: np.array(2.5))
    assert sparse_vector._threshold_value(ctx, Ref("t")) == 2.5 and sparse_vector._threshold_value(ctx, 1.5) == 1.5


def test_a_threshold_must_refer_to_a_released_value() -> None:
    ctx: Any = SimpleNamespace(node_id="at", relation="replace", type_of=lambda ref: _stat(2))
    assert _refusal(lambda: AboveThreshold(threshold=Ref("h")).infer([_stat(2)], ctx)) == (
        "PostProcessingError", "at", "parameter 'threshold' refers to h, which is not released",
        "pass the output of a mechanism or of public()")


def test_exact_answers_are_floored_exactly_not_from_their_float_view() -> None:
    """delta 2^100: step 2^60.  The exact answer 2^61 - 1 floors to 1 unit; its float view (2^61) would floor to 2
    and meet the threshold 2^61 (2 units)."""
    fixed = FixedPoint(np.array([2**61 - 1], dtype=object), 0)
    out, ctx = _run(AboveThreshold(threshold=2.0**61), fixed, _Noise(True), bound=2.0**100, float_error=_FE)
    assert ctx.facts["lattice"]["step"] == 2.0**60 and out == NOT_FOUND
    out, _ = _run(AboveThreshold(threshold=2.0**61), FixedPoint(np.array([2**61], dtype=object), 0), _Noise(True),
                  bound=2.0**100, float_error=_FE)
    assert out == 0


def test_float_answers_are_floored_exactly_even_where_their_quotient_overflows() -> None:
    """A tiny sensitivity (step about 2^-1040): 1e300 / step overflows a float, the exact floor does not, and is
    above the threshold 1e299."""
    out, _ = _run(AboveThreshold(threshold=1e299), [1e300], _Noise(True), bound=1e-300, float_error=_FE)
    assert out == 0


def test_the_lattice_step_below_sensitivity_one() -> None:
    eps1, eps2 = svt_split(Fraction(1))
    ctx = _Ctx(_stat(1), 0.5, _Noise(True))
    AboveThreshold(threshold=1.0)._exact(np.array([0.5]), 1.0, 0.5, eps1, eps2, ctx)  # type: ignore[arg-type]
    assert ctx.facts["lattice"] == {"step": 2.0**-41, "sensitivity_units": 2**40}


def test_the_float_slack_reads_the_public_row_count() -> None:
    fe = FloatError("sum", Vectors(d=1, box=(-1e3, 1e3)), Sym.ref(RowCount("X")))
    out, ctx = _run(AboveThreshold(threshold=1.0), [0.0, 2.0], _Noise(True), float_error=fe)
    assert out == 1 and ctx.facts["lattice"]["sensitivity_units"] > 2**40
