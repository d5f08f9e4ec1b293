"""One-call statistics: count, sum, mean, variance, quantiles and histograms of named columns, several at
once under one budget, each built as a dpflow plan (so it is certified, accounted and reported like any
other), in the spirit of Tumult Analytics' ``QueryBuilder`` and OpenDP's ``Context``.

Bounds are optional.  A column given ``bounds=(lo, hi)`` is clipped to them (public).  A column without
bounds gets a private centre c and scale s first (:func:`dpflow.estimators.scale.column_scales`, its own
``bounds_weight`` of the budget, shared by every statistic of that column) and is clipped to
``c +- sqrt(2 ln n) s``: the released interval, which the result reports.  Clipping (public or
released bounds) is each statistic's declared policy for outliers and missing values, the same for every
statistic of a numeric column and on every backend: a value outside the interval counts as its nearest end,
and a value that is not a finite number (missing: NaN, None, pandas.NA, text that is not a number; or
+-inf) as the interval's centre; a histogram over public ``edges`` clips to ``[edges[0], edges[-1]]`` the
same way.  While a private interval is located, a missing value counts as 0.  Numeric text ("80") is read
as its number.  A :class:`dpflow.Category` counts a missing value in ``<other>`` (or nowhere with
``unseen="none"``).  Under a ``PureDP`` budget the noise is Laplace, otherwise Gaussian; quantiles use the
exponential mechanism.  Weights are relative budget shares (default 1 per statistic).

>>> import numpy as np, dpflow as dp
>>> data = {"age": np.random.default_rng(0).uniform(20, 80, 5000)}
>>> q = Statistics(budget=dp.ZCDP(1.0)).mean("age", bounds=(0, 100)).quantiles("age", [0.5])
>>> res = q.run(data, noise=dp.SeededNoise(0))
>>> sorted(res.values)
['mean(age)', 'quantiles(age)']
>>> bool(abs(res.values["mean(age)"] - 50) < 2)
True
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import Any

import attrs
import numpy as np

from dpflow import nodes as N
from dpflow.api import Named, Result
from dpflow.domains import MAX_BOUND
from dpflow.errors import AccuracyWarning
from dpflow.estimators.scale import (
    SPREAD_Q,
    SPREAD_SIGMAS,
    _column_costs,
    column_scales,
    missing_as_zero,
    short_by,
    times,
    truncation_level,
)
from dpflow.estimators.tolerance import STEP_MAY_FAIL, choose_route, enforce, unconditional
from dpflow.handles import Rows, Sensitive
from dpflow.nodes.base import released_scalar
from dpflow.nodes.postprocess import WARNING
from dpflow.plan import Plan, PlanBuilder
from dpflow.planner.accuracy import Prediction, accuracy_rows
from dpflow.privacy import Measure, PureDP
from dpflow.report import Report
from dpflow.tables import Category, is_frame, is_series

__all__ = ["Statistics", "StatsResult", "count", "histogram", "mean", "quantiles", "sum", "variance"]

@attrs.frozen
class _Query:
    kind: str
    column: str | Category | None
    weight: float
    bounds: tuple[float, float] | None = None
    qs: tuple[float, ...] = ()
    edges: tuple[float, ...] | None = None
    bins: int = 10
    nonnegative: bool = True

    @property
    def name(self) -> str:
        col = self.column.name if isinstance(self.column, Category) else self.column
        return self.kind if col is None else f"{self.kind}({col})"

    @property
    def col(self) -> str | None:
        return self.column.name if isinstance(self.column, Category) else self.column

    @property
    def private_bounds(self) -> bool:
        """Whether the statistic reads its column through the private bounds step."""
        if self.column is None or self.bounds is not None or isinstance(self.column, Category):
            return False
        return not (self.kind == "histogram" and self.edges is not None)


@attrs.frozen
class _Route:
    """How columns without bounds are clipped: the bounds step's relative weight and the truncation level
    (the interval is ``c +- level sqrt(2 ln n) s``)."""

    name: str
    bounds_weight: float
    level: float = 1.0


@attrs.frozen
class _Step:
    """What the certified epsilons of one column's private scale step guarantee (Gaussian model), or why
    they do not (``r_hi`` infinite): ``r_hi``/``r_lo`` bound the released radius and ``delta`` the centre's
    distance from the mean, all in units of the column's standard deviation; when the step is short of the
    epsilon it needs, only under the condition ``given`` (:data:`STEP_SHORT` ...)."""

    text: str
    r_hi: float = math.inf
    r_lo: float = 0.0
    delta: float = math.inf
    given: str = ""


@attrs.frozen
class _Built:
    plan: Plan
    handles: dict[str, Any]
    mechs: dict[str, tuple[str, ...]]        # statistic -> its mechanisms' node ids, in order
    steps: dict[str, frozenset[str]]         # column -> the node ids of its private scale step
    post: dict[str, str]                     # statistic -> its post-processing into what is public


@attrs.frozen(eq=False)
class StatsResult:
    """The released statistics (``values``: name -> value, e.g. ``"mean(age)"``), the report of the run
    and the plan.  ``bounds`` holds the interval each column was clipped to (public or released).
    ``predicted`` holds each statistic's error predicted before data (name -> :class:`Prediction`; a
    quantiles' value error under ``"quantiles(x) value"``), ``postprocessing`` the free step that put each
    into what is public, and ``route`` how columns without bounds were treated.  A name that is not there
    raises :class:`dpflow.errors.UnknownNameError` (a ``KeyError``) listing those that are."""

    values: dict[str, Any] = attrs.field(converter=Named)
    report: Report
    plan: Plan
    bounds: dict[str, tuple[float, float]] = attrs.field(converter=Named)
    predicted: dict[str, Prediction] = attrs.field(factory=dict, converter=Named)
    postprocessing: dict[str, str] = attrs.field(factory=dict, converter=Named)
    route: str = ""

    def __getitem__(self, name: str) -> Any:
        return self.values[name]


def _bounds(b: Any) -> tuple[float, float] | None:
    if b is None:
        return None
    lo, hi = float(b[0]), float(b[1])
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(f"bounds must be finite with lower < upper, got {b!r}")
    return lo, hi


CONFIDENCE = 0.9
"""The confidence every prediction is stated at."""

SD_METRIC = "absolute (in the column's sd"
"""The metric of a column without bounds: its error in units of its standard deviation (``sd^2`` for a
variance), which no public fact gives in the data's units."""

WIDE_LEVEL = 2.0
"""The ``"wide"`` route's truncation, in multiples of ``sqrt(2 ln n)`` scales."""

ROUTES = ("scale", "fitted", "heavy", "wide")
"""The routes for columns without bounds: the private scale step at ``bounds_weight`` then clip at
``c +- sqrt(2 ln n) s`` (``scale``); the same with the bounds steps' share of the budget fitted to what they
need (``fitted``: 1.05 times, at most 90%; ``heavy``: 3 times, at most 80%); a wider truncation
``c +- 2 sqrt(2 ln n) s`` (``wide``)."""

