"""``dpflow demo``: one real plan, end to end, on embedded synthetic data.

The data are 20,000 synthetic rows of 5 correlated Gaussian features (a fixed
public seed generates them; they stand in for a sensitive table).  One plan
under a single zCDP budget releases the mean (CWZ clipped mean), the covariance
(NaivePCE on pair differences) and a histogram of the first feature (Laplace,
charged in zCDP), with weights 1 : 2 : 1.
"""

from __future__ import annotations

import os

import numpy as np

from dpflow import nodes as N
from dpflow.api import run
from dpflow.domains import Vectors
from dpflow.estimators.tails import chi_radius
from dpflow.interpreter.noise import SecureNoise, SeededNoise
from dpflow.plan import Plan, PlanBuilder
from dpflow.privacy import ZCDP
from dpflow.report import NOT_FOR_RELEASE, prepare_report_dir
from dpflow.report.report import REPORT_FILES

N_ROWS, DIM = 20_000, 5
EDGES = tuple(float(e) for e in np.linspace(-2.0, 8.0, 11))


def demo_data() -> np.ndarray:
    """The embedded synthetic dataset (fixed public seed)."""
    rng = np.random.default_rng(20261122)
    A = rng.normal(size=(DIM, DIM)) / np.sqrt(DIM)
    cov = A @ A.T + 0.5 * np.eye(DIM)
    mean = np.array([3.0, -1.0, 0.5, 2.0, 0.0])
    return rng.multivariate_normal(mean, cov, size=N_ROWS)


def demo_plan() -> Plan:
    """The demo plan: mean, covariance and a histogram under rho = 0.5 zCDP.

    >>> from fractions import Fraction
    >>> Fraction(demo_plan().check().totals[0].rho) <= Fraction(1, 2)
    True
    """
    b = PlanBuilder(budget=ZCDP(0.5), neighbors="replace", name="demo")
    X = b.source("X", Vectors(d=DIM), n=N_ROWS)
    # mean: public bound |mu_j| <= 5, per-coordinate sd <= 2: R = 5 + 2 sqrt(2 ln n)
    R = 5.0 + 2.0 * float(np.sqrt(2.0 * np.log(N_ROWS)))
    mean = N.GaussianMech(weight=1)(N.Mean()(N.Clip(box=(-R, R))(X)))
    # covariance: pair differences (unknown mean), Sigma <= 4 I, clip at sqrt(kappa) * chi radius
    m = N_ROWS // 2
    radius = 2.0 * chi_radius(DIM, 0.1 / m)
    pairs = N.Clip(radius=radius)(N.PairDifferences()(X))
    cov = N.PSDProject()(N.GaussianMech(weight=2)(N.SecondMoment()(pairs)))
    # histogram of feature 0 over public bins, Laplace noise charged as eps^2/2 zCDP
    hist = N.LaplaceMech(weight=1)(N.Histogram(edges=EDGES)(N.Columns(keep=[0])(X)))
    return b.build(mean=mean, covariance=cov, histogram_x0=hist)


DEFAULT_OUT = "dpflow-demo-report"


def _free_demo_dir(base: str = DEFAULT_OUT) -> str:
    """``base``, or ``base-2``, ``base-3``, ... : the first that holds no earlier report (reports are never
    overwritten, and the README's demo command should work every time it is run)."""
    k, out = 1, base
    while any(os.path.lexists(os.path.join(out, name)) for name in REPORT_FILES):
        k += 1
        out = f"{base}-{k}"
    return out


def run_demo(out: str | None = None, seed: int | None = None) -> int:
    """Run the demo plan, print the ledger and the estimates, write the report (into ``out``, which must hold
    no earlier report; by default the first free ``dpflow-demo-report[-k]``)."""
    out = _free_demo_dir() if out is None else out
    prepare_report_dir(out)
    X = demo_data()
    plan = demo_plan()
    result = run(plan, {"X": X}, noise=SecureNoise() if seed is None else SeededNoise(seed))
    print(result.report.ledger.summary())
    print()
    if seed is not None:
        print(NOT_FOR_RELEASE)
    mean = np.asarray(result.released["mean"])
    cov = np.asarray(result.released["covariance"])
    hist = np.asarray(result.released["histogram_x0"])
    true_mean, true_cov = X.mean(axis=0), np.cov(X, rowvar=False)
    true_hist = np.histogram(np.clip(X[:, 0], EDGES[0], EDGES[-1]), bins=EDGES)[0]
    print("estimate                 private vs non-private")
    print(f"mean                     {np.array2string(mean, precision=3)}")
    print(f"                         {np.array2string(true_mean, precision=3)}")
    print(f"  l2 error               {np.linalg.norm(mean - true_mean):.4f}")
    print(f"covariance diag          {np.array2string(np.diag(cov), precision=3)}")
    print(f"                         {np.array2string(np.diag(true_cov), precision=3)}")
    print(f"  Frobenius error        {np.linalg.norm(cov - true_cov):.4f}")
    print(f"histogram of x0          {np.array2string(np.round(hist).astype(int))}")
    print(f"                         {np.array2string(true_hist)}")
    print()
    for path in result.report.write(out):
        print(f"wrote {path}")
    if seed is not None:
        print(NOT_FOR_RELEASE)
    return 0
