"""Gaussians with no a-priori bounds (Kamath-Mouzakis-Singhal-Steinke-Ullman; sparse_discrete_heavy.md 5;
the slides ``seeds/004``): the EigenvalueEstimator, SubspaceRecovery, the Coarse and Fine preconditioners
as plans, and the scale search that lets :func:`dpflow.estimators.gaussian.fit` run without bounds.

* Approximate-DP budgets (``ApproxZCDP``, ``ApproxDP``): the scale is found over an *unbounded* grid
  by stability histograms (no range assumed at all): the top and bottom eigenvalues of the pair
  differences by the EigenvalueEstimator (blocks of rows -> log2 eigenvalues -> histogram over a grid
  of factor-2 buckets, :data:`SCALE_WIDTH`; the slides' 2^(1/4) grid in :func:`eigenvalues`), then a
  centre coordinate by coordinate on the rows scaled by the top eigenvalue.  Blocks are sized so that the
  modal bucket clears the stability threshold (:func:`block_size`); the eigenvalue histograms get
  ``1 - CENTER_SHARE`` of the budget.  With ``ApproxZCDP(1, 1e-6)`` the scale is found from n = 5,000 at
  d = 5 (benchmarks/results/unbounded.md).
* ``ZCDP`` and ``PureDP`` budgets: no unbounded algorithm exists, so the float64 range is the bound and
  the same quantities are found by Gaussian- (Laplace-) noised histograms over the finite log2 grid of float64
  exponents (the Karwa-Vadhan idea over exponent bins): the eigenvalues, and the radius ``R`` of the
  rows (centre 0).

Then :func:`dpflow.estimators.gaussian.gaussian` (CoinPress) runs on the rows moved by the found centre
and scaled by the found floor ``lower`` with the found ``R``, ``K``: its covariance recursion is the
Fine preconditioner with a known condition-number bound (sparse_discrete_heavy.md 5.1.4 [REC]).
Nothing here reads the data outside a plan: the public decisions between the two plans are
post-processing of the first plan's release, and the two plans compose sequentially
(:func:`dpflow.privacy.split.sequential_split`).

>>> import numpy as np, dpflow as dp
>>> p = eigenvalues(d=3, n=20000, budget=dp.ApproxZCDP(0.5, 1e-6))
>>> X = np.random.default_rng(0).normal(size=(20000, 3)) * [1e-3, 1.0, 1e3] + 1e6
>>> lam = p.run({"X": X}, noise=dp.SeededNoise(0)).released["eigenvalues"]
>>> bool(0.5 < lam[0] / 1e6 < 2 and 0.5 < lam[1] / 1e-6 < 2)
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, Literal

import attrs
import numpy as np

from dpflow import nodes as N
from dpflow.domains import MAX_BOUND, Vectors
from dpflow.errors import DomainError
from dpflow.estimators.gaussian import steps
from dpflow.estimators.scale import stack
from dpflow.handles import Released, Rows, Sensitive
from dpflow.nodes.base import released_scalar
from dpflow.nodes.postprocess import accuracy_warning
from dpflow.nodes.quantile import log2_edges
from dpflow.plan import Plan, PlanBuilder
from dpflow.plan.graph import require_budget
from dpflow.privacy import ZCDP, ApproxDP, ApproxZCDP, Measure, PureDP, zcdp_rho_for_approx_dp
from dpflow.privacy.split import SPLIT_REFERENCE
from dpflow.references import Reference

REF_EIG = Reference("KMSSU EigenvalueEstimator (slides 004 Alg. 1): stability histograms of block log2 eigenvalues "
                    "over a grid of public bucket width (the slides: 2^(1/4); the scale search: factor 2)",
                    "sparse_discrete_heavy.md", "5.1.1")
REF_SUB = Reference("KMSSU SubspaceRecovery, option B (average of block projectors + Gaussian noise; no GoodCenter)",
                    "sparse_discrete_heavy.md", "5.1.2")
REF_COARSE = Reference("KMSSU CoarsePreconditioner (slides 004 Alg. 3): A = gamma Pi + (I - Pi)",
                       "sparse_discrete_heavy.md", "5.1.3")
REF_FINE = Reference("KMSSU FinePreconditioner with a known condition bound: the CoinPress covariance recursion",
                     "sparse_discrete_heavy.md", "5.1.4")

LOG2_WIDTH = 0.25
"""Width of the eigenvalue buckets in log2 units: the slides' grid of ratio 2^(1/4) (:func:`eigenvalues`)."""
SCALE_WIDTH = 1.0
"""Width of the eigenvalue buckets of the scale search, in log2 units (factor 2; sparse_discrete_heavy.md
5.1.1: "w = 1 or 2"): the search needs the eigenvalues only within constant factors (a factor 2 in ``K``
costs a third of a CoinPress round), and a bucket four times wider holds about twice the blocks (the
modal bucket must clear the stability threshold), which halves the smallest n that finds the scale."""
CENTER_SHARE = Fraction(1, 10)
"""Share of the scale search's budget for the centre (or the radius) histograms; the rest goes to the
eigenvalue histograms.  Accuracy only: the centre's modal bins hold about half of all n rows, the
eigenvalues' only about half of the n / (2 s) blocks of s >= d + 1 rows, so the eigenvalue histograms
need about 10 d times the centre's epsilon for the same n (docs/gaussian.md)."""
ZCDP_GRID = tuple(float(x) for x in np.arange(-2200.0, 2100.0 + 0.25, 0.5))
"""Public log2-eigenvalue edges of the zCDP range search: every float64 eigenvalue of a block (down to
2^-2148) lies inside; ``-inf`` (a zero eigenvalue) and NaN fall in the first bin."""
ROW_NORM_EDGES = log2_edges(-1074, 256)
"""Public bins of the row norms for the zCDP radius search: 0, then 2^-1074 .. 2^256 (``MAX_BOUND``)."""
CENTER_WIDTH = 2.0
"""Width of the centre bins, in units of the square root of the found top eigenvalue."""
SCALE_SHARE = Fraction(1, 5)
"""Share of the budget spent on finding the scale when no bounds are given (the rest goes to CoinPress)."""
SMALLEST_K = 32.0
"""The smallest condition bound :func:`bounds_from` releases: ``8 lambda_1-hat / lower`` with
``lower <= lambda_d-hat / 4 <= lambda_1-hat / 4``."""
FLOOR_RATIO = 2.0**-80
"""Declared floor on the condition number: an eigenvalue estimate below ``FLOOR_RATIO`` times the top one
(or zero) counts as ``FLOOR_RATIO`` times the top one."""


