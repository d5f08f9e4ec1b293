"""Neighbouring-datasets tests: the realised change of every query's pre-noise value never
exceeds the sensitivity the planner declares for it.

Each case is a small plan ``Source -> transforms -> query -> mechanism``.  The plan is
certified, the query's static type gives the declared l1 / l2 / linf bounds, and the plan is
run with zero noise on a dataset D and on a neighbour D' (replace one row, or add / remove
one row) so that the mechanism's output is the query's exact value.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import attrs
import numpy as np
import pytest
from conftest import bound_value, run_zero
from hypothesis import given, settings
from hypothesis import strategies as st

import dpflow as dp
from dpflow import nodes as N
from dpflow.planner.certify import Certified, certify

SETTINGS = settings(max_examples=50, deadline=None)
REL_TOL = 1e-9

RADIUS = 2.0  # clip radius around the origin
CENTER = (1.5, -0.5, 0.25)  # public centre (first d entries are used)
C_RADIUS = 1.5  # clip radius around the public centre
BOX = (-1.0, 2.0)
EDGES = (-3.0, -1.0, 0.0, 0.5, 1.0, 3.0)
PART_RADIUS = 1.0  # PartitionByBall radius around the origin
N_REPLACE = (2, 3, 4, 5, 7)

TRANSFORMS = ("ball", "ball_released", "centre", "box", "columns", "pairs", "pairs_box", "index", "value")
QUERIES = ("sum", "mean", "count", "m2", "m2c", "hist", "histn")
DIVIDES_BY_N = ("mean", "m2", "m2c", "histn")


@attrs.frozen
class Case:
    """A certified plan and, for each of its outputs, the query node whose change is checked."""

    cert: Certified
    outputs: tuple[tuple[str, str], ...]  # (output name, query node id)
    public: tuple[tuple[str, float], ...]  # released scalars the bounds may refer to
    d: int


GROUPS = {"vec": ("sum", "mean", "count", "m2", "m2c"), "hist": ("hist", "histn", "count")}


def make_query(query: str, rows: Any, centre: Any) -> Any:
    if query == "sum":
        return N.Sum()(rows)
    if query == "mean":
        return N.Mean()(rows)
    if query == "count":
        return N.Count()(rows)
    if query == "m2":
        return N.SecondMoment()(rows)
    if query == "m2c":
        return N.SecondMoment(center=centre)(rows)
    if query == "hist":
        return N.Histogram(edges=EDGES)(rows)
    if query == "histn":
        return N.Histogram(edges=EDGES, normalize=True)(rows)
    raise AssertionError(query)


def build_plan(transform: str, queries: tuple[str, ...], relation: str, d: int,
               n: int | None) -> tuple[dp.Plan, list[tuple[str, str]], dict[str, float]]:
    """The plan of a case: every query on every piece, each released by a GaussianMech; also its
    (output name, query id) pairs and the public scalars its bounds may refer to."""
    b = dp.PlanBuilder(budget=dp.ZCDP(1), neighbors=relation)
    declared_n = None if (relation == "add_remove" or transform == "ball_released") else n
    X = b.source("X", dp.Vectors(d=d), n=declared_n)
    centre = None
    public: dict[str, float] = {}
    if transform == "ball":
        pieces = [N.Clip(radius=RADIUS)(X)]
    elif transform == "ball_released":
        r = b.public(RADIUS)
        public[r.id] = RADIUS
        pieces = [N.Clip(radius=r)(X)]
    elif transform == "centre":
        centre = b.public(list(CENTER[:d]))
        pieces = [N.Clip(radius=C_RADIUS, center=centre)(X)]
    elif transform == "box":
        pieces = [N.Clip(box=BOX)(X)]
    elif transform == "columns":
        keep = tuple(range(d - 1, -1, -1))[: max(1, d - 1)]  # drop a column (when d > 1), reorder
        pieces = [N.Columns(keep=keep)(N.Clip(radius=RADIUS)(X))]
    elif transform == "pairs":
        pieces = [N.PairDifferences()(N.Clip(radius=RADIUS)(X))]
    elif transform == "pairs_box":
        pieces = [N.PairDifferences()(N.Clip(box=BOX)(X))]
    elif transform == "index":
        pieces = [N.Clip(radius=RADIUS)(p) for p in N.split(X, N.SplitByIndex(pieces=2))]
    elif transform == "value":
        parts = N.split(X, N.PartitionByBall(center=[0.0] * d, radius=PART_RADIUS))
        pieces = [N.Clip(radius=RADIUS)(p) for p in parts]
    else:
        raise AssertionError(transform)
    outs: dict[str, Any] = {}
    pairs = []
    for query in queries:
        for i, rows in enumerate(pieces):
            q = make_query(query, rows, centre)
            outs[f"{query}{i}"] = N.GaussianMech()(q)
            pairs.append((f"{query}{i}", q.id))
    return b.build(**outs), pairs, public


def expected_refusal(transform: str, query: str, relation: str) -> bool:
    """Plans that must be refused with a DomainError (a count that is private, or pairing / index
    splits under add/remove)."""
    if relation == "add_remove" and transform in ("pairs", "pairs_box", "index"):
        return True
    return query in DIVIDES_BY_N and (relation == "add_remove" or transform == "value")


def meaningful(transform: str, query: str, relation: str) -> bool:
    if query == "m2c" and transform != "centre":
        return False  # a centre must be the one the rows were clipped around
    if query == "m2" and transform == "centre":
        return False  # unbounded about the origin (no norm bound): refused, not a sensitivity case
    if transform == "centre" and query == "sum" and relation == "add_remove":
        return False  # the norm of a row clipped around a released centre is not bounded statically
    return True


def valid_queries(transform: str, group: str, relation: str) -> tuple[str, ...]:
    return tuple(q for q in GROUPS[group] if meaningful(transform, q, relation)
                 and not expected_refusal(transform, q, relation))


@functools.cache
def get_case(transform: str, queries: tuple[str, ...], relation: str, d: int, n: int | None) -> Case:
    plan, pairs, public = build_plan(transform, queries, relation, d, n)
    return Case(certify(plan), tuple(pairs), tuple(sorted(public.items())), d)


def group_case(transform: str, group: str, relation: str, d: int, n: int) -> Case:
    d = 1 if group == "hist" else d
    return get_case(transform, valid_queries(transform, group, relation), relation, d,
                    n if relation == "replace" else None)


VALID = [
    pytest.param(t, g, rel, id=f"{rel}-{t}-{g}")
    for rel in ("replace", "add_remove")
    for t in TRANSFORMS
    for g in GROUPS
    if valid_queries(t, g, rel)
]
REFUSED = [
    pytest.param(t, q, rel, id=f"{rel}-{t}-{q}")
    for rel in ("replace", "add_remove")
    for t in TRANSFORMS
    for q in QUERIES
    if meaningful(t, q, rel) and expected_refusal(t, q, rel)
]


def test_every_query_path_is_covered():
    covered = {(t, q, rel) for rel in ("replace", "add_remove") for t in TRANSFORMS for g in GROUPS
               for q in valid_queries(t, g, rel)}
    for q in QUERIES:
        assert any(c[1] == q for c in covered), q
    for t in TRANSFORMS:
        assert {q for (tt, q, rel) in covered if tt == t and rel == "replace"} >= {"sum", "count", "hist"}, t
    assert ("centre", "m2c", "replace") in covered
    assert ("index", "mean", "replace") in covered and ("value", "sum", "add_remove") in covered


# --------------------------------------------------------------------------- checking


def norms(diff: np.ndarray) -> dict[str, float]:
    v = np.asarray(diff, dtype=float).ravel()
    return {"l1": float(np.sum(np.abs(v))), "l2": float(np.linalg.norm(v)), "linf": float(np.max(np.abs(v)))}


def assert_within(case: Case, D: np.ndarray, D2: np.ndarray, label: str = "") -> None:
    """For every output of the case, ||f(D) - f(D')|| <= declared (in l1, l2 = Frobenius, linf)."""
    r1 = run_zero(case.cert, {"X": D})
    r2 = run_zero(case.cert, {"X": D2})
    env: dict[str, float] = dict(case.public)
    env["source_0"] = float(D.shape[0])
    for name, qid in case.outputs:
        stat = case.cert.space.types[qid]
        assert isinstance(stat, N.StatT)
        a, b = np.asarray(r1[name], dtype=float), np.asarray(r2[name], dtype=float)
        assert np.all(np.isfinite(a)) and np.all(np.isfinite(b)), (label, name, a, b)
        realised = norms(a - b)
        if stat.symmetric:  # a symmetric statistic's l1 is over the upper triangle (the noised entries)
            realised["l1"] = norms(np.triu(a - b))["l1"]
        checked = 0
        for which in ("l1", "l2", "linf"):
            bound = getattr(stat, which)
            if bound is None:
                continue
            declared = bound_value(bound, env)
            checked += 1
            assert realised[which] <= declared * (1 + REL_TOL), (
                f"{label} {name} ({qid}): realised {which} change {realised[which]!r} exceeds the declared "
                f"{bound.text()} = {declared!r}"
            )
        assert checked >= 1, f"{qid} declares no finite sensitivity"


def neighbour(relation: str, D: np.ndarray, i: int, row: np.ndarray, add: bool) -> np.ndarray:
    if relation == "replace":
        D2 = D.copy()
        D2[i] = row
        return D2
    if add:
        return np.insert(D, i, row, axis=0)
    return np.delete(D, i, axis=0)


# --------------------------------------------------------------------------- random neighbours

FINITE = st.floats(-8.0, 8.0, allow_nan=False, allow_infinity=False, width=64)
ELEMENTS = st.one_of(
    FINITE,
    FINITE,
    FINITE,
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
    st.sampled_from([math.nan, math.inf, -math.inf]),
)


def matrices(n: int, d: int, elements: st.SearchStrategy[float] = ELEMENTS) -> st.SearchStrategy[np.ndarray]:
    """(n, d) float arrays (plain lists are much faster to generate than hypothesis.extra.numpy)."""
    flat = st.lists(elements, min_size=n * d, max_size=n * d)
    return flat.map(lambda v: np.array(v, dtype=float).reshape(n, d))


@pytest.mark.parametrize(("transform", "group", "relation"), VALID)
@SETTINGS
@given(data=st.data())
def test_random_neighbours_within_declared_sensitivity(transform, group, relation, data):
    d = data.draw(st.integers(1, 3), label="d")
    n = data.draw(st.sampled_from(N_REPLACE), label="n")
    case = group_case(transform, group, relation, d, n)
    D = data.draw(matrices(n, case.d), label="D")
    row = data.draw(matrices(1, case.d), label="row")[0]
    add = relation == "add_remove" and (n < 2 or data.draw(st.booleans(), label="add"))
    i = data.draw(st.integers(0, n if add else n - 1), label="i")
    assert_within(case, D, neighbour(relation, D, i, row, add))


# --------------------------------------------------------------------------- adversarial neighbours


def unit(d: int) -> np.ndarray:
    u = np.arange(1.0, d + 1.0)
    return u / np.linalg.norm(u)


def boundary_pair(transform: str, d: int) -> tuple[np.ndarray, np.ndarray]:
    """A row on the boundary of the clipped domain and its antipode."""
    u = unit(d)
    if transform == "centre":
        c = np.asarray(CENTER[:d])
        return c + C_RADIUS * u, c - C_RADIUS * u
    if transform in ("box", "pairs_box"):
        return np.full(d, BOX[0]), np.full(d, BOX[1])
    return RADIUS * u, -RADIUS * u


def orthogonal_row(transform: str, d: int) -> np.ndarray | None:
    """A boundary row orthogonal (about the centre) to the first: the worst case of a second moment."""
    if d < 2 or transform in ("box", "pairs_box"):
        return None
    u = unit(d)
    v = np.zeros(d)
    v[0], v[1] = -u[1], u[0]
    v /= np.linalg.norm(v)
    if transform == "centre":
        return np.asarray(CENTER[:d]) + C_RADIUS * v
    return RADIUS * v


def base_data(transform: str, d: int, n: int = 6) -> np.ndarray:
    rng = np.random.default_rng(12345 + d)
    D = rng.normal(0.0, 1.0, (n, d))
    x, _ = boundary_pair(transform, d)
    D[1] = x
    if transform == "value":
        D[2] = 0.5 * unit(d)  # strictly inside the partition ball: a record that can move out
    return D


def adversarial_rows(transform: str, d: int) -> list[tuple[str, np.ndarray]]:
    u = unit(d)
    x, antipode = boundary_pair(transform, d)
    partial_nan = np.full(d, 1.0)
    partial_nan[0] = math.nan
    mixed_inf = np.full(d, math.inf)
    mixed_inf[::2] = -math.inf
    orth = orthogonal_row(transform, d)
    extra = [] if orth is None else [("orthogonal boundary", orth)]
    return extra + [
        ("outlier 1e6", 1e6 * u),
        ("outlier -1e6", -1e6 * u),
        ("nan row", np.full(d, math.nan)),
        ("partial nan", partial_nan),
        ("inf row", mixed_inf),
        ("boundary", x),
        ("antipode", antipode),
    ]


@pytest.mark.parametrize(("transform", "group", "relation"), VALID)
def test_adversarial_neighbours_within_declared_sensitivity(transform, group, relation):
    d = 1 if group == "hist" else 3
    D = base_data(transform, d)
    n = D.shape[0]
    case = group_case(transform, group, relation, d, n)
    rows = adversarial_rows(transform, d)
    checks = 0
    for label, row in rows:
        for i in (0, 1, 2):  # row 1 is on the clip boundary, row 2 (value case) inside the partition
            if relation == "replace":
                assert_within(case, D, neighbour(relation, D, i, row, False), f"replace row {i} by {label}")
            else:
                assert_within(case, D, neighbour(relation, D, i, row, True), f"add {label} at {i}")
            checks += 1
    if relation == "add_remove":
        for i in range(n):
            assert_within(case, D, neighbour(relation, D, i, D[i], False), f"remove row {i}")
            checks += 1
    # the boundary row replaced by its antipode (the worst replace-one change of a clipped row)
    x, antipode = boundary_pair(transform, d)
    D_x = neighbour("replace", D, 1, x, False)
    if relation == "replace":
        assert_within(case, D_x, neighbour("replace", D_x, 1, antipode, False), "boundary -> antipode")
    else:
        assert_within(case, D_x, np.insert(D_x, 1, antipode, axis=0), "add antipode")
    assert checks > 0


def test_antipode_realises_the_declared_sum_sensitivity():
    """Guard against vacuous checks: the worst case is attained, so the zero-noise harness really
    observes the change (a declared 2r for a Sum over an r-ball)."""
    case = get_case("ball", ("sum",), "replace", 3, 6)
    D = base_data("ball", 3)
    x, antipode = boundary_pair("ball", 3)
    D2 = D.copy()
    D2[1] = antipode
    change = np.linalg.norm(run_zero(case.cert, {"X": D})["sum0"] - run_zero(case.cert, {"X": D2})["sum0"])
    declared = bound_value(case.cert.space.types[case.outputs[0][1]].l2)
    assert declared == pytest.approx(2 * RADIUS, rel=1e-9)
    assert change == pytest.approx(declared, rel=1e-9)


@pytest.mark.parametrize("centred", [False, True])
def test_orthogonal_boundary_rows_realise_the_declared_second_moment_sensitivity(centred):
    transform = "centre" if centred else "ball"
    case = get_case(transform, ("m2c" if centred else "m2",), "replace", 3, 6)
    D = base_data(transform, 3)
    D2 = D.copy()
    D2[1] = orthogonal_row(transform, 3)
    name, qid = case.outputs[0]
    change = np.linalg.norm(run_zero(case.cert, {"X": D})[name] - run_zero(case.cert, {"X": D2})[name])
    r = C_RADIUS if centred else RADIUS
    declared = bound_value(case.cert.space.types[qid].l2)
    assert declared == pytest.approx(math.sqrt(2) * r**2 / 6, rel=1e-9)
    assert change == pytest.approx(declared, rel=1e-9)
    assert change <= declared * (1 + REL_TOL)


@pytest.mark.parametrize(("transform", "query", "relation"), REFUSED)
def test_queries_dividing_by_a_private_count_are_refused(transform, query, relation):
    with pytest.raises(dp.DomainError) as info:
        get_case(transform, (query,), relation, 1, 6 if relation == "replace" else None)
    err = info.value
    assert err.node in str(err)
    assert "_" in err.node  # a node id such as mean_3, not a free-form name
    assert "Fix:" in str(err)


# --------------------------------------------------------------------------- non-finite policy


@pytest.mark.parametrize("transform", ["ball", "centre"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_rows_become_the_centre_after_clip(transform, bad):
    d = 3
    case = get_case(transform, ("sum",), "replace", d, 6)
    centre = np.asarray(CENTER[:d]) if transform == "centre" else np.zeros(d)
    D = base_data(transform, d)
    with_bad = D.copy()
    with_bad[0, 1] = bad
    with_centre = D.copy()
    with_centre[0] = centre
    got = run_zero(case.cert, {"X": with_bad})["sum0"]
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, run_zero(case.cert, {"X": with_centre})["sum0"], rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- value partitions


def partition_plan(relation: str, fixed: tuple[str, str] | None = None) -> tuple[dp.Plan, list[str]]:
    b = dp.PlanBuilder(budget=dp.ZCDP(1), neighbors=relation)
    X = b.source("X", dp.Vectors(d=2))
    inside, outside = N.split(X, N.PartitionByBall(center=[0.0, 0.0], radius=PART_RADIUS))
    q_in = N.Sum()(N.Clip(radius=RADIUS)(inside))
    q_out = N.Count()(outside)
    if fixed is None:
        m_in, m_out = N.GaussianMech()(q_in), N.GaussianMech()(q_out)
    else:
        m_in, m_out = N.GaussianMech(rho=fixed[0])(q_in), N.GaussianMech(rho=fixed[1])(q_out)
    return b.build(inside=m_in, outside=m_out), [q_in.id, q_out.id]


@pytest.mark.parametrize("relation", ["replace", "add_remove"])
def test_record_moving_between_value_pieces_changes_each_piece_within_its_bound(relation):
    plan, (q_in, q_out) = partition_plan(relation)
    cert = certify(plan)
    D = np.array([[0.5, 0.0], [0.0, 0.3], [3.0, 4.0], [-5.0, 0.0]])
    outlier = np.array([1e6, -1e6])
    if relation == "replace":
        moves = [neighbour("replace", D, 0, outlier, False), neighbour("replace", D, 2, np.zeros(2), False)]
    else:
        moves = [neighbour("add_remove", D, 0, outlier, True), neighbour("add_remove", D, 0, D[0], False)]
    for D2 in moves:
        r1, r2 = run_zero(cert, {"X": D}), run_zero(cert, {"X": D2})
        sum_change = np.linalg.norm(r1["inside"] - r2["inside"])
        count_change = abs(float(r1["outside"]) - float(r2["outside"]))
        assert sum_change <= bound_value(cert.space.types[q_in].l2) * (1 + REL_TOL)
        assert count_change <= bound_value(cert.space.types[q_out].l2) * (1 + REL_TOL)
    # the first neighbour really changes the pieces (under replace the record moves: both change)
    r1, r2 = run_zero(cert, {"X": D}), run_zero(cert, {"X": moves[0]})
    assert abs(float(r1["outside"]) - float(r2["outside"])) == 1.0
    if relation == "replace":
        assert np.linalg.norm(r1["inside"] - r2["inside"]) == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("relation", "expected"),
    [("replace", Fraction(9, 40)), ("add_remove", Fraction(1, 5))],
)
def test_value_partition_cost_rule(relation, expected):
    """Under replace a record can leave one piece and enter the other: each is charged its one-sided cost (the
    Gaussian sum at (1/2)^2 of its rho: norm against diameter; the count in full), or one piece changes within:
    max(1/10, 1/5, 1/40 + 1/5) = 9/40.  Under add/remove a record is in one piece: the max."""
    plan, _ = partition_plan(relation, fixed=("1/10", "1/5"))
    ledger = certify(plan).ledger
    assert Fraction(ledger.totals[0].rho) == expected
    joined = " ".join(e.rule for e in ledger.entries if e.kind == "GaussianMech")
    assert ("two pieces one-sided" in joined) == (relation == "replace")


# --------------------------------------------------------------------------- Peel's input


@functools.cache
def peel_case(d: int, n: int) -> Case:
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=d), n=n)
    m = N.Mean()(N.Clip(box=BOX)(X))
    # with s = d and zero noise Peel selects every coordinate and releases v itself
    return Case(certify(b.build(top=N.Peel(s=d)(m))), (("top", m.id),), (), d)


