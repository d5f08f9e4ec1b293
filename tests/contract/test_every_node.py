"""The per-node contract suite: every kind of :data:`dpflow.nodes.NODE_KINDS` passes the same checks,
on the small example plan of ``tests/contract/examples.py`` (a new kind must add its example there).

* JSON round trip: same text, same hash, same certified ledger totals.
* A wrong static type in an input slot (or a sensitive value in a parameter slot, an input fed to a
  node that takes none, a stand-in outside a loop body, an unbounded statistic fed to a mechanism,
  add/remove neighbours for a kind whose rule needs replace-one) is refused by the planner with a
  ``PlanError`` whose ``.node`` is the node itself.  The wrong plans are made by rewiring node records,
  as a hand-written or JSON plan can be: the handle layer cannot be relied on.
* Declared sensitivities (l1 / l2 / linf, and the rank of order statistics) bound the realised change
  of the non-private statistic on random and adversarial neighbours, replace-one and add/remove; and
  every evaluated dataset lies in the domain (box, l2 ball) its static type declares.
* A full run never raises (nor warns) on rows holding NaN, +-inf or +-1e300.
* A kind whose bound divides by a run-time value or scales with a released one runs with that value at 0, NaN,
  5e-324 and 1e308 without raising, every bound at least its exact value (0 as a divisor is unbounded).
* Mechanisms and every node that carries a sensitivity rule cite a reference.
"""

from __future__ import annotations

import math
import warnings
import zlib
from collections.abc import Iterator
from typing import Any, ClassVar

import attrs
import numpy as np
import pytest
from conftest import ExactZeroNoise, ZeroNoise, exact_bound

import dpflow as dp
from contract.examples import EXAMPLES, N_ROWS, Example
from dpflow import nodes as N
from dpflow.domains import Ordinal, as_vectors
from dpflow.errors import PlanError
from dpflow.handles import Ref, Released
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import _Ctx, _Run, prepare_data
from dpflow.nodes.dyadic import DyadicTable
from dpflow.nodes.fixedpoint import FixedPoint
from dpflow.nodes.stability import SparseCounts
from dpflow.nodes.types import DyadicT, PiecesT, ReleasedT, RowsT, StatT
from dpflow.planner.certify import Certified, certify

REL_TOL = 1e-9
KINDS = sorted(N.NODE_KINDS)
EXAMPLED = [k for k in KINDS if k in EXAMPLES]  # a kind without an example fails the coverage test below


def kinds_of(records: tuple[N.NodeRecord, ...]) -> set[str]:
    out: set[str] = set()
    for r in records:
        out.add(r.node.kind)
        if isinstance(r.node, (N.Repeat, N.PartitionTree)):
            out |= kinds_of(r.node.body.records)
    return out


def ex(kind: str) -> Example:
    return EXAMPLES[kind]


def xfail(kind: str, reason: str) -> Any:
    return pytest.param(kind, marks=pytest.mark.xfail(strict=True, reason=reason), id=kind)


# --------------------------------------------------------------------------- coverage


def test_every_node_kind_has_an_example():
    missing = sorted(set(N.NODE_KINDS) - set(EXAMPLES))
    assert not missing, f"add an example for {missing} to tests/contract/examples.py"
    assert not set(EXAMPLES) - set(N.NODE_KINDS), "an example names a kind that is not registered"


@pytest.mark.parametrize("kind", EXAMPLED)
def test_example_uses_its_kind_and_certifies(kind):
    e = ex(kind)
    for relation in e.relations:
        plan, frag, _ = e.plan(relation)
        assert kind in kinds_of(plan.records)
        focus = next(r for r in plan.records if r.id == frag.focus)
        if e.in_body:
            assert isinstance(focus.node, N.Repeat) and kind in kinds_of(focus.node.body.records)
        else:
            assert focus.node.kind == kind
        certify(plan)


# --------------------------------------------------------------------------- JSON round trip


@pytest.mark.parametrize("kind", EXAMPLED)
def test_json_round_trip(kind):
    e = ex(kind)
    for relation in e.relations:
        plan, _, _ = e.plan(relation)
        text = plan.to_json()
        back = dp.Plan.from_json(text)
        assert back.to_json() == text
        assert back.hash == plan.hash
        assert back == plan
        l1, l2 = certify(plan).ledger, certify(back).ledger
        assert l2.totals == l1.totals
        assert l2.to_json() == l1.to_json()


