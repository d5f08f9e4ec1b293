"""Mutation-testing pins of ``dpflow/privacy/conversions.py``: each conversion exactly as stated.

pure -> zCDP is epsilon^2/2 and eta-bounded range -> zCDP is eta^2/8, exactly (Bun & Steinke 2016 Prop. 1.4;
Cesar & Rogers 2021); zCDP -> (epsilon, delta) is the Canonne-Kamath-Steinke bound (2020, Prop. 12) and Bun &
Steinke's Prop. 1.3, the Gaussian-DP profile is Balle & Wang's (2018, Thm. 8; Dong, Roth & Su 2022, Cor.
2.13), pure -> approximate DP is Meiser's ln(e^epsilon - delta) (2018): losses rounded up, evaluation points
down.  The golden values are the exact floats of today's rules: a changed rounding direction, margin, constant
or search bound moves them by at least one ulp.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import pytest

from dpflow.privacy import conversions as conv
from dpflow.privacy.conversions import (
    _ALPHA_MAX,
    _ALPHA_MIN,
    _bisect_sign,
    _ln_one_minus_inv_up,
    approx_dp_to_approx_zcdp,
    approx_zcdp_to_approx_dp,
    bounded_range_to_zcdp,
    bun_steinke_epsilon,
    cks_delta,
    gaussian_dp_delta,
    gaussian_dp_epsilon,
    gdp_mu_of_mu2,
    pure_to_approx_dp,
    pure_to_zcdp,
    zcdp_to_approx_dp,
)
from dpflow.privacy.measures import ApproxZCDP
from dpflow.privacy.rounding import up

F = Fraction

GOLDEN: list[tuple[Callable[..., float], tuple[object, ...], str]] = [
    (cks_delta, (0.5, 5.2215344445), "0x1.0c6f7a0c0dc7ap-20"),
    (cks_delta, (0.1, 1.0), "0x1.24b97f37f74e4p-7"),
    (cks_delta, (2.0, 0.5), "0x1.ad96cb0dca1efp-1"),
    (cks_delta, (1e-4, 0.01), "0x1.e498046b62b0ep-9"),
    (cks_delta, (3.0, 30.0), "0x1.8124fa8dc9400p-92"),
    (cks_delta, (F(1, 3), F(7, 3)), "0x1.458415b59d482p-8"),
    (cks_delta, (50.0, 1.0), "0x1.0000000000000p+0"),
    (zcdp_to_approx_dp, (0.5, 1e-6), "0x1.4e2d9ece8d611p+2"),
    (zcdp_to_approx_dp, (0.1, 1e-6), "0x1.122b0e07b9d5ep+1"),
    (zcdp_to_approx_dp, (1.0, 1e-5), "0x1.c4f0ca68f76f7p+2"),
    (zcdp_to_approx_dp, (0.01, 1e-9), "0x1.9ecf301718887p-1"),
    (zcdp_to_approx_dp, (5.0, 0.1), "0x1.42581559722cap+3"),
    (zcdp_to_approx_dp, (F(1, 3), F(1, 1000)), "0x1.6250bdf696c6ap+1"),
    (zcdp_to_approx_dp, (1e-6, 0.5), "0x0.0p+0"),
    (bun_steinke_epsilon, (0.5, 1e-6), "0x1.706ada48f5f06p+2"),
    (bun_steinke_epsilon, (F(1, 3), F(1, 1000)), "0x1.af20c561723e8p+1"),
    (bun_steinke_epsilon, (2.0, 0.9), "0x1.7583e1b7085e3p+1"),
    (approx_zcdp_to_approx_dp, (0.5, 1e-6, 2e-6), "0x1.4e2d9ece8d611p+2"),
    (approx_zcdp_to_approx_dp, (0.2, 0.0, 1e-5), "0x1.6825197e14d4dp+1"),
    (approx_zcdp_to_approx_dp, (1.0, 0.25, 1.5), "0x0.0p+0"),
    (gaussian_dp_delta, (1.0, 4.886554), "0x1.0c6f83e07d4fdp-20"),
    (gaussian_dp_delta, (0.5, 0.1), "0x1.462a5f772b85cp-3"),
    (gaussian_dp_delta, (2.0, 0.0), "0x1.5d897a24210d7p-1"),
    (gaussian_dp_delta, (0.01, 0.05), "0x1.2d5869ad6cf7cp-31"),
    (gaussian_dp_delta, (3.0, 10.0), "0x1.309213024ae79p-6"),
    (gaussian_dp_delta, (F(1, 3), F(2, 7)), "0x1.53223a7aac490p-5"),
    (gaussian_dp_delta, (1e-3, 1e-3), "0x1.5da00a2402fedp-14"),
    (gaussian_dp_delta, (5.0, 1.0), "0x1.f5af1e80adc6dp-1"),
    (gaussian_dp_delta, (1.0, 0.5), "0x1.e849a3f8d4667p-3"),  # u1 = 0 exactly
    (gaussian_dp_delta, (40.0, 0.0), "0x1.0000000000000p+0"),  # capped at 1
    (gaussian_dp_delta, (2.0, 2.0), "0x1.53dd11a9742a5p-2"),  # u1 = 0 exactly
    (cks_delta, (1e-300, 1.0), "0x0.0000000000001p-1022"),
    (cks_delta, (0.5, 0.0), "0x1.1e1fb475b03cdp-1"),
    (zcdp_to_approx_dp, (1e6, 1e-6), "0x1.ebe867ec4cc93p+19"),  # the order search capped at 1 + sqrt(...) + 1
    (gaussian_dp_epsilon, (40.0, 1e-6), "0x1.ee989ab0401f6p+9"),
    (bun_steinke_epsilon, (0.5, 1e-300), "0x1.2d5a9101683cfp+5"),
    (gdp_mu_of_mu2, (1,), "0x1.0000000001199p+0"),
    (gdp_mu_of_mu2, (F(1, 3),), "0x1.279a74590476fp-1"),
    (gdp_mu_of_mu2, (2.0,), "0x1.6a09e667f54b0p+0"),
    (gdp_mu_of_mu2, (1e-20,), "0x1.b7cdfd9d7dbf6p-34"),
    (gaussian_dp_epsilon, (1.0, 1e-6), "0x1.38bd4d7b2a003p+2"),
    (gaussian_dp_epsilon, (0.1, 1e-5), "0x1.5cd86e1057161p-2"),
    (gaussian_dp_epsilon, (3.0, 1e-3), "0x1.a2d25d1c89cb6p+3"),
    (gaussian_dp_epsilon, (F(1, 3), F(1, 10**7)), "0x1.9b91c554c12bcp+0"),
    (gaussian_dp_epsilon, (1e-3, 0.4), "0x0.0p+0"),
    (pure_to_approx_dp, (1.0, 0.0), "0x1.0000000000000p+0"),
    (pure_to_approx_dp, (1.0, 1e-3), "0x1.ffcfc5be449a9p-1"),
    (pure_to_approx_dp, (0.01, 0.5), "0x0.0p+0"),
    (pure_to_approx_dp, (F(1, 3), F(1, 7)), "0x1.cd81dd130b618p-3"),
    (pure_to_approx_dp, (2.0, 0.999), "0x1.dad070bb9e629p+0"),
]


@pytest.mark.parametrize(("f", "args", "hexval"), GOLDEN, ids=lambda v: getattr(v, "__name__", None))
def test_golden_conversions(f: Callable[..., float], args: tuple[object, ...], hexval: str) -> None:
    assert f(*args) == float.fromhex(hexval)


def test_exact_conversions() -> None:
    assert pure_to_zcdp(3) == F(9, 2) and pure_to_zcdp("0.1") == F(1, 200)
    assert bounded_range_to_zcdp(3) == F(9, 8) and bounded_range_to_zcdp(0) == 0
    assert approx_dp_to_approx_zcdp(2, F(1, 10)) == ApproxZCDP(rho=F(2), delta=F(1, 10))
    assert conv.BOUNDED_RANGE_REFERENCE.startswith("the exponential mechanism is epsilon-bounded range")
    assert "eta^2/8-zCDP (Cesar & Rogers 2021, ALT" in conv.BOUNDED_RANGE_REFERENCE


def test_search_range_of_the_renyi_order() -> None:
    assert _ALPHA_MIN == 1.0 + 2.0**-40 and _ALPHA_MAX == 1e200


@pytest.mark.parametrize(("alpha", "value"), [
    (1.0 + 2**-40, F(-17161492958641984971263179981, 618970019642690137449562112)),
    (1.5, F(-19790839575461593, 18014398509481984)),
    (2.0, F(-6243314768159115, 9007199254740992)),
    (3.7, F(-5675995536950077, 18014398509481984)),
    (1e6, F(-2361184422024869, 2361183241434822606848)),
])
def test_ln_one_minus_inverse_is_an_upper_bound(alpha: float, value: Fraction) -> None:
    assert _ln_one_minus_inv_up(alpha) == value
    assert float(value) >= math.log1p(-1.0 / alpha) - 1e-15 * abs(math.log1p(-1.0 / alpha))


def test_bisect_sign() -> None:
    assert _bisect_sign(lambda x: x - 1.0, 2.0, 3.0) == 2.0  # f(lo) >= 0: lo
    assert _bisect_sign(lambda x: x - 1.0, 1.0, 3.0) == 1.0
    assert _bisect_sign(lambda x: x - 5.0, 2.0, 3.0) == 3.0  # f(hi) <= 0: hi
    assert _bisect_sign(lambda x: x - 3.0, 2.0, 3.0) == 3.0
    odd = 1.0 + 2.0**-52  # an odd last bit: the final midpoint would round up to the next float
    assert _bisect_sign(lambda x: x - odd, odd, 3.0) == odd  # f(lo) = 0: lo itself
    assert _bisect_sign(lambda x: x - 0.5, odd, 3.0) == odd  # f(lo) > 0: lo itself
    r = 2.0 + 2.0**-51  # hit exactly as a midpoint: f(mid) = 0 moves hi, so the answer rounds down to 2
    assert _bisect_sign(lambda x: x - r, 1.0, 3.0) == 2.0
    root = _bisect_sign(lambda x: x * x - 2.0, 1.0, 2.0)
    assert root in (math.sqrt(2.0), math.nextafter(math.sqrt(2.0), 0.0), math.nextafter(math.sqrt(2.0), 3.0))


@pytest.mark.parametrize(("x", "message"), [
    (math.inf, "rho must be finite, got inf"), (math.nan, "rho must be finite, got nan"),
    (-1.0, "rho must be finite and non-negative, got -1.0"),
])
def test_losses_must_be_finite_and_non_negative(x: float, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        cks_delta(x, 1.0)


@pytest.mark.parametrize(("f", "args", "name"), [
    (cks_delta, (math.inf, 1.0), "rho"), (cks_delta, (1.0, math.inf), "epsilon"),
    (zcdp_to_approx_dp, (math.inf, 1e-6), "rho"), (zcdp_to_approx_dp, (1.0, math.inf), "delta"),
    (bun_steinke_epsilon, (math.inf, 1e-6), "rho"), (bun_steinke_epsilon, (1.0, math.inf), "delta"),
    (approx_zcdp_to_approx_dp, (1.0, math.inf, 1e-6), "delta0"),
    (approx_zcdp_to_approx_dp, (1.0, 0.0, math.inf), "delta"),
    (gaussian_dp_delta, (math.inf, 1.0), "mu"), (gaussian_dp_delta, (1.0, math.inf), "epsilon"),
    (gdp_mu_of_mu2, (math.inf,), "mu2"),
    (gaussian_dp_epsilon, (math.inf, 1e-6), "mu"), (gaussian_dp_epsilon, (1.0, math.inf), "delta"),
    (pure_to_approx_dp, (math.inf, 0.0), "epsilon"), (pure_to_approx_dp, (1.0, math.inf), "delta"),
])
def test_each_refusal_names_its_parameter(f: Callable[..., float], args: tuple[float, ...], name: str) -> None:
    with pytest.raises(ValueError, match=f"^{name} must be finite, got inf$"):
        f(*args)
    negative = tuple(-1.0 if math.isinf(a) else a for a in args)
    with pytest.raises(ValueError, match=f"^{name} must be finite and non-negative, got -1.0$"):
        f(*negative)


def test_refusals() -> None:
    with pytest.raises(ValueError, match=r"^delta must be at most 1, got 1\.5$"):
        zcdp_to_approx_dp(0.5, 1.5)
    with pytest.raises(ValueError, match=r"^delta must be positive when rho > 0 \(rho=0\.5, delta=0\)$"):
        zcdp_to_approx_dp(0.5, 0)
    with pytest.raises(ValueError, match=r"^delta must be positive when rho > 0 \(rho=0\.5, delta=0\.0\)$"):
        bun_steinke_epsilon(0.5, 0.0)
    with pytest.raises(ValueError, match=r"^delta must be positive when mu > 0 \(mu=1\.0, delta=0\)$"):
        gaussian_dp_epsilon(1.0, 0)
    with pytest.raises(ValueError, match=r"^delta must exceed delta0 of the approximate zCDP guarantee: "
                                         r"delta=1e-06, delta0=1e-06$"):
        approx_zcdp_to_approx_dp(0.5, F(1, 10**6), F(1, 10**6))
    with pytest.raises(ValueError, match=r"^delta must be < 1, got 1$"):
        pure_to_approx_dp(1.0, 1)


def test_zero_losses_and_trivial_deltas() -> None:
    assert cks_delta(0, 1.0) == 0.0 and zcdp_to_approx_dp(0, 1e-6) == 0.0 and zcdp_to_approx_dp(0.5, 1) == 0.0
    assert zcdp_to_approx_dp(50.0, 1) == 0.0  # delta = 1 says nothing: 0 (the general bound is positive here)
    assert bun_steinke_epsilon(0, 0) == 0.0 and gaussian_dp_delta(0, 1.0) == 0.0 and gdp_mu_of_mu2(0) == 0.0
    assert gaussian_dp_epsilon(0, 0) == 0.0 and gaussian_dp_epsilon(1.0, 1) == 0.0
    assert bun_steinke_epsilon(0.5, 1) == float.fromhex("0x1.0000000001199p-1")  # up(rho): ln(1/delta) = 0
    assert pure_to_approx_dp(0.75, 0) == 0.75


def test_cks_epsilon_is_verified_and_nudged(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CKS epsilon is accepted when its delta equals the target (at most), else stepped up by growing
    steps: candidate_i = up(eps + step_i), step_0 = max(eps 1e-12, 1e-15), doubling."""
    eps = conv._cks_eps_up(0.5, 1e-6, 2.0)
    calls: list[float] = []

    def delta_at(rho: float, e: float) -> float:
        calls.append(e)
        return 1e-6 if len(calls) > 3 else 2e-6

    monkeypatch.setattr(conv, "cks_delta", delta_at)
    got = conv._verify_cks_epsilon(0.5, 1e-6, eps)
    step = eps * 1e-12
    assert calls == [eps, up(eps + step), up(eps + 2 * step), up(eps + 4 * step)] and got == calls[-1]
    calls.clear()
    assert conv._verify_cks_epsilon(0.5, 1e-6, 1e-6) == up(1e-6 + 4e-15)  # the floor step 1e-15


