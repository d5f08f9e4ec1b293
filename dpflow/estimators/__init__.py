"""Ready-made plans from the literature, written in dpflow's own DSL.

Each function returns a :class:`dpflow.Plan` (inspect it, ``check()`` it, ``run()`` it).
"""

from dpflow.estimators import (
    base,
    covariance,
    discrete,
    gaussian,
    heavy_tailed,
    mean,
    mixtures,
    pca,
    product,
    regression,
    scale,
    sparse,
    tails,
    tolerance,
    truncation,
)
from dpflow.estimators.covariance import naive_pce
from dpflow.estimators.gaussian_model import Covariance
from dpflow.estimators.mean import clipped_mean
from dpflow.estimators.mixtures import GaussianMixture
from dpflow.estimators.pca import PCA
from dpflow.estimators.regression import LinearRegression
from dpflow.estimators.scale import StandardScaler
from dpflow.estimators.sparse import sparse_mean
from dpflow.estimators.tails import chi_radius

__all__ = [
    "Covariance", "GaussianMixture", "LinearRegression", "PCA", "StandardScaler", "base", "chi_radius", "clipped_mean",
    "covariance", "discrete", "gaussian", "gaussian_model", "heavy_tailed", "mean", "mixtures", "naive_pce", "pca",
    "product",
    "regression", "scale", "sparse", "sparse_mean", "tails", "tolerance", "truncation",
]
