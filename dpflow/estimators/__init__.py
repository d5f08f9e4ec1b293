"""Ready-made plans from the literature, written in dpflow's own DSL.

Each function returns a :class:`dpflow.Plan` (inspect it, ``check()`` it, ``run()`` it).
"""

from dpflow.estimators.covariance import naive_pce
from dpflow.estimators.mean import clipped_mean
from dpflow.estimators.tails import chi_radius

__all__ = ["chi_radius", "clipped_mean", "naive_pce"]
