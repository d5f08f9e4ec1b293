"""Mutation-testing pins of ``dpflow/privacy/calibration.py``: each calibration exactly as stated.

Noise scales are the formula's value rounded up (``rounding.up``) and then stepped up by ``up`` until the
forward privacy map is *at most* the budget; largest budgets are bisected and then stepped down until the
forward map is at most the target (Bun & Steinke 2016 Prop. 1.4/1.6; Balle & Wang 2018 Thm. 8; Canonne,
Kamath & Steinke 2020 Prop. 12; Dwork & Roth 2014 Thm. 3.6, 3.20, A.1; Cesar & Rogers 2021).  The golden
values are the exact floats of today's rules (a changed margin, rounding direction or constant moves them by
at least one ulp); the boundary tests replace the forward map by one that sits exactly on the budget, or fails
a fixed number of times, to pin "at most" (not "below") and the step taken.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from fractions import Fraction

import pytest
import scipy.optimize

from dpflow.privacy import ZCDP, ApproxDP, ApproxZCDP, PureDP
from dpflow.privacy import calibration as cal
from dpflow.privacy.calibration import (
    GRID_BITS,
    _bracket,
    _grid_floor,
    _grid_value,
    _interpolate,
    _largest_valid,
    analytic_gaussian_sigma,
    bounded_range_eps_for_zcdp,
    classical_gaussian_sigma,
    gaussian_budget_rho,
    gaussian_sigma_for_zcdp,
    gdp_mu_for_approx_dp,
    laplace_scale,
    largest_on_grid,
    pure_dp_of_laplace,
    pure_eps_for_approx_dp_advanced,
    pure_eps_for_zcdp,
    shares_by_weight,
    zcdp_of_gaussian,
    zcdp_rho_for_approx_dp,
)
from dpflow.privacy.rounding import down, up

F = Fraction
H = 1 << (GRID_BITS - 1)

@pytest.fixture(autouse=True)
def _fresh_caches() -> Iterator[None]:
    """The cached calibrations start empty and forget what a replaced forward map produced here."""
    clear_caches()
    yield
    clear_caches()


def clear_caches() -> None:
    for cache in (cal._laplace_scale, cal._pure_eps_for_zcdp, cal._bounded_range_eps_for_zcdp):
        cache.cache_clear()


GOLDEN_FLOATS: list[tuple[Callable[..., float], tuple[object, ...], str]] = [
    (gaussian_sigma_for_zcdp, (1.0, 0.5), "0x1.0000000001199p+0"),
    (gaussian_sigma_for_zcdp, (3.5, F(1, 7)), "0x1.a310ccf3b542ep+2"),
    (gaussian_sigma_for_zcdp, (1e-3, 2.0), "0x1.0624dd2f1bc01p-11"),
    (gaussian_sigma_for_zcdp, (F(2, 3), 1e-4), "0x1.791fa556f4d8cp+5"),
    (analytic_gaussian_sigma, (1.0, 1e-5, 1.0), "0x1.dd85566086741p+1"),
    (analytic_gaussian_sigma, (0.3, 1e-9, 2.5), "0x1.5cce6272f6eecp+5"),
    (analytic_gaussian_sigma, (4.0, 0.01, 1.0), "0x1.568c9590fac16p-1"),
    (analytic_gaussian_sigma, (1.0, 1e-5), "0x1.dd85566086741p+1"),  # the default sensitivity is 1
    (classical_gaussian_sigma, (0.5, 1e-5, 1.0), "0x1.36114a179993ep+3"),
    (classical_gaussian_sigma, (0.9, 1e-3, 3.0), "0x1.92d3115980055p+3"),
    (classical_gaussian_sigma, (0.5, 1e-5), "0x1.36114a179993ep+3"),
    (gdp_mu_for_approx_dp, (1.0, 1e-5), "0x1.127bfe5f5f485p-2"),
    (gdp_mu_for_approx_dp, (0.1, 1e-8), "0x1.64a8dad1aee68p-6"),
    (gdp_mu_for_approx_dp, (5.0, 1e-3), "0x1.73196b4832d12p+0"),
    (laplace_scale, (1.0, 0.1), "0x1.40000000015ffp+3"),
    (laplace_scale, (3.0, F(2, 3)), "0x1.20000000013ccp+2"),
    (laplace_scale, (2.5, 7.0), "0x1.6db6db6db86dap-2"),
    (pure_eps_for_approx_dp_advanced, (6.308, 1e-6, 100), "0x1.9996555604a00p-4"),
    (pure_eps_for_approx_dp_advanced, (1.0, 1e-5, 1), "0x1.980c9096c8100p-3"),
    (pure_eps_for_approx_dp_advanced, (0.5, 1e-9, 7), "0x1.db330edf2be80p-6"),
]

GOLDEN_FRACTIONS: list[tuple[Callable[..., Fraction], tuple[object, ...], Fraction]] = [
    (zcdp_rho_for_approx_dp, (5.221535, 1e-6), F(35184378705967, 70368744177664)),
    (zcdp_rho_for_approx_dp, (0.5, 1e-9), F(71214360601943, 18014398509481984)),
    (zcdp_rho_for_approx_dp, (10.0, 1e-3), F(183435619324129, 70368744177664)),
    (pure_eps_for_zcdp, (F(1, 2),), F(562949953420749, 562949953421312)),
    (pure_eps_for_zcdp, (F(1, 1000),), F(6445027142549171, 144115188075855872)),
    (pure_eps_for_zcdp, (3.0,), F(5515760546417569, 2251799813685248)),
    (bounded_range_eps_for_zcdp, (F(1, 8),), F(562949953420749, 562949953421312)),
    (bounded_range_eps_for_zcdp, (F(1, 1000),), F(6445027142549171, 72057594037927936)),
    (bounded_range_eps_for_zcdp, (3.0,), F(5515760546417569, 1125899906842624)),
    (gaussian_budget_rho, (ZCDP(0.5),), F(1, 2)),
    (gaussian_budget_rho, (ApproxZCDP(0.3, 1e-7),), F(3, 10)),
    (gaussian_budget_rho, (ApproxDP(1.0, 1e-5),),
     F(23317113916689975971986951132929, 649037107316853453566312041152512)),
    (gaussian_budget_rho, (ApproxDP(0.25, 1e-9),),
     F(48077981984089842246077516497129, 41538374868278621028243970633760768)),
]


@pytest.mark.parametrize(("f", "args", "hexval"), GOLDEN_FLOATS, ids=lambda v: getattr(v, "__name__", None))
def test_golden_calibrations(f: Callable[..., float], args: tuple[object, ...], hexval: str) -> None:
    assert f(*args) == float.fromhex(hexval)


@pytest.mark.parametrize(("f", "args", "value"), GOLDEN_FRACTIONS, ids=lambda v: getattr(v, "__name__", None))
def test_golden_budgets(f: Callable[..., Fraction], args: tuple[object, ...], value: Fraction) -> None:
    assert f(*args) == value


def test_forward_maps_are_the_formulas() -> None:
    assert zcdp_of_gaussian(3, 2) == F(9, 8) and zcdp_of_gaussian(0, 0) == 0 and zcdp_of_gaussian(0.0, 5) == 0
    assert pure_dp_of_laplace(3, 2) == F(3, 2) and pure_dp_of_laplace(0, 0) == 0
    with pytest.raises(ValueError, match="^sigma must be positive when the sensitivity is positive$"):
        zcdp_of_gaussian(1, 0)
    with pytest.raises(ValueError, match="^the Laplace scale must be positive when the sensitivity is positive$"):
        pure_dp_of_laplace(1, 0)


def test_zero_sensitivity_and_zero_budgets() -> None:
    assert gaussian_sigma_for_zcdp(0, 0) == 0.0 and laplace_scale(0, 0) == 0.0
    assert analytic_gaussian_sigma(1.0, 1e-5, 0) == 0.0 and classical_gaussian_sigma(0.5, 1e-5, 0) == 0.0
    assert pure_eps_for_zcdp(0) == 0 and bounded_range_eps_for_zcdp(0) == 0
    assert pure_eps_for_approx_dp_advanced(0, 1e-6, 3) == 0.0
    with pytest.raises(ValueError, match="^rho must be positive when the sensitivity is positive$"):
        gaussian_sigma_for_zcdp(1, 0)
    with pytest.raises(ValueError, match="^epsilon must be positive when the sensitivity is positive$"):
        laplace_scale(1, 0)


@pytest.mark.parametrize("delta", [0, 1, 1.5])
def test_delta_outside_the_open_unit_interval_is_refused(delta: float) -> None:
    with pytest.raises(ValueError, match=rf"^delta must be in \(0, 1\), got {delta!r}$"):
        gdp_mu_for_approx_dp(1.0, delta)


@pytest.mark.parametrize("eps", [0, 1, 1.5])
def test_classical_gaussian_needs_epsilon_below_one(eps: float) -> None:
    with pytest.raises(ValueError, match=r"^the classical Gaussian calibration \(Dwork & Roth Thm\. A\.1\) needs "
                                         rf"0 < epsilon < 1, got epsilon={float(eps)!r}; use analytic_gaussian_sigma "
                                         r"\(Balle & Wang 2018\) instead$"):
        classical_gaussian_sigma(eps, 1e-5, 1.0)


@pytest.mark.parametrize("k", [0, -1, True, 1.0])
def test_advanced_composition_count_must_be_a_positive_int(k: object) -> None:
    with pytest.raises(ValueError, match=rf"^k must be a positive int, got {k!r}$"):
        pure_eps_for_approx_dp_advanced(1.0, 1e-6, k)  # type: ignore[arg-type]


def test_gaussian_budget_rho_refuses_pure_budgets() -> None:
    for budget in (PureDP(1.0), ApproxDP(1.0, 0)):
        with pytest.raises(ValueError, match="^" + re.escape(f"Gaussian noise cannot meet {budget.describe()}: it is "
                                                             "never pure DP; use a ZCDP, ApproxZCDP or ApproxDP "
                                                             "(delta > 0) budget") + "$"):
            gaussian_budget_rho(budget)


# ---------------------------------------------------------------------------------------------- boundaries


class Fails:
    """A forward map that is ``bad`` for the first ``n`` calls and ``good`` afterwards (recording arguments)."""

    def __init__(self, n: int, good: object, bad: object) -> None:
        self.n, self.good, self.bad, self.args = n, good, bad, []  # type: list[object]

    def __call__(self, *args: object) -> object:
        self.args.append(args[0])
        return self.bad if len(self.args) <= self.n else self.good


def test_scales_meet_a_budget_met_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scale whose forward map equals the budget is accepted as is (at most, not below)."""
    monkeypatch.setattr(cal, "zcdp_of_gaussian", lambda s, x: F(1, 2))
    assert gaussian_sigma_for_zcdp(1.0, 0.5) == up(1.0)
    monkeypatch.setattr(cal, "pure_dp_of_laplace", lambda s, x: F(1, 10))
    assert laplace_scale(1.0, F(1, 10)) == up(10.0)


