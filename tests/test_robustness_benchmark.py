"""The issue-29 robustness harness (benchmarks/robustness.py): it runs end to end on a tiny grid (with or
without the optional comparators diffprivlib, OpenDP and matplotlib), and it reads a ledger's predictions by
output name and measures each in the metric the prediction states."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

import dpflow as dp
from dpflow import nodes as N

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import robustness as R  # noqa: E402


def test_tiny_grid_writes_the_four_summaries(tmp_path: Path) -> None:
    argv = ["--quick", "--d", "2", "--n", "300", "--kinds", "gauss", "--tables", "iris", "--no-mixtures",
            "--out", str(tmp_path)]
    assert R.main(argv) == 0
    text = (tmp_path / "robustness_quick.md").read_text()
    assert text.splitlines()[2].startswith("Generated at commit")
    for part in ("(1) Cells with NaN or infinity", "(2) dpflow without bounds at most diffprivlib",
                 "(3) Predicted vs measured", "**silent**", "epsilon / 2", "d_in = 2", "### histogram"):
        assert part in text, part


def _ledger(*preds: tuple[str, str, float]) -> SimpleNamespace:
    b = dp.PlanBuilder(budget=dp.PureDP(1), neighbors="replace")
    outs = {f"p{i}": N.predicted_error(b, o, m, v, 0.9, "stated") for i, (o, m, v) in enumerate(preds)}
    return SimpleNamespace(ledger=b.build(**outs).check())


def test_predictions_are_read_by_output_and_measured_in_their_metric() -> None:
    S = np.diag([4.0, 1.0])
    targets = {"mean(c0)": R.Target([1.0, 2.0], [0.0, 0.0]),
               "mean": R.Target([2.0, 0.0], [0.0, 0.0], W=(R.inv_sqrt(S), None)),
               "covariance": R.Target(np.diag([5.0, 1.0]), S),
               "quantiles(c0)": R.Target([3.0], [2.0], cdf=(lambda x: x / 4.0, None), level=[0.5]),
               "histogram(label)": R.Target([1.0, 2.0], [0.0, 0.0])}
    src = _ledger(("mean__c0", "l2", 3.0), ("mean", "Mahalanobis", 0.5), ("covariance", "spectral (absolute)", 2.0),
                  ("quantiles(c0)", "rank", 0.1), ("mean(c0)", "a metric nobody knows", 1.0), ("other", "l2", 1.0))
    rows, missing = R.check_predictions([src], targets, {"stat": "s"})
    got = {(r["output"], r["metric"]): r["sample"] for r in rows}
    assert math.isclose(got[("mean__c0", "l2")], math.sqrt(5.0))          # the stats key of "mean(c0)"
    assert math.isclose(got[("mean", "Mahalanobis")], 1.0)                # ||S^-1/2 (2, 0)||
    assert math.isclose(got[("covariance", "spectral (absolute)")], 1.0)
    assert math.isclose(got[("quantiles(c0)", "rank")], 0.25)             # |F(3) - 1/2|
    assert got[("mean(c0)", "a metric nobody knows")] is None             # reported unmatched, not guessed
    assert got[("other", "l2")] is None
    assert missing == ["histogram(label)"]


def test_a_non_finite_output_misses_every_prediction() -> None:
    t = R.Target([math.nan, 0.0], [0.0, 0.0])
    assert R.measured("l2", t, "sample") == math.inf