def assert_peel_within(case: Case, D: np.ndarray, D2: np.ndarray) -> None:
    stat = case.cert.space.types[case.outputs[0][1]]
    v1 = run_zero(case.cert, {"X": D})["top"]
    v2 = run_zero(case.cert, {"X": D2})["top"]
    np.testing.assert_allclose(v1, np.clip(np.nan_to_num(D, nan=0.0), *BOX).mean(axis=0), atol=1e-12)
    assert np.max(np.abs(v1 - v2)) <= bound_value(stat.linf) * (1 + REL_TOL)


@SETTINGS
@given(data=st.data())
def test_peel_input_linf_change_within_declared(data):
    d = data.draw(st.integers(1, 4), label="d")
    n = data.draw(st.sampled_from(N_REPLACE), label="n")
    case = peel_case(d, n)
    D = data.draw(matrices(n, d, FINITE), label="D")
    row = data.draw(matrices(1, d), label="row")[0]
    i = data.draw(st.integers(0, n - 1), label="i")
    assert_peel_within(case, D, neighbour("replace", D, i, row, False))


def test_peel_input_adversarial():
    d, n = 4, 6
    case = peel_case(d, n)
    D = base_data("box", d, n)
    stat = case.cert.space.types[case.outputs[0][1]]
    assert bound_value(stat.linf) == pytest.approx((BOX[1] - BOX[0]) / n, rel=1e-9)
    for _, row in adversarial_rows("box", d):
        for i in range(n):
            D2 = neighbour("replace", D, i, row, False)
            assert_peel_within(case, np.nan_to_num(D, nan=0.0), D2)


