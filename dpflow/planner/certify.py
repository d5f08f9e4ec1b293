"""The planner: certify a plan without reading data.

Steps: (0) validate the plan, whatever built it (builder, ``Plan(...)``, JSON): sources
declared once and only at the top level, one ``Input`` and one ``State`` per control
body, outputs and node parameters released (``validate``); (1) infer every node's static type
(domain, public size, sensitivity) in topological order, recursing into control bodies
(``infer``); (2) fold the per-record structure of every source (reuse adds, index splits take the
max, value partitions take the max under add/remove and the two largest under replace, rounds of a
``Repeat`` add, a ``PartitionTree`` charges a record's paths) (``fold``); (3) choose the accounting mode
(``modes``) and allocate the budget to mechanisms by weight, exactly (``fractions.Fraction``), after fixed-cost
mechanisms (``allocate``); (4) fold the mechanisms' certified costs the same way and check them against the
budget; (5) write the ledger (``render``).  This module runs the steps in order.

Allocation never lands above the budget: shares are exact fractions of the
remaining budget, folded shares equal it exactly, and every mechanism's
realised cost is at most its share (noise scales are rounded up).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import attrs

from dpflow._version import __version__
from dpflow.nodes.base import SubPlan
from dpflow.nodes.postprocess import PredictedError, warning_text
from dpflow.nodes.types import Allocation
from dpflow.plan.graph import Plan
from dpflow.planner.accuracy import noise_calibrations
from dpflow.planner.allocate import (
    InvocationTable,
    _check_budget,
    allocate_budget,
    cost_leaf,
    invocation_table,
    lattice_covered,
    pld_total,
    run_cost,
    source_cost,
    zcdp_total,
)
from dpflow.planner.context import PlanContext
from dpflow.planner.infer import TypedScope, _source_name, _spaces
from dpflow.planner.ledger import Ledger
from dpflow.planner.modes import Accounting, ModeChoice, _gdp_valid, _refuse_impure, mode_and_total
from dpflow.planner.render import (
    _NO_GDP_TEXT,
    _NO_PLD_TEXT,
    _composition_notes,
    _composition_tree,
    _entries,
    _report_delta,
    _source_total,
)

__all__ = ["Accounting", "Certified", "InvocationTable", "ModeChoice", "TypedScope", "certified", "certify",
           "clear_certificates"]


@attrs.frozen(eq=False)
class Certified:
    """A certified plan: the plan, its typed scopes, the budget allocations and the ledger.

    ``space`` is the typed top-level :class:`TypedScope` (loop bodies in ``space.bodies``).
    ``allocations`` is keyed by node path (``repeat_4/b1.gaussian_mech_3`` inside a Repeat body,
    where the share is per unit round weight); ``invocations`` has the allocation of every invocation
    (round weights applied), which is what the interpreter uses.
    """

    plan: Plan
    space: TypedScope
    allocations: dict[str, Allocation]
    ledger: Ledger
    invocations: InvocationTable


class _Planner:
    """One certification: the plan's context (validated and typed on construction), then the steps
    in order (:meth:`certify`)."""

    def __init__(self, plan: Plan, exact_noise: bool = False) -> None:
        self.ctx = PlanContext.of(plan, exact_noise)

    def mode_and_total(self) -> ModeChoice:
        """The accounting mode and the total shared by weight (:func:`~dpflow.planner.modes.mode_and_total`)."""
        return mode_and_total(self.ctx, pld_total, zcdp_total)

    def certify(self) -> Certified:
        ctx = self.ctx
        choice = self.mode_and_total()
        mode, total, alloc_text = choice.accounting.mode, choice.total, choice.text
        if choice.accounting is Accounting.PURE:
            _refuse_impure(ctx)
        allocations, warnings = allocate_budget(ctx, choice)
        warnings.extend(dict.fromkeys(w for sp in _spaces(ctx.space) for rec in sp.order
                                      if (w := warning_text(rec.node))))

        leaf = cost_leaf(ctx, allocations)
        totals = []
        report_delta = _report_delta(ctx)
        gdp_valid = _gdp_valid(choice.accounting, ctx.mechs, ctx.exact_noise)
        gdp_dropped = pld_missing = False
        covered = lattice_covered(ctx, allocations)
        for src in ctx.sources:
            name = _source_name(src)
            cost = source_cost(ctx, src, leaf)
            certified = run_cost(cost, gdp_valid, covered)
            gdp_dropped |= bool(cost.gdp_mu2) and certified.gdp_mu2 is None
            cost = certified
            pld_missing |= cost.pld is None
            _check_budget(ctx, name, cost, mode)
            totals.append(_source_total(ctx, name, cost, mode, total, report_delta, gdp_valid))
        ledger = Ledger(
            plan_name=ctx.plan.name,
            plan_hash=ctx.plan.hash,
            dpflow_version=__version__,
            neighbors=ctx.relation,
            budget=ctx.plan.budget.describe(),
            allocation=alloc_text,
            report_delta=report_delta,
            entries=tuple(_entries(ctx, ctx.space, allocations, mode)),
            totals=tuple(attrs.evolve(t, composition=_composition_tree(ctx.space, src.id, leaf))
                         for t, src in zip(totals, ctx.sources, strict=True)),
            composition=tuple(_composition_notes(ctx) + ([_NO_GDP_TEXT] if gdp_dropped else [])
                              + ([_NO_PLD_TEXT] if pld_missing else [])),
            warnings=tuple(warnings),
            predictions=tuple(rec.node.prediction() for sp in _spaces(ctx.space) for rec in sp.order
                              if isinstance(rec.node, PredictedError)),
        )
        invocations = invocation_table(ctx, allocations)
        ledger = attrs.evolve(ledger, noise_calibrations=noise_calibrations(ctx.space, invocations))
        return Certified(ctx.plan, ctx.space, allocations, ledger, invocations)


def certify(plan: Plan, exact_noise: bool = False) -> Certified:
    """Certify ``plan``: infer, allocate, compose and write the ledger (no data is read).

    ``exact_noise``: the certificate is for a noise source that draws exact discrete noise (``SecureNoise``,
    ``SeededNoise(exact=True)``; :func:`dpflow.run` passes the source's ``exact`` flag).  Then no Gaussian
    mechanism is certified through the exact Gaussian-DP profile or the Gaussian privacy loss distribution,
    both proven for continuous noise only: an ``ApproxDP`` budget on a plan with Gaussian mechanisms is
    accounted in zCDP (CKS conversion; Canonne-Kamath-Steinke 2020 Thm 4 gives the discrete Gaussian the
    continuous one's rho), and basic accounting calibrates each Gaussian by that conversion.  Without it
    (the default, the noise-agnostic preview of ``Plan.check``) such plans keep the tighter accountings and
    their Gaussian mechanisms draw continuous noise.

    >>> import dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=2), n=100)
    >>> c = certify(b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))))
    >>> c.allocations["gaussian_mech_3"].share
    Fraction(1, 2)
    """
    return _Planner(plan, exact_noise).certify()


CACHE_SIZE = 256
"""Certificates kept by :func:`certified` (least recently used dropped first)."""
_CACHE: OrderedDict[tuple[str, bool, tuple[int, ...]], Certified] = OrderedDict()


def _callables(records: Any) -> tuple[int, ...]:
    """Identities of the Python functions the nodes hold (``Apply(fn=...)``): the plan JSON names a
    function but cannot hold it, so two plans with one hash may differ in them."""
    out: list[int] = []
    for rec in records:
        for f in attrs.fields(type(rec.node)):
            v = getattr(rec.node, f.name)
            if isinstance(v, SubPlan):
                out.extend(_callables(v.records))
            elif callable(v) and not isinstance(v, type):
                out.append(id(v))
    return tuple(out)


def certified(plan: Plan, exact_noise: bool = False) -> Certified:
    """:func:`certify`, cached by the plan's content hash, the noise it is certified for (``exact_noise``)
    and the identity of any function its nodes hold: running one plan again, or an equal plan built again,
    skips planning.  A certificate depends on nothing but the plan and ``exact_noise`` (no data, no clock),
    so a cached one is the one :func:`certify` would write.
    :func:`clear_certificates` empties the cache.

    >>> import dpflow as dp
    >>> from dpflow import nodes as N
    >>> def plan() -> dp.Plan:
    ...     b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    ...     return b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2), n=9)))))
    >>> certified(plan()) is certified(plan())
    True
    """
    key = (plan.hash, exact_noise, _callables(plan.records))
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    out = certify(plan, exact_noise)
    _CACHE[key] = out  # the cached plan holds the functions, so their identities are not reused
    while len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    return out


def clear_certificates() -> None:
    """Empty :func:`certified`'s cache (tests that patch a privacy rule call this)."""
    _CACHE.clear()
