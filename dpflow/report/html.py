"""The report as one self-contained HTML page: inline CSS and SVG, no script, no network access.

Rendered from the report's JSON data (like the Markdown page): the released values with their 95% noise
intervals (at the noise scales the run recorded), the budget split per mechanism as a bar chart, the
totals and composition rules, the accuracy known before data, and every node's derivation.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpflow.planner.accuracy import NoiseCalibration, Prediction, accuracy_rows, realised_rows
from dpflow.report.markdown import charges
from dpflow.text import html as _e

MAX_POINTS = 40
"""Coordinates drawn per released value (the table lists the rest)."""

_COLOURS = ("#3b6ea8", "#d9822b", "#5a9e4b", "#b8483d", "#7d5ba6", "#8c6d46", "#c75a9c", "#6f7378", "#a3a13a",
            "#3aa1a3")

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1100px;
color:#1d2329;padding:0 16px;background:#fff}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:2px solid #e3e7eb;padding-bottom:4px}
.meta{color:#55606b}.banner{background:#b8483d;color:#fff;padding:8px 12px;border-radius:4px;font-weight:600}
table{border-collapse:collapse;width:100%;margin:6px 0 12px;font-size:12.5px}
th,td{border:1px solid #d5dbe1;padding:4px 6px;text-align:left;vertical-align:top}
th{background:#f1f4f7}td.num{text-align:right;font-variant-numeric:tabular-nums}
.card{border:1px solid #d5dbe1;border-radius:6px;padding:10px 12px;margin:10px 0;background:#fafbfc}
.card h3{margin:0 0 6px;font-size:15px}.small{font-size:12px;color:#55606b}
svg text{font:11px system-ui,sans-serif;fill:#1d2329}
"""


def _num(v: float) -> str:
    return f"{v:.6g}"


def _values(v: Any) -> np.ndarray | None:
    try:
        a = np.asarray(v, dtype=float)
    except (TypeError, ValueError):
        return None
    return a.reshape(-1)


