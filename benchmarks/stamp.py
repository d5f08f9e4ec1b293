"""The first line of every committed result: which code it measured and on what.

Every script in ``benchmarks/`` starts its Markdown output with :func:`stamp`, and
``tests/test_results_stamped.py`` checks that every ``benchmarks/results/*.md`` carries one.  A result is
regenerated when the code it measures changes; the stamp says at which commit it was (``+ local changes``
when the dpflow or benchmarks tree differed from that commit, which a committed result should never say).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np

PREFIX = "Generated at commit"
ROOT = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()


def stamp(argv: list[str] | None = None) -> str:
    """``Generated at commit <sha> with numpy <v> ...; command: `python ...```: one Markdown line.

    ``argv`` defaults to the running script's own command line.
    """
    args = sys.argv if argv is None else argv
    sha = _git("rev-parse", "--short=12", "HEAD") or "unknown"
    changed = _git("status", "--porcelain", "--", "dpflow", "benchmarks", ":(exclude)benchmarks/results")
    dirty = " + local changes" if changed else ""
    script = os.path.relpath(os.path.abspath(args[0]), ROOT) if args else "?"
    command = " ".join(["python", script, *args[1:]])
    return (f"{PREFIX} {sha}{dirty} with numpy {np.__version__}, Python {platform.python_version()}, "
            f"{platform.machine()}, {os.cpu_count()} cores (shared); command: `{command}`.")
