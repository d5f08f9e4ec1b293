"""Short, readable reprs (issue 28, "what users hit first"): ``repr`` of a ledger, a report or a result is
a dozen lines at most, under 1,000 characters whatever the plan, and states the key facts (plan, budget,
each source's guarantee, the outputs with their shapes, the noise source); ``_repr_html_`` is the same
overview as a compact table, every name escaped."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

import dpflow as dp
from dpflow import nodes as N
from dpflow.budget import BudgetStore

HOSTILE = "<script>alert(1)</script>\n# x <img src=x onerror=alert(1)> \u202e\x1b[31m"


def _result(sources: int = 1, outputs: int = 1, name: str = "", store: BudgetStore | None = None) -> dp.Result:
    b = dp.PlanBuilder(budget=dp.ZCDP(0.5), name=f"plan{name}")
    released = {}
    for s in range(sources):
        X = b.source(f"S{s}{name}", dp.Vectors(d=3), n=100)
        m = N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))
        for o in range(outputs):
            released[f"out{s}_{o}{name}"] = m
    data = {f"S{s}{name}": np.zeros((100, 3)) for s in range(sources)}
    if store is None:
        return b.build(**released).run(data, noise=dp.SeededNoise(7))
    store.open("ds", dp.ZCDP(1))
    return dp.run(b.build(**released), data, budget_store=store, dataset="ds")


def test_repr_states_the_key_facts() -> None:
    res = _result()
    ledger = res.report.ledger
    best = ledger.totals[0].tightest()
    for text in (repr(res), repr(res.report)):
        assert text.startswith(("<Result\n", "<Report\n")) and len(text.splitlines()) <= 12
        for fact in ("plan: plan (sha256:", "budget: rho=0.5 zCDP, replace neighbours, 1 mechanism",
                     f"source S0: {ledger.totals[0].measure} (100% of the budget); "
                     f"({best.epsilon:.6g}, {best.delta:.3g})-DP by {best.rule}",
                     "released (1): out0_0 shape (3,)", "noise: seeded (seed=7"):
            assert fact in text, fact
        assert "Fraction(" not in text
    assert repr(ledger).startswith("<Ledger\n") and "source S0: rho=0.5 zCDP" in repr(ledger)
    assert "released" not in repr(ledger)


def test_repr_says_what_the_budget_store_was_charged(tmp_path: Path) -> None:
    res = _result(store=BudgetStore(tmp_path / "s.sqlite"))
    assert "\n  charged: ds #" in repr(res) and "noise: secure" in repr(res).lower()


@pytest.mark.parametrize("name", ["", "_" + "n" * 500, "_" + HOSTILE * 20])
def test_repr_is_short_whatever_the_plan(name: str) -> None:
    res = _result(sources=6, outputs=40, name=name)
    for text in (repr(res), repr(res.report), repr(res.report.ledger)):
        assert len(text) < 1000 and len(text.splitlines()) <= 12
        assert all(c.isprintable() for line in text.splitlines() for c in line)
        assert "more sources: 5" in text                                     # 1 listed, then how many more
    assert "released (240): out0_0" in repr(res)


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)


@pytest.mark.parametrize("name", ["", "_" + HOSTILE])
def test_repr_html_is_a_compact_escaped_table(name: str) -> None:
    res = _result(sources=2, name=name)
    for obj in (res, res.report, res.report.ledger):
        page = obj._repr_html_()
        p = _Tags()
        p.feed(page)
        assert p.tags == {"table", "caption", "tr", "th", "td"} and len(page) < 3000
        assert "<script" not in page and "<img" not in page and "\u202e" not in page and "\x1b" not in page
        assert "&lt;script&gt;" in page if name else "source S1" in page
