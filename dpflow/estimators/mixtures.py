"""Private learning of separated Gaussian mixtures (Kamath-Sheffet-Singhal-Ullman 2019; docs/spec/mixtures.md):
the parts from sample-and-aggregate (the default) or from the recursive partition RPGMP (terrific balls in
the privately projected space, depth k - 1, at most k parts), then PGME's per-part estimation, and
:class:`GaussianMixture` with a scikit-learn surface.

Only weak public bounds are used: the means lie in a ball of radius ``radius`` around the origin and the
component scales in ``sigma_range``.  The plan finds a bounding ball privately (coordinate-wise private
medians, then ``AboveThreshold`` over the counts of nested balls, mixtures.md 5.3), then splits the rows
into parts.

``method="sample_aggregate"`` (mixtures.md 8, the default: :data:`DEFAULT_METHOD`): disjoint blocks of a few
rows per component, a non-private k-means per block, and a group-level 1-cluster over the blocks' k-tuples
of centres that counts each block at most once per cell, whatever order its k-means put the centres in
(``dpflow.nodes.tuples``: self-scaled cells in the private top-k projection, ``GaussianStabilityHistogram``);
the rows are then split by their nearest released location, the k parts.  It finds the parts at sample
sizes where RPGMP's radius search cannot (``benchmarks/results/mixtures.md``).  With ``means="blocks"`` the
means are instead private averages of the blocks' matched centres (mixtures.md 8, step 4; measured less
accurate: :data:`MEANS`).

``method="rpgmp"`` (mixtures.md 5): projects onto the top-k eigenvectors of a noisy second moment (Analyze
Gauss, 2.9) and splits by terrific balls, breadth first (4.3, 5.2): one ``PartitionTree`` of depth k - 1 and
at most k parts whose body (a terrific ball, the value partition by it, a leaf's estimates) is certified once;
the planner charges two root-to-leaf paths (``planner.ledger.tree_rule``).

Each part (leaf) is then estimated: a noisy count, a mean in two steps (within the bounding ball or from the
part's released location, then within the radius that holds 97% of the part's rows, found by
``AboveThreshold``) and a covariance from the Gram matrix about that mean (from a released location, over
the 97% radius measured again about the mean: :data:`RECENTRE_SHARE`).  Parts whose noisy count is below
``t / 2`` are empty: fewer parts than asked for is a released outcome (``GaussianMixture.n_found_``).

Raw-scale data (``standardize=True``, the default of :class:`GaussianMixture` when neither ``radius`` nor
``sigma_range`` is given: then :data:`SCALED_RADIUS_PER_COORD`, :data:`SCALED_SIGMA_RANGE`): the private
per-column scale step (:func:`dpflow.estimators.scale.column_scales`) releases a centre ``c`` and scale ``s``
per column first, the plan above runs on ``(x - c) / s`` (the public bounds then in units of ``s``), and the
released means and covariances are mapped back (``c + s mu``, ``diag(s) Sigma diag(s)``: post-processing).

Accuracy contract (issue 29): before data, :func:`predict_centres` predicts the centre error (max over the
components, l2, confidence 0.9) from the certified plan, or "not found" (infinite) when the plan cannot find the
parts at this n and budget (the cell histogram's threshold out of reach, or a radius search whose margin stops
it); it is recorded in ``Ledger.predictions`` and checked against ``max_error`` (``strict=True`` refuses before
data).  Fewer parts than asked for is the typed :class:`NotFound` (``GaussianMixture.not_found_``) with an
:class:`dpflow.errors.AccuracyWarning`; every mean found is projected onto its public ball (post-processing).

``method="warmup"`` is Algorithm 1 (mixtures.md 7) for strongly bounded spherical mixtures: no private
bounding step (``radius`` is taken to bound the means tightly: every row is clipped to the public ball it
implies), one Analyze Gauss, k - 1 terrific balls one after the other on the rows outside the earlier ones,
and spherical covariances (``sigma^2 I``, the mean eigenvalue of each part's covariance).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import attrs
import numpy as np

from dpflow import nodes as N
from dpflow.domains import Vectors
from dpflow.errors import AccuracyWarning, DomainError
from dpflow.estimators.base import BOOLEAN, BUDGET, NOISE, Constraint, Estimator, one_of, optional, positive
from dpflow.estimators.gaussian import steps
from dpflow.estimators.scale import stack
from dpflow.estimators.tolerance import STEP_MAY_FAIL
from dpflow.nodes.base import released_scalar
from dpflow.plan import Plan, PlanBuilder
from dpflow.plan.graph import require_budget
from dpflow.planner.accuracy import Prediction
from dpflow.privacy import ApproxDP, ApproxZCDP, Measure, to_float_down

__all__ = ["GaussianMixture", "NotFound", "gaussian_mixture_plan", "predict_centres"]

CONFIDENCE = 0.9
"""The confidence of the predicted centre error."""

CELL_SHARE = 0.2
"""The share of the sample-and-aggregate groups the weakest component's largest cell holds: the low end
measured in :func:`sa_div` (81 of 400 groups).  Public: the prediction says "not found" when this share of
the groups is below the cell histogram's release threshold."""

SCALED_RADIUS_PER_COORD, SCALED_SIGMA_RANGE = 4.0, (0.01, 2.0)
"""The public bounds used without any (``GaussianMixture`` with neither ``radius`` nor ``sigma_range``: the
scale step runs first): means within ``4 sqrt(d)`` and component scales in ``[0.01, 2]`` in units of the
released column scales (a component is at most as wide as its column)."""


@attrs.frozen
class NotFound:
    """The typed "not found" of :class:`GaussianMixture`: fewer components than asked for were released
    (``n_found`` of ``n_components``), and why (``reason``: the public prediction when n is too small for the
    budget, else the separation the estimator needs)."""

    n_components: int
    n_found: int
    reason: str


def _feasibility(plan: Plan) -> tuple[float, float, str]:
    """What a certified mixture plan can find, before data: the release threshold of the sample-and-aggregate
    cell histogram (``inf`` when there is none), the rho of the noisiest leaf-mean sum, and the text of a
    radius search that cannot run (an ``AboveThreshold`` with a public threshold whose accuracy margin at its
    certified epsilon lowers it below its ``min_threshold``: it releases "not found" whatever the data, as
    RPGMP's and the warm-up's terrific balls do at small n), or ``""``."""
    from fractions import Fraction

    from dpflow.nodes.sparse_vector import AboveThreshold, margin, svt_split
    from dpflow.nodes.stability import GaussianStabilityHistogram

    records = _records_by_path(plan.records)
    thr, rho_sum, blocked = math.inf, math.inf, ""
    for e in plan.check().entries:
        rec = records.get(e.node)
        if rec is None or e.event is None:
            continue
        node, cost, scope = rec.node, e.event.cost, e.node[:e.node.rfind("/") + 1]  # "" at the top level
        if isinstance(node, GaussianStabilityHistogram) and cost.rho is not None:
            thr = node.scale_threshold(4.0, 2.0, Fraction(cost.rho))[1]  # group counts, replace: l1 4, l2 2
        elif (node.kind == "GaussianMech" and cost.rho is not None
              and records[scope + rec.inputs[0]].node.kind == "Sum"):
            rho_sum = min(rho_sum, float(cost.rho))
        elif (isinstance(node, AboveThreshold) and isinstance(node.threshold, float) and node.min_threshold is not None
              and node.margin_beta is not None and cost.pure_eps is not None and "=" in e.sensitivity):
            delta = float(e.sensitivity.rsplit("=", 1)[1])
            m = len(getattr(records[scope + rec.inputs[0]].node, "radii", ())) or 1
            eps1, eps2 = svt_split(Fraction(cost.pure_eps))
            alpha = margin(delta, m, float(eps1), float(eps2), node.margin_beta)
            if node.threshold - alpha < node.min_threshold and not blocked:
                blocked = (f"the radius search {e.node} cannot run: its accuracy margin {alpha:.4g} at the certified "
                           f"epsilon lowers its threshold {node.threshold:.4g} below {node.min_threshold:.4g}")
    return thr, rho_sum, blocked


