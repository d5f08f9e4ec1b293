"""The estimator base of dpflow's scikit-learn surface: scikit-learn's estimator protocol without scikit-learn.

:class:`Estimator` gives every estimator class (:class:`dpflow.estimators.LinearRegression`,
:class:`dpflow.estimators.mixtures.GaussianMixture`, :class:`dpflow.estimators.PCA`,
:class:`dpflow.estimators.StandardScaler`, :class:`dpflow.estimators.Covariance`) what scikit-learn's
``BaseEstimator`` gives its own: the parameters are the ``__init__`` signature's, stored as given
(:meth:`Estimator.get_params`, :meth:`Estimator.set_params`; ``sklearn.base.clone`` works on any object with
those), the declared constraints of the parameters (:data:`Estimator.constraints`) are checked by
:meth:`Estimator.validate_params` when a plan is made (``fit``, ``make_plan``: public facts, before any data is
read or budget spent), and ``fit`` records ``n_features_in_`` and, from a DataFrame, ``feature_names_in_``
(:meth:`Estimator._rows`).  Each estimator also shows the plan its ``fit`` runs for ``d`` features and ``n``
rows before any data: ``make_plan(d, n)``.

scikit-learn is an optional dependency: this module does not import it (only ``__sklearn_tags__`` does,
when scikit-learn asks for the tags).

>>> import dpflow as dp
>>> from dpflow.estimators import PCA
>>> pca = PCA(n_components=0, budget=dp.ZCDP(0.5))          # kept as given, checked when a plan is made
>>> pca.set_params(n_components=2).get_params()["n_components"]
2
>>> PCA(n_components=0, budget=dp.ZCDP(0.5)).make_plan(3, 1000)
Traceback (most recent call last):
...
dpflow.errors.ParameterError: PCA: n_components=0 is not a positive integer. Fix: pass n_components = a positive \
integer.
"""

from __future__ import annotations

import functools
import inspect
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import attrs
import numpy as np

from dpflow.errors import NotFittedError, ParameterError
from dpflow.noise_protocol import NoiseSource
from dpflow.plan import Plan
from dpflow.privacy import Measure


@attrs.frozen
class Constraint:
    """A declared constraint of one parameter: ``test`` (public: the parameter's value only) and the text of
    what it must be (``"a positive integer"``), which the error names with the fix."""

    test: Callable[[Any], bool]
    text: str
    fix: str = ""

    def check(self, where: str, name: str, value: Any) -> None:
        """Raise :class:`dpflow.errors.ParameterError` when ``value`` fails the constraint."""
        if not self.test(value):
            raise ParameterError(where, f"{name}={value!r} is not {self.text}",
                                 self.fix or f"pass {name} = {self.text}")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def optional(c: Constraint) -> Constraint:
    """``c`` or ``None``."""
    return Constraint(lambda v: v is None or c.test(v), f"{c.text} or None", c.fix)


def one_of(*values: Any) -> Constraint:
    """One of ``values`` (compared with ``==``, so strings and ``None``)."""
    return Constraint(lambda v: any(v is x or (type(v) is type(x) and v == x) for x in values),
                      f"one of {list(values)!r}")


def positive(integer: bool = False) -> Constraint:
    """A finite number > 0 (an integer when ``integer``; ``bool`` is neither)."""
    if integer:
        return Constraint(lambda v: _number(v) and math.isfinite(v) and int(v) == v and v >= 1, "a positive integer")
    return Constraint(lambda v: _number(v) and math.isfinite(v) and v > 0, "a finite positive number")


def in_range(low: float, high: float) -> Constraint:
    """A number in the open interval ``(low, high)``."""
    return Constraint(lambda v: _number(v) and low < v < high, f"a number in ({low:g}, {high:g})")


BOOLEAN = Constraint(lambda v: isinstance(v, (bool, np.bool_)), "True or False")


@attrs.frozen
class _Budget(Constraint):
    def check(self, where: str, name: str, value: Any) -> None:
        """The plans' own budget check (:func:`dpflow.plan.graph.check_budget`: a ``PlanTypeError``)."""
        from dpflow.plan.graph import check_budget

        check_budget(value, where)


BUDGET: Constraint = _Budget(lambda v: isinstance(v, Measure), "a privacy budget (a dpflow measure)")
NOISE = Constraint(lambda v: v is None or isinstance(v, NoiseSource),
                   "a dpflow noise source or None (dpflow.SecureNoise by default)",
                   "pass noise=None (OS entropy) or dp.SeededNoise(seed) for reproducible tests (not for release)")


