"""DataFrames and Series as sources, named columns, categorical columns through a public category list
(dpflow.tables), and their declared policies for unseen and missing values."""

from __future__ import annotations

import datetime
import math
import numbers
import warnings
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import run_zero
from hypothesis import given, settings
from hypothesis import strategies as st

import dpflow as dp
from dpflow import nodes as N
from dpflow.plan.graph import Plan
from dpflow.planner.certify import certify
from dpflow.tables import Category, encoded_names, to_rows


def _frame(n: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"age": rng.uniform(20, 80, n), "bmi": rng.normal(25, 4, n),
                         "sex": rng.choice(["F", "M"], n), "note": ["free text"] * n})


def test_onehot_and_codes_with_each_unseen_policy() -> None:
    vals = np.array(["M", "F", None, "X", np.nan], dtype=object)
    assert Category("s", ["F", "M"]).encode(vals).tolist() == [
        [0, 1, 0], [1, 0, 0], [0, 0, 1], [0, 0, 1], [0, 0, 1]]
    assert Category("s", ["F", "M"], unseen="none").encode(vals).tolist() == [[0, 1], [1, 0], [0, 0], [0, 0], [0, 0]]
    assert Category("s", ["F", "M"], encoding="codes").encode(vals).ravel().tolist() == [1, 0, 2, 2, 2]
    codes = Category("s", ["F", "M"], encoding="codes", unseen="none").encode(vals).ravel()
    assert codes[:2].tolist() == [1, 0] and np.isnan(codes[2:]).all()


def test_numeric_categories_match_exactly() -> None:
    c = Category("grade", [3, 1, 2], encoding="codes")
    assert c.encode(np.array([1.0, 2.0, 3.0, 2.5, np.nan])).ravel().tolist() == [1, 2, 0, 3, 3]
    assert c.names() == ("grade",)
    assert Category("g", [1, 2]).names() == ("g=1", "g=2", "g=<other>")


def test_a_numeric_category_matches_numbers_of_any_type_and_numeric_text() -> None:
    """Issue 28 item 6: object-dtype floats 1.0, 2.0 (a mixed table), numpy integers and numeric text are the
    categories 1 and 2 (they were compared by their printed forms, '1.0' against '1', and went to <other>)."""
    vals = np.array([1.0, 2.0, np.int64(1), np.float32(2), "2", " 1 ", Decimal(2), True, 3.0, None, "x", 1.5],
                    dtype=object)
    assert Category("g", [1, 2], encoding="codes").encode(vals).ravel().tolist() == [0, 1, 0, 1, 1, 0, 1, 0] + [2] * 4
    frame = pd.DataFrame({"g": pd.Series([1.0, 2.0, None], dtype=object)})
    assert to_rows(frame, [Category("g", [1, 2])], "X").tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    # text categories match text, and numbers by their shortest text; both kinds may be mixed
    mixed = Category("k", ["a", "1", 2.5], encoding="codes")
    assert mixed.encode(np.array(["a", 1, 1.0, "1", "2.5", 2.5, "A"], dtype=object)).ravel().tolist() == [
        0, 1, 1, 1, 2, 2, 3]
    assert Category("k", ["1", "2"], encoding="codes").encode(np.array([2, 1, 3])).ravel().tolist() == [1, 0, 2]
    with pytest.raises(ValueError, match="distinct"):
        Category("k", [1, "1"])


def test_category_codes_never_raise_on_hostile_values() -> None:
    col = _objects([v for v, _ in HOSTILE])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for cats in (["a", "80"], [80, 1.5], ["a", 80]):
            codes = Category("k", cats).codes(col)
            assert codes.shape == (len(HOSTILE),) and set(codes.tolist()) <= {-1, 0, 1}


def test_pandas_categorical_and_nullable_values() -> None:
    s = pd.Series(pd.Categorical(["a", "b", None, "c"], categories=["a", "b", "c"]))
    assert Category("k", ["a", "b"], unseen="none").encode(s.to_numpy()).tolist() == [[1, 0], [0, 1], [0, 0], [0, 0]]
    df = pd.DataFrame({"x": pd.array([1, None, 3], dtype="Int64")})
    rows = to_rows(df, None, "X")
    assert rows[0, 0] == 1.0 and np.isnan(rows[1, 0]) and rows[2, 0] == 3.0


