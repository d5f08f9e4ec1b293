"""Typed run-time refs in bounds (issue 13): a :class:`dpflow.Sym` names the public values it depends on
by typed refs (``RowCount``, ``ReleasedScalar``, ``ReleasedNorm``), never by parsed strings; the planner
resolves each in its node's own scope before data; the plan JSON (schema 2) writes them tagged and still
reads schema 1's strings."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from fractions import Fraction

import attrs
import numpy as np
import pytest
from conftest import ExactZeroNoise, ZeroNoise, exact_bound

import dpflow as dp
from dpflow import nodes as N
from dpflow.errors import PlanReferenceError, SerializationError
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.nodes.base import InferContext
from dpflow.nodes.types import Inferred, StatT, VType
from dpflow.plan.graph import SCHEMA
from dpflow.plan.serialize import decode, encode
from dpflow.planner.certify import certify

R, N_X, NORM_C = dp.ReleasedScalar("radius_2"), dp.RowCount("source_0"), dp.ReleasedNorm("public_1")


def test_a_bound_is_built_from_typed_refs_only() -> None:
    s = 2.0 * dp.Sym.ref(R) * dp.Sym.ref(NORM_C) / dp.Sym.ref(N_X)
    assert s.refs() == (N_X, NORM_C, R)  # canonical order of the printed forms
    assert s.text() == "2*norm:public_1*radius_2/n:source_0"
    assert s.value({R: 1.5, NORM_C: 2.0, N_X: 3.0}) == pytest.approx(2.0, rel=1e-9)
    with pytest.raises(KeyError, match="n:source_0"):
        s.value({R: 1.5, NORM_C: 2.0})
    for bad in ("radius_2", "n:source_0", 3):  # a name is not a ref: nothing is parsed
        with pytest.raises(ValueError, match="RowCount | ReleasedScalar | ReleasedNorm"):
            dp.Sym(1.0, ((bad, 1),))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        dp.RowCount(3)  # type: ignore[arg-type]
    # the same node id under two ref types is two different values
    assert dp.Sym.ref(dp.ReleasedScalar("c")) != dp.Sym.ref(dp.ReleasedNorm("c"))


def test_refs_round_trip_through_the_tagged_json_form() -> None:
    s = 2.0 * dp.Sym.ref(R) * dp.Sym.ref(NORM_C, 2) / dp.Sym.ref(N_X)
    data = encode(s)
    assert data == {"$sym": [2.0, [[{"$n": "source_0"}, -1], [{"$norm": "public_1"}, 2],
                                   [{"$released": "radius_2"}, 1]]]}
    assert decode(json.loads(json.dumps(data))) == s
    for bad in ([["radius_2", 1]], [[{"$size": "x"}, 1]], [[{"$n": 3}, 1]], [[{"$n": "a", "$norm": "b"}, 1]]):
        with pytest.raises(SerializationError, match="typed ref"):
            decode({"$sym": [1.0, bad]})


def _clipped_mean_plan() -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2))
    r = N.Apply(fn=np.abs, shape=())(b.public(1.0))
    return b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=r)(X))))


def test_schema_1_plans_with_string_names_are_read_into_typed_refs() -> None:
    plan = _clipped_mean_plan()
    assert SCHEMA == "dpflow.plan/2" and plan.to_data()["schema"] == SCHEMA
    data = plan.to_data()
    data["schema"] = "dpflow.plan/1"
    # a schema-1 bound with string factors (as a hand-written source domain could hold)
    data["nodes"][0]["params"]["domain"]["l2_bound"] = {"$sym": [1.0, [["n:source_0", 1], ["norm:c", -1], ["r", 2]]]}
    read = dp.Plan.from_json(json.dumps(data))
    l2 = read.records[0].node.domain.l2_bound
    assert l2 == dp.Sym(1.0, ((dp.RowCount("source_0"), 1), (dp.ReleasedNorm("c"), -1), (dp.ReleasedScalar("r"), 2)))
    data["schema"] = SCHEMA  # the same strings in a schema-2 document are refused
    with pytest.raises(SerializationError, match="typed ref"):
        dp.Plan.from_json(json.dumps(data))


def test_the_ledger_names_the_typed_refs() -> None:
    cert = certify(_clipped_mean_plan())
    mean = cert.space.types["mean_4"]
    assert isinstance(mean, StatT) and mean.l2 is not None
    assert set(mean.l2.refs()) == {dp.ReleasedScalar("apply_2"), dp.RowCount("source_0")}
    assert "apply_2/n:source_0" in mean.l2.text()


@attrs.frozen
class _StrayBound(N.Sum):
    """A query whose declared sensitivity refers to a node that is not in its scope."""

    stray: str = "nowhere"

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        res = super().infer(ins, ctx)
        assert isinstance(res.out, StatT) and res.out.l2 is not None
        return Inferred(attrs.evolve(res.out, l2=res.out.l2 * dp.Sym.ref(dp.ReleasedScalar(self.stray))), "")


@pytest.mark.parametrize("stray", ["nowhere", "source_0"])
def test_the_planner_refuses_a_bound_it_cannot_resolve_naming_the_node(stray: str) -> None:
    """An unknown node, or a node of the wrong type (rows where a released scalar is needed)."""
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2), n=10)
    s = _StrayBound(stray=stray)(N.Clip(radius=1.0)(X))
    plan = b.build(s=N.GaussianMech()(s))
    with pytest.raises(PlanReferenceError, match=rf"^{s.id}: a bound of its type refers to {stray}, which is not a "
                                                 r"released node of the same scope"):
        plan.check()


def _loop(rows: dp.Sensitive[object], state: dp.Released[object], k: object) -> dp.Released[object]:
    return N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(rows)))


def test_a_loop_body_counts_its_rows_in_its_own_scope() -> None:
    """Before: a body's Mean over a public n not declared in advance referred to the outer source's count,
    which the body's scope does not hold (KeyError at run time).  The planner now resolves the bound
    to the body's Input stand-in, which the loop binds to the same rows."""
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=2))
    plan = b.build(o=N.repeat(X, b.public([0.0, 0.0]), _loop, times=2))
    cert = certify(plan)
    (body,) = cert.space.bodies.values()
    inp = next(r.id for r in body.order if isinstance(r.node, N.Input))
    mean = next(t for t in body.types.values() if isinstance(t, StatT))
    assert mean.l2 is not None and mean.l2.refs() == (dp.RowCount(inp),)
    sigmas = []
    for n in (400, 800):
        res = plan.run({"X": np.full((n, 2), 0.5)}, noise=dp.SeededNoise(0))
        assert np.isfinite(res.released["o"]).all()
        (facts,) = [f for key, f in res.report.execution.facts.items() if "gaussian_mech" in key]
        sigmas.append(facts[0]["sigma"])
    assert sigmas[0] == pytest.approx(2 * sigmas[1], rel=1e-9)  # sensitivity 2r/n with the body's n


