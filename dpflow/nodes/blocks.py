"""Subsample and aggregate: disjoint blocks of ``size`` consecutive rows, one output row per block
(Nissim-Raskhodnikova-Smith 2007; the block step of KMSSU's EigenvalueEstimator and SubspaceRecovery,
sparse_discrete_heavy.md 5.1.1-5.1.2).

The per-block statistic is one of :data:`BLOCK_STATISTICS`, computed for all blocks at once (batched
numpy, no loop over blocks).  Release the block rows with any node that reads rows: a stability
histogram of one column (``Columns`` -> ``BinCounts`` -> ``StabilityHistogram``), or a clipped ``Mean``
and ``GaussianMech``.

>>> import numpy as np, dpflow as dp
>>> b = dp.PlanBuilder(budget=dp.ZCDP(1.0))
>>> B = SubsampleAggregate(size=4, statistic="top_projection", k=1)(b.source("X", dp.Vectors(d=2), n=400))
>>> P = dp.nodes.GaussianMech()(dp.nodes.Mean()(B))
>>> X = np.random.default_rng(0).normal(size=(400, 2)) * [10.0, 0.1]
>>> r = b.build(P=P).run({"X": X}, noise=dp.SeededNoise(0)).released["P"]
>>> bool(abs(r[0] - 1.0) < 0.2)
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from dpflow.domains import Sym, Vectors
from dpflow.errors import DomainError
from dpflow.handles import Ref
from dpflow.nodes.base import EvalContext, InferContext, Transform, need, text_of
from dpflow.nodes.rules import capped, public_n
from dpflow.nodes.transforms import into_domain
from dpflow.nodes.types import Inferred, RowsT, Size, VType
from dpflow.references import Reference

BLOCK_STATISTICS = ("mean", "median", "second_moment", "log2_eigenvalues", "top_projection", "kmeans")
"""The per-block statistics: the block ``mean`` and coordinate-wise ``median`` (d values); the
``second_moment`` ``(1/m) sum x x^T`` flattened (d*d values); its ``log2_eigenvalues`` in decreasing
order (d values; a zero eigenvalue gives ``-inf``); ``top_projection``: the flattened orthogonal
projector onto its top-``k`` eigenvectors (d*d values, Frobenius norm ``sqrt(k)``); ``kmeans``: the ``k``
centres of a non-private k-means fit of the block (:func:`block_kmeans`; k*d values, the centres one after
the other in no meaningful order: the sample-and-aggregate of mixtures.md 8, aggregated per group by
``dpflow.nodes.tuples``)."""

KMEANS_ROUNDS = 20
"""Lloyd rounds of :func:`block_kmeans` (from the farthest-first start on separated data, 2-5 suffice)."""


def block_kmeans(Y: np.ndarray, k: int, rounds: int = KMEANS_ROUNDS) -> np.ndarray:
    """Non-private k-means of every block of ``Y`` (B, m, d) at once: ``(B, k, d)`` centres.  Start:
    farthest-first traversal from the block's first row (deterministic, a function of the block alone),
    then ``rounds`` Lloyd steps; a centre that loses all its rows keeps its place.  Each block's centres
    are means of some of its rows, so they lie in the convex hull of the block.

    >>> Y = np.array([[[0.0], [0.2], [10.0], [10.4]]])
    >>> np.round(np.sort(block_kmeans(Y, 2)[0, :, 0]), 6).tolist()
    [0.1, 10.2]
    """
    B, m, d = Y.shape
    idx = np.zeros((B, k), dtype=np.int64)
    best = np.full((B, m), np.inf)
    ar = np.arange(B)
    for j in range(1, k):  # k public steps, each vectorised over blocks and rows
        best = np.minimum(best, np.sum((Y - Y[ar, idx[:, j - 1]][:, None, :]) ** 2, axis=2))
        idx[:, j] = np.argmax(best, axis=1)
    C = Y[ar[:, None], idx]
    for _ in range(rounds):  # a public number of Lloyd rounds, vectorised over blocks
        D = np.sum((Y[:, :, None, :] - C[:, None, :, :]) ** 2, axis=3)
        onehot = (np.argmin(D, axis=2)[:, :, None] == np.arange(k)).astype(float)
        cnt = onehot.sum(axis=1)
        S = np.einsum("bmk,bmd->bkd", onehot, Y)
        C = np.where(cnt[:, :, None] > 0, S / np.maximum(cnt, 1.0)[:, :, None], C)
    out: np.ndarray = C
    return out


def _statistic(x: Any) -> str:
    s = str(x)
    if s not in BLOCK_STATISTICS:
        raise ValueError(f"SubsampleAggregate statistic must be one of {BLOCK_STATISTICS}, got {x!r}")
    return s


def _block_size(x: Any) -> int:
    if isinstance(x, bool) or int(x) != x or int(x) < 1:
        raise ValueError(f"SubsampleAggregate size must be an integer >= 1, got {x!r}")
    return int(x)


def _blocks(X: np.ndarray, size: int) -> np.ndarray:
    """Rows ``X[:B*size]`` as a (B, size, d) array with non-finite entries set to 0 (declared policy)."""
    B = X.shape[0] // size
    Y = X[: B * size].reshape(B, size, X.shape[1])
    return np.where(np.isfinite(Y), Y, 0.0)


def _scaled(Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Z, s): each block divided by ``s``, its largest entry in magnitude (1 for an all-zero block),
    so that nothing overflows or underflows."""
    s = np.max(np.abs(Y), axis=(1, 2))  # (0,) for no blocks
    s = np.where(s > 0, s, 1.0)
    return Y / s[:, None, None], s


