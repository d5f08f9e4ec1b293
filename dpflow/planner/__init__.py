"""Static analysis: type and sensitivity inference, budget allocation, composition, the ledger."""

from dpflow.planner.certify import Accounting, Certified, InvocationTable, ModeChoice, TypedScope, certify
from dpflow.planner.ledger import Ledger, LedgerEntry, SourceTotal

__all__ = [
    "Accounting", "Certified", "InvocationTable", "Ledger", "LedgerEntry", "ModeChoice", "SourceTotal", "TypedScope",
    "certify",
]
