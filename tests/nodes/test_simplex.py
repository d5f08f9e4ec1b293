"""One-hot groups typed as simplices (``Vectors.onehot``, ``rules.sum_sensitivities``).

A one-hot :class:`dpflow.Category` puts each row of its coordinates on a vertex of the simplex
``{0, e_1, ..., e_k}``, so a sum (a histogram) or a mean (shares) of its coordinates moves by l1 2, l2
sqrt(2), linf 1 when one record is replaced and by 1 when one is added or removed, whatever k; not by
the box bound (l1 k).  Pinned here: the ledger's sensitivities, the neighbours that realise exactly
those and never more (every pair of vertices, a vertex against the zero row, an added row, hostile rows
fed past the encoder), the source's vertex policy, how transforms keep or drop the type, and that a
categorical histogram costs the noise of a numeric one with as many bins.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import dask.array as da
import numpy as np
import pytest
from conftest import ZeroNoise, run_zero
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dpflow as dp
from dpflow import nodes as N
from dpflow.domains import RowCount, Vectors
from dpflow.errors import DomainError
from dpflow.interpreter.dask_backend import DaskBackend
from dpflow.interpreter.run import execute
from dpflow.nodes.rules import REPLACE_ONE, sum_sensitivities
from dpflow.nodes.transforms import Source, onehot_vertices
from dpflow.nodes.types import RowsT, Size
from dpflow.planner.certify import certify

LABELS = [f"L{i}" for i in range(10)]
VALUES = [*LABELS, "unseen", None]          # every vertex: the labels, an unseen value, a missing one
TOL = 1e-9
S2 = math.sqrt(2.0)


def _bounds(cert: Any, node: str, n: float | None = None) -> tuple[float, float, float]:
    t = cert.space.types[node]
    env = {} if n is None else {RowCount("source_0"): n}
    return t.l1.value(env), t.l2.value(env), t.linf.value(env)


def _change(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    return float(np.abs(d).sum()), float(np.linalg.norm(d)), float(np.abs(d).max())


def _sum_node(plan: dp.Plan) -> str:
    (node,) = [e.node for e in plan.check().entries if e.kind == "Sum"]
    return node


# --------------------------------------------------------------------------- the ledger


@pytest.mark.parametrize("unseen", ["other", "none"])
@pytest.mark.parametrize("neighbors", ["replace", "add_remove"])
def test_ten_label_category_histogram_is_charged_one_histogram(unseen: str, neighbors: str) -> None:
    """Before: l1 11 (10), l2 sqrt(11) (sqrt(10)): the box bound of [0, 1]^k."""
    q = dp.stats.Statistics(budget=dp.ZCDP(1.0), neighbors=neighbors).histogram(dp.Category("c", LABELS,
                                                                                            unseen=unseen))
    plan = q.plan({"c": np.array(LABELS * 3, dtype=object)})
    node = _sum_node(plan)
    want = (2.0, S2, 1.0) if neighbors == "replace" else (1.0, 1.0, 1.0)
    assert _bounds(certify(plan), node) == pytest.approx(want, rel=1e-11)
    (entry,) = [e for e in plan.check().entries if e.node == node]
    assert "one-hot" in entry.derivation and "simplex" in entry.derivation    # the planner says why


def test_shares_of_a_category_are_charged_sqrt2_over_n() -> None:
    """The README's shares: a Mean of the one-hot coordinates after a box [0, 1] (before: sqrt(3)/n)."""
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", columns=["age", dp.Category("smoker", ["yes", "no"])], n=40)
    m = N.Mean()(N.Columns(keep=["smoker=yes", "smoker=no", "smoker=<other>"])(N.Clip(box=(0.0, 1.0))(X)))
    cert = certify(b.build(m=N.GaussianMech()(m)))
    assert _bounds(cert, m.id) == pytest.approx((2 / 40, S2 / 40, 1 / 40), rel=1e-11)


