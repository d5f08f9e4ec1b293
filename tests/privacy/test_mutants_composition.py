"""Mutation-testing pins of ``dpflow/privacy/composition.py``: every field of every composition rule.

A cost carries several accountings at once (zCDP rho and delta0, basic pure epsilon, GDP mu^2, the pure
count and largest epsilon for advanced composition, basic (epsilon, delta), the PLD events); each rule is
checked field by field against its statement: sequential composition adds (Bun & Steinke 2016 Lemma 1.7 / 8.2;
Dwork & Roth 2014 Thm. 3.16; Dong, Roth & Su 2022 Cor. 3.3), parallel composition takes the max under
add/remove and the sum of the two largest under replace-one (McSherry 2009 Thm. 4; accounting.md 1.5), group
privacy multiplies by k and k^2 (Dwork & Roth Thm. 2.2; Bun & Steinke Prop. 1.9; Dong, Roth & Su Thm. 2.14),
and ``epsilon_at`` lists every valid conversion in its documented order with the smallest marked.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from dpflow.privacy import composition as comp
from dpflow.privacy.composition import (
    PLD_RULE,
    Conversion,
    Cost,
    _basic,
    _capped,
    _dominance_key,
    _dominated,
    _fsum,
    _join,
    _parallel_pld,
    _pure_join,
    _sum_opt,
    _top_two_sum,
    advanced_composition,
)
from dpflow.privacy.conversions import (
    approx_zcdp_to_approx_dp,
    bun_steinke_epsilon,
    gaussian_dp_epsilon,
    gdp_mu_of_mu2,
)
from dpflow.privacy.measures import ZCDP, ApproxZCDP, PureDP
from dpflow.privacy.pld import (
    MAX_DISTINCT_EVENTS,
    ApproxPLD,
    GaussianPLD,
    LatticeGaussianPLD,
    PldEvents,
    PurePLD,
    pld_epsilon,
)
from dpflow.privacy.rounding import to_float_up

F = Fraction


def fields(c: Cost) -> tuple[object, ...]:
    return (c.rho, c.delta0, c.pure_eps, c.gdp_mu2, c.pure_count, c.pure_max, c.basic_eps, c.basic_delta, c.pld)


def ev(*events: object) -> PldEvents:
    return PldEvents.of(events)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------- advanced composition


def test_advanced_composition_is_the_drv_bound() -> None:
    assert advanced_composition(0.1, 100, 1e-6) == float.fromhex("0x1.93ba0e4f06384p+2")
    e0, k, d = 0.25, 7, 1e-3
    exact_value = math.sqrt(2 * k * math.log(1 / d)) * e0 + k * e0 * math.expm1(e0)
    assert exact_value < advanced_composition(e0, k, d) <= exact_value * (1 + 3e-12)
    assert advanced_composition(0.5, 3, 1) == float.fromhex("0x1.f237caa5a3613p-1")  # delta' = 1: no sqrt term
    assert advanced_composition(0.0, 5, 0.5) == 0.0 and advanced_composition(0.5, 0, 0.5) == 0.0


@pytest.mark.parametrize("k", [-1, True, 1.0])
def test_advanced_composition_count_must_be_a_non_negative_int(k: object) -> None:
    with pytest.raises(ValueError, match=rf"^k must be a non-negative int, got {k!r}$"):
        advanced_composition(0.1, k, 1e-6)  # type: ignore[arg-type]


@pytest.mark.parametrize("d", [0, 1.5])
def test_advanced_composition_delta_prime_in_the_half_open_unit_interval(d: float) -> None:
    with pytest.raises(ValueError, match=rf"^delta_prime must be in \(0, 1\], got {d!r}$"):
        advanced_composition(0.1, 3, d)


# ---------------------------------------------------------------------------------------------- helpers


def test_sum_helpers() -> None:
    assert _fsum([F(1, 3), F(1, 6), F(2, 3), F(1, 7)]) == F(1, 3) + F(1, 6) + F(2, 3) + F(1, 7)
    assert _fsum([]) == 0
    assert _sum_opt([F(1), F(2)]) == 3 and _sum_opt([F(1), None]) is None and _sum_opt([]) == 0
    assert _top_two_sum([F(1), F(5), F(3)]) == 8 and _top_two_sum([F(2)]) == 2 and _top_two_sum([]) == 0
    assert _basic(F(1), F(1, 2)) == (F(1), F(1, 2))
    assert _basic(F(1), F(1)) == (None, 0) and _basic(None, F(0)) == (None, 0)


def test_dominated_and_capped() -> None:
    a, b = ev(PurePLD(F(1))), ev(PurePLD(F(1)), PurePLD(F(1)), GaussianPLD(F(1)))
    assert _dominated(a, b) and not _dominated(b, a) and _dominated(a, a)
    assert not _dominated(ev(PurePLD(F(1)), PurePLD(F(1)), PurePLD(F(1))), b)
    many = ev(*(PurePLD(F(i + 1)) for i in range(MAX_DISTINCT_EVENTS)))
    assert _capped(many) is many
    assert _capped(ev(*(PurePLD(F(i + 1)) for i in range(MAX_DISTINCT_EVENTS + 1)))) is None


def test_parallel_pld() -> None:
    small, big = ev(PurePLD(F(1))), ev(PurePLD(F(1)), PurePLD(F(1)))
    other = ev(GaussianPLD(F(1)))
    assert _parallel_pld([small, big], "add_remove") == big
    assert _parallel_pld([big, small], "replace") == PldEvents.sequential([small, big])
    assert _parallel_pld([big], "replace") == big
    # not a chain: under add/remove the join (per family the largest), under replace every piece composed
    assert _parallel_pld([small, other], "add_remove") == PldEvents.sequential([small, other])
    assert _parallel_pld([small, other, other], "add_remove") == PldEvents.sequential([small, other])
    assert _parallel_pld([small, other, other], "replace") == PldEvents.sequential([small, other, other])
    assert _parallel_pld([small, None], "add_remove") is None
    assert _parallel_pld([PldEvents(()), PldEvents(())], "replace") == PldEvents(())
    assert _parallel_pld([PldEvents(()), small], "replace") == small
    wide = [ev(PurePLD(F(i + 1)), GaussianPLD(F(1, i + 1))) for i in range(MAX_DISTINCT_EVENTS + 1)]
    assert _parallel_pld(wide, "replace") is None  # no chain: every piece composed, too many events
    assert _parallel_pld(wide, "add_remove") == ev(PurePLD(F(MAX_DISTINCT_EVENTS + 1)), GaussianPLD(F(1)))
    rising = [ev(PurePLD(F(i + 1))) for i in range(MAX_DISTINCT_EVENTS + 1)]
    assert _parallel_pld(rising[::-1], "add_remove") == rising[-1]  # a chain by dominance: the largest
    assert _parallel_pld(rising, "replace") == PldEvents.sequential(rising[-2:])


def test_join_dominates_every_piece_family_by_family() -> None:
    """The max of pieces that are not a chain (add/remove): per family the largest, never their composition."""
    g, lg, p, a = GaussianPLD, LatticeGaussianPLD, PurePLD, ApproxPLD(F(1), F(1, 10**6))
    x = ev(g(F(1)), p(F(1)), a, lg(F(1, 4)))
    y = ev(g(F(1, 4)), g(F(1, 4)), p(F(1, 2)), p(F(1, 2)), a, a, lg(F(1, 8)), lg(F(1, 8)))
    j = _join([x, y])
    assert j == ev(g(F(1)), p(F(1)), p(F(1, 2)), a, a, lg(F(1, 8)), lg(F(1, 8)))  # y: the same mu^2 in more events
    assert _dominated(x, j) and _dominated(y, j) and _dominated(j, PldEvents.sequential([x, y]))
    assert _join([x, ev(lg(F(1, 8)))]) == x  # x's lattice part has the larger mu^2 and at least as many events
    assert _parallel_pld([x, y], "add_remove") == j and _parallel_pld([x, y], "replace") == PldEvents.sequential([x, y])
    runs = _pure_join([[(F(3), 2), (F(1), 1)], [(F(2), 1)], [(F(5), 1), (F(1), 4)]])
    assert ev(*runs) == ev(p(F(5)), p(F(3)), p(F(1)), p(F(1)), p(F(1)))


def test_dominated_by_family() -> None:
    """Smaller parameters of the same family are dominated (the one-sided cost of a piece next to its full cost);
    each family is compared on its own, and anything else must be a sub-multiset."""
    g, lg = GaussianPLD, LatticeGaussianPLD
    assert _dominated(ev(g(F(1, 4)), g(F(1, 4))), ev(g(F(1, 2)))) and not _dominated(ev(g(F(1, 2))), ev(g(F(1, 3))))
    assert _dominated(ev(g(F(1, 2))), ev(g(F(1, 2)))) and not _dominated(ev(g(F(1, 2)), g(F(1, 100))), ev(g(F(1, 2))))
    assert _dominated(ev(lg(F(1, 4))), ev(lg(F(1, 2)))) and not _dominated(ev(lg(F(1, 4)), lg(F(1, 4))), ev(lg(F(1))))
    assert not _dominated(ev(lg(F(1, 4))), ev(g(F(1)))) and not _dominated(ev(g(F(1, 4))), ev(lg(F(1))))
    p = PurePLD
    assert _dominated(ev(p(F(1)), p(F(1, 2))), ev(p(F(1)), p(F(1))))
    assert not _dominated(ev(p(F(1)), p(F(1))), ev(p(F(1)), p(F(1, 2))))
    assert _dominated(ev((p(F(1)), 3), (p(F(1, 2)), 2)), ev((p(F(2)), 4), (p(F(1)), 1)))
    assert not _dominated(ev((p(F(1)), 3), (p(F(1, 2)), 3)), ev((p(F(2)), 4), (p(F(1)), 1)))
    assert not _dominated(ev((p(F(2)), 1)), ev((p(F(1)), 5)))
    a = ApproxPLD(F(1), F(1, 10**6))
    assert _dominated(ev(a), ev(a, p(F(1)))) and not _dominated(ev(ApproxPLD(F(1, 2), F(1, 10**6))), ev(a))
    assert _dominance_key(ev(p(F(1)), a, g(F(1, 2)))) == (2, 0, F(1, 2), 0, 1)


# ---------------------------------------------------------------------------------------------- constructors


def test_constructors_field_by_field() -> None:
    g = ev(GaussianPLD(F(1, 4)))
    assert fields(Cost.gaussian(1, 2)) == (F(1, 8), 0, None, F(1, 4), 0, 0, None, 0, g)
    assert fields(Cost.gaussian_zcdp(F(1, 8))) == (F(1, 8), 0, None, F(1, 4), 0, 0, None, 0, g)
    p = ev(PurePLD(F(1, 2)))
    assert fields(Cost.pure(F(1, 2))) == (F(1, 8), 0, F(1, 2), None, 1, F(1, 2), F(1, 2), 0, p)
    assert fields(Cost.bounded_range(F(1, 2))) == (F(1, 32), 0, F(1, 2), None, 1, F(1, 2), F(1, 2), 0, p)
    assert fields(Cost.zcdp(F(1, 3))) == (F(1, 3), 0, None, None, 0, 0, None, 0, None)
    assert fields(Cost.approx_zcdp(F(1, 3), F(1, 9))) == (F(1, 3), F(1, 9), None, None, 0, 0, None, 0, None)
    assert Cost.approx_zcdp(F(1, 3), 0) == Cost.zcdp(F(1, 3)) and Cost.approx_zcdp(0, 0) == Cost.zero()
    assert Cost.bounded_range(1).rho == F(1, 8) and Cost.pure(1).rho == F(1, 2)
    assert fields(Cost.approx_dp(2, F(1, 9))) == (F(2), F(1, 9), None, None, 0, 0, F(2), F(1, 9),
                                                  ev(ApproxPLD(F(2), F(1, 9))))
    assert Cost.approx_dp(F(1, 2), 0) == Cost.pure(F(1, 2))
    zero = (0, 0, 0, 0, 0, 0, 0, 0, PldEvents(()))
    assert fields(Cost.zero()) == zero
    for c in (Cost.gaussian(0, 0), Cost.gaussian_zcdp(F(0)), Cost.pure(0), Cost.bounded_range(0), Cost.zcdp(0)):
        assert fields(c) == zero


def test_constructor_refusals() -> None:
    with pytest.raises(ValueError, match=r"^sigma must be positive when the sensitivity is positive, got sigma=0$"):
        Cost.gaussian(1, 0)
    with pytest.raises(ValueError, match=r"^delta0 must be < 1, got 1$"):
        Cost.approx_zcdp(1, 1)
    with pytest.raises(ValueError, match=r"^a Cost with delta0 > 0 cannot carry a pure epsilon or a GDP mu$"):
        Cost(rho=1, delta0=F(1, 10), pure_eps=None, gdp_mu2=1, pure_count=0, pure_max=0)
    with pytest.raises(ValueError, match=r"^a Cost with delta0 > 0 cannot carry a pure epsilon or a GDP mu$"):
        Cost(rho=1, delta0=F(1, 10), pure_eps=1, gdp_mu2=None, pure_count=0, pure_max=0)
    Cost(rho=1, delta0=0, pure_eps=1, gdp_mu2=1, pure_count=0, pure_max=0)  # delta0 = 0 may carry both
    with pytest.raises(ValueError, match=r"^basic_delta needs a basic_eps$"):
        Cost(rho=1, delta0=0, pure_eps=None, gdp_mu2=None, pure_count=0, pure_max=0, basic_delta=F(1, 10))
    with pytest.raises(ValueError, match=r"^basic_delta must be < 1, got Fraction\(1, 1\)$"):
        Cost(rho=1, delta0=0, pure_eps=None, gdp_mu2=None, pure_count=0, pure_max=0, basic_eps=1, basic_delta=1)
    with pytest.raises(ValueError, match=r"^pure_count must be a non-negative int, got -1$"):
        Cost(rho=1, delta0=0, pure_eps=None, gdp_mu2=None, pure_count=-1, pure_max=0)
    with pytest.raises(ValueError, match=r"^pure_count must be a non-negative int, got True$"):
        Cost(rho=1, delta0=0, pure_eps=None, gdp_mu2=None, pure_count=True, pure_max=0)
    assert Cost(rho=1, delta0=0, pure_eps=None, gdp_mu2=None, pure_count=0, pure_max=0, pld="pure(1)x2").pld == \
        ev(PurePLD(F(1)), PurePLD(F(1)))


def test_with_basic() -> None:
    assert Cost.zcdp(F(1, 8)).with_basic(F(1), F(1, 10)).basic_eps == 1
    assert Cost.zcdp(F(1, 8)).with_basic(F(1), F(1, 10)).basic_delta == F(1, 10)
    assert Cost.pure(F(1, 2)).with_basic(F(1), F(0)).basic_eps == F(1, 2)  # pure: the smaller epsilon
    assert Cost.pure(F(2)).with_basic(F(1), F(0)).basic_eps == 1
    assert Cost.pure(F(1, 2)).with_basic(F(1), F(1, 10)).basic_eps == 1  # delta > 0: as given


# ---------------------------------------------------------------------------------------------- composition


def test_sequential_field_by_field() -> None:
    a, b = Cost.pure(F(1, 2)), Cost.approx_dp(F(1), F(1, 10))
    c = a.then(b)
    assert fields(c) == (F(1, 8) + F(1, 2), F(1, 10), None, None, 1, F(1, 2), F(3, 2), F(1, 10),
                         ev(PurePLD(F(1, 2)), ApproxPLD(F(1), F(1, 10))))
    g = Cost.gaussian(1, 2).then(Cost.gaussian(1, 1))
    assert fields(g) == (F(5, 8), 0, None, F(5, 4), 0, 0, None, 0, ev(GaussianPLD(F(1, 4)), GaussianPLD(F(1))))
    assert Cost.sequential([]) == Cost.zero()
    assert Cost.sequential([a]) is a
    assert Cost.pure(F(1)).then(Cost.pure(F(3))).pure_max == 3 and Cost.pure(F(3)).then(Cost.pure(F(1))).pure_max == 3
    assert Cost.pure(F(1)).then(Cost.zcdp(F(1))).pld is None
    big = Cost.approx_dp(F(1), F(3, 5)).then(Cost.approx_dp(F(1), F(2, 5)))  # basic delta reaches 1: dropped
    assert (big.basic_eps, big.basic_delta) == (None, 0)


def test_sequential_of_many_costs_groups_repeated_objects() -> None:
    a, b = Cost.pure(F(1, 2)), Cost.gaussian(1, 2)
    nine = [a] * 5 + [b] * 4
    expected = a.scaled(5).then(b.scaled(4))
    assert Cost.sequential(nine) == expected
    distinct = [Cost.pure(F(1, i + 2)) for i in range(9)]
    assert Cost.sequential(distinct).pure_eps == sum(F(1, i + 2) for i in range(9))
    assert Cost.sequential(distinct).pure_count == 9
    twice = [a, a] + [Cost.pure(F(1, i + 3)) for i in range(7)]  # one object twice among nine: scaled(2)
    assert Cost.sequential(twice).pure_eps == 1 + sum(F(1, i + 3) for i in range(7))
    assert Cost.sequential(twice).pure_count == 9
    eight = [a] * 8  # not grouped, same answer
    assert Cost.sequential(eight) == a.scaled(8)


def test_scaled_field_by_field() -> None:
    a = Cost.approx_dp(F(1), F(1, 10))
    assert fields(a.scaled(3)) == (F(3, 2), F(3, 10), None, None, 0, 0, F(3), F(3, 10),
                                   ev((ApproxPLD(F(1), F(1, 10)), 3)))
    p = Cost.pure(F(1, 2)).scaled(4)
    assert fields(p) == (F(1, 2), 0, F(2), None, 4, F(1, 2), F(2), 0, ev((PurePLD(F(1, 2)), 4)))
    assert Cost.gaussian(1, 2).scaled(2).gdp_mu2 == F(1, 2)
    assert Cost.zcdp(F(1)).scaled(3).pld is None
    assert a.scaled(10).basic_eps is None and a.scaled(10).basic_delta == 0  # delta 1: dropped
    assert a.scaled(0) == Cost.zero()
    for k in (-1, True, 2.0):
        with pytest.raises(ValueError, match=rf"^k must be a non-negative int, got {k!r}$"):
            a.scaled(k)  # type: ignore[arg-type]


def test_parallel_field_by_field() -> None:
    a, b, c = Cost.pure(F(1)), Cost.pure(F(2)).then(Cost.pure(F(2))), Cost.pure(F(3))
    add = Cost.parallel([a, b, c], "add_remove")
    rep = Cost.parallel([a, b, c], "replace")
    assert (add.rho, add.pure_eps, add.pure_count, add.pure_max, add.basic_eps) == (F(9, 2), 4, 2, 3, 4)
    assert (rep.rho, rep.pure_eps, rep.pure_count, rep.pure_max, rep.basic_eps) == (F(4) + F(9, 2), 7, 3, 3, 7)
    g = Cost.parallel([Cost.gaussian(1, 1), Cost.gaussian(1, 2), Cost.gaussian(2, 1)], "replace")
    assert g.gdp_mu2 == 5 and g.pure_eps is None and g.basic_eps is None
    mixed = Cost.parallel([Cost.approx_dp(F(1), F(1, 10)), Cost.approx_dp(F(2), F(1, 5))], "replace")
    assert (mixed.delta0, mixed.basic_eps, mixed.basic_delta) == (F(3, 10), 3, F(3, 10))
    mixed = Cost.parallel([Cost.approx_dp(F(1), F(1, 10)), Cost.zcdp(F(1))], "add_remove")
    assert (mixed.delta0, mixed.basic_eps, mixed.basic_delta) == (F(1, 10), None, 0)
    assert Cost.parallel([], "replace") == Cost.zero()
    assert Cost.parallel([a], "replace").pure_eps == 1
    with pytest.raises(ValueError, match=r"^relation must be 'replace' or 'add_remove', got 'bounded'$"):
        Cost.parallel([a], "bounded")  # type: ignore[arg-type]


def test_group_field_by_field() -> None:
    p = Cost.pure(F(1, 2)).then(Cost.gaussian(1, 2))
    g = p.group(3)
    assert (g.rho, g.pure_eps, g.gdp_mu2, g.pure_count, g.pure_max, g.delta0) == \
        ((F(1, 8) + F(1, 8)) * 9, None, None, 1, F(3, 2), 0)
    assert Cost.gaussian(1, 2).group(3).gdp_mu2 == F(9, 4)
    q = Cost.pure(F(1, 2)).group(3)
    assert (q.pure_eps, q.basic_eps, q.basic_delta, q.pld) == (F(3, 2), F(3, 2), 0, None)
    assert Cost.pure(F(1, 2)).group(1) == Cost.pure(F(1, 2))
    d = Cost.zcdp(F(1)).with_basic(F(2), F(1, 10))
    assert (d.group(1).basic_eps, d.group(1).basic_delta) == (2, F(1, 10))
    assert (d.group(2).basic_eps, d.group(2).basic_delta) == (None, 0)  # delta > 0 does not scale: dropped
    for k in (0, True, 2.0):
        with pytest.raises(ValueError, match=rf"^group size k must be a positive int, got {k!r}$"):
            p.group(k)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^group privacy for approximate zCDP \(delta0 > 0\) is not supported; "
                                         r"got delta0=0\.1$"):
        Cost.approx_zcdp(1, F(1, 10)).group(2)


def test_for_lattice_noise() -> None:
    mixed = Cost.gaussian(1, 2).then(Cost.pure(F(1)))
    lattice = mixed.for_lattice_noise()
    assert lattice.gdp_mu2 is None and lattice.pld == mixed.pld.on_lattice()  # type: ignore[union-attr]
    assert (lattice.rho, lattice.pure_eps, lattice.basic_eps) == (mixed.rho, mixed.pure_eps, mixed.basic_eps)
    assert mixed.for_lattice_noise(covered=False).pld is None and mixed.for_lattice_noise(covered=False).gdp_mu2 is None
    pure = Cost.pure(F(1))
    assert pure.for_lattice_noise() is pure and pure.for_lattice_noise(covered=False) is pure
    zero = Cost.zero()  # gdp_mu2 = 0, no Gaussian event: the mu goes, the empty PLD stays
    assert zero.for_lattice_noise().gdp_mu2 is None and zero.for_lattice_noise().pld == PldEvents(())
    assert Cost.zcdp(F(1)).for_lattice_noise().pld is None


# ---------------------------------------------------------------------------------------------- conversions


def rules(c: Cost, delta: float) -> list[tuple[str, float, float, bool]]:
    return [(x.rule, x.epsilon, x.delta, x.tightest) for x in c.epsilon_at(delta)]


def test_epsilon_at_every_rule_in_order() -> None:
    c = Cost.pure(F(1, 2)).scaled(3)
    d = 1e-6
    rho = float(c.rho)
    got = rules(c, d)
    assert [r for r, *_ in got] == ["zCDP -> (eps,delta) by CKS", "Bun-Steinke Prop 1.3", PLD_RULE,
                                    "basic composition (pure)", "advanced composition (DRV)"]
    assert got[0][1:3] == (approx_zcdp_to_approx_dp(rho, 0, d), d)
    assert got[1][1:3] == (bun_steinke_epsilon(rho, d), d)
    assert got[2][1:3] == (pld_epsilon(c.pld, d), d)  # type: ignore[arg-type]
    assert got[3][1:3] == (1.5, 0.0)
    assert got[4][1:3] == (advanced_composition(0.5, 3, d), d)
    best = min(range(5), key=lambda i: got[i][1])
    assert [t for *_, t in got] == [i == best for i in range(5)]
    g = Cost.gaussian(1, 1).with_basic(F(5), F(1, 10**7))
    got = rules(g, d)
    assert [r for r, *_ in got] == ["zCDP -> (eps,delta) by CKS", "Bun-Steinke Prop 1.3", "exact Gaussian-DP",
                                    "basic composition (epsilon, delta)", PLD_RULE]
    assert got[2][1] == gaussian_dp_epsilon(gdp_mu_of_mu2(1), d) and got[3][1:3] == (5.0, to_float_up(F(1, 10**7)))
    assert [t for *_, t in got] == [False, False, True, False, False]
    at_delta = [x.rule for x in g.epsilon_at(F(1, 10**7))]  # type: ignore[arg-type]
    assert at_delta[3] == "basic composition (epsilon, delta)"  # the basic delta is the delta: included
    assert "basic composition (epsilon, delta)" not in [r for r, *_ in rules(g, 5e-8)]  # basic delta > delta


def test_epsilon_at_with_delta0_and_ties() -> None:
    a = Cost.approx_zcdp(F(1, 2), F(1, 10**7))
    got = rules(a, 1e-6)
    assert got == [("zCDP -> (eps,delta) by CKS", approx_zcdp_to_approx_dp(0.5, F(1, 10**7), 1e-6), 1e-6, True)]
    assert [r for r, *_ in rules(Cost.pure(F(1)).then(Cost.pure(F(1))).scaled(1), 0.5)] [-1] == \
        "advanced composition (DRV)"
    one = [x.rule for x in Cost.pure(F(1)).epsilon_at(1e-6)]
    assert one[-1] == "advanced composition (DRV)"  # one pure event is enough
    z = Cost.zero()  # every rule gives 0: the first is the tightest
    assert [t for *_, t in rules(z, 1e-6)] == [True] + [False] * (len(rules(z, 1e-6)) - 1)
    assert "advanced composition (DRV)" not in [r for r, *_ in rules(z, 1e-6)]  # no pure event counted


def test_epsilon_at_refusals() -> None:
    with pytest.raises(ValueError, match=r"^delta must be < 1, got 1$"):
        Cost.pure(F(1)).epsilon_at(1)
    with pytest.raises(ValueError, match=r"^delta=1e-07 must exceed the cost's delta0=1e-07 "
                                         r"\(approximate zCDP part\)$"):
        Cost.approx_zcdp(F(1), F(1, 10**7)).epsilon_at(F(1, 10**7))  # type: ignore[arg-type]


def test_epsilon_at_without_a_finite_pld(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(comp, "pld_epsilon", lambda events, d: math.inf)
    assert PLD_RULE not in [r for r, *_ in rules(Cost.pure(F(1)), 1e-6)]


def test_conversion_record() -> None:
    c = Conversion("r", 1.0, 0.0, "ref", True)
    assert (c.rule, c.epsilon, c.delta, c.reference, c.tightest) == ("r", 1.0, 0.0, "ref", True)


def test_total_measure() -> None:
    assert Cost.pure(F(1)).total_measure() == PureDP(F(1))
    assert Cost.gaussian(1, 1).total_measure() == ZCDP(F(1, 2))
    assert Cost.approx_zcdp(F(1), F(1, 10)).total_measure() == ApproxZCDP(F(1), F(1, 10))


def test_references_name_their_theorems() -> None:
    assert comp._REF_CKS.startswith("Canonne, Kamath & Steinke 2020") and "Prop. 12" in comp._REF_CKS
    assert comp._REF_BS == "Bun & Steinke 2016, 'Concentrated Differential Privacy', Prop. 1.3"
    assert comp._REF_BASIC == "Dwork & Roth 2014, Thm. 3.16 (basic composition)"
    assert comp._REF_DRV == "Dwork, Rothblum & Vadhan 2010, Thm. III.3 (Dwork & Roth 2014, Thm. 3.20)"
    assert "Cor. 2.13" in comp._REF_GDP and "loss grid 0.0001" in comp._REF_PLD
    assert PLD_RULE == "PLD (dp_accounting, pessimistic)"
    c = Cost.pure(F(1, 2)).scaled(3)
    refs = {x.rule: x.reference for x in c.epsilon_at(1e-6)}
    assert refs["zCDP -> (eps,delta) by CKS"] == comp._REF_CKS and refs[PLD_RULE] == comp._REF_PLD
    assert refs["advanced composition (DRV)"] == comp._REF_DRV and refs["basic composition (pure)"] == comp._REF_BASIC
