"""Mutation-testing pins of ``dpflow/nodes/regression.py`` (first run 2026-11-29: 123 survivors of 494).

The gradient step's sensitivity (stability 2 eta c_x A / n in linf, times sqrt(d) and d) and its value against
the formula written out (the clips of x, of y to A - c_x K and of the residual to A, a released A under its
declared cap), every refusal; the projections against independent references (the l1 ball by bisection on the
threshold, the l2 ball by scaling, the s largest entries with ties by index, non-finite entries as 0); the ridge
solve's lambda = ridge scale^2 and its policy.  The projections and the solve are post-processing (no privacy
rule), but a wrong projection was a surviving mutant all the same.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest
from conftest import ValueCtx

import dpflow as dp
from dpflow.domains import ReleasedScalar, RowCount, Sym
from dpflow.errors import DomainError
from dpflow.handles import Ref
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.regression import GradientStep, ProjectCoef, RidgeSolve, l1_bound, project_coef, project_l1
from dpflow.nodes.rules import capped
from dpflow.nodes.types import ReleasedT, RowsT, Size, StatT


def _eval(values: dict[str, Any]) -> ValueCtx:
    return ValueCtx(values, "g")


class _Infer:
    relation = "replace"
    node_id = "g"

    def __init__(self, beta_shape: tuple[int, ...] | None = (2,), a_shape: tuple[int, ...] | None = ()) -> None:
        self.shapes = {"b": beta_shape, "A": a_shape}

    def type_of(self, ref: Any) -> Any:
        return ReleasedT(self.shapes[ref.id])

    def row_count(self) -> RowCount:
        return RowCount("g")


def _rows(d: int = 3, stability: int = 2) -> RowsT:
    return RowsT(dp.Vectors(d=d), "Z", Size(True, 50, RowCount("Z")), stability, frozenset({"replace"}))


def _step(**kw: Any) -> GradientStep:
    args: dict[str, Any] = {"beta": Ref("b"), "eta": 0.5, "x_bound": 2.0, "residual_bound": 3.0, "radius": 1.5}
    args.update(kw)
    return GradientStep(**args)


def test_gradient_step_sensitivity_and_float_error() -> None:
    """linf = stability 2 eta c_x A / n; l2 = linf sqrt(d); l1 = linf d; the float error of a step with rows of
    l2 norm c_x sqrt(d) A."""
    stat = _step().infer([_rows()], _Infer()).out  # type: ignore[arg-type]
    unit = 2 * 2.0 * 0.5 * 2.0 * 3.0 / 50
    assert isinstance(stat, StatT) and stat.shape == (2,)
    assert stat.linf is not None and stat.l2 is not None and stat.l1 is not None
    assert (stat.linf.coef, stat.l2.coef, stat.l1.coef) == pytest.approx((unit, unit * math.sqrt(2), unit * 2),
                                                                         rel=1e-15)
    assert stat.float_error == FloatError("step", dp.Vectors(d=2, l2_bound=Sym.const(3.0) * (2.0 * math.sqrt(2))),
                                          Sym.const(50.0), eta=0.5, offset=1.5, stability=2)
    released = _step(residual_bound=Ref("A")).infer([_rows()], _Infer()).out  # type: ignore[arg-type]
    assert released.linf == Sym.ref(ReleasedScalar("A")) * (2 * 0.5 * 2.0 * 2) / 50.0


def test_gradient_step_derivation() -> None:
    assert _step(sparsity=1).infer([_rows()], _Infer()).derivation == (  # type: ignore[arg-type]
        "gradient step over rows [x, y] of d=2, n=50: |x_j| <= c_x = 2, ||beta||_1 <= K = 1.5 (l2 ball, s=1), "
        "|residual| <= A = 3; linf = stability*2*eta*c_x*A/n = 0.24, l2 = linf*sqrt(d) = 0.339411; missing values: "
        "a row with a NaN or infinite entry adds nothing")


def test_gradient_step_refusals() -> None:
    cases = [
        (_step(), _rows(d=1), _Infer(), "rows must be [x, y] with at least one feature",
         "pass rows with d + 1 >= 2 columns, the response last"),
        (_step(beta=[0.0, 0.0]), _rows(), _Infer(), "beta must be a released handle", "wrap a constant with public()"),
        (_step(), _rows(), _Infer(beta_shape=(3,)), "beta b has shape (3,), rows have d=2 features",
         "pass a coefficient vector of shape (2,)"),
        (_step(sparsity=3), _rows(), _Infer(), "sparsity s=3 exceeds d=2", "choose s <= d"),
        (_step(residual_bound=Ref("A")), _rows(), _Infer(a_shape=(2,)), "residual_bound must be a released scalar",
         "release a scalar"),
    ]
    for node, rows, ctx, problem, fix in cases:
        with pytest.raises(DomainError) as e:
            node.infer([rows], ctx)  # type: ignore[arg-type]
        assert (e.value.node, e.value.problem, e.value.fix) == ("g", problem, fix)


def _reference_step(Z: np.ndarray, beta: np.ndarray, eta: float, cx: float, A: float, radius: float,
                    ball: str, s: int | None) -> np.ndarray:
    d = Z.shape[1] - 1
    b = project_coef(beta, ball, radius, s)
    R = max(A - cx * l1_bound(ball, radius, s, d), 0.0)
    g = np.zeros(d)
    for row in Z:
        x = np.clip(row[:d], -cx, cx)
        y = min(max(row[d], -R), R)
        r = min(max(float(x @ b) - y, -A), A)
        g += x * r
    out: np.ndarray = b - eta * g / len(Z)
    return out


@pytest.mark.parametrize(("ball", "s", "A"), [("l2", None, 3.0), ("l1", None, 3.0), ("l2", 1, 3.0), ("l2", None, 0.5)])
def test_gradient_step_value(ball: str, s: int | None, A: float) -> None:
    """Rows beyond c_x, responses beyond +-R (R = A - c_x K, or 0 when negative), residuals beyond A, a released
    beta outside the feasible set."""
    Z = np.array([[0.5, -3.0, 9.0], [1.0, 1.0, -9.0], [-2.5, 0.2, 0.1], [0.0, 0.0, 0.4]])
    beta = np.array([[1.2, -0.9]])
    node = _step(ball=ball, sparsity=s, residual_bound=A, x_bound=1.0, radius=1.0)
    got = node.evaluate([Z], _eval({"b": beta}))  # type: ignore[arg-type]
    want = _reference_step(Z, beta.reshape(-1), 0.5, 1.0, A, 1.0, ball, s)
    assert np.allclose(got, want, rtol=1e-14, atol=1e-15)


def test_gradient_step_reads_a_released_bound_under_its_cap() -> None:
    Z = np.array([[0.5, -3.0, 9.0], [1.0, 1.0, -9.0]])
    for a in (2.5, np.inf, np.nan, -1.0):
        got = _step(residual_bound=Ref("A"), x_bound=1.0, radius=0.5).evaluate(  # type: ignore[arg-type]
            [Z], _eval({"b": np.array([0.3, 0.1]), "A": np.array([a])}))
        want = _reference_step(Z, np.array([0.3, 0.1]), 0.5, 1.0, capped(a), 0.5, "l2", None)
        assert np.allclose(got, want, rtol=1e-14, atol=1e-15)


def test_gradient_step_refuses_a_released_beta_of_the_wrong_shape() -> None:
    with pytest.raises(dp.errors.DataError) as e:
        _step().evaluate([np.zeros((3, 3))], _eval({"b": np.zeros(3)}))  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem, e.value.fix) == (
        "g", "the released beta has shape (3,), expected (2,)", "release a coefficient vector of shape (2,)")


# --------------------------------------------------------------------------- the projections


def _l1_by_bisection(v: np.ndarray, radius: float) -> np.ndarray:
    a = np.abs(v)
    if a.sum() <= radius:
        return v.copy()
    lo, hi = 0.0, float(a.max())
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if np.maximum(a - mid, 0.0).sum() > radius else (lo, mid)
    out: np.ndarray = np.sign(v) * np.maximum(a - hi, 0.0)
    return out


def test_l1_projection_against_bisection() -> None:
    rng = np.random.default_rng(3)
    for v, r in [(np.array([3.0, -1.0]), 2.0), (np.array([0.5, 0.25]), 0.75), (np.array([0.5, -0.25]), 1.0),
                 *((rng.normal(0, 3, 7), float(rng.uniform(0.1, 5))) for _ in range(40))]:
        got = project_l1(v, r)
        assert np.allclose(got, _l1_by_bisection(v, r), rtol=1e-12, atol=1e-12)
        assert np.abs(got).sum() <= r
    assert project_l1(np.array([0.5, 0.25]), 0.75).tolist() == [0.5, 0.25]  # on the sphere: unchanged


def test_l1_projection_shrinks_once_more_when_rounding_leaves_it_outside() -> None:
    v = np.full(10, 0.1)
    out = project_l1(v * 3.0, 0.7)
    assert np.abs(out).sum() <= 0.7 and np.allclose(out, 0.07, rtol=1e-14)


def test_coefficient_projection() -> None:
    """The s largest |entries| (ties by index), non-finite entries as 0, then the ball; l2: radius / norm scaling
    (at most the radius after rounding)."""
    assert project_coef(np.array([3.0, 0.1, -4.0]), "l2", 1.0, 1).tolist() == [0.0, 0.0, -1.0]
    assert project_coef(np.array([2.0, -2.0, 1.0]), "l2", 10.0, 1).tolist() == [2.0, 0.0, 0.0]
    assert project_coef(np.array([2.0, -2.0, 1.0]), "l2", 10.0, 3).tolist() == [2.0, -2.0, 1.0]
    assert project_coef(np.array([np.nan, np.inf, -np.inf, 0.5]), "l2", 10.0, None).tolist() == [0, 0, 0, 0.5]
    assert project_coef(np.array([[3.0, 4.0]]), "l2", 5.0, None).tolist() == [3.0, 4.0]  # on the sphere
    out = project_coef(np.array([3.0, 4.0]), "l2", 1.0, None)
    assert np.allclose(out, [0.6, 0.8], rtol=1e-15) and float(np.linalg.norm(out)) <= 1.0
    rng = np.random.default_rng(0)
    for _ in range(200):
        v, r = rng.normal(0, 10, 5), float(rng.uniform(0.01, 3))
        assert float(np.linalg.norm(project_coef(v, "l2", r, None))) <= r
        assert np.allclose(project_coef(v, "l2", r, None), v * (r / np.linalg.norm(v)), rtol=1e-14)
    assert project_coef(np.array([3.0, -1.0, 0.5]), "l1", 2.0, 2).tolist() == [2.0, -0.0, 0.0]
    node = ProjectCoef(radius=1.0, ball="l1", sparsity=1)
    assert node.evaluate([np.array([0.5, -2.0])], _eval({})).tolist() == [0.0, -1.0]  # type: ignore[arg-type]


def test_parameter_refusals() -> None:
    with pytest.raises(ValueError, match=r"^ball must be 'l2' or 'l1', got 'linf'$"):
        ProjectCoef(radius=1.0, ball="linf")
    for s in (0, 1.5, True):
        with pytest.raises(ValueError, match=r"^sparsity must be a positive integer, got "):
            ProjectCoef(radius=1.0, sparsity=s)
    assert ProjectCoef(radius=1.0, sparsity=2.0).sparsity == 2
    for ridge in (-1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match=r"^ridge must be finite and >= 0, got "):
            RidgeSolve(ridge=ridge)
    assert RidgeSolve(ridge=0.0).ridge == 0.0


def test_ridge_solve() -> None:
    """(M_xx + ridge scale^2 I) beta = M_xy, non-finite entries of M as 0, a released scale read from its value."""
    M = np.array([[2.0, np.nan, 1.0], [0.5, 3.0, np.inf], [1.0, np.nan, 4.0]])
    clean = np.array([[2.0, 0.0, 1.0], [0.5, 3.0, 0.0], [1.0, 0.0, 4.0]])
    lam = 0.25 * 2.0 * 2.0
    want = np.linalg.solve(clean[:2, :2] + lam * np.eye(2), clean[:2, 2])
    assert np.allclose(RidgeSolve(ridge=0.25, scale=2.0).evaluate([M], _eval({})), want, rtol=1e-14)  # type: ignore[arg-type]
    got = RidgeSolve(ridge=0.25, scale=Ref("s")).evaluate([M], _eval({"s": np.array([[2.0]])}))  # type: ignore[arg-type]
    assert np.allclose(got, want, rtol=1e-14)
    M2 = np.array([[2.0, 0.0, 1.0], [0.5, 3.0, -np.inf], [1.0, -np.inf, 4.0]])
    assert np.allclose(RidgeSolve(ridge=0.25, scale=2.0).evaluate([M2], _eval({})), want, rtol=1e-14)  # type: ignore[arg-type]


def test_more_texts_and_paths() -> None:
    assert _step(ball="l1").infer([_rows()], _Infer()).derivation == (  # type: ignore[arg-type]
        "gradient step over rows [x, y] of d=2, n=50: |x_j| <= c_x = 2, ||beta||_1 <= K = 1.5 (l1 ball), "
        "|residual| <= A = 3; linf = stability*2*eta*c_x*A/n = 0.24, l2 = linf*sqrt(d) = 0.339411; missing values: "
        "a row with a NaN or infinite entry adds nothing")
    assert l1_bound("l1", 2.0, None, 100) == 2.0 and l1_bound("l2", 2.0, None, 9) == 6.0
    with pytest.raises(dp.errors.PlanTypeError) as t:
        _step().infer([ReleasedT(())], _Infer())  # type: ignore[arg-type]
    assert t.value.fix == "pass sensitive rows [x, y]"
    for ctx, slot in ((_NotReleased("b"), "beta"), (_NotReleased("A"), "residual_bound")):
        with pytest.raises(dp.errors.PostProcessingError) as p:
            _step(residual_bound=Ref("A")).infer([_rows()], ctx)  # type: ignore[arg-type]
        assert p.value.problem == f"parameter {slot!r} refers to {ctx.bad}, which is not released"
    private = RowsT(dp.Vectors(d=3), "Z", Size(False, None, RowCount("Z")), 1, frozenset({"replace"}))
    with pytest.raises(DomainError) as e:
        _step().infer([private], _Infer())  # type: ignore[arg-type]
    assert e.value.problem.startswith("GradientStep (divides by n) needs a public row count")
    # ProjectCoef reads its ball and sparsity; ties in |beta| keep the lower indices (a stable sort)
    node = ProjectCoef(radius=1.0, ball="l1", sparsity=2)
    assert np.allclose(node.evaluate([np.array([1.5, -2.0, 1.4])], _eval({})), [0.25, -0.75, 0.0])  # type: ignore[arg-type]
    b = np.tile([1.0, -1.0, 0.5], 20)
    kept = np.flatnonzero(project_coef(b, "l2", 100.0, 10))
    assert kept.tolist() == [0, 1, 3, 4, 6, 7, 9, 10, 12, 13]


class _NotReleased(_Infer):
    def __init__(self, bad: str) -> None:
        super().__init__()
        self.bad = bad

    def type_of(self, ref: Any) -> Any:
        return StatT((), "Z", None, None, None) if ref.id == self.bad else super().type_of(ref)


def test_the_shrink_after_rounding_is_one_factor_of_1_minus_4_eps() -> None:
    """Inputs (found by search) whose projection, computed in floats, lands just outside the ball: the l1 projection
    is then scaled by ``radius / s (1 - 4 eps)`` once, the l2 projection by ``1 - 4 eps`` once; both end inside,
    without a warning (numpy deprecates ``finfo(None)``)."""
    eps = np.finfo(float).eps
    v = np.array([13.040000451301372, 9.470809631292422, -7.037352358069926, -12.654214710460526, -6.232744625373522])
    r = 0.10794165049342948
    a = np.abs(v)
    u = np.sort(a)[::-1]
    css = np.cumsum(u)
    rho = int(np.nonzero(u * np.arange(1, 6) > css - r)[0][-1])
    raw = np.sign(v) * np.maximum(a - (css[rho] - r) / (rho + 1.0), 0.0)
    s = np.abs(raw).sum()
    assert s > r
    w = np.array([4.116305363741328, 10.425133694426776, -1.2853466294403426, 13.664634705496859, -6.651946734866136])
    r2 = 1.9768495835653253
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, out2 = project_l1(v, r), project_coef(w, "l2", r2, None)
    assert out.tolist() == (raw * (r / s * (1.0 - 4.0 * eps))).tolist() and np.abs(out).sum() <= r
    scaled = w * (r2 / float(np.linalg.norm(w)))
    assert float(np.linalg.norm(scaled)) > r2
    assert out2.tolist() == (scaled * (1.0 - 4.0 * eps)).tolist() and float(np.linalg.norm(out2)) <= r2


def test_ridge_solve_needs_a_square_moment() -> None:
    """Its output has d = (side - 1) entries; any other shape is refused, at planning when known, else at run time
    (a released value's shape is public)."""
    from dpflow.errors import DataError

    fix = "pass the released (d + 1) x (d + 1) second moment of rows [x, y], d >= 1"
    assert RidgeSolve(ridge=1.0).infer([ReleasedT((4, 4))], _Infer()).out == ReleasedT((3,))  # type: ignore[arg-type]
    assert RidgeSolve(ridge=1.0).infer([ReleasedT(None)], _Infer()).out == ReleasedT(None)  # type: ignore[arg-type]
    for shape in ((3, 4), (1, 1), (3,), (2, 2, 2)):
        problem = f"RidgeSolve needs a square matrix of side >= 2, got shape {shape}"
        with pytest.raises(DomainError) as e:
            RidgeSolve(ridge=1.0).infer([ReleasedT(shape)], _Infer())  # type: ignore[arg-type]
        assert (e.value.node, e.value.problem, e.value.fix) == ("g", problem, fix)
        with pytest.raises(DataError) as d:
            RidgeSolve(ridge=1.0).evaluate([np.ones(shape)], _eval({}))  # type: ignore[arg-type]
        assert (d.value.node, d.value.problem, d.value.fix) == ("g", problem, fix)
