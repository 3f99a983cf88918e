"""``python -m pytest_rlgate.cli``: the ``rlgate`` command where its script is not on PATH."""

import sys

from . import main

sys.exit(main())