# --------------------------------------------------------------------------- regressions
# Each of these was a real under-statement of sensitivity in an earlier version of dpflow.


def _realised_and_declared(build: Callable[[dp.PlanBuilder, Any], Any], relation: str,
                           D: np.ndarray, D2: np.ndarray, n: int | None) -> tuple[float, float]:
    b = dp.PlanBuilder(budget=dp.ZCDP(1), neighbors=relation)
    q = build(b, n)
    cert = certify(b.build(o=N.GaussianMech()(q)))
    declared = bound_value(cert.space.types[q.id].l2)
    realised = float(np.linalg.norm(run_zero(cert, {"X": D})["o"] - run_zero(cert, {"X": D2})["o"]))
    return realised, declared


def test_clip_ball_around_centre_then_box_second_moment_about_centre():
    """Clip(radius, center=c, box): the box clip after the ball projection can move a row farther
    than r from c, so 'l2 <= r around c' must not survive it (refusing is fine)."""
    def build(b: dp.PlanBuilder, n: Any) -> Any:
        X = b.source("X", dp.Vectors(d=2), n=n)
        c = b.public([2.0, 0.0])
        return N.SecondMoment(center=c)(N.Clip(radius=1.0, center=c, box=(-1.0, 1.0))(X))

    D = np.zeros((4, 2))
    D[0] = [2.0, 1.0]
    D2 = D.copy()
    D2[0] = [2.0, -1.0]
    try:
        realised, declared = _realised_and_declared(build, "replace", D, D2, 4)
    except dp.UnboundedSensitivityError:
        return
    assert realised <= declared * (1 + REL_TOL)


