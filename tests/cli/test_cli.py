"""The command line: demo smoke test, check / run / privacy convert, exit statuses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpflow.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_demo_writes_report_and_prints_estimates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--out", str(tmp_path / "rep"), "--seed", "5"]) == 0
    out = capsys.readouterr().out
    assert "source X: rho=" in out and "l2 error" in out
    assert out.count("NOT FOR RELEASE: this run used seeded noise") == 2  # on the terminal too
    report = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert report["run"]["seeded"] is True
    assert set(report["released"]) == {"mean", "covariance", "histogram_x0"}
    derivations = [e["derivation"] for e in report["ledger"]["entries"] if e["kind"] == "Mean"]
    assert derivations and "stability*diameter/n" in derivations[0]
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "NOT FOR RELEASE" in md and "### Totals per source" in md and "(used)" in md


def test_demo_mean_error_is_small(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the demo's own printed l2 error of the mean: sigma per coordinate is about 0.0031 (rho = 0.125),
    # so the l2 error over 5 coordinates is below 6 * 0.0031 * sqrt(5) = 0.042 except with tiny probability
    main(["demo", "--out", str(tmp_path), "--seed", "11"])
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "l2 error" in ln)
    assert float(line.split()[-1]) < 0.042


def test_check_refuses_over_budget_with_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(ROOT / "examples" / "over_budget_plan.py")]) == 2
    err = capsys.readouterr().err
    assert "gaussian_mech_4" in err and "Fix:" in err and "rho=0.7" in err


def test_check_prints_ledger_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(ROOT / "examples" / "clipped_mean_plan.py")]) == 0
    out = capsys.readouterr().out
    # a SecureNoise certificate (the default): PLD mode through the lattice Gaussian PLD (issue 16)
    assert "PLD mode" in out and "lattice Gaussian PLD" in out and "gaussian_mech_3" in out
    assert "DP by PLD (dp_accounting, pessimistic)" in out


def test_privacy_convert_prints_cks_epsilon(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["privacy", "convert", "--rho", "0.5", "--delta", "1e-6"]) == 0
    assert abs(float(capsys.readouterr().out.strip()) - 5.221534) < 1e-6


def test_privacy_convert_all_names_the_rule_that_wins_for_the_lattice_gaussian(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["privacy", "convert", "--rho", "0.5", "--delta", "1e-6", "--all"]) == 0
    out = capsys.readouterr().out
    lattice = out.split("the discrete Gaussian on dpflow's lattice")[1].splitlines()[1:]
    rows = {line.split("\t")[1].replace("  (tightest valid)", ""): (float(line.split("\t")[0]), "tightest" in line)
            for line in lattice}
    assert "exact Gaussian-DP" not in rows  # proven for continuous noise only
    pld_eps, pld_tightest = rows["PLD (dp_accounting, pessimistic)"]
    assert pld_tightest and 4.886554 < pld_eps < 4.887
    assert abs(rows["zCDP -> (eps,delta) by CKS"][0] - 5.221534) < 1e-6


def test_run_with_npy_and_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = np.random.default_rng(0).normal(size=(2000, 5))
    np.save(tmp_path / "x.npy", rows)
    np.savetxt(tmp_path / "x.csv", rows, delimiter=",")
    plan = str(ROOT / "examples" / "clipped_mean_plan.py")
    for name in ("x.npy", "x.csv"):
        rep = tmp_path / f"rep_{name}"
        assert main(["run", plan, "--data", f"X={tmp_path / name}", "--report", str(rep), "--seed", "1"]) == 0
        released = json.loads((rep / "report.json").read_text())["released"]
        assert np.allclose(released["mean"], rows.mean(axis=0), atol=0.5)
    capsys.readouterr()


def test_run_bad_data_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "x.npy", np.zeros((10, 3)))
    code = main(["run", str(ROOT / "examples" / "clipped_mean_plan.py"), "--data", f"X={tmp_path / 'x.npy'}",
                 "--report", str(tmp_path / "r")])
    assert code == 1
    assert "expects an (n, 5) array" in capsys.readouterr().err


def test_missing_plan_file_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "no/such/plan.py"]) == 1


def test_demo_default_output_never_overwrites_and_still_runs_twice(tmp_path, monkeypatch, capsys):
    """The README's demo command works every time: the default output moves to the next free directory."""
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--seed", "1"]) == 0
    assert main(["demo", "--seed", "1"]) == 0
    assert (tmp_path / "dpflow-demo-report" / "report.json").exists()
    assert (tmp_path / "dpflow-demo-report-2" / "report.json").exists()
    out = capsys.readouterr().out
    assert "dpflow-demo-report-2" in out
    assert main(["demo", "--seed", "1", "--out", "dpflow-demo-report"]) == 1  # an explicit --out is never overwritten


@pytest.mark.parametrize("delta", ["1", "1.0", "2", "0", "-1e-6", "nan", "inf", "x"])
def test_privacy_convert_refuses_an_invalid_delta_with_status_2(delta: str, capsys: pytest.CaptureFixture[str]
                                                               ) -> None:
    for extra in ([], ["--all"]):
        with pytest.raises(SystemExit) as err:
            main(["privacy", "convert", "--rho", "0.5", f"--delta={delta}", *extra])
        assert err.value.code == 2
        msg = capsys.readouterr().err
        assert "argument --delta" in msg and ("not a number" in msg or "strictly between 0 and 1" in msg)


@pytest.mark.parametrize("rho", ["-1", "nan", "inf"])
def test_privacy_convert_refuses_an_invalid_rho_with_status_2(rho: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as err:
        main(["privacy", "convert", f"--rho={rho}", "--delta", "1e-6"])
    assert err.value.code == 2 and "rho must be a finite number >= 0" in capsys.readouterr().err


def test_privacy_convert_accepts_deltas_just_inside_the_interval(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["privacy", "convert", "--rho", "0", "--delta", "0.999999"]) == 0
    assert main(["privacy", "convert", "--rho", "0.5", "--delta", "5e-324"]) == 0
    out = capsys.readouterr().out.split()
    assert float(out[0]) == 0.0 and float(out[1]) > 30


def test_a_missing_dask_extra_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "dask", None)  # import dask fails as without the extra
    monkeypatch.delitem(sys.modules, "dpflow.interpreter.dask_backend", raising=False)
    np.save(tmp_path / "x.npy", np.zeros((20, 5)))
    assert main(["run", str(ROOT / "examples" / "clipped_mean_plan.py"), "--data", f"X={tmp_path / 'x.npy'}",
                 "--backend", "dask", "--report", str(tmp_path / "r")]) == 1
    assert capsys.readouterr().err == ("dpflow: error: the dask backend needs the dask extra: "
                                       "pip install 'dpflow[dask]'\n")


def test_ctrl_c_while_dpflow_is_imported_is_one_line(capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The console script imports dpflow (seconds on a busy machine) after its own Ctrl-C handling is in place."""
    import builtins

    import dpflow_cli

    real = builtins.__import__

    def interrupted(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "dpflow.cli":
            raise KeyboardInterrupt
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", interrupted)
    assert dpflow_cli.main() == 130
    assert capsys.readouterr().err == "dpflow: interrupted\n"
