"""One-call statistics (dpflow.stats): each statistic against the truth within its certified noise, private
bounds, several statistics under one budget, add/remove neighbours, pure DP, refusals."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpflow as dp
from dpflow import stats
from dpflow.plan.graph import Plan


def _df(n: int = 20_000) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"age": rng.normal(45, 12, n), "income": rng.lognormal(10, 1, n),
                         "sex": rng.choice(["F", "M"], n)})


def _sigma(res: stats.StatsResult, kind: str) -> list[float]:
    return [f[0]["sigma"] for k, f in res.report.execution.facts.items() if k.startswith(kind) and "sigma" in f[0]]


def test_public_bounds_each_statistic_within_its_noise() -> None:
    df = _df()
    q = (stats.Statistics(budget=dp.ZCDP(1.0)).count().sum("age", bounds=(0, 100)).mean("age", bounds=(0, 100))
         .variance("age", bounds=(0, 100)).histogram("age", bins=4, bounds=(0, 100)))
    res = q.run(df, noise=dp.SeededNoise(1))
    assert res["count"] == len(df)                                  # n is public under replace: no noise
    age = df.age.clip(0, 100)
    sigmas = _sigma(res, "gaussian")
    assert len(sigmas) == 5 and max(sigmas) > 0
    assert abs(res["sum(age)"] - age.sum()) <= 5 * 100 / np.sqrt(2 * 0.25)   # sensitivity 100, rho 1/4
    assert abs(res["mean(age)"] - age.mean()) <= 5 * 100 / len(df) / np.sqrt(2 * 0.25)
    assert abs(res["variance(age)"] - age.var(ddof=0)) <= 0.02 * age.var()
    truth = np.histogram(age, np.linspace(0, 100, 5))[0]
    assert np.all(np.abs(res["histogram(age)"] - truth) <= 5 * np.sqrt(2) / np.sqrt(2 * 0.25))
    assert res.bounds == {"age": (0.0, 100.0)}
    # one budget, used in full, shared by weight (variance: two mechanisms at half weight)
    ledger = res.report.ledger
    assert ledger.totals[0].budget_used == "100%"
    shares = sorted(float(e.event.share) for e in ledger.entries if e.event is not None)
    assert sum(shares) == pytest.approx(1.0)
    assert shares.count(pytest.approx(0.25)) == 3 and shares.count(pytest.approx(0.125)) == 2


def test_private_bounds_quantiles_and_categories() -> None:
    df = _df()
    q = (stats.Statistics(budget=dp.ZCDP(1.0)).mean("age").quantiles("income", [0.1, 0.5, 0.9])
         .histogram(dp.Category("sex", ["F", "M"])).histogram("age", bins=5))
    res = q.run(df, noise=dp.SeededNoise(0))
    lo, hi = res.bounds["age"]
    assert lo < df.age.quantile(0.001) and hi > df.age.quantile(0.999) and hi - lo < 12 * 12   # about +-4.4 sd
    assert abs(res["mean(age)"] - df.age.mean()) < 0.1
    true_q = df.income.quantile([0.1, 0.5, 0.9]).to_numpy()
    assert np.all(np.abs(res["quantiles(income)"] - true_q) <= 0.02 * true_q)
    assert np.all(np.diff(res["quantiles(income)"]) >= 0)
    sex = res["histogram(sex)"]
    assert list(sex) == ["F", "M", "<other>"]                       # labels, not codes
    assert abs(sex["F"] - (df.sex == "F").sum()) < 50 and abs(sex["<other>"]) < 50
    edges = res["edges(age)"]
    assert edges[0] == pytest.approx(lo) and edges[-1] == pytest.approx(hi)
    assert np.all(np.abs(res["histogram(age)"] - np.histogram(df.age.clip(lo, hi), edges)[0]) < 60)
    # the bounds step of a column is shared by its statistics: one per column without bounds
    kinds = [e.kind for e in res.report.ledger.entries if e.event is not None]
    assert kinds.count("LaplaceMech") == 2 * 2                      # two range histograms per column (age, income)


def test_one_call_functions_and_mappings() -> None:
    data = {"x": np.random.default_rng(1).normal(40, 5, 20_000)}
    r = stats.mean(data, "x", dp.ZCDP(1.0), noise=dp.SeededNoise(2))
    assert abs(r["mean(x)"] - 40) < 0.1 and isinstance(r.plan, Plan)
    assert abs(stats.variance(data, "x", dp.ZCDP(1.0), noise=dp.SeededNoise(2))["variance(x)"] - 25) < 1.0
    assert stats.count(data, dp.ZCDP(1.0))["count"] == 20_000
    med = stats.quantiles(data, "x", dp.ZCDP(1.0), qs=[0.5], bounds=(0, 100), noise=dp.SeededNoise(3))
    assert abs(med["quantiles(x)"][0] - np.median(data["x"])) < 0.2
    h = stats.histogram(data, "x", dp.ZCDP(1.0), edges=[0, 40, 100], noise=dp.SeededNoise(4))["histogram(x)"]
    assert abs(h[0] - (data["x"] < 40).sum()) < 20
    assert abs(stats.sum(data, "x", dp.ZCDP(1.0), bounds=(0, 100), noise=dp.SeededNoise(5))["sum(x)"]
               - data["x"].sum()) < 2000
    plan = stats.Statistics(budget=dp.ZCDP(1.0)).mean("x").plan(data)
    assert Plan.from_json(plan.to_json()).hash == plan.hash


def test_add_remove_and_pure_dp() -> None:
    data = {"x": np.random.default_rng(2).uniform(0, 10, 10_000)}
    q = stats.Statistics(budget=dp.PureDP(1.0), neighbors="add_remove").count().mean("x", bounds=(0, 10))
    res = q.run(data, noise=dp.SeededNoise(0))
    assert abs(res["count"] - 10_000) < 30 and abs(res["mean(x)"] - data["x"].mean()) < 0.05
    assert {e.kind for e in res.report.ledger.entries if e.event is not None} == {"LaplaceMech"}
    with pytest.raises(ValueError, match="private bounds need neighbors='replace'"):
        stats.Statistics(budget=dp.ZCDP(1.0), neighbors="add_remove").mean("x").plan(data)
    with pytest.raises(ValueError, match="divides by n"):
        stats.Statistics(budget=dp.ZCDP(1.0), neighbors="add_remove").variance("x", bounds=(0, 1)).plan(data)


def test_refusals() -> None:
    with pytest.raises(ValueError, match="no statistic"):
        stats.Statistics(budget=dp.ZCDP(1.0)).plan({"x": [1.0]})
    with pytest.raises(ValueError, match="asked twice"):
        stats.Statistics(budget=dp.ZCDP(1.0)).mean("x").mean("x")
    with pytest.raises(ValueError, match="lower < upper"):
        stats.Statistics(budget=dp.ZCDP(1.0)).mean("x", bounds=(1, 1))
    with pytest.raises(ValueError, match="levels in"):
        stats.Statistics(budget=dp.ZCDP(1.0)).quantiles("x", [1.5])
    with pytest.raises(dp.DataError, match="no column"):
        stats.mean({"y": np.zeros(10)}, "x", dp.ZCDP(1.0), bounds=(0, 1))


@pytest.mark.parametrize("neighbors, budget", [("replace", dp.ZCDP(1.0)), ("add_remove", dp.PureDP(1.0))])
def test_a_count_alone_reads_no_column_of_any_input(neighbors: str, budget: dp.privacy.Measure) -> None:
    """docs/statistics.md's ``dp.stats.count(df, budget)``: the count's dummy source column ``_`` is never
    looked up in the user's DataFrame, Series or array (issue 28: "no column(s) ['_']")."""
    df = _df(500)
    for data in (df, df["age"], df.to_numpy(), {"age": df["age"].to_numpy()}):
        r = stats.count(data, budget, neighbors=neighbors, noise=dp.SeededNoise(0))
        assert abs(r["count"] - 500) < (1e-9 if neighbors == "replace" else 30)
    q = stats.Statistics(budget=budget, neighbors=neighbors).count()
    assert q.run(df, noise=dp.SeededNoise(0)).plan.hash == q.plan(df).hash


