"""The exact fixed-point sums of issue 9 (:mod:`dpflow.nodes.fixedpoint`): the grid, the quantisation, the int64
blocks that cannot overflow, the exact rounding to a mechanism's lattice, and the error term the lattice release
adds (``FloatError`` kinds ``fixed_sum`` and ``fixed_gram``), pinned exactly and checked on adversarial
neighbours: rows on the rounding boundary q/2, rows at the radius, and huge row counts (a stub backend).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from conftest import ExactZeroNoise

import dpflow as dp
from dpflow import nodes as N
from dpflow.interpreter import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.nodes import fixedpoint as fp
from dpflow.nodes.fixedpoint import FixedPoint, gram_units, lattice_units, quantise, sum_units
from dpflow.nodes.floaterr import FloatError, U, gamma
from dpflow.nodes.types import StatT
from dpflow.planner import certify
from dpflow.privacy.rounding import up


def _round_half_even(x: Fraction) -> int:
    f = math.floor(x)
    rest = x - f
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and f % 2 == 1):
        return f + 1
    return f


def _exact_unit(v: float, e: int, bits: int) -> int:
    """The declared quantisation of one entry, in exact arithmetic."""
    lim = 1 << bits
    if math.isnan(v):
        return 0
    if math.isinf(v):
        return lim if v > 0 else -lim
    return max(-lim, min(lim, _round_half_even(Fraction(v) / Fraction(2) ** e)))


def _exact_units(X: np.ndarray, e: int, bits: int) -> list[list[int]]:
    return [[_exact_unit(v, e, bits) for v in row] for row in X.tolist()]


# --------------------------------------------------------------------------- the constants and the grid

def test_the_int64_blocks_cannot_overflow() -> None:
    """A partial sum of a block of quantised rows (products for the Gram) stays below 2^63: the proof's
    inequalities, pinned (a larger block or more bits fails here)."""
    assert (fp.SUM_BITS, fp.SUM_BLOCK, fp.GRAM_BITS, fp.GRAM_BLOCK) == (40, 1 << 22, 26, 1 << 10)
    assert fp.SUM_BLOCK * 2**fp.SUM_BITS <= 2**62
    assert fp.GRAM_BLOCK * 2 ** (2 * fp.GRAM_BITS) <= 2**62
    assert fp.HALF == 31  # halves of a 2^62 block sum: |hi| <= 2^31, lo < 2^31


@pytest.mark.parametrize(("bound", "bits", "e"), [(1.0, 40, -39), (0.75, 40, -40), (0.5, 40, -40),
                                                  (3.0, 26, -24), (2.0**-700, 40, -600), (0.0, 26, -26)])
def test_the_grid_is_the_power_of_two_above_the_bound_over_2_to_the_bits(bound: float, bits: int, e: int) -> None:
    assert fp.grid_exponent(bound, bits) == e
    if bound > 2.0**-500:
        assert bound / 2.0**e < 2.0**bits <= 2 * bound / 2.0**e  # |x / q| < 2^bits, and q is the finest such grid


def test_no_grid_without_a_finite_bound_below_2_to_the_1000() -> None:
    assert fp.grid_exponent(math.inf, 40) is None and fp.grid_exponent(math.nan, 40) is None
    assert fp.grid_exponent(2.0**1000, 40) is None and fp.grid_exponent(2.0**999, 40) == 1000 - 40


def test_the_floaterror_grid_is_read_from_the_widened_row_bound() -> None:
    dom = dp.Vectors(d=3, l2_bound=1.0)
    fe = FloatError("fixed_sum", dom)
    assert fe.row_norm({}) > 1.0  # widened by (d + 2) u: 2^0 <= b < 2^1
    assert fe.grid({}) == 1 - 40
    assert FloatError("fixed_gram", dom).grid({}) == 1 - 26
    assert FloatError("fixed_sum", dp.Vectors(d=3, l2_bound=0.5)).grid({}) == 0 - 40  # 0.5 (1 + g) < 1
    assert FloatError("sum", dom, dp.Sym.const(10.0)).grid({}) is None
    # the bound is rounded up first: a coordinate bound just below a power of two gets the coarser grid
    near = 2.0 - 2.0**-51
    assert FloatError("fixed_sum", dp.Vectors(d=1, box=(-near, near))).grid({}) == 2 - 40
    assert FloatError("fixed_sum", dp.Vectors(d=1, box=(-1.5, 1.5))).grid({}) == 1 - 40


# --------------------------------------------------------------------------- quantisation and exact sums

def test_quantise_is_round_half_even_of_the_exact_quotient() -> None:
    q = 2.0**-40
    boundary = [0.5 * q, 1.5 * q, 2.5 * q, -0.5 * q, -1.5 * q, 2.0**-1074, -(2.0**-1074), 2.0**-1030]
    rng = np.random.default_rng(3)
    X = np.concatenate([np.array(boundary), rng.normal(size=40), rng.normal(size=40) * 1e-12]).reshape(-1, 4)
    assert quantise(X, -40, 40).tolist() == _exact_units(X, -40, 40)
    assert quantise(np.array([[0.5 * q, 1.5 * q, 2.5 * q]]), -40, 40).tolist() == [[0, 2, 2]]  # to even


def test_quantise_declared_policy_for_rows_outside_the_bound() -> None:
    X = np.array([[np.nan, np.inf, -np.inf, 1e300, 2.0**41 * 2.0**-40]])
    assert quantise(X, -40, 40).tolist() == [[0, 2**40, -(2**40), 2**40, 2**40]]


def test_sum_units_is_the_exact_integer_sum() -> None:
    rng = np.random.default_rng(4)
    X = rng.normal(size=(5000, 3)) * rng.choice([1e-9, 1.0, 0.4], size=(5000, 3))
    e = fp.grid_exponent(4.0, fp.SUM_BITS)
    assert e is not None
    want = [sum(c) for c in zip(*_exact_units(X, e, fp.SUM_BITS), strict=True)]
    assert sum_units(X, e).tolist() == want
    assert sum_units(X[::-1], e).tolist() == want  # any order: exact
    assert sum_units(np.zeros((0, 3)), e).tolist() == [0, 0, 0]


def test_gram_units_is_the_exact_integer_gram() -> None:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(2100, 3))
    e = fp.grid_exponent(6.0, fp.GRAM_BITS)
    assert e is not None
    Q = _exact_units(X, e, fp.GRAM_BITS)
    want = [[sum(r[i] * r[j] for r in Q) for j in range(3)] for i in range(3)]
    assert gram_units(X, e).tolist() == want


def test_the_block_bound_is_what_keeps_int64_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows at the largest quantised value: a block of SUM_BLOCK rows sums to exactly 2^62; twice that block
    would overflow int64.  Checked with the bits and the block scaled so that the arrays stay small (2^59 per
    entry, 8 rows per block): a mutant that lets a block hold more rows, or adds the block sums in int64,
    wraps around here."""
    monkeypatch.setattr(fp, "SUM_BITS", 59)
    monkeypatch.setattr(fp, "SUM_BLOCK", 8)
    X = np.full((40, 2), 2.0**59)
    assert sum_units(X, 0).tolist() == [40 * 2**59] * 2
    assert sum_units(-X, 0).tolist() == [-40 * 2**59] * 2
    monkeypatch.setattr(fp, "GRAM_BITS", 30)
    monkeypatch.setattr(fp, "GRAM_BLOCK", 4)
    Y = np.full((20, 2), 2.0**30)
    assert gram_units(Y, 0).tolist() == [[20 * 2**60] * 2] * 2


