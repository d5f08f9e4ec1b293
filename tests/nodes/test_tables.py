"""DataFrames and Series as sources, named columns, categorical columns through a public category list
(dpflow.tables), and their declared policies for unseen and missing values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import run_zero

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


def test_pandas_categorical_and_nullable_values() -> None:
    s = pd.Series(pd.Categorical(["a", "b", None, "c"], categories=["a", "b", "c"]))
    assert Category("k", ["a", "b"], unseen="none").encode(s.to_numpy()).tolist() == [[1, 0], [0, 1], [0, 0], [0, 0]]
    df = pd.DataFrame({"x": pd.array([1, None, 3], dtype="Int64")})
    rows = to_rows(df, None, "X")
    assert rows[0, 0] == 1.0 and np.isnan(rows[1, 0]) and rows[2, 0] == 3.0


@pytest.mark.parametrize("bad", [["nan", "a"], ["a", "a"], [], ["<other>"], [float("inf")], [True]])
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


def test_undeclared_text_column_is_a_schema_error_with_the_fix() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
    X = b.source("X", dp.Vectors(d=4), n=400)
    plan = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))
    for dtype in ("string", "category"):                    # decided by the dtype, which is public
        df = _frame().astype({"sex": dtype})
        with pytest.raises(dp.DataError, match="'sex' is not numeric.*Category"):
            plan.run(df, noise=dp.SeededNoise(0))


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
