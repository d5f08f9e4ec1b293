"""A private value never decides whether a run is charged (issue 28 item 1).

The attack: a column of Python objects holding an integer too large for a float (``10**400``) in one dataset and
not in its neighbour.  On the neighbour the run releases and is charged; if the value made the run raise before the
budget store marks the data as read, the reservation is refunded and the analyst can probe for free.  Both
defences are pinned: every value maps through the declared policy (the run releases), and any exception raised
once values are touched commits the reservation (only a public schema refusal gives the budget back).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.budget import BudgetStore
from dpflow.errors import DataError, ExecutionError

N_ROWS = 20
RHO = Fraction(1, 100)


def _plan() -> dp.Plan:
    b = dp.PlanBuilder(budget=dp.ZCDP(RHO))
    X = b.source("X", n=N_ROWS, columns=["age"])
    return b.build(m=N.GaussianMech()(N.Mean()(N.Clip(box=(0.0, 100.0))(X))))


def _frame(last: Any) -> pd.DataFrame:
    return pd.DataFrame({"age": pd.Series([40] * (N_ROWS - 1) + [last], dtype=object)})


@pytest.mark.parametrize("hostile", [10**400, -(10**400), Fraction(10**400, 3)], ids=["int", "-int", "fraction"])
def test_a_value_too_large_for_a_float_is_charged_like_its_neighbour(tmp_path: Path, hostile: Any) -> None:
    store = BudgetStore(tmp_path / "budget.sqlite")
    store.open("d", dp.ZCDP(1))
    _plan().run({"X": _frame(40)}, budget_store=store, dataset="d")  # the neighbour: released and charged
    assert store.status("d").committed == RHO
    for _ in range(20):  # the probe: each run on the dataset holding the hostile value
        res = _plan().run({"X": _frame(hostile)}, budget_store=store, dataset="d")
        assert np.isfinite(res.released["m"]).all()
    st = store.status("d")
    assert (st.committed, st.pending, st.runs) == (21 * RHO, 0, 21)
    assert store.verify("d").ok


class _Raising:
    """An object column's value whose conversion fails in a way no policy foresees."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __float__(self) -> float:
        raise self.exc


def test_an_exception_raised_once_values_are_touched_commits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Defence in depth: if converting a value raised anyway, the data counts as read (the cost is committed) and
    the error names the source and the exception's type only; a public schema refusal (wrong n) still gives the
    budget back."""
    import dpflow.tables as tables

    def broken(v: Any) -> float:
        if isinstance(v, _Raising):
            raise v.exc
        return 40.0

    monkeypatch.setattr(tables, "_AS_FLOAT", np.frompyfunc(broken, 1, 1))
    store = BudgetStore(tmp_path / "budget.sqlite")
    store.open("d", dp.ZCDP(1))
    with pytest.raises(DataError, match="declares n=20"):
        _plan().run({"X": pd.DataFrame({"age": [40.0] * (N_ROWS + 1)})}, budget_store=store, dataset="d")
    assert store.status("d").spent == 0
    with pytest.raises(ExecutionError) as err:
        _plan().run({"X": _frame(_Raising(ZeroDivisionError("private 42")))}, budget_store=store, dataset="d")
    st = store.status("d")
    assert (st.committed, st.pending) == (RHO, 0)
    # the exception's text could quote a value: only its type is named, and it is not kept (no debug)
    assert "reading source X failed (ZeroDivisionError)" in str(err.value) and "42" not in str(err.value)
    assert err.value.__cause__ is None and err.value.__context__ is None
    assert any("committed" in note for note in getattr(err.value, "__notes__", []))
    with pytest.raises(ExecutionError) as err:
        _plan().run({"X": _frame(_Raising(ZeroDivisionError("private 42")))}, debug=True)
    assert isinstance(err.value.__cause__.__cause__, ZeroDivisionError)  # type: ignore[union-attr]


def test_a_data_file_is_read_when_the_run_reads_its_sources(tmp_path: Path) -> None:
    """The command line's files (``dpflow.cli.load_data``): a value that is not a number is missing, as in a
    table; a file that does not parse fails after the reservation, so the failure is charged like a read."""
    from dpflow.cli import load_data

    rows = "\n".join(["40.0"] * (N_ROWS - 1))
    (tmp_path / "a.csv").write_text(rows + "\n40.0\n")
    (tmp_path / "b.csv").write_text(rows + "\nabc\n")  # the neighbour: one value is not a number
    (tmp_path / "c.csv").write_text(rows + "\n40.0,1.0\n")  # a line that does not parse
    b = dp.PlanBuilder(budget=dp.ZCDP(RHO))
    X = b.source("X", dp.Vectors(d=1), n=N_ROWS)
    plan = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(box=(0.0, 100.0))(X))))
    store = BudgetStore(tmp_path / "budget.sqlite")
    store.open("d", dp.ZCDP(1))
    for name in ("a", "b"):
        plan.run(load_data([f"X={tmp_path / name}.csv"]), budget_store=store, dataset="d")
    with pytest.raises(ExecutionError, match="reading source X failed"):
        plan.run(load_data([f"X={tmp_path / 'c'}.csv"]), budget_store=store, dataset="d")
    st = store.status("d")
    assert (st.committed, st.pending) == (3 * RHO, 0)
    with pytest.raises(FileNotFoundError):  # the path is public: refused before anything is reserved
        load_data([f"X={tmp_path / 'missing.csv'}"])
