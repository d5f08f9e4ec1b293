"""The one entry point that runs a plan: certify, reserve the budget, check the public schema, execute,
and build the report.  It sits above the planner, the interpreter and the report package (which only
renders); ``Plan.check`` and ``Plan.run`` reach it without ``dpflow.plan`` importing upward.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from dpflow.errors import UnknownNameError
from dpflow.interpreter.noise import NoiseSource, SecureNoise
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.nodes.base import Backend
from dpflow.plan.graph import Plan, register_entry
from dpflow.planner.certify import certified
from dpflow.planner.ledger import Ledger
from dpflow.report.report import Report
from dpflow.text import overview_html, overview_text

if TYPE_CHECKING:  # the store (sqlite3) is imported by whoever makes one, not with dpflow
    from dpflow.budget import BudgetStore

__all__ = ["Named", "Result", "check", "run"]


class Named(dict[str, Any]):
    """A dict of released values whose missing name raises :class:`dpflow.errors.UnknownNameError` (a
    ``KeyError``) listing the close matches and every name there is.

    >>> Named({"mean(age)": 41.0})["mean(Age)"]
    Traceback (most recent call last):
    ...
    dpflow.errors.UnknownNameError: no value named 'mean(Age)'; did you mean 'mean(age)'? The result has: 'mean(age)'.
    """

    def __missing__(self, name: str) -> Any:
        raise UnknownNameError(name, list(self))


@attrs.frozen(eq=False, repr=False)
class Result:
    """Released values and the report of one run.  Its ``repr`` is the report's short overview
    (:meth:`dpflow.Report.overview`)."""

    released: dict[str, Any] = attrs.field(converter=Named)  # an unknown name lists the names there are
    report: Report

    def __repr__(self) -> str:
        return overview_text("Result", self.report.overview())

    def _repr_html_(self) -> str:
        return overview_html("Result", self.report.overview())


def run(
    plan: Plan,
    data: Mapping[str, Any] | np.ndarray,
    noise: NoiseSource | None = None,
    backend: Backend | str | None = None,
    budget_store: BudgetStore | None = None,
    dataset: str | Mapping[str, str] | None = None,
    debug: bool | None = None,
) -> Result:
    """Certify ``plan`` and run it on ``data`` (source name -> array; one array when the plan has a
    single source).

    ``noise`` defaults to :class:`dpflow.SecureNoise` (OS entropy); the plan is certified for it
    (``certify(plan, exact_noise=noise.exact)``: an exact source never rests a Gaussian mechanism on an
    accounting proven for continuous noise only, docs/privacy.md "Noise").  Public schema
    errors (shape, dtype, declared n, unknown sources) raise before any value is used.
    With ``budget_store`` (a :class:`dpflow.budget.BudgetStore`) the certified cost is
    reserved on ``dataset`` (one id, or plan source -> id) before any data is read,
    released if the public schema check fails, and committed otherwise (also when the
    run fails after data was read); the report records the reservation.  Seeded noise
    (``noise.seeded``) is refused with a budget store: its output is reproducible, not
    private, and charging it would record a release that is not one.

    An engine failure (a dask worker lost) raises :class:`dpflow.errors.ExecutionError`, naming the node and
    the engine exception's type only: that exception's text could quote data.  ``debug=True`` (or the
    environment variable ``DPFLOW_DEBUG=1`` when ``debug`` is ``None``) keeps it, with its traceback, as the
    error's cause.
    """
    engine = engine_of(backend)
    source = noise if noise is not None else SecureNoise()
    cert = certified(plan, exact_noise=source.exact)
    if budget_store is not None and source.seeded:
        raise ValueError("seeded noise (NOT FOR RELEASE) cannot be charged to a budget store: its values are "
                         "reproducible from the seed, not private. Fix: use SecureNoise (drop --seed) to release, "
                         "or run without the budget store (no --dataset) to test")
    if budget_store is None:
        if dataset is not None:
            raise ValueError("dataset= needs budget_store= (the store that accounts for it)")
        ex = execute(cert, data, source, engine, debug)
        return Result(ex.released, Report(cert.ledger, ex))
    if dataset is None:
        raise ValueError("budget_store= needs dataset=: the dataset id (or source -> id) the run is charged to")
    with budget_store.charge(cert.ledger, dataset) as charge:
        # a public schema refusal (before reading()) releases the reservation
        ex = execute(cert, data, source, engine, debug, reading=charge.reading)
    res = charge.reservation
    spent = {"store": budget_store.path, "plan_hash": res.plan_hash,
             "charges": [{"dataset": ds, "reservation": seq, "amount": str(amount)}
                         for (ds, seq), (_, amount) in zip(res.ids, res.amounts, strict=True)]}
    return Result(ex.released, Report(cert.ledger, ex, spent))


def engine_of(backend: Backend | str | None) -> Backend:
    """The execution engine: a backend object as it is, ``"numpy"`` (the default) or ``"dask"``
    (:class:`dpflow.interpreter.dask_backend.DaskBackend` on dask's current scheduler; needs the
    ``dask`` extra).

    >>> engine_of(None).name, engine_of("numpy").name
    ('numpy', 'numpy')
    """
    if backend is None or backend == "numpy":
        return NumpyBackend()
    if backend == "dask":
        from dpflow.interpreter.dask_backend import DaskBackend

        return DaskBackend()
    if isinstance(backend, str):
        raise ValueError(f"unknown backend {backend!r}: use 'numpy', 'dask' or a backend object")
    return backend


def check(plan: Plan, exact_noise: bool = True) -> Ledger:
    """Certify ``plan`` (no data is read) and return its ledger; raises a :class:`dpflow.PlanError`
    naming the node and the fix if it cannot be certified.

    The ledger is the one a default run charges: ``exact_noise=True`` certifies for the default
    :class:`dpflow.SecureNoise` (exact discrete noise); pass ``exact_noise=False`` to preview a run with
    a continuous noise source (``SeededNoise()``), which may rest Gaussian mechanisms on the tighter
    Gaussian-DP or PLD accounting (docs/privacy.md "Noise").

    >>> import dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=2), n=100)
    >>> check(b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))).totals[0].rho
    Fraction(1, 2)
    """
    return certified(plan, exact_noise).ledger


@attrs.frozen
class _Api:
    def check(self, plan: Plan, exact_noise: bool = True) -> Ledger:
        return check(plan, exact_noise)

    def run(self, plan: Plan, data: Mapping[str, Any] | np.ndarray, **options: Any) -> Result:
        return run(plan, data, **options)


register_entry(_Api())
