"""Issue 14 items 7, 9, 15: empty data under add/remove, the headline conversion for the noise
actually drawn, and clear errors for simple mistakes."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import pytest

import dpflow as dp
from dpflow import estimators as E
from dpflow import nodes as N
from dpflow.cli import main
from dpflow.errors import BudgetError, DataError, PlanError, PlanTypeError, UnknownSourceError
from dpflow.estimators import discrete, gaussian, product, truncation
from dpflow.nodes.base import PostProcess

# ------------------------------------------------------------------ item 7: empty data under add/remove

Builder = Callable[[dp.PlanBuilder], dict[str, Any]]


def _vectors(b: dp.PlanBuilder) -> dict[str, Any]:
    X = b.source("X", dp.Vectors(d=3))
    C = N.Clip(radius=1.0)(X)
    P = N.Clip(radius=1.0)(N.Precondition(matrix=b.public(np.eye(3)), center=(0.5, 0.0, 0.0))(X))
    inside, outside = N.split(X, N.PartitionByBall(center=(0.0, 0.0, 0.0), radius=1.0))
    col = N.Columns(keep=[1])(N.Clip(box=(-1.0, 1.0))(X))
    return {
        "sum": N.GaussianMech()(N.Sum()(C)),
        "count": N.GaussianMech()(N.Count()(X)),
        "lap_count": N.LaplaceMech()(N.Count()(X)),
        "lap_sum": N.LaplaceMech()(N.Sum()(N.Clip(box=(-1.0, 1.0))(X))),
        "peel": N.Peel(s=1)(N.Sum()(N.Clip(box=(-1.0, 1.0))(X))),
        "pre": N.GaussianMech()(N.Sum()(P)),
        "inside": N.GaussianMech()(N.Count()(inside)),
        "outside": N.GaussianMech()(N.Sum()(N.Clip(radius=2.0)(outside))),
        "hist": N.LaplaceMech()(N.Histogram(edges=[-1.0, 0.0, 1.0])(col)),
        "rownorm_q": N.Quantile(q=0.5)(N.OrderStatistics(upper=2.0)(N.Magnitudes(of="rows")(X))),
        "coord_q": N.Quantile(q=0.9)(N.OrderStatistics(upper=2.0)(N.Magnitudes(of="coordinates")(X))),
        "loop": N.recurse(X, b.public([0.0, 0.0, 0.0]), _step, times=2),
    }


def _step(rows: Any, state: Any, k: Any) -> Any:
    s = N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(rows)))
    return N.Apply(fn=np.add, shape=(3,))(s, state)


def _ordinal(b: dp.PlanBuilder) -> dict[str, Any]:
    X = b.source("X", dp.Ordinal(N=8))
    return {
        "ord": N.LaplaceMech()(N.OrdinalCounts(edges=[0, 4, 8])(X)),
        "interval": N.GaussianMech()(N.IntervalCounts(interval=b.public([2, 5]), normalize=False)(X)),
        "stab": N.StabilityHistogram(delta=1e-8)(N.BinCounts(width=1.0)(X)),
    }


def _cube(b: dp.PlanBuilder) -> dict[str, Any]:
    X = b.source("X", dp.BooleanCube(d=4))
    return {"cube": N.GaussianMech()(N.Sum()(X)), "reals": N.GaussianMech()(N.Sum()(N.Clip(box=(0.0, 1.0))(X)))}


def _reals(b: dp.PlanBuilder) -> dict[str, Any]:
    X = b.source("X", dp.Reals())
    return {"stab": N.StabilityHistogram(delta=1e-8)(N.BinCounts(width=0.5, shift=0.25)(X)),
            "q": N.Quantile(q=0.5)(N.OrderStatistics(lower=-1.0, upper=1.0)(X))}


ADD_REMOVE_PLANS: dict[str, tuple[Builder, int]] = {
    "vectors": (_vectors, 3), "ordinal": (_ordinal, 1), "cube": (_cube, 4), "reals": (_reals, 1),
}

# node kinds that read rows but are refused under add/remove (they need the public n of replace-one
# neighbours): each is checked to be refused below, so the list cannot hide a kind that would run
REFUSED_UNDER_ADD_REMOVE: dict[str, Callable[[Any, dp.PlanBuilder], Any]] = {
    "Mean": lambda X, b: N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))),
    "SecondMoment": lambda X, b: N.GaussianMech()(N.SecondMoment()(N.Clip(radius=1.0)(X))),
    "PairDifferences": lambda X, b: N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(N.PairDifferences()(X)))),
    "SubsampleAggregate": lambda X, b: N.GaussianMech()(N.Mean()(N.SubsampleAggregate(size=2, statistic="mean")(
        N.Clip(radius=1.0)(X)))),
    "SplitByIndex": lambda X, b: N.GaussianMech()(N.Count()(N.split(X, N.SplitByIndex(pieces=2))[0])),
    "TruncatedMean": lambda X, b: N.GaussianMech()(N.TruncatedMean(bound=1.0)(X)),
    "GradientStep": lambda X, b: N.GaussianMech()(N.GradientStep(
        beta=b.public([0.0]), eta=0.5, x_bound=1.0, residual_bound=1.0, radius=1.0)(X)),
    "TruncatedBinaryMean": lambda X, b: N.GaussianMech()(N.TruncatedBinaryMean(tau=1)(X)),
    "DyadicCounts": lambda X, b: N.LaplaceMech()(N.DyadicCounts(N=8)(X)),
    "DyadicExpMech": lambda X, b: N.DyadicExpMech()(N.DyadicCounts(N=8)(X)),
}
STAND_INS = {"Input", "State", "Round"}  # bound by Recurse, exercised by the "loop" release


def _kinds(plan: dp.Plan) -> set[str]:
    out: set[str] = set()
    for rec in plan.records:
        out.add(rec.node.kind)
        if isinstance(rec.node, N.Recurse):
            out |= {r.node.kind for r in rec.node.body.records}
    return out


def _build(make: Builder) -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ApproxZCDP(1.0, 1e-6), neighbors="add_remove")
    return b.build(**make(b))


def test_every_row_reading_node_kind_is_run_on_empty_data_or_refused_under_add_remove() -> None:
    covered = set().union(*(_kinds(_build(make)) for make, _ in ADD_REMOVE_PLANS.values()))
    rows_kinds = {k for k, cls in N.NODE_KINDS.items() if not issubclass(cls, PostProcess) and k != "Public"}
    missing = rows_kinds - covered - set(REFUSED_UNDER_ADD_REMOVE) - STAND_INS
    assert not missing, f"node kinds neither run on empty add/remove data nor refused: {sorted(missing)}"
    assert STAND_INS <= covered


@pytest.mark.parametrize("kind", sorted(REFUSED_UNDER_ADD_REMOVE))
def test_refused_kinds_are_refused_under_add_remove(kind: str) -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="add_remove")
    dom = {"DyadicCounts": dp.Ordinal(N=8), "DyadicExpMech": dp.Ordinal(N=8), "GradientStep": dp.Vectors(d=2),
           "TruncatedBinaryMean": dp.BooleanCube(d=2)}.get(kind, dp.Vectors(d=1))
    X = b.source("X", dom)
    with pytest.raises(PlanError):
        b.build(out=REFUSED_UNDER_ADD_REMOVE[kind](X, b)).check()
    # the same plan is accepted under replace-one neighbours with a public n (so it is a real node use)
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="replace")
    b.build(out=REFUSED_UNDER_ADD_REMOVE[kind](b.source("X", dom, n=10), b)).check()


NOISES = {"seeded": lambda: dp.SeededNoise(1), "exact": lambda: dp.SeededNoise(1, exact=True)}


@pytest.mark.parametrize("noise", sorted(NOISES))
@pytest.mark.parametrize("name", sorted(ADD_REMOVE_PLANS))
@pytest.mark.parametrize("rows", [0, 1])
def test_add_remove_runs_on_zero_and_one_rows(name: str, rows: int, noise: str) -> None:
    """Under add/remove a 0-row dataset neighbours a 1-row one: both must release, never raise."""
    make, d = ADD_REMOVE_PLANS[name]
    plan = _build(make)
    X = np.full((rows, d), 0.5) if d > 1 else np.ones((rows, 1))
    res = plan.run({"X": X}, noise=NOISES[noise]())
    assert set(res.released) == {name for name, _ in plan.outputs}


def test_empty_data_of_any_empty_shape_is_zero_rows_under_add_remove() -> None:
    """An empty CSV reads as a (0, 1) array: under add/remove that is 0 rows, not a schema error."""
    plan = _build(_vectors)
    for empty in (np.zeros((0, 1)), np.zeros((0,)), np.zeros((0, 3)), []):
        res = plan.run({"X": empty}, noise=dp.SeededNoise(2))
        assert np.isfinite(res.released["sum"]).all()


def test_empty_sum_releases_noise_around_zero() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="add_remove")
    X = b.source("X", dp.Vectors(d=2))
    plan = b.build(s=N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(X))), c=N.GaussianMech()(N.Count()(X)))
    res = plan.run({"X": np.zeros((0, 2))}, noise=dp.SeededNoise(0))
    facts = res.report.execution.facts
    assert np.all(np.abs(res.released["s"]) <= 6 * facts["gaussian_mech_3"][0]["sigma"])
    assert abs(res.released["c"]) <= 6 * facts["gaussian_mech_5"][0]["sigma"]


def test_empty_data_under_replace_is_a_public_schema_error() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2))
    plan = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))
    with pytest.raises(DataError, match="empty"):
        plan.run({"X": np.zeros((0, 2))}, noise=dp.SeededNoise(0))


# ------------------------------------------------------------------ item 15: clear errors for simple mistakes


def _mean_plan(budget: Any = None, n: int | None = 100, d: int = 2, **kw: Any) -> dp.Plan:
    b = dp.PlanBuilder(budget=budget if budget is not None else dp.ZCDP(0.5), **kw)
    X = b.source("X", dp.Vectors(d=d), n=n)
    return b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))


def test_one_array_is_the_data_of_a_one_source_plan() -> None:
    X = np.random.default_rng(0).normal(size=(100, 2))
    a = _mean_plan().run(X, noise=dp.SeededNoise(3)).released["m"]
    b = _mean_plan().run({"X": X}, noise=dp.SeededNoise(3)).released["m"]
    assert np.array_equal(a, b)


def test_one_array_for_a_plan_with_two_sources_names_them() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X, Y = b.source("X", dp.Vectors(d=2), n=10), b.source("Y", dp.Vectors(d=2), n=10)
    plan = b.build(x=N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(X))),
                   y=N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(Y))))
    with pytest.raises(UnknownSourceError, match=r"ndarray.*\['X', 'Y'\].*Fix: pass a dict.*'X': \.\.\., 'Y': \.\.\."):
        plan.run(np.zeros((10, 2)), noise=dp.SeededNoise(0))


@pytest.mark.parametrize("n", [100, None])
def test_a_transposed_array_is_told_to_transpose(n: int | None) -> None:
    with pytest.raises(DataError, match=r"got shape \(2, 100\): it looks transposed. Fix: transpose it") as err:
        _mean_plan(n=n).run({"X": np.zeros((2, 100))}, noise=dp.SeededNoise(0))
    assert ("declare d=100" in str(err.value)) == (n is None)
    with pytest.raises(DataError, match="it looks transposed"):  # one coordinate: a (1, n) row
        _mean_plan(n=n, d=1).run({"X": np.zeros((1, 100))}, noise=dp.SeededNoise(0))


def test_a_wrong_number_of_columns_is_not_called_transposed() -> None:
    with pytest.raises(DataError, match=r"expects an \(n, 2\) array, got shape \(100, 3\). Fix: pass 2 columns"):
        _mean_plan().run({"X": np.zeros((100, 3))}, noise=dp.SeededNoise(0))


@pytest.mark.parametrize("budget", [0.5, 1, "0.5", None, (1.0, 1e-6)])
def test_a_bare_number_budget_names_the_measures(budget: Any) -> None:
    with pytest.raises(PlanTypeError, match=r"is a \w+, not a privacy measure. Fix: write budget=dp.PureDP") as err:
        dp.PlanBuilder(budget=budget)
    if isinstance(budget, float):
        assert "dp.PureDP(0.5) for epsilon-DP, dp.ZCDP(0.5) for rho-zCDP" in str(err.value)


def test_a_plan_made_directly_or_read_back_checks_its_budget() -> None:
    plan = _mean_plan()
    with pytest.raises(PlanTypeError, match="not a privacy measure"):
        attrs.evolve(plan, budget=0.5)
    text = plan.to_json().replace('"rho":"1/2"', '"rho":"0"')
    assert text != plan.to_json()
    with pytest.raises(PlanTypeError, match="rho=0"):
        dp.Plan.from_json(text)


@pytest.mark.parametrize("budget", [dp.ZCDP(0), dp.PureDP(0), dp.ApproxDP(0, 1e-6), dp.ApproxDP(0, 0),
                                    dp.ApproxZCDP(0, 1e-6)], ids=lambda b: b.describe())
def test_a_zero_budget_is_refused_when_the_plan_is_made(budget: Any) -> None:
    unit = "rho" if isinstance(budget, (dp.ZCDP, dp.ApproxZCDP)) else "epsilon"
    with pytest.raises(PlanTypeError, match=rf"^plan: the budget .* has {unit}=0, which allows no release. "
                                            rf"Fix: give the budget a positive {unit}"):
        dp.PlanBuilder(budget=budget)


@pytest.mark.parametrize("budget", [dp.ZCDP("1e-300"), dp.PureDP("1e-300"), dp.ApproxDP("1e-300", 1e-6)],
                         ids=lambda b: b.describe())
def test_a_tiny_positive_budget_is_not_refused_as_zero(budget: Any) -> None:
    dp.PlanBuilder(budget=budget)


def test_fixed_costs_that_use_the_whole_budget_name_the_starved_weighted_mechanism() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    C = N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2), n=100))
    plan = b.build(a=N.GaussianMech(rho=0.5)(N.Sum()(C)), c=N.GaussianMech()(N.Sum()(C)))
    with pytest.raises(BudgetError, match=r"^gaussian_mech_5: the fixed-cost mechanisms on source X use the whole "
                                          r"budget.*Fix: lower the fixed costs"):
        plan.check()
    # a fixed cost just below the budget leaves a positive share: accepted
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    C = N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2), n=100))
    b.build(a=N.GaussianMech(rho="0.4999")(N.Sum()(C)), c=N.GaussianMech()(N.Sum()(C))).check()


@pytest.mark.parametrize("radius", [0, 0.0, -1.0, math.nan, math.inf, 2.0**257])
def test_clip_radius_must_be_positive(radius: float) -> None:
    with pytest.raises(ValueError, match=r"^Clip radius must be a finite positive number at most MAX_BOUND, got .*"
                                         r"Fix: pass 0 < radius <= 2\*\*256, or clip to a box only$") as err:
        N.Clip(radius=radius)
    assert ("maps every row to the centre" in str(err.value)) == (radius == 0)


def test_clip_smallest_positive_radius_is_accepted() -> None:
    assert N.Clip(radius=5e-324).radius == 5e-324


@pytest.mark.parametrize("delta", ["1", "1.0", "2", "0", "-1e-6", "nan", "inf", "x"])
def test_privacy_convert_refuses_an_invalid_delta_with_status_2(delta: str, capsys: pytest.CaptureFixture[str]
                                                               ) -> None:
    for extra in ([], ["--all"]):
        with pytest.raises(SystemExit) as err:
            main(["privacy", "convert", "--rho", "0.5", f"--delta={delta}", *extra])
        assert err.value.code == 2
        msg = capsys.readouterr().err
        assert "argument --delta" in msg and ("not a number" in msg or "strictly between 0 and 1" in msg)


@pytest.mark.parametrize("rho", ["-1", "nan", "inf"])
def test_privacy_convert_refuses_an_invalid_rho_with_status_2(rho: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as err:
        main(["privacy", "convert", f"--rho={rho}", "--delta", "1e-6"])
    assert err.value.code == 2 and "rho must be a finite number >= 0" in capsys.readouterr().err


def test_privacy_convert_accepts_deltas_just_inside_the_interval(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["privacy", "convert", "--rho", "0", "--delta", "0.999999"]) == 0
    assert main(["privacy", "convert", "--rho", "0.5", "--delta", "5e-324"]) == 0
    out = capsys.readouterr().out.split()
    assert float(out[0]) == 0.0 and float(out[1]) > 30


# ------------------------------------------------------------------ item 9: the conversions valid for the noise drawn


def _gaussian_plan(budget: Any, **kw: Any) -> dp.Plan:
    b = dp.PlanBuilder(budget=budget, **kw)
    C = N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2), n=100))
    return b.build(a=N.GaussianMech()(N.Mean()(C)), c=N.GaussianMech(weight=2)(N.Sum()(C)))


@pytest.mark.parametrize("budget", [dp.ZCDP(0.5), dp.ApproxZCDP(0.5, 1e-6)], ids=lambda b: b.describe())
def test_a_zcdp_all_gaussian_plan_under_secure_noise_never_headlines_exact_gaussian_dp(budget: Any) -> None:
    res = _gaussian_plan(budget).run({"X": np.zeros((100, 2))}, noise=dp.SecureNoise())
    facts = res.report.execution.facts
    assert all("lattice" in {k for f in facts[m] for k in f} for m in ("gaussian_mech_3", "gaussian_mech_5"))
    for ledger in (res.report.ledger, _gaussian_plan(budget).check()):
        (total,) = ledger.totals
        assert total.gdp_mu is None
        assert [c.rule for c in total.conversions if "Gaussian-DP" in c.rule] == []
        assert total.tightest().rule == "zCDP -> (eps,delta) by CKS"
        assert "exact Gaussian-DP" not in ledger.summary()
        assert any(note.startswith("no exact Gaussian-DP conversion") for note in ledger.composition)
        text = res.report.to_json()
        assert '"exact Gaussian-DP"' not in text


def test_the_cks_headline_of_a_zcdp_gaussian_plan_is_the_golden_value() -> None:
    total = _gaussian_plan(dp.ZCDP(0.5)).check().totals[0]
    assert total.tightest().epsilon == pytest.approx(5.221534, abs=1e-6)  # docs/privacy.md golden value
    assert total.tightest().delta == 1e-6


@pytest.mark.parametrize("accounting", ["auto", "basic"])
def test_plans_that_force_continuous_noise_keep_the_exact_gaussian_dp_conversion(accounting: str) -> None:
    ledger = _gaussian_plan(dp.ApproxDP(1.0, 1e-6), accounting=accounting).check()
    (total,) = ledger.totals
    assert total.gdp_mu is not None
    assert any(c.rule == "exact Gaussian-DP" for c in total.conversions)
    assert not any(note.startswith("no exact Gaussian-DP") for note in ledger.composition)
    if accounting == "auto":
        assert total.tightest().rule == "exact Gaussian-DP" and total.tightest().epsilon <= 1.0


def _released_radius_plan(mech: Any, budget: Any, radius: float, neighbors: str = "replace") -> dp.Plan:
    b = dp.PlanBuilder(budget=budget, neighbors=neighbors)
    X = b.source("X", dp.Vectors(d=2), n=10 if neighbors == "replace" else None)
    r = N.Apply(fn=lambda v: v * radius, shape=())(b.public(1.0))
    query = N.Mean() if neighbors == "replace" else N.Sum()
    return b.build(m=mech(query(N.Clip(radius=r)(X))))


@pytest.mark.parametrize("neighbors", ["replace", "add_remove"])
@pytest.mark.parametrize("noise", sorted(NOISES))
@pytest.mark.parametrize("radius", [math.inf, math.nan])
@pytest.mark.parametrize("mech,budget,key", [(N.GaussianMech, dp.ZCDP(0.5), "sigma"),
                                             (N.GaussianMech, dp.ApproxDP(1.0, 1e-6), "sigma"),
                                             (N.LaplaceMech, dp.PureDP(1.0), "scale")])
def test_an_infinite_released_bound_releases_infinite_noise(mech: Any, budget: Any, key: str, radius: float,
                                                            noise: str, neighbors: str) -> None:
    """Sym.value: a released factor that is not finite makes the bound infinite, and the mechanism then
    releases noise of infinite scale (NaN entries whatever the data), never an exception."""
    plan = _released_radius_plan(mech(), budget, radius, neighbors)
    with np.errstate(all="ignore"):
        res = plan.run({"X": np.ones((10, 2))}, noise=NOISES[noise]())
    assert np.isnan(res.released["m"]).all() and res.released["m"].shape == (2,)
    (fact,) = next(iter(res.report.execution.facts.values()))
    assert fact == {key: math.inf}
    finite = _released_radius_plan(mech(), budget, 1.0, neighbors).run({"X": np.ones((10, 2))}, noise=NOISES[noise]())
    assert np.isfinite(finite.released["m"]).all()


def test_the_no_gdp_note_appears_only_when_a_gdp_accounting_was_dropped() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    C = N.Clip(box=(-1.0, 1.0))(b.source("X", dp.Vectors(d=2), n=100))
    mixed = b.build(a=N.GaussianMech()(N.Mean()(C)), c=N.LaplaceMech()(N.Sum()(C))).check()
    assert mixed.totals[0].gdp_mu is None  # not all Gaussian: never a GDP accounting
    assert not any(note.startswith("no exact Gaussian-DP") for note in mixed.composition)


ESTIMATOR_CALLS = {
    "clipped_mean": lambda b: E.clipped_mean(d=2, n=100, budget=b, radius=1.0),
    "naive_pce": lambda b: E.naive_pce(d=2, n=100, budget=b, kappa=2.0),
    "gaussian.mean": lambda b: gaussian.mean(d=2, n=100, budget=b, R=1.0),
    "gaussian.fit": lambda b: gaussian.fit(np.zeros((100, 2)), budget=b, mean_bound=1.0, cov_bound=2.0),
    "laplace_histogram": lambda b: discrete.laplace_histogram(8, 100, b),
    "merr": lambda b: discrete.merr(N=64, n=100, budget=b),
    "sparse_mean": lambda b: E.sparse_mean(d=5, n=100, s=2, budget=b, radius=1.0),
    "naive_product": lambda b: product.naive_product(d=5, n=100, budget=b),
    "LinearRegression": lambda b: E.LinearRegression(budget=b).fit(np.zeros((100, 2)), np.zeros(100)),
    "truncated_mean": lambda b: truncation.truncated_mean(d=2, n=100, budget=b, radius=1.0),
}


@pytest.mark.parametrize("name", sorted(ESTIMATOR_CALLS))
def test_every_estimator_refuses_a_bare_number_budget_naming_the_fix(name: str) -> None:
    with pytest.raises(dp.PlanTypeError, match=r"not a privacy measure") as e:
        ESTIMATOR_CALLS[name](0.5)
    assert "dp.ZCDP(0.5)" in e.value.fix
