"""``dpflow run`` output: the report directory is checked before any budget is reserved, reports are
written atomically and never overwrite an earlier one, a report that cannot be written is not lost,
Ctrl-C says what was charged, and seeded runs say NOT FOR RELEASE and are never charged to a store."""

from __future__ import annotations

import json
import os
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpflow as dp
from dpflow import cli
from dpflow.budget import BudgetStore
from dpflow.cli import main
from dpflow.report import Report, prepare_report_dir


@pytest.fixture
def setup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """A store with dataset ds (rho 1), a plan file costing rho 1/4 and its data."""
    plan_file = tmp_path / "plan.py"
    plan_file.write_text(
        "import dpflow as dp\nfrom dpflow import nodes as N\n"
        "b = dp.PlanBuilder(budget=dp.ZCDP('1/4'))\nX = b.source('X', dp.Vectors(d=2), n=20)\n"
        "plan = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))\n")
    np.save(tmp_path / "x.npy", np.zeros((20, 2)))
    store = str(tmp_path / "s.sqlite")
    assert main(["budget", "open", "ds", "--rho", "1", "--budget-store", store]) == 0
    capsys.readouterr()
    base = ["run", str(plan_file), "--data", f"X={tmp_path / 'x.npy'}"]
    return {"base": base, "charged": base + ["--dataset", "ds", "--budget-store", store],
            "store": BudgetStore(store), "tmp": tmp_path}


def _kinds(store: BudgetStore) -> list[str]:
    return [e.kind for e in store.entries("ds")]


@pytest.mark.parametrize("where", ["file", "under a file", "earlier report"])
def test_a_bad_report_directory_is_refused_before_any_budget_is_reserved(
        setup: dict[str, Any], capsys: pytest.CaptureFixture[str], where: str) -> None:
    tmp: Path = setup["tmp"]
    (tmp / "afile").write_text("not a directory")
    (tmp / "old").mkdir()
    (tmp / "old" / "report.json").write_text("earlier report")
    report = {"file": tmp / "afile", "under a file": tmp / "afile" / "r", "earlier report": tmp / "old"}[where]
    assert main(setup["charged"] + ["--report", str(report)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"dpflow: error: report directory {report} ") and "Traceback" not in err
    assert _kinds(setup["store"]) == ["open"]  # nothing reserved, nothing spent
    assert (tmp / "afile").read_text() == "not a directory"
    assert (tmp / "old" / "report.json").read_text() == "earlier report"
    assert sorted(p.name for p in (tmp / "old").iterdir()) == ["report.json"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only directory")
def test_an_unwritable_report_directory_is_refused_before_any_budget_is_reserved(
        setup: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    locked = setup["tmp"] / "locked"
    locked.mkdir(mode=0o500)
    try:
        assert main(setup["charged"] + ["--report", str(locked)]) == 1
    finally:
        locked.chmod(0o700)
    assert "is not writable" in capsys.readouterr().err and _kinds(setup["store"]) == ["open"]


def test_reports_are_never_overwritten(setup: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    out = setup["tmp"] / "r"
    assert main(setup["charged"] + ["--report", str(out)]) == 0
    first = (out / "report.json").read_text()
    assert main(setup["charged"] + ["--report", str(out)]) == 1
    assert "already holds report.json, report.md and report.html from an earlier run" in capsys.readouterr().err
    assert (out / "report.json").read_text() == first and _kinds(setup["store"]) == ["open", "reserve", "commit"]
    res = dp.run(_plan(), {"X": np.zeros((20, 2))})
    with pytest.raises(FileExistsError, match="never overwritten"):
        res.report.write(out)
    assert (out / "report.json").read_text() == first


def _plan() -> dp.Plan:
    from dpflow import nodes as N

    b = dp.PlanBuilder(budget=dp.ZCDP("1/4"))
    X = b.source("X", dp.Vectors(d=2), n=20)
    return b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X))))


def test_a_report_is_written_whole_or_not_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    res = dp.run(_plan(), {"X": np.zeros((20, 2))})

    def broken(self: Report) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Report, "to_markdown", broken)
    with pytest.raises(OSError, match="No space left"):
        res.report.write(tmp_path / "r")
    assert list((tmp_path / "r").iterdir()) == []  # no report.json without its report.md, no temporary files
    monkeypatch.undo()
    paths = res.report.write(tmp_path / "r")
    assert [p.name for p in paths] == ["report.json", "report.md", "report.html"]
    assert json.loads(paths[0].read_text()) == json.loads(res.report.to_json())
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["report.html", "report.json", "report.md"]


