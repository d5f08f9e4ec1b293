"""The planner's speed-ups change nothing that is certified (issue 16: 10,000-node plans in under a second).

Each test pins one shortcut against the plain computation it replaces: the compiled fold program (one-input
sequential steps passed on) against a walk of every step; the identity-keyed invocation memo against the
mechanism's own cost at the invocation's share; the per-mechanism calibrators with their shared scale memo
against :func:`~dpflow.planner.accuracy.calibrate` per invocation; the cached calibrations against the uncached
ones; ``exact``'s and ``Sym``'s fast paths against their general paths.  ``benchmarks/planner_ledgers.py``
checks the benchmark plans' ledgers byte for byte.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from contract.examples import EXAMPLES

import dpflow as dp
from dpflow import nodes as N
from dpflow.domains import RowCount, Sym
from dpflow.nodes import Mechanism, NodeRecord
from dpflow.nodes.types import Allocation, SplitRule, StatT
from dpflow.planner.accuracy import calibrate, noise_calibrations
from dpflow.planner.allocate import _invocation
from dpflow.planner.context import PlanContext
from dpflow.planner.fold import StepKind, _body_start, _fold
from dpflow.planner.infer import TypedScope, _spaces
from dpflow.privacy import calibration
from dpflow.privacy.measures import exact

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from planner import deep_plan, mixed_plan, wide_plan  # noqa: E402


def _plans() -> list[dp.Plan]:
    out = [wide_plan(100), deep_plan(100, times=3), mixed_plan(100)]
    for ex in EXAMPLES.values():
        out.extend(ex.plan(rel)[0] for rel in ex.relations)
    return out


def _walk_every_step(space: TypedScope, start: str) -> str:
    """The fold as it was before the compiled program: every step visited, one-input steps passing on."""
    acc: dict[str, str] = {}
    for tag, rec, kids, groups, rule in space.steps:
        if tag is StepKind.SEQ:
            acc[rec.id] = acc[kids[0]] if len(kids) == 1 else "(" + "+".join(acc[k] for k in kids) + ")"
        elif tag is StepKind.MECH:
            acc[rec.id] = rec.id
        elif tag is StepKind.CONTROL:
            acc[rec.id] = "R" + rec.id
        else:
            assert rule is not None
            parts = ["(" + "+".join(acc[k] for k in g) + ")" for g in groups]
            acc[rec.id] = f"{rule.value}[{'|'.join(parts)}]"
    return acc[start]


@pytest.mark.parametrize("plan", _plans(), ids=lambda p: p.name)
def test_the_compiled_fold_program_composes_what_every_step_does(plan: dp.Plan) -> None:
    ctx = PlanContext.of(plan)

    def seq(parts: Sequence[str]) -> str:
        return "(" + "+".join(parts) + ")"

    def par(parts: Sequence[str], rule: SplitRule) -> str:
        return f"{rule.value}[{'|'.join(parts)}]"

    def leaf(sp: TypedScope, rec: NodeRecord) -> str:
        return rec.id

    def rec_fn(sp: TypedScope, rec: NodeRecord) -> str:
        return "R" + rec.id

    for sp in _spaces(ctx.space):
        starts = [src.id for src in ctx.sources] if sp is ctx.space else [_body_start(sp)]
        for start in starts:
            assert _fold(sp, start, leaf, rec_fn, seq, par) == _walk_every_step(sp, start)


def _weight_products(inv: dp.planner.certify.InvocationTable, path: str, classes: tuple[int, ...],
                     ctx: PlanContext) -> Fraction:
    """The product of the round weights of the loops enclosing ``path`` in weight classes ``classes``."""
    loops = ["/".join(path.split("/")[:i]) for i in range(1, len(path.split("/")))]
    mult = Fraction(1)
    for loop, c in zip(loops, classes, strict=True):
        node = next(rec.node for sp in _spaces(ctx.space) for rec in sp.order if sp.path + rec.id == loop)
        assert isinstance(node, N.Repeat)
        mult *= sorted({Fraction(node.weight_of_round(k)) for k in range(node.times)})[c]
    return mult


@pytest.mark.parametrize("plan", [deep_plan(100, times=4), mixed_plan(100), wide_plan(100)], ids=lambda p: p.name)
def test_every_invocation_costs_what_its_mechanism_says_at_its_share(plan: dp.Plan) -> None:
    """After the PLD search (many allocations made and dropped) the identity-keyed memo returns, for every
    invocation, the unit share times its round weights and the mechanism's own cost at that share."""
    cert = dp.certify(plan)
    ctx = PlanContext.of(plan)
    mechs = {sp.path + rec.id: node for sp, rec, node in ctx.mechs}
    assert cert.invocations.table
    for (path, classes), alloc in cert.invocations.table.items():
        node, unit = mechs[path], cert.allocations[path]
        fixed = node.fixed_share(unit.mode)
        share = unit.share * _weight_products(cert.invocations, path, classes, ctx) if fixed is None else fixed
        assert alloc.share == share and alloc.mode == unit.mode
        assert alloc.cost == node.cost(share, alloc.mode)


