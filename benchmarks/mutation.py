"""Mutation testing of the privacy code (issue 9): rerun mutmut over named modules, print the kill rate per module.

mutmut (3.x, configured in ``pyproject.toml`` under ``[tool.mutmut]``) makes every single-point change it
knows (operators, comparisons, constants, arguments, return values) to each function of the modules listed
in ``only_mutate`` and runs, for each mutant, the tests that call the mutated function.  A mutant is
*killed* when a test fails, *survives* when all pass.  This script runs one mutmut invocation per named module,
in the order given (one clean pass of the module's tests, then its mutants, cheapest first), then reads
mutmut's result files (``mutants/<path>.meta``) and prints, per module: mutants, killed, timeouts (a mutant
that makes a test loop forever is detected too), survivors, mutants no test reaches, the kill rate, and the
equivalent mutants of :data:`EQUIVALENT` (each with the reason it cannot change behaviour; the
per-module totals are in ``docs/assurance.md``).

Each module's mutants run only its subject folder's tests (:data:`SUBJECT_TESTS`) that took at most
:data:`MAX_TEST_SECONDS` in mutmut's stats pass, and every pin file (``test_mutants_*.py``): a rule must be
pinned where it is stated, and the functions every plan calls are reached by hundreds of end-to-end tests,
which made each mutant cost minutes.  A kill rate
measured with fewer tests is conservative (a mutant the left-out tests would kill counts as a survivor).
Run it with ``CI=1`` (the property tests then draw a fixed set of examples, so a verdict repeats) and under
``nice`` on a shared machine.  Two things mutmut does not do by itself: it forks each mutant from a process
whose dpflow caches already hold unmutated results, so ``tests/conftest.py`` empties dpflow's function caches
when a test session starts (a filled cache would answer for the mutant); and it never mutates a decorated
function, so cached functions are written ``f = functools.lru_cache(...)(f_of)``.

    CI=1 nice -n 15 python benchmarks/mutation.py          # the default set, one module after the other
    python benchmarks/mutation.py dpflow/privacy/rounding.py dpflow/nodes/floaterr.py
    python benchmarks/mutation.py dpflow/nodes/base.py:change_bound,sym_max   # some functions of a module
    python benchmarks/mutation.py dpflow/budget.py:BudgetStore._create        # a method
    python benchmarks/mutation.py --resume MODULE ...      # only the mutants not yet killed (after new tests)
    python benchmarks/mutation.py --refresh-stats MODULE   # re-collect the subject tests' map (code changed)
    python benchmarks/mutation.py --report-only            # tabulate the last run without running mutmut
    python benchmarks/mutation.py --survivors              # also list every surviving mutant's name

Run from the repository root with the dev extra installed (``pip install -e '.[dev]'`` plus ``mutmut``).  The
first run collects which tests call which function (one pass of the test suite), later runs reuse it and
retest only functions whose source changed.  ``mutmut show <name>`` prints a mutant's diff.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

DEFAULT_MODULES = [  # in order of privacy importance
    "dpflow/privacy/calibration.py",
    "dpflow/privacy/conversions.py",
    "dpflow/privacy/composition.py",
    "dpflow/privacy/rounding.py",
    "dpflow/privacy/measures.py",
    "dpflow/budget.py",
    "dpflow/planner/allocate.py",
    "dpflow/privacy/pld.py",
    "dpflow/planner/fold.py",
    "dpflow/planner/ledger.py:split_rule,seq_pairs,of_relation",
    "dpflow/nodes/base.py:change_bound,sym_max",
    "dpflow/nodes/rules.py",
    "dpflow/nodes/floaterr.py",
    "dpflow/nodes/mechanisms.py",
]

#: The tests a module's mutants run: its subject folder's (a rule must be pinned where it is stated; a function
#: every plan calls is reached by hundreds of end-to-end tests, which made each mutant run for minutes).  A node
#: module's also include the contract suite, which checks every node kind's sensitivity on adversarial neighbours
#: (not its backend tests: their dask workers hang in mutmut's forked children, a fake timeout).
SUBJECT_TESTS = {
    "dpflow/privacy/": ("tests/privacy/",),
    "dpflow/planner/": ("tests/planner/",),
    "dpflow/nodes/": ("tests/nodes/", "tests/contract/test_every_node.py"),
    "dpflow/budget.py": ("tests/cli/test_budget.py", "tests/cli/test_mutants_budget.py"),
    "dpflow/interpreter/": ("tests/interpreter/test_exact_noise.py", "tests/interpreter/test_vector_samplers.py",
                            "tests/interpreter/test_sampling_golden.py", "tests/interpreter/test_secure_noise_kinds.py",
                            "tests/interpreter/test_secure_no_continuous.py", "tests/interpreter/test_expmech.py",
                            "tests/interpreter/test_mutants_"),
}
#: Tests whose recorded duration (mutmut's stats pass) exceeds this many seconds are left out of mutant runs by
#: default: the 200-example property tests, which kill early when they kill but cost minutes per survivor.  The
#: pin files written for the mutants (``test_mutants_*.py``) always run.
MAX_TEST_SECONDS = 1.0

_INT_STAT = ("np.asarray(x, dtype=float) vs dtype=None: a statistic is a float64 array (asarray returns it as is) or "
             "integer counts below 2^53, which every later operation promotes to the same float64 values")
_STRICT = "zip(strict=...): the noise is drawn with exactly as many entries as the lattice release has"
_ZERO_BRANCH = ("up's and down's sign tests (x > 0 vs >= 0, x < 0 vs <= 0 or < 1): they differ only at x = +-0.0, "
                "where every branch computes y = +-0.0, and nextafter(+-0.0, +-inf) does not depend on the zero's sign")
_OVERFLOWED = ("q > 0 vs q >= 0 or q > 1 where float(q) overflowed: |q| exceeds the largest float, so q is "
               "never in [0, 1] and the three tests agree")
_FAST_PATH = ("exact()'s fast path (type(x) is Fraction / float) disabled: a Fraction then takes the isinstance(x, "
              "Fraction) branch and a float the numbers.Real branch, which return the same value and refusal")
_SQL_CASE = "the case of an SQL keyword or identifier: SQLite reads both the same"
_SQLITE_LEGACY = ("sqlite3.connect without isolation_level=None: the default ('', legacy transaction control) only "
                  "opens a transaction by itself before an INSERT, UPDATE, DELETE or REPLACE run outside one (and, "
                  "since Python 3.6, commits before nothing); _create's connection runs a script and a PRAGMA only, "
                  "and every write of the store runs inside the explicit BEGIN IMMEDIATE of _transaction: no "
                  "statement runs differently")
_ONE_PER_DATASET = ("zip(strict=...) of a reservation's ids and amounts: reserve() appends one of each per dataset, "
                    "so they always have the same length")
_SUM_START = ("sum(..., Fraction(0)) vs sum(...): the empty sum is 0 either way and a non-empty one a Fraction; 0 and "
              "Fraction(0) compare, print and add the same")
_FAILED_LIMIT = ("the limit an audit with problems returns (Fraction(0) when the stored limit is unreadable): such an "
                 "audit admits no run and verify() reads only its problems")
_SQUARE = "shape[1] vs shape[0]: only symmetric (square) matrices reach this line"

_FLAT_G = ("log_t = +inf vs -inf when target <= 0: an accepted point has f = 0 (g = -inf either way) and a rejected "
           "one g = +inf or the same tiny value; the search reads g only through its sign and through differences "
           "of distinct finite values (equal tiny values give NaN, as +inf does), so every step is the same")
_ORDER_END = ("a larger upper end of the Renyi-order search: the optimal order lies below both ends, and bisecting a "
              "monotone sign ends at the same pair of adjacent floats whatever the bracket")
_DELTA_ONE_GDP = ("delta > 1 (or >= 2) vs >= 1 for the early return: delta is capped at 1 before, and at delta = 1 "
                  "the next test, delta(0) <= 1, returns 0 as well")
_MID_MOVES = ("the bisection's 'midpoint stopped moving' exit: the loop runs only while hi - lo > 1e-15 hi, more than "
              "four floats apart for normal hi > 1e-300, so the midpoint always lies strictly inside")
_ZIP_SHIFTED = "zip(strict=False / None / default) of a list and its tail: all three stop at the shorter"

_GROUPING = ("grouping repeated cost objects from 8 (or 10) costs on instead of 9: c.scaled(k) has every field of k "
             "copies composed one by one, so the threshold changes the speed only (pinned by eight and nine copies)")

_LAPLACE_DEFAULT = ("an argument of from_laplace_mechanism left to its default: sensitivity 1, pessimistic_estimate "
                    "True and value_discretization_interval 1e-4 are the defaults")
_GAUSS_DEFAULT = ("an argument of GaussianPrivacyLoss left to its default (sensitivity 1, pessimistic_estimate True, "
                  "log_mass_truncation_bound -50, adjacency REMOVE)")
_CONNECT_DOTS = ("GaussianPrivacyLoss's pessimistic_estimate None / False: the flag rounds only the tail PMF, which "
                 "the connect-the-dots path does not read (its bounds and the CDFs are the same; tests compare the PMF "
                 "with from_gaussian_mechanism)")
_CLIP_TOP = ("the clip's upper end (1.0 vs 2.0 / None): the first term is scipy's normal CDF, ndtr, in [0, 1] by "
             "construction (0.5 + 0.5 erf(z) < 0.93 for |z| < 1, else 0.5 erfc(|z|) >= 0 or 1 minus it); the second "
             "is an exp, >= 0 (exp(-inf) = 0); a - b with b >= 0 rounds to at most a, since a is a float and rounding "
             "is monotone: every difference is <= 1 (a NaN passes any clip unchanged)")
_NO_DELTA = "at delta = 0 the weight (1 - 0)^k is 1.0 exactly, so 1 - weight is 0.0 too"
_TOP_BUCKET = ("the optimistic Gaussian PLD's top bucket and tail: the last two edges lie at z >= 12 sd (up to float "
               "error ~1e-12), where ndtr(z) = 1 - 0.5 erfc(z / sqrt 2) and 0.5 erfc(8.48) = 1.8e-33 is far below "
               "2^-54, half the spacing of the floats below 1 (for any erfc within 10^10 of the truth): both edges "
               "are 1.0, so probs[-1] and 1 - edges[-1] are 0.0")

_PAIR_MEMO = ("the memo of a leaf's PerRecord pair by the cost object's id: every variant returns PerRecord(c, c) "
              "for the leaf's cost c (the memo holds c, so an id in it is never reused by another object)")

_SYM_MAX_NONE = ("change_bound's None tests before sym_max: out starts as the zero bound, and sym_max returns None "
                 "when either bound is None and the other bound when one is zero: every variant gives the same bound")
_LOWER_MIN = ("the closed-form rules in _epsilon_lower's minimum: each valid rule is at or above the exact epsilon, "
              "which the optimistic PLD figure is below (or that figure is 0.0): the minimum is the PLD figure")

_MODE_TEXT = ("a mode text other than 'pure' handed to a node's cost: every node compares its mode with 'pure' only "
              "(grep 'mode ==' in dpflow/nodes), so 'zcdp', 'ZCDP', 'XXzcdpXX' and None cost the same")
_SAME_LENGTH = "zip(strict=...) of ctx.mechs and ctx.classes: built together, one class per mechanism"
_CLASS_MEMO = ("the memo of one share and Allocation per class of equal mechanisms: recomputing gives an equal frozen "
               "Allocation (only the object identity the invocation memo keys on differs)")

_INVOCATION_MEMO = ("the memos of _invocation (by the ids of unit and mult, each entry holding its key's objects): "
                    "every variant either hits with the same objects or recomputes the same frozen Allocation")
_FIXED_ANY_MODE = "fixed_share(None) vs (mode), tested against None: a fixed share is None in every mode or in none"

# mut7 (round 6): the reasons of the allocate.py equivalents below
_FOLDS_AGAIN = ("folds passed as None (or left out): allocate_budget then computes source_folds(ctx, mode) for the "
                "choice's mode, the call pld_total makes itself (the same cached ctx.folds entry)")
_CHOICE_TEXT = "the text of the ModeChoice handed to allocate_budget: it reads only choice.accounting and choice.total"
_EMPTY_MAX = ("max(..., default=...) over the sources' costs: never empty (pld_total returns None first when there is "
              "no mechanism, and a mechanism reads a source)")
_LEAF_MEMO = ("the memos of cost_leaf's PerRecord pairs by the invocation's id (each entry holding its invocation, so "
              "no other live object has that id): every variant either hits the entry of the same invocation or "
              "recomputes an equal PerRecord of the same costs")
_WORST_START = ("_refuse_budget's first worst / worst_f: it refuses only fixed > total > 0, so a fixed mechanism on "
                "the source has a share f > 0 > -1 (> -2) and replaces both")

# lead (round 7): the reasons of the modes.py, stability.py and sparse_vector.py equivalents below
_FIXED_BOTH = ("fixed_share('pure') ... and vs or fixed_share('zcdp') ..., each tested against None: a fixed share is "
               "None in every mode or in none, so the two tests agree")
_UNIT_SHARE = ("own_delta's unit share (2 vs 1): every dpflow mechanism's delta0 is independent of its share (the "
               "stability histograms' costs are Cost.approx_dp(eps, delta) and Cost.approx_zcdp(share, delta), every "
               "other cost has delta0 = 0); were one not, the ledger's budget check would refuse the plan")
_TRUTH = "None vs False as a flag: it is read only as a truth value"
_NAME_UNREAD = "own_delta0's source name returned with delta0 = 0: zcdp_total reads the name only to refuse delta0 > 0"
_MECH_DERIVATION = ("a mechanism's Inferred derivation text: the planner records check_input's text for every "
                    "Mechanism (planner/infer.py), never infer's")
_ASTYPE = "astype(None) vs astype(float): numpy reads the dtype None as float64"
_ASSERT = "an assert weakened (and -> or): check_input guarantees both operands, so neither form fails"

# lead (round 8): the reasons of the expmech.py equivalents below
_SAME_INDEX = ("zip(strict=...) of two sequences taken at the same indices (a[idx] and c[idx]; exact(ok) and m[ok]): "
               "both have len(idx) entries or the indexing raises first")
_TINY_LO = ("the exp(-700) cut of a lower weight bound (d - e >= -700 vs d + e or >): a weight below exp(-699) of "
            "the largest floors to 0 fixed-point units either way (2^s m_k e^-699 <= 2^59 m_k e^-699 / max(1, "
            "m_k e^-700) < 2^-880 for any int64 m_k, as the top entry's bound is at least 1)")
_PAST_LAST = ("i <= size vs i < size in the decision: i = size needs upper_(size-1) = U_N <= bottom = floor(W L_N "
              "2^-bits) < L_N <= U_N, which never holds, so both forms return None")
_NONFINITE_X = ("the float phase's finiteness test skipped: a non-finite float log-weight has an infinite error bound "
                "(or a NaN d), so _float_bounds's 2^-20 cut returns None by itself")
_MULT_DTYPE = ("float_phase_miss's multiplicities without dtype=int64: _float_bounds reads them as floats and m > 0 "
               "is the same test on integer-valued floats")
_LW_DTYPE = ("report_noisy_max's log-weights without dtype=float: callers pass float64 arrays; an integer or float32 "
             "array gives the same keys once the float64 Gumbel variates are added")

_FLOAT_IN = ("np.asarray / np.array / np.arange without dtype=float (or the int64 it names): the input is float64 "
             "already (real rows after Source's policy or a Clip, framed order statistics, released values) or "
             "integer-valued (ordinal rows, counts, levels), which every later operation reads as the same values")
_ONE_ENTRY = "reshape(+1) or reshape(-2) of a released scalar (one entry, checked at planning): the same one entry"
_NEG_RESHAPE = "reshape(-2, ...) vs reshape(-1, ...): numpy reads any negative size as the one to infer"
_EMPTY_GAPS = ("framed[1] vs framed[0] when report noisy max finds no candidate: every gap is empty then, so every "
               "framed value is the lower end")

_INT_ARRAY = ("an integer array (counts, sizes, positions, group metadata, all below 2^53) built or cast as float64 "
              "or int64: every reader converts it to the same values")
_PATH_CHOICE = ("the threshold that picks one of two ways to compute the same result (DyadicTable.build's runs of "
                "merged pairs or intervals between breaks; DyadicLevel.of's histogram or np.unique of the counts; its "
                "radix sort while ranks fit 16 bits, at len(values) = 2^16 too, or np.sort): both ways are exact "
                "(tests/nodes/test_dyadic_build.py checks every level against a reference, test_mutants_dyadic.py the "
                "keys at 70,000 distinct counts)")
_SORT_MORE = ("DyadicTable.build's sortedness test weakened so that it sorts more often (one value, ties, or always): "
              "sorting a sorted array changes nothing")
_FEW_POINTS = ("the n <= 1 branches of DyadicTable.build (merge pairs, the cumulative merge counts, their lengths "
               "and dtypes): with fewer than two points no pair merges at any level either way, and only upto[j], "
               "j < L, is read")
_EMPTY_DTYPE = "the dtype of an empty array (later cast to int64 or only measured by len)"
_REPLACE_ONLY = ("DyadicCounts' add/remove bounds: public_n has refused every relation but replace-one before, so "
                 "change_bound never reads them")
_ZERO_SIZE = ("groups of zero members kept (g >= 0): a zero multiplicity weighs 0 on both samplers (exact_choice skips "
              "m = 0, report noisy max gets log 0 = -inf), so the law is the same")
_BIT_LENGTH = ("_bit_length's correction (float64 rounding v up to the next power of two) applied from 2^53 + 1 or "
               "from 106 on: below 2^54 - 1 the conversion keeps the exponent, so the check changes nothing there; "
               "astype(None) is float64")

_NAN_DEFAULT = "np.nan_to_num without nan=0.0: 0.0 is its default"
_FLOAT_ROWS_CTX = ("float_rows(None, ...) on float64 rows: float_rows reads the context only to convert other dtypes, "
                   "and the rows reaching a gradient step are float64 (Source's policy)")
_CLIPPED_FINITE = ("the gradient terms' errstate left to numpy's settings: x, y and the residual are clipped to finite "
                   "bounds first (NaN counts as 0), so no floating-point exception can occur")
_ON_SPHERE = ("the l1 projection's early return at sum == radius vs only below: on the sphere the threshold is 0, so "
              "the projection returns the same vector")
_DUCHI_TIE = ("rho's test u_k k >= css_k - r vs >: at equality the threshold (css_k - r) / k equals u_k, the same "
              "as at the index before")
_KEEP_ALL = "sparsity <= size vs < size: keeping all entries is no change"
_MASK_FLOAT = "the kept-entries mask as float64 (1.0 / 0.0) rather than bool: np.where reads both as truth values"
_SCALE_ONE = "norm >= radius vs > radius: at equality the scaling factor is 1.0"

# lead (round 9)
_SQUARE_CHECKED = ("shape[1] vs shape[0] of a released matrix the node has just checked square "
                   "(base.square_problem, in evaluate and, when the shape is known, in infer before out_shape)")
_SCALAR_FLOAT = ("a one-entry released value read without dtype=float: float() of its integer or float entry is the "
                 "value astype(float) gives")
_EINSUM_CASE = "einsum subscripts in upper case: the same labels"
_BAD_NORM = ("a non-finite row's norm set to 1.0 instead of 0.0: its entries are 0 already, so any scaling keeps them "
             "0, and 1.0 is finite (the row is not taken for an overflowed one)")
_INT_MATRIX = ("the released matrix without dtype=float: its product with the float64 rows casts it to float64 first, "
               "the same values")
_PIECE_DTYPE = ("PartitionByBall's rows without dtype=float: X - c is float64 either way (c is), and the pieces keep "
                "the rows' own values, which every reader converts with float_rows")
_KEY_SENTINEL = "an unknown column name's index -2 vs -1: every negative index is refused the same way (0 <= i < d)"
_PLANNED_KEYS = ("Columns.evaluate's node id for indices(): it cannot raise at run time, infer checked the same rows' "
                 "type")
_KIND_CHARS = ("'XX...XX' around the dtype kinds a test accepts ('biuf', 'iub'): a kind is one lower-case character, "
               "never X")
_PRIVATE_N = ("Source's known size when not public: under add/remove a declared n is refused just above, so self.n "
              "is None either way")
_COPY_NONE = "astype(float, copy=None) vs copy=False: both copy only when the dtype changes"
_RESHAPE_NONE = "reshape(None) keeps the shape: the value is a one-dimensional released vector already"
_SORT_CASE = "sort kind 'STABLE': numpy reads sort kinds case-insensitively"
_GRID_TIES = ("the merged radius grid argsorted without kind='stable': equal grid values have the same cumulative "
              "count, so the order among them does not matter")
_LAST_AXIS = "np.sort without axis=1 on a 2-d array: the default axis is the last, 1"
_COPY_SAME = "np.where(ok, X, 0.0) when every row is finite: a copy with the same values"
_INT_COUNTS = ("the pairwise count arrays as float64 zeros instead of int64: they hold integer counts far below 2^53, "
               "and the total is cast to int64")
_ONE_ROW = ("no pairwise pass for one row: its only score is max(min(in = 1, out = 0, t) - lam ann, 0) = 0 either "
            "way")
_BLOCKS = "the row-block size of the pairwise pass (memory only): the counts do not depend on the blocking"
_DEFAULT_SIDE = "searchsorted without side='left': 'left' is the default"
_FLOAT_TOTAL = ("the terrific total as float64 instead of int64: a sum of at most n t integers, exact in float64, "
                "which TerrificScores.evaluate casts to float64 anyway")
_ZIP_STRICT = "zip(r, r[1:]) with strict=None or no strict: a falsy strict, the same pairs"
_DEFAULT_INT64 = "rng.integers without dtype=np.int64: int64 is its default, the same draws"
_INT_WRAP = "errstate(over=None) around uint64 array products: numpy never warns on integer wrap-around in arrays"
_UINT_SUM = "a sum of uint64 entries without dtype=np.uint64: numpy sums uint64 in uint64"
_SHORTCUT = ("the all-zero shortcut taken less often (d >= 1; a non-finite centre makes every distance NaN, read as "
             "outside): the general path returns the same counts")
_LEVEL_CAST = ("levels as float64 instead of int64: small integers, cast to int64 where keyed and used as exponents "
               "in float64 arithmetic")
_WHOLE_FLOAT = "_w(d / k) vs _w(d // k): k divides d (refused otherwise just before) and _w accepts a whole float"
_LIFT_PAIR = "V and o are both given (three inputs) or both absent: 'or' and 'and' agree"
_BASIC_STRICT = ("basic_eps < eps vs <=: the one declared point (the Laplace stability histogram's) is at the share "
                 "eps^2/2, whose epsilon is down(sqrt(2 float(eps^2/2))) or less, at least a relative 1e-12 below eps "
                 "(rounding.down), so it never equals eps")

# lead (round 10)
_UINT_PRECLAMP = ("the uint64 pre-clamp's bound (N - 1 vs N + 1): any bound below 2^63 keeps the cast to int64 from "
                  "wrapping, and the clip after the cast clamps to N - 1")
_INT_DEFAULT = ("np.array / np.asarray of Python integers (below 2^62) without dtype=np.int64: numpy's default integer "
                "is int64")
_COUNTS_BOUNDED = ("the None test before dividing a count's bound by n: count_sensitivities' bounds are never None "
                   "(a constant diameter and norm)")
_INT_EDGES = ("the bin edges 0..k as an int64 arange: the backend compares the same small integers with the float bin "
              "indices (the dask backend casts edges to float64)")
_PARAM_NONE = "optional_ref(None): param(None) is None too"
_INF_CASE = "float('INF') vs float('inf'): Python reads the name case-insensitively"
_TRAMPOLINE = ("the accuracy warning's stacklevel (_caller_level's frame walk): pinned by "
               "test_the_warning_points_at_the_callers_line, which runs outside mutmut only (mutmut's trampolines add "
               "frames between the caller and accuracy_warning)")
_PROD_DTYPE = ("np.prod of a shape without dtype=np.int64: small Python ints multiply to the same integer in numpy's "
               "default int64 (the empty shape's 1.0 reads as 1)")
_SCALE_THRESHOLD = ("a block scaled only when its largest entry exceeds 1 (s > 1 vs s > 0): the scaling guards sums of "
                    "squares against overflow, which entries of at most 1 cannot reach; without it only the last bits "
                    "of the result round differently (no bound or policy reads them)")
_ZERO_BLOCK_SCALE = ("the scale of an all-zero block (2.0 vs 1.0): its entries stay 0 and its statistics 0 or -inf "
                     "whatever they are multiplied by")
_EXP_ONE_ROUND = ("bernoulli_exp's loop while x >= 1 vs x > 1: at x = 1 one more Bernoulli(exp(-1)) round, then "
                  "Bernoulli(exp(-0)), which is always true: the same law")
_NE_THEN_LT = "return prefix <= t vs prefix < t where prefix != t was just tested: the same answer"
_TIE_OVERWRITTEN = ("the first-word test w <= threshold vs w < threshold: on a tie (w == threshold) the next loop "
                    "overwrites the entry with the exact word-by-word answer")
_NONZERO_PAIR = "zip(strict=...) of np.nonzero's index arrays: they always have the same length"
_ALL_SUCCESS = ("_first_failure's value for a row with no failure (BERN_COLUMNS + 2 vs + 1): only compared with "
                "BERN_COLUMNS, then overwritten by the continued loop, which starts at BERN_COLUMNS + 1 itself")
_PARITY = ("_first_failure's index argmax - 1 vs + 1: the same parity (K odd decides), and a row with a failure "
           "stays at or below BERN_COLUMNS either way (never continued)")
_BEYOND_TABLE = ("the clamp of n beyond the exp(-n) table (GEOM_TABLE + 2 vs + 1): every clamped value is above "
                 "GEOM_TABLE and reads the threshold 0 alike")
_OBJECT_SAME = ("the magnitude (V t + U) // s in Python integers for every V (not only V >= GEOM_TABLE): the same "
                "integers, assigned to the int64 output below 2^62")
_INT64_AT_44 = ("the int64 magnitude also at V = GEOM_TABLE: 44 t + U < 45 * 2^56 < 2^63 (t < 2^56), exact in int64 "
                "like every smaller V")
_PROD_DEFAULT = ("np.prod of a shape tuple without dtype=np.int64: numpy's default integer is int64, and the empty "
                 "shape's 1.0 is int() 1")
_CAP_ROUNDS = "the cap 2^64 - 2049 is the float 2^64 - 2048 (the float64 grid below 2^64 has spacing 2048)"
_EMPTY_DERIVATION = "Pack's derivation left to Inferred's default '': the base post-processing text is '' too"

#: Mutants that cannot change behaviour, by mutmut name, with the reason.
EQUIVALENT: dict[str, str] = {
    "dpflow.nodes.rules.x_released_endpoint__mutmut_8": "v > 0 vs v >= 0 where v is +inf, -inf or NaN: same answer",
    "dpflow.nodes.rules.x_released_endpoint__mutmut_9": "v > 0 vs v > 1 where v is +inf, -inf or NaN: same answer",
    "dpflow.nodes.mechanisms.xǁLaplaceMechǁevaluate__mutmut_6": _INT_STAT,
    "dpflow.nodes.mechanisms.xǁLaplaceMechǁevaluate__mutmut_8": _INT_STAT,
    "dpflow.nodes.mechanisms.xǁLaplaceMechǁevaluate__mutmut_25": "takes_lattice(stat, None): LaplaceMech's does not "
                                                                  "read the allocation",
    "dpflow.nodes.mechanisms.x__noised_entries__mutmut_4": _SQUARE,
    "dpflow.nodes.mechanisms.x__slack__mutmut_9": "'fe is not None or True': _slack is reached only on the lattice "
                                                  "path, which needs a float-error bound (takes_lattice)",
    "dpflow.nodes.floaterr.x_gamma__mutmut_18": "1 + 5u vs 1 + 4u (u = 2^-53): 1 + 5u is the tie between 1 + 4u and "
                                                "1 + 6u and rounds to even, 1 + 4u: the same float",
    "dpflow.nodes.floaterr.xǁFloatErrorǁbound__mutmut_26": "U * 1.0 vs U / 1.0: the same float",
    "dpflow.nodes.floaterr.xǁFloatErrorǁbound__mutmut_36": "widen=None vs widen=False: both falsy, read only by `if`",
    "dpflow.nodes.base.x_sym_max__mutmut_11": ">= vs > between bounds with the same factors: at equal coefficients "
                                             "a and b are equal bounds",
    "dpflow.privacy.rounding.x_up__mutmut_6": _ZERO_BRANCH,
    "dpflow.privacy.rounding.x_up__mutmut_12": _ZERO_BRANCH,
    "dpflow.privacy.rounding.x_up__mutmut_13": _ZERO_BRANCH,
    "dpflow.privacy.rounding.x_down__mutmut_7": _ZERO_BRANCH,
    "dpflow.privacy.rounding.x_down__mutmut_13": _ZERO_BRANCH,
    "dpflow.privacy.rounding.x_down__mutmut_14": _ZERO_BRANCH,
    "dpflow.budget.xǁBudgetStoreǁ_dataset__mutmut_7": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁ_dataset__mutmut_8": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁ_dataset__mutmut_15": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁ_dataset__mutmut_16": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁ_close__mutmut_14": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁ_close__mutmut_15": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁstatus__mutmut_13": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁstatus__mutmut_14": _SQL_CASE,
    "dpflow.budget.x__audit__mutmut_7": _SQL_CASE,
    "dpflow.budget.x__audit__mutmut_8": _SQL_CASE,
    "dpflow.budget.x__audit__mutmut_19": _SQL_CASE,
    "dpflow.budget.x__audit__mutmut_20": _SQL_CASE,
    "dpflow.budget.x__audit__mutmut_22": _SQL_CASE,
    "dpflow.budget.x__audit__mutmut_23": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁreserve__mutmut_50": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁreserve__mutmut_51": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁ_close__mutmut_3": _ONE_PER_DATASET,
    "dpflow.budget.xǁBudgetStoreǁ_close__mutmut_6": _ONE_PER_DATASET,
    "dpflow.budget.xǁBudgetStoreǁ_close__mutmut_7": _ONE_PER_DATASET,
    "dpflow.budget.xǁBudgetStoreǁstatus__mutmut_36": _SUM_START,
    "dpflow.budget.x__audit__mutmut_98": _SUM_START,
    "dpflow.budget.x__audit__mutmut_122": _FAILED_LIMIT,
    "dpflow.budget.x__audit__mutmut_124": _FAILED_LIMIT,
    "dpflow.budget.x__audit__mutmut_125": _FAILED_LIMIT,
    "dpflow.privacy.measures.x_exact__mutmut_1": _FAST_PATH,
    "dpflow.privacy.measures.x_exact__mutmut_4": _FAST_PATH,
    "dpflow.privacy.rounding.x_to_float_up__mutmut_5": _OVERFLOWED,
    "dpflow.privacy.rounding.x_to_float_up__mutmut_6": _OVERFLOWED,
    "dpflow.privacy.rounding.x_to_float_down__mutmut_5": _OVERFLOWED,
    "dpflow.privacy.rounding.x_to_float_down__mutmut_6": _OVERFLOWED,
    "dpflow.privacy.calibration.x__grid_floor__mutmut_3": (
        "x <= 2^q vs x < 2^q: at x = 2^q both give index q H (q H + floor(H) - H, or (q - 1) H + floor(2 H) - H)"),
    "dpflow.privacy.calibration.x__bracket__mutmut_1": (
        "start 2.0 vs 1.0: both walk the same powers of two, and a monotone ok has one bracket [2^k, 2^(k+1)] there"),
    "dpflow.privacy.calibration.x__bracket__mutmut_15": (
        "halving from (2 start, start) vs (start / 2, start): ok(2 start) is false (monotone, ok(start) false), "
        "so the next step is (start, 2 start) and then the original's first step: one more evaluation, same bracket"),
    "dpflow.privacy.calibration.x__bracket__mutmut_18": (
        "lo >= 0 vs lo > 0 once lo underflows to 0: ok(0) holds for every caller (delta, epsilon and the DRV bound "
        "are 0 at 0), so the loop ends there too"),
    "dpflow.privacy.calibration.x_largest_on_grid__mutmut_12": _FLAT_G,
    "dpflow.privacy.calibration.x_largest_on_grid__mutmut_18": (
        "isinf(v) and False: log(inf) - log_t is +inf for every finite log_t, the value the inf branch returns"),
    "dpflow.privacy.calibration.x_largest_on_grid__mutmut_69": (
        "max(2, ceil(o H)) vs max(1, ...): o >= 0.03, so ceil(o H) >= 246 and the max never binds"),
    "dpflow.privacy.calibration.x_largest_on_grid__mutmut_114": (
        "3 (b - a) vs 2 (b - a) as the first widths: 2 (b - a) > w tests against them only while b - a is at most "
        "the first width, false for both"),
    "dpflow.privacy.calibration.x_shares_by_weight__mutmut_7": (
        "sum(ws) vs sum(ws, Fraction(0)): the same Fraction for a non-empty list; an empty one is 0 == Fraction(0) "
        "and refused either way"),
    "dpflow.privacy.conversions.x_cks_delta__mutmut_56": "log_delta > 0 vs >= 0: at 0, min(1, up(exp(0))) is 1 too",
    "dpflow.privacy.conversions.x_cks_delta__mutmut_57": (
        "log_delta >= 1 vs >= 0: for 0 <= log_delta < 1, min(1, up(exp(log_delta))) is 1 too"),
    "dpflow.privacy.conversions.x_cks_delta__mutmut_26": _ORDER_END,
    "dpflow.privacy.conversions.x_cks_delta__mutmut_29": _ORDER_END,
    "dpflow.privacy.conversions.x_zcdp_to_approx_dp__mutmut_34": _ORDER_END,
    "dpflow.privacy.conversions.x_zcdp_to_approx_dp__mutmut_37": _ORDER_END,
    "dpflow.privacy.conversions.x_gaussian_dp_delta__mutmut_41": "q1 > 0 vs >= 0: at q1 = 0 the quotient is 0",
    "dpflow.privacy.conversions.x_gaussian_dp_epsilon__mutmut_18": _DELTA_ONE_GDP,
    "dpflow.privacy.conversions.x_gaussian_dp_epsilon__mutmut_19": _DELTA_ONE_GDP,
    "dpflow.privacy.conversions.x_gaussian_dp_epsilon__mutmut_67": _MID_MOVES,
    "dpflow.privacy.conversions.x_gaussian_dp_epsilon__mutmut_68": _MID_MOVES,
    "dpflow.privacy.conversions.x_gaussian_dp_epsilon__mutmut_69": _MID_MOVES,
    "dpflow.privacy.conversions.x_gaussian_dp_epsilon__mutmut_70": _MID_MOVES,
    "dpflow.privacy.composition.x__top_two_sum__mutmut_11": (
        "sum(top) vs sum(top, Fraction(0)): called with at least one Fraction (the same sum), and Cost's "
        "converter makes an int 0 a Fraction anyway"),
    "dpflow.privacy.composition.x__parallel_pld__mutmut_8": (
        "keeping pieces with no events among the charged ones: an empty piece sorts first, is within every piece, "
        "and composes to nothing, so the chain test, the largest piece and the two largest compose the same"),
    "dpflow.privacy.composition.x__parallel_pld__mutmut_21": _ZIP_SHIFTED,
    "dpflow.privacy.composition.x__parallel_pld__mutmut_24": _ZIP_SHIFTED,
    "dpflow.privacy.composition.x__fsum__mutmut_12": (
        "sum(...) vs sum(..., Fraction(0)): callers sum at least two costs (a non-empty sum of Fractions is the same "
        "Fraction)"),
    "dpflow.privacy.composition.xǁCostǁ_trusted__mutmut_20": (
        "keeping basic_delta when basic_eps is None: every caller passes basic_delta = 0 then (_basic returns "
        "(None, 0); gaussian_zcdp passes the default 0)"),
    "dpflow.privacy.composition.xǁCostǁsequential__mutmut_5": _GROUPING,
    "dpflow.privacy.composition.xǁCostǁsequential__mutmut_6": _GROUPING,
    "dpflow.privacy.composition.xǁCostǁsequential__mutmut_20": (
        "c.scaled(1) vs c for an object met once: scaled(1) has every field of c (test_mutants_composition)"),
    "dpflow.privacy.pld.xǁPldEventsǁparse__mutmut_14": (
        "partition vs rpartition of '(': the head of every text str() writes has one '('; a malformed text is "
        "refused with ValueError either way"),
    "dpflow.privacy.pld.x__event_pld__mutmut_8": _LAPLACE_DEFAULT,
    "dpflow.privacy.pld.x__event_pld__mutmut_9": _LAPLACE_DEFAULT,
    "dpflow.privacy.pld.x__event_pld__mutmut_10": _LAPLACE_DEFAULT,
    "dpflow.privacy.pld.x__event_pld__mutmut_39": "min(delta, 2.0) vs 1.0: to_float_up of a delta < 1 is at most 1",
    "dpflow.privacy.pld.x__randomized_response_power__mutmut_62": _NO_DELTA,
    "dpflow.privacy.pld.x__randomized_response_power__mutmut_65": _NO_DELTA,
    "dpflow.privacy.pld.x__gaussian_pld__mutmut_5": _CONNECT_DOTS,
    "dpflow.privacy.pld.x__gaussian_pld__mutmut_14": _CONNECT_DOTS,
    "dpflow.privacy.pld.x__gaussian_pld__mutmut_9": _GAUSS_DEFAULT,
    "dpflow.privacy.pld.x__gaussian_pld__mutmut_10": _GAUSS_DEFAULT,
    "dpflow.privacy.pld.x__gaussian_pld__mutmut_11": _GAUSS_DEFAULT,
    "dpflow.privacy.pld.x__gaussian_pld__mutmut_12": _GAUSS_DEFAULT,
    "dpflow.privacy.pld.x__gaussian_pld__mutmut_18": "'and' vs 'or' in an assert: the Gaussian loss sets both bounds",
    "dpflow.privacy.pld.x__gaussian_pld__mutmut_44": _CLIP_TOP,
    "dpflow.privacy.pld.x__gaussian_pld__mutmut_54": _CLIP_TOP,
    "dpflow.privacy.pld.x__gaussian_pld_lower__mutmut_29": _TOP_BUCKET,
    "dpflow.privacy.pld.x__gaussian_pld_lower__mutmut_30": _TOP_BUCKET,
    "dpflow.privacy.pld.x__gaussian_pld_lower__mutmut_31": _TOP_BUCKET,
    "dpflow.privacy.pld.x__gaussian_pld_lower__mutmut_32": _TOP_BUCKET,
    "dpflow.privacy.pld.x__gaussian_pld_lower__mutmut_36": _TOP_BUCKET,
    "dpflow.privacy.pld.x__epsilon_of__mutmut_58": (  # numbered 54 until round 11's rerun
        "the infinite-epsilon branch disabled: up(max(inf, 0) + 2 Gamma) is inf too (dp_accounting's "
        "get_epsilon_for_delta returns a finite value or +inf, never NaN)"),
    "dpflow.nodes.base.x_change_bound__mutmut_8": _SYM_MAX_NONE,
    "dpflow.nodes.base.x_change_bound__mutmut_9": _SYM_MAX_NONE,
    "dpflow.nodes.base.x_change_bound__mutmut_10": _SYM_MAX_NONE,
    "dpflow.nodes.base.x_change_bound__mutmut_11": _SYM_MAX_NONE,
    "dpflow.nodes.base.x_change_bound__mutmut_12": _SYM_MAX_NONE,
    "dpflow.nodes.base.x_change_bound__mutmut_21": _SYM_MAX_NONE,
    "dpflow.nodes.base.x_change_bound__mutmut_23": _SYM_MAX_NONE,
    "dpflow.planner.allocate.x__epsilon_lower__mutmut_4": _LOWER_MIN,
    "dpflow.planner.fold.x__fold_steps__mutmut_15": ("children.get(split, None / no default) vs (): a split always "
                                                     "has its pieces as children (split() makes one Piece per piece)"),
    "dpflow.planner.fold.x__fold_steps__mutmut_17": ("children.get(split, None / no default) vs (): a split always "
                                                     "has its pieces as children (split() makes one Piece per piece)"),
    "dpflow.planner.allocate.x__check_budget__mutmut_2": ("ok's first value (True vs None): every branch of the "
                                                          "if/elif/else chain that follows sets ok"),
    "dpflow.planner.allocate.x__check_budget__mutmut_3": ("ok's first value (True vs False): every branch of the "
                                                          "if/elif/else chain that follows sets ok"),
    "dpflow.planner.allocate.x__invocation__mutmut_1": _INVOCATION_MEMO,
    "dpflow.planner.allocate.x__invocation__mutmut_2": _INVOCATION_MEMO,
    "dpflow.planner.allocate.x__invocation__mutmut_3": _INVOCATION_MEMO,
    "dpflow.planner.allocate.x__invocation__mutmut_4": _INVOCATION_MEMO,
    "dpflow.planner.allocate.x__invocation__mutmut_8": _INVOCATION_MEMO,
    "dpflow.planner.allocate.x__invocation__mutmut_9": _INVOCATION_MEMO,
    "dpflow.planner.allocate.x__invocation__mutmut_10": _INVOCATION_MEMO,
    "dpflow.planner.allocate.x__invocation__mutmut_11": _INVOCATION_MEMO,
    "dpflow.planner.allocate.x__invocation__mutmut_20": _INVOCATION_MEMO,
    "dpflow.planner.allocate.x__invocation__mutmut_21": _INVOCATION_MEMO,
    "dpflow.planner.allocate.x__invocation__mutmut_22": _INVOCATION_MEMO,
    "dpflow.planner.allocate.x__invocation__mutmut_25": _INVOCATION_MEMO,
    "dpflow.planner.allocate.x__invocation__mutmut_26": _INVOCATION_MEMO,
    "dpflow.planner.allocate.x__invocation__mutmut_42": _INVOCATION_MEMO,
    "dpflow.planner.allocate.x__invocation__mutmut_43": _INVOCATION_MEMO,
    "dpflow.planner.allocate.x__invocation__mutmut_44": _INVOCATION_MEMO,
    "dpflow.planner.allocate.x__invocation__mutmut_17": _FIXED_ANY_MODE,
    "dpflow.budget.xǁBudgetStoreǁ__init____mutmut_41": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁ_create__mutmut_26": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁ_create__mutmut_27": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁ_connect__mutmut_9": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁ_connect__mutmut_10": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁ_append__mutmut_7": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁ_append__mutmut_8": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁ_append__mutmut_51": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁ_append__mutmut_52": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁ_append__mutmut_54": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁ_append__mutmut_61": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁ_append__mutmut_62": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁopen__mutmut_13": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁopen__mutmut_14": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁopen__mutmut_32": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁopen__mutmut_33": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁ_close__mutmut_42": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁ_close__mutmut_43": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁentries__mutmut_7": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁentries__mutmut_8": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁentries__mutmut_10": _SQL_CASE,
    "dpflow.budget.xǁBudgetStoreǁentries__mutmut_11": _SQL_CASE,
    "dpflow.planner.allocate.x_allocate_budget__mutmut_6": ("folds recomputed although passed: the caller passes "
                                                            "source_folds(ctx, mode) itself (cached in ctx.folds)"),
    "dpflow.planner.allocate.x_allocate_budget__mutmut_34": _SAME_LENGTH,
    "dpflow.planner.allocate.x_allocate_budget__mutmut_37": _SAME_LENGTH,
    "dpflow.planner.allocate.x_allocate_budget__mutmut_38": _SAME_LENGTH,
    "dpflow.planner.allocate.x_allocate_budget__mutmut_39": _CLASS_MEMO,
    "dpflow.planner.allocate.x_allocate_budget__mutmut_40": _CLASS_MEMO,
    "dpflow.planner.allocate.x__basic_allocation__mutmut_32": _MODE_TEXT,
    "dpflow.planner.allocate.x__basic_allocation__mutmut_35": _MODE_TEXT,
    "dpflow.planner.allocate.x__basic_allocation__mutmut_36": _MODE_TEXT,
    "dpflow.planner.fold.x__fold_pairs__mutmut_7": _PAIR_MEMO,
    "dpflow.planner.fold.x__fold_pairs__mutmut_8": _PAIR_MEMO,
    "dpflow.planner.fold.x__fold_pairs__mutmut_9": _PAIR_MEMO,
    "dpflow.planner.fold.x__fold_pairs__mutmut_12": _PAIR_MEMO,
    "dpflow.planner.fold.x__fold_pairs__mutmut_14": _PAIR_MEMO,
    "dpflow.planner.fold.x__top_two_frac__mutmut_4": _SUM_START,
    "dpflow.planner.fold.x__fold_frac__mutmut_19": ("sum(round weights) without the Fraction(0) start: a loop has at "
                                                    "least one round, and a non-empty sum of Fractions is the same"),
    # --- eqv6 (round 6): budget.py store setup, every survivor checked one by one (docs/assurance.md round 6)
    "dpflow.budget.xǁBudgetStoreǁ_create__mutmut_22": _SQLITE_LEGACY,
    "dpflow.budget.xǁBudgetStoreǁ_connect__mutmut_6": _SQLITE_LEGACY,
    "dpflow.budget.xǁBudgetStoreǁ_charge_note__mutmut_6": _ONE_PER_DATASET,
    "dpflow.budget.xǁBudgetStoreǁ_charge_note__mutmut_9": _ONE_PER_DATASET,
    "dpflow.budget.xǁBudgetStoreǁ_charge_note__mutmut_10": _ONE_PER_DATASET,
    # mut7 (round 6): allocate.py, pld_total, source_folds, cost_leaf and _refuse_budget
    "dpflow.planner.allocate.x_pld_total__mutmut_5": _MODE_TEXT,
    "dpflow.planner.allocate.x_pld_total__mutmut_6": _MODE_TEXT,
    "dpflow.planner.allocate.x_pld_total__mutmut_7": _MODE_TEXT,
    "dpflow.planner.allocate.x_pld_total__mutmut_11": _MODE_TEXT,
    "dpflow.planner.allocate.x_pld_total__mutmut_9": _FOLDS_AGAIN,
    "dpflow.planner.allocate.x_pld_total__mutmut_20": _FOLDS_AGAIN,
    "dpflow.planner.allocate.x_pld_total__mutmut_23": _FOLDS_AGAIN,
    "dpflow.planner.allocate.x_pld_total__mutmut_26": _CHOICE_TEXT,
    "dpflow.planner.allocate.x_pld_total__mutmut_30": _CHOICE_TEXT,
    "dpflow.planner.allocate.x_pld_total__mutmut_70": _EMPTY_MAX,
    "dpflow.planner.allocate.x_pld_total__mutmut_72": _EMPTY_MAX,
    "dpflow.planner.allocate.x_pld_total__mutmut_77": _EMPTY_MAX,
    "dpflow.planner.allocate.x_pld_total__mutmut_84": _EMPTY_MAX,
    "dpflow.planner.allocate.x_pld_total__mutmut_86": _EMPTY_MAX,
    "dpflow.planner.allocate.x_pld_total__mutmut_91": _EMPTY_MAX,
    "dpflow.planner.allocate.x_source_folds__mutmut_15": _FIXED_ANY_MODE,
    "dpflow.planner.allocate.x_source_folds__mutmut_30": ("per_round=None vs False: fold_frac reads it only by its "
                                                          "truth value"),
    "dpflow.planner.allocate.x_cost_leaf__mutmut_26": _LEAF_MEMO,
    "dpflow.planner.allocate.x_cost_leaf__mutmut_27": _LEAF_MEMO,
    "dpflow.planner.allocate.x_cost_leaf__mutmut_28": _LEAF_MEMO,
    "dpflow.planner.allocate.x_cost_leaf__mutmut_31": _LEAF_MEMO,
    "dpflow.planner.allocate.x_cost_leaf__mutmut_32": _LEAF_MEMO,
    "dpflow.planner.allocate.x_cost_leaf__mutmut_34": _LEAF_MEMO,
    "dpflow.planner.allocate.x_cost_leaf__mutmut_40": _LEAF_MEMO,
    "dpflow.planner.allocate.x_cost_leaf__mutmut_41": _LEAF_MEMO,
    "dpflow.planner.allocate.x_cost_leaf__mutmut_42": _LEAF_MEMO,
    "dpflow.planner.allocate.x_cost_leaf__mutmut_45": _LEAF_MEMO,
    "dpflow.planner.allocate.x_cost_leaf__mutmut_46": _LEAF_MEMO,
    "dpflow.planner.allocate.x_cost_leaf__mutmut_48": _LEAF_MEMO,
    "dpflow.planner.allocate.x__refuse_budget__mutmut_13": _WORST_START,
    "dpflow.planner.allocate.x__refuse_budget__mutmut_16": _WORST_START,
    # ---- round 6, mut6: nodes/fixedpoint.py, nodes/floaterr.py, nodes/mechanisms.py
    "dpflow.nodes.fixedpoint.x_quantise__mutmut_37": ("nan_to_num(copy=None) vs copy=False: t is a float64 ndarray, "
                                                     "which np.array(t, copy=None) does not copy: written in place"),
    "dpflow.nodes.fixedpoint.x_quantise__mutmut_41": _NAN_DEFAULT,
    **{f"dpflow.nodes.fixedpoint.{name}": (
        "an int64 sum (or reduceat) without dtype=np.int64: numpy adds an int64 array in int64 (the platform "
        "integer on 64-bit Linux, and on Windows since numpy 2)") for name in (
        "x_exact_total__mutmut_12", "x_exact_total__mutmut_14", "x_exact_total__mutmut_19", "x_exact_total__mutmut_21",
        "x_sum_units__mutmut_21", "x_sum_units__mutmut_25")},
    "dpflow.nodes.fixedpoint.x_sum_units__mutmut_24": "reduceat without axis=0: numpy's default axis is 0",
    "dpflow.nodes.fixedpoint.x_sum_units__mutmut_8": (
        "the empty test on shape[1] (d = 0) vs shape[0] (n = 0): reduceat over an empty index list gives (0, d) "
        "parts, whose exact_total is d zeros, and d = 0 gives an empty result on both paths"),
    "dpflow.nodes.fixedpoint.x_gram_units__mutmut_23": ("max(k, 2) blocks vs max(k, 1): the extra block is zero rows, "
                                                       "whose products add 0"),
    "dpflow.nodes.fixedpoint.x_gram_units__mutmut_33": ("reshape(-2, ...) vs (-1, ...): numpy infers a negative "
                                                       "dimension, whichever negative it is"),
    "dpflow.nodes.fixedpoint.x_gram_units__mutmut_42": _EINSUM_CASE,
    **{f"dpflow.nodes.fixedpoint.xǁFixedPointǁas_float__mutmut_{i}": (
        "np.array of Python floats without dtype=float: float64 (the empty list too)") for i in (4, 6)},
    **{f"dpflow.nodes.fixedpoint.xǁFixedPointǁ__array____mutmut_{i}": (
        "FixedPoint.__array__'s dtype and copy handling: np.asarray casts what __array__ returns to the dtype it "
        "asked for, and as_float's array is a fresh float64 array, so every variant gives the same values")
       for i in (2, 3, 4, 5, 6, 8, 9)},
    "dpflow.nodes.fixedpoint.x_to_float__mutmut_18": ("k >= 0 vs k > 0 on overflow: k = 0 never overflows "
                                                     "(ldexp(0.0, e) is 0.0)"),
    "dpflow.nodes.fixedpoint.x_lattice_units__mutmut_10": _NAN_DEFAULT,
    "dpflow.nodes.floaterr.xǁFloatErrorǁ_fixed_bound__mutmut_29": ("widen=None vs widen=False: both falsy, read only "
                                                                  "by `if`"),
    **{f"dpflow.nodes.mechanisms.{name}": _INT_STAT for name in (
        "xǁPeelǁevaluate__mutmut_8", "xǁPeelǁevaluate__mutmut_10", "xǁPeelǁ_lattice__mutmut_3",
        "xǁPeelǁ_lattice__mutmut_5",
        "xǁGaussianMechǁevaluate__mutmut_6", "xǁGaussianMechǁevaluate__mutmut_8", "x__lattice_noised__mutmut_60",
        "x__lattice_noised__mutmut_62")},
    **{f"dpflow.nodes.mechanisms.x__lattice_release__mutmut_{i}": _STRICT for i in (57, 60, 61)},
    "dpflow.nodes.mechanisms.x__lattice_release__mutmut_65": _SQUARE,
    "dpflow.nodes.mechanisms.x__lattice_release__mutmut_9": (
        "reshape(None) vs reshape(shape): lattice_units returns an array of the value's own shape (rint of it, or a "
        "FixedPoint's units, whose shape np.shape reads), and reshape(None) returns that shape unchanged"),
    "dpflow.nodes.mechanisms.x__lattice_release__mutmut_38": "astype(None) vs astype(float): both float64",
    **{f"dpflow.nodes.mechanisms.x__lattice_release__mutmut_{i}": (
        "the fast path's bound at <= 2^62 instead of < 2^62 (on |k| or on |z|): with the other bound strict, "
        "|k + z| < 2^63 still, so the int64 sum is exact") for i in (23, 32)},
    **{f"dpflow.nodes.mechanisms.x__lattice_release__mutmut_{i}": (
        "the fast path taken for fewer entries (bound 2 * 62): the exact path rounds the same integer k + z to a float "
        "once (to_float, no truncation below 2^63) and scales it by 2^e with one correct rounding, as the fast "
        "path's float product does (+-inf on overflow in both: to_float catches ldexp's OverflowError)")
       for i in (24, 33)},
    **{f"dpflow.nodes.mechanisms.x_unit_lattice__mutmut_{i}": (
        "the linf path's l1 flag None or True vs False: it calibrates one entry, where step * 1 = step * sqrt(1), "
        "and the slack is passed explicitly (s2)") for i in (8, 18)},
    **{f"dpflow.nodes.mechanisms.x__lattice_noised__mutmut_{i}": (
        "an l2 unit text other than 'l2' ('XXl2XX', 'L2'): unit_lattice reads its unit only through == 'linf' and "
        "== 'l1', so any other text is l2") for i in (47, 48)},
    "dpflow.nodes.mechanisms.x__lattice_noised__mutmut_51": (
        "scale_of(delta - slack) vs (delta + slack) when no lattice calibration exists: the scale functions never "
        "return inf for a finite input (they raise), so this branch has scale_of(delta + slack) = 0, i.e. "
        "delta = slack = 0, where both arguments are 0"),
    **{f"dpflow.nodes.mechanisms.x__lattice_noised__mutmut_{i}": (
        "unreachable: lattice_calibration returns None for a scale of 0 (handled just above) or a non-finite one, "
        "and laplace_scale and gaussian_sigma_for_zcdp check their result in exact arithmetic (measures.exact "
        "refuses inf): for the finite delta + slack here they return a finite scale or raise")
       for i in (63, 64, 65, 66, 67, 68)},
    **{f"dpflow.nodes.mechanisms.xǁGaussianMechǁ{name}": (
        "GaussianMech's noise_scale with mode None: it compares its mode with 'pure' only (None acts as zCDP), and a "
        "Gaussian never runs in pure mode (its cost refuses a pure budget at planning)")
       for name in ("noise_text__mutmut_10", "evaluate__mutmut_51", "evaluate__mutmut_67")},
    "dpflow.nodes.mechanisms.xǁGaussianMechǁevaluate__mutmut_32": ("l1=None vs False for _lattice_noised: read only "
                                                                  "by `if l1` / `... if l1 else ...`"),
    **{f"dpflow.nodes.mechanisms.xǁGaussianMechǁone_sided_cost__mutmut_{i}": (
        "share_at_ratio's mode None, 'XXzcdpXX' or 'ZCDP': it compares the mode with 'pure' only, so every other "
        "text is the zCDP rule ratio^2 rho") for i in (7, 11, 12)},
    **{f"dpflow.nodes.mechanisms.{name}": (
        "`l is not None or l.is_const` in noise_text: noise_text runs only after check_input, which refuses a None "
        "sensitivity, so l is not None and `or` and `and` agree") for name in (
        "xǁGaussianMechǁnoise_text__mutmut_4", "xǁLaplaceMechǁnoise_text__mutmut_9")},
    **{f"dpflow.nodes.mechanisms.{name}": "Inferred(...) without its derivation: the default is ''" for name in (
        "xǁGaussianMechǁinfer__mutmut_9", "xǁLaplaceMechǁinfer__mutmut_9", "xǁPeelǁinfer__mutmut_31")},
    "dpflow.nodes.mechanisms.xǁPeelǁevaluate__mutmut_18": ("takes_lattice(stat, None): Peel's does not read the "
                                                           "allocation"),
    "dpflow.nodes.mechanisms.xǁPeelǁ_lattice__mutmut_18": (
        "unit_lattice also called for an infinite slack: scale_of(lambda + inf) is inf, so it returns None too, and "
        "the branch that follows tests the slack's finiteness itself"),
    "dpflow.nodes.mechanisms.xǁPeelǁ_lattice__mutmut_22": ("unit_lattice's entries None for the linf unit: that path "
                                                           "calibrates one entry and does not read entries"),
    "dpflow.nodes.mechanisms.x__lattice_release__mutmut_17": (
        "the fast path for draws that are not int64 (object arrays of Python ints) instead of int64 ones: for object "
        "draws below 2^62 the sum is in exact Python ints and astype(float) rounds it once, as to_float does below "
        "2^64; int64 draws then take the exact path, which gives the same floats (see mutants 24, 33)"),
    "dpflow.nodes.mechanisms.xǁPeelǁ_lattice__mutmut_119": (
        "the release draws left int64 instead of object: an object array plus an int64 array is an object array of "
        "exact Python ints (numpy adds elementwise with Python semantics), the same sums"),
    "dpflow.nodes.mechanisms.xǁPeelǁ_lattice__mutmut_59": ("np.abs(v).astype(None) vs astype(object) at sensitivity "
                                                           "0: v is float64, so the scores are the same floats"),
    # lead (round 7): modes.py
    **{f"dpflow.planner.modes.x_mode_and_total__mutmut_{n}": _FIXED_ANY_MODE for n in (80, 81, 82)},
    **{f"dpflow.planner.modes.x__basic_mode__mutmut_{n}": _FIXED_ANY_MODE for n in (19, 20, 21, 23, 24, 25)},
    "dpflow.planner.modes.x__basic_mode__mutmut_18": _FIXED_BOTH,
    **{f"dpflow.planner.modes.x_own_delta__mutmut_{n}": _MODE_TEXT for n in (2, 7, 8)},
    "dpflow.planner.modes.x_own_delta__mutmut_6": _UNIT_SHARE,
    "dpflow.planner.modes.x__noise_variance__mutmut_49": _TRUTH,
    **{f"dpflow.planner.allocate.x_own_delta0__mutmut_{n}": _NAME_UNREAD for n in (6, 21)},
    **{f"dpflow.planner.allocate.x_own_delta0__mutmut_{n}": _CHOICE_TEXT for n in (14, 18)},
    **{f"dpflow.planner.allocate.x__basic_candidates__mutmut_{n}": _MODE_TEXT
       for n in (22, 29, 30, 41, 44, 45, 60, 63, 64)},
    "dpflow.nodes.mechanisms.xǁPeelǁnoise_scale__mutmut_2": ("sensitivity > 0 vs >= 0 for the early 0.0: at "
                                                             "sensitivity 0 the exact round-up of 0 / u is 0.0 too"),
    # lead (round 7): stability.py and sparse_vector.py
    **{f"dpflow.nodes.stability.{f}__mutmut_{n}": _ASTYPE for f, n in (
        ("xǁBinCountsǁkeys", 28), ("xǁBinCountsǁevaluate", 11), ("xǁStabilityHistogramǁevaluate", 23),
        ("xǁGaussianStabilityHistogramǁevaluate", 17))},
    **{f"dpflow.nodes.stability.xǁ{c}ǁinfer__mutmut_{n}": _MECH_DERIVATION
       for c in ("StabilityHistogram", "GaussianStabilityHistogram") for n in (13, 15, 16)},
    "dpflow.nodes.stability.xǁStabilityHistogramǁcheck_input__mutmut_3": _TRUTH,
    **{f"dpflow.nodes.stability.xǁStabilityHistogramǁ{f}__mutmut_{n}": _MODE_TEXT
       for f, n in (("cost", 10), ("noise_text", 3), ("evaluate", 9))},
    "dpflow.nodes.stability.xǁGaussianStabilityHistogramǁnoise_text__mutmut_1": _ASSERT,
    "dpflow.nodes.stability.xǁGaussianStabilityHistogramǁevaluate__mutmut_3": _ASSERT,
    **{f"dpflow.nodes.sparse_vector.xǁAboveThresholdǁinfer__mutmut_{n}": _MECH_DERIVATION for n in (48, 50)},
    **{f"dpflow.nodes.sparse_vector.xǁAboveThresholdǁevaluate__mutmut_{n}": _INT_STAT for n in (6, 8)},
    # lead (round 8): expmech.py
    **{f"dpflow.nodes.expmech.x_report_noisy_max__mutmut_{n}": _LW_DTYPE for n in (3, 5)},
    **{f"dpflow.nodes.expmech.xǁDistanceScoresǁexact__mutmut_{n}": _SAME_INDEX for n in (12, 15, 16)},
    **{f"dpflow.nodes.expmech.x__decimal_bounds__mutmut_{n}": _SAME_INDEX for n in (29, 32, 33)},
    **{f"dpflow.nodes.expmech.x__decimal_bounds__mutmut_{n}": (
        "the round-to-nearest context left to decimal's default rounding, which is ROUND_HALF_EVEN") for n in (11, 12)},
    **{f"dpflow.nodes.expmech.{f}__mutmut_{n}": _ASTYPE for f, n in (
        ("x__float_bounds", 22), ("x_float_phase_miss", 30), ("x_float_phase_miss", 32))},
    **{f"dpflow.nodes.expmech.x__float_bounds__mutmut_{n}": _TINY_LO for n in (37, 38)},
    "dpflow.nodes.expmech.x__decide_fixed__mutmut_26": "searchsorted's side='left' left out: it is numpy's default",
    "dpflow.nodes.expmech.x__decide_fixed__mutmut_30": _PAST_LAST,
    "dpflow.nodes.expmech.x__decide__mutmut_31": _PAST_LAST,
    **{f"dpflow.nodes.expmech.x_float_phase_miss__mutmut_{n}": _MULT_DTYPE for n in (3, 5)},
    "dpflow.nodes.expmech.x_float_phase_miss__mutmut_17": _NONFINITE_X,
    "dpflow.nodes.expmech.x_exact_choice__mutmut_23": _NONFINITE_X,
    # lead (round 8): quantile.py
    **{f"dpflow.nodes.quantile.{f}__mutmut_{n}": _FLOAT_IN for f, ns in (
        ("xǁMagnitudesǁevaluate", (3, 5)), ("xǁOrderStatisticsǁevaluate", (17, 19)),
        ("x_lattice_groups", (49, 51)), ("x_quantile_log_weights", (9, 11)), ("xǁQuantileǁevaluate", (6, 8)),
        ("xǁModeBinUpperǁevaluate", (8, 10))) for n in ns},
    "dpflow.nodes.quantile.xǁMagnitudesǁevaluate__mutmut_41": _NEG_RESHAPE,
    "dpflow.nodes.quantile.xǁModeBinUpperǁevaluate__mutmut_13": _NEG_RESHAPE,
    "dpflow.nodes.quantile.xǁModeBinUpperǁevaluate__mutmut_6": ("reshape(None) keeps the released vector's shape, "
                                                                "and argmax without an axis reads it flattened"),
    "dpflow.nodes.quantile.xǁQuantileǁinfer__mutmut_15": _MECH_DERIVATION,
    "dpflow.nodes.quantile.xǁQuantileǁevaluate__mutmut_57": _EMPTY_GAPS,
    "dpflow.nodes.quantile.xǁScaleShiftǁevaluate__mutmut_8": "x >= 0 vs x > 0: at x = 0 both give scale * 0 + shift",
    # lead (round 8): dyadic.py
    **{f"dpflow.nodes.dyadic.x__bit_length__mutmut_{n}": _BIT_LENGTH for n in (2, 16, 17)},
    **{f"dpflow.nodes.dyadic.xǁDyadicLevelǁof__mutmut_{n}": _EMPTY_DTYPE for n in (5, 7, 11, 13)},
    **{f"dpflow.nodes.dyadic.xǁDyadicLevelǁof__mutmut_{n}": _PATH_CHOICE for n in (16, 17, 18, 19, 20, 43, 44)},
    **{f"dpflow.nodes.dyadic.xǁDyadicLevelǁof__mutmut_{n}": _INT_ARRAY for n in (40, 42)},
    "dpflow.nodes.dyadic.xǁDyadicLevelǁof__mutmut_56": ("the ranks sorted as float64 rather than uint16: a stable "
                                                        "argsort of the same values gives the same order"),
    "dpflow.nodes.dyadic.xǁDyadicLevelǁof__mutmut_58": _SORT_CASE,
    **{f"dpflow.nodes.dyadic.xǁDyadicTableǁbuild__mutmut_{n}": _INT_ARRAY for n in (3, 5)},
    **{f"dpflow.nodes.dyadic.xǁDyadicTableǁbuild__mutmut_{n}": _SORT_MORE for n in (6, 7, 10, 11, 13)},
    **{f"dpflow.nodes.dyadic.xǁDyadicTableǁbuild__mutmut_{n}": _FEW_POINTS
       for n in (29, 35, 38, 40, 41, 44, 51, 52, 55, 57, 59)},
    **{f"dpflow.nodes.dyadic.xǁDyadicTableǁbuild__mutmut_{n}": _EMPTY_DTYPE for n in (68, 70)},
    **{f"dpflow.nodes.dyadic.xǁDyadicTableǁbuild__mutmut_{n}": _PATH_CHOICE for n in (72, 73, 74, 75, 76)},
    **{f"dpflow.nodes.dyadic.xǁDyadicTableǁcounts_at__mutmut_{n}": _INT_ARRAY for n in (3, 5)},
    "dpflow.nodes.dyadic.x__groups__mutmut_7": ("P[1] < top vs P[-1] < top: with the last knot at the top, a second "
                                                "top knot adds an empty piece (hi < lo at every level) and the top "
                                                "2^L - 1 straddles no dyadic interval"),
    **{f"dpflow.nodes.dyadic.x__groups__mutmut_{n}": _INT_ARRAY
       for n in (24, 137, 139, 145, 147, 167, 224, 227, 229, 245, 247, 252, 283)},
    "dpflow.nodes.dyadic.x__groups__mutmut_163": _ZERO_SIZE,
    **{f"dpflow.nodes.dyadic.xǁDyadicCountsǁinfer__mutmut_{n}": _REPLACE_ONLY for n in (35, 46, 59, 66)},
    **{f"dpflow.nodes.dyadic.xǁDyadicExpMechǁinfer__mutmut_{n}": _MECH_DERIVATION for n in (37, 39)},
    **{f"dpflow.nodes.dyadic.xǁDyadicExpMechǁevaluate__mutmut_{n}": _INT_ARRAY for n in (54, 56)},
    # lead (round 8): regression.py
    "dpflow.nodes.regression.x_project_l1__mutmut_3": _ON_SPHERE,
    "dpflow.nodes.regression.x_project_l1__mutmut_22": _DUCHI_TIE,
    **{f"dpflow.nodes.regression.{f}__mutmut_{n}": _FLOAT_IN for f, ns in (
        ("xǁGradientStepǁevaluate", (14, 16)),
        ("xǁProjectCoefǁevaluate", (10, 12))) for n in ns},
    "dpflow.nodes.regression.x_project_coef__mutmut_5": _NEG_RESHAPE,
    "dpflow.nodes.regression.xǁGradientStepǁevaluate__mutmut_19": _NEG_RESHAPE,
    "dpflow.nodes.regression.xǁGradientStepǁevaluate__mutmut_2": _FLOAT_ROWS_CTX,
    "dpflow.nodes.regression.xǁGradientStepǁevaluate__mutmut_74": _CLIPPED_FINITE,
    "dpflow.nodes.regression.x_project_coef__mutmut_8": _KEEP_ALL,
    "dpflow.nodes.regression.x_project_coef__mutmut_17": _SORT_CASE,
    **{f"dpflow.nodes.regression.x_project_coef__mutmut_{n}": _MASK_FLOAT for n in (20, 22)},
    "dpflow.nodes.regression.x_project_coef__mutmut_43": _SCALE_ONE,
    "dpflow.nodes.regression.xǁRidgeSolveǁevaluate__mutmut_28": "lstsq's rcond=None left out: None is its default",
    # lead (round 9)
    "dpflow.nodes.regression.xǁRidgeSolveǁevaluate__mutmut_9": _SQUARE_CHECKED,
    "dpflow.nodes.regression.xǁRidgeSolveǁout_shape__mutmut_7": _SQUARE_CHECKED,
    "dpflow.planner.allocate.x__basic_candidates__mutmut_68": _BASIC_STRICT,
    **{f"dpflow.nodes.transforms.x__scalar__mutmut_{n}": _SCALAR_FLOAT for n in (4, 6)},
    **{f"dpflow.nodes.transforms.x_project_ball__mutmut_{n}": _EINSUM_CASE for n in (18, 82)},
    "dpflow.nodes.transforms.x__into_ball__mutmut_18": _BAD_NORM,
    "dpflow.nodes.transforms.x__into_ball__mutmut_44": _SCALE_ONE,
    **{f"dpflow.nodes.transforms.xǁPreconditionǁevaluate__mutmut_{n}": _INT_MATRIX for n in (9, 11)},
    **{f"dpflow.nodes.transforms.xǁPartitionByBallǁevaluate__mutmut_{n}": _PIECE_DTYPE for n in (3, 5)},
    "dpflow.nodes.transforms.xǁColumnsǁindices__mutmut_25": _KEY_SENTINEL,
    "dpflow.nodes.transforms.xǁColumnsǁevaluate__mutmut_7": _PLANNED_KEYS,
    "dpflow.nodes.transforms.xǁSourceǁchecked__mutmut_2": _KIND_CHARS,
    "dpflow.nodes.transforms.xǁSourceǁchecked__mutmut_36": _NEG_RESHAPE,
    "dpflow.nodes.transforms.xǁSourceǁinfer__mutmut_113": _PRIVATE_N,
    # 21 and 22 were 14 and 15 before Source.policy called into_domain (renumbered by round 11's rerun)
    **{f"dpflow.nodes.transforms.xǁSourceǁpolicy__mutmut_{n}": _ASTYPE for n in (7, 21)},
    "dpflow.nodes.transforms.xǁSourceǁpolicy__mutmut_22": _COPY_NONE,
    **{f"dpflow.nodes.pca.xǁTopEigenvectorsǁout_shape__mutmut_{n}": _SQUARE_CHECKED for n in (6, 11)},
    "dpflow.nodes.terrific.x__finite_rows__mutmut_8": _COPY_SAME,
    "dpflow.nodes.terrific.x__finite_rows__mutmut_10": _COPY_SAME,
    "dpflow.nodes.terrific.x__pairwise_counts__mutmut_6": _INT_COUNTS,
    "dpflow.nodes.terrific.x__pairwise_counts__mutmut_8": _INT_COUNTS,
    "dpflow.nodes.terrific.x__pairwise_counts__mutmut_11": _INT_COUNTS,
    "dpflow.nodes.terrific.x__pairwise_counts__mutmut_13": _INT_COUNTS,
    "dpflow.nodes.terrific.x__pairwise_counts__mutmut_15": _ONE_ROW,
    "dpflow.nodes.terrific.x__pairwise_counts__mutmut_21": _GRID_TIES,
    "dpflow.nodes.terrific.x__pairwise_counts__mutmut_23": _GRID_TIES,
    "dpflow.nodes.terrific.x__pairwise_counts__mutmut_25": _SORT_CASE,
    "dpflow.nodes.terrific.x__pairwise_counts__mutmut_43": _BLOCKS,
    "dpflow.nodes.terrific.x__pairwise_counts__mutmut_49": _BLOCKS,
    "dpflow.nodes.terrific.x__pairwise_counts__mutmut_80": _DEFAULT_SIDE,
    "dpflow.nodes.terrific.x_terrific_sums__mutmut_4": _FLOAT_IN,
    "dpflow.nodes.terrific.x_terrific_sums__mutmut_6": _FLOAT_IN,
    "dpflow.nodes.terrific.x_terrific_sums__mutmut_9": _FLOAT_IN,
    "dpflow.nodes.terrific.x_terrific_sums__mutmut_11": _FLOAT_IN,
    "dpflow.nodes.terrific.x_terrific_sums__mutmut_49": _FLOAT_TOTAL,
    "dpflow.nodes.terrific.x__radii__mutmut_17": _ZIP_STRICT,
    "dpflow.nodes.terrific.x__radii__mutmut_20": _ZIP_STRICT,
    "dpflow.nodes.terrific.xǁTerrificScoresǁevaluate__mutmut_1": _ASTYPE,
    "dpflow.nodes.terrific.xǁTerrificScoresǁevaluate__mutmut_13": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁTerrificScoresǁevaluate__mutmut_15": _FLOAT_IN,
    "dpflow.nodes.terrific.x_cell_coordinates__mutmut_9": _FLOAT_IN,
    "dpflow.nodes.terrific.x_cell_coordinates__mutmut_11": _FLOAT_IN,
    "dpflow.nodes.terrific.x_cell_keys__mutmut_45": _DEFAULT_INT64,
    "dpflow.nodes.terrific.x_cell_keys__mutmut_53": _INT_WRAP,
    "dpflow.nodes.terrific.x_cell_keys__mutmut_58": _UINT_SUM,
    "dpflow.nodes.terrific.x_cell_keys__mutmut_60": _UINT_SUM,
    "dpflow.nodes.terrific.xǁGridMaxCountsǁevaluate__mutmut_4": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁGridMaxCountsǁevaluate__mutmut_6": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁCellCountsǁevaluate__mutmut_4": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁCellCountsǁevaluate__mutmut_6": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁCellCountsǁevaluate__mutmut_61": _ASTYPE,
    "dpflow.nodes.terrific.xǁCellBallǁevaluate__mutmut_33": _RESHAPE_NONE,
    "dpflow.nodes.terrific.xǁCellBallǁevaluate__mutmut_35": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁCellBallǁevaluate__mutmut_37": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁCellBallǁevaluate__mutmut_40": _NEG_RESHAPE,
    "dpflow.nodes.terrific.xǁBallMeanǁevaluate__mutmut_9": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁBallMeanǁevaluate__mutmut_11": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁBallMeanǁevaluate__mutmut_14": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁBallMeanǁevaluate__mutmut_16": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁShellCountsǁevaluate__mutmut_3": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁShellCountsǁevaluate__mutmut_5": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁShellCountsǁevaluate__mutmut_8": _RESHAPE_NONE,
    "dpflow.nodes.terrific.xǁShellCountsǁevaluate__mutmut_10": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁShellCountsǁevaluate__mutmut_12": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁShellCountsǁevaluate__mutmut_15": _NEG_RESHAPE,
    "dpflow.nodes.terrific.xǁShellCountsǁevaluate__mutmut_30": _SHORTCUT,
    "dpflow.nodes.terrific.xǁTerrificDecisionǁevaluate__mutmut_2": _RESHAPE_NONE,
    "dpflow.nodes.terrific.xǁTerrificDecisionǁevaluate__mutmut_4": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁTerrificDecisionǁevaluate__mutmut_6": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁTerrificDecisionǁevaluate__mutmut_9": _NEG_RESHAPE,
    "dpflow.nodes.terrific.xǁTerrificDecisionǁevaluate__mutmut_14": _RESHAPE_NONE,
    "dpflow.nodes.terrific.xǁTerrificDecisionǁevaluate__mutmut_16": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁTerrificDecisionǁevaluate__mutmut_18": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁTerrificDecisionǁevaluate__mutmut_21": _NEG_RESHAPE,
    "dpflow.nodes.terrific.xǁBallCountsǁevaluate__mutmut_3": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁBallCountsǁevaluate__mutmut_5": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁBallCountsǁevaluate__mutmut_8": _RESHAPE_NONE,
    "dpflow.nodes.terrific.xǁBallCountsǁevaluate__mutmut_10": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁBallCountsǁevaluate__mutmut_12": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁBallCountsǁevaluate__mutmut_15": _NEG_RESHAPE,
    "dpflow.nodes.terrific.xǁBallCountsǁevaluate__mutmut_16": _SHORTCUT,
    "dpflow.nodes.terrific.xǁBallCountsǁevaluate__mutmut_17": _SHORTCUT,
    "dpflow.nodes.terrific.xǁBallCountsǁevaluate__mutmut_43": _ASTYPE,
    "dpflow.nodes.terrific.xǁPartitionByProjectedBallǁevaluate__mutmut_3": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁPartitionByProjectedBallǁevaluate__mutmut_5": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁPartitionByProjectedBallǁevaluate__mutmut_9": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁPartitionByProjectedBallǁevaluate__mutmut_11": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁPartitionByProjectedBallǁevaluate__mutmut_14": _RESHAPE_NONE,
    "dpflow.nodes.terrific.xǁPartitionByProjectedBallǁevaluate__mutmut_16": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁPartitionByProjectedBallǁevaluate__mutmut_18": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁPartitionByProjectedBallǁevaluate__mutmut_21": _NEG_RESHAPE,
    "dpflow.nodes.terrific.xǁPartitionByProjectedBallǁevaluate__mutmut_23": _RESHAPE_NONE,
    "dpflow.nodes.terrific.xǁPartitionByProjectedBallǁevaluate__mutmut_25": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁPartitionByProjectedBallǁevaluate__mutmut_27": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁPartitionByProjectedBallǁevaluate__mutmut_30": _NEG_RESHAPE,
    "dpflow.nodes.terrific.xǁGateBallǁevaluate__mutmut_11": _FLOAT_IN,
    "dpflow.nodes.terrific.xǁGateBallǁevaluate__mutmut_13": _FLOAT_IN,
    "dpflow.nodes.tuples.x_tuple_points__mutmut_3": _FLOAT_IN,
    "dpflow.nodes.tuples.x_tuple_points__mutmut_5": _FLOAT_IN,
    "dpflow.nodes.tuples.x_level_grid__mutmut_7": _FLOAT_IN,
    "dpflow.nodes.tuples.x_level_grid__mutmut_9": _FLOAT_IN,
    "dpflow.nodes.tuples.x_group_levels__mutmut_42": _LEVEL_CAST,
    "dpflow.nodes.tuples.x_tuple_keys__mutmut_15": _FLOAT_IN,
    "dpflow.nodes.tuples.x_tuple_keys__mutmut_17": _FLOAT_IN,
    "dpflow.nodes.tuples.x_group_cell_keys__mutmut_56": _LAST_AXIS,
    "dpflow.nodes.tuples.xǁTupleProjectǁevaluate__mutmut_5": _RESHAPE_NONE,
    "dpflow.nodes.tuples.xǁTupleProjectǁevaluate__mutmut_9": _NEG_RESHAPE,
    "dpflow.nodes.tuples.xǁTupleProjectǁevaluate__mutmut_16": _FLOAT_IN,
    "dpflow.nodes.tuples.xǁTupleProjectǁevaluate__mutmut_18": _FLOAT_IN,
    "dpflow.nodes.tuples.xǁTupleNearestǁevaluate__mutmut_7": _FLOAT_IN,
    "dpflow.nodes.tuples.xǁTupleNearestǁevaluate__mutmut_9": _FLOAT_IN,
    "dpflow.nodes.tuples.xǁTupleNearestǁevaluate__mutmut_17": _FLOAT_IN,
    "dpflow.nodes.tuples.xǁTupleNearestǁevaluate__mutmut_19": _FLOAT_IN,
    "dpflow.nodes.tuples.xǁTupleNearestǁevaluate__mutmut_22": _NEG_RESHAPE,
    "dpflow.nodes.tuples.xǁTupleCellCountsǁinfer__mutmut_9": _WHOLE_FLOAT,
    "dpflow.nodes.tuples.xǁTupleCellCountsǁevaluate__mutmut_7": _FLOAT_IN,
    "dpflow.nodes.tuples.xǁTupleCellCountsǁevaluate__mutmut_9": _FLOAT_IN,
    "dpflow.nodes.tuples.xǁTupleCellCountsǁevaluate__mutmut_27": _ASTYPE,
    "dpflow.nodes.tuples.x_cell_centres__mutmut_9": _FLOAT_IN,
    "dpflow.nodes.tuples.x_cell_centres__mutmut_11": _FLOAT_IN,
    "dpflow.nodes.tuples.x_cell_centres__mutmut_18": _FLOAT_IN,
    "dpflow.nodes.tuples.x_cell_centres__mutmut_20": _FLOAT_IN,
    "dpflow.nodes.tuples.x_merged_cells__mutmut_9": _SORT_CASE,
    "dpflow.nodes.tuples.xǁTupleCentersǁevaluate__mutmut_11": _FLOAT_IN,
    "dpflow.nodes.tuples.xǁTupleCentersǁevaluate__mutmut_13": _FLOAT_IN,
    "dpflow.nodes.tuples.xǁTupleCentersǁevaluate__mutmut_16": _NEG_RESHAPE,
    "dpflow.nodes.tuples.xǁTupleCentersǁevaluate__mutmut_22": _RESHAPE_NONE,
    "dpflow.nodes.tuples.xǁTupleCentersǁevaluate__mutmut_24": _FLOAT_IN,
    "dpflow.nodes.tuples.xǁTupleCentersǁevaluate__mutmut_26": _FLOAT_IN,
    "dpflow.nodes.tuples.xǁTupleCentersǁevaluate__mutmut_29": _NEG_RESHAPE,
    "dpflow.nodes.tuples.xǁTupleCentersǁevaluate__mutmut_66": _FLOAT_IN,
    "dpflow.nodes.tuples.xǁTupleCentersǁevaluate__mutmut_68": _FLOAT_IN,
    "dpflow.nodes.tuples.xǁTupleCentersǁevaluate__mutmut_73": _LIFT_PAIR,
    "dpflow.nodes.tuples.xǁPartitionByNearestǁevaluate__mutmut_3": _FLOAT_IN,
    "dpflow.nodes.tuples.xǁPartitionByNearestǁevaluate__mutmut_5": _FLOAT_IN,
    "dpflow.nodes.tuples.xǁPartitionByNearestǁevaluate__mutmut_13": _FLOAT_IN,
    "dpflow.nodes.tuples.xǁPartitionByNearestǁevaluate__mutmut_15": _FLOAT_IN,
    "dpflow.nodes.tuples.xǁPartitionByNearestǁevaluate__mutmut_18": _NEG_RESHAPE,
    **{f"dpflow.nodes.queries.x_centred_rows__mutmut_{n}": _FLOAT_IN for n in (9, 11)},
    **{f"dpflow.nodes.queries.xǁHistogramǁevaluate__mutmut_{n}": _FLOAT_IN for n in (13, 15)},
    **{f"dpflow.nodes.product.xǁTruncatedBinaryMeanǁevaluate__mutmut_{n}": _FLOAT_IN
       for n in (11, 13, 25, 27, 54, 56)},
    **{f"dpflow.nodes.product.xǁTruncatedBinaryMeanǁevaluate__mutmut_{n}": _RESHAPE_NONE for n in (9, 23)},
    **{f"dpflow.nodes.product.xǁTruncatedBinaryMeanǁevaluate__mutmut_{n}": _NEG_RESHAPE for n in (16, 30)},
    "dpflow.nodes.product.xǁTruncatedBinaryMeanǁevaluate__mutmut_52": _NAN_DEFAULT,
    # lead (round 10): the released-scalar read moved to base.released_scalar (the entries above renumbered)
    "dpflow.nodes.base.x_released_scalar__mutmut_8": _NEG_RESHAPE,
    # lead (round 10): ordinal.py
    **{f"dpflow.nodes.ordinal.{f}__mutmut_{n}": _NEG_RESHAPE for f, ns in (
        ("x_add_knots", (7, 19)), ("x_first_column", (8,)), ("xǁIntervalCountsǁevaluate", (6,))) for n in ns},
    **{f"dpflow.nodes.ordinal.{f}__mutmut_{n}": _NAN_DEFAULT for f, n in (("x_add_knots", 12), ("x_cdf_knots", 13))},
    **{f"dpflow.nodes.ordinal.{f}__mutmut_{n}": _ASTYPE for f, ns in (
        ("x_knots_cdf_at", (33, 44)), ("x_ordinal_values", (36,)), ("xǁIntervalCountsǁevaluate", (16,)),
        ("xǁOrdinalCountsǁevaluate", (10,))) for n in ns},
    "dpflow.nodes.ordinal.x_ordinal_values__mutmut_12": _UINT_PRECLAMP,
    "dpflow.nodes.ordinal.x_ordinal_values__mutmut_15": _KIND_CHARS,
    **{f"dpflow.nodes.ordinal.{f}__mutmut_{n}": _INT_DEFAULT for f, ns in (
        ("x_uniform_cdf", (2, 4)), ("xǁOrdinalCountsǁevaluate", (3, 5))) for n in ns},
    "dpflow.nodes.ordinal.xǁIntervalCountsǁinfer__mutmut_55": _COUNTS_BOUNDED,
    "dpflow.nodes.ordinal.xǁOrdinalCountsǁinfer__mutmut_34": _COUNTS_BOUNDED,
    **{f"dpflow.nodes.ordinal.xǁOrdinalCountsǁ__attrs_post_init____mutmut_{n}": _ZIP_SHIFTED for n in (17, 20)},
    **{f"dpflow.nodes.ordinal.xǁOrdinalCountsǁevaluate__mutmut_{n}": _INT_EDGES for n in (39, 41)},
    "dpflow.nodes.control.x__weights__mutmut_13": _INF_CASE,
    **{f"dpflow.nodes.postprocess.x__caller_level__mutmut_{n}": _TRAMPOLINE for n in (3, 4, 5, 6, 8, 10, 11, 12)},
    "dpflow.nodes.postprocess.x_accuracy_warning__mutmut_15": _TRAMPOLINE,
    **{f"dpflow.nodes.postprocess.xǁPublicǁevaluate__mutmut_{n}": _FLOAT_IN for n in (4, 6)},
    **{f"dpflow.nodes.postprocess.xǁPublicǁinfer__mutmut_{n}": _PROD_DTYPE for n in (13, 15)},
    "dpflow.nodes.postprocess.xǁPackǁinfer__mutmut_21": _EMPTY_DERIVATION,
    # lead (round 10): blocks.py
    "dpflow.nodes.blocks.x__scaled__mutmut_17": _SCALE_THRESHOLD,
    "dpflow.nodes.blocks.x__scaled__mutmut_18": _ZERO_BLOCK_SCALE,
    "dpflow.nodes.blocks.x_block_kmeans__mutmut_52": _ASTYPE,
    "dpflow.nodes.blocks.x_block_kmeans__mutmut_71": _EINSUM_CASE,
    **{f"dpflow.nodes.blocks.x_block_statistic__mutmut_{n}": _EINSUM_CASE for n in (62, 114)},
    "dpflow.nodes.blocks.x_block_statistic__mutmut_75": _TRUTH,
    **{f"dpflow.nodes.blocks.xǁSubsampleAggregateǁevaluate__mutmut_{n}": _FLOAT_IN for n in (25, 27)},
    # lead (round 10): interpreter/samplers.py
    "dpflow.interpreter.samplers.x_bernoulli_exp__mutmut_4": _EXP_ONE_ROUND,
    **{f"dpflow.interpreter.samplers.{f}__mutmut_{n}": _FLOAT_IN for f, ns in (
        ("x_gumbel_of_laplace", (10, 12)), ("x_uniform_int_of", (15, 17)), ("x_uniform_of_laplace", (10, 12)))
       for n in ns},
    # lead (round 10): interpreter/vector_samplers.py (partial run)
    **{f"dpflow.interpreter.vector_samplers.x__bern_exp_frac__mutmut_{n}": _INT_DEFAULT for n in (10, 13)},
    "dpflow.interpreter.vector_samplers.x__bern_exp_frac__mutmut_34": _TIE_OVERWRITTEN,
    **{f"dpflow.interpreter.vector_samplers.x__bern_exp_frac__mutmut_{n}": _NONZERO_PAIR for n in (35, 37)},
    "dpflow.interpreter.vector_samplers.xǁ_LazyUniformǁbelow__mutmut_6": _NE_THEN_LT,
    "dpflow.interpreter.vector_samplers.xǁ_LazyUniformǁbelow_exp__mutmut_8": _NE_THEN_LT,
    "dpflow.interpreter.vector_samplers.x__first_failure__mutmut_20": _ALL_SUCCESS,
    "dpflow.interpreter.vector_samplers.x__first_failure__mutmut_4": _PARITY,
    "dpflow.interpreter.vector_samplers.x__bern_exp_frac__mutmut_40": _NONZERO_PAIR,
    **{f"dpflow.interpreter.vector_samplers.x__bern_exp_ratio__mutmut_{n}": _INT_DEFAULT for n in (4, 7)},
    # lead (round 11): interpreter/vector_samplers.py, the whole run
    "dpflow.interpreter.vector_samplers.x__bern_exp_int__mutmut_15": _BEYOND_TABLE,
    "dpflow.interpreter.vector_samplers.x__bern_exp_int__mutmut_34": _TIE_OVERWRITTEN,
    "dpflow.interpreter.vector_samplers.x__geometric_exp1__mutmut_8": _TIE_OVERWRITTEN,
    **{f"dpflow.interpreter.vector_samplers.x_discrete_laplace_array__mutmut_{n}": _INT_DEFAULT for n in (42, 45)},
    "dpflow.interpreter.vector_samplers.x_discrete_laplace_array__mutmut_61": _OBJECT_SAME,
    "dpflow.interpreter.vector_samplers.x_discrete_laplace_array__mutmut_62": _INT64_AT_44,
    # lead (round 11): interpreter/noise.py (first run)
    **{f"dpflow.interpreter.noise.x__size__mutmut_{n}": _PROD_DEFAULT for n in (3, 5)},
    "dpflow.interpreter.noise.xǁLaplaceDerivedDrawsǁuniform_words__mutmut_22": _CAP_ROUNDS,
    **{f"dpflow.interpreter.noise.xǁ_ExactDrawsǁuniform_int__mutmut_{n}": _INT_DEFAULT for n in (14, 16)},
}

#: Hand mutants of the ``@property`` accessors that privacy decisions read (mutmut never mutates a decorated
#: function): (file, the original text, its mutant, the test paths that must kill it).  ``--hand`` applies each to
#: a copy of the tree, runs the tests and prints the first failing test, or "survived".  The accessors left out
#: are read by no decision: ``LedgerEntry.cost``, ``SourceTotal.gdp_mu`` / ``measure`` / ``budget_used`` (text
#: and JSON of the ledger), ``Sym.is_const`` (the noise text), the ``InferContext`` / ``EvalContext`` /
#: ``Backend`` / ``NoiseSource`` protocol stubs (no body), and ``Status.spent`` / ``remaining``, which only
#: ``status`` text shows (``reserve`` sums the rows in SQL); the last two are mutated anyway.
HAND_MUTANTS: list[tuple[str, str, str, tuple[str, ...]]] = [
    ("dpflow/privacy/pld.py", "return any(isinstance(e, GaussianPLD) for e, _ in self.counts)", "return False",
     ("tests/privacy/", "tests/planner/")),
    ("dpflow/privacy/pld.py", "return any(isinstance(e, GaussianPLD) for e, _ in self.counts)", "return True",
     ("tests/privacy/", "tests/planner/")),
    ("dpflow/privacy/pld.py", "return any(isinstance(e, GaussianPLD) for e, _ in self.counts)",
     "return all(isinstance(e, GaussianPLD) for e, _ in self.counts)", ("tests/privacy/", "tests/planner/")),
    ("dpflow/privacy/pld.py", "return any(isinstance(e, LatticeGaussianPLD) for e, _ in self.counts)",
     "return False", ("tests/privacy/", "tests/planner/")),
    ("dpflow/privacy/pld.py", "return any(isinstance(e, LatticeGaussianPLD) for e, _ in self.counts)",
     "return True", ("tests/privacy/", "tests/planner/")),
    ("dpflow/planner/modes.py", "self in (Accounting.PURE, Accounting.BASIC) else", "self in (Accounting.PURE,) else",
     ("tests/planner/",)),
    ("dpflow/planner/modes.py", "self in (Accounting.PURE, Accounting.BASIC) else", "self in (Accounting.BASIC,) else",
     ("tests/planner/",)),
    ("dpflow/planner/modes.py", "return self in (Accounting.GDP, Accounting.BASIC, Accounting.PLD)",
     "return self in (Accounting.BASIC, Accounting.PLD)", ("tests/planner/",)),
    ("dpflow/planner/modes.py", "return self in (Accounting.GDP, Accounting.BASIC, Accounting.PLD)",
     "return self in (Accounting.GDP, Accounting.PLD)", ("tests/planner/",)),
    ("dpflow/planner/modes.py", "return self in (Accounting.GDP, Accounting.BASIC, Accounting.PLD)",
     "return self in (Accounting.GDP, Accounting.BASIC)", ("tests/planner/",)),
    ("dpflow/planner/modes.py", "return self in (Accounting.GDP, Accounting.BASIC, Accounting.PLD)",
     "return self in (Accounting.GDP, Accounting.BASIC, Accounting.PLD, Accounting.ZCDP)", ("tests/planner/",)),
    ("dpflow/planner/ledger.py", "return self.cost.rho\n", "return self.cost.rho / 2\n",
     ("tests/cli/test_budget.py", "tests/cli/test_mutants_budget.py", "tests/planner/")),
    ("dpflow/planner/ledger.py", "return self.cost.delta0\n", "return self.cost.delta0 * 0\n",
     ("tests/cli/test_budget.py", "tests/cli/test_mutants_budget.py", "tests/planner/")),
    ("dpflow/planner/ledger.py", "return self.cost.pure_eps\n",
     "return None if self.cost.pure_eps is None else self.cost.pure_eps / 2\n",
     ("tests/cli/test_budget.py", "tests/cli/test_mutants_budget.py", "tests/planner/")),
    ("dpflow/budget.py", "return self.committed + self.pending", "return self.committed",
     ("tests/cli/test_budget.py", "tests/cli/test_mutants_budget.py")),
    ("dpflow/budget.py", "return self.limit - self.spent", "return self.limit - self.committed",
     ("tests/cli/test_budget.py", "tests/cli/test_mutants_budget.py")),
    ("dpflow/nodes/fixedpoint.py", "return tuple(self.units.shape)", "return tuple(self.units.shape[:1])",
     ("tests/nodes/",)),
    ("dpflow/nodes/tuples.py", "return self.k + 1", "return self.k", ("tests/nodes/",)),
    ("dpflow/interpreter/noise.py", "    def exact(self) -> bool:\n        return True",
     "    def exact(self) -> bool:\n        return False", ("tests/interpreter/test_secure_no_continuous.py",)),
    ("dpflow/interpreter/noise.py", "return self._exact", "return False", ("tests/interpreter/test_exact_noise.py",)),
]

# mutmut's exit codes (mutmut.stats.status_by_exit_code): 1 and 3 killed, 0 survived, 5 and 33 no tests,
# 36 and the SIGXCPU codes timeout, None not run yet; anything else is "suspicious".
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 36: "timeout", -24: "timeout",
          24: "timeout", 152: "timeout", 255: "timeout", None: "not checked", 34: "skipped"}


def split(spec: str) -> tuple[str, list[str]]:
    """``path.py[:f,C.m]`` -> (path, mutmut name patterns of the module or of function f and method C.m)."""
    path, _, funcs = spec.partition(":")
    mod = path.removesuffix(".py").replace("/", ".")
    # mutmut names a mutant module.x_function__mutmut_N (methods: module.xǁClassǁmethod__mutmut_N)
    names = [f"xǁ{f.replace('.', 'ǁ')}" if "." in f else f"x_{f}" for f in funcs.split(",")] if funcs else []
    return path, [f"{mod}.{n}__mutmut_*" for n in names] if names else [f"{mod}.*"]


def subject_tests(path: str) -> tuple[str, ...]:
    """The test path prefixes a module's mutants run (:data:`SUBJECT_TESTS`)."""
    return next(tests for prefix, tests in SUBJECT_TESTS.items() if path.startswith(prefix))


