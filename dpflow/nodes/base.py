"""Node base classes, the contexts nodes are inferred and evaluated in, and the helpers their rules share.

A node is a frozen attrs class holding only public parameters.  Each family
(transform, query, mechanism, post-processing) knows three things about itself,
kept next to each other so a reviewer can check them together:

* ``infer``: from the static types of its inputs, the static type of its output
  (domain, public size, sensitivity) and a derivation a reviewer can check;
* ``evaluate``: the computation on backend values (vectorised numpy);
* for mechanisms, ``cost``: the privacy cost of a given budget share, with the
  result it rests on.

The static types live in :mod:`dpflow.nodes.types`, the parameter converters in :mod:`dpflow.nodes.params`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any, ClassVar, Literal, Protocol

import attrs
import numpy as np

from dpflow.domains import Bound, RowCount, Sym, SymRef
from dpflow.errors import DataError, DomainError, PlanTypeError, PostProcessingError
from dpflow.handles import Ref, Released, Rows, Sensitive, Stat, Value
from dpflow.nodes.types import Allocation, Inferred, Mode, Relation, ReleasedT, RowsT, StatT, VType
from dpflow.noise_protocol import NoiseSource
from dpflow.privacy import Cost
from dpflow.privacy.ratio import ONE, sensitivity_ratio
from dpflow.references import Reference

# --------------------------------------------------------------------------- contexts


class InferContext(Protocol):
    """What a node may ask the planner while inferring."""

    @property
    def relation(self) -> Relation:
        """The plan's neighbouring relation."""
        ...

    @property
    def node_id(self) -> str:
        """Path of the node being inferred."""
        ...

    def type_of(self, ref: Ref) -> VType:
        """The static type of a referenced node."""
        ...

    def row_count(self) -> RowCount:
        """The typed run-time row count of the rows this node outputs (resolved in the node's own scope)."""
        ...

    def infer_body(self, body: SubPlan, bindings: Mapping[type, VType]) -> Mapping[str, VType]:
        """Type the sub-plan ``body`` of a control node, its stand-ins (``Input``, ``State``, ``Round``) bound to
        ``bindings``; the types of its nodes by id.  The planner keeps the typed body for the per-record folds."""
        ...


class Backend(Protocol):
    """The operations on rows that an execution engine provides.

    Everything a node does to the rows is a row map (vectorised over all rows),
    a sum over rows (a tree reduction in a distributed engine), a Gram matrix
    or a histogram over public bins.  Noise is added once, on the driver, to the
    reduced statistic.
    """

    @property
    def name(self) -> str:
        """Short name shown in reports."""
        ...

    def row_map(self, X: Any, fn: Any, overwrite: Any = None) -> Any:
        """Apply a vectorised function to every row of ``X``; ``fn`` returns a new array or a view of its
        argument.  ``overwrite``, if given, is the same map allowed to write into its argument: a backend
        may call it instead on an array that no other value reads."""
        ...

    def tree_sum(self, X: Any) -> np.ndarray:
        """Sum of the rows of ``X``."""
        ...

    def gram(self, X: Any) -> np.ndarray:
        """``X.T @ X``."""
        ...

    def exact_sum(self, X: Any, fn: Any) -> np.ndarray:
        """The exact sum, over blocks of rows of ``X`` that partition them, of ``fn(block)``: an integer
        array (Python ints, object dtype) that is a sum over the block's rows, so the total does not depend
        on the blocks (the fixed-point sums of :mod:`dpflow.nodes.fixedpoint`)."""
        ...

    def histogram(self, values: Any, edges: np.ndarray) -> np.ndarray:
        """Counts of ``values`` over the public bin ``edges`` (out-of-range clipped to end bins)."""
        ...

    def nrows(self, X: Any) -> int:
        """Number of rows (public wherever it is asked)."""
        ...

    def source(self, node: Any, raw: Any, node_id: str, relation: Relation) -> Any:
        """The rows of a ``Source`` node from the raw data the user passed, checked against its public
        schema (``node.checked``) and with its domain policy applied (``node.policy``)."""
        ...

    def sorted_values(self, X: Any, fn: Any) -> np.ndarray:
        """``fn`` maps rows to one value each; those values sorted, on the driver (a distributed engine
        sorts each block where it lies and merges the sorted runs)."""
        ...

    def key_counts(self, X: Any, fn: Any) -> tuple[np.ndarray, np.ndarray]:
        """``fn`` maps rows to one int64 key each; the occupied keys, sorted, and how many rows hold each
        (a distributed engine counts each block where it lies and merges the counts)."""
        ...

    def pair_rows(self, X: Any) -> Any:
        """Rows ``2i`` and ``2i + 1`` side by side, one ``(2d,)`` row per pair (an odd last row dropped)."""
        ...

    def settings(self) -> dict[str, Any]:
        """What the report records about the engine: backend, chunking, number of workers."""
        ...

    def persist(self, X: Any) -> Any:
        """``X`` computed and kept (the interpreter persists a value that several nodes read, so a lazy
        engine computes it once)."""
        ...


