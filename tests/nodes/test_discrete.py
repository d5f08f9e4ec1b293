"""Discrete distributions: neighbouring-datasets tests of the new queries (random and adversarial
neighbours), the exact exponential mechanism over dyadic intervals against brute force, the stability
histogram's thresholds, MERR's ledger and accuracy, the histograms and the error metrics."""

from __future__ import annotations

import math
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import attrs
import numpy as np
import pytest
from conftest import ZeroNoise, bound_value, run_zero

import dpflow as dp
from dpflow import nodes as N
from dpflow.errors import BudgetError, DomainError, PlanTypeError, UnboundedSensitivityError
from dpflow.estimators.discrete import (
    cdf_at,
    histogram_cdf,
    k_piece_histogram,
    kolmogorov_distance,
    l1_distance,
    laplace_histogram,
    merr,
    t_histogram,
)
from dpflow.interpreter.noise import SeededNoise
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.nodes.dyadic import DyadicTable, _groups
from dpflow.nodes.ordinal import ordinal_values, uniform_cdf
from dpflow.nodes.types import StatT
from dpflow.planner.certify import certify

RNG = np.random.default_rng(20261122)


class _NumpyCtx:
    """The one thing DyadicCounts.evaluate asks of its context: the backend."""

    backend = NumpyBackend()


