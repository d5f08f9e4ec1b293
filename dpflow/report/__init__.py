"""Reports: the ledger, the released values and the run settings, as JSON and Markdown."""

from dpflow.report.report import NOT_FOR_RELEASE, Report, prepare_report_dir

__all__ = ["NOT_FOR_RELEASE", "Report", "prepare_report_dir"]
