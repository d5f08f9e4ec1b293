"""Progress of long runs: a line on a TTY (node counts and loop rounds only), nothing otherwise."""

from __future__ import annotations

import io

import numpy as np
import pytest

import dpflow as dp
from dpflow.estimators.regression import noisy_gd
from dpflow.interpreter import progress as P


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _run(monkeypatch: pytest.MonkeyPatch, stream: io.StringIO) -> None:
    monkeypatch.setattr(P, "DELAY", 0.0)
    monkeypatch.setattr(P, "INTERVAL", 0.0)
    monkeypatch.setattr(P.sys, "stderr", stream)
    plan = noisy_gd(d=2, n=200, budget=dp.ZCDP(1.0), x_bound=1.0, coef_bound=2.0, response_bound=3.0,
                    iterations=4)
    rng = np.random.default_rng(0)
    plan.run({"Z": rng.uniform(-1, 1, size=(200, 3))}, noise=dp.SeededNoise(0))


def test_a_terminal_sees_nodes_and_rounds_then_a_cleared_line(monkeypatch: pytest.MonkeyPatch) -> None:
    tty = _Tty()
    _run(monkeypatch, tty)
    text = tty.getvalue()
    assert "[dpflow] noisy_gd: node " in text and "round 4/4" in text
    assert text.endswith("\r\x1b[K")                          # the line is cleared at the end


def test_silent_when_not_a_terminal_or_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    pipe = io.StringIO()
    _run(monkeypatch, pipe)
    assert pipe.getvalue() == ""
    monkeypatch.setenv("DPFLOW_PROGRESS", "0")
    tty = _Tty()
    _run(monkeypatch, tty)
    assert tty.getvalue() == ""