class EvalContext(Protocol):
    """What a node may ask the interpreter while evaluating."""

    @property
    def node_id(self) -> str:
        """Path of the node being evaluated."""
        ...

    @property
    def backend(self) -> Backend:
        """The execution engine."""
        ...

    @property
    def noise(self) -> NoiseSource:
        """Where mechanisms draw noise (the one noise protocol, :mod:`dpflow.noise_protocol`)."""
        ...

    def value(self, ref: Ref) -> Any:
        """The run-time value of a referenced released node."""
        ...

    def bound(self, sym: Sym) -> float:
        """Evaluate a bound with the run-time released values and public sizes."""
        ...

    def public_values(self, refs: Sequence[SymRef]) -> dict[SymRef, float]:
        """The run-time public values of typed refs: row counts, norms of released vectors, released scalars."""
        ...

    def allocation(self) -> Allocation:
        """The budget share of the mechanism being evaluated."""
        ...

    def allocation_of(self, ref: Ref) -> tuple[Mechanism, Allocation]:
        """The mechanism that ``ref`` (a node of the current scope) names and the allocation the planner
        certified for its invocation in the current round (a lookup in the certificate)."""
        ...

    def stat(self) -> StatT:
        """The static type (with sensitivities) of the mechanism's input."""
        ...

    def input_type(self, k: int = 0) -> VType:
        """The static type the planner inferred for the node's ``k``-th input."""
        ...

    def data(self, name: str) -> Any:
        """The raw data bound to a source."""
        ...

    def record(self, key: str, value: Any) -> None:
        """Record a run-time fact (a realised noise scale) for the report."""
        ...

    def run_body(self, bindings: Mapping[type, Any], wanted: Sequence[str], env: dict[str, Any] | None = None,
                 round_index: int | None = None) -> dict[str, Any]:
        """Evaluate the nodes of the control node's body that ``wanted`` (ids in the body) need, its stand-ins bound
        to ``bindings`` (``Input``, ``State``, ``Round`` -> value); ``env``, from an earlier call on the same
        bindings, continues that run.  ``round_index``: the round of a loop with round weights (its mechanisms
        then get that round's certified allocation).  Returns the body's values by id."""
        ...


# --------------------------------------------------------------------------- node families


def _field_names_of(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in attrs.fields(cls))


# cached by a call, not a decorator (mutmut does not mutate decorated functions): a node class's fields are fixed,
# and the builder, the planner and every run ask a node for its references
_field_names: Callable[[type], tuple[str, ...]] = functools.lru_cache(maxsize=None)(_field_names_of)


def _ref_fields(node: Any) -> tuple[Ref, ...]:
    return tuple(v for name in _field_names(type(node)) if isinstance(v := getattr(node, name), Ref))


NODE_KINDS: dict[str, type[Node]] = {}
"""Every node class of dpflow by its ``kind`` (filled as the classes are defined; read by the JSON decoder)."""


