"""Mutation-testing pins of ``dpflow/nodes/pca.py`` (first run 2026-11-29).

The unnormalised Gram's Frobenius sensitivity (``sqrt(2) r^2`` for a replaced row, ``r^2`` for an added or removed
one, times the stability; checked against the neighbours that attain it), its symmetric noise and its float-error
kind; ``private_pca``'s wiring; the projection's output type and refusals; the top eigenvectors' shape, order and
policies.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from conftest import ValueCtx

import dpflow as dp
from dpflow import nodes as N
from dpflow.domains import RowCount
from dpflow.errors import DataError, DomainError, PlanTypeError, PostProcessingError
from dpflow.handles import Ref
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.pca import Gram, Project, TopEigenvectors
from dpflow.nodes.rules import changes_text
from dpflow.nodes.types import ReleasedT, RowsT, Size


class _Infer:
    relation = "replace"
    node_id = "p"

    def __init__(self, shapes: dict[str, tuple[int, ...] | None] | None = None, released: bool = True) -> None:
        self.shapes, self.released = shapes or {}, released

    def type_of(self, ref: Any) -> Any:
        return ReleasedT(self.shapes.get(ref.id)) if self.released else _rows(dp.Vectors(d=2))

    def row_count(self) -> RowCount:
        return RowCount("p")


def _rows(domain: dp.Vectors, changes: str = "replace", stability: int = 1, public: bool = True) -> RowsT:
    return RowsT(domain, "X", Size(public, 9 if public else None, RowCount("X")), stability, frozenset({changes}), None)


@pytest.mark.parametrize(("changes", "stability", "factor"), [("replace", 1, math.sqrt(2.0)), ("add_remove", 1, 1.0),
                                                              ("replace", 3, 3 * math.sqrt(2.0))])
def test_gram_frobenius_sensitivity(changes: str, stability: int, factor: float) -> None:
    rows = _rows(dp.Vectors(d=3, l2_bound=2.0), changes, stability)
    inf = Gram().infer([rows], _Infer())  # type: ignore[arg-type]
    stat = inf.out
    assert stat.shape == (3, 3) and stat.symmetric is True and stat.l1 is None and stat.linf is None
    assert stat.l2 is not None and stat.l2.factors == () and stat.l2.coef == pytest.approx(factor * 4.0, rel=1e-15)
    assert inf.derivation == (f"Gram about origin over {rows.domain.describe()}, {changes_text(rows)}: "
                              f"Frobenius {stat.l2.text()}")


class _NoiseOff:
    exact = False


def test_gram_bound_is_attained_and_held() -> None:
    """The node's own Gram on neighbouring datasets (through ``Gram.evaluate``, about the origin and about a
    released centre) moves by at most its declared Frobenius bound: by exactly ``sqrt(2) r^2`` for two orthogonal
    rows of norm r swapped (replace-one: the bound is tight), by ``r^2`` for a row of norm r removed (add/remove),
    and by no more for random pairs in the ball."""
    from conftest import ValueCtx

    r = 2.0
    c = np.array([1.0, -1.0, 0.5])
    ctx = ValueCtx({"c": c}, "p")
    ctx.noise = _NoiseOff()  # type: ignore[attr-defined]

    def gram(X: np.ndarray, center: Ref | None) -> np.ndarray:
        return np.asarray(Gram(center=center).evaluate([X], ctx))

    for center, shift, dom in ((None, np.zeros(3), dp.Vectors(d=3, l2_bound=r)),
                               (Ref("c"), c, dp.Vectors(d=3, l2_bound=r, center="c"))):
        bounds = {}
        for changes in ("replace", "add_remove"):
            st = Gram(center=center).infer([_rows(dom, changes)], _Infer({"c": (3,)})).out  # type: ignore[arg-type]
            bounds[changes] = st.l2.value({})
        base = np.random.default_rng(3).normal(size=(5, 3)) * 0.3 + shift
        w, v = shift + np.array([r, 0.0, 0.0]), shift + np.array([0.0, r, 0.0])
        moved = np.linalg.norm(gram(np.vstack([base, [w]]), center) - gram(np.vstack([base, [v]]), center))
        assert moved == pytest.approx(bounds["replace"], rel=1e-9)
        removed = np.linalg.norm(gram(np.vstack([base, [w]]), center) - gram(base, center))
        assert removed == pytest.approx(bounds["add_remove"], rel=1e-9)
        rng = np.random.default_rng(4)
        for _ in range(100):
            a, b = rng.normal(size=(2, 3))
            a *= r / np.linalg.norm(a) * rng.uniform()
            b *= r / np.linalg.norm(b)
            diff = gram(np.vstack([base, [shift + a]]), center) - gram(np.vstack([base, [shift + b]]), center)
            assert np.linalg.norm(diff) <= bounds["replace"]


def test_gram_around_a_centre_and_unbounded() -> None:
    centred = _rows(dp.Vectors(d=2, l2_bound=1.5, center="c"))
    stat = Gram(center=Ref("c")).infer([centred], _Infer({"c": (2,)})).out  # type: ignore[arg-type]
    assert stat.l2 is not None and stat.l2.coef == pytest.approx(math.sqrt(2.0) * 2.25, rel=1e-15)
    inf = Gram(center=Ref("c")).infer([_rows(dp.Vectors(d=2))], _Infer({"c": (2,)}))  # type: ignore[arg-type]
    assert inf.out.l2 is None and inf.derivation.startswith("Gram about c over ")
    assert inf.derivation.endswith(": Frobenius unbounded")
    with pytest.raises(PlanTypeError) as t:
        Gram().infer([ReleasedT(())], _Infer())  # type: ignore[arg-type]
    assert t.value.fix == "pass sensitive rows"


def test_gram_float_error_kind() -> None:
    dom = dp.Vectors(d=2, l2_bound=1.0, center="c")
    public = _rows(dom, stability=2)
    assert Gram(center=Ref("c"))._error(public) == FloatError("gram_sum", dom, public.size.sym(), "c", stability=2)
    private = _rows(dom, "add_remove", 2, public=False)
    assert Gram(center=Ref("c"))._error(private) == FloatError("fixed_gram", dom, None, "c", stability=2)
    assert Gram()._error(private) == FloatError("fixed_gram", dom, None, None, stability=2)


def test_private_pca_wiring() -> None:
    """Clip and SecondMoment around the same centre, a Gaussian of weight 1 by default, then the eigenvectors."""
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    c = b.public([0.5, 0.5])
    V = N.private_pca(b.source("X", dp.Vectors(d=2), n=50), k=1, radius=2.0, center=c)
    nodes = {type(r.node).__name__: r.node for r in b.build(V=V).records}
    assert nodes["Clip"].center == Ref(c.id) and nodes["Clip"].radius == 2.0
    assert nodes["SecondMoment"].center == Ref(c.id)
    assert nodes["GaussianMech"].weight == 1.0 and nodes["TopEigenvectors"].k == 1


def test_positive_k() -> None:
    for k in (True, 1.5, 0, -1):
        with pytest.raises(ValueError, match="^k must be a positive integer, got "):
            TopEigenvectors(k=k)
    assert TopEigenvectors(k=2.0).k == 2


def test_top_eigenvectors() -> None:
    """Largest eigenvalue first, of the symmetric part; non-finite entries count as 0; at most d columns; the
    output shape (d, min(k, d)); a matrix that is not square refused at planning and at run time."""
    S = np.array([[1.0, 4.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, np.inf]])  # symmetric part [[1, 2], [2, 3]] + 0
    V = TopEigenvectors(k=2).evaluate([S], ValueCtx())
    sym = np.array([[1.0, 2.0, 0.0], [2.0, 3.0, 0.0], [0.0, 0.0, 0.0]])
    w, U = np.linalg.eigh(sym)
    assert V.shape == (3, 2)
    for j, i in enumerate(np.argsort(w)[::-1][:2]):
        assert abs(float(V[:, j] @ U[:, i])) == pytest.approx(1.0, rel=1e-12)
    assert TopEigenvectors(k=5).evaluate([sym], ValueCtx()).shape == (3, 3)
    node = TopEigenvectors(k=5)
    assert node.infer([ReleasedT((3, 3))], _Infer()).out == ReleasedT((3, 3))  # type: ignore[arg-type]
    assert TopEigenvectors(k=2).infer([ReleasedT((4, 4))], _Infer()).out == ReleasedT((4, 2))  # type: ignore[arg-type]
    assert node.infer([ReleasedT(None)], _Infer()).out == ReleasedT(None)  # type: ignore[arg-type]
    fix = "pass a released symmetric d x d matrix (a second moment)"
    for shape in ((3, 4), (3,), ()):
        problem = f"TopEigenvectors needs a square matrix of side >= 1, got shape {shape}"
        with pytest.raises(DomainError) as e:
            node.infer([ReleasedT(shape)], _Infer())  # type: ignore[arg-type]
        assert (e.value.node, e.value.problem, e.value.fix) == ("p", problem, fix)
        with pytest.raises(DataError) as d:
            node.evaluate([np.ones(shape)], ValueCtx(node_id="p"))
        assert (d.value.node, d.value.problem, d.value.fix) == ("p", problem, fix)


def test_project_type_and_refusals() -> None:
    rows = _rows(dp.Vectors(d=3, l2_bound=1.0))
    inf = Project(basis=Ref("V"), center=Ref("c")).infer([rows], _Infer({"V": (3, 2), "c": (3,)}))  # type: ignore[arg-type]
    assert inf.out == RowsT(dp.Vectors(d=2), "X", rows.size, 1, rows.changes, None)
    assert inf.derivation == "projection onto V: d=2, unbounded"
    inf = Project().infer([rows], _Infer())  # type: ignore[arg-type]
    assert inf.out.domain == dp.Vectors(d=3) and inf.derivation == "projection onto identity: d=3, unbounded"
    fix = "pass a d x k matrix (TopEigenvectors of a second moment)"
    for shape in ((2, 2), (3,), None):
        with pytest.raises(DomainError) as e:
            Project(basis=Ref("V")).infer([rows], _Infer({"V": shape}))  # type: ignore[arg-type]
        assert (e.value.node, e.value.problem, e.value.fix) == ("p", f"basis V has shape {shape}, rows have d=3", fix)
    with pytest.raises(DomainError) as e:
        Project(center=Ref("c")).infer([rows], _Infer({"c": (2,)}))  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem, e.value.fix) == ("p", "center c has shape (2,)",
                                                            "pass a centre of the rows' dimension")
    for node, slot in ((Project(basis=Ref("V")), "basis"), (Project(center=Ref("V")), "center")):
        with pytest.raises(PostProcessingError) as p:
            node.infer([rows], _Infer(released=False))  # type: ignore[arg-type]
        assert p.value.problem == f"parameter {slot!r} refers to V, which is not released"
    with pytest.raises(PlanTypeError) as t:
        Project().infer([ReleasedT(())], _Infer())  # type: ignore[arg-type]
    assert t.value.fix == "pass sensitive rows"


def test_project_values() -> None:
    """(x - c) V, non-finite entries of V and c as 0, integer rows as floats; identity without a basis."""
    X = np.array([[1, 2, 3], [4, 5, 6]])
    V = np.array([[1.0, 0.0], [np.nan, 1.0], [0.0, np.inf]])
    c = np.array([1.0, np.inf, 1.0])
    ctx = ValueCtx({"V": V, "c": c}, "p")
    out = Project(basis=Ref("V"), center=Ref("c")).evaluate([X], ctx)
    assert out.tolist() == [[0.0, 2.0], [3.0, 5.0]]
    assert Project(center=Ref("c")).evaluate([X], ctx).tolist() == [[0.0, 2.0, 2.0], [3.0, 5.0, 5.0]]
    assert Project(basis=Ref("V")).evaluate([X], ctx).tolist() == [[1.0, 2.0], [4.0, 5.0]]
    same = Project().evaluate([X], ctx)
    assert same.dtype == np.float64 and same.tolist() == X.tolist()