MAX_BOUNDS_SHARE, HEAVY_CAP = 0.9, 0.8
"""The largest share of the budget the ``fitted`` route gives the bounds steps, and the ``heavy`` route's cap
(which leaves the statistics a fifth of the budget when no route meets the steps' need)."""

LOCATION_SDS = 1000.0
"""The predictions' model of a column without bounds: Gaussian, its median within this many standard
deviations of 0 (and public quantile bounds at most this many wide).  It sets how many gaps the exponential
mechanism's search range may hold: ``ln`` of it (over 10) is added to the step's ``L = ln(4n) + 2``."""


def _needs(n: int, pure: bool) -> tuple[float, float, float, float]:
    """What the scale step's four mechanisms need for the predictions' guarantee (epsilon under a pure budget,
    rho otherwise): those of :func:`dpflow.estimators.scale._column_costs`, the median's for a search range up to
    :data:`LOCATION_SDS` standard deviations wide (its epsilon times ``(L + ln(LOCATION_SDS / 10)) / L``)."""
    h, m, h2, sp = _column_costs(n, pure)
    L = math.log(4.0 * max(n, 2)) + 2.0
    wide = (L + math.log(LOCATION_SDS / 10)) / L
    return h, m * (wide if pure else wide * wide), h2, sp


def _short_by(n: int, events: Sequence[Any], pure: bool) -> list[float]:
    """For each of a scale step's four cost events, its need (:func:`_needs`) over its certified cost (epsilon
    under a pure budget, rho otherwise): at most 1 when met; the factor its share must grow by otherwise
    (infinite when the cost is not known)."""
    return [short_by(need, e.cost, pure) for need, e in zip(_needs(n, pure), events, strict=True)]