def run(specs: list[tuple[str, list[str]]], *, all_tests: bool, max_seconds: float, refresh: bool,
        resume: bool, workers: int) -> float:
    """Run mutmut on every mutant of ``specs`` (in a child process); the wall time in seconds.

    ``resume``: only the mutants not yet killed (survivors, unchecked, no tests), by name, so that a rerun after
    new tests costs the survivors only (mutmut re-tests every mutant a pattern names)."""
    patterns = [p for _, pats in specs for p in pats]
    if resume:
        patterns = [name for path, pats in specs for name, status in results(path, pats).items()
                    if status not in ("killed", "timeout")]
        if not patterns:
            return 0.0
    job = {"patterns": patterns, "refresh": refresh, "max_seconds": max_seconds, "workers": workers,
           "restrict": {} if all_tests else {path.removesuffix(".py").replace("/", "."): subject_tests(path)
                                              for path, _ in specs}}
    job_file = Path("mutants/mutation-job.json")
    job_file.parent.mkdir(exist_ok=True)
    job_file.write_text(json.dumps(job))
    t0 = time.perf_counter()
    # mutmut forks each mutant from a process whose dask thread pool (made by the stats pass) has no threads in the
    # child: a test computing on dask's default threaded scheduler then waits forever, and mutmut counts the mutant
    # as a timeout (a kill).  The synchronous scheduler makes no pool; one BLAS thread keeps CPU time = work.
    env = os.environ | {"DASK_SCHEDULER": "synchronous"} | {
        k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    proc = subprocess.run([sys.executable, __file__, "--mutmut-job", str(job_file)], check=False,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if proc.returncode:  # mutmut's stats pass or clean run failed (a red test voids the whole run): say so
        print(f"mutmut exited with {proc.returncode} for {patterns}; its last lines:\n"
              + "\n".join(proc.stdout.splitlines()[-8:]), file=sys.stderr)
    return time.perf_counter() - t0


def mutmut_job(job: dict[str, Any]) -> None:
    """``mutmut run`` in this process, each module's mutants restricted to its subject tests.

    mutmut maps each function to the tests that called it (its stats pass) and runs a mutant against those.
    Right after it loads that map, each restricted function's tests are cut to the module's subject tests
    no slower than ``max_seconds`` (in memory: mutmut's stats file keeps the whole map).  ``refresh`` first
    forgets the subject tests in the stats file, so mutmut collects them again against today's code (new
    functions get their tests, changed ones lose stale ones).
    """
    import mutmut.__main__ as mm
    from mutmut.state import state

    restrict: dict[str, tuple[str, ...]] = {mod: tuple(t) for mod, t in job["restrict"].items()}
    for stale in Path("mutants/tests").rglob("*.py"):  # mutmut copies tests/ over, it never deletes a test file
        if not Path(*stale.parts[1:]).exists():
            stale.unlink()
    stats = Path("mutants/mutmut-stats.json")
    if job["refresh"] and stats.exists():
        forget = tuple(t for tests in (restrict or SUBJECT_TESTS).values() for t in tests)
        data = json.loads(stats.read_text())
        data["duration_by_test"] = {t: d for t, d in data["duration_by_test"].items() if not t.startswith(forget)}
        by_function = data["tests_by_mangled_function_name"]
        data["tests_by_mangled_function_name"] = {f: [t for t in ts if not t.startswith(forget)]
                                                  for f, ts in by_function.items()}
        stats.write_text(json.dumps(data))
    collect = mm.collect_or_load_stats

    def collect_then_restrict(*args: Any, **kwargs: Any) -> None:
        collect(*args, **kwargs)
        seconds = state().duration_by_test
        for name, tests in state().tests_by_mangled_function_name.items():
            for mod, prefixes in restrict.items():
                if name.startswith(mod + "."):
                    tests.intersection_update({t for t in tests if t.startswith(prefixes) and (
                        "/test_mutants_" in t or seconds.get(t, 0.0) <= job["max_seconds"])})

    mm.collect_or_load_stats = collect_then_restrict
    mm.cli(["run", "--max-children", str(job["workers"]), *job["patterns"]])


def hand_mutants(which: list[int] | None) -> None:
    """Run :data:`HAND_MUTANTS` (all, or the given indices): each applied to a copy of the tree in a temporary
    directory (the worktree is never edited), its tests run with ``-x``; print the first failing test or
    "survived"."""
    import re
    import shutil
    import tempfile

    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        for part in ("dpflow", "tests", "docs", "examples", "benchmarks", "pyproject.toml", "README.md"):
            src = root / part
            (shutil.copytree if src.is_dir() else shutil.copy)(src, Path(tmp) / part)
        print("| # | file | mutant | killed by |\n|---|---|---|---|")
        for i, (path, old, new, tests) in enumerate(HAND_MUTANTS):
            if which is not None and i not in which:
                continue
            target = Path(tmp) / path
            text = target.read_text()
            if text.count(old) != 1:
                raise SystemExit(f"hand mutant {i}: {old!r} occurs {text.count(old)} times in {path}")
            target.write_text(text.replace(old, new))
            try:  # python -m pytest from tmp: the copy's dpflow comes first on sys.path
                proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:warnings", "-p",
                                       "no:cacheprovider", *tests], cwd=tmp, capture_output=True, text=True,
                                      check=False)
            finally:
                target.write_text(text)
            failed = re.search(r"^(?:FAILED|ERROR) (\S+)", proc.stdout, re.M)
            verdict = failed.group(1) if failed else ("survived" if proc.returncode == 0 else
                                                      f"pytest exit {proc.returncode}")
            print(f"| {i} | {path} | `{' '.join(old.split())}` -> `{' '.join(new.split())}` | {verdict} |", flush=True)