def _records_by_path(records: Any, prefix: str = "") -> dict[str, Any]:
    """The records of a plan and of its control bodies, by node path (as the ledger's entries name them)."""
    out: dict[str, Any] = {}
    for r in records:
        out[prefix + r.id] = r
        body = getattr(r.node, "body", None)
        if body is not None:
            out |= _records_by_path(body.records, f"{prefix}{r.id}/")
    return out


def predict_centres(plan: Plan, n: int, d: int, k: int, w_min: float, radius: float, sigma_max: float,
                    method: str, units: str, scale_capped: bool = False) -> tuple[Prediction, str]:
    """The predicted centre error (max over the components, l2, at :data:`CONFIDENCE`) of a certified mixture
    plan, from public facts only, and the feasibility text.  Sample-and-aggregate with k >= 2 finds the parts
    only if the weakest component's largest cell (:data:`CELL_SHARE` of the ``n // block_size`` groups)
    clears the cell histogram's release threshold: if not, the prediction is infinite ("not found" is
    expected).  Otherwise, given separation at least ``(sqrt k + 2 / sqrt w_min) sigma`` (the AM05-type
    condition, :data:`DEFAULT_METHOD`), each part's second mean is a clipped sum over the ball of radius
    ``gram_widen(d) sigma_max sqrt(chi2_d^-1(0.97))`` (l2 sensitivity twice that, Gaussian noise at the plan's
    certified rho) over at least ``t = w_min n / 2`` rows, plus the sampling error ``sigma_max chi_d / sqrt t``
    (a union bound over the k components).  Never above ``2 radius`` (the means are clamped into their ball).
    ``given`` states the separation; when the scale step ran with a capped share (``scale_capped``: its units
    may be far off) the prediction is conditional on the step succeeding
    (:data:`dpflow.estimators.tolerance.STEP_MAY_FAIL`: the tolerance sees it as infinite).
    RPGMP and the warm-up: infinite when a terrific ball's radius search cannot run at this n and budget
    (:func:`_feasibility`), else the same per-part terms (their second mean is not widened).
    :class:`GaussianMixture` compares sample-and-aggregate's and RPGMP's predictions (``choose_route``) unless
    ``method=`` forces one."""
    t = max(1.0, w_min * n / 2)
    clamp = 2.0 * radius
    need = f"separation >= (sqrt k + 2 / sqrt w_min) sigma = {math.sqrt(k) + 2 / math.sqrt(w_min):.3g} sigma"
    thr, rho_sum, blocked = _feasibility(plan)
    groups = n // block_size(n, k, w_min)
    if k >= 2 and blocked:
        why = f"n={n} rows are too few for {method} at this budget: {blocked}"
        return Prediction("means", "l2 (max over components)", math.inf, CONFIDENCE, why, method), why
    if k >= 2 and method == "sample_aggregate" and CELL_SHARE * groups < thr:
        why = (f"n={n} rows give {groups} groups of {block_size(n, k, w_min)} rows; the weakest component's cell "
               f"holds about {CELL_SHARE:g} of them ({CELL_SHARE * groups:.3g}) and the cell histogram releases "
               f"only cells above {thr:.4g} groups: the components cannot be found at this n and budget")
        return Prediction("means", "l2 (max over components)", math.inf, CONFIDENCE, why, method), why
    given = need
    if scale_capped:
        given = (f"{STEP_MAY_FAIL} (n={n} rows are too few for a reliable step of {d} columns under this budget: "
                 f"its share is capped, and when it fails the standardised units are off by orders of magnitude); "
                 f"{need}")
    from scipy import stats

    q = 1.0 - (1.0 - CONFIDENCE) / (2 * k)
    chi = math.sqrt(float(stats.chi2.ppf(q, d)))
    rg = (gram_widen(d) if method == "sample_aggregate" else 1.0) * sigma_max * math.sqrt(
        float(stats.chi2.ppf(0.97, d)))
    noise = 2.0 * rg / math.sqrt(2.0 * rho_sum) * chi / t if rho_sum < math.inf else 0.0
    err = min(noise + sigma_max * chi / math.sqrt(t), clamp)
    return Prediction("means", "l2 (max over components)", err, CONFIDENCE,
                      f"clipped ball mean noise + sampling over t={t:.0f} rows per part {units}; method={method!r}",
                      method, given), ""


BETA = 0.05
"""Failure probability of each accuracy margin (AboveThreshold, terrific certification): mixtures.md 10."""

WEIGHTS = {"locate": 0.05, "pca": 0.1, "partition": 0.6, "leaves": 0.25}
"""Relative budget weights (mixtures.md 10's global split, with the localisation made explicit, shifted to
the partition: its radius search needs ``t`` above its accuracy margin, the binding constraint measured in
the smoke runs of ``benchmarks/mixtures.py``); the planner turns them into shares under the tight
per-record fold and shows every share in the ledger."""


WEIGHTS_SA = {"locate": 0.05, "pca": 0.1, "cells": 0.5, "leaves": 0.5}
"""Relative budget weights of ``method="sample_aggregate"``: the bounding ball, Analyze Gauss (d > k only),
the group-level cell histogram, and the per-part estimates."""

METHODS = ("rpgmp", "sample_aggregate", "warmup")

DEFAULT_METHOD = "sample_aggregate"
"""The default ``method``.  Measured (``benchmarks/results/mixtures.md``, ``mixtures_full.md`` and
``mixtures_full_rpgmp*.md``, (2, 1e-6)-DP, dpflow told only ``||mu|| <= 1e4``, medians of 3 trials):
sample-and-aggregate finds all parts from n = 2000 where RPGMP's radius search finds one (k = 2, d = 2 and 10,
n = 2000; k = 3, d = 5, n = 2000 and 4000; k = 3, d = 2 and 10, n = 5000); its centre error is below diffprivlib
KMeans's (given the true bounds) in 71 of the 72 cells of the full grid; its covariance error is at or below
RPGMP's in 10 of the 12 cells of the small grid and at k = 2, d = 50, n = 40,000 (0.47 against 0.57); its centre
error is within 25% of RPGMP's where both find the parts (k = 2, d = 10, n = 8000: 0.15 against 0.12); and it
runs 14 to 375 times faster where both find the parts (n = 4000 to 16,000).  The one miss of the full grid,
k = 5, d = 2, nominal separation 20, n = 5000 (2 of 5 parts found), is outside the paper's conditions: the
benchmark's random directions put the closest two means 6.5, 3.1 and 1.7 sigma apart in its three seeds, below
the AM05-type separation ``(sqrt k + 1/sqrt w_i + 1/sqrt w_j) sigma`` = 6.7 sigma (mixtures.md 7, up to constants
and log factors) in two of them; from n = 10,000 the 3.1-sigma seed is found too.  RPGMP (the paper's main
algorithm) stays available as ``method="rpgmp"``; it is needed when ``min(k, d) > 6``."""