class Statistics:
    """A set of statistics to release together under ``budget`` (``neighbors``: ``"replace"``, n public,
    or ``"add_remove"``, n private).  Add statistics with the methods below (each returns ``self``), then
    ``plan(data)`` to inspect or ``run(data)`` to release.

    Columns without bounds go through a private bounds step on one of :data:`ROUTES`, chosen by the
    smallest predicted error (``route=`` forces one); ``bounds_weight`` is the relative share of each
    such column's step on the ``"scale"`` and ``"wide"`` routes.  Every statistic's error is predicted
    before data (``plan(data).check().predictions``); ``max_error`` is the tolerance in the data's units
    (default: half the statistic's public range, the error of answering its middle; for columns without
    bounds, in units of their standard deviation: 1 for a mean or variance).  Above it an
    :class:`dpflow.AccuracyWarning` is given, or with ``strict=True`` an :class:`dpflow.AccuracyError`
    before any data is read or budget charged.

    Under ``add_remove`` the count is released with noise, a sum needs public bounds (its sensitivity is
    the largest magnitude), and a mean is the noisy sum over the noisy count.

    >>> import dpflow as dp
    >>> q = Statistics(budget=dp.ZCDP(0.5)).count().sum("x", bounds=(0, 1)).variance("x", bounds=(0, 1))
    >>> [e.kind for e in q.plan({"x": [0.1, 0.5, 0.9]}).check().entries if e.cost]
    ['GaussianMech', 'GaussianMech', 'GaussianMech']
    """

    def __init__(self, budget: Measure, neighbors: str = "replace", bounds_weight: float = 0.5,
                 max_error: float | None = None, strict: bool = False, route: str | None = None) -> None:
        if neighbors not in ("replace", "add_remove"):
            raise ValueError(f"neighbors must be 'replace' or 'add_remove', got {neighbors!r}")
        if not bounds_weight > 0:
            raise ValueError(f"bounds_weight must be positive, got {bounds_weight}")
        if max_error is not None and not max_error > 0:
            raise ValueError(f"max_error must be positive, got {max_error!r}")
        if route is not None and route not in ROUTES:
            raise ValueError(f"unknown route {route!r}: the routes are {list(ROUTES)}")
        self.budget, self.neighbors, self.bounds_weight = budget, neighbors, bounds_weight
        self.max_error, self.strict, self.route = max_error, strict, route
        self.queries: list[_Query] = []

    def _add(self, q: _Query) -> Statistics:
        if not q.weight > 0:
            raise ValueError(f"{q.name}: weight must be positive, got {q.weight}")
        if any(p.name == q.name for p in self.queries):
            raise ValueError(f"{q.name} is asked twice")
        self.queries.append(q)
        return self

    def count(self, weight: float = 1.0) -> Statistics:
        """The number of rows (public under ``replace``: no budget spent; under ``add_remove`` noisy, then
        made non-negative)."""
        return self._add(_Query("count", None, weight))

    def sum(self, column: str, bounds: tuple[float, float] | None = None, weight: float = 1.0) -> Statistics:
        """The sum of a column clipped to ``bounds`` (found privately when None, under ``replace``), then
        clamped into ``[n lo, n hi]`` (under ``add_remove``: its sign, when the bounds fix it)."""
        return self._add(_Query("sum", column, weight, _bounds(bounds)))

    def mean(self, column: str, bounds: tuple[float, float] | None = None, weight: float = 1.0) -> Statistics:
        """The mean of a column clipped to ``bounds`` (found privately when None, under ``replace``), then
        clamped into them (public or released)."""
        return self._add(_Query("mean", column, weight, _bounds(bounds)))

    def variance(self, column: str, bounds: tuple[float, float] | None = None, weight: float = 1.0) -> Statistics:
        """The variance (about a private mean, half the weight each) of a column clipped to ``bounds``, then
        clamped into ``[0, (hi - lo)^2 / 4]``."""
        return self._add(_Query("variance", column, weight, _bounds(bounds)))

    def quantiles(self, column: str, qs: Sequence[float] = (0.25, 0.5, 0.75),
                  bounds: tuple[float, float] | None = None, weight: float = 1.0) -> Statistics:
        """Quantiles of a column in ``bounds`` (the exponential mechanism over gaps, weight split evenly),
        sorted and clamped into the bounds."""
        qt = tuple(float(q) for q in qs)
        if not qt or not all(0.0 <= q <= 1.0 for q in qt):
            raise ValueError(f"quantiles need levels in [0, 1], got {list(qs)}")
        return self._add(_Query("quantiles", column, weight, _bounds(bounds), qs=qt))

    def histogram(self, column: str | Category, edges: Sequence[float] | None = None, bins: int = 10,
                  bounds: tuple[float, float] | None = None, weight: float = 1.0,
                  nonnegative: bool = True) -> Statistics:
        """Counts of a column: over public ``edges``; or ``bins`` equal bins over ``bounds`` (public, or the
        column's private interval when None, the released edges then reported in ``"edges(col)"``); or,
        for a one-hot :class:`dpflow.Category`, a dict of one count per category label (and ``"<other>"`` per
        its policy), with the sensitivity of one histogram whatever the number of labels.  With
        ``nonnegative`` (default) the counts are rounded to the nearest non-negative integers."""
        if isinstance(column, Category) and column.encoding != "onehot":
            raise ValueError(f"histogram({column.name}): a Category histogram counts its one-hot coordinates; "
                             "declare it with encoding='onehot'")
        e = None if edges is None else tuple(float(x) for x in edges)
        if e is not None and (len(e) < 2 or not np.all(np.diff(e) > 0)):
            raise ValueError("histogram edges must be at least two increasing numbers")
        if not (isinstance(bins, int) and bins >= 1):
            raise ValueError(f"bins must be a positive integer, got {bins!r}")
        return self._add(_Query("histogram", column, weight, _bounds(bounds), edges=e, bins=bins,
                                nonnegative=bool(nonnegative)))

    # --- building -------------------------------------------------------------------------------

    def _columns(self) -> list[str | Category]:
        cols: list[str | Category] = []
        for q in self.queries:
            if q.column is not None and q.column not in cols:
                cols.append(q.column)
        return cols

    def plan(self, data: Any) -> Plan:
        """The plan for ``data``'s public schema (its column names and, under ``replace``, its row count),
        with each statistic's predicted error, the route chosen and the post-processing in its ledger."""
        return self._final(_nrows(data))[0].plan

    def _final(self, n: int) -> tuple[_Built, dict[str, Prediction], str]:
        """The plan on the chosen route, with its predictions recorded and the tolerance enforced (before
        data: everything here is public)."""
        if not self.queries:
            raise ValueError("no statistic was asked: call count(), mean(...), ... first")
        private = [q for q in self.queries if q.private_bounds]
        if private and self.neighbors != "replace":
            raise ValueError(f"{private[0].col}: private bounds need neighbors='replace' (n public); "
                             "pass bounds=(lo, hi)")
        scale = _Route("scale", self.bounds_weight)
        if not private:
            route, preds, why = scale, self._predict(n, scale)[0], ""
        else:
            route, preds, why = self._choose(n, scale)

        def record(b: PlanBuilder) -> None:
            for p in preds.values():
                N.predicted_error(b, p.output, p.metric, p.value, p.confidence, p.derivation, p.route, p.given)
            if why:
                N.param(b, "route", float(ROUTES.index(route.name)), why)
            for line in self._enforce(n, preds):
                N.param(b, WARNING, 0.0, line)

        built = self._build(n, route, twin=False, record=record)
        return built, preds, route.name if private else ""

    def _enforce(self, n: int, preds: dict[str, Prediction]) -> tuple[str, ...]:
        """:func:`enforce` of each prediction against its tolerance (see the class docstring)."""
        lines: list[str] = []
        for name, p in preds.items():
            tol = self._tolerance(name, p, n)
            lines += enforce([p], tol, self.strict, "dp.stats",
                             "more rows, a larger budget, a larger weight= for this statistic, or public bounds")
        return tuple(lines)

    def _tolerance(self, name: str, p: Prediction, n: int) -> float | None:
        """The tolerance of one prediction: ``max_error`` for one in the data's units, else the error of
        the data-free answer (the middle of the statistic's public range), or none (only an infinite
        prediction warns)."""
        q = next(x for x in self.queries if name.startswith(x.name))
        if name.endswith(" value"):
            return self.max_error
        if p.metric.startswith("rank"):
            return n / 2.0 if self.neighbors == "replace" else None
        if p.metric.startswith(SD_METRIC):
            return float(n) if q.kind == "sum" else 1.0
        if self.max_error is not None:
            return self.max_error
        if self.neighbors != "replace":
            return None
        if q.kind == "histogram":
            return n / 2.0
        if q.bounds is None:
            return None
        w = q.bounds[1] - q.bounds[0]
        return {"mean": w / 2, "sum": n * w / 2, "variance": w * w / 8}.get(q.kind)

    def _choose(self, n: int, scale: _Route) -> tuple[_Route, dict[str, Prediction], str]:
        """Predict every route for the columns without bounds and pick the smallest (or the forced one)."""
        preds0, built0, ledger0 = self._predict(n, scale)
        candidates: dict[str, _Route] = {"scale": scale, "wide": _Route("wide", self.bounds_weight, WIDE_LEVEL)}
        for name, margin in (("fitted", 1.05), ("heavy", 3.0)):
            fitted = self._fitted(n, scale, built0, ledger0, name, margin)
            if fitted is not None:
                candidates[name] = fitted
        results: dict[str, tuple[_Route, dict[str, Prediction], float]] = {
            "scale": (scale, preds0, _shortfall(n, built0, ledger0, isinstance(self.budget, PureDP)))}
        for name, r in candidates.items():
            if name not in results:
                preds, built, ledger = self._predict(n, r)
                results[name] = (r, preds, _shortfall(n, built, ledger, isinstance(self.budget, PureDP)))
        # listed from the least short of its need: among routes with equal (infinite) predictions, the one whose
        # bounds step comes closest to what it needs is chosen
        order = sorted(results, key=lambda k: results[k][2])
        scores = {name: self._score(n, results[name][1]) for name in order}
        chosen = choose_route(scores, self.route if self.route in scores else None)
        if self.route is not None and self.route not in scores:
            raise ValueError(f"route {self.route!r} is not available here (the bounds step cannot be fitted to "
                             f"its need): the routes are {sorted(scores)}")
        route, preds, _ = results[chosen]
        how = ("forced by route=" if self.route is not None
               else "every prediction is infinite: the route whose bounds step is least short of what it needs"
               if math.isinf(scores[chosen].value) else "the smallest predicted error")
        shown = ", ".join(f"{k} {v.value:.4g}" for k, v in scores.items())
        why = (f"columns without bounds: route {chosen!r} "
               f"({how}; "
               f"bounds_weight {route.bounds_weight:.4g}, truncation {route.level:g} sqrt(2 ln n) scales); "
               f"largest predicted error over the statistics of those columns, as a fraction of its "
               f"tolerance: {shown}")
        return route, {k: attrs.evolve(p, route=chosen) if p.route else p for k, p in preds.items()}, why

    def _score(self, n: int, preds: dict[str, Prediction]) -> Prediction:
        """A route's score: the largest prediction over the statistics of columns without bounds, as a
        fraction of its tolerance (unit-free, so a mean and a quantile compare)."""
        worst = 0.0
        for name, p in preds.items():
            q = next(x for x in self.queries if name.startswith(x.name))
            tol = self._tolerance(name, p, n) if q.private_bounds else None
            if tol is not None and not name.endswith(" value"):
                worst = max(worst, unconditional(p).value / tol)
        return Prediction("columns without bounds", "largest predicted error / tolerance", worst, CONFIDENCE,
                          "the statistics' predictions")

    def _fitted(self, n: int, scale: _Route, built: _Built, ledger: Any, name: str, margin: float) -> _Route | None:
        """The ``fitted`` (``heavy``) route: the bounds steps' share of the budget set to ``margin`` times what
        their most demanding mechanism needs (:func:`_needs`), read from the certified epsilons of the
        ``scale`` route (epsilon goes as the share under a pure budget, as its square root otherwise); None
        when that is above :data:`MAX_BOUNDS_SHARE` of the budget (``heavy``: capped at :data:`HEAVY_CAP`) or the
        steps' epsilons are not known."""
        pure = isinstance(self.budget, PureDP)
        step_share, ratio = 0.0, 0.0
        for ids in built.steps.values():
            events = _step_events(ledger, ids)
            if len(events) != 4:
                return None
            step_share += math.fsum(float(e.share) for e in events)
            ratio = max(ratio, *_short_by(n, events, pure))
        total = math.fsum(float(e.event.share) for e in ledger.entries if e.event is not None)
        share0 = step_share / total if total > 0 else 0.0
        if not (0 < share0 < 1 and math.isfinite(ratio)):
            return None
        f = share0 * ratio  # a cost (epsilon under a pure budget, rho otherwise) grows as its share
        if margin * f > MAX_BOUNDS_SHARE and name == "fitted":
            return None
        f = min(max(margin * f, 0.01), HEAVY_CAP if name == "heavy" else MAX_BOUNDS_SHARE)
        others = scale.bounds_weight * (1 - share0) / share0      # the rest's total weight, per column
        return _Route(name, f * others / (1 - f))

    def _predict(self, n: int, route: _Route) -> tuple[dict[str, Prediction], _Built, Any]:
        """Every statistic's predicted error on ``route``, from the certified ledger of its twin plan (the
        same plan with each column without bounds clipped to ``[-1, 1]``: its noise in units of the released
        radius) and the guarantee of each column's scale step (:class:`_Step`).  No data is read."""
        built = self._build(n, route, twin=True, record=None)
        ledger = built.plan.check(exact_noise=False)   # the continuous half-widths; the lattice adds ~1e-12
        cal = {c.node: c for c in ledger.noise_calibrations}
        eps = {e.node: e.event.cost.pure_eps for e in ledger.entries if e.event is not None}
        steps = {col: _step(n, _step_events(ledger, ids), isinstance(self.budget, PureDP), route.level)
                 for col, ids in built.steps.items()}

        def hw(node: str, alpha: float) -> float:
            row = accuracy_rows([cal[node]], alpha)[0]
            return math.inf if row.half_width is None else float(row.half_width)

        out: dict[str, Prediction] = {}
        for q in self.queries:
            ms = built.mechs.get(q.name, ())
            post = built.post.get(q.name, "")
            step = steps.get(q.col or "") if q.private_bounds else None
            for key, p in _predict_one(q, n, self.neighbors, ms, hw, eps, step, post).items():
                out[key] = attrs.evolve(p, route=route.name if q.private_bounds else "",
                                        given=step.given if step is not None and math.isfinite(p.value) else "")
        return out, built, ledger

    def _build(self, n: int, route: _Route, twin: bool, record: Any) -> _Built:
        """The plan on ``route``; with ``twin`` each column without bounds is clipped to the public
        ``[-1, 1]`` instead of its released interval (same mechanisms and weights: the twin certifies the
        noise per unit of the released radius); ``record`` adds the predictions to the builder."""
        pure = isinstance(self.budget, PureDP)
        b = PlanBuilder(budget=self.budget, neighbors=self.neighbors, name="statistics")  # type: ignore[arg-type]
        cols = self._columns()
        X = b.source("data", n=n if self.neighbors == "replace" else None, columns=cols or ["_"])
        names = list(_encoded(cols))
        out: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        mechs: dict[str, list[str]] = {}
        steps: dict[str, frozenset[str]] = {}
        post: dict[str, str] = {}
        clipped: dict[str, tuple[Sensitive[Rows], Any, Any]] = {}   # column -> (rows, lo, hi)

        def mech(name: str, w: float, stat: Any) -> Any:
            r = (N.LaplaceMech(weight=w) if pure else N.GaussianMech(weight=w))(stat)
            mechs.setdefault(name, []).append(r.id)
            return r

        def public(x: Any) -> Any:
            return b.public(float(x)) if isinstance(x, float) else x

        def column(name: str, bounds: tuple[float, float] | None) -> tuple[Sensitive[Rows], Any, Any]:
            key = f"{name}|{bounds}"
            if key in clipped:
                return clipped[key]
            raw = N.Columns(keep=[name])(X)
            if bounds is not None:
                res: tuple[Sensitive[Rows], Any, Any] = (_within(raw, bounds), bounds[0], bounds[1])
            else:
                before = b.node_ids()
                centre, scale = column_scales(missing_as_zero(raw), 1, route.bounds_weight)
                steps[name] = b.node_ids() - before
                level = route.level * truncation_level(n)
                half = N.Apply(fn=times, shape=(1,))(scale, b.public([level]))
                radius = N.Get(index=0)(half)
                lo = N.Apply(fn=_first_minus, shape=())(centre, radius)
                hi = N.Apply(fn=_first_plus, shape=())(centre, radius)
                extra[f"bounds({name})"] = N.Pack()(lo, hi)
                res = ((N.Clip(box=(-1.0, 1.0))(raw), -1.0, 1.0) if twin
                       else (N.Clip(radius=radius, center=centre)(raw), lo, hi))
            clipped[key] = res
            return res

        count_ref: Any = None
        for q in self.queries:
            if q.kind == "count":
                if self.neighbors == "replace":
                    out[q.name] = b.public(float(n))
                    post[q.name] = "none: n is public under replace"
                else:
                    count_ref = mech(q.name, q.weight, N.Count()(X))
                    out[q.name] = N.Apply(fn=_nonneg, shape=())(count_ref)
                    post[q.name] = "made non-negative (max(count, 0))"
        for q in self.queries:
            col = q.col
            if q.kind in ("count",) or col is None:
                continue
            if q.kind == "histogram" and isinstance(q.column, Category):
                keep = [nm for nm in names if nm.startswith(f"{col}=")]
                onehot = N.Clip(box=(0.0, 1.0))(N.Columns(keep=keep)(X))   # codes are 0/1: a no-op bound
                out[q.name] = self._counts(q, post, mech(q.name, q.weight, N.Sum()(onehot)), len(keep))
                continue
            if q.kind == "histogram" and q.edges is not None:
                within = _within(N.Columns(keep=[col])(X), (q.edges[0], q.edges[-1]))
                noisy = mech(q.name, q.weight, N.Histogram(edges=q.edges)(within))
                out[q.name] = self._counts(q, post, noisy, len(q.edges) - 1)
                continue
            rows, lo, hi = column(col, q.bounds)
            where = (f"[{lo:.6g}, {hi:.6g}] (public)" if isinstance(lo, float) and not q.private_bounds
                     else "the released interval")
            if q.kind == "sum":
                total = N.Get(index=0)(mech(q.name, q.weight, N.Sum()(rows)))
                if self.neighbors == "replace":
                    out[q.name] = N.Apply(fn=_clamp_sum, shape=())(total, public(lo), public(hi), b.public(float(n)))
                    post[q.name] = f"clamped into [n lo, n hi], [lo, hi] = {where}"
                else:
                    out[q.name] = N.Apply(fn=_clamp_sign, shape=())(total, public(lo), public(hi))
                    post[q.name] = "clamped to the sign the public bounds fix (none when they straddle 0)"
            elif q.kind == "mean" and self.neighbors == "replace":
                m = N.Get(index=0)(mech(q.name, q.weight, N.Mean()(rows)))
                out[q.name] = N.Apply(fn=_clamp, shape=())(m, public(lo), public(hi))
                post[q.name] = f"clamped into {where}"
            elif q.kind == "mean":
                total = mech(q.name, q.weight / 2, N.Sum()(rows))
                if count_ref is None:
                    cnt = mech(q.name, q.weight / 2, N.Count()(X))
                else:
                    cnt = count_ref
                    mechs[q.name].append(count_ref.id)
                ratio = N.Apply(fn=_ratio, shape=())(total, cnt)
                out[q.name] = N.Apply(fn=_clamp, shape=())(ratio, public(lo), public(hi))
                post[q.name] = f"noisy sum over noisy count (a count below 1 as 1), clamped into {where}"
            elif q.kind == "variance":
                if self.neighbors != "replace":
                    raise ValueError(f"{q.name}: the variance divides by n; use neighbors='replace'")
                m = N.Apply(fn=_clamp_vector, shape=(1,))(mech(q.name, q.weight / 2, N.Mean()(rows)),
                                                          public(lo), public(hi))
                width = _width(b, lo, hi)
                second = mech(q.name, q.weight / 2,
                              N.SecondMoment(center=m)(N.Clip(radius=width, center=m)(rows)))
                out[q.name] = N.Apply(fn=_variance_clamp, shape=())(second, public(lo), public(hi))
                post[q.name] = (f"the mean clamped into {where}; the variance clamped into [0, (hi - lo)^2 / 4] "
                                "(the largest variance of values in [lo, hi])")
            elif q.kind == "quantiles":
                ordered = N.OrderStatistics(lower=lo, upper=hi)(rows)
                vals = []
                for level in q.qs:
                    v = N.Quantile(q=level, weight=q.weight / len(q.qs))(ordered)
                    mechs.setdefault(q.name, []).append(v.id)
                    vals.append(v)
                out[q.name] = N.Apply(fn=_sorted_vector, shape=(len(q.qs),))(public(lo), public(hi), *vals)
                post[q.name] = f"sorted (monotone in the level) and clamped into {where}"
            elif q.kind == "histogram":
                if isinstance(lo, float):
                    edges = tuple(np.linspace(lo, hi, q.bins + 1))
                    noisy = mech(q.name, q.weight, N.Histogram(edges=edges)(rows))
                else:  # equal bins over the released interval: the rows mapped onto [0, bins]
                    unit = N.Apply(fn=_bin_map, shape=(1, 1))(lo, hi, b.public(float(q.bins)))
                    shifted = N.Precondition(matrix=unit, center=N.Apply(fn=_as_vector, shape=(1,))(lo))(rows)
                    noisy = mech(q.name, q.weight, N.Histogram(edges=tuple(range(q.bins + 1)))(shifted))
                    extra[f"edges({col})"] = N.Apply(fn=_edges, shape=(q.bins + 1,))(lo, hi, b.public(q.bins))
                out[q.name] = self._counts(q, post, noisy, q.bins)
        for name, text in post.items():
            N.param(b, "postprocess", 0.0, f"{name}: {text}")
        if record is not None:
            record(b)
        plan = b.build(**{_key(k): v for k, v in {**out, **extra}.items()})
        return _Built(plan, {**out, **extra}, {k: tuple(v) for k, v in mechs.items()}, steps, post)

    @staticmethod
    def _counts(q: _Query, post: dict[str, str], noisy: Any, k: int) -> Any:
        if not q.nonnegative:
            post[q.name] = "none (nonnegative=False)"
            return noisy
        post[q.name] = "each count rounded to the nearest non-negative integer"
        return N.Apply(fn=_nonneg_counts, shape=(k,))(noisy)

    def run(self, data: Any, noise: Any = None, **options: Any) -> StatsResult:
        """Build the plan for ``data`` and run it (``noise`` defaults to :class:`dpflow.SecureNoise`;
        ``options`` go to :func:`dpflow.run`, e.g. ``budget_store`` and ``dataset``).  The tolerance is
        enforced before any data is read (``strict=True``: refused, nothing charged)."""
        from dpflow.api import run as run_plan

        n = _nrows(data)
        built, preds, route = self._final(n)
        plan, handles = built.plan, built.handles
        result: Result = run_plan(plan, {"data": _frame_like(data, self._columns())}, noise=noise, **options)
        values: dict[str, Any] = {}
        bounds: dict[str, tuple[float, float]] = {}
        for name in handles:
            v = result.released[_key(name)]
            if name.startswith("bounds("):
                bounds[name[7:-1]] = (float(v[0]), float(v[1]))
            else:
                values[name] = _plain(v)
        for q in self.queries:
            if q.bounds is not None and q.column is not None:
                bounds.setdefault(q.name[len(q.kind) + 1:-1], q.bounds)
            if q.kind == "histogram" and isinstance(q.column, Category):
                values[q.name] = _labelled(q.column, values[q.name])
        _finite_or_warn(values)
        return StatsResult(values, result.report, plan, bounds, preds, built.post, route)


