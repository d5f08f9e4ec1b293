"""Reports: the ledger, the released values and the run settings, as JSON and Markdown."""

from dpflow.report.report import Report, Result, run

__all__ = ["Report", "Result", "run"]