def block_statistic(X: np.ndarray, size: int, statistic: str, k: int = 1) -> np.ndarray:
    """One row of ``statistic`` per block of ``size`` consecutive rows of ``X`` (the remainder rows
    are dropped); non-finite entries count as 0.  Vectorised over blocks.

    >>> block_statistic(np.array([[1.0], [3.0], [5.0], [np.nan]]), 2, "mean")
    array([[2. ],
           [2.5]])
    >>> block_statistic(np.array([[2.0, 0.0], [0.0, 1.0]]), 2, "log2_eigenvalues")
    array([[ 1., -1.]])
    """
    Y = _blocks(np.atleast_2d(np.asarray(X, dtype=float)), size)
    B, d = Y.shape[0], Y.shape[2]
    with np.errstate(all="ignore"):
        if statistic == "mean":
            out: np.ndarray = np.mean(Y, axis=1)
            return out
        if statistic == "median":
            out = np.median(Y, axis=1)
            return out
        if statistic == "kmeans":
            return block_kmeans(Y, k).reshape(B, k * d)
        Z, s = _scaled(Y)
        if statistic == "second_moment":
            S = np.einsum("bij,bik->bjk", Z, Z) / Y.shape[1]
            out = (S * (s**2)[:, None, None]).reshape(B, d * d)
            return out
        # singular values of the (scaled) block, not eigenvalues of its second moment: their absolute
        # error is eps * sigma_max rather than eps * sigma_max^2, so spectra spanning 1e-6..1e6 survive
        _, sv, vh = np.linalg.svd(Z, full_matrices=False)
        if statistic == "log2_eigenvalues":
            lw = np.full((B, d), -np.inf)
            lw[:, : sv.shape[1]] = 2.0 * np.log2(sv) - math.log2(Y.shape[1])
            out = lw + 2.0 * np.log2(s)[:, None]
            return out
        top = vh[:, :k, :]
        out = np.einsum("bki,bkj->bij", top, top).reshape(B, d * d)
        return out


