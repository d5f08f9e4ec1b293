"""The stability-based histogram over an unknown bin set: counts of the occupied bins of an unbounded
grid (:class:`BinCounts`) released with Laplace noise above a threshold (:class:`StabilityHistogram`;
Vadhan 2017 Prop. 3.5, Bun-Nissim-Stemmer-Vadhan 2015, OpenDP ``make_laplace_threshold``;
sparse_discrete_heavy.md 1), and the mode of such a release (:func:`stable_mode`).

Declared policies (never a data-dependent exception): bin keys are clamped to +-2**62 and NaN rows
fall in the bin of 0.

>>> import numpy as np, dpflow as dp
>>> from dpflow import nodes as N
>>> b = dp.PlanBuilder(budget=dp.ApproxZCDP(0.5, 1e-6))
>>> h = N.StabilityHistogram(delta=1e-7)(N.BinCounts(width=1.0)(b.source("X", dp.Reals(), n=1000)))
>>> r = b.build(h=h).run({"X": np.full((1000, 1), 3.5)}, noise=dp.SeededNoise(0)).released["h"]
>>> stable_mode(r)
3
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np

from dpflow.errors import DomainError, UnboundedSensitivityError
from dpflow.nodes.base import EvalContext, InferContext, Mechanism, Query, need, text_of
from dpflow.nodes.mechanisms import EpsilonMechanism
from dpflow.nodes.params import finite, positive
from dpflow.nodes.rules import changes_text, count_sensitivities, one_dim
from dpflow.nodes.types import Inferred, Mode, ReleasedT, RowsT, StatT, VType
from dpflow.privacy import Cost, exact, gaussian_sigma_for_zcdp, opt_exact, to_float_up, up
from dpflow.references import Reference

_KEY_LIMIT = 2**62


@attrs.frozen
class SparseCounts:
    """Counts of the occupied bins only: sorted int64 ``keys`` and their ``counts``."""

    keys: np.ndarray
    counts: np.ndarray


@attrs.frozen(kw_only=True)
class BinCounts(Query):
    """Counts over the unbounded grid of bins ``floor((x - shift) / width)`` of one-dimensional rows;
    only occupied bins are materialised (the bin set is never enumerated).

    Bin keys are clamped to +-2**62 and NaN rows fall in the bin of 0 (declared policies).  A record
    lies in one bin: replace-one l1 2, linf 1; add/remove 1.  ``shift`` may be a public random offset
    (a randomly shifted grid, sparse_discrete_heavy.md 1.4).  Release it with
    :class:`StabilityHistogram`.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ApproxZCDP(0.5, 1e-6))
    >>> c = BinCounts(width=0.5)(b.source("X", dp.Reals(), n=10))
    """

    kind: ClassVar[str] = "BinCounts"
    reference: ClassVar[Reference] = Reference("stability histogram: one record is in one bin",
                                               "sparse_discrete_heavy.md", "1")
    width: float = attrs.field(converter=positive)
    shift: float = attrs.field(default=0.0, converter=finite)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        one_dim(rows, ctx, "BinCounts")
        l1, l2, linf = count_sensitivities(rows)
        return Inferred(StatT((), rows.source, l1, l2, linf),
                        f"BinCounts, width {self.width:.6g}, shift {self.shift:.6g}, {changes_text(rows)}: "
                        f"l1 {text_of(l1)}, linf {text_of(linf)}")

    def keys(self, a: np.ndarray) -> np.ndarray:
        """The bin key of every row of a block of one-dimensional rows (``infer`` refuses others).  Integer
        rows of a type that fits int64 are their own keys on the unit grid; otherwise NaN is 0 and +-inf the
        largest float before the division, so the quotient is never NaN (at most +-inf, then clamped).

        >>> BinCounts(width=0.5).keys(np.array([[0.2], [-0.1], [np.nan]]))
        array([ 0, -1,  0])
        """
        v = a.ravel()
        if np.can_cast(v.dtype, np.int64) and self.width == 1.0 and self.shift == 0.0:  # not uint64: it may wrap
            return np.clip(v.astype(np.int64), -_KEY_LIMIT, _KEY_LIMIT)
        with np.errstate(all="ignore"):  # nan_to_num: NaN -> 0, +-inf -> +-the largest float
            z = np.floor((np.nan_to_num(v.astype(float)) - self.shift) / self.width)
        out: np.ndarray = np.clip(z, -float(_KEY_LIMIT), float(_KEY_LIMIT)).astype(np.int64)
        return out

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        uk, counts = ctx.backend.key_counts(ins[0], self.keys)
        return SparseCounts(uk, counts.astype(float))


def _opt_delta(x: Any) -> Fraction:
    d = exact(x)
    if not 0 < d < 1:
        raise ValueError(f"delta must be in (0, 1), got {x!r}")
    return d


def threshold_counts(stat: StatT, ctx: InferContext, l2: bool) -> str:
    """The one input rule of the stability histograms (their thresholds' proofs need it): counts of linf 1
    and a constant integer l1 ``D >= 1`` (and a constant l2 when ``l2``); refused before data otherwise."""
    if stat.l1 is None or stat.linf is None or (l2 and stat.l2 is None):
        raise UnboundedSensitivityError(ctx.node_id, "its input has unbounded sensitivity",
                                        "feed it counts (BinCounts, TupleCellCounts)")
    d = stat.l1.coef
    if not (stat.l1.is_const and stat.linf.is_const and stat.linf.coef == 1.0 and d >= 1 and d == int(d)
            and (not l2 or (stat.l2 is not None and stat.l2.is_const))):
        raise DomainError(ctx.node_id, f"the thresholds need counts of linf 1 and an integer l1; got "
                          f"l1 {stat.l1.text()}, linf {stat.linf.text()}",
                          "apply the count query directly to the rows (no stability > 1 transform)")
    l2_text = f", l2 = {stat.l2.text()}" if l2 and stat.l2 is not None else ""
    return f"l1 = {stat.l1.text()}{l2_text}, linf = 1"


@attrs.frozen(kw_only=True)
class StabilityHistogram(EpsilonMechanism):
    """The stability-based histogram: Laplace noise on the occupied bins only, released when above a
    threshold; (epsilon, delta)-DP with ``delta`` a fixed public parameter.

    The input must be a count statistic with linf 1 and an integer l1 ``D`` (``BinCounts``: 2 under replace-one, 1
    under add/remove; a group of ``k`` points counted once per bin, ``TupleCellCounts``: ``2k``): noise Lap(D/eps)
    and the threshold ``t = 1 + (D/eps) ln(D/(2 delta))``.  At D = 1 this is OpenDP's ``make_laplace_threshold``;
    at D = 2 it is ``(2/eps) ln 2`` below Vadhan's survey Prop. 3.5 / BNSV (``1 + 2 ln(2/delta)/eps``, which
    spends delta/2), by the following bound.  Proof for integer ``D >= 1``: neighbours x, x' have ``a`` bins
    occupied on x only and ``b`` on x' only (count 1 there: linf 1), and the common bins differ by at most
    ``D - a - b`` in l1, so their Laplace release R is eps-DP.  Each one-sided bin is released independently with
    probability ``p = exp(-(t - 1) eps / D) / 2 = delta / D``; let ``p_a = 1 - (1 - p)^a``, ``p_b`` likewise.  For
    a set S of outputs let A be the common releases r whose output with no one-sided bin lies in S, and
    ``m = min(1, e^eps P_x'(R in A)) >= P_x(R in A)``.  Then ``P_x(S) <= (1 - p_a) m + p_a`` (x never releases
    x'-only bins) and ``e^eps P_x'(S) >= e^eps (1 - p_b) P_x'(R in A) >= (1 - p_b) m``, so ``P_x(S) - e^eps
    P_x'(S) <= p_a + (p_b - p_a) m <= max(p_a, p_b) <= max(a, b) p <= D p = delta``: (eps, delta)-DP.  The exact
    delta of worst-case neighbours (``tests/nodes/test_stability_exact_delta.py``, docs/assurance.md) reaches
    0.997 delta and never exceeds it.
    Output: ``(keys, noisy_counts)`` of the released bins; an empty release is the private "not found".  Costed
    as delta-approximate eps^2/2-zCDP (Bun-Steinke 2016 Prop. 1.13) and as its own (eps, delta) point, so it
    needs a budget with a delta: ``ApproxZCDP`` whose delta covers ``delta``, or ``ApproxDP`` (whose delta the
    planner shares with it: ``dpflow.planner.allocate.zcdp_total``).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ApproxZCDP(0.5, 1e-6))
    >>> h = StabilityHistogram(delta=1e-7)(BinCounts(width=1.0)(b.source("X", dp.Reals(), n=10)))
    """

    kind: ClassVar[str] = "StabilityHistogram"
    pure_capable: ClassVar[bool] = False
    gaussian_profile: ClassVar[bool] = False
    reference: ClassVar[Reference] = Reference(
        "stability histogram: Vadhan 2017 Prop. 3.5 / Bun-Nissim-Stemmer-Vadhan 2015's argument with D one-sided "
        "bins, delta <= max(a, b) p (dpflow's bound, docstring; reviewed by exact computation), threshold "
        "1 + (D/eps) ln(D/(2 delta)) (OpenDP make_laplace_threshold at D = 1); cost as approximate zCDP by "
        "Bun-Steinke 2016 Prop. 1.13", "sparse_discrete_heavy.md", "1.1-1.2"
    )
    delta: Fraction = attrs.field(converter=_opt_delta)
    weight: float = attrs.field(default=1.0, converter=positive)
    epsilon: Fraction | None = attrs.field(default=None, converter=opt_exact)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        need(ins, StatT, ctx, "a count statistic (BinCounts)")
        return Inferred(ReleasedT(None), "")

    def _l1(self, stat: StatT) -> float:
        assert stat.l1 is not None
        return stat.l1.coef

    def check_input(self, stat: StatT, ctx: InferContext) -> str:
        return threshold_counts(stat, ctx, l2=False)

    def cost(self, share: Fraction, mode: Mode) -> Cost:
        if mode == "pure":
            raise self.pure_refusal(self.kind)
        return Cost.approx_dp(self.eps(share, mode), self.delta)

    def scale_threshold(self, l1: float, eps: float | Fraction) -> tuple[float, float]:
        """Laplace scale ``b``, the smallest float ``>= D / eps`` (exactly), and release threshold ``t`` with
        ``(t - 1) / b >= ln(c)``, ``c = D / (2 delta)``, every step rounded up: a bin of count 1 then passes with
        probability ``exp(-(t - 1) / b) / 2 <= 1 / (2 c) = delta / D`` (derived from the ``b`` actually used, so no
        float rounding of ``eps`` or ``delta`` can push it above; docs/assurance.md).

        >>> b, t = StabilityHistogram(delta=1e-6).scale_threshold(1.0, 1.0)
        >>> b == 1.0 and 0.5 * math.exp(-(t - 1) / b) <= 1e-6
        True
        """
        b = to_float_up(exact(l1) / exact(eps))
        c = exact(l1) / (2 * self.delta)
        return b, up(1.0 + up(b * up(math.log(to_float_up(c)))))

    def noise_text(self, stat: StatT, share: Fraction, mode: Mode) -> str:
        eps = self.eps(share, mode)  # never in pure mode: the planner refuses the histogram there first
        b, t = self.scale_threshold(self._l1(stat), eps)
        return (f"Laplace b = {b:.6g} on occupied bins, released above t = {t:.6g} (eps={float(eps):.6g}, "
                f"delta={float(self.delta):.3g})"
                "; exact sources: discrete Laplace on the integer counts, released above t + 1/2")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        """Laplace noise on the occupied bins, released above the threshold.  Exact sources draw the
        discrete Laplace of the same scale on the integer counts (an exact integer release, Ghosh et al.
        2009 / CKS20: still Delta_1/b-DP on the bins both datasets occupy) with the threshold raised by 1/2:
        for integer noise P(Z >= j) = q^j / (1 + q), q = exp(-1/b), so a new bin (count 1) passes
        ``t + 1/2`` with probability at most q^(t - 1/2) / (1 + q) <= q^(t - 1) / 2 (2 sqrt(q) <= 1 + q),
        the continuous Laplace's probability of passing ``t``: the delta of the threshold is unchanged."""
        alloc = ctx.allocation()
        b, t = self.scale_threshold(self._l1(ctx.stat()), self.eps(alloc.share, alloc.mode))
        sc: SparseCounts = ins[0]
        if ctx.noise.exact:
            t = math.nextafter(t + 0.5, math.inf)
            noisy = sc.counts + ctx.noise.discrete_laplace(Fraction(b), sc.counts.shape).astype(float)
        else:
            noisy = sc.counts + ctx.noise.laplace(b, sc.counts.shape)
        ctx.record("scale", b)
        ctx.record("threshold", t)
        keep = noisy > t
        return sc.keys[keep], noisy[keep]


