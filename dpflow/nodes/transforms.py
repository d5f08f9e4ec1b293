"""Sources and transformations: sensitive rows in, sensitive rows out.

Every transformation is row-wise (one record's change moves at most ``stability``
rows of the output) or a split of the rows into disjoint pieces.  Nothing here
raises on private values: non-finite entries are handled by a declared policy.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from dpflow.domains import MAX_BOUND, ReleasedScalar, RowDomain, Sym, Vectors, as_vectors, integral
from dpflow.errors import DataError, DomainError, PlanTypeError
from dpflow.handles import Ref, Rows, Sensitive, param
from dpflow.nodes.base import (
    EvalContext,
    InferContext,
    Node,
    Transform,
    float_rows,
    need,
    released_type,
    text_of,
)
from dpflow.nodes.ordinal import ordinal_values
from dpflow.nodes.params import finite_tuple, magnitude, released_or_nonnegative, released_or_positive_radius
from dpflow.nodes.rules import capped, has_public_n, public_n
from dpflow.nodes.types import Inferred, PiecesT, Relation, RowsT, Size, SplitRule, VType
from dpflow.references import Reference
from dpflow.tables import Category, Column, column_param, encoded_names, to_rows


def _vec_param(x: Any) -> Any:
    x = param(x)
    if x is None or isinstance(x, Ref):
        return x
    return finite_tuple(x, "a public vector parameter")


def _keys(k: Any) -> tuple[int | str, ...]:
    """Column keys: names (strings) or indices (integers)."""
    k = [k] if isinstance(k, (str, int)) else k
    return tuple(i if isinstance(i, str) else int(i) for i in k)


def _clip_radius(x: Any) -> Any:
    """A Clip radius: ``None``, a released handle, or a positive public number at most ``MAX_BOUND``."""
    try:
        return None if x is None else released_or_positive_radius(x)
    except ValueError as err:
        why = " (radius 0 maps every row to the centre: nothing about the data could be released)" if x == 0 else ""
        raise ValueError(f"Clip radius must be a finite positive number at most MAX_BOUND, got {x!r}{why}. "
                         "Fix: pass 0 < radius <= 2**256, or clip to a box only") from err


def _box_param(b: Any) -> tuple[float, float] | None:
    """One public ``(lower, upper)`` pair bounding every coordinate; anything else (one box per column, three
    numbers) is refused, naming the fix."""
    if b is None:
        return None
    arr = np.asarray(b, dtype=object)
    if arr.shape == (2,) and not any(np.ndim(v) for v in arr):
        return magnitude(arr[0]), magnitude(arr[1])
    per_column = arr.ndim == 2 and arr.shape[1] == 2
    raise ValueError(
        f"Clip box is one (lower, upper) pair for every coordinate, got {b!r}"
        + (f" ({arr.shape[0]} pairs: one box per column, which Clip does not take). Fix: rescale the columns to "
           "one box first, e.g. Precondition(matrix=b.public(np.diag(1 / (hi - lo))), center=lo) then "
           "Clip(box=(0.0, 1.0)) (lo, hi: the vectors of the columns' bounds), or clip each column on its own "
           "(Columns(keep=[name]) then Clip(box=(lo, hi)))" if per_column else
           ". Fix: pass box=(lower, upper)"))


def _clip_center(x: Any) -> Any:
    x = _vec_param(x)
    if isinstance(x, tuple):
        for v in x:
            magnitude(v)
    return x


def clip_box(A: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Coordinates clipped into ``[lo, hi]``; NaN entries count as 0 first (declared policy)."""
    out: np.ndarray = np.clip(np.where(np.isnan(A), 0.0, A), lo, hi)
    return out


def _center_name(c: Ref | tuple[float, ...] | None) -> str | None:
    if c is None:
        return None
    if isinstance(c, Ref):
        return c.id
    return "public(" + ",".join(f"{v:.6g}" for v in c[:4]) + (",..." if len(c) > 4 else "") + ")"


def _check_ref(ref: Any, ctx: InferContext, slot: str, shape: tuple[int, ...]) -> None:
    """A released parameter must have the shape the node needs (when its shape is known statically)."""
    if isinstance(ref, Ref):
        t = released_type(ref, ctx, slot)
        if t.shape is not None and t.shape != shape:
            raise DomainError(ctx.node_id, f"parameter {slot!r} refers to {ref.id} of shape {t.shape}, "
                              f"expected {shape}", f"pass a released value of shape {shape}")


def _scalar(ctx: EvalContext, p: Ref | float, slot: str) -> float:
    """A public or released scalar parameter (its shape is public, so a wrong one may raise)."""
    if not isinstance(p, Ref):
        return p
    v = np.asarray(ctx.value(p), dtype=float)
    if v.size != 1:
        raise DataError(ctx.node_id, f"the released {slot} {p.id} has shape {v.shape}, expected a scalar",
                        f"release a scalar {slot}")
    return float(v.reshape(()))


