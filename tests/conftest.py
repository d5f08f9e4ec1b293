"""Shared helpers for the plan, planner, interpreter and sensitivity tests."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

# The venv's editable install of dpflow was made when the package directories had no
# ``__init__.py`` yet, so outside the repository root ``import dpflow`` resolves to an
# empty namespace package (no ``dpflow.PlanBuilder``).  Put the repository root first.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
_stale = sys.modules.get("dpflow")
if _stale is not None and getattr(_stale, "__file__", None) is None:
    for _name in [m for m in sys.modules if m == "dpflow" or m.startswith("dpflow.")]:
        del sys.modules[_name]

from dpflow.domains import Sym  # noqa: E402
from dpflow.interpreter.numpy_backend import NumpyBackend  # noqa: E402
from dpflow.interpreter.run import execute  # noqa: E402
from dpflow.planner.certify import Certified  # noqa: E402


class ZeroNoise:
    """A noise source whose draws are all zero: mechanisms then output their input statistic."""

    description = "zero noise (tests only): NOT FOR RELEASE"
    seeded = True

    def __init__(self) -> None:
        self.calls = 0

    def normal(self, sigma: float, shape: tuple[int, ...]) -> np.ndarray:
        self.calls += 1
        return np.zeros(shape)

    def laplace(self, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        self.calls += 1
        return np.zeros(shape)


def run_zero(cert: Certified, data: Mapping[str, Any]) -> dict[str, Any]:
    """Execute a certified plan with zero noise; the released values are the pre-noise statistics."""
    return execute(cert, data, ZeroNoise(), NumpyBackend()).released


def bound_value(bound: Sym, env: Mapping[str, float] | None = None) -> float:
    """A declared sensitivity as a number (``env`` holds the run-time names it refers to)."""
    return bound.coef if bound.is_const else bound.value(env)
