"""Post-processing of released values (free: Dwork-Roth 2014 Prop. 2.1) and public constants."""

from __future__ import annotations

import importlib
import math
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs
import numpy as np

from dpflow.errors import AccuracyWarning, PlanTypeError, SerializationError
from dpflow.handles import Ref
from dpflow.handles import param as handle_param
from dpflow.nodes.base import EvalContext, InferContext, Node, PostProcess, finite_or_zero, released_type
from dpflow.nodes.types import Inferred, ReleasedT, VType


def _floats(v: Any) -> tuple[float, ...]:
    return tuple(float(x) for x in np.ravel(v))


def _ints(v: Any) -> tuple[int, ...]:
    return tuple(int(x) for x in v)


def _opt_ints(v: Any) -> tuple[int, ...] | None:
    return None if v is None else _ints(v)


def function_path(fn: Callable[..., Any]) -> str:
    """``module:qualname`` of a function, the form a plan's JSON stores it in.

    >>> function_path(np.sqrt)
    'numpy:sqrt'
    """
    module = getattr(fn, "__module__", None) or "builtins"
    return f"{module}:{getattr(fn, '__qualname__', repr(fn))}"


def load_function(path: str) -> Callable[..., Any]:
    """Import the function named by :func:`function_path`."""
    module, _, qual = path.partition(":")
    if "<" in qual:
        raise SerializationError(f"{path} is a lambda or local function; use a module-level function")
    try:
        obj: Any = importlib.import_module(module)
        for part in qual.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise SerializationError(f"cannot import post-processing function {path}: {e}") from e
    if not callable(obj):
        raise SerializationError(f"{path} is not callable")
    fn: Callable[..., Any] = obj
    return fn


def _show(values: tuple[float, ...], shape: tuple[int, ...]) -> str:
    if not shape:
        return f"{values[0]:.6g}"
    head = ", ".join(f"{v:.6g}" for v in values[:6])
    return f"[{head}{', ...' if len(values) > 6 else ''}] shape {shape}"


@attrs.frozen(kw_only=True)
class Public(Node):
    """A public constant (an array), released by definition.  Made by ``PlanBuilder.public``, or by
    :func:`param` with a ``name`` and the public derivation ``why`` that the ledger shows (how an
    estimator chose a default from n, d, the declared bounds and the budget).

    >>> import dpflow as dp
    >>> c = dp.PlanBuilder(budget=dp.ZCDP(0.5)).public([1.0, 2.0])
    """

    kind: ClassVar[str] = "Public"
    reference: ClassVar[str] = "public parameter computed from public quantities (no privacy cost)"
    values: tuple[float, ...] = attrs.field(converter=_floats)
    shape: tuple[int, ...] = attrs.field(converter=_ints)
    name: str = ""
    why: str = ""

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        if ins:
            raise PlanTypeError(ctx.node_id, "a public constant has no inputs", "remove the inputs")
        if int(np.prod(self.shape, dtype=np.int64)) != len(self.values):
            raise PlanTypeError(ctx.node_id, f"{len(self.values)} values do not fill shape {self.shape}",
                                "pass a rectangular array")
        if not self.name:
            return Inferred(ReleasedT(self.shape), "public constant")
        why = f" ({self.why})" if self.why else ""
        return Inferred(ReleasedT(self.shape), f"{self.name} = {_show(self.values, self.shape)}{why}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        arr = np.asarray(self.values, dtype=float).reshape(self.shape)
        return arr if arr.ndim else float(arr)


def param(builder: Any, name: str, value: Any, why: str = "") -> Any:
    """A named public parameter on ``builder`` (a plan or control-body builder), shown in the ledger.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> g = param(b, "gamma", 9.4636, "chi_radius(d=50, beta=0.01)")
    >>> b.build(g=g).check().entries[0].derivation
    'gamma = 9.4636 (chi_radius(d=50, beta=0.01))'
    """
    from dpflow.handles import Released

    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"parameter {name!r} must be finite")
    node = Public(values=tuple(arr.ravel()), shape=arr.shape, name=name, why=why)
    return Released(builder.add(node, ()), builder)


WARNING = "warning"
"""The name of the :class:`Public` node that carries an accuracy warning (see :func:`accuracy_warning`)."""


def accuracy_warning(builder: Any, text: str) -> None:
    """Record an accuracy warning decided from public quantities (n, epsilon, d, declared bounds) on
    ``builder``: a ``Public`` node named ``"warning"`` (kept by the plan's JSON; the planner lists its
    text in ``Ledger.warnings``, so ``summary()``, the reports and the CLI show it) and a Python
    :class:`~dpflow.errors.AccuracyWarning`.

    >>> import warnings, dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> with warnings.catch_warnings(record=True):
    ...     warnings.simplefilter("always")
    ...     accuracy_warning(b, "n=3 rows is too few")
    >>> b.build(w=b.public(0.0)).check().warnings
    ('n=3 rows is too few',)
    """
    param(builder, WARNING, 0.0, text)
    warnings.warn(text, AccuracyWarning, stacklevel=_caller_level())


