"""Mutation-testing pins of ``dpflow/nodes/mechanisms.py``: how a lattice release is widened and calibrated.

An exact-noise release rounds the statistic to a 2^-k lattice and adds integer noise.  Two neighbouring
datasets' computed statistics can err in opposite directions and round in opposite directions, so the
sensitivity the noise is calibrated to is ``Delta + 2 x float error + lattice rounding``, the rounding
being ``step * sqrt(m)`` in l2 and ``step * m`` in l1 for m noised entries (docs/spec/accounting.md §3;
Casacuberta et al., CCS 2022).  The step is the power of two at or below scale / 2^40.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from conftest import EvalCtx

from dpflow.domains import Sym, Vectors
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.mechanisms import (
    LATTICE_BITS,
    MIN_LATTICE_STEP,
    _lattice_step,
    float_slack,
    lattice_calibration,
)
from dpflow.nodes.types import StatT
from dpflow.privacy import Cost
from dpflow.privacy.rounding import up


def test_lattice_constants() -> None:
    assert LATTICE_BITS == 40 and MIN_LATTICE_STEP == 2.0**-600


@pytest.mark.parametrize("scale", [1.0, 1.5, 2.0 - 2.0**-52, 3.0, 0.7, 2.0**-10, 1e6, 2.0**-559])
def test_lattice_step_is_the_power_of_two_at_or_below_scale_over_2_to_40(scale: float) -> None:
    step = _lattice_step(scale)
    assert step == 2.0 ** (math.floor(math.log2(scale)) - 40)
    assert step <= scale / 2.0**40 < 2 * step


@pytest.mark.parametrize("scale", [2.0**-560, 2.0**-700, 5e-324])
def test_lattice_step_never_below_the_minimum(scale: float) -> None:
    assert _lattice_step(scale) == MIN_LATTICE_STEP


@pytest.mark.parametrize(("l1", "entries"), [(False, 1), (False, 9), (True, 1), (True, 9)])
def test_lattice_calibration_widens_by_slack_and_rounding(l1: bool, entries: int) -> None:
    def scale_of(d: float) -> float:
        return 3.0 * d
    delta, slack = 1.25, 0.5
    cal = lattice_calibration(delta, slack, entries, l1, scale_of)
    assert cal is not None
    step = _lattice_step(scale_of(delta + slack))          # from the unwidened scale
    assert cal.step == step == 2.0**-38                       # scale 3 x 1.75 = 5.25 in [4, 8): 2^(2 - 40)
    rounding = step * (entries if l1 else math.sqrt(entries))
    assert cal.sensitivity == up(delta + slack + rounding)
    assert cal.sensitivity > delta + slack + rounding
    assert cal.scale == scale_of(cal.sensitivity)


def test_lattice_calibration_without_a_finite_positive_scale() -> None:
    assert lattice_calibration(0.0, 0.0, 3, False, lambda d: 2.0 * d) is None
    assert lattice_calibration(1.0, 0.0, 3, False, lambda d: math.inf) is None
    # the scale function is asked at delta + slack first
    asked: list[float] = []
    lattice_calibration(1.0, 0.25, 1, True, lambda d: asked.append(d) or d)
    assert asked[0] == 1.25


def test_float_slack_is_twice_the_float_error() -> None:
    fe = FloatError("mean", Vectors(d=3, l2_bound=Sym.const(2.0)), Sym.const(50.0))
    stat = StatT((3,), "X", None, Sym.const(0.08), None, float_error=fe)
    l2, l1 = fe.bound({}, 3)
    assert float_slack(stat, {}, 3) == (2.0 * l2, 2.0 * l1)
    assert l2 > 0 and l1 > l2
    no_bound = StatT((3,), "X", None, Sym.const(0.08), None)
    assert float_slack(no_bound, {}, 3) == (math.inf, math.inf)
    assert Fraction(2.0 * l2) == 2 * Fraction(l2)


def test_peel_scale_never_exceeds_the_certified_unit_regression() -> None:
    """Regression (found by the mutation run's review): b = nextafter(lambda / float(u)) can leave lambda / b
    above u, since float(u) and the division both round to nearest; the scale is now lambda / u rounded up
    exactly (it was a loop stepping up until the exact check held, with no bound of its own)."""
    from dpflow.nodes.mechanisms import Peel

    peel, lam, share = Peel(s=2), 8.091480733492338, Fraction(713711, 918466)
    u = peel.unit(share, "pure")
    one_step = math.nextafter(lam / float(u), math.inf)
    assert Fraction(lam) / Fraction(one_step) > u                     # the old rule fails here
    b = peel.noise_scale(lam, share, "pure")
    assert Fraction(lam) / Fraction(b) <= u
    assert b == math.nextafter(one_step, math.inf)                     # and by one more float only
    assert peel.noise_scale(0.0, share, "pure") == 0.0 and peel.noise_scale(math.inf, share, "pure") == math.inf


@pytest.mark.parametrize("mode", ["pure", "zcdp"])
def test_peel_scale_is_the_smallest_float_meeting_the_unit(mode: str) -> None:
    """b is the least float with lambda / b <= u exactly: where lambda / float(u) already meets u (a third of
    these draws) one float less would do no harm to the rule, and b takes no step above it."""
    from dpflow.nodes.mechanisms import Peel

    rng = np.random.default_rng(5)
    exact_at_nearest = 0
    for _ in range(60):
        peel = Peel(s=int(rng.integers(1, 4)))
        lam, share = float(rng.uniform(0.1, 10.0)), Fraction(int(rng.integers(1, 10**6)), int(rng.integers(1, 10**6)))
        u = peel.unit(share, mode)  # type: ignore[arg-type]
        b = peel.noise_scale(lam, share, mode)  # type: ignore[arg-type]
        assert Fraction(lam) / Fraction(b) <= u < Fraction(lam) / Fraction(math.nextafter(b, 0.0))
        exact_at_nearest += b == lam / float(u)
    assert exact_at_nearest >= 10


@pytest.mark.parametrize(("mech", "norm"), [("GaussianMech", "l2"), ("LaplaceMech", "l1"), ("Peel", "l-infinity")])
def test_an_unbounded_input_is_refused_naming_the_norm_and_the_fix(mech: str, norm: str) -> None:
    import dpflow as dp
    from dpflow import nodes as N
    from dpflow.errors import UnboundedSensitivityError

    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=3), n=10)
    node = N.Peel(s=1) if mech == "Peel" else getattr(N, mech)()
    with pytest.raises(UnboundedSensitivityError) as err:
        dp.certify(b.build(m=node(N.Mean()(X))))
    assert err.value.problem == (f"its input has unbounded {norm} sensitivity (the rows it aggregates are not "
                                 "bounded)")
    assert err.value.fix == "insert Clip (an l2 ball or a box) before the query"


_Ctx = EvalCtx


@pytest.mark.parametrize("mech", ["GaussianMech", "LaplaceMech"])
@pytest.mark.parametrize("exact", [False, True])
def test_an_infinite_sensitivity_releases_nan_at_infinite_scale(mech: str, exact: bool) -> None:
    """A sensitivity bound that is not finite (a released radius that is NaN or inf, see ``Sym.value``):
    the release is NaN in every entry whatever the data and the run records the scale as inf (never an
    exception, no noise drawn)."""
    import numpy as np

    from dpflow import nodes as N

    fe = FloatError("mean", Vectors(d=3, l2_bound=Sym.const(1.0)), Sym.const(4.0))
    stat = StatT((3,), "X", Sym.const(1.0), Sym.const(1.0), Sym.const(1.0), float_error=fe)
    ctx = _Ctx(stat, math.inf, exact)
    out = getattr(N, mech)().evaluate([np.ones(3)], ctx)  # type: ignore[arg-type]
    assert out.shape == (3,) and np.all(np.isnan(out))
    assert ctx.facts == {"sigma" if mech == "GaussianMech" else "scale": math.inf} and ctx.noise.calls == 0


def test_lattice_release_rounds_to_the_lattice_and_maps_non_finite_entries_to_zero() -> None:
    """Entries are rounded to the nearest multiple of the step, integer noise added exactly; NaN and +-inf
    count as 0 (the declared policy: never an exception, whatever the data)."""
    import numpy as np

    from dpflow.nodes.mechanisms import _lattice_release

    step = 2.0**-10
    value = np.array([math.inf, -math.inf, math.nan, 1.0 + 0.3 * step, -2.0 - 0.7 * step])
    out = _lattice_release(value, step, np.array([0, 0, 0, 3, -1]), False)
    assert out.tolist() == [0.0, 0.0, 0.0, 1.0 + 3 * step, -2.0 - 2 * step]
    sym = np.array([[1.0, math.inf], [math.inf, 2.0]])
    full = _lattice_release(sym, step, np.array([0, 5, 0]), True)           # upper triangle, mirrored
    assert full.tolist() == [[1.0, 5 * step], [5 * step, 2.0]]
    matrix = _lattice_release(np.array([[1.0, 2.0], [3.0, 4.0]]), step, np.array([1, 0, 0, 0]), False)
    assert matrix.tolist() == [[1.0 + step, 2.0], [3.0, 4.0]]                # every entry, same shape


def test_a_sensitivity_that_overflows_once_widened_releases_nan() -> None:
    """A finite sensitivity whose widening by the float slack overflows: infinite noise, never an exception."""
    import numpy as np

    from dpflow import nodes as N
    from dpflow.nodes.floaterr import OVERFLOW

    n = 1e8
    fe = FloatError("sum", Vectors(d=1, box=(-OVERFLOW / n / 4.0, OVERFLOW / n / 4.0)), Sym.const(n))
    stat = StatT((1,), "X", Sym.const(1.0), Sym.const(1.0), Sym.const(1.0), float_error=fe)
    slack = float_slack(stat, {}, 1)[0]
    big = float(np.finfo(float).max)
    assert math.isfinite(slack) and big + slack == math.inf
    ctx = _Ctx(stat, big, True)
    out = N.GaussianMech().evaluate([np.ones(1)], ctx)  # type: ignore[arg-type]
    assert np.all(np.isnan(out)) and ctx.facts == {"sigma": math.inf}


@pytest.mark.parametrize("mech", ["GaussianMech", "LaplaceMech"])
def test_a_zero_sensitivity_on_the_lattice_releases_the_statistic_unchanged(mech: str) -> None:
    """Sensitivity 0 and no float error (exact counts): the statistic does not depend on the data; it is
    released as is at scale 0, with no noise drawn and no lattice."""
    import numpy as np

    from dpflow import nodes as N

    stat = StatT((2,), "X", Sym.const(0.0), Sym.const(0.0), Sym.const(0.0), float_error=FloatError("exact",
                                                                                                    Vectors(d=1)))
    ctx = _Ctx(stat, 0.0, True)
    value = np.array([3.0, 0.1])
    out = getattr(N, mech)().evaluate([value], ctx)
    assert out.tolist() == [3.0, 0.1]
    assert ctx.facts == {"sigma" if mech == "GaussianMech" else "scale": 0.0} and ctx.noise.calls == 0


# --------------------------------------------------------------------------- round 6: Peel's lattice edges

def test_peel_on_the_lattice_at_sensitivity_zero_releases_the_top_s_unchanged() -> None:
    """Sensitivity 0 and no float error: v does not depend on the data, so Peel's lattice path releases the s
    largest |v_j| (ties to the lower index) unchanged and 0 elsewhere, at scale 0, drawing no noise."""
    import numpy as np

    from dpflow import nodes as N

    stat = StatT((5,), "X", Sym.const(0.0), Sym.const(0.0), Sym.const(0.0), float_error=FloatError("exact",
                                                                                                    Vectors(d=1)))
    ctx = _Ctx(stat, 0.0, True)
    out = N.Peel(s=2).evaluate([np.array([3.0, -5.0, 1.5, 5.0, -4.0])], ctx)  # type: ignore[arg-type]
    assert out.tolist() == [0.0, -5.0, 0.0, 5.0, 0.0]
    assert ctx.facts == {"scale": 0.0} and ctx.noise.calls == 0
    one = N.Peel(s=1).evaluate([np.array([2.0, -2.0, 1.0])], ctx)  # type: ignore[arg-type]
    assert one.tolist() == [2.0, 0.0, 0.0]


def test_peel_on_the_lattice_with_an_infinite_float_error_releases_nan() -> None:
    """A finite l-infinity sensitivity but no finite float-error bound (rows not bounded for the error term):
    the lattice release has infinite noise, every entry NaN, scale recorded as inf, no exception, no draw."""
    import numpy as np

    from dpflow import nodes as N

    fe = FloatError("mean", Vectors(d=4), Sym.const(10.0))
    stat = StatT((4,), "X", Sym.const(1.0), Sym.const(1.0), Sym.const(1.0), float_error=fe)
    assert float_slack(stat, {}, 4) == (math.inf, math.inf)
    ctx = _Ctx(stat, 1.0, True)
    out = N.Peel(s=2).evaluate([np.ones(4)], ctx)  # type: ignore[arg-type]
    assert out.shape == (4,) and np.all(np.isnan(out))
    assert ctx.facts == {"scale": math.inf} and ctx.noise.calls == 0


@pytest.mark.parametrize(("share", "mode", "ratio", "eps"), [(Fraction(1), "pure", Fraction(1, 4), Fraction(1)),
                                                             (Fraction(1, 2), "zcdp", Fraction(1, 2), Fraction(1)),
                                                             (Fraction(2), "pure", Fraction(1), Fraction(2))])
def test_laplace_one_sided_cost_is_ratio_times_the_shares_epsilon(share: Fraction, mode: str, ratio: Fraction,
                                                                   eps: Fraction) -> None:
    """The same Laplace noise at l1 shift ratio * Delta_1 is ratio * epsilon-DP, epsilon the share's (a zCDP share
    rho buys epsilon = sqrt(2 rho): rho = 1/2 is epsilon 1)."""
    from dpflow.nodes.mechanisms import LaplaceMech

    mech = LaplaceMech()
    full = mech.eps(share, mode)  # type: ignore[arg-type]
    assert full == eps if mode == "pure" else eps - Fraction(2, 10**12) < full <= eps  # sqrt(2 rho), rounded down
    assert mech.one_sided_cost(share, mode, ratio) == Cost.pure(ratio * full)  # type: ignore[arg-type]


class _Draws:
    """An exact noise source whose discrete Laplace draws are given in advance; it records what it is asked."""

    exact = True

    def __init__(self, *draws: list[int] | list[list[int]]) -> None:
        self.draws, self.asked, self.calls = list(draws), [], 0

    def discrete_laplace(self, t: Fraction, shape: tuple[int, ...]) -> object:
        import numpy as np

        self.calls += 1
        self.asked.append((t, shape))
        return np.asarray(self.draws.pop(0), dtype=np.int64).reshape(shape)


def _exact_peel_stat(d: int) -> StatT:
    return StatT((d,), "X", Sym.const(1.0), Sym.const(1.0), Sym.const(1.0), float_error=FloatError("exact",
                                                                                                    Vectors(d=1)))


def test_peel_on_the_lattice_draws_integer_noise_at_scale_over_step() -> None:
    """Pure share 3, s = 1, lambda = 1: u = 1, step 2^-40 (b just above 1), t = scale / step.  The scores are
    |k_j| + Z_j (the score noise moves the choice to coordinate 2 here) and the release k_j + Z (+5 lattice
    steps); the scale is the pure-mode scale of the widened sensitivity."""
    import numpy as np

    from dpflow import nodes as N
    from dpflow.nodes.mechanisms import Peel, unit_lattice
    from dpflow.nodes.types import Allocation

    peel, share = N.Peel(s=1), Fraction(3)
    v = np.array([0.5, -2.0, 1.0])
    step = 2.0**-40
    k1 = int(2.0 / step)
    noise = _Draws([[0, 0, 2 * k1]], [5])
    ctx = _Ctx(_exact_peel_stat(3), 1.0, True, Allocation("pure", share, Cost.pure(share)), noise)
    out = peel.evaluate([v], ctx)  # type: ignore[arg-type]
    cal = unit_lattice("linf", 1.0, (0.0, 0.0), 3, lambda x: Peel(s=1).noise_scale(x, share, "pure"))
    assert cal is not None and cal.step == step
    assert ctx.facts == {"scale": cal.scale, "lattice": {"step": step, "sensitivity": cal.sensitivity,
                                                         "float_slack": 0.0}}
    t = Fraction(cal.scale) / Fraction(step)
    assert noise.asked == [(t, (1, 3)), (t, (1,))]
    assert out.tolist() == [0.0, 0.0, 1.0 + 5 * step]


def test_peel_on_the_lattice_keeps_exact_integers() -> None:
    """A fixed-point statistic's units are used as exact integers: k = 2^53 + 1 beats 2^53 (equal as floats) and
    is released exactly, and k = -2^63 (whose int64 absolute value overflows) has the largest |k|."""
    import numpy as np

    from dpflow import nodes as N
    from dpflow.nodes.fixedpoint import FixedPoint
    from dpflow.nodes.types import Allocation

    share = Fraction(3)
    alloc = Allocation("pure", share, Cost.pure(share))
    ctx = _Ctx(_exact_peel_stat(2), 1.0, True, alloc)
    big = FixedPoint(np.array([2**53, 2**53 + 1], dtype=object), -40)
    assert N.Peel(s=1).evaluate([big], ctx).tolist() == [0.0, (2**53 + 1) * 2.0**-40]  # type: ignore[arg-type]
    low = FixedPoint(np.array([-(2**63), 1], dtype=object), -40)
    assert N.Peel(s=1).evaluate([low], ctx).tolist() == [-(2.0**23), 0.0]  # type: ignore[arg-type]


def test_peel_zero_sensitivity_with_an_overflowing_float_error_is_not_released() -> None:
    """lambda = 0 but a finite float error so large that the scale overflows (a tiny pure share): the
    release has infinite noise (NaN).  Only both zero -- sensitivity and error -- releases v unchanged."""
    import numpy as np

    from dpflow import nodes as N
    from dpflow.nodes.types import Allocation

    fe = FloatError("sum", Vectors(d=1, box=(-1e290, 1e290)), Sym.const(1e10))
    stat = StatT((2,), "X", Sym.const(0.0), Sym.const(0.0), Sym.const(0.0), float_error=fe)
    slack = float_slack(stat, {}, 2)[0]
    share = Fraction(3, 10**14)
    assert math.isfinite(slack) and N.Peel(s=1).noise_scale(slack, share, "pure") == math.inf
    ctx = _Ctx(stat, 0.0, True, Allocation("pure", share, Cost.pure(share)))
    out = N.Peel(s=1).evaluate([np.array([3.0, 1.0])], ctx)  # type: ignore[arg-type]
    assert np.all(np.isnan(out)) and ctx.facts == {"scale": math.inf} and ctx.noise.calls == 0


def test_peel_fixed_epsilon_costs_its_2s_pure_steps() -> None:
    """Peel(epsilon=1, s=2): unit u = 1/6 (3 s u = epsilon); in zCDP units s (2u)^2 / 2 + s u^2 / 2 = 5/36."""
    from dpflow import nodes as N

    peel = N.Peel(s=2, epsilon=1)
    assert peel.fixed_share("pure") == 1 and peel.fixed_share("zcdp") == Fraction(5, 36)
    assert N.Peel(s=2).fixed_share("pure") is None


def test_peel_noise_text() -> None:
    from dpflow import nodes as N

    stat = _exact_peel_stat(4)
    assert N.Peel(s=3).noise_text(stat, Fraction(9), "pure") == (
        "Laplace, b = 1 / 1, 6 draws of d values; exact sources: discrete Laplace (report-noisy-max on integer "
        "scores) on a 2^-k lattice, linf sensitivity + lattice step + 2 x float error")


def _peel_plan(node: object, query: str = "Mean", d: int = 3) -> object:
    import dpflow as dp
    from dpflow import nodes as N

    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=d), n=10)
    return b.build(m=node(getattr(N, query)()(N.Clip(radius=1.0)(X))))  # type: ignore[operator]


def test_peel_refusals_name_the_node_the_problem_and_the_fix() -> None:
    import dpflow as dp
    from dpflow import nodes as N
    from dpflow.errors import DomainError

    with pytest.raises(DomainError) as err:
        dp.certify(_peel_plan(N.Peel(s=1), "SecondMoment"))  # type: ignore[arg-type]
    assert (err.value.node[:5], err.value.problem, err.value.fix) == (
        "peel_", "Peel selects from a vector, got shape (3, 3)", "apply Peel to a vector statistic such as Mean")
    with pytest.raises(DomainError) as err:
        dp.certify(_peel_plan(N.Peel(s=4)))  # type: ignore[arg-type]
    assert (err.value.node[:5], err.value.problem, err.value.fix) == ("peel_", "s=4 exceeds the dimension 3",
                                                                      "choose s <= d")
    dp.certify(_peel_plan(N.Peel(s=3)))  # type: ignore[arg-type]  # s = d selects every coordinate
    with pytest.raises(ValueError, match="^Peel needs s >= 1, got 0$"):
        N.Peel(s=0)


class _Laplace:
    """A continuous noise source whose Laplace draws are given in advance."""

    exact = False

    def __init__(self, *draws: list[float] | list[list[float]]) -> None:
        self.draws = list(draws)

    def laplace(self, b: float, shape: tuple[int, ...]) -> object:
        import numpy as np

        return np.asarray(self.draws.pop(0), dtype=float).reshape(shape)


def test_continuous_peel_adds_its_score_and_release_noise() -> None:
    """Scores |v_j| + Z_j (the score noise moves the choice to coordinate 2), release v_j + Z."""
    import numpy as np

    from dpflow import nodes as N

    ctx = _Ctx(_exact_peel_stat(3), 1.0, False, noise=_Laplace([[0.0, 0.0, 10.0]], [0.25]))
    out = N.Peel(s=1).evaluate([np.array([0.5, -2.0, 1.0])], ctx)  # type: ignore[arg-type]
    assert out.tolist() == [0.0, 0.0, 1.25]


def test_lattice_release_paths_agree_and_never_overflow() -> None:
    """The int64 fast path is taken only when the sums fit (|k| < 2^62 and |z| < 2^62); otherwise each entry is
    k + z in Python ints, rounded by ``to_float`` (truncated to 64 bits, then rounded).  An empty release is
    empty (no max over nothing)."""
    import numpy as np

    from dpflow.nodes.fixedpoint import FixedPoint
    from dpflow.nodes.mechanisms import _lattice_release

    assert _lattice_release(np.zeros(0), 1.0, np.zeros(0, dtype=np.int64), False).tolist() == []
    # z beyond int64 sums: a scaled entry of 5 and z = 2^63 - 1 would wrap in int64
    big = np.array([2**63 - 1], dtype=np.int64)
    assert _lattice_release(np.array([5.0]), 1.0, big, False).tolist() == [float(2**63 + 4)]
    # scaled entries at 1.5 x 2^62 (beyond 2^62) and z = 2^62 - 1: their int64 sum would wrap
    k = FixedPoint(np.array([3 * 2**61], dtype=object), 0)
    assert _lattice_release(k, 1.0, np.array([2**62 - 1], dtype=np.int64), False).tolist() == [2.5 * 2.0**62]
    # object draws take the exact path: to_float's rule (2^64 + 2^11 + 1 -> 2^64), +-inf beyond the floats
    z = np.array([2**64 + 2**11 + 1, -(2**1100), 5], dtype=object)
    assert _lattice_release(np.zeros(3), 1.0, z, False).tolist() == [2.0**64, -math.inf, 5.0]
    # a fixed-point entry is added to z exactly before the one rounding: 2^60 + 128 + 100 -> 2^60 + 256
    exact = _lattice_release(FixedPoint(np.array([2**60 + 128], dtype=object), 0), 1.0, np.array([100]), False)
    assert exact.tolist() == [2.0**60 + 256]


@pytest.mark.parametrize(("mech", "unit"), [("LaplaceMech", "l1"), ("GaussianMech", "l2")])
@pytest.mark.parametrize("one_sided", [None, 0.5])
def test_lattice_release_widens_in_its_own_norm_over_m_entries(mech: str, unit: str, one_sided: float | None) -> None:
    """LaplaceMech widens its l1 sensitivity by the l1 slack and step * m, GaussianMech its l2 one by the l2
    slack and step * sqrt(m) (m = 4 entries here, where the two differ); a one-sided ratio q divides the slack and
    the rounding.  The recorded lattice is :func:`unit_lattice`'s, at the mechanism's own scale function."""
    import numpy as np

    from dpflow import nodes as N
    from dpflow.nodes.mechanisms import unit_lattice

    fe = FloatError("mean", Vectors(d=4, l2_bound=Sym.const(1.0)), Sym.const(1e6))
    half = None if one_sided is None else (Sym.const(one_sided),) * 3
    stat = StatT((4,), "X", Sym.const(1.0), Sym.const(1.0), Sym.const(1.0), float_error=fe, one_sided=half)
    ctx = _Ctx(stat, 1.0, True)
    node = getattr(N, mech)()
    node.evaluate([np.zeros(4)], ctx)
    share, mode = ctx.alloc.share, ctx.alloc.mode  # type: ignore[attr-defined]
    ratio = Fraction(1) if one_sided is None else Fraction(1, 2)
    cal = unit_lattice(unit, 1.0, float_slack(stat, {}, 4), 4, lambda x: node.noise_scale(x, share, mode), ratio)
    assert cal is not None
    other = unit_lattice("l2" if unit == "l1" else "l1", 1.0, float_slack(stat, {}, 4), 4,
                         lambda x: node.noise_scale(x, share, mode), ratio)
    assert other is not None and other.sensitivity != cal.sensitivity
    slack = float_slack(stat, {}, 4)[0 if unit == "l2" else 1]
    assert ctx.facts["lattice"] == {"step": cal.step, "sensitivity": cal.sensitivity, "float_slack": slack}
    assert ctx.facts["sigma" if mech == "GaussianMech" else "scale"] == cal.scale


def test_continuous_laplace_noise_on_a_symmetric_statistic_is_mirrored() -> None:
    """One Laplace draw per upper-triangle entry, mirrored: the lower triangle is not a second noisy copy."""
    import numpy as np

    from dpflow import nodes as N

    stat = StatT((2, 2), "X", Sym.const(1.0), Sym.const(1.0), Sym.const(1.0), symmetric=True)
    ctx = _Ctx(stat, 1.0, False, noise=_Laplace([[1.0, 2.0], [3.0, 4.0]]))
    out = N.LaplaceMech().evaluate([np.zeros((2, 2))], ctx)  # type: ignore[arg-type]
    assert out.tolist() == [[1.0, 2.0], [2.0, 4.0]]


def test_gaussian_one_sided_cost_is_ratio_squared_rho() -> None:
    from dpflow.nodes.mechanisms import GaussianMech

    assert GaussianMech().one_sided_cost(Fraction(1, 2), "zcdp", Fraction(1, 3)) == Cost.gaussian_zcdp(Fraction(1,
                                                                                                                18))
    with pytest.raises(Exception, match="GaussianMech"):
        GaussianMech().one_sided_cost(Fraction(1, 2), "pure", Fraction(1, 3))


def test_noise_texts_and_input_checks() -> None:
    """The ledger's noise and sensitivity texts: formula, the scale for a constant sensitivity, the mirrored upper
    triangle, and which sampler an exact source uses (continuous without a float-error bound)."""
    from dpflow.nodes.mechanisms import GaussianMech, LaplaceMech

    exact = FloatError("exact", Vectors(d=1))
    sym = StatT((2, 2), "X", Sym.const(2.0), Sym.const(2.0), Sym.const(2.0), symmetric=True, float_error=exact)
    vec = StatT((2,), "X", Sym.const(2.0), Sym.const(2.0), Sym.const(2.0))
    lattice = "; exact sources: discrete {} on a 2^-k lattice, sensitivity + lattice + 2 x float error"
    assert LaplaceMech().noise_text(sym, Fraction(1, 2), "pure") == (
        "Laplace, b = 2 / 0.5 = 4 (upper triangle, mirrored)" + lattice.format("Laplace"))
    assert GaussianMech().noise_text(sym, Fraction(1, 2), "zcdp") == (
        "Gaussian, sigma = 2 / sqrt(2*0.5) = 2 (upper triangle, mirrored)" + lattice.format("Gaussian"))
    assert LaplaceMech().noise_text(vec, Fraction(1, 2), "zcdp") == (
        "Laplace, b = 2 / 1 = 2; continuous noise on every source (this statistic has no floating-point error bound)")

    class _Infer:
        node_id = "lap"

    assert LaplaceMech().check_input(sym, _Infer()) == "l1 = 2 (upper triangle)"  # type: ignore[arg-type]
    assert LaplaceMech().check_input(vec, _Infer()) == "l1 = 2"  # type: ignore[arg-type]


def test_laplace_refuses_a_matrix_without_an_l1_rule() -> None:
    from dpflow.errors import UnboundedSensitivityError
    from dpflow.nodes.mechanisms import LaplaceMech

    class _Infer:
        node_id = "lap"

    sym = StatT((2, 2), "X", None, Sym.const(2.0), Sym.const(2.0), symmetric=True)
    with pytest.raises(UnboundedSensitivityError) as err:
        LaplaceMech().check_input(sym, _Infer())  # type: ignore[arg-type]
    assert (err.value.node, err.value.problem, err.value.fix) == (
        "lap", "a matrix statistic has no l1 sensitivity rule", "use GaussianMech for second moments")


def test_epsilon_mechanisms_pure_and_bounded_range_units() -> None:
    """A fixed epsilon is the pure share itself, eps^2/2 in zCDP units, eps^2/8 for a bounded-range mechanism
    (Cesar-Rogers 2021); a zCDP share rho buys sqrt(2 rho), or sqrt(8 rho) bounded-range (rounded down); the
    cost is a bounded-range or a pure cost accordingly."""
    from dpflow.nodes.mechanisms import LaplaceMech
    from dpflow.nodes.quantile import Quantile
    from dpflow.privacy import bounded_range_eps_for_zcdp, pure_eps_for_zcdp

    lap, br = LaplaceMech(epsilon=1), Quantile(q=0.5, epsilon=1)
    assert (lap.fixed_share("pure"), lap.fixed_share("zcdp")) == (1, Fraction(1, 2))
    assert (br.fixed_share("pure"), br.fixed_share("zcdp")) == (1, Fraction(1, 8))
    assert LaplaceMech().fixed_share("zcdp") is None
    assert br.eps(Fraction(1, 8), "zcdp") == bounded_range_eps_for_zcdp(Fraction(1, 8)) != pure_eps_for_zcdp(
        Fraction(1, 8))
    assert lap.eps(Fraction(1, 2), "zcdp") == pure_eps_for_zcdp(Fraction(1, 2)) and br.eps(Fraction(3), "pure") == 3
    assert br.cost(Fraction(1), "pure") == Cost.bounded_range(Fraction(1))
    assert lap.cost(Fraction(1), "pure") == Cost.pure(Fraction(1)) != Cost.bounded_range(Fraction(1))


def test_gaussian_takes_the_lattice_unless_certified_on_its_continuous_profile() -> None:
    from dpflow.nodes.mechanisms import GaussianMech
    from dpflow.nodes.types import Allocation

    fe = FloatError("exact", Vectors(d=1))
    with_fe = StatT((1,), "X", None, Sym.const(1.0), None, float_error=fe)
    without = StatT((1,), "X", None, Sym.const(1.0), None)
    for continuous in (False, True):
        alloc = Allocation("zcdp", Fraction(1), Cost.zcdp(Fraction(1)), continuous_gaussian=continuous)
        assert GaussianMech().takes_lattice(with_fe, alloc) is (not continuous)
        assert GaussianMech().takes_lattice(without, alloc) is False


@pytest.mark.parametrize("mech", ["GaussianMech", "LaplaceMech", "Peel"])
def test_infer_releases_the_statistics_shape_marked_with_the_node(mech: str) -> None:
    """The released type has the statistic's shape and names the mechanism's node (what ``noise_scale`` reads);
    no derivation text (the ledger's derivation is the input check's)."""
    from dpflow import nodes as N
    from dpflow.nodes.types import Inferred, ReleasedT

    class _Infer:
        node_id = "m"

    stat = StatT((3,), "X", Sym.const(1.0), Sym.const(1.0), Sym.const(1.0))
    node = N.Peel(s=1) if mech == "Peel" else getattr(N, mech)()
    assert node.infer([stat], _Infer()) == Inferred(ReleasedT((3,), "m"), "")  # type: ignore[arg-type]


def test_continuous_gaussian_adds_its_noise() -> None:
    import numpy as np

    from dpflow import nodes as N

    class _Normal:
        exact = False

        def normal(self, sigma: float, shape: tuple[int, ...]) -> object:
            return np.full(shape, 0.5)

    ctx = _Ctx(_exact_peel_stat(2), 1.0, False, noise=_Normal())
    assert N.GaussianMech().evaluate([np.array([1.0, 2.0])], ctx).tolist() == [1.5, 2.5]  # type: ignore[arg-type]


@pytest.mark.parametrize("l1", [False, True])
def test_one_sided_lattice_calibration_divides_slack_and_rounding_by_q(l1: bool) -> None:
    """With a one-sided ratio q < 1 the widened sensitivity is delta + up(slack + rounding) / q, rounded up: a
    one-sided change moves the rounded statistic by q delta + slack + rounding = q x that (mechanisms.py)."""
    def scale_of(d: float) -> float:
        return 3.0 * d
    delta, slack, q, entries = 1.25, 0.5, Fraction(1, 4), 9
    cal = lattice_calibration(delta, slack, entries, l1, scale_of, q)
    assert cal is not None
    step = _lattice_step(scale_of(delta + slack))
    rounding = step * (entries if l1 else math.sqrt(entries))
    assert cal.sensitivity == up(delta + up(slack + rounding) / 0.25)
    assert cal.scale == scale_of(cal.sensitivity)


@pytest.mark.parametrize("ratio", [Fraction(1), Fraction(1, 2)])
def test_unit_lattice_picks_the_units_slack_and_rounding(ratio: Fraction) -> None:
    """l1: the l1 slack and step * m; l2: the l2 slack and step * sqrt(m); linf (Peel, one coordinate at a time):
    the l2 slack and one step; each with the ratio handed on."""
    from dpflow.nodes.mechanisms import unit_lattice

    def scale_of(d: float) -> float:
        return 2.0 * d
    slacks, m = (0.25, 0.75), 16

    def want(slack: float, entries: int, l1: bool) -> float:
        cal = lattice_calibration(1.0, slack, entries, l1, scale_of, ratio)
        assert cal is not None
        step = _lattice_step(scale_of(1.0 + slack))
        rounding = step * (entries if l1 else math.sqrt(entries))
        assert cal.sensitivity == (up(1.0 + slack + rounding) if ratio == 1 else
                                   up(1.0 + up(slack + rounding) / float(ratio)))
        return cal.sensitivity

    for unit, slack, entries, l1 in [("l1", 0.75, m, True), ("l2", 0.25, m, False), ("linf", 0.25, 1, False)]:
        got = unit_lattice(unit, 1.0, slacks, m, scale_of, ratio)
        assert got is not None and got.sensitivity == want(slack, entries, l1), unit


def test_a_clamped_step_raises_the_scale_to_2_to_40_steps() -> None:
    """A scale so small that the step is clamped at MIN_LATTICE_STEP: the scale is raised to step * 2^40, so that
    the noise in lattice units is at least LATTICE_MIN_SIGMA = 2^40 (what the lattice Gaussian PLD assumes)."""
    from dpflow.privacy.pld import LATTICE_MIN_SIGMA

    cal = lattice_calibration(2.0**-700, 0.0, 1, False, lambda d: d)
    assert cal is not None and cal.step == MIN_LATTICE_STEP
    assert LATTICE_MIN_SIGMA == 2.0**40 and cal.scale == MIN_LATTICE_STEP * 2.0**40


@pytest.mark.parametrize("mech", ["GaussianMech", "LaplaceMech", "Peel"])
def test_a_mechanism_on_rows_is_refused_naming_what_it_needs(mech: str) -> None:
    from dpflow import nodes as N
    from dpflow.errors import PlanTypeError
    from dpflow.nodes.types import ReleasedT

    class _Infer:
        node_id = "m"

    node = N.Peel(s=1) if mech == "Peel" else getattr(N, mech)()
    with pytest.raises(PlanTypeError) as err:
        node.infer([ReleasedT((2,))], _Infer())
    what = "a sensitive aggregate (a query such as Mean or Sum)"
    assert (err.value.node, err.value.problem, err.value.fix) == ("m", f"expects {what}, got Released",
                                                                  f"pass {what}")


def test_unbounded_and_pure_refusals_name_their_node() -> None:
    from dpflow.errors import PlanTypeError, UnboundedSensitivityError
    from dpflow.nodes.mechanisms import GaussianMech, _unbounded

    class _Infer:
        node_id = "m"

    assert _unbounded(_Infer(), "l2").node == "m"  # type: ignore[arg-type]
    for refuse in (lambda: GaussianMech().cost(Fraction(1), "pure"),
                   lambda: GaussianMech().noise_scale(1.0, Fraction(1), "pure")):
        with pytest.raises(PlanTypeError) as err:
            refuse()
        assert err.value.node == "GaussianMech" and "cannot meet a pure-DP budget" in err.value.problem
    assert isinstance(_unbounded(_Infer(), "l1"), UnboundedSensitivityError)  # type: ignore[arg-type]


def test_peel_scale_stops_at_exact_equality() -> None:
    """u = 1/93 (pure share 1/31, s = 1): 1 / float(u) rounds to the float below 93, one step up is 93 exactly,
    where lambda / b = u holds: b = 93, not one more step."""
    from dpflow.nodes.mechanisms import Peel

    assert Peel(s=1).unit(Fraction(1, 31), "pure") == Fraction(1, 93)
    assert Peel(s=1).noise_scale(1.0, Fraction(1, 31), "pure") == 93.0


def test_an_overflowing_widened_sensitivity_keeps_the_shape() -> None:
    import numpy as np

    from dpflow import nodes as N
    from dpflow.nodes.floaterr import OVERFLOW

    fe = FloatError("sum", Vectors(d=1, box=(-OVERFLOW / 1e8 / 4.0, OVERFLOW / 1e8 / 4.0)), Sym.const(1e8))
    stat = StatT((2, 1), "X", Sym.const(1.0), Sym.const(1.0), Sym.const(1.0), float_error=fe)
    for mech in (N.GaussianMech(), N.LaplaceMech()):
        out = mech.evaluate([np.ones((2, 1))], _Ctx(stat, float(np.finfo(float).max), True))  # type: ignore[arg-type]
        assert out.shape == (2, 1) and np.all(np.isnan(out))


def test_no_lattice_calibration_when_the_widened_scale_is_not_finite() -> None:
    """The unwidened scale is finite (1), the widened sensitivity above 1 is not: no lattice release is made (the
    release then draws no noise and is NaN, the declared infinite-noise policy)."""
    from dpflow.nodes.mechanisms import lattice_calibration

    assert lattice_calibration(1.0, 0.0, 1, False, lambda d: math.inf if d > 1.0 else d) is None
    assert lattice_calibration(1.0, 0.0, 1, False, lambda d: d) is not None
