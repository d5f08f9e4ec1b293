"""The accuracy contract every estimator keeps before it reads data (issue 29).

An estimator predicts, from public facts only, the error of each output on each of its routes
(:class:`dpflow.planner.accuracy.Prediction`), picks the route with the smallest prediction
(:func:`choose_route`: public, so free) and records the chosen prediction in its plan
(:func:`dpflow.nodes.predicted_error`, listed in ``Ledger.predictions``).  Then :func:`enforce` compares it
with the caller's tolerance ``max_error`` (by default the data's own spread when that is public, e.g. the
width of the bounds): above it, a loud :class:`dpflow.errors.AccuracyWarning` names what would bring the
prediction under the tolerance (more rows, a larger budget); with ``strict=True`` an
:class:`dpflow.errors.AccuracyError` refuses before any data is read and before any budget is charged.

>>> from dpflow.planner.accuracy import Prediction
>>> routes = {"clipped": Prediction("mean", "absolute", 2.0, 0.9, "b"),
...           "scaled": Prediction("mean", "absolute", 0.5, 0.9, "s")}
>>> choose_route(routes, forced=None)
'scaled'
>>> smallest_n(lambda n: 100.0 / n, 1.0, start=10)
100
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence

import attrs

from dpflow.errors import AccuracyError, AccuracyWarning
from dpflow.nodes.postprocess import _caller_level
from dpflow.planner.accuracy import Prediction

MAX_ROWS = 10**12
"""The largest row count :func:`smallest_n` looks at (beyond it: "no number of rows")."""

STEP_MAY_FAIL = "the private scale step succeeds"
"""How the ``given`` of a prediction begins when it assumes a private scale step that is expected to fail at
this n and budget (its share capped, or short of the epsilon it needs): the prediction is listed (finite,
conditional) and the estimator warns; :func:`unconditional` is what the tolerance and a route score see."""


def unconditional(p: Prediction) -> Prediction:
    """``p`` as the tolerance sees it: a prediction conditional on a scale step expected to fail
    (:data:`STEP_MAY_FAIL`) is infinite ("no useful bound"), its conditional value kept in the derivation.

    >>> p = Prediction("mean", "absolute", 0.5, 0.9, "noise", given=STEP_MAY_FAIL + " (short)")
    >>> unconditional(p).value, unconditional(p).derivation
    (inf, '0.5 only if the private scale step succeeds (short); noise')
    """
    if not p.given.startswith(STEP_MAY_FAIL):
        return p
    return attrs.evolve(p, value=math.inf, derivation=f"{p.value:.4g} only if {p.given}; {p.derivation}", given="")


def choose_route(predictions: Mapping[str, Prediction], forced: str | None) -> str:
    """The route with the smallest predicted error (the first listed among equals), or ``forced``.

    Decided from public predictions only, so the choice reveals nothing about the data.  A forced route
    must be one of the routes.
    """
    if not predictions:
        raise ValueError("no route to choose from")
    if forced is not None:
        if forced not in predictions:
            raise ValueError(f"unknown route {forced!r}: the routes are {sorted(predictions)}")
        return forced
    return min(predictions, key=lambda r: (predictions[r].value, list(predictions).index(r)))


def smallest_n(predict: Callable[[int], float], tolerance: float, start: int) -> int | None:
    """The smallest row count ``n >= start`` whose prediction ``predict(n)`` is at most ``tolerance``, or
    ``None`` when no count up to :data:`MAX_ROWS` reaches it (``predict`` non-increasing in ``n``)."""
    if not tolerance > 0:
        return None
    lo, hi = max(int(start), 1), max(int(start), 1)
    while predict(hi) > tolerance:
        if hi >= MAX_ROWS:
            return None
        lo, hi = hi, min(hi * 2, MAX_ROWS)
    while lo < hi:  # predict(hi) <= tolerance; the smallest such n in [lo, hi]
        mid = (lo + hi) // 2
        if predict(mid) <= tolerance:
            hi = mid
        else:
            lo = mid + 1
    return hi


def enforce(predictions: Sequence[Prediction], max_error: float | None, strict: bool, where: str,
            fix: str = "") -> tuple[str, ...]:
    """Check every prediction against ``max_error`` before data is read.

    ``max_error=None`` means no tolerance beyond the estimator's own (an infinite prediction still
    warns: the estimator can promise nothing; so does one conditional on a scale step expected to fail,
    :func:`unconditional`).  Each prediction above the tolerance gives one line; with
    ``strict`` they raise :class:`AccuracyError` (nothing read, nothing charged), otherwise each is
    emitted as an :class:`AccuracyWarning`.  Returns the lines (for the plan's ledger warnings).

    >>> import warnings as w
    >>> p = Prediction("mean", "absolute", 5.0, 0.9, "Laplace noise", "clipped")
    >>> with w.catch_warnings(record=True) as caught:
    ...     w.simplefilter("always")
    ...     lines = enforce([p], 1.0, False, "stats.mean", "give more rows")
    >>> caught[0].category.__name__, lines[0].startswith("stats.mean: mean")
    ('AccuracyWarning', True)
    """
    if max_error is not None and not max_error > 0:
        raise ValueError(f"max_error must be positive, got {max_error!r}")
    lines, problems = [], []
    for p in map(unconditional, predictions):
        over = math.isinf(p.value) or (max_error is not None and p.value > max_error)
        if not over:
            continue
        limit = "no finite error can be promised" if max_error is None else f"the tolerance is {max_error:.6g}"
        text = (f"{p.output} is predicted to err by up to {p.value:.6g} ({p.metric}, probability "
                f"{p.confidence:g}; {p.derivation}) and {limit}")
        problems.append(text)
        lines.append(f"{where}: {text}" + (f". Fix: {fix}" if fix else ""))
    if problems and strict:
        raise AccuracyError(where, "; ".join(problems), fix or "more rows, a larger budget, or public bounds")
    for line in lines:
        warnings.warn(line, AccuracyWarning, stacklevel=_caller_level())
    return tuple(lines)