# ------------------------------------------------------- a bound at the edge of its run-time values (issue 28 item 4)

_REFS = (dp.RowCount("source_0"), dp.ReleasedScalar("radius_2"), dp.ReleasedNorm("public_1"))
_HOSTILE = (0.0, -0.0, -2.0, -math.inf, math.nan, math.inf, 5e-324, 2.2e-308, 1e-300, 1e308, sys.float_info.max)


@pytest.mark.parametrize("ref", _REFS, ids=lambda r: type(r).__name__)
@pytest.mark.parametrize("power", [-1, -2, -3])
def test_a_bound_that_divides_by_a_run_time_value_of_zero_is_infinite(ref: dp.SymRef, power: int) -> None:
    """The noise of a bound ``c / v^k`` at v = 0 is of infinite scale (the release is useless), never 0 (it would be
    released without noise); a negative value counts as 0, so it is infinite too.  A zero to a positive power is a
    bound of 0: the nodes use the same 0 (``rules.capped``), so the statistic is then a constant."""
    for c in (2.0, 1e-300, 1e300):
        s = dp.Sym.const(c) * dp.Sym.ref(ref, power) * dp.Sym.ref(dp.RowCount("other"), 1)
        for v in (0.0, -0.0, -1.0, -math.inf):
            assert s.value({ref: v, dp.RowCount("other"): 7.0}) == math.inf, (c, v)
        assert (dp.Sym.const(c) * dp.Sym.ref(ref, -power)).value({ref: 0.0}) == 0.0
    # the zero divisor wins over a zero factor: 0 / 0 is unbounded, not 0
    s = dp.Sym.ref(ref, power) * dp.Sym.ref(dp.ReleasedScalar("zero"), 1)
    assert s.value({ref: 0.0, dp.ReleasedScalar("zero"): 0.0}) == math.inf


