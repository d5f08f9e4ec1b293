"""The ledger: the certificate a plan gets from the planner.

Frozen, schema-versioned data; canonical JSON; the single source of every report.
It holds no data and no digest of data: only the plan, public parameters and
the privacy derivation.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from dpflow.plan.serialize import canonical
from dpflow.privacy import Conversion

LEDGER_SCHEMA = "dpflow.ledger/1"


@attrs.frozen
class LedgerEntry:
    """One node: what it reads, its sensitivity and how it was derived, its noise and cost."""

    node: str
    kind: str
    input: str
    output: str
    sensitivity: str
    derivation: str
    noise: str
    cost: str
    rule: str
    reference: str


@attrs.frozen
class SourceTotal:
    """The composed per-record cost on one source, in its native measures and in (eps, delta)."""

    source: str
    measure: str
    rho: str
    delta0: str
    pure_eps: str | None
    gdp_mu: float | None
    budget_used: str
    conversions: tuple[Conversion, ...]

    def tightest(self) -> Conversion:
        """The conversion used for the headline (epsilon, delta)."""
        return next(c for c in self.conversions if c.tightest)


@attrs.frozen
class Ledger:
    """The certificate of a plan.

    >>> import dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=2), n=100)
    >>> ledger = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))).check()
    >>> ledger.totals[0].rho
    '1/2'
    """

    plan_name: str
    plan_hash: str
    dpflow_version: str
    neighbors: str
    budget: str
    allocation: str
    report_delta: float
    entries: tuple[LedgerEntry, ...]
    totals: tuple[SourceTotal, ...]
    composition: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    schema: str = LEDGER_SCHEMA

    def to_data(self) -> dict[str, Any]:
        """The ledger as JSON data."""
        data: dict[str, Any] = attrs.asdict(self, recurse=True)
        return data

    def to_json(self, indent: int | None = None) -> str:
        """Canonical JSON (or indented, for reading)."""
        data = self.to_data()
        return canonical(data) if indent is None else json.dumps(data, sort_keys=True, indent=indent)

    @staticmethod
    def from_json(text: str) -> Ledger:
        """Read a ledger written by :meth:`to_json`."""
        d = json.loads(text)
        if d.get("schema") != LEDGER_SCHEMA:
            raise ValueError(f"not a {LEDGER_SCHEMA} document")
        d["entries"] = tuple(LedgerEntry(**e) for e in d["entries"])
        d["totals"] = tuple(
            SourceTotal(**{**t, "conversions": tuple(Conversion(**c) for c in t["conversions"])})
            for t in d["totals"]
        )
        d["composition"] = tuple(d["composition"])
        d["warnings"] = tuple(d["warnings"])
        return Ledger(**d)

    def summary(self) -> str:
        """A short readable summary: mechanisms, their costs, and the totals."""
        lines = [f"plan {self.plan_name} ({self.plan_hash[:19]}), neighbours: {self.neighbors}",
                 f"budget: {self.budget}; {self.allocation}"]
        for e in self.entries:
            if e.noise:
                lines.append(f"  {e.node:<28} {e.sensitivity:<34} {e.cost}")
        for t in self.totals:
            best = t.tightest()
            lines.append(
                f"source {t.source}: {t.measure} ({t.budget_used} of the budget); "
                f"({best.epsilon:.6g}, {best.delta:.3g})-DP by {best.rule}"
            )
        lines.extend(f"warning: {w}" for w in self.warnings)
        return "\n".join(lines)