def test_analytic_sigma_meets_delta_exactly_and_steps_up(monkeypatch: pytest.MonkeyPatch) -> None:
    start = up(1.0 / gdp_mu_for_approx_dp(1.0, 1e-5))
    monkeypatch.setattr(cal, "gaussian_dp_delta", lambda mu, eps: 1e-5)
    monkeypatch.setattr(cal, "gdp_mu_for_approx_dp", lambda e, d: 0.25)
    assert analytic_gaussian_sigma(1.0, 1e-5) == up(4.0)
    fails = Fails(2, 1e-5, 2e-5)
    monkeypatch.setattr(cal, "gaussian_dp_delta", fails)
    assert analytic_gaussian_sigma(1.0, 1e-5) == up(up(up(4.0)))
    assert fails.args[0] == cal.to_float_up(1 / F(up(4.0))) and start > 0


def test_scales_step_up_until_verified(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cal, "zcdp_of_gaussian", Fails(2, F(0), F(1)))
    assert gaussian_sigma_for_zcdp(1.0, 0.5) == up(up(up(1.0)))
    monkeypatch.setattr(cal, "pure_dp_of_laplace", Fails(3, F(0), F(2)))
    assert laplace_scale(1.0, 1.0) == up(up(up(up(1.0))))


@pytest.mark.parametrize(("f", "forward", "start"), [
    (pure_eps_for_zcdp, "pure_to_zcdp", lambda r: down(math.sqrt(2.0 * r))),
    (bounded_range_eps_for_zcdp, "bounded_range_to_zcdp", lambda r: down(math.sqrt(8.0 * r))),
])
def test_epsilons_of_a_share_meet_it_exactly_and_step_down_one_float(
        monkeypatch: pytest.MonkeyPatch, f: Callable[[Fraction], Fraction], forward: str,
        start: Callable[[float], float]) -> None:
    for rho in (F(1, 2), F(1, 1000)):  # a start above 1 and one below: each step goes toward 0
        monkeypatch.setattr(cal, forward, lambda x, rho=rho: rho)
        clear_caches()
        assert f(rho) == F(start(float(rho)))
        monkeypatch.setattr(cal, forward, Fails(2, F(0), F(1)))
        clear_caches()
        assert f(rho) == F(math.nextafter(math.nextafter(start(float(rho)), 0.0), 0.0))


