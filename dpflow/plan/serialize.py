"""Canonical JSON for plans: sorted keys, no whitespace, tagged values.

Node parameters are encoded by type: a reference to a released node as
``{"$ref": id}``, an exact rational as ``{"$frac": "1/2"}``, an infinite float as ``{"$float": "inf"}``, a bound as
``{"$sym": [coef, [[ref, power], ...]]}`` with each run-time ref tagged by its type
(``{"$n": node}`` a public row count, ``{"$released": node}`` a released scalar, ``{"$norm": node}``
the norm of a released vector; plan schema 2), a domain as ``{"$domain": kind, ...}``, a categorical
column as ``{"$category": ...}``, a user function as ``{"$fn": "module:qualname"}`` and the body of a
control node (``Repeat``, ``PartitionTree``) as ``{"$subplan": ...}``.  A node kind that was renamed is read by
its old name too (:data:`KIND_ALIASES`).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any

import attrs

from dpflow import domains
from dpflow.errors import SerializationError
from dpflow.handles import Ref
from dpflow.nodes import NODE_KINDS, NodeRecord, SubPlan
from dpflow.nodes.postprocess import function_path, load_function
from dpflow.privacy import ZCDP, ApproxDP, ApproxZCDP, Measure, PureDP
from dpflow.tables import Category

_DOMAINS: dict[str, type[Any]] = {
    c.__name__: c
    for c in (domains.Vectors, domains.Reals, domains.BooleanCube, domains.Ordinal, domains.SymmetricMatrices)
}
_MEASURES: dict[str, type[Any]] = {c.__name__: c for c in (PureDP, ZCDP, ApproxZCDP, ApproxDP)}
_SYM_REFS: dict[str, type[domains.SymRef]] = {
    "$n": domains.RowCount, "$released": domains.ReleasedScalar, "$norm": domains.ReleasedNorm,
}
_SYM_TAGS: dict[type[domains.SymRef], str] = {cls: tag for tag, cls in _SYM_REFS.items()}

KIND_ALIASES: dict[str, str] = {"Recurse": "Repeat"}
"""Old node kind -> its kind now: plans written before a rename still load (and certify to the same ledger)."""


def _decode_sym_ref(data: Any) -> domains.SymRef:
    """A typed run-time ref ``{"$n" | "$released" | "$norm": node}``, nothing else (no coercion)."""
    if isinstance(data, dict) and len(data) == 1:
        ((tag, node),) = data.items()
        cls = _SYM_REFS.get(tag)
        if cls is not None and isinstance(node, str):
            return cls(node)
    raise SerializationError(f"a bound's factor must be a typed ref {sorted(_SYM_REFS)} naming a node, got {data!r}")


def legacy_sym_names(data: Any) -> Any:
    """Plan schema 1 named a bound's run-time refs by strings (``"n:<node>"``, ``"norm:<node>"``, else a
    released scalar's node): rewrite them into schema 2's typed refs, once, when such a document is read."""
    if isinstance(data, list):
        return [legacy_sym_names(v) for v in data]
    if not isinstance(data, dict):
        return data
    if "$sym" in data and isinstance(data["$sym"], list) and len(data["$sym"]) == 2:
        coef, factors = data["$sym"]
        typed = []
        for f in factors if isinstance(factors, list) else []:
            name = f[0] if isinstance(f, list) and len(f) == 2 and isinstance(f[0], str) else None
            if name is None:
                typed.append(f)
                continue
            tag, node = next(((t, name[len(p):]) for p, t in (("n:", "$n"), ("norm:", "$norm")) if name.startswith(p)),
                             ("$released", name))
            typed.append([{tag: node}, f[1]])
        return {"$sym": [coef, typed if isinstance(factors, list) else factors]}
    return {k: legacy_sym_names(v) for k, v in data.items()}


def encode(value: Any) -> Any:
    """A node parameter (or anything inside one) as JSON data."""
    kind = type(value)
    if value is None or kind is str or kind is int or kind is bool or (kind is float and not math.isinf(value)):
        return value  # the common parameters first (exact types: a subclass takes the checks below)
    if isinstance(value, Ref):
        return {"$ref": value.id}
    if isinstance(value, Fraction):
        return {"$frac": str(value)}
    if isinstance(value, domains.Sym):
        return {"$sym": [value.coef, [[{_SYM_TAGS[type(r)]: r.node}, p] for r, p in value.factors]]}
    if type(value) in _DOMAINS.values():
        fields = attrs.fields(type(value))
        return {"$domain": type(value).__name__, **{f.name: encode(getattr(value, f.name)) for f in fields}}
    if isinstance(value, Category):
        return {"$category": {f.name: encode(getattr(value, f.name)) for f in attrs.fields(Category)}}
    if isinstance(value, SubPlan):
        return {"$subplan": {"records": [encode_record(r) for r in value.records], "output": value.output}}
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    if isinstance(value, float) and math.isinf(value):
        return {"$float": "inf" if value > 0 else "-inf"}  # strict JSON has no infinity; NaN stays refused
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if callable(value):
        return {"$fn": function_path(value)}
    raise SerializationError(f"cannot encode a {type(value).__name__} in a plan")


def decode(data: Any) -> Any:
    """Inverse of :func:`encode` (lists come back as tuples)."""
    if isinstance(data, list):
        return tuple(decode(v) for v in data)
    if not isinstance(data, dict):
        return data
    if "$ref" in data:
        return Ref(data["$ref"])
    if "$frac" in data:
        return Fraction(data["$frac"])
    if "$float" in data:
        if data["$float"] not in ("inf", "-inf"):
            raise SerializationError(f"a tagged float is 'inf' or '-inf', got {data['$float']!r}")
        return float(data["$float"])
    if "$sym" in data:
        coef, factors = data["$sym"]
        if isinstance(coef, bool) or not isinstance(coef, (int, float)):
            raise SerializationError(f"a bound's coefficient must be a number, got {coef!r}")
        # no coercion: Sym refuses a negative or non-finite coefficient and a non-integer power
        return domains.Sym(float(coef), tuple((_decode_sym_ref(r), p) for r, p in factors))
    if "$fn" in data:
        return load_function(data["$fn"])
    if "$subplan" in data:
        sp = data["$subplan"]
        return SubPlan(tuple(decode_record(r) for r in sp["records"]), sp["output"])
    if "$category" in data:
        return Category(**{k: decode(v) for k, v in data["$category"].items()})
    if "$domain" in data:
        cls = _DOMAINS.get(data["$domain"])
        if cls is None:
            raise SerializationError(f"unknown domain {data['$domain']!r}")
        return cls(**{k: decode(v) for k, v in data.items() if k != "$domain"})
    raise SerializationError(f"unknown tagged value {sorted(data)}")


def encode_record(rec: NodeRecord) -> dict[str, Any]:
    """One node as JSON data."""
    node = rec.node
    params = {f.name: encode(getattr(node, f.name)) for f in attrs.fields(type(node))}
    return {"id": rec.id, "kind": node.kind, "inputs": list(rec.inputs), "params": params}


def decode_record(data: dict[str, Any]) -> NodeRecord:
    """Inverse of :func:`encode_record`."""
    kind = data.get("kind", "")
    cls = NODE_KINDS.get(KIND_ALIASES.get(kind, kind))
    if cls is None:
        raise SerializationError(f"unknown node kind {data.get('kind')!r}")
    try:
        node = cls(**{k: decode(v) for k, v in data["params"].items()})
    except (TypeError, ValueError) as e:
        raise SerializationError(f"node {data.get('id')}: bad parameters: {e}") from e
    return NodeRecord(str(data["id"]), node, tuple(str(i) for i in data["inputs"]))


def encode_measure(m: Measure) -> dict[str, Any]:
    """A budget as JSON data."""
    return {"measure": type(m).__name__, **{f.name: str(getattr(m, f.name)) for f in attrs.fields(type(m))}}


def decode_measure(data: dict[str, Any]) -> Measure:
    """Inverse of :func:`encode_measure`."""
    cls = _MEASURES.get(data.get("measure", ""))
    if cls is None:
        raise SerializationError(f"unknown measure {data.get('measure')!r}")
    m: Measure = cls(**{k: v for k, v in data.items() if k != "measure"})
    return m


def canonical(obj: Any) -> str:
    """Canonical JSON text: sorted keys, compact separators, no NaN."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)