def test_a_failed_write_leaves_no_partial_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    res = dp.run(_plan(), {"X": np.zeros((20, 2))})
    calls: list[int] = []

    def fsync(fd: int) -> None:  # the disk fills up while the second file is written
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="No space left"):
        res.report.write(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_report_arriving_meanwhile_is_not_overwritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    res = dp.run(_plan(), {"X": np.zeros((20, 2))})
    monkeypatch.setattr("dpflow.report.report.prepare_report_dir", lambda d, create: Path(d))  # another run wins
    (tmp_path / "report.json").write_text("the other run's report")
    with pytest.raises(FileExistsError, match="got a report from another run meanwhile"):
        res.report.write(tmp_path)
    assert (tmp_path / "report.json").read_text() == "the other run's report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_prepare_report_dir_checks_and_creates_parents_only_when_asked(tmp_path: Path) -> None:
    assert not prepare_report_dir(tmp_path / "a" / "b").exists()
    assert prepare_report_dir(tmp_path / "a" / "b", create=True).is_dir()


def test_a_report_that_cannot_be_written_after_the_charge_is_not_lost(
        setup: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def full(self: Report, directory: Any) -> list[Path]:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Report, "write", full)
    assert main(setup["charged"] + ["--report", str(setup["tmp"] / "r")]) == 1
    captured = capsys.readouterr()
    assert "the report could not be written" in captured.err and "the run was charged" in captured.err
    assert "charged 1/4 to dataset ds (reservation 2)" in captured.out
    report = json.loads(captured.out[captured.out.index("\n{") + 1:])
    assert report["budget"]["charges"] == [{"dataset": "ds", "reservation": 2, "amount": "1/4"}]
    assert "m" in report["released"] and _kinds(setup["store"]) == ["open", "reserve", "commit"]


class _Interrupted(dp.SecureNoise):
    """Ctrl-C while the noise is drawn (after the data was read)."""

    def normal(self, sigma: float, shape: tuple[int, ...]) -> np.ndarray:
        raise KeyboardInterrupt

    def discrete_gaussian(self, sigma2: Any, shape: tuple[int, ...]) -> np.ndarray:
        raise KeyboardInterrupt


def test_ctrl_c_says_what_was_charged(setup: dict[str, Any], capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "_noise", lambda seed: _Interrupted())
    assert main(setup["charged"] + ["--report", str(setup["tmp"] / "r")]) == 130
    err = capsys.readouterr().err
    assert err.startswith("dpflow: interrupted\n") and "Traceback" not in err
    assert (f"budget store {setup['store'].path}: committed: 1/4 on dataset 'ds' (reservation 2); private data had "
            "been read, so the cost counts") in err
    assert setup["store"].status("ds").committed == dp.ZCDP("1/4").rho

    def interrupted_while_reading(*args: Any) -> Any:
        raise KeyboardInterrupt

    # reading the sources touches their values: an interrupt then counts as reading (issue 28 item 1)
    monkeypatch.setattr("dpflow.interpreter.run.prepare_data", interrupted_while_reading)
    assert main(setup["charged"] + ["--report", str(setup["tmp"] / "r2")]) == 130
    assert "committed: 1/4 on dataset 'ds' (reservation 4); private data had been read" in capsys.readouterr().err
    assert setup["store"].status("ds").spent == 2 * dp.ZCDP("1/4").rho

    assert main(setup["base"] + ["--report", str(setup["tmp"] / "r3")]) == 130  # no store: nothing to say
    assert capsys.readouterr().err == "dpflow: interrupted\n"


def test_an_interrupted_commit_says_the_reservation_stays_pending(setup: dict[str, Any],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    store: BudgetStore = setup["store"]

    def interrupted(reservation: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(store, "commit", interrupted)
    with pytest.raises(KeyboardInterrupt) as err:
        _plan().run({"X": np.zeros((20, 2))}, budget_store=store, dataset="ds")
    assert err.value.__notes__ == [f"budget store {store.path}: left pending (counted as spent): 1/4 on dataset "
                                   "'ds' (reservation 2); the store could not be updated"]
    assert store.status("ds").pending == dp.ZCDP("1/4").rho


def test_seeded_runs_say_not_for_release_on_the_terminal(setup: dict[str, Any],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(setup["base"] + ["--report", str(setup["tmp"] / "r"), "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("NOT FOR RELEASE: this run used seeded noise") == 2
    assert out.index("NOT FOR RELEASE") < out.index("m = ") < out.rindex("NOT FOR RELEASE")
    assert main(setup["base"] + ["--report", str(setup["tmp"] / "r2")]) == 0
    assert "NOT FOR RELEASE" not in capsys.readouterr().out


def test_seeded_noise_is_never_charged_to_a_budget_store(setup: dict[str, Any],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(setup["charged"] + ["--report", str(setup["tmp"] / "r"), "--seed", "3"]) == 1
    err = capsys.readouterr().err
    assert "seeded noise (NOT FOR RELEASE) cannot be charged to a budget store" in err
    with pytest.raises(ValueError, match="cannot be charged to a budget store"):
        _plan().run({"X": np.zeros((20, 2))}, noise=dp.SeededNoise(0, exact=True), budget_store=setup["store"],
                    dataset="ds")
    assert _kinds(setup["store"]) == ["open"]


@pytest.mark.parametrize("failure", ["data", "budget"])
def test_a_failed_run_leaves_no_report_directory(setup: dict[str, Any], capsys: pytest.CaptureFixture[str],
                                                 failure: str) -> None:
    """The report directory is checked before the run but made only when there is a report to write."""
    tmp: Path = setup["tmp"]
    if failure == "data":
        np.save(tmp / "x.npy", np.zeros((20, 3)))  # the plan declares d=2
    else:
        setup["store"].open("small", dp.ZCDP("1/8"))  # the plan costs 1/4
    args = setup["base"] + ["--dataset", "small" if failure == "budget" else "ds", "--budget-store",
                            str(setup["store"].path)]
    assert main(args + ["--report", str(tmp / "a" / "r")]) == (1 if failure == "data" else 2)
    assert ("dpflow: error: " if failure == "data" else "dpflow: plan refused: ") in capsys.readouterr().err
    assert not (tmp / "a").exists()
    assert main(setup["base"] + ["--report", str(tmp / "a" / "r"), "--seed", "1"]) == (1 if failure == "data" else 0)
    assert (tmp / "a" / "r").is_dir() == (failure == "budget")


def test_ctrl_c_after_the_charged_run_completed_writes_the_report_and_exits_0(
        setup: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import signal

    write = Report.write

    def interrupted(self: Report, directory: Any) -> list[Path]:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the report is written
        return write(self, directory)

    monkeypatch.setattr(Report, "write", interrupted)
    assert main(setup["charged"] + ["--report", str(setup["tmp"] / "r")]) == 0
    captured = capsys.readouterr()
    assert "the run is complete" in captured.err and "Traceback" not in captured.err
    assert sorted(p.name for p in (setup["tmp"] / "r").iterdir()) == ["report.html", "report.json", "report.md"]
    assert _kinds(setup["store"]) == ["open", "reserve", "commit"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_one_name_for_the_budget_store(setup: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """``--budget-store`` on every command; ``budget ... --store`` still works, deprecated and not shown."""
    path = str(setup["store"].path)
    assert main(["budget", "open", "other", "--rho", "1", "--budget-store", path]) == 0
    assert main(["budget", "show", "other", "--budget-store", path]) == 0
    assert main(["budget", "verify", "other", "--store", path]) == 0
    assert main(["budget", "verify", "other", "--store", path, "--budget-store", path + "-2"]) == 1
    assert "--store and --budget-store name different stores" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["budget", "show", "--help"])
    out = capsys.readouterr().out
    assert "--budget-store" in out and "--store" not in out.replace("--budget-store", "")


def test_run_reads_the_key_file_the_store_was_opened_with(setup: dict[str, Any],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A store keyed from ``--key-file`` elsewhere than ``STORE.key`` is charged by ``run --key-file``; without
    the key the run is refused before anything is reserved."""
    tmp: Path = setup["tmp"]
    store, key = str(tmp / "k.sqlite"), str(tmp / "elsewhere.key")
    assert main(["budget", "open", "ds", "--rho", "1", "--budget-store", store, "--key-file", key]) == 0
    charged = setup["base"] + ["--dataset", "ds", "--budget-store", store]
    assert main(charged + ["--report", str(tmp / "r1")]) == 1  # no key: refused, nothing written
    assert not (tmp / "r1").exists()
    assert main(charged + ["--key-file", key, "--report", str(tmp / "r2")]) == 0
    capsys.readouterr()
    status = BudgetStore(store, key_file=key).status("ds")
    assert (status.committed, status.pending) == (Fraction(1, 4), 0)