def test_exact_total_splits_block_sums_into_halves() -> None:
    parts = np.array([[2**62, -(2**62)], [2**62, -(2**62)], [2**62 - 1, 1], [-1, -(2**62)]], dtype=np.int64)
    assert fp.exact_total(parts).tolist() == [3 * 2**62 - 2, -3 * 2**62 + 1]


# --------------------------------------------------------------------------- rounding to the lattice

@pytest.mark.parametrize("floor", [False, True])
def test_lattice_units_round_the_exact_value_in_integers(floor: bool) -> None:
    rng = np.random.default_rng(6)
    units = np.array([int(x) for x in rng.integers(-(2**62), 2**62, size=50)] + [5, -5, 7, -7, 2**90 + 2**40],
                     dtype=object)
    for e, k in [(-40, -38), (-40, -40), (-40, -45), (0, 3), (-30, 20)]:
        got = lattice_units(FixedPoint(units, e), 2.0**k, floor=floor).tolist()
        for u, g in zip(units.tolist(), got, strict=True):
            x = Fraction(u) * Fraction(2) ** (e - k)
            assert g == (math.floor(x) if floor else math.floor(x + Fraction(1, 2))), (u, e, k)


def test_lattice_units_needs_a_power_of_two_step() -> None:
    with pytest.raises(ValueError, match="power of two"):
        lattice_units(FixedPoint(np.array([1], dtype=object), 0), 3.0)


