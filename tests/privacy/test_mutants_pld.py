"""Mutation-testing pins of ``dpflow/privacy/pld.py``: every step of the PLD accounting, restated exactly.

Each test restates one rule of the module (the event parameters and their refusals, the lattice smoothing
slack, the k-fold randomized-response law rounded once, the optimistic Gaussian PLD, the loss-grid width,
the target delta with its numerical reserve, the rounding of sigma and of the result) and compares with
``==``: a changed constant, comparison, rounding direction or argument makes one of them fail.  Sources as in
the module: Kairouz, Oh & Viswanath 2015, Thm. 2.4 / 3.3 (the worst case of an (epsilon, delta)-DP event and
its k-fold composition); Balle & Wang 2018, Thm. 8 and Dong, Roth & Su 2022, Cor. 3.3 (Gaussians compose to
one Gaussian); Meiser & Mohammadi 2018, Koskela et al. 2020, Doroshenko et al. 2022 (pessimistic PLDs).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as dp_pld
from dp_accounting.pld.privacy_loss_mechanism import AdjacencyType, GaussianPrivacyLoss
from scipy.special import ndtr
from scipy.stats import binom

import dpflow.privacy.pld as P
from dpflow.privacy.pld import (
    ApproxPLD,
    GaussianPLD,
    LaplacePLD,
    LatticeGaussianPLD,
    PldEvents,
    PurePLD,
    pld_epsilon,
    pld_epsilon_lower,
)
from dpflow.privacy.rounding import down, to_float_down, to_float_up, up

V = P.VALUE_DISCRETIZATION_INTERVAL


@pytest.fixture(autouse=True)
def _fresh_caches() -> None:
    """Every pin computes its figure (the PLD epsilons are cached by their events and delta)."""
    P._epsilon.cache_clear()
    P._epsilon_lower.cache_clear()


# ---------------------------------------------------------------------------------------------- events


@pytest.mark.parametrize("cls", [GaussianPLD, LatticeGaussianPLD, PurePLD, LaplacePLD])
def test_an_event_parameter_must_be_positive(cls: type[GaussianPLD]) -> None:
    name = "mu2" if cls in (GaussianPLD, LatticeGaussianPLD) else "epsilon"
    for bad in (Fraction(0), 0.0):  # negative values are refused by exact() already
        with pytest.raises(ValueError) as err:
            cls(bad)
        assert str(err.value) == f"{name} must be positive, got {Fraction(bad)!r}"
    assert cls(Fraction(1, 10**30)).params() == (Fraction(1, 10**30),)  # any positive value


def test_an_approx_event_delta_lies_strictly_between_0_and_1() -> None:
    for bad in (Fraction(0), Fraction(1), Fraction(3, 2)):
        with pytest.raises(ValueError) as err:
            ApproxPLD(Fraction(1), bad)
        assert str(err.value) == f"delta must be in (0, 1), got {bad!r}"
    for ok in (Fraction(1, 10**30), Fraction(10**30 - 1, 10**30)):
        assert ApproxPLD(Fraction(1), ok).params() == (Fraction(1), ok)
    assert ApproxPLD(Fraction(0), Fraction(1, 2)).epsilon == 0  # epsilon 0 is an (0, delta) event


def test_of_constructors_are_the_exact_ratios() -> None:
    assert GaussianPLD.of(3.0, 2.0) == GaussianPLD(Fraction(9, 4))
    assert GaussianPLD.of(Fraction(1, 3), Fraction(2)) == GaussianPLD(Fraction(1, 36))
    assert GaussianPLD.of(0.1, 1.0).mu2 == Fraction(0.1) ** 2  # the float's exact binary value
    assert LaplacePLD.of(3.0, 2.0) == LaplacePLD(Fraction(3, 2))
    assert LaplacePLD.of(Fraction(1, 3), Fraction(2)) == LaplacePLD(Fraction(1, 6))


def test_of_counts_events_and_refuses_bad_counts() -> None:
    a, b = PurePLD(Fraction(1, 2)), GaussianPLD(Fraction(1, 3))
    ev = PldEvents.of([(a, 2), b, (a, 3), (b, 0)])
    assert ev.counts == ((b, 1), (a, 5))  # counts of one event add; sorted by kind
    assert PldEvents.of([(a, 0)]).counts == ()  # a zero count is allowed and leaves nothing
    assert PldEvents.of([(a, 0), (b, 0)]) == PldEvents(())
    for bad in (-1, True, 1.0, Fraction(1)):
        with pytest.raises(ValueError) as err:
            PldEvents.of([(a, bad)])  # type: ignore[list-item]
        assert str(err.value) == f"an event count must be a non-negative int, got {bad!r}"


def test_sequential_scaled_and_text() -> None:
    a, b = PurePLD(Fraction(1, 2)), GaussianPLD(Fraction(1, 3))
    x, y = PldEvents.of([(a, 2)]), PldEvents.of([(a, 1), (b, 4)])
    assert PldEvents.sequential([x, y]).counts == ((b, 4), (a, 3))
    assert PldEvents.sequential([]).counts == ()
    assert y.scaled(3).counts == ((b, 12), (a, 3))
    assert y.scaled(1) == y
    assert y.scaled(0).counts == () and y.scaled(0) == PldEvents(())
    assert str(y) == "gaussian(1/3)x4; pure(1/2)x1"
    assert str(PldEvents.of([(ApproxPLD(Fraction(1), Fraction(1, 10**6)), 2)])) == "approx(1,1/1000000)x2"
    assert PldEvents.parse(str(y)) == y and PldEvents.parse("") == PldEvents(())
    for bad in ("gauss(1/3)x1", "pure(1/2x1", "pure 1/2 x1"):
        with pytest.raises(ValueError, match="not a PLD event"):
            PldEvents.parse(bad)
    assert y.has_gaussian and not x.has_gaussian and not y.has_lattice_gaussian
    assert y.on_lattice().counts == ((LatticeGaussianPLD(Fraction(1, 3)), 4), (a, 1))
    assert x.on_lattice() is x


# ---------------------------------------------------------------------------------------------- lattice


def _slack(t: float, entries: int) -> float:
    """The Gamma of :func:`~dpflow.privacy.pld.lattice_smoothing_slack`, restated step by step."""
    if Fraction(t) < Fraction(1, 4):
        return math.inf
    e = up(math.exp(-to_float_down(Fraction(197, 10) * Fraction(t) ** 2)))
    xi = up(2.0 * e / down(1.0 - e))
    return up(entries * up(2.0 * xi / down(1.0 - xi)))


@pytest.mark.parametrize(("t", "entries"), [(3, 1), (3, 2**63), (1, 1), (1, 7), (0.5, 1), (0.7, 3), (0.35, 1),
                                            (0.25, 1), (Fraction(1, 4), 5), (0.2, 1)])
def test_lattice_smoothing_slack_every_step_rounded_up(t: float, entries: int) -> None:
    assert P.lattice_smoothing_slack(t, entries) == _slack(t, entries)


def test_lattice_smoothing_slack_goldens() -> None:
    assert P.lattice_smoothing_slack(3, 1) == 3.99621043842184e-77
    assert P.lattice_smoothing_slack(3, 2**63) == 3.685853561112716e-58
    assert P.lattice_smoothing_slack(1, 1) == 1.1129065577022356e-08
    assert P.lattice_smoothing_slack(0.5, 1) == 0.029697969796530648
    # xi >= 1 (t too small for the bound): no slack at all
    assert P.lattice_smoothing_slack(0.1, 1) == math.inf
    t_edge = 0.33  # 19.7 t^2 = 2.145: e = 0.117, xi = 2 e / (1 - e) = 0.265 < 1
    assert P.lattice_smoothing_slack(t_edge, 1) < 1.0


def test_lattice_smoothing_slack_refuses_below_a_quarter_exactly() -> None:
    """The refusal is an exact comparison t < 1/4 (``LATTICE_MIN_SMOOTHING``), where the bound's xi is provably
    below 1 (0.8246 at t = 1/4): t = 1/4 itself has a finite Gamma, the float just below it and the old float
    edge xi = 1 (t = sqrt(ln 3 / 19.7) = 0.236) have none.  Below t = 2e-7, e rounded up past 1 and the old
    float test of xi < 1 returned a negative Gamma (-2.0 at t = 0); a negative count of entries is refused."""
    assert P.LATTICE_MIN_SMOOTHING == Fraction(1, 4)
    assert P.lattice_smoothing_slack(Fraction(1, 4), 1) == P.lattice_smoothing_slack(0.25, 1) == 9.400511803319336
    for t in (math.nextafter(0.25, 0.0), Fraction(1, 4) - Fraction(1, 10**30), math.sqrt(math.log(3.0) / 19.7),
              1e-7, 1e-9, 0, 0.0):
        assert P.lattice_smoothing_slack(t, 1) == math.inf, t
    assert P.lattice_smoothing_slack(3, 0) == up(0.0)
    with pytest.raises(ValueError, match=r"^a lattice release has a non-negative number of entries, got -1$"):
        P.lattice_smoothing_slack(3, -1)


def test_lattice_smoothed_mu2_exact_and_its_refusal() -> None:
    assert P.lattice_smoothed_mu2(Fraction(1), 5, 3) == Fraction(25, 16)
    assert P.lattice_smoothed_mu2(Fraction(2, 3), Fraction(7, 2), 2) == Fraction(2, 3) * Fraction(49, 4) / (
        Fraction(49, 4) - 4)
    for s, t in ((3, 3), (2, 3), (Fraction(5, 2), Fraction(5, 2))):
        with pytest.raises(ValueError) as err:
            P.lattice_smoothed_mu2(Fraction(1), s, t)
        assert str(err.value) == f"the lattice noise scale {s} must exceed the smoothing width {t}"


def test_gaussian_mu2_sums_every_gaussian_and_charges_every_lattice_event() -> None:
    g1, g2 = GaussianPLD(Fraction(1, 3)), GaussianPLD(Fraction(1, 5))
    mu2, gamma = P._gaussian_mu2(PldEvents.of([(g1, 2), (g2, 3), PurePLD(Fraction(1))]))
    assert (mu2, gamma) == (Fraction(2, 3) + Fraction(3, 5), 0.0)
    lat = LatticeGaussianPLD(Fraction(1, 7))
    mu2, gamma = P._gaussian_mu2(PldEvents.of([(g1, 2), (lat, 3)]))
    s2 = Fraction(P.LATTICE_MIN_SIGMA) ** 2
    assert mu2 == Fraction(2, 3) + Fraction(1, 7) * s2 / (s2 - P.LATTICE_SMOOTHING**2) * 3
    assert gamma == up(3 * P.lattice_smoothing_slack(P.LATTICE_SMOOTHING, P.LATTICE_MAX_ENTRIES))
    lat2 = LatticeGaussianPLD(Fraction(1, 11))
    _, gamma2 = P._gaussian_mu2(PldEvents.of([(lat, 3), (lat2, 2)]))
    slack = P.lattice_smoothing_slack(P.LATTICE_SMOOTHING, P.LATTICE_MAX_ENTRIES)
    assert gamma2 == up(up(2 * slack) + 3 * slack)  # lattice_gaussian(1/11) sorts first


# ---------------------------------------------------------------------------------------------- PLDs


def _pmf(d: dp_pld.PrivacyLossDistribution) -> tuple[int, list[float], float, bool]:
    p = d._pmf_remove
    return p._lower_loss, list(p._probs), p._infinity_mass, p._pessimistic_estimate


@pytest.mark.parametrize(("eps", "delta", "k"), [(Fraction(1, 3), 0.0, 3), (Fraction(1, 3), 0.01, 3),
                                                  (Fraction(3, 1000), 0.0, 7), (Fraction(1, 7), 1e-3, 1)])
@pytest.mark.parametrize("pessimistic", [True, False])
def test_randomized_response_power_is_the_exact_law_rounded_once(eps: Fraction, delta: float, k: int,
                                                                  pessimistic: bool) -> None:
    """k copies of (eps, delta) randomized response: loss (2 j - k) eps with j ~ Bin(k, e^eps / (1 + e^eps)),
    weight (1 - delta)^k, +inf with the rest; each loss rounded to the grid once (up, or down if optimistic)."""
    d = P._randomized_response_power(eps, delta, k, pessimistic)
    steps = [(2 * j - k) * eps / Fraction(V) for j in range(k + 1)]
    idx = [math.ceil(s) if pessimistic else math.floor(s) for s in steps]
    weight = (1.0 - delta) ** k
    p = binom.pmf(np.arange(k + 1), k, 1.0 / (1.0 + math.exp(-float(eps)))) * weight
    probs = [0.0] * (idx[-1] - idx[0] + 1)
    for i, q in zip(idx, p, strict=True):
        probs[i - idx[0]] += q
    lower, got, inf_mass, pess = _pmf(d)
    assert (lower, pess) == (idx[0], pessimistic)
    assert got == probs
    assert inf_mass == ((1.0 - weight) if delta > 0 else 0.0)
    assert d._symmetric


def test_event_pld_of_each_kind() -> None:
    """Pure and approx events: the randomized-response law (delta rounded up to a float); Laplace: the library's
    pessimistic Laplace PLD at b = 1 / epsilon rounded down, self-composed."""
    pure = P._event_pld(PurePLD(Fraction(1, 3)), 4)
    assert _pmf(pure) == _pmf(P._randomized_response_power(Fraction(1, 3), 0.0, 4, pessimistic=True))
    d = Fraction(1, 4 * 10**6)
    approx = P._event_pld(ApproxPLD(Fraction(1, 3), d), 2)
    assert _pmf(approx) == _pmf(P._randomized_response_power(Fraction(1, 3), to_float_up(d), 2, pessimistic=True))
    assert to_float_up(d) > float(d)  # so the rounding direction matters here
    for k in (1, 2, 3):
        lap = P._event_pld(LaplacePLD(Fraction(1, 3)), k)
        base = dp_pld.from_laplace_mechanism(down(1.0 / to_float_up(Fraction(1, 3))), sensitivity=1.0,
                                             pessimistic_estimate=True, value_discretization_interval=V)
        want = base.self_compose(k) if k > 1 else base
        assert _pmf(lap) == _pmf(want)
    assert down(1.0 / to_float_up(Fraction(1, 3))) != 3.0


def test_optimistic_gaussian_pld_restated() -> None:
    for mu in (0.5, 1.3):
        m = mu * mu / 2.0
        lower, upper = math.floor((m - 12.0 * mu) / V), math.ceil((m + 12.0 * mu) / V)
        edges = ndtr((np.arange(lower, upper + 2) * V - m) / mu)
        probs = np.diff(edges)
        probs[-1] += 1.0 - edges[-1]
        got = _pmf(P._gaussian_pld_lower(mu))
        assert got[0] == lower and got[1] == list(probs) and got[2:] == (0.0, False)


def test_loss_width_restated() -> None:
    ev = PldEvents.of([(PurePLD(Fraction(1, 2)), 3), (ApproxPLD(Fraction(1, 4), Fraction(1, 10**6)), 2),
                       (LaplacePLD(Fraction(1, 8)), 1), (GaussianPLD(Fraction(4)), 1)])
    mu2, _ = P._gaussian_mu2(ev)
    assert P._loss_width(ev, mu2) == 2.0 * (1.5 + 0.5 + 0.125) + 2.0 * (2.0 + 12.0 * 2.0)
    assert P._loss_width(PldEvents(()), Fraction(0)) == 0.0


def _hockey_stick_differences(sigma: float) -> np.ndarray:
    """``_gaussian_pld``'s differences P(x' <= x) - e^eps Q(x' <= x) on its grid, before the clip."""
    loss = GaussianPrivacyLoss(sigma, sensitivity=1.0, pessimistic_estimate=True, log_mass_truncation_bound=-50,
                               adjacency_type=AdjacencyType.REMOVE)
    bounds = loss.connect_dots_bounds()
    assert bounds.epsilon_lower is not None and bounds.epsilon_upper is not None
    eps = np.arange(math.floor(bounds.epsilon_lower / V), math.ceil(bounds.epsilon_upper / V) + 1) * V
    x = -0.5 - eps * sigma**2
    return np.asarray(loss.mu_upper_cdf(x) - np.exp(eps + loss.mu_lower_log_cdf(x)))


def test_gaussian_pld_clips_a_difference_that_cancels_below_zero() -> None:
    """The clip's lower end binds: at sigma = 378,256.67 the grid is epsilon in {-1e-4, 0, 1e-4}, and at 1e-4 both
    terms are subnormal (about 1e-308) and their float difference is -2.2e-313.  dp_accounting refuses a negative
    delta (ValueError), so without the clip ``pld_epsilon`` raised for mu^2 = 1 / sigma^2 (the PLD equals
    ``from_gaussian_mechanism``'s, which clips too).  The upper end never binds: the ``_CLIP_TOP`` reason in ``EQUIVALENT`` (benchmarks/mutation.py)."""
    sigma = 378256.6677540551
    raw = _hockey_stick_differences(sigma)
    assert len(raw) == 3 and -1e-312 < raw[-1] < 0.0 and (raw[:-1] > 0.0).all()
    ours = P._gaussian_pld(sigma)._pmf_remove
    ref = dp_pld.from_gaussian_mechanism(sigma, sensitivity=1.0, pessimistic_estimate=True,
                                         value_discretization_interval=V)._pmf_remove
    assert vars(ours) == vars(ref) and ours._infinity_mass == 0.0
    mu2 = Fraction(1) / Fraction(sigma) ** 2
    assert down(1.0 / up(math.sqrt(to_float_up(mu2)))) < sigma  # the sigma pld_epsilon uses: negative there too
    assert _hockey_stick_differences(down(1.0 / up(math.sqrt(to_float_up(mu2)))))[-1] < 0.0
    assert 0.0 < pld_epsilon([GaussianPLD(mu2)], 1e-6) < 1e-5


def test_the_hockey_stick_differences_are_at_most_one() -> None:
    """The premise of the upper end's proof: the first term is scipy's normal CDF (ndtr), which lies in [0, 1]
    by construction (0.5 + 0.5 erf(z) for |z| < 1, else 0.5 erfc(|z|) or 1 minus it), here at its extremes;
    the second term is an exp, >= 0, and a float difference a - b with b >= 0 never exceeds a."""
    z = np.array([-np.inf, -1e308, -40.0, -8.3, -1.0, -0.5, -1e-300, 0.0, 1e-300, 0.5, 1.0, 1.4142135623730951,
                  8.3, 9.0, 40.0, 1e308, np.inf])
    assert ((ndtr(z) >= 0.0) & (ndtr(z) <= 1.0)).all() and ndtr(np.inf) == 1.0
    for sigma in (0.05, 1.0, 378256.6677540551, 1e12):
        assert (_hockey_stick_differences(sigma) <= 1.0).all()


# ---------------------------------------------------------------------------------------------- epsilon


def _target(delta: float) -> float:
    return down(delta * (1.0 - P.DELTA_NUMERICAL_RESERVE))


def test_pld_epsilon_of_a_gaussian_restated() -> None:
    """One Gaussian (mu^2 summed over events): sigma = 1 / mu rounded down, at delta (1 - 1e-3) rounded down,
    the result rounded up."""
    ev = PldEvents.of([(GaussianPLD(Fraction(1, 3)), 2), GaussianPLD(Fraction(1, 5))])
    mu2 = Fraction(2, 3) + Fraction(1, 5)
    sigma = down(1.0 / up(math.sqrt(to_float_up(mu2))))
    want = up(float(P._gaussian_pld(sigma).get_epsilon_for_delta(_target(1e-6))))
    assert pld_epsilon(ev, 1e-6) == want
    assert pld_epsilon(ev, Fraction(1, 10**6)) == want
    # golden to 1e-9 (dp_accounting's FFT moves the last digits with the numpy/scipy build: 1 ulp on numpy 2.4.6)
    assert pld_epsilon(ev, 1e-6) == pytest.approx(4.505477311926896, rel=1e-9)


def test_pld_epsilon_composes_every_event() -> None:
    g, p, a = GaussianPLD(Fraction(1, 4)), PurePLD(Fraction(1, 10)), ApproxPLD(Fraction(1, 20), Fraction(1, 10**8))
    ev = PldEvents.of([(g, 2), (p, 3), a])
    sigma = down(1.0 / up(math.sqrt(to_float_up(Fraction(1, 2)))))
    total = P._event_pld(a, 1).compose(P._event_pld(p, 3)).compose(P._gaussian_pld(sigma))
    assert pld_epsilon(ev, 1e-6) == up(float(total.get_epsilon_for_delta(_target(1e-6))))
    assert pld_epsilon([(p, 3)], 1e-6) == up(float(P._event_pld(p, 3).get_epsilon_for_delta(_target(1e-6))))


def test_pld_epsilon_of_lattice_events_adds_twice_gamma_and_lowers_delta() -> None:
    lat = LatticeGaussianPLD(Fraction(1, 10**30))
    k = 10**31  # mu^2 = 10 in all; Gamma = k * 3.7e-58 ~ 3.7e-27: below 2^-60
    ev = PldEvents.of([(lat, k)])
    mu2, gamma = P._gaussian_mu2(ev)
    assert 0 < gamma < 2.0**-60
    sigma = down(1.0 / up(math.sqrt(to_float_up(mu2))))
    eps = float(P._gaussian_pld(sigma).get_epsilon_for_delta(down(_target(1e-6))))
    assert pld_epsilon(ev, 1e-6) == up(eps + 2.0 * gamma)
    # Gamma from 2^-60 on gives no figure (k * slack >= 2^-60 needs about 3e39 events of a tiny mu^2)
    big = PldEvents.of([(LatticeGaussianPLD(Fraction(1, 10**45)), 10**42)])
    assert P._gaussian_mu2(big)[1] >= 2.0**-60 and pld_epsilon(big, 1e-6) == math.inf


def test_pld_epsilon_limits() -> None:
    assert pld_epsilon([], 1e-6) == 0.0 and pld_epsilon(PldEvents(()), 0.5) == 0.0
    # the loss grid's width: 2 epsilon per pure event, at most MAX_LOSS_WIDTH = 100
    assert pld_epsilon([PurePLD(Fraction(50))], 1e-6) < math.inf
    assert pld_epsilon([PurePLD(Fraction(50) + Fraction(1, 10**9))], 1e-6) == math.inf
    assert pld_epsilon([(PurePLD(Fraction(25)), 2)], 1e-6) < math.inf
    # a delta mass at +inf above the target: no figure
    assert pld_epsilon([ApproxPLD(Fraction(1, 2), Fraction(1, 10**5))], 1e-6) == math.inf
    # a negative epsilon from the library is reported as the smallest float above 0 (max(eps, 0) rounded up)
    assert pld_epsilon([GaussianPLD(Fraction(1, 10**6))], 0.5) == 5e-324
    for bad in (0, 1, Fraction(0), 1.5):
        with pytest.raises(ValueError) as err:
            pld_epsilon([PurePLD(Fraction(1))], bad)
        assert str(err.value) == f"delta must be in (0, 1), got {bad!r}"
    # delta is rounded down to a float before the search
    d = Fraction(1, 3 * 10**6)
    ev = PldEvents.of([GaussianPLD(Fraction(1))])
    sigma = down(1.0 / up(math.sqrt(1.0)))
    assert pld_epsilon(ev, d) == up(float(P._gaussian_pld(sigma).get_epsilon_for_delta(_target(to_float_down(d)))))


def test_pld_epsilon_lower_restated() -> None:
    g, p = GaussianPLD(Fraction(1, 3)), PurePLD(Fraction(1, 10))
    ev = PldEvents.of([(g, 2), (p, 3)])
    d = Fraction(1, 3 * 10**6)
    mu = down(math.sqrt(to_float_down(Fraction(2, 3))))
    total = P._randomized_response_power(p.epsilon, 0.0, 3, pessimistic=False).compose(P._gaussian_pld_lower(mu))
    assert pld_epsilon_lower(ev, d) == max(down(float(total.get_epsilon_for_delta(to_float_up(d)))), 0.0)
    only_g = PldEvents.of([(g, 2)])
    assert pld_epsilon_lower(only_g, 1e-6) == down(float(P._gaussian_pld_lower(mu).get_epsilon_for_delta(1e-6)))
    # no lower bound: Laplace or approx events, an empty composition, a grid wider than 100
    assert pld_epsilon_lower(PldEvents.of([(g, 2), LaplacePLD(Fraction(1))]), 1e-6) == 0.0
    assert pld_epsilon_lower(PldEvents.of([ApproxPLD(Fraction(1), Fraction(1, 10**9))]), 1e-6) == 0.0
    assert pld_epsilon_lower(PldEvents(()), 1e-6) == 0.0
    assert pld_epsilon_lower(PldEvents.of([PurePLD(Fraction(50))]), 1e-6) > 49.0
    assert pld_epsilon_lower(PldEvents.of([PurePLD(Fraction(50) + Fraction(1, 10**9))]), 1e-6) == 0.0
    assert pld_epsilon_lower(PldEvents.of([GaussianPLD(Fraction(1, 10**6))]), 0.5) == 0.0  # never negative
    for bad in (0, 1, Fraction(0), 1.5):
        with pytest.raises(ValueError) as err:
            pld_epsilon_lower(ev, bad)
        assert str(err.value) == f"delta must be in (0, 1), got {bad!r}"


def test_lattice_gamma_is_added_twice_where_it_shows() -> None:
    """At delta = 1/2 a tiny mu^2 has epsilon 0 before the lattice slack, so the figure is exactly up(2 Gamma)."""
    ev = PldEvents.of([(LatticeGaussianPLD(Fraction(1, 10**45)), 10**31)])
    _, gamma = P._gaussian_mu2(ev)
    assert 0 < gamma < 1e-20
    assert pld_epsilon(ev, 0.5) == up(2.0 * gamma)


def test_lattice_gamma_cut_is_two_to_the_minus_60() -> None:
    """Gamma between 2^-61 and 2^-60 still gets a figure (the cut is at 2^-60)."""
    slack = P.lattice_smoothing_slack(P.LATTICE_SMOOTHING, P.LATTICE_MAX_ENTRIES)
    k = int(1.5 * 2.0**-61 / slack)  # Gamma = k slack, about 1.5 2^-61
    ev = PldEvents.of([(LatticeGaussianPLD(Fraction(1, 10**45)), k)])
    _, gamma = P._gaussian_mu2(ev)
    assert 2.0**-61 < gamma < 2.0**-60
    assert pld_epsilon(ev, 0.5) == up(2.0 * gamma)


def test_lattice_gamma_of_exactly_two_to_the_minus_60_gets_no_figure() -> None:
    """The cut is strict (Gamma < 2^-60), and Gamma = 2^-60 exactly is reachable: round 5 listed ``<=`` as
    equivalent because no count found it; two lattice events of about 1.2e39 copies each, summed in this order,
    give up(up(k1 s) + k2 s) = 2^-60 (s the slack per event; with the counts swapped, one float below)."""
    k1, k2 = 1176609058941682046944356228214839836672, 1176609058940504855427506483055969697792
    a, b = LatticeGaussianPLD(Fraction(1, 10**100)), LatticeGaussianPLD(Fraction(2, 10**100))
    exact = PldEvents.of([(a, k1), (b, k2)])
    assert P._gaussian_mu2(exact)[1] == 2.0**-60 and pld_epsilon(exact, 1e-6) == math.inf
    below = PldEvents.of([(a, k2), (b, k1)])
    gamma = P._gaussian_mu2(below)[1]
    assert gamma == math.nextafter(2.0**-60, 0.0) and pld_epsilon(below, 1e-6) == up(2.0 * gamma)


def test_a_tiny_gaussian_mu2_is_raised_to_the_floor_not_an_overflow() -> None:
    """mu^2 below about 1e-308 made dp_accounting square an overflowing sigma (a bare OverflowError); it is now
    raised to MIN_GAUSSIAN_MU2 = 2^-1000 (a larger mu dominates), so the figure equals the floor's exactly."""
    from dpflow.privacy.pld import MIN_GAUSSIAN_MU2

    assert MIN_GAUSSIAN_MU2 == 2.0**-1000
    tiny = P.pld_epsilon([P.GaussianPLD(Fraction(1, 10**320))], 1e-6)
    assert tiny == P.pld_epsilon([P.GaussianPLD(Fraction(2) ** -1000)], 1e-6) == 5e-324
    pure = P.pld_epsilon([P.PurePLD(Fraction(1, 2))], 1e-6)
    assert pure <= P.pld_epsilon([P.GaussianPLD(Fraction(1, 10**320)), P.PurePLD(Fraction(1, 2))], 1e-6) < 0.5
