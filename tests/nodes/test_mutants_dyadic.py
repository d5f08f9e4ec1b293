"""Mutation-testing pins of ``dpflow/nodes/dyadic.py`` (first run 2026-11-29: 198 survivors of 936).

The grouped exponential mechanism over all dyadic intervals, exhaustively on a small domain with an irregular
released CDF: every (group, uniform member) pair names a distinct dyadic interval, all of them are named, and
each named interval's score ``|n A(J) - c(J)|`` is its group's (the public expected count from the CDF, the
count from the data), on both the exact and the continuous path (log-weights ``scale |a - c| + log size``).
``DyadicCounts``' sensitivities in both neighbour relations and its level count, and ``DyadicExpMech``'s
epsilon / (2 Delta) on both paths, its output and its refusals.  Before these pins an exponential mechanism
at 3/2 the certified epsilon, a count sensitivity of 3L, and miscounted groups passed the fast suite (only
the multi-second chi-square tests could see them).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from conftest import EvalCtx

import dpflow as dp
from dpflow.domains import RowCount, Sym
from dpflow.errors import DomainError, PlanError, PlanTypeError, PostProcessingError, UnboundedSensitivityError
from dpflow.handles import Ref
from dpflow.nodes import dyadic
from dpflow.nodes.dyadic import DyadicCounts, DyadicExpMech, DyadicTable, _groups
from dpflow.nodes.ordinal import knots_cdf_at
from dpflow.nodes.types import Allocation, DyadicT, ReleasedT, RowsT, Size, StatT
from dpflow.privacy import Cost

X = np.array([0, 0, 3, 5, 5, 5, 9, 12, 13, 13, 15, 15, 20, 21, 21, 30, 31], dtype=np.int64)  # {13}, {15}: one group
SPARSE = np.array([1, 6, 17, 30], dtype=np.int64)  # no level-0 or level-1 interval holds two points
P = np.array([-1, 4, 11, 20, 28], dtype=np.int64)  # the last knot below N - 1: _groups extends it flat
F = np.array([0.0, 0.25, 0.5, 0.625, 1.0])
N_ = 32


class _Pick:
    """Steers the sampler: the group ``g`` and the member ``t``; records what it was asked."""

    def __init__(self, exact: bool) -> None:
        self.exact, self.g, self.t = exact, 0, 0
        self.seen: list[Any] = []
        self.sizes: list[int] = []

    def uniform_words(self, n: int) -> np.ndarray:
        return np.zeros(n, dtype=np.uint64)

    def uniform_int(self, size: int) -> int:
        self.sizes.append(size)
        assert 0 <= self.t < size
        return self.t


def _intervals(exact: bool, monkeypatch: pytest.MonkeyPatch, x: np.ndarray = X, P: np.ndarray = P,
               F: np.ndarray = F) -> tuple[list[tuple[int, int, float, int]], Any]:
    """Every (group, member): the interval it names, with its group's (a, c)."""
    pick = _Pick(exact)

    def choose(scores: Any, mult: np.ndarray, words: Any) -> tuple[int, int]:
        pick.seen.append((scores.a.copy(), scores.c.copy(), mult.copy(), scores.beta, scores.sign))
        return pick.g, 0

    def rnm(lw: np.ndarray, noise: Any) -> int:
        pick.seen.append(lw.copy())
        return pick.g

    monkeypatch.setattr(dyadic, "exact_choice", choose)
    monkeypatch.setattr(dyadic, "report_noisy_max", rnm)
    table = DyadicTable.build(x, N_)
    beta = Fraction(3, 7) if exact else None
    _groups(table, P, F, 0.375, pick, beta)  # type: ignore[arg-type]
    if exact:
        A, C, S, b, sign = pick.seen[0]
        assert (b, sign) == (Fraction(3, 7), 1)
    else:
        pick.exact = True
        _groups(table, P, F, 0.375, pick, Fraction(3, 7))  # type: ignore[arg-type]
        A, C, S, _, _ = pick.seen[1]
        assert np.array_equal(pick.seen[0], 0.375 * np.abs(A - C) + np.log(S.astype(float)))
        pick.exact = False
    out = []
    for g in range(len(S)):
        for t in range(int(S[g])):
            pick.g, pick.t, pick.sizes = g, t, []
            j, q = _groups(table, P, F, 0.375, pick, beta)  # type: ignore[arg-type]
            assert pick.sizes in ([], [int(S[g])])  # a one-member group may skip the uniform draw
            out.append((j, q, float(A[g]), int(C[g])))
    return out, S


