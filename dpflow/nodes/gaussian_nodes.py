"""Nodes added for the Gaussian estimators: a named public parameter that the ledger shows.

Ready-made estimators choose parameters a user cannot know (truncation radii, tail
probabilities, round counts, per-round noise factors) from public quantities only
(n, d, the declared bounds, the budget).  ``Param`` is a public constant like
``Public`` that also carries its name and how it was derived, so the ledger lists
every default next to the nodes that use it.  It reads no data and costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from dpflow.errors import PlanTypeError
from dpflow.nodes.base import EvalContext, InferContext, Inferred, Node, ReleasedT, VType


def _floats(v: Any) -> tuple[float, ...]:
    arr = np.asarray(v, dtype=float).ravel()
    if not np.all(np.isfinite(arr)):
        raise ValueError("a Param must be finite")
    return tuple(float(x) for x in arr)


def _ints(v: Any) -> tuple[int, ...]:
    return tuple(int(x) for x in v)


def _show(values: tuple[float, ...], shape: tuple[int, ...]) -> str:
    if not shape:
        return f"{values[0]:.6g}"
    head = ", ".join(f"{v:.6g}" for v in values[:6])
    return f"[{head}{', ...' if len(values) > 6 else ''}] shape {shape}"


@attrs.frozen(kw_only=True)
class Param(Node):
    """A named public parameter with the public derivation the ledger shows.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> g = param(b, "gamma", 9.4636, "chi_radius(d=50, beta=0.01)")
    >>> b.build(g=g).check().entries[0].derivation
    'gamma = 9.4636 (chi_radius(d=50, beta=0.01))'
    """

    kind: ClassVar[str] = "Param"
    reference: ClassVar[str] = "public parameter computed from public quantities (no privacy cost)"
    name: str
    values: tuple[float, ...] = attrs.field(converter=_floats)
    shape: tuple[int, ...] = attrs.field(converter=_ints)
    why: str = ""

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        if ins:
            raise PlanTypeError(ctx.node_id, "a parameter has no inputs", "remove the inputs")
        if int(np.prod(self.shape, dtype=np.int64)) != len(self.values):
            raise PlanTypeError(ctx.node_id, f"{len(self.values)} values do not fill shape {self.shape}",
                                "pass a rectangular array")
        why = f" ({self.why})" if self.why else ""
        return Inferred(ReleasedT(self.shape), f"{self.name} = {_show(self.values, self.shape)}{why}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        arr = np.asarray(self.values, dtype=float).reshape(self.shape)
        return arr if arr.ndim else float(arr)


def param(builder: Any, name: str, value: Any, why: str = "") -> Any:
    """Add a :class:`Param` to ``builder`` (a plan or Recurse-body builder); return its released handle."""
    from dpflow.handles import Released

    arr = np.asarray(value, dtype=float)
    node = Param(name=name, values=arr, shape=arr.shape, why=why)
    return Released(builder.add(node, ()), builder)
