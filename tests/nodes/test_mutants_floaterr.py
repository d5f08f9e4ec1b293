"""Mutation-testing pins of ``dpflow/nodes/floaterr.py``: the floating-point error bounds, term by term.

Each bound is restated here in the documented order of operations (Higham 2002, Lemma 3.1 and eq. (4.4):
a sum of n terms errs by at most gamma_{n-1} sum |x_i|, gamma_k = k u / (1 - k u), u = 2^-53) and compared
for equality, so that changing any constant, factor or comparison of the module changes a result here.  The
soundness of the bounds (they cover adversarially rounded sums) is tested in ``tests/interpreter``.
"""

from __future__ import annotations

import math

import pytest

from dpflow.domains import ReleasedNorm, ReleasedScalar, RowCount, Sym, Vectors
from dpflow.nodes.fixedpoint import GRAM_BITS, grid_exponent
from dpflow.nodes.floaterr import OVERFLOW, FloatError, U, gamma
from dpflow.privacy.rounding import up


def test_constants() -> None:
    assert U == 2.0**-53 and OVERFLOW == 2.0**1000


@pytest.mark.parametrize("k", [1, 2, 10, 1e6, 2.0**40])
def test_gamma_is_k_u_over_one_minus_k_u_rounded_up(k: float) -> None:
    ku = k * U
    assert gamma(k) == math.nextafter(ku / (1.0 - ku) * (1.0 + 4 * U), math.inf)
    assert gamma(k) > ku / (1.0 - ku)


def test_gamma_needs_k_u_below_one_half() -> None:
    gamma(math.nextafter(2.0**52, 0.0))
    with pytest.raises(ValueError, match="k \\* u < 1/2"):
        gamma(2.0**52)


def test_row_norm_takes_the_smaller_of_box_and_ball() -> None:
    box = Vectors(d=4, box=(-3.0, 2.0))
    assert FloatError("sum", box).row_norm({}) == 3.0 * 2.0        # max |endpoint| * sqrt(d)
    ball = Vectors(d=4, l2_bound=Sym.const(2.0), center="c")
    r = Sym.const(2.0).value()
    assert FloatError("sum", ball).row_norm({ReleasedNorm("c"): 5.0}) == r * (1.0 + gamma(6)) + 5.0
    assert FloatError("sum", ball).row_norm({ReleasedNorm("c"): 5.0}, widen=False) == r + 5.0
    both = Vectors(d=4, box=(-3.0, 2.0), l2_bound=Sym.const(10.0))
    assert FloatError("sum", both).row_norm({}) == 6.0
    small_ball = Vectors(d=4, box=(-3.0, 2.0), l2_bound=Sym.const(1.0))
    assert FloatError("sum", small_ball).row_norm({}) == Sym.const(1.0).value() * (1.0 + gamma(6))
    assert FloatError("sum", Vectors(d=4)).row_norm({}) == math.inf


@pytest.mark.parametrize("d", range(1, 12))
def test_centred_norm(d: int) -> None:
    """Around a released centre, with a released radius (d ranges so that gamma(d + 2) and its neighbours
    round apart in 1 + gamma)."""
    dom = Vectors(d=d, l2_bound=Sym.ref(ReleasedScalar("radius")), center="c")
    values = {ReleasedScalar("radius"): 2.0, ReleasedNorm("c"): 7.0}
    r = Sym.ref(ReleasedScalar("radius")).value(values)
    fe = FloatError("gram", dom, Sym.const(10.0), "c")
    b = r * (1.0 + gamma(d + 2))
    assert fe.centred_norm(values) == b + U * (b + 7.0) * 2.0
    assert fe.centred_norm(values, widen=False) == r
    assert fe.row_norm(values) == b + 7.0 and fe.row_norm(values, widen=False) == r + 7.0
    assert FloatError("gram", dom, Sym.const(10.0), "e").centred_norm(values) == math.inf
    assert FloatError("gram", Vectors(d=3, box=(0.0, 1.0)), Sym.const(10.0), "c").centred_norm({}) == math.inf
    no_centre = FloatError("gram", dom, Sym.const(10.0))
    assert no_centre.centred_norm(values) == no_centre.row_norm(values) == b + 7.0
    assert no_centre.centred_norm(values, widen=False) == no_centre.row_norm(values, widen=False) == r + 7.0