@pytest.mark.parametrize("power", [-3, -2, -1, 1, 2, 3])
@pytest.mark.parametrize("coef", [0.0, 5e-324, 1e-300, 1 / 3, 2.0, 1e300])
def test_a_bound_never_raises_and_never_rounds_below_its_exact_value(coef: float, power: int) -> None:
    """At every hostile run-time value (0, negative, NaN, +-inf, subnormal, the float range's ends) the bound is
    the smallest safe float at or above its exact value under the policy above: never NaN, never raised (a float
    ``**`` overflowed: 5e-324 ** -1), never 0 for a positive exact value (the product underflowed: 1/3 * 5e-324
    gave 0, a release with no noise), inf when the exact value is above the float range."""
    n = dp.RowCount("source_0")
    for ref in _REFS:
        s = dp.Sym.const(coef) * dp.Sym.ref(ref, power) / dp.Sym.ref(n)
        for v in _HOSTILE:
            for m in (6.0, 5e-324, 1e308):
                env = {ref: v, n: m}
                got, want = s.value(env), exact_bound(s, env)
                assert not math.isnan(got), (s.text(), env)
                assert got >= want and (got > 0 or want == 0), (s.text(), env, got)
                if want != math.inf and want <= Fraction(sys.float_info.max):
                    assert Fraction(got) <= want * (1 + Fraction(1, 10**11)) + Fraction(5e-324), (s.text(), env)
                else:
                    assert got == math.inf


def test_a_mean_of_rows_clipped_to_a_subnormal_released_radius_gets_noise() -> None:
    """Before: the bound 2 r / 6 at a released r = 5e-324 underflowed to 0, and the mean was released without
    noise, though it tells neighbours apart (rows (1, 1, 1, 0, 0, 0) give a mean of 0, (1, 1, 1, 1, 0, 0) one of
    5e-324 once clipped to r).  The noise scale is now at least the exact sensitivity over sqrt(2 rho)."""
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=1), n=6)
    m = N.GaussianMech()(N.Mean()(N.Clip(radius=b.public(5e-324))(X)))
    cert = certify(b.build(m=m))
    for ones in (3, 4):
        D = np.array([[1.0]] * ones + [[0.0]] * (6 - ones))
        res = execute(cert, {"X": D}, ZeroNoise(), NumpyBackend())
        (sigma,) = [f["sigma"] for f in res.facts[m.id] if "sigma" in f]
        assert Fraction(sigma) ** 2 * 2 >= (2 * Fraction(5e-324) / 6) ** 2 and sigma > 0


def test_a_released_radius_near_the_float_range_squared_in_a_bound_gives_infinite_noise() -> None:
    """Before: the l1 bound r^2 / n of a truncated binary mean at a released r = 1e308 raised OverflowError at run
    time (after the plan's earlier releases); it is now unbounded, so the Laplace release has noise of infinite
    scale."""
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=2, box=(0.0, 1.0)), n=4)
    m = N.LaplaceMech()(N.TruncatedBinaryMean(radius=b.public(1e308))(X))
    res = execute(certify(b.build(m=m)), {"X": np.ones((4, 2))}, ZeroNoise(), NumpyBackend())
    assert [f["scale"] for f in res.facts[m.id] if "scale" in f] == [math.inf]


@pytest.mark.parametrize("exact", [False, True], ids=["float", "exact"])
def test_a_mean_over_an_empty_index_block_is_released_with_infinite_noise(exact: bool) -> None:
    """A block of an index split has a public row count known at run time; one row split in two leaves the second
    block empty, and its mean's bound 2 r / n divides by n = 0: noise of infinite scale (a useless release), on
    either noise path; never a release without noise."""
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    left, right = N.split(N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2))), N.SplitByIndex(pieces=2))
    m = N.GaussianMech()(N.Mean()(right))
    cert = certify(b.build(m=m, s=N.GaussianMech()(N.Sum()(left))))
    stat = cert.space.types[cert.space.records[m.id].inputs[0]]
    assert isinstance(stat, StatT) and stat.l2 is not None and [p for _, p in stat.l2.factors] == [-1]
    with np.errstate(all="ignore"):
        res = execute(cert, {"X": np.ones((1, 2))}, ExactZeroNoise() if exact else ZeroNoise(), NumpyBackend())
    assert [f["sigma"] for f in res.facts[m.id] if "sigma" in f] == [math.inf]
    assert not np.isfinite(res.released["m"]).any()