_PACKAGE_DIR = os.path.join(str(Path(__file__).resolve().parent.parent), "")  # ".../dpflow/"


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside dpflow (the user's call), for ``warnings.warn``."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level


def warning_text(node: Node) -> str | None:
    """The text of an accuracy warning recorded by :func:`accuracy_warning`, or None for any other node."""
    return node.why if isinstance(node, Public) and node.name == WARNING else None


def _confidence(v: Any) -> float:
    c = float(v)
    if not 0.0 < c < 1.0:
        raise ValueError(f"a predicted error's confidence is a probability in (0, 1), got {v!r}")
    return c


def _error_value(v: Any) -> float:
    x = float(v)
    if not x >= 0.0:  # NaN and negative refused; +inf is a valid prediction ("no useful bound")
        raise ValueError(f"a predicted error is a non-negative number or inf, got {v!r}")
    return x


@attrs.frozen
class Prediction:
    """The error an estimator predicted for one output before any data was read (a
    :class:`dpflow.nodes.PredictedError` node of the plan): with probability at least ``confidence`` the
    output is within ``value`` of the truth in ``metric``, by ``derivation``, on ``route``.  ``given`` (empty:
    none) is the condition the prediction assumes and the estimator cannot check before data (the data's model,
    or that a private scale step succeeds): the prediction holds when it holds."""

    output: str
    metric: str
    value: float = attrs.field(converter=_error_value)
    confidence: float = attrs.field(converter=_confidence)
    derivation: str
    route: str = ""
    given: str = ""

    def describe(self) -> str:
        """One readable line.

        >>> Prediction("mean", "l2", 0.5, 0.9, "CoinPress bound", "coinpress").describe()
        'mean: l2 error <= 0.5 with probability >= 0.9 (CoinPress bound; route: coinpress)'
        >>> Prediction("mean", "l2", 0.5, 0.9, "CoinPress bound", given="Gaussian rows").describe()
        'mean: l2 error <= 0.5 with probability >= 0.9 (CoinPress bound; given Gaussian rows)'
        """
        route = f"; route: {self.route}" if self.route else ""
        given = f"; given {self.given}" if self.given else ""
        return (f"{self.output}: {self.metric} error <= {self.value:.6g} with probability >= {self.confidence:g} "
                f"({self.derivation}{route}{given})")

    def to_data(self) -> dict[str, Any]:
        """JSON data (the fields; an infinite value as the string ``"inf"``: strict JSON has no infinity)."""
        return attrs.asdict(self) | {"value": "inf" if math.isinf(self.value) else self.value}

    @staticmethod
    def from_data(d: dict[str, Any]) -> Prediction:
        """The inverse of :meth:`to_data`."""
        return Prediction(**{**d, "value": float(d["value"])})


@attrs.frozen(kw_only=True)
class PredictedError(Node):
    """An estimator's statement, from public facts only (n, d, the budget, the relation, the bounds given or
    the guarantee of a private scale step), of the error of one output: with probability at least
    ``confidence`` the output is within ``value`` of the truth in ``metric``, by ``derivation``.  ``route``
    names the estimator's route this prediction is for (the one chosen, by the smallest prediction).  No
    input, no cost: the planner lists it in :attr:`dpflow.planner.Ledger.predictions`, and the reports and
    ``repr`` show it.  Made by :func:`predicted_error`.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> _ = predicted_error(b, "mean", "absolute", 0.25, 0.9, "clipped mean: 2 sigma of the noise")
    >>> b.build(w=b.public(0.0)).check().predictions[0].describe()
    'mean: absolute error <= 0.25 with probability >= 0.9 (clipped mean: 2 sigma of the noise)'
    """

    kind: ClassVar[str] = "PredictedError"
    reference: ClassVar[str] = "accuracy predicted from public quantities (no data read, no privacy cost)"
    output: str
    metric: str
    value: float = attrs.field(converter=_error_value)
    confidence: float = attrs.field(converter=_confidence)
    derivation: str
    route: str = ""
    given: str = ""

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        if ins:
            raise PlanTypeError(ctx.node_id, "a predicted error has no inputs", "remove the inputs")
        return Inferred(ReleasedT(()), f"predicted error of {self.output}: {self.metric} <= {self.value:.6g} "
                                       f"with probability >= {self.confidence:g} ({self.derivation}"
                                       + (f"; given {self.given})" if self.given else ")"))

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        return self.value

    def prediction(self) -> Prediction:
        """What the ledger lists for this statement."""
        return Prediction(self.output, self.metric, self.value, self.confidence, self.derivation, self.route,
                          self.given)


def predicted_error(builder: Any, output: str, metric: str, value: float, confidence: float, derivation: str,
                    route: str = "", given: str = "") -> Any:
    """Record on ``builder`` the error predicted for ``output`` before any data is read
    (:class:`PredictedError`; ``given``: the condition it assumes, :class:`Prediction`); returns its released
    handle (the predicted value, public)."""
    from dpflow.handles import Released

    node = PredictedError(output=output, metric=metric, value=value, confidence=confidence, derivation=derivation,
                          route=route, given=given)
    return Released(builder.add(node, ()), builder)


@attrs.frozen(kw_only=True)
class Apply(PostProcess):
    """Apply a user function to released values.

    For a plan to round-trip through JSON the function must be importable
    (``module:qualname``); lambdas work in memory only.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> y = dp.nodes.Apply(fn=np.abs)(b.public([-1.0]))
    """

    kind: ClassVar[str] = "Apply"
    fn: Callable[..., Any] = attrs.field(eq=False)
    shape: tuple[int, ...] | None = attrs.field(default=None, converter=_opt_ints)

    def out_shape(self, ins: Sequence[ReleasedT]) -> tuple[int, ...] | None:
        return self.shape

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        return self.fn(*ins)


def _eigh(x: Any) -> tuple[np.ndarray, np.ndarray]:
    """The eigendecomposition of the symmetric part of a released matrix, its non-finite entries as 0
    (:func:`~dpflow.nodes.base.finite_or_zero`: a release with infinite noise is NaN, on which ``eigh`` raises),
    halved before the sum so that entries near the float range do not overflow."""
    from dpflow.blas import serial_blas

    S = finite_or_zero(x)
    with serial_blas():
        w, V = np.linalg.eigh(S / 2.0 + S.T / 2.0)
    return w, V


@attrs.frozen(kw_only=True)
class PSDProject(PostProcess):
    """Project a symmetric matrix onto the PSD cone (eigenvalues clipped at ``floor``).

    This is the true Frobenius projection (not the matrix absolute value).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> P = dp.nodes.PSDProject()(b.public([[1.0, 0.0], [0.0, -1.0]]))
    """

    kind: ClassVar[str] = "PSDProject"
    floor: float = 0.0

    def out_shape(self, ins: Sequence[ReleasedT]) -> tuple[int, ...] | None:
        return ins[0].shape

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        w, V = _eigh(ins[0])
        return (V * np.maximum(w, self.floor)) @ V.T


@attrs.frozen(kw_only=True)
class Eigh(PostProcess):
    """Eigendecomposition of a symmetric matrix: ``(eigenvalues ascending, eigenvectors)``.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> wV = dp.nodes.Eigh()(b.public([[2.0, 0.0], [0.0, 1.0]]))
    """

    kind: ClassVar[str] = "Eigh"

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        return _eigh(ins[0])


class Parts(tuple[Any, ...]):
    """The run-time value of a named ``Pack``: a tuple (equal to the plain tuple of its parts) that also
    carries the public names of its parts."""

    names: tuple[str, ...]

    def __new__(cls, values: Sequence[Any], names: tuple[str, ...]) -> Parts:
        out = super().__new__(cls, values)
        out.names = names
        return out

    def __getnewargs__(self) -> tuple[tuple[Any, ...], tuple[str, ...]]:
        return tuple(self), self.names


def _part_names(v: Any) -> tuple[str, ...] | None:
    if v is None:
        return None
    names = tuple(v)
    if not names or not all(isinstance(x, str) and x.isidentifier() for x in names) or len(set(names)) != len(names):
        raise ValueError(f"Pack names must be distinct identifiers, got {v!r}")
    return names


@attrs.frozen
class Get(PostProcess):
    """The part called ``name`` of a released ``Pack`` (or a loop's state made of one), or item ``index`` of
    a released tuple or array.  A name is checked against the input's part names when the plan is
    certified: an unknown one is refused before data, naming the node.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> x0 = dp.nodes.Get(index=0)(b.public([3.0, 4.0]))
    >>> st = dp.nodes.Pack(names=("centre", "radius"))(b.public([0.0]), b.public(1.0))
    >>> r = dp.nodes.Get("radius")(st)
    """

    kind: ClassVar[str] = "Get"
    name: str | None = None
    index: int | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if (self.name is None) == (self.index is None):
            raise ValueError(f"Get takes a part name or an index, exactly one, got name={self.name!r}, "
                             f"index={self.index!r}")

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        out = super().infer(ins, ctx)
        t = ins[0]
        if self.name is not None and isinstance(t, ReleasedT) and (t.fields is None or self.name not in t.fields):
            has = "has no named parts" if t.fields is None else f"has the parts {list(t.fields)}"
            raise PlanTypeError(ctx.node_id, f"Get({self.name!r}) reads a part that its input does not have: the "
                                f"input {has}", "name one of the parts given to Pack(names=...)" if t.fields
                                else "name the parts with Pack(names=...), or read by position with Get(index=...)")
        return out

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        if self.name is not None:
            return ins[0][ins[0].names.index(self.name)]
        return ins[0][self.index]


@attrs.frozen(kw_only=True)
class Pack(PostProcess):
    """Several released values as one tuple (e.g. the state of a ``Repeat``), with optional part
    ``names`` (where a paper names the parts) that ``Get("name")`` reads.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> st = dp.nodes.Pack()(b.public([0.0]), b.public(1.0))
    >>> named = dp.nodes.Pack(names=("centre", "radius"))(b.public([0.0]), b.public(1.0))
    """

    kind: ClassVar[str] = "Pack"
    names: tuple[str, ...] | None = attrs.field(default=None, converter=_part_names)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        out = super().infer(ins, ctx)
        if self.names is not None and len(self.names) != len(ins):
            raise PlanTypeError(ctx.node_id, f"Pack has {len(ins)} parts but {len(self.names)} names "
                                f"{list(self.names)}", "give one name per packed value")
        assert isinstance(out.out, ReleasedT)
        return Inferred(attrs.evolve(out.out, fields=self.names), out.derivation)

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        return tuple(ins) if self.names is None else Parts(ins, self.names)


def param_ref(x: Any) -> Ref:
    """Converter: a released handle (or a :class:`Ref`) as a :class:`Ref`."""
    x = handle_param(x)
    if not isinstance(x, Ref):
        raise ValueError(f"expected a released handle, got {x!r}")
    return x


@attrs.frozen(kw_only=True)
class NoiseScale(PostProcess):
    """The noise multiplier the planner certified for the mechanism whose output is ``of``, in the
    current round: the noise scale per unit sensitivity (``GaussianMech``: sigma per unit l2
    sensitivity, 1/sqrt(2 rho_k); ``LaplaceMech``: b per unit l1 sensitivity, 1/epsilon_k; ``Peel``:
    b per unit l-infinity sensitivity, 1/u_k for its per-coordinate loss u_k), exactly the multiplier
    the mechanism's noise uses (:meth:`Mechanism.noise_multiplier <dpflow.nodes.base.Mechanism.noise_multiplier>`).
    Mechanisms without a noise multiplier (the exponential-mechanism family: Quantile, DyadicExpMech,
    ...) are refused.  It depends only on the certified allocation (the plan and the budget), never on
    the data, so it is public and free: post-processing without positional inputs.  Made by
    :func:`noise_scale`.

    >>> import dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> m = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2), n=10))))
    >>> plan = b.build(m=m, unit_sigma=N.noise_scale(m))
    >>> float(plan.run({"X": [[0.0, 0.0]] * 10}, noise=dp.SeededNoise(0)).released["unit_sigma"]) >= 1.0
    True
    """

    kind: ClassVar[str] = "NoiseScale"
    reference: ClassVar[str] = ("public: a function of the certified allocation only (the plan and the budget), "
                                "so free; the multiplier is the mechanism's own calibration")
    of: Ref = attrs.field(converter=param_ref)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        if ins:
            raise PlanTypeError(ctx.node_id, "NoiseScale has no inputs", "pass the mechanism's output as of=")
        t = released_type(self.of, ctx, "of")
        scope = ctx.node_id[:ctx.node_id.rfind("/") + 1]
        if t.noised_by != scope + self.of.id:
            raise PlanTypeError(ctx.node_id, f"of={self.of.id} is not the output of a noise-adding mechanism "
                                "(GaussianMech, LaplaceMech or Peel) of this plan or loop body",
                                "pass the handle a GaussianMech, LaplaceMech or Peel returned, in the same scope")
        return Inferred(ReleasedT(()), f"noise scale per unit sensitivity of {t.noised_by} (certified share)")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        mech, alloc = ctx.allocation_of(self.of)
        return mech.noise_multiplier(alloc.share, alloc.mode)


def noise_scale(m: Any) -> Any:
    """Add :class:`NoiseScale` for the released output ``m`` of a mechanism; returns its released handle.

    >>> import dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    >>> h = N.LaplaceMech()(N.Histogram(edges=[0, 1, 2])(b.source("X", dp.Ordinal(N=2), n=10)))
    >>> b.build(h=h, b=noise_scale(h)).check().entries[-1].kind
    'NoiseScale'
    """
    from dpflow.handles import Released

    if not isinstance(m, Released):
        raise PlanTypeError("NoiseScale", f"noise_scale needs the released output of a mechanism, got {m!r}",
                            "pass the handle a GaussianMech, LaplaceMech or Peel returned")
    return Released(m.builder.add(NoiseScale(of=Ref(m.id)), ()), m.builder)
