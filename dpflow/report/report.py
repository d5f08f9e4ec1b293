"""The auditable report of a run and the top-level ``run`` function."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from dpflow.budget import BudgetStore
from dpflow.interpreter.noise import NoiseSource, SecureNoise
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import Execution, execute, prepare_data
from dpflow.nodes.base import Backend
from dpflow.plan.graph import Plan
from dpflow.planner.certify import certify
from dpflow.planner.ledger import Ledger
from dpflow.report.markdown import render_markdown

REPORT_SCHEMA = "dpflow.report/1"


def _jsonable(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, (tuple, list)):
        return [_jsonable(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    return x


@attrs.frozen(eq=False)
class Report:
    """What was released, under which guarantee, and why it holds.  Holds no private data.

    >>> import numpy as np, dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=2), n=100)
    >>> res = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))).run(
    ...     {"X": np.zeros((100, 2))}, noise=dp.SeededNoise(0))
    >>> res.report.to_data()["run"]["seeded"]
    True
    """

    ledger: Ledger
    execution: Execution
    budget: dict[str, Any] | None = None

    def to_data(self) -> dict[str, Any]:
        """The report as JSON data."""
        ex = self.execution
        extra = {} if self.budget is None else {"budget": self.budget}
        return extra | {
            "schema": REPORT_SCHEMA,
            "ledger": self.ledger.to_data(),
            "released": _jsonable(ex.released),
            "run": {
                "noise": ex.noise,
                "seeded": ex.seeded,
                "release_status": "NOT FOR RELEASE (seeded noise)" if ex.seeded else "releasable",
                "backend": ex.backend,
                "noise_scales": _jsonable(ex.facts),
            },
        }

    def summary(self) -> str:
        """The ledger's summary (costs, totals and accuracy warnings) and the run's noise source.

        >>> import numpy as np, dpflow as dp
        >>> from dpflow import nodes as N
        >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
        >>> X = b.source("X", dp.Vectors(d=2), n=100)
        >>> res = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))).run(
        ...     {"X": np.zeros((100, 2))}, noise=dp.SeededNoise(0))
        >>> res.report.summary().splitlines()[-1].endswith("NOT FOR RELEASE")
        True
        """
        return f"{self.ledger.summary()}\nrun: noise {self.execution.noise}"

    def to_json(self, indent: int | None = 2) -> str:
        """JSON text (sorted keys)."""
        return json.dumps(self.to_data(), sort_keys=True, indent=indent, allow_nan=True)

    def to_markdown(self) -> str:
        """A readable page."""
        return render_markdown(self.to_data())

    def write(self, directory: str | Path) -> list[Path]:
        """Write ``report.json`` and ``report.md`` into ``directory``; return the paths."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        paths = [d / "report.json", d / "report.md"]
        paths[0].write_text(self.to_json() + "\n")
        paths[1].write_text(self.to_markdown())
        return paths


@attrs.frozen(eq=False)
class Result:
    """Released values and the report of one run."""

    released: dict[str, Any]
    report: Report


def run(
    plan: Plan,
    data: Mapping[str, Any],
    noise: NoiseSource | None = None,
    backend: Backend | None = None,
    budget_store: BudgetStore | None = None,
    dataset: str | Mapping[str, str] | None = None,
) -> Result:
    """Certify ``plan`` and run it on ``data`` (source name -> array).

    ``noise`` defaults to :class:`dpflow.SecureNoise` (OS entropy).  Public schema
    errors (shape, dtype, declared n, unknown sources) raise before any value is used.
    With ``budget_store`` (a :class:`dpflow.budget.BudgetStore`) the certified cost is
    reserved on ``dataset`` (one id, or plan source -> id) before any data is read,
    released if the public schema check fails, and committed otherwise (also when the
    run fails after data was read); the report records the reservation.
    """
    cert = certify(plan)
    source = noise if noise is not None else SecureNoise()
    if budget_store is None:
        if dataset is not None:
            raise ValueError("dataset= needs budget_store= (the store that accounts for it)")
        ex = execute(cert, data, source, backend or NumpyBackend())
        return Result(ex.released, Report(cert.ledger, ex))
    if dataset is None:
        raise ValueError("budget_store= needs dataset=: the dataset id (or source -> id) the run is charged to")
    with budget_store.charge(cert.ledger, dataset) as charge:
        prepared = prepare_data(cert, data)  # public schema only: a refusal here releases the reservation
        charge.reading()
        ex = execute(cert, prepared, source, backend or NumpyBackend())
    res = charge.reservation
    spent = {"store": budget_store.path, "plan_hash": res.plan_hash,
             "charges": [{"dataset": ds, "reservation": seq, "amount": str(amount)}
                         for (ds, seq), (_, amount) in zip(res.ids, res.amounts, strict=True)]}
    return Result(ex.released, Report(cert.ledger, ex, spent))