@pytest.mark.parametrize("bad", [["nan", "a"], ["a", "a"], [], ["<other>"], [float("inf")], [True], [""], [1, 1.0]])
def test_category_lists_are_checked(bad: list[object]) -> None:
    with pytest.raises(ValueError):
        Category("k", bad)


def test_encoded_names_and_source_domain_from_columns() -> None:
    cols = ["age", Category("sex", ["F", "M"]), Category("grade", [1, 2], encoding="codes")]
    assert encoded_names(cols) == ("age", "sex=F", "sex=M", "sex=<other>", "grade")
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    b.source("X", columns=cols, n=10)
    src = b._records[0].node
    assert isinstance(src, N.Source) and src.domain == dp.Vectors(d=5)


def test_dataframe_source_selects_declared_columns_by_name() -> None:
    df = _frame()
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    X = b.source("X", columns=["bmi", "age", Category("sex", ["F", "M"], unseen="none")], n=len(df))
    m = N.GaussianMech()(N.Mean()(N.Clip(box=(0.0, 100.0))(N.Columns(keep=["age", "bmi"])(X))))
    f = N.GaussianMech()(N.Mean()(N.Clip(box=(0.0, 1.0))(N.Columns(keep=["sex=F"])(X))))
    plan = b.build(m=m, f=f)
    out = plan.run(df, noise=dp.SeededNoise(0)).released
    assert np.allclose(out["m"], [df.age.mean(), df.bmi.mean()], atol=2.0)   # sigma ~0.35 at n=400
    assert abs(out["f"][0] - (df.sex == "F").mean()) < 0.05
    # the plan (with its Category) survives the JSON round trip
    assert Plan.from_json(plan.to_json()).hash == plan.hash


def test_a_series_is_one_column() -> None:
    s = pd.Series(np.linspace(0, 1, 200), name="x")
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    X = b.source("X", dp.Reals(lower=0.0, upper=1.0), n=200)
    out = b.build(m=N.GaussianMech()(N.Mean()(X))).run(s, noise=dp.SeededNoise(0)).released["m"]
    assert abs(out[0] - 0.5) < 0.05


def test_text_and_categorical_dtypes_are_parsed_never_refused() -> None:
    # a CSV reader makes a column text when one value is not a number (read_csv(...).convert_dtypes(), the pyarrow
    # backend): so the dtype may depend on one value, and refusing it would release that value uncharged
    raw = ["80", " 75 ", "n/a", None, "1e400"]
    for dtype in ("string", "string[pyarrow]", "category", object):
        col = to_rows(pd.DataFrame({"age": pd.Series(raw, dtype=dtype)}), ["age"], "X").ravel()
        assert col[[0, 1, 4]].tolist() == [80.0, 75.0, math.inf] and np.isnan(col[[2, 3]]).all(), dtype
    text, objs = to_rows(np.array([["1.0", "x"]]), None, "X"), to_rows(np.array([[object(), 2]]), None, "X")
    assert text[0, 0] == 1.0 and np.isnan(text[0, 1]) and np.isnan(objs[0, 0]) and objs[0, 1] == 2.0
    # no dtype is refused: pandas infers dates and complex numbers from the values (a column of them is missing)
    for col in ([datetime.datetime(2020, 1, 1)] * 2, [1j, 2], [datetime.timedelta(1)] * 2):
        assert pd.Series(col).dtype.kind in "Mcm"
        assert np.isnan(to_rows(pd.DataFrame({"x": col}), ["x"], "X")).all()
        assert np.isnan(to_rows(pd.DataFrame({"x": col}), None, "X")).all()
        assert np.isnan(to_rows(np.array(col).reshape(-1, 1), None, "X")).all()


class _Hostile(numbers.Real):  # type: ignore[misc]
    """A value claiming to be a real number whose every conversion, comparison and printing raises."""

    def __float__(self) -> float:
        raise ZeroDivisionError

    __abs__ = __add__ = __ceil__ = __eq__ = __floor__ = __floordiv__ = __le__ = __lt__ = __mod__ = __float__  # type: ignore
    __mul__ = __neg__ = __pos__ = __pow__ = __radd__ = __rfloordiv__ = __rmod__ = __rmul__ = __float__  # type: ignore
    __round__ = __rpow__ = __rtruediv__ = __truediv__ = __trunc__ = __str__ = __repr__ = __float__  # type: ignore
    __gt__ = __ge__ = __bool__ = __index__ = __int__ = __float__  # type: ignore
    __hash__ = object.__hash__


class _Lying:
    def __float__(self) -> Any:
        return "80"


