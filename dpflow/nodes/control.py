"""Control: ``Recurse`` (a statically bounded loop whose body is a sub-plan) and the
stand-in nodes its body is traced with.

The planner charges the worst case: every one of the ``times`` rounds runs, and
round k's mechanisms get ``round_weights[k]`` times their weight.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import attrs

from dpflow.domains import integral
from dpflow.errors import PlanTypeError
from dpflow.handles import Released, Rows, Sensitive, Value
from dpflow.nodes.base import EvalContext, InferContext, Node, SubPlan
from dpflow.nodes.types import Inferred, VType


@attrs.frozen(kw_only=True)
class Input(Node):
    """Stand-in for the sensitive rows a ``Recurse`` body works on."""

    kind: ClassVar[str] = "Input"


@attrs.frozen(kw_only=True)
class State(Node):
    """Stand-in for the released state a ``Recurse`` body receives."""

    kind: ClassVar[str] = "State"


@attrs.frozen(kw_only=True)
class Round(Node):
    """Stand-in for the public round index (0, 1, ...) of a ``Recurse`` body."""

    kind: ClassVar[str] = "Round"


def _weights(x: Any) -> tuple[float, ...] | None:
    if x is None:
        return None
    w = tuple(float(v) for v in x)
    if any(not (v > 0 and v < float("inf")) for v in w):
        raise ValueError("round weights must be finite and positive")
    return w


@attrs.frozen(kw_only=True)
class Recurse(Node):
    """Run ``body`` ``times`` times on the same rows, threading a released state.

    Built with :func:`recurse`.  Privacy: sequential composition over all rounds
    (Bun-Steinke 2016 Lemma 1.7), charged for the static bound.
    """

    kind: ClassVar[str] = "Recurse"
    reference: ClassVar[str] = "sequential composition over a static number of rounds (Bun-Steinke 2016 Lemma 1.7)"
    times: int = attrs.field(converter=integral)
    body: SubPlan
    round_weights: tuple[float, ...] | None = attrs.field(default=None, converter=_weights)

    def __attrs_post_init__(self) -> None:
        if self.times < 1:
            raise ValueError(f"Recurse needs times >= 1, got {self.times}")
        if self.round_weights is not None and len(self.round_weights) != self.times:
            raise ValueError(f"round_weights has {len(self.round_weights)} entries for {self.times} rounds")

    def weight_of_round(self, k: int) -> float:
        """Budget multiplier of round k."""
        return 1.0 if self.round_weights is None else self.round_weights[k]

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        raise PlanTypeError(ctx.node_id, "Recurse is typed by the planner", "report this as a dpflow bug")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        raise PlanTypeError(ctx.node_id, "Recurse is run by the interpreter", "report this as a dpflow bug")


Body = Callable[[Sensitive[Rows], Released[Any], Released[Any]], Released[Any]]


def recurse(
    data: Sensitive[Rows],
    init: Released[Any],
    body: Body,
    times: int,
    round_weights: Sequence[float] | None = None,
) -> Released[Value]:
    """Trace ``body(rows, state, round)`` into a sub-plan and loop it ``times`` times.

    The body may only use its three arguments (and public constants it creates
    with ``rows.builder.public``); it returns the next state.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=2), n=100)
    >>> def step(rows, state, k):
    ...     return dp.nodes.GaussianMech()(dp.nodes.Mean()(dp.nodes.Clip(radius=1.0)(rows)))
    >>> last = dp.nodes.recurse(X, b.public([0.0, 0.0]), step, times=3)
    """
    child = data.builder.child()
    rows: Sensitive[Rows] = Sensitive(child.add(Input(), ()), child)
    state: Released[Any] = Released(child.add(State(), ()), child)
    k: Released[Any] = Released(child.add(Round(), ()), child)
    out = body(rows, state, k)
    if not isinstance(out, Released):
        raise PlanTypeError("recurse", "the body must return a released value (the next state)",
                            "return the output of a mechanism or of post-processing")
    if out.builder is not child:
        raise PlanTypeError(out.id, "the body returned a handle from outside its sub-plan",
                            "pass outer values in through the state")
    sub: SubPlan = child.freeze(out.id)
    node = Recurse(times=times, body=sub, round_weights=round_weights)
    return Released(data.builder.add(node, (data.id, init.id)), data.builder)
