"""The command line reads CSV files with a header and Parquet files as DataFrames (columns by name)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpflow.cli import main

PLAN = '''
import dpflow as dp
from dpflow import nodes as N
b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
X = b.source("X", columns=["age", dp.Category("sex", ["F", "M"], unseen="none")], n=500)
plan = b.build(age=N.GaussianMech()(N.Mean()(N.Clip(box=(0.0, 100.0))(N.Columns(keep=["age"])(X)))),
               female=N.GaussianMech()(N.Mean()(N.Clip(box=(0.0, 1.0))(N.Columns(keep=["sex=F"])(X)))))
'''


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_run_reads_named_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"id": np.arange(500), "sex": rng.choice(["F", "M"], 500), "age": rng.uniform(20, 60, 500)})
    path = tmp_path / f"x.{fmt}"
    df.to_csv(path, index=False) if fmt == "csv" else df.to_parquet(path)
    (tmp_path / "plan.py").write_text(PLAN)
    rep = tmp_path / "rep"
    assert main(["run", str(tmp_path / "plan.py"), "--data", f"X={path}", "--report", str(rep), "--seed", "2"]) == 0
    released = json.loads((rep / "report.json").read_text())["released"]
    assert abs(released["age"][0] - df.age.mean()) < 2.0          # sigma = sqrt(2)*100/500 = 0.28
    assert abs(released["female"][0] - (df.sex == "F").mean()) < 0.05
    capsys.readouterr()


def test_csv_with_header_needs_the_declared_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pd.DataFrame({"age": [1.0] * 500}).to_csv(tmp_path / "x.csv", index=False)
    (tmp_path / "plan.py").write_text(PLAN)
    code = main(["run", str(tmp_path / "plan.py"), "--data", f"X={tmp_path / 'x.csv'}", "--report",
                 str(tmp_path / "r"), "--seed", "1"])
    assert code == 1 and "no column(s) ['sex']" in capsys.readouterr().err