class _Subclass(float):
    pass


class _FloatSubclass:
    def __float__(self) -> float:
        return _Subclass(2.0)


HOSTILE: list[tuple[Any, float]] = [
    (10**400, math.inf), (-(10**400), -math.inf), (2**1024, math.inf), (2**53 + 1, 2.0**53),
    (Fraction(10**400, 3), math.inf), (Fraction(-(10**400), 3), -math.inf), (Fraction(1, 10**400), 0.0),
    (Fraction(10**400, 10**399), 10.0),
    (Decimal("1.5"), 1.5), (Decimal("NaN"), math.nan), (Decimal("sNaN"), math.nan), (Decimal("-Infinity"), -math.inf),
    (Decimal("1e400"), math.inf),
    (np.float16(1.5), 1.5), (np.longdouble("1e4000"), math.inf), (np.int8(-3), -3.0), (np.uint64(2**64 - 1), 2.0**64),
    (np.float32("nan"), math.nan), (np.bool_(True), 1.0), (True, 1.0), (False, 0.0),
    (1j, math.nan), (np.complex128(1.0), math.nan), (np.datetime64("2020-01-01"), math.nan),
    (np.timedelta64(3, "s"), math.nan), (datetime.datetime(2020, 1, 1), math.nan), (pd.Timestamp("2020"), math.nan),
    (pd.Timedelta(1), math.nan), (pd.NA, math.nan), (pd.NaT, math.nan), (None, math.nan),
    ("80", 80.0), (" 80\n", 80.0), (b"80", 80.0), ("1e400", math.inf), ("-inf", -math.inf), ("nan", math.nan),
    ("abc", math.nan), ("", math.nan), (b"\xff", math.nan), ("1" * 5000, math.inf),
    ([1.0], math.nan), (np.array([1.0]), math.nan), ({}, math.nan), (object(), math.nan),
    (_Hostile(), math.nan), (_Lying(), math.nan), (_FloatSubclass(), math.nan),
]


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@pytest.mark.parametrize("raw", ["object column", "frame", "list", "series"])
def test_every_value_a_table_can_hold_maps_through_the_policy(raw: str) -> None:
    """Issue 28 item 1: no value raises or warns (even with warnings as errors); each is a number, +-inf, or
    missing (NaN) by the declared policy (``tables._as_float``)."""
    cases = [(v, e) for v, e in HOSTILE if raw != "list" or not isinstance(v, (list, np.ndarray))]
    col = _objects([v for v, _ in cases])
    data: Any = {"object column": col.reshape(-1, 1), "frame": pd.DataFrame({"x": pd.Series(col, dtype=object)}),
                 "list": [[v] for v in col], "series": pd.Series(col, dtype=object, name="x")}[raw]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = np.asarray(to_rows(data, ["x"] if raw != "list" else None, "X"), dtype=float).ravel()
    assert got.shape == (len(cases),)
    assert not [(v, g, e) for (v, e), g in zip(cases, got, strict=True) if not _same(g, e)]


def _objects(values: list[Any]) -> np.ndarray:
    """A one-dimensional object array holding ``values`` as they are (a list or an array as one cell)."""
    col = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        col[i] = v
    return col


def test_a_source_reads_hostile_values_without_raising_or_warning() -> None:
    values = _objects([v for v, _ in HOSTILE])
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    X = b.source("X", columns=["x", Category("k", [1, 2])], n=len(values))
    plan = b.build(m=N.GaussianMech()(N.Sum()(N.Clip(box=(0.0, 1.0))(X))))
    df = pd.DataFrame({"x": pd.Series(values, dtype=object), "k": pd.Series(values[::-1], dtype=object)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isfinite(plan.run(df, noise=dp.SeededNoise(0)).released["m"]).all()
        for col in (np.array([np.longdouble("1e4000"), 1.0]), pd.array([1, None], dtype="Int64")):
            b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
            Y = b.source("Y", dp.Reals(lower=0.0, upper=1.0), n=2)
            assert np.isfinite(b.build(m=N.GaussianMech()(N.Sum()(Y))).run(col, noise=dp.SeededNoise(0)).released["m"])


def test_pandas_nullable_and_arrow_dtypes_convert_with_na_as_missing() -> None:
    pa = pytest.importorskip("pyarrow")
    cols = {"Int64": pd.array([3, None], dtype="Int64"), "Float64": pd.array([3.0, None], dtype="Float64"),
            "boolean": pd.array([True, None], dtype="boolean"),
            "arrow int": pd.array([3, None], dtype=pd.ArrowDtype(pa.int64())),
            "arrow bool": pd.array([True, None], dtype=pd.ArrowDtype(pa.bool_())),
            "arrow decimal": pd.array([Decimal("3.00"), None], dtype=pd.ArrowDtype(pa.decimal128(10, 2))),
            "arrow string": pd.array(["3", None], dtype=pd.ArrowDtype(pa.string())),
            "string[pyarrow]": pd.array(["3", None], dtype="string[pyarrow]")}
    for name, arr in cols.items():
        got = to_rows(pd.DataFrame({"x": arr}), ["x"], "X").ravel()
        assert got[0] == (1.0 if "bool" in name else 3.0) and np.isnan(got[1]), name
        assert to_rows(pd.DataFrame({"x": arr}), None, "X").ravel()[0] == got[0], name


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.integers(), st.fractions(), st.decimals(), st.floats(), st.text(max_size=8),
                          st.binary(max_size=4), st.none(), st.booleans(), st.complex_numbers()), min_size=1,
                max_size=20))
