"""Mutation-testing pins of ``dpflow/nodes/postprocess.py`` (2026-11-29).

``NoiseScale`` may read only a noise-adding mechanism of its own scope (the innermost loop body: the node id up to
its last ``/``); the PSD projection and eigendecomposition of a released matrix symmetrise it as ``(S + S^T) / 2``;
named public parameters and accuracy warnings reach the ledger with their text and the warning points at the
user's line; plan JSON names functions as ``module:qualname`` and refuses what it cannot import, naming why.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpflow as dp
from dpflow.errors import AccuracyWarning, PlanTypeError, SerializationError
from dpflow.handles import Ref, Released
from dpflow.nodes.postprocess import (
    Apply,
    Eigh,
    Get,
    NoiseScale,
    Pack,
    PSDProject,
    Public,
    accuracy_warning,
    function_path,
    load_function,
    noise_scale,
    param,
    param_ref,
)
from dpflow.nodes.types import Inferred, ReleasedT


class _Ctx:
    def __init__(self, node_id: str, noised_by: str | None) -> None:
        self.node_id, self.noised_by = node_id, noised_by

    def type_of(self, ref: Any) -> Any:
        return ReleasedT((), noised_by=self.noised_by)


def test_noise_scale_reads_its_own_innermost_scope() -> None:
    node = NoiseScale(of=Ref("m"))
    inf = node.infer([], _Ctx("a/b/u", "a/b/m"))  # type: ignore[arg-type]
    assert inf.out == ReleasedT(()) and inf.derivation == "noise scale per unit sensitivity of a/b/m (certified share)"
    for noised_by in ("a/m", "m", None):  # an outer scope's mechanism, or no mechanism
        with pytest.raises(PlanTypeError) as e:
            node.infer([], _Ctx("a/b/u", noised_by))  # type: ignore[arg-type]
        assert (e.value.node, e.value.problem, e.value.fix) == (
            "a/b/u", "of=m is not the output of a noise-adding mechanism (GaussianMech, LaplaceMech or Peel) of this "
            "plan or loop body", "pass the handle a GaussianMech, LaplaceMech or Peel returned, in the same scope")
    with pytest.raises(PlanTypeError) as e:
        node.infer([ReleasedT(())], _Ctx("u", "m"))  # type: ignore[arg-type]
    assert (e.value.node, e.value.problem, e.value.fix) == ("u", "NoiseScale has no inputs",
                                                            "pass the mechanism's output as of=")

    class NotReleased(_Ctx):
        def type_of(self, ref: Any) -> Any:
            return object()

    with pytest.raises(Exception) as p:
        node.infer([], NotReleased("u", None))  # type: ignore[arg-type]
    assert getattr(p.value, "problem", "") == "parameter 'of' refers to m, which is not released"
    with pytest.raises(PlanTypeError) as e:
        noise_scale(3.0)
    assert (e.value.node, e.value.problem, e.value.fix) == (
        "NoiseScale", "noise_scale needs the released output of a mechanism, got 3.0",
        "pass the handle a GaussianMech, LaplaceMech or Peel returned")
    with pytest.raises(ValueError) as v:
        param_ref(2.0)
    assert str(v.value) == "expected a released handle, got 2.0"


def test_symmetrised_matrix_post_processing() -> None:
    S = np.array([[2.0, 1.0], [3.0, -4.0]])  # not symmetric: (S + S^T) / 2 = [[2, 2], [2, -4]]
    A = np.array([[2.0, 2.0], [2.0, -4.0]])
    w, V = np.linalg.eigh(A)
    ew, eV = Eigh().evaluate([S], None)  # type: ignore[arg-type]
    assert ew == pytest.approx(w, rel=1e-12) and np.abs(eV) == pytest.approx(np.abs(V), rel=1e-12)
    P = PSDProject().evaluate([S], None)  # type: ignore[arg-type]
    assert P == pytest.approx((V * np.maximum(w, 0.0)) @ V.T, abs=1e-12)
    assert PSDProject(floor=0.5).evaluate([S], None) == pytest.approx((V * np.maximum(w, 0.5)) @ V.T, abs=1e-12)  # type: ignore[arg-type]
    assert PSDProject().evaluate([np.array([[1, 0], [0, 2]])], None).tolist() == [[1.0, 0.0], [0.0, 2.0]]  # type: ignore[arg-type]
    S32 = S.astype(np.float32)  # decomposed in float64 whatever the released dtype
    assert PSDProject().evaluate([S32], None).dtype == np.float64  # type: ignore[arg-type]
    assert Eigh().evaluate([S32], None)[0].dtype == np.float64  # type: ignore[arg-type]


def test_matrix_post_processing_reads_non_finite_entries_as_zero() -> None:
    """A release with noise of infinite scale (a bound that divided by 0) is NaN or +-inf; ``eigh`` raised on it
    (LinAlgError, after the plan's releases).  Its non-finite entries count as 0 (``finite_or_zero``, the policy of
    every node that reads a released value), and entries near the float range do not overflow when symmetrised."""
    S = np.array([[np.nan, 1.0, np.inf], [1.0, 2.0, -np.inf], [np.nan, 0.0, 3.0]])
    Z = np.array([[0.0, 1.0, 0.0], [1.0, 2.0, 0.0], [0.0, 0.0, 3.0]])
    (sw, sV), (zw, zV) = Eigh().evaluate([S], None), Eigh().evaluate([Z], None)  # type: ignore[arg-type]
    assert np.array_equal(sw, zw) and np.array_equal(sV, zV)
    assert np.array_equal(PSDProject().evaluate([S], None), PSDProject().evaluate([Z], None))  # type: ignore[arg-type]
    H = np.full((2, 2), 1.5e308)
    w, _ = Eigh().evaluate([H], None)  # type: ignore[arg-type]
    assert np.isfinite(w[0]) and w[0] == pytest.approx(0.0, abs=1e300)
    assert np.isfinite(PSDProject().evaluate([np.diag([1.5e308, -1.0])], None)).all()  # type: ignore[arg-type]


def test_named_parameters_and_warnings_reach_the_ledger() -> None:
    def derivation(value: Any, why: str = "") -> str:
        b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
        g = param(b, "g", value, why) if why else param(b, "g", value)
        assert isinstance(g, Released) and g.builder is b
        return str(b.build(g=g).check().entries[0].derivation)

    assert derivation([1.5, 2.0]) == "g = [1.5, 2] shape (2,)"
    assert derivation(1.0, "from n") == "g = 1 (from n)"
    assert derivation(np.arange(8.0)) == "g = [0, 1, 2, 3, 4, 5, ...] shape (8,)"
    assert derivation(np.arange(6.0)) == "g = [0, 1, 2, 3, 4, 5] shape (6,)"
    assert derivation(np.arange(7.0)) == "g = [0, 1, 2, 3, 4, 5, ...] shape (7,)"
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    with pytest.raises(ValueError) as v:
        param(b, "bad", [1.0, None])
    assert str(v.value) == "parameter 'bad' must be finite"
    b2 = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        accuracy_warning(b2, "too few rows")
    (w,) = caught
    assert w.category is AccuracyWarning and str(w.message) == "too few rows"
    plan = b2.build(x=b2.public(0.0))
    assert plan.check().warnings == ("too few rows",)
    node = next(rec.node for rec in plan.records if isinstance(rec.node, Public) and rec.node.name == "warning")
    assert node.values == (0.0,) and node.why == "too few rows"


def test_function_paths() -> None:
    assert function_path(np.sqrt) == "numpy:sqrt"
    assert load_function("dpflow.nodes.postprocess:Public.infer") is Public.infer

    class Anonymous:
        __module__ = None  # type: ignore[assignment]

        def __call__(self) -> None: ...

    assert function_path(Anonymous()).startswith("builtins:")
    plain = object()  # no __module__, no __qualname__: named by its repr
    assert function_path(plain) == f"builtins:{plain!r}"  # type: ignore[arg-type]

    def local() -> None: ...

    cases = [(function_path(local), f"{function_path(local)} is a lambda or local function; use a module-level "
                                     "function"),
             ("dpflow.nodes.postprocess:load_function:x", "cannot import post-processing function "
              "dpflow.nodes.postprocess:load_function:x: module 'dpflow.nodes.postprocess' has no attribute "
              "'load_function:x'"),
             ("dpflow.nodes.postprocess:WARNING", "dpflow.nodes.postprocess:WARNING is not callable")]
    for path, message in cases:
        with pytest.raises(SerializationError) as e:
            load_function(path)
        assert str(e.value) == message


def test_pack() -> None:
    assert type(Pack().evaluate([1.0, 2.0], None)) is tuple  # type: ignore[arg-type]
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    with pytest.raises(PlanTypeError) as e:
        b.build(p=Pack(names=("a", "b"))(b.public(1.0))).check()
    assert (e.value.problem, e.value.fix) == ("Pack has 1 parts but 2 names ['a', 'b']",
                                              "give one name per packed value")
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    plan = b.build(p=Pack(names=("a",))(b.public(1.0)))
    assert plan.check().entries[-1].derivation == ""


@pytest.mark.skipif("mutants" in Path(__file__).parts, reason="mutmut's trampolines add frames between the caller "
                    "and accuracy_warning (see EQUIVALENT in benchmarks/mutation.py)")
def test_the_warning_points_at_the_callers_line() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        accuracy_warning(b, "too few rows")
    (w,) = caught
    assert w.filename == __file__


def test_public_constants() -> None:
    class Ctx:
        node_id = "c"

    node = Public(values=[1.0, 2.0, 3.0, 4.0], shape=(2, 2))
    assert node.infer([], Ctx()) == Inferred(ReleasedT((2, 2)), "public constant")  # type: ignore[arg-type]
    named = Public(values=[2.5], shape=(), name="g", why="from n")
    assert named.infer([], Ctx()) == Inferred(ReleasedT(()), "g = 2.5 (from n)")  # type: ignore[arg-type]
    cases = [(node, [ReleasedT(())], "a public constant has no inputs", "remove the inputs"),
             (Public(values=[1.0, 2.0, 3.0], shape=(2, 2)), [], "3 values do not fill shape (2, 2)",
              "pass a rectangular array")]
    for bad, ins, problem, fix in cases:
        with pytest.raises(PlanTypeError) as e:
            bad.infer(ins, Ctx())  # type: ignore[arg-type]
        assert (e.value.node, e.value.problem, e.value.fix) == ("c", problem, fix)
    scalar = named.evaluate([], None)  # type: ignore[arg-type]
    assert type(scalar) is float and scalar == 2.5
    assert node.evaluate([], None).tolist() == [[1.0, 2.0], [3.0, 4.0]]  # type: ignore[arg-type]
    assert Apply(fn=np.abs).shape is None and Apply(fn=np.abs, shape=[2]).shape == (2,)


def test_get_refusals_name_the_fix() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    with pytest.raises(PlanTypeError) as e:
        b.build(g=Get("radius")(Pack()(b.public(1.0), b.public(2.0)))).check()
    assert e.value.fix == "name the parts with Pack(names=...), or read by position with Get(index=...)"
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    with pytest.raises(PlanTypeError) as e:
        b.build(g=Get("radius")(Pack(names=("c",))(b.public(1.0)))).check()
    assert e.value.fix == "name one of the parts given to Pack(names=...)"



def test_parts_survive_pickling_with_their_names() -> None:
    """A named Pack's value crosses process boundaries (dask workers, saved runs) as a pickle: its names too."""
    import pickle

    from dpflow.nodes.postprocess import Parts

    p = Parts((1.0, (2.0, 3.0)), ("a", "b"))
    q = pickle.loads(pickle.dumps(p))
    assert type(q) is Parts and q == p == (1.0, (2.0, 3.0)) and q.names == ("a", "b")