# --------------------------------------------------------------------------- refusals of wrong types

TYPE_NAMES = {RowsT: "rows", StatT: "stat", DyadicT: "stat", PiecesT: "pieces", ReleasedT: "released"}


def rewired(plan: dp.Plan, node_id: str, inputs: tuple[str, ...] | None = None, node: Any = None) -> dp.Plan:
    recs = tuple(
        attrs.evolve(r, inputs=r.inputs if inputs is None else inputs, node=r.node if node is None else node)
        if r.id == node_id else r
        for r in plan.records
    )
    return attrs.evolve(plan, records=recs)


def assert_refused_naming(plan: dp.Plan, node_id: str, what: str) -> None:
    with pytest.raises(PlanError) as info:
        certify(plan)
    assert info.value.node == node_id, f"{what}: refused, but naming {info.value.node!r}: {info.value}"
    assert node_id in str(info.value) and "Fix:" in str(info.value)


@pytest.mark.parametrize("kind", [k for k in EXAMPLED if not ex(k).in_body])
def test_wrong_input_type_is_refused_naming_the_node(kind):
    e = ex(kind)
    plan, frag, donors = e.plan("replace", donors=True)
    cert = certify(plan)
    rec = next(r for r in plan.records if r.id == frag.focus)
    if not rec.inputs:  # a node without inputs refuses any input
        for name, donor in donors.items():
            if name == "unbounded":
                continue
            assert_refused_naming(rewired(plan, rec.id, (donor,)), rec.id, f"an input ({name})")
        return
    for slot, inp in enumerate(rec.inputs):
        expected = TYPE_NAMES[type(cert.space.types[inp])]
        for name, donor in donors.items():
            if name in (expected, "unbounded"):
                continue
            inputs = rec.inputs[:slot] + (donor,) + rec.inputs[slot + 1:]
            assert_refused_naming(rewired(plan, rec.id, inputs), rec.id, f"slot {slot} fed {name}")


@pytest.mark.parametrize("kind", [k for k in EXAMPLED if issubclass(N.NODE_KINDS[k], N.Mechanism)])
def test_mechanism_refuses_a_statistic_of_unbounded_sensitivity(kind):
    plan, frag, donors = ex(kind).plan("replace", donors=True)
    rec = next(r for r in plan.records if r.id == frag.focus)
    bad = rewired(plan, rec.id, (donors["unbounded"],) + rec.inputs[1:])
    with pytest.raises(dp.UnboundedSensitivityError) as info:
        certify(bad)
    assert info.value.node == rec.id and "Fix:" in str(info.value)


@pytest.mark.parametrize("kind", [k for k in EXAMPLED if ex(k).relations == ("replace",) and ex(k).plan()[1].stats])
def test_replace_only_kind_refuses_add_remove_naming_itself(kind):
    """A kind whose rule needs replace-one neighbours (a public n, pairing, blocks by index) says so."""
    with pytest.raises(PlanError) as info:
        certify(ex(kind).plan("add_remove")[0])
    assert info.value.node == ex(kind).plan("add_remove")[1].focus, str(info.value)


@pytest.mark.parametrize("kind", [k for k in EXAMPLED if ex(k).in_body])
def test_stand_in_outside_a_recurse_body_is_refused_naming_it(kind):
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=1), n=N_ROWS)
    stand_in = b.add(N.NODE_KINDS[kind](), ())
    m = N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(X)))
    plan = b.build(m=m, s=Released(stand_in, b))
    assert_refused_naming(plan, stand_in, "a stand-in outside a body")


STAND_IN_DEFECTS: dict[str, str] = {}


@pytest.mark.parametrize("kind", [xfail(k, STAND_IN_DEFECTS[k]) if k in STAND_IN_DEFECTS else k
                                  for k in EXAMPLED if ex(k).in_body])
