"""``fair-forge-beam rollup --from 'audits/2026-12-0*' --output week49``: merge the stored statistics
of earlier audits (:mod:`fair_forge_beam.rollup`)."""
from __future__ import annotations

if __name__ == "__main__":  # the command is the process: an interrupt while it still imports is one line
    from fair_forge_beam.console import starting

    starting("fair-forge-beam rollup")

import sys

from fair_forge_beam.rollup import main

if __name__ == "__main__":
    from fair_forge_beam.console import entry_point

    sys.exit(entry_point(main, "rollup"))