CDFS = {"short": (P, F), "full": (np.array([-1, 9, 31]), np.array([0.0, 0.5, 1.0]))}


@pytest.mark.parametrize(("x", "cdf"), [(X, "short"), (SPARSE, "short"), (X, "full")],
                         ids=["ties", "sparse", "cdf to the end"])
@pytest.mark.parametrize("exact", [True, False])
def test_every_group_member_is_one_dyadic_interval_with_the_group_score(exact: bool, x: np.ndarray, cdf: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Ties in one piece make a group of several multi-point intervals (a uniform member among them); a released
    CDF whose last knot is the domain's end is not extended."""
    P, F = CDFS[cdf]
    out, S = _intervals(exact, monkeypatch, x, P, F)
    L = 5
    assert int(S.sum()) == len(out) == 2 ** (L + 1) - 2  # levels j < L: the whole domain is not a candidate
    assert len({(j, q) for j, q, _, _ in out}) == len(out)  # distinct
    Pt, Ft = (np.append(P, 31), np.append(F, 1.0)) if P[-1] < 31 else (P, F)
    n = len(x)
    for j, q, a, c in out:
        s, e = q << j, ((q + 1) << j) - 1
        assert 0 <= s <= e <= 31
        assert c == int(((x >= s) & (x <= e)).sum()), (j, q)
        want = n * float(knots_cdf_at(Pt, Ft, np.array([e]))[0] - knots_cdf_at(Pt, Ft, np.array([s - 1]))[0])
        assert a == pytest.approx(want, rel=1e-12, abs=1e-12), (j, q)


def test_no_finite_score_gives_the_first_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dyadic, "exact_choice", lambda s, m, w: (None, 0))
    assert _groups(DyadicTable.build(X, N_), P, F, 1.0, _Pick(True), Fraction(1)) == (0, 0)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the types


class _Infer:
    node_id = "J"

    def __init__(self, relation: str = "replace") -> None:
        self.relation = relation

    def type_of(self, ref: Any) -> Any:
        return ReleasedT((2, 5))

    def row_count(self) -> RowCount:
        return RowCount("J")


class _NotReleased(_Infer):
    def type_of(self, ref: Any) -> Any:
        return StatT((), "X", None, None, None)


def _rows(changes: str, d: int = 1, public: bool = True, stability: int = 1) -> RowsT:
    return RowsT(dp.Vectors(d=d), "X", Size(public, 100 if public else None, RowCount("X")), stability,
                 frozenset({changes}))


@pytest.mark.parametrize(("N", "L"), [(2, 1), (32, 5), (33, 6), (2**62, 62)])
def test_dyadic_counts_sensitivities(N: int, L: int) -> None:
    """One record lies in one interval per level: replace-one moves two counts per level by one: linf 1, l1 2L,
    l2 sqrt(2L), times the stability (add/remove is refused: the scores use the public n)."""
    node = DyadicCounts(N=N)
    assert node.levels() == L
    stat = node.infer([_rows("replace")], _Infer()).out  # type: ignore[arg-type]
    assert stat == DyadicT((2 ** (L + 1) - 2,), "X", Sym.const(2.0 * L), Sym.const(math.sqrt(2.0 * L)), Sym.const(1.0))
    stat = node.infer([_rows("replace", stability=3)], _Infer()).out  # type: ignore[arg-type]
    assert (stat.l1, stat.l2, stat.linf) == (Sym.const(6.0 * L), Sym.const(3 * math.sqrt(2.0 * L)), Sym.const(3.0))