def test_stand_in_refuses_an_input_naming_it(kind):
    """Stand-ins take no inputs (like Source and Public): a body that feeds one is refused."""
    plan, frag, _ = ex(kind).plan("replace")
    loop = next(r for r in plan.records if r.id == frag.focus)
    assert isinstance(loop.node, N.Repeat)
    recs = list(loop.node.body.records)
    ids = {r.node.kind: r.id for r in recs}
    feed = ids["State"] if kind == "Input" else ids["Input"]
    recs = [attrs.evolve(r, inputs=(feed,)) if r.node.kind == kind else r for r in recs]
    body = attrs.evolve(loop.node.body, records=tuple(recs))
    bad = rewired(plan, loop.id, node=attrs.evolve(loop.node, body=body))
    assert_refused_naming(bad, f"{loop.id}/{ids[kind]}", f"{kind} fed {feed}")


def _ref_fields(node: Any) -> list[str]:
    return [f.name for f in attrs.fields(type(node)) if isinstance(getattr(node, f.name), Ref)]


PARAM_KINDS = [k for k in EXAMPLED if not ex(k).in_body
               and _ref_fields(next(r.node for r in ex(k).plan()[0].records if r.id == ex(k).plan()[1].focus))]
PARAM_DEFECTS: dict[str, str] = {}


@pytest.mark.parametrize(
    "kind", [xfail(k, PARAM_DEFECTS[k]) if k in PARAM_DEFECTS else k for k in PARAM_KINDS])
def test_sensitive_value_in_a_parameter_slot_is_refused_naming_the_node(kind):
    plan, frag, donors = ex(kind).plan("replace", donors=True)
    node = next(r.node for r in plan.records if r.id == frag.focus)
    for field in _ref_fields(node):
        for name in ("rows", "stat", "pieces"):
            bad = attrs.evolve(node, **{field: Ref(donors[name])})
            assert_refused_naming(rewired(plan, frag.focus, node=bad), frag.focus, f"parameter {field} = {name}")


def test_parameter_slots_are_exercised():
    """Guard: the parameter-slot check covers the kinds that take released parameters."""
    assert {"Clip", "Precondition", "PartitionByBall", "SecondMoment", "OrderStatistics", "GradientStep",
            "TruncatedMean", "IntervalCounts", "TruncatedBinaryMean", "RidgeSolve"} <= set(PARAM_KINDS)


# --------------------------------------------------------------------------- neighbouring datasets


def _dim(e: Example) -> int:
    return as_vectors(e.domain).d


def adversarial_rows(e: Example) -> list[tuple[str, np.ndarray]]:
    d = _dim(e)
    u = np.arange(1.0, d + 1.0) / np.linalg.norm(np.arange(1.0, d + 1.0))
    partial_nan = np.ones(d)
    partial_nan[0] = math.nan
    mixed_inf = np.full(d, math.inf)
    mixed_inf[::2] = -math.inf
    mixed_huge = np.full(d, 1e300)
    mixed_huge[::2] = -1e300
    rows = [(f"special {i}", np.asarray(s, dtype=float)) for i, s in enumerate(e.special)]
    return rows + [
        ("zero", np.zeros(d)),
        ("1e300", 1e300 * u),
        ("-1e300", -1e300 * u),
        ("+-1e300", mixed_huge),
        ("1e6", 1e6 * u),
        ("nan", np.full(d, math.nan)),
        ("partial nan", partial_nan),
        ("inf", np.full(d, math.inf)),
        ("-inf", np.full(d, -math.inf)),
        ("+-inf", mixed_inf),
    ]


def base_data(e: Example, rng: np.random.Generator, n: int = N_ROWS) -> np.ndarray:
    d = _dim(e)
    if isinstance(e.domain, Ordinal):
        D = rng.integers(0, e.domain.N, size=(n, d)).astype(float)
    else:
        D = rng.normal(0.0, 1.5, size=(n, d))
    if e.special and n > 1:
        D[1] = e.special[0]
    return D


def random_data(e: Example, rng: np.random.Generator, n: int) -> np.ndarray:
    D = base_data(e, rng, n)
    D[0] = rng.normal(0.0, 1.5, size=D.shape[1])  # keep rows 1.. as base_data made them (specials)
    wild = rng.random(D.shape) < 0.15
    D[wild] = rng.choice([math.nan, math.inf, -math.inf, 1e300, -1e300, 1e6, 0.0], size=int(wild.sum()))
    return D


