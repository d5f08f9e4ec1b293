"""Accounting modes: how a plan is accounted (pure, zCDP, exact Gaussian-DP, privacy loss distribution,
basic), chosen from the budget and the mechanisms' capabilities, and whether the exact Gaussian-DP
conversion holds."""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import attrs

from dpflow.errors import PlanError, PlanTypeError
from dpflow.nodes import Mechanism, NodeRecord, Repeat
from dpflow.nodes.types import Mode
from dpflow.planner.context import PlanContext, one_sided_factor
from dpflow.planner.fold import fold_frac
from dpflow.planner.infer import TypedScope, _key, _mech, _spaces
from dpflow.privacy import ZCDP, ApproxDP, ApproxZCDP, PureDP, gaussian_budget_rho

_GDP_TEXT = "all mechanisms Gaussian (continuous noise): exact Gaussian-DP"
_EXACT_TEXT = ("; exact discrete Gaussian noise: the exact Gaussian-DP profile is proven for continuous noise only, "
               "so it is not used")


class Accounting(enum.Enum):
    """How a plan is accounted, as chosen by the planner from the budget and the mechanisms' capabilities.

    >>> Accounting.GDP.mode, Accounting.GDP.continuous_gaussian
    ('zcdp', True)
    """

    PURE = "pure"
    """Pure epsilon shares, basic composition."""
    ZCDP = "zcdp"
    """rho shares, zCDP composition (and conversion to (epsilon, delta) by CKS and friends)."""
    GDP = "zcdp-by-exact-GDP"
    """rho shares of an all-Gaussian plan certified through the exact Gaussian-DP profile: every
    Gaussian mechanism must sample continuous noise."""
    BASIC = "basic"
    """Per-mechanism (epsilon, delta) shares, basic composition (``accounting="basic"``)."""
    PLD = "zcdp-by-PLD"
    """rho shares as in zCDP mode, of the largest total whose composed privacy loss distribution meets the
    (epsilon, delta) budget on every source (:func:`~dpflow.planner.allocate.pld_total`): in a certificate
    for continuous sources every Gaussian mechanism samples continuous noise (the Gaussian PLD); in one for
    exact sources it draws the discrete Gaussian, accounted by the lattice Gaussian PLD
    (:class:`~dpflow.privacy.pld.LatticeGaussianPLD`)."""

    @property
    def mode(self) -> Mode:
        """The unit of the weighted shares: epsilon (pure, basic) or rho (zCDP, GDP)."""
        return "pure" if self in (Accounting.PURE, Accounting.BASIC) else "zcdp"

    @property
    def continuous_gaussian(self) -> bool:
        """Whether the certificate rests on the exact Gaussian-DP profile of the Gaussian mechanisms
        (proven for continuous noise only): GDP mode, basic mode (each Gaussian calibrated by it) and PLD
        mode (the Gaussian PLD is that profile's privacy loss) when certified for continuous sources (a
        certificate for exact sources never is: :func:`~dpflow.planner.allocate.allocate_budget`)."""
        return self in (Accounting.GDP, Accounting.BASIC, Accounting.PLD)


@attrs.frozen
class ModeChoice:
    """The planner's accounting decision: the mode, the total shared by weight (in ``mode`` units)
    and the ledger's allocation text."""

    accounting: Accounting
    total: Fraction
    text: str


@attrs.frozen
class PldSearch:
    """The PLD-mode total found, and a bound on the relative shortfall below the largest admissible total
    (``None``: no bound proven)."""

    total: Fraction
    shortfall: Fraction | None


PldTotal = Callable[[PlanContext, Fraction], PldSearch | None]
"""The search for the PLD-mode total from the zCDP one (:func:`~dpflow.planner.allocate.pld_total`, which
allocates and folds, so it lives in a later module and is handed in)."""

ZcdpTotal = Callable[[PlanContext], tuple[Fraction, Fraction]]
"""The zCDP-mode total for an (epsilon, delta) budget and the mechanisms' own delta0 it leaves room for
(:func:`~dpflow.planner.allocate.zcdp_total`, which allocates and folds: handed in like :data:`PldTotal`)."""


