"""Composition of privacy costs: exact bookkeeping of several accountings at once.

A :class:`Cost` carries, exactly (Fractions), every accounting that stays valid for the set of
mechanisms it describes; :meth:`Cost.epsilon_at` converts all of them to (epsilon, delta)-DP and
marks the tightest.  Floating point enters only in those final conversions, rounded outward.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from typing import Any, Literal

import attrs

from .conversions import (
    approx_zcdp_to_approx_dp,
    bounded_range_to_zcdp,
    bun_steinke_epsilon,
    gaussian_dp_epsilon,
    gdp_mu_of_mu2,
    pure_to_zcdp,
)
from .measures import ZCDP, ApproxZCDP, Measure, PureDP, exact, opt_exact
from .pld import (
    MAX_DISTINCT_EVENTS,
    VALUE_DISCRETIZATION_INTERVAL,
    ApproxPLD,
    GaussianPLD,
    LatticeGaussianPLD,
    PldEvent,
    PldEvents,
    PurePLD,
    pld_epsilon,
)
from .rounding import to_float_down, to_float_up, up

__all__ = ["PLD_RULE", "Conversion", "Cost", "advanced_composition"]


def advanced_composition(epsilon0: float | Fraction, k: int, delta_prime: float | Fraction) -> float:
    """epsilon of the k-fold adaptive composition of epsilon0-DP mechanisms, at extra delta'; rounded up.

    epsilon = sqrt(2 k ln(1/delta')) epsilon0 + k epsilon0 (e^epsilon0 - 1).  The composition of k
    (epsilon0, delta0)-DP mechanisms is (epsilon, k delta0 + delta')-DP; the caller accounts for
    the delta.  All terms are non-negative (``expm1`` avoids cancellation), so a final relative
    margin covers the float error.  k = 0 or epsilon0 = 0 gives 0.0.

    Source: Dwork, Rothblum & Vadhan 2010, "Boosting and Differential Privacy", Thm. III.3;
    Dwork & Roth 2014, Thm. 3.20.

    >>> round(advanced_composition(0.1, 100, 1e-6), 3)
    6.308
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be a non-negative int, got {k!r}")
    e0 = to_float_up(exact(epsilon0))
    dp = exact(delta_prime)
    if not 0 < dp <= 1:
        raise ValueError(f"delta_prime must be in (0, 1], got {delta_prime!r}")
    if k == 0 or e0 == 0.0:
        return 0.0
    log_inv = max(0.0, -math.log(to_float_down(dp)))  # a smaller delta' gives a larger epsilon
    return up(math.sqrt(2.0 * k * log_inv) * e0 + k * e0 * math.expm1(e0))


@attrs.frozen
class Conversion:
    """One valid conversion of a :class:`Cost` to (epsilon, delta)-DP (Dwork & Roth 2014, Def. 2.4).

    ``reference`` names the paper and theorem of the rule; see :meth:`Cost.epsilon_at`.

    >>> Conversion("basic composition (pure)", 1.0, 0.0, "Dwork & Roth 2014, Thm. 3.16", True).epsilon
    1.0
    """

    rule: str
    epsilon: float
    delta: float
    reference: str
    tightest: bool


def _opt_pld(x: PldEvents | str | None) -> PldEvents | None:
    return PldEvents.parse(x) if isinstance(x, str) else x


def _nonneg_int(_instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{attribute.name} must be a non-negative int, got {value!r}")


def _fsum(values: Iterable[Fraction]) -> Fraction:
    """Exact sum of Fractions, adding numerators over each common denominator as integers."""
    by_den: dict[int, int] = {}
    for v in values:
        by_den[v.denominator] = by_den.get(v.denominator, 0) + v.numerator
    return sum((Fraction(num, den) for den, num in by_den.items()), Fraction(0))


def _sum_opt(values: Sequence[Fraction | None]) -> Fraction | None:
    present = [v for v in values if v is not None]
    return _fsum(present) if len(present) == len(values) else None


def _basic(eps: Fraction | None, delta: Fraction) -> tuple[Fraction | None, Fraction]:
    """A composed basic (epsilon, delta) pair; a delta that reaches 1 says nothing, so it is dropped."""
    if eps is None or delta >= 1:
        return None, Fraction(0)
    return eps, delta


def _top_two_sum(values: Sequence[Fraction]) -> Fraction:
    top = sorted(values, reverse=True)[:2]
    return sum(top, Fraction(0))


_NO_PLD = PldEvents(())


def _capped(events: PldEvents) -> PldEvents | None:
    """``events``, or ``None`` past :data:`~dpflow.privacy.pld.MAX_DISTINCT_EVENTS` distinct events."""
    return events if len(events.counts) <= MAX_DISTINCT_EVENTS else None


def _parallel_pld(plds: Sequence[PldEvents | None], relation: Literal["replace", "add_remove"]) -> PldEvents | None:
    """The PLD of a parallel composition over disjoint pieces (McSherry 2009, Thm. 4).

    Under add/remove neighbours one record changes one piece; under replace-one it can change two
    pieces, whose outputs are independent, so their losses add (a sequential composition; the
    dominating pairs of every event here are symmetric, so leaving one piece and entering another
    compose like two add/remove steps).  Exact when the charged pieces form a chain under
    :func:`_dominated` (identical pieces, sub-multisets, or the same events at smaller parameters, such as a
    piece's one-sided cost next to its two-sided one): the largest piece dominates every piece, and the largest
    two every pair (dominating pairs compose: Zhu, Dong & Wang 2022, Thm. 10).  Otherwise every change is
    dominated by the sequential composition of all charged pieces, which is used (valid, looser).
    ``None`` if a piece has no PLD.
    """
    if any(p is None for p in plds):
        return None
    charged = sorted((p for p in plds if p is not None and p.counts), key=_dominance_key)
    if not charged:
        return _NO_PLD
    chain = all(_dominated(a, b) for a, b in zip(charged, charged[1:], strict=False))
    if not chain:
        return _capped(_join(charged) if relation == "add_remove" else PldEvents.sequential(charged))
    if relation == "replace" and len(charged) >= 2:
        return _capped(PldEvents.sequential(charged[-2:]))
    return charged[-1]


def _join(plds: Sequence[PldEvents]) -> PldEvents:
    """A composition that dominates each of ``plds`` (:func:`_dominated`), so bounds the one that a change of one
    piece charges: family by family, the continuous Gaussian events of the piece with the largest mu^2 sum; the
    lattice Gaussian events of the piece with the largest mu^2 sum if it also has the most of them, else all
    pieces' lattice events together; the k-th largest pure epsilon of the join is the largest k-th largest
    epsilon of the pieces; every other event as often as the piece that has it most.  Never more than the
    sequential composition of all of them.

    >>> from .pld import PurePLD as P, GaussianPLD as G
    >>> str(_join([PldEvents.of([G(Fraction(1)), P(Fraction(1))]), PldEvents.of([G(Fraction(1, 2)), P(Fraction(1, 2)),
    ...                                                                   P(Fraction(1, 2))])]))
    'gaussian(1)x1; pure(1/2)x1; pure(1)x1'
    """
    fams = [(_families(p), p) for p in plds]
    gauss = max(fams, key=lambda f: f[0][0])[1]
    out: list[tuple[PldEvent, int]] = [(e, k) for e, k in gauss.counts if isinstance(e, GaussianPLD)]
    top = max(fams, key=lambda f: (f[0][1], f[0][2]))
    lattice = [top[1]] if all(f[0][2] <= top[0][2] for f in fams) else [p for _, p in fams]
    out.extend((e, k) for p in lattice for e, k in p.counts if isinstance(e, LatticeGaussianPLD))
    out.extend(_pure_join([f[0][3] for f in fams]))
    other: dict[PldEvent, int] = {}
    for f, _ in fams:
        for e, k in f[4].items():
            other[e] = max(other.get(e, 0), k)
    out.extend(other.items())
    return PldEvents.of(out)


def _pure_join(lists: Sequence[list[tuple[Fraction, int]]]) -> list[tuple[PurePLD, int]]:
    """The pure epsilons whose k-th largest is the largest k-th largest of ``lists`` (each largest first, as
    (epsilon, count) runs): between two consecutive run ends of any list every list is constant."""
    ends = sorted({e for runs in lists for e in itertools.accumulate(k for _, k in runs)})
    out: list[tuple[PurePLD, int]] = []
    start = 0
    pos = [0] * len(lists)  # the run of each list that holds position ``start``
    done = [0] * len(lists)  # positions of each list before that run
    for end in ends:
        best = Fraction(0)
        for i, runs in enumerate(lists):
            while pos[i] < len(runs) and done[i] + runs[pos[i]][1] <= start:
                done[i] += runs[pos[i]][1]
                pos[i] += 1
            if pos[i] < len(runs):
                best = max(best, runs[pos[i]][0])
        out.append((PurePLD(best), end - start))
        start = end
    return out


def _families(p: PldEvents) -> tuple[Fraction, Fraction, int, list[tuple[Fraction, int]], dict[PldEvent, int]]:
    """The parts of a multiset that :func:`_dominated` compares: the summed mu^2 of its continuous Gaussian events,
    that of its lattice Gaussian events and their number, its pure epsilons (largest first, with counts), and its
    other events."""
    g, lg, nl = Fraction(0), Fraction(0), 0
    pure: list[tuple[Fraction, int]] = []
    other: dict[PldEvent, int] = {}
    for e, k in p.counts:
        if isinstance(e, GaussianPLD):
            g += e.mu2 * k
        elif isinstance(e, LatticeGaussianPLD):
            lg, nl = lg + e.mu2 * k, nl + k
        elif isinstance(e, PurePLD):
            pure.append((e.epsilon, k))
        else:
            other[e] = k
    pure.sort(reverse=True)
    return g, lg, nl, pure, other


def _dominance_key(p: PldEvents) -> tuple[int, int, Fraction, Fraction, Fraction]:
    """A key that never decreases along :func:`_dominated` (each part is monotone), so a chain sorts in order."""
    g, lg, nl, pure, other = _families(p)
    return (sum(k for _, k in pure) + sum(other.values()), nl, g, lg, sum((e * k for e, k in pure), Fraction(0)))


def _dominated(a: PldEvents, b: PldEvents) -> bool:
    """Whether the composition ``b`` dominates ``a`` (every privacy profile of ``a`` is at most ``b``'s), by
    families: continuous Gaussian events compose to one Gaussian of summed mu^2 (Dong, Roth & Su 2022, Cor. 3.3),
    and a smaller mu is dominated by a larger (mu-GDP implies mu'-GDP for mu' >= mu); lattice Gaussian events the
    same, with no more of them (their smoothing slack counts events: :class:`~dpflow.privacy.pld.LatticeGaussianPLD`);
    pure events by a matching of a's epsilons, largest first, to at least as large epsilons of ``b`` (randomized
    response at epsilon dominates every epsilon-DP pair, so every epsilon' <= epsilon one: Kairouz, Oh & Viswanath
    2015, Thm. 2.4); any other event must be present in ``b`` as often.  Dominating pairs compose (Zhu, Dong & Wang
    2022, Thm. 10), so ``b`` dominates ``a``.  A sub-multiset is always dominated.

    >>> from .pld import PurePLD as P
    >>> _dominated(PldEvents.of([P(Fraction(1, 2)), P(Fraction(1))]), PldEvents.of([P(Fraction(1))] * 2))
    True
    >>> _dominated(PldEvents.of([P(Fraction(1))] * 2), PldEvents.of([P(Fraction(3))]))
    False
    """
    ga, la, na, pa, oa = _families(a)
    gb, lb, nb, pb, ob = _families(b)
    if ga > gb or la > lb or na > nb or any(ob.get(e, 0) < k for e, k in oa.items()):
        return False
    i, left = 0, pb[0][1] if pb else 0  # pure events of b not yet matched, largest first
    for eps, k in pa:
        while k:
            if i >= len(pb) or pb[i][0] < eps:
                return False
            take = min(k, left)
            k, left = k - take, left - take
            if not left:
                i += 1
                left = pb[i][1] if i < len(pb) else 0
    return True


_REF_CKS = (
    "Canonne, Kamath & Steinke 2020, 'The Discrete Gaussian for Differential Privacy', Prop. 12 "
    "(approximate zCDP: Bun & Steinke 2016, Sec. 8)"
)
_REF_BS = "Bun & Steinke 2016, 'Concentrated Differential Privacy', Prop. 1.3"
_REF_GDP = (
    "Dong, Roth & Su 2022, 'Gaussian Differential Privacy', Thm. 2.7, Cor. 2.13 and Cor. 3.3; "
    "Balle & Wang 2018, Thm. 8"
)
_REF_BASIC = "Dwork & Roth 2014, Thm. 3.16 (basic composition)"
_REF_DRV = "Dwork, Rothblum & Vadhan 2010, Thm. III.3 (Dwork & Roth 2014, Thm. 3.20)"
_REF_PLD = (
    "Meiser & Mohammadi 2018; Koskela et al. 2020; Doroshenko et al. 2022 ('Connect the Dots'): Google "
    f"dp_accounting PLD, pessimistic, loss grid {VALUE_DISCRETIZATION_INTERVAL:g}; Gaussian: Balle & Wang 2018, "
    "Thm. 8; pure and (epsilon, delta) events: Kairouz, Oh & Viswanath 2015, Thm. 2.4"
)
_REF_PLD_LATTICE = (
    f"{_REF_PLD}; discrete Gaussian on the lattice: the smoothed continuous Gaussian (Canonne, Kamath & Steinke "
    "2020, Def. 1 and the Poisson-summation normaliser; Micciancio & Regev 2007 smoothing), dpflow.privacy.pld."
    "LatticeGaussianPLD: mu'^2 = mu^2 s^2 / (s^2 - 9) at lattice scale s >= 2^40, losses + 2 Gamma, delta / e^Gamma, "
    "Gamma < 4e-58 per lattice release"
)
#: The rule name of the PLD conversion in :meth:`Cost.epsilon_at`.
PLD_RULE = "PLD (dp_accounting, pessimistic)"


@attrs.frozen
class Cost:
    """The per-record privacy cost of a set of mechanisms, as several independently valid accountings.

    * ``rho``, ``delta0``: delta0-approximate rho-zCDP, every event converted to (approximate)
      zCDP (Bun & Steinke 2016, Prop. 1.4, 1.6, 1.13; composition Lemma 1.7 / Lemma 8.2);
    * ``pure_eps``: basic-composition pure epsilon (Dwork & Roth 2014, Thm. 3.16), ``None`` as
      soon as a non-pure event is present;
    * ``gdp_mu2``: the sum of mu^2 when every event is a Gaussian mechanism, i.e. the plan is
      sqrt(gdp_mu2)-GDP (Dong, Roth & Su 2022, Thm. 2.7 and Cor. 3.3); ``None`` otherwise;
    * ``pure_count``, ``pure_max``: number of pure-DP events and their largest epsilon, for
      advanced composition (Dwork, Rothblum & Vadhan 2010); meaningful only when ``pure_eps`` is
      not ``None``.
    * ``basic_eps``, ``basic_delta``: basic composition of per-event (epsilon_i, delta_i)-DP
      guarantees, (sum epsilon_i, sum delta_i) (Dwork & Roth 2014, Thm. 3.16, which covers
      (epsilon, delta) mechanisms; Dwork, Kenthapadi, McSherry, Mironov & Naor 2006); ``None`` as soon
      as an event declares no single (epsilon, delta) point (a zCDP event).  Pure events count as
      (epsilon, 0).  This is the "paper" accounting of CWZ 2021 (epsilon/T, delta/T per step).
    * ``pld``: the events of a privacy-loss-distribution accounting (:mod:`dpflow.privacy.pld`), a
      multiset of continuous or lattice Gaussian, pure-epsilon and (epsilon, delta) events; ``None`` as soon as
      an event has no PLD (generic zCDP) or a fold cannot stay exact in PLD form.  It is evaluated
      only in :meth:`epsilon_at`.  A continuous Gaussian event is valid only when the run draws
      continuous noise: see :meth:`for_lattice_noise`.

    Events with no privacy loss at all (epsilon = 0, rho = 0, sensitivity 0) are :meth:`zero`:
    their output does not depend on the data, so they are pure, Gaussian (mu = 0) and not counted.

    >>> c = Cost.gaussian(Fraction(1), Fraction(5)).scaled(10)
    >>> c.rho, c.gdp_mu2
    (Fraction(1, 5), Fraction(2, 5))
    """

    rho: Fraction = attrs.field(converter=exact)
    delta0: Fraction = attrs.field(converter=exact)
    pure_eps: Fraction | None = attrs.field(converter=opt_exact)
    gdp_mu2: Fraction | None = attrs.field(converter=opt_exact)
    pure_count: int = attrs.field(validator=_nonneg_int)
    pure_max: Fraction = attrs.field(converter=exact)
    basic_eps: Fraction | None = attrs.field(default=None, converter=opt_exact)
    basic_delta: Fraction = attrs.field(default=Fraction(0), converter=exact)
    pld: PldEvents | None = attrs.field(default=None, converter=_opt_pld)

    def __attrs_post_init__(self) -> None:
        if self.delta0 > 0 and (self.pure_eps is not None or self.gdp_mu2 is not None):
            raise ValueError("a Cost with delta0 > 0 cannot carry a pure epsilon or a GDP mu")
        if self.basic_eps is None and self.basic_delta != 0:
            raise ValueError("basic_delta needs a basic_eps")
        if self.basic_delta >= 1:
            raise ValueError(f"basic_delta must be < 1, got {self.basic_delta!r}")

    # ------------------------------------------------------------------------------------------
    # constructors

    @classmethod
    def _trusted(
        cls,
        rho: Fraction,
        delta0: Fraction,
        pure_eps: Fraction | None,
        gdp_mu2: Fraction | None,
        pure_count: int,
        pure_max: Fraction,
        basic_eps: Fraction | None = None,
        basic_delta: Fraction = Fraction(0),
        pld: PldEvents | None = None,
    ) -> Cost:
        """Build from fields that are already valid Fractions (skips the converters: the
        planner composes tens of thousands of costs).  Internal: callers guarantee validity."""
        c = object.__new__(cls)
        for name, value in (("rho", rho), ("delta0", delta0), ("pure_eps", pure_eps), ("gdp_mu2", gdp_mu2),
                            ("pure_count", pure_count), ("pure_max", pure_max), ("basic_eps", basic_eps),
                            ("basic_delta", basic_delta if basic_eps is not None else Fraction(0)),
                            ("pld", pld)):
            object.__setattr__(c, name, value)
        return c

    @classmethod
    def gaussian_zcdp(cls, rho: Fraction) -> Cost:
        """A Gaussian mechanism calibrated to rho-zCDP (sigma = Delta / sqrt(2 rho)): mu^2 = 2 rho.

        Sources: Bun & Steinke 2016, Prop. 1.6; Dong, Roth & Su 2022, Thm. 2.7.

        >>> Cost.gaussian_zcdp(Fraction(1, 2)).gdp_mu2
        Fraction(1, 1)
        """
        r = exact(rho)
        if r == 0:
            return cls.zero()
        return cls._trusted(r, Fraction(0), None, 2 * r, 0, Fraction(0), pld=PldEvents(((GaussianPLD(2 * r), 1),)))

    @classmethod
    def zero(cls) -> Cost:
        """The cost of doing nothing (identity of :meth:`then`; Dwork & Roth 2014, Thm. 3.16).

        >>> Cost.zero().then(Cost.pure(Fraction(1))) == Cost.pure(Fraction(1))
        True
        """
        return cls(
            rho=Fraction(0),
            delta0=Fraction(0),
            pure_eps=Fraction(0),
            gdp_mu2=Fraction(0),
            pure_count=0,
            pure_max=Fraction(0),
            basic_eps=Fraction(0),
            pld=_NO_PLD,
        )

    @classmethod
    def gaussian(cls, sensitivity: Fraction | float, sigma: Fraction | float) -> Cost:
        """A Gaussian mechanism with L2 sensitivity Delta and noise sigma: mu = Delta/sigma, rho = mu^2/2.

        Source: Bun & Steinke 2016, Prop. 1.6 (rho); Dong, Roth & Su 2022, Thm. 2.7 (mu-GDP).

        >>> Cost.gaussian(Fraction(1), Fraction(1)).rho
        Fraction(1, 2)
        """
        s = exact(sensitivity)
        sig = exact(sigma)
        if s == 0:
            return cls.zero()
        if sig == 0:
            raise ValueError(f"sigma must be positive when the sensitivity is positive, got sigma={sigma!r}")
        mu2 = (s / sig) ** 2
        return cls(rho=mu2 / 2, delta0=0, pure_eps=None, gdp_mu2=mu2, pure_count=0, pure_max=0,
                   pld=PldEvents(((GaussianPLD(mu2), 1),)))

    @classmethod
    def pure(cls, epsilon: Fraction | float) -> Cost:
        """An epsilon-DP mechanism: pure epsilon, and rho = epsilon^2/2 (Bun & Steinke 2016, Prop. 1.4).

        >>> Cost.pure(Fraction(1, 10)).rho
        Fraction(1, 200)
        """
        e = exact(epsilon)
        if e == 0:
            return cls.zero()
        return cls(rho=pure_to_zcdp(e), delta0=0, pure_eps=e, gdp_mu2=None, pure_count=1, pure_max=e, basic_eps=e,
                   pld=PldEvents(((PurePLD(e), 1),)))

    @classmethod
    def bounded_range(cls, epsilon: Fraction | float) -> Cost:
        """An epsilon-bounded-range mechanism (the exponential mechanism at its epsilon): epsilon-DP, and
        rho = epsilon^2/8 (Cesar & Rogers 2021; see :func:`~dpflow.privacy.bounded_range_to_zcdp` for the
        conditions).  Its PLD is the pure-DP worst case of epsilon (randomized response): valid, as
        epsilon-BR implies epsilon-DP; a bounded-range PLD (Dong, Durfee & Rogers 2020 characterise the
        worst case as a family, one pair per offset t) is not used.

        >>> c = Cost.bounded_range(Fraction(1, 10))
        >>> c.rho, c.pure_eps
        (Fraction(1, 800), Fraction(1, 10))
        """
        e = exact(epsilon)
        if e == 0:
            return cls.zero()
        return attrs.evolve(cls.pure(e), rho=bounded_range_to_zcdp(e))

    @classmethod
    def zcdp(cls, rho: Fraction | float) -> Cost:
        """A rho-zCDP mechanism (Bun & Steinke 2016, Def. 1.1).

        >>> Cost.zcdp(Fraction(1, 2)).pure_eps is None
        True
        """
        r = exact(rho)
        if r == 0:
            return cls.zero()
        return cls(rho=r, delta0=0, pure_eps=None, gdp_mu2=None, pure_count=0, pure_max=0)

    @classmethod
    def approx_zcdp(cls, rho: Fraction | float, delta0: Fraction | float) -> Cost:
        """A delta0-approximate rho-zCDP mechanism (Bun & Steinke 2016, Def. 8.1); delta0 in [0, 1).

        >>> Cost.approx_zcdp(Fraction(1, 2), Fraction(1, 10**6)).delta0
        Fraction(1, 1000000)
        """
        r = exact(rho)
        d0 = exact(delta0)
        if d0 >= 1:
            raise ValueError(f"delta0 must be < 1, got {delta0!r}")
        if d0 == 0:
            return cls.zcdp(r)
        return cls(rho=r, delta0=d0, pure_eps=None, gdp_mu2=None, pure_count=0, pure_max=0)

    @classmethod
    def approx_dp(cls, epsilon: Fraction | float, delta: Fraction | float) -> Cost:
        """An (epsilon, delta)-DP mechanism, as delta-approximate (epsilon^2/2)-zCDP.

        Source: Bun & Steinke 2016, Prop. 1.13.  With delta = 0 this is exactly :meth:`pure`
        (an (epsilon, 0)-DP mechanism is epsilon-DP, so the pure accountings stay available).

        >>> c = Cost.approx_dp(Fraction(1), Fraction(1, 10**6))
        >>> c.rho, c.pure_eps
        (Fraction(1, 2), None)
        """
        e = exact(epsilon)
        d = exact(delta)
        if d == 0:
            return cls.pure(e)
        return attrs.evolve(cls.approx_zcdp(e * e / 2, d), basic_eps=e, basic_delta=d,
                            pld=PldEvents(((ApproxPLD(e, d), 1),)))

    def with_basic(self, epsilon: Fraction, delta: Fraction) -> Cost:
        """This cost, also certified (epsilon, delta)-DP as one event of basic composition.

        The caller guarantees that the event is (epsilon, delta)-DP (a Gaussian calibrated by the
        exact Gaussian-DP profile, a zCDP event converted by CKS, a pure event with delta = 0).
        Source: Dwork & Roth 2014, Def. 2.4 and Thm. 3.16.

        >>> Cost.zcdp(Fraction(1, 8)).with_basic(Fraction(1), Fraction(1, 10**6)).basic_eps
        Fraction(1, 1)
        """
        e, d = exact(epsilon), exact(delta)
        if self.pure_eps is not None and d == 0:
            e = min(e, self.pure_eps)
        return attrs.evolve(self, basic_eps=e, basic_delta=d)

    # ------------------------------------------------------------------------------------------
    # composition

    def then(self, other: Cost) -> Cost:
        """Sequential composition: every field adds up (None absorbs); pure_max takes the max.

        Sources: Bun & Steinke 2016, Lemma 1.7 (zCDP) and Lemma 8.2 (approximate zCDP, sequential
        composition); Dwork & Roth 2014, Thm. 3.16 (pure); Dong, Roth & Su 2022, Cor. 3.3 (GDP).

        >>> Cost.pure(Fraction(1)).then(Cost.pure(Fraction(2))).pure_eps
        Fraction(3, 1)
        """
        return Cost.sequential((self, other))

    @staticmethod
    def sequential(costs: Sequence[Cost]) -> Cost:
        """Sequential composition of many costs in one pass (same rules as :meth:`then`).

        Sources: Bun & Steinke 2016, Lemma 1.7 / 8.2; Dwork & Roth 2014, Thm. 3.16; Dong, Roth & Su
        2022, Cor. 3.3.

        >>> Cost.sequential([Cost.zcdp(Fraction(1, 4))] * 2).rho
        Fraction(1, 2)
        """
        if not costs:
            return Cost.zero()
        if len(costs) == 1:
            return costs[0]
        if len(costs) > 8:  # the same cost object many times (equal mechanisms): one self-composition each
            groups: dict[int, list[Any]] = {}
            for c in costs:
                groups.setdefault(id(c), [c, 0])[1] += 1
            if len(groups) < len(costs):
                return Cost.sequential([c if k == 1 else c.scaled(k) for c, k in groups.values()])
        return Cost._trusted(
            _fsum(c.rho for c in costs),
            _fsum(c.delta0 for c in costs),
            _sum_opt([c.pure_eps for c in costs]),
            _sum_opt([c.gdp_mu2 for c in costs]),
            sum(c.pure_count for c in costs),
            max(c.pure_max for c in costs),
            *_basic(_sum_opt([c.basic_eps for c in costs]), _fsum(c.basic_delta for c in costs)),
            pld=None if any(c.pld is None for c in costs) else _capped(
                PldEvents.sequential(c.pld for c in costs if c.pld is not None)),
        )

    def scaled(self, k: int) -> Cost:
        """The k-fold sequential composition of this cost with itself (k = 0 gives :meth:`zero`).

        Sources: as :meth:`then` (Bun & Steinke 2016, Lemma 1.7 / 8.2; Dwork & Roth 2014, Thm. 3.16).

        >>> Cost.zcdp(Fraction(1, 10)).scaled(5).rho
        Fraction(1, 2)
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValueError(f"k must be a non-negative int, got {k!r}")
        if k == 0:
            return Cost.zero()
        basic_eps, basic_delta = _basic(None if self.basic_eps is None else self.basic_eps * k, self.basic_delta * k)
        return Cost(
            rho=self.rho * k,
            delta0=self.delta0 * k,
            pure_eps=None if self.pure_eps is None else self.pure_eps * k,
            gdp_mu2=None if self.gdp_mu2 is None else self.gdp_mu2 * k,
            pure_count=self.pure_count * k,
            pure_max=self.pure_max,
            basic_eps=basic_eps,
            basic_delta=basic_delta,
            pld=None if self.pld is None else self.pld.scaled(k),
        )

    @staticmethod
    def parallel(costs: Sequence[Cost], relation: Literal["replace", "add_remove"]) -> Cost:
        """Parallel composition over disjoint pieces chosen by a data-independent rule of each record.

        Under ``"add_remove"`` neighbours one record touches one piece: every field is the max
        over pieces.  Under ``"replace"`` a changed record can leave one piece and enter another:
        every field is the sum of its two largest values.  ``None`` stays ``None`` if any piece has
        ``None``; ``pure_count`` follows the same max / top-two rule and ``pure_max`` is the max.
        Each piece's cost must bound that piece's privacy loss when one record is added to or
        removed from it (and, under ``"replace"``, changed within it).  The pieces must be fixed by
        public keys: data-dependent keys are not parallel composition.  An empty sequence gives
        :meth:`zero`.

        Source: McSherry 2009, "Privacy Integrated Queries", Thm. 4 (parallel composition);
        replace-one neighbours: docs/spec/accounting.md §1.5.

        >>> a, b, c = (Cost.pure(Fraction(e)) for e in (1, 2, 3))
        >>> Cost.parallel([a, b, c], "add_remove").pure_eps, Cost.parallel([a, b, c], "replace").pure_eps
        (Fraction(3, 1), Fraction(5, 1))
        """
        if relation not in ("replace", "add_remove"):
            raise ValueError(f"relation must be 'replace' or 'add_remove', got {relation!r}")
        if not costs:
            return Cost.zero()
        combine: Callable[[Sequence[Fraction]], Fraction]
        combine = _top_two_sum if relation == "replace" else max

        def opt(values: list[Fraction | None]) -> Fraction | None:
            present = [v for v in values if v is not None]
            return combine(present) if len(present) == len(values) else None

        counts = sorted((c.pure_count for c in costs), reverse=True)
        pure_count = sum(counts[:2]) if relation == "replace" else counts[0]
        return Cost(
            rho=combine([c.rho for c in costs]),
            delta0=combine([c.delta0 for c in costs]),
            pure_eps=opt([c.pure_eps for c in costs]),
            gdp_mu2=opt([c.gdp_mu2 for c in costs]),
            pure_count=pure_count,
            pure_max=max(c.pure_max for c in costs),
            basic_eps=opt([c.basic_eps for c in costs]),
            basic_delta=combine([c.basic_delta for c in costs]) if all(c.basic_eps is not None for c in costs) else 0,
            pld=_parallel_pld([c.pld for c in costs], relation),
        )

    def group(self, k: int) -> Cost:
        """Group privacy for groups of k records: epsilon * k, rho * k^2, mu * k (so mu^2 * k^2).

        Raises ``ValueError`` when delta0 > 0: group privacy for approximate zCDP is not
        implemented (its delta growth was not verified for this library).  ``pure_max`` is
        multiplied by k (each pure event is k*epsilon0-DP for groups), ``pure_count`` unchanged.

        Sources: Dwork & Roth 2014, Thm. 2.2 (pure); Bun & Steinke 2016, Prop. 1.9 (zCDP);
        Dong, Roth & Su 2022, Thm. 2.14 (GDP).

        >>> Cost.pure(Fraction(1)).group(3).rho
        Fraction(9, 2)
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"group size k must be a positive int, got {k!r}")
        if self.delta0 > 0:
            raise ValueError(
                "group privacy for approximate zCDP (delta0 > 0) is not supported; "
                f"got delta0={float(self.delta0)!r}"
            )
        return Cost(
            rho=self.rho * k * k,
            delta0=0,
            pure_eps=None if self.pure_eps is None else self.pure_eps * k,
            gdp_mu2=None if self.gdp_mu2 is None else self.gdp_mu2 * k * k,
            pure_count=self.pure_count,
            pure_max=self.pure_max * k,
            # (epsilon, 0) -> (k epsilon, 0) for groups (Dwork & Roth 2014, Thm. 2.2); a delta > 0 grows
            # like k e^{(k-1) epsilon} delta, which is not used here: dropped for k > 1
            basic_eps=None if self.basic_eps is None or (self.basic_delta > 0 and k > 1) else self.basic_eps * k,
            basic_delta=self.basic_delta if self.basic_eps is not None and k == 1 else 0,
            pld=self.pld if k == 1 else None,  # group privacy of a PLD is not derived here
        )

    def for_lattice_noise(self, covered: bool = True) -> Cost:
        """This cost for a run that may draw lattice (discrete Gaussian) noise: the exact Gaussian-DP profile
        (``gdp_mu2``, proven for continuous noise only) is dropped, and every continuous Gaussian PLD event
        becomes the lattice Gaussian event of the same mu^2 (:class:`~dpflow.privacy.pld.LatticeGaussianPLD`:
        a proven PLD of the discrete Gaussian on dpflow's lattice, and of the continuous Gaussian).  The
        rho-zCDP is the same for both noises (Canonne, Kamath & Steinke 2020, Thm. 4).  ``covered=False`` (a
        mechanism may draw discrete Gaussian noise that event does not cover): a PLD holding a Gaussian event
        is dropped whole (dropping one event would under-count).

        >>> c = Cost.gaussian_zcdp(Fraction(1, 8)).then(Cost.pure(Fraction(1, 2)))
        >>> str(c.for_lattice_noise().pld), c.for_lattice_noise().gdp_mu2
        ('lattice_gaussian(1/4)x1; pure(1/2)x1', None)
        >>> Cost.pure(Fraction(1)).for_lattice_noise() == Cost.pure(Fraction(1))
        True
        >>> c.for_lattice_noise(covered=False).pld is None
        True
        """
        pld = None if self.pld is None or (self.pld.has_gaussian and not covered) else self.pld.on_lattice()
        if pld is self.pld and self.gdp_mu2 is None:
            return self
        return attrs.evolve(self, gdp_mu2=None, pld=pld)

    # ------------------------------------------------------------------------------------------
    # conversions

    def epsilon_at(self, delta: float) -> list[Conversion]:
        """Every valid (epsilon, delta)-DP conversion of this cost; exactly one is marked tightest.

        Rules, in order: CKS from (approximate) zCDP (always); Bun-Steinke Prop. 1.3 (delta0 = 0);
        exact Gaussian DP (all-Gaussian, delta0 = 0); basic (epsilon, delta) composition (every event
        declares an (epsilon_i, delta_i) point, 0 < sum delta_i <= delta; reported at its own delta);
        the privacy loss distribution (``pld`` present and finite at ``delta``: pessimistic
        numerics of :mod:`dpflow.privacy.pld`); basic pure composition (delta 0; pure only);
        advanced composition (pure only, at least one pure event, delta' = delta).  The tightest
        is the smallest epsilon (ties: the first).  ``delta`` must be in (delta0, 1).

        Sources: Canonne, Kamath & Steinke 2020, Prop. 12; Bun & Steinke 2016, Prop. 1.3 and
        Sec. 8; Dong, Roth & Su 2022, Cor. 2.13; Meiser & Mohammadi 2018 and Doroshenko et al. 2022
        (PLD); Dwork & Roth 2014, Thm. 3.16; Dwork, Rothblum & Vadhan 2010, Thm. III.3.

        >>> convs = Cost.gaussian(Fraction(1), Fraction(1)).epsilon_at(1e-6)
        >>> [(c.rule, round(c.epsilon, 6)) for c in convs if c.tightest]
        [('exact Gaussian-DP', 4.886554)]
        """
        d = exact(delta)
        if not d < 1:
            raise ValueError(f"delta must be < 1, got {delta!r}")
        if not d > self.delta0:
            raise ValueError(
                f"delta={float(d)!r} must exceed the cost's delta0={float(self.delta0)!r} "
                f"(approximate zCDP part)"
            )
        rho_f = to_float_up(self.rho)
        found: list[tuple[str, float, float, str]] = [
            (
                "zCDP -> (eps,delta) by CKS",
                approx_zcdp_to_approx_dp(rho_f, self.delta0, d),
                float(delta),
                _REF_CKS,
            )
        ]
        if self.delta0 == 0:
            found.append(("Bun-Steinke Prop 1.3", bun_steinke_epsilon(rho_f, d), float(delta), _REF_BS))
        if self.gdp_mu2 is not None and self.delta0 == 0:
            found.append(("exact Gaussian-DP", gaussian_dp_epsilon(gdp_mu_of_mu2(self.gdp_mu2), d), float(delta),
                          _REF_GDP))
        if self.basic_eps is not None and 0 < self.basic_delta <= d:
            found.append(("basic composition (epsilon, delta)", to_float_up(self.basic_eps),
                          to_float_up(self.basic_delta), _REF_BASIC))
        if self.pld is not None:
            eps_pld = pld_epsilon(self.pld, d)
            if math.isfinite(eps_pld):
                found.append((PLD_RULE, eps_pld, float(delta),
                              _REF_PLD_LATTICE if self.pld.has_lattice_gaussian else _REF_PLD))
        if self.pure_eps is not None:
            found.append(("basic composition (pure)", to_float_up(self.pure_eps), 0.0, _REF_BASIC))
            if self.pure_count > 0:
                eps_drv = advanced_composition(to_float_up(self.pure_max), self.pure_count, d)
                found.append(("advanced composition (DRV)", eps_drv, float(delta), _REF_DRV))
        best = min(range(len(found)), key=lambda i: (found[i][1], i))
        return [
            Conversion(rule=r, epsilon=e, delta=dd, reference=ref, tightest=i == best)
            for i, (r, e, dd, ref) in enumerate(found)
        ]

    def total_measure(self) -> Measure:
        """The most natural native measure: PureDP if pure, else zCDP, else approximate zCDP.

        Sources: Dwork & Roth 2014, Thm. 3.16; Bun & Steinke 2016, Lemma 1.7 and Lemma 8.2.
        Raises ``ValueError`` (from :class:`ApproxZCDP`) if the accumulated delta0 reaches 1.

        >>> Cost.pure(Fraction(1)).then(Cost.zcdp(Fraction(1, 2))).total_measure().describe()
        'rho=1 zCDP'
        """
        if self.pure_eps is not None:
            return PureDP(self.pure_eps)
        if self.delta0 == 0:
            return ZCDP(self.rho)
        return ApproxZCDP(self.rho, self.delta0)