def test_dyadic_counts_derivation() -> None:
    assert DyadicCounts(N=32).infer([_rows("replace", stability=3)], _Infer()).derivation == (  # type: ignore[arg-type]
        "DyadicCounts over [32], L=5 levels, replace x stability 3: linf 3, l1 30")


def test_dyadic_counts_refusals() -> None:
    with pytest.raises(DomainError) as e:
        DyadicCounts(N=8).infer([_rows("replace", d=2)], _Infer())  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem) == ("J", "DyadicCounts needs one-dimensional rows, got d=2")
    with pytest.raises(PlanError) as p:
        DyadicCounts(N=8).infer([_rows("replace", public=False)], _Infer())  # type: ignore[arg-type]
    assert p.value.problem == ("DyadicCounts (the MERR scores use n) needs a public row count under replace-one "
                               "neighbours; here the neighbours are replace and the count is private")
    with pytest.raises(PlanTypeError) as t:
        DyadicCounts(N=8).infer([StatT((3,), "X", None, None, None)], _Infer())  # type: ignore[arg-type]
    assert t.value.fix == "pass sensitive rows"
    with pytest.raises(PlanTypeError) as t:
        DyadicExpMech().infer([_rows("replace")], _Infer())  # type: ignore[arg-type]
    assert t.value.fix == "pass DyadicCounts"
    with pytest.raises(PostProcessingError) as pp:
        DyadicExpMech(cdf=Ref("c")).infer([StatT((3,), "X", None, None, Sym.const(1.0))], _NotReleased())  # type: ignore[arg-type]
    assert pp.value.problem == "parameter 'cdf' refers to c, which is not released"
    with pytest.raises(ValueError, match=r"^DyadicCounts needs 2 <= N <= 2\*\*62, got N=1$"):
        DyadicCounts(N=1)


def test_dyadic_exp_mech_noise_text() -> None:
    stat = StatT((63,), "X", None, None, Sym.const(1.0))
    tail = ": P(J) ~ exp(eps q(J) / (2*1)); exact sources: sampled exactly"
    assert DyadicExpMech().noise_text(stat, Fraction(1, 2), "pure") == "exponential mechanism, eps=0.5" + tail
    assert DyadicExpMech().noise_text(stat, Fraction(1, 2), "zcdp") == "exponential mechanism, eps=2" + tail


def test_dyadic_exp_mech_refusals() -> None:
    stat = DyadicT((63,), "X", Sym.const(10.0), Sym.const(3.0), Sym.const(1.0))
    with pytest.raises(DomainError) as e:
        DyadicExpMech().infer([stat], _Infer("add_remove"))  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem, e.value.fix) == (
        "J", "the score n A(J) - c(J) needs the public n of replace-one neighbours", "declare neighbors='replace'")
    assert DyadicExpMech(cdf=Ref("c")).infer([stat], _Infer()).out == ReleasedT((2,))  # type: ignore[arg-type]
    for bad in (DyadicT((63,), "X", None, None, None), DyadicT((63,), "X", None, None, Sym.ref(RowCount("X"))),
                DyadicT((63, 2), "X", None, None, Sym.const(1.0)),
                StatT((63,), "X", Sym.const(10.0), Sym.const(3.0), Sym.const(1.0))):  # counts with no table
        with pytest.raises(UnboundedSensitivityError) as u:
            DyadicExpMech().check_input(bad, _Infer())  # type: ignore[arg-type]
        assert (u.value.node, u.value.problem, u.value.fix) == (
            "J", "the scores need DyadicCounts' table and its constant linf bound", "feed it DyadicCounts(N)(rows)")
    assert DyadicExpMech().check_input(stat, _Infer()) == "score sensitivity = linf of the counts = 1"  # type: ignore[arg-type]


