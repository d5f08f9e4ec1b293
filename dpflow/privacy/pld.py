"""Privacy loss distributions (PLD): numerical (epsilon, delta) accounting through Google's ``dp_accounting``.

A PLD is the distribution of the privacy loss L = ln(P(o) / Q(o)), o ~ P, of a dominating pair (P, Q)
of a mechanism; delta(epsilon) = E[(1 - e^(epsilon - L))_+] plus the mass at L = +inf, and the PLD of
a sequential composition is the convolution of the PLDs (Meiser & Mohammadi 2018, "Tight on
Budget?", Sec. 4-5; Sommer, Meiser & Mohammadi 2019; Koskela, Jalko & Honkela 2020, "Computing
Tight Differential Privacy Guarantees Using FFT"; Zhu, Dong & Wang 2022, dominating pairs).
The numerics are ``dp_accounting.pld`` (Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022,
"Connect the Dots: Tighter Discrete Approximations of Privacy Loss Distributions").

Soundness of the numbers:

* every PLD is built with ``pessimistic_estimate=True`` (losses rounded UP to the grid
  :data:`VALUE_DISCRETIZATION_INTERVAL` = 1e-4, truncated tail mass moved to +inf), so every
  delta(epsilon) computed is an upper bound and every epsilon(delta) a valid epsilon (delta(epsilon)
  is increasing in the loss, so rounding the loss up on a coupling bounds it from above);
* the parameters handed to ``dp_accounting`` are rounded against the user (noise scales down,
  epsilons and deltas up, the target delta down: ``rounding.py``), and the epsilon it returns is
  rounded up once more (:func:`dpflow.privacy.rounding.up`);
* the PLD is evaluated at delta (1 - :data:`DELTA_NUMERICAL_RESERVE`): a thousandth of delta covers
  the floating-point error of the FFT convolutions (a numerical margin, not a proof).

Which PLD each event uses, and why it is valid:

* :class:`GaussianPLD` (mu^2 = (Delta_2/sigma)^2): the continuous Gaussian mechanism.  A shift of l2
  norm at most Delta_2 of an isotropic Gaussian is, by rotation invariance, the one-dimensional pair
  (N(0, sigma^2), N(Delta_2, sigma^2)) or a weaker one; its privacy loss is itself Gaussian, and the
  PLD is exact up to discretisation (Balle & Wang 2018, "Improving the Gaussian Mechanism", Thm. 8;
  Dong, Roth & Su 2022, Thm. 2.7).  Gaussians compose to one Gaussian with mu^2 summed (Dong, Roth &
  Su 2022, Cor. 3.3), so all Gaussian events of a composition become one ``from_gaussian_mechanism``.
  Valid ONLY for continuous noise: a cost that a run may pay with the discrete Gaussian on a lattice
  (exact noise sources) holds :class:`LatticeGaussianPLD` instead (``Cost.for_lattice_noise``).
* :class:`LatticeGaussianPLD` (mu^2): the discrete Gaussian N_Z(0, s^2) added to every entry of a
  statistic rounded to a lattice, with lattice noise scale s >= :data:`LATTICE_MIN_SIGMA` and integer
  neighbour shifts v of l2 norm at most mu s (or the continuous Gaussian at the same mu).  Its PLD is the
  Gaussian PLD at the slightly larger mu'^2 = mu^2 s^2 / (s^2 - t^2), t = :data:`LATTICE_SMOOTHING`, with
  every loss raised by 2 Gamma and delta divided by e^Gamma, Gamma tiny (:func:`lattice_smoothing_slack`).
  The derivation (a smoothing argument; see :class:`LatticeGaussianPLD`) holds in any dimension, where
  dp_accounting's ``DiscreteGaussianPrivacyLoss`` is one-dimensional and enumerates every lattice point
  within about 11.6 s (about 1e13 points at dpflow's lattice scale).
* :class:`PurePLD` (epsilon): any epsilon-DP mechanism -- Laplace (continuous, or discrete Laplace on
  the lattice with the l1-widened sensitivity, which is still epsilon-DP: Canonne, Kamath & Steinke
  2020), the exponential mechanism, report-noisy-max, Peel, quantiles, AboveThreshold.  Every
  epsilon-DP mechanism is dominated by binary randomized response with parameter epsilon (Kairouz, Oh
  & Viswanath 2015, Thm. 2.4 / 3.3; Murtagh & Vadhan 2016), whose PLD is L = +epsilon with
  probability e^epsilon / (1 + e^epsilon) and -epsilon otherwise
  (``from_privacy_parameters``, Meiser & Mohammadi 2018; dp_accounting supplementary Sec. 3.5).
* :class:`ApproxPLD` (epsilon, delta): any (epsilon, delta)-DP mechanism (the stability histogram).
  The same randomized response with a delta mass at +inf dominates every (epsilon, delta)-DP
  mechanism (Kairouz, Oh & Viswanath 2015, Thm. 2.4; Murtagh & Vadhan 2016); ``from_privacy_parameters``.
* :class:`LaplacePLD` (Delta_1/b): the Laplace-specific PLD of a ONE-dimensional continuous Laplace
  release (Koskela et al. 2020; Doroshenko et al. 2022).  dpflow's Laplace releases are vectors (a
  split l1 shift is not proven to be dominated by the one-dimensional one here) and exact sources draw
  the discrete Laplace, so dpflow's mechanisms use :class:`PurePLD` instead; this event is kept for
  scalar releases and cross-checks.

Not covered (no PLD, the zCDP / GDP accountings stand alone): generic rho-zCDP events, group privacy,
and parallel compositions whose pieces differ (see ``Cost.parallel``).

>>> round(pld_epsilon([GaussianPLD(Fraction(1))], 1e-6), 3)
4.887
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Iterable
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
import numpy as np

from .measures import exact
from .rounding import down, to_float_down, to_float_up, up

if TYPE_CHECKING:  # dp_accounting (with scipy.stats) is imported where a PLD is built, not with dpflow
    from dp_accounting.pld import privacy_loss_distribution as _pld

__all__ = [
    "DELTA_NUMERICAL_RESERVE",
    "LATTICE_MAX_ENTRIES",
    "LATTICE_MIN_SIGMA",
    "LATTICE_MIN_SMOOTHING",
    "LATTICE_SMOOTHING",
    "MAX_DISTINCT_EVENTS",
    "MAX_LOSS_WIDTH",
    "VALUE_DISCRETIZATION_INTERVAL",
    "ApproxPLD",
    "GaussianPLD",
    "LaplacePLD",
    "LatticeGaussianPLD",
    "PldEvent",
    "PldEvents",
    "PurePLD",
    "lattice_smoothed_mu2",
    "lattice_smoothing_slack",
    "pld_epsilon",
    "pld_epsilon_lower",
]

#: Width of the privacy-loss grid of every PLD (dp_accounting's default): losses are rounded UP to
#: multiples of it, so the epsilon found is at most about this much above the exact one per event.
VALUE_DISCRETIZATION_INTERVAL = 1e-4
#: A composition with more distinct events than this carries no PLD (each distinct event costs one
#: FFT convolution; identical events are one self-composition): certification stays fast.
MAX_DISTINCT_EVENTS = 64
#: A composition whose privacy loss can spread over more than this many nats gets no PLD figure (its
#: grid would exceed about 10^6 points; such an epsilon is far beyond any meaningful budget anyway).
MAX_LOSS_WIDTH = 100.0
#: Share of the target delta reserved for the floating-point error of the PLD numerics (FFT
#: convolutions and sums in ``dp_accounting`` are not rounded outward): the PLD is evaluated at
#: delta * (1 - 1e-3).  FFT convolution errs by about 1e-16 per bin of a unit-mass PMF, i.e. far
#: below 1e-3 delta for any delta >= 1e-12 and grids below 10^6 points (:data:`MAX_LOSS_WIDTH`).
DELTA_NUMERICAL_RESERVE = 1e-3
#: The smallest lattice noise scale s = sigma / (lattice step) of a discrete Gaussian release that a
#: :class:`LatticeGaussianPLD` event covers; ``dpflow.nodes.mechanisms.lattice_calibration`` guarantees it.
LATTICE_MIN_SIGMA = 2**40
#: The smoothing width t (lattice units) of :class:`LatticeGaussianPLD`'s domination argument: the
#: Gaussian PLD is taken at s'^2 = s^2 - t^2, and each entry adds 2 xi(t) / (1 - xi(t)) <= 6e-77 to Gamma.
LATTICE_SMOOTHING = 3
#: The smallest smoothing width :func:`lattice_smoothing_slack` bounds (below it, it returns ``inf``): at
#: t >= 1/4 its xi is provably below 1 in floating point, so no float comparison decides the refusal.
LATTICE_MIN_SMOOTHING = Fraction(1, 4)
#: The entries of one release are fewer than this (a numpy array holds fewer than 2^63 bytes): it bounds
#: the Gamma of one :class:`LatticeGaussianPLD` event whatever the dimension.
LATTICE_MAX_ENTRIES = 2**63


def _positive(_instance: Any, attribute: attrs.Attribute[Fraction], value: Fraction) -> None:
    if not value > 0:
        raise ValueError(f"{attribute.name} must be positive, got {value!r}")


def _probability(_instance: Any, attribute: attrs.Attribute[Fraction], value: Fraction) -> None:
    if not 0 < value < 1:
        raise ValueError(f"{attribute.name} must be in (0, 1), got {value!r}")


@attrs.frozen
class GaussianPLD:
    """A continuous Gaussian mechanism with (Delta_2 / sigma)^2 = ``mu2`` (mu-GDP, mu = sqrt(mu2)).

    Source: Balle & Wang 2018, Thm. 8; Dong, Roth & Su 2022, Thm. 2.7 (see the module docstring).

    >>> GaussianPLD.of(Fraction(1), Fraction(2)).mu2
    Fraction(1, 4)
    """

    mu2: Fraction = attrs.field(converter=exact, validator=_positive)
    kind: ClassVar[str] = "gaussian"

    @classmethod
    def of(cls, sensitivity: Fraction | float, sigma: Fraction | float) -> GaussianPLD:
        """The event of N(0, sigma^2) noise on a statistic of l2 sensitivity Delta_2."""
        return cls((exact(sensitivity) / exact(sigma)) ** 2)

    def params(self) -> tuple[Fraction, ...]:
        return (self.mu2,)


@attrs.frozen
class LaplacePLD:
    """A one-dimensional continuous Laplace release with Delta_1 / b = ``epsilon``.

    Source: Koskela et al. 2020; Doroshenko et al. 2022 (valid for scalar continuous Laplace only).

    >>> LaplacePLD.of(Fraction(1), Fraction(2)).epsilon
    Fraction(1, 2)
    """

    epsilon: Fraction = attrs.field(converter=exact, validator=_positive)
    kind: ClassVar[str] = "laplace"

    @classmethod
    def of(cls, sensitivity: Fraction | float, scale: Fraction | float) -> LaplacePLD:
        """The event of Laplace(b) noise on a scalar of l1 sensitivity Delta_1."""
        return cls(exact(sensitivity) / exact(scale))

    def params(self) -> tuple[Fraction, ...]:
        return (self.epsilon,)


@attrs.frozen
class PurePLD:
    """Any epsilon-DP mechanism, through its worst case (binary randomized response).

    Source: Kairouz, Oh & Viswanath 2015, Thm. 2.4; Meiser & Mohammadi 2018.

    >>> PurePLD(Fraction(1, 2)).epsilon
    Fraction(1, 2)
    """

    epsilon: Fraction = attrs.field(converter=exact, validator=_positive)
    kind: ClassVar[str] = "pure"

    def params(self) -> tuple[Fraction, ...]:
        return (self.epsilon,)


@attrs.frozen
class ApproxPLD:
    """Any (epsilon, delta)-DP mechanism, through its worst case (randomized response plus delta at +inf).

    Source: Kairouz, Oh & Viswanath 2015, Thm. 2.4; Meiser & Mohammadi 2018.

    >>> ApproxPLD(Fraction(1), Fraction(1, 10**6)).delta
    Fraction(1, 1000000)
    """

    epsilon: Fraction = attrs.field(converter=exact)
    delta: Fraction = attrs.field(converter=exact, validator=_probability)
    kind: ClassVar[str] = "approx"

    def params(self) -> tuple[Fraction, ...]:
        return (self.epsilon, self.delta)


def lattice_smoothing_slack(t: float | Fraction, entries: int) -> float:
    """Gamma of :class:`LatticeGaussianPLD`: ``entries`` times 2 xi / (1 - xi) >= ln((1 + xi) / (1 - xi)), with
    xi = 2 e^-a / (1 - e^-a) >= 2 sum_{n>=1} e^{-2 pi^2 t^2 n^2} (a = 19.7 t^2 <= 2 pi^2 t^2, and n^2 >= n);
    every float step rounded up.  ``inf`` (no bound) for a smoothing width t below :data:`LATTICE_MIN_SMOOTHING`
    (compared exactly), and a ``ValueError`` for a negative ``entries``.

    Why 1/4 suffices (so no float test of xi < 1 decides the refusal): at t >= 1/4, a >= 1.23125 exactly and
    so is a rounded down (1.23125 is a float); exp(-1.23125) = 0.29193, so for any exp within 1% of the true
    value e = up(exp(-a)) <= 0.2949, down(1 - e) >= 0.7051 and xi <= up(0.5898 / 0.7051) < 0.837 (0.8246 at
    t = 1/4 with the platform's exp); and e > 0 (up(0.0) > 0).  So every float or Fraction t >= 1/4 gives
    0 < xi < 1 and a finite Gamma >= 0.  (A float test of xi < 1 instead would have to show that no float
    t makes xi exactly 1.0; and below t = 2e-7, where e rounds up past 1, it went negative.)

    >>> 0 < lattice_smoothing_slack(3, 1) < 1e-76 and lattice_smoothing_slack(3, 2**63) < 1e-57
    True
    >>> lattice_smoothing_slack(0.2, 1)
    inf
    """
    if entries < 0:
        raise ValueError(f"a lattice release has a non-negative number of entries, got {entries}")
    if exact(t) < LATTICE_MIN_SMOOTHING:
        return math.inf
    a = Fraction(197, 10) * exact(t) ** 2  # 19.7 < 2 pi^2 = 19.739...
    e = up(math.exp(-to_float_down(a)))
    xi = up(2.0 * e / down(1.0 - e))
    return up(entries * up(2.0 * xi / down(1.0 - xi)))


def lattice_smoothed_mu2(mu2: Fraction, sigma_min: Fraction | int, t: Fraction | int) -> Fraction:
    """mu'^2 = mu^2 s^2 / (s^2 - t^2) at s = ``sigma_min`` (the largest over s >= sigma_min), exact: the mu^2 of
    the continuous Gaussian that the smoothed lattice release post-processes (:class:`LatticeGaussianPLD`).

    >>> lattice_smoothed_mu2(Fraction(1), 5, 3)
    Fraction(25, 16)
    """
    s2, t2 = exact(sigma_min) ** 2, exact(t) ** 2
    if not s2 > t2:
        raise ValueError(f"the lattice noise scale {sigma_min} must exceed the smoothing width {t}")
    return exact(mu2) * s2 / (s2 - t2)


@attrs.frozen
class LatticeGaussianPLD:
    """The discrete Gaussian on a lattice (or the continuous Gaussian) at (l2 shift / noise scale)^2 <= ``mu2``.

    What it covers: a statistic rounded to a lattice (integer coordinates, any number m < 2^63 of
    entries), neighbours whose rounded values differ by an integer vector v with ||v||_2 <= mu s, and
    independent N_Z(0, s^2) noise on every entry (P(k) proportional to e^{-k^2/(2 s^2)}; Canonne, Kamath &
    Steinke 2020, Def. 1), s >= :data:`LATTICE_MIN_SIGMA`; or the continuous Gaussian at the same mu.

    Derivation (smoothing).  Let t = :data:`LATTICE_SMOOTHING` < s, s'^2 = s^2 - t^2, and K the kernel
    that maps y in R to N_Z(y, t^2) (the discrete Gaussian on Z centred at y).  By Poisson summation, its
    normaliser Theta(y) = sum_j e^{-(j - y)^2/(2 t^2)} = t sqrt(2 pi) (1 + 2 sum_{n>=1} e^{-2 pi^2 t^2 n^2}
    cos(2 pi n y)) lies in t sqrt(2 pi) [1 - xi, 1 + xi] (CKS 2020 use the same sum for the normaliser of
    N_Z(0, s^2), which is s sqrt(2 pi) (1 + xi_s), 0 <= xi_s <= xi).  So the law of K(N(a, s'^2)) at an
    integer a is, at every integer k, within a factor [1/(1 + xi), 1/(1 - xi)] of the Gaussian convolution
    phi_{s'} * phi_t = phi_s at k - a, hence within e^{+-gamma}, gamma = ln((1 + xi)/(1 - xi)), of
    N_Z(a, s^2)(k); over m entries and a whole (adaptive) composition the factors multiply, Gamma = sum of
    m gamma over the lattice releases the composition accounts (releases that a neighbour does not change,
    such as the other pieces of a parallel composition, have equal laws under both and are left as they are;
    :func:`pld_epsilon` charges :data:`LATTICE_MAX_ENTRIES` entries per lattice event of the multiset).
    With P, Q the laws of the composed run on two neighbours and P', Q' those of the run whose
    lattice releases are replaced by the smoothed continuous ones: P <= e^Gamma P', Q >= e^-Gamma Q'
    pointwise, so delta_P(epsilon) <= e^Gamma delta_P'(epsilon - 2 Gamma), i.e. epsilon_P(delta) <=
    epsilon_P'(delta e^-Gamma) + 2 Gamma.  P', Q' post-process continuous Gaussian releases of shift
    ||v||_2 / s' <= mu s / s' (so the Gaussian PLD at mu'^2 = :func:`lattice_smoothed_mu2` dominates them;
    Balle & Wang 2018, Thm. 8; Dong, Roth & Su 2022, Cor. 3.3) composed with the other events unchanged.
    The same smoothing idea is the lattice smoothing parameter of Micciancio & Regev 2007.  At dpflow's
    lattice (s >= 2^40, t = 3) mu'^2 exceeds mu^2 by 8e-24 relative and Gamma < 1e-57 per event: the
    PLD is the continuous one to within float rounding.

    >>> LatticeGaussianPLD(Fraction(1, 2)).mu2
    Fraction(1, 2)
    """

    mu2: Fraction = attrs.field(converter=exact, validator=_positive)
    kind: ClassVar[str] = "lattice_gaussian"

    def params(self) -> tuple[Fraction, ...]:
        return (self.mu2,)


PldEvent = GaussianPLD | LatticeGaussianPLD | LaplacePLD | PurePLD | ApproxPLD
_KINDS: dict[str, type[PldEvent]] = {c.kind: c for c in (GaussianPLD, LatticeGaussianPLD, LaplacePLD, PurePLD,
                                                           ApproxPLD)}


def _key(item: tuple[PldEvent, int]) -> tuple[str, tuple[Fraction, ...]]:
    return item[0].kind, item[0].params()


@attrs.frozen
class PldEvents:
    """A sequential composition of PLD events, as a multiset: each distinct event with its count.

    Identical events are one self-composition (one FFT power in ``dp_accounting``); the order of a
    sequential composition does not change its PLD (convolution commutes).  The empty multiset is
    the identity (no privacy loss).  ``str`` gives a canonical text that :meth:`parse` reads back
    (the ledger's JSON form).  Source: composition is the convolution of PLDs (Meiser & Mohammadi
    2018, Sec. 5; Koskela et al. 2020).

    >>> e = PldEvents.of([PurePLD(Fraction(1, 2))]).scaled(3)
    >>> str(e), PldEvents.parse(str(e)) == e
    ('pure(1/2)x3', True)
    """

    counts: tuple[tuple[PldEvent, int], ...]

    @classmethod
    def of(cls, events: Iterable[PldEvent | tuple[PldEvent, int]]) -> PldEvents:
        """The composition of ``events`` (each an event, or an (event, count) pair)."""
        tally: Counter[PldEvent] = Counter()
        for e in events:
            if isinstance(e, tuple):
                event, k = e
                if isinstance(k, bool) or not isinstance(k, int) or k < 0:
                    raise ValueError(f"an event count must be a non-negative int, got {k!r}")
                tally[event] += k
            else:
                tally[e] += 1
        return cls(tuple(sorted(((e, k) for e, k in tally.items() if k > 0), key=_key)))

    @staticmethod
    def sequential(parts: Iterable[PldEvents]) -> PldEvents:
        """The sequential composition of several compositions (the multisets add up)."""
        tally: Counter[PldEvent] = Counter()
        for p in parts:
            for e, k in p.counts:
                tally[e] += k
        return PldEvents(tuple(sorted(tally.items(), key=_key)))

    def scaled(self, k: int) -> PldEvents:
        """The k-fold self-composition (k = 0 gives the empty composition)."""
        if k == 0:
            return PldEvents(())
        return PldEvents(tuple((e, c * k) for e, c in self.counts))

    @property
    def has_gaussian(self) -> bool:
        """Whether a continuous Gaussian event is present (valid only for continuous noise)."""
        return any(isinstance(e, GaussianPLD) for e, _ in self.counts)

    @property
    def has_lattice_gaussian(self) -> bool:
        """Whether a :class:`LatticeGaussianPLD` event is present."""
        return any(isinstance(e, LatticeGaussianPLD) for e, _ in self.counts)

    def on_lattice(self) -> PldEvents:
        """These events for a run that may draw the discrete Gaussian: every continuous Gaussian event
        becomes the :class:`LatticeGaussianPLD` event of the same mu^2 (valid for both kinds of noise).

        >>> str(PldEvents.of([GaussianPLD(Fraction(1, 2)), PurePLD(Fraction(1))]).on_lattice())
        'lattice_gaussian(1/2)x1; pure(1)x1'
        """
        if not self.has_gaussian:
            return self
        return PldEvents.of((LatticeGaussianPLD(e.mu2) if isinstance(e, GaussianPLD) else e, k)
                            for e, k in self.counts)

    def __str__(self) -> str:
        return "; ".join(f"{e.kind}({','.join(str(p) for p in e.params())})x{k}" for e, k in self.counts)

    @classmethod
    def parse(cls, text: str) -> PldEvents:
        """The inverse of ``str``."""
        items: list[tuple[PldEvent, int]] = []
        for part in filter(None, (p.strip() for p in text.split(";"))):
            head, _, count = part.rpartition("x")
            kind, _, rest = head.partition("(")
            if kind not in _KINDS or not rest.endswith(")"):
                raise ValueError(f"not a PLD event: {part!r}")
            params = [Fraction(p) for p in rest[:-1].split(",")]
            items.append((_KINDS[kind](*params), int(count)))
        return cls.of(items)


def _gaussian_mu2(events: PldEvents) -> tuple[Fraction, float]:
    """The mu^2 of the one Gaussian that all Gaussian events compose to (Dong, Roth & Su 2022, Cor. 3.3),
    lattice events at their smoothed mu'^2, and the Gamma of the lattice events (:class:`LatticeGaussianPLD`)."""
    mu2, gamma = Fraction(0), 0.0
    for e, k in events.counts:
        if isinstance(e, GaussianPLD):
            mu2 += e.mu2 * k
        elif isinstance(e, LatticeGaussianPLD):
            mu2 += lattice_smoothed_mu2(e.mu2, LATTICE_MIN_SIGMA, LATTICE_SMOOTHING) * k
            gamma = up(gamma + k * lattice_smoothing_slack(LATTICE_SMOOTHING, LATTICE_MAX_ENTRIES))
    return mu2, gamma


_GAUSSIANS = (GaussianPLD, LatticeGaussianPLD)


def _event_pld(event: LaplacePLD | PurePLD | ApproxPLD, count: int) -> _pld.PrivacyLossDistribution:
    """The pessimistic PLD of ``count`` self-compositions of a non-Gaussian event."""
    from dp_accounting.pld import privacy_loss_distribution as _pld
    vdi = VALUE_DISCRETIZATION_INTERVAL
    if isinstance(event, LaplacePLD):
        base = _pld.from_laplace_mechanism(down(1.0 / to_float_up(event.epsilon)), sensitivity=1.0,
                                           pessimistic_estimate=True, value_discretization_interval=vdi)
        return base.self_compose(count) if count > 1 else base
    delta = to_float_up(event.delta) if isinstance(event, ApproxPLD) else 0.0
    return _randomized_response_power(event.epsilon, min(delta, 1.0), count, pessimistic=True)


def _randomized_response_power(eps: Fraction, delta: float, k: int, pessimistic: bool) -> _pld.PrivacyLossDistribution:
    """The PLD of the k-fold composition of the (eps, delta) worst case, built from its exact law and rounded
    to the grid ONCE: (eps, delta) randomized response (Kairouz, Oh & Viswanath 2015, Thm. 2.4) has loss +inf
    with probability delta, else +eps or -eps with probabilities e^eps / (1 + e^eps) and 1 / (1 + e^eps), so k
    copies have loss +inf with probability 1 - (1 - delta)^k, else (2 j - k) eps with j ~ Binomial(k,
    e^eps / (1 + e^eps)) (weights (1 - delta)^k; Kairouz, Oh & Viswanath 2015, Thm. 3.3, the optimal
    composition).  Rounding each loss up (``pessimistic``; down otherwise) once errs by at most one grid step
    in all, where composing k rounded copies (``self_compose``) errs by up to k steps: the k-fold pure
    composition of a 10,000-node plan (833 events of epsilon 0.003) gets an epsilon 8% lower this way."""
    from dp_accounting.pld import pld_pmf as _pmf
    from dp_accounting.pld import privacy_loss_distribution as _pld
    from scipy.stats import binom
    v = VALUE_DISCRETIZATION_INTERVAL
    j = np.arange(k + 1)
    ratio = eps / Fraction(v)  # losses in grid steps, (2 j - k) eps / v, rounded exactly
    m = (2 * j - k).astype(object) * ratio.numerator
    idx = (-((-m) // ratio.denominator) if pessimistic else m // ratio.denominator).astype(np.int64)
    weight = (1.0 - delta) ** k
    probs_j = binom.pmf(j, k, 1.0 / (1.0 + math.exp(-float(eps)))) * weight  # float error: the delta reserve
    lower = int(idx[0])
    probs = np.zeros(int(idx[-1]) - lower + 1)
    np.add.at(probs, idx - lower, probs_j)
    infinity = (1.0 - weight) if delta > 0 else 0.0
    return _pld.PrivacyLossDistribution(_pmf.DensePLDPmf(v, lower, probs, infinity, pessimistic_estimate=pessimistic))


def _gaussian_pld(sigma: float) -> _pld.PrivacyLossDistribution:
    """The pessimistic connect-the-dots PLD of N(0, sigma^2) noise at sensitivity 1: exactly what
    ``from_gaussian_mechanism(sigma, pessimistic_estimate=True)`` builds (its defaults: truncation bound
    e^-50, add-or-remove neighbours, the two directions identical), with the hockey-stick divergence
    evaluated on the whole loss grid at once (dp_accounting inverts the privacy loss in a Python loop, one
    grid point at a time: most of a search step).  The inverse of the loss L(x) = (-1/2 - x) / sigma^2 of the
    remove direction is x = -1/2 - epsilon sigma^2; delta(epsilon) = P(x' <= x) - e^epsilon Q(x' <= x)
    (dp_accounting's ``get_delta_for_epsilon``).  Tests check it equal to ``from_gaussian_mechanism``."""
    from dp_accounting.pld import pld_pmf as _pmf
    from dp_accounting.pld import privacy_loss_distribution as _pld
    from dp_accounting.pld import privacy_loss_mechanism as _mech
    vdi = VALUE_DISCRETIZATION_INTERVAL
    loss = _mech.GaussianPrivacyLoss(sigma, sensitivity=1.0, pessimistic_estimate=True, log_mass_truncation_bound=-50,
                                     adjacency_type=_mech.AdjacencyType.REMOVE)
    bounds = loss.connect_dots_bounds()
    assert bounds.epsilon_lower is not None and bounds.epsilon_upper is not None
    lower, upper = math.floor(bounds.epsilon_lower / vdi), math.ceil(bounds.epsilon_upper / vdi)
    eps = np.arange(lower, upper + 1) * vdi
    x = -0.5 - eps * sigma**2
    deltas = np.clip(loss.mu_upper_cdf(x) - np.exp(eps + loss.mu_lower_log_cdf(x)), 0.0, 1.0)
    return _pld.PrivacyLossDistribution(_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(vdi, lower, upper, deltas))


def _loss_width(events: PldEvents, mu2: Fraction) -> float:
    """The width of the composed loss grid: 2 epsilon per pure / (epsilon, delta) / Laplace event (losses in
    [-epsilon, epsilon]); for the Gaussian, whose loss is N(mu^2/2, mu^2), mean plus 12 sd on each side."""
    mu = math.sqrt(float(mu2))
    return 2.0 * sum(float(e.epsilon) * k for e, k in events.counts if not isinstance(e, _GAUSSIANS)) + (
        2.0 * (mu * mu / 2.0 + 12.0 * mu))


#: The smallest composed Gaussian mu^2 the PLD is built at: a smaller one is raised to it (against the user: the
#: Gaussian of the larger mu dominates, Dong, Roth & Su 2022), since dp_accounting squares sigma = 1 / mu and
#: overflows for mu^2 below about 1e-308.  At 2^-1000 (sigma = 2^500) the figure is 5e-324 at any delta.
MIN_GAUSSIAN_MU2 = 2.0**-1000


def _epsilon_of(events: PldEvents, delta: float) -> float:
    """:func:`pld_epsilon` of a multiset at a float delta (uncached: :data:`_epsilon` caches it)."""
    mu2, gamma = _gaussian_mu2(events)
    if _loss_width(events, mu2) > MAX_LOSS_WIDTH or not gamma < 2.0**-60:
        return math.inf
    plds = [_event_pld(e, k) for e, k in events.counts if not isinstance(e, _GAUSSIANS)]
    if mu2 > 0:  # Gaussians compose to one Gaussian, mu^2 summed (Dong, Roth & Su 2022, Cor. 3.3)
        sigma = down(1.0 / up(math.sqrt(max(to_float_up(mu2), MIN_GAUSSIAN_MU2))))
        plds.append(_gaussian_pld(sigma))
    if not plds:
        return 0.0
    total = functools.reduce(lambda a, b: a.compose(b), plds)
    # lattice events: delta e^-Gamma (Gamma < 2^-60, so one more step down covers the factor), epsilon + 2 Gamma
    target = down(delta * (1.0 - DELTA_NUMERICAL_RESERVE))
    eps = float(total.get_epsilon_for_delta(down(target) if gamma > 0 else target))
    return math.inf if not math.isfinite(eps) else up(max(eps, 0.0) + 2.0 * gamma)


# cached by a call, not a decorator: mutation testing (mutmut) does not mutate decorated functions
_epsilon = functools.lru_cache(maxsize=512)(_epsilon_of)


def pld_epsilon(events: PldEvents | Iterable[PldEvent | tuple[PldEvent, int]], delta: float | Fraction) -> float:
    """The epsilon at ``delta`` of the sequential composition of ``events``, by pessimistic PLD; rounded up.

    ``delta`` in (0, 1) is rounded down; the result is ``inf`` (no figure) when the composed delta mass
    at +inf (from (epsilon, delta) events and truncated tails) exceeds ``delta``, or when the loss
    grid would be wider than :data:`MAX_LOSS_WIDTH` nats.  Results are cached.

    Sources: Meiser & Mohammadi 2018; Koskela et al. 2020; Doroshenko et al. 2022 (module docstring).

    >>> g = GaussianPLD(Fraction(1, 3))
    >>> round(pld_epsilon([(g, 2), PurePLD(Fraction(1, 3))], 1e-6), 2)
    4.13
    """
    ev = events if isinstance(events, PldEvents) else PldEvents.of(events)
    d = exact(delta)
    if not 0 < d < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    return _epsilon(ev, to_float_down(d))


def _gaussian_pld_lower(mu: float) -> _pld.PrivacyLossDistribution:
    """An optimistic PLD of a Gaussian mechanism of mu-GDP: its privacy loss is N(mu^2/2, mu^2) (Balle &
    Wang 2018; Dong, Roth & Su 2022), here rounded DOWN to the grid (bucket [i v, (i + 1) v) at i v), the
    mass below mean - 12 sd dropped and the mass above mean + 12 sd put on the top bucket: every delta(epsilon)
    it gives is at most the exact one."""
    from dp_accounting.pld import pld_pmf as _pmf
    from dp_accounting.pld import privacy_loss_distribution as _pld
    from scipy.special import ndtr
    v, m = VALUE_DISCRETIZATION_INTERVAL, mu * mu / 2.0
    lower, upper = math.floor((m - 12.0 * mu) / v), math.ceil((m + 12.0 * mu) / v)
    edges = ndtr((np.arange(lower, upper + 2) * v - m) / mu)
    probs = np.diff(edges)
    probs[-1] += 1.0 - edges[-1]
    return _pld.PrivacyLossDistribution(_pmf.DensePLDPmf(v, lower, probs, 0.0, pessimistic_estimate=False))


def _epsilon_lower_of(events: PldEvents, delta: float) -> float:
    """:func:`pld_epsilon_lower` of a multiset at a float delta (uncached: :data:`_epsilon_lower` caches it)."""
    if any(isinstance(e, (LaplacePLD, ApproxPLD)) for e, _ in events.counts):
        return 0.0
    mu2, _ = _gaussian_mu2(events)  # lattice events at their smoothed mu^2: a lower bound of the rule's figure
    if _loss_width(events, mu2) > MAX_LOSS_WIDTH:
        return 0.0
    plds = [_randomized_response_power(e.epsilon, 0.0, k, pessimistic=False)
            for e, k in events.counts if isinstance(e, PurePLD)]
    if mu2 > 0:
        plds.append(_gaussian_pld_lower(down(math.sqrt(to_float_down(mu2)))))
    if not plds:
        return 0.0
    total = functools.reduce(lambda a, b: a.compose(b), plds)
    return max(down(float(total.get_epsilon_for_delta(delta))), 0.0)


_epsilon_lower = functools.lru_cache(maxsize=64)(_epsilon_lower_of)


def pld_epsilon_lower(events: PldEvents, delta: float | Fraction) -> float:
    """A LOWER bound on the exact epsilon at ``delta`` of the composition of ``events``: optimistic
    discretisation (losses rounded down, truncated tails dropped), parameters rounded in the user's favour,
    no delta reserve, the result rounded down.  It says how far a total is from the largest admissible one
    (:func:`~dpflow.planner.allocate.pld_total`), never that anything is private; 0.0 (no bound) for
    (epsilon, delta) and one-dimensional Laplace events and past :data:`MAX_LOSS_WIDTH`.

    Sources: optimistic PLDs, Meiser & Mohammadi 2018, Sec. 5; Koskela et al. 2020; the k-fold randomized
    response law, Kairouz, Oh & Viswanath 2015, Thm. 3.3.

    >>> g = PldEvents.of([GaussianPLD(Fraction(1))])
    >>> pld_epsilon_lower(g, 1e-6) <= 4.8866 <= pld_epsilon(g, 1e-6)
    True
    """
    d = exact(delta)
    if not 0 < d < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    return _epsilon_lower(events, to_float_up(d))