def test_categorical_histogram_noise_equals_a_numeric_histograms() -> None:
    """Eleven labelled bins (ten labels and <other>) cost the noise of eleven numeric bins, under Gaussian
    (zCDP) and Laplace (pure) noise alike."""
    data = {"c": np.array(LABELS * 3, dtype=object), "x": np.arange(30.0)}
    for budget in (dp.ZCDP(1.0), dp.PureDP(1.0)):
        cat = dp.stats.Statistics(budget=budget).histogram(dp.Category("c", LABELS)).plan(data).check()
        num = dp.stats.Statistics(budget=budget).histogram("x", edges=range(12)).plan(data).check()
        (c,), (x,) = cat.noise_calibrations, num.noise_calibrations
        assert c.entries == x.entries == 11
        assert c.scale == pytest.approx(x.scale, rel=1e-12) and c.sensitivity == x.sensitivity
        assert cat.accuracy()[0].half_width == pytest.approx(num.accuracy()[0].half_width, rel=1e-12)


def test_category_histogram_comes_back_by_label() -> None:
    data = {"c": np.array(["L1"] * 200 + ["x"] * 100, dtype=object)}
    res = dp.stats.histogram(data, dp.Category("c", ["L0", "L1"]), dp.ZCDP(4.0), noise=dp.SeededNoise(0))
    h = res["histogram(c)"]
    assert list(h) == ["L0", "L1", "<other>"] and all(isinstance(v, float) for v in h.values())
    assert abs(h["L1"] - 200) < 10 and abs(h["<other>"] - 100) < 10 and abs(h["L0"]) < 10
    assert not any(k.startswith("categories(") for k in res.values)
    with pytest.raises(ValueError, match="encoding='onehot'"):
        dp.stats.Statistics(budget=dp.ZCDP(1.0)).histogram(dp.Category("c", ["a"], encoding="codes"))


# --------------------------------------------------------------------------- adversarial neighbours


def _category_sum_plan(unseen: str, neighbors: str, n: int | None, mean: bool = False) -> tuple[Any, str]:
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0), neighbors=neighbors)
    X = b.source("X", columns=[dp.Category("c", LABELS, unseen=unseen)], n=n)
    q = (N.Mean() if mean else N.Sum())(X)
    return certify(b.build(s=N.GaussianMech()(q))), q.id


BASE = np.array(["L0", "L3", "L3", "zz", None, "L9"], dtype=object)


@pytest.mark.parametrize("unseen", ["other", "none"])
@pytest.mark.parametrize("mean", [False, True])
def test_every_pair_of_vertices_moves_the_sum_by_at_most_the_certified_bound(unseen: str, mean: bool) -> None:
    """Replace one record by another, over every pair of values (labels, unseen, missing): the realised
    change never exceeds the certificate and some pair realises it exactly (with unseen="none" also a
    vertex against the zero row, which realises l1 1)."""
    n = BASE.size + 1
    cert, node = _category_sum_plan(unseen, "replace", n, mean)
    bound = _bounds(cert, node)
    assert bound == pytest.approx(tuple(v / (n if mean else 1) for v in (2.0, S2, 1.0)), rel=1e-11)
    stat = {str(v): run_zero(cert, {"X": np.append(BASE, np.array([v], dtype=object))})["s"] for v in VALUES}
    worst = np.zeros(3)
    for a, c in itertools.permutations(stat, 2):
        change = _change(stat[a], stat[c])
        assert all(ch <= bd * (1 + TOL) for ch, bd in zip(change, bound, strict=True)), (a, c, change, bound)
        worst = np.maximum(worst, change)
    assert worst == pytest.approx(bound, rel=1e-9)
    if unseen == "none":   # a vertex against the zero row
        assert _change(stat["L1"], stat["unseen"])[0] == pytest.approx(1.0 / (n if mean else 1), rel=1e-12)


@pytest.mark.parametrize("unseen", ["other", "none"])
def test_adding_or_removing_a_record_moves_the_sum_by_one(unseen: str) -> None:
    cert, node = _category_sum_plan(unseen, "add_remove", None)
    bound = _bounds(cert, node)
    assert bound == pytest.approx((1.0, 1.0, 1.0), rel=1e-11)
    without = run_zero(cert, {"X": BASE})["s"]
    worst = np.zeros(3)
    for v in VALUES:
        change = _change(run_zero(cert, {"X": np.append(BASE, np.array([v], dtype=object))})["s"], without)
        assert all(ch <= bd * (1 + TOL) for ch, bd in zip(change, bound, strict=True)), (v, change)
        worst = np.maximum(worst, change)
    assert worst == pytest.approx(bound, rel=1e-9)


