"""The state one certification shares across its steps: the plan, its validated typed scope, its
mechanisms and sources, and the memo of per-invocation costs."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import attrs

from dpflow.nodes import Mechanism, NodeRecord, Source
from dpflow.nodes.types import Allocation, Mode, Relation, StatT
from dpflow.plan.graph import Plan
from dpflow.planner.infer import TypedScope, _key, _mechanisms, _source_of
from dpflow.planner.validate import _validated_space
from dpflow.privacy.ratio import ONE, share_at_ratio


@attrs.frozen(eq=False)
class PlanContext:
    """One plan being certified: validated and typed on construction (:meth:`of`), before any budget
    is looked at.

    >>> import dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=2), n=100)
    >>> ctx = PlanContext.of(b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))))
    >>> [rec.id for _, rec, _ in ctx.mechs], [rec.id for rec in ctx.sources]
    (['gaussian_mech_3'], ['source_0'])
    """

    plan: Plan
    relation: Relation
    space: TypedScope
    mechs: list[tuple[TypedScope, NodeRecord, Mechanism]]
    sources: list[NodeRecord]
    basic: bool
    exact_noise: bool = False
    """The run draws exact discrete noise (``NoiseSource.exact``): no accounting that needs continuous
    Gaussian noise (the exact Gaussian-DP profile, the Gaussian PLD) is chosen for a Gaussian mechanism."""
    classes: list[tuple[str, int, str]] = attrs.field(init=False)
    """Per mechanism of ``mechs``: its ledger key, the index of its class (equal mechanisms on one source; they get
    equal shares) and its source name, fixed for the plan: see ``allocate.allocate_budget``."""
    invocations: dict[tuple[int, int, int], tuple[Allocation, Allocation]] = attrs.field(factory=dict, init=False)
    """Invocation allocations by (identity of the allocation per unit round weight, round weight), each with
    that allocation: see ``allocate._invocation``."""
    memo: dict[tuple[int, int], tuple[Allocation, Fraction, Allocation]] = attrs.field(factory=dict, init=False)
    """The same by the identities of the allocation and of the round-weight object a fold passes (no Fraction
    arithmetic when a fold asks again), each with both objects."""
    folds: dict[str, dict[str, tuple[Fraction, Fraction]]] = attrs.field(factory=dict, init=False)
    """Per budget unit, every source's folded fixed shares and weights: see ``allocate.source_folds``."""
    one_sided: bool = attrs.field(init=False)
    """Whether some mechanism may be charged a one-sided cost below its full cost (its statistic has one-sided
    sensitivities, :attr:`~dpflow.nodes.types.StatT.one_sided`, under replace-one in automatic accounting): when
    not, the folds skip :func:`one_sided_ratio` altogether."""

    def __attrs_post_init__(self) -> None:
        index: dict[tuple[Mechanism, str], int] = {}
        object.__setattr__(self, "classes", [
            (_key(sp, rec.id), index.setdefault((node, source), len(index)), source)
            for sp, rec, node in self.mechs for source in (_source_of(sp, rec),)])
        object.__setattr__(self, "one_sided", self.relation == "replace" and not self.basic and any(
            getattr(sp.types[rec.inputs[0]], "one_sided", None) is not None for sp, rec, _ in self.mechs))

    @classmethod
    def of(cls, plan: Plan, exact_noise: bool = False) -> PlanContext:
        """Validate and type ``plan`` (:func:`~dpflow.planner.validate._validated_space`)."""
        space = _validated_space(plan)
        return cls(plan=plan, relation=plan.neighbors, space=space, mechs=_mechanisms(space),
                   sources=[r for r in space.order if isinstance(r.node, Source)],
                   basic=plan.accounting == "basic", exact_noise=exact_noise)


def one_sided_ratio(ctx: PlanContext, space: TypedScope, rec: NodeRecord) -> Fraction:
    """The one-sided ratio the planner charges mechanism ``rec`` (of ``space``): its own
    (:meth:`~dpflow.nodes.base.Mechanism.one_sided_ratio` of its input) under replace-one neighbours in automatic
    accounting; 1 otherwise (add/remove neighbours have no replacement to split; basic accounting calibrates each
    mechanism to its own (epsilon, delta), which a one-sided change is not charged below).

    >>> import dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> inside, _ = N.split(N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2), n=100)),
    ...                     N.PartitionByBall(center=(0.0, 0.0), radius=0.5))
    >>> ctx = PlanContext.of(b.build(s=N.GaussianMech()(N.Sum()(inside))))
    >>> [one_sided_ratio(ctx, sp, rec) for sp, rec, _ in ctx.mechs]
    [Fraction(1, 2)]
    """
    node = rec.node
    if not ctx.one_sided or not isinstance(node, Mechanism):
        return ONE
    stat = space.types[rec.inputs[0]]
    assert isinstance(stat, StatT)
    return ONE if stat.one_sided is None else node.one_sided_ratio(stat)


def one_sided_factor(ctx: PlanContext, mode: Mode) -> Callable[[TypedScope, NodeRecord], Fraction] | None:
    """Each mechanism's one-sided factor in ``mode`` units: ``privacy.ratio.share_at_ratio`` of a unit share at its
    :func:`~dpflow.planner.context.one_sided_ratio`, which bounds its one-sided cost over its share
    (:meth:`~dpflow.nodes.base.Mechanism.one_sided_cost`), so the shares folded with it are within the budget;
    ``None`` when every factor is 1 (:attr:`PlanContext.one_sided`)."""
    if not ctx.one_sided:
        return None

    def factor(sp: TypedScope, rec: NodeRecord) -> Fraction:
        ratio = one_sided_ratio(ctx, sp, rec)
        return ONE if ratio == 1 else share_at_ratio(ONE, ratio, mode)

    return factor