@attrs.frozen(kw_only=True)
class Node:
    """Base of every node: public parameters only.

    A class of the ``dpflow`` package that sets its own ``kind`` registers itself in ``NODE_KINDS``
    (subclasses elsewhere, such as a test's mutant of ``Mean``, do not: they cannot shadow a kind).
    """

    kind: ClassVar[str] = "Node"
    reference: ClassVar[str | Reference] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" not in cls.__dict__ or not cls.__module__.startswith("dpflow."):
            return
        old = NODE_KINDS.get(cls.kind)
        if old is not None and old.__qualname__ != cls.__qualname__:  # attrs re-creates slotted classes
            raise TypeError(f"node kind {cls.kind!r} is defined twice: {old.__qualname__} and {cls.__qualname__}")
        NODE_KINDS[cls.kind] = cls

    def refs(self) -> tuple[Ref, ...]:
        """Released values this node reads as parameters."""
        return _ref_fields(self)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        """Static type of the output given the static types of the positional inputs."""
        raise PlanTypeError(ctx.node_id, f"{self.kind} has no type rule", "report this as a dpflow bug")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        """Compute the output on backend values."""
        raise PlanTypeError(ctx.node_id, f"{self.kind} cannot be evaluated", "report this as a dpflow bug")


def need(ins: Sequence[VType], cls: type, ctx: InferContext, what: str) -> Any:
    """The single positional input, checked to be of static type ``cls``."""
    if len(ins) != 1:
        raise PlanTypeError(ctx.node_id, f"expects one input, got {len(ins)}", "pass exactly one handle")
    x = ins[0]
    if not isinstance(x, cls):
        got = type(x).__name__.removesuffix("T")
        if cls is ReleasedT:
            raise PostProcessingError(
                ctx.node_id,
                f"post-processing needs a released value but got a sensitive {got}",
                "release the value through a mechanism (GaussianMech, LaplaceMech, ...) first",
            )
        raise PlanTypeError(ctx.node_id, f"expects {what}, got {got}", f"pass {what}")
    return x


def released_type(ref: Ref, ctx: InferContext, slot: str) -> ReleasedT:
    """The static type of a parameter reference, which must be released."""
    t = ctx.type_of(ref)
    if not isinstance(t, ReleasedT):
        raise PostProcessingError(
            ctx.node_id,
            f"parameter {slot!r} refers to {ref.id}, which is not released",
            "pass the output of a mechanism or of public()",
        )
    return t


class Transform(Node):
    """Sensitive rows in, sensitive rows out (row-wise, with a known stability)."""

    def __call__(self, x: Sensitive[Rows]) -> Sensitive[Rows]:
        return Sensitive(x.builder.add(self, (x.id,)), x.builder)


class Query(Node):
    """Sensitive rows in, a sensitive aggregate with a sensitivity out."""

    def __call__(self, x: Sensitive[Rows]) -> Sensitive[Stat]:
        return Sensitive(x.builder.add(self, (x.id,)), x.builder)


