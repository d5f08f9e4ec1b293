"""Mutation-testing pins of ``dpflow/nodes/quantile.py`` (first run 2026-11-29: 196 survivors of 721).

The exact-source quantile's lattice mechanism term by term against the rule written in exact rationals: the
lattice (step, first and last point, at subnormal and overflowing widths), the exact floor of a value onto it,
each gap's lattice points and first point, the exact log-weights ``-beta |k - q n|`` (the part of q n that
float64 does not hold included), the release ``(first_k + uniform) step`` and the words drawn.  The static
types: ``Magnitudes`` (box, row count and stability of each form) and ``OrderStatistics`` (the range's width
times the stability in every l_p, the rank sensitivity, the shape, no vector bound over a private count, the
released-upper rule), and the continuous log-weights with a rank sensitivity other than 1.  Before these pins
an exponential mechanism at twice the certified epsilon (the scores' sign -2), a lattice gap off by one point
and a dropped q n remainder all passed the fast suite (only the multi-second chi-square tests could see them).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from conftest import EvalCtx, InferCtx, ValueCtx

import dpflow as dp
from dpflow.domains import ReleasedScalar, RowCount, Sym
from dpflow.errors import DomainError, PlanTypeError, PostProcessingError, UnboundedSensitivityError
from dpflow.handles import Ref
from dpflow.nodes import quantile
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.quantile import (
    Magnitudes,
    OrderStatistics,
    Quantile,
    _lattice_below,
    _range_syms,
    lattice_groups,
    lattice_quantile,
    quantile_lattice,
    quantile_log_weights,
)
from dpflow.nodes.types import Allocation, Inferred, ReleasedT, RowsT, Size, StatT
from dpflow.privacy import Cost

TINY = 2.0**-1074


def _Infer(shape: tuple[int, ...] = ()) -> InferCtx:
    return InferCtx("q", default=shape)


def _rows(domain: dp.Vectors, n: int | None = 10, stability: int = 2) -> RowsT:
    return RowsT(domain, "X", Size(n is not None, n, RowCount("X")), stability, frozenset({"replace"}),
                 columns=tuple("abc"[: domain.d]))


# --------------------------------------------------------------------------- static types


def test_magnitudes_types() -> None:
    """Pooled coordinates: box [0, max |bound|], n d rows counted at this node, stability times d; row norms:
    box [0, the l2 norm's bound], the same rows; both drop the column names; no bound gives no box."""
    rows = _rows(dp.Vectors(d=3, box=(-2.0, 5.0)))
    out = Magnitudes().infer([rows], _Infer()).out  # type: ignore[arg-type]
    assert out == RowsT(dp.Vectors(d=1, box=(0.0, 5.0)), "X", Size(True, 30, RowCount("q")), 6,
                        frozenset({"replace"}), None)
    out = Magnitudes(of="rows").infer([rows], _Infer()).out  # type: ignore[arg-type]
    assert out == RowsT(dp.Vectors(d=1, box=(0.0, 5.0 * math.sqrt(3))), "X", rows.size, 2, frozenset({"replace"}),
                        None)
    private = _rows(dp.Vectors(d=3), n=None)
    out = Magnitudes().infer([private], _Infer()).out  # type: ignore[arg-type]
    assert out.domain == dp.Vectors(d=1) and out.size == Size(False, None, RowCount("q")) and out.stability == 6
    assert Magnitudes(of="rows").infer([private], _Infer()).out.domain == dp.Vectors(d=1)  # type: ignore[arg-type]


def test_the_derivations_and_refusals() -> None:
    rows = _rows(dp.Vectors(d=3, box=(-2.0, 5.0)))
    assert Magnitudes().infer([rows], _Infer()).derivation == "|x_ij| pooled over d=3 coordinates: stability x 3"  # type: ignore[arg-type]
    assert Magnitudes(of="rows").infer([rows], _Infer()).derivation == "row l2 norms of Vectors(d=3, box=[-2, 5])"  # type: ignore[arg-type]
    one = _rows(dp.Vectors(d=1), n=10, stability=2)
    assert OrderStatistics(lower=-1.0, upper=3.0).infer([one], _Infer()).derivation == (  # type: ignore[arg-type]
        "sorted values clamped to [-1, 3], n=10: rank sensitivity 2, l_p 8")
    assert OrderStatistics(upper=Ref("u")).infer([one], _Infer()).derivation == (  # type: ignore[arg-type]
        "sorted values clamped to [0, u], n=10: rank sensitivity 2, l_p 2*u")
    stat = StatT((3,), "X", None, None, None)
    for node, what in ((Magnitudes(), "sensitive rows"), (OrderStatistics(upper=1.0), "sensitive rows")):
        with pytest.raises(PlanTypeError) as e:
            node.infer([stat], _Infer())  # type: ignore[arg-type]
        assert e.value.problem.startswith(f"expects {what}, got ") and e.value.fix == f"pass {what}"
    with pytest.raises(PlanTypeError) as e:
        Quantile(q=0.5).infer([one], _Infer())  # type: ignore[arg-type]
    assert e.value.fix == "pass order statistics (OrderStatistics)"
    assert Quantile(q=0.5).infer([stat], _Infer()) == Inferred(ReleasedT(()), "")  # type: ignore[arg-type]
    with pytest.raises(UnboundedSensitivityError) as u:
        Quantile(q=0.5).check_input(stat, _Infer())  # type: ignore[arg-type]
    assert (u.value.node, u.value.problem, u.value.fix) == (
        "q", "Quantile needs order statistics (a rank sensitivity)", "feed it OrderStatistics(lower=..., upper=...)")


def test_magnitudes_values_and_policy() -> None:
    """NaN counts as 0, +-inf as +inf, in both forms."""
    X = np.array([[3.0, -4.0], [np.nan, 1.0], [-np.inf, 0.0], [np.inf, np.nan]])
    ctx = ValueCtx({"u": np.array([[2.5]])}, "q")
    assert Magnitudes().evaluate([X], ctx).ravel().tolist() == [3.0, 4.0, 0.0, 1.0, np.inf, 0.0, np.inf, 0.0]
    assert Magnitudes(of="rows").evaluate([X], ctx).ravel().tolist() == [5.0, 1.0, np.inf, np.inf]


def test_range_width_rule() -> None:
    u = Ref("u")
    assert _range_syms(1.0, 1.0) == Sym.const(0.0) and _range_syms(-1.0, 3.0) == Sym.const(4.0)
    assert _range_syms(0.0, u) == Sym.ref(ReleasedScalar("u"))
    assert _range_syms(1.0, u) is None and _range_syms(u, 3.0) is None and _range_syms(u, u) is None


def test_order_statistics_types() -> None:
    """Width times stability in l1, l2 and linf; rank sensitivity = stability; shape n + 2; float error exact;
    with a private row count no vector bound and shape (2,); a released upper end over lower = 0."""
    rows = _rows(dp.Vectors(d=1), n=10, stability=2)
    stat = OrderStatistics(lower=-1.0, upper=3.0).infer([rows], _Infer()).out  # type: ignore[arg-type]
    eight = Sym.const(8.0)
    assert stat == StatT((12,), "X", eight, eight, eight, rank=Sym.const(2.0),
                         float_error=FloatError("exact", rows.domain))
    stat = OrderStatistics(lower=-1.0, upper=3.0).infer([_rows(dp.Vectors(d=1), None, 3)], _Infer()).out  # type: ignore[arg-type]
    assert stat.shape == (2,) and stat.l1 is stat.l2 is stat.linf is None and stat.rank == Sym.const(3.0)
    stat = OrderStatistics(upper=Ref("u")).infer([rows], _Infer()).out  # type: ignore[arg-type]
    assert stat.l2 == Sym.ref(ReleasedScalar("u")) * 2.0
    stat = OrderStatistics(lower=Ref("l"), upper=3.0).infer([rows], _Infer()).out  # type: ignore[arg-type]
    assert stat.l1 is stat.l2 is stat.linf is None and stat.rank == Sym.const(2.0) and stat.shape == (12,)
    counted = RowsT(dp.Vectors(d=1), "X", Size(False, 10, RowCount("X")), 1, frozenset({"replace"}))
    assert OrderStatistics(upper=3.0).infer([counted], _Infer()).out.shape == (2,)  # type: ignore[arg-type]


def test_order_statistics_refusals() -> None:
    with pytest.raises(PostProcessingError) as p:
        stat = StatT((), "X", None, None, None)
        OrderStatistics(upper=Ref("u")).infer([_rows(dp.Vectors(d=1))], InferCtx("q", other=stat))  # type: ignore[arg-type]
    assert p.value.problem == "parameter 'upper' refers to u, which is not released"
    with pytest.raises(DomainError) as e:
        OrderStatistics(upper=1.0).infer([_rows(dp.Vectors(d=2))], _Infer())  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem, e.value.fix) == (
        "q", "order statistics need one-dimensional rows, got d=2",
        "select one column (Columns) or take Magnitudes first")
    for slot, node in (("upper", OrderStatistics(upper=Ref("u"))), ("lower", OrderStatistics(lower=Ref("u"),
                                                                                                upper=2.0))):
        with pytest.raises(DomainError) as e:
            node.infer([_rows(dp.Vectors(d=1))], _Infer((2,)))  # type: ignore[arg-type]
        assert (e.value.node, e.value.problem, e.value.fix) == (
            "q", f"{slot} refers to u of shape (2,)", "pass a released scalar")