def test_object_columns_map_any_values_without_raising(values: list[Any]) -> None:
    col = _objects(values)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = to_rows(col.reshape(-1, 1), ["x"], "X").ravel()
        codes = Category("k", ["a", 1, 2.5]).codes(col)
    for v, g in zip(values, got, strict=True):
        try:
            want = float(v)
        except OverflowError:
            want = math.copysign(math.inf, v)
        except (TypeError, ValueError):
            want = math.nan
        assert _same(g, want), (v, g)
    assert set(codes.tolist()) <= {-1, 0, 1, 2}


def test_object_columns_never_raise_on_their_values() -> None:
    # whether a value parses must not decide an exception: non-numbers in an object column count as missing
    col = np.array([1.0, "N/A", None, 3, True], dtype=object)
    rows = to_rows(col.reshape(-1, 1), ["x"], "X")
    assert rows[[0, 3, 4], 0].tolist() == [1.0, 3.0, 1.0] and np.isnan(rows[[1, 2], 0]).all()


def test_missing_column_is_a_schema_error_naming_it() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    X = b.source("X", columns=["age", "weight"], n=400)
    plan = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))
    with pytest.raises(dp.DataError, match=r"no column\(s\) \['weight'\]"):
        plan.run(_frame(), noise=dp.SeededNoise(0))


def test_named_columns_are_refused_before_data_when_unknown_or_unnamed() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    X = b.source("X", columns=["age", "bmi"], n=10)
    with pytest.raises(dp.DomainError, match="columns_1.*'height'"):
        b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(N.Columns(keep=["height"])(X))))).check()
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    X = b.source("X", dp.Vectors(d=2), n=10)
    with pytest.raises(dp.DomainError, match="no column names"):
        b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(N.Columns(keep=["age"])(X))))).check()
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    X = b.source("X", dp.Vectors(d=3), n=10, columns=["age", "bmi"])
    with pytest.raises(dp.DomainError, match="declares d=3 but its columns encode to 2"):
        b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))).check()


def test_names_do_not_survive_a_map_that_changes_coordinates() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    X = b.source("X", columns=["age", "bmi"], n=10)
    mags = N.Magnitudes(of="coordinates")(X)
    with pytest.raises(dp.DomainError, match="no column names"):
        b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(N.Columns(keep=["age"])(mags))))).check()


def test_missing_values_follow_the_clip_policy() -> None:
    # a NaN (or pandas.NA) row is mapped to the clip centre (the origin): the mean counts it as 0
    df = pd.DataFrame({"x": pd.array([1] * 99 + [None], dtype="Int64")})
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    X = b.source("X", columns=["x"], n=100)
    plan = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))
    assert run_zero(certify(plan), {"X": df})["m"][0] == pytest.approx(0.99)


def test_array_with_declared_columns_encodes_categories() -> None:
    raw = np.array([[1.0, "a"], [2.0, "b"], [3.0, "zz"]], dtype=object)
    rows = to_rows(raw, ["x", Category("k", ["a", "b"])], "X")
    assert rows.tolist() == [[1, 1, 0, 0], [2, 0, 1, 0], [3, 0, 0, 1]]
    with pytest.raises(dp.DataError, match="declares 2 columns"):
        to_rows(np.zeros((3, 3)), ["x", "y"], "X")
