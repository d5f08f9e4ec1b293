"""The planner validates a plan from any origin (builder, ``Plan(...)``, hand-edited JSON) before it
infers anything (issue 14): only released values leave a plan or steer a node, sources are declared
once and only at the top level, and a Repeat body has one Input and one State stand-in (at most one
Round).  ``certify``, ``Plan.check``, ``run`` and the ``dpflow check`` / ``dpflow run`` commands all
refuse such plans before any data is read (the CLI with exit status 2, writing nothing).  Each test
here failed before the planner's validation step existed (the controls excepted)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from test_planner import assert_refusal

import dpflow as dp
from dpflow import nodes as N
from dpflow.cli import main
from dpflow.planner.certify import certify

Edit = Callable[[dict[str, Any]], None]


def _step(rows: Any, state: Any, k: Any) -> Any:
    return N.GaussianMech()(N.Mean()(N.Clip(radius=1.0, center=state)(rows)))


def base_plan() -> dp.Plan:
    """A mean, a sum over an index piece and a two-round Repeat, all on source X."""
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=2), n=100)
    m = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))
    left, _ = N.split(X, N.SplitByIndex(pieces=2))
    s = N.GaussianMech()(N.Sum()(N.Clip(radius=1.0)(left)))
    last = N.repeat(X, b.public([0.0, 0.0]), _step, times=2)
    return b.build(m=m, s=s, last=last, m_abs=N.Apply(fn=np.abs)(m))


DATA = {"X": np.random.default_rng(0).normal(size=(100, 2))}


class Untouchable(Mapping[str, Any]):
    """Data that fails the test when anything reads it: refusals must come before the data."""

    def __getitem__(self, key: str) -> Any:
        raise AssertionError("the data was read")

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the data was read")

    def __len__(self) -> int:
        raise AssertionError("the data was read")


def edited(plan: dp.Plan, edit: Edit) -> dp.Plan:
    data = json.loads(plan.to_json())
    edit(data)
    return dp.Plan.from_json(json.dumps(data))


def node_id(records: list[dict[str, Any]], kind: str) -> str:
    return str(next(r["id"] for r in records if r["kind"] == kind))


def body(data: dict[str, Any], depth: int = 1) -> dict[str, Any]:
    """The ``$subplan`` of the first Repeat (``depth`` 2: of the first Repeat inside it)."""
    records = data["nodes"]
    for _ in range(depth):
        sub: dict[str, Any] = next(r for r in records if r["kind"] == "Repeat")["params"]["body"]["$subplan"]
        records = sub["records"]
    return sub


def refused_everywhere(plan: dp.Plan, error: type[dp.PlanError], *names: str) -> dp.PlanError:
    """certify, Plan.check and run all refuse ``plan`` with ``error`` naming one of ``names``."""
    found = []
    for attempt in (lambda: certify(plan), plan.check, lambda: plan.run(Untouchable(), noise=dp.SeededNoise(0))):
        with pytest.raises(error) as info:
            attempt()
        assert_refusal(info.value, *names)
        found.append(info.value)
    return found[0]


# =========================================================================== outputs


@pytest.mark.parametrize(("kind", "what"), [("Source", "Rows"), ("Clip", "Rows"), ("Mean", "Stat"),
                                            ("SplitByIndex", "Pieces"), ("Piece", "Rows"), ("Sum", "Stat")])
def test_an_output_pointing_at_a_sensitive_node_is_refused(kind: str, what: str) -> None:
    target = node_id(json.loads(base_plan().to_json())["nodes"], kind)
    plan = edited(base_plan(), lambda d: d["outputs"].__setitem__("raw", target))
    err = refused_everywhere(plan, dp.PostProcessingError, target)
    assert err.node == target and f"output 'raw' is a sensitive {what} ({kind})" in str(err)


def test_a_sensitive_output_of_a_plan_built_directly_is_refused() -> None:
    plan = base_plan()
    source = plan.records[0].id
    with pytest.raises(dp.PostProcessingError) as info:
        certify(attrs.evolve(plan, outputs=(("raw", source),)))
    assert_refusal(info.value, source)


@pytest.mark.parametrize("where", ["undefined", "body", "body_key"])
def test_an_output_that_is_not_a_top_level_node_is_refused(where: str) -> None:
    data = json.loads(base_plan().to_json())
    rec_id = node_id(data["nodes"], "Repeat")
    inner = node_id(body(data)["records"], "GaussianMech")
    target = {"undefined": "ghost_9", "body": inner, "body_key": f"{rec_id}/{inner}"}[where]
    plan = edited(base_plan(), lambda d: d["outputs"].__setitem__("x", target))
    err = refused_everywhere(plan, dp.PlanReferenceError, target)
    assert err.node == target


@pytest.mark.parametrize("kind", ["Public", "Repeat", "Apply", "GaussianMech"])
def test_outputs_pointing_at_released_nodes_are_accepted(kind: str) -> None:
    """Control: public constants, Repeat states, post-processing and mechanisms are released."""
    target = node_id(json.loads(base_plan().to_json())["nodes"], kind)
    plan = edited(base_plan(), lambda d: d["outputs"].__setitem__("x", target))
    certify(plan)
    assert "x" in plan.run(DATA, noise=dp.SeededNoise(0)).released


def test_a_plan_that_releases_nothing_is_refused() -> None:
    plan = edited(base_plan(), lambda d: d.__setitem__("outputs", {}))
    refused_everywhere(plan, dp.PlanTypeError, plan.name)


def test_a_parameter_pointing_at_a_sensitive_node_is_refused() -> None:
    """RidgeSolve does not check its ``scale`` reference itself: the planner checks every parameter
    reference of every node (it released the pre-noise sum's first entry's square as lambda before)."""
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    Z = b.source("Z", dp.Vectors(d=3), n=100)
    C = N.Clip(radius=1.0)(Z)
    total = N.Sum()(C)
    ridge = N.RidgeSolve(ridge=0.1, scale=b.public(2.0))(N.GaussianMech()(N.SecondMoment()(C)))
    plan = b.build(beta=ridge, s=N.GaussianMech()(total))
    certify(plan)
    ridge_id = node_id(json.loads(plan.to_json())["nodes"], "RidgeSolve")

    def edit(d: dict[str, Any]) -> None:
        next(r for r in d["nodes"] if r["kind"] == "RidgeSolve")["params"]["scale"] = {"$ref": total.id}

    err = refused_everywhere(edited(plan, edit), dp.PostProcessingError, ridge_id)
    assert "'scale'" in str(err) and total.id in str(err)


# =========================================================================== sources


def _move_body_input_to_a_source(name: str, depth: int = 1) -> Edit:
    """Declare a source ``name`` inside a Repeat body and feed the body's Clip from it."""

    def edit(d: dict[str, Any]) -> None:
        source = dict(next(r for r in d["nodes"] if r["kind"] == "Source"))
        source["params"] = {**source["params"], "name": name}
        sub = body(d, depth)
        source["id"] = "b9.source_99"
        next(r for r in sub["records"] if r["kind"] == "Clip")["inputs"] = [source["id"]]
        sub["records"].insert(0, source)

    return edit