def test_order_statistics_values_and_policy() -> None:
    """Clamped into [lower, upper] and sorted, framed by the ends; NaN counts as lower (not 0), +-inf as the
    ends; a released upper end is read from its first entry."""
    z = np.array([[7.0], [np.nan], [1.5], [-np.inf], [np.inf], [0.5]])
    out = OrderStatistics(lower=1.0, upper=4.0).evaluate([z], ValueCtx({"u": np.array([[2.5]])}, "q"))  # type: ignore[arg-type]
    assert out.tolist() == [1.0, 1.0, 1.0, 1.0, 1.5, 4.0, 4.0, 4.0]
    out = OrderStatistics(lower=0.0, upper=Ref("u")).evaluate([z], ValueCtx({"u": np.array([[2.5]])}, "q"))  # type: ignore[arg-type]
    assert out.tolist() == [0.0, 0.0, 0.0, 0.5, 1.5, 2.5, 2.5, 2.5]


# --------------------------------------------------------------------------- the lattice


def test_quantile_lattice_at_the_float_range_ends() -> None:
    """A subnormal range: the smallest subnormal is the step (not 0, not 2^-52); a tiny normal range: 2^-40 of
    its width; an overflowing width: 2^-40 of (hi/2 - lo/2) 2, read from the halves."""
    assert quantile_lattice(0.0, TINY) == (TINY, 0, 1)
    assert quantile_lattice(0.0, 50 * TINY) == (TINY, 0, 50)
    assert quantile_lattice(0.0, 2.0**-60) == (2.0**-100, 0, 2**40)
    step, m_lo, m_hi = quantile_lattice(-0.9e308, 0.9e308)
    assert step == 2.0 ** (1025 - 41) and m_lo == math.ceil(Fraction(-0.9e308) / Fraction(step))
    assert m_hi == math.floor(Fraction(0.9e308) / Fraction(step))