def test_cks_verification_gives_up_after_400_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []
    monkeypatch.setattr(conv, "cks_delta", lambda rho, e: calls.append(e) or 1.0)
    with pytest.raises(ArithmeticError, match=r"^could not verify the CKS epsilon for rho=0\.5, delta=1e-06$"):
        conv._verify_cks_epsilon(0.5, 1e-6, 1.0)
    assert len(calls) == 400


def test_cks_delta_is_capped_at_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conv, "_cks_log_delta_up", lambda rho, eps, alpha: -1e-14)  # up(exp(.)) would exceed 1
    assert cks_delta(0.5, 1.0) == 1.0
    monkeypatch.setattr(conv, "_cks_log_delta_up", lambda rho, eps, alpha: -1.0)
    assert cks_delta(0.5, 1.0) == up(math.exp(-1.0))


def test_gaussian_dp_epsilon_grows_a_too_small_bracket(monkeypatch: pytest.MonkeyPatch) -> None:
    """Were the Bun-Steinke start ever below the answer, the upper end grows as 2 hi + 1 until valid."""
    seen: list[float] = []
    real = conv.gaussian_dp_delta

    def delta(mu: float, e: float) -> float:
        seen.append(e)
        return real(mu, e)

    monkeypatch.setattr(conv, "bun_steinke_epsilon", lambda rho, d: 0.25)
    monkeypatch.setattr(conv, "gaussian_dp_delta", delta)
    eps = gaussian_dp_epsilon(1.0, 1e-6)
    assert seen[1:5] == [0.25, 1.5, 4.0, 9.0]  # after delta(0): 0.25, then 2 hi + 1 until delta(hi) <= d
    assert eps == float.fromhex("0x1.38bd4d7b2a003p+2")  # the same answer as from a valid start


def test_gaussian_dp_epsilon_meets_delta_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """At mu where delta(0) is already at most the target the answer is 0; the bisection keeps delta(hi) <= d."""
    monkeypatch.setattr(conv, "gaussian_dp_delta", lambda mu, e: 0.5)
    assert gaussian_dp_epsilon(1.0, 0.5) == 0.0
    monkeypatch.setattr(conv, "gaussian_dp_delta", lambda mu, e: 0.5 if e >= 1.0 else 0.75)
    assert gaussian_dp_epsilon(1.0, 0.5) == 1.0
