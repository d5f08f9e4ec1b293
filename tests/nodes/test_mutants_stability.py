"""Pins for the stability histograms' release step (mutation run of ``nodes/stability.py``, 2026-11-23 night):
the noise each path draws (continuous Laplace / Gaussian, or under an exact source the discrete Laplace of the same
scale and the discrete Gaussian of variance sigma^2), its sign, and the threshold compared, all restated from
``scale_threshold`` at the certified share.  Before these, a discrete Gaussian drawn at variance 2 sigma (or
sigma^3) in place of sigma^2 passed every subject test.  Round 7 (2026-11-24) adds the input rule of the thresholds
(counts of linf 1 and an integer l1, a constant l2 where the Gaussian's threshold reads it), the bin keys on every
path, the histograms' missing pure cost and open-interval delta, the facts a release records, and the ledger
texts whole (which showed delta as a 40-digit fraction until then)."""

from __future__ import annotations

import math
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from conftest import ZeroNoise

import dpflow as dp
from dpflow import nodes as N
from dpflow.domains import ReleasedScalar, Sym
from dpflow.errors import DomainError, PlanError, PlanTypeError
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.nodes.stability import BinCounts, stable_mode, threshold_counts
from dpflow.nodes.types import StatT

SHIFT = 7  # every draw: counts of 1 pass no threshold here, counts of 400 always do