def test_the_invocation_memo_tells_equal_shares_of_different_allocations_apart() -> None:
    ctx = PlanContext.of(deep_plan(100, times=2))
    node = N.GaussianMech()
    a = Allocation("zcdp", Fraction(1, 7), node.cost(Fraction(1, 7), "zcdp"))
    b = Allocation("zcdp", Fraction(1, 5), node.cost(Fraction(1, 5), "zcdp"))
    w = Fraction(3)
    assert _invocation(ctx, a, node, w).share == Fraction(3, 7)
    assert _invocation(ctx, b, node, w).share == Fraction(3, 5)
    assert _invocation(ctx, a, node, Fraction(3)).share == Fraction(3, 7)  # an equal weight, another object
    assert _invocation(ctx, a, node, Fraction(1)) is a


@pytest.mark.parametrize("plan", [deep_plan(100, times=4), mixed_plan(100), wide_plan(100)], ids=lambda p: p.name)
def test_accuracy_rows_equal_one_calibration_per_invocation(plan: dp.Plan) -> None:
    cert = dp.certify(plan)
    rows = noise_calibrations(cert.space, cert.invocations)
    stats: dict[str, tuple[Mechanism, StatT]] = {}
    for sp in _spaces(cert.space):
        for rec in sp.order:
            if isinstance(rec.node, Mechanism):
                stat = sp.types[rec.inputs[0]]
                assert isinstance(stat, StatT)
                stats[sp.path + rec.id] = (rec.node, stat)
    assert len(rows) == len(cert.invocations.table)
    classes: dict[str, list[tuple[int, ...]]] = {}  # a node's rows follow its invocations in table order
    for path, cls in cert.invocations.table:
        classes.setdefault(path, []).append(cls)
    seen: dict[str, int] = {}
    for row in rows:
        node, stat = stats[row.node]
        k = seen[row.node] = seen.get(row.node, -1) + 1
        alloc = cert.invocations.at(row.node, classes[row.node][k])
        assert row == calibrate(row.node, row.rounds, node, stat, alloc)


@pytest.mark.parametrize("value", [Fraction(1, 3), Fraction(0), Fraction(10**30, 7)])
def test_the_cached_calibrations_equal_the_uncached_ones(value: Fraction) -> None:
    for cached, plain in ((calibration._laplace_scale, calibration._laplace_scale.__wrapped__),
                          (calibration._pure_eps_for_zcdp, calibration._pure_eps_for_zcdp.__wrapped__),
                          (calibration._bounded_range_eps_for_zcdp,
                           calibration._bounded_range_eps_for_zcdp.__wrapped__)):
        args = (Fraction(2), value) if cached is calibration._laplace_scale else (value,)
        if cached is calibration._laplace_scale and value == 0:
            with pytest.raises(ValueError, match="epsilon must be positive"):
                calibration.laplace_scale(2.0, value)
            continue
        assert cached(*args) == plain(*args)  # type: ignore[operator]
    assert calibration.laplace_scale(0.5, Fraction(1, 4)) == calibration.laplace_scale(Fraction(1, 2), 0.25)


def test_exact_fast_paths_agree_with_the_general_path() -> None:
    q = Fraction(2, 3)
    assert exact(q) is q
    assert exact(0.1) == exact(np.float64(0.1)) == Fraction(0.1)  # np.float64 takes the general path
    assert exact(-0.0) == 0
    for bad, message in ((float("nan"), "finite"), (float("inf"), "finite"), (-1.0, "non-negative"),
                         (Fraction(-1, 2), "non-negative")):
        with pytest.raises(ValueError, match=message):
            exact(bad)
    with pytest.raises(TypeError):
        exact(True)


def test_sym_times_a_constant_keeps_its_factors_and_checks_the_constant() -> None:
    r = Sym.ref(RowCount("x"), -1) * 4.0
    assert r == Sym(4.0, ((RowCount("x"), -1),))
    assert r * 2.5 == r * Sym.const(2.5) == Sym(10.0, r.factors)
    assert r / 2.0 == r / Sym.const(2.0) == Sym(2.0, r.factors)
    assert 3.0 * r == Sym(12.0, r.factors)
    assert r * 1.0 == r
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite and non-negative"):
            r * bad
    with pytest.raises(ZeroDivisionError):
        r / 0.0
