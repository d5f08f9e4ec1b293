"""``dpflow run --backend dask``: .npy memory maps and Parquet columns by name, the same release as numpy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dpflow.cli import main

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("dask.dataframe")


def test_run_on_dask_matches_numpy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    rows = np.random.default_rng(0).normal(size=(2000, 5))
    np.save(tmp_path / "x.npy", rows)
    pd.DataFrame(rows[:, ::-1], columns=[f"c{i}" for i in range(4, -1, -1)]).to_parquet(tmp_path / "x.parquet")
    plan = str(ROOT / "examples" / "clipped_mean_plan.py")
    runs = {"numpy": ["--data", f"X={tmp_path / 'x.npy'}"],
            "dask-npy": ["--data", f"X={tmp_path / 'x.npy'}", "--backend", "dask"],
            "dask-parquet": ["--data", f"X={tmp_path / 'x.parquet'}#c0,c1,c2,c3,c4", "--backend", "dask"]}
    out = {}
    for label, extra in runs.items():
        rep = tmp_path / label
        assert main(["run", plan, *extra, "--report", str(rep), "--seed", "1"]) == 0
        out[label] = json.loads((rep / "report.json").read_text())
    for label in ("dask-npy", "dask-parquet"):
        assert out[label]["run"]["backend"] == "dask"
        assert np.allclose(out[label]["released"]["mean"], out["numpy"]["released"]["mean"], rtol=1e-9)
    capsys.readouterr()


def test_columns_need_dask_and_scheduler_needs_dask(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = str(ROOT / "examples" / "clipped_mean_plan.py")
    assert main(["run", plan, "--data", f"X={tmp_path / 'x.csv'}#a", "--report", str(tmp_path / "r")]) == 1
    assert "columns by name need --backend dask" in capsys.readouterr().err
    np.save(tmp_path / "x.npy", np.zeros((2000, 5)))
    assert main(["run", plan, "--data", f"X={tmp_path / 'x.npy'}", "--scheduler", "tcp://127.0.0.1:1",
                 "--report", str(tmp_path / "s")]) == 1
    assert "--scheduler needs --backend dask" in capsys.readouterr().err


COLUMNS_PLAN = '''
import dpflow as dp
from dpflow import nodes as N
b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
X = b.source("X", columns=["age", "bmi", "bp"], n=2000)
plan = b.build(mean=N.GaussianMech()(N.Mean()(N.Clip(box=(0.0, 200.0))(X))))
'''


def test_columns_after_the_hash_are_matched_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--data X=f.parquet#bmi,age,bp`` reads those columns; the plan's declared columns select from them by
    name, as the numpy backend does from the whole file; a declared column not among them is refused."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    rng = np.random.default_rng(1)
    pd.DataFrame({"ssn_last4": rng.integers(0, 10_000, 2000).astype(float), "bp": rng.uniform(100, 180, 2000),
                  "bmi": rng.uniform(15, 40, 2000), "age": rng.uniform(1, 9, 2000)}).to_parquet(tmp_path / "t.parquet")
    (tmp_path / "plan.py").write_text(COLUMNS_PLAN)
    plan, data = str(tmp_path / "plan.py"), tmp_path / "t.parquet"
    out = {}
    for label, extra in {"numpy": [f"X={data}"], "dask": [f"X={data}#bmi,age,bp", "--backend", "dask"]}.items():
        assert main(["run", plan, "--data", *extra, "--report", str(tmp_path / label), "--seed", "3"]) == 0
        out[label] = json.loads((tmp_path / label / "report.json").read_text())["released"]["mean"]
    assert np.allclose(out["dask"], out["numpy"], rtol=1e-9)
    capsys.readouterr()
    assert main(["run", plan, "--data", f"X={data}#bmi,bp,ssn_last4", "--backend", "dask", "--report",
                 str(tmp_path / "missing"), "--seed", "3"]) == 1
    assert "no column(s) ['age']" in capsys.readouterr().err