# ------------------------------------------------------------------------------ post-processing steps


def _exp2(e: float) -> float:
    with np.errstate(over="ignore"):
        return float(np.exp2(e))  # inf above the float64 range, never OverflowError


def bucket_value(released: Any, width: Any, shift: Any) -> float:
    """The left edge ``2^(shift + key * width)`` of the mode bucket of a released stability histogram of
    log2 values; ``0.0`` for the bucket of ``-inf`` (a zero eigenvalue), NaN when nothing was released
    (the private "not found").

    >>> bucket_value((np.array([4, 5]), np.array([10.0, 30.0])), 0.25, 0.0)
    2.378414230005442
    >>> bucket_value((np.array([], dtype=int), np.array([])), 0.25, 0.0)
    nan
    """
    key = N.stability.stable_mode(released)
    if key is None:
        return math.nan
    e = float(shift) + key * float(width)
    return 0.0 if e < -2200.0 else _exp2(e)


def grid_value(counts: Any, edges: Any, noise_scale: Any = 0.0, level: Any = 0.0) -> float:
    """``2^left edge`` of the largest bin of a released histogram over the log2 grid ``edges``; 0.0 for
    the first bin (which holds ``-inf`` and NaN); NaN ("not found") when the largest noisy count is below
    ``noise_scale * level``, the height that noise alone reaches in some bin with probability about 1%
    (:func:`noise_level`): then the argmax is likely an empty bin, and a far-off eigenvalue would make
    every later bound absurd.  Post-processing of the release and public numbers.

    >>> edges = [-1.0, 0.0, 1.0, 2.0]
    >>> grid_value([1.0, 9.0, 3.0], edges), grid_value([1.0, 9.0, 3.0], edges, 1.0, 10.0)
    (1.0, nan)
    """
    c = np.nan_to_num(np.asarray(counts, dtype=float).ravel(), nan=-np.inf)
    k = int(np.argmax(c))
    if not c[k] >= float(noise_scale) * float(level):
        return math.nan
    return 0.0 if k == 0 else _exp2(float(np.asarray(edges, dtype=float)[k]))


def noise_level(noise: str, bins: int) -> float:
    """The largest of ``bins`` noises of a histogram release, per unit of the certified noise scale
    (``NoiseScale``: sigma per unit l2, b per unit l1 sensitivity; a count histogram has l2 sqrt 2, l1 2),
    exceeded with probability about 1%: Gaussian ``sqrt 2 (sqrt(2 ln bins) + sqrt(2 ln 100))``, Laplace
    ``2 (ln(bins / 2) + ln 100)``.  Accuracy only.

    >>> round(noise_level("gaussian", 100), 3), round(noise_level("laplace", 100), 3)
    (8.584, 17.034)
    """
    if noise == "laplace":
        return 2.0 * (math.log(bins / 2.0) + math.log(100.0))
    return math.sqrt(2.0) * (math.sqrt(2.0 * math.log(bins)) + math.sqrt(2.0 * math.log(100.0)))


