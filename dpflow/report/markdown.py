"""Markdown rendering of a report (or of a ledger alone).

Every text the report data carries (names, derivations, rules, warnings, settings) goes through
:func:`dpflow.text.markdown`: a plan, source, output or column name, a category label or a dataset id
renders as itself and can add no heading, line, table cell, link, image or HTML.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpflow.planner.accuracy import NoiseCalibration, Prediction, accuracy_rows, realised_rows
from dpflow.text import markdown as _md


def charges(budget: dict[str, Any]) -> str:
    """What a run charged to the budget store, as plain text (each dataset, reservation and amount)."""
    return ", ".join(f"{c['dataset']} #{c['reservation']}: {c['amount']}" for c in budget["charges"])


def _short(value: Any) -> str:
    arr = np.asarray(value, dtype=object)
    if arr.ndim == 0:
        return f"{value:.6g}" if isinstance(value, float) else str(value)
    flat = np.asarray(value, dtype=float).ravel()
    head = ", ".join(f"{v:.4g}" for v in flat[:8])
    return f"shape {np.shape(value)}: [{head}{', ...' if flat.size > 8 else ''}]"


def render_ledger(ledger: dict[str, Any]) -> list[str]:
    """Markdown lines for a ledger's JSON data."""
    out = [
        f"- plan: {_md(ledger['plan_name'])}, {_md(ledger['plan_hash'])} (dpflow "
        f"{_md(ledger['dpflow_version'])}, ledger schema {_md(ledger['schema'])} version "
        f"{_md(ledger['schema_version'])})",
        f"- neighbouring relation: **{_md(ledger['neighbors'])}**",
        f"- budget: **{_md(ledger['budget'])}**; {_md(ledger['allocation'])}",
        "",
        "### Totals per source",
        "",
        "| source | composed cost | budget used | (epsilon, delta) | rule | reference |",
        "|---|---|---|---|---|---|",
    ]
    for t in ledger["totals"]:
        for c in t["conversions"]:
            mark = " **(used)**" if c["tightest"] else ""
            out.append(f"| {_md(t['source'])} | {_md(t['measure'])} | {_md(t['budget_used'])} | "
                       f"({c['epsilon']:.6g}, {c['delta']:.3g}){mark} | {_md(c['rule'])} | "
                       f"{_md(c['reference'])} |")
    out += ["", "### Nodes", "", "| node | kind | sensitivity | derivation | noise | cost | composition | reference |",
            "|---|---|---|---|---|---|---|---|"]
    for e in ledger["entries"]:
        out.append("| " + " | ".join(_md(e[k]) for k in
                                      ("node", "kind", "sensitivity", "derivation", "noise", "cost", "rule",
                                       "reference")) + " |")
    out += ["", "### Composition", ""] + [f"- {_md(c)}" for c in ledger["composition"]]
    out += render_accuracy(ledger)
    if ledger["predictions"]:
        out += ["", "### Predicted error (before data)", ""]
        out += [f"- {_md(Prediction.from_data(p).describe())}" for p in ledger["predictions"]]
    if ledger["warnings"]:
        out += ["", "### Warnings", ""] + [f"- {_md(w)}" for w in ledger["warnings"]]
    return out


def render_accuracy(ledger: dict[str, Any], alpha: float = 0.05) -> list[str]:
    """Markdown lines for the accuracy section: every release's per-coordinate (1 - alpha) noise interval
    (:meth:`dpflow.planner.Ledger.accuracy`)."""
    rows = accuracy_rows([NoiseCalibration.from_data(c) for c in ledger["noise_calibrations"]], alpha)
    if not rows:
        return []
    out = ["", f"### Accuracy ({100 * (1 - alpha):.6g}% intervals of the noise, per coordinate)", "",
           "Before data: the release is within +/- the half-width of its statistic (as computed) with probability "
           f"at least {1 - alpha:.6g}, per coordinate; for all m coordinates at once use alpha / m. Continuous noise "
           "sources add the continuous noise; exact sources (the release default) the discrete noise on a "
           "2^-k lattice. The noise only: clipping bias is not included.", "",
           "| node | rounds | noise | half-width | exact sources | note |", "|---|---|---|---|---|---|"]
    for r in rows:
        unit = f" x ({_md(r.sensitivity)})" if r.per_unit else ""
        cont = "-" if r.half_width is None else f"{r.half_width:.6g}{unit}"
        ex = "-" if r.exact_half_width is None else f"{r.exact_half_width:.6g}{unit}"
        note = r.note + ("; " if r.note and r.per_unit else "") + (
            f"depends on {r.sensitivity}: known after data" if r.per_unit else "")
        rounds = _md(r.rounds) if r.rounds else "-"
        out.append(f"| {_md(r.node)} | {rounds} | {_md(r.noise)} | {cont} | {ex} | {_md(note)} |")
    return out


def render_markdown(report: dict[str, Any]) -> str:
    """The readable page of a report's JSON data."""
    run = report["run"]
    out = ["# dpflow report", ""]
    if run["seeded"]:
        out += ["> **NOT FOR RELEASE**: this run used seeded noise.", ""]
    out += ["## Released values", "", "| name | value |", "|---|---|"]
    out += [f"| {_md(k)} | {_md(_short(v))} |" for k, v in sorted(report["released"].items())]
    out += ["", "## Guarantee", ""] + render_ledger(report["ledger"])
    out += ["", "## Run", "", f"- noise: {_md(run['noise'])}", f"- backend: {_md(run['backend'])}"
            + "".join(f", {_md(k)}: {_md(v)}" for k, v in run.get("backend_settings", {}).items()
                      if k != "backend"),
            f"- status: {_md(run['release_status'])}"]
    if "budget" in report:
        out += [f"- charged to the budget store: {_md(charges(report['budget']))}"]
    calibrations = [NoiseCalibration.from_data(c) for c in report["ledger"]["noise_calibrations"]]
    realised = realised_rows(calibrations, run["noise_scales"])
    if realised:
        out += ["", "Realised noise intervals (95%, per coordinate, at the scales this run recorded):", ""]
        out += [f"- {_md(r.node)}: {_md(r.noise)}, +/- {r.half_width:.6g} ({_md(r.note)})" for r in realised]
    trees = [(node, f["tree"]) for node, facts in sorted(run["noise_scales"].items()) for f in facts if "tree" in f]
    if trees:
        out += ["", "Realised partition trees (breadth first; a leaf's size as released):", ""]
        out += [f"- {_md(node)}: " + "; ".join(_md(_piece_text(p)) for p in tree) for node, tree in trees]
    out += [""]
    return "\n".join(out) + "\n"


def _piece_text(p: dict[str, Any]) -> str:
    """One piece of a realised ``PartitionTree`` (its run fact): ``root: split into 2``, ``01: leaf 2, size 10``."""
    if "split" in p:
        return f"{p['part']}: split into {p['split']}"
    size = "" if p.get("size") is None else f", size {p['size']:.6g}"
    return f"{p['part']}: leaf {p['leaf']}{size}"
