"""The import graph of ``dpflow`` (issue 13): no cycle, and every import points down the layers of
docs/ARCHITECTURE (privacy at the bottom; nodes; plan; planner; interpreter; report; api; CLI on top).

Imports inside functions count (a lazy import is still a dependency); imports under
``if TYPE_CHECKING:`` do not (they are annotations only).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1] / "dpflow"


def _modules() -> dict[str, Path]:
    mods = {}
    for p in ROOT.rglob("*.py"):
        parts = list(p.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


class _Imports(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        t = node.test
        if (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
                isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"):
            for n in node.orelse:
                self.visit(n)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.name.split(".")[0] == "dpflow" and (r := _resolve(a.name)):
                self.found.add(r)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module and node.module.split(".")[0] == "dpflow":
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if r := _resolve(full if full in MODULES else node.module):
                    self.found.add(r)


def import_graph() -> nx.DiGraph:
    g = nx.DiGraph()
    for mod, path in MODULES.items():
        v = _Imports()
        v.visit(ast.parse(path.read_text()))
        g.add_node(mod)
        g.add_edges_from((mod, dep) for dep in v.found if dep != mod)
    return g


def test_the_import_graph_has_no_cycle() -> None:
    cycles = [sorted(c) for c in nx.strongly_connected_components(import_graph()) if len(c) > 1]
    assert cycles == []


# What each layer may not import (anything above it).
FORBIDDEN = {
    "dpflow.privacy": ("dpflow.domains", "dpflow.nodes", "dpflow.plan", "dpflow.planner", "dpflow.interpreter",
                       "dpflow.report", "dpflow.api", "dpflow.budget", "dpflow.estimators", "dpflow.cli"),
    "dpflow.nodes": ("dpflow.plan.graph", "dpflow.planner", "dpflow.interpreter", "dpflow.report", "dpflow.api",
                     "dpflow.budget", "dpflow.estimators", "dpflow.cli"),
    "dpflow.plan": ("dpflow.planner", "dpflow.interpreter", "dpflow.report", "dpflow.api", "dpflow.budget",
                    "dpflow.estimators", "dpflow.cli"),
    "dpflow.planner": ("dpflow.interpreter", "dpflow.report", "dpflow.api", "dpflow.budget", "dpflow.estimators",
                       "dpflow.cli"),
    "dpflow.interpreter": ("dpflow.report", "dpflow.api", "dpflow.budget", "dpflow.estimators", "dpflow.cli"),
    "dpflow.report": ("dpflow.api", "dpflow.estimators", "dpflow.cli"),
    "dpflow.api": ("dpflow.estimators", "dpflow.cli"),
}


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_imports_point_down_the_layers(layer: str) -> None:
    g = import_graph()
    bad = sorted((m, dep) for m, dep in g.edges
                 if (m == layer or m.startswith(layer + ".")) and dep.startswith(FORBIDDEN[layer]))
    assert bad == []


def test_the_checker_sees_lazy_imports_and_ignores_type_checking_ones() -> None:
    v = _Imports()
    v.visit(ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import dpflow.api\n"
                      "def f():\n    from dpflow.planner.certify import certify\n"))
    assert v.found == {"dpflow.planner.certify"}


#: Heavy packages that ``import dpflow`` must not load (issue 30): each is imported inside the function that
#: uses it (PLD numerics, calibration, the mixture and heavy-tailed estimators, the CLI's CSV reader, the dask
#: backend, ``Plan.graph``, a budget store's sqlite3), and ``dp.stats`` / ``dp.estimators`` on first use.
NOT_AT_IMPORT = ("dp_accounting", "scipy", "pandas", "dask", "distributed", "networkx", "sklearn", "pyarrow",
                 "sqlite3", "dpflow.budget", "dpflow.estimators", "dpflow.stats")


def test_import_dpflow_loads_no_heavy_package() -> None:
    code = ("import sys, dpflow\n"
            f"print(sorted(m for m in sys.modules if m.startswith({tuple(p + '.' for p in NOT_AT_IMPORT)!r})\n"
            f"             or m in {NOT_AT_IMPORT!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT.parent).stdout
    assert out.strip() == "[]"


def test_the_lazy_subpackages_load_on_first_use() -> None:
    code = "import dpflow as dp\nprint(dp.stats.mean.__module__, dp.estimators.clipped_mean.__module__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT.parent).stdout
    assert out.split() == ["dpflow.stats", "dpflow.estimators.mean"]
