"""Issue 9: no run with an exact noise source draws continuous noise, and no ledger certified for one says it
would.  Swept over every contract example (``tests/contract/examples.py``) under each relation it certifies
under, and over every estimator plan of the golden ledgers (``tests/planner/test_ledger_golden.py``) and the
mixtures plan, run under a ``SecureNoise`` that records every draw (``RecordingSecureNoise``).

Before the fixed-point sums (:mod:`dpflow.nodes.fixedpoint`), ``Sum`` over an add/remove source and ``Gram``
without a public row count drew ``normal``/``laplace`` here, and their ledgers said "continuous noise on every
source".
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from contract.examples import EXAMPLES
from test_ledger_golden import BUDGETS, PLANS, synthetic
from test_secure_noise_kinds import CONTINUOUS, EXACT, RecordingSecureNoise

import dpflow as dp
from dpflow import estimators as E
from dpflow.errors import PlanError
from dpflow.estimators import heavy_tailed
from dpflow.estimators.mixtures import gaussian_mixture_plan
from dpflow.stats import Statistics

CASES = [(kind, rel) for kind, e in sorted(EXAMPLES.items()) for rel in e.relations]


def _continuous_claims(ledger: Any) -> list[str]:
    """Every ledger line that says a mechanism draws continuous noise: a mechanism's noise text or an
    accuracy row's note."""
    lines = [e.noise for e in ledger.entries if "continuous noise" in e.noise]
    return lines + [c.note for c in ledger.noise_calibrations if "continuous noise" in c.note]


def _rows(e: Any, relation: str) -> np.ndarray:
    rng = np.random.default_rng(0)
    d = getattr(e.domain, "d", 1)
    X = rng.integers(0, e.domain.N, size=(40, d)).astype(float) if isinstance(e.domain, dp.Ordinal) \
        else rng.normal(0.0, 1.5, size=(40, d))
    return X[:6] if relation == "replace" else X


@pytest.mark.parametrize(("kind", "relation"), CASES)
def test_every_contract_example_runs_secure_without_continuous_noise(kind: str, relation: str) -> None:
    e = EXAMPLES[kind]
    plan, _, _ = e.plan(relation)
    assert not _continuous_claims(plan.check()), kind
    noise = RecordingSecureNoise()
    plan.run({"X": _rows(e, relation)}, noise=noise)
    calls = set(noise.calls)
    assert not calls & CONTINUOUS, f"{kind} ({relation}) drew {sorted(calls & CONTINUOUS)} under SecureNoise"
    assert calls <= EXACT


MORE: dict[str, Any] = {  # estimators the golden ledgers do not list
    "heavy_tailed": lambda b: heavy_tailed.plan(d=3, n=2000, budget=b, R=10.0, K=30.0),
    "scaled_ssp": lambda b: E.regression.scaled_ssp(d=3, n=2000, budget=b),
    "scaled_gaussian": lambda b: E.gaussian.scaled_gaussian(d=3, n=2000, budget=b),
}
ALL = {**PLANS, **MORE}


def _estimators() -> list[tuple[str, str]]:
    return [(name, bname) for name in sorted(ALL) for bname in sorted(BUDGETS)]


@pytest.mark.parametrize(("name", "bname"), _estimators())
def test_every_estimator_ledger_for_exact_sources_has_no_continuous_noise(name: str, bname: str) -> None:
    try:
        ledger = ALL[name](BUDGETS[bname]).check()
    except (PlanError, ValueError):
        pytest.skip("refused under this budget (pinned in the golden ledgers)")
    assert not _continuous_claims(ledger)


@pytest.mark.parametrize("name", sorted(ALL))
def test_every_estimator_runs_secure_without_continuous_noise(name: str) -> None:
    plan = ALL[name](BUDGETS["zcdp"])
    noise = RecordingSecureNoise()
    plan.run(synthetic(plan), noise=noise)
    assert noise.calls and not set(noise.calls) & CONTINUOUS, f"{name} drew {sorted(set(noise.calls) & CONTINUOUS)}"


@pytest.mark.parametrize("method", ["sample_aggregate", "rpgmp"])
def test_the_mixtures_plan_runs_secure_without_continuous_noise(method: str) -> None:
    plan = gaussian_mixture_plan(d=2, n=600, k=2, budget=dp.ApproxZCDP(1.0, 1e-6), method=method)
    assert not _continuous_claims(plan.check())
    noise = RecordingSecureNoise()
    rng = np.random.default_rng(1)
    plan.run({"X": np.concatenate([rng.normal(-5, 1, (300, 2)), rng.normal(5, 1, (300, 2))])}, noise=noise)
    assert noise.calls and not set(noise.calls) & CONTINUOUS


@pytest.mark.parametrize("budget", [dp.ZCDP(0.5), dp.PureDP(1.0)])
def test_add_remove_statistics_run_secure_without_continuous_noise(budget: dp.Measure) -> None:
    """``dpflow.stats`` under add/remove: the sums and means are sums over a private row count (continuous
    noise before the fixed-point sums)."""
    q = (Statistics(budget=budget, neighbors="add_remove").count().sum("x", bounds=(0, 1))
         .mean("y", bounds=(-2, 2)).histogram("x", edges=[0, 0.5, 1]))
    rng = np.random.default_rng(2)
    data = {"x": rng.random(500), "y": rng.normal(size=500)}
    assert not _continuous_claims(q.plan(data).check())
    noise = RecordingSecureNoise()
    q.run(data, noise=noise)
    assert noise.calls and not set(noise.calls) & CONTINUOUS
