"""Mutation-testing pins of ``dpflow/nodes/truncation.py`` (2026-11-29): ``TruncatedMean`` (CWZ 2021 Alg. 3.1 / 3.3).

Replace-one moves the mean of rows clipped to ``[-R, R]^d`` by at most ``2R/n`` in l-infinity, ``2R sqrt(d)/n`` in l2
and ``2R d/n`` in l1, times the stability; the bounds are attained (a row of +R's replaced by one of -R's), so a
larger constant is as wrong as a smaller one is unsafe.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from conftest import InferCtx, ValueCtx

from dpflow.domains import MAX_BOUND, ReleasedScalar, RowCount, Sym, Vectors
from dpflow.errors import DomainError, PlanTypeError, PostProcessingError
from dpflow.handles import Ref
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.truncation import TruncatedMean
from dpflow.nodes.types import ReleasedT, RowsT, Size


def _Infer(shapes: dict[str, Any] | None = None) -> InferCtx:
    return InferCtx("t", shapes, ())


def _rows(d: int = 4, stability: int = 1, changes: str = "replace") -> RowsT:
    public = changes == "replace"
    return RowsT(Vectors(d=d), "X", Size(public, 10 if public else None, RowCount("X")), stability,
                 frozenset({changes}), None)


@pytest.mark.parametrize("stability", [1, 3])
@pytest.mark.parametrize("released", [False, True])
def test_bounds_are_two_r_over_n(stability: int, released: bool) -> None:
    d, n, R = 4, 10.0, 1.5
    rows = _rows(d, stability)
    node = TruncatedMean(bound=Ref("R") if released else R)
    inf = node.infer([rows], _Infer())  # type: ignore[arg-type]
    st = inf.out
    env = {RowCount("X"): n, ReleasedScalar("R"): R}
    unit = 2 * R * stability / n
    assert st.shape == (d,)
    assert st.linf.value(env) == pytest.approx(unit, rel=1e-11)
    assert st.l2.value(env) == pytest.approx(unit * math.sqrt(d), rel=1e-11)
    assert st.l1.value(env) == pytest.approx(unit * d, rel=1e-11)
    Rs = Sym.ref(ReleasedScalar("R")) if released else Sym.const(R)
    assert st.float_error == FloatError("mean", Vectors(d=d, l2_bound=Rs * math.sqrt(d)), rows.size.sym(),
                                        stability=stability)
    assert inf.derivation == (f"mean of rows clipped to [-{Rs.text()}, {Rs.text()}]^{d}, n={rows.size.text()}: "
                              f"linf = stability*2R/n = {st.linf.text()}, l2 = linf*sqrt(d)")


@pytest.mark.parametrize("released", [False, True])
def test_bounds_are_attained(released: bool) -> None:
    """A row of +2R's replaced by one of -2R's moves every coordinate of the mean by exactly 2R/n."""
    d, n, R = 4, 10, 1.5
    node = TruncatedMean(bound=Ref("R") if released else R)
    st = node.infer([_rows(d)], _Infer()).out  # type: ignore[arg-type]
    env = {RowCount("X"): float(n), ReleasedScalar("R"): R}
    ctx = ValueCtx({"R": np.array([R])})
    X = np.random.default_rng(3).normal(size=(n, d))
    X2 = X.copy()
    X[0], X2[0] = 2 * R, -2 * R
    diff = node.evaluate([X], ctx) - node.evaluate([X2], ctx)  # type: ignore[arg-type]
    assert np.abs(diff).max() == pytest.approx(st.linf.value(env), rel=1e-9)
    assert np.linalg.norm(diff) == pytest.approx(st.l2.value(env), rel=1e-9)
    assert np.abs(diff).sum() == pytest.approx(st.l1.value(env), rel=1e-9)


def test_released_bound_policy() -> None:
    X = np.array([[3.0, -3.0], [0.5, np.nan]])
    node = TruncatedMean(bound=Ref("R"))
    assert node.evaluate([X], ValueCtx({"R": np.array([[1.0, 9.0]])})).tolist() == [0.75, -0.5]  # type: ignore[arg-type]
    for bad in (np.nan, -2.0):  # NaN or negative: 0, every row truncated to 0
        assert node.evaluate([X], ValueCtx({"R": np.array(bad)})).tolist() == [0.0, 0.0]  # type: ignore[arg-type]
    huge = node.evaluate([np.array([[1e300], [-1e300]])], ValueCtx({"R": np.array(np.inf)}))  # type: ignore[arg-type]
    assert huge.tolist() == [0.0] and MAX_BOUND < 1e300
    assert TruncatedMean(bound=1.0).evaluate([X], ValueCtx()).tolist() == [0.75, -0.5]  # type: ignore[arg-type]


def test_refusals() -> None:
    with pytest.raises(DomainError) as e:
        TruncatedMean(bound=Ref("R")).infer([_rows()], _Infer({"R": (2,)}))  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem, e.value.fix) == ("t", "bound refers to R of shape (2,)",
                                                            "pass a released scalar")
    TruncatedMean(bound=Ref("R")).infer([_rows()], _Infer({"R": None}))  # type: ignore[arg-type]
    with pytest.raises(PostProcessingError) as q:
        TruncatedMean(bound=Ref("R")).infer([_rows()], InferCtx("t", other=_rows()))  # type: ignore[arg-type]
    assert (q.value.node, q.value.problem) == ("t", "parameter 'bound' refers to R, which is not released")
    with pytest.raises(DomainError) as e:
        TruncatedMean(bound=1.0).infer([_rows(changes="add_remove")], _Infer())  # type: ignore[arg-type]
    assert e.value.node == "t" and e.value.problem.startswith("TruncatedMean (divides by n) needs a public row count")
    with pytest.raises(PlanTypeError) as p:
        TruncatedMean(bound=1.0).infer([ReleasedT(())], _Infer())  # type: ignore[arg-type]
    assert p.value.fix == "pass sensitive rows"
    with pytest.raises(ValueError):
        TruncatedMean(bound=-1.0)
