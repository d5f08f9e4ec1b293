"""Static analysis: type and sensitivity inference, budget allocation, composition, the ledger."""

from dpflow.planner.certify import Certified, certify
from dpflow.planner.ledger import Ledger, LedgerEntry, SourceTotal

__all__ = ["Certified", "Ledger", "LedgerEntry", "SourceTotal", "certify"]
