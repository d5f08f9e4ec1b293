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
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from dpflow import nodes as N
from dpflow.api import Named, Result
from dpflow.domains import MAX_BOUND
from dpflow.estimators.scale import column_scales, missing_as_zero, times, truncation_level
from dpflow.handles import Rows, Sensitive
from dpflow.nodes.base import released_scalar
from dpflow.plan import Plan, PlanBuilder
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

    @property
    def name(self) -> str:
        col = self.column.name if isinstance(self.column, Category) else self.column
        return self.kind if col is None else f"{self.kind}({col})"


@attrs.frozen(eq=False)
class StatsResult:
    """The released statistics (``values``: name -> value, e.g. ``"mean(age)"``), the report of the run
    and the plan.  ``bounds`` holds the interval each column was clipped to (public or released).  A name
    that is not there raises :class:`dpflow.errors.UnknownNameError` (a ``KeyError``) listing those that are."""

    values: dict[str, Any] = attrs.field(converter=Named)
    report: Report
    plan: Plan
    bounds: dict[str, tuple[float, float]] = attrs.field(converter=Named)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]


def _bounds(b: Any) -> tuple[float, float] | None:
    if b is None:
        return None
    lo, hi = float(b[0]), float(b[1])
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(f"bounds must be finite with lower < upper, got {b!r}")
    return lo, hi


