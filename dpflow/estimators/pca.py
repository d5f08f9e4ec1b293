"""Private PCA as a scikit-learn transformer: Analyze Gauss (:func:`dpflow.nodes.pca.analyze_gauss`,
Dwork-Talwar-Thakurta-Zhang 2014 Alg. 1) on rows moved to a private centre.

The plan: the private per-column centres (medians, :func:`dpflow.estimators.scale.column_centres`, under the
share the scale step needs at this n: :func:`dpflow.estimators.scale.scale_weight`), the clipping radius (the
public ``radius`` bound on ``||x - centre||``, or :data:`RADIUS_FACTOR` times the private median of the centred
row norms, :func:`dpflow.estimators.truncation.private_radius`, under :data:`RADIUS_WEIGHT`), then the second
moment of the centred rows clipped to that ball with Gaussian noise (the rest of the budget).  The eigenvectors
and eigenvalues are post-processing (``fit``).

>>> import numpy as np, dpflow as dp
>>> X = np.random.default_rng(0).normal(size=(5000, 3)) * [5.0, 1.0, 0.2] + 100.0
>>> pca = PCA(2, budget=dp.ZCDP(1.0), noise=dp.SeededNoise(0)).fit(X)
>>> bool(abs(pca.components_[0, 0]) > 0.99), pca.transform(X).shape
(True, (5000, 2))
>>> sorted(name for name, _ in PCA(2, budget=dp.ZCDP(1.0)).make_plan(3, 5000).outputs)
['centre', 'radius', 'second_moment']
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpflow import nodes as N
from dpflow.domains import Vectors
from dpflow.errors import ParameterError
from dpflow.estimators.base import BUDGET, NOISE, Transformer, optional, positive
from dpflow.estimators.scale import SHARES, column_centres, scale_weight, warn_if_capped
from dpflow.estimators.truncation import private_radius
from dpflow.nodes.pca import analyze_gauss
from dpflow.plan import Plan, PlanBuilder
from dpflow.privacy import Measure

RADIUS_FACTOR = 3.0
"""Without a public ``radius`` the rows are clipped at this times the private median of ``||x - centre||``.
Gaussian rows of one dominant direction (the worst case: norms spread most) have median norm 0.674 sigma, so
the ball holds 95% of them (2.02 sigma) and the clipped second moment keeps about 0.9 of the variance; in more
dimensions the norms concentrate and the ball holds nearly all rows.  The noise grows as the radius squared: a
public ``radius`` (a bound on ``||x - centre||``) avoids both the search and the clipping's bias."""

RADIUS_WEIGHT = 0.1
"""The private radius's share of the budget (half locates the norms' range, half finds their median)."""


class PCA(Transformer):
    """Differentially private PCA (Analyze Gauss; see the module docstring): ``fit`` releases the centre
    (``mean_``: the private column medians) and the noisy second moment about it, whose top ``n_components``
    eigenvectors are ``components_`` (rows, largest variance first, each signed so that its largest entry is
    positive) and eigenvalues ``explained_variance_`` (floored at 0: the noise can push small ones below;
    ``explained_variance_ratio_`` over the sum of all floored eigenvalues).  ``transform`` projects
    ``(x - mean_)`` onto the components, ``inverse_transform`` maps back (post-processing).  ``radius`` is an
    optional public bound on ``||x - centre||`` (rows beyond it are clipped); :meth:`make_plan` is the plan for
    d features and n rows before any data.  ``budget`` must allow Gaussian noise (zCDP or approximate DP).
    """

    constraints = {"n_components": positive(integer=True), "budget": BUDGET, "radius": optional(positive()),
                   "noise": NOISE}

    def __init__(self, n_components: int, budget: Measure, radius: float | None = None, noise: Any = None) -> None:
        self.n_components, self.budget, self.radius, self.noise = n_components, budget, radius, noise

    def make_plan(self, d: int, n: int) -> Plan:
        """The plan ``fit`` runs on n rows of d features (outputs ``centre``, ``radius``, ``second_moment``): the
        parameters are checked (``n_components <= d``) and nothing is read or charged."""
        self.validate_params()
        if self.n_components > d:
            raise ParameterError("PCA", f"n_components={self.n_components} exceeds the number of features, "
                                 f"n_features = {d}", f"pass n_components <= {d}")
        b = PlanBuilder(budget=self.budget, neighbors="replace", name="pca")
        X = b.source("X", Vectors(d=d), n=n)
        need, capped = scale_weight(n, d, self.budget)
        warn_if_capped(b, n, d, capped)
        w_centre = need * (SHARES[0] + SHARES[1])
        centre = column_centres(X, d, w_centre)
        if self.radius is None:
            centred = N.Project(center=centre)(X)
            r: Any = private_radius(centred, of="rows", factor=RADIUS_FACTOR, weight=RADIUS_WEIGHT / 2,
                                    range_weight=RADIUS_WEIGHT / 2)
            rest = 1.0 - w_centre - RADIUS_WEIGHT
        else:
            r, rest = N.param(b, "radius", float(self.radius), "public bound on ||x - centre||"), 1.0 - w_centre
        return b.build(centre=centre, radius=r, second_moment=analyze_gauss(X, r, centre, rest))

    def fit(self, X: Any, y: Any = None) -> PCA:
        """Release the centre and the noisy second moment of ``X`` (n x d array or DataFrame); ``y`` is ignored."""
        self.validate_params()
        Xa = self._rows(X, reset=True)
        plan = self.make_plan(Xa.shape[1], Xa.shape[0])
        result = plan.run({"X": Xa}, noise=self._noise())
        S = np.nan_to_num(np.asarray(result.released["second_moment"], dtype=float))
        w, V = np.linalg.eigh((S + S.T) / 2.0)
        order = np.argsort(w)[::-1][: int(self.n_components)]
        comps = V[:, order].T
        signs = np.sign(comps[np.arange(len(order)), np.argmax(np.abs(comps), axis=1)])
        self.components_ = comps * np.where(signs == 0, 1.0, signs)[:, None]
        values = np.maximum(w, 0.0)
        self.explained_variance_ = values[order]
        total = float(values.sum())
        self.explained_variance_ratio_ = self.explained_variance_ / total if total > 0 else np.zeros(len(order))
        self.mean_ = np.asarray(result.released["centre"], dtype=float).reshape(-1)
        self.n_components_ = len(order)
        self.report_, self.plan_ = result.report, plan
        return self

    def transform(self, X: Any) -> np.ndarray:
        """``(x - mean_) components_^T`` per row (post-processing)."""
        self._require_fitted("transform")
        out: np.ndarray = (self._rows(X, reset=False) - self.mean_) @ self.components_.T
        return out

    def inverse_transform(self, X: Any) -> np.ndarray:
        """``z components_ + mean_`` per row: projected rows back in the data's space (post-processing)."""
        self._require_fitted("inverse_transform")
        Z = np.asarray(X, dtype=float)
        if Z.ndim != 2 or Z.shape[1] != self.n_components_:
            raise ParameterError("PCA", f"X has shape {Z.shape}", f"pass rows of {self.n_components_} components")
        out: np.ndarray = Z @ self.components_ + self.mean_
        return out