@pytest.mark.parametrize(("name", "outer"), [("X", True), ("X", False), ("Y", True)])
def test_a_source_inside_a_recurse_body_is_refused(name: str, outer: bool) -> None:
    """Before: rho 0.5 certified (100%) while the body spent more, ZeroDivisionError without a
    top-level mechanism, KeyError for another name."""
    b = dp.PlanBuilder(budget=dp.ZCDP("0.5"))
    X = b.source("X", dp.Vectors(d=2), n=100)
    outs = {"last": N.repeat(X, b.public([0.0, 0.0]), _step, times=3)}
    if outer:
        outs["m"] = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))
    plan = edited(b.build(**outs), _move_body_input_to_a_source(name))
    rec_id = node_id(json.loads(plan.to_json())["nodes"], "Repeat")
    err = refused_everywhere(plan, dp.PlanTypeError, f"{rec_id}/b9.source_99")
    assert f"source {name} is declared inside a control body" in str(err)


def test_a_source_inside_a_nested_recurse_body_is_refused() -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=2), n=100)

    def outer(rows: Any, state: Any, k: Any) -> Any:
        return N.repeat(rows, state, _step, times=2)

    plan = edited(b.build(last=N.repeat(X, b.public([0.0, 0.0]), outer, times=2)),
                  _move_body_input_to_a_source("X", depth=2))
    err = refused_everywhere(plan, dp.PlanTypeError, "b9.source_99")
    assert err.node.endswith("/b9.source_99") and err.node.count("/") == 2