def evaluate(cert: Certified, D: np.ndarray, exact: bool = False) -> tuple[dict[str, Any], _Ctx]:
    """Every top-level node's value (mechanisms with zero noise; the statistics an exact source gets with
    ``exact``) and an evaluation context that evaluates declared bounds on this run (public sizes and released
    parameters)."""
    run = _Run(cert, prepare_data(cert, {"X": D}), ExactZeroNoise() if exact else ZeroNoise(), NumpyBackend())
    run.frees = False  # every value, not only what later nodes read
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = run.space_values(cert.space, {})
    return env, _Ctx(run, cert.space, env)


def dense(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    """Two values of one statistic as aligned float vectors."""
    if isinstance(a, SparseCounts):
        ka, kb = dict(zip(a.keys.tolist(), a.counts.tolist(), strict=True)), dict(
            zip(b.keys.tolist(), b.counts.tolist(), strict=True))
        keys = sorted(set(ka) | set(kb))
        return np.array([ka.get(k, 0.0) for k in keys]), np.array([kb.get(k, 0.0) for k in keys])
    if isinstance(a, DyadicTable):
        va, vb = [], []
        for j in range(a.L):  # every interval where either table has a point
            q = np.unique(np.concatenate([a.x >> j, b.x >> j]))
            va.append(a.counts_at(j, q))
            vb.append(b.counts_at(j, q))
        return np.concatenate(va).astype(float), np.concatenate(vb).astype(float)
    return np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()


def rank_change(a: np.ndarray, b: np.ndarray) -> float:
    """max over thresholds t of |#{z < t} - #{z' < t}| for the inner (sorted) order statistics."""
    za, zb = a[1:-1], b[1:-1]
    ts = np.concatenate([za, zb, np.nextafter(za, np.inf), np.nextafter(zb, np.inf), [np.inf]])
    ca = np.searchsorted(np.sort(za), ts, side="left")
    cb = np.searchsorted(np.sort(zb), ts, side="left")
    return float(np.max(np.abs(ca - cb)))


@attrs.define
class Tally:
    """Largest realised change per (stat, norm), to show the checks are not vacuous."""

    seen: dict[tuple[str, str], float] = attrs.field(factory=dict)

    def add(self, key: tuple[str, str], v: float) -> None:
        self.seen[key] = max(self.seen.get(key, 0.0), v)


def assert_rows_in_declared_domains(cert: Certified, env: dict[str, Any], ctx: _Ctx, label: str) -> None:
    """Every evaluated dataset (source, transform, piece) lies in the domain its static type declares:
    the box, and the l2 ball (around the origin or a released centre), including floating point."""
    for nid, t in cert.space.types.items():
        if not isinstance(t, RowsT) or nid not in env:
            continue
        dom = t.domain
        A = np.asarray(env[nid], dtype=float)
        if dom.box is not None:
            lo, hi = dom.box
            assert np.all((A >= lo) & (A <= hi)), f"{label}: rows of {nid} leave the declared box {dom.box}"
        if dom.l2_bound is not None:
            if dom.center is not None and dom.center not in env:
                continue  # a public centre is shown as text only; Clip's own tests cover it
            c = 0.0 if dom.center is None else np.asarray(env[dom.center], dtype=float)
            r = ctx.bound(dom.l2_bound)
            with np.errstate(all="ignore"):
                norms = np.linalg.norm(A - c, axis=1)
            assert np.all(norms <= r * (1 + 1e-12)), (
                f"{label}: rows of {nid} leave the declared l2 ball {dom.describe()}: max norm {np.max(norms)!r}")


def check_pair(cert: Certified, stats: tuple[str, ...], D: np.ndarray, D2: np.ndarray, label: str,
               tally: Tally) -> None:
    env1, ctx = evaluate(cert, D)
    env2, ctx2 = evaluate(cert, D2)
    assert_rows_in_declared_domains(cert, env1, ctx, label)
    assert_rows_in_declared_domains(cert, env2, ctx2, label)
    for sid in stats:
        st = cert.space.types[sid]
        assert isinstance(st, StatT)
        a, b = dense(env1[sid], env2[sid])
        assert np.all(np.isfinite(a)) and np.all(np.isfinite(b)), (label, sid, a, b)
        realised = {}
        if a.shape == b.shape:
            v = a - b
            upper = np.triu(v.reshape(st.shape)) if st.symmetric else v  # symmetric: l1 over the upper
            realised = {"l1": float(np.sum(np.abs(upper))), "l2": float(np.linalg.norm(v)),  # triangle (noised)
                        "linf": float(np.max(np.abs(v), initial=0.0))}
        if st.rank is not None:
            realised["rank"] = rank_change(np.asarray(env1[sid]), np.asarray(env2[sid]))
        checked = 0
        for which in ("l1", "l2", "linf", "rank"):
            bound = getattr(st, which)
            if bound is None:
                continue
            declared = ctx.bound(bound)
            assert which in realised, f"{label}: {sid} declares {which} but its shape changed {a.shape} {b.shape}"
            checked += 1
            tally.add((sid, which), realised[which])
            assert realised[which] <= declared * (1 + REL_TOL) + 1e-12, (
                f"{label}: {sid} realised {which} change {realised[which]!r} exceeds the declared "
                f"{bound.text()} = {declared!r}")
        assert checked, f"{sid} declares no finite sensitivity"


def neighbours(e: Example, relation: str, D: np.ndarray) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    rows = adversarial_rows(e)
    n = D.shape[0]
    for label, row in rows:
        for i in (0, 1, n - 1):
            if relation == "replace":
                D2 = D.copy()
                D2[i] = row
                yield f"replace row {i} by {label}", D, D2
            else:
                yield f"add {label} at {i}", D, np.insert(D, i, row, axis=0)
    if relation == "add_remove":
        for i in range(n):
            yield f"remove row {i}", D, np.delete(D, i, axis=0)
    # each special row replaced by every other (the boundary -> antipode / orthogonal worst cases)
    for i, s in enumerate(e.special):
        for j, t in enumerate(e.special):
            if i != j:
                Ds = D.copy()
                Ds[1] = s
                D2 = Ds.copy()
                if relation == "replace":
                    D2[1] = t
                else:
                    D2 = np.insert(Ds, 1, t, axis=0)
                yield f"special {i} -> {j}", Ds, D2


SENS = [(k, rel) for k in EXAMPLED for rel in ex(k).relations if ex(k).plan(rel)[1].stats]
SENS_IDS = [f"{k}-{rel}" for k, rel in SENS]


@pytest.mark.parametrize(("kind", "relation"), SENS, ids=SENS_IDS)
def test_adversarial_neighbours_within_declared_sensitivity(kind, relation):
    e = ex(kind)
    plan, frag, _ = e.plan(relation)
    cert = certify(plan)
    D = base_data(e, np.random.default_rng(7))
    tally = Tally()
    for label, D1, D2 in neighbours(e, relation, D):
        check_pair(cert, frag.stats, D1, D2, label, tally)
    # not vacuous: a declared positive sensitivity is approached by some neighbour
    for sid in frag.stats:
        st = cert.space.types[sid]
        assert isinstance(st, StatT)
        assert any(tally.seen.get((sid, w), 0.0) > 0 for w in ("l1", "l2", "linf", "rank")) or all(
            getattr(st, w) is None or getattr(st, w).coef == 0 for w in ("l1", "l2", "linf", "rank")), (
            f"{sid}: no neighbour changed the statistic")


@pytest.mark.parametrize(("kind", "relation"), SENS, ids=SENS_IDS)
def test_random_neighbours_within_declared_sensitivity(kind, relation):
    e = ex(kind)
    plan, frag, _ = e.plan(relation)
    cert = certify(plan)
    rng = np.random.default_rng(zlib.crc32(f"{kind}-{relation}".encode()))
    tally = Tally()
    for trial in range(12):
        n = int(rng.integers(2, 9)) if relation == "add_remove" else N_ROWS
        D = random_data(e, rng, n)
        row = random_data(e, rng, 1)[0] if trial % 2 else rng.normal(0.0, 3.0, size=D.shape[1])
        i = int(rng.integers(0, n))
        if relation == "replace":
            D2 = D.copy()
            D2[i] = row
        elif trial % 3:
            D2 = np.insert(D, i, row, axis=0)
        else:
            D2 = np.delete(D, i, axis=0)
        check_pair(cert, frag.stats, D, D2, f"trial {trial}", tally)


def test_sensitivity_checks_cover_every_query_and_transform():
    covered = {k for k, _ in SENS}
    rule_kinds = {k for k, c in N.NODE_KINDS.items() if issubclass(c, (N.Query, N.Transform))}
    rule_kinds |= {"Source", "SplitByIndex", "PartitionByBall", "Piece"}
    assert rule_kinds <= covered, sorted(rule_kinds - covered)
    assert {k for k, rel in SENS if rel == "add_remove"} >= {"Sum", "Count", "Histogram", "Clip", "Piece"}


# --------------------------------------------------------------------------- non-finite rows


def _fixed_stats(kind: str, relation: str) -> tuple[str, ...]:
    plan, frag, _ = ex(kind).plan(relation)
    cert = certify(plan, exact_noise=True)
    return tuple(sid for sid in frag.stats if (fe := _stat(cert, sid).float_error) is not None
                 and fe.kind in ("fixed_sum", "fixed_gram"))


def _stat(cert: Certified, sid: str) -> StatT:
    st = cert.space.types[sid]
    assert isinstance(st, StatT)
    return st


FIXED = [(k, rel) for k, rel in SENS if _fixed_stats(k, rel)]


@pytest.mark.parametrize(("kind", "relation"), FIXED, ids=[f"{k}-{rel}" for k, rel in FIXED])
def test_fixed_point_statistics_within_declared_sensitivity_plus_twice_their_error(kind, relation):
    """What an exact source releases from a fixed-point ``Sum`` or ``Gram`` (:mod:`dpflow.nodes.fixedpoint`):
    on every adversarial neighbour the exact change (integers, no float tolerance beyond the norm's own
    rounding) is within the declared sensitivity plus twice the error term the lattice release adds."""
    e = ex(kind)
    plan, _, _ = e.plan(relation)
    cert = certify(plan, exact_noise=True)
    sids = _fixed_stats(kind, relation)
    for label, D1, D2 in neighbours(e, relation, base_data(e, np.random.default_rng(7))):
        env1, ctx = evaluate(cert, D1, exact=True)
        env2, _ = evaluate(cert, D2, exact=True)
        for sid in sids:
            st = _stat(cert, sid)
            a, b = env1[sid], env2[sid]
            assert isinstance(a, FixedPoint) and isinstance(b, FixedPoint) and a.exponent == b.exponent, label
            diff = a.units - b.units
            v = np.array([float(x) for x in (np.triu(diff) if st.symmetric else diff).ravel()]) * 2.0**a.exponent
            entries = int(np.count_nonzero(np.triu(np.ones(st.shape))) if st.symmetric else v.size)
            assert st.float_error is not None
            err2, err1 = st.float_error.bound(ctx.public_values(st.float_error.refs()), entries)
            full = np.array([float(x) for x in diff.ravel()]) * 2.0**a.exponent
            realised = {"l2": float(np.linalg.norm(full)), "l1": float(np.sum(np.abs(v))),
                        "linf": float(np.max(np.abs(full), initial=0.0))}
            tol = 1 + 4e-16 * (entries + 4)  # the float norm of the exact change
            for which, err in (("l2", err2), ("l1", err1), ("linf", err2)):
                bound = getattr(st, which)
                if bound is not None:
                    allowed = ctx.bound(bound) + 2 * err
                    assert realised[which] <= allowed * tol, (label, sid, which, realised[which], allowed)


def hostile_data(e: Example, n: int) -> np.ndarray:
    D = base_data(e, np.random.default_rng(11), n)
    bad = [row for label, row in adversarial_rows(e) if not label.startswith(("special", "zero"))]
    for i in range(min(n - 1, len(bad))):
        D[i + 1 if i + 1 < n else i] = bad[i]
    return D


@pytest.mark.parametrize("kind", EXAMPLED)
@pytest.mark.parametrize("exact", [False, True], ids=["float", "exact"])
def test_full_run_never_raises_on_non_finite_rows(kind, exact):
    e = ex(kind)
    for relation in e.relations:
        plan, _, _ = e.plan(relation)
        for n in (N_ROWS, 9) if relation == "add_remove" else (N_ROWS,):
            D = hostile_data(e, n)
            for data in (D, *(np.full_like(D, v) for v in (math.nan, math.inf, -math.inf, 1e300, -1e300))):
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    res = plan.run({"X": data}, noise=dp.SeededNoise(5, exact=exact))
                assert set(res.released) == {name for name, _ in plan.outputs}


# --------------------------------------------------------------------------- run-time values at the edge


EDGE_VALUES = (0.0, math.nan, 5e-324, 1e308)
"""Run-time values a bound may meet: a released value is any float (a noisy release, or one with infinite noise)."""

DIVIDING_KINDS = ("AddKnots", "Apply", "Eigh", "GateBall", "GaussianMech", "Get", "GradientStep", "Mean", "NoiseScale",
                  "PSDProject", "Pack", "Peel", "ProjectCoef", "Public", "RidgeSolve", "SecondMoment", "ShellRadii",
                  "SplitByIndex", "SubsampleAggregate", "TopEigenvectors", "TruncatedBinaryMean", "TruncatedMean")
"""The kinds whose example (with its public n left to run time) holds a bound that divides by a run-time value."""

RELEASED_KINDS = ("BallMean", "Clip", "GradientStep", "OrderStatistics", "Public", "TerrificDecision",
                  "TruncatedBinaryMean", "TruncatedMean")
"""The kinds whose example holds a bound that scales with a released value."""


def _syms(x: Any, out: list[dp.Sym]) -> None:
    if isinstance(x, dp.Sym):
        out.append(x)
    elif attrs.has(type(x)):
        for f in attrs.fields(type(x)):
            _syms(getattr(x, f.name), out)
    elif isinstance(x, (tuple, list)):
        for y in x:
            _syms(y, out)


def _runtime_factors(cert: Certified) -> set[tuple[type, bool]]:
    """(ref type, negative power) of every run-time factor of every bound in every static type of the plan."""
    out: set[tuple[type, bool]] = set()
    spaces = [cert.space]
    while spaces:
        space = spaces.pop()
        spaces += space.bodies.values()
        for t in space.types.values():
            syms: list[dp.Sym] = []
            _syms(t, syms)
            out |= {(type(r), p < 0) for s in syms for r, p in s.factors}
    return out


def _unknown_n_plan(e: Example, monkeypatch: pytest.MonkeyPatch) -> dp.Plan:
    """The example's replace-one plan with its public n known only at run time (its bounds then divide by it)."""
    import contract.examples

    with monkeypatch.context() as m:
        m.setattr(contract.examples, "N_ROWS", None)
        return e.plan("replace")[0]


def test_the_edge_value_kinds_are_every_kind_with_such_a_bound(monkeypatch):
    dividing = [k for k in EXAMPLED if (dp.RowCount, True) in _runtime_factors(certify(_unknown_n_plan(ex(k),
                                                                                                        monkeypatch)))]
    released = [k for k in EXAMPLED if any(t is not dp.RowCount for t, _ in _runtime_factors(certify(ex(k).plan()[0])))]
    assert (tuple(dividing), tuple(released)) == (DIVIDING_KINDS, RELEASED_KINDS)


_Seen = list[tuple[dp.Sym, dict[Any, float], float]]


def _run_at_edge(cert: Certified, D: np.ndarray, exact: bool, what: str, v: float,
                 monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]], _Seen]:
    """Run with zero noise, every released scalar constant (``what="released"``) or every run-time row count a
    bound reads (``what="divisor"``) replaced by ``v``; every top-level value, the facts and the bounds evaluated."""
    from dpflow.nodes.postprocess import Public

    seen: _Seen = []
    values, bound, public = _Ctx.public_values, _Ctx.bound, Public.evaluate

    def public_values(self: _Ctx, refs: Any) -> dict[Any, float]:
        out = values(self, refs)
        return {r: v if what == "divisor" and isinstance(r, dp.RowCount) else x for r, x in out.items()}

    def recorded(self: _Ctx, sym: dp.Sym) -> float:
        got = bound(self, sym)
        seen.append((sym, self.public_values(sym.refs()), got))
        return got

    def edge_public(self: Public, ins: Any, ctx: Any) -> Any:
        out = public(self, ins, ctx)
        return v if what == "released" and isinstance(out, float) else out

    with monkeypatch.context() as m:
        m.setattr(_Ctx, "public_values", public_values)
        m.setattr(_Ctx, "bound", recorded)
        m.setattr(Public, "evaluate", edge_public)
        run = _Run(cert, prepare_data(cert, {"X": D}), ExactZeroNoise() if exact else ZeroNoise(), NumpyBackend())
        run.frees = False
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            env = run.space_values(cert.space, {})
    return env, dict(run.facts), seen