@pytest.mark.parametrize("step", [1.0, 2.0, 2.0**-37, TINY, 2.0**984, 3.0 * 2.0**-20])
def test_lattice_below_is_the_exact_floor(step: float) -> None:
    """floor(z / step) in exact rationals, for values on the lattice, one float either side of it, between
    points, negative, zero and huge; a quotient that underflows (-2^-1074 / 2 rounds to -0.0) is -1, not 0; no
    floating-point exception whatever numpy's error settings (the values are private)."""
    rng = np.random.default_rng(int(math.log2(step) + 2000))
    ms = np.concatenate((rng.integers(-2**40, 2**40, 50), [0, 1, -1, 2**52, -(2**52)])).astype(float)
    z = ms * step
    z = np.concatenate((z, np.nextafter(z, np.inf), np.nextafter(z, -np.inf), z + 0.5 * step, [0.0, -0.0]))
    z = z[np.isfinite(z)]
    with np.errstate(all="raise"):
        got = _lattice_below(z, step)
    want = [math.floor(Fraction(float(v)) / Fraction(step)) for v in z]
    assert got.dtype == np.int64 and got.tolist() == want


def _groups_ref(framed: np.ndarray, q: float, beta: Fraction) -> tuple[list[Fraction], list[int], list[int]]:
    """Group k = the lattice points y with k data values below: (z_(k), z_(k+1)], and [lo, z_(1)] for k = 0."""
    lo, hi = float(framed[0]), float(framed[-1])
    step, m_lo, m_hi = quantile_lattice(lo, hi)
    n = len(framed) - 2
    below = [m_lo - 1] + [math.floor(Fraction(float(v)) / Fraction(step)) for v in framed[1:-1]] + [m_hi]
    mult = [below[k + 1] - below[k] for k in range(n + 1)]
    first = [below[k] + 1 for k in range(n + 1)]
    target = Fraction(q) * n
    return [-beta * abs(k - target) for k in range(n + 1)], mult, first


