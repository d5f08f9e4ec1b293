"""The interpreter: a short loop over a certified plan's nodes in topological order.

It only reads the certificate: every mechanism invocation gets the allocation the planner certified
for it (:class:`dpflow.planner.InvocationTable`), rounds of ``Repeat`` loops included.  A control node runs its
body through :meth:`_Ctx.run_body` (its own ``evaluate`` says how often and on what).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from dpflow.domains import ReleasedNorm, RowCount, Sym, SymRef
from dpflow.errors import DEBUG_ENV, DataError, ExecutionError, PlanError, UnknownSourceError, debug_requested
from dpflow.handles import Ref
from dpflow.interpreter.noise import NoiseSource
from dpflow.interpreter.progress import Progress
from dpflow.nodes import Mechanism, NodeRecord, Source
from dpflow.nodes.base import Backend
from dpflow.nodes.control import Control, Input, Repeat, Round, State, needed
from dpflow.nodes.types import Allocation, ReleasedT, RowsT, StatT, VType
from dpflow.plan.graph import Plan
from dpflow.planner import Certified, TypedScope
from dpflow.privacy.rounding import up


@attrs.frozen(eq=False)
class Execution:
    """What a run produced: the released outputs and run-time facts (noise scales)."""

    released: dict[str, Any]
    facts: dict[str, list[dict[str, Any]]]
    noise: str
    seeded: bool
    backend: str
    outputs: dict[str, str] = attrs.field(factory=dict)
    """Output name -> the id of the node that released it (public: the plan's structure)."""
    settings: dict[str, Any] = attrs.field(factory=dict)
    """The engine's settings (backend, chunking, number of workers)."""


@attrs.frozen
class Freed:
    """What stays of rows that no later node reads: their shape's row count, which a later bound may name
    (``backend.nrows`` reads it like any array's)."""

    shape: tuple[int]


class _Ctx:
    """The evaluation context handed to nodes (see ``dpflow.nodes.base.EvalContext``)."""

    def __init__(self, run: _Run, space: TypedScope, env: dict[str, Any], rounds: tuple[int, ...] = ()) -> None:
        self.run = run
        self.space = space
        self.env = env
        self.rounds = rounds
        self.node_id = ""
        self.backend: Backend = run.backend
        self.noise = run.noise
        self._rec: NodeRecord | None = None

    def value(self, ref: Ref) -> Any:
        return self.env[ref.id]

    def bound(self, sym: Sym) -> float:
        return sym.value(self.public_values(sym.refs()))

    def public_values(self, refs: Sequence[SymRef]) -> dict[SymRef, float]:
        vals: dict[SymRef, float] = {}
        for ref in refs:
            value = self.env[ref.node]
            if isinstance(ref, RowCount):
                vals[ref] = float(self.backend.nrows(value))
            elif isinstance(ref, ReleasedNorm):  # rounded up; a NaN entry makes the norm unbounded (inf)
                norm = float(np.linalg.norm(np.asarray(value, dtype=float)))
                vals[ref] = math.inf if math.isnan(norm) else up(norm)
            else:
                vals[ref] = float(np.asarray(value, dtype=float))
        return vals

    def allocation(self) -> Allocation:
        assert self._rec is not None
        return self.allocation_of(Ref(self._rec.id))[1]

    def allocation_of(self, ref: Ref) -> tuple[Mechanism, Allocation]:
        node = self.space.records[ref.id].node
        assert isinstance(node, Mechanism)
        return node, self.run.cert.invocations.at(self.space.path + ref.id, self.rounds)

    def stat(self) -> StatT:
        assert self._rec is not None
        t = self.space.types[self._rec.inputs[0]]
        assert isinstance(t, StatT)
        return t

    def input_type(self, k: int = 0) -> VType:
        assert self._rec is not None
        return self.space.types[self._rec.inputs[k]]

    def record(self, key: str, value: Any) -> None:
        self.run.facts[self.node_id].append({key: value})

    def run_body(self, bindings: Mapping[type, Any], wanted: Sequence[str], env: dict[str, Any] | None = None,
                 round_index: int | None = None) -> dict[str, Any]:
        """Evaluate what ``wanted`` needs of the body of the control node being evaluated (``EvalContext``)."""
        assert self._rec is not None
        rec, path = self._rec, self.node_id
        body = self.space.bodies[rec.id]
        rounds = self.rounds
        if round_index is not None:
            node = rec.node
            assert isinstance(node, Repeat)
            rounds = (*rounds, self.run.cert.invocations.rounds[path][round_index])
            self.run.rounds_text = f"{path} round {round_index + 1}/{node.times}"
        if env is None:
            ids = {type(r.node): r.id for r in body.order if isinstance(r.node, (Input, State, Round))}
            env = {ids[k]: v for k, v in bindings.items() if k in ids}
        self.run.keep.update(wanted)
        try:
            return self.run.space_values(body, env, rounds, needed(body.order, wanted))
        finally:
            self.node_id, self.run.at = path, path

    def data(self, name: str) -> Any:
        return self.run.data[name]


class _Run:
    frees = True
    """Drop each value once its last reader has run (an audit that inspects every value turns it off)."""

    def __init__(self, cert: Certified, data: Mapping[str, np.ndarray], noise: NoiseSource, backend: Backend):
        self.cert = cert
        self.data = data
        self.noise = noise
        self.backend = backend
        self.facts: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.progress = Progress(cert.plan.name)
        self.rounds_text = ""
        self.top_done = 0
        self.top_total = 0
        self.keep: set[str] = {nid for _, nid in cert.plan.outputs}
        self.at = ""
        """The node being evaluated (an engine failure names it)."""

    def space_values(self, space: TypedScope, env: dict[str, Any], rounds: tuple[int, ...] = (),
                     only: frozenset[str] | None = None) -> dict[str, Any]:
        """Evaluate ``space`` into ``env``; ``rounds``: the weight classes of the enclosing loops' rounds; ``only``:
        the nodes to evaluate (a control body's run; a node already in ``env`` is not evaluated again).

        A value is dropped from ``env`` as soon as the last node that reads it has run, unless it is in
        ``self.keep`` (what the caller reads), ``self.frees`` is off, or it is released (a released value
        may be named by a later bound); freed rows leave their public row count behind (:class:`Freed`).
        A value that several nodes read is persisted by the backend (computed once)."""
        ctx = _Ctx(self, space, env, rounds)
        left, shared = _reads(space)
        top = not space.path
        for i, rec in enumerate(space.order):
            if only is not None and (rec.id not in only or rec.id in env):
                continue
            if top:
                self.rounds_text = ""
            self.progress.update(i if top else self.top_done, self.top_total, self.rounds_text)
            if top:
                self.top_done = i
            node = rec.node
            ctx.node_id = self.at = space.path + rec.id
            ctx._rec = rec
            if isinstance(node, Source):
                env[rec.id] = self.data[node.name]
            elif isinstance(node, (Input, State, Round)):
                continue  # bound by the caller
            else:
                env[rec.id] = self.evaluate(rec, [env[i] for i in rec.inputs], ctx)
            if rec.id in shared:
                env[rec.id] = self.backend.persist(env[rec.id])
            for used in space.reads[rec.id]:
                left[used] -= 1
                kind = space.types.get(used)
                if left[used] == 0 and self.frees and used not in self.keep and not isinstance(kind, ReleasedT):
                    if isinstance(kind, RowsT):  # a bound may still name its row count
                        env[used] = Freed((self.backend.nrows(env[used]),))
                    else:
                        del env[used]
        return env

    def evaluate(self, rec: NodeRecord, ins: list[Any], ctx: _Ctx) -> Any:
        """One node's value from its inputs' values: the single place a node is evaluated, so that the
        record/replay audit (``tests/audit/test_replay.py``) can record each mechanism's pre-noise input and
        force its release to another run's."""
        return rec.node.evaluate(ins, ctx)


def _reads(space: TypedScope) -> tuple[dict[str, int], set[str]]:
    """How many nodes read each value of ``space`` (input slots and released-parameter references),
    and the values read more than once (by several nodes, or by every run of a control body)."""
    left: dict[str, int] = defaultdict(int)
    shared: set[str] = set()
    for rec in space.order:
        for used in space.reads[rec.id]:
            left[used] += 1
        if isinstance(rec.node, Control) and not (isinstance(rec.node, Repeat) and rec.node.times == 1):
            shared.add(rec.inputs[0])
    shared.update(k for k, v in left.items() if v > 1)
    return left, shared


PUBLIC_REFUSALS = (DataError, PlanError)
"""The exceptions a run may raise with its budget reservation given back: a public schema refusal (shape,
dtype, declared columns, declared n, unknown sources), decided from public facts only."""


def source_data(plan: Plan, data: Any) -> Mapping[str, Any]:
    """``data`` as a mapping from source name to rows.

    A mapping is returned as it is.  A single array is accepted when the plan has exactly one
    source (it is that source's rows); otherwise the error names the sources to pass by name.

    >>> import numpy as np, dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=2), n=3)
    >>> sorted(source_data(b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))), np.zeros((3, 2))))
    ['X']
    """
    if isinstance(data, Mapping):
        return data
    names = [r.node.name for r in plan.records if isinstance(r.node, Source)]
    what = type(data).__name__
    if len(names) == 1 and (isinstance(data, (list, tuple)) or hasattr(data, "__array__")):
        return {names[0]: data}
    shown = ", ".join(f"{n!r}: ..." for n in names)
    raise UnknownSourceError(plan.name, f"the data is a {what}, not a mapping from source name to rows, and "
                             f"the plan has {len(names)} sources {names}",
                             f"pass a dict, e.g. plan.run({{{shown}}})")


def prepare_data(cert: Certified, data: Mapping[str, Any] | np.ndarray,
                 backend: Backend | None = None) -> dict[str, Any]:
    """Check the data against the public schema of every source (before any value is used); ``backend``
    (default numpy) holds the rows.  Only a public schema refusal (:data:`PUBLIC_REFUSALS`) names its problem;
    any other failure while a source is read is an :class:`ExecutionError` naming the source and the
    exception's type only."""
    data = source_data(cert.plan, data)
    sources = {r.node.name: r for r in cert.space.order if isinstance(r.node, Source)}
    extra = sorted(set(data) - set(sources))
    if extra:
        raise UnknownSourceError(extra[0], f"data was given for {extra}, which the plan does not declare",
                                 f"the plan's sources are {sorted(sources)}")
    missing = sorted(set(sources) - set(data))
    if missing:
        raise UnknownSourceError(missing[0], "the plan's source got no data", f"pass data for {missing}")
    out: dict[str, np.ndarray] = {}
    for name, rec in sources.items():
        node = rec.node
        assert isinstance(node, Source)
        try:
            raw = data[name]  # a mapping may read it now (the command line's files)
            out[name] = node.prepare(raw, rec.id, cert.plan.neighbors) if backend is None else \
                backend.source(node, raw, rec.id, cert.plan.neighbors)
        except (*PUBLIC_REFUSALS, ExecutionError):
            raise
        except Exception as e:  # its text could quote a value: ExecutionError's declared policy
            raise ExecutionError(rec.id, f"reading source {name} failed ({type(e).__name__})",
                                 f"rerun with debug=True (or {DEBUG_ENV}=1) to see that exception, which may quote "
                                 "private data; no value should make a run fail, so report it as a dpflow bug") from e
    return out


def _read_sources(cert: Certified, data: Mapping[str, Any] | np.ndarray, backend: Backend,
                  reading: Callable[[], None] | None) -> dict[str, Any]:
    """:func:`prepare_data`, then ``reading()``.  Preparing touches the values (a table's columns are
    converted), and no value may decide whether the budget is charged: any exception other than a public
    schema refusal (:data:`PUBLIC_REFUSALS`), an interrupt included, calls ``reading()`` before it leaves,
    so the cost counts (defence in depth: every value maps through a declared policy and never raises)."""
    try:
        prepared = prepare_data(cert, data, backend)
    except PUBLIC_REFUSALS:
        raise
    except BaseException:
        if reading is not None:
            reading()
        raise
    if reading is not None:
        reading()
    return prepared


def execute(cert: Certified, data: Mapping[str, Any] | np.ndarray, noise: NoiseSource, backend: Backend,
            debug: bool | None = None, reading: Callable[[], None] | None = None) -> Execution:
    """Run a certified plan on ``data`` (source name -> rows).

    The data is checked against the public schema first (:func:`prepare_data`); then ``reading()`` is called
    (a budget store's charge: data is about to be read).  Only a public schema refusal leaves before
    ``reading()`` (:func:`_read_sources`).  An engine failure raises
    :class:`dpflow.errors.ExecutionError` naming the node, by its declared policy (the engine's exception is
    kept only with ``debug``, or :data:`dpflow.errors.DEBUG_ENV` when ``debug`` is ``None``).

    >>> import numpy as np, dpflow as dp
    >>> from dpflow import nodes as N
    >>> from dpflow.planner.certify import certify
    >>> from dpflow.interpreter.numpy_backend import NumpyBackend
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=2), n=100)
    >>> cert = certify(b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))))
    >>> ex = execute(cert, {"X": np.zeros((100, 2))}, dp.SeededNoise(0), NumpyBackend())
    >>> ex.released["m"].shape
    (2,)
    """
    run: _Run | None = None
    failure: ExecutionError | None = None
    try:
        prepared = _read_sources(cert, data, backend, reading)
        run = _Run(cert, prepared, noise, backend)
        run.top_total = len(cert.space.order)
        env = run.space_values(cert.space, {})
    except ExecutionError as e:  # the declared policy: ExecutionError's docstring
        failure = e.located(None if run is None else run.at, debug_requested(debug))
    finally:
        if run is not None:
            run.progress.close()
    if failure is not None:
        raise failure  # outside the except block: no context to the engine's exception
    assert run is not None
    released = {name: env[nid] for name, nid in cert.plan.outputs}
    return Execution(released, dict(run.facts), noise.description, noise.seeded, backend.name,
                     dict(cert.plan.outputs), backend.settings())
