"""Every committed benchmark result says which code it measured: a stamp written by ``benchmarks/stamp.py``
("Generated at commit <sha> with numpy <v> ...") or, for a result not regenerated after the code it measures
changed, an explicit "Not regenerated since commit <sha>" line with the command that regenerates it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
STAMP = re.compile(r"^Generated at commit [0-9a-f]{12} with numpy \S+, Python \S+, .*; command: `python benchmarks/"
                   r"\w+\.py[^`]*`\.$")
STALE = re.compile(r"^Not regenerated since commit [0-9a-f]{7,12} \(numpy \S+\): .+; regenerate with `python "
                   r"benchmarks/\w+\.py[^`]*`\.$")


@pytest.mark.parametrize("path", sorted(RESULTS.glob("*.md")), ids=lambda p: p.name)
def test_every_result_is_stamped(path: Path) -> None:
    head = path.read_text().splitlines()[:8]
    stamps = [line for line in head if STAMP.match(line) or STALE.match(line)]
    assert stamps, f"{path.name}: no stamp in its first lines (regenerate it: benchmarks/stamp.py)"
    assert "+ local changes" not in stamps[0], f"{path.name} measured uncommitted code"


def test_the_stamp_format_is_what_the_scripts_write() -> None:
    import sys

    sys.path.insert(0, str(RESULTS.parent))
    from stamp import stamp

    line = stamp(["benchmarks/noise.py", "--large"])
    assert STAMP.match(line.replace(" + local changes", "")), line