MEANS = ("parts", "blocks")
"""Where the means of ``method="sample_aggregate"`` come from: each part's rows (``"parts"``, the default) or
a clipped mean over the blocks of each block's k-means centre nearest to the released location
(``"blocks"``, :func:`block_means`).  Measured (centre error, median of 3 seeds, (2, 1e-6)-DP, the
benchmark's data, same budget): k = 3, d = 5, n = 4000: parts 0.21, blocks 1.6; k = 2, d = 10, n = 4000:
0.31, 3.5; k = 3, d = 10, n = 10,000: 0.16, 1.9; k = 5, d = 50, n = 10,000: 0.80, 2.6; n = 40,000: 0.22,
2.1.  Why: a block centre of ``m`` rows is ``sqrt(k / m)`` as spread as a row (a smaller clip radius), but
one record moves a whole block answer, a location averages ``n / m`` block answers against a part's ``n / k``
rows, and the k means read the same blocks (sequential, where the parts are parallel): the noise comes out
about ``sqrt(m)`` times the parts'."""

BLOCK_MEAN_WEIGHT = 0.42
"""The block means' total weight, in units of a leaf's weight: what the per-part second means (0.21 of each
leaf, charged twice: a replaced record moves between two parts) cost, so both options spend the same
budget."""

SA_PER_PART = 3
"""Sample-and-aggregate blocks hold at least ``SA_PER_PART / w_min`` rows (each component expects 3 rows per
block): enough for a k-means on well-separated components, and as many groups as possible.  Measured (k = 3,
d = 5, n = 4000, the benchmark's data projected on the top 2 eigenvectors, 18 runs): the weakest component's
largest cell held at least 65, 98 and 104 groups with 6, 4 and 3 rows per component and block (more groups
outweigh the wider spread of each block's answers)."""

SA_GROUPS = 400
"""Blocks grow once n allows 400 groups: more groups only lower the histogram's relative noise, larger
blocks make each block's centres more accurate."""

PTB_SHARES = (0.5, 0.1, 0.1, 0.15, 0.15)
"""Shares of each terrific ball's budget: radius search, grid search, heavy cell, the two means,
certification (mixtures.md 10 has 35/10/10/25/20).  The radius search binds: its ``AboveThreshold`` over 50
radii has sensitivity ``3t`` and refuses to search (a public decision) when its margin exceeds ``t^2 / 2``.
Measured for k = 3, d = 5 at (2, 1e-6)-DP: with 35% the margin is ``779 t`` (ledger of
``gaussian_mixture_plan``), so no split below t = 1558 (n = 9,350): the "not found" of n <= 8,000 in the
benchmark; at 50% it is ``643 t`` (t >= 1286, n >= 7,716)."""


def sa_div(w: int) -> float:
    """Cells of the group-level histogram have a side of ``1 / (1.5 + sqrt(w))`` of the group's scale (its
    closest pair of centres rounded down to a power of two): above ``1 + sqrt(w)``, so that two components
    never merge (``dpflow.nodes.tuples.merged_cells``), and no larger, so that one component's block answers
    fall in few cells.  Measured (the benchmark's data, k = 3, d = 5 projected on 3 eigenvectors, 18 runs):
    the weakest component's largest cell held 81 to 134 (min, median) of the 400 groups at n = 4000, 38 to 66
    of 222 at n = 2000, against a release threshold of about 60 at (2, 1e-6)-DP.

    >>> round(sa_div(4), 2)
    3.5
    """
    return 1.5 + math.sqrt(w)


GRAM_WIDEN = 1.5
"""In d = 2 the Gram matrix of a leaf is taken over the ball of 1.5 times the radius holding 97% of its rows.
Measured (``tests/estimators/test_mixtures.py``, d = 2, n = 6000): at the 97% radius itself the truncation
biases the covariance about 14% low; at 1.5 times it the bias is within the noise.  Other dimensions use the
widening with the same truncation bias (:func:`gram_widen`)."""


def gram_widen(d: int) -> float:
    """The factor applied to a leaf's 97% radius for its Gram matrix (and, from a sample-and-aggregate start,
    its second mean) in dimension ``d``: the one whose truncation bias on a Gaussian part equals that of
    :data:`GRAM_WIDEN` in d = 2.  For ``z ~ N(0, I_d)``, ``E[z z^T 1{|z|^2 > s}] = P(chi2_{d+2} > s) I``, so
    the relative bias at ``f`` times the 97% radius is ``tau = P(chi2_{d+2} > f^2 chi2_d^{-1}(0.97))``;
    ``tau = 0.00333`` at d = 2, f = 1.5, and ``f(d) = sqrt(chi2_{d+2}^{-1}(1 - tau) / chi2_d^{-1}(0.97))``.
    The norms of a d-dimensional Gaussian concentrate, so f falls towards 1 as d grows: 1.1 at d = 50, where
    1.5 made the Gram's noise (its sensitivity grows as the square of the radius) 1.86 times larger than
    needed (rounded up to two decimals; public).

    >>> [gram_widen(d) for d in (1, 2, 10, 50)]
    [1.71, 1.5, 1.22, 1.1]
    """
    from scipy import stats

    tau = float(stats.chi2.sf(GRAM_WIDEN**2 * stats.chi2.ppf(0.97, 2), 4))
    f = math.sqrt(float(stats.chi2.isf(tau, d + 2) / stats.chi2.ppf(0.97, d)))
    return math.ceil(f * 100 - 1e-9) / 100


def _clip_radius(radius: float, sigma_max: float, d: int, n: int) -> float:
    """Every row of a component with mean in B(0, radius) lies within this of the origin w.p. 1 - beta
    (the chi tail: ``sigma (sqrt d + sqrt(2 ln(n / beta)))``, Laurent-Massart 2000)."""
    return radius + sigma_max * (math.sqrt(d) + math.sqrt(2.0 * math.log(n / BETA)))