def _value(ctx: EvalContext, p: Ref | tuple[float, ...] | None, d: int) -> Any:
    """A public or released vector parameter of ``d`` floats (its shape is public, so a wrong one may raise)."""
    if p is None:
        return None
    v = np.asarray(ctx.value(p) if isinstance(p, Ref) else p, dtype=float)
    if v.shape != (d,):
        raise DataError(ctx.node_id, f"a released vector parameter has shape {v.shape}, expected ({d},)",
                        "release a vector of the rows' dimension")
    return v


@attrs.frozen(kw_only=True)
class Source(Node):
    """A private dataset of ``n`` rows in ``domain``.

    Under ``replace`` neighbours ``n`` is public (``None``: read from the data's
    shape, which is public).  Declared bounds of the domain are enforced by
    clipping, never by raising; ``BooleanCube`` maps non-zero entries to 1 and
    ``Ordinal`` clips into ``[0, N)``.  The coordinates of a declared one-hot
    :class:`dpflow.Category` are typed as a one-hot group (``Vectors.onehot``, when the
    declared domain has no l2 bound and its box, if any, holds 0 and 1) and enforced:
    a row whose group is not a vertex (see :func:`onehot_vertices`) takes the vertex of
    an unseen value.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=3), n=10)
    """

    kind: ClassVar[str] = "Source"
    name: str
    domain: RowDomain
    n: int | None = attrs.field(default=None, converter=attrs.converters.optional(integral))
    """Declared number of rows: an int (a numpy integer becomes one) or None."""
    columns: tuple[Column, ...] | None = attrs.field(default=None, converter=column_param)
    """Declared columns (names, :class:`dpflow.Category`): a DataFrame's are selected by name and encoded."""

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        if ins:
            raise PlanTypeError(ctx.node_id, "a source has no inputs", "remove the inputs")
        if self.n is not None and (isinstance(self.n, bool) or not isinstance(self.n, int)):
            raise DomainError(ctx.node_id, f"source {self.name} declares n={self.n!r} ({type(self.n).__name__}), "
                              "not an integer", "declare n as an int (e.g. n=len(data)), or None")
        if self.n is not None and self.n < 1:
            raise DomainError(ctx.node_id, f"source {self.name} declares n={self.n}", "declare n >= 1")
        if ctx.relation == "add_remove" and self.n is not None:
            raise DomainError(
                ctx.node_id,
                f"source {self.name} declares n={self.n}, but n is private under add_remove neighbours",
                "drop n, or declare neighbors='replace'",
            )
        vec = as_vectors(self.domain)
        if not vec.largest_bound() <= MAX_BOUND:
            raise DomainError(ctx.node_id, f"source {self.name} declares a bound of {vec.largest_bound():.6g}, "
                              f"beyond {MAX_BOUND:.6g}: sums of such rows can overflow float64",
                              "rescale the data so that its bounds are at most 1e77")
        if vec.center is not None or (vec.l2_bound is not None and not vec.l2_bound.is_const):
            raise DomainError(ctx.node_id, "a source's l2 bound must be a constant around the origin",
                              "declare Vectors(d, l2_bound=Sym.const(r)), or Clip after the source")
        if vec.l2_bound is not None and vec.box is not None and not vec.box[0] <= 0.0 <= vec.box[1]:
            raise DomainError(ctx.node_id, "a source with both an l2 bound and a box needs 0 inside the box",
                              "declare one of the two bounds, or Clip after the source")
        names = None if self.columns is None else encoded_names(self.columns)
        if names is not None and len(names) != vec.d:
            raise DomainError(ctx.node_id, f"source {self.name} declares d={vec.d} but its columns encode to "
                              f"{len(names)} coordinates {list(names)[:12]}",
                              f"declare d={len(names)}, or omit the domain (b.source(name, columns=...))")
        if vec.onehot:
            raise DomainError(ctx.node_id, f"source {self.name} declares one-hot groups in its domain",
                              "declare the categorical columns as dpflow.Category(name, [categories]) in the "
                              "source's columns: their one-hot groups are typed and enforced from there")
        public = ctx.relation == "replace"
        size = Size(public=public, known=self.n if public else None, ref=ctx.row_count())
        groups = tuple(tuple(range(start, start + width)) for start, width, _ in self.onehot_groups())
        rows = RowsT(_with_groups(vec, groups), self.name, size, 1, frozenset({ctx.relation}), names)
        typed = f" (typed {rows.domain.describe()})" if groups else ""
        return Inferred(rows, f"source {self.name}: {self.domain.describe()}{typed}, n={size.text()}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        raise PlanTypeError(ctx.node_id, "sources are bound by the interpreter", "report this as a dpflow bug")

    def prepare(self, raw: Any, node_id: str, relation: Relation = "replace") -> np.ndarray:
        """Check the public schema of ``raw`` and apply the domain's declared policy.

        Under ``add_remove`` neighbours the number of rows is private: an empty dataset (any array
        with no entries, e.g. the ``(0, 1)`` array of an empty CSV file) is the neighbour of a
        one-row dataset and becomes ``n = 0`` rows of the declared dimension; it never raises.
        Under ``replace`` n is public, and an empty dataset is a public schema error.

        >>> import dpflow as dp
        >>> Source(name="X", domain=dp.Vectors(d=3)).prepare(np.zeros((0, 1)), "source_0", "add_remove").shape
        (0, 3)
        """
        return self.policy(self.checked(np.asarray(to_rows(raw, self.columns, node_id)), node_id, relation))

    def checked(self, arr: Any, node_id: str, relation: Relation) -> Any:
        """``arr`` (a numpy or dask array) checked against the public schema, as ``(n, d)`` rows: only its
        shape and dtype are read."""
        if arr.dtype.kind not in "biuf":
            raise DataError(node_id, f"source {self.name} needs numeric data, got dtype {arr.dtype}",
                            "pass a numeric array, or declare categorical columns with "
                            "columns=[..., dpflow.Category(name, [categories])]")
        d = as_vectors(self.domain).d
        if arr.size == 0:  # no entries: no rows (an error below under replace-one neighbours)
            arr = arr.reshape(0, d)
        if arr.ndim == 1 and d == 1:
            arr = arr.reshape(-1, 1)
        if arr.ndim == 2 and arr.shape[0] == d and arr.shape[1] != d:
            k = arr.shape[1]
            also = "" if self.n == k else f" (or, if the rows really have {k} coordinates, declare d={k})"
            raise DataError(node_id, f"source {self.name} expects an (n, {d}) array with one row per record, got "
                            f"shape {arr.shape}: it looks transposed",
                            f"transpose it (pass X.T) so that the rows are records and the {d} columns are "
                            f"coordinates{also}")
        if arr.ndim != 2 or arr.shape[1] != d:
            raise DataError(node_id, f"source {self.name} expects an (n, {d}) array, got shape {arr.shape}",
                            f"pass {d} columns, or declare the source's dimension as {arr.shape[-1]}")
        if self.n is not None and arr.shape[0] != self.n:
            raise DataError(node_id, f"source {self.name} declares n={self.n} but the data has {arr.shape[0]} rows",
                            "pass the declared number of rows, or declare n=None to read it from the data")
        if arr.shape[0] < 1 and relation == "replace":
            raise DataError(node_id, f"source {self.name} is empty (n is public under replace-one neighbours)",
                            "pass at least one row")
        return arr

    def onehot_groups(self) -> tuple[tuple[int, int, bool], ...]:
        """``(first coordinate, width, exactly one)`` of each one-hot :class:`dpflow.Category` column: the groups
        the source types (``exactly one`` for ``unseen="other"``; at most one for ``"none"``).  None when the
        declared domain could not hold their vertices after its own policy (an l2 bound, or a box without
        0 or 1): the rows are then typed by the declared bounds alone."""
        vec = as_vectors(self.domain)
        if self.columns is None or vec.l2_bound is not None or (vec.box is not None
                                                               and not vec.box[0] <= 0.0 < 1.0 <= vec.box[1]):
            return ()
        out, start = [], 0
        for c in self.columns:
            width = c.width if isinstance(c, Category) else 1
            if isinstance(c, Category) and c.encoding == "onehot":
                out.append((start, width, c.unseen == "other"))
            start += width
        return tuple(out)

    def policy(self, arr: np.ndarray) -> np.ndarray:
        """The domain's declared policy applied to checked rows (row by row: a backend may apply it to
        each block of rows), after :func:`onehot_vertices` on the one-hot groups (whose vertices the domain's
        policy then keeps: the groups are typed only when its box holds 0 and 1 and it has no l2 bound)."""
        from dpflow.domains import BooleanCube, Ordinal

        arr = onehot_vertices(arr, self.onehot_groups())
        with np.errstate(all="ignore"):  # a wide float (longdouble) beyond float64 is +-inf, without a warning
            if isinstance(self.domain, Ordinal):
                ordinal: np.ndarray = ordinal_values(arr, self.domain.N)[:, None]
                return ordinal
            if isinstance(self.domain, BooleanCube):
                cube: np.ndarray = ((arr != 0) & ~np.isnan(arr)).astype(float)  # NaN counts as 0
                return cube
            vec = as_vectors(self.domain)  # Reals or Vectors: the other row domains returned above
            return into_domain(arr.astype(float, copy=False), vec.box,
                               None if vec.l2_bound is None else vec.l2_bound.coef)


def _with_groups(dom: Vectors, groups: tuple[tuple[int, ...], ...]) -> Vectors:
    """``dom`` with the one-hot ``groups`` (whose coordinates are 0 or 1, inside any box the groups survive):
    when they cover every coordinate, the box is ``[0, 1]``."""
    covered = sum(len(g) for g in groups) == dom.d
    return attrs.evolve(dom, onehot=groups, box=(0.0, 1.0) if covered else dom.box)


def onehot_vertices(A: np.ndarray, groups: Sequence[tuple[int, int, bool]]) -> np.ndarray:
    """Rows of ``A`` with the coordinates of each one-hot group ``(first, width, exactly_one)`` on a vertex of
    its simplex: entries 0 except one 1 (``exactly_one``, a Category with ``unseen="other"``) or at most
    one 1.  The declared policy for any other group row (NaN, a value not 0 or 1, two 1s, no 1 where one
    is needed), however it was fed in (a dask block, an array already encoded): it becomes the vertex of
    an unseen value, the group's last coordinate (``<other>``) or, with at most one 1, the zero row.
    ``Category.encode`` gives only vertices, which are kept as they are (``A`` itself when every row is).

    >>> onehot_vertices(np.array([[1.0, 0, 0], [1, 1, 0], [0, 0, 0], [0.5, 0, 0]]), [(0, 3, True)]).tolist()
    [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]
    >>> onehot_vertices(np.array([[0.0, 0.0], [np.nan, 0.0], [0.0, 1.0]]), [(0, 2, False)]).tolist()
    [[0.0, 0.0], [0.0, 0.0], [0.0, 1.0]]
    """
    out = A
    for first, width, exactly_one in groups:
        G = A[:, first:first + width]
        ones = G == 1.0
        k = ones.sum(axis=1)
        bad = np.flatnonzero(~(np.all(ones | (G == 0.0), axis=1) & ((k == 1) if exactly_one else (k <= 1))))
        if bad.size:
            out = np.array(A) if out is A else out  # inputs are never modified
            out[bad, first:first + width] = 0.0
            if exactly_one:
                out[bad, first + width - 1] = 1.0
    return out


@attrs.frozen(kw_only=True)
class Clip(Transform):
    """Project every row into an l2 ball (around the origin, a public or a released
    centre) and/or a coordinate box.

    Non-finite rows are mapped to the centre (the origin when there is none); the
    output bound is then guaranteed exactly, including floating-point error.

    Public radii, box endpoints and centre coordinates must be at most ``MAX_BOUND``
    (about 1.16e77) in magnitude, so that no sum of clipped rows can overflow float64;
    larger ones are refused here.  A *released* radius follows a declared policy at run
    time (never an exception, see ``rules.capped``): above ``MAX_BOUND`` (inf included) it
    is used as ``MAX_BOUND``, NaN or negative as 0; the sensitivity is evaluated with the
    released radius itself, never less than the one used.  A released centre needs no
    cap: a coordinate beyond ``MAX_BOUND * 2^54`` is farther than the radius from every
    other float, so every row takes that coordinate exactly (sums of it are then the same
    on every dataset); nearer centres keep sums far below overflow.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> Y = dp.nodes.Clip(radius=3.0)(b.source("X", dp.Vectors(d=2), n=10))
    """

    kind: ClassVar[str] = "Clip"
    reference: ClassVar[str] = "row-wise projection onto a convex set (stability 1)"
    radius: float | Ref | None = attrs.field(default=None, converter=_clip_radius)
    center: Ref | tuple[float, ...] | None = attrs.field(default=None, converter=_clip_center)
    box: tuple[float, float] | None = attrs.field(default=None, converter=_box_param)

    def __attrs_post_init__(self) -> None:
        if self.radius is None and self.box is None:
            raise ValueError("Clip needs a radius, a box, or both")
        if self.box is not None and not (self.box[0] <= self.box[1]):
            raise ValueError(f"Clip box must have lower <= upper, got {self.box}")
        if self.center is not None and self.radius is None:
            raise ValueError("Clip center needs a radius")

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        dom = rows.domain
        _check_ref(self.center, ctx, "center", (dom.d,))
        if self.center is not None and not isinstance(self.center, Ref) and len(self.center) != dom.d:
            raise DomainError(ctx.node_id, f"center has {len(self.center)} entries, rows have d={dom.d}",
                              "pass a centre of the rows' dimension")
        _check_ref(self.radius, ctx, "radius", ())
        l2, center, box = dom.l2_bound, dom.center, dom.box
        if self.radius is not None:
            l2 = Sym.ref(ReleasedScalar(self.radius.id)) if isinstance(self.radius, Ref) else Sym.const(self.radius)
            center = _center_name(self.center)
            origin_in_box = box is not None and box[0] <= 0.0 <= box[1]
            if not (center is None and origin_in_box):
                box = None
        if self.box is not None:
            # coordinate clipping is monotone: a box [b0, b1] maps into [clip(b0), clip(b1)]
            lo, hi = self.box
            box = self.box if box is None else (min(max(box[0], lo), hi), max(min(box[1], hi), lo))
            # it shrinks every coordinate towards 0 only when 0 is inside the box, so an l2 ball
            # around the origin survives; any other ball does not
            if not (center is None and lo <= 0.0 <= hi):
                l2, center = None, None
        # a box holding 0 and 1 leaves the vertices of one-hot groups where they are; a ball may scale them
        keep = self.radius is None and self.box is not None and self.box[0] <= 0.0 < 1.0 <= self.box[1]
        out = Vectors(d=dom.d, l2_bound=l2, box=box, center=center, onehot=dom.onehot if keep else ())
        return Inferred(attrs.evolve(rows, domain=out), f"clip {dom.describe()} -> {out.describe()}; {self.missing()}")

    def missing(self) -> str:
        """The declared policy for values that are not finite numbers, as the ledger states it."""
        if self.radius is not None:
            return "missing values: a row with a NaN or infinite entry goes to the centre"
        return "missing values: NaN counts as 0, then clipped (+-inf to the nearest end)"

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        X = float_rows(ctx, ins[0])
        d = X.shape[1]
        c = _value(ctx, self.center, d)
        if self.radius is not None:
            r = capped(_scalar(ctx, self.radius, "radius"))
            X = ctx.backend.row_map(X, lambda A: project_ball(A, c, r), lambda A: project_ball(A, c, r, True))
        if self.box is not None:
            lo, hi = self.box
            X = ctx.backend.row_map(X, lambda A: clip_box(A, lo, hi))
        return X


def project_ball(X: np.ndarray, c: np.ndarray | None, r: float, overwrite: bool = False) -> np.ndarray:
    """Rows of ``X`` projected into the closed l2 ball B(c, r), exactly.

    Non-finite rows go to the centre.  After scaling, a row whose computed norm
    still exceeds ``r`` by floating-point error is shrunk once more, and any that
    still does (never observed) is sent to the centre: the bound holds exactly.
    Rows certified inside the ball (with a rigorous bound on the rounding error of
    their distance) are returned unchanged; when every row is, ``X`` itself is
    returned (never modified): the fast path costs two reads of ``X`` and no copy.  With ``overwrite`` a
    writable float ``X`` is itself moved into the ball (no copy; for an array no one else reads).

    >>> project_ball(np.array([[3.0, 4.0]]), None, 1.0)
    array([[0.6, 0.8]])
    """
    with np.errstate(all="ignore"):  # nothing here may warn or raise on private values
        A = np.asarray(X, dtype=float)
        sq = np.einsum("ij,ij->i", A, A)
        if c is None:
            dist2, slack = sq, 0.0
        else:
            cc = float(c @ c)
            dist2 = sq - 2.0 * (A @ c) + cc  # ||x - c||^2 without an (n, d) temporary
            # rigorous bound on its rounding error: (d + 3) eps (||x|| + ||c||)^2, with a factor 4 to spare
            slack = 4.0 * (A.shape[1] + 3) * np.finfo(float).eps * (np.sqrt(sq) + math.sqrt(cc)) ** 2
        # rows outside, within a relative 1e-12 of the boundary, or non-finite (NaN compares false) are
        # moved exactly, as a subset
        inner = r * (1.0 - 1e-12)
        idx = np.flatnonzero(~(dist2 + slack <= inner * inner))  # a product: inf for a huge r, never OverflowError
        if not idx.size:
            return A  # every row is certified inside: nothing to copy (inputs are never modified)
        # the one fresh (n, d) array, unless X may be overwritten; rows certified inside are kept as they are
        Y = A if overwrite and A is X and A.flags.writeable else np.array(A)
        D = A[idx] if c is None else A[idx] - c
        Y[idx] = _into_ball(D, np.sqrt(np.einsum("ij,ij->i", D, D)), r)
        if c is not None:
            Y[idx] += c
    return Y


def into_domain(A: np.ndarray, box: tuple[float, float] | None, r: float | None,
                c: np.ndarray | None = None) -> np.ndarray:
    """Rows of ``A`` moved into the ball ``B(c, r)`` (:func:`project_ball`; none when ``r`` is ``None``) and
    then clipped into ``box`` (:func:`clip_box`; none when ``None``): the one way a node enforces a declared
    :class:`~dpflow.domains.Vectors` domain on rows it computed.

    Exact for one bound, and for both when ``c`` is ``None`` and ``0`` lies in the box: clipping then moves
    every coordinate towards 0, so no norm grows.  Domains with a ball and a box in any other position are
    never declared (``Source`` refuses them, ``Clip`` and ``SubsampleAggregate`` drop the ball).

    >>> into_domain(np.array([[3.0, 4.0]]), (0.0, 0.5), 1.0)
    array([[0.5, 0.5]])
    """
    if r is not None:
        A = project_ball(A, c, r)
    return A if box is None else clip_box(A, box[0], box[1])


def _into_ball(D: np.ndarray, norms: np.ndarray, r: float) -> np.ndarray:
    """Rows ``D`` (with their computed norms) moved into the closed ball B(0, r), exactly.

    Non-finite rows go to 0; rows whose sum of squares overflowed are rescaled first; a row whose
    computed norm still exceeds r by floating-point error is shrunk once more, then sent to 0.
    """
    bad = ~np.all(np.isfinite(D), axis=1)
    D[bad] = 0.0
    norms = np.where(bad, 0.0, norms)
    huge = ~np.isfinite(norms)  # finite entries whose sum of squares overflowed
    if huge.any():
        Dh = D[huge] / np.max(np.abs(D[huge]), axis=1, keepdims=True)
        D[huge] = Dh * (r / np.linalg.norm(Dh, axis=1))[:, None]
    scale = ~huge & (norms > r)
    D[scale] *= (r / norms[scale])[:, None]
    over = np.linalg.norm(D, axis=1) > r
    if over.any():
        D[over] *= 1.0 - 4.0 * np.finfo(float).eps
        still = np.linalg.norm(D, axis=1) > r
        D[still] = 0.0
    return D


@attrs.frozen(kw_only=True)
class Precondition(Transform):
    """Row-wise affine map ``x -> A (x - c)`` by a released (or public) matrix and centre.

    The output is unbounded: follow it with ``Clip``.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> A = b.public([[2.0, 0.0], [0.0, 1.0]])
    >>> Y = dp.nodes.Precondition(matrix=A)(b.source("X", dp.Vectors(d=2), n=10))
    """

    kind: ClassVar[str] = "Precondition"
    reference: ClassVar[str] = "row-wise map by released parameters (stability 1)"
    matrix: Ref = attrs.field(converter=param)
    center: Ref | tuple[float, ...] | None = attrs.field(default=None, converter=_vec_param)
    d_out: int | None = None

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        if not isinstance(self.matrix, Ref):
            raise PlanTypeError(ctx.node_id, "matrix must be a released handle", "wrap it with public()")
        mt = released_type(self.matrix, ctx, "matrix")
        d_out = self.d_out
        if mt.shape is not None:
            if len(mt.shape) != 2 or mt.shape[1] != rows.domain.d:
                raise DomainError(ctx.node_id, f"matrix shape {mt.shape} does not map d={rows.domain.d}",
                                  f"pass a (k, {rows.domain.d}) matrix")
            d_out = mt.shape[0] if d_out is None else d_out
        _check_ref(self.center, ctx, "center", (rows.domain.d,))
        out = Vectors(d=d_out if d_out is not None else rows.domain.d)
        return Inferred(attrs.evolve(rows, domain=out, columns=None),
                        f"affine map by {self.matrix.id} -> {out.describe()}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        X = float_rows(ctx, ins[0])
        A = np.asarray(ctx.value(self.matrix), dtype=float)
        c = _value(ctx, self.center, X.shape[1])
        if A.ndim != 2 or A.shape[1] != X.shape[1]:
            raise DataError(ctx.node_id, f"the released matrix has shape {A.shape}, rows have d={X.shape[1]}",
                            f"release a (k, {X.shape[1]}) matrix")
        square = A.shape[0] == A.shape[1]
        diag = np.diagonal(A).copy() if square and not np.any(A[~np.eye(len(A), dtype=bool)] != 0) else None
        return ctx.backend.row_map(X, lambda Z: _affine(Z, A, c, diag))


def _affine(Z: np.ndarray, A: np.ndarray, c: np.ndarray | None, diag: np.ndarray | None = None) -> np.ndarray:
    """Rows ``A (z - c)``; ``diag``: A's diagonal when every other entry is 0 (CoinPress's first round, I / sqrt(K)),
    which scales the coordinates: each entry is the one product ``a_ii z_i`` the matrix product rounds too (its
    other terms are exact zeros), with no d x d product per row."""
    with np.errstate(all="ignore"):  # non-finite rows stay non-finite; nothing may warn on private values
        W = Z if c is None else Z - c
        # (A W^T)^T: the same rows as W A^T, as a Fortran-ordered array; BLAS is ~30% faster this way
        # round for tall data, and the column-wise reductions that follow are too
        out: np.ndarray = W * diag if diag is not None else (A @ W.T).T
    return out


def _pair_differences(Z: np.ndarray) -> np.ndarray:
    """Row-wise on the ``(m, 2d)`` pairs: ``(left half - right half) / sqrt(2)``."""
    d = Z.shape[1] // 2
    with np.errstate(all="ignore"):  # inf - inf is NaN (into_domain or the next Clip): never a warning
        out: np.ndarray = np.subtract(Z[:, :d], Z[:, d:], dtype=float)
        np.divide(out, math.sqrt(2.0), out=out)  # in place: no second half-size temporary
    return out


def _differences_in(box: tuple[float, float] | None, r: float | None, Z: np.ndarray) -> np.ndarray:
    """:func:`_pair_differences` moved into the declared domain (:func:`into_domain`)."""
    return into_domain(_pair_differences(Z), box, r)


@attrs.frozen(kw_only=True)
class PairDifferences(Transform):
    """Rows ``(x[2i] - x[2i+1]) / sqrt(2)`` for i < n // 2: mean-zero rows with the same
    covariance, for estimating a covariance when the mean is unknown.

    Each record is in one pair, so the stability stays 1 (replace neighbours only:
    under add/remove a deletion would shift every later pair).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> Y = dp.nodes.PairDifferences()(b.source("X", dp.Vectors(d=2), n=10))
    """

    kind: ClassVar[str] = "PairDifferences"
    reference: ClassVar[Reference] = Reference("KLSU 2019 / Karwa-Vadhan 2018: pairing for unknown means",
                                               "gaussian.md", "0.4")

    @staticmethod
    def _domain(dom: Vectors) -> Vectors:
        """Differences of two rows of ``dom`` over sqrt(2): norm <= diameter / sqrt(2), each coordinate within
        +-(box width) / sqrt(2); a box symmetric about 0 and a ball around 0, so :func:`into_domain` keeps both."""
        diam = dom.diameter_l2()
        box = None
        if dom.box is not None:
            w = (dom.box[1] - dom.box[0]) / math.sqrt(2.0)
            box = (-w, w)
        return Vectors(d=dom.d, l2_bound=None if diam is None else diam / math.sqrt(2.0), box=box)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        public_n(rows, ctx, "PairDifferences (pairs by position)")
        out = self._domain(rows.domain)
        known = None if rows.size.known is None else rows.size.known // 2
        if known == 0:
            raise DomainError(ctx.node_id, "fewer than two rows to pair", "use a source with n >= 2")
        size = Size(public=True, known=known, ref=ctx.row_count())
        return Inferred(attrs.evolve(rows, domain=out, size=size),
                        f"pairs of {rows.domain.describe()}: norm <= diameter/sqrt(2) = {text_of(out.l2_bound)}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        rows = ctx.input_type(0)
        assert isinstance(rows, RowsT)
        # in exact arithmetic the differences lie in the declared domain; as computed, a norm can exceed the
        # declared bound by an ulp (hi - lo in 29 coordinates: 5.297643745926349 > 5.297643745926348), so the
        # domain is enforced as SubsampleAggregate does, and the sensitivities derived from it hold for these rows
        dom = self._domain(rows.domain)
        r = None if dom.l2_bound is None else capped(ctx.bound(dom.l2_bound))
        return ctx.backend.row_map(ctx.backend.pair_rows(ins[0]), functools.partial(_differences_in, dom.box, r))


@attrs.frozen(kw_only=True)
class SplitByIndex(Node):
    """Split rows into ``pieces`` contiguous blocks by position (``np.array_split``).

    A replaced record stays in its block, so mechanisms on different blocks compose
    in parallel (max).  Replace neighbours only.  Use :func:`split` to get the pieces.
    """

    kind: ClassVar[str] = "SplitByIndex"
    reference: ClassVar[str] = "McSherry 2009 (PINQ) parallel composition over a data-independent partition"
    pieces: int = attrs.field(converter=integral)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        if self.pieces < 1:
            raise PlanTypeError(ctx.node_id, f"pieces={self.pieces}", "split into at least one piece")
        public_n(rows, ctx, "SplitByIndex (splits by position; or split by a value with PartitionByBall)")
        if rows.size.known is not None and rows.size.known < self.pieces:
            raise DomainError(ctx.node_id, f"{rows.size.known} rows cannot fill {self.pieces} pieces",
                              "use fewer pieces")
        return Inferred(PiecesT(rows, self.pieces, SplitRule.INDEX), f"{self.pieces} contiguous blocks by index")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        return list(np.array_split(np.asarray(ins[0]), self.pieces))


@attrs.frozen(kw_only=True)
class PartitionByBall(Node):
    """Split rows by a value rule: piece 0 holds rows within ``radius`` of ``center``
    (public or released), piece 1 the rest (non-finite rows go to piece 1).

    Piece sizes are private.  Under replace neighbours a record can move between
    the pieces, so each piece sees add/remove changes and the two most expensive
    pieces add (parallel composition, replace-one rule).
    """

    kind: ClassVar[str] = "PartitionByBall"
    reference: ClassVar[Reference] = Reference("parallel composition over a partition by released parameters",
                                               "mixtures.md", "2.4")
    center: Ref | tuple[float, ...] = attrs.field(converter=_vec_param)
    radius: float | Ref = attrs.field(converter=released_or_nonnegative)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        _check_ref(self.center, ctx, "center", (rows.domain.d,))
        if not isinstance(self.center, Ref) and len(self.center) != rows.domain.d:
            raise DomainError(ctx.node_id, f"center has {len(self.center)} entries, rows have d={rows.domain.d}",
                              "pass a centre of the rows' dimension")
        _check_ref(self.radius, ctx, "radius", ())
        return Inferred(PiecesT(rows, 2, SplitRule.VALUE), f"inside / outside the ball ({_center_name(self.center)})")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        X = np.asarray(ins[0], dtype=float)
        c = _value(ctx, self.center, X.shape[1])
        r = _scalar(ctx, self.radius, "radius")
        with np.errstate(all="ignore"):
            inside = np.linalg.norm(X - c, axis=1) <= r
        return [X[inside], X[~inside]]


@attrs.frozen(kw_only=True)
class Piece(Node):
    """Piece ``index`` of a split (made by :func:`split`)."""

    kind: ClassVar[str] = "Piece"
    reference: ClassVar[Reference] = Reference("parallel composition over disjoint pieces (McSherry 2009, PINQ): an "
                                               "index block keeps a replaced record, a value piece can gain or lose "
                                               "one", "accounting.md", "1.5")
    index: int = attrs.field(converter=integral)

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        pieces: PiecesT = need(ins, PiecesT, ctx, "the pieces of a split")
        if not 0 <= self.index < pieces.count:
            raise PlanTypeError(ctx.node_id, f"piece {self.index} of {pieces.count}", "use a valid index")
        rows = pieces.rows
        count = ctx.row_count()
        if pieces.rule is SplitRule.INDEX:
            known = None
            if rows.size.known is not None:
                q, rem = divmod(rows.size.known, pieces.count)
                known = q + (1 if self.index < rem else 0)
            out = attrs.evolve(rows, size=Size(public=True, known=known, ref=count))
            return Inferred(out, f"block {self.index} of {pieces.count}, n={out.size.text()}")
        bound = rows.size.sym() if has_public_n(rows) else rows.size.at_most  # the piece's rows are among them
        out = attrs.evolve(rows, size=Size(public=False, known=None, ref=count, at_most=bound),
                           changes=rows.changes | {"add_remove"})
        return Inferred(out, f"value piece {self.index}: private size, a record may move in or out")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        return ins[0][self.index]


def split(x: Sensitive[Rows], rule: Node) -> tuple[Sensitive[Rows], ...]:
    """Apply a split (``SplitByIndex``, or a value partition: two pieces such as ``PartitionByBall``, or as
    many as the rule's ``pieces``) and return one handle per piece.

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> a, c = dp.nodes.split(b.source("X", dp.Vectors(d=2), n=10), dp.nodes.SplitByIndex(pieces=2))
    """
    sid = x.builder.add(rule, (x.id,))
    count = int(getattr(rule, "pieces", 2))
    return tuple(Sensitive(x.builder.add(Piece(index=i), (sid,)), x.builder) for i in range(count))


@attrs.frozen(kw_only=True)
class Columns(Transform):
    """Keep the public list of columns ``keep`` (a coordinate projection, stability 1).

    Box bounds carry over; an l2 bound around the origin carries over (dropping
    coordinates never increases a norm); one around another centre is dropped.  The kept
    coordinates of a one-hot group stay a group (a subset of a vertex has at most one 1).

    >>> import dpflow as dp
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> first = dp.nodes.Columns(keep=[0])(b.source("X", dp.Vectors(d=3), n=10))
    """

    kind: ClassVar[str] = "Columns"
    reference: ClassVar[str] = "coordinate projection (row-wise, stability 1)"
    keep: tuple[int | str, ...] = attrs.field(converter=_keys)

    def indices(self, rows: RowsT, node_id: str) -> tuple[int, ...]:
        """The kept coordinates' indices (names resolved against the rows' column names)."""
        names = rows.columns
        if any(isinstance(k, str) for k in self.keep) and names is None:
            raise DomainError(node_id, f"columns {list(self.keep)} are named, but the rows have no column names",
                              "declare the source's columns (b.source(name, columns=[...])) or keep by index")
        idx = tuple(k if isinstance(k, int) else (names.index(k) if names and k in names else -1)
                    for k in self.keep)
        d = rows.domain.d
        if not idx or any(not 0 <= i < d for i in idx) or len(set(idx)) != len(idx):
            known = "" if names is None else f" (columns {list(names)[:20]})"
            raise DomainError(node_id, f"columns {list(self.keep)} do not select from d={d}{known}",
                              f"pass distinct column names or indices in [0, {d})")
        return idx

    def infer(self, ins: Sequence[VType], ctx: InferContext) -> Inferred:
        rows: RowsT = need(ins, RowsT, ctx, "sensitive rows")
        dom = rows.domain
        idx = self.indices(rows, ctx.node_id)
        l2 = dom.l2_bound if dom.center is None else None
        at = {i: j for j, i in enumerate(idx)}
        groups = tuple(kept for g in dom.onehot if (kept := tuple(sorted(at[i] for i in g if i in at))))
        out = _with_groups(Vectors(d=len(idx), l2_bound=l2, box=dom.box), groups)
        names = None if rows.columns is None else tuple(rows.columns[i] for i in idx)
        return Inferred(attrs.evolve(rows, domain=out, columns=names),
                        f"columns {list(self.keep)} -> {out.describe()}")

    def evaluate(self, ins: Sequence[Any], ctx: EvalContext) -> Any:
        t = ctx.input_type(0)
        assert isinstance(t, RowsT)
        idx = list(self.indices(t, ctx.node_id))
        return ctx.backend.row_map(ins[0], lambda Z: Z[:, idx])
