"""An engine failure's declared policy (``ExecutionError``): by default the error names the plan node and the
engine exception's type only, with no cause, no context and nothing of the engine's message anywhere in its
traceback; ``run(..., debug=True)`` or ``DPFLOW_DEBUG=1`` keeps the engine's exception as the cause; a budget
store's note is still attached; the CLI prints the engine's traceback only when debugging."""

from __future__ import annotations

import traceback
from typing import Any

import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.errors import DEBUG_ENV, ExecutionError
from dpflow.planner.certify import certify

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

SECRET = "row 17 has income 98123.45"


def _broken() -> np.ndarray:
    raise ValueError(SECRET)  # an engine error whose text quotes data


def _data() -> Any:
    good = da.from_array(np.ones((100, 3)), chunks=(50, 3))
    return da.concatenate([good, da.from_delayed(dask.delayed(_broken)(), shape=(50, 3), dtype=float)])


def _plan() -> tuple[dp.Plan, str]:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    plan = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=5.0)(b.source("X", dp.Vectors(d=3), n=150)))))
    mean = next(r.id for r in certify(plan).space.order if isinstance(r.node, N.Mean))
    return plan, mean


def _failure(**options: Any) -> ExecutionError:
    plan, _ = _plan()
    with dask.config.set(scheduler="synchronous"), pytest.raises(ExecutionError) as err:
        plan.run({"X": _data()}, noise=dp.SeededNoise(0), backend="dask", **options)
    return err.value


def _everything(e: BaseException) -> str:
    return "".join(traceback.format_exception(e))


def test_by_default_the_error_names_the_node_and_the_type_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    _, mean = _plan()
    e = _failure()
    assert str(e).startswith(f"{mean}: the dask computation failed (ValueError). Nothing was released.")
    assert e.node == mean and e.__cause__ is None and e.__context__ is None
    assert SECRET not in _everything(e)


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_debugging_keeps_the_engine_exception_as_the_cause(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if how == "environment":
        monkeypatch.setenv(DEBUG_ENV, "1")
        e = _failure()
    else:
        monkeypatch.delenv(DEBUG_ENV, raising=False)
        e = _failure(debug=True)
    assert SECRET in _everything(e) and isinstance(e.__cause__, ExecutionError)
    assert isinstance(e.__cause__.__cause__, ValueError)


def test_debug_false_overrides_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEBUG_ENV, "1")
    assert SECRET not in _everything(_failure(debug=False))


def test_a_budget_store_note_survives_and_the_reservation_stays_counted(tmp_path: Any,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from fractions import Fraction

    from dpflow.budget import BudgetStore

    monkeypatch.delenv(DEBUG_ENV, raising=False)
    store = BudgetStore(tmp_path / "budget.sqlite")
    store.open("d", dp.ZCDP(1))
    plan, _ = _plan()
    with dask.config.set(scheduler="synchronous"), pytest.raises(ExecutionError) as err:
        dp.run(plan, {"X": _data()}, backend="dask", budget_store=store, dataset="d")
    assert err.value.__cause__ is None and SECRET not in _everything(err.value)
    assert "committed: 1/2 on dataset 'd'" in " ".join(err.value.__notes__)
    assert store.status("d").spent == Fraction(1, 2)


def test_a_table_that_fails_to_read_is_named_by_its_source(monkeypatch: pytest.MonkeyPatch) -> None:
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    monkeypatch.delenv(DEBUG_ENV, raising=False)

    def unreadable() -> Any:
        raise ValueError(SECRET)

    meta = pd.DataFrame({"a": np.zeros(0), "b": np.zeros(0), "c": np.zeros(0)})
    table = dd.from_delayed([dask.delayed(unreadable)()], meta=meta)
    plan, _ = _plan()
    source = next(r.id for r in certify(plan).space.order if isinstance(r.node, N.Source))
    with dask.config.set(scheduler="synchronous"), pytest.raises(ExecutionError) as err:
        plan.run({"X": table}, noise=dp.SeededNoise(0), backend="dask")
    assert str(err.value).startswith(f"{source}: the dask computation failed (ValueError)")
    assert SECRET not in _everything(err.value)


@pytest.mark.parametrize("debug", [False, True])
def test_the_cli_prints_the_engine_traceback_only_when_debugging(debug: bool, capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from dpflow import cli

    plan, mean = _plan()

    def failing(args: Any) -> int:
        with dask.config.set(scheduler="synchronous"):
            plan.run({"X": _data()}, noise=dp.SeededNoise(0), backend="dask")
        return 0

    monkeypatch.setattr(cli, "parser", lambda: _Parser(failing))
    if debug:
        monkeypatch.setenv(DEBUG_ENV, "1")
    else:
        monkeypatch.delenv(DEBUG_ENV, raising=False)
    assert cli.main([]) == 1
    err = capsys.readouterr().err
    assert f"dpflow: error: {mean}: the dask computation failed (ValueError)" in err
    assert (SECRET in err) == debug and ("Traceback" in err) == debug


class _Parser:
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def parse_args(self, argv: Any) -> Any:
        return type("Args", (), {"fn": staticmethod(self.fn), "command": "run", "dataset": None})()
