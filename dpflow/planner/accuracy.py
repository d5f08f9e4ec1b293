"""Accuracy before data: the half-width of a (1 - alpha) interval of every release's noise.

The planner records, for every mechanism invocation (per round weight inside ``Repeat`` loops), the
noise it will add: a :class:`NoiseCalibration` in the ledger, computed by the mechanism's own
:meth:`~dpflow.nodes.Mechanism.noise_scale` from the certified allocation and the statistic's
sensitivity (the calibration is never restated here).  :meth:`Ledger.accuracy
<dpflow.planner.ledger.Ledger.accuracy>` turns them into :class:`Accuracy` rows at any ``alpha``.

Every interval is **per coordinate**: each noised entry is within the half-width of its statistic with
probability at least 1 - alpha.  For all m entries of a release at once, ask at ``alpha / m`` (union bound).

* Gaussian N(0, sigma^2): sigma * z_{1 - alpha/2} (exact quantile).
* Laplace(b): P(|X| > t) = exp(-t / b), so b * ln(1 / alpha) (exact quantile).
* Discrete Gaussian on the lattice step * Z, Z ~ N_Z(0, s^2), s = scale / step: the integer
  k = ceil(s * z_{1 - alpha/2}).  A bound, not the exact quantile: P(|Z| > k) is at most the continuous
  two-sided tail at k / s (the sum over j > k is below the integral from k, and the normaliser is at least
  s sqrt(2 pi) by Poisson summation), so k is at least the true quantile (about 1 / s relative above it;
  s is near 2^40 on the release lattice).
* Discrete Laplace, P(Z = k) ~ exp(-|k| / t), t = scale / step: the exact quantile from the closed
  form P(|Z| > k) = 2 exp(-(k + 1) / t) / (1 + exp(-1 / t)).
* The lattice releases round the statistic to the lattice before the integer noise is added, so their
  half-width is (k + 1/2) * step: it covers the release around the statistic as computed.  Their scale
  is the mechanism's scale at the widened sensitivity (sensitivity + 2 x float error + lattice rounding),
  as the run computes it.

Where the sensitivity is not a constant (a released radius, a run-time row count), the accuracy is not
known before data: the row gives the half-width per unit of that sensitivity (``per_unit``) and its
formula; the run records the realised scale (``report.json``, ``noise_scales``).  The interval is that
of the noise only; clipping and other bias are not in it.  Half-widths are rounded up.

>>> import dpflow as dp
>>> from dpflow import nodes as N
>>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
>>> X = b.source("X", dp.Vectors(d=2), n=100)
>>> row = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))).check().accuracy(0.05)[0]
>>> round(row.half_width, 4), row.per_unit
(0.0392, False)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, Literal

import attrs

from dpflow.errors import BudgetError
from dpflow.nodes.base import Mechanism
from dpflow.nodes.mechanisms import float_slack, unit_lattice
from dpflow.nodes.postprocess import Prediction as Prediction  # listed by the ledger (re-exported here)
from dpflow.nodes.types import Allocation, StatT
from dpflow.privacy.rounding import up

if TYPE_CHECKING:
    from dpflow.planner.allocate import InvocationTable
    from dpflow.planner.infer import TypedScope

Family = Literal["gaussian", "laplace", "none"]

_NOT_ADDITIVE = "not an additive-noise release (a selection or thresholded release): no interval"


@attrs.frozen
class NoiseCalibration:
    """The noise one mechanism invocation adds, as certified (data; no data was read).

    ``scale`` is the noise scale of continuous noise (sigma or b) when ``per_unit`` is false, else the
    scale per unit of the sensitivity ``sensitivity`` (a formula with run-time values).  ``lattice_step``
    and ``lattice_scale`` describe the release exact noise sources make (discrete noise on a lattice),
    when it is known before data; ``lattice`` says whether such sources release on the lattice.
    ``rounds`` names the rounds of the enclosing ``Repeat`` loops this invocation stands for.
    """

    node: str
    kind: str
    family: Family
    rounds: str = ""
    sensitivity: str = ""
    per_unit: bool = False
    scale: float = 0.0
    entries: int = 0
    lattice: bool = False
    lattice_step: float | None = None
    lattice_scale: float | None = None
    note: str = ""

    def to_data(self) -> dict[str, Any]:
        """JSON data (the fields)."""
        return attrs.asdict(self)

    @staticmethod
    def from_data(d: dict[str, Any]) -> NoiseCalibration:
        """The inverse of :meth:`to_data`."""
        return NoiseCalibration(**d)


@attrs.frozen
class Accuracy:
    """One release's accuracy at ``alpha``: per coordinate, the noise is within ``half_width`` of the
    statistic with probability at least 1 - alpha (continuous noise sources), and within
    ``exact_half_width`` on exact sources (``SecureNoise``, ``SeededNoise(exact=True)``) when they release
    on the lattice.  With ``per_unit``, both are per unit of ``sensitivity`` (known after data).
    ``None``: no interval (no additive noise, or not known before data: see ``note``).
    """

    node: str
    kind: str
    noise: str
    alpha: float
    half_width: float | None
    exact_half_width: float | None
    per_unit: bool
    sensitivity: str
    rounds: str = ""
    entries: int = 0
    note: str = ""

    def describe(self) -> str:
        """One readable line.

        >>> Accuracy("m", "GaussianMech", "Gaussian", 0.05, 1.5, None, True, "r").describe()
        'm: Gaussian, +/- 1.5 x (r) per coordinate at 95% (depends on r: known after data)'
        """
        where = f"{self.node}" + (f" ({self.rounds})" if self.rounds else "")
        if self.half_width is None:
            return f"{where}: {self.noise}" + (f"; {self.note}" if self.note else "")
        unit = f" x ({self.sensitivity})" if self.per_unit else ""
        level = f"{100 * (1 - self.alpha):.6g}%"
        text = f"{where}: {self.noise}, +/- {self.half_width:.6g}{unit} per coordinate at {level}"
        if self.per_unit:
            text += f" (depends on {self.sensitivity}: known after data)"
        if self.exact_half_width is not None:
            text += f"; exact sources: +/- {self.exact_half_width:.6g}{unit}"
        return text + (f"; {self.note}" if self.note else "")


# --------------------------------------------------------------------------- quantiles


def _check_alpha(alpha: float) -> float:
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    return a


def gaussian_z(alpha: float) -> float:
    """z_{1 - alpha/2}, rounded up: N(0, 1) is outside [-z, z] with probability at most alpha.

    >>> round(gaussian_z(0.05), 6)
    1.959964
    """
    return up(NormalDist().inv_cdf(1.0 - _check_alpha(alpha) / 2.0))


def gaussian_half_width(sigma: float, alpha: float) -> float:
    """sigma * z_{1 - alpha/2}, rounded up (the exact two-sided quantile of N(0, sigma^2))."""
    return up(sigma * gaussian_z(alpha)) if sigma > 0 else 0.0


def laplace_half_width(b: float, alpha: float) -> float:
    """b * ln(1 / alpha), rounded up: Laplace(b) has P(|X| > t) = exp(-t / b).

    >>> round(laplace_half_width(1.0, 0.05), 6)
    2.995732
    """
    return up(b * -math.log(_check_alpha(alpha))) if b > 0 else 0.0


def discrete_gaussian_quantile(s: float, alpha: float) -> int:
    """An integer k with P(|Z| > k) <= alpha for Z ~ N_Z(0, s^2) (P(k) ~ exp(-k^2 / (2 s^2))):
    k = ceil(s * z_{1 - alpha/2}), a bound at least the true quantile (see the module docstring).

    >>> discrete_gaussian_quantile(3.0, 0.05)
    6
    """
    return math.ceil(up(s * gaussian_z(alpha))) if s > 0 else 0


def discrete_laplace_quantile(t: float, alpha: float) -> int:
    """The smallest integer k with P(|Z| > k) <= alpha for P(Z = k) ~ exp(-|k| / t) (exact, from the
    closed form of the tail; one above it only when t ln(...) is within 1e-12 relative of an integer).

    >>> discrete_laplace_quantile(3.0, 0.05)
    9
    """
    a = _check_alpha(alpha)
    if t <= 0:
        return 0
    # P(|Z| > k) = 2 e^{-(k+1)/t} / (1 + e^{-1/t}) <= a  <=>  k + 1 >= t ln(2 / (a (1 + e^{-1/t})))
    level = math.log(2.0 / (a * (2.0 + math.expm1(-1.0 / t))))
    return max(0, math.ceil(up(t * level)) - 1)


def _half_widths(c: NoiseCalibration, alpha: float) -> tuple[float | None, float | None]:
    """(continuous, lattice) half-widths of a calibration at ``alpha``."""
    if c.family == "none" or not math.isfinite(c.scale):
        return None, None
    cont = gaussian_half_width(c.scale, alpha) if c.family == "gaussian" else laplace_half_width(c.scale, alpha)
    if c.lattice_step is None or c.lattice_scale is None:
        return cont, None
    ratio = c.lattice_scale / c.lattice_step
    k = (discrete_gaussian_quantile(ratio, alpha) if c.family == "gaussian"
         else discrete_laplace_quantile(ratio, alpha))
    return cont, up((k + 0.5) * c.lattice_step)


_NOISE_TEXT = {"gaussian": "Gaussian", "laplace": "Laplace", "none": "no additive noise"}


def accuracy_rows(calibrations: Sequence[NoiseCalibration], alpha: float = 0.05) -> tuple[Accuracy, ...]:
    """The :class:`Accuracy` of every calibration at ``alpha`` (what :meth:`Ledger.accuracy` returns).

    >>> accuracy_rows([NoiseCalibration("m", "LaplaceMech", "laplace", scale=2.0, entries=1)])[0].half_width > 5.99
    True
    """
    a = _check_alpha(alpha)
    rows = []
    for c in calibrations:
        cont, lat = _half_widths(c, a)
        noise = _NOISE_TEXT[c.family]
        if c.family != "none":
            noise += f" {'sigma' if c.family == 'gaussian' else 'b'} = {c.scale:.6g}" + (
                f" x ({c.sensitivity})" if c.per_unit else "")
        rows.append(Accuracy(c.node, c.kind, noise, a, cont, lat, c.per_unit, c.sensitivity, c.rounds, c.entries,
                             c.note))
    return tuple(rows)


def accuracy_lines(calibrations: Sequence[NoiseCalibration], alpha: float = 0.05) -> list[str]:
    """The readable lines ``dpflow check`` prints after the summary."""
    rows = accuracy_rows(calibrations, alpha)
    if not rows:
        return []
    head = (f"accuracy before data (noise only, per coordinate, {100 * (1 - alpha):.6g}% intervals; "
            "exact sources release on a 2^-k lattice):")
    return [head] + [f"  {r.describe()}" for r in rows]


# --------------------------------------------------------------------------- calibration (planner side)


def calibrate(node_path: str, rounds: str, node: Mechanism, stat: StatT, alloc: Allocation) -> NoiseCalibration:
    """The :class:`NoiseCalibration` of one invocation of ``node`` on ``stat`` at its allocation (read from
    the mechanism's capabilities: ``noise_family``, ``noise_unit``, ``takes_lattice``, ``accuracy_note``)."""
    return calibrator(node, stat)(node_path, rounds, alloc)


Calibrator = Callable[[str, str, Allocation], NoiseCalibration]
"""The calibration of one mechanism on its statistic, given an invocation's path, rounds text and allocation."""


def calibrator(node: Mechanism, stat: StatT,
               scales: dict[tuple[Mechanism, float, int], float] | None = None) -> Calibrator:
    """:func:`calibrate` of ``node`` on ``stat``, with what only the statistic decides (the sensitivity, its
    text and value, the entries, the float slack) read once: a mechanism in a loop is calibrated once per
    distinct round weight.  ``scales`` memoises noise scales by (mechanism, sensitivity, identity of the
    allocation) for calibrators whose allocations all stay alive while it is used (equal mechanisms of a plan
    share their allocation objects)."""
    memo: dict[tuple[Mechanism, float, int], float] = {} if scales is None else scales
    family: Family = node.noise_family or "none"
    if family == "none" or node.noise_unit is None:
        return lambda path, rounds, alloc: NoiseCalibration(path, node.kind, "none", rounds, note=_NOT_ADDITIVE)
    unit = node.noise_unit
    sym = getattr(stat, unit)
    assert sym is not None  # check_input refused an unbounded sensitivity
    entries = math.prod(stat.shape) if not stat.symmetric else stat.shape[0] * (stat.shape[0] + 1) // 2
    text = sym.text()

    def note_of(lattice: bool) -> str:
        return node.accuracy_note or ("" if lattice else "continuous noise on every source")

    if not sym.is_const:
        def per_unit(path: str, rounds: str, alloc: Allocation) -> NoiseCalibration:
            lattice = node.takes_lattice(stat, alloc)
            return NoiseCalibration(path, node.kind, family, rounds, text, True,
                                    node.noise_multiplier(alloc.share, alloc.mode), entries, lattice,
                                    note=note_of(lattice) or ("exact sources: on the lattice, after data"
                                                              if lattice else ""))
        return per_unit
    delta = sym.value({})
    fe = stat.float_error
    after_data = fe is not None and bool(fe.refs())  # the float-error bound needs run-time values
    slack: list[tuple[float, float]] = []  # float_slack, computed when first needed

    def at(path: str, rounds: str, alloc: Allocation) -> NoiseCalibration:
        share, mode = alloc.share, alloc.mode
        lattice = node.takes_lattice(stat, alloc)
        note = note_of(lattice)
        key = (node, delta, id(alloc))
        scale = memo.get(key)
        if scale is None:
            scale = memo[key] = node.noise_scale(delta, share, mode)
        step = lat_scale = None
        if lattice:
            assert fe is not None
            if after_data:
                note = note or "exact sources: the lattice release's float-error bound is known after data"
            else:
                if not slack:
                    slack.append(float_slack(stat, {}, entries))
                cal = unit_lattice(unit, delta, slack[0], entries, lambda d: node.noise_scale(d, share, mode),
                                   node.one_sided_ratio(stat))
                if cal is not None:
                    step, lat_scale = cal.step, cal.scale
                elif scale > 0:
                    scale = math.inf  # the widened scale is beyond the float range: refused below
        if scale == math.inf:  # public: a constant sensitivity (and float slack) at the certified share
            raise BudgetError(path, f"the noise scale of {node.kind} at sensitivity {text} and share "
                              f"{float(share):.6g} ({mode}) is beyond the float range",
                              "raise the budget or the mechanism's weight=, or bound its input tighter (a smaller "
                              "Clip radius or box)")
        return NoiseCalibration(path, node.kind, family, rounds, text, False, scale, entries, lattice,
                                step, lat_scale, note)
    return at


def _rounds_text(path: str, classes: tuple[int, ...], rounds: dict[str, tuple[int, ...]]) -> str:
    """Which rounds of the enclosing loops an invocation in weight classes ``classes`` stands for."""
    parts = path.split("/")
    loops = [q for q in ("/".join(parts[:i]) for i in range(1, len(parts))) if q in rounds]  # Repeat loops
    out = []
    for loop, c in zip(loops, classes, strict=True):
        ks = [k for k, cl in enumerate(rounds[loop]) if cl == c]
        out.append(f"round{'s' if len(ks) > 1 else ''} {', '.join(map(str, ks))} of {loop.rsplit('.', 1)[-1]}")
    return "; ".join(out)


def noise_calibrations(space: TypedScope, invocations: InvocationTable) -> tuple[NoiseCalibration, ...]:
    """The calibration of every mechanism invocation of a certified plan, in ledger order (top level first,
    control bodies after their node, one row per distinct round weight)."""
    out: list[NoiseCalibration] = []
    scales: dict[tuple[Mechanism, float, int], float] = {}  # the table holds every allocation meanwhile
    by_node: dict[str, list[tuple[int, ...]]] = {}  # one pass over the table, not one per node (no new tuples)
    for node, classes in invocations.table:
        by_node.setdefault(node, []).append(classes)

    def walk(sp: TypedScope) -> None:
        texts: dict[tuple[int, ...], str] = {}  # the rounds of a scope's weight classes, named once per scope
        for rec in sp.order:
            if isinstance(rec.node, Mechanism):
                path = sp.path + rec.id
                stat = sp.types[rec.inputs[0]]
                assert isinstance(stat, StatT)
                cal = calibrator(rec.node, stat, scales)
                for classes in by_node.get(path, ()):
                    if classes not in texts:
                        texts[classes] = _rounds_text(path, classes, invocations.rounds)
                    out.append(cal(path, texts[classes], invocations.table[path, classes]))
            elif rec.id in sp.bodies:
                walk(sp.bodies[rec.id])

    walk(space)
    return tuple(out)


def realised_rows(calibrations: Sequence[NoiseCalibration], facts: dict[str, list[dict[str, Any]]],
                  alpha: float = 0.05) -> tuple[Accuracy, ...]:
    """After a run: the accuracy at the noise scales the run recorded (``report.json``'s ``noise_scales``),
    the largest over a node's invocations (rounds); the half-width is the lattice one when the run released
    on the lattice, else the continuous one.  Rows only for additive-noise mechanisms the run recorded.

    >>> c = NoiseCalibration("m", "GaussianMech", "gaussian", sensitivity="r", per_unit=True, scale=2.0)
    >>> round(realised_rows([c], {"m": [{"sigma": 0.5}]})[0].half_width, 4)
    0.98
    """
    a = _check_alpha(alpha)
    rows = []
    for c in {c.node: c for c in calibrations if c.family != "none"}.values():
        invocations: list[NoiseCalibration] = []
        for fact in facts.get(c.node, []):
            if "lattice" in fact and invocations:
                last = invocations[-1]
                invocations[-1] = attrs.evolve(last, lattice_step=float(fact["lattice"]["step"]),
                                               lattice_scale=last.scale)
            elif "sigma" in fact or "scale" in fact:
                scale = float(fact["sigma"] if "sigma" in fact else fact["scale"])
                invocations.append(attrs.evolve(c, per_unit=False, scale=scale, lattice_step=None, lattice_scale=None))
        if not invocations:
            continue
        widths = [lat if lat is not None else cont for cont, lat in (_half_widths(i, a) for i in invocations)]
        worst = max((math.inf if w is None else w for w in widths), default=math.inf)
        text = f"{len(invocations)} invocation{'s' if len(invocations) > 1 else ''}, the largest"
        rows.append(Accuracy(c.node, c.kind, _NOISE_TEXT[c.family], a, worst, None, False, "", "", c.entries,
                             f"realised: {text}" if len(invocations) > 1 else "realised"))
    return tuple(rows)