# --------------------------------------------------------------------------- the error term, pinned

@pytest.mark.parametrize("stability", [1, 3])
@pytest.mark.parametrize("d", [1, 5])
def test_the_fixed_sum_error_term_is_pinned(stability: int, d: int) -> None:
    r = 1.7
    fe = FloatError("fixed_sum", dp.Vectors(d=d, l2_bound=r), stability=stability)
    b = fe.row_norm({})
    e = fe.grid({})
    assert e is not None and r * (1.0 + gamma(d + 2)) <= b < r * (1.0 + 1e-11)
    l2 = up((b * gamma(d + 2) + 2.0**e * math.sqrt(d) / 2.0) * stability)
    assert fe.bound({}, d) == (l2, up(l2 * math.sqrt(d)))


@pytest.mark.parametrize("stability", [1, 2])
def test_the_fixed_gram_error_term_is_pinned(stability: int) -> None:
    d, r = 4, 3.0
    fe = FloatError("fixed_gram", dp.Vectors(d=d, l2_bound=r), stability=stability)
    b, e, r = fe.centred_norm({}), fe.grid({}), fe.centred_norm({}, widen=False)
    assert e is not None and 3.0 <= r < b
    b1 = b + 2.0**e * math.sqrt(d) / 2.0
    l2 = up((b1 - r + 4 * U * b1) * (b1 + r) * math.sqrt(2.0) * stability / 2.0)
    assert fe.bound({}, 10) == (l2, up(l2 * math.sqrt(10)))
    assert FloatError("fixed_gram", dp.Vectors(d=d, l2_bound=2.0**600)).bound({}, 10) == (math.inf, math.inf)


def test_the_error_term_does_not_depend_on_the_row_count() -> None:
    """A sum over an add/remove source: the fixed-point rule names no row count, so certifying it never needs
    one and the bound is the same whatever n is."""
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="add_remove")
    s = N.Sum()(N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2))))
    t = certify(b.build(s=N.GaussianMech()(s))).space.types[s.id]
    assert isinstance(t, StatT) and t.float_error is not None
    assert t.float_error.n is None and t.float_error.refs() == ()


# --------------------------------------------------------------------------- adversarial neighbours

def _box_case(d: int) -> tuple[float, float]:
    """A box half-width a with a / q exactly an odd integer plus 1/2 (q the grid of the box's row bound)."""
    e = FloatError("fixed_sum", dp.Vectors(d=d, box=(-1.3, 1.3))).grid({})
    assert e is not None
    q = 2.0**e
    k = math.floor(1.3 / q) | 1  # odd
    a = (k + 0.5) * q
    assert abs(a - 1.3) < 2 * q
    return a, q


@pytest.mark.parametrize("d", [1, 4, 9])
def test_rows_on_the_rounding_boundary_reach_the_error_term(d: int) -> None:
    """Replace-one: a row of a's and a row of -a's, every coordinate on the boundary q/2 of the grid, both
    rounded away from 0: the fixed-point sums differ by the declared diameter 2 a sqrt(d) plus exactly
    q sqrt(d).  Within the declared sensitivity plus twice the error term; a term of q sqrt(d) / 4 (or a grid
    twice as coarse) would not cover it."""
    a, q = _box_case(d)
    dom = dp.Vectors(d=d, box=(-a, a))
    fe = FloatError("fixed_sum", dom)
    e = fe.grid({})
    assert e is not None and 2.0**e == q
    x, y = np.full((1, d), a), np.full((1, d), -a)
    diff = [Fraction(int(u) - int(v)) * Fraction(q) for u, v in zip(sum_units(x, e), sum_units(y, e), strict=True)]
    moved = math.sqrt(float(sum(c * c for c in diff)))
    declared = 2 * a * math.sqrt(d)
    assert float(diff[0]) == 2 * a + q  # each row moved outward by q/2 per coordinate
    assert moved == pytest.approx(declared + q * math.sqrt(d), rel=1e-15)
    err = fe.bound({}, d)[0]
    assert moved <= declared + 2 * err
    weaker = fe.row_norm({}) * gamma(d + 2) + q * math.sqrt(d) / 4
    assert moved > declared + 2 * weaker


