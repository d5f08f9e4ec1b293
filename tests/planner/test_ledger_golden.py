"""Golden ledger totals and allocations of the estimator library's default plans.

Every estimator in :mod:`dpflow.estimators`, with small public parameters, is certified under a
zCDP, an (epsilon, delta) and a pure-DP budget; the test pins, per plan, the ledger totals (rho,
pure epsilon, delta0, every (epsilon, delta) conversion), the allocation mode and every mechanism's
mode and share, and, for refused budgets, the refusal's class.  The values are stored in
``tests/planner/ledger_golden.json``; a refactoring of the planner must reproduce them exactly.

Regenerate (only for a documented behaviour change) with ``DPFLOW_REGEN_GOLDEN=1 pytest
tests/planner/test_ledger_golden.py``.

Changes recorded so far:

* issue 13 (typed mechanism capabilities): every pure-capable mechanism is considered for pure mode
  under an ``ApproxDP`` budget, not only LaplaceMech and Peel.  Exactly two entries changed (ledger
  and released values): ``merr/approx`` (DyadicExpMech + LaplaceMech) and ``sparse_mean/approx``
  (Quantile + LaplaceMech + Peel) now run in pure mode with epsilon 1 instead of zCDP with
  rho = 0.0244 (CKS); plans with a Gaussian mechanism are unchanged.
* issue 13 (one exponential-mechanism sampler) and issue 14 item 16 (MERR's CDF projected onto valid
  CDFs): the released values of ``merr/zcdp`` and ``merr/approx`` changed (Gumbel and uniform maps of
  the same Laplace draws; isotonic projection); no ledger changed.
* issue 16 (PLD accounting): every total whose mechanisms all have a valid PLD gains a
  "PLD (dp_accounting, pessimistic)" conversion row (pure and approx plans, and zCDP plans without a
  Gaussian mechanism); no share, rho, pure epsilon or other conversion changed.
* issue 13 item 4 (``NoiseScale``): CoinPress's mean rounds read their sigma_k from the certificate
  instead of a public ``sigma_per_clip`` parameter, so that ``Public`` node left the loop body and the
  body's Gaussian moved from ``b1.gaussian_mech_11`` to ``b1.gaussian_mech_10`` (``gaussian_mean_coinpress``)
  and from ``b2.gaussian_mech_11`` to ``b2.gaussian_mech_10`` (``gaussian_gaussian``): the same shares under
  new keys, every total unchanged.  The next radius now uses the certified sigma per unit sensitivity
  (``gaussian_sigma_for_zcdp(1, rho_k)``, rounded up by about 1e-12) instead of ``1/sqrt(2 rho_k)``, so
  the released values of ``gaussian_mean_coinpress/zcdp``, ``gaussian_mean_coinpress/approx`` and
  ``gaussian_gaussian/approx`` changed by float rounding only (at most 1.2e-15 relative).
* issue 16 (allocation through the PLD): an ``ApproxDP`` budget on a plan that is not all-Gaussian now
  also considers PLD mode (rho shares as in zCDP mode, of the largest total whose composed cost meets
  the budget by its tightest valid conversion, the PLD among them; Gaussians forced to continuous
  noise), chosen when it has the least noise variance.  Exactly six ``*/approx`` ledgers changed (total
  rho before -> after; all-Gaussian plans keep the exact Gaussian-DP path and are unchanged):

  - ``truncated_mean/approx``, ``noisy_gd/approx``, ``sufficient_statistics/approx`` (Gaussian +
    Laplace + Quantile): zCDP mode rho 0.024356 (CKS) -> PLD mode rho 0.0283507 (PLD epsilon 1.0;
    every noise std x 0.927); their Gaussians now draw continuous noise;
  - ``truncated_mean_upper/approx`` (Gaussian + Quantile): rho 0.024356 -> 0.0286154 (x 0.923);
  - ``niht/approx`` (Laplace + Quantile + Peel rounds, pure-capable): zCDP mode rho 0.024356 -> PLD mode
    rho 0.0314471 (PLD epsilon 0.99913; x 0.880);
  - ``sparse_mean/approx`` (Quantile + Laplace + Peel): pure mode (epsilon 1 shared by weight) -> PLD
    mode rho 0.0990105, where basic pure composition gives exactly epsilon 1 (delta 0) and the rho split
    (epsilon_i ~ sqrt(w_i)) has less total noise variance than the epsilon split.

  Their released values changed accordingly (``niht``, ``noisy_gd``, ``sparse_mean``, ``truncated_mean``
  under ``approx``).
* issue 12 (scale-free truncation): the default data-driven truncation of ``truncated_mean`` and
  ``sparse_mean`` (no ``radius``, no ``upper``; d <= 64 for ``sparse_mean``) is now per coordinate and
  location/scale-invariant (``dpflow.estimators.scale.column_scales``: per column two Laplace range
  histograms, a private median and a private spread, then standardise, truncate at sqrt(2 ln n), map
  back), and its share is the one the data size needs (``scale_weight``: 0.02 for ``truncated_mean``
  d=3 under zCDP 0.5, 0.28 under ApproxDP(1, 1e-6); 0.052 and 0.5 (capped, with an accuracy warning) for
  ``sparse_mean`` d=10).  Exactly four ledgers changed, ``truncated_mean/{zcdp,approx}`` and
  ``sparse_mean/{zcdp,approx}`` (new mechanisms and shares; ``*/approx`` PLD totals rho 0.0283507 ->
  0.0285781 and 0.0990105 -> 0.0349872; ``*/pure`` still refused), and their released values.
  ``truncated_mean_upper`` and ``sparse_mean_radius`` (the pooled rules) are unchanged.
* issue 11 (pure DP for Gaussians): ``SecondMoment`` declares an l1 sensitivity over its upper triangle
  and ``LaplaceMech`` noises a symmetric statistic's upper triangle, so ``gaussian.gaussian`` runs
  CoinPress with Laplace rounds under a ``PureDP`` budget.  Exactly one entry changed:
  ``gaussian_gaussian/pure`` (refused ``PlanTypeError`` -> pure mode, epsilon 1, half to each part);
  every other ledger is unchanged (the goldens pin shares and totals, not sensitivity text).
* issue 16 (PLD search speed): the PLD-mode total is the largest point of a 14-bit grid instead of a 21-bit
  one (steps of 2^-13 relative, below the PLD's own 1e-4 loss grid; two or three fewer search steps), so the
  same six ``*/approx`` totals moved down by less than one step: ``niht`` 0.0314471 -> 0.0314445,
  ``noisy_gd``, ``sufficient_statistics``, ``truncated_mean`` 0.0283507 -> 0.0283489, ``sparse_mean``
  0.0990105 -> 0.0990067, ``truncated_mean_upper`` 0.0286154 -> 0.0286140 (at most 8e-5 relative); their
  released values moved accordingly (same four runs as above).
* issue 16 (bounded range): ``Quantile`` and ``DyadicExpMech`` (exponential mechanisms) are epsilon-bounded
  range, hence epsilon^2/8-zCDP (Cesar & Rogers 2021) instead of epsilon^2/2: a rho share buys epsilon =
  sqrt(8 rho), twice the former, and a pure share costs a quarter of the former rho.  Changed ledgers:

  - ``merr/zcdp``, ``niht/zcdp``, ``sparse_mean/zcdp``: same shares, the exponential mechanisms' epsilons
    doubled (total pure epsilon 2.83 -> 4.24, 5.54 -> 5.76, 2.25 -> 2.47);
  - ``merr/pure``: same shares, total rho 0.0625 -> 0.0390625;
  - the PLD-mode ``*/approx`` plans with a quantile: the quantile's rho share now buys twice the epsilon,
    whose worst-case pure PLD is larger, so the largest total is smaller: ``truncated_mean``,
    ``noisy_gd``, ``sufficient_statistics`` rho 0.0283489 -> 0.0259075 (Gaussian noise std x 1.046, the
    quantile's epsilon x 1.91), ``truncated_mean_upper`` 0.0286140 -> 0.0249844, ``niht`` 0.0314445 ->
    0.0284481, ``sparse_mean`` 0.0990067 -> 0.0818939;
  - ``merr/approx``: pure mode (epsilon 1 by weight) -> PLD mode rho 0.0277767 (total pure epsilon 0.99998
    by basic composition, the rho split having less noise variance, as ``sparse_mean/approx`` above).

  Released values changed for ``merr``, ``niht`` (zcdp and approx), ``noisy_gd``, ``sparse_mean``,
  ``truncated_mean`` (approx).
* issue 16 (pure events rounded once, shortfall bound): k copies of a pure event are now one PLD built from
  the exact k-fold randomized-response law (Kairouz, Oh & Viswanath 2015, Thm. 3.3) and rounded to the loss
  grid once, instead of k rounded copies convolved: every PLD row with pure events is at most a few 1e-4
  lower (``merr/approx`` 1.00024 -> 0.99994, ``niht/zcdp`` 4.67337 -> 4.67176, ``sparse_mean/approx``
  1.00026 -> 1.00006, ...).  Two PLD-mode totals grew: ``niht/approx`` rho 0.0284481 -> 0.0284958,
  ``merr/approx`` 0.0277767 -> 0.0277805 (released values changed for those two).  Every PLD-mode
  allocation text now states the proven shortfall bound ("the largest admissible total is less than x%
  above it", 0.055% to 0.43% here).
* merge of issues 12 and 16: ``truncated_mean`` and ``sparse_mean`` (both budgets) carry both changes
  above (the scale step's mechanisms, and the bounded-range and PLD-search rules); their golden entries were
  regenerated once after the merge.
* issue 16 round 3 (lattice Gaussian PLD): the discrete Gaussian that exact sources draw now has a proven PLD
  (``dpflow.privacy.pld.LatticeGaussianPLD``: the smoothed continuous Gaussian, within float rounding of
  the continuous one at dpflow's lattice), so a cost that a run may pay with lattice noise keeps its PLD with
  lattice events instead of losing it.  The golden file now also pins every plan's certificate for exact
  sources under the ApproxDP budget (``*/approx_secure``, new keys: what a default ``SecureNoise`` run
  charges).  Changes:

  - every ``*/zcdp`` entry with a Gaussian mechanism (21 entries: ``clipped_mean``, ``clipped_mean_default``,
    ``naive_pce``, ``ssp_radius``, ``naive_product``, ``ppde``, every ``gaussian_*``, ``noisy_gd``,
    ``sufficient_statistics``, ``truncated_mean``, ``truncated_mean_upper``) gains a PLD row, now the
    tightest conversion: 5.221534 (CKS) -> 4.886764 for the all-Gaussian plans (the exact continuous value
    is 4.886554), 5.07084 (``noisy_gd``, ``sufficient_statistics``), 4.97065 (``truncated_mean``), 5.14962
    (``truncated_mean_upper``); no share, rho or other conversion changed;
  - ``truncated_mean/approx`` (zCDP mode) gains a PLD row (1.0734, not the tightest); nothing else changed;
  - ``*/approx_secure`` against main's exact-source certificates (not pinned before): every plan with a
    Gaussian mechanism moved from zCDP mode (rho 0.024356, CKS) to PLD mode: the all-Gaussian plans (and
    ``ssp_radius``, ``naive_product``, ``ppde``) rho 0.0280113 (x 1.150: every noise std x 0.932),
    ``noisy_gd`` and ``sufficient_statistics`` 0.0259075 (x 1.064), ``truncated_mean_upper`` 0.0249844
    (x 1.026); ``truncated_mean`` stays in zCDP mode (its PLD total is below CKS); the plans without a
    Gaussian mechanism (``sparse_mean*``, ``niht``, ``*_histogram``, ``merr``) are unchanged.
* issue 11 round 4 (the Laplace rounds' schedule): under ``PureDP`` the CoinPress covariance rounds and their
  budget schedule come from ``coinpress.laplace_cov_schedule`` (the Laplace rounds' per-round contraction)
  instead of ``default_rounds`` and CoinPress's [1/4 over t - 1, 3/4]: for d = 3, n = 4,000, K = 30 two rounds
  [5/8, 3/8] instead of three [1/8, 1/8, 3/4].  Exactly one entry changed, ``gaussian_gaussian/pure``: still
  epsilon 1, half to each part (shares 1/2 exactly, the float weights now summing to 1 exactly), the body's
  nodes renumbered (``repeat_10/b1.laplace_mech_8``, ``repeat_18/b2.laplace_mech_10``), total rho
  0.15104 -> 0.14453 (fewer, larger rounds) and its conversions accordingly.  No released golden has a pure
  Gaussian entry.
* issue 10 (one-sided costs of value pieces, ``dpflow.privacy.ratio``; the PLD join of add/remove pieces that
  are not a chain; splits of rows of stability > 1 folded sequentially): no golden changed, none was
  regenerated.  No estimator of this file has a value partition (the mixture estimators, which do, are not
  pinned here: their shares grow x 1.26 to x 1.30, every noise std x 0.88, see ``tests/planner/test_one_sided.py``
  and the issue 10 report), no split of stability > 1 rows, and no add/remove parallel composition whose pieces
  are not a chain.
* issue 29 (the scale step's spread range capped at 4 U, ``scale.spread_range``; the truncated mean's routes):
  every plan with a per-column scale step gains one ``Apply`` node per column, so ``sparse_mean/*`` and
  ``truncated_mean/*`` have their mechanisms renumbered; every share and total is unchanged.  The truncated
  mean's plan also carries its ``PredictedError`` node (the chosen route: per-column at d = 3, n = 2,000).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpflow as dp
from dpflow import estimators as E
from dpflow.domains import BooleanCube, Ordinal
from dpflow.errors import PlanError
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import execute
from dpflow.nodes import Source
from dpflow.planner.certify import certify

GOLDEN = Path(__file__).with_name("ledger_golden.json")

BUDGETS: dict[str, Any] = {
    "zcdp": dp.ZCDP(0.5),
    "approx": dp.ApproxDP(1.0, 1e-6),
    "pure": dp.PureDP(1.0),
}

G = E.gaussian
PLANS: dict[str, Callable[[Any], dp.Plan]] = {
    "clipped_mean": lambda b: E.clipped_mean(d=3, n=1000, budget=b, radius=2.0),
    "clipped_mean_default": lambda b: E.clipped_mean(d=3, n=1000, budget=b),
    "naive_pce": lambda b: E.naive_pce(d=3, n=2000, budget=b, kappa=4.0),
    "sparse_mean": lambda b: E.sparse_mean(d=10, n=2000, s=2, budget=b),
    "sparse_mean_radius": lambda b: E.sparse_mean(d=10, n=2000, s=2, budget=b, radius=3.0),
    "truncated_mean": lambda b: E.truncation.truncated_mean(d=3, n=2000, budget=b),
    "truncated_mean_upper": lambda b: E.truncation.truncated_mean(d=3, n=2000, budget=b, upper=50.0),
    "noisy_gd": lambda b: E.regression.noisy_gd(d=3, n=2000, budget=b, x_bound=1.0, coef_bound=2.0),
    "niht": lambda b: E.regression.niht(d=6, n=2000, s=2, budget=b, x_bound=1.0, coef_bound=2.0),
    "sufficient_statistics": lambda b: E.regression.sufficient_statistics(d=3, n=2000, budget=b),
    "ssp_radius": lambda b: E.regression.sufficient_statistics(d=3, n=2000, budget=b, radius=2.0),
    "laplace_histogram": lambda b: E.discrete.laplace_histogram(N=8, n=1000, budget=b),
    "t_histogram": lambda b: E.discrete.t_histogram([0, 4, 16, 64], n=1000, budget=b),
    "merr": lambda b: E.discrete.merr(N=64, n=1000, budget=b, T=4),
    "naive_product": lambda b: E.product.naive_product(d=4, n=1000, budget=b),
    "ppde": lambda b: E.product.ppde(d=4, n=1000, budget=b, rounds=2),
    "gaussian_mean_coinpress": lambda b: G.mean(d=3, n=2000, budget=b, R=10.0),
    "gaussian_mean_kv": lambda b: G.mean(d=3, n=2000, budget=b, R=10.0, method="kv"),
    "gaussian_mean_pme": lambda b: G.mean(d=3, n=2000, budget=b, R=10.0, method="pme"),
    "gaussian_mean_naive": lambda b: G.mean(d=3, n=2000, budget=b, R=10.0, method="naive"),
    "gaussian_univariate_known": lambda b: G.univariate_mean(n=2000, budget=b, R=10.0, sigma=1.0),
    "gaussian_univariate_unknown": lambda b: G.univariate_mean(n=2000, budget=b, R=10.0, sigma_bounds=(0.1, 10.0)),
    "gaussian_cov_coinpress": lambda b: G.covariance(d=3, n=4000, budget=b, K=30.0),
    "gaussian_cov_coinpress_unknown": lambda b: G.covariance(d=3, n=4000, budget=b, K=30.0, unknown_mean=True),
    "gaussian_cov_pce": lambda b: G.covariance(d=3, n=4000, budget=b, K=30.0, method="pce", lower=1.0),
    "gaussian_cov_naive": lambda b: G.covariance(d=3, n=4000, budget=b, K=30.0, method="naive"),
    "gaussian_gaussian": lambda b: G.gaussian(d=3, n=4000, budget=b, R=10.0, K=30.0),
}


def summary(make: Callable[[Any], dp.Plan], budget: Any, exact_noise: bool = False) -> dict[str, Any]:
    """The pinned facts of one (plan, budget): totals, allocation modes and shares, or the refusal."""
    try:
        cert = certify(make(budget), exact_noise)
    except (PlanError, ValueError) as e:
        return {"refused": type(e).__name__}
    ledger = cert.ledger
    return {
        "allocation": ledger.allocation,
        "totals": [{"source": t.source, "rho": str(t.rho), "delta0": str(t.delta0),
                    "pure_eps": None if t.pure_eps is None else str(t.pure_eps),
                    "gdp_mu": None if t.gdp_mu is None else repr(t.gdp_mu),
                    "conversions": [[c.rule, repr(c.epsilon), repr(c.delta)] for c in t.conversions]}
                   for t in ledger.totals],
        "shares": {k: [a.mode, str(a.share), a.continuous_gaussian] for k, a in sorted(cert.allocations.items())},
    }


def compute() -> dict[str, Any]:
    """Every plan under every budget, certified for continuous sources (``certify(plan)``), and under the
    ApproxDP budget also for exact sources (``approx_secure``: what a default ``SecureNoise`` run charges)."""
    out = {f"{name}/{bname}": summary(make, budget)
           for name, make in PLANS.items() for bname, budget in BUDGETS.items()}
    out.update({f"{name}/approx_secure": summary(make, BUDGETS["approx"], exact_noise=True)
                for name, make in PLANS.items()})
    return out


def test_estimator_ledgers_match_the_golden_file() -> None:
    got = compute()
    if os.environ.get("DPFLOW_REGEN_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(GOLDEN.read_text())
    assert sorted(got) == sorted(want)
    diff = [k for k in want if _pld_rounded(got[k]) != _pld_rounded(want[k])]
    assert not diff, f"ledgers changed for {diff}: first {diff[0]}: {got[diff[0]]} != {want[diff[0]]}"


PLD_DIGITS = 9
"""Significant digits of the reported PLD epsilon that the goldens pin: dp_accounting composes by FFT, whose last
digits move with the numpy and scipy builds (numpy 2.4.6 / scipy 1.17.1 moved them by up to 2e-12 relative)."""


def _pld_rounded(entry: dict[str, Any]) -> dict[str, Any]:
    """``entry`` with the epsilon of every PLD conversion row to :data:`PLD_DIGITS` significant digits."""
    if "totals" not in entry:
        return entry
    totals = [{**t, "conversions": [[r, f"{float(e):.{PLD_DIGITS}g}" if r.startswith("PLD") else e, d]
                                    for r, e, d in t["conversions"]]} for t in entry["totals"]]
    return {**entry, "totals": totals}


@pytest.mark.parametrize("key", ["gaussian_mean_coinpress/zcdp", "clipped_mean/approx", "merr/pure"])
def test_golden_file_covers_certified_plans(key: str) -> None:
    """The golden file is not a list of refusals: these plans certify and allocate shares."""
    entry = json.loads(GOLDEN.read_text())[key]
    assert "refused" not in entry and entry["shares"]


RUNS = ["gaussian_mean_coinpress", "gaussian_cov_coinpress", "gaussian_gaussian", "sparse_mean", "truncated_mean",
        "noisy_gd", "niht", "merr", "ppde", "laplace_histogram", "gaussian_univariate_unknown"]


def synthetic(plan: dp.Plan) -> dict[str, np.ndarray]:
    """Fixed synthetic rows for every source of ``plan`` (by its public domain and size)."""
    rng = np.random.default_rng(7)
    out = {}
    for rec in plan.records:
        node = rec.node
        if isinstance(node, Source):
            dom, n = node.domain, node.n or 100
            if isinstance(dom, Ordinal):
                out[node.name] = rng.integers(0, dom.N, size=n)
            elif isinstance(dom, BooleanCube):
                out[node.name] = (rng.random((n, dom.d)) < 0.3).astype(float)
            else:
                out[node.name] = rng.normal(1.0, 1.0, size=(n, getattr(dom, "d", 1)))
    return out


def released(name: str, bname: str) -> dict[str, Any]:
    plan = PLANS[name](BUDGETS[bname])
    ex = execute(certify(plan), synthetic(plan), dp.SeededNoise(3), NumpyBackend())
    return {k: [repr(float(x)) for x in np.ravel(np.asarray(v, dtype=float))] for k, v in sorted(ex.released.items())}


def _close(got: dict[str, list[str]], want: dict[str, list[str]]) -> bool:
    """Equal up to 1e-9 relative: linear algebra (eigh, Cholesky) differs in the last bits between BLAS builds."""
    return sorted(got) == sorted(want) and all(
        len(got[k]) == len(want[k])
        and all(
            a == b or math.isclose(float(a), float(b), rel_tol=1e-9) for a, b in zip(got[k], want[k], strict=True)
        )
        for k in want
    )


def test_seeded_released_values_match_the_golden_file() -> None:
    """Released values under SeededNoise (plans with round-weighted loops, pure and zCDP mechanisms)."""
    got = {f"{n}/{b}": released(n, b) for n in RUNS for b in ("zcdp", "approx")}
    path = GOLDEN.with_name("released_golden.json")
    if os.environ.get("DPFLOW_REGEN_GOLDEN") == "1":
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(path.read_text())
    diff = [k for k in want if not _close(got.get(k, {}), want[k])]
    assert sorted(got) == sorted(want) and not diff, f"released values changed for {diff}"