def scale_matrix(lams: Any, d: Any) -> np.ndarray:
    """``I / (CENTER_WIDTH sqrt(lam_1))``: rows in units of the centre bins (identity when the top
    eigenvalue is 0, infinite or not found).

    >>> scale_matrix([4.0, 1.0], 2.0)
    array([[0.25, 0.  ],
           [0.  , 0.25]])
    """
    lam = float(np.asarray(lams, dtype=float).ravel()[0])
    s = CENTER_WIDTH * math.sqrt(lam) if math.isfinite(lam) and lam > 0 else 1.0
    out: np.ndarray = np.eye(int(d)) / s
    return out


def projector(M: Any, k: Any) -> np.ndarray:
    """The orthogonal projector onto the top-``k`` eigenvectors of the symmetrised ``M`` (a noisy average
    of flattened projectors); defined for any finite or non-finite input.

    >>> projector(np.diag([0.9, 0.1]).ravel(), 1)
    array([[1., 0.],
           [0., 0.]])
    """
    a = np.asarray(M, dtype=float).ravel()
    d = math.isqrt(a.size)
    S = steps._finite(a.reshape(d, d))
    _, V = np.linalg.eigh((S + S.T) / 2.0)
    top = V[:, d - int(k):]
    out: np.ndarray = top @ top.T
    return out


def coarse_matrix(P: Any, gamma: Any) -> np.ndarray:
    """``gamma Pi + (I - Pi)`` (slides 004 Alg. 3 with ``1 - eta = gamma``).

    >>> coarse_matrix(np.diag([1.0, 0.0]), 0.5)
    array([[0.5, 0. ],
           [0. , 1. ]])
    """
    Pi = np.asarray(P, dtype=float)
    out: np.ndarray = float(gamma) * Pi + (np.eye(Pi.shape[0]) - Pi)
    return out


# ------------------------------------------------------------------------------ group counts


def _hist_epsilon(budget: Measure, count: int, share: float = 1.0) -> float:
    """The epsilon each of ``count`` equally weighted histograms sharing ``share`` of ``budget`` gets, for
    choosing the number of groups (accuracy only, never privacy): ``sqrt(2 rho share / count)``; a
    ``PureDP(eps)`` budget ``eps share / count`` (basic composition); an ``ApproxDP(eps, delta)`` budget
    the larger of the same with the zCDP rho that meets ``(eps, delta / 2)`` (CKS20) and
    ``eps share / count`` (basic composition, the planner's other rule).

    >>> round(_hist_epsilon(ZCDP(1), 2), 6), round(_hist_epsilon(ApproxDP(1, "1e-6"), 2), 4)
    (1.0, 0.5)
    """
    if isinstance(budget, PureDP):
        return float(budget.epsilon) * share / count
    if isinstance(budget, ApproxDP):
        rho = float(zcdp_rho_for_approx_dp(budget.epsilon, Fraction(budget.delta) / 2))
        return max(math.sqrt(2.0 * rho * share / count), float(budget.epsilon) * share / count)
    rho = float(budget.rho) if isinstance(budget, (ZCDP, ApproxZCDP)) else 0.0
    return math.sqrt(2.0 * rho * share / count)


def stability_threshold(eps: float, delta: float) -> float:
    """The replace-one stability-histogram threshold ``1 + 2 ln(2 / delta) / eps``
    (:class:`dpflow.nodes.StabilityHistogram`).

    >>> round(stability_threshold(1.0, 1e-6), 3)
    30.017
    """
    return 1.0 + 2.0 * math.log(2.0 / delta) / eps


def stability_need(eps: float, delta: float) -> float:
    """The count a modal bucket needs to be released by a replace-one stability histogram with
    probability above 99%: the threshold plus four Laplace scales ``2 / eps`` (``P(Lap < -4b) = e^-4 / 2``).

    >>> round(stability_need(1.0, 1e-6), 3)
    38.017
    """
    return stability_threshold(eps, delta) + 8.0 / eps


def modal_fraction(s: int, d: int, width: float) -> float:
    """The share of blocks of ``s`` rows whose log2 eigenvalue falls in the fullest bucket of ``width``,
    in the worst case of the grid's position: ``Phi(width / sd) - 1/2``, where
    ``sd = 2.04 / sqrt(s - d + 1)`` is the standard deviation of log2 of a chi-square with ``s - d + 1``
    degrees of freedom over its mean (the smallest eigenvalue of a block's second moment spreads like that;
    the top one less), and the bucket edge lies at the median.  Measured (d = 5, width 1): 0.39 .. 0.53 at
    s = 10 .. 20 for the bottom eigenvalue, the model 0.39 .. 0.48.  Accuracy only.

    >>> round(modal_fraction(10, 5, 1.0), 3), round(modal_fraction(200, 5, 1.0), 3), modal_fraction(4, 5, 1.0)
    (0.385, 0.5, 0.0)
    """
    if s <= d - 1:
        return 0.0
    sd = 2.04 / math.sqrt(s - d + 1)
    return 0.5 * math.erf(width / sd / math.sqrt(2.0))