def test_largest_budgets_meet_the_target_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a forward map equal to its argument, the largest valid point is the target itself."""
    monkeypatch.setattr(cal, "advanced_composition", lambda e0, k, d: e0)
    assert pure_eps_for_approx_dp_advanced(0.75, 1e-6, 5) == 0.75
    assert pure_eps_for_approx_dp_advanced(3.0, 1e-6, 5) == 3.0
    monkeypatch.setattr(cal, "zcdp_to_approx_dp", lambda rho, d: rho)
    assert zcdp_rho_for_approx_dp(0.75, 1e-6) == F(3, 4)


def test_bisection_results_are_stepped_down_until_verified(monkeypatch: pytest.MonkeyPatch) -> None:
    """The nudge after the bisection (a guard: the bisection keeps a verified point) steps down by ``down``,
    never below 0."""
    monkeypatch.setattr(cal, "advanced_composition", lambda e0, k, d: e0)
    monkeypatch.setattr(cal, "_largest_valid", lambda ok, lo, hi: 1.0 + 1e-11)
    expected = 1.0 + 1e-11
    while expected > 1.0:
        expected = down(expected)
    assert pure_eps_for_approx_dp_advanced(1.0, 1e-6, 5) == expected
    monkeypatch.setattr(cal, "zcdp_to_approx_dp", lambda rho, d: rho)
    assert zcdp_rho_for_approx_dp(1.0, 1e-6) == F(expected)
    monkeypatch.setattr(cal, "_largest_valid", lambda ok, lo, hi: 5e-324)
    monkeypatch.setattr(cal, "advanced_composition", lambda e0, k, d: 1.0 if e0 > 0 else 0.0)
    assert pure_eps_for_approx_dp_advanced(0.5, 1e-6, 5) == 0.0


def test_nudge_gives_up_after_ten_thousand_steps() -> None:
    steps: list[float] = []
    assert cal._nudge_until(lambda x: x >= 3.0, 0.0, lambda x: x + 1.0) == 3.0
    with pytest.raises(ArithmeticError, match="^calibration could not be verified$"):
        cal._nudge_until(lambda x: False, 0.0, lambda x: steps.append(x) or x + 1.0)  # type: ignore[func-returns-value]
    assert len(steps) == 10_000


def test_gdp_mu_meets_delta_exactly_steps_down_and_underflows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cal, "gaussian_dp_delta", lambda mu, eps: 1e-5 * mu)  # valid exactly up to mu = 1
    assert gdp_mu_for_approx_dp(1.0, 1e-5) == 1.0
    monkeypatch.setattr(scipy.optimize, "brentq", lambda *args, **kwargs: 1.0 + 3e-12)  # a root just too high
    expected = down(1.0 + 3e-12)
    while not 1e-5 * expected <= 1e-5:
        expected = down(expected)
    assert gdp_mu_for_approx_dp(1.0, 1e-5) == expected < 1.0
    monkeypatch.setattr(cal, "gaussian_dp_delta", lambda mu, eps: 2e-5 if mu > 0 else 0.0)  # nothing positive fits
    assert gdp_mu_for_approx_dp(1.0, 1e-5) == 0.0


def test_gaussian_budget_rho_meets_epsilon_exactly_and_steps_down(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cal, "gdp_mu_for_approx_dp", lambda e, d: 0.5)
    monkeypatch.setattr(cal, "gaussian_dp_epsilon", lambda mu, d: 1.0)  # exactly the budget's epsilon
    assert gaussian_budget_rho(ApproxDP(1.0, 1e-5)) == F(1, 8)
    fails = Fails(2, 0.5, 2.0)
    monkeypatch.setattr(cal, "gaussian_dp_epsilon", fails)
    mu = 0.5
    for _ in range(2):
        mu = math.nextafter(mu, 0.0) * (1.0 - 1e-15)
    assert gaussian_budget_rho(ApproxDP(1.0, 1e-5)) == F(mu) ** 2 / 2
    assert fails.args[0] == cal.gdp_mu_of_mu2(F(1, 4))


def test_bracket_refuses_an_ok_that_never_fails() -> None:
    with pytest.raises(ArithmeticError, match="^no finite upper bracket$"):
        _bracket(lambda x: True)


def test_bracket_and_bisection() -> None:
    assert _bracket(lambda x: x <= 5.0) == (4.0, 8.0)
    assert _bracket(lambda x: x <= 0.3) == (0.25, 0.5)
    assert _bracket(lambda x: x <= 1.0) == (1.0, 2.0)
    assert _bracket(lambda x: x <= 0.5) == (0.5, 1.0)
    assert _bracket(lambda x: x <= 3.0, start=3.0) == (3.0, 6.0)
    assert _bracket(lambda x: x <= 0.0) == (0.0, 5e-324)
    assert _largest_valid(lambda x: x <= 5.0, 4.0, 8.0) == 5.0
    x = _largest_valid(lambda x: x <= math.pi, 2.0, 4.0)
    assert x <= math.pi and math.pi - x <= 1e-14 * 4.0
    assert _largest_valid(lambda x: x <= 1.3, 1.0, 2.0, rel_tol=0.5) == 1.0  # stops once hi - lo <= rel_tol hi
    assert _largest_valid(lambda x: x <= 1.3, 1.0, 2.0, rel_tol=0.3) == 1.25
    assert _largest_valid(lambda x: x <= 1.75, 1.0, 2.0, rel_tol=0.5) == 1.0  # hi - lo = rel_tol hi: stop
    assert _largest_valid(lambda x: x <= 1.3, 1.0, 2.0, rel_tol=0.0) == 1.3  # until the midpoint stops moving
    assert _largest_valid(lambda x: x <= 1.0, 1.0, 2.0, rel_tol=0.0) == 1.0  # the last midpoint rounds to lo


# ---------------------------------------------------------------------------------------------- the grid


@pytest.mark.parametrize("x", [F(1), F(2), F(1, 2), F(3), F(2**40), F(1, 2**40), F(7, 3), F(2**14 + 1, 2**14),
                               F(2 * H - 1, H), F(10**20 + 1, 10**9)])
def test_grid_floor_is_the_largest_grid_point_below(x: Fraction) -> None:
    j = _grid_floor(x)
    assert _grid_value(j) <= x < _grid_value(j + 1)


def test_grid_points() -> None:
    assert _grid_value(0) == 1 and _grid_value(H) == 2 and _grid_value(-H) == F(1, 2)
    assert _grid_value(1) == 1 + F(1, H) and _grid_value(H - 1) == F(2 * H - 1, H)
    assert _grid_value(-1) == F(2 * H - 1, 2 * H) and _grid_value(3 * H + 5) == F(H + 5, H) * 8
    assert _grid_floor(F(1)) == 0 and _grid_floor(F(2)) == H and _grid_floor(F(1, 2)) == -H
    assert _grid_floor(F(3)) == H + H // 2 and _grid_floor(F(1) - F(1, 10**9)) == -1


# ---------------------------------------------------------------------------------------------- the grid search


def brute(f: Callable[[Fraction], float], target: float, lo: int, hi: int) -> Fraction:
    """The largest grid point in [lo, hi] (indices) with f <= target, by bisection on the index."""
    assert f(_grid_value(lo)) <= target and not f(_grid_value(hi)) <= target
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if f(_grid_value(mid)) <= target else (lo, mid)
    return _grid_value(lo)


class Counted:
    def __init__(self, f: Callable[[Fraction], float]) -> None:
        self.f, self.calls = f, 0

    def __call__(self, x: Fraction) -> float:
        self.calls += 1
        return self.f(x)


CURVES: list[tuple[str, Callable[[Fraction], float], float, Fraction, int]] = [
    # name, f, target, start, evaluations today
    ("sqrt", lambda x: float(x) ** 0.5, 2.0, F(1, 3), 12),
    ("linear", lambda x: float(x), 2.0, F(1, 3), 12),
    ("below one", lambda x: float(x), 0.5, F(1, 1000), 14),
    ("exp", lambda x: math.expm1(min(float(x), 700.0)), 1e-3, F(1, 10**6), 10),
    ("zero then linear", lambda x: max(0.0, float(x) - 5.0), 0.25, F(1), 12),
    ("zero target", lambda x: max(0.0, float(x) - 5.0), 0.0, F(1), 17),
    ("step to inf", lambda x: 0.5 if x <= 7 else math.inf, 1.0, F(1, 2), 17),
    ("ulp above", lambda x: 1e300 if x <= F(11, 10) else math.nextafter(1e300, math.inf), 1e300, F(1), 13),
    ("below, at, ulp above", lambda x: 0.5e300 if x < F(21, 20) else 1e300 if x <= F(11, 10)
     else math.nextafter(1e300, math.inf), 1e300, F(1), 16),
    ("zero then linear, far target", lambda x: max(0.0, float(x) - 5.0), 100.0, F(1), 13),
    ("slow regula falsi", lambda x: math.expm1(20.0 * float(x)) if x <= 3 else math.inf, 1e20, F(1, 4), 7),
]


@pytest.mark.parametrize(("name", "f", "target", "start", "evals"), CURVES, ids=[c[0] for c in CURVES])
def test_largest_on_grid_is_the_largest_grid_point(name: str, f: Callable[[Fraction], float], target: float,
                                                   start: Fraction, evals: int) -> None:
    counted = Counted(f)
    x = largest_on_grid(counted, target, start)
    assert x is not None and f(x) <= target
    assert x == brute(f, target, _grid_floor(start), _grid_floor(F(10**6)))
    assert counted.calls == evals  # the search path, evaluation by evaluation


def test_interpolate_is_inverse_quadratic_then_secant() -> None:
    """Brent's root estimate: the inverse quadratic through three points with distinct values, else the secant
    through the last two with distinct values, else NaN."""
    # g = (x - 2) (x + 3) / 10 at x = 0, 1, 4: x as a quadratic in g, at g = 0
    pts = [(0, -0.6), (1, -0.4), (4, 1.4)]
    (x0, g0), (x1, g1), (x2, g2) = pts
    iq = (x0 * g1 * g2 / ((g0 - g1) * (g0 - g2)) + x1 * g0 * g2 / ((g1 - g0) * (g1 - g2))
          + x2 * g0 * g1 / ((g2 - g0) * (g2 - g1)))
    assert _interpolate(pts) == iq and iq == pytest.approx(2.6, rel=1e-12)
    assert _interpolate([(0, -1.0), (1, -1.0), (3, 1.0)]) == 2.0  # two equal values: secant of the last two
    assert math.isnan(_interpolate([(0, -1.0), (1, 1.0), (3, 1.0)]))  # the last two equal: no secant
    assert _interpolate([(2, -1.0), (3, 1.0), (7, -1.0)]) == 5.0  # first and last equal: secant of (3, 1), (7, -1)
    assert _interpolate([(1, -2.0), (5, 2.0)]) == 3.0
    assert math.isnan(_interpolate([(1, 2.0), (5, 2.0)])) and math.isnan(_interpolate([(1, 2.0)]))
    assert math.isnan(_interpolate([]))


def test_largest_on_grid_start_and_budget_of_evaluations() -> None:
    with pytest.raises(ValueError, match=r"^start must be positive, got Fraction\(0, 1\)$"):
        largest_on_grid(lambda x: 0.0, 1.0, F(0))
    assert largest_on_grid(lambda x: float(x), 1.0, F(2)) is None
    assert largest_on_grid(lambda x: float(x), 2.0, F(2)) == 2  # the start itself, met exactly
    step = math.ceil(1.03 * H)  # 1.03 octaves per bracketing step while f is 0 (ln f = -inf)
    far = Counted(lambda x: 0.0 if x <= 2**60 else math.inf)
    assert largest_on_grid(far, 1.0, F(1)) == _grid_value(31 * step) and far.calls == 32
    near = Counted(lambda x: 0.0 if x <= 2**20 else math.inf)  # 20 steps to bracket, then out of evaluations
    assert largest_on_grid(near, 1.0, F(1)) == 2**20 - 256 and near.calls == 32
    far = Counted(lambda x: 0.0 if x <= 2**60 else math.inf)
    assert largest_on_grid(far, 1.0, F(1), max_evals=5) == _grid_value(4 * step) and far.calls == 5


def test_shares_by_weight() -> None:
    assert shares_by_weight(F(1, 2), [0.25, 0.75]) == [F(1, 8), F(3, 8)]
    assert shares_by_weight(1, [1, 2, 0]) == [F(1, 3), F(2, 3), 0]
    assert shares_by_weight(F(3), [0.1]) == [F(3)]
    with pytest.raises(ValueError, match=r"^weights must have a positive sum, got \[0, 0\]$"):
        shares_by_weight(1, [0, 0])


def test_the_calibrations_return_inf_beyond_the_float_range() -> None:
    from dpflow.privacy import gaussian_sigma_for_zcdp, laplace_scale

    assert gaussian_sigma_for_zcdp(1e300, Fraction(1, 10**300)) == math.inf
    assert laplace_scale(1e300, Fraction(1, 10**300)) == math.inf
    assert 1.0 <= gaussian_sigma_for_zcdp(1.0, Fraction(1, 2)) < 1.0 + 1e-11  # outward rounded, finite
    assert 1.0 <= laplace_scale(1.0, 1.0) < 1.0 + 1e-11