@pytest.mark.parametrize("neighbors", ["replace", "add_remove"])
def test_mixed_rows_realise_box_widths_plus_the_groups(neighbors: str) -> None:
    """A numeric column in a box [0, 100] and a 3-coordinate group: replace l1 100 + 2, l2 sqrt(100^2 + 2),
    linf 100; add/remove l1 100 + 1, l2 sqrt(100^2 + 1) (before: the box over all 4 coordinates, l1 400)."""
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0), neighbors=neighbors)
    base = np.array([[50.0, "a"], [3.0, "b"], [70.0, None]], dtype=object)
    n = base.shape[0] + 1 if neighbors == "replace" else None
    X = b.source("X", columns=["age", dp.Category("g", ["a", "b"])], n=n)
    s = N.Sum()(N.Clip(box=(0.0, 100.0))(X))
    cert = certify(b.build(s=N.GaussianMech()(s)))
    bound = _bounds(cert, s.id)
    extra = 2.0 if neighbors == "replace" else 1.0
    assert bound == pytest.approx((100.0 + extra, math.sqrt(1e4 + extra), 100.0), rel=1e-11)
    rows = [np.array([[age, g]], dtype=object) for age in (-5.0, 0.0, 100.0, 1e9) for g in ("a", "b", "q", None)]
    stat = [run_zero(cert, {"X": np.vstack([base, r])})["s"] for r in rows]
    if neighbors == "replace":
        changes = [_change(x, y) for x, y in itertools.permutations(stat, 2)]
    else:
        without = run_zero(cert, {"X": base})["s"]
        changes = [_change(x, without) for x in stat]
    worst = np.max(np.asarray(changes), axis=0)
    assert np.all(worst <= np.asarray(bound) * (1 + TOL)) and worst == pytest.approx(bound, rel=1e-9)


HOSTILE = [np.nan, None, "z", "", 1e300, -0.0, 7, b"z", "A", " a", object(), float("inf")]
"""Raw values of a Category column that are not its categories (bytes are decoded: b"a" would be "a"): each
is the declared unseen vertex."""


@pytest.mark.parametrize("backend", ["numpy", "dask"])
def test_hostile_values_move_the_sum_by_at_most_the_bound(backend: str) -> None:
    """A Category column holding values outside its list (missing, other text, numbers, bytes, objects), read on
    numpy or per dask block: each is the declared unseen vertex (<other>), so a hostile record moves the
    released sum no more than an honest one.  (Rows cannot be fed past the encoder: an array for a source
    with declared columns has one raw column per declared column, on every backend.)"""
    from dpflow.interpreter.numpy_backend import NumpyBackend

    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    X = b.source("X", columns=[dp.Category("c", ["a", "b"])], n=4)
    s = N.Sum()(X)
    cert = certify(b.build(s=N.GaussianMech()(s)))
    bound = _bounds(cert, s.id)
    assert bound == pytest.approx((2.0, S2, 1.0), rel=1e-11)

    def run(value: Any) -> np.ndarray:
        col = np.empty((4, 1), dtype=object)
        col[:, 0] = ["a", "b", "a", value]
        data: Any = da.from_array(col, chunks=(2, 1)) if backend == "dask" else col
        engine = DaskBackend(chunk_rows=2) if backend == "dask" else NumpyBackend()
        out: np.ndarray = execute(cert, {"X": data}, ZeroNoise(), engine).released["s"]
        return out

    stat = [run(v) for v in [*HOSTILE, "a", "b"]]
    for x, y in itertools.permutations(stat, 2):
        assert all(ch <= bd * (1 + TOL) for ch, bd in zip(_change(x, y), bound, strict=True))
    other = np.array([2.0, 1.0, 1.0])
    for got in stat[:len(HOSTILE)]:
        np.testing.assert_array_equal(got, other)
    np.testing.assert_array_equal(stat[-2], [3.0, 1.0, 0.0])


# --------------------------------------------------------------------------- the source's vertex policy


_GROUPS = [(0, 3, True), (4, 2, False)]    # columns: Category(3 with <other>), "x", Category(2, unseen none)


def _source() -> Source:
    return Source(name="X", domain=Vectors(d=6),
                  columns=(dp.Category("a", ["p", "q"]), "x", dp.Category("b", ["u", "v"], unseen="none")))


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float64, st.tuples(st.integers(1, 20), st.just(6)),
                  elements=st.sampled_from([0.0, 1.0, 1.0, -0.0, 0.5, -1.0, 2.0, np.nan, np.inf, -np.inf, 1e300])))
