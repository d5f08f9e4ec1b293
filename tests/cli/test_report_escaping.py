"""Hostile names in every renderer (issue 28, item 7): a plan, source, output or column name, a category
label or a dataset id shows as itself in report.md, report.html, report.json and on the terminal, and
can add no heading, line, table cell, link, image, HTML tag or invisible character.

Each report is compared with its twin: the same plan with plain names.  The structure of every page
(lines, headings, table cells, HTML tags, markup characters) must be the twin's.
"""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dpflow as dp
from dpflow import nodes as N
from dpflow.budget import BudgetStore
from dpflow.cli import main

HOSTILE = (
    "<script>alert(1)</script>",
    "# heading",
    "a|b",
    "`code` ``x``",
    "x\n# injected",
    "[link](javascript:alert(1))",
    "![img](http://x)",
    "<img src=x onerror=alert(1)>",
    "\u202eevil\u202c \u2066isolate\u2069 zero\u200bwidth",
    "- item",
    "1. item",
    "> quote",
    "*em* _u_ ~~s~~ $m$ \\",
    "&lt; &#60; &amp;",
    "x\r\ny\u2028z",
    "\x1b[2J\x1b[31mred",
    ' "quoted" \'single\' ',
)


def _names(hostile: bool) -> dict[str, Any]:
    """Every user-controlled name of the plan: hostile ones, or their plain twins."""
    pick = (lambda i, h: h) if hostile else (lambda i, h: f"n{i}")
    return {"plan": pick(0, "P " + " ".join(HOSTILE)), "source": pick(1, "S\n# " + HOSTILE[0]),
            "column": pick(2, "c|" + HOSTILE[5]), "category": pick(3, "k" + HOSTILE[7]),
            "label": pick(4, "v" + HOSTILE[3]), "dataset": pick(5, "d\n# " + HOSTILE[6]),
            "outputs": [h if hostile else f"n{sorted(HOSTILE).index(h):02d}" for h in HOSTILE]}  # same order


def _report(names: dict[str, Any], store: BudgetStore) -> dp.Report:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5), name=names["plan"])
    X = b.source(names["source"], columns=[names["column"], dp.Category(names["category"], [names["label"], "w"])],
                 n=100)
    mean = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(N.Columns(keep=[names["column"]])(X))))
    hist = N.LaplaceMech()(N.Histogram(edges=[0, 0.5, 1])(
        N.Columns(keep=[f"{names['category']}={names['label']}"])(X)))
    plan = b.build(**{name: (mean, hist)[i % 2] for i, name in enumerate(names["outputs"])})
    df = pd.DataFrame({names["column"]: np.linspace(0, 1, 100), names["category"]: [names["label"], "w"] * 50})
    store.open(names["dataset"], dp.ZCDP(1))
    return dp.run(plan, {names["source"]: df}, budget_store=store, dataset=names["dataset"]).report


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, dp.Report]:
    store = BudgetStore(tmp_path_factory.mktemp("store") / "s.sqlite")
    return {hostile: _report(_names(hostile), store) for hostile in (True, False)}


def _visible(s: str) -> str:
    """The one line a name shows as: each non-printable character as its Python escape."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in s)


_TOKEN = re.compile(r"\\.|.", re.S)


def _bare(text: str, chars: str) -> str:
    """The characters of ``chars`` in ``text`` that no backslash escapes and no entity holds, in order."""
    return "".join(t for t in _TOKEN.findall(re.sub(r"&#?\w+;", "", text)) if t in chars)


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table row (split at the unescaped pipes)."""
    cells, cur = [], ""
    for t in _TOKEN.findall(line):
        if t == "|":
            cells.append(cur)
            cur = ""
        else:
            cur += t
    return [c.strip() for c in cells[1:]]