class Mechanism(Node):
    """A sensitive aggregate in, a released value out, at a privacy cost.

    ``weight`` is the node's relative share of the plan's budget.
    """

    weight: float
    pure_capable: ClassVar[bool] = False
    """Capability: the cost can be a pure epsilon, so the mechanism can run in pure mode (set on every
    mechanism class; the planner reads it to choose the accounting mode and to refuse pure budgets)."""
    gaussian_profile: ClassVar[bool] = False
    """Capability: the cost is the Gaussian-DP profile of continuous Gaussian noise (mu^2/2-zCDP), so an
    all-Gaussian plan may be certified through the exact Gaussian-DP conversion; under an exact source the
    mechanism draws the discrete Gaussian through ``mechanisms.unit_lattice`` (lattice noise scale at least
    2^40), so its cost's privacy loss distribution is the lattice Gaussian one
    (:class:`~dpflow.privacy.pld.LatticeGaussianPLD`)."""
    bounded_range: ClassVar[bool] = False
    """Capability: at its pure epsilon the mechanism is also epsilon-bounded range (the exponential
    mechanism with the McSherry-Talwar calibration, so report-noisy-max with Gumbel noise), so its zCDP
    cost is epsilon^2/8, not epsilon^2/2 (:func:`~dpflow.privacy.bounded_range_to_zcdp`).  Set only where
    the mechanism's proof is that of the exponential mechanism; the Laplace mechanism and Laplace noisy
    max are not bounded range at their epsilon."""

    def __call__(self, x: Sensitive[Stat]) -> Released[Value]:
        return Released(x.builder.add(self, (x.id,)), x.builder)

    def pure_refusal(self, node_id: str) -> PlanTypeError:
        """The refusal of a pure-mode cost for a mechanism that is not ``pure_capable`` (the one
        statement of that rule; the planner raises it before costing anything).

        >>> from dpflow.nodes import GaussianMech
        >>> GaussianMech().pure_refusal("g").problem
        'GaussianMech is not pure DP (its cost is a Gaussian-DP profile) and cannot meet a pure-DP budget'
        """
        why = "its cost is a Gaussian-DP profile" if self.gaussian_profile else "its cost has a delta"
        return PlanTypeError(node_id, f"{self.kind} is not pure DP ({why}) and cannot meet a pure-DP budget",
                             "use a pure-DP mechanism (LaplaceMech, Peel, Quantile, ...), or a zCDP or "
                             "(epsilon, delta) budget")

    def check_input(self, stat: StatT, ctx: InferContext) -> str:
        """Refuse statically unusable inputs; return the sensitivity text for the ledger."""
        raise PlanTypeError(ctx.node_id, "abstract mechanism", "report this as a dpflow bug")

    def fixed_share(self, mode: Mode) -> Fraction | None:
        """A fixed budget share in ``mode`` units, when the node declares its own cost."""
        return None

    def cost(self, share: Fraction, mode: Mode) -> Cost:
        """The certified cost of running with budget ``share`` (rho in zcdp mode, eps in pure mode)."""
        raise PlanTypeError(self.kind, "abstract mechanism has no cost", "report this as a dpflow bug")

    def one_sided_ratio(self, stat: StatT) -> Fraction:
        """An upper bound ``q`` on how much smaller a one-sided change of ``stat`` is (:attr:`StatT.one_sided`) than
        the sensitivity the noise is calibrated to, for a mechanism whose cost scales with it
        (:meth:`one_sided_cost`); 1 for every other mechanism (a one-sided change is charged in full)."""
        return ONE

    def one_sided_cost(self, share: Fraction, mode: Mode, ratio: Fraction) -> Cost:
        """The certified cost at ``share`` of a change of at most ``ratio`` times the sensitivity, with the same
        noise; at most ``privacy.ratio.share_at_ratio(share, ratio, mode)`` in the share's unit (the planner
        allocates with that bound).  By default the full cost (valid: ``ratio <= 1``)."""
        return self.cost(share, mode)

    def noise_text(self, stat: StatT, share: Fraction, mode: Mode) -> str:
        """The noise distribution and scale, as the ledger shows it."""
        return ""

    noise_unit: ClassVar[str | None] = None
    """Capability: the sensitivity (``"l2"``, ``"l1"``, ``"linf"``) that :meth:`noise_scale` scales, for a
    mechanism that adds noise of a scale calibrated to that sensitivity; ``None`` for mechanisms without
    one (the exponential-mechanism family), which :class:`NoiseScale` refuses."""

    noise_family: ClassVar[Literal["gaussian", "laplace"] | None] = None
    """Capability: the distribution of the additive noise on each released coordinate (``None`` for a
    selection: the exponential-mechanism family, the stability histogram)."""

    accuracy_note: ClassVar[str] = ""
    """What an accuracy interval of the released coordinates leaves out (Peel: its selection step)."""

    def takes_lattice(self, stat: StatT, alloc: Allocation) -> bool:
        """Whether an exact noise source releases this invocation on the 2^-k lattice (exact discrete
        noise); otherwise the noise is continuous on every source.  The one statement of that choice: the
        mechanism's ``evaluate`` and the ledger's accuracy rows both ask it."""
        return False

    def noise_scale(self, sensitivity: float, share: Fraction, mode: Mode) -> float:
        """The noise scale the mechanism uses for a ``noise_unit`` sensitivity at budget ``share``: the one
        statement of its calibration (rounded up so the realised cost is at most the share)."""
        raise PlanTypeError(self.kind, f"{self.kind} adds no noise of a calibrated scale",
                            "report this as a dpflow bug")

    def noise_multiplier(self, share: Fraction, mode: Mode) -> float:
        """The noise scale per unit sensitivity at ``share``: :meth:`noise_scale` at sensitivity 1, what
        ``NoiseScale`` releases.  At sensitivity D the mechanism calibrates D directly (outward-rounded), so
        its scale is D x this multiplier up to that rounding (about 1e-12 relative).

        >>> from dpflow.nodes import GaussianMech
        >>> g, rho = GaussianMech(), Fraction(1, 2)
        >>> g.noise_multiplier(rho, "zcdp") == g.noise_scale(1.0, rho, "zcdp")
        True
        """
        return self.noise_scale(1.0, share, mode)

    def released(self, shape: tuple[int, ...] | None, ctx: InferContext) -> ReleasedT:
        """The static type of this mechanism's output, marked with its path when it has a noise multiplier."""
        return ReleasedT(shape, ctx.node_id if self.noise_unit is not None else None)


