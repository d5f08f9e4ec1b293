"""Plan validation, whatever built the plan (builder, ``Plan(...)``, JSON): sources declared once
at the top level, well-formed loop bodies, outputs and node parameters released."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import attrs

from dpflow.domains import RowCount, Sym, SymRef
from dpflow.errors import PlanReferenceError, PlanTypeError, PostProcessingError
from dpflow.nodes import NodeRecord, Source
from dpflow.nodes.base import released_type
from dpflow.nodes.control import Control, Input, Round, State
from dpflow.nodes.types import PiecesT, ReleasedT, RowsT, StatT, VType
from dpflow.plan.graph import Plan
from dpflow.planner.infer import TypedScope, _Ctx, _infer_space, _key, _spaces


def _check_records(records: Sequence[NodeRecord], path: str, sources: dict[str, str]) -> None:
    """Refuse, before inference, what the per-source folds cannot charge: a ``Source`` inside a
    control body (the folds start at the top-level sources), a source name declared twice (the
    data and the ledger are keyed by name), and a body without exactly one ``Input`` and one
    ``State`` stand-in and at most one ``Round`` (a body's fold starts at its single ``Input``), and a
    stand-in with inputs (the loop binds it; inputs would be ignored or unfolded)."""
    for rec in records:
        node = rec.node
        if isinstance(node, Source):
            if path:
                raise PlanTypeError(path + rec.id, f"source {node.name} is declared inside a control body",
                                    "declare every source on the top-level builder and pass its rows into the "
                                    "body as the first argument of repeat or partition_tree")
            if node.name in sources:
                raise PlanTypeError(rec.id, f"source {node.name} is declared twice (also by {sources[node.name]})",
                                    "declare each source once and reuse its handle")
            sources[node.name] = rec.id
        elif isinstance(node, (Input, State, Round)) and rec.inputs:
            raise PlanTypeError(path + rec.id, f"the {node.kind} stand-in is given inputs {list(rec.inputs)}",
                                "stand-ins take no inputs: build the body with dpflow.nodes.repeat")
        elif isinstance(node, Control):
            counts = Counter(type(r.node) for r in node.body.records)
            for stand_in, least in ((Input, 1), (State, 1), (Round, 0)):
                if not least <= counts[stand_in] <= 1:
                    raise PlanTypeError(path + rec.id, f"the body has {counts[stand_in]} {stand_in.kind} stand-ins",
                                        "build the body with dpflow.nodes.repeat or partition_tree (one Input, one "
                                        "State, "
                                        "at most one Round)")
            _check_records(node.body.records, f"{path}{rec.id}/", sources)


def _check_released(plan: Plan, space: TypedScope) -> None:
    """Refuse, after inference, an output or a node parameter that is not a released value of its
    own namespace (top level for outputs): only released values may leave the plan or steer a node."""
    if not plan.outputs:
        raise PlanTypeError(plan.name, "the plan releases nothing", "name at least one released output")
    for name, nid in plan.outputs:
        t = space.types.get(nid)
        if t is None:
            raise PlanReferenceError(nid, f"output {name!r} refers to {nid!r}, which is not a top-level node "
                                     "of the plan", "point the output at a released top-level node")
        if not isinstance(t, ReleasedT):
            raise PostProcessingError(nid, f"output {name!r} is a sensitive {type(t).__name__.removesuffix('T')} "
                                      f"({space.records[nid].node.kind}), not a released value",
                                      "release it through a mechanism (GaussianMech, LaplaceMech, ...) first")
    for sp in _spaces(space):
        for rec in sp.order:
            node = rec.node
            for ref in node.refs():
                slot = next((f.name for f in attrs.fields(type(node)) if getattr(node, f.name) is ref), "parameter")
                released_type(ref, _Ctx(plan.neighbors, _key(sp, rec.id), sp.types, rec.id), slot)


def _bound_refs(t: VType) -> list[SymRef]:
    """The typed run-time refs of every bound a static type carries (row bounds, count, sensitivities,
    float-error bound)."""
    rows = t.rows if isinstance(t, PiecesT) else t
    syms: list[Sym | None] = []
    refs: list[SymRef] = []
    if isinstance(rows, RowsT):  # a private count is never evaluated (``public_n`` refuses its use)
        syms += [rows.domain.l2_bound, rows.size.sym() if rows.size.public else None]
    elif isinstance(t, StatT):
        syms += [t.l1, t.l2, t.linf, t.rank]
        if t.float_error is not None:
            refs += t.float_error.refs()
    return refs + [r for s in syms if s is not None for r in s.refs()]


def _check_bound_refs(space: TypedScope) -> None:
    """Resolve every run-time ref of every bound in every scope: a :class:`RowCount` must name a dataset
    node of the same scope, a :class:`ReleasedScalar` or :class:`ReleasedNorm` a released node of it (the
    interpreter evaluates a bound from its own scope's values only).  Refused before data, naming the node
    whose type carries the ref."""
    for sp in _spaces(space):
        for nid, t in sp.types.items():
            for ref in _bound_refs(t):
                target = sp.types.get(ref.node)
                want = (RowsT, PiecesT) if isinstance(ref, RowCount) else (ReleasedT,)
                if not isinstance(target, want):
                    what = "a dataset node" if isinstance(ref, RowCount) else "a released node"
                    raise PlanReferenceError(sp.path + nid, f"a bound of its type refers to {ref.text()}, which "
                                             f"is not {what} of the same scope", "declare bounds only in terms of "
                                             "the public row counts and released values of the node's own scope")


def _validated_space(plan: Plan) -> TypedScope:
    """The typed top-level space of ``plan``, whatever built it (builder, ``Plan(...)``, JSON): the
    first step of certification, so ``certify``, ``Plan.check`` and ``run`` all go through it."""
    _check_records(plan.records, "", {})
    space = _infer_space(plan.records, plan.neighbors, "")
    _check_released(plan, space)
    _check_bound_refs(space)
    return space
