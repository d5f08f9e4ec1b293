"""The ``dpflow`` console script.

Importing dpflow takes seconds on a busy machine; this module (which imports nothing of dpflow before
its Ctrl-C handling is in place) lets a Ctrl-C then end the command with one line and status 130, as
:func:`dpflow.cli.main` does later, instead of a traceback.
"""

from __future__ import annotations

import sys


def main() -> int:
    """Import :mod:`dpflow.cli` and run its ``main``."""
    try:
        from dpflow.cli import main as cli_main
    except KeyboardInterrupt:
        print("dpflow: interrupted", file=sys.stderr)
        return 130
    return cli_main()