def test_clipped_rows_at_the_radius_stay_within_the_error_term() -> None:
    """Rows clipped to the ball of radius r (as the Clip node computes them), in adversarial directions (huge
    rows on half-grid directions, tiny and large coordinates mixed): every quantised row within r + E
    (add/remove), every pair within 2 r + 2 E."""
    d, r = 3, 1.0
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="add_remove")
    s = N.Sum()(N.Clip(radius=r)(b.source("X", dp.Vectors(d=d))))
    plan = b.build(s=N.GaussianMech()(s))
    cert = certify(plan, exact_noise=True)
    t = cert.space.types[s.id]
    assert isinstance(t, StatT) and t.float_error is not None
    fe = t.float_error
    e = fe.grid({})
    assert e is not None
    q = 2.0**e
    rng = np.random.default_rng(8)
    X = rng.normal(size=(400, d)) * rng.choice([1e-3, 1.0, 1e6], size=(400, d))
    X[:50] = (np.floor(rng.normal(size=(50, d)) / q) + 0.5) * q * 1e12
    spy = _SpyBackend()
    execute(cert, {"X": X}, ExactZeroNoise(), spy)
    (Z,) = spy.summed
    Q = np.array(_exact_units(Z, e, fp.SUM_BITS), dtype=float) * q
    err = fe.bound({}, d)[0]
    norms = np.linalg.norm(Q, axis=1)
    assert norms.max() <= r + err
    far = np.linalg.norm(Q[:, None, :] - Q[None, :, :], axis=2).max()
    assert far <= 2 * r + 2 * err


class _SpyBackend(NumpyBackend):
    """Records the rows every exact sum reads."""

    def __init__(self) -> None:
        self.summed: list[np.ndarray] = []

    def exact_sum(self, X: Any, fn: Any) -> np.ndarray:
        self.summed.append(np.array(X, dtype=float))
        return super().exact_sum(X, fn)


# --------------------------------------------------------------------------- end to end: exact releases

class _HugeBackend(NumpyBackend):
    """A stub engine whose rows stand for 2^50 + 1 copies of each row: its exact sums are those of a huge n
    (no huge array), to check that the release rounds the exact integers, not a float."""

    copies = 2**50 + 1

    def exact_sum(self, X: Any, fn: Any) -> np.ndarray:
        out: np.ndarray = super().exact_sum(X, fn) * self.copies
        return out


def _sum_plan(mech: str) -> tuple[dp.Plan, Any]:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5) if mech == "gaussian" else dp.PureDP(1.0), neighbors="add_remove")
    s = N.Sum()(N.Clip(radius=1.0)(b.source("X", dp.Vectors(d=2))))
    return b.build(s=N.GaussianMech()(s) if mech == "gaussian" else N.LaplaceMech()(s)), s


