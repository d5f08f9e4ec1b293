"""Ready-made plans from the literature, written in dpflow's own DSL.

Each function returns a :class:`dpflow.Plan` (inspect it, ``check()`` it, ``run()`` it).
"""

from dpflow.estimators import discrete, gaussian, heavy_tailed, product
from dpflow.estimators.covariance import naive_pce
from dpflow.estimators.mean import clipped_mean
from dpflow.estimators.regression import LinearRegression
from dpflow.estimators.sparse import sparse_mean
from dpflow.estimators.tails import chi_radius

__all__ = [
    "LinearRegression", "chi_radius", "clipped_mean", "discrete", "gaussian", "heavy_tailed", "naive_pce", "product",
    "sparse_mean",
]