def test_refs() -> None:
    dom = Vectors(d=2, l2_bound=Sym.ref(ReleasedScalar("radius")), center="c")
    assert FloatError("exact", dom, Sym.ref(RowCount("X"))).refs() == ()
    want = (RowCount("X"), ReleasedScalar("radius"), ReleasedNorm("c"), ReleasedNorm("g"))
    assert FloatError("gram", dom, Sym.ref(RowCount("X")), "g").refs() == want
    assert FloatError("sum", Vectors(d=2, box=(0.0, 1.0)), None).refs() == ()


N, D, R, C = 1000.0, 3, 2.0, 5.0
DOM = Vectors(d=D, l2_bound=Sym.const(R))
B = Sym.const(R).value() * (1.0 + gamma(D + 2))           # the computed row norm
NV = Sym.const(N).value()                                  # n as the bound reads it (Sym.value rounds up)


@pytest.mark.parametrize("entries", [1, 3])
def test_sum_and_mean_bounds(entries: int) -> None:
    l2_sum = gamma(NV) * NV * B + B * gamma(D + 2)
    assert FloatError("sum", DOM, Sym.const(N)).bound({}, entries) == (up(l2_sum), up(up(l2_sum) * math.sqrt(entries)))
    l2_mean = l2_sum / NV + U * B
    assert FloatError("mean", DOM, Sym.const(N)).bound({}, entries) == (up(l2_mean),
                                                                       up(up(l2_mean) * math.sqrt(entries)))


@pytest.mark.parametrize(("eta", "offset"), [(0.5, 3.0), (4.0, 0.0)])
def test_step_bound(eta: float, offset: float) -> None:
    l2_mean = (gamma(NV) * NV * B + B * gamma(D + 2)) / NV + U * B
    l2 = eta * l2_mean + U * offset + 2 * U * eta * B
    fe = FloatError("step", DOM, Sym.const(N), eta=eta, offset=offset)
    assert fe.bound({}, 3) == (up(l2), up(up(l2) * math.sqrt(3)))


def test_gram_bound() -> None:
    dom = Vectors(d=D, l2_bound=Sym.ref(ReleasedScalar("radius")), center="c")
    fe = FloatError("gram", dom, Sym.const(N), "c")
    values = {ReleasedNorm("c"): C, ReleasedScalar("radius"): R}
    b, r = fe.centred_norm(values), fe.centred_norm(values, widen=False)
    assert r == Sym.ref(ReleasedScalar("radius")).value(values)
    excess = (b - r + 4 * U * b) * (b + r) * math.sqrt(2.0) / (2.0 * NV)
    l2 = gamma(NV) * b * b + U * b * b + excess
    assert fe.bound(values, 6) == (up(l2), up(up(l2) * math.sqrt(6)))


def test_freq_and_exact_bounds() -> None:
    assert FloatError("freq", Vectors(d=1), Sym.const(N)).bound({}, 4) == (up(U), up(up(U) * 2.0))
    assert FloatError("exact", Vectors(d=1), None).bound({}, 4) == (0.0, 0.0)


def test_an_unknown_or_infinite_n_makes_the_bound_infinite() -> None:
    assert FloatError("mean", DOM, None).bound({}, 2) == (math.inf, math.inf)
    assert FloatError("mean", DOM, Sym.ref(RowCount("X"))).bound({RowCount("X"): math.nan}, 2) == (math.inf, math.inf)


def _at(target: float, nv: float, power: int) -> float:
    """A float b with ``nv * b (* b) == target`` exactly (searched among the neighbours of the root)."""
    b = (target / nv) ** (1.0 / power)
    for _ in range(200):
        b = math.nextafter(b, 0.0)
    for _ in range(400):
        if (nv * b if power == 1 else nv * b * b) == target:
            return b
        b = math.nextafter(b, math.inf)
    raise AssertionError("no exact threshold point")


