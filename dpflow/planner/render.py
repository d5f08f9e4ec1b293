"""Ledger rendering: the entries, their composition rules and notes, the per-source totals and the
composition trees, from the typed scopes and the allocations."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction

import attrs

from dpflow.nodes import Mechanism, NodeRecord, Piece
from dpflow.nodes.base import text_of
from dpflow.nodes.control import Control, PartitionTree, Repeat
from dpflow.nodes.types import Allocation, Mode, PiecesT, RowsT, SplitRule, StatT, VType
from dpflow.planner.context import PlanContext, one_sided_ratio
from dpflow.planner.fold import CostLeaf, _body_start, _fold, _round_weights, tree_cones
from dpflow.planner.infer import TypedScope, _key, _spaces
from dpflow.planner.ledger import (
    Charge,
    Composition,
    CostEvent,
    LedgerEntry,
    Parallel,
    Rounds,
    Sequential,
    SourceTotal,
    Tree,
)
from dpflow.privacy import ApproxDP, ApproxZCDP, Cost
from dpflow.privacy.ratio import ONE, RATIO_REFERENCE
from dpflow.privacy.rounding import up
from dpflow.references import spec

REF_SEQ = "sequential composition (Bun-Steinke 2016 Lemma 1.7; Dwork-Roth 2014 Thm 3.16)"
REF_PAR = "parallel composition over disjoint pieces (McSherry 2009, PINQ)"
_VALUE_REPLACE = "worst of one piece in full and two pieces one-sided (replace-one)"


def _conversion_delta(ctx: PlanContext, cost: Cost, delta: float) -> float:
    """The delta of the (eps, delta) totals: the plan's, or, when the mechanisms' own delta0 already
    uses all of it, delta0 plus the plan's reporting delta (default 1e-6), rounded up."""
    if Fraction(delta) > cost.delta0:
        return delta
    extra = ctx.plan.report_delta if ctx.plan.report_delta is not None else 1e-6
    return up(float(cost.delta0) + extra)


def _report_delta(ctx: PlanContext) -> float:
    b = ctx.plan.budget
    if isinstance(b, (ApproxDP, ApproxZCDP)) and b.delta > 0:
        return float(b.delta)
    return ctx.plan.report_delta if ctx.plan.report_delta is not None else 1e-6


def _source_total(ctx: PlanContext, name: str, cost: Cost, mode: Mode, total: Fraction, delta: float,
                  gdp_valid: bool) -> SourceTotal:
    """The per-source totals; the exact Gaussian-DP accounting only when ``gdp_valid`` (see
    :func:`~dpflow.planner.modes._gdp_valid`)."""
    if not gdp_valid and cost.gdp_mu2 is not None:
        cost = attrs.evolve(cost, gdp_mu2=None)
    used = cost.rho if mode == "zcdp" else (cost.pure_eps or Fraction(0))
    if ctx.basic:
        used = cost.basic_eps or Fraction(0)
    return SourceTotal(
        source=name,
        cost=cost,
        used=used / total if total > 0 else Fraction(0),
        conversions=tuple(cost.epsilon_at(_conversion_delta(ctx, cost, delta))),
    )


def _rule_text(ctx: PlanContext, space: TypedScope, rec: NodeRecord) -> str:
    parts = []
    cur = rec.inputs[0]
    parents, records = space.parents, space.records
    while cur in parents:
        node = records[cur].node
        if isinstance(node, Piece):
            split_id = parents[cur]
            pt = space.types[split_id]
            assert isinstance(pt, PiecesT)
            if pt.rows.stability > 1:
                parts.append(f"piece {node.index} of {space.path}{split_id}: sequential (a record has "
                             f"{pt.rows.stability} rows, which may lie in different pieces)")
            else:
                how = ("max over index blocks" if pt.rule is SplitRule.INDEX
                       else (_VALUE_REPLACE if ctx.relation == "replace" else "max"))
                parts.append(f"piece {node.index} of {space.path}{split_id}: parallel, {how}")
        cur = parents[cur]
    src_t = space.types[rec.inputs[0]]
    source = src_t.source if isinstance(src_t, (StatT, RowsT)) else "?"
    head = f"sequential on source {source}"
    if space.path:
        head += f"; in every round of {space.path.rstrip('/')} (x round weight, all rounds charged)"
    return "; ".join([head] + parts)


def _entries(ctx: PlanContext, space: TypedScope, allocations: dict[str, Allocation],
             mode: Mode, in_loop: bool = False) -> list[LedgerEntry]:
    """The ledger entries of ``space`` and of its control bodies; ``in_loop``: inside a ``Repeat`` body (costs are
    then per unit round weight; a ``PartitionTree`` body alone runs every time at its one allocation)."""
    out: list[LedgerEntry] = []
    described: dict[str, str] = {}  # every node's output, described once (its readers list it as an input)

    def describe(nid: str) -> str:
        if nid not in described:
            described[nid] = _describe(space.types[nid])
        return described[nid]

    for rec in space.order:
        node = rec.node
        key = _key(space, rec.id)
        t = space.types[rec.id]
        ins = ", ".join(describe(i) for i in rec.inputs)
        sens, noise, rule = "", "", ""
        event = None
        deriv = space.derivations[rec.id]
        if isinstance(node, Mechanism):
            stat = space.types[rec.inputs[0]]
            assert isinstance(stat, StatT)
            alloc = allocations[key]
            sens = deriv
            ratio = one_sided_ratio(ctx, space, rec)
            if ratio is not ONE:
                sens += f"; a record entering or leaving the piece: at most {float(ratio):.6g} x that (one-sided)"
            deriv = space.derivations[rec.inputs[0]]
            noise = node.noise_text(stat, alloc.share, alloc.mode)
            if alloc.continuous_gaussian:  # never in a certificate for exact sources
                noise += " (this certificate uses the exact Gaussian-DP profile: continuous noise on every source)"
            event = CostEvent(key, node.kind, alloc.mode, alloc.share, alloc.cost, in_loop,
                              alloc.continuous_gaussian, "basic" if ctx.basic else "auto")
            rule = _rule_text(ctx, space, rec)
        elif isinstance(t, StatT):
            sens = f"l2 {text_of(t.l2)}; l1 {text_of(t.l1)}; linf {text_of(t.linf)}"
        out.append(LedgerEntry(node=key, kind=node.kind, input=ins, output=describe(rec.id), sensitivity=sens,
                               derivation=deriv, noise=noise, rule=rule, reference=str(type(node).reference),
                               event=event))
        if isinstance(node, Control):
            out.extend(_entries(ctx, space.bodies[rec.id], allocations, mode, in_loop or isinstance(node, Repeat)))
    return out