@pytest.mark.parametrize(("lo", "hi"), [(-3.0, 5.0), (2.0**52, 2.0**52 + 40.0), (0.1, 0.3)])
def test_lattice_groups_match_the_rule_in_rationals(lo: float, hi: float) -> None:
    """Ties, values on and off the lattice, at both ends, and q n not a float (q = 0.1, n = 7)."""
    w = hi - lo
    z = np.sort(np.array([lo, lo + w / 3, lo + w / 3, lo + w / 2, lo + 0.7 * w, hi, hi]))
    framed = np.concatenate(([lo], z, [hi]))
    beta = Fraction(3, 4)
    scores, mult, first, step = lattice_groups(framed, 0.1, beta)
    logw, mult_ref, first_ref = _groups_ref(framed, 0.1, beta)
    assert step == quantile_lattice(lo, hi)[0]
    assert mult.tolist() == mult_ref and first.tolist() == first_ref and sum(mult_ref) == (
        quantile_lattice(lo, hi)[2] - quantile_lattice(lo, hi)[1] + 1)
    assert scores.exact(np.arange(8)) == logw
    x, err = scores.approx()
    assert all(abs(Fraction(float(a)) - b) <= Fraction(float(e)) for a, b, e in zip(x, logw, err, strict=True))


class _Words:
    """An exact source: fixed 64-bit words (counted) and a fixed uniform integer (its sizes recorded)."""

    exact = True

    def __init__(self, word: int, t: int | None) -> None:
        self.word, self.t, self.words, self.sizes = word, t, 0, []  # type: ignore[var-annotated]

    def uniform_words(self, n: int) -> np.ndarray:
        self.words += n
        return np.full(n, self.word, dtype=np.uint64)

    def uniform_int(self, size: int) -> int:
        self.sizes.append(size)
        return size // 2 if self.t is None else self.t


def test_lattice_quantile_release_step() -> None:
    """The drawn group's first point plus a uniform integer below its size, times the step; one word."""
    lo, hi = 2.0**52, 2.0**52 + 40.0
    framed = np.array([lo, lo + 3.0, lo + 10.0, lo + 30.0, hi])
    src = _Words(2**63, 4)  # R = 1/2: with beta = 0 the point 20.5 of 41, in the gap (10, 30]
    y = lattice_quantile(framed, 0.5, Fraction(0), src)  # type: ignore[arg-type]
    assert y == lo + 15.0 and src.sizes == [20] and src.words == 1
    src = _Words(0, 2)  # R = 0: the first group, [lo, lo + 3]: 4 points
    assert lattice_quantile(framed, 0.5, Fraction(0), src) == lo + 2.0 and src.sizes == [4]  # type: ignore[arg-type]


@pytest.mark.parametrize("z", [(0.0, 0.0, 10.0), (0.0, 0.0, 0.0), (40.0, 40.0, 40.0), (10.0, 40.0, 40.0)])
def test_lattice_quantile_reads_the_range_from_the_frame(z: tuple[float, ...]) -> None:
    """Data at one end of the range is still a draw over the whole range (R = 1/2, beta = 0: its middle)."""
    lo = 2.0**52
    src = _Words(2**63, None)  # R = 1/2 and the middle member of the drawn group
    y = lattice_quantile(np.array([lo, *(lo + v for v in z), lo + 40.0]), 0.5, Fraction(0), src)  # type: ignore[arg-type]
    assert lo < y < lo + 40.0 and src.words == 1


def test_lattice_quantile_of_a_one_point_range() -> None:
    src = _Words(0, 0)
    assert lattice_quantile(np.array([2.0, 2.0, 2.0]), 0.5, Fraction(1), src) == 2.0  # type: ignore[arg-type]
    assert src.words == 1 and src.sizes == []


def test_continuous_log_weights_with_a_rank_sensitivity_of_three() -> None:
    """log |I_k| - eps |k - q n| / (2 Delta_u); an empty gap weighs 0 (-inf)."""
    framed = np.array([0.0, 1.0, 1.0, 4.0])
    w = quantile_log_weights(framed, 0.5, 2.0, 3.0)
    assert w[1] == -np.inf
    assert w[0] == pytest.approx(math.log(1.0) - 2.0 * 1.0 / 6.0, abs=1e-15)
    assert w[2] == pytest.approx(math.log(3.0) - 2.0 * 1.0 / 6.0, abs=1e-15)


class _Continuous:
    exact = False

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[int, ...]]] = []

    def gumbel(self, shape: tuple[int, ...]) -> np.ndarray:
        self.calls.append(("gumbel", shape))
        return np.zeros(shape)

    def uniform(self, shape: tuple[int, ...]) -> np.ndarray:
        self.calls.append(("uniform", shape))
        return np.full(shape, 0.5)