class PostProcess(Node):
    """Released values in, a released value out; free."""

    def __call__(self, *xs: Released[Any]) -> Released[Value]:
        if not xs:
            raise PlanTypeError(self.kind, "post-processing needs at least one input", "pass a released handle")
        for x in xs:
            if isinstance(x, Sensitive):
                raise PostProcessingError(
                    x.id,
                    f"{self.kind} is post-processing and was handed a sensitive value",
                    "release it through a mechanism first",
                )
        b = xs[0].builder
        return Released(b.add(self, tuple(x.id for x in xs)), b)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        for x in ins:
            if not isinstance(x, ReleasedT):
                raise PostProcessingError(
                    ctx.node_id,
                    f"{self.kind} is post-processing and was handed a sensitive {type(x).__name__}",
                    "release the value through a mechanism first",
                )
        return Inferred(ReleasedT(self.out_shape([t for t in ins if isinstance(t, ReleasedT)])))

    def out_shape(self, ins: Sequence[ReleasedT]) -> tuple[int, ...] | None:
        """Static output shape, when known."""
        return None


class SquareInput(PostProcess):
    """Post-processing of a released square matrix (its first input) of side at least ``least_side``.  A released
    value's shape is public: another shape is refused at planning when it is known, else at run time
    (:meth:`square`), with ``square_fix`` as the fix."""

    least_side: ClassVar[int] = 1
    square_fix: ClassVar[str] = "pass a released square matrix"

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        shape = ins[0].shape if ins and isinstance(ins[0], ReleasedT) else None
        problem = None if shape is None else square_problem(self.kind, shape, self.least_side)
        if problem is not None:
            raise DomainError(ctx.node_id, problem, self.square_fix)
        return super().infer(ins, ctx)

    def square(self, x: Any, ctx: EvalContext) -> np.ndarray:
        """The released matrix ``x`` as floats, non-finite entries as 0 (:func:`finite_or_zero`), checked square."""
        M = finite_or_zero(x)
        problem = square_problem(self.kind, M.shape, self.least_side)
        if problem is not None:
            raise DataError(ctx.node_id, problem, self.square_fix)
        return M


# --------------------------------------------------------------------------- helpers for rules


def sym_max(a: Bound, b: Bound) -> Bound:
    """An upper bound on max(a, b); ``None`` (unbounded) wins.

    Two bounds with the same run-time factors compare by coefficient; bounds with
    different factors cannot be compared statically and are refused.
    """
    if a is None or b is None:
        return None
    if a.coef == 0.0:
        return b
    if b.coef == 0.0:
        return a
    if a.factors == b.factors:
        return a if a.coef >= b.coef else b
    raise PlanTypeError(
        "bound",
        f"cannot compare the bounds {a.text()} and {b.text()} statically",
        "declare constant bounds, or bounds with the same released factors",
    )


_UNIT_INDEX = {"l1": 0, "l2": 1, "linf": 2}


