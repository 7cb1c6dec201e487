"""``python -m promptgrid.matrix.cli``: the same as the ``promptgrid`` command."""

import sys

from promptgrid.matrix.cli import main

sys.exit(main())
