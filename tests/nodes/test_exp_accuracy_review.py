"""Review of ``exact_choice``'s float phase (docs/assurance.md, "reviewed derivations"): its weight bounds assume
that numpy's float64 ``exp`` errs by less than ``EXP_MARGIN`` = 2^-44 relative (256 ulps of 2^-52) on the
arguments it is given, ``d = x - max x`` clamped to [-700, 0].  This is an assumption about the installed numpy
and CPU (SIMD or libm loops), not a proof, so it is tested over that whole range, as the sampler calls it
(whole contiguous arrays, and short arrays whose tails take the scalar loop):

* 2^21 uniform points of [-700, 0], 2^21 log-uniform magnitudes from 2^-60 to 700 (arguments near 0), points
  within 1e-12 of the multiples of ln(2)/2 (argument-reduction boundaries), and the ends (-700, -0.0, 0.0, the
  smallest normals and subnormals);
* the reference is the 80-bit ``long double`` exp (64-bit significand), itself checked against 40-digit
  ``mpmath`` on a sample.

The measured worst error (numpy 2.4, AVX512F, this machine) is 0.59 ulp; the test requires at most 2^-48
relative (16 ulps), which leaves EXP_MARGIN a factor 16 for the two roundings it also covers.  On a platform
without an 80-bit long double the reference is ``mpmath`` on a smaller sample.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpflow.nodes import expmech

LIMIT = 2.0**-48


def _arguments(rng: np.random.Generator, n: int) -> np.ndarray:
    half_ln2 = math.log(2.0) / 2
    grid = np.round(-700.0 * rng.random(n // 8) / half_ln2) * half_ln2 + rng.normal(size=n // 8) * 1e-12
    ends = np.array([-700.0, np.nextafter(-700.0, 0.0), 0.0, -0.0, -5e-324, -(2.0**-1022), -(2.0**-60), -1e-300])
    out: np.ndarray = np.clip(np.concatenate([-700.0 * rng.random(n), -np.exp(rng.uniform(math.log(2.0**-60),
                                                                                          math.log(700.0), n)),
                                              grid, ends]), -700.0, 0.0)
    return out


def _mp_rel_error(x: float, value: float | np.longdouble) -> float:
    ref = mp.exp(mp.mpf(x))
    return float(abs(mp.mpf(np.format_float_scientific(value, precision=30, unique=False)) - ref) / ref)


def test_the_samplers_exp_margin_and_range_are_as_reviewed() -> None:
    assert expmech.EXP_MARGIN == 2.0**-44 and expmech._TINY_ARG == -700.0
    assert LIMIT * 16 <= expmech.EXP_MARGIN


def test_numpy_exp_is_accurate_over_the_samplers_whole_range() -> None:
    mp.mp.dps = 40
    rng = np.random.default_rng(2026)
    if np.finfo(np.longdouble).nmant < 63:  # no 80-bit long double: mpmath on a sample
        x = _arguments(rng, 1 << 12)
        worst = max(_mp_rel_error(float(v), float(e)) for v, e in zip(x, np.exp(x), strict=True))
        assert worst <= LIMIT
        return
    x = _arguments(rng, 1 << 21)
    e = np.exp(x)  # one contiguous array, as _float_bounds calls it
    ref = np.exp(x.astype(np.longdouble))
    rel = np.abs((e.astype(np.longdouble) - ref) / ref)
    assert float(rel.max()) <= LIMIT
    # the reference itself, against mpmath at 40 digits, on a sample (it must be far more accurate than LIMIT)
    idx = rng.choice(x.size, 2000, replace=False)
    assert max(_mp_rel_error(float(x[i]), ref[i]) for i in idx) <= 2.0**-60
    # short arrays (lengths 1 to 19): the SIMD loops' scalar tails
    for n in range(1, 20):
        xs = -700.0 * rng.random((500, n))
        es = np.stack([np.exp(row) for row in xs])
        r = np.exp(xs.astype(np.longdouble))
        assert float(np.abs((es.astype(np.longdouble) - r) / r).max()) <= LIMIT


@pytest.mark.parametrize("x", [-700.0, -1e-300, -0.5 * math.log(2.0), -1.0, -350.25])
def test_spot_values_against_mpmath(x: float) -> None:
    mp.mp.dps = 40
    assert _mp_rel_error(x, float(np.exp(np.array([x]))[0])) <= LIMIT
