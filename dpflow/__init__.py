"""dpflow: differentially private statistics as certified, auditable estimation plans.

>>> import numpy as np
>>> import dpflow as dp
>>> from dpflow import nodes as N
>>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="replace")
>>> X = b.source("X", dp.Vectors(d=3), n=1000)
>>> plan = b.build(mean=N.GaussianMech()(N.Mean()(N.Clip(radius=2.0)(X))))
>>> ledger = plan.check()                     # static: no data read
>>> res = plan.run({"X": np.zeros((1000, 3))}, noise=dp.SeededNoise(7))
>>> res.released["mean"].shape
(3,)
"""

import importlib
from typing import TYPE_CHECKING

from dpflow import nodes
from dpflow._version import __version__
from dpflow.api import Result, run
from dpflow.domains import (
    BooleanCube,
    Ordinal,
    Reals,
    ReleasedNorm,
    ReleasedScalar,
    RowCount,
    Sym,
    SymmetricMatrices,
    Vectors,
)
from dpflow.errors import (
    AccuracyError,
    AccuracyWarning,
    BudgetError,
    DataError,
    DomainError,
    DpflowError,
    PlanError,
    PlanReferenceError,
    PlanTypeError,
    PostProcessingError,
    SerializationError,
    UnboundedSensitivityError,
    UnknownNameError,
    UnknownSourceError,
)
from dpflow.handles import Released, Sensitive
from dpflow.interpreter.noise import NoiseSource, SecureNoise, SeededNoise
from dpflow.plan import Plan, PlanBuilder
from dpflow.planner import Ledger, certify
from dpflow.privacy import ZCDP, ApproxDP, ApproxZCDP, PureDP
from dpflow.report import Report
from dpflow.tables import Category

if TYPE_CHECKING:
    from dpflow import estimators, stats

_LAZY = ("estimators", "stats")
"""Subpackages imported on first use (``dp.stats.mean``), not by ``import dpflow``: with the estimators they
pull in, they are most of dpflow's own import time."""


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return importlib.import_module(f"dpflow.{name}")
    raise AttributeError(f"module 'dpflow' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])

__all__ = [
    "AccuracyError", "AccuracyWarning", "ApproxDP", "ApproxZCDP", "BooleanCube", "BudgetError", "Category",
    "DataError", "DomainError", "DpflowError",
    "Ledger", "NoiseSource", "Ordinal", "Plan", "PlanBuilder", "PlanError", "PlanReferenceError",
    "PlanTypeError", "PostProcessingError", "PureDP", "Reals", "Released", "ReleasedNorm", "ReleasedScalar", "Report",
    "Result", "RowCount", "SecureNoise",
    "SeededNoise", "Sensitive", "SerializationError", "Sym", "SymmetricMatrices", "UnboundedSensitivityError",
    "UnknownNameError", "UnknownSourceError", "Vectors", "ZCDP", "__version__", "certify", "estimators", "nodes", "run",
    "stats",
]