@pytest.mark.parametrize("name", ["X", "Y"])
def test_the_builder_refuses_a_source_inside_a_recurse_body(name: str) -> None:
    b = dp.PlanBuilder(budget=dp.ZCDP(1))
    X = b.source("X", dp.Vectors(d=2), n=100)

    def step(rows: Any, state: Any, k: Any) -> Any:
        Z = rows.builder.source(name, dp.Vectors(d=2), n=100)
        return N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(Z)))

    with pytest.raises(dp.PlanTypeError) as info:
        N.repeat(X, b.public([0.0, 0.0]), step, times=3)
    assert_refusal(info.value, name)
    assert "inside a control body" in str(info.value) and "top-level builder" in str(info.value)


def _second_source(name: str) -> Edit:
    """Append a second source ``name`` with its own clipped mean, released as ``m2``."""

    def edit(d: dict[str, Any]) -> None:
        nodes = d["nodes"]
        src = next(r for r in nodes if r["kind"] == "Source")
        clip = next(r for r in nodes if r["kind"] == "Clip")
        gauss = next(r for r in nodes if r["kind"] == "GaussianMech")
        nodes += [{**src, "id": "source_90", "params": {**src["params"], "name": name}},
                  {**clip, "id": "clip_91", "inputs": ["source_90"]},
                  {"id": "mean_92", "kind": "Mean", "inputs": ["clip_91"], "params": {}},
                  {**gauss, "id": "gaussian_mech_93", "inputs": ["mean_92"]}]
        d["outputs"]["m2"] = "gaussian_mech_93"

    return edit


def test_a_source_name_declared_twice_is_refused() -> None:
    """Before: two totals of rho 1 each under a budget of 1, and one domain policy applied at run time."""
    plan = edited(base_plan(), _second_source("X"))
    err = refused_everywhere(plan, dp.PlanTypeError, "source_90")
    assert err.node == "source_90" and "source X is declared twice (also by source_0)" in str(err)


def test_two_sources_with_distinct_names_are_accepted() -> None:
    """Control: the same edit with a new name is an ordinary two-source plan."""
    plan = edited(base_plan(), _second_source("Y"))
    assert [t.source for t in certify(plan).ledger.totals] == ["X", "Y"]


# =========================================================================== Repeat stand-ins


def _stand_ins(kind: str, count: int) -> Edit:
    """Give the Repeat body ``count`` stand-ins of ``kind`` (an extra Input feeds its own mechanism)."""

    def edit(d: dict[str, Any]) -> None:
        sub = body(d)
        recs = sub["records"]
        first = next(r for r in recs if r["kind"] == kind)
        recs[:] = [r for r in recs if r["kind"] != kind or r is first]
        if count == 0:
            recs.remove(first)
        for k in range(1, count):
            recs.insert(1, {"id": f"b1.extra_{k}", "kind": kind, "inputs": [], "params": {}})
        if kind == "Input" and count == 2:  # a mechanism reading the second Input, released by the body
            clip = next(r for r in recs if r["kind"] == "Clip")
            gauss = next(r for r in recs if r["kind"] == "GaussianMech")
            recs += [{**clip, "id": "b1.clip_x", "inputs": ["b1.extra_1"], "params": {**clip["params"],
                                                                                        "center": None}},
                     {"id": "b1.mean_x", "kind": "Mean", "inputs": ["b1.clip_x"], "params": {}},
                     {**gauss, "id": "b1.gaussian_mech_x", "inputs": ["b1.mean_x"]}]
            sub["output"] = "b1.gaussian_mech_x"

    return edit