def test_overflow_thresholds_are_strict() -> None:
    """sum/mean/step: n * b * max(eta, 1) + offset must stay below OVERFLOW; gram: n * b^2 (b a row bound).
    At equality the bound is infinite; one float below it, finite."""
    def dom(b: float) -> Vectors:
        return Vectors(d=1, box=(-b, b))                      # row norm exactly b for d = 1

    n = Sym.const(5.0)
    b_at = _at(OVERFLOW, n.value(), 1)
    below = math.nextafter(b_at, 0.0)
    for kind in ("sum", "mean"):
        assert FloatError(kind, dom(b_at), n).bound({}, 1) == (math.inf, math.inf)  # type: ignore[arg-type]
        assert math.isfinite(FloatError(kind, dom(below), n).bound({}, 1)[0])      # type: ignore[arg-type]
    assert FloatError("step", dom(b_at), n, eta=0.5).bound({}, 1) == (math.inf, math.inf)  # eta < 1 counts as 1
    assert math.isfinite(FloatError("step", dom(below), n, eta=0.5).bound({}, 1)[0])
    assert FloatError("step", dom(below), n, eta=2.0).bound({}, 1) == (math.inf, math.inf)  # eta multiplies
    assert FloatError("step", dom(b_at / 4.0), n, eta=1.0, offset=OVERFLOW * 0.75).bound({}, 1) == (math.inf,) * 2
    assert math.isfinite(FloatError("step", dom(b_at / 4.0), n, eta=1.0, offset=OVERFLOW * 0.5).bound({}, 1)[0])
    g_at = _at(OVERFLOW, n.value(), 2)
    assert FloatError("gram", dom(g_at), n).bound({}, 1) == (math.inf, math.inf)
    assert math.isfinite(FloatError("gram", dom(math.nextafter(g_at, 0.0)), n).bound({}, 1)[0])


# --------------------------------------------------------------------------- round 6: the fixed-point kinds

def test_fixed_gram_reads_the_released_radius_and_centre() -> None:
    """The grid and the half-excess of a ``fixed_gram`` about a released centre with a released radius, restated
    (``_fixed_bound``): b1 = b + q sqrt(d) / 2 for the widened centred bound b, and
    (b1 - r + 4 u b1)(b1 + r) sqrt(2) stability / 2 against the declared radius r."""
    dom = Vectors(d=3, l2_bound=Sym.ref(ReleasedScalar("radius")), center="c")
    values = {ReleasedScalar("radius"): 2.0, ReleasedNorm("c"): 7.0}
    fe = FloatError("fixed_gram", dom, gram_center="c", stability=2)
    b, r = fe.centred_norm(values), Sym.ref(ReleasedScalar("radius")).value(values)
    e = grid_exponent(up(b), GRAM_BITS)
    assert e is not None and fe.grid(values) == e
    b1 = b + math.ldexp(1.0, e) * math.sqrt(3) / 2.0
    l2 = up((b1 - r + 4 * U * b1) * (b1 + r) * math.sqrt(2.0) * 2 / 2.0)
    assert fe.bound(values, 6) == (l2, up(l2 * math.sqrt(6)))


def test_fixed_kinds_without_a_finite_row_bound_have_no_grid() -> None:
    """A released centre whose norm is NaN or infinite: no grid, an infinite error (the release is NaN), and no
    exception (``up`` refuses NaN, so the bound is rounded up only when finite)."""
    dom = Vectors(d=2, l2_bound=Sym.const(1.0), center="c")
    for kind in ("fixed_sum", "fixed_gram"):
        fe = FloatError(kind, dom, gram_center="c" if kind == "fixed_gram" else None)  # type: ignore[arg-type]
        for c in (math.nan, math.inf):
            assert fe.grid({ReleasedNorm("c"): c}) is None
            assert fe.bound({ReleasedNorm("c"): c}, 2) == (math.inf, math.inf)


def test_fixed_gram_overflow_threshold_is_strict() -> None:
    """b1 * b1 < 2^1000 or the error is infinite: b1 = 2^500 exactly (a box of half-width 2^499 - 2^473 in d = 4:
    row bound 2^500 - 2^474, grid 2^474, half cell 2^474) is at the threshold; one grid step less is finite."""
    at = FloatError("fixed_gram", Vectors(d=4, box=(-(2.0**499 - 2.0**473), 2.0**499 - 2.0**473)))
    assert at.centred_norm({}) + math.ldexp(1.0, at.grid({}) or 0) == 2.0**500
    assert at.bound({}, 1) == (math.inf, math.inf)
    below = FloatError("fixed_gram", Vectors(d=4, box=(-(2.0**499 - 2.0**474), 2.0**499 - 2.0**474)))
    b1, r = 2.0**500 - 2.0**474, 2.0**500 - 2.0**475
    assert below.bound({}, 1)[0] == up((b1 - r + 4 * U * b1) * (b1 + r) * math.sqrt(2.0) / 2.0) < math.inf
