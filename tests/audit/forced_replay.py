"""The forced record/replay both replay audits use (``test_replay.py``: the adaptive estimators' rounds;
``test_replay_estimators.py``: the newer estimators end to end).

Run D with seeded noise, recording every mechanism invocation (node path and occurrence, its raw pre-noise input,
its declared bounds at that invocation's released values, share and mode); run D' with every release forced to
D's, so each invocation of D' sees D's released state; then compare each pair of invocations in every declared
norm (arrays, sparse bin counts, dyadic tables, a quantile's rank utility), the one-sided bounds of value pieces a
record moves between, the recorded noise facts, and the realised per-record cost against the certified one.
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction
from typing import Any

import attrs
import numpy as np
from test_audit import REL_TOL, noised_entries

import dpflow as dp
from dpflow.interpreter.numpy_backend import NumpyBackend
from dpflow.interpreter.run import _Ctx, _Run, prepare_data
from dpflow.nodes import Mechanism, NodeRecord
from dpflow.nodes.dyadic import DyadicTable
from dpflow.nodes.fixedpoint import FixedPoint
from dpflow.nodes.stability import SparseCounts
from dpflow.nodes.types import StatT
from dpflow.planner.certify import Certified

NORM_OF = {"GaussianMech": "l2", "LaplaceMech": "l1", "AboveThreshold": "linf", "Peel": "linf",
           "StabilityHistogram": "l1", "GaussianStabilityHistogram": "l2", "DyadicExpMech": "linf",
           "Quantile": "rank"}
"""The sensitivity each mechanism's noise (or score scale) is calibrated to."""

NORMS = ("l1", "l2", "linf", "rank")


@attrs.frozen
class Invocation:
    """One mechanism evaluation: (node path, occurrence), node, pre-noise input, declared bounds, share, mode."""

    key: tuple[str, int]
    node: Mechanism
    value: Any
    stat: StatT
    bounds: dict[str, float | None]
    share: Fraction
    mode: str
    one_sided: dict[str, float | None] | None = None
    """A value piece's statistic: its declared bounds for a record entering or leaving the piece."""
    rows: int | None = None
    """A value piece's statistic: the number of rows of the piece (it changes iff the change is one-sided)."""
    one_sided_ratio: float = 1.0
    """A value piece's statistic: the ratio of a one-sided change to the sensitivity in the mechanism's own norm
    that the mechanism claims (:meth:`~dpflow.nodes.base.Mechanism.one_sided_ratio`: the planner charges the
    piece at it)."""


class Replay(_Run):
    """The interpreter, recording every mechanism invocation (its raw pre-noise input) and keeping the facts the
    mechanisms record (noise scales, thresholds, epsilons); with ``forced``, each mechanism still runs (so its
    facts are recorded) but releases the recorded value of another run instead of its own draw."""

    def __init__(self, cert: Certified, data: Any, forced: dict[tuple[str, int], Any] | None = None,
                 noise: Any = None) -> None:
        super().__init__(cert, prepare_data(cert, data), noise if noise is not None else dp.SeededNoise(0),
                         NumpyBackend())
        self.forced = forced
        self.seen: Counter[str] = Counter()
        self.invocations: list[Invocation] = []
        self.releases: dict[tuple[str, int], Any] = {}

    def evaluate(self, rec: NodeRecord, ins: list[Any], ctx: _Ctx) -> Any:
        if not isinstance(rec.node, Mechanism):
            return super().evaluate(rec, ins, ctx)
        key = (ctx.node_id, self.seen[ctx.node_id])
        self.seen[ctx.node_id] += 1
        stat = ctx.space.types[rec.inputs[0]]
        assert isinstance(stat, StatT)
        bounds = {k: None if getattr(stat, k) is None else ctx.bound(getattr(stat, k)) for k in NORMS}
        alloc = ctx.allocation()
        one_sided, rows, ratio = None, None, 1.0
        if stat.one_sided is not None:  # the query's rows are a value piece: a record may enter or leave it
            one_sided = {k: None if b is None else ctx.bound(b) for k, b in zip(NORMS, stat.one_sided, strict=False)}
            rows = self.backend.nrows(ctx.env[ctx.space.records[rec.inputs[0]].inputs[0]])
            ratio = float(rec.node.one_sided_ratio(stat))
        self.invocations.append(Invocation(key, rec.node, ins[0], stat, bounds, alloc.share, alloc.mode, one_sided,
                                           rows, ratio))
        out = super().evaluate(rec, ins, ctx)
        if self.forced is not None:
            out = self.forced[key]
        self.releases[key] = out
        return out

    def run(self) -> dict[str, Any]:
        """The plan's released outputs by name (``self.env``: every value of the top scope kept)."""
        self.env = self.space_values(self.cert.space, {})
        return {name: self.env[nid] for name, nid in self.cert.plan.outputs}