@pytest.mark.parametrize("mech", ["gaussian", "laplace"])
def test_a_huge_private_count_is_released_from_the_exact_sum(mech: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from dpflow.nodes import mechanisms

    units: list[list[int]] = []

    def recording(value: Any, step: float, floor: bool = False) -> np.ndarray:
        out = lattice_units(value, step, floor)
        units.append([int(k) for k in out.ravel()])
        return out

    monkeypatch.setattr(mechanisms, "lattice_units", recording)
    plan, _ = _sum_plan(mech)
    cert = certify(plan, exact_noise=True)
    X = np.array([[0.3, -0.1], [1.0 / 3.0, 0.2], [-0.05, 0.7]])
    ex = execute(cert, {"X": X}, ExactZeroNoise(), _HugeBackend())
    lattice = next(f["lattice"] for f in ex.facts[plan.records[-1].id] if "lattice" in f)
    step = Fraction(lattice["step"])
    e = fp.grid_exponent(FloatError("fixed_sum", dp.Vectors(d=2, l2_bound=1.0)).row_norm({}), fp.SUM_BITS)
    assert e is not None
    exact = [Fraction(u * _HugeBackend.copies) * Fraction(2) ** e for u in sum_units(X, e).tolist()]
    want = [math.floor(x / step + Fraction(1, 2)) for x in exact]
    assert units == [want]
    assert ex.released["s"].tolist() == [float(k * step) for k in want]
    # the float of the sum (2^50 rows) errs by far more than a lattice step: rounding it would differ
    assert [round(Fraction(float(x)) / step) for x in exact] != want
    assert lattice["float_slack"] < 1e-9  # and the error term stays that of one row, whatever n is


@pytest.mark.parametrize("mech", ["gaussian", "laplace"])
def test_numpy_and_dask_compute_the_same_integers(mech: str) -> None:
    pytest.importorskip("dask")
    from dpflow.interpreter.dask_backend import DaskBackend

    plan, _ = _sum_plan(mech)
    cert = certify(plan, exact_noise=True)
    rng = np.random.default_rng(9)
    X = rng.normal(size=(5003, 2))
    a = execute(cert, {"X": X}, ExactZeroNoise(), NumpyBackend()).released["s"]
    b = execute(cert, {"X": X}, ExactZeroNoise(), DaskBackend(chunk_rows=777)).released["s"]
    assert a.tolist() == b.tolist()
    e = fp.grid_exponent(FloatError("fixed_sum", dp.Vectors(d=2, l2_bound=1.0)).row_norm({}), fp.SUM_BITS)
    assert e is not None
    units = DaskBackend(chunk_rows=777).exact_sum(rng.normal(size=(3001, 2)), lambda B: sum_units(B, e))
    assert len(units) == 2


def test_the_fixed_gram_on_dask_equals_numpy() -> None:
    pytest.importorskip("dask")
    import dask.array as da

    from dpflow.interpreter.dask_backend import DaskBackend

    rng = np.random.default_rng(10)
    X = rng.normal(size=(3000, 3))
    fn = lambda B: gram_units(B, -20)  # noqa: E731
    assert DaskBackend().exact_sum(da.from_array(X, chunks=(413, 3)), fn).tolist() == gram_units(X, -20).tolist()
    assert NumpyBackend().exact_sum(X, fn).tolist() == gram_units(X, -20).tolist()


def test_peel_and_above_threshold_read_the_exact_sum() -> None:
    """The other mechanisms that take a Sum round its exact integers too (Peel to the nearest, AboveThreshold
    down), and draw only exact noise."""
    from test_secure_noise_kinds import CONTINUOUS, RecordingSecureNoise

    b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors="add_remove")
    s = N.Sum()(N.Clip(box=(-1.0, 1.0))(b.source("X", dp.Vectors(d=4))))
    plan = b.build(p=N.Peel(s=1)(s), i=N.AboveThreshold(threshold=50.0)(s))
    X = np.zeros((200, 4))
    X[:, 2] = 1.0
    noise = RecordingSecureNoise()
    out = plan.run({"X": X}, noise=noise).released
    assert not set(noise.calls) & CONTINUOUS
    assert int(np.argmax(np.abs(out["p"]))) == 2 and abs(out["p"][2] - 200.0) < 60
    assert out["i"] == 2


@pytest.mark.parametrize("neighbors", ["add_remove", "replace"])
def test_exact_releases_equal_the_float_statistics_up_to_the_lattice(neighbors: str) -> None:
    """Under zero exact noise the fixed-point Sum and Gram release the float statistics up to the grid and the
    lattice (pins the Gram's scale q^2 as well as the sum's q)."""
    n = 300 if neighbors == "replace" else None
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5), neighbors=neighbors)
    C = N.Clip(radius=2.0)(b.source("X", dp.Vectors(d=3), n=n))
    plan = b.build(s=N.GaussianMech()(N.Sum()(C)), g=N.GaussianMech()(N.Gram()(C)))
    cert = certify(plan, exact_noise=True)
    X = np.random.default_rng(11).normal(size=(300, 3))
    Z = X * np.minimum(1.0, 2.0 / np.linalg.norm(X, axis=1))[:, None]
    out = execute(cert, {"X": X}, ExactZeroNoise(), NumpyBackend()).released
    assert np.allclose(out["s"], Z.sum(axis=0), rtol=0, atol=1e-9)
    assert np.abs(out["g"] - Z.T @ Z).max() < 1e-4  # the Gram's grid is 2^-24 here (q |z| per row and entry)