def test_clip_box_below_a_declared_source_box_sum_add_remove():
    """A source box lying above the clip box maps every row to the clip box's upper end."""
    def build(b: dp.PlanBuilder, n: Any) -> Any:
        X = b.source("X", dp.Vectors(d=1, box=(2.0, 3.0)))
        return N.Sum()(N.Clip(box=(-5.0, -4.0))(X))

    D = np.array([[2.5], [2.5]])
    D2 = np.array([[2.5], [2.5], [2.5]])
    realised, declared = _realised_and_declared(build, "add_remove", D, D2, None)
    assert realised == pytest.approx(4.0)
    assert realised <= declared * (1 + REL_TOL)


def test_declared_l2_bound_of_a_source_is_enforced():
    def build(b: dp.PlanBuilder, n: Any) -> Any:
        return N.Mean()(b.source("X", dp.Vectors(d=2, l2_bound=dp.Sym.const(1.0)), n=n))

    D = np.zeros((4, 2))
    for bad in ([1e6, 0.0], [math.nan, 1.0], [math.inf, -math.inf]):
        D2 = D.copy()
        D2[0] = bad
        realised, declared = _realised_and_declared(build, "replace", D, D2, 4)
        assert realised <= declared * (1 + REL_TOL), bad


def test_declared_box_of_a_source_is_enforced_for_sum_add_remove():
    def build(b: dp.PlanBuilder, n: Any) -> Any:
        return N.Sum()(b.source("X", dp.Vectors(d=2, box=(-1.0, 3.0))))

    D = np.zeros((3, 2))
    for bad in ([1e6, -1e6], [math.nan, math.nan], [math.inf, -math.inf]):
        realised, declared = _realised_and_declared(build, "add_remove", D, np.vstack([D, bad]), None)
        assert realised <= declared * (1 + REL_TOL), bad
