"""``python -m dpflow``: the command-line interface."""

import sys

from dpflow.cli import main

sys.exit(main())