# ------------------------------------------------------------------ distances, by the kind of input


def _dense_pair(a: SparseCounts, b: SparseCounts) -> tuple[np.ndarray, np.ndarray]:
    """Two sparse bin counts as dense vectors over the union of their occupied bins."""
    keys = np.union1d(a.keys, b.keys)
    va, vb = np.zeros(len(keys)), np.zeros(len(keys))
    va[np.searchsorted(keys, a.keys)] = a.counts
    vb[np.searchsorted(keys, b.keys)] = b.counts
    return va, vb


def dyadic_counts(table: DyadicTable) -> np.ndarray:
    """The counts of every dyadic interval ``[q 2^j, (q+1) 2^j)`` of [0, 2^L), j < L (small L only)."""
    return np.concatenate([table.counts_at(j, np.arange(1 << (table.L - j))) for j in range(table.L)])


def rank_change(fa: np.ndarray, fb: np.ndarray, q: float) -> float:
    """The largest change of the quantile utility ``-|c(y) - q n|`` over the points ``y`` of the range, for the
    framed order statistics ``(lo, z_1..z_n, hi)`` of D and D' (``c(y)`` the values below ``y``; ``n`` each
    side's own, which differs under add/remove).  The utility is a step function: it is compared at every
    value of either side and between every two consecutive ones."""
    za, zb = fa[1:-1], fb[1:-1]
    pts = np.unique(np.concatenate([fa, fb]))
    pts = np.concatenate([pts, (pts[1:] + pts[:-1]) / 2])
    pts = pts[(pts >= fa[0]) & (pts <= fa[-1])]
    ua = -np.abs(np.searchsorted(za, pts, side="left") - q * len(za))
    ub = -np.abs(np.searchsorted(zb, pts, side="left") - q * len(zb))
    return float(np.max(np.abs(ua - ub), initial=0.0))


def changes(ma: Invocation, mb: Invocation, found: list[str], label: str) -> dict[str, float]:
    """The realised change of one invocation's pre-noise input between D and D', per declared norm."""
    va, vb = ma.value, mb.value
    out: dict[str, float] = {}
    if isinstance(va, SparseCounts):
        a, b = _dense_pair(va, vb)
    elif isinstance(va, DyadicTable):
        a, b = dyadic_counts(va), dyadic_counts(vb)
    else:
        if isinstance(va, FixedPoint):
            va, vb = va.as_float(), vb.as_float()
        a, b = noised_entries(va, ma.stat), noised_entries(vb, mb.stat)
        if ma.node.kind == "Quantile":
            if a[0] != b[0] or a[-1] != b[-1]:
                found.append(f"{label}: the quantile's range depends on the data: {a[[0, -1]]} vs {b[[0, -1]]}")
            out["rank"] = rank_change(a, b, ma.node.q)  # type: ignore[attr-defined]
    if a.shape != b.shape:  # a private row count changed the statistic's length: only the rank is comparable
        return out
    diff = (a - b).ravel()
    if not np.all(np.isfinite(diff)):
        found.append(f"{label}: a pre-noise statistic is not finite")
        diff = np.where(np.isfinite(diff), diff, np.inf)
    out["l1"] = float(np.abs(diff).sum())
    out["l2"] = float(np.linalg.norm(diff)) if np.all(np.isfinite(diff)) else math.inf
    out["linf"] = float(np.abs(diff).max(initial=0.0))
    return out


