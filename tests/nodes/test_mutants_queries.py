"""Mutation-testing pins of ``dpflow/nodes/queries.py`` (first run 2026-11-29).

``SecondMoment``: Frobenius ``stability sqrt(2) r^2 / n`` and upper-triangle l1 ``stability (d + 1) r^2 / n``
(r = 2 here, so r^2 and r^3 differ; stability 2, so a divided stability shows), symmetric noise; the radius ``r``
is a bound on ``||x - c||`` only when the rows were clipped around that same centre; ``Histogram`` normalised by
the public n; every refusal whole.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from conftest import InferCtx, ValueCtx

import dpflow as dp
from dpflow.domains import RowCount
from dpflow.errors import DomainError, PlanTypeError, PostProcessingError
from dpflow.handles import Ref
from dpflow.nodes.queries import Histogram, SecondMoment, centred_rows
from dpflow.nodes.types import ReleasedT, RowsT, Size


def _Infer(shapes: dict[str, Any] | None = None, released: bool = True) -> InferCtx:
    return InferCtx("m", shapes, other=None if released else _rows(dp.Vectors(d=3)))


def _rows(domain: Any, stability: int = 1, changes: str = "replace", public: bool = True) -> RowsT:
    return RowsT(domain, "X", Size(public, 9 if public else None, RowCount("X")), stability, frozenset({changes}),
                 None)


@pytest.mark.parametrize("stability", [1, 2])
def test_second_moment_sensitivity(stability: int) -> None:
    rows = _rows(dp.Vectors(d=3, l2_bound=2.0), stability)
    inf = SecondMoment().infer([rows], _Infer())  # type: ignore[arg-type]
    st = inf.out
    n = {RowCount("X"): 9.0}
    assert st.shape == (3, 3) and st.symmetric is True and st.linf is None
    assert st.l2.value(n) == pytest.approx(math.sqrt(2.0) * 4.0 * stability / 9.0, rel=1e-11)
    assert st.l1.value(n) == pytest.approx(4.0 * 4.0 * stability / 9.0, rel=1e-11)
    assert inf.derivation == (f"SecondMoment about origin over {rows.domain.describe()}, n={rows.size.text()}: "
                              f"Frobenius = stability*sqrt(2)*r^2/n = {st.l2.text()}; "
                              f"l1 (upper triangle) = stability*(d+1)*r^2/n = {st.l1.text()}")


def test_second_moment_radius_only_around_the_clip_centre() -> None:
    """Rows clipped to radius 2 around c: r = 2 about c; about another centre, or rows without a ball: unbounded."""
    around_c = _rows(dp.Vectors(d=3, l2_bound=2.0, center="c"))
    st = SecondMoment(center=Ref("c")).infer([around_c], _Infer({"c": (3,)})).out  # type: ignore[arg-type]
    assert st.l2 is not None and st.l2.value({RowCount("X"): 9.0}) == pytest.approx(4 * math.sqrt(2) / 9, rel=1e-11)
    inf = SecondMoment(center=Ref("e")).infer([around_c], _Infer({"e": (3,)}))  # type: ignore[arg-type]
    assert inf.out.l2 is None and inf.out.l1 is None
    assert inf.derivation.startswith("SecondMoment about e over ")
    assert SecondMoment().infer([around_c], _Infer()).out.l2 is None  # type: ignore[arg-type]
    with pytest.raises(DomainError) as e:
        SecondMoment(center=Ref("c")).infer([around_c], _Infer({"c": (2,)}))  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem, e.value.fix) == ("m", "center c has shape (2,), rows have d=3",
                                                            "pass a centre of the rows' dimension")
    SecondMoment(center=Ref("c")).infer([around_c], _Infer({"c": None}))  # type: ignore[arg-type]
    with pytest.raises(PostProcessingError) as p:
        SecondMoment(center=Ref("c")).infer([around_c], _Infer(released=False))  # type: ignore[arg-type]
    assert p.value.problem == "parameter 'center' refers to c, which is not released"


def test_refusals() -> None:
    fix = ("declare neighbors='replace' and apply it before any value partition (or release a Sum and a Count "
           "separately)")
    private = _rows(dp.Vectors(d=1, l2_bound=1.0), changes="add_remove", public=False)
    for node, what in ((SecondMoment(), "SecondMoment"), (Histogram(edges=(0, 1), normalize=True),
                                                            "a normalised Histogram")):
        with pytest.raises(DomainError) as e:
            node.infer([private], _Infer())  # type: ignore[arg-type]
        assert (e.value.node, e.value.problem, e.value.fix) == (
            "m", f"{what} needs a public row count under replace-one neighbours; here the neighbours are "
                 "add_remove and the count is private", fix)
        with pytest.raises(PlanTypeError) as t:
            node.infer([ReleasedT(())], _Infer())  # type: ignore[arg-type]
        assert t.value.fix == "pass sensitive rows"
    with pytest.raises(DomainError) as e:
        Histogram(edges=(0, 1)).infer([_rows(dp.Vectors(d=2))], _Infer())  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem, e.value.fix) == ("m", "Histogram needs one-dimensional rows, got d=2",
                                                            "select one column first")


def test_normalised_histogram() -> None:
    st = Histogram(edges=(0, 1, 2), normalize=True).infer([_rows(dp.Vectors(d=1), 2)], _Infer()).out  # type: ignore[arg-type]
    n = {RowCount("X"): 9.0}
    assert (st.l1.value(n), st.l2.value(n), st.linf.value(n)) == pytest.approx(
        (4.0 / 9, 2 * math.sqrt(2.0) / 9, 2.0 / 9), rel=1e-11)


def test_centred_rows() -> None:
    X = np.array([[1, 2], [3, 5]])
    got = centred_rows(X, Ref("c"), ValueCtx({"c": np.array([1, 1])}))
    assert got.dtype == np.float64 and got.tolist() == [[0.0, 1.0], [2.0, 4.0]]
    assert centred_rows(X, None, ValueCtx()).dtype == np.float64


def test_histogram_type() -> None:
    from dpflow.nodes.floaterr import FloatError
    from dpflow.nodes.queries import Mean
    from dpflow.nodes.rules import changes_text

    rows = _rows(dp.Vectors(d=1), 2)
    for normalize, kind in ((False, "exact"), (True, "freq")):
        inf = Histogram(edges=(0, 1, 2, 5), normalize=normalize).infer([rows], _Infer())  # type: ignore[arg-type]
        st = inf.out
        assert st.shape == (3,) and st.float_error == FloatError(kind, rows.domain, rows.size.sym())
        assert st.linf is not None
        assert inf.derivation == (f"Histogram, 3 public bins, {changes_text(rows)}: l1 {st.l1.text()}, "
                                  f"l2 {st.l2.text()}")
    for edges in ((0.0,), (0.0, 0.0), (1.0, 0.0), (0.0, 1.0, 1.0)):
        with pytest.raises(ValueError, match="^Histogram edges must be at least two strictly increasing numbers$"):
            Histogram(edges=edges)
    assert Histogram(edges=(0, 1)).edges == (0.0, 1.0)
    private = _rows(dp.Vectors(d=1, l2_bound=1.0), changes="add_remove", public=False)
    with pytest.raises(DomainError) as e:
        Mean().infer([private], _Infer())  # type: ignore[arg-type]
    assert e.value.problem.startswith("Mean needs a public row count under replace-one neighbours")
    with pytest.raises(PlanTypeError) as t:
        Mean().infer([ReleasedT(())], _Infer())  # type: ignore[arg-type]
    assert t.value.fix == "pass sensitive rows"


@pytest.mark.parametrize(("changes", "stability", "want"), [("replace", 1, 0.0), ("add_remove", 1, 1.0),
                                                            ("add_remove", 3, 3.0)])
def test_count_and_sum_types(changes: str, stability: int, want: float) -> None:
    """Count: 0 under replace-one (n public), 1 per added or removed record, in every norm, times the stability;
    exact.  Sum: its derivation names both bounds."""
    from dpflow.nodes.floaterr import FloatError
    from dpflow.nodes.queries import Count, Sum
    from dpflow.nodes.rules import changes_text

    rows = _rows(dp.Vectors(d=2, l2_bound=1.0), stability, changes, public=changes == "replace")
    inf = Count().infer([rows], _Infer())  # type: ignore[arg-type]
    st = inf.out
    assert st.shape == () and st.float_error == FloatError("exact", rows.domain)
    assert (st.l1.coef, st.l2.coef, st.linf.coef) == (want, want, want) and st.l1.factors == ()
    assert inf.derivation == f"Count, {changes_text(rows)}: sensitivity {st.l1.text()}"
    s = Sum().infer([rows], _Infer())  # type: ignore[arg-type]
    assert s.derivation == (f"Sum over {rows.domain.describe()}, {changes_text(rows)}: l2 {s.out.l2.text()}, "
                            f"l1 {s.out.l1.text()}")
    for node in (Count(), Sum()):
        with pytest.raises(PlanTypeError) as t:
            node.infer([ReleasedT(())], _Infer())  # type: ignore[arg-type]
        assert t.value.fix == "pass sensitive rows"


def test_mean_derivation() -> None:
    from dpflow.nodes.queries import Mean
    from dpflow.nodes.rules import changes_text

    rows = _rows(dp.Vectors(d=2, l2_bound=1.0), 2)
    inf = Mean().infer([rows], _Infer())  # type: ignore[arg-type]
    assert inf.derivation == (f"Mean over {rows.domain.describe()}, n={rows.size.text()}, {changes_text(rows)}: "
                              f"l2 = stability*diameter/n = {inf.out.l2.text()}")
