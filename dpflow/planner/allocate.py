"""Budget allocation: every mechanism's share (fixed costs first, the rest by weight, exactly), the
per-invocation allocation table (round weights applied here only), the per-source cost folds, the
search for the largest total an (epsilon, delta) budget allows through the privacy loss distribution,
and the budget checks."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import attrs

from dpflow.errors import BudgetError, PlanError, PlanTypeError
from dpflow.nodes import Mechanism, NodeRecord, Repeat
from dpflow.nodes.control import Control
from dpflow.nodes.types import Allocation, Mode
from dpflow.planner.context import PlanContext, one_sided_factor, one_sided_ratio
from dpflow.planner.fold import CostLeaf, _round_weights, fold_cost, fold_frac
from dpflow.planner.infer import TypedScope, _key, _mech, _source_name, _source_of
from dpflow.planner.ledger import PerRecord
from dpflow.planner.modes import Accounting, ModeChoice, PldSearch, _gdp_valid, own_delta
from dpflow.privacy import (
    PLD_RULE,
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    Cost,
    PureDP,
    approx_zcdp_rho_for_approx_dp,
    gdp_mu_for_approx_dp,
    to_float_down,
    zcdp_rho_for_approx_dp,
)
from dpflow.privacy.calibration import _grid_floor, _grid_value, largest_on_grid
from dpflow.privacy.pld import pld_epsilon_lower
from dpflow.privacy.ratio import ONE


@attrs.frozen
class InvocationTable:
    """The allocation of every mechanism invocation, rounds included: what the interpreter reads.

    A mechanism inside ``Repeat`` loops is invoked once per round of each enclosing loop, at the
    product of those rounds' weights.  ``rounds[loop][k]`` is the weight class of round ``k`` of the
    loop at path ``loop`` (an index into its sorted distinct round weights), and ``table`` is keyed by
    the mechanism's path and the classes of its enclosing loops, outermost first (``()`` outside
    loops), so its size is the number of distinct weight combinations, not of rounds.  Every entry
    carries its share and its certified cost at that share.

    >>> import dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=2), n=100)
    >>> body = lambda rows, state, k: N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(rows)))
    >>> out = N.repeat(X, b.public([0.0, 0.0]), body, times=3, round_weights=[1.0, 1.0, 3.0])
    >>> inv = dp.certify(b.build(m=out)).invocations
    >>> inv.rounds
    {'repeat_2': (0, 0, 1)}
    >>> [str(inv.at("repeat_2/b1.gaussian_mech_5", (c,)).share) for c in inv.rounds["repeat_2"]]
    ['1/10', '1/10', '3/10']
    """

    rounds: dict[str, tuple[int, ...]]
    table: dict[tuple[str, tuple[int, ...]], Allocation]

    def at(self, node: str, classes: tuple[int, ...]) -> Allocation:
        """The allocation of mechanism ``node`` (a path) in the rounds of weight classes ``classes``."""
        return self.table[node, classes]


SourceFolds = dict[str, tuple[Fraction, Fraction]]
"""Per source name: the fold of its fixed shares and the fold of its weights (round weights applied)."""


def source_folds(ctx: PlanContext, mode: Mode) -> SourceFolds:
    """The fixed shares and the weights of every source in ``mode`` units, folded as the costs are (a mechanism's
    one-sided value at its :func:`~dpflow.planner.context.one_sided_factor`)."""
    def fixed_leaf(sp: TypedScope, rec: NodeRecord) -> Fraction:
        f = _mech(rec).fixed_share(mode)
        return f if f is not None else Fraction(0)

    def weight_leaf(sp: TypedScope, rec: NodeRecord) -> Fraction:
        m = _mech(rec)
        return Fraction(0) if m.fixed_share(mode) is not None else Fraction(m.weight)

    if mode not in ctx.folds:  # the mode choice, the PLD search and the allocation all ask: fold once
        factor = one_sided_factor(ctx, mode)
        ctx.folds[mode] = {
            _source_name(src): (fold_frac(ctx.space, ctx.relation, src.id, fixed_leaf, False, factor),
                                fold_frac(ctx.space, ctx.relation, src.id, weight_leaf, True, factor))
            for src in ctx.sources}
    return ctx.folds[mode]


def allocate_budget(ctx: PlanContext, choice: ModeChoice,
                    folds: SourceFolds | None = None) -> tuple[dict[str, Allocation], list[str]]:
    """Every mechanism's allocation per unit round weight, keyed by node path, and the warnings for
    sources no mechanism reads: on each source the fixed shares first (refused above the budget), then
    the remaining budget by weight.  ``folds`` (:func:`source_folds` in the choice's unit) may be passed
    when several totals are tried."""
    mode, total = choice.accounting.mode, choice.total
    allocations: dict[str, Allocation] = {}
    warnings: list[str] = []
    per_source: dict[str, tuple[Fraction, Fraction]] = {}
    for name, (fixed, weights) in (source_folds(ctx, mode) if folds is None else folds).items():
        if fixed > total:
            _refuse_budget(ctx, name, mode, total, fixed)
        per_source[name] = (total - fixed, weights)
        if weights == 0 and fixed == 0:
            warnings.append(f"source {name} is read by no mechanism")
    # equal mechanisms on one source (a class of ctx.classes) have equal shares: share and cost each once (no
    # Fraction work per node), and one Allocation object (frozen) for all of them, which the invocation memo keys on
    seen: dict[int, tuple[Fraction, Allocation | None]] = {}
    for (sp, rec, node), (key, cls, source) in zip(ctx.mechs, ctx.classes, strict=True):
        hit = seen.get(cls)
        if hit is None:
            f = node.fixed_share(mode)
            if f is None:
                remaining, weights = per_source[source]
                if remaining == 0:
                    raise BudgetError(_key(sp, rec.id), f"the fixed-cost mechanisms on source {source} "
                                      "use the whole budget, leaving nothing for this weighted mechanism",
                                      "lower the fixed costs, or give every mechanism on the source a weight=")
                f = remaining * Fraction(node.weight) / weights
            unit = None
            if not ctx.basic:
                try:
                    cost = node.cost(f, mode)
                except PlanError as e:
                    raise PlanTypeError(_key(sp, rec.id), e.problem, e.fix) from e
                unit = Allocation(  # exact sources: never forced to continuous noise
                    mode, f, cost, continuous_gaussian=choice.accounting.continuous_gaussian and node.gaussian_profile
                    and not ctx.exact_noise)
            hit = seen[cls] = (f, unit)
        f, unit = hit
        allocations[key] = _basic_allocation(ctx, sp, rec, node, f) if unit is None else unit
    return allocations, warnings


def _basic_allocation(ctx: PlanContext, sp: TypedScope, rec: NodeRecord, node: Mechanism,
                      eps: Fraction) -> Allocation:
    """The native (mode, share) that makes ``node`` (eps, delta_i)-DP, delta_i = delta * eps / epsilon: the least
    noisy (most rho) of the valid calibrations (:func:`_basic_candidates`)."""
    budget = ctx.plan.budget
    assert isinstance(budget, ApproxDP)
    delta = budget.delta * eps / budget.epsilon
    if node.gaussian_profile and not ctx.exact_noise:  # the exact Gaussian-DP profile (Balle-Wang 2018 Thm 8)
        rho = Fraction(gdp_mu_for_approx_dp(eps, delta)) ** 2 / 2
        return Allocation("zcdp", rho, node.cost(rho, "zcdp").with_basic(eps, delta),
                          continuous_gaussian=Accounting.BASIC.continuous_gaussian)
    found, own = _basic_candidates(node, eps, delta)
    if not found:
        if own >= delta:
            raise BudgetError(_key(sp, rec.id), f"{node.kind} claims delta={float(own):.6g} of its own, which leaves "
                              f"nothing of its basic share of delta ({float(delta):.6g}: delta * its epsilon share)",
                              "lower its delta=, raise its weight= or the budget's delta, or use accounting='auto'")
        raise PlanTypeError(_key(sp, rec.id), f"{node.kind} has no (epsilon, delta) calibration",
                            "use accounting='auto'")
    mode, share, cost = max(found, key=lambda c: c[2].rho)  # more rho = less noise; ties: the first
    return Allocation(mode, share, cost)


def _basic_candidates(node: Mechanism, eps: Fraction, delta: Fraction) -> tuple[list[tuple[Mode, Fraction, Cost]],
                                                                                  Fraction]:
    """The calibrations of ``node`` that are (eps, delta)-DP on their own, each with its certified cost carrying that
    basic point, and the delta0 the mechanism claims itself (0 for most): pure epsilon (``pure_capable``);
    delta0-approximate rho-zCDP converted by CKS at delta - delta0, rounded down (Canonne-Kamath-Steinke 2020 Prop
    12, valid for every rho-zCDP event; Bun-Steinke 2016 Sec. 8 for delta0 > 0:
    :func:`~dpflow.privacy.approx_zcdp_rho_for_approx_dp`; one rule, as in :func:`zcdp_total`); and the (epsilon',
    delta') point its cost declares at the zCDP share eps^2/2 (``Cost.basic_eps``: the Laplace stability
    histogram's (eps, delta)) when within (eps, delta)."""
    out: list[tuple[Mode, Fraction, Cost]] = []
    if node.pure_capable:
        cost = node.cost(eps, "pure")
        if cost.delta0 == 0:
            out.append(("pure", eps, cost.with_basic(eps, Fraction(0))))
    own = node.cost(zcdp_rho_for_approx_dp(eps, delta), "zcdp").delta0
    if own < delta:  # CKS at delta - own, rounded down (own = 0 for most mechanisms)
        rho = approx_zcdp_rho_for_approx_dp(eps, delta, own)
        cost = node.cost(rho, "zcdp")
        if cost.delta0 <= own:
            out.append(("zcdp", rho, cost.with_basic(eps, delta)))
    point = eps * eps / 2
    cost = node.cost(point, "zcdp")
    if cost.basic_eps is not None and cost.basic_eps <= eps and cost.basic_delta <= delta:
        out.append(("zcdp", point, cost))
    return out, own


def _invocation(ctx: PlanContext, unit: Allocation, node: Mechanism, mult: Fraction) -> Allocation:
    """The allocation of one invocation of ``node`` at round weight ``mult`` (the product of the
    round weights of its enclosing loops; 1 outside loops), from its allocation per unit round
    weight ``unit``: the share times ``mult`` and its cost, unless the node fixes its own share
    (then every round gets it).  The one place a share is multiplied by a round weight."""
    seen = ctx.memo.get((id(unit), id(mult)))  # a fold asks again for every mechanism sharing ``unit``
    if seen is not None and seen[0] is unit and seen[1] is mult:
        return seen[2]
    out = unit
    if mult != 1 and node.fixed_share(unit.mode) is None:
        key = (id(unit), mult.numerator, mult.denominator)
        hit = ctx.invocations.get(key)
        if hit is None or hit[0] is not unit:  # mechanisms repeat across rounds and weights: cost each share once
            share = unit.share * mult
            hit = ctx.invocations[key] = (unit, attrs.evolve(unit, share=share, cost=node.cost(share, unit.mode)))
        out = hit[1]
    ctx.memo[id(unit), id(mult)] = (unit, mult, out)  # the entries hold their keys' objects: no id is reused
    return out


def invocation_table(ctx: PlanContext, allocations: dict[str, Allocation]) -> InvocationTable:
    """The allocation of every mechanism invocation (see :class:`InvocationTable`)."""
    rounds: dict[str, tuple[int, ...]] = {}
    table: dict[tuple[str, tuple[int, ...]], Allocation] = {}
    _invocations(ctx, ctx.space, allocations, (), Fraction(1), rounds, table)
    return InvocationTable(rounds, table)


def _invocations(ctx: PlanContext, space: TypedScope, allocations: dict[str, Allocation], classes: tuple[int, ...],
                 mult: Fraction, rounds: dict[str, tuple[int, ...]],
                 table: dict[tuple[str, tuple[int, ...]], Allocation]) -> None:
    """Fill ``table`` with the allocation of every mechanism invocation, keyed by node path and the
    round-weight classes of the enclosing loops (``rounds[loop][k]``: the class of round k, an
    index into the loop's sorted distinct round weights)."""
    for rec in space.order:
        key = _key(space, rec.id)
        if isinstance(rec.node, Mechanism):
            table[key, classes] = _invocation(ctx, allocations[key], rec.node, mult)
        elif isinstance(rec.node, Control) and not isinstance(rec.node, Repeat):  # every run at the same allocation
            _invocations(ctx, space.bodies[rec.id], allocations, classes, mult, rounds, table)
        elif isinstance(rec.node, Repeat):
            weights = sorted(_round_weights(rec.node))
            index = {w: i for i, w in enumerate(weights)}
            rounds[key] = tuple(index[Fraction(rec.node.weight_of_round(k))] for k in range(rec.node.times))
            for i, w in enumerate(weights):
                _invocations(ctx, space.bodies[rec.id], allocations, (*classes, i), mult * w, rounds, table)


def cost_leaf(ctx: PlanContext, allocations: dict[str, Allocation]) -> CostLeaf:
    """The leaf of the per-source cost folds: a mechanism's certified costs at round weight ``mult``, one-sided (at
    its :func:`~dpflow.planner.context.one_sided_ratio`, the same noise:
    :meth:`~dpflow.nodes.base.Mechanism.one_sided_cost`) and in full."""
    full: dict[int, tuple[Allocation, PerRecord[Cost]]] = {}  # charged in full, by the invocation's identity
    pairs: dict[tuple[int, Fraction], tuple[Allocation, PerRecord[Cost]]] = {}

    def leaf(sp: TypedScope, rec: NodeRecord, mult: Fraction) -> PerRecord[Cost]:
        node = _mech(rec)
        inv = _invocation(ctx, allocations[_key(sp, rec.id)], node, mult)
        ratio = one_sided_ratio(ctx, sp, rec)
        if ratio is ONE:
            hit = full.get(id(inv))
            if hit is None or hit[0] is not inv:  # the entry holds ``inv``: its id is not reused while it lives
                hit = full[id(inv)] = (inv, PerRecord(inv.cost, inv.cost))
            return hit[1]
        hit = pairs.get((id(inv), ratio))
        if hit is None or hit[0] is not inv:
            hit = pairs[id(inv), ratio] = (inv, PerRecord(node.one_sided_cost(inv.share, inv.mode, ratio), inv.cost))
        return hit[1]

    return leaf


def source_cost(ctx: PlanContext, src: NodeRecord, leaf: CostLeaf) -> Cost:
    """The composed per-record cost on source ``src``: the fold of the ledger's totals (and of the PLD search)."""
    return fold_cost(ctx.space, ctx.relation, src.id, leaf)


def own_delta0(ctx: PlanContext, total: Fraction) -> tuple[Fraction, str]:
    """The delta the mechanisms claim themselves (``Cost.delta0``, approximate zCDP: a stability histogram's
    ``delta=``), composed on each source as the ledger composes it (:func:`source_cost`) at the zCDP total
    ``total``: the largest over sources, and that source's name; 0 when the allocation at ``total`` is refused (the
    zCDP allocation raises that refusal again).  Every mechanism of dpflow claims a delta0 independent of its
    share; were one not to, the ledger's budget check (:func:`_check_budget`) would refuse the plan, never
    overspend (nor if :func:`~dpflow.planner.modes.own_delta`, which spares plans without such a mechanism the
    allocation here, missed one)."""
    if not any(own_delta(m) for _, _, m in ctx.mechs):
        return Fraction(0), ""
    try:
        allocations, _ = allocate_budget(ctx, ModeChoice(Accounting.ZCDP, total, ""))
    except PlanError:
        return Fraction(0), ""
    leaf = cost_leaf(ctx, allocations)  # a mechanism reads a source, so ctx.sources is not empty
    return max(((source_cost(ctx, src, leaf).delta0, _source_name(src)) for src in ctx.sources), key=lambda t: t[0])


def zcdp_total(ctx: PlanContext) -> tuple[Fraction, Fraction]:
    """The zCDP-mode total rho for the plan's (epsilon, delta) budget, and the mechanisms' own delta0 it leaves
    room for (:func:`own_delta0`, 0 for most plans): the largest rho whose conversion as delta0-approximate rho-zCDP
    (:func:`~dpflow.privacy.approx_zcdp_to_approx_dp`: CKS at delta - delta0; inverted by
    :func:`~dpflow.privacy.approx_zcdp_rho_for_approx_dp`) meets the budget at :func:`approx_dp_target`, the
    point the ledger's budget check reads (both rounded down, against the user), so that check passes by
    construction.  One rule with or without a delta0.  Refused, naming the source, when delta0 leaves no delta.

    Sources: Canonne, Kamath & Steinke 2020, Prop. 12; Bun & Steinke 2016, Sec. 8 (the proof of the conversion
    is in its docstring)."""
    budget = ctx.plan.budget
    assert isinstance(budget, ApproxDP)
    delta0, source = own_delta0(ctx, zcdp_rho_for_approx_dp(budget.epsilon, budget.delta))
    eps, delta = approx_dp_target(budget)
    if delta0 >= Fraction(delta):
        raise BudgetError(source, f"the mechanisms on source {source} claim delta={float(delta0):.6g} of their own "
                          f"(approximate zCDP), which leaves nothing of the budget's delta={delta:.6g}",
                          "lower the delta= of the stability histograms, or raise the budget's delta")
    return approx_zcdp_rho_for_approx_dp(eps, delta, delta0), delta0


def approx_dp_target(budget: ApproxDP) -> tuple[float, float]:
    """The (epsilon, delta) an (epsilon, delta) budget is checked at, both rounded down to floats (against the
    user): shared by the budget check and the PLD search, so that they agree."""
    return to_float_down(budget.epsilon), to_float_down(budget.delta)


def approx_dp_epsilon(cost: Cost, delta: float) -> float:
    """The epsilon at ``delta`` (> ``cost.delta0``) a cost is checked by: its tightest valid conversion
    (:meth:`~dpflow.privacy.Cost.epsilon_at`).  The one statement of the (epsilon, delta) budget check."""
    return min(c.epsilon for c in cost.epsilon_at(delta))


def lattice_covered(ctx: PlanContext, allocations: dict[str, Allocation]) -> bool:
    """Whether the lattice Gaussian PLD (:class:`~dpflow.privacy.pld.LatticeGaussianPLD`) covers every
    mechanism whose cost holds a Gaussian PLD event and that is not forced to continuous noise: only
    ``gaussian_profile`` mechanisms draw the discrete Gaussian through ``nodes.mechanisms.unit_lattice``
    (lattice noise scale at least 2^40), which that event assumes; ``False`` when another may draw it."""
    return all(node.gaussian_profile or a.continuous_gaussian or a.cost.pld is None or not a.cost.pld.has_gaussian
               for sp, rec, node in ctx.mechs for a in (allocations[_key(sp, rec.id)],))


def pld_total(ctx: PlanContext, start: Fraction) -> PldSearch | None:
    """The largest total rho (PLD mode: shared as in zCDP mode, :class:`~dpflow.planner.modes.Accounting`)
    for which every source's composed cost meets the plan's (epsilon, delta) budget by its tightest valid
    conversion, the privacy loss distribution among them, with a bound on how far it may be below the
    largest admissible total; ``None`` when that total is below ``start`` (the zCDP total, CKS) or the PLD
    does not apply.

    For a total R the allocation, the per-source folds and the epsilon are exactly the planner's
    (:func:`allocate_budget`, :func:`source_cost`, :func:`approx_dp_epsilon` at :func:`approx_dp_target`),
    so the ledger's budget check at the chosen R passes by construction.  R is a point of a fixed grid of 14
    significant bits (:func:`~dpflow.privacy.calibration.largest_on_grid`: the largest point verified, and
    a larger epsilon never gives a smaller R for a non-decreasing epsilon).  The PLD epsilon is not exactly
    monotone in R (its losses are rounded up to a grid), so a larger admissible total may exist; the
    shortfall bound (:func:`_shortfall`) limits it.  The PLD does not apply (epsilon infinite) when a
    source's cost has none (a generic zCDP event, too many distinct events, group privacy), when the
    mechanisms' own delta0 reaches delta, when every mechanism has a fixed cost (R would change no noise), or
    when the allocation at R is refused (fixed costs above R: the zCDP allocation then refuses the plan).
    When a Gaussian mechanism is not forced to continuous noise (a certificate for exact sources), its
    Gaussian events are the lattice ones (``Cost.for_lattice_noise``, as in the ledger).

    Sources: Meiser & Mohammadi 2018; Koskela et al. 2020; Doroshenko et al. 2022 (``dpflow.privacy.pld``).
    """
    budget = ctx.plan.budget
    assert isinstance(budget, ApproxDP)
    eps, delta = approx_dp_target(budget)
    if all(m.fixed_share("zcdp") is not None for _, _, m in ctx.mechs):
        return None

    folds = source_folds(ctx, Accounting.PLD.mode)
    gdp_valid = _gdp_valid(Accounting.PLD, ctx.mechs, ctx.exact_noise)
    seen: dict[Fraction, list[Cost] | None] = {}

    def costs_at(total: Fraction) -> list[Cost] | None:
        """Every source's composed cost at ``total``, or ``None`` where the PLD does not apply."""
        if total in seen:
            return seen[total]
        seen[total] = None
        try:
            allocations, _ = allocate_budget(ctx, ModeChoice(Accounting.PLD, total, ""), folds)
        except PlanError:
            return None  # refused at this total: the zCDP allocation raises it again
        leaf, covered = cost_leaf(ctx, allocations), lattice_covered(ctx, allocations)
        costs = [run_cost(source_cost(ctx, src, leaf), gdp_valid, covered) for src in ctx.sources]
        if any(c.pld is None or c.delta0 >= Fraction(delta) for c in costs):
            return None
        seen[total] = costs
        return costs

    found = largest_on_grid(lambda t: _worst(costs_at(t), approx_dp_epsilon, delta), eps, start)
    return None if found is None else PldSearch(
        found, _shortfall(lambda t: _worst(costs_at(t), _epsilon_lower, delta), eps, found))


def _worst(costs: list[Cost] | None, epsilon_of: Callable[[Cost, float], float], delta: float) -> float:
    """The largest ``epsilon_of(cost, delta)`` over the sources' costs; ``inf`` where the PLD does not apply
    (``costs`` is ``None``), 0.0 with no source.

    >>> _worst(None, approx_dp_epsilon, 1e-6), _worst([], approx_dp_epsilon, 1e-6)
    (inf, 0.0)
    """
    return math.inf if costs is None else max((epsilon_of(c, delta) for c in costs), default=0.0)


def run_cost(cost: Cost, gdp_valid: bool, covered: bool) -> Cost:
    """The cost a source's releases are certified by: ``cost`` itself where the certificate rests on continuous
    Gaussian noise for every Gaussian mechanism (``gdp_valid``, :func:`~dpflow.planner.modes._gdp_valid`) and
    the lattice Gaussian PLD covers every mechanism that may draw the discrete Gaussian (``covered``,
    :func:`lattice_covered`); otherwise a run may draw the discrete Gaussian, so the cost for lattice noise
    (:meth:`~dpflow.privacy.Cost.for_lattice_noise`: no Gaussian-DP profile, lattice Gaussian PLD events, no
    PLD at all where it is not covered).  The one statement of that choice: the ledger and the PLD search read it.

    >>> c = Cost.gaussian_zcdp(Fraction(1, 8))
    >>> run_cost(c, True, True) is c, str(run_cost(c, False, True).pld), run_cost(c, True, False).pld
    (True, 'lattice_gaussian(1/4)x1', None)
    """
    return cost if gdp_valid and covered else cost.for_lattice_noise(covered)


def _epsilon_lower(cost: Cost, delta: float) -> float:
    """A lower bound on the tightest epsilon at ``delta`` any rule could give ``cost``'s events: the exact PLD
    epsilon (:func:`~dpflow.privacy.pld.pld_epsilon_lower`, optimistic) or a closed-form conversion, whichever
    is smaller.  Every term is non-decreasing in the shares, so a total where it exceeds the budget has no
    admissible total above it."""
    assert cost.pld is not None
    others = [c.epsilon for c in cost.epsilon_at(delta) if c.rule != PLD_RULE]
    return min([pld_epsilon_lower(cost.pld, delta), *others])


#: The grid steps above the total found at which :func:`_shortfall` looks for a total proven inadmissible.
SHORTFALL_PROBES = (8, 64, 512)


def _shortfall(lower_at: Callable[[Fraction], float], target: float, found: Fraction) -> Fraction | None:
    """How far the total ``found`` may be below the largest admissible one, relative (``None``: no bound).

    Above a total y whose lower bound (:func:`_epsilon_lower` on every source) exceeds the budget, no total is
    admissible: the exact epsilon of each rule only grows with the shares, and the pessimistic PLD the search
    reads is above the exact one.  So the largest admissible total is below y, and ``y / found - 1`` bounds the
    shortfall; y is probed :data:`SHORTFALL_PROBES` grid steps above ``found`` (the pessimistic and optimistic
    PLDs differ by about two loss-grid steps, a few grid steps of rho), the first one proven giving the bound.
    """
    j = _grid_floor(found)
    for steps in SHORTFALL_PROBES:
        y = _grid_value(j + steps)
        if lower_at(y) > target:
            return y / found - 1
    return None


def _refuse_budget(ctx: PlanContext, source: str, mode: Mode, total: Fraction, fixed: Fraction) -> None:
    unit = "rho" if mode == "zcdp" else "epsilon"
    rows = []
    worst, worst_f = "", Fraction(-1)
    for sp, rec, m in ctx.mechs:
        f = m.fixed_share(mode)
        if f is not None and _source_of(sp, rec) == source:
            rows.append(f"{_key(sp, rec.id)} {unit}={float(f):.6g}")
            if f > worst_f:
                worst, worst_f = _key(sp, rec.id), f
    raise BudgetError(
        worst,
        f"the mechanisms on source {source} need {unit}={float(fixed):.6g} but the budget allows "
        f"{unit}={float(total):.6g} (per node: {', '.join(rows)})",
        f"lower the fixed cost of {worst} (or use weight=), or raise the budget",
    )


def _check_budget(ctx: PlanContext, source: str, cost: Cost, mode: Mode) -> None:
    b = ctx.plan.budget
    ok = True
    if ctx.basic:
        assert isinstance(b, ApproxDP)
        ok = cost.basic_eps is not None and cost.basic_eps <= b.epsilon and cost.basic_delta <= b.delta
    elif isinstance(b, PureDP):
        ok = cost.pure_eps is not None and cost.pure_eps <= b.epsilon
    elif isinstance(b, ZCDP):
        ok = cost.rho <= b.rho and cost.delta0 == 0
    elif isinstance(b, ApproxZCDP):
        ok = cost.rho <= b.rho and cost.delta0 <= b.delta
    else:
        pure_ok = cost.pure_eps is not None and cost.pure_eps <= b.epsilon  # exact: valid at every delta
        if b.delta == 0 or pure_ok:
            ok = pure_ok
        else:
            eps, delta = approx_dp_target(b)
            ok = approx_dp_epsilon(cost, delta) <= eps
    if not ok:
        raise BudgetError(source, f"the composed cost {cost.total_measure().describe()} exceeds the budget "
                          f"{b.describe()}", "lower the fixed costs or raise the budget")