def ratio_of(ma: Invocation, mb: Invocation, found: list[str]) -> float:
    """The realised change over the declared bound in the mechanism's own norm; every exceeded declared bound
    (in any norm) is appended to ``found``."""
    label = f"{ma.key[0]}#{ma.key[1]} ({ma.node.kind})"
    realised = changes(ma, mb, found, label)
    declared = [("", ma.bounds)]
    if ma.one_sided is not None and ma.rows != mb.rows:  # the record entered or left the piece
        declared.append(("one-sided ", ma.one_sided))
    for what, bounds in declared:
        for norm, bound in bounds.items():
            if bound is None or norm not in realised:
                continue
            if realised[norm] > bound * (1 + REL_TOL) + 1e-300:
                found.append(f"{label}: realised {norm} change {realised[norm]:.6g} exceeds the declared {what}"
                             f"{bound:.6g}")
    norm = NORM_OF[ma.node.kind]
    bound = ma.bounds[norm]
    assert bound is not None, f"{label}: no {norm} bound"
    dist = realised.get(norm, math.inf)
    r = dist / bound if bound > 0 else (0.0 if dist == 0 else math.inf)
    if len(declared) > 1 and r > ma.one_sided_ratio * (1 + REL_TOL):
        found.append(f"{label}: a one-sided change of {r:.6g} of the sensitivity exceeds the ratio "
                     f"{ma.one_sided_ratio:.6g} the piece is charged at")
    return r


@attrs.frozen
class Outcome:
    """What the replay of one pair found: the violations, the realised per-record cost and the certified one
    (pure epsilon in pure mode, else rho), and D's released outputs."""

    found: list[str]
    spent: Fraction
    certified: Fraction
    released: dict[str, Any]


def replay(cert: Certified, D: dict[str, Any], D2: dict[str, Any],
           ratios: dict[tuple[str, int], float] | None = None, noise: Any = None) -> Outcome:
    """Run D (recording), then D' with D's releases forced, and compare every invocation; ``ratios`` collects the
    largest realised / declared change of each invocation."""
    a = Replay(cert, D, noise=noise)
    released = a.run()
    b = Replay(cert, D2, forced=a.releases, noise=noise)
    b.run()
    total = cert.ledger.totals[0]
    modes = {m.mode for m in a.invocations}
    assert len(modes) <= 1, modes
    pure = modes == {"pure"}
    certified = Fraction(total.pure_eps or 0) if pure else Fraction(total.rho)
    if [m.key for m in a.invocations] != [m.key for m in b.invocations]:
        return Outcome(["the mechanisms evaluated depend on the data"], Fraction(0), certified, released)
    found: list[str] = []
    if repr(dict(a.facts)) != repr(dict(b.facts)):
        found.append(f"the noise scales or thresholds depend on the data: {dict(a.facts)} vs {dict(b.facts)}")
    spent = Fraction(0)
    for ma, mb in zip(a.invocations, b.invocations, strict=True):
        if ma.bounds != mb.bounds or ma.share != mb.share:
            found.append(f"{ma.key}: the declared bounds depend on the data: {ma.bounds} vs {mb.bounds}")
        r = ratio_of(ma, mb, found)
        if ratios is not None:
            ratios[ma.key] = max(ratios.get(ma.key, 0.0), r)
        if math.isfinite(r):
            spent += ma.share * (Fraction(r) if pure else Fraction(r) ** 2)
        else:
            spent = Fraction(10**30)
    if spent > certified * (1 + Fraction(REL_TOL)):
        found.append(f"realised per-record cost {float(spent):.6g} exceeds the certified {float(certified):.6g}")
    return Outcome(found, spent, certified, released)