@pytest.mark.parametrize("kind, what", [(k, "divisor") for k in DIVIDING_KINDS] + [(k, "released") for k in
                                                                                   RELEASED_KINDS])
@pytest.mark.parametrize("exact", [False, True], ids=["float", "exact"])
def test_bounds_at_edge_run_time_values_never_raise_nor_understate(kind, what, exact, monkeypatch):
    """Every kind whose bound divides by a run-time value (its row count, here replaced by the edge value: the
    bound's arithmetic is the same for any value) or scales with a released one, run with that value at 0, NaN, a
    subnormal and 1e308: no exception; every bound evaluated is at least its exact value (``exact_bound``: 0 as a
    divisor and NaN are unbounded), never NaN, never 0 when the exact value is positive; and a mechanism that adds
    no noise (a bound of exactly 0: a released radius of 0, to which the nodes clip) releases the same value on
    two different datasets."""
    e = ex(kind)
    plan = _unknown_n_plan(e, monkeypatch) if what == "divisor" else e.plan("replace")[0]
    cert = certify(plan)
    D1, D2 = base_data(e, np.random.default_rng(7)), random_data(e, np.random.default_rng(8), N_ROWS)
    for v in EDGE_VALUES:
        (env1, facts, seen), (env2, _, _) = (_run_at_edge(cert, D, exact, what, v, monkeypatch) for D in (D1, D2))
        for sym, values, got in seen:
            want = exact_bound(sym, values)
            assert not math.isnan(got) and got >= want and (got > 0 or want == 0), (v, sym.text(), values, got)
        for nid, fs in facts.items():
            if any(f.get(k) == 0.0 for f in fs for k in ("sigma", "scale")) and nid in env1:
                a, b = (np.asarray(x[nid], dtype=float) for x in (env1, env2))
                assert a.tobytes() == b.tobytes(), (v, nid, "released without noise, and it depends on the data")