def _shortfall(n: int, built: _Built, ledger: Any, pure: bool) -> float:
    """How short the scale steps of a plan are of what they need: the largest need / cost over their
    mechanisms (:func:`_short_by`; at most 1: every need met; infinite: a cost is not known)."""
    return max((r for ids in built.steps.values() for r in _short_by(n, _step_events(ledger, ids), pure)),
               default=0.0)


def _step_events(ledger: Any, ids: frozenset[str]) -> list[Any]:
    """The cost events of the mechanisms a column's scale step added (the node ids ``ids``), in ledger order:
    range of ``|x|``, median, range of ``|x - c|``, spread."""
    return [e.event for e in ledger.entries if e.event is not None and e.node in ids]


STEP_SHORT = STEP_MAY_FAIL + " (it is short of the epsilon it needs"
"""How a prediction's ``given`` begins when it assumes a scale step short of its epsilon: such a prediction is
listed (finite, conditional) but scores and enforces as infinite (:func:`unconditional`: the route choice and the
warnings are those of "no useful bound")."""

STEP_BETA = 0.01
"""The failure probability of each of the scale step's four mechanisms in :func:`_step` (0.04 in all)."""


def _abs_normal_quantile(p: float) -> float:
    """The p-quantile of ``|Z|``, Z ~ N(0, 1)."""
    return NormalDist().inv_cdf((1.0 + p) / 2.0)