@pytest.mark.parametrize(("kind", "count"), [("Input", 0), ("Input", 2), ("State", 0), ("State", 2),
                                             ("Round", 2)])
def test_a_body_without_one_input_and_one_state_is_refused(kind: str, count: int) -> None:
    """Before: a second Input's mechanisms were spent but never charged (rho 1/2 certified, 1 spent);
    a missing Input or State crashed (StopIteration, KeyError at run time)."""
    plan = edited(base_plan(), _stand_ins(kind, count))
    rec_id = node_id(json.loads(plan.to_json())["nodes"], "Repeat")
    err = refused_everywhere(plan, dp.PlanTypeError, rec_id)
    assert err.node == rec_id and f"the body has {count} {kind} stand-ins" in str(err)


def test_a_body_without_a_round_stand_in_is_accepted() -> None:
    """Control: the round index is optional (the interpreter binds it only when present)."""
    plan = edited(base_plan(), _stand_ins("Round", 0))
    assert [t.rho for t in certify(plan).ledger.totals] == [Fraction(1)]
    assert "last" in plan.run(DATA, noise=dp.SeededNoise(0)).released


# =========================================================================== the command line


def _cli_plan(tmp_path: Path, plan: dp.Plan) -> str:
    (tmp_path / "plan.json").write_text(plan.to_json())
    py = tmp_path / "plan.py"
    py.write_text("from pathlib import Path\nimport dpflow as dp\n"
                  "plan = dp.Plan.from_json((Path(__file__).parent / 'plan.json').read_text())\n")
    np.save(tmp_path / "x.npy", DATA["X"])
    return str(py)


EDITS: dict[str, tuple[Edit, str]] = {
    "output_source": (lambda d: d["outputs"].__setitem__("raw", "source_0"), "source_0"),
    "output_transform": (lambda d: d["outputs"].__setitem__("raw", "clip_1"), "clip_1"),
    "output_mean": (lambda d: d["outputs"].__setitem__("raw", "mean_2"), "mean_2"),
    "body_source": (_move_body_input_to_a_source("X"), "b9.source_99"),
    "duplicate_source": (_second_source("X"), "source_90"),
}


@pytest.mark.parametrize("name", sorted(EDITS))
def test_cli_check_and_run_refuse_hand_edited_json(name: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    edit, culprit = EDITS[name]
    py = _cli_plan(tmp_path, edited(base_plan(), edit))
    assert main(["check", py]) == 2
    err = capsys.readouterr().err
    assert "plan refused" in err and culprit in err and "Fix:" in err
    report = tmp_path / "report"
    assert main(["run", py, "--data", f"X={tmp_path / 'x.npy'}", "--report", str(report), "--seed", "1"]) == 2
    captured = capsys.readouterr()
    assert culprit in captured.err and not captured.out
    assert not report.exists()


def test_cli_runs_the_unedited_json_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Control for the test above: the same files without an edit check and run."""
    py = _cli_plan(tmp_path, base_plan())
    assert main(["check", py]) == 0
    report = tmp_path / "report"
    assert main(["run", py, "--data", f"X={tmp_path / 'x.npy'}", "--report", str(report), "--seed", "1"]) == 0
    assert set(json.loads((report / "report.json").read_text())["released"]) == {"last", "m", "m_abs", "s"}
    capsys.readouterr()
