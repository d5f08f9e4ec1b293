"""Symbolic handles: what plan-building code holds instead of data.

Two kinds of handles flow along the edges of a plan, and mypy tells them apart:

* :class:`Sensitive` values come from private data and are not yet released.  They
  can only flow into a transformation (another ``Sensitive``) or a mechanism (a
  ``Released`` value, at a privacy cost).
* :class:`Released` values are outputs of mechanisms or public constants; they
  flow anywhere: post-processing, parameters of later nodes, the report.

The type parameter says what the handle stands for (:class:`Rows` of a dataset,
a :class:`Stat` aggregate, the :class:`Pieces` of a split, or a released
:class:`Value`).  Handles are made by the plan builder; user code never
constructs them directly.

>>> import dpflow as dp
>>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
>>> X = b.source("X", dp.Vectors(d=2), n=100)
>>> type(X).__name__
'Sensitive'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import attrs

if TYPE_CHECKING:
    from dpflow.nodes.base import Node, SubPlan
    from dpflow.privacy import Measure


class Rows:
    """Phantom type: the rows of a (sensitive) dataset."""


class Stat:
    """Phantom type: a sensitive aggregate (a sum, a mean, a histogram ...)."""


class Pieces:
    """Phantom type: a dataset split into disjoint pieces."""


class Value:
    """Phantom type: a released value (array, scalar, tuple of arrays)."""


T = TypeVar("T", covariant=True)


class Builder(Protocol):
    """What a handle needs from the plan builder that made it."""

    budget: Measure
    """The plan's total budget (public: estimators pick a mechanism's noise family from it)."""

    def add(self, node: Node, inputs: tuple[str, ...]) -> str:
        """Add ``node`` with positional ``inputs`` (node ids); return its id."""
        ...

    def child(self) -> Builder:
        """A fresh builder for a sub-plan (the body of a control node)."""
        ...

    def freeze(self, output: str) -> SubPlan:
        """The nodes added so far, as a sub-plan with ``output`` as its result."""
        ...

    def public(self, value: Any) -> Released[Value]:
        """A public constant, released by definition."""
        ...


@attrs.frozen(eq=False)
class Sensitive(Generic[T]):
    """A value derived from private data and not yet released."""

    id: str
    builder: Builder = attrs.field(repr=False)


@attrs.frozen(eq=False)
class Released(Generic[T]):
    """A released (or public) value: free to use anywhere."""

    id: str
    builder: Builder = attrs.field(repr=False)


@attrs.frozen
class Ref:
    """A node parameter that refers to a released value of the same plan."""

    id: str


def param(x: Any) -> Any:
    """Converter for node parameters: a ``Released`` handle becomes a :class:`Ref`.

    A ``Sensitive`` handle in a parameter slot is refused: parameters are public.

    >>> param(2.0)
    2.0
    """
    if isinstance(x, Released):
        return Ref(x.id)
    if isinstance(x, Sensitive):
        from dpflow.errors import PostProcessingError

        raise PostProcessingError(
            x.id,
            "a sensitive value was passed as a node parameter; parameters must be public or released",
            "release it through a mechanism first (e.g. GaussianMech) and pass the released handle",
        )
    return x