def _dot_plot(vals: np.ndarray, half: float | None) -> str:
    """An SVG of the first coordinates with +- ``half`` error bars."""
    k = min(vals.size, MAX_POINTS)
    v = vals[:k]
    finite = v[np.isfinite(v)]
    if finite.size == 0:
        return '<p class="small">no finite value to draw</p>'
    h = half if half is not None and math.isfinite(half) else 0.0
    lo, hi = float(finite.min() - h), float(finite.max() + h)
    if hi - lo <= 0:
        lo, hi = lo - 1.0, hi + 1.0
    width, height, left, top, bottom = 760, 180, 70, 12, 24
    step = (width - left - 10) / max(k, 1)

    def y(x: float) -> float:
        return top + (hi - x) / (hi - lo) * (height - top - bottom)

    parts = [f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
             f'xmlns="http://www.w3.org/2000/svg">',
             f'<rect x="{left}" y="{top}" width="{width - left - 10}" height="{height - top - bottom}" '
             'fill="#ffffff" stroke="#d5dbe1"/>']
    for t in np.linspace(lo, hi, 5):
        parts.append(f'<line x1="{left}" x2="{width - 10}" y1="{y(t):.1f}" y2="{y(t):.1f}" stroke="#eef1f4"/>'
                     f'<text x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{_e(f"{t:.4g}")}</text>')
    if lo < 0 < hi:
        parts.append(f'<line x1="{left}" x2="{width - 10}" y1="{y(0.0):.1f}" y2="{y(0.0):.1f}" stroke="#9aa5b1"/>')
    for i, x in enumerate(v):
        if not math.isfinite(x):
            continue
        cx = left + step * (i + 0.5)
        if h > 0:
            parts.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(x + h):.1f}" y2="{y(x - h):.1f}" '
                         'stroke="#d9822b" stroke-width="2"/>'
                         f'<line x1="{cx - 4:.1f}" x2="{cx + 4:.1f}" y1="{y(x + h):.1f}" y2="{y(x + h):.1f}" '
                         'stroke="#d9822b" stroke-width="2"/>'
                         f'<line x1="{cx - 4:.1f}" x2="{cx + 4:.1f}" y1="{y(x - h):.1f}" y2="{y(x - h):.1f}" '
                         'stroke="#d9822b" stroke-width="2"/>')
        parts.append(f'<circle cx="{cx:.1f}" cy="{y(x):.1f}" r="4" fill="#3b6ea8"/>')
        if k <= 20:
            parts.append(f'<text x="{cx:.1f}" y="{height - 8}" text-anchor="middle">{i}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _released(report: dict[str, Any]) -> list[str]:
    run = report["run"]
    calibrations = [NoiseCalibration.from_data(c) for c in report["ledger"]["noise_calibrations"]]
    realised = {r.node: r for r in realised_rows(calibrations, run["noise_scales"])}
    outputs: dict[str, str] = run.get("outputs", {})
    out = ["<h2>Released values</h2>",
           '<p class="small">Dots are the released values; bars the 95% interval of the noise added to each '
           "coordinate, at the scale this run recorded (the noise only: clipping bias is not included). A value "
           "computed from releases (post-processing) has no bar of its own.</p>"]
    for name, value in sorted(report["released"].items()):
        vals = _values(value)
        node = outputs.get(name, "")
        row = realised.get(node)
        half = None if row is None or row.half_width is None else float(row.half_width)
        how = (f"{_e(row.noise)}, +/- {_num(half)} (95%)" if row is not None and half is not None
               else f"post-processing of releases (node {_e(node) or '?'})")
        out.append(f'<div class="card"><h3>{_e(name)}</h3><div class="small">{how}</div>')
        if vals is None or vals.size == 0:
            out.append(f"<p>{_e(value)}</p></div>")
            continue
        shape = np.shape(value)
        if vals.size == 1:
            text = _num(float(vals[0])) + ("" if half is None else f" &plusmn; {_num(half)}")
            out.append(f'<p style="font-size:18px">{text}</p>')
        else:
            more = "" if vals.size <= MAX_POINTS else f" (first {MAX_POINTS} of {vals.size} shown)"
            out.append(f'<div class="small">shape {_e(shape)}{more}</div>' + _dot_plot(vals, half))
            head = ", ".join(_num(float(x)) for x in vals[:12])
            out.append(f'<div class="small">[{_e(head)}{", ..." if vals.size > 12 else ""}]</div>')
        out.append("</div>")
    return out


def _budget(ledger: dict[str, Any]) -> list[str]:
    events = [e["event"] for e in ledger["entries"] if e.get("event")]
    out = ["<h2>Budget split per mechanism</h2>",
           f'<p class="meta">Budget <b>{_e(ledger["budget"])}</b>; {_e(ledger["allocation"])}. Each mechanism\'s '
           "exact share (its rho in zCDP mode, its epsilon in pure mode; per unit round weight inside a loop) as a "
           "part of all shares.</p>"]
    if not events:
        return out + ["<p>No mechanism: nothing private was released.</p>"]
    shares = []
    for ev in events:
        num, _, den = str(ev["share"]).partition("/")
        shares.append(float(num) / float(den or 1))
    total = sum(shares) or 1.0
    width, bar_h = 1000, 34
    x = 0.0
    parts = [f'<svg width="100%" viewBox="0 0 {width} {bar_h + 4}" preserveAspectRatio="none" role="img" '
             'xmlns="http://www.w3.org/2000/svg">']
    for i, (ev, sh) in enumerate(zip(events, shares, strict=True)):
        w = width * sh / total
        colour = _COLOURS[i % len(_COLOURS)]
        parts.append(f'<rect x="{x:.2f}" y="2" width="{max(w, 0.5):.2f}" height="{bar_h}" fill="{colour}" '
                     f'stroke="#ffffff"><title>{_e(ev["node"])}: {100 * sh / total:.3g}%</title></rect>')
        x += w
    parts.append("</svg>")
    rows = ["<table><tr><th></th><th>mechanism</th><th>kind</th><th>of the shares</th><th>cost</th>"
            "<th>mode, exact share (rho or epsilon)</th></tr>"]
    costs = {e["node"]: e["cost"] for e in ledger["entries"]}
    for i, (ev, sh) in enumerate(zip(events, shares, strict=True)):
        colour = _COLOURS[i % len(_COLOURS)]
        per = " per unit round weight" if ev.get("per_round_weight") else ""
        rows.append(f'<tr><td style="background:{colour};width:14px"></td><td>{_e(ev["node"])}</td>'
                    f'<td>{_e(ev["kind"])}</td><td class="num">{100 * sh / total:.4g}%</td>'
                    f'<td>{_e(costs.get(ev["node"], ""))}{per}</td><td>{_e(ev["mode"])} share {_e(ev["share"])}</td>'
                    "</tr>")
    rows.append("</table>")
    return out + ["".join(parts)] + rows


def _totals(ledger: dict[str, Any]) -> list[str]:
    out = ["<h2>Guarantee and composition</h2>",
           f'<p>Neighbouring relation: <b>{_e(ledger["neighbors"])}</b>.</p>',
           "<table><tr><th>source</th><th>composed cost</th><th>budget used</th><th>(epsilon, delta)</th>"
           "<th>rule</th><th>reference</th></tr>"]
    for t in ledger["totals"]:
        for c in t["conversions"]:
            used = " <b>(used)</b>" if c["tightest"] else ""
            out.append(f'<tr><td>{_e(t["source"])}</td><td>{_e(t["measure"])}</td><td>{_e(t["budget_used"])}</td>'
                       f'<td>({_num(c["epsilon"])}, {c["delta"]:.3g}){used}</td><td>{_e(c["rule"])}</td>'
                       f'<td>{_e(c["reference"])}</td></tr>')
    out.append("</table><ul>" + "".join(f"<li>{_e(c)}</li>" for c in ledger["composition"]) + "</ul>")
    if ledger["predictions"]:
        out.append("<h3>Predicted error (before data)</h3><ul>" + "".join(
            f"<li>{_e(Prediction.from_data(p).describe())}</li>" for p in ledger["predictions"]) + "</ul>")
    if ledger["warnings"]:
        out.append("<h3>Warnings</h3><ul>" + "".join(f"<li>{_e(w)}</li>" for w in ledger["warnings"]) + "</ul>")
    return out


def _accuracy(ledger: dict[str, Any]) -> list[str]:
    rows = accuracy_rows([NoiseCalibration.from_data(c) for c in ledger["noise_calibrations"]], 0.05)
    if not rows:
        return []
    out = ["<h2>Accuracy before data (95% noise intervals, per coordinate)</h2>",
           "<table><tr><th>node</th><th>rounds</th><th>noise</th><th>half-width</th><th>exact sources</th>"
           "<th>note</th></tr>"]
    for r in rows:
        unit = f" x ({r.sensitivity})" if r.per_unit else ""
        cont = "-" if r.half_width is None else f"{r.half_width:.6g}{unit}"
        ex = "-" if r.exact_half_width is None else f"{r.exact_half_width:.6g}{unit}"
        out.append(f"<tr><td>{_e(r.node)}</td><td>{_e(r.rounds or '-')}</td><td>{_e(r.noise)}</td>"
                   f'<td class="num">{_e(cont)}</td><td class="num">{_e(ex)}</td><td>{_e(r.note)}</td></tr>')
    return out + ["</table>"]


def _derivations(ledger: dict[str, Any]) -> list[str]:
    out = ["<h2>How each cost was derived</h2>",
           "<table><tr><th>node</th><th>kind</th><th>sensitivity</th><th>derivation</th><th>noise</th><th>cost</th>"
           "<th>composition</th><th>reference</th></tr>"]
    for e in ledger["entries"]:
        if not (e["derivation"] or e["cost"]):
            continue
        out.append("<tr>" + "".join(f"<td>{_e(e[k])}</td>" for k in (
            "node", "kind", "sensitivity", "derivation", "noise", "cost", "rule", "reference")) + "</tr>")
    return out + ["</table>"]


def render_html(report: dict[str, Any]) -> str:
    """The self-contained HTML page of a report's JSON data.

    >>> import numpy as np, dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=2), n=100)
    >>> res = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))).run(
    ...     {"X": np.zeros((100, 2))}, noise=dp.SeededNoise(0))
    >>> page = render_html(res.report.to_data())
    >>> page.startswith("<!DOCTYPE html>") and "<svg" in page and "http-equiv" in page
    True
    """
    ledger, run = report["ledger"], report["run"]
    title = f"dpflow report: {ledger['plan_name']}"
    body = [f"<h1>{_e(title)}</h1>",
            f'<p class="meta">plan <code>{_e(ledger["plan_hash"])}</code>, dpflow {_e(ledger["dpflow_version"])}; '
            f'noise: {_e(run["noise"])}; backend: {_e(run["backend"])}; status: <b>{_e(run["release_status"])}'
            "</b></p>"]
    if run["seeded"]:
        body.append('<p class="banner">NOT FOR RELEASE: this run used seeded noise; its values are reproducible '
                    "from the seed, not private.</p>")
    if "budget" in report:
        body.append(f'<p class="meta">charged to the budget store: {_e(charges(report["budget"]))}</p>')
    body += _released(report) + _budget(ledger) + _totals(ledger) + _accuracy(ledger) + _derivations(ledger)
    csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{_e(title)}</title>"
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