def test_an_unknown_name_lists_the_names_there_are() -> None:
    res = stats.Statistics(budget=dp.ZCDP(1.0)).count().mean("age").run(_df(2000), noise=dp.SeededNoise(0))
    with pytest.raises(dp.UnknownNameError, match=r"'mean\(Age\)'; did you mean 'mean\(age\)'\? The result has: "
                       r"'count', 'mean\(age\)'\.") as caught:
        res["mean(Age)"]
    assert isinstance(caught.value, KeyError) and str(caught.value).startswith("no value named")
    with pytest.raises(KeyError, match="did you mean 'mean"):
        res.values["mean(agee)"]
    with pytest.raises(KeyError, match=r"no value named 'income'\. The result has: 'age'"):
        res.bounds["income"]
    assert res["mean(age)"] == res.values["mean(age)"] and "mean(age)" in res.values


MISSING = [np.nan, None, pd.NA, "n/a", "", np.inf, -np.inf, 10**400, object()]
"""Values that are not finite numbers: each statistic counts them as the centre of the column's interval."""


def _with_missing(n: int = 400) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """An object column (numbers, numeric text, missing values of every kind), its numbers and where it misses."""
    rng = np.random.default_rng(5)
    x = rng.uniform(0.0, 120.0, n)
    miss = np.zeros(n, dtype=bool)
    miss[rng.choice(n, n // 7, replace=False)] = True
    col = np.empty(n, dtype=object)
    col[:] = [float(v) for v in x]
    col[::7] = [f" {float(v)!r} " for v in x[::7]]  # numbers as text, as a CSV reader may leave them
    for k, i in enumerate(np.flatnonzero(miss)):
        col[i] = MISSING[k % len(MISSING)]
    return pd.DataFrame({"x": col, "y": col}), x, miss


def _all_kinds(bounds: tuple[float, float] | None) -> stats.Statistics:
    return (stats.Statistics(budget=dp.ZCDP(1.0)).sum("x", bounds=bounds).mean("x", bounds=bounds)
            .variance("x", bounds=bounds).quantiles("x", [0.1, 0.5, 0.9], bounds=bounds)
            .histogram("x", bins=4, bounds=bounds).histogram("y", edges=[10, 50, 90, 110]))


def _zero(q: stats.Statistics, data: pd.DataFrame) -> dict[str, Any]:
    from conftest import ZeroNoise

    return q.run(data, noise=ZeroNoise()).values


def test_a_missing_value_counts_as_the_centre_of_the_interval_in_every_statistic() -> None:
    """Issue 28 item 6: one policy for every statistic of a numeric column (docs/statistics.md): a value that is
    not a finite number counts as the interval's centre, numeric text as its number.  Public bounds (20, 100):
    the centre is 60 (the old policy sent a missing value to 0 clipped, here the lower bound 20); the
    histogram over public edges [10, 110] clips to them the same way (centre 60)."""
    df, x, miss = _with_missing()
    got = _zero(_all_kinds((20.0, 100.0)), df)
    filled = pd.DataFrame({"x": np.where(miss, 60.0, x), "y": np.where(miss, 60.0, x)})
    want = _zero(_all_kinds((20.0, 100.0)), filled)
    assert got.keys() == want.keys()
    for k in got:
        assert np.allclose(got[k], want[k], rtol=1e-12, atol=1e-9), k
    # private bounds: the released interval's centre (the ball's centre); the interval is located with a
    # missing value counting as 0
    from conftest import ZeroNoise

    res = _all_kinds(None).run(df, noise=ZeroNoise())
    lo, hi = res.bounds["x"]
    filled_x = np.where(miss, (lo + hi) / 2, np.clip(x, lo, hi))
    assert res["mean(x)"] == pytest.approx(filled_x.mean(), rel=1e-9)
    assert res["sum(x)"] == pytest.approx(filled_x.sum(), rel=1e-9)


def test_the_missing_value_policy_is_stated_in_the_report() -> None:
    df, _, _ = _with_missing(50)
    res = stats.mean(df, "x", dp.ZCDP(1.0), bounds=(20, 100), noise=dp.SeededNoise(0))
    clips = [e.derivation for e in res.report.ledger.entries if e.kind == "Clip"]
    assert clips and all("missing values: a row with a NaN or infinite entry goes to the centre" in t for t in clips)
    assert "missing values" in res.report.to_markdown()


def test_a_mapping_of_lists_never_raises_on_its_values() -> None:
    """A column given as a Python list keeps its values as objects (the table policy converts them): a cell that
    ``np.asarray`` cannot take (a list) or a huge integer is missing or +-inf, never an exception before the run."""
    from conftest import ZeroNoise

    x: list[Any] = [50.0] * 9 + [[1, 2]]
    y: list[Any] = [50] * 9 + [10**400]
    res = stats.Statistics(budget=dp.ZCDP(1.0)).mean("x", bounds=(0, 100)).mean("y", bounds=(0, 80)).run(
        {"x": x, "y": y}, noise=ZeroNoise())
    assert res["mean(x)"] == pytest.approx(50.0) and res["mean(y)"] == pytest.approx((9 * 50 + 40) / 10)