def test_source_policy_puts_every_group_row_on_a_vertex(arr: np.ndarray) -> None:
    src = _source()
    assert src.onehot_groups() == tuple(_GROUPS)
    before = arr.copy()
    out = src.policy(arr)
    np.testing.assert_array_equal(arr, before)                         # the input is never modified
    for first, width, exactly_one in _GROUPS:
        G = out[:, first:first + width]
        assert np.all((G == 0.0) | (G == 1.0))
        ones = G.sum(axis=1)
        assert np.all(ones == 1) if exactly_one else np.all(ones <= 1)
        G0 = arr[:, first:first + width]
        vertex = np.all((G0 == 0) | (G0 == 1), axis=1) & ((G0 == 1).sum(axis=1) == 1 if exactly_one
                                                         else (G0 == 1).sum(axis=1) <= 1)
        np.testing.assert_array_equal(G[vertex], G0[vertex])            # vertices are kept
        unseen = np.zeros(width)
        if exactly_one:
            unseen[-1] = 1.0
        assert np.all(G[~vertex] == unseen)                              # the rest: the unseen vertex
    np.testing.assert_array_equal(out[:, 3], arr[:, 3])                 # a numeric column is not touched


def test_encoded_values_are_vertices_and_kept_as_they_are() -> None:
    """The numpy path encodes every raw value (numbers given for a string Category included) onto a vertex;
    the policy then returns the rows unchanged (the same array)."""
    src = _source()
    raw = np.array([["p", 1.0, "v"], [3.0, 2.0, None], [np.nan, 0.0, "u"], ["q", 5.0, 7.0]], dtype=object)
    rows = src.prepare(raw, "source_0")
    np.testing.assert_array_equal(rows, [[1, 0, 0, 1, 0, 1], [0, 0, 1, 2, 0, 0], [0, 0, 1, 0, 1, 0],
                                         [0, 1, 0, 5, 0, 0]])
    assert onehot_vertices(rows, _GROUPS) is rows


# --------------------------------------------------------------------------- the type through transforms


def _typed(*columns: Any, domain: Any = None) -> tuple[dp.PlanBuilder, Any]:
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    return b, b.source("X", domain, columns=list(columns), n=10)


def _domain(b: dp.PlanBuilder, h: Any) -> Vectors:
    dom: Vectors = certify(b.build(s=N.GaussianMech()(N.Sum()(N.Clip(box=(-1e3, 1e3))(h))))).space.types[h.id].domain
    return dom


def test_transforms_keep_the_groups_only_where_rows_stay_vertices() -> None:
    b, X = _typed("x", dp.Category("a", ["p", "q"]), dp.Category("b", ["u"], unseen="none"))
    assert _domain(b, X).onehot == ((1, 2, 3), (4,))
    # a subset of a group (reordered) is still at most one 1; a numeric column is in no group
    assert _domain(b, N.Columns(keep=["b=u", "x", "a=<other>", "a=p"])(X)).onehot == ((2, 3), (0,))
    assert _domain(b, N.Clip(box=(0.0, 1.0))(X)).onehot == ((1, 2, 3), (4,))
    assert _domain(b, N.Clip(box=(-2.0, 5.0))(X)).onehot == ((1, 2, 3), (4,))
    for moved in (N.Clip(box=(0.0, 0.5))(X), N.Clip(box=(0.2, 1.0))(X), N.Clip(radius=5.0)(X),
                  N.Clip(radius=5.0, box=(0.0, 1.0))(X), N.Precondition(matrix=b.public(np.eye(5)))(X)):
        assert _domain(b, moved).onehot == ()


def test_sources_type_groups_only_when_their_domain_holds_the_vertices() -> None:
    codes = dp.Category("c", ["p", "q"], encoding="codes")
    assert _domain(*_typed("x", codes)).onehot == ()
    assert _domain(*_typed(dp.Category("a", ["p"]), domain=dp.Vectors(d=2, l2_bound=1.0))).onehot == ()
    assert _domain(*_typed(dp.Category("a", ["p"]), domain=dp.Vectors(d=2, box=(0.0, 0.5)))).onehot == ()
    assert _domain(*_typed(dp.Category("a", ["p"]), domain=dp.Vectors(d=2, box=(-1.0, 1.0)))).onehot == ((0, 1),)
    assert _domain(*_typed(dp.Category("a", ["p"]), domain=dp.BooleanCube(d=2))).onehot == ((0, 1),)
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    X = b.source("X", dp.Vectors(d=2, onehot=((0, 1),)), n=10)
    with pytest.raises(DomainError, match="Category"):
        b.build(s=N.GaussianMech()(N.Sum()(N.Clip(box=(0.0, 1.0))(X)))).check()
    with pytest.raises(ValueError, match="disjoint"):
        Vectors(d=3, onehot=((0, 1), (1, 2)))