class Statistics:
    """A set of statistics to release together under ``budget`` (``neighbors``: ``"replace"``, n public,
    or ``"add_remove"``, n private).  Add statistics with the methods below (each returns ``self``), then
    ``plan(data)`` to inspect or ``run(data)`` to release.  ``bounds_weight`` is the relative share of the
    private bounds step of each column without bounds.

    Under ``add_remove`` the count is released with noise, a sum needs public bounds (its sensitivity is
    the largest magnitude), and a mean is the noisy sum over the noisy count.

    >>> import dpflow as dp
    >>> q = Statistics(budget=dp.ZCDP(0.5)).count().sum("x", bounds=(0, 1)).variance("x", bounds=(0, 1))
    >>> [e.kind for e in q.plan({"x": [0.1, 0.5, 0.9]}).check().entries if e.cost]
    ['GaussianMech', 'GaussianMech', 'GaussianMech']
    """

    def __init__(self, budget: Measure, neighbors: str = "replace", bounds_weight: float = 0.5) -> None:
        if neighbors not in ("replace", "add_remove"):
            raise ValueError(f"neighbors must be 'replace' or 'add_remove', got {neighbors!r}")
        if not bounds_weight > 0:
            raise ValueError(f"bounds_weight must be positive, got {bounds_weight}")
        self.budget, self.neighbors, self.bounds_weight = budget, neighbors, bounds_weight
        self.queries: list[_Query] = []

    def _add(self, q: _Query) -> Statistics:
        if not q.weight > 0:
            raise ValueError(f"{q.name}: weight must be positive, got {q.weight}")
        if any(p.name == q.name for p in self.queries):
            raise ValueError(f"{q.name} is asked twice")
        self.queries.append(q)
        return self

    def count(self, weight: float = 1.0) -> Statistics:
        """The number of rows (public under ``replace``: no budget spent)."""
        return self._add(_Query("count", None, weight))

    def sum(self, column: str, bounds: tuple[float, float] | None = None, weight: float = 1.0) -> Statistics:
        """The sum of a column clipped to ``bounds`` (found privately when None, under ``replace``)."""
        return self._add(_Query("sum", column, weight, _bounds(bounds)))

    def mean(self, column: str, bounds: tuple[float, float] | None = None, weight: float = 1.0) -> Statistics:
        """The mean of a column clipped to ``bounds`` (found privately when None, under ``replace``)."""
        return self._add(_Query("mean", column, weight, _bounds(bounds)))

    def variance(self, column: str, bounds: tuple[float, float] | None = None, weight: float = 1.0) -> Statistics:
        """The variance (about a private mean, half the weight each) of a column clipped to ``bounds``."""
        return self._add(_Query("variance", column, weight, _bounds(bounds)))

    def quantiles(self, column: str, qs: Sequence[float] = (0.25, 0.5, 0.75),
                  bounds: tuple[float, float] | None = None, weight: float = 1.0) -> Statistics:
        """Quantiles of a column in ``bounds`` (the exponential mechanism over gaps, weight split evenly)."""
        qt = tuple(float(q) for q in qs)
        if not qt or not all(0.0 <= q <= 1.0 for q in qt):
            raise ValueError(f"quantiles need levels in [0, 1], got {list(qs)}")
        return self._add(_Query("quantiles", column, weight, _bounds(bounds), qs=qt))

    def histogram(self, column: str | Category, edges: Sequence[float] | None = None, bins: int = 10,
                  bounds: tuple[float, float] | None = None, weight: float = 1.0) -> Statistics:
        """Counts of a column: over public ``edges``; or ``bins`` equal bins over ``bounds`` (public, or the
        column's private interval when None, the released edges then reported in ``"edges(col)"``); or,
        for a one-hot :class:`dpflow.Category`, a dict of one count per category label (and ``"<other>"`` per
        its policy), with the sensitivity of one histogram whatever the number of labels."""
        if isinstance(column, Category) and column.encoding != "onehot":
            raise ValueError(f"histogram({column.name}): a Category histogram counts its one-hot coordinates; "
                             "declare it with encoding='onehot'")
        e = None if edges is None else tuple(float(x) for x in edges)
        if e is not None and (len(e) < 2 or not np.all(np.diff(e) > 0)):
            raise ValueError("histogram edges must be at least two increasing numbers")
        if not (isinstance(bins, int) and bins >= 1):
            raise ValueError(f"bins must be a positive integer, got {bins!r}")
        return self._add(_Query("histogram", column, weight, _bounds(bounds), edges=e, bins=bins))

    # --- building -------------------------------------------------------------------------------

    def _columns(self) -> list[str | Category]:
        cols: list[str | Category] = []
        for q in self.queries:
            if q.column is not None and q.column not in cols:
                cols.append(q.column)
        return cols

    def plan(self, data: Any) -> Plan:
        """The plan for ``data``'s public schema (its column names and, under ``replace``, its row count)."""
        return self._build(_nrows(data))[0]

    def _build(self, n: int) -> tuple[Plan, dict[str, Any]]:
        if not self.queries:
            raise ValueError("no statistic was asked: call count(), mean(...), ... first")
        pure = isinstance(self.budget, PureDP)
        b = PlanBuilder(budget=self.budget, neighbors=self.neighbors, name="statistics")  # type: ignore[arg-type]
        cols = self._columns()
        X = b.source("data", n=n if self.neighbors == "replace" else None, columns=cols or ["_"])
        names = list(_encoded(cols))
        out: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        clipped: dict[str, tuple[Sensitive[Rows], Any, Any]] = {}   # column -> (rows, lo, hi)

        def mech(w: float) -> Any:
            return N.LaplaceMech(weight=w) if pure else N.GaussianMech(weight=w)

        def column(name: str, bounds: tuple[float, float] | None) -> tuple[Sensitive[Rows], Any, Any]:
            key = f"{name}|{bounds}"
            if key in clipped:
                return clipped[key]
            raw = N.Columns(keep=[name])(X)
            if bounds is not None:
                res: tuple[Sensitive[Rows], Any, Any] = (_within(raw, bounds), bounds[0], bounds[1])
            else:
                if self.neighbors != "replace":
                    raise ValueError(f"{name}: private bounds need neighbors='replace' (n public); "
                                     "pass bounds=(lo, hi)")
                centre, scale = column_scales(missing_as_zero(raw), 1, self.bounds_weight)
                half = N.Apply(fn=times, shape=(1,))(scale, b.public([truncation_level(n)]))
                radius = N.Get(index=0)(half)
                lo = N.Apply(fn=_first_minus, shape=())(centre, radius)
                hi = N.Apply(fn=_first_plus, shape=())(centre, radius)
                res = (N.Clip(radius=radius, center=centre)(raw), lo, hi)
                extra[f"bounds({name})"] = N.Pack()(lo, hi)
            clipped[key] = res
            return res

        count_ref: Any = None
        for q in self.queries:
            if q.kind == "count":
                if self.neighbors == "replace":
                    out[q.name] = b.public(float(n))
                else:
                    count_ref = out[q.name] = mech(q.weight)(N.Count()(X))
        for q in self.queries:
            col = q.column.name if isinstance(q.column, Category) else q.column
            if q.kind in ("count",) or col is None:
                continue
            if q.kind == "histogram" and isinstance(q.column, Category):
                keep = [nm for nm in names if nm.startswith(f"{col}=")]
                onehot = N.Clip(box=(0.0, 1.0))(N.Columns(keep=keep)(X))   # codes are 0/1: a no-op bound
                out[q.name] = mech(q.weight)(N.Sum()(onehot))
                continue
            if q.kind == "histogram" and q.edges is not None:
                within = _within(N.Columns(keep=[col])(X), (q.edges[0], q.edges[-1]))
                out[q.name] = mech(q.weight)(N.Histogram(edges=q.edges)(within))
                continue
            rows, lo, hi = column(col, q.bounds)
            if q.kind == "sum":
                out[q.name] = N.Get(index=0)(mech(q.weight)(N.Sum()(rows)))
            elif q.kind == "mean" and self.neighbors == "replace":
                out[q.name] = N.Get(index=0)(mech(q.weight)(N.Mean()(rows)))
            elif q.kind == "mean":
                total = mech(q.weight / 2)(N.Sum()(rows))
                cnt = count_ref if count_ref is not None else mech(q.weight / 2)(N.Count()(X))
                out[q.name] = N.Apply(fn=_ratio, shape=())(total, cnt)
            elif q.kind == "variance":
                if self.neighbors != "replace":
                    raise ValueError(f"{q.name}: the variance divides by n; use neighbors='replace'")
                m = mech(q.weight / 2)(N.Mean()(rows))
                width = _width(b, lo, hi)
                second = mech(q.weight / 2)(N.SecondMoment(center=m)(N.Clip(radius=width, center=m)(rows)))
                out[q.name] = N.Apply(fn=_scalar_nonneg, shape=())(second)
            elif q.kind == "quantiles":
                ordered = N.OrderStatistics(lower=lo, upper=hi)(rows)
                vals = [N.Quantile(q=level, weight=q.weight / len(q.qs))(ordered) for level in q.qs]
                out[q.name] = N.Apply(fn=_sorted_vector, shape=(len(q.qs),))(*vals)
            elif q.kind == "histogram":
                if q.bounds is not None:
                    edges = tuple(np.linspace(q.bounds[0], q.bounds[1], q.bins + 1))
                    out[q.name] = mech(q.weight)(N.Histogram(edges=edges)(rows))
                else:  # equal bins over the released interval: the rows mapped onto [0, bins]
                    unit = N.Apply(fn=_bin_map, shape=(1, 1))(lo, hi, b.public(float(q.bins)))
                    shifted = N.Precondition(matrix=unit, center=N.Apply(fn=_as_vector, shape=(1,))(lo))(rows)
                    out[q.name] = mech(q.weight)(N.Histogram(edges=tuple(range(q.bins + 1)))(shifted))
                    extra[f"edges({col})"] = N.Apply(fn=_edges, shape=(q.bins + 1,))(lo, hi, b.public(q.bins))
        return b.build(**{_key(k): v for k, v in {**out, **extra}.items()}), {**out, **extra}

    def run(self, data: Any, noise: Any = None, **options: Any) -> StatsResult:
        """Build the plan for ``data`` and run it (``noise`` defaults to :class:`dpflow.SecureNoise`;
        ``options`` go to :func:`dpflow.run`, e.g. ``budget_store`` and ``dataset``)."""
        from dpflow.api import run as run_plan

        n = _nrows(data)
        plan, handles = self._build(n)
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
        return StatsResult(values, result.report, plan, bounds)


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