# --------------------------------------------------------------------------- references


def carries_a_rule(cls: type[N.Node]) -> bool:
    """Mechanisms (a cost), queries and transforms (a sensitivity or stability), splits and pieces
    (parallel composition), loops (sequential composition)."""
    return issubclass(cls, (N.Mechanism, N.Query, N.Transform, N.Repeat, N.PartitionTree)) or cls.kind in (
        "SplitByIndex", "PartitionByBall", "Piece")


@pytest.mark.parametrize("kind", [k for k in KINDS if carries_a_rule(N.NODE_KINDS[k])])
def test_rule_carrying_kinds_cite_a_reference(kind):
    assert str(N.NODE_KINDS[kind].reference).strip(), f"{kind} carries a privacy rule but cites no reference"


def test_kinds_without_a_reference_are_rule_free():
    """Only post-processing, the loop stand-ins and the source (whose bounds are declared, not derived)
    may go without a reference."""
    empty = {k for k, c in N.NODE_KINDS.items() if not str(c.reference).strip()}
    assert empty <= {"Source", "Apply", "PSDProject", "Eigh", "Get", "Pack", "Input", "State", "Round",
                     "ScaleShift", "ModeBinUpper", "ProjectCoef", "RidgeSolve"}


def test_node_kinds_register_themselves_and_cannot_be_shadowed() -> None:
    """A node class registers itself by defining ``kind`` (no hand-kept tuple); a subclass outside dpflow
    (a test's mutant) does not replace the real kind, and a second dpflow class of the same kind is refused."""
    from dpflow.nodes.base import NODE_KINDS, Node

    assert NODE_KINDS["Mean"] is N.Mean and len(NODE_KINDS) == 69

    class Mutant(N.Mean):
        kind: ClassVar[str] = "Mean"

    assert NODE_KINDS["Mean"] is N.Mean
    with pytest.raises(TypeError, match="defined twice"):
        type("Clash", (Node,), {"kind": "Mean", "__module__": "dpflow.fake", "__qualname__": "Clash"})
    assert NODE_KINDS["Mean"] is N.Mean