def mode_and_total(ctx: PlanContext, pld_total: PldTotal, zcdp_total: ZcdpTotal) -> ModeChoice:
    """Choose the accounting from the budget and the mechanisms' capabilities (``pure_capable``,
    ``gaussian_profile``); a pure choice is then checked by :func:`_refuse_impure`.

    Under an ``ApproxDP(epsilon, delta)`` budget, delta > 0: an all-Gaussian plan is certified by the exact
    Gaussian-DP profile (GDP mode; the PLD is not searched: a pessimistic Gaussian PLD bounds the exact
    profile from above, and its Gaussian events compose to at least the profile's mu^2, so its total
    could never be larger).  Otherwise the candidates are pure mode (every mechanism pure-capable, no
    fixed pure share) and zCDP mode (rho by CKS, at delta less the delta0 the mechanisms claim themselves:
    ``zcdp_total``) or, when the total ``pld_total`` finds is larger (every
    source's cost has a PLD), PLD mode in its place (the same rho split with a larger total: less noise
    for every mechanism); the one with the least total noise variance (:func:`_noise_variance`) wins,
    ties going to pure mode.
    """
    budget = ctx.plan.budget
    if ctx.basic:
        return _basic_mode(ctx)
    mechs = [m for _, _, m in ctx.mechs]
    if isinstance(budget, PureDP):
        return ModeChoice(Accounting.PURE, budget.epsilon,
                          f"pure mode: epsilon={float(budget.epsilon):.6g} shared by weight")
    if isinstance(budget, (ZCDP, ApproxZCDP)):
        return ModeChoice(Accounting.ZCDP, budget.rho, f"zCDP mode: rho={float(budget.rho):.6g} shared by weight")
    assert isinstance(budget, ApproxDP)
    eps, delta = float(budget.epsilon), float(budget.delta)
    if delta <= 0:
        return ModeChoice(Accounting.PURE, budget.epsilon, "pure mode (delta = 0): epsilon shared by weight")
    exact_gaussian = ctx.exact_noise and any(m.gaussian_profile for m in mechs)
    if mechs and all(m.gaussian_profile for m in mechs) and not exact_gaussian:
        rho = gaussian_budget_rho(budget)
        mu = math.sqrt(float(2 * rho))
        return ModeChoice(Accounting.GDP, rho, (f"{_GDP_TEXT} mu={mu:.6g} meets ({eps:.6g}, {delta:.3g}); "
                                                f"rho=mu^2/2={float(rho):.6g} shared by weight"))
    rho, delta0 = zcdp_total(ctx)
    cks = "(CKS)" if delta0 == 0 else (f"(CKS at delta - delta0, delta0={float(delta0):.3g} the mechanisms' own: "
                                       "approximate zCDP, Bun-Steinke 2016 Sec. 8)")
    choices = [ModeChoice(Accounting.ZCDP, rho,
                          f"zCDP mode: rho={float(rho):.6g} {cks} meets ({eps:.6g}, {delta:.3g}); shared by weight"
                          + (_EXACT_TEXT if exact_gaussian else ""))]
    if mechs and all(m.pure_capable and m.fixed_share("pure") is None for m in mechs):
        choices.insert(0, ModeChoice(Accounting.PURE, budget.epsilon,
                                     "pure mode: basic composition meets the budget with delta to spare"))
    pld = pld_total(ctx, rho)
    if pld is not None and pld.total > rho:  # the same rho split with a larger total: less noise for every mechanism
        choices[-1] = ModeChoice(Accounting.PLD, pld.total, _pld_text(pld, eps, delta, exact_gaussian))
    if len(choices) == 1:
        return choices[0]
    # the least total noise variance; ties keep the simpler accounting (pure first)
    return min(choices, key=lambda c: _noise_variance(ctx, c.accounting.mode, c.total))


def _pld_text(pld: PldSearch, eps: float, delta: float, exact_gaussian: bool) -> str:
    bound = ("no bound on the shortfall proven" if pld.shortfall is None else
             f"the largest admissible total is less than {100 * float(pld.shortfall):.2g}% above it")
    noise = ("exact sources draw the discrete Gaussian, accounted by the lattice Gaussian PLD (the smoothed "
             "continuous Gaussian, dpflow.privacy.pld.LatticeGaussianPLD)" if exact_gaussian else
             "every Gaussian mechanism draws continuous noise (the Gaussian PLD is proven for continuous noise only)")
    return (f"PLD mode: rho={float(pld.total):.6g} shared by weight (as in zCDP mode), a total whose composed "
            f"cost meets ({eps:.6g}, {delta:.3g}) on every source by its tightest valid conversion, the privacy "
            f"loss distribution among them (pessimistic dp_accounting numerics; search rounded down; {bound}); "
            + noise)


def _refuse_impure(ctx: PlanContext) -> None:
    """Refuse, in pure mode, every mechanism that is not ``pure_capable`` (the first one in plan order)."""
    for sp, rec, node in ctx.mechs:
        if not node.pure_capable:
            raise node.pure_refusal(_key(sp, rec.id))


