"""Mechanisms: a sensitive aggregate in, a released value out, at a certified cost.

The planner gives each mechanism a *share* of the budget: rho (zCDP mode) or
epsilon (pure mode).  The mechanism's noise scale is its sensitivity divided by
that share's noise multiplier, computed when the sensitivity's released factors
are known; the realised cost never exceeds the share (scales are rounded up).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any, ClassVar, Literal

import attrs
import numpy as np

from dpflow.domains import SymRef, integral
from dpflow.errors import DomainError, UnboundedSensitivityError
from dpflow.nodes.base import EvalContext, InferContext, Mechanism, need, text_of, unit_ratio
from dpflow.nodes.fixedpoint import lattice_units, to_float
from dpflow.nodes.params import positive
from dpflow.nodes.types import Allocation, Inferred, Mode, StatT, VType
from dpflow.privacy import (
    Cost,
    bounded_range_eps_for_zcdp,
    bounded_range_to_zcdp,
    gaussian_sigma_for_zcdp,
    laplace_scale,
    opt_exact,
    pure_eps_for_zcdp,
    pure_to_zcdp,
)
from dpflow.privacy.pld import LATTICE_MIN_SIGMA
from dpflow.privacy.ratio import share_at_ratio
from dpflow.privacy.rounding import to_float_up, up


def _sigma_of(sensitivity: float, rho: Fraction) -> float:
    """The Gaussian sigma for ``sensitivity`` at ``rho`` (cached as ``_sigma``: every round of a loop and every
    ledger line asks again; sized for 10,000-node plans, whose accuracy rows and ledger lines ask for about
    7,500 distinct pairs: a smaller LRU cache evicts each pair before it is asked again)."""
    return gaussian_sigma_for_zcdp(sensitivity, rho)


# cached by a call, not a decorator: mutation testing (mutmut) does not mutate decorated functions
_sigma = functools.lru_cache(maxsize=1 << 16)(_sigma_of)


def _exact(ctx: EvalContext) -> bool:
    """Whether the noise source samples exact discrete noise (the protocol's ``exact`` flag)."""
    return ctx.noise.exact


LATTICE_BITS = 40
"""The lattice step is the power of two at or below (noise scale) / 2^40, and at least ``MIN_LATTICE_STEP``;
so the noise scale in lattice units is at least 2^40 (``LATTICE_MIN_SIGMA`` of ``dpflow.privacy.pld``)."""

MIN_LATTICE_STEP = 2.0**-600
"""The smallest lattice step.  A tiny noise scale (a released clipping radius of 0, say) would otherwise
make the step underflow to 0; with statistics at most ``MAX_BOUND`` = 2^256 in magnitude, value / step stays
below 2^856, a finite float.  A larger step than the scale asks for is sound: the lattice rounding is added
to the sensitivity before the noise is calibrated."""


def _lattice_step(scale: float) -> float:
    return max(math.ldexp(1.0, math.frexp(scale)[1] - 1 - LATTICE_BITS), MIN_LATTICE_STEP)


def _noised_entries(value: np.ndarray, symmetric: bool) -> np.ndarray:
    """The entries that get noise: the upper triangle of a symmetric matrix, else all."""
    return value[np.triu_indices(value.shape[0])] if symmetric else value.ravel()


def float_slack(stat: StatT, values: Mapping[SymRef, float], entries: int) -> tuple[float, float]:
    """Twice the (l2, l1) floating-point error bound of the statistic at the public ``values`` of its
    references (inf when unbounded): what a lattice release adds to the sensitivity."""
    fe = stat.float_error
    if fe is None:
        return math.inf, math.inf
    l2, l1 = fe.bound(values, entries)
    return 2.0 * l2, 2.0 * l1


def _slack(stat: StatT, ctx: EvalContext, entries: int) -> tuple[float, float]:
    fe = stat.float_error
    return float_slack(stat, ctx.public_values(fe.refs()) if fe is not None else {}, entries)


@attrs.frozen
class LatticeCalibration:
    """The lattice release of one invocation: the step, the widened sensitivity and the noise scale."""

    step: float
    sensitivity: float
    scale: float


def lattice_calibration(delta: float, slack: float, entries: int, l1: bool,
                        scale_of: Callable[[float], float], ratio: Fraction = Fraction(1)) -> LatticeCalibration | None:
    """The lattice release of a statistic of sensitivity ``delta`` with float slack ``slack`` and
    ``entries`` noised entries: step from the unwidened scale, sensitivity widened by the slack and the
    lattice rounding (step * sqrt(m) in l2, step * m in l1), scale at the widened sensitivity.  ``None``
    when no lattice release is made (the unwidened scale is 0 or not finite, or the widened one not finite).
    The one statement of the widening: the release and the ledger's accuracy rows both use it.  With a one-sided
    ``ratio`` q < 1 (the statistic's :meth:`~dpflow.nodes.base.Mechanism.one_sided_ratio`) the slack and the
    rounding are divided by q:
    a one-sided change then moves the rounded statistic by at most ``q delta + slack + rounding``, which is q times
    the widened sensitivity, as the one-sided cost assumes (:mod:`dpflow.privacy.ratio`).

    >>> c = lattice_calibration(1.0, 0.0, 1, True, lambda d: 2 * d)
    >>> c.step == 2.0 ** -39 and 1.0 + c.step <= c.sensitivity < 1.0 + 2 * c.step and c.scale == 2 * c.sensitivity
    True
    """
    scale0 = scale_of(delta + slack)
    if scale0 == 0.0 or not math.isfinite(scale0):
        return None
    step = _lattice_step(scale0)
    rounding = step * (entries if l1 else math.sqrt(entries))
    if ratio == 1:
        widened = up(delta + slack + rounding)
    else:  # float(ratio) is exact (a multiple of 2^-20)
        widened = up(delta + up(slack + rounding) / float(ratio))
    # scale / step >= 2^40 = LATTICE_MIN_SIGMA (what the lattice Gaussian PLD assumes): scale0 / step >= 2^40
    # unless the step is clamped at MIN_LATTICE_STEP; then the scale is raised (more noise is never less private)
    scale = max(scale_of(widened), step * LATTICE_MIN_SIGMA)
    return LatticeCalibration(step, widened, scale) if math.isfinite(scale) else None


def unit_lattice(unit: str | None, delta: float, slacks: tuple[float, float], entries: int,
                 scale_of: Callable[[float], float], ratio: Fraction = Fraction(1)) -> LatticeCalibration | None:
    """The lattice release of a mechanism whose noise is calibrated to its ``unit`` sensitivity (``"l2"``,
    ``"l1"``, ``"linf"``), given the (l2, l1) float slack of its ``entries`` noised entries: the one statement
    the releases and the ledger's accuracy rows share.  An l-infinity mechanism (Peel) releases one coordinate
    at a time: the l2 slack bounds every coordinate's float error and the rounding adds one step.

    >>> unit_lattice("linf", 1.0, (0.0, 0.0), 5, lambda d: d).sensitivity == unit_lattice("l2", 1.0, (0.0, 0.0), 1,
    ...                                                                                    lambda d: d).sensitivity
    True
    """
    s2, s1 = slacks
    if unit == "linf":
        return lattice_calibration(delta, s2, 1, False, scale_of, ratio)
    l1 = unit == "l1"
    return lattice_calibration(delta, s1 if l1 else s2, entries, l1, scale_of, ratio)


def _exact_path_text(stat: StatT, sampler: str) -> str:
    """What an exact noise source draws for ``stat``: the lattice path needs the statistic's float-error
    bound (without one, e.g. a sum over a private row count, the noise is continuous, and the ledger says so)."""
    if stat.float_error is None:
        return "; continuous noise on every source (this statistic has no floating-point error bound)"
    return f"; exact sources: {sampler} on a 2^-k lattice, sensitivity + lattice + 2 x float error"


def _lattice_release(value: Any, step: float, noise: np.ndarray, symmetric: bool) -> np.ndarray:
    """Round the statistic to the lattice, add the integer noise exactly, map back to floats.

    A :class:`~dpflow.nodes.fixedpoint.FixedPoint` statistic is rounded in integer arithmetic
    (:func:`~dpflow.nodes.fixedpoint.lattice_units`), a float one by ``rint``.  The last step (an exact
    integer times a power of two, rounded to a float) is post-processing of the exact release.
    """
    shape = tuple(np.shape(value))
    scaled = _noised_entries(lattice_units(value, step).reshape(shape), symmetric)
    z = noise.ravel()
    if z.dtype == np.int64 and (not scaled.size or float(np.max(np.abs(scaled))) < 2.0**62) and (
            not z.size or int(np.max(np.abs(z))) < 2**62):  # exact int64 sums (no overflow), as below
        out: np.ndarray = (scaled.astype(np.int64) + z).astype(float) * step
    else:
        e = math.frexp(step)[1] - 1
        out = np.array([to_float(int(k) + int(x), e) for k, x in zip(scaled.tolist(), z, strict=True)])
    if not symmetric:
        return out.reshape(shape)
    d = shape[0]
    full = np.zeros((d, d))
    full[np.triu_indices(d)] = out
    return full + np.triu(full, 1).T


def _lattice_noised(
    value: Any,
    delta: float,
    stat: StatT,
    ctx: EvalContext,
    l1: bool,
    scale_of: Callable[[float], float],
    key: str,
    draw: Callable[[Fraction, int], np.ndarray],
    ratio: Fraction = Fraction(1),
) -> np.ndarray:
    """Release ``value`` (a float array or an exact :class:`~dpflow.nodes.fixedpoint.FixedPoint`) on a 2^-k
    lattice with exact integer noise.

    The sensitivity ``delta`` (l2, or l1 when ``l1``) is widened by twice the floating-point error of the
    statistic and by the lattice rounding (step * sqrt(m) in l2, step * m in l1, for m noised entries);
    ``scale_of`` maps a sensitivity to the noise scale the budget share allows; ``draw(scale / step, m)``
    samples the integer noise.  An integer query of sensitivity D with discrete Gaussian N_Z(0, s^2) noise
    is D^2/(2 s^2)-zCDP (Canonne-Kamath-Steinke 2020 Thm. 4); with discrete Laplace noise P(k) ~
    exp(-|k|/t) it is D/t-DP (CKS20 Sec. 2; OpenDP's discrete Laplace).
    """
    m = int(_noised_entries(np.empty(np.shape(value)), stat.symmetric).size)
    slacks = _slack(stat, ctx, m)
    slack = slacks[1] if l1 else slacks[0]
    if not math.isfinite(delta + slack):
        return _infinite_noise(value, ctx, key)
    cal = unit_lattice("l1" if l1 else "l2", delta, slacks, m, scale_of, ratio)
    if cal is None:
        if scale_of(delta + slack) == 0.0:
            ctx.record(key, 0.0)
            return np.asarray(value, dtype=float)  # sensitivity 0: the statistic does not depend on the data
        return _infinite_noise(value, ctx, key)
    ctx.record(key, cal.scale)
    ctx.record("lattice", {"step": cal.step, "sensitivity": cal.sensitivity, "float_slack": slack})
    return _lattice_release(value, cal.step, draw(Fraction(cal.scale) / Fraction(cal.step), m), stat.symmetric)


def _infinite_noise(value: Any, ctx: EvalContext, key: str) -> np.ndarray:
    """The release under noise of infinite scale (a sensitivity bound that is not finite, e.g. from a
    released radius that is infinite or NaN; see ``Sym.value``): every entry is NaN whatever the data,
    so it reveals nothing and never raises.  The run records the scale as ``inf``."""
    ctx.record(key, math.inf)
    return np.full(np.shape(value), np.nan)


def _sym_noise(noise: np.ndarray) -> np.ndarray:
    upper = np.triu(noise)
    out: np.ndarray = upper + upper.T - np.diag(np.diag(upper))
    return out


def _need_stat(ins: Sequence[VType], ctx: InferContext) -> StatT:
    stat: StatT = need(ins, StatT, ctx, "a sensitive aggregate (a query such as Mean or Sum)")
    return stat


def _unbounded(ctx: InferContext, norm: str) -> UnboundedSensitivityError:
    return UnboundedSensitivityError(
        ctx.node_id,
        f"its input has unbounded {norm} sensitivity (the rows it aggregates are not bounded)",
        "insert Clip (an l2 ball or a box) before the query",
    )


class EpsilonMechanism(Mechanism):
    """A mechanism whose cost is a pure epsilon: the share itself in pure mode, sqrt(2 rho) in zCDP
    mode (eps-DP implies eps^2/2-zCDP, Bun-Steinke 2016 Prop. 1.4), or sqrt(8 rho) for a
    ``bounded_range`` mechanism (eps-BR implies eps^2/8-zCDP, Cesar-Rogers 2021).  ``epsilon`` fixes the
    cost."""

    epsilon: Fraction | None
    pure_capable: ClassVar[bool] = True
    gaussian_profile: ClassVar[bool] = False

    def fixed_share(self, mode: Mode) -> Fraction | None:
        if self.epsilon is None:
            return None
        if mode == "pure":
            return self.epsilon
        return bounded_range_to_zcdp(self.epsilon) if self.bounded_range else pure_to_zcdp(self.epsilon)

    def eps(self, share: Fraction, mode: Mode) -> Fraction:
        """The pure epsilon a share buys."""
        if mode == "pure":
            return share
        return bounded_range_eps_for_zcdp(share) if self.bounded_range else pure_eps_for_zcdp(share)

    def cost(self, share: Fraction, mode: Mode) -> Cost:
        e = self.eps(share, mode)
        return Cost.bounded_range(e) if self.bounded_range else Cost.pure(e)


@attrs.frozen(kw_only=True)
class GaussianMech(Mechanism):
    """Add N(0, sigma^2) to every entry, sigma = Delta_2 / sqrt(2 rho).

    Symmetric matrices get noise on the upper triangle (diagonal included),
    mirrored: the l2 norm of the upper triangle is at most the Frobenius norm.
    ``rho`` fixes the cost; otherwise the node gets ``weight`` of the budget.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=2), n=10)
    >>> m = dp.nodes.GaussianMech()(dp.nodes.Mean()(dp.nodes.Clip(radius=1.0)(X)))
    """

    kind: ClassVar[str] = "GaussianMech"
    pure_capable: ClassVar[bool] = False
    gaussian_profile: ClassVar[bool] = True
    noise_unit: ClassVar[str | None] = "l2"
    noise_family: ClassVar[Literal["gaussian", "laplace"] | None] = "gaussian"
    reference: ClassVar[str] = "Bun-Steinke 2016 Prop. 1.6 (Gaussian mechanism is Delta^2/(2 sigma^2)-zCDP)"
    weight: float = attrs.field(default=1.0, converter=positive)
    rho: Fraction | None = attrs.field(default=None, converter=opt_exact)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        stat = _need_stat(ins, ctx)
        return Inferred(self.released(stat.shape, ctx), "")

    def takes_lattice(self, stat: StatT, alloc: Allocation) -> bool:
        """On the lattice when the statistic has a float-error bound, unless the certificate rests on the
        exact Gaussian-DP profile (proven for continuous noise only)."""
        return stat.float_error is not None and not alloc.continuous_gaussian

    def check_input(self, stat: StatT, ctx: InferContext) -> str:
        if stat.l2 is None:
            raise _unbounded(ctx, "l2")
        return f"l2 = {stat.l2.text()}"

    def fixed_share(self, mode: Mode) -> Fraction | None:
        return self.rho

    def cost(self, share: Fraction, mode: Mode) -> Cost:
        if mode == "pure":
            raise self.pure_refusal(self.kind)
        return Cost.gaussian_zcdp(share)

    def one_sided_ratio(self, stat: StatT) -> Fraction:
        """The ratio of the one-sided l2 sensitivity to the l2 sensitivity (:func:`~dpflow.nodes.base.unit_ratio`)."""
        return unit_ratio(stat, "l2")

    def one_sided_cost(self, share: Fraction, mode: Mode, ratio: Fraction) -> Cost:
        """The same noise at l2 shift ``ratio * Delta_2``: ``ratio^2 rho``-zCDP, its Gaussian-DP profile and PLD at
        ``ratio^2 mu^2`` (:mod:`dpflow.privacy.ratio`).

        >>> GaussianMech().one_sided_cost(Fraction(1, 2), "zcdp", Fraction(1, 2)).rho
        Fraction(1, 8)
        """
        return self.cost(share_at_ratio(share, ratio, "zcdp"), mode)

    def noise_scale(self, sensitivity: float, share: Fraction, mode: Mode) -> float:
        """sigma = Delta_2 / sqrt(2 rho), rounded up (rho = ``share``; no pure mode).

        >>> GaussianMech().noise_multiplier(Fraction(1, 2), "zcdp") >= 1.0
        True
        """
        if mode == "pure":
            raise self.pure_refusal(self.kind)
        return _sigma(sensitivity, share)

    def noise_text(self, stat: StatT, share: Fraction, mode: Mode) -> str:
        formula = f"sigma = {text_of(stat.l2)} / sqrt(2*{float(share):.6g})"
        if stat.l2 is not None and stat.l2.is_const:
            formula += f" = {self.noise_scale(stat.l2.coef, share, mode):.6g}"
        return (f"Gaussian, {formula}" + (" (upper triangle, mirrored)" if stat.symmetric else "")
                + _exact_path_text(stat, "discrete Gaussian"))

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        stat = ctx.stat()
        alloc = ctx.allocation()
        assert stat.l2 is not None
        value = np.asarray(ins[0], dtype=float)
        delta = ctx.bound(stat.l2)
        if not math.isfinite(delta):
            return _infinite_noise(value, ctx, "sigma")
        if _exact(ctx) and self.takes_lattice(stat, alloc):
            return _lattice_noised(
                ins[0], delta, stat, ctx, False, lambda d: self.noise_scale(d, alloc.share, alloc.mode), "sigma",
                lambda ratio, m: ctx.noise.discrete_gaussian(ratio * ratio, (m,)), self.one_sided_ratio(stat))
        sigma = self.noise_scale(delta, alloc.share, alloc.mode)
        ctx.record("sigma", sigma)
        noise = ctx.noise.normal(sigma, value.shape)
        if stat.symmetric:
            noise = _sym_noise(noise)
        return value + noise


@attrs.frozen(kw_only=True)
class LaplaceMech(EpsilonMechanism):
    """Add Laplace(b) to every entry, b = Delta_1 / epsilon; a symmetric statistic (a second moment) gets
    noise on its upper triangle, mirrored, with Delta_1 over the upper triangle.

    Under a zCDP budget a share rho becomes epsilon = sqrt(2 rho) (pure DP implies
    eps^2/2-zCDP, Bun-Steinke 2016 Prop. 1.4).  ``epsilon`` fixes the cost.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    >>> h = dp.nodes.Histogram(edges=[0, 1, 2])(b.source("X", dp.Ordinal(N=2), n=10))
    >>> r = dp.nodes.LaplaceMech()(h)
    """

    kind: ClassVar[str] = "LaplaceMech"
    pure_capable: ClassVar[bool] = True
    gaussian_profile: ClassVar[bool] = False
    noise_unit: ClassVar[str | None] = "l1"
    noise_family: ClassVar[Literal["gaussian", "laplace"] | None] = "laplace"
    reference: ClassVar[str] = "Dwork-McSherry-Nissim-Smith 2006 (Laplace mechanism is Delta_1/b-DP)"
    weight: float = attrs.field(default=1.0, converter=positive)
    epsilon: Fraction | None = attrs.field(default=None, converter=opt_exact)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        stat = _need_stat(ins, ctx)
        return Inferred(self.released(stat.shape, ctx), "")

    def takes_lattice(self, stat: StatT, alloc: Allocation) -> bool:
        """On the lattice when the statistic has a float-error bound (discrete Laplace is pure DP)."""
        return stat.float_error is not None

    def check_input(self, stat: StatT, ctx: InferContext) -> str:
        if stat.l1 is None:
            if stat.symmetric:
                raise UnboundedSensitivityError(ctx.node_id, "a matrix statistic has no l1 sensitivity rule",
                                                "use GaussianMech for second moments")
            raise _unbounded(ctx, "l1")
        return f"l1 = {stat.l1.text()}" + (" (upper triangle)" if stat.symmetric else "")

    def one_sided_ratio(self, stat: StatT) -> Fraction:
        """The ratio of the one-sided l1 sensitivity to the l1 sensitivity (:func:`~dpflow.nodes.base.unit_ratio`)."""
        return unit_ratio(stat, "l1")

    def one_sided_cost(self, share: Fraction, mode: Mode, ratio: Fraction) -> Cost:
        """The same noise at l1 shift ``ratio * Delta_1``: ``ratio * epsilon``-DP (:mod:`dpflow.privacy.ratio`).

        >>> LaplaceMech().one_sided_cost(Fraction(1), "pure", Fraction(1, 2)).pure_eps
        Fraction(1, 2)
        """
        return Cost.pure(share_at_ratio(self.eps(share, mode), ratio, "pure"))

    def noise_scale(self, sensitivity: float, share: Fraction, mode: Mode) -> float:
        """b = Delta_1 / epsilon, rounded up (epsilon = :meth:`eps` of the share).

        >>> LaplaceMech().noise_multiplier(Fraction(1, 2), "pure") >= 2.0
        True
        """
        return laplace_scale(sensitivity, self.eps(share, mode))

    def noise_text(self, stat: StatT, share: Fraction, mode: Mode) -> str:
        eps = self.eps(share, mode)
        formula = f"b = {text_of(stat.l1)} / {float(eps):.6g}"
        if stat.l1 is not None and stat.l1.is_const:
            formula += f" = {self.noise_scale(stat.l1.coef, share, mode):.6g}"
        return (f"Laplace, {formula}" + (" (upper triangle, mirrored)" if stat.symmetric else "")
                + _exact_path_text(stat, "discrete Laplace"))

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        stat = ctx.stat()
        alloc = ctx.allocation()
        assert stat.l1 is not None
        value = np.asarray(ins[0], dtype=float)
        delta = ctx.bound(stat.l1)
        if not math.isfinite(delta):
            return _infinite_noise(value, ctx, "scale")
        if _exact(ctx) and self.takes_lattice(stat, alloc):
            return _lattice_noised(
                ins[0], delta, stat, ctx, True, lambda d: self.noise_scale(d, alloc.share, alloc.mode), "scale",
                lambda ratio, m: ctx.noise.discrete_laplace(ratio, (m,)), self.one_sided_ratio(stat))
        b = self.noise_scale(delta, alloc.share, alloc.mode)
        ctx.record("scale", b)
        noise = ctx.noise.laplace(b, value.shape)
        return value + (_sym_noise(noise) if stat.symmetric else noise)


@attrs.frozen(kw_only=True)
class Peel(Mechanism):
    """Private top-``s`` selection with noisy values (Peeling, Cai-Wang-Zhang 2021 Alg. 3.2,
    Dwork-Su-Zhang 2018).

    ``s`` rounds of report-noisy-max over ``|v_j| + Laplace(b)`` (fresh noise each
    round, non-monotone scores: ``2 lambda / b``-DP each), then the ``s`` selected
    coordinates released with fresh Laplace(b) noise (``lambda / b``-DP each), where
    lambda is the l-infinity sensitivity of v.  Output: a vector that is zero off
    the selected support.  The 2s pure steps compose by basic composition (pure
    budget, b = 3 s lambda / epsilon) or in zCDP via eps^2/2 each
    (b = lambda sqrt(5 s / (2 rho))).  ``epsilon`` fixes the (pure) cost.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=20), n=100)
    >>> top = dp.nodes.Peel(s=3)(dp.nodes.Mean()(dp.nodes.Clip(box=(-1, 1))(X)))
    """

    kind: ClassVar[str] = "Peel"
    pure_capable: ClassVar[bool] = True
    gaussian_profile: ClassVar[bool] = False
    noise_unit: ClassVar[str | None] = "linf"
    noise_family: ClassVar[Literal["gaussian", "laplace"] | None] = "laplace"
    accuracy_note: ClassVar[str] = "noise of each released coordinate (the selection is not bounded here)"
    reference: ClassVar[str] = (
        "Cai-Wang-Zhang 2021 Alg. 3.2; report-noisy-max with Laplace(2 Delta/eps) is eps-DP (Dwork-Roth 2014 "
        "Sec. 3.3); composition: basic (pure) or Bun-Steinke 2016 Prop. 1.4 + Lemma 1.7 (zCDP)"
    )
    s: int = attrs.field(converter=integral)
    weight: float = attrs.field(default=1.0, converter=positive)
    epsilon: Fraction | None = attrs.field(default=None, converter=opt_exact)

    def __attrs_post_init__(self) -> None:
        if self.s < 1:
            raise ValueError(f"Peel needs s >= 1, got {self.s}")

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        stat = _need_stat(ins, ctx)
        if len(stat.shape) != 1:
            raise DomainError(ctx.node_id, f"Peel selects from a vector, got shape {stat.shape}",
                              "apply Peel to a vector statistic such as Mean")
        if self.s > stat.shape[0]:
            raise DomainError(ctx.node_id, f"s={self.s} exceeds the dimension {stat.shape[0]}",
                              "choose s <= d")
        return Inferred(self.released(stat.shape, ctx), "")

    def check_input(self, stat: StatT, ctx: InferContext) -> str:
        if stat.linf is None:
            raise _unbounded(ctx, "l-infinity")
        return f"linf (lambda) = {stat.linf.text()}"

    def fixed_share(self, mode: Mode) -> Fraction | None:
        """With ``epsilon``: the cost of the mechanism run at the pure share epsilon, in ``mode``'s currency."""
        if self.epsilon is None:
            return None
        cost = self.cost(self.epsilon, "pure")
        assert cost.pure_eps is not None
        return cost.pure_eps if mode == "pure" else cost.rho

    def _cost_at_unit(self, u: Fraction) -> Cost:
        """s report-noisy-max rounds (2u-DP each), then s released coordinates (u-DP each)."""
        return Cost.pure(2 * u).scaled(self.s).then(Cost.pure(u).scaled(self.s))

    def unit(self, share: Fraction, mode: Mode) -> Fraction:
        """lambda / b: the privacy loss of one released coordinate.  The cost at unit u is linear in u in pure
        DP and quadratic in zCDP (every step is pure: rho = sum eps_i^2 / 2), so the unit is the share over
        the cost at unit 1, taken through the eps <-> rho rule in zCDP."""
        one = self._cost_at_unit(Fraction(1))
        if mode == "pure":
            assert one.pure_eps is not None
            return share / one.pure_eps
        return pure_eps_for_zcdp(share * pure_to_zcdp(1) / one.rho)

    def cost(self, share: Fraction, mode: Mode) -> Cost:
        return self._cost_at_unit(self.unit(share, mode))

    def noise_scale(self, sensitivity: float, share: Fraction, mode: Mode) -> float:
        """b = lambda / u rounded up to a float (u = :meth:`unit`, lambda the l-infinity sensitivity): the smallest
        float b with lambda / b <= u exactly, so the certified cost at u is never exceeded; the Laplace scale of
        every noisy-max score and of every released coordinate.

        >>> Peel(s=1).noise_multiplier(Fraction(3), "pure") >= 1.0
        True
        """
        if not sensitivity > 0:
            return 0.0
        if sensitivity == math.inf:
            return math.inf
        return to_float_up(Fraction(sensitivity) / self.unit(share, mode))

    def noise_text(self, stat: StatT, share: Fraction, mode: Mode) -> str:
        u = self.unit(share, mode)
        return (f"Laplace, b = {text_of(stat.linf)} / {float(u):.6g}, {2 * self.s} draws of d values"
                + _exact_path_text(stat, "discrete Laplace (report-noisy-max on integer scores)").replace(
                    "sensitivity + lattice", "linf sensitivity + lattice step"))

    def takes_lattice(self, stat: StatT, alloc: Allocation) -> bool:
        """On the lattice when the statistic has a float-error bound (every step is pure DP)."""
        return stat.float_error is not None

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        stat = ctx.stat()
        alloc = ctx.allocation()
        assert stat.linf is not None
        lam = ctx.bound(stat.linf)
        v = np.asarray(ins[0], dtype=float)
        d = v.shape[0]
        if _exact(ctx) and self.takes_lattice(stat, alloc) and math.isfinite(lam):
            return self._lattice(ins[0], lam, stat, ctx, lambda x: self.noise_scale(x, alloc.share, alloc.mode))
        b = self.noise_scale(lam, alloc.share, alloc.mode)
        ctx.record("scale", b)
        scores = np.abs(v)[None, :] + ctx.noise.laplace(b, (self.s, d))
        chosen = np.zeros(d, dtype=bool)
        for i in range(self.s):  # s rounds over whole vectors, not a loop over rows
            row = np.where(chosen, -np.inf, scores[i])
            chosen[int(np.argmax(row))] = True
        out = np.zeros(d)
        out[chosen] = v[chosen] + ctx.noise.laplace(b, (int(chosen.sum()),))
        return out

    def _lattice(self, value: Any, lam: float, stat: StatT, ctx: EvalContext,
                 scale_of: Callable[[float], float]) -> np.ndarray:
        """Peel on a 2^-k lattice with exact discrete Laplace noise (exact sources).

        ``v`` is rounded to the lattice, k_j = rint(v_j / step); the l-infinity sensitivity is widened by
        twice the float error of v (its l2 bound bounds every coordinate) and by one step (rounding moves
        each coordinate by at most step / 2), lambda'; b = lambda' / u as usual and t = b / step.  Each round
        is report-noisy-max over the integer scores |k_j| + Z_j, Z_j discrete Laplace(t), ties to the
        lowest index.  Proof that a round is 2 lambda' / b = 2u-DP (Dwork-Roth 2014 Claim 3.9's argument,
        which uses only the noise's mass ratio): fix the other noises; candidate i wins iff Z_i >= r* for
        an integer threshold r* (scores are integers, the tie rule fixed); a neighbour moves every score by
        at most m = lambda' / step, so its threshold r' is an integer at most r* + 2m; the discrete Laplace has
        P(Z = z + j) >= exp(-j/t) P(Z = z) for every integer z and j >= 0, hence
        P'(i) = P(Z_i >= r') >= exp(-2m/t) P(Z_i >= r*) = exp(-2m/t) P(i); symmetrically the other way.  The released
        coordinates k_j + Z_j are the discrete Laplace mechanism on integers of sensitivity m: m / t = u-DP
        (Ghosh-Roughgarden-Sundararajan 2009; CKS20 Sec. 2).  The same 2s pure steps as the continuous Peel,
        so the same cost.  A fixed-point ``value`` is rounded to the lattice in integers (``lattice_units``)."""
        v = np.asarray(value, dtype=float)
        slacks = _slack(stat, ctx, int(v.size))
        slack = slacks[0]
        cal = unit_lattice(self.noise_unit, lam, slacks, int(v.size), scale_of) if math.isfinite(slack) else None
        if cal is None:
            if math.isfinite(slack) and scale_of(lam + slack) == 0.0:  # sensitivity 0: v is public
                ctx.record("scale", 0.0)
                return np.where(_top(np.abs(v).astype(object)[None, :].repeat(self.s, 0), self.s), v, 0.0)
            return _infinite_noise(v, ctx, "scale")
        ctx.record("scale", cal.scale)
        ctx.record("lattice", {"step": cal.step, "sensitivity": cal.sensitivity, "float_slack": slack})
        t = Fraction(cal.scale) / Fraction(cal.step)
        k = np.array([int(x) for x in lattice_units(value, cal.step).ravel()], dtype=object)
        d = v.shape[0]
        chosen = _top(np.abs(k)[None, :] + ctx.noise.discrete_laplace(t, (self.s, d)).astype(object), self.s)
        release = k[chosen] + ctx.noise.discrete_laplace(t, (int(chosen.sum()),)).astype(object)
        out = np.zeros(d)
        e = math.frexp(cal.step)[1] - 1
        out[chosen] = [to_float(int(x), e) for x in release]
        return out


def _top(scores: np.ndarray, s: int) -> np.ndarray:
    """The ``s`` report-noisy-max rounds of the lattice Peel over the rows of integer ``scores`` (an object
    array): round i picks the first largest score of row i among the coordinates not yet chosen."""
    chosen = np.zeros(scores.shape[1], dtype=bool)
    for i in range(s):  # s rounds over whole vectors, not a loop over rows
        cand = np.flatnonzero(~chosen)
        chosen[int(cand[int(np.argmax(scores[i, cand]))])] = True
    return chosen