# --------------------------------------------------------------------------- the rule, on its own


@settings(max_examples=80, deadline=None)
@given(m=st.integers(0, 3), sizes=st.lists(st.integers(1, 6), min_size=1, max_size=3),
       lo=st.sampled_from([0.0, -0.5, -3.0]), hi=st.sampled_from([1.0, 2.5, 40.0]),
       relation=st.sampled_from(["replace", "add_remove"]), seed=st.integers(0, 2**16))
def test_the_rule_is_the_product_diameter_and_norm(m: int, sizes: list[int], lo: float, hi: float,
                                                    relation: str, seed: int) -> None:
    """For rows in ``[lo, hi]^m x S_1 x ... x S_g``: random pairs of rows never exceed the rule, and the
    extreme pair (or row, for add/remove) realises it exactly in every norm."""
    starts = np.cumsum([m, *sizes])[:-1]
    groups = tuple(tuple(range(s, s + k)) for s, k in zip(starts, sizes, strict=True))
    d = m + sum(sizes)
    rows = RowsT(Vectors(d=d, box=(lo, hi), onehot=groups), "X", Size(True, 5, RowCount("X")), 1,
                 frozenset({relation}))
    l1, l2, linf, _ = sum_sensitivities(rows)
    bound = np.array([l1.value(), l2.value(), linf.value()])   # type: ignore[union-attr]
    rng = np.random.default_rng(seed)

    def row(extreme: int | None = None) -> np.ndarray:
        x = np.zeros(d)
        x[:m] = rng.uniform(lo, hi, m) if extreme is None else (lo, hi, hi if hi >= -lo else lo)[extreme]
        for g in groups:
            i = rng.integers(-1, len(g)) if extreme is None else (0 if extreme != 0 or len(g) == 1 else 1)
            if extreme == 0 and len(g) == 1:
                continue                        # a one-coordinate group: 0 against e_1
            if i >= 0:
                x[g[i]] = 1.0
        return x

    for _ in range(20):
        pair = _change(row(), row()) if relation == "replace" else _change(row(), np.zeros(d))
        assert np.all(np.asarray(pair) <= bound * (1 + TOL))
    extreme = _change(row(0), row(1)) if relation == "replace" else _change(row(2), np.zeros(d))
    assert extreme == pytest.approx(tuple(bound), rel=1e-9)
    c = sum(min(k, 2) for k in sizes) if relation == "replace" else len(sizes)
    w = (hi - lo) if relation == "replace" else max(-lo, hi)
    assert tuple(bound) == pytest.approx((m * w + c, math.sqrt(m * w * w + c), max(w, 1.0) if m else 1.0),
                                         rel=1e-11)


def test_one_group_is_the_histogram_rule_whatever_k() -> None:
    for k in (1, 2, 3, 10, 1000):
        rows = RowsT(Vectors(d=k, onehot=(tuple(range(k)),)), "X", Size(True, 5, RowCount("X")), 1, REPLACE_ONE)
        l1, l2, linf, _ = sum_sensitivities(rows)
        want = (2.0, S2, 1.0) if k > 1 else (1.0, 1.0, 1.0)
        assert (l1.coef, l2.coef, linf.coef) == pytest.approx(want, rel=1e-15)   # type: ignore[union-attr]


def test_an_unbounded_numeric_coordinate_leaves_the_sum_unbounded() -> None:
    """The groups bound only their own coordinates: with a numeric coordinate outside any box the sum of the
    rows is unbounded, and the plan is refused before data (a Clip is needed)."""
    rows = RowsT(Vectors(d=4, onehot=((1, 2, 3),)), "X", Size(True, 5, RowCount("X")), 1, REPLACE_ONE)
    assert sum_sensitivities(rows)[:3] == (None, None, None)
    b, X = _typed("x", dp.Category("a", ["p", "q"]))
    with pytest.raises(dp.PlanError):
        b.build(s=N.GaussianMech()(N.Sum()(X))).check()
