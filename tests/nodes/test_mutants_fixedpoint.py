"""Mutation-testing pins of ``dpflow/nodes/fixedpoint.py`` (round 6): the rules ``test_fixedpoint.py`` states
through whole releases, pinned where a mutant of them survived the subject tests.

- ``quantise`` raises no floating-point warning on rows outside the bound (a warning would be a visible side
  effect of a private value), returns int64 and reads any float dtype exactly (the product by 2^-e is taken in
  float64: a float16 row at 1.0 times 2^39 overflows in float16);
- ``sum_units`` adds blocks of exactly ``SUM_BLOCK`` rows (the int64 proof's blocks; ``exact_total`` is told
  how many);
- ``FixedPoint.as_float`` keeps the shape (a Gram stays d x d);
- ``to_float``'s rule: the top 64 bits of k, truncated, then rounded to a float; +-inf by the sign of k when
  the result overflows;
- ``lattice_units`` on floats: floor or round as asked, in float64 whatever the input dtype.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from dpflow.nodes import fixedpoint as fp
from dpflow.nodes.fixedpoint import FixedPoint, lattice_units, quantise, sum_units, to_float


def test_quantise_warns_about_nothing_and_returns_int64() -> None:
    """Rows outside the bound overflow in the product by 2^-e, NaN rows are invalid in rint: the declared
    policy clamps them silently (numpy's errstate), since a RuntimeWarning would show a private value."""
    X = np.array([[1e300, np.nan, np.inf, -1e308, 2.0**-1074]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Q = quantise(X, -40, 40)
    assert Q.dtype == np.int64
    assert Q.tolist() == [[2**40, 0, 2**40, -(2**40), 0]]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int64])
def test_quantise_reads_any_dtype_in_float64(dtype: type) -> None:
    X = np.array([[1.0, -1.0, 3.0]], dtype=dtype)
    assert quantise(X, -39, 40).tolist() == [[2**39, -(2**39), 2**40]]  # 3 * 2^39 clamped to 2^40


def test_sum_units_adds_blocks_of_sum_block_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """``exact_total`` is exact for fewer than 2^31 parts, each at most 2^62: the sum hands it one part per
    block of ``SUM_BLOCK`` rows (a part per row would break the bound on the number of parts at scale)."""
    seen: list[np.ndarray] = []
    total = fp.exact_total

    def spy(parts: np.ndarray) -> np.ndarray:
        seen.append(parts.copy())
        return total(parts)

    monkeypatch.setattr(fp, "exact_total", spy)
    monkeypatch.setattr(fp, "SUM_BLOCK", 8)
    X = np.arange(40.0).reshape(20, 2)
    assert sum_units(X, 0).tolist() == [sum(range(0, 40, 2)), sum(range(1, 40, 2))]
    (parts,) = seen
    assert parts.tolist() == [X[0:8].sum(0).tolist(), X[8:16].sum(0).tolist(), X[16:20].sum(0).tolist()]


def test_as_float_keeps_the_shape() -> None:
    g = FixedPoint(np.array([[4, 2], [2, -6]], dtype=object), -1)
    assert g.shape == (2, 2)
    assert g.as_float().tolist() == [[2.0, 1.0], [1.0, -3.0]]
    assert np.asarray(g).shape == (2, 2)


def test_to_float_truncates_to_64_bits_then_rounds() -> None:
    """k = 2^64 + 2^11 + 1 has 65 bits: its top 64 bits, 2^63 + 2^10, lie halfway between two floats and round
    to even, 2^63; so the result is 2^64 (rounding k itself would give 2^64 + 2^12)."""
    assert to_float(2**64 + 2**11 + 1, 0) == 2.0**64
    assert to_float(2**63 + 2**10 + 1, 0) == 2.0**63 + 2.0**11  # 64 bits: no truncation, rounded up
    assert to_float(3, -1) == 1.5 and to_float(-(2**70) - 1, -70) == -1.0


@pytest.mark.parametrize(("k", "exponent", "want"), [(1, 1024, math.inf), (-1, 1024, -math.inf),
                                                     (2**2000, 0, math.inf), (-(2**2000), 0, -math.inf),
                                                     (2, 1023, math.inf), (1, 1023, 2.0**1023)])
def test_to_float_overflows_to_infinity_of_the_sign_of_k(k: int, exponent: int, want: float) -> None:
    assert to_float(k, exponent) == want


def test_lattice_units_of_floats_floor_or_round_in_float64() -> None:
    v = np.array([2.7, -2.7, 2.5, np.nan, np.inf])
    assert lattice_units(v, 1.0).tolist() == [3.0, -3.0, 2.0, 0.0, 0.0]
    assert lattice_units(v, 1.0, floor=True).tolist() == [2.0, -3.0, 2.0, 0.0, 0.0]
    # a float32 statistic over a fine step: value / step is 2^200, beyond float32 (inf there)
    assert lattice_units(np.array([1.0], dtype=np.float32), 2.0**-200).tolist() == [2.0**200]
