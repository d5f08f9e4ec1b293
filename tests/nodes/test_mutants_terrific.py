"""Mutation-testing pins of ``dpflow/nodes/terrific.py`` (2026-11-29): every query's sensitivity, exactly.

``TerrificScores``: linf ``t (2 + lam)`` replace-one, ``t (1 + max(1, lam))`` add/remove (the larger when a piece
sees both), l1 ``m`` and l2 ``sqrt(m)`` times it over ``m`` radii; ``GridMaxCounts`` and ``BallCounts``: linf 1
per entry, l1 ``m``, l2 ``sqrt(m)``; ``CellCounts`` and ``ShellCounts``: one record in one bin (l1 2, l2 sqrt 2
replace-one; 1 add/remove; linf 1); all times the rows' stability, all integers (float error 0).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

import dpflow as dp
from dpflow.domains import RowCount
from dpflow.handles import Ref
from dpflow.nodes.floaterr import FloatError
from dpflow.nodes.rules import changes_text
from dpflow.nodes.terrific import BallCounts, CellCounts, GridMaxCounts, ShellCounts, TerrificScores
from dpflow.nodes.types import ReleasedT, RowsT, Size


class _Infer:
    relation = "replace"
    node_id = "q"

    def type_of(self, ref: Any) -> Any:
        return ReleasedT({"c": (2,), "r": (), "j": ()}.get(ref.id))

    def row_count(self) -> RowCount:
        return RowCount("q")


def _rows(changes: frozenset[str], stability: int) -> RowsT:
    return RowsT(dp.Vectors(d=2), "X", Size(True, 9, RowCount("X")), stability, changes, None)


REPLACE, ADD, BOTH = frozenset({"replace"}), frozenset({"add_remove"}), frozenset({"replace", "add_remove"})


@pytest.mark.parametrize(("changes", "s", "t", "lam", "linf"), [
    (REPLACE, 1, 4, 1, 12.0), (ADD, 1, 4, 1, 8.0), (REPLACE, 1, 3, 2, 12.0), (ADD, 1, 3, 2, 9.0),
    (BOTH, 1, 3, 2, 12.0), (BOTH, 2, 4, 1, 24.0), (ADD, 3, 2, 1, 12.0)])
def test_terrific_scores_sensitivity(changes: frozenset[str], s: int, t: int, lam: int, linf: float) -> None:
    rows = _rows(changes, s)
    inf = TerrificScores(radii=(1.0, 2.0, 4.0), t=t, lam=lam).infer([rows], _Infer())  # type: ignore[arg-type]
    st = inf.out
    assert st.shape == (3,) and st.float_error == FloatError("exact", rows.domain)
    assert (st.linf.coef, st.l1.coef, st.l2.coef) == (linf, 3 * linf, linf * math.sqrt(3))
    assert inf.derivation == (f"terrific scores t*L_T over 3 radii, t={t}, ratio=3, lam={lam}, {changes_text(rows)}: "
                              f"linf {st.linf.text()}")


@pytest.mark.parametrize(("changes", "s"), [(REPLACE, 1), (ADD, 1), (REPLACE, 2), (ADD, 3)])
def test_count_queries_sensitivity(changes: frozenset[str], s: int) -> None:
    rows = _rows(changes, s)
    grid = GridMaxCounts(radius=1.0, tries=5).infer([rows], _Infer())  # type: ignore[arg-type]
    balls = BallCounts(center=Ref("c"), radii=(1.0, 2.0)).infer([rows], _Infer())  # type: ignore[arg-type]
    for inf, m in ((grid, 5), (balls, 2)):
        st = inf.out
        assert st.shape == (m,) and st.float_error == FloatError("exact", rows.domain)
        assert (st.linf.coef, st.l1.coef, st.l2.coef) == (s, m * s, math.sqrt(m) * s)
    assert grid.derivation == f"max cell count of 5 shifted grids, {changes_text(rows)}: linf {grid.out.linf.text()}"
    assert balls.derivation == f"counts within 2 radii, {changes_text(rows)}: linf {balls.out.linf.text()}"
    l1, l2 = (2.0, math.sqrt(2.0)) if changes == REPLACE else (1.0, 1.0)
    cells = CellCounts(radius=1.0, choice=Ref("j")).infer([rows], _Infer())  # type: ignore[arg-type]
    shell = ShellCounts(center=Ref("c"), inner=Ref("r"), outer=Ref("r")).infer([rows], _Infer())  # type: ignore[arg-type]
    for inf, shape in ((cells, ()), (shell, (3,))):
        st = inf.out
        assert st.shape == shape and st.float_error == FloatError("exact", rows.domain)
        assert (st.l1.coef, st.l2.coef, st.linf.coef) == (l1 * s, l2 * s, s)
    assert cells.derivation == f"cell counts of grid j, {changes_text(rows)}: l1 {cells.out.l1.text()}, linf 1"
    assert shell.derivation == f"counts inside / annulus / outside, {changes_text(rows)}: l1 {shell.out.l1.text()}"