def test_quantile_release_on_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exact sources: beta = eps / (2 Delta_u) exactly (Delta_u = 3 here); continuous: one Gumbel per gap then one
    uniform, a point of the drawn gap; epsilon recorded."""
    seen: list[Any] = []
    monkeypatch.setattr(quantile, "lattice_quantile", lambda f, q, beta, noise: seen.append((q, beta)) or 1.5)
    stat = StatT((5,), "X", None, None, None, rank=Sym.const(3.0))
    alloc = Allocation("pure", Fraction(6, 5), Cost.pure(Fraction(6, 5)))
    framed = np.array([0.0, 1.0, 2.0, 2.0, 4.0])
    ctx = EvalCtx(stat, 3.0, True, alloc)
    assert Quantile(q=0.25).evaluate([framed], ctx) == 1.5  # type: ignore[arg-type]
    assert seen == [(0.25, Fraction(1, 5))] and ctx.facts["epsilon"] == 1.2
    noise = _Continuous()
    ctx = EvalCtx(stat, 3.0, False, alloc, noise)
    y = Quantile(q=0.25).evaluate([framed], ctx)  # type: ignore[arg-type]
    assert noise.calls == [("gumbel", (4,)), ("uniform", (1,))] and ctx.facts["epsilon"] == 1.2
    # log-weights log|I_k| - 1.2 |k - 0.75| / 6 with no noise: the gap [0, 1] (k = 0) or [2, 4] (k = 3)
    w = quantile_log_weights(framed, 0.25, 1.2, 3.0)
    k = int(np.argmax(w))
    assert y == framed[k] + 0.5 * (framed[k + 1] - framed[k])


def test_parameter_refusals() -> None:
    with pytest.raises(ValueError, match=r"^Magnitudes of must be 'coordinates' or 'rows', got 'cols'$"):
        Magnitudes(of="cols")
    with pytest.raises(ValueError, match=r"^OrderStatistics needs lower <= upper, got \[2.0, 1.0\]$"):
        OrderStatistics(lower=2.0, upper=1.0)
    assert Quantile(q=0.0).q == 0.0 and Quantile(q=1.0).q == 1.0
    for q in (-0.1, 1.1):
        with pytest.raises(ValueError, match=rf"^Quantile needs 0 <= q <= 1, got {q}$"):
            Quantile(q=q)
    for scale, shift in ((-1.0, 0.0), (1.0, -1.0)):
        with pytest.raises(ValueError, match=r"^ScaleShift keeps radii non-negative: scale and shift must be >= 0$"):
            quantile.ScaleShift(scale=scale, shift=shift)


def test_quantile_noise_text() -> None:
    stat = StatT((5,), "X", None, None, None, rank=Sym.const(3.0))
    tail = ("u_k / (2*3)), u_k = -|k - 0.25 n|; exact sources: the same over the points of a 2^-k lattice of the "
            "range (|I_k| = points in the gap), sampled exactly")
    assert Quantile(q=0.25).noise_text(stat, Fraction(1, 2), "pure") == (
        "exponential mechanism over gaps, weights |I_k| exp(0.5 " + tail)
    assert Quantile(q=0.25).noise_text(stat, Fraction(1, 2), "zcdp") == (
        "exponential mechanism over gaps, weights |I_k| exp(2 " + tail)


def test_radius_post_processing() -> None:
    """ScaleShift: scale max(x, 0) + shift; ModeBinUpper: factor times the right edge of the largest bin (NaN
    never the largest; a count vector longer than the bins reads the last edge); log2_edges: powers of two."""
    ctx = ValueCtx({"u": np.array([[2.5]])}, "q")
    ss = quantile.ScaleShift(scale=2.0, shift=1.0)
    assert [ss.evaluate([np.array(v)], ctx) for v in (3.0, 0.0, -5.0)] == [7.0, 1.0, 1.0]  # type: ignore[arg-type]
    mb = quantile.ModeBinUpper(edges=[0.0, 1.0, 2.0, 4.0], factor=3.0)
    assert mb.evaluate([np.array([1.0, 5.0, 2.0])], ctx) == 6.0  # type: ignore[arg-type]
    assert mb.evaluate([np.array([0.0, 0.0, 9.0])], ctx) == 12.0  # type: ignore[arg-type]
    assert mb.evaluate([np.array([-5.0, np.nan, -3.0])], ctx) == 12.0  # type: ignore[arg-type]
    assert mb.evaluate([np.array([0.0, 0.0, 0.0, 0.0, 9.0])], ctx) == 12.0  # type: ignore[arg-type]
    assert quantile.log2_edges(-2, 2) == (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