def _step(n: int, events: Sequence[Any], pure: bool, level: float) -> _Step:
    """What a column's scale step guarantees at its certified costs (``events``: range, median, range, spread),
    for a Gaussian column, in units of its standard deviation.

    Each mechanism meets its need (:func:`_needs`; the histograms then locate their modal bin with
    probability 0.99).  The exponential mechanism over gaps at epsilon errs by more than
    ``t = (2 / epsilon)(L + ln(1 / beta))`` ranks with probability at most beta when the search range is at
    most ``e^L`` gaps wide: ``L = ln(4n) + 2`` for the spread (the step's own assumption), and
    ``L + ln(LOCATION_SDS / 10)`` for the median (whose range grows with the column's location).  So the centre is
    within ``delta = Phi^-1(1/2 + t_c / n)`` of the mean and the spread between the ``3/4 -+ t_s / n``
    quantiles of ``|x - c|``: the radius ``level sqrt(2 ln n) s`` is within ``[r_lo, r_hi]``.  Otherwise
    the step may fail: the interval may be anywhere in the search range (up to ``2^62``)."""
    labels = ("range of |x|", "median", "range of |x - c|", "spread")
    unit = "epsilon" if pure else "rho"
    ratios = _short_by(n, events, pure) if len(events) == 4 else []
    short = [f"{lab} {unit} {need / r if 0 < r < math.inf else 0.0:.3g} < {need:.3g}"
             for lab, r, need in zip(labels, ratios, _needs(n, pure), strict=True) if r > 1.0]
    failing = (f"the private scale step is short of the {unit} it needs at n={n} ({'; '.join(short)}): its "
               "released interval may be anywhere in the search range (up to 2^62), so no useful bound can be given")
    eps = [e.cost.pure_eps for e in events]
    if len(events) != 4 or not all(math.isfinite(r) for r in ratios) or any(
            e is None or not float(e) > 0 for e in (eps[1], eps[3])):
        return _Step(failing)
    L = math.log(4.0 * max(n, 2)) + 2.0
    wide = L + math.log(LOCATION_SDS / 10)
    t_c, t_s = ((2.0 / float(e)) * (l_ + math.log(1.0 / STEP_BETA)) / n for e, l_ in ((eps[1], wide), (eps[3], L)))
    top = 1.0 - 0.01 / n
    delta = NormalDist().inv_cdf(min(0.5 + t_c, top))
    s_hi = (_abs_normal_quantile(min(SPREAD_Q + t_s, top)) + delta) / SPREAD_SIGMAS
    s_lo = max(_abs_normal_quantile(max(SPREAD_Q - t_s, 0.0)) - delta, 0.0) / SPREAD_SIGMAS
    T = level * truncation_level(n)
    given = (f"{STEP_SHORT} at n={n}: {'; '.join(short)}; if its histograms miss their modal bin, its released "
             "interval may be anywhere in the search range, up to 2^62)") if short else ""
    return _Step(f"scale step (centre within {delta:.3g} sd, radius {T * s_lo:.3g}-{T * s_hi:.3g} sd, "
                 f"Gaussian column, |median| <= {LOCATION_SDS:g} sd)", T * s_hi, T * s_lo, delta, given)