def results(path: str, patterns: list[str]) -> dict[str, str]:
    """Each mutant of ``path`` matching ``patterns`` and its status, from mutmut's result file."""
    meta = Path("mutants") / (path + ".meta")
    if not meta.exists():
        return {}
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    return {name: STATUS.get(code, "suspicious") for name, code in codes.items()
            if any(fnmatch.fnmatchcase(name, p) for p in patterns)}


def rate(c: Counter[str]) -> str:
    """(killed + timeout) / (checked - equivalent) as a percentage."""
    live = c["checked"] - c["equivalent"]
    return f"{100.0 * (c['killed'] + c['timeout']) / live:.1f}%" if live else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("modules", nargs="*", default=DEFAULT_MODULES)
    ap.add_argument("--all-tests", action="store_true", help="run every covering test, not only the subject's")
    ap.add_argument("--max-test-seconds", type=float, default=MAX_TEST_SECONDS,
                    help="leave out subject tests slower than this in the stats pass (default %(default)s)")
    ap.add_argument("--refresh-stats", action="store_true",
                    help="collect the subject tests' function map again (after the code changed)")
    ap.add_argument("--resume", action="store_true",
                    help="run only the mutants not yet killed (after new tests, or to continue a stopped run)")
    ap.add_argument("--workers", type=int, default=1, help="mutants tested at once (default %(default)s)")
    ap.add_argument("--mutmut-job", help=argparse.SUPPRESS)
    ap.add_argument("--report-only", action="store_true", help="tabulate the last run, run nothing")
    ap.add_argument("--survivors", action="store_true", help="list the surviving mutants")
    ap.add_argument("--hand", nargs="*", type=int, metavar="I",
                    help="run the hand mutants of HAND_MUTANTS (all, or those numbered I) instead of mutmut")
    args = ap.parse_args()
    if args.mutmut_job:
        mutmut_job(json.loads(Path(args.mutmut_job).read_text()))
        return
    if args.hand is not None:
        hand_mutants(args.hand or None)
        return
    specs = [split(m) for m in args.modules]
    secs = 0.0
    for i, spec in enumerate([] if args.report_only else specs):  # one module after the other, in the given order
        secs += run([spec], all_tests=args.all_tests, max_seconds=args.max_test_seconds,
                    refresh=args.refresh_stats and i == 0, resume=args.resume, workers=args.workers)
    head = ("module", "mutants", "checked", "killed", "timeout", "survived", "no tests", "equivalent", "kill rate")
    rows: list[list[str]] = []
    totals = Counter[str]()
    survivors: list[str] = []
    stale: list[str] = []  # listed as equivalent but killed: mutmut renumbered the function's mutants
    for (path, pats), module in zip(specs, args.modules, strict=True):
        status = results(path, pats)
        c = Counter(s for name, s in status.items() if name not in EQUIVALENT)
        c["mutants"] = len(status)
        c["checked"] = sum(1 for s in status.values() if s != "not checked")
        c["equivalent"] = sum(1 for name in status if name in EQUIVALENT)
        totals.update(c)
        survivors += [n for n, s in status.items() if s == "survived" and n not in EQUIVALENT]
        stale += [n for n, s in status.items() if n in EQUIVALENT and s in ("killed", "timeout")]
        rows.append([module, *(str(c[k]) for k in head[1:-1]), rate(c)])
    rows.append(["all", *(str(totals[k]) for k in head[1:-1]), rate(totals)])
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"kill rate = (killed + timeout) / (checked - equivalent); mutmut ran {secs:.0f} s")
    if stale:
        print("\nlisted in EQUIVALENT but killed (renumbered after a code change? check the reason still fits):")
        print("\n".join(f"  {n}" for n in stale))
    if args.survivors and survivors:
        print("\nsurvivors (mutmut show NAME):")
        print("\n".join(f"  {n}" for n in survivors))


if __name__ == "__main__":
    main()
