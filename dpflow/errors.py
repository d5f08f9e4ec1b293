"""Exceptions.  Every planner refusal names the node and the fix.

Only public information (the plan, the schema, n, d, declared bounds) may raise.
Nothing that depends on private values raises: those cases are handled by a
declared policy inside the node.

>>> raise BudgetError("gauss_3", "the plan needs rho=0.6 but the budget is rho=0.5", "lower a weight")
Traceback (most recent call last):
...
dpflow.errors.BudgetError: gauss_3: the plan needs rho=0.6 but the budget is rho=0.5. Fix: lower a weight.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable


class DpflowError(Exception):
    """Base class of every dpflow error."""


class PlanError(DpflowError):
    """The planner refuses a plan (CLI exit status 2)."""

    def __init__(self, node: str, problem: str, fix: str) -> None:
        self.node = node
        self.problem = problem
        self.fix = fix
        super().__init__(f"{node}: {problem}. Fix: {fix}.")


class UnboundedSensitivityError(PlanError):
    """A mechanism is fed a statistic whose sensitivity has no finite bound."""


class BudgetError(PlanError):
    """The composed cost exceeds the budget, or the budget cannot be met."""


class PlanReferenceError(PlanError):
    """A node refers to an undefined node, or the references form a cycle."""


class UnknownSourceError(PlanError):
    """Data was given for a source the plan does not declare, or a declared source got no data."""


class DomainError(PlanError):
    """A node's input domain does not fit what the node needs."""


class PostProcessingError(PlanError):
    """Post-processing (or a parameter slot) was handed a value that has not been released."""


class PlanTypeError(PlanError):
    """Any other static error in the plan's structure."""


class DataError(DpflowError):
    """The data (or a released parameter) does not match the public schema a node needs.

    Raised only on public facts: shapes, dtypes, declared n, shapes of released values.
    """

    def __init__(self, node: str, problem: str, fix: str) -> None:
        self.node = node
        self.problem = problem
        self.fix = fix
        super().__init__(f"{node}: {problem}. Fix: {fix}.")


DEBUG_ENV = "DPFLOW_DEBUG"
"""Environment variable: ``DPFLOW_DEBUG=1`` keeps the engine's own exception as the cause of an
:class:`ExecutionError` (see there), like ``run(..., debug=True)``."""


def debug_requested(debug: bool | None = None) -> bool:
    """``debug`` when given, else whether :data:`DEBUG_ENV` is set to 1, true, yes or on.

    >>> debug_requested(True), debug_requested(False)
    (True, False)
    """
    if debug is not None:
        return debug
    return os.environ.get(DEBUG_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


class ExecutionError(DpflowError):
    """The execution engine failed during a run (a worker died, the scheduler went away): nothing was
    released.  With a budget store the reservation stays counted, since data may have been read.

    Declared policy: the engine's own exception may quote data (a parser's message, a task's
    arguments, locals in its traceback), so by default a run raises this error with no cause and no context;
    its message names the plan node being evaluated and the engine exception's type only.  Opt in to the
    original exception and its traceback (as ``__cause__``) with ``run(..., debug=True)`` or the environment
    variable ``DPFLOW_DEBUG=1`` (the CLI then prints it).  The policy covers what dpflow raises, not the
    engine's own logs: dask.distributed's workers log a failed task's exception (logger
    ``distributed.worker``), so a hosted service should configure the cluster's logging too.

    >>> str(ExecutionError("mean_2", "the dask computation failed (KilledWorker)", "rerun"))
    'mean_2: the dask computation failed (KilledWorker). Nothing was released. Fix: rerun.'
    """

    def __init__(self, node: str, problem: str, fix: str) -> None:
        self.node = node
        self.problem = problem
        self.fix = fix
        super().__init__(f"{node}: {problem}. Nothing was released. Fix: {fix}.")

    def located(self, node: str | None, debug: bool) -> ExecutionError:
        """A new error naming ``node`` (this one's node when ``None``) with this one's problem and fix; it
        holds no reference to this error or its cause unless ``debug``, when this error is its cause.
        Raise it outside the ``except`` block that caught this one, so that it has no context either."""
        out = ExecutionError(self.node if node is None else node, self.problem, self.fix)
        if debug:
            out.__cause__ = self
        return out


class UnknownNameError(DpflowError, KeyError):
    """A released value was asked for by a name the result does not have (a ``KeyError``, so ``except
    KeyError`` still catches it); the message lists the close matches and the names there are.

    >>> err = UnknownNameError("mean(Age)", ["count", "mean(age)"])
    >>> isinstance(err, KeyError), str(err)
    (True, "no value named 'mean(Age)'; did you mean 'mean(age)'? The result has: 'count', 'mean(age)'.")
    """

    def __init__(self, name: object, available: Iterable[str]) -> None:
        self.name = name
        self.available = tuple(available)
        close = difflib.get_close_matches(str(name), self.available, n=3, cutoff=0.6)
        lowered = [a for a in self.available if a.lower() == str(name).lower() and a not in close]
        hint = lowered + close
        guess = f"; did you mean {' or '.join(repr(h) for h in hint)}?" if hint else "."
        listed = ", ".join(repr(a) for a in self.available[:50]) + (", ..." if len(self.available) > 50 else "")
        super().__init__(f"no value named {name!r}{guess} The result has: {listed or 'nothing'}.")

    def __str__(self) -> str:  # KeyError's own quotes its argument
        return str(self.args[0])


class SerializationError(DpflowError):
    """A plan cannot be written to or read from canonical JSON."""


class AccuracyError(DpflowError):
    """A predicted error exceeds the caller's tolerance and ``strict=True`` was asked: refused from public
    facts (n, d, the budget, the bounds) before any data is read and before any budget is charged.

    >>> str(AccuracyError("stats.mean", "mean(x) is predicted to err by up to 5", "give more rows"))
    'stats.mean: mean(x) is predicted to err by up to 5. Nothing was read or charged. Fix: give more rows.'
    """

    def __init__(self, where: str, problem: str, fix: str) -> None:
        self.where, self.problem, self.fix = where, problem, fix
        super().__init__(f"{where}: {problem}. Nothing was read or charged. Fix: {fix}.")


class ParameterError(DpflowError, ValueError):
    """An estimator's parameter breaks its declared constraint (:mod:`dpflow.estimators.base`), or its input's
    public shape does not fit: raised by ``fit`` and ``make_plan`` before any data is read or budget spent (a
    ``ValueError``, as scikit-learn's own parameter checks).

    >>> str(ParameterError("PCA", "n_components=0 is not a positive integer", "pass n_components >= 1"))
    'PCA: n_components=0 is not a positive integer. Fix: pass n_components >= 1.'
    """

    def __init__(self, where: str, problem: str, fix: str) -> None:
        self.where, self.problem, self.fix = where, problem, fix
        super().__init__(f"{where}: {problem}. Fix: {fix}.")


class NotFittedError(ParameterError, AttributeError):
    """A fitted estimator's method (``predict``, ``transform``) was called before ``fit`` (a ``ValueError`` and an
    ``AttributeError``, as scikit-learn's ``NotFittedError``)."""


class AccuracyWarning(UserWarning):
    """A plan is private but, for public reasons (n, epsilon, d, the declared bounds), its release is
    likely too noisy to be useful.  Decided when the plan is built; the text is also in the ledger's
    ``warnings`` (``summary()``, the reports, the CLI).

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("n=3 is too small", AccuracyWarning)
    >>> caught[0].category.__name__
    'AccuracyWarning'
    """