class Estimator(ABC):
    """scikit-learn's estimator protocol for dpflow's estimators (see the module docstring).

    A subclass lists its parameters in ``__init__`` (keyword parameters, stored unchanged as attributes of the
    same name), declares their :class:`Constraint` in :data:`constraints` (a parameter without one is not
    checked alone), checks constraints between parameters in :meth:`_check_params`, names its scikit-learn
    kind in :data:`estimator_kind` (``"regressor"``, ``"transformer"``, ``"density_estimator"``...), and
    implements :meth:`make_plan` and :meth:`fit` (which sets ``plan_`` last).
    """

    constraints: ClassVar[Mapping[str, Constraint]] = {}
    """Each parameter's declared constraint, checked by :meth:`validate_params`."""
    estimator_kind: ClassVar[str] = ""
    """scikit-learn's ``estimator_type`` (its tags) and what the class does: ``"regressor"``, ``"transformer"``,
    ``"density_estimator"``."""
    min_rows: ClassVar[int] = 1
    """The fewest rows ``fit`` takes (public: fewer raise before any data is read)."""

    @abstractmethod
    def make_plan(self, d: int, n: int) -> Plan:
        """The plan ``fit`` runs (first) on n rows of d features: public facts only, nothing read or charged."""

    @abstractmethod
    def fit(self, X: Any, y: Any = None) -> Any:
        """Check the parameters, then run the plan on ``X`` (and ``y`` where the estimator takes one)."""

    @classmethod
    def _param_names(cls) -> list[str]:
        """The ``__init__`` signature's parameters (scikit-learn's ``_get_param_names``)."""
        params = inspect.signature(cls.__init__).parameters.values()
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
            raise TypeError(f"{cls.__name__}.__init__ must name its parameters (no *args or **kwargs)")
        return sorted(p.name for p in params if p.name != "self")

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's parameters as given (scikit-learn's estimator protocol: ``clone`` works); with
        ``deep``, a parameter that is itself an estimator adds its own as ``name__param``."""
        out: dict[str, Any] = {}
        for name in self._param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out |= {f"{name}__{k}": v for k, v in value.get_params().items()}
            out[name] = value
        return out

    def set_params(self, **params: Any) -> Any:
        """Set constructor parameters (``name__param`` sets a nested estimator's); checked when a plan is made.
        An unknown name is a :class:`dpflow.errors.ParameterError` (a ``ValueError``)."""
        valid = self._param_names()
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            name, _, sub = key.partition("__")
            if name not in valid:
                raise ParameterError(type(self).__name__, f"invalid parameters [{key!r}]",
                                     f"use one of {valid}")
            if sub:
                nested.setdefault(name, {})[sub] = value
            else:
                setattr(self, name, value)
        for name, sub_params in nested.items():
            getattr(self, name).set_params(**sub_params)
        return self

    def validate_params(self) -> None:
        """Check each parameter's declared constraint, then the constraints between them
        (:meth:`_check_params`): public facts only, so ``fit`` and ``make_plan`` call it before any data is read.
        A failure is a :class:`dpflow.errors.ParameterError` naming the parameter and the fix."""
        where = type(self).__name__
        for name, constraint in self.constraints.items():
            constraint.check(where, name, getattr(self, name))
        self._check_params()

    def _check_params(self) -> None:
        """Constraints between parameters (subclasses); each names the parameters and the fix.  None here."""
        return None

    def _rows(self, X: Any, reset: bool) -> np.ndarray:
        """``X`` (an n x d array, list or DataFrame) as a float array by the table policy
        (:func:`dpflow.tables.to_rows`: a value that is not a number is missing, never an error).  With
        ``reset`` (``fit``) records ``n_features_in_`` and, from a DataFrame, ``feature_names_in_``; otherwise
        (``transform``, ``predict``) checks them.  Only public facts raise: the shape, the dtype, the names."""
        from scipy import sparse

        from dpflow.tables import is_frame, to_rows

        where = type(self).__name__
        if sparse.issparse(X):
            raise ParameterError(where, "sparse input is not supported", "pass a dense array (X.toarray())")
        frame = is_frame(X)
        if getattr(getattr(X, "dtype", None), "kind", None) == "c":  # a complex array (its dtype is public)
            raise ParameterError(where, "Complex data not supported", "pass real numbers")
        names = np.asarray([str(c) for c in X.columns], dtype=object) if frame else None
        A = np.asarray(to_rows(X, None, "X"))
        if A.ndim != 2:
            raise ParameterError(where, f"X must be a 2-d array (n, d), got shape {A.shape}",
                                 "Reshape your data: X.reshape(-1, 1) for a single feature, X.reshape(1, -1) for "
                                 "a single sample")
        if A.dtype.kind not in "biuf":
            raise ParameterError(where, f"X must be numeric, got dtype {A.dtype}", "pass numbers")
        if A.shape[1] < 1:
            raise ParameterError(where, f"0 feature(s) (shape={A.shape}) while a minimum of 1 is required",
                                 "pass at least one column")
        if reset and A.shape[0] < self.min_rows:
            raise ParameterError(where, f"{A.shape[0]} sample(s) (n_samples = {A.shape[0]}) while a minimum of "
                                 f"{self.min_rows} is required", f"pass at least {self.min_rows} rows")
        if reset:
            self.n_features_in_ = A.shape[1]
            if names is not None:
                self.feature_names_in_ = names
            elif hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        else:
            fitted = getattr(self, "n_features_in_", None)
            if fitted is not None and A.shape[1] != fitted:
                raise ParameterError(where, f"X has {A.shape[1]} features, but {where} is expecting {fitted} "
                                     "features as input", f"pass {fitted} columns")
            seen = getattr(self, "feature_names_in_", None)
            if seen is not None and names is not None and list(names) != list(seen):
                raise ParameterError(where, f"the feature names {list(names)} differ from those seen in fit, "
                                     f"{list(seen)}", "pass the columns fit saw, in the same order")
        out: np.ndarray = A.astype(float)
        return out

    def _fitted(self) -> bool:
        """Whether ``fit`` has run to its end: it sets ``plan_`` (the plan it ran) last."""
        return hasattr(self, "plan_")

    def __sklearn_is_fitted__(self) -> bool:
        return self._fitted()

    def _require_fitted(self, what: str) -> None:
        """Raise :func:`not_fitted_error` unless ``fit`` has run."""
        if not self._fitted():
            raise not_fitted_error()(type(self).__name__, f"{what} needs a fitted estimator", "call fit first")

    def __sklearn_tags__(self) -> Any:
        """scikit-learn's tags (1.6+): non-deterministic (each fit draws fresh noise), the kind of estimator,
        y required by a regressor only, missing values allowed (the table policy maps them), and a regressor's
        ``poor_score`` (a private fit on scikit-learn's 200-row check data may score below 0.5)."""
        from sklearn.utils import InputTags, RegressorTags, Tags, TargetTags, TransformerTags

        kind = self.estimator_kind
        return Tags(estimator_type=kind if kind != "transformer" else None,
                    target_tags=TargetTags(required=kind == "regressor"),
                    transformer_tags=TransformerTags() if kind == "transformer" else None,
                    regressor_tags=RegressorTags(poor_score=True) if kind == "regressor" else None,
                    input_tags=InputTags(allow_nan=True), non_deterministic=True)

    def _more_tags(self) -> dict[str, Any]:
        """The same tags for scikit-learn before 1.6."""
        return {"non_deterministic": True, "requires_y": self.estimator_kind == "regressor", "allow_nan": True,
                "poor_score": True}

    def _noise(self) -> Any:
        """The ``noise`` parameter, or fresh OS entropy (:class:`dpflow.SecureNoise`) for each fit."""
        from dpflow.interpreter.noise import SecureNoise

        noise = getattr(self, "noise", None)
        return noise if noise is not None else SecureNoise()

    def __repr__(self) -> str:
        """The class with the parameters that differ from their defaults (as scikit-learn prints it)."""
        sig = inspect.signature(type(self).__init__).parameters
        shown = [f"{k}={v!r}" for k, v in self.get_params(deep=False).items()
                 if sig[k].default is inspect.Parameter.empty or not _same(v, sig[k].default)]
        return f"{type(self).__name__}({', '.join(shown)})"


@functools.cache
def not_fitted_error() -> type[NotFittedError]:
    """:class:`dpflow.errors.NotFittedError`, and with scikit-learn installed a subclass that is also
    scikit-learn's ``NotFittedError`` (so ``except sklearn.exceptions.NotFittedError`` and scikit-learn's checks
    catch it); scikit-learn is imported only here, when a method is called before ``fit``."""
    try:
        from sklearn.exceptions import NotFittedError as SklearnNotFitted
    except ImportError:
        return NotFittedError
    return type("NotFittedError", (NotFittedError, SklearnNotFitted), {"__module__": NotFittedError.__module__})


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a is b or (type(a) is type(b) and a == b))
    except (TypeError, ValueError):
        return False


class Transformer(Estimator):
    """An :class:`Estimator` whose ``fit`` releases what ``transform`` (post-processing) maps rows by."""

    estimator_kind = "transformer"

    @abstractmethod
    def transform(self, X: Any) -> np.ndarray:
        """Map rows by the released parameters (post-processing: no charge)."""

    def fit_transform(self, X: Any, y: Any = None) -> np.ndarray:
        """``fit(X)`` then ``transform(X)`` (one fit: one charge of the budget)."""
        out: np.ndarray = self.fit(X, y).transform(X)
        return out