@attrs.frozen(kw_only=True)
class SubsampleAggregate(Transform):
    """Split the rows into disjoint blocks of ``size`` consecutive rows (``n // size`` blocks, the last
    ``n % size`` rows dropped) and output one row per block: the block's ``statistic``
    (:data:`BLOCK_STATISTICS`; ``k`` for ``top_projection``).  With ``shuffle`` (a public seed) the blocks are
    of the rows in the order of the permutation ``numpy.random.default_rng(shuffle).permutation(n)``
    (mixtures.md 8, step 1: "public random permutation"), so that data stored in order (sorted, or
    concatenated by source) still gives blocks that each sample the whole data.

    Stability (replace-one, public n): a replaced record lies in exactly one block, so exactly one
    output row changes: the stability of the input carries over (1 for a source).  The permutation is a
    function of the public seed and n alone, so this holds for it as for the identity.  Add/remove: the
    blocks are by position, so inserting or deleting one record shifts every later block and changes
    up to all ``n // size`` output rows; there is no bounded stability and the node is refused under
    add/remove neighbours (before any data is read).

    Bounds: the mean of rows in a convex set (a box, an l2 ball) stays in it, so ``mean`` keeps the input's box
    and ball; ``median`` keeps the box; ``second_moment`` of rows with ``||x|| <= r`` (around the origin) has
    Frobenius norm ``<= r^2``; ``top_projection`` has Frobenius norm exactly ``sqrt(k)``; ``kmeans`` (k centres,
    each a mean of block rows) keeps the box, and rows with ``||x|| <= r`` give ``||(c_1, ..., c_k)|| <= sqrt(k)
    r``; ``log2_eigenvalues`` is unbounded.  A box and a ball are kept together only when the box holds the
    origin and the ball is around it (else the box alone, as ``Clip``).  The computed statistics are moved into
    the declared domain (``into_domain``): rounding puts some just outside it.  Non-finite entries count as 0
    (declared policy); the eigen statistics come from the singular values and vectors of the block divided by its
    largest entry, so 1e300 rows do not overflow and spectra from 1e-12 to 1e12 keep their small eigenvalues.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> B = SubsampleAggregate(size=5, statistic="mean")(b.source("X", dp.Vectors(d=2, l2_bound=1.0), n=100))
    """

    kind: ClassVar[str] = "SubsampleAggregate"
    reference: ClassVar[Reference] = Reference(
        "subsample and aggregate (Nissim-Raskhodnikova-Smith 2007): disjoint blocks by position, one record "
        "changes one block (replace-one); KMSSU block statistics", "sparse_discrete_heavy.md", "5.1.1-5.1.2")
    size: int = attrs.field(converter=_block_size)
    statistic: str = attrs.field(converter=_statistic)
    k: int = attrs.field(default=1, converter=int)
    shuffle: int | None = attrs.field(default=None, converter=attrs.converters.optional(int))

    def _d_out(self, d: int) -> int:
        if self.statistic == "kmeans":
            return self.k * d
        return d * d if self.statistic in ("second_moment", "top_projection") else d

    def _domain(self, dom: Vectors) -> Vectors:
        d_out = self._d_out(dom.d)
        if self.statistic == "mean":
            return _enforceable(Vectors(d=d_out, l2_bound=dom.l2_bound, box=dom.box, center=dom.center))
        if self.statistic == "median":
            return Vectors(d=d_out, box=dom.box)
        if self.statistic == "kmeans":  # k means of rows each in the convex set: norm <= sqrt(k) r around 0
            r = dom.norm_l2()
            box = dom.box
            return _enforceable(Vectors(d=d_out, box=box, l2_bound=None if r is None else r * math.sqrt(self.k)))
        if self.statistic == "second_moment":
            r = dom.norm_l2()
            return Vectors(d=d_out, l2_bound=None if r is None else r * r)
        if self.statistic == "top_projection":
            return Vectors(d=d_out, l2_bound=Sym.const(math.sqrt(self.k)))
        return Vectors(d=d_out)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        public_n(rows, ctx, "SubsampleAggregate (blocks by position: under add/remove one record shifts every "
                            "later block)")
        d = rows.domain.d
        if self.statistic in ("top_projection", "kmeans") and self.k < 1 or \
                self.statistic == "top_projection" and self.k > d:
            raise DomainError(ctx.node_id, f"{self.statistic} with k={self.k} in d={d}",
                              f"pass 1 <= k <= {d}" if self.statistic == "top_projection" else "pass k >= 1")
        known = None if rows.size.known is None else rows.size.known // self.size
        if known == 0:
            raise DomainError(ctx.node_id, f"{rows.size.known} rows do not fill one block of {self.size}",
                              "use a smaller block size")
        dom = self._domain(rows.domain)
        out = attrs.evolve(rows, domain=dom, size=Size(public=True, known=known, ref=ctx.row_count()))
        what = {"top_projection": f"top-{self.k} projection", "kmeans": f"{self.k}-means centres"}.get(
            self.statistic, self.statistic)
        order = "" if self.shuffle is None else f" (rows in the public permutation of seed {self.shuffle})"
        return Inferred(out, f"{what} of disjoint blocks of {self.size} rows{order}: a replaced record changes one "
                             f"block (stability {rows.stability}); -> {dom.describe()} (l2 bound "
                             f"{text_of(dom.l2_bound)})")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        X = np.asarray(ins[0])
        if self.shuffle is not None:
            X = X[np.random.default_rng(self.shuffle).permutation(X.shape[0])]
        rows = ctx.input_type(0)
        assert isinstance(rows, RowsT)
        # the statistics lie in the declared domain in exact arithmetic, and within rounding of it as computed
        # (the mean of three 0.1 is 0.10000000000000002): enforced, as Clip would, so that the sensitivities
        # downstream nodes derive from it hold for the rows they read
        dom = self._domain(rows.domain)
        r = None if dom.l2_bound is None else capped(ctx.bound(dom.l2_bound))
        c = None if dom.center is None else np.asarray(ctx.value(Ref(dom.center)), dtype=float)
        return into_domain(block_statistic(X, self.size, self.statistic, self.k), dom.box, r, c)


def _enforceable(dom: Vectors) -> Vectors:
    """``dom`` without its l2 ball when :func:`into_domain` could not keep both bounds (a box that excludes the
    origin, or a ball around a centre): the box alone then, as ``Clip`` does."""
    box = dom.box
    if box is not None and dom.l2_bound is not None and not (dom.center is None and box[0] <= 0.0 <= box[1]):
        return Vectors(d=dom.d, box=dom.box)
    return dom


__all__ = ["BLOCK_STATISTICS", "SubsampleAggregate", "block_kmeans", "block_statistic"]