def _unescape(md: str) -> str:
    """What inline Markdown text renders as (backslash escapes and entities resolved)."""
    return html.unescape(re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", md))


def test_markdown_structure_is_the_twins(reports: dict[bool, dp.Report]) -> None:
    md, twin = reports[True].to_markdown(), reports[False].to_markdown()
    lines, twin_lines = md.splitlines(), twin.splitlines()
    assert len(lines) == len(twin_lines)                                     # no line added
    assert [ln for ln in lines if ln.startswith("#")] == [ln for ln in twin_lines if ln.startswith("#")]
    for ln, tw in zip(lines, twin_lines, strict=True):
        assert ln[:2] == tw[:2]                                              # no list item, quote or row made
        if ln.startswith("|"):
            assert len(_cells(ln)) == len(_cells(tw))                        # no table cell added
            assert _bare(ln, "|").count("|") == _bare(tw, "|").count("|")
    assert "<" not in md                                                     # no raw HTML or autolink
    assert all(c.isprintable() for ln in lines for c in ln)                  # no bidi, control or format char
    for c in "`[]~$*#|":                                                     # no code, link, image, emphasis...
        assert _bare(md, c) == _bare(twin, c), c


def test_markdown_shows_every_name_as_it_is(reports: dict[bool, dp.Report]) -> None:
    md = reports[True].to_markdown()
    names = _names(True)
    released = {}
    for ln in md.splitlines():
        cells = _cells(ln) if ln.startswith("|") else []
        if len(cells) == 2 and cells[1].startswith("shape"):
            released[_unescape(cells[0])] = cells[1]
    assert sorted(released) == sorted(_visible(n) for n in names["outputs"])
    text = _unescape(md)
    for key in ("plan", "source", "column", "category", "label", "dataset"):
        assert _visible(names[key]) in text, key


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [name for name, _ in attrs]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(page: str) -> _Tags:
    p = _Tags()
    p.feed(page)
    return p


def test_html_structure_is_the_twins(reports: dict[bool, dp.Report]) -> None:
    page, twin = _parse(reports[True].to_html()), _parse(reports[False].to_html())
    assert page.tags == twin.tags and page.attrs == twin.attrs              # no tag or attribute injected
    assert "script" not in page.tags and "img" not in page.tags
    assert all(c.isprintable() or c == "\n" for t in page.text for c in t)  # no bidi, control or format char
    text = "".join(page.text)
    for key in ("plan", "source", "column", "category", "label", "dataset"):
        assert _visible(_names(True)[key]) in text, key


def test_report_json_is_strict_json_holding_the_names_exactly(reports: dict[bool, dp.Report],
                                                             tmp_path: Path) -> None:
    def no_constants(x: str) -> None:
        raise ValueError(f"not JSON: {x}")

    paths = reports[True].write(tmp_path / "r")
    data = json.loads(paths[0].read_text(encoding="utf-8"), parse_constant=no_constants)
    names = _names(True)
    assert sorted(data["released"]) == sorted(names["outputs"])
    assert data["ledger"]["plan_name"] == names["plan"]
    assert [t["source"] for t in data["ledger"]["totals"]] == [names["source"]]
    assert [c["dataset"] for c in data["budget"]["charges"]] == [names["dataset"]]
    assert paths[0].read_text(encoding="utf-8").isascii()                   # names as \u escapes, not raw


def test_summary_lines_are_the_twins(reports: dict[bool, dp.Report]) -> None:
    lines, twin = reports[True].summary().splitlines(), reports[False].summary().splitlines()
    assert len(lines) == len(twin) and all(c.isprintable() for ln in lines for c in ln)
    accuracy = reports[True].ledger.accuracy_summary().splitlines()
    assert len(accuracy) == len(reports[False].ledger.accuracy_summary().splitlines())


def test_cli_prints_names_on_one_line_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outputs = {h: "m" for h in HOSTILE}
    (tmp_path / "plan.py").write_text(
        "import dpflow as dp\nfrom dpflow import nodes as N\n"
        f"b = dp.PlanBuilder(budget=dp.ZCDP(0.5), name={HOSTILE[4]!r})\n"
        f"X = b.source('X', dp.Vectors(d=2), n=20)\nm = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))\n"
        f"plan = b.build(**{{k: m for k in {list(outputs)!r}}})\n")
    np.save(tmp_path / "x.npy", np.zeros((20, 2)))
    assert main(["run", str(tmp_path / "plan.py"), "--data", f"X={tmp_path / 'x.npy'}", "--seed", "0",
                 "--report", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert all(c.isprintable() for ln in out.splitlines() for c in ln)
    assert sum(ln.endswith("]") and " = [" in ln for ln in out.splitlines()) == len(HOSTILE)
    assert not [ln for ln in out.splitlines() if ln.startswith("# injected")]  # "x\n# injected" stays one line
    (tmp_path / "bad.py").write_text(
        "import dpflow as dp\nfrom dpflow import nodes as N\n"
        f"b = dp.PlanBuilder(budget=dp.ZCDP(0.5))\nX = b.source({HOSTILE[15]!r}, dp.Vectors(d=2), n=20)\n"
        f"X = b.source({HOSTILE[15]!r}, dp.Vectors(d=2), n=20)\n")              # refused, naming the source
    assert main(["check", str(tmp_path / "bad.py")]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and err.count("\n") == 1


_BLOCK_START = re.compile(r"(?:>|[-+*](?:\s|$)|\d{1,9}[.)](?:\s|$)|\s)")


@given(st.text())
def test_markdown_escape_renders_as_the_visible_text(s: str) -> None:
    from dpflow.text import markdown

    md = markdown(s)
    assert _unescape(md) == _visible(s)
    assert "<" not in md and md.isprintable() and "\n" not in md
    assert _bare(md, "`[]~$*#|\\") == ""
    assert not _BLOCK_START.match(md)                                         # may begin a list item


def test_a_name_that_cannot_be_encoded_still_gets_its_report(tmp_path: Path) -> None:
    # a lone surrogate (a str Python allows, UTF-8 does not) used to fail report.md after the run
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5), name="p\ud800")
    X = b.source("X\udfff", dp.Vectors(d=2), n=10)
    res = b.build(**{"o\ud800": N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))}).run(
        {"X\udfff": np.zeros((10, 2))}, noise=dp.SeededNoise(0))
    paths = res.report.write(tmp_path / "r")
    assert json.loads(paths[0].read_text(encoding="utf-8"))["ledger"]["plan_name"] == "p\ud800"
    assert "p\\\\ud800" in paths[1].read_text(encoding="utf-8") and "p\\ud800" in paths[2].read_text(encoding="utf-8")
