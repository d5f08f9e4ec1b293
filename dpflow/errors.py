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


class ExecutionError(DpflowError):
    """The execution engine failed during a run (a worker died, the scheduler went away): nothing was
    released.  With a budget store the reservation stays counted, since data may have been read."""

    def __init__(self, node: str, problem: str, fix: str) -> None:
        self.node = node
        self.problem = problem
        self.fix = fix
        super().__init__(f"{node}: {problem}. Nothing was released. Fix: {fix}.")


class SerializationError(DpflowError):
    """A plan cannot be written to or read from canonical JSON."""


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