def neighbours(x: np.ndarray, N_: int, rng: np.random.Generator, count: int = 30) -> list[np.ndarray]:
    """Replace-one neighbours of an ordinal column: random values, far outliers, NaN/inf, the two ends
    of the domain (the clamping boundary) and values just outside it."""
    if N_ > 2**53:  # float data cannot hold such values exactly: int64 neighbours with integer extremes
        ints = [-(2**63), 2**63 - 1, -1, 0, N_ - 1, N_, N_ // 2, N_ // 2 - 1]
        out = []
        for k in range(count):
            y = np.asarray(x, dtype=np.int64).copy()
            y[int(rng.integers(len(y)))] = ints[k] if k < len(ints) else int(rng.integers(0, N_))
            out.append(y)
        return out
    specials = [-1e30, 1e30, np.nan, np.inf, -np.inf, -1.0, 0.0, N_ - 1, N_, float(2**63), N_ - 0.5]
    out = []
    for k in range(count):
        y = x.astype(float).copy()
        i = int(rng.integers(len(y)))
        y[i] = specials[k] if k < len(specials) else float(rng.integers(0, N_))
        out.append(y)
    return out


def _stat(cert: Any, node_id: str) -> StatT:
    t = cert.space.types[node_id]
    assert isinstance(t, StatT)
    return t


def _assert_within(a: np.ndarray, b: np.ndarray, st: StatT, env: dict[str, float] | None = None) -> None:
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    for norm, bound in ((1, st.l1), (2, st.l2), (np.inf, st.linf)):
        assert bound is not None
        assert np.linalg.norm(d.ravel(), norm) <= bound_value(bound, env) * (1 + 1e-12) + 1e-12


@pytest.mark.parametrize("normalize", [False, True])
def test_ordinal_counts_neighbours(normalize: bool) -> None:
    N_ = 2**62
    edges = [0, 5, 2**40, 2**61, N_]
    b = dp.PlanBuilder(budget=dp.PureDP(1))
    X = b.source("X", dp.Ordinal(N=N_), n=20)
    q = N.OrdinalCounts(edges=edges, normalize=normalize)(X)
    cert = certify(b.build(h=N.LaplaceMech()(q)))
    x = np.concatenate([RNG.integers(0, N_, 16), [0, 4, 5, N_ - 1]])
    base = run_zero(cert, {"X": x})["h"]
    assert base.sum() == (1.0 if normalize else 20.0)
    for y in neighbours(x, N_, RNG):
        _assert_within(run_zero(cert, {"X": y})["h"], base, _stat(cert, q.id))


def test_ordinal_values_clamp_policy() -> None:
    v = ordinal_values(np.array([-(2**63), 2**62 - 1, 5]), 2**62)
    assert v.tolist() == [0, 2**62 - 1, 5]
    assert ordinal_values(np.array([np.nan, 1e300, -np.inf, 2.5]), 10).tolist() == [0, 9, 0, 2]


def test_bin_counts_and_stability_histogram_neighbours() -> None:
    for relation, n in (("replace", 12), ("add_remove", None)):
        b = dp.PlanBuilder(budget=dp.ApproxZCDP(1, 1e-6), neighbors=relation)
        X = b.source("X", dp.Reals(), n=n)
        q = N.BinCounts(width=0.5, shift=0.1)(X)
        cert = certify(b.build(h=N.StabilityHistogram(delta=1e-7)(q)))
        st = _stat(cert, q.id)
        x = RNG.normal(size=12)
        tb = N.BinCounts(width=0.5, shift=0.1)

        def dense(v: np.ndarray, tb: Any = tb) -> dict[int, float]:
            sc = tb.evaluate([v.reshape(-1, 1)], SimpleNamespace(backend=NumpyBackend()))  # type: ignore[arg-type]
            return dict(zip(sc.keys.tolist(), sc.counts.tolist(), strict=True))

        specials = [1e300, -1e300, np.nan, np.inf, -np.inf, 0.1, 0.6, 2.0**62, -(2.0**62)]
        cases = []
        for k in range(30):
            if relation == "add_remove":
                cases.append(np.delete(x, int(RNG.integers(12))))
                cases.append(np.append(x, specials[k % len(specials)]))
                continue
            y = x.copy()
            y[int(RNG.integers(12))] = specials[k] if k < len(specials) else RNG.normal() * 10
            cases.append(y)
        for y in cases:
            a, c = dense(x), dense(y)
            diff = np.array([a.get(k, 0.0) - c.get(k, 0.0) for k in set(a) | set(c)])
            assert st.l1 is not None and st.linf is not None
            assert np.abs(diff).sum() <= st.l1.coef and np.abs(diff).max() <= st.linf.coef


@pytest.mark.parametrize("relation", ["replace", "add_remove"])
def test_stability_histogram_threshold_meets_delta(relation: str) -> None:
    """A bin of count 1 (the only non-eps-indistinguishable event) is released with probability at most
    delta / (number of such bins): two under replace-one, one under add/remove."""
    node = N.StabilityHistogram(delta=1e-6)
    l1, bins = (2.0, 2) if relation == "replace" else (1.0, 1)
    for eps in (0.1, 1.0, 3.0):
        b, t = node.scale_threshold(l1, eps)
        assert b >= l1 / eps
        assert 0.5 * math.exp(-(t - 1.0) / b) <= 1e-6 / bins * (1 + 1e-12)


def test_stability_histogram_costs_and_release() -> None:
    b = dp.PlanBuilder(budget=dp.ApproxZCDP(0.5, 1e-5))
    X = b.source("X", dp.Ordinal(N=1000), n=600)
    plan = b.build(h=N.StabilityHistogram(delta=1e-6)(N.BinCounts(width=1.0)(X)))
    ledger = plan.check()
    assert Fraction_of(ledger.totals[0].delta0) == 1e-6
    assert float(Fraction_of(ledger.totals[0].rho)) <= 0.5
    x = np.concatenate([np.full(500, 7), np.arange(100) + 100])  # one heavy bin and 100 singletons
    keys, counts = plan.run({"X": x}, noise=SeededNoise(3)).released["h"]
    assert keys.tolist() == [7] and abs(counts[0] - 500) < 50
    assert N.stability.stable_mode((keys, counts)) == 7
    empty = plan.run({"X": np.arange(600)}, noise=SeededNoise(3)).released["h"]
    assert N.stability.stable_mode(empty) is None  # "not found" is a released value


def Fraction_of(s: str) -> float:
    from fractions import Fraction

    return float(Fraction(s))


def test_stability_histogram_refusals() -> None:
    for budget, err in ((dp.PureDP(1), PlanTypeError), (dp.ZCDP(1), BudgetError)):
        b = dp.PlanBuilder(budget=budget)
        X = b.source("X", dp.Reals(), n=10)
        with pytest.raises(err):
            b.build(h=N.StabilityHistogram(delta=1e-6)(N.BinCounts(width=1.0)(X))).check()
    with pytest.raises(ValueError):
        N.StabilityHistogram(delta=0)


def test_dyadic_counts_neighbours() -> None:
    for N_ in (64, 1000, 2**62):
        b = dp.PlanBuilder(budget=dp.PureDP(1))
        X = b.source("X", dp.Ordinal(N=N_), n=40)
        q = N.DyadicCounts(N=N_)(X)
        cert = certify(b.build(j=N.DyadicExpMech()(q)))
        st = _stat(cert, q.id)
        node = N.DyadicCounts(N=N_)
        src = cert.space.records[X.id].node
        x = np.concatenate([RNG.integers(0, N_, 36), [0, 0, N_ - 1, N_ // 2]])
        L = node.levels()
        probe = [np.unique(np.concatenate([v >> j for v in (x, np.array([0, N_ - 1]))])) for j in range(L)]

        def counts(v: np.ndarray, probe: list[np.ndarray] = probe, node: Any = node, src: Any = src,
                   L: int = L) -> np.ndarray:
            t = node.evaluate([src.prepare(v, "X")], _NumpyCtx())  # type: ignore[arg-type]
            return np.concatenate([t.counts_at(j, probe[j]) for j in range(L)])

        base = counts(x)
        for y in neighbours(x, N_, RNG):
            yy = ordinal_values(y.reshape(-1, 1), N_)
            pr = [np.unique(np.concatenate([probe[j], yy >> j])) for j in range(L)]
            a = counts(x, pr)
            c = counts(y, pr)
            _assert_within(a, c, st)
        assert base.sum() == 40 * L


def test_dyadic_table_matches_brute_force() -> None:
    for N_ in (2, 5, 64, 1000):
        for n in (1, 3, 50, 300):
            x = RNG.integers(0, N_, n)
            t = DyadicTable.build(x, N_)
            for j in range(t.L):
                full = np.bincount(x >> j, minlength=2 ** (t.L - j))
                assert (t.counts_at(j, np.arange(len(full))) == full).all()
                multi = np.flatnonzero(full >= 2)
                assert (t.levels[j].q == multi).all() and (t.levels[j].count == full[multi]).all()


def _brute_probs(x: np.ndarray, N_: int, P: np.ndarray, F: np.ndarray, scale: float) -> dict[tuple[int, int], float]:
    L = (N_ - 1).bit_length()
    top = 2**L - 1
    PP, FF = (np.append(P, top), np.append(F, F[-1])) if P[-1] < top else (P, F)
    logits = {}
    for j in range(L):
        for q in range(2 ** (L - j)):
            a, b = q << j, ((q + 1) << j) - 1
            A = cdf_at((PP, FF), np.array([b]))[0] - cdf_at((PP, FF), np.array([a - 1]))[0]
            c = np.count_nonzero((x >= a) & (x <= b))
            logits[(j, q)] = scale * abs(len(x) * A - c)
    m = max(logits.values())
    w = {k: math.exp(v - m) for k, v in logits.items()}
    z = sum(w.values())
    return {k: v / z for k, v in w.items()}


@pytest.mark.parametrize("knots", [None, ((-1, 5, 9, 15), (0.0, 0.7, 0.75, 1.0))])
def test_dyadic_expmech_matches_exact_probabilities(knots: Any) -> None:
    """The grouped Gumbel-max sampler draws from the exact exponential-mechanism distribution."""
    N_ = 13  # padded to 16: exercises the flat tail beyond N-1
    x = np.array([0, 0, 1, 2, 2, 2, 7, 8, 12, 12])
    P, F = uniform_cdf(N_) if knots is None else (np.array(knots[0]), np.array(knots[1]))
    if knots is not None:
        P[-1] = N_ - 1
    scale = 1.0
    exact = _brute_probs(x, N_, P, F, scale)
    table = DyadicTable.build(x, N_)
    noise = SeededNoise(11)
    draws = 2500
    seen: dict[tuple[int, int], int] = {}
    for _ in range(draws):
        k = _groups(table, P, F, scale, noise)
        seen[k] = seen.get(k, 0) + 1
    tv = 0.5 * sum(abs(seen.get(k, 0) / draws - p) for k, p in exact.items())
    assert set(seen) <= set(exact)
    # the empirical TV of 2500 exact draws is ~0.04 here; a sampler off by 20% in the scale gives ~0.09-0.10,
    # a wrong group weight (size) moves whole groups
    assert tv < 0.07


def test_dyadic_expmech_zero_noise_is_the_argmax() -> None:
    x = np.array([3] * 50 + [9] * 2)
    table = DyadicTable.build(x, 16)
    j, q = _groups(table, *uniform_cdf(16), 100.0, ZeroNoise())
    assert (j, q) == (0, 3)


def test_interval_counts_neighbours() -> None:
    N_ = 2**62
    b = dp.PlanBuilder(budget=dp.PureDP(1))
    X = b.source("X", dp.Ordinal(N=N_), n=30)
    J = b.public([0, 1])
    q = N.IntervalCounts(interval=J)(X)
    base_plan = b.build(w=N.LaplaceMech()(q))
    cert = certify(base_plan)
    x = RNG.integers(0, N_, 30)
    for y in neighbours(x, N_, RNG):
        _assert_within(run_zero(cert, {"X": y})["w"], run_zero(cert, {"X": x})["w"], _stat(cert, q.id))


def _interval_sample(N_: int, rng: np.random.Generator) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Ordinal rows with ties, the domain's ends and values outside it (clamped), and intervals whose ends sit on
    sample values, next to them, at the domain's ends, reversed (b < a) or outside [0, N).  Above 2^53 the sample
    values are multiples of 2^12, which a float holds."""
    v = rng.integers(0, N_, 40) if N_ < 2**53 else rng.integers(0, N_ >> 12, 40) << 12
    x = np.concatenate([v, v[:10], [0, 0, N_ - 1, N_ - 1, -5, N_ + 3]]).astype(np.int64)
    u = np.unique(np.clip(x, 0, N_ - 1))
    ends = [int(t) for t in (0, 1, N_ - 2, N_ - 1, -3, N_ + 7, *u[:6], *(u[:6] - 1), *(u[:6] + 1))]
    return x, [(a, b) for a in ends[::2] for b in ends[1::2]]


@pytest.mark.parametrize("N_", [2, 64, 10**18, 2**62])
def test_interval_counts_from_the_table_equal_a_pass_over_rows(N_: int) -> None:
    """IntervalCounts(J)(X, DyadicCounts(N)(X)) counts by binary search in the table's sorted sample what the pass
    over the rows counts (brute force here): ties, values on the ends, clamped values, reversed intervals."""
    rng = np.random.default_rng(N_ % 1000)
    x, intervals = _interval_sample(N_, rng)
    clamped = np.clip(x, 0, N_ - 1)
    for a, b_ in intervals[:: max(1, len(intervals) // 40)]:
        b = dp.PlanBuilder(budget=dp.PureDP(1))
        X = b.source("X", dp.Ordinal(N=N_), n=len(x))
        J = b.public([a, b_])
        table = N.DyadicCounts(N=N_)(X)
        plan = b.build(rows=N.LaplaceMech()(N.IntervalCounts(interval=J, normalize=False)(X)),
                       table=N.LaplaceMech()(N.IntervalCounts(interval=J, normalize=False)(X, table)),
                       share=N.LaplaceMech()(N.IntervalCounts(interval=J)(X, table)))
        got = run_zero(certify(plan), {"X": x})
        lo, hi = (int(float(t)) for t in (a, b_))  # a public constant is held as a float
        below = int(np.count_nonzero(clamped < lo))
        want = [below, max(int(np.count_nonzero(clamped <= hi)) - below, 0)]
        assert got["table"].tolist() == got["rows"].tolist() == want, (a, b_)
        assert got["share"].tolist() == [w / len(x) for w in want]


def _merr_by_passes(N_: int, n: int, budget: Any, T: int) -> dp.Plan:
    """MERR as it was before its rounds counted in the table: each round's weights from a pass over the rows."""
    from dpflow.estimators.discrete import monotone_cdf

    b = dp.PlanBuilder(budget=budget, neighbors="replace", name="merr")
    X = b.source("X", dp.Ordinal(N=N_), n=n)
    table = N.DyadicCounts(N=N_)(X)
    cdf = None
    for _ in range(T):
        J = N.DyadicExpMech(cdf=cdf)(table)
        w = N.LaplaceMech()(N.IntervalCounts(interval=J)(X))
        cdf = N.AddKnots(N=N_)(J, w) if cdf is None else N.AddKnots(N=N_)(cdf, J, w)
    assert cdf is not None
    return b.build(cdf=N.Apply(fn=monotone_cdf)(cdf))


@pytest.mark.parametrize("exact", [False, True])
def test_merr_release_is_that_of_a_pass_per_round(exact: bool) -> None:
    """merr (weights counted in the sorted sample) releases exactly what the pass-per-round plan releases under the
    same seeds, on samples with ties and clamped values (continuous and exact noise)."""
    N_, n, T = 10**18, 600, 6
    for seed in range(4):
        rng = np.random.default_rng(seed)
        x = np.concatenate([rng.integers(0, N_ // 10**6, n // 2) * 10**6, rng.integers(4 * 10**17, 5 * 10**17, n // 4),
                            np.full(n // 4 - 2, 7 * 10**17), [-1, N_ + 1]]).astype(np.int64)
        got = merr(N=N_, n=n, budget=dp.PureDP(20), T=T).run({"X": x}, noise=SeededNoise(seed, exact=exact))
        want = _merr_by_passes(N_, n, dp.PureDP(20), T).run({"X": x}, noise=SeededNoise(seed, exact=exact))
        (P, F), (Q, G) = got.released["cdf"], want.released["cdf"]
        assert len(P) > 2 and P.tolist() == Q.tolist() and F.tolist() == G.tolist()


def test_dyadic_expmech_is_refused_at_planning_on_counts_that_are_not_the_dyadic_table() -> None:
    """OrdinalCounts has a constant linf bound too, but no dyadic table to score: refused at planning (it failed
    at run time, after the data was read, before DyadicT was required)."""
    b = dp.PlanBuilder(budget=dp.PureDP(1))
    X = b.source("X", dp.Ordinal(N=64), n=10)
    J = N.DyadicExpMech()(N.OrdinalCounts(edges=[0, 8, 64])(X))
    with pytest.raises(UnboundedSensitivityError, match="DyadicCounts") as e:
        b.build(j=J).check()
    assert e.value.node == J.id


def test_interval_counts_reads_only_the_dyadic_table_of_its_rows() -> None:
    """A second input that is not DyadicCounts of rows like the first (another source, another statistic, two
    tables) is refused at planning, naming the node."""
    for other in ("Y", "OrdinalCounts"):
        b = dp.PlanBuilder(budget=dp.PureDP(1))
        X = b.source("X", dp.Ordinal(N=64), n=10)
        Y = b.source("Y", dp.Ordinal(N=64), n=10)
        stat = N.DyadicCounts(N=64)(Y) if other == "Y" else N.OrdinalCounts(edges=[0, 8, 64])(X)
        q = N.IntervalCounts(interval=b.public([2, 5]))(X, stat)
        with pytest.raises(PlanTypeError, match="DyadicCounts") as e:
            b.build(w=N.LaplaceMech()(q)).check()
        assert e.value.node == q.id
    b = dp.PlanBuilder(budget=dp.PureDP(1))
    X = b.source("X", dp.Ordinal(N=64), n=10)
    J = b.public([2, 5])
    table = N.DyadicCounts(N=64)(X)
    q = N.IntervalCounts(interval=J)(X, table)
    plan = b.build(w=N.LaplaceMech()(q))
    recs = tuple(attrs.evolve(r, inputs=(X.id, table.id, table.id)) if r.id == q.id else r for r in plan.records)
    with pytest.raises(PlanTypeError, match="DyadicCounts"):
        attrs.evolve(plan, records=recs).check()


def test_merr_ledger_per_iteration_costs() -> None:
    T = 5
    ledger = merr(N=10**18, n=1000, budget=dp.PureDP(1), T=T).check()
    sel = [e for e in ledger.entries if e.kind == "DyadicExpMech"]
    upd = [e for e in ledger.entries if e.kind == "LaplaceMech"]
    assert len(sel) == len(upd) == T
    for e in sel + upd:
        assert e.cost.startswith("epsilon=0.1 ")
        assert "sequential on source X" in e.rule and e.reference
    assert "2*1" not in upd[0].sensitivity and "0.002" in upd[0].sensitivity  # l1 = 2/n (replace-one, U1)
    assert ledger.totals[0].pure_eps == Fraction(1)
    assert any("sequential composition" in c for c in ledger.composition)


def test_merr_refusals() -> None:
    with pytest.raises(ValueError):
        merr(N=2**62 + 1, n=10, budget=dp.PureDP(1))
    with pytest.raises(ValueError):
        merr(N=100, n=10, budget=dp.PureDP(1), T=0)
    b = dp.PlanBuilder(budget=dp.PureDP(1), neighbors="add_remove")
    X = b.source("X", dp.Ordinal(N=100))
    with pytest.raises(DomainError):
        b.build(j=N.DyadicExpMech()(N.DyadicCounts(N=100)(X))).check()


def test_merr_exact_int64_extremes_and_clamping() -> None:
    N_ = 2**62
    x = np.array([0, N_ - 1, 2**61, -(2**63), 2**63 - 1] * 40, dtype=np.int64)  # outside: clamped to the ends
    P, F = merr(N=N_, n=len(x), budget=dp.PureDP(5), T=4).run({"X": x}, noise=SeededNoise(0)).released["cdf"]
    assert P.dtype == np.int64 and int(P[0]) == -1 and int(P[-1]) == N_ - 1
    assert np.all(np.diff(P) > 0)


def _mixture_sample(N_: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, Any]:
    from scipy.special import ndtr

    u = np.where(rng.random(n) < 0.6, rng.normal(0.3, 0.05, n), rng.normal(0.7, 0.1, n)).clip(0, 1 - 1e-12)
    x = (u * N_).astype(np.int64)

    def F(t: np.ndarray) -> np.ndarray:
        v = np.clip((np.asarray(t, dtype=float) + 1) / N_, 0, 1)
        g = 0.6 * ndtr((v - 0.3) / 0.05) + 0.4 * ndtr((v - 0.7) / 0.1)
        lo = 0.6 * ndtr(-6.0) + 0.4 * ndtr(-7.0)
        hi = 0.6 * ndtr(14.0) + 0.4 * ndtr(3.0)
        return np.clip((g - lo) / (hi - lo), 0, 1)  # type: ignore[no-any-return]

    return x, F


def test_merr_accuracy_against_non_private_baseline() -> None:
    N_, n, T, k = 10**8, 20_000, 8, 10
    rng = np.random.default_rng(5)
    x, F = _mixture_sample(N_, n, rng)
    cdf = merr(N=N_, n=n, budget=dp.PureDP(1), T=T).run({"X": x}, noise=SeededNoise(5)).released["cdf"]
    emp_v = np.unique(np.concatenate(([-1], x, [N_ - 1])))
    emp = (emp_v, np.searchsorted(np.sort(x), emp_v, side="right") / n)
    base_k = kolmogorov_distance(emp, F)  # sampling error of the data itself
    # Each update adds two knots with Laplace(2T/(n eps)) weights; T rounds of the exponential
    # mechanism leave the worst dyadic interval within (2/eps_t) ln(2^(L+1)/beta) counts.
    L = (N_ - 1).bit_length()
    eps_t = 1.0 / (2 * T)
    sel = (2 / eps_t) * math.log(2 ** (L + 1) / 0.01) / n
    assert kolmogorov_distance(cdf, F) <= base_k + 2 * sel
    hist = k_piece_histogram(cdf, k)
    assert len(hist[0]) - 1 <= k + 1
    assert l1_distance(hist, F) <= l1_distance(k_piece_histogram(emp, k), F) + 0.25


def test_laplace_histogram_accuracy_and_simplex() -> None:
    N_, n, eps = 32, 20_000, 1.0
    p = np.arange(1, N_ + 1) / (N_ * (N_ + 1) / 2)
    x = np.random.default_rng(1).choice(N_, size=n, p=p)
    pmf = laplace_histogram(N_, n, dp.PureDP(eps)).run({"X": x}, noise=SeededNoise(1)).released["pmf"]
    assert abs(pmf.sum() - 1) < 1e-9 and pmf.min() >= 0
    bound = np.sum(np.sqrt(p * (1 - p) / n)) + N_ * 2 / (eps * n)  # E||p~ - p||_1 (sampling + Laplace)
    assert np.abs(pmf - p).sum() <= 2 * bound
    with pytest.raises(ValueError):
        laplace_histogram(2**23, n, dp.PureDP(eps))


def test_t_histogram_exact_edges() -> None:
    N_ = 2**62
    edges = [0, 2**61 - 1, 2**61, N_]
    x = np.array([2**61 - 2] * 300 + [2**61 - 1] * 300 + [N_ - 1] * 400)
    masses = t_histogram(edges, 1000, dp.PureDP(1)).run({"X": x}, noise=SeededNoise(2)).released["masses"]
    assert np.allclose(masses, [0.3, 0.3, 0.4], atol=0.02) and abs(masses.sum() - 1) < 1e-12
    P, _ = histogram_cdf(edges, masses)
    assert int(P[1]) == 2**61 - 2 and int(P[-1]) == N_ - 1
    with pytest.raises(ValueError):
        t_histogram([0, 5, 5, 10], 10, dp.PureDP(1))
    with pytest.raises(ValueError):
        t_histogram([1, 5], 10, dp.PureDP(1))


def test_metrics_exact_on_small_domains() -> None:
    a = histogram_cdf([0, 2, 4], [0.5, 0.5])
    b = histogram_cdf([0, 1, 4], [0.5, 0.5])
    # pmf a = (.25,.25,.25,.25), b = (.5,1/6,1/6,1/6)
    assert l1_distance(a, b) == pytest.approx(0.25 + 3 * (0.25 - 1 / 6))
    assert kolmogorov_distance(a, b) == pytest.approx(0.25)
    assert kolmogorov_distance(a, lambda t: cdf_at(b, t)) == pytest.approx(0.25)


def test_k_piece_histogram_keeps_mass_and_pieces() -> None:
    P = np.array([-1, 9, 19, 29, 39, 99, 199])
    F = np.array([0.0, 0.1, 0.05, 0.5, 0.7, 0.9, 1.0])  # one negative piece: clipped to 0
    for k in (1, 2, 3, 5):
        Q, G = k_piece_histogram((P, F), k)
        assert len(Q) - 1 <= k + 1 and int(Q[0]) == -1 and int(Q[-1]) == 199
        assert G[-1] == pytest.approx(1.0) and np.all(np.diff(G) >= 0)


def test_merr_scores_are_refused_on_a_value_piece() -> None:
    b = dp.PlanBuilder(budget=dp.PureDP(1.0))
    X = b.source("X", dp.Ordinal(N=16), n=100)
    inside, _ = N.split(X, N.PartitionByBall(center=[0.0], radius=8.0))
    with pytest.raises(dp.DomainError, match="row count"):
        b.build(j=N.DyadicExpMech()(N.DyadicCounts(N=16)(inside))).check()