def _composition_notes(ctx: PlanContext) -> list[str]:
    notes = [f"per source, mechanisms reading the same records compose by {REF_SEQ}"]
    has_index = has_value = has_rec = has_tree = False
    for sp in _spaces(ctx.space):
        for rec in sp.order:
            t = sp.types[rec.id]
            if isinstance(t, PiecesT):
                has_index |= t.rule is SplitRule.INDEX
                has_value |= t.rule is SplitRule.VALUE
            has_rec |= isinstance(rec.node, Repeat)
            has_tree |= isinstance(rec.node, PartitionTree)
    if has_index:
        notes.append(f"index splits: a record stays in its block, so pieces take the max ({REF_PAR})")
    if has_value:
        how = ("a replaced record changes one piece within, or leaves one piece and enters another: the worst of "
               f"one piece's full cost and two pieces' one-sided costs ({RATIO_REFERENCE})"
               if ctx.relation == "replace" else "one record is in one piece: max")
        notes.append(f"value partitions: {how} ({REF_PAR}; {spec('accounting.md', '1.5')})")
    if has_rec:
        notes.append("Repeat: every round up to the static bound is charged, round k at its round weight")
    if has_tree:
        notes.append("PartitionTree: a record's root-to-leaf path is charged, up to the depth bound (two paths under "
                     "replace-one, one-sided below the piece where they part), from one certificate of the body")
    return notes


_NO_GDP_TEXT = ("no exact Gaussian-DP conversion: this allocation lets exact noise sources (SecureNoise) draw the "
                "discrete Gaussian, which has the same rho-zCDP (Canonne-Kamath-Steinke 2020 Thm 4) but no proven "
                "Gaussian-DP profile; an ApproxDP budget on an all-Gaussian plan uses that conversion (and continuous "
                "noise) only in a certificate for continuous sources (SeededNoise; certify(plan) without exact_noise)")


_NO_PLD_TEXT = ("no privacy-loss-distribution (PLD) figure for a source with: a generic "
                "zCDP event, group privacy, or more distinct events than the PLD layer composes; that source's "
                "totals fall back to the zCDP (CKS) and other conversions (dpflow.privacy.pld)")


_NOTHING = Sequential(())


def _composition_tree(space: TypedScope, start: str, leaf: CostLeaf, mult: Fraction = Fraction(1)) -> Composition:
    """The composition tree below ``start``: the structure :func:`~dpflow.planner.fold.fold_cost` composes, with each
    mechanism charged ``leaf``'s costs at its round weight (parts that charge nothing are left out, a
    one-part sequence is its part: neither changes the composed cost)."""
    def seq(parts: Sequence[Composition]) -> Composition:
        kept = tuple(p for p in parts if not (isinstance(p, Sequential) and not p.parts))
        return kept[0] if len(kept) == 1 else Sequential(kept)

    def rec_fn(sp: TypedScope, rec: NodeRecord) -> Composition:
        node = rec.node
        body = sp.bodies[rec.id]
        if isinstance(node, PartitionTree):
            split, leaves = (_fold(body, _body_start(body), masked(charge, m), masked(rec_fn, m), seq, par)
                             for m in tree_cones(node))
            return Tree(_key(sp, rec.id), node.depth(), len(node.parts), split, leaves)
        assert isinstance(node, Repeat)
        return seq([Rounds(_key(sp, rec.id), w, count, _composition_tree(body, _body_start(body), leaf, mult * w))
                    for w, count in sorted(_round_weights(node).items())])

    def par(parts: Sequence[Composition], rule: SplitRule) -> Composition:
        kept = tuple(p for p in parts if not (isinstance(p, Sequential) and not p.parts))
        return Parallel(rule, kept) if kept else _NOTHING

    def charge(sp: TypedScope, r: NodeRecord) -> Composition:
        pair = leaf(sp, r, mult)
        return Charge(_key(sp, r.id), pair.both, None if pair.one is pair.both else pair.one)

    def masked(fn: Callable[[TypedScope, NodeRecord], Composition],
               mask: frozenset[str]) -> Callable[[TypedScope, NodeRecord], Composition]:
        return lambda sp, r: fn(sp, r) if r.id in mask else _NOTHING

    return _fold(space, start, charge, rec_fn, seq, par)


def _describe(t: VType) -> str:
    if isinstance(t, RowsT):
        return t.describe()
    if isinstance(t, PiecesT):
        return f"{t.count} pieces by {t.rule.value} of ({t.rows.describe()})"
    if isinstance(t, StatT):
        return f"statistic {t.shape} of source {t.source}"
    return "released" + ("" if t.shape is None else f" {t.shape}")
