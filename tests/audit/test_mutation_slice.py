"""A bounded slice of the mutation run, in every test run: hand-picked mutants of the most critical rules.

The whole mutation run (``python benchmarks/mutation.py``, mutmut) takes hours and needs mutmut; this slice
takes well under a minute and needs nothing but the test suite.  Each mutant below is one single-point change
to a privacy rule -- most of them mutants mutmut found surviving the suite before the ``test_mutants_*``
files pinned them, the rest the rules everything else rests on.  For each, the package is copied to a
temporary directory, the one line is changed (the original text must occur exactly once, so a refactor that
moves the rule breaks this test loudly instead of silently testing nothing), and the named tests are run
against the copy in a subprocess: they must fail.  The unmutated copy must pass the same tests first, so a
failure below is the mutant's doing.  No network, no extra package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

REPO = Path(__file__).resolve().parents[2]


@attrs.frozen
class Mutant:
    """One single-point change to ``path`` (``old`` -> ``new``) and the tests that must catch it."""

    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTANTS = (
    Mutant("stability divides instead of multiplying", "dpflow/nodes/base.py",
           "return out * float(rows.stability)", "return out / float(rows.stability)",
           ("tests/nodes/test_mutants_base.py",)),
    Mutant("Gaussian zCDP with 4 sigma^2", "dpflow/privacy/calibration.py",
           "return s * s / (2 * sig * sig)", "return s * s / (4 * sig * sig)",
           ("tests/privacy/test_privacy_golden.py::test_zcdp_gaussian_calibration",)),
    Mutant("Laplace epsilon halved", "dpflow/privacy/calibration.py",
           "    return s / b\n", "    return s / (2 * b)\n",
           ("tests/privacy/test_privacy_golden.py::test_laplace_calibration",)),
    Mutant("outward rounding inflates downward", "dpflow/privacy/rounding.py",
           "if x > 0.0:\n        y = x * (1.0 + REL_MARGIN)", "if x > 0.0:\n        y = x * (1.0 - REL_MARGIN)",
           ("tests/privacy/test_mutants_rounding.py",)),
    Mutant("replace-one parallel composition takes the max", "dpflow/privacy/composition.py",
           'combine = _top_two_sum if relation == "replace" else max', "combine = max",
           ("tests/privacy/test_privacy_golden.py::test_parallel_composition_rules",)),
    Mutant("lattice release not widened by twice the float error", "dpflow/nodes/mechanisms.py",
           "return 2.0 * l2, 2.0 * l1", "return l2, l1",
           ("tests/nodes/test_mutants_mechanisms.py",)),
    Mutant("lattice rounding counted once in l2, not sqrt(m) times", "dpflow/nodes/mechanisms.py",
           "step * (entries if l1 else math.sqrt(entries))", "step * (entries if l1 else 1.0)",
           ("tests/nodes/test_mutants_mechanisms.py",)),
    Mutant("float error of a sum without the factor n", "dpflow/nodes/floaterr.py",
           "l2 = gamma(n) * n * b + b * gamma(self.domain.d + 2)", "l2 = gamma(n) * b + b * gamma(self.domain.d + 2)",
           ("tests/nodes/test_mutants_floaterr.py",)),
    Mutant("histogram l1 sensitivity 1 under replace-one", "dpflow/nodes/rules.py",
           "l1 = change_bound(rows, Sym.const(2.0), Sym.const(1.0))",
           "l1 = change_bound(rows, Sym.const(1.0), Sym.const(1.0))",
           ("tests/nodes/test_mutants_rules.py",)),
    Mutant("replace-one fold of shares over the two smallest pieces", "dpflow/planner/fold.py",
           "sum(sorted(xs, reverse=True)[:2], Fraction(0))", "sum(sorted(xs)[:2], Fraction(0))",
           ("tests/planner/test_mutants_fold.py",)),
    Mutant("basic accounting's delta_i multiplied by epsilon", "dpflow/planner/allocate.py",
           "delta = budget.delta * eps / budget.epsilon", "delta = budget.delta * eps * budget.epsilon",
           ("tests/planner/test_mutants_allocate.py",)),
    Mutant("pure-mode one-sided shares folded at the zCDP factor (ratio squared)", "dpflow/planner/allocate.py",
           "factor = one_sided_factor(ctx, mode)", 'factor = one_sided_factor(ctx, "zcdp")',
           ("tests/planner/test_mutants_allocate.py::test_pure_shares_fold_one_sided_values_at_the_pure_factor",)),
    # round 6 (mut6): fixed-point sums, their error term, and @property accessors mutmut does not mutate
    Mutant("fixed-point quantisation warns on an overflowing private row", "dpflow/nodes/fixedpoint.py",
           'np.errstate(all="ignore")', 'np.errstate(all="warn")', ("tests/nodes/test_mutants_fixedpoint.py",)),
    Mutant("fixed-point statistic's shape without its columns (too few noised entries)", "dpflow/nodes/fixedpoint.py",
           "return tuple(self.units.shape)", "return tuple(self.units.shape[:1])",
           ("tests/nodes/test_fixedpoint.py::test_exact_releases_equal_the_float_statistics_up_to_the_lattice",)),
    Mutant("fixed Gram overflow threshold not strict", "dpflow/nodes/floaterr.py",
           "if not b1 * b1 < OVERFLOW:", "if not b1 * b1 <= OVERFLOW:", ("tests/nodes/test_mutants_floaterr.py",)),
    Mutant("continuous Gaussian profile claimed in zCDP mode", "dpflow/planner/modes.py",
           "return self in (Accounting.GDP, Accounting.BASIC, Accounting.PLD)",
           "return self in (Accounting.GDP, Accounting.BASIC, Accounting.PLD, Accounting.ZCDP)",
           ("tests/planner/test_accuracy.py::test_rows_use_the_certified_scale_and_the_run_records_the_same",)),
    Mutant("continuous Gaussian events not seen (PldEvents.has_gaussian)", "dpflow/privacy/pld.py",
           "return any(isinstance(e, GaussianPLD) for e, _ in self.counts)", "return False",
           ("tests/privacy/test_mutants_composition.py::test_for_lattice_noise",)),
    Mutant("the secure source says it is not exact", "dpflow/interpreter/noise.py",
           "    def exact(self) -> bool:\n        return True", "    def exact(self) -> bool:\n        return False",
           ("tests/interpreter/test_exact_noise.py::test_secure_noise_is_the_default_and_says_so",)),
    Mutant("lifetime zCDP filter charged half the ledger's rho", "dpflow/planner/ledger.py",
           "return self.cost.rho\n", "return self.cost.rho / 2\n",
           ("tests/cli/test_budget.py::test_runs_are_charged_exactly_and_stored_as_fraction_text",)),
    # round 7 (lead): the sparse vector's release step and the mechanisms' own delta in zCDP mode
    Mutant("AboveThreshold's threshold noise subtracted", "dpflow/nodes/sparse_vector.py",
           "(f + nu >= T + rho[0])", "(f + nu >= T - rho[0])",
           ("tests/nodes/test_mutants_sparse_vector.py::test_continuous_release_draws_one_threshold_noise_then_m_"
            "answer_noises_and_halts_at_ge",)),
    Mutant("the mechanisms' own delta0 not taken from the zCDP total's delta", "dpflow/planner/allocate.py",
           "    return approx_zcdp_rho_for_approx_dp(eps, delta, delta0), delta0",
           "    return approx_zcdp_rho_for_approx_dp(eps, delta, 0), delta0",
           ("tests/planner/test_mutants_modes.py::test_the_zcdp_mode_text_with_the_mechanisms_own_delta",)),
    # round 8 (lead): the exact exponential mechanism's bounds (a tightened bound decides draws it may not)
    Mutant("exact exponential mechanism's lower weight bound rounded to nearest", "dpflow/nodes/expmech.py",
           "w_lo = down.multiply(", "w_lo = near.multiply(",
           ("tests/nodes/test_mutants_expmech.py::test_decimal_bounds_enclose_the_weights_at_low_precision",)),
    Mutant("exact exponential mechanism's upper float bound with 1 + e, not 1 + 2e", "dpflow/nodes/expmech.py",
           "w_hi = ed * (1.0 + 2.0 * e)", "w_hi = ed * (1.0 + e)",
           ("tests/nodes/test_mutants_expmech.py::test_float_bounds_step_by_step",)),
    Mutant("exact-source quantile at twice its epsilon (the scores' sign -2)", "dpflow/nodes/quantile.py",
           "np.arange(n + 1, dtype=float), -1, target", "np.arange(n + 1, dtype=float), -2, target",
           ("tests/nodes/test_mutants_quantile.py::test_lattice_groups_match_the_rule_in_rationals",)),
    Mutant("DyadicCounts' l1 sensitivity 3L under replace-one", "dpflow/nodes/rules.py",
           "l1 = change_bound(rows, Sym.const(2.0 * L), Sym.const(float(L)))",
           "l1 = change_bound(rows, Sym.const(3.0 * L), Sym.const(float(L)))",
           ("tests/nodes/test_mutants_dyadic.py::test_dyadic_counts_sensitivities",)),
    Mutant("Clip's fast path certifies rows with a slack (d + 3) times too small", "dpflow/nodes/transforms.py",
           "slack = 4.0 * (A.shape[1] + 3) * np.finfo(float).eps",
           "slack = 4.0 / (A.shape[1] + 3) * np.finfo(float).eps",
           ("tests/nodes/test_mutants_transforms.py::test_project_ball_far_centre_meets_the_bound_downstream_reads",)),
    Mutant("the Gram's replace-one sensitivity sqrt(3) r^2", "dpflow/nodes/pca.py",
           "r.pow(2) * math.sqrt(2.0), r.pow(2))", "r.pow(2) * math.sqrt(3.0), r.pow(2))",
           ("tests/nodes/test_mutants_pca.py::test_gram_frobenius_sensitivity",)),
    Mutant("the group histogram's l1 divided by the stability", "dpflow/nodes/tuples.py",
           "return Sym.const(m * s), Sym.const(math.sqrt(m) * s)",
           "return Sym.const(m / s), Sym.const(math.sqrt(m) * s)",
           ("tests/nodes/test_mutants_tuples.py::test_group_histogram_sensitivity",)),
    Mutant("a projected-ball partition giving the inside rows to both pieces", "dpflow/nodes/terrific.py",
           "return [X[inside], X[~inside]]", "return [X[inside], X[inside]]",
           ("tests/nodes/test_mutants_terrific.py::test_partition_by_projected_ball",)),
    Mutant("a second moment about c using the radius of a clip around another centre", "dpflow/nodes/queries.py",
           "return dom.l2_bound if dom.center == center.id else None", "return dom.l2_bound",
           ("tests/nodes/test_mutants_queries.py::test_second_moment_radius_only_around_the_clip_centre",)),
    # round 10 (lead): block statistics' declared domain, the truncated mean's 2R/n, the samplers' exact steps
    Mutant("block statistics released without moving them into their declared domain", "dpflow/nodes/blocks.py",
           "return into_domain(block_statistic(X, self.size, self.statistic, self.k), dom.box, r, c)",
           "return block_statistic(X, self.size, self.statistic, self.k)",
           ("tests/nodes/test_mutants_blocks.py::test_block_statistics_are_moved_into_the_declared_domain",)),
    Mutant("a truncated mean's sensitivity unit 3R/n", "dpflow/nodes/truncation.py",
           "unit = R * (2.0 * rows.stability) / n", "unit = R * (3.0 * rows.stability) / n",
           ("tests/nodes/test_mutants_truncation.py::test_bounds_are_two_r_over_n",)),
    Mutant("the exact Bernoulli(num / den) step with <=", "dpflow/interpreter/samplers.py",
           "return src.below(den) < num", "return src.below(den) <= num",
           ("tests/interpreter/test_mutants_samplers.py::test_bernoulli_is_a_uniform_below_den_against_num",)),
    Mutant("the discrete Gaussian's acceptance bias over sigma^2, not 2 sigma^2", "dpflow/interpreter/samplers.py",
           "bias = (abs(y) - sigma2 / t) ** 2 / (2 * sigma2)", "bias = (abs(y) - sigma2 / t) ** 2 / sigma2",
           ("tests/interpreter/test_mutants_samplers.py::test_discrete_gaussian_proposal_and_acceptance",)),
    # round 11 (lead): the secure word source, a silent noiseless release, PairDifferences' declared domain
    Mutant("the secure word source seeded by numpy, not reading os.urandom", "dpflow/interpreter/vector_samplers.py",
           "self._gen = None if seed is None else np.random.PCG64(seed)", "self._gen = np.random.PCG64(seed)",
           ("tests/interpreter/test_mutants_samplers.py::test_word_source_reads_the_os_csprng_unless_seeded",)),
    Mutant("Gaussian noise of a negative or NaN scale released as zeros", "dpflow/interpreter/noise.py",
           "return np.zeros(shape) if sigma == 0 else self._gen().normal(0.0, sigma, shape)",
           "return self._gen().normal(0.0, sigma, shape) if sigma > 0 else np.zeros(shape)",
           ("tests/interpreter/test_mutants_samplers.py::test_secure_continuous_draws_come_from_256_fresh_os_bits_per_draw",)),
    Mutant("pair differences released without moving them into their declared domain", "dpflow/nodes/transforms.py",
           "return into_domain(_pair_differences(Z), box, r)", "return _pair_differences(Z)",
           ("tests/nodes/test_mutants_transforms.py::test_pair_differences_lie_in_their_declared_domain",)),
)


def _run(root: Path, tests: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    """Run ``tests`` (of this repository) against the package copy in ``root``: the copy comes first on the
    path because the subprocess starts in ``root``; the repository's ``pyproject.toml`` gives the test
    settings (``-o addopts=`` drops its doctest collection, ``-x`` stops at the first failure)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:warnings",
           "-o", "addopts=", "-c", str(REPO / "pyproject.toml"), "--rootdir", str(REPO),
           *(str(REPO / t) for t in tests)]
    return subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mutant")
    shutil.copytree(REPO / "dpflow", root / "dpflow", ignore=shutil.ignore_patterns("__pycache__"))
    where = subprocess.run([sys.executable, "-c", "import dpflow; print(dpflow.__file__)"], cwd=root,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(root), f"the copy is not the package imported: {where}"
    return root


def test_the_unmutated_copy_passes_every_selected_test(package_copy: Path) -> None:
    tests = tuple(sorted({t for m in MUTANTS for t in m.tests}))
    res = _run(package_copy, tests)
    assert res.returncode == 0, res.stdout[-3000:]


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_the_mutant_is_killed(package_copy: Path, mutant: Mutant) -> None:
    target = package_copy / mutant.path
    original = target.read_text()
    assert original.count(mutant.old) == 1, f"{mutant.path}: the mutated text must occur once: {mutant.old!r}"
    target.write_text(original.replace(mutant.old, mutant.new))
    try:
        res = _run(package_copy, mutant.tests)
    finally:
        target.write_text(original)
    assert res.returncode == 1, f"mutant survived ({mutant.name}):\n{res.stdout[-3000:]}"