def _noise_variance(ctx: PlanContext, mode: Mode, total: Fraction) -> Fraction:
    """Total noise variance (up to a common factor) if the budget is shared by weight in ``mode``.

    A mechanism's variance is proportional to 1 / (the rho it realises at its share): 1/eps^2 vs
    1/(2 rho) for Laplace, and right for Peel too (3s vs 5s/2 unit losses); every round of a
    Repeat counts (pure shares shrink like 1/T, zCDP variances only like T).
    """
    var = Fraction(0)
    inverse: dict[tuple[Mechanism, Fraction], Fraction] = {}  # equal mechanisms at equal shares: cost each once
    for src in ctx.sources:
        weights = fold_frac(ctx.space, ctx.relation, src.id, lambda sp, r: Fraction(_mech(r).weight), True,
                            one_sided_factor(ctx, mode))
        if weights > 0:
            unit = total / weights

            def leaf(sp: TypedScope, r: NodeRecord, unit: Fraction = unit) -> Fraction:
                m, share = _mech(r), unit * Fraction(_mech(r).weight)
                if (m, share) not in inverse:
                    inverse[m, share] = 1 / m.cost(share, mode).rho
                return inverse[m, share]

            var += fold_frac(ctx.space, ctx.relation, src.id, leaf, per_round=False)
    return var


def _basic_mode(ctx: PlanContext) -> ModeChoice:
    """Basic (epsilon, delta) accounting: epsilon shared by weight (pure-mode folds), delta alongside."""
    budget = ctx.plan.budget
    if not isinstance(budget, ApproxDP) or budget.delta <= 0:
        raise PlanTypeError(ctx.plan.name, "basic (epsilon, delta) accounting needs an ApproxDP budget "
                            f"with delta > 0, got {budget.describe()}",
                            "use dp.ApproxDP(epsilon, delta), or accounting='auto'")
    for sp, rec, m in ctx.mechs:
        if m.fixed_share("pure") is not None or m.fixed_share("zcdp") is not None:
            raise PlanTypeError(_key(sp, rec.id), "a fixed-cost mechanism in basic (epsilon, delta) accounting",
                                "give it a weight= instead")
    for sp in _spaces(ctx.space):
        for rec in sp.order:
            if isinstance(rec.node, Repeat) and rec.node.round_weights is not None:
                raise PlanTypeError(_key(sp, rec.id), "round weights in basic (epsilon, delta) accounting",
                                    "drop round_weights (every round gets an equal share)")
    text = (f"basic (epsilon, delta) mode: mechanism i gets (epsilon, delta) * w_i / W of "
            f"({float(budget.epsilon):.6g}, {float(budget.delta):.3g}) and is calibrated to be "
            "(epsilon_i, delta_i)-DP on its own (Gaussian: exact Gaussian-DP profile; other mechanisms: "
            "the less noisy of pure epsilon_i and zCDP converted by CKS); totals by basic composition "
            "(Dwork-Roth 2014 Thm 3.16): the per-step accounting of Cai-Wang-Zhang 2021")
    if any(own_delta(m) for _, _, m in ctx.mechs):
        text += ("; a mechanism with a delta of its own (a stability histogram): the less noisy of the (epsilon_i, "
                 "delta') point its cost declares (delta' <= delta_i) and its approximate zCDP converted at delta_i "
                 "less its delta (Bun-Steinke 2016 Sec. 8)")
    if ctx.exact_noise and any(m.gaussian_profile for _, _, m in ctx.mechs):
        text += _EXACT_TEXT + " (each Gaussian is calibrated by the zCDP conversion instead)"
    return ModeChoice(Accounting.BASIC, budget.epsilon, text)


def own_delta(m: Mechanism) -> bool:
    """Whether ``m`` claims a delta0 of its own (approximate zCDP: the stability histograms' ``delta=``), read from
    its cost at a unit zCDP share (``False`` if it has no zCDP cost)."""
    try:
        return m.cost(Fraction(1), "zcdp").delta0 > 0
    except PlanError:
        return False


def _gdp_valid(accounting: Accounting, mechs: Sequence[tuple[TypedScope, NodeRecord, Mechanism]],
               exact_noise: bool) -> bool:
    """Whether the exact Gaussian-DP conversion holds for every noise source a run may use.

    It is proven for continuous Gaussian noise only (Dong-Roth-Su 2022; Balle-Wang 2018), so either the
    accounting forces continuous noise on every ``gaussian_profile`` mechanism (it certifies through
    that profile: GDP and basic modes), or there is none; otherwise an exact source draws the discrete
    Gaussian.  With ``exact_noise`` (the certificate is for an exact source) no accounting forces continuous
    noise, so it holds only without Gaussian mechanisms.
    """
    gaussian = any(m.gaussian_profile for _, _, m in mechs)
    return not gaussian or (accounting.continuous_gaussian and not exact_noise)
