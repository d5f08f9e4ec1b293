"""The sparse vector technique: :class:`AboveThreshold` halts at the first query above a noisy threshold.

The input is a sensitive vector of query answers ``f_1, ..., f_m`` whose l-infinity sensitivity
``Delta`` bounds how far one record's change moves any single answer (the answers may move in
different directions: non-monotone queries).  The mechanism draws ``T_hat = T + Lap(Delta / eps1)``
and ``nu_i = Lap(2 Delta / eps2)`` and releases the first ``i`` with ``f_i + nu_i >= T_hat``, or
:data:`NOT_FOUND`.  This is ``(eps1 + eps2)``-DP however many queries there are (Lyu-Su-Li 2017,
Alg. 1 with c = 1; Dwork-Roth 2014 Alg. 1 / Thm 3.23 is the split eps1 = eps2 = eps / 2).  The
noisy answers are never released.

>>> import numpy as np, dpflow as dp
>>> from dpflow import nodes as N
>>> b = dp.PlanBuilder(budget=dp.PureDP(1.0))
>>> X = b.source("X", dp.Reals(), n=1000)
>>> h = N.Histogram(edges=[0.0, 1.0, 2.0, 3.0])(X)
>>> first = AboveThreshold(threshold=300.0)(h)
>>> data = np.repeat([0.5, 1.5, 2.5], [100, 200, 700]).reshape(-1, 1)
>>> int(b.build(first=first).run({"X": data}, noise=dp.SeededNoise(0)).released["first"])
2
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np

from dpflow.errors import DomainError, UnboundedSensitivityError
from dpflow.handles import Ref
from dpflow.nodes.base import EvalContext, InferContext, need, released_type, text_of
from dpflow.nodes.fixedpoint import FixedPoint, lattice_units
from dpflow.nodes.mechanisms import EpsilonMechanism, float_slack
from dpflow.nodes.params import positive, released_or_finite
from dpflow.nodes.types import Inferred, Mode, ReleasedT, StatT, VType
from dpflow.privacy import laplace_scale, opt_exact
from dpflow.references import Reference

__all__ = ["NOT_FOUND", "THRESHOLD_SHARE", "AboveThreshold", "found_index", "margin", "svt_split"]

NOT_FOUND = -1
"""The released index when no query is above the threshold (a released outcome, never an exception)."""

THRESHOLD_SHARE = Fraction(1 / (1 + 2 ** (2 / 3))).limit_denominator(10**6)
"""The share of epsilon spent on the threshold, ``eps1 / eps = 1 / (1 + (2c)^(2/3))`` with c = 1 (Lyu-Su-Li
2017, Sec. 4.2: the split that minimises the variance of ``nu_i - rho`` for non-monotone queries),
about 0.386.  Any split is private (the cost is eps1 + eps2 = eps exactly); this one is for accuracy."""

LATTICE_BITS = 40
"""Exact sources: the answers are floored to a power-of-two lattice step at or below Delta / 2^40."""


def svt_split(epsilon: Fraction) -> tuple[Fraction, Fraction]:
    """``(eps1, eps2)``: the threshold's and the queries' parts of ``epsilon`` (they sum to it exactly).

    >>> e1, e2 = svt_split(Fraction(1))
    >>> e1 + e2 == 1 and 0.38 < e1 < 0.39
    True
    """
    eps1 = epsilon * THRESHOLD_SHARE
    return eps1, epsilon - eps1


def margin(delta: float, m: int, eps1: float, eps2: float, beta: float) -> float:
    """The accuracy margin ``alpha = Delta ln(1/beta)/eps1 + 2 Delta ln(m/beta)/eps2``: with probability at
    least ``1 - beta`` the threshold noise is above ``-Delta ln(1/beta)/eps1`` (one-sided Laplace tail
    ``exp(-x/b)/2 <= beta/2``) and every one of the m answers' noises is below ``2 Delta ln(m/beta)/eps2``
    (union bound, ``beta/(2m)`` each), so no answer below ``T - alpha`` halts and any answer at or above
    ``T`` does (Dwork-Roth 2014 Thm 3.24, for this split).

    >>> round(margin(1.0, 1, 1.0, 1.0, math.exp(-1)), 6)
    3.0
    """
    return delta * math.log(1.0 / beta) / eps1 + 2.0 * delta * math.log(m / beta) / eps2


def _opt_beta(x: Any) -> float | None:
    if x is None:
        return None
    b = float(x)
    if not 0.0 < b < 1.0:
        raise ValueError(f"margin_beta must be in (0, 1), got {x!r}")
    return b


def _opt_finite(x: Any) -> float | None:
    if x is None:
        return None
    v = float(x)
    if not math.isfinite(v):
        raise ValueError(f"min_threshold must be finite, got {x!r}")
    return v


def _floor_units(x: float, step: float) -> int:
    """``floor(x / step)`` exactly, for a finite ``x`` (infinite answers and thresholds are decided without it)."""
    return math.floor(Fraction(x) / Fraction(step))


def found_index(released: Any) -> int | None:
    """The index an :class:`AboveThreshold` released, or ``None`` for "not found".

    >>> found_index(3), found_index(NOT_FOUND)
    (3, None)
    """
    i = int(np.asarray(released).item())
    return None if i < 0 else i


def _threshold_value(ctx: EvalContext, t: float | Ref) -> float:
    """Declared policy for a released threshold: NaN counts as +inf (nothing is above it)."""
    if not isinstance(t, Ref):
        return t
    v = float(np.asarray(ctx.value(t)).item())  # a released scalar (infer checks its shape)
    return math.inf if math.isnan(v) else v


@attrs.frozen(kw_only=True)
class AboveThreshold(EpsilonMechanism):
    """The index of the first query answer above a noisy threshold, or :data:`NOT_FOUND` (sparse vector,
    c = 1).

    Input: a sensitive vector of ``m`` answers with l-infinity sensitivity ``Delta``.  With ``(eps1, eps2)
    = svt_split(eps)``: ``T_hat = T + Lap(Delta / eps1)``, ``nu_i = Lap(2 Delta / eps2)`` for every ``i``
    (all drawn, whatever the data), release ``min{i : f_i + nu_i >= T_hat}``.  Cost: pure ``eps`` (Lyu-Su-Li
    2017 Alg. 1, Thm 2 with c = 1); a zCDP share rho buys eps = sqrt(2 rho) (Bun-Steinke 2016 Prop. 1.4).
    ``threshold`` is public or a released scalar (NaN counts as +inf).  With ``margin_beta`` the threshold
    is lowered by the accuracy margin :func:`margin` at that failure probability (public: it depends on
    Delta, m and the certified share only), so that an answer at or above ``threshold`` halts the scan with
    probability at least ``1 - margin_beta``; with ``min_threshold``, a lowered threshold below it releases
    :data:`NOT_FOUND` without looking at the answers (a public decision: the budget is too small).
    Declared policies: a NaN answer is never above; an infinite sensitivity releases :data:`NOT_FOUND`.

    Exact sources (``SecureNoise``): the answers are floored to the lattice ``step * Z`` (step a power of
    two at or below ``Delta / 2^40``), which moves an answer's sensitivity to ``D = ceil((Delta + 2 err) /
    step)`` lattice units (``err`` the statistic's floating-point error bound, 0 for counts), and the noise
    is exact discrete Laplace on the integers with scales ``D / eps1`` and ``2 D / eps2``.  The proof of
    the continuous case goes through on the integers: its changes of variables are integer shifts of at
    most ``D`` (threshold) and ``2 D`` (the halting query), under which the discrete Laplace pmf ratio is
    at most ``exp(shift / scale)`` (Canonne-Kamath-Steinke 2020 Sec. 2).  A statistic without a
    floating-point error bound gets continuous noise on every source, and the ledger says so.

    >>> import dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> i = AboveThreshold(threshold=10.0)(N.Histogram(edges=[0, 1, 2])(b.source("X", dp.Reals(), n=50)))
    """

    kind: ClassVar[str] = "AboveThreshold"
    pure_capable: ClassVar[bool] = True
    gaussian_profile: ClassVar[bool] = False
    reference: ClassVar[Reference] = Reference(
        "sparse vector / AboveThreshold: Lyu-Su-Li 2017 Alg. 1 (c = 1), Dwork-Roth 2014 Alg. 1 Thm 3.23; "
        "discrete Laplace on integer answers: Canonne-Kamath-Steinke 2020 Sec. 2; zCDP via Bun-Steinke 2016 "
        "Prop. 1.4", "mixtures.md", "2.7")
    threshold: float | Ref = attrs.field(converter=released_or_finite)
    margin_beta: float | None = attrs.field(default=None, converter=_opt_beta)
    min_threshold: float | None = attrs.field(default=None, converter=_opt_finite)
    weight: float = attrs.field(default=1.0, converter=positive)
    epsilon: Fraction | None = attrs.field(default=None, converter=opt_exact)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        stat: StatT = need(ins, StatT, ctx, "a vector of query answers (Histogram, TerrificScores, ...)")
        if len(stat.shape) != 1 or stat.shape[0] < 1:
            raise DomainError(ctx.node_id, f"AboveThreshold scans a non-empty vector of answers, got shape "
                              f"{stat.shape}", "feed it a vector statistic (one answer per query)")
        if isinstance(self.threshold, Ref):
            t = released_type(self.threshold, ctx, "threshold")
            if t.shape is not None and t.shape != ():
                raise DomainError(ctx.node_id, f"threshold refers to {self.threshold.id} of shape {t.shape}",
                                  "pass a released scalar")
        return Inferred(ReleasedT(()), f"first of {stat.shape[0]} answers above the noisy threshold")

    def check_input(self, stat: StatT, ctx: InferContext) -> str:
        if stat.linf is None:
            raise UnboundedSensitivityError(ctx.node_id, "its answers have unbounded l-infinity sensitivity",
                                            "bound the rows (Clip) before the query")
        return f"linf (Delta) = {stat.linf.text()}"

    def scales(self, sensitivity: float, share: Fraction, mode: Mode) -> tuple[float, float]:
        """The continuous Laplace scales ``(Delta / eps1, 2 Delta / eps2)``, rounded up.

        >>> AboveThreshold(threshold=0.0).scales(1.0, Fraction(1), "pure") == (
        ...     laplace_scale(1.0, svt_split(Fraction(1))[0]), laplace_scale(2.0, svt_split(Fraction(1))[1]))
        True
        """
        eps1, eps2 = svt_split(self.eps(share, mode))
        return laplace_scale(sensitivity, eps1), laplace_scale(2.0 * sensitivity, eps2)

    def noise_text(self, stat: StatT, share: Fraction, mode: Mode) -> str:
        eps1, eps2 = svt_split(self.eps(share, mode))
        lattice = ("; continuous noise on every source (no floating-point error bound)" if stat.float_error is None
                   else "; exact sources: discrete Laplace on a 2^-k lattice of the answers")
        return (f"threshold Laplace b = {text_of(stat.linf)} / {float(eps1):.6g}, answers Laplace b = "
                f"2*{text_of(stat.linf)} / {float(eps2):.6g}" + lattice)

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        stat = ctx.stat()
        alloc = ctx.allocation()
        assert stat.linf is not None
        f = np.asarray(ins[0], dtype=float).ravel()
        f = np.where(np.isnan(f), -np.inf, f)  # declared policy: a NaN answer is never above
        T = _threshold_value(ctx, self.threshold)
        delta = ctx.bound(stat.linf)
        m = f.shape[0]
        eps1, eps2 = svt_split(self.eps(alloc.share, alloc.mode))
        if self.margin_beta is not None:
            T -= margin(delta, m, float(eps1), float(eps2), self.margin_beta)
            ctx.record("threshold", T)
        fixed = ins[0] if isinstance(ins[0], FixedPoint) else None
        if self.min_threshold is not None and not T >= self.min_threshold:
            T = math.inf  # public decision: the budget is too small for this threshold (nothing is above +inf)
        if ctx.noise.exact and stat.float_error is not None:
            slack = float_slack(stat, ctx.public_values(stat.float_error.refs()), m)[0]  # l2 >= linf
            finite = math.isfinite(delta) and math.isfinite(slack)  # the exact sum: a float sum may round down
            return self._exact(f, T, Fraction(delta) + Fraction(slack) if finite else math.inf, eps1, eps2, ctx,
                               fixed)
        if not math.isfinite(delta):
            ctx.record("scales", (math.inf, math.inf))
            ctx.noise.laplace(1.0, (m + 1,))  # the draws do not depend on the data
            return NOT_FOUND
        b1, b2 = self.scales(delta, alloc.share, alloc.mode)
        ctx.record("scales", (b1, b2))
        rho = ctx.noise.laplace(b1, (1,))
        nu = ctx.noise.laplace(b2, (m,))
        # declared policies, exactly: a -inf (NaN) answer is never above, nothing is above a +inf threshold
        above = np.flatnonzero((f + nu >= T + rho[0]) & (f > -np.inf) & (T < math.inf))
        return int(above[0]) if above.size else NOT_FOUND

    def _exact(self, f: np.ndarray, T: float, delta: float | Fraction, eps1: Fraction, eps2: Fraction,
               ctx: EvalContext, fixed: FixedPoint | None = None) -> int:
        """The integer version on the lattice ``step * Z`` with exact discrete Laplace noise; ``delta`` is the
        widened sensitivity, exact (``D = ceil(delta / step)`` must not see a sum rounded down); the answers of
        an exact ``fixed`` statistic are floored in integer arithmetic (``lattice_units``), not from floats."""
        m = f.shape[0]
        if not math.isfinite(delta):
            ctx.record("scales", (math.inf, math.inf))
            ctx.noise.discrete_laplace(Fraction(1), (m + 1,))
            return NOT_FOUND
        step = math.ldexp(1.0, math.frexp(float(delta))[1] - 1 - LATTICE_BITS) if delta > 0 else 1.0
        D = max(math.ceil(Fraction(delta) / Fraction(step)), 1)
        t1, t2 = Fraction(D) / eps1, Fraction(2 * D) / eps2
        ctx.record("scales", (float(t1) * step, float(t2) * step))
        ctx.record("lattice", {"step": step, "sensitivity_units": D})
        rho = int(ctx.noise.discrete_laplace(t1, (1,))[0])
        nu = ctx.noise.discrete_laplace(t2, (m,))
        if T == math.inf:  # a public threshold (declared policy: nothing is above +inf)
            return NOT_FOUND
        t_hat = None if T == -math.inf else _floor_units(T, step) + rho
        exact_floors = None if fixed is None else [int(k) for k in lattice_units(fixed, step, floor=True).ravel()]
        for i in range(m):  # m queries (public), not rows
            if f[i] == -math.inf:  # declared policy: a -inf (NaN) answer is never above
                continue
            if t_hat is None or f[i] == math.inf:  # every other answer is above -inf, and +inf above every T
                return i
            floor = _floor_units(float(f[i]), step) if exact_floors is None else exact_floors[i]
            if floor + int(nu[i]) >= t_hat:
                return i
        return NOT_FOUND
