"""Static analysis: type and sensitivity inference, budget allocation, composition, the ledger."""

from dpflow.planner.allocate import InvocationTable
from dpflow.planner.certify import Certified, certified, certify, clear_certificates
from dpflow.planner.infer import TypedScope
from dpflow.planner.ledger import Ledger, LedgerEntry, SourceTotal
from dpflow.planner.modes import Accounting, ModeChoice

__all__ = [
    "Accounting", "Certified", "InvocationTable", "Ledger", "LedgerEntry", "ModeChoice", "SourceTotal", "TypedScope",
    "certified", "certify", "clear_certificates",
]