def _excess(k: float) -> float:
    """``E (|Z| - k)_+`` for Z ~ N(0, 1) (the mean's clipping bias at radius k, in sd)."""
    k = max(k, 0.0)
    return 2.0 * (math.exp(-k * k / 2) / math.sqrt(2 * math.pi) - k * (1.0 - NormalDist().cdf(k)))


def _tail_second(k: float) -> float:
    """``E Z^2 1{|Z| > k}`` (a bound on the variance's clipping bias at radius k, in sd^2)."""
    k = max(k, 0.0)
    return 2.0 * (k * math.exp(-k * k / 2) / math.sqrt(2 * math.pi) + 1.0 - NormalDist().cdf(k))


def _predict_one(q: _Query, n: int, neighbors: str, ms: Sequence[str], hw: Any, eps: dict[str, Any],
                 step: _Step | None, post: str) -> dict[str, Prediction]:
    """The predictions of one statistic (see :meth:`Statistics._predict`): noise half-widths from the
    certified ledger (``hw(node, alpha)``), the exponential mechanism's rank bound, the scale step's
    guarantee and the post-processing's range."""
    conf = CONFIDENCE
    name = q.name
    noise = "Laplace" if ms and "laplace" in ms[0] else "Gaussian"
    if q.kind == "count":
        if not ms:
            return {name: Prediction(name, "absolute", 0.0, conf, "n is public under replace: exact")}
        v = hw(ms[0], 1 - conf)
        return {name: Prediction(name, "absolute", v, conf, f"{noise} noise, 90% half-width {v:.4g} from the "
                                 f"certified ledger; then {post}")}
    if q.kind == "histogram":
        k = q.bins if q.edges is None else len(q.edges) - 1
        if isinstance(q.column, Category):
            k = len(q.column.names())
        v = hw(ms[0], (1 - conf) / k)
        if q.nonnegative:
            v = float(math.ceil(v))
        where = "the released edges" if q.private_bounds else "its bins"
        return {name: Prediction(name, "absolute per count (all counts at once)", v, conf,
                                 f"{noise} noise on the {k} counts over {where}: half-width at {1 - conf:g}/{k} from "
                                 f"the certified ledger (union bound){'; rounding: ceil' if q.nonnegative else ''}")}
    L = math.log(4.0 * max(n, 2)) + 2.0 + (math.log(LOCATION_SDS / 10) if q.bounds is not None else 0.0)
    if q.kind == "quantiles":
        wide = f": bounds at most {LOCATION_SDS:g} sd wide" if q.bounds is not None else ""
        k = len(q.qs)
        alpha = (1 - conf - (4 * STEP_BETA if step is not None else 0.0)) / k
        t = max((2.0 / float(eps[m])) * (L + math.log(1.0 / alpha)) for m in ms)
        text = (f"exponential mechanism over gaps at epsilon {min(float(eps[m]) for m in ms):.3g} per level: rank "
                f"error below (2 / epsilon)(L + ln({k}/{alpha * k:.3g})), L = {L:.3g} (a search range at most e^L "
                f"gaps wide{wide})")
        if step is not None and not math.isfinite(step.r_hi):
            return {name: Prediction(name, "rank", math.inf, conf, step.text)}
        if step is not None:
            t += n * 2.0 * (1.0 - NormalDist().cdf(max(step.r_lo - step.delta, 0.0)))
            text += f"; plus the rows outside the released interval ({step.text})"
        out = {name: Prediction(name, "rank", min(t, float(n)), conf, text + f"; then {post}")}
        if q.bounds is not None:
            w = q.bounds[1] - q.bounds[0]
            out[f"{name} value"] = Prediction(f"{name} value", "absolute", w, conf,
                                              "a point of the public bounds: its value error depends on the data's "
                                              "density at the quantile (unknown before data), at most their width")
        return out
    if step is not None and not math.isfinite(step.r_hi):
        unit = SD_METRIC + ("^2" if q.kind == "variance" else "") + ")"
        return {name: Prediction(name, unit, math.inf, conf, step.text)}
    alpha = 1 - conf if step is None else 1 - conf - 4 * STEP_BETA
    clip = ("of the column clipped to its bounds (the declared policy)" if step is None
            else f"in sd, radius at most {step.r_hi:.3g} sd ({step.text})")
    if q.kind == "mean" and neighbors != "replace":
        assert q.bounds is not None
        w = q.bounds[1] - q.bounds[0]
        return {name: Prediction(name, "absolute", w, conf, f"noisy sum over noisy count: n is private under "
                                 f"add_remove, so the noise part (about (sum half-width + |mean| x count "
                                 f"half-width) / n) is unknown before data; {post}: at most the width")}
    if q.kind in ("mean", "sum"):
        v = hw(ms[0], alpha)
        if step is None:
            assert q.bounds is not None
            w = q.bounds[1] - q.bounds[0]
            cap = w if q.kind == "mean" else (n * w if neighbors == "replace" else math.inf)
            return {name: Prediction(name, "absolute", min(v, cap), conf,
                                     f"{noise} noise on the {q.kind} {clip}: 90% half-width {v:.4g} from the "
                                     f"certified ledger; then {post} (at most {cap:.4g})")}
        bias = _excess(step.r_lo - step.delta) * (n if q.kind == "sum" else 1.0)
        pred = v * step.r_hi + bias
        return {name: Prediction(name, SD_METRIC + ")", pred, conf,
                                 f"{noise} noise {v:.4g} per unit radius x {clip}, plus clipping bias "
                                 f"{bias:.3g} sd; then {post}")}
    # variance: the mean's error squared plus the second moment's noise (each at half the alpha)
    v1, v2 = hw(ms[0], alpha / 2), hw(ms[1], alpha / 2)
    if step is None:
        assert q.bounds is not None
        w = q.bounds[1] - q.bounds[0]
        v = v1 * v1 + v2
        return {name: Prediction(name, "absolute", min(v, w * w / 4), conf,
                                 f"second moment about a noisy mean {clip}: {noise} half-widths {v2:.4g} (second "
                                 f"moment) + {v1:.4g}^2 (mean), from the certified ledger; then {post}")}
    pred = (v1 * step.r_hi) ** 2 + v2 * step.r_hi ** 2 + _tail_second(step.r_lo - step.delta)
    return {name: Prediction(name, SD_METRIC + "^2)", pred, conf,
                             f"{noise} second moment about a noisy mean, {clip}: half-widths per unit radius "
                             f"{v2:.4g} x r^2 + ({v1:.4g} x r)^2, plus clipping bias; then {post}")}