def unit_ratio(stat: StatT, unit: str) -> Fraction:
    """The one-sided ratio of ``stat`` in the ``unit`` sensitivity (``"l1"``, ``"l2"``, ``"linf"``): an upper
    bound on ``one_sided / sensitivity`` (:func:`~dpflow.privacy.ratio.sensitivity_ratio`) when both bounds have
    the same run-time factors, so that their ratio is the ratio of their coefficients whatever the released
    values; 1 otherwise.

    >>> from dpflow.nodes.types import StatT
    >>> unit_ratio(StatT((1,), "X", None, Sym.const(2.0), None, one_sided=(None, Sym.const(1.0), None)), "l2")
    Fraction(1, 2)
    """
    if stat.one_sided is None:
        return ONE
    one, full = stat.one_sided[_UNIT_INDEX[unit]], getattr(stat, unit)
    if one is None or full is None or (one.factors != full.factors and one.coef != 0.0):
        return ONE
    return sensitivity_ratio(one.coef, full.coef)


def change_bound(rows: RowsT, diameter: Bound, norm: Bound) -> Bound:
    """How far one record's change can move a sum of row features.

    A replaced row moves it by at most the diameter; an added or removed row by the
    norm.  Multiplied by the stability (that many rows change).
    """
    out: Bound = Sym.const(0.0)
    if "replace" in rows.changes:
        out = diameter if out is None or diameter is None else sym_max(out, diameter)
    if "add_remove" in rows.changes:
        out = None if out is None or norm is None else sym_max(out, norm)
    if out is None:
        return None
    return out * float(rows.stability)


def float_rows(ctx: EvalContext, X: Any) -> Any:
    """Rows as floats, through the backend (lazily mapped rows are left as they are: every map that
    reads them converts).

    >>> class Ctx: backend = __import__("dpflow").interpreter.NumpyBackend()
    >>> np.asarray(float_rows(Ctx(), np.array([[1, 2]]))).dtype
    dtype('float64')
    """
    dt = getattr(X, "dtype", None)
    if dt is None or dt == np.float64:
        return X
    return ctx.backend.row_map(X, _to_float)


def _to_float(Z: np.ndarray) -> np.ndarray:
    return np.asarray(Z, dtype=float)


def square_problem(kind: str, shape: tuple[int, ...], least: int) -> str | None:
    """Why a released matrix of ``shape`` cannot be the square input, of side at least ``least``, of node kind
    ``kind`` (None when it can).  A released value's shape is public: a node refuses it at planning when the shape
    is known, else at run time.

    >>> square_problem("TopEigenvectors", (3, 4), 1)
    'TopEigenvectors needs a square matrix of side >= 1, got shape (3, 4)'
    """
    if len(shape) == 2 and shape[0] == shape[1] >= least:
        return None
    return f"{kind} needs a square matrix of side >= {least}, got shape {shape}"


def finite_or_zero(x: Any) -> np.ndarray:
    """A released value as floats with its non-finite entries as 0: the declared policy of the nodes that read
    one (a released value may be NaN or infinite, and nothing may raise or branch on it).

    >>> finite_or_zero([1.5, float("nan"), float("-inf")]).tolist()
    [1.5, 0.0, 0.0]
    """
    v = np.asarray(x, dtype=float)
    out: np.ndarray = np.where(np.isfinite(v), v, 0.0)
    return out


def released_scalar(x: Any) -> float:
    """A released value read as a scalar: its first entry, whatever shape it was released with (the declared
    policy of the nodes that take a released radius, bound, scale or index; the value may be non-finite, and
    each caller states what it does with that).

    >>> released_scalar([[2.5, 7.0]])
    2.5
    """
    return float(np.asarray(x, dtype=float).reshape(-1)[0])


def text_of(b: Bound) -> str:
    """Readable bound, 'unbounded' for None."""
    return "unbounded" if b is None else b.text()


def is_pos_int(x: float) -> bool:
    """True for a positive integer value."""
    return float(x).is_integer() and x >= 1 and math.isfinite(x)


__all__ = [
    "Backend",
    "float_rows",
    "EvalContext",
    "InferContext",
    "Mechanism",
    "Node",
    "PostProcess",
    "Query",
    "Transform",
]


@attrs.frozen
class NodeRecord:
    """One node of a plan graph: its id, the node, and its positional inputs (ids)."""

    id: str
    node: Node
    inputs: tuple[str, ...] = ()


@attrs.frozen
class SubPlan:
    """A traced sub-graph (the body of a control node: ``Repeat``, ``PartitionTree``) and the id of its output."""

    records: tuple[NodeRecord, ...]
    output: str
