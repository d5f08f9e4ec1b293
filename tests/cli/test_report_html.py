"""The HTML report: self-contained (no network: no external URL, no script), written next to report.json
and report.md, and rendered by a real browser (headless Chromium) into a non-blank screenshot."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.planner.accuracy import NoiseCalibration, realised_rows


def _result() -> dp.Result:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    X = b.source("X", dp.Vectors(d=5), n=2000)
    clipped = N.Clip(radius=4.0)(X)
    mean = N.GaussianMech(weight=2)(N.Mean()(clipped))
    hist = N.LaplaceMech()(N.Histogram(edges=[-3, -1, 0, 1, 3])(N.Columns(keep=[0])(X)))
    plan = b.build(mean=mean, hist=hist, first=N.Get(index=0)(mean))
    rows = np.random.default_rng(0).normal(size=(2000, 5)) + [0.5, -0.5, 1.0, 0.0, 0.2]
    return plan.run({"X": rows}, noise=dp.SeededNoise(0))


def test_page_is_self_contained_and_complete(tmp_path: Path) -> None:
    res = _result()
    paths = res.report.write(tmp_path / "r")
    page = (tmp_path / "r" / "report.html").read_text()
    assert paths[-1].name == "report.html"
    assert "<script" not in page and not re.search(r"(src|href)\s*=\s*[\"']?(https?:|//)", page)
    assert "default-src 'none'" in page                                 # the page may load nothing
    assert "NOT FOR RELEASE" in page
    # values with error bars: the Gaussian mean's 95% half-width at the recorded sigma, and the Laplace one
    data = res.report.to_data()
    rows = realised_rows([NoiseCalibration.from_data(c) for c in data["ledger"]["noise_calibrations"]],
                         data["run"]["noise_scales"])
    assert len(rows) == 2
    for r in rows:
        assert f"+/- {r.half_width:.6g} (95%)" in page
    assert page.count("<svg") >= 3                                       # mean, histogram, budget split
    assert "post-processing of releases" in page                         # "first" has no bar of its own
    for node in ("gaussian_mech_3", "laplace_mech_6"):                   # budget split and derivations
        assert page.count(node) >= 3
    assert "66.67%" in page and "33.33%" in page                        # weights 2 : 1


def _png_rgb(data: bytes) -> np.ndarray:
    """The RGB pixels of an 8-bit, non-interlaced PNG (what Chromium writes), as floats."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        chunk = data[pos + 8:pos + 8 + length]
        header = chunk if kind == b"IHDR" else header
        idat += chunk if kind == b"IDAT" else b""
        pos += 12 + length
    w, h, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0
    ch = 3 if colour == 2 else 4
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + w * ch)
    out = np.zeros((h, w * ch), dtype=np.int64)
    prev = np.zeros(w * ch, dtype=np.int64)
    for y in range(h):                                 # undo the per-row filters (PNG spec 9.2)
        f, line = raw[y, 0], raw[y, 1:].astype(np.int64)
        if f == 0:
            cur = line
        elif f == 2:
            cur = (line + prev) % 256
        else:
            cur = np.zeros_like(line)
            for x in range(w * ch):
                a = cur[x - ch] if x >= ch else 0
                b, c = prev[x], prev[x - ch] if x >= ch else 0
                if f == 1:
                    pred = a
                elif f == 3:
                    pred = (a + b) // 2
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[x] = (line[x] + pred) % 256
        out[y], prev = cur, cur
    return out.reshape(h, w, ch)[..., :3].astype(float)


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    return None


@pytest.mark.skipif(_chromium() is None, reason="headless Chromium is not installed (apt-get install -y chromium; "
                    ".ci/run installs it)")
def test_chromium_renders_a_non_blank_page(tmp_path: Path) -> None:
    res = _result()
    res.report.write(tmp_path / "r")
    shot = tmp_path / "shot.png"
    chromium = _chromium()
    assert chromium is not None
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
           "--hide-scrollbars", "--window-size=1200,1600", f"--screenshot={shot}",
           (tmp_path / "r" / "report.html").as_uri()]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})
    img = _png_rgb(shot.read_bytes())
    assert img.shape[0] >= 1000 and img.shape[1] >= 1000
    white = (img > 245).all(axis=2).mean()
    assert white < 0.97                                        # text, tables and charts, not a blank page
    blue = ((img[..., 2] > 140) & (img[..., 0] < 100)).mean()  # the dots and bar segments (#3b6ea8)
    orange = ((img[..., 0] > 180) & (img[..., 1] > 100) & (img[..., 1] < 160) & (img[..., 2] < 80)).mean()
    assert blue > 1e-4 and orange > 1e-5                       # the dots and the budget split are drawn
    if dest := os.environ.get("DPFLOW_SCREENSHOT"):
        shutil.copy(shot, dest)