def _finite_or_warn(values: dict[str, Any]) -> None:
    """Never a silent NaN or infinity: a non-finite released value (post-processing cannot produce one
    from finite bounds; a defect upstream could) is named in an AccuracyWarning."""
    bad = [k for k, v in values.items()
           if not isinstance(v, dict) and not np.all(np.isfinite(np.asarray(v, dtype=float)))]
    if bad:
        warnings.warn(f"dp.stats: {bad} released a non-finite value", AccuracyWarning, stacklevel=3)


def _within(col: Sensitive[Rows], bounds: tuple[float, float]) -> Sensitive[Rows]:
    """A column clipped to public bounds by the statistics' missing-value policy: a value that is not a finite
    number goes to the interval's centre (the non-finite policy of a ball of half the width around it, as with
    private bounds), any other to its nearest end (then the box itself, so that the ends are exact)."""
    lo, hi = bounds
    mid = lo / 2 + hi / 2
    half = min(math.nextafter(max(hi - mid, mid - lo), math.inf), MAX_BOUND)  # the ball holds [lo, hi]
    return N.Clip(radius=half, center=(mid,), box=bounds)(col)


def _key(name: str) -> str:
    """A plan output name (an identifier) for a statistic's name: ``mean(age)`` -> ``mean__age``."""
    return "".join(c if c.isalnum() else "_" for c in name.replace("(", "__").rstrip(")"))


def _encoded(cols: Sequence[str | Category]) -> tuple[str, ...]:
    from dpflow.tables import encoded_names

    return encoded_names(list(cols))


def _nrows(data: Any) -> int:
    if is_frame(data) or is_series(data):
        return int(len(data))
    if isinstance(data, Mapping):
        lens = {len(_as_column(v)) for v in data.values()}
        if len(lens) != 1:
            raise ValueError(f"the columns have different lengths {sorted(lens)}")
        return lens.pop()
    return int(np.asarray(data).shape[0])


def _frame_like(data: Any, cols: Sequence[str | Category]) -> Any:
    """A DataFrame or Series as it is; a mapping of columns as an (n, k) array in the declared order.  With
    no column asked (a count alone) the source is the dummy column ``_`` of ``_build``: n zeros, whatever
    ``data`` is (no value of it is read)."""
    if not cols:
        return np.zeros((_nrows(data), 1))
    if is_frame(data) or is_series(data):
        return data
    names = [c.name if isinstance(c, Category) else c for c in cols]
    if isinstance(data, Mapping):
        missing = [c for c in names if c not in data]
        if missing:
            from dpflow.errors import DataError

            raise DataError("data", f"no column(s) {missing} (have {list(data)[:20]})", "pass those columns")
        arrays = [_as_column(data[c]) for c in names]
        numeric = all(a.dtype.kind in "biuf" for a in arrays)
        return np.column_stack(arrays if numeric else [a.astype(object) for a in arrays])
    return np.asarray(data)


def _labelled(column: Category, counts: np.ndarray) -> dict[str, Any]:
    """A Category's released counts by label (its categories as printed, then ``<other>`` per its policy)."""
    return {name[len(column.name) + 1:]: c.item() for name, c in zip(column.names(), counts, strict=True)}


def _as_column(v: Any) -> np.ndarray:
    """One column of a mapping as a one-dimensional array; a list's values are kept as they are (objects,
    converted later by the table policy): ``np.asarray`` would raise on some of them (``[1, [2, 3]]``)."""
    if isinstance(v, np.ndarray) or is_series(v):
        return np.asarray(v)
    return np.fromiter(v, dtype=object)


def _plain(v: Any) -> Any:
    """A released value as a float, or an array (integer counts stay integers)."""
    a = np.asarray(v)
    if a.dtype.kind not in "iu":
        a = a.astype(float)
    return float(a) if a.ndim == 0 else a