class _Constant(ZeroNoise):
    """Every draw is SHIFT, and each call's scale argument is recorded by kind."""

    def __init__(self, exact: bool) -> None:
        super().__init__()
        self.exact = exact  # type: ignore[misc]
        self.seen: list[tuple[str, Any]] = []

    def normal(self, sigma: float, shape: tuple[int, ...]) -> np.ndarray:
        self.seen.append(("normal", sigma))
        return np.full(shape, float(SHIFT))

    def laplace(self, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        self.seen.append(("laplace", scale))
        return np.full(shape, float(SHIFT))

    def discrete_gaussian(self, sigma2: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        self.seen.append(("discrete_gaussian", sigma2))
        return np.full(shape, SHIFT, dtype=np.int64)

    def discrete_laplace(self, scale: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        self.seen.append(("discrete_laplace", scale))
        return np.full(shape, SHIFT, dtype=np.int64)


DATA = np.concatenate([np.full(400, 0.5), np.full(300, 3.5), [9.5]])  # bins 0, 3 (heavy) and 9 (one row)


def _run(node: Any, exact: bool) -> tuple[Any, Any, _Constant, Fraction]:
    b = dp.PlanBuilder(budget=dp.ApproxZCDP(Fraction(1, 2), 1e-6), neighbors="replace")
    X = b.source("X", dp.Reals(), n=len(DATA))
    h = node(N.BinCounts(width=1.0)(X))
    cert = dp.certify(b.build(h=h), exact_noise=exact)
    noise = _Constant(exact)
    keys, values = execute(cert, {"X": DATA}, noise, NumpyBackend()).released["h"]
    return keys, values, noise, cert.allocations[h.id].share


@pytest.mark.parametrize("exact", [False, True])
def test_gaussian_histogram_draws_sigma_and_releases_counts_plus_noise_above_t(exact: bool) -> None:
    node = N.GaussianStabilityHistogram(delta=1e-7)
    keys, values, noise, share = _run(node, exact)
    sigma, t = node.scale_threshold(2.0, math.sqrt(2.0), share)  # replace-one: l1 2, l2 sqrt 2
    assert noise.seen == ([("discrete_gaussian", Fraction(sigma) ** 2)] if exact else [("normal", sigma)])
    assert sorted(np.asarray(values).tolist()) == [300 + SHIFT, 400 + SHIFT]  # + the draw, bin 9 below t
    assert 1 + SHIFT <= t < 300


@pytest.mark.parametrize("exact", [False, True])
def test_laplace_histogram_draws_b_and_releases_counts_plus_noise_above_t(exact: bool) -> None:
    node = N.StabilityHistogram(delta=1e-7)
    keys, values, noise, share = _run(node, exact)
    b, t = node.scale_threshold(2.0, node.eps(share, "zcdp"))
    assert noise.seen == ([("discrete_laplace", Fraction(b))] if exact else [("laplace", b)])
    assert sorted(np.asarray(values).tolist()) == [300 + SHIFT, 400 + SHIFT]
    assert 1 + SHIFT <= t < 300


@pytest.mark.parametrize("exact", [False, True])
def test_a_count_exactly_at_the_threshold_is_not_released(exact: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Released strictly above t (above the raised t + 1/2 under an exact source): a bin whose noisy count equals
    the threshold stays out."""
    node = N.GaussianStabilityHistogram(delta=1e-7)
    real = N.GaussianStabilityHistogram.scale_threshold

    def at_401(self: Any, l1: float, l2: float, rho: Fraction) -> tuple[float, float]:
        sigma, _ = real(self, l1, l2, rho)
        return sigma, float(400 + SHIFT)  # bin 0's noisy count exactly

    monkeypatch.setattr(N.GaussianStabilityHistogram, "scale_threshold", at_401)
    _, values, _, _ = _run(node, exact)
    assert sorted(np.asarray(values).tolist()) == []


def test_laplace_count_exactly_at_the_threshold_is_not_released(monkeypatch: pytest.MonkeyPatch) -> None:
    node = N.StabilityHistogram(delta=1e-7)
    real = N.StabilityHistogram.scale_threshold

    def at_407(self: Any, l1: float, eps: Any) -> tuple[float, float]:
        return real(self, l1, eps)[0], float(400 + SHIFT)

    monkeypatch.setattr(N.StabilityHistogram, "scale_threshold", at_407)
    assert np.asarray(_run(node, False)[1]).tolist() == []
    # an exact source compares with the raised t + 1/2 (a float strictly above it): 407 passes 406.5+
    monkeypatch.setattr(N.StabilityHistogram, "scale_threshold", lambda self, l1, eps: (real(self, l1, eps)[0], 406.0))
    assert sorted(np.asarray(_run(node, True)[1]).tolist()) == [400 + SHIFT]


# --- round 7: the input rule, the bin keys, the costs and texts (mutation run of 2026-11-24) --------------------

_CTX: Any = SimpleNamespace(node_id="h", relation="replace")
_ONE = Sym.const(1.0)


def _stat(l1: Sym | None, l2: Sym | None, linf: Sym | None) -> StatT:
    return StatT((), "X", l1, l2, linf)


def _refusal(stat: StatT, l2: bool) -> tuple[str, str | None, str, str]:
    with pytest.raises(PlanError) as info:
        threshold_counts(stat, _CTX, l2)
    e = info.value
    return type(e).__name__, e.node, e.problem, e.fix


_UNBOUNDED = ("UnboundedSensitivityError", "h", "its input has unbounded sensitivity",
              "feed it counts (BinCounts, TupleCellCounts)")


@pytest.mark.parametrize(("stat", "l2"), [
    (_stat(None, _ONE, _ONE), False), (_stat(Sym.const(2.0), _ONE, None), False),
    (_stat(None, None, None), False), (_stat(Sym.const(2.0), None, _ONE), True)])
def test_the_thresholds_refuse_an_unbounded_input(stat: StatT, l2: bool) -> None:
    assert _refusal(stat, l2) == _UNBOUNDED


@pytest.mark.parametrize(("stat", "l2", "got"), [
    (_stat(Sym.const(2.5), _ONE, _ONE), False, "l1 2.5, linf 1"),
    (_stat(Sym.const(0.0), _ONE, _ONE), False, "l1 0, linf 1"),
    (_stat(Sym.const(2.0), _ONE, Sym.const(2.0)), False, "l1 2, linf 2"),
    (_stat(Sym.ref(ReleasedScalar("k")), _ONE, _ONE), False, "l1 k, linf 1"),
    (_stat(Sym.const(2.0), Sym.ref(ReleasedScalar("k")), _ONE), True, "l1 2, linf 1")])
def test_the_thresholds_need_counts_of_linf_1_and_an_integer_l1(stat: StatT, l2: bool, got: str) -> None:
    """A non-constant l2 is refused only where the threshold reads it (the Gaussian histogram's)."""
    assert _refusal(stat, l2) == (
        "DomainError", "h", f"the thresholds need counts of linf 1 and an integer l1; got {got}",
        "apply the count query directly to the rows (no stability > 1 transform)")
    if l2:
        assert threshold_counts(stat, _CTX, False) == "l1 = 2, linf = 1"


def test_the_input_rule_text_and_which_histogram_reads_l2() -> None:
    stat = _stat(Sym.const(2.0), Sym.const(1.5), _ONE)
    assert threshold_counts(stat, _CTX, False) == "l1 = 2, linf = 1"
    assert threshold_counts(stat, _CTX, True) == "l1 = 2, l2 = 1.5, linf = 1"
    node_l = N.StabilityHistogram(delta=1e-6)
    node_g = N.GaussianStabilityHistogram(delta=1e-6)
    assert node_l.check_input(stat, _CTX) == "l1 = 2, linf = 1"
    assert node_g.check_input(stat, _CTX) == threshold_counts(stat, _CTX, True)


@pytest.mark.parametrize("bad", [0, 1, 1.5])
def test_the_histograms_delta_must_be_in_the_open_unit_interval(bad: float) -> None:
    for cls in (N.StabilityHistogram, N.GaussianStabilityHistogram):
        with pytest.raises(ValueError) as info:
            cls(delta=bad)
        assert str(info.value) == f"delta must be in (0, 1), got {bad!r}"


def test_the_histograms_have_no_pure_cost() -> None:
    for node in (N.StabilityHistogram(delta=1e-6), N.GaussianStabilityHistogram(delta=1e-6)):
        with pytest.raises(PlanTypeError) as info:
            node.cost(Fraction(1), "pure")
        assert info.value.node == node.kind


def test_bin_keys_on_every_path() -> None:
    """Integer rows (of a type that fits int64) on the unit grid are their own keys (exact beyond 2^53), otherwise
    floor((x - shift) / width); NaN counts as 0, +-inf and huge values are clamped to +-2^62 (uint64 rows from 2^63
    wrapped to negative keys before round 7); keys are int64 on both paths."""
    big = 2**60 + 1
    ints = np.array([[5], [-3], [big], [-(2**63)], [2**63 - 1]], dtype=np.int64)
    unit = BinCounts(width=1.0).keys(ints)
    assert unit.dtype == np.int64 and unit.tolist() == [5, -3, big, -(2**62), 2**62]
    assert BinCounts(width=2.0).keys(ints[:2]).tolist() == [2, -2]
    assert BinCounts(width=1.0, shift=0.5).keys(ints[:2]).tolist() == [4, -4]
    # unsigned: uint32 on the fast path; uint64 (which would wrap in int64) clamped through floats
    assert BinCounts(width=1.0).keys(np.array([[2**32 - 1]], dtype=np.uint32)).tolist() == [2**32 - 1]
    huge = BinCounts(width=1.0).keys(np.array([[2**64 - 1], [2**63], [7]], dtype=np.uint64))
    assert huge.dtype == np.int64 and huge.tolist() == [2**62, 2**62, 7]
    assert BinCounts(width=1.0).keys(np.array([[True], [False]])).tolist() == [1, 0]
    floats = np.array([[0.2], [-0.1], [np.nan], [np.inf], [-np.inf], [1e300]])
    got = BinCounts(width=0.5, shift=0.25).keys(floats)
    assert got.dtype == np.int64 and got.tolist() == [-1, -1, -1, 2**62, -(2**62), 2**62]
    assert BinCounts(width=0.5).keys(np.array([0.2, 1.1])).tolist() == [0, 2]  # 1-d blocks too


def test_bin_counts_refusals_and_ledger_text() -> None:
    b = dp.PlanBuilder(budget=dp.ApproxZCDP(Fraction(1, 2), 1e-6), neighbors="replace")
    X = b.source("X", dp.Reals(), n=10)
    c = N.BinCounts(width=0.5, shift=0.25)(X)
    cert = dp.certify(b.build(h=N.StabilityHistogram(delta=1e-7)(c)))
    assert cert.space.derivations[c.id] == "BinCounts, width 0.5, shift 0.25, replace: l1 2, linf 1"
    b2 = dp.PlanBuilder(budget=dp.ApproxZCDP(Fraction(1, 2), 1e-6))
    Y = b2.source("Y", dp.Vectors(d=2), n=10)
    c2 = N.BinCounts(width=1.0)(Y)
    with pytest.raises(DomainError) as info:
        dp.certify(b2.build(h=N.StabilityHistogram(delta=1e-7)(c2)))
    assert (info.value.node, info.value.problem, info.value.fix) == (
        c2.id, "BinCounts needs one-dimensional rows, got d=2", "select one column first (Columns)")


@pytest.mark.parametrize("cls", [N.StabilityHistogram, N.GaussianStabilityHistogram])
def test_the_histograms_need_a_count_statistic(cls: Any) -> None:
    b = dp.PlanBuilder(budget=dp.ApproxZCDP(Fraction(1, 2), 1e-6))
    X = b.source("X", dp.Reals(), n=10)
    h = cls(delta=1e-7)(X)
    with pytest.raises(PlanTypeError) as info:
        dp.certify(b.build(h=h))
    what = "a count statistic (BinCounts)" if cls is N.StabilityHistogram else \
        "a count statistic (BinCounts, TupleCellCounts)"
    assert (info.value.node, info.value.problem, info.value.fix) == (h.id, f"expects {what}, got Rows", f"pass {what}")
    b = dp.PlanBuilder(budget=dp.ApproxZCDP(Fraction(1, 2), 1e-6))
    X = b.source("X", dp.Reals(), n=10)
    c = N.BinCounts(width=1.0)(N.Sum()(N.Clip(box=(0.0, 1.0))(X)))
    with pytest.raises(PlanTypeError) as info:
        dp.certify(b.build(h=cls(delta=1e-7)(c)))
    assert info.value.problem == "expects sensitive rows, got Stat"


@pytest.mark.parametrize("exact", [False, True])
def test_the_release_records_its_scale_and_threshold(exact: bool) -> None:
    for node, scale in ((N.StabilityHistogram(delta=1e-7), "scale"), (N.GaussianStabilityHistogram(delta=1e-7),
                                                                        "sigma")):
        b = dp.PlanBuilder(budget=dp.ApproxZCDP(Fraction(1, 2), 1e-6), neighbors="replace")
        h = node(N.BinCounts(width=1.0)(b.source("X", dp.Reals(), n=len(DATA))))
        cert = dp.certify(b.build(h=h), exact_noise=exact)
        res = execute(cert, {"X": DATA}, _Constant(exact), NumpyBackend())
        facts = {k: v for f in res.facts[h.id] for k, v in f.items()}
        share = cert.allocations[h.id].share
        if scale == "scale":
            want_b, want_t = node.scale_threshold(2.0, node.eps(share, "zcdp"))
            want_t = math.nextafter(want_t + 0.5, math.inf) if exact else want_t
        else:
            want_b, want_t = node.scale_threshold(2.0, math.sqrt(2.0), share)
        assert facts == {scale: want_b, "threshold": want_t}


def test_the_noise_texts() -> None:
    stat = _stat(Sym.const(2.0), Sym.const(math.sqrt(2.0)), _ONE)
    lap, gau = N.StabilityHistogram(delta=1e-7), N.GaussianStabilityHistogram(delta=1e-7)
    b, t = lap.scale_threshold(2.0, lap.eps(Fraction(1, 2), "zcdp"))
    assert lap.noise_text(stat, Fraction(1, 2), "zcdp") == (
        f"Laplace b = {b:.6g} on occupied bins, released above t = {t:.6g} (eps=1, delta=1e-07); exact "
        "sources: discrete Laplace on the integer counts, released above t + 1/2")
    s, t = gau.scale_threshold(2.0, math.sqrt(2.0), Fraction(1, 2))
    assert gau.noise_text(stat, Fraction(1, 2), "zcdp") == (
        f"Gaussian sigma = {s:.6g} on occupied bins, released above t = {t:.6g} (rho=0.5, delta=1e-07); exact "
        "sources: discrete Gaussian on the integer counts")


def test_stable_mode_is_the_key_of_the_largest_count() -> None:
    assert stable_mode((np.array([3, 7, 9]), np.array([1.0, 5.0, 2.0]))) == 7
    assert stable_mode((np.array([], dtype=np.int64), np.array([]))) is None
