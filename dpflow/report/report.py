"""The auditable report of a run and the top-level ``run`` function."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from dpflow.interpreter.run import Execution
from dpflow.planner.ledger import Ledger
from dpflow.report.html import render_html
from dpflow.report.markdown import charges, render_markdown
from dpflow.text import overview_html, overview_text, shorten

REPORT_SCHEMA = "dpflow.report"
REPORT_SCHEMA_VERSION = 5
"""Version 5 embeds a version 5 ledger (the errors predicted before data); version 4 embedded a version 4
ledger (one-sided charges of value pieces); version 3 a version 3 ledger (noise calibrations for the accuracy
section); version 2 a version 2 ledger (typed cost events and exact totals; docs/report_schema.md)."""
REPORT_FILES = ("report.json", "report.md", "report.html")
NOT_FOR_RELEASE = ("NOT FOR RELEASE: this run used seeded noise; its values are reproducible from the seed, "
                   "not private")


def prepare_report_dir(directory: str | Path, create: bool = False) -> Path:
    """Check that a report can be written into ``directory``: it is, or can be made, a writable directory
    holding no earlier report.  Call it before any budget is reserved.  ``create``: make it (and its
    parents); :meth:`Report.write` does, so that a run that fails leaves no empty directory behind.

    Raises an ``OSError`` whose message names the problem and the fix.

    >>> import tempfile, pathlib
    >>> d = prepare_report_dir(pathlib.Path(tempfile.mkdtemp()) / "r")
    >>> d.exists(), prepare_report_dir(d, create=True).is_dir()
    (False, True)
    """
    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise NotADirectoryError(f"report directory {d} is a file, not a directory: choose another path")
    if create:
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise type(e)(f"report directory {d} cannot be created ({e.strerror}): choose a writable path") from e
    earlier = [name for name in REPORT_FILES if os.path.lexists(d / name)]
    if earlier:
        names = earlier[0] if len(earlier) == 1 else f"{', '.join(earlier[:-1])} and {earlier[-1]}"
        raise FileExistsError(f"report directory {d} already holds {names} from an earlier run, "
                              "which is never overwritten: choose a new directory, or move the earlier report "
                              "away")
    home = d.absolute()
    while not home.exists() and home != home.parent:  # the directory the missing ones would be made in
        home = home.parent
    what = "is not writable" if home == d.absolute() else "cannot be created"
    if not home.is_dir():
        raise NotADirectoryError(f"report directory {d} cannot be created ({home} is a file): choose another path")
    try:
        os.rmdir(tempfile.mkdtemp(dir=home, prefix=".dpflow-probe-"))
    except OSError as e:
        raise type(e)(f"report directory {d} {what} ({e.strerror}): choose a writable path") from e
    return d


def _jsonable(x: Any) -> Any:
    """``x`` as strict JSON data: arrays as lists, numpy scalars as numbers, a non-finite float as the string
    ``"nan"``, ``"inf"`` or ``"-inf"`` (strict JSON has no NaN or infinity; a reader sees it, never a parse
    error or a silent number).

    >>> _jsonable([1.0, float("inf"), np.float64("nan")])
    [1.0, 'inf', 'nan']
    """
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.floating, np.integer)):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, (tuple, list)):
        return [_jsonable(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    return x


@attrs.frozen(eq=False, repr=False)
class Report:
    """What was released, under which guarantee, and why it holds.  Holds no private data.  Its ``repr``
    is a short overview (:meth:`overview`); :meth:`to_json` and :meth:`write` hold everything.

    >>> import numpy as np, dpflow as dp
    >>> from dpflow import nodes as N
    >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
    >>> X = b.source("X", dp.Vectors(d=2), n=100)
    >>> res = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))).run(
    ...     {"X": np.zeros((100, 2))}, noise=dp.SeededNoise(0))
    >>> res.report.to_data()["run"]["seeded"]
    True
    """

    ledger: Ledger
    execution: Execution
    budget: dict[str, Any] | None = None

    def to_data(self) -> dict[str, Any]:
        """The report as JSON data."""
        ex = self.execution
        extra = {} if self.budget is None else {"budget": self.budget}
        return extra | {
            "schema": REPORT_SCHEMA,
            "schema_version": REPORT_SCHEMA_VERSION,
            "ledger": self.ledger.to_data(),
            "released": _jsonable(ex.released),
            "run": {
                "noise": ex.noise,
                "seeded": ex.seeded,
                "release_status": "NOT FOR RELEASE (seeded noise)" if ex.seeded else "releasable",
                "backend": ex.backend,
                "backend_settings": _jsonable(ex.settings),
                "noise_scales": _jsonable(ex.facts),
                "outputs": dict(ex.outputs),
            },
        }

    def overview(self) -> list[tuple[str, str]]:
        """The key facts as (label, value) rows: the ledger's (:meth:`dpflow.planner.Ledger.overview`), the
        released outputs with their shapes, the noise source and what the budget store was charged.

        >>> import numpy as np, dpflow as dp
        >>> from dpflow import nodes as N
        >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
        >>> X = b.source("X", dp.Vectors(d=2), n=100)
        >>> res = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))).run(
        ...     {"X": np.zeros((100, 2))}, noise=dp.SeededNoise(0))
        >>> dict(res.report.overview())["released (1)"]
        'm shape (2,)'
        """
        ex = self.execution
        released = ", ".join(f"{shorten(name, 40)} shape {np.shape(v)}" for name, v in sorted(ex.released.items()))
        rows = self.ledger.overview() + [(f"released ({len(ex.released)})", released), ("noise", ex.noise)]
        return rows + ([] if self.budget is None else [("charged", charges(self.budget))])

    def __repr__(self) -> str:
        return overview_text("Report", self.overview())

    def _repr_html_(self) -> str:
        return overview_html("Report", self.overview())

    def summary(self) -> str:
        """The ledger's summary (costs, totals and accuracy warnings) and the run's noise source.

        >>> import numpy as np, dpflow as dp
        >>> from dpflow import nodes as N
        >>> b = dp.PlanBuilder(budget=dp.ZCDP(0.5))
        >>> X = b.source("X", dp.Vectors(d=2), n=100)
        >>> res = b.build(m=N.GaussianMech()(N.Mean()(N.Clip(radius=1.0)(X)))).run(
        ...     {"X": np.zeros((100, 2))}, noise=dp.SeededNoise(0))
        >>> res.report.summary().splitlines()[-1].endswith("NOT FOR RELEASE")
        True
        """
        return f"{self.ledger.summary()}\nrun: noise {self.execution.noise}"

    def to_json(self, indent: int | None = 2) -> str:
        """JSON text (sorted keys)."""
        return json.dumps(self.to_data(), sort_keys=True, indent=indent, allow_nan=False)

    def to_markdown(self) -> str:
        """A readable page."""
        return render_markdown(self.to_data())

    def to_html(self) -> str:
        """A self-contained HTML page (inline CSS and SVG, no network): values with error bars, the budget
        split, the composition and every derivation."""
        return render_html(self.to_data())

    def write(self, directory: str | Path) -> list[Path]:
        """Write ``report.json``, ``report.md`` and ``report.html`` into ``directory``; return the paths.

        Each file appears complete or not at all (written to a temporary file, synced, then linked
        into place); an earlier report is never overwritten (``FileExistsError``, nothing written).
        """
        d = prepare_report_dir(directory, create=True)
        texts = (self.to_json() + "\n", self.to_markdown(), self.to_html())
        temps: list[str] = []
        try:
            for name, text in zip(REPORT_FILES, texts, strict=True):
                fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{name}.", suffix=".tmp")
                temps.append(tmp)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(text)
                    f.flush()
                    os.fsync(f.fileno())
            paths = [d / name for name in REPORT_FILES]
            for tmp, path in zip(temps, paths, strict=True):
                os.link(tmp, path)  # atomic, and fails rather than replace an existing file
        except FileExistsError as e:
            raise FileExistsError(f"report directory {d} got a report from another run meanwhile ({e.filename}); "
                                  "it is never overwritten: choose a new directory") from e
        finally:
            for tmp in temps:
                os.unlink(tmp)
        return paths