@pytest.mark.parametrize("exact", [True, False])
def test_dyadic_exp_mech_scale_on_both_paths(exact: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """beta = eps / (2 Delta) exactly (exact sources), scale = eps / (2 Delta) (continuous), Delta the bound of
    linf (3 here); the interval [q 2^j, (q + 1) 2^j - 1] as int64; the released CDF read from its value."""
    seen: list[Any] = []

    def spy(table: Any, P_: Any, F_: Any, scale: float, noise: Any, beta: Any = None) -> tuple[int, int]:
        seen.append((scale, beta, P_.tolist(), F_.tolist()))
        return 2, 5

    monkeypatch.setattr(dyadic, "_groups", spy)
    ctx = EvalCtx(StatT((63,), "X", None, None, Sym.const(3.0)), 3.0, exact,
                  Allocation("pure", Fraction(6, 5), Cost.pure(Fraction(6, 5))),
                  values={Ref("c"): 0.0})
    ctx.value = lambda ref: (np.array([-1, 9, 31]), np.array([0.0, 0.5, 1.0]))  # type: ignore[attr-defined]
    out = DyadicExpMech(cdf=Ref("c")).evaluate([DyadicTable.build(X, N_)], ctx)  # type: ignore[arg-type]
    assert out.dtype == np.int64 and out.tolist() == [20, 23]
    scale, beta, P_, F_ = seen[0]
    assert scale == 1.2 / 6.0 and beta == (Fraction(1, 5) if exact else None)
    assert (P_, F_) == ([-1, 9, 31], [0.0, 0.5, 1.0]) and ctx.facts["epsilon"] == 1.2


# --------------------------------------------------------------------------- the table


def test_bit_length_is_exact_where_float64_rounds_up() -> None:
    v = np.array([0, 1, 2, 3, 2**53 - 1, 2**53, 2**53 + 1, 2**54 - 1, 2**54, 2**62 + 1, 2**63 - 1], dtype=np.int64)
    assert dyadic._bit_length(v).tolist() == [int(t).bit_length() for t in v]


def test_table_sorts_its_input_and_counts_its_levels() -> None:
    """Unsorted input of two or three values is sorted; L = ceil(log2 N), at least 1."""
    for raw in ([5, 3], [1, 5, 3]):
        t = DyadicTable.build(np.array(raw, dtype=np.int64), 8)
        assert t.x.tolist() == sorted(raw)
        assert t.counts_at(1, np.array([1, 2])).tolist() == [1, 1]
    assert DyadicTable.build(np.array([1]), 2).L == 1 and DyadicTable.build(np.array([1]), 33).L == 6
    assert DyadicTable.build(np.array([1]), 32).L == 5


@pytest.mark.parametrize("distinct", [1000, 70_000])
def test_level_keys_are_sorted_by_count_rank_then_position(distinct: int) -> None:
    """``keys = rank(count) << 32 | i`` sorted, ``values`` the distinct counts: with many equal counts (a
    stable sort is needed) and with more distinct counts than a 16-bit rank holds."""
    rng = np.random.default_rng(distinct)
    count = np.concatenate((np.arange(2, distinct + 2), rng.integers(2, distinct + 2, 100_000))).astype(np.int64)
    start = np.arange(count.size, dtype=np.int64)
    lev = dyadic.DyadicLevel.of(np.arange(count.size, dtype=np.int64) * 4, 1, start, count)
    values = np.unique(count)
    rank = np.searchsorted(values, count)
    assert lev.values.tolist() == values.tolist() and lev.values.dtype == np.int64
    assert np.array_equal(lev.keys, np.sort((rank.astype(np.int64) << 32) | start))
    assert lev.q.tolist() == (start * 2).tolist() and lev.cum.tolist() == [0, *np.cumsum(count).tolist()]


def test_an_empty_level() -> None:
    lev = dyadic.DyadicLevel.of(np.arange(4, dtype=np.int64), 0, np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert lev.values.size == lev.keys.size == 0 and lev.cum.tolist() == [0]