def _first_minus(centre: Any, radius: Any) -> float:
    """``c - r`` (the lower end of a released interval)."""
    return released_scalar(centre) - float(radius)


def _first_plus(centre: Any, radius: Any) -> float:
    """``c + r`` (the upper end of a released interval)."""
    return released_scalar(centre) + float(radius)


def _width(b: PlanBuilder, lo: Any, hi: Any) -> Any:
    if isinstance(lo, float) and isinstance(hi, float):
        return hi - lo
    return N.Apply(fn=_difference, shape=())(hi, lo)


def _difference(hi: Any, lo: Any) -> float:
    """``hi - lo`` (never negative)."""
    return max(float(hi) - float(lo), 0.0)


def _ratio(total: Any, count: Any) -> float:
    """A noisy sum over a noisy count (post-processing; a count below 1 counts as 1)."""
    return released_scalar(total) / max(released_scalar(count), 1.0)


def _clamp(v: Any, lo: Any, hi: Any) -> float:
    """A released scalar clamped into ``[lo, hi]`` (a NaN as the middle: it never leaves the interval).

    >>> _clamp(1.7e5, 0.0, 100.0), _clamp(float("nan"), 0.0, 100.0)
    (100.0, 50.0)
    """
    a, b = released_scalar(lo), released_scalar(hi)
    x = released_scalar(v)
    return (a + b) / 2 if math.isnan(x) else min(max(x, a), b)


def _clamp_vector(v: Any, lo: Any, hi: Any) -> np.ndarray:
    """:func:`_clamp` as a vector of one entry (a centre)."""
    return np.asarray([_clamp(v, lo, hi)])


def _clamp_sum(total: Any, lo: Any, hi: Any, n: Any) -> float:
    """A released sum clamped into ``[n lo, n hi]`` (a NaN as the middle).

    >>> _clamp_sum(30.0, 0.0, 1.0, 10.0)
    10.0
    """
    m = released_scalar(n)
    return _clamp(total, m * released_scalar(lo), m * released_scalar(hi))


def _clamp_sign(total: Any, lo: Any, hi: Any) -> float:
    """A released sum over a private row count (add/remove) clamped to the sign its bounds fix (a NaN as 0).

    >>> _clamp_sign(-3.0, 0.0, 1.0), _clamp_sign(-3.0, -1.0, 1.0)
    (0.0, -3.0)
    """
    x = released_scalar(total)
    low = 0.0 if released_scalar(lo) >= 0 else -math.inf
    high = 0.0 if released_scalar(hi) <= 0 else math.inf
    return 0.0 if math.isnan(x) else min(max(x, low), high)


def _variance_clamp(m: Any, lo: Any, hi: Any) -> float:
    """A released 1x1 second moment as a variance in ``[0, (hi - lo)^2 / 4]`` (the largest variance of values
    in an interval; a NaN as 0).

    >>> _variance_clamp(-1.0, 0.0, 2.0), _variance_clamp(9.0, 0.0, 2.0)
    (0.0, 1.0)
    """
    w = released_scalar(hi) - released_scalar(lo)
    x = released_scalar(m)
    return 0.0 if math.isnan(x) else min(max(x, 0.0), w * w / 4)


def _nonneg(v: Any) -> float:
    """A released count made non-negative (a NaN as 0)."""
    x = released_scalar(v)
    return 0.0 if math.isnan(x) else max(x, 0.0)


def _nonneg_counts(v: Any) -> np.ndarray:
    """Released counts rounded to the nearest non-negative integers (a NaN as 0).

    >>> _nonneg_counts([-2.4, 3.6, float("nan")]).tolist()
    [0, 4, 0]
    """
    a = np.nan_to_num(np.asarray(v, dtype=float).reshape(-1), nan=0.0, posinf=2.0**62, neginf=0.0)
    out: np.ndarray = np.rint(np.clip(a, 0.0, 2.0**62)).astype(np.int64)
    return out


def _sorted_vector(lo: Any, hi: Any, *vals: Any) -> np.ndarray:
    """Released quantiles as a vector, sorted (monotone in the level) and clamped into ``[lo, hi]``."""
    out: np.ndarray = np.sort(np.asarray([_clamp(v, lo, hi) for v in vals]))
    return out


def _as_vector(x: Any) -> np.ndarray:
    return np.asarray([float(x)])


def _bin_map(lo: Any, hi: Any, bins: Any) -> np.ndarray:
    """The 1x1 matrix ``bins / (hi - lo)``: maps ``[lo, hi]`` onto ``[0, bins]``."""
    w = float(hi) - float(lo)
    return np.asarray([[float(bins) / w if w > 0 else 0.0]])


def _edges(lo: Any, hi: Any, bins: Any) -> np.ndarray:
    """The released bin edges: ``bins`` equal bins over ``[lo, hi]``."""
    return np.linspace(float(lo), float(hi), int(released_scalar(bins)) + 1)


def _one(kind: str, data: Any, column: Any, budget: Measure, **kw: Any) -> StatsResult:
    noise = kw.pop("noise", None)
    s = Statistics(budget, **{k: kw.pop(k) for k in ("neighbors", "bounds_weight", "max_error", "strict", "route")
                              if k in kw})
    getattr(s, kind)(column, **kw) if column is not None else getattr(s, kind)(**kw)
    return s.run(data, noise=noise)


def count(data: Any, budget: Measure, **kw: Any) -> StatsResult:
    """The number of rows of ``data`` (see :class:`Statistics`)."""
    return _one("count", data, None, budget, **kw)


def sum(data: Any, column: str, budget: Measure, **kw: Any) -> StatsResult:  # noqa: A001
    """The sum of ``column`` (see :meth:`Statistics.sum`)."""
    return _one("sum", data, column, budget, **kw)


def mean(data: Any, column: str, budget: Measure, **kw: Any) -> StatsResult:
    """The mean of ``column`` (see :meth:`Statistics.mean`).

    >>> import numpy as np, dpflow as dp
    >>> r = mean({"x": np.random.default_rng(1).normal(40, 5, 20_000)}, "x", dp.ZCDP(1.0), noise=dp.SeededNoise(2))
    >>> bool(abs(r["mean(x)"] - 40) < 0.2), sorted(r.bounds)
    (True, ['x'])
    """
    return _one("mean", data, column, budget, **kw)


def variance(data: Any, column: str, budget: Measure, **kw: Any) -> StatsResult:
    """The variance of ``column`` (see :meth:`Statistics.variance`)."""
    return _one("variance", data, column, budget, **kw)


def quantiles(data: Any, column: str, budget: Measure, **kw: Any) -> StatsResult:
    """Quantiles of ``column`` (see :meth:`Statistics.quantiles`)."""
    return _one("quantiles", data, column, budget, **kw)


def histogram(data: Any, column: str | Category, budget: Measure, **kw: Any) -> StatsResult:
    """A histogram of ``column`` (see :meth:`Statistics.histogram`)."""
    return _one("histogram", data, column, budget, **kw)