def block_size(m: int, d: int, need: float, width: float = SCALE_WIDTH) -> int:
    """Rows per block for a histogram of block log2 eigenvalues whose modal bucket must hold ``need``
    blocks: the largest block size ``s >= d + 1`` with ``(m // s) * modal_fraction(s, d, width) >= need``
    (larger blocks estimate the eigenvalues better); when none qualifies, the size with the most blocks
    in the modal bucket.  Accuracy only: the privacy of the histogram holds for any block size.

    >>> block_size(10000, 3, 88.0), block_size(10000, 50, 88.0), block_size(10**6, 3, 88.0)
    (56, 60, 5681)
    """
    lo = max(1, min(d + 1, m))

    def held(s: int) -> float:
        return (m // s) * modal_fraction(s, d, width)

    # the modal fraction saturates (within 1e-4 of 1/2) by s = d + 64 / width^2: search the rise exhaustively,
    # then bisect the fall (held is decreasing beyond the saturation up to the floor of m // s)
    rise = range(lo, max(lo, min(m, d + 1 + math.ceil(64.0 / width**2))) + 1)
    best = max(rise, key=lambda s: (held(s), s))
    if held(best) < need:
        return best
    top = max(s for s in rise if held(s) >= need)
    if top < rise[-1]:
        return top
    lo, hi = top, m
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if held(mid) >= need else (lo, mid)
    return hi if held(hi) >= need else lo


# ------------------------------------------------------------------------------ plan fragments


Noise = Literal["stability", "gaussian", "laplace"]
"""How the scale search's histograms are released: stability histograms over unbounded grids (approximate
budgets), Gaussian (``ZCDP``) or Laplace (``PureDP``) noise on histograms over public float64 grids."""


def _noise_of(budget: Measure) -> Noise:
    if isinstance(budget, PureDP):
        return "laplace"
    return "gaussian" if isinstance(budget, ZCDP) else "stability"


def grid_need(noise: Noise, eps: float, bins: int) -> float:
    """The count the modal bin of a noisy histogram over ``bins`` public bins needs to be the noisy
    argmax with probability about 99% (accuracy only; l1 sensitivity 2, l2 sqrt 2): Gaussian (sigma
    ``sqrt(2) / eps``): three times the largest noise ``sigma sqrt(2 ln bins)``; Laplace (``b = 2 / eps``):
    the largest of the other bins' noises ``b ln(bins / 2)`` plus ``2 b ln 100`` for the tails.

    >>> round(grid_need("gaussian", 1.0, 100), 3), round(grid_need("laplace", 1.0, 100), 3)
    (12.876, 26.245)
    """
    if eps <= 0:
        return math.inf
    if noise == "laplace":
        return 2.0 / eps * (math.log(bins / 2.0) + 2.0 * math.log(100.0))
    return 3.0 * math.sqrt(2.0) / eps * math.sqrt(2.0 * math.log(bins))


def eigen_fragment(b: PlanBuilder, Z: Sensitive[Rows], m: int, d: int, ks: Sequence[int], noise: Noise,
                   delta_each: Fraction | None, eps_each: float, weight: float, width: float) -> Released[Any]:
    """EigenvalueEstimator on mean-zero rows ``Z`` (m of them): blocks -> log2 eigenvalues -> per ``k`` in
    ``ks`` a histogram (a stability histogram over the unbounded grid of buckets ``width`` wide; or, with
    Gaussian or Laplace noise, a histogram over :data:`ZCDP_GRID`) -> the bucket's value.  Returns the
    vector of estimates of ``lambda_(k+1)`` (NaN: not found).  The block size is :func:`block_size` for
    the count the modal bucket needs: :func:`stability_need` or :func:`grid_need`."""
    if noise == "stability":
        assert delta_each is not None
        need = stability_need(eps_each, float(delta_each))
    else:
        need, width = grid_need(noise, eps_each, len(ZCDP_GRID) - 1), ZCDP_GRID[1] - ZCDP_GRID[0]
    size = block_size(m, d, need, width)
    held = (m // size) * modal_fraction(size, d, width)
    N.param(b, "eigen_block", float(size), f"rows per block: {m} rows in {m // size} groups (block_size: the "
            f"modal bucket should hold {need:.4g} blocks, expected {held:.4g}; blocks of >= d + 1 rows)")
    if held < need:
        accuracy_warning(b, f"EigenvalueEstimator: {m // size} groups of {size} rows are too few for the modal "
                            f"bucket to hold {need:.4g} blocks: the eigenvalues may be 'not found' or coarse")
    B = N.SubsampleAggregate(size=size, statistic="log2_eigenvalues")(Z)
    vals = []
    for k in ks:
        col = N.Columns(keep=[k])(B)
        if noise == "stability":
            h = N.StabilityHistogram(delta=delta_each, weight=weight)(N.BinCounts(width=width)(col))
            vals.append(N.Apply(fn=bucket_value, shape=())(h, b.public(width), b.public(0.0)))
        else:
            mech = N.LaplaceMech(weight=weight) if noise == "laplace" else N.GaussianMech(weight=weight)
            h = mech(N.Histogram(edges=ZCDP_GRID)(col))
            vals.append(N.Apply(fn=grid_value, shape=())(h, b.public(list(ZCDP_GRID)), N.noise_scale(h),
                                                         b.public(noise_level(noise, len(ZCDP_GRID) - 1))))
    return N.Apply(fn=stack, shape=(len(ks),))(*vals)


def histogram_delta(budget: Measure, count: int) -> Fraction | None:
    """The delta of each of ``count`` stability histograms: ``delta / count`` of an ``ApproxZCDP`` budget
    (approximate zCDP adds the deltas), ``delta / (2 count)`` of an ``ApproxDP`` budget (half is left to the
    conversion of the composed loss to (epsilon, delta)); ``None`` for ``ZCDP`` (no stability histogram).

    >>> histogram_delta(ApproxZCDP(1, "1e-6"), 4), histogram_delta(ApproxDP(1, "1e-6"), 4)
    (Fraction(1, 4000000), Fraction(1, 8000000))
    """
    if isinstance(budget, ApproxZCDP):
        return Fraction(budget.delta) / count
    if isinstance(budget, ApproxDP):
        return Fraction(budget.delta) / (2 * count)
    return None


def _check(where: str, d: int, n: int, budget: Measure) -> Noise:
    """Refusals decidable from public information; returns how the histograms are released."""
    require_budget(budget, where, (ZCDP, ApproxZCDP, ApproxDP, PureDP))
    if isinstance(budget, (ApproxZCDP, ApproxDP)) and budget.delta == 0:
        raise DomainError(where, f"{budget.describe()} has delta = 0", "pass delta > 0, or a ZCDP or PureDP budget")
    if d < 1 or n < 4:
        raise DomainError(where, f"d={d}, n={n}", "declare d >= 1 and n >= 4")
    return _noise_of(budget)


def eigenvalues(d: int, n: int, budget: Measure, ks: Sequence[int] | None = None, unknown_mean: bool = True,
                width: float = LOG2_WIDTH) -> Plan:
    """The EigenvalueEstimator as a plan: estimates of ``lambda_(k+1)(Sigma)`` for ``k`` in ``ks`` (default:
    the top and the bottom one) from the pair differences (``unknown_mean``) or the rows, with no
    a-priori range.  Approximate budgets: stability histograms over the unbounded grid of buckets ``width``
    log2 units wide (default the slides' 2^(1/4) grid; each estimate within a factor ``2^width`` of the
    block eigenvalues' mode, or NaN: "not found"); ``ZCDP``:
    Gaussian histograms over the float64 exponent grid.  Source ``X``; output ``eigenvalues``.

    >>> import dpflow as dp
    >>> eigenvalues(d=4, n=10000, budget=dp.ZCDP(0.5)).check().totals[0].rho
    Fraction(1, 2)
    """
    where = "gaussian.unbounded.eigenvalues"
    noise = _check(where, d, n, budget)
    ks = (0, d - 1) if ks is None else tuple(ks)
    ks = tuple(dict.fromkeys(ks))
    if not ks or any(not 0 <= k < d for k in ks):
        raise DomainError(where, f"ks={list(ks)} for d={d}", f"pass indices in [0, {d})")
    b = PlanBuilder(budget=budget, neighbors="replace", name="kmssu_eigenvalues")
    X = b.source("X", Vectors(d=d), n=n)
    N.param(b, "algorithm", 0.0, str(REF_EIG))
    Z = N.PairDifferences()(X) if unknown_mean else X
    m = n // 2 if unknown_mean else n
    delta = histogram_delta(budget, len(ks))
    out = eigen_fragment(b, Z, m, d, ks, noise, delta, _hist_epsilon(budget, len(ks)), 1.0, width)
    return b.build(eigenvalues=out)


def subspace_recovery(d: int, n: int, budget: Measure, k: int, groups: int | None = None) -> Plan:
    """KMSSU SubspaceRecovery, option B of sparse_discrete_heavy.md 5.1.2: blocks -> top-``k`` projector of
    each block's second moment -> clipped-free mean (each projector has Frobenius norm sqrt(k), so the
    mean of ``G`` blocks has replace-one l2 sensitivity ``2 sqrt(k) / G``) -> Gaussian noise -> the top-``k``
    projector of the noisy average.  Rows are used as given (mean zero: pass pair differences).
    ``groups`` defaults to ``max(1, n // (2 d))``.  Source ``X``; output ``projector``.

    >>> import numpy as np, dpflow as dp
    >>> X = np.random.default_rng(0).normal(size=(20000, 3)) * [100.0, 1.0, 0.01]
    >>> P = subspace_recovery(3, 20000, dp.ZCDP(0.5), k=1).run({"X": X}, noise=dp.SeededNoise(0)).released
    >>> bool(abs(P["projector"][0, 0] - 1.0) < 0.01)
    True
    """
    G = _subspace_groups("gaussian.unbounded.subspace_recovery", d, n, budget, k, groups)
    b = PlanBuilder(budget=budget, neighbors="replace", name="kmssu_subspace")
    N.param(b, "algorithm", 0.0, str(REF_SUB))
    return b.build(projector=subspace_fragment(b, b.source("X", Vectors(d=d), n=n), n, d, k, G))


def _subspace_groups(where: str, d: int, n: int, budget: Measure, k: int, groups: int | None) -> int:
    """The public checks of a SubspaceRecovery plan; returns the number of blocks (default ``n // (2d)``)."""
    _check(where, d, n, budget)
    if not 1 <= k <= d:
        raise DomainError(where, f"k={k} for d={d}", f"pass 1 <= k <= {d}")
    G = max(1, n // (2 * d)) if groups is None else groups
    if not 1 <= G <= n:
        raise DomainError(where, f"groups={G} for n={n}", "pass 1 <= groups <= n")
    return G


def subspace_fragment(b: PlanBuilder, X: Sensitive[Rows], n: int, d: int, k: int, groups: int) -> Released[Any]:
    """SubspaceRecovery (option B) on ``n`` rows ``X`` in ``groups`` blocks: the released projector."""
    blocks = N.SubsampleAggregate(size=n // groups, statistic="top_projection", k=k)(X)
    M = N.GaussianMech()(N.Mean()(blocks))
    return N.Apply(fn=projector, shape=(d, d))(M, b.public(float(k)))


def coarse_preconditioner(d: int, n: int, budget: Measure, k: int, gamma: float,
                          groups: int | None = None) -> Plan:
    """KMSSU CoarsePreconditioner (slides 004 Alg. 3): ``A = gamma Pi + (I - Pi)`` with ``Pi`` from
    :func:`subspace_recovery`: shrinks the top-``k`` subspace (variance by ``gamma^2``) to close the gap
    ``lambda_k / lambda_(k+1)``.  ``k`` and ``gamma`` are public (chosen from released eigenvalue
    estimates).  Source ``X``; outputs ``A`` and ``projector``.

    >>> import dpflow as dp
    >>> coarse_preconditioner(3, 3000, dp.ZCDP(0.5), k=1, gamma=0.01).check().totals[0].rho
    Fraction(1, 2)
    """
    if not (math.isfinite(gamma) and 0.0 < gamma <= 1.0):
        raise DomainError("gaussian.unbounded.coarse_preconditioner", f"gamma={gamma}", "pass 0 < gamma <= 1")
    G = _subspace_groups("gaussian.unbounded.coarse_preconditioner", d, n, budget, k, groups)
    b = PlanBuilder(budget=budget, neighbors="replace", name="kmssu_coarse")
    N.param(b, "algorithm", 0.0, f"{REF_COARSE}; {REF_SUB}")
    P = subspace_fragment(b, b.source("X", Vectors(d=d), n=n), n, d, k, G)
    A = N.Apply(fn=coarse_matrix, shape=(d, d))(P, N.param(b, "gamma", gamma, "public shrink factor"))
    return b.build(A=A, projector=P)


# ------------------------------------------------------------------------------ the scale search


def scale_plan(d: int, n: int, budget: Measure, share: Fraction | None = None, of: Measure | None = None,
               warning: str | None = None) -> Plan:
    """Phase 1 of the no-bounds fit: outputs ``eigenvalues`` (estimates of the top and the bottom
    eigenvalue of Sigma) and ``center`` (approximate budgets: a centre found coordinate by coordinate by
    stability histograms of bins ``CENTER_WIDTH sqrt(lambda_1)`` wide) or ``radius`` (``ZCDP``, ``PureDP``:
    twice the top of the modal log2 bin of the row norms; Gaussian or Laplace noise).  The centre's (or the
    radius's) histograms share :data:`CENTER_SHARE` of ``budget``, the eigenvalue histograms (buckets
    :data:`SCALE_WIDTH` wide) the rest.  ``warning`` (public text, e.g. that the plan to follow cannot reach
    its target) is added to the ledger's accuracy warnings.

    >>> import dpflow as dp
    >>> sorted(name for name, _ in scale_plan(2, 5000, dp.ApproxZCDP(0.1, 1e-6)).outputs)
    ['center', 'eigenvalues']
    """
    where = "gaussian.fit (scale search)"
    noise = _check(where, d, n, budget)
    approx = noise == "stability"
    ks = (0,) if d == 1 else (0, d - 1)
    b = PlanBuilder(budget=budget, neighbors="replace", name="gaussian_scale_search")
    if warning is not None:
        accuracy_warning(b, warning)
    X = b.source("X", Vectors(d=d), n=n)
    N.param(b, "algorithm", 0.0, f"{REF_EIG}; centre: coordinate-wise stability histograms (KMSSU / Karwa-Vadhan "
                                 f"over an unbounded grid); zCDP / pure DP: log2 exponent-bin histograms with "
                                 f"Gaussian / Laplace noise")
    # CENTER_SHARE of the budget to the centre (or radius) histograms, the rest to the eigenvalue histograms:
    # the centre's modal bins hold about half of all n rows, the eigenvalues' only half of the blocks
    # (ApproxDP: the planner composes these histograms by basic composition, which spreads epsilon by the
    # square roots of the weights, so the weights are squared to give the centre the same share of epsilon;
    # PureDP spreads epsilon by the weights)
    centres = d if approx else 1
    w_eig = float((1 - CENTER_SHARE) / CENTER_SHARE) * centres / len(ks)
    w_eig = w_eig**2 if isinstance(budget, ApproxDP) else w_eig
    if share is not None and of is not None:
        N.param(b, "scale_share", float(share), f"share {share} of the budget {of.describe()} spent on finding the "
                f"scale (this plan: {budget.describe()}); the rest runs CoinPress (sequential composition: "
                f"{SPLIT_REFERENCE})")
    N.param(b, "center_share", float(CENTER_SHARE), f"share {CENTER_SHARE} of this plan's budget for the "
            f"{'centre' if approx else 'radius'} histograms, the rest for the eigenvalue histograms (accuracy only)")
    eps = _hist_epsilon(budget, len(ks), float(1 - CENTER_SHARE))
    delta = histogram_delta(budget, len(ks) + centres)
    lams = eigen_fragment(b, N.PairDifferences()(X), n // 2, d, ks, noise, delta, eps, w_eig, SCALE_WIDTH)
    if not approx:
        mech = N.LaplaceMech() if noise == "laplace" else N.GaussianMech()
        h = mech(N.Histogram(edges=ROW_NORM_EDGES)(N.Magnitudes(of="rows")(X)))
        return b.build(eigenvalues=lams, radius=N.ModeBinUpper(edges=ROW_NORM_EDGES, factor=2.0)(h))
    Y = N.Precondition(matrix=N.Apply(fn=scale_matrix, shape=(d, d))(lams, b.public(float(d))))(X)
    keys = []
    for j in range(d):
        h = N.StabilityHistogram(delta=delta)(N.BinCounts(width=1.0)(N.Columns(keep=[j])(Y)))
        keys.append(N.Apply(fn=bucket_center, shape=())(h))
    center = N.Apply(fn=unscale_center, shape=(d,))(N.Apply(fn=stack, shape=(d,))(*keys), lams)
    return b.build(eigenvalues=lams, center=center)


def search_outlook(d: int, n: int, budget: Measure) -> tuple[bool, str]:
    """Before any data is read: whether :func:`scale_plan` under ``budget`` is expected to find the scale
    (every histogram's modal bucket expected to hold the count it needs: :func:`block_size` and
    :func:`stability_need` or :func:`grid_need` for the eigenvalues, as :func:`eigen_fragment` sizes them; the
    centres' modal bins hold about 0.47 n rows, a bin two standard deviations wide in the worst position),
    and the reason in words.  Public quantities only.

    >>> search_outlook(5, 20_000, ApproxZCDP(Fraction(1, 5), "2e-7"))[0]
    True
    >>> search_outlook(50, 10_000, ApproxDP(Fraction(1, 5), "2e-7"))
    (False, 'eigenvalue histograms: 83 blocks of 60 rows, about 37.2 in the modal bucket, 551 needed')
    """
    noise = _check("gaussian.fit (scale search)", d, n, budget)
    ks = (0,) if d == 1 else (0, d - 1)
    approx = noise == "stability"
    centres = d if approx else 1
    eps = _hist_epsilon(budget, len(ks), float(1 - CENTER_SHARE))
    delta = histogram_delta(budget, len(ks) + centres)
    m = n // 2
    if approx:
        assert delta is not None
        need, width = stability_need(eps, float(delta)), SCALE_WIDTH
    else:
        need, width = grid_need(noise, eps, len(ZCDP_GRID) - 1), ZCDP_GRID[1] - ZCDP_GRID[0]
    size = block_size(m, d, need, width)
    held = (m // size) * modal_fraction(size, d, width)
    if held < need:
        return False, (f"eigenvalue histograms: {m // size} blocks of {size} rows, about {held:.3g} in the modal "
                       f"bucket, {need:.3g} needed")
    if approx:
        assert delta is not None
        need_c = stability_need(_hist_epsilon(budget, centres, float(CENTER_SHARE)), float(delta))
        if 0.47 * n < need_c:
            return False, f"centre histograms: about {0.47 * n:.3g} rows in a modal bin, {need_c:.3g} needed"
    return True, f"eigenvalue histograms: about {held:.3g} blocks in the modal bucket, {need:.3g} needed"


def bucket_center(released: Any) -> float:
    """The centre ``key + 1/2`` of the mode bin of a released width-1 stability histogram (NaN: not found).

    >>> bucket_center((np.array([3]), np.array([50.0])))
    3.5
    """
    key = N.stability.stable_mode(released)
    return math.nan if key is None else key + 0.5


def unscale_center(c: Any, lams: Any) -> np.ndarray:
    """The centre back in data units: ``c * CENTER_WIDTH sqrt(lambda_1)`` (the inverse of :func:`scale_matrix`).

    >>> unscale_center([0.5, -1.5], [4.0, 1.0])
    array([ 2., -6.])
    """
    s = 1.0 / float(scale_matrix(lams, 1)[0, 0])
    out: np.ndarray = np.asarray(c, dtype=float) * s
    return out


@attrs.frozen
class Scale:
    """The public bounds derived from a scale search: rows are mapped to ``(x - center) / sqrt(lower)``,
    where ``||mu - center|| <= R`` and ``I <= Sigma / lower <= K I`` are expected; ``found`` is False when
    a histogram released "not found" (the fit then runs its fallback route: docs/gaussian.md)."""

    center: np.ndarray
    lower: float
    R: float
    K: float
    found: bool


def bounds_from(released: dict[str, Any], d: int) -> Scale:
    """Post-processing of the scale search's release into public bounds (no data read).

    * ``K``: 8 lambda_1-hat / lower (the top bucket's left edge is within a bucket (a factor 2 in the scale
      search) of the blocks' top eigenvalues, whose mode is within about a factor 2 of lambda_1 at small
      blocks; a factor 2 in ``K`` costs a third of a CoinPress round);
    * ``lower``: lambda_d-hat / 4, floored at ``FLOOR_RATIO`` lambda_1-hat (1 when lambda_1-hat is 0);
    * ``R``: approximate budgets: ``sqrt(d) (CENTER_WIDTH + 2) sqrt(lambda_1-hat)`` (a modal bin is within
      a bin of the mean coordinate) around the centre; zCDP and pure DP: the radius found, around 0;
      both in units of ``sqrt(lower)``, capped at ``MAX_BOUND``.

    >>> s = bounds_from({"eigenvalues": np.array([4.0, 1.0]), "center": np.array([1.0, 2.0])}, 2)
    >>> (s.lower, s.K, round(s.R, 4), s.found)
    (0.25, 128.0, 22.6274, True)
    """
    lam = np.asarray(released["eigenvalues"], dtype=float).ravel()
    cap = MAX_BOUND * MAX_BOUND  # declared: eigenvalues beyond MAX_BOUND^2 (rows beyond MAX_BOUND) count as it
    top, bottom = min(float(lam[0]), cap), min(float(lam[-1]), cap)
    found = bool(np.all(np.isfinite(lam)))
    if "center" in released:
        center = np.asarray(released["center"], dtype=float).ravel()
        found = found and bool(np.all(np.isfinite(center)))
    else:
        center = np.zeros(d)
    if not found:
        return Scale(np.full(d, math.nan), 1.0, 1.0, 1.0, False)
    if top <= 0.0:
        lower = 1.0
        top = 1.0
    else:
        lower = max(bottom / 4.0, FLOOR_RATIO * top)
    K = min(max(8.0 * top / lower, 1.0), MAX_BOUND)
    if "center" in released:
        R = math.sqrt(d) * (CENTER_WIDTH + 2.0) * math.sqrt(top)
    else:
        R = released_scalar(released["radius"])
    R = min(max(R / math.sqrt(lower), 1e-12), MAX_BOUND)
    return Scale(center, lower, R, K, found)


__all__ = ["CENTER_WIDTH", "LOG2_WIDTH", "REF_COARSE", "REF_EIG", "REF_FINE", "REF_SUB", "SCALE_SHARE", "Scale",
           "ZCDP_GRID", "bounds_from", "bucket_value", "coarse_preconditioner", "eigen_fragment", "eigenvalues",
           "scale_plan", "search_outlook", "subspace_fragment", "subspace_recovery"]
