"""Mutation-testing pins of ``dpflow/nodes/product.py`` (2026-11-29): ``TruncatedBinaryMean``.

Replace-one bounds ``sqrt(min(2 tau, d)) / n`` (l2), ``min(2 tau, d) / n`` (l1), ``1 / n`` (linf) with ``tau`` capped
at d, or with a released radius r: ``r / n``, ``r^2 / n``, ``1 / n``; all times the stability; the truncation
rule itself (a row whose sum exceeds tau, or whose doubled sum exceeds r^2 less a 1e-12 margin, is zeroed) and the
mask, flip and NaN policies.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from conftest import InferCtx, ValueCtx

from dpflow.domains import ReleasedScalar, RowCount, Sym, Vectors
from dpflow.errors import DomainError, PlanTypeError
from dpflow.handles import Ref
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.product import TruncatedBinaryMean
from dpflow.nodes.rules import changes_text
from dpflow.nodes.types import ReleasedT, RowsT, Size


def _Infer(shapes: dict[str, Any] | None = None) -> InferCtx:
    return InferCtx("p", shapes, ())


def _rows(d: int = 10, stability: int = 1, box: tuple[float, float] = (0.0, 1.0), public: bool = True) -> RowsT:
    return RowsT(Vectors(d=d, box=box), "X", Size(public, 9 if public else None, RowCount("X")), stability,
                 frozenset({"replace" if public else "add_remove"}), None)


@pytest.mark.parametrize(("tau", "s", "t_eff", "sq"), [(3, 1, 3, 6), (3, 2, 3, 6), (None, 1, 10, 10), (20, 1, 10, 10),
                                                       (7, 1, 7, 10)])
def test_tau_bounds(tau: int | None, s: int, t_eff: int, sq: int) -> None:
    rows = _rows(stability=s)
    inf = TruncatedBinaryMean(tau=tau).infer([rows], _Infer())  # type: ignore[arg-type]
    st = inf.out
    n = {RowCount("X"): 9.0}
    assert st.shape == (10,)
    assert st.l2.value(n) == pytest.approx(math.sqrt(sq) * s / 9, rel=1e-11)
    assert st.l1.value(n) == pytest.approx(sq * s / 9, rel=1e-11)
    assert st.linf.value(n) == pytest.approx(s / 9, rel=1e-11)
    assert st.float_error == FloatError("mean", Vectors(d=10, l2_bound=Sym.const(math.sqrt(t_eff))), rows.size.sym(),
                                        stability=s)
    assert inf.derivation == (f"truncated mean of [0,1]^10 rows, tau={t_eff}, n={rows.size.text()}, "
                              f"{changes_text(rows)}: l2 = sqrt(min(2 tau, d))/n = {st.l2.text()}")


@pytest.mark.parametrize("s", [1, 3])
def test_radius_bounds(s: int) -> None:
    rows = _rows(stability=s)
    inf = TruncatedBinaryMean(radius=Ref("r")).infer([rows], _Infer())  # type: ignore[arg-type]
    st = inf.out
    v = {RowCount("X"): 9.0, ReleasedScalar("r"): 2.0}
    assert st.l2.value(v) == pytest.approx(2.0 * s / 9, rel=1e-11)
    assert st.l1.value(v) == pytest.approx(4.0 * s / 9, rel=1e-11)
    assert st.linf.value(v) == pytest.approx(s / 9, rel=1e-11)
    assert st.float_error == FloatError("mean", Vectors(d=10, l2_bound=Sym.const(math.sqrt(10))), rows.size.sym(),
                                        stability=s)
    assert inf.derivation == (f"truncated mean of [0,1]^10 rows, rows with 2 sum > r^2 zeroed (r = r), "
                              f"n={rows.size.text()}, {changes_text(rows)}: l2 = r/n = {st.l2.text()}")


def test_refusals() -> None:
    node = TruncatedBinaryMean(tau=2)
    cases = [
        (TruncatedBinaryMean(tau=2, radius=Ref("r")), _rows(), {}, "both tau and radius are set",
         "give a public tau or a released radius"),
        (node, _rows(box=(-0.5, 1.0)), {},
         f"rows must lie in [0, 1]^d, got {Vectors(d=10, box=(-0.5, 1.0)).describe()}",
         "declare a BooleanCube source or Clip(box=(0, 1))"),
        (node, _rows(box=(0.0, 1.5)), {},
         f"rows must lie in [0, 1]^d, got {Vectors(d=10, box=(0.0, 1.5)).describe()}",
         "declare a BooleanCube source or Clip(box=(0, 1))"),
        (TruncatedBinaryMean(tau=2, mask=Ref("m")), _rows(), {"m": (9,)}, "mask has shape (9,), rows have d=10",
         "pass a released vector of length 10"),
        (TruncatedBinaryMean(tau=2, flip=Ref("f")), _rows(), {"f": (9,)}, "flip has shape (9,), rows have d=10",
         "pass a released vector of length 10"),
        (TruncatedBinaryMean(radius=Ref("r")), _rows(), {"r": (2,)}, "radius refers to r of shape (2,)",
         "pass a released scalar"),
    ]
    for q, rows, shapes, problem, fix in cases:
        with pytest.raises(DomainError) as e:
            q.infer([rows], _Infer(shapes))  # type: ignore[arg-type]
        assert (e.value.node, e.value.problem, e.value.fix) == ("p", problem, fix)
    with pytest.raises(DomainError) as e:
        node.infer([_rows(public=False)], _Infer())  # type: ignore[arg-type]
    assert e.value.problem.startswith("TruncatedBinaryMean needs a public row count")
    with pytest.raises(PlanTypeError) as t:
        node.infer([ReleasedT(())], _Infer())  # type: ignore[arg-type]
    assert t.value.fix == "pass sensitive rows"
    TruncatedBinaryMean(tau=2, mask=Ref("m"), flip=Ref("f")).infer([_rows()], _Infer({"m": (10,), "f": None}))  # type: ignore[arg-type]
    for tau in (0, 1.5, -1):
        with pytest.raises(ValueError, match="^tau must be a positive integer, got "):
            TruncatedBinaryMean(tau=tau)
    assert TruncatedBinaryMean(tau=2.0).tau == 2


def test_truncation_values() -> None:
    """Entries clipped into [0, 1], NaN as 0; flipped, then masked; a row summing past tau (or with 2 sum past
    r^2 (1 - 1e-12)) zeroed, at the bound kept; a radius with r^2 >= d zeroes nothing; a negative one keeps
    only all-zero rows."""
    X = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [np.nan, 2.0, -1.0], [0.0, 0.0, 1.0]])
    got = TruncatedBinaryMean(tau=2).evaluate([X], ValueCtx())
    assert got.tolist() == [v / 4 for v in (1.0, 2.0, 1.0)]
    flip, mask = np.array([1.0, 0.0, 0.0]), np.array([1.0, 1.0, 0.0])
    got = TruncatedBinaryMean(tau=1, flip=Ref("f"), mask=Ref("m")).evaluate([X], ValueCtx({"f": flip, "m": mask}))
    # flipped: [0,1,0], [0,1,1], [1,1,0], [1,0,1]; masked: [0,1,0], [0,1,0], [1,1,0], [1,0,0]; sums <= 1 kept
    assert got.tolist() == [v / 4 for v in (1.0, 2.0, 0.0)]
    rad = TruncatedBinaryMean(radius=Ref("r"))
    Y = np.array([[1.0, 0, 0, 0, 0], [1.0, 1, 0, 0, 0], [0.0, 0, 0, 0, 1], [1.0, 1, 1, 0, 0]])
    assert rad.evaluate([Y], ValueCtx({"r": np.array(2.0)})).tolist() == [0.25, 0, 0, 0, 0.25]  # 2 sum = 4: zeroed
    past = math.sqrt(4.0 / (1.0 - 1e-12)) * 1.0000001
    assert rad.evaluate([Y], ValueCtx({"r": np.array(past)})).tolist() == [0.5, 0.25, 0, 0, 0.25]
    assert rad.evaluate([Y], ValueCtx({"r": np.array(math.sqrt(5.0))})).tolist() == [0.75, 0.5, 0.25, 0, 0.25]
    assert rad.evaluate([Y], ValueCtx({"r": np.array(-1.0)})).tolist() == [0.0] * 5
    tie = 2.000000000001  # (r * r) (1 - 1e-12) == 4.0 exactly: 2 sum = 4 is at the bound, kept
    assert (tie * tie) * (1.0 - 1e-12) == 4.0
    assert rad.evaluate([Y], ValueCtx({"r": np.array(tie)})).tolist() == [0.5, 0.25, 0, 0, 0.25]
    square = np.array([[1.0, 1, 1, 0], [1.0, 0, 0, 0]])  # r^2 = d = 4 exactly: nothing zeroed
    assert rad.evaluate([square], ValueCtx({"r": np.array(2.0)})).tolist() == [1.0, 0.5, 0.5, 0.0]



def test_released_slots_are_named() -> None:
    from dpflow.errors import PostProcessingError

    for node, slot, ref in ((TruncatedBinaryMean(tau=2, mask=Ref("m")), "mask", "m"),
                            (TruncatedBinaryMean(tau=2, flip=Ref("f")), "flip", "f"),
                            (TruncatedBinaryMean(radius=Ref("r")), "radius", "r")):
        with pytest.raises(PostProcessingError) as p:
            node.infer([_rows()], InferCtx("p", other=_rows()))  # type: ignore[arg-type]
        assert p.value.problem == f"parameter {slot!r} refers to {ref}, which is not released"