@attrs.frozen(kw_only=True)
class GaussianStabilityHistogram(Mechanism):
    """The stability-based histogram with Gaussian noise: N(0, sigma^2) on the occupied bins only,
    ``sigma = Delta_2 / sqrt(2 rho)``, a bin released when its noisy count is above
    ``t = 1 + sigma sqrt(2 ln(D / delta))`` (``D`` the integer l1 sensitivity, ``Delta_2`` the l2 one, linf
    1).  Cost: delta-approximate rho-zCDP (Bun-Steinke 2016 Def. 8.1), so it needs an approximate zCDP
    or (eps, delta) budget.  Where one record moves many bins by 1 (a group of ``k`` points counted once per
    cell: ``TupleCellCounts``, l1 ``2k``, l2 ``sqrt(2k)``), the Gaussian's l2 calibration costs ``sqrt(2k)``
    where the Laplace version pays ``2k``.

    Proof.  Neighbours x, x': the bins occupied on both sides differ by at most ``Delta_2`` in l2, so their
    noisy counts are the Gaussian mechanism, rho-zCDP (Bun-Steinke 2016 Prop. 1.6), and so is any function
    of them, the thresholded release included.  A bin occupied on one side only holds count 1 there
    (linf 1), and there are at most ``D`` of them (each adds 1 to the l1 distance); each passes ``t`` with
    probability at most ``exp(-(t - 1)^2 / (2 sigma^2)) = delta / D`` (the Chernoff bound of a
    sigma-subgaussian variable: the Gaussian, and the discrete Gaussian, Canonne-Kamath-Steinke 2020 Sec.
    2).  Let E be the event that none of x's one-sided bins is released (probability >= 1 - delta), E' the
    same for x'.  Conditioned on E (and E'), the bins' noises are independent, so the output is the
    thresholded release of the common bins alone, and the Renyi divergences between the two conditioned
    outputs are those of the Gaussian mechanism on the common bins: at most ``rho alpha``.  That is
    delta-approximate rho-zCDP.  Exact sources draw the discrete Gaussian of variance ``sigma^2`` on the
    integer counts (CKS20 Thm 4: the same rho for integer differences; the tail bound holds as stated).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ApproxZCDP(0.5, 1e-6))
    >>> h = GaussianStabilityHistogram(delta=1e-7)(BinCounts(width=1.0)(b.source("X", dp.Reals(), n=10)))
    """

    kind: ClassVar[str] = "GaussianStabilityHistogram"
    pure_capable: ClassVar[bool] = False
    gaussian_profile: ClassVar[bool] = False
    reference: ClassVar[Reference] = Reference(
        "Gaussian stability histogram: Gaussian mechanism on the occupied bins (Bun-Steinke 2016 Prop. 1.6), "
        "one-sided bins of count 1 above 1 + sigma sqrt(2 ln(D/delta)) with probability <= delta (subgaussian "
        "tail, Canonne-Kamath-Steinke 2020), delta-approximate zCDP (Bun-Steinke 2016 Def. 8.1)",
        "sparse_discrete_heavy.md", "1")
    delta: Fraction = attrs.field(converter=_opt_delta)
    weight: float = attrs.field(default=1.0, converter=positive)
    rho: Fraction | None = attrs.field(default=None, converter=opt_exact)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        need(ins, StatT, ctx, "a count statistic (BinCounts, TupleCellCounts)")
        return Inferred(ReleasedT(None), "")

    def check_input(self, stat: StatT, ctx: InferContext) -> str:
        return threshold_counts(stat, ctx, l2=True)

    def fixed_share(self, mode: Mode) -> Fraction | None:
        return self.rho

    def cost(self, share: Fraction, mode: Mode) -> Cost:
        if mode == "pure":
            raise self.pure_refusal(self.kind)
        return Cost.approx_zcdp(share, self.delta)

    def scale_threshold(self, l1: float, l2: float, rho: Fraction) -> tuple[float, float]:
        """sigma and the release threshold (both rounded up, against the user).

        >>> s, t = GaussianStabilityHistogram(delta=1e-6).scale_threshold(6.0, 6.0 ** 0.5, Fraction(1, 2))
        >>> round(s, 6), round(t, 4)
        (2.44949, 14.6853)
        """
        sigma = gaussian_sigma_for_zcdp(l2, rho)
        t = 1.0 + sigma * math.sqrt(2.0 * math.log(l1 / float(self.delta)))
        return sigma, math.nextafter(t * (1 + 1e-12), math.inf)

    def noise_text(self, stat: StatT, share: Fraction, mode: Mode) -> str:
        assert stat.l1 is not None and stat.l2 is not None  # check_input; never in pure mode (refused first)
        sigma, t = self.scale_threshold(stat.l1.coef, stat.l2.coef, share)
        return (f"Gaussian sigma = {sigma:.6g} on occupied bins, released above t = {t:.6g} (rho={float(share):.6g}, "
                f"delta={float(self.delta):.3g}); exact sources: discrete Gaussian on the integer counts")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        alloc = ctx.allocation()
        stat = ctx.stat()
        assert stat.l1 is not None and stat.l2 is not None
        sigma, t = self.scale_threshold(stat.l1.coef, stat.l2.coef, alloc.share)
        sc: SparseCounts = ins[0]
        if ctx.noise.exact:
            noisy = sc.counts + ctx.noise.discrete_gaussian(Fraction(sigma) ** 2, sc.counts.shape).astype(float)
        else:
            noisy = sc.counts + ctx.noise.normal(sigma, sc.counts.shape)
        ctx.record("sigma", sigma)
        ctx.record("threshold", t)
        keep = noisy > t
        return sc.keys[keep], noisy[keep]


def stable_mode(released: Any) -> int | None:
    """The key of the largest released count of a :class:`StabilityHistogram`, or ``None``
    ("not found", a released outcome).

    >>> stable_mode((np.array([3, 7]), np.array([10.0, 12.0])))
    7
    """
    keys, counts = released
    if len(keys) == 0:
        return None
    return int(keys[int(np.argmax(counts))])


__all__ = [
    "BinCounts", "GaussianStabilityHistogram", "SparseCounts", "StabilityHistogram", "stable_mode",
]