def _labelled(column: Category, counts: np.ndarray) -> dict[str, float]:
    """A Category's released counts by label (its categories as printed, then ``<other>`` per its policy)."""
    return {name[len(column.name) + 1:]: float(c) for name, c in zip(column.names(), counts, strict=True)}


def _as_column(v: Any) -> np.ndarray:
    """One column of a mapping as a one-dimensional array; a list's values are kept as they are (objects,
    converted later by the table policy): ``np.asarray`` would raise on some of them (``[1, [2, 3]]``)."""
    if isinstance(v, np.ndarray) or is_series(v):
        return np.asarray(v)
    return np.fromiter(v, dtype=object)


def _plain(v: Any) -> Any:
    a = np.asarray(v, dtype=float)
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


def _scalar_nonneg(m: Any) -> float:
    """A released 1x1 second moment as a variance (clipped at 0)."""
    return max(released_scalar(m), 0.0)


def _sorted_vector(*vals: Any) -> np.ndarray:
    """Released quantiles as a vector, sorted (post-processing: monotone in the level)."""
    return np.sort(np.asarray([float(v) for v in vals]))


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
    neighbors = kw.pop("neighbors", "replace")
    noise = kw.pop("noise", None)
    s = Statistics(budget=budget, neighbors=neighbors)
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