def gaussian_mixture_plan(d: int, n: int, k: int, budget: Measure, radius: float = 1e4,
                          sigma_range: tuple[float, float] = (0.01, 100.0), w_min: float | None = None,
                          seed: int = 0, standardize: bool = False, method: str = DEFAULT_METHOD,
                          means: str = "parts", prediction: Prediction | None = None) -> Plan:
    """The PGME plan for ``n`` rows in R^d and ``k`` components: the parts from sample-and-aggregate
    (``method="sample_aggregate"``, the default: :data:`DEFAULT_METHOD`; with k = 1 the rows in the bounding
    ball are the one part) or from RPGMP (``method="rpgmp"``) or the warm-up chain (``method="warmup"``),
    then each part's estimates.  Outputs
    ``leafI_n`` (noisy count), ``leafI_mean`` and ``leafI_gram`` (noisy Gram matrix about the mean) for each
    of the k parts (RPGMP's tree makes at most k leaves: NaN for the others), and ``t`` (the public target part
    size).  With ``standardize=True`` the private per-column scale step runs first (its share of the budget by
    :func:`dpflow.estimators.scale.scale_weight`, the other weights scaled by the rest), the leaves are on the
    standardised rows and ``radius``, ``sigma_range`` are in units of the released scales; the plan then also
    outputs ``centre`` and ``scale``.

    >>> import dpflow as dp
    >>> plan = gaussian_mixture_plan(d=2, n=1000, k=2, budget=dp.ApproxZCDP(1.0, 1e-6))
    >>> sorted(name for name, _ in plan.outputs)[:3]
    ['leaf0_gram', 'leaf0_mean', 'leaf0_n']
    """
    require_budget(budget, "GaussianMixture", (ApproxZCDP, ApproxDP))
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if means not in MEANS or (means == "blocks" and method != "sample_aggregate"):
        raise ValueError(f"means must be one of {MEANS} ('blocks' only with method='sample_aggregate'), "
                         f"got means={means!r} with method={method!r}")
    if k < 1 or d < 1 or n < 1:
        raise ValueError(f"GaussianMixture needs k, d, n >= 1, got k={k}, d={d}, n={n}")
    s_min, s_max = sigma_range
    if not 0 < s_min <= s_max:
        raise ValueError(f"sigma_range must be 0 < sigma_min <= sigma_max, got {sigma_range}")
    w_min = w_min if w_min is not None else 1.0 / k
    t = max(1, math.ceil(w_min * n / 2))
    levels = k - 1
    assert isinstance(budget, (ApproxZCDP, ApproxDP))
    delta = float(budget.delta) / (8 * max(levels, 1))
    if method == "sample_aggregate" and min(k, d) > 6:
        raise ValueError(f"sample_aggregate keys cells of at most 6 dimensions (the k-dimensional projection, or "
                         f"the data when d <= k): min(n_components, d) <= 6, got k={k}, d={d}; use method='rpgmp'")
    if method == "sample_aggregate" and k >= 2 and n < block_size(n, k, w_min):
        raise DomainError("GaussianMixture", f"n={n} rows do not fill one sample-and-aggregate block of "
                          f"{block_size(n, k, w_min)} rows (k={k}, w_min={w_min:.3g})",
                          "pass more rows, fewer components or method='rpgmp'")
    if method == "sample_aggregate" and k >= 2:
        # the cell histogram's own delta0: a quarter of an (eps, delta) budget (the planner's zCDP mode then
        # certifies rho by CKS at delta - delta0, dpflow.privacy.approx_zcdp_to_approx_dp), all of an approximate
        # zCDP budget's delta; rounded down, so that the float the node holds never exceeds the budget's delta
        delta = to_float_down(budget.delta / 4 if isinstance(budget, ApproxDP) else budget.delta)
    b = PlanBuilder(budget=budget, neighbors="replace", name="gaussian_mixture")
    X = b.source("X", Vectors(d=d), n=n)
    rest, scaled = 1.0, dict[str, Any]()
    if standardize:
        from dpflow.estimators.scale import column_scales, scale_weight, warn_if_capped
        from dpflow.estimators.scale import standardize as standardized

        w_scale, capped = scale_weight(n, d, budget)
        warn_if_capped(b, n, d, capped)
        centre, scale = column_scales(X, d, w_scale)
        X, rest, scaled = standardized(X, centre, scale, d), 1.0 - w_scale, {"centre": centre, "scale": scale}
    Rc = _clip_radius(radius, s_max, d, n)
    Xc = N.Clip(radius=Rc)(X)
    if method == "warmup":  # strongly bounded: the public ball B(0, Lambda) is the bounding ball
        c, Rb = b.public([0.0] * d), b.public(Rc)
        Xb = Xc
    else:  # 1. bounding ball: coordinate-wise private medians, then the smallest grid radius holding 98% of rows
        w_loc = (WEIGHTS_SA if method == "sample_aggregate" else WEIGHTS)["locate"] * rest
        meds = [N.Quantile(q=0.5, weight=w_loc / (2 * d))(
            N.OrderStatistics(lower=-Rc, upper=Rc)(N.Columns(keep=[a])(Xc))) for a in range(d)]
        c = N.Apply(fn=stack, shape=(d,))(*meds)
        radii_b = N.radius_grid(s_min * math.sqrt(d) / 2, 2 * Rc)
        counts = N.BallCounts(center=c, radii=radii_b)(Xc)
        jb = N.AboveThreshold(threshold=0.98 * n, margin_beta=BETA, weight=w_loc / 2)(counts)
        Rb = N.GridValue(values=radii_b)(jb)
        Xb = N.Clip(radius=Rb, center=c)(X)
    out: dict[str, Any] = {"t": N.param(b, "t", float(t), f"ceil(w_min n / 2), w_min = {w_min:.6g}"), **scaled}
    N.param(b, "mean_clamp", radius, "post-processing (GaussianMixture.fit): each mean found projected onto its "
                                     "public ball ||mu|| <= radius")
    if prediction is not None:
        N.predicted_error(b, prediction.output, prediction.metric, prediction.value, prediction.confidence,
                          prediction.derivation, prediction.route, prediction.given)
    radii_l = N.radius_grid(s_min * math.sqrt(d) / 2, 2 * Rc)
    starts: list[Any] = []
    given: list[Any] = []
    if method == "sample_aggregate" and k == 1:  # one component: nothing to split, no locations to start from
        parts, w_leaf = [Xb], WEIGHTS_SA["leaves"] * rest
    elif method == "sample_aggregate":
        parts, C, G = _sample_aggregate_parts(X, Xb, c, Rb, d, n, k, w_min, delta, rest, seed)
        w_leaf, starts = WEIGHTS_SA["leaves"] * rest, [N.Get(index=j)(C) for j in range(k)]
        if means == "blocks":
            m = block_size(n, k, w_min)
            given = block_means(G, C, starts, d, n // m, k, s_min, 2 * Rc, BLOCK_MEAN_WEIGHT * w_leaf, m)
    elif method == "warmup":
        parts, w_leaf = _warmup_parts(X, Xb, c, Rc, min(k, d), k, t, s_min, delta, seed, rest), WEIGHTS["leaves"] * rest
    else:
        out |= _rpgmp_parts(X, Xb, c, Rb, Rc, d, k, t, s_min, delta, seed, rest, radii_l)
        return b.build(**out)
    assert len(parts) == part_count(method, k)
    for i, Xl in enumerate(parts):
        out |= _leaf(Xl, c, Rb, radii_l, w_leaf, i, t, gram_widen(d), starts[i] if starts else None,
                     given[i] if given else None)
    return b.build(**out)


def part_count(method: str, k: int) -> int:
    """The number of parts (leaves) :func:`gaussian_mixture_plan` estimates, public: ``k`` for every method (RPGMP's
    PartitionTree makes at most k leaves, its outputs NaN for leaves a run did not make; sample-and-aggregate's
    nearest-location split; the warm-up's k - 1 balls and the rest).

    >>> part_count("rpgmp", 3), part_count("sample_aggregate", 3)
    (3, 3)
    """
    return k


def leaf_outputs(i: int) -> tuple[str, str, str]:
    """The names of part ``i``'s outputs in :func:`gaussian_mixture_plan`: its noisy count, mean and Gram matrix.

    >>> leaf_outputs(0)
    ('leaf0_n', 'leaf0_mean', 'leaf0_gram')
    """
    return f"leaf{i}_n", f"leaf{i}_mean", f"leaf{i}_gram"


RPGMP_STATE = ("V", "c", "Rb", "pc", "pr")
"""The released state of an RPGMP piece: the projection basis and origin, the bounding radius, and the piece's ball
(the ball a split found, or its parent's)."""


def _rpgmp_parts(X: Any, Xb: Any, c: Any, Rb: Any, Rc: float, d: int, k: int, t: int, s_min: float, delta: float,
                 seed: int, rest: float, radii_l: tuple[float, ...]) -> dict[str, Any]:
    """RPGMP: Analyze Gauss on the rows clipped to the bounding ball, then a :class:`~dpflow.nodes.PartitionTree`
    (mixtures.md 5.2): each piece searches a terrific ball in the projected space, splits into the rows inside and
    the rest when one is found (breadth first, at most k parts, depth k - 1), and a leaf is estimated by PGME's
    per-part steps (:func:`_leaf`).  The body is certified once: the planner charges a record's root-to-leaf path
    (two under replace-one; ``ledger.tree_rule``), the same charge as the complete tree of depth k - 1 this plan
    unrolled before issue 31, so every share is the same.  The projected space has ``q = min(k, d)`` dimensions
    (with k > d the PCA basis is d x d).  Returns the outputs ``leafI_n``, ``leafI_mean``, ``leafI_gram`` for I < k
    (NaN for a leaf the tree did not make: post-processing of the released tree)."""
    q = min(k, d)
    b = X.builder
    V = N.private_pca(X, k=q, radius=Rb, center=c, weight=WEIGHTS["pca"] * rest)
    radii_p = N.radius_grid(s_min * math.sqrt(q) / 2, 2 * Rc)
    levels = k - 1
    per_node = WEIGHTS["partition"] * rest / max(levels, 1)
    w_rad, w_grid, w_cell, w_mean, w_cert = PTB_SHARES
    shares = (w_rad * per_node, w_grid * per_node, w_cell * per_node, w_mean * per_node, w_cert * per_node)
    w_leaf = WEIGHTS["leaves"] * rest

    def body(rows: Any, state: Any, depth: Any) -> N.TreeStep:
        Vs, cs, Rs, pc, pr = (N.Apply(fn=np.asarray, shape=shape)(N.Get(name)(state))  # the parts' shapes
                              for name, shape in zip(RPGMP_STATE, ((d, q), (d,), (), (q,), ()), strict=True))
        ball = N.terrific_ball(N.Project(basis=Vs, center=cs)(rows), t=t, radii=radii_p, center=pc, radius=pr, d=q,
                               beta=BETA, delta=delta, seed=seed, weights=shares)
        cen, rad = N.Get(index=0)(ball), N.Get(index=1)(ball)
        inside, outside = N.split(rows, N.PartitionByProjectedBall(center=cen, radius=rad, basis=Vs, origin=cs))
        pack = N.Pack(names=RPGMP_STATE)
        leaf = [_leaf(rows, cs, Rs, radii_l, w_leaf, 0, t, gram_widen(d))[name] for name in leaf_outputs(0)]
        return N.TreeStep(split=rad, parts=[inside, outside], states=[pack(Vs, cs, Rs, cen, rad), state],
                          leaf=N.Pack()(*leaf), size=leaf[0])

    init = N.Pack(names=RPGMP_STATE)(V, c, Rb, b.public([0.0] * q), Rb)
    tree = N.partition_tree(Xb, init, body, max_depth=levels, max_parts=k)
    out: dict[str, Any] = {}
    for i in range(k):
        for j, (name, shape) in enumerate(zip(leaf_outputs(i), ((), (d,), (d, d)), strict=True)):
            out[name] = N.Apply(fn=leaf_part, shape=shape)(tree, b.public(float(i)), b.public(float(j)),
                                                           b.public(float(d)))
    return out


def leaf_part(leaves: Any, i: Any, j: Any, d: Any) -> np.ndarray:
    """Part ``j`` (count, mean, Gram) of leaf ``i`` of a released tree, NaN of its shape when the tree made fewer
    leaves (post-processing of released values).

    >>> leaf_part(((3.0, np.zeros(2), np.eye(2)),), 0.0, 0.0, 2.0), leaf_part((), 1.0, 1.0, 2.0)
    (array(3.), array([nan, nan]))
    """
    i, j, dd = int(i), int(j), int(d)
    if i < len(leaves):
        return np.asarray(leaves[i][j], dtype=float)
    return np.full(((), (dd,), (dd, dd))[j], np.nan)


def _warmup_parts(X: Any, Xc: Any, c: Any, Lam: float, q: int, k: int, t: int, s_min: float, delta: float,
                  seed: int, rest: float) -> list[Any]:
    """Algorithm 1 (mixtures.md 7), the warm-up for strongly bounded spherical mixtures: the rows clipped to
    the public ball ``B(0, Lambda)``, ``Lambda = radius + sigma_max (sqrt d + sqrt(2 ln(n / beta)))`` (w.h.p.
    nothing clipped), Analyze Gauss on them, then k - 1 private 1-clusters one after the other in the
    projected space (``terrific_ball``, the [P] alternative of section 7), each on the rows outside the balls
    found before: k parts (the last one the rows outside every ball).  A chain of value partitions; the
    planner charges a record's two root-to-leaf paths.  The projected space has ``q = min(k, d)`` dimensions."""
    V = N.private_pca(X, k=q, radius=Lam, weight=WEIGHTS["pca"] * rest)
    radii_p = N.radius_grid(s_min * math.sqrt(q) / 2, 2 * Lam)
    per_node = WEIGHTS["partition"] * rest / max(k - 1, 1)
    w_rad, w_grid, w_cell, w_mean, w_cert = PTB_SHARES
    shares = (w_rad * per_node, w_grid * per_node, w_cell * per_node, w_mean * per_node, w_cert * per_node)
    left, parts = Xc, []
    for j in range(k - 1):  # k - 1 balls, each on the rows outside the earlier ones
        ball = N.terrific_ball(N.Project(basis=V)(left), t=t, radii=radii_p, center=[0.0] * q, radius=Lam,
                               beta=BETA, delta=delta, seed=seed + j, weights=shares)
        rule = N.PartitionByProjectedBall(center=N.Get(index=0)(ball), radius=N.Get(index=1)(ball), basis=V, origin=c)
        inside, left = N.split(left, rule)
        parts.append(inside)
    return [*parts, left]


def block_size(n: int, k: int, w_min: float) -> int:
    """Rows per block of the sample-and-aggregate: enough for each component (weight ``w_min``) to expect
    ``SA_PER_PART`` rows in a block, more when n allows ``SA_GROUPS`` groups of them (the block fits are then
    more accurate); public.

    >>> block_size(4000, 3, 1 / 3), block_size(64000, 3, 1 / 3)
    (10, 160)
    """
    return max(k + 1, math.ceil(SA_PER_PART / w_min), n // SA_GROUPS)


def _sample_aggregate_parts(X: Any, Xb: Any, c: Any, Rb: Any, d: int, n: int, k: int, w_min: float, delta: float,
                            rest: float, seed: int) -> tuple[list[Any], Any, Any]:
    """PGME's sample-and-aggregate (mixtures.md 8): disjoint blocks of :func:`block_size` rows (of the rows
    clipped to the bounding ball, in the public random order of ``seed``: data stored in order, such as one
    component's rows after another's, would otherwise give blocks of one component each), a non-private
    k-means per block (``SubsampleAggregate(statistic="kmeans", shuffle=seed)``), each block's k centres
    re-centred on the bounding centre and projected onto the top-k eigenvectors of a private second moment
    when d > k (``TupleProject``: fewer coordinates, fewer answers cut by cell borders), then the group-level
    1-cluster: the group counts of self-scaled cells (``TupleCellCounts``: one group counted once per cell,
    whatever order its k-means put its centres in) released by ``GaussianStabilityHistogram``, and the k
    heaviest merged cells as the component locations (``TupleCenters``).  The rows are then split by their
    nearest location (``PartitionByNearest``): the k parts, returned with the locations (each part's
    estimates start from its location)."""
    m = block_size(n, k, w_min)
    G = N.SubsampleAggregate(size=m, statistic="kmeans", k=k, shuffle=seed)(Xb)
    if d > k:
        V, w = N.private_pca(X, k=k, radius=Rb, center=c, weight=WEIGHTS_SA["pca"] * rest), k
    else:
        V, w = Xb.builder.public(np.eye(d).tolist()), d
    P = N.TupleProject(k=k, basis=V, center=c)(G)
    div = sa_div(w)
    h = N.GaussianStabilityHistogram(delta=delta, weight=WEIGHTS_SA["cells"] * rest)(N.TupleCellCounts(k=k, div=div)(P))
    C = N.TupleCenters(k=k, w=w, div=div)(h, V, c)
    return list(N.split(Xb, N.PartitionByNearest(k=k, centers=C))[:k]), C, G


def block_means(G: Any, C: Any, starts: list[Any], d: int, groups: int, k: int, s_min: float, r_max: float,
                weight: float, m: int) -> list[Any]:
    """Sample and aggregate's means (mixtures.md 8, step 4): for each released location ``C_j``, every
    block's k-means centre nearest to it (``TupleNearest``: one row per block, so one record moves one row),
    the radius around ``C_j`` holding 97% of those rows (``AboveThreshold`` on nested-ball counts against the
    public number of blocks; not searched when the margin lowers the threshold below half of them), and their
    clipped Gaussian mean over ``gram_widen(d)`` times that radius (:func:`dpflow.nodes.ball_mean`).  The k
    means read the same blocks: they compose sequentially, ``weight / k`` each (0.3 radius, 0.6 sum, 0.1
    count).  A block centre averages about ``m / k`` rows, so its spread is ``sqrt(k / m)`` of a row's: the
    radius grid starts there."""
    radii = N.radius_grid(s_min * math.sqrt(d * k / m) / 2, r_max)
    out = []
    for j in range(k):
        Y = N.TupleNearest(k=k, centers=C, index=j)(G)
        w = weight / k
        jr = N.AboveThreshold(threshold=0.97 * groups, margin_beta=BETA, min_threshold=groups / 2,
                              weight=0.3 * w)(N.BallCounts(center=starts[j], radii=radii)(Y))
        r = N.ScaleShift(scale=gram_widen(d))(N.GridValue(values=radii)(jr))
        out.append(N.ball_mean(Y, starts[j], r, 0.6 * w, 0.1 * w))
    return out


RECENTRE_SHARE = 0.1
"""A leaf's share (of its weight) for the second radius search of a part that starts from a released location
(``method="sample_aggregate"``), taken from the first search's 0.21.  The first radius is measured around
the start, a cell centre off by up to a cell, so it holds the part's 97% ball plus that offset, and the
Gram's noise grows as the square of its radius; the second search measures it again around the part's
released mean, and the Gram's ball is the smaller of the two (widened).  Measured (medians of 3 seeds, (2,
1e-6)-DP, the same blocks; ``benchmarks/mixtures.py --full --d 50 --methods sample_aggregate --trials 3``
before and after): covariance error at d = 50, n = 40,000: k = 2 0.70 -> 0.47 (separation 20) and
1.01 -> 0.47 (40), k = 3 0.97 -> 0.69 and 1.09 -> 0.68, k = 5 1.69 -> 1.19 and 1.79 -> 1.15; centre errors
unchanged within the seeds' spread.  The share barely matters (0.05 to 0.2 within the seeds' spread: the
radii are on a grid of ratio 1.25).  Where the starts are already within a fraction of sigma (d = 2 with
k >= 3, small cells) it costs: both searches' margins are larger than the one search's, the smaller radius
truncates more, and the covariance error rises (k = 3, d = 2, separation 20, n = 5000: 0.15 -> 0.19 over
6 seeds; ``benchmarks/results/mixtures_full.md``, k = 5, d = 2: 0.08-0.32 -> 0.13-0.45)."""


def smaller_radius(r2: Any, r1: Any) -> float:
    """The smaller of two released radii, the first one when the second is NaN (its search found nothing):
    post-processing.

    >>> smaller_radius(float("nan"), 2.0), smaller_radius(1.0, 2.0), smaller_radius(3.0, 2.0)
    (2.0, 1.0, 2.0)
    """
    return float(np.fmin(released_scalar(r2), released_scalar(r1)))


def _leaf(Xl: Any, c: Any, Rb: Any, radii_l: tuple[float, ...], w_leaf: float, i: int, t: int, widen: float,
          start: Any = None, given: Any = None) -> dict[str, Any]:
    """PGME's estimates of one part: a noisy count, the mean within the bounding ball (or a released ``start``:
    the part's location from sample-and-aggregate), the radius holding 97% of the part around it
    (``AboveThreshold`` on nested-ball counts, threshold 0.97 x the noisy count; not searched when its margin
    lowers the threshold below ``t / 2``, half the target part size: the radius is then "not found" and the mean
    stays the first one, rather than a mean of a few rows), the mean within that radius (``widen`` times it from
    a start: :func:`gram_widen`), and the Gram matrix about it of the rows within ``widen`` times it (from a
    start, times the smaller of that radius and the one searched again about the mean: :data:`RECENTRE_SHARE`).
    Measured on the benchmark's data (k = 3, d = 5): from the within-ball mean, a refused radius search at
    n = 2000 left centre errors of 2.7; from the start, 0.4 to 0.7; the widened second mean brought k = 2, d = 2,
    n = 16000 from 0.084 to 0.03.  Widening by gram_widen(d) rather than 1.5 (median of 3 seeds,
    sample_aggregate): k = 5, d = 50, n = 10,000 covariance error 10.6 -> 5.7, centre error 1.06 -> 0.80;
    n = 40,000: 3.6 -> 1.9, 0.29 -> 0.22; k = 3, d = 10, n = 10,000: 0.87 -> 0.59, 0.20 -> 0.16."""
    cnt = N.LaplaceMech(weight=w_leaf * 0.08)(N.Count()(Xl))
    p1 = N.ball_mean(Xl, c, Rb, w_leaf * 0.1, w_leaf * 0.03) if start is None else start
    # with a start, the first mean's share goes to the radius searches: RECENTRE_SHARE to the second one
    w_radius = w_leaf * (0.08 if start is None else 0.21 - RECENTRE_SHARE)
    jl = N.AboveThreshold(threshold=N.ScaleShift(scale=0.97)(cnt), margin_beta=BETA, min_threshold=t / 2,
                          weight=w_radius)(N.BallCounts(center=p1, radii=radii_l)(Xl))
    r1 = N.GridValue(values=radii_l)(jl)
    rg = N.ScaleShift(scale=widen)(r1)  # the 97% radius widened: the Gram is then barely truncated
    # from a start (a cell centre, off by up to a cell), the 97% ball is lopsided: its mean is pulled towards
    # the start, so the mean is taken over the widened ball too
    if given is None:
        p2 = N.ball_mean(Xl, p1, r1 if start is None else rg, w_leaf * 0.18, w_leaf * 0.03)
    else:  # the mean from the blocks (block_means): the Gram is taken about it
        p2 = given
    if start is not None:  # the part's radius again, about its released mean: the Gram's ball is centred
        j2 = N.AboveThreshold(threshold=N.ScaleShift(scale=0.97)(cnt), margin_beta=BETA, min_threshold=t / 2,
                              weight=w_leaf * RECENTRE_SHARE)(N.BallCounts(center=p2, radii=radii_l)(Xl))
        rg = N.ScaleShift(scale=widen)(N.Apply(fn=smaller_radius, shape=())(N.GridValue(values=radii_l)(j2), r1))
    near, _ = N.split(Xl, N.PartitionByBall(center=p2, radius=rg))
    gram = N.GaussianMech(weight=w_leaf * 0.5)(N.Gram(center=p2)(N.Clip(radius=rg, center=p2)(near)))
    return dict(zip(leaf_outputs(i), (cnt, p2, gram), strict=True))


def _psd(S: np.ndarray, floor: float) -> np.ndarray:
    w, Q = np.linalg.eigh((S + S.T) / 2.0)
    out: np.ndarray = (Q * np.maximum(w, floor)) @ Q.T
    return out


@attrs.frozen(eq=False)
class MixturePlan:
    """What :meth:`GaussianMixture.make_plan` decides from public facts (n, d, the parameters) before any data:
    the plan, the method chosen and its prediction (``infeasible``: why the parts cannot be found, or ``""``),
    and the public bounds the fit maps its releases by."""

    plan: Plan
    method: str
    prediction: Prediction
    infeasible: str
    standardize: bool
    radius: float
    sigma_range: tuple[float, float]
    w_min: float


def _sigma_range(v: Any) -> bool:
    return isinstance(v, (tuple, list)) and len(v) == 2 and all(positive().test(x) for x in v) and v[0] <= v[1]


class GaussianMixture(Estimator):
    """A differentially private Gaussian mixture (KSSU19 RPGMP + PGME) with a scikit-learn surface
    (:class:`dpflow.estimators.base.Estimator`: ``get_params``/``set_params``, ``clone``; the parameters are
    checked by ``fit`` and :meth:`make_plan`, the plan for d features and n rows, before any data).

    ``budget`` is an ``ApproxZCDP(rho, delta)`` or ``ApproxDP(epsilon, delta)`` (the heavy-cell search is a
    stability histogram, which needs a delta).  Public bounds: the component means lie within ``radius`` of
    the origin, the component scales (standard deviations) in ``sigma_range`` (with neither, the scale step runs
    first: ``standardize`` defaults to that); ``w_min`` (default
    ``1/k``: the target part size is ``t = w_min n / 2``, so a component of weight ``w >= w_min / 2``
    still holds ``t`` rows) is the smallest weight looked for.  After ``fit``: ``means_``, ``covariances_``,
    ``weights_`` (the parts found, by decreasing weight; fewer than ``n_components`` when the data do not
    split: ``n_found_``, and ``not_found_``: :class:`NotFound`, with a warning), ``plan_`` and ``report_``.
    ``max_error`` (default: ``radius``) and ``strict``: the tolerance on the predicted centre error
    (:func:`predict_centres`), checked before any data is read.  ``standardize=True`` takes raw-scale data: a private
    per-column centre and scale first (``radius`` and ``sigma_range`` are then in units of those scales, released
    as ``centre_`` and ``scale_``; see the module docstring).  ``method``: by default (``None``) the route with
    the smaller predicted centre error (:func:`predict_centres`) of ``"sample_aggregate"`` (finds the parts at
    smaller n, faster; ``min(k, d) <= 6``; :data:`DEFAULT_METHOD`, which wins ties) and ``"rpgmp"`` (the paper's
    recursive partition), chosen before data and released as ``method_``; or forced: one of those or
    ``"warmup"`` (strongly bounded spherical mixtures: ``radius`` a tight public bound on the means); with
    ``"sample_aggregate"``, ``means="blocks"`` averages the blocks' matched centres instead of each part's rows
    (less accurate, :data:`MEANS`).

    Covariances need more rows than means: each part's Gram matrix gets Gaussian noise scaled by the square of
    its radius (about ``d`` component variances), so the spectral error falls as ``d^1.5 / (rows per part)``.
    Measured with ``method="sample_aggregate"`` at (2, 1e-6)-DP, k = 5, d = 50, separation 20 (unit
    covariances, medians of 3 trials: ``benchmarks/results/mixtures_full.md`` and
    ``mixtures_full_k5_d50_large.md``): 4.6, 1.2, 0.59 and 0.31 at n = 10,000, 40,000, 80,000 and 160,000, so
    an error below 1 in d = 50 needs about 10,000 rows per component (centre error 0.73, 0.19, 0.11 and 0.066).

    >>> import numpy as np, dpflow as dp
    >>> rng = np.random.default_rng(0)
    >>> X = np.concatenate([rng.normal(size=(1500, 2)), rng.normal(size=(1500, 2)) + [40.0, 0.0]])
    >>> gm = GaussianMixture(2, dp.ApproxZCDP(1.0, 1e-6), radius=100.0, sigma_range=(0.5, 2.0),
    ...                      noise=dp.SeededNoise(0)).fit(X)
    >>> gm.n_found_, bool(np.abs(np.sort(gm.means_[:, 0]) - [0.0, 40.0]).max() < 1.0)
    (2, True)
    """

    estimator_kind = "density_estimator"
    constraints = {
        "n_components": positive(integer=True), "budget": BUDGET, "radius": optional(positive()),
        "sigma_range": optional(Constraint(_sigma_range, "a pair (sigma_min, sigma_max), 0 < sigma_min <= sigma_max")),
        "w_min": optional(Constraint(lambda v: positive().test(v) and v <= 1, "a weight in (0, 1]")),
        "method": one_of(None, *METHODS),
        "seed": Constraint(lambda v: isinstance(v, (int, np.integer)) and not isinstance(v, bool), "an integer"),
        "noise": NOISE, "standardize": one_of(None, True, False), "means": one_of(*MEANS),
        "max_error": optional(positive()), "strict": BOOLEAN,
    }

    def __init__(self, n_components: int, budget: Measure, radius: float | None = None,
                 sigma_range: tuple[float, float] | None = None, w_min: float | None = None,
                 method: str | None = None, seed: int = 0, noise: Any = None, standardize: bool | None = None,
                 means: str = "parts", max_error: float | None = None, strict: bool = False) -> None:
        self.n_components, self.budget, self.radius = n_components, budget, radius
        self.sigma_range, self.w_min, self.method, self.seed, self.noise = sigma_range, w_min, method, seed, noise
        self.standardize, self.means, self.max_error, self.strict = standardize, means, max_error, strict

    def _routes(self, k: int, d: int) -> list[str]:
        """The methods compared (public): the one forced by ``method=``, else sample-and-aggregate (first:
        it wins ties; only when ``min(k, d) <= 6`` and always with ``means="blocks"``) and RPGMP."""
        if self.method is not None:
            return [self.method]
        if self.means == "blocks":
            return ["sample_aggregate"]
        return (["sample_aggregate"] if min(k, d) <= 6 else []) + ["rpgmp"]

    def _choose(self, d: int, n: int) -> MixturePlan:
        """The method (the one with the smaller predicted centre error, or the forced one) and its plan, from
        public facts only."""
        self.validate_params()
        k = int(self.n_components)
        std = (self.radius is None and self.sigma_range is None) if self.standardize is None else self.standardize
        radius = self.radius if self.radius is not None else (SCALED_RADIUS_PER_COORD * math.sqrt(d) if std else 1e4)
        srange = self.sigma_range if self.sigma_range is not None else (SCALED_SIGMA_RANGE if std else (0.01, 100.0))
        w_min = self.w_min if self.w_min is not None else 1.0 / k

        def build(method: str, pred: Prediction | None) -> Plan:
            return gaussian_mixture_plan(d, n, k, self.budget, radius, srange, self.w_min, self.seed, std,
                                         method, self.means, prediction=pred)

        from dpflow.estimators.scale import scale_weight
        from dpflow.estimators.tolerance import choose_route

        units = "in units of the released column scales" if std else "in the data's units"
        capped = std and scale_weight(n, d, self.budget)[1]
        routes = {m: predict_centres(build(m, None), n, d, k, w_min, radius, srange[1], m, units, capped)
                  for m in self._routes(k, d)}
        method = choose_route({m: p for m, (p, _) in routes.items()}, self.method)
        compared = ", ".join(f"{m} {p.value:.4g}" for m, (p, _) in routes.items())
        pred, infeasible = routes[method]
        pred = attrs.evolve(pred, derivation=f"{pred.derivation}; routes compared: {compared}"
                            + (" (forced by method=)" if self.method is not None else ""))
        return MixturePlan(build(method, pred), method, pred, infeasible, std, radius, srange, w_min)

    def make_plan(self, d: int, n: int) -> Plan:
        """The plan ``fit`` runs on ``n`` rows of ``d`` features (its method chosen by the predicted centre error,
        which the ledger records): public facts only, no data read, nothing charged."""
        return self._choose(d, n).plan

    def fit(self, X: Any, y: Any = None) -> GaussianMixture:
        """Certify and run the plan on ``X`` (n x d); the parameters and public shape errors raise first; ``y`` is
        ignored."""
        from dpflow.estimators.tolerance import enforce

        self.validate_params()
        Xa = self._rows(X, reset=True)
        n, d = Xa.shape
        k = int(self.n_components)
        chosen = self._choose(d, n)
        plan, method, pred, infeasible = chosen.plan, chosen.method, chosen.prediction, chosen.infeasible
        std, radius, srange, w_min = chosen.standardize, chosen.radius, chosen.sigma_range, chosen.w_min
        self.method_ = method
        enforce([pred], self.max_error if self.max_error is not None else radius, self.strict,
                "GaussianMixture.fit", "more rows or a larger budget" + (" (or public bounds)" if std else ""))
        result = plan.run({"X": Xa}, noise=self._noise())
        rel = result.released
        t = float(rel["t"])
        parts = []
        floor = (srange[0] ** 2) / 4
        for i in range(part_count(method, k)):
            count, mean_name, gram = leaf_outputs(i)
            m = released_scalar(rel[count])
            mean = np.asarray(rel[mean_name], dtype=float).reshape(-1)
            if not (m >= t / 2 and np.all(np.isfinite(mean))):
                continue
            mean = steps.into_ball(mean, radius)  # post-processing into the public ball (the plan's mean_clamp)
            cov = _psd(np.nan_to_num(np.asarray(rel[gram], dtype=float)) / m, floor)
            if method == "warmup":  # spherical components: sigma^2 I with sigma^2 the mean eigenvalue
                cov = max(float(np.trace(cov)) / d, floor) * np.eye(d)
            parts.append((m, mean, cov))
        self.centre_: np.ndarray | None = None
        self.scale_: np.ndarray | None = None
        if std:  # back to the data's units (post-processing of released values)
            from dpflow.estimators.scale import unstandardize

            centre = np.asarray(rel["centre"], dtype=float).reshape(-1)
            sc = np.asarray(rel["scale"], dtype=float).reshape(-1)
            self.centre_, self.scale_ = centre, sc
            parts = [(m, unstandardize(mean, centre, sc), cov * np.outer(sc, sc)) for m, mean, cov in parts]
        parts.sort(key=lambda p: -p[0])
        parts = parts[: self.n_components]
        self.n_found_ = len(parts)
        self.not_found_: NotFound | None = None
        if self.n_found_ < k:
            reason = infeasible or (f"the data did not split into {k} parts: the estimator needs separation >= "
                                    f"(sqrt k + 2 / sqrt w_min) sigma = {math.sqrt(k) + 2 / math.sqrt(w_min):.3g} "
                                    "sigma and enough rows per component")
            self.not_found_ = NotFound(k, self.n_found_, reason)
            warnings.warn(f"GaussianMixture: {self.n_found_} of {k} components found: {reason}", AccuracyWarning,
                          stacklevel=2)
        if parts:
            total = sum(p[0] for p in parts)
            self.weights_ = np.array([p[0] / total for p in parts])
            self.means_ = np.array([p[1] for p in parts])
            self.covariances_ = np.array([p[2] for p in parts])
        else:
            self.weights_, self.means_, self.covariances_ = np.zeros(0), np.zeros((0, d)), np.zeros((0, d, d))
        self.plan_, self.report_ = plan, result.report
        return self

    def _log_resp(self, X: Any) -> np.ndarray:
        self._require_fitted("predict")
        Xa = self._rows(X, reset=False)
        if self.n_found_ == 0:
            raise ValueError(f"no component was found (not_found_: {self.not_found_}): nothing to predict with")
        from scipy import stats

        logp = np.stack([np.log(w) + stats.multivariate_normal(m, c, allow_singular=True).logpdf(Xa)
                         for w, m, c in zip(self.weights_, self.means_, self.covariances_, strict=True)], axis=-1)
        out: np.ndarray = logp.reshape(Xa.shape[0], -1)
        return out

    def predict_proba(self, X: Any) -> np.ndarray:
        """Posterior probabilities of the components found (post-processing of the released parameters)."""
        lp = self._log_resp(X)
        lp = lp - lp.max(axis=1, keepdims=True)
        p = np.exp(lp)
        out: np.ndarray = p / p.sum(axis=1, keepdims=True)
        return out

    def predict(self, X: Any) -> np.ndarray:
        """The most probable component of each row."""
        out: np.ndarray = np.argmax(self._log_resp(X), axis=1)
        return out
